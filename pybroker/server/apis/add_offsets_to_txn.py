"""AddOffsetsToTxn (25): a transactional producer will commit a group's offsets in its transaction.

The group's ``__consumer_offsets`` partition (the group coordinator's ``partition_for``) joins the
transaction, exactly as AddPartitionsToTxn adds a partition; PRODUCER_FENCED is answered as
INVALID_PRODUCER_EPOCH below v2, as Kafka does.

Needs WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on
the group (else GROUP_AUTHORIZATION_FAILED), as Kafka's ``handleAddOffsetsToTxnRequest``.
"""

from __future__ import annotations

import asyncio

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.apis.group_response import answer
from pybroker.server.group.metadata_manager import OFFSETS_TOPIC
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.ADD_OFFSETS_TO_TXN
VERSIONS = (0, 3)
AUTHORIZES = frozenset({(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID), (AclOperation.READ, ResourceType.GROUP)})


def handle(
    ctx: RequestContext, request: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse | asyncio.Future[AddOffsetsToTxnResponse]:
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return error_response(request, ctx.api_version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error_response(request, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    broker = ctx.services
    offsets_partition = TopicPartition(OFFSETS_TOPIC, broker.group_coordinator.manager.partition_for(request.group_id))
    version = ctx.api_version

    def build(error: ErrorCode) -> AddOffsetsToTxnResponse:
        if version < 2 and error == ErrorCode.PRODUCER_FENCED:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=error)

    return answer(
        ctx,
        lambda respond: broker.transaction_coordinator.handle_add_partitions_to_transaction(
            request.transactional_id, request.producer_id, request.producer_epoch, [offsets_partition], respond,
        ),
        build,
    )


def error_response(request: AddOffsetsToTxnRequest, version: int, error: ErrorCode) -> AddOffsetsToTxnResponse:
    """Kafka's getErrorResponse: ``error``."""
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=error)
