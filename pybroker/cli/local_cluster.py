"""A local cluster on one machine: a ZooKeeper server and N ``pybroker serve`` processes.

Owns what ``pybroker cluster`` does, apart from parsing its arguments:

- **The layout** of a cluster directory ``DIR``: ``DIR/zookeeper/`` (the generated ``zoo.cfg``,
  ZooKeeper's data and ``zookeeper.log``, see `ZooKeeperServer`), ``DIR/broker-<id>/`` with the
  broker's ``server.properties``, its log directory ``data/`` and its output ``broker.log``,
  and ``DIR/cluster.json``, the manifest scripts and tests read (`LocalCluster.manifest`).
- **The brokers' configuration**: node ids 1..N on ``127.0.0.1`` ports ``FIRST..FIRST+N-1``,
  each with a Prometheus endpoint (``metrics.prometheus.port``, recorded in cluster.json for
  ``pybroker cluster status``), ``zookeeper.connect``, the defaults of a local cluster (`cluster_defaults`) and the user's
  properties (``--override``, ``--broker-override``, ``--config``: per-broker templates, see
  `pybroker.cli.cluster_overrides`), in Kafka's property names. Every start rewrites the files;
  data is kept.
- **The brokers' listeners** (`LocalCluster._resolve_listeners`): one PLAINTEXT listener on
  the broker's port, unless the user sets ``listeners`` or ``advertised.listeners``; then each
  broker's, as bound and as advertised, and the one the command talks to (`command_listener`:
  the first PLAINTEXT one, SASL_SSL with --secure), whose addresses are the bootstrap servers
  it prints and writes.
- **The processes**: checks before anything starts (ZooKeeper installed, ports free, every
  property valid, each listener port a broker's own), ZooKeeper started and stopped through `ZooKeeperServer`, one broker child
  process per node id (each in its own session, so that a terminal's Ctrl-C reaches only the
  ``pybroker cluster`` process, which then stops them in order), readiness (every broker
  registered under ``/brokers/ids``, a controller elected, and every broker answering Metadata
  with the whole cluster), watching while running (a broker that exits is reported; one
  restarted by hand with ``pybroker serve --config DIR/broker-<id>/server.properties`` is
  found by its command line and taken back into the manifest), and the stop: each broker
  SIGTERM'd in turn, the controller last, so that every one does its controlled shutdown while
  a controller is there to answer, SIGKILL after a bound, then ZooKeeper. No process is left
  behind on any path, a failed start included; if ``pybroker cluster`` is itself SIGKILLed, the
  kernel sends each child SIGTERM (`terminated_with_parent`).

Concurrency rules: the coroutines run on the one loop of ``pybroker cluster``; ZooKeeper reads
go through the asyncio `ZooKeeperClient` (never blocking the loop), the blocking ZooKeeper
start and stop run in a worker thread, and processes are polled, never waited on blockingly.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pybroker.child_process import terminated_with_parent
from pybroker.cli.cluster_overrides import LISTENER_PROPERTIES, BrokerOverrides, OverrideError
from pybroker.cli.secure_setup import LISTENER as SECURE_LISTENER
from pybroker.cli.secure_setup import SecureSetup, create_admin_user
from pybroker.client.admin import Admin, AdminError
from pybroker.client.connection import KafkaClientError
from pybroker.client.security import PLAINTEXT
from pybroker.common.cluster import Endpoint
from pybroker.common.config import ConfigError
from pybroker.server.config import BrokerConfig
from pybroker.server.unapplied_configs import unapplied_reason
from pybroker.zookeeper.client import KazooException, ZooKeeperClient, ZooKeeperConnectionError
from pybroker.zookeeper.kafka_zk_client import KafkaZkClient
from pybroker.zookeeper.server import ZooKeeperInstall, ZooKeeperServer, ZooKeeperStartError

HOST = "127.0.0.1"
DEFAULT_DIR = "pybroker-cluster"
DEFAULT_BROKERS = 3
DEFAULT_FIRST_PORT = 9092
DEFAULT_ZOOKEEPER_PORT = 2181  # clientPort of Kafka's shipped config/zookeeper.properties
MANIFEST = "cluster.json"
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0  # per broker: controlled shutdown, then a clean stop
FAILED_START_STOP_TIMEOUT_S = 5.0  # a start that failed has no controller to shut down with
ZOOKEEPER_TIMEOUT_S = 10.0
POLL_S = 0.1
WATCH_S = 0.5
RESTART_SCAN_S = 1.0
LOG_TAIL_LINES = 20


class ClusterError(Exception):
    """The cluster cannot start, or failed while starting; the message says why and what to do."""


def cluster_defaults(brokers: int) -> dict[str, str]:
    """The broker properties a local cluster of ``brokers`` brokers sets besides the managed ones.

    The internal topics ``__consumer_offsets`` and ``__transaction_state`` get Kafka's built-in
    replication factor 3 when there are three brokers or more, and the broker count below that
    (Kafka's shipped server.properties sets 1, which only suits a single broker); likewise
    ``__transaction_state``'s min.insync.replicas, Kafka's built-in 2 (at most the broker
    count). Everything else keeps the
    broker's defaults, which already are the shipped file's values (``num.partitions=1``,
    ``log.retention.hours=168``, ``group.initial.rebalance.delay.ms=0``, …): in particular
    ``default.replication.factor`` stays 1, Kafka's default, so topics get the replication
    factor their creator asks for.
    """
    return {
        "offsets.topic.replication.factor": str(min(3, brokers)),
        "transaction.state.log.replication.factor": str(min(3, brokers)),
        "transaction.state.log.min.isr": str(min(2, brokers)),
    }


def port_in_use(port: int, host: str = HOST) -> bool:
    """True if a listening socket holds ``host:port`` (a TIME_WAIT leftover does not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file ('' if there is none)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def pid_alive(pid: int) -> bool:
    """True if process ``pid`` exists and is not a zombie (an exited child its parent has not
    reaped yet counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _config_argument(args: Sequence[str]) -> str | None:
    for i, arg in enumerate(args):
        if arg == "--config" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--config="):
            return arg.partition("=")[2]
    return None


def find_serve_process(config_path: Path, exclude: Iterable[int] = ()) -> int | None:
    """The PID of a running ``pybroker serve --config <config_path>`` (relative paths resolved
    against that process's working directory), or None; Linux ``/proc`` only."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    target = config_path.resolve()
    skip = {os.getpid(), *exclude}
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) in skip:
            continue
        try:
            args = [a.decode("utf-8", "replace") for a in (entry / "cmdline").read_bytes().split(b"\0") if a]
            if "serve" not in args or not any("pybroker" in a for a in args):
                continue
            path = _config_argument(args)
            if path is None:
                continue
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        pid = int(entry.name)
        if Path(cwd, path).resolve() == target and pid_alive(pid):
            return pid
    return None


@dataclass
class LocalBroker:
    """One broker of the cluster: its id, port and directory, its listeners, and the process
    running it."""

    node_id: int
    port: int  # --port FIRST+id-1: its one listener's port, or {port} in a listeners template
    directory: Path
    proc: subprocess.Popen[bytes] | None = None
    metrics_port: int | None = None  # its Prometheus endpoint (metrics.prometheus.port), None: off
    # A broker restarted by hand (``pybroker serve --config ...``): not a child of ours.
    adopted_pid: int | None = None
    exit_reported: bool = False
    # Its listeners as bound and as advertised (advertised.listeners, else the bound ones), and
    # the one the command talks to (see `LocalCluster.command_listener`); set by LocalCluster.
    listeners: tuple[Endpoint, ...] = ()
    advertised: tuple[Endpoint, ...] = ()
    command_listener: Endpoint | None = None

    @property
    def address(self) -> str:
        """``host:port`` of the listener the command talks to (its bootstrap server)."""
        if self.command_listener is None:
            return f"{HOST}:{self.port}"
        return reachable_address(self.command_listener)

    def advertised_address(self, endpoint: Endpoint) -> str:
        """``host:port`` the broker registers for an advertised listener (no host: this machine's
        name, port 0: the listener's bound port, as the broker does)."""
        bound = (e.port for e in self.listeners if e.listener_name == endpoint.listener_name)
        return _host_port(endpoint.host or socket.getfqdn(), endpoint.port or next(bound, 0))

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log_path(self) -> Path:
        return self.directory / "broker.log"

    @property
    def child_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The PID of the process running this broker now (a child of ours or an adopted one)."""
        if self.child_running:
            assert self.proc is not None
            return self.proc.pid
        if self.adopted_pid is not None and pid_alive(self.adopted_pid):
            return self.adopted_pid
        return None


def reachable_address(endpoint: Endpoint) -> str:
    """``host:port`` a client on this machine reaches a bound listener on (a listener on every
    interface, host empty or 0.0.0.0, is reached on 127.0.0.1)."""
    host = {"": HOST, "0.0.0.0": HOST, "::": "::1"}.get(endpoint.host, endpoint.host)
    return _host_port(host, endpoint.port)


def listener_uris(endpoints: Iterable[Endpoint]) -> str:
    """Endpoints as a ``listeners`` value: ``NAME://host:port,...``."""
    return ",".join(f"{e.listener_name}://{_host_port(e.host, e.port)}" for e in endpoints)


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it is below it, else absolute."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


class LocalCluster:
    """ZooKeeper (unless ``zookeeper_connect`` names an existing ensemble) and ``brokers``
    brokers in ``directory``; progress and events are printed to ``out``.

    Raises `ZooKeeperNotInstalledError` (one line saying how to install it) when it is to start
    ZooKeeper and cannot find it, `ClusterError` for bad arguments.
    """

    def __init__(
        self,
        directory: Path | str = DEFAULT_DIR,
        brokers: int = DEFAULT_BROKERS,
        first_port: int = DEFAULT_FIRST_PORT,
        *,
        zookeeper_connect: str | None = None,
        zookeeper_port: int = DEFAULT_ZOOKEEPER_PORT,
        overrides: Iterable[str] = (),
        broker_overrides: Iterable[str] = (),
        config_file: str | Path | None = None,
        python: str = sys.executable,
        out: TextIO | None = None,
        install: ZooKeeperInstall | None = None,
        secure: SecureSetup | None = None,
        metrics: bool = True,
        metrics_port: int | None = None,
        log_format: str = "text",
    ) -> None:
        if brokers < 1:
            raise ClusterError(f"--brokers {brokers}: a cluster needs at least one broker")
        if not 1 <= first_port or first_port + brokers - 1 > 65535:
            raise ClusterError(f"--port {first_port}: ports {first_port}..{first_port + brokers - 1} are not all valid")
        if zookeeper_connect is None and not 1 <= zookeeper_port <= 65535:
            raise ClusterError(f"--zookeeper-port {zookeeper_port} is not a valid port")
        self.directory = Path(directory).resolve()
        self.brokers = [
            LocalBroker(node_id, first_port + node_id - 1, self.directory / f"broker-{node_id}")
            for node_id in range(1, brokers + 1)
        ]
        # --override, --broker-override, --config: templates expanded per broker.
        try:
            self.settings = BrokerOverrides.parse(brokers, overrides, broker_overrides, config_file)
        except OverrideError as e:
            raise ClusterError(str(e)) from None
        self.custom_listeners = any(self.settings.sets(key) for key in LISTENER_PROPERTIES)
        # --secure: SASL_SSL listeners, ACLs, an admin user (`pybroker.cli.secure_setup`)
        self.secure = secure
        self.security = secure.broker_security() if secure is not None else PLAINTEXT
        self.zookeeper: ZooKeeperServer | None = None
        if zookeeper_connect is None:
            self.zookeeper = ZooKeeperServer(self.directory / "zookeeper", zookeeper_port,
                                             install=install)
            self.zookeeper_connect = self.zookeeper.connect_string
        else:
            self.zookeeper_connect = zookeeper_connect.strip()
        for broker in self.brokers:
            self._user_sections(broker)  # a template that cannot expand fails now, not half-way
        self._resolve_listeners()
        # Each broker's Prometheus endpoint: ports FIRST..FIRST+N-1 (--metrics-port), else ports
        # free now, written into its server.properties and cluster.json (`pybroker cluster status`).
        if metrics:
            if metrics_port is not None and not 1 <= metrics_port <= 65535 - brokers + 1:
                raise ClusterError(f"--metrics-port {metrics_port}: ports {metrics_port}..{metrics_port + brokers - 1} "
                                   "are not all valid")
            taken = self.listener_ports
            for broker in self.brokers:
                broker.metrics_port = (metrics_port + broker.node_id - 1 if metrics_port is not None
                                       else _free_port(taken))
                taken.add(broker.metrics_port)
        self.log_format = log_format
        self.python = python
        self.out = out if out is not None else sys.stdout
        self.state = "new"
        self.controller_id: int | None = None
        self._zk: ZooKeeperClient | None = None
        self._kafka_zk: KafkaZkClient | None = None
        self._zookeeper_exit_reported = False

    # --- configuration ---------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.address for b in self.brokers)

    @property
    def manifest_path(self) -> Path:
        return self.directory / MANIFEST

    @property
    def bootstrap_listener(self) -> str:
        """The name of the listener `bootstrap_servers` is on (`command_listener`)."""
        listener = self.brokers[0].command_listener
        return listener.listener_name if listener is not None else "PLAINTEXT"

    @property
    def listener_ports(self) -> set[int]:
        """The ports every broker's listeners bind."""
        return {e.port for b in self.brokers for e in b.listeners}

    def _user_sections(self, broker: LocalBroker) -> list[tuple[str, dict[str, str]]]:
        """The user's properties for ``broker``, expanded, by source
        (`BrokerOverrides.sections`)."""
        try:
            return self.settings.sections(broker.node_id, broker.port, HOST)
        except OverrideError as e:
            raise ClusterError(str(e)) from None

    def _resolve_listeners(self) -> None:
        """Each broker's listeners, as bound and as advertised, and the one the command talks to.

        Without a user's ``listeners`` or ``advertised.listeners`` that is one listener on
        ``127.0.0.1:{port}`` (PLAINTEXT, SASL_SSL with --secure). With them, each broker's
        properties are read as the broker will read them (every listener check of Kafka's: names,
        protocols, the inter-broker listener advertised, ...), then the command's own checks:
        fixed ports, no port bound by two brokers (or by our ZooKeeper), no address advertised
        by two brokers for one listener. `ClusterError` (one line) for the first that fails.
        """
        for broker in self.brokers:
            if self.custom_listeners:
                try:
                    config = BrokerConfig(self.properties(broker))
                    listeners, advertised = config.listeners, config.advertised_listeners
                except ConfigError as e:
                    raise ClusterError(f"broker {broker.node_id}: {e}") from None
            else:
                name = SECURE_LISTENER if self.secure is not None else "PLAINTEXT"
                listeners = advertised = [Endpoint(name, HOST, broker.port, name)]
            broker.listeners, broker.advertised = tuple(listeners), tuple(advertised)
            broker.command_listener = self.command_listener(broker)
        if not self.custom_listeners:
            return
        first = self.bootstrap_listener
        for broker in self.brokers[1:]:
            assert broker.command_listener is not None
            name = broker.command_listener.listener_name
            if name != first:
                raise ClusterError(
                    f"broker {broker.node_id}: the command would talk to it on listener {name}, to "
                    f"broker 1 on {first}: give every broker the same listener names (a client on "
                    "one listener only learns the brokers that have it)")
        owners: dict[int, str] = {}
        if self.zookeeper is not None:
            owners[self.zookeeper.port] = "ZooKeeper's (--zookeeper-port)"
        for broker in self.brokers:
            for endpoint in broker.listeners:
                what = f"broker {broker.node_id}'s listener {endpoint.listener_name}"
                if not 1 <= endpoint.port <= 65535:
                    raise ClusterError(
                        f"{what} has port {endpoint.port}: pybroker cluster needs a fixed port "
                        "(1..65535) for every listener, e.g. {port} or {port+N}")
                if endpoint.port in owners:
                    raise ClusterError(
                        f"port {endpoint.port} is both {owners[endpoint.port]} and {what}: give "
                        "each broker ports of its own, e.g. {port} or {port+N} in listeners")
                owners[endpoint.port] = what
        advertisers: dict[tuple[str, str], int] = {}
        for broker in self.brokers:
            for endpoint in broker.advertised:
                address = broker.advertised_address(endpoint)
                other = advertisers.setdefault((endpoint.listener_name, address), broker.node_id)
                if other != broker.node_id:
                    raise ClusterError(
                        f"brokers {other} and {broker.node_id} both advertise "
                        f"{endpoint.listener_name}://{address}: each broker needs an address of "
                        "its own, e.g. {port+N} or {id} in advertised.listeners")

    def command_listener(self, broker: LocalBroker) -> Endpoint:
        """The listener the command checks ``broker`` on and lists as its bootstrap server: the
        first PLAINTEXT one; with --secure the SASL_SSL one (it logs in as the broker user)."""
        listeners = listener_uris(broker.listeners)
        if self.secure is not None:
            found = next((e for e in broker.listeners if e.listener_name == SECURE_LISTENER), None)
            if found is None:
                raise ClusterError(
                    f"broker {broker.node_id}: --secure needs the {SECURE_LISTENER} listener in "
                    f"listeners={listeners} (the command connects to it)")
            return found
        found = next((e for e in broker.listeners if e.security_protocol == "PLAINTEXT"), None)
        if found is None:
            raise ClusterError(
                f"broker {broker.node_id}: listeners={listeners} has no PLAINTEXT listener: "
                "pybroker cluster needs one to see the brokers ready (its addresses are the "
                "bootstrap servers it lists)")
        return found

    def properties(self, broker: LocalBroker) -> dict[str, str]:
        """The broker's properties, in Kafka's names: managed ones, cluster defaults, then the
        user's (`pybroker.cli.cluster_overrides`), expanded for this broker."""
        return {
            "node.id": str(broker.node_id),
            "listeners": f"PLAINTEXT://{HOST}:{broker.port}",
            "log.dirs": str(broker.data_dir),
            "zookeeper.connect": self.zookeeper_connect,
            **({"metrics.prometheus.port": str(broker.metrics_port)} if broker.metrics_port is not None else {}),
            **cluster_defaults(len(self.brokers)),
            **(self.secure.broker_properties(HOST, broker.port) if self.secure is not None else {}),
            **{key: value
               for _, values in self._user_sections(broker) for key, value in values.items()},
        }

    def render_properties(self, broker: LocalBroker) -> str:
        """``server.properties`` text for ``broker``."""
        props = self.properties(broker)
        sections = self._user_sections(broker)
        user_keys = {key for _, values in sections for key in values}
        defaults = cluster_defaults(len(self.brokers))
        lines = [
            f"# Broker {broker.node_id} of the local cluster in {self.directory}, written by `pybroker cluster`",
            "# (which rewrites this file each time it starts; the data in log.dirs is kept).",
            "# Restart this broker alone, while the cluster runs, with:",
            f"#   pybroker serve --config {broker.config_path}",
        ]
        for key in ("node.id", "listeners", "log.dirs", "zookeeper.connect", "metrics.prometheus.port"):
            if key in props and key not in user_keys:
                lines.append(f"{key}={props[key]}")
        if self.secure is not None:
            lines.append(f"# --secure (certificates and passwords in {self.secure.directory}):")
            lines += [f"{key}={value}" for key, value in self.secure.broker_properties(HOST, broker.port).items()
                      if key not in user_keys and key != "listeners"]
        kept = [key for key in defaults if key not in user_keys]
        if kept:
            lines.append("# The defaults of a local cluster (see the README):")
            lines += [f"{key}={props[key]}" for key in kept]
        for label, values in sections:  # each key under the source that set it
            lines.append(f"# {label}:")
            lines += [f"{key}={value}" for key, value in values.items()]
        return "\n".join(lines) + "\n"

    def check(self) -> list[str]:
        """Check every broker's properties and every port before anything starts; returns
        warnings (unknown properties), raises `ClusterError`."""
        warnings = []
        for broker in self.brokers:
            try:
                config = BrokerConfig(self.properties(broker))
            except ConfigError as e:
                raise ClusterError(f"broker {broker.node_id}: {e}") from None
            if broker is self.brokers[0]:
                warnings += [f"unknown broker property {key} (the brokers ignore it)" for key in config.unknown]
                warnings += [f"broker property {key} has no effect (Kafka's setting for {unapplied_reason(key)}, "
                             "which pybroker has not)" for key in config.unapplied]
        if self.zookeeper is not None and port_in_use(self.zookeeper.port):
            raise ClusterError(
                f"port {self.zookeeper.port} on {HOST} (ZooKeeper) is in use: is a cluster already running "
                f"(see {_shown(self.manifest_path)})? Choose another port with --zookeeper-port, or use the "
                f"running ZooKeeper with --zookeeper {HOST}:{self.zookeeper.port}"
            )
        listener_ports = self.listener_ports
        for broker in self.brokers:
            for endpoint in broker.listeners:
                if not port_in_use(endpoint.port, endpoint.host):
                    continue
                if not self.custom_listeners:
                    raise ClusterError(
                        f"port {broker.port} on {HOST} (broker {broker.node_id}) is in use: is a "
                        f"cluster already running (see {_shown(self.manifest_path)})? Choose other "
                        "ports with --port"
                    )
                raise ClusterError(
                    f"port {endpoint.port} on {endpoint.host or '0.0.0.0'} (broker "
                    f"{broker.node_id}, listener {endpoint.listener_name}) is in use: is a cluster "
                    f"already running (see {_shown(self.manifest_path)})? Choose other ports with "
                    "--port or in the listeners"
                )
            if broker.metrics_port is not None and (
                    port_in_use(broker.metrics_port) or broker.metrics_port in listener_ports):
                raise ClusterError(
                    f"port {broker.metrics_port} on {HOST} (broker {broker.node_id}'s metrics) is in use: choose "
                    "other ports with --metrics-port, or --no-metrics"
                )
        ours = {b.directory.name for b in self.brokers}
        if self.directory.is_dir():
            for entry in sorted(self.directory.glob("broker-*")):
                if entry.is_dir() and entry.name not in ours:
                    warnings.append(f"{_shown(entry)} is not started (--brokers {len(self.brokers)}): "
                                    "the partitions it holds stay offline")
        return warnings

    def write_configs(self) -> None:
        for broker in self.brokers:
            broker.directory.mkdir(parents=True, exist_ok=True)
            broker.config_path.write_text(self.render_properties(broker), encoding="utf-8")

    # --- the manifest ------------------------------------------------------------------------------

    def manifest(self) -> dict[str, Any]:
        """What cluster.json holds: the command's own PID and state (starting, running,
        stopping, stopped, failed), ZooKeeper's address and PID (None when not ours or not
        running), and each broker's node id, address, PID (None when not running), config,
        data directory and log file; with a user's listeners also the listener
        ``bootstrap_servers`` is on (``bootstrap_listener``) and each broker's ``listeners``
        (where this machine reaches them) and ``advertised_listeners`` (what clients are told),
        by listener name."""
        zookeeper: dict[str, Any] = {"connect": self.zookeeper_connect, "pid": None}
        if self.zookeeper is not None:
            zookeeper.update(
                pid=self.zookeeper.pid if self.zookeeper.alive else None,
                config=str(self.zookeeper.config_path),
                data_dir=str(self.zookeeper.data_dir),
                log=str(self.zookeeper.log_path),
            )
        manifest: dict[str, Any] = {
            "pid": os.getpid(),
            "state": self.state,
            "bootstrap_servers": self.bootstrap_servers,
        }
        if self.custom_listeners:
            manifest["bootstrap_listener"] = self.bootstrap_listener
        manifest.update(controller=self.controller_id, zookeeper=zookeeper, brokers=[])
        for b in self.brokers:
            entry: dict[str, Any] = {"node_id": b.node_id, "address": b.address}
            if self.custom_listeners:
                entry["listeners"] = {e.listener_name: reachable_address(e) for e in b.listeners}
                entry["advertised_listeners"] = {e.listener_name: b.advertised_address(e)
                                                 for e in b.advertised}
            entry.update(metrics_port=b.metrics_port, pid=b.pid, config=str(b.config_path),
                         data_dir=str(b.data_dir), log=str(b.log_path))
            manifest["brokers"].append(entry)
        return manifest

    def write_manifest(self, state: str | None = None) -> None:
        """Write cluster.json atomically (readers never see half a file)."""
        if state is not None:
            self.state = state
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.manifest_path.with_name(MANIFEST + ".tmp")
        tmp.write_text(json.dumps(self.manifest(), indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.manifest_path)

    # --- output ----------------------------------------------------------------------------------

    def say(self, message: str) -> None:
        try:
            print(message, file=self.out, flush=True)
        except (OSError, ValueError):
            pass  # a closed or broken output must not keep the cluster from stopping

    # --- starting --------------------------------------------------------------------------------

    def start_zookeeper(self) -> None:
        """Start our ZooKeeper (blocking: run it in a thread); `ClusterError` if it fails."""
        assert self.zookeeper is not None
        self.say(f"Starting ZooKeeper on {self.zookeeper.connect_string} (data in {_shown(self.zookeeper.data_dir)})")
        try:
            self.zookeeper.start()
        except ZooKeeperStartError as e:
            tail = log_tail(self.zookeeper.log_path)
            raise ClusterError(f"{e}" + (f"\n{tail}" if tail else "")) from None

    async def connect_zookeeper(self) -> KafkaZkClient:
        try:
            self._zk = await ZooKeeperClient.connect(
                self.zookeeper_connect, connection_timeout_ms=int(ZOOKEEPER_TIMEOUT_S * 1000)
            )
        except (ZooKeeperConnectionError, KazooException, ValueError) as e:
            raise ClusterError(f"cannot reach ZooKeeper at {self.zookeeper_connect}: {e}") from None
        self._kafka_zk = KafkaZkClient(self._zk)
        return self._kafka_zk

    async def close_zookeeper(self) -> None:
        zk, self._zk, self._kafka_zk = self._zk, None, None
        if zk is not None:
            await zk.close()

    async def _broker_ids(self) -> set[int]:
        assert self._kafka_zk is not None
        return set(await asyncio.wait_for(self._kafka_zk.get_broker_ids(), ZOOKEEPER_TIMEOUT_S))

    async def _registered_broker_ids(self) -> set[int]:
        try:
            return await self._broker_ids()
        except (TimeoutError, KazooException) as e:
            raise ClusterError(f"ZooKeeper at {self.zookeeper_connect} does not answer ({type(e).__name__})") from None

    async def wait_for_stale_registrations(self, stop: asyncio.Event) -> None:
        """Wait until no other session holds our brokers' ``/brokers/ids/<id>`` (left by brokers
        that did not stop cleanly, until ZooKeeper expires their sessions); a broker would
        otherwise refuse to start with its id in use."""
        ours = {b.node_id for b in self.brokers}
        stale = await self._registered_broker_ids() & ours
        if not stale:
            return
        session_ms = BrokerConfig(self.properties(self.brokers[0])).get("zookeeper.session.timeout.ms")
        timeout = session_ms / 1000 + 10
        self.say(f"Broker id(s) {', '.join(map(str, sorted(stale)))} still registered in ZooKeeper (a previous "
                 f"run did not stop cleanly?): waiting up to {timeout:.0f} s for their sessions to expire")
        deadline = time.monotonic() + timeout
        while stale and not stop.is_set():
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"broker id(s) {', '.join(map(str, sorted(stale)))} are registered in ZooKeeper at "
                    f"{self.zookeeper_connect} by live sessions: are brokers with these ids running "
                    "elsewhere against the same ZooKeeper?"
                )
            await _sleep_unless(stop, POLL_S * 5)
            stale = await self._registered_broker_ids() & ours

    def start_brokers(self) -> None:
        for broker in self.brokers:
            with open(broker.log_path, "ab") as log_file:
                broker.proc = subprocess.Popen(
                    [self.python, "-m", "pybroker", "serve", "--config", str(broker.config_path),
                     *(["--log-format", self.log_format] if self.log_format != "text" else [])],
                    cwd=self.directory,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # Ctrl-C in a terminal is for us; we stop them in order
                    preexec_fn=terminated_with_parent(),  # and if we are killed, they stop themselves
                )
            broker.adopted_pid = None
            broker.exit_reported = False

    def _exited_during_start(self) -> ClusterError | None:
        for broker in self.brokers:
            if broker.proc is not None and broker.proc.poll() is not None:
                tail = log_tail(broker.log_path)
                return ClusterError(
                    f"broker {broker.node_id} exited with code {broker.proc.returncode} while starting; "
                    f"the end of {_shown(broker.log_path)}:\n{tail}"
                )
        return None

    async def _answers_with_whole_cluster(self, broker: LocalBroker, ids: set[int]) -> bool:
        try:
            async with Admin(broker.address, "pybroker-cluster", retry_timeout=1.0, request_timeout=5.0,
                             security=self.security) as admin:
                return ids <= {node.node_id for node in await admin.brokers()}
        except (OSError, TimeoutError, KafkaClientError, AdminError):
            return False

    async def wait_until_ready(self, stop: asyncio.Event, timeout: float = READY_TIMEOUT_S) -> bool:
        """Wait until every broker is registered, a controller is elected and every broker
        answers Metadata with all of ours; False if ``stop`` was set first. `ClusterError` if a
        broker exits or the deadline passes (naming what is missing)."""
        assert self._kafka_zk is not None
        ours = {b.node_id for b in self.brokers}
        deadline = time.monotonic() + timeout
        missing = "every broker's registration"
        while not stop.is_set():
            error = self._exited_during_start()
            if error is not None:
                raise error
            try:
                registered = await self._broker_ids()
                controller = await asyncio.wait_for(self._kafka_zk.get_controller_id(), ZOOKEEPER_TIMEOUT_S)
            except (TimeoutError, KazooException) as e:
                registered, controller = set(), None
                missing = f"ZooKeeper at {self.zookeeper_connect} ({type(e).__name__})"
            else:
                if not ours <= registered:
                    missing = "the registration of broker(s) " + ", ".join(map(str, sorted(ours - registered)))
                elif controller is None:
                    missing = "a controller"
                else:
                    answers = await asyncio.gather(*(self._answers_with_whole_cluster(b, ours) for b in self.brokers))
                    if all(answers):
                        self.controller_id = controller
                        return True
                    slow = [str(b.node_id) for b, ok in zip(self.brokers, answers, strict=True) if not ok]
                    missing = "Metadata with the whole cluster from broker(s) " + ", ".join(slow)
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"the cluster was not ready within {timeout:.0f} s: still waiting for {missing}; "
                    f"see the logs in {_shown(self.directory)}"
                )
            await _sleep_unless(stop, POLL_S)
        return False

    def print_summary(self) -> None:
        rows: list[tuple[str, str, int | None, Path, LocalBroker | None]] = []
        if self.zookeeper is not None:
            zookeeper = self.zookeeper
            rows.append(("ZooKeeper", zookeeper.connect_string, zookeeper.pid, zookeeper.log_path,
                         None))
        for b in self.brokers:
            rows.append((f"broker {b.node_id}", b.address, b.pid, b.log_path, b))
        if self.zookeeper is None:
            self.say(f"ZooKeeper: {self.zookeeper_connect}")
        for name, address, pid, log_path, broker in rows:
            self.say(f"{name:<10} {address:<16} pid {pid!s:<8} log {_shown(log_path)}")
            if self.custom_listeners and broker is not None:  # under it, every listener it has
                advertised = ("" if broker.advertised == broker.listeners
                              else f"; advertised {listener_uris(broker.advertised)}")
                self.say(f"{'':<10} listeners {listener_uris(broker.listeners)}{advertised}")
        self.say(f"Controller: broker {self.controller_id}")
        self.say(f"Bootstrap servers: {self.bootstrap_servers}")
        if self.custom_listeners:  # and on each other listener
            names = dict.fromkeys(e.listener_name for b in self.brokers for e in b.listeners)
            for name in names:
                if name != self.bootstrap_listener:
                    self.say(f"Bootstrap servers ({name}): " + ",".join(
                        reachable_address(e) for b in self.brokers for e in b.listeners
                        if e.listener_name == name))
        if any(b.metrics_port is not None for b in self.brokers):
            self.say("Prometheus metrics: " + ", ".join(f"http://{HOST}:{b.metrics_port}/metrics" for b in self.brokers)
                     + f"; live view: pybroker cluster status --dir {_shown(self.directory)}")
        self.say(f"PIDs, configs and logs: {_shown(self.manifest_path)}. "
                 "Ctrl-C stops the brokers (controlled shutdown), then ZooKeeper.")
        if self.secure is not None:
            self.say(self.secure.usage_line(self.bootstrap_servers))

    async def create_secure_clients(self) -> None:
        """--secure: the admin user (AlterUserScramCredentials, as the broker user) and the client files."""
        if self.secure is None:
            return
        try:
            await create_admin_user(self.bootstrap_servers, self.secure)
        except (OSError, TimeoutError, KafkaClientError, AdminError) as e:
            raise ClusterError(f"--secure: could not create the admin user: {e}") from None
        self.secure.write_client_files(self.bootstrap_servers)

    # --- running ---------------------------------------------------------------------------------

    def poll_processes(self, scan_for_restarts: bool) -> bool:
        """Report brokers that exited and find brokers restarted by hand; True if the manifest
        changed."""
        changed = False
        for broker in self.brokers:
            if broker.proc is not None and broker.proc.poll() is not None and not broker.exit_reported:
                broker.exit_reported = True
                changed = True
                self.say(f"Broker {broker.node_id} (pid {broker.proc.pid}) exited with code {broker.proc.returncode}; "
                         f"restart it alone with: pybroker serve --config {_shown(broker.config_path)}")
            if broker.adopted_pid is not None and not pid_alive(broker.adopted_pid):
                self.say(f"Broker {broker.node_id} (pid {broker.adopted_pid}) stopped")
                broker.adopted_pid = None
                changed = True
            if scan_for_restarts and broker.pid is None:
                children = [b.proc.pid for b in self.brokers if b.proc is not None]
                pid = find_serve_process(broker.config_path, exclude=children)
                if pid is not None:
                    broker.adopted_pid = pid
                    changed = True
                    self.say(f"Broker {broker.node_id} is running again (pid {pid})")
        zookeeper = self.zookeeper
        if zookeeper is not None and zookeeper.proc is not None and not zookeeper.alive and not self._zookeeper_exit_reported:
            self._zookeeper_exit_reported = True
            changed = True
            self.say(f"ZooKeeper (pid {zookeeper.pid}) exited with code {zookeeper.proc.returncode}; "
                     f"see {_shown(zookeeper.log_path)}")
        return changed

    async def watch(self, stop: asyncio.Event) -> None:
        """Until ``stop`` is set: report process exits, restarts and controller moves, keeping
        cluster.json current."""
        next_scan = 0.0
        while not stop.is_set():
            now = time.monotonic()
            scan = now >= next_scan
            if scan:
                next_scan = now + RESTART_SCAN_S
            changed = self.poll_processes(scan)
            controller = await self._current_controller(timeout=1.0)
            if controller is not None and controller != self.controller_id:
                self.say(f"Controller: broker {controller} (was broker {self.controller_id})")
                self.controller_id = controller
                changed = True
            if changed:
                self.write_manifest()
            await _sleep_unless(stop, WATCH_S)

    # --- stopping --------------------------------------------------------------------------------

    async def _current_controller(self, timeout: float = 2.0) -> int | None:
        """The elected controller, or None when there is none or ZooKeeper does not answer."""
        if self._kafka_zk is None:
            return None
        try:
            return await asyncio.wait_for(self._kafka_zk.get_controller_id(), timeout)
        except (TimeoutError, KazooException):
            return None

    async def stop(self, graceful: bool = True, force: Callable[[], bool] = lambda: False) -> None:
        """Stop every broker (SIGTERM, one at a time, the controller last; SIGKILL after the
        bound, or at once when ``force()`` turns true), then ZooKeeper. Safe on any partial
        start; ``graceful=False`` (a failed start) gives each broker a short bound only."""
        if graceful:
            self.poll_processes(scan_for_restarts=True)  # a broker restarted just now is ours too
        running = [b for b in self.brokers if b.pid is not None]
        if running:
            controller = await self._current_controller() or self.controller_id
            running.sort(key=lambda b: (b.node_id == controller, b.node_id))
        bound = STOP_TIMEOUT_S if graceful else FAILED_START_STOP_TIMEOUT_S
        for broker in running:
            await self._stop_broker(broker, bound, force)
        for broker in self.brokers:  # reap children that exited on their own
            if broker.proc is not None and broker.proc.poll() is None:
                broker.proc.kill()
            if broker.proc is not None:
                broker.proc.wait()
        await self.close_zookeeper()
        if self.zookeeper is not None and self.zookeeper.alive:
            self.say(f"Stopping ZooKeeper (pid {self.zookeeper.pid})")
            if force():
                self.zookeeper.kill()
            else:
                await asyncio.to_thread(self.zookeeper.stop)
        elif self.zookeeper is not None and self.zookeeper.proc is not None:
            self.zookeeper.stop()  # reaps it

    async def _stop_broker(self, broker: LocalBroker, bound: float, force: Callable[[], bool]) -> None:
        pid = broker.pid
        if pid is None:
            return
        self.say(f"Stopping broker {broker.node_id} (pid {pid})")
        child = broker.proc if broker.child_running else None
        killed = force()
        if not _signal(pid, signal.SIGKILL if killed else signal.SIGTERM):
            return
        deadline = time.monotonic() + bound
        while (child.poll() is None) if child is not None else pid_alive(pid):
            if not killed and (force() or time.monotonic() > deadline):
                if not force():
                    self.say(f"Broker {broker.node_id} did not stop within {bound:.0f} s: killing it")
                _signal(pid, signal.SIGKILL)
                killed = True
            await asyncio.sleep(0.05)
        if child is not None and child.returncode not in (0, -signal.SIGTERM, -signal.SIGKILL):
            self.say(f"Broker {broker.node_id} exited with code {child.returncode}; see {_shown(broker.log_path)}")
        if broker.adopted_pid == pid:
            broker.adopted_pid = None


def _free_port(taken: set[int]) -> int:
    """A port free on ``HOST`` now, not in ``taken``."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((HOST, 0))
            port = int(s.getsockname()[1])
        if port not in taken:
            return port


def _signal(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        pass


async def run_cluster(
    cluster: LocalCluster, stop: asyncio.Event, force: Callable[[], bool], err: TextIO | None = None
) -> int:
    """Start ``cluster``, print where everything is, run until ``stop`` is set, then stop it
    all; the exit code. A start that fails is reported on ``err`` (default stderr) before
    whatever did start is stopped again, and gives 1. `ClusterError` if the checks made before
    anything starts fail."""
    for warning in cluster.check():
        cluster.say(f"Warning: {warning}")
    started = failed = False
    try:
        cluster.write_configs()
        cluster.write_manifest("starting")
        if cluster.zookeeper is not None:
            await asyncio.to_thread(cluster.start_zookeeper)
            cluster.write_manifest()
        if stop.is_set():
            return 0
        await cluster.connect_zookeeper()
        await cluster.wait_for_stale_registrations(stop)
        if stop.is_set():
            return 0
        if cluster.custom_listeners:
            where = f"{cluster.bootstrap_servers} and their other listeners"
        else:
            where = f"{HOST} ports {cluster.brokers[0].port}-{cluster.brokers[-1].port}"
        cluster.say(f"Starting {len(cluster.brokers)} broker(s) on {where} "
                    f"(data in {_shown(cluster.directory)})")
        cluster.start_brokers()
        cluster.write_manifest()
        if not await cluster.wait_until_ready(stop):
            return 0
        await cluster.create_secure_clients()
        started = True
        cluster.print_summary()  # before the manifest says "running": whoever waits for it can read both
        cluster.write_manifest("running")
        await cluster.watch(stop)
    except ClusterError as e:
        failed = True
        print(f"pybroker cluster: {e}", file=err if err is not None else sys.stderr, flush=True)
    finally:
        cluster.write_manifest("stopping")
        await cluster.stop(graceful=started, force=force)
        cluster.write_manifest("failed" if failed else "stopped")
        if started:
            cluster.say("Stopped.")
    return 1 if failed else 0
