//! Kafka record batch (magic v2) headers: field layout, parsing, validation of a produced record
//! set, and the in-place patches the leader applies on append (offsets, partition leader epoch,
//! LogAppendTime).
//!
//! A record set is a plain concatenation of batches. Each batch starts with a 61-byte header, all
//! fields big-endian:
//!
//! | pos | field                 | type  |
//! |-----|-----------------------|-------|
//! |  0  | baseOffset            | i64   |
//! |  8  | batchLength (= size - 12) | i32 |
//! | 12  | partitionLeaderEpoch  | i32   |
//! | 16  | magic (= 2)           | i8    |
//! | 17  | crc (CRC-32C of bytes 21..size) | u32 |
//! | 21  | attributes            | i16   |
//! | 23  | lastOffsetDelta       | i32   |
//! | 27  | baseTimestamp         | i64   |
//! | 35  | maxTimestamp          | i64   |
//! | 43  | producerId            | i64   |
//! | 51  | producerEpoch         | i16   |
//! | 53  | baseSequence          | i32   |
//! | 57  | recordsCount          | i32   |
//!
//! Record-level decoding lives in `records.rs`; this module never looks past the header except
//! to checksum the batch and, for a control batch on the follower path, to read its marker.

use crate::crc32c::crc32c;
use crate::errors::{Result, StorageError};
use crate::records::control_marker;

/// Size of `baseOffset` + `batchLength`, the part of a batch not counted by `batchLength`.
pub const LOG_OVERHEAD: usize = 12;
/// Size of the v2 batch header (`DefaultRecordBatch.RECORD_BATCH_OVERHEAD`).
pub const RECORD_BATCH_OVERHEAD: usize = 61;
/// Smallest legal `batchLength`: a header with no records.
pub const MIN_BATCH_LENGTH: i32 = (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i32;
/// The only batch format this broker stores.
pub const CURRENT_MAGIC: i8 = 2;
/// "No timestamp" sentinel.
pub const NO_TIMESTAMP: i64 = -1;

pub const BASE_OFFSET_OFFSET: usize = 0;
pub const BATCH_LENGTH_OFFSET: usize = 8;
pub const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
pub const MAGIC_OFFSET: usize = 16;
pub const CRC_OFFSET: usize = 17;
pub const ATTRIBUTES_OFFSET: usize = 21;
pub const LAST_OFFSET_DELTA_OFFSET: usize = 23;
pub const BASE_TIMESTAMP_OFFSET: usize = 27;
pub const MAX_TIMESTAMP_OFFSET: usize = 35;
pub const PRODUCER_ID_OFFSET: usize = 43;
pub const PRODUCER_EPOCH_OFFSET: usize = 51;
pub const BASE_SEQUENCE_OFFSET: usize = 53;
pub const RECORDS_COUNT_OFFSET: usize = 57;

/// Attribute bits 0-2: compression codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
pub const COMPRESSION_CODEC_MASK: i16 = 0x07;
/// Attribute bit 3: timestamp type (set = LogAppendTime).
pub const TIMESTAMP_TYPE_MASK: i16 = 0x08;
/// Attribute bit 4: the batch belongs to a transaction.
pub const TRANSACTIONAL_FLAG_MASK: i16 = 0x10;
/// Attribute bit 5: control batch (transaction markers).
pub const CONTROL_FLAG_MASK: i16 = 0x20;
/// Highest codec id Kafka defines (zstd).
pub const MAX_CODEC_ID: u8 = 4;

#[inline]
pub(crate) fn get_i16(buf: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([buf[at], buf[at + 1]])
}

#[inline]
pub(crate) fn get_i32(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

#[inline]
pub(crate) fn get_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

#[inline]
pub(crate) fn get_i64(buf: &[u8], at: usize) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    i64::from_be_bytes(b)
}

#[inline]
pub(crate) fn put_i32(buf: &mut [u8], at: usize, v: i32) {
    buf[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn put_i64(buf: &mut [u8], at: usize, v: i64) {
    buf[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

/// The decoded 61-byte header of a v2 record batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    /// Decodes the header at the start of `buf`; `None` if fewer than 61 bytes are given.
    pub fn parse(buf: &[u8]) -> Option<BatchHeader> {
        if buf.len() < RECORD_BATCH_OVERHEAD {
            return None;
        }
        Some(BatchHeader {
            base_offset: get_i64(buf, BASE_OFFSET_OFFSET),
            batch_length: get_i32(buf, BATCH_LENGTH_OFFSET),
            partition_leader_epoch: get_i32(buf, PARTITION_LEADER_EPOCH_OFFSET),
            magic: buf[MAGIC_OFFSET] as i8,
            crc: get_u32(buf, CRC_OFFSET),
            attributes: get_i16(buf, ATTRIBUTES_OFFSET),
            last_offset_delta: get_i32(buf, LAST_OFFSET_DELTA_OFFSET),
            base_timestamp: get_i64(buf, BASE_TIMESTAMP_OFFSET),
            max_timestamp: get_i64(buf, MAX_TIMESTAMP_OFFSET),
            producer_id: get_i64(buf, PRODUCER_ID_OFFSET),
            producer_epoch: get_i16(buf, PRODUCER_EPOCH_OFFSET),
            base_sequence: get_i32(buf, BASE_SEQUENCE_OFFSET),
            records_count: get_i32(buf, RECORDS_COUNT_OFFSET),
        })
    }

    /// Total size of the batch in bytes (`batchLength + 12`); only meaningful once
    /// [`check_structure`](Self::check_structure) passed.
    #[inline]
    pub fn size(&self) -> usize {
        self.batch_length as usize + LOG_OVERHEAD
    }

    /// Offset of the batch's last record.
    #[inline]
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .saturating_add(self.last_offset_delta as i64)
    }

    /// Compression codec id (attribute bits 0-2).
    #[inline]
    pub fn compression(&self) -> u8 {
        (self.attributes & COMPRESSION_CODEC_MASK) as u8
    }

    /// True when the batch uses LogAppendTime.
    #[inline]
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & TIMESTAMP_TYPE_MASK != 0
    }

    #[inline]
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_FLAG_MASK != 0
    }

    #[inline]
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_FLAG_MASK != 0
    }

    /// Checks what can be checked without the batch body: `batchLength >= 49`, magic 2, a known
    /// codec, `lastOffsetDelta >= 0` and `recordsCount >= 0`.
    pub fn check_structure(&self) -> Result<()> {
        if self.batch_length < MIN_BATCH_LENGTH {
            return Err(StorageError::corrupt(format!(
                "record batch length {} is below the minimum of {MIN_BATCH_LENGTH}",
                self.batch_length
            )));
        }
        if self.magic != CURRENT_MAGIC {
            return Err(StorageError::corrupt(format!(
                "unsupported record batch magic {} (only magic 2 is accepted)",
                self.magic
            )));
        }
        if self.compression() > MAX_CODEC_ID {
            return Err(StorageError::corrupt(format!(
                "unknown compression codec id {}",
                self.compression()
            )));
        }
        if self.last_offset_delta < 0 {
            return Err(StorageError::corrupt(format!(
                "negative lastOffsetDelta {}",
                self.last_offset_delta
            )));
        }
        if self.records_count < 0 {
            return Err(StorageError::corrupt(format!(
                "negative recordsCount {}",
                self.records_count
            )));
        }
        Ok(())
    }
}

/// Verifies the CRC-32C of a complete batch (`batch.len()` must equal its size).
pub fn check_crc(batch: &[u8]) -> Result<()> {
    let stored = get_u32(batch, CRC_OFFSET);
    let computed = crc32c(&batch[ATTRIBUTES_OFFSET..]);
    if stored != computed {
        return Err(StorageError::corrupt(format!(
            "record batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}"
        )));
    }
    Ok(())
}

/// Summary of a produced record set, computed by [`validate_batches`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordsInfo {
    /// Bytes in the record set.
    pub size: usize,
    pub batch_count: usize,
    /// Offsets the set consumes: the sum of `lastOffsetDelta + 1` over its batches.
    pub record_count: i64,
    /// `baseTimestamp` of the first batch.
    pub first_timestamp: i64,
    /// Largest `maxTimestamp` of the batches (-1 if none is >= 0).
    pub max_timestamp: i64,
    /// Offset, relative to the set's first offset once offsets are assigned contiguously, of the
    /// last record of the first batch holding `max_timestamp`; -1 if there is no timestamp.
    pub last_offset_delta_of_max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub last_offset_delta: i32,
    pub is_transactional: bool,
    pub is_control: bool,
    /// The first batch's end-transaction marker type (0 ABORT, 1 COMMIT), -1 unless it is a
    /// control batch with a readable marker.
    pub control_type: i16,
    /// The first batch's marker coordinator epoch, -1 unless it is an end-transaction marker.
    pub coordinator_epoch: i32,
    pub compression: u8,
    /// `baseOffset` of the first batch as found in the buffer (meaningful for replicated data).
    pub base_offset: i64,
    /// Last offset of the last batch as found in the buffer (meaningful for replicated data).
    pub last_offset: i64,
}

/// Walks a record set once, checking every batch (lengths, magic, codec, size limit, CRC).
///
/// Errors: an empty set, a trailing partial batch or any malformed batch gives
/// [`StorageError::Corrupt`]; a batch larger than `max_message_bytes` gives
/// [`StorageError::RecordTooLarge`] (checked before the CRC, as Kafka does).
pub fn validate_batches(records: &[u8], max_message_bytes: i64) -> Result<RecordsInfo> {
    if records.is_empty() {
        return Err(StorageError::corrupt("empty record set"));
    }
    let mut info = RecordsInfo {
        size: records.len(),
        batch_count: 0,
        record_count: 0,
        first_timestamp: NO_TIMESTAMP,
        max_timestamp: NO_TIMESTAMP,
        last_offset_delta_of_max_timestamp: -1,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        last_offset_delta: -1,
        is_transactional: false,
        is_control: false,
        control_type: -1,
        coordinator_epoch: -1,
        compression: 0,
        base_offset: 0,
        last_offset: 0,
    };
    let mut pos = 0usize;
    while pos < records.len() {
        let remaining = records.len() - pos;
        if remaining < LOG_OVERHEAD {
            return Err(StorageError::corrupt(format!(
                "trailing partial record batch: {remaining} bytes at position {pos}"
            )));
        }
        let size = batch_size_at(records, pos)?;
        if size > remaining {
            return Err(StorageError::corrupt(format!(
                "trailing partial record batch at position {pos}: size {size}, only {remaining} bytes present"
            )));
        }
        let batch = &records[pos..pos + size];
        let header = parse_magic2_header(batch, pos)?;
        if size as i64 > max_message_bytes {
            return Err(StorageError::RecordTooLarge(format!(
                "record batch of {size} bytes exceeds the maximum of {max_message_bytes} bytes"
            )));
        }
        check_crc(batch)?;
        header.check_structure()?;

        if info.batch_count == 0 {
            info.first_timestamp = header.base_timestamp;
            info.producer_id = header.producer_id;
            info.producer_epoch = header.producer_epoch;
            info.base_sequence = header.base_sequence;
            info.last_offset_delta = header.last_offset_delta;
            info.is_transactional = header.is_transactional();
            info.is_control = header.is_control();
            let marker = control_marker(&header, batch);
            info.control_type = marker.control_type;
            info.coordinator_epoch = marker.coordinator_epoch;
            info.compression = header.compression();
            info.base_offset = header.base_offset;
        }
        let batch_last_delta = info.record_count + header.last_offset_delta as i64;
        if header.max_timestamp > info.max_timestamp {
            info.max_timestamp = header.max_timestamp;
            info.last_offset_delta_of_max_timestamp = batch_last_delta;
        }
        info.record_count = batch_last_delta + 1;
        info.last_offset = header.last_offset();
        info.batch_count += 1;
        pos += size;
    }
    Ok(info)
}

/// The sequence number of a batch's last record: `base_sequence + last_offset_delta`, wrapping
/// past `i32::MAX` to 0 as Kafka's `DefaultRecordBatch.incrementSequence` does.
pub fn last_sequence(base_sequence: i32, last_offset_delta: i32) -> i32 {
    let value = base_sequence as i64 + last_offset_delta as i64;
    if value > i32::MAX as i64 {
        (value - i32::MAX as i64 - 1) as i32
    } else {
        value as i32
    }
}

/// What the producer-state bookkeeping needs of one batch that carries a producer id (control
/// batches included), in [`ReplicatedRecordsInfo::producer_batches`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub first_sequence: i32,
    pub last_sequence: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub is_transactional: bool,
    /// -1 for a data batch; for a control batch the type read from its first record's key
    /// (0 ABORT, 1 COMMIT, ...), -1 if that record does not parse.
    pub control_type: i16,
    /// The end-transaction marker's coordinator epoch; -1 for a data batch or another marker.
    pub coordinator_epoch: i32,
}

/// Summary of a record set fetched from a partition leader, computed by
/// [`validate_replicated_batches`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicatedRecordsInfo {
    /// Bytes of the complete batches: a trailing partial batch is left out (a fetch may end
    /// with one), so the follower appends `records[..valid_bytes]`.
    pub valid_bytes: usize,
    pub batch_count: usize,
    /// Offsets the complete batches consume: the sum of `lastOffsetDelta + 1`.
    pub record_count: i64,
    /// `baseOffset` of the first batch (-1 when there is no complete batch).
    pub first_offset: i64,
    /// Last offset of the last batch (-1 when there is no complete batch).
    pub last_offset: i64,
    /// Largest `maxTimestamp` of the batches (-1 if none is >= 0).
    pub max_timestamp: i64,
    /// Last offset of the first batch holding `max_timestamp` (-1 if there is none).
    pub offset_of_max_timestamp: i64,
    /// `partitionLeaderEpoch` of the last batch (-1 when there is no complete batch).
    pub last_leader_epoch: i32,
    /// Whether every batch starts after the previous one's last offset.
    pub offsets_monotonic: bool,
    /// `(epoch, base offset)` of each batch whose `partitionLeaderEpoch` is above both the
    /// `latest_epoch` passed in and every earlier batch's epoch, in order: the leader-epoch cache
    /// entries the append creates.
    pub epoch_starts: Vec<(i32, i64)>,
    /// Every batch with a producer id (`producerId >= 0`), control batches included, in order.
    pub producer_batches: Vec<ProducerBatch>,
}

/// The whole size (length field included) of the batch at `pos`, from its length field; a
/// length below the smallest possible batch is corrupt. `records` holds at least
/// `LOG_OVERHEAD` bytes from `pos`.
pub(crate) fn batch_size_at(records: &[u8], pos: usize) -> Result<usize> {
    let batch_length = get_i32(records, pos + BATCH_LENGTH_OFFSET);
    if batch_length < MIN_BATCH_LENGTH {
        return Err(StorageError::corrupt(format!(
            "record batch length {batch_length} at position {pos} is below the minimum of {MIN_BATCH_LENGTH}"
        )));
    }
    Ok(batch_length as usize + LOG_OVERHEAD)
}

/// The header of `batch` (found at `pos`), which must be a magic 2 batch.
fn parse_magic2_header(batch: &[u8], pos: usize) -> Result<BatchHeader> {
    let header = BatchHeader::parse(batch).ok_or_else(|| StorageError::corrupt("short batch"))?;
    if header.magic != CURRENT_MAGIC {
        return Err(StorageError::corrupt(format!(
            "unsupported record batch magic {} at position {pos} (only magic 2 is accepted)",
            header.magic
        )));
    }
    Ok(header)
}

/// Walks a record set fetched from a partition leader once, checking every complete batch as
/// Kafka's follower append does (`UnifiedLog.appendAsFollower`): `batchLength >= 49`, magic 2, a
/// known codec, `lastOffsetDelta >= 0`, `recordsCount >= 0` and the CRC-32C.
///
/// Unlike [`validate_batches`] (the produce path) there is no size limit (Kafka's follower
/// passes `ignoreRecordSize`: the leader already accepted the batch), an empty set is not an
/// error, and a trailing partial batch is not an error either: the walk stops before it and
/// `valid_bytes` excludes it (Kafka's batch iterator stops there and the follower trims it).
/// Offsets and epochs are reported, not changed.
pub fn validate_replicated_batches(
    records: &[u8],
    latest_epoch: i32,
) -> Result<ReplicatedRecordsInfo> {
    let mut info = ReplicatedRecordsInfo {
        valid_bytes: 0,
        batch_count: 0,
        record_count: 0,
        first_offset: -1,
        last_offset: -1,
        max_timestamp: NO_TIMESTAMP,
        offset_of_max_timestamp: -1,
        last_leader_epoch: -1,
        offsets_monotonic: true,
        epoch_starts: Vec::new(),
        producer_batches: Vec::new(),
    };
    let mut latest = latest_epoch;
    let mut pos = 0usize;
    while records.len() - pos >= LOG_OVERHEAD {
        let size = batch_size_at(records, pos)?;
        if size > records.len() - pos {
            break;
        }
        let batch = &records[pos..pos + size];
        let header = parse_magic2_header(batch, pos)?;
        check_crc(batch)?;
        header.check_structure()?;

        let last_offset = header.last_offset();
        if info.batch_count == 0 {
            info.first_offset = header.base_offset;
        } else if header.base_offset <= info.last_offset {
            info.offsets_monotonic = false;
        }
        if header.max_timestamp > info.max_timestamp {
            info.max_timestamp = header.max_timestamp;
            info.offset_of_max_timestamp = last_offset;
        }
        if header.partition_leader_epoch > latest {
            latest = header.partition_leader_epoch;
            info.epoch_starts.push((latest, header.base_offset));
        }
        if header.producer_id >= 0 {
            let marker = control_marker(&header, batch);
            info.producer_batches.push(ProducerBatch {
                producer_id: header.producer_id,
                producer_epoch: header.producer_epoch,
                first_sequence: header.base_sequence,
                last_sequence: last_sequence(header.base_sequence, header.last_offset_delta),
                first_offset: header.base_offset,
                last_offset,
                max_timestamp: header.max_timestamp,
                is_transactional: header.is_transactional(),
                control_type: marker.control_type,
                coordinator_epoch: marker.coordinator_epoch,
            });
        }
        info.record_count += header.last_offset_delta as i64 + 1;
        info.last_offset = last_offset;
        info.last_leader_epoch = header.partition_leader_epoch;
        info.batch_count += 1;
        pos += size;
        info.valid_bytes = pos;
    }
    Ok(info)
}

/// Where one batch of an appended record set landed, as computed by [`assign_offsets`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AssignedBatch {
    /// Byte position of the batch inside the record set.
    pub position: usize,
    pub size: usize,
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub base_timestamp: i64,
}

/// Patches a record set in place for appending, batch by batch, and describes each batch in
/// `out` (cleared first).
///
/// * `first_offset >= 0`: `baseOffset` of each batch is set to a running offset starting at
///   `first_offset` (advancing by `lastOffsetDelta + 1`). `first_offset < 0` keeps the offsets
///   already in the buffer (data replicated from a leader).
/// * `leader_epoch >= 0`: `partitionLeaderEpoch` is set to it; `< 0` keeps the batch's own.
/// * `log_append_time_ms >= 0`: the timestamp-type bit is set, `maxTimestamp` becomes
///   `log_append_time_ms`, and the CRC is recomputed (the CRC does not cover the first two
///   patches, so they never require it).
///
/// Only the structure needed to walk the set is re-checked here (lengths and magic), so this is
/// safe on unvalidated input but does not verify CRCs.
pub fn assign_offsets(
    records: &mut [u8],
    first_offset: i64,
    leader_epoch: i32,
    log_append_time_ms: i64,
    out: &mut Vec<AssignedBatch>,
) -> Result<()> {
    out.clear();
    if records.is_empty() {
        return Err(StorageError::corrupt("empty record set"));
    }
    let mut running = first_offset;
    let mut pos = 0usize;
    while pos < records.len() {
        let remaining = records.len() - pos;
        if remaining < RECORD_BATCH_OVERHEAD {
            return Err(StorageError::corrupt(format!(
                "trailing partial record batch at position {pos}"
            )));
        }
        let batch_length = get_i32(records, pos + BATCH_LENGTH_OFFSET);
        if batch_length < MIN_BATCH_LENGTH || batch_length as usize + LOG_OVERHEAD > remaining {
            return Err(StorageError::corrupt(format!(
                "invalid record batch length {batch_length} at position {pos}"
            )));
        }
        let size = batch_length as usize + LOG_OVERHEAD;
        let batch = &mut records[pos..pos + size];
        if batch[MAGIC_OFFSET] as i8 != CURRENT_MAGIC {
            return Err(StorageError::corrupt(format!(
                "unsupported record batch magic {} at position {pos}",
                batch[MAGIC_OFFSET] as i8
            )));
        }
        let last_offset_delta = get_i32(batch, LAST_OFFSET_DELTA_OFFSET);
        if last_offset_delta < 0 {
            return Err(StorageError::corrupt(format!(
                "negative lastOffsetDelta {last_offset_delta} at position {pos}"
            )));
        }
        let base_offset = if first_offset >= 0 {
            put_i64(batch, BASE_OFFSET_OFFSET, running);
            let base = running;
            running = running
                .checked_add(last_offset_delta as i64 + 1)
                .ok_or_else(|| StorageError::invalid("offset overflow"))?;
            base
        } else {
            get_i64(batch, BASE_OFFSET_OFFSET)
        };
        if leader_epoch >= 0 {
            put_i32(batch, PARTITION_LEADER_EPOCH_OFFSET, leader_epoch);
        }
        if log_append_time_ms >= 0 {
            let attributes = get_i16(batch, ATTRIBUTES_OFFSET) | TIMESTAMP_TYPE_MASK;
            batch[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2]
                .copy_from_slice(&attributes.to_be_bytes());
            put_i64(batch, MAX_TIMESTAMP_OFFSET, log_append_time_ms);
            let crc = crc32c(&batch[ATTRIBUTES_OFFSET..]);
            batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        }
        out.push(AssignedBatch {
            position: pos,
            size,
            base_offset,
            last_offset: base_offset.saturating_add(last_offset_delta as i64),
            max_timestamp: get_i64(batch, MAX_TIMESTAMP_OFFSET),
            base_timestamp: get_i64(batch, BASE_TIMESTAMP_OFFSET),
        });
        pos += size;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod test_support {
    //! A minimal record batch builder for tests (records encoded per the v2 spec).

    use super::*;

    /// One record of a test batch: (timestamp, key, value).
    pub struct TestRecord<'a> {
        pub timestamp: i64,
        pub key: Option<&'a [u8]>,
        pub value: &'a [u8],
    }

    pub fn put_varint(out: &mut Vec<u8>, v: i64) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        while z >= 0x80 {
            out.push((z as u8 & 0x7F) | 0x80);
            z >>= 7;
        }
        out.push(z as u8);
    }

    /// Encodes the record bodies (uncompressed) of a batch.
    pub fn encode_records(base_timestamp: i64, records: &[TestRecord<'_>]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, r) in records.iter().enumerate() {
            let mut body = vec![0u8]; // attributes
            put_varint(&mut body, r.timestamp - base_timestamp);
            put_varint(&mut body, i as i64);
            match r.key {
                Some(k) => {
                    put_varint(&mut body, k.len() as i64);
                    body.extend_from_slice(k);
                }
                None => put_varint(&mut body, -1),
            }
            put_varint(&mut body, r.value.len() as i64);
            body.extend_from_slice(r.value);
            put_varint(&mut body, 0); // headers
            put_varint(&mut out, body.len() as i64);
            out.extend_from_slice(&body);
        }
        out
    }

    /// Builds a batch from already-encoded (possibly compressed) record bytes.
    #[allow(clippy::too_many_arguments)]
    pub fn build_raw_batch(
        base_offset: i64,
        attributes: i16,
        last_offset_delta: i32,
        base_timestamp: i64,
        max_timestamp: i64,
        records_count: i32,
        payload: &[u8],
    ) -> Vec<u8> {
        let mut b = Vec::with_capacity(RECORD_BATCH_OVERHEAD + payload.len());
        b.extend_from_slice(&base_offset.to_be_bytes());
        b.extend_from_slice(
            &((RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + payload.len()) as i32).to_be_bytes(),
        );
        b.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
        b.push(2);
        b.extend_from_slice(&0u32.to_be_bytes()); // crc placeholder
        b.extend_from_slice(&attributes.to_be_bytes());
        b.extend_from_slice(&last_offset_delta.to_be_bytes());
        b.extend_from_slice(&base_timestamp.to_be_bytes());
        b.extend_from_slice(&max_timestamp.to_be_bytes());
        b.extend_from_slice(&1234i64.to_be_bytes()); // producer id
        b.extend_from_slice(&5i16.to_be_bytes()); // producer epoch
        b.extend_from_slice(&7i32.to_be_bytes()); // base sequence
        b.extend_from_slice(&records_count.to_be_bytes());
        b.extend_from_slice(payload);
        let crc = crc32c(&b[ATTRIBUTES_OFFSET..]);
        b[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        b
    }

    /// An uncompressed batch of `n` records with `value_size`-byte values and timestamps
    /// `ts0, ts0 + 1, ...`.
    pub fn simple_batch(n: usize, ts0: i64, value_size: usize) -> Vec<u8> {
        let value = vec![b'v'; value_size];
        let recs: Vec<TestRecord<'_>> = (0..n)
            .map(|i| TestRecord {
                timestamp: ts0 + i as i64,
                key: None,
                value: &value,
            })
            .collect();
        batch_of(&recs)
    }

    /// An uncompressed batch holding `records`.
    pub fn batch_of(records: &[TestRecord<'_>]) -> Vec<u8> {
        let base_ts = records.first().map_or(-1, |r| r.timestamp);
        let max_ts = records.iter().map(|r| r.timestamp).max().unwrap_or(-1);
        let payload = encode_records(base_ts, records);
        build_raw_batch(
            0,
            0,
            records.len() as i32 - 1,
            base_ts,
            max_ts,
            records.len() as i32,
            &payload,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;

    #[test]
    fn validates_good_batch() {
        let b = simple_batch(3, 1000, 10);
        let info = validate_batches(&b, 1 << 20).unwrap();
        assert_eq!(info.size, b.len());
        assert_eq!(info.batch_count, 1);
        assert_eq!(info.record_count, 3);
        assert_eq!(info.first_timestamp, 1000);
        assert_eq!(info.max_timestamp, 1002);
        assert_eq!(info.last_offset_delta_of_max_timestamp, 2);
        assert_eq!(info.producer_id, 1234);
        assert_eq!(info.producer_epoch, 5);
        assert_eq!(info.base_sequence, 7);
        assert_eq!(info.last_offset_delta, 2);
        assert!(!info.is_transactional && !info.is_control);
        assert_eq!(info.compression, 0);
    }

    #[test]
    fn validates_multi_batch() {
        let mut set = simple_batch(2, 500, 5); // max ts 501, offsets 0..1
        set.extend(simple_batch(3, 900, 5)); // max ts 902, offsets 2..4
        set.extend(simple_batch(1, 100, 5)); // max ts 100, offset 5
        let info = validate_batches(&set, 1 << 20).unwrap();
        assert_eq!(info.batch_count, 3);
        assert_eq!(info.record_count, 6);
        assert_eq!(info.first_timestamp, 500);
        assert_eq!(info.max_timestamp, 902);
        assert_eq!(info.last_offset_delta_of_max_timestamp, 4);
        assert_eq!(info.last_offset_delta, 1);
    }

    #[test]
    fn rejects_bad_crc() {
        let mut b = simple_batch(1, 1, 10);
        let last = b.len() - 1;
        b[last] ^= 0xFF;
        assert!(
            matches!(validate_batches(&b, 1 << 20), Err(StorageError::Corrupt(m)) if m.contains("CRC"))
        );
    }

    #[test]
    fn rejects_bad_magic() {
        let mut b = simple_batch(1, 1, 10);
        b[MAGIC_OFFSET] = 1;
        assert!(
            matches!(validate_batches(&b, 1 << 20), Err(StorageError::Corrupt(m)) if m.contains("magic"))
        );
    }

    #[test]
    fn rejects_short_and_partial() {
        assert!(matches!(
            validate_batches(&[], 100),
            Err(StorageError::Corrupt(_))
        ));
        let b = simple_batch(2, 1, 10);
        for cut in [5, 12, 40, 61, b.len() - 1] {
            assert!(
                matches!(
                    validate_batches(&b[..cut], 1 << 20),
                    Err(StorageError::Corrupt(_))
                ),
                "cut {cut}"
            );
        }
        // A complete batch followed by a partial one.
        let mut set = b.clone();
        set.extend_from_slice(&b[..30]);
        assert!(matches!(
            validate_batches(&set, 1 << 20),
            Err(StorageError::Corrupt(_))
        ));
        // batchLength below the minimum.
        let mut small = b.clone();
        put_i32(&mut small, BATCH_LENGTH_OFFSET, 48);
        assert!(
            matches!(validate_batches(&small, 1 << 20), Err(StorageError::Corrupt(m)) if m.contains("minimum"))
        );
    }

    #[test]
    fn rejects_negative_last_offset_delta() {
        let b = build_raw_batch(0, 0, -1, 0, 0, 0, &[]);
        assert!(matches!(
            validate_batches(&b, 1 << 20),
            Err(StorageError::Corrupt(_))
        ));
    }

    #[test]
    fn rejects_oversize() {
        let b = simple_batch(10, 1, 100);
        assert!(matches!(
            validate_batches(&b, b.len() as i64 - 1),
            Err(StorageError::RecordTooLarge(_))
        ));
        assert!(validate_batches(&b, b.len() as i64).is_ok());
    }

    #[test]
    fn assigns_offsets_epoch_and_log_append_time() {
        let mut set = simple_batch(2, 10, 4);
        set.extend(simple_batch(3, 20, 4));
        let mut out = Vec::new();
        assign_offsets(&mut set, 100, 7, -1, &mut out).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].base_offset, out[0].last_offset), (100, 101));
        assert_eq!((out[1].base_offset, out[1].last_offset), (102, 104));
        let h = BatchHeader::parse(&set[out[1].position..]).unwrap();
        assert_eq!(h.base_offset, 102);
        assert_eq!(h.partition_leader_epoch, 7);
        // The CRC does not cover offsets or epoch: still valid.
        validate_batches(&set, 1 << 20).unwrap();

        assign_offsets(&mut set, 0, 1, 999_999, &mut out).unwrap();
        let h = BatchHeader::parse(&set).unwrap();
        assert!(h.is_log_append_time());
        assert_eq!(h.max_timestamp, 999_999);
        assert_eq!(out[1].max_timestamp, 999_999);
        validate_batches(&set, 1 << 20).unwrap();
    }

    /// A batch of `n` records stamped with `base_offset` and `epoch`, as a leader stores it.
    fn stamped(n: usize, base_offset: i64, epoch: i32) -> Vec<u8> {
        let mut b = simple_batch(n, 1000 + base_offset, 4);
        assign_offsets(&mut b, base_offset, epoch, -1, &mut Vec::new()).unwrap();
        b
    }

    #[test]
    fn last_sequence_wraps_like_kafka() {
        assert_eq!(last_sequence(7, 2), 9);
        assert_eq!(last_sequence(i32::MAX - 1, 1), i32::MAX);
        assert_eq!(last_sequence(i32::MAX - 1, 2), 0);
        assert_eq!(last_sequence(i32::MAX, 5), 4);
    }

    #[test]
    fn replicated_set_reports_offsets_epochs_and_producers() {
        // Epochs 0, 0, 2, 5 (the follower's cache is at -1), then 4 (never below the latest).
        let mut set = Vec::new();
        for (n, base, epoch) in [(2, 10, 0), (1, 12, 0), (3, 13, 2), (1, 16, 5), (2, 17, 4)] {
            set.extend(stamped(n, base, epoch));
        }
        let info = validate_replicated_batches(&set, -1).unwrap();
        assert_eq!(info.valid_bytes, set.len());
        assert_eq!(info.batch_count, 5);
        assert_eq!(info.record_count, 9);
        assert_eq!((info.first_offset, info.last_offset), (10, 18));
        assert_eq!(info.last_leader_epoch, 4);
        assert!(info.offsets_monotonic);
        assert_eq!(info.epoch_starts, vec![(0, 10), (2, 13), (5, 16)]);
        // simple_batch timestamps: 1000 + base, +1 per record; the largest is in the last batch.
        assert_eq!(
            (info.max_timestamp, info.offset_of_max_timestamp),
            (1018, 18)
        );
        // build_raw_batch: producer 1234, epoch 5, base sequence 7.
        assert_eq!(info.producer_batches.len(), 5);
        assert_eq!(
            info.producer_batches[2],
            ProducerBatch {
                producer_id: 1234,
                producer_epoch: 5,
                first_sequence: 7,
                last_sequence: 9,
                first_offset: 13,
                last_offset: 15,
                max_timestamp: 1015,
                is_transactional: false,
                control_type: -1,
                coordinator_epoch: -1,
            }
        );
        // Epochs the cache already has are not reported again.
        let info = validate_replicated_batches(&set, 2).unwrap();
        assert_eq!(info.epoch_starts, vec![(5, 16)]);
        assert!(validate_replicated_batches(&set, 5)
            .unwrap()
            .epoch_starts
            .is_empty());
    }

    #[test]
    fn replicated_set_lists_control_batches_and_skips_non_idempotent_ones() {
        use crate::builder::{build_batch_with_attributes, build_control_batch, ProducerFields};
        let payload = encode_records(
            1,
            &[TestRecord {
                timestamp: 1,
                key: None,
                value: b"v",
            }],
        );
        // A transactional data batch of producer 77 (offsets 0..1), its COMMIT marker (2), a
        // control batch whose record has a null key (3), a batch without producer id (4) and an
        // ABORT marker of producer 78 (5).
        let producer = ProducerFields {
            producer_id: 77,
            producer_epoch: 3,
            base_sequence: 0,
        };
        let pairs: [crate::builder::KeyValue<'_>; 2] = [(None, Some(b"a")), (None, Some(b"b"))];
        let mut set =
            build_batch_with_attributes(&pairs, 0, 10, producer, TRANSACTIONAL_FLAG_MASK).unwrap();
        set.extend(build_control_batch(77, 3, 9, true, 11));
        set.extend(build_raw_batch(
            0,
            CONTROL_FLAG_MASK | TRANSACTIONAL_FLAG_MASK,
            0,
            1,
            1,
            1,
            &payload,
        ));
        let mut plain = build_raw_batch(1, 0, 0, 1, 1, 1, &payload);
        put_i64(&mut plain, PRODUCER_ID_OFFSET, -1);
        let crc = crc32c(&plain[ATTRIBUTES_OFFSET..]);
        plain[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        set.extend(plain);
        set.extend(build_control_batch(78, 0, 12, false, 13));
        assign_offsets(&mut set, 0, -1, -1, &mut Vec::new()).unwrap();

        let info = validate_replicated_batches(&set, -1).unwrap();
        assert_eq!(info.batch_count, 5);
        let listed: Vec<(i64, i64, bool, i16, i32)> = info
            .producer_batches
            .iter()
            .map(|b| {
                (
                    b.producer_id,
                    b.first_offset,
                    b.is_transactional,
                    b.control_type,
                    b.coordinator_epoch,
                )
            })
            .collect();
        assert_eq!(
            listed,
            [
                (77, 0, true, -1, -1),
                (77, 2, true, 1, 9),
                (1234, 3, true, -1, -1),
                (78, 5, true, 0, 12),
            ]
        );
        // A marker's sequence fields are Kafka's: baseSequence -1, one record.
        let commit = info.producer_batches[1];
        assert_eq!(
            (
                commit.first_sequence,
                commit.last_sequence,
                commit.last_offset
            ),
            (-1, -1, 2)
        );
        assert_eq!((commit.producer_epoch, commit.max_timestamp), (3, 11));
        // No epoch stamped (-1): nothing for the epoch cache.
        assert!(info.epoch_starts.is_empty());
    }

    #[test]
    fn replicated_set_has_no_size_limit_and_tolerates_a_trailing_partial_batch() {
        let big = stamped(100, 0, 1);
        let mut set = big.clone();
        set.extend(stamped(1, 100, 1));
        let full = validate_replicated_batches(&set, -1).unwrap();
        assert_eq!((full.batch_count, full.valid_bytes), (2, set.len()));
        for cut in [1, 11, 12, 40, 61, 70] {
            let info = validate_replicated_batches(&set[..set.len() - cut], -1).unwrap();
            assert_eq!(info.batch_count, 1, "cut {cut}");
            assert_eq!(info.valid_bytes, big.len());
            assert_eq!(info.last_offset, 99);
        }
        let partial_only = validate_replicated_batches(&big[..30], -1).unwrap();
        assert_eq!((partial_only.batch_count, partial_only.valid_bytes), (0, 0));
        assert_eq!(
            (partial_only.first_offset, partial_only.last_offset),
            (-1, -1)
        );
        let empty = validate_replicated_batches(&[], -1).unwrap();
        assert_eq!((empty.batch_count, empty.record_count), (0, 0));
    }

    #[test]
    fn replicated_set_rejects_damaged_batches() {
        let good = stamped(2, 0, 0);
        let mut bad_crc = good.clone();
        let last = bad_crc.len() - 1;
        bad_crc[last] ^= 0x01;
        let mut bad_magic = good.clone();
        bad_magic[MAGIC_OFFSET] = 1;
        let mut short_length = good.clone();
        put_i32(&mut short_length, BATCH_LENGTH_OFFSET, 48);
        for (name, damaged) in [
            ("crc", bad_crc),
            ("magic", bad_magic),
            ("length", short_length),
        ] {
            // Damage in a later batch rejects the whole set.
            let mut set = good.clone();
            set.extend(damaged);
            assert!(
                matches!(
                    validate_replicated_batches(&set, -1),
                    Err(StorageError::Corrupt(_))
                ),
                "{name}"
            );
        }
    }

    #[test]
    fn replicated_set_reports_offsets_that_go_backwards() {
        for (second_base, monotonic) in [(2, true), (5, true), (1, false), (0, false)] {
            let mut set = stamped(2, 0, 0);
            set.extend(stamped(1, second_base, 0));
            let info = validate_replicated_batches(&set, -1).unwrap();
            assert_eq!(
                info.offsets_monotonic, monotonic,
                "second batch at {second_base}"
            );
        }
    }

    #[test]
    fn keeps_offsets_when_first_offset_negative() {
        let mut set = build_raw_batch(
            40,
            0,
            1,
            1,
            2,
            2,
            &encode_records(
                1,
                &[
                    TestRecord {
                        timestamp: 1,
                        key: None,
                        value: b"a",
                    },
                    TestRecord {
                        timestamp: 2,
                        key: None,
                        value: b"b",
                    },
                ],
            ),
        );
        let mut out = Vec::new();
        assign_offsets(&mut set, -1, -1, -1, &mut out).unwrap();
        assert_eq!((out[0].base_offset, out[0].last_offset), (40, 41));
        assert_eq!(BatchHeader::parse(&set).unwrap().partition_leader_epoch, -1);
    }
}
