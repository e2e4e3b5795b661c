"""The seam between the controller logic and where cluster metadata is kept.

Owns the `ControllerStore` protocol: the operations Kafka's ZooKeeper mode performs on its znodes,
in the controller's vocabulary, and the notifications it watches for. Two implementations:
`pybroker.controller.local_store.LocalStore` (the zero-config single broker: one JSON file in the
first log directory, this broker the only one and always the controller) and the ZooKeeper store
(cluster mode, when ``zookeeper.connect`` is set). The controller and the admin path are written
once, against this protocol, so "what happens when a topic is created" has one code path.

Two kinds of callers use a store, as in Kafka:

* the admin path of any broker (CreateTopics, CreatePartitions, DeleteTopics, AlterConfigs,
  InitProducerId) writes requests: a topic's assignment and configs, a deletion marker, config
  overrides, a producer-id block; the controller's admin path (AlterUserScramCredentials) writes
  user configs (Kafka's ``/config/users/<user>``: SCRAM credentials), which every broker follows
  (``on_user_configs_changed``) to fill its credential cache;
* the active controller reads the whole state on election, reacts to `StoreListener`
  notifications, and writes partition states and topic removals, fenced by its epoch.

Every method is a coroutine run on the event loop; an implementation never blocks it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from pybroker.common.cluster import LiveBroker
from pybroker.common.topic import FullReplicaAssignment, PartitionAssignment, TopicMetadata

#: The entity types whose configs `ControllerStore.entity_configs` keeps (Kafka's ConfigType,
#: topics aside): a broker id or ``<default>``; a client id; a user, ``<default>``, or a user's
#: client ``<user>/clients/<client>`` (either side may be ``<default>``).
ENTITY_CONFIG_TYPES = ("brokers", "clients", "users")
#: Kafka's ConfigEntityName.Default: the entity name of a type's defaults.
DEFAULT_ENTITY = "<default>"


class ControllerMovedError(Exception):
    """This broker's controller epoch is no longer the newest: another controller was elected
    (Kafka's ControllerMovedException). The controller resigns."""


class PartitionEpochConflictError(Exception):
    """Some partition states were not written because their stored partition epoch is not the
    one the caller based its decision on (Kafka's BADVERSION on a state znode: re-read, decide
    again), or, for a creation, because they have a state already (NODEEXISTS). The other
    states of the same call were written."""

    def __init__(self, partitions: list[tuple[str, int]]) -> None:
        super().__init__(
            "partition state(s) changed since they were read: "
            + ", ".join(f"{topic}-{index}" for topic, index in partitions)
        )
        self.partitions = partitions


@dataclass
class StoreListener:
    """What a store notifies, each on the event loop; every callback may be left unset. The
    controller watches the first three; every broker watches ``on_topic_configs_changed``."""

    on_brokers_changed: Callable[[], None] = lambda: None
    #: Topics were created, or partitions added to these topics (None: any topic may have
    #: changed, e.g. after a reconnection).
    on_topics_changed: Callable[[Collection[str] | None], None] = field(default=lambda names: None)
    on_topic_deletions: Callable[[], None] = lambda: None
    on_controller_changed: Callable[[], None] = lambda: None
    on_topic_configs_changed: Callable[[str], None] = field(default=lambda name: None)
    #: A user's configs changed (its whole config map after the change; empty when it has none):
    #: every broker refreshes the user's SCRAM credentials from it. Also called for every user
    #: when the store (re)reads them all.
    on_user_configs_changed: Callable[[str, Mapping[str, str]], None] = field(default=lambda user, config: None)
    #: An entity's configs changed: ``(entity_type, entity_name, config)``, with the entity as
    #: Kafka names its znode below ``/config`` (`ENTITY_CONFIG_TYPES`; the name sanitized, e.g.
    #: ``("brokers", "1")``, ``("brokers", "<default>")``, ``("clients", "app")``,
    #: ``("users", "alice")``, ``("users", "alice/clients/app")``) and its whole config map
    #: after the change (empty when it has none). Every broker follows broker configs (dynamic
    #: broker configs) and client and user configs (quotas). Also called for every entity that
    #: has configs when the store (re)reads them all (at connect, after a reconnection). A plain user's change is told here too, after ``on_user_configs_changed``.
    on_entity_configs_changed: Callable[[str, str, Mapping[str, str]], None] = field(
        default=lambda entity_type, entity_name, config: None)
    #: The store registered this broker again by itself (a new ZooKeeper session after the old
    #: one expired): its new broker epoch.
    on_broker_registered: Callable[[int], None] = field(default=lambda epoch: None)
    #: The connection to the store was lost; the session (this broker's registration, and its
    #: controllership if it has it) may still be alive, or may expire meanwhile: what this broker
    #: knows cannot be confirmed, so the controller stops acting until `on_connection_resumed`.
    on_connection_suspended: Callable[[], None] = lambda: None
    #: Connected again (in the same session, or in a new one after `on_session_expired`).
    on_connection_resumed: Callable[[], None] = lambda: None
    #: The session expired: its registration and controllership are gone (Kafka's Expire event,
    #: handled before anything else): the controller resigns at once. The store re-registers the
    #: broker in a new session by itself (`on_broker_registered`), and every watch fires again.
    on_session_expired: Callable[[], None] = lambda: None
    #: Log dir event notifications are waiting (KIP-112; the controller watches it, ZooKeeper only).
    on_log_dir_event: Callable[[], None] = lambda: None


class ControllerStore(Protocol):
    cluster_id: str

    # --- brokers and the controller ------------------------------------------------------------

    async def register_broker(self, broker: LiveBroker) -> int:
        """Announce this broker; returns its broker epoch."""
        ...

    async def update_broker_info(self, broker: LiveBroker) -> None:
        """Announce this broker's new endpoints (a dynamic ``advertised.listeners``); the
        controller hears of it as of a broker change."""
        ...

    async def live_brokers(self) -> dict[int, tuple[LiveBroker, int]]:
        """Every registered broker with its broker epoch."""
        ...

    async def try_become_controller(self, broker_id: int) -> int | None:
        """Try to become the controller; the new controller epoch, or None when another broker
        is the controller."""
        ...

    async def controller_id(self) -> int | None:
        ...

    async def propagate_log_dir_event(self, broker_id: int) -> None:
        """Tell the controller that a log dir of ``broker_id`` failed (KIP-112's notification)."""
        ...

    async def take_log_dir_events(self, controller_epoch: int) -> set[int]:
        """The brokers named by the waiting log dir notifications, which are then deleted."""
        ...

    # --- the admin path (any broker) ------------------------------------------------------------

    async def create_topic(
        self, name: str, topic_id: uuid.UUID, assignment: list[list[int]], configs: dict[str, str]
    ) -> None:
        """Record a new topic (configs first, then the assignment); raises TopicExistsError, or
        OSError when it could not be recorded (then no topic is created)."""
        ...

    async def add_partitions(self, name: str, assignment: list[list[int]]) -> None:
        """Replace ``name``'s assignment by a longer one (the existing partitions unchanged)."""
        ...

    async def shrink_partitions(self, name: str, undeleted_partition_count: int) -> None:
        """KIP-253: lower the topic's undeleted partition count; the partitions from it on are
        marked for deletion (the controller records their epochs and removes them once
        drained). The caller has checked the count. UnknownTopicError if the topic is gone."""
        ...

    async def mark_topic_for_deletion(self, name: str) -> None:
        ...

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        ...

    def topic_configs(self, name: str) -> dict[str, str]:
        """The config overrides of ``name`` as last notified (empty when none)."""
        ...

    async def read_topic_configs(self, name: str) -> dict[str, str]:
        """The config overrides of ``name`` read from the store itself (empty when none), as
        Kafka's admin path reads ZooKeeper: a write through any broker is seen at once."""
        ...

    async def allocate_producer_id_block(self, broker_id: int) -> tuple[int, int]:
        """A block of producer ids no other broker ever gets: ``(first, last)`` inclusive."""
        ...

    # --- user configs (SCRAM credentials) ------------------------------------------------------

    def user_configs(self) -> dict[str, dict[str, str]]:
        """Every user's config map as last notified (what the credential cache is filled from)."""
        ...

    async def read_user_configs(self, users: Collection[str] | None = None) -> dict[str, dict[str, str]]:
        """The stored config maps of ``users`` (None: every user that has one), read from the store
        itself, as Kafka's admin path reads ZooKeeper; a user without configs maps to ``{}`` when
        named, and is left out when listing every user."""
        ...

    async def set_user_configs(self, user: str, config: Mapping[str, str]) -> None:
        """Replace ``user``'s whole config map and tell every broker (``on_user_configs_changed``)."""
        ...

    # --- entity configs: brokers, clients and users (dynamic broker configs, quotas) --------------

    def entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        """Every entity of ``entity_type`` (one of `ENTITY_CONFIG_TYPES`) that has configs, by its
        sanitized znode name below ``/config/<type>`` (``"1"``, ``"<default>"``,
        ``"alice/clients/app"``), as last notified."""
        ...

    async def read_entity_configs(
        self, entity_type: str, names: Collection[str] | None = None
    ) -> dict[str, dict[str, str]]:
        """The stored config maps of these entities (None: every entity of the type that has a
        znode), read from the store itself, as Kafka's admin path reads ZooKeeper; an entity named
        but without configs maps to ``{}``."""
        ...

    async def set_entity_configs(self, entity_type: str, entity_name: str, config: Mapping[str, str]) -> None:
        """Replace the entity's whole config map and tell every broker
        (``on_entity_configs_changed``; for a plain user also ``on_user_configs_changed``). An
        empty map leaves the entity without configs. The caller read, changed and validated it."""
        ...

    # --- the controller -------------------------------------------------------------------------

    async def topic_names(self) -> set[str]:
        ...

    async def read_topics(self, names: Iterable[str]) -> dict[str, TopicMetadata]:
        """These topics (those that exist) with their assignments and partition states (leader
        -1 and leader epoch -1 for a partition that has no state yet)."""
        ...

    async def topics_marked_for_deletion(self) -> set[str]:
        ...

    async def write_partition_states(
        self, controller_epoch: int, states: dict[str, dict[int, PartitionAssignment]]
    ) -> None:
        """Write these partition states, fenced by the controller epoch: raises
        ControllerMovedError when another controller was elected.

        The partition-epoch convention (Kafka's LeaderAndIsr before and after
        ``updateLeaderAndIsr``): on the way in, each state's ``partition_epoch`` is the epoch of
        the stored state the decision was based on (ignored for a partition that has no state
        yet; the controller passes 0); the state is written only if the stored epoch is still
        that one. On the way out, each written state's ``partition_epoch`` is its new epoch (0
        for a state just created, one more on each update) and its ``controller_epoch`` is
        ``controller_epoch``. States whose stored epoch moved on are left unwritten and
        reported together by PartitionEpochConflictError, after the others were written."""
        ...

    async def create_partition_states(
        self, controller_epoch: int, states: dict[str, dict[int, PartitionAssignment]]
    ) -> None:
        """Create the first state of these partitions (new to the controller: Kafka's
        NewPartition to OnlinePartition), whatever `read_topics` found for them, fenced by the
        controller epoch: raises ControllerMovedError when another controller was elected, even
        if every one of them has a state already. A partition that has a state keeps it, and
        these are reported together by PartitionEpochConflictError (Kafka's NODEEXISTS) after
        the others were created. Each created state's ``partition_epoch`` becomes 0 and its
        ``controller_epoch`` ``controller_epoch``."""
        ...

    async def record_leader_epochs(self, controller_epoch: int, topic: TopicMetadata, indexes: Iterable[int]) -> None:
        """KIP-253: store what ``topic`` holds for these partitions in
        ``leader_epochs_after_creation`` and ``leader_epochs_before_deletion`` (both maps of each,
        replacing what was stored); fenced like `write_partition_states` (ControllerMovedError)."""
        ...

    async def remove_partitions(self, controller_epoch: int, name: str, count: int) -> None:
        """KIP-253: drop the partitions of ``name`` from index ``count`` on (drained partitions
        marked for deletion): their assignment, state and recorded epochs; fenced."""
        ...

    async def remove_topic(self, controller_epoch: int, name: str) -> None:
        """Delete a topic whose replicas are all deleted, and its deletion marker (fenced)."""
        ...

    # --- partition reassignment (KIP-455) -------------------------------------------------------

    async def set_replica_assignments(
        self, controller_epoch: int, name: str, assignments: Mapping[int, FullReplicaAssignment]
    ) -> None:
        """The active controller rewrites these partitions' assignments in ``name``'s topic record
        (their replicas RS and their adding and removing replicas, Kafka's
        ``setTopicAssignmentRaw``), the other partitions, the topic id and the partition counts
        unchanged; fenced by the controller epoch (ControllerMovedError). UnknownTopicError if
        the topic is gone. `read_topics` returns them in ``TopicMetadata.adding_replicas`` /
        ``removing_replicas`` (a new controller resumes the reassignments from there)."""
        ...

    async def close(self) -> None:
        ...
