"""UpdateMetadata (key 6): the ZooKeeper-mode controller pushes cluster metadata to brokers.

The controller sends it to every live broker whenever something a broker needs for answering
clients changes: the live brokers with their listener endpoints and racks, and for each partition
its leader, leader epoch, ISR, replicas and offline replicas. The broker replaces or updates its
metadata cache (what its Metadata, FindCoordinator and similar answers are built from); a
partition whose leader is -2 is being deleted. The response is a single error code.

Supported: v6 (the first flexible version) and v7, which adds topic ids. Fields of other
versions (the v0 single host/port, v0-4's ungrouped partition list, v8's migration fields) are
declared so the classes carry them; they are never on the wire here.
``UpdateMetadataPartitionState`` is one of Kafka's common structs, declared once and used at both
places.
"""

from pybroker.protocol.schema import field, request, response, struct

_LEADER_EPOCH = struct("PartitionLeaderEpoch", [
    field("PartitionIndex", "int32", "0+"),
    field("LeaderEpoch", "int32", "0+"),
])

_PARTITION_STATE = struct("UpdateMetadataPartitionState", [
    field("TopicName", "string", "0-4", ignorable=True),
    field("PartitionIndex", "int32", "0+"),
    field("ControllerEpoch", "int32", "0+"),
    field("Leader", "int32", "0+"),
    field("LeaderEpoch", "int32", "0+"),
    field("Isr", "[]int32", "0+"),
    field("ZkVersion", "int32", "0+"),
    field("Replicas", "[]int32", "0+"),
    field("OfflineReplicas", "[]int32", "4+", ignorable=True),
    # KIP-253's epoch boundaries of the partition (empty: none), for the brokers' metadata caches.
    field("LeaderEpochsAfterCreation", "[]PartitionLeaderEpoch", "6+", tagged="6+", tag=10000, ignorable=True,
          extension="KIP-253", struct=_LEADER_EPOCH),
    field("LeaderEpochsBeforeDeletion", "[]PartitionLeaderEpoch", "6+", tagged="6+", tag=10001, ignorable=True,
          extension="KIP-253", struct=_LEADER_EPOCH),
])

REQUEST = request(6, "UpdateMetadata", "6-7", "6+", [
    field("ControllerId", "int32", "0+"),
    field("isKRaftController", "bool", "8+", default=False),
    field("Type", "int8", "8+", tagged="8+", tag=0, default=0),
    field("ControllerEpoch", "int32", "0+"),
    field("BrokerEpoch", "int64", "5+", default=-1, ignorable=True),
    field("UngroupedPartitionStates", "[]UpdateMetadataPartitionState", "0-4",
          struct=_PARTITION_STATE),
    field("TopicStates", "[]UpdateMetadataTopicState", "5+", fields=[
        field("TopicName", "string", "5+"),
        field("TopicId", "uuid", "7+", ignorable=True),
        field("PartitionStates", "[]UpdateMetadataPartitionState", "5+", struct=_PARTITION_STATE),
        # KIP-253's counts of the topic, for the brokers' metadata caches.
        field("InitialPartitionCount", "int32", "6+", tagged="6+", tag=10000, default=-1, ignorable=True,
              extension="KIP-253"),
        field("UndeletedPartitionCount", "int32", "6+", tagged="6+", tag=10001, default=-1, ignorable=True,
              extension="KIP-253"),
    ]),
    field("LiveBrokers", "[]UpdateMetadataBroker", "0+", fields=[
        field("Id", "int32", "0+"),
        field("V0Host", "string", "0", ignorable=True),
        field("V0Port", "int32", "0", ignorable=True),
        field("Endpoints", "[]UpdateMetadataEndpoint", "1+", ignorable=True, fields=[
            field("Port", "int32", "1+"),
            field("Host", "string", "1+"),
            field("Listener", "string", "3+", ignorable=True),
            field("SecurityProtocol", "int16", "1+"),
        ]),
        field("Rack", "string", "2+", nullable="0+", ignorable=True),
    ]),
])

RESPONSE = response(6, "UpdateMetadata", "6-7", "6+", [
    field("ErrorCode", "int16", "0+"),
])
