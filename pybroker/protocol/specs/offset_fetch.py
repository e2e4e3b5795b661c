"""OffsetFetch (key 9): read a group's committed offsets (one group up to v7, batched from v8).

A null ``topics`` (v2+) asks for every partition the group has committed.
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(9, "OffsetFetch", "1-8", "6+", [
    field("GroupId", "string", "0-7"),
    field("Topics", "[]OffsetFetchRequestTopic", "0-7", nullable="2-7", fields=[
        field("Name", "string", "0-7"),
        field("PartitionIndexes", "[]int32", "0-7"),
    ]),
    field("Groups", "[]OffsetFetchRequestGroup", "8+", fields=[
        field("GroupId", "string", "8+"),
        field("MemberId", "string", "9+", nullable="9+", default=None, ignorable=True),
        field("MemberEpoch", "int32", "9+", default=-1, ignorable=True),
        field("Topics", "[]OffsetFetchRequestTopics", "8+", nullable="8+", fields=[
            field("Name", "string", "8+"),
            field("PartitionIndexes", "[]int32", "8+"),
        ]),
    ]),
    field("RequireStable", "bool", "7+", default=False),
])

RESPONSE = response(9, "OffsetFetch", "1-8", "6+", [
    field("ThrottleTimeMs", "int32", "3+", ignorable=True),
    field("Topics", "[]OffsetFetchResponseTopic", "0-7", fields=[
        field("Name", "string", "0-7"),
        field("Partitions", "[]OffsetFetchResponsePartition", "0-7", fields=[
            field("PartitionIndex", "int32", "0-7"),
            field("CommittedOffset", "int64", "0-7"),
            field("CommittedLeaderEpoch", "int32", "5-7", default=-1, ignorable=True),
            field("Metadata", "string", "0-7", nullable="0-7"),
            field("ErrorCode", "int16", "0-7"),
        ]),
    ]),
    field("ErrorCode", "int16", "2-7", default=0, ignorable=True),
    field("Groups", "[]OffsetFetchResponseGroup", "8+", fields=[
        field("GroupId", "string", "8+"),
        field("Topics", "[]OffsetFetchResponseTopics", "8+", fields=[
            field("Name", "string", "8+"),
            field("Partitions", "[]OffsetFetchResponsePartitions", "8+", fields=[
                field("PartitionIndex", "int32", "8+"),
                field("CommittedOffset", "int64", "8+"),
                field("CommittedLeaderEpoch", "int32", "8+", default=-1, ignorable=True),
                field("Metadata", "string", "8+", nullable="8+"),
                field("ErrorCode", "int16", "8+"),
            ]),
        ]),
        field("ErrorCode", "int16", "8+", default=0),
    ]),
])
