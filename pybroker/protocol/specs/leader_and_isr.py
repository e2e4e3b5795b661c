"""LeaderAndIsr (key 4): the ZooKeeper-mode controller assigns partition roles to a broker.

The active controller sends it to every broker that holds a replica of a partition whose state it
changed (a new leader, a new ISR or replica set, a new partition, a broker coming back): for each
partition, the leader, its epoch, the in-sync and assigned replicas and the partition epoch (the
ZooKeeper version of the partition's state). The broker makes itself leader or follower of each
partition (a follower starts fetching from the leader named in ``LiveLeaders``), ignores states
whose leader epoch is older than the one it has, and answers with an error per partition.

Supported: v4 (the first flexible version) and v5, which adds topic ids and the request ``Type``
(0 unknown, 1 incremental, 2 full: every partition the broker should host) and reports the
response's errors per topic id. ``LeaderAndIsrPartitionState`` is one of Kafka's common structs:
v0-1 list partition states ungrouped, v2+ per topic; it is declared once and used at both places.
Fields of other versions are declared so the classes carry them; they are never on the wire here.
"""

from pybroker.protocol.schema import field, request, response, struct

_PARTITION_STATE = struct("LeaderAndIsrPartitionState", [
    field("TopicName", "string", "0-1", ignorable=True),
    field("PartitionIndex", "int32", "0+"),
    field("ControllerEpoch", "int32", "0+"),
    field("Leader", "int32", "0+"),
    field("LeaderEpoch", "int32", "0+"),
    field("Isr", "[]int32", "0+"),
    field("PartitionEpoch", "int32", "0+"),
    field("Replicas", "[]int32", "0+"),
    field("AddingReplicas", "[]int32", "3+", ignorable=True),
    field("RemovingReplicas", "[]int32", "3+", ignorable=True),
    field("IsNew", "bool", "1+", default=False, ignorable=True),
    field("LeaderRecoveryState", "int8", "6+", default=0),
])

REQUEST = request(4, "LeaderAndIsr", "4-5", "4+", [
    field("ControllerId", "int32", "0+"),
    field("isKRaftController", "bool", "7+", default=False),
    field("ControllerEpoch", "int32", "0+"),
    field("BrokerEpoch", "int64", "2+", default=-1, ignorable=True),
    field("Type", "int8", "5+"),
    field("UngroupedPartitionStates", "[]LeaderAndIsrPartitionState", "0-1",
          struct=_PARTITION_STATE),
    field("TopicStates", "[]LeaderAndIsrTopicState", "2+", fields=[
        field("TopicName", "string", "2+"),
        field("TopicId", "uuid", "5+", ignorable=True),
        field("PartitionStates", "[]LeaderAndIsrPartitionState", "2+", struct=_PARTITION_STATE),
        # KIP-253: the count producers partition the topic by, adopted by a leader together with
        # the leader epoch of the same request (its Produce/Fetch check).
        field("UndeletedPartitionCount", "int32", "4+", tagged="4+", tag=10000, default=-1, ignorable=True,
              extension="KIP-253"),
    ]),
    field("LiveLeaders", "[]LeaderAndIsrLiveLeader", "0+", fields=[
        field("BrokerId", "int32", "0+"),
        field("HostName", "string", "0+"),
        field("Port", "int32", "0+"),
    ]),
])

_PARTITION_ERROR = struct("LeaderAndIsrPartitionError", [
    field("TopicName", "string", "0-4", ignorable=True),
    field("PartitionIndex", "int32", "0+"),
    field("ErrorCode", "int16", "0+"),
])

RESPONSE = response(4, "LeaderAndIsr", "4-5", "4+", [
    field("ErrorCode", "int16", "0+"),
    field("PartitionErrors", "[]LeaderAndIsrPartitionError", "0-4", struct=_PARTITION_ERROR),
    field("Topics", "[]LeaderAndIsrTopicError", "5+", fields=[
        field("TopicId", "uuid", "5+", map_key=True),
        field("PartitionErrors", "[]LeaderAndIsrPartitionError", "5+", struct=_PARTITION_ERROR),
    ]),
])
