"""Kafka's ``ReplicationQuotaManager``: one replication throttle (the leader's or the follower's)
of a broker.

A topic's ``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``
(``*`` or ``partition:broker,...``) name the throttled replicas; a broker takes the partitions
listed with its own id (Kafka's ``TopicConfigHandler.parseThrottledPartitions``). The bytes
replicated for throttled partitions are recorded in a `SimpleRate`-style `Rate`
(``replication.quota.window.*``) against the broker's ``leader.replication.throttled.rate`` /
``follower.replication.throttled.rate``. While the rate is over the bound, a leader leaves the
throttled partitions of out-of-sync followers out of its fetch responses (no records), and a
follower leaves its throttled, out-of-sync partitions out of its fetch requests.
"""

from __future__ import annotations

from collections.abc import Sequence

from pybroker.scheduler import Time
from pybroker.server.quota.rate import Rate
from pybroker.types import TopicPartition

#: Kafka's ``Constants.AllReplicas``: every partition of the topic is throttled.
ALL_REPLICAS: tuple[int, ...] = (-1,)
UNLIMITED = 2**63 - 1


def parse_throttled_partitions(value: Sequence[str] | str, broker_id: int) -> tuple[int, ...]:
    """The partitions of ``broker_id`` in a throttled-replicas list (`ALL_REPLICAS` for ``*``)."""
    items = [v.strip() for v in (value.split(",") if isinstance(value, str) else value) if v.strip()]
    if items == ["*"]:
        return ALL_REPLICAS
    partitions = []
    for item in items:
        partition, _, broker = item.partition(":")
        if broker.strip() == str(broker_id):
            partitions.append(int(partition))
    return tuple(partitions)


class ReplicationQuotaManager:
    """The bound and the byte rate of one replication direction of this broker. Which partitions
    are throttled is read from each partition's topic config (`is_throttled`), so a topic config
    change applies with the log's config."""

    def __init__(self, replication_type: str, broker_id: int, samples: int, window_seconds: int, time: Time) -> None:
        self.replication_type = replication_type  # Kafka's QuotaType: LeaderReplication, FollowerReplication
        self.broker_id = broker_id
        self.time = time
        self.bound: float = UNLIMITED
        self.rate = Rate(samples, window_seconds * 1000, simple=True)
        self._parsed: dict[tuple[str, ...], tuple[int, ...]] = {}

    @property
    def active(self) -> bool:
        """Whether a bound is set (without one nothing is throttled or recorded)."""
        return self.bound < UNLIMITED

    def update_quota(self, bound: float) -> None:
        self.bound = bound

    def is_throttled(self, tp: TopicPartition, throttled_replicas: Sequence[str]) -> bool:
        """Whether ``tp`` is throttled on this broker by its topic's throttled-replicas list."""
        if not throttled_replicas:
            return False
        key = tuple(throttled_replicas)
        partitions = self._parsed.get(key)
        if partitions is None:
            if len(self._parsed) > 1000:
                self._parsed.clear()
            partitions = self._parsed[key] = parse_throttled_partitions(key, self.broker_id)
        return partitions == ALL_REPLICAS or tp.partition in partitions

    def is_quota_exceeded(self) -> bool:
        if self.bound >= UNLIMITED:
            return False
        return self.rate.measure(self.time.monotonic_ms()) > self.bound

    def record(self, value: int) -> None:
        self.rate.record(value, self.time.monotonic_ms())
