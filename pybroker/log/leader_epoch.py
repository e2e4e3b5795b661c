"""The leader-epoch cache of one partition: which leader epoch started at which offset.

Owns the ordered (epoch, start offset) list behind OffsetForLeaderEpoch answers and follower
truncation, and its ``leader-epoch-checkpoint`` file. Entries only move forward: an epoch is
assigned when a leader first appends in it; truncation trims from either end.
"""

from __future__ import annotations

import bisect
import logging
import os

from pybroker.log.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    CheckpointError,
    LeaderEpochCheckpointFile,
)

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    """Epoch → start offset, with Kafka's ``endOffsetFor`` lookup."""

    def __init__(self, partition_dir: str) -> None:
        self.path = os.path.join(partition_dir, LEADER_EPOCH_CHECKPOINT)
        self._file = LeaderEpochCheckpointFile(self.path)
        # A file damaged by a crash (it is written behind the log) reads as missing; the caller
        # rebuilds the entries from the batches (`damaged`).
        self.damaged = False
        try:
            self._entries: list[tuple[int, int]] = self._file.read()
        except CheckpointError as e:
            log.warning("Rebuilding the leader epochs from the log: %s", e)
            self._entries, self.damaged = [], True
        self._written = list(self._entries)  # what the file holds

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1][0] if self._entries else UNDEFINED_EPOCH

    def earliest_entry(self) -> tuple[int, int] | None:
        return self._entries[0] if self._entries else None

    def assign(self, epoch: int, start_offset: int, flush: bool = True) -> bool:
        """Record that ``epoch`` begins at ``start_offset`` (no-op unless it is a new epoch).
        Returns whether anything changed; with ``flush=False`` the caller writes the file later
        (a lost write is repaired by recovery, which re-assigns epochs from the batches)."""
        if epoch < 0:
            return False
        if self._entries and self._entries[-1][0] >= epoch:
            return False
        # A later epoch at the same or a lower start offset supersedes earlier entries there.
        while self._entries and self._entries[-1][1] >= start_offset:
            self._entries.pop()
        self._entries.append((epoch, start_offset))
        if flush:
            self.flush()
        return True

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch of the record at ``offset`` (the last entry starting at or before it)."""
        starts = [start for _, start in self._entries]
        index = bisect.bisect_right(starts, offset) - 1
        return self._entries[index][0] if index >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's ``endOffsetFor``: (epoch, end offset) for an OffsetForLeaderEpoch request."""
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        epochs = [epoch for epoch, _ in self._entries]
        higher = bisect.bisect_right(epochs, requested_epoch)
        if higher == len(self._entries):
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if higher == 0:
            return requested_epoch, self._entries[0][1]
        return self._entries[higher - 1][0], self._entries[higher][1]

    @property
    def dirty(self) -> bool:
        """Whether the file is behind the entries."""
        return self.damaged or self._entries != self._written

    def truncate_from_end(self, end_offset: int, flush: bool = True) -> bool:
        """Drop entries starting at or after ``end_offset`` (the log was truncated there).
        Returns whether anything changed; with ``flush=False`` the caller writes the file later."""
        kept = [(e, s) for e, s in self._entries if s < end_offset]
        if kept == self._entries:
            return False
        self._entries = kept
        if flush:
            self.flush()
        return True

    def truncate_from_start(self, start_offset: int, flush: bool = True) -> bool:
        """Drop entries wholly below ``start_offset``; the last one dropped restarts there.
        Returns whether anything changed; with ``flush=False`` the caller writes the file later
        (Kafka's ``truncateFromStartAsyncFlush``)."""
        removed = [(e, s) for e, s in self._entries if s <= start_offset]
        if not removed:
            return False
        kept = [(e, s) for e, s in self._entries if s > start_offset]
        self._entries = [(removed[-1][0], start_offset), *kept]
        if flush:
            self.flush()
        return True

    def flush(self) -> None:
        # A copy: `write` remembers what the file holds, and `assign` changes the list in place.
        self.write(list(self._entries))

    def write(self, entries: list[tuple[int, int]], *, sync: bool = True) -> bool:
        """Write ``entries`` (a snapshot of ``entries``, e.g. from a worker thread) to the file,
        unless the file holds them already (a load that dropped the epoch of an empty log, and
        the leader that assigned it again); returns whether it wrote. Without ``sync`` the
        caller fsyncs the file and its directory."""
        if entries == self._written and not self.damaged:
            return False
        self._file.write(entries, sync=sync)
        self._written, self.damaged = entries, False
        return True
