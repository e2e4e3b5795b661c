"""CreateAcls (key 30): add ACL bindings (a resource pattern and an access control entry each).

Supported: v0-3 (v1 adds the pattern type, LITERAL before; v2 is flexible; v3 adds the USER
resource type). One result per creation, in request order.
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(30, "CreateAcls", "0-3", "2+", [
    field("Creations", "[]AclCreation", "0+", fields=[
        field("ResourceType", "int8", "0+"),
        field("ResourceName", "string", "0+"),
        field("ResourcePatternType", "int8", "1+", default=3),
        field("Principal", "string", "0+"),
        field("Host", "string", "0+"),
        field("Operation", "int8", "0+"),
        field("PermissionType", "int8", "0+"),
    ]),
])

RESPONSE = response(30, "CreateAcls", "0-3", "2+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("Results", "[]AclCreationResult", "0+", fields=[
        field("ErrorCode", "int16", "0+"),
        field("ErrorMessage", "string", "0+", nullable="0+"),
    ]),
])
