"""JoinGroup (key 11): a member joins a classic consumer group; the leader gets all members."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(11, "JoinGroup", "0-7", "6+", [
    field("GroupId", "string", "0+"),
    field("SessionTimeoutMs", "int32", "0+"),
    field("RebalanceTimeoutMs", "int32", "1+", default=-1, ignorable=True),
    field("MemberId", "string", "0+"),
    field("GroupInstanceId", "string", "5+", nullable="5+", default=None),
    field("ProtocolType", "string", "0+"),
    field("Protocols", "[]JoinGroupRequestProtocol", "0+", fields=[
        field("Name", "string", "0+", map_key=True),
        field("Metadata", "bytes", "0+"),
    ]),
    field("Reason", "string", "8+", nullable="8+", default=None, ignorable=True),
])

RESPONSE = response(11, "JoinGroup", "0-7", "6+", [
    field("ThrottleTimeMs", "int32", "2+", ignorable=True),
    field("ErrorCode", "int16", "0+"),
    field("GenerationId", "int32", "0+", default=-1),
    field("ProtocolType", "string", "7+", nullable="7+", default=None, ignorable=True),
    field("ProtocolName", "string", "0+", nullable="7+"),
    field("Leader", "string", "0+"),
    field("SkipAssignment", "bool", "9+", default=False),
    field("MemberId", "string", "0+"),
    field("Members", "[]JoinGroupResponseMember", "0+", fields=[
        field("MemberId", "string", "0+"),
        field("GroupInstanceId", "string", "5+", nullable="5+", default=None, ignorable=True),
        field("Metadata", "bytes", "0+"),
    ]),
])
