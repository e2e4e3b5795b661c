"""The leader-epoch cache of one partition: which leader epoch started at which offset.

Owns the ordered (epoch, start offset) list behind OffsetForLeaderEpoch answers and follower
truncation, and its ``leader-epoch-checkpoint`` file. Entries only move forward: an epoch is
assigned when a leader first appends in it; truncation trims from either end.
"""

from __future__ import annotations

import bisect
import os

from pybroker.log.checkpoint import LEADER_EPOCH_CHECKPOINT, LeaderEpochCheckpointFile

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    """Epoch → start offset, with Kafka's ``endOffsetFor`` lookup."""

    def __init__(self, partition_dir: str) -> None:
        self._file = LeaderEpochCheckpointFile(os.path.join(partition_dir, LEADER_EPOCH_CHECKPOINT))
        self._entries: list[tuple[int, int]] = self._file.read()

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1][0] if self._entries else UNDEFINED_EPOCH

    def earliest_entry(self) -> tuple[int, int] | None:
        return self._entries[0] if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` begins at ``start_offset`` (no-op unless it is a new epoch)."""
        if epoch < 0:
            return
        if self._entries and self._entries[-1][0] >= epoch:
            return
        # A later epoch at the same or a lower start offset supersedes earlier entries there.
        while self._entries and self._entries[-1][1] >= start_offset:
            self._entries.pop()
        self._entries.append((epoch, start_offset))
        self.flush()

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

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (the log was truncated there)."""
        kept = [(e, s) for e, s in self._entries if s < end_offset]
        if kept != self._entries:
            self._entries = kept
            self.flush()

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
        self.write(self._entries)

    def write(self, entries: list[tuple[int, int]]) -> None:
        """Write ``entries`` (a snapshot of ``entries``, e.g. from a worker thread) to the file."""
        self._file.write(entries)
