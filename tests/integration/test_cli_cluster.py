"""`pybroker cluster`: ZooKeeper and three brokers from one command, as a user runs it.

What a user sees: the command prints the bootstrap string and the logs, writes cluster.json and
each broker's server.properties, every broker registers and answers Metadata with the whole
cluster, clients produce and consume, one broker killed and restarted by hand from its
server.properties rejoins (and the command takes it back), SIGTERM stops every process it
started (and the restarted broker), and a second start finds the data again. A broker that
cannot start makes the command fail with the end of its log and leaves no process behind.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from bench.brokers import free_ports
from tests.conftest import REPO, free_port, wait_until
from tests.integration import clients
from tests.zookeeper import chroot_for

# As the brokers' log check in conftest: these must not appear in a broker's log.
UNEXPECTED = re.compile(r"^\[[^\]]+\] (ERROR|CRITICAL) |Traceback \(most recent call last\)", re.M)


def processes_using(path: Path) -> list[int]:
    """PIDs of processes whose command line mentions ``path`` (the cluster's processes do)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
            except OSError:
                continue
            if str(path) in cmdline and state != "Z":
                found.append(int(entry.name))
    return found


class ClusterCommand:
    """One ``python -m pybroker cluster`` process, its output in a file."""

    def __init__(self, directory: Path, *args: str) -> None:
        self.directory = directory
        self.output = directory.parent / f"{directory.name}-command-{time.monotonic_ns()}.out"
        with open(self.output, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pybroker", "cluster", "--dir", str(directory), *args],
                cwd=REPO, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def manifest(self) -> dict:
        return json.loads((self.directory / "cluster.json").read_text())

    def wait_running(self, timeout: float = 60.0) -> dict:
        def running() -> dict | None:
            assert self.proc.poll() is None, f"pybroker cluster exited with {self.proc.returncode}:\n{self.text()}"
            manifest = self.manifest()
            return manifest if manifest["state"] == "running" and manifest["pid"] == self.proc.pid else None

        return wait_until(running, timeout, interval=0.1, message=f"a running cluster; output:\n{self.text()}")

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"pybroker cluster did not stop within {timeout}s:\n{self.text()}") from None

    def kill(self) -> None:
        """Last resort of a failed test: SIGKILL the command and the processes it started, by PID."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for pid in processes_using(self.directory):
            os.kill(pid, signal.SIGKILL)


def zk_client(connect: str) -> KazooClient:
    client = KazooClient(hosts=connect, timeout=5)
    client.start(timeout=10)
    return client


def assert_clean_logs(directory: Path) -> None:
    for log in sorted(directory.glob("broker-*/broker.log")):
        problems = UNEXPECTED.findall(log.read_text(errors="replace"))
        assert not problems, f"{log} has unexpected entries:\n{log.read_text(errors='replace')[-5000:]}"


@pytest.mark.timeout(180)
def test_cluster_starts_serves_restarts_a_broker_stops_and_starts_again(tmp_path):
    directory = tmp_path / "cluster"
    first, zk_port = free_ports(3), free_port()
    args = ("--brokers", "3", "--port", str(first), "--zookeeper-port", str(zk_port))
    addresses = [f"127.0.0.1:{first + i}" for i in range(3)]
    bootstrap = ",".join(addresses)
    command = ClusterCommand(directory, *args)
    restarted: subprocess.Popen[bytes] | None = None
    try:
        manifest = command.wait_running()

        # What it prints and what cluster.json says.
        out = command.text()
        assert f"Bootstrap servers: {bootstrap}" in out
        for node in (1, 2, 3):
            assert str(directory / f"broker-{node}" / "broker.log") in out or f"broker-{node}/broker.log" in out
        assert manifest["bootstrap_servers"] == bootstrap
        assert manifest["zookeeper"]["connect"] == f"127.0.0.1:{zk_port}"
        assert manifest["zookeeper"]["pid"] > 0
        assert [b["node_id"] for b in manifest["brokers"]] == [1, 2, 3]
        assert [b["address"] for b in manifest["brokers"]] == addresses
        for broker in manifest["brokers"]:
            assert Path(broker["config"]) == directory / f"broker-{broker['node_id']}" / "server.properties"
            assert Path(broker["data_dir"], "meta.properties").is_file()
            assert Path(broker["log"]).is_file() and broker["pid"] > 0
        assert (directory / "zookeeper" / "zoo.cfg").is_file()
        assert "admin.enableServer=false" in (directory / "zookeeper" / "zoo.cfg").read_text()

        # Every broker is registered, a controller is elected, and each answers with the whole cluster.
        zk = zk_client(manifest["zookeeper"]["connect"])
        try:
            assert sorted(zk.get_children("/brokers/ids"), key=int) == ["1", "2", "3"]
            assert json.loads(zk.get("/controller")[0])["brokerid"] in (1, 2, 3)
        finally:
            zk.stop()
            zk.close()
        for address in addresses:
            md = AdminClient({"bootstrap.servers": address}).list_topics(timeout=10)
            assert sorted(md.brokers) == [1, 2, 3]

        # Clients produce and consume (replication factor 1: followers do not fetch yet).
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("kept", 3, 1)])["kept"].result(30)
        for partition in range(3):
            clients.produce_confluent(bootstrap, "kept", [(b"k", f"v{partition}".encode())], partition=partition)
        for partition in range(3):
            records = clients.consume_confluent(bootstrap, "kept", 1, partition=partition)
            assert [r[2] for r in records] == [f"v{partition}".encode()]

        # Stop broker 2 by its PID and restart it alone from its server.properties.
        broker2 = manifest["brokers"][1]
        os.kill(broker2["pid"], signal.SIGTERM)
        wait_until(lambda: command.manifest()["brokers"][1]["pid"] is None, timeout=30,
                   message="the command to see broker 2 stop")
        with open(broker2["log"], "ab") as log:
            restarted = subprocess.Popen(
                [sys.executable, "-m", "pybroker", "serve", "--config", broker2["config"]],
                cwd=REPO, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )
        wait_until(lambda: command.manifest()["brokers"][1]["pid"] == restarted.pid, timeout=30,
                   message=f"the command to find the restarted broker 2:\n{command.text()}")
        wait_until(lambda: sorted(AdminClient({"bootstrap.servers": addresses[1]}).list_topics(timeout=5).brokers)
                   == [1, 2, 3], timeout=30, message="the restarted broker 2 back in the cluster")
        assert "Broker 2 is running again" in command.text()

        # SIGTERM: every broker (the restarted one too) and ZooKeeper stop; nothing is left.
        pids = [manifest["zookeeper"]["pid"], manifest["brokers"][0]["pid"], manifest["brokers"][2]["pid"]]
        assert command.stop() == 0, command.text()
        assert restarted.wait(10) == 0
        assert not processes_using(directory)
        assert not any(os.path.exists(f"/proc/{pid}") for pid in pids)
        assert command.manifest()["state"] == "stopped"
        assert "Stopped." in command.text()
        assert_clean_logs(directory)

        # A second start reuses the data: the topic and its records are still there.
        command = ClusterCommand(directory, *args)
        command.wait_running()
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics("kept", timeout=10)
        assert len(md.topics["kept"].partitions) == 3
        records = clients.consume_confluent(bootstrap, "kept", 1, partition=1)
        assert [r[2] for r in records] == [b"v1"]
        assert command.stop() == 0, command.text()
        assert not processes_using(directory)
        assert_clean_logs(directory)
    finally:
        if restarted is not None and restarted.poll() is None:
            restarted.kill()
            restarted.wait(10)
        command.kill()


def test_a_broker_that_cannot_start_fails_the_command_and_leaves_no_process(tmp_path, zookeeper, request):
    """Broker 2's log dir belongs to another node id: it exits while starting; the command
    prints the end of its log, stops the others, and exits 1."""
    directory = tmp_path / "cluster"
    data = directory / "broker-2" / "data"
    data.mkdir(parents=True)
    (data / "meta.properties").write_text("version=1\nnode.id=7\ncluster.id=abc\n")
    command = ClusterCommand(directory, "--port", str(free_ports(3)), "--zookeeper", chroot_for(zookeeper, request.node.name))
    try:
        assert command.proc.wait(60) == 1, command.text()
        out = command.text()
        assert "broker 2 exited with code 1 while starting" in out
        assert "meta.properties" in out  # the end of its log, which says what is wrong
        assert out.index("exited with code 1 while starting") < out.index("Stopping broker")
        assert not processes_using(directory)
        assert command.manifest()["state"] == "failed"
    finally:
        command.kill()


@pytest.mark.timeout(120)
def test_a_killed_command_leaves_no_process(tmp_path):
    """``pybroker cluster`` SIGKILLed cannot stop its children: each gets SIGTERM from the kernel
    (the parent-death signal) and stops by itself."""
    directory = tmp_path / "cluster"
    command = ClusterCommand(directory, "--brokers", "2", "--port", str(free_ports(2)),
                             "--zookeeper-port", str(free_port()))
    try:
        manifest = command.wait_running()
        children = [manifest["zookeeper"]["pid"], *(b["pid"] for b in manifest["brokers"])]
        assert set(children) <= set(processes_using(directory))
        command.proc.kill()
        command.proc.wait(10)
        wait_until(lambda: not processes_using(directory), 60, interval=0.2,
                   message="the brokers and ZooKeeper of a SIGKILLed pybroker cluster to exit")
    finally:
        command.kill()
