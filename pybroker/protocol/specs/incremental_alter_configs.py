"""IncrementalAlterConfigs (key 44): SET / DELETE / APPEND / SUBTRACT individual config entries."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(44, "IncrementalAlterConfigs", "0-1", "1+", [
    field("Resources", "[]AlterConfigsResource", "0+", fields=[
        field("ResourceType", "int8", "0+", map_key=True),
        field("ResourceName", "string", "0+", map_key=True),
        field("Configs", "[]AlterableConfig", "0+", fields=[
            field("Name", "string", "0+", map_key=True),
            field("ConfigOperation", "int8", "0+", map_key=True),
            field("Value", "string", "0+", nullable="0+"),
        ]),
    ]),
    field("ValidateOnly", "bool", "0+"),
])

RESPONSE = response(44, "IncrementalAlterConfigs", "0-1", "1+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("Responses", "[]AlterConfigsResourceResponse", "0+", fields=[
        field("ErrorCode", "int16", "0+"),
        field("ErrorMessage", "string", "0+", nullable="0+"),
        field("ResourceType", "int8", "0+"),
        field("ResourceName", "string", "0+"),
    ]),
])
