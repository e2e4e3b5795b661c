"""Fetch (key 1): read record batches from partitions (consumers and follower replicas).

``FetchResponse.responses[].partitions[].records`` encodes from any bytes-like object.
Fields of versions above the supported range (topic ids from v13, replica state from v15, ...)
are declared so the classes already carry them; they are never on the wire here.
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(1, "Fetch", "0-12", "12+", [
    field("ClusterId", "string", "12+", nullable="12+", tagged="12+", tag=0, default=None,
          ignorable=True),
    field("ReplicaId", "int32", "0-14", default=-1),
    field("ReplicaState", "ReplicaState", "15+", tagged="15+", tag=1, fields=[
        field("ReplicaId", "int32", "15+", default=-1),
        field("ReplicaEpoch", "int64", "15+", default=-1),
    ]),
    field("MaxWaitMs", "int32", "0+"),
    field("MinBytes", "int32", "0+"),
    field("MaxBytes", "int32", "3+", default=0x7FFFFFFF, ignorable=True),
    field("IsolationLevel", "int8", "4+", default=0, ignorable=True),
    field("SessionId", "int32", "7+", default=0, ignorable=True),
    field("SessionEpoch", "int32", "7+", default=-1, ignorable=True),
    field("Topics", "[]FetchTopic", "0+", fields=[
        field("Topic", "string", "0-12", ignorable=True),
        field("TopicId", "uuid", "13+", ignorable=True),
        field("Partitions", "[]FetchPartition", "0+", fields=[
            field("Partition", "int32", "0+"),
            field("CurrentLeaderEpoch", "int32", "9+", default=-1, ignorable=True),
            field("FetchOffset", "int64", "0+"),
            field("LastFetchedEpoch", "int32", "12+", default=-1),
            field("LogStartOffset", "int64", "5+", default=-1, ignorable=True),
            field("PartitionMaxBytes", "int32", "0+"),
            field("ReplicaDirectoryId", "uuid", "17+", tagged="17+", tag=0, ignorable=True),
        ]),
        # KIP-253: the count the consumer knows (-1, absent: not sent; no check). Not ignorable:
        # a client that relies on the check must not lose it to an older version.
        field("UndeletedPartitionCount", "int32", "12+", tagged="12+", tag=10000, default=-1,
              extension="KIP-253"),
    ]),
    field("ForgottenTopicsData", "[]ForgottenTopic", "7+", fields=[
        field("Topic", "string", "7-12", ignorable=True),
        field("TopicId", "uuid", "13+", ignorable=True),
        field("Partitions", "[]int32", "7+"),
    ]),
    field("RackId", "string", "11+", default="", ignorable=True),
])

RESPONSE = response(1, "Fetch", "0-12", "12+", [
    field("ThrottleTimeMs", "int32", "1+", ignorable=True),
    field("ErrorCode", "int16", "7+", ignorable=True),
    field("SessionId", "int32", "7+", default=0),
    field("Responses", "[]FetchableTopicResponse", "0+", fields=[
        field("Topic", "string", "0-12", ignorable=True),
        field("TopicId", "uuid", "13+", ignorable=True),
        field("Partitions", "[]PartitionData", "0+", fields=[
            field("PartitionIndex", "int32", "0+"),
            field("ErrorCode", "int16", "0+"),
            field("HighWatermark", "int64", "0+"),
            field("LastStableOffset", "int64", "4+", default=-1, ignorable=True),
            field("LogStartOffset", "int64", "5+", default=-1, ignorable=True),
            field("DivergingEpoch", "EpochEndOffset", "12+", tagged="12+", tag=0, fields=[
                field("Epoch", "int32", "12+", default=-1),
                field("EndOffset", "int64", "12+", default=-1),
            ]),
            field("CurrentLeader", "LeaderIdAndEpoch", "12+", tagged="12+", tag=1, fields=[
                field("LeaderId", "int32", "12+", default=-1),
                field("LeaderEpoch", "int32", "12+", default=-1),
            ]),
            field("SnapshotId", "SnapshotId", "12+", tagged="12+", tag=2, fields=[
                field("EndOffset", "int64", "0+", default=-1),
                field("Epoch", "int32", "0+", default=-1),
            ]),
            field("AbortedTransactions", "[]AbortedTransaction", "4+", nullable="4+",
                  ignorable=True, fields=[
                      field("ProducerId", "int64", "4+"),
                      field("FirstOffset", "int64", "4+"),
                  ]),
            field("PreferredReadReplica", "int32", "11+", default=-1),
            field("Records", "records", "0+", nullable="0+"),
        ]),
    ]),
    field("NodeEndpoints", "[]NodeEndpoint", "16+", tagged="16+", tag=0, fields=[
        field("NodeId", "int32", "16+", map_key=True),
        field("Host", "string", "16+"),
        field("Port", "int32", "16+"),
        field("Rack", "string", "16+", nullable="16+", default=None),
    ]),
])
