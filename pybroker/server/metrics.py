"""The broker's metrics as Prometheus metric families, built at scrape time.

Owns `BrokerCollector`, a prometheus_client collector over one `Broker`: it reads the
hot-path counters of `pybroker.metrics.stats` and the broker's state (hosted partitions and
their ISRs, purgatories, local logs, the controller's context, the ZooKeeper session, the
group coordinator's groups, the log cleaner) and yields metric families named as the
Prometheus JMX exporter renders Kafka's MBeans (``kafka.server:type=ReplicaManager,
name=UnderReplicatedPartitions`` → ``kafka_server_replicamanager_underreplicatedpartitions``;
a meter's count → ``…_total``). docs/metrics.md lists every family with its MBean.

``collect()`` must run on the broker's event loop (`pybroker.metrics.http` calls it there):
it walks dictionaries the loop mutates. Its cost is per scrape, proportional to the hosted
partitions; nothing here runs on a request path.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from pybroker import _native
from pybroker.metrics.http import MetricsServer
from pybroker.metrics.stats import BrokerTopicStats, RequestMetrics

if TYPE_CHECKING:
    from pybroker.controller.store import ControllerStore
    from pybroker.server.dispatcher import RequestDispatcher
    from pybroker.server.services import BrokerServices

    class Broker(BrokerServices, Protocol):
        """What the collector reads beyond a handler's services: the store's ZooKeeper session
        and the dispatcher's request metrics."""

        store: ControllerStore
        dispatcher: RequestDispatcher

# Kafka's ZooKeeper client publishes its connection state as a string gauge (ZooKeeper's
# ``States`` names); kazoo's states map to them so: a lost connection is reconnecting, a lost
# session is closed until the client has a new one.
ZOOKEEPER_STATES: dict[str, str] = {"CONNECTED": "CONNECTED", "SUSPENDED": "CONNECTING", "LOST": "CLOSED"}
SESSION_STATES = ("CONNECTING", "CONNECTED", "CLOSED")

# Group states as Kafka's GroupMetadataManager gauges name them (NumGroups<State>).
GROUP_STATE_METRICS = {
    "PreparingRebalance": "numgroupspreparingrebalance",
    "CompletingRebalance": "numgroupscompletingrebalance",
    "Stable": "numgroupsstable",
    "Dead": "numgroupsdead",
    "Empty": "numgroupsempty",
}

# LogCleaner.metrics() keys → (MBean type, whether it is per log directory in Kafka).
CLEANER_METRICS = {
    "max-buffer-utilization-percent": "logcleaner",
    "cleaner-recopy-percent": "logcleaner",
    "max-clean-time-secs": "logcleaner",
    "max-dirty-percent": "logcleanermanager",
    "time-since-last-run-ms": "logcleanermanager",
    "uncleanable-partitions-count": "logcleanermanager",
}


def _counter(name: str, doc: str, labels: list[str] | None = None) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, labels=labels)


def _gauge(name: str, doc: str, value: float | None = None, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value, labels=labels)


class BrokerCollector(Collector):
    """Everything one broker measures; register it in a `CollectorRegistry`."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def describe(self) -> list[Metric]:
        return []  # families depend on the broker's state: collected at each scrape only

    def collect(self) -> Iterator[Metric]:
        broker = self.broker
        yield from topic_metrics(broker.replica_manager.topic_stats)
        yield from request_metrics(broker.dispatcher.request_metrics)
        yield from self._replica_manager()
        yield from self._purgatories()
        yield from self._fetch_sessions()
        yield from self._logs()
        yield from self._controller()
        yield from self._zookeeper()
        yield from self._groups()
        yield from self._cleaner()

    # --- kafka.server:type=ReplicaManager -------------------------------------------------------

    def _replica_manager(self) -> Iterator[Metric]:
        replica_manager = self.broker.replica_manager
        partitions = list(replica_manager.partitions.values())
        leaders = [p for p in partitions if p.is_leader]
        under_replicated = sum(1 for p in leaders if len(p.replicas) - len(p.isr) > 0)
        under_min_isr = sum(1 for p in leaders if len(p.isr) < p.log.config.min_insync_replicas)
        at_min_isr = sum(1 for p in leaders if len(p.isr) == p.log.config.min_insync_replicas)
        prefix = "kafka_server_replicamanager_"
        yield _gauge(prefix + "partitioncount", "Partitions hosted by this broker.", len(partitions))
        yield _gauge(prefix + "leadercount", "Partitions led by this broker.", len(leaders))
        yield _gauge(prefix + "underreplicatedpartitions",
                     "Partitions led here whose ISR is smaller than their replica set.", under_replicated)
        yield _gauge(prefix + "underminisrpartitioncount",
                     "Partitions led here whose ISR is smaller than min.insync.replicas.", under_min_isr)
        yield _gauge(prefix + "atminisrpartitioncount",
                     "Partitions led here whose ISR is exactly min.insync.replicas.", at_min_isr)
        yield _gauge(prefix + "offlinereplicacount",
                     "Replicas hosted here in an offline (failed) log directory.",
                     len(replica_manager.offline_partitions))
        isr = replica_manager.isr_stats
        for name, doc, value in (
            ("isrshrinks_total", "ISR shrinks committed by partitions led here.", isr.shrinks),
            ("isrexpands_total", "ISR expansions committed by partitions led here.", isr.expands),
            ("failedisrupdates_total", "ISR changes the controller refused or that failed.", isr.failed_updates),
        ):
            family = _counter(prefix + name.removesuffix("_total"), doc)
            family.add_metric([], value)
            yield family

    # --- kafka.server:type=FetchSessionCache ----------------------------------------------------

    def _fetch_sessions(self) -> Iterator[Metric]:
        cache = self.broker.fetch_manager.cache
        prefix = "kafka_server_fetchsessioncache_"
        yield _gauge(prefix + "numincrementalfetchsessions", "Incremental fetch sessions cached.", cache.size)
        yield _gauge(prefix + "numincrementalfetchpartitionscached", "Partitions of all cached fetch sessions.",
                     cache.total_partitions)
        evictions = _counter(prefix + "incrementalfetchsessionevictions", "Fetch sessions evicted.")
        evictions.add_metric([], cache.evictions)
        yield evictions

    # --- kafka.server:type=DelayedOperationPurgatory --------------------------------------------

    def _purgatories(self) -> Iterator[Metric]:
        replica_manager = self.broker.replica_manager
        coordinator = self.broker.group_coordinator
        purgatories = [replica_manager.produce_purgatory, replica_manager.fetch_purgatory,
                       replica_manager.delete_records_purgatory, coordinator.heartbeat_purgatory,
                       coordinator.rebalance_purgatory]
        size = _gauge("kafka_server_delayedoperationpurgatory_purgatorysize",
                      "Watched entries of a purgatory (an operation counts once per key it waits on).",
                      labels=["delayedOperation"])
        delayed = _gauge("kafka_server_delayedoperationpurgatory_numdelayedoperations",
                         "Operations waiting in a purgatory.", labels=["delayedOperation"])
        for purgatory in purgatories:
            size.add_metric([purgatory.name], purgatory.watched_total())
            delayed.add_metric([purgatory.name], len(purgatory))
        yield size
        yield delayed

    # --- kafka.log:type=Log ---------------------------------------------------------------------

    def _logs(self) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        start = _gauge("kafka_log_log_logstartoffset", "First offset of the local log.", labels=labels)
        end = _gauge("kafka_log_log_logendoffset", "Offset of the next record appended to the local log.",
                     labels=labels)
        size = _gauge("kafka_log_log_size", "Bytes of the local log's segments.", labels=labels)
        segments = _gauge("kafka_log_log_numlogsegments", "Segments of the local log.", labels=labels)
        for tp, log in list(self.broker.log_manager.logs.items()):
            key = [tp.topic, str(tp.partition)]
            start.add_metric(key, log.log_start_offset)
            end.add_metric(key, log.log_end_offset)
            size.add_metric(key, log.size_in_bytes)
            segments.add_metric(key, len(log.segments))
        yield from (start, end, size, segments)
        # pybroker's own: the native cache of open segment .log files (log/file_descriptors.py).
        yield _gauge("pybroker_log_openlogfiles", "Segment .log files the broker holds open now.",
                     _native.open_log_files())
        yield _gauge("pybroker_log_maxopenlogfiles", "Segment .log files the broker keeps open at most.",
                     _native.max_open_log_files())

    # --- kafka.controller:type=KafkaController --------------------------------------------------

    def _controller(self) -> Iterator[Metric]:
        controller = self.broker.controller
        active = controller.active
        ctx = controller.context
        topics = [t for t in ctx.topics.values() if t.name not in ctx.topics_being_deleted] if active else []
        partitions = [p for t in topics for p in t.partitions]
        offline = sum(1 for p in partitions if p.leader_epoch >= 0 and p.leader not in ctx.live_brokers)
        imbalance = sum(1 for p in partitions if p.leader_epoch >= 0 and p.replicas and p.leader != p.replicas[0])
        prefix = "kafka_controller_kafkacontroller_"
        yield _gauge(prefix + "activecontrollercount", "1 on the active controller, 0 on every other broker.",
                     1 if active else 0)
        yield _gauge(prefix + "offlinepartitionscount",
                     "Partitions without a live leader (active controller only).", offline)
        yield _gauge(prefix + "preferredreplicaimbalancecount",
                     "Partitions not led by their preferred replica (active controller only).", imbalance)
        yield _gauge(prefix + "globaltopiccount", "Topics in the cluster (active controller only).", len(topics))
        yield _gauge(prefix + "globalpartitioncount", "Partitions in the cluster (active controller only).",
                     len(partitions))
        yield _gauge(prefix + "topicstodeletecount", "Topics queued for deletion (active controller only).",
                     len(ctx.topics_being_deleted) if active else 0)
        yield _gauge(prefix + "activebrokercount", "Live brokers (active controller only).",
                     len(ctx.live_brokers) if active else 0)

    # --- kafka.server:type=SessionExpireListener ------------------------------------------------

    def _zookeeper(self) -> Iterator[Metric]:
        # Read through __dict__: a cluster broker's store before it connects refuses every attribute.
        zk: Any = getattr(self.broker.store, "__dict__", {}).get("zk")
        if zk is None:
            return  # a single broker: no ZooKeeper
        current = "CLOSED" if zk.closed else ZOOKEEPER_STATES.get(str(zk.state), "CONNECTING")
        family = _gauge("kafka_server_sessionexpirelistener_sessionstate",
                        "The broker's ZooKeeper session state: 1 for the current one (ZooKeeper's state names).",
                        labels=["state"])
        for state in SESSION_STATES:
            family.add_metric([state], 1 if state == current else 0)
        yield family

    # --- kafka.coordinator.group:type=GroupMetadataManager --------------------------------------

    def _groups(self) -> Iterator[Metric]:
        groups = list(self.broker.group_coordinator.manager.groups.values())
        prefix = "kafka_coordinator_group_groupmetadatamanager_"
        yield _gauge(prefix + "numgroups", "Groups this broker coordinates.", len(groups))
        counts = dict.fromkeys(GROUP_STATE_METRICS, 0)
        offsets = 0
        for group in groups:
            state = group.state.value
            counts[state] = counts.get(state, 0) + 1
            offsets += len(group.offsets)
        for state, name in GROUP_STATE_METRICS.items():
            yield _gauge(prefix + name, f"Groups in state {state}.", counts[state])
        yield _gauge(prefix + "numoffsets", "Committed offsets of the groups coordinated here.", offsets)

    # --- kafka.log:type=LogCleaner / LogCleanerManager ------------------------------------------

    def _cleaner(self) -> Iterator[Metric]:
        cleaner = self.broker.log_manager.cleaner
        if cleaner is None:
            return
        for key, value in cleaner.metrics().items():
            mbean_type = CLEANER_METRICS.get(key, "logcleaner")
            yield _gauge(f"kafka_log_{mbean_type}_{key.replace('-', '_')}", f"The log cleaner's {key}.", value)


def topic_metrics(stats: BrokerTopicStats) -> Iterator[Metric]:
    """kafka.server:type=BrokerTopicMetrics: each counter for all topics (no label) and per topic."""
    prefix = "kafka_server_brokertopicmetrics_"
    fields: list[tuple[str, str, str]] = [
        ("messagesin", "messages_in", "Records appended by partition leaders."),
        ("bytesin", "bytes_in", "Bytes of record sets appended by partition leaders."),
        ("bytesout", "bytes_out", "Bytes of records sent to consumers (not followers)."),
        ("totalproducerequests", "total_produce_requests", "Partition appends asked of this broker."),
        ("failedproducerequests", "failed_produce_requests",
         "Partition appends that failed (not counting Kafka's expected errors)."),
        ("totalfetchrequests", "total_fetch_requests", "Partitions fetched from this broker (answers)."),
        ("failedfetchrequests", "failed_fetch_requests", "Partitions fetched that answered an error."),
    ]
    topics = list(stats.topics.items())
    for name, attribute, doc in fields:
        # One family, samples without a label (all topics) and with ``topic``, as the JMX
        # exporter renders Kafka's all-topics and per-topic MBeans of the same name.
        family = _counter(prefix + name, doc, labels=["topic"])
        family.add_metric([], getattr(stats.all, attribute))
        for topic, counters in topics:
            family.add_metric([topic], getattr(counters, attribute))
        yield family
    replication = _counter(prefix + "replicationbytesout", "Bytes of records sent to followers.")
    replication.add_metric([], stats.replication_bytes_out)
    yield replication
    replication_in = _counter(prefix + "replicationbytesin", "Bytes of records appended by followers (fetched from leaders).")
    replication_in.add_metric([], stats.replication_bytes_in)
    yield replication_in


def request_metrics(metrics: RequestMetrics) -> Iterator[Metric]:
    """kafka.network:type=RequestMetrics: RequestsPerSec per request and version, TotalTimeMs per
    request (a histogram in milliseconds)."""
    requests = _counter("kafka_network_requestmetrics_requests", "Requests answered, per API and version.",
                        labels=["request", "version"])
    for (name, version), count in sorted(list(metrics.requests.items())):
        requests.add_metric([name, str(version)], count)
    yield requests
    total_time = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems",
                                       "Time from a request's arrival to its encoded response, in ms.",
                                       labels=["request"])
    for name, histogram in sorted(list(metrics.total_time.items())):
        total_time.add_metric([name], list(histogram.cumulative()), histogram.sum)
    yield total_time


def metrics_server(broker: Broker) -> MetricsServer | None:
    """The broker's Prometheus endpoint (``metrics.prometheus.port``; None when unset): this
    broker's collector plus prometheus_client's process and platform collectors."""
    port = broker.config.get("metrics.prometheus.port")
    if port is None:
        return None
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    return MetricsServer(registry, broker.config.get("metrics.prometheus.host"), port)
