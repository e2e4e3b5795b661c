"""The single broker's cluster metadata store: one JSON file in the first log directory.

Owns ``cluster-metadata.json``: every topic with its id, assignment, partition states and config
overrides, the topics marked for deletion, the next producer-id block, and the entity configs
(what ZooKeeper keeps in ``/config/brokers``, ``/config/clients`` and ``/config/users``: dynamic
broker configs, quotas, SCRAM credentials in Kafka's string form), by Kafka's sanitized entity
names. It is the
`ControllerStore` of the zero-config broker, which is the only broker of its cluster and always
its controller. Changes apply in memory at once and notify the `StoreListener` (on the event loop,
like ZooKeeper watches); the file is rewritten atomically in a worker thread, one write covering
every change made while the previous one was under way (`CoalescingFileWriter`). A change that
must be on disk before it is acted on (a producer-id block, a new topic before its logs exist)
is awaited.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence

from pybroker.common.cluster import LiveBroker
from pybroker.common.topic import (
    FullReplicaAssignment,
    PartitionAssignment,
    TopicExistsError,
    TopicMetadata,
    UnknownTopicError,
)
from pybroker.controller.store import (
    DEFAULT_ENTITY,
    ENTITY_CONFIG_TYPES,
    PartitionEpochConflictError,
    StoreListener,
)
from pybroker.log.file_sync import CoalescingFileWriter
from pybroker.zookeeper.znodes import PRODUCER_ID_BLOCK_SIZE, desanitize, sanitize

METADATA_FILE = "cluster-metadata.json"


def _partition_epochs(saved: Mapping[str, Mapping[str, int]]) -> dict[int, dict[int, int]]:
    """A ``leader_epochs_*`` map as the file keeps it: per partition, an epoch per partition (JSON keys are strings)."""
    return {int(p): {int(q): e for q, e in epochs.items()} for p, epochs in saved.items()}


def _partition_replicas(saved: Mapping[str, Sequence[int]]) -> dict[int, list[int]]:
    """An ``adding_replicas`` / ``removing_replicas`` map as the file keeps it (JSON keys are strings)."""
    return {int(p): [int(r) for r in replicas] for p, replicas in saved.items()}


class LocalStore:
    """`ControllerStore` over ``cluster-metadata.json``; this broker is the only one."""

    def __init__(self, directory: str, cluster_id: str, listener: StoreListener | None = None) -> None:
        self.path = os.path.join(directory, METADATA_FILE)
        self.cluster_id = cluster_id
        self.listener = listener or StoreListener()
        self._topics: dict[str, TopicMetadata] = {}
        self._deleting: set[str] = set()
        self._brokers: dict[int, LiveBroker] = {}
        self._controller_epoch = 0
        self._next_producer_id_block = 0
        self._entities: dict[str, dict[str, dict[str, str]]] = {t: {} for t in ENTITY_CONFIG_TYPES}
        self._writer = CoalescingFileWriter(self.path, self._render)
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
        self._next_producer_id_block = data.get("next_producer_id_block", 0)
        self._controller_epoch = data.get("controller_epoch", 0)
        self._deleting = set(data.get("topics_being_deleted", []))
        for entity_type, entities in (data.get("entity_configs") or {}).items():
            if entity_type in self._entities:
                self._entities[entity_type] = {str(name): {str(k): str(v) for k, v in config.items()}
                                               for name, config in entities.items()}
        for user, config in (data.get("users") or {}).items():  # the file of pybroker before entity configs
            self._entities["users"][sanitize(str(user))] = {str(k): str(v) for k, v in config.items()}
        for item in data.get("topics", []):
            topic = TopicMetadata(
                item["name"],
                uuid.UUID(item["topic_id"]),
                [PartitionAssignment(**p) for p in item["partitions"]],
                dict(item.get("configs", {})),
                item.get("initial_partition_count", 0),
                item.get("undeleted_partition_count", 0),
                _partition_epochs(item.get("leader_epochs_after_creation", {})),
                _partition_epochs(item.get("leader_epochs_before_deletion", {})),
                _partition_replicas(item.get("adding_replicas", {})),
                _partition_replicas(item.get("removing_replicas", {})),
            )
            self._topics[topic.name] = topic

    def _render(self) -> str:
        """The file's text: one topic per line (compact JSON, so that a topic of 10,000
        partitions renders in milliseconds)."""
        head = json.dumps({
            "version": 1,
            "cluster_id": self.cluster_id,
            "controller_epoch": self._controller_epoch,
            "next_producer_id_block": self._next_producer_id_block,
            "topics_being_deleted": sorted(self._deleting),
            **({"entity_configs": {t: dict(sorted(e.items())) for t, e in self._entities.items() if e}}
               if any(self._entities.values()) else {}),
        })
        topics = ",\n".join(
            json.dumps({
                "name": t.name,
                "topic_id": str(t.topic_id),
                "partitions": [p.__dict__ for p in t.partitions],
                "configs": t.configs,
                "initial_partition_count": t.initial_partition_count,
                "undeleted_partition_count": t.undeleted_partition_count,
                **({"leader_epochs_after_creation": t.leader_epochs_after_creation}
                   if t.leader_epochs_after_creation else {}),
                **({"leader_epochs_before_deletion": t.leader_epochs_before_deletion}
                   if t.leader_epochs_before_deletion else {}),
                **({"adding_replicas": t.adding_replicas} if t.adding_replicas else {}),
                **({"removing_replicas": t.removing_replicas} if t.removing_replicas else {}),
            }, separators=(",", ":"))
            for t in sorted(self._topics.values(), key=lambda t: t.name)
        )
        return f'{head[:-1]}, "topics": [\n{topics}\n]}}\n'

    async def _save(self) -> None:
        saved = self._writer.request()
        if saved is not None:
            await asyncio.shield(saved)  # shared with other changes' saves

    async def close(self) -> None:
        """Wait for the pending write."""
        await self._writer.close()

    # --- brokers and the controller ------------------------------------------------------------

    async def register_broker(self, broker: LiveBroker) -> int:
        self._brokers = {broker.broker_id: broker}
        self.listener.on_brokers_changed()
        return 0

    async def update_broker_info(self, broker: LiveBroker) -> None:
        await self.register_broker(broker)

    # A single broker is its own controller: its replica manager handles a failed log dir itself.

    async def propagate_log_dir_event(self, broker_id: int) -> None:
        pass

    async def take_log_dir_events(self, controller_epoch: int) -> set[int]:
        return set()

    async def live_brokers(self) -> dict[int, tuple[LiveBroker, int]]:
        return {broker_id: (broker, 0) for broker_id, broker in self._brokers.items()}

    async def try_become_controller(self, broker_id: int) -> int | None:
        self._controller_epoch += 1
        await self._save()
        return self._controller_epoch

    async def controller_id(self) -> int | None:
        return next(iter(self._brokers), None)

    # --- the admin path ------------------------------------------------------------------------

    async def create_topic(
        self, name: str, topic_id: uuid.UUID, assignment: list[list[int]], configs: dict[str, str]
    ) -> None:
        if name in self._topics:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        partitions = [PartitionAssignment(list(replicas), leader=-1, leader_epoch=-1) for replicas in assignment]
        topic = self._topics[name] = TopicMetadata(name, topic_id, partitions, dict(configs))
        self.listener.on_topic_configs_changed(name)
        try:
            await self._save()
        except OSError:
            # Not on disk (e.g. the process is out of descriptors): the topic is not created, and
            # a save covering that is requested (a write queued meanwhile may have included it).
            if self._topics.get(name) is topic:
                del self._topics[name]
                self.listener.on_topic_configs_changed(name)
                with contextlib.suppress(OSError):  # written at once when no loop runs
                    self._writer.request()
            raise
        self.listener.on_topics_changed([name])

    async def add_partitions(self, name: str, assignment: list[list[int]]) -> None:
        topic = self._topic(name)
        for replicas in assignment[len(topic.partitions):]:
            topic.partitions.append(PartitionAssignment(list(replicas), leader=-1, leader_epoch=-1))
        topic.undeleted_partition_count = len(topic.partitions)
        await self._save()
        self.listener.on_topics_changed([name])

    async def shrink_partitions(self, name: str, undeleted_partition_count: int) -> None:
        self._topic(name).undeleted_partition_count = undeleted_partition_count
        await self._save()
        self.listener.on_topics_changed([name])

    async def mark_topic_for_deletion(self, name: str) -> None:
        self._topic(name)
        self._deleting.add(name)
        await self._save()
        self.listener.on_topic_deletions()

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self._topic(name).configs = dict(configs)
        self.listener.on_topic_configs_changed(name)
        await self._save()

    def topic_configs(self, name: str) -> dict[str, str]:
        topic = self._topics.get(name)
        return topic.configs if topic is not None else {}

    async def read_topic_configs(self, name: str) -> dict[str, str]:
        return dict(self.topic_configs(name))

    async def allocate_producer_id_block(self, broker_id: int) -> tuple[int, int]:
        start = self._next_producer_id_block
        self._next_producer_id_block = start + PRODUCER_ID_BLOCK_SIZE
        await self._save()
        return start, start + PRODUCER_ID_BLOCK_SIZE - 1

    # --- user configs --------------------------------------------------------------------------

    def user_configs(self) -> dict[str, dict[str, str]]:
        return {desanitize(name): dict(config) for name, config in self._entities["users"].items()
                if "/" not in name and name != DEFAULT_ENTITY}

    async def read_user_configs(self, users: Collection[str] | None = None) -> dict[str, dict[str, str]]:
        if users is None:
            return self.user_configs()
        return {user: dict(self._entities["users"].get(sanitize(user), {})) for user in users}

    async def set_user_configs(self, user: str, config: Mapping[str, str]) -> None:
        await self.set_entity_configs("users", sanitize(user), config)

    # --- entity configs ------------------------------------------------------------------------

    def entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        return {name: dict(config) for name, config in self._entities[entity_type].items()}

    async def read_entity_configs(
        self, entity_type: str, names: Collection[str] | None = None
    ) -> dict[str, dict[str, str]]:
        if names is None:
            return self.entity_configs(entity_type)
        return {name: dict(self._entities[entity_type].get(name, {})) for name in names}

    async def set_entity_configs(self, entity_type: str, entity_name: str, config: Mapping[str, str]) -> None:
        """Applied (and the listener told) at once; returns once the file has it. An entity left
        without configs is dropped from the file."""
        new = {str(k): str(v) for k, v in config.items()}
        if new:
            self._entities[entity_type][entity_name] = new
        else:
            self._entities[entity_type].pop(entity_name, None)
        if entity_type == "users" and "/" not in entity_name and entity_name != DEFAULT_ENTITY:
            self.listener.on_user_configs_changed(desanitize(entity_name), dict(new))
        self.listener.on_entity_configs_changed(entity_type, entity_name, dict(new))
        await self._save()

    def _topic(self, name: str) -> TopicMetadata:
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicError(f"Topic {name} does not exist.")
        return topic

    # --- the controller ------------------------------------------------------------------------

    async def topic_names(self) -> set[str]:
        return set(self._topics)

    async def read_topics(self, names: Iterable[str]) -> dict[str, TopicMetadata]:
        return {name: copy.deepcopy(self._topics[name]) for name in names if name in self._topics}

    async def topics_marked_for_deletion(self) -> set[str]:
        return set(self._deleting)

    async def write_partition_states(
        self, controller_epoch: int, states: dict[str, dict[int, PartitionAssignment]]
    ) -> None:
        await self._put_partition_states(controller_epoch, states, create=False)

    async def create_partition_states(
        self, controller_epoch: int, states: dict[str, dict[int, PartitionAssignment]]
    ) -> None:
        await self._put_partition_states(controller_epoch, states, create=True)

    async def _put_partition_states(
        self, controller_epoch: int, states: dict[str, dict[int, PartitionAssignment]], create: bool
    ) -> None:
        """A partition without a state is created at partition epoch 0; one with a state is
        updated if the caller read its current partition epoch, and never by a creation."""
        conflicts: list[tuple[str, int]] = []
        for name, partitions in states.items():
            topic = self._topics.get(name)
            if topic is None:
                continue
            for index, state in partitions.items():
                stored = topic.partitions[index]
                if stored.leader_epoch < 0:  # no state yet: created at epoch 0
                    new_epoch = 0
                elif create or stored.partition_epoch != state.partition_epoch:
                    conflicts.append((name, index))
                    continue
                else:
                    new_epoch = stored.partition_epoch + 1
                state.partition_epoch = new_epoch
                state.controller_epoch = controller_epoch
                topic.partitions[index] = copy.copy(state)
        await self._save()
        if conflicts:
            raise PartitionEpochConflictError(conflicts)

    async def record_leader_epochs(self, controller_epoch: int, topic: TopicMetadata, indexes: Iterable[int]) -> None:
        stored = self._topics.get(topic.name)
        if stored is None:
            return
        for index in indexes:
            for source, target in ((topic.leader_epochs_after_creation, stored.leader_epochs_after_creation),
                                   (topic.leader_epochs_before_deletion, stored.leader_epochs_before_deletion)):
                if index in source:
                    target[index] = dict(source[index])
                else:
                    target.pop(index, None)
        await self._save()

    async def remove_partitions(self, controller_epoch: int, name: str, count: int) -> None:
        topic = self._topics.get(name)
        if topic is None:
            return
        del topic.partitions[count:]
        for epochs in (topic.leader_epochs_after_creation, topic.leader_epochs_before_deletion):
            for index in [i for i in epochs if i >= count]:
                del epochs[index]
        await self._save()

    async def remove_topic(self, controller_epoch: int, name: str) -> None:
        self._topics.pop(name, None)
        self._deleting.discard(name)
        await self._save()

    # --- partition reassignment (KIP-455) -------------------------------------------------------

    async def set_replica_assignments(
        self, controller_epoch: int, name: str, assignments: Mapping[int, FullReplicaAssignment]
    ) -> None:
        """Applied at once; returns once the file has it."""
        topic = self._topic(name)
        for index, assignment in assignments.items():
            if index < len(topic.partitions):
                topic.set_full_assignment(index, assignment)
        await self._save()
