"""FindCoordinator (10): which broker coordinates a group (key type 0) or a transactional id (key
type 1): the leader of the key's partition of ``__consumer_offsets`` or ``__transaction_state``.
While that topic does not exist, the lookup starts its creation and answers
COORDINATOR_NOT_AVAILABLE, as Kafka's does; the client asks again.

v0-3 ask for one key, v4+ for several; an unknown key type is INVALID_REQUEST for the whole
request.

Each key needs DESCRIBE first (Kafka's ``getCoordinator``): on the GROUP (else
GROUP_AUTHORIZATION_FAILED) or the TRANSACTIONAL_ID (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
with no node. Messages as Kafka 3.9 words them: v0-3 carry the error's default message ("NONE"
for no error), a v4 answer has none (""), and a refused request the error's default message.
"""

from __future__ import annotations

import logging
from typing import TypedDict

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.group.metadata_manager import OFFSETS_TOPIC
from pybroker.server.request_context import RequestContext
from pybroker.server.transaction.transaction_log import TRANSACTION_STATE_TOPIC
from pybroker.types import TopicPartition

API_KEY = ApiKey.FIND_COORDINATOR
VERSIONS = (0, 4)
KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
AUTHORIZES = frozenset({(AclOperation.DESCRIBE, ResourceType.GROUP), (AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID)})

log = logging.getLogger(__name__)


class _Found(TypedDict):
    """A key's answer: the error, and the coordinator's node id, host and port."""

    error_code: ErrorCode
    node_id: int
    host: str
    port: int


async def handle(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    key_type = request.key_type if ctx.api_version >= 1 else KEY_TYPE_GROUP
    if key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
        log.info("Unknown coordinator type %d in FindCoordinator request", key_type)
        return error_response(request, ctx.api_version, ErrorCode.INVALID_REQUEST)
    if ctx.api_version >= 4:  # Kafka sets no message on a batched answer
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            FindCoordinatorResponse.Coordinator(key=key, **await _find(ctx, key_type, key), error_message="")
            for key in request.coordinator_keys
        ])
    found = await _find(ctx, key_type, request.key)
    code = found["error_code"]
    return FindCoordinatorResponse(throttle_time_ms=0, **found,
                                   error_message=code.name if code == ErrorCode.NONE else code.message)


async def _find(ctx: RequestContext, key_type: int, key: str) -> _Found:
    broker = ctx.services
    if key_type == KEY_TYPE_GROUP and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if key_type == KEY_TYPE_TRANSACTION and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return _error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if key_type == KEY_TYPE_GROUP:
        topic, partition = OFFSETS_TOPIC, broker.group_coordinator.coordinator_partition(key)
    else:
        topic, partition = TRANSACTION_STATE_TOPIC, broker.transaction_coordinator.coordinator_partition(key)
    if partition is None:  # the topic's creation has started: the client asks again
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    leader = broker.metadata_cache.leader(TopicPartition(topic, partition))
    endpoint = None if leader is None else leader.endpoint(ctx.listener_name)  # the request's listener
    if leader is None or endpoint is None:
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return _Found(error_code=ErrorCode.NONE, node_id=leader.broker_id, host=endpoint.host, port=endpoint.port)


def _error(code: ErrorCode) -> _Found:
    return _Found(error_code=code, node_id=-1, host="", port=-1)


def error_response(request: FindCoordinatorRequest, version: int, error: ErrorCode) -> FindCoordinatorResponse:
    """Kafka's getErrorResponse: ``error`` with no node, for the key (v0-3) or every key (v4)."""
    if version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            FindCoordinatorResponse.Coordinator(key=key, **_error(error), error_message=error.message or "")
            for key in request.coordinator_keys
        ])
    return FindCoordinatorResponse(throttle_time_ms=0, **_error(error), error_message=error.message or "")
