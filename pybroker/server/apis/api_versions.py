"""ApiVersions (18): the APIs and version ranges this broker answers, from the handler registry."""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.client_software import valid_client_software
from pybroker.protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.API_VERSIONS
VERSIONS = (0, 4)
AUTHORIZES: frozenset = frozenset()  # never authorized (answered before authentication too)

def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    keys = [
        ApiVersionsResponse.ApiVersion(api_key=key, min_version=low, max_version=high)
        for key, low, high in ctx.services.api_versions
    ]
    error = ErrorCode.NONE
    if ctx.api_version >= 3:
        name, version = request.client_software_name or "", request.client_software_version or ""
        if not valid_client_software(name, version):
            error = ErrorCode.INVALID_REQUEST
        else:
            ctx.connection.attributes["client_software"] = (name, version)
    return ApiVersionsResponse(error_code=error, api_keys=keys, throttle_time_ms=0)


def error_response(request: ApiVersionsRequest, version: int, error: ErrorCode) -> ApiVersionsResponse:
    """Kafka's getErrorResponse: ``error`` and no API list."""
    return ApiVersionsResponse(error_code=error, api_keys=[], throttle_time_ms=0)
