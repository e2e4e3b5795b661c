"""ListPartitionReassignments (key 46): the partition reassignments under way (KIP-455).

Sent to the controller (``Admin.listPartitionReassignments``, ``kafka-reassign-partitions.sh
--list`` and ``--verify``). A null topic list asks for every reassignment; otherwise only the
partitions named that are being reassigned are answered, each with its current replica set
(target replicas first, then the original ones) and the replicas being added and removed.

Supported: v0 (flexible).
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(46, "ListPartitionReassignments", "0", "0+", [
    field("TimeoutMs", "int32", "0+", default=60000),
    field("Topics", "[]ListPartitionReassignmentsTopics", "0+", nullable="0+", default=None, fields=[
        field("Name", "string", "0+"),
        field("PartitionIndexes", "[]int32", "0+"),
    ]),
])

RESPONSE = response(46, "ListPartitionReassignments", "0", "0+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("ErrorCode", "int16", "0+"),
    field("ErrorMessage", "string", "0+", nullable="0+"),
    field("Topics", "[]OngoingTopicReassignment", "0+", fields=[
        field("Name", "string", "0+"),
        field("Partitions", "[]OngoingPartitionReassignment", "0+", fields=[
            field("PartitionIndex", "int32", "0+"),
            field("Replicas", "[]int32", "0+"),
            field("AddingReplicas", "[]int32", "0+"),
            field("RemovingReplicas", "[]int32", "0+"),
        ]),
    ]),
])
