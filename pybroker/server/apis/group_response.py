"""Helpers shared by the group APIs' handlers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pybroker.common.errors import ErrorCode
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.group.records import OffsetAndMetadata
from pybroker.server.metadata_cache import MetadataCache
from pybroker.types import TopicPartition

if TYPE_CHECKING:
    from pybroker.server.request_context import RequestContext

T = TypeVar("T")
R = TypeVar("R")

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


@dataclass
class OffsetCommits:
    """The partitions of an OffsetCommit or TxnOffsetCommit request, in request order: the
    offsets to store, TOPIC_AUTHORIZATION_FAILED for the partitions of topics without READ, and
    UNKNOWN_TOPIC_OR_PARTITION for partitions the cluster does not have."""

    order: list[TopicPartition] = field(default_factory=list)
    errors: dict[TopicPartition, ErrorCode] = field(default_factory=dict)
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)

    def merged(self, results: dict[TopicPartition, ErrorCode]) -> dict[TopicPartition, ErrorCode]:
        """Every partition's answer: its own error, else the coordinator's result."""
        return {tp: self.errors.get(tp, results.get(tp, ErrorCode.NONE)) for tp in self.order}


def offset_commits(
    cache: MetadataCache, topics: Iterable[Any], with_leader_epoch: bool, now: int, expire_timestamp: int | None = None,
    denied: Collection[str] = (),
) -> OffsetCommits:
    """Read the ``(Name, Partitions[PartitionIndex, CommittedOffset, CommittedLeaderEpoch,
    CommittedMetadata])`` topics both commit requests carry; ``denied`` topics (no READ) are
    refused before their existence is checked."""
    commits = OffsetCommits()
    for topic in topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            commits.order.append(tp)
            if topic.name in denied:
                commits.errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if not cache.contains(tp):
                commits.errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            commits.offsets[tp] = OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch if with_leader_epoch else -1,
                metadata=p.committed_metadata or "",
                commit_timestamp=now,
                expire_timestamp=expire_timestamp,
            )
    return commits


def answer(
    ctx: RequestContext, start: Callable[[Callable[[T], None]], None], build: Callable[[T], R],
) -> R | asyncio.Future[R]:
    """Run a coordinator call that answers through a callback: the response now when the
    coordinator answered at once, else a future of it, whose reply goes to the connection in the
    step the coordinator answers (`RequestContext.responded`): e.g. a group leader's SyncGroup,
    answered as the group's write completes, leaves before any request handled after it."""
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def respond(result: T) -> None:
        if not future.done():
            future.set_result(build(result))
            ctx.responded()

    start(respond)
    return future.result() if future.done() else future


def denied_topics(ctx: RequestContext, operation: AclOperation, names: Iterable[str]) -> set[str]:
    """The topics (each asked once) on which ``operation`` is refused."""
    return {name for name in dict.fromkeys(names) if not ctx.authorize(operation, ResourceType.TOPIC, name)}
