"""How the JVM collections in Kafka's code order and print what they hold, where that order reaches
a client: the hash of a Java ``String``, ``Integer`` and ``Long``, the iteration order of a Java
``HashMap`` and of a Scala 2.13 ``mutable.HashMap``, and the latter's ``toString``.

Kafka builds some answers by iterating such a map (DescribeClientQuotas lists an entity's values
in the order of a ``mutable.HashMap``; CreateTopics prints a topic's replica assignment, a
``mutable.HashMap[Int, Seq[Int]]``, in its messages), and the tools print what they receive in
that order whenever their own maps leave two keys in one bucket. pybroker sends and prints them in
the same order. Pure functions, no state.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

K = TypeVar("K")

_INT_MASK = 0xFFFFFFFF


def _signed(value: int) -> int:
    value &= _INT_MASK
    return value - (1 << 32) if value & 0x80000000 else value


@functools.lru_cache(maxsize=4096)
def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int. Computed
    without the utf-16 codec, whose module is imported at first use: that fails when the process
    is out of file descriptors."""
    h = 0
    for char in text:
        point = ord(char)
        if point < 0x10000:
            h = (31 * h + point) & _INT_MASK
        else:  # a surrogate pair
            point -= 0x10000
            h = (31 * h + (0xD800 | point >> 10)) & _INT_MASK
            h = (31 * h + (0xDC00 | point & 0x3FF)) & _INT_MASK
    return _signed(h)


def java_topic_partition_hash(topic: str, partition: int) -> int:
    """Kafka's ``TopicPartition.hashCode``: 31 * (31 + partition) + the topic's hash."""
    return _signed(31 * (31 + partition) + java_string_hash(topic))


def java_int_hash(value: int) -> int:
    """``Integer.hashCode`` (and Scala's ``##`` of an Int): the value itself."""
    return _signed(value)


def java_long_hash(value: int) -> int:
    """``Long.hashCode``: the two halves of the 64-bit value xored."""
    value &= 0xFFFFFFFFFFFFFFFF
    return _signed(value ^ (value >> 32))


def java_hash_map_order(keys: Iterable[K], hash_code: Callable[[K], int], initial_capacity: int = 16) -> list[K]:
    """The iteration order of a Java ``HashMap`` (``new HashMap<>(initial_capacity)``) into which
    ``keys`` were put in order (duplicates keep their first place): the table starts at the power
    of two at or above the initial capacity and doubles once it holds more than 3/4 of that; a
    key's bucket is its spread hash (``h ^ (h >>> 16)``) masked by the table size, and one bucket
    keeps its keys in insertion order."""
    ordered = list(dict.fromkeys(keys))
    capacity = 1
    while capacity < initial_capacity:
        capacity *= 2
    while len(ordered) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: K) -> int:
        h = hash_code(key) & _INT_MASK
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(ordered, key=bucket)


def scala_hash_map_order(keys: Iterable[K], hash_code: Callable[[K], int]) -> list[K]:
    """The iteration order of a Scala 2.13 ``mutable.HashMap`` into which ``keys`` were put in
    order (duplicates keep their first place): the table starts at 16 buckets and doubles
    whenever an insertion would bring the entry count to 3/4 of it; a key's bucket is its
    improved hash (``h ^ (h >>> 16)``) masked by the table size, and one bucket's keys are kept
    sorted by that hash (ties in insertion order)."""
    ordered = list(dict.fromkeys(keys))
    capacity = 16
    for size in range(len(ordered)):
        if size + 1 >= int(capacity * 0.75):
            capacity *= 2

    def place(item: tuple[int, K]) -> tuple[int, int, int]:
        position, key = item
        h = hash_code(key) & _INT_MASK
        improved = _signed(h ^ (h >> 16))
        return improved & (capacity - 1), improved, position

    return [key for _, key in sorted(enumerate(ordered), key=place)]


def scala_int_map_string(mapping: Mapping[int, Iterable[int]], seq_name: str = "ArrayBuffer") -> str:
    """``toString`` of a Scala ``mutable.HashMap[Int, Seq[Int]]``:
    ``HashMap(0 -> ArrayBuffer(1, 2), 1 -> ArrayBuffer(2, 3))``, in the map's iteration order."""
    entries = ", ".join(
        f"{key} -> {seq_name}({', '.join(str(v) for v in mapping[key])})"
        for key in scala_hash_map_order(mapping, java_int_hash)
    )
    return f"HashMap({entries})"
