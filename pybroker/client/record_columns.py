"""Records appended one at a time, laid out as the Arrow buffers the native batch encoder takes.

Owns `RecordColumns`: the open batch of one partition in the record-level producer. Each
``append`` adds a record's key, value and headers to growing Arrow ``binary`` buffers (int32
offsets, a validity bitmap once a null shows up), as Kafka's ``RecordAccumulator`` appends a
record into its open batch's buffer at ``send`` time. ``encode`` then hands the buffers to
``_native.encode_partitioned_batches`` in one call, which writes the magic-2 batch (CRC,
varints, compression) in Rust: no record is serialised in Python.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence

from pybroker import _native

HeaderList = Sequence[tuple[str, bytes | None]]

NO_LIMIT = 2**31 - 1  # batch_size for the encoder: the caller already cut the batch


class BinaryColumn:
    """An Arrow ``binary`` array under construction."""

    __slots__ = ("_data", "_offsets", "_validity", "_length")

    def __init__(self) -> None:
        self._data = bytearray()
        self._offsets = array("i", [0])
        self._validity: bytearray | None = None  # LSB-first bitmap, created at the first null
        self._length = 0

    def __len__(self) -> int:
        return self._length

    def append(self, item: bytes | None) -> None:
        index = self._length
        if item is None:
            if self._validity is None:
                self._validity = bytearray(b"\xff" * ((index + 8) // 8))
                if index % 8:
                    self._validity[-1] = (1 << (index % 8)) - 1
                else:
                    self._validity[-1] = 0
            elif index % 8 == 0:
                self._validity.append(0)
            self._validity[index // 8] &= ~(1 << (index % 8)) & 0xFF
        else:
            self._data += item
            if self._validity is not None:
                if index % 8 == 0:
                    self._validity.append(0)
                self._validity[index // 8] |= 1 << (index % 8)
        self._offsets.append(len(self._data))
        self._length += 1

    def buffers(self) -> tuple[bytes | None, bytes, bytes, int, int]:
        """``(validity, offsets, data, offset, length)`` as ``_native.ArrowBinary``."""
        offsets = self._offsets
        if sys.byteorder != "little":
            offsets = array("i", offsets)
            offsets.byteswap()
        validity = bytes(self._validity) if self._validity is not None else None
        return validity, offsets.tobytes(), bytes(self._data), 0, self._length


class RecordColumns:
    """One partition's open batch: records' keys, values and headers as Arrow buffers."""

    __slots__ = ("keys", "values", "_header_offsets", "_header_keys", "_header_values", "_has_keys",
                 "_has_headers", "size")

    def __init__(self) -> None:
        self.keys = BinaryColumn()
        self.values = BinaryColumn()
        self._header_offsets = array("i", [0])
        self._header_keys = BinaryColumn()
        self._header_values = BinaryColumn()
        self._has_keys = False
        self._has_headers = False
        self.size = 0  # bytes of keys, values and headers so far (the batch.size measure, roughly)

    def __len__(self) -> int:
        return len(self.values)

    def append(self, key: bytes | None, value: bytes | None, headers: HeaderList | None = None) -> int:
        """Add one record; returns the bytes it adds to the batch (an estimate of its encoding)."""
        self.keys.append(key)
        self.values.append(value)
        added = (len(key) if key is not None else 0) + (len(value) if value is not None else 0) + RECORD_OVERHEAD
        self._has_keys = self._has_keys or key is not None
        if headers:
            self._has_headers = True
            for name, header_value in headers:
                encoded = name.encode()
                self._header_keys.append(encoded)
                self._header_values.append(header_value)
                added += len(encoded) + (len(header_value) if header_value is not None else 0) + HEADER_OVERHEAD
        self._header_offsets.append(len(self._header_keys))
        self.size += added
        return added

    def encode(self, timestamp: int, compression: int, producer_id: int = -1, producer_epoch: int = -1,
               base_sequence: int = -1, transactional: bool = False) -> bytes:
        """The records as one magic-2 batch (baseOffset 0, every record at ``timestamp``), with
        the given producer id, epoch and base sequence; ``transactional`` sets the batch's
        transactional attribute."""
        headers = None
        if self._has_headers:
            offsets = self._header_offsets
            if sys.byteorder != "little":
                offsets = array("i", offsets)
                offsets.byteswap()
            headers = (None, offsets.tobytes(), 0, self._header_keys.buffers(), self._header_values.buffers())
        encoded = _native.encode_partitioned_batches(
            self.values.buffers(), self.keys.buffers() if self._has_keys else None, headers, None,
            1, 0, timestamp, NO_LIMIT, compression, producer_id, producer_epoch,
            None if base_sequence < 0 else [base_sequence],
        )
        ((_, batches, _),) = encoded
        if len(batches) != 1:  # cannot happen with NO_LIMIT below 2 GiB; the encoder would have raised
            raise ValueError(f"expected one batch, the encoder made {len(batches)}")
        return set_transactional(batches[0]) if transactional else batches[0]


ATTRIBUTES_AT, CRC_AT = 21, 17  # batch header: baseOffset i64, batchLength i32, epoch i32, magic i8, crc u32, attributes i16
TRANSACTIONAL_FLAG = 0x10


def set_transactional(batch: bytes) -> bytes:
    """``batch`` (one magic-2 batch) with its transactional attribute set and its CRC-32C (which
    covers the attributes onwards) computed again: one native CRC call per batch.
    (``encode_partitioned_batches`` has no transactional flag.)"""
    out = bytearray(batch)
    attributes = int.from_bytes(out[ATTRIBUTES_AT:ATTRIBUTES_AT + 2], "big") | TRANSACTIONAL_FLAG
    out[ATTRIBUTES_AT:ATTRIBUTES_AT + 2] = attributes.to_bytes(2, "big")
    out[CRC_AT:CRC_AT + 4] = _native.crc32c(memoryview(out)[ATTRIBUTES_AT:]).to_bytes(4, "big")
    return bytes(out)


RECORD_OVERHEAD = 8  # attributes, deltas, lengths: a few varints per record
HEADER_OVERHEAD = 2
BATCH_OVERHEAD = 61  # a magic-2 batch header
