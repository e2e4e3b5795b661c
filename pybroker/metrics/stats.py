"""The hot-path counters: what the broker's components increment while they work.

Owns the counters of Kafka's ``BrokerTopicStats`` (per topic and all topics), the replica
manager's ISR change meters, and the request metrics (requests per API and version, and each
API's total time as a histogram). Every counter is a plain int (or float) in a dict or a slot:
incrementing one is a few dictionary operations, with no lock and no prometheus_client call.
`pybroker.server.metrics` reads them at scrape time. Kafka's meters are rates; these are the
monotonic counts behind them (Prometheus computes the rates).

The counters are touched once per request, once per partition of a request, or once per ISR
change; never once per record (a record set's record count comes from the append's result).
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar

from pybroker.protocol.api_keys import ApiKey

# Request total time buckets, in milliseconds (upper bounds; +Inf is implied).
LATENCY_BUCKETS_MS: tuple[float, ...] = (
    0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000,
)


class Histogram:
    """A fixed-bucket histogram: ``observe`` is one bisect and three additions."""

    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds: Iterable[float] = LATENCY_BUCKETS_MS) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last one is +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> Iterator[tuple[str, int]]:
        """(``le`` label, cumulative count) per bucket, +Inf last, as Prometheus wants them."""
        total = 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            total += count
            yield ("+Inf" if bound == float("inf") else _float_text(bound)), total


def _float_text(value: float) -> str:
    return repr(float(value))


class TopicCounters:
    """One topic's (or all topics') ``BrokerTopicMetrics`` counts."""

    __slots__ = ("messages_in", "bytes_in", "bytes_out", "total_produce_requests", "failed_produce_requests",
                 "total_fetch_requests", "failed_fetch_requests")

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.total_produce_requests = 0
        self.failed_produce_requests = 0
        self.total_fetch_requests = 0
        self.failed_fetch_requests = 0


class BrokerTopicStats:
    """Kafka's ``BrokerTopicStats``: per-topic counters plus the all-topics ones, and the
    replication bytes in and out (followers' fetches, all topics only, as in Kafka)."""

    __slots__ = ("topics", "all", "replication_bytes_out", "replication_bytes_in")

    def __init__(self) -> None:
        self.topics: dict[str, TopicCounters] = {}
        self.all = TopicCounters()
        self.replication_bytes_out = 0
        self.replication_bytes_in = 0

    def topic(self, name: str) -> TopicCounters:
        counters = self.topics.get(name)
        if counters is None:
            counters = self.topics[name] = TopicCounters()
        return counters

    def produce_request(self, topic: str) -> None:
        """One partition of a produce request reached the replica manager (Kafka's
        TotalProduceRequestsPerSec)."""
        self.topic(topic).total_produce_requests += 1
        self.all.total_produce_requests += 1

    def failed_produce(self, topic: str) -> None:
        """An append failed for a reason other than Kafka's "known" ones (FailedProduceRequestsPerSec)."""
        self.topic(topic).failed_produce_requests += 1
        self.all.failed_produce_requests += 1

    def appended(self, topic: str, size: int, records: int) -> None:
        """A leader appended a record set of ``size`` bytes holding ``records`` records
        (BytesInPerSec, MessagesInPerSec)."""
        counters = self.topic(topic)
        counters.bytes_in += size
        counters.messages_in += records
        counters = self.all
        counters.bytes_in += size
        counters.messages_in += records

    def replicated_in(self, size: int) -> None:
        """A follower appended ``size`` bytes fetched from its leader (ReplicationBytesInPerSec,
        all topics only: Kafka's ``updateReplicationBytesIn`` in ReplicaFetcherThread)."""
        self.replication_bytes_in += size

    def fetched(self, replica_id: int, results: Mapping[Any, Any]) -> None:
        """A fetch response's partitions (``TopicPartition`` → result with ``error`` and
        ``records``): a consumer's records count as BytesOutPerSec of their topic, a follower's
        as ReplicationBytesOutPerSec; each partition as one fetch request of its topic, failed
        when it carries an error."""
        follower = replica_id >= 0
        everything = self.all
        for tp, result in results.items():
            counters = self.topic(tp.topic)
            counters.total_fetch_requests += 1
            everything.total_fetch_requests += 1
            if result.error:
                counters.failed_fetch_requests += 1
                everything.failed_fetch_requests += 1
                continue
            size = len(result.records)
            if follower:
                self.replication_bytes_out += size
            else:
                counters.bytes_out += size
                everything.bytes_out += size

    def fetched_later(self, replica_id: int, future: asyncio.Future[Any]) -> None:
        """``fetched`` once a long-poll fetch's future has its results."""
        future.add_done_callback(
            lambda done: None if done.cancelled() or done.exception() is not None
            else self.fetched(replica_id, done.result())
        )


class IsrStats:
    """The replica manager's IsrShrinksPerSec, IsrExpandsPerSec and FailedIsrUpdatesPerSec
    counts (Kafka's ``AlterPartitionListener``: marked when a change is committed, or fails)."""

    __slots__ = ("shrinks", "expands", "failed_updates")

    def __init__(self) -> None:
        self.shrinks = 0
        self.expands = 0
        self.failed_updates = 0

    def committed(self, expansion: bool) -> None:
        if expansion:
            self.expands += 1
        else:
            self.shrinks += 1


_Reply = TypeVar("_Reply")

# Kafka's request metric names: ApiKeys' names, and the two names a Fetch is also counted under.
_NAMES: dict[int, str] = {key.value: key.kafka_name for key in ApiKey}
FETCH_CONSUMER = "FetchConsumer"
FETCH_FOLLOWER = "FetchFollower"


class RequestMetrics:
    """Kafka's ``RequestMetrics``: requests answered per (API name, version), and each API's total
    time (from the frame's arrival at the dispatcher until its response is encoded) in ms.

    A Fetch is counted under ``Fetch`` and under ``FetchConsumer`` or ``FetchFollower``, as Kafka's
    ``RequestChannel`` does. A request answered with no response (acks=0) counts when handled; one
    whose connection closed (CloseConnection) does not count.
    """

    __slots__ = ("requests", "total_time")

    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], int] = {}
        self.total_time: dict[str, Histogram] = {}

    def completed(self, api_key: int, version: int, request: Any, started_ns: int, reply: _Reply) -> _Reply:
        """Record the request now, or when ``reply`` (a future) is done; returns ``reply``."""
        if isinstance(reply, asyncio.Future):
            reply.add_done_callback(lambda _: self.record(api_key, version, request, started_ns))
        else:
            self.record(api_key, version, request, started_ns)
        return reply

    def record(self, api_key: int, version: int, request: Any, started_ns: int) -> None:
        elapsed_ms = (time.perf_counter_ns() - started_ns) / 1e6
        name = _NAMES.get(api_key) or str(api_key)
        self._record(name, version, elapsed_ms)
        if api_key == ApiKey.FETCH:
            self._record(FETCH_FOLLOWER if getattr(request, "replica_id", -1) >= 0 else FETCH_CONSUMER, version,
                         elapsed_ms)

    def _record(self, name: str, version: int, elapsed_ms: float) -> None:
        key = (name, version)
        self.requests[key] = self.requests.get(key, 0) + 1
        histogram = self.total_time.get(name)
        if histogram is None:
            histogram = self.total_time[name] = Histogram()
        histogram.observe(elapsed_ms)
