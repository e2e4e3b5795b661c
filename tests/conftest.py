"""Shared test fixtures: real pybroker processes on free loopback ports, and polling helpers.

Every broker a test starts is a separate ``python -m pybroker serve`` process with its own data
directory; fixtures stop each one by its PID when the test (or module) ends. The same holds for
the ZooKeeper server of the ``zookeeper`` fixture (one per module, see ``tests/zookeeper.py``),
and for Apache Kafka beside pybroker, the oracle: the ``kafka`` broker and ``kafka_cluster``
(``bench/apache_kafka.py``, one per module on that module's ZooKeeper, each under a chroot of its own).

Every test is also checked against its brokers' logs: an ERROR or CRITICAL entry, or a traceback,
written while the test ran fails it, unless the test declares the entry with
``@pytest.mark.broker_log_allows(regex, ...)``. A broker that crashes inside a request, or closes a
connection because of a bug rather than on purpose, cannot pass for one that behaves.
"""

from __future__ import annotations

import asyncio
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.apache_kafka import (
    ZOOKEEPER_VERSION,
    KafkaBroker,
    KafkaCluster,
    KafkaNotResolvedError,
    kafka_libs,
)
from bench.brokers import free_port
from pybroker.client.connection import BrokerConnection
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import FindCoordinatorRequest, MetadataRequest

REPO = Path(__file__).resolve().parent.parent

# A log entry is a line in the broker's format ("[time] LEVEL message (logger)") plus the lines
# that follow it (a traceback); these entries fail the test that caused them.
_ENTRY_START = re.compile(r"^\[[^\]]+\] [A-Z]+ ", re.M)
_UNEXPECTED = re.compile(r"^\[[^\]]+\] (ERROR|CRITICAL) |Traceback \(most recent call last\)", re.M)


def wait_until(condition: Callable[[], object], timeout: float = 10.0, interval: float = 0.02, message: str = "") -> object:
    """Poll ``condition`` until it returns something truthy; fail the test at the deadline."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = condition()
            if result:
                return result
        except Exception as e:  # the condition may raise until the system is ready
            last_error = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message or condition}" + (f" (last error: {last_error})" if last_error else ""))


class BrokerProcess:
    """A pybroker started as a process on 127.0.0.1; with ``open_files`` its RLIMIT_NOFILE (soft
    and hard) is set to that, as ``ulimit -n`` would before it starts."""

    def __init__(self, data_dir: Path, port: int | None = None, *, open_files: int | None = None,
                 **overrides: object) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.open_files = open_files
        self.overrides = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(data_dir),
            **{k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in overrides.items()},
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}-broker.log"
        self.log_checked = 0  # bytes of the log already checked for unexpected entries

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        args = [sys.executable, "-m", "pybroker", "serve"]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        log_file = open(self.log_path, "ab")
        if self not in _STARTED:
            _STARTED.append(self)
        limit = self.open_files

        def limit_open_files() -> None:
            if limit is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

        self.proc = subprocess.Popen(args, cwd=REPO, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     preexec_fn=limit_open_files if limit is not None else None)
        log_file.close()

        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log()}")
            with socket.socket() as s:
                s.settimeout(0.5)
                return s.connect_ex(("127.0.0.1", self.port)) == 0

        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"broker did not listen on {self.port} within {timeout}s:\n{self.log()}")
            time.sleep(0.02)
        return self

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_mark(self) -> int:
        """The log's current size: pass it to ``wait_for_log`` to look only at what follows."""
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def wait_for_log(self, pattern: str, since: int = 0, timeout: float = 10.0) -> str:
        """The first log line after byte ``since`` matching ``pattern``; fails at the deadline."""
        regex = re.compile(pattern)

        def found() -> str | None:
            with open(self.log_path, "rb") as f:
                f.seek(since)
                lines = f.read().decode("utf-8", "replace").splitlines()
            return next((line for line in lines if regex.search(line)), None)

        try:
            return wait_until(found, timeout, message=f"a broker log line matching {pattern!r}")  # type: ignore[return-value]
        except AssertionError as e:
            with open(self.log_path, "rb") as f:
                f.seek(since)
                tail = f.read().decode("utf-8", "replace").splitlines()[-40:]
            raise AssertionError(f"{e}; the broker's log since then ends with:\n" + "\n".join(tail)) from None

    def unexpected_log_entries(self, allowed: list[re.Pattern[str]]) -> list[str]:
        """ERROR/CRITICAL entries and tracebacks logged since the last call, minus ``allowed``."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_checked)
                data = f.read()
        except FileNotFoundError:
            return []
        self.log_checked += len(data)
        text = data.decode("utf-8", "replace")
        starts = [m.start() for m in _ENTRY_START.finditer(text)]
        bounds = zip([0, *starts], [*starts, len(text)], strict=True)
        entries = [text[a:b] for a, b in bounds if b > a]
        return [
            e.strip() for e in entries
            if _UNEXPECTED.search(e) and not any(p.search(e) for p in allowed)
        ]

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: a clean shutdown."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"broker did not stop within {timeout}s:\n{self.log()}") from None

    def kill(self) -> None:
        """SIGKILL: an unclean stop."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def pause(self) -> None:
        """SIGSTOP: the process stays alive (and registered) but answers nothing."""
        assert self.proc is not None and self.proc.poll() is None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after ``pause``."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


_STARTED: list[BrokerProcess] = []  # brokers whose logs are still to be checked


@pytest.fixture(autouse=True)
def broker_log_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test if a broker logged an unexpected ERROR, CRITICAL or traceback meanwhile (a
    shared broker's entries since the previous test's check count for this test)."""
    yield
    allowed = [re.compile(p) for mark in request.node.iter_markers("broker_log_allows") for p in mark.args]
    problems = [entry for broker in _STARTED for entry in broker.unexpected_log_entries(allowed)]
    _STARTED[:] = [broker for broker in _STARTED if broker.alive]
    if problems:
        pytest.fail("the broker logged unexpected errors (declare expected ones with "
                    "@pytest.mark.broker_log_allows):\n\n" + "\n\n".join(problems[:5]), pytrace=False)


@pytest.fixture
def start_broker(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """Start brokers with property overrides; all are stopped at the end of the test."""
    started: list[BrokerProcess] = []

    def start(name: str = "broker", *, open_files: int | None = None, **overrides: object) -> BrokerProcess:
        broker = BrokerProcess(tmp_path / name, open_files=open_files, **overrides)
        started.append(broker)
        return broker.start()

    yield start
    for broker in started:
        broker.kill()


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by a test module (tests use their own topics). A module may set
    ``BROKER_OVERRIDES = {property: value}`` to start it with other broker properties."""
    overrides = {"num.partitions": 1, **getattr(request.module, "BROKER_OVERRIDES", {})}
    process = BrokerProcess(tmp_path_factory.mktemp("shared") / "data", **overrides)
    process.start()
    yield process
    if process.alive:
        code = process.stop()
        assert code == 0, f"broker exited with {code}:\n{process.log()}"
    process.kill()
    problems = process.unexpected_log_entries([])
    assert not problems, "the shared broker logged unexpected errors:\n\n" + "\n\n".join(problems[:5])


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test."""
    return "t-" + "".join(c if c.isalnum() else "-" for c in request.node.name)[:80] + f"-{os.getpid()}"


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One ZooKeeper server per test module (``tests/zookeeper.py``: free port, fresh data
    directory, 250 ms ticks, 1 s minimum session), stopped by its PID at the end. Fails, rather
    than skips, the tests using it when ZooKeeper is not installed."""
    from tests.zookeeper import ZooKeeperProcess  # imported here: only these tests need kazoo

    server = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _kafka_chroot(zookeeper: object, request: pytest.FixtureRequest, prefix: str) -> str:
    """``zookeeper``'s connect string with a chroot for Apache Kafka of one test module."""
    from tests.zookeeper import chroot_for

    return chroot_for(zookeeper, f"{prefix}-{request.module.__name__}")  # type: ignore[arg-type]


def require_kafka(version: str) -> None:
    """Fail (never skip) the test when Apache Kafka ``version``'s jars are not resolved; the
    message says to run ``bench/kafka/resolve.sh``, which tests/run.sh does."""
    try:
        kafka_libs(version)
    except KafkaNotResolvedError as e:
        message = str(e)
    else:
        return
    pytest.fail(message, pytrace=False)


@pytest.fixture(scope="module")
def kafka(zookeeper: object, request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """One Apache Kafka 3.9.2 broker (ZooKeeper mode) per test module, the oracle beside pybroker
    (``bench/apache_kafka.py``): on the module's ``zookeeper`` under a chroot of its own, started with
    ``-XX:TieredStopAtLevel=1`` (a quicker JVM start), stopped by its PID at the end. Fails, rather
    than skips, the tests using it when the jars are not resolved (``bench/kafka/resolve.sh``)."""
    require_kafka(ZOOKEEPER_VERSION)
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka"), _kafka_chroot(zookeeper, request, "kafka-oracle"),
                         quick_start=True)
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()
        broker.kill()


@pytest.fixture(scope="module")
def kafka_cluster(zookeeper: object, request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Three Apache Kafka 3.9.2 brokers (ids 1-3) per test module, on the module's ``zookeeper``
    under a chroot of their own; ready when each lists all three; stopped by their PIDs at the
    end. Fails, rather than skips, when the jars are not resolved."""
    require_kafka(ZOOKEEPER_VERSION)
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka-cluster"),
                           _kafka_chroot(zookeeper, request, "kafka-cluster-oracle"), 3, quick_start=True)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        cluster.kill()


async def broker_connection(bootstrap: str) -> BrokerConnection:
    """A connected `BrokerConnection` to ``host:port``, for raw-protocol tests."""
    host, port = bootstrap.split(":")
    connection = BrokerConnection(host, int(port))
    await connection.connect()
    return connection


async def send_once(bootstrap: str, api_key: int, message: Any, version: int) -> Any:
    """``message`` at ``version`` on a connection of its own to ``host:port``: the answer."""
    connection = await broker_connection(bootstrap)
    try:
        return await connection.send(api_key, message, version=version)
    finally:
        await connection.close()


COORDINATOR_NOT_AVAILABLE = 15


async def find_coordinator(connection: BrokerConnection, key: str, key_type: int = 0, version: int = 3,
                           timeout: float = 30.0) -> Any:
    """FindCoordinator of one key as a client sends it: asked again while the answer is
    COORDINATOR_NOT_AVAILABLE (the first lookup only starts the internal topic's creation, as
    Kafka's does); the first other answer (v4+: its coordinator entry)."""
    deadline = time.monotonic() + timeout
    while True:
        if version >= 4:
            request = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
            found = (await connection.send(ApiKey.FIND_COORDINATOR, request, version=version)).coordinators[0]
        else:
            request = FindCoordinatorRequest(key=key, key_type=key_type)
            found = await connection.send(ApiKey.FIND_COORDINATOR, request, version=version)
        if found.error_code != COORDINATOR_NOT_AVAILABLE:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"no coordinator for {key!r} (key type {key_type}) after {timeout}s")
        await asyncio.sleep(0.05)


def find_coordinator_at(bootstrap: str, key: str, key_type: int = 0, version: int = 3) -> Any:
    """`find_coordinator` on a connection of its own to ``host:port``."""
    async def ask() -> Any:
        connection = await broker_connection(bootstrap)
        try:
            return await find_coordinator(connection, key, key_type, version)
        finally:
            await connection.close()
    return asyncio.run(ask())


async def auto_create(connection: BrokerConnection, topic: str, timeout: float = 10.0) -> None:
    """Create ``topic`` as a client does through Metadata (allow_auto_topic_creation): the first
    answer is LEADER_NOT_AVAILABLE, as Kafka's; ask again until its partitions have leaders."""
    deadline = time.monotonic() + timeout
    while True:
        response = await connection.send(ApiKey.METADATA, MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=True))
        found = response.topics[0]
        if found.error_code == 0 and found.partitions and all(p.leader_id >= 0 for p in found.partitions):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"topic {topic} not ready after {timeout}s: error {found.error_code}")
        await asyncio.sleep(0.02)
