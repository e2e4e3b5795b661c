"""Produce (0): append record batches to partition leaders; acks 0, 1 or all.

Authorization, in Kafka's order (``handleProduceRequest``): a request with transactional batches
needs a transactional id with WRITE on it (else every partition answers
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then each topic needs WRITE (else its partitions answer
TOPIC_AUTHORIZATION_FAILED, before any other check). There is no IDEMPOTENT_WRITE check here
(InitProducerId has it). With acks=0 any error closes the connection.

Versions 0–2 carry message sets of magic 0 or 1 (clients older than Kafka 0.11, and librdkafka
told so by ``broker.version.fallback``): each partition's set becomes the one v2 batch the log
takes (``_native.up_convert``, Kafka's ``LogValidator`` conversion), or answers CORRUPT_MESSAGE or
INVALID_RECORD when it does not convert. A v2 batch in these versions is taken as it is, as Kafka
takes it. From v3 a partition's records must be one magic 2 batch, not zstd below v7 (Kafka's
``ProduceRequest.validateRecords``).

Like Kafka, an answer carries an error message only where Kafka makes one (record validation, a
transaction's unverified partition, and KIP-253's partition counts); a corrupt or too large batch
is answered with its error code alone.

The answer lists the partitions in the order of the hash maps Kafka collects them in
(`kafka_order`, `java_hash_map_order`), not the request's: a Java producer completes its batches,
and calls its send callbacks, in the answer's order.
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Iterable
from typing import cast

from pybroker import _native
from pybroker.common.errors import CorruptRecordError, ErrorCode
from pybroker.jvm_collections import java_topic_partition_hash
from pybroker.network.connection import CloseConnection
from pybroker.protocol.api_keys import ApiKey
from pybroker.protocol.messages import ProduceRequest, ProduceResponse
from pybroker.security.authorizer import AclOperation, ResourceType
from pybroker.server.replica_manager import PartitionAppendResult, ProduceAppendResults
from pybroker.server.request_context import RequestContext
from pybroker.types import TopicPartition

API_KEY = ApiKey.PRODUCE
VERSIONS = (0, 9)
LAST_MESSAGE_SET_VERSION = 2  # versions up to this one may carry message format v0 or v1
AUTHORIZES = frozenset({
    (AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID),
    (AclOperation.WRITE, ResourceType.TOPIC),
})
# The first batch header's int16 attributes: after baseOffset, batchLength, partitionLeaderEpoch,
# magic and crc (8 + 4 + 4 + 1 + 4 bytes); bit 4 (of the low byte) is "transactional".
_MAGIC_OFFSET = 16
_ATTRIBUTES_OFFSET = 21
_BATCH_LENGTH = struct.Struct(">i")  # at offset 8: the batch's size after its first 12 bytes
_LOG_OVERHEAD = 12
_MIN_RECORD_OVERHEAD = 14  # LegacyRecord.RECORD_OVERHEAD_V0, the least a batch length may say
_CODEC_MASK = 0x07
_ZSTD = 4
FIRST_ZSTD_VERSION = 7
_TRANSACTIONAL_FLAG = 0x10


def handle(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | Awaitable[ProduceResponse | None] | None:
    acks = request.acks
    # The codec decodes a request's records as a view of its frame.
    entries = [
        (TopicPartition(topic.name, partition.index), cast(memoryview | None, partition.records))
        for topic in request.topic_data
        for partition in topic.partition_data
    ]
    if any(_is_transactional(records) for _, records in entries) and (
        request.transactional_id is None
        or not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
    ):
        # Kafka's KafkaApis: transactional batches need the request's transactional id, and WRITE on it.
        results = {tp: PartitionAppendResult(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED) for tp, _ in entries}
        order = java_hash_map_order(results)  # Kafka answers with the request's getErrorResponse
    elif acks not in (-1, 0, 1):
        results = {tp: PartitionAppendResult(ErrorCode.INVALID_REQUIRED_ACKS) for tp, _ in entries}
        order = kafka_order(results)
    else:
        denied = {name for name in dict.fromkeys(t.name for t in request.topic_data)
                  if not ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, name)}
        refused = _partition_count_errors(ctx, request, denied)
        refused.update((tp, PartitionAppendResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                       for tp, _ in entries if tp.topic in denied)
        if ctx.api_version <= LAST_MESSAGE_SET_VERSION:
            entries = _up_convert(entries, refused)
        else:
            entries = _validate_for_version(entries, refused, ctx.api_version)
        if refused:
            entries = [(tp, records) for tp, records in entries if tp not in refused]
        appends = ctx.services.replica_manager.handle_produce_append(
            acks, request.timeout_ms, request.transactional_id, entries, ctx.services.transaction_verifier)
        if not isinstance(appends, ProduceAppendResults):
            del entries
            _release_records(request)
            return _respond_later(appends, refused, acks)
        results = appends.unverified | appends.appended | refused
        order = kafka_order(appends.unverified, appends.appended, refused)
    if acks == 0:
        failed = [f"{tp}: {r.error.name}" for tp, r in results.items() if r.error != ErrorCode.NONE]
        if failed:
            # With acks=0 there is no response; Kafka closes the connection so the client notices.
            raise CloseConnection(f"acks=0 produce failed ({', '.join(failed)})")
        return None
    return _response(results, order)


def _is_transactional(records: memoryview | None) -> bool:
    """Attribute bit 4 of the first batch's header (Kafka's ``ProduceRequest.hasTransactionalRecords``
    also looks at the first batch only; the log validates the rest). Messages of magic 0 and 1
    have no such bit."""
    return records is not None and len(records) > _ATTRIBUTES_OFFSET + 1 and records[_MAGIC_OFFSET] >= 2 and bool(
        records[_ATTRIBUTES_OFFSET + 1] & _TRANSACTIONAL_FLAG
    )


def _validate_for_version(
    entries: list[tuple[TopicPartition, memoryview | None]], refused: dict[TopicPartition, PartitionAppendResult],
    version: int,
) -> list[tuple[TopicPartition, memoryview | None]]:
    """Kafka's ``ProduceRequest.validateRecords`` for v3+, read from the first two batch headers
    as Kafka's batch iterator reads them: no whole batch (INVALID_RECORD), a length below 14
    (CORRUPT_MESSAGE), a magic other than 2 (INVALID_RECORD), zstd below v7
    (UNSUPPORTED_COMPRESSION_TYPE), a second whole batch (INVALID_RECORD). Bytes after the first
    batch that are not a whole batch are dropped, as Kafka's iterator never sees them. The
    entries not ``refused`` (which gains the refusals) are returned."""
    kept: list[tuple[TopicPartition, memoryview | None]] = []
    for tp, records in entries:
        if tp in refused:
            continue
        if records is None or len(records) == 0:
            kept.append((tp, records))  # the append answers
            continue
        first = _batch_at(records, 0)
        if isinstance(first, PartitionAppendResult):
            refused[tp] = first
        elif first is None or records[_MAGIC_OFFSET] != 2:
            refused[tp] = PartitionAppendResult(ErrorCode.INVALID_RECORD)
        elif version < FIRST_ZSTD_VERSION and records[_ATTRIBUTES_OFFSET + 1] & _CODEC_MASK == _ZSTD:
            refused[tp] = PartitionAppendResult(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
        else:
            second = _batch_at(records, first)
            if isinstance(second, PartitionAppendResult):
                refused[tp] = second
            elif second is not None:
                refused[tp] = PartitionAppendResult(ErrorCode.INVALID_RECORD)
            else:
                kept.append((tp, records if first == len(records) else records[:first]))
    return kept


def _batch_at(records: memoryview, at: int) -> int | None | PartitionAppendResult:
    """Where the batch at ``at`` ends; None when the bytes from ``at`` hold no whole batch (Kafka's
    ``ByteBufferLogInputStream.nextBatch``), or the CORRUPT_MESSAGE of a length below 14."""
    remaining = len(records) - at
    if remaining < _LOG_OVERHEAD:
        return None
    size = _BATCH_LENGTH.unpack_from(records, at + 8)[0]
    if size < _MIN_RECORD_OVERHEAD:
        return PartitionAppendResult(
            ErrorCode.CORRUPT_MESSAGE,
            f"Record size {size} is less than the minimum record overhead ({_MIN_RECORD_OVERHEAD})",
            has_custom_error_message=True,
        )
    if remaining < _MAGIC_OFFSET + 1 or remaining < size + _LOG_OVERHEAD:
        return None
    return at + size + _LOG_OVERHEAD


def _up_convert(
    entries: list[tuple[TopicPartition, memoryview | None]], refused: dict[TopicPartition, PartitionAppendResult]
) -> list[tuple[TopicPartition, memoryview | None]]:
    """The entries not ``refused``, each message set replaced by its v2 batch; a set that does
    not convert is added to ``refused`` with Kafka's error for it."""
    converted: list[tuple[TopicPartition, memoryview | None]] = []
    for tp, records in entries:
        if tp in refused:
            continue
        try:
            batch = None if records is None else _native.up_convert(records)
        except CorruptRecordError as e:
            refused[tp] = PartitionAppendResult(e.code, str(e))
        except ValueError as e:
            refused[tp] = PartitionAppendResult(ErrorCode.INVALID_RECORD, str(e))
        else:
            converted.append((tp, records if batch is None else memoryview(batch)))
    return converted


def _release_records(request: ProduceRequest) -> None:
    """The batches are in the log: a response that waits (acks=all, a forced flush) must not
    keep the request frame alive, so that the connection reuses its buffer for the next one."""
    for topic in request.topic_data:
        for partition in topic.partition_data:
            partition.records = None


def _partition_count_errors(
    ctx: RequestContext, request: ProduceRequest, denied: set[str]
) -> dict[TopicPartition, PartitionAppendResult]:
    """KIP-253: the partitions (of topics not ``denied``) refused for the producer's partition count."""
    replica_manager = ctx.services.replica_manager
    errors = replica_manager.partition_count_errors(
        ((TopicPartition(t.name, p.index), t.undeleted_partition_count) for t in request.topic_data
         if t.name not in denied for p in t.partition_data), producing=True)
    return {tp: PartitionAppendResult(error, _count_message(tp, replica_manager.partitions[tp].undeleted_partition_count),
                                      has_custom_error_message=True)
            for tp, error in errors.items()}


def _count_message(tp: TopicPartition, count: int) -> str:
    if tp.partition >= count:
        return f"Partition {tp} is marked for deletion: the topic has {count} partition(s) for producers."
    return f"The topic {tp.topic} has {count} partition(s) for producers."


async def _respond_later(
    appends: Awaitable[ProduceAppendResults], refused: dict[TopicPartition, PartitionAppendResult], acks: int
) -> ProduceResponse | None:
    done = await appends
    if acks == 0:
        return None
    return _response(done.unverified | done.appended | refused, kafka_order(done.unverified, done.appended, refused))


def kafka_order(*groups: Iterable[TopicPartition]) -> list[TopicPartition]:
    """The partitions of a Produce answer (each once) in Kafka's order. Kafka collects each group
    of results (refused by transaction verification, appended, refused before: unauthorized,
    unknown) in a Scala ``mutable.HashMap``, then adds the groups in turn to an immutable map: up
    to four entries that map keeps the order they were added in, beyond four it is a CHAMP trie,
    whose order follows the keys' hashes alone. The hash is Java's ``TopicPartition.hashCode``."""
    seen: set[TopicPartition] = set()
    unique = []
    for group in groups:
        unique.append([tp for tp in dict.fromkeys(group) if tp not in seen])
        seen.update(unique[-1])
    if len(seen) <= 4:
        return [tp for group in unique for tp in _hash_map_order(group)]
    return _champ_order([(tp, _champ_hash(_topic_partition_hash(tp))) for group in unique for tp in group], 0)


def java_hash_map_order(partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
    """The partitions (each once) in the order of a Java ``HashMap`` filled with them in turn (a
    Produce request's ``partitionSizes``, which its ``getErrorResponse`` answers in): by bucket
    of a table of 16 doubled whenever more than three quarters full, the order they were added
    within a bucket."""
    unique = list(dict.fromkeys(partitions))
    buckets = 16
    while len(unique) > buckets * 3 // 4:
        buckets *= 2

    def bucket(tp: TopicPartition) -> int:
        h = _topic_partition_hash(tp)
        return (h ^ (h >> 16)) & (buckets - 1)

    return sorted(unique, key=bucket)


def _topic_partition_hash(tp: TopicPartition) -> int:
    """Java's ``TopicPartition.hashCode`` of ``tp``, unsigned 32-bit."""
    return java_topic_partition_hash(tp.topic, tp.partition) & 0xFFFFFFFF


def _signed(h: int) -> int:
    return h - (1 << 32) if h >= 1 << 31 else h


def _hash_map_order(partitions: list[TopicPartition]) -> list[TopicPartition]:
    """A small Scala ``mutable.HashMap``'s order (16 buckets, up to 11 entries): by bucket of the
    hash with its upper half xored into the lower, then by that hash (signed)."""
    def place(tp: TopicPartition) -> tuple[int, int]:
        h = _topic_partition_hash(tp)
        h ^= h >> 16
        return h & 15, _signed(h)

    return sorted(partitions, key=place)


def _champ_hash(h: int) -> int:
    """Scala's ``Hashing.improve`` of a hash code, as the immutable ``HashMap`` places keys."""
    h = (h + (~(h << 9) & 0xFFFFFFFF)) & 0xFFFFFFFF
    h ^= h >> 14
    h = (h + (h << 4)) & 0xFFFFFFFF
    return h ^ (h >> 10)


def _champ_order(entries: list[tuple[TopicPartition, int]], shift: int) -> list[TopicPartition]:
    """A CHAMP trie's iteration order: a node's single entries by their 5 bits of the hash at
    this depth, then its sub-tries (the bits several entries share) in the same order; keys
    with the same whole hash in the order they were added."""
    if shift > 30 or len({h for _, h in entries}) == 1:
        return [tp for tp, _ in entries]
    slots: dict[int, list[tuple[TopicPartition, int]]] = {}
    for entry in entries:
        slots.setdefault((entry[1] >> shift) & 31, []).append(entry)
    ordered = sorted(slots.items())
    out = [group[0][0] for _, group in ordered if len(group) == 1]
    for _, group in ordered:
        if len(group) > 1:
            out += _champ_order(group, shift + 5)
    return out


def _response(results: dict[TopicPartition, PartitionAppendResult], order: list[TopicPartition]) -> ProduceResponse:
    """The answer: each partition's result in ``order``, a topic's partitions together, the topics
    in the order their first partition comes (as Kafka's ``ProduceResponse`` groups them)."""
    by_topic: dict[str, list[ProduceResponse.PartitionProduceResponse]] = {}
    for tp in order:
        result = results[tp]
        by_topic.setdefault(tp.topic, []).append(ProduceResponse.PartitionProduceResponse(
            index=tp.partition,
            error_code=result.error,
            base_offset=result.base_offset,
            log_append_time_ms=result.log_append_time,
            log_start_offset=result.log_start_offset,
            record_errors=[
                ProduceResponse.BatchIndexAndErrorMessage(batch_index=index, batch_index_error_message=message)
                for index, message in result.record_errors
            ] if result.record_errors else [],
            error_message=(result.error_message if result.error != ErrorCode.NONE
                           and result.has_custom_error_message else None),
        ))
    return ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name=name, partition_responses=partitions)
                                      for name, partitions in by_topic.items()], throttle_time_ms=0)


def error_response(request: ProduceRequest, version: int, error: ErrorCode) -> ProduceResponse | None:
    """Kafka's getErrorResponse: ``error`` on every partition; acks=0 has no response to carry it."""
    if request.acks == 0:
        return None
    results = {
        TopicPartition(topic.name, partition.index): PartitionAppendResult(error)
        for topic in request.topic_data
        for partition in topic.partition_data
    }
    return _response(results, java_hash_map_order(results))
