"""CreateTopics (key 19): create topics with a partition count/replication factor or assignments."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(19, "CreateTopics", "0-7", "5+", [
    field("Topics", "[]CreatableTopic", "0+", fields=[
        field("Name", "string", "0+", map_key=True),
        field("NumPartitions", "int32", "0+"),
        field("ReplicationFactor", "int16", "0+"),
        field("Assignments", "[]CreatableReplicaAssignment", "0+", fields=[
            field("PartitionIndex", "int32", "0+", map_key=True),
            field("BrokerIds", "[]int32", "0+"),
        ]),
        field("Configs", "[]CreatableTopicConfig", "0+", fields=[
            field("Name", "string", "0+", map_key=True),
            field("Value", "string", "0+", nullable="0+"),
        ]),
    ]),
    field("timeoutMs", "int32", "0+", default=60000),
    field("validateOnly", "bool", "1+", default=False),
])

RESPONSE = response(19, "CreateTopics", "0-7", "5+", [
    field("ThrottleTimeMs", "int32", "2+", ignorable=True),
    field("Topics", "[]CreatableTopicResult", "0+", fields=[
        field("Name", "string", "0+", map_key=True),
        field("TopicId", "uuid", "7+", ignorable=True),
        field("ErrorCode", "int16", "0+"),
        field("ErrorMessage", "string", "1+", nullable="0+", ignorable=True),
        field("TopicConfigErrorCode", "int16", "5+", tagged="5+", tag=0, ignorable=True),
        field("NumPartitions", "int32", "5+", default=-1, ignorable=True),
        field("ReplicationFactor", "int16", "5+", default=-1, ignorable=True),
        field("Configs", "[]CreatableTopicConfigs", "5+", nullable="5+", ignorable=True, fields=[
            field("Name", "string", "5+"),
            field("Value", "string", "5+", nullable="5+"),
            field("ReadOnly", "bool", "5+"),
            field("ConfigSource", "int8", "5+", default=-1, ignorable=True),
            field("IsSensitive", "bool", "5+"),
        ]),
    ]),
])
