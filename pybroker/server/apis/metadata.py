"""Metadata (3): brokers, controller, topics with ids, partitions, leaders and epochs.

Creates missing topics when the client allows it and ``auto.create.topics.enable`` is true.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable

from pybroker.controller.metadata import (
    INTERNAL_TOPICS,
    InvalidTopicError,
    TopicMetadata,
    validate_topic_name,
)
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import MetadataRequest, MetadataResponse
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.METADATA
VERSIONS = (0, 12)
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
ZERO_UUID = uuid.UUID(int=0)

log = logging.getLogger(__name__)


def handle(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse | Awaitable[MetadataResponse]:
    """The response now; or, when the request auto-created topics, once their partitions are
    hosted (a few new logs, made off the event loop), so the client can use them at once."""
    broker = ctx.broker
    version = ctx.api_version
    if request.topics is None or (version == 0 and not request.topics):
        names = sorted(broker.metadata.topics)
        return _response(ctx, [_topic(ctx, broker.metadata.topics[name]) for name in names])
    auto_create = (request.allow_auto_topic_creation if version >= 4 else True) and broker.config.get(
        "auto.create.topics.enable"
    )
    created: list[str] = []
    topics = [_requested_topic(ctx, wanted, auto_create, created) for wanted in request.topics]
    if created:
        return _after_hosting(ctx, request, created)
    return _response(ctx, topics)


async def _after_hosting(ctx: RequestContext, request: MetadataRequest, created: list[str]) -> MetadataResponse:
    for name in created:
        try:
            await ctx.broker.replica_manager.topic_hosted(name)
        except Exception as e:  # logged by the replica manager; the topic answers LEADER_NOT_AVAILABLE
            log.warning("Auto-created topic %s is not available: %s", name, e)
    return _response(ctx, [_requested_topic(ctx, wanted, False, []) for wanted in request.topics])


def _response(ctx: RequestContext, topics: list[MetadataResponse.MetadataResponseTopic]) -> MetadataResponse:
    broker = ctx.broker
    endpoint = broker.advertised_endpoint
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=broker.node_id, host=endpoint.host, port=endpoint.port, rack=None)],
        cluster_id=broker.cluster_id,
        controller_id=broker.metadata.controller_id,
        topics=topics,
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _requested_topic(
    ctx: RequestContext, wanted: object, auto_create: bool, created: list[str]
) -> MetadataResponse.MetadataResponseTopic:
    metadata = ctx.broker.metadata
    name = wanted.name  # type: ignore[attr-defined]
    topic_id = getattr(wanted, "topic_id", ZERO_UUID) or ZERO_UUID
    if name is None:
        found = metadata.topic_by_id(topic_id)
        if found is None:
            return _missing(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID)
        return _topic(ctx, found)
    found = metadata.topic(name)
    if found is not None:
        return _topic(ctx, found)
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return _missing(name, ZERO_UUID, ErrorCode.INVALID_TOPIC_EXCEPTION)
    if not auto_create or name in INTERNAL_TOPICS:
        return _missing(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    try:
        topic = ctx.broker.create_topic(name, -1, -1, {})
    except Exception as e:  # a race with another creator, or a disk problem: report, don't fail
        log.warning("Auto-creation of topic %s failed: %s", name, e)
        return _missing(name, ZERO_UUID, ErrorCode.LEADER_NOT_AVAILABLE)
    created.append(name)
    return _topic(ctx, topic)


def _missing(name: str | None, topic_id: uuid.UUID, code: ErrorCode) -> MetadataResponse.MetadataResponseTopic:
    return MetadataResponse.MetadataResponseTopic(
        error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=[],
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _topic(ctx: RequestContext, topic: TopicMetadata) -> MetadataResponse.MetadataResponseTopic:
    if ctx.broker.replica_manager.is_hosting(topic.name):
        # Created (or grown) and its partitions not hosted yet: Kafka's answer while a new
        # topic's leaders are unknown; clients retry.
        return _missing(topic.name, topic.topic_id, ErrorCode.LEADER_NOT_AVAILABLE)
    partitions = [
        MetadataResponse.MetadataResponsePartition(
            error_code=ErrorCode.NONE,
            partition_index=index,
            leader_id=assignment.leader,
            leader_epoch=assignment.leader_epoch,
            replica_nodes=list(assignment.replicas),
            isr_nodes=list(assignment.isr),
            offline_replicas=[],
        )
        for index, assignment in enumerate(topic.partitions)
    ]
    return MetadataResponse.MetadataResponseTopic(
        error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.topic_id, is_internal=topic.is_internal,
        partitions=partitions, topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def error_response(request: MetadataRequest, version: int, error: ErrorCode) -> MetadataResponse:
    """Kafka's getErrorResponse: ``error`` on every requested topic, no brokers."""
    topics = [
        MetadataResponse.MetadataResponseTopic(
            error_code=error, name=wanted.name or "", topic_id=getattr(wanted, "topic_id", ZERO_UUID) or ZERO_UUID,
            is_internal=False, partitions=[], topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        )
        for wanted in request.topics or []
    ]
    return MetadataResponse(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=-1, topics=topics,
                            cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
