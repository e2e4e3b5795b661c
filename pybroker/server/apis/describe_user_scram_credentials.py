"""DescribeUserScramCredentials (50): which SCRAM mechanisms, with their iteration counts, users
have credentials for (KIP-554); never the credentials.

As Kafka's ``KafkaApis.handleDescribeUserScramCredentialsRequest``: DESCRIBE on the cluster, else
CLUSTER_AUTHORIZATION_FAILED at the top level and in one result per requested user (an empty
user name, message null); any broker answers, reading the store itself (ZooKeeper in a cluster).
The semantics are `pybroker.server.user_scram_credentials`'s. Where Kafka sets no message (the
top level and a described user) it sends an empty one, its generated classes' default.
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
VERSIONS = (0, 0)
AUTHORIZES = frozenset({(AclOperation.DESCRIBE, ResourceType.CLUSTER)})

_Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
_Info = DescribeUserScramCredentialsResponse.CredentialInfo


async def handle(ctx: RequestContext, request: DescribeUserScramCredentialsRequest) -> DescribeUserScramCredentialsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return error_response(request, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    users = None if request.users is None else [user.name for user in request.users]
    results = await ctx.services.admin_manager.describe_user_scram_credentials(users)
    # Kafka's generated response and results start with an empty message; success sets none.
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message="",
        results=[
            _Result(user=r.user, error_code=r.error, error_message="" if r.message is None else r.message,
                    credential_infos=[_Info(mechanism=m, iterations=i) for m, i in r.credentials])
            for r in results
        ],
    )


def error_response(
    request: DescribeUserScramCredentialsRequest, version: int, error: ErrorCode
) -> DescribeUserScramCredentialsResponse:
    """Kafka's getErrorResponse: ``error`` at the top level and once per requested user, with an
    empty user name (Kafka's leaves it unset). For a request of every user (``users`` null,
    where Kafka's getErrorResponse would fail) no results."""
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=error, error_message=None,
        results=[_Result(user="", error_code=error, error_message=None, credential_infos=[])
                 for _ in request.users or []],
    )
