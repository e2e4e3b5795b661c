"""DeleteGroups (key 42): delete empty consumer groups and their committed offsets."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(42, "DeleteGroups", "0-2", "2+", [
    field("GroupsNames", "[]string", "0+"),
])

RESPONSE = response(42, "DeleteGroups", "0-2", "2+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("Results", "[]DeletableGroupResult", "0+", fields=[
        field("GroupId", "string", "0+", map_key=True),
        field("ErrorCode", "int16", "0+"),
    ]),
])
