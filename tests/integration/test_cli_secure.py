"""`pybroker serve --secure` and `pybroker cluster --secure`: a secure local broker or cluster from one
command, used through the client files it writes.

kcat and confluent-kafka read librdkafka.properties; `pybroker topics|acls|configs` read
client.properties with --command-config; a PLAINTEXT client cannot use the SASL_SSL listener; a
3-broker secure cluster (replication over SASL_SSL) serves a real client with RF=3.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.brokers import free_ports
from pybroker.cli.command_config import load_properties
from tests.conftest import REPO, free_port, wait_until
from tests.integration.test_cli_cluster import ClusterCommand, assert_clean_logs

ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def pybroker(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pybroker", *args], cwd=REPO, env=ENV, capture_output=True,
                          text=True, timeout=timeout)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


class SecureServe:
    """``pybroker serve --secure`` in a child process, stopped with SIGTERM."""

    def __init__(self, tmp_path: Path, port: int) -> None:
        self.directory = tmp_path / "secure"
        self.port = port
        self.output = tmp_path / f"serve-{port}.out"
        with open(self.output, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pybroker", "serve", "--secure", "--secure-dir", str(self.directory),
                 "--override", f"log.dirs={tmp_path / 'data'}", "--override", f"listeners=SASL_SSL://127.0.0.1:{port}",
                 "--override", "offsets.topic.num.partitions=1", "--log-level", "WARNING"],
                cwd=REPO, env=ENV, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def wait_ready(self) -> str:
        def ready() -> str | None:
            assert self.proc.poll() is None, f"serve exited {self.proc.returncode}:\n{self.text()}"
            lines = [line for line in self.text().splitlines() if line.startswith("Secure (SASL_SSL")]
            return lines[0] if lines else None
        return wait_until(ready, 30, interval=0.1, message="the --secure usage line")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture
def secure_serve(tmp_path):
    servers: list[SecureServe] = []

    def start() -> SecureServe:
        server = SecureServe(tmp_path, free_port())
        servers.append(server)
        server.wait_ready()
        return server

    yield start
    for server in servers:
        server.stop()


def rdkafka_config(path: Path) -> dict[str, str]:
    return {k: v for k, v in load_properties(str(path)).items()}


@pytest.mark.timeout(120)
def test_serve_secure_writes_client_files_that_real_clients_and_the_cli_use(secure_serve):
    server = secure_serve()
    line = server.wait_ready()
    client_properties = server.directory / "client.properties"
    librdkafka = server.directory / "librdkafka.properties"
    assert str(client_properties) in line and str(librdkafka) in line
    for path in (client_properties, librdkafka, server.directory / "users.properties"):
        assert path.stat().st_mode & 0o077 == 0, path
    bootstrap = f"127.0.0.1:{server.port}"
    cc = ["--command-config", str(client_properties)]

    # pybroker CLIs with client.properties
    ok(pybroker("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "secured",
                "--partitions", "2", "--replication-factor", "1", *cc))
    assert "secured" in ok(pybroker("topics", "--bootstrap-server", bootstrap, "--list", *cc)).split()
    ok(pybroker("acls", "--bootstrap-server", bootstrap, "--add", "--allow-principal", "User:alice",
                "--operation", "Read", "--topic", "secured", *cc))
    assert "User:alice" in ok(pybroker("acls", "--bootstrap-server", bootstrap, "--list", "--topic", "secured", *cc))
    ok(pybroker("configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "users", "--entity-name",
                "alice", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret]", *cc))
    described = ok(pybroker("configs", "--bootstrap-server", bootstrap, "--describe", "--entity-type", "users", *cc))
    assert "alice" in described and "admin" in described

    # kcat -F librdkafka.properties
    produced = subprocess.run(["kcat", "-F", str(librdkafka), "-P", "-t", "secured", "-p", "0"], input="one\ntwo\n",
                              capture_output=True, text=True, timeout=30)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(["kcat", "-F", str(librdkafka), "-C", "-t", "secured", "-p", "0", "-e", "-q"],
                              capture_output=True, text=True, timeout=30)
    assert consumed.returncode == 0 and consumed.stdout.split() == ["one", "two"], consumed.stderr

    # confluent-kafka with the same file
    config = rdkafka_config(librdkafka)
    producer = Producer(config)
    producer.produce("secured", b"three", partition=1)
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": "secure-g", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["secured"])
        values: list[bytes] = []

        def got_all() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
            return sorted(values) == [b"one", b"three", b"two"]
        wait_until(got_all, 30, interval=0, message="three records through confluent-kafka")
    finally:
        consumer.close()

    # a PLAINTEXT client, and a wrong password, get nowhere
    plain = pybroker("topics", "--bootstrap-server", bootstrap, "--list")
    assert plain.returncode == 1 and "could not reach any bootstrap server" in plain.stderr
    wrong = server.directory.parent / "wrong.properties"
    wrong.write_text(client_properties.read_text().replace(f'password="{load_users(server)["admin"]}"',
                                                           'password="wrong"'))
    failed = pybroker("topics", "--bootstrap-server", bootstrap, "--list", "--command-config", str(wrong))
    assert failed.returncode == 1 and "Authentication failed" in failed.stderr, failed.stderr


def load_users(server: SecureServe) -> dict[str, str]:
    return load_properties(str(server.directory / "users.properties"))


@pytest.mark.timeout(120)
def test_serve_secure_reuses_its_ca_and_users_on_restart(tmp_path, secure_serve):
    first = secure_serve()
    ca, users = (first.directory / "ca.pem").read_bytes(), load_users(first)
    first.stop()
    second = secure_serve()
    assert (second.directory / "ca.pem").read_bytes() == ca and load_users(second) == users
    listed = pybroker("topics", "--bootstrap-server", f"127.0.0.1:{second.port}", "--list",
                      "--command-config", str(second.directory / "client.properties"))
    ok(listed)


@pytest.mark.timeout(240)
def test_cluster_secure_replicates_over_sasl_ssl_and_serves_a_real_client(tmp_path):
    directory = tmp_path / "cluster"
    first, zk_port = free_ports(3), free_port()
    command = ClusterCommand(directory, "--brokers", "3", "--port", str(first), "--zookeeper-port", str(zk_port),
                             "--secure", "--override", "offsets.topic.num.partitions=1")
    try:
        command.wait_running(90)
        assert "Secure (SASL_SSL" in command.text()
        properties = (directory / "broker-1" / "server.properties").read_text()
        assert f"listeners=SASL_SSL://127.0.0.1:{first}" in properties and "PLAINTEXT://" not in properties
        config = rdkafka_config(directory / "secure" / "librdkafka.properties")
        assert config["bootstrap.servers"] == ",".join(f"127.0.0.1:{first + i}" for i in range(3))
        admin = AdminClient(config)
        admin.create_topics([NewTopic("replicated", 1, 3)])["replicated"].result(30)
        producer = Producer({**config, "acks": "all"})
        for i in range(5):
            producer.produce("replicated", f"r{i}".encode())
        assert producer.flush(30) == 0
        consumer = Consumer({**config, "group.id": "cluster-g", "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe(["replicated"])
            values: list[bytes] = []

            def got_all() -> bool:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    values.append(message.value())
                return len(values) == 5
            wait_until(got_all, 60, interval=0, message="five records from the secure cluster")
        finally:
            consumer.close()
        topic = admin.list_topics("replicated", timeout=10).topics["replicated"]
        assert sorted(topic.partitions[0].isrs) == [1, 2, 3]
        assert command.stop() == 0
        assert_clean_logs(directory)
    finally:
        command.kill()
