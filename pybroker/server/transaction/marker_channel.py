"""The transaction markers' way to the partition leaders (Kafka's ``TransactionMarkerChannelManager``
and ``TransactionMarkerRequestCompletionHandler``).

Owns, once a transaction's PrepareCommit or PrepareAbort is in the log (EndTxn, an abort on
timeout or fencing, or a load that found it): the markers still to be written, queued per
destination broker (the partition's current leader, from the metadata cache) and, within a
queue, per ``__transaction_state`` partition (so that a resignation drops them at once); one
WriteTxnMarkers request at a time per destination, batching every marker queued for it
(ProducerId, ProducerEpoch, TransactionResult, CoordinatorEpoch, partitions grouped by topic);
what each answer means, as Kafka's completion handler decides it:

* written (NONE), or a partition that can take no marker (UNSUPPORTED_FOR_MESSAGE_FORMAT,
  UNSUPPORTED_VERSION): the partition leaves the transaction;
* NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), UNKNOWN_TOPIC_OR_PARTITION,
  REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, or no answer at all (connection lost): the leader is
  looked up again and the marker retried after a back-off; a partition the metadata cache no
  longer has (its topic was deleted) is dropped, and one whose leader is not alive waits in the
  unknown-destination queue, looked up again after each back-off;
* INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED (a newer coordinator or producer took
  over), or this broker no longer coordinating the transaction (NOT_COORDINATOR, a reload, a
  new coordinator epoch): sending stops for the transaction;
* anything else (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, ...) is a bug Kafka treats as fatal: logged,
  and sending stops for the transaction;

and, when every partition has its marker, writing CompleteCommit / CompleteAbort to the log
(retried after a back-off while the log answers COORDINATOR_NOT_AVAILABLE). Requests leave through
a ``MarkerSender`` (``marker_sender``); back-offs are timers of the injected scheduler.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pybroker.common.cluster import LiveBroker
from pybroker.common.errors import ErrorCode
from pybroker.protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from pybroker.scheduler import Scheduler, Timer
from pybroker.server.metadata_cache import MetadataCache
from pybroker.server.transaction.marker_sender import SEND_FAILURES, MarkerSender
from pybroker.server.transaction.metadata import (
    IllegalStateError,
    TransactionMetadata,
    TransactionResult,
    TxnTransitMetadata,
)
from pybroker.server.transaction.state_manager import (
    CoordinatorEpochAndTxnMetadata,
    TransactionStateManager,
)
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

RETRY_BACKOFF_MS = 100  # Kafka's retry.backoff.ms

_RETRIABLE = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR,
})
_FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})
_NO_MARKER_NEEDED = frozenset({ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION})


@dataclass(frozen=True)
class TxnMarkerEntry:
    """One transaction's marker for some partitions (one WritableTxnMarker)."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    result: TransactionResult
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class TxnIdAndMarkerEntry:
    transactional_id: str
    marker: TxnMarkerEntry


@dataclass(frozen=True)
class PendingCompleteTxn:
    """A transaction waiting for its markers, and the Complete* transition to write after them."""

    transactional_id: str
    coordinator_epoch: int
    txn_metadata: TransactionMetadata
    new_metadata: TxnTransitMetadata


class TxnMarkerQueue:
    """The markers waiting for one destination, per ``__transaction_state`` partition."""

    def __init__(self, destination: LiveBroker | None) -> None:
        self.destination = destination
        self._by_txn_partition: dict[int, list[TxnIdAndMarkerEntry]] = {}

    def add_markers(self, txn_topic_partition: int, entry: TxnIdAndMarkerEntry) -> None:
        self._by_txn_partition.setdefault(txn_topic_partition, []).append(entry)

    def remove_markers_for_txn_topic_partition(self, txn_topic_partition: int) -> list[TxnIdAndMarkerEntry]:
        return self._by_txn_partition.pop(txn_topic_partition, [])

    def drain(self) -> list[TxnIdAndMarkerEntry]:
        drained = [entry for entries in self._by_txn_partition.values() for entry in entries]
        self._by_txn_partition.clear()
        return drained

    def total_num_markers(self, txn_topic_partition: int | None = None) -> int:
        if txn_topic_partition is not None:
            return len(self._by_txn_partition.get(txn_topic_partition, ()))
        return sum(len(entries) for entries in self._by_txn_partition.values())


class TransactionMarkerChannelManager:
    """Sends the markers of prepared transactions and completes the transactions."""

    def __init__(
        self,
        broker_id: int,
        metadata_cache: MetadataCache,
        txn_state_manager: TransactionStateManager,
        sender: MarkerSender,
        scheduler: Scheduler,
        retry_backoff_ms: int = RETRY_BACKOFF_MS,
    ) -> None:
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.txn_state_manager = txn_state_manager
        self.sender = sender
        self.scheduler = scheduler
        self.retry_backoff_ms = retry_backoff_ms
        self.markers_queue_per_broker: dict[int, TxnMarkerQueue] = {}
        self.markers_queue_for_unknown_broker = TxnMarkerQueue(None)
        self.transactions_with_pending_markers: dict[str, PendingCompleteTxn] = {}
        self._in_flight: dict[int, asyncio.Task[None]] = {}
        self._unknown_retry_scheduled = False
        self._timers: set[Timer] = set()
        self._running = False
        self._failing: set[int] = set()  # destinations whose last request got no answer (logged once)

    # --- what the coordinator and the loads hand over -------------------------------------------

    def add_txn_markers_to_send(
        self, coordinator_epoch: int, result: TransactionResult, txn_metadata: TransactionMetadata,
        new_metadata: TxnTransitMetadata,
    ) -> None:
        """Send the markers of a prepared transaction, then write ``new_metadata`` (Complete*)."""
        transactional_id = txn_metadata.transactional_id
        self.transactions_with_pending_markers[transactional_id] = PendingCompleteTxn(
            transactional_id, coordinator_epoch, txn_metadata, new_metadata
        )
        self.add_txn_markers_to_broker_queue(
            transactional_id, txn_metadata.producer_id, txn_metadata.producer_epoch, result, coordinator_epoch,
            frozenset(txn_metadata.topic_partitions),
        )
        self.maybe_write_txn_completion(transactional_id)

    def add_txn_markers_to_broker_queue(
        self, transactional_id: str, producer_id: int, producer_epoch: int, result: TransactionResult,
        coordinator_epoch: int, partitions: Iterable[TopicPartition],
    ) -> None:
        """Queue the markers by the partitions' current leaders; partitions the metadata cache no
        longer has are dropped from the transaction (their topic is deleted)."""
        txn_topic_partition = self.txn_state_manager.partition_for(transactional_id)
        by_destination: dict[int | None, set[TopicPartition]] = {}
        deleted: set[TopicPartition] = set()
        for tp in partitions:
            state = self.metadata_cache.partition(tp)
            if state is None:
                deleted.add(tp)
                continue
            leader = self.metadata_cache.alive_broker(state.leader) if state.leader >= 0 else None
            by_destination.setdefault(None if leader is None else leader.broker_id, set()).add(tp)
        for broker_id, tps in by_destination.items():
            entry = TxnIdAndMarkerEntry(
                transactional_id, TxnMarkerEntry(producer_id, producer_epoch, coordinator_epoch, result, frozenset(tps))
            )
            if broker_id is None:
                self.markers_queue_for_unknown_broker.add_markers(txn_topic_partition, entry)
            else:
                destination = self.metadata_cache.alive_broker(broker_id)
                queue = self.markers_queue_per_broker.setdefault(broker_id, TxnMarkerQueue(destination))
                queue.destination = destination
                queue.add_markers(txn_topic_partition, entry)
        if deleted:
            self._drop_deleted_partitions(transactional_id, coordinator_epoch, deleted)
        self._wakeup()

    def _drop_deleted_partitions(self, transactional_id: str, coordinator_epoch: int, deleted: set[TopicPartition]) -> None:
        lookup = self.txn_state_manager.get_transaction_state(transactional_id)
        if isinstance(lookup, ErrorCode) or lookup is None:
            log.info("Looking up %s answers %s; cancel sending its markers", transactional_id,
                     "nothing" if lookup is None else lookup.name)
            self.transactions_with_pending_markers.pop(transactional_id, None)
            return
        if lookup.coordinator_epoch != coordinator_epoch:
            log.info("The coordinator epoch of %s changed from %d to %d; cancel sending its markers",
                     transactional_id, coordinator_epoch, lookup.coordinator_epoch)
            self.transactions_with_pending_markers.pop(transactional_id, None)
            return
        log.info("Couldn't find leader endpoint for partitions %s while trying to send transaction markers for %s, "
                 "these partitions are likely deleted already and hence can be skipped",
                 sorted(deleted), transactional_id)
        for tp in deleted:
            lookup.transaction_metadata.remove_partition(tp)
        self.maybe_write_txn_completion(transactional_id)

    def remove_markers_for_txn_topic_partition(self, txn_topic_partition: int) -> None:
        """A resignation or reload: forget the markers of that partition's transactions."""
        for queue in [self.markers_queue_for_unknown_broker, *self.markers_queue_per_broker.values()]:
            for entry in queue.remove_markers_for_txn_topic_partition(txn_topic_partition):
                self.remove_markers_for_txn_id(entry.transactional_id)

    def remove_markers_for_txn_id(self, transactional_id: str) -> None:
        self.transactions_with_pending_markers.pop(transactional_id, None)

    @property
    def num_txns_with_pending_markers(self) -> int:
        return len(self.transactions_with_pending_markers)

    def queue_for_broker(self, broker_id: int) -> TxnMarkerQueue | None:
        return self.markers_queue_per_broker.get(broker_id)

    # --- completing transactions ----------------------------------------------------------------

    def maybe_write_txn_completion(self, transactional_id: str) -> None:
        pending = self.transactions_with_pending_markers.get(transactional_id)
        if pending is not None and not pending.txn_metadata.topic_partitions:
            del self.transactions_with_pending_markers[transactional_id]
            self._write_txn_completion(pending)

    def _write_txn_completion(self, pending: PendingCompleteTxn) -> None:
        lookup = self.txn_state_manager.get_transaction_state(pending.transactional_id)
        if lookup == ErrorCode.NOT_COORDINATOR:
            log.info("No longer the coordinator for %s with coordinator epoch %d; cancel appending %s to the "
                     "transaction log", pending.transactional_id, pending.coordinator_epoch,
                     pending.new_metadata.txn_state.state_name)
        elif lookup == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            log.info("Loading the transaction partition of %s; the load will complete its transaction",
                     pending.transactional_id)
        elif isinstance(lookup, CoordinatorEpochAndTxnMetadata):
            if lookup.coordinator_epoch == pending.coordinator_epoch:
                self._try_append_to_log(pending)
            else:
                log.info("The coordinator epoch of %s changed from %d to %d after its markers were written; not "
                         "completing its transaction", pending.transactional_id, pending.coordinator_epoch,
                         lookup.coordinator_epoch)
        else:
            log.error("The coordinator still owns the transaction partition for %s, but there is no metadata in "
                      "the cache (%s); this is not expected", pending.transactional_id, lookup)

    def _try_append_to_log(self, pending: PendingCompleteTxn) -> None:
        def appended(error: ErrorCode) -> None:
            if error == ErrorCode.NONE:
                log.debug("Completed transaction of %s: %s", pending.transactional_id,
                          pending.new_metadata.txn_state.state_name)
            elif error == ErrorCode.COORDINATOR_NOT_AVAILABLE:
                log.info("Not available to append %s for %s; retrying", pending.new_metadata.txn_state.state_name,
                         pending.transactional_id)
                self._later(lambda: self._retry_append(pending))
            elif error in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
                log.info("Not completing the transaction of %s: %s", pending.transactional_id, error.name)
            else:
                log.error("Unexpected error %s while appending to transaction log for %s", error.name,
                          pending.transactional_id)

        self.txn_state_manager.append_transaction_to_log(
            pending.transactional_id, pending.coordinator_epoch, pending.new_metadata, appended,
            retry_on_error=lambda error: error == ErrorCode.COORDINATOR_NOT_AVAILABLE,
        )

    def _retry_append(self, pending: PendingCompleteTxn) -> None:
        if self._running:
            self._try_append_to_log(pending)

    # --- sending --------------------------------------------------------------------------------

    def start(self) -> None:
        self._running = True
        self._wakeup()

    async def shutdown(self) -> None:
        self._running = False
        for timer in list(self._timers):
            timer.cancel()
        self._timers.clear()
        in_flight = list(self._in_flight.values())
        for task in in_flight:
            task.cancel()
        await asyncio.gather(*in_flight, return_exceptions=True)
        self.markers_queue_per_broker.clear()
        self.markers_queue_for_unknown_broker.drain()
        self.transactions_with_pending_markers.clear()
        await self.sender.close()

    def _wakeup(self) -> None:
        """Start a request to every destination with markers queued and none in flight; look up
        the leaders of the unknown-destination queue again after a back-off."""
        if not self._running:
            return
        for broker_id, queue in self.markers_queue_per_broker.items():
            if broker_id not in self._in_flight and queue.total_num_markers():
                task = asyncio.get_running_loop().create_task(self._send(broker_id), name=f"txn-markers-to-{broker_id}")
                self._in_flight[broker_id] = task
        if self.markers_queue_for_unknown_broker.total_num_markers() and not self._unknown_retry_scheduled:
            self._unknown_retry_scheduled = True
            self._later(self._retry_unknown_destinations)

    def _retry_unknown_destinations(self) -> None:
        self._unknown_retry_scheduled = False
        for entry in self.markers_queue_for_unknown_broker.drain():
            marker = entry.marker
            self.add_txn_markers_to_broker_queue(entry.transactional_id, marker.producer_id, marker.producer_epoch,
                                                 marker.result, marker.coordinator_epoch, marker.partitions)

    def _later(self, action: Callable[[], None]) -> None:
        """Run ``action`` after the retry back-off, unless shut down meanwhile."""
        def fire() -> None:
            self._timers.discard(timer)
            if self._running:
                action()

        timer = self.scheduler.call_later(self.retry_backoff_ms, fire)
        self._timers.add(timer)

    async def _send(self, broker_id: int) -> None:
        queue = self.markers_queue_per_broker[broker_id]
        entries = queue.drain()
        destination = queue.destination
        try:
            if not entries:  # dropped (a resignation) before this task ran
                return
            if destination is None:
                raise ConnectionError(f"broker {broker_id} is not alive")
            response = await self.sender.send(destination, write_txn_markers_request(entries))
        except SEND_FAILURES as e:
            if broker_id not in self._failing:
                self._failing.add(broker_id)
                log.warning("Sending transaction markers to broker %d failed (%s); retrying", broker_id, e)
            else:
                log.debug("Sending transaction markers to broker %d failed again: %s", broker_id, e)
            self._later(lambda: self._on_disconnected(entries))
        else:
            self._failing.discard(broker_id)
            self._on_response(entries, response)
        finally:
            del self._in_flight[broker_id]
            self._wakeup()

    def _current(self, entry: TxnIdAndMarkerEntry) -> CoordinatorEpochAndTxnMetadata | None:
        """The transaction's metadata if this coordinator still sends its markers, else None
        (and its markers are forgotten)."""
        transactional_id, marker = entry.transactional_id, entry.marker
        lookup = self.txn_state_manager.get_transaction_state(transactional_id)
        if isinstance(lookup, ErrorCode) or lookup is None:
            log.info("Looking up %s answers %s; cancel sending its transaction markers", transactional_id,
                     "nothing" if lookup is None else lookup.name)
            self.remove_markers_for_txn_id(transactional_id)
            return None
        if lookup.coordinator_epoch != marker.coordinator_epoch:
            log.info("Transaction coordinator epoch for %s has changed from %d to %d; cancel sending transaction "
                     "markers", transactional_id, marker.coordinator_epoch, lookup.coordinator_epoch)
            self.remove_markers_for_txn_id(transactional_id)
            return None
        return lookup

    def _on_disconnected(self, entries: list[TxnIdAndMarkerEntry]) -> None:
        """No answer: queue the markers again, by the partitions' current leaders."""
        for entry in entries:
            if self._current(entry) is not None:
                self._requeue(entry, entry.marker.partitions)

    def _requeue(self, entry: TxnIdAndMarkerEntry, partitions: Iterable[TopicPartition]) -> None:
        marker = entry.marker
        self.add_txn_markers_to_broker_queue(entry.transactional_id, marker.producer_id, marker.producer_epoch,
                                             marker.result, marker.coordinator_epoch, partitions)

    def _on_response(self, entries: list[TxnIdAndMarkerEntry], response: WriteTxnMarkersResponse) -> None:
        errors_by_producer: dict[int, dict[TopicPartition, ErrorCode]] = {}
        for result in response.markers:
            errors = errors_by_producer.setdefault(result.producer_id, {})
            for topic in result.topics:
                for p in topic.partitions:
                    errors[TopicPartition(topic.name, p.partition_index)] = ErrorCode(p.error_code)
        for entry in entries:
            marker = entry.marker
            found = errors_by_producer.get(marker.producer_id)
            if found is None:
                log.error("WriteTxnMarkers response does not contain expected error map for producer id %d",
                          marker.producer_id)
                continue
            current = self._current(entry)
            if current is None:
                continue
            self._apply_marker_errors(entry, current.transaction_metadata, found)

    def _apply_marker_errors(
        self, entry: TxnIdAndMarkerEntry, metadata: TransactionMetadata, errors: dict[TopicPartition, ErrorCode]
    ) -> None:
        transactional_id = entry.transactional_id
        retry: set[TopicPartition] = set()
        try:
            for tp, error in errors.items():
                if error == ErrorCode.NONE or error in _NO_MARKER_NEEDED:
                    if error != ErrorCode.NONE:
                        log.info("Sending %s's transaction marker to %s failed with %s; the partition needs none",
                                 transactional_id, tp, error.name)
                    metadata.remove_partition(tp)
                elif error in _RETRIABLE:
                    log.info("Sending %s's transaction marker for partition %s has failed with error %s, retrying",
                             transactional_id, tp, error.name)
                    retry.add(tp)
                elif error in _FENCED:
                    log.info("Sending %s's transaction marker for partition %s has permanently failed with error %s; "
                             "cancel sending any more transaction markers", transactional_id, tp, error.name)
                    self.remove_markers_for_txn_id(transactional_id)
                    return
                else:
                    log.error("Received fatal error %s while sending txn marker for %s to %s", error.name,
                              transactional_id, tp)
                    self.remove_markers_for_txn_id(transactional_id)
                    return
        except IllegalStateError:
            log.exception("Applying the marker results of %s failed", transactional_id)
            self.remove_markers_for_txn_id(transactional_id)
            return
        if retry:
            self._later(lambda: self._retry_partitions(entry, retry))
        else:
            self.maybe_write_txn_completion(transactional_id)

    def _retry_partitions(self, entry: TxnIdAndMarkerEntry, partitions: set[TopicPartition]) -> None:
        if self._current(entry) is not None:
            self._requeue(entry, partitions)


def write_txn_markers_request(entries: list[TxnIdAndMarkerEntry]) -> WriteTxnMarkersRequest:
    """One WriteTxnMarkers request carrying ``entries``' markers, partitions grouped by topic."""
    markers = []
    for entry in entries:
        marker = entry.marker
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(marker.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        markers.append(WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
            transaction_result=marker.result == TransactionResult.COMMIT,
            topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=name, partition_indexes=indexes)
                    for name, indexes in by_topic.items()],
            coordinator_epoch=marker.coordinator_epoch,
        ))
    return WriteTxnMarkersRequest(markers=markers)
