"""Kafka's non-flexible primitive types, for the small formats carried *inside* messages.

The consumer protocol's subscriptions and assignments and the group coordinator's
``__consumer_offsets`` keys and values are hand-laid-out structs of int16/int32/int64, int16-length
strings, int32-length bytes and int32-count arrays (big-endian). ``StructReader`` reads them,
raising the caller's error type (a ``ValueError`` subclass) on anything truncated or malformed;
the ``write_*`` helpers encode them. The API messages themselves go through the generated codec.
"""

from __future__ import annotations

import struct


class StructReader:
    """Reads primitives from ``data`` in order."""

    def __init__(self, data: bytes, error: type[ValueError] = ValueError, what: str = "data") -> None:
        self.data = memoryview(data)
        self.pos = 0
        self._error = error
        self._what = what

    def _fail(self, problem: str) -> ValueError:
        return self._error(f"{self._what}: {problem} at byte {self.pos} of {len(self.data)}")

    def _take(self, size: int) -> memoryview:
        if size < 0 or self.pos + size > len(self.data):
            raise self._fail("runs past the end")
        chunk = self.data[self.pos:self.pos + size]
        self.pos += size
        return chunk

    def int16(self) -> int:
        return struct.unpack(">h", self._take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self._take(8))[0]

    def nullable_string(self) -> str | None:
        size = self.int16()
        if size == -1:
            return None
        try:
            return bytes(self._take(size)).decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail("invalid UTF-8 in a string") from None

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise self._fail("null where a string is required")
        return value

    def nullable_bytes(self) -> bytes | None:
        size = self.int32()
        return None if size == -1 else bytes(self._take(size))

    def array_length(self, nullable: bool = True) -> int:
        """An int32 element count; -1 (a null array) reads as empty where ``nullable``."""
        size = self.int32()
        if size < (-1 if nullable else 0) or size > len(self.data) - self.pos:
            raise self._fail(f"invalid array length {size}")
        return max(size, 0)

    @property
    def at_end(self) -> bool:
        return self.pos >= len(self.data)


def write_string(value: str | None) -> bytes:
    """An int16-length string; None is the null string."""
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw


def write_bytes(value: bytes | None) -> bytes:
    """int32-length bytes; None is null."""
    return struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
