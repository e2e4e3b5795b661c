"""A local pybroker cluster for the benchmarks: one ZooKeeper server and N broker processes.

Owns starting ZooKeeper for a bench script (``start_zookeeper``: the Debian server through
``pybroker.zookeeper.server.ZooKeeperServer`` on a free loopback port; one per script, each cluster
under a chroot of its own), the ``LocalCluster`` of N ``python -m pybroker serve`` processes
(node ids 1..N, each a ``bench.brokers.Broker``: own process group, own data dir and port, stopped
by PID), what the scripts ask of a cluster through the wire (Metadata, CreateTopics with a replica
assignment, ListOffsets), signals to one broker (SIGKILL, SIGTERM, SIGSTOP/SIGCONT) and the CPU
and memory of the brokers summed over all of them.

Kept small on purpose: if a ``pybroker cluster`` command lands, ``LocalCluster.start`` can run it
instead. Every call blocks; the wire calls run their own event loop (``asyncio.run``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.brokers import (
    REPO,
    Broker,
    broker_command,
    broker_env,
    free_port,
    group_run_seconds,
    kb_to_mb,
    proc_status_kb,
)

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from pybroker.client.connection import BrokerConnection  # noqa: E402
from pybroker.protocol.api_keys import ApiKey  # noqa: E402
from pybroker.protocol.errors import ErrorCode  # noqa: E402
from pybroker.protocol.messages import (  # noqa: E402
    CreateTopicsRequest,
    ListOffsetsRequest,
    MetadataRequest,
)
from pybroker.zookeeper.server import ZooKeeperServer  # noqa: E402

KAFKA_SESSION_TIMEOUT_MS = 18000  # zookeeper.session.timeout.ms, Kafka's default since 2.5


def start_zookeeper(directory: Path, tick_ms: int = 2000, max_session_timeout_ms: int = 60000) -> ZooKeeperServer:
    """A ZooKeeper server on a free 127.0.0.1 port, data under ``directory``, running. ``tick_ms``
    is ZooKeeper's tickTime (the sample config's 2000 by default): sessions expire at most one tick
    after their timeout. Sessions from 2 ticks to ``max_session_timeout_ms`` are granted."""
    server = ZooKeeperServer(directory, free_port(), tick_time_ms=tick_ms, min_session_timeout_ms=2 * tick_ms,
                             max_session_timeout_ms=max_session_timeout_ms)
    return server.start()


@dataclass
class PartitionState:
    """A partition as a broker's Metadata answer shows it."""

    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]


@dataclass
class Node:
    """One broker of the cluster."""

    node_id: int
    port: int
    data_dir: Path
    process: Broker | None = None
    paused: bool = False

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.alive()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid


class LocalCluster:
    """``nodes`` pybroker processes on ZooKeeper ``zk_connect`` (give it a chroot of its own).

    ``overrides`` are broker properties for every node (``zookeeper.session.timeout.ms`` and so
    on); ``add_repo_to_pythonpath`` puts the checkout on the brokers' PYTHONPATH (see
    ``bench.brokers.pybroker_import``).
    """

    def __init__(self, zk_connect: str, workdir: Path, nodes: int = 3, overrides: dict[str, object] | None = None,
                 python: str = sys.executable, add_repo_to_pythonpath: bool = True) -> None:
        self.zk_connect = zk_connect
        self.workdir = workdir
        self.overrides = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (overrides or {}).items()}
        self.python = python
        self.env = broker_env("pybroker", add_repo_to_pythonpath)
        self.nodes = [Node(i, free_port(), workdir / f"broker-{i}" / "data") for i in range(1, nodes + 1)]

    # --- life -------------------------------------------------------------------------------------

    def command(self, node: Node) -> list[str]:
        cmd = broker_command("pybroker", node.port, node.data_dir, None, self.python)  # type: ignore[arg-type]
        settings = {"node.id": str(node.node_id), "zookeeper.connect": self.zk_connect, **self.overrides}
        for key, value in settings.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def start_node(self, node: Node, timeout: float = 60.0) -> float:
        """Start (or restart) one broker on its port and data dir; seconds until its port opens."""
        if node.alive:
            raise RuntimeError(f"broker {node.node_id} is already running")
        node.data_dir.mkdir(parents=True, exist_ok=True)
        log = node.data_dir.parent / "broker.log"
        node.process = Broker(self.command(node), self.env, node.data_dir.parent, log)
        node.paused = False
        return node.process.wait_ready(node.port, timeout)

    def start(self, timeout: float = 60.0) -> float:
        """Start every broker, then wait until each answers Metadata with all of them and a
        controller; the seconds it took."""
        t0 = time.perf_counter()
        try:
            for node in self.nodes:
                node.data_dir.mkdir(parents=True, exist_ok=True)
                node.process = Broker(self.command(node), self.env, node.data_dir.parent,
                                      node.data_dir.parent / "broker.log")
            for node in self.nodes:
                assert node.process is not None
                node.process.wait_ready(node.port, max(1.0, timeout - (time.perf_counter() - t0)))
            self.wait_formed(max(1.0, timeout - (time.perf_counter() - t0)))
        except BaseException:
            self.stop()
            raise
        return time.perf_counter() - t0

    def wait_formed(self, timeout: float = 60.0) -> None:
        """Until every running, unpaused broker sees every running broker and a controller."""
        deadline = time.monotonic() + timeout
        expected = {n.node_id for n in self.nodes if n.alive}
        last: object = None
        while time.monotonic() < deadline:
            exited = [n for n in self.nodes if n.node_id in expected and not n.alive]
            if exited:
                raise RuntimeError("broker(s) exited while the cluster formed: " + ", ".join(
                    f"{n.node_id} (exit code {n.process.proc.returncode})" for n in exited  # type: ignore[union-attr]
                ) + "\n" + self.log_tails())
            try:
                views = [self.metadata(n) for n in self.nodes if n.alive and not n.paused]
                if all({b.node_id for b in v.brokers} == expected and v.controller_id in expected for v in views):
                    return
                last = [({b.node_id for b in v.brokers}, v.controller_id) for v in views]
            except Exception as exc:  # not up yet
                last = exc
            time.sleep(0.1)
        raise RuntimeError(f"cluster not formed after {timeout:.0f}s: {last!r}\n{self.log_tails()}")

    def stop(self, grace: float = 5.0) -> dict[int, int | None]:
        """Stop every broker by PID: SIGCONT to paused ones, SIGTERM to all at once, SIGKILL to
        those still running after ``grace`` s; their exit codes."""
        for node in self.nodes:
            if node.alive and node.paused:
                self.resume(node)
        for node in self.nodes:
            if node.alive:
                assert node.process is not None
                node.process.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while any(n.alive for n in self.nodes) and time.monotonic() < deadline:
            time.sleep(0.05)
        codes = {}
        for node in self.nodes:
            if node.process is not None:
                codes[node.node_id] = node.process.stop(grace=0.5)
        return codes

    def remove_data(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- one broker -----------------------------------------------------------------------------

    def node(self, node_id: int) -> Node:
        return self.nodes[node_id - 1]

    def signal(self, node_id: int, sig: int) -> float:
        """Send ``sig`` to broker ``node_id`` by PID; the ``time.monotonic()`` right after."""
        os.kill(self.node(node_id).pid, sig)
        return time.monotonic()

    def kill(self, node_id: int) -> float:
        """SIGKILL (kill -9); the monotonic time of the kill."""
        t = self.signal(node_id, signal.SIGKILL)
        self.node(node_id).process.proc.wait(10)  # type: ignore[union-attr]
        return t

    def terminate(self, node_id: int) -> float:
        """SIGTERM (a clean stop: controlled shutdown); the monotonic time it was sent."""
        return self.signal(node_id, signal.SIGTERM)

    def pause(self, node_id: int) -> None:
        """SIGSTOP: the broker stays registered (until its ZooKeeper session expires) and its
        sockets accept connections, but it answers nothing."""
        self.signal(node_id, signal.SIGSTOP)
        self.node(node_id).paused = True

    def resume(self, node: Node | int) -> None:
        node = node if isinstance(node, Node) else self.node(node)
        os.kill(node.pid, signal.SIGCONT)
        node.paused = False

    # --- figures --------------------------------------------------------------------------------

    def cpu_by_node(self) -> dict[int, float]:
        """CPU seconds of each running broker's process group (scheduler run time, ns resolution)."""
        return {n.node_id: group_run_seconds(n.pid) for n in self.nodes if n.alive}

    def cpu_seconds(self) -> float:
        """CPU seconds of every running broker, summed."""
        return sum(self.cpu_by_node().values())

    def rss_mb(self, key: str = "VmRSS") -> dict[int, float]:
        """``key`` (VmRSS, VmHWM) of each running broker, in MB."""
        out = {}
        for n in self.nodes:
            if n.alive:
                try:
                    out[n.node_id] = kb_to_mb(proc_status_kb(n.pid, key))
                except (OSError, KeyError):
                    pass
        return out

    def log_tails(self, n: int = 3000) -> str:
        return "\n".join(f"--- broker {node.node_id}:\n{node.process.log_tail(n)}"
                         for node in self.nodes if node.process is not None)

    # --- the wire -------------------------------------------------------------------------------

    def bootstrap(self, exclude: tuple[int, ...] = ()) -> str:
        """Addresses of the running, unpaused brokers (minus ``exclude``), comma-separated."""
        return ",".join(n.address for n in self.nodes if n.alive and not n.paused and n.node_id not in exclude)

    def any_node(self, exclude: tuple[int, ...] = ()) -> Node:
        return next(n for n in self.nodes if n.alive and not n.paused and n.node_id not in exclude)

    def metadata(self, node: Node | None = None, topics: list[str] | None = None) -> Any:
        """A Metadata answer of ``node`` (default: any running one) for ``topics`` ([] = none)."""
        target = node or self.any_node()
        request = MetadataRequest(
            topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False)
        return _run(_send(target.port, ApiKey.METADATA, request))

    def controller(self, node: Node | None = None) -> int:
        return int(self.metadata(node, []).controller_id)

    def partitions(self, topic: str, node: Node | None = None) -> dict[int, PartitionState]:
        md = self.metadata(node, [topic])
        out = {}
        for t in md.topics:
            for p in t.partitions:
                out[p.partition_index] = PartitionState(p.leader_id, p.leader_epoch, list(p.replica_nodes),
                                                        sorted(p.isr_nodes), list(p.offline_replicas or []))
        return out

    def create_topic(self, name: str, assignment: list[list[int]], configs: dict[str, str] | None = None,
                     timeout: float = 30.0) -> None:
        """CreateTopics with an explicit replica assignment (``assignment[p]`` = partition p's
        replicas, the first the preferred leader), then wait until every running broker's
        Metadata shows each partition led by its first replica with a full ISR."""
        topic = CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=-1, replication_factor=-1,
            assignments=[CreateTopicsRequest.CreatableReplicaAssignment(partition_index=p, broker_ids=list(r))
                         for p, r in enumerate(assignment)],
            configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])
        response = _run(_send(self.any_node().port, ApiKey.CREATE_TOPICS,
                              CreateTopicsRequest(topics=[topic], timeout_ms=int(timeout * 1000), validate_only=False),
                              timeout=timeout + 5))
        result = response.topics[0]
        if result.error_code != ErrorCode.NONE:
            raise RuntimeError(f"CreateTopics {name}: error {result.error_code} {result.error_message}")
        deadline = time.monotonic() + timeout
        while True:
            try:
                views = [self.partitions(name, n) for n in self.nodes if n.alive and not n.paused]
                if all(len(v) == len(assignment) and all(
                        v[p].leader == r[0] and sorted(v[p].isr) == sorted(r) for p, r in enumerate(assignment))
                       for v in views):
                    return
            except Exception:  # not known everywhere yet
                views = []
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {name} not led with a full ISR after {timeout:.0f}s: {views}")
            time.sleep(0.05)

    def end_offsets(self, topic: str, partitions: int = 1) -> dict[int, int]:
        """Each partition's high watermark, asked of its leader."""
        state = self.partitions(topic)
        out = {}
        for p in range(partitions):
            request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
                name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=p, timestamp=-1)])])
            response = _run(_send(self.node(state[p].leader).port, ApiKey.LIST_OFFSETS, request))
            answer = response.topics[0].partitions[0]
            if answer.error_code != ErrorCode.NONE:
                raise RuntimeError(f"ListOffsets {topic}-{p}: error {answer.error_code}")
            out[p] = answer.offset
        return out


def pick_roles(cluster: LocalCluster) -> tuple[int, int, list[int]]:
    """(controller, leader, followers) for a topic placed so that its leader is not the controller
    (the controller's own work stays off the leader): the leader is the lowest other node id."""
    controller = cluster.controller()
    others = [n.node_id for n in cluster.nodes if n.node_id != controller]
    leader = others[0]
    followers = [n.node_id for n in cluster.nodes if n.node_id != leader]
    return controller, leader, followers


async def _send(port: int, api_key: int, request: Any, timeout: float = 10.0) -> Any:
    connection = BrokerConnection("127.0.0.1", port, "bench-cluster")
    try:
        await connection.connect(timeout)
        return await connection.send(api_key, request, timeout=timeout)
    finally:
        await connection.close()


def _run(coro: Any) -> Any:
    return asyncio.run(coro)
