"""Typed stub of ``pybroker._native``, the Rust storage hot path (source: ``rust/src/``).

Everything that touches record bytes lives here: CRC-32C, validation of produced record sets,
building and reading the broker's own records (``build_batch`` / ``read_records`` /
``read_record_batches``), the compacted-topic key check (``null_key_indexes``), transaction
markers (``build_control_batch``), log segments
(``.log`` + sparse ``.index`` / ``.timeindex`` + the aborted-transaction ``.txnindex``) in
Kafka's exact on-disk format, and the clients' Arrow-columnar record I/O
(``encode_partitioned_batches`` / ``decode_record_batches``, read_committed included).
Python never decodes a record; it makes one call per record set or per batch.

Descriptors: a ``Segment`` holds no descriptor of its own. Its ``.log`` is opened when used and
kept in a process-wide cache of at most ``max_open_log_files()`` open files (least recently used
closed first); its indexes are memory-mapped while used, the ``.txnindex`` opened per operation.
An ``open`` failing with EMFILE/ENFILE closes some cached ``.log`` files and is tried once more;
then the ``OSError`` (errno EMFILE or ENFILE) reaches the caller.

Threading: every ``Segment`` method may be called from any thread. File I/O runs with the GIL
released; ``flush()`` fsyncs without blocking concurrent appends/reads on the same segment.
Buffers passed in must not be mutated by another thread during the call.

Errors: ``CorruptRecordError`` and ``RecordTooLargeError`` are the classes of
``pybroker.common.errors`` (each a ``KafkaError`` with its code, and a ``ValueError``).
"""

from collections.abc import Sequence
from os import PathLike
from typing import TypeAlias, final

from typing_extensions import Buffer

def sync_filesystem(path: str) -> None:
    """``syncfs(2)`` of the filesystem holding ``path``: everything written there so far is
    durable on return. Raises OSError."""

def set_max_open_log_files(n: int) -> None:
    """Keep at most ``n`` (>= 1) segment ``.log`` files open in this process (a process-wide
    cache, least recently used closed first; a segment opens its ``.log`` again by its current
    path when it is next used). Closes the excess now. Until set: ``max(64, soft RLIMIT_NOFILE
    // 2)``. Raises ValueError for ``n < 1``."""

def max_open_log_files() -> int:
    """The capacity of the cache of open ``.log`` files (see ``set_max_open_log_files``)."""

def open_log_files() -> int:
    """How many segment ``.log`` files the cache holds open now (readers still holding a file
    the cache closed, such as a ``LogRegion`` being sent, are not counted)."""

def crc32c(data: Buffer, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) of ``data``, continuing from ``crc`` (0 to start).

    ``crc32c(b, crc32c(a)) == crc32c(a + b)``; ``crc32c(b"123456789") == 0xE3069283``.
    Hardware accelerated (SSE4.2 / ARMv8 CRC) with a portable fallback.
    """

@final
class RecordsInfo:
    """Summary of a validated record set (immutable)."""

    @property
    def size(self) -> int:
        """Bytes in the record set."""
    @property
    def batch_count(self) -> int: ...
    @property
    def record_count(self) -> int:
        """Offsets the set consumes: sum over batches of ``lastOffsetDelta + 1``."""
    @property
    def first_timestamp(self) -> int:
        """``baseTimestamp`` of the first batch."""
    @property
    def max_timestamp(self) -> int:
        """Largest batch ``maxTimestamp`` (-1 when no batch has one >= 0)."""
    @property
    def last_offset_delta_of_max_timestamp(self) -> int:
        """Offset, relative to the set's first offset once offsets are assigned, of the last
        record of the first batch holding ``max_timestamp``; -1 when there is none."""
    @property
    def producer_id(self) -> int:
        """Of the first batch (-1 for a non-idempotent producer)."""
    @property
    def producer_epoch(self) -> int:
        """Of the first batch."""
    @property
    def base_sequence(self) -> int:
        """Of the first batch."""
    @property
    def last_offset_delta(self) -> int:
        """Of the first batch."""
    @property
    def is_transactional(self) -> bool:
        """Attribute bit 4 of the first batch."""
    @property
    def is_control(self) -> bool:
        """Attribute bit 5 of the first batch."""
    @property
    def control_type(self) -> int:
        """The first batch's end-transaction marker type (0 ABORT, 1 COMMIT); -1 unless it is a
        control batch whose marker parses."""
    @property
    def coordinator_epoch(self) -> int:
        """The first batch's marker coordinator epoch; -1 unless it is an end-transaction marker."""
    @property
    def compression(self) -> int:
        """Codec id of the first batch: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
    @property
    def base_offset(self) -> int:
        """``baseOffset`` of the first batch as found in the buffer (producers send 0; for data
        replicated from a leader it is the real offset). Extension beyond Kafka's fields."""
    @property
    def last_offset(self) -> int:
        """Last offset of the last batch as found in the buffer (see ``base_offset``)."""

def validate_batches(records: Buffer, max_message_bytes: int) -> RecordsInfo:
    """Walk a produced record set once, checking every batch: lengths, magic 2, codec,
    size <= ``max_message_bytes`` (checked before the CRC, as Kafka does), CRC-32C.

    Raises ``CorruptRecordError`` for an empty set, a trailing partial batch or any malformed
    batch, ``RecordTooLargeError`` for an oversize batch.
    """

@final
class ReplicatedRecordsInfo:
    """Summary of a record set fetched from a partition leader (immutable); see
    ``validate_replicated_batches``. Offsets and epochs are the batches' own."""

    @property
    def valid_bytes(self) -> int:
        """Bytes of the complete batches, from the start of the set: a trailing partial batch
        is not counted. Append ``records[:valid_bytes]``."""
    @property
    def batch_count(self) -> int:
        """Complete batches (0 for an empty set or a lone partial batch)."""
    @property
    def record_count(self) -> int:
        """Offsets the complete batches consume: sum of ``lastOffsetDelta + 1``."""
    @property
    def first_offset(self) -> int:
        """``baseOffset`` of the first batch; -1 when ``batch_count == 0``."""
    @property
    def last_offset(self) -> int:
        """``baseOffset + lastOffsetDelta`` of the last batch; -1 when ``batch_count == 0``."""
    @property
    def max_timestamp(self) -> int:
        """Largest batch ``maxTimestamp`` (-1 when no batch has one >= 0)."""
    @property
    def offset_of_max_timestamp(self) -> int:
        """Last offset of the first batch holding ``max_timestamp``; -1 when there is none."""
    @property
    def last_leader_epoch(self) -> int:
        """``partitionLeaderEpoch`` of the last batch; -1 when ``batch_count == 0``."""
    @property
    def offsets_monotonic(self) -> bool:
        """True when every batch's ``baseOffset`` is above the previous batch's last offset
        (gaps allowed, as in a compacted log)."""
    @property
    def epoch_starts(self) -> list[tuple[int, int]]:
        """``(epoch, base offset)`` of each batch whose ``partitionLeaderEpoch`` is above the
        ``latest_epoch`` passed in and above every earlier batch's, in log order: exactly the
        leader-epoch cache entries appending the set creates (Kafka assigns each batch's epoch
        at its base offset)."""
    @property
    def producer_batches(
        self,
    ) -> list[tuple[int, int, int, int, int, int, int, bool, int, int]]:
        """``(producer_id, producer_epoch, first_sequence, last_sequence, first_offset,
        last_offset, max_timestamp, is_transactional, control_type, coordinator_epoch)`` of
        every batch with ``producerId >= 0``, control batches (transaction markers) included, in
        log order: what the follower's producer state replays (Kafka's
        ``ProducerAppendInfo.append``). ``last_sequence`` is ``baseSequence + lastOffsetDelta``,
        wrapping past 2**31 - 1 to 0 like Kafka (a marker has ``baseSequence`` -1).

        ``control_type`` and ``coordinator_epoch`` are as in ``BatchHeader``: -1 and -1 for a
        data batch; for a control batch the type read from its first record's key (0 ABORT,
        1 COMMIT, other values as read) and the end-transaction marker's coordinator epoch. A
        control batch whose record does not parse (or that is empty) also reports -1, -1, so it
        cannot be told from a data batch by these fields alone (Kafka would refuse such a marker).
        """

def validate_replicated_batches(records: Buffer, latest_epoch: int) -> ReplicatedRecordsInfo:
    """Walk a record set fetched from a partition leader once (a follower's append): every
    complete batch is checked for ``batchLength >= 49``, magic 2, a known codec,
    ``lastOffsetDelta >= 0``, ``recordsCount >= 0`` and its CRC-32C, and summarised with its
    own offsets and partition leader epoch. ``latest_epoch`` is the latest epoch of the
    follower's leader-epoch cache (-1 for none); see ``ReplicatedRecordsInfo.epoch_starts``.

    What Kafka's follower path (``UnifiedLog.appendAsFollower``) does not check is not checked
    here either: no ``max.message.bytes`` limit (the leader accepted the batch), no
    ``baseOffset == 0`` rule, any number of batches. An empty set, or a set ending with a
    partial batch (a fetch may cut one), is not an error: the walk stops before the partial
    batch (``valid_bytes``). Offsets going backwards are reported (``offsets_monotonic``), not
    raised. Large buffers are walked with the GIL released; nothing is modified.

    Raises ``CorruptRecordError`` for a complete batch that fails a check, or a batch length
    below 49.
    """

def build_batch(
    records: Sequence[tuple[Buffer | None, Buffer | None]],
    timestamp: int,
    *,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    """One uncompressed magic-2 record batch holding ``records``, ``(key, value)`` pairs where
    ``None`` is a null key or a null value (a tombstone); for the broker's own writes, such as
    the group coordinator's records in ``__consumer_offsets``.

    Header: ``baseOffset`` = ``base_offset``, ``partitionLeaderEpoch`` -1 (``Segment.append``
    sets it), attributes 0 (CreateTime, not control; with ``transactional`` the transactional
    bit 0x10 is set and nothing else changes),
    ``lastOffsetDelta`` = ``len(records) - 1``, ``baseTimestamp`` = ``maxTimestamp`` =
    ``timestamp``, the given producer fields, CRC-32C. Record ``i`` has attributes 0,
    ``timestampDelta`` 0, ``offsetDelta`` ``i`` and no headers. Keys and values may be any
    C-contiguous bytes-like object.

    Raises ``ValueError`` for an empty ``records`` (or a batch over 2 GiB).
    """

def build_control_batch(
    producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool, timestamp: int
) -> bytes:
    """Kafka's end-transaction marker batch (``MemoryRecords.withEndTransactionMarker``): a COMMIT
    marker when ``commit``, else an ABORT marker, of the producer's transaction.

    Header: ``baseOffset`` 0, ``partitionLeaderEpoch`` -1 (``Segment.append`` assigns both),
    magic 2, attributes transactional | control (0x30: CreateTime, uncompressed),
    ``lastOffsetDelta`` 0, ``baseTimestamp`` = ``maxTimestamp`` = ``timestamp``, the producer id
    and epoch, ``baseSequence`` -1, one record, CRC-32C. The record (attributes 0,
    ``timestampDelta`` 0, ``offsetDelta`` 0, no headers) has Kafka's control record key
    ``version int16 (0), type int16`` (``ControlRecordType``: 0 ABORT, 1 COMMIT) and the
    ``EndTransactionMarker`` value ``version int16 (0), coordinatorEpoch int32``. 78 bytes.
    """

def read_records(data: Buffer) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """``(offset, timestamp, key, value)`` of every record of every non-control batch in
    ``data``, a buffer of whole batches as ``Segment.read`` returns it (empty gives ``[]``).

    ``offset`` is ``baseOffset + offsetDelta``; ``timestamp`` is the batch's ``maxTimestamp`` for
    LogAppendTime batches, else ``baseTimestamp + timestampDelta``; ``None`` stands for a null
    key or value. Compressed batches (gzip, snappy, lz4, zstd) are decompressed; control batches
    (transaction markers) are skipped; record headers are ignored. Large buffers are walked with
    the GIL released.

    Every batch is checked first (lengths, magic, codec, CRC-32C), so a truncated or damaged
    buffer raises ``CorruptRecordError`` and returns nothing.
    """

def read_record_batches(
    data: Buffer,
) -> list[tuple[int, int, int, bool, int, list[tuple[int, int, bytes | None, bytes | None]]]]:
    """Per batch of ``data`` (whole batches, as ``Segment.read`` returns them), in order:
    ``(base_offset, producer_id, producer_epoch, is_transactional, control_type, records)``.
    ``records`` are ``(offset, timestamp, key, value)`` exactly as ``read_records`` gives them,
    and empty for a control batch, which is listed (unlike in ``read_records``) with its
    ``control_type`` (0 ABORT, 1 COMMIT, other values as read, -1 if its record does not
    parse); ``control_type`` is -1 for a data batch. For replaying transactional offset commits
    (the group coordinator's loader). Same checks and errors as ``read_records``; empty
    ``data`` gives ``[]``.
    """

def null_key_indexes(records: Buffer) -> list[int]:
    """Kafka's ``batchIndex`` (position in its batch, from 0) of every record with a null key
    in the first data batch of ``records`` that has any; ``[]`` when every record has a key (an
    empty key is a key). Control batches are not looked at. The compacted-topic rule of Kafka's
    ``LogValidator``: the leader calls it once per produced record set of a topic whose
    ``cleanup.policy`` includes ``compact``.

    ``records`` must have passed ``validate_batches`` (CRCs are not computed again); the framing
    is re-checked, and a malformed set or a batch that does not decompress raises
    ``CorruptRecordError``. Compressed batches are decompressed as streams and only each
    record's key length is decoded; large sets are walked with the GIL released.
    """

def transactional_producer(data: Buffer) -> tuple[int, int] | None:
    """(producer id, producer epoch) of the first batch of ``data`` when its whole 61-byte header
    is there, its magic is 2 and it is transactional (KIP-890: the producer whose transaction a
    leader verifies); None otherwise. Reads the header only: no CRC, no records."""

def up_convert(data: Buffer) -> bytes | None:
    """The message set ``data`` (message format v0 or v1, as Produce v0–2 carries it) as one v2
    batch: base offset 0, no producer, the wrapper's codec, the messages' timestamps (-1 for
    v0); ``None`` when ``data`` starts with a v2 batch, which any Produce version may carry.
    Raises ``CorruptRecordError`` (a bad CRC, a malformed message, no whole message) or
    ``ValueError`` for what Kafka refuses as INVALID_RECORD (a compressed wrapper beside other
    messages, an inner message compressed or of another magic)."""

def down_convert(data: Buffer, to_magic: int, fetch_offset: int) -> bytes | None:
    """The v2 batches ``data`` (whole batches, as a fetch reads them) as a message set of
    ``to_magic`` (0 for Fetch v0–1, 1 for v2–3), as Kafka's lazy down-conversion sends it:
    control batches dropped, an uncompressed batch's records below ``fetch_offset`` left out, a
    compressed batch one wrapper message, the whole cut or padded with overflow batches to
    ``max(len(data), the first converted batch)`` bytes (empty if nothing converts). ``None`` if
    a zstd batch is among them (v0 and v1 have no zstd)."""

# --- Arrow-columnar record I/O (clients: the PySpark data source) ------------------------------

ArrowBinary: TypeAlias = tuple[Buffer | None, Buffer | None, Buffer | None, int, int]
"""An Arrow ``binary`` or ``string`` array (int32 offsets) as its raw buffers:
``(validity, offsets, data, offset, length)`` = ``(*arr.buffers()[:3], arr.offset, len(arr))``.

``validity`` is the LSB-ordered bitmap (``None``: no nulls), ``offsets`` little-endian int32,
``offset`` the array's element offset into ``offsets`` (and bit offset into ``validity``).
``offsets`` / ``data`` may be ``None`` only for an empty array (``data``: when no bytes are used).
``large_binary`` / ``large_string`` (int64 offsets) are not accepted: cast them first."""

ArrowHeaders: TypeAlias = tuple[Buffer | None, Buffer | None, int, ArrowBinary, ArrowBinary]
"""Record headers as an Arrow ``list<struct<key: string, value: binary>>`` array ``la``:
``(list_validity, list_offsets, list_offset, header_keys, header_values)`` where
``list_validity, list_offsets = la.buffers()[:2]``, ``list_offset = la.offset`` and
``header_keys, header_values`` are the ``ArrowBinary`` tuples of ``la.values.flatten()`` (the
struct's fields with the struct's own offset and validity applied). The list offsets index those
children directly: use ``la.values`` (the unsliced child), not ``la.flatten()``. A null list means
no headers; a null header key (or null struct) raises ``ValueError``; a null header value is
written as length -1."""

ArrowInt32: TypeAlias = tuple[Buffer | None, Buffer, int]
"""An Arrow ``int32`` array as ``(validity, data, offset)`` = ``(*arr.buffers()[:2], arr.offset)``;
its length is the record count."""

def encode_partitioned_batches(
    values: ArrowBinary,
    keys: ArrowBinary | None,
    headers: ArrowHeaders | None,
    partitions: ArrowInt32 | None,
    num_partitions: int,
    sticky_partition: int,
    timestamp: int,
    batch_size: int,
    compression: int,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequences: Sequence[int] | None = None,
    initial_partitions: int | None = None,
) -> list[tuple[int, list[bytes], int]]:
    """Partition Arrow columns of records and encode them into produce-ready magic-2 batches:
    ``[(partition, batches, record_count), ...]`` in ascending partition order, only partitions
    that got records. One call per Arrow batch; all per-record work is native, with the GIL
    released for large inputs.

    ``values`` gives the record count; ``keys`` (``None``: every key null), ``headers``
    (``None``: none) and ``partitions`` (``None``: none explicit) must have the same length.

    Partition of record ``i``: ``partitions[i]`` if not null (must be in
    ``[0, num_partitions)``, else ``ValueError`` naming the record); else, for a non-null key,
    KIP-253's linear hashing (`LinearHashing`) with ``initial_partitions`` (default
    ``num_partitions``) and ``num_partitions`` as the undeleted count, which is Kafka's built-in
    partitioner ``toPositive(murmur2(key)) % num_partitions`` (the Java client's
    ``Utils.murmur2``) while both counts are equal; else ``sticky_partition``. Records keep
    their input order within a partition.

    Batching follows Kafka's ``batch.size``: a record is appended to its partition's current
    batch unless the batch's uncompressed size would then exceed ``batch_size`` bytes; a record
    larger than that gets a batch of its own. Each batch: baseOffset 0, partitionLeaderEpoch -1,
    attributes = ``compression`` (CreateTime, not transactional), ``baseTimestamp`` =
    ``maxTimestamp`` = ``timestamp``, timestampDelta 0 and offsetDelta 0, 1, ... per record,
    headers in Kafka's record format, the given producer id and epoch, CRC-32C. Its
    ``baseSequence`` is ``base_sequences[partition]`` advanced by the partition's records in
    earlier batches of this call (wrapping at 2**31 - 1 like Kafka), or -1 when
    ``base_sequences`` is ``None`` or the entry is negative; ``base_sequences`` needs
    ``num_partitions`` entries.

    Kafka (Produce v3+) takes exactly one batch per partition in a Produce request, so send a
    partition's batches in separate requests, in order (``base_sequences`` assumes that order).

    ``compression``: 0 none, 1 gzip (default level), 2 snappy (xerial framing, 32 KiB blocks,
    as the Java producer writes it), 3 lz4 (Kafka's LZ4 frame: independent 64 KiB blocks, no
    checksums), 4 zstd (standard frames, fastest level).

    Raises ``ValueError`` for inconsistent buffers (too short for offset + length, decreasing
    or out-of-range offsets, mismatched lengths), ``num_partitions < 1``, ``initial_partitions``
    outside ``[1, num_partitions]``, ``sticky_partition`` outside ``[0, num_partitions)``, a
    negative ``batch_size``, an unknown codec, a wrong
    ``base_sequences`` length, an out-of-range explicit partition, a null header key, or a batch
    over 2 GiB; ``TypeError`` when a column is not a tuple of the documented shape.
    """

@final
class LinearHashing:
    """KIP-253's partition function for a topic: keys by linear hashing over the
    ``undeleted_partition_count`` partitions, starting from ``initial_partition_count``.
    Equal counts give Kafka's built-in partitioner. ``ValueError`` unless
    ``1 <= initial_partition_count <= undeleted_partition_count <= 2**31 - 1``."""

    def __init__(self, initial_partition_count: int, undeleted_partition_count: int) -> None: ...
    @property
    def initial_partition_count(self) -> int: ...
    @property
    def undeleted_partition_count(self) -> int: ...
    def partition_for_key(self, key: bytes) -> int:
        """The partition of a non-null key: ``b = h % M`` if ``b >= S``, else ``h % 2M``, with
        ``h = toPositive(murmur2(key))``, ``M`` the largest ``initial·2^L <= undeleted`` and
        ``S = undeleted - M``."""
    def split_source(self, added: int) -> int:
        """The partition (under these counts) whose keys partition ``added``, numbered at or
        above the undeleted count, takes over when the topic grows past it."""
    def drained_into(self, survivor: int, old_count: int) -> list[int]:
        """The partitions deleted by a shrink from ``old_count`` to this undeleted count whose
        keys now go to ``survivor``, ascending."""

@final
class DecodedRecords:
    """Records of a fetched buffer as Arrow buffers (immutable), one element per record.

    Every ``*_offsets`` / ``*_data`` / ``*_validity`` triple is an Arrow ``binary`` array at
    offset 0 with ``count`` elements (the header ones: one per header)::

        pa.Array.from_buffers(pa.binary(), d.count, [
            pa.py_buffer(d.value_validity) if d.value_validity else None,
            pa.py_buffer(d.value_offsets), pa.py_buffer(d.value_data)])

    and, with headers, a ``list<struct<key, value>>`` array::

        total = int.from_bytes(d.header_list_offsets[-4:], "little")  # headers in all
        keys = pa.Array.from_buffers(pa.binary(), total, [
            None, pa.py_buffer(d.header_key_offsets), pa.py_buffer(d.header_key_data)])
        values = pa.Array.from_buffers(pa.binary(), total, [
            pa.py_buffer(d.header_value_validity) if d.header_value_validity else None,
            pa.py_buffer(d.header_value_offsets), pa.py_buffer(d.header_value_data)])
        headers = pa.ListArray.from_arrays(
            pa.Array.from_buffers(pa.int32(), d.count + 1,
                                  [None, pa.py_buffer(d.header_list_offsets)]),
            pa.StructArray.from_arrays([keys.cast(pa.string()), values], ["key", "value"]))

    A record without headers has an empty list (the wire format cannot tell it from a null
    one). ``offsets`` / ``timestamps`` / ``timestamp_types`` are plain int64 / int64 / int32
    arrays (``pa.Array.from_buffers(pa.int64(), d.count, [None, pa.py_buffer(d.offsets)])``).
    """

    @property
    def count(self) -> int:
        """Records decoded."""
    @property
    def next_offset(self) -> int:
        """``lastOffset + 1`` of the last complete batch walked (control batches included), or
        ``start_offset`` when there is none; never below ``start_offset``. Fetch from here next.
        (``count == 0`` with ``next_offset == start_offset`` on a non-empty buffer means the first
        batch did not fit the fetch: raise the fetch size.)"""
    @property
    def offsets(self) -> bytes:
        """Little-endian int64 per record."""
    @property
    def timestamps(self) -> bytes:
        """Little-endian int64 (ms) per record: the batch's ``maxTimestamp`` for LogAppendTime
        batches, else ``baseTimestamp + timestampDelta``."""
    @property
    def timestamp_types(self) -> bytes:
        """Little-endian int32 per record: 0 CreateTime, 1 LogAppendTime."""
    @property
    def key_validity(self) -> bytes | None:
        """Validity bitmap of the keys (LSB bit order); ``None`` when no key is null."""
    @property
    def key_offsets(self) -> bytes:
        """``count + 1`` little-endian int32 offsets into ``key_data``, starting at 0."""
    @property
    def key_data(self) -> bytes: ...
    @property
    def value_validity(self) -> bytes | None:
        """Validity bitmap of the values; ``None`` when no value is null (no tombstone)."""
    @property
    def value_offsets(self) -> bytes:
        """``count + 1`` little-endian int32 offsets into ``value_data``."""
    @property
    def value_data(self) -> bytes: ...
    @property
    def header_list_offsets(self) -> bytes | None:
        """``count + 1`` little-endian int32 offsets into the header arrays: record ``i``'s
        headers are elements ``[list_offsets[i], list_offsets[i + 1])``. ``None`` (like every
        ``header_*`` attribute) unless ``include_headers``."""
    @property
    def header_key_offsets(self) -> bytes | None:
        """Int32 offsets into ``header_key_data``; header keys are never null (no validity)."""
    @property
    def header_key_data(self) -> bytes | None: ...
    @property
    def header_value_validity(self) -> bytes | None:
        """Validity bitmap of the header values; ``None`` when none is null (or no headers)."""
    @property
    def header_value_offsets(self) -> bytes | None: ...
    @property
    def header_value_data(self) -> bytes | None: ...

def decode_record_batches(
    data: Buffer,
    start_offset: int,
    end_offset: int,
    include_headers: bool,
    aborted_transactions: Sequence[tuple[int, int]] | None = None,
) -> DecodedRecords:
    """Decode a Fetch response's records for one partition into Arrow buffers: every record
    with ``start_offset <= offset < end_offset`` (``end_offset < 0``: no end) of every complete
    non-control batch of ``data``, in order. One call per fetched partition; all per-record work
    is native, with the GIL released for large buffers.

    A trailing partial batch (normal at the end of a fetch) is ignored. Each complete batch is
    checked (batchLength, magic 2, codec, CRC-32C) and decompressed (gzip, snappy raw or xerial,
    lz4, zstd); control batches (transaction markers) are skipped but count for
    ``next_offset``.

    ``aborted_transactions`` ``None`` (the default) returns the records of every data batch
    (read_uncommitted). A sequence of ``(producer_id, first_offset)`` pairs, the Fetch
    response's ``AbortedTransactions`` (empty included), applies read_committed as Kafka's
    consumer does (``CompletedFetch.nextFetchedRecord``): the aborted transactions are taken in
    first-offset order; for every batch with ``producerId >= 0``, each aborted transaction whose
    first offset is <= the batch's last offset adds its producer id to the aborted set; then a
    control batch holding an ABORT marker removes its producer from the set, and a
    transactional data batch whose producer is in the set is skipped (its offsets still count
    for ``next_offset``). Non-transactional batches are never skipped.

    Raises ``CorruptRecordError`` for a damaged complete batch or records that do not parse
    (including a null header key), ``ValueError`` if a column would exceed 2 GiB or an entry of
    ``aborted_transactions`` is not a pair, ``TypeError`` if ``aborted_transactions`` is not a
    sequence or holds a non-integer.
    """

@final
class BatchHeader:
    """Header information of one stored batch (see ``Segment.batches``)."""

    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def position(self) -> int:
        """Byte position of the batch in the ``.log``."""
    @property
    def size(self) -> int:
        """Total bytes of the batch (``batchLength + 12``)."""
    @property
    def partition_leader_epoch(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def control_type(self) -> int:
        """-1 for a data batch; for a control batch the type read from its first record's key
        (Kafka's ``ControlRecordType``: 0 ABORT, 1 COMMIT, other values as read), or -1 when
        that record cannot be parsed (a key shorter than 4 bytes or with a negative version, an
        empty or torn batch)."""
    @property
    def coordinator_epoch(self) -> int:
        """The end-transaction marker's coordinator epoch (its value's int32 after the int16
        version); -1 for a data batch, another control type, or a value that does not parse
        (shorter than 6 bytes or a negative version)."""

@final
class LogRegion:
    """Bytes of a segment's ``.log`` that a fetch response carries as they are (Kafka's
    zero-copy ``sendfile``). It holds no descriptor while it waits: each send takes the file from
    the process's cache of open ``.log`` files, or opens it by its current name; its segment's
    close leaves it the file, so it stays readable after the segment is renamed or deleted. If the
    file is truncated below its end, or cannot be found (its partition's directory renamed by a
    topic deletion first), sending or reading it raises ``OSError``."""

    @property
    def position(self) -> int:
        """Position of the first byte in the ``.log`` file."""
    @property
    def next_offset(self) -> int:
        """``lastOffset + 1`` of the region's last batch (the region is whole batches): the
        upper bound up to which a read_committed fetch collects aborted transactions."""
    def __len__(self) -> int: ...
    def send_to(self, fd: int, start: int) -> int:
        """Sends bytes ``[start, len)`` to the non-blocking socket ``fd`` with ``sendfile(2)``
        until all are sent or the socket is full; returns the index of the first byte not sent."""
    def read(self, start: int = 0) -> bytes:
        """Bytes ``[start, len)``, read from the file."""
    def __bytes__(self) -> bytes: ...

class Segment:
    """One log segment: ``<dir>/<base_offset:020>.log``, ``.index`` and ``.timeindex``, and the
    ``.txnindex`` of the transactions aborted in it.

    The ``.txnindex`` has Kafka's format (``TransactionIndex`` / ``AbortedTxn``): 34-byte
    big-endian entries ``version int16 (0), producerId int64, firstOffset int64, lastOffset
    int64, lastStableOffset int64``, in the order the ABORT markers were written. It is created
    by the first ``append_aborted_txn`` (a segment without aborted transactions has no file),
    opened and checked with the segment when it exists (see ``txn_index_damaged``), and written
    without a descriptor held (opened per operation). The caller decides what goes in it.

    Opening creates missing files (new indexes are preallocated to ``max_index_size`` rounded
    down to whole entries and memory-mapped) or restores an existing segment: ``size`` from the
    file, the indexes' valid entries, ``next_offset`` by walking batch headers from the last
    offset-index entry, the max timestamp from the last time-index entry and that walk. Opening
    does not verify CRCs: after an unclean shutdown call ``recover()`` on segments past the
    recovery point. ``dir`` must exist.

    The ``.log`` is not held open: every operation takes it from the process's cache of open
    ``.log`` files, opening it again by its current name (never creating it: a file removed
    under the segment raises ``FileNotFoundError``) when the cache had closed it. ``close()``,
    ``delete()`` and ``rename_suffix()`` give its place in the cache back.

    After ``close()``, ``delete()`` or ``rename_suffix()`` every method and property other than
    ``base_offset``, ``path`` and ``closed`` raises ``ValueError``; ``close()`` itself may be
    called again (no-op). I/O failures raise ``OSError`` naming the file.
    """

    def __init__(
        self,
        dir: str | PathLike[str],
        base_offset: int,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10485760,
        suffix: str = "",
    ) -> None:
        """``suffix`` names the files ``<base>.log<suffix>`` etc.: a segment the log cleaner is
        writing (``".cleaned"``) or one being recovered from an interrupted swap (``".swap"``)."""
    @property
    def base_offset(self) -> int: ...
    @property
    def path(self) -> str:
        """Path of the ``.log`` file."""
    @property
    def closed(self) -> bool:
        """True after ``close()``, ``delete()`` or ``rename_suffix()``."""
    @property
    def size(self) -> int:
        """Bytes in the ``.log``."""
    @property
    def next_offset(self) -> int:
        """Offset the next record will get: last batch's lastOffset + 1, or ``base_offset``."""
    @property
    def max_timestamp(self) -> int:
        """Largest batch ``maxTimestamp`` in the segment (Kafka ``maxTimestampSoFar``), -1 if none."""
    @property
    def offset_of_max_timestamp(self) -> int:
        """Last offset of the first batch holding ``max_timestamp``, -1 if none."""
    @property
    def first_batch_timestamp(self) -> int:
        """Kafka's ``getFirstBatchTimestamp``, the age the ``segment.ms`` roll and max.compaction.lag.ms
        count from: the largest timestamp of the record set that started the segment (of its first
        batch once reopened), never a ``baseTimestamp``, which may be a delete horizon; -1 if empty."""
    @property
    def index_is_full(self) -> bool:
        """True when the offset index or the time index is full: roll before appending.
        (The time index keeps one slot for the final entry written on roll/close.)"""
    @property
    def index_sizes(self) -> tuple[int, int]:
        """Bytes of entries in the offset index and in the time index."""
    @property
    def last_modified_ms(self) -> int:
        """The ``.log`` file's modification time, ms since the epoch."""
    @property
    def log_is_open(self) -> bool:
        """Whether the process's cache of open ``.log`` files holds this segment's open now
        (see ``set_max_open_log_files``)."""
    @property
    def has_txn_index(self) -> bool:
        """True when the ``.txnindex`` file exists (possibly empty, after truncation or
        recovery)."""
    @property
    def txn_index_damaged(self) -> bool:
        """True when opening found the ``.txnindex`` damaged: a length that is not a multiple of
        34, an entry whose version is not 0, last offsets that do not strictly increase, or (as
        Kafka's ``TransactionIndex.sanityCheck``) a last offset below ``base_offset``. A damaged
        index is never served nor appended to (``collect_aborted_txns``, ``aborted_txns`` and
        ``append_aborted_txn`` raise ``ValueError``); ``recover()`` empties it and clears the
        flag (the caller then appends the aborted transactions it finds again). A truncation
        that removes the damaged part also clears it."""
    def append_aborted_txn(
        self, producer_id: int, first_offset: int, last_offset: int, last_stable_offset: int
    ) -> None:
        """Append one aborted transaction to the ``.txnindex`` (creating the file; no fsync:
        ``flush()`` syncs it). Raises ``ValueError`` unless ``last_offset`` is greater than the
        previous entry's (Kafka: "The last offset of appended transactions must increase
        sequentially"), or when the index is damaged; ``OSError`` on I/O failure (no partial
        entry is left)."""
    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> tuple[list[tuple[int, int, int, int]], bool]:
        """Kafka's ``collectAbortedTxns``: every entry with ``lastOffset >= fetch_offset`` and
        ``firstOffset < upper_bound_offset``, as ``(producer_id, first_offset, last_offset,
        last_stable_offset)`` in file order, and ``is_complete``: True as soon as an entry's
        ``lastStableOffset >= upper_bound_offset`` (the scan stops there, that entry included
        if it qualified; later segments need not be searched), else False. ``([], False)``
        without a ``.txnindex``. Raises ``ValueError`` on a damaged index."""
    def aborted_txns(self) -> list[tuple[int, int, int, int]]:
        """Every entry of the ``.txnindex`` as ``(producer_id, first_offset, last_offset,
        last_stable_offset)``, in file order (``[]`` without one). Raises ``ValueError`` on a
        damaged index."""
    def append(
        self,
        records: Buffer,
        first_offset: int,
        leader_epoch: int,
        log_append_time_ms: int,
    ) -> tuple[int, int, int]:
        """Append a validated record set; returns ``(last_offset, max_timestamp,
        offset_of_max_timestamp)`` of the appended set (-1, -1 for the last two when no batch has
        a timestamp >= 0).

        The buffer is patched in place batch by batch (a read-only buffer such as ``bytes`` is
        copied first and left untouched): ``baseOffset`` = running offset from ``first_offset``,
        ``partitionLeaderEpoch`` = ``leader_epoch``; if ``log_append_time_ms >= 0`` the timestamp
        type becomes LogAppendTime, ``maxTimestamp`` = ``log_append_time_ms`` and the CRC is
        recomputed. Then one ``write`` (no fsync), and the index-interval rule per batch.

        Extensions for replicated data: ``first_offset < 0`` keeps the batches' own offsets and
        ``leader_epoch < 0`` keeps their own epochs.

        Raises ``ValueError`` if offsets would go below ``next_offset``, the last offset does not
        fit ``base_offset + 2**31 - 1``, or the segment would exceed 2**31 - 1 bytes (roll first);
        ``CorruptRecordError`` if the set is structurally broken.
        """
    def read(self, offset: int, max_bytes: int, max_offset: int, min_one_batch: bool) -> bytes:
        """Whole batches starting with the first whose last offset is >= ``offset``, taken while
        the total stays <= ``max_bytes`` and the batch's base offset is < ``max_offset``. With
        ``min_one_batch``, a first batch larger than ``max_bytes`` is returned alone (KIP-74).
        Empty bytes when nothing qualifies."""
    def read_region(
        self, offset: int, max_bytes: int, max_offset: int, min_one_batch: bool
    ) -> LogRegion | None:
        """The bytes ``read`` would return with the same arguments, as a region of the ``.log``
        to send as it is, with the ``next_offset`` after its last batch: only batch headers are
        read. ``None`` when nothing qualifies."""
    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record with timestamp >= ``timestamp`` and offset
        >= ``start_offset`` (time index → offset index → batch scan; compressed batches are
        decompressed). In LogAppendTime batches every record has the batch's ``maxTimestamp``.
        ``None`` if no record qualifies. The record's leader epoch is the batch's; it can be
        taken from the leader-epoch cache."""
    def max_timestamp_record(self) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record whose timestamp equals ``max_timestamp``
        (ListOffsets MAX_TIMESTAMP); ``None`` when the segment has no timestamps."""
    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset`` (a batch containing ``offset``
        goes entirely) and the index entries for offsets >= ``offset``; recompute
        ``next_offset`` and the max timestamp. The ``.txnindex`` loses every entry whose last
        offset is >= ``offset`` (Kafka's ``TransactionIndex.truncateTo``), whatever the log
        holds. Returns the bytes removed."""
    def recover(self, max_message_bytes: int) -> int:
        """Rescan the whole ``.log`` validating every batch (lengths, magic, CRC, increasing
        offsets); rebuild both indexes with the interval rule; truncate at the first invalid or
        partial batch. A batch larger than ``max_message_bytes`` counts as invalid, so pass a
        bound no smaller than any batch the log may hold. Ends, like Kafka, with the indexes
        trimmed and the final time-index entry written. The ``.txnindex``, if any, is emptied
        (the file stays) and ``txn_index_damaged`` cleared: as in Kafka, the caller rebuilds it
        from the aborted transactions it finds replaying the batches. Returns the bytes
        truncated."""
    def batches(self, start_position: int = 0) -> list[BatchHeader]:
        """Header information of every batch from ``start_position`` (a batch boundary) to the
        end; stops quietly at a partial or malformed batch. The one record of a control batch is
        read for ``control_type`` / ``coordinator_epoch``; nothing else past the headers."""
    def leader_epoch_starts(self, latest_epoch: int) -> list[tuple[int, int]]:
        """``(epoch, base offset)`` of each batch that starts a leader epoch above
        ``latest_epoch``, in log order (recovery feeds them to the leader-epoch cache)."""
    def flush(self) -> None:
        """fsync the ``.log``, both indexes (which also writes back the index mappings on
        Linux) and the ``.txnindex`` if it exists. Releases the GIL; meant for a worker
        thread."""
    def on_become_inactive(self) -> None:
        """The segment stopped being the active one: append the final time-index entry
        ``(max_timestamp, offset_of_max_timestamp)`` and trim both index files to their valid
        entries. (Appending afterwards still works; the indexes grow back.)"""
    def close(self, sync: bool = True) -> None:
        """``on_become_inactive()``, fsync the files (the ``.txnindex`` if it exists; unless
        ``sync`` is false: the caller makes them durable, e.g. one syncfs for many), close
        them. Idempotent."""
    def delete(self) -> None:
        """Close (no trim, no fsync) and remove the files (``.log``, ``.index``, ``.timeindex``,
        and ``.txnindex`` if it exists)."""
    def rename_suffix(self, suffix: str) -> None:
        """Close (final time entry, trim) and rename each file to ``<name><suffix>``, e.g.
        ``".deleted"``; the ``.txnindex`` only if it exists. The object stays closed."""
    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename each file from ``<name><old_suffix>`` to ``<name><new_suffix>``, the ``.log``
        first (Kafka's ``changeFileSuffixes``: ``.cleaned`` → ``.swap`` → none); the segment
        stays open under its new names. A missing ``.txnindex`` is skipped."""
    def set_last_modified_ms(self, ms: int) -> None:
        """Set the ``.log``'s modification time (a cleaned segment keeps its sources')."""


class Throttler:
    """Kafka's cleaner ``Throttler``, shared by every cleaner thread: callers account the bytes
    they read and write, and sleep whenever the rate over a 300 ms period is above
    ``bytes_per_second`` (``log.cleaner.io.max.bytes.per.second``; infinite: never)."""

    def __init__(self, bytes_per_second: float) -> None: ...

class LogCleaning:
    """One clean of one log (``rust/src/cleaner.rs``): its offset map (key hash → last offset in
    the dirty section; ``memory_bytes`` at 24 bytes a slot, full at ``load_factor``, a smaller
    table when ``expected_keys`` allows), the transactions met, and Kafka's cleaner statistics.
    Each call handles one segment with the GIL released; the old segment is read through its own
    file handle, without holding its lock."""

    def __init__(self, memory_bytes: int, load_factor: float, expected_keys: int) -> None: ...
    def add_aborted_for_map(self, txns: list[tuple[int, int, int, int]]) -> None:
        """``(producer id, first offset, last offset, last stable offset)`` of the aborted
        transactions of the dirty section, before it is mapped."""
    def add_aborted_for_clean(self, txns: list[tuple[int, int, int, int]]) -> None:
        """The aborted transactions of a segment's range, before that segment is cleaned."""
    def map_segment(self, segment: Segment, start_offset: int, next_segment_start: int,
                    throttler: Throttler | None = None) -> bool:
        """Map the keys of ``segment``'s records at or above ``start_offset`` (aborted
        transactions' records excepted). True when the map filled up: it then ends at the last
        whole batch mapped; otherwise at ``next_segment_start - 1``. Raises
        ``CorruptRecordError`` for a damaged batch."""
    def clean_segment(self, segment: Segment, dest: Segment, now_ms: int, delete_retention_ms: int,
                      active_producers: dict[int, tuple[int | None, int]],
                      throttler: Throttler | None = None) -> None:
        """Append to ``dest`` what Kafka's retention rules keep of ``segment`` (see
        ``docs/architecture.md``), and to its ``.txnindex`` the aborted transactions whose marker
        stays. ``active_producers``: producer id → (last data offset or None, epoch)."""
    def release(self) -> None:
        """Free the offset map and buffers without the GIL (call it off the event loop: unmapping
        tens of megabytes takes milliseconds); the map reads as empty afterwards, ``stats``
        stay."""
    @property
    def latest_offset(self) -> int:
        """The last offset of the mapped range; -1 before anything was mapped."""
    @property
    def map_utilization(self) -> float: ...
    @property
    def stats(self) -> dict[str, int]:
        """``map_bytes_read``, ``map_messages_read``, ``bytes_read``, ``messages_read``,
        ``bytes_written``, ``messages_written``, ``invalid_messages`` (records without a key)."""
