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
//! The mapping itself is lazy, as Kafka's `LazyIndex` is: [`release`](IndexFile::release) drops
//! it (the entry count and file length stay known) and [`ensure_mapped`](IndexFile::ensure_mapped)
//! maps the file again before entries are read; appends map it themselves. A segment keeps its
//! indexes unmapped from the moment it is opened until they are used, and again from the moment
//! it becomes inactive, so a broker holding many segments holds few mappings (each is a kernel VMA,
//! bounded by `vm.max_map_count`, and the pages it touched).
//!
//! The number of valid entries of a loaded file is the position after its last non-zero entry
//! (found by binary search: the valid entries form a prefix and removed entries are zeroed).
//! Only the very first entry can legitimately be all zero (a time-index entry `(0, base)`); a
//! trimmed file of exactly one entry is therefore taken as one entry.
//!
//! Two choices make an index cost the same whether a broker holds one partition or ten thousand:
//! * The mapping is advised `MADV_RANDOM`. Without it, the first touch of a page of a sparse
//!   preallocated file faults in a whole read-ahead window of zeroed pages (the block device's
//!   `read_ahead_kb`: 8 MiB on the machines this was measured on), costing milliseconds and
//!   megabytes of page cache per index; index accesses are binary searches and appends, never
//!   sequential reads, so read-around only ever wastes work.
//! * No file descriptor is held: as in Kafka, the file is opened to map or resize it and closed
//!   again, because a mapping stays valid without its descriptor. A segment then needs at most
//!   one descriptor (its `.log`, held only while the cache of open `.log` files keeps it:
//!   `open_files.rs`), not three. fsync opens the file by path: it writes back pages dirtied
//!   through any mapping of the file.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use memmap2::{Advice, MmapMut, MmapOptions};

use crate::errors::{IoContext, Result};
use crate::open_files::open_reclaiming;

/// A preallocated, memory-mapped file of fixed-size entries.
pub(crate) struct IndexFile {
    path: PathBuf,
    /// Maps the whole file; `None` while the file is empty or the mapping is released.
    mmap: Option<MmapMut>,
    /// The file's length, mapped or not.
    len: usize,
    entry_size: usize,
    entries: usize,
    /// Capacity allowed by `max_index_size`.
    max_entries: usize,
}

impl IndexFile {
    /// Opens `path`, creating and preallocating it if it does not exist.
    pub(crate) fn open(path: &Path, entry_size: usize, max_index_size: usize) -> Result<IndexFile> {
        let existed = path.exists();
        let file = open_rw(path)?;
        let max_entries = max_index_size / entry_size;
        let mut index = IndexFile {
            path: path.to_path_buf(),
            mmap: None,
            len: 0,
            entry_size,
            entries: 0,
            max_entries,
        };
        if !existed {
            index.resize(&file, max_entries * entry_size)?;
        } else {
            let len = file.metadata().at(path, "stat")?.len() as usize;
            let whole = len - len % entry_size;
            if whole != len {
                // A torn or foreign file: ignore the partial trailing entry.
                index.resize(&file, whole)?;
            } else {
                index.map(&file, len)?;
            }
            index.entries = index.count_valid_entries();
        }
        Ok(index)
    }

    fn count_valid_entries(&self) -> usize {
        let slots = self.len / self.entry_size;
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

    /// Maps the first `len` bytes of `file` (the whole file), advised for random access.
    fn map(&mut self, file: &File, len: usize) -> Result<()> {
        self.mmap = None;
        self.len = len;
        if len > 0 {
            // SAFETY: the mapping is shared with the file; we never shrink the file while this
            // mapping exists (it is dropped first), so no access can fault. Other processes
            // modifying the index concurrently are outside this broker's contract.
            let mmap =
                unsafe { MmapOptions::new().len(len).map_mut(file) }.at(&self.path, "mmap")?;
            mmap.advise(Advice::Random).at(&self.path, "madvise")?;
            self.mmap = Some(mmap);
        }
        Ok(())
    }

    /// Sets the file's length to `len` and maps it again.
    fn resize(&mut self, file: &File, len: usize) -> Result<()> {
        self.mmap = None;
        file.set_len(len as u64).at(&self.path, "resize")?;
        self.map(file, len)
    }

    /// Opens the file for one resize.
    fn set_file_len(&mut self, len: usize) -> Result<()> {
        let file = open_rw(&self.path)?;
        self.resize(&file, len)
    }

    /// Maps the file again if its mapping was released.
    pub(crate) fn ensure_mapped(&mut self) -> Result<()> {
        if self.mmap.is_none() && self.len > 0 {
            let file = open_rw(&self.path)?;
            self.map(&file, self.len)?;
        }
        Ok(())
    }

    /// Drops the mapping; the entries stay known and [`ensure_mapped`](Self::ensure_mapped)
    /// maps the file again.
    pub(crate) fn release(&mut self) {
        self.mmap = None;
    }

    /// Whether the file is mapped (it was used since it was opened or released).
    pub(crate) fn is_mapped(&self) -> bool {
        self.mmap.is_some()
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

    /// Raw bytes of entry `slot` (must be < the file's slots). The file must be mapped: the
    /// segment maps its indexes before any operation that reads them.
    #[inline]
    pub(crate) fn entry(&self, slot: usize) -> &[u8] {
        let start = slot * self.entry_size;
        let mmap = self
            .mmap
            .as_ref()
            .expect("index entry read while the index is not mapped");
        &mmap[start..start + self.entry_size]
    }

    /// Appends an entry if capacity allows (`slot < max_entries`), growing the file to its
    /// preallocated size when needed. Returns whether it was appended.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<bool> {
        debug_assert_eq!(bytes.len(), self.entry_size);
        if self.entries >= self.max_entries {
            return Ok(false);
        }
        let end = (self.entries + 1) * self.entry_size;
        if end > self.len {
            self.set_file_len(self.max_entries * self.entry_size)?;
        } else {
            self.ensure_mapped()?;
        }
        let start = self.entries * self.entry_size;
        match self.mmap.as_mut() {
            Some(m) if m.len() >= end => m[start..end].copy_from_slice(bytes),
            _ => return Ok(false),
        }
        self.entries += 1;
        Ok(true)
    }

    /// Grows a trimmed file back to its preallocated size and maps it, ready for appends.
    pub(crate) fn ensure_preallocated(&mut self) -> Result<()> {
        let full = self.max_entries * self.entry_size;
        if self.len < full {
            self.set_file_len(full)
        } else {
            self.ensure_mapped()
        }
    }

    /// Keeps the first `n` entries, zeroing the removed ones so a later load cannot pick them up
    /// (the file must be mapped when entries are removed).
    pub(crate) fn truncate_entries(&mut self, n: usize) {
        if n >= self.entries {
            return;
        }
        let (from, to) = (n * self.entry_size, self.entries * self.entry_size);
        let mmap = self
            .mmap
            .as_mut()
            .expect("index truncated while the index is not mapped");
        mmap[from..to].fill(0);
        self.entries = n;
    }

    /// Shrinks the file to exactly its valid entries.
    pub(crate) fn trim_to_valid_size(&mut self) -> Result<()> {
        let len = self.entries * self.entry_size;
        if len != self.len {
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

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Records that the file was renamed to `path` (the index keeps no descriptor, and a
    /// mapping survives a rename).
    pub(crate) fn set_path(&mut self, path: PathBuf) {
        self.path = path;
    }

    /// Unmaps the file.
    pub(crate) fn close(self) {
        drop(self.mmap);
    }
}

fn open_rw(path: &Path) -> Result<File> {
    open_reclaiming(|| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
    })
    .at(path, "open")
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::test_dir::{vm_flags_of_mapping, TestDir};

    fn descriptor_open_on(path: &Path) -> bool {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
            .any(|target| target == path)
    }

    #[test]
    fn first_entry_of_a_preallocated_index_is_written_through_a_random_access_mapping() {
        let dir = TestDir::new("index_file_first_entry");
        let path = dir.path().join("00000000000000000000.index");
        let mut index = IndexFile::open(&path, 8, 10 << 20).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 10 << 20);
        // Sparse: preallocation wrote nothing.
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&path).unwrap().blocks(), 0);
        let flags = vm_flags_of_mapping(&path).expect("the index is mapped");
        assert!(
            flags.split_whitespace().any(|f| f == "rr"),
            "mapping not advised MADV_RANDOM: {flags}"
        );
        assert!(!descriptor_open_on(&path), "the index keeps no descriptor");

        assert!(index.push(&[0, 0, 0, 7, 0, 0, 0, 9]).unwrap());
        assert_eq!(index.entries(), 1);
        index.trim_to_valid_size().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 8);
        index.close();

        let mut reopened = IndexFile::open(&path, 8, 10 << 20).unwrap();
        assert_eq!(reopened.entries(), 1);
        assert_eq!(reopened.entry(0), &[0, 0, 0, 7, 0, 0, 0, 9]);
        // Growing back after the trim keeps the entry and the advice.
        assert!(reopened.push(&[0, 0, 0, 8, 0, 0, 0, 10]).unwrap());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 10 << 20);
        assert_eq!(reopened.entry(0), &[0, 0, 0, 7, 0, 0, 0, 9]);
        assert!(vm_flags_of_mapping(&path)
            .unwrap()
            .split_whitespace()
            .any(|f| f == "rr"));
        assert!(!descriptor_open_on(&path));
    }
}
