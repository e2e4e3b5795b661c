"""DescribeClientQuotas (key 48): an administrator reads the client quotas (KIP-546).

The request is a filter: components, each on an entity type (``user``, ``client-id``, ``ip``)
matching an exact name (``MatchType`` 0), the type's default (1) or any name (2); ``Strict``
leaves out entities that have a type the components do not name. The response lists every
matching entity (its entity types and names, a null name for a default) with its quota values.

Supported: v0-1 (v1 is flexible).
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(48, "DescribeClientQuotas", "0-1", "1+", [
    field("Components", "[]ComponentData", "0+", fields=[
        field("EntityType", "string", "0+"),
        field("MatchType", "int8", "0+"),
        field("Match", "string", "0+", nullable="0+"),
    ]),
    field("Strict", "bool", "0+"),
])

RESPONSE = response(48, "DescribeClientQuotas", "0-1", "1+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("ErrorCode", "int16", "0+"),
    field("ErrorMessage", "string", "0+", nullable="0+"),
    field("Entries", "[]EntryData", "0+", nullable="0+", fields=[
        field("Entity", "[]EntityData", "0+", fields=[
            field("EntityType", "string", "0+"),
            field("EntityName", "string", "0+", nullable="0+"),
        ]),
        field("Values", "[]ValueData", "0+", fields=[
            field("Key", "string", "0+"),
            field("Value", "float64", "0+"),
        ]),
    ]),
])
