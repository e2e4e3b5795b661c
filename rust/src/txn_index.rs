//! The aborted-transaction index (`.txnindex`) of one segment, in the format of Kafka's
//! `TransactionIndex` / `AbortedTxn`.
//!
//! Each entry describes a transaction whose ABORT marker was written in the segment: 34 bytes,
//! big-endian,
//!
//! | pos | field            | type |
//! |-----|------------------|------|
//! |  0  | version (= 0)    | i16  |
//! |  2  | producerId       | i64  |
//! | 10  | firstOffset      | i64  |
//! | 18  | lastOffset       | i64  |
//! | 26  | lastStableOffset | i64  |
//!
//! in the order the markers were written, so last offsets strictly increase. A fetch at
//! read_committed collects the entries overlapping its range ([`TxnIndex::collect`], Kafka's
//! `collectAbortedTxns`) and sends them as the response's `AbortedTransactions`.
//!
//! As in Kafka the file is created lazily, by the first append: a segment without aborted
//! transactions has none. Truncation and reset shrink the file and leave it in place. Entries
//! are appended with plain writes (the segment's flush fsyncs them). Unlike Kafka no descriptor
//! is held (the file is opened per operation, as the sparse indexes are): aborted transactions
//! are rare, and a broker holding many segments should not hold a descriptor for each index.
//! Only the entry count and the last entry's last offset are kept in memory.
//!
//! An existing file is checked when it is opened (Kafka's `sanityCheck`, plus the checks of its
//! reader): a length that is not a whole number of entries, an entry whose version is not 0,
//! last offsets that do not increase or a last offset below the segment's base offset mark the
//! index damaged. A damaged index is never served or appended to; the caller recovers the
//! segment, which [`reset`](TxnIndex::reset)s the index and appends the aborted transactions
//! again.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::batch::{get_i16, get_i64};
use crate::errors::{IoContext, Result, StorageError};
use crate::open_files::open_reclaiming;

/// Size of one entry (Kafka's `AbortedTxn.TOTAL_SIZE`).
pub const ABORTED_TXN_SIZE: usize = 34;
/// The only entry version (Kafka's `AbortedTxn.CURRENT_VERSION`).
pub const ABORTED_TXN_VERSION: i16 = 0;
/// Entries read per `read` call when scanning the file.
const READ_CHUNK_ENTRIES: usize = 1024;

/// One entry of the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    /// Offset of the transaction's first record.
    pub first_offset: i64,
    /// Offset of the ABORT marker.
    pub last_offset: i64,
    /// The partition's last stable offset when the transaction was aborted.
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    fn encode(&self) -> [u8; ABORTED_TXN_SIZE] {
        let mut buf = [0u8; ABORTED_TXN_SIZE];
        buf[0..2].copy_from_slice(&ABORTED_TXN_VERSION.to_be_bytes());
        buf[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        buf[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        buf[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        buf[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        buf
    }

    /// `(version, entry)` of the 34 bytes at the start of `buf`.
    fn decode(buf: &[u8]) -> (i16, AbortedTxn) {
        let txn = AbortedTxn {
            producer_id: get_i64(buf, 2),
            first_offset: get_i64(buf, 10),
            last_offset: get_i64(buf, 18),
            last_stable_offset: get_i64(buf, 26),
        };
        (get_i16(buf, 0), txn)
    }
}

/// The `.txnindex` of one segment (see the module docs).
pub struct TxnIndex {
    path: PathBuf,
    base_offset: i64,
    /// Whether the file exists (created by the first append).
    exists: bool,
    /// Whole entries in the file.
    entries: u64,
    /// `lastOffset` of the last entry; `None` when there is none.
    last_offset: Option<i64>,
    /// Why the file cannot be used, when it cannot.
    damage: Option<String>,
}

/// What a full read of the file found.
struct FileState {
    entries: u64,
    last_offset: Option<i64>,
    damage: Option<String>,
}

impl TxnIndex {
    /// The index at `path` of the segment starting at `base_offset`: an existing file is read
    /// and checked (see [`is_damaged`](Self::is_damaged)); a missing one is not created.
    pub fn open(path: &Path, base_offset: i64) -> Result<TxnIndex> {
        let mut index = TxnIndex {
            path: path.to_path_buf(),
            base_offset,
            exists: false,
            entries: 0,
            last_offset: None,
            damage: None,
        };
        index.reload()?;
        Ok(index)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records that the file (if it exists) was renamed to `path`.
    pub(crate) fn set_path(&mut self, path: PathBuf) {
        self.path = path;
    }

    /// Whether the file exists.
    pub fn exists(&self) -> bool {
        self.exists
    }

    /// Entries in the file.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// True when the file was found damaged (a partial entry, an entry of another version, last
    /// offsets that do not increase, or one below the segment's base offset); cleared by
    /// [`reset`](Self::reset).
    pub fn is_damaged(&self) -> bool {
        self.damage.is_some()
    }

    /// Appends `txn` (no fsync), creating the file if needed. Its last offset must be greater
    /// than the previous entry's (Kafka: "The last offset of appended transactions must
    /// increase sequentially").
    pub fn append(&mut self, txn: AbortedTxn) -> Result<()> {
        self.check_usable()?;
        if let Some(last) = self.last_offset {
            if last >= txn.last_offset {
                return Err(StorageError::invalid(format!(
                    "The last offset of appended transactions must increase sequentially, but {} \
                     is not greater than current last offset {last} of index {}",
                    txn.last_offset,
                    self.path.display()
                )));
            }
        }
        let file = open_reclaiming(|| {
            OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&self.path)
        })
        .at(&self.path, "open")?;
        self.exists = true;
        let position = self.entries * ABORTED_TXN_SIZE as u64;
        if let Err(e) = file.write_all_at(&txn.encode(), position) {
            // Leave no partial entry behind.
            let _ = file.set_len(position);
            return Err(e).at(&self.path, "write");
        }
        self.entries += 1;
        self.last_offset = Some(txn.last_offset);
        Ok(())
    }

    /// Kafka's `collectAbortedTxns`: every entry with `lastOffset >= fetch_offset` and
    /// `firstOffset < upper_bound_offset`, in file order, and whether the search is complete:
    /// true as soon as an entry's `lastStableOffset >= upper_bound_offset` (the scan stops there,
    /// that entry included if it qualified), so the caller need not look at later segments.
    pub fn collect(
        &self,
        fetch_offset: i64,
        upper_bound_offset: i64,
    ) -> Result<(Vec<AbortedTxn>, bool)> {
        self.check_usable()?;
        let mut found = Vec::new();
        let mut complete = false;
        self.visit(self.entries, |_, txn| {
            if txn.last_offset >= fetch_offset && txn.first_offset < upper_bound_offset {
                found.push(txn);
            }
            complete = txn.last_stable_offset >= upper_bound_offset;
            !complete
        })?;
        Ok((found, complete))
    }

    /// Every entry, in file order.
    pub fn all(&self) -> Result<Vec<AbortedTxn>> {
        self.check_usable()?;
        let mut all = Vec::with_capacity(self.entries as usize);
        self.visit(self.entries, |_, txn| {
            all.push(txn);
            true
        })?;
        Ok(all)
    }

    /// Kafka's `truncateTo`: removes the first entry with `lastOffset >= offset` and every entry
    /// after it. (On a damaged file the whole entries before the damage are searched, and the
    /// file is checked again afterwards.)
    pub fn truncate_to(&mut self, offset: i64) -> Result<()> {
        if !self.exists {
            return Ok(());
        }
        let whole_entries = self.file_len()? / ABORTED_TXN_SIZE as u64;
        let mut cut = None;
        self.visit(whole_entries, |i, txn| {
            if txn.last_offset >= offset {
                cut = Some(i);
            }
            cut.is_none()
        })?;
        if let Some(i) = cut {
            self.set_len(i * ABORTED_TXN_SIZE as u64)?;
            self.reload()?;
        }
        Ok(())
    }

    /// Removes every entry (the file stays, empty) and clears the damage flag.
    pub fn reset(&mut self) -> Result<()> {
        if self.exists {
            self.set_len(0)?;
        }
        self.entries = 0;
        self.last_offset = None;
        self.damage = None;
        Ok(())
    }

    fn check_usable(&self) -> Result<()> {
        match &self.damage {
            Some(reason) => Err(StorageError::invalid(format!(
                "transaction index {} is damaged ({reason}); recover the segment first",
                self.path.display()
            ))),
            None => Ok(()),
        }
    }

    fn file_len(&self) -> Result<u64> {
        match std::fs::metadata(&self.path) {
            Ok(m) => Ok(m.len()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(e).at(&self.path, "stat"),
        }
    }

    fn set_len(&mut self, len: u64) -> Result<()> {
        match open_reclaiming(|| OpenOptions::new().write(true).open(&self.path)) {
            Ok(file) => file.set_len(len).at(&self.path, "truncate"),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.exists = false;
                Ok(())
            }
            Err(e) => Err(e).at(&self.path, "open"),
        }
    }

    /// Reads the whole file and sets the in-memory state from it.
    fn reload(&mut self) -> Result<()> {
        let state = self.read_state()?;
        self.entries = state.entries;
        self.last_offset = state.last_offset;
        self.damage = state.damage;
        Ok(())
    }

    fn read_state(&mut self) -> Result<FileState> {
        let mut state = FileState {
            entries: 0,
            last_offset: None,
            damage: None,
        };
        let len = self.file_len()?;
        self.exists = self.path.exists();
        if !self.exists {
            return Ok(state);
        }
        if len % ABORTED_TXN_SIZE as u64 != 0 {
            state.damage = Some(format!(
                "its length {len} is not a multiple of {ABORTED_TXN_SIZE}"
            ));
        }
        let base_offset = self.base_offset;
        let mut damage = None;
        let mut last = None;
        self.visit_versions(len / ABORTED_TXN_SIZE as u64, |i, version, txn| {
            if version != ABORTED_TXN_VERSION {
                damage = Some(format!("entry {i} has version {version}"));
            } else if last.is_some_and(|l| txn.last_offset <= l) {
                damage = Some(format!(
                    "the last offset {} of entry {i} does not increase",
                    txn.last_offset
                ));
            } else if txn.last_offset < base_offset {
                damage = Some(format!(
                    "the last offset {} of entry {i} is below the segment's base offset \
                     {base_offset}",
                    txn.last_offset
                ));
            }
            last = Some(txn.last_offset);
            damage.is_none()
        })?;
        state.entries = len / ABORTED_TXN_SIZE as u64;
        state.last_offset = last;
        state.damage = state.damage.or(damage);
        Ok(state)
    }

    /// Calls `visit(index, entry)` for the first `count` entries until it returns false.
    fn visit(&self, count: u64, mut visit: impl FnMut(u64, AbortedTxn) -> bool) -> Result<()> {
        self.visit_versions(count, |i, _, txn| visit(i, txn))
    }

    /// Like [`visit`](Self::visit), with each entry's version. A missing file has no entries.
    fn visit_versions(
        &self,
        count: u64,
        mut visit: impl FnMut(u64, i16, AbortedTxn) -> bool,
    ) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let mut file = match open_reclaiming(|| File::open(&self.path)) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e).at(&self.path, "open"),
        };
        let mut buf = vec![0u8; ABORTED_TXN_SIZE * READ_CHUNK_ENTRIES.min(count as usize)];
        let mut index = 0u64;
        while index < count {
            let chunk = ((count - index) as usize).min(READ_CHUNK_ENTRIES);
            let bytes = &mut buf[..chunk * ABORTED_TXN_SIZE];
            match file.read_exact(bytes) {
                Ok(()) => {}
                // Shrunk meanwhile: what is left is all there is.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e).at(&self.path, "read"),
            }
            for entry in bytes.chunks_exact(ABORTED_TXN_SIZE) {
                let (version, txn) = AbortedTxn::decode(entry);
                if !visit(index, version, txn) {
                    return Ok(());
                }
                index += 1;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_dir::TestDir;

    fn txn(producer_id: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id,
            first_offset: first,
            last_offset: last,
            last_stable_offset: lso,
        }
    }

    fn open(dir: &TestDir, base: i64) -> TxnIndex {
        TxnIndex::open(&dir.path().join("0.txnindex"), base).unwrap()
    }

    #[test]
    fn exact_entry_layout() {
        let t = txn(0x0102030405060708, 10, 20, 5);
        let bytes = t.encode();
        let mut expected = vec![0u8, 0];
        for v in [0x0102030405060708i64, 10, 20, 5] {
            expected.extend_from_slice(&v.to_be_bytes());
        }
        assert_eq!(bytes.as_slice(), expected.as_slice());
        assert_eq!(AbortedTxn::decode(&bytes), (0, t));
    }

    #[test]
    fn created_lazily_appended_and_reopened() {
        let dir = TestDir::new("txn_lazy");
        let mut index = open(&dir, 0);
        assert!(!index.exists());
        assert!(!index.path().exists());
        assert_eq!(index.all().unwrap(), []);
        assert_eq!(index.collect(0, 100).unwrap(), (vec![], false));
        index.truncate_to(0).unwrap();
        index.reset().unwrap();
        assert!(!index.path().exists());

        index.append(txn(1, 0, 5, 0)).unwrap();
        index.append(txn(2, 3, 9, 0)).unwrap();
        assert!(index.exists());
        assert_eq!(std::fs::metadata(index.path()).unwrap().len(), 68);
        let err = index.append(txn(3, 8, 9, 0)).unwrap_err().to_string();
        assert!(err.contains("must increase sequentially"), "{err}");
        assert!(index.append(txn(3, 8, 7, 0)).is_err());
        assert_eq!(index.entries(), 2);

        let reopened = open(&dir, 0);
        assert!(!reopened.is_damaged());
        assert_eq!(reopened.all().unwrap(), [txn(1, 0, 5, 0), txn(2, 3, 9, 0)]);
        let mut reopened = reopened;
        assert!(reopened.append(txn(4, 9, 9, 0)).is_err());
        reopened.append(txn(4, 10, 12, 6)).unwrap();
        assert_eq!(reopened.entries(), 3);
    }

    #[test]
    fn collects_like_kafka() {
        let dir = TestDir::new("txn_collect");
        let mut index = open(&dir, 0);
        // (pid, first, last, lso)
        index.append(txn(1, 0, 10, 0)).unwrap();
        index.append(txn(2, 5, 20, 11)).unwrap();
        index.append(txn(3, 21, 30, 21)).unwrap();
        index.append(txn(4, 25, 40, 31)).unwrap();

        // Overlap: lastOffset >= fetch and firstOffset < upper bound.
        let (found, complete) = index.collect(11, 25).unwrap();
        assert_eq!(found, [txn(2, 5, 20, 11), txn(3, 21, 30, 21)]);
        // Entry 4 (lso 31 >= 25) completes the search; it does not qualify (first 25).
        assert!(complete);

        // The scan stops at the first entry whose lso reaches the bound, that entry included.
        let (found, complete) = index.collect(0, 11).unwrap();
        assert_eq!(found, [txn(1, 0, 10, 0), txn(2, 5, 20, 11)]);
        assert!(complete);

        // Nothing reaches the bound: incomplete, every overlapping entry.
        let (found, complete) = index.collect(35, 100).unwrap();
        assert_eq!(found, [txn(4, 25, 40, 31)]);
        assert!(!complete);
        let (found, complete) = index.collect(41, 100).unwrap();
        assert!(found.is_empty() && !complete);
    }

    #[test]
    fn truncates_and_resets() {
        let dir = TestDir::new("txn_truncate");
        let mut index = open(&dir, 0);
        for i in 0..5 {
            index.append(txn(i, i * 10, i * 10 + 5, 0)).unwrap();
        }
        index.truncate_to(100).unwrap();
        assert_eq!(index.entries(), 5);
        // Entries with lastOffset >= 26 go (the one ending at 25 stays).
        index.truncate_to(26).unwrap();
        assert_eq!(index.entries(), 3);
        index.truncate_to(25).unwrap();
        assert_eq!(index.entries(), 2);
        assert_eq!(std::fs::metadata(index.path()).unwrap().len(), 68);
        // The last offset is the remaining last entry's: 15 may not come again, 16 may.
        assert!(index.append(txn(9, 12, 15, 0)).is_err());
        index.append(txn(9, 12, 16, 0)).unwrap();
        index.truncate_to(0).unwrap();
        assert_eq!(index.entries(), 0);
        assert!(index.exists());
        index.append(txn(9, 0, 1, 0)).unwrap();
        index.reset().unwrap();
        assert!(index.exists());
        assert_eq!(std::fs::metadata(index.path()).unwrap().len(), 0);
        assert_eq!(index.all().unwrap(), []);
        index.append(txn(9, 0, 1, 0)).unwrap();
        assert_eq!(index.entries(), 1);
    }

    #[test]
    fn damage_is_found_refused_and_cleared_by_reset() {
        let dir = TestDir::new("txn_damage");
        let path = dir.path().join("0.txnindex");
        let good: Vec<u8> = [txn(1, 100, 105, 0), txn(2, 101, 110, 0)]
            .iter()
            .flat_map(|t| t.encode())
            .collect();
        let mut bad_version = good.clone();
        bad_version[ABORTED_TXN_SIZE + 1] = 1;
        let mut not_increasing = good.clone();
        not_increasing.extend_from_slice(&txn(3, 102, 110, 0).encode());
        let below_base = txn(1, 0, 99, 0).encode().to_vec();
        let cases = [
            ("partial", good[..good.len() - 1].to_vec()),
            ("version", bad_version),
            ("order", not_increasing),
            ("base", below_base),
        ];
        for (name, content) in cases {
            std::fs::write(&path, &content).unwrap();
            let mut index = TxnIndex::open(&path, 100).unwrap();
            assert!(index.is_damaged(), "{name}");
            for err in [
                index.collect(0, 1000).unwrap_err(),
                index.all().unwrap_err(),
                index.append(txn(5, 200, 300, 0)).unwrap_err(),
            ] {
                assert!(
                    matches!(&err, StorageError::InvalidArgument(m) if m.contains("damaged")),
                    "{name}: {err}"
                );
            }
            index.reset().unwrap();
            assert!(!index.is_damaged(), "{name}");
            index.append(txn(5, 200, 300, 0)).unwrap();
            assert_eq!(index.all().unwrap(), [txn(5, 200, 300, 0)], "{name}");
        }
        // Truncating below the damage leaves a good index.
        let mut content = good.clone();
        content.extend_from_slice(&txn(3, 102, 108, 0).encode());
        std::fs::write(&path, &content).unwrap();
        let mut index = TxnIndex::open(&path, 100).unwrap();
        assert!(index.is_damaged());
        index.truncate_to(108).unwrap();
        assert!(!index.is_damaged());
        assert_eq!(
            index.all().unwrap(),
            [txn(1, 100, 105, 0), txn(2, 101, 110, 0)][..1]
        );
        // An empty file is a good, empty index.
        std::fs::write(&path, b"").unwrap();
        let index = TxnIndex::open(&path, 100).unwrap();
        assert!(index.exists() && !index.is_damaged() && index.entries() == 0);
    }
}
