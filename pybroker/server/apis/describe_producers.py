"""DescribeProducers (61): the active producers of partitions, from this broker's replica of each
(KIP-664; ``kafka-transactions.sh describe-producers``).

As Kafka's ``KafkaApis.handleDescribeProducersRequest``: per topic, an illegal name answers
INVALID_TOPIC_EXCEPTION (with its message), then READ on the topic is needed
(TOPIC_AUTHORIZATION_FAILED), then the topic must be known (UNKNOWN_TOPIC_OR_PARTITION); each
partition is answered from the local replica's producer state (Kafka's
``Partition.activeProducerState``: the log's, whether this broker leads the partition or follows
it — Kafka's admin client asks the leader), or NOT_LEADER_OR_FOLLOWER when this broker has no
replica of an existing partition, UNKNOWN_TOPIC_OR_PARTITION when the partition does not exist.
A topic's error carries its default message. Producers are listed in the order of the Java
``HashMap`` Kafka's producer state keeps them in.
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.common.topic import InvalidTopicError, validate_topic_name
from pybroker.jvm_collections import java_hash_map_order, java_long_hash
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import DescribeProducersRequest, DescribeProducersResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.DESCRIBE_PRODUCERS
VERSIONS = (0, 0)
AUTHORIZES = frozenset({(AclOperation.READ, ResourceType.TOPIC)})

_Topic = DescribeProducersResponse.TopicResponse
_Partition = DescribeProducersResponse.PartitionResponse
_Producer = DescribeProducersResponse.ProducerState


def handle(ctx: RequestContext, request: DescribeProducersRequest) -> DescribeProducersResponse:
    replica_manager = ctx.services.replica_manager
    topics = []
    for topic in request.topics:
        error: tuple[ErrorCode, str | None] | None = None
        try:
            validate_topic_name(topic.name)
        except InvalidTopicError as e:
            error = (e.code, str(e))
        if error is None:
            if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, topic.name):
                error = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED.message)
            elif ctx.services.metadata_cache.topic(topic.name) is None:
                error = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message)
        partitions = []
        for index in topic.partition_indexes:
            if error is not None:
                partitions.append(_Partition(partition_index=index, error_code=error[0], error_message=error[1]))
                continue
            tp = TopicPartition(topic.name, index)
            partition = replica_manager.partitions.get(tp)
            if partition is None:
                partitions.append(_Partition(partition_index=index, error_code=replica_manager.missing_partition_error(tp)))
                continue
            producers = partition.active_producers()
            partitions.append(_Partition(partition_index=index, error_code=ErrorCode.NONE, active_producers=[
                _Producer(producer_id=producer_id, producer_epoch=entry.producer_epoch, last_sequence=entry.last_seq,
                          last_timestamp=entry.last_timestamp, coordinator_epoch=entry.coordinator_epoch,
                          current_txn_start_offset=entry.current_txn_first_offset)
                for producer_id, entry in ((p, producers[p]) for p in java_hash_map_order(producers, java_long_hash))
            ]))
        topics.append(_Topic(name=topic.name, partitions=partitions))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)


def error_response(request: DescribeProducersRequest, version: int, error: ErrorCode) -> DescribeProducersResponse:
    """Kafka's getErrorResponse: ``error`` on every requested partition."""
    return DescribeProducersResponse(throttle_time_ms=0, topics=[
        _Topic(name=t.name, partitions=[_Partition(partition_index=i, error_code=error) for i in t.partition_indexes])
        for t in request.topics
    ])
