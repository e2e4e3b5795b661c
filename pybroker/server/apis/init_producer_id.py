"""InitProducerId (22): hand out producer ids and epochs, to idempotent and transactional producers.

Without a transactional id the producer is idempotent: a new producer id, or (KIP-360) its
current id with the epoch bumped to reset its sequences. With one, the transaction coordinator
decides (``TransactionCoordinator.handle_init_producer_id``). A ProducerId / ProducerEpoch pair
(v3+) with only one of the two set is INVALID_REQUEST; PRODUCER_FENCED is answered as
INVALID_PRODUCER_EPOCH below v4, as Kafka does for clients that predate it.

Authorization first, as Kafka's ``handleInitProducerIdRequest``: a transactional id needs WRITE on
it (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs IDEMPOTENT_WRITE on
the cluster or (KIP-679) WRITE on some topic (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import InitProducerIdRequest, InitProducerIdResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.INIT_PRODUCER_ID
VERSIONS = (0, 4)
AUTHORIZES = frozenset({
    (AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID),
    (AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER),
    (AclOperation.WRITE, ResourceType.TOPIC),
})
MAX_EPOCH = 32767
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
            return error_response(request, ctx.api_version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return await _transactional(ctx, request)
    if not ctx.authorize_cluster(AclOperation.IDEMPOTENT_WRITE) and not ctx.authorize_by_resource_type(
        AclOperation.WRITE, ResourceType.TOPIC
    ):
        return error_response(request, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if request.producer_id >= 0 and 0 <= request.producer_epoch < MAX_EPOCH - 1:
        # KIP-360: an idempotent producer bumps its epoch to reset its sequences.
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                      producer_id=request.producer_id, producer_epoch=request.producer_epoch + 1)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                  producer_id=await ctx.services.admin_manager.allocate_producer_id(), producer_epoch=0)


async def _transactional(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    producer_id, producer_epoch = request.producer_id, request.producer_epoch
    if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
        return error_response(request, ctx.api_version, ErrorCode.INVALID_REQUEST)
    expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
    result = await ctx.services.transaction_coordinator.handle_init_producer_id(
        request.transactional_id, request.transaction_timeout_ms, expected
    )
    error = result.error
    if ctx.api_version < 4 and error == ErrorCode.PRODUCER_FENCED:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return InitProducerIdResponse(throttle_time_ms=0, error_code=error, producer_id=result.producer_id,
                                  producer_epoch=result.producer_epoch)


def error_response(request: InitProducerIdRequest, version: int, error: ErrorCode) -> InitProducerIdResponse:
    """Kafka's getErrorResponse: ``error``, no producer id or epoch."""
    return InitProducerIdResponse(throttle_time_ms=0, error_code=error, producer_id=-1, producer_epoch=-1)
