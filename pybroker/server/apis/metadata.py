"""Metadata (3): brokers, controller, topics with ids, partitions, leaders and epochs.

Creates missing topics when the client allows it and ``auto.create.topics.enable`` is true, and
answers each topic this request created as Kafka's ``AutoTopicCreationManager`` does: at once,
LEADER_NOT_AVAILABLE with no partitions (and the zero topic id), or the creation's error (e.g.
INVALID_REPLICATION_FACTOR when default.replication.factor exceeds the live brokers); the
partitions appear in later answers, once the controller has elected their leaders.
Brokers are given by their endpoint on the listener the request arrived on; brokers without that
listener are left out, and a partition whose live leader lacks it has no leader
(LISTENER_NOT_FOUND from v6, LEADER_NOT_AVAILABLE before), as Kafka's ZkMetadataCache answers.

Authorization, as Kafka's ``handleTopicMetadataRequest``: every topic needs DESCRIBE; an
all-topics request silently leaves out the others, a request naming them gets
TOPIC_AUTHORIZATION_FAILED for them (name, or with topic ids the id, and nothing else: their
existence is not disclosed). A missing topic to auto-create needs CREATE on the cluster, else
CREATE on the topic (else 29). v8+ asks for authorized-operations bitfields: the cluster's (v8-10,
0 without DESCRIBE on the cluster) and each described topic's.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping

from pybroker.common.cluster import LiveBroker
from pybroker.common.errors import ErrorCode, KafkaError
from pybroker.common.topic import (
    INTERNAL_TOPICS,
    InvalidTopicError,
    TopicExistsError,
    validate_topic_name,
)
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import MetadataRequest, MetadataResponse
from pybroker.security.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from pybroker.server.metadata_cache import CachedTopic
from pybroker.server.request_context import RequestContext, supported
from pybroker.types import ZERO_UUID

API_KEY = ApiKey.METADATA
VERSIONS = (0, 12)
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
AUTHORIZES = frozenset({
    (AclOperation.DESCRIBE, ResourceType.TOPIC),
    (AclOperation.CREATE, ResourceType.CLUSTER),
    (AclOperation.CREATE, ResourceType.TOPIC),
}) | supported(ResourceType.CLUSTER) | supported(ResourceType.TOPIC)

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    """The response from the metadata cache; missing topics are created when the client allows
    it (and answered as not ready yet)."""
    broker = ctx.services
    version = ctx.api_version
    cache = broker.metadata_cache
    if request.topics is None or (version == 0 and not request.topics):
        described = [name for name in sorted(cache.topics)
                     if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)]
        return _response(ctx, request, [_topic(ctx, cache.topics[name], cache.live_brokers) for name in described])
    auto_create = (request.allow_auto_topic_creation if version >= 4 else True) and broker.config.get(
        "auto.create.topics.enable"
    )
    refused = _refused(ctx, request.topics, auto_create)
    topics = [refused.get(id(wanted)) or await _requested_topic(ctx, wanted, auto_create)
              for wanted in request.topics]
    return _response(ctx, request, topics)


def _refused(
    ctx: RequestContext, requested: list[MetadataRequest.MetadataRequestTopic], auto_create: bool
) -> dict[int, MetadataResponse.MetadataResponseTopic]:
    """The requested topics (by ``id`` of the request entry) answered TOPIC_AUTHORIZATION_FAILED:
    without DESCRIBE, or missing and to be auto-created without CREATE."""
    cache = ctx.services.metadata_cache
    refused: dict[int, MetadataResponse.MetadataResponseTopic] = {}
    describe: dict[str, bool] = {}
    missing: list[tuple[int, str]] = []
    for wanted in requested:
        name = wanted.name
        if name is None:  # by topic id (v12): an unknown id answers UNKNOWN_TOPIC_ID
            topic_id = getattr(wanted, "topic_id", ZERO_UUID) or ZERO_UUID
            found = cache.topic_by_id(topic_id)
            if found is None:
                continue
            if not describe.setdefault(found.name, ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, found.name)):
                refused[id(wanted)] = _missing(None, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            continue
        if name not in describe:
            describe[name] = ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
        if not describe[name]:
            refused[id(wanted)] = _missing(name, ZERO_UUID, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif cache.topic(name) is None:
            missing.append((id(wanted), name))
    if auto_create and missing and not ctx.authorize_cluster(AclOperation.CREATE):
        create: dict[str, bool] = {}
        for key, name in missing:
            if name not in create:
                create[name] = ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, name)
            if not create[name]:
                refused[key] = _missing(name, ZERO_UUID, ErrorCode.TOPIC_AUTHORIZATION_FAILED, name in INTERNAL_TOPICS)
    return refused


def _response(
    ctx: RequestContext, request: MetadataRequest, topics: list[MetadataResponse.MetadataResponseTopic]
) -> MetadataResponse:
    broker = ctx.services
    cache = broker.metadata_cache
    version = ctx.api_version
    brokers = []
    for live in sorted(cache.live_brokers.values(), key=lambda b: b.broker_id):
        endpoint = live.endpoint(ctx.listener_name)
        if endpoint is not None:
            brokers.append(MetadataResponse.MetadataResponseBroker(
                node_id=live.broker_id, host=endpoint.host, port=endpoint.port, rack=live.rack))
    cluster_operations = AUTHORIZED_OPERATIONS_OMITTED
    if 8 <= version <= 10 and request.include_cluster_authorized_operations:
        cluster_operations = (ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
                              if ctx.authorize_cluster(AclOperation.DESCRIBE) else 0)
    if version >= 8 and request.include_topic_authorized_operations:
        for topic in topics:
            if topic.error_code != ErrorCode.TOPIC_AUTHORIZATION_FAILED and topic.name is not None:
                topic.topic_authorized_operations = ctx.authorized_operations(ResourceType.TOPIC, topic.name)
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=broker.cluster_id,
        controller_id=cache.controller_id,
        topics=topics,
        cluster_authorized_operations=cluster_operations,
    )


async def _requested_topic(
    ctx: RequestContext, wanted: MetadataRequest.MetadataRequestTopic, auto_create: bool
) -> MetadataResponse.MetadataResponseTopic:
    cache = ctx.services.metadata_cache
    name = wanted.name
    topic_id = wanted.topic_id or ZERO_UUID
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
        await ctx.services.admin_manager.create_topic(name, -1, -1, {})
    except TopicExistsError:  # created meanwhile by another request: not ready yet either
        pass
    except KafkaError as e:
        log.info("Auto-creation of topic %s failed: %s", name, e)
        return _missing(name, ZERO_UUID, e.code)
    except OSError as e:  # not recorded (the store rolled it back), as CreateTopics answers it
        log.warning("Auto-creation of topic %s failed: %s", name, e)
        return _missing(name, ZERO_UUID, ErrorCode.KAFKA_STORAGE_ERROR)
    except Exception as e:  # e.g. the ZooKeeper session lost: this topic's error, not the request's
        log.warning("Auto-creation of topic %s failed: %r", name, e)
        return _missing(name, ZERO_UUID, ErrorCode.UNKNOWN_SERVER_ERROR)
    return _missing(name, ZERO_UUID, ErrorCode.LEADER_NOT_AVAILABLE)


def _missing(
    name: str | None, topic_id: uuid.UUID, code: ErrorCode, is_internal: bool = False
) -> MetadataResponse.MetadataResponseTopic:
    return MetadataResponse.MetadataResponseTopic(
        error_code=code, name=name, topic_id=topic_id, is_internal=is_internal, partitions=[],
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
