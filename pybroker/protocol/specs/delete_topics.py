"""DeleteTopics (key 20): delete topics by name (v0-5) or by name/topic id (v6+)."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(20, "DeleteTopics", "0-6", "4+", [
    field("Topics", "[]DeleteTopicState", "6+", fields=[
        field("Name", "string", "6+", nullable="6+", default=None),
        field("TopicId", "uuid", "6+"),
    ]),
    field("TopicNames", "[]string", "0-5", ignorable=True),
    field("TimeoutMs", "int32", "0+"),
])

RESPONSE = response(20, "DeleteTopics", "0-6", "4+", [
    field("ThrottleTimeMs", "int32", "1+", ignorable=True),
    field("Responses", "[]DeletableTopicResult", "0+", fields=[
        field("Name", "string", "0+", nullable="6+", map_key=True),
        field("TopicId", "uuid", "6+", ignorable=True),
        field("ErrorCode", "int16", "0+"),
        field("ErrorMessage", "string", "5+", nullable="5+", default=None, ignorable=True),
    ]),
])
