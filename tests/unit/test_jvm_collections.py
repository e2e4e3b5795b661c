"""The JVM collection orders Kafka's answers and tools show (`pybroker.jvm_collections`)."""

from __future__ import annotations

from pybroker.jvm_collections import (
    java_int_hash,
    java_string_hash,
    scala_hash_map_order,
    scala_int_map_string,
)


def test_java_string_hash():
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("producer_byte_rate") == -832502454  # negative: a signed int
    assert java_string_hash("request_percentage") == -965904822
    assert java_string_hash("\U0001F600") == 1772899  # two UTF-16 code units: 31 * 0xD83D + 0xDE00


def test_scala_hash_map_order_of_quota_keys():
    """Buckets of a 16-entry table by the improved hash: request_percentage (7) before
    producer_byte_rate (11) before consumer_byte_rate (12) before controller_mutation_rate (14),
    as Kafka 3.9.2's DescribeClientQuotas sends them whatever order they were stored in."""
    keys = ["producer_byte_rate", "consumer_byte_rate", "controller_mutation_rate", "request_percentage"]
    expected = ["request_percentage", "producer_byte_rate", "consumer_byte_rate", "controller_mutation_rate"]
    assert scala_hash_map_order(keys, java_string_hash) == expected
    assert scala_hash_map_order(reversed(keys), java_string_hash) == expected


def test_scala_hash_map_order_of_ints_grows_the_table():
    assert scala_hash_map_order([17, 5, 0], java_int_hash) == [0, 17, 5]  # 17 shares bucket 1 of 16
    many = list(range(30, -1, -1))
    assert scala_hash_map_order(many, java_int_hash) == sorted(many)  # 64 buckets by then
    assert scala_hash_map_order([1, 1, 0], java_int_hash) == [0, 1]


def test_scala_int_map_string():
    assert scala_int_map_string({1: [3, 3, 1], 0: [1, 2, 3]}) == "HashMap(0 -> ArrayBuffer(1, 2, 3), 1 -> ArrayBuffer(3, 3, 1))"
