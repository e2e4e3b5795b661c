"""Go clients against pybroker: franz-go (kgo, kadm) and IBM/sarama, the clients of many Go
services, as peers built from ``tests/go`` (one Go module, pinned in go.mod and go.sum; a binary
per library with a sub-command per scenario, printing JSON lines).

Each check is a function ``(go, [library,] bootstrap, rf) -> summary``: it runs the peers against
the brokers of ``bootstrap`` on topics and groups of its own and returns, as JSON-like data, only
what a client observes and Kafka answers the same way (values, offsets, error codes, states,
counts; never member ids, producer ids or times). The tests compare each summary with what Apache
Kafka answers (the ``expected_*`` functions), so a Kafka harness can run the same checks against
Kafka 3.9 and compare the answers. Every check runs against one broker (RF 1) and a 3-broker
cluster (RF 3, min.insync.replicas=2), each shared by the module; the peers are built once per
session.

- produce: every codec (none, gzip, snappy, lz4, zstd) with an idempotent producer (kgo's
  default; sarama with Idempotent, MaxOpenRequests=1, acks=all), read back by the same library:
  every record once, in order, in a batch of its codec; DescribeProducers shows each producer;
- transactions: committed, aborted, committed; read_committed hides the aborted records;
- exactly once (kgo's GroupTransactSession): consume, produce and commit offsets in one
  transaction, the first one aborted and redone;
- groups: a member reads everything read_committed and commits, a second joins (a cooperative
  rebalance with kgo's cooperative-sticky balancer, an eager one with sarama's range), the group
  is described, and a new member resumes from the committed offsets;
- admin: kadm (topics, incremental configs, partitions, list offsets, DeleteRecords, groups,
  leader elections) and sarama's ClusterAdmin (CreateTopic, DescribeTopics, DeleteRecords,
  ListConsumerGroups, DeleteTopic); on the cluster, a preferred leader election after a restart.

``GO_PEERS_LOG=<file>`` appends the clients' logs (stderr) of every run to that file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from bench.apache_kafka import ZOOKEEPER_VERSION, KafkaBroker, KafkaCluster
from tests.conftest import REPO, require_kafka, wait_until
from tests.integration.cluster import Cluster, start_cluster
from tests.zookeeper import chroot_for

GO_MODULE = REPO / "tests" / "go"
LIBRARIES = ["franz", "sarama"]
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
TOPIC_ALREADY_EXISTS = 36
ELECTION_NOT_NEEDED = 84

BROKER_OVERRIDES = {
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 3,
    "transaction.state.log.num.partitions": 3,
}
CLUSTER_OVERRIDES = {
    **BROKER_OVERRIDES,
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.replication.factor": 3,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "auto.leader.rebalance.enable": False,  # the election test moves leaders back itself
}

pytestmark = [
    # The first test builds the peers: compiling both libraries from cold takes minutes on 2
    # busy cores. Each peer has a deadline of its own (-timeout), well under this.
    pytest.mark.timeout(300),
    # The cluster's brokers log their lost connections to the broker the election test restarts.
    pytest.mark.broker_log_allows(r"Sending \w+ to broker \d+ failed"),
]


# --- the Go peers -------------------------------------------------------------------------------

@dataclass(frozen=True)
class GoPeers:
    """The built peers: ``franz`` and ``sarama`` in ``bin_dir``."""

    bin_dir: Path

    def run(self, library: str, command: str, timeout: float = 60, **flags: object) -> list:
        """Runs ``<library> <command> -flag=value...`` with a deadline of ``timeout`` seconds and
        returns its JSON lines; fails with its output and log if it does not exit with 0."""
        args = [str(self.bin_dir / library), command, f"-timeout={timeout}s"]
        for name, value in flags.items():
            args.append(f"-{name}={str(value).lower() if isinstance(value, bool) else value}")
        command_line = " ".join(args)
        try:
            done = subprocess.run(args, capture_output=True, text=True, timeout=timeout + 15,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"{command_line} did not end:\n{e.stdout}\n"
                                 f"{tail(e.stderr)}") from None
        if os.environ.get("GO_PEERS_LOG"):
            with open(os.environ["GO_PEERS_LOG"], "a") as log:
                log.write(f"=== {command_line}\n{done.stderr}")
        if done.returncode != 0:
            raise AssertionError(f"{command_line} exited with {done.returncode}:\n{done.stdout}\n"
                                 f"{tail(done.stderr)}")
        return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def tail(text: str | bytes | None, lines: int = 60) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return "\n".join((text or "").splitlines()[-lines:])


@pytest.fixture(scope="session")
def go(tmp_path_factory: pytest.TempPathFactory) -> GoPeers:
    """Builds the peers once per session with ``go build`` (Go's default module and build
    caches). Fails, rather than skips, without Go or its modules."""
    tool = shutil.which("go") or "/usr/local/go/bin/go"
    if not os.access(tool, os.X_OK):
        pytest.fail("the Go toolchain is not installed (no `go` on PATH nor /usr/local/go/bin/go): "
                    "the Go client tests need it", pytrace=False)
    bin_dir = tmp_path_factory.mktemp("go-peers")
    build = [tool, "build", "-o", f"{bin_dir}{os.sep}", "./franz", "./sarama"]
    env = {**os.environ, "GOFLAGS": "-mod=mod -buildvcs=false"}
    try:
        done = subprocess.run(build, cwd=GO_MODULE, env=env, capture_output=True, text=True,
                              timeout=270, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"building the Go peers took over 270 s:\n{tail(e.stderr)}", pytrace=False)
    if done.returncode != 0:
        pytest.fail(f"building the Go peers in {GO_MODULE} failed (are the Go toolchain and the "
                    f"Go module proxy available?):\n{tail(done.stderr)}", pytrace=False)
    return GoPeers(bin_dir)


# --- where the checks run -----------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    bootstrap: str
    rf: int  # the replication factor of the topics the checks create


@pytest.fixture(scope="module")
def go_cluster(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("go-cluster")
    cluster = start_cluster(chroot_for(zookeeper, "go-clients"), root, **CLUSTER_OVERRIDES)
    yield cluster
    cluster.kill()


@pytest.fixture(scope="module")
def go_kafka(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """Apache Kafka 3.9.2 with the single broker's overrides: the same checks, Kafka's answers."""
    require_kafka(ZOOKEEPER_VERSION)
    kafka = KafkaBroker(tmp_path_factory.mktemp("go-kafka"), chroot_for(zookeeper, "go-kafka"),
                        quick_start=True, **BROKER_OVERRIDES)
    try:
        yield kafka.start()
    finally:
        kafka.stop()


@pytest.fixture(scope="module")
def go_kafka_cluster(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    require_kafka(ZOOKEEPER_VERSION)
    cluster = KafkaCluster(tmp_path_factory.mktemp("go-kafka-cluster"), chroot_for(zookeeper, "go-kafka-cluster"),
                           3, quick_start=True, **CLUSTER_OVERRIDES)
    try:
        yield cluster.start()
    finally:
        cluster.stop()
        cluster.kill()


@pytest.fixture(scope="module", params=["broker", "cluster", "kafka", "kafka-cluster"])
def target(request: pytest.FixtureRequest) -> Target:
    """Where a check runs: pybroker (one broker, three) and Apache Kafka 3.9.2 (likewise), each
    held to the same expected answers."""
    fixture, rf = {"broker": ("broker", 1), "cluster": ("go_cluster", 3), "kafka": ("go_kafka", 1),
                   "kafka-cluster": ("go_kafka_cluster", 3)}[request.param]
    return Target(request.getfixturevalue(fixture).bootstrap, rf)


def unique(what: str) -> str:
    return f"go-{what}-{uuid.uuid4().hex[:8]}"


def value(tag: str, partition: int | str, i: int) -> str:
    """The value the peers give the i-th record of a partition written under ``tag``."""
    return f"{tag}-p{partition}-{i}"


def keyed(partitions: int) -> list[str]:
    """Partition numbers as the summaries' keys (JSON object keys)."""
    return [str(p) for p in range(partitions)]


# --- produce with every codec -------------------------------------------------------------------

CODEC_PARTITIONS = 2
PER_CODEC = 200  # records per codec, spread over the partitions


def produce_every_codec(go: GoPeers, library: str, bootstrap: str, rf: int) -> dict:
    """An idempotent producer per codec, then the records read back by the same library (values,
    offsets) and by kgo (each record's batch codec); the producers of each partition as kadm's
    DescribeProducers shows them."""
    topic = unique(f"{library}-codecs")
    flags = {"bootstrap": bootstrap, "topic": topic, "partitions": CODEC_PARTITIONS}
    go.run(library, "create", rf=rf, **flags)
    produced = go.run(library, "produce", n=PER_CODEC, **flags)
    read = go.run(library, "read", **flags)[-1]["partitions"]
    batches = go.run("franz", "read", **flags)[-1]["partitions"]
    return {
        "produced": {line.pop("codec"): line for line in produced},
        "values": {p: got["values"] for p, got in read.items()},
        "offsets": {p: got["offsets"] for p, got in read.items()},
        # record tag:batch codec pairs seen
        "codecs": {p: sorted({f"{v.split('-')[0]}:{c}" for v, c in zip(got["values"], got["codecs"],
                                                                         strict=True)})
                   for p, got in batches.items()},
        "producers": producer_states(go, flags),
    }


def producer_states(go: GoPeers, flags: dict[str, object]) -> dict:
    """partition → [last sequence, start offset of the open transaction] of each producer that
    wrote to it (DescribeProducers), sorted."""
    described = go.run("franz", "producers", **flags)[-1]["partitions"]
    return {p: sorted(states) if isinstance(states, list) else states
            for p, states in described.items()}


def expected_every_codec(library: str) -> dict:
    n = PER_CODEC // CODEC_PARTITIONS  # records of a codec in each partition
    report: dict = {"acked": PER_CODEC, "errors": {}}
    if library == "franz":
        report["idempotent"] = True  # every record got a producer id
    partitions = keyed(CODEC_PARTITIONS)
    return {
        "produced": dict.fromkeys(CODECS, report),
        "values": {p: [value(c, p, i) for c in CODECS for i in range(n)] for p in partitions},
        "offsets": {p: list(range(n * len(CODECS))) for p in partitions},
        "codecs": {p: sorted(f"{c}:{c}" for c in CODECS) for p in partitions},
        # A producer per codec (sequences 0..n-1 in each partition) and one for the end markers.
        "producers": {p: [[0, -1]] + [[n - 1, -1]] * len(CODECS) for p in partitions},
    }


@pytest.mark.parametrize("library", LIBRARIES)
def test_idempotent_produce_with_every_codec(go, target, library):
    summary = produce_every_codec(go, library, target.bootstrap, target.rf)
    assert summary == expected_every_codec(library)


# --- transactions -------------------------------------------------------------------------------

TXN_PARTITIONS = 2
PER_TXN = 10  # records per partition and transaction


def transactions(go: GoPeers, library: str, bootstrap: str, rf: int) -> dict:
    """A transactional producer commits c1, aborts ab and commits c2 (with the end markers); the
    same library reads the topic read_committed and read_uncommitted: [offset, value] lists."""
    topic = unique(f"{library}-txn")
    flags = {"bootstrap": bootstrap, "topic": topic, "partitions": TXN_PARTITIONS}
    go.run(library, "create", rf=rf, **flags)
    summary = {"transactions": go.run(library, "txn", id=f"{topic}-txn", n=PER_TXN, **flags),
               "producers": producer_states(go, flags)}
    for isolation in ("read_committed", "read_uncommitted"):
        read = go.run(library, "read", isolation=isolation, **flags)[-1]["partitions"]
        summary[isolation] = {
            p: [[o, v] for o, v in zip(got["offsets"], got["values"], strict=True)]
            for p, got in read.items()}
    return summary


def expected_transactions() -> dict:
    n = PER_TXN

    # Each transaction's records, then its marker: c1 at 0..n-1, ab at n+1..2n, c2 at 2n+2...
    def records(tag: str, p: str) -> list[list]:
        first = {"c1": 0, "ab": n + 1, "c2": 2 * n + 2}[tag]
        return [[first + i, value(tag, p, i)] for i in range(n)]

    partitions = keyed(TXN_PARTITIONS)
    return {
        "transactions": [
            {"txn": "c1", "commit": True, "records": n * TXN_PARTITIONS},
            {"txn": "ab", "commit": False, "records": n * TXN_PARTITIONS},
            {"txn": "c2", "commit": True, "records": (n + 1) * TXN_PARTITIONS},
        ],
        # One producer, 3n + 1 records in each partition, no transaction open.
        "producers": {p: [[3 * n, -1]] for p in partitions},
        "read_committed": {p: records("c1", p) + records("c2", p) for p in partitions},
        "read_uncommitted": {p: records("c1", p) + records("ab", p) + records("c2", p)
                             for p in partitions},
    }


@pytest.mark.parametrize("library", LIBRARIES)
def test_transactions_commit_and_abort(go, target, library):
    assert transactions(go, library, target.bootstrap, target.rf) == expected_transactions()


# --- exactly once: consume, produce and commit in one transaction --------------------------------

EOS_PARTITIONS = 2
EOS_RECORDS = 200  # spread over the partitions


def exactly_once_copy(go: GoPeers, bootstrap: str, rf: int) -> dict:
    """kgo's GroupTransactSession copies a topic to another one partition by partition,
    committing the consumed offsets in each transaction; its first transaction is aborted (the
    session rewinds to the committed offsets). The copy is read back read_committed."""
    source, sink = unique("franz-eos-in"), unique("franz-eos-out")
    flags = {"bootstrap": bootstrap, "partitions": EOS_PARTITIONS}
    for topic in (source, sink):
        go.run("franz", "create", topic=topic, rf=rf, **flags)
    go.run("franz", "produce", topic=source, codecs="none", n=EOS_RECORDS, **flags)
    ended, offsets = go.run("franz", "eos", topic=source, out=sink, group=unique("franz-eos"),
                            id=f"{sink}-txn", **flags)
    copied = go.run("franz", "read", topic=sink, isolation="read_committed", **flags)
    return {"transactions": ended, "source_offsets": offsets,
            "copied": {p: got["values"] for p, got in copied[-1]["partitions"].items()}}


def expected_exactly_once_copy() -> dict:
    n = EOS_RECORDS // EOS_PARTITIONS
    partitions = keyed(EOS_PARTITIONS)
    end = dict.fromkeys(partitions, n + 1)  # the group committed past each end marker
    return {"transactions": {"aborted": 1, "committed_some": True},
            "source_offsets": {"committed": end, "end": end},
            "copied": {p: [value("none", p, i) for i in range(n)] for p in partitions}}


def test_exactly_once_copy_with_a_group_transact_session(go, target):
    assert exactly_once_copy(go, target.bootstrap, target.rf) == expected_exactly_once_copy()


# --- consumer groups ----------------------------------------------------------------------------

GROUP_PARTITIONS = 4
PER_GROUP_TXN = 3


def group_rebalance_and_resume(go: GoPeers, library: str, bootstrap: str, rf: int) -> dict:
    """Transactions (committed, aborted, committed) fill a topic; member a of a group reads it
    read_committed up to the end markers and commits; member b joins; once the partitions are
    split the group is described and both leave. More transactions; a new member resumes from
    the committed offsets."""
    topic, group = unique(f"{library}-group"), unique(f"{library}-group")
    flags = {"bootstrap": bootstrap, "topic": topic, "partitions": GROUP_PARTITIONS}
    go.run(library, "create", rf=rf, **flags)
    go.run(library, "txn", id=f"{topic}-txn", n=PER_GROUP_TXN, end="END1", **flags)
    first = go.run(library, "group", group=group, until="END1", second=True, **flags)
    go.run(library, "txn", id=f"{topic}-txn", n=PER_GROUP_TXN, tag="r", end="END2", **flags)
    resumed = go.run(library, "group", group=group, until="END2", **flags)

    def line(key: str, lines: list) -> dict:
        return next(line for line in lines if key in line)

    def values(lines: list) -> dict[str, list[str]]:
        return {p: got["values"] for p, got in line("partitions", lines)["partitions"].items()}

    a, b = (next(m for m in first if m.get("member") == name and "events" in m) for name in "ab")
    revoked = sorted(p for e in a["events"] if e["kind"] == "revoked" for p in e["partitions"])
    late = line("late", first)["late"]
    return {
        "first_read": values(first),
        "describe": line("describe", first)["describe"],
        # The kinds and sizes of the assignment changes (which partitions move depends on the
        # member ids), whether they split the partitions in halves, and what a gave up.
        "a_events": [[e["kind"], len(e["partitions"])] for e in a["events"]],
        "b_events": [[e["kind"], len(e["partitions"])] for e in b["events"]],
        "halves": sorted(a["owned"] + b["owned"]) == list(range(GROUP_PARTITIONS))
        and len(a["owned"]) == len(b["owned"]),
        "a_revoked_only_what_b_got": revoked == b["owned"],
        "read_after_the_join": {p: got["values"] for p, got in late.items() if got["values"]},
        "offsets_after_first": first[-1],
        "resumed_read": values(resumed),
        "offsets_after_resume": resumed[-1],
    }


def expected_group(library: str) -> dict:
    n, partitions, half = PER_GROUP_TXN, keyed(GROUP_PARTITIONS), GROUP_PARTITIONS // 2
    describe: dict = {"state": "Stable", "protocol_type": "consumer", "members": 2,
                      "sizes": [half, half]}
    if library == "franz":  # cooperative: a keeps half and gives up the other half, which b gets
        a_events = [["assigned", GROUP_PARTITIONS], ["revoked", half]]
        describe |= {"protocol": "cooperative-sticky", "assigned": list(range(GROUP_PARTITIONS))}
    else:  # eager: a gives up everything, then each member gets half
        a_events = [["assigned", GROUP_PARTITIONS], ["revoked", GROUP_PARTITIONS],
                    ["assigned", half]]
        describe |= {"protocol": "range", "err": 0}

    def read(tag: str) -> dict[str, list[str]]:
        return {p: [value(f"{tag}{t}", p, i) for t in ("c1", "c2") for i in range(n)]
                for p in partitions}

    # Each run writes to each partition n records (c1), a marker, n aborted (ab), a marker, n
    # records and the end marker (c2), a marker: the commit is past the end marker, before its
    # transaction's marker.
    def offsets(runs: int) -> dict:
        end = runs * (3 * n + 4)
        return {"committed": dict.fromkeys(partitions, end - 1),
                "end": dict.fromkeys(partitions, end)}

    return {
        "first_read": read(""),
        "describe": describe,
        "a_events": a_events,
        "b_events": [["assigned", half]],
        "halves": True,
        "a_revoked_only_what_b_got": library == "franz",
        "read_after_the_join": {},
        "offsets_after_first": offsets(1),
        "resumed_read": read("r"),
        "offsets_after_resume": offsets(2),
    }


@pytest.mark.parametrize("library", LIBRARIES)
def test_group_rebalance_commit_and_resume(go, target, library):
    summary = group_rebalance_and_resume(go, library, target.bootstrap, target.rf)
    assert summary == expected_group(library)


# --- admin --------------------------------------------------------------------------------------

def admin(go: GoPeers, library: str, bootstrap: str, rf: int) -> dict:
    """The library's admin calls on a topic and a group of their own: step → its answers."""
    lines = go.run(library, "admin", bootstrap=bootstrap, topic=unique(f"{library}-admin"),
                   group=unique(f"{library}-admin"), rf=rf)
    summary = {line.pop("step"): line for line in lines}
    if library == "sarama":
        summary["describe_topics"]["name"] = summary["describe_topics"]["name"].startswith("go-")
    return summary


def expected_admin(library: str, rf: int) -> dict:
    if library == "sarama":
        return {
            "create": {"err": 0},
            "create_again": {"err": TOPIC_ALREADY_EXISTS},
            "describe_topics": {"err": 0, "name": True, "internal": False,
                                "replicas": {"0": rf, "1": rf}},
            "delete_records": {"err": 0, "start": {"0": 4, "1": 10}},
            # A group that only committed offsets: no protocol type.
            "groups": {"protocol_type": "", "state": "Empty", "members": 0, "committed": 6},
            "delete_topic": {"err": 0},
        }

    # DEFAULT_CONFIG: no broker property sets these (a broker started with Kafka's stock
    # server.properties, which sets log.retention.hours, answers STATIC_BROKER_CONFIG for
    # retention.ms).
    def config(value: str, dynamic: bool) -> dict[str, str]:
        return {"value": value, "source": "DYNAMIC_TOPIC_CONFIG" if dynamic else "DEFAULT_CONFIG"}

    every = keyed(3)
    return {
        "create": {"err": 0, "partitions": 2, "rf": rf},
        "create_again": {"err": TOPIC_ALREADY_EXISTS},
        "describe_configs": {"configs": {
            "retention.ms": config("3600000", True), "cleanup.policy": config("delete", False),
            "max.message.bytes": config("1048588", False)}},
        # set max.message.bytes, delete retention.ms, append compact to cleanup.policy
        "alter_configs": {"err": 0, "configs": {
            "retention.ms": config("604800000", False),
            "cleanup.policy": config("delete,compact", True),
            "max.message.bytes": config("2000000", True)}},
        "subtract_config": {"err": 0, "configs": {"cleanup.policy": config("delete", True)}},
        "create_partitions": {"err": 0, "replicas": dict.fromkeys(every, rf)},
        "list_offsets": {"offsets": {
            "start": dict.fromkeys(every, 0), "end": dict.fromkeys(every, 10),
            "committed": dict.fromkeys(every, 10),
            # [offset, milliseconds after the first record's timestamp]
            "max_timestamp": dict.fromkeys(every, [9, 9000]),
            "after": dict.fromkeys(every, [6, 6000])}},
        "delete_records": {
            "results": {"0": {"err": 0, "low_watermark": 4}, "1": {"err": 0, "low_watermark": 10}},
            "start": {"0": 4, "1": 10, "2": 0}, "first_read": 4},
        "groups": {"listed": True, "protocol_type": "", "state": "Empty", "err": 0, "members": 0,
                   "committed": {"0": 5, "2": 7}},
        "delete_group": {"err": 0, "state_after": "Dead"},
        "elect": {"results": dict.fromkeys(every, ELECTION_NOT_NEEDED)},
        "delete_topic": {"err": 0},
    }


@pytest.mark.parametrize("library", LIBRARIES)
def test_admin(go, target, library):
    assert admin(go, library, target.bootstrap, target.rf) == expected_admin(library, target.rf)


# --- preferred leader election on the cluster ---------------------------------------------------

def partition_states(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition → (leader, replicas, isr) as Metadata answers them."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10).topics[topic]
    return {p: (m.leader, list(m.replicas), sorted(m.isrs)) for p, m in md.partitions.items()}


def preferred_leader_election(go: GoPeers, bootstrap: str, stop_broker: Callable[[int], None],
                              start_broker: Callable[[int], None]) -> dict:
    """A topic of three partitions on three brokers; the preferred leader of partition 0 stops
    (its partitions get other leaders), starts again and rejoins every ISR; kadm's ElectLeaders
    (preferred) then moves the leadership back. The error codes of the partitions whose
    preferred leader restarted, and of the others."""
    topic = unique("franz-elect")
    go.run("franz", "create", bootstrap=bootstrap, topic=topic, partitions=3, rf=3)

    def states() -> dict[int, tuple[int, list[int], list[int]]]:
        return partition_states(bootstrap, topic)

    node = states()[0][1][0]
    stop_broker(node)
    wait_until(lambda: all(leader != node for leader, _, _ in states().values()), timeout=30,
               message=f"broker {node} to lead no partition of {topic}")
    start_broker(node)
    wait_until(lambda: all(isr == sorted(replicas) for _, replicas, isr in states().values()),
               timeout=30, message=f"broker {node} back in the ISRs of {topic}")
    preferred = {str(p): replicas[0] for p, (_, replicas, _) in states().items()}
    elected = go.run("franz", "elect", bootstrap=bootstrap, topic=topic, partitions=3)[-1]
    codes = elected["results"]
    return {"restarted": sorted(code for p, code in codes.items() if preferred[p] == node),
            "others": sorted(code for p, code in codes.items() if preferred[p] != node),
            "preferred_leaders": elected["preferred_leaders"]}


@pytest.mark.parametrize("cluster_fixture", ["go_cluster", "go_kafka_cluster"])
def test_preferred_leader_election_after_a_restart(go, cluster_fixture, request):
    cluster = request.getfixturevalue(cluster_fixture)

    def stop(node: int) -> None:
        cluster.broker(node).stop()

    def start(node: int) -> None:
        cluster.broker(node).start()

    # One partition's preferred leader restarted: it is elected; the other two partitions were
    # led by their preferred leaders all along.
    assert preferred_leader_election(go, cluster.bootstrap, stop, start) == {
        "restarted": [0], "others": [ELECTION_NOT_NEEDED] * 2, "preferred_leaders": True}
