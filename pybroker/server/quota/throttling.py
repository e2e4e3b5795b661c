"""Client quota enforcement around each request (Kafka's ``KafkaApis`` throttling and
``RequestHandlerHelper``), asked by the dispatcher only while quotas are enabled.

After a request is handled, as its response is about to be encoded:

- Produce records the request's size (the frame, as Kafka's ``request.sizeInBytes``) against the
  producer byte rate, and its time against the request quota (not with acks=0, which has no
  response but may still be throttled by the byte rate).
- A consumer's Fetch records the records it returns against the fetch byte rate and its time
  against the request quota; when throttled, the bytes are taken back and the response is empty
  (Kafka's ``getThrottledResponse``).
- Every other request records its time against the request quota.
- Inter-broker requests (Kafka's ``clusterAction`` APIs, WriteTxnMarkers) and followers' fetches
  are exempt; a follower's fetch records the bytes of its throttled partitions against the
  leader replication quota instead.

A Fetch handler answers with a `DeferredResponse`: its response depends on this decision
(Kafka's ``processResponseCallback``): a throttled consumer gets the fetch context's empty
throttled response (no fetch session created or updated), everyone else the full one.

A throttle sets ``throttle_time_ms`` in the response, which is sent at once, and mutes the
connection for that long (`KafkaConnection.throttle`): KIP-219, as Kafka 3.6 does for every
version — clients from the versions Kafka lists in ``shouldClientThrottle`` also back off by
themselves; older ones are held back by the muted channel.

Request time (``request_percentage``): pybroker has one event loop instead of Kafka's request
handler threads, so a request's time is the event loop time its handler took synchronously
(the call that decodes it into a response or a future) — waits (purgatories, disk syncs,
ZooKeeper) are not counted, as a Kafka handler thread does not count them either. The percentage
is of one thread's time: 100 means the whole event loop for the window.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import FetchResponse
from pybroker.scheduler import Scheduler, Time
from pybroker.types import TopicPartition
from pybroker.zookeeper.znodes import sanitize

if TYPE_CHECKING:
    from pybroker.network.connection import KafkaConnection
    from pybroker.server.quota.client_quota_manager import ClientQuotaManager
    from pybroker.server.quota.replication_quota_manager import ReplicationQuotaManager

    class QuotaManagers(Protocol):
        """The quota managers a throttler records against (`quota_managers.QuotaManagers`)."""

        produce: ClientQuotaManager
        fetch: ClientQuotaManager
        request: ClientQuotaManager
        leader: ReplicationQuotaManager
        client_quotas_enabled: bool

#: APIs whose responses Kafka sends with ``sendResponseExemptThrottle`` (inter-broker).
EXEMPT_APIS = frozenset({
    ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN,
    ApiKey.WRITE_TXN_MARKERS, ApiKey.ALTER_PARTITION,
})
NANOS_TO_PERCENTAGE_PER_SECOND = 100.0 / 1e9


class DeferredResponse(ABC):
    """A handler's answer whose response is built once the client quotas have decided (the
    dispatcher resolves it with ``respond(0)`` when no quota applies)."""

    __slots__ = ()

    @abstractmethod
    def response_size(self) -> int:
        """The bytes the full response counts against a byte-rate quota (changes nothing)."""

    @abstractmethod
    def respond(self, throttle_time_ms: int) -> Any:
        """The response: in full (``throttle_time_ms`` 0), or the empty throttled one."""


def resolved(response: Any) -> Any:
    """``response``, with a `DeferredResponse` answered in full."""
    return response.respond(0) if isinstance(response, DeferredResponse) else response


@functools.lru_cache(maxsize=4096)
def _sanitized(name: str) -> str:
    return sanitize(name)


class RequestThrottler:
    """Records requests against the client quotas and throttles their connections."""

    def __init__(self, quotas: QuotaManagers, time: Time, scheduler: Scheduler) -> None:
        self.quotas = quotas
        self.time = time
        self.scheduler = scheduler
        #: Whether a partition led here is throttled by its leader.replication.throttled.replicas
        #: (set by `QuotaManagers.install` to the replica manager's check).
        self.leader_throttled: Callable[[TopicPartition], bool] = lambda tp: False

    def complete(
        self, api_key: int, request: Any, response: Any, connection: KafkaConnection, client_id: str | None,
        request_size: int, handler_ns: int,
    ) -> Any:
        """Record the request, set ``throttle_time_ms`` in ``response`` (None: no response) and
        mute the connection when a quota is violated. Returns the response to send (an empty one
        for a throttled fetch)."""
        if api_key in EXEMPT_APIS:
            return response
        quotas = self.quotas
        if api_key == ApiKey.FETCH and request.replica_id >= 0:
            response = resolved(response)
            if response is not None and quotas.leader.active:
                self._record_leader_replication(response)
            return response
        if not quotas.client_quotas_enabled:
            return resolved(response)
        user = _sanitized(connection.principal.name)
        client = _sanitized(client_id or "")
        now = self.time.monotonic_ms()
        request_ms = 0
        if not (api_key == ApiKey.PRODUCE and request.acks == 0):
            request_ms = quotas.request.record_and_get_throttle_time_ms(
                user, client, handler_ns * NANOS_TO_PERCENTAGE_PER_SECOND, now)
        bandwidth_ms = 0
        if api_key == ApiKey.PRODUCE:
            bandwidth_ms = quotas.produce.record_and_get_throttle_time_ms(user, client, request_size, now)
        elif api_key == ApiKey.FETCH and response is not None:
            deferred = isinstance(response, DeferredResponse)
            size = response.response_size() if deferred else fetch_response_size(response)
            bandwidth_ms = quotas.fetch.record_and_get_throttle_time_ms(user, client, size, now)
            if max(bandwidth_ms, request_ms) > 0:
                quotas.fetch.unrecord(user, client, size, now)
                response = response.respond(max(bandwidth_ms, request_ms)) if deferred else FetchResponse(
                    throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0, responses=[])
        response = resolved(response)
        throttle_ms = max(bandwidth_ms, request_ms)
        if throttle_ms > 0:
            if response is not None and hasattr(response, "throttle_time_ms"):
                response.throttle_time_ms = throttle_ms
            connection.throttle(throttle_ms, self.scheduler, now)
        return response

    def _record_leader_replication(self, response: Any) -> None:
        """Kafka's ``sizeOfThrottledPartitions``: a follower's fetch counts the records of its
        throttled partitions against the leader replication quota."""
        throttled = self.leader_throttled
        size = 0
        for topic in response.responses:
            for p in topic.partitions:
                if p.records is not None and len(p.records) and throttled(TopicPartition(topic.topic, p.partition_index)):
                    size += len(p.records)
        if size:
            self.quotas.leader.record(size)


def fetch_response_size(response: Any) -> int:
    """The bytes a consumer's fetch returns: its records (what the byte rate is about)."""
    return sum(len(p.records) for topic in response.responses for p in topic.partitions if p.records is not None)
