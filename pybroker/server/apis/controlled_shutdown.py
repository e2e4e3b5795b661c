"""ControlledShutdown (7), from a broker that is stopping to the controller: move my leaderships.

The controller elects other leaders for every replicated partition the broker leads, takes it out
of the ISRs it follows in, and answers the partitions it still leads (the broker retries while
any remain). Only the active controller answers; any other broker says NOT_CONTROLLER.
"""

from __future__ import annotations

from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import ControlledShutdownRequest, ControlledShutdownResponse
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.CONTROLLED_SHUTDOWN
VERSIONS = (3, 3)

_Remaining = ControlledShutdownResponse.RemainingPartition


async def handle(ctx: RequestContext, request: ControlledShutdownRequest) -> ControlledShutdownResponse:
    error, remaining = await ctx.broker.controller.controlled_shutdown(request.broker_id, request.broker_epoch)
    return ControlledShutdownResponse(error_code=error, remaining_partitions=[
        _Remaining(topic_name=tp.topic, partition_index=tp.partition) for tp in remaining
    ])


def error_response(request: ControlledShutdownRequest, version: int, error: ErrorCode) -> ControlledShutdownResponse:
    """Kafka's getErrorResponse: ``error``, no partitions."""
    return ControlledShutdownResponse(error_code=error, remaining_partitions=[])
