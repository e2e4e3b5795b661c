"""Cluster metadata: topics, their ids, partition assignments, leaders, epochs and configs.

Owns the authoritative record of what topics exist (the controller's job in Kafka), validation of
topic names and partition counts with Kafka's error semantics, producer-id block allocation, and
persisting all of it atomically to ``cluster-metadata.json`` in the first log directory. Changes
apply in memory at once; the file is rewritten in a worker thread, one write covering every
change made while the previous one was under way (`saved` is the future of the write covering
the changes so far). A single broker is its own controller; later, a controller quorum replaces
this store, and brokers keep a read-only cache of the same shape.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import uuid
from dataclasses import dataclass, field

from pybroker.log.file_sync import CoalescingFileWriter

METADATA_FILE = "cluster-metadata.json"
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_CHARS = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
PRODUCER_ID_BLOCK_SIZE = 1000


class TopicExistsError(Exception):
    """TOPIC_ALREADY_EXISTS (36)."""


class InvalidTopicError(Exception):
    """INVALID_TOPIC_EXCEPTION (17)."""


class InvalidPartitionsError(Exception):
    """INVALID_PARTITIONS (37)."""


class InvalidReplicationFactorError(Exception):
    """INVALID_REPLICATION_FACTOR (38)."""


class UnknownTopicError(Exception):
    """UNKNOWN_TOPIC_OR_PARTITION (3)."""


def topic_id_to_string(topic_id: uuid.UUID) -> str:
    """Kafka's printed form of a Uuid: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def validate_topic_name(name: str) -> None:
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError("Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, "
            f"topic name: {name}"
        )
    if not _LEGAL_TOPIC_CHARS.match(name):
        raise InvalidTopicError(
            f"Topic name \"{name}\" is illegal, it contains a character other than ASCII "
            "alphanumerics, '.', '_' and '-'"
        )


@dataclass
class PartitionAssignment:
    """One partition's replicas and leadership."""

    replicas: list[int]
    leader: int
    leader_epoch: int = 0
    isr: list[int] = field(default_factory=list)
    partition_epoch: int = 0


@dataclass
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionAssignment]
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class ClusterMetadata:
    """The controller's view of the cluster, persisted on every change."""

    def __init__(self, directory: str, cluster_id: str, broker_ids: list[int]) -> None:
        self.path = os.path.join(directory, METADATA_FILE)
        self.cluster_id = cluster_id
        self.broker_ids = broker_ids
        self.controller_id = broker_ids[0]
        self.topics: dict[str, TopicMetadata] = {}
        self._by_id: dict[uuid.UUID, TopicMetadata] = {}
        self.next_producer_id_block = 0
        self._next_producer_id = 0
        self._producer_id_block_end = 0
        self._writer = CoalescingFileWriter(self.path, self._render)
        self._saved: asyncio.Future[None] | None = None
        self._load()

    # --- persistence ---------------------------------------------------------------------------

    def _load(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return
        except (OSError, ValueError) as e:
            raise RuntimeError(
                f"{self.path} is damaged ({e}); restore it from a backup or move it away to start "
                "with no topics (partition data on disk is kept)"
            ) from e
        self.next_producer_id_block = data.get("next_producer_id_block", 0)
        for item in data.get("topics", []):
            topic = TopicMetadata(
                item["name"],
                uuid.UUID(item["topic_id"]),
                [PartitionAssignment(**p) for p in item["partitions"]],
                dict(item.get("configs", {})),
            )
            self.topics[topic.name] = topic
            self._by_id[topic.topic_id] = topic

    def _render(self) -> str:
        """The file's text: one topic per line (compact JSON, so that a topic of 10,000
        partitions renders in milliseconds)."""
        head = json.dumps({
            "version": 1,
            "cluster_id": self.cluster_id,
            "next_producer_id_block": self.next_producer_id_block,
        })
        topics = ",\n".join(
            json.dumps({
                "name": t.name,
                "topic_id": str(t.topic_id),
                "partitions": [p.__dict__ for p in t.partitions],
                "configs": t.configs,
            }, separators=(",", ":"))
            for t in sorted(self.topics.values(), key=lambda t: t.name)
        )
        return f'{head[:-1]}, "topics": [\n{topics}\n]}}\n'

    def _save(self) -> None:
        self._saved = self._writer.request()

    def saved(self) -> asyncio.Future[None] | None:
        """The write covering every change so far (None when it is already on disk)."""
        saved = self._saved
        return None if saved is None or saved.done() and saved.exception() is None else saved

    async def close(self) -> None:
        """Wait for the pending write."""
        await self._writer.close()

    # --- queries -------------------------------------------------------------------------------

    def topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self._by_id.get(topic_id)

    def partition(self, name: str, index: int) -> PartitionAssignment | None:
        topic = self.topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]

    # --- changes -------------------------------------------------------------------------------

    def _assign(self, count: int, replication_factor: int, first_index: int) -> list[PartitionAssignment]:
        brokers = self.broker_ids
        out = []
        for index in range(first_index, first_index + count):
            replicas = [brokers[(index + r) % len(brokers)] for r in range(replication_factor)]
            out.append(PartitionAssignment(replicas=replicas, leader=replicas[0], isr=list(replicas)))
        return out

    def check_new_topic(self, name: str, num_partitions: int, replication_factor: int) -> None:
        """Raise the error CreateTopics would report, without creating anything."""
        validate_topic_name(name)
        if name in self.topics:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        if num_partitions < 1:
            raise InvalidPartitionsError("Number of partitions must be larger than 0.")
        if replication_factor < 1:
            raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
        if replication_factor > len(self.broker_ids):
            raise InvalidReplicationFactorError(
                f"Unable to replicate the partition {replication_factor} time(s): The target "
                f"replication factor of {replication_factor} cannot be reached because only "
                f"{len(self.broker_ids)} broker(s) are registered."
            )

    def create_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> TopicMetadata:
        self.check_new_topic(name, num_partitions, replication_factor)
        topic_id = uuid.uuid4()
        topic = TopicMetadata(name, topic_id, self._assign(num_partitions, replication_factor, 0), dict(configs))
        self.topics[name] = topic
        self._by_id[topic_id] = topic
        self._save()
        return topic

    def delete_topic(self, name: str) -> TopicMetadata:
        topic = self.topics.pop(name, None)
        if topic is None:
            raise UnknownTopicError(f"Topic {name} does not exist.")
        self._by_id.pop(topic.topic_id, None)
        self._save()
        return topic

    def check_partition_increase(self, name: str, new_count: int) -> TopicMetadata:
        topic = self.topics.get(name)
        if topic is None:
            raise UnknownTopicError(f"The topic '{name}' does not exist.")
        current = len(topic.partitions)
        if new_count < current:
            raise InvalidPartitionsError(
                f"The topic {name} currently has {current} partition(s); {new_count} would not be an increase."
            )
        if new_count == current:
            raise InvalidPartitionsError(f"Topic already has {current} partition(s).")
        return topic

    def add_partitions(self, name: str, new_count: int) -> list[int]:
        topic = self.check_partition_increase(name, new_count)
        first = len(topic.partitions)
        replication = len(topic.partitions[0].replicas) if topic.partitions else 1
        topic.partitions.extend(self._assign(new_count - first, replication, first))
        self._save()
        return list(range(first, new_count))

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        topic = self.topics.get(name)
        if topic is None:
            raise UnknownTopicError(f"Topic {name} does not exist.")
        topic.configs = dict(configs)
        self._save()

    async def allocate_producer_id(self) -> int:
        """A producer id unique across restarts: ids are handed out from blocks, and a block only
        once it is on disk."""
        while self._next_producer_id >= self._producer_id_block_end:
            start = self.next_producer_id_block
            self.next_producer_id_block = start + PRODUCER_ID_BLOCK_SIZE
            self._save()
            saved = self.saved()
            if saved is not None:
                await saved
            if start + PRODUCER_ID_BLOCK_SIZE > self._producer_id_block_end:
                self._next_producer_id, self._producer_id_block_end = start, start + PRODUCER_ID_BLOCK_SIZE
        producer_id = self._next_producer_id
        self._next_producer_id += 1
        return producer_id
