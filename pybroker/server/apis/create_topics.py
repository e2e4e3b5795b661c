"""CreateTopics (19): create topics with partition counts, replication and config overrides.

Authorization, as Kafka's ``handleCreateTopicsRequest``: after the duplicate-name check, CREATE on
the cluster allows every topic, else each topic needs CREATE (else TOPIC_AUTHORIZATION_FAILED,
"Authorization failed."). A created topic's configs, partition count, replication factor and id
are returned only with DESCRIBE_CONFIGS on it; without, v5+ answers TopicConfigErrorCode
TOPIC_AUTHORIZATION_FAILED (for a topic refused before its creation too, not for one whose
creation fails, as Kafka resets it). The configs (v5+) are listed as DescribeConfigs lists them, and also
for a creation that is only validated; a topic not created has an empty config list, as Kafka's.

A topic whose creation this broker could not record (the single broker's ``cluster-metadata.json``
not written, e.g. the process out of descriptors) answers KAFKA_STORAGE_ERROR and is not created.
One recorded but whose log a replica on this broker could not create while its dir stayed online
(out of descriptors or memory; a failed disk takes the dir offline instead) answers
KAFKA_STORAGE_ERROR too, with the partition and the error: the topic exists, and the partitions
without a log are offline (Kafka answers success there and leaves them offline silently).

Explicit replica assignments are checked as ZooKeeper-mode Kafka checks them, with its texts
(`_partition_layout`); they may name brokers that are not registered. The answer waits until every
partition has a leader: a partition none of whose replicas is registered never gets one, and its
topic answers REQUEST_TIMED_OUT without a message at the request's timeout, as Kafka's.
"""

from __future__ import annotations

import uuid
from collections import Counter

from pybroker.common.errors import ErrorCode, InvalidRequestError, KafkaError
from pybroker.common.topic import InvalidReplicaAssignmentError
from pybroker.jvm_collections import scala_int_map_string
from pybroker.log.config import validate_topic_configs
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import CreateTopicsRequest, CreateTopicsResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server import config_describer
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.CREATE_TOPICS
VERSIONS = (0, 7)
AUTHORIZES = frozenset({
    (AclOperation.CREATE, ResourceType.CLUSTER),
    (AclOperation.CREATE, ResourceType.TOPIC),
    (AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC),
})

_Result = CreateTopicsResponse.CreatableTopicResult


async def handle(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    counts = Counter(topic.name for topic in request.topics)
    names = [name for name, count in counts.items() if count == 1]
    if ctx.authorize_cluster(AclOperation.CREATE):
        may_create = set(names)
    else:
        may_create = {name for name in names if ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, name)}
    may_describe = {name for name in counts if ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, name)}

    def refused(name: str, code: ErrorCode, message: str) -> _Result:
        # Kafka marks every topic it may not describe before it creates any, and only the
        # creations that fail are reset: a refused topic keeps the mark.
        result = _error(name, code, message)
        if ctx.api_version >= 5 and name not in may_describe:
            result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return result

    results = []
    partition_counts: dict[str, int] = {}
    answered: set[str] = set()
    for topic in request.topics:
        if counts[topic.name] > 1:
            # Like Kafka: none of them is created, and the name gets one result (results are keyed by name).
            if topic.name not in answered:
                answered.add(topic.name)
                results.append(refused(topic.name, ErrorCode.INVALID_REQUEST,
                                       f"Create topics request from client contains multiple entries for the topic {topic.name}"))
            continue
        if topic.name not in may_create:
            results.append(refused(topic.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."))
            continue
        result = await _create(ctx, request, topic)
        partition_counts[topic.name] = result.num_partitions
        if topic.name not in may_describe and result.error_code == ErrorCode.NONE:
            _hide_configs(result, ctx.api_version)
        results.append(result)
    # Answer once every new partition has a leader (Kafka's DelayedCreatePartitions): one whose
    # replicas are all on brokers that are not registered never gets one, and its topic answers
    # REQUEST_TIMED_OUT without a message, as Kafka's does.
    created = [r for r in results if r.error_code == ErrorCode.NONE and not request.validate_only]
    wanted = {r.name: partition_counts[r.name] for r in created}
    if created and not await ctx.services.admin_manager.wait_for_leaders(list(wanted), request.timeout_ms, wanted):
        for result in created:
            cached = ctx.services.metadata_cache.topic(result.name)
            if cached is None or not cached.has_all_leaders or len(cached.partitions) < wanted[result.name]:
                result.error_code = ErrorCode.REQUEST_TIMED_OUT
                result.error_message = None
                # Kafka resets what it described of a topic whose creation failed.
                result.configs = []
                result.num_partitions = result.replication_factor = -1
                if ctx.api_version >= 5:
                    result.topic_config_error_code = ErrorCode.NONE
    for result in created:
        if result.error_code == ErrorCode.NONE:
            _check_local_logs(ctx, result)
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


def _check_local_logs(ctx: RequestContext, result: _Result) -> None:
    """KAFKA_STORAGE_ERROR for a new topic of which a replica on this broker has no log: its
    creation failed with the dir online (see the module doc). The leaders are known here, so
    this broker's LeaderAndIsr for the topic, which comes before them, has been applied."""
    broker = ctx.services
    topic = broker.metadata_cache.topic(result.name)
    if topic is None:
        return
    local = [TopicPartition(result.name, index) for index, state in sorted(topic.partitions.items())
             if broker.node_id in state.replicas]
    failed = broker.log_manager.creation_error(local)
    if failed is not None:
        tp, error = failed
        result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
        result.error_message = (f"The log of partition {tp} could not be created on broker {broker.node_id} "
                                f"({error}); the partitions without a log are offline")


def _hide_configs(result: _Result, version: int) -> None:
    """No DESCRIBE_CONFIGS on the topic: nothing about it but the outcome (Kafka's
    ``maybePopulateMetadataAndConfigs`` is skipped, leaving its result's empty config list)."""
    result.num_partitions = result.replication_factor = -1
    result.configs = []
    result.topic_id = uuid.UUID(int=0)
    if version >= 5:
        result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def _error(name: str, code: ErrorCode, message: str | None) -> _Result:
    """A topic not created: Kafka's result keeps (or is reset to) an empty config list."""
    return _Result(name=name, error_code=code, error_message=message, num_partitions=-1, replication_factor=-1, configs=[])


def _partition_layout(ctx: RequestContext, topic: CreateTopicsRequest.CreatableTopic) -> tuple[int, int, list[list[int]] | None]:
    """The partition count, replication factor and explicit assignment (None: the broker
    assigns) of a topic to create, checked as ZooKeeper-mode Kafka checks them
    (``ZkAdminManager.createTopics``, ``AdminZkClient.validateTopicCreate``): an existing name
    first, then the assignment's replica counts, duplicates and partition numbering. Brokers
    named in an explicit assignment need not exist (Kafka: "this follows the existing logic in
    TopicCommand"): a replica on a broker that is not registered starts offline and out of the
    ISR. A partition index given twice keeps its last replica list, as in Kafka's map."""
    assignments = topic.assignments
    partitions, replication = topic.num_partitions, topic.replication_factor
    if not assignments:
        return partitions, replication, None
    if partitions != -1 or replication != -1:
        raise InvalidRequestError("Both numPartitions or replicationFactor and "
                                  "replicasAssignments were set. Both cannot be used at the same time.")
    name = topic.name
    ctx.services.admin_manager.check_topic_absent(name)
    by_index: dict[int, list[int]] = {}
    for a in assignments:
        by_index[a.partition_index] = list(a.broker_ids)
    if len({len(replicas) for replicas in by_index.values()}) != 1:
        raise InvalidReplicaAssignmentError("All partitions should have the same number of replicas")
    if any(len(set(replicas)) != len(replicas) for replicas in by_index.values()):
        raise InvalidReplicaAssignmentError(f"Duplicate replica assignment found: {scala_int_map_string(by_index)}")
    # Kafka's test is that the non-negative indexes add up to 0 + 1 + ... + (n - 1); a negative
    # index fails here too.
    if sorted(by_index) != list(range(len(by_index))):
        raise InvalidReplicaAssignmentError("partitions should be a consecutive 0-based integer sequence")
    ordered = [by_index[index] for index in range(len(by_index))]
    return len(ordered), len(ordered[0]), ordered


async def _create(ctx: RequestContext, request: CreateTopicsRequest, topic: CreateTopicsRequest.CreatableTopic) -> _Result:
    broker = ctx.services
    name = topic.name
    configs = {c.name: c.value for c in topic.configs}
    checked: dict[str, str] = {}
    try:
        partitions, replication, assignment = _partition_layout(ctx, topic)
        if partitions == -1:
            partitions = broker.config.get("num.partitions")
        if replication == -1:
            replication = broker.config.get("default.replication.factor")
        if request.validate_only:
            if assignment is None:
                broker.admin_manager.check_new_topic(name, partitions, replication)
            checked = validate_topic_configs(configs)
            created_id = None
        else:
            created_id = await broker.admin_manager.create_topic(name, partitions, replication, configs, assignment)
    except KafkaError as e:
        return _error(name, e.code, str(e))
    except OSError as e:  # not recorded (the store rolled it back): no topic
        return _error(name, ErrorCode.KAFKA_STORAGE_ERROR, f"Could not record topic {name}: {e}")
    # Kafka describes the topic's configs (from the request's overrides) also when it only
    # validates the creation.
    described = None
    if ctx.api_version >= 5:
        overrides = checked if request.validate_only else None
        described = [
            CreateTopicsResponse.CreatableTopicConfigs(
                name=e.name, value=e.value, read_only=e.read_only, config_source=e.source, is_sensitive=False
            )
            for e in config_describer.describe_topic(broker, name, overrides=overrides)
        ]
    result = _Result(name=name, error_code=ErrorCode.NONE, error_message=None,
                     num_partitions=partitions, replication_factor=replication, configs=described)
    if created_id is not None:
        result.topic_id = created_id
    return result


def error_response(request: CreateTopicsRequest, version: int, error: ErrorCode) -> CreateTopicsResponse:
    """Kafka's getErrorResponse: ``error`` for every topic (no message: it could leak internals)."""
    return CreateTopicsResponse(throttle_time_ms=0, topics=[
        _error(name, error, None) for name in dict.fromkeys(topic.name for topic in request.topics)
    ])
