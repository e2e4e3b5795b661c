"""InitProducerId (key 22): hand an idempotent / transactional producer its id and epoch."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(22, "InitProducerId", "0-4", "2+", [
    field("TransactionalId", "string", "0+", nullable="0+"),
    field("TransactionTimeoutMs", "int32", "0+"),
    field("ProducerId", "int64", "3+", default=-1),
    field("ProducerEpoch", "int16", "3+", default=-1),
])

RESPONSE = response(22, "InitProducerId", "0-4", "2+", [
    field("ThrottleTimeMs", "int32", "0+", ignorable=True),
    field("ErrorCode", "int16", "0+"),
    field("ProducerId", "int64", "0+", default=-1),
    field("ProducerEpoch", "int16", "0+"),
])
