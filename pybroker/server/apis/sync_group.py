"""SyncGroup (14): the leader hands in the assignment; every member gets its share.

From v5 a request without protocol type and name answers INCONSISTENT_GROUP_PROTOCOL, checked
before READ on the group (else GROUP_AUTHORIZATION_FAILED), as in Kafka's ``handleSyncGroupRequest``.
"""

from __future__ import annotations

import asyncio

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import SyncGroupRequest, SyncGroupResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.apis.group_response import answer
from pybroker.server.group.coordinator import SyncResult
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.SYNC_GROUP
VERSIONS = (0, 5)
AUTHORIZES = frozenset({(AclOperation.READ, ResourceType.GROUP)})


def handle(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse | asyncio.Future[SyncGroupResponse]:
    version = ctx.api_version
    if version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        return error_response(request, version, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error_response(request, version, ErrorCode.GROUP_AUTHORIZATION_FAILED)

    def build(result: SyncResult) -> SyncGroupResponse:
        return SyncGroupResponse(
            throttle_time_ms=0, error_code=result.error, protocol_type=result.protocol_type,
            protocol_name=result.protocol_name, assignment=result.assignment,
        )

    return answer(
        ctx,
        lambda respond: ctx.services.group_coordinator.handle_sync_group(
            request.group_id,
            request.generation_id,
            request.member_id,
            request.group_instance_id if version >= 3 else None,
            request.protocol_type if version >= 5 else None,
            request.protocol_name if version >= 5 else None,
            {a.member_id: bytes(a.assignment) for a in request.assignments},
            respond,
        ),
        build,
    )


def error_response(request: SyncGroupRequest, version: int, error: ErrorCode) -> SyncGroupResponse:
    """Kafka's getErrorResponse: ``error`` and an empty assignment."""
    return SyncGroupResponse(throttle_time_ms=0, error_code=error, assignment=b"")
