"""The broker process: builds every component from the configuration, runs, and shuts down.

Owns start-up order (cluster id → metadata → log manager load/recovery → hosted partitions →
group coordinator (loads ``__consumer_offsets``) → listeners → background tasks), topic creation and deletion as the handlers request them (the
single broker acts as its own controller), and the clean shutdown sequence (stop accepting, answer
what is waiting, flush and checkpoint every log, mark the shutdown clean).
"""

from __future__ import annotations

import asyncio
import logging
import os

from pybroker.controller.metadata import ClusterMetadata, TopicMetadata
from pybroker.log.config import LogConfig, validate_topic_configs
from pybroker.log.file_descriptors import raise_open_file_limit
from pybroker.log.log_manager import LogManager, read_meta_properties
from pybroker.network.listener import SocketServer
from pybroker.scheduler import SYSTEM_TIME, AsyncioScheduler
from pybroker.server.authorizer import AllowAllAuthorizer, Authorizer
from pybroker.server.config import BrokerConfig, Endpoint
from pybroker.server.dispatcher import RequestDispatcher
from pybroker.server.group.coordinator import GroupConfig, GroupCoordinator
from pybroker.server.group.metadata_manager import GroupMetadataManager
from pybroker.server.replica_manager import ReplicaManager

log = logging.getLogger(__name__)


class Broker:
    """One pybroker node."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        log_dirs = config.log_dirs
        os.makedirs(log_dirs[0], exist_ok=True)
        self.cluster_id = read_meta_properties(log_dirs[0]).get("cluster.id") or config.new_cluster_id()
        self.metadata = ClusterMetadata(log_dirs[0], self.cluster_id, [self.node_id])
        self.time = SYSTEM_TIME
        self.scheduler = AsyncioScheduler()
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
            recovery_threads=config.get("num.recovery.threads.per.data.dir"),
            time=self.time,
            scheduler=self.scheduler,
        )
        self.replica_manager = ReplicaManager(self.node_id, self.log_manager, self.metadata)
        self.log_manager.on_log_start_offset_changed = self.replica_manager.on_log_start_offset_changed
        self.authorizer: Authorizer = AllowAllAuthorizer()
        self.group_coordinator = GroupCoordinator(
            GroupMetadataManager(
                self.replica_manager,
                self.create_topic,
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
        self.socket_server = SocketServer(
            config.listeners, RequestDispatcher(self), config.get("socket.request.max.bytes")
        )
        self._stopped = asyncio.Event()

    # --- configuration views -------------------------------------------------------------------

    def log_config(self, topic: str) -> LogConfig:
        metadata = self.metadata.topic(topic)
        return self.config.log_config(metadata.configs if metadata else {})

    @property
    def advertised_endpoint(self) -> Endpoint:
        endpoint = self.config.advertised_listeners[0]
        if endpoint.port == 0 and self.socket_server.bound:
            return Endpoint(endpoint.listener_name, endpoint.host, self.socket_server.bound[0][1])
        return endpoint

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        for key in self.config.unknown:
            log.warning("Ignoring unknown broker property %s", key)
        raise_open_file_limit()
        self.log_manager.load()
        for name in list(self.metadata.topics):
            await self.replica_manager.host_topic(name)
        self.group_coordinator.startup()
        await self.socket_server.start()
        self.log_manager.start_background_tasks()
        log.info("pybroker node %d started (cluster id %s)", self.node_id, self.cluster_id)

    def request_shutdown(self) -> None:
        self._stopped.set()

    async def wait_for_shutdown(self) -> None:
        await self._stopped.wait()

    async def shutdown(self) -> None:
        log.info("Shutting down node %d", self.node_id)
        await self.socket_server.stop()
        await self.group_coordinator.shutdown()
        await self.replica_manager.shutdown()
        await self.scheduler.shutdown()  # as Kafka: background tasks end before the logs close
        await self.metadata.close()
        await self.log_manager.shutdown()
        log.info("Shut down cleanly")

    # --- topic administration (this broker is its own controller) ------------------------------

    def create_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str | None]
    ) -> TopicMetadata:
        """Create a topic: in the metadata at once (raising the metadata/config errors), its
        partitions hosted in the background (``replica_manager.topic_hosted`` waits for them)."""
        if num_partitions == -1:
            num_partitions = self.config.get("num.partitions")
        if replication_factor == -1:
            replication_factor = self.config.get("default.replication.factor")
        checked = validate_topic_configs(configs)
        topic = self.metadata.create_topic(name, num_partitions, replication_factor, checked)
        self.replica_manager.host_topic(name)
        log.info("Created topic %s with %d partition(s)", name, num_partitions)
        return topic

    def delete_topic(self, name: str) -> TopicMetadata:
        topic = self.metadata.delete_topic(name)
        self.replica_manager.remove_topic(name, len(topic.partitions))
        self.group_coordinator.on_topic_deleted(name)
        log.info("Deleted topic %s", name)
        return topic

    def create_partitions(self, name: str, new_count: int) -> None:
        self.metadata.add_partitions(name, new_count)
        self.replica_manager.host_topic(name)

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.metadata.set_topic_configs(name, validate_topic_configs(configs))
        self.log_manager.update_config(name)
