"""CreateAcls (30): add ACL bindings through the ACL authorizer (any broker answers, as in Kafka's
ZooKeeper mode; the store tells the others).

As Kafka's ``AclApis.handleCreateAcls`` and ``AclAuthorizer.createAcls``: ALTER on the cluster
first (else 31 for every creation), then 54 "No Authorizer is configured." for every creation
without an ACL authorizer. Per creation: a CLUSTER resource not named ``kafka-cluster`` → 42 "The
only valid name for the CLUSTER resource is kafka-cluster"; an empty name → 42 "Invalid empty
resource name"; a name with ``/`` → 42 "Failed to create ACL"; a principal without ``:`` →
UNKNOWN_SERVER_ERROR for every creation on that resource pattern. A binding that exists already
is a success. A creation naming the ANY resource type, a MATCH or ANY pattern type, or the ANY
operation or permission cannot be built in Kafka (IllegalArgumentException): every creation of the
request gets UNKNOWN_SERVER_ERROR. UNKNOWN elements, and v0 with a pattern type other than
LITERAL, close the connection.
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.network.connection import CloseConnection
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import CreateAclsRequest, CreateAclsResponse
from pybroker.security.acl import AccessControlEntry, AclBinding, ResourcePattern
from pybroker.security.acl_authorizer import AclError
from pybroker.security.authorizer import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pybroker.server.acl_apis import (
    NO_AUTHORIZER,
    acl_authorizer,
    check_v0_pattern_type,
    from_code,
    not_authorized_message,
)
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.CREATE_ACLS
VERSIONS = (0, 3)
AUTHORIZES = frozenset({(AclOperation.ALTER, ResourceType.CLUSTER)})

_Result = CreateAclsResponse.AclCreationResult


def handle(ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse | object:
    version = ctx.api_version
    bindings = []
    buildable = True
    for creation in request.creations:
        pattern_type = from_code(PatternType, check_v0_pattern_type(version, creation.resource_pattern_type, "creation"))
        resource_type = from_code(ResourceType, creation.resource_type)
        operation = from_code(AclOperation, creation.operation)
        permission = from_code(AclPermissionType, creation.permission_type)
        if pattern_type == PatternType.UNKNOWN or resource_type == ResourceType.UNKNOWN \
                or operation == AclOperation.UNKNOWN or permission == AclPermissionType.UNKNOWN:
            raise CloseConnection("CreateAcls: creations contain unknown elements")
        if resource_type == ResourceType.ANY or pattern_type in (PatternType.ANY, PatternType.MATCH) \
                or operation == AclOperation.ANY or permission == AclPermissionType.ANY:
            buildable = False
        bindings.append(AclBinding(ResourcePattern(resource_type, creation.resource_name, pattern_type),
                                   AccessControlEntry(creation.principal, creation.host, operation, permission)))
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return _all(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    not_authorized_message("CreateAcls", ctx.principal, ctx.connection.client_address))
    authorizer = acl_authorizer(ctx.services)
    if authorizer is None:
        return _all(request, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not buildable:
        return _all(request, ErrorCode.UNKNOWN_SERVER_ERROR, None)
    results: list[AclError | None] = [None] * len(bindings)
    valid: list[int] = []
    for i, binding in enumerate(bindings):
        pattern = binding.pattern
        if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
            results[i] = AclError(ErrorCode.INVALID_REQUEST,
                                  f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        elif not pattern.name:
            results[i] = AclError(ErrorCode.INVALID_REQUEST, "Invalid empty resource name")
        else:
            valid.append(i)

    async def create() -> CreateAclsResponse:
        created = await authorizer.create_acls([bindings[i] for i in valid])
        for i, outcome in zip(valid, created, strict=True):
            results[i] = outcome
        return CreateAclsResponse(throttle_time_ms=0, results=[
            _Result(error_code=ErrorCode.NONE, error_message="") if r is None
            else _Result(error_code=r.code, error_message=r.message)
            for r in results
        ])

    return create()


def _all(request: CreateAclsRequest, code: ErrorCode, message: str | None) -> CreateAclsResponse:
    return CreateAclsResponse(throttle_time_ms=0, results=[
        _Result(error_code=code, error_message=message) for _ in request.creations
    ])


def error_response(request: CreateAclsRequest, version: int, error: ErrorCode) -> CreateAclsResponse:
    return _all(request, error, None)
