"""ConsumerGroupPosition (30001, KIP-253): members of a consumer group share delivered positions.

Sent to the group coordinator; see `pybroker.server.group.positions` for what it keeps and
answers. Errors are a heartbeat's (NOT_COORDINATOR, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
REBALANCE_IN_PROGRESS, ...) plus INCONSISTENT_GROUP_PROTOCOL for a group that is not a
consumer group; a report for a partition the member does not own is refused in
``ReportErrors`` with INVALID_REQUEST.

Authorized as Heartbeat (pybroker's choice; Kafka has no such API): READ on the group, else
GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import ConsumerGroupPositionRequest, ConsumerGroupPositionResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.CONSUMER_GROUP_POSITION
VERSIONS = (0, 0)
AUTHORIZES = frozenset({(AclOperation.READ, ResourceType.GROUP)})

R = ConsumerGroupPositionResponse


def _by_topic(partitions: dict[TopicPartition, int]) -> dict[str, dict[int, int]]:
    topics: dict[str, dict[int, int]] = {}
    for tp, value in sorted(partitions.items()):
        topics.setdefault(tp.topic, {})[tp.partition] = value
    return topics


def handle(ctx: RequestContext, request: ConsumerGroupPositionRequest) -> R:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error_response(request, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    reports = [(TopicPartition(t.name, p.partition_index), p.position)
               for t in request.reported_positions for p in t.partitions]
    interested = [TopicPartition(t.name, index) for t in request.interested_topics for index in t.partition_indexes]
    error, answer = ctx.services.group_coordinator.handle_consumer_group_position(
        request.group_id, request.member_id, request.generation_id, reports, interested,
    )
    if error != ErrorCode.NONE:
        return error_response(request, ctx.api_version, error)
    requests: dict[str, list[int]] = {}
    for tp in answer.position_requests:
        requests.setdefault(tp.topic, []).append(tp.partition)
    return R(
        throttle_time_ms=0, error_code=ErrorCode.NONE,
        report_errors=[R.ReportErrorTopic(name=name, partitions=[
            R.ReportErrorPartition(partition_index=p, error_code=code) for p, code in partitions.items()
        ]) for name, partitions in _by_topic(dict(answer.report_errors)).items()],
        group_positions=[R.GroupPositionTopic(name=name, partitions=[
            R.GroupPositionPartition(partition_index=p, position=position, error_code=ErrorCode.NONE)
            for p, position in partitions.items()
        ]) for name, partitions in _by_topic(answer.group_positions).items()],
        position_requests=[R.PositionRequestTopic(name=name, partition_indexes=indexes)
                           for name, indexes in requests.items()],
    )


def error_response(request: ConsumerGroupPositionRequest, version: int, error: ErrorCode) -> R:
    return R(throttle_time_ms=0, error_code=error, error_message=error.message)
