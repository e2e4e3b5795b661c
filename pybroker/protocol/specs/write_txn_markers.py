"""WriteTxnMarkers (key 27): a transaction coordinator has partition leaders append the commit or
abort marker of a transaction (inter-broker)."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(27, "WriteTxnMarkers", "0-1", "1+", [
    field("Markers", "[]WritableTxnMarker", "0+", fields=[
        field("ProducerId", "int64", "0+"),
        field("ProducerEpoch", "int16", "0+"),
        field("TransactionResult", "bool", "0+"),
        field("Topics", "[]WritableTxnMarkerTopic", "0+", fields=[
            field("Name", "string", "0+"),
            field("PartitionIndexes", "[]int32", "0+"),
        ]),
        field("CoordinatorEpoch", "int32", "0+"),
    ]),
])

RESPONSE = response(27, "WriteTxnMarkers", "0-1", "1+", [
    field("Markers", "[]WritableTxnMarkerResult", "0+", fields=[
        field("ProducerId", "int64", "0+"),
        field("Topics", "[]WritableTxnMarkerTopicResult", "0+", fields=[
            field("Name", "string", "0+"),
            field("Partitions", "[]WritableTxnMarkerPartitionResult", "0+", fields=[
                field("PartitionIndex", "int32", "0+"),
                field("ErrorCode", "int16", "0+"),
            ]),
        ]),
    ]),
])
