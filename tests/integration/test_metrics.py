"""The Prometheus endpoint (``metrics.prometheus.port``), the operator log lines, the JSON log
format and ``pybroker cluster status``, as a user sees them.

The endpoint is scraped over HTTP and parsed with prometheus_client's own parser; the values
checked are those an operator would watch: records and bytes in after producing with a real
client, bytes out after consuming, requests per API, log end offsets, a long-poll fetch in the
fetch purgatory, one active controller per cluster, under-replicated partitions while a broker
is down and none once it is back.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import REPO, free_port, wait_until
from tests.integration import clients
from tests.integration.cluster import start_cluster
from tests.integration.test_cli_cluster import ClusterCommand, assert_clean_logs, free_ports
from tests.zookeeper import chroot_for

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int) -> Samples:
    """Every sample of ``http://127.0.0.1:port/metrics``: (name, labels) → value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text) for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def create_topic(bootstrap: str, topic: str, partitions: int = 1, replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, replication)]).values():
        future.result(15)


# --- one broker ----------------------------------------------------------------------------------

@pytest.fixture
def metrics_broker(start_broker):
    port = free_port()
    broker = start_broker("metrics", **{"metrics.prometheus.port": port})
    broker.metrics_port = port
    wait_until(lambda: scrape(port), message="the metrics endpoint")
    return broker


def test_records_bytes_requests_and_offsets_after_producing_and_consuming(metrics_broker, topic_name):
    bootstrap, port = metrics_broker.bootstrap, metrics_broker.metrics_port
    create_topic(bootstrap, topic_name)
    pairs = [(None, b"v%04d" % i) for i in range(500)]
    clients.produce_confluent(bootstrap, topic_name, pairs)

    after_produce = scrape(port)
    assert value(after_produce, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic_name) == 500
    bytes_in = value(after_produce, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic_name)
    assert bytes_in > 500 * 5
    assert value(after_produce, "kafka_server_brokertopicmetrics_messagesin_total") >= 500  # all topics
    assert value(after_produce, "kafka_log_log_logendoffset", topic=topic_name, partition="0") == 500
    assert value(after_produce, "kafka_log_log_logstartoffset", topic=topic_name, partition="0") == 0
    assert value(after_produce, "kafka_log_log_size", topic=topic_name, partition="0") == bytes_in
    assert value(after_produce, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic_name) == 0
    produce_requests = sum(v for (name, labels), v in after_produce.items()
                           if name == "kafka_network_requestmetrics_requests_total"
                           and ("request", "Produce") in labels)
    assert produce_requests >= 1
    assert value(after_produce, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == produce_requests
    assert value(after_produce, "kafka_network_requestmetrics_totaltimems_bucket", request="Produce",
                 le="+Inf") == produce_requests
    assert value(after_produce, "kafka_server_replicamanager_partitioncount") >= 1
    assert value(after_produce, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(after_produce, "kafka_controller_kafkacontroller_activecontrollercount") == 1

    assert len(clients.consume_confluent(bootstrap, topic_name, 500)) == 500
    after_consume = scrape(port)
    assert value(after_consume, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic_name) >= bytes_in
    assert value(after_consume, "kafka_network_requestmetrics_requests_total", request="FetchConsumer",
                 version="12") == value(after_consume, "kafka_network_requestmetrics_requests_total",
                                        request="Fetch", version="12") > 0


def test_a_long_poll_fetch_waits_in_the_fetch_purgatory(metrics_broker, topic_name):
    bootstrap, port = metrics_broker.bootstrap, metrics_broker.metrics_port
    create_topic(bootstrap, topic_name)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic_name, "fetch.wait.max.ms": 5000,
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic_name, 0, 0)])

        def waiting() -> bool:
            consumer.poll(0.05)
            samples = scrape(port)
            return (value(samples, "kafka_server_delayedoperationpurgatory_purgatorysize", delayedOperation="Fetch")
                    >= 1 and value(samples, "kafka_server_delayedoperationpurgatory_numdelayedoperations",
                                   delayedOperation="Fetch") >= 1)

        wait_until(waiting, 15, message="a fetch waiting in the Fetch purgatory")
    finally:
        consumer.close()
    samples = scrape(port)
    for operation in ("Produce", "DeleteRecords", "Heartbeat", "Rebalance"):
        assert ("kafka_server_delayedoperationpurgatory_purgatorysize",
                frozenset({("delayedOperation", operation)})) in samples


def test_the_endpoint_answers_only_metrics_and_is_off_by_default(metrics_broker, start_broker):
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"http://127.0.0.1:{metrics_broker.metrics_port}/other", timeout=5)
    assert e.value.code == 404
    request = urllib.request.Request(f"http://127.0.0.1:{metrics_broker.metrics_port}/metrics", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(request, timeout=5)
    assert e.value.code == 405
    plain = start_broker("plain")
    assert "Prometheus metrics on" not in plain.log()
    assert "Prometheus metrics on http://127.0.0.1:" in metrics_broker.log()


# --- a cluster -----------------------------------------------------------------------------------

@pytest.mark.timeout(120)
def test_a_cluster_has_one_active_controller_and_shows_under_replication_while_a_broker_is_down(
    zookeeper, tmp_path, request, topic_name,
):
    ports = {node: free_port() for node in (1, 2, 3)}
    cluster = start_cluster(chroot_for(zookeeper, request.node.name), tmp_path,
                            broker_overrides=lambda node, _: {"metrics.prometheus.port": ports[node]})
    try:
        create_topic(cluster.bootstrap, topic_name, partitions=3, replication=3)
        clients.produce_confluent(cluster.bootstrap, topic_name, [(None, b"x")] * 10)

        def total(name: str, nodes: tuple[int, ...] = (1, 2, 3)) -> float:
            return sum(value(scrape(ports[node]), name) for node in nodes)

        assert total("kafka_controller_kafkacontroller_activecontrollercount") == 1
        assert total("kafka_server_replicamanager_leadercount") >= 3
        wait_until(lambda: total("kafka_server_replicamanager_underreplicatedpartitions") == 0, 15,
                   message="no under-replicated partition")
        # Followers count what they fetched and appended (ReplicationBytesInPerSec), which the
        # leaders counted as ReplicationBytesOutPerSec.
        wait_until(lambda: total("kafka_server_brokertopicmetrics_replicationbytesin_total") > 0, 15,
                   message="replication bytes in")
        assert (total("kafka_server_brokertopicmetrics_replicationbytesin_total")
                <= total("kafka_server_brokertopicmetrics_replicationbytesout_total"))
        states = scrape(ports[1])
        assert value(states, "kafka_server_sessionexpirelistener_sessionstate", state="CONNECTED") == 1

        cluster.broker(3).kill()
        wait_until(lambda: total("kafka_server_replicamanager_underreplicatedpartitions", (1, 2)) > 0, 30,
                   message="under-replicated partitions while broker 3 is down")
        assert total("kafka_controller_kafkacontroller_activecontrollercount", (1, 2)) == 1
        cluster.broker(3).start()
        wait_until(lambda: total("kafka_server_replicamanager_underreplicatedpartitions") == 0, 30,
                   message="no under-replicated partition once broker 3 is back")
        assert total("kafka_server_replicamanager_isrexpands_total") >= 1
        assert total("kafka_controller_kafkacontroller_activecontrollercount") == 1
        # The operator's lines: ISR back to three (Kafka's wording), and the controller's view.
        logs = "".join(cluster.broker(n).log() for n in (1, 2, 3))
        assert "ISR updated to 1,2,3" in logs
        assert "successfully elected as the controller" in logs
        assert "Broker failure callback for 3" in logs
        assert "[Controller id=" in logs and "Changed partition" in logs
    finally:
        cluster.kill()


# --- logs ----------------------------------------------------------------------------------------

def test_serve_log_format_json_writes_one_object_per_line(tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pybroker", "serve", "--log-format", "json", "--override", f"log.dirs={tmp_path}",
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )
    try:
        assert proc.stderr is not None
        lines: list[str] = []

        def started() -> bool:
            line = proc.stderr.readline().decode()  # type: ignore[union-attr]
            lines.append(line)
            return "started" in line

        wait_until(started, 30, interval=0, message="the broker's start line")
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=30)
        lines += rest.decode().splitlines()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    entries = [json.loads(line) for line in lines if line.strip()]
    assert entries and all({"time", "level", "logger", "message"} <= set(e) for e in entries)
    assert any(e["message"].startswith("pybroker node 1 started") and e["logger"] == "pybroker.server.broker"
               for e in entries)
    assert entries[-1]["message"] == "Shut down cleanly" and entries[-1]["level"] == "INFO"


# --- pybroker cluster status ----------------------------------------------------------------------

@pytest.mark.timeout(150)
def test_cluster_status_once_shows_brokers_controller_partitions_and_throughput(tmp_path, topic_name):
    directory = tmp_path / "cluster"
    first = free_ports(2)
    command = ClusterCommand(directory, "--brokers", "2", "--port", str(first), "--zookeeper-port",
                             str(free_port()))
    try:
        manifest = command.wait_running()
        assert all(b["metrics_port"] for b in manifest["brokers"])
        bootstrap = manifest["bootstrap_servers"]
        create_topic(bootstrap, topic_name, partitions=2, replication=2)
        clients.produce_confluent(bootstrap, topic_name, [(None, b"x" * 100)] * 100)
        out = subprocess.run(
            [sys.executable, "-m", "pybroker", "cluster", "status", "--dir", str(directory), "--once",
             "--interval", "0.5"],
            cwd=REPO, capture_output=True, text=True, timeout=60,
        )
        assert out.returncode == 0, out.stderr
        text = out.stdout
        assert f"Controller: broker {manifest['controller']}" in text
        assert "Brokers: 2 (2 alive)" in text
        assert "BYTES IN" in text and "BYTES OUT" in text
        rows = {line.split()[0]: line.split() for line in text.splitlines() if line.strip()[:1].isdigit()}
        assert set(rows) == {"1", "2"}
        assert all(row[2] == "yes" and int(row[3]) >= 2 for row in rows.values())  # both replicas of both
        assert sum(int(row[4]) for row in rows.values()) >= 2  # leaders
        assert "Under-replicated partitions: 0" in text and "Offline partitions: 0" in text

        by_bootstrap = subprocess.run(
            [sys.executable, "-m", "pybroker", "cluster", "status", "--bootstrap-server", bootstrap, "--once",
             "--interval", "0.5"],
            cwd=REPO, capture_output=True, text=True, timeout=60,
        )
        assert by_bootstrap.returncode == 0, by_bootstrap.stderr
        assert "RECORDS IN" in by_bootstrap.stdout and "Brokers: 2 (2 alive)" in by_bootstrap.stdout
        assert command.stop() == 0
        assert_clean_logs(directory)
    finally:
        command.kill()


def test_cluster_status_without_a_cluster_says_so(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pybroker", "cluster", "status", "--dir", str(tmp_path), "--once"],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "no cluster.json in" in out.stderr


