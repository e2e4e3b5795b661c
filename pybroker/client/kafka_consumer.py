"""The project's group consumer (Kafka's ``KafkaConsumer``, classic protocol), with KIP-253 gating.

Owns what an application sees: ``subscribe(topics, rebalance_listener, partition_key_listener)``,
``poll(timeout_ms)`` and ``async for`` yielding `ConsumerRecord` s, ``commit()``, ``close()``,
and behind them:

- **Membership** through `ConsumerCoordinator` (JoinGroup/SyncGroup, heartbeats, LeaveGroup);
  a rejoin happens inside ``poll`` when the coordinator asks for one, after committing (with
  ``enable.auto.commit``) and ``on_partitions_revoked``. A member also rejoins when a subscribed
  topic's partitions or KIP-253 counts changed since its last look, the group leader when they
  differ from those it assigned (metadata is
  refreshed every ``metadata.max.age.ms``, and at once after INVALID_PARTITION_METADATA,
  which then makes any member rejoin as soon as its metadata shows the new counts, looked for
  every ``retry.backoff.ms``, seed §8.6).
- **Positions**: the committed offset of each assigned partition, else ``auto.offset.reset``
  (``latest`` by default, ``earliest``, ``none``); a partition created by an expansion that the
  group never committed starts at its beginning whatever the reset policy, since its keys were
  another partition's (gated below). ``enable.auto.commit`` commits the positions every
  ``auto.commit.interval.ms`` from ``poll``, before a rebalance and on ``close``.
- **Fetching**: one Fetch per leader for every assigned partition with nothing buffered and
  something deliverable, carrying each topic's ``UndeletedPartitionCount`` (Fetch v12); each
  fetched buffer is decoded with one ``_native.read_records`` call (after
  ``validate_replicated_batches`` cuts a trailing partial batch). With
  ``isolation.level=read_committed`` the leader returns records below the last stable offset
  and the transactions aborted among them; records of aborted transactions are dropped per
  batch (`fetcher.aborted_ranges`, Kafka's rule) and positions move past them and past
  transaction markers. Committed offsets are then read with OffsetFetch's ``RequireStable``
  (KIP-447): offsets a transaction is still committing are waited for.
- **Gating** (KIP-253, `gating.GateKeeper`): for topics with ``enable.ordered.delivery`` not
  "false" whose counts show a change, records of a gated partition are delivered only below its
  hold. While something is held, other members wait on partitions this member owns, or its
  assignment is younger than ``heartbeat.interval.ms``, it exchanges ConsumerGroupPosition with
  the coordinator every ``GATE_POLL_MS``; otherwise every ``heartbeat.interval.ms``. Before
  reporting positions of partitions others wait on it calls ``on_partition_key_maybe_revoked``;
  when a hold lifts, ``on_partition_key_assigned``. Both run inside ``poll``, like Kafka's
  rebalance callbacks.

``group_metadata()`` gives the member's `ConsumerGroupMetadata` for a transactional producer's
``send_offsets_to_transaction`` (consume-transform-produce).

Not done: manual ``assign()``/``seek()``, pattern subscriptions, cooperative rebalancing,
static membership, record headers in `ConsumerRecord` (``read_records`` does not return them).
"""

from __future__ import annotations

import asyncio
import bisect
import inspect
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pybroker import _native
from pybroker.client.admin import LEADERSHIP_ERRORS, Admin, AdminError
from pybroker.client.connection import KafkaClientError
from pybroker.client.consumer_coordinator import (
    CommitFailedError,
    ConsumerCoordinator,
    ConsumerGroupMetadata,
    GroupConfig,
)
from pybroker.client.fetcher import READ_COMMITTED, FetcherConfig, aborted_ranges, drop_ranges
from pybroker.client.gating import GateKeeper
from pybroker.client.node import Node
from pybroker.client.properties import int_property
from pybroker.client.security import PLAINTEXT, ClientSecurity, security_from_properties
from pybroker.client.topic_layout import TopicLayout
from pybroker.common.errors import ErrorCode
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import FetchRequest
from pybroker.scheduler import SYSTEM_TIME, Time
from pybroker.types import TopicPartition

log = logging.getLogger(__name__)

GATE_POLL_MS = 100  # ConsumerGroupPosition cadence while something is held or waited on
ORDERED_DELIVERY_CONFIG = "enable.ordered.delivery"
ResetPolicy = Literal["latest", "earliest", "none"]  # auto.offset.reset
RESET_POLICIES: tuple[ResetPolicy, ...] = ("latest", "earliest", "none")


@dataclass(frozen=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


class NoOffsetForPartitionError(Exception):
    """``auto.offset.reset=none`` and a partition has no committed offset (or it is out of range)."""


class ConsumerRebalanceListener:
    """Kafka's ``ConsumerRebalanceListener``; methods may be ``async``. No-ops by default."""

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> Any:
        """Before a rebalance, with every partition this member had."""

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> Any:
        """After a rebalance, with the partitions this member now has."""


class PartitionKeyRebalanceListener:
    """KIP-253's listener (research §1.7 #1); methods may be ``async``. No-ops by default."""

    def on_partition_key_maybe_revoked(self, partitions: list[TopicPartition]) -> Any:
        """Other members wait on these partitions of this member: keys of their records may move
        to other partitions, so flush per-key state now (called before each position report)."""

    def on_partition_key_assigned(self, partitions: list[TopicPartition]) -> Any:
        """A gate of these partitions opened: keys that were another partition's arrive here
        from now on, so load per-key state."""


async def _call(method: Any, partitions: list[TopicPartition]) -> None:
    result = method(partitions)
    if inspect.isawaitable(result):
        await result


@dataclass
class ConsumerConfig:
    """Kafka's consumer settings that this consumer honours (Kafka's names and defaults)."""

    bootstrap_servers: str = "localhost:9092"
    group_id: str | None = None
    client_id: str = "pybroker-consumer"
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    auto_offset_reset: ResetPolicy = "latest"
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 300000
    max_poll_records: int = 500
    metadata_max_age_ms: int = 300000
    retry_backoff_ms: int = 100
    request_timeout_ms: int = 30000
    fetch: FetcherConfig | None = None
    security: ClientSecurity = PLAINTEXT  # security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> ConsumerConfig:
        text = {k: str(v) for k, v in props.items()}
        reset = text.get("auto.offset.reset", "latest").strip().lower()
        if reset not in RESET_POLICIES:
            raise ValueError(f"Invalid value {reset} for configuration auto.offset.reset: "
                             "String must be one of: latest, earliest, none")
        auto_commit = text.get("enable.auto.commit", "true").strip().lower()
        if auto_commit not in ("true", "false"):
            raise ValueError(f"Invalid value {auto_commit} for configuration enable.auto.commit: Expected value to be either true or false")
        return cls(
            bootstrap_servers=text.get("bootstrap.servers", cls.bootstrap_servers),
            group_id=text.get("group.id"),
            client_id=text.get("client.id", cls.client_id),
            enable_auto_commit=auto_commit == "true",
            auto_commit_interval_ms=int_property(text, "auto.commit.interval.ms", cls.auto_commit_interval_ms, 0),
            auto_offset_reset=reset,
            session_timeout_ms=int_property(text, "session.timeout.ms", cls.session_timeout_ms, 1),
            heartbeat_interval_ms=int_property(text, "heartbeat.interval.ms", cls.heartbeat_interval_ms, 1),
            max_poll_interval_ms=int_property(text, "max.poll.interval.ms", cls.max_poll_interval_ms, 1),
            max_poll_records=int_property(text, "max.poll.records", cls.max_poll_records, 1),
            metadata_max_age_ms=int_property(text, "metadata.max.age.ms", cls.metadata_max_age_ms, 0),
            retry_backoff_ms=int_property(text, "retry.backoff.ms", cls.retry_backoff_ms, 0),
            request_timeout_ms=int_property(text, "request.timeout.ms", cls.request_timeout_ms, 1),
            fetch=FetcherConfig.from_properties(text),
            security=security_from_properties(text),
        )


class _Partition:
    """An assigned partition: where delivery stands, and what was fetched ahead of it."""

    __slots__ = ("position", "fetch_offset", "records", "index")

    def __init__(self) -> None:
        self.position = -1  # the offset of the next record to deliver (-1: not known yet)
        self.fetch_offset = -1
        self.records: list[tuple[int, int, bytes | None, bytes | None]] = []
        self.index = 0  # records[index:] are not delivered yet

    @property
    def buffered(self) -> bool:
        return self.index < len(self.records)


class KafkaConsumer:
    """``async with KafkaConsumer({"bootstrap.servers": ..., "group.id": "g"}) as consumer:``
    ``consumer.subscribe(["t"])``; ``records = await consumer.poll(1000)`` or
    ``async for record in consumer``; ``await consumer.commit()``."""

    def __init__(self, config: Mapping[str, object] | ConsumerConfig | None = None, *,
                 time: Time = SYSTEM_TIME) -> None:
        self.config = config if isinstance(config, ConsumerConfig) else ConsumerConfig.from_properties(config or {})
        self.fetch_config = self.config.fetch or FetcherConfig()
        self.time = time
        self.admin = Admin(self.config.bootstrap_servers, client_id=self.config.client_id,
                           request_timeout=self.config.request_timeout_ms / 1000 + 5, security=self.config.security)
        self._coordinator: ConsumerCoordinator | None = None
        self._topics: list[str] = []
        self._rebalance_listener = ConsumerRebalanceListener()
        self._key_listener = PartitionKeyRebalanceListener()
        self._layouts: dict[str, TopicLayout] = {}
        self._ordered: dict[str, bool] = {}
        self._metadata_due = 0.0
        # A leader answered INVALID_PARTITION_METADATA: metadata is looked at every
        # retry.backoff.ms until it shows new counts (then the member rejoins).
        self._count_refused = False
        self._partitions: dict[TopicPartition, _Partition] = {}
        self._gates = GateKeeper(self.admin, self.fetch_config.isolation_level)
        self._gating_supported: bool | None = None
        self._assigned_ms = 0.0  # when the current assignment arrived
        self._requested: set[TopicPartition] = set()  # owned partitions others wait on
        self._reported: dict[TopicPartition, int] = {}
        self._exchange_due = 0.0
        self._commit_due = 0.0
        self._next: list[ConsumerRecord] = []
        self._rotation = 0
        self._started = False

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        await self.admin.connect()
        self._started = True

    async def __aenter__(self) -> KafkaConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Commit (with ``enable.auto.commit``), leave the group, close the connections."""
        if not self._started:
            return
        try:
            if self._coordinator is not None:
                if self.config.enable_auto_commit and self._partitions:
                    try:
                        await self.commit()
                    except (CommitFailedError, KafkaClientError, AdminError, TimeoutError) as e:
                        log.info("commit on close failed: %s", e)
                await self._coordinator.close()
        finally:
            self._started = False
            await self.admin.close()

    # --- the API ---------------------------------------------------------------------------------

    def subscribe(
        self, topics: Sequence[str], rebalance_listener: ConsumerRebalanceListener | None = None,
        partition_key_listener: PartitionKeyRebalanceListener | None = None,
    ) -> None:
        """Subscribe to ``topics`` (the group is joined by the next ``poll``)."""
        if not self.config.group_id:
            raise ValueError("subscribe() needs group.id")
        self._topics = list(dict.fromkeys(topics))
        self._rebalance_listener = rebalance_listener or ConsumerRebalanceListener()
        self._key_listener = partition_key_listener or PartitionKeyRebalanceListener()
        if self._coordinator is None:
            self._coordinator = ConsumerCoordinator(self.admin, GroupConfig(
                group_id=self.config.group_id, session_timeout_ms=self.config.session_timeout_ms,
                heartbeat_interval_ms=self.config.heartbeat_interval_ms,
                max_poll_interval_ms=self.config.max_poll_interval_ms,
                retry_backoff_ms=self.config.retry_backoff_ms, client_id=self.config.client_id,
            ), self.time)
        self._coordinator.rejoin_needed = True

    def assignment(self) -> list[TopicPartition]:
        return sorted(self._partitions)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """Kafka's ``groupMetadata()``: the group id with this member's current generation and
        member id (-1 and "" before it joined), for ``KafkaProducer.send_offsets_to_transaction``."""
        if not self.config.group_id:
            raise ValueError("group_metadata() needs group.id")
        coordinator = self._coordinator
        if coordinator is None:
            return ConsumerGroupMetadata(self.config.group_id)
        return ConsumerGroupMetadata(self.config.group_id, coordinator.generation, coordinator.member_id, None)

    def position(self, tp: TopicPartition) -> int:
        return self._partitions[tp].position

    async def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Commit ``offsets`` (default: the position of every assigned partition), synchronously.
        Raises CommitFailedError when the group rebalanced meanwhile."""
        coordinator = self._require_group()
        if offsets is None:
            offsets = {tp: p.position for tp, p in self._partitions.items() if p.position >= 0}
        await coordinator.commit(offsets)
        self._commit_due = self.time.monotonic_ms() + self.config.auto_commit_interval_ms

    async def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records ready for the application (at most ``max_records``, default
        ``max.poll.records``), waiting up to ``timeout_ms`` for some. Joins or rejoins the group
        when needed. The positions move past exactly the records returned."""
        coordinator = self._require_group()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while True:
            coordinator.last_poll_ms = self.time.monotonic_ms()
            await self._ensure_assignment(coordinator)
            await self._maybe_refresh_metadata(coordinator)
            if coordinator.rejoin_needed:
                continue
            await self._maybe_auto_commit()
            await self._maybe_exchange_positions(coordinator)
            records = self._collect(max_records or self.config.max_poll_records)
            if records:
                return records
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            wait_ms = min(int(remaining * 1000), self.fetch_config.max_wait_ms)
            if self._gates.gates and self._gates.holding(self._owned()):
                wait_ms = min(wait_ms, GATE_POLL_MS)
            if not await self._fetch(max(wait_ms, 0)):
                await asyncio.sleep(min(remaining, GATE_POLL_MS / 1000))

    def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        return self

    async def __anext__(self) -> ConsumerRecord:
        while not self._next:
            if not self._started:
                raise StopAsyncIteration
            self._next = await self.poll(1000)
        return self._next.pop(0)

    # --- group -----------------------------------------------------------------------------------

    def _require_group(self) -> ConsumerCoordinator:
        if self._coordinator is None:
            raise RuntimeError("subscribe() first")
        if not self._started:
            raise RuntimeError("the consumer is not started (start() it, or use 'async with')")
        return self._coordinator

    def _owned(self) -> dict[TopicPartition, int]:
        return {tp: p.position for tp, p in self._partitions.items()}

    async def _layouts_for(self, topics: Sequence[str]) -> dict[str, TopicLayout]:
        layouts: dict[str, TopicLayout] = {}
        for topic in topics:
            try:
                layouts.update(await self.admin.topic_layouts([topic]))
            except AdminError as e:
                if e.error != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    raise
        return layouts

    async def _refresh_metadata(self) -> None:
        self._layouts = await self._layouts_for(self._topics)
        self._metadata_due = self.time.monotonic_ms() + self.config.metadata_max_age_ms
        for topic in self._layouts:
            if topic not in self._ordered:
                self._ordered[topic] = await self._ordered_delivery(topic)

    async def _ordered_delivery(self, topic: str) -> bool:
        try:
            configs = await self.admin.describe_topic_configs(topic)
        except (AdminError, KafkaClientError) as e:
            log.info("cannot read the configs of topic %s (%s): ordered delivery stays on", topic, e)
            return True
        value = configs.get(ORDERED_DELIVERY_CONFIG, (None, 0))[0]
        return value is None or value.strip().lower() != "false"

    async def _maybe_refresh_metadata(self, coordinator: ConsumerCoordinator) -> None:
        if self.time.monotonic_ms() < self._metadata_due:
            return
        known = {t: layout.counts for t, layout in self._layouts.items()}
        await self._refresh_metadata()
        counts = {t: layout.counts for t, layout in self._layouts.items()}
        if known and counts != known:
            # Any member, not only the leader: the others would learn of the rebalance only from
            # their next heartbeat, while records of the new partitions wait for an owner.
            log.info("group %s: the partition counts changed: rebalancing", self.config.group_id)
            self._count_refused = False
            coordinator.rejoin_needed = True
        elif self._count_refused:  # a leader adopts a count just before brokers' metadata shows it
            self._metadata_due = self.time.monotonic_ms() + self.config.retry_backoff_ms
        elif coordinator.is_leader and counts != coordinator.assigned_layouts:
            log.info("group %s: the partitions of a subscribed topic changed: rebalancing", self.config.group_id)
            coordinator.rejoin_needed = True

    async def _ensure_assignment(self, coordinator: ConsumerCoordinator) -> None:
        if not coordinator.rejoin_needed:
            return
        if self._partitions:
            if self.config.enable_auto_commit:
                try:
                    await coordinator.commit(self._owned_positions())
                except (CommitFailedError, KafkaClientError, TimeoutError) as e:
                    log.info("commit before rebalance failed: %s", e)
            await _call(self._rebalance_listener.on_partitions_revoked, sorted(self._partitions))
        self._partitions.clear()
        self._gates.clear()
        self._requested.clear()
        self._reported.clear()
        await self._refresh_metadata()
        coordinator.user_data = json.dumps(
            {t: layout.counts for t, layout in sorted(self._layouts.items())}, separators=(",", ":")).encode()
        assigned = await coordinator.join(self._topics, self._layouts_for)
        if coordinator.rejoin_needed:
            return
        await self._refresh_metadata()
        self._partitions = {tp: _Partition() for tp in assigned}
        gated_layouts = {t: layout for t, layout in self._layouts.items() if self._ordered.get(t, True)}
        try:
            await self._gates.prepare(assigned, gated_layouts)
        except (AdminError, KafkaClientError) as e:
            log.warning("group %s: gates could not be prepared (%s): rejoining", self.config.group_id, e)
            coordinator.rejoin_needed = True
            return
        await self._init_positions(coordinator, assigned)
        self._commit_due = self.time.monotonic_ms() + self.config.auto_commit_interval_ms
        self._exchange_due = 0.0
        self._assigned_ms = self.time.monotonic_ms()
        await _call(self._rebalance_listener.on_partitions_assigned, sorted(assigned))

    def _owned_positions(self) -> dict[TopicPartition, int]:
        """Positions to commit: partitions a shrink removed since are left out (their offsets
        went with them, and committing them would only fail)."""
        def exists(tp: TopicPartition) -> bool:
            layout = self._layouts.get(tp.topic)
            return layout is None or tp.partition in layout.leaders
        return {tp: p.position for tp, p in self._partitions.items() if p.position >= 0 and exists(tp)}

    async def _init_positions(self, coordinator: ConsumerCoordinator, assigned: list[TopicPartition]) -> None:
        if not assigned:
            return
        committed = await coordinator.committed(assigned, require_stable=self.fetch_config.isolation_level == READ_COMMITTED)
        missing = [tp for tp in assigned if tp not in committed]
        for tp, offset in committed.items():
            self._set_position(tp, offset)
        created = [tp for tp in missing if (g := self._gates.gates.get(tp)) is not None and g.expansion is not None]
        await self._reset(created, "earliest")
        await self._reset([tp for tp in missing if tp not in created])

    async def _reset(self, partitions: list[TopicPartition], policy: ResetPolicy | None = None) -> None:
        if not partitions:
            return
        policy = policy or self.config.auto_offset_reset
        if policy == "none":
            raise NoOffsetForPartitionError(f"no committed offset for {sorted(map(str, partitions))} "
                                            "and auto.offset.reset is none")
        listed = await self.admin.list_offsets(partitions, policy, self.fetch_config.isolation_level)
        for tp, found in listed.items():
            self._set_position(tp, found.offset)

    def _set_position(self, tp: TopicPartition, offset: int) -> None:
        state = self._partitions.get(tp)
        if state is not None:
            state.position = state.fetch_offset = offset
            state.records, state.index = [], 0

    async def _maybe_auto_commit(self) -> None:
        if not self.config.enable_auto_commit or self.time.monotonic_ms() < self._commit_due:
            return
        try:
            await self.commit()
        except CommitFailedError as e:
            log.info("auto-commit failed: %s", e)

    # --- KIP-253 ---------------------------------------------------------------------------------

    async def _maybe_exchange_positions(self, coordinator: ConsumerCoordinator) -> None:
        if not any(self._ordered.get(t, True) and layout.changed for t, layout in self._layouts.items()):
            return
        now = self.time.monotonic_ms()
        if now < self._exchange_due:
            await self._fire_key_assigned()
            return
        if self._gating_supported is None:
            self._gating_supported = await coordinator.supports_group_position()
            if not self._gating_supported:
                log.warning("group %s: the coordinator does not offer ConsumerGroupPosition: records are "
                            "delivered without KIP-253 gating", self.config.group_id)
                self._gates.clear()
        if not self._gating_supported:
            return
        owned = self._owned()
        report = {tp: pos for tp, pos in self._owned_positions().items()
                  if tp in self._requested and self._reported.get(tp) != pos}
        if report:
            await _call(self._key_listener.on_partition_key_maybe_revoked, sorted(report))
        answer = await coordinator.group_positions(report, sorted(self._gates.interested(owned)))
        log.debug("group %s member %s: reported %s, interested in %s, answer %s", self.config.group_id,
                  coordinator.member_id, report, sorted(self._gates.interested(owned)), answer)
        if answer is not None:
            self._gates.update_group_positions(answer.positions)
            self._reported.update({tp: pos for tp, pos in report.items() if tp not in answer.report_errors})
            newly = answer.requested - self._requested
            self._requested = {tp for tp in answer.requested if tp in self._partitions}
            if newly:
                self._reported = {tp: pos for tp, pos in self._reported.items() if tp not in newly}
            if self._gates.holding(owned):
                await self._gates.refresh_offsets()
        # Busy: a gate of this member is closed, a position others wait on moved, or the assignment
        # is new (within one heartbeat interval other members prepare their gates and ask for this
        # member's positions; answered only at the heartbeat cadence, a gate could wait that long).
        busy = self._gates.holding(self._owned()) or any(
            self._reported.get(tp) != p.position for tp, p in self._partitions.items() if tp in self._requested
        ) or now < self._assigned_ms + self.config.heartbeat_interval_ms
        self._exchange_due = now + (GATE_POLL_MS if busy else self.config.heartbeat_interval_ms)
        await self._fire_key_assigned()

    async def _fire_key_assigned(self) -> None:
        opened = self._gates.newly_opened(self._owned())
        if opened:
            log.info("gates opened: %s", [str(tp) for tp in opened])
            await _call(self._key_listener.on_partition_key_assigned, sorted(opened))

    # --- delivering ------------------------------------------------------------------------------

    def _collect(self, limit: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        owned = self._owned()
        partitions = list(self._partitions.items())
        if not partitions:
            return out
        self._rotation = (self._rotation + 1) % len(partitions)
        for tp, state in partitions[self._rotation:] + partitions[:self._rotation]:
            if len(out) >= limit:
                break
            hold = self._gates.hold(tp, owned) if self._gates.gates else None
            if state.buffered:
                end = len(state.records)
                if hold is not None:
                    end = bisect.bisect_left(state.records, hold, lo=state.index, key=lambda r: r[0])
                end = min(end, state.index + limit - len(out))
                taken = state.records[state.index:end]
                if taken:
                    out += [ConsumerRecord(tp.topic, tp.partition, o, ts, k, v) for o, ts, k, v in taken]
                    state.index = end
                    state.position = taken[-1][0] + 1
                if not state.buffered:
                    state.records, state.index = [], 0
            if not state.buffered and state.fetch_offset > state.position and (hold is None or state.fetch_offset <= hold):
                state.position = state.fetch_offset  # past control batches or compacted gaps
        return out

    # --- fetching --------------------------------------------------------------------------------

    async def _fetch(self, wait_ms: int) -> bool:
        """One Fetch per leader for the partitions with nothing buffered; False when nothing
        could be fetched."""
        owned = self._owned()
        by_leader: dict[Node, list[TopicPartition]] = {}
        for tp, state in self._partitions.items():
            if state.buffered or state.fetch_offset < 0:
                continue
            hold = self._gates.hold(tp, owned) if self._gates.gates else None
            if hold is not None and state.fetch_offset >= hold:
                continue
            layout = self._layouts.get(tp.topic)
            leader = layout.leaders.get(tp.partition) if layout else None
            if leader is None:
                self._metadata_due = 0
                continue
            by_leader.setdefault(leader, []).append(tp)
        if not by_leader:
            return False
        await asyncio.gather(*(self._fetch_from(leader, tps, wait_ms) for leader, tps in by_leader.items()))
        return True

    async def _fetch_from(self, leader: Node, partitions: list[TopicPartition], wait_ms: int) -> None:
        by_topic: dict[str, list[TopicPartition]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp)
        offsets = {tp: self._partitions[tp].fetch_offset for tp in partitions}
        request = FetchRequest(
            replica_id=-1, max_wait_ms=wait_ms, min_bytes=self.fetch_config.min_bytes,
            max_bytes=self.fetch_config.max_bytes, isolation_level=self.fetch_config.isolation_level,
            session_id=0, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(
                topic=topic, partitions=[FetchRequest.FetchPartition(
                    partition=tp.partition, fetch_offset=offsets[tp],
                    partition_max_bytes=self.fetch_config.max_partition_bytes) for tp in tps],
                undeleted_partition_count=self._layouts[topic].undeleted_partition_count,
            ) for topic, tps in by_topic.items()],
            forgotten_topics_data=[],
        )
        try:
            connection = await self.admin.connection(leader)
            response = await connection.send(ApiKey.FETCH, request, timeout=wait_ms / 1000 + self.config.request_timeout_ms / 1000)
        except (KafkaClientError, OSError, TimeoutError) as e:
            log.info("fetch from %s failed: %s", leader, e)
            await self.admin.reset_connection(leader)
            self._metadata_due = 0
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
            return
        if response.error_code != ErrorCode.NONE:
            log.info("fetch from %s: %s", leader, ErrorCode.for_code(response.error_code).name)
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
            return
        reset: list[TopicPartition] = []
        for topic in response.responses:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition_index)
                state = self._partitions.get(tp)
                if state is None or state.fetch_offset != offsets.get(tp):
                    continue  # reassigned or reset meanwhile
                error = ErrorCode.for_code(p.error_code)
                if error == ErrorCode.NONE:
                    self._count_refused = False  # the leader agrees with this member's count again
                    self._fetched(tp, state, p.records, p.aborted_transactions)
                elif error == ErrorCode.OFFSET_OUT_OF_RANGE:
                    reset.append(tp)
                elif error == ErrorCode.INVALID_PARTITION_METADATA:
                    if not self._count_refused:
                        log.info("%s: the leader's partition count of %s differs: refreshing metadata to rejoin",
                                 tp, tp.topic)
                        self._count_refused = True
                    self._metadata_due = 0
                elif error in LEADERSHIP_ERRORS or error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    self._metadata_due = 0
                else:
                    log.warning("fetching %s at %d: %s", tp, offsets[tp], error.name)
        if reset:
            await self._reset(reset)

    def _fetched(self, tp: TopicPartition, state: _Partition, records: Any, aborted: Any = None) -> None:
        if not records:
            return
        info = _native.validate_replicated_batches(records, -1)
        if info.batch_count == 0:
            return
        decoded = _native.read_records(memoryview(records)[:info.valid_bytes])
        if self.fetch_config.isolation_level == READ_COMMITTED:
            pairs = [(a.producer_id, a.first_offset) for a in aborted or ()]
            decoded = drop_ranges(decoded, aborted_ranges(info.producer_batches, pairs))
        first = bisect.bisect_left(decoded, state.fetch_offset, key=lambda r: r[0])
        state.records = decoded[first:] if first else decoded
        state.index = 0
        state.fetch_offset = max(state.fetch_offset, info.last_offset + 1)

