"""AlterPartition (key 56) as values, and their wire form both ways.

Owns the domain form of the one request partition leaders send the controller in ZooKeeper mode
(IBP ≥ 2.7-IV2, KIP-497): a leader's proposed ISRs (`AlterPartition`, one `IsrProposal` per
partition) and the controller's answer (`AlterPartitionAnswer`: a top-level error, and per
partition an error or the committed state). The controller decides on these values
(``Controller.alter_partition``); they travel as AlterPartition v0-1 (topic names, ``NewIsr``),
translated here: the leader's manager encodes with `request_to_wire` and decodes the answer with
`answer_from_wire`, the controller's handler decodes with `request_from_wire` and answers with
`answer_to_wire`. A leader whose broker is the controller hands the values over in-process. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pybroker.common.errors import ErrorCode
from pybroker.protocol.messages import AlterPartitionRequest, AlterPartitionResponse
from pybroker.types import TopicPartition

#: The newest version this broker sends and answers (v2+ name topics by id, v3+ carry the
#: broker epoch of each ISR member: not in our "IBP 2.8/3.0" profile).
ALTER_PARTITION_VERSION = 1
#: LeaderRecoveryState (KIP-704): RECOVERED is the only state our leaders propose.
RECOVERED, RECOVERING = 0, 1


@dataclass(frozen=True)
class IsrProposal:
    """One partition's proposed ISR, with the leader epoch and partition epoch it is based on."""

    topic_partition: TopicPartition
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int
    leader_recovery_state: int = RECOVERED


@dataclass(frozen=True)
class AlterPartition:
    """A leader's request: ``broker_epoch`` is the epoch of its current registration."""

    broker_id: int
    broker_epoch: int
    proposals: tuple[IsrProposal, ...]


@dataclass(frozen=True)
class PartitionResult:
    """The controller's answer for one partition: an error, or the state it committed (for an
    error the other fields are meaningless)."""

    error: ErrorCode = ErrorCode.NONE
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1
    leader_recovery_state: int = RECOVERED


@dataclass
class AlterPartitionAnswer:
    """A top-level error (then no partition is answered), or a result per partition."""

    error: ErrorCode = ErrorCode.NONE
    partitions: dict[TopicPartition, PartitionResult] = field(default_factory=dict)


def request_to_wire(request: AlterPartition, version: int = ALTER_PARTITION_VERSION) -> Any:
    """The AlterPartition message of ``request`` (partitions grouped by topic, in order)."""
    R = AlterPartitionRequest
    topics: dict[str, list[Any]] = {}
    for p in request.proposals:
        topics.setdefault(p.topic_partition.topic, []).append(R.PartitionData(
            partition_index=p.topic_partition.partition, leader_epoch=p.leader_epoch, new_isr=list(p.new_isr),
            leader_recovery_state=p.leader_recovery_state if version >= 1 else RECOVERED,
            partition_epoch=p.partition_epoch,
        ))
    return R(broker_id=request.broker_id, broker_epoch=request.broker_epoch, topics=[
        R.TopicData(topic_name=name, partitions=partitions) for name, partitions in topics.items()
    ])


def request_from_wire(message: Any) -> AlterPartition:
    """The value of a decoded AlterPartition v0-1 request."""
    return AlterPartition(message.broker_id, message.broker_epoch, tuple(
        IsrProposal(TopicPartition(topic.topic_name, p.partition_index), p.leader_epoch, tuple(p.new_isr),
                    p.partition_epoch, p.leader_recovery_state)
        for topic in message.topics for p in topic.partitions
    ))


def answer_to_wire(answer: AlterPartitionAnswer) -> Any:
    """The AlterPartition response of ``answer``: an errored partition carries only its error
    (Kafka leaves the other fields at their defaults)."""
    R = AlterPartitionResponse
    topics: dict[str, list[Any]] = {}
    for tp, result in answer.partitions.items():
        if result.error != ErrorCode.NONE:
            data = R.PartitionData(partition_index=tp.partition, error_code=result.error)
        else:
            data = R.PartitionData(
                partition_index=tp.partition, error_code=ErrorCode.NONE, leader_id=result.leader,
                leader_epoch=result.leader_epoch, isr=list(result.isr),
                leader_recovery_state=result.leader_recovery_state, partition_epoch=result.partition_epoch,
            )
        topics.setdefault(tp.topic, []).append(data)
    return R(throttle_time_ms=0, error_code=answer.error, topics=[
        R.TopicData(topic_name=name, partitions=partitions) for name, partitions in topics.items()
    ])


def answer_from_wire(message: Any) -> AlterPartitionAnswer:
    """The value of a decoded AlterPartition v0-1 response."""
    answer = AlterPartitionAnswer(ErrorCode(message.error_code))
    for topic in message.topics:
        for p in topic.partitions:
            answer.partitions[TopicPartition(topic.topic_name, p.partition_index)] = PartitionResult(
                ErrorCode(p.error_code), p.leader_id, p.leader_epoch, tuple(p.isr), p.partition_epoch,
                p.leader_recovery_state,
            )
    return answer
