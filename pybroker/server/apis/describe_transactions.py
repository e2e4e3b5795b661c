"""DescribeTransactions (65): the state of transactional ids this broker coordinates (KIP-664).

Each id gets its own error: NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS when its partition of
``__transaction_state`` is not (yet) served here, TRANSACTIONAL_ID_NOT_FOUND when it is unknown or
being expired, else its state, producer id and epoch, timeout, start time and partitions.

Each id needs DESCRIBE on it (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and a described state
lists only the topics with DESCRIBE (the others are silently left out), as in Kafka.
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import DescribeTransactionsRequest, DescribeTransactionsResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.request_context import RequestContext
from pybroker.server.transaction.coordinator import TransactionDescription

API_KEY = ApiKey.DESCRIBE_TRANSACTIONS
VERSIONS = (0, 0)
AUTHORIZES = frozenset({(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID), (AclOperation.DESCRIBE, ResourceType.TOPIC)})


def handle(ctx: RequestContext, request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    coordinator = ctx.services.transaction_coordinator
    states = []
    for transactional_id in request.transactional_ids:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            states.append(_state(TransactionDescription(transactional_id, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)))
            continue
        described = coordinator.handle_describe_transactions(transactional_id)
        state = _state(described)
        state.topics = [t for t in state.topics if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic)]
        states.append(state)
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)


def _state(described: TransactionDescription) -> DescribeTransactionsResponse.TransactionState:
    return DescribeTransactionsResponse.TransactionState(
        error_code=described.error, transactional_id=described.transactional_id,
        transaction_state=described.state, transaction_timeout_ms=described.timeout_ms,
        transaction_start_time_ms=described.start_time_ms, producer_id=described.producer_id,
        producer_epoch=described.producer_epoch,
        topics=[DescribeTransactionsResponse.TopicData(topic=topic, partitions=partitions)
                for topic, partitions in described.topics.items()],
    )


def error_response(
    request: DescribeTransactionsRequest, version: int, error: ErrorCode
) -> DescribeTransactionsResponse:
    """Kafka's getErrorResponse: ``error`` for every transactional id."""
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=[
        _state(TransactionDescription(transactional_id, error)) for transactional_id in request.transactional_ids
    ])
