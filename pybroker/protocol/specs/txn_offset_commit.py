"""TxnOffsetCommit (key 28): a transactional producer commits a group's offsets inside its
transaction; they become visible when the transaction commits (KIP-98; v3 adds KIP-447's member
fields so the coordinator can fence a zombie consumer generation)."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(28, "TxnOffsetCommit", "0-3", "3+", [
    field("TransactionalId", "string", "0+"),
    field("GroupId", "string", "0+"),
    field("ProducerId", "int64", "0+"),
    field("ProducerEpoch", "int16", "0+"),
    field("GenerationId", "int32", "3+", default=-1),
    field("MemberId", "string", "3+", default=""),
    field("GroupInstanceId", "string", "3+", nullable="3+", default=None),
    field("Topics", "[]TxnOffsetCommitRequestTopic", "0+", fields=[
        field("Name", "string", "0+"),
        field("Partitions", "[]TxnOffsetCommitRequestPartition", "0+", fields=[
            field("PartitionIndex", "int32", "0+"),
            field("CommittedOffset", "int64", "0+"),
            field("CommittedLeaderEpoch", "int32", "2+", default=-1, ignorable=True),
            field("CommittedMetadata", "string", "0+", nullable="0+"),
        ]),
    ]),
])

RESPONSE = response(28, "TxnOffsetCommit", "0-3", "3+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("Topics", "[]TxnOffsetCommitResponseTopic", "0+", fields=[
        field("Name", "string", "0+"),
        field("Partitions", "[]TxnOffsetCommitResponsePartition", "0+", fields=[
            field("PartitionIndex", "int32", "0+"),
            field("ErrorCode", "int16", "0+"),
        ]),
    ]),
])
