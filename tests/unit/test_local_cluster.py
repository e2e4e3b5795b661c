"""`pybroker cluster` without a cluster: its checks, the files it writes, finding a restarted
broker, and the order and bounds of its stop (with stand-in processes)."""

from __future__ import annotations

import asyncio
import io
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.brokers import free_ports
from pybroker.cli import local_cluster
from pybroker.cli.local_cluster import (
    ClusterError,
    LocalCluster,
    cluster_defaults,
    find_serve_process,
    pid_alive,
    run_cluster,
)
from pybroker.cli.main import main
from pybroker.server.config import BrokerConfig, read_properties
from pybroker.zookeeper.server import INSTALL_COMMAND, ZooKeeperInstall, ZooKeeperNotInstalledError

FAKE_INSTALL = ZooKeeperInstall("java", ("zookeeper.jar",))


def make_cluster(tmp_path: Path, brokers: int = 3, **kwargs: object) -> LocalCluster:
    return LocalCluster(tmp_path / "c", brokers, 39092, install=FAKE_INSTALL, out=io.StringIO(), **kwargs)


def test_zookeeper_not_installed_is_one_line_saying_how_to_install_it(tmp_path, monkeypatch, capsys):
    def not_installed(cls, *args, **kwargs):
        raise ZooKeeperNotInstalledError(
            f"ZooKeeper is not installed (/usr/share/java/zookeeper.jar is missing): install it with `{INSTALL_COMMAND}`"
        )

    def no_process(*args, **kwargs):
        raise AssertionError("no process may start")

    monkeypatch.setattr(ZooKeeperInstall, "find", classmethod(not_installed))
    monkeypatch.setattr(subprocess, "Popen", no_process)
    assert main(["cluster", "--dir", str(tmp_path / "c")]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and INSTALL_COMMAND in err
    assert not (tmp_path / "c").exists()


def test_an_existing_ensemble_needs_no_install(tmp_path, monkeypatch):
    def not_installed(cls, *args, **kwargs):
        raise ZooKeeperNotInstalledError("missing")

    monkeypatch.setattr(ZooKeeperInstall, "find", classmethod(not_installed))
    cluster = LocalCluster(tmp_path / "c", 2, 39092, zookeeper_connect="127.0.0.1:2181/kafka", out=io.StringIO())
    assert cluster.zookeeper is None
    assert cluster.properties(cluster.brokers[0])["zookeeper.connect"] == "127.0.0.1:2181/kafka"


@pytest.mark.parametrize(("brokers", "replication", "min_isr"), [(1, "1", "1"), (2, "2", "2"), (3, "3", "2"), (5, "3", "2")])
def test_internal_topic_replication_is_min_of_three_and_the_broker_count(brokers, replication, min_isr):
    assert cluster_defaults(brokers) == {
        "offsets.topic.replication.factor": replication,
        "transaction.state.log.replication.factor": replication,
        "transaction.state.log.min.isr": min_isr,
    }


def test_shipped_server_properties_values_are_the_broker_defaults():
    """Kafka's shipped config/server.properties, where pybroker knows the property."""
    config = BrokerConfig()
    assert config.get("group.initial.rebalance.delay.ms") == 0
    assert config.get("offsets.topic.replication.factor") == 1
    assert config.get("transaction.state.log.replication.factor") == 1
    assert config.get("transaction.state.log.min.isr") == 1
    assert config.get("num.partitions") == 1
    assert config.get("num.recovery.threads.per.data.dir") == 1
    assert config.get("log.retention.hours") == 168
    assert config.get("log.segment.bytes") == 1073741824
    assert config.get("log.retention.check.interval.ms") == 300000
    assert config.get("socket.request.max.bytes") == 104857600
    assert config.get("default.replication.factor") == 1


def test_each_broker_gets_its_id_port_data_and_the_overrides(tmp_path):
    cluster = make_cluster(tmp_path, overrides=["num.partitions=3", "log.retention.hours=1", "num.partitions=4"])
    cluster.write_configs()
    for node, broker in enumerate(cluster.brokers, start=1):
        props = read_properties(str(broker.config_path))
        assert props == cluster.properties(broker)
        assert props["node.id"] == str(node)
        assert props["listeners"] == f"PLAINTEXT://127.0.0.1:{39091 + node}"
        assert props["log.dirs"] == str(tmp_path / "c" / f"broker-{node}" / "data")
        assert props["zookeeper.connect"] == "127.0.0.1:2181"
        assert props["offsets.topic.replication.factor"] == "3"
        assert props["num.partitions"] == "4"  # the last --override wins
        assert BrokerConfig.load(str(broker.config_path)).node_id == node
    assert cluster.bootstrap_servers == "127.0.0.1:39092,127.0.0.1:39093,127.0.0.1:39094"


def test_an_override_may_replace_a_cluster_default(tmp_path):
    cluster = make_cluster(tmp_path, overrides=["offsets.topic.replication.factor=1"])
    cluster.write_configs()
    text = cluster.brokers[0].config_path.read_text()
    assert text.count("offsets.topic.replication.factor=") == 1
    assert read_properties(str(cluster.brokers[0].config_path))["offsets.topic.replication.factor"] == "1"


@pytest.mark.parametrize("override", ["node.id=5", "log.dir=/tmp/x", "log.dirs=/tmp/x",
                                      "zookeeper.connect=h:1", "no-equals-sign", "=value"])
def test_overrides_the_command_owns_or_cannot_read_are_refused(tmp_path, override):
    with pytest.raises(ClusterError, match="--override"):
        make_cluster(tmp_path, overrides=[override])


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ClusterError, match="at least one broker"):
        make_cluster(tmp_path, brokers=0)
    with pytest.raises(ClusterError, match="--port"):
        LocalCluster(tmp_path, 3, 65534, install=FAKE_INSTALL)


def test_an_invalid_property_value_is_refused_before_anything_starts(tmp_path):
    cluster = make_cluster(tmp_path, overrides=["num.partitions=0"])
    with pytest.raises(ClusterError, match="broker 1: .*num.partitions"):
        cluster.check()
    assert not (tmp_path / "c").exists()


def test_unknown_properties_and_unstarted_broker_dirs_are_warnings(tmp_path):
    (tmp_path / "c" / "broker-4").mkdir(parents=True)
    cluster = LocalCluster(tmp_path / "c", 3, 0 + free_ports(3), zookeeper_port=free_ports(1),
                           install=FAKE_INSTALL, out=io.StringIO(), overrides=["no.such.property=1"])
    warnings = cluster.check()
    assert any("no.such.property" in w for w in warnings)
    assert any("broker-4" in w and "offline" in w for w in warnings)


def test_a_port_in_use_is_refused_naming_it(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cluster = LocalCluster(tmp_path / "c", 1, port, zookeeper_port=free_ports(1),
                               install=FAKE_INSTALL, out=io.StringIO())
        with pytest.raises(ClusterError, match=f"port {port} on 127.0.0.1 \\(broker 1\\) is in use"):
            cluster.check()
        cluster = LocalCluster(tmp_path / "c", 1, free_ports(1), zookeeper_port=port,
                               install=FAKE_INSTALL, out=io.StringIO())
        with pytest.raises(ClusterError, match=f"port {port} on 127.0.0.1 \\(ZooKeeper\\) is in use"):
            cluster.check()


def test_the_manifest_names_every_process_and_path(tmp_path):
    cluster = make_cluster(tmp_path, brokers=2, metrics_port=49404)
    cluster.write_manifest("starting")
    manifest = json.loads((tmp_path / "c" / "cluster.json").read_text())
    assert manifest["state"] == "starting"
    assert manifest["zookeeper"]["connect"] == "127.0.0.1:2181"
    assert manifest["zookeeper"]["pid"] is None
    assert manifest["zookeeper"]["log"] == str(tmp_path / "c" / "zookeeper" / "zookeeper.log")
    assert manifest["brokers"][1] == {
        "node_id": 2,
        "address": "127.0.0.1:39093",
        "metrics_port": 49405,
        "pid": None,
        "config": str(tmp_path / "c" / "broker-2" / "server.properties"),
        "data_dir": str(tmp_path / "c" / "broker-2" / "data"),
        "log": str(tmp_path / "c" / "broker-2" / "broker.log"),
    }


# --- processes ---------------------------------------------------------------------------------

SLEEPER = "import sys, time; time.sleep(60)"
# Ignores SIGTERM; prints 'ready' once the handler is installed.
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"


@pytest.fixture
def spawn():
    started: list[subprocess.Popen[bytes]] = []

    def start(*args: str, cwd: Path | None = None, code: str = SLEEPER) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-c", code, *args], cwd=cwd, stdout=subprocess.PIPE)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def test_a_broker_restarted_by_hand_is_found_by_its_config(tmp_path, spawn):
    config = tmp_path / "c" / "broker-2" / "server.properties"
    config.parent.mkdir(parents=True)
    config.write_text("node.id=2\n")
    other = spawn("pybroker", "serve", "--config", "elsewhere.properties", cwd=tmp_path)
    relative = spawn("pybroker", "serve", "--config", "c/broker-2/server.properties", cwd=tmp_path)
    wait_for_cmdline(relative.pid)
    wait_for_cmdline(other.pid)
    assert find_serve_process(config) == relative.pid
    assert find_serve_process(config, exclude=[relative.pid]) is None
    relative.kill()
    relative.wait()
    absolute = spawn("pybroker", "serve", f"--config={config}")
    wait_for_cmdline(absolute.pid)
    assert find_serve_process(config) == absolute.pid


def wait_for_cmdline(pid: int) -> None:
    deadline = time.monotonic() + 10
    while b"serve" not in Path(f"/proc/{pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_an_unreaped_child_counts_as_gone(spawn):
    proc = spawn(code="pass")
    deadline = time.monotonic() + 10
    while pid_alive(proc.pid):  # exits at once; stays a zombie until reaped
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert Path(f"/proc/{proc.pid}").exists()
    proc.wait()
    assert not pid_alive(proc.pid)


def test_stop_goes_broker_by_broker_with_the_controller_last(tmp_path, spawn):
    cluster = make_cluster(tmp_path)
    for broker in cluster.brokers:
        broker.proc = spawn()
    cluster.controller_id = 1
    asyncio.run(cluster.stop())
    lines = [line for line in cluster.out.getvalue().splitlines() if line.startswith("Stopping")]
    assert [line.split(" (")[0] for line in lines] == ["Stopping broker 2", "Stopping broker 3", "Stopping broker 1"]
    assert all(b.proc.returncode == -signal.SIGTERM for b in cluster.brokers)


def test_a_broker_that_does_not_stop_is_killed_after_the_bound(tmp_path, spawn, monkeypatch):
    monkeypatch.setattr(local_cluster, "STOP_TIMEOUT_S", 0.5)
    cluster = make_cluster(tmp_path, brokers=1)
    proc = cluster.brokers[0].proc = spawn(code=STUBBORN)
    assert proc.stdout.readline() == b"ready\n"
    started = time.monotonic()
    asyncio.run(cluster.stop())
    assert proc.returncode == -signal.SIGKILL
    assert 0.5 <= time.monotonic() - started < 5
    assert "did not stop within" in cluster.out.getvalue()


def test_force_kills_at_once(tmp_path, spawn):
    cluster = make_cluster(tmp_path, brokers=1)
    proc = cluster.brokers[0].proc = spawn(code=STUBBORN)
    assert proc.stdout.readline() == b"ready\n"
    started = time.monotonic()
    asyncio.run(cluster.stop(force=lambda: True))
    assert proc.returncode == -signal.SIGKILL
    assert time.monotonic() - started < 5


def test_a_failed_start_stops_what_started_and_says_why_first(tmp_path, monkeypatch, spawn):
    """Brokers are started, then one exits: the error comes first, then every other broker is
    stopped, and the manifest says the start failed."""
    cluster = make_cluster(tmp_path)
    monkeypatch.setattr(cluster, "check", list)
    monkeypatch.setattr(cluster, "start_zookeeper", lambda: None)

    async def connect() -> None:
        cluster._kafka_zk = FakeZk()

    async def nothing_stale(stop: asyncio.Event) -> None:
        pass

    def start_brokers() -> None:
        for broker in cluster.brokers:
            broker.proc = spawn(code="import sys; sys.exit(3)" if broker.node_id == 2 else SLEEPER)
        cluster.brokers[1].log_path.write_text("the reason\n")

    monkeypatch.setattr(cluster, "connect_zookeeper", connect)
    monkeypatch.setattr(cluster, "wait_for_stale_registrations", nothing_stale)
    monkeypatch.setattr(cluster, "start_brokers", start_brokers)
    err = io.StringIO()

    async def main() -> int:
        return await run_cluster(cluster, asyncio.Event(), force=lambda: False, err=err)

    assert asyncio.run(main()) == 1
    assert "broker 2 exited with code 3 while starting" in err.getvalue()
    assert "the reason" in err.getvalue()
    assert all(b.proc.poll() is not None for b in cluster.brokers)
    assert json.loads(cluster.manifest_path.read_text())["state"] == "failed"


class FakeZk:
    async def get_broker_ids(self) -> list[int]:
        return []

    async def get_controller_id(self) -> int | None:
        return None


def test_each_broker_gets_a_metrics_port_in_its_properties_and_the_manifest(tmp_path):
    chosen = make_cluster(tmp_path)
    ports = [b.metrics_port for b in chosen.brokers]
    assert None not in ports and len(set(ports)) == 3 and not set(ports) & {39092, 39093, 39094}
    assert [chosen.properties(b)["metrics.prometheus.port"] for b in chosen.brokers] == [str(p) for p in ports]
    off = make_cluster(tmp_path, metrics=False)
    assert all("metrics.prometheus.port" not in off.properties(b) for b in off.brokers)
    off.write_manifest()
    assert [b["metrics_port"] for b in json.loads(off.manifest_path.read_text())["brokers"]] == [None] * 3
    with pytest.raises(ClusterError, match="--override metrics.prometheus.port"):
        make_cluster(tmp_path, overrides=["metrics.prometheus.port=1"])
