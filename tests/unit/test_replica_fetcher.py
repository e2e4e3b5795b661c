"""Replication end to end without a network: a leader ``ReplicaManager`` (real logs in tmp_path,
purgatories on a ``MockScheduler``), a follower ``ReplicaFetcher`` talking to it through
``LocalLeaderEndPoint``, one ``MockTime`` for both. Each test drives fetch rounds by hand; a
fetch that parks in the leader's purgatory waits until the test moves the mock clock. No sleeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from pybroker.common.cluster import LiveBroker, PartitionState
from pybroker.common.errors import ErrorCode as E
from pybroker.controller.requests import UpdateMetadata
from pybroker.log.log import Log
from pybroker.metrics.stats import BrokerTopicStats
from pybroker.replication.fetcher import (
    FetcherConfig,
    FetchStateKind,
    InitialFetchState,
    ReplicaFetcher,
    ReplicaFetcherManager,
    initial_fetch_state,
)
from pybroker.server.local_leader_endpoint import LocalLeaderEndPoint
from pybroker.server.metadata_cache import MetadataCache
from pybroker.server.partition import IsrChangeResult, Partition, ReplicaState
from pybroker.server.replica_manager import ReplicaManager
from pybroker.types import TopicPartition
from tests.mock_time import MockScheduler, MockTime
from tests.unit.batches import build_batch
from tests.unit.replica_logs import TP, batch_epochs, lead, log_bytes, make_log

LEADER, FOLLOWER, THIRD = 1, 2, 3
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
LAG_MS = 30_000


class FakeSubmitter:
    """The AlterPartition seam: proposals wait until the test answers them."""

    def __init__(self) -> None:
        self.proposals: list[tuple[TopicPartition, int, list[int], int, asyncio.Future[IsrChangeResult]]] = []

    def submit(self, tp: TopicPartition, leader_epoch: int, new_isr: list[int], partition_epoch: int):
        future: asyncio.Future[IsrChangeResult] = asyncio.get_running_loop().create_future()
        self.proposals.append((tp, leader_epoch, new_isr, partition_epoch, future))
        return future

    async def commit_last(self) -> None:
        _, _, isr, epoch, future = self.proposals[-1]
        future.set_result(IsrChangeResult(isr=tuple(isr), partition_epoch=epoch + 1))
        await settle()


async def settle(rounds: int = 5) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


def alive_brokers(local: int, *others: int) -> MetadataCache:
    """A metadata cache in which ``local`` and ``others`` are alive (ISR eligibility)."""
    cache = MetadataCache(local)
    cache.update_metadata(UpdateMetadata(0, 1, -1, [], [LiveBroker(b, ()) for b in (local, *others)], {}))
    return cache


class NoFlushLogManager:
    """The leader's log manager, as far as appends need it: flush.messages never forces a flush."""

    def maybe_flush_after_append(self, _log: Log) -> None:
        return None


class Cluster:
    def __init__(self, tmp_path, epoch: int = 0, isr=(LEADER, FOLLOWER), replicas=(LEADER, FOLLOWER),
                 submitter: FakeSubmitter | None = None, leader_log: Log | None = None,
                 follower_log: Log | None = None, **overrides: object) -> None:
        self.time = MockTime()
        self.scheduler = MockScheduler(self.time)
        self.leader = ReplicaManager(LEADER, NoFlushLogManager(), alive_brokers(LEADER, FOLLOWER, THIRD),  # type: ignore[arg-type]
                                     time=self.time, scheduler=self.scheduler, isr_submitter=submitter)
        self.leader_log = leader_log or make_log(tmp_path, "leader", **overrides)
        self.partition = Partition(TP, TOPIC_ID, LEADER, self.leader_log)
        self.leader.host_partition(self.partition)
        self.partition.make_leader(PartitionState(TP, 0, LEADER, epoch, list(isr), 0, list(replicas)),
                                   self.time.milliseconds())
        self.follower_log = follower_log or make_log(tmp_path, "follower")
        self.endpoint = LocalLeaderEndPoint(self.leader, FOLLOWER)
        self.lso_changes: list[TopicPartition] = []
        self.idle_waits: list[float] = []
        self.fetcher = ReplicaFetcher(
            LEADER, self.endpoint, {TP: self.follower_log}.get, FetcherConfig(FOLLOWER), self.time,
            on_log_start_offset_changed=self.lso_changes.append, idle_wait=self._idle,
        )
        self.fetcher.add_partitions({TP: initial_fetch_state(TOPIC_ID, LEADER, epoch, self.follower_log)})

    async def _idle(self, ms: float) -> None:
        self.idle_waits.append(ms)
        self.time.advance(ms)

    @property
    def state(self):
        return self.fetcher.states[TP]

    def produce(self, count: int = 1, acks: int = 1, timeout_ms: int = 30_000):
        batch = build_batch([(None, f"v{self.leader_log.log_end_offset + i}".encode()) for i in range(count)])
        return self.leader.append_records(acks, timeout_ms, [(TP, memoryview(bytearray(batch)))])

    async def round(self) -> None:
        """One fetch round; a fetch parked at the leader is released by its 500 ms deadline."""
        task = asyncio.ensure_future(self.fetcher.do_work())
        await settle()
        if not task.done():
            await self.scheduler.advance(500)
        await task

    async def catch_up(self, rounds: int = 10) -> None:
        for _ in range(rounds):
            await self.round()
            if (self.follower_log.log_end_offset == self.leader_log.log_end_offset
                    == self.leader_log.high_watermark == self.follower_log.high_watermark):
                return


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())


def test_follower_catches_up_byte_exact_across_epochs_and_propagates_the_hw(tmp_path):
    async def scenario() -> None:
        leader_log = make_log(tmp_path, "leader")
        lead(leader_log, 0, b"a", b"b")
        lead(leader_log, 1, b"c")
        lead(leader_log, 2, b"d", b"e")
        c = Cluster(tmp_path, epoch=3, leader_log=leader_log)
        assert c.state.state == FetchStateKind.TRUNCATING  # empty follower log: no epochs yet
        c.produce(2)  # epoch 3
        assert c.leader_log.high_watermark == 0  # the ISR member 2 has nothing yet

        await c.round()  # truncate (to HW 0), then the first fetch
        assert c.follower_log.log_end_offset == 7
        assert c.follower_log.high_watermark == 0  # the leader's HW before this fetch
        assert c.leader_log.high_watermark == 0  # the fetch offset was 0
        await c.round()  # reports offset 7 (HW 7), then parks: answered with the new HW
        assert c.leader_log.high_watermark == 7
        assert c.follower_log.high_watermark == 7
        assert log_bytes(c.follower_log) == log_bytes(c.leader_log)
        assert batch_epochs(c.follower_log) == batch_epochs(c.leader_log)
        assert c.follower_log.leader_epoch_cache.entries == c.leader_log.leader_epoch_cache.entries
        assert c.state.last_fetched_epoch == 3
    run(scenario)


def test_follower_hw_is_min_of_leader_hw_and_own_leo(tmp_path):
    async def scenario() -> None:
        # The leader's HW counts only itself; the follower (not in the ISR) is behind.
        c = Cluster(tmp_path, isr=(LEADER,), partition_max_bytes=1)
        for _ in range(3):
            c.produce(1)
        assert c.leader_log.high_watermark == 3
        c.fetcher.config = FetcherConfig(FOLLOWER, partition_max_bytes=1)  # one batch per fetch
        await c.round()
        assert (c.follower_log.log_end_offset, c.follower_log.high_watermark) == (1, 1)
        await c.round()
        assert (c.follower_log.log_end_offset, c.follower_log.high_watermark) == (2, 2)
    run(scenario)


def test_acks_all_completes_after_the_followers_next_fetch(tmp_path):
    async def scenario() -> None:
        c = Cluster(tmp_path)
        await c.round()  # empty follower: truncating, then a parked fetch that times out
        outcome = c.produce(3, acks=-1)
        assert asyncio.isfuture(outcome) and not outcome.done()
        await c.round()  # gets the records (leader HW still 0)
        assert not outcome.done()
        await c.round()  # reports LEO 3: HW 3, DelayedProduce completes
        assert outcome.done()
        assert outcome.result()[TP].error == E.NONE
        assert c.leader_log.high_watermark == 3
    run(scenario)


def test_min_insync_replicas_19_before_append_and_20_after(tmp_path):
    async def scenario() -> None:
        submitter = FakeSubmitter()
        c = Cluster(tmp_path, isr=(LEADER,), submitter=submitter, min_insync_replicas=2)
        before = c.leader_log.log_end_offset
        result = c.produce(1, acks=-1)
        assert result[TP].error == E.NOT_ENOUGH_REPLICAS
        assert c.leader_log.log_end_offset == before  # nothing written

        # The follower joins the ISR, then an acks=all append waits; the follower stops and the
        # ISR shrinks before its records are replicated: written, but answered 20.
        await c.catch_up()
        await c.round()
        assert submitter.proposals and submitter.proposals[-1][2] == [LEADER, FOLLOWER]
        await submitter.commit_last()
        assert c.partition.isr == {LEADER, FOLLOWER}
        outcome = c.produce(1, acks=-1)
        assert not outcome.done()
        c.time.advance(LAG_MS + 1)
        c.leader.shrink_isrs()
        assert c.partition.pending_isr is not None and c.leader_log.high_watermark == before
        await submitter.commit_last()
        assert outcome.done()
        assert outcome.result()[TP].error == E.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        assert c.leader_log.high_watermark == c.leader_log.log_end_offset
    run(scenario)


def test_isr_shrinks_after_the_lag_time_and_expands_once_caught_up(tmp_path):
    async def scenario() -> None:
        submitter = FakeSubmitter()
        c = Cluster(tmp_path, submitter=submitter)
        c.produce(2)
        await c.catch_up()
        c.leader.shrink_isrs()
        assert not submitter.proposals  # caught up
        c.produce(1)  # the follower stops fetching
        c.time.advance(LAG_MS)
        c.leader.shrink_isrs()
        assert not submitter.proposals  # exactly the lag: still in sync
        c.time.advance(1)
        c.leader.shrink_isrs()
        assert submitter.proposals[-1][2] == [LEADER]
        # Pending shrink: the HW still waits for the old ISR.
        assert c.partition.maximal_isr == {LEADER, FOLLOWER} and c.leader_log.high_watermark == 2
        await submitter.commit_last()
        assert c.partition.isr == {LEADER} and c.partition.partition_epoch == 1
        assert c.leader_log.high_watermark == 3

        await c.round()  # fetches offset 2..3, reports 2 < HW 3: not yet eligible
        assert len(submitter.proposals) == 1
        await c.round()  # reports 3 ≥ HW and ≥ the epoch start: expand
        assert submitter.proposals[-1][2] == [LEADER, FOLLOWER]
        assert c.partition.maximal_isr == {LEADER, FOLLOWER}  # counts at once
        c.produce(1)
        assert c.leader_log.high_watermark == 3  # held back by the pending member
        await submitter.commit_last()
        assert c.partition.isr == {LEADER, FOLLOWER} and c.partition.partition_epoch == 2
    run(scenario)


def test_last_caught_up_time_tolerates_a_constant_trickle():
    replica = ReplicaState(FOLLOWER)
    replica.reset(in_isr=False, now_ms=0)
    # Each fetch reaches the LEO the leader had at the previous fetch, never the current one.
    replica.update_fetch_state(0, 0, fetch_time_ms=1_000, leader_end_offset=10)
    assert replica.last_caught_up_time_ms == 0
    replica.update_fetch_state(10, 0, fetch_time_ms=2_000, leader_end_offset=20)
    assert replica.last_caught_up_time_ms == 1_000
    replica.update_fetch_state(20, 0, fetch_time_ms=3_000, leader_end_offset=30)
    assert replica.last_caught_up_time_ms == 2_000
    replica.update_fetch_state(25, 0, fetch_time_ms=4_000, leader_end_offset=40)  # fell behind
    assert replica.last_caught_up_time_ms == 2_000
    replica.update_fetch_state(40, 0, fetch_time_ms=5_000, leader_end_offset=40)  # reached the LEO now
    assert replica.last_caught_up_time_ms == 5_000
    assert replica.is_caught_up(41, 5_000 + LAG_MS, LAG_MS)
    assert not replica.is_caught_up(41, 5_001 + LAG_MS, LAG_MS)


def test_diverging_epoch_truncation_kip279(tmp_path):
    async def scenario() -> None:
        # The KIP-279 logs of test_truncation: broker 100 leads (epochs 0, 2, 4), 101 follows
        # with (0, 1, 3) and must truncate twice before its log equals the leader's.
        b100 = make_log(tmp_path, "broker-100")
        b101 = make_log(tmp_path, "broker-101")
        for log_ in (b100, b101):
            lead(log_, 0, b"m0")
        lead(b101, 1, b"epoch1")
        lead(b100, 2, b"x0", b"x1", b"x2")
        lead(b101, 3, b"epoch3")
        lead(b100, 4, b"y0", b"y1")
        c = Cluster(tmp_path, epoch=5, isr=(LEADER,), leader_log=b100, follower_log=b101)
        assert c.state.state == FetchStateKind.FETCHING and c.state.last_fetched_epoch == 3
        await c.round()  # DivergingEpoch (2, 4): truncate to 2, not final
        assert (b101.log_end_offset, c.state.last_fetched_epoch) == (2, 1)
        await c.round()  # DivergingEpoch (0, 1): truncate to 1
        assert (b101.log_end_offset, c.state.last_fetched_epoch) == (1, 0)
        await c.catch_up()
        assert log_bytes(b101) == log_bytes(b100)
        assert b101.leader_epoch_cache.entries == [(0, 0), (2, 1), (4, 4)]
    run(scenario)


def test_offset_out_of_range_above_the_leader_truncates_to_its_leo(tmp_path):
    async def scenario() -> None:
        follower_log = make_log(tmp_path, "follower")
        lead(follower_log, 0, b"a", b"b", b"c")  # an unclean election left the follower ahead
        leader_log = make_log(tmp_path, "leader")
        lead(leader_log, 0, b"a")
        c = Cluster(tmp_path, epoch=1, isr=(LEADER,), leader_log=leader_log, follower_log=follower_log)
        c.state.last_fetched_epoch = None  # no divergence check: the range check answers
        await c.round()
        assert follower_log.log_end_offset == 1 and c.state.fetch_offset == 1
        await c.catch_up()
        assert log_bytes(follower_log) == log_bytes(leader_log)
    run(scenario)


def test_offset_out_of_range_below_the_leader_start_restarts_the_log(tmp_path):
    async def scenario() -> None:
        leader_log = make_log(tmp_path, "leader")
        lead(leader_log, 0, *[f"r{i}".encode() for i in range(5)])
        leader_log.update_high_watermark(5)
        leader_log.maybe_increment_log_start_offset(3, "DeleteRecords")
        follower_log = make_log(tmp_path, "follower")
        lead(follower_log, 0, b"r0")
        c = Cluster(tmp_path, epoch=1, isr=(LEADER,), leader_log=leader_log, follower_log=follower_log)
        await c.round()
        assert (follower_log.log_start_offset, follower_log.log_end_offset) == (3, 3)
        assert c.lso_changes == [TP]
        await c.catch_up()
        assert follower_log.log_end_offset == 5 and follower_log.high_watermark == 5
    run(scenario)


def test_errors_back_the_partition_off(tmp_path):
    async def scenario() -> None:
        c = Cluster(tmp_path, isr=(LEADER,))
        c.produce(1)
        c.endpoint.fail_with = ConnectionError("link down")
        await c.round()
        assert c.state.delayed_until_ms == c.time.monotonic_ms() + 1000
        c.endpoint.fail_with = None
        fetches = c.endpoint.fetches
        await c.round()  # nothing fetchable: waits the back-off on the mock clock
        assert c.idle_waits == [1000] and c.endpoint.fetches == fetches
        await c.catch_up()
        assert c.follower_log.log_end_offset == 1

        # A leader-side error (an epoch newer than the leader's) backs off the same way.
        c.state.current_leader_epoch = 7
        await c.round()
        assert c.state.delayed_until_ms is not None and c.state.state == FetchStateKind.FETCHING
        # FENCED_LEADER_EPOCH (our epoch is older): failed until a new LeaderAndIsr.
        c.partition.make_leader(PartitionState(TP, 0, LEADER, 9, [LEADER], 1, [LEADER, FOLLOWER]),
                                c.time.milliseconds())
        c.state.current_leader_epoch = 0
        c.state.delayed_until_ms = None
        await c.round()
        assert c.state.state == FetchStateKind.FAILED
        c.fetcher.add_partitions({TP: initial_fetch_state(TOPIC_ID, LEADER, 9, c.follower_log)})
        assert c.state.state == FetchStateKind.FETCHING
    run(scenario)


def test_delete_records_reaches_the_follower_in_one_round_trip(tmp_path):
    async def scenario() -> None:
        c = Cluster(tmp_path)
        c.produce(5)
        outcome = c.leader.delete_records(30_000, {TP: 0}, leader_only=False)
        assert asyncio.isfuture(outcome) and not outcome.done()  # LW -1: the follower never fetched
        assert c.partition.low_watermark() == -1
        await c.catch_up()
        assert outcome.done() and outcome.result()[TP].low_watermark == 0
        assert c.leader_log.high_watermark == 5 and c.follower_log.high_watermark == 5

        # The follower is caught up: its next fetch parks at the leader.
        parked = asyncio.ensure_future(c.fetcher.do_work())
        await settle()
        assert not parked.done() and c.leader.fetch_purgatory.watched(TP) == 1
        before = c.time.monotonic_ms()
        deleted = c.leader.delete_records(30_000, {TP: 3}, leader_only=False)
        await settle()
        assert parked.done()  # woken by the log start offset move, not by the 500 ms deadline
        await parked
        assert c.time.monotonic_ms() == before
        assert c.follower_log.log_start_offset == 3 and c.lso_changes == [TP]
        assert not deleted.done()  # the leader learns it from the next fetch
        await c.round()
        assert deleted.done() and deleted.result()[TP].error == E.NONE
        assert deleted.result()[TP].low_watermark == 3
    run(scenario)


def test_a_follower_behind_the_leaders_log_start_is_answered_without_parking(tmp_path):
    """The log start offset moved between two follower fetches: the next fetch still reports the
    old one, so it is answered at once with the new one instead of waiting replica.fetch.wait.max.ms."""
    async def scenario() -> None:
        c = Cluster(tmp_path)
        c.produce(5)
        await c.catch_up()
        deleted = c.leader.delete_records(30_000, {TP: 4}, leader_only=False)
        before = c.time.monotonic_ms()
        await c.fetcher.do_work()  # returns without any clock advance: not parked
        assert c.time.monotonic_ms() == before and c.follower_log.log_start_offset == 4
        await c.round()  # reports 4 now: parks until its deadline, and completes the delete
        assert deleted.done() and deleted.result()[TP].low_watermark == 4
    run(scenario)


def test_follower_counts_the_bytes_it_appends_as_replication_bytes_in(tmp_path):
    async def scenario() -> None:
        c = Cluster(tmp_path)
        stats = c.fetcher.topic_stats = BrokerTopicStats()
        c.produce(3)
        c.produce(2)
        await c.catch_up()
        assert c.follower_log.log_end_offset == 5
        # Kafka's ReplicationBytesInPerSec: the record bytes appended, all topics only; they are
        # the bytes the leader counted as ReplicationBytesOutPerSec.
        assert stats.replication_bytes_in == len(log_bytes(c.follower_log)) > 0
        assert stats.replication_bytes_in == c.leader.topic_stats.replication_bytes_out
        assert not stats.topics and stats.all.bytes_in == 0  # not client bytes in
    run(scenario)


def test_fetcher_manager_groups_by_leader_and_shuts_down_idle_fetchers(tmp_path):
    async def scenario() -> None:
        endpoints: list[int] = []

        def endpoint_for(broker: int) -> LocalLeaderEndPoint:
            endpoints.append(broker)
            return LocalLeaderEndPoint(None, FOLLOWER)  # type: ignore[arg-type]

        manager = ReplicaFetcherManager(FetcherConfig(FOLLOWER), endpoint_for, lambda tp: None,
                                        start_fetchers=False)
        a, b = TopicPartition("a", 0), TopicPartition("b", 0)
        manager.add_fetcher_for_partitions({
            a: InitialFetchState(TOPIC_ID, LEADER, 0, 0, None),
            b: InitialFetchState(TOPIC_ID, THIRD, 0, 0, None),
        })
        assert sorted(endpoints) == [LEADER, THIRD] and len(manager.fetchers) == 2
        assert set(manager.remove_fetcher_for_partitions([a])) == {a}
        await manager.shutdown_idle_fetchers()
        assert list(manager.fetchers) == [(THIRD, 0)]
        await manager.shutdown()
        assert not manager.fetchers
    run(scenario)


def test_an_io_error_appending_fetched_records_fails_the_partition_and_is_reported(tmp_path):
    """Kafka's KafkaStorageException in processPartitionData: the partition is marked failed and
    the error goes to the failure channel (here: the callback the replica manager installs)."""
    async def scenario() -> None:
        c = Cluster(tmp_path, isr=(LEADER,))
        c.produce(2)
        reported: list[tuple[TopicPartition, OSError]] = []
        c.fetcher.on_storage_error = lambda tp, error: reported.append((tp, error))

        def broken(*_args: object) -> None:
            raise OSError(5, "Input/output error")

        c.follower_log.append_as_follower = broken  # type: ignore[method-assign]
        await c.round()
        assert c.state.state == FetchStateKind.FAILED
        assert [(tp, e.errno) for tp, e in reported] == [(TP, 5)]
    run(scenario)
