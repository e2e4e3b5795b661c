"""OffsetCommit (key 8): a group member stores its consumed offsets with the coordinator."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(8, "OffsetCommit", "2-8", "8+", [
    field("GroupId", "string", "0+"),
    field("GenerationIdOrMemberEpoch", "int32", "1+", default=-1, ignorable=True),
    field("MemberId", "string", "1+", ignorable=True),
    field("GroupInstanceId", "string", "7+", nullable="7+", default=None),
    field("RetentionTimeMs", "int64", "2-4", default=-1, ignorable=True),
    field("Topics", "[]OffsetCommitRequestTopic", "0+", fields=[
        field("Name", "string", "0+"),
        field("Partitions", "[]OffsetCommitRequestPartition", "0+", fields=[
            field("PartitionIndex", "int32", "0+"),
            field("CommittedOffset", "int64", "0+"),
            field("CommittedLeaderEpoch", "int32", "6+", default=-1, ignorable=True),
            field("CommitTimestamp", "int64", "1", default=-1),
            field("CommittedMetadata", "string", "0+", nullable="0+"),
        ]),
    ]),
])

RESPONSE = response(8, "OffsetCommit", "2-8", "8+", [
    field("ThrottleTimeMs", "int32", "3+", ignorable=True),
    field("Topics", "[]OffsetCommitResponseTopic", "0+", fields=[
        field("Name", "string", "0+"),
        field("Partitions", "[]OffsetCommitResponsePartition", "0+", fields=[
            field("PartitionIndex", "int32", "0+"),
            field("ErrorCode", "int16", "0+"),
        ]),
    ]),
])
