//! The sparse time index (`.timeindex`): maps timestamps to offsets.
//!
//! Each 12-byte big-endian entry is `(timestamp i64, relativeOffset i32)`. An entry `(T, O)`
//! says that every record with a timestamp greater than `T` comes after offset `O`. Entries are
//! appended only when the timestamp is strictly greater than the last entry's (an empty index
//! behaves as if its last entry were `(-1, base)`, so negative timestamps never enter), and
//! offsets never decrease. The last entry doubles as the segment's persisted
//! `maxTimestampSoFar`. One slot is reserved for the final entry appended when the segment rolls
//! or closes, so `is_full` is true one entry early, as in Kafka.

use std::path::Path;

use crate::batch::{get_i32, get_i64, NO_TIMESTAMP};
use crate::errors::Result;
use crate::index_file::IndexFile;

/// Size of one `.timeindex` entry.
pub const TIME_INDEX_ENTRY_SIZE: usize = 12;

/// A time index entry, with the offset made absolute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    pub timestamp: i64,
    pub offset: i64,
}

/// The `.timeindex` file of one segment.
pub struct TimeIndex {
    file: IndexFile,
    base_offset: i64,
}

impl TimeIndex {
    /// Opens or creates the index at `path` (see `index_file.rs` for the sizing rules).
    pub fn open(path: &Path, base_offset: i64, max_index_size: usize) -> Result<TimeIndex> {
        Ok(TimeIndex {
            file: IndexFile::open(path, TIME_INDEX_ENTRY_SIZE, max_index_size)?,
            base_offset,
        })
    }

    pub fn entries(&self) -> usize {
        self.file.entries()
    }

    /// True when only the slot reserved for the final entry is left.
    pub fn is_full(&self) -> bool {
        self.file.entries() + 1 >= self.file.max_entries()
    }

    /// Entry `slot` (< `entries()`).
    pub fn entry(&self, slot: usize) -> TimestampOffset {
        let e = self.file.entry(slot);
        TimestampOffset {
            timestamp: get_i64(e, 0),
            offset: self.base_offset + get_i32(e, 8) as i64,
        }
    }

    /// The last entry, or `(-1, base_offset)` when empty.
    pub fn last_entry(&self) -> TimestampOffset {
        match self.entries() {
            0 => self.empty_entry(),
            n => self.entry(n - 1),
        }
    }

    fn empty_entry(&self) -> TimestampOffset {
        TimestampOffset {
            timestamp: NO_TIMESTAMP,
            offset: self.base_offset,
        }
    }

    /// Appends `(timestamp, offset)` if the timestamp is greater than the last entry's and the
    /// offset not smaller. `skip_full_check` allows using the reserved last slot (final entry on
    /// roll/close). Returns whether an entry was written.
    pub fn maybe_append(
        &mut self,
        timestamp: i64,
        offset: i64,
        skip_full_check: bool,
    ) -> Result<bool> {
        let last = self.last_entry();
        let relative = offset - self.base_offset;
        if timestamp <= last.timestamp
            || (self.entries() > 0 && offset < last.offset)
            || !(0..=i32::MAX as i64).contains(&relative)
            || (!skip_full_check && self.is_full())
        {
            return Ok(false);
        }
        let mut bytes = [0u8; TIME_INDEX_ENTRY_SIZE];
        bytes[..8].copy_from_slice(&timestamp.to_be_bytes());
        bytes[8..].copy_from_slice(&(relative as i32).to_be_bytes());
        self.file.push(&bytes)
    }

    /// Number of leading entries satisfying `pred` (entries are sorted on both fields).
    fn count_while(&self, pred: impl Fn(TimestampOffset) -> bool) -> usize {
        let (mut lo, mut hi) = (0usize, self.entries());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.entry(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Greatest entry with timestamp <= `target`, or `(-1, base_offset)`.
    pub fn lookup(&self, target: i64) -> TimestampOffset {
        match self.count_while(|e| e.timestamp <= target) {
            0 => self.empty_entry(),
            n => self.entry(n - 1),
        }
    }

    /// Removes every entry whose offset is >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) {
        let keep = self.count_while(|e| e.offset < offset);
        self.file.truncate_entries(keep);
    }

    /// Removes every entry.
    pub fn reset(&mut self) {
        self.file.truncate_entries(0);
    }

    /// Drops trailing entries whose offset is >= `next_offset` or that break monotonicity.
    pub fn sanitize(&mut self, next_offset: i64) {
        let mut n = self.entries();
        while n > 0 {
            let e = self.entry(n - 1);
            let ordered = n == 1 || {
                let p = self.entry(n - 2);
                p.timestamp < e.timestamp && p.offset <= e.offset
            };
            if e.offset < next_offset && e.offset >= self.base_offset && ordered {
                break;
            }
            n -= 1;
        }
        self.file.truncate_entries(n);
    }

    pub(crate) fn file(&self) -> &IndexFile {
        &self.file
    }

    pub(crate) fn file_mut(&mut self) -> &mut IndexFile {
        &mut self.file
    }

    pub(crate) fn into_file(self) -> IndexFile {
        self.file
    }

    /// Shrinks the file to its valid entries.
    pub fn trim_to_valid_size(&mut self) -> Result<()> {
        self.file.trim_to_valid_size()
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_dir::TestDir;

    #[test]
    fn monotonic_append_and_lookup() {
        let dir = TestDir::new("time_index");
        let path = dir.path().join("0.timeindex");
        let mut idx = TimeIndex::open(&path, 50, 12 * 10 + 7).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 120);
        assert_eq!(
            idx.lookup(1000),
            TimestampOffset {
                timestamp: -1,
                offset: 50
            }
        );
        assert!(
            !idx.maybe_append(-1, 50, false).unwrap(),
            "no timestamp, no entry"
        );
        assert!(idx.maybe_append(100, 55, false).unwrap());
        assert!(
            !idx.maybe_append(100, 56, false).unwrap(),
            "equal timestamp is skipped"
        );
        assert!(
            !idx.maybe_append(90, 57, false).unwrap(),
            "smaller timestamp is skipped"
        );
        assert!(
            !idx.maybe_append(110, 54, false).unwrap(),
            "offsets never decrease"
        );
        assert!(idx.maybe_append(200, 60, false).unwrap());
        assert!(idx.maybe_append(300, 60, false).unwrap());
        assert_eq!(idx.entries(), 3);
        assert_eq!(idx.lookup(99).offset, 50);
        assert_eq!(
            idx.lookup(100),
            TimestampOffset {
                timestamp: 100,
                offset: 55
            }
        );
        assert_eq!(
            idx.lookup(250),
            TimestampOffset {
                timestamp: 200,
                offset: 60
            }
        );
        assert_eq!(idx.lookup(i64::MAX).timestamp, 300);
        idx.truncate_to(60);
        assert_eq!(idx.entries(), 1);
        assert_eq!(idx.last_entry().timestamp, 100);
    }

    #[test]
    fn reserves_final_slot() {
        let dir = TestDir::new("time_index_full");
        let path = dir.path().join("0.timeindex");
        let mut idx = TimeIndex::open(&path, 0, 36).unwrap();
        assert!(idx.maybe_append(1, 1, false).unwrap());
        assert!(idx.maybe_append(2, 2, false).unwrap());
        assert!(idx.is_full());
        assert!(!idx.maybe_append(3, 3, false).unwrap());
        assert!(
            idx.maybe_append(3, 3, true).unwrap(),
            "final entry uses the reserved slot"
        );
        assert!(
            !idx.maybe_append(4, 4, true).unwrap(),
            "never beyond max_index_size"
        );
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 36);
    }

    #[test]
    fn single_zero_entry_survives_trim() {
        let dir = TestDir::new("time_index_zero");
        let path = dir.path().join("0.timeindex");
        let mut idx = TimeIndex::open(&path, 0, 120).unwrap();
        assert!(idx.maybe_append(0, 0, true).unwrap());
        idx.trim_to_valid_size().unwrap();
        drop(idx);
        let idx = TimeIndex::open(&path, 0, 120).unwrap();
        assert_eq!(idx.entries(), 1);
        assert_eq!(
            idx.last_entry(),
            TimestampOffset {
                timestamp: 0,
                offset: 0
            }
        );
    }
}
