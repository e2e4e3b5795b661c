"""ControlledShutdown (7), from a broker that is stopping to the controller: move my leaderships.

The controller elects other leaders for every replicated partition the broker leads, takes it out
of the ISRs it follows in, and answers the partitions it still leads (the broker retries while
any remain). Only the active controller answers; any other broker says NOT_CONTROLLER.

Needs CLUSTER_ACTION on the cluster (else CLUSTER_AUTHORIZATION_FAILED for the whole request),
checked first, as in Kafka.
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import ControlledShutdownRequest, ControlledShutdownResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.CONTROLLED_SHUTDOWN
VERSIONS = (3, 3)
AUTHORIZES = frozenset({(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)})

_Remaining = ControlledShutdownResponse.RemainingPartition


async def handle(ctx: RequestContext, request: ControlledShutdownRequest) -> ControlledShutdownResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return error_response(request, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    error, remaining = await ctx.services.controller.controlled_shutdown(request.broker_id, request.broker_epoch)
    return ControlledShutdownResponse(error_code=error, remaining_partitions=[
        _Remaining(topic_name=tp.topic, partition_index=tp.partition) for tp in remaining
    ])


def error_response(request: ControlledShutdownRequest, version: int, error: ErrorCode) -> ControlledShutdownResponse:
    """Kafka's getErrorResponse: ``error``, no partitions."""
    return ControlledShutdownResponse(error_code=error, remaining_partitions=[])
