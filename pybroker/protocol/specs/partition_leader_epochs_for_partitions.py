"""PartitionLeaderEpochsForPartitions (key 30002, this project's KIP-253 API): the epoch boundaries of partition changes.

Answers, for each partition asked about, the two maps the controller recorded when the topic's
partition count changed: ``LeaderEpochsAfterCreation`` (for a partition added by an expansion:
the leader epoch each older partition had just before it was bumped; the records of that epoch
and older were partitioned by the old count) and ``LeaderEpochsBeforeDeletion`` (for a partition
marked for deletion by a shrink: the same, for each surviving partition). Empty arrays mean none.

The seed gave one int32 per partition, which cannot carry those maps (research kip-semantics
§1.7 #8), so each map is an array of (partition, epoch). Any broker answers from its metadata
cache; the group coordinator is not involved. Flexible from v0.
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(30002, "PartitionLeaderEpochsForPartitions", "0", "0+", [
    field("Topics", "[]RequestTopic", "0+", fields=[
        field("Name", "string", "0+"),
        field("PartitionIndexes", "[]int32", "0+"),
    ]),
])

RESPONSE = response(30002, "PartitionLeaderEpochsForPartitions", "0", "0+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("Topics", "[]ResponseTopic", "0+", fields=[
        field("Name", "string", "0+"),
        field("Partitions", "[]ResponsePartition", "0+", fields=[
            field("PartitionIndex", "int32", "0+"),
            field("ErrorCode", "int16", "0+"),
            field("LeaderEpochsAfterCreation", "[]PartitionLeaderEpoch", "0+", fields=[
                field("PartitionIndex", "int32", "0+"),
                field("LeaderEpoch", "int32", "0+"),
            ]),
            field("LeaderEpochsBeforeDeletion", "[]PartitionLeaderEpoch", "0+", fields=[
                field("PartitionIndex", "int32", "0+"),
                field("LeaderEpoch", "int32", "0+"),
            ]),
        ]),
    ]),
])
