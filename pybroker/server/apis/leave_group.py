"""LeaveGroup (13): members leave (one in v0-2; a batch, also by group.instance.id, from v3).

Needs READ on the group, else GROUP_AUTHORIZATION_FAILED (Kafka's getErrorResponse).
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import LeaveGroupRequest, LeaveGroupResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.LEAVE_GROUP
VERSIONS = (0, 5)
AUTHORIZES = frozenset({(AclOperation.READ, ResourceType.GROUP)})


def handle(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error_response(request, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if ctx.api_version >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        leaving = [(request.member_id, None)]
    error, member_errors = ctx.services.group_coordinator.handle_leave_group(request.group_id, leaving)
    if ctx.api_version < 3:
        # One member: its error is the response's error.
        code = error if error != ErrorCode.NONE else next((e for e in member_errors if e != ErrorCode.NONE), error)
        return LeaveGroupResponse(throttle_time_ms=0, error_code=code)
    return LeaveGroupResponse(throttle_time_ms=0, error_code=error, members=[
        LeaveGroupResponse.MemberResponse(member_id=member_id, group_instance_id=instance_id, error_code=code)
        for (member_id, instance_id), code in zip(leaving, member_errors, strict=True)
    ])


def error_response(request: LeaveGroupRequest, version: int, error: ErrorCode) -> LeaveGroupResponse:
    """Kafka's getErrorResponse: the top-level ``error``, no member results."""
    return LeaveGroupResponse(throttle_time_ms=0, error_code=error, members=[])
