"""AlterPartition (key 56, formerly AlterIsr): a partition leader asks to change its ISR.

The leader of a partition sends it to the controller when a follower should leave the ISR (it
fell too far behind) or join it again (it caught up), instead of writing the new ISR itself. Each
entry carries the leader epoch and the partition epoch the leader based its proposal on; the
controller rejects a stale one, otherwise commits the new state and answers with it (leader,
leader epoch, ISR, partition epoch), which the leader then adopts.

Supported: v0 and v1, which adds ``LeaderRecoveryState`` (set after an unclean election until the
new leader has recovered). Every version is flexible. v2's topic ids and v3's ISR entries with
broker epochs are declared so the classes carry them; they are never on the wire here.
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(56, "AlterPartition", "0-1", "0+", [
    field("BrokerId", "int32", "0+"),
    field("BrokerEpoch", "int64", "0+", default=-1),
    field("Topics", "[]TopicData", "0+", fields=[
        field("TopicName", "string", "0-1", ignorable=True),
        field("TopicId", "uuid", "2+", ignorable=True),
        field("Partitions", "[]PartitionData", "0+", fields=[
            field("PartitionIndex", "int32", "0+"),
            field("LeaderEpoch", "int32", "0+"),
            field("NewIsr", "[]int32", "0-2"),
            field("NewIsrWithEpochs", "[]BrokerState", "3+", fields=[
                field("BrokerId", "int32", "3+"),
                field("BrokerEpoch", "int64", "3+", default=-1),
            ]),
            field("LeaderRecoveryState", "int8", "1+", default=0),
            field("PartitionEpoch", "int32", "0+"),
        ]),
    ]),
])

RESPONSE = response(56, "AlterPartition", "0-1", "0+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("ErrorCode", "int16", "0+"),
    field("Topics", "[]TopicData", "0+", fields=[
        field("TopicName", "string", "0-1", ignorable=True),
        field("TopicId", "uuid", "2+", ignorable=True),
        field("Partitions", "[]PartitionData", "0+", fields=[
            field("PartitionIndex", "int32", "0+"),
            field("ErrorCode", "int16", "0+"),
            field("LeaderId", "int32", "0+"),
            field("LeaderEpoch", "int32", "0+"),
            field("Isr", "[]int32", "0+"),
            field("LeaderRecoveryState", "int8", "1+", default=0, ignorable=True),
            field("PartitionEpoch", "int32", "0+"),
        ]),
    ]),
])
