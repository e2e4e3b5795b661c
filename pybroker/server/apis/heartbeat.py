"""Heartbeat (12): a member is alive; the answer says whether a rebalance is under way.

Needs READ on the group, else GROUP_AUTHORIZATION_FAILED (Kafka's getErrorResponse).
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import HeartbeatRequest, HeartbeatResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.HEARTBEAT
VERSIONS = (0, 4)
AUTHORIZES = frozenset({(AclOperation.READ, ResourceType.GROUP)})


def handle(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error_response(request, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = ctx.services.group_coordinator.handle_heartbeat(
        request.group_id, request.member_id, request.group_instance_id if ctx.api_version >= 3 else None,
        request.generation_id,
    )
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)


def error_response(request: HeartbeatRequest, version: int, error: ErrorCode) -> HeartbeatResponse:
    """Kafka's getErrorResponse."""
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)
