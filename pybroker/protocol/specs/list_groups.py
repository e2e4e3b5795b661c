"""ListGroups (key 16): the groups this coordinator knows, optionally filtered by state/type."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(16, "ListGroups", "0-5", "3+", [
    field("StatesFilter", "[]string", "4+"),
    field("TypesFilter", "[]string", "5+"),
])

RESPONSE = response(16, "ListGroups", "0-5", "3+", [
    field("ThrottleTimeMs", "int32", "1+", ignorable=True),
    field("ErrorCode", "int16", "0+"),
    field("Groups", "[]ListedGroup", "0+", fields=[
        field("GroupId", "string", "0+"),
        field("ProtocolType", "string", "0+"),
        field("GroupState", "string", "4+", ignorable=True),
        field("GroupType", "string", "5+", ignorable=True),
    ]),
])
