"""KIP-253 consumer gating: which records of an assigned partition may be delivered yet.

Owns the two gates of research kip-semantics §1.5, generalised to any chain of changes, and
the state a group member keeps to decide them (`GateKeeper`):

- **Expansion gate** of a partition x created by an expansion (its ``LeaderEpochsAfterCreation``
  map A is non-empty): with ``P_old = len(A)``, x took its keys from
  ``P3 = LinearHashing(initial, P_old).split_source(x)``; records of P3 up to
  ``E = OffsetsForLeaderEpoch(P3, A[P3])`` (exclusive end; the log start offset of P3 when the
  epoch is unknown) were produced under the old count. Nothing of x is delivered until the group
  has delivered P3 up to E (``group position(P3) >= E``).
- **Deletion gate** of x for each partition q marked for deletion whose
  ``LeaderEpochsBeforeDeletion`` map B has ``P_new = len(B)`` and
  ``LinearHashing(initial, P_new).split_source(q) == x`` (for one shrink these q form D(x)):
  records of x below ``U = OffsetsForLeaderEpoch(x, B[x])`` were produced before the shrink and
  go freely; those at U and above wait until the group has drained q
  (``group position(q) >= ListOffsets LATEST(q)``), q is empty, or q no longer exists.

The pure functions (`expansion_source`, `deletion_sources`, `hold_from`) decide from numbers;
`GateKeeper` fetches those numbers (PartitionLeaderEpochsForPartitions, OffsetForLeaderEpoch,
ListOffsets), keeps the group positions the coordinator reports (ConsumerGroupPosition, sent by
the consumer), says which partitions the member must ask about, and which gates opened since the
last look (for ``on_partition_key_assigned``). The consumer owns the exchange and the callbacks.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pybroker._native import LinearHashing
from pybroker.client.admin import AdminError
from pybroker.client.topic_layout import TopicLayout
from pybroker.common.errors import ErrorCode
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

UNKNOWN = -1


def expansion_source(partition: int, initial: int, after_creation: Mapping[int, int]) -> tuple[int, int] | None:
    """(P3, its leader epoch just before the expansion) for a partition created by an expansion
    whose ``LeaderEpochsAfterCreation`` map is ``after_creation``; None when the map is empty (the
    partition was not created by an expansion) or does not fit."""
    old_count = len(after_creation)
    if old_count < initial or partition < old_count:
        return None
    source = LinearHashing(initial, old_count).split_source(partition)
    epoch = after_creation.get(source)
    return None if epoch is None else (source, epoch)


def deletion_sources(
    partition: int, initial: int, before_deletion: Mapping[int, Mapping[int, int]],
) -> list[tuple[int, int]]:
    """[(q, the leader epoch of ``partition`` just before q's shrink)] for every partition q marked
    for deletion whose keys went to ``partition``. ``before_deletion`` maps each marked q to its
    ``LeaderEpochsBeforeDeletion`` map (survivor → epoch)."""
    out = []
    for deleted, epochs in sorted(before_deletion.items()):
        new_count = len(epochs)
        if not epochs or new_count < initial or deleted < new_count or partition >= new_count:
            continue
        if LinearHashing(initial, new_count).split_source(deleted) == partition and partition in epochs:
            out.append((deleted, epochs[partition]))
    return out


@dataclass(frozen=True)
class ExpansionGate:
    """Nothing of the gated partition goes before the group has delivered ``source`` up to
    ``end_offset``."""

    source: TopicPartition
    end_offset: int


@dataclass(frozen=True)
class DeletionGate:
    """Records of the gated partition at ``boundary`` and above wait until ``deleted`` is drained."""

    deleted: TopicPartition
    boundary: int


@dataclass
class PartitionGates:
    expansion: ExpansionGate | None = None
    deletions: list[DeletionGate] = field(default_factory=list)


@dataclass
class PartitionOffsets:
    """What is known of a partition a gate waits on."""

    log_start: int = UNKNOWN
    log_end: int = UNKNOWN  # ListOffsets LATEST at the consumer's isolation level
    removed: bool = False


def expansion_open(gate: ExpansionGate, group_position: int, source: PartitionOffsets | None = None) -> bool:
    if group_position >= gate.end_offset:
        return True
    return source is not None and source.log_start >= 0 and gate.end_offset <= source.log_start


def deletion_open(gate: DeletionGate, group_position: int, deleted: PartitionOffsets | None) -> bool:
    if deleted is None or deleted.log_end < 0:
        return False  # not known yet: still held
    if deleted.removed or deleted.log_end <= deleted.log_start:
        return True
    return group_position >= deleted.log_end


def hold_from(
    gates: PartitionGates, group_positions: Mapping[TopicPartition, int],
    offsets: Mapping[TopicPartition, PartitionOffsets],
) -> int | None:
    """The first offset of the gated partition that may not be delivered yet (0: none may), or
    None when nothing is held. ``group_positions`` holds the group's position of each partition a
    gate waits on (-1 or absent: unknown, still held)."""
    if gates.expansion is not None:
        source = gates.expansion.source
        if not expansion_open(gates.expansion, group_positions.get(source, UNKNOWN), offsets.get(source)):
            return 0
    held = [g.boundary for g in gates.deletions
            if not deletion_open(g, group_positions.get(g.deleted, UNKNOWN), offsets.get(g.deleted))]
    return min(held) if held else None


class GateKeeper:
    """A member's gates for its assigned partitions, and the positions they wait on.

    ``admin``: an ``Admin`` (``partition_leader_epochs``, ``offsets_for_leader_epochs``,
    ``list_offsets``). ``prepare`` after each assignment; ``hold`` for each partition before
    delivering; ``interested`` lists what to ask the coordinator; ``update_group_positions`` with
    its answer; ``refresh_offsets`` while gates are closed; ``newly_opened`` for the callback.
    """

    def __init__(self, admin: Any, isolation_level: int = 0) -> None:
        self.admin = admin
        self.isolation_level = isolation_level
        self.gates: dict[TopicPartition, PartitionGates] = {}
        self.group_positions: dict[TopicPartition, int] = {}
        self.offsets: dict[TopicPartition, PartitionOffsets] = {}
        self._was_held: dict[TopicPartition, int | None] = {}
        self.supported = True

    def clear(self) -> None:
        self.gates.clear()
        self.group_positions.clear()
        self.offsets.clear()
        self._was_held.clear()

    async def prepare(self, assigned: Iterable[TopicPartition], layouts: Mapping[str, TopicLayout]) -> None:
        """Work out the gates of ``assigned`` (partitions of topics in ``layouts`` only: the
        caller leaves out topics with ``enable.ordered.delivery=false``)."""
        self.clear()
        assigned = [tp for tp in assigned if tp.topic in layouts and layouts[tp.topic].changed]
        if not assigned or not self.supported:
            return
        asked: list[TopicPartition] = []
        for topic in dict.fromkeys(tp.topic for tp in assigned):
            layout = layouts[topic]
            asked += [tp for tp in assigned if tp.topic == topic and tp.partition >= layout.initial_partition_count]
            asked += [TopicPartition(topic, q) for q in layout.marked_partitions]
        asked = list(dict.fromkeys(asked))
        if not asked:
            return
        try:
            maps = await self.admin.partition_leader_epochs(asked)
        except AdminError as e:
            log.warning("cannot read the partition epochs of %s, no gating: %s", [str(tp) for tp in asked], e)
            return
        except Exception as e:  # UnsupportedVersionError: a broker without KIP-253
            log.warning("the broker does not offer PartitionLeaderEpochsForPartitions, no gating: %s", e)
            self.supported = False
            return
        expansions: dict[TopicPartition, tuple[TopicPartition, int]] = {}
        deletions: dict[TopicPartition, list[tuple[TopicPartition, int]]] = {}
        for tp in assigned:
            layout = layouts[tp.topic]
            after_creation = maps.get(tp, ({}, {}))[0]
            found = expansion_source(tp.partition, layout.initial_partition_count, after_creation)
            if found is not None:
                expansions[tp] = (TopicPartition(tp.topic, found[0]), found[1])
            before = {q: maps[TopicPartition(tp.topic, q)][1] for q in layout.marked_partitions
                      if TopicPartition(tp.topic, q) in maps}
            sources = deletion_sources(tp.partition, layout.initial_partition_count, before)
            if sources:
                deletions[tp] = [(TopicPartition(tp.topic, q), epoch) for q, epoch in sources]
        # Epoch boundaries: E on each source, U on each gated partition.
        epoch_queries: dict[TopicPartition, int] = {source: epoch for source, epoch in expansions.values()}
        ends = await self.admin.offsets_for_leader_epochs(epoch_queries) if epoch_queries else {}
        # A survivor's epoch before each shrink differs in a chain of shrinks: one round per epoch.
        pairs = list(dict.fromkeys((tp, epoch) for tp, found in deletions.items() for _, epoch in found))
        boundary_ends: dict[tuple[TopicPartition, int], int] = {}
        while pairs:
            round_: dict[TopicPartition, int] = {}
            for tp, epoch in pairs:
                round_.setdefault(tp, epoch)
            answered = await self.admin.offsets_for_leader_epochs(round_)
            boundary_ends.update({(tp, epoch): answered[tp] for tp, epoch in round_.items()})
            pairs = [pair for pair in pairs if pair not in boundary_ends]
        unknown = [tp for tp, end in ends.items() if end < 0]
        unknown += [tp for (tp, _), end in boundary_ends.items() if end < 0]
        starts = await self._list(unknown, "earliest") if unknown else {}
        for tp in assigned:
            gates = PartitionGates()
            if tp in expansions:
                source, _ = expansions[tp]
                end = ends.get(source, UNKNOWN)
                gates.expansion = ExpansionGate(source, end if end >= 0 else max(starts.get(source, 0), 0))
            for deleted, epoch in deletions.get(tp, []):
                end = boundary_ends[(tp, epoch)]
                gates.deletions.append(DeletionGate(deleted, end if end >= 0 else max(starts.get(tp, 0), 0)))
            if gates.expansion is not None or gates.deletions:
                self.gates[tp] = gates
                # Until a gate is seen open, the partition counts as held at its first boundary.
                self._was_held[tp] = 0 if gates.expansion is not None else min(g.boundary for g in gates.deletions)
        await self.refresh_offsets(force=True)
        log.info("gates: %s", {str(tp): g for tp, g in self.gates.items()})

    def _positions(self, owned: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The group's positions, this member's own ones counting for the partitions it owns."""
        return {**self.group_positions, **{tp: pos for tp, pos in owned.items() if pos >= 0}}

    def waited_on(self, owned: Mapping[TopicPartition, int] | None = None) -> set[TopicPartition]:
        """Partitions whose group position some closed gate waits on."""
        positions = self._positions(owned or {})
        out: set[TopicPartition] = set()
        for gates in self.gates.values():
            expansion = gates.expansion
            if expansion is not None and not expansion_open(
                    expansion, positions.get(expansion.source, UNKNOWN), self.offsets.get(expansion.source)):
                out.add(expansion.source)
            for gate in gates.deletions:
                if not deletion_open(gate, positions.get(gate.deleted, UNKNOWN), self.offsets.get(gate.deleted)):
                    out.add(gate.deleted)
        return out

    def interested(self, owned: Mapping[TopicPartition, int]) -> set[TopicPartition]:
        """Partitions to ask the coordinator about: waited on and not owned by this member."""
        return {tp for tp in self.waited_on(owned) if tp not in owned}

    def update_group_positions(self, positions: Mapping[TopicPartition, int]) -> None:
        self.group_positions.update(positions)

    def hold(self, tp: TopicPartition, owned: Mapping[TopicPartition, int]) -> int | None:
        """The first offset of ``tp`` not deliverable yet (None: no hold). ``owned``: this
        member's own positions, which count as the group's for partitions it owns."""
        gates = self.gates.get(tp)
        if gates is None:
            return None
        return hold_from(gates, self._positions(owned), self.offsets)

    def newly_opened(self, owned: Mapping[TopicPartition, int]) -> list[TopicPartition]:
        """Gated partitions whose hold lifted or moved up since the last call, the first call
        after ``prepare`` included (keys that were another partition's now arrive here:
        ``on_partition_key_assigned``)."""
        out = []
        for tp in self.gates:
            now = self.hold(tp, owned)
            before = self._was_held.get(tp)
            if before is not None and (now is None or now > before):
                out.append(tp)
            self._was_held[tp] = now
        return out

    def holding(self, owned: Mapping[TopicPartition, int]) -> bool:
        """Whether some gate is still closed."""
        return bool(self.waited_on(owned))

    async def refresh_offsets(self, force: bool = False) -> None:
        """ListOffsets of the partitions closed gates wait on (deleted ones: log end and start;
        expansion sources: log start)."""
        deleted = {g.deleted for gates in self.gates.values() for g in gates.deletions}
        sources = {gates.expansion.source for gates in self.gates.values() if gates.expansion is not None}
        wanted = sorted((deleted | sources) & (self.waited_on() if not force else deleted | sources))
        if not wanted:
            return
        latest = await self._list([tp for tp in wanted if tp in deleted], "latest")
        earliest = await self._list(wanted, "earliest")
        for tp in wanted:
            known = self.offsets.setdefault(tp, PartitionOffsets())
            if tp in deleted:
                end = latest.get(tp)
                if end is None:
                    known.removed = True
                else:
                    known.log_end = end
            start = earliest.get(tp)
            if start is not None:
                known.log_start = start

    async def _list(self, partitions: list[TopicPartition], spec: str) -> dict[TopicPartition, int]:
        """ListOffsets; a partition that no longer exists is left out of the answer."""
        if not partitions:
            return {}
        try:
            listed = await self.admin.list_offsets(partitions, spec, self.isolation_level)
            return {tp: o.offset for tp, o in listed.items()}
        except AdminError as e:
            out = {}
            failed = e.failures or {}
            for tp in partitions:
                error = failed.get(tp)
                if error is not None and error.error != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    raise
            ok = [tp for tp in partitions if tp not in failed]
            if ok:
                out.update(await self._list(ok, spec))
            return out
