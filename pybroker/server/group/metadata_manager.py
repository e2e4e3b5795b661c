"""The groups this broker coordinates and their persistence in ``__consumer_offsets``.

Owns (Kafka's ``GroupMetadataManager``):

* the cache of ``GroupMetadata`` by group id, for the ``__consumer_offsets`` partitions this
  broker leads (``owned_partitions``);
* creating ``__consumer_offsets`` on first use (``offsets.topic.num.partitions``,
  ``offsets.topic.replication.factor``, compacted, ``offsets.topic.segment.bytes``);
* following the leadership of those partitions (Kafka's coordinator epoch, the partition's leader
  epoch, orders elections and resignations; a stale one changes nothing): on election, loading
  the partition's groups and offsets in the background by reading its log from the log start
  offset to the log end offset (latest value per key wins; a null value deletes), the partition
  being "loading" meanwhile; on resignation, dropping its groups, abandoning a load under way;
* writing group metadata, offset commits and tombstones as record batches appended to the leader
  with acks=all (``offsets.commit.timeout.ms``), mapping append errors to what the group APIs
  answer, exactly as Kafka maps them;
* transactional offset commits (KIP-98): written as one transactional batch of the producer,
  pending in their group until the transaction's marker; which groups have pending commits of
  which producer, so a marker written to a partition completes them (``handle_txn_completion``).
  A load keeps a transactional commit pending until a marker of its producer follows it in the
  log: COMMIT makes it committed (where it is newer than the committed offset), ABORT drops it;
* expiring committed offsets (``offsets.retention.minutes``, checked every
  ``offsets.retention.check.interval.ms``) and dropping groups left with nothing.

Record bytes are built and split into records by the native module, once per batch. A load reads
the log on the event loop (which owns it), one native read of up to ``offsets.load.buffer.size``
at a time, and decodes the records' keys and values in a worker thread, so a large partition does
not hold up the loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from pybroker import _native
from pybroker.common.errors import ErrorCode
from pybroker.common.topic import InvalidReplicationFactorError
from pybroker.log.log import AppendOrigin
from pybroker.server.group.group_metadata import CommitRecord, GroupMetadata, GroupState
from pybroker.server.group.member import MemberMetadata
from pybroker.server.group.records import (
    GroupMetadataKey,
    GroupRecord,
    MemberRecord,
    OffsetAndMetadata,
    OffsetCommitKey,
    RecordFormatError,
    decode_key,
    partition_for,
)
from pybroker.server.replica_manager import PartitionAppendResult, ReplicaManager, now_ms
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
LOAD_BUFFER_BYTES = 5 * 1024 * 1024  # Kafka's offsets.load.buffer.size
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# The base sequence of a transactional offset commit's batch: Kafka's storeOffsets builds it with
# baseSequence 0 (a coordinator's append skips the sequence check, so the value means nothing).
TXN_OFFSET_COMMIT_BASE_SEQUENCE = 0
CONTROL_ABORT, CONTROL_COMMIT = 0, 1  # a control batch's type (its record's key)

_T = TypeVar("_T")

# How Kafka's coordinator reports a failed append of offsets / of group metadata.
_COMMIT_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}
_STORE_GROUP_ERRORS = {
    **_COMMIT_ERRORS,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.REBALANCE_IN_PROGRESS,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


class OffsetsTopicUnavailable(Exception):
    """``__consumer_offsets`` does not exist and cannot be created (e.g. too few brokers)."""


class GroupMetadataManager:
    """Groups by id, and their records in ``__consumer_offsets``."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        create_topic: Callable[[str, int, int, dict[str, str | None]], Awaitable[object]],
        *,
        num_partitions: int,
        replication_factor: int,
        segment_bytes: int,
        commit_timeout_ms: int,
        retention_ms: int,
    ) -> None:
        self.replica_manager = replica_manager
        self._create_topic = create_topic
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.segment_bytes = segment_bytes
        self.commit_timeout_ms = commit_timeout_ms
        self.retention_ms = retention_ms
        self.groups: dict[str, GroupMetadata] = {}
        self.owned_partitions: set[int] = set()
        self.loading_partitions: set[int] = set()
        self._epochs: dict[int, int] = {}  # the coordinator epoch (leader epoch) per partition
        self._loads: dict[int, asyncio.Task[None]] = {}
        self._executor: ThreadPoolExecutor | None = None
        # Groups with pending transactional offset commits, by producer id (Kafka's openGroupsForProducer).
        self._open_groups_for_producer: dict[int, set[str]] = {}

    # --- ownership ------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        count = self.replica_manager.metadata_cache.partition_count(OFFSETS_TOPIC)
        return partition_for(group_id, count or self.num_partitions)

    def is_local(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned_partitions

    def is_loading(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.loading_partitions

    async def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` if it does not exist yet (first FindCoordinator); the
        partitions this broker leads are then coordinated here as their LeaderAndIsr arrives."""
        if self.replica_manager.metadata_cache.partition_count(OFFSETS_TOPIC):
            return
        configs: dict[str, str | None] = {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(self.segment_bytes),
        }
        try:
            await self._create_topic(OFFSETS_TOPIC, self.num_partitions, self.replication_factor, configs)
        except InvalidReplicationFactorError as e:
            raise OffsetsTopicUnavailable(
                f"Cannot create {OFFSETS_TOPIC}: {e} Set offsets.topic.replication.factor to at most "
                "the number of brokers."
            ) from e

    # --- cache ----------------------------------------------------------------------------------

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        return self.groups.setdefault(group.group_id, group)

    def remove_group(self, group: GroupMetadata) -> None:
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    # --- loading --------------------------------------------------------------------------------

    def _maybe_update_epoch(self, index: int, epoch: int | None) -> bool:
        """Kafka's ``maybeUpdateCoordinatorEpoch``: remember the newest leader epoch seen for the
        partition; False if ``epoch`` is older than it (a stale election or resignation, which
        must change nothing). None (a resignation without an epoch) always goes through."""
        current = self._epochs.get(index)
        if epoch is not None and (current is None or epoch > current):
            self._epochs[index] = current = epoch
        return epoch is None or epoch == current

    def schedule_load(
        self, index: int, epoch: int, on_loaded: Callable[[list[GroupMetadata]], None]
    ) -> bool:
        """This broker became leader of partition ``index`` in leader epoch ``epoch`` (Kafka's
        ``scheduleLoadGroupAndOffsets``): load its groups in the background, answering
        COORDINATOR_LOAD_IN_PROGRESS for them meanwhile; ``on_loaded`` gets them once they are in
        the cache. False if nothing starts: the epoch is stale, or the partition is already
        loaded or loading (a newer epoch of the same leadership keeps what it has)."""
        if not self._maybe_update_epoch(index, epoch):
            log.info("Not loading %s-%d in epoch %d: the current epoch is %d", OFFSETS_TOPIC, index, epoch,
                     self._epochs[index])
            return False
        if index in self.owned_partitions or index in self.loading_partitions:
            return False
        self.loading_partitions.add(index)
        self._loads[index] = asyncio.get_running_loop().create_task(
            self._load(index, epoch, on_loaded), name=f"load-{OFFSETS_TOPIC}-{index}"
        )
        return True

    def unload_partition(self, index: int, epoch: int | None = None) -> list[GroupMetadata] | None:
        """Stop coordinating the groups of partition ``index``, whose leadership moved away in
        ``epoch`` (Kafka's ``removeGroupsForPartition``); a load under way is abandoned. Returns
        the groups dropped from the cache, or None if ``epoch`` is stale and nothing changed."""
        if not self._maybe_update_epoch(index, epoch):
            log.info("Not unloading %s-%d in epoch %s: the current epoch is %d", OFFSETS_TOPIC, index, epoch,
                     self._epochs[index])
            return None
        load = self._loads.pop(index, None)
        if load is not None:
            load.cancel()
            log.info("Abandoned the load of %s-%d: its leadership moved away", OFFSETS_TOPIC, index)
        self.owned_partitions.discard(index)
        self.loading_partitions.discard(index)
        count = self.replica_manager.metadata_cache.partition_count(OFFSETS_TOPIC) or self.num_partitions
        dropped = [g for g in self.groups.values() if partition_for(g.group_id, count) == index]
        for group in dropped:
            del self.groups[group.group_id]
            self._remove_group_from_all_producers(group.group_id)
        return dropped

    async def _load(self, index: int, epoch: int, on_loaded: Callable[[list[GroupMetadata]], None]) -> None:
        """One partition's load; if leadership moves meanwhile, ``unload_partition`` cancels it
        and its reads are thrown away."""
        task = asyncio.current_task()
        tp = TopicPartition(OFFSETS_TOPIC, index)
        started = time.monotonic()
        loaded: list[GroupMetadata] = []
        try:
            state = await self._read_partition(tp, lambda: self._loads.get(index) is task)
        except asyncio.CancelledError:
            raise
        except Exception:
            # As Kafka: the partition is coordinated here all the same, without what it held.
            log.exception("Error loading offsets and group metadata from %s", tp)
            state = None
        if self._loads.get(index) is not task:
            return  # abandoned while its last read was finishing
        del self._loads[index]
        if state is not None:
            for group in state.groups:
                current = self.groups.setdefault(group.group_id, group)
                if current is group:
                    loaded.append(group)
                    for producer_id in group.active_producers:
                        self._add_producer_group(producer_id, group.group_id)
                else:
                    log.debug("Loading group %s: a cached group of generation %d stays", group.group_id,
                              current.generation_id)
        self.loading_partitions.discard(index)
        self.owned_partitions.add(index)
        if state is not None and state.records_read:
            log.info(
                "Loaded %d group(s) from %d record(s) of %s in epoch %d in %.0f ms",
                len(loaded), state.records_read, tp, epoch, (time.monotonic() - started) * 1000,
            )
        on_loaded(loaded)

    async def _read_partition(self, tp: TopicPartition, current: Callable[[], bool]) -> _PartitionLoad | None:
        """Read ``tp`` from its log start offset to its log end offset (Kafka reads to the end as
        it is at each step, so records appended meanwhile are read too): each read is one native
        call on the event loop, which owns the log; decoding the records happens in the load
        thread. Stops early (None) once ``current()`` is False."""
        partition = self.replica_manager.get_partition(tp)
        state = _PartitionLoad()
        if partition is None:
            log.warning("Attempted to load offsets and group metadata from %s, but found no log", tp)
            return state
        partition_log = partition.log
        position = partition_log.log_start_offset
        while position < partition_log.log_end_offset:
            data = partition_log.read(position, LOAD_BUFFER_BYTES, partition_log.log_end_offset, True)
            if not data:
                break
            position = await self._off_loop(state.apply, data, tp)
            if not current():
                return None
        if state.records_read:
            await self._off_loop(state.rebuild)
        return state if current() else None

    async def _off_loop(self, fn: Callable[..., _T], *args: object) -> _T:
        """Run ``fn(*args)`` in the load thread: one thread, as Kafka's group-metadata-manager
        scheduler, so partitions load one step at a time in the order they were scheduled."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="group-metadata-load")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def shutdown(self) -> None:
        """Abandon the loads under way and stop the load thread."""
        loads = list(self._loads.values())
        self._loads.clear()
        for load in loads:
            load.cancel()
        await asyncio.gather(*loads, return_exceptions=True)
        executor, self._executor = self._executor, None
        if executor is not None:
            # The step it may be in the middle of is thrown away; wait for it off the loop.
            await asyncio.to_thread(executor.shutdown, True, cancel_futures=True)

    @staticmethod
    def _rebuild_group(
        group_id: str,
        record: GroupRecord | None,
        offsets: dict[TopicPartition, CommitRecord],
        pending_txn: dict[int, dict[TopicPartition, CommitRecord]] | None = None,
    ) -> GroupMetadata:
        group = GroupMetadata(group_id, GroupState.EMPTY, now_ms())
        if record is not None:
            group.protocol_type = record.protocol_type or None
            group.generation_id = record.generation_id
            group.protocol_name = record.protocol_name
            group.state_timestamp = record.current_state_timestamp  # -1 (old records): expire by commit time
            for m in record.members:
                protocols = [(record.protocol_name, m.subscription)] if record.protocol_name else []
                group.add(MemberMetadata(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                    m.session_timeout_ms, record.protocol_type, protocols, m.assignment,
                ))
            group.leader_id = record.leader_id if record.leader_id in group.members else group.leader_id
            if group.members:
                group.state = GroupState.STABLE
                group.subscribed_topics = group._compute_subscribed_topics()
        group.initialize_offsets(offsets, pending_txn or {})
        return group

    # --- writing --------------------------------------------------------------------------------

    def _append(
        self, group_id: str, records: list[tuple[bytes, bytes | None]], callback: Callable[[PartitionAppendResult], None],
        producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> None:
        tp = TopicPartition(OFFSETS_TOPIC, self.partition_for(group_id))
        if producer_id == NO_PRODUCER_ID:
            batch = bytearray(_native.build_batch(records, now_ms()))
        else:
            # A transactional offset commit: one batch of the producer, in its transaction.
            batch = bytearray(_native.build_batch(
                records, now_ms(), producer_id=producer_id, producer_epoch=producer_epoch,
                base_sequence=TXN_OFFSET_COMMIT_BASE_SEQUENCE, transactional=True,
            ))
        result = self.replica_manager.append_records(
            -1, self.commit_timeout_ms, [(tp, memoryview(batch))], internal_topics_allowed=True,
            origin=AppendOrigin.COORDINATOR,
        )
        if isinstance(result, dict):
            callback(result[tp])
        else:
            result.add_done_callback(lambda done: callback(done.result()[tp]))

    def store_group(
        self, group: GroupMetadata, assignments: dict[str, bytes], callback: Callable[[ErrorCode], None]
    ) -> None:
        """Persist the group's generation, protocol, leader and members with ``assignments``."""
        protocol = group.protocol_name
        record = GroupRecord(
            protocol_type=group.protocol_type or "",
            generation_id=group.generation_id,
            protocol_name=protocol,
            leader_id=group.leader_id,
            current_state_timestamp=group.state_timestamp,
            members=[
                MemberRecord(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                    m.session_timeout_ms, m.metadata(protocol) if protocol else b"", assignments.get(m.member_id, b""),
                )
                for m in group.members.values()
            ],
        )

        def done(result: PartitionAppendResult) -> None:
            error = _STORE_GROUP_ERRORS.get(result.error, result.error)
            if error != ErrorCode.NONE:
                log.warning("Storing metadata of group %s failed: %s %s", group.group_id, result.error.name,
                            result.error_message or "")
            callback(error)

        self._append(group.group_id, [(GroupMetadataKey(group.group_id).encode(), record.encode())], done)

    def store_offsets(
        self,
        group: GroupMetadata,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        callback: Callable[[dict[TopicPartition, ErrorCode]], None],
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> None:
        """Persist offset commits (Kafka's ``storeOffsets``). A plain commit is pending while its
        append is in flight, then becomes visible to OffsetFetch; a transactional one (a
        ``producer_id``) is written as a transactional batch of that producer and stays pending
        until its transaction ends (`handle_txn_completion`)."""
        if not offsets:
            callback({})
            return
        if group.received_consumer_offset_commits and group.received_txn_offset_commits:
            log.warning("Group %s (leader %s) has received offset commits from consumers as well as from "
                        "transactional producers; mixing both generally gives surprising results",
                        group.group_id, group.leader_id)
        transactional = producer_id != NO_PRODUCER_ID
        records: list[tuple[bytes, bytes | None]] = [
            (OffsetCommitKey(group.group_id, tp.topic, tp.partition).encode(), committed.encode())
            for tp, committed in offsets.items()
        ]

        def done(result: PartitionAppendResult) -> None:
            error = _COMMIT_ERRORS.get(result.error, result.error)
            if error == ErrorCode.NONE:
                if not group.is_state(GroupState.DEAD):
                    for tp, committed in offsets.items():
                        record = CommitRecord(result.base_offset, committed)
                        if transactional:
                            group.on_txn_offset_commit_append(producer_id, tp, record)
                        else:
                            group.on_offset_commit_append(tp, record)
            else:
                log.warning("Committing offsets of group %s failed: %s %s", group.group_id, result.error.name,
                            result.error_message or "")
                if not group.is_state(GroupState.DEAD):
                    for tp, committed in offsets.items():
                        if transactional:
                            group.fail_pending_txn_offset_commit(producer_id, tp)
                        else:
                            group.fail_pending_offset_write(tp, committed)
                    if transactional and not group.has_pending_offset_commits_from_producer(producer_id):
                        self._remove_producer_group(producer_id, group.group_id)
            callback({tp: error for tp in offsets})

        if transactional:
            self._add_producer_group(producer_id, group.group_id)
            group.prepare_txn_offset_commit(producer_id, offsets)
        else:
            group.prepare_offset_commit(offsets)
        self._append(group.group_id, records, done, producer_id, producer_epoch)

    # --- transaction completion -----------------------------------------------------------------

    def handle_txn_completion(self, producer_id: int, completed_partitions: Iterable[int], commit: bool) -> None:
        """A commit (``commit``) or abort marker of ``producer_id`` was written to the
        ``__consumer_offsets`` partitions ``completed_partitions``: the producer's pending offset
        commits in the groups of those partitions are committed or dropped (Kafka's
        ``handleTxnCompletion``). A group that moved to another broker meanwhile is completed
        there, by its load."""
        partitions = set(completed_partitions)
        groups = self._open_groups_for_producer.get(producer_id, set())
        for group_id in [g for g in groups if self.partition_for(g) in partitions]:
            group = self.groups.get(group_id)
            if group is None:
                log.info("Group %s moved away after the marker of producer %d was written; its new coordinator "
                         "completes the transaction's offsets", group_id, producer_id)
                continue
            if not group.is_state(GroupState.DEAD):
                group.complete_pending_txn_offset_commit(producer_id, commit)
                self._remove_producer_group(producer_id, group_id)

    def _add_producer_group(self, producer_id: int, group_id: str) -> None:
        self._open_groups_for_producer.setdefault(producer_id, set()).add(group_id)

    def _remove_producer_group(self, producer_id: int, group_id: str) -> None:
        groups = self._open_groups_for_producer.get(producer_id)
        if groups is not None:
            groups.discard(group_id)
            if not groups:
                del self._open_groups_for_producer[producer_id]

    def _remove_group_from_all_producers(self, group_id: str) -> None:
        for producer_id in list(self._open_groups_for_producer):
            self._remove_producer_group(producer_id, group_id)

    def is_group_open_for_producer(self, producer_id: int, group_id: str) -> bool:
        return group_id in self._open_groups_for_producer.get(producer_id, ())

    def write_tombstones(self, group: GroupMetadata, partitions: Iterable[TopicPartition], group_removed: bool) -> None:
        """Delete offsets (and the group's metadata when ``group_removed``) from the log."""
        records: list[tuple[bytes, bytes | None]] = [
            (OffsetCommitKey(group.group_id, tp.topic, tp.partition).encode(), None) for tp in partitions
        ]
        if group_removed:
            records.append((GroupMetadataKey(group.group_id).encode(), None))
        if not records:
            return

        def done(result: PartitionAppendResult) -> None:
            if result.error != ErrorCode.NONE:
                log.warning("Writing tombstones for group %s failed: %s", group.group_id, result.error.name)

        self._append(group.group_id, records, done)

    # --- cleanup --------------------------------------------------------------------------------

    def cleanup_group_metadata(
        self, groups: Iterable[GroupMetadata], select: Callable[[GroupMetadata], list[TopicPartition]],
        expiring: bool = False,
    ) -> int:
        """Remove the offsets ``select`` picks from each group, with their pending commits (only
        the committed offsets when ``expiring``); an empty group left without offsets, committed
        or pending, dies. Tombstones go to the log. Returns how many offsets were removed."""
        removed_total = 0
        for group in list(groups):
            removed = select(group)
            if expiring:
                group.remove_expired_offsets(removed)
            else:
                removed = group.remove_offsets(removed)
            dead = False
            if group.is_state(GroupState.EMPTY) and not group.has_offsets:
                group.transition_to(GroupState.DEAD, now_ms())
            if group.is_state(GroupState.DEAD):
                self.remove_group(group)
                self._remove_group_from_all_producers(group.group_id)
                dead = True
            if removed or dead:
                self.write_tombstones(group, removed, dead)
            removed_total += len(removed)
        return removed_total

    def expire_offsets(self) -> int:
        """One pass of offset expiry (Kafka's ``cleanupGroupMetadata`` on its timer)."""
        now = now_ms()
        removed = self.cleanup_group_metadata(
            list(self.groups.values()), lambda g: g.expired_offsets(now, self.retention_ms), expiring=True
        )
        if removed:
            log.info("Removed %d expired offset(s)", removed)
        return removed


# One batch as ``_native.read_record_batches`` gives it: (base offset, producer id, producer epoch,
# is transactional, control type (0 ABORT, 1 COMMIT; negative or None: a data batch), records as
# ``read_records`` gives them: (offset, timestamp, key, value); none for a control batch).
LoadedBatch = tuple[int, int, int, bool, int | None, list[tuple[int, int, bytes | None, bytes | None]]]


class _PartitionLoad:
    """What a load has read of one partition so far (Kafka's ``doLoadGroupsAndOffsets``): the
    latest offset commit and group record per key (a null value deletes), the transactional
    offset commits per producer id whose transaction has no marker yet, then the groups rebuilt
    from them. Used only by the load thread, one step at a time, and read on the event loop once
    the load is complete."""

    def __init__(self) -> None:
        self.offsets: dict[str, dict[TopicPartition, CommitRecord]] = {}
        self.pending: dict[int, dict[tuple[str, TopicPartition], CommitRecord]] = {}
        self.group_records: dict[str, GroupRecord] = {}
        self.records_read = 0
        self.groups: list[GroupMetadata] = []

    def apply(self, data: bytes, tp: TopicPartition) -> int:
        """Apply one read's batches; the offset to read next."""
        last_offset = _native.validate_batches(data, len(data)).last_offset
        self.apply_batches(_native.read_record_batches(data), tp)
        return last_offset + 1

    def apply_batches(self, batches: Iterable[LoadedBatch], tp: TopicPartition) -> None:
        """Apply batches in log order. A marker ends its producer's transaction: COMMIT makes the
        producer's pending offsets committed where no later commit of the partition was read,
        ABORT (or a COMMIT) leaves none pending. A transactional batch's offsets are pending for
        its producer; a plain batch's are committed."""
        for _base_offset, producer_id, _epoch, transactional, control_type, records in batches:
            if control_type is not None and control_type >= 0:
                pending = self.pending.pop(producer_id, {})
                if control_type == CONTROL_COMMIT:
                    for (group_id, partition), record in pending.items():
                        committed = self.offsets.setdefault(group_id, {})
                        current = committed.get(partition)
                        if current is None or current.older_than(record):
                            committed[partition] = record
                continue
            if not records:
                continue
            batch_offset = records[0][0]  # Kafka's: the first record's offset (compaction may remove others)
            for offset, _timestamp, key, value in records:
                self.records_read += 1
                try:
                    self._apply_record(key, value, batch_offset, producer_id if transactional else None)
                except RecordFormatError as e:
                    log.error("Skipping unreadable record at offset %d of %s: %s", offset, tp, e)

    def _apply_record(self, key: bytes | None, value: bytes | None, batch_offset: int, producer_id: int | None) -> None:
        if key is None:
            raise RecordFormatError("record without a key")
        decoded = decode_key(key)
        if isinstance(decoded, OffsetCommitKey):
            tp = TopicPartition(decoded.topic, decoded.partition)
            if producer_id is not None:
                pending = self.pending.setdefault(producer_id, {})
                if value is None:
                    pending.pop((decoded.group, tp), None)
                else:
                    pending[(decoded.group, tp)] = CommitRecord(batch_offset, OffsetAndMetadata.decode(value))
            elif value is None:
                self.offsets.get(decoded.group, {}).pop(tp, None)
            else:
                self.offsets.setdefault(decoded.group, {})[tp] = CommitRecord(batch_offset, OffsetAndMetadata.decode(value))
        elif isinstance(decoded, GroupMetadataKey):
            if value is None:
                self.group_records.pop(decoded.group, None)
            else:
                self.group_records[decoded.group] = GroupRecord.decode(value)

    def rebuild(self) -> None:
        pending_by_group: dict[str, dict[int, dict[TopicPartition, CommitRecord]]] = {}
        for producer_id, pending in self.pending.items():
            for (group_id, tp), record in pending.items():
                pending_by_group.setdefault(group_id, {}).setdefault(producer_id, {})[tp] = record
        live = (
            self.group_records.keys()
            | {group_id for group_id, committed in self.offsets.items() if committed}
            | pending_by_group.keys()
        )
        self.groups = [
            GroupMetadataManager._rebuild_group(
                group_id, self.group_records.get(group_id), self.offsets.get(group_id, {}),
                pending_by_group.get(group_id, {}),
            )
            for group_id in live
        ]
