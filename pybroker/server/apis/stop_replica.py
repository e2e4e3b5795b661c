"""StopReplica (5), from the controller: stop replicating partitions, and delete them when asked.

The request is decoded into its value (`controller/wire.py`) and applied by `BrokerControl`, the
same path the in-process controller of a single broker takes.

Needs CLUSTER_ACTION on the cluster (else CLUSTER_AUTHORIZATION_FAILED for the whole request),
checked first, as in Kafka.
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.controller import wire
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import StopReplicaRequest, StopReplicaResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.STOP_REPLICA
VERSIONS = (3, 3)
AUTHORIZES = frozenset({(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)})


async def handle(ctx: RequestContext, request: StopReplicaRequest) -> StopReplicaResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return error_response(request, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    value = wire.from_wire(API_KEY, request)
    return wire.response_to_wire(API_KEY, value, await ctx.services.broker_control.handle(value))


def error_response(request: StopReplicaRequest, version: int, error: ErrorCode) -> StopReplicaResponse:
    """Kafka's getErrorResponse: ``error`` for the request as a whole."""
    return StopReplicaResponse(error_code=error)
