//! The process-wide bounded cache of open segment `.log` descriptors.
//!
//! A broker holds thousands of segments, but a segment needs its `.log` open only while it is
//! appended to, read, truncated or fsynced. Each [`Segment`](crate::segment::Segment) therefore
//! holds a [`LogFile`]: a slot that may or may not hold the open file. [`LogFile::get`] returns
//! the open file, or opens it again by the segment's current path (read + append, never create:
//! a file removed under its segment is an error, not a new empty file) and registers it here. At
//! most [`capacity`] slots hold a descriptor; registering one more closes the least recently used.
//! The number of open `.log` files is so bounded by the capacity, not by the number of partitions.
//! A segment that opens with data in it (a broker loading its logs) closes its `.log` once its
//! state is read: only the segments used since, and new ones, hold a descriptor.
//!
//! This module owns the registry (recency order and capacity), the slots' descriptors, and the
//! reclaiming of descriptors when the process runs out of them: an `open` of any storage file
//! (`.log`, the indexes, the `.txnindex`) that fails with EMFILE or ENFILE closes a batch of the
//! least recently used `.log` descriptors and is tried once more ([`open_reclaiming`]); if it
//! fails again, or there was nothing to close, the error goes to the caller (and to Python as an
//! `OSError` with that errno).
//!
//! A caller gets an `Arc<File>`: eviction only takes the slot's reference, so a reader holding a
//! clone for the length of an operation (a planned read, a `FlushHandles` fsync, the cleaner's
//! pass over a segment) keeps its descriptor until it drops it. Such clones are not counted in
//! [`open_count`]. A reader that holds on for longer, a fetch's `LogRegion` waiting to be sent
//! (one per partition of a response, thousands of them), holds a [`LogFileRef`] instead: no
//! descriptor, only the slot, whose file it takes for the length of each send, opening it by path
//! (checked to be the same file) when the cache had closed it. A segment closed while such
//! references remain leaves its file to them (not in the cache any more) until the last one goes,
//! so a region stays readable after its segment is closed, renamed or deleted.
//!
//! Recency is a tick per registration or touch: the registry maps tick → slot in a `BTreeMap`
//! (oldest first) and each slot stores its tick. A slot used again while its tick is among the
//! newest half of the capacity is not moved (the hot path then takes no global lock: one slot
//! lock, one atomic load of the global tick); it moves to the newest position when used after
//! that. The order is thus LRU to within half the capacity.
//!
//! Locking rules:
//! * the registry lock ([`REGISTRY`]) may be held while taking a slot's lock (eviction,
//!   unregistering), never the other way round: code holding a slot lock releases it before it
//!   takes the registry lock;
//! * a slot's `tick` is written only under the registry lock; it is non-zero exactly while the
//!   registry holds the slot, and a registered slot always holds a file;
//! * no descriptor is opened or closed under the registry lock: evicted files are dropped after
//!   it is released, and files are opened with no lock held (two threads reopening one slot at
//!   once both open; the second keeps the first's file and closes its own).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError, Weak};

/// The smallest capacity [`default_capacity`] derives from a limit.
pub const MIN_DEFAULT_CAPACITY: usize = 64;
/// `.log` descriptors closed when an `open` fails for want of descriptors, before it is retried.
pub const RECLAIM_BATCH: usize = 16;

/// The registry: recency order of the slots holding a descriptor, and the capacity.
struct Registry {
    /// 0 until first used (then [`default_capacity`]) or set.
    capacity: usize,
    /// tick → slot, oldest first. Each slot here holds a file.
    lru: BTreeMap<u64, Weak<Slot>>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    capacity: 0,
    lru: BTreeMap::new(),
});
/// The next tick to hand out (ticks start at 1; 0 marks an unregistered slot).
static NEXT_TICK: AtomicU64 = AtomicU64::new(1);
/// Mirror of the registry's capacity, read without the lock by [`LogFile::touch`].
static CAPACITY: AtomicUsize = AtomicUsize::new(0);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing here can be left half-updated by a panic in a way that matters more than refusing
    // every later call would.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn registry() -> MutexGuard<'static, Registry> {
    let mut registry = lock(&REGISTRY);
    if registry.capacity == 0 {
        registry.capacity = default_capacity();
        CAPACITY.store(registry.capacity, Ordering::Relaxed);
    }
    registry
}

impl Registry {
    /// Takes the files of the oldest slots until at most `keep` remain; the caller drops them
    /// after releasing the registry lock. A slot whose lock is held (a walk over its batches,
    /// which may read the disk) is passed over rather than waited for, and stays registered.
    fn evict_to(&mut self, keep: usize, evicted: &mut Vec<Arc<File>>) {
        let mut needed = self.lru.len().saturating_sub(keep);
        let mut busy = Vec::new();
        while needed > 0 {
            let Some((tick, weak)) = self.lru.pop_first() else {
                break;
            };
            let Some(slot) = weak.upgrade() else {
                needed -= 1;
                continue;
            };
            // Registry lock, then slot lock: the permitted order.
            let file = match slot.file.try_lock() {
                Ok(mut guard) => guard.take(),
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner().take(),
                Err(TryLockError::WouldBlock) => {
                    busy.push((tick, weak));
                    continue;
                }
            };
            slot.tick.store(0, Ordering::Relaxed);
            evicted.extend(file);
            needed -= 1;
        }
        self.lru.extend(busy);
    }

    /// Puts `slot` at the newest position (registering it if it is not registered).
    fn make_newest(&mut self, slot: &Arc<Slot>) {
        let old = slot.tick.load(Ordering::Relaxed);
        let weak = match old {
            0 => Arc::downgrade(slot),
            tick => self
                .lru
                .remove(&tick)
                .unwrap_or_else(|| Arc::downgrade(slot)),
        };
        let tick = NEXT_TICK.fetch_add(1, Ordering::Relaxed);
        self.lru.insert(tick, weak);
        slot.tick.store(tick, Ordering::Relaxed);
    }
}

/// The capacity for a soft `RLIMIT_NOFILE` of `soft_limit`: half of it (the other half is for
/// sockets, index and checkpoint files, the interpreter), at least [`MIN_DEFAULT_CAPACITY`].
/// `pybroker/log/file_descriptors.py` applies the same rule when the broker starts.
pub fn capacity_for_limit(soft_limit: u64) -> usize {
    let half = usize::try_from(soft_limit / 2).unwrap_or(usize::MAX);
    half.max(MIN_DEFAULT_CAPACITY)
}

/// The capacity used until [`set_capacity`] is called: [`capacity_for_limit`] of the process's
/// soft `RLIMIT_NOFILE` (1,048,576 when unlimited or unknown).
pub fn default_capacity() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0
        && limit.rlim_cur != libc::RLIM_INFINITY
    {
        limit.rlim_cur
    } else {
        1 << 21
    };
    capacity_for_limit(soft)
}

/// How many `.log` descriptors the cache keeps open at most.
pub fn capacity() -> usize {
    registry().capacity
}

/// Sets the capacity (at least 1), closing the least recently used descriptors beyond it.
pub fn set_capacity(capacity: usize) {
    let mut evicted = Vec::new();
    {
        let mut registry = registry();
        registry.capacity = capacity.max(1);
        CAPACITY.store(registry.capacity, Ordering::Relaxed);
        let keep = registry.capacity;
        registry.evict_to(keep, &mut evicted);
    }
    drop(evicted);
}

/// How many `.log` descriptors the cache holds open now.
pub fn open_count() -> usize {
    registry().lru.len()
}

/// Closes up to `count` of the least recently used `.log` descriptors; returns how many slots
/// were emptied.
pub fn reclaim(count: usize) -> usize {
    let mut evicted = Vec::new();
    let emptied = {
        let mut registry = registry();
        let before = registry.lru.len();
        let keep = before.saturating_sub(count);
        registry.evict_to(keep, &mut evicted);
        before - registry.lru.len()
    };
    drop(evicted);
    emptied
}

/// Whether `error` says the process (EMFILE) or the system (ENFILE) has no descriptor left.
pub fn is_descriptor_exhaustion(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::EMFILE) | Some(libc::ENFILE)
    )
}

/// Runs `open`; when it fails for want of descriptors, closes [`RECLAIM_BATCH`] cached `.log`
/// descriptors and runs it once more. The error is returned as it is when nothing could be
/// closed or the second attempt fails too.
pub fn open_reclaiming(open: impl Fn() -> io::Result<File>) -> io::Result<File> {
    match open() {
        Err(e) if is_descriptor_exhaustion(&e) => {
            if reclaim(RECLAIM_BATCH) == 0 {
                return Err(e);
            }
            open()
        }
        result => result,
    }
}

/// One segment's `.log` descriptor, when the cache holds it.
struct Slot {
    file: Mutex<Option<Arc<File>>>,
    /// The file's current name (the segment renames it: `.cleaned` → swapped in, `.deleted`).
    path: Mutex<PathBuf>,
    /// Key in the registry's recency map, 0 while unregistered (written under the registry lock).
    tick: AtomicU64,
    /// Which file it is: a file opened again by path must be this one.
    identity: FileId,
}

/// A file's device, inode and birth time (an inode number is reused as soon as a removed file
/// is closed; the birth time tells the new file apart where the filesystem records it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    device: u64,
    inode: u64,
    born: Option<std::time::SystemTime>,
}

impl FileId {
    fn of(metadata: &std::fs::Metadata) -> FileId {
        FileId {
            device: metadata.dev(),
            inode: metadata.ino(),
            born: metadata.created().ok(),
        }
    }
}

/// `file` if it is the file `identity` names, else an error (a file removed and created again
/// at the same path).
fn same_file(file: File, identity: FileId, path: &Path) -> io::Result<File> {
    if FileId::of(&file.metadata()?) == identity {
        Ok(file)
    } else {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} was replaced by another file", path.display()),
        ))
    }
}

/// A segment's handle on its `.log`: the open file, or what is needed to open it again.
pub struct LogFile {
    slot: Arc<Slot>,
}

impl LogFile {
    /// A handle holding `file`, just opened (or created) by the caller at `path`, outside the
    /// cache: the caller uses it, then [`keep`](Self::keep)s it in the cache or
    /// [`close`](Self::close)s it. `metadata` is the file's (the caller has just read it, for its
    /// size).
    pub fn opened(file: File, metadata: &std::fs::Metadata, path: &Path) -> LogFile {
        LogFile {
            slot: Arc::new(Slot {
                file: Mutex::new(Some(Arc::new(file))),
                path: Mutex::new(path.to_path_buf()),
                tick: AtomicU64::new(0),
                identity: FileId::of(metadata),
            }),
        }
    }

    /// Puts the open file in the cache as its newest entry (closing the least recently used
    /// beyond the capacity). Nothing happens when the file is closed.
    pub fn keep(&self) {
        register(&self.slot);
    }

    /// Closes the file (unless a reader still holds it) and takes it out of the cache; the next
    /// [`get`](Self::get) opens it again.
    pub fn close(&self) {
        drop(unregister(&self.slot, false));
    }

    /// The open `.log`, found at `path` (its current name) if the cache had closed it; an error
    /// if the file there is not the segment's (removed, or replaced by another).
    pub fn get(&self, path: &Path) -> io::Result<Arc<File>> {
        let cached = lock(&self.slot.file).as_ref().map(Arc::clone);
        if let Some(file) = cached {
            self.touch();
            return Ok(file);
        }
        let opened = open_reclaiming(|| OpenOptions::new().read(true).append(true).open(path))?;
        let opened = Arc::new(same_file(opened, self.slot.identity, path)?);
        let file = {
            let mut guard = lock(&self.slot.file);
            // Another thread may have reopened it meanwhile: keep its file, drop ours below.
            Arc::clone(guard.get_or_insert_with(|| Arc::clone(&opened)))
        };
        register(&self.slot);
        Ok(file)
    }

    /// `f` on the open `.log` (see [`get`](Self::get)), holding the slot's lock instead of a
    /// reference to the file while the cache has it open: the cheaper way for a short operation
    /// under the segment's lock (an append's write, a walk over batch headers). `f` must not
    /// use the cache (a lock order violation).
    pub fn with<T>(&self, path: &Path, f: impl FnOnce(&File) -> T) -> io::Result<T> {
        let guard = lock(&self.slot.file);
        if let Some(file) = guard.as_ref() {
            let out = f(file);
            drop(guard);
            self.touch();
            return Ok(out);
        }
        drop(guard);
        Ok(f(&*self.get(path)?))
    }

    /// The file was renamed to `path`: references ([`LogFileRef`]) reopen it there.
    pub fn renamed(&self, path: &Path) {
        *lock(&self.slot.path) = path.to_path_buf();
    }

    /// Whether the cache holds this segment's descriptor now.
    pub fn is_open(&self) -> bool {
        lock(&self.slot.file).is_some()
    }

    /// A descriptor-free reference to the file, found at `path` (its current name) when the
    /// cache has closed it (see [`LogFileRef`]).
    pub fn reference(&self, path: &Path) -> LogFileRef {
        LogFileRef {
            slot: Arc::clone(&self.slot),
            path: path.to_path_buf(),
        }
    }

    /// Moves the slot to the newest position unless it is already among the newest half.
    fn touch(&self) {
        let tick = self.slot.tick.load(Ordering::Relaxed);
        if tick == 0 {
            // Evicted since the file was read (this access keeps its clone), or being
            // registered by the thread that opened it.
            return;
        }
        let half = (CAPACITY.load(Ordering::Relaxed) / 2) as u64;
        if NEXT_TICK.load(Ordering::Relaxed).saturating_sub(tick) <= half {
            return;
        }
        let mut registry = registry();
        if self.slot.tick.load(Ordering::Relaxed) != 0 {
            registry.make_newest(&self.slot);
        }
    }
}

/// Registers a slot that holds a file (or makes it the newest), evicting beyond the capacity.
fn register(slot: &Arc<Slot>) {
    let mut evicted = Vec::new();
    {
        let mut registry = registry();
        // A slot emptied by an eviction between the caller's store and this call stays out.
        if slot.tick.load(Ordering::Relaxed) != 0 || lock(&slot.file).is_some() {
            registry.make_newest(slot);
        }
        let keep = registry.capacity;
        registry.evict_to(keep, &mut evicted);
    }
    drop(evicted);
}

/// Takes `slot` out of the registry and its file out of the slot, unless `leave_to_references`
/// and [`LogFileRef`]s of the slot remain (they close it with the last one); the caller drops the
/// file after the registry lock is released (here: on return).
fn unregister(slot: &Arc<Slot>, leave_to_references: bool) -> Option<Arc<File>> {
    let mut registry = registry();
    let tick = slot.tick.swap(0, Ordering::Relaxed);
    if tick != 0 {
        registry.lru.remove(&tick);
    }
    // Under the registry lock no eviction holds an upgraded `Weak` of the slot: any other strong
    // reference is a `LogFileRef`.
    if leave_to_references && Arc::strong_count(slot) > 1 {
        return None;
    }
    lock(&slot.file).take()
}

impl Drop for LogFile {
    /// Unregisters the slot and closes its descriptor, unless a reader still holds it: a
    /// [`LogFileRef`] (the file is left to them, closed with the last), or a clone of the file.
    /// A file the cache had closed is opened again for remaining references first: the segment
    /// is closed before it is renamed or deleted, after which its old name finds nothing.
    fn drop(&mut self) {
        if Arc::strong_count(&self.slot) > 1 && !self.is_open() {
            let path = lock(&self.slot.path).clone();
            if let Ok(file) =
                File::open(&path).and_then(|file| same_file(file, self.slot.identity, &path))
            {
                let mut guard = lock(&self.slot.file);
                if guard.is_none() {
                    *guard = Some(Arc::new(file));
                }
            }
        }
        drop(unregister(&self.slot, true));
    }
}

/// A reader's hold on a segment's `.log` that keeps no descriptor (a fetch's `LogRegion`): while
/// the cache holds the file it is used; otherwise the file is opened by its current name, and
/// must be the same file (device, inode, birth time): a segment removed and created again at the
/// same path is an error, never other bytes. A reference taken before its segment is closed
/// (renamed `.deleted`, deleted) keeps the file the segment had, opened again at the close if
/// the cache had closed it. (A whole partition directory renamed before its segments are closed,
/// a deleted topic, leaves such a reference nothing to open: its read fails.)
#[derive(Clone)]
pub struct LogFileRef {
    slot: Arc<Slot>,
    path: PathBuf,
}

impl LogFileRef {
    /// The file, for the length of one operation: the cached one, or one opened for the caller
    /// alone (not cached; closed when dropped).
    pub fn file(&self) -> io::Result<Arc<File>> {
        if let Some(file) = lock(&self.slot.file).as_ref() {
            return Ok(Arc::clone(file));
        }
        let path = lock(&self.slot.path).clone();
        let file = open_reclaiming(|| File::open(&path))?;
        Ok(Arc::new(same_file(file, self.slot.identity, &path)?))
    }

    /// The path the file had when the reference was taken (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_capacity_is_half_the_limit_and_at_least_the_floor() {
        assert_eq!(capacity_for_limit(20_000), 10_000);
        assert_eq!(capacity_for_limit(4096), 2048);
        assert_eq!(capacity_for_limit(100), MIN_DEFAULT_CAPACITY);
        assert_eq!(capacity_for_limit(0), MIN_DEFAULT_CAPACITY);
        assert!(default_capacity() >= MIN_DEFAULT_CAPACITY);
    }

    #[test]
    fn exhaustion_is_emfile_or_enfile_only() {
        assert!(is_descriptor_exhaustion(&io::Error::from_raw_os_error(
            libc::EMFILE
        )));
        assert!(is_descriptor_exhaustion(&io::Error::from_raw_os_error(
            libc::ENFILE
        )));
        assert!(!is_descriptor_exhaustion(&io::Error::from_raw_os_error(
            libc::ENOENT
        )));
        assert!(!is_descriptor_exhaustion(&io::Error::other("x")));
    }
}
