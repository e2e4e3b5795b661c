"""ListGroups (16): the groups this broker coordinates (v4: filtered by state; v5: by type too).

DESCRIBE on the cluster lists every group; otherwise only the groups with DESCRIBE are listed
(a silent filter, never an error), as Kafka's ``handleListGroupsRequest``.

v5 (KIP-848) names each group's type. As in ZooKeeper-mode Kafka's group coordinator, every group
is a classic group: a types filter (its names read case-insensitively) lists them all when it
names ``classic`` and none otherwise.
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import ListGroupsRequest, ListGroupsResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.group.group_metadata import GroupState
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.LIST_GROUPS
VERSIONS = (0, 5)
CLASSIC = "classic"  # Kafka's Group.GroupType.CLASSIC
AUTHORIZES = frozenset({(AclOperation.DESCRIBE, ResourceType.CLUSTER), (AclOperation.DESCRIBE, ResourceType.GROUP)})


def handle(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    states: set[GroupState] | None = None
    if ctx.api_version >= 4 and request.states_filter:
        # An unknown state name matches no group, as in Kafka.
        states = {s for s in (GroupState.parse(name) for name in request.states_filter) if s is not None}
    error, groups = ctx.services.group_coordinator.handle_list_groups(states)
    if ctx.api_version >= 5 and request.types_filter and CLASSIC not in {t.lower() for t in request.types_filter}:
        groups = []
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        groups = [g for g in groups if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g[0])]
    return ListGroupsResponse(throttle_time_ms=0, error_code=error, groups=[
        ListGroupsResponse.ListedGroup(group_id=group_id, protocol_type=protocol_type, group_state=state,
                                       group_type=CLASSIC)
        for group_id, protocol_type, state in groups
    ])


def error_response(request: ListGroupsRequest, version: int, error: ErrorCode) -> ListGroupsResponse:
    """Kafka's getErrorResponse: ``error`` and no groups."""
    return ListGroupsResponse(throttle_time_ms=0, error_code=error, groups=[])
