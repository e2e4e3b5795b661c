"""EndTxn (key 26): a transactional producer commits or aborts its ongoing transaction."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(26, "EndTxn", "0-3", "3+", [
    field("TransactionalId", "string", "0+"),
    field("ProducerId", "int64", "0+"),
    field("ProducerEpoch", "int16", "0+"),
    field("Committed", "bool", "0+"),
])

RESPONSE = response(26, "EndTxn", "0-3", "3+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("ErrorCode", "int16", "0+"),
    field("ProducerId", "int64", "5+", default=-1, ignorable=True),
    field("ProducerEpoch", "int16", "5+", default=-1, ignorable=True),
])
