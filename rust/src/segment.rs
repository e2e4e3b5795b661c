//! A log segment: one `.log` file of record batches plus its sparse `.index` and `.timeindex`,
//! and the `.txnindex` of the transactions aborted in it (`txn_index.rs`), created on demand.
//!
//! The segment owns every byte-level operation on its files: appending a record set (offset
//! assignment and the index-interval rule), reading whole batches by offset, timestamp lookups,
//! truncation, and (in `recovery.rs`) rebuilding its indexes after an unclean shutdown. It keeps
//! Kafka's `LogSegment` state: `size`, `next_offset`, `maxTimestampSoFar` and the offset of the
//! batch holding it, and `bytesSinceLastIndexEntry`. Roll decisions are the caller's: it reads
//! `size`, `first_batch_timestamp`, `index_is_full` and rolls before appending.
//!
//! The aborted-transaction index is written by the caller (it knows, from its producer state,
//! which transaction an ABORT marker ends): the segment only stores, serves, truncates and resets
//! it with the other files.
//!
//! Files are named after the base offset, zero-padded to 20 digits. The `.log` is written with
//! plain `write` calls (page cache; `flush` fsyncs) and read with `pread`. Positions inside a
//! segment are 31-bit, as in Kafka, so a segment never grows past `i32::MAX` bytes.
//!
//! The segment does not keep its `.log` open: it holds a [`LogFile`] of the process-wide cache of
//! open `.log` descriptors (`open_files.rs`), and every operation on the file takes it from there
//! ([`Segment::log_file`]), opened again by its current path when the cache had closed it. The
//! indexes hold no descriptor either (`index_file.rs`), so a segment at rest costs none.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use crate::batch::{
    assign_offsets, get_i32, get_i64, AssignedBatch, BatchHeader, BATCH_LENGTH_OFFSET,
    LOG_OVERHEAD, MIN_BATCH_LENGTH, NO_TIMESTAMP, RECORD_BATCH_OVERHEAD,
};
use crate::errors::{IoContext, Result, StorageError};
use crate::offset_index::OffsetIndex;
use crate::open_files::{open_reclaiming, LogFile, LogFileRef};
use crate::records::{control_marker, visit_records, ControlMarker};
use crate::time_index::TimeIndex;
use crate::txn_index::{AbortedTxn, TxnIndex};

/// Read-ahead used when walking batch headers (lookups, tail scans).
pub(crate) const HEADER_CHUNK: usize = 16 * 1024;
/// Read-ahead of timestamp searches, which usually stop within an index interval or two.
const SEARCH_CHUNK: usize = 64 * 1024;
/// Read-ahead of whole-log walks (listing batches, recovery).
pub(crate) const SCAN_CHUNK: usize = 1024 * 1024;
/// A scratch buffer for read-only appends larger than this is released after use.
const SCRATCH_KEEP: usize = 8 * 1024 * 1024;
/// Largest byte position a segment may reach (positions are int32 in the offset index).
const MAX_SEGMENT_SIZE: u64 = i32::MAX as u64;

/// Summary returned by [`Segment::append`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendResult {
    /// Offset of the last record appended.
    pub last_offset: i64,
    /// Largest `maxTimestamp` among the appended batches (-1 if none).
    pub max_timestamp: i64,
    /// Last offset of the first appended batch holding `max_timestamp` (-1 if none).
    pub offset_of_max_timestamp: i64,
}

/// Header information of one stored batch, as listed by [`Segment::batches`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    pub position: u64,
    pub size: u64,
    pub partition_leader_epoch: i32,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub is_transactional: bool,
    pub is_control: bool,
    /// -1 for a data batch; for a control batch the type read from its first record's key
    /// (0 ABORT, 1 COMMIT, ...), -1 if that record cannot be parsed.
    pub control_type: i16,
    /// The end-transaction marker's coordinator epoch; -1 when the batch holds none.
    pub coordinator_epoch: i32,
}

/// What [`Segment::read_plan`] decided to read: `capacity` bytes from `position`, of which the
/// leading whole batches with `baseOffset < max_offset` are returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadPlan {
    pub position: u64,
    pub capacity: usize,
    pub max_offset: i64,
}

/// What to fsync for a segment, detached from it so a flush can run without holding it: the open
/// `.log` (its own reference: the cache may close its descriptor meanwhile, not this one) and the
/// paths of the three indexes (which keep no descriptor; see `index_file.rs` and `txn_index.rs`).
pub struct FlushHandles {
    log: (Arc<File>, PathBuf),
    indexes: [PathBuf; 3],
}

impl FlushHandles {
    /// fsyncs (data) the `.log`, `.index`, `.timeindex` and `.txnindex`. On Linux this also
    /// writes back pages dirtied through the index mappings (msync(MS_SYNC) is the same operation
    /// there). An index that does not exist (no `.txnindex` yet, or the segment was deleted
    /// meanwhile) is skipped.
    pub fn sync(&self) -> Result<()> {
        let (log, log_path) = &self.log;
        log.sync_data().at(log_path, "fsync")?;
        for path in &self.indexes {
            match open_reclaiming(|| File::open(path)) {
                Ok(file) => file.sync_data().at(path, "fsync")?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).at(path, "open"),
            }
        }
        Ok(())
    }
}

/// Outcome of reading the batch header at some position.
pub(crate) enum HeaderAt {
    /// A structurally valid header of a batch lying entirely inside the file.
    Batch(BatchHeader),
    /// The position is the end of the file.
    End,
    /// A partial or malformed batch starts here.
    Invalid,
}

/// Positional reader over a `.log` with a read-ahead window, so walking many small batches costs
/// a few large `pread`s rather than one per header.
pub(crate) struct LogReader<'a> {
    file: &'a File,
    path: &'a Path,
    end: u64,
    chunk: usize,
    buf: Vec<u8>,
    buf_pos: u64,
}

impl<'a> LogReader<'a> {
    pub(crate) fn new(file: &'a File, path: &'a Path, end: u64, chunk: usize) -> Self {
        LogReader {
            file,
            path,
            end,
            chunk,
            buf: Vec::new(),
            buf_pos: 0,
        }
    }

    /// Bytes `[pos, pos + len)`, or `None` when they extend past the end of the file.
    pub(crate) fn slice(&mut self, pos: u64, len: usize) -> Result<Option<&[u8]>> {
        let Some(stop) = pos.checked_add(len as u64) else {
            return Ok(None);
        };
        if stop > self.end {
            return Ok(None);
        }
        let cached_end = self.buf_pos + self.buf.len() as u64;
        if pos < self.buf_pos || stop > cached_end {
            let want = (len.max(self.chunk) as u64).min(self.end - pos) as usize;
            self.buf.resize(want, 0);
            self.file
                .read_exact_at(&mut self.buf, pos)
                .at(self.path, "read")?;
            self.buf_pos = pos;
        }
        let from = (pos - self.buf_pos) as usize;
        Ok(Some(&self.buf[from..from + len]))
    }

    /// The batch header at `pos`, checked for structure and for fitting inside the file.
    pub(crate) fn header_at(&mut self, pos: u64) -> Result<HeaderAt> {
        if pos >= self.end {
            return Ok(HeaderAt::End);
        }
        let Some(bytes) = self.slice(pos, RECORD_BATCH_OVERHEAD)? else {
            return Ok(HeaderAt::Invalid);
        };
        let Some(header) = BatchHeader::parse(bytes) else {
            return Ok(HeaderAt::Invalid);
        };
        if header.check_structure().is_err() || pos + header.size() as u64 > self.end {
            return Ok(HeaderAt::Invalid);
        }
        Ok(HeaderAt::Batch(header))
    }
}

/// One log segment. Not thread-safe by itself; the Python glue wraps it in a mutex.
pub struct Segment {
    pub(crate) base_offset: i64,
    /// The `.log`'s current path (it changes with [`change_file_suffixes`](Self::change_file_suffixes)).
    pub(crate) log_path: PathBuf,
    /// The `.log`'s slot in the cache of open descriptors; use [`log_file`](Self::log_file).
    log: LogFile,
    pub(crate) size: u64,
    pub(crate) offset_index: OffsetIndex,
    pub(crate) time_index: TimeIndex,
    pub(crate) txn_index: TxnIndex,
    pub(crate) index_interval_bytes: u64,
    pub(crate) bytes_since_last_index_entry: u64,
    pub(crate) next_offset: i64,
    pub(crate) max_timestamp: i64,
    pub(crate) offset_of_max_timestamp: i64,
    pub(crate) first_batch_timestamp: i64,
    /// Bumped whenever bytes already in the file change (truncation, recovery) so readers that
    /// planned a read before can detect it.
    pub(crate) generation: u64,
    scratch: Vec<u8>,
    assigned: Vec<AssignedBatch>,
}

/// `<dir>/<base_offset:020>.<ext>`
pub fn segment_file(dir: &Path, base_offset: i64, ext: &str) -> PathBuf {
    dir.join(format!("{base_offset:020}.{ext}"))
}

/// `path` with `old_suffix` (possibly empty) replaced by `new_suffix`.
fn replace_suffix(path: &Path, old_suffix: &str, new_suffix: &str) -> Result<PathBuf> {
    let name = path.to_string_lossy();
    let stem = name
        .strip_suffix(old_suffix)
        .ok_or_else(|| StorageError::invalid(format!("{name} does not end with {old_suffix:?}")))?;
    Ok(PathBuf::from(format!("{stem}{new_suffix}")))
}

impl Segment {
    /// Opens the segment `<dir>/<base_offset:020>.log` (+ indexes), creating missing files
    /// (except the `.txnindex`, created by its first append; an existing one is checked, see
    /// [`txn_index_damaged`](Self::txn_index_damaged)).
    ///
    /// For existing files the state is restored: `size` from the file length, the indexes'
    /// valid entries, `next_offset` by walking batch headers from the last offset-index entry to
    /// the end, and the max timestamp from the last time-index entry and the walked batches.
    /// Opening does not verify CRCs; after an unclean shutdown call [`recover`](Self::recover).
    /// The index mappings are released once the state is read: the first append or read maps
    /// them again. Likewise the `.log` of a segment holding data is closed once its state is read
    /// (the first use opens it again, in the cache of open files); an empty one, a new segment
    /// about to be appended to, stays open in the cache.
    pub fn open(
        dir: &Path,
        base_offset: i64,
        index_interval_bytes: i64,
        max_index_size: i64,
    ) -> Result<Segment> {
        Self::open_with_suffix(dir, base_offset, "", index_interval_bytes, max_index_size)
    }

    /// [`open`](Self::open) for files named with a `suffix` after their extension
    /// (`00000000000000000000.log.cleaned`, ...): a segment the log cleaner is writing.
    pub fn open_with_suffix(
        dir: &Path,
        base_offset: i64,
        suffix: &str,
        index_interval_bytes: i64,
        max_index_size: i64,
    ) -> Result<Segment> {
        if base_offset < 0 {
            return Err(StorageError::invalid(format!(
                "negative base offset {base_offset}"
            )));
        }
        if index_interval_bytes < 0 || max_index_size < 0 {
            return Err(StorageError::invalid(
                "index_interval_bytes and max_index_size must be >= 0",
            ));
        }
        let max_index_size = max_index_size.min(i32::MAX as i64) as usize;
        let file = |ext: &str| segment_file(dir, base_offset, &format!("{ext}{suffix}"));
        let log_path = file("log");
        let log = open_reclaiming(|| {
            OpenOptions::new()
                .read(true)
                .append(true)
                .create(true)
                .open(&log_path)
        })
        .at(&log_path, "open")?;
        let metadata = log.metadata().at(&log_path, "stat")?;
        let size = metadata.len();
        let offset_index = OffsetIndex::open(&file("index"), base_offset, max_index_size)?;
        let time_index = TimeIndex::open(&file("timeindex"), base_offset, max_index_size)?;
        let txn_index = TxnIndex::open(&file("txnindex"), base_offset)?;
        let log = LogFile::opened(log, &metadata, &log_path);
        let mut segment = Segment {
            base_offset,
            log_path,
            log,
            size,
            offset_index,
            time_index,
            txn_index,
            index_interval_bytes: index_interval_bytes as u64,
            bytes_since_last_index_entry: 0,
            next_offset: base_offset,
            max_timestamp: NO_TIMESTAMP,
            offset_of_max_timestamp: -1,
            first_batch_timestamp: NO_TIMESTAMP,
            generation: 0,
            scratch: Vec::new(),
            assigned: Vec::new(),
        };
        segment.reload_state()?;
        segment.release_indexes();
        if segment.size == 0 {
            segment.log.keep(); // a new segment: appended to next
        } else {
            segment.log.close(); // a broker loading its logs keeps open only what it then uses
        }
        Ok(segment)
    }

    /// Maps both indexes for an operation that reads them (they are released while unused).
    pub(crate) fn map_indexes(&mut self) -> Result<()> {
        self.offset_index.file_mut().ensure_mapped()?;
        self.time_index.file_mut().ensure_mapped()
    }

    /// Drops both index mappings (Kafka's lazy indexes: an opened or inactive segment holds no
    /// mapping until it is read again).
    pub(crate) fn release_indexes(&mut self) {
        self.offset_index.file_mut().release();
        self.time_index.file_mut().release();
    }

    /// Recomputes `next_offset`, the max timestamp and `first_batch_timestamp` from the indexes
    /// and the batches after the last offset-index entry.
    pub(crate) fn reload_state(&mut self) -> Result<()> {
        self.offset_index.sanitize(self.size);
        let last_entry = self.offset_index.last_entry();
        let log = self.log_file()?;
        let mut reader = LogReader::new(&log, &self.log_path, self.size, HEADER_CHUNK);

        let mut next_offset = if self.offset_index.entries() > 0 {
            last_entry.offset + 1
        } else {
            self.base_offset
        };
        let mut tail_max = (NO_TIMESTAMP, -1i64);
        let mut pos = last_entry.position as u64;
        while let HeaderAt::Batch(h) = reader.header_at(pos)? {
            next_offset = h.last_offset() + 1;
            if h.max_timestamp > tail_max.0 {
                tail_max = (h.max_timestamp, h.last_offset());
            }
            pos += h.size() as u64;
        }
        self.next_offset = next_offset;
        self.time_index.sanitize(next_offset);
        let last_time = self.time_index.last_entry();
        (self.max_timestamp, self.offset_of_max_timestamp) = if self.time_index.entries() > 0 {
            (last_time.timestamp, last_time.offset)
        } else {
            (NO_TIMESTAMP, -1)
        };
        if tail_max.0 > self.max_timestamp {
            (self.max_timestamp, self.offset_of_max_timestamp) = tail_max;
        }
        self.first_batch_timestamp = match reader.header_at(0)? {
            HeaderAt::Batch(h) => h.max_timestamp,
            _ => NO_TIMESTAMP,
        };
        self.bytes_since_last_index_entry = 0;
        Ok(())
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// Bytes in the `.log`.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Offset the next appended record will get (the segment's log end offset).
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    /// Largest batch `maxTimestamp` in the segment, -1 if none.
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }

    /// Last offset of the first batch holding `max_timestamp`, -1 if none.
    pub fn offset_of_max_timestamp(&self) -> i64 {
        self.offset_of_max_timestamp
    }

    /// Kafka's `LogSegment.getFirstBatchTimestamp` (the age the `segment.ms` roll and
    /// `max.compaction.lag.ms` count from): the largest timestamp of the record set that started
    /// the segment, or of its first batch once reopened; -1 if the segment is empty.
    pub fn first_batch_timestamp(&self) -> i64 {
        self.first_batch_timestamp
    }

    /// True when either index is full (the caller must roll before appending).
    pub fn index_is_full(&self) -> bool {
        self.offset_index.is_full() || self.time_index.is_full()
    }

    /// Modification time of the `.log`, in milliseconds since the epoch (a `stat` by path: no
    /// descriptor needed, so retention's pass over every segment leaves the cache alone).
    pub fn last_modified_ms(&self) -> Result<i64> {
        let modified = std::fs::metadata(&self.log_path)
            .and_then(|m| m.modified())
            .at(&self.log_path, "stat")?;
        Ok(match modified.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_millis() as i64,
            Err(e) => -(e.duration().as_millis() as i64),
        })
    }

    /// Path of the `.log`.
    pub fn path(&self) -> &Path {
        &self.log_path
    }

    pub fn offset_index(&self) -> &OffsetIndex {
        &self.offset_index
    }

    pub fn time_index(&self) -> &TimeIndex {
        &self.time_index
    }

    pub fn txn_index(&self) -> &TxnIndex {
        &self.txn_index
    }

    /// Whether the `.txnindex` file exists.
    pub fn has_txn_index(&self) -> bool {
        self.txn_index.exists()
    }

    /// True when opening found the `.txnindex` damaged (see `txn_index.rs`); cleared by
    /// [`recover`](Self::recover). A damaged index is neither served nor appended to.
    pub fn txn_index_damaged(&self) -> bool {
        self.txn_index.is_damaged()
    }

    /// Appends an aborted transaction to the `.txnindex` (created if needed; no fsync). Its
    /// `last_offset` must be greater than the previous entry's.
    pub fn append_aborted_txn(&mut self, txn: AbortedTxn) -> Result<()> {
        self.txn_index.append(txn)
    }

    /// Kafka's `LogSegment.collectAbortedTxns`: the aborted transactions overlapping
    /// `[fetch_offset, upper_bound_offset)` and whether the search is complete (see
    /// [`TxnIndex::collect`]).
    pub fn collect_aborted_txns(
        &self,
        fetch_offset: i64,
        upper_bound_offset: i64,
    ) -> Result<(Vec<AbortedTxn>, bool)> {
        self.txn_index.collect(fetch_offset, upper_bound_offset)
    }

    /// Every entry of the `.txnindex`.
    pub fn aborted_txns(&self) -> Result<Vec<AbortedTxn>> {
        self.txn_index.all()
    }

    /// Appends a record set, patching it in place first (see [`assign_offsets`]):
    /// `first_offset >= 0` assigns offsets from it, `< 0` keeps the buffer's (replicated data);
    /// `leader_epoch >= 0` stamps the partition leader epoch; `log_append_time_ms >= 0` switches
    /// the batches to LogAppendTime.
    ///
    /// The set must be well formed (the caller validated it). Offsets must not go backwards and
    /// must stay within `base_offset + i32::MAX`; the segment must stay under 2 GiB.
    pub fn append(
        &mut self,
        records: &mut [u8],
        first_offset: i64,
        leader_epoch: i32,
        log_append_time_ms: i64,
    ) -> Result<AppendResult> {
        let mut assigned = std::mem::take(&mut self.assigned);
        let result = self.append_patched(
            records,
            first_offset,
            leader_epoch,
            log_append_time_ms,
            &mut assigned,
        );
        self.assigned = assigned;
        result
    }

    /// Like [`append`](Self::append) for a read-only buffer: the set is copied into a reusable
    /// scratch buffer and patched there.
    pub fn append_copy(
        &mut self,
        records: &[u8],
        first_offset: i64,
        leader_epoch: i32,
        log_append_time_ms: i64,
    ) -> Result<AppendResult> {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        scratch.extend_from_slice(records);
        let result = self.append(&mut scratch, first_offset, leader_epoch, log_append_time_ms);
        if scratch.capacity() > SCRATCH_KEEP {
            scratch = Vec::new();
        }
        self.scratch = scratch;
        result
    }

    fn append_patched(
        &mut self,
        records: &mut [u8],
        first_offset: i64,
        leader_epoch: i32,
        log_append_time_ms: i64,
        assigned: &mut Vec<AssignedBatch>,
    ) -> Result<AppendResult> {
        if first_offset >= 0 && first_offset < self.next_offset {
            return Err(StorageError::invalid(format!(
                "first offset {first_offset} is below the segment's next offset {}",
                self.next_offset
            )));
        }
        assign_offsets(
            records,
            first_offset,
            leader_epoch,
            log_append_time_ms,
            assigned,
        )?;
        let mut expected = self.next_offset;
        for b in assigned.iter() {
            if b.base_offset < expected {
                return Err(StorageError::invalid(format!(
                    "batch base offset {} is below the expected offset {expected}",
                    b.base_offset
                )));
            }
            expected = b.last_offset + 1;
        }
        let last_offset = expected - 1;
        if last_offset - self.base_offset > i32::MAX as i64 {
            return Err(StorageError::invalid(format!(
                "offset {last_offset} does not fit segment {} (relative offsets are int32); roll first",
                self.base_offset
            )));
        }
        let start = self.size;
        if start + records.len() as u64 > MAX_SEGMENT_SIZE {
            return Err(StorageError::invalid(format!(
                "appending {} bytes would grow segment {} past {MAX_SEGMENT_SIZE} bytes; roll first",
                records.len(),
                self.base_offset
            )));
        }
        // Grow trimmed indexes before writing so index updates below cannot fail on I/O.
        self.offset_index.file_mut().ensure_preallocated()?;
        self.time_index.file_mut().ensure_preallocated()?;

        self.with_log(|mut log| {
            if let Err(e) = log.write_all(records) {
                // Do not leave a torn batch behind.
                let _ = log.set_len(start);
                return Err(e);
            }
            Ok(())
        })?
        .at(&self.log_path, "write")?;

        let mut result = AppendResult {
            last_offset,
            max_timestamp: NO_TIMESTAMP,
            offset_of_max_timestamp: -1,
        };
        for b in assigned.iter() {
            if b.max_timestamp > result.max_timestamp {
                result.max_timestamp = b.max_timestamp;
                result.offset_of_max_timestamp = b.last_offset;
            }
            self.index_batch(
                start + b.position as u64,
                b.size as u64,
                b.last_offset,
                b.max_timestamp,
            )?;
        }
        if start == 0 && !assigned.is_empty() {
            // Kafka's `rollingBasedTimestamp`: the largest timestamp of the set that starts the
            // segment, never a batch's `baseTimestamp`, which the cleaner turns into a delete
            // horizon (KIP-534) that a follower copies as it is.
            self.first_batch_timestamp = result.max_timestamp;
        }
        self.size = start + records.len() as u64;
        self.next_offset = last_offset + 1;
        Ok(result)
    }

    /// Kafka's per-batch index rule (`LogSegment.append`): track the max timestamp, and when more
    /// than `index_interval_bytes` were appended since the last entry, index this batch (its last
    /// offset at its position) and the max timestamp so far.
    pub(crate) fn index_batch(
        &mut self,
        position: u64,
        size: u64,
        last_offset: i64,
        max_timestamp: i64,
    ) -> Result<()> {
        if max_timestamp > self.max_timestamp {
            self.max_timestamp = max_timestamp;
            self.offset_of_max_timestamp = last_offset;
        }
        if self.bytes_since_last_index_entry > self.index_interval_bytes {
            self.offset_index.append(last_offset, position as u32)?;
            self.time_index.maybe_append(
                self.max_timestamp,
                self.offset_of_max_timestamp,
                false,
            )?;
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += size;
        Ok(())
    }

    /// Position and header of the first batch whose last offset is >= `offset`.
    pub fn translate_offset(&mut self, offset: i64) -> Result<Option<(u64, BatchHeader)>> {
        self.map_indexes()?;
        let mut pos = self.offset_index.lookup(offset).position as u64;
        self.with_log(|log| {
            let mut reader = LogReader::new(log, &self.log_path, self.size, HEADER_CHUNK);
            while let HeaderAt::Batch(h) = reader.header_at(pos)? {
                if h.last_offset() >= offset {
                    return Ok(Some((pos, h)));
                }
                pos += h.size() as u64;
            }
            Ok(None)
        })?
    }

    /// Plans a fetch: whole batches starting with the one holding `offset`, none with a base
    /// offset >= `max_offset`, at most `max_bytes` in total, except that with `min_one_batch` a
    /// first batch larger than `max_bytes` is returned alone (KIP-74). `None` means nothing.
    pub fn read_plan(
        &mut self,
        offset: i64,
        max_bytes: i64,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<Option<ReadPlan>> {
        if offset >= self.next_offset {
            return Ok(None);
        }
        let Some((position, header)) = self.translate_offset(offset)? else {
            return Ok(None);
        };
        if header.base_offset >= max_offset {
            return Ok(None);
        }
        let max_bytes = max_bytes.max(0) as u64;
        let first_size = header.size() as u64;
        let capacity = if first_size > max_bytes {
            if !min_one_batch {
                return Ok(None);
            }
            first_size
        } else {
            max_bytes.min(self.size - position)
        };
        Ok(Some(ReadPlan {
            position,
            capacity: capacity as usize,
            max_offset,
        }))
    }

    /// The bytes a fetch would read, as `(position, length)` in the `.log`, found without
    /// reading any records: the same whole batches as [`read`](Self::read) returns, so they can
    /// be sent straight from the file (zero-copy). Only batch headers are read: from the last
    /// index entry inside the planned range (an index entry is always a batch boundary), so the
    /// walk covers about `index.interval.bytes` of small batches or one large one.
    ///
    /// Returns `(position, length, next_offset)`, `next_offset` being the last offset of the
    /// region's last batch + 1.
    pub fn read_region(
        &mut self,
        offset: i64,
        max_bytes: i64,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<Option<(u64, usize, i64)>> {
        let Some(plan) = self.read_plan(offset, max_bytes, max_offset, min_one_batch)? else {
            return Ok(None);
        };
        let start = plan.position;
        let end = start + plan.capacity as u64;
        // The last index entry at or before `bound` that lies after `start`, else `start`.
        let walk_start =
            |index: &OffsetIndex, bound: u64| match index.floor_by_position(bound, max_offset) {
                Some(entry) if entry.position as u64 > start => entry.position as u64,
                _ => start,
            };
        self.with_log(|log| {
            let mut pos = walk_start(&self.offset_index, end);
            let mut reader = LogReader::new(log, &self.log_path, end, HEADER_CHUNK);
            let mut next_offset = None;
            while let HeaderAt::Batch(h) = reader.header_at(pos)? {
                if h.base_offset >= max_offset {
                    break;
                }
                next_offset = Some(h.last_offset() + 1);
                pos += h.size() as u64;
            }
            if pos == start {
                return Ok(None);
            }
            if next_offset.is_none() {
                // The walk started where the region ends (an index entry there, or at a batch that
                // does not fit): walk the batches before it, from the entry before, to find the
                // region's last batch.
                let mut at = walk_start(&self.offset_index, pos - 1);
                while at < pos {
                    let HeaderAt::Batch(h) = reader.header_at(at)? else {
                        break;
                    };
                    next_offset = Some(h.last_offset() + 1);
                    at += h.size() as u64;
                }
            }
            let next_offset = next_offset.ok_or_else(|| {
                StorageError::corrupt(format!(
                    "cannot find the last batch before position {pos} of {}",
                    self.log_path.display()
                ))
            })?;
            Ok(Some((start, (pos - start) as usize, next_offset)))
        })?
    }

    /// The open `.log`, opened again at its current path if the cache of open descriptors had
    /// closed it (a file removed meanwhile is an error: it is never created again). The handle
    /// stays valid after the cache closes its own reference, so it can be used to read a
    /// [`ReadPlan`] without holding the segment.
    pub fn log_file(&self) -> Result<Arc<File>> {
        self.log.get(&self.log_path).at(&self.log_path, "open")
    }

    /// `f` on the open `.log`, for a short operation: as [`log_file`](Self::log_file), holding
    /// the cache slot's lock instead of a reference to the file (see `open_files::LogFile::with`).
    pub(crate) fn with_log<T>(&self, f: impl FnOnce(&File) -> T) -> Result<T> {
        self.log.with(&self.log_path, f).at(&self.log_path, "open")
    }

    /// Whether the cache of open descriptors holds this segment's `.log` open now.
    pub fn log_is_open(&self) -> bool {
        self.log.is_open()
    }

    /// A reference to the `.log` that holds no descriptor, for a reader that keeps it longer
    /// than an operation (a [`LogRegion`](crate::region::LogRegion) waiting to be sent).
    pub fn log_file_ref(&self) -> LogFileRef {
        self.log.reference(&self.log_path)
    }

    /// Counter of changes to bytes already written (truncation, recovery).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Reads whole batches as [`read_plan`](Self::read_plan) describes.
    pub fn read(
        &mut self,
        offset: i64,
        max_bytes: i64,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<Vec<u8>> {
        let Some(plan) = self.read_plan(offset, max_bytes, max_offset, min_one_batch)? else {
            return Ok(Vec::new());
        };
        let mut buf = vec![0u8; plan.capacity];
        let n = read_planned(&*self.log_file()?, &self.log_path, &plan, &mut buf)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// First record with timestamp >= `timestamp` and offset >= `start_offset`, as
    /// `(offset, timestamp)`. Uses the time index, then the offset index, then scans batches,
    /// skipping those whose `maxTimestamp` is below the target and decompressing the candidate.
    pub fn find_offset_by_timestamp(
        &mut self,
        timestamp: i64,
        start_offset: i64,
    ) -> Result<Option<(i64, i64)>> {
        self.map_indexes()?;
        let indexed = self.time_index.lookup(timestamp);
        let from = self
            .offset_index
            .lookup(indexed.offset.max(start_offset))
            .position as u64;
        self.scan_records(
            from,
            |h| h.max_timestamp >= timestamp && h.last_offset() >= start_offset,
            |o, t| t >= timestamp && o >= start_offset,
        )
    }

    /// `(offset, timestamp)` of the first record whose timestamp equals the segment's max
    /// timestamp (ListOffsets MAX_TIMESTAMP), or `None` when the segment has no timestamps.
    pub fn max_timestamp_record(&mut self) -> Result<Option<(i64, i64)>> {
        let max = self.max_timestamp;
        if max < 0 {
            return Ok(None);
        }
        self.map_indexes()?;
        let target = self.offset_of_max_timestamp;
        let from = self.offset_index.lookup(target).position as u64;
        let found = self.scan_records(
            from,
            |h| h.max_timestamp == max && h.last_offset() >= target,
            |_, t| t == max,
        )?;
        if found.is_some() || from == 0 {
            return Ok(found);
        }
        self.scan_records(0, |h| h.max_timestamp == max, |_, t| t == max)
    }

    /// Walks batches from `from`; for each batch accepted by `want_batch`, visits its records
    /// and returns the first `(offset, timestamp)` accepted by `want_record`.
    fn scan_records(
        &self,
        from: u64,
        want_batch: impl Fn(&BatchHeader) -> bool,
        mut want_record: impl FnMut(i64, i64) -> bool,
    ) -> Result<Option<(i64, i64)>> {
        let log = self.log_file()?;
        let mut reader = LogReader::new(&log, &self.log_path, self.size, SEARCH_CHUNK);
        let mut pos = from;
        while let HeaderAt::Batch(h) = reader.header_at(pos)? {
            let size = h.size();
            if want_batch(&h) {
                let Some(batch) = reader.slice(pos, size)? else {
                    break;
                };
                let mut found = None;
                visit_records(&h, batch, |o, t| {
                    let hit = want_record(o, t);
                    if hit {
                        found = Some((o, t));
                    }
                    hit
                })?;
                if found.is_some() {
                    return Ok(found);
                }
            }
            pos += size as u64;
        }
        Ok(None)
    }

    /// Removes every batch whose last offset is >= `offset` (a batch holding `offset` goes
    /// entirely), and index entries for offsets >= `offset` (aborted transactions: those whose
    /// last offset is >= `offset`, as Kafka's `TransactionIndex.truncateTo`); recomputes
    /// `next_offset` and the max timestamp. Returns the number of bytes removed.
    pub fn truncate_to(&mut self, offset: i64) -> Result<u64> {
        self.txn_index.truncate_to(offset)?;
        if offset >= self.next_offset {
            return Ok(0);
        }
        let Some((position, _)) = self.translate_offset(offset)? else {
            return Ok(0);
        };
        let removed = self.size - position;
        self.offset_index.truncate_to(offset);
        self.time_index.truncate_to(offset);
        self.log_file()?
            .set_len(position)
            .at(&self.log_path, "truncate")?;
        self.size = position;
        self.generation += 1;
        self.reload_state()?;
        Ok(removed)
    }

    /// Header information of every batch from `start_position` (a batch boundary) to the end
    /// of the log. Stops quietly at a partial or malformed batch. The marker of a control batch
    /// is read from its first record (control batches are tiny); nothing else past the headers.
    pub fn batches(&self, start_position: u64) -> Result<Vec<BatchInfo>> {
        let log = self.log_file()?;
        let mut reader = LogReader::new(&log, &self.log_path, self.size, SCAN_CHUNK);
        let mut out = Vec::new();
        let mut pos = start_position;
        while let HeaderAt::Batch(h) = reader.header_at(pos)? {
            let size = h.size() as u64;
            let marker = if h.is_control() {
                reader
                    .slice(pos, h.size())?
                    .map_or(ControlMarker::NONE, |batch| control_marker(&h, batch))
            } else {
                ControlMarker::NONE
            };
            out.push(BatchInfo {
                base_offset: h.base_offset,
                last_offset: h.last_offset(),
                position: pos,
                size,
                partition_leader_epoch: h.partition_leader_epoch,
                max_timestamp: h.max_timestamp,
                producer_id: h.producer_id,
                producer_epoch: h.producer_epoch,
                base_sequence: h.base_sequence,
                is_transactional: h.is_transactional(),
                is_control: h.is_control(),
                control_type: marker.control_type,
                coordinator_epoch: marker.coordinator_epoch,
            });
            pos += size;
        }
        Ok(out)
    }

    /// `(epoch, base offset)` of each batch that starts a leader epoch above `latest_epoch`,
    /// walking the whole log: what recovery feeds back into the leader-epoch cache (Kafka's
    /// `LogSegment.recover` does the same per batch), for a checkpoint that missed them.
    pub fn leader_epoch_starts(&self, latest_epoch: i32) -> Result<Vec<(i32, i64)>> {
        let log = self.log_file()?;
        let mut reader = LogReader::new(&log, &self.log_path, self.size, SCAN_CHUNK);
        let (mut latest, mut starts, mut pos) = (latest_epoch, Vec::new(), 0u64);
        while let HeaderAt::Batch(h) = reader.header_at(pos)? {
            if h.partition_leader_epoch > latest {
                latest = h.partition_leader_epoch;
                starts.push((latest, h.base_offset));
            }
            pos += h.size() as u64;
        }
        Ok(starts)
    }

    /// Handles for an fsync of the four files that can run without holding the segment. On
    /// platforms other than Linux the index mappings are msync'ed here first.
    pub fn flush_handles(&self) -> Result<FlushHandles> {
        #[cfg(not(target_os = "linux"))]
        {
            self.offset_index.file().msync()?;
            self.time_index.file().msync()?;
        }
        Ok(FlushHandles {
            log: (self.log_file()?, self.log_path.clone()),
            indexes: [
                self.offset_index.path().to_path_buf(),
                self.time_index.path().to_path_buf(),
                self.txn_index.path().to_path_buf(),
            ],
        })
    }

    /// fsyncs the log and the indexes (the `.txnindex` if it exists).
    pub fn flush(&self) -> Result<()> {
        self.flush_handles()?.sync()
    }

    /// Called when the segment stops being the active one: appends the final time-index entry
    /// (max timestamp so far, using the reserved slot), trims both indexes to their entries and
    /// releases their mappings. An index not mapped since the segment was opened was not written
    /// either: it is left as it is, unless it still has its preallocated length.
    pub fn on_become_inactive(&mut self) -> Result<()> {
        if self.time_index.file().is_mapped() {
            self.time_index
                .maybe_append(self.max_timestamp, self.offset_of_max_timestamp, true)?;
        }
        self.offset_index.trim_to_valid_size()?;
        self.time_index.trim_to_valid_size()?;
        self.release_indexes();
        Ok(())
    }

    /// Final time-index entry, trims the indexes, optionally fsyncs, and closes the files.
    pub fn close(mut self, sync: bool) -> Result<()> {
        let inactive = self.on_become_inactive();
        let synced = if sync { self.flush() } else { Ok(()) };
        self.release();
        inactive.and(synced)
    }

    /// The four file paths: `.log`, `.index`, `.timeindex`, `.txnindex` (which may not exist).
    pub fn paths(&self) -> [PathBuf; 4] {
        [
            self.log_path.clone(),
            self.offset_index.path().to_path_buf(),
            self.time_index.path().to_path_buf(),
            self.txn_index.path().to_path_buf(),
        ]
    }

    /// Unmaps the indexes and gives the `.log`'s slot back to the cache (closing its descriptor
    /// unless a reader still holds it).
    fn release(self) {
        let Segment {
            log,
            offset_index,
            time_index,
            ..
        } = self;
        offset_index.into_file().close();
        time_index.into_file().close();
        drop(log);
    }

    /// Closes the files (without trimming or syncing) and removes them; missing files are fine.
    pub fn delete(self) -> Result<()> {
        let paths = self.paths();
        self.release();
        for path in &paths {
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e).at(path, "delete")
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Renames each file from `<name><old_suffix>` to `<name><new_suffix>` (Kafka's
    /// `changeFileSuffixes`), the `.log` first, and keeps using them under their new names (an
    /// open `.log` descriptor stays valid; one closed by the cache is opened again by the new
    /// name). A missing `.txnindex` is skipped.
    pub fn change_file_suffixes(&mut self, old_suffix: &str, new_suffix: &str) -> Result<()> {
        let paths = self.paths();
        let mut renamed = Vec::with_capacity(paths.len());
        for path in &paths {
            let target = replace_suffix(path, old_suffix, new_suffix)?;
            match std::fs::rename(path, &target) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && path == &paths[3] => {}
                Err(e) => return Err(e).at(path, "rename"),
            }
            renamed.push(target);
        }
        let [log, offset_index, time_index, txn_index]: [PathBuf; 4] =
            renamed.try_into().expect("four segment files");
        self.log.renamed(&log);
        self.log_path = log;
        self.offset_index.file_mut().set_path(offset_index);
        self.time_index.file_mut().set_path(time_index);
        self.txn_index.set_path(txn_index);
        Ok(())
    }

    /// Sets the `.log`'s modification time (a cleaned segment keeps its sources' time, which
    /// time-based retention and rolling read).
    pub fn set_last_modified_ms(&self, ms: i64) -> Result<()> {
        let time = UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
        self.log_file()?
            .set_modified(time)
            .at(&self.log_path, "set mtime")
    }

    /// Closes the segment (final time entry, trim) and renames each file to `<name><suffix>`,
    /// e.g. `.deleted`. Missing index files (a `.txnindex` never created) are skipped.
    pub fn rename_suffix(self, suffix: &str) -> Result<Vec<PathBuf>> {
        let paths = self.paths();
        let closed = self.close(false);
        let mut renamed = Vec::new();
        for path in &paths {
            let mut target = path.clone().into_os_string();
            target.push(suffix);
            let target = PathBuf::from(target);
            match std::fs::rename(path, &target) {
                Ok(()) => renamed.push(target),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && path != &paths[0] => {}
                Err(e) => return Err(e).at(path, "rename"),
            }
        }
        closed.map(|()| renamed)
    }
}

/// Reads `plan.capacity` bytes at `plan.position` into `buf` and returns the length of the
/// leading whole batches with `baseOffset < plan.max_offset`.
pub fn read_planned(file: &File, path: &Path, plan: &ReadPlan, buf: &mut [u8]) -> Result<usize> {
    let buf = &mut buf[..plan.capacity];
    file.read_exact_at(buf, plan.position).at(path, "read")?;
    Ok(whole_batches_prefix(buf, plan.max_offset))
}

/// Like [`read_planned`], reading into raw memory that may be uninitialised (a freshly
/// allocated Python `bytes`), so no zero-fill is needed first.
///
/// # Safety
/// `dst` must be valid for writes of `plan.capacity` bytes and not accessed by anything else
/// until this returns.
pub unsafe fn read_planned_raw(
    file: &File,
    path: &Path,
    plan: &ReadPlan,
    dst: *mut u8,
) -> Result<usize> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    let mut done = 0usize;
    while done < plan.capacity {
        let n = libc::pread(
            fd,
            dst.add(done).cast(),
            plan.capacity - done,
            (plan.position + done as u64) as libc::off_t,
        );
        if n < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err).at(path, "read");
        }
        if n == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof)).at(path, "read");
        }
        done += n as usize;
    }
    // SAFETY: all `capacity` bytes were just written by pread.
    let filled = std::slice::from_raw_parts(dst, plan.capacity);
    Ok(whole_batches_prefix(filled, plan.max_offset))
}

/// Length of the longest prefix of `buf` made of whole batches with `baseOffset < max_offset`.
pub fn whole_batches_prefix(buf: &[u8], max_offset: i64) -> usize {
    let mut cut = 0usize;
    while buf.len() - cut >= LOG_OVERHEAD {
        let length = get_i32(buf, cut + BATCH_LENGTH_OFFSET);
        if length < MIN_BATCH_LENGTH {
            break;
        }
        let size = length as usize + LOG_OVERHEAD;
        if size > buf.len() - cut || get_i64(buf, cut) >= max_offset {
            break;
        }
        cut += size;
    }
    cut
}
