"""Test helper: build Kafka v2 record batches in Python (tests only; the broker never does this)."""

from __future__ import annotations

import gzip
import struct

import pytest

from pybroker import _native

XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)


def varint(value: int) -> bytes:
    """Kafka's zigzag varint."""
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _bytes_field(data: bytes | None) -> bytes:
    return varint(-1) if data is None else varint(len(data)) + data


def encode_records(records: list[tuple[bytes | None, bytes | None]], timestamps: list[int]) -> bytes:
    """The (uncompressed) records section of a batch: no headers, offset deltas 0..n-1."""
    body = bytearray()
    for delta, (key, value) in enumerate(records):
        record = bytes([0]) + varint(timestamps[delta] - timestamps[0]) + varint(delta)
        record += _bytes_field(key) + _bytes_field(value) + varint(0)
        body += varint(len(record)) + record
    return bytes(body)


def compress(codec: int, raw: bytes, xerial: bool = True) -> bytes:
    """Compress a records section as clients do (snappy: xerial framing like Java, or raw like librdkafka)."""
    if codec == 0:
        return raw
    if codec == 1:
        return gzip.compress(raw)
    if codec == 2:
        cramjam = pytest.importorskip("cramjam")
        block = bytes(cramjam.snappy.compress_raw(raw))
        return XERIAL_HEADER + struct.pack(">i", len(block)) + block if xerial else block
    if codec == 3:
        return pytest.importorskip("lz4.frame").compress(raw)
    if codec == 4:
        return pytest.importorskip("zstandard").ZstdCompressor().compress(raw)
    raise AssertionError(f"unknown codec {codec}")


def build_batch(
    records: list[tuple[bytes | None, bytes | None]],
    base_offset: int = 0,
    base_timestamp: int = 1_700_000_000_000,
    timestamps: list[int] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
    codec: int = 0,
    xerial: bool = True,
) -> bytes:
    """A magic-2 batch with a correct CRC32C."""
    stamps = timestamps or [base_timestamp + i for i in range(len(records))]
    payload = compress(codec, encode_records(records, stamps), xerial)
    after_crc = struct.pack(
        ">hiqqqhii", attributes | codec, len(records) - 1, stamps[0], max(stamps),
        producer_id, producer_epoch, base_sequence, len(records),
    ) + payload
    crc = _native.crc32c(after_crc)
    header = struct.pack(">qiibI", base_offset, 4 + 1 + 4 + len(after_crc), -1, 2, crc)
    return header + after_crc
