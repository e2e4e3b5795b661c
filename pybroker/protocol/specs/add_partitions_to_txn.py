"""AddPartitionsToTxn (key 24): a transactional producer registers the partitions it is about to
write with its transaction coordinator. v0-3 carry one transaction (clients); v4 carries several,
each possibly ``VerifyOnly`` (brokers checking a partition is in a transaction, KIP-890)."""

from pybroker.protocol.schema import field, request, response, struct

_TOPIC = struct("AddPartitionsToTxnTopic", [
    field("Name", "string", "0+", map_key=True),
    field("Partitions", "[]int32", "0+"),
])

_TOPIC_RESULT = struct("AddPartitionsToTxnTopicResult", [
    field("Name", "string", "0+", map_key=True),
    field("ResultsByPartition", "[]AddPartitionsToTxnPartitionResult", "0+", fields=[
        field("PartitionIndex", "int32", "0+", map_key=True),
        field("PartitionErrorCode", "int16", "0+"),
    ]),
])

REQUEST = request(24, "AddPartitionsToTxn", "0-4", "3+", [
    field("Transactions", "[]AddPartitionsToTxnTransaction", "4+", fields=[
        field("TransactionalId", "string", "4+", map_key=True),
        field("ProducerId", "int64", "4+"),
        field("ProducerEpoch", "int16", "4+"),
        field("VerifyOnly", "bool", "4+", default=False),
        field("Topics", "[]AddPartitionsToTxnTopic", "4+", struct=_TOPIC),
    ]),
    field("V3AndBelowTransactionalId", "string", "0-3"),
    field("V3AndBelowProducerId", "int64", "0-3"),
    field("V3AndBelowProducerEpoch", "int16", "0-3"),
    field("V3AndBelowTopics", "[]AddPartitionsToTxnTopic", "0-3", struct=_TOPIC),
])

RESPONSE = response(24, "AddPartitionsToTxn", "0-4", "3+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("ErrorCode", "int16", "4+", ignorable=True),
    field("ResultsByTransaction", "[]AddPartitionsToTxnResult", "4+", fields=[
        field("TransactionalId", "string", "4+", map_key=True),
        field("TopicResults", "[]AddPartitionsToTxnTopicResult", "4+", struct=_TOPIC_RESULT),
    ]),
    field("ResultsByTopicV3AndBelow", "[]AddPartitionsToTxnTopicResult", "0-3", struct=_TOPIC_RESULT),
])
