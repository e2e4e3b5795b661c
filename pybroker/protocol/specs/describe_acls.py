"""DescribeAcls (key 29): list the ACL bindings that match a filter.

The filter is a resource pattern filter (type, name or null, pattern type ANY/MATCH/LITERAL/
PREFIXED from v1; v0 knows only LITERAL) and an entry filter (principal, host, operation,
permission). The answer groups the matching ACLs by resource pattern.

Supported: v0-3 (v1 adds the pattern type, v2 is flexible, v3 adds the USER resource type).
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(29, "DescribeAcls", "0-3", "2+", [
    field("ResourceTypeFilter", "int8", "0+"),
    field("ResourceNameFilter", "string", "0+", nullable="0+"),
    field("PatternTypeFilter", "int8", "1+", default=3),
    field("PrincipalFilter", "string", "0+", nullable="0+"),
    field("HostFilter", "string", "0+", nullable="0+"),
    field("Operation", "int8", "0+"),
    field("PermissionType", "int8", "0+"),
])

RESPONSE = response(29, "DescribeAcls", "0-3", "2+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("ErrorCode", "int16", "0+"),
    field("ErrorMessage", "string", "0+", nullable="0+"),
    field("Resources", "[]DescribeAclsResource", "0+", fields=[
        field("ResourceType", "int8", "0+"),
        field("ResourceName", "string", "0+"),
        field("PatternType", "int8", "1+", default=3),
        field("Acls", "[]AclDescription", "0+", fields=[
            field("Principal", "string", "0+"),
            field("Host", "string", "0+"),
            field("Operation", "int8", "0+"),
            field("PermissionType", "int8", "0+"),
        ]),
    ]),
])
