"""Partition leaders' check that a transactional batch's partition is in its transaction (KIP-890
part 1; Kafka's ``AddPartitionsToTxnManager`` and ``ReplicaManager.appendRecords``).

A transactional producer must add a partition to its transaction (AddPartitionsToTxn) before
writing to it. Before a leader appends a producer's first transactional batch of a transaction
(the producer has no open transaction on the partition at that epoch), it asks the transactional
id's coordinator, with AddPartitionsToTxn v4 ``VerifyOnly``, whether the partition is in the
ongoing transaction of that producer id and epoch. A partition that is not answers
INVALID_TXN_STATE and nothing is appended; a fenced producer answers INVALID_PRODUCER_EPOCH; when
the coordinator cannot tell yet (it is loading, moving, or busy completing the previous
transaction) the produce answers NOT_ENOUGH_REPLICAS, which every client retries.

The coordinator is asked in-process when this broker leads the id's ``__transaction_state``
partition, else over the network (one connection per coordinator broker).
"""

from __future__ import annotations

import asyncio
import logging

from pybroker.client.connection import BrokerConnection, KafkaClientError
from pybroker.client.inter_broker import DIRECT, InterBrokerClient
from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import AddPartitionsToTxnRequest
from pybroker.server.metadata_cache import MetadataCache
from pybroker.server.transaction.coordinator import TransactionCoordinator
from pybroker.server.transaction.transaction_log import TRANSACTION_STATE_TOPIC
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

VERIFY_VERSION = 4
class TransactionVerifier:
    """Asks coordinators whether partitions are in a producer's ongoing transaction."""

    def __init__(
        self, node_id: int, metadata_cache: MetadataCache, coordinator: TransactionCoordinator, timeout_ms: int,
        inter_broker: InterBrokerClient = DIRECT,
    ) -> None:
        self._inter_broker = inter_broker
        self.node_id = node_id
        self.metadata_cache = metadata_cache
        self.coordinator = coordinator
        self.timeout_s = timeout_ms / 1000
        self._connections: dict[tuple[str, int], BrokerConnection] = {}
        self._lock = asyncio.Lock()

    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """Per partition: NONE when it is in the transaction, else the coordinator's error (what
        Produce answers for it: ``replica_manager.produce_error``)."""
        state_partition = TopicPartition(TRANSACTION_STATE_TOPIC, self.coordinator.partition_for(transactional_id))
        leader = self.metadata_cache.leader(state_partition)
        endpoint = None if leader is None else self._inter_broker.endpoint(leader)
        if leader is None or endpoint is None:
            errors = dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        elif leader.broker_id == self.node_id:
            errors = self.coordinator.handle_verify_partitions_in_transaction(
                transactional_id, producer_id, producer_epoch, partitions
            )
        else:
            errors = await self._ask(endpoint.host, endpoint.port, transactional_id, producer_id, producer_epoch,
                                     partitions)
        return errors

    async def _ask(
        self, host: str, port: int, transactional_id: str, producer_id: int, producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        topics: dict[str, list[int]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        request = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=True, topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=name, partitions=ids)
                                      for name, ids in topics.items()],
        )])
        try:
            connection = await self._connection(host, port)
            response = await connection.send(ApiKey.ADD_PARTITIONS_TO_TXN, request, version=VERIFY_VERSION,
                                             timeout=self.timeout_s)
        except (KafkaClientError, OSError, TimeoutError) as e:
            log.info("Verifying the transaction of %s with broker %s:%d failed: %s", transactional_id, host, port, e)
            await self._drop(host, port)
            return dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        if response.error_code != ErrorCode.NONE:
            # Kafka: a coordinator that refused the whole request leaves the partitions unverified.
            error = ErrorCode(response.error_code)
            return dict.fromkeys(partitions, ErrorCode.INVALID_TXN_STATE
                                 if error == ErrorCode.CLUSTER_AUTHORIZATION_FAILED else error)
        errors = dict.fromkeys(partitions, ErrorCode.INVALID_TXN_STATE)
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for partition in topic.results_by_partition:
                    tp = TopicPartition(topic.name, partition.partition_index)
                    if tp in errors:
                        errors[tp] = ErrorCode(partition.partition_error_code)
        return errors

    async def _connection(self, host: str, port: int) -> BrokerConnection:
        async with self._lock:
            connection = self._connections.get((host, port))
            if connection is None:
                connection = self._inter_broker.connection(host, port, f"broker-{self.node_id}-txn-verifier")
                await connection.connect(self.timeout_s)
                self._connections[(host, port)] = connection
            return connection

    async def _drop(self, host: str, port: int) -> None:
        connection = self._connections.pop((host, port), None)
        if connection is not None:
            await connection.close()

    async def close(self) -> None:
        connections, self._connections = self._connections, {}
        await asyncio.gather(*(c.close() for c in connections.values()), return_exceptions=True)
