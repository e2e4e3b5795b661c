//! The sparse offset index (`.index`): maps offsets to byte positions in the segment's `.log`.
//!
//! Each 8-byte big-endian entry is `(relativeOffset i32, position i32)` where `relativeOffset` is
//! the last offset of a batch minus the segment's base offset, and `position` is where that batch
//! starts. Entries are strictly increasing in both fields. A lookup returns the greatest entry
//! whose offset is <= the target, or `(base_offset, 0)` when there is none; scanning forward from
//! that position finds the batch holding the target.

use std::path::Path;

use crate::batch::get_i32;
use crate::errors::Result;
use crate::index_file::IndexFile;

/// Size of one `.index` entry.
pub const OFFSET_INDEX_ENTRY_SIZE: usize = 8;

/// An offset index entry, with the offset made absolute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetPosition {
    pub offset: i64,
    pub position: u32,
}

/// The `.index` file of one segment.
pub struct OffsetIndex {
    file: IndexFile,
    base_offset: i64,
}

impl OffsetIndex {
    /// Opens or creates the index at `path` (see `index_file.rs` for the sizing rules).
    pub fn open(path: &Path, base_offset: i64, max_index_size: usize) -> Result<OffsetIndex> {
        Ok(OffsetIndex {
            file: IndexFile::open(path, OFFSET_INDEX_ENTRY_SIZE, max_index_size)?,
            base_offset,
        })
    }

    /// Number of valid entries.
    pub fn entries(&self) -> usize {
        self.file.entries()
    }

    /// True when no further entry fits within `max_index_size`.
    pub fn is_full(&self) -> bool {
        self.file.entries() >= self.file.max_entries()
    }

    /// Entry `slot` (< `entries()`).
    pub fn entry(&self, slot: usize) -> OffsetPosition {
        let e = self.file.entry(slot);
        OffsetPosition {
            offset: self.base_offset + get_i32(e, 0) as i64,
            position: get_i32(e, 4) as u32,
        }
    }

    /// The last entry, or `(base_offset, 0)` when empty.
    pub fn last_entry(&self) -> OffsetPosition {
        match self.entries() {
            0 => self.empty_entry(),
            n => self.entry(n - 1),
        }
    }

    fn empty_entry(&self) -> OffsetPosition {
        OffsetPosition {
            offset: self.base_offset,
            position: 0,
        }
    }

    /// Appends `(offset, position)` if it extends the index: the offset must be greater than the
    /// last entry's and within `[base, base + i32::MAX]`, and the index must not be full.
    /// Returns whether an entry was written.
    pub fn append(&mut self, offset: i64, position: u32) -> Result<bool> {
        let relative = offset - self.base_offset;
        if !(0..=i32::MAX as i64).contains(&relative) || position > i32::MAX as u32 {
            return Ok(false);
        }
        if self.entries() > 0 {
            let last = self.last_entry();
            if offset <= last.offset || position <= last.position {
                return Ok(false);
            }
        }
        let mut bytes = [0u8; OFFSET_INDEX_ENTRY_SIZE];
        bytes[..4].copy_from_slice(&(relative as i32).to_be_bytes());
        bytes[4..].copy_from_slice(&(position as i32).to_be_bytes());
        self.file.push(&bytes)
    }

    /// Number of leading entries whose offset is <= `target` (binary search).
    fn count_le(&self, target: i64) -> usize {
        let (mut lo, mut hi) = (0usize, self.entries());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.entry(mid).offset <= target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Greatest entry with offset <= `target`, or `(base_offset, 0)`.
    pub fn lookup(&self, target: i64) -> OffsetPosition {
        match self.count_le(target) {
            0 => self.empty_entry(),
            n => self.entry(n - 1),
        }
    }

    /// Greatest entry with position <= `position` and offset < `below_offset`, if any. Both
    /// columns grow with the slot, so each bound is one binary search.
    pub fn floor_by_position(&self, position: u64, below_offset: i64) -> Option<OffsetPosition> {
        let (mut lo, mut hi) = (0usize, self.entries());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if (self.entry(mid).position as u64) <= position {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let slots = lo.min(self.count_le(below_offset.saturating_sub(1)));
        slots.checked_sub(1).map(|slot| self.entry(slot))
    }

    /// Removes every entry whose offset is >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) {
        let keep = self.count_le(offset.saturating_sub(1));
        self.file.truncate_entries(keep);
    }

    /// Keeps only the first `n` entries.
    pub fn truncate_entries(&mut self, n: usize) {
        self.file.truncate_entries(n);
    }

    /// Removes every entry.
    pub fn reset(&mut self) {
        self.file.truncate_entries(0);
    }

    /// Drops trailing entries that point at or beyond `log_size` or break monotonicity (an index
    /// flushed ahead of its log before a crash).
    pub fn sanitize(&mut self, log_size: u64) {
        let mut n = self.entries();
        while n > 0 {
            let e = self.entry(n - 1);
            let ordered = n == 1 || {
                let p = self.entry(n - 2);
                p.offset < e.offset && p.position < e.position
            };
            if (e.position as u64) < log_size && ordered && e.offset >= self.base_offset {
                break;
            }
            n -= 1;
        }
        self.file.truncate_entries(n);
    }

    #[cfg_attr(target_os = "linux", allow(dead_code))]
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
    fn append_lookup_truncate() {
        let dir = TestDir::new("offset_index");
        let path = dir.path().join("00000000000000000100.index");
        let mut idx = OffsetIndex::open(&path, 100, 80).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 80, "preallocated");
        assert_eq!(
            idx.lookup(500),
            OffsetPosition {
                offset: 100,
                position: 0
            }
        );
        for i in 1..=5u32 {
            assert!(idx.append(100 + i as i64 * 10, i * 1000).unwrap());
        }
        // Non-increasing entries are refused.
        assert!(!idx.append(150, 9000).unwrap());
        assert!(!idx.append(160, 5000).unwrap());
        assert_eq!(idx.entries(), 5);
        assert_eq!(idx.lookup(99).position, 0);
        assert_eq!(
            idx.lookup(110),
            OffsetPosition {
                offset: 110,
                position: 1000
            }
        );
        assert_eq!(
            idx.lookup(129),
            OffsetPosition {
                offset: 120,
                position: 2000
            }
        );
        assert_eq!(
            idx.lookup(10_000),
            OffsetPosition {
                offset: 150,
                position: 5000
            }
        );
        idx.truncate_to(130);
        assert_eq!(idx.entries(), 2);
        assert_eq!(idx.last_entry().offset, 120);
        idx.truncate_to(121);
        assert_eq!(idx.entries(), 2);
    }

    #[test]
    fn floor_by_position_bounds_both_columns() {
        let dir = TestDir::new("offset_index_floor");
        let mut idx = OffsetIndex::open(&dir.path().join("0.index"), 100, 800).unwrap();
        assert_eq!(idx.floor_by_position(10_000, i64::MAX), None, "empty index");
        for i in 1..=5u32 {
            idx.append(100 + i as i64 * 10, i * 1000).unwrap();
        }
        let at = |offset, position| Some(OffsetPosition { offset, position });
        assert_eq!(idx.floor_by_position(999, i64::MAX), None);
        assert_eq!(idx.floor_by_position(1000, i64::MAX), at(110, 1000));
        assert_eq!(idx.floor_by_position(3500, i64::MAX), at(130, 3000));
        assert_eq!(idx.floor_by_position(99_999, i64::MAX), at(150, 5000));
        // The offset bound is exclusive and wins when it is the tighter one.
        assert_eq!(idx.floor_by_position(99_999, 130), at(120, 2000));
        assert_eq!(idx.floor_by_position(99_999, 131), at(130, 3000));
        assert_eq!(idx.floor_by_position(99_999, 110), None);
    }

    #[test]
    fn full_and_reload() {
        let dir = TestDir::new("offset_index_full");
        let path = dir.path().join("0.index");
        {
            let mut idx = OffsetIndex::open(&path, 0, 8 * 3 + 5).unwrap();
            assert_eq!(std::fs::metadata(&path).unwrap().len(), 24);
            for i in 1..=3 {
                assert!(idx.append(i, i as u32 * 10).unwrap());
            }
            assert!(idx.is_full());
            assert!(!idx.append(4, 40).unwrap());
        }
        // Untrimmed full file: all three entries are found again.
        let mut idx = OffsetIndex::open(&path, 0, 24).unwrap();
        assert_eq!(idx.entries(), 3);
        idx.truncate_entries(1);
        drop(idx);
        // Removed entries were zeroed: the reload sees one entry.
        let mut idx = OffsetIndex::open(&path, 0, 24).unwrap();
        assert_eq!(idx.entries(), 1);
        idx.trim_to_valid_size().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 8);
        // A trimmed index grows back when appended to.
        assert!(idx.append(2, 20).unwrap());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 24);
        idx.sanitize(15);
        assert_eq!(
            idx.entries(),
            1,
            "entry at position 20 is beyond a 15-byte log"
        );
    }
}
