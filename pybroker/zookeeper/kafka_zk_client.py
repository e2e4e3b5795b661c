"""Kafka's operations on its ZooKeeper tree (Kafka's ``KafkaZkClient`` and the ZooKeeper parts of
``AdminZkClient`` and ``ZkProducerIdManager``), over one `ZooKeeperClient`.

Owns the ZooKeeper rules that make a cluster safe, as Kafka 2.8-3.6 applies them:

- **Broker epoch.** `register_broker` creates the ephemeral ``/brokers/ids/<id>`` with Kafka's
  "checked ephemeral" (a multi of an empty create and a set at version 0); the epoch is the
  znode's czxid. If the znode exists: owned by this session, it is ours already; owned by the
  session that last registered through this object (now replaced), it is deleted and created
  again; owned by anyone else, `BrokerIdInUseError`.
- **Controller election and fencing.** `register_controller_and_increment_epoch` creates the
  ephemeral ``/controller`` and bumps ``/controller_epoch`` in one multi conditional on the
  epoch's zkVersion; the winner keeps the new zkVersion, and every later controller write goes
  through `controller_multi`, which prepends a check of that zkVersion: once another broker
  has been elected the check fails and `ControllerMovedError` is raised (the caller resigns).
  A controller write is also only ever sent in the session that won the election: one held up
  by a lost connection is not resent once the session turns out to have expired (the
  controllership went with it, even if no other broker has been elected yet), which is what
  Kafka's Expire event, handled before the new session, achieves.
- **Partition epochs.** Partition state znodes are only written conditionally on their
  zkVersion (the partition epoch); a conflict is reported per partition, to be re-read and
  retried.

Requests that fail with ``ConnectionLoss`` are sent again once the session is connected, for
ever (Kafka's ``retryRequestsUntilConnected``); a create retried that way may find the node its
first attempt made, which the callers handle as Kafka does. One caught by a session expiry
(``SessionExpiredError``) is sent again in the new session, except a controller write (above).
Other kazoo errors propagate.

Concurrency rules: all methods are coroutines for the loop that owns the `ZooKeeperClient`;
independent reads and fenced writes of a batch are pipelined with ``asyncio.gather``. The object
holds no state but the session ids of its last broker registration and of its last election.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pybroker.common.topic import TopicExistsError
from pybroker.scheduler import SYSTEM_TIME, Time
from pybroker.types import TopicPartition
from pybroker.zookeeper.client import (
    BadVersionError,
    CheckOp,
    ConnectionLoss,
    CreateOp,
    DeleteOp,
    KazooException,
    MultiOpError,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
    SetDataOp,
    WatchCallback,
    ZkOp,
    ZnodeStat,
    ZooKeeperClient,
)
from pybroker.zookeeper.znodes import (
    BROKER_IDS_PATH,
    CLUSTER_ID_PATH,
    CONFIG_CHANGE_PREFIX,
    CONFIG_CHANGES_PATH,
    CONFIG_TYPE_CLIENT,
    CONFIG_TYPE_TOPIC,
    CONFIG_TYPE_USER,
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    DELETE_TOPICS_PATH,
    INITIAL_CONTROLLER_EPOCH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    LOG_DIR_EVENT_PREFIX,
    MATCH_ANY_VERSION,
    PERSISTENT_ZK_PATHS,
    PRODUCER_ID_BLOCK_PATH,
    TOPICS_PATH,
    BrokerInfo,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ProducerIdsBlock,
    ReplicaAssignment,
    TopicIdReplicaAssignment,
    broker_id_path,
    config_entity_path,
    config_entity_type_path,
    decode_broker_info,
    decode_cluster_id,
    decode_controller,
    decode_controller_epoch,
    decode_entity_config,
    decode_log_dir_event,
    decode_partition_epochs,
    decode_partition_state,
    decode_producer_id_block,
    decode_topic,
    delete_topic_path,
    desanitize,
    encode_broker_info,
    encode_cluster_id,
    encode_config_change,
    encode_controller,
    encode_controller_epoch,
    encode_entity_config,
    encode_log_dir_event,
    encode_partition_epochs,
    encode_partition_state,
    encode_producer_id_block,
    encode_topic,
    sanitize,
    topic_partition_path,
    topic_partition_state_path,
    topic_partitions_path,
    topic_path,
)

__all__ = [
    "BrokerIdInUseError",
    "ControllerMovedError",
    "KafkaZkClient",
    "TopicExistsError",
    "UpdateLeaderAndIsrResult",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
_MAX_PRODUCER_ID = 2**63 - 1


class ControllerMovedError(Exception):
    """Another broker is (or became) the controller: Kafka's ``ControllerMovedException``."""


class BrokerIdInUseError(NodeExistsError):
    """``/brokers/ids/<id>`` belongs to another live session: another broker has this id."""


class _OwnedByAnotherSession(NodeExistsError):
    """A checked ephemeral exists and belongs to a session that is neither ours nor our last."""

    def __init__(self, path: str, owner: int) -> None:
        super().__init__(f"{path} is owned by ZooKeeper session 0x{owner:x}")
        self.owner = owner


@dataclass
class UpdateLeaderAndIsrResult:
    """Per partition: the written `LeaderAndIsr` (with its new partition epoch) or the error;
    ``partitions_to_retry`` lost a partition-epoch race (BADVERSION) and must be re-read."""

    finished_partitions: dict[TopicPartition, LeaderAndIsr | Exception] = field(default_factory=dict)
    partitions_to_retry: list[TopicPartition] = field(default_factory=list)


class KafkaZkClient:
    """Kafka's view of a ZooKeeper session: brokers, controller, topics, configs, producer ids."""

    def __init__(self, zk: ZooKeeperClient, time: Time = SYSTEM_TIME) -> None:
        self.zk = zk
        self.time = time
        # The session that made our last checked-ephemeral registration (Kafka's
        # currentZooKeeperSessionId): a znode it still owns after a session change is ours.
        self._registration_session_id: int | None = None
        # The session in which this client last won the controller election: fenced writes are
        # sent in no other.
        self._controller_session_id: int | None = None

    # -- plumbing -------------------------------------------------------------------------------

    async def _retry(self, operation: Callable[[], Awaitable[T]]) -> T:
        """Run ``operation``, again after each ``ConnectionLoss`` once reconnected (and after a
        ``SessionExpiredError``, in the new session: only controller writes are bound to one)."""
        while True:
            try:
                return await operation()
            except (ConnectionLoss, SessionExpiredError):
                log.debug("ZooKeeper connection lost during a request; resending once reconnected")
                await self.zk.wait_until_connected()

    async def _get_or_none(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, ZnodeStat] | None:
        try:
            return await self._retry(lambda: self.zk.get(path, watch))
        except NoNodeError:
            return None

    async def _children_or_empty(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        try:
            return await self._retry(lambda: self.zk.get_children(path, watch))
        except NoNodeError:
            return []

    async def _exists(self, path: str, watch: WatchCallback | None = None) -> bool:
        return await self._retry(lambda: self.zk.exists(path, watch)) is not None

    async def _multi(self, ops: Sequence[ZkOp]) -> list[Any]:
        return await self._retry(lambda: self.zk.multi(ops))

    async def make_sure_persistent_path_exists(self, path: str) -> None:
        await self._retry(lambda: self.zk.ensure_path(path))

    async def create_top_level_paths(self) -> None:
        """Create Kafka's persistent top-level paths that are missing (at broker start-up)."""
        await asyncio.gather(*(self.make_sure_persistent_path_exists(p) for p in PERSISTENT_ZK_PATHS))

    # -- cluster id -----------------------------------------------------------------------------

    async def get_cluster_id(self) -> str | None:
        found = await self._get_or_none(CLUSTER_ID_PATH)
        return decode_cluster_id(found[0]) if found else None

    async def get_or_create_cluster_id(self, proposed_cluster_id: str) -> str:
        """The cluster id in ``/cluster/id``, written first with ``proposed_cluster_id`` if none."""
        try:
            await self._retry(lambda: self.zk.create(CLUSTER_ID_PATH, encode_cluster_id(proposed_cluster_id), makepath=True))
            return proposed_cluster_id
        except NodeExistsError:
            cluster_id = await self.get_cluster_id()
            if cluster_id is None:
                raise RuntimeError(f"{CLUSTER_ID_PATH} disappeared while being read: cannot learn the cluster id") from None
            return cluster_id

    # -- brokers --------------------------------------------------------------------------------

    async def register_broker(self, info: BrokerInfo) -> int:
        """Create ``/brokers/ids/<id>`` for this session; returns the broker epoch (its czxid)."""
        try:
            stat = await self._checked_ephemeral_create(info.path, encode_broker_info(info))
        except _OwnedByAnotherSession as e:
            raise BrokerIdInUseError(
                f"broker id {info.broker_id} is already registered at {info.path} by another live ZooKeeper "
                f"session (0x{e.owner:x}): is another broker running with this id?"
            ) from None
        endpoints = ",".join(e.connection_string for e in info.endpoints)
        log.info("Registered broker %d at path %s with addresses: %s, czxid (broker epoch): %d",
                 info.broker_id, info.path, endpoints, stat.czxid)
        return stat.czxid

    async def update_broker_info(self, info: BrokerInfo) -> None:
        """Rewrite this broker's registration (Kafka's ``updateBrokerInfo``: a dynamic
        ``advertised.listeners`` change); the controller's data watch on it sends the new
        endpoints to every broker."""
        await self._retry(lambda: self.zk.set(info.path, encode_broker_info(info)))
        endpoints = ",".join(e.connection_string for e in info.endpoints)
        log.info("Updated broker %d at path %s with addresses: %s", info.broker_id, info.path, endpoints)

    async def _checked_ephemeral_create(self, path: str, data: bytes) -> ZnodeStat:
        """Kafka's CheckedEphemeral (KAFKA-7165): create+set in one multi, then sort out who owns
        an existing node."""
        while True:
            try:
                results = await self._multi([CreateOp(path, b"", ephemeral=True), SetDataOp(path, data, 0)])
                stat: ZnodeStat = results[1]
            except MultiOpError as e:
                if not isinstance(e.error, NodeExistsError):
                    raise e.error from e
                found = await self._get_or_none(path)
                if found is None:
                    continue  # it went away meanwhile: create again
                stat = found[1]
                owner, session = stat.ephemeralOwner, self.zk.session_id
                if owner == self._registration_session_id and owner != session:
                    # Left behind by our own previous session, which ZooKeeper has not cleaned
                    # up yet (ZOOKEEPER-2985): delete it and create it for this session.
                    log.info("%s already exists, owned by our previous session 0x%x (now 0x%x): re-creating it",
                             path, owner, session or 0)
                    try:
                        await self._retry(lambda: self.zk.delete(path))
                    except NoNodeError:
                        pass
                    continue
                if owner != session:
                    raise _OwnedByAnotherSession(path, owner) from None
            self._registration_session_id = self.zk.session_id
            return stat

    async def get_broker_ids(self, watch: WatchCallback | None = None) -> list[int]:
        """The registered broker ids, sorted (``watch``: a child watch on ``/brokers/ids``)."""
        return sorted(int(c) for c in await self._children_or_empty(BROKER_IDS_PATH, watch))

    async def get_broker(self, broker_id: int, watch: WatchCallback | None = None) -> tuple[BrokerInfo, int] | None:
        """A broker's registration and its broker epoch, or None if it is not registered."""
        found = await self._get_or_none(broker_id_path(broker_id), watch)
        if found is None:
            return None
        data, stat = found
        return decode_broker_info(broker_id, data), stat.czxid

    async def get_all_brokers(self) -> dict[int, tuple[BrokerInfo, int]]:
        """Every registered broker: ``{id: (registration, broker epoch)}``."""
        ids = await self.get_broker_ids()
        found = await asyncio.gather(*(self.get_broker(i) for i in ids))
        return {i: b for i, b in zip(ids, found, strict=True) if b is not None}

    # -- controller -----------------------------------------------------------------------------

    async def get_controller_id(self, watch: WatchCallback | None = None) -> int | None:
        """The elected controller's broker id, or None (``watch``: a data watch on ``/controller``)."""
        found = await self._get_or_none(CONTROLLER_PATH, watch)
        return decode_controller(found[0]) if found else None

    async def get_controller_epoch(self) -> tuple[int, ZnodeStat] | None:
        """The controller epoch and the stat of ``/controller_epoch`` (version = epoch zkVersion)."""
        found = await self._get_or_none(CONTROLLER_EPOCH_PATH)
        return (decode_controller_epoch(found[0]), found[1]) if found else None

    async def _get_or_create_controller_epoch(self) -> tuple[int, int]:
        current = await self.get_controller_epoch()
        if current is not None:
            return current[0], current[1].version
        try:
            await self._retry(lambda: self.zk.create(CONTROLLER_EPOCH_PATH, encode_controller_epoch(INITIAL_CONTROLLER_EPOCH)))
            log.info("Created %s with the initial epoch %d", CONTROLLER_EPOCH_PATH, INITIAL_CONTROLLER_EPOCH)
            return INITIAL_CONTROLLER_EPOCH, 0
        except NodeExistsError:
            current = await self.get_controller_epoch()
            if current is None:
                raise RuntimeError(f"{CONTROLLER_EPOCH_PATH} disappeared while being read") from None
            return current[0], current[1].version

    async def register_controller_and_increment_epoch(self, controller_id: int) -> tuple[int, int]:
        """Try to become the controller: ``(new controller epoch, its zkVersion)`` on success,
        `ControllerMovedError` when another broker is or has just become the controller."""
        timestamp = self.time.milliseconds()
        current_epoch, current_version = await self._get_or_create_controller_epoch()
        new_epoch = current_epoch + 1
        try:
            results = await self._multi([
                CreateOp(CONTROLLER_PATH, encode_controller(controller_id, timestamp), ephemeral=True),
                SetDataOp(CONTROLLER_EPOCH_PATH, encode_controller_epoch(new_epoch), current_version),
            ])
        except MultiOpError as e:
            if not isinstance(e.error, NodeExistsError | BadVersionError):
                raise e.error from e
            return await self._check_controller_and_epoch(controller_id, new_epoch)
        epoch_zk_version = results[1].version
        self._controller_session_id = self.zk.session_id
        log.info("Broker %d registered as the controller with epoch %d (epoch zkVersion %d)",
                 controller_id, new_epoch, epoch_zk_version)
        return new_epoch, epoch_zk_version

    async def _check_controller_and_epoch(self, controller_id: int, new_epoch: int) -> tuple[int, int]:
        """After a conflict: did our own earlier attempt (resent after a connection loss) win?"""
        current_controller = await self.get_controller_id()
        if current_controller is None:
            raise ControllerMovedError(f"{CONTROLLER_PATH} went away while checking whether the election succeeded")
        if current_controller == controller_id:
            current = await self.get_controller_epoch()
            if current is None:
                raise RuntimeError(f"{CONTROLLER_EPOCH_PATH} disappeared while being read")
            epoch, stat = current
            # Another round of election would have written a larger epoch: this one is ours.
            if epoch == new_epoch:
                self._controller_session_id = self.zk.session_id
                return new_epoch, stat.version
        raise ControllerMovedError(f"the controller moved to broker {current_controller}")

    async def controller_multi(self, ops: Sequence[ZkOp], epoch_zk_version: int) -> list[Any]:
        """Run ``ops`` in one transaction fenced by ``check(/controller_epoch, epoch_zk_version)``.

        Returns the ops' results. `ControllerMovedError` if the epoch's zkVersion moved on (a
        newer controller exists), or if the session that won this client's last election is no
        longer the current one (it expired: the transaction is not sent, or not resent, in
        another); `MultiOpError` (indexed within ``ops``) if one of ``ops`` failed.
        ``epoch_zk_version`` -1 (Kafka's MatchAnyVersion) runs ``ops`` unfenced.
        """
        if epoch_zk_version == MATCH_ANY_VERSION:
            return await self._multi(ops)
        if epoch_zk_version < 0:
            raise ValueError(f"the controller epoch zkVersion {epoch_zk_version} must be >= 0 or -1")
        fenced = [CheckOp(CONTROLLER_EPOCH_PATH, epoch_zk_version), *ops]
        try:
            while True:
                await self.zk.wait_until_connected()
                session = self.zk.session_id
                if session != self._controller_session_id:
                    raise ControllerMovedError(
                        f"the ZooKeeper session that won the controller election "
                        f"(0x{self._controller_session_id or 0:x}) has expired: the controller's writes are "
                        f"not sent in another session (0x{session or 0:x})"
                    )
                try:
                    results = await self.zk.multi(fenced)
                    break
                except (ConnectionLoss, SessionExpiredError):
                    log.debug("ZooKeeper connection lost during a controller write; resent only in the same session")
        except MultiOpError as e:
            if e.index == 0:
                if isinstance(e.error, BadVersionError):
                    raise ControllerMovedError(
                        f"Controller epoch zkVersion check fails. Expected zkVersion = {epoch_zk_version}"
                    ) from None
                raise e.error from e
            raise MultiOpError(ops, e.results[1:], e.index - 1, e.error) from None
        return results[1:]

    async def _controller_op(self, op: ZkOp, epoch_zk_version: int) -> Any:
        """One fenced op: its result, or its own kazoo error (`ControllerMovedError` as above)."""
        try:
            return (await self.controller_multi([op], epoch_zk_version))[0]
        except MultiOpError as e:
            raise e.error from None

    async def delete_controller(self, epoch_zk_version: int) -> None:
        """Resign by deleting ``/controller`` (fenced; gone already is fine)."""
        try:
            await self._controller_op(DeleteOp(CONTROLLER_PATH), epoch_zk_version)
        except NoNodeError:
            pass

    # -- topics ---------------------------------------------------------------------------------

    async def topic_exists(self, topic: str) -> bool:
        return await self._exists(topic_path(topic))

    async def get_all_topics(self, watch: WatchCallback | None = None) -> set[str]:
        """Every topic (``watch``: a child watch on ``/brokers/topics``)."""
        return set(await self._children_or_empty(TOPICS_PATH, watch))

    async def create_topic(
        self,
        topic: str,
        assignment: Mapping[int, Sequence[int]],
        config: Mapping[str, str] | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> uuid.UUID:
        """Create a topic as Kafka's admin path does: the config znode first, then the topic
        znode with its assignment and a new topic id (returned). The controller does the rest.

        `TopicExistsError` if the topic exists or is marked for deletion. As in Kafka, the two
        writes are not one transaction: a racing creator may have rewritten the config.
        """
        if await self.is_topic_marked_for_deletion(topic):
            raise TopicExistsError(f"Topic '{topic}' is marked for deletion.")
        if await self.topic_exists(topic):
            raise TopicExistsError(f"Topic '{topic}' already exists.")
        topic_id = topic_id or uuid.uuid4()
        await self.set_or_create_entity_configs(CONFIG_TYPE_TOPIC, topic, config or {})
        # KIP-253's counts start equal: keys go by Kafka's murmur2 % N until the first expansion.
        data = encode_topic(topic_id, {p: ReplicaAssignment(tuple(r)) for p, r in assignment.items()},
                            len(assignment), len(assignment))
        try:
            await self._retry(lambda: self.zk.create(topic_path(topic), data, makepath=True))
        except NodeExistsError:
            raise TopicExistsError(f"Topic '{topic}' already exists.") from None
        return topic_id

    async def get_topic_assignment(self, topic: str, watch: WatchCallback | None = None) -> TopicIdReplicaAssignment | None:
        """A topic's id and assignment, or None (``watch``: a data watch on the topic znode)."""
        found = await self._get_or_none(topic_path(topic), watch)
        return decode_topic(topic, found[0]) if found else None

    async def get_replica_assignment_and_topic_ids(self, topics: Iterable[str]) -> dict[str, TopicIdReplicaAssignment]:
        """The assignments of the ``topics`` that exist."""
        names = list(topics)
        found = await asyncio.gather(*(self.get_topic_assignment(t) for t in names))
        return {t: a for t, a in zip(names, found, strict=True) if a is not None}

    async def set_topic_assignment(
        self,
        topic: str,
        topic_id: uuid.UUID | None,
        assignment: Mapping[int, ReplicaAssignment],
        epoch_zk_version: int = MATCH_ANY_VERSION,
        initial_partition_count: int | None = None,
        undeleted_partition_count: int | None = None,
    ) -> ZnodeStat:
        """Rewrite a topic znode (new partitions, reassignment, adding a topic id); fenced."""
        data = encode_topic(topic_id, assignment, initial_partition_count, undeleted_partition_count)
        return await self._controller_op(SetDataOp(topic_path(topic), data, MATCH_ANY_VERSION), epoch_zk_version)

    async def get_topic_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """The state znodes that exist; each `LeaderAndIsr` carries its partition epoch."""
        wanted = list(partitions)
        found = await asyncio.gather(*(self._get_or_none(topic_partition_state_path(tp)) for tp in wanted))
        return {
            tp: decode_partition_state(data, stat.version)
            for tp, f in zip(wanted, found, strict=True)
            if f is not None
            for data, stat in (f,)
        }

    async def _fenced_per_op(self, ops: Mapping[K, ZkOp], epoch_zk_version: int) -> dict[K, Any]:
        """One fenced transaction per key (partition, topic...), pipelined: per key its result or
        its kazoo error. `ControllerMovedError` (from any of them) wins over everything else."""
        keys = list(ops)
        outcomes = await asyncio.gather(
            *(self._controller_op(ops[k], epoch_zk_version) for k in keys), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, ControllerMovedError):
                raise outcome
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(outcome, KazooException):
                raise outcome
        return dict(zip(keys, outcomes, strict=True))

    async def create_topic_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch], epoch_zk_version: int
    ) -> dict[TopicPartition, int | KazooException]:
        """Create the state znodes (and their missing parents), fenced: per partition the new
        partition epoch (0), or the error (`NodeExistsError` if it already had a state)."""
        await self._create_partitions_znodes({tp.topic for tp in states}, epoch_zk_version)
        await self._fenced_per_op({tp: CreateOp(topic_partition_path(tp)) for tp in states}, epoch_zk_version)
        created = await self._fenced_per_op(
            {tp: CreateOp(topic_partition_state_path(tp), encode_partition_state(s)) for tp, s in states.items()},
            epoch_zk_version,
        )
        return {tp: r if isinstance(r, KazooException) else 0 for tp, r in created.items()}

    async def _create_partitions_znodes(self, topics: Iterable[str], epoch_zk_version: int) -> None:
        """``/brokers/topics/<t>/partitions`` of these topics, fenced (already there is fine)."""
        await self._fenced_per_op({t: CreateOp(topic_partitions_path(t)) for t in sorted(topics)}, epoch_zk_version)

    async def set_partition_epochs(
        self, epochs: Mapping[TopicPartition, tuple[Mapping[int, int], Mapping[int, int]]], epoch_zk_version: int
    ) -> None:
        """KIP-253: write each partition's ``(leaderEpochAfterCreation, leaderEpochBeforeDeletion)``
        into its partition znode, created (with its parent) when missing; every write fenced."""
        await self._create_partitions_znodes({tp.topic for tp in epochs}, epoch_zk_version)
        data = {tp: encode_partition_epochs(*e) for tp, e in epochs.items()}
        written = await self._fenced_per_op(
            {tp: SetDataOp(topic_partition_path(tp), d, MATCH_ANY_VERSION) for tp, d in data.items()}, epoch_zk_version
        )
        missing = [tp for tp, r in written.items() if isinstance(r, NoNodeError)]
        created = await self._fenced_per_op(
            {tp: CreateOp(topic_partition_path(tp), data[tp]) for tp in missing}, epoch_zk_version
        ) if missing else {}
        for outcome in [*(r for tp, r in written.items() if tp not in missing), *created.values()]:
            if isinstance(outcome, KazooException):
                raise outcome

    async def get_partition_epochs(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, tuple[dict[int, int], dict[int, int]]]:
        """The ``(leaderEpochAfterCreation, leaderEpochBeforeDeletion)`` of these partitions
        (those that have either)."""
        wanted = list(partitions)
        found = await asyncio.gather(*(self._get_or_none(topic_partition_path(tp)) for tp in wanted))
        out = {}
        for tp, f in zip(wanted, found, strict=True):
            epochs = decode_partition_epochs(f[0]) if f is not None else ({}, {})
            if any(epochs):
                out[tp] = epochs
        return out

    async def delete_partitions(self, partitions: Iterable[TopicPartition], epoch_zk_version: int) -> None:
        """Delete these partitions' znodes (their state znodes with them), fenced; KIP-253's
        removal of drained partitions. Already gone is fine."""
        wanted = list(partitions)
        for path in (topic_partition_state_path, topic_partition_path):  # children first
            outcomes = await self._fenced_per_op({tp: DeleteOp(path(tp)) for tp in wanted}, epoch_zk_version)
            for outcome in outcomes.values():
                if isinstance(outcome, KazooException) and not isinstance(outcome, NoNodeError):
                    raise outcome

    async def set_topic_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch], epoch_zk_version: int
    ) -> dict[TopicPartition, int | KazooException]:
        """Write each state znode if its zkVersion is still the state's partition epoch, fenced:
        per partition the new partition epoch, or the error (`BadVersionError`: someone else
        wrote it first; re-read and decide again)."""
        written = await self._fenced_per_op(
            {
                tp: SetDataOp(topic_partition_state_path(tp), encode_partition_state(s), s.leader_and_isr.partition_epoch)
                for tp, s in states.items()
            },
            epoch_zk_version,
        )
        return {tp: r if isinstance(r, KazooException) else r.version for tp, r in written.items()}

    async def update_leader_and_isr(
        self, leader_and_isrs: Mapping[TopicPartition, LeaderAndIsr], controller_epoch: int, epoch_zk_version: int
    ) -> UpdateLeaderAndIsrResult:
        """Kafka's ``updateLeaderAndIsr``: write new leaderships decided by this controller."""
        states = {tp: LeaderIsrAndControllerEpoch(state, controller_epoch) for tp, state in leader_and_isrs.items()}
        result = UpdateLeaderAndIsrResult()
        for tp, outcome in (await self.set_topic_partition_states(states, epoch_zk_version)).items():
            if isinstance(outcome, BadVersionError):
                result.partitions_to_retry.append(tp)
            elif isinstance(outcome, Exception):
                result.finished_partitions[tp] = outcome
            else:
                leader_and_isr = leader_and_isrs[tp]
                result.finished_partitions[tp] = LeaderAndIsr(
                    leader_and_isr.leader, leader_and_isr.leader_epoch, leader_and_isr.isr,
                    leader_and_isr.leader_recovery_state, outcome,
                )
        return result

    async def delete_recursive(self, path: str, epoch_zk_version: int = MATCH_ANY_VERSION) -> bool:
        """Delete ``path`` and everything under it, each delete fenced; False if it was missing."""
        try:
            children = await self._retry(lambda: self.zk.get_children(path))
        except NoNodeError:
            return False
        await asyncio.gather(*(self.delete_recursive(f"{path}/{c}", epoch_zk_version) for c in children))
        try:
            await self._controller_op(DeleteOp(path), epoch_zk_version)
        except NoNodeError:
            pass
        return True

    async def delete_topic_znode(self, topic: str, epoch_zk_version: int) -> None:
        """Remove ``/brokers/topics/<t>`` and its partition states (the end of a deletion)."""
        await self.delete_recursive(topic_path(topic), epoch_zk_version)

    async def delete_topic_configs(self, topics: Iterable[str], epoch_zk_version: int) -> None:
        await asyncio.gather(
            *(self.delete_recursive(config_entity_path(CONFIG_TYPE_TOPIC, t), epoch_zk_version) for t in topics)
        )

    # -- topic deletion marks: /admin/delete_topics/<t> -----------------------------------------

    async def create_delete_topic_path(self, topic: str) -> None:
        """Mark a topic for deletion (the controller does the work); `NodeExistsError` if it
        is marked already."""
        await self._retry(lambda: self.zk.create(delete_topic_path(topic), makepath=True))

    async def is_topic_marked_for_deletion(self, topic: str) -> bool:
        return await self._exists(delete_topic_path(topic))

    async def get_topic_deletions(self, watch: WatchCallback | None = None) -> list[str]:
        """Topics marked for deletion (``watch``: a child watch on ``/admin/delete_topics``)."""
        return await self._children_or_empty(DELETE_TOPICS_PATH, watch)

    async def delete_topic_deletions(self, topics: Iterable[str], epoch_zk_version: int) -> None:
        """Remove deletion marks (fenced); marks already gone are fine."""
        await self._fenced_per_op(
            {t: DeleteOp(delete_topic_path(t)) for t in topics}, epoch_zk_version
        )

    # -- log dir event notifications: /log_dir_event_notification/log_dir_event_<seq> ----------

    async def propagate_log_dir_event(self, broker_id: int) -> str:
        """A log dir of ``broker_id`` failed (Kafka's ``propagateLogDirEvent``): a persistent
        sequential znode the controller reads and deletes; returns its path."""
        created, _ = await self._retry(lambda: self.zk.create(
            f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{LOG_DIR_EVENT_PREFIX}", encode_log_dir_event(broker_id),
            sequence=True, makepath=True,
        ))
        return created

    async def get_all_log_dir_event_notifications(self, watch: WatchCallback | None = None) -> list[str]:
        """The sequence numbers of the waiting notifications (``watch``: a child watch)."""
        children = await self._children_or_empty(LOG_DIR_EVENT_NOTIFICATION_PATH, watch)
        return sorted(c[len(LOG_DIR_EVENT_PREFIX):] for c in children if c.startswith(LOG_DIR_EVENT_PREFIX))

    async def get_broker_ids_from_log_dir_events(self, sequence_numbers: Iterable[str]) -> list[int]:
        found = await asyncio.gather(*(
            self._get_or_none(f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{LOG_DIR_EVENT_PREFIX}{n}") for n in sequence_numbers
        ))
        return [decode_log_dir_event(data) for data, _stat in (f for f in found if f is not None)]

    async def delete_log_dir_event_notifications(self, sequence_numbers: Iterable[str], epoch_zk_version: int) -> None:
        """Remove handled notifications (fenced); those already gone are fine."""
        await self._fenced_per_op(
            {n: DeleteOp(f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{LOG_DIR_EVENT_PREFIX}{n}") for n in sequence_numbers},
            epoch_zk_version,
        )

    # -- configs --------------------------------------------------------------------------------

    async def get_entity_configs(self, entity_type: str, entity_name: str) -> dict[str, str]:
        """``/config/<type>/<name>``'s config map; empty when there is no znode."""
        found = await self._get_or_none(config_entity_path(entity_type, entity_name))
        return decode_entity_config(found[0]) if found else {}

    async def set_or_create_entity_configs(self, entity_type: str, entity_name: str, config: Mapping[str, str]) -> None:
        """Replace the entity's whole config map (creating the znode when missing)."""
        path, data = config_entity_path(entity_type, entity_name), encode_entity_config(config)
        try:
            await self._retry(lambda: self.zk.set(path, data))
        except NoNodeError:
            try:
                await self._retry(lambda: self.zk.create(path, data, makepath=True))
            except NodeExistsError:
                await self._retry(lambda: self.zk.set(path, data))

    async def create_config_change_notification(self, entity_path: str) -> str:
        """Announce that ``<type>/<name>``'s config changed; returns the sequential znode's path."""
        await self.make_sure_persistent_path_exists(CONFIG_CHANGES_PATH)
        created, _ = await self._retry(
            lambda: self.zk.create(f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}", encode_config_change(entity_path), sequence=True)
        )
        return created

    async def get_topic_configs(self, topic: str) -> dict[str, str]:
        return await self.get_entity_configs(CONFIG_TYPE_TOPIC, topic)

    async def change_topic_config(self, topic: str, config: Mapping[str, str]) -> str:
        """Replace a topic's config overrides and notify every broker (Kafka's
        ``AdminZkClient.changeTopicConfig``); returns the notification's path."""
        await self.set_or_create_entity_configs(CONFIG_TYPE_TOPIC, topic, config)
        return await self.create_config_change_notification(f"{CONFIG_TYPE_TOPIC}/{topic}")

    async def get_all_user_configs(self) -> dict[str, dict[str, str]]:
        """Every user with a ``/config/users/<sanitized>`` znode, desanitized, with its config map
        (Kafka's ``fetchAllEntityConfigs(ConfigType.User)``); a znode deleted meanwhile is left
        out."""
        children = await self._children_or_empty(config_entity_type_path(CONFIG_TYPE_USER))
        found = await asyncio.gather(
            *(self._get_or_none(config_entity_path(CONFIG_TYPE_USER, child)) for child in children))
        return {desanitize(child): decode_entity_config(f[0])
                for child, f in zip(children, found, strict=True) if f is not None}

    async def get_user_configs(self, user: str) -> dict[str, str]:
        """``/config/users/<sanitized user>``'s config map; empty when there is no znode."""
        return await self.get_entity_configs(CONFIG_TYPE_USER, sanitize(user))

    async def change_user_config(self, user: str, config: Mapping[str, str]) -> str:
        """Replace a user's whole config map and notify every broker (``users/<sanitized>``)."""
        return await self.change_entity_config(CONFIG_TYPE_USER, sanitize(user), config)

    async def get_all_entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        """Every ``/config/<type>/<name>`` znode with its config map, by sanitized name, and for
        users also every ``/config/users/<user>/clients/<client>`` as ``<user>/clients/<client>``
        (Kafka's ``fetchAllEntityConfigs`` and ``fetchAllChildEntityConfigs``); a znode deleted
        meanwhile is left out."""
        children = await self._children_or_empty(config_entity_type_path(entity_type))
        names = list(children)
        if entity_type == CONFIG_TYPE_USER:
            nested = await asyncio.gather(*(
                self._children_or_empty(f"{config_entity_path(entity_type, child)}/{CONFIG_TYPE_CLIENT}")
                for child in children))
            names += [f"{child}/{CONFIG_TYPE_CLIENT}/{client}"
                      for child, clients in zip(children, nested, strict=True) for client in clients]
        found = await asyncio.gather(*(self._get_or_none(config_entity_path(entity_type, name)) for name in names))
        return {name: decode_entity_config(f[0]) for name, f in zip(names, found, strict=True) if f is not None}

    async def change_entity_config(self, entity_type: str, entity_name: str, config: Mapping[str, str]) -> str:
        """Replace an entity's whole config map and notify every broker (Kafka's
        ``AdminZkClient.changeConfigs``: ``/config/<type>/<name>``, then ``/config/changes`` with
        ``<type>/<name>``); ``entity_name`` is sanitized already. Returns the notification's path."""
        await self.set_or_create_entity_configs(entity_type, entity_name, config)
        return await self.create_config_change_notification(f"{entity_type}/{entity_name}")

    # -- producer ids ---------------------------------------------------------------------------

    async def allocate_producer_id_block(self, broker_id: int) -> tuple[int, int]:
        """Claim the next block of 1000 producer ids: ``(first, last)``, both inclusive.

        Reads ``/latest_producer_id_block`` and writes the following block conditionally on the
        zkVersion read, looping until no other broker wrote in between (ZkProducerIdManager).
        """
        while True:
            found = await self._get_or_none(PRODUCER_ID_BLOCK_PATH)
            if found is None:
                await self.make_sure_persistent_path_exists(PRODUCER_ID_BLOCK_PATH)
                continue
            data, stat = found
            if data:
                current = decode_producer_id_block(data)
                if current.last_producer_id > _MAX_PRODUCER_ID - current.size:
                    raise RuntimeError("Have exhausted all producerIds.")
                block = ProducerIdsBlock(broker_id, current.next_block_first_id)
            else:
                block = ProducerIdsBlock(broker_id, 0)
            try:
                await self._retry(functools.partial(
                    self.zk.set, PRODUCER_ID_BLOCK_PATH, encode_producer_id_block(block), stat.version))
            except BadVersionError:
                continue  # another broker took a block meanwhile
            except NoNodeError:
                continue
            log.info("Acquired new producerId block %d-%d by writing to ZooKeeper with path version %d",
                     block.first_producer_id, block.last_producer_id, stat.version + 1)
            return block.first_producer_id, block.last_producer_id
