"""Typed stub of ``pybroker.protocol.messages``, written by ``python -m pybroker.protocol.stubgen``
from the specs; do not edit."""

import uuid
from typing import Any, TypeAlias

from pybroker._native import LogRegion
from pybroker.protocol.schema import Message

__all__: list[str]

#: a ``records`` field: decoded as a view of the frame, encoded from bytes or a log region
Records: TypeAlias = memoryview | bytes | bytearray | LogRegion

REQUEST_CLASSES: dict[int, type[Any]]
RESPONSE_CLASSES: dict[int, type[Any]]

def build_classes(msg: Message) -> type: ...

class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int
    def __init__(
        self, *, api_key: int = ..., api_version: int = ..., correlation_id: int = ...,
        client_id: str | None = ..., header_version: int = ...,
    ) -> None: ...

class ProduceRequest:
    class PartitionProduceData:
        index: int
        records: Records | None
        def __init__(self, *, index: int = ..., records: Records | None = ...) -> None: ...
    class TopicProduceData:
        name: str
        partition_data: list[ProduceRequest.PartitionProduceData]
        undeleted_partition_count: int
        def __init__(self, *, name: str = ..., partition_data: list[ProduceRequest.PartitionProduceData] = ..., undeleted_partition_count: int = ...) -> None: ...
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list[ProduceRequest.TopicProduceData]
    def __init__(self, *, transactional_id: str | None = ..., acks: int = ..., timeout_ms: int = ..., topic_data: list[ProduceRequest.TopicProduceData] = ...) -> None: ...

class FetchRequest:
    class FetchPartition:
        partition: int
        current_leader_epoch: int
        fetch_offset: int
        last_fetched_epoch: int
        log_start_offset: int
        partition_max_bytes: int
        replica_directory_id: uuid.UUID
        def __init__(self, *, partition: int = ..., current_leader_epoch: int = ..., fetch_offset: int = ..., last_fetched_epoch: int = ..., log_start_offset: int = ..., partition_max_bytes: int = ..., replica_directory_id: uuid.UUID = ...) -> None: ...
    class FetchTopic:
        topic: str
        topic_id: uuid.UUID
        partitions: list[FetchRequest.FetchPartition]
        undeleted_partition_count: int
        def __init__(self, *, topic: str = ..., topic_id: uuid.UUID = ..., partitions: list[FetchRequest.FetchPartition] = ..., undeleted_partition_count: int = ...) -> None: ...
    class ForgottenTopic:
        topic: str
        topic_id: uuid.UUID
        partitions: list[int]
        def __init__(self, *, topic: str = ..., topic_id: uuid.UUID = ..., partitions: list[int] = ...) -> None: ...
    class ReplicaState:
        replica_id: int
        replica_epoch: int
        def __init__(self, *, replica_id: int = ..., replica_epoch: int = ...) -> None: ...
    cluster_id: str | None
    replica_id: int
    replica_state: FetchRequest.ReplicaState
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    topics: list[FetchRequest.FetchTopic]
    forgotten_topics_data: list[FetchRequest.ForgottenTopic]
    rack_id: str
    def __init__(self, *, cluster_id: str | None = ..., replica_id: int = ..., replica_state: FetchRequest.ReplicaState = ..., max_wait_ms: int = ..., min_bytes: int = ..., max_bytes: int = ..., isolation_level: int = ..., session_id: int = ..., session_epoch: int = ..., topics: list[FetchRequest.FetchTopic] = ..., forgotten_topics_data: list[FetchRequest.ForgottenTopic] = ..., rack_id: str = ...) -> None: ...

class ListOffsetsRequest:
    class ListOffsetsPartition:
        partition_index: int
        current_leader_epoch: int
        timestamp: int
        max_num_offsets: int
        def __init__(self, *, partition_index: int = ..., current_leader_epoch: int = ..., timestamp: int = ..., max_num_offsets: int = ...) -> None: ...
    class ListOffsetsTopic:
        name: str
        partitions: list[ListOffsetsRequest.ListOffsetsPartition]
        def __init__(self, *, name: str = ..., partitions: list[ListOffsetsRequest.ListOffsetsPartition] = ...) -> None: ...
    replica_id: int
    isolation_level: int
    topics: list[ListOffsetsRequest.ListOffsetsTopic]
    timeout_ms: int
    def __init__(self, *, replica_id: int = ..., isolation_level: int = ..., topics: list[ListOffsetsRequest.ListOffsetsTopic] = ..., timeout_ms: int = ...) -> None: ...

class MetadataRequest:
    class MetadataRequestTopic:
        topic_id: uuid.UUID
        name: str | None
        def __init__(self, *, topic_id: uuid.UUID = ..., name: str | None = ...) -> None: ...
    topics: list[MetadataRequest.MetadataRequestTopic] | None
    allow_auto_topic_creation: bool
    include_cluster_authorized_operations: bool
    include_topic_authorized_operations: bool
    def __init__(self, *, topics: list[MetadataRequest.MetadataRequestTopic] | None = ..., allow_auto_topic_creation: bool = ..., include_cluster_authorized_operations: bool = ..., include_topic_authorized_operations: bool = ...) -> None: ...

class LeaderAndIsrRequest:
    class LeaderAndIsrLiveLeader:
        broker_id: int
        host_name: str
        port: int
        def __init__(self, *, broker_id: int = ..., host_name: str = ..., port: int = ...) -> None: ...
    class LeaderAndIsrPartitionState:
        topic_name: str
        partition_index: int
        controller_epoch: int
        leader: int
        leader_epoch: int
        isr: list[int]
        partition_epoch: int
        replicas: list[int]
        adding_replicas: list[int]
        removing_replicas: list[int]
        is_new: bool
        leader_recovery_state: int
        def __init__(self, *, topic_name: str = ..., partition_index: int = ..., controller_epoch: int = ..., leader: int = ..., leader_epoch: int = ..., isr: list[int] = ..., partition_epoch: int = ..., replicas: list[int] = ..., adding_replicas: list[int] = ..., removing_replicas: list[int] = ..., is_new: bool = ..., leader_recovery_state: int = ...) -> None: ...
    class LeaderAndIsrTopicState:
        topic_name: str
        topic_id: uuid.UUID
        partition_states: list[LeaderAndIsrRequest.LeaderAndIsrPartitionState]
        undeleted_partition_count: int
        def __init__(self, *, topic_name: str = ..., topic_id: uuid.UUID = ..., partition_states: list[LeaderAndIsrRequest.LeaderAndIsrPartitionState] = ..., undeleted_partition_count: int = ...) -> None: ...
    controller_id: int
    is_k_raft_controller: bool
    controller_epoch: int
    broker_epoch: int
    type: int
    ungrouped_partition_states: list[LeaderAndIsrRequest.LeaderAndIsrPartitionState]
    topic_states: list[LeaderAndIsrRequest.LeaderAndIsrTopicState]
    live_leaders: list[LeaderAndIsrRequest.LeaderAndIsrLiveLeader]
    def __init__(self, *, controller_id: int = ..., is_k_raft_controller: bool = ..., controller_epoch: int = ..., broker_epoch: int = ..., type: int = ..., ungrouped_partition_states: list[LeaderAndIsrRequest.LeaderAndIsrPartitionState] = ..., topic_states: list[LeaderAndIsrRequest.LeaderAndIsrTopicState] = ..., live_leaders: list[LeaderAndIsrRequest.LeaderAndIsrLiveLeader] = ...) -> None: ...

class StopReplicaRequest:
    class StopReplicaPartitionState:
        partition_index: int
        leader_epoch: int
        delete_partition: bool
        def __init__(self, *, partition_index: int = ..., leader_epoch: int = ..., delete_partition: bool = ...) -> None: ...
    class StopReplicaPartitionV0:
        topic_name: str
        partition_index: int
        def __init__(self, *, topic_name: str = ..., partition_index: int = ...) -> None: ...
    class StopReplicaTopicState:
        topic_name: str
        partition_states: list[StopReplicaRequest.StopReplicaPartitionState]
        def __init__(self, *, topic_name: str = ..., partition_states: list[StopReplicaRequest.StopReplicaPartitionState] = ...) -> None: ...
    class StopReplicaTopicV1:
        name: str
        partition_indexes: list[int]
        def __init__(self, *, name: str = ..., partition_indexes: list[int] = ...) -> None: ...
    controller_id: int
    is_k_raft_controller: bool
    controller_epoch: int
    broker_epoch: int
    delete_partitions: bool
    ungrouped_partitions: list[StopReplicaRequest.StopReplicaPartitionV0]
    topics: list[StopReplicaRequest.StopReplicaTopicV1]
    topic_states: list[StopReplicaRequest.StopReplicaTopicState]
    def __init__(self, *, controller_id: int = ..., is_k_raft_controller: bool = ..., controller_epoch: int = ..., broker_epoch: int = ..., delete_partitions: bool = ..., ungrouped_partitions: list[StopReplicaRequest.StopReplicaPartitionV0] = ..., topics: list[StopReplicaRequest.StopReplicaTopicV1] = ..., topic_states: list[StopReplicaRequest.StopReplicaTopicState] = ...) -> None: ...

class UpdateMetadataRequest:
    class PartitionLeaderEpoch:
        partition_index: int
        leader_epoch: int
        def __init__(self, *, partition_index: int = ..., leader_epoch: int = ...) -> None: ...
    class UpdateMetadataBroker:
        id: int
        v0_host: str
        v0_port: int
        endpoints: list[UpdateMetadataRequest.UpdateMetadataEndpoint]
        rack: str | None
        def __init__(self, *, id: int = ..., v0_host: str = ..., v0_port: int = ..., endpoints: list[UpdateMetadataRequest.UpdateMetadataEndpoint] = ..., rack: str | None = ...) -> None: ...
    class UpdateMetadataEndpoint:
        port: int
        host: str
        listener: str
        security_protocol: int
        def __init__(self, *, port: int = ..., host: str = ..., listener: str = ..., security_protocol: int = ...) -> None: ...
    class UpdateMetadataPartitionState:
        topic_name: str
        partition_index: int
        controller_epoch: int
        leader: int
        leader_epoch: int
        isr: list[int]
        zk_version: int
        replicas: list[int]
        offline_replicas: list[int]
        leader_epochs_after_creation: list[UpdateMetadataRequest.PartitionLeaderEpoch]
        leader_epochs_before_deletion: list[UpdateMetadataRequest.PartitionLeaderEpoch]
        def __init__(self, *, topic_name: str = ..., partition_index: int = ..., controller_epoch: int = ..., leader: int = ..., leader_epoch: int = ..., isr: list[int] = ..., zk_version: int = ..., replicas: list[int] = ..., offline_replicas: list[int] = ..., leader_epochs_after_creation: list[UpdateMetadataRequest.PartitionLeaderEpoch] = ..., leader_epochs_before_deletion: list[UpdateMetadataRequest.PartitionLeaderEpoch] = ...) -> None: ...
    class UpdateMetadataTopicState:
        topic_name: str
        topic_id: uuid.UUID
        partition_states: list[UpdateMetadataRequest.UpdateMetadataPartitionState]
        initial_partition_count: int
        undeleted_partition_count: int
        def __init__(self, *, topic_name: str = ..., topic_id: uuid.UUID = ..., partition_states: list[UpdateMetadataRequest.UpdateMetadataPartitionState] = ..., initial_partition_count: int = ..., undeleted_partition_count: int = ...) -> None: ...
    controller_id: int
    is_k_raft_controller: bool
    type: int
    controller_epoch: int
    broker_epoch: int
    ungrouped_partition_states: list[UpdateMetadataRequest.UpdateMetadataPartitionState]
    topic_states: list[UpdateMetadataRequest.UpdateMetadataTopicState]
    live_brokers: list[UpdateMetadataRequest.UpdateMetadataBroker]
    def __init__(self, *, controller_id: int = ..., is_k_raft_controller: bool = ..., type: int = ..., controller_epoch: int = ..., broker_epoch: int = ..., ungrouped_partition_states: list[UpdateMetadataRequest.UpdateMetadataPartitionState] = ..., topic_states: list[UpdateMetadataRequest.UpdateMetadataTopicState] = ..., live_brokers: list[UpdateMetadataRequest.UpdateMetadataBroker] = ...) -> None: ...

class ControlledShutdownRequest:
    broker_id: int
    broker_epoch: int
    def __init__(self, *, broker_id: int = ..., broker_epoch: int = ...) -> None: ...

class OffsetCommitRequest:
    class OffsetCommitRequestPartition:
        partition_index: int
        committed_offset: int
        committed_leader_epoch: int
        commit_timestamp: int
        committed_metadata: str | None
        def __init__(self, *, partition_index: int = ..., committed_offset: int = ..., committed_leader_epoch: int = ..., commit_timestamp: int = ..., committed_metadata: str | None = ...) -> None: ...
    class OffsetCommitRequestTopic:
        name: str
        partitions: list[OffsetCommitRequest.OffsetCommitRequestPartition]
        def __init__(self, *, name: str = ..., partitions: list[OffsetCommitRequest.OffsetCommitRequestPartition] = ...) -> None: ...
    group_id: str
    generation_id_or_member_epoch: int
    member_id: str
    group_instance_id: str | None
    retention_time_ms: int
    topics: list[OffsetCommitRequest.OffsetCommitRequestTopic]
    def __init__(self, *, group_id: str = ..., generation_id_or_member_epoch: int = ..., member_id: str = ..., group_instance_id: str | None = ..., retention_time_ms: int = ..., topics: list[OffsetCommitRequest.OffsetCommitRequestTopic] = ...) -> None: ...

class OffsetFetchRequest:
    class OffsetFetchRequestGroup:
        group_id: str
        member_id: str | None
        member_epoch: int
        topics: list[OffsetFetchRequest.OffsetFetchRequestTopics] | None
        def __init__(self, *, group_id: str = ..., member_id: str | None = ..., member_epoch: int = ..., topics: list[OffsetFetchRequest.OffsetFetchRequestTopics] | None = ...) -> None: ...
    class OffsetFetchRequestTopic:
        name: str
        partition_indexes: list[int]
        def __init__(self, *, name: str = ..., partition_indexes: list[int] = ...) -> None: ...
    class OffsetFetchRequestTopics:
        name: str
        partition_indexes: list[int]
        def __init__(self, *, name: str = ..., partition_indexes: list[int] = ...) -> None: ...
    group_id: str
    topics: list[OffsetFetchRequest.OffsetFetchRequestTopic] | None
    groups: list[OffsetFetchRequest.OffsetFetchRequestGroup]
    require_stable: bool
    def __init__(self, *, group_id: str = ..., topics: list[OffsetFetchRequest.OffsetFetchRequestTopic] | None = ..., groups: list[OffsetFetchRequest.OffsetFetchRequestGroup] = ..., require_stable: bool = ...) -> None: ...

class FindCoordinatorRequest:
    key: str
    key_type: int
    coordinator_keys: list[str]
    def __init__(self, *, key: str = ..., key_type: int = ..., coordinator_keys: list[str] = ...) -> None: ...

class JoinGroupRequest:
    class JoinGroupRequestProtocol:
        name: str
        metadata: bytes
        def __init__(self, *, name: str = ..., metadata: bytes = ...) -> None: ...
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[JoinGroupRequest.JoinGroupRequestProtocol]
    reason: str | None
    def __init__(self, *, group_id: str = ..., session_timeout_ms: int = ..., rebalance_timeout_ms: int = ..., member_id: str = ..., group_instance_id: str | None = ..., protocol_type: str = ..., protocols: list[JoinGroupRequest.JoinGroupRequestProtocol] = ..., reason: str | None = ...) -> None: ...

class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    def __init__(self, *, group_id: str = ..., generation_id: int = ..., member_id: str = ..., group_instance_id: str | None = ...) -> None: ...

class LeaveGroupRequest:
    class MemberIdentity:
        member_id: str
        group_instance_id: str | None
        reason: str | None
        def __init__(self, *, member_id: str = ..., group_instance_id: str | None = ..., reason: str | None = ...) -> None: ...
    group_id: str
    member_id: str
    members: list[LeaveGroupRequest.MemberIdentity]
    def __init__(self, *, group_id: str = ..., member_id: str = ..., members: list[LeaveGroupRequest.MemberIdentity] = ...) -> None: ...

class SyncGroupRequest:
    class SyncGroupRequestAssignment:
        member_id: str
        assignment: bytes
        def __init__(self, *, member_id: str = ..., assignment: bytes = ...) -> None: ...
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: list[SyncGroupRequest.SyncGroupRequestAssignment]
    def __init__(self, *, group_id: str = ..., generation_id: int = ..., member_id: str = ..., group_instance_id: str | None = ..., protocol_type: str | None = ..., protocol_name: str | None = ..., assignments: list[SyncGroupRequest.SyncGroupRequestAssignment] = ...) -> None: ...

class DescribeGroupsRequest:
    groups: list[str]
    include_authorized_operations: bool
    def __init__(self, *, groups: list[str] = ..., include_authorized_operations: bool = ...) -> None: ...

class ListGroupsRequest:
    states_filter: list[str]
    types_filter: list[str]
    def __init__(self, *, states_filter: list[str] = ..., types_filter: list[str] = ...) -> None: ...

class SaslHandshakeRequest:
    mechanism: str
    def __init__(self, *, mechanism: str = ...) -> None: ...

class ApiVersionsRequest:
    client_software_name: str
    client_software_version: str
    def __init__(self, *, client_software_name: str = ..., client_software_version: str = ...) -> None: ...

class CreateTopicsRequest:
    class CreatableReplicaAssignment:
        partition_index: int
        broker_ids: list[int]
        def __init__(self, *, partition_index: int = ..., broker_ids: list[int] = ...) -> None: ...
    class CreatableTopic:
        name: str
        num_partitions: int
        replication_factor: int
        assignments: list[CreateTopicsRequest.CreatableReplicaAssignment]
        configs: list[CreateTopicsRequest.CreatableTopicConfig]
        def __init__(self, *, name: str = ..., num_partitions: int = ..., replication_factor: int = ..., assignments: list[CreateTopicsRequest.CreatableReplicaAssignment] = ..., configs: list[CreateTopicsRequest.CreatableTopicConfig] = ...) -> None: ...
    class CreatableTopicConfig:
        name: str
        value: str | None
        def __init__(self, *, name: str = ..., value: str | None = ...) -> None: ...
    topics: list[CreateTopicsRequest.CreatableTopic]
    timeout_ms: int
    validate_only: bool
    def __init__(self, *, topics: list[CreateTopicsRequest.CreatableTopic] = ..., timeout_ms: int = ..., validate_only: bool = ...) -> None: ...

class DeleteTopicsRequest:
    class DeleteTopicState:
        name: str | None
        topic_id: uuid.UUID
        def __init__(self, *, name: str | None = ..., topic_id: uuid.UUID = ...) -> None: ...
    topics: list[DeleteTopicsRequest.DeleteTopicState]
    topic_names: list[str]
    timeout_ms: int
    def __init__(self, *, topics: list[DeleteTopicsRequest.DeleteTopicState] = ..., topic_names: list[str] = ..., timeout_ms: int = ...) -> None: ...

class DeleteRecordsRequest:
    class DeleteRecordsPartition:
        partition_index: int
        offset: int
        def __init__(self, *, partition_index: int = ..., offset: int = ...) -> None: ...
    class DeleteRecordsTopic:
        name: str
        partitions: list[DeleteRecordsRequest.DeleteRecordsPartition]
        def __init__(self, *, name: str = ..., partitions: list[DeleteRecordsRequest.DeleteRecordsPartition] = ...) -> None: ...
    topics: list[DeleteRecordsRequest.DeleteRecordsTopic]
    timeout_ms: int
    leader_only: bool
    def __init__(self, *, topics: list[DeleteRecordsRequest.DeleteRecordsTopic] = ..., timeout_ms: int = ..., leader_only: bool = ...) -> None: ...

class InitProducerIdRequest:
    transactional_id: str | None
    transaction_timeout_ms: int
    producer_id: int
    producer_epoch: int
    def __init__(self, *, transactional_id: str | None = ..., transaction_timeout_ms: int = ..., producer_id: int = ..., producer_epoch: int = ...) -> None: ...

class OffsetForLeaderEpochRequest:
    class OffsetForLeaderPartition:
        partition: int
        current_leader_epoch: int
        leader_epoch: int
        def __init__(self, *, partition: int = ..., current_leader_epoch: int = ..., leader_epoch: int = ...) -> None: ...
    class OffsetForLeaderTopic:
        topic: str
        partitions: list[OffsetForLeaderEpochRequest.OffsetForLeaderPartition]
        def __init__(self, *, topic: str = ..., partitions: list[OffsetForLeaderEpochRequest.OffsetForLeaderPartition] = ...) -> None: ...
    replica_id: int
    topics: list[OffsetForLeaderEpochRequest.OffsetForLeaderTopic]
    def __init__(self, *, replica_id: int = ..., topics: list[OffsetForLeaderEpochRequest.OffsetForLeaderTopic] = ...) -> None: ...

class AddPartitionsToTxnRequest:
    class AddPartitionsToTxnTopic:
        name: str
        partitions: list[int]
        def __init__(self, *, name: str = ..., partitions: list[int] = ...) -> None: ...
    class AddPartitionsToTxnTransaction:
        transactional_id: str
        producer_id: int
        producer_epoch: int
        verify_only: bool
        topics: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic]
        def __init__(self, *, transactional_id: str = ..., producer_id: int = ..., producer_epoch: int = ..., verify_only: bool = ..., topics: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic] = ...) -> None: ...
    transactions: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction]
    v3_and_below_transactional_id: str
    v3_and_below_producer_id: int
    v3_and_below_producer_epoch: int
    v3_and_below_topics: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic]
    def __init__(self, *, transactions: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction] = ..., v3_and_below_transactional_id: str = ..., v3_and_below_producer_id: int = ..., v3_and_below_producer_epoch: int = ..., v3_and_below_topics: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic] = ...) -> None: ...

class AddOffsetsToTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str
    def __init__(self, *, transactional_id: str = ..., producer_id: int = ..., producer_epoch: int = ..., group_id: str = ...) -> None: ...

class EndTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    def __init__(self, *, transactional_id: str = ..., producer_id: int = ..., producer_epoch: int = ..., committed: bool = ...) -> None: ...

class WriteTxnMarkersRequest:
    class WritableTxnMarker:
        producer_id: int
        producer_epoch: int
        transaction_result: bool
        topics: list[WriteTxnMarkersRequest.WritableTxnMarkerTopic]
        coordinator_epoch: int
        def __init__(self, *, producer_id: int = ..., producer_epoch: int = ..., transaction_result: bool = ..., topics: list[WriteTxnMarkersRequest.WritableTxnMarkerTopic] = ..., coordinator_epoch: int = ...) -> None: ...
    class WritableTxnMarkerTopic:
        name: str
        partition_indexes: list[int]
        def __init__(self, *, name: str = ..., partition_indexes: list[int] = ...) -> None: ...
    markers: list[WriteTxnMarkersRequest.WritableTxnMarker]
    def __init__(self, *, markers: list[WriteTxnMarkersRequest.WritableTxnMarker] = ...) -> None: ...

class TxnOffsetCommitRequest:
    class TxnOffsetCommitRequestPartition:
        partition_index: int
        committed_offset: int
        committed_leader_epoch: int
        committed_metadata: str | None
        def __init__(self, *, partition_index: int = ..., committed_offset: int = ..., committed_leader_epoch: int = ..., committed_metadata: str | None = ...) -> None: ...
    class TxnOffsetCommitRequestTopic:
        name: str
        partitions: list[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition]
        def __init__(self, *, name: str = ..., partitions: list[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition] = ...) -> None: ...
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int
    member_id: str
    group_instance_id: str | None
    topics: list[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic]
    def __init__(self, *, transactional_id: str = ..., group_id: str = ..., producer_id: int = ..., producer_epoch: int = ..., generation_id: int = ..., member_id: str = ..., group_instance_id: str | None = ..., topics: list[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic] = ...) -> None: ...

class DescribeAclsRequest:
    resource_type_filter: int
    resource_name_filter: str | None
    pattern_type_filter: int
    principal_filter: str | None
    host_filter: str | None
    operation: int
    permission_type: int
    def __init__(self, *, resource_type_filter: int = ..., resource_name_filter: str | None = ..., pattern_type_filter: int = ..., principal_filter: str | None = ..., host_filter: str | None = ..., operation: int = ..., permission_type: int = ...) -> None: ...

class CreateAclsRequest:
    class AclCreation:
        resource_type: int
        resource_name: str
        resource_pattern_type: int
        principal: str
        host: str
        operation: int
        permission_type: int
        def __init__(self, *, resource_type: int = ..., resource_name: str = ..., resource_pattern_type: int = ..., principal: str = ..., host: str = ..., operation: int = ..., permission_type: int = ...) -> None: ...
    creations: list[CreateAclsRequest.AclCreation]
    def __init__(self, *, creations: list[CreateAclsRequest.AclCreation] = ...) -> None: ...

class DeleteAclsRequest:
    class DeleteAclsFilter:
        resource_type_filter: int
        resource_name_filter: str | None
        pattern_type_filter: int
        principal_filter: str | None
        host_filter: str | None
        operation: int
        permission_type: int
        def __init__(self, *, resource_type_filter: int = ..., resource_name_filter: str | None = ..., pattern_type_filter: int = ..., principal_filter: str | None = ..., host_filter: str | None = ..., operation: int = ..., permission_type: int = ...) -> None: ...
    filters: list[DeleteAclsRequest.DeleteAclsFilter]
    def __init__(self, *, filters: list[DeleteAclsRequest.DeleteAclsFilter] = ...) -> None: ...

class DescribeConfigsRequest:
    class DescribeConfigsResource:
        resource_type: int
        resource_name: str
        configuration_keys: list[str] | None
        def __init__(self, *, resource_type: int = ..., resource_name: str = ..., configuration_keys: list[str] | None = ...) -> None: ...
    resources: list[DescribeConfigsRequest.DescribeConfigsResource]
    include_synonyms: bool
    include_documentation: bool
    def __init__(self, *, resources: list[DescribeConfigsRequest.DescribeConfigsResource] = ..., include_synonyms: bool = ..., include_documentation: bool = ...) -> None: ...

class AlterConfigsRequest:
    class AlterConfigsResource:
        resource_type: int
        resource_name: str
        configs: list[AlterConfigsRequest.AlterableConfig]
        def __init__(self, *, resource_type: int = ..., resource_name: str = ..., configs: list[AlterConfigsRequest.AlterableConfig] = ...) -> None: ...
    class AlterableConfig:
        name: str
        value: str | None
        def __init__(self, *, name: str = ..., value: str | None = ...) -> None: ...
    resources: list[AlterConfigsRequest.AlterConfigsResource]
    validate_only: bool
    def __init__(self, *, resources: list[AlterConfigsRequest.AlterConfigsResource] = ..., validate_only: bool = ...) -> None: ...

class AlterReplicaLogDirsRequest:
    class AlterReplicaLogDir:
        path: str
        topics: list[AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic]
        def __init__(self, *, path: str = ..., topics: list[AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic] = ...) -> None: ...
    class AlterReplicaLogDirTopic:
        name: str
        partitions: list[int]
        def __init__(self, *, name: str = ..., partitions: list[int] = ...) -> None: ...
    dirs: list[AlterReplicaLogDirsRequest.AlterReplicaLogDir]
    def __init__(self, *, dirs: list[AlterReplicaLogDirsRequest.AlterReplicaLogDir] = ...) -> None: ...

class DescribeLogDirsRequest:
    class DescribableLogDirTopic:
        topic: str
        partitions: list[int]
        def __init__(self, *, topic: str = ..., partitions: list[int] = ...) -> None: ...
    topics: list[DescribeLogDirsRequest.DescribableLogDirTopic] | None
    def __init__(self, *, topics: list[DescribeLogDirsRequest.DescribableLogDirTopic] | None = ...) -> None: ...

class SaslAuthenticateRequest:
    auth_bytes: bytes
    def __init__(self, *, auth_bytes: bytes = ...) -> None: ...

class CreatePartitionsRequest:
    class CreatePartitionsAssignment:
        broker_ids: list[int]
        def __init__(self, *, broker_ids: list[int] = ...) -> None: ...
    class CreatePartitionsTopic:
        name: str
        count: int
        assignments: list[CreatePartitionsRequest.CreatePartitionsAssignment] | None
        def __init__(self, *, name: str = ..., count: int = ..., assignments: list[CreatePartitionsRequest.CreatePartitionsAssignment] | None = ...) -> None: ...
    topics: list[CreatePartitionsRequest.CreatePartitionsTopic]
    timeout_ms: int
    validate_only: bool
    def __init__(self, *, topics: list[CreatePartitionsRequest.CreatePartitionsTopic] = ..., timeout_ms: int = ..., validate_only: bool = ...) -> None: ...

class DeleteGroupsRequest:
    groups_names: list[str]
    def __init__(self, *, groups_names: list[str] = ...) -> None: ...

class ElectLeadersRequest:
    class TopicPartitions:
        topic: str
        partitions: list[int]
        def __init__(self, *, topic: str = ..., partitions: list[int] = ...) -> None: ...
    election_type: int
    topic_partitions: list[ElectLeadersRequest.TopicPartitions] | None
    timeout_ms: int
    def __init__(self, *, election_type: int = ..., topic_partitions: list[ElectLeadersRequest.TopicPartitions] | None = ..., timeout_ms: int = ...) -> None: ...

class IncrementalAlterConfigsRequest:
    class AlterConfigsResource:
        resource_type: int
        resource_name: str
        configs: list[IncrementalAlterConfigsRequest.AlterableConfig]
        def __init__(self, *, resource_type: int = ..., resource_name: str = ..., configs: list[IncrementalAlterConfigsRequest.AlterableConfig] = ...) -> None: ...
    class AlterableConfig:
        name: str
        config_operation: int
        value: str | None
        def __init__(self, *, name: str = ..., config_operation: int = ..., value: str | None = ...) -> None: ...
    resources: list[IncrementalAlterConfigsRequest.AlterConfigsResource]
    validate_only: bool
    def __init__(self, *, resources: list[IncrementalAlterConfigsRequest.AlterConfigsResource] = ..., validate_only: bool = ...) -> None: ...

class AlterPartitionReassignmentsRequest:
    class ReassignablePartition:
        partition_index: int
        replicas: list[int] | None
        def __init__(self, *, partition_index: int = ..., replicas: list[int] | None = ...) -> None: ...
    class ReassignableTopic:
        name: str
        partitions: list[AlterPartitionReassignmentsRequest.ReassignablePartition]
        def __init__(self, *, name: str = ..., partitions: list[AlterPartitionReassignmentsRequest.ReassignablePartition] = ...) -> None: ...
    timeout_ms: int
    topics: list[AlterPartitionReassignmentsRequest.ReassignableTopic]
    def __init__(self, *, timeout_ms: int = ..., topics: list[AlterPartitionReassignmentsRequest.ReassignableTopic] = ...) -> None: ...

class ListPartitionReassignmentsRequest:
    class ListPartitionReassignmentsTopics:
        name: str
        partition_indexes: list[int]
        def __init__(self, *, name: str = ..., partition_indexes: list[int] = ...) -> None: ...
    timeout_ms: int
    topics: list[ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics] | None
    def __init__(self, *, timeout_ms: int = ..., topics: list[ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics] | None = ...) -> None: ...

class OffsetDeleteRequest:
    class OffsetDeleteRequestPartition:
        partition_index: int
        def __init__(self, *, partition_index: int = ...) -> None: ...
    class OffsetDeleteRequestTopic:
        name: str
        partitions: list[OffsetDeleteRequest.OffsetDeleteRequestPartition]
        def __init__(self, *, name: str = ..., partitions: list[OffsetDeleteRequest.OffsetDeleteRequestPartition] = ...) -> None: ...
    group_id: str
    topics: list[OffsetDeleteRequest.OffsetDeleteRequestTopic]
    def __init__(self, *, group_id: str = ..., topics: list[OffsetDeleteRequest.OffsetDeleteRequestTopic] = ...) -> None: ...

class DescribeClientQuotasRequest:
    class ComponentData:
        entity_type: str
        match_type: int
        match: str | None
        def __init__(self, *, entity_type: str = ..., match_type: int = ..., match: str | None = ...) -> None: ...
    components: list[DescribeClientQuotasRequest.ComponentData]
    strict: bool
    def __init__(self, *, components: list[DescribeClientQuotasRequest.ComponentData] = ..., strict: bool = ...) -> None: ...

class AlterClientQuotasRequest:
    class EntityData:
        entity_type: str
        entity_name: str | None
        def __init__(self, *, entity_type: str = ..., entity_name: str | None = ...) -> None: ...
    class EntryData:
        entity: list[AlterClientQuotasRequest.EntityData]
        ops: list[AlterClientQuotasRequest.OpData]
        def __init__(self, *, entity: list[AlterClientQuotasRequest.EntityData] = ..., ops: list[AlterClientQuotasRequest.OpData] = ...) -> None: ...
    class OpData:
        key: str
        value: float
        remove: bool
        def __init__(self, *, key: str = ..., value: float = ..., remove: bool = ...) -> None: ...
    entries: list[AlterClientQuotasRequest.EntryData]
    validate_only: bool
    def __init__(self, *, entries: list[AlterClientQuotasRequest.EntryData] = ..., validate_only: bool = ...) -> None: ...

class DescribeUserScramCredentialsRequest:
    class UserName:
        name: str
        def __init__(self, *, name: str = ...) -> None: ...
    users: list[DescribeUserScramCredentialsRequest.UserName] | None
    def __init__(self, *, users: list[DescribeUserScramCredentialsRequest.UserName] | None = ...) -> None: ...

class AlterUserScramCredentialsRequest:
    class ScramCredentialDeletion:
        name: str
        mechanism: int
        def __init__(self, *, name: str = ..., mechanism: int = ...) -> None: ...
    class ScramCredentialUpsertion:
        name: str
        mechanism: int
        iterations: int
        salt: bytes
        salted_password: bytes
        def __init__(self, *, name: str = ..., mechanism: int = ..., iterations: int = ..., salt: bytes = ..., salted_password: bytes = ...) -> None: ...
    deletions: list[AlterUserScramCredentialsRequest.ScramCredentialDeletion]
    upsertions: list[AlterUserScramCredentialsRequest.ScramCredentialUpsertion]
    def __init__(self, *, deletions: list[AlterUserScramCredentialsRequest.ScramCredentialDeletion] = ..., upsertions: list[AlterUserScramCredentialsRequest.ScramCredentialUpsertion] = ...) -> None: ...

class AlterPartitionRequest:
    class BrokerState:
        broker_id: int
        broker_epoch: int
        def __init__(self, *, broker_id: int = ..., broker_epoch: int = ...) -> None: ...
    class PartitionData:
        partition_index: int
        leader_epoch: int
        new_isr: list[int]
        new_isr_with_epochs: list[AlterPartitionRequest.BrokerState]
        leader_recovery_state: int
        partition_epoch: int
        def __init__(self, *, partition_index: int = ..., leader_epoch: int = ..., new_isr: list[int] = ..., new_isr_with_epochs: list[AlterPartitionRequest.BrokerState] = ..., leader_recovery_state: int = ..., partition_epoch: int = ...) -> None: ...
    class TopicData:
        topic_name: str
        topic_id: uuid.UUID
        partitions: list[AlterPartitionRequest.PartitionData]
        def __init__(self, *, topic_name: str = ..., topic_id: uuid.UUID = ..., partitions: list[AlterPartitionRequest.PartitionData] = ...) -> None: ...
    broker_id: int
    broker_epoch: int
    topics: list[AlterPartitionRequest.TopicData]
    def __init__(self, *, broker_id: int = ..., broker_epoch: int = ..., topics: list[AlterPartitionRequest.TopicData] = ...) -> None: ...

class DescribeClusterRequest:
    include_cluster_authorized_operations: bool
    endpoint_type: int
    def __init__(self, *, include_cluster_authorized_operations: bool = ..., endpoint_type: int = ...) -> None: ...

class DescribeProducersRequest:
    class TopicRequest:
        name: str
        partition_indexes: list[int]
        def __init__(self, *, name: str = ..., partition_indexes: list[int] = ...) -> None: ...
    topics: list[DescribeProducersRequest.TopicRequest]
    def __init__(self, *, topics: list[DescribeProducersRequest.TopicRequest] = ...) -> None: ...

class DescribeTransactionsRequest:
    transactional_ids: list[str]
    def __init__(self, *, transactional_ids: list[str] = ...) -> None: ...

class ListTransactionsRequest:
    state_filters: list[str]
    producer_id_filters: list[int]
    duration_filter: int
    def __init__(self, *, state_filters: list[str] = ..., producer_id_filters: list[int] = ..., duration_filter: int = ...) -> None: ...

class ConsumerGroupPositionRequest:
    class InterestedTopic:
        name: str
        partition_indexes: list[int]
        def __init__(self, *, name: str = ..., partition_indexes: list[int] = ...) -> None: ...
    class ReportedPartition:
        partition_index: int
        position: int
        def __init__(self, *, partition_index: int = ..., position: int = ...) -> None: ...
    class ReportedTopic:
        name: str
        partitions: list[ConsumerGroupPositionRequest.ReportedPartition]
        def __init__(self, *, name: str = ..., partitions: list[ConsumerGroupPositionRequest.ReportedPartition] = ...) -> None: ...
    group_id: str
    generation_id: int
    member_id: str
    reported_positions: list[ConsumerGroupPositionRequest.ReportedTopic]
    interested_topics: list[ConsumerGroupPositionRequest.InterestedTopic]
    def __init__(self, *, group_id: str = ..., generation_id: int = ..., member_id: str = ..., reported_positions: list[ConsumerGroupPositionRequest.ReportedTopic] = ..., interested_topics: list[ConsumerGroupPositionRequest.InterestedTopic] = ...) -> None: ...

class PartitionLeaderEpochsForPartitionsRequest:
    class RequestTopic:
        name: str
        partition_indexes: list[int]
        def __init__(self, *, name: str = ..., partition_indexes: list[int] = ...) -> None: ...
    topics: list[PartitionLeaderEpochsForPartitionsRequest.RequestTopic]
    def __init__(self, *, topics: list[PartitionLeaderEpochsForPartitionsRequest.RequestTopic] = ...) -> None: ...

class ProduceResponse:
    class BatchIndexAndErrorMessage:
        batch_index: int
        batch_index_error_message: str | None
        def __init__(self, *, batch_index: int = ..., batch_index_error_message: str | None = ...) -> None: ...
    class LeaderIdAndEpoch:
        leader_id: int
        leader_epoch: int
        def __init__(self, *, leader_id: int = ..., leader_epoch: int = ...) -> None: ...
    class NodeEndpoint:
        node_id: int
        host: str
        port: int
        rack: str | None
        def __init__(self, *, node_id: int = ..., host: str = ..., port: int = ..., rack: str | None = ...) -> None: ...
    class PartitionProduceResponse:
        index: int
        error_code: int
        base_offset: int
        log_append_time_ms: int
        log_start_offset: int
        record_errors: list[ProduceResponse.BatchIndexAndErrorMessage]
        error_message: str | None
        current_leader: ProduceResponse.LeaderIdAndEpoch
        def __init__(self, *, index: int = ..., error_code: int = ..., base_offset: int = ..., log_append_time_ms: int = ..., log_start_offset: int = ..., record_errors: list[ProduceResponse.BatchIndexAndErrorMessage] = ..., error_message: str | None = ..., current_leader: ProduceResponse.LeaderIdAndEpoch = ...) -> None: ...
    class TopicProduceResponse:
        name: str
        partition_responses: list[ProduceResponse.PartitionProduceResponse]
        def __init__(self, *, name: str = ..., partition_responses: list[ProduceResponse.PartitionProduceResponse] = ...) -> None: ...
    responses: list[ProduceResponse.TopicProduceResponse]
    throttle_time_ms: int
    node_endpoints: list[ProduceResponse.NodeEndpoint]
    def __init__(self, *, responses: list[ProduceResponse.TopicProduceResponse] = ..., throttle_time_ms: int = ..., node_endpoints: list[ProduceResponse.NodeEndpoint] = ...) -> None: ...

class FetchResponse:
    class AbortedTransaction:
        producer_id: int
        first_offset: int
        def __init__(self, *, producer_id: int = ..., first_offset: int = ...) -> None: ...
    class EpochEndOffset:
        epoch: int
        end_offset: int
        def __init__(self, *, epoch: int = ..., end_offset: int = ...) -> None: ...
    class FetchableTopicResponse:
        topic: str
        topic_id: uuid.UUID
        partitions: list[FetchResponse.PartitionData]
        def __init__(self, *, topic: str = ..., topic_id: uuid.UUID = ..., partitions: list[FetchResponse.PartitionData] = ...) -> None: ...
    class LeaderIdAndEpoch:
        leader_id: int
        leader_epoch: int
        def __init__(self, *, leader_id: int = ..., leader_epoch: int = ...) -> None: ...
    class NodeEndpoint:
        node_id: int
        host: str
        port: int
        rack: str | None
        def __init__(self, *, node_id: int = ..., host: str = ..., port: int = ..., rack: str | None = ...) -> None: ...
    class PartitionData:
        partition_index: int
        error_code: int
        high_watermark: int
        last_stable_offset: int
        log_start_offset: int
        diverging_epoch: FetchResponse.EpochEndOffset
        current_leader: FetchResponse.LeaderIdAndEpoch
        snapshot_id: FetchResponse.SnapshotId
        aborted_transactions: list[FetchResponse.AbortedTransaction] | None
        preferred_read_replica: int
        records: Records | None
        def __init__(self, *, partition_index: int = ..., error_code: int = ..., high_watermark: int = ..., last_stable_offset: int = ..., log_start_offset: int = ..., diverging_epoch: FetchResponse.EpochEndOffset = ..., current_leader: FetchResponse.LeaderIdAndEpoch = ..., snapshot_id: FetchResponse.SnapshotId = ..., aborted_transactions: list[FetchResponse.AbortedTransaction] | None = ..., preferred_read_replica: int = ..., records: Records | None = ...) -> None: ...
    class SnapshotId:
        end_offset: int
        epoch: int
        def __init__(self, *, end_offset: int = ..., epoch: int = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    session_id: int
    responses: list[FetchResponse.FetchableTopicResponse]
    node_endpoints: list[FetchResponse.NodeEndpoint]
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ..., session_id: int = ..., responses: list[FetchResponse.FetchableTopicResponse] = ..., node_endpoints: list[FetchResponse.NodeEndpoint] = ...) -> None: ...

class ListOffsetsResponse:
    class ListOffsetsPartitionResponse:
        partition_index: int
        error_code: int
        old_style_offsets: list[int]
        timestamp: int
        offset: int
        leader_epoch: int
        def __init__(self, *, partition_index: int = ..., error_code: int = ..., old_style_offsets: list[int] = ..., timestamp: int = ..., offset: int = ..., leader_epoch: int = ...) -> None: ...
    class ListOffsetsTopicResponse:
        name: str
        partitions: list[ListOffsetsResponse.ListOffsetsPartitionResponse]
        def __init__(self, *, name: str = ..., partitions: list[ListOffsetsResponse.ListOffsetsPartitionResponse] = ...) -> None: ...
    throttle_time_ms: int
    topics: list[ListOffsetsResponse.ListOffsetsTopicResponse]
    def __init__(self, *, throttle_time_ms: int = ..., topics: list[ListOffsetsResponse.ListOffsetsTopicResponse] = ...) -> None: ...

class MetadataResponse:
    class MetadataResponseBroker:
        node_id: int
        host: str
        port: int
        rack: str | None
        def __init__(self, *, node_id: int = ..., host: str = ..., port: int = ..., rack: str | None = ...) -> None: ...
    class MetadataResponsePartition:
        error_code: int
        partition_index: int
        leader_id: int
        leader_epoch: int
        replica_nodes: list[int]
        isr_nodes: list[int]
        offline_replicas: list[int]
        def __init__(self, *, error_code: int = ..., partition_index: int = ..., leader_id: int = ..., leader_epoch: int = ..., replica_nodes: list[int] = ..., isr_nodes: list[int] = ..., offline_replicas: list[int] = ...) -> None: ...
    class MetadataResponseTopic:
        error_code: int
        name: str | None
        topic_id: uuid.UUID
        is_internal: bool
        partitions: list[MetadataResponse.MetadataResponsePartition]
        topic_authorized_operations: int
        initial_partition_count: int
        undeleted_partition_count: int
        def __init__(self, *, error_code: int = ..., name: str | None = ..., topic_id: uuid.UUID = ..., is_internal: bool = ..., partitions: list[MetadataResponse.MetadataResponsePartition] = ..., topic_authorized_operations: int = ..., initial_partition_count: int = ..., undeleted_partition_count: int = ...) -> None: ...
    throttle_time_ms: int
    brokers: list[MetadataResponse.MetadataResponseBroker]
    cluster_id: str | None
    controller_id: int
    topics: list[MetadataResponse.MetadataResponseTopic]
    cluster_authorized_operations: int
    def __init__(self, *, throttle_time_ms: int = ..., brokers: list[MetadataResponse.MetadataResponseBroker] = ..., cluster_id: str | None = ..., controller_id: int = ..., topics: list[MetadataResponse.MetadataResponseTopic] = ..., cluster_authorized_operations: int = ...) -> None: ...

class LeaderAndIsrResponse:
    class LeaderAndIsrPartitionError:
        topic_name: str
        partition_index: int
        error_code: int
        def __init__(self, *, topic_name: str = ..., partition_index: int = ..., error_code: int = ...) -> None: ...
    class LeaderAndIsrTopicError:
        topic_id: uuid.UUID
        partition_errors: list[LeaderAndIsrResponse.LeaderAndIsrPartitionError]
        def __init__(self, *, topic_id: uuid.UUID = ..., partition_errors: list[LeaderAndIsrResponse.LeaderAndIsrPartitionError] = ...) -> None: ...
    error_code: int
    partition_errors: list[LeaderAndIsrResponse.LeaderAndIsrPartitionError]
    topics: list[LeaderAndIsrResponse.LeaderAndIsrTopicError]
    def __init__(self, *, error_code: int = ..., partition_errors: list[LeaderAndIsrResponse.LeaderAndIsrPartitionError] = ..., topics: list[LeaderAndIsrResponse.LeaderAndIsrTopicError] = ...) -> None: ...

class StopReplicaResponse:
    class StopReplicaPartitionError:
        topic_name: str
        partition_index: int
        error_code: int
        def __init__(self, *, topic_name: str = ..., partition_index: int = ..., error_code: int = ...) -> None: ...
    error_code: int
    partition_errors: list[StopReplicaResponse.StopReplicaPartitionError]
    def __init__(self, *, error_code: int = ..., partition_errors: list[StopReplicaResponse.StopReplicaPartitionError] = ...) -> None: ...

class UpdateMetadataResponse:
    error_code: int
    def __init__(self, *, error_code: int = ...) -> None: ...

class ControlledShutdownResponse:
    class RemainingPartition:
        topic_name: str
        partition_index: int
        def __init__(self, *, topic_name: str = ..., partition_index: int = ...) -> None: ...
    error_code: int
    remaining_partitions: list[ControlledShutdownResponse.RemainingPartition]
    def __init__(self, *, error_code: int = ..., remaining_partitions: list[ControlledShutdownResponse.RemainingPartition] = ...) -> None: ...

class OffsetCommitResponse:
    class OffsetCommitResponsePartition:
        partition_index: int
        error_code: int
        def __init__(self, *, partition_index: int = ..., error_code: int = ...) -> None: ...
    class OffsetCommitResponseTopic:
        name: str
        partitions: list[OffsetCommitResponse.OffsetCommitResponsePartition]
        def __init__(self, *, name: str = ..., partitions: list[OffsetCommitResponse.OffsetCommitResponsePartition] = ...) -> None: ...
    throttle_time_ms: int
    topics: list[OffsetCommitResponse.OffsetCommitResponseTopic]
    def __init__(self, *, throttle_time_ms: int = ..., topics: list[OffsetCommitResponse.OffsetCommitResponseTopic] = ...) -> None: ...

class OffsetFetchResponse:
    class OffsetFetchResponseGroup:
        group_id: str
        topics: list[OffsetFetchResponse.OffsetFetchResponseTopics]
        error_code: int
        def __init__(self, *, group_id: str = ..., topics: list[OffsetFetchResponse.OffsetFetchResponseTopics] = ..., error_code: int = ...) -> None: ...
    class OffsetFetchResponsePartition:
        partition_index: int
        committed_offset: int
        committed_leader_epoch: int
        metadata: str | None
        error_code: int
        def __init__(self, *, partition_index: int = ..., committed_offset: int = ..., committed_leader_epoch: int = ..., metadata: str | None = ..., error_code: int = ...) -> None: ...
    class OffsetFetchResponsePartitions:
        partition_index: int
        committed_offset: int
        committed_leader_epoch: int
        metadata: str | None
        error_code: int
        def __init__(self, *, partition_index: int = ..., committed_offset: int = ..., committed_leader_epoch: int = ..., metadata: str | None = ..., error_code: int = ...) -> None: ...
    class OffsetFetchResponseTopic:
        name: str
        partitions: list[OffsetFetchResponse.OffsetFetchResponsePartition]
        def __init__(self, *, name: str = ..., partitions: list[OffsetFetchResponse.OffsetFetchResponsePartition] = ...) -> None: ...
    class OffsetFetchResponseTopics:
        name: str
        partitions: list[OffsetFetchResponse.OffsetFetchResponsePartitions]
        def __init__(self, *, name: str = ..., partitions: list[OffsetFetchResponse.OffsetFetchResponsePartitions] = ...) -> None: ...
    throttle_time_ms: int
    topics: list[OffsetFetchResponse.OffsetFetchResponseTopic]
    error_code: int
    groups: list[OffsetFetchResponse.OffsetFetchResponseGroup]
    def __init__(self, *, throttle_time_ms: int = ..., topics: list[OffsetFetchResponse.OffsetFetchResponseTopic] = ..., error_code: int = ..., groups: list[OffsetFetchResponse.OffsetFetchResponseGroup] = ...) -> None: ...

class FindCoordinatorResponse:
    class Coordinator:
        key: str
        node_id: int
        host: str
        port: int
        error_code: int
        error_message: str | None
        def __init__(self, *, key: str = ..., node_id: int = ..., host: str = ..., port: int = ..., error_code: int = ..., error_message: str | None = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    node_id: int
    host: str
    port: int
    coordinators: list[FindCoordinatorResponse.Coordinator]
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ..., error_message: str | None = ..., node_id: int = ..., host: str = ..., port: int = ..., coordinators: list[FindCoordinatorResponse.Coordinator] = ...) -> None: ...

class JoinGroupResponse:
    class JoinGroupResponseMember:
        member_id: str
        group_instance_id: str | None
        metadata: bytes
        def __init__(self, *, member_id: str = ..., group_instance_id: str | None = ..., metadata: bytes = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str
    skip_assignment: bool
    member_id: str
    members: list[JoinGroupResponse.JoinGroupResponseMember]
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ..., generation_id: int = ..., protocol_type: str | None = ..., protocol_name: str | None = ..., leader: str = ..., skip_assignment: bool = ..., member_id: str = ..., members: list[JoinGroupResponse.JoinGroupResponseMember] = ...) -> None: ...

class HeartbeatResponse:
    throttle_time_ms: int
    error_code: int
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ...) -> None: ...

class LeaveGroupResponse:
    class MemberResponse:
        member_id: str
        group_instance_id: str | None
        error_code: int
        def __init__(self, *, member_id: str = ..., group_instance_id: str | None = ..., error_code: int = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    members: list[LeaveGroupResponse.MemberResponse]
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ..., members: list[LeaveGroupResponse.MemberResponse] = ...) -> None: ...

class SyncGroupResponse:
    throttle_time_ms: int
    error_code: int
    protocol_type: str | None
    protocol_name: str | None
    assignment: bytes
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ..., protocol_type: str | None = ..., protocol_name: str | None = ..., assignment: bytes = ...) -> None: ...

class DescribeGroupsResponse:
    class DescribedGroup:
        error_code: int
        group_id: str
        group_state: str
        protocol_type: str
        protocol_data: str
        members: list[DescribeGroupsResponse.DescribedGroupMember]
        authorized_operations: int
        def __init__(self, *, error_code: int = ..., group_id: str = ..., group_state: str = ..., protocol_type: str = ..., protocol_data: str = ..., members: list[DescribeGroupsResponse.DescribedGroupMember] = ..., authorized_operations: int = ...) -> None: ...
    class DescribedGroupMember:
        member_id: str
        group_instance_id: str | None
        client_id: str
        client_host: str
        member_metadata: bytes
        member_assignment: bytes
        def __init__(self, *, member_id: str = ..., group_instance_id: str | None = ..., client_id: str = ..., client_host: str = ..., member_metadata: bytes = ..., member_assignment: bytes = ...) -> None: ...
    throttle_time_ms: int
    groups: list[DescribeGroupsResponse.DescribedGroup]
    def __init__(self, *, throttle_time_ms: int = ..., groups: list[DescribeGroupsResponse.DescribedGroup] = ...) -> None: ...

class ListGroupsResponse:
    class ListedGroup:
        group_id: str
        protocol_type: str
        group_state: str
        group_type: str
        def __init__(self, *, group_id: str = ..., protocol_type: str = ..., group_state: str = ..., group_type: str = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    groups: list[ListGroupsResponse.ListedGroup]
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ..., groups: list[ListGroupsResponse.ListedGroup] = ...) -> None: ...

class SaslHandshakeResponse:
    error_code: int
    mechanisms: list[str]
    def __init__(self, *, error_code: int = ..., mechanisms: list[str] = ...) -> None: ...

class ApiVersionsResponse:
    class ApiVersion:
        api_key: int
        min_version: int
        max_version: int
        def __init__(self, *, api_key: int = ..., min_version: int = ..., max_version: int = ...) -> None: ...
    class FinalizedFeatureKey:
        name: str
        max_version_level: int
        min_version_level: int
        def __init__(self, *, name: str = ..., max_version_level: int = ..., min_version_level: int = ...) -> None: ...
    class SupportedFeatureKey:
        name: str
        min_version: int
        max_version: int
        def __init__(self, *, name: str = ..., min_version: int = ..., max_version: int = ...) -> None: ...
    error_code: int
    api_keys: list[ApiVersionsResponse.ApiVersion]
    throttle_time_ms: int
    supported_features: list[ApiVersionsResponse.SupportedFeatureKey]
    finalized_features_epoch: int
    finalized_features: list[ApiVersionsResponse.FinalizedFeatureKey]
    zk_migration_ready: bool
    def __init__(self, *, error_code: int = ..., api_keys: list[ApiVersionsResponse.ApiVersion] = ..., throttle_time_ms: int = ..., supported_features: list[ApiVersionsResponse.SupportedFeatureKey] = ..., finalized_features_epoch: int = ..., finalized_features: list[ApiVersionsResponse.FinalizedFeatureKey] = ..., zk_migration_ready: bool = ...) -> None: ...

class CreateTopicsResponse:
    class CreatableTopicConfigs:
        name: str
        value: str | None
        read_only: bool
        config_source: int
        is_sensitive: bool
        def __init__(self, *, name: str = ..., value: str | None = ..., read_only: bool = ..., config_source: int = ..., is_sensitive: bool = ...) -> None: ...
    class CreatableTopicResult:
        name: str
        topic_id: uuid.UUID
        error_code: int
        error_message: str | None
        topic_config_error_code: int
        num_partitions: int
        replication_factor: int
        configs: list[CreateTopicsResponse.CreatableTopicConfigs] | None
        def __init__(self, *, name: str = ..., topic_id: uuid.UUID = ..., error_code: int = ..., error_message: str | None = ..., topic_config_error_code: int = ..., num_partitions: int = ..., replication_factor: int = ..., configs: list[CreateTopicsResponse.CreatableTopicConfigs] | None = ...) -> None: ...
    throttle_time_ms: int
    topics: list[CreateTopicsResponse.CreatableTopicResult]
    def __init__(self, *, throttle_time_ms: int = ..., topics: list[CreateTopicsResponse.CreatableTopicResult] = ...) -> None: ...

class DeleteTopicsResponse:
    class DeletableTopicResult:
        name: str | None
        topic_id: uuid.UUID
        error_code: int
        error_message: str | None
        def __init__(self, *, name: str | None = ..., topic_id: uuid.UUID = ..., error_code: int = ..., error_message: str | None = ...) -> None: ...
    throttle_time_ms: int
    responses: list[DeleteTopicsResponse.DeletableTopicResult]
    def __init__(self, *, throttle_time_ms: int = ..., responses: list[DeleteTopicsResponse.DeletableTopicResult] = ...) -> None: ...

class DeleteRecordsResponse:
    class DeleteRecordsPartitionResult:
        partition_index: int
        low_watermark: int
        leader_log_start_offset: int
        error_code: int
        def __init__(self, *, partition_index: int = ..., low_watermark: int = ..., leader_log_start_offset: int = ..., error_code: int = ...) -> None: ...
    class DeleteRecordsTopicResult:
        name: str
        partitions: list[DeleteRecordsResponse.DeleteRecordsPartitionResult]
        def __init__(self, *, name: str = ..., partitions: list[DeleteRecordsResponse.DeleteRecordsPartitionResult] = ...) -> None: ...
    throttle_time_ms: int
    topics: list[DeleteRecordsResponse.DeleteRecordsTopicResult]
    def __init__(self, *, throttle_time_ms: int = ..., topics: list[DeleteRecordsResponse.DeleteRecordsTopicResult] = ...) -> None: ...

class InitProducerIdResponse:
    throttle_time_ms: int
    error_code: int
    producer_id: int
    producer_epoch: int
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ..., producer_id: int = ..., producer_epoch: int = ...) -> None: ...

class OffsetForLeaderEpochResponse:
    class EpochEndOffset:
        error_code: int
        partition: int
        leader_epoch: int
        end_offset: int
        def __init__(self, *, error_code: int = ..., partition: int = ..., leader_epoch: int = ..., end_offset: int = ...) -> None: ...
    class OffsetForLeaderTopicResult:
        topic: str
        partitions: list[OffsetForLeaderEpochResponse.EpochEndOffset]
        def __init__(self, *, topic: str = ..., partitions: list[OffsetForLeaderEpochResponse.EpochEndOffset] = ...) -> None: ...
    throttle_time_ms: int
    topics: list[OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult]
    def __init__(self, *, throttle_time_ms: int = ..., topics: list[OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult] = ...) -> None: ...

class AddPartitionsToTxnResponse:
    class AddPartitionsToTxnPartitionResult:
        partition_index: int
        partition_error_code: int
        def __init__(self, *, partition_index: int = ..., partition_error_code: int = ...) -> None: ...
    class AddPartitionsToTxnResult:
        transactional_id: str
        topic_results: list[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult]
        def __init__(self, *, transactional_id: str = ..., topic_results: list[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult] = ...) -> None: ...
    class AddPartitionsToTxnTopicResult:
        name: str
        results_by_partition: list[AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult]
        def __init__(self, *, name: str = ..., results_by_partition: list[AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult] = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    results_by_transaction: list[AddPartitionsToTxnResponse.AddPartitionsToTxnResult]
    results_by_topic_v3_and_below: list[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult]
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ..., results_by_transaction: list[AddPartitionsToTxnResponse.AddPartitionsToTxnResult] = ..., results_by_topic_v3_and_below: list[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult] = ...) -> None: ...

class AddOffsetsToTxnResponse:
    throttle_time_ms: int
    error_code: int
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ...) -> None: ...

class EndTxnResponse:
    throttle_time_ms: int
    error_code: int
    producer_id: int
    producer_epoch: int
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ..., producer_id: int = ..., producer_epoch: int = ...) -> None: ...

class WriteTxnMarkersResponse:
    class WritableTxnMarkerPartitionResult:
        partition_index: int
        error_code: int
        def __init__(self, *, partition_index: int = ..., error_code: int = ...) -> None: ...
    class WritableTxnMarkerResult:
        producer_id: int
        topics: list[WriteTxnMarkersResponse.WritableTxnMarkerTopicResult]
        def __init__(self, *, producer_id: int = ..., topics: list[WriteTxnMarkersResponse.WritableTxnMarkerTopicResult] = ...) -> None: ...
    class WritableTxnMarkerTopicResult:
        name: str
        partitions: list[WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult]
        def __init__(self, *, name: str = ..., partitions: list[WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult] = ...) -> None: ...
    markers: list[WriteTxnMarkersResponse.WritableTxnMarkerResult]
    def __init__(self, *, markers: list[WriteTxnMarkersResponse.WritableTxnMarkerResult] = ...) -> None: ...

class TxnOffsetCommitResponse:
    class TxnOffsetCommitResponsePartition:
        partition_index: int
        error_code: int
        def __init__(self, *, partition_index: int = ..., error_code: int = ...) -> None: ...
    class TxnOffsetCommitResponseTopic:
        name: str
        partitions: list[TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition]
        def __init__(self, *, name: str = ..., partitions: list[TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition] = ...) -> None: ...
    throttle_time_ms: int
    topics: list[TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic]
    def __init__(self, *, throttle_time_ms: int = ..., topics: list[TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic] = ...) -> None: ...

class DescribeAclsResponse:
    class AclDescription:
        principal: str
        host: str
        operation: int
        permission_type: int
        def __init__(self, *, principal: str = ..., host: str = ..., operation: int = ..., permission_type: int = ...) -> None: ...
    class DescribeAclsResource:
        resource_type: int
        resource_name: str
        pattern_type: int
        acls: list[DescribeAclsResponse.AclDescription]
        def __init__(self, *, resource_type: int = ..., resource_name: str = ..., pattern_type: int = ..., acls: list[DescribeAclsResponse.AclDescription] = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    resources: list[DescribeAclsResponse.DescribeAclsResource]
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ..., error_message: str | None = ..., resources: list[DescribeAclsResponse.DescribeAclsResource] = ...) -> None: ...

class CreateAclsResponse:
    class AclCreationResult:
        error_code: int
        error_message: str | None
        def __init__(self, *, error_code: int = ..., error_message: str | None = ...) -> None: ...
    throttle_time_ms: int
    results: list[CreateAclsResponse.AclCreationResult]
    def __init__(self, *, throttle_time_ms: int = ..., results: list[CreateAclsResponse.AclCreationResult] = ...) -> None: ...

class DeleteAclsResponse:
    class DeleteAclsFilterResult:
        error_code: int
        error_message: str | None
        matching_acls: list[DeleteAclsResponse.DeleteAclsMatchingAcl]
        def __init__(self, *, error_code: int = ..., error_message: str | None = ..., matching_acls: list[DeleteAclsResponse.DeleteAclsMatchingAcl] = ...) -> None: ...
    class DeleteAclsMatchingAcl:
        error_code: int
        error_message: str | None
        resource_type: int
        resource_name: str
        pattern_type: int
        principal: str
        host: str
        operation: int
        permission_type: int
        def __init__(self, *, error_code: int = ..., error_message: str | None = ..., resource_type: int = ..., resource_name: str = ..., pattern_type: int = ..., principal: str = ..., host: str = ..., operation: int = ..., permission_type: int = ...) -> None: ...
    throttle_time_ms: int
    filter_results: list[DeleteAclsResponse.DeleteAclsFilterResult]
    def __init__(self, *, throttle_time_ms: int = ..., filter_results: list[DeleteAclsResponse.DeleteAclsFilterResult] = ...) -> None: ...

class DescribeConfigsResponse:
    class DescribeConfigsResourceResult:
        name: str
        value: str | None
        read_only: bool
        is_default: bool
        config_source: int
        is_sensitive: bool
        synonyms: list[DescribeConfigsResponse.DescribeConfigsSynonym]
        config_type: int
        documentation: str | None
        def __init__(self, *, name: str = ..., value: str | None = ..., read_only: bool = ..., is_default: bool = ..., config_source: int = ..., is_sensitive: bool = ..., synonyms: list[DescribeConfigsResponse.DescribeConfigsSynonym] = ..., config_type: int = ..., documentation: str | None = ...) -> None: ...
    class DescribeConfigsResult:
        error_code: int
        error_message: str | None
        resource_type: int
        resource_name: str
        configs: list[DescribeConfigsResponse.DescribeConfigsResourceResult]
        def __init__(self, *, error_code: int = ..., error_message: str | None = ..., resource_type: int = ..., resource_name: str = ..., configs: list[DescribeConfigsResponse.DescribeConfigsResourceResult] = ...) -> None: ...
    class DescribeConfigsSynonym:
        name: str
        value: str | None
        source: int
        def __init__(self, *, name: str = ..., value: str | None = ..., source: int = ...) -> None: ...
    throttle_time_ms: int
    results: list[DescribeConfigsResponse.DescribeConfigsResult]
    def __init__(self, *, throttle_time_ms: int = ..., results: list[DescribeConfigsResponse.DescribeConfigsResult] = ...) -> None: ...

class AlterConfigsResponse:
    class AlterConfigsResourceResponse:
        error_code: int
        error_message: str | None
        resource_type: int
        resource_name: str
        def __init__(self, *, error_code: int = ..., error_message: str | None = ..., resource_type: int = ..., resource_name: str = ...) -> None: ...
    throttle_time_ms: int
    responses: list[AlterConfigsResponse.AlterConfigsResourceResponse]
    def __init__(self, *, throttle_time_ms: int = ..., responses: list[AlterConfigsResponse.AlterConfigsResourceResponse] = ...) -> None: ...

class AlterReplicaLogDirsResponse:
    class AlterReplicaLogDirPartitionResult:
        partition_index: int
        error_code: int
        def __init__(self, *, partition_index: int = ..., error_code: int = ...) -> None: ...
    class AlterReplicaLogDirTopicResult:
        topic_name: str
        partitions: list[AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult]
        def __init__(self, *, topic_name: str = ..., partitions: list[AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult] = ...) -> None: ...
    throttle_time_ms: int
    results: list[AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult]
    def __init__(self, *, throttle_time_ms: int = ..., results: list[AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult] = ...) -> None: ...

class DescribeLogDirsResponse:
    class DescribeLogDirsPartition:
        partition_index: int
        partition_size: int
        offset_lag: int
        is_future_key: bool
        def __init__(self, *, partition_index: int = ..., partition_size: int = ..., offset_lag: int = ..., is_future_key: bool = ...) -> None: ...
    class DescribeLogDirsResult:
        error_code: int
        log_dir: str
        topics: list[DescribeLogDirsResponse.DescribeLogDirsTopic]
        total_bytes: int
        usable_bytes: int
        def __init__(self, *, error_code: int = ..., log_dir: str = ..., topics: list[DescribeLogDirsResponse.DescribeLogDirsTopic] = ..., total_bytes: int = ..., usable_bytes: int = ...) -> None: ...
    class DescribeLogDirsTopic:
        name: str
        partitions: list[DescribeLogDirsResponse.DescribeLogDirsPartition]
        def __init__(self, *, name: str = ..., partitions: list[DescribeLogDirsResponse.DescribeLogDirsPartition] = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    results: list[DescribeLogDirsResponse.DescribeLogDirsResult]
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ..., results: list[DescribeLogDirsResponse.DescribeLogDirsResult] = ...) -> None: ...

class SaslAuthenticateResponse:
    error_code: int
    error_message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int
    def __init__(self, *, error_code: int = ..., error_message: str | None = ..., auth_bytes: bytes = ..., session_lifetime_ms: int = ...) -> None: ...

class CreatePartitionsResponse:
    class CreatePartitionsTopicResult:
        name: str
        error_code: int
        error_message: str | None
        def __init__(self, *, name: str = ..., error_code: int = ..., error_message: str | None = ...) -> None: ...
    throttle_time_ms: int
    results: list[CreatePartitionsResponse.CreatePartitionsTopicResult]
    def __init__(self, *, throttle_time_ms: int = ..., results: list[CreatePartitionsResponse.CreatePartitionsTopicResult] = ...) -> None: ...

class DeleteGroupsResponse:
    class DeletableGroupResult:
        group_id: str
        error_code: int
        def __init__(self, *, group_id: str = ..., error_code: int = ...) -> None: ...
    throttle_time_ms: int
    results: list[DeleteGroupsResponse.DeletableGroupResult]
    def __init__(self, *, throttle_time_ms: int = ..., results: list[DeleteGroupsResponse.DeletableGroupResult] = ...) -> None: ...

class ElectLeadersResponse:
    class PartitionResult:
        partition_id: int
        error_code: int
        error_message: str | None
        def __init__(self, *, partition_id: int = ..., error_code: int = ..., error_message: str | None = ...) -> None: ...
    class ReplicaElectionResult:
        topic: str
        partition_result: list[ElectLeadersResponse.PartitionResult]
        def __init__(self, *, topic: str = ..., partition_result: list[ElectLeadersResponse.PartitionResult] = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    replica_election_results: list[ElectLeadersResponse.ReplicaElectionResult]
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ..., replica_election_results: list[ElectLeadersResponse.ReplicaElectionResult] = ...) -> None: ...

class IncrementalAlterConfigsResponse:
    class AlterConfigsResourceResponse:
        error_code: int
        error_message: str | None
        resource_type: int
        resource_name: str
        def __init__(self, *, error_code: int = ..., error_message: str | None = ..., resource_type: int = ..., resource_name: str = ...) -> None: ...
    throttle_time_ms: int
    responses: list[IncrementalAlterConfigsResponse.AlterConfigsResourceResponse]
    def __init__(self, *, throttle_time_ms: int = ..., responses: list[IncrementalAlterConfigsResponse.AlterConfigsResourceResponse] = ...) -> None: ...

class AlterPartitionReassignmentsResponse:
    class ReassignablePartitionResponse:
        partition_index: int
        error_code: int
        error_message: str | None
        def __init__(self, *, partition_index: int = ..., error_code: int = ..., error_message: str | None = ...) -> None: ...
    class ReassignableTopicResponse:
        name: str
        partitions: list[AlterPartitionReassignmentsResponse.ReassignablePartitionResponse]
        def __init__(self, *, name: str = ..., partitions: list[AlterPartitionReassignmentsResponse.ReassignablePartitionResponse] = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    responses: list[AlterPartitionReassignmentsResponse.ReassignableTopicResponse]
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ..., error_message: str | None = ..., responses: list[AlterPartitionReassignmentsResponse.ReassignableTopicResponse] = ...) -> None: ...

class ListPartitionReassignmentsResponse:
    class OngoingPartitionReassignment:
        partition_index: int
        replicas: list[int]
        adding_replicas: list[int]
        removing_replicas: list[int]
        def __init__(self, *, partition_index: int = ..., replicas: list[int] = ..., adding_replicas: list[int] = ..., removing_replicas: list[int] = ...) -> None: ...
    class OngoingTopicReassignment:
        name: str
        partitions: list[ListPartitionReassignmentsResponse.OngoingPartitionReassignment]
        def __init__(self, *, name: str = ..., partitions: list[ListPartitionReassignmentsResponse.OngoingPartitionReassignment] = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    topics: list[ListPartitionReassignmentsResponse.OngoingTopicReassignment]
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ..., error_message: str | None = ..., topics: list[ListPartitionReassignmentsResponse.OngoingTopicReassignment] = ...) -> None: ...

class OffsetDeleteResponse:
    class OffsetDeleteResponsePartition:
        partition_index: int
        error_code: int
        def __init__(self, *, partition_index: int = ..., error_code: int = ...) -> None: ...
    class OffsetDeleteResponseTopic:
        name: str
        partitions: list[OffsetDeleteResponse.OffsetDeleteResponsePartition]
        def __init__(self, *, name: str = ..., partitions: list[OffsetDeleteResponse.OffsetDeleteResponsePartition] = ...) -> None: ...
    error_code: int
    throttle_time_ms: int
    topics: list[OffsetDeleteResponse.OffsetDeleteResponseTopic]
    def __init__(self, *, error_code: int = ..., throttle_time_ms: int = ..., topics: list[OffsetDeleteResponse.OffsetDeleteResponseTopic] = ...) -> None: ...

class DescribeClientQuotasResponse:
    class EntityData:
        entity_type: str
        entity_name: str | None
        def __init__(self, *, entity_type: str = ..., entity_name: str | None = ...) -> None: ...
    class EntryData:
        entity: list[DescribeClientQuotasResponse.EntityData]
        values: list[DescribeClientQuotasResponse.ValueData]
        def __init__(self, *, entity: list[DescribeClientQuotasResponse.EntityData] = ..., values: list[DescribeClientQuotasResponse.ValueData] = ...) -> None: ...
    class ValueData:
        key: str
        value: float
        def __init__(self, *, key: str = ..., value: float = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    entries: list[DescribeClientQuotasResponse.EntryData] | None
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ..., error_message: str | None = ..., entries: list[DescribeClientQuotasResponse.EntryData] | None = ...) -> None: ...

class AlterClientQuotasResponse:
    class EntityData:
        entity_type: str
        entity_name: str | None
        def __init__(self, *, entity_type: str = ..., entity_name: str | None = ...) -> None: ...
    class EntryData:
        error_code: int
        error_message: str | None
        entity: list[AlterClientQuotasResponse.EntityData]
        def __init__(self, *, error_code: int = ..., error_message: str | None = ..., entity: list[AlterClientQuotasResponse.EntityData] = ...) -> None: ...
    throttle_time_ms: int
    entries: list[AlterClientQuotasResponse.EntryData]
    def __init__(self, *, throttle_time_ms: int = ..., entries: list[AlterClientQuotasResponse.EntryData] = ...) -> None: ...

class DescribeUserScramCredentialsResponse:
    class CredentialInfo:
        mechanism: int
        iterations: int
        def __init__(self, *, mechanism: int = ..., iterations: int = ...) -> None: ...
    class DescribeUserScramCredentialsResult:
        user: str
        error_code: int
        error_message: str | None
        credential_infos: list[DescribeUserScramCredentialsResponse.CredentialInfo]
        def __init__(self, *, user: str = ..., error_code: int = ..., error_message: str | None = ..., credential_infos: list[DescribeUserScramCredentialsResponse.CredentialInfo] = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    results: list[DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult]
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ..., error_message: str | None = ..., results: list[DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult] = ...) -> None: ...

class AlterUserScramCredentialsResponse:
    class AlterUserScramCredentialsResult:
        user: str
        error_code: int
        error_message: str | None
        def __init__(self, *, user: str = ..., error_code: int = ..., error_message: str | None = ...) -> None: ...
    throttle_time_ms: int
    results: list[AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult]
    def __init__(self, *, throttle_time_ms: int = ..., results: list[AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult] = ...) -> None: ...

class AlterPartitionResponse:
    class PartitionData:
        partition_index: int
        error_code: int
        leader_id: int
        leader_epoch: int
        isr: list[int]
        leader_recovery_state: int
        partition_epoch: int
        def __init__(self, *, partition_index: int = ..., error_code: int = ..., leader_id: int = ..., leader_epoch: int = ..., isr: list[int] = ..., leader_recovery_state: int = ..., partition_epoch: int = ...) -> None: ...
    class TopicData:
        topic_name: str
        topic_id: uuid.UUID
        partitions: list[AlterPartitionResponse.PartitionData]
        def __init__(self, *, topic_name: str = ..., topic_id: uuid.UUID = ..., partitions: list[AlterPartitionResponse.PartitionData] = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    topics: list[AlterPartitionResponse.TopicData]
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ..., topics: list[AlterPartitionResponse.TopicData] = ...) -> None: ...

class DescribeClusterResponse:
    class DescribeClusterBroker:
        broker_id: int
        host: str
        port: int
        rack: str | None
        def __init__(self, *, broker_id: int = ..., host: str = ..., port: int = ..., rack: str | None = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    endpoint_type: int
    cluster_id: str
    controller_id: int
    brokers: list[DescribeClusterResponse.DescribeClusterBroker]
    cluster_authorized_operations: int
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ..., error_message: str | None = ..., endpoint_type: int = ..., cluster_id: str = ..., controller_id: int = ..., brokers: list[DescribeClusterResponse.DescribeClusterBroker] = ..., cluster_authorized_operations: int = ...) -> None: ...

class DescribeProducersResponse:
    class PartitionResponse:
        partition_index: int
        error_code: int
        error_message: str | None
        active_producers: list[DescribeProducersResponse.ProducerState]
        def __init__(self, *, partition_index: int = ..., error_code: int = ..., error_message: str | None = ..., active_producers: list[DescribeProducersResponse.ProducerState] = ...) -> None: ...
    class ProducerState:
        producer_id: int
        producer_epoch: int
        last_sequence: int
        last_timestamp: int
        coordinator_epoch: int
        current_txn_start_offset: int
        def __init__(self, *, producer_id: int = ..., producer_epoch: int = ..., last_sequence: int = ..., last_timestamp: int = ..., coordinator_epoch: int = ..., current_txn_start_offset: int = ...) -> None: ...
    class TopicResponse:
        name: str
        partitions: list[DescribeProducersResponse.PartitionResponse]
        def __init__(self, *, name: str = ..., partitions: list[DescribeProducersResponse.PartitionResponse] = ...) -> None: ...
    throttle_time_ms: int
    topics: list[DescribeProducersResponse.TopicResponse]
    def __init__(self, *, throttle_time_ms: int = ..., topics: list[DescribeProducersResponse.TopicResponse] = ...) -> None: ...

class DescribeTransactionsResponse:
    class TopicData:
        topic: str
        partitions: list[int]
        def __init__(self, *, topic: str = ..., partitions: list[int] = ...) -> None: ...
    class TransactionState:
        error_code: int
        transactional_id: str
        transaction_state: str
        transaction_timeout_ms: int
        transaction_start_time_ms: int
        producer_id: int
        producer_epoch: int
        topics: list[DescribeTransactionsResponse.TopicData]
        def __init__(self, *, error_code: int = ..., transactional_id: str = ..., transaction_state: str = ..., transaction_timeout_ms: int = ..., transaction_start_time_ms: int = ..., producer_id: int = ..., producer_epoch: int = ..., topics: list[DescribeTransactionsResponse.TopicData] = ...) -> None: ...
    throttle_time_ms: int
    transaction_states: list[DescribeTransactionsResponse.TransactionState]
    def __init__(self, *, throttle_time_ms: int = ..., transaction_states: list[DescribeTransactionsResponse.TransactionState] = ...) -> None: ...

class ListTransactionsResponse:
    class TransactionState:
        transactional_id: str
        producer_id: int
        transaction_state: str
        def __init__(self, *, transactional_id: str = ..., producer_id: int = ..., transaction_state: str = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    unknown_state_filters: list[str]
    transaction_states: list[ListTransactionsResponse.TransactionState]
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ..., unknown_state_filters: list[str] = ..., transaction_states: list[ListTransactionsResponse.TransactionState] = ...) -> None: ...

class ConsumerGroupPositionResponse:
    class GroupPositionPartition:
        partition_index: int
        position: int
        error_code: int
        def __init__(self, *, partition_index: int = ..., position: int = ..., error_code: int = ...) -> None: ...
    class GroupPositionTopic:
        name: str
        partitions: list[ConsumerGroupPositionResponse.GroupPositionPartition]
        def __init__(self, *, name: str = ..., partitions: list[ConsumerGroupPositionResponse.GroupPositionPartition] = ...) -> None: ...
    class PositionRequestTopic:
        name: str
        partition_indexes: list[int]
        def __init__(self, *, name: str = ..., partition_indexes: list[int] = ...) -> None: ...
    class ReportErrorPartition:
        partition_index: int
        error_code: int
        def __init__(self, *, partition_index: int = ..., error_code: int = ...) -> None: ...
    class ReportErrorTopic:
        name: str
        partitions: list[ConsumerGroupPositionResponse.ReportErrorPartition]
        def __init__(self, *, name: str = ..., partitions: list[ConsumerGroupPositionResponse.ReportErrorPartition] = ...) -> None: ...
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    report_errors: list[ConsumerGroupPositionResponse.ReportErrorTopic]
    group_positions: list[ConsumerGroupPositionResponse.GroupPositionTopic]
    position_requests: list[ConsumerGroupPositionResponse.PositionRequestTopic]
    def __init__(self, *, throttle_time_ms: int = ..., error_code: int = ..., error_message: str | None = ..., report_errors: list[ConsumerGroupPositionResponse.ReportErrorTopic] = ..., group_positions: list[ConsumerGroupPositionResponse.GroupPositionTopic] = ..., position_requests: list[ConsumerGroupPositionResponse.PositionRequestTopic] = ...) -> None: ...

class PartitionLeaderEpochsForPartitionsResponse:
    class PartitionLeaderEpoch:
        partition_index: int
        leader_epoch: int
        def __init__(self, *, partition_index: int = ..., leader_epoch: int = ...) -> None: ...
    class ResponsePartition:
        partition_index: int
        error_code: int
        leader_epochs_after_creation: list[PartitionLeaderEpochsForPartitionsResponse.PartitionLeaderEpoch]
        leader_epochs_before_deletion: list[PartitionLeaderEpochsForPartitionsResponse.PartitionLeaderEpoch]
        def __init__(self, *, partition_index: int = ..., error_code: int = ..., leader_epochs_after_creation: list[PartitionLeaderEpochsForPartitionsResponse.PartitionLeaderEpoch] = ..., leader_epochs_before_deletion: list[PartitionLeaderEpochsForPartitionsResponse.PartitionLeaderEpoch] = ...) -> None: ...
    class ResponseTopic:
        name: str
        partitions: list[PartitionLeaderEpochsForPartitionsResponse.ResponsePartition]
        def __init__(self, *, name: str = ..., partitions: list[PartitionLeaderEpochsForPartitionsResponse.ResponsePartition] = ...) -> None: ...
    throttle_time_ms: int
    topics: list[PartitionLeaderEpochsForPartitionsResponse.ResponseTopic]
    def __init__(self, *, throttle_time_ms: int = ..., topics: list[PartitionLeaderEpochsForPartitionsResponse.ResponseTopic] = ...) -> None: ...
