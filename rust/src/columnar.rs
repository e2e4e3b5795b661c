//! Arrow-columnar record I/O for pybroker's clients (the PySpark data source): turning Arrow
//! arrays of keys, values, headers and partitions into produce-ready magic-2 record batches, and
//! turning a Fetch response's records into Arrow buffers. Python makes one call per Arrow batch
//! or per fetched partition; every per-record step (partitioning, sizing, encoding, decoding)
//! happens here.
//!
//! Arrow input arrives as raw buffers ([`BinaryColumn`], [`Int32Column`], [`HeadersColumn`]):
//! validity bitmaps (LSB bit order), little-endian int32 offsets and the data buffer, plus the
//! array's element offset and length. Every buffer is checked against that offset and length
//! before use, so inconsistent buffers give [`StorageError::InvalidArgument`], never an
//! out-of-bounds read.
//!
//! Encoding ([`plan_batches`], then [`write_batches`] or [`encode_batches`]) works as Kafka's
//! producer does:
//!
//! * partition: an explicit partition wins; else a non-null key goes where KIP-253's linear
//!   hashing puts it (`partitioner.rs`), which is `toPositive(murmur2(key)) % numPartitions`,
//!   Kafka's built-in partitioner, until the topic's first expansion; else the sticky partition;
//! * records keep their input order within a partition and are appended to the partition's
//!   current batch unless that would make the batch (uncompressed size, as the Java producer
//!   estimates it) exceed `batch.size`; a record larger than `batch.size` gets a batch of its own;
//! * each batch has the header described in `batch.rs`: baseOffset 0, partitionLeaderEpoch -1,
//!   attributes = codec (CreateTime, not transactional), one timestamp for every record
//!   (timestampDelta 0), offsetDelta 0, 1, ..., the producer fields and a baseSequence that
//!   advances by the records of the partition's earlier batches, wrapping as Kafka's does.
//!
//! Codecs are written as the Java producer writes them: gzip (default level), snappy in xerial
//! framing with 32 KiB blocks, lz4 frames with independent 64 KiB blocks and no checksums,
//! zstd (ruzstd's fastest level, standard frames).
//!
//! Decoding ([`decode_record_batches`]) walks whole batches (a trailing partial batch, normal at
//! the end of a fetch, is ignored), checks each (lengths, magic, codec, CRC-32C), skips control
//! batches and, at read_committed, the batches of aborted transactions ([`AbortedFilter`]),
//! decompresses through `records.rs`, and parses records from a slice straight into Arrow
//! buffers ([`DecodedRecords`]).

use std::io::Write;

use crate::batch::{
    check_crc, get_i32, put_i32, put_i64, BatchHeader, ATTRIBUTES_OFFSET, BASE_OFFSET_OFFSET,
    BASE_SEQUENCE_OFFSET, BASE_TIMESTAMP_OFFSET, BATCH_LENGTH_OFFSET, CRC_OFFSET, CURRENT_MAGIC,
    LAST_OFFSET_DELTA_OFFSET, LOG_OVERHEAD, MAGIC_OFFSET, MAX_CODEC_ID, MAX_TIMESTAMP_OFFSET,
    MIN_BATCH_LENGTH, PARTITION_LEADER_EPOCH_OFFSET, PRODUCER_EPOCH_OFFSET, PRODUCER_ID_OFFSET,
    RECORDS_COUNT_OFFSET, RECORD_BATCH_OVERHEAD,
};
use crate::builder::{varint_len, CONTROL_TYPE_ABORT};
use crate::crc32c::crc32c;
use crate::errors::{Result, StorageError};
use crate::partitioner::LinearHashing;
use crate::records::{control_marker, decompress_body, XERIAL_HEADER_LEN, XERIAL_MAGIC};

/// Uncompressed bytes per xerial snappy block (snappy-java's `SnappyOutputStream` default).
const XERIAL_BLOCK_SIZE: usize = 32 * 1024;
/// xerial stream version and minimum compatible version, as snappy-java writes them.
const XERIAL_VERSION: i32 = 1;
const XERIAL_COMPATIBLE_VERSION: i32 = 1;

// ---------------------------------------------------------------------------------------------
// Arrow input columns
// ---------------------------------------------------------------------------------------------

/// An Arrow `binary` (or `string`) array given as its raw buffers.
#[derive(Debug, Clone, Copy)]
pub struct BinaryColumn<'a> {
    /// Validity bitmap, LSB bit order, bit `offset + i` for element `i`; `None` = all valid.
    pub validity: Option<&'a [u8]>,
    /// Little-endian int32 offsets; element `i` spans `offsets[offset + i]..offsets[offset + i + 1]`.
    pub offsets: &'a [u8],
    pub data: &'a [u8],
    /// Element offset into `offsets` and bit offset into `validity`.
    pub offset: usize,
    pub len: usize,
}

impl<'a> BinaryColumn<'a> {
    /// Checks the buffers cover elements `offset..offset + len` and the offsets they use are
    /// non-decreasing and inside `data`.
    pub fn check(&self, what: &str) -> Result<()> {
        let end = self
            .offset
            .checked_add(self.len)
            .ok_or_else(|| StorageError::invalid(format!("{what}: offset + length overflows")))?;
        check_validity(self.validity, end, what)?;
        if self.len == 0 {
            return Ok(());
        }
        let needed = end
            .checked_add(1)
            .and_then(|n| n.checked_mul(4))
            .ok_or_else(|| StorageError::invalid(format!("{what}: offset + length overflows")))?;
        if self.offsets.len() < needed {
            return Err(StorageError::invalid(format!(
                "{what}: offsets buffer holds {} bytes, {needed} needed for offset {} + length {}",
                self.offsets.len(),
                self.offset,
                self.len
            )));
        }
        let mut previous = read_i32_le(self.offsets, self.offset);
        if previous < 0 {
            return Err(StorageError::invalid(format!(
                "{what}: negative offset {previous}"
            )));
        }
        for j in self.offset + 1..=end {
            let next = read_i32_le(self.offsets, j);
            if next < previous {
                return Err(StorageError::invalid(format!(
                    "{what}: offsets decrease at element {}",
                    j - 1 - self.offset
                )));
            }
            previous = next;
        }
        if previous as usize > self.data.len() {
            return Err(StorageError::invalid(format!(
                "{what}: offsets reach byte {previous}, data buffer holds {} bytes",
                self.data.len()
            )));
        }
        Ok(())
    }

    /// Element `i`, `None` when null. Only valid after [`check`](Self::check).
    #[inline(always)]
    fn value(&self, i: usize) -> Option<&'a [u8]> {
        if !bit_is_set(self.validity, self.offset + i) {
            return None;
        }
        let start = read_i32_le(self.offsets, self.offset + i) as usize;
        let end = read_i32_le(self.offsets, self.offset + i + 1) as usize;
        Some(&self.data[start..end])
    }
}

/// An Arrow `int32` array given as its raw buffers (its length is the record count).
#[derive(Debug, Clone, Copy)]
pub struct Int32Column<'a> {
    /// Validity bitmap, LSB bit order; `None` = all valid.
    pub validity: Option<&'a [u8]>,
    /// Little-endian int32 values.
    pub data: &'a [u8],
    /// Element offset into `data` and bit offset into `validity`.
    pub offset: usize,
}

impl Int32Column<'_> {
    fn check(&self, len: usize, what: &str) -> Result<()> {
        let end = self
            .offset
            .checked_add(len)
            .ok_or_else(|| StorageError::invalid(format!("{what}: offset + length overflows")))?;
        check_validity(self.validity, end, what)?;
        let needed = end
            .checked_mul(4)
            .ok_or_else(|| StorageError::invalid(format!("{what}: offset + length overflows")))?;
        if self.data.len() < needed {
            return Err(StorageError::invalid(format!(
                "{what}: data buffer holds {} bytes, {needed} needed for offset {} + length {len}",
                self.data.len(),
                self.offset
            )));
        }
        Ok(())
    }

    #[inline]
    fn value(&self, i: usize) -> Option<i32> {
        bit_is_set(self.validity, self.offset + i).then(|| read_i32_le(self.data, self.offset + i))
    }
}

/// Record headers as an Arrow `list<struct<key: string, value: binary>>`: the list's own
/// buffers, and the struct's `key` and `value` children (as `StructArray.flatten()` gives them)
/// where list offset value `j` designates child element `j`.
#[derive(Debug, Clone, Copy)]
pub struct HeadersColumn<'a> {
    /// List validity, LSB bit order; `None` = all valid. A null list means no headers.
    pub list_validity: Option<&'a [u8]>,
    /// Little-endian int32 list offsets.
    pub list_offsets: &'a [u8],
    /// Element offset of the list array.
    pub list_offset: usize,
    pub keys: BinaryColumn<'a>,
    pub values: BinaryColumn<'a>,
}

impl<'a> HeadersColumn<'a> {
    fn check(&self, len: usize) -> Result<()> {
        let what = "headers";
        let end = self
            .list_offset
            .checked_add(len)
            .ok_or_else(|| StorageError::invalid("headers: offset + length overflows"))?;
        check_validity(self.list_validity, end, what)?;
        self.keys.check("header keys")?;
        self.values.check("header values")?;
        if len == 0 {
            return Ok(());
        }
        let needed = end
            .checked_add(1)
            .and_then(|n| n.checked_mul(4))
            .ok_or_else(|| StorageError::invalid("headers: offset + length overflows"))?;
        if self.list_offsets.len() < needed {
            return Err(StorageError::invalid(format!(
                "headers: list offsets buffer holds {} bytes, {needed} needed for offset {} + length {len}",
                self.list_offsets.len(),
                self.list_offset
            )));
        }
        let mut previous = read_i32_le(self.list_offsets, self.list_offset);
        if previous < 0 {
            return Err(StorageError::invalid(format!(
                "headers: negative list offset {previous}"
            )));
        }
        for j in self.list_offset + 1..=end {
            let next = read_i32_le(self.list_offsets, j);
            if next < previous {
                return Err(StorageError::invalid(format!(
                    "headers: list offsets decrease at record {}",
                    j - 1 - self.list_offset
                )));
            }
            previous = next;
        }
        let children = self.keys.len.min(self.values.len);
        if previous as usize > children {
            return Err(StorageError::invalid(format!(
                "headers: list offsets reach element {previous}, header keys/values hold {} / {}",
                self.keys.len, self.values.len
            )));
        }
        Ok(())
    }

    /// Child elements holding record `i`'s headers (empty for a null list).
    #[inline]
    fn range(&self, i: usize) -> std::ops::Range<usize> {
        if !bit_is_set(self.list_validity, self.list_offset + i) {
            return 0..0;
        }
        let start = read_i32_le(self.list_offsets, self.list_offset + i) as usize;
        let end = read_i32_le(self.list_offsets, self.list_offset + i + 1) as usize;
        start..end
    }
}

fn check_validity(validity: Option<&[u8]>, end_bit: usize, what: &str) -> Result<()> {
    match validity {
        Some(bitmap) if bitmap.len() < end_bit.div_ceil(8) => Err(StorageError::invalid(format!(
            "{what}: validity bitmap holds {} bytes, {} needed",
            bitmap.len(),
            end_bit.div_ceil(8)
        ))),
        _ => Ok(()),
    }
}

#[inline(always)]
fn bit_is_set(bitmap: Option<&[u8]>, bit: usize) -> bool {
    bitmap.is_none_or(|b| (b[bit >> 3] >> (bit & 7)) & 1 != 0)
}

#[inline(always)]
fn read_i32_le(buf: &[u8], index: usize) -> i32 {
    let at = index * 4;
    i32::from_le_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

// ---------------------------------------------------------------------------------------------
// Producer sequences
// ---------------------------------------------------------------------------------------------

/// Kafka's `DefaultRecordBatch.incrementSequence`: sequences wrap from `i32::MAX` to 0.
fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------

/// The Arrow arrays to encode; `values.len` is the record count.
#[derive(Debug, Clone, Copy)]
pub struct EncodeInput<'a> {
    pub values: BinaryColumn<'a>,
    /// `None`: every key is null.
    pub keys: Option<BinaryColumn<'a>>,
    /// `None`: no record has headers.
    pub headers: Option<HeadersColumn<'a>>,
    /// Explicit partition per record; a null entry leaves the record to the partitioner.
    pub partitions: Option<Int32Column<'a>>,
}

/// How to partition, batch and stamp the records.
#[derive(Debug, Clone)]
pub struct EncodeOptions {
    /// Partitions a record may go to: KIP-253's `undeleted_partition_count`.
    pub num_partitions: i32,
    /// KIP-253's `initial_partition_count`: keys go by linear hashing over `num_partitions`
    /// from it. Equal to `num_partitions` until the topic is first expanded (Kafka's own
    /// partitioner then).
    pub initial_partitions: i32,
    /// Partition of records with a null key and no explicit partition.
    pub sticky_partition: i32,
    /// CreateTime of every record (ms).
    pub timestamp: i64,
    /// Kafka's `batch.size`, in uncompressed bytes.
    pub batch_size: i64,
    /// Codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    pub compression: u8,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// Next sequence per partition (`num_partitions` entries; a negative entry means none);
    /// `None`: every batch gets baseSequence -1.
    pub base_sequences: Option<Vec<i32>>,
}

/// One batch to build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedBatch {
    pub partition: i32,
    pub record_count: usize,
    /// Uncompressed size of the whole batch, header included.
    pub size: usize,
    pub base_sequence: i32,
}

/// Where every record goes, computed by [`plan_batches`]; batches are in ascending partition
/// order, and each partition's batches in record order.
#[derive(Debug)]
pub struct EncodePlan {
    /// Per record: index in `batches` of the batch it goes to.
    batch_of: Vec<u32>,
    /// Per record: the bytes of its key and value fields and headers (see
    /// [`EncodeInput::fields_len`]).
    fields: Vec<u32>,
    pub batches: Vec<PlannedBatch>,
}

/// The batches of one partition, as [`encode_partitioned_batches`] returns them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionBatches {
    pub partition: i32,
    pub batches: Vec<Vec<u8>>,
    pub record_count: usize,
}

impl EncodeInput<'_> {
    /// Checks every column and the options; returns the record count.
    fn check(&self, opts: &EncodeOptions) -> Result<usize> {
        let n = self.values.len;
        if n > i32::MAX as usize {
            return Err(StorageError::invalid(format!(
                "{n} records exceed the maximum of {} per call",
                i32::MAX
            )));
        }
        self.values.check("values")?;
        if let Some(keys) = &self.keys {
            if keys.len != n {
                return Err(StorageError::invalid(format!(
                    "keys hold {} elements, values {n}",
                    keys.len
                )));
            }
            keys.check("keys")?;
        }
        if let Some(headers) = &self.headers {
            headers.check(n)?;
        }
        if let Some(partitions) = &self.partitions {
            partitions.check(n, "partitions")?;
        }
        if opts.num_partitions < 1 {
            return Err(StorageError::invalid(format!(
                "num_partitions must be at least 1, got {}",
                opts.num_partitions
            )));
        }
        LinearHashing::new(
            opts.initial_partitions.max(0) as u32,
            opts.num_partitions as u32,
        )
        .map_err(StorageError::invalid)?;
        if !(0..opts.num_partitions).contains(&opts.sticky_partition) {
            return Err(StorageError::invalid(format!(
                "sticky_partition {} is outside [0, {})",
                opts.sticky_partition, opts.num_partitions
            )));
        }
        if opts.batch_size < 0 {
            return Err(StorageError::invalid(format!(
                "batch_size must not be negative, got {}",
                opts.batch_size
            )));
        }
        if opts.compression > MAX_CODEC_ID {
            return Err(StorageError::invalid(format!(
                "unknown compression codec id {}",
                opts.compression
            )));
        }
        if let Some(sequences) = &opts.base_sequences {
            if sequences.len() != opts.num_partitions as usize {
                return Err(StorageError::invalid(format!(
                    "base_sequences holds {} entries, num_partitions is {}",
                    sequences.len(),
                    opts.num_partitions
                )));
            }
        }
        Ok(n)
    }

    /// Partition of record `i`, whose key is `key`; `keyed` places keys.
    #[inline]
    fn partition_of(
        &self,
        i: usize,
        key: Option<&[u8]>,
        num_partitions: i32,
        keyed: &LinearHashing,
        sticky: i32,
    ) -> Result<u32> {
        if let Some(p) = self.partitions.as_ref().and_then(|c| c.value(i)) {
            if !(0..num_partitions).contains(&p) {
                return Err(StorageError::invalid(format!(
                    "record {i}: partition {p} is outside [0, {num_partitions})"
                )));
            }
            return Ok(p as u32);
        }
        if let Some(key) = key {
            return Ok(keyed.partition_for_key(key));
        }
        Ok(sticky as u32)
    }

    /// Bytes of record `i` (key `key`) that do not depend on its offsetDelta: key and value
    /// fields and the headers. Errors on a null header key.
    #[inline]
    fn fields_len(&self, i: usize, key: Option<&[u8]>) -> Result<usize> {
        let mut len = bytes_field_len(key) + bytes_field_len(self.values.value(i));
        match &self.headers {
            None => len += 1, // headerCount 0
            Some(headers) => {
                let range = headers.range(i);
                len += varint_len(range.len() as i64);
                for j in range {
                    let Some(key) = headers.keys.value(j) else {
                        return Err(StorageError::invalid(format!(
                            "record {i}: null header key"
                        )));
                    };
                    len += bytes_field_len(Some(key)) + bytes_field_len(headers.values.value(j));
                }
            }
        }
        Ok(len)
    }

    /// Writes record `i` (length varint included) at `offset_delta`.
    #[inline]
    fn write_record(&self, w: &mut SliceWriter<'_>, i: usize, fields: u32, offset_delta: usize) {
        w.varint(body_len(offset_delta, fields as usize) as i64);
        w.byte(0); // attributes
        w.byte(0); // timestampDelta 0
        w.varint(offset_delta as i64);
        w.field(self.keys.as_ref().and_then(|c| c.value(i)));
        w.field(self.values.value(i));
        match &self.headers {
            None => w.byte(0),
            Some(headers) => {
                let range = headers.range(i);
                w.varint(range.len() as i64);
                for j in range {
                    // Null header keys were rejected while planning.
                    w.field(Some(headers.keys.value(j).unwrap_or_default()));
                    w.field(headers.values.value(j));
                }
            }
        }
    }
}

/// Bytes of a record after its length varint: attributes, timestampDelta (0), offsetDelta,
/// then `fields` (see [`EncodeInput::fields_len`]).
#[inline]
fn body_len(offset_delta: usize, fields: usize) -> usize {
    2 + varint_len(offset_delta as i64) + fields
}

#[inline]
fn bytes_field_len(data: Option<&[u8]>) -> usize {
    match data {
        Some(d) => varint_len(d.len() as i64) + d.len(),
        None => 1,
    }
}

/// Record indices grouped by partition, in input order within a partition.
fn group_by_partition(part: &[u32], num_partitions: usize) -> Vec<u32> {
    let n = part.len();
    if num_partitions <= n.saturating_mul(4).max(1 << 16) {
        // Counting sort.
        let mut next = vec![0u32; num_partitions + 1];
        for &p in part {
            next[p as usize + 1] += 1;
        }
        for p in 1..next.len() {
            next[p] += next[p - 1];
        }
        let mut order = vec![0u32; n];
        for (i, &p) in part.iter().enumerate() {
            let slot = &mut next[p as usize];
            order[*slot as usize] = i as u32;
            *slot += 1;
        }
        order
    } else {
        // Few records over very many partitions: a stable sort avoids a huge count table.
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_by_key(|&i| part[i as usize]);
        order
    }
}

/// Partitions the records and splits each partition's records into batches (no bytes written).
///
/// Errors ([`StorageError::InvalidArgument`]): inconsistent buffers, options out of range, an
/// explicit partition outside `[0, num_partitions)`, a null header key, a batch over 2 GiB.
pub fn plan_batches(input: &EncodeInput<'_>, opts: &EncodeOptions) -> Result<EncodePlan> {
    let n = input.check(opts)?;
    let max_size = i32::MAX as usize + LOG_OVERHEAD;
    // One pass in input order: partition and size of every record.
    let keyed = LinearHashing::new(opts.initial_partitions as u32, opts.num_partitions as u32)
        .map_err(StorageError::invalid)?;
    let mut part = Vec::with_capacity(n);
    let mut fields = Vec::with_capacity(n);
    for i in 0..n {
        let key = input.keys.as_ref().and_then(|c| c.value(i));
        part.push(input.partition_of(
            i,
            key,
            opts.num_partitions,
            &keyed,
            opts.sticky_partition,
        )?);
        let len = input.fields_len(i, key)?;
        if len > max_size {
            return Err(StorageError::invalid(format!(
                "record {i}: a record batch would exceed 2 GiB"
            )));
        }
        fields.push(len as u32);
    }
    let order = group_by_partition(&part, opts.num_partitions as usize);
    let batch_size = usize::try_from(opts.batch_size).unwrap_or(usize::MAX);

    let mut batch_of = vec![0u32; n];
    let mut batches = Vec::new();
    let mut pos = 0usize;
    while pos < n {
        let partition = part[order[pos] as usize];
        let base_sequence = opts
            .base_sequences
            .as_ref()
            .map_or(-1, |s| s[partition as usize]);
        let sequence_of = |records_before: usize| {
            if base_sequence < 0 {
                -1
            } else {
                increment_sequence(base_sequence, records_before as i32)
            }
        };
        let mut records_before = 0usize;
        let mut start = pos;
        let mut size = RECORD_BATCH_OVERHEAD;
        while pos < n && part[order[pos] as usize] == partition {
            let i = order[pos] as usize;
            let body = body_len(pos - start, fields[i] as usize);
            let mut record = varint_len(body as i64) + body;
            if pos > start && size + record > batch_size {
                batches.push(PlannedBatch {
                    partition: partition as i32,
                    record_count: pos - start,
                    size,
                    base_sequence: sequence_of(records_before),
                });
                records_before += pos - start;
                start = pos;
                size = RECORD_BATCH_OVERHEAD;
                let body = body_len(0, fields[i] as usize);
                record = varint_len(body as i64) + body;
            }
            if size + record > max_size {
                return Err(StorageError::invalid(format!(
                    "record {i}: a record batch would exceed 2 GiB"
                )));
            }
            batch_of[i] = batches.len() as u32;
            size += record;
            pos += 1;
        }
        batches.push(PlannedBatch {
            partition: partition as i32,
            record_count: pos - start,
            size,
            base_sequence: sequence_of(records_before),
        });
    }
    Ok(EncodePlan {
        batch_of,
        fields,
        batches,
    })
}

/// Writes the records sections of every batch (uncompressed), `sections[b]` for
/// `plan.batches[b]`, each exactly `size - RECORD_BATCH_OVERHEAD` bytes. Records are taken in
/// input order, so the columns are read sequentially while each section fills sequentially.
fn write_records(input: &EncodeInput<'_>, plan: &EncodePlan, sections: &mut [&mut [u8]]) {
    // Per batch: bytes written, records written (= next offsetDelta).
    let mut cursors = vec![(0usize, 0usize); sections.len()];
    for (i, &b) in plan.batch_of.iter().enumerate() {
        let (pos, offset_delta) = &mut cursors[b as usize];
        let mut w = SliceWriter {
            buf: &mut *sections[b as usize],
            pos: *pos,
        };
        input.write_record(&mut w, i, plan.fields[i], *offset_delta);
        *pos = w.pos;
        *offset_delta += 1;
    }
    debug_assert!(cursors
        .iter()
        .zip(sections.iter())
        .all(|(c, s)| c.0 == s.len()));
}

/// Fills the 61-byte header of `out` (a whole batch: header then records section) and its CRC.
fn write_header(out: &mut [u8], opts: &EncodeOptions, batch: &PlannedBatch) {
    let count = batch.record_count as i32;
    put_i64(out, BASE_OFFSET_OFFSET, 0);
    put_i32(out, BATCH_LENGTH_OFFSET, (out.len() - LOG_OVERHEAD) as i32);
    put_i32(out, PARTITION_LEADER_EPOCH_OFFSET, -1);
    out[MAGIC_OFFSET] = CURRENT_MAGIC as u8;
    out[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2]
        .copy_from_slice(&(opts.compression as i16).to_be_bytes());
    put_i32(out, LAST_OFFSET_DELTA_OFFSET, count - 1);
    put_i64(out, BASE_TIMESTAMP_OFFSET, opts.timestamp);
    put_i64(out, MAX_TIMESTAMP_OFFSET, opts.timestamp);
    put_i64(out, PRODUCER_ID_OFFSET, opts.producer_id);
    out[PRODUCER_EPOCH_OFFSET..PRODUCER_EPOCH_OFFSET + 2]
        .copy_from_slice(&opts.producer_epoch.to_be_bytes());
    put_i32(out, BASE_SEQUENCE_OFFSET, batch.base_sequence);
    put_i32(out, RECORDS_COUNT_OFFSET, count);
    let crc = crc32c(&out[ATTRIBUTES_OFFSET..]);
    out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Writes every batch of `plan` uncompressed, `outs[b]` for `plan.batches[b]`, each exactly
/// `size` bytes; only for `opts.compression == 0` (the attributes carry the codec id).
pub fn write_batches(
    input: &EncodeInput<'_>,
    opts: &EncodeOptions,
    plan: &EncodePlan,
    outs: &mut [&mut [u8]],
) {
    assert_eq!(outs.len(), plan.batches.len(), "one output per batch");
    debug_assert_eq!(opts.compression, 0);
    let mut sections: Vec<&mut [u8]> = outs
        .iter_mut()
        .zip(&plan.batches)
        .map(|(out, batch)| {
            assert_eq!(out.len(), batch.size, "output sized by the plan");
            &mut out[RECORD_BATCH_OVERHEAD..]
        })
        .collect();
    write_records(input, plan, &mut sections);
    for (out, batch) in outs.iter_mut().zip(&plan.batches) {
        write_header(out, opts, batch);
    }
}

/// Builds every batch of `plan` with `opts.compression`. With a codec, the uncompressed records
/// sections are written into one scratch buffer first (the size of the uncompressed output).
pub fn encode_batches(
    input: &EncodeInput<'_>,
    opts: &EncodeOptions,
    plan: &EncodePlan,
) -> Result<Vec<Vec<u8>>> {
    if opts.compression == 0 {
        let mut outs: Vec<Vec<u8>> = plan.batches.iter().map(|b| vec![0u8; b.size]).collect();
        let mut views: Vec<&mut [u8]> = outs.iter_mut().map(Vec::as_mut_slice).collect();
        write_batches(input, opts, plan, &mut views);
        return Ok(outs);
    }
    let total = plan
        .batches
        .iter()
        .map(|b| b.size - RECORD_BATCH_OVERHEAD)
        .sum();
    let mut scratch = vec![0u8; total];
    let mut sections = Vec::with_capacity(plan.batches.len());
    let mut rest = scratch.as_mut_slice();
    for batch in &plan.batches {
        let (section, tail) = rest.split_at_mut(batch.size - RECORD_BATCH_OVERHEAD);
        sections.push(section);
        rest = tail;
    }
    write_records(input, plan, &mut sections);
    let mut outs = Vec::with_capacity(plan.batches.len());
    for (section, batch) in sections.iter().zip(&plan.batches) {
        let mut out = Vec::with_capacity(RECORD_BATCH_OVERHEAD + section.len() / 2 + 64);
        out.resize(RECORD_BATCH_OVERHEAD, 0);
        compress(opts.compression, section, &mut out)?;
        if out.len() - LOG_OVERHEAD > i32::MAX as usize {
            return Err(StorageError::invalid(
                "compressed record batch would exceed 2 GiB",
            ));
        }
        write_header(&mut out, opts, batch);
        outs.push(out);
    }
    Ok(outs)
}

/// Appends `data` compressed with `codec` to `out`.
pub(crate) fn compress(codec: u8, data: &[u8], out: &mut Vec<u8>) -> Result<()> {
    let failed = |e: std::io::Error| StorageError::invalid(format!("compression failed: {e}"));
    match codec {
        1 => {
            let mut encoder = flate2::write::GzEncoder::new(out, flate2::Compression::default());
            encoder.write_all(data).map_err(failed)?;
            encoder.finish().map_err(failed)?;
        }
        2 => {
            let header_start = out.len();
            out.extend_from_slice(&XERIAL_MAGIC);
            out.extend_from_slice(&XERIAL_VERSION.to_be_bytes());
            out.extend_from_slice(&XERIAL_COMPATIBLE_VERSION.to_be_bytes());
            debug_assert_eq!(out.len() - header_start, XERIAL_HEADER_LEN);
            let mut encoder = snap::raw::Encoder::new();
            for block in data.chunks(XERIAL_BLOCK_SIZE) {
                let at = out.len();
                out.resize(at + 4 + snap::raw::max_compress_len(block.len()), 0);
                let n = encoder.compress(block, &mut out[at + 4..]).map_err(|e| {
                    StorageError::invalid(format!("snappy compression failed: {e}"))
                })?;
                out.truncate(at + 4 + n);
                out[at..at + 4].copy_from_slice(&(n as i32).to_be_bytes());
            }
        }
        3 => {
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent);
            let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(info, out);
            encoder.write_all(data).map_err(failed)?;
            encoder
                .finish()
                .map_err(|e| StorageError::invalid(format!("lz4 compression failed: {e}")))?;
        }
        4 => {
            ruzstd::encoding::compress(data, out, ruzstd::encoding::CompressionLevel::Fastest);
        }
        codec => {
            return Err(StorageError::invalid(format!(
                "unknown compression codec id {codec}"
            )))
        }
    }
    Ok(())
}

/// Plans and builds every batch: `(partition, batches, record_count)` in ascending partition
/// order, only partitions that got records.
pub fn encode_partitioned_batches(
    input: &EncodeInput<'_>,
    opts: &EncodeOptions,
) -> Result<Vec<PartitionBatches>> {
    let plan = plan_batches(input, opts)?;
    let encoded = encode_batches(input, opts, &plan)?;
    let mut result: Vec<PartitionBatches> = Vec::new();
    for (batch, bytes) in plan.batches.iter().zip(encoded) {
        match result.last_mut() {
            Some(last) if last.partition == batch.partition => {
                last.batches.push(bytes);
                last.record_count += batch.record_count;
            }
            _ => result.push(PartitionBatches {
                partition: batch.partition,
                batches: vec![bytes],
                record_count: batch.record_count,
            }),
        }
    }
    Ok(result)
}

/// Writes into a slice sized in advance.
struct SliceWriter<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl SliceWriter<'_> {
    #[inline]
    fn byte(&mut self, b: u8) {
        self.buf[self.pos] = b;
        self.pos += 1;
    }

    #[inline]
    fn bytes(&mut self, data: &[u8]) {
        self.buf[self.pos..self.pos + data.len()].copy_from_slice(data);
        self.pos += data.len();
    }

    /// Zigzag varint.
    #[inline]
    fn varint(&mut self, v: i64) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        while z >= 0x80 {
            self.byte(z as u8 | 0x80);
            z >>= 7;
        }
        self.byte(z as u8);
    }

    /// A key, value or header value: length varint then bytes, null as length -1.
    #[inline]
    fn field(&mut self, data: Option<&[u8]>) {
        match data {
            Some(d) => {
                self.varint(d.len() as i64);
                self.bytes(d);
            }
            None => self.byte(1), // zigzag(-1)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

/// An Arrow `binary` array under construction (offset 0).
#[derive(Debug, Default)]
struct BinaryBuilder {
    validity: Vec<u8>,
    null_count: usize,
    offsets: Vec<u8>,
    data: Vec<u8>,
    len: usize,
}

impl BinaryBuilder {
    fn with_capacity(elements: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity((elements + 1) * 4);
        offsets.extend_from_slice(&0i32.to_le_bytes());
        BinaryBuilder {
            validity: Vec::with_capacity(elements.div_ceil(8)),
            null_count: 0,
            offsets,
            data: Vec::with_capacity(bytes),
            len: 0,
        }
    }

    #[inline]
    fn push(&mut self, value: Option<&[u8]>) -> Result<()> {
        if self.len % 8 == 0 {
            self.validity.push(0);
        }
        match value {
            Some(d) => {
                self.data.extend_from_slice(d);
                *self.validity.last_mut().expect("pushed above") |= 1 << (self.len % 8);
            }
            None => self.null_count += 1,
        }
        let end = i32::try_from(self.data.len()).map_err(|_| {
            StorageError::invalid(
                "decoded records exceed 2 GiB in one column; fetch less at a time",
            )
        })?;
        self.offsets.extend_from_slice(&end.to_le_bytes());
        self.len += 1;
        Ok(())
    }

    fn finish(self) -> ArrowBinary {
        ArrowBinary {
            validity: (self.null_count > 0).then_some(self.validity),
            offsets: self.offsets,
            data: self.data,
        }
    }
}

/// The buffers of an Arrow `binary` array at offset 0, ready for `pa.Array.from_buffers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrowBinary {
    /// Validity bitmap (LSB bit order); `None` when no element is null.
    pub validity: Option<Vec<u8>>,
    /// `len + 1` little-endian int32 offsets, starting at 0.
    pub offsets: Vec<u8>,
    pub data: Vec<u8>,
}

/// Record headers as the buffers of an Arrow `list<struct<key, value>>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedHeaders {
    /// `count + 1` little-endian int32 offsets into `keys` / `values`.
    pub list_offsets: Vec<u8>,
    /// Never null (Kafka forbids null header keys), so `keys.validity` is `None`.
    pub keys: ArrowBinary,
    pub values: ArrowBinary,
}

/// Records of a fetched buffer as Arrow buffers, one element per record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedRecords {
    pub count: usize,
    /// `lastOffset + 1` of the last complete batch (control batches included), at least the
    /// `start_offset` passed in.
    pub next_offset: i64,
    /// Little-endian int64 per record.
    pub offsets: Vec<u8>,
    /// Little-endian int64 (ms) per record.
    pub timestamps: Vec<u8>,
    /// Little-endian int32 per record: 0 CreateTime, 1 LogAppendTime.
    pub timestamp_types: Vec<u8>,
    pub keys: ArrowBinary,
    pub values: ArrowBinary,
    /// `Some` only when headers were asked for.
    pub headers: Option<DecodedHeaders>,
}

/// Reads fields from a slice, never past its end.
pub(crate) struct SliceReader<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> SliceReader<'a> {
    #[inline]
    pub(crate) fn byte(&mut self) -> Result<u8> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| StorageError::corrupt("record data ends early"))?;
        self.pos += 1;
        Ok(b)
    }

    /// Zigzag varlong (also used for varints; callers range-check as needed).
    #[inline]
    pub(crate) fn varint(&mut self) -> Result<i64> {
        let first = self.byte()?;
        if first < 0x80 {
            return Ok(((first >> 1) as i64) ^ -((first & 1) as i64));
        }
        let mut raw = (first & 0x7F) as u64;
        let mut shift = 7;
        loop {
            let b = self.byte()?;
            raw |= ((b & 0x7F) as u64) << shift;
            if b < 0x80 {
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
            shift += 7;
            if shift > 63 {
                return Err(StorageError::corrupt("varint is too long"));
            }
        }
    }

    /// A length-prefixed field: `None` when the length is negative.
    #[inline]
    pub(crate) fn bytes(&mut self) -> Result<Option<&'a [u8]>> {
        let len = self.varint()?;
        if len < 0 {
            return Ok(None);
        }
        let remaining = self.buf.len() - self.pos;
        if len as u64 > remaining as u64 {
            return Err(StorageError::corrupt(format!(
                "record field of {len} bytes overruns the record length"
            )));
        }
        let data = &self.buf[self.pos..self.pos + len as usize];
        self.pos += len as usize;
        Ok(Some(data))
    }
}

/// Column builders of [`decode_record_batches`].
struct Columns {
    count: usize,
    offsets: Vec<u8>,
    timestamps: Vec<u8>,
    timestamp_types: Vec<u8>,
    keys: BinaryBuilder,
    values: BinaryBuilder,
    headers: Option<HeaderBuilders>,
}

struct HeaderBuilders {
    list_offsets: Vec<u8>,
    keys: BinaryBuilder,
    values: BinaryBuilder,
}

impl Columns {
    /// Parses the records section `body` of a batch described by `header`, appending the records
    /// with `start_offset <= offset < end_offset` (`end_offset < 0`: no end).
    fn decode_body(
        &mut self,
        header: &BatchHeader,
        body: &[u8],
        start_offset: i64,
        end_offset: i64,
    ) -> Result<()> {
        let timestamp_type = header.is_log_append_time() as i32;
        let mut reader = SliceReader { buf: body, pos: 0 };
        for _ in 0..header.records_count {
            let length = reader.varint()?;
            let remaining = body.len() - reader.pos;
            if length < 0 || length as u64 > remaining as u64 {
                return Err(StorageError::corrupt(format!(
                    "record length {length} does not fit the {remaining} bytes left in the batch"
                )));
            }
            let record_end = reader.pos + length as usize;
            let mut fields = SliceReader {
                buf: &body[..record_end],
                pos: reader.pos,
            };
            reader.pos = record_end;
            let _attributes = fields.byte()?;
            let timestamp_delta = fields.varint()?;
            let offset_delta = fields.varint()?;
            let offset = header.base_offset.saturating_add(offset_delta);
            if offset < start_offset || (end_offset >= 0 && offset >= end_offset) {
                continue;
            }
            let timestamp = if timestamp_type == 1 {
                header.max_timestamp
            } else {
                header.base_timestamp.saturating_add(timestamp_delta)
            };
            self.keys.push(fields.bytes()?)?;
            self.values.push(fields.bytes()?)?;
            if let Some(headers) = &mut self.headers {
                let count = fields.varint()?;
                if count < 0 {
                    return Err(StorageError::corrupt(format!(
                        "negative header count {count}"
                    )));
                }
                for _ in 0..count {
                    let key = fields
                        .bytes()?
                        .ok_or_else(|| StorageError::corrupt("null header key"))?;
                    headers.keys.push(Some(key))?;
                    headers.values.push(fields.bytes()?)?;
                }
                let end = i32::try_from(headers.keys.len)
                    .map_err(|_| StorageError::invalid("more than 2**31 headers in one fetch"))?;
                headers.list_offsets.extend_from_slice(&end.to_le_bytes());
            }
            self.offsets.extend_from_slice(&offset.to_le_bytes());
            self.timestamps.extend_from_slice(&timestamp.to_le_bytes());
            self.timestamp_types
                .extend_from_slice(&timestamp_type.to_le_bytes());
            self.count += 1;
        }
        Ok(())
    }
}

/// Kafka's read_committed rule on the consumer side (`CompletedFetch.nextFetchedRecord`): the
/// aborted transactions of a fetch, ordered by first offset, are consumed as the batches go by.
/// For each batch with a producer id, every aborted transaction starting at or before the
/// batch's last offset puts its producer id in the aborted set; an ABORT marker then takes its
/// producer out of the set, and a transactional data batch of a producer in the set is skipped.
pub struct AbortedFilter {
    /// `(first_offset, producer_id)`, ordered by first offset, consumed from `next`.
    pending: Vec<(i64, i64)>,
    next: usize,
    producers: std::collections::HashSet<i64>,
}

impl AbortedFilter {
    /// A filter over `(producer_id, first_offset)` pairs in any order.
    pub fn new(aborted_transactions: &[(i64, i64)]) -> AbortedFilter {
        let mut pending: Vec<(i64, i64)> = aborted_transactions
            .iter()
            .map(|&(producer_id, first_offset)| (first_offset, producer_id))
            .collect();
        pending.sort_by_key(|&(first_offset, _)| first_offset);
        AbortedFilter {
            pending,
            next: 0,
            producers: std::collections::HashSet::new(),
        }
    }

    /// Advances past the batch `batch` (described by `header`, complete) and tells whether its
    /// records belong to an aborted transaction. Control batches are never "aborted" (they are
    /// not returned as records anyway); an ABORT marker ends its producer's aborted transaction.
    pub fn is_aborted(&mut self, header: &BatchHeader, batch: &[u8]) -> bool {
        if header.producer_id < 0 {
            return false;
        }
        let last_offset = header.last_offset();
        while let Some(&(first_offset, producer_id)) = self.pending.get(self.next) {
            if first_offset > last_offset {
                break;
            }
            self.producers.insert(producer_id);
            self.next += 1;
        }
        if header.is_control() {
            if control_marker(header, batch).control_type == CONTROL_TYPE_ABORT {
                self.producers.remove(&header.producer_id);
            }
            return false;
        }
        header.is_transactional() && self.producers.contains(&header.producer_id)
    }
}

/// Decodes the records of `data`, a Fetch response's records for one partition, into Arrow
/// buffers: every record with `start_offset <= offset < end_offset` (`end_offset < 0`: no end)
/// of every complete non-control batch, in order.
///
/// `aborted_transactions` (`(producer_id, first_offset)` pairs, the Fetch response's
/// `AbortedTransactions`) switches to read_committed: the batches of aborted transactions are
/// skipped as Kafka's consumer does (see [`AbortedFilter`]). `None` returns every batch
/// (read_uncommitted).
///
/// A trailing partial batch is ignored. A complete batch that fails the checks (batchLength,
/// magic 2, codec, CRC-32C) or whose records do not parse gives [`StorageError::Corrupt`].
pub fn decode_record_batches(
    data: &[u8],
    start_offset: i64,
    end_offset: i64,
    include_headers: bool,
    aborted_transactions: Option<&[(i64, i64)]>,
) -> Result<DecodedRecords> {
    // Capacity estimate from the complete batches' headers (not yet CRC-checked, so bounded by
    // what the buffer could hold uncompressed).
    let mut announced = 0usize;
    let mut pos = 0usize;
    while data.len() - pos >= RECORD_BATCH_OVERHEAD {
        let batch_length = get_i32(data, pos + BATCH_LENGTH_OFFSET);
        if batch_length < MIN_BATCH_LENGTH
            || batch_length as usize + LOG_OVERHEAD > data.len() - pos
        {
            break;
        }
        announced =
            announced.saturating_add(get_i32(data, pos + RECORDS_COUNT_OFFSET).max(0) as usize);
        pos += batch_length as usize + LOG_OVERHEAD;
    }
    let records = announced.min(data.len() / 7 + 1);
    let mut columns = Columns {
        count: 0,
        offsets: Vec::with_capacity(records * 8),
        timestamps: Vec::with_capacity(records * 8),
        timestamp_types: Vec::with_capacity(records * 4),
        keys: BinaryBuilder::with_capacity(records, 0),
        values: BinaryBuilder::with_capacity(records, data.len()),
        headers: include_headers.then(|| {
            let mut list_offsets = Vec::with_capacity((records + 1) * 4);
            list_offsets.extend_from_slice(&0i32.to_le_bytes());
            HeaderBuilders {
                list_offsets,
                keys: BinaryBuilder::with_capacity(0, 0),
                values: BinaryBuilder::with_capacity(0, 0),
            }
        }),
    };

    let mut next_offset = start_offset;
    let mut scratch = Vec::new();
    let mut aborted = aborted_transactions.map(AbortedFilter::new);
    let mut pos = 0usize;
    while data.len() - pos >= LOG_OVERHEAD {
        let size = crate::batch::batch_size_at(data, pos)?;
        if size > data.len() - pos {
            break; // the partial batch a fetch may end with
        }
        let batch = &data[pos..pos + size];
        let header = BatchHeader::parse(batch).expect("a complete batch holds its header");
        header.check_structure()?;
        check_crc(batch)?;
        next_offset = next_offset.max(header.last_offset().saturating_add(1));
        let wanted = header.last_offset() >= start_offset
            && (end_offset < 0 || header.base_offset < end_offset);
        let aborted_batch = aborted
            .as_mut()
            .is_some_and(|filter| filter.is_aborted(&header, batch));
        if !header.is_control() && wanted && !aborted_batch {
            let body = if header.compression() == 0 {
                &batch[RECORD_BATCH_OVERHEAD..]
            } else {
                decompress_body(&header, batch, &mut scratch)?;
                scratch.as_slice()
            };
            columns.decode_body(&header, body, start_offset, end_offset)?;
        }
        pos += size;
    }

    Ok(DecodedRecords {
        count: columns.count,
        next_offset,
        offsets: columns.offsets,
        timestamps: columns.timestamps,
        timestamp_types: columns.timestamp_types,
        keys: columns.keys.finish(),
        values: columns.values.finish(),
        headers: columns.headers.map(|h| DecodedHeaders {
            list_offsets: h.list_offsets,
            keys: h.keys.finish(),
            values: h.values.finish(),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::test_support::{build_raw_batch, encode_records, TestRecord};
    use crate::batch::{
        assign_offsets, validate_batches, CONTROL_FLAG_MASK, TRANSACTIONAL_FLAG_MASK,
    };
    use crate::builder::{build_batch, KeyValue, ProducerFields};
    use crate::partitioner::partition_for_key;
    use crate::records::read_records;

    const TS: i64 = 1_700_000_000_000;

    type Field = Option<Vec<u8>>;
    type Header = (Vec<u8>, Field);

    /// One record as the tests describe it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Rec {
        key: Option<Vec<u8>>,
        value: Option<Vec<u8>>,
        headers: Vec<Header>,
    }

    fn rec(key: Option<&[u8]>, value: Option<&[u8]>) -> Rec {
        Rec {
            key: key.map(<[u8]>::to_vec),
            value: value.map(<[u8]>::to_vec),
            headers: Vec::new(),
        }
    }

    /// An Arrow binary array owned by a test, built with `pad` leading elements so that
    /// `offset` is exercised.
    struct OwnedBinary {
        validity: Option<Vec<u8>>,
        offsets: Vec<u8>,
        data: Vec<u8>,
        offset: usize,
        len: usize,
    }

    impl OwnedBinary {
        fn new(items: &[Option<&[u8]>], pad: usize) -> Self {
            let mut validity = vec![0u8; (pad + items.len()).div_ceil(8)];
            let mut offsets = Vec::new();
            let mut data = Vec::new();
            let mut any_null = false;
            let padding: Vec<Option<&[u8]>> = vec![Some(b"pad".as_slice()); pad];
            for (i, item) in padding.iter().chain(items).enumerate() {
                offsets.extend_from_slice(&(data.len() as i32).to_le_bytes());
                match item {
                    Some(d) => {
                        data.extend_from_slice(d);
                        validity[i / 8] |= 1 << (i % 8);
                    }
                    None => any_null = true,
                }
            }
            offsets.extend_from_slice(&(data.len() as i32).to_le_bytes());
            OwnedBinary {
                validity: any_null.then_some(validity),
                offsets,
                data,
                offset: pad,
                len: items.len(),
            }
        }

        fn column(&self) -> BinaryColumn<'_> {
            BinaryColumn {
                validity: self.validity.as_deref(),
                offsets: &self.offsets,
                data: &self.data,
                offset: self.offset,
                len: self.len,
            }
        }
    }

    struct OwnedHeaders {
        list_offsets: Vec<u8>,
        keys: OwnedBinary,
        values: OwnedBinary,
    }

    impl OwnedHeaders {
        fn new(records: &[Rec]) -> Self {
            let mut list_offsets = Vec::new();
            let mut keys: Vec<Option<&[u8]>> = Vec::new();
            let mut values: Vec<Option<&[u8]>> = Vec::new();
            for r in records {
                list_offsets.extend_from_slice(&(keys.len() as i32).to_le_bytes());
                for (k, v) in &r.headers {
                    keys.push(Some(k));
                    values.push(v.as_deref());
                }
            }
            list_offsets.extend_from_slice(&(keys.len() as i32).to_le_bytes());
            OwnedHeaders {
                list_offsets,
                keys: OwnedBinary::new(&keys, 0),
                values: OwnedBinary::new(&values, 0),
            }
        }

        fn column(&self) -> HeadersColumn<'_> {
            HeadersColumn {
                list_validity: None,
                list_offsets: &self.list_offsets,
                list_offset: 0,
                keys: self.keys.column(),
                values: self.values.column(),
            }
        }
    }

    struct Owned {
        values: OwnedBinary,
        keys: OwnedBinary,
        headers: OwnedHeaders,
    }

    impl Owned {
        fn new(records: &[Rec]) -> Self {
            let keys: Vec<Option<&[u8]>> = records.iter().map(|r| r.key.as_deref()).collect();
            let values: Vec<Option<&[u8]>> = records.iter().map(|r| r.value.as_deref()).collect();
            Owned {
                values: OwnedBinary::new(&values, 3),
                keys: OwnedBinary::new(&keys, 5),
                headers: OwnedHeaders::new(records),
            }
        }

        fn input(&self) -> EncodeInput<'_> {
            EncodeInput {
                values: self.values.column(),
                keys: Some(self.keys.column()),
                headers: Some(self.headers.column()),
                partitions: None,
            }
        }
    }

    fn options(num_partitions: i32, compression: u8, batch_size: i64) -> EncodeOptions {
        EncodeOptions {
            num_partitions,
            initial_partitions: num_partitions,
            sticky_partition: 0,
            timestamp: TS,
            batch_size,
            compression,
            producer_id: -1,
            producer_epoch: -1,
            base_sequences: None,
        }
    }

    /// Reads the records back out of decoded Arrow buffers.
    fn decoded_records(d: &DecodedRecords) -> Vec<(i64, i64, i32, Rec)> {
        let i64_at =
            |b: &[u8], i: usize| i64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
        let binary_at = |a: &ArrowBinary, i: usize| -> Option<Vec<u8>> {
            let valid = a
                .validity
                .as_ref()
                .is_none_or(|v| v[i / 8] >> (i % 8) & 1 == 1);
            valid.then(|| {
                let s = read_i32_le(&a.offsets, i) as usize;
                let e = read_i32_le(&a.offsets, i + 1) as usize;
                a.data[s..e].to_vec()
            })
        };
        assert_eq!(d.offsets.len(), d.count * 8);
        assert_eq!(d.keys.offsets.len(), (d.count + 1) * 4);
        (0..d.count)
            .map(|i| {
                let headers = d.headers.as_ref().map_or(Vec::new(), |h| {
                    let s = read_i32_le(&h.list_offsets, i) as usize;
                    let e = read_i32_le(&h.list_offsets, i + 1) as usize;
                    (s..e)
                        .map(|j| (binary_at(&h.keys, j).unwrap(), binary_at(&h.values, j)))
                        .collect()
                });
                (
                    i64_at(&d.offsets, i),
                    i64_at(&d.timestamps, i),
                    read_i32_le(&d.timestamp_types, i),
                    Rec {
                        key: binary_at(&d.keys, i),
                        value: binary_at(&d.values, i),
                        headers,
                    },
                )
            })
            .collect()
    }

    fn sample() -> Vec<Rec> {
        let mut records = vec![
            rec(Some(b"k1"), Some(b"v1")),
            rec(Some(b"k2"), None), // tombstone
            rec(None, Some(b"null key")),
            rec(None, None),
            rec(Some(b""), Some(b"")), // empty, not null
            rec(Some(b"big"), Some(&[0xAB; 70_000])),
        ];
        records[0].headers = vec![
            (b"h1".to_vec(), Some(b"x".to_vec())),
            (b"h2".to_vec(), None),
            (b"".to_vec(), Some(Vec::new())),
        ];
        records[3].headers = vec![(b"only".to_vec(), Some(vec![7; 300]))];
        records
    }

    #[test]
    fn sequences_wrap_like_kafka() {
        assert_eq!(increment_sequence(5, 3), 8);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(increment_sequence(0, 0), 0);
    }

    #[test]
    fn same_bytes_as_build_batch_without_headers() {
        let records = [
            rec(Some(b"k"), Some(b"vv")),
            rec(None, None),
            rec(Some(b"x"), Some(b"")),
        ];
        let owned = Owned::new(&records);
        let mut input = owned.input();
        input.headers = None;
        let mut opts = options(1, 0, 1 << 20);
        opts.producer_id = 42;
        opts.producer_epoch = 3;
        opts.base_sequences = Some(vec![9]);
        let got = encode_partitioned_batches(&input, &opts).unwrap();
        let pairs: Vec<KeyValue<'_>> = records
            .iter()
            .map(|r| (r.key.as_deref(), r.value.as_deref()))
            .collect();
        let producer = ProducerFields {
            producer_id: 42,
            producer_epoch: 3,
            base_sequence: 9,
        };
        assert_eq!(
            got,
            [PartitionBatches {
                partition: 0,
                batches: vec![build_batch(&pairs, 0, TS, producer).unwrap()],
                record_count: 3,
            }]
        );
    }

    #[test]
    fn round_trips_with_every_codec() {
        let records = sample();
        let owned = Owned::new(&records);
        for codec in 0..=MAX_CODEC_ID {
            let got =
                encode_partitioned_batches(&owned.input(), &options(1, codec, 1 << 20)).unwrap();
            assert_eq!(got.len(), 1);
            assert_eq!(got[0].record_count, records.len());
            let data: Vec<u8> = got[0].batches.concat();
            let info = validate_batches(&data, i64::MAX).unwrap();
            assert_eq!(info.compression, codec, "codec {codec}");
            let decoded = decode_record_batches(&data, 0, -1, true, None).unwrap();
            assert_eq!(decoded.next_offset, records.len() as i64);
            let expected: Vec<(i64, i64, i32, Rec)> = records
                .iter()
                .enumerate()
                .map(|(i, r)| (i as i64, TS, 0, r.clone()))
                .collect();
            assert_eq!(decoded_records(&decoded), expected, "codec {codec}");
            // The broker's own reader agrees on keys and values.
            let read: Vec<(Field, Field)> = read_records(&data)
                .unwrap()
                .into_iter()
                .map(|r| (r.key, r.value))
                .collect();
            let kv: Vec<_> = records
                .iter()
                .map(|r| (r.key.clone(), r.value.clone()))
                .collect();
            assert_eq!(read, kv, "codec {codec}");
        }
    }

    #[test]
    fn snappy_uses_xerial_blocks_and_lz4_independent_64k_blocks() {
        let records: Vec<Rec> = (0..40).map(|i| rec(None, Some(&[i as u8; 4000]))).collect();
        let owned = Owned::new(&records);
        let snappy =
            &encode_partitioned_batches(&owned.input(), &options(1, 2, 1 << 20)).unwrap()[0];
        let body = &snappy.batches[0][RECORD_BATCH_OVERHEAD..];
        assert!(body.starts_with(&XERIAL_MAGIC));
        assert_eq!(&body[8..16], &[0, 0, 0, 1, 0, 0, 0, 1]);
        let lz4 = &encode_partitioned_batches(&owned.input(), &options(1, 3, 1 << 20)).unwrap()[0];
        let body = &lz4.batches[0][RECORD_BATCH_OVERHEAD..];
        assert_eq!(&body[..4], &[0x04, 0x22, 0x4D, 0x18]); // LZ4 frame magic
                                                           // FLG: version 01, block independence, no checksums, no content size; BD: 64 KiB.
        assert_eq!(body[4], 0b0110_0000);
        assert_eq!(body[5], 0x40);
    }

    #[test]
    fn decodes_without_headers() {
        let records = sample();
        let owned = Owned::new(&records);
        let got = encode_partitioned_batches(&owned.input(), &options(1, 0, 1 << 20)).unwrap();
        let decoded = decode_record_batches(&got[0].batches[0], 0, -1, false, None).unwrap();
        assert!(decoded.headers.is_none());
        let got: Vec<Rec> = decoded_records(&decoded).into_iter().map(|r| r.3).collect();
        let expected: Vec<Rec> = records
            .iter()
            .map(|r| Rec {
                headers: Vec::new(),
                ..r.clone()
            })
            .collect();
        assert_eq!(got, expected);
        assert!(decoded.keys.validity.is_some() && decoded.values.validity.is_some());
    }

    #[test]
    fn no_nulls_gives_no_validity() {
        let records = [rec(Some(b"a"), Some(b"1")), rec(Some(b"b"), Some(b"2"))];
        let owned = Owned::new(&records);
        let got = encode_partitioned_batches(&owned.input(), &options(1, 0, 1 << 20)).unwrap();
        let decoded = decode_record_batches(&got[0].batches[0], 0, -1, true, None).unwrap();
        assert!(decoded.keys.validity.is_none() && decoded.values.validity.is_none());
        let h = decoded.headers.unwrap();
        assert_eq!(h.list_offsets, [0u8; 12]);
        assert!(h.keys.validity.is_none() && h.values.validity.is_none());
    }

    #[test]
    fn partitions_like_kafka() {
        let keys: Vec<Vec<u8>> = (0..200).map(|i| format!("key-{i}").into_bytes()).collect();
        let mut records: Vec<Rec> = keys.iter().map(|k| rec(Some(k), Some(b"v"))).collect();
        records[7].key = None;
        records[100].key = None;
        let owned = Owned::new(&records);
        // Explicit partitions for records 0 and 1 (the second null: partitioner decides).
        let mut explicit = Vec::new();
        explicit.extend_from_slice(&0i32.to_le_bytes()); // padding element
        explicit.extend_from_slice(&5i32.to_le_bytes());
        explicit.extend_from_slice(&99i32.to_le_bytes()); // null below
        explicit.resize(4 * 201, 0);
        let mut validity = vec![0u8; 201usize.div_ceil(8)];
        validity[0] = 0b0000_0010; // element 1 (record 0) valid, record 1 null, others null
        let mut input = owned.input();
        input.partitions = Some(Int32Column {
            validity: Some(&validity),
            data: &explicit,
            offset: 1,
        });
        let mut opts = options(7, 0, 1 << 20);
        opts.sticky_partition = 3;
        let got = encode_partitioned_batches(&input, &opts).unwrap();
        let mut expected: Vec<Vec<usize>> = vec![Vec::new(); 7];
        for (i, r) in records.iter().enumerate() {
            let p = match (i, &r.key) {
                (0, _) => 5,
                (_, Some(k)) => partition_for_key(k, 7) as usize,
                (_, None) => 3,
            };
            expected[p].push(i);
        }
        let partitions: Vec<i32> = got.iter().map(|p| p.partition).collect();
        let wanted: Vec<i32> = (0..7)
            .filter(|&p| !expected[p as usize].is_empty())
            .collect();
        assert_eq!(partitions, wanted);
        for p in &got {
            let decoded = decode_record_batches(&p.batches.concat(), 0, -1, false, None).unwrap();
            let values: Vec<Option<Vec<u8>>> = decoded_records(&decoded)
                .into_iter()
                .map(|r| r.3.key)
                .collect();
            let want: Vec<Option<Vec<u8>>> = expected[p.partition as usize]
                .iter()
                .map(|&i| records[i].key.clone())
                .collect();
            assert_eq!(values, want, "partition {}", p.partition);
            assert_eq!(p.record_count, want.len());
        }
    }

    #[test]
    fn explicit_partition_out_of_range_names_the_record() {
        let records = [
            rec(None, Some(b"a")),
            rec(None, Some(b"b")),
            rec(None, Some(b"c")),
        ];
        let owned = Owned::new(&records);
        let data: Vec<u8> = [0i32, 1, 4].iter().flat_map(|p| p.to_le_bytes()).collect();
        let mut input = owned.input();
        input.partitions = Some(Int32Column {
            validity: None,
            data: &data,
            offset: 0,
        });
        let err = encode_partitioned_batches(&input, &options(4, 0, 1 << 20)).unwrap_err();
        assert!(
            matches!(&err, StorageError::InvalidArgument(m) if m.contains("record 2") && m.contains("partition 4")),
            "{err}"
        );
        let data: Vec<u8> = [0i32, -1, 0].iter().flat_map(|p| p.to_le_bytes()).collect();
        input.partitions = Some(Int32Column {
            validity: None,
            data: &data,
            offset: 0,
        });
        let err = encode_partitioned_batches(&input, &options(4, 0, 1 << 20)).unwrap_err();
        assert!(matches!(&err, StorageError::InvalidArgument(m) if m.contains("record 1")));
    }

    #[test]
    fn splits_at_batch_size() {
        let records: Vec<Rec> = (0..300).map(|_| rec(None, Some(&[b'v'; 100]))).collect();
        let owned = Owned::new(&records);
        let mut input = owned.input();
        input.headers = None;
        let one = encode_partitioned_batches(&input, &options(1, 0, i32::MAX as i64)).unwrap();
        assert_eq!(one[0].batches.len(), 1);
        for batch_size in [0i64, 1, 61, 500, 1000, 16384, 20_000] {
            let got = encode_partitioned_batches(&input, &options(1, 0, batch_size)).unwrap();
            let batches = &got[0].batches;
            let mut total = 0;
            for (k, b) in batches.iter().enumerate() {
                let h = BatchHeader::parse(b).unwrap();
                total += h.records_count as usize;
                assert!(b.len() as i64 <= batch_size || h.records_count == 1);
                if k + 1 < batches.len() {
                    // The next batch's first record did not fit. Its size there would have
                    // been at least: length varint (2), attributes, timestampDelta,
                    // offsetDelta (1+), null key, value length (2), value, headerCount.
                    let next_record = 2 + 1 + 1 + 1 + 1 + 2 + 100 + 1;
                    assert!(b.len() + next_record > batch_size as usize, "{batch_size}");
                }
            }
            assert_eq!(total, 300);
            let data = batches.concat();
            let decoded = decode_record_batches(&data, 0, -1, false, None).unwrap();
            assert_eq!(decoded.count, 300);
        }
        // Sizes are exact: 16384 holds a whole number of records.
        let got = encode_partitioned_batches(&input, &options(1, 0, 16384)).unwrap();
        assert!(got[0].batches.iter().all(|b| b.len() <= 16384));
        assert!(got[0].batches.len() > 1);
    }

    #[test]
    fn oversized_record_gets_its_own_batch() {
        let records = [
            rec(None, Some(&[1; 10])),
            rec(None, Some(&[2; 5000])),
            rec(None, Some(&[3; 10])),
        ];
        let owned = Owned::new(&records);
        let got = encode_partitioned_batches(&owned.input(), &options(1, 0, 1000)).unwrap();
        let counts: Vec<i32> = got[0]
            .batches
            .iter()
            .map(|b| BatchHeader::parse(b).unwrap().records_count)
            .collect();
        assert_eq!(counts, [1, 1, 1]);
    }

    #[test]
    fn base_sequences_advance_per_partition() {
        let records: Vec<Rec> = (0..10).map(|_| rec(None, Some(&[0; 50]))).collect();
        let owned = Owned::new(&records);
        let p: Vec<u8> = [0i32, 1, 0, 1, 0, 1, 0, 0, 0, 2]
            .iter()
            .flat_map(|p| p.to_le_bytes())
            .collect();
        let mut input = owned.input();
        input.partitions = Some(Int32Column {
            validity: None,
            data: &p,
            offset: 0,
        });
        let mut opts = options(3, 0, 61 + 2 * 60); // two records per batch
        opts.producer_id = 77;
        opts.producer_epoch = 4;
        opts.base_sequences = Some(vec![10, i32::MAX - 1, -1]);
        let got = encode_partitioned_batches(&input, &opts).unwrap();
        let seqs: Vec<(i32, Vec<(i32, i32)>)> = got
            .iter()
            .map(|p| {
                (
                    p.partition,
                    p.batches
                        .iter()
                        .map(|b| {
                            let h = BatchHeader::parse(b).unwrap();
                            assert_eq!((h.producer_id, h.producer_epoch), (77, 4));
                            (h.base_sequence, h.records_count)
                        })
                        .collect(),
                )
            })
            .collect();
        assert_eq!(
            seqs,
            [
                (0, vec![(10, 2), (12, 2), (14, 2)]),
                (1, vec![(i32::MAX - 1, 2), (0, 1)]),
                (2, vec![(-1, 1)]),
            ]
        );
        opts.base_sequences = None;
        let got = encode_partitioned_batches(&input, &opts).unwrap();
        assert!(got
            .iter()
            .flat_map(|p| &p.batches)
            .all(|b| BatchHeader::parse(b).unwrap().base_sequence == -1));
        opts.base_sequences = Some(vec![0, 0]);
        assert!(matches!(
            encode_partitioned_batches(&input, &opts),
            Err(StorageError::InvalidArgument(_))
        ));
    }

    #[test]
    fn rejects_inconsistent_buffers_and_options() {
        let records = sample();
        let owned = Owned::new(&records);
        let check = |input: EncodeInput<'_>, opts: EncodeOptions, needle: &str| {
            match encode_partitioned_batches(&input, &opts) {
                Err(StorageError::InvalidArgument(m)) => assert!(m.contains(needle), "{m}"),
                other => panic!("expected an error containing {needle:?}, got {other:?}"),
            }
        };
        let opts = || options(1, 0, 1 << 20);
        let mut input = owned.input();
        input.values.offsets = &owned.values.offsets[..owned.values.offsets.len() - 1];
        check(input, opts(), "values: offsets buffer");
        let mut input = owned.input();
        input.values.len += 1;
        check(input, opts(), "values: offsets buffer");
        let mut input = owned.input();
        input.values.data = &owned.values.data[..10];
        check(input, opts(), "values: offsets reach");
        let mut input = owned.input();
        input.keys = Some(BinaryColumn {
            validity: Some(&[0xFF]),
            ..owned.keys.column()
        });
        check(input, opts(), "keys: validity bitmap");
        let mut input = owned.input();
        input.keys = Some(BinaryColumn {
            len: 2,
            ..owned.keys.column()
        });
        check(input, opts(), "keys hold 2 elements");
        let mut decreasing = owned.values.offsets.clone();
        decreasing[4 * 5..4 * 6].copy_from_slice(&1_000_000i32.to_le_bytes());
        let mut input = owned.input();
        input.values.offsets = &decreasing;
        check(input, opts(), "values: offsets decrease");
        let mut negative = owned.values.offsets.clone();
        negative[4 * 3..4 * 4].copy_from_slice(&(-1i32).to_le_bytes());
        let mut input = owned.input();
        input.values.offsets = &negative;
        check(input, opts(), "values: negative offset");
        let mut input = owned.input();
        input.values.offset = usize::MAX;
        check(input, opts(), "overflows");
        // Headers pointing past their children.
        let mut input = owned.input();
        let mut headers = owned.headers.column();
        headers.keys.len -= 1;
        input.headers = Some(headers);
        check(input, opts(), "headers: list offsets reach");
        let mut input = owned.input();
        let mut headers = owned.headers.column();
        headers.list_offsets = &owned.headers.list_offsets[..8];
        input.headers = Some(headers);
        check(input, opts(), "headers: list offsets buffer");
        let mut input = owned.input();
        input.partitions = Some(Int32Column {
            validity: None,
            data: &[0; 8],
            offset: 0,
        });
        check(input, opts(), "partitions: data buffer");
        // Options.
        check(owned.input(), options(0, 0, 100), "num_partitions");
        let mut o = opts();
        o.sticky_partition = 1;
        check(owned.input(), o, "sticky_partition");
        check(owned.input(), options(1, 5, 100), "codec");
        check(owned.input(), options(1, 0, -1), "batch_size");
    }

    #[test]
    fn rejects_null_header_key() {
        let mut records = vec![rec(None, Some(b"a")), rec(None, Some(b"b"))];
        records[1].headers = vec![(b"k".to_vec(), None)];
        let owned = Owned::new(&records);
        let mut input = owned.input();
        let null_keys = OwnedBinary::new(&[None], 0);
        let mut headers = owned.headers.column();
        headers.keys = null_keys.column();
        input.headers = Some(headers);
        let err = encode_partitioned_batches(&input, &options(1, 0, 1 << 20)).unwrap_err();
        assert!(
            matches!(&err, StorageError::InvalidArgument(m) if m.contains("record 1: null header key"))
        );
    }

    #[test]
    fn null_header_lists_and_sliced_lists() {
        let mut records = vec![
            rec(None, Some(b"a")),
            rec(None, Some(b"b")),
            rec(None, Some(b"c")),
        ];
        records[0].headers = vec![(b"x".to_vec(), Some(b"1".to_vec()))];
        records[1].headers = vec![(b"y".to_vec(), Some(b"2".to_vec()))];
        records[2].headers = vec![(b"z".to_vec(), None)];
        let owned = Owned::new(&records);
        let mut input = owned.input();
        // Record 1's list is null; a list slice starting at record 1 of a longer list.
        let list_validity = [0b0000_0101u8];
        let mut headers = owned.headers.column();
        headers.list_validity = Some(&list_validity);
        input.headers = Some(headers);
        let got = encode_partitioned_batches(&input, &options(1, 0, 1 << 20)).unwrap();
        let decoded = decode_record_batches(&got[0].batches[0], 0, -1, true, None).unwrap();
        let headers: Vec<Vec<Header>> = decoded_records(&decoded)
            .into_iter()
            .map(|r| r.3.headers)
            .collect();
        assert_eq!(
            headers,
            [
                vec![(b"x".to_vec(), Some(b"1".to_vec()))],
                vec![],
                vec![(b"z".to_vec(), None)],
            ]
        );
        // Slice of the last two records: values/keys sliced, list offset 1.
        let mut input = owned.input();
        input.values.offset += 1;
        input.values.len = 2;
        input.keys = None;
        let mut headers = owned.headers.column();
        headers.list_offset = 1;
        input.headers = Some(headers);
        let got = encode_partitioned_batches(&input, &options(1, 0, 1 << 20)).unwrap();
        let decoded = decode_record_batches(&got[0].batches[0], 0, -1, true, None).unwrap();
        let got: Vec<Rec> = decoded_records(&decoded).into_iter().map(|r| r.3).collect();
        assert_eq!(got, records[1..]);
    }

    #[test]
    fn empty_input_gives_no_partitions() {
        let owned = Owned::new(&[]);
        assert_eq!(
            encode_partitioned_batches(&owned.input(), &options(3, 0, 100)).unwrap(),
            []
        );
    }

    #[test]
    fn many_partitions_use_the_sorting_path() {
        let records: Vec<Rec> = (0..50)
            .map(|i| rec(Some(format!("{i}").as_bytes()), Some(b"v")))
            .collect();
        let owned = Owned::new(&records);
        let got =
            encode_partitioned_batches(&owned.input(), &options(i32::MAX, 0, 1 << 20)).unwrap();
        let mut expected: Vec<(i32, usize)> = records
            .iter()
            .enumerate()
            .map(|(i, r)| {
                (
                    partition_for_key(r.key.as_ref().unwrap(), i32::MAX as u32) as i32,
                    i,
                )
            })
            .collect();
        expected.sort();
        let got: Vec<i32> = got
            .iter()
            .flat_map(|p| vec![p.partition; p.record_count])
            .collect();
        let want: Vec<i32> = expected.iter().map(|e| e.0).collect();
        assert_eq!(got, want);
    }

    /// Three batches at offsets 10..13, 13..15 (control) and 15..20, uncompressed and lz4.
    fn fetched() -> Vec<u8> {
        let records: Vec<Rec> = (0..3).map(|i| rec(None, Some(&[i as u8; 10]))).collect();
        let owned = Owned::new(&records);
        let mut data = encode_partitioned_batches(&owned.input(), &options(1, 0, 1 << 20)).unwrap()
            [0]
        .batches[0]
            .clone();
        let marker = [TestRecord {
            timestamp: TS,
            key: Some(&[0, 0, 0, 1]),
            value: &[0, 0, 0, 0, 0, 0],
        }];
        data.extend(build_raw_batch(
            0,
            CONTROL_FLAG_MASK | TRANSACTIONAL_FLAG_MASK,
            1,
            TS,
            TS,
            1,
            &encode_records(TS, &marker),
        ));
        let records: Vec<Rec> = (3..8).map(|i| rec(None, Some(&[i as u8; 10]))).collect();
        let owned = Owned::new(&records);
        data.extend(
            encode_partitioned_batches(&owned.input(), &options(1, 3, 1 << 20)).unwrap()[0].batches
                [0]
            .clone(),
        );
        assign_offsets(&mut data, 10, 0, -1, &mut Vec::new()).unwrap();
        data
    }

    fn offsets_of(d: &DecodedRecords) -> Vec<i64> {
        decoded_records(d).into_iter().map(|r| r.0).collect()
    }

    #[test]
    fn skips_control_batches_and_filters_offsets() {
        let data = fetched();
        let all = decode_record_batches(&data, 0, -1, false, None).unwrap();
        assert_eq!(offsets_of(&all), [10, 11, 12, 15, 16, 17, 18, 19]);
        assert_eq!(all.next_offset, 20);
        let some = decode_record_batches(&data, 11, 17, true, None).unwrap();
        assert_eq!(offsets_of(&some), [11, 12, 15, 16]);
        assert_eq!(some.next_offset, 20);
        let values: Vec<Vec<u8>> = decoded_records(&some)
            .into_iter()
            .map(|r| r.3.value.unwrap())
            .collect();
        assert_eq!(values, [vec![1; 10], vec![2; 10], vec![3; 10], vec![4; 10]]);
        let none = decode_record_batches(&data, 13, 15, false, None).unwrap();
        assert_eq!(none.count, 0);
        assert_eq!(none.next_offset, 20);
        // next_offset never goes below start_offset.
        assert_eq!(
            decode_record_batches(&data, 100, -1, false, None)
                .unwrap()
                .next_offset,
            100
        );
        assert_eq!(
            decode_record_batches(&data, 0, 0, false, None)
                .unwrap()
                .count,
            0
        );
    }

    #[test]
    fn ignores_a_partial_tail() {
        let data = fetched();
        let first_len = BatchHeader::parse(&data).unwrap().size();
        let second_end = first_len + BatchHeader::parse(&data[first_len..]).unwrap().size();
        for cut in [
            data.len() - 1,
            second_end + 11,
            second_end + 12,
            second_end + 61,
            second_end,
        ] {
            let d = decode_record_batches(&data[..cut], 0, -1, false, None).unwrap();
            assert_eq!(offsets_of(&d), [10, 11, 12], "cut {cut}");
            assert_eq!(d.next_offset, 15, "cut {cut}");
        }
        for cut in [0, 5, 12, 60, first_len - 1] {
            let d = decode_record_batches(&data[..cut], 7, -1, false, None).unwrap();
            assert_eq!((d.count, d.next_offset), (0, 7), "cut {cut}");
            assert!(d.offsets.is_empty());
            assert_eq!(d.values.offsets, 0i32.to_le_bytes());
        }
    }

    #[test]
    fn rejects_damaged_batches() {
        let data = fetched();
        let last = data.len() - 1;
        let mut bad_crc = data.clone();
        bad_crc[last] ^= 1;
        let mut bad_magic = data.clone();
        bad_magic[MAGIC_OFFSET] = 1;
        let mut bad_length = data.clone();
        put_i32(&mut bad_length, BATCH_LENGTH_OFFSET, 10);
        let mut bad_codec = data.clone();
        bad_codec[ATTRIBUTES_OFFSET + 1] |= 7;
        for (name, d) in [
            ("crc", bad_crc),
            ("magic", bad_magic),
            ("length", bad_length),
            ("codec", bad_codec),
        ] {
            assert!(
                matches!(
                    decode_record_batches(&d, 0, -1, true, None),
                    Err(StorageError::Corrupt(_))
                ),
                "{name}"
            );
        }
        // A record overrunning its batch, with a valid CRC.
        let mut body = vec![0u8, 0, 0];
        crate::batch::test_support::put_varint(&mut body, 1000);
        body.extend_from_slice(b"abc");
        let mut payload = Vec::new();
        crate::batch::test_support::put_varint(&mut payload, body.len() as i64);
        payload.extend_from_slice(&body);
        let b = build_raw_batch(0, 0, 0, 1, 1, 1, &payload);
        assert!(
            matches!(decode_record_batches(&b, 0, -1, false, None), Err(StorageError::Corrupt(m)) if m.contains("overruns"))
        );
        // More records announced than present.
        let b = build_raw_batch(0, 0, 1, 1, 1, 2, &payload[..0]);
        assert!(matches!(
            decode_record_batches(&b, 0, -1, false, None),
            Err(StorageError::Corrupt(_))
        ));
    }

    #[test]
    fn decodes_batches_of_the_test_builders() {
        // Independently built batches: every codec, xerial and raw snappy, varied timestamps.
        let records: Vec<TestRecord<'_>> = [5i64, 3, 9]
            .iter()
            .map(|&ts| TestRecord {
                timestamp: 1000 + ts,
                key: (ts != 3).then_some(b"key".as_slice()),
                value: b"some value bytes",
            })
            .collect();
        let expected: Vec<(i64, i64, i32, Rec)> = records
            .iter()
            .enumerate()
            .map(|(i, r)| (i as i64, r.timestamp, 0, rec(r.key, Some(r.value))))
            .collect();
        let raw = encode_records(1005, &records);
        let raw_snappy = snap::raw::Encoder::new().compress_vec(&raw).unwrap();
        let mut batches = vec![
            crate::batch::test_support::batch_of(&records),
            build_raw_batch(0, 2, 2, 1005, 1009, 3, &raw_snappy),
        ];
        for codec in 1..=4 {
            batches.push(crate::records::test_support::compressed_batch(
                codec, &records,
            ));
        }
        for (i, b) in batches.iter().enumerate() {
            let d = decode_record_batches(b, 0, -1, true, None).unwrap();
            assert_eq!(decoded_records(&d), expected, "batch {i}");
        }
    }

    #[test]
    fn log_append_time_uses_max_timestamp() {
        let mut data = fetched();
        assign_offsets(&mut data, 0, 0, 42, &mut Vec::new()).unwrap();
        let d = decoded_records(&decode_record_batches(&data, 0, -1, false, None).unwrap());
        assert!(d.iter().all(|r| r.1 == 42 && r.2 == 1));
        let create_time =
            decoded_records(&decode_record_batches(&fetched(), 0, -1, false, None).unwrap());
        assert!(create_time.iter().all(|r| r.1 == TS && r.2 == 0));
    }

    /// Interleaved producers, offsets in brackets: 1 txn [0, 1], 2 txn [2], 3 idempotent
    /// (not transactional) [3], 1 txn [4], ABORT of 1 [5], 2 txn [6], COMMIT of 2 [7], 1 txn [8],
    /// COMMIT of 1 [9], 4 txn [10] (aborted, its marker not fetched yet), no producer id [11].
    fn transactions() -> Vec<u8> {
        use crate::builder::{build_batch_with_attributes, build_control_batch};
        let data_batch = |producer_id: i64, n: usize, transactional: bool| {
            let pairs: Vec<KeyValue<'_>> = (0..n).map(|_| (None, Some(b"v".as_slice()))).collect();
            let producer = ProducerFields {
                producer_id,
                producer_epoch: 0,
                base_sequence: 0,
            };
            let attributes = if transactional {
                TRANSACTIONAL_FLAG_MASK
            } else {
                0
            };
            build_batch_with_attributes(&pairs, 0, TS, producer, attributes).unwrap()
        };
        let mut data = Vec::new();
        data.extend(data_batch(1, 2, true));
        data.extend(data_batch(2, 1, true));
        data.extend(data_batch(3, 1, false));
        data.extend(data_batch(1, 1, true));
        data.extend(build_control_batch(1, 0, 5, false, TS));
        data.extend(data_batch(2, 1, true));
        data.extend(build_control_batch(2, 0, 5, true, TS));
        data.extend(data_batch(1, 1, true));
        data.extend(build_control_batch(1, 0, 5, true, TS));
        data.extend(data_batch(4, 1, true));
        data.extend(build_batch(&[(None, Some(b"v"))], 0, TS, ProducerFields::NONE).unwrap());
        assign_offsets(&mut data, 0, 0, -1, &mut Vec::new()).unwrap();
        data
    }

    #[test]
    fn read_committed_skips_aborted_transactions_like_the_consumer() {
        let data = transactions();
        // Unordered, and an "aborted transaction" of producer 3, whose batch is not
        // transactional: it stays.
        let aborted = [(4, 10), (1, 0), (3, 3)];
        let d = decode_record_batches(&data, 0, -1, false, Some(&aborted)).unwrap();
        assert_eq!(offsets_of(&d), [2, 3, 6, 8, 11]);
        assert_eq!(d.next_offset, 12);
        // read_uncommitted, or no aborted transaction: every data record.
        for aborted in [None, Some(&[][..])] {
            let d = decode_record_batches(&data, 0, -1, false, aborted).unwrap();
            assert_eq!(offsets_of(&d), [0, 1, 2, 3, 4, 6, 8, 10, 11]);
            assert_eq!(d.next_offset, 12);
        }
        // A fetch starting inside the aborted transaction of producer 1 (it began before the
        // fetched data) still skips the rest of it; offset bounds apply as usual.
        let fourth = {
            let mut pos = 0;
            for _ in 0..3 {
                pos += BatchHeader::parse(&data[pos..]).unwrap().size();
            }
            pos
        };
        let d = decode_record_batches(&data[fourth..], 4, 9, true, Some(&aborted)).unwrap();
        assert_eq!(offsets_of(&d), [6, 8]);
        assert_eq!(d.next_offset, 12);
        // A second aborted transaction of producer 1 starting at 8 is skipped too: the ABORT at
        // 5 ended the first one, the entry at 8 starts the next.
        let d = decode_record_batches(&data, 0, -1, false, Some(&[(1, 0), (1, 8)])).unwrap();
        assert_eq!(offsets_of(&d), [2, 3, 6, 10, 11]);
        // Only producer 1's first transaction aborted: the ABORT at 5 ends it, and producer 1's
        // next transaction (8) is read.
        let d = decode_record_batches(&data, 0, -1, false, Some(&[(1, 0)])).unwrap();
        assert_eq!(offsets_of(&d), [2, 3, 6, 8, 10, 11]);
    }
}
