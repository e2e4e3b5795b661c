"""The ``pybroker`` Spark data source against a real broker, with Spark local[2] (few, small).

Spark writes rows and reads them back byte-exact; a real Kafka client (confluent-kafka) reads
what Spark wrote and writes what Spark reads; a streaming read with Trigger.AvailableNow sees
every row and a streaming write lands them in another topic; a paced replay of a generated trace
(the bench's replay, run through Spark tasks) lands every record in order per key; bad options
fail with Spark's Kafka wording. On a topic whose partitions changed (KIP-253) the writer puts
keys where linear hashing does, never writes to a partition marked for deletion, and fails a
write whose topic changed under it rather than put keys where they no longer belong.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from pybroker import _native
from pybroker.client.admin import Admin
from pybroker.client.kafka_producer import KafkaProducer
from pybroker.client.producer import ProduceError
from pybroker.common.errors import ErrorCode
from tests.conftest import REPO, BrokerProcess

pyspark = pytest.importorskip("pyspark", reason="the test command installs pybroker[spark]")

from pyspark.sql import SparkSession  # noqa: E402

import pybroker.spark  # noqa: E402
from pybroker.spark.producer import ArrowProducer  # noqa: E402

BROKER_OVERRIDES = {"num.partitions": 3}


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One Spark session for the whole run: other modules import this fixture, and a stopped
    session's JVM gateway cannot start another one in the same process."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    # Spark's Python workers import pybroker and the bench's replay code from the repo.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    session = (
        SparkSession.builder.master("local[2]").appName("pybroker-tests")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2").getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    pybroker.spark.register(session)
    gateway = session.sparkContext._gateway
    jvm = getattr(gateway, "proc", None)
    yield session
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:  # an importing module's copy may have stopped it
        session.stop()
    gateway.shutdown()
    if jvm is not None and jvm.poll() is None:
        jvm.terminate()
        jvm.wait(30)


def rows(n: int) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    """Keys of a few kinds (null, empty, repeated), values of every size 0..300 and a null."""
    out = []
    for i in range(n):
        key = None if i % 7 == 0 else b"" if i % 11 == 0 else f"key-{i % 13}".encode()
        value = None if i == 5 else bytes((i + j) % 256 for j in range(i % 301))
        headers = [("h", str(i).encode()), ("null", None)] if i % 3 == 0 else []
        out.append((key, value, headers))
    return out


def write(spark: SparkSession, broker: BrokerProcess, topic: str, data: list, **options: str) -> None:
    df = spark.createDataFrame(data, "key binary, value binary, headers array<struct<key:string,value:binary>>")
    (df.repartition(2).write.format("pybroker").mode("append")
     .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic).options(**options).save())


def read(spark: SparkSession, broker: BrokerProcess, topic: str, **options: str) -> list:
    return (spark.read.format("pybroker").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic).options(**options).load().collect())


def test_batch_write_then_read_back_byte_exact(spark: SparkSession, broker: BrokerProcess, topic_name: str) -> None:
    data = rows(600)
    write(spark, broker, topic_name, data, **{"kafka.batch.size": "4096"})
    got = read(spark, broker, topic_name, includeHeaders="true")

    assert sorted(((r.key, r.value, [(h.key, h.value) for h in r.headers]) for r in got), key=repr) == sorted(
        data, key=repr), "every row comes back byte-exact, nulls and headers included"
    assert {r.topic for r in got} == {topic_name}
    by_partition: dict[int, list[int]] = {}
    for r in got:
        by_partition.setdefault(r.partition, []).append(r.offset)
        assert r.timestampType == 0
    for offsets in by_partition.values():
        assert sorted(offsets) == list(range(len(offsets))), "offsets are dense from 0 in each partition"
    for r in got:
        if r.key:
            same_key = {x.partition for x in got if x.key == r.key}
            assert same_key == {r.partition}, "one key, one partition (Kafka's murmur2 partitioner)"

    # A real Kafka client sees the same records.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic_name}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic_name, p, 0) for p in range(3)])
    seen = []
    while len(seen) < len(data):
        message = consumer.poll(10)
        assert message is not None and not message.error(), "confluent-kafka reads what Spark wrote"
        seen.append((message.key(), message.value(), [(k, v) for k, v in (message.headers() or [])]))
    consumer.close()
    assert sorted(seen, key=repr) == sorted(data, key=repr)


def test_read_offset_ranges_and_splits(spark: SparkSession, broker: BrokerProcess, topic_name: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(300):
        producer.produce(topic_name, value=b"v%d" % i, partition=i % 3)
    assert producer.flush(30) == 0
    del producer

    df = (spark.read.format("pybroker").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("assign", f'{{"{topic_name}":[0,2]}}')
          .option("startingOffsets", f'{{"{topic_name}":{{"0":10,"2":-2}}}}')
          .option("endingOffsets", f'{{"{topic_name}":{{"0":-1,"2":50}}}}')
          .option("maxRecordsPerPartition", "25").load())
    assert df.rdd.getNumPartitions() == 4 + 2, "90 and 50 offsets cut into ranges of at most 25"
    got = sorted((r.partition, r.offset, r.value) for r in df.collect())
    expected = [(0, o, b"v%d" % (o * 3)) for o in range(10, 100)] + [(2, o, b"v%d" % (o * 3 + 2)) for o in range(50)]
    assert got == expected


def test_stream_available_now_sees_every_row_and_stream_write(spark: SparkSession, broker: BrokerProcess, topic_name: str, tmp_path) -> None:
    data = rows(400)
    write(spark, broker, topic_name, data)
    copy = topic_name + "-copy"
    query = (spark.readStream.format("pybroker").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", topic_name).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "150")
             .load().selectExpr("key", "value")
             .writeStream.format("pybroker").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", copy)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    progress = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(progress) == len(data) and max(progress) <= 150, "maxOffsetsPerTrigger splits the backlog"

    got = read(spark, broker, copy)
    assert sorted(((r.key, r.value) for r in got), key=repr) == sorted(((k, v) for k, v, _ in data), key=repr)


def test_replay_of_a_generated_trace_lands_every_record_in_order_per_key(spark: SparkSession, broker: BrokerProcess, tmp_path) -> None:
    from bench.spark.trace import replay_in_order

    result = replay_in_order(spark, broker.bootstrap, tmp_path, records=3000, keys="uniform:50", speed=4.0)
    assert result["ok"], result
    assert result["records_consumed"] == 3000 and result["keyed_groups"] > 0


def test_bad_options_fail_with_spark_wording(spark: SparkSession, broker: BrokerProcess) -> None:
    with pytest.raises(Exception, match="kafka.bootstrap.servers"):
        spark.read.format("pybroker").option("subscribe", "x").load().collect()
    with pytest.raises(Exception, match="subscribe, subscribePattern, assign"):
        spark.read.format("pybroker").option("kafka.bootstrap.servers", broker.bootstrap).load().collect()
    with pytest.raises(Exception, match="can't be latest for batch queries"):
        read(spark, broker, "x", startingOffsets="latest")


# --- KIP-253: a topic whose partitions changed ----------------------------------------------------

async def grow_then_shrink(bootstrap: str, topic: str) -> None:
    """3 -> 6 -> 5: partition 5 holds a record, so it stays marked for deletion (not drained)."""
    async with Admin(bootstrap) as admin:
        await admin.create_topic(topic, 3, 1)
        await admin.create_partitions(topic, 6)
        async with KafkaProducer({"bootstrap.servers": bootstrap}) as producer:
            await (await producer.send(topic, b"holds partition 5", partition=5))
        await admin.create_partitions(topic, 5)


def test_writer_partitions_a_changed_topic_by_linear_hashing(spark: SparkSession, broker: BrokerProcess, topic_name: str) -> None:
    asyncio.run(grow_then_shrink(broker.bootstrap, topic_name))
    data = [(f"key-{i % 40}".encode(), b"v%d" % i, []) for i in range(400)] + [(None, b"keyless-%d" % i, []) for i in range(50)]
    write(spark, broker, topic_name, data)

    got = [r for r in read(spark, broker, topic_name) if r.value != b"holds partition 5"]
    assert sorted(r.value for r in got) == sorted(v for _, v, _ in data)
    hashing = _native.LinearHashing(3, 5)
    for r in got:
        if r.key is not None:
            assert r.partition == hashing.partition_for_key(r.key), "a key goes where linear hashing over (3, 5) puts it"
        assert r.partition < 5, "nothing is written to the partition marked for deletion"
    assert {r.partition for r in got if r.key is not None} == set(range(5))

    marked = spark.createDataFrame([(b"v", 5)], "value binary, partition int")
    with pytest.raises(Exception, match=f"partition 5 of topic {topic_name} is marked for deletion"):
        (marked.write.format("pybroker").mode("append").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("topic", topic_name).save())


def test_a_partition_change_while_a_task_writes_fails_the_write(broker: BrokerProcess, topic_name: str) -> None:
    """The writer read the layout (3 partitions) and partitioned with it; after the topic grows its
    requests carry the old count, and the broker refuses them instead of taking keys to
    partitions they no longer belong to. Spark's retry of the task starts over with the new layout."""
    import pyarrow as pa

    async def create() -> None:
        async with Admin(broker.bootstrap) as admin:
            await admin.create_topic(topic_name, 3, 1)

    async def grow() -> None:
        async with Admin(broker.bootstrap) as admin:
            await admin.create_partitions(topic_name, 4)

    asyncio.run(create())
    rows_ = pa.record_batch({"key": [b"k%d" % i for i in range(30)], "value": [b"v"] * 30})
    with ArrowProducer({"kafka.bootstrap.servers": broker.bootstrap, "topic": topic_name}) as producer:
        producer.write(rows_)
        producer.flush()
        asyncio.run(grow())
        producer.write(rows_)
        with pytest.raises(ProduceError) as refused:
            producer.flush()
    assert refused.value.error == ErrorCode.INVALID_PARTITION_METADATA
