"""Apache Kafka itself beside pybroker: the oracle for behaviour (3.9.2, ZooKeeper mode, the line
pybroker reproduces) and the anchor for current clients and performance (4.4.0, KRaft).

Owns finding the jars that ``bench/kafka/resolve.sh`` put in the cache outside the repository
(`kafka_libs`: ``${PYBROKER_KAFKA_CACHE:-~/.cache/pybroker/kafka}/<version>/libs``; a version
that is not there raises `KafkaNotResolvedError`, whose message says to run the script), the
configuration files of a Kafka process (``server.properties`` with Kafka's property names,
a log4j 1 or Log4j 2 configuration that writes ``[time] LEVEL message (logger)`` lines to the
process's output), and the life of its JVM: started in its own process group with its output in
``kafka.log`` in its directory, ended when whoever started it is killed (the parent-death signal
of `pybroker.child_process.terminated_with_parent`), ready once a Metadata answer through
pybroker's own client (`BrokerConnection`) lists it (polled against a deadline, never a bare
sleep), stopped by its PID (SIGTERM, SIGKILL after a timeout). The data directory is kept, so a
restarted process finds its logs (and a KRaft node its formatted metadata log) again.

- `KafkaBroker`: one ZooKeeper-mode broker (3.9.2) under a chroot of the caller's (Kafka creates
  the chroot path itself when it is missing).
- `KafkaCluster`: N such brokers (ids 1..N, as ``bench/cluster.py`` numbers pybroker's) on one
  chroot, ready when each answers Metadata listing all N.
- `KRaftNode`: one combined broker+controller (4.4.0), its storage formatted before the first
  start.
- `run_kafka_tool`: a command-line tool class (``org.apache.kafka.tools.TopicCommand``,
  ``kafka.admin.ConfigCommand``, ...) run from the jars with a small heap;
  `run_kafka_tools`: several of them one after another in one JVM (``bench/kafka/ToolBatch.java``,
  compiled with ``javac`` into the cache), each with its own output and exit code.
- `KafkaToolProcess`: such a tool running in the background (a ``VerifiableConsumer`` that stays
  in its group while other tools look at the group), its output in files, ended by its PID.

JVM start-up on a 2-core machine: each process gets a pinned heap (``-Xms`` = ``-Xmx``: 512 MB
for a broker, 256 MB for a tool) and G1 with the flags Kafka's own scripts add. Brokers keep the
full JIT by default (benchmarks compare their throughput); ``quick_start=True`` adds
``-XX:TieredStopAtLevel=1`` (C1 only), which the tests use. Measured here (2 shared cores under
other test runs, medians of 3, until Metadata lists the brokers): a 3.9.2 broker 2.7 s with it,
4.2 s without; a 3-broker cluster 6.9 s against 11.4 s; a 4.4.0 KRaft node (formatted) 4.7 s
against 10.3 s. Tools always run C1-only (TopicCommand --list: 1.0 s against 2.0 s).
``-Xshare:auto`` is the JVM's default already (the JDK's class-data archive); an application
archive (``-XX:ArchiveClassesAtExit``, then ``-XX:SharedArchiveFile``) took about 0.5 s more off
a broker start (2.9 to 2.4 s), but it must be dumped per version, class path and flags: not done.

Concurrency rules: every call blocks (`KafkaToolProcess.start` until the JVM is launched); call
them from a plain thread or a test. Readiness checks run their own event loop (in a worker thread
when the caller's thread already runs one). One object runs at most one process at a time.

Imported as ``bench.apache_kafka`` (not ``kafka``: a bench script that puts ``bench/`` on
``sys.path`` would then shadow kafka-python's package).
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, Self, TypeVar

from bench.brokers import REPO, free_port
from pybroker.child_process import terminated_with_parent
from pybroker.client.connection import BrokerConnection
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import MetadataRequest

ZOOKEEPER_VERSION = "3.9.2"  # the last Kafka line with ZooKeeper mode: the oracle
KRAFT_VERSION = "4.4.0"  # the newest release (KRaft only): the anchor
RESOLVE_SCRIPT = REPO / "bench" / "kafka" / "resolve.sh"
DEFAULT_CACHE = Path.home() / ".cache" / "pybroker" / "kafka"
START_TIMEOUT_S = 120.0  # a JVM start on a busy 2-core machine takes several seconds
STOP_TIMEOUT_S = 60.0  # a controlled shutdown may wait for the controller

# What Kafka's kafka-server-start.sh / kafka-run-class.sh add, heap aside.
BROKER_JVM_FLAGS = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
QUICK_START_FLAGS = ("-XX:TieredStopAtLevel=1",)
TOOL_JVM_FLAGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")

_PATTERN = "[%d] %p %m (%c)%n"  # pybroker's own log line layout

_LOG4J_BROKER = f"""\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern={_PATTERN}
log4j.logger.org.apache.zookeeper=WARN
log4j.logger.kafka.request.logger=WARN
"""

_LOG4J_TOOL = f"""\
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.Follow=true
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern={_PATTERN}
"""


def _log4j2(level: str, target: str, quiet: Sequence[str] = (), follow: bool = False) -> str:
    lines = [
        "status = warn",
        "appender.out.type = Console",
        "appender.out.name = OUT",
        f"appender.out.target = {target}",
        *(["appender.out.follow = true"] if follow else []),
        "appender.out.layout.type = PatternLayout",
        f"appender.out.layout.pattern = {_PATTERN}",
        f"rootLogger.level = {level}",
        "rootLogger.appenderRef.out.ref = OUT",
    ]
    for i, name in enumerate(quiet):
        lines += [f"logger.quiet{i}.name = {name}", f"logger.quiet{i}.level = WARN"]
    return "\n".join(lines) + "\n"


_T = TypeVar("_T")


class KafkaNotResolvedError(RuntimeError):
    """The jars of a Kafka version are not in the cache; the message says how to get them."""


class KafkaStartError(RuntimeError):
    """A Kafka process exited, or did not become ready in time; the message ends with its log."""


def kafka_cache() -> Path:
    """The directory ``bench/kafka/resolve.sh`` resolves into (``PYBROKER_KAFKA_CACHE``)."""
    return Path(os.environ.get("PYBROKER_KAFKA_CACHE") or DEFAULT_CACHE)


def kafka_libs(version: str) -> Path:
    """The directory of Kafka ``version``'s jars; `KafkaNotResolvedError` when it is not complete."""
    libs = kafka_cache() / version / "libs"
    if not (libs / ".complete").is_file():
        raise KafkaNotResolvedError(
            f"Apache Kafka {version} is not resolved ({libs / '.complete'} is missing): run "
            f"`bash {RESOLVE_SCRIPT.relative_to(REPO)} {version}` (needs Maven and Maven Central)"
        )
    return libs


def uses_log4j2(version: str) -> bool:
    """Kafka 4 logs through Log4j 2; earlier versions through log4j 1 (reload4j)."""
    return int(version.split(".")[0]) >= 4


def java() -> str:
    found = shutil.which("java")
    if found is None:
        raise KafkaNotResolvedError("java is not on the PATH: Kafka needs Java 17")
    return found


def _log_config_flag(version: str, path: Path) -> str:
    if uses_log4j2(version):
        return f"-Dlog4j2.configurationFile={path}"
    return f"-Dlog4j.configuration=file:{path}"


def _property_value(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _properties_line(key: str, value: str) -> str:
    """``key=value`` as java.util.Properties reads it back (backslashes and line breaks escaped)."""
    escaped = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return f"{key}={escaped}\n"


def _run_coroutine(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coroutine`` to completion on a loop of its own (on a worker thread if this thread
    already runs a loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def metadata(bootstrap: str, topics: Sequence[str] | None = (), timeout: float = 5.0) -> Any:
    """One broker's Metadata answer for ``topics`` (None: all; empty: none) through pybroker's
    client, without creating topics."""
    host, port = bootstrap.rsplit(":", 1)

    async def ask() -> Any:
        connection = BrokerConnection(host, int(port), client_id="pybroker-kafka-oracle")
        await connection.connect(timeout)
        try:
            request = MetadataRequest(
                topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                allow_auto_topic_creation=False,
            )
            return await connection.send(ApiKey.METADATA, request, timeout=timeout)
        finally:
            await connection.close()

    return _run_coroutine(ask())


def broker_ids(bootstrap: str, timeout: float = 5.0) -> set[int]:
    """The ids of the brokers a broker's Metadata answer lists."""
    return {b.node_id for b in metadata(bootstrap, (), timeout).brokers}


class _KafkaProcess:
    """What `KafkaBroker` and `KRaftNode` share: files in ``directory``, one JVM, readiness."""

    def __init__(
        self,
        version: str,
        directory: Path | str,
        node_id: int,
        port: int | None,
        heap_mb: int,
        quick_start: bool,
        overrides: Mapping[str, object],
    ) -> None:
        self.libs = kafka_libs(version)  # fails early, with the resolve script's name
        self.version = version
        self.directory = Path(directory)
        self.node_id = node_id
        self.port = port or free_port()
        self.heap_mb = heap_mb
        self.quick_start = quick_start
        self.overrides = {k: _property_value(v) for k, v in overrides.items()}
        self.proc: subprocess.Popen[bytes] | None = None
        self.last_seen: object = None  # the last readiness check's finding

    # --- where things are --------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> Path:
        """``log.dirs``."""
        return self.directory / "data"

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_config_path(self) -> Path:
        return self.directory / ("log4j2.properties" if uses_log4j2(self.version) else "log4j.properties")

    @property
    def log_path(self) -> Path:
        """The JVM's output: Kafka's log lines, and whatever the JVM itself prints."""
        return self.directory / "kafka.log"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # --- configuration ----------------------------------------------------------------------

    def properties(self) -> dict[str, str]:
        """``server.properties``: this node's settings, then the overrides."""
        raise NotImplementedError

    def write_config(self) -> Path:
        """Write ``server.properties`` and the logging configuration (overwriting them)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text("".join(_properties_line(k, v) for k, v in self.properties().items()))
        if uses_log4j2(self.version):
            quiet = ("kafka.request.logger", "org.apache.zookeeper")
            self.log_config_path.write_text(_log4j2("INFO", "SYSTEM_OUT", quiet))
        else:
            self.log_config_path.write_text(_LOG4J_BROKER)
        return self.config_path

    def jvm_flags(self) -> list[str]:
        return [
            f"-Xms{self.heap_mb}m",
            f"-Xmx{self.heap_mb}m",
            *BROKER_JVM_FLAGS,
            *(QUICK_START_FLAGS if self.quick_start else ()),
            f"-Dkafka.logs.dir={self.directory}",
            _log_config_flag(self.version, self.log_config_path),
        ]

    def command(self) -> list[str]:
        return [java(), *self.jvm_flags(), "-cp", str(self.libs / "*"), "kafka.Kafka", str(self.config_path)]

    # --- life -------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Run before each start, after the configuration is written."""

    def launch(self) -> None:
        """Start the JVM without waiting for it (`wait_ready` does)."""
        if self.alive:
            raise KafkaStartError(f"Kafka node {self.node_id} is already running as PID {self.pid}")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.write_config()
        self.prepare()
        with open(self.log_path, "ab") as log_file:
            self.proc = subprocess.Popen(
                self.command(),
                cwd=self.directory,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: a terminal's Ctrl-C is not for it
                preexec_fn=terminated_with_parent(),  # but it ends if whoever started it is killed
            )

    def wait_ready(self, timeout: float = START_TIMEOUT_S, brokers: set[int] | None = None) -> None:
        """Until this node's Metadata answer lists ``brokers`` (default: itself); on a deadline or
        an exit the process is killed and `KafkaStartError` raised."""
        expected = brokers if brokers is not None else {self.node_id}
        deadline = time.monotonic() + timeout
        while not self.lists(expected):
            if time.monotonic() > deadline:
                self.kill()
                raise KafkaStartError(
                    f"Kafka node {self.node_id} on {self.bootstrap} did not list brokers {sorted(expected)} "
                    f"within {timeout}s (last: {self.last_seen}); {self.log_path} ends with:\n{self.log_tail()}")
            time.sleep(0.1)

    def lists(self, expected: set[int]) -> bool:
        """Whether this node's Metadata answer lists (at least) ``expected`` now; False while it
        does not answer yet. `KafkaStartError` if the process is not running."""
        if self.proc is None or self.proc.poll() is not None:
            code = None if self.proc is None else self.proc.returncode
            raise KafkaStartError(f"Kafka node {self.node_id} exited with code {code}; "
                                  f"{self.log_path} ends with:\n{self.log_tail()}")
        try:
            seen = broker_ids(self.bootstrap, timeout=5.0)
        except Exception as e:  # not listening yet, or not answering yet
            self.last_seen = e
            return False
        self.last_seen = f"its Metadata lists brokers {sorted(seen)}"
        return expected <= seen

    def start(self, timeout: float = START_TIMEOUT_S) -> Self:
        """Start the process and wait until it is ready; returns self."""
        self.launch()
        self.wait_ready(timeout)
        return self

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM by PID (a controlled shutdown), SIGKILL if still running after ``timeout``;
        the exit code (Kafka exits 143 after a SIGTERM), None if it never ran."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL by PID: an unclean stop."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self, timeout: float = START_TIMEOUT_S) -> Self:
        """Stop cleanly, then start again on the same port, data and configuration; returns self."""
        self.stop()
        return self.start(timeout)

    # --- looking at it ------------------------------------------------------------------------

    def metadata(self, topics: Sequence[str] | None = (), timeout: float = 5.0) -> Any:
        return metadata(self.bootstrap, topics, timeout)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class KafkaBroker(_KafkaProcess):
    """One ZooKeeper-mode Kafka broker (3.9.2 by default) on 127.0.0.1:``port``.

    ``zookeeper_connect`` carries a chroot of its own (``127.0.0.1:2181/kafka-oracle-x``), apart
    from any pybroker's. ``cluster_size`` sets the internal topics' replication as a pybroker
    cluster of that size does (``offsets.topic.replication.factor`` and
    ``transaction.state.log.replication.factor`` min(3, n), ``transaction.state.log.min.isr``
    min(2, n)). ``overrides`` are Kafka property names and values
    (``**{"log.segment.bytes": 4096}``) written over the defaults.
    """

    def __init__(
        self,
        directory: Path | str,
        zookeeper_connect: str,
        broker_id: int = 1,
        port: int | None = None,
        *,
        cluster_size: int = 1,
        version: str = ZOOKEEPER_VERSION,
        heap_mb: int = 512,
        quick_start: bool = False,
        **overrides: object,
    ) -> None:
        super().__init__(version, directory, broker_id, port, heap_mb, quick_start, overrides)
        self.zookeeper_connect = zookeeper_connect
        self.cluster_size = cluster_size

    @property
    def broker_id(self) -> int:
        return self.node_id

    def properties(self) -> dict[str, str]:
        n = self.cluster_size
        settings: dict[str, object] = {
            "broker.id": self.node_id,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": self.data_dir,
            "zookeeper.connect": self.zookeeper_connect,
            "offsets.topic.replication.factor": min(3, n),
            "transaction.state.log.replication.factor": min(3, n),
            "transaction.state.log.min.isr": min(2, n),
            "group.initial.rebalance.delay.ms": 0,
            # Quicker for tests than Kafka's defaults (18 s, 5 s): a killed broker's
            # registration goes within seconds, and a stop retries controlled shutdown sooner.
            "zookeeper.session.timeout.ms": 6000,
            "controlled.shutdown.retry.backoff.ms": 1000,
        }
        return {k: _property_value(v) for k, v in settings.items()} | self.overrides


class KafkaCluster:
    """``size`` ZooKeeper-mode brokers (ids 1..size) on one ZooKeeper chroot, each in
    ``directory/broker-<id>``; ``overrides`` go to every broker."""

    def __init__(
        self,
        directory: Path | str,
        zookeeper_connect: str,
        size: int = 3,
        *,
        version: str = ZOOKEEPER_VERSION,
        heap_mb: int = 512,
        quick_start: bool = False,
        **overrides: object,
    ) -> None:
        self.directory = Path(directory)
        self.zookeeper_connect = zookeeper_connect
        self.brokers = [
            KafkaBroker(self.directory / f"broker-{i}", zookeeper_connect, i, cluster_size=size, version=version,
                        heap_mb=heap_mb, quick_start=quick_start, **overrides)
            for i in range(1, size + 1)
        ]

    @property
    def bootstrap(self) -> str:
        """Every broker's address, comma-separated."""
        return ",".join(b.bootstrap for b in self.brokers)

    def broker(self, broker_id: int) -> KafkaBroker:
        return self.brokers[broker_id - 1]

    def start(self, timeout: float = START_TIMEOUT_S) -> KafkaCluster:
        """Start every broker at once, then wait until each answers Metadata listing all of them
        (each registered, and the controller's view reached every broker); returns self."""
        deadline = time.monotonic() + timeout
        try:
            for broker in self.brokers:
                broker.launch()
            self.wait_formed(max(1.0, deadline - time.monotonic()))
        except BaseException:
            self.kill()
            raise
        return self

    def wait_formed(self, timeout: float = START_TIMEOUT_S) -> None:
        """Until every running broker's Metadata lists every running broker."""
        deadline = time.monotonic() + timeout
        running = [b for b in self.brokers if b.alive]
        expected = {b.broker_id for b in running}
        waiting = list(running)
        while waiting:
            waiting = [b for b in waiting if not b.lists(expected)]  # raises if one exited
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise KafkaStartError(f"Kafka brokers {[b.broker_id for b in waiting]} did not list brokers "
                                      f"{sorted(expected)} within {timeout}s: " + "; ".join(
                                          f"broker {b.broker_id}: {b.last_seen}, {b.log_path}" for b in waiting))
            time.sleep(0.1)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> dict[int, int | None]:
        """Stop each broker by PID, one after another (controlled shutdowns); their exit codes."""
        return {b.broker_id: b.stop(timeout) for b in self.brokers}

    def kill(self) -> None:
        for broker in self.brokers:
            broker.kill()

    def __enter__(self) -> KafkaCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def random_cluster_id() -> str:
    """A KRaft cluster id as ``StorageTool random-uuid`` prints one: 16 random bytes in URL-safe
    base64 without padding, never starting with '-' (Kafka's `Uuid.randomUuid` rule, so that the
    id cannot be taken for a command-line option). Made here: it saves a JVM start."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


class KRaftNode(_KafkaProcess):
    """One combined broker+controller KRaft node (4.4.0 by default): PLAINTEXT on ``port``, the
    controller listener on ``controller_port``, a single-voter quorum. The first start formats
    the storage (``kafka.tools.StorageTool format`` with ``cluster_id``, a fresh one by default);
    a restart finds it formatted."""

    def __init__(
        self,
        directory: Path | str,
        node_id: int = 1,
        port: int | None = None,
        controller_port: int | None = None,
        *,
        cluster_id: str | None = None,
        version: str = KRAFT_VERSION,
        heap_mb: int = 512,
        quick_start: bool = False,
        **overrides: object,
    ) -> None:
        super().__init__(version, directory, node_id, port, heap_mb, quick_start, overrides)
        self.controller_port = controller_port or free_port()
        self.cluster_id = cluster_id or random_cluster_id()

    def properties(self) -> dict[str, str]:
        settings: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": self.node_id,
            "controller.quorum.voters": f"{self.node_id}@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": self.data_dir,
            "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
        }
        return {k: _property_value(v) for k, v in settings.items()} | self.overrides

    def prepare(self) -> None:
        if (self.data_dir / "meta.properties").is_file():
            return
        result = run_kafka_tool(self.version, "kafka.tools.StorageTool",
                                ["format", "-t", self.cluster_id, "-c", str(self.config_path)], timeout=120.0)
        if result.returncode != 0:
            raise KafkaStartError(f"StorageTool format failed with code {result.returncode}:\n"
                                  f"{result.stdout}{result.stderr}")


def _tool_command(version: str, directory: Path, heap_mb: int) -> list[str]:
    """``java`` with a tool's JVM flags, ``version``'s jars and a logging configuration in
    ``directory`` (WARN and above to the current System.err, which a tool batch redirects)."""
    if uses_log4j2(version):
        log_config = directory / "log4j2.properties"
        log_config.write_text(_log4j2("WARN", "SYSTEM_ERR", follow=True))
    else:
        log_config = directory / "log4j.properties"
        log_config.write_text(_LOG4J_TOOL)
    return [java(), f"-Xms{heap_mb}m", f"-Xmx{heap_mb}m", *TOOL_JVM_FLAGS, _log_config_flag(version, log_config),
            "-cp", str(kafka_libs(version) / "*")]


def run_kafka_tool(
    version: str,
    main_class: str,
    args: Sequence[str],
    timeout: float = 120.0,
    *,
    heap_mb: int = 256,
    input: str | None = None,
    cwd: Path | str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a Kafka tool class from ``version``'s jars (``org.apache.kafka.tools.TopicCommand``,
    ``kafka.admin.ConfigCommand``, ``org.apache.kafka.tools.DeleteRecordsCommand``, ...) with
    ``args``; its output captured as text, logging at WARN to stderr. Raises
    `subprocess.TimeoutExpired` (the JVM killed) after ``timeout`` seconds."""
    with tempfile.TemporaryDirectory(prefix="kafka-tool-") as directory:
        command = [*_tool_command(version, Path(directory), heap_mb), main_class, *args]
        return subprocess.run(command, input=input, capture_output=True, text=True, timeout=timeout,
                              cwd=cwd, stdin=None if input is not None else subprocess.DEVNULL,
                              preexec_fn=terminated_with_parent())


TOOL_BATCH_SOURCE = REPO / "bench" / "kafka" / "ToolBatch.java"


def tool_batch_classes() -> Path:
    """The directory holding ``ToolBatch.class``, compiled from `TOOL_BATCH_SOURCE` with ``javac``
    into the Kafka cache the first time (one directory per version of the source)."""
    source = TOOL_BATCH_SOURCE.read_bytes()
    target = kafka_cache() / "tool-batch" / hashlib.sha256(source).hexdigest()[:16]
    if (target / "ToolBatch.class").is_file():
        return target
    javac = shutil.which("javac")
    if javac is None:
        raise KafkaNotResolvedError("javac is not on the PATH: running Kafka tools in a batch needs a JDK")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as building:
        subprocess.run([javac, "-d", building, str(TOOL_BATCH_SOURCE)], check=True, capture_output=True,
                       timeout=120)
        try:
            os.rename(building, target)  # atomic: a concurrent compilation's result is as good
        except OSError:
            if not (target / "ToolBatch.class").is_file():
                raise
        else:
            os.mkdir(building)  # for TemporaryDirectory's clean-up
    return target


def run_kafka_tools(
    version: str,
    commands: Sequence[tuple[str, Sequence[str]]],
    timeout: float = 300.0,
    *,
    heap_mb: int = 256,
) -> list[subprocess.CompletedProcess[str]]:
    """Run several tool classes (``(main_class, args)`` each) one after another in one JVM
    (``bench/kafka/ToolBatch.java``), each with its own captured stdout and stderr and the exit
    code it passes to Kafka's ``Exit``, as `run_kafka_tool` would report it, without a JVM start
    per command. What differs from separate runs is what a process counts across commands (the
    admin clients' ids, ``adminclient-N``, go on from one command to the next). Raises
    `subprocess.TimeoutExpired` after ``timeout`` seconds for the whole batch, RuntimeError when
    the JVM ends before answering every command."""
    for main_class, args in commands:
        if any("\t" in a or "\n" in a for a in (main_class, *args)):
            raise ValueError(f"tabs and line breaks cannot be passed to a tool batch: {main_class} {args}")
    lines = "".join("\t".join((main_class, *args)) + "\n" for main_class, args in commands)
    with tempfile.TemporaryDirectory(prefix="kafka-tools-") as directory:
        command = _tool_command(version, Path(directory), heap_mb)
        command[command.index("-cp") + 1] += os.pathsep + str(tool_batch_classes())
        finished = subprocess.run([*command, "ToolBatch"], input=lines, capture_output=True, text=True,
                                  timeout=timeout, preexec_fn=terminated_with_parent())
    results = []
    stray = []  # output that escaped the batch's redirection: fail rather than lose it
    for line in finished.stdout.splitlines():
        if line.startswith("RESULT "):
            _, code, out, err = line.split(" ")
            main_class, args = commands[len(results)]
            results.append(subprocess.CompletedProcess(
                [main_class, *args], int(code), base64.b64decode(out).decode(), base64.b64decode(err).decode()))
        else:
            stray.append(line)
    if stray:
        raise RuntimeError(f"the tool batch printed outside its commands' output: {stray[:5]}")
    if len(results) != len(commands):
        raise RuntimeError(f"the tool batch answered {len(results)} of {len(commands)} commands (exit "
                           f"{finished.returncode}):\n{finished.stdout[-2000:]}{finished.stderr[-4000:]}")
    return results
class KafkaToolProcess:
    """A Kafka tool class from ``version``'s jars running in the background with ``args``: its
    standard output in ``stdout.txt`` and its standard error (WARN and above) in ``stderr.txt``
    of ``directory``; stopped by its PID (SIGTERM, as a user's Ctrl-C, then SIGKILL after a
    timeout), and ended if whoever started it is killed."""

    def __init__(self, version: str, main_class: str, args: Sequence[str], directory: Path | str, *,
                 heap_mb: int = 256) -> None:
        kafka_libs(version)  # fails early, with the resolve script's name
        self.version = version
        self.main_class = main_class
        self.args = list(args)
        self.directory = Path(directory)
        self.heap_mb = heap_mb
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def stdout_path(self) -> Path:
        return self.directory / "stdout.txt"

    @property
    def stderr_path(self) -> Path:
        return self.directory / "stderr.txt"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> Self:
        """Start the JVM without waiting for anything; returns self."""
        if self.alive:
            raise RuntimeError(f"{self.main_class} is already running as PID {self.proc.pid}")  # type: ignore[union-attr]
        self.directory.mkdir(parents=True, exist_ok=True)
        command = [*_tool_command(self.version, self.directory, self.heap_mb), self.main_class, *self.args]
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(command, cwd=self.directory, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=err, start_new_session=True,
                                         preexec_fn=terminated_with_parent())
        return self

    def stdout(self) -> str:
        """What the tool printed so far."""
        try:
            return self.stdout_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM by PID (the tool's shutdown hook runs), SIGKILL if it still runs after
        ``timeout``; the exit code, None if it never ran."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
