"""The controller's requests on the wire: LeaderAndIsr v5, UpdateMetadata v7, StopReplica v3.

Owns the translation between the values of ``controller/requests.py`` and Kafka's messages, both
ways: the controller's network channel encodes with `to_wire` and decodes answers with
`response_from_wire`; a broker's handlers decode with `from_wire` and answer with
`response_to_wire`. Versions are those of the "IBP 2.8/3.0" profile. No I/O.
"""

from __future__ import annotations

from typing import Any

from pybroker.common.cluster import BrokerEndpoint, LiveBroker, PartitionState
from pybroker.common.errors import ErrorCode
from pybroker.controller.requests import (
    ControlResponse,
    LeaderAndIsr,
    StopReplica,
    StopReplicaPartition,
    UpdateMetadata,
)
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import (
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from pybroker.types import ZERO_UUID, TopicPartition

LEADER_AND_ISR_VERSION = 5
UPDATE_METADATA_VERSION = 7
STOP_REPLICA_VERSION = 3

#: Kafka's SecurityProtocol ids, as UpdateMetadata carries them
SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
_PROTOCOL_NAMES = {v: k for k, v in SECURITY_PROTOCOLS.items()}

ControlRequest = LeaderAndIsr | UpdateMetadata | StopReplica


def _by_topic(states: list[PartitionState]) -> dict[str, list[PartitionState]]:
    topics: dict[str, list[PartitionState]] = {}
    for state in states:
        topics.setdefault(state.topic_partition.topic, []).append(state)
    return topics


def _epochs_to_wire(epochs: dict[int, int]) -> list[Any]:
    E = UpdateMetadataRequest.PartitionLeaderEpoch
    return [E(partition_index=p, leader_epoch=e) for p, e in sorted(epochs.items())]


def to_wire(request: ControlRequest, listener: str | None = None) -> tuple[ApiKey, int, Any]:
    """``(api key, version, message)`` for ``request``; LeaderAndIsr's live leaders are given by
    their endpoint on ``listener``, the inter-broker listener (None: their first endpoint)."""
    if isinstance(request, LeaderAndIsr):
        L = LeaderAndIsrRequest
        return ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION, L(
            controller_id=request.controller_id, controller_epoch=request.controller_epoch,
            broker_epoch=request.broker_epoch, type=0,
            topic_states=[
                L.LeaderAndIsrTopicState(
                    topic_name=topic, topic_id=request.topic_ids.get(topic, ZERO_UUID),
                    undeleted_partition_count=states[0].undeleted_partition_count,
                    partition_states=[L.LeaderAndIsrPartitionState(
                        partition_index=s.topic_partition.partition, controller_epoch=s.controller_epoch,
                        leader=s.leader, leader_epoch=s.leader_epoch, isr=list(s.isr),
                        partition_epoch=s.partition_epoch, replicas=list(s.replicas),
                        adding_replicas=list(s.adding_replicas), removing_replicas=list(s.removing_replicas),
                        is_new=s.is_new,
                    ) for s in states],
                )
                for topic, states in _by_topic(request.partition_states).items()
            ],
            live_leaders=[
                L.LeaderAndIsrLiveLeader(broker_id=b.broker_id, host_name=e.host, port=e.port)
                for b in request.live_leaders if (e := b.endpoint(listener)) is not None
            ],
        )
    if isinstance(request, UpdateMetadata):
        U = UpdateMetadataRequest
        return ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, U(
            controller_id=request.controller_id, controller_epoch=request.controller_epoch,
            broker_epoch=request.broker_epoch,
            topic_states=[
                U.UpdateMetadataTopicState(
                    topic_name=topic, topic_id=request.topic_ids.get(topic, ZERO_UUID),
                    initial_partition_count=request.partition_counts.get(topic, (-1, -1))[0],
                    undeleted_partition_count=request.partition_counts.get(topic, (-1, -1))[1],
                    partition_states=[U.UpdateMetadataPartitionState(
                        partition_index=s.topic_partition.partition, controller_epoch=s.controller_epoch,
                        leader=s.leader, leader_epoch=s.leader_epoch, isr=list(s.isr),
                        zk_version=s.partition_epoch, replicas=list(s.replicas),
                        offline_replicas=list(s.offline_replicas),
                        leader_epochs_after_creation=_epochs_to_wire(s.leader_epochs_after_creation),
                        leader_epochs_before_deletion=_epochs_to_wire(s.leader_epochs_before_deletion),
                    ) for s in states],
                )
                for topic, states in _by_topic(request.partition_states).items()
            ],
            live_brokers=[
                U.UpdateMetadataBroker(id=b.broker_id, rack=b.rack, endpoints=[
                    U.UpdateMetadataEndpoint(port=e.port, host=e.host, listener=e.listener,
                                             security_protocol=SECURITY_PROTOCOLS.get(e.security_protocol, 0))
                    for e in b.endpoints
                ])
                for b in request.live_brokers
            ],
        )
    S = StopReplicaRequest
    topics: dict[str, list[StopReplicaPartition]] = {}
    for p in request.partitions:
        topics.setdefault(p.topic_partition.topic, []).append(p)
    return ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION, S(
        controller_id=request.controller_id, controller_epoch=request.controller_epoch,
        broker_epoch=request.broker_epoch,
        topic_states=[
            S.StopReplicaTopicState(topic_name=topic, partition_states=[
                S.StopReplicaPartitionState(partition_index=p.topic_partition.partition,
                                            leader_epoch=p.leader_epoch, delete_partition=p.delete)
                for p in partitions
            ])
            for topic, partitions in topics.items()
        ],
    )


def from_wire(api_key: int, message: Any) -> ControlRequest:
    """The value of a decoded LeaderAndIsr, UpdateMetadata or StopReplica request."""
    if api_key == ApiKey.LEADER_AND_ISR:
        states, topic_ids = [], {}
        for topic in message.topic_states:
            if topic.topic_id is not None and topic.topic_id != ZERO_UUID:
                topic_ids[topic.topic_name] = topic.topic_id
            states += [PartitionState(
                TopicPartition(topic.topic_name, p.partition_index), p.controller_epoch, p.leader, p.leader_epoch,
                list(p.isr), p.partition_epoch, list(p.replicas), is_new=p.is_new,
                undeleted_partition_count=topic.undeleted_partition_count,
                adding_replicas=list(p.adding_replicas or []), removing_replicas=list(p.removing_replicas or []),
            ) for p in topic.partition_states]
        leaders = [LiveBroker(b.broker_id, (BrokerEndpoint("PLAINTEXT", b.host_name, b.port),))
                   for b in message.live_leaders]
        return LeaderAndIsr(message.controller_id, message.controller_epoch, message.broker_epoch, states,
                            topic_ids, leaders)
    if api_key == ApiKey.UPDATE_METADATA:
        states, topic_ids, counts = [], {}, {}
        for topic in message.topic_states:
            if topic.topic_id is not None and topic.topic_id != ZERO_UUID:
                topic_ids[topic.topic_name] = topic.topic_id
            if topic.initial_partition_count > 0 and topic.undeleted_partition_count > 0:
                counts[topic.topic_name] = (topic.initial_partition_count, topic.undeleted_partition_count)
            states += [PartitionState(
                TopicPartition(topic.topic_name, p.partition_index), p.controller_epoch, p.leader, p.leader_epoch,
                list(p.isr), p.zk_version, list(p.replicas), offline_replicas=list(p.offline_replicas),
                leader_epochs_after_creation={e.partition_index: e.leader_epoch for e in p.leader_epochs_after_creation},
                leader_epochs_before_deletion={e.partition_index: e.leader_epoch
                                               for e in p.leader_epochs_before_deletion},
            ) for p in topic.partition_states]
        brokers = [
            LiveBroker(b.id, tuple(
                BrokerEndpoint(e.listener, e.host, e.port, _PROTOCOL_NAMES.get(e.security_protocol, "PLAINTEXT"))
                for e in b.endpoints
            ), b.rack)
            for b in message.live_brokers
        ]
        return UpdateMetadata(message.controller_id, message.controller_epoch, message.broker_epoch, states,
                              brokers, topic_ids, counts)
    partitions = [
        StopReplicaPartition(TopicPartition(topic.topic_name, p.partition_index), p.leader_epoch, p.delete_partition)
        for topic in message.topic_states for p in topic.partition_states
    ]
    return StopReplica(message.controller_id, message.controller_epoch, message.broker_epoch, partitions)


def response_to_wire(api_key: int, request: ControlRequest, answer: ControlResponse) -> Any:
    """The wire response of ``answer`` to ``request``."""
    if api_key == ApiKey.LEADER_AND_ISR:
        assert isinstance(request, LeaderAndIsr)
        R = LeaderAndIsrResponse
        by_topic: dict[str, list[Any]] = {}
        for state in request.partition_states:
            tp = state.topic_partition
            code = answer.partition_errors.get(tp, ErrorCode.NONE) if answer.error == ErrorCode.NONE else answer.error
            by_topic.setdefault(tp.topic, []).append(
                R.LeaderAndIsrPartitionError(partition_index=tp.partition, error_code=code))
        return R(error_code=answer.error, topics=[
            R.LeaderAndIsrTopicError(topic_id=request.topic_ids.get(topic, ZERO_UUID), partition_errors=errors)
            for topic, errors in by_topic.items()
        ])
    if api_key == ApiKey.UPDATE_METADATA:
        return UpdateMetadataResponse(error_code=answer.error)
    assert isinstance(request, StopReplica)
    S = StopReplicaResponse
    return S(error_code=answer.error, partition_errors=[
        S.StopReplicaPartitionError(topic_name=p.topic_partition.topic, partition_index=p.topic_partition.partition,
                                    error_code=answer.partition_errors.get(p.topic_partition, ErrorCode.NONE))
        for p in request.partitions
    ])


def response_from_wire(request: ControlRequest, message: Any) -> ControlResponse:
    """The value of a broker's answer to ``request``."""
    answer = ControlResponse(ErrorCode(message.error_code))
    if isinstance(request, LeaderAndIsr):
        names = {topic_id: name for name, topic_id in request.topic_ids.items()}
        for topic in message.topics:
            name = names.get(topic.topic_id)
            for p in topic.partition_errors:
                if name is not None and p.error_code != ErrorCode.NONE:
                    answer.partition_errors[TopicPartition(name, p.partition_index)] = ErrorCode(p.error_code)
    elif isinstance(request, StopReplica):
        for p in message.partition_errors:
            if p.error_code != ErrorCode.NONE:
                answer.partition_errors[TopicPartition(p.topic_name, p.partition_index)] = ErrorCode(p.error_code)
    return answer
