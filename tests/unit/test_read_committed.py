"""read_committed on the client side: the group consumer drops the records of aborted
transactions per batch (``fetcher.aborted_ranges``, Kafka's ``CompletedFetch`` rule) exactly as
the native decoder used by the Spark reader does, positions move past markers, and the Spark
source plans with the last stable offset."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from pybroker import _native
from pybroker.client.admin import ListedOffset
from pybroker.client.fetcher import READ_COMMITTED, aborted_ranges, drop_ranges
from pybroker.client.kafka_consumer import KafkaConsumer, _Partition
from pybroker.types import TopicPartition

TP = TopicPartition("t", 0)


def at(batch: bytes, base_offset: int) -> bytes:
    """``batch`` moved to ``base_offset`` (baseOffset is outside the CRC)."""
    return base_offset.to_bytes(8, "big") + batch[8:]


def data(base: int, values: list[bytes], producer_id: int = -1, sequence: int = -1) -> bytes:
    return _native.build_batch([(None, v) for v in values], 1000, base_offset=base, producer_id=producer_id,
                               producer_epoch=0 if producer_id >= 0 else -1, base_sequence=sequence,
                               transactional=producer_id >= 0)


def marker(base: int, producer_id: int, commit: bool) -> bytes:
    return at(_native.build_control_batch(producer_id, 0, 0, commit, 1000), base)


# offsets 0-1 plain; 2-3 producer 10 (aborted at 6); 4-5 producer 11 (committed at 7);
# 8-9 producer 10's next transaction (committed at 10); 11-12 producer 12 (aborted at 13)
LOG = b"".join([
    data(0, [b"p0", b"p1"]),
    data(2, [b"a2", b"a3"], 10, 0),
    data(4, [b"c4", b"c5"], 11, 0),
    marker(6, 10, commit=False),
    marker(7, 11, commit=True),
    data(8, [b"n8", b"n9"], 10, 2),
    marker(10, 10, commit=True),
    data(11, [b"x11", b"x12"], 12, 0),
    marker(13, 12, commit=False),
])
ABORTED = [(12, 11), (10, 2)]  # as a leader lists them (any order)
COMMITTED_OFFSETS = [0, 1, 4, 5, 8, 9]


def test_aborted_ranges_follow_kafkas_rule():
    info = _native.validate_replicated_batches(LOG, -1)
    assert aborted_ranges(info.producer_batches, ABORTED) == [(2, 3), (11, 12)]
    assert aborted_ranges(info.producer_batches, []) == []
    records = _native.read_records(LOG)
    kept = drop_ranges(records, aborted_ranges(info.producer_batches, ABORTED))
    assert [r[0] for r in kept] == COMMITTED_OFFSETS


def test_the_native_decoder_agrees():
    decoded = _native.decode_record_batches(LOG, 0, -1, False, ABORTED)
    offsets = [int.from_bytes(decoded.offsets[i:i + 8], "little") for i in range(0, len(decoded.offsets), 8)]
    assert offsets == COMMITTED_OFFSETS and decoded.next_offset == 14
    assert _native.decode_record_batches(LOG, 0, -1, False).count == 10  # read_uncommitted: every data record


def test_drop_ranges_edges():
    records = [(o, 0, None, None) for o in (3, 4, 7, 9, 10)]
    assert drop_ranges(records, []) is records
    assert [r[0] for r in drop_ranges(records, [(0, 3), (8, 9)])] == [4, 7, 10]
    assert drop_ranges(records, [(0, 100)]) == []
    assert [r[0] for r in drop_ranges(records, [(5, 6)])] == [3, 4, 7, 9, 10]


@pytest.mark.parametrize(("level", "expected"), [("read_committed", COMMITTED_OFFSETS),
                                                 ("read_uncommitted", [0, 1, 2, 3, 4, 5, 8, 9, 11, 12])])
def test_consumer_drops_aborted_records_and_moves_past_markers(level: str, expected: list[int]):
    consumer = KafkaConsumer({"group.id": "g", "isolation.level": level})
    assert (consumer.fetch_config.isolation_level == READ_COMMITTED) == (level == "read_committed")
    state = _Partition()
    state.position = state.fetch_offset = 0
    consumer._partitions[TP] = state
    aborted = [SimpleNamespace(producer_id=p, first_offset=o) for p, o in ABORTED]
    consumer._fetched(TP, state, LOG + LOG[:30], aborted)  # a partial batch at the end, as fetches end
    assert [r[0] for r in state.records] == expected
    assert state.fetch_offset == 14
    delivered = consumer._collect(100)
    assert [r.offset for r in delivered] == expected
    assert state.position == 14  # past the last marker


def test_group_metadata():
    consumer = KafkaConsumer({"group.id": "g"})
    assert consumer.group_metadata().group_id == "g" and consumer.group_metadata().generation_id == -1
    consumer.subscribe(["t"])
    coordinator = consumer._coordinator
    assert coordinator is not None
    coordinator.generation, coordinator.member_id = 5, "m-1"
    metadata = consumer.group_metadata()
    assert (metadata.group_id, metadata.generation_id, metadata.member_id, metadata.group_instance_id) == ("g", 5, "m-1", None)
    with pytest.raises(ValueError, match="group.id"):
        KafkaConsumer({}).group_metadata()


def test_spark_options_and_planning_use_the_isolation_level():
    pytest.importorskip("pyspark")
    from pybroker.spark import planning
    from pybroker.spark.options import source_options

    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    assert source_options(base, streaming=False).isolation_level == 0
    assert source_options({**base, "kafka.isolation.level": "read_committed"}, streaming=False).isolation_level == 1
    with pytest.raises(ValueError, match="isolation.level"):
        source_options({**base, "kafka.isolation.level": "committed"}, streaming=False)

    asked: list[tuple[object, int]] = []

    class Admin:
        async def list_offsets(self, tps: list[TopicPartition], spec: object, isolation_level: int = 0) -> dict:
            asked.append((spec, isolation_level))
            return {tp: ListedOffset(7, -1, None) for tp in tps}

    loop = asyncio.new_event_loop()
    client = SimpleNamespace(admin=Admin(), run=loop.run_until_complete)
    try:
        assert planning.offset_bounds(client, [TP], 1) == ({TP: 7}, {TP: 7})  # type: ignore[arg-type]
    finally:
        loop.close()
    assert asked == [("earliest", 1), ("latest", 1)]
