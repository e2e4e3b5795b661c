"""AlterPartition (56), from a partition leader to the controller: commit my proposed ISRs.

The controller checks each proposal against the state it holds (leader epoch, partition epoch,
eligible replicas), writes the accepted ones and answers every partition with its committed state
or an error (``Controller.alter_partition``). Only the active controller answers; any other
broker says NOT_CONTROLLER, and the leader asks again where its metadata points.

Needs CLUSTER_ACTION on the cluster (else CLUSTER_AUTHORIZATION_FAILED for the whole request),
checked first, as in Kafka.
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.controller.alter_partition import (
    ALTER_PARTITION_VERSION,
    AlterPartitionAnswer,
    answer_to_wire,
    request_from_wire,
)
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import AlterPartitionRequest, AlterPartitionResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.ALTER_PARTITION
VERSIONS = (0, ALTER_PARTITION_VERSION)
AUTHORIZES = frozenset({(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)})


async def handle(ctx: RequestContext, request: AlterPartitionRequest) -> AlterPartitionResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return error_response(request, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    answer = await ctx.services.controller.alter_partition(request_from_wire(request), ctx.api_version)
    return answer_to_wire(answer)


def error_response(request: AlterPartitionRequest, version: int, error: ErrorCode) -> AlterPartitionResponse:
    """Kafka's getErrorResponse: ``error`` at the top level, no topics."""
    return answer_to_wire(AlterPartitionAnswer(error))
