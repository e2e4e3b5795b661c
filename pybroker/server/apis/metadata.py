"""Metadata (3): brokers, controller, topics with ids, partitions, leaders and epochs.

Creates missing topics when the client allows it and ``auto.create.topics.enable`` is true.
Brokers are given by their endpoint on the listener the request arrived on; brokers without that
listener are left out, and a partition whose live leader lacks it has no leader
(LISTENER_NOT_FOUND from v6, LEADER_NOT_AVAILABLE before), as Kafka's ZkMetadataCache answers.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping

from pybroker.controller.metadata import (
    INTERNAL_TOPICS,
    InvalidTopicError,
    TopicExistsError,
    validate_topic_name,
)
from pybroker.controller.requests import LiveBroker
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.errors import ErrorCode
from pybroker.protocol.messages import MetadataRequest, MetadataResponse
from pybroker.server.metadata_cache import CachedTopic
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.METADATA
VERSIONS = (0, 12)
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
AUTO_CREATE_WAIT_MS = 5000
ZERO_UUID = uuid.UUID(int=0)

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    """The response from the metadata cache. Missing topics are created when the client allows
    it; the answer then waits (at most ``AUTO_CREATE_WAIT_MS``) for their leaders, so that the
    client can use them at once (Kafka answers LEADER_NOT_AVAILABLE at once, and clients retry)."""
    broker = ctx.broker
    version = ctx.api_version
    cache = broker.metadata_cache
    if request.topics is None or (version == 0 and not request.topics):
        return _response(ctx, [_topic(ctx, cache.topics[name], cache.live_brokers) for name in sorted(cache.topics)])
    auto_create = (request.allow_auto_topic_creation if version >= 4 else True) and broker.config.get(
        "auto.create.topics.enable"
    )
    created: list[str] = []
    topics = [await _requested_topic(ctx, wanted, auto_create, created) for wanted in request.topics]
    if created:
        await broker.admin_manager.wait_for_leaders(created, AUTO_CREATE_WAIT_MS)
        topics = [await _requested_topic(ctx, wanted, False, []) for wanted in request.topics]
    return _response(ctx, topics)


def _response(ctx: RequestContext, topics: list[MetadataResponse.MetadataResponseTopic]) -> MetadataResponse:
    broker = ctx.broker
    cache = broker.metadata_cache
    brokers = []
    for live in sorted(cache.live_brokers.values(), key=lambda b: b.broker_id):
        endpoint = live.endpoint(ctx.listener_name)
        if endpoint is not None:
            brokers.append(MetadataResponse.MetadataResponseBroker(
                node_id=live.broker_id, host=endpoint.host, port=endpoint.port, rack=live.rack))
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=broker.cluster_id,
        controller_id=cache.controller_id,
        topics=topics,
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


async def _requested_topic(
    ctx: RequestContext, wanted: object, auto_create: bool, created: list[str]
) -> MetadataResponse.MetadataResponseTopic:
    cache = ctx.broker.metadata_cache
    name = wanted.name  # type: ignore[attr-defined]
    topic_id = getattr(wanted, "topic_id", ZERO_UUID) or ZERO_UUID
    if name is None:
        found = cache.topic_by_id(topic_id)
        if found is None:
            return _missing(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID)
        return _topic(ctx, found, cache.live_brokers)
    found = cache.topic(name)
    if found is not None:
        return _topic(ctx, found, cache.live_brokers)
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return _missing(name, ZERO_UUID, ErrorCode.INVALID_TOPIC_EXCEPTION)
    if not auto_create or name in INTERNAL_TOPICS:
        return _missing(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    try:
        topic_id = await ctx.broker.admin_manager.create_topic(name, -1, -1, {})
    except TopicExistsError:  # created meanwhile by someone else: not ready yet
        return _missing(name, ZERO_UUID, ErrorCode.LEADER_NOT_AVAILABLE)
    except Exception as e:  # e.g. a disk problem: report, don't fail
        log.warning("Auto-creation of topic %s failed: %s", name, e)
        return _missing(name, ZERO_UUID, ErrorCode.LEADER_NOT_AVAILABLE)
    created.append(name)
    return _missing(name, topic_id, ErrorCode.LEADER_NOT_AVAILABLE)


def _missing(name: str | None, topic_id: uuid.UUID, code: ErrorCode) -> MetadataResponse.MetadataResponseTopic:
    return MetadataResponse.MetadataResponseTopic(
        error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=[],
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _topic(
    ctx: RequestContext, topic: CachedTopic, live_brokers: Mapping[int, LiveBroker]
) -> MetadataResponse.MetadataResponseTopic:
    """A cached topic; a partition whose leader is not alive (or that has none) answers
    LEADER_NOT_AVAILABLE with leader -1, as Kafka's ZkMetadataCache does; one whose live leader
    has no endpoint on the request's listener LISTENER_NOT_FOUND (v6+) with leader -1."""
    listener = ctx.listener_name
    no_listener = ErrorCode.LISTENER_NOT_FOUND if ctx.api_version >= 6 else ErrorCode.LEADER_NOT_AVAILABLE
    partitions = []
    for index, state in sorted(topic.partitions.items()):
        leader = live_brokers.get(state.leader)
        if leader is None:
            error, leader_id = ErrorCode.LEADER_NOT_AVAILABLE, -1
        elif leader.endpoint(listener) is None:
            error, leader_id = no_listener, -1
        else:
            error, leader_id = ErrorCode.NONE, state.leader
        partitions.append(MetadataResponse.MetadataResponsePartition(
            error_code=error,
            partition_index=index,
            leader_id=leader_id,
            leader_epoch=state.leader_epoch,
            replica_nodes=list(state.replicas),
            isr_nodes=list(state.isr),
            offline_replicas=list(state.offline_replicas),
        ))
    return MetadataResponse.MetadataResponseTopic(
        error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.topic_id, is_internal=topic.is_internal,
        partitions=partitions, topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        initial_partition_count=topic.initial_partition_count,
        undeleted_partition_count=topic.undeleted_partition_count,
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
