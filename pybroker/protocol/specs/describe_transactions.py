"""DescribeTransactions (key 65): an admin client reads the state of transactional ids from
their coordinators (KIP-664)."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(65, "DescribeTransactions", "0", "0+", [
    field("TransactionalIds", "[]string", "0+"),
])

RESPONSE = response(65, "DescribeTransactions", "0", "0+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("TransactionStates", "[]TransactionState", "0+", fields=[
        field("ErrorCode", "int16", "0+"),
        field("TransactionalId", "string", "0+"),
        field("TransactionState", "string", "0+"),
        field("TransactionTimeoutMs", "int32", "0+"),
        field("TransactionStartTimeMs", "int64", "0+"),
        field("ProducerId", "int64", "0+"),
        field("ProducerEpoch", "int16", "0+"),
        field("Topics", "[]TopicData", "0+", fields=[
            field("Topic", "string", "0+", map_key=True),
            field("Partitions", "[]int32", "0+"),
        ]),
    ]),
])
