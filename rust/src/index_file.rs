//! The memory-mapped, preallocated, fixed-entry-size file underneath both sparse indexes
//! (`.index` and `.timeindex`).
//!
//! Lifecycle, as in Kafka's `AbstractIndex`:
//! * a newly created file is preallocated to `max_index_size` rounded down to a whole number of
//!   entries and memory-mapped;
//! * an existing file is mapped at its current length; if it was trimmed (a segment that was
//!   closed cleanly) it grows back to the preallocated size the first time an entry is appended;
//! * `trim_to_valid_size` shrinks the file to exactly its entries when the segment becomes
//!   inactive or is closed.
//!
//! The number of valid entries of a loaded file is the position after its last non-zero entry
//! (found by binary search: the valid entries form a prefix and removed entries are zeroed).
//! Only the very first entry can legitimately be all zero (a time-index entry `(0, base)`); a
//! trimmed file of exactly one entry is therefore taken as one entry.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::{MmapMut, MmapOptions};

use crate::errors::{IoContext, Result};

/// A preallocated, memory-mapped file of fixed-size entries.
pub(crate) struct IndexFile {
    path: PathBuf,
    file: Arc<File>,
    /// Maps the whole file; `None` while the file is empty.
    mmap: Option<MmapMut>,
    entry_size: usize,
    entries: usize,
    /// Capacity allowed by `max_index_size`.
    max_entries: usize,
}

impl IndexFile {
    /// Opens `path`, creating and preallocating it if it does not exist.
    pub(crate) fn open(path: &Path, entry_size: usize, max_index_size: usize) -> Result<IndexFile> {
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .at(path, "open")?;
        let max_entries = max_index_size / entry_size;
        let mut index = IndexFile {
            path: path.to_path_buf(),
            file: Arc::new(file),
            mmap: None,
            entry_size,
            entries: 0,
            max_entries,
        };
        if !existed {
            index.set_file_len(max_entries * entry_size)?;
        } else {
            let len = index.file.metadata().at(path, "stat")?.len() as usize;
            let whole = len - len % entry_size;
            if whole != len {
                // A torn or foreign file: ignore the partial trailing entry.
                index.set_file_len(whole)?;
            } else {
                index.map()?;
            }
            index.entries = index.count_valid_entries();
        }
        Ok(index)
    }

    fn count_valid_entries(&self) -> usize {
        let slots = self.mapped_len() / self.entry_size;
        if slots == 0 {
            return 0;
        }
        if slots == 1 {
            return 1;
        }
        if !self.is_zero(slots - 1) {
            return slots;
        }
        // Invariant: entries are a prefix, zero after. Find the first zero slot in 1..slots.
        let (mut lo, mut hi) = (1usize, slots - 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.is_zero(mid) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        if lo == 1 && self.is_zero(0) {
            0
        } else {
            lo
        }
    }

    fn is_zero(&self, slot: usize) -> bool {
        self.entry(slot).iter().all(|&b| b == 0)
    }

    fn mapped_len(&self) -> usize {
        self.mmap.as_ref().map_or(0, |m| m.len())
    }

    fn map(&mut self) -> Result<()> {
        self.mmap = None;
        let len = self.file.metadata().at(&self.path, "stat")?.len() as usize;
        if len > 0 {
            // SAFETY: the mapping is shared with the file; we never shrink the file while this
            // mapping exists (it is dropped first), so no access can fault. Other processes
            // modifying the index concurrently are outside this broker's contract.
            let mmap = unsafe { MmapOptions::new().len(len).map_mut(&*self.file) }
                .at(&self.path, "mmap")?;
            self.mmap = Some(mmap);
        }
        Ok(())
    }

    fn set_file_len(&mut self, len: usize) -> Result<()> {
        self.mmap = None;
        self.file.set_len(len as u64).at(&self.path, "resize")?;
        self.map()
    }

    /// Number of valid entries.
    #[inline]
    pub(crate) fn entries(&self) -> usize {
        self.entries
    }

    /// Capacity derived from `max_index_size`.
    #[inline]
    pub(crate) fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// Raw bytes of entry `slot` (must be < mapped slots).
    #[inline]
    pub(crate) fn entry(&self, slot: usize) -> &[u8] {
        let start = slot * self.entry_size;
        match &self.mmap {
            Some(m) => &m[start..start + self.entry_size],
            None => &[],
        }
    }

    /// Appends an entry if capacity allows (`slot < max_entries`), growing the file to its
    /// preallocated size when needed. Returns whether it was appended.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<bool> {
        debug_assert_eq!(bytes.len(), self.entry_size);
        if self.entries >= self.max_entries {
            return Ok(false);
        }
        let end = (self.entries + 1) * self.entry_size;
        if end > self.mapped_len() {
            self.set_file_len(self.max_entries * self.entry_size)?;
        }
        let start = self.entries * self.entry_size;
        match self.mmap.as_mut() {
            Some(m) if m.len() >= end => m[start..end].copy_from_slice(bytes),
            _ => return Ok(false),
        }
        self.entries += 1;
        Ok(true)
    }

    /// Grows a trimmed file back to its preallocated size (no-op if it already is that large).
    pub(crate) fn ensure_preallocated(&mut self) -> Result<()> {
        let full = self.max_entries * self.entry_size;
        if self.mapped_len() < full {
            self.set_file_len(full)?;
        }
        Ok(())
    }

    /// Keeps the first `n` entries, zeroing the removed ones so a later load cannot pick them up.
    pub(crate) fn truncate_entries(&mut self, n: usize) {
        if n >= self.entries {
            return;
        }
        let (from, to) = (n * self.entry_size, self.entries * self.entry_size);
        if let Some(m) = self.mmap.as_mut() {
            m[from..to].fill(0);
        }
        self.entries = n;
    }

    /// Shrinks the file to exactly its valid entries.
    pub(crate) fn trim_to_valid_size(&mut self) -> Result<()> {
        let len = self.entries * self.entry_size;
        if len != self.mapped_len() {
            self.set_file_len(len)?;
        }
        Ok(())
    }

    /// `msync` of the mapping (used where fsync on the descriptor does not cover mappings).
    #[cfg_attr(target_os = "linux", allow(dead_code))]
    pub(crate) fn msync(&self) -> Result<()> {
        if let Some(m) = &self.mmap {
            m.flush().at(&self.path, "msync")?;
        }
        Ok(())
    }

    /// A handle on the file for fsync outside the segment lock.
    pub(crate) fn file(&self) -> Arc<File> {
        Arc::clone(&self.file)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Unmaps the file and closes the handle.
    pub(crate) fn close(self) {
        drop(self.mmap);
        drop(self.file);
    }
}
