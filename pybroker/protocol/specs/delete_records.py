"""DeleteRecords (key 21): advance partitions' log start offsets (delete records before an offset).

v3 is KIP-1343 (proposed, not yet in Kafka): the request gains ``LeaderOnly`` (answer once the
leader has truncated, without waiting for followers) and each partition result gains
``LeaderLogStartOffset``. Following the project's KIP notes, v3 stays in the same flexible range
(2+), both fields are regular (not tagged) fields, ``LeaderOnly`` is not ignorable, and
``LeaderLogStartOffset`` defaults to -1 ("unknown", what readers of v0-v2 see).
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(21, "DeleteRecords", "0-3", "2+", [
    field("Topics", "[]DeleteRecordsTopic", "0+", fields=[
        field("Name", "string", "0+"),
        field("Partitions", "[]DeleteRecordsPartition", "0+", fields=[
            field("PartitionIndex", "int32", "0+"),
            field("Offset", "int64", "0+"),
        ]),
    ]),
    field("TimeoutMs", "int32", "0+"),
    field("LeaderOnly", "bool", "3+", default=False),
])

RESPONSE = response(21, "DeleteRecords", "0-3", "2+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("Topics", "[]DeleteRecordsTopicResult", "0+", fields=[
        field("Name", "string", "0+", map_key=True),
        field("Partitions", "[]DeleteRecordsPartitionResult", "0+", fields=[
            field("PartitionIndex", "int32", "0+", map_key=True),
            field("LowWatermark", "int64", "0+"),
            field("LeaderLogStartOffset", "int64", "3+", default=-1),
            field("ErrorCode", "int16", "0+"),
        ]),
    ]),
])
