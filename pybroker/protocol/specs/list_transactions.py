"""ListTransactions (key 66): an admin client lists the transactions a broker coordinates,
filtered by state and producer id (KIP-664)."""

from pybroker.protocol.schema import field, request, response

REQUEST = request(66, "ListTransactions", "0", "0+", [
    field("StateFilters", "[]string", "0+"),
    field("ProducerIdFilters", "[]int64", "0+"),
    field("DurationFilter", "int64", "1+", default=-1),
])

RESPONSE = response(66, "ListTransactions", "0", "0+", [
    field("ThrottleTimeMs", "int32", "0+"),
    field("ErrorCode", "int16", "0+"),
    field("UnknownStateFilters", "[]string", "0+"),
    field("TransactionStates", "[]TransactionState", "0+", fields=[
        field("TransactionalId", "string", "0+"),
        field("ProducerId", "int64", "0+"),
        field("TransactionState", "string", "0+"),
    ]),
])
