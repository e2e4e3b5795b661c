"""LeaveGroup (key 13): one member (v0-2) or a batch of members (v3+) leave a group."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(13, "LeaveGroup", "0-5", "4+", [
    field("GroupId", "string", "0+"),
    field("MemberId", "string", "0-2"),
    field("Members", "[]MemberIdentity", "3+", fields=[
        field("MemberId", "string", "3+"),
        field("GroupInstanceId", "string", "3+", nullable="3+", default=None),
        field("Reason", "string", "5+", nullable="5+", default=None, ignorable=True),
    ]),
])

RESPONSE = response(13, "LeaveGroup", "0-5", "4+", [
    field("ThrottleTimeMs", "int32", "1+", ignorable=True),
    field("ErrorCode", "int16", "0+"),
    field("Members", "[]MemberResponse", "3+", fields=[
        field("MemberId", "string", "3+"),
        field("GroupInstanceId", "string", "3+", nullable="3+"),
        field("ErrorCode", "int16", "3+"),
    ]),
])
