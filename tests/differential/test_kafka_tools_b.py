"""Kafka's own command-line tools against one pybroker and one Apache Kafka 3.9.2 broker: each
command runs against both (at once, from the 3.9.2 jars; 4.4.0's where its output says more) and
the outputs must be the same after `tests.differential.tool_runs.normalize` (addresses, UUIDs,
epoch-millisecond times, table padding) and what each step says it normalizes.

Both brokers run ``kafka.security.authorizer.AclAuthorizer`` with
``allow.everyone.if.no.acl.found`` (kafka-acls has an authorizer to talk to; every other tool is
allowed while no ACL names its resources) and ``transaction.partition.verification.enable=false``
(a transactional batch its coordinator never heard of is appended, which makes a hanging
transaction for ``kafka-transactions find-hanging``).

- the console producer (keys, headers) and consumer (``print.key``, ``print.headers``,
  ``print.timestamp`` with CreateTime and LogAppendTime, ``--partition --offset``, 4.4.0's
  ``--formatter-property``);
- two raw-protocol answers behind what the tools print: the order of a Produce answer's
  partitions (a Java producer calls its callbacks in that order), and the config errors for a
  topic that does not exist (kafka-configs, kafka-reassign-partitions clearing throttles);
- the verifiable producer and two verifiable consumers in one group (their JSON events: kinds,
  partitions, counts, offsets), with kafka-consumer-groups while they are members (``--describe``
  members, state, offsets; ``--reset-offsets``, ``--delete``, ``--delete-offsets`` refused) and
  after they left (``--list --state``, ``--describe``, ``--reset-offsets --to-earliest/--to-offset``,
  a verifiable consumer resuming from the reset offsets, ``--delete-offsets``, ``--delete``, 4.4.0's
  ``--list --type``);
- kafka-transactions (``list``, ``describe``, ``describe-producers``, ``find-hanging``,
  ``abort``) over committed, aborted, ongoing and hanging transactions, and a read_committed
  console consumer;
- kafka-acls (``--add``, ``--list``, ``--remove``), including a request the authorizer refuses.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.apache_kafka import KRAFT_VERSION, ZOOKEEPER_VERSION, KafkaBroker, KafkaToolProcess
from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
    ProduceRequest,
)
from tests.conftest import _kafka_chroot, broker_connection, require_kafka, wait_until
from tests.differential.tool_runs import Outcome, ToolPair, background
from tests.unit.batches import build_batch

SETTINGS: dict[str, object] = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": True,
    "transaction.partition.verification.enable": False,
    "group.initial.rebalance.delay.ms": 0,
}
BROKER_OVERRIDES = SETTINGS

CONSOLE_PRODUCER = "kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
VERIFIABLE_PRODUCER = "org.apache.kafka.tools.VerifiableProducer"
VERIFIABLE_CONSUMER = "org.apache.kafka.tools.VerifiableConsumer"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
ACLS = "kafka.admin.AclCommand"


@pytest.fixture(scope="module")
def kafka_b(zookeeper, request, tmp_path_factory) -> Iterator[KafkaBroker]:
    require_kafka(ZOOKEEPER_VERSION)
    kafka = KafkaBroker(tmp_path_factory.mktemp("kafka-tools-b"), _kafka_chroot(zookeeper, request, "tools-b"),
                        quick_start=True, **SETTINGS)
    try:
        kafka.start()
        yield kafka
    finally:
        kafka.stop()
        kafka.kill()


@pytest.fixture(scope="module")
def tools(broker, kafka_b) -> ToolPair:
    return ToolPair([broker.bootstrap], [kafka_b.bootstrap])


def create_topics(tools: ToolPair, *topics: NewTopic) -> None:
    for addresses in tools.sides():
        admin = AdminClient({"bootstrap.servers": ",".join(addresses)})
        for future in admin.create_topics(list(topics)).values():
            future.result(30)


# --- the console producer and consumer ------------------------------------------------------------


def test_console_producer_and_consumer(tools: ToolPair) -> None:
    create_topics(tools, NewTopic("console", 2, 1),
                  NewTopic("console-append", 1, 1, config={"message.timestamp.type": "LogAppendTime"}))
    lines = "h1:a,h2:b\tk1:v1\nh1:c\tk2:v2\nh0:\tk3:v3\nh3:x,h3:y\tk1:v4\nh2:\tk2:v5\n"
    produced = tools.same(CONSOLE_PRODUCER, ["--bootstrap-server", "{bootstrap}", "--topic", "console",
                                             "--property", "parse.key=true", "--property", "key.separator=:",
                                             "--property", "parse.headers=true"], input=lines)
    assert produced.code == 0
    tools.same(CONSOLE_PRODUCER, ["--bootstrap-server", "{bootstrap}", "--topic", "console-append"], input="a\nb\n")

    printing = ["--property", "print.key=true", "--property", "print.headers=true", "--property",
                "print.timestamp=true", "--property", "print.partition=true", "--property", "print.offset=true"]
    everything = tools.same(CONSOLE_CONSUMER, ["--bootstrap-server", "{bootstrap}", "--topic", "console",
                                               "--from-beginning", "--max-messages", "5", "--group", "console-readers",
                                               *printing], any_order=True)
    # Sorted: the two partitions' records may come in either order, from either broker.
    assert sorted(everything.lines) == [
        "CreateTime:<time> Partition:0 Offset:0 h0: k3 v3",
        "CreateTime:<time> Partition:1 Offset:0 h1:a,h2:b k1 v1",
        "CreateTime:<time> Partition:1 Offset:1 h1:c k2 v2",
        "CreateTime:<time> Partition:1 Offset:2 h3:x,h3:y k1 v4",
        "CreateTime:<time> Partition:1 Offset:3 h2: k2 v5",
    ], everything
    assert everything.err == "Processed a total of 5 messages"

    one = tools.same(CONSOLE_CONSUMER, ["--bootstrap-server", "{bootstrap}", "--topic", "console", "--partition", "1",
                                        "--offset", "1", "--max-messages", "1", "--property", "print.key=true",
                                        "--property", "key.separator= = "])
    assert one.lines == ["k2 = v2"], one
    appended = tools.same(CONSOLE_CONSUMER, ["--bootstrap-server", "{bootstrap}", "--topic", "console-append",
                                             "--from-beginning", "--max-messages", "2", "--property",
                                             "print.timestamp=true", "--group", "console-readers"])
    assert appended.lines == ["LogAppendTime:<time> a", "LogAppendTime:<time> b"]
    newer = tools.same(CONSOLE_CONSUMER, ["--bootstrap-server", "{bootstrap}", "--topic", "console", "--partition",
                                          "1", "--offset", "earliest", "--max-messages", "2",
                                          "--formatter-property", "print.key=true",
                                          "--formatter-property", "print.headers=true"], version=KRAFT_VERSION)
    assert newer.lines == ["h1:a,h2:b k1 v1", "h1:c k2 v2"]


# --- what the tools print, on the wire ------------------------------------------------------------


async def missing_topic_config_errors(bootstrap: str) -> list[tuple[str, int, str | None]]:
    """DescribeConfigs, AlterConfigs and IncrementalAlterConfigs of a topic that does not exist:
    (API, error, message) of each answer."""
    connection = await broker_connection(bootstrap)
    try:
        described = await connection.send(ApiKey.DESCRIBE_CONFIGS, DescribeConfigsRequest(resources=[
            DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name="no-such-topic",
                                                           configuration_keys=None)]))
        altered = await connection.send(ApiKey.ALTER_CONFIGS, AlterConfigsRequest(validate_only=False, resources=[
            AlterConfigsRequest.AlterConfigsResource(resource_type=2, resource_name="no-such-topic", configs=[
                AlterConfigsRequest.AlterableConfig(name="retention.ms", value="1000")])]))
        incremental = await connection.send(ApiKey.INCREMENTAL_ALTER_CONFIGS, IncrementalAlterConfigsRequest(
            validate_only=False, resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
                resource_type=2, resource_name="no-such-topic", configs=[IncrementalAlterConfigsRequest.AlterableConfig(
                    name="retention.ms", config_operation=0, value="1000")])]))
    finally:
        await connection.close()
    return [("DescribeConfigs", described.results[0].error_code, described.results[0].error_message),
            ("AlterConfigs", altered.responses[0].error_code, altered.responses[0].error_message),
            ("IncrementalAlterConfigs", incremental.responses[0].error_code, incremental.responses[0].error_message)]


def test_config_errors_for_a_missing_topic(tools: ToolPair) -> None:
    """What kafka-configs and kafka-reassign-partitions (clearing throttles) print for a topic
    that does not exist: DescribeConfigs leaves the message empty, the alters name the topic."""
    ours, theirs = (asyncio.run(missing_topic_config_errors(side[0])) for side in tools.sides())
    assert ours == theirs == [
        ("DescribeConfigs", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ""),
        ("AlterConfigs", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'no-such-topic' does not exist."),
        ("IncrementalAlterConfigs", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'no-such-topic' does not exist."),
    ]


async def produce_order(bootstrap: str, topics: dict[str, int],
                        transactional: bool = False) -> list[tuple[str, int, int]]:
    """One Produce request with a record for every partition of ``topics``, asked in a shuffled
    order: (topic, partition, error) in the order the answer lists them. ``transactional``: the
    batches are transactional and the request names no transactional id (refused as a whole)."""
    wanted = [(name, index) for name, count in topics.items() for index in range(count)]
    random.Random(7).shuffle(wanted)
    batch = build_batch([(None, b"ordered")], producer_id=0, producer_epoch=0, base_sequence=0, attributes=0x10) \
        if transactional else build_batch([(None, b"ordered")])
    by_topic: dict[str, list[ProduceRequest.PartitionProduceData]] = {}
    for name, index in wanted:
        by_topic.setdefault(name, []).append(ProduceRequest.PartitionProduceData(index=index, records=batch))
    connection = await broker_connection(bootstrap)
    try:
        answer = await connection.send(ApiKey.PRODUCE, ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[
            ProduceRequest.TopicProduceData(name=name, partition_data=data) for name, data in by_topic.items()]))
    finally:
        await connection.close()
    return [(t.name, p.index, p.error_code) for t in answer.responses for p in t.partition_responses]


def test_produce_answers_partitions_in_kafkas_order(tools: ToolPair) -> None:
    """A Java producer calls its send callbacks in the order of the Produce answer (the
    verifiable producer prints them): Kafka's is its hash map's, whatever the request's."""
    for topics in ({"ordered": 2}, {"ordered-a": 9, "ordered-b": 7}):
        create_topics(tools, *(NewTopic(name, count, 1) for name, count in topics.items()))
        ours, theirs = (asyncio.run(produce_order(side[0], topics)) for side in tools.sides())
        assert ours == theirs
        assert {error for _, _, error in ours} == {ErrorCode.NONE} and len(ours) == sum(topics.values())
    # Refused as a whole: Kafka answers in the order of the request's own (Java) hash map.
    ours, theirs = (asyncio.run(produce_order(side[0], topics, transactional=True)) for side in tools.sides())
    assert ours == theirs
    assert {error for _, _, error in ours} == {ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}


# --- the verifiable producer and consumer, and kafka-consumer-groups ------------------------------


def events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def producer_summary(text: str) -> list[Any]:
    """The verifiable producer's events without their times and throughput, the acknowledgements
    by partition and offset: the producer calls them back in the order of the Produce answers
    (`test_produce_answers_partitions_in_kafkas_order`), but how its records fall into requests
    depends on timing."""
    out = []
    for event in events(text):
        event.pop("timestamp")
        event.pop("avg_throughput", None)
        out.append(event)
    acknowledged = sorted((e for e in out if e["name"] == "producer_send_success"),
                          key=lambda e: (e["partition"], e["offset"]))
    others = [e for e in out if e["name"] != "producer_send_success"]  # startup first, shutdown and data last
    return others[:1] + acknowledged + others[1:]


def consumer_summary(text: str) -> dict[str, Any]:
    """A verifiable consumer's events: the assignment changes in order; per partition what was
    consumed (the records come in as many fetches as timing makes) and the last committed offset."""
    changes: list[tuple[str, list[int]]] = []
    consumed: dict[int, list[int]] = {}
    committed: dict[int, int] = {}
    for event in events(text):
        name = event["name"]
        if name == "records_consumed":
            for p in event["partitions"]:
                seen = consumed.setdefault(p["partition"], [0, p["minOffset"], p["maxOffset"]])
                seen[0] += p["count"]
                seen[1], seen[2] = min(seen[1], p["minOffset"]), max(seen[2], p["maxOffset"])
        elif name == "offsets_committed":
            assert event["success"], event
            committed.update({p["partition"]: p["offset"] for p in event["offsets"]})
        elif name != "record_data":
            changes.append((name, sorted(p["partition"] for p in event.get("partitions", []))))
    return {"changes": changes, "consumed": consumed, "committed": committed}


def consumer(tools: ToolPair, side: int, tmp_path: Path, client_id: str) -> KafkaToolProcess:
    """A verifiable consumer of the group in the background, against one side, as ``client_id``."""
    directory = tmp_path / f"{client_id}-{side}"
    directory.mkdir()
    (directory / "consumer.properties").write_text(f"client.id={client_id}\n")
    return background(ZOOKEEPER_VERSION, VERIFIABLE_CONSUMER, [
        "--bootstrap-server", "{bootstrap}", "--topic", "verifiable", "--group-id", "verifiable-group",
        "--consumer.config", str(directory / "consumer.properties")], tools.sides()[side], directory)


def assigned(process: KafkaToolProcess) -> list[int] | None:
    """The partitions of the consumer's last assignment event (None before the first)."""
    last = None
    for event in events(process.stdout()):
        if event["name"] == "partitions_assigned":
            last = sorted(p["partition"] for p in event["partitions"])
    return last


def test_verifiable_producer_consumers_and_consumer_groups(tools: ToolPair, tmp_path: Path) -> None:
    create_topics(tools, NewTopic("verifiable", 2, 1))
    ours, theirs = tools.run(VERIFIABLE_PRODUCER, [
        "--bootstrap-server", "{bootstrap}", "--topic", "verifiable", "--max-messages", "6", "--repeating-keys", "3",
        "--value-prefix", "7"])
    produced = producer_summary(ours.raw)
    assert (ours.code, produced) == (theirs.code, producer_summary(theirs.raw))
    per_partition = {p: sum(1 for e in produced if e.get("partition") == p) for p in (0, 1)}
    assert [e["name"] for e in produced] == ["startup_complete", *["producer_send_success"] * 6,
                                             "shutdown_complete", "tool_data"]

    # Two members, "member-a" and "member-b": the range assignor orders members by member id,
    # which starts with the client id, so member-a gets partition 0 from both brokers.
    group = ["--bootstrap-server", "{bootstrap}", "--group", "verifiable-group"]
    first = [consumer(tools, side, tmp_path, "member-a") for side in (0, 1)]
    second: list[KafkaToolProcess] = []
    try:
        for process in first:
            wait_until(lambda p=process: sum(consumer_summary(p.stdout())["committed"].values()) == 6, timeout=60,
                       message="member-a consuming and committing the six records")
        second = [consumer(tools, side, tmp_path, "member-b") for side in (0, 1)]
        for a, b in zip(first, second, strict=True):
            wait_until(lambda a=a, b=b: assigned(a) == [0] and assigned(b) == [1], timeout=60,
                       message="the group rebalanced over both members")
        # Any order: Kafka lists members (and their partitions) in its member map's order, a hash
        # of the random member ids.
        members = tools.same(CONSUMER_GROUPS, [*group, "--describe", "--members", "--verbose"], any_order=True)
        assert members.code == 0 and sorted(members.lines)[-2:] == [
            "verifiable-group member-a-<uuid> /127.0.0.1 member-a 1 (0)",
            "verifiable-group member-b-<uuid> /127.0.0.1 member-b 1 (1)",
        ], members
        state = tools.same(CONSUMER_GROUPS, [*group, "--describe", "--state"])
        assert "verifiable-group <broker 1> (1) range Stable 2" in state.lines
        tools.same(CONSUMER_GROUPS, [*group, "--describe", "--offsets"], any_order=True)
        # Refused while the group has members.
        refused = tools.same(CONSUMER_GROUPS, [*group, "--reset-offsets", "--topic", "verifiable", "--to-earliest",
                                               "--execute"])
        assert "the current state is Stable" in refused.out
        not_empty = tools.same(CONSUMER_GROUPS, [*group, "--delete"])
        assert "GroupNotEmptyException" in not_empty.out
        subscribed = tools.same(CONSUMER_GROUPS, [*group, "--delete-offsets", "--topic", "verifiable"])
        assert "GroupSubscribedToTopicException" in subscribed.out
        # member-b leaves first; member-a takes both partitions back before it leaves too.
        for process in second:
            process.stop()
        for process in first:
            wait_until(lambda p=process: assigned(p) == [0, 1], timeout=60, message="member-a taking both partitions")
    finally:
        for process in second + first:
            process.stop()
    a_ours, a_theirs, b_ours, b_theirs = (consumer_summary(p.stdout()) for p in first + second)
    assert a_ours == a_theirs
    assert b_ours == b_theirs
    assert a_ours["changes"][0] == ("startup_complete", []) and a_ours["changes"][-1] == ("shutdown_complete", [])
    assert a_ours["consumed"] == {p: [n, 0, n - 1] for p, n in per_partition.items()}

    # The members left: the group is empty, its offsets stay.
    listed = tools.same(CONSUMER_GROUPS, ["--bootstrap-server", "{bootstrap}", "--list", "--state"])
    assert "verifiable-group Empty" in listed.lines
    beyond = tools.same(CONSUMER_GROUPS, [*group, "--reset-offsets", "--topic", "verifiable:0", "--to-offset", "99",
                                          "--execute"])
    assert f"WARN New offset (99) is higher than latest offset for topic partition verifiable-0. Value will be set " \
           f"to {per_partition[0]}" in beyond.err
    earliest = tools.same(CONSUMER_GROUPS, [*group, "--reset-offsets", "--topic", "verifiable", "--to-earliest",
                                            "--execute"])
    assert sorted(row.strip() for row in earliest.out.split("verifiable-group")[1:]) == ["verifiable 0 0",
                                                                                         "verifiable 1 0"]
    tools.same(CONSUMER_GROUPS, [*group, "--reset-offsets", "--topic", "verifiable:1", "--to-offset", "1", "--execute"])
    described = tools.same(CONSUMER_GROUPS, [*group, "--describe", "--offsets"])
    assert described.err == "Consumer group 'verifiable-group' has no active members."

    # A member resumes from the reset offsets: partition 0 from the start, partition 1 from offset 1.
    ours, theirs = tools.run(VERIFIABLE_CONSUMER, [
        "--bootstrap-server", "{bootstrap}", "--topic", "verifiable", "--group-id", "verifiable-group",
        "--max-messages", str(per_partition[0] + per_partition[1] - 1)])
    resumed = consumer_summary(ours.raw)
    assert (ours.code, resumed) == (theirs.code, consumer_summary(theirs.raw))
    assert resumed["consumed"] == {0: [per_partition[0], 0, per_partition[0] - 1],
                                   1: [per_partition[1] - 1, 1, per_partition[1] - 1]}

    deleted = tools.same(CONSUMER_GROUPS, [*group, "--delete-offsets", "--topic", "verifiable:0"])
    assert "Successful" in deleted.out
    newer = tools.same(CONSUMER_GROUPS, ["--bootstrap-server", "{bootstrap}", "--list", "--type", "--state"],
                       version=KRAFT_VERSION)
    assert "verifiable-group Classic Empty" in newer.lines
    partly = tools.same(CONSUMER_GROUPS, [*group, "--group", "no-such-group", "--delete"])
    assert "GroupIdNotFoundException" in partly.out and "deleted successfully: 'verifiable-group'" in partly.out
    gone = tools.same(CONSUMER_GROUPS, [*group, "--describe"])
    assert gone.out == "Error: Consumer group 'verifiable-group' does not exist."


# --- kafka-transactions -------------------------------------------------------------------------

TIME_COLUMNS = {"CurrentTransactionStartTimeMs", "TransactionDurationMs", "LastTimestamp"}


def table(outcome: Outcome) -> list[dict[str, str]]:
    """A TransactionsCommand table (tab-separated, padded) as rows by column name, the columns
    that tell how long ago something happened normalized: they differ by the time between runs."""
    lines = [line.split("\t") for line in outcome.raw.splitlines() if line.strip()]
    if not lines:
        return []
    header = [cell.strip() for cell in lines[0]]
    return [{name: "<time>" if name in TIME_COLUMNS else cell.strip() for name, cell in zip(header, cells, strict=False)}
            for cells in lines[1:]]


def same_tables(tools: ToolPair, args: Sequence[str], **kwargs: Any) -> tuple[int, list[dict[str, str]], str]:
    ours, theirs = tools.run(TRANSACTIONS, ["--bootstrap-server", "{bootstrap}", *args], **kwargs)
    mine = (ours.code, table(ours), ours.err)
    assert mine == (theirs.code, table(theirs), theirs.err), args
    return mine


async def hanging_transaction(bootstrap: str, topic: str) -> int:
    """A transactional batch from an idempotent producer id, which no transaction coordinator
    knows (transaction verification is off): its producer id."""
    connection = await broker_connection(bootstrap)
    try:
        deadline = time.monotonic() + 30
        while True:
            init = await connection.send(ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
            if init.error_code == ErrorCode.NONE or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)  # Kafka: COORDINATOR_LOAD_IN_PROGRESS while its transaction log loads
        assert init.error_code == ErrorCode.NONE, init
        batch = build_batch([(b"k", b"hanging")], base_timestamp=int(time.time() * 1000), producer_id=init.producer_id,
                            producer_epoch=init.producer_epoch, base_sequence=0, attributes=0x10)
        answer = await connection.send(ApiKey.PRODUCE, ProduceRequest(
            transactional_id="ghost", acks=-1, timeout_ms=10000, topic_data=[ProduceRequest.TopicProduceData(
                name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])]))
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.NONE, answer
        return init.producer_id
    finally:
        await connection.close()


def transactional_producer(addresses: Sequence[str], transactional_id: str, **config: object) -> Producer:
    producer = Producer({"bootstrap.servers": ",".join(addresses), "transactional.id": transactional_id, **config})
    producer.init_transactions(30)
    producer.begin_transaction()
    return producer


def transactions(addresses: Sequence[str]) -> Producer:
    """A committed and an aborted transaction; the producer of one left ongoing (a transaction
    timeout of ten minutes); a hanging one."""
    committed = transactional_producer(addresses, "tx-committed")
    for i in range(3):
        committed.produce("transactions", b"c%d" % i, partition=i % 2)
    committed.commit_transaction(30)
    aborted = transactional_producer(addresses, "tx-aborted")
    aborted.produce("transactions", b"aborted", partition=1)
    aborted.flush(30)
    aborted.abort_transaction(30)
    left_open = transactional_producer(addresses, "tx-ongoing", **{"transaction.timeout.ms": 600000})
    left_open.produce("transactions", b"ongoing", partition=0)
    left_open.flush(30)
    asyncio.run(hanging_transaction(addresses[0], "transactions-hanging"))
    return left_open


def test_transactions(tools: ToolPair) -> None:
    create_topics(tools, NewTopic("transactions", 2, 1), NewTopic("transactions-hanging", 1, 1))
    ongoing = [transactions(addresses) for addresses in tools.sides()]
    try:
        code, listed, _ = same_tables(tools, ["list"])
        assert code == 0 and {(r["TransactionalId"], r["TransactionState"]) for r in listed} == {
            ("tx-committed", "CompleteCommit"), ("tx-aborted", "CompleteAbort"), ("tx-ongoing", "Ongoing")}
        _, described, _ = same_tables(tools, ["describe", "--transactional-id", "tx-ongoing"])
        assert described[0]["TopicPartitions"] == "transactions-0" and described[0]["TransactionTimeoutMs"] == "600000"
        missing = same_tables(tools, ["describe", "--transactional-id", "tx-nobody"])
        assert missing[0] == 1 and "failed because the ID could not be found" in missing[2]
        _, producers, _ = same_tables(tools, ["describe-producers", "--topic", "transactions", "--partition", "0"])
        assert sorted(r["CurrentTransactionStartOffset"] for r in producers) == ["3", "None"]
        _, hanging, _ = same_tables(tools, ["find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0"])
        assert [(r["Topic"], r["Partition"], r["StartOffset"]) for r in hanging] == [("transactions-hanging", "0", "0")]
        same_tables(tools, ["abort", "--topic", "transactions-hanging", "--partition", "0", "--start-offset", "0"])
        assert same_tables(tools, ["find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0"])[1] == []
        # read_committed stops at the ongoing transaction of partition 0 and skips the aborted one.
        committed_only = tools.same(CONSOLE_CONSUMER, [
            "--bootstrap-server", "{bootstrap}", "--topic", "transactions", "--from-beginning", "--max-messages", "3",
            "--isolation-level", "read_committed", "--property", "print.partition=true", "--property",
            "print.offset=true", "--group", "transactions-reader"], any_order=True)
        assert sorted(committed_only.lines) == ["Partition:0 Offset:0 c0", "Partition:0 Offset:1 c2",
                                                "Partition:1 Offset:0 c1"]
    finally:
        while ongoing:  # no reference left: librdkafka's handle goes with the producer
            ongoing.pop().abort_transaction(30)


# --- kafka-acls ---------------------------------------------------------------------------------


NOT_AUTHORIZED = re.compile(r"Request .* is not authorized\.")


def acl_blocks(text: str) -> list[tuple[str, ...]]:
    """kafka-acls output as blocks (a resource line and its entries), each block's entries and
    the blocks sorted. Kafka's DescribeAcls answer lists resources and entries in the order of
    Java hash maps whose keys hash enum constants by identity (``DescribeAclsResponse.
    aclsResources``), and the tool regroups them through such maps again: the order changes from
    one JVM to the next, so only the sets compare. A block starts at a blank line and at each
    resource line (``--principal`` prints its resources one after the other without one)."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if not line:
            blocks.append([])
        elif line.startswith("Current ACLs for resource") or not blocks:
            blocks.append([line])
        else:
            blocks[-1].append(line)
    return sorted((block[0], *sorted(block[1:])) for block in blocks if block)


def acls(tools: ToolPair, *args: str) -> list[tuple[str, ...]]:
    """kafka-acls against both: the exit codes and `acl_blocks` of the outputs must be the same.
    Kafka's ClusterAuthorizationException message is the toString of its internal request object
    (processor, connection id, a Java identity hash, buffer positions), pybroker's names the API,
    principal and address (docs/differences.md): both become ``Request <request> is not
    authorized.``"""
    ours, theirs = tools.run(ACLS, ["--bootstrap-server", "{bootstrap}", *args])

    def plain(outcome: Outcome) -> tuple[int, list[tuple[str, ...]], str]:
        return outcome.code, acl_blocks(NOT_AUTHORIZED.sub("Request <request> is not authorized.", outcome.out)), \
            outcome.err

    code, blocks, _ = plain(ours)
    assert (code, blocks, ours.err) == plain(theirs), args
    return blocks if code == 0 else [(f"exit {code}", *(line for block in blocks for line in block))]


def resources(blocks: list[tuple[str, ...]]) -> list[str]:
    return [block[0] for block in blocks]


def test_acls(tools: ToolPair) -> None:
    added = acls(tools, "--add", "--allow-principal", "User:alice", "--allow-principal", "User:bob",
                 "--operation", "Read", "--operation", "Write", "--topic", "acl-orders")
    assert added == [("Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=acl-orders, "
                      "patternType=LITERAL)`:",
                      "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
                      "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)",
                      "(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)",
                      "(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW)")]
    acls(tools, "--add", "--deny-principal", "User:eve", "--deny-host", "10.0.0.1", "--operation", "All",
         "--topic", "acl-", "--resource-pattern-type", "prefixed")
    acls(tools, "--add", "--allow-principal", "User:carol", "--producer", "--topic", "acl-payments",
         "--transactional-id", "acl-tx", "--resource-pattern-type", "prefixed")
    acls(tools, "--add", "--allow-principal", "User:dave", "--consumer", "--topic", "acl-audit", "--group", "acl-readers")
    assert len(acls(tools, "--list")) == 6
    matching = acls(tools, "--list", "--topic", "acl-orders", "--resource-pattern-type", "match")
    assert [name.split("name=")[1].split(",")[0] for name in resources(matching)] == ["acl-", "acl-orders"]
    dave = acls(tools, "--list", "--principal", "User:dave")
    assert resources(dave)[0] == "ACLs for principal `User:dave`"

    acls(tools, "--remove", "--force", "--allow-principal", "User:bob", "--operation", "Write", "--topic", "acl-orders")
    acls(tools, "--remove", "--force", "--topic", "acl-", "--resource-pattern-type", "prefixed")
    (after,) = acls(tools, "--list", "--topic", "acl-orders")
    assert len(after) == 4 and not any("User:bob, host=*, operation=WRITE" in line for line in after)

    # ANONYMOUS may alter the cluster's ACLs but is denied describing them: DescribeAcls is
    # refused with CLUSTER_AUTHORIZATION_FAILED, DeleteAcls still works.
    acls(tools, "--add", "--allow-principal", "User:ANONYMOUS", "--operation", "Alter", "--cluster")
    acls(tools, "--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Describe", "--cluster")
    ((code, *refused),) = acls(tools, "--list")
    assert code == "exit 1" and any(line.endswith("ClusterAuthorizationException: Request <request> is not authorized.")
                                    for line in refused)
    # No cluster ACL may stay: with one, ANONYMOUS would lose IDEMPOTENT_WRITE and DESCRIBE on the
    # cluster (allow.everyone.if.no.acl.found no longer applies to it).
    acls(tools, "--remove", "--force", "--cluster")
