"""Heartbeat (key 12): a group member tells the coordinator it is alive."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(12, "Heartbeat", "0-4", "4+", [
    field("GroupId", "string", "0+"),
    field("GenerationId", "int32", "0+"),
    field("MemberId", "string", "0+"),
    field("GroupInstanceId", "string", "3+", nullable="3+", default=None),
])

RESPONSE = response(12, "Heartbeat", "0-4", "4+", [
    field("ThrottleTimeMs", "int32", "1+", ignorable=True),
    field("ErrorCode", "int16", "0+"),
])
