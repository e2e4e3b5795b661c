"""AddOffsetsToTxn (key 25): a transactional producer tells its coordinator it will commit a
group's offsets in the transaction (the group's ``__consumer_offsets`` partition joins it)."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(25, "AddOffsetsToTxn", "0-3", "3+", [
    field("TransactionalId", "string", "0+"),
    field("ProducerId", "int64", "0+"),
    field("ProducerEpoch", "int16", "0+"),
    field("GroupId", "string", "0+"),
])

RESPONSE = response(25, "AddOffsetsToTxn", "0-3", "3+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("ErrorCode", "int16", "0+"),
])
