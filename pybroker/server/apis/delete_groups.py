"""DeleteGroups (42): delete empty groups with their committed offsets."""

from __future__ import annotations

from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import DeleteGroupsRequest, DeleteGroupsResponse
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.DELETE_GROUPS
VERSIONS = (0, 2)


def handle(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    group_ids = list(dict.fromkeys(request.groups_names))  # a group named twice is deleted once
    results = ctx.broker.group_coordinator.handle_delete_groups(group_ids)
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        DeleteGroupsResponse.DeletableGroupResult(group_id=group_id, error_code=results[group_id])
        for group_id in group_ids
    ])


def error_response(request: DeleteGroupsRequest, version: int, error: ErrorCode) -> DeleteGroupsResponse:
    """Kafka's getErrorResponse: ``error`` for every group."""
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        DeleteGroupsResponse.DeletableGroupResult(group_id=group_id, error_code=error)
        for group_id in dict.fromkeys(request.groups_names)
    ])
