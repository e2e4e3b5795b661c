"""The ElectLeaders (43) handler over a real metadata cache and a stub controller: the answer
waits until the cache shows each new leader (Kafka's DelayedElectLeader) or the request's
timeout passes (REQUEST_TIMED_OUT); a null partition list means every cached partition and
leaves out those that needed no election; v0 has no top-level error; ALTER on the cluster is
needed."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from pybroker.common.cluster import PartitionState
from pybroker.common.errors import ErrorCode
from pybroker.controller.election import (
    ElectionResult,
    ElectionType,
    ElectLeadersOutcome,
    LeaderAndIsr,
)
from pybroker.controller.requests import UpdateMetadata
from pybroker.protocol.messages import ElectLeadersRequest
from pybroker.security.authorizer import ANONYMOUS, AllowAllAuthorizer
from pybroker.server.apis import elect_leaders
from pybroker.server.metadata_cache import MetadataCache
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
TOPIC_ID = uuid.uuid4()


def state(tp: TopicPartition, leader: int, epoch: int = 0) -> PartitionState:
    return PartitionState(tp, 1, leader, epoch, [1, 2], 0, [1, 2])


def update(cache: MetadataCache, *states: PartitionState) -> None:
    cache.update_metadata(UpdateMetadata(1, 1, -1, list(states), [], {"t": TOPIC_ID}))


class StubController:
    """Answers every partition with the given outcome; records what it was asked."""

    def __init__(self, outcomes: dict[TopicPartition, ElectLeadersOutcome]) -> None:
        self.outcomes = outcomes
        self.asked: list[tuple[list[TopicPartition], ElectionType]] = []

    async def elect_leaders(self, partitions, election_type):
        self.asked.append((list(partitions), election_type))
        return {tp: self.outcomes[tp] for tp in partitions}


class DenyAll:
    def authorize(self, principal, host, operation, resource_type, name) -> bool:
        return False


def elected(leader: int) -> ElectLeadersOutcome:
    return ElectLeadersOutcome(ErrorCode.NONE, None, ElectionResult(LeaderAndIsr(leader, 1, (1, 2)), (1, 2)))


def context(cache: MetadataCache, controller: StubController, version: int = 2, authorizer=None):
    broker = SimpleNamespace(metadata_cache=cache, controller=controller, authorizer=authorizer or AllowAllAuthorizer())
    connection = SimpleNamespace(attributes={}, principal=ANONYMOUS, client_address="127.0.0.1", listener_name="PLAINTEXT")
    return RequestContext(broker, SimpleNamespace(api_version=version, client_id="test"), connection, elect_leaders.AUTHORIZES)


def request(partitions: list[TopicPartition] | None, election_type: int = 0, timeout_ms: int = 1000) -> ElectLeadersRequest:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions or []:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ElectLeadersRequest(
        election_type=election_type, timeout_ms=timeout_ms,
        topic_partitions=None if partitions is None else [
            ElectLeadersRequest.TopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()],
    )


def results(response) -> dict[TopicPartition, ErrorCode]:
    return {TopicPartition(r.topic, p.partition_id): p.error_code
            for r in response.replica_election_results for p in r.partition_result}


def test_answers_once_the_cache_shows_the_new_leader():
    async def main() -> None:
        cache = MetadataCache(1)
        update(cache, state(T0, 2), state(T1, 1))
        controller = StubController({T0: elected(1), T1: ElectLeadersOutcome(ErrorCode.ELECTION_NOT_NEEDED)})
        answer = asyncio.ensure_future(elect_leaders.handle(context(cache, controller), request([T0, T1])))
        await asyncio.sleep(0.05)
        assert not answer.done()  # the new leader is not in the cache yet
        update(cache, state(T0, 1, 1))
        response = await asyncio.wait_for(answer, 1)
        assert results(response) == {T0: ErrorCode.NONE, T1: ErrorCode.ELECTION_NOT_NEEDED}
        assert response.error_code == ErrorCode.NONE
        assert controller.asked == [([T1, T0], ElectionType.PREFERRED)]  # Kafka's HashSet order of t-0, t-1

    asyncio.run(main())


def test_a_leader_not_shown_in_time_answers_request_timed_out():
    async def main() -> None:
        cache = MetadataCache(1)
        update(cache, state(T0, 2))
        controller = StubController({T0: elected(1)})
        response = await elect_leaders.handle(context(cache, controller), request([T0], election_type=1, timeout_ms=30))
        assert results(response) == {T0: ErrorCode.REQUEST_TIMED_OUT}
        assert controller.asked == [([T0], ElectionType.UNCLEAN)]

    asyncio.run(main())


def test_null_partitions_mean_every_cached_partition_and_hide_the_unneeded():
    async def main() -> None:
        cache = MetadataCache(1)
        update(cache, state(T0, 1), state(T1, 2))
        failed = ElectLeadersOutcome(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "no")
        controller = StubController({T0: ElectLeadersOutcome(ErrorCode.ELECTION_NOT_NEEDED), T1: failed})
        response = await elect_leaders.handle(context(cache, controller), request(None))
        assert controller.asked == [([T0, T1], ElectionType.PREFERRED)]
        assert results(response) == {T1: ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}
        assert response.replica_election_results[0].partition_result[0].error_message == "no"

    asyncio.run(main())


def test_v0_is_preferred_and_has_no_top_level_error():
    async def main() -> None:
        cache = MetadataCache(1)
        controller = StubController({T0: ElectLeadersOutcome(ErrorCode.NOT_CONTROLLER)})
        response = await elect_leaders.handle(context(cache, controller, version=0), request([T0], election_type=1))
        assert controller.asked == [([T0], ElectionType.PREFERRED)]
        assert results(response) == {T0: ErrorCode.NOT_CONTROLLER} and response.error_code == 0

    asyncio.run(main())


def test_cluster_alter_is_required():
    async def main() -> None:
        controller = StubController({})
        ctx = context(MetadataCache(1), controller, authorizer=DenyAll())
        response = await elect_leaders.handle(ctx, request([T0, T1]))
        assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert results(response) == {T0: ErrorCode.CLUSTER_AUTHORIZATION_FAILED, T1: ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
        assert controller.asked == []

    asyncio.run(main())


def test_unknown_election_type_fails_the_request():
    async def main() -> None:
        ctx = context(MetadataCache(1), StubController({}))
        response = await elect_leaders.handle(ctx, request([T0], election_type=7))
        assert response.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
        assert results(response) == {T0: ErrorCode.UNKNOWN_SERVER_ERROR}

    asyncio.run(main())
