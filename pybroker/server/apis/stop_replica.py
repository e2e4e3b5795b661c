"""StopReplica (5), from the controller: stop replicating partitions, and delete them when asked.

The request is decoded into its value (`controller/wire.py`) and applied by `BrokerControl`, the
same path the in-process controller of a single broker takes.
"""

from __future__ import annotations

from pybroker.controller import wire
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import StopReplicaRequest, StopReplicaResponse
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.STOP_REPLICA
VERSIONS = (3, 3)


async def handle(ctx: RequestContext, request: StopReplicaRequest) -> StopReplicaResponse:
    value = wire.from_wire(API_KEY, request)
    return wire.response_to_wire(API_KEY, value, await ctx.broker.broker_control.handle(value))


def error_response(request: StopReplicaRequest, version: int, error: ErrorCode) -> StopReplicaResponse:
    """Kafka's getErrorResponse: ``error`` for the request as a whole."""
    return StopReplicaResponse(error_code=error)
