"""SaslHandshake (key 17): pick a SASL mechanism; the response lists the enabled ones."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(17, "SaslHandshake", "0-1", "none", [
    field("Mechanism", "string", "0+"),
])

RESPONSE = response(17, "SaslHandshake", "0-1", "none", [
    field("ErrorCode", "int16", "0+"),
    field("Mechanisms", "[]string", "0+"),
])
