"""SyncGroup (key 14): the leader hands out assignments; every member receives its own."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(14, "SyncGroup", "0-5", "4+", [
    field("GroupId", "string", "0+"),
    field("GenerationId", "int32", "0+"),
    field("MemberId", "string", "0+"),
    field("GroupInstanceId", "string", "3+", nullable="3+", default=None),
    field("ProtocolType", "string", "5+", nullable="5+", default=None, ignorable=True),
    field("ProtocolName", "string", "5+", nullable="5+", default=None, ignorable=True),
    field("Assignments", "[]SyncGroupRequestAssignment", "0+", fields=[
        field("MemberId", "string", "0+"),
        field("Assignment", "bytes", "0+"),
    ]),
])

RESPONSE = response(14, "SyncGroup", "0-5", "4+", [
    field("ThrottleTimeMs", "int32", "1+", ignorable=True),
    field("ErrorCode", "int16", "0+"),
    field("ProtocolType", "string", "5+", nullable="5+", default=None, ignorable=True),
    field("ProtocolName", "string", "5+", nullable="5+", default=None, ignorable=True),
    field("Assignment", "bytes", "0+"),
])
