"""Produce (key 0): write record batches to partitions; the response gives base offsets.

``ProduceRequest.topic_data[].partition_data[].records`` decodes to a memoryview into the frame.
"""

from pybroker.protocol.schema import field, request, response

REQUEST = request(0, "Produce", "0-9", "9+", [
    field("TransactionalId", "string", "3+", nullable="3+", default=None),
    field("Acks", "int16", "0+"),
    field("TimeoutMs", "int32", "0+"),
    field("TopicData", "[]TopicProduceData", "0+", fields=[
        field("Name", "string", "0+", map_key=True),
        field("PartitionData", "[]PartitionProduceData", "0+", fields=[
            field("Index", "int32", "0+"),
            field("Records", "records", "0+", nullable="0+"),
        ]),
        # KIP-253: the count the producer partitioned by (-1, absent: not sent; no check). Not
        # ignorable: a client that relies on the check must not lose it to an older version.
        field("UndeletedPartitionCount", "int32", "9+", tagged="9+", tag=10000, default=-1,
              extension="KIP-253"),
    ]),
])

RESPONSE = response(0, "Produce", "0-9", "9+", [
    field("Responses", "[]TopicProduceResponse", "0+", fields=[
        field("Name", "string", "0+", map_key=True),
        field("PartitionResponses", "[]PartitionProduceResponse", "0+", fields=[
            field("Index", "int32", "0+"),
            field("ErrorCode", "int16", "0+"),
            field("BaseOffset", "int64", "0+"),
            field("LogAppendTimeMs", "int64", "2+", default=-1, ignorable=True),
            field("LogStartOffset", "int64", "5+", default=-1, ignorable=True),
            field("RecordErrors", "[]BatchIndexAndErrorMessage", "8+", ignorable=True, fields=[
                field("BatchIndex", "int32", "8+"),
                field("BatchIndexErrorMessage", "string", "8+", nullable="8+", default=None),
            ]),
            field("ErrorMessage", "string", "8+", nullable="8+", default=None, ignorable=True),
            field("CurrentLeader", "LeaderIdAndEpoch", "10+", tagged="10+", tag=0, fields=[
                field("LeaderId", "int32", "10+", default=-1),
                field("LeaderEpoch", "int32", "10+", default=-1),
            ]),
        ]),
    ]),
    field("ThrottleTimeMs", "int32", "1+", default=0, ignorable=True),
    field("NodeEndpoints", "[]NodeEndpoint", "10+", tagged="10+", tag=0, fields=[
        field("NodeId", "int32", "10+", map_key=True),
        field("Host", "string", "10+"),
        field("Port", "int32", "10+"),
        field("Rack", "string", "10+", nullable="10+", default=None),
    ]),
])
