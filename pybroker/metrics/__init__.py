"""The broker's metrics: Kafka's JMX metrics, served to Prometheus.

Owns what a broker measures and how it is served; the collector that reads the broker's state
lives above it, in the server:

- `pybroker.metrics.stats`: the hot-path counters the broker's components increment — plain
  Python ints in dicts and slots (`BrokerTopicStats`, `IsrStats`, `RequestMetrics` with its
  fixed-bucket `Histogram`). No locks, no prometheus_client object on any request or append;
  nothing is done per record. It imports nothing of the broker, so every layer may use it.
- `pybroker.server.metrics`: `BrokerCollector`, a prometheus_client collector that turns
  those counters, and the broker's own state (partitions, ISRs, purgatories, logs, the
  controller, the ZooKeeper session, groups, the log cleaner), into metric families at scrape
  time, under the names the Prometheus JMX exporter gives Kafka's MBeans (docs/metrics.md).
- `pybroker.metrics.http`: `MetricsServer`, ``GET /metrics`` served on the broker's event loop
  (the collectors read state the loop mutates, so they must run on it), with
  ``metrics.prometheus.port`` / ``metrics.prometheus.host``.
"""
