"""DescribeGroups (key 15): state, protocol and members (with their metadata) of groups."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(15, "DescribeGroups", "0-5", "5+", [
    field("Groups", "[]string", "0+"),
    field("IncludeAuthorizedOperations", "bool", "3+"),
])

RESPONSE = response(15, "DescribeGroups", "0-5", "5+", [
    field("ThrottleTimeMs", "int32", "1+", ignorable=True),
    field("Groups", "[]DescribedGroup", "0+", fields=[
        field("ErrorCode", "int16", "0+"),
        field("GroupId", "string", "0+"),
        field("GroupState", "string", "0+"),
        field("ProtocolType", "string", "0+"),
        field("ProtocolData", "string", "0+"),
        field("Members", "[]DescribedGroupMember", "0+", fields=[
            field("MemberId", "string", "0+"),
            field("GroupInstanceId", "string", "4+", nullable="4+", default=None, ignorable=True),
            field("ClientId", "string", "0+"),
            field("ClientHost", "string", "0+"),
            field("MemberMetadata", "bytes", "0+"),
            field("MemberAssignment", "bytes", "0+"),
        ]),
        field("AuthorizedOperations", "int32", "3+", default=-2147483648),
    ]),
])
