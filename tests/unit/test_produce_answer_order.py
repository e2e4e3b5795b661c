"""The order a Produce answer lists its partitions in: Kafka 3.9.2's, as observed from a Kafka
broker (tests/differential/test_kafka_tools_b.py asks both brokers)."""

from __future__ import annotations

from pybroker.server.apis.produce import java_hash_map_order, kafka_order
from pybroker.types import TopicPartition


def tps(topic: str, *partitions: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in partitions]


def test_up_to_four_partitions_keep_the_order_of_a_small_scala_hash_map():
    # Kafka 3.9.2 answered verifiable-1 before verifiable-0, whatever the request's order.
    assert kafka_order(tps("verifiable", 0, 1)) == tps("verifiable", 1, 0)
    assert kafka_order(tps("verifiable", 1, 0)) == tps("verifiable", 1, 0)
    # Groups keep their turn: refused partitions come after the appended ones.
    assert kafka_order(tps("verifiable", 0), tps("verifiable", 1)) == tps("verifiable", 0, 1)


def test_more_than_four_partitions_follow_a_champ_trie():
    # Kafka 3.9.2's answer to one request for ordered-a (9 partitions) and ordered-b (7).
    order = kafka_order([*tps("ordered-a", *range(9)), *tps("ordered-b", *range(7))])
    assert [(tp.topic[-1], tp.partition) for tp in order] == [
        ("b", 5), ("a", 6), ("a", 7), ("a", 0), ("a", 3), ("b", 1), ("a", 5), ("a", 4), ("b", 0), ("b", 4),
        ("a", 8), ("a", 2), ("b", 3), ("b", 6), ("a", 1), ("b", 2)]
    # Only the hashes count: the request's order and the groups do not.
    assert kafka_order(reversed(order)) == order
    assert kafka_order(order[:5], order[5:]) == order


def test_each_partition_once():
    assert kafka_order(tps("t", 0, 0, 1), tps("t", 1)) == kafka_order(tps("t", 0, 1))


def test_java_hash_map_order_is_by_bucket_then_insertion():
    ordered = java_hash_map_order(tps("ordered-a", *range(9)))
    assert sorted(ordered) == sorted(tps("ordered-a", *range(9)))
    # ordered-a-p hashes to 0xe8b09ac2 + 31p: with 16 buckets partition 1 falls in bucket 1 and
    # partition 0 in bucket 2 (the high half xored in), so 1 comes first.
    assert ordered.index(TopicPartition("ordered-a", 1)) < ordered.index(TopicPartition("ordered-a", 0))
