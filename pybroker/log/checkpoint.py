"""Checkpoint files in Kafka's text format, written atomically.

Owns reading and writing ``recovery-point-offset-checkpoint``, ``replication-offset-checkpoint``,
``log-start-offset-checkpoint`` (one ``topic partition offset`` line per partition) and the
per-partition ``leader-epoch-checkpoint`` (``epoch start_offset`` lines). Every file is a version
line (``0``), a count line, then the entries; a write goes to ``<name>.tmp``, is fsynced, renamed
over the old file, and the directory is fsynced. A damaged file raises ``CheckpointError`` naming
the file and line, so the operator sees what is wrong instead of silently losing state.

One writer per file. Two writes of one file at once would share its ``.tmp``: the second rename
finds it gone (ENOENT) and a race of the broker's own would pass for a failed disk. So every file
written here has exactly one writer, as Kafka's ``CheckpointFile`` has its lock:

* the log-dir files (``recovery-point-offset-checkpoint``, ``replication-offset-checkpoint``,
  ``log-start-offset-checkpoint``, and the cleaner's ``cleaner-offset-checkpoint``) each belong to
  one `pybroker.log.file_sync.CoalescingFileWriter` of their owner (the log manager, the
  cleaner): one task writes them, and writes asked for meanwhile are folded into its next one;
* a partition's ``leader-epoch-checkpoint`` is written by the log manager's one epoch-writer pass
  at a time (`pybroker.log.file_sync.BackgroundPasses`), or synchronously by its cache while the
  log belongs to no log manager (loading, tools);
* ``meta.properties`` and ``.kafka_cleanshutdown`` are written once, at start-up and at shutdown,
  when nothing else runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from pybroker.types import TopicPartition

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"

_VERSION = 0


class CheckpointError(ValueError):
    """A checkpoint file that cannot be parsed."""


def write_atomically(path: str, text: str, *, sync: bool = True) -> None:
    """Write ``text`` to ``path`` via a fsynced temp file and a rename, then fsync the directory.
    With ``sync=False`` nothing is fsynced: the caller makes the file and its directory durable
    later, and a reader must take a damaged file after a crash as missing."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if not sync:
        return
    dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _render(entries: list[str]) -> str:
    return f"{_VERSION}\n{len(entries)}\n" + "".join(line + "\n" for line in entries)


def _parse(path: str, fields_per_line: int) -> list[list[str]]:
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    # Kafka's CheckpointFile reads a file that ends before its count line as empty: Kafka
    # creates its checkpoint files empty (the cleaner's stays so until the first clean).
    if not lines:
        return []
    if lines[0].strip() != str(_VERSION):
        raise CheckpointError(f"{path}: unrecognized version {lines[0]!r}")
    if len(lines) == 1:
        return []
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"{path}: bad entry count {lines[1]!r}") from None
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise CheckpointError(f"{path}: expected {count} entries, found {len(entries)}")
    for number, fields in enumerate(entries, start=3):
        if len(fields) != fields_per_line:
            raise CheckpointError(f"{path}: line {number} is malformed: {' '.join(fields)!r}")
    return entries


def render_offsets(offsets: Mapping[TopicPartition, int]) -> str:
    """The text of an offset checkpoint holding ``offsets``."""
    return _render([f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items())])


class OffsetCheckpointFile:
    """A log-dir checkpoint of one offset per partition (recovery point, HW, log start offset)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        write_atomically(self.path, render_offsets(offsets))

    def read(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for topic, partition, offset in _parse(self.path, 3):
            try:
                out[TopicPartition(topic, int(partition))] = int(offset)
            except ValueError:
                raise CheckpointError(f"{self.path}: bad entry {topic} {partition} {offset}") from None
        return out


class LeaderEpochCheckpointFile:
    """A partition's ``leader-epoch-checkpoint``: (epoch, start offset) pairs in order."""

    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, entries: Iterable[tuple[int, int]], *, sync: bool = True) -> None:
        write_atomically(self.path, _render([f"{epoch} {start}" for epoch, start in entries]), sync=sync)

    def read(self) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for epoch, start in _parse(self.path, 2):
            try:
                out.append((int(epoch), int(start)))
            except ValueError:
                raise CheckpointError(f"{self.path}: bad entry {epoch} {start}") from None
        return out
