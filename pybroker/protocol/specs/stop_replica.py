"""StopReplica (key 5): the ZooKeeper-mode controller tells a broker to stop replicas.

The controller sends it to a broker that must stop serving and fetching some partitions: replicas
moved away by a reassignment or belonging to a deleted topic (``DeletePartition`` true: remove the
log too), or, while a broker shuts down in a controlled way, the partitions it follows (kept on
disk). The broker answers with an error per partition.

Supported: v3 only. It lists partitions per topic with each one's leader epoch, so that a broker
can refuse a request older than what it knows (FENCED_LEADER_EPOCH), and moves the delete flag
from the whole request (v0-2) to each partition. Fields of other versions are declared so the
classes carry them; they are never on the wire here.
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(5, "StopReplica", "3", "2+", [
    field("ControllerId", "int32", "0+"),
    field("isKRaftController", "bool", "4+", default=False),
    field("ControllerEpoch", "int32", "0+"),
    field("BrokerEpoch", "int64", "1+", default=-1, ignorable=True),
    field("DeletePartitions", "bool", "0-2"),
    field("UngroupedPartitions", "[]StopReplicaPartitionV0", "0", fields=[
        field("TopicName", "string", "0"),
        field("PartitionIndex", "int32", "0"),
    ]),
    field("Topics", "[]StopReplicaTopicV1", "1-2", fields=[
        field("Name", "string", "1-2"),
        field("PartitionIndexes", "[]int32", "1-2"),
    ]),
    field("TopicStates", "[]StopReplicaTopicState", "3+", fields=[
        field("TopicName", "string", "3+"),
        field("PartitionStates", "[]StopReplicaPartitionState", "3+", fields=[
            field("PartitionIndex", "int32", "3+"),
            field("LeaderEpoch", "int32", "3+", default=-1),
            field("DeletePartition", "bool", "3+"),
        ]),
    ]),
])

RESPONSE = response(5, "StopReplica", "3", "2+", [
    field("ErrorCode", "int16", "0+"),
    field("PartitionErrors", "[]StopReplicaPartitionError", "0+", fields=[
        field("TopicName", "string", "0+"),
        field("PartitionIndex", "int32", "0+"),
        field("ErrorCode", "int16", "0+"),
    ]),
])
