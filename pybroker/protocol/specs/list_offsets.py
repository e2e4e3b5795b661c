"""ListOffsets (key 2): find the offset for a timestamp (or earliest / latest / max timestamp)."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(2, "ListOffsets", "0-7", "6+", [
    field("ReplicaId", "int32", "0+"),
    field("IsolationLevel", "int8", "2+"),
    field("Topics", "[]ListOffsetsTopic", "0+", fields=[
        field("Name", "string", "0+"),
        field("Partitions", "[]ListOffsetsPartition", "0+", fields=[
            field("PartitionIndex", "int32", "0+"),
            field("CurrentLeaderEpoch", "int32", "4+", default=-1, ignorable=True),
            field("Timestamp", "int64", "0+"),
            field("MaxNumOffsets", "int32", "0", default=1),
        ]),
    ]),
    field("TimeoutMs", "int32", "10+", ignorable=True),
])

RESPONSE = response(2, "ListOffsets", "0-7", "6+", [
    field("ThrottleTimeMs", "int32", "2+", ignorable=True),
    field("Topics", "[]ListOffsetsTopicResponse", "0+", fields=[
        field("Name", "string", "0+"),
        field("Partitions", "[]ListOffsetsPartitionResponse", "0+", fields=[
            field("PartitionIndex", "int32", "0+"),
            field("ErrorCode", "int16", "0+"),
            field("OldStyleOffsets", "[]int64", "0"),
            field("Timestamp", "int64", "1+", default=-1),
            field("Offset", "int64", "1+", default=-1),
            field("LeaderEpoch", "int32", "4+", default=-1),
        ]),
    ]),
])
