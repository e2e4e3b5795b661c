"""FindCoordinator (10): which broker coordinates a group (key type 0, creating
``__consumer_offsets`` on first use) or a transactional id (key type 1, creating
``__transaction_state`` on first use).

v0-3 ask for one key, v4+ for several. The coordinator is the leader of the key's partition of the
internal topic; an unknown key type is INVALID_REQUEST.

Each key needs DESCRIBE first (Kafka's ``getCoordinator``): on the GROUP (else
GROUP_AUTHORIZATION_FAILED) or the TRANSACTIONAL_ID (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
with no node; v0-3 carry the error's default message, v4 none.
"""

from __future__ import annotations

import logging

from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.group.metadata_manager import OFFSETS_TOPIC, OffsetsTopicUnavailable
from pybroker.server.request_context import RequestContext
from pybroker.server.transaction.state_manager import TransactionTopicUnavailable
from pybroker.server.transaction.transaction_log import TRANSACTION_STATE_TOPIC
from pybroker.types import TopicPartition

API_KEY = ApiKey.FIND_COORDINATOR
VERSIONS = (0, 4)
KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
AUTHORIZES = frozenset({(AclOperation.DESCRIBE, ResourceType.GROUP), (AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID)})

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    key_type = request.key_type if ctx.api_version >= 1 else KEY_TYPE_GROUP
    if ctx.api_version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            FindCoordinatorResponse.Coordinator(key=key, **await _find(ctx, key_type, key))
            for key in request.coordinator_keys
        ])
    found = await _find(ctx, key_type, request.key)
    return FindCoordinatorResponse(throttle_time_ms=0, **found)


async def _find(ctx: RequestContext, key_type: int, key: str) -> dict[str, object]:
    broker = ctx.broker
    denied = None
    if key_type == KEY_TYPE_GROUP and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, key):
        denied = ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif key_type == KEY_TYPE_TRANSACTION and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        denied = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if denied is not None:
        return _error(denied, denied.message if ctx.api_version < 4 else None)
    if key_type == KEY_TYPE_GROUP:
        try:
            partition = await broker.group_coordinator.coordinator_partition(key)
        except OffsetsTopicUnavailable as e:
            log.warning("%s", e)
            return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(e))
        tp = TopicPartition(OFFSETS_TOPIC, partition)
    elif key_type == KEY_TYPE_TRANSACTION:
        try:
            partition = await broker.transaction_coordinator.coordinator_partition(key)
        except TransactionTopicUnavailable as e:
            log.warning("%s", e)
            return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(e))
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition)
    else:
        return _error(ErrorCode.INVALID_REQUEST, f"Unknown coordinator type {key_type} in FindCoordinator request")
    leader = broker.metadata_cache.leader(tp)
    endpoint = None if leader is None else leader.endpoint(ctx.listener_name)  # the request's listener
    if leader is None or endpoint is None:
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.")
    return {"error_code": ErrorCode.NONE, "error_message": "NONE", "node_id": leader.broker_id,
            "host": endpoint.host, "port": endpoint.port}


def _error(code: ErrorCode, message: str | None) -> dict[str, object]:
    return {"error_code": code, "error_message": message, "node_id": -1, "host": "", "port": -1}


def error_response(request: FindCoordinatorRequest, version: int, error: ErrorCode) -> FindCoordinatorResponse:
    """Kafka's getErrorResponse: ``error`` with no node, for the key (v0-3) or every key (v4)."""
    if version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            FindCoordinatorResponse.Coordinator(key=key, **_error(error, error.message or ""))
            for key in request.coordinator_keys
        ])
    return FindCoordinatorResponse(throttle_time_ms=0, **_error(error, error.message or ""))
