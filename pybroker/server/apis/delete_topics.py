"""DeleteTopics (20): delete topics by name (v0–5) or by name or id (v6).

Authorization after the delete.topic.enable check, as Kafka's ``handleDeleteTopicsRequest``: a
topic named by id needs DESCRIBE (else TOPIC_AUTHORIZATION_FAILED with a null name), and every
topic needs DELETE (else TOPIC_AUTHORIZATION_FAILED, before the unknown-topic check).
"""

from __future__ import annotations

import uuid

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import DeleteTopicsRequest, DeleteTopicsResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.request_context import RequestContext
from pybroker.types import ZERO_UUID

API_KEY = ApiKey.DELETE_TOPICS
VERSIONS = (0, 6)
AUTHORIZES = frozenset({(AclOperation.DESCRIBE, ResourceType.TOPIC), (AclOperation.DELETE, ResourceType.TOPIC)})

_Result = DeleteTopicsResponse.DeletableTopicResult


async def handle(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id or ZERO_UUID) for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    responses = [await _delete(ctx, name, topic_id, request.timeout_ms) for name, topic_id in wanted]
    if any(r.error_code == ErrorCode.NONE for r in responses):
        # Answer once the checkpoints no longer list the deleted partitions (Kafka rewrites them
        # on delete), so a topic created again under the same name starts afresh even after a crash.
        await ctx.services.log_manager.write_all_checkpoints()
    return DeleteTopicsResponse(throttle_time_ms=0, responses=responses)


async def _delete(ctx: RequestContext, name: str | None, topic_id: uuid.UUID, timeout_ms: int) -> _Result:
    broker = ctx.services
    by_id = name is None
    if name is None:
        found = broker.metadata_cache.topic_by_id(topic_id)
        if found is None:
            return _Result(name=None, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                           error_message=None)
        name = found.name
    if not broker.config.get("delete.topic.enable"):
        return _Result(name=name, topic_id=topic_id, error_code=ErrorCode.TOPIC_DELETION_DISABLED,
                       error_message=None)
    if by_id and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
        return _Result(name=None, topic_id=topic_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                       error_message=None)
    if not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name):
        return _Result(name=name, topic_id=topic_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                       error_message=None)
    topic = broker.metadata_cache.topic(name)
    if topic is None:
        return _Result(name=name, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       error_message=None)
    if not await broker.admin_manager.delete_topic(name, timeout_ms):
        return _Result(name=name, topic_id=topic.topic_id, error_code=ErrorCode.REQUEST_TIMED_OUT,
                       error_message=None)
    return _Result(name=name, topic_id=topic.topic_id, error_code=ErrorCode.NONE, error_message=None)


def error_response(request: DeleteTopicsRequest, version: int, error: ErrorCode) -> DeleteTopicsResponse:
    """Kafka's getErrorResponse: ``error`` for every topic, by name or (v6) id."""
    if version >= 6:
        wanted = [(t.name, t.topic_id or ZERO_UUID) for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    return DeleteTopicsResponse(throttle_time_ms=0, responses=[
        _Result(name=name, topic_id=topic_id, error_code=error, error_message=None) for name, topic_id in wanted
    ])
