"""Metadata (key 3): brokers, controller, topics and partition leaders/replicas.

A null ``MetadataRequest.topics`` (v1+) means "all topics"; an empty list means none.
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(3, "Metadata", "0-12", "9+", [
    field("Topics", "[]MetadataRequestTopic", "0+", nullable="1+", fields=[
        field("TopicId", "uuid", "10+", ignorable=True),
        field("Name", "string", "0+", nullable="10+"),
    ]),
    field("AllowAutoTopicCreation", "bool", "4+", default=True),
    field("IncludeClusterAuthorizedOperations", "bool", "8-10"),
    field("IncludeTopicAuthorizedOperations", "bool", "8+"),
])

RESPONSE = response(3, "Metadata", "0-12", "9+", [
    field("ThrottleTimeMs", "int32", "3+", ignorable=True),
    field("Brokers", "[]MetadataResponseBroker", "0+", fields=[
        field("NodeId", "int32", "0+", map_key=True),
        field("Host", "string", "0+"),
        field("Port", "int32", "0+"),
        field("Rack", "string", "1+", nullable="1+", default=None, ignorable=True),
    ]),
    field("ClusterId", "string", "2+", nullable="2+", default=None, ignorable=True),
    field("ControllerId", "int32", "1+", default=-1, ignorable=True),
    field("Topics", "[]MetadataResponseTopic", "0+", fields=[
        field("ErrorCode", "int16", "0+"),
        field("Name", "string", "0+", nullable="12+", map_key=True),
        field("TopicId", "uuid", "10+", ignorable=True),
        field("IsInternal", "bool", "1+", default=False, ignorable=True),
        field("Partitions", "[]MetadataResponsePartition", "0+", fields=[
            field("ErrorCode", "int16", "0+"),
            field("PartitionIndex", "int32", "0+"),
            field("LeaderId", "int32", "0+"),
            field("LeaderEpoch", "int32", "7+", default=-1, ignorable=True),
            field("ReplicaNodes", "[]int32", "0+"),
            field("IsrNodes", "[]int32", "0+"),
            field("OfflineReplicas", "[]int32", "5+", ignorable=True),
        ]),
        field("TopicAuthorizedOperations", "int32", "8+", default=-2147483648),
        # KIP-253: the partitions the topic was created with, and those producers use.
        field("InitialPartitionCount", "int32", "9+", tagged="9+", tag=10000, default=-1, ignorable=True,
              extension="KIP-253"),
        field("UndeletedPartitionCount", "int32", "9+", tagged="9+", tag=10001, default=-1, ignorable=True,
              extension="KIP-253"),
    ]),
    field("ClusterAuthorizedOperations", "int32", "8-10", default=-2147483648),
])
