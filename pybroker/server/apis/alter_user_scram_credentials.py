"""AlterUserScramCredentials (51): upsert and delete users' SCRAM credentials (KIP-554); the
client salts the password, the broker keeps only the salt, StoredKey, ServerKey and iterations.

As Kafka's ZooKeeper-mode ``KafkaApis.handleAlterUserScramCredentialsRequest``: only the active
controller answers (any other broker: NOT_CONTROLLER for every user, whatever the principal may
do), then ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED for every user); both through
Kafka's getErrorResponse: one result per distinct user, sorted, message null. A success has an
empty message (the default of Kafka's generated result). The semantics are
`pybroker.server.user_scram_credentials`'s; the store tells every broker of the change.
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.request_context import RequestContext
from pybroker.server.user_scram_credentials import java_string_order

API_KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
VERSIONS = (0, 0)
AUTHORIZES = frozenset({(AclOperation.ALTER, ResourceType.CLUSTER)})

_Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult


async def handle(ctx: RequestContext, request: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    if not ctx.services.controller.active:
        return error_response(request, ctx.api_version, ErrorCode.NOT_CONTROLLER)
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return error_response(request, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    results = await ctx.services.admin_manager.alter_user_scram_credentials(request.upsertions, request.deletions)
    return AlterUserScramCredentialsResponse(
        throttle_time_ms=0,
        # A success has Kafka's default, empty message.
        results=[_Result(user=r.user, error_code=r.error, error_message="" if r.message is None else r.message)
                 for r in results],
    )


def error_response(
    request: AlterUserScramCredentialsRequest, version: int, error: ErrorCode
) -> AlterUserScramCredentialsResponse:
    """Kafka's getErrorResponse: ``error`` for every distinct user of the request, in Java's
    string order, message null."""
    users = {entry.name for entry in request.deletions} | {entry.name for entry in request.upsertions}
    return AlterUserScramCredentialsResponse(
        throttle_time_ms=0,
        results=[_Result(user=user, error_code=error, error_message=None)
                 for user in sorted(users, key=java_string_order)],
    )
