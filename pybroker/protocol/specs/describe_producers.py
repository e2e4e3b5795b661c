"""DescribeProducers (key 61): the active idempotent and transactional producers of partitions,
read from each partition leader's producer state (KIP-664; ``kafka-transactions.sh
describe-producers``).

Per producer: id, epoch, last sequence, last timestamp, the coordinator epoch of its last
transaction marker, and the first offset of its ongoing transaction (-1 when none).

Supported: v0 (flexible).
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(61, "DescribeProducers", "0", "0+", [
    field("Topics", "[]TopicRequest", "0+", fields=[
        field("Name", "string", "0+"),
        field("PartitionIndexes", "[]int32", "0+"),
    ]),
])

RESPONSE = response(61, "DescribeProducers", "0", "0+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("Topics", "[]TopicResponse", "0+", fields=[
        field("Name", "string", "0+"),
        field("Partitions", "[]PartitionResponse", "0+", fields=[
            field("PartitionIndex", "int32", "0+"),
            field("ErrorCode", "int16", "0+"),
            field("ErrorMessage", "string", "0+", nullable="0+", default=None),
            field("ActiveProducers", "[]ProducerState", "0+", fields=[
                field("ProducerId", "int64", "0+"),
                field("ProducerEpoch", "int32", "0+"),
                field("LastSequence", "int32", "0+", default=-1),
                field("LastTimestamp", "int64", "0+", default=-1),
                field("CoordinatorEpoch", "int32", "0+"),
                field("CurrentTxnStartOffset", "int64", "0+", default=-1),
            ]),
        ]),
    ]),
])
