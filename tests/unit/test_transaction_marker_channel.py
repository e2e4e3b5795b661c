"""The transaction marker channel (Kafka's ``TransactionMarkerChannelManager`` and its completion
handler) behind a fake sender: batching per destination broker, one request in flight per
destination, retries after a back-off on the mock clock (leader moved, no answer, leader not
alive), partitions of deleted topics dropped, the errors that stop sending, and the Complete*
record written once every marker is in."""

from __future__ import annotations

import pytest

from pybroker.common.errors import ErrorCode as E
from pybroker.server.transaction.marker_channel import RETRY_BACKOFF_MS
from pybroker.server.transaction.metadata import TransactionState
from pybroker.types import TopicPartition
from tests.unit.transaction_harness import Harness, ids_in, run

S = TransactionState
TX, TX2, TX3 = ids_in(1, 3)
T_0, T_1, T_2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
U_0 = TopicPartition("u", 0)


async def started(tmp_path) -> Harness:
    h = Harness(tmp_path)
    h.leads({T_0: 1, T_1: 2, T_2: 2, U_0: 1})
    await h.elect()
    return h


async def prepared(h: Harness, tid: str, *partitions: TopicPartition, commit: bool = True) -> tuple[int, int]:
    """A transaction on ``partitions`` whose EndTxn was answered (its markers queued)."""
    init = await h.init(tid)
    assert h.add(tid, init.producer_id, init.producer_epoch, *partitions) == [E.NONE]
    assert h.end(tid, init.producer_id, init.producer_epoch, commit) == [E.NONE]
    return init.producer_id, init.producer_epoch


def test_markers_are_batched_per_destination_one_request_in_flight(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            pid1, epoch1 = await prepared(h, TX, T_0, T_1, T_2)
            pid2, epoch2 = await prepared(h, TX2, T_0, U_0, commit=False)
            await h.settle()
            by_broker = {s.broker_id: s for s in h.sender.sent}
            assert sorted(by_broker) == [1, 2] and len(h.sender.sent) == 2
            assert by_broker[1].markers() == [(pid1, epoch1, True, 0, [T_0]), (pid2, epoch2, False, 0, [T_0, U_0])]
            assert by_broker[2].markers() == [(pid1, epoch1, True, 0, [T_1, T_2])]
            # A third transaction waits for broker 1's answer.
            pid3, epoch3 = await prepared(h, TX3, T_0)
            await h.settle()
            assert len(h.sender.sent) == 2
            by_broker[1].answer()
            await h.settle()
            assert h.sender.sent[2].broker_id == 1 and h.sender.sent[2].markers() == [(pid3, epoch3, True, 0, [T_0])]
            assert h.metadata_of(TX2).state == S.COMPLETE_ABORT  # all its markers were at broker 1
            assert h.metadata_of(TX).state == S.PREPARE_COMMIT  # broker 2 has not answered
            by_broker[2].answer()
            h.sender.sent[2].answer()
            await h.settle()
            assert [h.metadata_of(t).state for t in (TX, TX3)] == [S.COMPLETE_COMMIT, S.COMPLETE_COMMIT]
            assert [r.state for tid, r in h.topic.records(1) if tid == TX][-2:] == [S.PREPARE_COMMIT, S.COMPLETE_COMMIT]

    run(scenario)


@pytest.mark.parametrize("error", [E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                                   E.UNKNOWN_TOPIC_OR_PARTITION, E.REQUEST_TIMED_OUT, E.KAFKA_STORAGE_ERROR])
def test_retriable_errors_retry_at_the_current_leader_after_a_back_off(tmp_path, error):
    async def scenario():
        async with await started(tmp_path) as h:
            pid, epoch = await prepared(h, TX, T_0, U_0)
            await h.settle()
            h.metadata.leaders[T_0] = 3  # the leadership moved
            h.sender.sent[0].answer({T_0: error})
            await h.settle()
            assert h.sender.unanswered() == [] and h.metadata_of(TX).topic_partitions == {T_0}
            await h.advance(RETRY_BACKOFF_MS - 1)
            assert h.sender.unanswered() == []
            await h.advance(1)
            [retry] = h.sender.unanswered()
            assert (retry.broker_id, retry.markers()) == (3, [(pid, epoch, True, 0, [T_0])])
            retry.answer()
            await h.settle()
            assert h.metadata_of(TX).state == S.COMPLETE_COMMIT

    run(scenario)


def test_no_answer_is_retried_after_a_back_off(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            pid, epoch = await prepared(h, TX, T_0)
            await h.settle()
            h.sender.sent[0].fail()
            await h.settle()
            assert h.sender.unanswered() == []
            await h.advance(RETRY_BACKOFF_MS)
            [retry] = h.sender.unanswered()
            assert (retry.broker_id, retry.markers()) == (1, [(pid, epoch, True, 0, [T_0])])
            retry.answer()
            await h.settle()
            assert h.metadata_of(TX).state == S.COMPLETE_COMMIT

    run(scenario)


def test_partitions_of_deleted_topics_are_dropped(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            await prepared(h, TX, T_0, U_0)
            await h.settle()
            del h.metadata.leaders[U_0]  # topic u deleted while its marker was on the way
            h.sender.sent[0].answer({U_0: E.UNKNOWN_TOPIC_OR_PARTITION})
            await h.settle()
            await h.advance(RETRY_BACKOFF_MS)
            assert h.sender.unanswered() == []
            assert h.metadata_of(TX).state == S.COMPLETE_COMMIT

    run(scenario)


def test_a_transaction_on_deleted_partitions_only_completes_at_once(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            init = await h.init(TX)
            assert h.add(TX, init.producer_id, init.producer_epoch, U_0) == [E.NONE]
            del h.metadata.leaders[U_0]
            assert h.end(TX, init.producer_id, init.producer_epoch) == [E.NONE]
            await h.settle()
            assert h.sender.sent == [] and h.metadata_of(TX).state == S.COMPLETE_COMMIT

    run(scenario)


def test_a_leader_not_alive_is_looked_up_again_after_each_back_off(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            h.metadata.leaders[T_1] = 4  # not a live broker
            pid, epoch = await prepared(h, TX, T_1)
            await h.advance(RETRY_BACKOFF_MS)
            assert h.sender.sent == [] and h.channel.markers_queue_for_unknown_broker.total_num_markers() == 1
            h.metadata.leaders[T_1] = 2
            await h.advance(RETRY_BACKOFF_MS)
            [sent] = h.sender.sent
            assert (sent.broker_id, sent.markers()) == (2, [(pid, epoch, True, 0, [T_1])])

    run(scenario)


@pytest.mark.parametrize("error", [E.TRANSACTION_COORDINATOR_FENCED, E.INVALID_PRODUCER_EPOCH, E.CORRUPT_MESSAGE])
def test_errors_that_stop_sending(tmp_path, error):
    async def scenario():
        async with await started(tmp_path) as h:
            await prepared(h, TX, T_0, U_0)
            await h.settle()
            h.sender.sent[0].answer({T_0: E.NONE, U_0: error})
            await h.settle()
            await h.advance(10 * RETRY_BACKOFF_MS)
            assert len(h.sender.sent) == 1 and h.channel.num_txns_with_pending_markers == 0
            m = h.metadata_of(TX)
            assert (m.state, m.pending_state) == (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)  # as Kafka leaves it

    run(scenario)


@pytest.mark.parametrize("error", [E.UNSUPPORTED_FOR_MESSAGE_FORMAT, E.UNSUPPORTED_VERSION])
def test_partitions_that_cannot_take_a_marker_leave_the_transaction(tmp_path, error):
    async def scenario():
        async with await started(tmp_path) as h:
            await prepared(h, TX, T_0)
            await h.settle()
            h.sender.sent[0].answer({T_0: error})
            await h.settle()
            assert h.metadata_of(TX).state == S.COMPLETE_COMMIT

    run(scenario)


def test_the_complete_record_is_retried_while_the_log_is_not_available(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            await prepared(h, TX, T_0)
            await h.settle()
            h.topic.errors = [E.NOT_ENOUGH_REPLICAS]
            h.sender.sent[0].answer()
            await h.settle()
            m = h.metadata_of(TX)
            assert (m.state, m.pending_state) == (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)  # kept for the retry
            await h.advance(RETRY_BACKOFF_MS)
            assert (m.state, m.pending_state) == (S.COMPLETE_COMMIT, None)

    run(scenario)


def test_shutdown_stops_sending_and_closes_the_sender(tmp_path):
    async def scenario():
        h = await started(tmp_path)
        await prepared(h, TX, T_0)
        await h.settle()
        await h.coordinator.shutdown()
        assert h.sender.closed and h.channel.num_txns_with_pending_markers == 0

    run(scenario)


def test_a_resignation_drops_the_markers_still_queued(tmp_path):
    async def scenario():
        async with await started(tmp_path) as h:
            await prepared(h, TX, T_0)
            h.coordinator.on_resignation(1, 0)  # before the send task ran
            await h.settle()
            assert h.sender.sent == [] and h.channel.num_txns_with_pending_markers == 0

    run(scenario)
