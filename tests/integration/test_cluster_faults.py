"""Faults and bad input in cluster mode: broker processes on a real ZooKeeper, made to lose it.

What a user sees: a broker whose ZooKeeper session expires (its process stopped for longer than
``zookeeper.session.timeout.ms``) registers again with a new broker epoch, gets its state from
the controller and serves again; a controller whose session expires gives up the role, another
broker takes it with a higher epoch, and brokers refuse the old controller's epoch
(STALE_CONTROLLER_EPOCH) and requests meant for a broker's earlier registration
(STALE_BROKER_EPOCH), on the wire; a short loss of ZooKeeper (stopped for less than the session
timeout, or restarted) breaks nothing; and a broker that cannot join (its node id registered by
a live broker, a data directory of another cluster, no ZooKeeper) exits at once with one clear
line. Every process a test starts is stopped by its PID (``BrokerProcess``, ``ZooKeeperProcess``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import datetime
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from pybroker.client.connection import BrokerConnection
from pybroker.common.cluster import BrokerEndpoint, LiveBroker, PartitionState
from pybroker.common.errors import ErrorCode
from pybroker.controller import wire
from pybroker.controller.requests import LeaderAndIsr, UpdateMetadata
from pybroker.types import TopicPartition
from pybroker.zookeeper.znodes import uuid_from_base64
from tests.conftest import BrokerProcess, free_port, wait_until
from tests.integration.clients import consume_confluent, produce_confluent
from tests.zookeeper import ZooKeeperProcess, chroot_for

SESSION_TIMEOUT_MS = 3000
# A stopped broker's session expires SESSION_TIMEOUT_MS after its last heartbeat, rounded up to
# ZooKeeper's tick; then the controller needs a moment to notice.
EXPIRY_WAIT_S = SESSION_TIMEOUT_MS / 1000 + 10

# What a broker logs when another broker or ZooKeeper goes away under it: the controller's
# channel to a stopped broker times out, a client connection is cut.
CHANNEL_ERRORS = r"(Controller request|channel|to broker \d+).*(failed|timed out|Timeout|refused)"


def start_brokers(tmp_path: Path, connect: str, nodes: tuple[int, ...], **overrides: object) -> list[BrokerProcess]:
    brokers = [
        BrokerProcess(tmp_path / f"broker-{node}", **{
            "node.id": node,
            "zookeeper.connect": connect,
            "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 1,
            "controller.socket.timeout.ms": 3000,
            "controlled.shutdown.enable": False,
            **overrides,
        })
        for node in nodes
    ]
    for broker in brokers:
        broker.start()
    wait_for_cluster(brokers, nodes)
    return brokers


@pytest.fixture
def brokers_of(tmp_path: Path) -> Iterator[object]:
    """``brokers_of(connect, nodes)``: start brokers; every one is killed (by PID) at the end."""
    started: list[BrokerProcess] = []

    def start(connect: str, nodes: tuple[int, ...], **overrides: object) -> list[BrokerProcess]:
        brokers = start_brokers(tmp_path, connect, nodes, **overrides)
        started.extend(brokers)
        return brokers

    yield start
    for broker in started:
        if broker.proc is not None and broker.proc.poll() is None:
            os.kill(broker.proc.pid, signal.SIGCONT)  # a test that failed while it was stopped
        broker.kill()


@contextmanager
def zk_client(connect: str) -> Iterator[KazooClient]:
    client = KazooClient(hosts=connect, timeout=10)
    client.start(timeout=10)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    """SIGSTOP a process this test started, and SIGCONT it when the block ends."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def controller_id(zk: KazooClient) -> int | None:
    if not zk.exists("/controller"):
        return None
    return json.loads(zk.get("/controller")[0])["brokerid"]


def broker_epoch(zk: KazooClient, node: int) -> int | None:
    stat = zk.exists(f"/brokers/ids/{node}")
    return stat.czxid if stat else None


def partition_state(zk: KazooClient, topic: str, partition: int) -> dict[str, object] | None:
    path = f"/brokers/topics/{topic}/partitions/{partition}/state"
    return json.loads(zk.get(path)[0]) if zk.exists(path) else None


def wait_for_cluster(brokers: list[BrokerProcess], nodes: tuple[int, ...]) -> None:
    """Until every broker's metadata lists ``nodes`` (at least) and a live controller: a broker serves as
    soon as it has registered, before the controller's first UpdateMetadata (as Kafka's do), and
    an admin client would meanwhile find no controller, or not all the brokers."""
    def known(broker: BrokerProcess) -> bool:
        md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=5)
        return set(nodes) <= set(md.brokers) and md.controller_id in md.brokers

    for broker in brokers:
        wait_until(lambda b=broker: known(b), 15, message=f"broker {broker.port} knows brokers {nodes}")


def create_topic(brokers: list[BrokerProcess], name: str, assignment: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in brokers)})
    admin.create_topics([NewTopic(name, len(assignment), replica_assignment=assignment)])[name].result(30)


def leader_in_metadata(broker: BrokerProcess, topic: str, partition: int) -> int | None:
    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(topic, timeout=5)
    found = md.topics[topic].partitions.get(partition)
    return found.leader if found is not None and found.error is None else None


def produce_and_consume(bootstrap: str, topic: str, partition: int, values: list[bytes], offset: int) -> None:
    """Produce ``values`` (acks=all), then read them back from ``offset``."""
    produce_confluent(bootstrap, topic, [(None, v) for v in values], partition, acks="all",
                      **{"message.timeout.ms": 20000})
    records = consume_confluent(bootstrap, topic, len(values), partition, offset, timeout=20)
    assert [(o, v) for o, _, v, _ in records] == [(offset + i, v) for i, v in enumerate(values)]


def send_control(broker: BrokerProcess, request: LeaderAndIsr | UpdateMetadata) -> ErrorCode:
    """Send a controller request on the wire (LeaderAndIsr v5, UpdateMetadata v7); its error."""
    async def send() -> ErrorCode:
        connection = BrokerConnection("127.0.0.1", broker.port, "stale-controller")
        try:
            await connection.connect(10)
            api_key, version, message = wire.to_wire(request)
            answer = await connection.send(api_key, message, version=version, timeout=10)
        finally:
            await connection.close()
        return ErrorCode(answer.error_code)

    return asyncio.run(send())


def live_broker(broker: BrokerProcess, node: int) -> LiveBroker:
    return LiveBroker(node, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", broker.port),))


def control_requests(
    zk: KazooClient, topic: str, node: int, broker: BrokerProcess, *, controller_epoch: int, epoch: int,
) -> tuple[LeaderAndIsr, UpdateMetadata]:
    """A LeaderAndIsr and an UpdateMetadata for ``node``'s partition 0 of ``topic`` as a
    controller of ``controller_epoch`` would send them to broker epoch ``epoch``: the current
    state with the leader epoch bumped (a change the broker would apply if it came from the
    controller)."""
    state = partition_state(zk, topic, 0)
    assert state is not None
    topic_id = uuid_from_base64(json.loads(zk.get(f"/brokers/topics/{topic}")[0])["topic_id"])
    tp = TopicPartition(topic, 0)
    partition = PartitionState(tp, controller_epoch, node, int(state["leader_epoch"]) + 1, [node],
                               zk.exists(f"/brokers/topics/{topic}/partitions/0/state").version, [node])
    leader_and_isr = LeaderAndIsr(node, controller_epoch, epoch, [partition], {topic: topic_id},
                                  [live_broker(broker, node)])
    update_metadata = UpdateMetadata(node, controller_epoch, epoch, [partition], [live_broker(broker, node)],
                                     {topic: topic_id})
    return leader_and_isr, update_metadata


# --- session expiry --------------------------------------------------------------------------


def test_a_broker_whose_session_expires_registers_again_and_serves(zookeeper, brokers_of, request, topic_name):
    connect = chroot_for(zookeeper, request.node.name)
    brokers = brokers_of(connect, (1, 2))
    with zk_client(connect) as zk:
        active = wait_until(lambda: controller_id(zk), message="a controller")
        victim = 3 - active
        process = brokers[victim - 1]
        create_topic(brokers, topic_name, [[victim]])
        wait_until(lambda: leader_in_metadata(process, topic_name, 0) == victim, message="the victim leads")
        produce_and_consume(process.bootstrap, topic_name, 0, [b"before"], 0)
        old_epoch = broker_epoch(zk, victim)
        before = partition_state(zk, topic_name, 0)
        assert old_epoch is not None and before is not None and before["leader"] == victim

        with stopped(process.proc.pid):
            # The session expires: the registration goes, and the controller takes the
            # partition's leadership away (its only replica is gone: leader -1, ISR kept).
            wait_until(lambda: broker_epoch(zk, victim) is None, EXPIRY_WAIT_S, message="the session expires")
            wait_until(lambda: partition_state(zk, topic_name, 0)["leader"] == -1, 10,
                       message="the controller sees the broker gone")
        mark = process.log_mark()

        new_epoch = wait_until(lambda: broker_epoch(zk, victim), 15, message="the broker registers again")
        assert new_epoch > old_epoch
        process.wait_for_log(r"ZooKeeper session of broker \d+ expired", since=0)
        process.wait_for_log(r"ZooKeeper session expired and was re-created", since=mark)
        # The controller sends it its state again: it leads its partition, at a new leader epoch.
        after = wait_until(lambda: (s := partition_state(zk, topic_name, 0))["leader"] == victim and s, 15,
                           message="the broker leads again")
        assert after["leader_epoch"] > before["leader_epoch"] and after["isr"] == [victim]
        assert controller_id(zk) == active
        wait_until(lambda: leader_in_metadata(process, topic_name, 0) == victim, 15,
                   message="the broker's metadata names it leader")
        produce_and_consume(process.bootstrap, topic_name, 0, [b"after-1", b"after-2"], 1)

        # A request meant for its previous registration is refused: STALE_BROKER_EPOCH.
        epoch = int(zk.get("/controller_epoch")[0])
        stale, _ = control_requests(zk, topic_name, victim, process, controller_epoch=epoch, epoch=old_epoch)
        assert send_control(process, stale) == ErrorCode.STALE_BROKER_EPOCH


def test_a_controller_whose_session_expires_resigns_and_its_epoch_is_refused(
        zookeeper, brokers_of, request, topic_name):
    connect = chroot_for(zookeeper, request.node.name)
    brokers = brokers_of(connect, (1, 2))
    with zk_client(connect) as zk:
        old = wait_until(lambda: controller_id(zk), message="a controller")
        other = 3 - old
        old_process, other_process = brokers[old - 1], brokers[other - 1]
        old_epoch = int(zk.get("/controller_epoch")[0])
        old_broker_epoch = broker_epoch(zk, old)
        create_topic(brokers, topic_name, [[old]])
        wait_until(lambda: leader_in_metadata(old_process, topic_name, 0) == old, message="the controller leads")
        produce_and_consume(old_process.bootstrap, topic_name, 0, [b"before"], 0)

        with stopped(old_process.proc.pid):
            new = wait_until(lambda: controller_id(zk) == other, EXPIRY_WAIT_S, message="the other broker elected")
            assert new and int(zk.get("/controller_epoch")[0]) == old_epoch + 1
        mark = old_process.log_mark()

        # The old controller resigns; it registers again and follows the new one's decisions.
        old_process.wait_for_log(r"\[Controller id=\d+\] Resigned", since=mark, timeout=15)
        new_broker_epoch = wait_until(lambda: broker_epoch(zk, old), 15, message="the old controller registers again")
        assert new_broker_epoch > old_broker_epoch
        after = wait_until(lambda: (s := partition_state(zk, topic_name, 0))["leader"] == old and s, 15,
                           message="the new controller gives the partition back to its broker")
        assert after["controller_epoch"] == old_epoch + 1
        assert controller_id(zk) == other and int(zk.get("/controller_epoch")[0]) == old_epoch + 1
        wait_until(lambda: leader_in_metadata(old_process, topic_name, 0) == old, 15,
                   message="the old controller's metadata")
        produce_and_consume(old_process.bootstrap, topic_name, 0, [b"after"], 1)

        # Requests from the deposed controller's epoch are refused by every broker.
        for node, process in ((old, old_process), (other, other_process)):
            epoch = broker_epoch(zk, node)
            leader_and_isr, update_metadata = control_requests(
                zk, topic_name, old, old_process, controller_epoch=old_epoch, epoch=epoch)
            assert send_control(process, leader_and_isr) == ErrorCode.STALE_CONTROLLER_EPOCH, node
            assert send_control(process, update_metadata) == ErrorCode.STALE_CONTROLLER_EPOCH, node
        # ... and the current epoch still gets through (the request itself is sound).
        leader_and_isr, _ = control_requests(
            zk, topic_name, old, old_process, controller_epoch=old_epoch + 1, epoch=new_broker_epoch)
        assert send_control(old_process, leader_and_isr) == ErrorCode.NONE
        assert partition_state(zk, topic_name, 0) == after  # the broker does not write the state


class ZooKeeperLink:
    """A TCP relay between one broker and ZooKeeper that a test can cut silently: while cut,
    bytes are dropped both ways and the connections stay open (a network partition, not a
    reset), so the broker only finds out when its heartbeats go unanswered. Runs in threads of
    the test process; `close` stops them and every socket."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cut = threading.Event()
        self.closed = threading.Event()
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                client.close()
                continue
            with self.lock:
                self.sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                if not self.cut.is_set():
                    target.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def restore(self) -> None:
        """Reconnect: the connections that lost bytes are closed, new ones relay again."""
        with self.lock:
            stale, self.sockets = self.sockets, []
        for sock in stale:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self.cut.clear()

    def close(self) -> None:
        self.closed.set()
        self.listener.close()
        self.restore()
        for sock in self.sockets:
            sock.close()


def log_time(line: str) -> float:
    """The time of a broker log line ("[2026-01-02 03:04:05,678] ...") in seconds."""
    stamp = re.match(r"\[([^\]]+)\]", line)
    assert stamp, line
    return datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def test_a_controller_cut_off_from_zookeeper_stops_acting_before_another_is_elected(
        zookeeper, brokers_of, request, topic_name):
    """The controller's link to ZooKeeper is cut silently (it keeps running): it notices within
    2/3 of the session timeout and stops acting, before its session expires and the other broker
    is elected. When the link is back it learns that its session expired, resigns (it had
    already stopped), registers again and leaves the role to the new controller."""
    link = ZooKeeperLink(zookeeper.port)
    try:
        chroot = chroot_for(zookeeper, request.node.name)
        (cut_off,) = brokers_of(f"127.0.0.1:{link.port}/{chroot.split('/', 1)[1]}", (1,))
        with zk_client(chroot) as zk:
            assert wait_until(lambda: controller_id(zk)) == 1
            (other,) = brokers_of(chroot, (2,))
            wait_for_cluster([cut_off, other], (1, 2))
            create_topic([cut_off, other], topic_name, [[2]])
            mark, other_mark = cut_off.log_mark(), other.log_mark()

            link.cut.set()
            stopped_acting = cut_off.wait_for_log(r"Controller 1 lost its ZooKeeper connection: it does not act",
                                                  since=mark, timeout=SESSION_TIMEOUT_MS / 1000 + 5)
            wait_until(lambda: controller_id(zk) == 2, EXPIRY_WAIT_S, message="the other broker elected")
            elected = other.wait_for_log(r"\[Controller id=2\] 2 successfully elected as the controller", since=other_mark)
            assert log_time(stopped_acting) < log_time(elected), (stopped_acting, elected)
            assert int(zk.get("/controller_epoch")[0]) == 2
            # Partitioned, the old controller decided nothing (nor could it), and still serves
            # what it has.
            assert "successfully elected as the controller" not in cut_off.log()[mark:]

            link.restore()
            cut_off.wait_for_log(r"ZooKeeper session of broker 1 expired", since=mark, timeout=15)
            wait_until(lambda: broker_epoch(zk, 1), 15, message="the cut-off broker registers again")
            assert controller_id(zk) == 2 and int(zk.get("/controller_epoch")[0]) == 2
            produce_and_consume(cut_off.bootstrap, topic_name, 0, [b"after"], 0)
    finally:
        link.close()


# --- a short loss of ZooKeeper ---------------------------------------------------------------


@pytest.fixture
def own_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperProcess]:
    """A ZooKeeper server for this test alone (it is stopped and restarted), stopped by PID."""
    server = ZooKeeperProcess(tmp_path / "zookeeper")
    server.start()
    try:
        yield server
    finally:
        if server.proc is not None and server.proc.poll() is None:
            os.kill(server.proc.pid, signal.SIGCONT)
        server.stop()


def test_zookeeper_stopped_for_less_than_the_session_timeout_breaks_nothing(own_zookeeper, brokers_of, topic_name):
    """One cluster-mode broker (its own controller). ZooKeeper is SIGSTOPped until the broker
    notices (SUSPENDED: kazoo declares the connection lost within 2/3 of the session timeout,
    at least 1/3 before the session can expire), then SIGCONTed: the same session goes on."""
    connect = own_zookeeper.connect_string + "/cluster"
    (broker,) = brokers_of(connect, (1,))
    create_topic([broker], topic_name, [[1]])
    with zk_client(connect) as zk:
        epoch_before = broker_epoch(zk, 1)
        controller_epoch = zk.get("/controller_epoch")[0]
    produce_and_consume(broker.bootstrap, topic_name, 0, [b"before"], 0)

    mark = broker.log_mark()
    with stopped(own_zookeeper.proc.pid):
        broker.wait_for_log(r"Lost the ZooKeeper connection", since=mark, timeout=SESSION_TIMEOUT_MS / 1000 + 5)
    broker.wait_for_log(r"resumed in the same session", since=mark, timeout=15)
    assert "Controller 1 lost its ZooKeeper connection" in broker.log()[mark:]

    with zk_client(connect) as zk:
        assert broker_epoch(zk, 1) == epoch_before  # the registration was never lost
        assert zk.get("/controller_epoch")[0] == controller_epoch and controller_id(zk) == 1
    log = broker.log()[mark:]
    assert "expired" not in log and "resigned" not in log
    produce_and_consume(broker.bootstrap, topic_name, 0, [b"after"], 1)
    # The controller acts again: a new topic gets its leader.
    create_topic([broker], topic_name + "-new", [[1]])
    produce_and_consume(broker.bootstrap, topic_name + "-new", 0, [b"new"], 0)


def test_zookeeper_restarted_breaks_nothing(own_zookeeper, brokers_of, topic_name):
    """Two brokers lose ZooKeeper together (it restarts, as in a rolling restart): both sessions
    outlive it, no one registers again, the controller stays, and both serve.

    A restarted server gives each saved session its whole timeout again from the moment it
    loads them, so the brokers must reconnect within that: Kafka's 18 s default leaves room for
    a slow JVM start, the 3 s used elsewhere here does not on a loaded CI machine."""
    connect = own_zookeeper.connect_string + "/cluster"
    brokers = brokers_of(connect, (1, 2), **{"zookeeper.session.timeout.ms": 18000})
    create_topic(brokers, topic_name, [[1], [2]])
    with zk_client(connect) as zk:
        epochs = {node: broker_epoch(zk, node) for node in (1, 2)}
        controller = controller_id(zk)
        controller_epoch = zk.get("/controller_epoch")[0]
    for node in (1, 2):
        wait_until(lambda n=node: leader_in_metadata(brokers[n - 1], topic_name, n - 1) == n,
                   message="both partitions led")
        produce_and_consume(brokers[node - 1].bootstrap, topic_name, node - 1, [b"before"], 0)

    marks = [b.log_mark() for b in brokers]
    own_zookeeper.stop()
    for broker, mark in zip(brokers, marks, strict=True):
        broker.wait_for_log(r"Lost the ZooKeeper connection", since=mark, timeout=10)
    own_zookeeper.start()
    for broker, mark in zip(brokers, marks, strict=True):
        broker.wait_for_log(r"resumed in the same session", since=mark, timeout=15)

    with zk_client(connect) as zk:
        assert {node: broker_epoch(zk, node) for node in (1, 2)} == epochs
        assert controller_id(zk) == controller and zk.get("/controller_epoch")[0] == controller_epoch
    for node in (1, 2):
        produce_and_consume(brokers[node - 1].bootstrap, topic_name, node - 1, [b"after"], 1)
    create_topic(brokers, topic_name + "-new", [[1], [2]])
    for node in (1, 2):
        wait_until(lambda n=node: leader_in_metadata(brokers[n - 1], topic_name + "-new", n - 1) == n,
                   message="the new topic's leaders")


# --- brokers that cannot join ----------------------------------------------------------------


def failed_start(broker: BrokerProcess, timeout: float = 30.0) -> tuple[int, str]:
    """Start ``broker``, which must exit by itself: its exit code and its output (stderr). It may
    open its port first (a broker listens before it registers), so its exit is waited for."""
    try:
        broker.start(timeout)
    except RuntimeError as e:
        assert "broker exited with" in str(e)
    assert broker.proc is not None
    broker.proc.wait(timeout)
    return broker.proc.returncode, broker.log()


def assert_one_clear_line(code: int, output: str, pattern: str) -> str:
    assert code != 0, output
    assert "Traceback" not in output, output
    lines = [line for line in output.splitlines() if line.startswith("pybroker: ")]
    assert len(lines) == 1, output
    assert re.search(pattern, lines[0]), lines[0]
    return lines[0]


def test_a_node_id_registered_by_a_live_broker_is_refused(zookeeper, brokers_of, tmp_path, request):
    connect = chroot_for(zookeeper, request.node.name)
    brokers_of(connect, (1,))
    duplicate = BrokerProcess(tmp_path / "duplicate", **{"node.id": 1, "zookeeper.connect": connect})
    code, output = failed_start(duplicate)
    assert_one_clear_line(code, output, r"broker id 1 is already registered at /brokers/ids/1 .*node\.id=1")
    with zk_client(connect) as zk:
        assert broker_epoch(zk, 1) is not None  # the running broker keeps its registration


def test_a_data_dir_of_another_cluster_is_refused(zookeeper, brokers_of, tmp_path, request):
    """Node 1 of one cluster is stopped, and its data directory is started again as node 1 of
    another, running cluster (whose /cluster/id its first broker wrote)."""
    first = chroot_for(zookeeper, request.node.name + "-first")
    (broker,) = brokers_of(first, (1,))
    assert broker.stop() == 0
    other = chroot_for(zookeeper, request.node.name + "-other")
    brokers_of(other, (2,))
    with zk_client(first) as zk:
        first_id = json.loads(zk.get("/cluster/id")[0])["id"]
    with zk_client(other) as zk:
        assert json.loads(zk.get("/cluster/id")[0])["id"] != first_id
    moved = BrokerProcess(broker.data_dir, **{"node.id": 1, "zookeeper.connect": other})
    code, output = failed_start(moved)
    line = assert_one_clear_line(code, output, r"doesn't match stored clusterId .* in meta\.properties")
    assert first_id in line
    with zk_client(other) as zk:
        assert broker_epoch(zk, 1) is None  # it never registered in the other cluster


def test_zookeeper_unreachable_at_start_fails_after_the_connection_timeout(tmp_path):
    port = free_port()  # nothing listens there
    broker = BrokerProcess(tmp_path / "broker", **{
        "node.id": 1, "zookeeper.connect": f"127.0.0.1:{port}", "zookeeper.connection.timeout.ms": 1500,
    })
    started = time.monotonic()
    code, output = failed_start(broker)
    elapsed = time.monotonic() - started
    assert_one_clear_line(code, output, rf"Timed out waiting for a ZooKeeper session with 127\.0\.0\.1:{port} "
                                        r"after 1500 ms \(zookeeper.connection.timeout.ms\)")
    assert 1.5 <= elapsed < 15, elapsed
