"""The broker process: builds every component from the configuration, runs, and shuts down.

Owns the wiring and the start-up order: cluster id → the metadata store → the authorizer
(``authorizer.class.name``: none allows everything; Kafka's AclAuthorizer or StandardAuthorizer
loads every ACL from its store, its own ZooKeeper session in cluster mode or ``acls.json``
otherwise, before any request is served) → log manager
load/recovery → group and transaction coordinators → registration of this broker → the controller (which, once
elected, sends this broker its LeaderAndIsr and UpdateMetadata: partitions are hosted then, and
the groups of the ``__consumer_offsets`` partitions it leads are loaded, and the transactions
of the ``__transaction_state`` partitions) → listeners →
background tasks; and the clean shutdown sequence (stop accepting, stop the controller, answer
what is waiting, flush and checkpoint every log, mark the shutdown clean).

Without ``zookeeper.connect`` the store is the local metadata file: this broker is the only one
of its cluster and its own controller, and the controller's requests reach it in-process.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
from collections.abc import Callable, Mapping, Sequence

from pybroker.client.connection import KafkaClientError
from pybroker.common.cluster import BrokerEndpoint, LiveBroker
from pybroker.common.config import LONG_MAX
from pybroker.common.errors import ErrorCode
from pybroker.common.topic import TopicExistsError
from pybroker.controller.channel import BrokerChannel, ControllerChannelManager
from pybroker.controller.controller import AutoLeaderRebalance, Controller
from pybroker.controller.local_store import LocalStore
from pybroker.controller.log_offsets import LogOffsets, NetworkLogOffsets
from pybroker.controller.network_channel import NetworkBrokerChannel
from pybroker.controller.store import ENTITY_CONFIG_TYPES, ControllerStore, StoreListener
from pybroker.log.cleaner import CleanerConfig
from pybroker.log.config import LogConfig, ignored_config_warnings
from pybroker.log.file_descriptors import configure_open_files
from pybroker.log.log_manager import LogManager, read_meta_properties
from pybroker.network.listener import SocketServer
from pybroker.network.sasl_authenticator import (
    SASL_PROTOCOLS,
    SaslListenerConfig,
    authenticator_factory,
)
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import ControlledShutdownRequest
from pybroker.replication.fetcher import FetcherConfig
from pybroker.replication.remote_endpoint import RemoteLeaderEndPoint
from pybroker.scheduler import SYSTEM_TIME, AsyncioScheduler, Scheduler, Time
from pybroker.security.acl_authorizer import (
    ACL_AUTHORIZER_CLASS_NAMES,
    AclAuthorizer,
    parse_super_users,
)
from pybroker.security.acl_store import ClosedAclStore, LocalAclStore, ZooKeeperAclStore
from pybroker.security.authorizer import AllowAllAuthorizer, Authorizer
from pybroker.security.credential_cache import CredentialCache
from pybroker.security.principal import PrincipalFormatError
from pybroker.security.scram import ScramMechanism
from pybroker.security.ssl_principal import SslPrincipalBuilder
from pybroker.security.tls import server_context
from pybroker.server.admin_manager import AdminManager
from pybroker.server.alter_partition_manager import AlterPartitionManager, ControllerTransport
from pybroker.server.broker_control import BrokerControl, InProcessBrokerChannel
from pybroker.server.config import BrokerConfig
from pybroker.server.dispatcher import (
    RequestDispatcher,
    handler_error_response,
    supported_api_versions,
)
from pybroker.server.dynamic_broker_config import DynamicBrokerConfig
from pybroker.server.fetch_session import FetchManager, FetchSessionCache
from pybroker.server.group.coordinator import GroupConfig, GroupCoordinator
from pybroker.server.group.metadata_manager import GroupMetadataManager
from pybroker.server.inter_broker_security import inter_broker_client
from pybroker.server.metadata_cache import MetadataCache
from pybroker.server.metrics import metrics_server
from pybroker.server.quota.quota_managers import QuotaManagers
from pybroker.server.replica_manager import ReplicaManager
from pybroker.server.replica_selector import ReplicaSelector, replica_selector
from pybroker.server.transaction.coordinator import TransactionCoordinator
from pybroker.server.transaction.marker_channel import TransactionMarkerChannelManager
from pybroker.server.transaction.marker_sender import NetworkMarkerSender
from pybroker.server.transaction.state_manager import TransactionConfig, TransactionStateManager
from pybroker.server.transaction.verification import TransactionVerifier
from pybroker.server.unapplied_configs import unapplied_reason
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

INTERNAL_TOPIC_WAIT_MS = 30_000


def _rate(bytes_per_second: int) -> float:
    """A byte rate setting, Long.MAX_VALUE (Kafka's "no limit") as infinity."""
    return math.inf if bytes_per_second >= LONG_MAX else float(bytes_per_second)


class Broker:
    """One pybroker node."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        # Listeners and TLS first: a bad security configuration stops the start here, in one line.
        self.ssl_contexts = {e.listener_name: server_context(config, e) for e in config.listeners if e.uses_tls}
        self.inter_broker = inter_broker_client(config)
        log_dirs = config.log_dirs
        os.makedirs(log_dirs[0], exist_ok=True)
        self.cluster_id = read_meta_properties(log_dirs[0]).get("cluster.id") or config.new_cluster_id()
        self._registration_updates: set[asyncio.Task[None]] = set()  # see update_registration
        self.store_listener = StoreListener(
            on_topic_configs_changed=self._on_topic_configs_changed, on_broker_registered=self._on_broker_registered,
            on_user_configs_changed=self._on_user_configs_changed,
            on_entity_configs_changed=self._on_entity_configs_changed,
        )
        #: Kafka's ConfigHandlers, by entity type (`ENTITY_CONFIG_TYPES`: "brokers" for dynamic
        #: broker configs, "clients" and "users" for quotas): each is called on the event loop with
        #: the sanitized entity name and its whole config map, for every entity that has configs
        #: before the logs load, and for every change after that.
        self.entity_config_handlers: dict[str, list[Callable[[str, Mapping[str, str]], None]]] = {
            entity_type: [] for entity_type in ENTITY_CONFIG_TYPES}
        # The store is opened in start() in cluster mode (a ZooKeeper session is needed).
        self.zookeeper_connect: str | None = config.get("zookeeper.connect")
        self.store: ControllerStore = (
            _NotConnected() if self.zookeeper_connect  # type: ignore[assignment]  # a placeholder until start()
            else LocalStore(log_dirs[0], self.cluster_id, self.store_listener)
        )
        self.metadata_cache = MetadataCache(self.node_id)
        self.broker_epoch = -1
        self.time: Time = SYSTEM_TIME
        self.scheduler: Scheduler = AsyncioScheduler()
        self.log_manager = LogManager(
            log_dirs,
            self.log_config,
            node_id=self.node_id,
            cluster_id=self.cluster_id,
            recovery_point_interval_ms=config.get("log.flush.offset.checkpoint.interval.ms"),
            log_start_offset_interval_ms=config.get("log.flush.start.offset.checkpoint.interval.ms"),
            high_watermark_interval_ms=config.get("replica.high.watermark.checkpoint.interval.ms"),
            flush_check_interval_ms=config.get("log.flush.scheduler.interval.ms"),
            retention_check_interval_ms=config.get("log.retention.check.interval.ms"),
            initial_task_delay_ms=config.get("log.initial.task.delay.ms"),
            producer_id_expiration_ms=config.get("producer.id.expiration.ms"),
            producer_id_expiration_check_interval_ms=config.get("producer.id.expiration.check.interval.ms"),
            transaction_verification_enabled=config.get("transaction.partition.verification.enable"),
            recovery_threads=config.get("num.recovery.threads.per.data.dir"),
            cleaner_config=CleanerConfig.from_broker_config(config.get),
            time=self.time,
            scheduler=self.scheduler,
        )
        # Cluster mode: leaders' ISR changes go to the controller (AlterPartition); a single
        # broker (no submitter) commits them itself.
        self.alter_partition_manager = AlterPartitionManager(
            self.node_id, lambda: self.broker_epoch,
            ControllerTransport(self.node_id, self.metadata_cache, lambda: self.controller,
                                config.get("controller.socket.timeout.ms") / 1000, self.inter_broker),
            self.scheduler,
        ) if self.zookeeper_connect else None
        self.replica_manager = ReplicaManager(
            self.node_id, self.log_manager, self.metadata_cache, self.time, self.scheduler,
            isr_submitter=self.alter_partition_manager,
            leader_endpoint=self._leader_endpoint if self.zookeeper_connect else None,
            fetcher_config=FetcherConfig(
                self.node_id,
                fetch_backoff_ms=config.get("replica.fetch.backoff.ms"),
                max_wait_ms=config.get("replica.fetch.wait.max.ms"),
                min_bytes=config.get("replica.fetch.min.bytes"),
                max_bytes=config.get("replica.fetch.response.max.bytes"),
                partition_max_bytes=config.get("replica.fetch.max.bytes"),
                num_fetchers=config.get("num.replica.fetchers"),
            ),
            replica_lag_time_max_ms=config.get("replica.lag.time.max.ms"),
            alter_log_dirs_max_bytes_per_second=_rate(config.get("replica.alter.log.dirs.io.max.bytes.per.second")),
            replica_selector=_configured_replica_selector(config),
        )
        # Fetch sessions (KIP-227): Kafka's FetchManager over its sharded session cache.
        self.fetch_manager = FetchManager(self.time, FetchSessionCache.create(
            config.get("max.incremental.fetch.session.cache.slots")))
        # A failed log dir is reported to the controller (cluster mode, Kafka's log dir event).
        if self.zookeeper_connect:
            self.replica_manager.on_log_dir_failure_notify = self._propagate_log_dir_event
        self.log_manager.on_log_start_offset_changed = self.replica_manager.on_log_start_offset_changed
        self.authorizer: Authorizer = _configured_authorizer(config)  # ACLs loaded in start()
        # Every SCRAM mechanism, whatever sasl.enabled.mechanisms says (Kafka 3.6's KafkaServer:
        # "Enable ... cache for all SCRAM mechanisms to simplify dynamic update"); a listener
        # refuses a mechanism it does not enable at the handshake.
        self.credential_cache = CredentialCache(m.mechanism_name for m in ScramMechanism)
        if not self.zookeeper_connect:  # the ZooKeeper store tells every user when it connects
            for user, user_config in self.store.user_configs().items():
                self.credential_cache.update_user(user, user_config)
        self.group_coordinator = GroupCoordinator(
            GroupMetadataManager(
                self.replica_manager,
                self._create_internal_topic,
                num_partitions=config.get("offsets.topic.num.partitions"),
                replication_factor=config.get("offsets.topic.replication.factor"),
                segment_bytes=config.get("offsets.topic.segment.bytes"),
                commit_timeout_ms=config.get("offsets.commit.timeout.ms"),
                retention_ms=config.get("offsets.retention.minutes") * 60 * 1000,
            ),
            GroupConfig(
                min_session_timeout_ms=config.get("group.min.session.timeout.ms"),
                max_session_timeout_ms=config.get("group.max.session.timeout.ms"),
                initial_rebalance_delay_ms=config.get("group.initial.rebalance.delay.ms"),
                max_size=config.get("group.max.size"),
                offset_metadata_max_bytes=config.get("offset.metadata.max.bytes"),
            ),
            retention_check_interval_ms=config.get("offsets.retention.check.interval.ms"),
            scheduler=self.scheduler,
            time=self.time,
        )
        self.transaction_coordinator = self._transaction_coordinator(config)
        self.transaction_verifier = (
            TransactionVerifier(self.node_id, self.metadata_cache, self.transaction_coordinator,
                                config.get("request.timeout.ms"), self.inter_broker)
            if config.get("transaction.partition.verification.enable") else None
        )
        self.broker_control = BrokerControl(
            self.replica_manager, self.metadata_cache, self.group_coordinator, lambda: self.broker_epoch,
            transaction_coordinator=self.transaction_coordinator,
        )
        self.admin_manager = AdminManager(self.node_id, config, self.store, self.metadata_cache)
        self.quotas = QuotaManagers.install(self)  # client quotas and replication throttles
        self.controller = Controller(
            self.node_id, self.store, ControllerChannelManager(self._channel_to),
            unclean_leader_election_default=config.get("unclean.leader.election.enable"),
            auto_leader_rebalance=AutoLeaderRebalance(
                config.get("leader.imbalance.check.interval.seconds") * 1000,
                config.get("leader.imbalance.per.broker.percentage"),
            ) if config.get("auto.leader.rebalance.enable") else None,
            scheduler=self.scheduler,
            log_offsets=self._log_offsets,
            partition_deletion_check_interval_ms=config.get("partition.deletion.check.interval.ms"),
        )
        self._network_log_offsets = NetworkLogOffsets(
            self.node_id, config.get("controller.socket.timeout.ms") / 1000, self.inter_broker)
        self.controller.listener(self.store_listener)
        self.api_versions: Sequence[tuple[int, int, int]] = supported_api_versions()
        self.dispatcher = dispatcher = RequestDispatcher(self)
        self.metrics_server = metrics_server(self)  # metrics.prometheus.port: GET /metrics (pybroker.metrics)
        self.socket_server = SocketServer(
            config.listeners, dispatcher, config.get("socket.request.max.bytes"),
            self.ssl_contexts, SslPrincipalBuilder(config.get("ssl.principal.mapping.rules")),
            {e.listener_name: authenticator_factory(SaslListenerConfig.from_config(config, e.listener_name), dispatcher,
                                                    self.credential_cache, self.time, self.scheduler,
                                                    handler_error_response)
             for e in config.listeners if e.security_protocol in SASL_PROTOCOLS},
        )
        # Dynamic broker configs (/config/brokers/<id> and <default>): applied as they are told.
        self.dynamic_config = DynamicBrokerConfig(self.node_id, config)
        self.dynamic_config.add_reconfigurables(self)
        self.entity_config_handlers["brokers"].append(self.dynamic_config.on_broker_configs)
        self._stopped = asyncio.Event()
        # Per topic, the ignored-config warnings last logged (a change notification can repeat).
        self._config_warnings: dict[str, list[str]] = {}

    # --- configuration views -------------------------------------------------------------------

    def log_config(self, topic: str) -> LogConfig:
        return self.config.log_config(self.store.topic_configs(topic))

    def _transaction_coordinator(self, config: BrokerConfig) -> TransactionCoordinator:
        """The transaction coordinator, its state manager and its marker channel."""
        txn_config = TransactionConfig(
            transactional_id_expiration_ms=config.get("transactional.id.expiration.ms"),
            transaction_max_timeout_ms=config.get("transaction.max.timeout.ms"),
            transaction_log_num_partitions=config.get("transaction.state.log.num.partitions"),
            transaction_log_replication_factor=config.get("transaction.state.log.replication.factor"),
            transaction_log_segment_bytes=config.get("transaction.state.log.segment.bytes"),
            transaction_log_load_buffer_size=config.get("transaction.state.log.load.buffer.size"),
            transaction_log_min_insync_replicas=config.get("transaction.state.log.min.isr"),
            abort_timed_out_transactions_interval_ms=config.get(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms"),
            remove_expired_transactional_ids_interval_ms=config.get(
                "transaction.remove.expired.transaction.cleanup.interval.ms"),
            request_timeout_ms=config.get("request.timeout.ms"),
        )
        manager = TransactionStateManager(
            self.node_id, self.replica_manager, self._create_internal_topic, txn_config, self.scheduler, self.time
        )
        channel = TransactionMarkerChannelManager(
            self.node_id, self.metadata_cache, manager,
            NetworkMarkerSender(self.node_id, txn_config.request_timeout_ms, self.inter_broker), self.scheduler,
        )
        return TransactionCoordinator(
            self.node_id, txn_config, manager, channel, lambda: self.admin_manager.allocate_producer_id(),
            self.scheduler, self.time,
        )

    async def _create_internal_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str | None]
    ) -> None:
        """Create an internal topic (or find it being created) and wait for its leaders, so that
        the first FindCoordinator can already answer."""
        try:
            await self.admin_manager.create_topic(name, num_partitions, replication_factor, configs)
        except TopicExistsError:
            pass
        await self.admin_manager.wait_for_leaders([name], INTERNAL_TOPIC_WAIT_MS)

    def _channel_to(self, broker: LiveBroker) -> BrokerChannel:
        """The controller's channel to ``broker``: in-process to this one, a socket to others."""
        if broker.broker_id == self.node_id:
            return InProcessBrokerChannel(self.broker_control, broker)
        return NetworkBrokerChannel(
            broker, self.node_id, self.config.get("controller.socket.timeout.ms") / 1000, self.inter_broker)

    async def _log_offsets(self, leader: LiveBroker, partitions: list[TopicPartition]) -> LogOffsets:
        """The controller's question to ``leader`` about its marked partitions: this broker's
        own answered in-process, others' through ListOffsets."""
        if leader.broker_id != self.node_id:
            return await self._network_log_offsets(leader, partitions)
        out: LogOffsets = {}
        for tp in partitions:
            partition = self.replica_manager.get_partition(tp)
            if partition is not None and partition.is_leader:
                out[tp] = (partition.log.log_start_offset, partition.log.high_watermark)
        return out

    def _leader_endpoint(self, broker_id: int) -> RemoteLeaderEndPoint:
        """How this broker's replica fetcher reaches ``broker_id`` (its address looked up in the
        metadata cache at each connection)."""

        def resolve(broker: int) -> BrokerEndpoint | None:
            alive = self.metadata_cache.alive_broker(broker)
            return None if alive is None else self.inter_broker.endpoint(alive)

        return RemoteLeaderEndPoint(broker_id, self.node_id, resolve, self.config.get("replica.socket.timeout.ms"),
                                    self.inter_broker)

    async def _propagate_log_dir_event(self) -> None:
        """Tell the controller, through ZooKeeper, that a log dir of this broker failed."""
        await self.store.propagate_log_dir_event(self.node_id)

    async def _open_store(self) -> None:
        """Cluster mode: connect to ZooKeeper, and take the cluster id from it (a data dir of
        another cluster is refused, as Kafka refuses it)."""
        from pybroker.controller.zk_store import InconsistentClusterIdError, ZooKeeperStore
        from pybroker.zookeeper.client import ZooKeeperConnectionError
        from pybroker.zookeeper.kafka_zk_client import BrokerIdInUseError

        assert self.zookeeper_connect is not None
        session_ms = self.config.get("zookeeper.session.timeout.ms")
        try:
            store = await ZooKeeperStore.connect(
                self.zookeeper_connect, session_ms, self.config.get("zookeeper.connection.timeout.ms") or session_ms,
                self.node_id, self.cluster_id, self.store_listener,
            )
        except (ZooKeeperConnectionError, BrokerIdInUseError) as e:
            raise RuntimeError(str(e)) from e
        try:
            store.check_cluster_id(read_meta_properties(self.config.log_dirs[0]).get("cluster.id"))
        except InconsistentClusterIdError as e:
            await store.close()
            raise RuntimeError(f"{e} (log.dirs: {', '.join(self.config.log_dirs)})") from e
        self.cluster_id = self.log_manager.cluster_id = store.cluster_id
        self.store = self.admin_manager.store = self.controller.store = store

    async def _controlled_shutdown(self) -> None:
        """Kafka's controlled shutdown: ask the controller (as this broker's metadata names it) to
        move this broker's leaderships away, until none is left or the retries run out; then
        stop anyway (an "unclean" shutdown for the partitions left)."""
        if not any(broker != self.node_id for broker in self.metadata_cache.live_brokers):
            # Nobody could take the leaderships over: Kafka would retry until its retries run
            # out (15 s by default) and then stop anyway.
            log.info("No other live broker: skipping the controlled shutdown")
            return
        retries = self.config.get("controlled.shutdown.max.retries")
        backoff_s = self.config.get("controlled.shutdown.retry.backoff.ms") / 1000
        for attempt in range(1, retries + 1):
            try:
                error, remaining = await self._ask_controller_to_shut_down()
            except (OSError, TimeoutError, KafkaClientError) as e:
                error, remaining = None, []
                log.warning("Controlled shutdown attempt %d failed: %s", attempt, e)
            if error == ErrorCode.NONE and not remaining:
                log.info("Controlled shutdown succeeded")
                return
            if error is not None:
                log.warning("Controlled shutdown attempt %d: %s, %d partition(s) still led here",
                            attempt, error.name, len(remaining))
            if attempt < retries:
                await asyncio.sleep(backoff_s)
        log.warning("Proceeding to do an unclean shutdown as all the controlled shutdown attempts failed")

    async def _ask_controller_to_shut_down(self) -> tuple[ErrorCode, Sequence[object]]:
        controller_id = self.metadata_cache.controller_id
        if controller_id == self.node_id:
            return await self.controller.controlled_shutdown(self.node_id, self.broker_epoch)
        controller = self.metadata_cache.alive_broker(controller_id)
        endpoint = None if controller is None else self.inter_broker.endpoint(controller)
        if endpoint is None:
            return ErrorCode.NOT_CONTROLLER, []
        connection = self.inter_broker.connection(endpoint.host, endpoint.port, f"broker-{self.node_id}")
        try:
            await connection.connect(self.config.get("controller.socket.timeout.ms") / 1000)
            answer = await connection.send(
                ApiKey.CONTROLLED_SHUTDOWN, ControlledShutdownRequest(broker_id=self.node_id, broker_epoch=self.broker_epoch),
                version=3,
            )
        finally:
            await connection.close()
        return ErrorCode(answer.error_code), list(answer.remaining_partitions)

    def _on_broker_registered(self, epoch: int) -> None:
        self.broker_epoch = epoch

    def _on_user_configs_changed(self, user: str, config: Mapping[str, str]) -> None:
        self.credential_cache.update_user(user, config)

    def _on_entity_configs_changed(self, entity_type: str, name: str, config: Mapping[str, str]) -> None:
        for handler in self.entity_config_handlers[entity_type]:
            handler(name, config)

    def _on_topic_configs_changed(self, topic: str) -> None:
        self.log_manager.update_config(topic)
        # Kafka's ConfigHandler: a deprecated config that is ignored is said so when applied.
        warnings = ignored_config_warnings(topic, self.store.topic_configs(topic))
        if warnings != self._config_warnings.get(topic, []):
            for warning in warnings:
                log.warning("%s", warning)
        if warnings:
            self._config_warnings[topic] = warnings
        else:
            self._config_warnings.pop(topic, None)

    @property
    def registration(self) -> LiveBroker:
        """This broker as it registers itself: its id and every advertised listener with its
        security protocol (Kafka's ``createBrokerInfo``: no host is this machine's canonical host
        name, port 0 the port the listener is bound to)."""
        endpoints = []
        for endpoint in self.config.advertised_listeners:
            port = endpoint.port or self.socket_server.bound_ports.get(endpoint.listener_name, 0)
            host = endpoint.host or socket.getfqdn()
            endpoints.append(BrokerEndpoint(endpoint.listener_name, host, port, endpoint.security_protocol))
        return LiveBroker(self.node_id, tuple(endpoints), self.config.get("broker.rack"))

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        for key in self.config.unknown:
            log.warning("Ignoring unknown broker property %s", key)
        for key in self.config.unapplied:
            log.warning("Broker property %s is Kafka's setting for %s, which pybroker has not: it has no effect",
                        key, unapplied_reason(key))
        configure_open_files()  # the limit raised, and the open log files sized from it
        if self.zookeeper_connect:
            await self._open_store()  # tells every entity's configs as it connects
        else:
            for entity_type in ENTITY_CONFIG_TYPES:
                for name, entity_config in self.store.entity_configs(entity_type).items():
                    self._on_entity_configs_changed(entity_type, name, entity_config)
        try:
            await self._start_authorizer()
            self.log_manager.load()
            self.group_coordinator.startup()
            self.transaction_coordinator.startup()
            await self.socket_server.start(start_serving=False)
            self.broker_epoch = await self._register()
        except BaseException:
            await self._abandon_start()
            raise
        self.controller.start()
        await self.controller.idle()
        await self.controller.channels.flush()  # this broker's partitions hosted, its cache filled
        await self.socket_server.enable_request_processing()
        self.log_manager.start_background_tasks()
        self.replica_manager.startup()
        if self.metrics_server is not None:
            await self.metrics_server.start()
        log.info("pybroker node %d started (cluster id %s)", self.node_id, self.cluster_id)

    async def _register(self) -> int:
        """Register this broker (its broker epoch); a node id another live broker registered
        stops the start-up with one clear line (RuntimeError)."""
        if not self.zookeeper_connect:
            return await self.store.register_broker(self.registration)
        from pybroker.zookeeper.kafka_zk_client import BrokerIdInUseError

        try:
            return await self.store.register_broker(self.registration)
        except BrokerIdInUseError as e:
            raise RuntimeError(f"{e} (node.id={self.node_id})") from None

    def update_registration(self) -> None:
        """A dynamic ``advertised.listeners`` changed: rewrite this broker's registration (off the
        event loop's call stack: the store's write is awaited in a task of its own)."""
        registration = self.registration

        async def update() -> None:
            try:
                await self.store.update_broker_info(registration)
            except Exception:
                log.exception("Updating the registration of broker %d with its new advertised listeners failed",
                              self.node_id)

        task = asyncio.get_running_loop().create_task(update(), name="update-broker-registration")
        self._registration_updates.add(task)
        task.add_done_callback(self._registration_updates.discard)

    async def _abandon_start(self) -> None:
        """A start-up that failed after the store was opened: close what is open, so that the
        process exits at once (and the ZooKeeper session ends now, not at its timeout)."""
        await self.socket_server.stop()
        await self._close_authorizer()
        if self.zookeeper_connect and not isinstance(self.store, _NotConnected):
            await self.store.close()

    def request_shutdown(self) -> None:
        self._stopped.set()

    async def wait_for_shutdown(self) -> None:
        await self._stopped.wait()

    async def shutdown(self) -> None:
        log.info("Shutting down node %d", self.node_id)
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        if self.zookeeper_connect and self.config.get("controlled.shutdown.enable"):
            await self._controlled_shutdown()
        await self.socket_server.stop()
        await self.controller.shutdown()
        await self._network_log_offsets.close()
        await self.group_coordinator.shutdown()
        await self.transaction_coordinator.shutdown()
        if self.transaction_verifier is not None:
            await self.transaction_verifier.close()
        await self.replica_manager.shutdown()
        if self.alter_partition_manager is not None:
            await self.alter_partition_manager.shutdown()
        await self.scheduler.shutdown()  # as Kafka: background tasks end before the logs close
        await self._close_authorizer()
        await self.store.close()
        await self.log_manager.shutdown()
        log.info("Shut down cleanly")


    # --- authorization -------------------------------------------------------------------------

    async def _start_authorizer(self) -> None:
        """The ACL authorizer's store (its own ZooKeeper session in cluster mode, as Kafka's
        AclAuthorizer has; ``acls.json`` beside the metadata file otherwise), loaded before
        any request is served."""
        if not isinstance(self.authorizer, AclAuthorizer):
            return
        if self.zookeeper_connect:
            from pybroker.zookeeper.client import ZooKeeperConnectionError

            session_ms = self.config.get("zookeeper.session.timeout.ms")
            try:
                self.authorizer.store = await ZooKeeperAclStore.connect(
                    self.zookeeper_connect, session_ms,
                    self.config.get("zookeeper.connection.timeout.ms") or session_ms, self.time,
                )
            except ZooKeeperConnectionError as e:
                raise RuntimeError(f"ACL authorizer: {e}") from e
        else:
            self.authorizer.store = LocalAclStore(self.config.log_dirs[0])
        await self.authorizer.start()

    async def _close_authorizer(self) -> None:
        if isinstance(self.authorizer, AclAuthorizer) and not isinstance(self.authorizer.store, ClosedAclStore):
            store, self.authorizer.store = self.authorizer.store, ClosedAclStore()
            await store.close()


def _configured_replica_selector(config: BrokerConfig) -> ReplicaSelector | None:
    """``replica.selector.class`` (KIP-392); a class pybroker does not have stops the start."""
    try:
        return replica_selector(config.get("replica.selector.class"))
    except ValueError as e:
        raise RuntimeError(str(e)) from None


def _configured_authorizer(config: BrokerConfig) -> Authorizer:
    """``authorizer.class.name``: empty allows everything (Kafka's default); Kafka's
    AclAuthorizer or StandardAuthorizer is the ACL authorizer; anything else stops the start."""
    class_name = (config.get("authorizer.class.name") or "").strip()
    if not class_name:
        return AllowAllAuthorizer()
    if class_name not in ACL_AUTHORIZER_CLASS_NAMES:
        raise RuntimeError(
            f"authorizer.class.name={class_name} is not supported: use kafka.security.authorizer.AclAuthorizer or "
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer (ACLs), or leave it empty (everything allowed)"
        )
    try:
        super_users = parse_super_users(config.get("super.users"))
    except PrincipalFormatError as e:
        raise RuntimeError(f"super.users: {e}") from None
    return AclAuthorizer(ClosedAclStore(), super_users, bool(config.get("allow.everyone.if.no.acl.found")))


class _NotConnected:
    """The store of a cluster-mode broker before start() has connected it to ZooKeeper."""

    def __getattr__(self, name: str) -> object:
        raise RuntimeError("the broker's ZooKeeper store is not connected yet (start() connects it)")
