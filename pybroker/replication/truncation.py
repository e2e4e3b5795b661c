"""Where a follower's log must be cut to match its leader's: Kafka's truncation rules as pure
functions.

Owns the decisions of Kafka's ``AbstractFetcherThread`` that depend only on the leader's answer
and the follower's log (``getOffsetTruncationState``, ``fetchOffsetAndTruncate``), and the leader's
side of truncation on fetch (``Partition.readRecords``: when a follower's fetch gets a
``DivergingEpoch`` instead of records). Nothing here does I/O or changes a log: the replica
fetcher applies the results with ``Log.truncate_to`` and ``Log.truncate_fully_and_start_at``.

The leader's answer is an (epoch, end offset) pair: the ``DivergingEpoch`` of a Fetch response
(v12+, truncation on fetch) or a partition of an OffsetsForLeaderEpoch response, where the
follower asked about its own latest epoch. Both come from ``LeaderEpochCache.end_offset_for`` on
the leader: the largest epoch at most the one asked about, and where it ended there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pybroker.log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_OFFSET
from pybroker.log.log import OffsetOutOfRangeError


class EpochEndOffsets(Protocol):
    """What the rules read of a leader-epoch cache (``LeaderEpochCache``)."""

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]: ...


@dataclass(frozen=True)
class OffsetTruncationState:
    """Truncate the follower's log to ``offset`` (Kafka's ``OffsetTruncationState``). When
    ``truncation_completed`` is false the follower must ask the leader again, about its latest
    epoch after this truncation (on the truncation-on-fetch path: fetch again from the new log end
    offset with that epoch as ``LastFetchedEpoch``)."""

    offset: int
    truncation_completed: bool


def offset_truncation_state(
    leader_epoch: int,
    leader_end_offset: int,
    epoch_cache: EpochEndOffsets,
    log_end_offset: int,
    fetch_offset: int,
) -> OffsetTruncationState:
    """Kafka's ``getOffsetTruncationState``: where a follower truncates given the leader's
    ``(leader_epoch, leader_end_offset)`` answer, its own leader-epoch cache and log end offset,
    and its current fetch offset.

    * the leader knows no end offset (``leader_end_offset == -1``: it has no epochs, or the
      follower asked about an epoch below the leader's first): the fetch offset, final. On the
      OffsetsForLeaderEpoch path that is the follower's high watermark;
    * the leader gave no epoch (an old protocol version): min(leader end offset, log end offset),
      final;
    * the follower has no end offset for ``leader_epoch`` (it tracks no epochs, e.g. it was not
      tracking them then): min(leader end offset, log end offset), final;
    * the follower's own answer for ``leader_epoch`` is a smaller epoch (it never had
      ``leader_epoch``): min(the end offset of that smaller epoch, log end offset), **not**
      final: ask again with the follower's latest epoch after truncating (KIP-279);
    * otherwise: min(leader end offset, the follower's end offset for that epoch, log end
      offset), final (KIP-101).
    """
    if leader_end_offset == UNDEFINED_OFFSET:
        return OffsetTruncationState(fetch_offset, True)
    if leader_epoch == UNDEFINED_EPOCH:
        return OffsetTruncationState(min(leader_end_offset, log_end_offset), True)
    follower_epoch, follower_end_offset = epoch_cache.end_offset_for(leader_epoch, log_end_offset)
    if follower_end_offset == UNDEFINED_OFFSET:
        return OffsetTruncationState(min(leader_end_offset, log_end_offset), True)
    if follower_epoch != leader_epoch:
        return OffsetTruncationState(min(follower_end_offset, log_end_offset), False)
    return OffsetTruncationState(min(leader_end_offset, follower_end_offset, log_end_offset), True)


def diverging_epoch(
    epoch_cache: EpochEndOffsets,
    log_start_offset: int,
    log_end_offset: int,
    last_fetched_epoch: int,
    fetch_offset: int,
) -> tuple[int, int] | None:
    """The leader's check of a follower fetch that carries ``LastFetchedEpoch`` (Fetch v12+,
    Kafka's ``Partition.readRecords``): ``(epoch, end offset)`` to answer as ``DivergingEpoch``
    (with no records) when the follower's log diverged, None to read from ``fetch_offset``.

    The leader's ``end_offset_for(last_fetched_epoch)`` diverges when its epoch is below
    ``last_fetched_epoch`` (the leader never had that epoch) or its end offset is below
    ``fetch_offset`` (the follower has more of that epoch than the leader). Raises
    ``OffsetOutOfRangeError`` (OFFSET_OUT_OF_RANGE) when the leader has no end offset for that
    epoch, or ``fetch_offset`` is below the log start offset, whether or not the logs diverge.
    """
    epoch, end_offset = epoch_cache.end_offset_for(last_fetched_epoch, log_end_offset)
    if end_offset == UNDEFINED_OFFSET or epoch == UNDEFINED_EPOCH:
        raise OffsetOutOfRangeError(
            f"Could not determine the end offset of the last fetched epoch {last_fetched_epoch} from the request"
        )
    if fetch_offset < log_start_offset:
        raise OffsetOutOfRangeError(
            f"Received request for offset {fetch_offset}, but we only have log segments in the range "
            f"{log_start_offset} to {log_end_offset}."
        )
    if epoch < last_fetched_epoch or end_offset < fetch_offset:
        return epoch, end_offset
    return None


@dataclass(frozen=True)
class OutOfRangeResolution:
    """What a follower does after OFFSET_OUT_OF_RANGE: at most one of the truncations, then
    fetch from ``fetch_offset``."""

    fetch_offset: int
    truncate_to: int | None = None  # Log.truncate_to(this)
    truncate_fully_and_start_at: int | None = None  # Log.truncate_fully_and_start_at(this)


def leader_start_offset_needed(log_end_offset: int, leader_end_offset: int) -> bool:
    """Whether resolving OFFSET_OUT_OF_RANGE needs the leader's log start offset (a second
    ListOffsets, EARLIEST) after its log end offset (ListOffsets LATEST) came back."""
    return leader_end_offset >= log_end_offset


def resolve_offset_out_of_range(
    log_end_offset: int, leader_end_offset: int, leader_start_offset: int | None = None
) -> OutOfRangeResolution:
    """Kafka's ``fetchOffsetAndTruncate`` for a follower whose fetch got OFFSET_OUT_OF_RANGE,
    given its own log end offset and the leader's log end offset (ListOffsets LATEST, which a
    leader answers with its LEO for a replica):

    * leader LEO < own LEO (an unclean election): truncate to the leader's LEO, fetch from there;
    * otherwise, with the leader's log start offset (ListOffsets EARLIEST; raises ``ValueError``
      without it, see ``leader_start_offset_needed``): if it is above the own LEO, every local
      record is stale: truncate fully and start at it. Either way fetch from
      max(leader log start offset, own LEO).
    """
    if leader_end_offset < log_end_offset:
        return OutOfRangeResolution(leader_end_offset, truncate_to=leader_end_offset)
    if leader_start_offset is None:
        raise ValueError("the leader's log end offset is not below ours: its log start offset is needed")
    if leader_start_offset > log_end_offset:
        return OutOfRangeResolution(leader_start_offset, truncate_fully_and_start_at=leader_start_offset)
    return OutOfRangeResolution(max(leader_start_offset, log_end_offset))
