"""AlterClientQuotas (key 49): an administrator sets or removes client quotas (KIP-546).

Each entry names an entity (``user`` and/or ``client-id``, or ``ip``; a null name is the type's
default) and operations on its quota keys (``producer_byte_rate``, ``consumer_byte_rate``,
``request_percentage``, ...): set ``Value``, or ``Remove``. ``ValidateOnly`` checks without
storing. The response has an error per entity.

Supported: v0-1 (v1 is flexible).
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(49, "AlterClientQuotas", "0-1", "1+", [
    field("Entries", "[]EntryData", "0+", fields=[
        field("Entity", "[]EntityData", "0+", fields=[
            field("EntityType", "string", "0+"),
            field("EntityName", "string", "0+", nullable="0+"),
        ]),
        field("Ops", "[]OpData", "0+", fields=[
            field("Key", "string", "0+"),
            field("Value", "float64", "0+"),
            field("Remove", "bool", "0+"),
        ]),
    ]),
    field("ValidateOnly", "bool", "0+"),
])

RESPONSE = response(49, "AlterClientQuotas", "0-1", "1+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("Entries", "[]EntryData", "0+", fields=[
        field("ErrorCode", "int16", "0+"),
        field("ErrorMessage", "string", "0+", nullable="0+"),
        field("Entity", "[]EntityData", "0+", fields=[
            field("EntityType", "string", "0+"),
            field("EntityName", "string", "0+", nullable="0+"),
        ]),
    ]),
])
