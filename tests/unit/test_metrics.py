"""The metrics' building blocks: the fixed-bucket histogram, the hot-path counters, the request
metrics (futures included), a partition's ISR counters and Kafka's ISR log lines, and the JSON
log formatter."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from types import SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pybroker.cli.serve import JsonLogFormatter
from pybroker.common.cluster import PartitionState
from pybroker.metrics.stats import BrokerTopicStats, Histogram, IsrStats, RequestMetrics
from pybroker.protocol.api_keys import ApiKey
from pybroker.server.metrics import request_metrics, topic_metrics
from pybroker.server.partition import Partition
from pybroker.types import TopicPartition
from tests.mock_time import MockTime
from tests.unit.replica_logs import TP, make_log


def test_histogram_buckets_are_cumulative_with_prometheus_le_bounds():
    histogram = Histogram((1, 10))
    for v in (0.5, 1, 1.5, 10, 11):
        histogram.observe(v)
    assert list(histogram.cumulative()) == [("1.0", 2), ("10.0", 4), ("+Inf", 5)]
    assert histogram.count == 5 and histogram.sum == 24.0


def _families(*collect) -> dict[str, dict]:
    class One:
        def collect(self):
            for c in collect:
                yield from c

    registry = CollectorRegistry(auto_describe=False)
    registry.register(One())  # type: ignore[arg-type]
    text = generate_latest(registry).decode()
    return {
        f.name: {(s.name, tuple(sorted(s.labels.items()))): s.value for s in f.samples}
        for f in text_string_to_metric_families(text)
    }


def test_topic_stats_count_appends_and_fetches_per_topic_and_for_all_topics():
    stats = BrokerTopicStats()
    stats.produce_request("a")
    stats.appended("a", 100, 3)
    stats.produce_request("b")
    stats.failed_produce("b")
    consumer = {TopicPartition("a", 0): SimpleNamespace(error=0, records=b"x" * 40),
                TopicPartition("b", 0): SimpleNamespace(error=6, records=b"")}
    stats.fetched(-1, consumer)
    stats.fetched(2, {TopicPartition("a", 0): SimpleNamespace(error=0, records=b"x" * 7)})
    families = _families(topic_metrics(stats))
    messages = families["kafka_server_brokertopicmetrics_messagesin"]
    assert messages[("kafka_server_brokertopicmetrics_messagesin_total", ())] == 3
    assert messages[("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "a"),))] == 3
    out = families["kafka_server_brokertopicmetrics_bytesout"]
    assert out[("kafka_server_brokertopicmetrics_bytesout_total", (("topic", "a"),))] == 40  # the follower's 7 not
    replication = families["kafka_server_brokertopicmetrics_replicationbytesout"]
    assert replication[("kafka_server_brokertopicmetrics_replicationbytesout_total", ())] == 7
    failed = families["kafka_server_brokertopicmetrics_failedfetchrequests"]
    assert failed[("kafka_server_brokertopicmetrics_failedfetchrequests_total", (("topic", "b"),))] == 1
    produce = families["kafka_server_brokertopicmetrics_failedproducerequests"]
    assert produce[("kafka_server_brokertopicmetrics_failedproducerequests_total", ())] == 1


def test_request_metrics_count_at_completion_and_fetch_under_two_names():
    metrics = RequestMetrics()

    async def run() -> None:
        reply: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        started = time.perf_counter_ns()
        assert metrics.completed(ApiKey.PRODUCE, 9, None, started, reply) is reply
        assert metrics.requests == {}
        reply.set_result(b"")
        await asyncio.sleep(0)
        metrics.completed(ApiKey.FETCH, 12, SimpleNamespace(replica_id=2), started, b"")
        metrics.completed(ApiKey.FETCH, 12, SimpleNamespace(replica_id=-1), started, None)

    asyncio.run(run())
    assert metrics.requests == {("Produce", 9): 1, ("Fetch", 12): 2, ("FetchFollower", 12): 1,
                                ("FetchConsumer", 12): 1}
    families = _families(request_metrics(metrics))
    total = families["kafka_network_requestmetrics_totaltimems"]
    assert total[("kafka_network_requestmetrics_totaltimems_count", (("request", "Fetch"),))] == 2
    assert total[("kafka_network_requestmetrics_totaltimems_bucket", (("le", "+Inf"), ("request", "Produce")))] == 1
    requests = families["kafka_network_requestmetrics_requests"]
    assert requests[("kafka_network_requestmetrics_requests_total", (("request", "Produce"), ("version", "9")))] == 1


def test_partition_counts_committed_isr_changes_and_logs_them_in_kafkas_words(tmp_path, caplog):
    clock = MockTime()
    partition = Partition(TP, "id", 1, make_log(tmp_path), clock)
    partition.isr_stats = stats = IsrStats()
    caplog.set_level(logging.INFO)
    partition.make_leader(PartitionState(TP, 1, 1, 0, [1, 2, 3], 0, [1, 2, 3]), clock.milliseconds())
    assert "[Broker id=1] Leader t-0 with topic id id starts at leader epoch 0 from offset 0" in caplog.text
    clock.advance(40_000)
    assert partition.maybe_shrink_isr(clock.milliseconds(), 30_000)  # no submitter: committed locally
    assert "[Partition t-0 broker=1] Shrinking ISR from 1,2,3 to 1. Leader: (highWatermark: 0, endOffset: 0). " \
           "Out of sync replicas: (brokerId: 2, endOffset: -1, lastCaughtUpTimeMs: " in caplog.text
    assert "[Partition t-0 broker=1] ISR updated to 1  and version updated to 1" in caplog.text
    assert (stats.shrinks, stats.expands) == (1, 0)
    partition.update_follower_fetch_state(2, 0, 0, clock.milliseconds(), 0)
    assert (stats.shrinks, stats.expands) == (1, 1)
    assert "ISR updated to 1,2  and version updated to 2" in caplog.text


def test_json_log_lines_carry_time_level_logger_message_and_exception():
    formatter = JsonLogFormatter()
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("pybroker.x", logging.ERROR, __file__, 1, "failed %s\nsecond line", ("here",),
                                   sys.exc_info())
    line = formatter.format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["level"] == "ERROR" and entry["logger"] == "pybroker.x"
    assert entry["message"] == "failed here\nsecond line"
    assert "ValueError: boom" in entry["exception"] and "Traceback" in entry["exception"]
    assert entry["time"][:4].isdigit() and "T" in entry["time"]
