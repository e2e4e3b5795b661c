"""DescribeGroups (15): state, protocol and members of groups (an unknown group is reported Dead).

Each group needs DESCRIBE (else GROUP_AUTHORIZATION_FAILED, nothing described; those groups come
first, as in Kafka); v3+ with IncludeAuthorizedOperations gets each described group's
authorized-operations bitfield.
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import DescribeGroupsRequest, DescribeGroupsResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.apis.group_response import AUTHORIZED_OPERATIONS_OMITTED
from pybroker.server.request_context import RequestContext, supported

API_KEY = ApiKey.DESCRIBE_GROUPS
VERSIONS = (0, 5)
AUTHORIZES = frozenset({(AclOperation.DESCRIBE, ResourceType.GROUP)}) | supported(ResourceType.GROUP)


def handle(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    coordinator = ctx.services.group_coordinator
    with_operations = ctx.api_version >= 3 and request.include_authorized_operations
    allowed = {group_id: ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id)
               for group_id in dict.fromkeys(request.groups)}
    described = [_group_error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)
                 for group_id in request.groups if not allowed[group_id]]
    for group_id in request.groups:
        if not allowed[group_id]:
            continue
        error, summary = coordinator.handle_describe_group(group_id)
        described.append(DescribeGroupsResponse.DescribedGroup(
            error_code=error, group_id=group_id, group_state=summary.state, protocol_type=summary.protocol_type,
            protocol_data=summary.protocol_name,
            members=[
                DescribeGroupsResponse.DescribedGroupMember(
                    member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                    client_host=m.client_host, member_metadata=m.metadata, member_assignment=m.assignment,
                )
                for m in summary.members
            ],
            authorized_operations=ctx.authorized_operations(ResourceType.GROUP, group_id)
            if with_operations and error == ErrorCode.NONE else AUTHORIZED_OPERATIONS_OMITTED,
        ))
    return DescribeGroupsResponse(throttle_time_ms=0, groups=described)


def error_response(request: DescribeGroupsRequest, version: int, error: ErrorCode) -> DescribeGroupsResponse:
    """Kafka's getErrorResponse: ``error`` for every group, nothing described."""
    return DescribeGroupsResponse(throttle_time_ms=0, groups=[_group_error(group_id, error) for group_id in request.groups])


def _group_error(group_id: str, error: ErrorCode) -> DescribeGroupsResponse.DescribedGroup:
    """Kafka's ``DescribeGroupsResponse.groupError``."""
    return DescribeGroupsResponse.DescribedGroup(
        error_code=error, group_id=group_id, group_state="", protocol_type="", protocol_data="", members=[],
        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )
