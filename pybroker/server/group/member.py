"""One member of a classic group (Kafka's ``MemberMetadata``).

A member is identified by its member id (assigned by the coordinator) and, for static members
(KIP-345), also by its ``group.instance.id``. It carries the protocols it offered in its last
JoinGroup (ordered by preference, each with its opaque metadata), its timeouts, the assignment the
leader gave it, and the JoinGroup/SyncGroup requests of it that are waiting for the group.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


class MemberMetadata:
    """A group member. Owned by its ``GroupMetadata``; changed only by the coordinator."""

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        supported_protocols: list[tuple[str, bytes]],
        assignment: bytes = b"",
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.supported_protocols = supported_protocols
        self.assignment = assignment
        # The JoinGroup and SyncGroup of this member that wait for the rebalance to progress. The
        # SyncGroup's is its answer callback itself (Kafka's awaitingSyncCallback): whoever takes it
        # answers in that very step, as the leader's assignment is stored or the wait ends.
        self.awaiting_join: asyncio.Future[Any] | None = None
        self.awaiting_sync: Callable[[Any], None] | None = None
        # A member that joined during the current rebalance and has had no JoinGroup answer yet.
        self.is_new = False
        self.heartbeat_satisfied = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    @property
    def protocols(self) -> list[str]:
        return [name for name, _ in self.supported_protocols]

    def metadata(self, protocol: str) -> bytes:
        """The metadata this member offered with ``protocol``."""
        for name, metadata in self.supported_protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether a JoinGroup offers exactly what this member offered last time."""
        return protocols == self.supported_protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """Kafka's rule: a new member must heartbeat (join) in time; one waiting for the rebalance
        (in JoinGroup or SyncGroup) counts as alive; anyone else needs a heartbeat."""
        if self.is_new:
            return self.heartbeat_satisfied
        if self.is_awaiting_join or self.is_awaiting_sync:
            return True
        return self.heartbeat_satisfied

    def __repr__(self) -> str:
        static = f", instance={self.group_instance_id}" if self.is_static else ""
        return f"MemberMetadata({self.member_id}{static}, client={self.client_id}@{self.client_host})"
