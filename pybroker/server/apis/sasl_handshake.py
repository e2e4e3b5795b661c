"""SaslHandshake (17) reaching the handlers: on a connection already authenticated, or on a
PLAINTEXT or SSL listener. Before authentication on a SASL listener the connection's authenticator
(``pybroker.network.sasl_authenticator``) takes it instead. As Kafka's ``KafkaApis`` answers it:
ILLEGAL_SASL_STATE and no mechanisms; the connection stays open."""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import SaslHandshakeRequest, SaslHandshakeResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.SASL_HANDSHAKE
VERSIONS = (0, 1)
AUTHORIZES: frozenset[tuple[AclOperation, ResourceType]] = frozenset()


def handle(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    return error_response(request, ctx.api_version, ErrorCode.ILLEGAL_SASL_STATE)


def error_response(request: SaslHandshakeRequest, version: int, error: ErrorCode) -> SaslHandshakeResponse:
    """Kafka's getErrorResponse: ``error`` and no mechanisms."""
    return SaslHandshakeResponse(error_code=error, mechanisms=[])
