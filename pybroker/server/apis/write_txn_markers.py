"""WriteTxnMarkers (27): a transaction coordinator has this broker append commit or abort markers.

For each marker (a producer's transaction result and the coordinator's epoch) the control batch
is built natively and appended to every named partition this broker leads, with acks=all and
``AppendOrigin.COORDINATOR`` (the log checks the producer and coordinator epochs: a stale marker
is INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED and appends nothing). A partition this
broker does not host is UNKNOWN_TOPIC_OR_PARTITION, one it does not lead NOT_LEADER_OR_FOLLOWER.
Once a marker is written to ``__consumer_offsets`` partitions, the group coordinator makes the
producer's pending transactional offset commits there visible (commit) or drops them (abort).
The answer comes when every marker's appends are acknowledged (Kafka's
``handleWriteTxnMarkersRequest``). Requires CLUSTER_ACTION on the cluster, as in Kafka.
"""

from __future__ import annotations

import asyncio
import logging

from pybroker import _native
from pybroker.common.errors import ErrorCode
from pybroker.log.log import AppendOrigin
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.group.metadata_manager import OFFSETS_TOPIC
from pybroker.server.replica_manager import PartitionAppendResult, now_ms
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.WRITE_TXN_MARKERS
VERSIONS = (0, 1)
AUTHORIZES = frozenset({(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)})
# Kafka appends markers with the broker's request.timeout.ms.
MARKER_APPEND_TIMEOUT_MS = 30000

log = logging.getLogger(__name__)

MarkerErrors = dict[TopicPartition, ErrorCode]


async def handle(ctx: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return error_response(request, ctx.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    results = await asyncio.gather(*(_write_marker(ctx, marker) for marker in request.markers))
    return WriteTxnMarkersResponse(markers=[
        WriteTxnMarkersResponse.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=_topics(errors))
        for marker, errors in zip(request.markers, results, strict=True)
    ])


async def _write_marker(ctx: RequestContext, marker: WriteTxnMarkersRequest.WritableTxnMarker) -> MarkerErrors:
    broker = ctx.services
    errors: MarkerErrors = {}
    entries = []
    batch = _native.build_control_batch(
        marker.producer_id, marker.producer_epoch, marker.coordinator_epoch, marker.transaction_result, now_ms()
    )
    for topic in marker.topics:
        for index in topic.partition_indexes:
            tp = TopicPartition(topic.name, index)
            if broker.replica_manager.get_partition(tp) is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                entries.append((tp, memoryview(bytearray(batch))))
    if not entries:
        return errors
    outcome = broker.replica_manager.append_records(
        -1, MARKER_APPEND_TIMEOUT_MS, entries, internal_topics_allowed=True, origin=AppendOrigin.COORDINATOR
    )
    appended: dict[TopicPartition, PartitionAppendResult] = await outcome if asyncio.isfuture(outcome) else outcome
    errors.update((tp, result.error) for tp, result in appended.items())
    offsets_partitions = [tp.partition for tp, result in appended.items()
                          if tp.topic == OFFSETS_TOPIC and result.error == ErrorCode.NONE]
    if offsets_partitions:
        try:
            broker.group_coordinator.handle_txn_completion(
                marker.producer_id, offsets_partitions, marker.transaction_result
            )
        except Exception:
            log.exception("Completing the transactional offset commits of producer %d failed", marker.producer_id)
            errors.update((TopicPartition(OFFSETS_TOPIC, p), ErrorCode.UNKNOWN_SERVER_ERROR) for p in offsets_partitions)
    return errors


def _topics(errors: MarkerErrors) -> list[WriteTxnMarkersResponse.WritableTxnMarkerTopicResult]:
    by_topic: dict[str, list[WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult]] = {}
    for tp, error in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(partition_index=tp.partition, error_code=error)
        )
    return [WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(name=name, partitions=partitions)
            for name, partitions in by_topic.items()]


def error_response(request: WriteTxnMarkersRequest, version: int, error: ErrorCode) -> WriteTxnMarkersResponse:
    """Kafka's getErrorResponse: ``error`` for every partition of every marker."""
    return WriteTxnMarkersResponse(markers=[
        WriteTxnMarkersResponse.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=_topics({
            TopicPartition(topic.name, index): error for topic in marker.topics for index in topic.partition_indexes
        }))
        for marker in request.markers
    ])
