//! Segment recovery after an unclean shutdown (Kafka's `LogSegment.recover`).
//!
//! The whole `.log` is re-read from position 0 and every batch checked: structure (length,
//! magic, codec, deltas), size limit, CRC-32C, and offsets that increase and fit the segment.
//! Both indexes are rebuilt from scratch with the same interval rule as appends; the
//! aborted-transaction index is emptied (its caller rebuilds it from the replayed markers). The
//! file is truncated at the first invalid or partial batch; everything before it is kept. As in
//! Kafka, recovery ends by trimming the offset index, appending the final time-index entry and
//! trimming the time index.

use crate::batch::{check_crc, BatchHeader, NO_TIMESTAMP, RECORD_BATCH_OVERHEAD};
use crate::errors::{IoContext, Result};
use crate::segment::{LogReader, Segment, SCAN_CHUNK};

impl Segment {
    /// Rescans and validates the whole log, rebuilding both indexes and emptying the
    /// aborted-transaction index (which clears its damage flag); truncates at the first invalid
    /// batch. A batch larger than `max_message_bytes` counts as invalid (pass a bound no
    /// smaller than any batch the log may legitimately hold). Returns the bytes truncated.
    pub fn recover(&mut self, max_message_bytes: i64) -> Result<u64> {
        self.map_indexes()?;
        // As Kafka's `LogSegment.recover`, the aborted-transaction index starts over; the caller
        // appends the aborted transactions again while it replays the batches.
        self.txn_index.reset()?;
        self.offset_index.reset();
        self.time_index.reset();
        self.bytes_since_last_index_entry = 0;
        self.max_timestamp = NO_TIMESTAMP;
        self.offset_of_max_timestamp = -1;
        self.next_offset = self.base_offset;
        self.first_batch_timestamp = NO_TIMESTAMP;
        self.generation += 1;

        let log = self.log_file()?;
        let path = self.log_path.clone();
        let file_len = log.metadata().at(&path, "stat")?.len();
        let mut reader = LogReader::new(&log, &path, file_len, SCAN_CHUNK);
        let mut pos = 0u64;
        while let Some(header) = valid_batch_at(
            &mut reader,
            pos,
            max_message_bytes,
            self.next_offset,
            self.base_offset,
        )? {
            let size = header.size() as u64;
            let last_offset = header.last_offset();
            self.index_batch(pos, size, last_offset, header.max_timestamp)?;
            if pos == 0 {
                self.first_batch_timestamp = header.max_timestamp;
            }
            self.next_offset = last_offset + 1;
            pos += size;
        }
        let truncated = file_len - pos;
        if truncated > 0 {
            log.set_len(pos).at(&path, "truncate")?;
        }
        self.size = pos;
        self.bytes_since_last_index_entry = 0;
        self.offset_index.trim_to_valid_size()?;
        self.time_index
            .maybe_append(self.max_timestamp, self.offset_of_max_timestamp, true)?;
        self.time_index.trim_to_valid_size()?;
        self.release_indexes();
        Ok(truncated)
    }
}

/// The header of the batch at `pos` if the whole batch is present and valid: structure, size
/// limit, CRC, base offset >= `min_offset` and a last offset that fits the segment.
fn valid_batch_at(
    reader: &mut LogReader<'_>,
    pos: u64,
    max_message_bytes: i64,
    min_offset: i64,
    segment_base_offset: i64,
) -> Result<Option<BatchHeader>> {
    let Some(header) = reader
        .slice(pos, RECORD_BATCH_OVERHEAD)?
        .and_then(BatchHeader::parse)
    else {
        return Ok(None);
    };
    if header.check_structure().is_err() || header.size() as i64 > max_message_bytes {
        return Ok(None);
    }
    let Some(batch) = reader.slice(pos, header.size())? else {
        return Ok(None); // torn tail
    };
    if check_crc(batch).is_err()
        || header.base_offset < min_offset
        || header.last_offset() - segment_base_offset > i32::MAX as i64
    {
        return Ok(None);
    }
    Ok(Some(header))
}
