"""One classic group (Kafka's ``GroupMetadata``): state machine, members, protocol and offsets.

States and their legal predecessors are Kafka's::

    Empty ──▶ PreparingRebalance ──▶ CompletingRebalance ──▶ Stable
      ▲              │   ▲                    │                │
      └──────────────┘   └────────────────────┴────────────────┘      (any state ──▶ Dead)

A group also holds its committed offsets, so a group with no members still exists while it has
offsets (a "simple" group that only commits has no protocol type at all). The coordinator drives
the transitions; this module only keeps the bookkeeping consistent (leader, protocol votes,
static members, members awaiting join) and answers questions about it.

Offsets pass through pending states, as in Kafka: a plain commit is pending while its append is in
flight; a transactional commit (TxnOffsetCommit, KIP-98) is pending per producer id until its
transaction ends, its commit marker moving it into the committed offsets and its abort marker
dropping it. Each committed offset remembers the log offset of the batch that wrote it, so of two
writes for a partition the later one in ``__consumer_offsets`` wins, whatever order they complete in.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from pybroker.protocol import consumer_protocol
from pybroker.server.group.member import MemberMetadata
from pybroker.server.group.records import OffsetAndMetadata
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @classmethod
    def parse(cls, name: str) -> GroupState | None:
        """A state from its name, case-insensitively (ListGroups' states filter)."""
        for state in cls:
            if state.value.lower() == name.lower():
                return state
        return None


@dataclass
class CommitRecord:
    """An offset commit and where it is in ``__consumer_offsets`` (Kafka's
    ``CommitRecordMetadataAndOffset``): ``batch_offset`` is the offset of the batch holding it
    (its first record's), None while its append is in flight."""

    batch_offset: int | None
    offset: OffsetAndMetadata

    def older_than(self, other: CommitRecord) -> bool:
        """Whether this commit was written to the log before ``other``."""
        if self.batch_offset is None or other.batch_offset is None:
            raise AssertionError("comparing an offset commit that has not been appended to the log")
        return self.batch_offset < other.batch_offset


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.DEAD: frozenset(GroupState),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}


class GroupMetadata:
    """A group and its committed offsets."""

    def __init__(self, group_id: str, state: GroupState, now_ms: int) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.pending_members: set[str] = set()  # given a member id (MEMBER_ID_REQUIRED), not yet joined
        self.pending_sync_members: set[str] = set()  # joined this generation, no SyncGroup yet
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None
        self.offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        # Where each committed offset was written (its batch's offset); absent: unknown, older than any.
        self.offset_batch_offsets: dict[TopicPartition, int] = {}
        self.pending_offset_commits: dict[TopicPartition, OffsetAndMetadata] = {}  # appends in flight
        # Transactional commits by producer id, until their transaction's marker (KIP-98).
        self.pending_txn_offset_commits: dict[int, dict[TopicPartition, CommitRecord]] = {}
        self.received_consumer_offset_commits = False
        self.received_txn_offset_commits = False
        self._protocol_votes: dict[str, int] = {}

    # --- state ----------------------------------------------------------------------------------

    def is_state(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise AssertionError(
                f"group {self.group_id}: illegal transition {self.state.value} -> {state.value}"
            )
        self.state = state
        self.state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    @property
    def is_empty(self) -> bool:
        return not self.members and not self.pending_members

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type == consumer_protocol.PROTOCOL_TYPE

    # --- members --------------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.pending_members.discard(member.member_id)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        for name in member.protocols:
            self._protocol_votes[name] = self._protocol_votes.get(name, 0) + 1

    def remove(self, member_id: str) -> MemberMetadata | None:
        self.pending_members.discard(member_id)
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.pending_sync_members.discard(member_id)
        for name in member.protocols:
            self._protocol_votes[name] -= 1
            if not self._protocol_votes[name]:
                del self._protocol_votes[name]
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def update_protocols(self, member: MemberMetadata, protocols: list[tuple[str, bytes]]) -> None:
        for name in member.protocols:
            self._protocol_votes[name] -= 1
            if not self._protocol_votes[name]:
                del self._protocol_votes[name]
        member.supported_protocols = protocols
        for name in member.protocols:
            self._protocol_votes[name] = self._protocol_votes.get(name, 0) + 1

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> MemberMetadata:
        """Give a known static member its new member id (KIP-345), keeping its assignment."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        self.static_members[group_instance_id] = new_member_id
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        return member

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """A static member whose instance id now belongs to another member id."""
        if group_instance_id is None:
            return False
        current = self.static_members.get(group_instance_id)
        return current is not None and current != member_id

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join == len(self.members) and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def elect_new_joined_leader(self) -> bool:
        """After a join phase, make sure the leader is a member that rejoined (Kafka's
        ``maybeElectNewJoinedLeader``): False when no member rejoined, the leader then staying."""
        leader = self.members.get(self.leader_id or "")
        if leader is None:
            return False
        if leader.is_awaiting_join:
            return True
        joined = next((m.member_id for m in self.members.values() if m.is_awaiting_join), None)
        if joined is None:
            return False
        self.leader_id = joined
        return True

    # --- protocols ------------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, protocols: list[str]) -> bool:
        """Whether a member offering ``protocols`` of ``protocol_type`` may join (Kafka's rule)."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        return protocol_type == self.protocol_type and any(
            self._protocol_votes.get(name, 0) == len(self.members) for name in protocols
        )

    def candidate_protocols(self) -> set[str]:
        return {name for name, votes in self._protocol_votes.items() if votes == len(self.members)}

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer; ties go to the leader's
        preference order."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise AssertionError(f"group {self.group_id} has no protocol common to all members")
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        leader = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        order = {name: i for i, name in enumerate(leader.protocols)}
        return max(votes, key=lambda name: (votes[name], -order.get(name, len(order))))

    def init_next_generation(self, now_ms: int) -> None:
        """Start the next generation: CompletingRebalance with a chosen protocol, or Empty."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = None
            self.transition_to(GroupState.EMPTY, now_ms)

    def _compute_subscribed_topics(self) -> set[str] | None:
        if not self.is_consumer_group or self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                metadata = member.metadata(self.protocol_name)
                if not metadata:
                    raise ValueError("empty subscription")
                topics.update(consumer_protocol.decode_subscription(metadata).topics)
        except (ValueError, KeyError) as e:
            log.warning("Group %s: cannot read a member's subscription (%s); subscribed topics unknown", self.group_id, e)
            return None
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        """Whether the group consumes ``topic``; when its subscriptions are unreadable, assume so."""
        return self.subscribed_topics is None or topic in self.subscribed_topics

    # --- offsets --------------------------------------------------------------------------------

    def initialize_offsets(
        self, offsets: dict[TopicPartition, CommitRecord], pending_txn: dict[int, dict[TopicPartition, CommitRecord]]
    ) -> None:
        """The offsets a load found: committed ones, and transactional ones whose transaction has
        no marker yet in the log."""
        for tp, record in offsets.items():
            self._put_committed(tp, record)
        for producer_id, pending in pending_txn.items():
            self.pending_txn_offset_commits.setdefault(producer_id, {}).update(pending)

    def _put_committed(self, tp: TopicPartition, record: CommitRecord) -> None:
        self.offsets[tp] = record.offset
        if record.batch_offset is None:
            self.offset_batch_offsets.pop(tp, None)
        else:
            self.offset_batch_offsets[tp] = record.batch_offset

    def _committed_older_than(self, tp: TopicPartition, record: CommitRecord) -> bool:
        """Whether ``record`` was written after the committed offset of ``tp`` (or there is none)."""
        if tp not in self.offsets:
            return True
        assert record.batch_offset is not None
        return self.offset_batch_offsets.get(tp, -1) < record.batch_offset

    def prepare_offset_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        """A plain commit's append starts."""
        self.received_consumer_offset_commits = True
        self.pending_offset_commits.update(offsets)

    def on_offset_commit_append(self, tp: TopicPartition, record: CommitRecord) -> None:
        """A plain commit was appended at ``record.batch_offset``: it becomes the committed offset
        unless a later write is already there (or the partition's offsets were removed meanwhile)."""
        if tp in self.pending_offset_commits and self._committed_older_than(tp, record):
            self._put_committed(tp, record)
        if self.pending_offset_commits.get(tp) == record.offset:
            del self.pending_offset_commits[tp]

    def fail_pending_offset_write(self, tp: TopicPartition, offset: OffsetAndMetadata) -> None:
        if self.pending_offset_commits.get(tp) == offset:
            del self.pending_offset_commits[tp]

    def prepare_txn_offset_commit(self, producer_id: int, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        """A transactional commit's append starts: pending for ``producer_id`` from now on."""
        self.received_txn_offset_commits = True
        pending = self.pending_txn_offset_commits.setdefault(producer_id, {})
        for tp, offset in offsets.items():
            pending[tp] = CommitRecord(None, offset)

    def on_txn_offset_commit_append(self, producer_id: int, tp: TopicPartition, record: CommitRecord) -> None:
        """The transactional commit was appended: it stays pending, now knowing its log offset
        (unless a later commit of the same producer replaced it meanwhile)."""
        pending = self.pending_txn_offset_commits.get(producer_id)
        if pending is not None and tp in pending and pending[tp].offset == record.offset:
            pending[tp] = record

    def fail_pending_txn_offset_commit(self, producer_id: int, tp: TopicPartition) -> None:
        """The transactional commit was not written: forget it (the client retries)."""
        pending = self.pending_txn_offset_commits.get(producer_id)
        if pending is None:
            return
        pending.pop(tp, None)
        if not pending:
            del self.pending_txn_offset_commits[producer_id]

    def complete_pending_txn_offset_commit(self, producer_id: int, commit: bool) -> None:
        """The producer's transaction ended (its marker is in the log): on commit its offsets
        become the committed ones where they were written after the current ones; on abort they
        are dropped."""
        pending = self.pending_txn_offset_commits.pop(producer_id, None)
        if not commit or pending is None:
            return
        for tp, record in pending.items():
            if record.batch_offset is None:
                log.warning("Group %s: the transactional offset commit of producer %d for %s ended before its "
                            "record was appended; ignoring it", self.group_id, producer_id, tp)
            elif self._committed_older_than(tp, record):
                self._put_committed(tp, record)

    @property
    def active_producers(self) -> set[int]:
        return set(self.pending_txn_offset_commits)

    def has_pending_offset_commits_from_producer(self, producer_id: int) -> bool:
        return producer_id in self.pending_txn_offset_commits

    def has_pending_offset_commits_for_topic_partition(self, tp: TopicPartition) -> bool:
        """Whether a commit of ``tp`` is in flight or in an open transaction (OffsetFetch with
        RequireStable answers UNSTABLE_OFFSET_COMMIT then)."""
        return tp in self.pending_offset_commits or any(
            tp in pending for pending in self.pending_txn_offset_commits.values()
        )

    @property
    def has_offsets(self) -> bool:
        """Committed or pending offsets: an empty group with any stays alive."""
        return bool(self.offsets or self.pending_offset_commits or self.pending_txn_offset_commits)

    def remove_offsets(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Drop the offsets of ``partitions``, pending ones included (deleted partitions, OffsetDelete,
        DeleteGroups); the partitions that had a committed offset."""
        removed = []
        for tp in partitions:
            self.pending_offset_commits.pop(tp, None)
            for pending in self.pending_txn_offset_commits.values():
                pending.pop(tp, None)
            self.offset_batch_offsets.pop(tp, None)
            if self.offsets.pop(tp, None) is not None:
                removed.append(tp)
        return removed

    def remove_expired_offsets(self, partitions: list[TopicPartition]) -> None:
        """Drop expired committed offsets (pending transactional ones of those partitions stay)."""
        for tp in partitions:
            self.offsets.pop(tp, None)
            self.offset_batch_offsets.pop(tp, None)

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """Offsets past retention, by Kafka's rules: an empty group's offsets expire ``retention``
        after it became empty; a stable consumer group's offsets of topics it no longer subscribes
        to, and a simple group's offsets, ``retention`` after their commit. Offsets committed with
        an explicit expire timestamp (OffsetCommit v2-v4) expire then. An offset whose commit is in
        flight does not expire."""
        if self.protocol_type is not None and self.is_state(GroupState.EMPTY):
            def base(o: OffsetAndMetadata) -> int:
                return self.state_timestamp if self.state_timestamp >= 0 else o.commit_timestamp
            keep_topics: set[str] = set()
        elif self.is_consumer_group and self.subscribed_topics is not None and self.is_state(GroupState.STABLE):
            def base(o: OffsetAndMetadata) -> int:
                return o.commit_timestamp
            keep_topics = self.subscribed_topics
        elif self.protocol_type is None:
            def base(o: OffsetAndMetadata) -> int:
                return o.commit_timestamp
            keep_topics = set()
        else:
            return []
        expired = []
        for tp, committed in self.offsets.items():
            if tp.topic in keep_topics or tp in self.pending_offset_commits:
                continue
            if committed.expire_timestamp is not None:
                if now_ms >= committed.expire_timestamp:
                    expired.append(tp)
            elif now_ms - base(committed) >= retention_ms:
                expired.append(tp)
        return expired

    def __repr__(self) -> str:
        return (
            f"GroupMetadata({self.group_id}, {self.state.value}, generation={self.generation_id}, "
            f"protocol={self.protocol_type}/{self.protocol_name}, members={len(self.members)})"
        )
