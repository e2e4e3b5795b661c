"""Kafka's scripts through a ``pybroker kafka-home`` directory, driven as a Kafka-path test suite
drives ``$KAFKA_PATH/bin/*.sh``: subprocesses of ``bin/<script>`` with Kafka's flags, checking
Kafka's output and exit codes.

One broker per module, started by ``bin/kafka-server-start.sh -daemon config/server.properties``
after the listener port in the file was rewritten (as tools do) and stopped by
``bin/kafka-server-stop.sh``; it runs the ACL authorizer with ``User:ANONYMOUS`` (PLAINTEXT) a
super user, so kafka-acls.sh has something to manage and every other tool still may do anything.

The scripts also run from a working directory holding a pybroker source checkout whose native
module is not built (`fake_checkout`): ``python -m`` would import that ``pybroker/`` first.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.brokers import free_port
from tests.conftest import _UNEXPECTED, REPO, wait_until

TIMEOUT = 60


class KafkaHome:
    """A ``pybroker kafka-home`` directory with its broker."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"

    def run(self, script: str, *args: str, input: str | None = None, timeout: float = TIMEOUT,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != "LOG_DIR"}
        return subprocess.run([str(self.path / "bin" / script), *args], input=input, capture_output=True,
                              text=True, timeout=timeout, env=env, cwd=cwd)

    def tool(self, script: str, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
        return self.run(script, "--bootstrap-server", self.bootstrap, *args, input=input)

    def pids(self) -> list[int]:
        return [int(p.read_text()) for p in (self.path / "logs").glob("kafka-server-*.pid")]

    def log(self) -> str:
        out = self.path / "logs" / "kafkaServer.out"
        return out.read_text(errors="replace") if out.exists() else ""


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    return result.stdout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def fake_checkout(directory: Path) -> Path:
    """``directory`` made a pybroker source checkout without its built native module: a
    ``pybroker/`` package whose import fails with "No module named 'pybroker._native'"."""
    package = directory / "pybroker"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("import pybroker._native  # not built in this checkout\n")
    return directory


def lay_out(directory: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pybroker", "kafka-home", str(directory)], capture_output=True,
                          text=True, timeout=TIMEOUT, cwd=REPO)


def start(home: KafkaHome, *overrides: str, cwd: Path | None = None) -> None:
    """Rewrite the port in config/server.properties, as a tool would, and start the broker with
    kafka-server-start.sh -daemon (run in ``cwd``)."""
    config = home.path / "config" / "server.properties"
    config.write_text(re.sub(r"127\.0\.0\.1:9092", home.bootstrap, config.read_text()))
    args = [a for item in overrides for a in ("--override", item)]
    ok(home.run("kafka-server-start.sh", "-daemon", str(config), *args, cwd=cwd))
    wait_until(lambda: home.tool("kafka-topics.sh", "--list").returncode == 0, timeout=30,
               message=f"the broker of kafka-server-start.sh to answer:\n{home.log()}")


def stop(home: KafkaHome, cwd: Path | None = None) -> None:
    """kafka-server-stop.sh (run in ``cwd``), then wait for the broker to exit (killed if it does not)."""
    pids = home.pids()
    try:
        ok(home.run("kafka-server-stop.sh", cwd=cwd))
        wait_until(lambda: not any(_alive(p) for p in pids), timeout=20, message="the broker to stop")
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaHome]:
    home = KafkaHome(tmp_path_factory.mktemp("kafka-home") / "kafka")
    ok(lay_out(home.path))
    start(home, "authorizer.class.name=kafka.security.authorizer.AclAuthorizer", "super.users=User:ANONYMOUS")
    try:
        yield home
    finally:
        stop(home)
        problems = [line for line in home.log().splitlines() if _UNEXPECTED.search(line)]
        assert not problems, "the broker logged unexpected errors:\n" + home.log()[-3000:]


def test_kafka_home_layout_is_idempotent(tmp_path: Path) -> None:
    first = lay_out(tmp_path / "k")
    assert first.returncode == 0, first.stderr
    assert f"wrote {tmp_path / 'k' / 'bin' / 'kafka-topics.sh'}" in first.stdout
    for name in ("kafka-topics.sh", "kafka-console-consumer.sh", "kafka-server-start.sh", "kafka-server-stop.sh"):
        assert os.access(tmp_path / "k" / "bin" / name, os.X_OK)
    assert (tmp_path / "k" / "libs").is_dir() and "not Apache Kafka" in (tmp_path / "k" / "NOTICE").read_text()
    properties = (tmp_path / "k" / "config" / "server.properties").read_text()
    assert f"log.dirs={tmp_path / 'k' / 'data' / 'kafka-logs'}" in properties
    (tmp_path / "k" / "config" / "server.properties").write_text(properties + "num.partitions=3\n")
    second = lay_out(tmp_path / "k")
    assert "wrote" not in second.stdout and f"kept {tmp_path / 'k' / 'config' / 'server.properties'}" in second.stdout
    assert (tmp_path / "k" / "config" / "server.properties").read_text().endswith("num.partitions=3\n")


def test_topics(home: KafkaHome) -> None:
    assert ok(home.tool("kafka-topics.sh", "--create", "--topic", "scripts-t", "--partitions", "2",
                        "--replication-factor", "1", "--config", "retention.ms=3600000")) == "Created topic scripts-t.\n"
    again = home.tool("kafka-topics.sh", "--create", "--topic", "scripts-t")
    assert again.returncode == 1
    assert again.stdout == "Error while executing topic command : Topic 'scripts-t' already exists.\n"
    assert ok(home.tool("kafka-topics.sh", "--create", "--if-not-exists", "--topic", "scripts-t")) == ""
    assert "scripts-t" in ok(home.tool("kafka-topics.sh", "--list")).split("\n")
    ok(home.tool("kafka-topics.sh", "--alter", "--topic", "scripts-t", "--partitions", "3"))
    lines = ok(home.tool("kafka-topics.sh", "--describe", "--topic", "scripts-t")).splitlines()
    assert re.fullmatch(r"Topic: scripts-t\tTopicId: \S+\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: .*", lines[0])
    assert "retention.ms=3600000" in lines[0]
    assert lines[1:] == [f"\tTopic: scripts-t\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1" for p in range(3)]
    missing = home.tool("kafka-topics.sh", "--describe", "--topic", "no-such-topic")
    assert (missing.returncode, missing.stdout) == (1, "Error while executing topic command : Topic 'no-such-topic' "
                                                       "does not exist as expected\n")
    assert ok(home.tool("kafka-topics.sh", "--describe", "--topic", "no-such-topic", "--if-exists")) == ""
    # joptsimple's abbreviations and --opt=value; a regular expression for --topic.
    ok(home.tool("kafka-topics.sh", "--create", "--topic=scripts-u", "--partit=1"))
    assert ok(home.tool("kafka-topics.sh", "--delete", "--topic", "scripts-[u]")) == ""
    assert "scripts-u" not in ok(home.tool("kafka-topics.sh", "--list")).split("\n")


def test_refused_options(home: KafkaHome) -> None:
    zookeeper = home.run("kafka-topics.sh", "--zookeeper", "localhost:2181", "--list")
    assert zookeeper.returncode == 1
    assert zookeeper.stderr.strip() == ('Exception in thread "main" joptsimple.UnrecognizedOptionException: zookeeper '
                                        "is not a recognized option")
    configs = home.run("kafka-configs.sh", "--zookeeper", "localhost:2181", "--describe", "--topic", "x")
    assert configs.returncode == 1 and "ZooKeeper-mode access" in configs.stderr
    include = home.tool("kafka-console-consumer.sh", "--include", "scripts-.*")
    assert include.returncode == 1 and "--whitelist/--include" in include.stderr


def test_console_producer_and_consumer(home: KafkaHome) -> None:
    ok(home.tool("kafka-topics.sh", "--create", "--topic", "scripts-console", "--partitions", "1"))
    ok(home.tool("kafka-console-producer.sh", "--topic", "scripts-console", "--property", "parse.key=true",
                 "--property", "key.separator=:", "--producer-property", "acks=all", "--batch-size", "16384",
                 input="k1:v1\nk2:v2\nk3:v3\n"))
    consumed = home.tool("kafka-console-consumer.sh", "--topic", "scripts-console", "--from-beginning",
                         "--max-messages", "3", "--property", "print.key=true", "--group", "scripts-group")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout == "k1\tv1\nk2\tv2\nk3\tv3\n"
    assert "Processed a total of 3 messages" in consumed.stderr
    one = home.tool("kafka-console-consumer.sh", "--topic", "scripts-console", "--partition", "0", "--offset", "1",
                    "--max-messages", "1", "--property", "print.offset=true", "--isolation-level", "read_committed")
    assert (one.returncode, one.stdout) == (0, "Offset:1\tv2\n"), one.stderr
    # The group's offsets: described, reset to the start, then consumed again.
    described = ok(home.tool("kafka-consumer-groups.sh", "--describe", "--group", "scripts-group"))
    assert re.search(r"scripts-group\s+scripts-console\s+0\s+3\s+3\s+0", described), described
    reset = ok(home.tool("kafka-consumer-groups.sh", "--reset-offsets", "--group", "scripts-group", "--topic",
                         "scripts-console", "--to-earliest", "--execute"))
    assert re.search(r"scripts-group\s+scripts-console\s+0\s+0", reset), reset
    again = home.tool("kafka-console-consumer.sh", "--topic", "scripts-console", "--group", "scripts-group",
                      "--max-messages", "3", "--timeout-ms", "10000")
    assert (again.returncode, again.stdout) == (0, "v1\nv2\nv3\n"), again.stderr


def test_delete_records(home: KafkaHome, tmp_path: Path) -> None:
    ok(home.tool("kafka-topics.sh", "--create", "--topic", "scripts-delete", "--partitions", "1"))
    ok(home.tool("kafka-console-producer.sh", "--topic", "scripts-delete", input="a\nb\nc\n"))
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"partitions": [{"topic": "scripts-delete", "partition": 0, "offset": 2}],
                                   "version": 1}))
    out = ok(home.tool("kafka-delete-records.sh", "--offset-json-file", str(offsets)))
    assert out == ("Executing records delete operation\nRecords delete operation completed:\n"
                   "partition: scripts-delete-0\tlow_watermark: 2\tleader_log_start_offset: 2\n")


def test_configs(home: KafkaHome) -> None:
    ok(home.tool("kafka-topics.sh", "--create", "--topic", "scripts-configs", "--partitions", "1"))
    assert ok(home.tool("kafka-configs.sh", "--entity-type", "topics", "--entity-name", "scripts-configs", "--alter",
                        "--add-config", "retention.ms=1000,max.message.bytes=2048")) == \
        "Completed updating config for topic scripts-configs.\n"
    described = ok(home.tool("kafka-configs.sh", "--describe", "--entity-type", "topics", "--entity-name",
                             "scripts-configs")).splitlines()
    assert described[0] == "Dynamic configs for topic scripts-configs are:"
    assert [line.split()[0] for line in described[1:]] == ["max.message.bytes=2048", "retention.ms=1000"]


def test_acls(home: KafkaHome) -> None:
    added = ok(home.tool("kafka-acls.sh", "--add", "--allow-principal", "User:alice", "--producer", "--topic",
                         "scripts-acl"))
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=scripts-acl, patternType=LITERAL)`" in added
    listed = ok(home.tool("kafka-acls.sh", "--list", "--topic", "scripts-acl"))
    operations = sorted(re.findall(r"operation=(\w+)", listed))
    assert operations == ["CREATE", "DESCRIBE", "WRITE"], listed
    ok(home.tool("kafka-acls.sh", "--add", "--allow-principal", "User:bob", "--consumer", "--topic", "scripts-acl",
                 "--group", "scripts-acl-group"))
    group = ok(home.tool("kafka-acls.sh", "--list", "--group", "scripts-acl-group"))
    assert re.findall(r"principal=User:bob, host=\*, operation=(\w+)", group) == ["READ"], group
    ok(home.tool("kafka-acls.sh", "--remove", "--force", "--topic", "scripts-acl"))
    assert "principal=" not in ok(home.tool("kafka-acls.sh", "--list", "--topic", "scripts-acl"))


def test_leader_election(home: KafkaHome) -> None:
    ok(home.tool("kafka-topics.sh", "--create", "--topic", "scripts-election", "--partitions", "1"))
    out = ok(home.tool("kafka-leader-election.sh", "--election-type", "preferred", "--topic", "scripts-election",
                       "--partition", "0"))
    assert out == "Valid replica already elected for partitions scripts-election-0\n"


def test_scripts_run_from_a_checkout_without_native_module(home: KafkaHome, tmp_path: Path) -> None:
    """Run in a directory holding a pybroker checkout without ``_native``, the scripts still run
    the pybroker of the home (they would import the checkout's and fail with "No module named
    'pybroker._native'"); the checkout's own ``python -m pybroker`` fails there as it should."""
    checkout = fake_checkout(tmp_path / "checkout")
    broken = subprocess.run([sys.executable, "-m", "pybroker", "--help"], cwd=checkout, capture_output=True, text=True,
                            timeout=TIMEOUT)
    assert broken.returncode == 1 and "No module named 'pybroker._native'" in broken.stderr, broken.stderr
    version = home.run("kafka-topics.sh", "--version", cwd=checkout)
    assert (version.returncode, version.stdout.split(" ")[0], version.stderr) == (0, "3.6.2", "")
    ok(home.tool("kafka-topics.sh", "--create", "--topic", "scripts-cwd", "--partitions", "1"))
    listed = home.run("kafka-topics.sh", "--bootstrap-server", f"PLAINTEXT://{home.bootstrap}", "--list", cwd=checkout)
    assert "scripts-cwd" in ok(listed).split("\n")


def test_server_start_and_stop(tmp_path: Path) -> None:
    """A second home: kafka-server-start.sh -daemon with a broker.id, its pid file and output,
    kafka-server-stop.sh stopping it, then "No kafka server to stop". Both run in a directory
    holding a pybroker checkout without ``_native``: the daemon broker must not import it either."""
    home = KafkaHome(tmp_path / "kafka")
    checkout = fake_checkout(tmp_path / "checkout")
    ok(lay_out(home.path))
    config = home.path / "config" / "server.properties"
    config.write_text(config.read_text() + "broker.id=7\n")
    start(home, cwd=checkout)
    try:
        (pid,) = home.pids()
        assert _alive(pid)
        assert "pybroker node 7 started" in home.log()
    finally:
        stop(home, cwd=checkout)
    none = home.run("kafka-server-stop.sh", cwd=checkout)
    assert (none.returncode, none.stdout) == (1, "No kafka server to stop\n")
    assert home.pids() == []


def test_zookeeper_server_start_and_stop(tmp_path: Path) -> None:
    """zookeeper-server-start.sh -daemon with config/zookeeper.properties (its port rewritten),
    answering ``ruok``; zookeeper-server-stop.sh stopping it."""
    from pybroker.zookeeper.server import (
        ZooKeeperInstall,
        ZooKeeperNotInstalledError,
        four_letter_word,
    )

    try:
        ZooKeeperInstall.find()
    except ZooKeeperNotInstalledError as e:
        pytest.skip(str(e))
    home = KafkaHome(tmp_path / "kafka")
    ok(lay_out(home.path))
    config = home.path / "config" / "zookeeper.properties"
    config.write_text(config.read_text().replace("clientPort=2181", f"clientPort={home.port}"))
    ok(home.run("zookeeper-server-start.sh", "-daemon", str(config)))
    pids = [int(p.read_text()) for p in (home.path / "logs").glob("zookeeper-server-*.pid")]
    try:
        wait_until(lambda: four_letter_word("127.0.0.1", home.port, "ruok") == "imok", timeout=30,
                   message="ZooKeeper to answer ruok")
        ok(home.run("zookeeper-server-stop.sh"))
        wait_until(lambda: not any(_alive(p) for p in pids), timeout=20, message="ZooKeeper to stop")
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    none = home.run("zookeeper-server-stop.sh")
    assert (none.returncode, none.stdout) == (1, "No zookeeper server to stop\n")
