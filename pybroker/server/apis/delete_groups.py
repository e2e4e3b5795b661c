"""DeleteGroups (42): delete empty groups with their committed offsets.

Each group needs DELETE; refused groups answer GROUP_AUTHORIZATION_FAILED after the
coordinator's results, as in Kafka. The coordinator's results come in the order of the Scala
``mutable.HashMap`` Kafka's coordinator collects them in.
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.jvm_collections import java_string_hash, scala_hash_map_order
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import DeleteGroupsRequest, DeleteGroupsResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.DELETE_GROUPS
VERSIONS = (0, 2)
AUTHORIZES = frozenset({(AclOperation.DELETE, ResourceType.GROUP)})


def handle(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    group_ids = list(dict.fromkeys(request.groups_names))  # a group named twice is deleted once
    allowed = [g for g in group_ids if ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, g)]
    deleted = ctx.services.group_coordinator.handle_delete_groups(allowed) if allowed else {}
    results = [(g, deleted[g]) for g in scala_hash_map_order(allowed, java_string_hash)]
    results += [(g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in group_ids if g not in deleted]
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        DeleteGroupsResponse.DeletableGroupResult(group_id=group_id, error_code=code) for group_id, code in results
    ])


def error_response(request: DeleteGroupsRequest, version: int, error: ErrorCode) -> DeleteGroupsResponse:
    """Kafka's getErrorResponse: ``error`` for every group."""
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        DeleteGroupsResponse.DeletableGroupResult(group_id=group_id, error_code=error)
        for group_id in dict.fromkeys(request.groups_names)
    ])
