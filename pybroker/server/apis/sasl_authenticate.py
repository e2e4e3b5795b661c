"""SaslAuthenticate (36) reaching the handlers: on a connection already authenticated, or on a
PLAINTEXT or SSL listener. Before authentication (and while re-authenticating) on a SASL listener
the connection's authenticator (``pybroker.network.sasl_authenticator``) takes it instead. As Kafka's
``KafkaApis`` answers it: ILLEGAL_SASL_STATE with Kafka's message; the connection stays open."""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import SaslAuthenticateRequest, SaslAuthenticateResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.SASL_AUTHENTICATE
VERSIONS = (0, 2)
AUTHORIZES: frozenset[tuple[AclOperation, ResourceType]] = frozenset()

AFTER_AUTHENTICATION = "SaslAuthenticate request received after successful authentication"


def handle(ctx: RequestContext, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, error_message=AFTER_AUTHENTICATION,
                                    auth_bytes=b"", session_lifetime_ms=0)


def error_response(request: SaslAuthenticateRequest, version: int, error: ErrorCode) -> SaslAuthenticateResponse:
    """Kafka's getErrorResponse: ``error`` with its default message."""
    return SaslAuthenticateResponse(error_code=error, error_message=ErrorCode(error).message, auth_bytes=b"",
                                    session_lifetime_ms=0)
