"""Kafka's own command-line tools, from the Kafka 3.9.2 jars (and the 4.4.0 jars for the read-only
commands), against three pybroker brokers and against three Kafka 3.9.2 brokers (and one broker of
each, at the end): the same command on both, the outputs compared line by line.

One table of steps per tool. A table's 3.9.2 commands run in order in one JVM per cluster
(`bench.apache_kafka.run_kafka_tools`: each command's output and exit code its own, as from its own
JVM), both clusters at once; then the read-only commands that run with the 4.4.0 tools too, which
sit at the end of their table:

- kafka-topics (``TopicCommand``): create with ``--replica-assignment`` (a broker that is not
  registered included: ZooKeeper-mode Kafka creates the replica offline), with ``--config``, an
  existing name, a replication factor above the broker count; ``--alter --partitions`` up, with
  an assignment naming an unknown broker, to the same count, down; ``--delete``; ``--describe``,
  ``--describe --under-replicated-partitions`` and ``--unavailable-partitions``; ``--list``.
- kafka-configs (``ConfigCommand``): a topic's configs set, described (``--all`` too), deleted,
  refused (a value that does not parse, tiered storage, a topic that does not exist); broker and
  cluster-default configs (a thread count, a non-dynamic name); users' SCRAM credentials and
  quotas, clients' quotas, a user's client's quota; each described.
- kafka-get-offsets (``GetOffsetShell``), kafka-log-dirs (``LogDirsCommand --describe``) and
  kafka-delete-records (``DeleteRecordsCommand --offset-json-file``, seed 001's script) on a
  topic both clusters got the same record batches in: latest, earliest, by timestamp and
  max-timestamp offsets before and after the deletion, the deletion's result lines (a partition
  that does not exist included, with 2-second timeouts).
- kafka-leader-election (``LeaderElectionCommand``): preferred elections that move a leader,
  find nothing to do, or cannot elect (the preferred replica's broker is not registered), an
  unclean one, a partition that does not exist.

The same tools also run against one pybroker and one Kafka 3.9.2 broker
(``test_tools_against_one_broker_each``): topics created, refused (a replication factor above
one), grown, described, listed and deleted; broker, topic and client configs; offsets, log dirs,
seed 001's deletion script and a preferred election on a lone broker.

One raw CreateTopics too, for what kafka-topics' own timeout hides: a partition none of whose
replicas is registered times its topic's creation out (REQUEST_TIMED_OUT, no message).

What differs from run to run is normalized before the comparison (`normalize`): topic ids, ports,
log dir paths, log timestamps, stack frames, the admin client's retry counts and deadlines, and
the order of DeleteRecordsCommand's result lines (Kafka's own order changes between runs). Where
pybroker answers otherwise on purpose (KIP-253's partition shrink, its two extra topic configs) the
step rewrites pybroker's output to Kafka's, with the reason beside it; docs/differences.md lists
each ("Found beside Kafka 3.9.2 (issue 34)").
"""

from __future__ import annotations

import asyncio
import difflib
import json
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from bench.apache_kafka import KRAFT_VERSION, ZOOKEEPER_VERSION, KafkaCluster, run_kafka_tools
from pybroker import _native
from pybroker.client.admin import Admin
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import CreateTopicsRequest, ProduceRequest
from pybroker.types import TopicPartition
from tests.conftest import broker_connection, require_kafka, wait_until
from tests.integration.cluster import Cluster, start_cluster
from tests.zookeeper import chroot_for

OLD, NEW = ZOOKEEPER_VERSION, KRAFT_VERSION
BOTH = (OLD, NEW)
TOOLS = {  # kafka-<tool>.sh's class in each version
    "topics": {OLD: "org.apache.kafka.tools.TopicCommand", NEW: "org.apache.kafka.tools.TopicCommand"},
    "configs": {OLD: "kafka.admin.ConfigCommand", NEW: "org.apache.kafka.tools.ConfigCommand"},
    "get-offsets": {OLD: "org.apache.kafka.tools.GetOffsetShell", NEW: "org.apache.kafka.tools.GetOffsetShell"},
    "log-dirs": {OLD: "org.apache.kafka.tools.LogDirsCommand", NEW: "org.apache.kafka.tools.LogDirsCommand"},
    "delete-records": {OLD: "org.apache.kafka.tools.DeleteRecordsCommand",
                       NEW: "org.apache.kafka.tools.DeleteRecordsCommand"},
    "leader-election": {OLD: "org.apache.kafka.tools.LeaderElectionCommand",
                        NEW: "org.apache.kafka.tools.LeaderElectionCommand"},
}
# The records' timestamps, T0 + 1000 * batch: a minute ago (the same on both clusters), so that
# retention (one day once kafka-configs set the cluster default) leaves them alone.
T0 = (int(time.time()) - 60) * 1000


@dataclass(frozen=True)
class Step:
    """One command: its arguments (``{bootstrap}`` and ``{dir}``, the step's files, filled in),
    the tool versions it runs with, and, where pybroker differs on purpose, how its output is
    rewritten to Kafka's before the comparison."""

    args: tuple[str, ...]
    versions: tuple[str, ...] = (OLD,)
    ours: Callable[[str], str] | None = None


def step(*args: str, versions: tuple[str, ...] = (OLD,), ours: Callable[[str], str] | None = None) -> Step:
    return Step(args, versions, ours)


@dataclass
class Outcome:
    code: int
    out: str
    err: str

    def text(self) -> str:
        return f"exit {self.code}\n--- stdout\n{self.out}--- stderr\n{self.err}"


_RUN_SPECIFIC = [
    (re.compile(r"TopicId: [A-Za-z0-9_-]{22}"), "TopicId: <id>"),
    (re.compile(r"(?:127\.0\.0\.1|localhost):\d+"), "<address>"),
    (re.compile(r'"logDir":"[^"]*"'), '"logDir":"<dir>"'),
    (re.compile(r"^\[\d{4}-\d\d-\d\d [\d:,]+\] ", re.M), "[<time>] "),
    # The admin client's deadline, tries and clock; it gives up either while a Metadata call is in
    # flight or while one waits for a connection ("waiting for a node assignment"), as it happens.
    (re.compile(r"Call\(callName=([^,]+), deadlineMs=\d+, tries=\d+, nextAllowedTryMs=-?\d+\) timed out at \d+ "
                r"after \d+ attempt\(s\)"), r"\1 timed out"),
    (re.compile(r"Timed out waiting for a node assignment\. Call: (\S+)"), r"\1 timed out"),
]
_NOISE = re.compile(r"^\s+at |^\s+\.\.\. \d+ more$")  # stack frames: the client's own code


def normalize(tool: str, text: str) -> str:
    for pattern, replacement in _RUN_SPECIFIC:
        text = pattern.sub(replacement, text)
    lines = [line for line in text.splitlines() if not _NOISE.search(line)]
    if tool == "delete-records":
        # DeleteRecordsCommand prints its results (and the admin client logs its errors) in the
        # iteration order of a map of futures, which changes between runs of the same command
        # against the same Kafka broker: compare them as sets.
        results = sorted(line for line in lines if line.startswith(("partition: ", "[<time>] ERROR")))
        lines = [line for line in lines if not line.startswith(("partition: ", "[<time>] ERROR"))] + results
    return "".join(line + "\n" for line in lines)


def run(tool: str, version: str, steps: list[Step], bootstrap: str, directory: Path) -> list[Outcome]:
    """``steps`` (those for ``version``) one after another in one JVM (`run_kafka_tools`)."""
    commands = [(TOOLS[tool][version], [a.format(bootstrap=bootstrap, dir=directory) for a in s.args]) for s in steps]
    return [Outcome(r.returncode, normalize(tool, r.stdout), normalize(tool, r.stderr))
            for r in run_kafka_tools(version, commands)]


def compare(tool: str, steps: list[Step], ours: str, theirs: str, directory: Path) -> dict[tuple[str, int], Outcome]:
    """Run the steps against both clusters (``ours``, ``theirs``: a broker's address each), the
    3.9.2 ones first (one JVM per cluster, both at once), then the 4.4.0 ones (which must not
    change anything: they see what the whole table left), and fail with every difference;
    Kafka's outcomes by (version, step index)."""
    differences = []
    kafkas: dict[tuple[str, int], Outcome] = {}
    for version in BOTH:
        indexes = [i for i, s in enumerate(steps) if version in s.versions]
        if not indexes:
            continue
        chosen = [steps[i] for i in indexes]
        with ThreadPoolExecutor(2) as pool:
            mine, kafka = pool.map(run, [tool] * 2, [version] * 2, [chosen] * 2, (ours, theirs), [directory] * 2)
        for index, s, ours_, theirs_ in zip(indexes, chosen, mine, kafka, strict=True):
            if s.ours is not None:
                ours_ = Outcome(ours_.code, s.ours(ours_.out), s.ours(ours_.err))
            kafkas[version, index] = theirs_
            if ours_ != theirs_:
                diff = "\n".join(difflib.unified_diff(theirs_.text().splitlines(), ours_.text().splitlines(),
                                                      "Kafka", "pybroker", lineterm=""))
                differences.append(f"kafka-{tool} {version} {' '.join(s.args)}:\n{diff}")
    assert not differences, "\n\n".join(differences)
    return kafkas


# --- the clusters --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory) -> Iterator[Cluster]:
    require_kafka(NEW)
    cluster = start_cluster(chroot_for(zookeeper, "kafka-tools-a"), tmp_path_factory.mktemp("kafka-tools-a"))
    try:
        yield cluster
    finally:
        cluster.kill()


@pytest.fixture(scope="module")
def clusters(cluster: Cluster, kafka_cluster: KafkaCluster) -> dict[str, dict[int, str]]:
    """Broker id → address, for "pybroker" and "kafka"."""
    return {"pybroker": {i: b.bootstrap for i, b in enumerate(cluster.brokers, 1)},
            "kafka": {b.node_id: b.bootstrap for b in kafka_cluster.brokers}}


def create_topics(addresses: dict[int, str], topics: dict[str, list[list[int]]]) -> None:
    admin = AdminClient({"bootstrap.servers": ",".join(addresses.values())})
    futures = admin.create_topics([NewTopic(name, len(a), replica_assignment=a) for name, a in topics.items()])
    for future in futures.values():
        future.result(30)


def produce(addresses: dict[int, str], topic: str, leaders: dict[int, int], batches: int) -> None:
    """``batches`` one-record batches per partition (``leaders``: partition → its leader), the
    same bytes on every cluster: batch i has timestamp T0 + 1000 i and record ``k<i>``/``v<i>``."""

    async def send(partition: int, batch: bytes) -> int:
        connection = await broker_connection(addresses[leaders[partition]])
        try:
            response = await connection.send(ApiKey.PRODUCE, ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[
                ProduceRequest.TopicProduceData(name=topic, partition_data=[
                    ProduceRequest.PartitionProduceData(index=partition, records=batch)])]), version=9)
        finally:
            await connection.close()
        return response.responses[0].partition_responses[0].error_code

    for partition in leaders:
        for i in range(batches + partition):
            batch = _native.build_batch([(b"k%d" % i, b"v%d" % i)], T0 + 1000 * i)
            wait_until(lambda p=partition, b=batch: asyncio.run(send(p, b)) == 0, timeout=30,
                       message=f"a batch appended to {topic}-{partition}")


# --- kafka-topics --------------------------------------------------------------------------------


def kip253_shrink(text: str) -> str:
    """KIP-253 (seed 002): pybroker shrinks a topic, never below its initial partition count; below
    it, it refuses with its own reason where Kafka refuses every decrease."""
    return re.sub(r"The topic \S+ was created with \d+ partition\(s\); it cannot shrink below that \(asked for 2\)\.",
                  "Topic currently has 5 partitions, which is higher than the requested 2.", text)


TOPICS = [
    step("--bootstrap-server", "{bootstrap}", "--create", "--topic", "tools-a", "--replica-assignment", "1:2,2:3,3:1"),
    step("--bootstrap-server", "{bootstrap}", "--create", "--topic", "tools-b", "--partitions", "2",
         "--replication-factor", "3", "--config", "cleanup.policy=compact", "--config", "retention.ms=1000"),
    # Broker 5 is not registered: created all the same, its replica offline and out of the ISR.
    step("--bootstrap-server", "{bootstrap}", "--create", "--topic", "tools-u", "--replica-assignment", "1:5,2:3"),
    step("--bootstrap-server", "{bootstrap}", "--create", "--topic", "tools-a", "--partitions", "1"),
    step("--bootstrap-server", "{bootstrap}", "--create", "--topic", "tools-x", "--partitions", "3",
         "--replication-factor", "4"),
    step("--bootstrap-server", "{bootstrap}", "--alter", "--topic", "tools-a", "--partitions", "5"),
    step("--bootstrap-server", "{bootstrap}", "--alter", "--topic", "tools-a", "--partitions", "7",
         "--replica-assignment", "1:2,2:3,3:1,1:3,2:1,3:2,1:5"),
    step("--bootstrap-server", "{bootstrap}", "--alter", "--topic", "tools-a", "--partitions", "5"),
    step("--bootstrap-server", "{bootstrap}", "--alter", "--topic", "tools-a", "--partitions", "2", ours=kip253_shrink),
    step("--bootstrap-server", "{bootstrap}", "--alter", "--topic", "tools-a", "--partitions", "6",
         "--replica-assignment", "1:2,2:3,3:1,1:3,2:1,3:2"),
    step("--bootstrap-server", "{bootstrap}", "--delete", "--topic", "tools-b"),
    step("--bootstrap-server", "{bootstrap}", "--describe", "--topic", "tools-.*", versions=BOTH),
    step("--bootstrap-server", "{bootstrap}", "--describe", "--under-replicated-partitions", versions=BOTH),
    step("--bootstrap-server", "{bootstrap}", "--describe", "--unavailable-partitions"),
    step("--bootstrap-server", "{bootstrap}", "--describe", "--topic", "tools-b"),
    step("--bootstrap-server", "{bootstrap}", "--list", "--topic", "tools-[abux]"),
]


def test_kafka_topics(clusters, tmp_path):
    kafka = compare("topics", TOPICS, clusters["pybroker"][1], clusters["kafka"][1], tmp_path)
    assert kafka[OLD, 2].out == "Created topic tools-u.\n"
    assert kafka[OLD, 6].out == ("Error while executing topic command : Unknown broker(s) in replica "
                                 "assignment: 5.\n")
    assert kafka[OLD, 12].out == ("\tTopic: tools-u\tPartition: 0\tLeader: 1\tReplicas: 1,5\tIsr: 1\tElr: N/A\t"
                                  "LastKnownElr: N/A\n")
    assert kafka[OLD, 15].out == "tools-a\ntools-u\n"


# --- kafka-configs -------------------------------------------------------------------------------


def without_pybroker_topic_configs(text: str) -> str:
    """pybroker's own topic configs, which Kafka has not: ``enable.ordered.delivery`` (KIP-253,
    seed 002) and ``log.retention.min.timestamp`` (seed 003)."""
    return re.sub(r"(?m)^  (enable\.ordered\.delivery|log\.retention\.min\.timestamp)=.*\n", "", text)


def configs(*args: str, versions: tuple[str, ...] = (OLD,), ours: Callable[[str], str] | None = None) -> Step:
    return step("--bootstrap-server", "{bootstrap}", *args, versions=versions, ours=ours)


TOPIC_C = ("--entity-type", "topics", "--entity-name", "tools-c")
BROKER_1 = ("--entity-type", "brokers", "--entity-name", "1")
ALICE = ("--entity-type", "users", "--entity-name", "alice")
CLIENT_C1 = ("--entity-type", "clients", "--entity-name", "c1")
CONFIGS = [
    configs("--alter", *TOPIC_C, "--add-config",
            "retention.ms=1000,cleanup.policy=[compact,delete],message.timestamp.before.max.ms=60000,segment.jitter.ms=5"),
    configs("--describe", *TOPIC_C),
    configs("--describe", "--all", *TOPIC_C, ours=without_pybroker_topic_configs),
    configs("--alter", *TOPIC_C, "--delete-config", "retention.ms,segment.jitter.ms"),
    configs("--alter", *TOPIC_C, "--add-config", "retention.ms=abc"),
    configs("--alter", *TOPIC_C, "--add-config", "segment.bytes=1"),
    configs("--alter", *TOPIC_C, "--add-config", "remote.storage.enable=true"),
    configs("--alter", "--entity-type", "topics", "--entity-name", "tools-none", "--add-config", "retention.ms=1"),
    configs("--alter", *BROKER_1, "--add-config", "log.cleaner.threads=2,num.io.threads=9"),
    configs("--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "log.retention.ms=86400000"),
    configs("--alter", *BROKER_1, "--add-config", "num.io.threads=100"),
    configs("--alter", *BROKER_1, "--add-config", "log.retention.hours=1"),
    configs("--describe", "--entity-type", "brokers", versions=BOTH),
    configs("--describe", *TOPIC_C),  # retention.ms from the cluster default now
    configs("--alter", *ALICE, "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret],"
            "SCRAM-SHA-512=[password=alice-secret]"),
    configs("--alter", *ALICE, "--add-config",
            "producer_byte_rate=1024,consumer_byte_rate=2048,request_percentage=50"),
    configs("--alter", *CLIENT_C1, "--add-config", "producer_byte_rate=100,request_percentage=50"),
    configs("--alter", "--entity-type", "clients", "--entity-default", "--add-config", "consumer_byte_rate=999"),
    configs("--alter", *ALICE, *CLIENT_C1, "--add-config", "producer_byte_rate=300"),
    configs("--alter", *ALICE, "--delete-config", "SCRAM-SHA-512"),
    configs("--alter", "--entity-type", "users", "--entity-name", "bob", "--delete-config", "SCRAM-SHA-512"),
    configs("--describe", "--entity-type", "users", versions=BOTH),
    configs("--describe", "--entity-type", "clients", versions=BOTH),
    configs("--describe", *ALICE, *CLIENT_C1),
    configs("--describe", *TOPIC_C, versions=BOTH),
]


def test_kafka_configs(clusters, tmp_path):
    for addresses in clusters.values():
        create_topics(addresses, {"tools-c": [[1, 2]]})
    kafka = compare("configs", CONFIGS, clusters["pybroker"][1], clusters["kafka"][1], tmp_path)
    assert "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}\n" in kafka[OLD, 1].out
    assert kafka[OLD, 4].err.endswith("InvalidConfigurationException: Invalid config value for resource "
                                      "ConfigResource(type=TOPIC, name='tools-c'): Invalid value abc for configuration "
                                      "retention.ms: Not a number of type LONG\n")
    # Two keys in one bucket of the tool's HashMap come in the order the broker sent them.
    assert ("Quota configs for client-id 'c1' are request_percentage=50.0, producer_byte_rate=100.0\n"
            in kafka[OLD, 22].out)
    assert ("Quota configs for user-principal 'alice' are consumer_byte_rate=2048.0, request_percentage=50.0, "
            "producer_byte_rate=1024.0\n" in kafka[OLD, 21].out)


# --- kafka-get-offsets, kafka-log-dirs, kafka-delete-records -------------------------------------


@pytest.fixture(scope="module")
def records_topic(clusters) -> str:
    """tools-o: three partitions led by brokers 1, 2, 3 with 4, 5 and 6 one-record batches."""
    for addresses in clusters.values():
        create_topics(addresses, {"tools-o": [[1, 2], [2, 3], [3, 1]]})
        produce(addresses, "tools-o", {0: 1, 1: 2, 2: 3}, 4)
    return "tools-o"


OFFSETS = [
    step("--bootstrap-server", "{bootstrap}", "--topic", "tools-o", versions=BOTH),
    step("--bootstrap-server", "{bootstrap}", "--topic-partitions", "tools-o:0-2", "--time", str(T0 + 2500)),
    step("--bootstrap-server", "{bootstrap}", "--topic", "tools-.*", "--partitions", "1,2", "--time", "-3"),
    step("--bootstrap-server", "{bootstrap}", "--topic", "tools-none"),
]
LOG_DIRS = [
    step("--bootstrap-server", "{bootstrap}", "--describe", "--topic-list", "tools-o", versions=BOTH),
    step("--bootstrap-server", "{bootstrap}", "--describe", "--topic-list", "tools-o", "--broker-list", "2,3"),
    step("--bootstrap-server", "{bootstrap}", "--describe", "--broker-list", "7"),
]
DELETIONS = {"version": 1, "partitions": [
    {"topic": "tools-o", "partition": 0, "offset": 3},
    {"topic": "tools-o", "partition": 1, "offset": -1},  # up to the high watermark
    {"topic": "tools-o", "partition": 2, "offset": 100},  # beyond it
    {"topic": "tools-o", "partition": 9, "offset": 1},  # no such partition: the admin client times out
]}
DELETE_RECORDS = [
    step("--bootstrap-server", "{bootstrap}", "--offset-json-file", "{dir}/deletions.json",
         "--command-config", "{dir}/admin.properties"),
]
AFTER_DELETE = [
    step("--bootstrap-server", "{bootstrap}", "--topic", "tools-o", "--time", "-2", versions=BOTH),
    step("--bootstrap-server", "{bootstrap}", "--topic", "tools-o", "--time", str(T0 + 1000)),
]


def test_kafka_get_offsets_log_dirs_and_delete_records(clusters, records_topic, tmp_path):
    ours, theirs = clusters["pybroker"][1], clusters["kafka"][1]
    (tmp_path / "deletions.json").write_text(json.dumps(DELETIONS))
    (tmp_path / "admin.properties").write_text("request.timeout.ms=2000\ndefault.api.timeout.ms=2000\n")
    offsets = compare("get-offsets", OFFSETS, ours, theirs, tmp_path)
    log_dirs = compare("log-dirs", LOG_DIRS, ours, theirs, tmp_path)
    deleted = compare("delete-records", DELETE_RECORDS, ours, theirs, tmp_path)
    after = compare("get-offsets", AFTER_DELETE, ours, theirs, tmp_path)
    assert offsets[OLD, 0].out == "tools-o:0:4\ntools-o:1:5\ntools-o:2:6\n"
    assert offsets[OLD, 1].out == "tools-o:0:3\ntools-o:1:3\n"  # a range's end is excluded
    assert '{"partition":"tools-o-0","size":' in log_dirs[OLD, 0].out
    assert deleted[OLD, 0].out.splitlines() == [
        "Executing records delete operation",
        "Records delete operation completed:",
        "partition: tools-o-0\tlow_watermark: 3",
        "partition: tools-o-1\tlow_watermark: 5",
        "partition: tools-o-2\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException: The requested "
        "offset is not within the range of offsets maintained by the server.",
        "partition: tools-o-9\terror: org.apache.kafka.common.errors.TimeoutException: deleteRecords(api=METADATA) "
        "timed out",
    ]
    assert after[OLD, 0].out == "tools-o:0:3\ntools-o:1:5\ntools-o:2:0\n"


# --- kafka-leader-election -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def election_topic(clusters) -> str:
    """tools-e: partitions 0 and 1 led by brokers 1 and 2, their preferred replicas then made 2
    and 3 by reassignments that only reorder the replicas (leaders stay); partition 2's preferred
    replica is on broker 5, which is not registered."""
    reorder = {TopicPartition("tools-e", 0): [2, 1], TopicPartition("tools-e", 1): [3, 2]}

    async def reassign(bootstrap: str) -> None:
        async with Admin(bootstrap) as admin:
            assert set((await admin.alter_partition_reassignments(reorder)).values()) == {None}
            deadline = time.monotonic() + 30
            while await admin.list_partition_reassignments():
                assert time.monotonic() < deadline, "reassignments still under way"
                await asyncio.sleep(0.05)

    for addresses in clusters.values():
        create_topics(addresses, {"tools-e": [[1, 2], [2, 3], [5, 1]]})
        asyncio.run(reassign(",".join(addresses.values())))
    return "tools-e"


ELECTIONS = [
    step("--bootstrap-server", "{bootstrap}", "--election-type", "preferred", "--topic", "tools-e", "--partition", "0"),
    step("--bootstrap-server", "{bootstrap}", "--election-type", "preferred", "--path-to-json-file",
         "{dir}/elections.json"),
    step("--bootstrap-server", "{bootstrap}", "--election-type", "preferred", "--topic", "tools-e", "--partition", "1",
         versions=BOTH),
    step("--bootstrap-server", "{bootstrap}", "--election-type", "unclean", "--topic", "tools-e", "--partition", "2"),
    step("--bootstrap-server", "{bootstrap}", "--election-type", "preferred", "--all-topic-partitions"),
]


def test_kafka_leader_election(clusters, election_topic, tmp_path):
    (tmp_path / "elections.json").write_text(json.dumps({"partitions": [
        {"topic": "tools-e", "partition": 1}, {"topic": "tools-e", "partition": 2},
        {"topic": "tools-none", "partition": 0}]}))
    kafka = compare("leader-election", ELECTIONS, clusters["pybroker"][1], clusters["kafka"][1], tmp_path)
    assert kafka[OLD, 0].out == "Successfully completed leader election (PREFERRED) for partitions tools-e-0\n"
    assert kafka[OLD, 1].out.splitlines() == [
        "Successfully completed leader election (PREFERRED) for partitions tools-e-1",
        "Error completing leader election (PREFERRED) for partition: tools-e-2: org.apache.kafka.common.errors."
        "PreferredLeaderNotAvailableException: Failed to elect leader for partition tools-e-2 under strategy "
        "PreferredReplicaPartitionLeaderElectionStrategy",
        "Error completing leader election (PREFERRED) for partition: tools-none-0: org.apache.kafka.common.errors."
        "UnknownTopicOrPartitionException: The partition does not exist.",
    ]
    assert kafka[NEW, 2].out == "Valid replica already elected for partitions tools-e-1\n"


# --- what the tools cannot show -----------------------------------------------------------------


def test_a_partition_without_a_registered_replica_times_out_its_creation(clusters):
    """CreateTopics of a topic one of whose partitions has all its replicas on brokers that are
    not registered: Kafka waits for that partition's leader until the request's timeout and
    answers REQUEST_TIMED_OUT without a message (TopicCommand's own timeout comes first)."""

    async def create(address: str) -> tuple[int, str | None]:
        connection = await broker_connection(address)
        try:
            response = await connection.send(ApiKey.CREATE_TOPICS, CreateTopicsRequest(
                timeout_ms=300, validate_only=False, topics=[CreateTopicsRequest.CreatableTopic(
                    name="tools-dead", num_partitions=-1, replication_factor=-1, configs=[], assignments=[
                        CreateTopicsRequest.CreatableReplicaAssignment(partition_index=0, broker_ids=[1]),
                        CreateTopicsRequest.CreatableReplicaAssignment(partition_index=1, broker_ids=[7])])]),
                version=5)
        finally:
            await connection.close()
        return response.topics[0].error_code, response.topics[0].error_message

    async def controller(addresses: dict[int, str]) -> str:
        async with Admin(",".join(addresses.values())) as admin:
            node = await admin.controller()
        return f"{node.host}:{node.port}"

    answers = [asyncio.run(create(asyncio.run(controller(addresses)))) for addresses in clusters.values()]
    assert answers[0] == answers[1] == (7, None)  # REQUEST_TIMED_OUT


# --- one broker each ------------------------------------------------------------------------------
# The same tools against one pybroker (the module's shared broker) and one Kafka 3.9.2 broker: what
# changes with a lone broker (replication factors above one refused, every replica on broker 1,
# nothing under-replicated, every preferred leader elected).

ONE_TOPICS = [
    step("--bootstrap-server", "{bootstrap}", "--create", "--topic", "one-a", "--partitions", "3",
         "--replication-factor", "1", "--config", "retention.ms=3600000"),
    step("--bootstrap-server", "{bootstrap}", "--create", "--topic", "one-b", "--replica-assignment", "1,1"),
    step("--bootstrap-server", "{bootstrap}", "--create", "--topic", "one-x", "--partitions", "1",
         "--replication-factor", "2"),
    step("--bootstrap-server", "{bootstrap}", "--alter", "--topic", "one-b", "--partitions", "4"),
    step("--bootstrap-server", "{bootstrap}", "--describe", "--topic", "one-.*", versions=BOTH),
    step("--bootstrap-server", "{bootstrap}", "--delete", "--topic", "one-b"),
    step("--bootstrap-server", "{bootstrap}", "--list", "--topic", "one-.*", versions=BOTH),
    step("--bootstrap-server", "{bootstrap}", "--describe", "--under-replicated-partitions"),
]
ONE_CONFIGS = [
    configs("--describe", *BROKER_1),
    configs("--alter", *BROKER_1, "--add-config", "log.cleaner.threads=2"),
    configs("--describe", *BROKER_1, versions=BOTH),
    configs("--alter", "--entity-type", "topics", "--entity-name", "one-a", "--add-config", "segment.ms=100000"),
    configs("--describe", "--entity-type", "topics", "--entity-name", "one-a", versions=BOTH),
    configs("--alter", "--entity-type", "clients", "--entity-default", "--add-config", "consumer_byte_rate=500"),
    configs("--describe", "--entity-type", "clients", versions=BOTH),
]
ONE_OFFSETS = [step("--bootstrap-server", "{bootstrap}", "--topic", "one-a", versions=BOTH)]
ONE_LOG_DIRS = [step("--bootstrap-server", "{bootstrap}", "--describe", "--topic-list", "one-a", versions=BOTH)]
ONE_DELETIONS = {"version": 1, "partitions": [
    {"topic": "one-a", "partition": 0, "offset": 2},
    {"topic": "one-a", "partition": 1, "offset": -1},
    {"topic": "one-a", "partition": 2, "offset": 100},
]}
ONE_AFTER_DELETE = [step("--bootstrap-server", "{bootstrap}", "--topic", "one-a", "--time", "-2", versions=BOTH)]
ONE_ELECTIONS = [step("--bootstrap-server", "{bootstrap}", "--election-type", "preferred", "--topic", "one-a",
                      "--partition", "0", versions=BOTH)]


def test_tools_against_one_broker_each(broker, kafka, tmp_path):
    ours, theirs = broker.bootstrap, kafka.bootstrap
    topics = compare("topics", ONE_TOPICS, ours, theirs, tmp_path)
    assert topics[OLD, 2].out.startswith("Error while executing topic command : Replication factor: 2 larger than "
                                         "available brokers: 1.")
    compare("configs", ONE_CONFIGS, ours, theirs, tmp_path)
    for address in (ours, theirs):
        produce({1: address}, "one-a", {0: 1, 1: 1, 2: 1}, 3)
    (tmp_path / "deletions.json").write_text(json.dumps(ONE_DELETIONS))
    (tmp_path / "admin.properties").write_text("request.timeout.ms=5000\ndefault.api.timeout.ms=5000\n")
    offsets = compare("get-offsets", ONE_OFFSETS, ours, theirs, tmp_path)
    compare("log-dirs", ONE_LOG_DIRS, ours, theirs, tmp_path)
    deleted = compare("delete-records", DELETE_RECORDS, ours, theirs, tmp_path)
    after = compare("get-offsets", ONE_AFTER_DELETE, ours, theirs, tmp_path)
    elected = compare("leader-election", ONE_ELECTIONS, ours, theirs, tmp_path)
    assert offsets[OLD, 0].out == "one-a:0:3\none-a:1:4\none-a:2:5\n"
    assert deleted[OLD, 0].out.splitlines() == [
        "Executing records delete operation",
        "Records delete operation completed:",
        "partition: one-a-0\tlow_watermark: 2",
        "partition: one-a-1\tlow_watermark: 4",
        "partition: one-a-2\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException: The requested "
        "offset is not within the range of offsets maintained by the server.",
    ]
    assert after[OLD, 0].out == "one-a:0:2\none-a:1:4\none-a:2:0\n"
    assert elected[OLD, 0].out == "Valid replica already elected for partitions one-a-0\n"
