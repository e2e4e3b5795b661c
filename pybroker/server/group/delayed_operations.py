"""The group coordinator's delayed operations, kept in ``server.purgatory`` purgatories.

* ``DelayedJoin``: a rebalance's join phase; completes as soon as every member has rejoined, or
  when the rebalance timeout (the largest of the members') passes.
* ``InitialDelayedJoin``: the first rebalance of an empty group waits
  ``group.initial.rebalance.delay.ms``, and again (up to the rebalance timeout) while new members
  keep arriving, so that consumers starting together land in one generation.
* ``DelayedHeartbeat``: a member's session; expires the member unless it heartbeats in time.
* ``DelayedSync``: after the join phase, members that send no SyncGroup within the rebalance timeout
  are removed.

Each only decides *when*; what happens is the coordinator's (its ``on_*`` methods).
"""

from __future__ import annotations

from typing import Protocol

from pybroker.server.group.group_metadata import GroupMetadata
from pybroker.server.purgatory import DelayedOperation, Purgatory


class GroupCoordinator(Protocol):
    """What the delayed group operations ask of the coordinator that made them (Kafka's
    ``DelayedJoin`` and the others take the ``GroupCoordinator``; this names the calls)."""

    def can_complete_join(self, group: GroupMetadata) -> bool: ...
    def on_complete_join(self, group: GroupMetadata) -> None: ...
    def heartbeat_satisfied(self, group: GroupMetadata, member_id: str, is_pending: bool) -> bool: ...
    def on_expire_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool) -> None: ...
    def sync_complete(self, group: GroupMetadata, generation_id: int) -> bool: ...
    def on_expire_sync(self, group: GroupMetadata, generation_id: int) -> None: ...


def join_key(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


def sync_key(group_id: str) -> tuple[str, str]:
    return ("sync", group_id)


def member_key(group_id: str, member_id: str) -> tuple[str, str]:
    return (group_id, member_id)


class DelayedJoin(DelayedOperation):
    def __init__(self, coordinator: GroupCoordinator, group: GroupMetadata, rebalance_timeout_ms: int) -> None:
        super().__init__(rebalance_timeout_ms)
        self.coordinator = coordinator
        self.group = group

    def try_complete(self) -> bool:
        return self.coordinator.can_complete_join(self.group) and self.force_complete()

    def on_complete(self) -> None:
        self.coordinator.on_complete_join(self.group)


class InitialDelayedJoin(DelayedJoin):
    def __init__(
        self,
        coordinator: GroupCoordinator,
        purgatory: Purgatory,
        group: GroupMetadata,
        configured_delay_ms: int,
        delay_ms: int,
        remaining_ms: int,
    ) -> None:
        super().__init__(coordinator, group, delay_ms)
        self.purgatory = purgatory
        self.configured_delay_ms = configured_delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        return False  # only the delay ends it

    def on_complete(self) -> None:
        group = self.group
        if group.new_member_added and self.remaining_ms > 0:
            group.new_member_added = False
            delay = min(self.configured_delay_ms, self.remaining_ms)
            follow_up = InitialDelayedJoin(
                self.coordinator, self.purgatory, group, self.configured_delay_ms, delay,
                max(self.remaining_ms - delay, 0),
            )
            self.purgatory.try_complete_else_watch(follow_up, [join_key(group.group_id)])
        else:
            super().on_complete()


class DelayedHeartbeat(DelayedOperation):
    def __init__(
        self, coordinator: GroupCoordinator, group: GroupMetadata, member_id: str, is_pending: bool, timeout_ms: int
    ) -> None:
        super().__init__(timeout_ms)
        self.coordinator = coordinator
        self.group = group
        self.member_id = member_id
        self.is_pending = is_pending

    def try_complete(self) -> bool:
        return self.coordinator.heartbeat_satisfied(self.group, self.member_id, self.is_pending) and self.force_complete()

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.coordinator.on_expire_heartbeat(self.group, self.member_id, self.is_pending)


class DelayedSync(DelayedOperation):
    def __init__(self, coordinator: GroupCoordinator, group: GroupMetadata, generation_id: int, timeout_ms: int) -> None:
        super().__init__(timeout_ms)
        self.coordinator = coordinator
        self.group = group
        self.generation_id = generation_id

    def try_complete(self) -> bool:
        return self.coordinator.sync_complete(self.group, self.generation_id) and self.force_complete()

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.coordinator.on_expire_sync(self.group, self.generation_id)
