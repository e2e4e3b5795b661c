"""OffsetDelete (key 47): delete a group's committed offsets for some partitions."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(47, "OffsetDelete", "0", "none", [
    field("GroupId", "string", "0+"),
    field("Topics", "[]OffsetDeleteRequestTopic", "0+", fields=[
        field("Name", "string", "0+", map_key=True),
        field("Partitions", "[]OffsetDeleteRequestPartition", "0+", fields=[
            field("PartitionIndex", "int32", "0+"),
        ]),
    ]),
])

RESPONSE = response(47, "OffsetDelete", "0", "none", [
    field("ErrorCode", "int16", "0+"),
    field("ThrottleTimeMs", "int32", "0+", ignorable=True),
    field("Topics", "[]OffsetDeleteResponseTopic", "0+", fields=[
        field("Name", "string", "0+", map_key=True),
        field("Partitions", "[]OffsetDeleteResponsePartition", "0+", fields=[
            field("PartitionIndex", "int32", "0+", map_key=True),
            field("ErrorCode", "int16", "0+"),
        ]),
    ]),
])
