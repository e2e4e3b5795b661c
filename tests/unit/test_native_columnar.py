"""Tests of ``_native.encode_partitioned_batches`` and ``_native.decode_record_batches``, the
Arrow-columnar record I/O of the clients (the PySpark data source).

Arrays come from pyarrow (including sliced ones, whose buffers start before their data). Encoded
batches are checked against the broker's own readers (``validate_batches``, ``read_records``)
and against kafka-python's independent record-batch reader and builder, which also decompress
with independent codec libraries.
"""

from __future__ import annotations

import struct

import pytest

pa = pytest.importorskip("pyarrow")

from kafka.record.default_records import (  # noqa: E402
    DefaultRecordBatch,
    DefaultRecordBatchBuilder,
)

from pybroker import _native  # noqa: E402
from pybroker.common.errors import CorruptRecordError  # noqa: E402

TS = 1_700_000_000_000
CODECS = [0, 1, 2, 3, 4]
HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


# --- Arrow arrays → the tuples the native functions take ---------------------------------------


def binary_arg(arr: pa.Array) -> tuple:
    validity, offsets, data = arr.buffers()[:3]
    return (validity, offsets, data, arr.offset, len(arr))


def headers_arg(arr: pa.ListArray) -> tuple:
    keys, values = arr.values.flatten()
    validity, offsets = arr.buffers()[:2]
    return (validity, offsets, arr.offset, binary_arg(keys), binary_arg(values))


def int32_arg(arr: pa.Array) -> tuple:
    validity, data = arr.buffers()[:2]
    return (validity, data, arr.offset)


def encode(values, keys=None, headers=None, partitions=None, **kw) -> list:
    args = dict(
        num_partitions=1,
        sticky_partition=0,
        timestamp=TS,
        batch_size=1 << 20,
        compression=0,
    )
    args.update(kw)
    return _native.encode_partitioned_batches(
        binary_arg(values),
        None if keys is None else binary_arg(keys),
        None if headers is None else headers_arg(headers),
        None if partitions is None else int32_arg(partitions),
        **args,
    )


# --- decoded buffers → Arrow arrays, as documented in _native.pyi ------------------------------


def _buf(b: bytes | None):
    return None if b is None else pa.py_buffer(b)


def decoded_arrays(d: _native.DecodedRecords) -> dict[str, pa.Array]:
    n = d.count
    out = {
        "offset": pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(d.offsets)]),
        "timestamp": pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(d.timestamps)]),
        "timestamp_type": pa.Array.from_buffers(
            pa.int32(), n, [None, pa.py_buffer(d.timestamp_types)]
        ),
        "key": pa.Array.from_buffers(
            pa.binary(), n, [_buf(d.key_validity), _buf(d.key_offsets), _buf(d.key_data)]
        ),
        "value": pa.Array.from_buffers(
            pa.binary(), n, [_buf(d.value_validity), _buf(d.value_offsets), _buf(d.value_data)]
        ),
    }
    if d.header_list_offsets is not None:
        total = struct.unpack_from("<i", d.header_list_offsets, 4 * n)[0]
        hkeys = pa.Array.from_buffers(
            pa.binary(), total, [None, _buf(d.header_key_offsets), _buf(d.header_key_data)]
        )
        hvalues = pa.Array.from_buffers(
            pa.binary(),
            total,
            [
                _buf(d.header_value_validity),
                _buf(d.header_value_offsets),
                _buf(d.header_value_data),
            ],
        )
        items = pa.StructArray.from_arrays([hkeys.cast(pa.string()), hvalues], ["key", "value"])
        list_offsets = pa.Array.from_buffers(
            pa.int32(), n + 1, [None, pa.py_buffer(d.header_list_offsets)]
        )
        out["headers"] = pa.ListArray.from_arrays(list_offsets, items)
    for arr in out.values():
        arr.validate(full=True)
    return out


def decode_all(batches: list[bytes], start: int = 0, end: int = -1, headers: bool = True):
    return _native.decode_record_batches(b"".join(batches), start, end, headers)


# --- sample data ------------------------------------------------------------------------------


def sample(n: int = 40) -> tuple[pa.Array, pa.Array, pa.ListArray]:
    """Keys, values and headers with nulls, empties and a large value."""
    keys = [None if i % 5 == 0 else f"key-{i}".encode() for i in range(n)]
    keys[3] = b""
    values = [None if i % 7 == 3 else bytes([i % 256]) * (i * 13 % 200) for i in range(n)]
    values[11] = bytes(range(256)) * 300
    headers = []
    for i in range(n):
        if i % 4 == 0:
            headers.append(None)
        elif i % 4 == 1:
            headers.append([])
        else:
            headers.append(
                [
                    {"key": f"h{j}", "value": None if j == 1 else f"v{i}-{j}".encode()}
                    for j in range(i % 4)
                ]
            )
    return (
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.array(headers, HEADER_TYPE),
    )


def as_wire_headers(headers: pa.ListArray) -> pa.ListArray:
    """What a decode gives back for ``headers``: a null list becomes an empty one."""
    return pa.array([[] if h is None else h for h in headers.to_pylist()], HEADER_TYPE)


# --- encode → decode ---------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(codec):
    keys, values, headers = sample()
    result = encode(values, keys, headers, compression=codec)
    assert len(result) == 1
    partition, batches, count = result[0]
    assert (partition, count) == (0, len(values))
    d = decode_all(batches)
    assert d.count == len(values)
    assert d.next_offset == len(values)
    got = decoded_arrays(d)
    assert got["offset"].to_pylist() == list(range(len(values)))
    assert got["timestamp"].to_pylist() == [TS] * len(values)
    assert got["timestamp_type"].to_pylist() == [0] * len(values)
    assert got["key"].equals(keys)
    assert got["value"].equals(values)
    assert got["headers"].equals(as_wire_headers(headers))


@pytest.mark.parametrize("codec", CODECS)
def test_batches_accepted_by_the_broker_and_kafka_python(codec):
    keys, values, headers = sample()
    ((_, batches, _),) = encode(values, keys, headers, compression=codec, batch_size=2000)
    assert len(batches) > 1
    data = b"".join(batches)
    info = _native.validate_batches(data, 1 << 30)
    assert info.batch_count == len(batches)
    assert info.record_count == len(values)
    assert info.compression == codec
    # The broker's record reader (offsets restart at 0 in each batch: base offset 0).
    read = _native.read_records(data)
    assert [(k, v) for _, _, k, v in read] == list(
        zip(keys.to_pylist(), values.to_pylist(), strict=True)
    )
    # kafka-python: an independent reader with its own decompressors.
    seen = []
    for batch in batches:
        b = DefaultRecordBatch(batch)
        assert b.validate_crc()
        assert b.compression_type == codec
        for r in b:
            seen.append(
                (r.key, r.value, [(k, bytes(v) if v is not None else None) for k, v in r.headers])
            )
    expected_headers = [[(h["key"], h["value"]) for h in (hs or [])] for hs in headers.to_pylist()]
    assert seen == list(zip(keys.to_pylist(), values.to_pylist(), expected_headers, strict=True))


@pytest.mark.parametrize("codec", CODECS)
def test_decodes_batches_built_by_kafka_python(codec):
    builder = DefaultRecordBatchBuilder(2, codec, False, 12, 3, 40, 1 << 20)
    records = [
        (
            b"k%d" % i if i % 3 else None,
            b"value-%d" % i * (i % 9) if i % 5 else None,
            [("h", b"x")] if i % 2 else [],
        )
        for i in range(50)
    ]
    for i, (k, v, h) in enumerate(records):
        builder.append(i, TS + i, k, v, h)
    data = bytes(builder.build())
    d = _native.decode_record_batches(data, 0, -1, True)
    got = decoded_arrays(d)
    assert got["offset"].to_pylist() == list(range(50))
    assert got["timestamp"].to_pylist() == [TS + i for i in range(50)]
    assert got["key"].to_pylist() == [k for k, _, _ in records]
    assert got["value"].to_pylist() == [v for _, v, _ in records]
    assert got["headers"].to_pylist() == [
        [{"key": k, "value": v} for k, v in h] for _, _, h in records
    ]


def test_sliced_arrays_and_string_type():
    keys, values, headers = sample(60)
    keys, values, headers = keys.slice(7, 40), values.slice(7, 40), headers.slice(7, 40)
    assert keys.offset == values.offset == headers.offset == 7
    ((_, batches, _),) = encode(values, keys, headers)
    got = decoded_arrays(decode_all(batches))
    assert got["key"].equals(keys)
    assert got["value"].equals(values)
    assert got["headers"].equals(as_wire_headers(headers))
    # Different slices per column (the struct child too) and string arrays.
    strings = pa.array([f"s{i}" if i % 3 else None for i in range(30)], pa.string())[5:25]
    ((_, batches, _),) = encode(strings, None, None)
    got = decoded_arrays(decode_all(batches, headers=False))
    assert got["value"].cast(pa.string()).equals(strings)
    assert got["key"].null_count == 20


def test_headers_from_a_sliced_struct_child():
    # A list array whose child struct array itself has an offset.
    items = pa.array(
        [{"key": f"k{i}", "value": b"%d" % i} for i in range(10)],
        pa.struct([("key", pa.string()), ("value", pa.binary())]),
    ).slice(3)
    lists = pa.ListArray.from_arrays(pa.array([0, 2, 2, 5], pa.int32()), items)
    values = pa.array([b"a", b"b", b"c"])
    ((_, batches, _),) = encode(values, None, lists)
    assert decoded_arrays(decode_all(batches))["headers"].to_pylist() == lists.to_pylist()


def test_decode_without_headers():
    keys, values, headers = sample()
    ((_, batches, _),) = encode(values, keys, headers)
    d = decode_all(batches, headers=False)
    for name in (
        "header_list_offsets",
        "header_key_offsets",
        "header_key_data",
        "header_value_validity",
        "header_value_offsets",
        "header_value_data",
    ):
        assert getattr(d, name) is None
    assert decoded_arrays(d)["value"].equals(values)
    assert "DecodedRecords(count=40" in repr(d)


def test_no_nulls_gives_no_validity():
    values = pa.array([b"a", b"bb"])
    ((_, batches, _),) = encode(values, values, None)
    d = decode_all(batches)
    assert d.key_validity is None and d.value_validity is None
    assert d.header_value_validity is None
    assert d.header_list_offsets == bytes(12)
    assert d.key_offsets == struct.pack("<3i", 0, 1, 3)
    assert d.key_data == b"abb"


# --- partitioning ------------------------------------------------------------------------------

# org.apache.kafka.common.utils.UtilsTest#testMurmur2 (Java's Utils.murmur2).
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


def test_partitioner_matches_java_murmur2_vectors():
    # With 2**31 - 1 partitions the partition is toPositive(murmur2(key)) itself (mod 2**31 - 1),
    # so all 31 bits of the hash are checked.
    n = 2**31 - 1
    keys = list(JAVA_MURMUR2)
    result = encode(pa.array([b"v"] * len(keys)), pa.array(keys), num_partitions=n)
    got = {}
    for partition, batches, _ in result:
        for _, _, key, _ in _native.read_records(b"".join(batches)):
            got[key] = partition
    assert got == {k: (h & 0x7FFFFFFF) % n for k, h in JAVA_MURMUR2.items()}


def test_partitioner_matches_kafka_python_on_arbitrary_bytes():
    from kafka.partitioner.default import murmur2

    keys = [bytes((i * 37 + j * 101) % 256 for j in range(i % 23)) for i in range(500)]
    num = 13
    result = encode(pa.array([b"v%d" % i for i in range(500)]), pa.array(keys), num_partitions=num)
    expected: dict[int, list[int]] = {}
    for i, k in enumerate(keys):
        expected.setdefault((murmur2(k) & 0x7FFFFFFF) % num, []).append(i)
    assert [p for p, _, _ in result] == sorted(expected)
    for partition, batches, count in result:
        values = [v for _, _, _, v in _native.read_records(b"".join(batches))]
        assert values == [b"v%d" % i for i in expected[partition]]  # input order kept
        assert count == len(expected[partition])


def test_keys_go_by_linear_hashing_once_the_topic_has_grown():
    """Topic created with 3 partitions, now 7 undeleted: every key lands where
    ``LinearHashing(3, 7)`` puts it, ``h % 6`` unless that is below the split pointer 1."""
    from kafka.partitioner.default import murmur2

    keys = [b"key-%d" % i for i in range(600)]
    result = encode(pa.array([b"v"] * 600), pa.array(keys), num_partitions=7, initial_partitions=3)
    got = {key: partition for partition, batches, _ in result
           for _, _, key, _ in _native.read_records(b"".join(batches))}
    hashing = _native.LinearHashing(3, 7)
    for key in keys:
        h = murmur2(key) & 0x7FFFFFFF
        assert got[key] == hashing.partition_for_key(key) == (h % 12 if h % 6 < 1 else h % 6)
    assert set(got.values()) == set(range(7))


def test_initial_partitions_out_of_range():
    values, keys = pa.array([b"v"]), pa.array([b"k"])
    for initial in (0, -1, 5):
        with pytest.raises(ValueError, match="partition_count"):
            encode(values, keys, num_partitions=4, initial_partitions=initial)


def test_linear_hashing_from_python():
    grown = _native.LinearHashing(3, 12)
    assert (grown.initial_partition_count, grown.undeleted_partition_count) == (3, 12)
    # Growing 3 -> 12: each added partition takes its keys from one of the first three.
    first = _native.LinearHashing(3, 3)
    assert [first.split_source(q) for q in range(3, 12)] == [0, 1, 2, 0, 1, 2, 0, 1, 2]
    # Shrinking 12 -> 7: partitions 7..11 drain into 1..5, one each.
    shrunk = _native.LinearHashing(3, 7)
    assert [shrunk.drained_into(p, 12) for p in range(7)] == [[], [7], [8], [9], [10], [11], []]
    for initial, undeleted in ((0, 3), (4, 3), (1, 2**31)):
        with pytest.raises(ValueError):
            _native.LinearHashing(initial, undeleted)


def test_explicit_and_sticky_partitions():
    keys = pa.array([b"a", None, b"b", None, None])
    values = pa.array([b"0", b"1", b"2", b"3", b"4"])
    partitions = pa.array([None, 2, 3, None, 1], pa.int32())
    result = encode(values, keys, None, partitions, num_partitions=4, sticky_partition=2)
    got = {p: [v for *_, v in _native.read_records(b"".join(b))] for p, b, _ in result}
    # Record 0 (key b"a", null partition) goes where the partitioner puts b"a"; records 1 and 3
    # (null key, null / explicit 2) share partition 2, record 3 with the sticky partition.
    ((p_a, _, _),) = encode(pa.array([b"0"]), pa.array([b"a"]), num_partitions=4)
    expected: dict[int, list[bytes]] = {2: [b"1", b"3"], 3: [b"2"], 1: [b"4"]}
    expected[p_a] = sorted(expected.get(p_a, []) + [b"0"])  # input order = value order here
    assert got == expected
    assert [p for p, _, _ in result] == sorted(expected)


def test_explicit_partition_out_of_range():
    values = pa.array([b"a", b"b", b"c"])
    with pytest.raises(ValueError, match="record 2: partition 4 is outside"):
        encode(values, partitions=pa.array([0, 1, 4], pa.int32()), num_partitions=4)
    with pytest.raises(ValueError, match="record 0: partition -1"):
        encode(values, partitions=pa.array([-1, 1, 2], pa.int32()), num_partitions=4)
    # Sliced partitions column.
    parts = pa.array([9, 0, 1, 2], pa.int32()).slice(1)
    assert [p for p, _, _ in encode(values, partitions=parts, num_partitions=3)] == [0, 1, 2]


# --- batching and sequences ---------------------------------------------------------------------


def test_batch_size_and_base_sequences():
    values = pa.array([b"x" * 100] * 1000)
    result = encode(
        values,
        partitions=pa.array([i % 2 for i in range(1000)], pa.int32()),
        num_partitions=2,
        batch_size=16384,
        producer_id=5,
        producer_epoch=1,
        base_sequences=[100, 2**31 - 50],
    )
    for partition, batches, count in result:
        assert count == 500
        assert all(len(b) <= 16384 for b in batches)
        expected_sequence = [100, 2**31 - 50][partition]
        for b in batches:
            h = DefaultRecordBatch(b)
            assert (h.producer_id, h.producer_epoch) == (5, 1)
            assert h.base_sequence == expected_sequence
            expected_sequence = (expected_sequence + h.records_count) % 2**31
            # Full batches: one more record would not have fitted. With offsetDelta >= 64 it
            # takes 110 bytes: length varint 2, attributes, timestampDelta, offsetDelta 2,
            # null key, value length 2, value 100, headerCount.
            if b is not batches[-1]:
                assert h.records_count > 64
                assert len(b) + 110 > 16384
    oversize = encode(pa.array([b"a", b"b" * 5000, b"c"]), batch_size=1000)
    assert [DefaultRecordBatch(b).records_count for b in oversize[0][1]] == [1, 1, 1]


def test_no_sequences_by_default():
    ((_, batches, _),) = encode(pa.array([b"a"]))
    h = DefaultRecordBatch(batches[0])
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (-1, -1, -1)
    assert (h.first_timestamp, h.max_timestamp) == (TS, TS)
    assert h.last_offset_delta == 0


# --- decode: offsets, partial tails, damage ----------------------------------------------------


def fetched() -> bytes:
    """Batches at offsets 100..109 and 110..119 (lz4), as a fetch returns them."""
    ((_, first, _),) = encode(pa.array([b"a%d" % i for i in range(10)]))
    ((_, second, _),) = encode(pa.array([b"b%d" % i for i in range(10)]), compression=3)
    data = bytearray(first[0] + second[0])
    struct.pack_into(">q", data, 0, 100)
    struct.pack_into(">q", data, len(first[0]), 110)  # the CRC does not cover baseOffset
    return bytes(data)


def test_offset_range_and_next_offset():
    data = fetched()
    d = _native.decode_record_batches(data, 105, 113, False)
    got = decoded_arrays(d)
    assert got["offset"].to_pylist() == list(range(105, 113))
    assert got["value"].to_pylist() == [b"a%d" % i for i in range(5, 10)] + [b"b0", b"b1", b"b2"]
    assert d.next_offset == 120
    assert _native.decode_record_batches(data, 0, -1, False).count == 20
    assert _native.decode_record_batches(data, 200, -1, False).next_offset == 200
    empty = _native.decode_record_batches(b"", 7, -1, True)
    assert (empty.count, empty.next_offset, empty.offsets) == (0, 7, b"")
    assert empty.value_offsets == bytes(4) and empty.header_list_offsets == bytes(4)


def test_partial_tail_is_ignored():
    data = fetched()
    first_size = struct.unpack_from(">i", data, 8)[0] + 12
    for cut in (first_size + 5, first_size + 12, first_size + 61, len(data) - 1):
        d = _native.decode_record_batches(data[:cut], 100, -1, False)
        assert decoded_arrays(d)["offset"].to_pylist() == list(range(100, 110))
        assert d.next_offset == 110
    d = _native.decode_record_batches(data[: first_size - 1], 100, -1, False)
    assert (d.count, d.next_offset) == (0, 100)


def test_corrupt_batches_raise():
    data = bytearray(fetched())
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        _native.decode_record_batches(bytes(data), 0, -1, False)
    data = bytearray(fetched())
    data[16] = 1  # magic
    with pytest.raises(CorruptRecordError, match="magic"):
        _native.decode_record_batches(bytes(data), 0, -1, False)


# --- argument checking ---------------------------------------------------------------------------


def test_inconsistent_buffers_raise_value_error():
    values = pa.array([b"abc", b"de", None])
    validity, offsets, data = values.buffers()
    base = dict(num_partitions=1, sticky_partition=0, timestamp=TS, batch_size=100, compression=0)
    bad = [
        (validity, offsets, data, 0, 4),  # longer than the buffers
        (validity, offsets, data, 2, 2),
        (validity, offsets, pa.py_buffer(b"ab"), 0, 3),  # offsets past the data
        (validity, pa.py_buffer(struct.pack("<4i", 0, 3, 1, 5)), data, 0, 3),  # decreasing
        (pa.py_buffer(b""), offsets, data, 0, 3),  # validity too short
        (validity, offsets, data, -1, 3),
        (None, None, None, 0, 1),
    ]
    for arg in bad:
        with pytest.raises(ValueError):
            _native.encode_partitioned_batches(arg, None, None, None, **base)
    with pytest.raises(ValueError, match="keys hold 2 elements"):
        _native.encode_partitioned_batches(
            binary_arg(values), binary_arg(values.slice(1)), None, None, **base
        )
    with pytest.raises(ValueError, match="partitions: data buffer"):
        _native.encode_partitioned_batches(
            binary_arg(values), None, None, int32_arg(pa.array([0], pa.int32())), **base
        )
    with pytest.raises(TypeError):
        _native.encode_partitioned_batches(
            [validity, offsets, data, 0, 3], None, None, None, **base
        )
    for name, value in [
        ("num_partitions", 0),
        ("sticky_partition", 1),
        ("compression", 5),
        ("compression", -1),
        ("batch_size", -1),
    ]:
        with pytest.raises(ValueError):
            _native.encode_partitioned_batches(
                binary_arg(values), None, None, None, **{**base, name: value}
            )
    with pytest.raises(ValueError, match="base_sequences"):
        _native.encode_partitioned_batches(
            binary_arg(values), None, None, None, **base, base_sequences=[0, 0]
        )


def test_null_header_key_raises():
    items = pa.StructArray.from_arrays(
        [pa.array(["k", None], pa.string()), pa.array([b"v", b"w"])], ["key", "value"]
    )
    lists = pa.ListArray.from_arrays(pa.array([0, 1, 2], pa.int32()), items)
    with pytest.raises(ValueError, match="record 1: null header key"):
        encode(pa.array([b"a", b"b"]), None, lists)


def test_empty_input():
    assert encode(pa.array([], pa.binary())) == []


def test_garbage_records_with_a_valid_crc_raise_corrupt_record_error():
    # Batches whose records section is random bytes (CRC recomputed): decoding either yields
    # records or raises CorruptRecordError, never anything else.
    import random

    rng = random.Random(1234)
    ((_, batches, _),) = encode(pa.array([b"x" * 20, None, b"y"]), pa.array([b"k", b"", None]))
    good = batches[0]
    outcomes = set()
    for i in range(3000):
        body = bytearray(good[61:])
        if i % 2:
            body = bytearray(rng.randbytes(rng.randrange(0, 60)))
        else:
            for _ in range(rng.randrange(1, 4)):
                body[rng.randrange(len(body))] = rng.randrange(256)
        codec = rng.choice([0, 0, 0, 1, 2, 3, 4])
        batch = bytearray(good[:61]) + body
        struct.pack_into(">i", batch, 8, len(batch) - 12)
        struct.pack_into(">h", batch, 21, codec)
        struct.pack_into(">i", batch, 57, rng.randrange(0, 5))  # recordsCount
        struct.pack_into(">I", batch, 17, _native.crc32c(bytes(batch[21:])))
        try:
            d = _native.decode_record_batches(bytes(batch), 0, -1, True)
            outcomes.add("ok")
            decoded_arrays(d)  # the buffers are consistent Arrow arrays
        except CorruptRecordError:
            outcomes.add("corrupt")
    assert outcomes == {"ok", "corrupt"}
