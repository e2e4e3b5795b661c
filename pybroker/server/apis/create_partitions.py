"""CreatePartitions (37): raise a topic's partition count, or (KIP-253) lower it.

A count below the current one is Kafka's INVALID_PARTITIONS, except for a topic with
``enable.ordered.delivery`` (the default), where it is KIP-253's shrink, as the seed has
``kafka-topics.sh --alter --partitions`` do: the partitions from the new count on are marked for
deletion, producers leave them, and they are removed once drained. A shrink never goes below the
topic's initial count, and a topic with partitions marked for deletion does not grow.

Each topic needs ALTER (else TOPIC_AUTHORIZATION_FAILED, "The topic authorization is failed.",
after the duplicate-name check and before any other), as Kafka's ``handleCreatePartitionsRequest``.
Replica lists given for the added partitions are checked as ZooKeeper-mode Kafka checks them
(INVALID_REPLICA_ASSIGNMENT, Kafka's texts: `_check_assignments`).
"""

from __future__ import annotations

from collections import Counter

from pybroker.common.errors import ErrorCode, KafkaError
from pybroker.common.topic import InvalidPartitionsError, InvalidReplicaAssignmentError
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import CreatePartitionsRequest, CreatePartitionsResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.request_context import RequestContext

API_KEY = ApiKey.CREATE_PARTITIONS
VERSIONS = (0, 3)
AUTHORIZES = frozenset({(AclOperation.ALTER, ResourceType.TOPIC)})

_Result = CreatePartitionsResponse.CreatePartitionsTopicResult


async def handle(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    counts = Counter(t.name for t in request.topics)
    results = []
    answered: set[str] = set()
    for topic in request.topics:
        if counts[topic.name] > 1:
            if topic.name not in answered:  # one result per name, and none of them is changed
                answered.add(topic.name)
                results.append(_Result(name=topic.name, error_code=ErrorCode.INVALID_REQUEST,
                                       error_message="Duplicate topic name."))
            continue
        if not ctx.authorize(AclOperation.ALTER, ResourceType.TOPIC, topic.name):
            results.append(_Result(name=topic.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                   error_message="The topic authorization is failed."))
            continue
        results.append(await _increase(ctx, request, topic))
    wanted = {t.name: t.count for t in request.topics}
    changed = [r.name for r in results if r.error_code == ErrorCode.NONE and not request.validate_only]
    if changed:  # answer once the new partitions have leaders, or the shrink reached the cache
        await ctx.services.admin_manager.wait_for_leaders(changed, request.timeout_ms, wanted)
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


async def _increase(ctx: RequestContext, request: CreatePartitionsRequest, topic: CreatePartitionsRequest.CreatePartitionsTopic) -> _Result:
    admin = ctx.services.admin_manager
    name, count = topic.name, topic.count
    try:
        cached = ctx.services.metadata_cache.topic(name)
        if cached is not None and count < cached.counts[1]:
            return await _decrease(ctx, request, topic)
        current = admin.check_partition_increase(name, count)
        assignments = topic.assignments
        if assignments is not None:
            _check_assignments(ctx, name, current, count, [list(a.broker_ids) for a in assignments])
        if not request.validate_only:
            await admin.create_partitions(
                name, count, None if assignments is None else [list(a.broker_ids) for a in assignments]
            )
    except KafkaError as e:
        return _Result(name=name, error_code=e.code, error_message=str(e))
    return _Result(name=name, error_code=ErrorCode.NONE, error_message=None)


def _check_assignments(ctx: RequestContext, name: str, current: int, count: int, assignments: list[list[int]]) -> None:
    """ZooKeeper-mode Kafka's checks of the replicas given for the added partitions, in its
    order: brokers that are not registered, the number of lists, a list without replicas or with
    a broker twice, and replica counts unlike partition 0's."""
    live = set(ctx.services.metadata_cache.live_brokers)
    unknown = [b for b in dict.fromkeys(b for replicas in assignments for b in replicas) if b not in live]
    if unknown:
        raise InvalidReplicaAssignmentError(f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
    if len(assignments) != count - current:
        raise InvalidReplicaAssignmentError(
            f"Increasing the number of partitions by {count - current} but {len(assignments)} assignments provided.")
    for partition, replicas in enumerate(assignments, start=current):
        if not replicas:
            raise InvalidReplicaAssignmentError(f"Cannot have replication factor of 0 for partition id {partition}.")
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(f"Duplicate brokers not allowed in replica assignment: "
                                     f"{', '.join(map(str, replicas))} for partition id {partition}.")
    cached = ctx.services.metadata_cache.topic(name)
    expected = len(cached.partitions[0].replicas) if cached is not None and 0 in cached.partitions else None
    bad = [(partition, len(replicas)) for partition, replicas in enumerate(assignments, start=current)
           if expected is not None and len(replicas) != expected]
    if bad:
        raise InvalidReplicaAssignmentError(
            f"Inconsistent replication factor between partitions, partition 0 has {expected} while partitions "
            f"[{', '.join(str(p) for p, _ in bad)}] have replication factors [{', '.join(str(n) for _, n in bad)}], "
            "respectively.")


async def _decrease(ctx: RequestContext, request: CreatePartitionsRequest, topic: CreatePartitionsRequest.CreatePartitionsTopic) -> _Result:
    admin = ctx.services.admin_manager
    name, count = topic.name, topic.count
    if topic.assignments is not None:
        raise InvalidPartitionsError("Replica assignments are only for added partitions, not for a shrink.")
    admin.check_partition_decrease(name, count)
    if not request.validate_only:
        await admin.shrink_partitions(name, count)
    return _Result(name=name, error_code=ErrorCode.NONE, error_message=None)


def error_response(request: CreatePartitionsRequest, version: int, error: ErrorCode) -> CreatePartitionsResponse:
    """Kafka's getErrorResponse: ``error`` for every topic."""
    return CreatePartitionsResponse(throttle_time_ms=0, results=[
        _Result(name=name, error_code=error, error_message=None)
        for name in dict.fromkeys(topic.name for topic in request.topics)
    ])
