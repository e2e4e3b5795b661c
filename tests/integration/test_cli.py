"""The ``pybroker`` command line: ``topics`` (like kafka-topics.sh) and ``leader-election`` (like
kafka-leader-election.sh) against a broker, and ``apis``; ElectLeaders on the wire."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import ElectionType, KafkaError, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

from pybroker.client.connection import BrokerConnection
from pybroker.common.errors import ErrorCode
from pybroker.common.topic import topic_id_to_string
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import ElectLeadersRequest
from tests.conftest import REPO

TOPIC_ID = r"[A-Za-z0-9_-]{22}"  # Kafka's printed Uuid: URL-safe base64, no padding


def pybroker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pybroker", *args], cwd=REPO, capture_output=True, text=True, timeout=60)


def topics(broker, *args: str) -> subprocess.CompletedProcess[str]:
    return pybroker("topics", "--bootstrap-server", broker.bootstrap, *args)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr}"
    return result.stdout


def failed(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Assert a non-zero exit with a single error line (containing ``fragments``) and no output."""
    assert result.returncode != 0, result.stdout
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def topic_id(broker, topic: str) -> str:
    """The topic id as confluent-kafka's AdminClient sees it, printed the Kafka way."""
    import uuid

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=30)
    mask = (1 << 64) - 1
    value = ((described.topic_id.get_most_significant_bits() & mask) << 64) | (described.topic_id.get_least_significant_bits() & mask)
    return topic_id_to_string(uuid.UUID(int=value))


def expected_description(topic: str, topic_id: str, partitions: int, configs: str, initial: int | None = None) -> str:
    """Kafka's TopicCommand lines; a topic created with ``initial`` partitions (fewer) also shows
    KIP-253's counts at the end of its header."""
    counts = f"\tInitialPartitionCount: {initial}\tUndeletedPartitionCount: {partitions}" if initial else ""
    lines = [f"Topic: {topic}\tTopicId: {topic_id}\tPartitionCount: {partitions}\tReplicationFactor: 1\tConfigs: {configs}"
             f"{counts}"]
    lines += [f"\tTopic: {topic}\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1" for p in range(partitions)]
    return "\n".join(lines) + "\n"


def test_create_describe_alter_delete(broker, topic_name):
    assert ok(topics(broker, "create", "--topic", topic_name, "--partitions", "2",
                     "--config", "retention.ms=1000", "--config", "cleanup.policy=compact")) == f"Created topic {topic_name}.\n"
    tid = topic_id(broker, topic_name)
    assert ok(topics(broker, "describe", "--topic", topic_name)) == \
        expected_description(topic_name, tid, 2, "cleanup.policy=compact,retention.ms=1000")
    assert topic_name in ok(topics(broker, "list")).splitlines()

    assert ok(topics(broker, "alter", "--topic", topic_name, "--partitions", "4", "--config", "segment.bytes=50000",
                     "--delete-config", "retention.ms")) == f"Altered topic {topic_name}.\n"
    assert ok(topics(broker, "describe", "--topic", topic_name)) == \
        expected_description(topic_name, tid, 4, "cleanup.policy=compact,segment.bytes=50000", initial=2)
    # What the CLI changed is what a Kafka client sees.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert len(admin.list_topics(timeout=10).topics[topic_name].partitions) == 4
    resource = ConfigResource(ResourceType.TOPIC, topic_name)
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    assert {n: e.value for n, e in configs.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value} == \
        {"cleanup.policy": "compact", "segment.bytes": "50000"}

    assert ok(topics(broker, "delete", "--topic", topic_name)) == f"Deleted topic {topic_name}.\n"
    assert topic_name not in ok(topics(broker, "list")).splitlines()


def test_flag_spelling_like_kafka_topics(broker, topic_name):
    assert ok(topics(broker, "--create", "--topic", topic_name, "--partitions", "3")) == f"Created topic {topic_name}.\n"
    assert topic_name in ok(topics(broker, "--list")).splitlines()
    described = ok(topics(broker, "--describe", "--topic", topic_name))
    assert described == expected_description(topic_name, topic_id(broker, topic_name), 3, "")
    assert ok(topics(broker, "--alter", "--topic", topic_name, "--partitions", "5")) == f"Altered topic {topic_name}.\n"
    assert "PartitionCount: 5\t" in ok(topics(broker, "--describe", "--topic", topic_name))
    assert ok(topics(broker, "--delete", "--topic", topic_name)) == f"Deleted topic {topic_name}.\n"


def test_create_uses_broker_defaults(broker, topic_name):
    ok(topics(broker, "create", "--topic", topic_name))
    assert ok(topics(broker, "describe", "--topic", topic_name)) == \
        expected_description(topic_name, topic_id(broker, topic_name), 1, "")  # num.partitions=1


def test_describe_every_topic(broker, topic_name):
    names = [topic_name + "-a", topic_name + "-b"]
    for name in names:
        ok(topics(broker, "create", "--topic", name, "--partitions", "2", "--config", "retention.ms=60000"))
    out = ok(topics(broker, "describe"))
    headers = [line for line in out.splitlines() if line.startswith("Topic: ")]
    for line in headers:
        assert re.fullmatch(rf"Topic: \S+\tTopicId: {TOPIC_ID}\tPartitionCount: \d+\tReplicationFactor: 1\tConfigs: \S*"
                            r"(\tInitialPartitionCount: \d+\tUndeletedPartitionCount: \d+)?", line), line
    for name in names:
        assert f"Topic: {name}\tTopicId: {topic_id(broker, name)}\tPartitionCount: 2\tReplicationFactor: 1\tConfigs: retention.ms=60000" in headers
    listed = ok(topics(broker, "list")).splitlines()
    assert listed == sorted(listed) and set(names) <= set(listed)


def test_errors_exit_non_zero_with_one_line(broker, topic_name):
    ok(topics(broker, "create", "--topic", topic_name))
    missing = topic_name + "-missing"
    cases = [  # (arguments, fragments of the error line); independent, so run side by side
        (("create", "--topic", topic_name), (topic_name, "TOPIC_ALREADY_EXISTS")),
        (("describe", "--topic", missing), (missing, "UNKNOWN_TOPIC_OR_PARTITION")),
        (("delete", "--topic", missing), (missing, "UNKNOWN_TOPIC_OR_PARTITION")),
        (("alter", "--topic", missing, "--partitions", "3"), (missing, "UNKNOWN_TOPIC_OR_PARTITION")),
        (("alter", "--topic", topic_name, "--partitions", "1"), ("INVALID_PARTITIONS",)),
        (("create", "--topic", topic_name + "-bad", "--config", "retention.ms=soon"), ("INVALID_CONFIG",)),
        (("create", "--topic", "no way"), ("INVALID_TOPIC_EXCEPTION",)),
        (("create", "--topic", topic_name + "-rf", "--replication-factor", "2"), ("INVALID_REPLICATION_FACTOR",)),
        # Usage errors.
        (("create",), ("--topic is required",)),
        (("--create", "--list", "--topic", topic_name), ()),
        ((), ()),
    ]
    with ThreadPoolExecutor(len(cases)) as pool:
        results = list(pool.map(lambda case: topics(broker, *case[0]), cases))
    for (_, fragments), result in zip(cases, results, strict=True):
        failed(result, *fragments)
    assert ok(topics(broker, "list")).count(topic_name) == 1  # the failures created nothing

    unreachable = failed(pybroker("topics", "--bootstrap-server", "127.0.0.1:1", "list"), "127.0.0.1:1")
    assert unreachable.startswith("Error: ")


def leader_election(broker, *args: str) -> subprocess.CompletedProcess[str]:
    return pybroker("leader-election", "--bootstrap-server", broker.bootstrap, *args)


def test_replica_assignment_and_leader_election(broker, topic_name, tmp_path):
    """``topics create --replica-assignment`` and ``leader-election`` against a single broker:
    it is its own controller and every partition's preferred replica, so nothing needs electing."""
    assert ok(topics(broker, "create", "--topic", topic_name, "--replica-assignment", "1,1")) == \
        f"Created topic {topic_name}.\n"
    assert ok(topics(broker, "describe", "--topic", topic_name)) == \
        expected_description(topic_name, topic_id(broker, topic_name), 2, "")
    assert ok(topics(broker, "describe", "--topic", topic_name, "--under-replicated-partitions")) == ""
    assert ok(topics(broker, "describe", "--unavailable-partitions")) == ""
    assert ok(leader_election(broker, "--election-type", "preferred", "--all-topic-partitions")) == ""
    assert ok(leader_election(broker, "--election-type", "UNCLEAN", "--topic", topic_name, "--partition", "1")) == \
        f"Valid replica already elected for partitions {topic_name}-1\n"
    path = tmp_path / "election.json"
    path.write_text(json.dumps({"partitions": [{"topic": topic_name, "partition": 5}, {"topic": topic_name, "partition": 0}]}))
    result = leader_election(broker, "--election-type", "preferred", "--path-to-json-file", str(path))
    assert result.returncode == 1
    assert result.stdout == (
        f"Valid replica already elected for partitions {topic_name}-0\n"
        f"Error completing leader election (PREFERRED) for partition: {topic_name}-5: "
        "UNKNOWN_TOPIC_OR_PARTITION: The partition does not exist.\n"
    )
    assert result.stderr == "Error: 1 replica(s) could not be elected\n"
    usage = leader_election(broker, "--election-type", "preferred", "--topic", topic_name)
    assert usage.returncode == 2 and usage.stderr == "pybroker leader-election: Missing required option(s): partition\n"


def test_elect_leaders_on_the_wire(broker, topic_name):
    """ElectLeaders v0-v2: per-partition results (v1+ with a top-level error code); a null
    partition list reports only the partitions that needed an election."""
    ok(topics(broker, "create", "--topic", topic_name, "--partitions", "2"))

    async def elect(version: int, partitions: list[int] | None) -> object:
        host, port = broker.bootstrap.split(":")
        connection = BrokerConnection(host, int(port))
        await connection.connect()
        try:
            wanted = None if partitions is None else [ElectLeadersRequest.TopicPartitions(topic=topic_name, partitions=partitions)]
            request = ElectLeadersRequest(topic_partitions=wanted, timeout_ms=5000)
            return await connection.send(ApiKey.ELECT_LEADERS, request, version)
        finally:
            await connection.close()

    for version in (0, 1, 2):
        response = asyncio.run(elect(version, [0, 1, 9]))
        assert response.error_code == ErrorCode.NONE
        [result] = response.replica_election_results
        assert result.topic == topic_name
        # In the order of the Java HashSet Kafka reads them into (it follows the topic name): sorted here.
        assert sorted((p.partition_id, p.error_code) for p in result.partition_result) == [
            (0, ErrorCode.ELECTION_NOT_NEEDED), (1, ErrorCode.ELECTION_NOT_NEEDED), (9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ]
        assert asyncio.run(elect(version, None)).replica_election_results == []
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    results = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic_name, 0)]).result(timeout=30)
    assert [error.code() for error in results.values()] == [KafkaError.ELECTION_NOT_NEEDED]


def test_apis_table_is_what_the_broker_advertises(broker):
    out = ok(pybroker("apis"))
    lines = out.strip().splitlines()
    assert lines[:2] == ["| key | API | versions |", "|---:|---|---|"]
    rows = [re.fullmatch(r"\| (\d+) \| ([A-Za-z]+) \| (\d+)–(\d+) \|", line) for line in lines[2:]]
    assert all(rows), lines
    table = {int(m[1]): (int(m[3]), int(m[4])) for m in rows}
    names = {int(m[1]): m[2] for m in rows}
    assert [int(m[1]) for m in rows] == sorted(table)
    assert names[0] == "Produce" and names[18] == "ApiVersions" and names[60] == "DescribeCluster"

    async def advertised() -> dict[int, tuple[int, int]]:
        host, port = broker.bootstrap.split(":")
        connection = BrokerConnection(host, int(port))
        await connection.connect()
        try:
            return dict(connection.api_versions)
        finally:
            await connection.close()

    assert asyncio.run(advertised()) == table


def test_readme_api_table_is_up_to_date():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- apis:begin -->\n(.*?)<!-- apis:end -->", readme, re.S)
    assert block, "README.md lost its <!-- apis:begin --> / <!-- apis:end --> markers"
    assert block.group(1).strip() == ok(pybroker("apis")).strip(), \
        "README.md's API table is stale: replace it with the output of `pybroker apis`"
