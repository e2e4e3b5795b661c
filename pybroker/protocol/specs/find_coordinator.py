"""FindCoordinator (key 10): which broker coordinates a group (key type 0) or transaction (1).

v0-3 ask for one key; v4+ batch several keys (``coordinator_keys``) and answer per key.
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(10, "FindCoordinator", "0-4", "3+", [
    field("Key", "string", "0-3"),
    field("KeyType", "int8", "1+", default=0),
    field("CoordinatorKeys", "[]string", "4+"),
])

RESPONSE = response(10, "FindCoordinator", "0-4", "3+", [
    field("ThrottleTimeMs", "int32", "1+", ignorable=True),
    field("ErrorCode", "int16", "0-3"),
    field("ErrorMessage", "string", "1-3", nullable="1-3", ignorable=True),
    field("NodeId", "int32", "0-3"),
    field("Host", "string", "0-3"),
    field("Port", "int32", "0-3"),
    field("Coordinators", "[]Coordinator", "4+", fields=[
        field("Key", "string", "4+"),
        field("NodeId", "int32", "4+"),
        field("Host", "string", "4+"),
        field("Port", "int32", "4+"),
        field("ErrorCode", "int16", "4+"),
        field("ErrorMessage", "string", "4+", nullable="4+", ignorable=True),
    ]),
])
