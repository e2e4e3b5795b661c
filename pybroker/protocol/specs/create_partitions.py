"""CreatePartitions (key 37): raise a topic's partition count, optionally with assignments."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(37, "CreatePartitions", "0-3", "2+", [
    field("Topics", "[]CreatePartitionsTopic", "0+", fields=[
        field("Name", "string", "0+", map_key=True),
        field("Count", "int32", "0+"),
        field("Assignments", "[]CreatePartitionsAssignment", "0+", nullable="0+", fields=[
            field("BrokerIds", "[]int32", "0+"),
        ]),
    ]),
    field("TimeoutMs", "int32", "0+"),
    field("ValidateOnly", "bool", "0+"),
])

RESPONSE = response(37, "CreatePartitions", "0-3", "2+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("Results", "[]CreatePartitionsTopicResult", "0+", fields=[
        field("Name", "string", "0+"),
        field("ErrorCode", "int16", "0+"),
        field("ErrorMessage", "string", "0+", nullable="0+", default=None),
    ]),
])
