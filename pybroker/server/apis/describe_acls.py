"""DescribeAcls (29): the ACL bindings matching a filter, from this broker's ACL cache.

As Kafka's ``AclApis.handleDescribeAcls``: DESCRIBE on the cluster first (else 31 with a message),
then 54 "No Authorizer is configured on the broker" without an ACL authorizer; otherwise the
matching bindings grouped by resource pattern. UNKNOWN filter elements, or a v0 filter whose
pattern type is neither LITERAL nor ANY, close the connection (`pybroker.server.acl_apis`).
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import DescribeAclsRequest, DescribeAclsResponse
from pybroker.security.acl import ResourcePattern
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.acl_apis import (
    NO_AUTHORIZER_DESCRIBE,
    acl_authorizer,
    binding_filter,
    not_authorized_message,
)
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.DESCRIBE_ACLS
VERSIONS = (0, 3)
AUTHORIZES = frozenset({(AclOperation.DESCRIBE, ResourceType.CLUSTER)})

_Resource = DescribeAclsResponse.DescribeAclsResource
_Acl = DescribeAclsResponse.AclDescription


def handle(ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    version = ctx.api_version
    acl_filter = binding_filter(
        version, request.resource_type_filter, request.resource_name_filter, request.pattern_type_filter,
        request.principal_filter, request.host_filter, request.operation, request.permission_type, "DescribeAcls",
    )
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                      not_authorized_message("DescribeAcls", ctx.principal, ctx.connection.client_address))
    authorizer = acl_authorizer(ctx.services)
    if authorizer is None:
        return _error(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER_DESCRIBE)
    grouped: dict[ResourcePattern, list[_Acl]] = {}
    for binding in authorizer.acls(acl_filter):
        entry = binding.entry
        grouped.setdefault(binding.pattern, []).append(_Acl(
            principal=entry.principal, host=entry.host, operation=entry.operation,
            permission_type=entry.permission_type,
        ))
    return DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message="", resources=[
        _Resource(resource_type=p.resource_type, resource_name=p.name, pattern_type=p.pattern_type, acls=acls)
        for p, acls in grouped.items()
    ])


def _error(code: ErrorCode, message: str | None) -> DescribeAclsResponse:
    return DescribeAclsResponse(throttle_time_ms=0, error_code=code, error_message=message, resources=[])


def error_response(request: DescribeAclsRequest, version: int, error: ErrorCode) -> DescribeAclsResponse:
    return _error(error, None)
