"""ApiVersions (key 18): the client asks which API versions the broker speaks.

Flexible from v3, but the *response header* is always v0 (the codec special-cases that), so a
client that sent a version the broker does not know can still read the error code.
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(18, "ApiVersions", "0-4", "3+", [
    field("ClientSoftwareName", "string", "3+", ignorable=True),
    field("ClientSoftwareVersion", "string", "3+", ignorable=True),
])

RESPONSE = response(18, "ApiVersions", "0-4", "3+", [
    field("ErrorCode", "int16", "0+"),
    field("ApiKeys", "[]ApiVersion", "0+", fields=[
        field("ApiKey", "int16", "0+", map_key=True),
        field("MinVersion", "int16", "0+"),
        field("MaxVersion", "int16", "0+"),
    ]),
    field("ThrottleTimeMs", "int32", "1+", ignorable=True),
    field("SupportedFeatures", "[]SupportedFeatureKey", "3+", tagged="3+", tag=0,
          ignorable=True, fields=[
              field("Name", "string", "3+", map_key=True),
              field("MinVersion", "int16", "3+"),
              field("MaxVersion", "int16", "3+"),
          ]),
    field("FinalizedFeaturesEpoch", "int64", "3+", tagged="3+", tag=1, default=-1,
          ignorable=True),
    field("FinalizedFeatures", "[]FinalizedFeatureKey", "3+", tagged="3+", tag=2,
          ignorable=True, fields=[
              field("Name", "string", "3+", map_key=True),
              field("MaxVersionLevel", "int16", "3+"),
              field("MinVersionLevel", "int16", "3+"),
          ]),
    field("ZkMigrationReady", "bool", "3+", tagged="3+", tag=3, default=False, ignorable=True),
])
