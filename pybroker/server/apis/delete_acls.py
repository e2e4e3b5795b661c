"""DeleteAcls (31): remove the ACL bindings matching each filter, through the ACL authorizer.

As Kafka's ``AclApis.handleDeleteAcls`` and ``AclAuthorizer.deleteAcls``: ALTER on the cluster
first (else 31 for every filter), then 54 "No Authorizer is configured." for every filter without
an ACL authorizer. Each filter's result lists the bindings it deleted (a binding matched by several
filters under the first). A filter that names one pattern exactly (LITERAL, PREFIXED or ANY with a
name and a concrete type) also reaches ACLs not yet in this broker's cache; MATCH and other
indefinite filters see the cache only. UNKNOWN elements, and a v0 filter whose pattern type is
neither LITERAL nor ANY, close the connection.
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import DeleteAclsRequest, DeleteAclsResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.acl_apis import (
    NO_AUTHORIZER,
    acl_authorizer,
    binding_filter,
    not_authorized_message,
)
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.DELETE_ACLS
VERSIONS = (0, 3)
AUTHORIZES = frozenset({(AclOperation.ALTER, ResourceType.CLUSTER)})

_FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
_Matching = DeleteAclsResponse.DeleteAclsMatchingAcl


def handle(ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse | object:
    version = ctx.api_version
    filters = [
        binding_filter(version, f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                       f.principal_filter, f.host_filter, f.operation, f.permission_type, "DeleteAcls filter")
        for f in request.filters
    ]
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return _all(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    not_authorized_message("DeleteAcls", ctx.principal, ctx.connection.client_address))
    authorizer = acl_authorizer(ctx.services)
    if authorizer is None:
        return _all(request, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)

    async def delete() -> DeleteAclsResponse:
        outcomes = await authorizer.delete_acls(filters)
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            _FilterResult(error_code=ErrorCode.NONE, error_message=None, matching_acls=[
                _Matching(
                    error_code=ErrorCode.NONE if error is None else error.code,
                    error_message=None if error is None else error.message,
                    resource_type=binding.pattern.resource_type, resource_name=binding.pattern.name,
                    pattern_type=binding.pattern.pattern_type, principal=binding.entry.principal,
                    host=binding.entry.host, operation=binding.entry.operation,
                    permission_type=binding.entry.permission_type,
                )
                for binding, error in deleted
            ])
            for deleted in outcomes
        ])

    return delete()


def _all(request: DeleteAclsRequest, code: ErrorCode, message: str | None) -> DeleteAclsResponse:
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        _FilterResult(error_code=code, error_message=message, matching_acls=[]) for _ in request.filters
    ])


def error_response(request: DeleteAclsRequest, version: int, error: ErrorCode) -> DeleteAclsResponse:
    return _all(request, error, None)
