"""The broker's read-only view of the cluster, fed by the controller's UpdateMetadata.

Owns Kafka's ``ZkMetadataCache``: the live brokers with their listeners (the complete list in
every UpdateMetadata), every partition's last state (leader, leader epoch, ISR, replicas, offline
replicas, partition epoch; an UpdateMetadata lists only the partitions that changed, the others
keep their state; leader -2 removes a partition, the topic being deleted), topic ids, and the
controller id. Request handlers answer Metadata, FindCoordinator, DescribeCluster and the
"unknown partition or not the leader" questions from here, never from the store.

Only `update_metadata` writes it, on the event loop; `wait_for` lets a request wait until the
cache shows something (CreateTopics answers once the new partitions have leaders, as Kafka's
DelayedCreatePartitions does).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from pybroker.common.cluster import LEADER_DURING_DELETE, LiveBroker, PartitionState
from pybroker.common.topic import INTERNAL_TOPICS
from pybroker.controller.requests import UpdateMetadata
from pybroker.types import TopicPartition


@dataclass
class CachedTopic:
    """A topic as the cache knows it: its id, its partitions' states by index, and KIP-253's
    partition counts (-1 until the controller sent them)."""

    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionState]
    initial_partition_count: int = -1
    undeleted_partition_count: int = -1

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    @property
    def counts(self) -> tuple[int, int]:
        """KIP-253's (initial, undeleted) partition counts; the partition count for both while
        the controller sent none."""
        n = len(self.partitions)
        return (self.initial_partition_count if self.initial_partition_count > 0 else n,
                self.undeleted_partition_count if self.undeleted_partition_count > 0 else n)

    @property
    def has_all_leaders(self) -> bool:
        """Every partition has a live-elected leader (and the indexes are 0..n-1)."""
        return (
            bool(self.partitions)
            and len(self.partitions) == max(self.partitions) + 1
            and all(p.leader >= 0 for p in self.partitions.values())
        )


class MetadataCache:
    """What this broker knows of the cluster, as the controller last told it."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.controller_id = -1
        self.live_brokers: dict[int, LiveBroker] = {}
        self.topics: dict[str, CachedTopic] = {}
        self._by_id: dict[uuid.UUID, CachedTopic] = {}
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []
        # Set by the first UpdateMetadata that lists this broker: until then its answers to
        # clients would describe an empty cluster, so client requests wait for it.
        self.initialized = asyncio.Event()

    # --- updates -------------------------------------------------------------------------------

    def update_metadata(self, request: UpdateMetadata) -> list[TopicPartition]:
        """Apply an UpdateMetadata; returns the partitions it deleted."""
        self.controller_id = request.controller_id
        self.live_brokers = {b.broker_id: b for b in request.live_brokers}
        deleted: list[TopicPartition] = []
        for state in request.partition_states:
            tp = state.topic_partition
            if state.leader == LEADER_DURING_DELETE:
                topic = self.topics.get(tp.topic)
                if topic is not None and topic.partitions.pop(tp.partition, None) is not None:
                    deleted.append(tp)
                    if not topic.partitions:
                        del self.topics[tp.topic]
                        self._by_id.pop(topic.topic_id, None)
                continue
            topic = self.topics.get(tp.topic)
            topic_id = request.topic_ids.get(tp.topic)
            if topic is None or (topic_id is not None and topic_id != topic.topic_id):
                if topic is not None:
                    self._by_id.pop(topic.topic_id, None)
                topic = CachedTopic(tp.topic, topic_id or uuid.UUID(int=0), {})
                self.topics[tp.topic] = topic
                self._by_id[topic.topic_id] = topic
            topic.partitions[tp.partition] = state
        for name, (initial, undeleted) in request.partition_counts.items():
            topic = self.topics.get(name)
            if topic is not None:
                topic.initial_partition_count, topic.undeleted_partition_count = initial, undeleted
        if self.broker_id in self.live_brokers:
            self.initialized.set()
        self._wake_waiters()
        return deleted

    # --- queries -------------------------------------------------------------------------------

    def topic(self, name: str) -> CachedTopic | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> CachedTopic | None:
        return self._by_id.get(topic_id)

    def partition(self, tp: TopicPartition) -> PartitionState | None:
        topic = self.topics.get(tp.topic)
        return None if topic is None else topic.partitions.get(tp.partition)

    def contains(self, tp: TopicPartition) -> bool:
        return self.partition(tp) is not None

    def partition_count(self, name: str) -> int | None:
        topic = self.topics.get(name)
        return None if topic is None else len(topic.partitions)

    def alive_broker(self, broker_id: int) -> LiveBroker | None:
        return self.live_brokers.get(broker_id)

    def leader(self, tp: TopicPartition) -> LiveBroker | None:
        """The partition's leader, when it is alive."""
        state = self.partition(tp)
        return None if state is None else self.live_brokers.get(state.leader)

    # --- waiting -------------------------------------------------------------------------------

    async def wait_for(self, condition: Callable[[], bool], timeout_ms: float) -> bool:
        """Wait until ``condition()`` holds after an update (True), or ``timeout_ms`` passes
        (False)."""
        if condition():
            return True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiter = (condition, future)
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout_ms / 1000)
            return True
        except TimeoutError:
            return False
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def _wake_waiters(self) -> None:
        for condition, future in list(self._waiters):
            if not future.done() and condition():
                future.set_result(None)
