"""EndTxn (26): a transactional producer commits or aborts its ongoing transaction.

Answered once the coordinator has written PrepareCommit / PrepareAbort to ``__transaction_state``
(the markers follow without the client); a retried EndTxn for a transaction already completed the
same way answers NONE. PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH below v2, as Kafka
does. Needs WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import asyncio

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import EndTxnRequest, EndTxnResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.apis.group_response import answer
from pybroker.server.request_context import RequestContext
from pybroker.server.transaction.metadata import TransactionResult

API_KEY = ApiKey.END_TXN
VERSIONS = (0, 3)
AUTHORIZES = frozenset({(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID)})


def handle(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse | asyncio.Future[EndTxnResponse]:
    version = ctx.api_version
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return error_response(request, version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    result = TransactionResult.COMMIT if request.committed else TransactionResult.ABORT

    def build(error: ErrorCode) -> EndTxnResponse:
        if version < 2 and error == ErrorCode.PRODUCER_FENCED:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        return EndTxnResponse(throttle_time_ms=0, error_code=error)

    return answer(
        ctx,
        lambda respond: ctx.services.transaction_coordinator.handle_end_transaction(
            request.transactional_id, request.producer_id, request.producer_epoch, result, respond,
        ),
        build,
    )


def error_response(request: EndTxnRequest, version: int, error: ErrorCode) -> EndTxnResponse:
    """Kafka's getErrorResponse: ``error``."""
    return EndTxnResponse(throttle_time_ms=0, error_code=error)
