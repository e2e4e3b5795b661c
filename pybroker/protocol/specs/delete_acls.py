"""DeleteAcls (key 31): remove every ACL binding that matches each filter.

Supported: v0-3 (v1 adds the pattern type; v2 is flexible; v3 adds the USER resource type). One
result per filter, listing the bindings it deleted.
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(31, "DeleteAcls", "0-3", "2+", [
    field("Filters", "[]DeleteAclsFilter", "0+", fields=[
        field("ResourceTypeFilter", "int8", "0+"),
        field("ResourceNameFilter", "string", "0+", nullable="0+"),
        field("PatternTypeFilter", "int8", "1+", default=3),
        field("PrincipalFilter", "string", "0+", nullable="0+"),
        field("HostFilter", "string", "0+", nullable="0+"),
        field("Operation", "int8", "0+"),
        field("PermissionType", "int8", "0+"),
    ]),
])

RESPONSE = response(31, "DeleteAcls", "0-3", "2+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("FilterResults", "[]DeleteAclsFilterResult", "0+", fields=[
        field("ErrorCode", "int16", "0+"),
        field("ErrorMessage", "string", "0+", nullable="0+"),
        field("MatchingAcls", "[]DeleteAclsMatchingAcl", "0+", fields=[
            field("ErrorCode", "int16", "0+"),
            field("ErrorMessage", "string", "0+", nullable="0+"),
            field("ResourceType", "int8", "0+"),
            field("ResourceName", "string", "0+"),
            field("PatternType", "int8", "1+", default=3),
            field("Principal", "string", "0+"),
            field("Host", "string", "0+"),
            field("Operation", "int8", "0+"),
            field("PermissionType", "int8", "0+"),
        ]),
    ]),
])
