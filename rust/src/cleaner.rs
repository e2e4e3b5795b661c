//! Log compaction (Kafka's `LogCleaner`): the per-record work of cleaning one log, one segment
//! per call. The caller (`pybroker/log/cleaner.py`) picks the log, decides the range, groups
//! the segments, and swaps the results in.
//!
//! A clean ([`Cleaning`]) has two passes:
//!
//! 1. [`Cleaning::map_segment`] reads the dirty section of the log, `[first dirty offset, first
//!    uncleanable offset)`, one segment at a time, recording for each key the offset of its
//!    last record in an [`OffsetMap`] (keys stored as 128-bit XXH3 hashes: Kafka's
//!    `SkimpyOffsetMap`, with a faster hash than MD5). Records of aborted transactions are not
//!    mapped. The map is full once it holds as many keys as its memory allows; the clean then
//!    ends at the last batch mapped ([`OffsetMap::latest_offset`]).
//! 2. [`Cleaning::clean_segment`] reads one segment of the cleaned range (the whole log below
//!    the map's end) and appends what Kafka's rules retain to a new segment (the caller's
//!    `.cleaned` segment, which collects a group of old ones):
//!    * a keyed record stays unless the map holds a later offset for its key; a tombstone (null
//!      value) stays until `delete.retention.ms` after the clean that first kept it (KIP-534: its
//!      batch is rewritten with that delete horizon in `baseTimestamp` and attribute bit 6); a
//!      record without a key never stays;
//!    * records of aborted transactions go ([`TxnTracker`], fed from the segments'
//!      aborted-transaction indexes); a transaction marker goes once no batch of its
//!      transaction was met in this clean and its own delete horizon has passed; an ABORT
//!      marker that stays keeps its transaction in the new segment's `.txnindex`;
//!    * the batch holding an active producer's last sequence (or, with no data left, its last
//!      marker) stays, emptied if need be (a header without records), so that producer state
//!      survives the clean;
//!    * a batch whose records all stay and that needs no delete horizon is copied byte for
//!      byte; any other is rebuilt from its retained records with its original base offset,
//!      last offset delta, partition leader epoch, producer fields and codec (re-compressed),
//!      the timestamps re-based on the new `baseTimestamp`.
//!
//! Records past the map's end are kept as they are. Every batch read is checked (structure and
//! CRC) first: a damaged segment stops the clean with an error instead of being re-encoded under
//! a fresh CRC. The old segments are only read, through their own file handle, so fetches and
//! appends go on while a clean runs; [`Throttler`] bounds the cleaner's I/O rate
//! (`log.cleaner.io.max.bytes.per.second`), shared by all cleaner threads.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use xxhash_rust::xxh3::xxh3_128;

use crate::batch::{
    check_crc, BatchHeader, ATTRIBUTES_OFFSET, CRC_OFFSET, CURRENT_MAGIC, LOG_OVERHEAD,
    NO_TIMESTAMP, RECORD_BATCH_OVERHEAD,
};
use crate::builder::{put_varint, varint_len, CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT};
use crate::columnar::{compress, SliceReader};
use crate::crc32c::crc32c;
use crate::errors::{Result, StorageError};
use crate::records::{control_marker, decompress_body};
use crate::segment::{HeaderAt, LogReader, Segment, SCAN_CHUNK};
use crate::txn_index::AbortedTxn;

/// Attribute bit 6: `baseTimestamp` holds the batch's delete horizon (KIP-534).
pub const DELETE_HORIZON_FLAG_MASK: i16 = 0x40;
/// Bytes of memory per offset-map slot: a 16-byte key hash and an 8-byte offset.
pub const OFFSET_MAP_BYTES_PER_ENTRY: usize = 24;
/// The smallest table an offset map is given.
const MIN_SLOTS: usize = 1024;

// ---------------------------------------------------------------------------------------------
// Reading an old segment
// ---------------------------------------------------------------------------------------------

/// An inactive segment's `.log` as the cleaner reads it: its own handle on the file (the file no
/// longer changes), its size, and where to start.
pub struct SegmentSource {
    file: Arc<File>,
    path: PathBuf,
    size: u64,
    start_position: u64,
}

impl SegmentSource {
    /// `segment` read from the batch holding `from_offset` (or a little before: the offset
    /// index's entry at or below it); from the start for `from_offset <= base offset`.
    pub fn of(segment: &mut Segment, from_offset: i64) -> Result<SegmentSource> {
        let start_position = if from_offset <= segment.base_offset() {
            0
        } else {
            segment.map_indexes()?;
            segment.offset_index().lookup(from_offset).position as u64
        };
        Ok(SegmentSource {
            file: segment.log_file()?,
            path: segment.path().to_path_buf(),
            size: segment.size(),
            start_position,
        })
    }

    /// Calls `on_batch(header, batch)` for every batch from the start position to the end,
    /// each checked (structure, CRC) first, until it returns true. Returns the bytes walked.
    fn for_each_batch(
        &self,
        throttler: Option<&Throttler>,
        mut on_batch: impl FnMut(&BatchHeader, &[u8]) -> Result<bool>,
    ) -> Result<u64> {
        let mut reader = LogReader::new(&self.file, &self.path, self.size, SCAN_CHUNK);
        let mut pos = self.start_position;
        loop {
            let header = match reader.header_at(pos)? {
                HeaderAt::End => break,
                HeaderAt::Batch(header) => header,
                HeaderAt::Invalid => return Err(self.damaged(pos, "no valid batch header")),
            };
            let batch = reader
                .slice(pos, header.size())?
                .ok_or_else(|| self.damaged(pos, "the batch ends past the file"))?;
            check_crc(batch).map_err(|e| self.damaged(pos, &e.to_string()))?;
            let stop = on_batch(&header, batch)?;
            if let Some(throttler) = throttler {
                throttler.maybe_throttle(header.size() as u64);
            }
            pos += header.size() as u64;
            if stop {
                break;
            }
        }
        Ok(pos - self.start_position)
    }

    fn damaged(&self, position: u64, what: &str) -> StorageError {
        StorageError::corrupt(format!(
            "cannot clean {}: {what} at position {position}",
            self.path.display()
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// The offset map
// ---------------------------------------------------------------------------------------------

/// Key hash → offset of the key's last record in the mapped range, in an open-addressing table
/// of fixed size (Kafka's `SkimpyOffsetMap`). A zero hash marks a free slot (real hashes have
/// their lowest bit set), collisions probe the next slot.
pub struct OffsetMap {
    hashes: Vec<u128>,
    offsets: Vec<i64>,
    entries: usize,
    max_entries: usize,
    latest_offset: i64,
}

impl OffsetMap {
    /// A map that may use `memory_bytes` (24 bytes a slot) and is full at `load_factor` of
    /// that (`log.cleaner.dedupe.buffer.size` per thread, `log.cleaner.io.buffer.load.factor`).
    /// `expected_keys` (an upper bound: the offsets in the dirty section) sizes the table when
    /// that is smaller, so a small clean does not touch the whole budget.
    pub fn new(memory_bytes: usize, load_factor: f64, expected_keys: usize) -> OffsetMap {
        let budget = (memory_bytes / OFFSET_MAP_BYTES_PER_ENTRY).max(MIN_SLOTS);
        let slots = budget.min(expected_keys.saturating_mul(2).max(MIN_SLOTS));
        let max_entries = ((slots as f64 * load_factor.min(1.0)).round() as usize).clamp(1, slots);
        OffsetMap {
            hashes: vec![0; slots],
            offsets: vec![0; slots],
            entries: 0,
            max_entries,
            latest_offset: -1,
        }
    }

    fn hash(key: &[u8]) -> u128 {
        xxh3_128(key) | 1
    }

    /// The slot of `hash`, or of the free slot where it would go.
    #[inline]
    fn find(&self, hash: u128) -> usize {
        let slots = self.hashes.len();
        let mut slot = ((hash as u64 as u128 * slots as u128) >> 64) as usize;
        loop {
            let here = self.hashes[slot];
            if here == hash || here == 0 {
                return slot;
            }
            slot += 1;
            if slot == slots {
                slot = 0;
            }
        }
    }

    /// Records `offset` as the last offset of `key`; false (nothing recorded) when the map is
    /// full.
    pub fn put(&mut self, key: &[u8], offset: i64) -> bool {
        if self.entries >= self.max_entries {
            return false;
        }
        let hash = Self::hash(key);
        let slot = self.find(hash);
        if self.hashes[slot] == 0 {
            self.hashes[slot] = hash;
            self.entries += 1;
        }
        self.offsets[slot] = offset;
        true
    }

    /// The last offset recorded for `key`, -1 when none.
    pub fn get(&self, key: &[u8]) -> i64 {
        let slot = self.find(Self::hash(key));
        if self.hashes[slot] == 0 {
            -1
        } else {
            self.offsets[slot]
        }
    }

    /// Keys recorded.
    pub fn len(&self) -> usize {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The last offset of the mapped range (-1 before anything was mapped): records after it
    /// are not looked up.
    pub fn latest_offset(&self) -> i64 {
        self.latest_offset
    }

    /// Share of the table in use.
    pub fn utilization(&self) -> f64 {
        self.entries as f64 / self.hashes.len() as f64
    }
}

// ---------------------------------------------------------------------------------------------
// Transactions met while cleaning
// ---------------------------------------------------------------------------------------------

/// Kafka's `CleanedTransactionMetadata`: the aborted transactions of the range (from the
/// segments' `.txnindex`), which becomes ongoing when the walk reaches its first offset, and the
/// producers whose committed transaction's batches were met. Decides which data batches belong
/// to an aborted transaction and which markers may go.
#[derive(Default)]
pub struct TxnTracker {
    /// Aborted transactions not reached yet, smallest first offset first.
    pending: BinaryHeap<Reverse<(i64, i64, i64, i64)>>,
    /// Producer id → its aborted transaction under way, and whether a batch of it was met.
    ongoing_aborted: HashMap<i64, (AbortedTxn, bool)>,
    ongoing_committed: HashSet<i64>,
    /// Aborted transactions whose marker stays: the new segment's `.txnindex` entries.
    retained_aborted: Vec<AbortedTxn>,
}

impl TxnTracker {
    /// Adds aborted transactions (duplicates are harmless: one transaction is ongoing per
    /// producer).
    pub fn add_aborted(&mut self, txns: impl IntoIterator<Item = AbortedTxn>) {
        for t in txns {
            self.pending.push(Reverse((
                t.first_offset,
                t.producer_id,
                t.last_offset,
                t.last_stable_offset,
            )));
        }
    }

    fn reach(&mut self, offset: i64) {
        while let Some(Reverse((first, ..))) = self.pending.peek() {
            if *first > offset {
                break;
            }
            let Reverse((first_offset, producer_id, last_offset, last_stable_offset)) =
                self.pending.pop().expect("peeked");
            self.ongoing_aborted.entry(producer_id).or_insert((
                AbortedTxn {
                    producer_id,
                    first_offset,
                    last_offset,
                    last_stable_offset,
                },
                false,
            ));
        }
    }

    /// A data batch was read: true when it belongs to an aborted transaction (its records go).
    pub fn on_batch(&mut self, header: &BatchHeader) -> bool {
        self.reach(header.last_offset());
        if !header.is_transactional() {
            return false;
        }
        match self.ongoing_aborted.get_mut(&header.producer_id) {
            Some((_, met)) => {
                *met = true;
                true
            }
            None => {
                self.ongoing_committed.insert(header.producer_id);
                false
            }
        }
    }

    /// A control batch was read (`control_type` from its first record, -1 when it has none):
    /// true when the marker may go as far as its transaction is concerned (none of its batches
    /// was met in this clean). An ABORT marker that stays is recorded for the new `.txnindex`.
    pub fn on_control_batch(&mut self, header: &BatchHeader, control_type: i16) -> bool {
        self.reach(header.last_offset());
        if header.records_count == 0 {
            return true; // emptied by an earlier clean
        }
        match control_type {
            CONTROL_TYPE_ABORT => match self.ongoing_aborted.remove(&header.producer_id) {
                Some((txn, true)) => {
                    self.retained_aborted.push(txn);
                    false
                }
                _ => true,
            },
            CONTROL_TYPE_COMMIT => !self.ongoing_committed.remove(&header.producer_id),
            _ => false,
        }
    }

    /// The aborted transactions to write into the segment being built (taken).
    pub fn take_retained_aborted(&mut self) -> Vec<AbortedTxn> {
        std::mem::take(&mut self.retained_aborted)
    }
}

// ---------------------------------------------------------------------------------------------
// Rules, statistics, throttling
// ---------------------------------------------------------------------------------------------

/// What a producer's state needs kept: the last offset of its last data batch, else (only
/// markers left) its epoch (Kafka's `LastRecord`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastRecord {
    pub last_data_offset: Option<i64>,
    pub producer_epoch: i16,
}

/// The inputs of [`Cleaning::clean_segment`] besides the records.
pub struct RetentionRules {
    /// The clean's current time (delete horizons are compared with it and set from it).
    pub now_ms: i64,
    /// The topic's `delete.retention.ms`.
    pub delete_retention_ms: i64,
    /// The log's active producers.
    pub active_producers: HashMap<i64, LastRecord>,
}

/// Kafka's `CleanerStats`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CleanerStats {
    pub map_bytes_read: u64,
    pub map_messages_read: u64,
    pub bytes_read: u64,
    pub messages_read: u64,
    pub bytes_written: u64,
    pub messages_written: u64,
    /// Records without a key found (and dropped).
    pub invalid_messages: u64,
}

/// Kafka's `Throttler`: callers report the bytes they moved, and sleep when the rate over the
/// current period (300 ms) exceeds `bytes_per_second`. Shared by every cleaner thread.
pub struct Throttler {
    bytes_per_second: f64,
    period: Mutex<(Instant, u64)>,
}

const THROTTLE_CHECK_INTERVAL: Duration = Duration::from_millis(300);

impl Throttler {
    pub fn new(bytes_per_second: f64) -> Throttler {
        Throttler {
            bytes_per_second,
            period: Mutex::new((Instant::now(), 0)),
        }
    }

    /// Accounts `bytes`; sleeps as long as needed to bring the period's rate down.
    pub fn maybe_throttle(&self, bytes: u64) {
        if !self.bytes_per_second.is_finite() || self.bytes_per_second <= 0.0 {
            return;
        }
        let sleep = {
            let mut period = self.period.lock().unwrap_or_else(|e| e.into_inner());
            period.1 += bytes;
            let elapsed = period.0.elapsed();
            if elapsed < THROTTLE_CHECK_INTERVAL {
                return;
            }
            let sleep = throttle_delay(self.bytes_per_second, period.1, elapsed);
            *period = (Instant::now() + sleep, 0);
            sleep
        };
        if !sleep.is_zero() {
            std::thread::sleep(sleep);
        }
    }
}

/// How long to sleep after moving `bytes` in `elapsed` to average `bytes_per_second`.
pub fn throttle_delay(bytes_per_second: f64, bytes: u64, elapsed: Duration) -> Duration {
    let wanted = Duration::from_secs_f64(bytes as f64 / bytes_per_second);
    wanted.saturating_sub(elapsed)
}

// ---------------------------------------------------------------------------------------------
// One clean
// ---------------------------------------------------------------------------------------------

/// One clean of one log: its offset map, the transaction trackers of its two passes, its
/// statistics and reusable buffers.
pub struct Cleaning {
    map: OffsetMap,
    map_txns: TxnTracker,
    clean_txns: TxnTracker,
    stats: CleanerStats,
    decompressed: Vec<u8>,
    records: Vec<u8>,
    output: Vec<u8>,
}

/// What a read batch becomes (Kafka's `BatchRetention`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BatchRetention {
    /// Dropped whole, records unread.
    Delete,
    /// Dropped if no record stays.
    DeleteEmpty,
    /// Kept, as an empty header if no record stays.
    RetainEmpty,
}

impl Cleaning {
    pub fn new(map: OffsetMap) -> Cleaning {
        Cleaning {
            map,
            map_txns: TxnTracker::default(),
            clean_txns: TxnTracker::default(),
            stats: CleanerStats::default(),
            decompressed: Vec::new(),
            records: Vec::new(),
            output: Vec::new(),
        }
    }

    pub fn map(&self) -> &OffsetMap {
        &self.map
    }

    /// Frees the offset map's tables and the batch buffers (tens of megabytes whose unmapping
    /// takes milliseconds): the map reads as empty afterwards; the statistics stay.
    pub fn release(&mut self) {
        self.map = OffsetMap::new(0, 1.0, 0);
        self.decompressed = Vec::new();
        self.records = Vec::new();
        self.output = Vec::new();
    }

    pub fn stats(&self) -> CleanerStats {
        self.stats
    }

    /// Aborted transactions of the dirty section, for the mapping pass.
    pub fn add_aborted_for_map(&mut self, txns: impl IntoIterator<Item = AbortedTxn>) {
        self.map_txns.add_aborted(txns);
    }

    /// Aborted transactions of a segment about to be cleaned (Kafka collects those of each
    /// segment's range before cleaning it).
    pub fn add_aborted_for_clean(&mut self, txns: impl IntoIterator<Item = AbortedTxn>) {
        self.clean_txns.add_aborted(txns);
    }

    /// Maps the keys of `source`'s records at or above `start_offset` (Kafka's
    /// `buildOffsetMapForSegment`). Returns true when the map filled up inside this segment: the
    /// map then ends at the last whole batch mapped. Otherwise it ends at
    /// `next_segment_start - 1` (the next segment's base offset, or the end of the dirty section).
    pub fn map_segment(
        &mut self,
        source: &SegmentSource,
        start_offset: i64,
        next_segment_start: i64,
        throttler: Option<&Throttler>,
    ) -> Result<bool> {
        let Cleaning {
            map,
            map_txns,
            stats,
            decompressed,
            ..
        } = self;
        let mut full = false;
        let walked = source.for_each_batch(throttler, |header, batch| {
            if header.is_control() {
                let control_type = control_marker(header, batch).control_type;
                map_txns.on_control_batch(header, control_type);
                stats.map_messages_read += 1;
            } else if map_txns.on_batch(header) {
                stats.map_messages_read += header.records_count.max(0) as u64;
            } else {
                decompress_body(header, batch, decompressed)?;
                for_each_record(header, decompressed, |record| {
                    if full {
                        return Ok(());
                    }
                    if let Some(key) = record.key {
                        if record.offset >= start_offset && !map.put(key, record.offset) {
                            full = true;
                            return Ok(());
                        }
                    }
                    stats.map_messages_read += 1;
                    Ok(())
                })?;
                if full {
                    return Ok(true);
                }
            }
            if header.last_offset() >= start_offset {
                map.latest_offset = header.last_offset();
            }
            Ok(false)
        })?;
        stats.map_bytes_read += walked;
        if !full {
            map.latest_offset = map.latest_offset.max(next_segment_start - 1);
        }
        Ok(full)
    }

    /// Appends to `dest` what the retention rules keep of `source` (Kafka's `cleanInto`), and
    /// the aborted transactions whose marker it kept to `dest`'s `.txnindex`. The aborted
    /// transactions of `source`'s range must have been added first
    /// ([`add_aborted_for_clean`](Self::add_aborted_for_clean)).
    pub fn clean_segment(
        &mut self,
        source: &SegmentSource,
        dest: &mut Segment,
        rules: &RetentionRules,
        throttler: Option<&Throttler>,
    ) -> Result<()> {
        let mut output = std::mem::take(&mut self.output);
        output.clear();
        let result = source.for_each_batch(throttler, |header, batch| {
            self.stats.bytes_read += batch.len() as u64;
            let written = output.len();
            self.filter_batch(header, batch, rules, &mut output)?;
            if let Some(throttler) = throttler {
                throttler.maybe_throttle((output.len() - written) as u64);
            }
            // Appended in pieces of about a read chunk, so the buffer stays small.
            if output.len() >= SCAN_CHUNK {
                self.flush_output(dest, &mut output)?;
            }
            Ok(false)
        });
        let flushed = result.and_then(|_| self.flush_output(dest, &mut output));
        self.output = output;
        flushed?;
        for txn in self.clean_txns.take_retained_aborted() {
            dest.append_aborted_txn(txn)?;
        }
        Ok(())
    }

    fn flush_output(&mut self, dest: &mut Segment, output: &mut Vec<u8>) -> Result<()> {
        if !output.is_empty() {
            dest.append(output, -1, -1, -1)?;
            self.stats.bytes_written += output.len() as u64;
            output.clear();
        }
        Ok(())
    }

    /// Kafka's `MemoryRecords.filterTo` for one batch, with the cleaner's `RecordFilter`:
    /// appends the batch, rebuilt or as it is, to `out`, or nothing.
    fn filter_batch(
        &mut self,
        header: &BatchHeader,
        batch: &[u8],
        rules: &RetentionRules,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let is_control = header.is_control();
        let control_type = if is_control {
            control_marker(header, batch).control_type
        } else {
            -1
        };
        let can_discard = if is_control {
            self.clean_txns.on_control_batch(header, control_type)
        } else {
            self.clean_txns.on_batch(header)
        };
        let delete_horizon = delete_horizon_ms(header);
        let discard_records = if is_control {
            can_discard && delete_horizon.is_some_and(|h| h <= rules.now_ms)
        } else {
            can_discard
        };
        let retention = if header.producer_id >= 0 && is_last_of_producer(header, rules) {
            BatchRetention::RetainEmpty
        } else if discard_records {
            BatchRetention::Delete
        } else {
            BatchRetention::DeleteEmpty
        };
        if retention == BatchRetention::Delete {
            return Ok(());
        }
        let marker_for_empty_txn = can_discard && is_control;

        // Which records stay.
        let mut body = std::mem::take(&mut self.decompressed);
        let decoded = decompress_body(header, batch, &mut body);
        let result = decoded.and_then(|()| {
            self.filter_records(
                header,
                batch,
                &body,
                rules,
                discard_records,
                retention,
                marker_for_empty_txn,
                delete_horizon,
                out,
            )
        });
        self.decompressed = body;
        result
    }

    /// The record-level half of [`filter_batch`](Self::filter_batch).
    #[allow(clippy::too_many_arguments)]
    fn filter_records(
        &mut self,
        header: &BatchHeader,
        batch: &[u8],
        body: &[u8],
        rules: &RetentionRules,
        discard_records: bool,
        retention: BatchRetention,
        marker_for_empty_txn: bool,
        delete_horizon: Option<i64>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let is_control = header.is_control();
        let (map, stats) = (&self.map, &mut self.stats);
        let mut kept: Vec<KeptRecord> = Vec::new();
        let mut all_retained = true;
        let mut has_tombstone = false;
        for_each_record(header, body, |record| {
            stats.messages_read += 1;
            let keep = if discard_records {
                false
            } else if is_control {
                true
            } else {
                should_retain_record(map, header, &record, rules.now_ms, stats)
            };
            if keep {
                has_tombstone |= !record.has_value;
                kept.push(KeptRecord {
                    timestamp: record.timestamp,
                    attributes: record.attributes,
                    offset_delta: record.offset_delta,
                    rest: record.rest,
                });
            } else {
                all_retained = false;
            }
            Ok(())
        })?;
        if kept.is_empty() {
            if retention == BatchRetention::RetainEmpty {
                write_empty_batch(header, out);
            }
            return Ok(());
        }
        stats.messages_written += kept.len() as u64;
        let needs_horizon = (has_tombstone || marker_for_empty_txn) && delete_horizon.is_none();
        if all_retained && !needs_horizon {
            out.extend_from_slice(batch);
            return Ok(());
        }
        let horizon = if needs_horizon {
            Some(rules.now_ms.saturating_add(rules.delete_retention_ms))
        } else {
            delete_horizon
        };
        rebuild_batch(header, &kept, horizon, &mut self.records, out)
    }
}

/// A record that stays, borrowed from the decompressed body.
struct KeptRecord<'a> {
    timestamp: i64,
    attributes: u8,
    offset_delta: i64,
    rest: &'a [u8],
}

/// One record of a decompressed body, borrowed.
struct RecordView<'a> {
    offset: i64,
    offset_delta: i64,
    timestamp: i64,
    attributes: u8,
    key: Option<&'a [u8]>,
    has_value: bool,
    /// The record's bytes from `keyLength` to its end (key, value, headers), copied as they are
    /// into a rebuilt batch.
    rest: &'a [u8],
}

/// Calls `on_record` for each record of a decompressed records section.
fn for_each_record<'a>(
    header: &BatchHeader,
    body: &'a [u8],
    mut on_record: impl FnMut(RecordView<'a>) -> Result<()>,
) -> Result<()> {
    let mut reader = SliceReader { buf: body, pos: 0 };
    for _ in 0..header.records_count.max(0) {
        let length = reader.varint()?;
        if length < 0 || length as u64 > (body.len() - reader.pos) as u64 {
            return Err(StorageError::corrupt(format!(
                "record length {length} overruns the batch at offset {}",
                header.base_offset
            )));
        }
        let end = reader.pos + length as usize;
        let mut fields = SliceReader {
            buf: &body[..end],
            pos: reader.pos,
        };
        let attributes = fields.byte()?;
        let timestamp_delta = fields.varint()?;
        let offset_delta = fields.varint()?;
        let rest_start = fields.pos;
        let key = fields.bytes()?;
        let has_value = fields.bytes()?.is_some();
        let timestamp = if header.is_log_append_time() {
            header.max_timestamp
        } else {
            header.base_timestamp.saturating_add(timestamp_delta)
        };
        on_record(RecordView {
            offset: header.base_offset.saturating_add(offset_delta),
            offset_delta,
            timestamp,
            attributes,
            key,
            has_value,
            rest: &body[rest_start..end],
        })?;
        reader.pos = end;
    }
    Ok(())
}

/// The batch's delete horizon (KIP-534), when attribute bit 6 is set.
fn delete_horizon_ms(header: &BatchHeader) -> Option<i64> {
    (header.attributes & DELETE_HORIZON_FLAG_MASK != 0).then_some(header.base_timestamp)
}

/// Whether the batch holds what an active producer's state needs (Kafka's
/// `isBatchLastRecordOfProducer`).
fn is_last_of_producer(header: &BatchHeader, rules: &RetentionRules) -> bool {
    rules
        .active_producers
        .get(&header.producer_id)
        .is_some_and(|last| match last.last_data_offset {
            Some(offset) => header.last_offset() == offset,
            None => header.is_control() && header.producer_epoch == last.producer_epoch,
        })
}

/// Kafka's `Cleaner.shouldRetainRecord` for a data record.
fn should_retain_record(
    map: &OffsetMap,
    header: &BatchHeader,
    record: &RecordView<'_>,
    now_ms: i64,
    stats: &mut CleanerStats,
) -> bool {
    if record.offset > map.latest_offset() {
        return true;
    }
    let Some(key) = record.key else {
        stats.invalid_messages += 1;
        return false;
    };
    let latest_for_key = record.offset >= map.get(key);
    let retain_deletes = delete_horizon_ms(header).is_none_or(|horizon| now_ms < horizon);
    latest_for_key && (record.has_value || retain_deletes)
}

/// Kafka's `DefaultRecordBatch.writeEmptyHeader`: the batch's offsets and producer fields, no
/// records, no compression, `baseTimestamp` -1 and `maxTimestamp` kept.
fn write_empty_batch(header: &BatchHeader, out: &mut Vec<u8>) {
    let attributes = header.attributes & !(0x07 | DELETE_HORIZON_FLAG_MASK);
    write_header(
        out,
        header,
        attributes,
        NO_TIMESTAMP,
        header.max_timestamp,
        0,
        &[],
    );
}

/// Rebuilds `header`'s batch from its records that stay (Kafka's `buildRetainedRecordsInto`),
/// appending it to `out`: same base offset, last offset delta, leader epoch, producer fields,
/// timestamp type and codec; `baseTimestamp` the delete horizon when there is one, else the first
/// kept record's timestamp; `maxTimestamp` the largest kept one (LogAppendTime: unchanged).
fn rebuild_batch(
    header: &BatchHeader,
    kept: &[KeptRecord<'_>],
    horizon: Option<i64>,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Result<()> {
    let base_timestamp = horizon.unwrap_or(kept[0].timestamp);
    let max_timestamp = if header.is_log_append_time() {
        header.max_timestamp
    } else {
        kept.iter()
            .map(|r| r.timestamp)
            .max()
            .unwrap_or(NO_TIMESTAMP)
    };
    scratch.clear();
    for record in kept {
        put_record(
            scratch,
            record.attributes,
            record.timestamp.wrapping_sub(base_timestamp),
            record.offset_delta,
            record.rest,
        );
    }
    let mut attributes = header.attributes & !DELETE_HORIZON_FLAG_MASK;
    if horizon.is_some() {
        attributes |= DELETE_HORIZON_FLAG_MASK;
    }
    let codec = header.compression();
    let count = kept.len() as i32;
    let mut compressed = Vec::new();
    let records: &[u8] = if codec == 0 {
        scratch
    } else {
        compressed.reserve(scratch.len() / 2 + 64);
        compress(codec, scratch, &mut compressed)?;
        &compressed
    };
    write_header(
        out,
        header,
        attributes,
        base_timestamp,
        max_timestamp,
        count,
        records,
    );
    Ok(())
}

/// Appends a v2 batch header and `records_section` (already compressed if it is), with the CRC.
fn write_header(
    out: &mut Vec<u8>,
    header: &BatchHeader,
    attributes: i16,
    base_timestamp: i64,
    max_timestamp: i64,
    records_count: i32,
    records_section: &[u8],
) {
    let start = out.len();
    let batch_length = (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + records_section.len()) as i32;
    out.extend_from_slice(&header.base_offset.to_be_bytes());
    out.extend_from_slice(&batch_length.to_be_bytes());
    out.extend_from_slice(&header.partition_leader_epoch.to_be_bytes());
    out.push(CURRENT_MAGIC as u8);
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&attributes.to_be_bytes());
    out.extend_from_slice(&header.last_offset_delta.to_be_bytes());
    out.extend_from_slice(&base_timestamp.to_be_bytes());
    out.extend_from_slice(&max_timestamp.to_be_bytes());
    out.extend_from_slice(&header.producer_id.to_be_bytes());
    out.extend_from_slice(&header.producer_epoch.to_be_bytes());
    out.extend_from_slice(&header.base_sequence.to_be_bytes());
    out.extend_from_slice(&records_count.to_be_bytes());
    out.extend_from_slice(records_section);
    let crc = crc32c(&out[start + ATTRIBUTES_OFFSET..]);
    out[start + CRC_OFFSET..start + CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

/// A record re-encoded with a new timestamp delta: `length, attributes, timestampDelta,
/// offsetDelta` then its original key, value and headers.
fn put_record(
    out: &mut Vec<u8>,
    attributes: u8,
    timestamp_delta: i64,
    offset_delta: i64,
    rest: &[u8],
) {
    let length = 1 + varint_len(timestamp_delta) + varint_len(offset_delta) + rest.len();
    put_varint(out, length as i64);
    out.push(attributes);
    put_varint(out, timestamp_delta);
    put_varint(out, offset_delta);
    out.extend_from_slice(rest);
}
