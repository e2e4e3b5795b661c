"""ListTransactions (66): the transactions this broker coordinates, filtered by state and producer
id (KIP-664).

State filters that name no state are echoed back as UnknownStateFilters; while any
``__transaction_state`` partition loads the answer is COORDINATOR_LOAD_IN_PROGRESS. Only the
transactional ids with DESCRIBE are listed (a silent filter), as in Kafka.
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import ListTransactionsRequest, ListTransactionsResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.LIST_TRANSACTIONS
VERSIONS = (0, 0)
AUTHORIZES = frozenset({(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID)})


def handle(ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    listed = ctx.services.transaction_coordinator.handle_list_transactions(
        set(request.producer_id_filters), set(request.state_filters)
    )
    return ListTransactionsResponse(
        throttle_time_ms=0, error_code=listed.error, unknown_state_filters=listed.unknown_state_filters,
        transaction_states=[
            ListTransactionsResponse.TransactionState(transactional_id=tid, producer_id=pid, transaction_state=state)
            for tid, pid, state in listed.states
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid)
        ],
    )


def error_response(request: ListTransactionsRequest, version: int, error: ErrorCode) -> ListTransactionsResponse:
    """Kafka's getErrorResponse: ``error``."""
    return ListTransactionsResponse(throttle_time_ms=0, error_code=error)
