"""SaslAuthenticate (key 36): one round of SASL authentication bytes (after SaslHandshake v1)."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(36, "SaslAuthenticate", "0-2", "2+", [
    field("AuthBytes", "bytes", "0+"),
])

RESPONSE = response(36, "SaslAuthenticate", "0-2", "2+", [
    field("ErrorCode", "int16", "0+"),
    field("ErrorMessage", "string", "0+", nullable="0+"),
    field("AuthBytes", "bytes", "0+"),
    field("SessionLifetimeMs", "int64", "1+", default=0, ignorable=True),
])
