"""The cluster-mode `ControllerStore`: Kafka's ZooKeeper tree, through one `KafkaZkClient`.

Owns one ZooKeeper session of a broker and everything the broker and its controller keep in it,
in Kafka's layout and JSON (``pybroker.zookeeper.znodes``), so that Kafka's tools read the tree:
the broker's registration (re-made by the store itself after a session expiry, with a new broker
epoch), the controller election and its fencing (the ``/controller_epoch`` zkVersion won in the
election guards every controller write), topics, partition states, deletion markers, config
overrides with their change notifications, entity configs (``/config/brokers/<id|<default>>``:
dynamic broker configs; ``/config/clients/<id>`` and ``/config/users/<sanitized user>[/clients/<id>]``:
quotas, and a user's SCRAM credentials), and producer-id blocks. It also owns a cache of every
topic's config overrides (`topic_configs` is synchronous) and of every entity's configs
(`entity_configs`, `user_configs`), filled at connect and kept current by following
``/config/changes`` with a sequence-number cursor, as Kafka brokers do (a ``<type>/<name>``
notification re-reads that entity: Kafka's ``ConfigHandler``s); like Kafka's
``ZkNodeChangeNotificationListener``, each pass also deletes the notifications created more than
`CHANGE_EXPIRATION_MS` ago (by the injected clock, against the znodes' ctime), so that they do
not pile up for ever.

Watches become `StoreListener` callbacks:

======================================  =============================================
``/brokers/ids`` (children), and each   ``on_brokers_changed``
``/brokers/ids/<id>`` (data)
``/brokers/topics`` (children), and     ``on_topics_changed`` (a new topic also gets
each ``/brokers/topics/<t>`` (data)     its configs read: ``on_topic_configs_changed``)
``/admin/delete_topics`` (children)     ``on_topic_deletions``
``/controller`` (exists)                ``on_controller_changed``
``/config/changes`` (children)          the named topics' configs are re-read, then
                                        ``on_topic_configs_changed(name)``; the named
                                        entities' likewise, then
                                        ``on_entity_configs_changed(type, name,
                                        config)`` (a plain user's also
                                        ``on_user_configs_changed(user, config)``)
======================================  =============================================

Concurrency rules: everything runs on the event loop that called `ZooKeeperStore.connect`.
ZooKeeper watches are one-shot, so a firing only schedules a *refresh*: a task that reads the
node again with the watch re-armed, and only then calls the listener (a change made between the
notification and the callback is never lost). Refreshes are coalesced per watched node: one runs
at a time, and a firing during it makes it run once more. Callbacks run on the loop and must not
block (the controller's only enqueue events). `close` ends the session: the broker's and the
controller's ephemerals vanish at once.

Session states (kazoo's) become listener calls too. SUSPENDED (the connection is lost, the
session may live on): ``on_connection_suspended``, and the controller stops acting. LOST (the
session expired): the election this store won is void at once and ``on_session_expired`` makes
the controller resign (Kafka's Expire event), before anything is sent in a new session; a
controller write under way is not resent in another session (`KafkaZkClient.controller_multi`).
CONNECTED again: ``on_connection_resumed``; kazoo drops every pending watch when the connection
is lost, so every watch is re-armed and every callback fires once (changes may have been
missed), after re-registering the broker if the session was LOST (Kafka's
RegisterBrokerAndReelect: a new broker epoch, ``on_broker_registered``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Collection, Hashable, Iterable, Mapping
from typing import TypeVar

from pybroker.common.cluster import BrokerEndpoint, LiveBroker
from pybroker.common.topic import (
    FullReplicaAssignment,
    PartitionAssignment,
    TopicMetadata,
    UnknownTopicError,
)
from pybroker.controller.store import (
    DEFAULT_ENTITY,
    ENTITY_CONFIG_TYPES,
    ControllerMovedError,
    PartitionEpochConflictError,
    StoreListener,
)
from pybroker.scheduler import SYSTEM_TIME, Time
from pybroker.types import TopicPartition
from pybroker.zookeeper import kafka_zk_client
from pybroker.zookeeper.client import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    EventType,
    KazooException,
    KazooState,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
    WatchedEvent,
    ZooKeeperClient,
)
from pybroker.zookeeper.kafka_zk_client import BrokerIdInUseError, KafkaZkClient
from pybroker.zookeeper.znodes import (
    CONFIG_CHANGE_PREFIX,
    CONFIG_CHANGES_PATH,
    CONFIG_TYPE_TOPIC,
    CONFIG_TYPE_USER,
    CONTROLLER_PATH,
    BrokerInfo,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    decode_config_change,
    desanitize,
    sanitize,
)

__all__ = ["CHANGE_EXPIRATION_MS", "BrokerIdInUseError", "InconsistentClusterIdError", "ZooKeeperStore"]

log = logging.getLogger(__name__)

#: Kafka's ``changeExpirationMs``: config change notifications older than this are deleted.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000

T = TypeVar("T")


class InconsistentClusterIdError(Exception):
    """``/cluster/id`` names another cluster than the log directories' ``meta.properties``
    (Kafka's InconsistentClusterIdException): the broker must not start."""


def to_broker_info(broker: LiveBroker) -> BrokerInfo:
    return BrokerInfo(
        broker.broker_id,
        tuple(EndPoint(e.host or None, e.port, e.listener, e.security_protocol) for e in broker.endpoints),
        rack=broker.rack,
    )


def to_live_broker(info: BrokerInfo) -> LiveBroker:
    return LiveBroker(
        info.broker_id,
        tuple(BrokerEndpoint(e.listener_name, e.host or "", e.port, e.security_protocol) for e in info.endpoints),
        info.rack,
    )


def _config_sequence(child: str) -> int | None:
    if not child.startswith(CONFIG_CHANGE_PREFIX):
        return None
    try:
        return int(child[len(CONFIG_CHANGE_PREFIX):])
    except ValueError:
        return None


def _zk_state(state: PartitionAssignment, controller_epoch: int) -> LeaderIsrAndControllerEpoch:
    """A partition state as its znode holds it, written by ``controller_epoch``."""
    leader_and_isr = LeaderAndIsr(state.leader, state.leader_epoch, tuple(state.isr),
                                  partition_epoch=state.partition_epoch)
    return LeaderIsrAndControllerEpoch(leader_and_isr, controller_epoch)


class ZooKeeperStore:
    """`ControllerStore` over a ZooKeeper session. Create it with `connect`."""

    def __init__(
        self, zk: ZooKeeperClient, broker_id: int, cluster_id: str, listener: StoreListener,
        time: Time = SYSTEM_TIME,
    ) -> None:
        self.zk = zk
        self.time = time
        self.client = KafkaZkClient(zk)
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.listener = listener
        #: This broker's epoch (the czxid of its registration); None before `register_broker`.
        self.broker_epoch: int | None = None
        self._registration: LiveBroker | None = None
        # The election this store won: its controller epoch and the zkVersion of
        # /controller_epoch that fences every controller write.
        self._controller_epoch: int | None = None
        self._epoch_zk_version: int | None = None
        self._configs: dict[str, dict[str, str]] = {}
        self._entity_configs: dict[str, dict[str, dict[str, str]]] = {t: {} for t in ENTITY_CONFIG_TYPES}
        self._entities_missed = False
        self._config_cursor = -1
        self._watched_topics: set[str] = set()
        self._stateless: set[TopicPartition] = set()  # read_topics found no state znode
        self._refreshes: dict[Hashable, asyncio.Task[None]] = {}
        self._again: set[Hashable] = set()
        self._last_state: str = KazooState.CONNECTED
        self._session_lost = False
        self._closed = False

    @classmethod
    async def connect(
        cls,
        connect_string: str,
        session_timeout_ms: int,
        connection_timeout_ms: int,
        broker_id: int,
        proposed_cluster_id: str,
        listener: StoreListener | None = None,
        time: Time = SYSTEM_TIME,
    ) -> ZooKeeperStore:
        """A connected store: Kafka's top-level paths exist, ``cluster_id`` is ``/cluster/id``
        (written with ``proposed_cluster_id`` by the first broker), the config cache is filled
        and every watch is armed. The caller compares ``cluster_id`` with meta.properties
        (`check_cluster_id`) before registering the broker."""
        zk = await ZooKeeperClient.connect(connect_string, session_timeout_ms, connection_timeout_ms)
        try:
            client = KafkaZkClient(zk)
            await client.create_top_level_paths()
            cluster_id = await client.get_or_create_cluster_id(proposed_cluster_id)
            store = cls(zk, broker_id, cluster_id, listener or StoreListener(), time)
            await store._start()
        except BaseException:
            await zk.close()
            raise
        return store

    def check_cluster_id(self, stored_cluster_id: str | None) -> None:
        """Raise `InconsistentClusterIdError` if meta.properties names another cluster."""
        if stored_cluster_id is not None and stored_cluster_id != self.cluster_id:
            raise InconsistentClusterIdError(
                f"The Cluster ID {self.cluster_id} doesn't match stored clusterId {stored_cluster_id} in "
                "meta.properties. The broker is trying to join the wrong cluster. Configured "
                "zookeeper.connect may be wrong."
            )

    async def _start(self) -> None:
        names = sorted(await self.client.get_all_topics(watch=self._topics_watch))
        await asyncio.gather(*(self._watch_topic(name) for name in names))
        configs = await asyncio.gather(*(self.client.get_topic_configs(name) for name in names))
        self._configs = dict(zip(names, configs, strict=True))
        children = await self._retry(lambda: self.zk.get_children(CONFIG_CHANGES_PATH, self._config_changes_watch))
        self._config_cursor = max((s for c in children if (s := _config_sequence(c)) is not None), default=-1)
        # Read after the cursor: an entity changed since is notified after it, and read again.
        await self._reload_entity_configs()
        await self._purge_obsolete_config_changes(children)
        await self._watch_brokers()
        await self.client.get_topic_deletions(watch=self._deletions_watch)
        await self.client.get_all_log_dir_event_notifications(watch=self._log_dir_events_watch)
        await self._retry(lambda: self.zk.exists(CONTROLLER_PATH, self._controller_watch))
        self.zk.add_state_listener(self._on_session_state)

    async def close(self) -> None:
        self._closed = True
        for task in list(self._refreshes.values()):
            task.cancel()
        await asyncio.gather(*self._refreshes.values(), return_exceptions=True)
        await self.zk.close()

    # --- plumbing ------------------------------------------------------------------------------

    async def _retry(self, operation: Callable[[], Awaitable[T]]) -> T:
        """``operation``, sent again after each ConnectionLoss (or session expiry) once
        connected (as KafkaZkClient)."""
        while True:
            try:
                return await operation()
            except (ConnectionLoss, SessionExpiredError):
                await self.zk.wait_until_connected()

    def _refresh(self, key: Hashable, refresh: Callable[[], Awaitable[None]]) -> None:
        """Run ``refresh`` in a task, once more if it is running already."""
        if self._closed:
            return
        if key in self._refreshes:
            self._again.add(key)
            return
        self._refreshes[key] = asyncio.get_running_loop().create_task(
            self._run_refresh(key, refresh), name=f"zk-refresh-{key}"
        )

    async def _run_refresh(self, key: Hashable, refresh: Callable[[], Awaitable[None]]) -> None:
        try:
            while not self._closed:
                self._again.discard(key)
                try:
                    await refresh()
                except (SessionExpiredError, ConnectionClosedError) as e:
                    # The session is gone: the re-sync on reconnection reads everything again.
                    log.debug("ZooKeeper refresh %s interrupted: %r", key, e)
                except Exception:
                    if self._closed:
                        return
                    log.exception("ZooKeeper refresh %s failed", key)
                if key not in self._again:
                    return
        finally:
            self._refreshes.pop(key, None)

    @staticmethod
    def _fenced_error(e: kafka_zk_client.ControllerMovedError) -> ControllerMovedError:
        return ControllerMovedError(str(e))

    def _check_epoch(self, controller_epoch: int) -> int:
        """The epoch zkVersion fencing writes of ``controller_epoch``."""
        if self._epoch_zk_version is None:
            raise ControllerMovedError(
                f"broker {self.broker_id} is not the controller (its election was lost, or its ZooKeeper "
                "session expired)"
            )
        if controller_epoch != self._controller_epoch:
            raise ControllerMovedError(
                f"controller epoch {controller_epoch} is not the one this broker was elected with "
                f"({self._controller_epoch})"
            )
        return self._epoch_zk_version

    # --- session -------------------------------------------------------------------------------

    def _on_session_state(self, state: str) -> None:
        """SUSPENDED: the controller pauses (it may be deposed meanwhile). LOST: the election
        this store won is void at once, before any request is sent in a new session. CONNECTED
        again: the controller resumes, and `_resync` re-registers and re-reads."""
        previous, self._last_state = self._last_state, state
        if self._closed or state == previous:
            return
        if state == KazooState.SUSPENDED:
            log.warning("Lost the ZooKeeper connection; the session lives on if it is back within "
                        "zookeeper.session.timeout.ms")
            self.listener.on_connection_suspended()
        elif state == KazooState.LOST:
            self._session_lost = True
            self._controller_epoch = self._epoch_zk_version = None
            log.warning("The ZooKeeper session of broker %d expired: its registration (and controllership, "
                        "if it had it) went with it", self.broker_id)
            self.listener.on_session_expired()
        elif state == KazooState.CONNECTED:
            if not self._session_lost:  # `_resync` tells of a new session
                log.info("ZooKeeper connection resumed in the same session (0x%x)", self.zk.session_id or 0)
            self.listener.on_connection_resumed()
            self._refresh("session", self._resync)

    async def _resync(self) -> None:
        """After a reconnection: register again if the session was lost, then re-arm every watch
        and fire every callback."""
        if self._session_lost:
            self._session_lost = False
            log.info("ZooKeeper session expired and was re-created (0x%x)", self.zk.session_id or 0)
            if self._registration is not None:
                try:
                    await self.register_broker(self._registration)
                except BrokerIdInUseError:
                    log.error("Cannot register broker %d again after the ZooKeeper session expired: "
                              "another live broker registered this id", self.broker_id)
                else:
                    self.listener.on_broker_registered(self.broker_epoch or 0)
        self._watched_topics.clear()
        self._refresh("brokers", self._refresh_brokers)
        self._refresh("topics", self._refresh_topics)
        self._refresh("deletions", self._refresh_deletions)
        self._refresh("log_dir_events", self._refresh_log_dir_events)
        self._entities_missed = True  # read every entity again, in the notifications' own task
        self._refresh("config_changes", self._refresh_config_changes)
        self._refresh("controller", self._refresh_controller)

    # --- watches -------------------------------------------------------------------------------

    # A watch event of type NONE is kazoo dropping the watch on a connection loss; `_resync`
    # re-arms it once connected.

    def _brokers_watch(self, event: WatchedEvent) -> None:
        if event.type != EventType.NONE:
            self._refresh("brokers", self._refresh_brokers)

    async def _refresh_brokers(self) -> None:
        await self._watch_brokers()
        self.listener.on_brokers_changed()

    async def _watch_brokers(self) -> None:
        """Arm the child watch on ``/brokers/ids`` and a data watch on each registration (Kafka's
        BrokerChange and BrokerModifications handlers); both fire ``on_brokers_changed``."""
        ids = await self.client.get_broker_ids(watch=self._brokers_watch)
        await asyncio.gather(*(self.client.get_broker(broker_id, watch=self._brokers_watch) for broker_id in ids))

    def _topics_watch(self, event: WatchedEvent) -> None:
        if event.type != EventType.NONE:
            self._refresh("topics", self._refresh_topics)

    def _topic_watch(self, event: WatchedEvent) -> None:
        if event.type == EventType.NONE:
            return
        name = event.path.rsplit("/", 1)[-1]
        if event.type == EventType.DELETED:
            self._watched_topics.discard(name)  # the child watch on /brokers/topics tells
            return
        self._refresh(("topic", name), lambda: self._refresh_topic(name))

    async def _watch_topic(self, name: str) -> bool:
        """Arm the data watch of a topic znode; False if the topic does not exist."""
        if await self.client.get_topic_assignment(name, watch=self._topic_watch) is None:
            return False
        self._watched_topics.add(name)
        return True

    async def _refresh_topic(self, name: str) -> None:
        if not await self._watch_topic(name):
            self._watched_topics.discard(name)
        self.listener.on_topics_changed([name])

    async def _refresh_topics(self) -> None:
        names = await self.client.get_all_topics(watch=self._topics_watch)
        self._watched_topics &= names
        unwatched = sorted(names - self._watched_topics)
        await asyncio.gather(*(self._watch_topic(name) for name in unwatched))
        for gone in set(self._configs) - names:
            del self._configs[gone]
        # New topics (and, after a reconnection, every topic) get their configs read.
        configs = await asyncio.gather(*(self.client.get_topic_configs(name) for name in unwatched))
        changed = []
        for name, config in zip(unwatched, configs, strict=True):
            if self._configs.get(name) != config or name not in self._configs:
                self._configs[name] = config
                changed.append(name)
        for name in changed:
            self.listener.on_topic_configs_changed(name)
        # The topics not watched until now: the new ones (every one after a reconnection).
        self.listener.on_topics_changed(unwatched)

    def _deletions_watch(self, event: WatchedEvent) -> None:
        if event.type != EventType.NONE:
            self._refresh("deletions", self._refresh_deletions)

    async def _refresh_deletions(self) -> None:
        await self.client.get_topic_deletions(watch=self._deletions_watch)
        self.listener.on_topic_deletions()

    def _log_dir_events_watch(self, event: WatchedEvent) -> None:
        if event.type != EventType.NONE:
            self._refresh("log_dir_events", self._refresh_log_dir_events)

    async def _refresh_log_dir_events(self) -> None:
        await self.client.get_all_log_dir_event_notifications(watch=self._log_dir_events_watch)
        self.listener.on_log_dir_event()

    # Log dir event notifications (KIP-112): a broker writes one when a log dir fails; the
    # controller reads the broker ids and deletes the notifications it handled.

    async def propagate_log_dir_event(self, broker_id: int) -> None:
        await self.client.propagate_log_dir_event(broker_id)

    async def take_log_dir_events(self, controller_epoch: int) -> set[int]:
        """The brokers named by the waiting notifications, which are then deleted (fenced)."""
        fence = self._check_epoch(controller_epoch)
        sequence_numbers = await self.client.get_all_log_dir_event_notifications()
        if not sequence_numbers:
            return set()
        brokers = set(await self.client.get_broker_ids_from_log_dir_events(sequence_numbers))
        try:
            await self.client.delete_log_dir_event_notifications(sequence_numbers, fence)
        except kafka_zk_client.ControllerMovedError as e:
            raise self._fenced_error(e) from None
        return brokers

    def _controller_watch(self, event: WatchedEvent) -> None:
        if event.type != EventType.NONE:
            self._refresh("controller", self._refresh_controller)

    async def _refresh_controller(self) -> None:
        await self._retry(lambda: self.zk.exists(CONTROLLER_PATH, self._controller_watch))
        self.listener.on_controller_changed()

    def _config_changes_watch(self, event: WatchedEvent) -> None:
        if event.type != EventType.NONE:
            self._refresh("config_changes", self._refresh_config_changes)

    async def _refresh_config_changes(self) -> None:
        """Process the notifications after the cursor, in sequence order, then purge the old ones."""
        children = await self._retry(lambda: self.zk.get_children(CONFIG_CHANGES_PATH, self._config_changes_watch))
        now = self.time.milliseconds()
        if self._entities_missed:
            # Before the notifications: an entity they name is read again after this.
            self._entities_missed = False
            await self._reload_entity_configs()
        pending = sorted((s, c) for c in children if (s := _config_sequence(c)) is not None and s > self._config_cursor)
        for sequence, child in pending:
            try:
                data, _ = await self._retry(functools.partial(self.zk.get, f"{CONFIG_CHANGES_PATH}/{child}"))
                entity_path = decode_config_change(data)
            except NoNodeError:
                entity_path = None  # purged meanwhile
            except ValueError as e:
                log.warning("Ignoring the config change notification %s: %s", child, e)
                entity_path = None
            self._config_cursor = sequence
            if entity_path is None:
                continue
            entity_type, _, name = entity_path.partition("/")
            if entity_type in ENTITY_CONFIG_TYPES:
                self._set_entity_config(entity_type, name, await self.client.get_entity_configs(entity_type, name))
                continue
            if entity_type != CONFIG_TYPE_TOPIC:
                continue  # ip quotas are not followed
            configs = await self.client.get_topic_configs(name)
            if configs or name in self._configs:  # not for a topic deleted meanwhile
                self._configs[name] = configs
            self.listener.on_topic_configs_changed(name)
        await self._purge_obsolete_config_changes(children, now)

    async def _reload_entity_configs(self) -> None:
        """Read every entity's configs again (at connect, and after a reconnection, when
        notifications may have been missed); entities gone since are told with an empty map."""
        for entity_type in ENTITY_CONFIG_TYPES:
            found = await self.client.get_all_entity_configs(entity_type)
            for gone in set(self._entity_configs[entity_type]) - set(found):
                self._set_entity_config(entity_type, gone, {})
            for name, config in found.items():
                self._set_entity_config(entity_type, name, config, even_unchanged=True)

    def _set_entity_config(
        self, entity_type: str, name: str, config: Mapping[str, str], even_unchanged: bool = False
    ) -> None:
        """Cache an entity's config map and tell the listener (only of a change, unless
        ``even_unchanged``: a full re-read tells every entity that has configs). A plain user's map (not the
        ``<default>`` user, not a user's client) is also its SCRAM credentials (Kafka's
        ``UserConfigHandler``): ``on_user_configs_changed`` first."""
        config = {str(k): str(v) for k, v in config.items()}
        cache = self._entity_configs[entity_type]
        if cache.get(name, {}) == config and not (even_unchanged and config):
            return  # nothing changed (e.g. this broker's own write, notified back)
        if config:
            cache[name] = config
        else:
            cache.pop(name, None)
        if entity_type == CONFIG_TYPE_USER and "/" not in name and name != DEFAULT_ENTITY:
            self.listener.on_user_configs_changed(desanitize(name), dict(config))
        self.listener.on_entity_configs_changed(entity_type, name, dict(config))

    async def _purge_obsolete_config_changes(self, children: Iterable[str], now: int | None = None) -> None:
        """Kafka's purgeObsoleteNotifications: delete every notification whose znode was created
        more than `CHANGE_EXPIRATION_MS` before ``now`` (every broker does it; one deleted by
        another meanwhile is fine). Notifications are created in sequence order, so the scan
        stops at the first one young enough to stay."""
        now = self.time.milliseconds() if now is None else now
        for sequence, child in sorted((s, c) for c in children if (s := _config_sequence(c)) is not None):
            path = f"{CONFIG_CHANGES_PATH}/{child}"
            stat = await self._retry(functools.partial(self.zk.exists, path))
            if stat is None:
                continue
            if now - stat.ctime <= CHANGE_EXPIRATION_MS:
                return
            log.debug("Purging the config change notification %s (sequence %d)", path, sequence)
            try:
                await self._retry(functools.partial(self.zk.delete, path))
            except NoNodeError:
                pass

    # --- brokers and the controller ------------------------------------------------------------

    async def register_broker(self, broker: LiveBroker) -> int:
        """Create ``/brokers/ids/<id>`` (checked ephemeral); the broker epoch. Raises
        `BrokerIdInUseError` when another live broker has this id. Remembered: after a session
        expiry the store registers again by itself (``on_broker_registered``)."""
        epoch = await self.client.register_broker(to_broker_info(broker))
        self._registration = broker
        self.broker_epoch = epoch
        return epoch

    async def update_broker_info(self, broker: LiveBroker) -> None:
        """Rewrite ``/brokers/ids/<id>`` with ``broker``'s endpoints (remembered for a
        re-registration after a session expiry)."""
        await self.client.update_broker_info(to_broker_info(broker))
        self._registration = broker

    async def live_brokers(self) -> dict[int, tuple[LiveBroker, int]]:
        return {
            broker_id: (to_live_broker(info), epoch)
            for broker_id, (info, epoch) in (await self.client.get_all_brokers()).items()
        }

    async def try_become_controller(self, broker_id: int) -> int | None:
        current = await self.client.get_controller_id()
        if current is not None:
            if current == broker_id and self._controller_epoch is not None:
                return self._controller_epoch  # elected already (an election event repeated)
            return None
        try:
            epoch, zk_version = await self.client.register_controller_and_increment_epoch(broker_id)
        except kafka_zk_client.ControllerMovedError as e:
            log.info("Broker %d lost the controller election: %s", broker_id, e)
            return None
        self._controller_epoch, self._epoch_zk_version = epoch, zk_version
        return epoch

    async def controller_id(self) -> int | None:
        return await self.client.get_controller_id()

    # --- the admin path ------------------------------------------------------------------------

    async def create_topic(
        self, name: str, topic_id: uuid.UUID, assignment: list[list[int]], configs: dict[str, str]
    ) -> None:
        await self.client.create_topic(name, dict(enumerate(assignment)), configs, topic_id)
        self._configs[name] = dict(configs)

    async def add_partitions(self, name: str, assignment: list[list[int]]) -> None:
        current = await self.client.get_topic_assignment(name)
        if current is None:
            raise UnknownTopicError(f"Topic {name} does not exist.")
        new = dict(current.assignment)
        for index in range(len(current.assignment), len(assignment)):
            new[index] = ReplicaAssignment(tuple(assignment[index]))
        initial = current.initial_partition_count or len(current.assignment)
        try:
            await self.client.set_topic_assignment(name, current.topic_id, new, initial_partition_count=initial,
                                                   undeleted_partition_count=len(new))
        except NoNodeError:
            raise UnknownTopicError(f"Topic {name} does not exist.") from None

    async def shrink_partitions(self, name: str, undeleted_partition_count: int) -> None:
        current = await self.client.get_topic_assignment(name)
        if current is None:
            raise UnknownTopicError(f"Topic {name} does not exist.")
        try:
            await self.client.set_topic_assignment(
                name, current.topic_id, current.assignment,
                initial_partition_count=current.initial_partition_count or len(current.assignment),
                undeleted_partition_count=undeleted_partition_count,
            )
        except NoNodeError:
            raise UnknownTopicError(f"Topic {name} does not exist.") from None

    async def mark_topic_for_deletion(self, name: str) -> None:
        if not await self.client.topic_exists(name):
            raise UnknownTopicError(f"Topic {name} does not exist.")
        try:
            await self.client.create_delete_topic_path(name)
        except NodeExistsError:
            pass  # marked already

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        if not await self.client.topic_exists(name):
            raise UnknownTopicError(f"Topic {name} does not exist.")
        await self.client.change_topic_config(name, configs)
        # Read-your-writes here; the notification brings the same configs to every broker.
        self._configs[name] = dict(configs)
        self.listener.on_topic_configs_changed(name)

    def topic_configs(self, name: str) -> dict[str, str]:
        return dict(self._configs.get(name, {}))

    async def read_topic_configs(self, name: str) -> dict[str, str]:
        return await self.client.get_topic_configs(name)

    async def allocate_producer_id_block(self, broker_id: int) -> tuple[int, int]:
        return await self.client.allocate_producer_id_block(broker_id)

    # --- user configs --------------------------------------------------------------------------

    def user_configs(self) -> dict[str, dict[str, str]]:
        return {desanitize(name): dict(config) for name, config in self._entity_configs[CONFIG_TYPE_USER].items()
                if "/" not in name and name != DEFAULT_ENTITY}

    async def read_user_configs(self, users: Collection[str] | None = None) -> dict[str, dict[str, str]]:
        if users is None:
            return await self.client.get_all_user_configs()
        names = list(dict.fromkeys(users))
        configs = await asyncio.gather(*(self.client.get_user_configs(user) for user in names))
        return dict(zip(names, configs, strict=True))

    async def set_user_configs(self, user: str, config: Mapping[str, str]) -> None:
        """``/config/users/<sanitized>`` and its notification; this broker applies the change at
        once (read-your-writes), the others when the notification reaches them."""
        await self.set_entity_configs(CONFIG_TYPE_USER, sanitize(user), config)

    # --- entity configs ------------------------------------------------------------------------

    def entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        return {name: dict(config) for name, config in self._entity_configs[entity_type].items()}

    async def read_entity_configs(
        self, entity_type: str, names: Collection[str] | None = None
    ) -> dict[str, dict[str, str]]:
        if names is None:
            return await self.client.get_all_entity_configs(entity_type)
        wanted = list(dict.fromkeys(names))
        configs = await asyncio.gather(*(self.client.get_entity_configs(entity_type, name) for name in wanted))
        return dict(zip(wanted, configs, strict=True))

    async def set_entity_configs(self, entity_type: str, entity_name: str, config: Mapping[str, str]) -> None:
        """``/config/<type>/<name>`` and its notification; this broker applies the change at
        once (read-your-writes), the others when the notification reaches them."""
        await self.client.change_entity_config(entity_type, entity_name, config)
        self._set_entity_config(entity_type, entity_name, config)

    # --- the controller ------------------------------------------------------------------------

    async def topic_names(self) -> set[str]:
        return await self.client.get_all_topics()

    async def read_topics(self, names: Iterable[str]) -> dict[str, TopicMetadata]:
        assignments = await self.client.get_replica_assignment_and_topic_ids(names)
        wanted = [TopicPartition(name, p) for name, a in assignments.items() for p in a.assignment]
        # Only partitions added since the topic's creation can have KIP-253 epochs to read (a
        # partition marked for deletion is at or above the undeleted count, itself at least the
        # initial count).
        added = [tp for tp in wanted if tp.partition >= (assignments[tp.topic].initial_partition_count or 1 << 31)]
        states, configs, partition_epochs = await asyncio.gather(
            self.client.get_topic_partition_states(wanted),
            asyncio.gather(*(self.client.get_topic_configs(name) for name in assignments)),
            self.client.get_partition_epochs(added),
        )
        topics: dict[str, TopicMetadata] = {}
        for (name, found), config in zip(assignments.items(), configs, strict=True):
            topic_id = found.topic_id
            if topic_id is None:  # written by a Kafka older than 2.8: give it an id, as Kafka does
                topic_id = await self._assign_topic_id(name, found.assignment)
            partitions = []
            for index in sorted(found.assignment):
                replicas = list(found.assignment[index].replicas)
                tp = TopicPartition(name, index)
                state = states.get(tp)
                if state is None:
                    self._stateless.add(tp)
                    partitions.append(PartitionAssignment(replicas, leader=-1, leader_epoch=-1))
                    continue
                self._stateless.discard(tp)
                leader_and_isr = state.leader_and_isr
                partitions.append(PartitionAssignment(
                    replicas, leader_and_isr.leader, leader_and_isr.leader_epoch, list(leader_and_isr.isr),
                    leader_and_isr.partition_epoch, state.controller_epoch,
                ))
            topics[name] = TopicMetadata(
                name, topic_id, partitions, config, found.initial_partition_count or 0,
                found.undeleted_partition_count or 0,
                {tp.partition: e[0] for tp, e in partition_epochs.items() if tp.topic == name and e[0]},
                {tp.partition: e[1] for tp, e in partition_epochs.items() if tp.topic == name and e[1]},
                {p: list(a.adding_replicas) for p, a in found.assignment.items() if a.adding_replicas},
                {p: list(a.removing_replicas) for p, a in found.assignment.items() if a.removing_replicas},
            )
        return topics

    async def _assign_topic_id(self, name: str, assignment: Mapping[int, ReplicaAssignment]) -> uuid.UUID:
        topic_id = uuid.uuid4()
        fence = self._epoch_zk_version if self._epoch_zk_version is not None else -1
        try:
            await self.client.set_topic_assignment(name, topic_id, assignment, fence)
        except kafka_zk_client.ControllerMovedError as e:
            raise self._fenced_error(e) from None
        log.info("Assigned topic id %s to topic %s", topic_id, name)
        return topic_id

    async def topics_marked_for_deletion(self) -> set[str]:
        return set(await self.client.get_topic_deletions())

    async def write_partition_states(
        self, controller_epoch: int, states: dict[str, dict[int, PartitionAssignment]]
    ) -> None:
        """See `ControllerStore.write_partition_states` for the partition-epoch convention.
        A partition ``read_topics`` found without state is created (its ``partitions/<p>``
        parents too); any other is set conditionally on its partition epoch, and created if
        it turns out to have no state. Each write is its own transaction fenced by the
        controller epoch, all of them pipelined."""
        fence = self._check_epoch(controller_epoch)
        by_tp = self._by_partition(states)
        to_create = {tp: _zk_state(s, controller_epoch) for tp, s in by_tp.items() if tp in self._stateless}
        to_set = {tp: _zk_state(s, controller_epoch) for tp, s in by_tp.items() if tp not in self._stateless}
        try:
            outcomes = await self.client.set_topic_partition_states(to_set, fence) if to_set else {}
            to_create.update({tp: to_set[tp] for tp, r in outcomes.items() if isinstance(r, NoNodeError)})
            if to_create:
                outcomes.update(await self.client.create_topic_partition_states(to_create, fence))
        except kafka_zk_client.ControllerMovedError as e:
            raise self._fenced_error(e) from None
        self._written(controller_epoch, by_tp, outcomes)

    async def create_partition_states(
        self, controller_epoch: int, states: dict[str, dict[int, PartitionAssignment]]
    ) -> None:
        """Kafka's ``createTopicPartitionStatesRaw``: every state znode is created (with its
        ``partitions/<p>`` parents), whatever ``read_topics`` found, each in its own transaction
        fenced by the controller epoch (the parents' creation is fenced too, so a deposed
        controller learns it even when every state exists); NODEEXISTS leaves the stored state
        as it is and is reported by PartitionEpochConflictError."""
        fence = self._check_epoch(controller_epoch)
        by_tp = self._by_partition(states)
        if not by_tp:
            return
        try:
            outcomes = await self.client.create_topic_partition_states(
                {tp: _zk_state(s, controller_epoch) for tp, s in by_tp.items()}, fence)
        except kafka_zk_client.ControllerMovedError as e:
            raise self._fenced_error(e) from None
        self._written(controller_epoch, by_tp, outcomes)

    @staticmethod
    def _by_partition(states: dict[str, dict[int, PartitionAssignment]]) -> dict[TopicPartition, PartitionAssignment]:
        return {TopicPartition(name, index): state for name, parts in states.items() for index, state in parts.items()}

    def _written(
        self, controller_epoch: int, by_tp: dict[TopicPartition, PartitionAssignment],
        outcomes: dict[TopicPartition, int | KazooException],
    ) -> None:
        """Record the outcomes of state writes: each written state gets its new partition epoch
        and ``controller_epoch``; BADVERSION and NODEEXISTS are reported together
        (PartitionEpochConflictError), any other error is raised."""
        conflicts: list[tuple[str, int]] = []
        for tp, outcome in sorted(outcomes.items()):
            if isinstance(outcome, BadVersionError | NodeExistsError):
                conflicts.append((tp.topic, tp.partition))
                if isinstance(outcome, NodeExistsError):
                    self._stateless.discard(tp)  # it has a state: later writes set it conditionally
            elif isinstance(outcome, KazooException):
                raise outcome
            else:
                self._stateless.discard(tp)
                by_tp[tp].partition_epoch = outcome
                by_tp[tp].controller_epoch = controller_epoch
        if conflicts:
            raise PartitionEpochConflictError(conflicts)

    async def record_leader_epochs(self, controller_epoch: int, topic: TopicMetadata, indexes: Iterable[int]) -> None:
        """Into each partition's znode ``/brokers/topics/<t>/partitions/<p>``."""
        fence = self._check_epoch(controller_epoch)
        epochs = {
            TopicPartition(topic.name, index): (topic.leader_epochs_after_creation.get(index, {}),
                                                topic.leader_epochs_before_deletion.get(index, {}))
            for index in indexes
        }
        try:
            await self.client.set_partition_epochs(epochs, fence)
        except kafka_zk_client.ControllerMovedError as e:
            raise self._fenced_error(e) from None

    async def remove_partitions(self, controller_epoch: int, name: str, count: int) -> None:
        """The topic znode loses the partitions first (brokers and a next controller then no
        longer see them), then their znodes go; all fenced."""
        fence = self._check_epoch(controller_epoch)
        current = await self.client.get_topic_assignment(name)
        if current is None:
            return
        kept = {index: a for index, a in current.assignment.items() if index < count}
        removed = [TopicPartition(name, index) for index in current.assignment if index >= count]
        try:
            await self.client.set_topic_assignment(
                name, current.topic_id, kept, fence,
                initial_partition_count=current.initial_partition_count or len(current.assignment),
                undeleted_partition_count=min(count, current.undeleted_partition_count or count),
            )
            await self.client.delete_partitions(removed, fence)
        except kafka_zk_client.ControllerMovedError as e:
            raise self._fenced_error(e) from None
        self._stateless -= set(removed)

    async def remove_topic(self, controller_epoch: int, name: str) -> None:
        """Delete the topic znode with its partition states, then its configs, then its
        deletion marker (Kafka's order), each delete fenced."""
        fence = self._check_epoch(controller_epoch)
        try:
            await self.client.delete_topic_znode(name, fence)
            await self.client.delete_topic_configs([name], fence)
            await self.client.delete_topic_deletions([name], fence)
        except kafka_zk_client.ControllerMovedError as e:
            raise self._fenced_error(e) from None
        self._configs.pop(name, None)
        self._stateless = {tp for tp in self._stateless if tp.topic != name}

    # --- partition reassignment (KIP-455) -------------------------------------------------------

    async def set_replica_assignments(
        self, controller_epoch: int, name: str, assignments: Mapping[int, FullReplicaAssignment]
    ) -> None:
        """``/brokers/topics/<t>`` rewritten with these partitions' replicas and their
        ``adding_replicas`` / ``removing_replicas`` (the rest of the znode as read), fenced."""
        fence = self._check_epoch(controller_epoch)
        current = await self.client.get_topic_assignment(name)
        if current is None:
            raise UnknownTopicError(f"Topic {name} does not exist.")
        new = dict(current.assignment)
        for index, a in assignments.items():
            if index in new:
                new[index] = ReplicaAssignment(tuple(a.replicas), tuple(a.adding_replicas), tuple(a.removing_replicas))
        try:
            await self.client.set_topic_assignment(
                name, current.topic_id, new, fence,
                initial_partition_count=current.initial_partition_count,
                undeleted_partition_count=current.undeleted_partition_count,
            )
        except kafka_zk_client.ControllerMovedError as e:
            raise self._fenced_error(e) from None
        except NoNodeError:
            raise UnknownTopicError(f"Topic {name} does not exist.") from None
