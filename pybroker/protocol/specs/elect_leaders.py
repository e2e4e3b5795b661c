"""ElectLeaders (key 43): run a leader election for partitions, preferred or unclean.

An administrator's client (``Admin.electLeaders``, ``kafka-leader-election.sh``) sends it to the
controller. ``ElectionType`` 0 moves leadership back to each partition's preferred (first
listed) replica when that replica is in sync; 1 elects any live replica, even outside the ISR,
for a partition that has no leader at all (data may be lost). A null ``TopicPartitions`` means
every partition. The response reports a result per partition; v1+ adds a top-level error code.

Supported: v0-2 (v1 adds ``ElectionType``; v2 is flexible).
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(43, "ElectLeaders", "0-2", "2+", [
    field("ElectionType", "int8", "1+"),
    field("TopicPartitions", "[]TopicPartitions", "0+", nullable="0+", fields=[
        field("Topic", "string", "0+", map_key=True),
        field("Partitions", "[]int32", "0+"),
    ]),
    field("TimeoutMs", "int32", "0+", default=60000),
])

RESPONSE = response(43, "ElectLeaders", "0-2", "2+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("ErrorCode", "int16", "1+"),
    field("ReplicaElectionResults", "[]ReplicaElectionResult", "0+", fields=[
        field("Topic", "string", "0+"),
        field("PartitionResult", "[]PartitionResult", "0+", fields=[
            field("PartitionId", "int32", "0+"),
            field("ErrorCode", "int16", "0+"),
            field("ErrorMessage", "string", "0+", nullable="0+"),
        ]),
    ]),
])
