"""Message formats v0 and v1 on pybroker beside Apache Kafka 3.9.2, given the same requests.

Clients older than Kafka 0.11 (and librdkafka told ``broker.version.fallback``) produce message
sets of magic 0 or 1 with Produce v0–2, read them with Fetch v0–3 and ask for offsets with
ListOffsets v0. Kafka 3.9 serves all three (converting to and from the v2 batches it stores);
librdkafka before 2.1 (Debian's kcat) also reads a Produce range that starts above v0 as "no
compression" and sends every batch uncompressed.

`script` sends hand-built message sets (each codec the standard library has, a bad CRC, a
compressed inner message, a wrapper beside another message, a v2 batch in an old version) and
summarizes every answer in broker-independent terms: error names, offsets, and each fetched
message decoded (a compressed wrapper with its inner messages), with the length of what follows
the last whole message (Kafka's overflow padding). The summaries of both brokers must be equal.
Then real clients: kcat with each codec, by default and with the 0.9 and 0.10 fallbacks.
"""

from __future__ import annotations

import asyncio
import gzip
import struct
import subprocess
import uuid
import zlib
from typing import Any

from pybroker.client.connection import BrokerConnection
from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    CreateTopicsRequest,
    FetchRequest,
    ListOffsetsRequest,
    ProduceRequest,
)
from tests.conftest import broker_connection
from tests.unit.batches import build_batch

GZIP = 1
SIZED_BY_CODEC = "(length set by compressed batches)"
TIMESTAMP_TYPE_BIT = 0x08


def message(magic: int, offset: int, key: bytes | None, value: bytes | None, timestamp: int = -1,
            attributes: int = 0) -> bytes:
    """One message of format ``magic`` (0 or 1) with its log entry header."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    body = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(body)) + body


def wrapper(magic: int, inner: list[bytes], last_offset: int, timestamp: int = -1) -> bytes:
    """A gzip wrapper message holding ``inner``."""
    return message(magic, last_offset, None, gzip.compress(b"".join(inner)), timestamp, GZIP)


def decode(data: bytes) -> dict[str, Any]:
    """The whole messages of a message set (a wrapper with its inner messages decoded) and how
    what follows them (see `_after`); ``fetch`` adds the exact size where the stored batches are
    uncompressed (compressed ones are not the same bytes on both brokers: Java's codecs are not
    Rust's)."""
    messages: list[dict[str, Any]] = []
    pos = 0
    while len(data) - pos >= 12:
        offset, size = struct.unpack_from(">qi", data, pos)
        if size < 14 or pos + 12 + size > len(data):
            break
        entry = data[pos + 12:pos + 12 + size]
        crc, magic, attributes = struct.unpack_from(">Ibb", entry)
        at = 6
        timestamp = None
        if magic == 1:
            (timestamp,) = struct.unpack_from(">q", entry, at)
            at += 8
        fields: list[bytes | None] = []
        for _ in range(2):
            (length,) = struct.unpack_from(">i", entry, at)
            at += 4
            fields.append(None if length < 0 else entry[at:at + length])
            at += max(length, 0)
        decoded: dict[str, Any] = {"offset": offset, "magic": magic, "attributes": attributes,
                                   "timestamp": timestamp, "crc_ok": crc == zlib.crc32(entry[4:]),
                                   "key": fields[0]}
        if attributes & 0x07 == GZIP:
            decoded["inner"] = decode(gzip.decompress(fields[1] or b""))["messages"]
        else:
            decoded["value"] = fields[1]
        messages.append(decoded)
        pos += 12 + size
    return {"messages": messages, "after": _after(data[pos:])}


def _after(rest: bytes) -> str | int:
    """What follows the whole messages: nothing (0), Kafka's overflow padding ("overflow": offset
    -1 and a length one past the response), or the start of a message cut off ("cut")."""
    if not rest:
        return 0
    if len(rest) >= 12:
        offset, length = struct.unpack_from(">qi", rest)
        if offset == -1 and length == max(len(rest) + 1, 61):
            return "overflow"
    return "cut"


async def create(connection: BrokerConnection, topic: str, **configs: str) -> None:
    response = await connection.send(ApiKey.CREATE_TOPICS, CreateTopicsRequest(topics=[
        CreateTopicsRequest.CreatableTopic(name=topic, num_partitions=1, replication_factor=1, assignments=[],
                                           configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                                                    for k, v in configs.items()])],
        timeout_ms=30_000, validate_only=False), version=4)
    assert response.topics[0].error_code == 0, response


async def produce(connection: BrokerConnection, topic: str, records: bytes, version: int) -> tuple[str, int, int]:
    request = ProduceRequest(acks=1, timeout_ms=10_000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)])])
    for _ in range(100):
        answer = (await connection.send(ApiKey.PRODUCE, request, version=version)).responses[0].partition_responses[0]
        if answer.error_code not in (ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER):
            break
        await asyncio.sleep(0.1)
    return ErrorCode(answer.error_code).name, answer.base_offset, answer.log_append_time_ms


async def fetch(connection: BrokerConnection, topic: str, offset: int, version: int,
                max_bytes: int = 1 << 20, exact: bool = False) -> dict[str, Any]:
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, isolation_level=0,
                           session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[
                               FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                                   partition=0, fetch_offset=offset, log_start_offset=-1,
                                   partition_max_bytes=max_bytes)])])
    answer = (await connection.send(ApiKey.FETCH, request, version=version)).responses[0].partitions[0]
    records = bytes(answer.records or b"")
    return {"error": ErrorCode(answer.error_code).name, "high_watermark": answer.high_watermark,
            **decode(records), "size": len(records) if exact else None}


async def list_offsets_v0(connection: BrokerConnection, topic: str, timestamp: int, count: int,
                          partition: int = 0) -> tuple[str, list[int]]:
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
            partition_index=partition, timestamp=timestamp, max_num_offsets=count)])])
    answer = (await connection.send(ApiKey.LIST_OFFSETS, request, version=0)).topics[0].partitions[0]
    return ErrorCode(answer.error_code).name, list(answer.old_style_offsets)


async def script(bootstrap: str) -> list[tuple[str, Any]]:
    """The same requests to one broker; (step, answer) in order."""
    connection = await broker_connection(bootstrap)
    run = uuid.uuid4().hex[:8]
    topic, plain = f"legacy-{run}", f"legacy-plain-{run}"
    zstd, no_conversion = f"legacy-zstd-{run}", f"legacy-none-{run}"
    steps: list[tuple[str, Any]] = []
    try:
        await create(connection, topic)
        await create(connection, zstd, **{"compression.type": "zstd"})
        await create(connection, no_conversion, **{"message.downconversion.enable": "false"})
        v0_set = [message(0, 0, b"k0", b"a"), message(0, 1, None, b"bb"), message(0, 2, b"", None)]
        steps.append(("produce v0, magic 0", await produce(connection, topic, b"".join(v0_set), 0)))
        inner_v0 = [message(0, 0, b"k", b"c"), message(0, 1, b"k", b"d")]
        steps.append(("produce v1, magic 0 gzip", await produce(connection, topic, wrapper(0, inner_v0, 1), 1)))
        v1_set = [message(1, 0, b"k1", b"e", 1_000), message(1, 1, None, b"f", 1_002)]
        steps.append(("produce v2, magic 1", await produce(connection, topic, b"".join(v1_set), 2)))
        inner_v1 = [message(1, 0, b"g", b"g", 2_000), message(1, 1, b"h", b"h", 2_001), message(1, 2, None, b"i", 1_999)]
        steps.append(("produce v2, magic 1 gzip", await produce(connection, topic, wrapper(1, inner_v1, 2, 2_001), 2)))
        steps.append(("produce v2, a magic 2 batch",
                      await produce(connection, topic, build_batch([(b"j", b"j")], base_timestamp=3_000), 2)))
        corrupt = bytearray(message(1, 0, None, b"x", 5))
        corrupt[-1] ^= 1
        steps.append(("produce v2, bad CRC", await produce(connection, topic, bytes(corrupt), 2)))
        nested = wrapper(1, [wrapper(1, [message(1, 0, None, b"y", 6)], 0, 6)], 0, 6)
        steps.append(("produce v2, compressed inner message", await produce(connection, topic, nested, 2)))
        beside = wrapper(1, [message(1, 0, None, b"z", 7)], 0, 7) + message(1, 1, None, b"z", 7)
        steps.append(("produce v2, wrapper beside a message", await produce(connection, topic, beside, 2)))
        for version in (0, 1, 2, 3):
            steps.append((f"fetch v{version} from 0 {SIZED_BY_CODEC}", await fetch(connection, topic, 0, version)))
        steps.append(("fetch v3 from 1, inside the first set", await fetch(connection, topic, 1, 3)))
        steps.append(("fetch v3 from 4, inside the magic 0 gzip set", await fetch(connection, topic, 4, 3)))
        steps.append(("fetch v2 from 0, 100 bytes", await fetch(connection, topic, 0, 2, max_bytes=100)))
        await create(connection, plain)
        steps.append(("produce v0, plain topic", await produce(connection, plain, b"".join(v0_set), 0)))
        steps.append(("produce v2, plain topic", await produce(connection, plain, b"".join(v1_set), 2)))
        for offset in (0, 1, 3, 4):
            for version in (1, 3):
                steps.append((f"fetch v{version} from {offset}, plain topic",
                              await fetch(connection, plain, offset, version, exact=True)))
        for version in (1, 2, 3):  # a first batch over the limit: none up to v2, whole from v3
            steps.append((f"fetch v{version} from 0 with 20 bytes, plain topic",
                          await fetch(connection, plain, 0, version, max_bytes=20, exact=True)))
        steps.append(("produce v2 to zstd topic",
                      await produce(connection, zstd, b"".join(v1_set), 2)))
        steps.append(("fetch v3 of zstd topic", await fetch(connection, zstd, 0, 3)))
        steps.append(("produce v2 to no-conversion topic", await produce(connection, no_conversion, b"".join(v1_set), 2)))
        steps.append(("fetch v3 of no-conversion topic", await fetch(connection, no_conversion, 0, 3)))
        for timestamp, count in ((-1, 1), (-1, 5), (-2, 1), (-2, 5), (0, 5), (-3, 1)):
            steps.append((f"list offsets v0 {timestamp} max {count}",
                          await list_offsets_v0(connection, topic, timestamp, count)))
        steps.append(("list offsets v0 unknown partition", await list_offsets_v0(connection, topic, -1, 1, 7)))
    finally:
        await connection.close()
    return steps


def test_pybroker_answers_message_formats_0_and_1_as_kafka(broker, kafka):
    ours, theirs = asyncio.run(script(broker.bootstrap)), asyncio.run(script(kafka.bootstrap))
    assert [step for step, _ in ours] == [step for step, _ in theirs]
    for (step, mine), (_, kafkas) in zip(ours, theirs, strict=True):
        if SIZED_BY_CODEC in step:
            # The answer is as long as the stored batches read, some of them gzip'd by the broker:
            # Java's gzip and Rust's give other sizes, so one broker may fit a message more.
            mine, kafkas = dict(mine), dict(kafkas)
            kept = min(len(mine["messages"]), len(kafkas["messages"]))
            assert kept >= 7, step  # every shallow message but the last two at least
            for answer in (mine, kafkas):
                answer["messages"] = answer["messages"][:kept]
                answer.pop("after")
        assert mine == kafkas, step
    answers = dict(ours)
    # What the comparison covers, spelled out: the conversions happened and the errors are Kafka's.
    assert answers["produce v0, magic 0"] == ("NONE", 0, -1)
    assert answers["produce v2, bad CRC"][0] == "CORRUPT_MESSAGE"
    assert answers["produce v2, compressed inner message"][0] == "INVALID_RECORD"
    fetched = answers[f"fetch v3 from 0 {SIZED_BY_CODEC}"]["messages"]
    assert [m["offset"] for m in fetched][:3] == [0, 1, 2] and all(m["magic"] == 1 for m in fetched)
    assert answers["fetch v2 from 0 with 20 bytes, plain topic"]["size"] == 0
    assert answers["fetch v3 from 0 with 20 bytes, plain topic"]["size"] > 20
    assert answers["fetch v3 of zstd topic"]["error"] == "UNSUPPORTED_COMPRESSION_TYPE"
    assert answers["fetch v3 of no-conversion topic"]["error"] == "UNSUPPORTED_VERSION"


# --- real clients ------------------------------------------------------------------------------

CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
LINES = [b"line-%03d-" % i + b"x" * 100 for i in range(40)]


def stored_codecs(bootstrap: str, topic: str) -> set[int]:
    """The codec of every batch the broker stores for ``topic``-0 (a Fetch v4 reads them as they are)."""
    async def read() -> set[int]:
        connection = await broker_connection(bootstrap)
        try:
            request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                                   topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                                       partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
            answer = (await connection.send(ApiKey.FETCH, request, version=4)).responses[0].partitions[0]
        finally:
            await connection.close()
        data, pos, codecs = bytes(answer.records or b""), 0, set()
        while pos + 61 <= len(data):
            codecs.add(struct.unpack_from(">h", data, pos + 21)[0] & 0x07)
            pos += struct.unpack_from(">i", data, pos + 8)[0] + 12
        return codecs

    return asyncio.run(read())


def kcat(bootstrap: str, *args: str, data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["kcat", "-b", bootstrap, *args], input=data, capture_output=True, timeout=60)


def kcat_rounds(bootstrap: str) -> dict[str, Any]:
    """Per codec: what kcat's producer logged about compression and what the broker stored, by
    default; and, with the 0.9 and 0.10 fallbacks (message formats 0 and 1), the values a kcat
    consumer of the same fallback reads back."""
    seen: dict[str, Any] = {}
    for codec in CODECS:
        topic = f"kcat-{codec}-{uuid.uuid4().hex[:6]}"
        produced = kcat(bootstrap, "-P", "-t", topic, "-z", codec, data=b"\n".join(LINES))
        assert produced.returncode == 0, produced.stderr
        seen[f"{codec} default"] = ("not compressing" in produced.stderr.decode(), stored_codecs(bootstrap, topic))
    for fallback in ("0.9.0.0", "0.10.0.0"):
        legacy = ("-X", "api.version.request=false", "-X", f"broker.version.fallback={fallback}")
        for codec in ("none", "gzip", "snappy", "lz4"):
            topic = f"kcat-{codec}-{fallback.replace('.', '-')}-{uuid.uuid4().hex[:6]}"
            produced = kcat(bootstrap, "-P", "-t", topic, "-z", codec, *legacy, data=b"\n".join(LINES))
            assert produced.returncode == 0, produced.stderr
            consumed = kcat(bootstrap, "-C", "-t", topic, "-e", "-q", "-f", "%o %s\\n", *legacy)
            assert consumed.returncode == 0, consumed.stderr
            seen[f"{codec} fallback {fallback}"] = (consumed.stdout.split(b"\n")[:-1], stored_codecs(bootstrap, topic))
    return seen


def test_kcat_compresses_and_old_formats_round_trip_as_on_kafka(broker, kafka):
    ours, theirs = kcat_rounds(broker.bootstrap), kcat_rounds(kafka.bootstrap)
    for codec, number in CODECS.items():
        assert ours[f"{codec} default"] == (False, {number}), codec
    expected = [b"%d %s" % (offset, line) for offset, line in enumerate(LINES)]
    for key, (values, codecs) in ours.items():
        if "fallback" in key:
            assert values == expected, key
            assert codecs == {CODECS.get(key.split()[0], 0)}, key
    assert ours == theirs
