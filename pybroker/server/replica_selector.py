"""KIP-392's replica selectors: the replica a consumer is told to fetch from instead of the leader.

``replica.selector.class`` names one of Kafka's two selectors, or none (the default: a leader
never names a preferred read replica):

* ``org.apache.kafka.common.replica.LeaderSelector`` always picks the leader;
* ``org.apache.kafka.common.replica.RackAwareReplicaSelector`` picks, for a consumer that sent a
  rack (``client.rack``, Fetch v11+), the leader when it is in that rack, else the most caught-up
  replica of that rack (the largest log end offset, then the shortest time since it was last
  caught up), else the leader.

The candidates are the leader and the in-sync followers whose log holds the fetch offset and that
have an endpoint on the consumer's listener (`ReplicaManager.preferred_read_replica`). A choice
of the leader is not sent: the consumer simply goes on fetching from it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"
RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@dataclass(frozen=True)
class ReplicaView:
    """A candidate replica: its broker, that broker's rack, and how caught up it is."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int


# (client rack, the leader, every candidate including the leader) -> the chosen replica
ReplicaSelector = Callable[[str, ReplicaView, Collection[ReplicaView]], ReplicaView]


def select_leader(client_rack: str, leader: ReplicaView, replicas: Collection[ReplicaView]) -> ReplicaView:
    return leader


def select_rack_aware(client_rack: str, leader: ReplicaView, replicas: Collection[ReplicaView]) -> ReplicaView:
    if not client_rack:
        return leader
    same_rack = [replica for replica in replicas if replica.rack == client_rack]
    if not same_rack or leader in same_rack:
        return leader
    return max(same_rack, key=lambda r: (r.log_end_offset, -r.time_since_last_caught_up_ms))


SELECTORS: dict[str, ReplicaSelector] = {
    LEADER_SELECTOR: select_leader,
    RACK_AWARE_REPLICA_SELECTOR: select_rack_aware,
}


def replica_selector(class_name: str | None) -> ReplicaSelector | None:
    """The selector ``replica.selector.class`` names (None when it is unset or empty); raises
    ValueError for a class pybroker does not have."""
    name = (class_name or "").strip()
    if not name:
        return None
    try:
        return SELECTORS[name]
    except KeyError:
        raise ValueError(
            f"replica.selector.class={name} is not supported: use {RACK_AWARE_REPLICA_SELECTOR} or "
            f"{LEADER_SELECTOR}, or leave it unset"
        ) from None
