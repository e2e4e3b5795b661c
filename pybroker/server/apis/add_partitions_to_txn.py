"""AddPartitionsToTxn (24): a transactional producer adds partitions to its transaction (v0-3), or
partition leaders check that partitions are in transactions (v4, several transactions, KIP-890).

For each transaction: if any partition's topic is unknown, those partitions answer
UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED (nothing is added), as Kafka
does; otherwise the coordinator adds them (every partition gets the one error it answers;
PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2), or, for a v4 transaction with VerifyOnly,
answers per partition whether it is in the producer's ongoing transaction without changing
anything (``TransactionCoordinator.handle_verify_partitions_in_transaction``). The response is
sent once every transaction has its answer.

Authorization, as Kafka's ``handleAddPartitionsToTxnRequest``: v4 (from brokers) needs
CLUSTER_ACTION on the cluster (else a top-level CLUSTER_AUTHORIZATION_FAILED); v0-3 (from
clients) need WRITE on the transactional id (else every partition answers
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then WRITE on each non-internal topic (internal topics are
never authorized): refused partitions answer TOPIC_AUTHORIZATION_FAILED, before the unknown ones,
and the rest OPERATION_NOT_ATTEMPTED.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pybroker.common.errors import ErrorCode
from pybroker.common.topic import INTERNAL_TOPICS
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
VERSIONS = (0, 4)
LAST_CLIENT_VERSION = 3
AUTHORIZES = frozenset({
    (AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER),
    (AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID),
    (AclOperation.WRITE, ResourceType.TOPIC),
})

_Response = AddPartitionsToTxnResponse
TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult


def handle(
    ctx: RequestContext, request: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse | asyncio.Future[AddPartitionsToTxnResponse]:
    version = ctx.api_version
    if version > LAST_CLIENT_VERSION and not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return error_response(request, version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    transactions = _transactions(request, version)
    results: dict[str, list[TopicResult]] = {}
    future: asyncio.Future[AddPartitionsToTxnResponse] = asyncio.get_running_loop().create_future()

    def add_result(transactional_id: str, topic_results: list[TopicResult]) -> None:
        results[transactional_id] = topic_results
        if len(results) == len(transactions) and not future.done():
            future.set_result(_build(version, transactions, results))

    if not transactions:
        return _build(version, transactions, results)
    coordinator = ctx.services.transaction_coordinator
    cache = ctx.services.metadata_cache
    for txn in transactions:
        transactional_id = txn.transactional_id
        partitions = _partitions(txn.topics)
        if version <= LAST_CLIENT_VERSION and not ctx.authorize(
            AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
        ):
            add_result(transactional_id, _topic_results(
                dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)))
            continue
        # Clients (v0-3) need WRITE on the topics; internal topics' partitions are never authorized.
        denied = set() if version > LAST_CLIENT_VERSION else {
            name for name in dict.fromkeys(tp.topic for tp in partitions)
            if name in INTERNAL_TOPICS or not ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, name)
        }
        refused = [tp for tp in partitions if tp.topic in denied]
        unknown = [tp for tp in partitions if tp not in refused and not cache.contains(tp)]
        if refused or unknown:
            errors = {tp: ErrorCode.OPERATION_NOT_ATTEMPTED for tp in partitions}
            errors.update(dict.fromkeys(unknown, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            errors.update(dict.fromkeys(refused, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            add_result(transactional_id, _topic_results(errors))
        elif version >= 4 and txn.verify_only:
            add_result(transactional_id, _topic_results(coordinator.handle_verify_partitions_in_transaction(
                transactional_id, txn.producer_id, txn.producer_epoch, partitions,
            )))
        else:
            coordinator.handle_add_partitions_to_transaction(
                transactional_id, txn.producer_id, txn.producer_epoch, partitions,
                _respond_for(version, transactional_id, partitions, add_result),
            )
    return future.result() if future.done() else future


def _respond_for(
    version: int, transactional_id: str, partitions: list[TopicPartition],
    add_result: Callable[[str, list[TopicResult]], None],
) -> Callable[[ErrorCode], None]:
    def respond(error: ErrorCode) -> None:
        if version < 2 and error == ErrorCode.PRODUCER_FENCED:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        add_result(transactional_id, _topic_results(dict.fromkeys(partitions, error)))

    return respond


def _transactions(request: AddPartitionsToTxnRequest, version: int) -> list[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction]:
    """Kafka's ``normalizeRequest``: v0-3's single transaction in v4's shape."""
    if version >= 4:
        # Keyed by transactional id, as Kafka's collection is: a repeated id counts once.
        unique: dict[str, AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction] = {}
        for txn in request.transactions:
            unique.setdefault(txn.transactional_id, txn)
        return list(unique.values())
    return [AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
        transactional_id=request.v3_and_below_transactional_id, producer_id=request.v3_and_below_producer_id,
        producer_epoch=request.v3_and_below_producer_epoch, verify_only=False, topics=request.v3_and_below_topics,
    )]


def _partitions(topics: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic]) -> list[TopicPartition]:
    return [TopicPartition(topic.name, p) for topic in topics for p in topic.partitions]


def _topic_results(errors: dict[TopicPartition, ErrorCode]) -> list[TopicResult]:
    by_topic: dict[str, list[_Response.AddPartitionsToTxnPartitionResult]] = {}
    for tp, error in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            _Response.AddPartitionsToTxnPartitionResult(partition_index=tp.partition, partition_error_code=error)
        )
    return [TopicResult(name=name, results_by_partition=partitions) for name, partitions in by_topic.items()]


def _build(
    version: int, transactions: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction],
    results: dict[str, list[TopicResult]],
) -> AddPartitionsToTxnResponse:
    if version <= LAST_CLIENT_VERSION:
        only = results.get(transactions[0].transactional_id, []) if transactions else []
        return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=only)
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, results_by_transaction=[
        _Response.AddPartitionsToTxnResult(transactional_id=txn_id, topic_results=topic_results)
        for txn_id, topic_results in results.items()
    ])


def error_response(request: AddPartitionsToTxnRequest, version: int, error: ErrorCode) -> AddPartitionsToTxnResponse:
    """Kafka's getErrorResponse: ``error`` on every partition (v0-3), or the top-level error (v4)."""
    if version <= LAST_CLIENT_VERSION:
        errors = dict.fromkeys(_partitions(request.v3_and_below_topics), error)
        return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(errors))
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=error)
