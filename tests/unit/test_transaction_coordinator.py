"""The transaction coordinator's APIs, loading and timed rules, against Kafka's behaviour.

Each test runs a real ``TransactionCoordinator`` with its real state manager and marker channel
over ``__transaction_state`` logs in a temporary directory (``tests/unit/transaction_harness.py``):
appends go to the logs (acks=all met at once unless a test injects an error or holds them),
WriteTxnMarkers requests go to a fake sender the test answers, and time is a mock clock. The API
handlers are called with a stand-in request context for the version-dependent answers.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pybroker.common.errors import ErrorCode as E
from pybroker.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ListTransactionsRequest,
)
from pybroker.security.authorizer import AllowAllAuthorizer
from pybroker.server.apis import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    describe_transactions,
    end_txn,
    init_producer_id,
    list_transactions,
)
from pybroker.server.group.records import partition_for as group_partition_for
from pybroker.server.transaction.metadata import TransactionState
from pybroker.server.transaction.transaction_log import TRANSACTION_STATE_TOPIC
from pybroker.types import TopicPartition
from tests.unit.handler_context import allowed_context
from tests.unit.transaction_harness import (
    T0,
    TIMEOUT_MS,
    TXN_PARTITIONS,
    Harness,
    ids_in,
    run,
    txn_tp,
)

S = TransactionState
TX, TX2 = ids_in(1, 2)  # both in partition 1 of __transaction_state
OTHER = ids_in(2)[0]
T_0, T_1, T_2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
LEADERS = {T_0: 1, T_1: 2, T_2: 2}


async def started(tmp_path: Path, **config: Any) -> Harness:
    h = Harness(tmp_path, **config)
    h.leads(LEADERS)
    await h.elect()
    return h


async def ongoing(h: Harness, tid: str = TX, *partitions: TopicPartition) -> tuple[int, int]:
    """An initialized producer with an ongoing transaction on ``partitions`` (t-0 by default)."""
    init = await h.init(tid)
    assert init.error == E.NONE
    assert h.add(tid, init.producer_id, init.producer_epoch, *(partitions or (T_0,))) == [E.NONE]
    return init.producer_id, init.producer_epoch


async def complete_markers(h: Harness) -> None:
    """Answer every marker request with success, until none is left."""
    await h.settle()
    while pending := h.sender.unanswered():
        for sent in pending:
            sent.answer()
        await h.settle()


# --- InitProducerId -----------------------------------------------------------------------------


def test_init_producer_id_gives_a_new_producer_id_then_bumps_its_epoch(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            first = await h.init(TX)
            assert (first.producer_id, first.producer_epoch, first.error) == (1000, 0, E.NONE)
            second = await h.init(TX)  # a new instance fences the first
            assert (second.producer_id, second.producer_epoch, second.error) == (1000, 1, E.NONE)
            m = h.metadata_of(TX)
            assert (m.state, m.producer_epoch, m.last_producer_epoch, m.txn_timeout_ms) == (S.EMPTY, 1, -1, TIMEOUT_MS)
            # Each transition is a record, appended with the transaction timeout as its timeout.
            assert [(tid, r.producer_epoch, r.state) for tid, r in h.topic.records(1)] == [
                (TX, 0, S.EMPTY), (TX, 1, S.EMPTY)]
            assert h.topic.timeouts == [TIMEOUT_MS, TIMEOUT_MS]

    run(scenario)


def test_init_producer_id_errors(tmp_path):
    async def scenario():
        async with await started(tmp_path, transaction_max_timeout_ms=900000) as h:
            assert (await h.init(TX, timeout_ms=900001)).error == E.INVALID_TRANSACTION_TIMEOUT
            assert (await h.init(TX, timeout_ms=0)).error == E.INVALID_TRANSACTION_TIMEOUT
            assert (await h.init("")).error == E.INVALID_REQUEST
            assert (await h.init(None)) .producer_epoch == 0  # no transactional id: idempotent
            h.coordinator.on_resignation(2, 0)
            assert (await h.init(OTHER)).error == E.NOT_COORDINATOR
            h.topic.errors = [E.NOT_ENOUGH_REPLICAS]
            failed = await h.init(TX)
            assert (failed.producer_id, failed.producer_epoch, failed.error) == (-1, -1, E.COORDINATOR_NOT_AVAILABLE)
            assert h.metadata_of(TX).pending_state is None  # a failed append leaves no transition pending
            h.topic.errors = [E.NOT_LEADER_OR_FOLLOWER]
            assert (await h.init(TX)).error == E.NOT_COORDINATOR
            assert (await h.init(TX)).error == E.NONE

    run(scenario)


def test_init_producer_id_while_loading_answers_coordinator_load_in_progress(tmp_path):
    async def scenario():
        async with Harness(tmp_path) as h:
            h.manager.loading_partitions.add((1, 0))  # a load under way
            assert (await h.init(TX)).error == E.COORDINATOR_LOAD_IN_PROGRESS
            listed = h.coordinator.handle_list_transactions(set(), set())
            assert listed.error == E.COORDINATOR_LOAD_IN_PROGRESS

    run(scenario)


def test_init_producer_id_with_an_ongoing_transaction_aborts_it_first(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            producer_id, epoch = await ongoing(h, TX, T_0, T_1)
            answer = await h.init(TX)
            # The previous producer's transaction is aborted with a bumped epoch; the caller retries.
            assert answer.error == E.CONCURRENT_TRANSACTIONS
            m = h.metadata_of(TX)
            assert (m.state, m.producer_epoch, m.pending_state) == (S.PREPARE_ABORT, epoch + 1, S.COMPLETE_ABORT)
            assert (await h.init(TX)).error == E.CONCURRENT_TRANSACTIONS  # markers still pending
            await h.settle()
            markers = sorted((s.broker_id, s.markers()) for s in h.sender.sent)
            assert markers == [(1, [(producer_id, epoch + 1, False, 0, [T_0])]),
                               (2, [(producer_id, epoch + 1, False, 0, [T_1])])]
            # The old producer's commit is fenced.
            assert h.end(TX, producer_id, epoch) == [E.PRODUCER_FENCED]
            await complete_markers(h)
            assert h.metadata_of(TX).state == S.COMPLETE_ABORT
            retried = await h.init(TX)
            assert (retried.producer_id, retried.producer_epoch, retried.error) == (producer_id, epoch + 2, E.NONE)

    run(scenario)


def test_init_producer_id_kip360(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            first = await h.init(TX)
            pid = first.producer_id
            # The producer recovers from an abortable error: its current epoch is bumped.
            bumped = await h.init(TX, expected=(pid, 0))
            assert (bumped.producer_id, bumped.producer_epoch, bumped.error) == (pid, 1, E.NONE)
            assert h.metadata_of(TX).last_producer_epoch == 0
            # A retry of that bump (its answer was lost) gets the same epoch again.
            retry = await h.init(TX, expected=(pid, 0))
            assert (retry.producer_epoch, retry.error) == (1, E.NONE)
            # A stale epoch, or another producer id, is fenced.
            assert (await h.init(TX, expected=(pid, 5))).error == E.PRODUCER_FENCED
            assert (await h.init(TX, expected=(pid + 1, 1))).error == E.PRODUCER_FENCED
            # A new instance (no expected epoch) fences the recovering one.
            assert (await h.init(TX)).producer_epoch == 2
            assert (await h.init(TX, expected=(pid, 1))).error == E.PRODUCER_FENCED

    run(scenario)


def test_init_producer_id_rotates_the_producer_id_when_the_epoch_is_exhausted(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            first = await h.init(TX)
            m = h.metadata_of(TX)
            m.producer_epoch = 32766  # exhausted
            rotated = await h.init(TX)
            assert (rotated.producer_id, rotated.producer_epoch, rotated.error) == (first.producer_id + 1, 0, E.NONE)
            assert (m.producer_id, m.last_producer_id) == (first.producer_id + 1, first.producer_id)
            # KIP-360: the retry of that rotation, with the old id and exhausted epoch, is accepted.
            m.producer_epoch, m.last_producer_epoch = 32766, 32766
            m.producer_id = first.producer_id + 1
            again = await h.init(TX, expected=(first.producer_id, 32766))
            assert again.error == E.NONE

    run(scenario)


def test_init_producer_id_answers_concurrent_transactions_while_a_transition_is_pending(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            await h.init(TX)
            h.topic.hold = True
            first = asyncio.ensure_future(h.init(TX))
            await h.settle()
            assert (await h.init(TX)).error == E.CONCURRENT_TRANSACTIONS
            h.topic.release()
            assert (await first).producer_epoch == 1

    run(scenario)


# --- AddPartitionsToTxn / AddOffsetsToTxn / verification ----------------------------------------


def test_add_partitions(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            assert h.add(TX, 1000, 0, T_0) == [E.INVALID_PRODUCER_ID_MAPPING]  # never initialized
            init = await h.init(TX)
            pid, epoch = init.producer_id, init.producer_epoch
            assert h.add(TX, pid + 1, epoch, T_0) == [E.INVALID_PRODUCER_ID_MAPPING]
            assert h.add(TX, pid, epoch + 1, T_0) == [E.PRODUCER_FENCED]
            assert h.add("", pid, epoch, T_0) == [E.INVALID_REQUEST]
            h.time.advance(7)
            assert h.add(TX, pid, epoch, T_0, T_1) == [E.NONE]
            m = h.metadata_of(TX)
            assert (m.state, m.topic_partitions, m.txn_start_timestamp) == (S.ONGOING, {T_0, T_1}, T0 + 7)
            records = len(h.topic.records(1))
            assert h.add(TX, pid, epoch, T_1) == [E.NONE]  # already in: answered without a write
            assert len(h.topic.records(1)) == records
            h.topic.errors = [E.REQUEST_TIMED_OUT]
            assert h.add(TX, pid, epoch, T_2) == [E.COORDINATOR_NOT_AVAILABLE]
            assert m.pending_state is None and m.topic_partitions == {T_0, T_1}
            assert h.end(TX, pid, epoch) == [E.NONE]
            assert h.add(TX, pid, epoch, T_2) == [E.CONCURRENT_TRANSACTIONS]  # markers being written

    run(scenario)


def test_verify_only_answers_per_partition_and_changes_nothing(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            pid, epoch = await ongoing(h, TX, T_0)
            verify = h.coordinator.handle_verify_partitions_in_transaction
            assert verify(TX, pid, epoch, [T_0, T_1]) == {T_0: E.NONE, T_1: E.INVALID_TXN_STATE}
            assert h.metadata_of(TX).topic_partitions == {T_0}
            assert verify(TX, pid, epoch + 1, [T_0]) == {T_0: E.PRODUCER_FENCED}
            assert verify(TX, pid + 1, epoch, [T_0]) == {T_0: E.INVALID_PRODUCER_ID_MAPPING}
            assert verify(TX2, pid, epoch, [T_0]) == {T_0: E.INVALID_PRODUCER_ID_MAPPING}
            assert verify(ids_in(0)[0], pid, epoch, [T_0]) == {T_0: E.INVALID_PRODUCER_ID_MAPPING}
            h.coordinator.on_resignation(1, 0)
            assert verify(TX, pid, epoch, [T_0]) == {T_0: E.NOT_COORDINATOR}

    run(scenario)


# --- EndTxn -------------------------------------------------------------------------------------


def test_end_txn_commit_answers_once_prepare_commit_is_in_the_log(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            pid, epoch = await ongoing(h, TX, T_0, T_1)
            h.topic.hold = True
            answers = h.end(TX, pid, epoch)
            assert answers == []  # waiting for the log
            h.topic.release()
            await h.settle()
            assert answers == [E.NONE]
            m = h.metadata_of(TX)
            assert (m.state, m.pending_state) == (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
            assert h.topic.records(1)[-1][1].state == S.PREPARE_COMMIT
            # Retries while the markers are written: the same result is concurrent, the other invalid.
            assert h.end(TX, pid, epoch) == [E.CONCURRENT_TRANSACTIONS]
            assert h.end(TX, pid, epoch, commit=False) == [E.CONCURRENT_TRANSACTIONS]
            h.topic.hold = False
            await complete_markers(h)
            assert (m.state, m.pending_state, m.topic_partitions) == (S.COMPLETE_COMMIT, None, set())
            assert h.topic.records(1)[-1][1].state == S.COMPLETE_COMMIT
            # A retried EndTxn of the completed transaction: NONE if the same result, else invalid.
            assert h.end(TX, pid, epoch) == [E.NONE]
            assert h.end(TX, pid, epoch, commit=False) == [E.INVALID_TXN_STATE]

    run(scenario)


def test_end_txn_errors(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            assert h.end(TX, 1000, 0) == [E.INVALID_PRODUCER_ID_MAPPING]
            init = await h.init(TX)
            pid, epoch = init.producer_id, init.producer_epoch
            assert h.end(TX, pid, epoch) == [E.INVALID_TXN_STATE]  # Empty: nothing to commit
            assert h.end("", pid, epoch) == [E.INVALID_REQUEST]
            assert h.add(TX, pid, epoch, T_0) == [E.NONE]
            assert h.end(TX, pid + 1, epoch) == [E.INVALID_PRODUCER_ID_MAPPING]
            assert h.end(TX, pid, epoch + 1) == [E.PRODUCER_FENCED]
            assert h.end(TX, pid, epoch - 1 if epoch else 5) == [E.PRODUCER_FENCED]
            h.topic.errors = [E.NOT_ENOUGH_REPLICAS_AFTER_APPEND]
            assert h.end(TX, pid, epoch) == [E.COORDINATOR_NOT_AVAILABLE]
            m = h.metadata_of(TX)
            assert (m.state, m.pending_state) == (S.ONGOING, None)
            assert h.end(TX, pid, epoch, commit=False) == [E.NONE]
            # While the markers are written a transition is pending: any EndTxn is concurrent.
            assert h.end(TX, pid, epoch) == [E.CONCURRENT_TRANSACTIONS]
            await complete_markers(h)
            assert m.state == S.COMPLETE_ABORT

    run(scenario)


def test_end_txn_answers_not_coordinator_when_the_partition_moved_during_the_append(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            pid, epoch = await ongoing(h)
            h.topic.hold = True
            answers = h.end(TX, pid, epoch)
            h.coordinator.on_resignation(1, 0)
            h.topic.release()
            await h.settle()
            assert answers == [E.NOT_COORDINATOR]
            assert h.sender.sent == []

    run(scenario)


# --- the API handlers ---------------------------------------------------------------------------


def ctx(h: Harness, version: int) -> Any:
    group_manager = SimpleNamespace(partition_for=lambda group: group_partition_for(group, 50))
    broker = SimpleNamespace(transaction_coordinator=h.coordinator, metadata_cache=h.metadata,
                             group_coordinator=SimpleNamespace(manager=group_manager), authorizer=AllowAllAuthorizer())
    return allowed_context(broker, version)


async def call(handler: Any, context: Any, request: Any) -> Any:
    response = handler.handle(context, request)
    if asyncio.iscoroutine(response) or asyncio.isfuture(response):
        response = await response
    return response


def test_handlers_answer_producer_fenced_as_invalid_producer_epoch_to_old_versions(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            pid, epoch = await ongoing(h)
            stale = epoch + 1
            end = EndTxnRequest(transactional_id=TX, producer_id=pid, producer_epoch=stale, committed=True)
            assert (await call(end_txn, ctx(h, 1), end)).error_code == E.INVALID_PRODUCER_EPOCH
            assert (await call(end_txn, ctx(h, 2), end)).error_code == E.PRODUCER_FENCED
            offsets = AddOffsetsToTxnRequest(transactional_id=TX, producer_id=pid, producer_epoch=stale, group_id="g")
            assert (await call(add_offsets_to_txn, ctx(h, 1), offsets)).error_code == E.INVALID_PRODUCER_EPOCH
            assert (await call(add_offsets_to_txn, ctx(h, 3), offsets)).error_code == E.PRODUCER_FENCED
            add = AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=TX, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=stale,
                v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="t", partitions=[0])],
            )
            for version, error in ((1, E.INVALID_PRODUCER_EPOCH), (2, E.PRODUCER_FENCED)):
                response = await call(add_partitions_to_txn, ctx(h, version), add)
                assert [(t.name, [(p.partition_index, p.partition_error_code) for p in t.results_by_partition])
                        for t in response.results_by_topic_v3_and_below] == [("t", [(0, error)])]
            # (With a transaction ongoing, InitProducerId fences and aborts it whatever the epoch.)
            pid2 = (await h.init(TX2)).producer_id
            init = InitProducerIdRequest(transactional_id=TX2, transaction_timeout_ms=TIMEOUT_MS, producer_id=pid2,
                                         producer_epoch=5)
            assert (await call(init_producer_id, ctx(h, 3), init)).error_code == E.INVALID_PRODUCER_EPOCH
            assert (await call(init_producer_id, ctx(h, 4), init)).error_code == E.PRODUCER_FENCED
            half = InitProducerIdRequest(transactional_id=TX, transaction_timeout_ms=TIMEOUT_MS, producer_id=pid,
                                         producer_epoch=-1)
            assert (await call(init_producer_id, ctx(h, 4), half)).error_code == E.INVALID_REQUEST

    run(scenario)


def test_add_offsets_adds_the_groups_offsets_partition(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            init = await h.init(TX)
            request = AddOffsetsToTxnRequest(transactional_id=TX, producer_id=init.producer_id,
                                             producer_epoch=init.producer_epoch, group_id="my-group")
            assert (await call(add_offsets_to_txn, ctx(h, 3), request)).error_code == E.NONE
            assert h.metadata_of(TX).topic_partitions == {
                TopicPartition("__consumer_offsets", group_partition_for("my-group", 50))}

    run(scenario)


def test_add_partitions_with_an_unknown_topic_adds_nothing(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            init = await h.init(TX)
            topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
            request = AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=TX, v3_and_below_producer_id=init.producer_id,
                v3_and_below_producer_epoch=init.producer_epoch,
                v3_and_below_topics=[topic(name="t", partitions=[0, 1]), topic(name="nope", partitions=[0])],
            )
            response = await call(add_partitions_to_txn, ctx(h, 3), request)
            errors = {(t.name, p.partition_index): p.partition_error_code
                      for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}
            assert errors == {("t", 0): E.OPERATION_NOT_ATTEMPTED, ("t", 1): E.OPERATION_NOT_ATTEMPTED,
                              ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
            assert h.metadata_of(TX).state == S.EMPTY
            # A client may not add an internal topic's partition (Kafka never authorizes it).
            h.leads({TopicPartition("__consumer_offsets", 0): 1})
            request.v3_and_below_topics = [topic(name="t", partitions=[0]), topic(name="__consumer_offsets", partitions=[0])]
            response = await call(add_partitions_to_txn, ctx(h, 3), request)
            errors = {(t.name, p.partition_index): p.partition_error_code
                      for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}
            assert errors == {("t", 0): E.OPERATION_NOT_ATTEMPTED, ("__consumer_offsets", 0): E.TOPIC_AUTHORIZATION_FAILED}

    run(scenario)


def test_add_partitions_v4_verifies_several_transactions(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            pid, epoch = await ongoing(h, TX, T_0)
            pid2, epoch2 = await ongoing(h, TX2, T_1)
            txn, topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction, AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
            request = AddPartitionsToTxnRequest(transactions=[
                txn(transactional_id=TX, producer_id=pid, producer_epoch=epoch, verify_only=True,
                    topics=[topic(name="t", partitions=[0, 1])]),
                txn(transactional_id=TX2, producer_id=pid2, producer_epoch=epoch2 + 1, verify_only=True,
                    topics=[topic(name="t", partitions=[1])]),
            ])
            response = await call(add_partitions_to_txn, ctx(h, 4), request)
            assert response.error_code == E.NONE
            answers = {(r.transactional_id, t.name, p.partition_index): p.partition_error_code
                       for r in response.results_by_transaction for t in r.topic_results for p in t.results_by_partition}
            assert answers == {(TX, "t", 0): E.NONE, (TX, "t", 1): E.INVALID_TXN_STATE, (TX2, "t", 1): E.PRODUCER_FENCED}
            assert h.metadata_of(TX).topic_partitions == {T_0}

    run(scenario)


def test_describe_and_list_transactions(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            pid, epoch = await ongoing(h, TX, T_0, T_1)
            h.time.advance(1)
            init2 = await h.init(TX2)
            request = DescribeTransactionsRequest(transactional_ids=[TX, TX2, "unknown", OTHER])
            response = await call(describe_transactions, ctx(h, 0), request)
            described = {s.transactional_id: s for s in response.transaction_states}
            tx = described[TX]
            assert (tx.error_code, tx.transaction_state, tx.producer_id, tx.producer_epoch, tx.transaction_timeout_ms,
                    tx.transaction_start_time_ms) == (E.NONE, "Ongoing", pid, epoch, TIMEOUT_MS, T0)
            assert [(t.topic, t.partitions) for t in tx.topics] == [("t", [0, 1])]
            assert (described[TX2].transaction_state, described[TX2].transaction_start_time_ms) == ("Empty", -1)
            assert described["unknown"].error_code == E.TRANSACTIONAL_ID_NOT_FOUND
            assert described[OTHER].error_code == E.TRANSACTIONAL_ID_NOT_FOUND

            async def listed(states: list[str], producer_ids: list[int]) -> Any:
                return await call(list_transactions, ctx(h, 0),
                                  ListTransactionsRequest(state_filters=states, producer_id_filters=producer_ids))

            everything = await listed([], [])
            assert sorted((s.transactional_id, s.producer_id, s.transaction_state)
                          for s in everything.transaction_states) == sorted(
                [(TX, pid, "Ongoing"), (TX2, init2.producer_id, "Empty")])
            ongoing_only = await listed(["Ongoing", "Bogus"], [])
            assert [s.transactional_id for s in ongoing_only.transaction_states] == [TX]
            assert ongoing_only.unknown_state_filters == ["Bogus"]
            by_producer = await listed([], [init2.producer_id])
            assert [s.transactional_id for s in by_producer.transaction_states] == [TX2]
            h.coordinator.on_resignation(1, 0)
            response = await call(describe_transactions, ctx(h, 0), DescribeTransactionsRequest(transactional_ids=[TX]))
            assert response.transaction_states[0].error_code == E.NOT_COORDINATOR

    run(scenario)


# --- loading, unloading ---------------------------------------------------------------------------


def test_reload_restores_transactions_and_completes_prepared_ones(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            committed_pid, committed_epoch = await ongoing(h, TX, T_0, T_1)
            assert h.end(TX, committed_pid, committed_epoch) == [E.NONE]
            ongoing_pid, _ = await ongoing(h, TX2, T_2)
            await h.settle()
            assert len(h.sender.sent) == 2  # TX's markers, never answered
            h.coordinator.on_resignation(1, 0)
            assert h.manager.get_transaction_state(TX) == E.NOT_COORDINATOR
            for sent in h.sender.sent:  # the answers that come after the resignation change nothing
                sent.answer()
            await h.settle()
            assert h.channel.num_txns_with_pending_markers == 0
            assert h.topic.records(1)[-1][1].state == S.ONGOING

            h.coordinator.on_election(1, 1)
            assert h.manager.get_transaction_state(TX) == E.COORDINATOR_LOAD_IN_PROGRESS
            await h.loaded()
            tx, tx2 = h.metadata_of(TX), h.metadata_of(TX2)
            assert (tx2.state, tx2.producer_id, tx2.topic_partitions) == (S.ONGOING, ongoing_pid, {T_2})
            # The prepared commit is completed by the new leadership: markers sent again.
            assert (tx.state, tx.pending_state) == (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
            resent = sorted((s.broker_id, s.markers()) for s in h.sender.unanswered())
            assert resent == [(1, [(committed_pid, committed_epoch, True, 1, [T_0])]),
                              (2, [(committed_pid, committed_epoch, True, 1, [T_1])])]
            await complete_markers(h)
            assert tx.state == S.COMPLETE_COMMIT

    run(scenario)


def test_a_tombstone_removes_the_id_on_load(tmp_path):
    async def scenario():
        async with await started(tmp_path, transactional_id_expiration_ms=1000) as h:
            await h.init(TX)
            await h.init(TX2)
            h.time.advance(1001)
            h.manager.remove_expired_transactional_ids()
            await h.settle()
            assert h.topic.records(1)[-2:] == [(TX, None), (TX2, None)]
            h.coordinator.on_resignation(1, 0)
            await h.elect(1, epoch=1)
            assert h.manager.get_transaction_state(TX) is None
            assert (await h.init(TX)).producer_id == 1002  # a new id: the old one is gone

    run(scenario)


def test_find_coordinator_creates_the_topic_with_kafkas_configs(tmp_path):
    async def scenario():
        async with Harness(tmp_path, transaction_log_replication_factor=3, transaction_log_min_insync_replicas=2,
                           transaction_log_num_partitions=7) as h:
            h.metadata.counts.clear()
            # The first lookup starts the creation and finds no partition yet (COORDINATOR_NOT_AVAILABLE).
            assert h.coordinator.coordinator_partition("hello") is None
            await h.coordinator._transaction_topic.wait()
            assert h.coordinator.coordinator_partition("hello") == 99162322 % 7
            assert h.created == [(TRANSACTION_STATE_TOPIC, 7, 3, {
                "unclean.leader.election.enable": "false", "compression.type": "uncompressed",
                "cleanup.policy": "compact", "min.insync.replicas": "2", "segment.bytes": "104857600",
            })]

    run(scenario)


# --- timed rules ----------------------------------------------------------------------------------


def test_timed_out_transaction_is_aborted_with_a_bumped_epoch(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            pid, epoch = await ongoing(h, TX, T_0)
            await h.advance(TIMEOUT_MS - 10_000)
            assert h.metadata_of(TX).state == S.ONGOING
            await h.advance(10_000)  # the abort check runs every 10 s: 60 s is not past the timeout yet
            assert h.metadata_of(TX).state == S.ONGOING
            await h.advance(10_000)
            m = h.metadata_of(TX)
            assert (m.state, m.producer_epoch, m.pending_state) == (S.PREPARE_ABORT, epoch + 1, S.COMPLETE_ABORT)
            assert [s.markers() for s in h.sender.unanswered()] == [[(pid, epoch + 1, False, 0, [T_0])]]
            # The producer finds itself fenced.
            assert h.end(TX, pid, epoch) == [E.PRODUCER_FENCED]
            await complete_markers(h)
            assert m.state == S.COMPLETE_ABORT

    run(scenario)


def test_transactional_ids_expire_after_transactional_id_expiration_ms(tmp_path):
    async def scenario():
        async with await started(tmp_path, transactional_id_expiration_ms=7_200_000,
                                 transaction_max_timeout_ms=10_000_000) as h:
            await h.init(TX)
            await ongoing(h, TX2, T_0)
            h.metadata_of(TX2).txn_timeout_ms = 9_000_000  # not aborted meanwhile
            await h.advance(3_600_000)
            assert h.metadata_of(TX).state == S.EMPTY  # one hour idle: kept
            await h.advance(3_600_000)
            # Two hours idle: the Empty id is tombstoned and leaves the cache; the ongoing one stays.
            assert h.manager.get_transaction_state(TX) is None
            assert h.metadata_of(TX2).state == S.ONGOING
            assert (TX, None) in h.topic.records(1)
            response = h.coordinator.handle_describe_transactions(TX)
            assert response.error == E.TRANSACTIONAL_ID_NOT_FOUND

    run(scenario)


def test_a_failed_tombstone_keeps_the_id(tmp_path):
    async def scenario():
        async with await started(tmp_path, transactional_id_expiration_ms=1000) as h:
            await h.init(TX)
            h.time.advance(1001)
            h.topic.errors = [E.NOT_ENOUGH_REPLICAS]
            h.manager.remove_expired_transactional_ids()
            m = h.metadata_of(TX)
            assert (m.state, m.pending_state) == (S.EMPTY, None)

    run(scenario)


def test_the_partition_count_follows_the_topic(tmp_path):
    async def scenario():
        async with Harness(tmp_path) as h:
            assert h.coordinator.partition_for("hello") == 99162322 % TXN_PARTITIONS
            h.metadata.counts[TRANSACTION_STATE_TOPIC] = 50
            assert h.coordinator.partition_for("hello") == 99162322 % 50
            assert txn_tp(3) == TopicPartition(TRANSACTION_STATE_TOPIC, 3)

    run(scenario)


@pytest.mark.parametrize("epoch", [None, 0])
def test_resignation_with_or_without_an_epoch_drops_the_partition(tmp_path, epoch):
    async def scenario():
        async with await started(tmp_path) as h:
            await h.init(TX)
            h.coordinator.on_leadership_change([], [(txn_tp(1), epoch)])
            assert h.manager.get_transaction_state(TX) == E.NOT_COORDINATOR
            assert h.manager.get_transaction_state(OTHER) is None  # other partitions stay

    run(scenario)
