"""The leader side of AlterPartition: this broker's proposed ISRs, on their way to the controller.

Owns Kafka's ``DefaultAlterPartitionManager`` together with the retry rules of the
broker-to-controller channel it sends through (``BrokerToControllerChannelManager``):

* at most one pending proposal per partition: a second ``submit`` for a partition whose previous
  proposal is not answered yet fails at once with OPERATION_NOT_ATTEMPTED (the leader resets to
  its committed ISR and proposes again later);
* at most one request in flight: whatever is pending when it leaves goes in one AlterPartition
  request (proposals stay pending until their answer; those submitted meanwhile go next);
* no timeout: a request that could not be delivered, or that the controller answered with
  NOT_CONTROLLER (at the top level or for any partition), is sent again to the controller the
  metadata then names, after `CONTROLLER_BACKOFF_MS`; any other top-level error (e.g.
  STALE_BROKER_EPOCH) is retried after `RETRY_BACKOFF_MS` with the broker epoch read again;
* per-partition answers complete each proposal's future with an `IsrChangeResult`: the committed
  ISR and partition epoch, or the partition's error. A partition the answer omits stays pending
  and is sent again. A success whose leader epoch is not the proposal's (FENCED_LEADER_EPOCH) or
  whose partition epoch is older (INVALID_UPDATE_VERSION) is not adopted (Kafka's
  ``Partition.handleAlterPartitionUpdate`` ignores it).

Where the request goes is a `AlterPartitionTransport`: `ControllerTransport` sends to the
controller this broker's metadata cache names, over a socket, or in-process to this broker's own
`Controller` when it is the controller. Tests inject a fake transport and a mock scheduler. All of
it runs on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from pybroker.client.connection import BrokerConnection
from pybroker.client.inter_broker import DIRECT, InterBrokerClient
from pybroker.common.errors import ErrorCode
from pybroker.controller.alter_partition import (
    ALTER_PARTITION_VERSION,
    AlterPartition,
    AlterPartitionAnswer,
    IsrProposal,
    PartitionResult,
    answer_from_wire,
    request_to_wire,
)
from pybroker.protocol.api_keys import ApiKey
from pybroker.scheduler import AsyncioScheduler, Scheduler, Timer
from pybroker.server.metadata_cache import MetadataCache
from pybroker.server.partition import IsrChangeResult
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

#: Kafka's retry of a request answered with a top-level error ("send-alter-partition", 50 ms).
RETRY_BACKOFF_MS = 50
#: Kafka's channel, when the controller is unknown or unreachable: it polls for a new one every
#: 100 ms (reconnect.backoff.ms is 50).
CONTROLLER_BACKOFF_MS = 100


class ControllerUnavailableError(Exception):
    """No controller to send to: the metadata names none, or it advertises no listener."""


class AlterPartitionTransport(Protocol):
    async def send(self, request: AlterPartition) -> AlterPartitionAnswer:
        """Deliver ``request`` to the current controller and return its answer; raises (OSError,
        TimeoutError, KafkaClientError, ControllerUnavailableError, ...) when it could not."""
        ...

    async def close(self) -> None:
        ...


@dataclass
class _Pending:
    proposal: IsrProposal
    future: asyncio.Future[IsrChangeResult]


class AlterPartitionManager:
    """`IsrChangeSubmitter` that batches proposals into AlterPartition requests."""

    def __init__(
        self, broker_id: int, broker_epoch: Callable[[], int], transport: AlterPartitionTransport,
        scheduler: Scheduler | None = None, retry_backoff_ms: float = RETRY_BACKOFF_MS,
        controller_backoff_ms: float = CONTROLLER_BACKOFF_MS,
    ) -> None:
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self.transport = transport
        self._scheduler: Scheduler = scheduler or AsyncioScheduler()
        self.retry_backoff_ms = retry_backoff_ms
        self.controller_backoff_ms = controller_backoff_ms
        self._unsent: dict[TopicPartition, _Pending] = {}
        self._in_flight: asyncio.Task[None] | None = None
        self._retry: Timer | None = None
        self._closed = False

    @property
    def pending(self) -> set[TopicPartition]:
        """The partitions whose proposal is not answered yet."""
        return set(self._unsent)

    @property
    def in_flight(self) -> bool:
        return self._in_flight is not None

    def submit(
        self, tp: TopicPartition, leader_epoch: int, new_isr: list[int], partition_epoch: int
    ) -> asyncio.Future[IsrChangeResult]:
        future: asyncio.Future[IsrChangeResult] = asyncio.get_running_loop().create_future()
        if self._closed or tp in self._unsent:
            future.set_result(IsrChangeResult(ErrorCode.OPERATION_NOT_ATTEMPTED))
            return future
        self._unsent[tp] = _Pending(IsrProposal(tp, leader_epoch, tuple(new_isr), partition_epoch), future)
        self._maybe_propagate()
        return future

    def _maybe_propagate(self) -> None:
        """Send everything pending, unless a request is in flight or a retry is scheduled."""
        if self._closed or not self._unsent or self._in_flight is not None or self._retry is not None:
            return
        batch = list(self._unsent.values())
        self._in_flight = asyncio.get_running_loop().create_task(self._send(batch), name="alter-partition")

    def _retry_later(self, delay_ms: float) -> None:
        def retry() -> None:
            self._retry = None
            self._maybe_propagate()

        self._retry = self._scheduler.call_later(delay_ms, retry)

    async def _send(self, batch: list[_Pending]) -> None:
        request = AlterPartition(self.broker_id, self._broker_epoch(), tuple(p.proposal for p in batch))
        try:
            answer = await self.transport.send(request)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.info("AlterPartition for %d partition(s) not delivered (%s); retrying", len(batch), e)
            answer = AlterPartitionAnswer(ErrorCode.NETWORK_EXCEPTION)
        self._in_flight = None
        error = self._handle(answer, batch)
        if error == ErrorCode.NONE:
            self._maybe_propagate()
        elif error in (ErrorCode.NETWORK_EXCEPTION, ErrorCode.NOT_CONTROLLER):
            self._retry_later(self.controller_backoff_ms)
        else:
            log.warning("The controller answered AlterPartition with %s; retrying", error.name)
            self._retry_later(self.retry_backoff_ms)

    def _handle(self, answer: AlterPartitionAnswer, batch: list[_Pending]) -> ErrorCode:
        """Complete the proposals the answer settles; the error that decides the next send."""
        if answer.error != ErrorCode.NONE:
            return answer.error
        if any(r.error == ErrorCode.NOT_CONTROLLER for r in answer.partitions.values()):
            return ErrorCode.NOT_CONTROLLER  # the channel sends the whole request again
        for pending in batch:
            tp = pending.proposal.topic_partition
            result = answer.partitions.get(tp)
            if result is None:
                log.warning("Partition %s was sent in AlterPartition but not answered; sending it again", tp)
                continue
            if self._unsent.get(tp) is pending:
                del self._unsent[tp]
            if not pending.future.done():
                pending.future.set_result(_isr_change_result(pending.proposal, result))
        return ErrorCode.NONE

    async def shutdown(self) -> None:
        """Stop sending; proposals still pending are cancelled (their partitions stop leading)."""
        self._closed = True
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        task, self._in_flight = self._in_flight, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        for pending in self._unsent.values():
            pending.future.cancel()
        self._unsent.clear()
        await self.transport.close()


def _isr_change_result(proposal: IsrProposal, result: PartitionResult) -> IsrChangeResult:
    if result.error != ErrorCode.NONE:
        return IsrChangeResult(result.error)
    if result.leader_epoch != proposal.leader_epoch:
        log.debug("Ignoring the ISR %s of %s: leader epoch %d, ours %d", list(result.isr),
                  proposal.topic_partition, result.leader_epoch, proposal.leader_epoch)
        return IsrChangeResult(ErrorCode.FENCED_LEADER_EPOCH)
    if result.partition_epoch < proposal.partition_epoch:
        log.debug("Ignoring the ISR %s of %s: partition epoch %d, ours %d", list(result.isr),
                  proposal.topic_partition, result.partition_epoch, proposal.partition_epoch)
        return IsrChangeResult(ErrorCode.INVALID_UPDATE_VERSION)
    return IsrChangeResult(ErrorCode.NONE, tuple(result.isr), result.partition_epoch)


class LocalController(Protocol):
    def alter_partition(self, request: AlterPartition, version: int) -> Awaitable[AlterPartitionAnswer]: ...


class ControllerTransport:
    """`AlterPartitionTransport` to the controller ``metadata_cache`` names: this broker's own
    controller in-process, or another broker over one kept connection (dropped on failure,
    on NOT_CONTROLLER, and when the controller moves)."""

    def __init__(
        self, broker_id: int, metadata_cache: MetadataCache, local_controller: Callable[[], LocalController],
        timeout_s: float = 30.0, inter_broker: InterBrokerClient = DIRECT,
    ) -> None:
        self._inter_broker = inter_broker
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self._local_controller = local_controller
        self._timeout_s = timeout_s
        self._connection: BrokerConnection | None = None
        self._connected_to: tuple[int, str, int] | None = None

    async def send(self, request: AlterPartition) -> AlterPartitionAnswer:
        controller_id = self.metadata_cache.controller_id
        if controller_id == self.broker_id:
            await self.close()
            return await self._local_controller().alter_partition(request, ALTER_PARTITION_VERSION)
        controller = self.metadata_cache.alive_broker(controller_id) if controller_id >= 0 else None
        endpoint = None if controller is None else self._inter_broker.endpoint(controller)
        if endpoint is None:
            raise ControllerUnavailableError(f"no reachable controller (controller id {controller_id})")
        target = (controller_id, endpoint.host, endpoint.port)
        if self._connection is None or self._connected_to != target:
            await self.close()
            connection = self._inter_broker.connection(endpoint.host, endpoint.port, f"broker-{self.broker_id}-alter-partition")
            await connection.connect(self._timeout_s)
            self._connection, self._connected_to = connection, target
        try:
            version = self._connection.version_for(ApiKey.ALTER_PARTITION, ALTER_PARTITION_VERSION)
            message = await self._connection.send(
                ApiKey.ALTER_PARTITION, request_to_wire(request, version), version, timeout=self._timeout_s
            )
        except BaseException:
            await self.close()
            raise
        answer = answer_from_wire(message)
        if answer.error == ErrorCode.NOT_CONTROLLER or any(
            r.error == ErrorCode.NOT_CONTROLLER for r in answer.partitions.values()
        ):
            await self.close()
        return answer

    async def close(self) -> None:
        connection, self._connection, self._connected_to = self._connection, None, None
        if connection is not None:
            await connection.close()
