"""One partition as this broker sees it: leadership, replica states, high and low watermarks.

Owns Kafka's ``Partition`` state: the leader id and leader epoch, the assigned replicas and the
ISR, the state this leader keeps about each remote replica (its log end offset and log start
offset, as its fetches report them), and the rules derived from them: the high watermark (the
smallest log end offset in the ISR) and the low watermark (the smallest log start offset over the
leader and every alive replica, which DeleteRecords waits on). The local ``Log`` is owned here
once the partition is hosted.

Leader side of replication (Kafka's ``Partition``/``Replica``), all on the event loop: the replica
manager calls ``update_follower_fetch_state`` after each follower fetch it served, and
``maybe_shrink_isr`` periodically; ISR changes are proposed through an ``IsrChangeSubmitter`` (the
AlterPartition seam) and applied by ``on_isr_change_committed`` when its answer comes back. Clocks
come from an injected ``Time`` or ``now_ms`` parameters.

The ISR keeps Kafka's order (``isr_order``): as the controller sent it, a caught-up follower
appended at the end, the out-of-sync ones dropped from their places. Kafka keeps it in a Scala
set, which keeps that order up to four members, and proposes it to the controller in that order,
so Metadata answers (``Isr: 2,3,1`` after a reassignment) and log lines read the same.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from pybroker.common.cluster import PartitionState
from pybroker.common.errors import ErrorCode, KafkaError, OffsetNotAvailableError
from pybroker.log.log import AppendOrigin, Log, LogAppendInfo, OffsetOutOfRangeError
from pybroker.log.producer_state import ProducerEntry
from pybroker.metrics.stats import IsrStats
from pybroker.scheduler import SystemTime, Time
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)
# Kafka's state change logger: leader and follower transitions, "[Broker id=N] ..." lines.
state_change_log = logging.getLogger("state.change.logger")

UNKNOWN_OFFSET = -1
# ListOffsets' special timestamps, and its isolation level that reads to the last stable offset.
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
READ_COMMITTED = 1
DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000


@dataclass(frozen=True)
class IsrChangeResult:
    """The controller's answer to a proposed ISR: the committed ISR and partition epoch, or an
    error (then the other fields are ignored)."""

    error: ErrorCode = ErrorCode.NONE
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


class IsrChangeSubmitter(Protocol):
    """The AlterPartition seam: send a proposed ISR for ``tp`` to the controller."""

    def submit(
        self, tp: TopicPartition, leader_epoch: int, new_isr: list[int], partition_epoch: int
    ) -> Awaitable[IsrChangeResult]: ...


@dataclass(frozen=True)
class PendingIsrChange:
    """An ISR change in flight: ``proposed`` is what was sent, in its order; ``expansion`` tells
    whether the maximal ISR is the proposed one (expand) or the committed one (shrink)."""

    proposed: tuple[int, ...]
    expansion: bool


@dataclass
class FollowerFetchOutcome:
    """What a follower fetch changed on the leader, for the replica manager to complete delayed
    produce (HW), fetch (HW) and delete-records (low watermark) operations."""

    high_watermark_changed: bool = False
    log_start_offset_changed: bool = False
    isr_expansion_proposed: bool = False


# AlterPartition answers after which the controller will tell this leader its newer state.
_WAIT_FOR_LEADER_AND_ISR = frozenset({
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.INVALID_REQUEST,
})


class NotLeaderError(KafkaError):
    """This broker does not lead the partition (or, for a follower's request, hosts no replica)."""

    code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class NotEnoughReplicasError(KafkaError):
    """The ISR is smaller than min.insync.replicas."""

    code = ErrorCode.NOT_ENOUGH_REPLICAS


class FencedLeaderEpochError(KafkaError):
    """The request carries a leader epoch older than ours."""

    code = ErrorCode.FENCED_LEADER_EPOCH


class PolicyViolationError(KafkaError):
    """A request the topic's policy refuses (DeleteRecords on a compacted topic)."""

    code = ErrorCode.POLICY_VIOLATION


class UnknownLeaderEpochError(KafkaError):
    """The request carries a leader epoch newer than ours."""

    code = ErrorCode.UNKNOWN_LEADER_EPOCH


@dataclass
class ReplicaState:
    """What the leader knows of a follower, from the follower's fetch requests."""

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_caught_up_time_ms: int = 0
    last_fetch_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET

    def reset(self, in_isr: bool, now_ms: int) -> None:
        self.log_end_offset = self.log_start_offset = UNKNOWN_OFFSET
        self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
        self.last_fetch_time_ms = 0
        self.last_caught_up_time_ms = now_ms if in_isr else 0

    def update_fetch_state(
        self, fetch_offset: int, log_start_offset: int, fetch_time_ms: int, leader_end_offset: int
    ) -> None:
        """Kafka's ``Replica.updateFetchState``: caught up now if the fetch reached the leader's
        LEO at this fetch; caught up as of the previous fetch if it reached the LEO the leader had
        then; otherwise ``last_caught_up_time_ms`` stays."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_time_ms = fetch_time_ms
        self.last_fetch_leader_log_end_offset = leader_end_offset

    def is_caught_up(self, leader_end_offset: int, now_ms: int, lag_time_max_ms: int) -> bool:
        return leader_end_offset == self.log_end_offset or now_ms - self.last_caught_up_time_ms <= lag_time_max_ms


class Partition:
    """A hosted partition: its log plus leadership and replica state."""

    def __init__(
        self, topic_partition: TopicPartition, topic_id: str, local_broker_id: int, log: Log,
        time: Time | None = None,
    ) -> None:
        self.topic_partition = topic_partition
        self.topic_id = topic_id
        self.local_broker_id = local_broker_id
        self.log = log
        self.leader_id = -1
        self.leader_epoch = -1
        # KIP-253: the topic's undeleted partition count, adopted with the leader epoch of the
        # same LeaderAndIsr (-1: the controller sent none; no check).
        self.undeleted_partition_count = -1
        self.partition_epoch = 0
        self.replicas: list[int] = []
        self.isr: set[int] = set()
        self.isr_order: tuple[int, ...] = ()  # the ISR in Kafka's order (the module docstring)
        self.remote_replicas: dict[int, ReplicaState] = {}
        # Whether a broker is alive (ISR eligibility, the low watermark): the replica manager
        # answers from its metadata cache, Kafka's ZooKeeper-mode rule; alone, every broker is.
        self.is_broker_alive: Callable[[int], bool] = lambda broker: True
        self.time: Time = time or SystemTime()
        self.replica_lag_time_max_ms = DEFAULT_REPLICA_LAG_TIME_MAX_MS
        self.leader_epoch_start_offset = UNKNOWN_OFFSET
        self.pending_isr: PendingIsrChange | None = None
        self.isr_submitter: IsrChangeSubmitter | None = None
        # Told (with the partition) when a committed ISR change moved the high watermark, so the
        # replica manager completes delayed operations; set by the replica manager.
        self.on_high_watermark_changed: Callable[[Partition], None] | None = None
        self.isr_stats = IsrStats()  # the replica manager's, once hosted (metrics)
        self.log_ident = f"[Partition {topic_partition} broker={local_broker_id}] "

    # --- leadership ----------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    def make_leader(self, state: PartitionState, now_ms: int) -> bool:
        """Become (or stay) leader as the controller decided (Kafka's ``makeLeader``); True if
        the leader epoch is new. A new epoch starts at the log end offset, and the leader
        forgets what it knew of the followers (they report again in their next fetch)."""
        new_epoch = state.leader_epoch > self.leader_epoch
        previous_leader, previous_epoch = self.leader_id, self.leader_epoch
        self.leader_id = self.local_broker_id
        self.undeleted_partition_count = state.undeleted_partition_count
        self.partition_epoch = state.partition_epoch
        self.replicas = list(state.replicas)
        self._set_isr(state.isr)
        self.pending_isr = None
        if new_epoch:
            self.leader_epoch = state.leader_epoch
            self.leader_epoch_start_offset = self.log.log_end_offset
            self.log.assign_leader_epoch(state.leader_epoch, self.log.log_end_offset)
            self.remote_replicas = {
                broker: ReplicaState(broker) for broker in state.replicas if broker != self.local_broker_id
            }
            for replica in self.remote_replicas.values():
                replica.reset(replica.broker_id in self.isr, now_ms)
            state_change_log.info(
                "[Broker id=%d] Leader %s with topic id %s starts at leader epoch %d from offset %d with partition "
                "epoch %d, high watermark %d, ISR [%s], adding replicas [] and removing replicas [] %s. Previous "
                "leader %s and previous leader epoch was %d.", self.local_broker_id, self.topic_partition,
                self.topic_id or None, self.leader_epoch, self.leader_epoch_start_offset, self.partition_epoch,
                self.log.high_watermark, _ids(self.isr_order), "(under-min-isr)" if self.is_under_min_isr else "",
                _option(previous_leader), previous_epoch)
        self.maybe_increment_high_watermark()
        return new_epoch

    def make_follower(self, state: PartitionState) -> bool:
        """Follow ``state.leader`` (Kafka's ``makeFollower``); True if the leader epoch is new
        (the fetcher then starts again from this log). A follower keeps no ISR and no replica
        states."""
        new_epoch = state.leader_epoch > self.leader_epoch
        previous_leader, previous_epoch = self.leader_id, self.leader_epoch
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.undeleted_partition_count = state.undeleted_partition_count
        self.partition_epoch = state.partition_epoch
        self.replicas = list(state.replicas)
        self._set_isr(())
        self.pending_isr = None
        self.remote_replicas = {}
        self.leader_epoch_start_offset = UNKNOWN_OFFSET
        if new_epoch:
            state_change_log.info(
                "[Broker id=%d] Follower %s starts at leader epoch %d from offset %d with partition epoch %d and high "
                "watermark %d. Current leader is %d. Previous leader %s and previous leader epoch was %d.",
                self.local_broker_id, self.topic_partition, self.leader_epoch, self.log.log_end_offset,
                self.partition_epoch, self.log.high_watermark, self.leader_id, _option(previous_leader),
                previous_epoch)
        return new_epoch

    def partition_count_error(self, client_count: int, producing: bool) -> ErrorCode:
        """KIP-253's check of a client's Produce or Fetch (``client_count`` -1: it sent none).
        A client whose undeleted partition count differs from the one this leader adopted with
        its epoch partitioned by another count: INVALID_PARTITION_METADATA, so it refreshes its
        metadata and retries. A write to a partition marked for deletion is refused too
        (NOT_LEADER_OR_FOLLOWER for a client that sent no count, a retriable error every Kafka
        client knows), so that the partition drains. Off with ``enable.ordered.delivery=false``."""
        own = self.undeleted_partition_count
        if own < 0 or not self.log.config.enable_ordered_delivery:
            return ErrorCode.NONE
        if client_count >= 0 and client_count != own:
            return ErrorCode.INVALID_PARTITION_METADATA
        if producing and self.topic_partition.partition >= own:
            return ErrorCode.INVALID_PARTITION_METADATA if client_count >= 0 else ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    def check_leader_epoch(self, requested_epoch: int) -> None:
        """Kafka's epoch fencing for requests that carry CurrentLeaderEpoch (-1 skips it)."""
        if requested_epoch < 0:
            return
        if requested_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"Request epoch {requested_epoch} is older than the current leader epoch {self.leader_epoch}"
            )
        if requested_epoch > self.leader_epoch:
            raise UnknownLeaderEpochError(
                f"Request epoch {requested_epoch} is newer than the current leader epoch {self.leader_epoch}"
            )

    def require_leader(self) -> Log:
        if not self.is_leader:
            raise NotLeaderError(
                f"Leader not local for partition {self.topic_partition} on broker {self.local_broker_id}"
            )
        return self.log

    def local_log(self, current_leader_epoch: int, require_leader: bool = True) -> Log:
        """The log a request that carries CurrentLeaderEpoch reads: NotLeaderError when it must be
        the leader's and this broker follows, then the epoch fencing (``check_leader_epoch``)."""
        log_ = self.require_leader() if require_leader else self.log
        self.check_leader_epoch(current_leader_epoch)
        return log_

    # --- the leader's answers ------------------------------------------------------------------

    def fetch_offset_for_timestamp(
        self, timestamp: int, isolation_level: int | None, current_leader_epoch: int, fetch_only_from_leader: bool,
    ) -> tuple[int, int, int] | None:
        """ListOffsets v1+ (Kafka's ``fetchOffsetForTimestamp``): (offset, timestamp, leader
        epoch) for ``timestamp``, which may be EARLIEST_TIMESTAMP, LATEST_TIMESTAMP or
        MAX_TIMESTAMP; None when no record qualifies. A replica (``isolation_level`` None) sees
        the whole log, a consumer up to the high watermark, a read_committed one up to the last
        stable offset. A new leader whose high watermark is short of its epoch's start raises
        ``OffsetNotAvailableError`` for a consumer asking for the latest offset or finding none."""
        log_ = self.local_log(current_leader_epoch, fetch_only_from_leader)
        if isolation_level is None:
            max_offset = log_.log_end_offset
        elif isolation_level == READ_COMMITTED:
            max_offset = log_.last_stable_offset
        else:
            max_offset = log_.high_watermark
        if timestamp == EARLIEST_TIMESTAMP:
            return log_.log_start_offset, -1, log_.leader_epoch_cache.epoch_for_offset(log_.log_start_offset)
        hw_behind_epoch = isolation_level is not None and self.leader_epoch_start_offset > log_.high_watermark
        if timestamp == LATEST_TIMESTAMP:
            found: tuple[int, int, int] | None = None if hw_behind_epoch else (max_offset, -1, self.leader_epoch)
        elif timestamp == MAX_TIMESTAMP:
            found = log_.fetch_max_timestamp(max_offset)
        else:
            found = log_.fetch_offset_by_timestamp(timestamp, max_offset)
        if found is None and hw_behind_epoch:
            raise OffsetNotAvailableError(
                f"Failed to fetch offsets for partition {self.topic_partition} with leader epoch {self.leader_epoch} "
                f"as this partition's high watermark ({log_.high_watermark}) is lagging behind the start offset "
                f"from the beginning of this epoch ({self.leader_epoch_start_offset})."
            )
        return found

    def legacy_fetch_offsets_for_timestamp(
        self, timestamp: int, max_num_offsets: int, is_from_consumer: bool, fetch_only_from_leader: bool,
    ) -> list[int]:
        """ListOffsets v0 (Kafka's ``legacyFetchOffsetsForTimestamp``): segment start offsets by
        the segments' modification times; a consumer's list starts at most at the high watermark."""
        log_ = self.require_leader() if fetch_only_from_leader else self.log
        offsets = log_.legacy_offsets_before(timestamp, max_num_offsets, self.time.milliseconds())
        if is_from_consumer and offsets and offsets[0] > log_.high_watermark:
            return [log_.high_watermark, *(offset for offset in offsets if offset <= log_.high_watermark)]
        return offsets

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch on the leader (Kafka's ``lastOffsetForLeaderEpoch``): (epoch, end
        offset) of ``leader_epoch``, the largest epoch at or below it that this log has."""
        log_ = self.local_log(current_leader_epoch)
        return log_.leader_epoch_cache.end_offset_for(leader_epoch, log_.log_end_offset)

    def maybe_start_transaction_verification(self, producer_id: int, producer_epoch: int, now_ms: int) -> object | None:
        """KIP-890 (Kafka's ``maybeStartTransactionVerification``): the verification guard of a
        transactional batch that would open the producer's transaction here, started now unless one
        is under way; None when its transaction is already open."""
        producer_state = self.log.producer_state
        if not producer_state.needs_verification(producer_id, producer_epoch):
            return None
        return producer_state.start_verification(producer_id, now_ms)

    def active_producers(self) -> dict[int, ProducerEntry]:
        """DescribeProducers: producer id → the state this replica keeps of it."""
        return self.log.producer_state.producers

    # --- watermarks ----------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def is_under_min_isr(self) -> bool:
        return self.is_leader and len(self.isr) < self.log.config.min_insync_replicas

    @property
    def maximal_isr(self) -> set[int]:
        """The committed ISR plus a pending expansion (a pending shrink still counts the old
        members): the set the high watermark waits for."""
        if self.pending_isr is not None and self.pending_isr.expansion:
            return set(self.pending_isr.proposed)
        return set(self.isr)

    def is_replica_isr_eligible(self, broker: int) -> bool:
        """ZooKeeper mode: the broker is alive in the metadata the controller sent."""
        return self.is_broker_alive(broker)

    def maybe_increment_high_watermark(self, now_ms: int | None = None) -> bool:
        """Kafka's ``maybeIncrementLeaderHW``: the leader LEO, lowered to the LEO of every remote
        replica in the maximal ISR and of every caught-up, ISR-eligible one; moves only forward.
        True if it moved."""
        if not self.is_leader:
            return False
        now = self.time.milliseconds() if now_ms is None else now_ms
        leader_end = self.log.log_end_offset
        new_hw = leader_end
        maximal = self.maximal_isr
        for broker, state in self.remote_replicas.items():
            if broker in maximal or (
                self.is_replica_isr_eligible(broker)
                and state.is_caught_up(leader_end, now, self.replica_lag_time_max_ms)
            ):
                new_hw = min(new_hw, state.log_end_offset)
        if new_hw > self.log.high_watermark:
            self.log.update_high_watermark(new_hw)
            return True
        return False

    # --- follower fetches and the ISR ----------------------------------------------------------

    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, follower_log_start_offset: int, fetch_time_ms: int,
        leader_end_offset: int,
    ) -> FollowerFetchOutcome:
        """A follower fetch without divergence was served (Kafka's ``updateFollowerFetchState``):
        record its LEO and log start offset, then try ISR expansion, the HW and the low
        watermark, in that order."""
        outcome = FollowerFetchOutcome()
        state = self.remote_replicas.get(replica_id)
        if state is None or not self.is_leader:
            return outcome
        old_log_start = state.log_start_offset
        old_hw = self.log.high_watermark
        state.update_fetch_state(fetch_offset, follower_log_start_offset, fetch_time_ms, leader_end_offset)
        outcome.log_start_offset_changed = old_log_start != state.log_start_offset
        outcome.isr_expansion_proposed = self.maybe_expand_isr(replica_id)
        self.maybe_increment_high_watermark(fetch_time_ms)
        outcome.high_watermark_changed = self.log.high_watermark != old_hw
        return outcome

    def _can_add_to_isr(self, broker: int) -> bool:
        state = self.remote_replicas.get(broker)
        return (
            state is not None
            and broker not in self.isr
            and self.is_replica_isr_eligible(broker)
            and state.log_end_offset >= self.log.high_watermark
            and state.log_end_offset >= self.leader_epoch_start_offset
        )

    def maybe_expand_isr(self, broker: int) -> bool:
        """Propose ``isr + broker`` when the follower caught up (LEO ≥ HW and ≥ the start of the
        current leader epoch) and no change is in flight; counts for the HW at once."""
        if self.pending_isr is not None or not self.is_leader or not self._can_add_to_isr(broker):
            return False
        self._submit((*self.isr_order, broker), expansion=True)
        return True

    def out_of_sync_replicas(self, now_ms: int, replica_lag_time_max_ms: int) -> set[int]:
        leader_end = self.log.log_end_offset
        return {
            broker for broker in self.isr
            if broker != self.local_broker_id and (
                (state := self.remote_replicas.get(broker)) is None
                or not state.is_caught_up(leader_end, now_ms, replica_lag_time_max_ms)
            )
        }

    def maybe_shrink_isr(self, now_ms: int, replica_lag_time_max_ms: int | None = None) -> bool:
        """Propose the ISR without the members that are not caught up (Kafka's ``maybeShrinkIsr``);
        the old ISR keeps holding the HW until the change is committed."""
        if self.pending_isr is not None or not self.is_leader:
            return False
        lag = self.replica_lag_time_max_ms if replica_lag_time_max_ms is None else replica_lag_time_max_ms
        out = self.out_of_sync_replicas(now_ms, lag)
        if not out:
            return False
        kept = tuple(b for b in self.isr_order if b not in out)
        log.info("%sShrinking ISR from %s to %s. Leader: (highWatermark: %d, endOffset: %d). Out of sync replicas: %s.",
                 self.log_ident, _ids(self.isr_order), _ids(kept), self.log.high_watermark, self.log.log_end_offset,
                 " ".join(self._replica_lag(broker) for broker in sorted(out)))
        self._submit(kept, expansion=False)
        return True

    def _replica_lag(self, broker: int) -> str:
        state = self.remote_replicas.get(broker)
        end = "unknown" if state is None else state.log_end_offset
        caught_up = "unknown" if state is None else state.last_caught_up_time_ms
        return f"(brokerId: {broker}, endOffset: {end}, lastCaughtUpTimeMs: {caught_up})"

    def _set_isr(self, isr: Iterable[int]) -> None:
        self.isr_order = tuple(dict.fromkeys(isr))
        self.isr = set(self.isr_order)

    def _submit(self, proposed: tuple[int, ...], expansion: bool) -> None:
        pending = PendingIsrChange(proposed, expansion)
        self.pending_isr = pending
        if self.isr_submitter is None:  # no controller seam: commit locally at once
            self.on_isr_change_committed(pending, IsrChangeResult(isr=proposed,
                                                                  partition_epoch=self.partition_epoch + 1))
            return
        awaitable = self.isr_submitter.submit(
            self.topic_partition, self.leader_epoch, list(proposed), self.partition_epoch
        )
        task = asyncio.ensure_future(awaitable)
        task.add_done_callback(lambda done: self._isr_answer(pending, done))

    def _isr_answer(self, pending: PendingIsrChange, done: asyncio.Future[IsrChangeResult]) -> None:
        if done.cancelled():
            result = IsrChangeResult(ErrorCode.REQUEST_TIMED_OUT)
        elif done.exception() is not None:
            result = IsrChangeResult(ErrorCode.UNKNOWN_SERVER_ERROR)
        else:
            result = done.result()
        if self.on_isr_change_committed(pending, result) and self.on_high_watermark_changed is not None:
            self.on_high_watermark_changed(self)

    def on_isr_change_committed(self, pending: PendingIsrChange, result: IsrChangeResult) -> bool:
        """Apply the controller's answer to ``pending`` (ignored if another change or a
        LeaderAndIsr replaced it). Success installs the ISR and partition epoch; True if the HW
        moved. Errors as Kafka's ``handleAlterPartitionError``: where the controller's state is
        newer than ours, the change stays pending until its LeaderAndIsr arrives (no new proposal
        meanwhile); otherwise the committed ISR is back in force and a later fetch or shrink
        check proposes again."""
        if self.pending_isr is not pending:
            return False
        if result.error != ErrorCode.NONE:
            self.isr_stats.failed_updates += 1
            log.info("%sFailed to alter partition to ISR %s since the controller rejected the request with %s.",
                     self.log_ident, _ids(pending.proposed), result.error.name)
            if result.error not in _WAIT_FOR_LEADER_AND_ISR:
                self.pending_isr = None
            return False
        self.pending_isr = None
        self._set_isr(result.isr)
        self.partition_epoch = result.partition_epoch
        self.isr_stats.committed(pending.expansion)
        # Kafka's wording, its two spaces included when the partition is not under min ISR.
        log.info("%sISR updated to %s %s and version updated to %d", self.log_ident, _ids(self.isr_order),
                 "(under-min-isr)" if self.is_under_min_isr else "", self.partition_epoch)
        return self.maybe_increment_high_watermark()

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """acks=all completion for one partition: (done, error)."""
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark >= required_offset:
            if len(self.maximal_isr) < self.log.config.min_insync_replicas:
                return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return True, ErrorCode.NONE
        return False, ErrorCode.NONE

    def low_watermark(self) -> int:
        """The smallest log start offset over the leader and every alive remote replica."""
        low = self.require_leader().log_start_offset
        for broker, state in self.remote_replicas.items():
            if self.is_replica_isr_eligible(broker):
                low = min(low, state.log_start_offset)
        return low

    # --- DeleteRecords ---------------------------------------------------------------------------

    def delete_records_on_leader(self, offset: int) -> tuple[int, int]:
        """KIP-107: move the log start offset to ``offset`` (-1: the high watermark).

        Returns ``(requested_offset, low_watermark)``. Raises NotLeaderError, PolicyViolationError
        (cleanup.policy without delete) or OffsetOutOfRangeError (negative, or past the high
        watermark). An offset at or below the log start offset changes nothing.
        """
        log = self.require_leader()
        if not log.config.delete_enabled:
            raise PolicyViolationError(
                f"Records of partition {self.topic_partition} can not be deleted due to the configured policy"
            )
        converted = log.high_watermark if offset == -1 else offset
        if converted < 0:
            raise OffsetOutOfRangeError(
                f"The offset {offset} for partition {self.topic_partition} is not valid"
            )
        log.maybe_increment_log_start_offset(converted, "ClientRecordDeletion")
        return converted, self.low_watermark()

    # --- appends -------------------------------------------------------------------------------

    def append_records_to_leader(
        self, records: memoryview, required_acks: int, now_ms: int, origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: object | None = None,
    ) -> LogAppendInfo:
        log = self.require_leader()
        min_isr = log.config.min_insync_replicas
        if required_acks == -1 and len(self.isr) < min_isr:
            raise NotEnoughReplicasError(
                f"The size of the current ISR Set({', '.join(map(str, self.isr_order))}) is insufficient to satisfy the "
                f"min.isr requirement of {min_isr} for partition {self.topic_partition}"
            )
        info = log.append_as_leader(records, self.leader_epoch, now_ms, origin, verification_guard)
        self.maybe_increment_high_watermark()
        return info


def _ids(brokers: Iterable[int]) -> str:
    """Broker ids as Kafka's log lines write an ISR: ``2,3,1``, in the order given."""
    return ",".join(map(str, brokers))


def _option(broker: int) -> str:
    """A previous leader as Kafka's log lines print it (a Scala Option)."""
    return f"Some({broker})" if broker >= 0 else "None"
