"""Arrow columns to and from the native record codec, without touching single records.

Owns the hand-over between pyarrow arrays and ``_native``: a column is given to Rust as its raw
buffers (validity bitmap, offsets, data) plus its slice offset and length, and Rust's decoded
columns come back as buffers that pyarrow wraps as arrays. Also owns the Spark Kafka source's
Arrow schema (``key, value, topic, partition, offset, timestamp, timestampType`` and, with
``includeHeaders``, ``headers``).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")  # Spark's TimestampType

SOURCE_SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
)
HEADERS_DDL = ", headers array<struct<key:string,value:binary>>"


def source_schema_ddl(include_headers: bool) -> str:
    """The reader's schema, as Spark's Kafka source defines it."""
    return SOURCE_SCHEMA_DDL + (HEADERS_DDL if include_headers else "")


def _array(column: Any) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return column


def binary_buffers(column: Any) -> tuple[Any, Any, Any, int, int]:
    """``(validity, offsets, data, offset, length)`` of a binary or string column (other types,
    e.g. large_binary, are cast to binary first)."""
    array = _array(column)
    if not (pa.types.is_binary(array.type) or pa.types.is_string(array.type)):
        array = array.cast(pa.binary())
    validity, offsets, data = array.buffers()
    return validity, offsets, data if data is not None else b"", array.offset, len(array)


def int32_buffers(column: Any) -> tuple[Any, Any, int]:
    """``(validity, values, offset)`` of an integer column (cast to int32)."""
    array = _array(column)
    if array.type != pa.int32():
        array = array.cast(pa.int32())
    validity, values = array.buffers()
    return validity, values, array.offset


def headers_buffers(column: Any) -> tuple[Any, Any, int, tuple[Any, ...], tuple[Any, ...]]:
    """``(list_validity, list_offsets, list_offset, keys, values)`` of an
    ``array<struct<key: string, value: binary>>`` column; ``keys`` and ``values`` are the struct's
    children as binary buffers, indexed by list position."""
    array = _array(column)
    if array.type != HEADER_TYPE:
        array = array.cast(HEADER_TYPE)
    validity, offsets = array.buffers()[:2]
    entries = array.values  # the whole child: list offsets index into it
    return validity, offsets, array.offset, binary_buffers(entries.field("key")), binary_buffers(entries.field("value"))


def _binary(count: int, validity: bytes | None, offsets: bytes, data: bytes, type_: pa.DataType | None = None) -> pa.Array:
    return pa.Array.from_buffers(type_ or pa.binary(), count, [
        pa.py_buffer(validity) if validity else None, pa.py_buffer(offsets), pa.py_buffer(data),
    ])


def decoded_to_batch(decoded: Any, topic: str, partition: int, include_headers: bool) -> pa.RecordBatch:
    """A RecordBatch in the source schema from ``_native.decode_record_batches``' result."""
    n = decoded.count
    timestamps_ms = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(decoded.timestamps)])
    columns = [
        _binary(n, decoded.key_validity, decoded.key_offsets, decoded.key_data),
        _binary(n, decoded.value_validity, decoded.value_offsets, decoded.value_data),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(decoded.offsets)]),
        pc.multiply(timestamps_ms, 1000).view(TIMESTAMP_TYPE),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(decoded.timestamp_types)]),
    ]
    names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    if include_headers:
        entry_count = int.from_bytes(decoded.header_list_offsets[-4:], "little") if n else 0
        keys = _binary(entry_count, None, decoded.header_key_offsets, decoded.header_key_data, pa.string())
        values = _binary(entry_count, decoded.header_value_validity, decoded.header_value_offsets, decoded.header_value_data)
        entries = pa.StructArray.from_arrays([keys, values], names=["key", "value"])
        columns.append(pa.Array.from_buffers(HEADER_TYPE, n, [None, pa.py_buffer(decoded.header_list_offsets)], children=[entries]))
        names.append("headers")
    return pa.RecordBatch.from_arrays(columns, names=names)
