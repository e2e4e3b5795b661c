"""Test helper: build Kafka v2 record batches in Python (tests only; the broker never does this)."""

from __future__ import annotations

import struct

from pybroker import _native


def _varint(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)  # zigzag
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes_field(data: bytes | None) -> bytes:
    return _varint(-1) if data is None else _varint(len(data)) + data


def build_batch(
    records: list[tuple[bytes | None, bytes | None]],
    base_offset: int = 0,
    base_timestamp: int = 1_700_000_000_000,
    timestamps: list[int] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
) -> bytes:
    """An uncompressed magic-2 batch with a correct CRC32C."""
    body = bytearray()
    stamps = timestamps or [base_timestamp + i for i in range(len(records))]
    for delta, (key, value) in enumerate(records):
        record = bytes([0]) + _varint(stamps[delta] - stamps[0]) + _varint(delta)
        record += _bytes_field(key) + _bytes_field(value) + _varint(0)
        body += _varint(len(record)) + record
    after_crc = struct.pack(
        ">hiqqqhii", attributes, len(records) - 1, stamps[0], max(stamps),
        producer_id, producer_epoch, base_sequence, len(records),
    ) + bytes(body)
    crc = _native.crc32c(after_crc)
    header = struct.pack(">qiibI", base_offset, 4 + 1 + 4 + len(after_crc), -1, 2, crc)
    return header + after_crc
