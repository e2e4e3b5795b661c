"""ElectLeaders (43): an administrator asks for preferred or unclean leader elections.

As in Kafka's ZooKeeper mode (``KafkaApis.handleElectLeaders`` → ``ReplicaManager.electLeaders``
→ ``KafkaController.electLeaders``): the request is handed to this broker's controller, which
decides on its event queue; any broker but the active controller answers NOT_CONTROLLER for every
partition (clients send it to the controller that Metadata names). A null partition list means
every partition in this broker's metadata, and then partitions that needed no election are left
out of the answer. The answer waits, up to ``TimeoutMs``, until this broker's metadata cache shows
each newly elected leader (Kafka's DelayedElectLeader); those not shown by then answer
REQUEST_TIMED_OUT. Needs ALTER on the cluster. The top-level error (v1+) is NONE unless the whole
request failed. Named partitions are answered in the order of the Java ``HashSet`` Kafka reads them
into; an error without its own message carries the error's default one.
"""

from __future__ import annotations

import asyncio

from pybroker.common.errors import ErrorCode
from pybroker.controller.election import ElectionType, ElectLeadersOutcome
from pybroker.jvm_collections import java_hash_map_order, java_topic_partition_hash
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import ElectLeadersRequest, ElectLeadersResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.ELECT_LEADERS
VERSIONS = (0, 2)
AUTHORIZES = frozenset({(AclOperation.ALTER, ResourceType.CLUSTER)})

_Result = ElectLeadersResponse.ReplicaElectionResult
_PartitionResult = ElectLeadersResponse.PartitionResult


async def handle(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    broker = ctx.services
    loop = asyncio.get_running_loop()
    started = loop.time()
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return _error_response(request, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    try:
        election_type = ElectionType(request.election_type if ctx.api_version >= 1 else ElectionType.PREFERRED)
    except ValueError:
        # Kafka fails the request with an IllegalArgumentException: UNKNOWN_SERVER_ERROR.
        return _error_response(request, ctx.api_version, ErrorCode.UNKNOWN_SERVER_ERROR,
                               f"Unknown election type {request.election_type}")
    cache = broker.metadata_cache
    requested = request.topic_partitions
    every_partition = requested is None
    if requested is None:
        partitions = [TopicPartition(name, index) for name, topic in cache.topics.items() for index in sorted(topic.partitions)]
    else:
        # Kafka reads the request into a Java HashSet and answers in its order.
        partitions = java_hash_map_order(
            (TopicPartition(topic.topic, index) for topic in requested for index in topic.partitions),
            lambda tp: java_topic_partition_hash(tp.topic, tp.partition),
        )
    outcomes = await broker.controller.elect_leaders(partitions, election_type)
    results = {tp: (outcome.error, _message(outcome.error, outcome.message)) for tp, outcome in outcomes.items()}
    expected = {tp: leader for tp, outcome in outcomes.items() if (leader := _new_leader(outcome)) is not None}
    if expected:
        def applied(tp: TopicPartition) -> bool:
            state = cache.partition(tp)
            return state is not None and state.leader == expected[tp]

        remaining_ms = max(0.0, request.timeout_ms - (loop.time() - started) * 1000)
        await cache.wait_for(lambda: all(applied(tp) for tp in expected), remaining_ms)
        for tp in expected:
            results[tp] = (ErrorCode.NONE, None) if applied(tp) else (ErrorCode.REQUEST_TIMED_OUT,
                                                                       ErrorCode.REQUEST_TIMED_OUT.message)
    if every_partition:
        results = {tp: r for tp, r in results.items() if r[0] != ErrorCode.ELECTION_NOT_NEEDED}
    return _response(results, ErrorCode.NONE, ctx.api_version)


def _message(error: ErrorCode, message: str | None) -> str | None:
    """Kafka's ``ApiError`` made from an error alone carries the error's default message; no
    error carries none."""
    return None if error == ErrorCode.NONE else message if message is not None else error.message


def _new_leader(outcome: ElectLeadersOutcome) -> int | None:
    if outcome.error != ErrorCode.NONE or outcome.election is None or outcome.election.leader_and_isr is None:
        return None
    return outcome.election.leader_and_isr.leader


def _response(
    results: dict[TopicPartition, tuple[ErrorCode, str | None]], error: ErrorCode, version: int
) -> ElectLeadersResponse:
    by_topic: dict[str, list[ElectLeadersResponse.PartitionResult]] = {}
    for tp, (code, message) in results.items():
        by_topic.setdefault(tp.topic, []).append(
            _PartitionResult(partition_id=tp.partition, error_code=code, error_message=message)
        )
    return ElectLeadersResponse(
        throttle_time_ms=0,
        error_code=error if version >= 1 else ErrorCode.NONE,
        replica_election_results=[_Result(topic=topic, partition_result=ps) for topic, ps in by_topic.items()],
    )


def _error_response(
    request: ElectLeadersRequest, version: int, error: ErrorCode, message: str | None
) -> ElectLeadersResponse:
    """Kafka's getErrorResponse: ``error`` for every requested partition and at the top level."""
    results = {
        TopicPartition(topic.topic, index): (error, message)
        for topic in request.topic_partitions or [] for index in topic.partitions
    }
    return _response(results, error, version)


def error_response(request: ElectLeadersRequest, version: int, error: ErrorCode) -> ElectLeadersResponse:
    return _error_response(request, version, error, None)
