"""Topic administration as any broker performs it: validate, then write the request to the store.

Owns Kafka's ``ZkAdminManager`` path: CreateTopics (and auto-creation), CreatePartitions,
DeleteTopics and topic config changes are validated here with Kafka's errors, the replica
assignment is computed over the live brokers of the metadata cache, and the result is written to
the `ControllerStore`. The controller then elects leaders and tells every broker; the requests
that must answer after that wait on the metadata cache (Kafka's DelayedCreatePartitions and
DelayedDeleteTopics). This module never decides leaders and never touches a log.

Producer ids are handed out here too, from blocks the store allocates (Kafka's
``ProducerIdManager``): a block is used only once the store has it durably.

It is also the handlers' one way to the store for the other entity configs: client quotas, SCRAM
credentials and dynamic broker configs (read and written as Kafka's admin path does, the rules in
``quota/admin.py``, ``user_scram_credentials.py`` and ``broker_config_changes.py``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence

from pybroker.common.errors import ErrorCode
from pybroker.common.topic import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    TopicExistsError,
    UnknownTopicError,
    validate_topic_name,
)
from pybroker.controller.replica_assignment import (
    assign_replicas_to_brokers,
    assignment_for_new_partitions,
)
from pybroker.controller.store import ControllerStore
from pybroker.log.config import TOPIC_CONFIGS, validate_topic_configs
from pybroker.server.config import BrokerConfig
from pybroker.server.metadata_cache import MetadataCache
from pybroker.server.quota.admin import (
    FilterComponent,
    QuotaOp,
    alter_client_quotas,
    describe_client_quotas,
)
from pybroker.server.user_scram_credentials import (
    AlterResult,
    Deletion,
    DescribeResult,
    Upsertion,
    alter_user_scram_credentials,
    describe_user_scram_credentials,
)

log = logging.getLogger(__name__)

UNTIMED_WAIT_MS = 5000

def not_an_increase(current: int, new_count: int) -> str:
    """ZooKeeper-mode Kafka's refusal of a lower partition count."""
    return f"Topic currently has {current} partitions, which is higher than the requested {new_count}."


class AdminManager:
    """Topic creation, growth, deletion and config changes, requested by this broker's clients."""

    def __init__(self, broker_id: int, config: BrokerConfig, store: ControllerStore, metadata_cache: MetadataCache) -> None:
        self.broker_id = broker_id
        self.config = config
        self.store = store
        self.metadata_cache = metadata_cache
        self._next_producer_id = 0
        self._producer_id_block_end = -1  # last id of the current block (inclusive)

    # --- creation ------------------------------------------------------------------------------

    def _live_broker_ids(self) -> list[int]:
        return sorted(self.metadata_cache.live_brokers) or [self.broker_id]

    def check_topic_absent(self, name: str) -> None:
        """Raise InvalidTopicError for a name Kafka refuses, TopicExistsError for a topic that exists."""
        validate_topic_name(name)
        if self.metadata_cache.topic(name) is not None:
            raise TopicExistsError(f"Topic '{name}' already exists.")

    def check_new_topic(self, name: str, num_partitions: int, replication_factor: int) -> None:
        """Raise the error CreateTopics would report for a topic the broker assigns, without
        creating anything."""
        self.check_topic_absent(name)
        if num_partitions < 1:
            raise InvalidPartitionsError("Number of partitions must be larger than 0.")
        if replication_factor < 1:
            raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
        brokers = len(self._live_broker_ids())
        if replication_factor > brokers:
            # ZooKeeper-mode Kafka's text (AdminUtils); KRaft words it otherwise.
            raise InvalidReplicationFactorError(
                f"Replication factor: {replication_factor} larger than available brokers: {brokers}."
            )

    def _racks(self) -> dict[int, str] | None:
        """The live brokers' racks when every one has a rack (Kafka then assigns rack-aware)."""
        racks = {b.broker_id: b.rack for b in self.metadata_cache.live_brokers.values() if b.rack}
        every_one = racks and len(racks) == len(self.metadata_cache.live_brokers)
        return racks if every_one else None

    def assign_replicas(self, num_partitions: int, replication_factor: int) -> list[list[int]]:
        """Replica lists for a new topic's partitions: Kafka's assignment over the live brokers."""
        assigned = assign_replicas_to_brokers(
            self._live_broker_ids(), num_partitions, replication_factor, racks=self._racks()
        )
        return [assigned[index] for index in range(num_partitions)]

    async def create_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str | None],
        assignment: list[list[int]] | None = None,
    ) -> uuid.UUID:
        """Validate and record a new topic (-1: the broker defaults); returns its id. Raises the
        metadata and config errors CreateTopics reports. The controller elects its leaders next;
        `wait_for_leaders` waits for them."""
        if assignment is None:
            if num_partitions == -1:
                num_partitions = self.config.get("num.partitions")
            if replication_factor == -1:
                replication_factor = self.config.get("default.replication.factor")
            self.check_new_topic(name, num_partitions, replication_factor)
            assignment = self.assign_replicas(num_partitions, replication_factor)
        else:  # checked by the caller as Kafka checks an explicit assignment (any broker ids)
            self.check_topic_absent(name)
        checked = validate_topic_configs(configs)
        topic_id = uuid.uuid4()
        await self.store.create_topic(name, topic_id, assignment, checked)
        log.info("Created topic %s with %d partition(s)", name, len(assignment))
        return topic_id

    async def wait_for_leaders(self, names: list[str], timeout_ms: int, partition_counts: dict[str, int] | None = None) -> bool:
        """Until every partition of ``names`` has a leader in the metadata cache (and, for those
        in ``partition_counts``, the topic has that many partitions for producers: added ones
        listed, or the rest marked for deletion). A timeout of 0
        or less asks for no waiting (Kafka then answers at once): here it still waits, at most
        `UNTIMED_WAIT_MS`, and reports success either way, so that a client which looks at the
        metadata next sees what it created."""
        counts = partition_counts or {}

        def ready() -> bool:
            return all(
                (t := self.metadata_cache.topic(n)) is not None and t.has_all_leaders
                and (n not in counts or (len(t.partitions) >= counts[n] and t.counts[1] == counts[n]))
                for n in names
            )
        if timeout_ms <= 0:
            await self.metadata_cache.wait_for(ready, UNTIMED_WAIT_MS)
            return True
        return await self.metadata_cache.wait_for(ready, timeout_ms)

    def check_partition_increase(self, name: str, new_count: int) -> int:
        """The current partition count; raises what CreatePartitions would report for a count
        that is not an increase, or while partitions are marked for deletion (KIP-253: a topic
        grows again once they are drained and removed)."""
        topic = self.metadata_cache.topic(name)
        if topic is None:
            raise UnknownTopicError(f"The topic '{name}' does not exist.")
        current = len(topic.partitions)
        _, undeleted = topic.counts
        if undeleted < current and new_count > undeleted:
            raise InvalidPartitionsError(
                f"The topic {name} has partitions {undeleted}-{current - 1} marked for deletion; it cannot grow "
                "until they are drained (DeleteRecords or retention) and removed."
            )
        if new_count < current:
            raise InvalidPartitionsError(not_an_increase(current, new_count))
        if new_count == current:
            raise InvalidPartitionsError(f"Topic already has {current} partitions.")
        return current

    def check_partition_decrease(self, name: str, new_count: int) -> int:
        """KIP-253: the current undeleted partition count, if ``name`` may shrink to
        ``new_count`` (ordered delivery on, not internal, not below the initial count);
        raises InvalidPartitionsError otherwise."""
        topic = self.metadata_cache.topic(name)
        if topic is None:
            raise UnknownTopicError(f"The topic '{name}' does not exist.")
        initial, undeleted = topic.counts
        if topic.is_internal or not self._ordered_delivery(name):  # no KIP-253 here: Kafka's answer
            raise InvalidPartitionsError(not_an_increase(undeleted, new_count))
        if new_count < initial:
            raise InvalidPartitionsError(
                f"The topic {name} was created with {initial} partition(s); it cannot shrink below that "
                f"(asked for {new_count})."
            )
        return undeleted

    def _ordered_delivery(self, name: str) -> bool:
        value = self.store.topic_configs(name).get("enable.ordered.delivery")
        return bool(TOPIC_CONFIGS["enable.ordered.delivery"].parse(value)) if value is not None else True

    async def shrink_partitions(self, name: str, new_count: int) -> None:
        """KIP-253: mark the partitions from ``new_count`` on for deletion (checked first)."""
        self.check_partition_decrease(name, new_count)
        await self.store.shrink_partitions(name, new_count)

    async def create_partitions(self, name: str, new_count: int, assignment: list[list[int]] | None = None) -> None:
        current = self.check_partition_increase(name, new_count)
        topic = self.metadata_cache.topic(name)
        assert topic is not None
        existing = {i: list(topic.partitions[i].replicas) for i in range(current)}
        if assignment is None:
            new = assignment_for_new_partitions(
                existing, self._live_broker_ids(), new_count, topic=name, racks=self._racks()
            )
            assignment = [new[index] for index in range(current, new_count)]
        await self.store.add_partitions(name, [existing[i] for i in range(current)] + [list(r) for r in assignment])

    # --- deletion and configs ------------------------------------------------------------------

    async def delete_topic(self, name: str, timeout_ms: int) -> bool:
        """Mark ``name`` for deletion; True once the metadata cache no longer has it."""
        await self.store.mark_topic_for_deletion(name)
        deleted = await self.metadata_cache.wait_for(
            lambda: self.metadata_cache.topic(name) is None, timeout_ms if timeout_ms > 0 else UNTIMED_WAIT_MS
        )
        return deleted or timeout_ms <= 0

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        await self.store.set_topic_configs(name, validate_topic_configs(configs))

    def topic_configs(self, name: str) -> dict[str, str]:
        return self.store.topic_configs(name)

    async def read_topic_configs(self, name: str) -> dict[str, str]:
        """The topic's overrides as stored now (what an admin request reads and changes)."""
        return await self.store.read_topic_configs(name)

    # --- client quotas, SCRAM credentials, dynamic broker configs -------------------------------

    async def describe_client_quotas(
        self, components: Sequence[FilterComponent], strict: bool,
    ) -> list[tuple[dict[str, str | None], dict[str, float]]]:
        return await describe_client_quotas(self.store, components, strict)

    async def alter_client_quotas(
        self, entries: Sequence[tuple[Sequence[tuple[str, str | None]], Sequence[QuotaOp]]], validate_only: bool,
    ) -> list[tuple[ErrorCode, str | None]]:
        return await alter_client_quotas(self.store, entries, validate_only)

    async def describe_user_scram_credentials(self, users: Sequence[str] | None) -> list[DescribeResult]:
        return await describe_user_scram_credentials(self.store, users)

    async def alter_user_scram_credentials(
        self, upsertions: Sequence[Upsertion], deletions: Sequence[Deletion],
    ) -> list[AlterResult]:
        return await alter_user_scram_credentials(self.store, upsertions, deletions)

    async def read_broker_configs(self, entity: str) -> dict[str, str]:
        """The stored dynamic configs of one broker (its id) or of the cluster (``<default>``)."""
        return (await self.store.read_entity_configs("brokers", [entity])).get(entity, {})

    async def set_broker_configs(self, entity: str, props: Mapping[str, str]) -> None:
        """Replace them; every broker applies them when told."""
        await self.store.set_entity_configs("brokers", entity, dict(props))

    # --- producer ids --------------------------------------------------------------------------

    async def allocate_producer_id(self) -> int:
        """A producer id unique in the cluster and across restarts."""
        while self._next_producer_id > self._producer_id_block_end:
            first, last = await self.store.allocate_producer_id_block(self.broker_id)
            if last > self._producer_id_block_end:
                self._next_producer_id, self._producer_id_block_end = first, last
        producer_id = self._next_producer_id
        self._next_producer_id += 1
        return producer_id
