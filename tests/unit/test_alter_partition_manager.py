"""The leader side of AlterPartition (Kafka's DefaultAlterPartitionManager, cluster.md §3.6): one
pending proposal per partition, one request in flight carrying everything pending, retries on
transport failure, NOT_CONTROLLER and top-level errors (on a mock clock), per-partition answers
mapped to IsrChangeResult. Then the transport: in-process to this broker's own controller (a real
Controller over the in-memory cluster store), over a socket through the broker's real dispatcher
and AlterPartition handler, and nowhere when no controller is known."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest

from pybroker.common.cluster import BrokerEndpoint, Endpoint, LiveBroker
from pybroker.common.errors import ErrorCode
from pybroker.controller.alter_partition import (
    AlterPartition,
    AlterPartitionAnswer,
    IsrProposal,
    PartitionResult,
    answer_from_wire,
    answer_to_wire,
    request_from_wire,
    request_to_wire,
)
from pybroker.controller.channel import ControllerChannelManager
from pybroker.controller.controller import Controller
from pybroker.controller.requests import UpdateMetadata
from pybroker.network.listener import SocketServer
from pybroker.protocol import codec
from pybroker.protocol.api_keys import ApiKey
from pybroker.security.authorizer import AllowAllAuthorizer
from pybroker.server.alter_partition_manager import (
    CONTROLLER_BACKOFF_MS,
    RETRY_BACKOFF_MS,
    AlterPartitionManager,
    ControllerTransport,
    ControllerUnavailableError,
)
from pybroker.server.dispatcher import RequestDispatcher, supported_api_versions
from pybroker.server.metadata_cache import MetadataCache
from pybroker.server.partition import IsrChangeResult
from pybroker.types import TopicPartition
from tests.mock_time import MockScheduler, MockTime
from tests.unit.test_controller import ClusterStore, Recorder, broker, settle

E = ErrorCode
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
BROKER_ID = 1


class FakeTransport:
    """Records each request; it stays unanswered until the test answers (or fails) it."""

    def __init__(self) -> None:
        self.requests: list[AlterPartition] = []
        self._waiting: list[asyncio.Future[AlterPartitionAnswer]] = []
        self.closed = False

    async def send(self, request: AlterPartition) -> AlterPartitionAnswer:
        self.requests.append(request)
        future: asyncio.Future[AlterPartitionAnswer] = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        return await future

    @property
    def outstanding(self) -> int:
        return sum(not f.done() for f in self._waiting)

    async def answer(self, answer: AlterPartitionAnswer | Exception) -> None:
        future = next(f for f in self._waiting if not f.done())
        if isinstance(answer, Exception):
            future.set_exception(answer)
        else:
            future.set_result(answer)
        await turns()

    async def close(self) -> None:
        self.closed = True


async def turns(rounds: int = 5) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


def sent(request: AlterPartition) -> dict[TopicPartition, tuple[int, list[int], int]]:
    return {p.topic_partition: (p.leader_epoch, list(p.new_isr), p.partition_epoch) for p in request.proposals}


def ok(request: AlterPartition, bump: int = 1) -> AlterPartitionAnswer:
    """The controller accepting every proposal of ``request``."""
    return AlterPartitionAnswer(E.NONE, {
        p.topic_partition: PartitionResult(E.NONE, BROKER_ID, p.leader_epoch, p.new_isr, p.partition_epoch + bump)
        for p in request.proposals
    })


def run(scenario) -> None:
    async def main() -> None:
        time = MockTime()
        scheduler = MockScheduler(time)
        transport = FakeTransport()
        epoch = {"value": 500}
        manager = AlterPartitionManager(BROKER_ID, lambda: epoch["value"], transport, scheduler)
        try:
            await scenario(manager, transport, scheduler, epoch)
        finally:
            await manager.shutdown()

    asyncio.run(main())


def test_one_request_in_flight_and_everything_pending_goes_in_the_next_one():
    async def scenario(manager, transport, scheduler, epoch):
        first = manager.submit(A0, 3, [1, 2], 10)
        await turns()
        assert len(transport.requests) == 1 and manager.in_flight
        assert transport.requests[0] == AlterPartition(BROKER_ID, 500, (IsrProposal(A0, 3, (1, 2), 10),))
        second = manager.submit(A1, 4, [1], 20)
        third = manager.submit(B0, 5, [1, 3], 30)
        await turns()
        assert len(transport.requests) == 1  # they wait for the answer
        await transport.answer(ok(transport.requests[0]))
        assert first.result() == IsrChangeResult(E.NONE, (1, 2), 11)
        assert len(transport.requests) == 2 and transport.outstanding == 1
        assert sent(transport.requests[1]) == {A1: (4, [1], 20), B0: (5, [1, 3], 30)}
        assert not second.done() and not third.done()
        await transport.answer(ok(transport.requests[1]))
        assert second.result() == IsrChangeResult(E.NONE, (1,), 21)
        assert third.result() == IsrChangeResult(E.NONE, (1, 3), 31)
        assert not manager.in_flight and manager.pending == set()
        assert len(transport.requests) == 2

    run(scenario)


def test_at_most_one_pending_proposal_per_partition():
    async def scenario(manager, transport, scheduler, epoch):
        first = manager.submit(A0, 3, [1, 2], 10)
        await turns()
        again = manager.submit(A0, 3, [1], 10)
        assert again.done() and again.result() == IsrChangeResult(E.OPERATION_NOT_ATTEMPTED)
        # also while it waits unsent behind another request
        other = manager.submit(A1, 1, [1], 0)
        assert manager.submit(A1, 1, [1, 2], 0).result().error == E.OPERATION_NOT_ATTEMPTED
        await transport.answer(ok(transport.requests[0]))
        assert first.result().isr == (1, 2)
        assert sent(transport.requests[1]) == {A1: (1, [1], 0)}
        await transport.answer(ok(transport.requests[1]))
        assert other.result().isr == (1,)
        # answered: the partition may propose again
        later = manager.submit(A0, 3, [1], 11)
        await turns()
        assert sent(transport.requests[2]) == {A0: (3, [1], 11)}
        await transport.answer(ok(transport.requests[2]))
        assert later.result() == IsrChangeResult(E.NONE, (1,), 12)

    run(scenario)


def test_transport_failure_and_not_controller_resend_after_a_back_off():
    async def scenario(manager, transport, scheduler, epoch):
        future = manager.submit(A0, 3, [1, 2], 10)
        await turns()
        await transport.answer(OSError("connection refused"))
        assert len(transport.requests) == 1 and not future.done()
        late = manager.submit(A1, 1, [1], 0)  # joins the retry; nothing leaves before it
        await scheduler.advance(CONTROLLER_BACKOFF_MS - 1)
        await turns()
        assert len(transport.requests) == 1
        await scheduler.advance(1)
        await turns()
        assert len(transport.requests) == 2
        assert sent(transport.requests[1]) == {A0: (3, [1, 2], 10), A1: (1, [1], 0)}
        # NOT_CONTROLLER at the top level: the same again
        await transport.answer(AlterPartitionAnswer(E.NOT_CONTROLLER))
        await scheduler.advance(CONTROLLER_BACKOFF_MS)
        await turns()
        assert len(transport.requests) == 3 and not future.done()
        # NOT_CONTROLLER for one partition (a stale controller): the whole request is sent again,
        # nothing is completed (Kafka's channel re-queues it)
        answer = ok(transport.requests[2])
        answer.partitions[A1] = PartitionResult(E.NOT_CONTROLLER)
        await transport.answer(answer)
        assert not future.done() and not late.done()
        await scheduler.advance(CONTROLLER_BACKOFF_MS)
        await turns()
        assert len(transport.requests) == 4
        await transport.answer(ok(transport.requests[3]))
        assert future.result().isr == (1, 2) and late.result().isr == (1,)

    run(scenario)


def test_a_top_level_error_is_retried_with_the_broker_epoch_read_again():
    async def scenario(manager, transport, scheduler, epoch):
        future = manager.submit(A0, 3, [1, 2], 10)
        await turns()
        assert transport.requests[0].broker_epoch == 500
        epoch["value"] = 600  # re-registered meanwhile (a new ZooKeeper session)
        await transport.answer(AlterPartitionAnswer(E.STALE_BROKER_EPOCH))
        await scheduler.advance(RETRY_BACKOFF_MS - 1)
        await turns()
        assert len(transport.requests) == 1
        await scheduler.advance(1)
        await turns()
        assert len(transport.requests) == 2 and transport.requests[1].broker_epoch == 600
        await transport.answer(AlterPartitionAnswer(E.UNKNOWN_SERVER_ERROR))
        await scheduler.advance(RETRY_BACKOFF_MS)
        await turns()
        await transport.answer(ok(transport.requests[2]))
        assert future.result() == IsrChangeResult(E.NONE, (1, 2), 11)

    run(scenario)


def test_partition_errors_complete_their_proposal_and_an_omitted_partition_is_sent_again():
    async def scenario(manager, transport, scheduler, epoch):
        blocker = manager.submit(TopicPartition("x", 0), 0, [1], 0)
        await turns()
        futures = {tp: manager.submit(tp, 7, [1, 2], 4) for tp in (A0, A1, B0, TopicPartition("c", 0),
                                                                  TopicPartition("d", 0), TopicPartition("e", 0))}
        await transport.answer(ok(transport.requests[0]))
        assert blocker.result().error == E.NONE
        request = transport.requests[1]
        assert len(request.proposals) == 6
        answer = AlterPartitionAnswer(E.NONE, {
            A0: PartitionResult(E.FENCED_LEADER_EPOCH),
            A1: PartitionResult(E.INVALID_UPDATE_VERSION),
            B0: PartitionResult(E.OPERATION_NOT_ATTEMPTED),
            # success, but for another leader epoch / an older partition epoch: not adopted
            TopicPartition("c", 0): PartitionResult(E.NONE, 1, 8, (1, 2), 5),
            TopicPartition("d", 0): PartitionResult(E.NONE, 1, 7, (1, 2), 3),
            # "e" omitted
        })
        await transport.answer(answer)
        assert futures[A0].result() == IsrChangeResult(E.FENCED_LEADER_EPOCH)
        assert futures[A1].result() == IsrChangeResult(E.INVALID_UPDATE_VERSION)
        assert futures[B0].result() == IsrChangeResult(E.OPERATION_NOT_ATTEMPTED)
        assert futures[TopicPartition("c", 0)].result() == IsrChangeResult(E.FENCED_LEADER_EPOCH)
        assert futures[TopicPartition("d", 0)].result() == IsrChangeResult(E.INVALID_UPDATE_VERSION)
        e = futures[TopicPartition("e", 0)]
        assert not e.done() and manager.pending == {TopicPartition("e", 0)}
        assert sent(transport.requests[2]) == {TopicPartition("e", 0): (7, [1, 2], 4)}
        # an idempotent answer (same partition epoch: the state was already the proposal) is adopted
        await transport.answer(AlterPartitionAnswer(E.NONE, {
            TopicPartition("e", 0): PartitionResult(E.NONE, 1, 7, (1, 2), 4)}))
        assert e.result() == IsrChangeResult(E.NONE, (1, 2), 4)

    run(scenario)


def test_shutdown_cancels_what_is_pending_and_refuses_new_proposals():
    async def scenario(manager, transport, scheduler, epoch):
        future = manager.submit(A0, 3, [1, 2], 10)
        await turns()
        await manager.shutdown()
        assert future.cancelled() and transport.closed and not manager.in_flight
        assert manager.submit(A1, 1, [1], 0).result().error == E.OPERATION_NOT_ATTEMPTED

    run(scenario)


# --- the transport ---------------------------------------------------------------------------------


def test_wire_form_round_trips_through_the_codec():
    request = AlterPartition(4, 1234, (IsrProposal(A0, 3, (4, 5), 10), IsrProposal(B0, 1, (4,), 2, 1),
                                      IsrProposal(A1, 2, (4, 6), 7)))
    for version in (0, 1):
        frame = memoryview(codec.encode_request(ApiKey.ALTER_PARTITION, version, 9, "b", request_to_wire(request, version)))
        header, offset = codec.decode_request_header(frame[4:])
        decoded = request_from_wire(codec.decode_request(ApiKey.ALTER_PARTITION, version, frame[4:], offset))
        expected = request if version else AlterPartition(4, 1234, tuple(
            IsrProposal(p.topic_partition, p.leader_epoch, p.new_isr, p.partition_epoch) for p in request.proposals))
        # grouped by topic on the wire: a-0, a-1, b-0
        assert list(decoded.proposals) == sorted(expected.proposals, key=lambda p: p.topic_partition)
        assert (decoded.broker_id, decoded.broker_epoch) == (4, 1234)
    answer = AlterPartitionAnswer(E.NONE, {A0: PartitionResult(E.NONE, 4, 3, (4, 5), 11),
                                           B0: PartitionResult(E.FENCED_LEADER_EPOCH, 0, 0, (), 0)})
    frame = memoryview(codec.encode_response(ApiKey.ALTER_PARTITION, 1, 9, answer_to_wire(answer)))
    assert answer_from_wire(codec.decode_response(ApiKey.ALTER_PARTITION, 1, frame[4:])[1]) == answer


def metadata(controller_id: int, *brokers: LiveBroker) -> MetadataCache:
    cache = MetadataCache(BROKER_ID)
    cache.update_metadata(UpdateMetadata(controller_id, 1, -1, [], list(brokers), {}))
    return cache


def test_no_known_controller_is_a_transport_failure():
    async def main() -> None:
        transport = ControllerTransport(BROKER_ID, MetadataCache(BROKER_ID), lambda: None)
        with pytest.raises(ControllerUnavailableError):
            await transport.send(AlterPartition(BROKER_ID, 1, ()))
        transport = ControllerTransport(BROKER_ID, metadata(3, broker(1), broker(2)), lambda: None)
        with pytest.raises(ControllerUnavailableError):  # named, but not among the live brokers
            await transport.send(AlterPartition(BROKER_ID, 1, ()))

    asyncio.run(main())


def test_over_a_socket_to_another_brokers_alter_partition_handler():
    """The request travels as AlterPartition v1 to the broker the metadata names, through the real
    dispatcher and handler; its controller answers; NOT_CONTROLLER drops the connection."""

    async def main() -> None:
        seen: list[tuple[AlterPartition, int]] = []
        committed = AlterPartitionAnswer(E.NONE, {A0: PartitionResult(E.NONE, 1, 3, (1, 2), 11)})
        answers = [committed, AlterPartitionAnswer(E.NOT_CONTROLLER)]

        async def alter_partition(request: AlterPartition, version: int) -> AlterPartitionAnswer:
            seen.append((request, version))
            return answers.pop(0)

        remote = SimpleNamespace(controller=SimpleNamespace(alter_partition=alter_partition), authorizer=AllowAllAuthorizer(),
                                 api_versions=supported_api_versions(), quotas=SimpleNamespace(enabled=False))
        server = SocketServer([Endpoint("PLAINTEXT", "127.0.0.1", 0)], RequestDispatcher(remote), 1 << 20)
        await server.start()
        port = server.bound[0][1]
        controller = LiveBroker(2, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", port),))
        transport = ControllerTransport(BROKER_ID, metadata(2, broker(1), controller), lambda: None, timeout_s=5)
        try:
            request = AlterPartition(BROKER_ID, 77, (IsrProposal(A0, 3, (1, 2), 10),))
            assert await transport.send(request) == committed
            assert seen == [(request, 1)]
            assert (await transport.send(request)).error == E.NOT_CONTROLLER
            assert transport._connection is None  # the stale controller's connection is dropped
        finally:
            await transport.close()
            await server.stop()

    asyncio.run(main())


def test_in_process_to_this_brokers_own_controller(tmp_path):
    """Manager → transport → this broker's real Controller: the ISR is committed in the store and
    announced; a proposal based on a stale partition epoch gets INVALID_UPDATE_VERSION."""

    async def main() -> None:
        store = ClusterStore(str(tmp_path))
        recorder = Recorder()
        controller = Controller(BROKER_ID, store, ControllerChannelManager(recorder.connect))
        controller.listener(store.listener)
        for b in (1, 2, 3):
            await store.register_broker(broker(b))
        controller.start()
        await settle(controller)
        await store.create_topic("a", uuid.uuid4(), [[1, 2, 3]], {})
        await settle(controller)
        cache = metadata(BROKER_ID, broker(1), broker(2), broker(3))
        manager = AlterPartitionManager(
            BROKER_ID, lambda: controller.context.broker_epochs[BROKER_ID],
            ControllerTransport(BROKER_ID, cache, lambda: controller),
        )
        try:
            result = await manager.submit(A0, 0, [1, 3], 0)
            assert result == IsrChangeResult(E.NONE, (1, 3), 1)
            assert (await store.read_topics(["a"]))["a"].partitions[0].isr == [1, 3]
            stale = await manager.submit(A0, 0, [1], 0)
            assert stale.error == E.INVALID_UPDATE_VERSION
        finally:
            await manager.shutdown()
            await controller.shutdown()
            await store.close()

    asyncio.run(main())
