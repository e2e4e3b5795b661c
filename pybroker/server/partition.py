"""One partition as this broker sees it: leadership, replica states, high and low watermarks.

Owns Kafka's ``Partition`` state: the leader id and leader epoch, the assigned replicas and the
ISR, the state this leader keeps about each remote replica (its log end offset and log start
offset, as its fetches report them), and the rules derived from them: the high watermark (the
smallest log end offset in the ISR) and the low watermark (the smallest log start offset over the
leader and every alive replica, which DeleteRecords waits on). The local ``Log`` is owned here
once the partition is hosted.
"""

from __future__ import annotations

from dataclasses import dataclass

from pybroker.controller.requests import PartitionState
from pybroker.log.log import Log, LogAppendInfo, OffsetOutOfRangeError
from pybroker.types import TopicPartition

UNKNOWN_OFFSET = -1


class NotLeaderError(Exception):
    """NOT_LEADER_OR_FOLLOWER (6)."""


class NotEnoughReplicasError(Exception):
    """NOT_ENOUGH_REPLICAS (19): the ISR is smaller than min.insync.replicas."""


class FencedLeaderEpochError(Exception):
    """FENCED_LEADER_EPOCH (74): the request carries an epoch older than ours."""


class PolicyViolationError(Exception):
    """POLICY_VIOLATION (44)."""


class UnknownLeaderEpochError(Exception):
    """UNKNOWN_LEADER_EPOCH (75): the request carries an epoch newer than ours."""


@dataclass
class ReplicaState:
    """What the leader knows of a follower, from the follower's fetch requests."""

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_caught_up_time_ms: int = 0
    last_fetch_time_ms: int = 0

    def reset(self, in_isr: bool, now_ms: int) -> None:
        self.log_end_offset = self.log_start_offset = UNKNOWN_OFFSET
        self.last_caught_up_time_ms = now_ms if in_isr else 0


class Partition:
    """A hosted partition: its log plus leadership and replica state."""

    def __init__(self, topic_partition: TopicPartition, topic_id: str, local_broker_id: int, log: Log) -> None:
        self.topic_partition = topic_partition
        self.topic_id = topic_id
        self.local_broker_id = local_broker_id
        self.log = log
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = 0
        self.replicas: list[int] = []
        self.isr: set[int] = set()
        self.remote_replicas: dict[int, ReplicaState] = {}
        self.alive_brokers: frozenset[int] = frozenset()

    # --- leadership ----------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    def make_leader(self, state: PartitionState, now_ms: int) -> bool:
        """Become (or stay) leader as the controller decided (Kafka's ``makeLeader``); True if
        the leader epoch is new. A new epoch starts at the log end offset, and the leader
        forgets what it knew of the followers (they report again in their next fetch)."""
        new_epoch = state.leader_epoch > self.leader_epoch
        self.leader_id = self.local_broker_id
        self.partition_epoch = state.partition_epoch
        self.replicas = list(state.replicas)
        self.isr = set(state.isr)
        self.alive_brokers = frozenset(r for r in state.replicas if r not in state.offline_replicas)
        if new_epoch:
            self.leader_epoch = state.leader_epoch
            self.log.assign_leader_epoch(state.leader_epoch, self.log.log_end_offset)
            self.remote_replicas = {
                broker: ReplicaState(broker) for broker in state.replicas if broker != self.local_broker_id
            }
            for replica in self.remote_replicas.values():
                replica.reset(replica.broker_id in self.isr, now_ms)
        self.maybe_increment_high_watermark()
        return new_epoch

    def make_follower(self, state: PartitionState) -> bool:
        """Follow ``state.leader`` (Kafka's ``makeFollower``); True if the leader epoch is new
        (the fetcher then starts again from this log). A follower keeps no ISR and no replica
        states."""
        new_epoch = state.leader_epoch > self.leader_epoch
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.replicas = list(state.replicas)
        self.isr = set()
        self.remote_replicas = {}
        return new_epoch

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

    # --- watermarks ----------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def maybe_increment_high_watermark(self) -> bool:
        """HW = the smallest log end offset among the ISR (the leader included)."""
        new_hw = self.log.log_end_offset
        for broker in self.isr:
            state = self.remote_replicas.get(broker)
            if state is not None and state.log_end_offset >= 0:
                new_hw = min(new_hw, state.log_end_offset)
            elif state is not None:
                new_hw = min(new_hw, self.log.high_watermark)
        if new_hw > self.log.high_watermark:
            self.log.update_high_watermark(new_hw)
            return True
        return False

    def low_watermark(self) -> int:
        """The smallest log start offset over the leader and every alive remote replica."""
        low = self.require_leader().log_start_offset
        for broker, state in self.remote_replicas.items():
            if broker in self.alive_brokers:
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

    def append_records_to_leader(self, records: memoryview, required_acks: int, now_ms: int) -> LogAppendInfo:
        log = self.require_leader()
        min_isr = log.config.min_insync_replicas
        if required_acks == -1 and len(self.isr) < min_isr:
            raise NotEnoughReplicasError(
                f"The size of the current ISR {sorted(self.isr)} is insufficient to satisfy the "
                f"min.isr requirement of {min_isr} for partition {self.topic_partition}"
            )
        info = log.append_as_leader(records, self.leader_epoch, now_ms)
        self.maybe_increment_high_watermark()
        return info
