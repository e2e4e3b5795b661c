"""InitProducerId (22): hand out producer ids (and bump epochs) for idempotent producers.

Transactions are not supported yet, so a request with a transactional id is refused.
"""

from __future__ import annotations

from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import InitProducerIdRequest, InitProducerIdResponse
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.INIT_PRODUCER_ID
VERSIONS = (0, 4)
MAX_EPOCH = 32767


async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION, producer_id=-1, producer_epoch=-1)
    if request.producer_id >= 0 and 0 <= request.producer_epoch < MAX_EPOCH - 1:
        # KIP-360: an idempotent producer bumps its epoch to reset its sequences.
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                      producer_id=request.producer_id, producer_epoch=request.producer_epoch + 1)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                  producer_id=await ctx.broker.admin_manager.allocate_producer_id(), producer_epoch=0)


def error_response(request: InitProducerIdRequest, version: int, error: ErrorCode) -> InitProducerIdResponse:
    """Kafka's getErrorResponse: ``error``, no producer id or epoch."""
    return InitProducerIdResponse(throttle_time_ms=0, error_code=error, producer_id=-1, producer_epoch=-1)
