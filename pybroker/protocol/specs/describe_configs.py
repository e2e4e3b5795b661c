"""DescribeConfigs (key 32): read topic / broker configuration entries (with synonyms from v1)."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(32, "DescribeConfigs", "0-4", "4+", [
    field("Resources", "[]DescribeConfigsResource", "0+", fields=[
        field("ResourceType", "int8", "0+"),
        field("ResourceName", "string", "0+"),
        field("ConfigurationKeys", "[]string", "0+", nullable="0+"),
    ]),
    field("IncludeSynonyms", "bool", "1+", default=False),
    field("IncludeDocumentation", "bool", "3+", default=False),
])

RESPONSE = response(32, "DescribeConfigs", "0-4", "4+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("Results", "[]DescribeConfigsResult", "0+", fields=[
        field("ErrorCode", "int16", "0+"),
        field("ErrorMessage", "string", "0+", nullable="0+"),
        field("ResourceType", "int8", "0+"),
        field("ResourceName", "string", "0+"),
        field("Configs", "[]DescribeConfigsResourceResult", "0+", fields=[
            field("Name", "string", "0+"),
            field("Value", "string", "0+", nullable="0+"),
            field("ReadOnly", "bool", "0+"),
            field("IsDefault", "bool", "0"),
            field("ConfigSource", "int8", "1+", default=-1, ignorable=True),
            field("IsSensitive", "bool", "0+"),
            field("Synonyms", "[]DescribeConfigsSynonym", "1+", ignorable=True, fields=[
                field("Name", "string", "1+"),
                field("Value", "string", "1+", nullable="0+"),
                field("Source", "int8", "1+"),
            ]),
            field("ConfigType", "int8", "3+", default=0, ignorable=True),
            field("Documentation", "string", "3+", nullable="0+", ignorable=True),
        ]),
    ]),
])
