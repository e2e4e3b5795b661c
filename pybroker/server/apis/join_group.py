"""JoinGroup (11): join a group; answered when the rebalance's join phase ends.

Needs READ on the group, else GROUP_AUTHORIZATION_FAILED (Kafka's getErrorResponse).
"""

from __future__ import annotations

import asyncio

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import JoinGroupRequest, JoinGroupResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.apis.group_response import answer
from pybroker.server.group.coordinator import JoinRequest, JoinResult
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.JOIN_GROUP
VERSIONS = (0, 7)
AUTHORIZES = frozenset({(AclOperation.READ, ResourceType.GROUP)})


def handle(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse | asyncio.Future[JoinGroupResponse]:
    version = ctx.api_version
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error_response(request, version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    group_instance_id = request.group_instance_id if version >= 5 else None

    def build(result: JoinResult) -> JoinGroupResponse:
        protocol_name = result.protocol_name if version >= 7 else (result.protocol_name or "")
        return JoinGroupResponse(
            throttle_time_ms=0, error_code=result.error, generation_id=result.generation_id,
            protocol_type=result.protocol_type, protocol_name=protocol_name, leader=result.leader_id,
            member_id=result.member_id,
            members=[
                JoinGroupResponse.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=md)
                for m, i, md in result.members
            ],
        )

    join = JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=group_instance_id,
        # KIP-394: from v4 a dynamic member first gets its member id, then joins with it.
        require_known_member_id=version >= 4 and group_instance_id is None,
        client_id=ctx.client_id or "",
        client_host=ctx.connection.client_host,
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms,
        session_timeout_ms=request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
    )
    return answer(ctx, lambda respond: ctx.services.group_coordinator.handle_join_group(join, respond), build)


def error_response(request: JoinGroupRequest, version: int, error: ErrorCode) -> JoinGroupResponse:
    """Kafka's getErrorResponse: ``error``, no generation, member or protocol."""
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=error, generation_id=-1, protocol_name=None if version >= 7 else "",
        leader="", member_id="", members=[],
    )
