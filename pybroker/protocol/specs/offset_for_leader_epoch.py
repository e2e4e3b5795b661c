"""OffsetForLeaderEpoch (key 23): the end offset of a leader epoch (log truncation after failover)."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(23, "OffsetForLeaderEpoch", "0-4", "4+", [
    field("ReplicaId", "int32", "3+", default=-2, ignorable=True),
    field("Topics", "[]OffsetForLeaderTopic", "0+", fields=[
        field("Topic", "string", "0+", map_key=True),
        field("Partitions", "[]OffsetForLeaderPartition", "0+", fields=[
            field("Partition", "int32", "0+"),
            field("CurrentLeaderEpoch", "int32", "2+", default=-1, ignorable=True),
            field("LeaderEpoch", "int32", "0+"),
        ]),
    ]),
])

RESPONSE = response(23, "OffsetForLeaderEpoch", "0-4", "4+", [
    field("ThrottleTimeMs", "int32", "2+", ignorable=True),
    field("Topics", "[]OffsetForLeaderTopicResult", "0+", fields=[
        field("Topic", "string", "0+", map_key=True),
        field("Partitions", "[]EpochEndOffset", "0+", fields=[
            field("ErrorCode", "int16", "0+"),
            field("Partition", "int32", "0+"),
            field("LeaderEpoch", "int32", "1+", default=-1, ignorable=True),
            field("EndOffset", "int64", "0+", default=-1),
        ]),
    ]),
])
