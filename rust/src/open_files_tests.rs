//! Tests of `open_files.rs` through segments: a small capacity keeps them correct and bounds the
//! descriptors, a file removed under an evicted segment is an error (never a new empty file),
//! renamed segments reopen at their new paths, an `open` that runs out of descriptors reclaims
//! cached ones, and threads sharing segments and the cache stay safe.
//!
//! The cache is process-wide and unit tests run in parallel: the tests that set its capacity take
//! [`CAPACITY_LOCK`] and restore it when they end; the other tests of the crate merely see their
//! own `.log` files closed and reopened more often meanwhile. Assertions about this module's
//! state only rely on what other tests cannot change: the capacity (set under the lock) bounds
//! the count, and a segment evicted here is only reopened by its own use.

use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::batch::test_support::simple_batch;
use crate::errors::StorageError;
use crate::open_files::{self, open_reclaiming, RECLAIM_BATCH};
use crate::segment::{segment_file, whole_batches_prefix, Segment};
use crate::test_dir::TestDir;

const MB: i64 = 1 << 20;

static CAPACITY_LOCK: Mutex<()> = Mutex::new(());

/// Holds the capacity at `capacity` until dropped, then restores the previous one.
struct Capacity {
    previous: usize,
    _lock: MutexGuard<'static, ()>,
}

impl Capacity {
    fn set(capacity: usize) -> Capacity {
        let lock = CAPACITY_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let previous = open_files::capacity();
        open_files::set_capacity(capacity);
        Capacity {
            previous,
            _lock: lock,
        }
    }
}

impl Drop for Capacity {
    fn drop(&mut self) {
        open_files::set_capacity(self.previous);
    }
}

/// Descriptors this process has open on `.log` files under `dir`.
fn log_descriptors_under(dir: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.starts_with(dir) && target.to_string_lossy().contains(".log"))
        .count()
}

/// Appends one batch of one record with a `value_size`-byte value; returns the bytes written.
fn append(seg: &mut Segment, value_size: usize) -> Vec<u8> {
    let mut batch = simple_batch(1, 1000 + seg.next_offset(), value_size);
    let next = seg.next_offset();
    seg.append(&mut batch, next, 0, -1).unwrap();
    batch
}

/// Everything in `seg`, read in one read.
fn contents(seg: &mut Segment) -> Vec<u8> {
    seg.read(seg.base_offset(), i32::MAX as i64, i64::MAX, true)
        .unwrap()
}

#[test]
fn many_segments_stay_correct_with_two_open_files() {
    let _capacity = Capacity::set(2);
    let dir = TestDir::new("open_files_many");
    let mut segments: Vec<Segment> = (0..12)
        .map(|i| {
            let sub = dir.path().join(format!("p{i}"));
            std::fs::create_dir(&sub).unwrap();
            Segment::open(&sub, 0, 4096, 10 * MB).unwrap()
        })
        .collect();
    let mut expected: Vec<Vec<u8>> = vec![Vec::new(); segments.len()];
    let mut after_three = Vec::new();
    for round in 0..5 {
        if round == 3 {
            after_three = expected.clone();
        }
        for (i, seg) in segments.iter_mut().enumerate() {
            expected[i].extend(append(seg, 10 * i + round));
            assert_eq!(seg.next_offset(), round as i64 + 1);
            assert!(open_files::open_count() <= 2);
            assert!(log_descriptors_under(dir.path()) <= 2);
        }
        // Read each in turn (every read reopens a file the appends of the others closed).
        for (i, seg) in segments.iter_mut().enumerate() {
            assert_eq!(contents(seg), expected[i], "segment {i}");
            assert_eq!(
                seg.translate_offset(round as i64)
                    .unwrap()
                    .unwrap()
                    .1
                    .base_offset,
                round as i64
            );
            assert!(open_files::open_count() <= 2);
            assert!(log_descriptors_under(dir.path()) <= 2);
        }
    }
    // Truncation, recovery, timestamp lookups and flushes go through the cache as well.
    for seg in &mut segments {
        assert!(seg.truncate_to(3).unwrap() > 0);
        assert_eq!(seg.next_offset(), 3);
        assert_eq!(seg.recover(i32::MAX as i64).unwrap(), 0);
        assert_eq!(
            seg.find_offset_by_timestamp(1001, 0).unwrap(),
            Some((1, 1001))
        );
        seg.flush().unwrap();
        assert!(log_descriptors_under(dir.path()) <= 2);
    }
    // The reopened files are the same files: reopening sees the state written before.
    for (i, seg) in segments.into_iter().enumerate() {
        seg.close(true).unwrap();
        let mut reopened =
            Segment::open(&dir.path().join(format!("p{i}")), 0, 4096, 10 * MB).unwrap();
        assert_eq!(contents(&mut reopened), after_three[i]);
        reopened.close(false).unwrap();
    }
    assert_eq!(
        log_descriptors_under(dir.path()),
        0,
        "closing gives the descriptors back"
    );
}

#[test]
fn a_segment_opened_with_data_holds_no_descriptor_until_used() {
    let _capacity = Capacity::set(1 << 20);
    let dir = TestDir::new("open_files_load");
    let mut seg = Segment::open(dir.path(), 0, 4096, 10 * MB).unwrap();
    assert!(seg.log_is_open(), "a new segment is appended to next");
    let written = append(&mut seg, 10);
    seg.close(true).unwrap();

    let mut loaded = Segment::open(dir.path(), 0, 4096, 10 * MB).unwrap();
    assert!(
        !loaded.log_is_open(),
        "loading reads the state and closes the file"
    );
    assert_eq!(log_descriptors_under(dir.path()), 0);
    assert_eq!(loaded.next_offset(), 1);
    assert_eq!(contents(&mut loaded), written);
    assert!(loaded.log_is_open(), "a read opens it, in the cache");
    loaded.close(false).unwrap();
}

#[test]
fn a_log_removed_under_an_evicted_segment_is_an_error_not_a_new_file() {
    let dir = TestDir::new("open_files_removed");
    let mut seg = Segment::open(dir.path(), 0, 4096, 10 * MB).unwrap();
    append(&mut seg, 10);
    let path = segment_file(dir.path(), 0, "log");
    std::fs::remove_file(&path).unwrap();
    open_files::reclaim(usize::MAX); // evict every cached descriptor, this one included
    assert!(!seg.log_is_open());

    let mut batch = simple_batch(1, 1000, 10);
    match seg.append(&mut batch, 1, 0, -1) {
        Err(StorageError::Io { source, op, .. }) => {
            assert_eq!(source.kind(), io::ErrorKind::NotFound);
            assert_eq!(op, "open");
        }
        other => panic!("expected ENOENT on open, got {other:?}"),
    }
    assert!(seg.read(0, 1000, i64::MAX, true).is_err());
    assert!(seg.flush().is_err());
    assert!(!path.exists(), "the removed .log must not be created again");
    // Another file at its path is not the segment's.
    std::fs::write(&path, b"not this segment's").unwrap();
    let err = seg.read(0, 1000, i64::MAX, true).unwrap_err().to_string();
    assert!(err.contains("replaced"), "{err}");
    std::fs::remove_file(&path).unwrap();
    assert_eq!(seg.next_offset(), 1, "the failed append changed nothing");
    // Closing (no fsync) and deleting still work; missing files are fine for delete.
    seg.delete().unwrap();
}

#[test]
fn renamed_segments_reopen_at_their_new_paths() {
    let dir = TestDir::new("open_files_renamed");
    // A cleaned segment swapped in: `.cleaned` -> `.swap` -> no suffix, evicted between steps.
    let mut cleaned = Segment::open_with_suffix(dir.path(), 5, ".cleaned", 4096, 10 * MB).unwrap();
    let mut written = Vec::new();
    for _ in 0..3 {
        written.extend(append(&mut cleaned, 7));
    }
    open_files::reclaim(usize::MAX);
    cleaned.change_file_suffixes(".cleaned", ".swap").unwrap();
    assert_eq!(cleaned.path(), segment_file(dir.path(), 5, "log.swap"));
    assert_eq!(contents(&mut cleaned), written);
    open_files::reclaim(usize::MAX);
    cleaned.change_file_suffixes(".swap", "").unwrap();
    written.extend(append(&mut cleaned, 7));
    open_files::reclaim(usize::MAX);
    assert_eq!(contents(&mut cleaned), written);
    cleaned.set_last_modified_ms(1_600_000_000_000).unwrap();
    assert_eq!(cleaned.last_modified_ms().unwrap(), 1_600_000_000_000);
    assert!(!segment_file(dir.path(), 5, "log.cleaned").exists());
    assert!(!segment_file(dir.path(), 5, "log.swap").exists());

    // A segment renamed `.deleted` gives its place in the cache back; a handle or a reference (a
    // fetch's region) taken before still reads the file, closed when the last one goes.
    let handle = cleaned.log_file().unwrap();
    let reference = cleaned.log_file_ref();
    let renamed = cleaned.rename_suffix(".deleted").unwrap();
    assert_eq!(renamed[0], segment_file(dir.path(), 5, "log.deleted"));
    let mut first = [0u8; 8];
    handle.read_exact_at(&mut first, 0).unwrap();
    assert_eq!(i64::from_be_bytes(first), 5);
    drop(handle);
    std::fs::remove_file(&renamed[0]).unwrap();
    reference
        .file()
        .unwrap()
        .read_exact_at(&mut first, 0)
        .unwrap();
    assert_eq!(i64::from_be_bytes(first), 5);
    assert_eq!(log_descriptors_under(dir.path()), 1);
    drop(reference);
    assert_eq!(log_descriptors_under(dir.path()), 0);
}

#[test]
fn a_reference_to_an_evicted_segment_keeps_reading_it_after_its_rename_and_removal() {
    let dir = TestDir::new("open_files_evicted_reference");
    let mut seg = Segment::open(dir.path(), 3, 4096, 10 * MB).unwrap();
    append(&mut seg, 7);
    // A fetch's region waits while the cache closes the file, then retention renames the
    // segment `.deleted` and removes it: the close reopened it for the reference.
    let reference = seg.log_file_ref();
    open_files::reclaim(usize::MAX);
    assert!(!seg.log_is_open());
    let renamed = seg.rename_suffix(".deleted").unwrap();
    std::fs::remove_file(&renamed[0]).unwrap();
    let mut first = [0u8; 8];
    reference
        .file()
        .unwrap()
        .read_exact_at(&mut first, 0)
        .unwrap();
    assert_eq!(i64::from_be_bytes(first), 3);
    drop(reference);
    assert_eq!(log_descriptors_under(dir.path()), 0);
}

#[test]
fn an_open_out_of_descriptors_reclaims_cached_ones_and_is_tried_once_more() {
    let _capacity = Capacity::set(64);
    let dir = TestDir::new("open_files_reclaim");
    let mut segments: Vec<Segment> = (0..(RECLAIM_BATCH as i64 + 4))
        .map(|base| {
            let mut seg = Segment::open(dir.path(), base * 100, 4096, 10 * MB).unwrap();
            append(&mut seg, 1);
            seg
        })
        .collect();
    // Touch them oldest first so that the first one is the least recently used.
    for seg in &mut segments {
        seg.read(seg.base_offset(), 100, i64::MAX, true).unwrap();
    }
    let emfile = || io::Error::from_raw_os_error(libc::EMFILE);

    let calls = std::cell::Cell::new(0);
    let file = open_reclaiming(|| {
        calls.set(calls.get() + 1);
        if calls.get() == 1 {
            Err(emfile())
        } else {
            std::fs::File::open(dir.path())
        }
    });
    assert!(file.is_ok());
    assert_eq!(calls.get(), 2);
    assert!(
        !segments[0].log_is_open(),
        "the least recently used descriptor was closed"
    );

    calls.set(0);
    let failed = open_reclaiming(|| {
        calls.set(calls.get() + 1);
        Err(emfile())
    });
    assert_eq!(failed.unwrap_err().raw_os_error(), Some(libc::EMFILE));
    assert!(calls.get() <= 2, "tried at most once more");

    // Other errors are not retried.
    calls.set(0);
    let missing = open_reclaiming(|| {
        calls.set(calls.get() + 1);
        std::fs::File::open(dir.path().join("missing"))
    });
    assert_eq!(missing.unwrap_err().kind(), io::ErrorKind::NotFound);
    assert_eq!(calls.get(), 1);

    // Every segment still works, reopening what was closed.
    for seg in &mut segments {
        let mut written = contents(seg);
        assert_eq!(seg.batches(0).unwrap().len(), 1);
        written.extend(append(seg, 2));
        assert_eq!(contents(seg), written);
    }
    for seg in segments {
        seg.close(false).unwrap();
    }
}

#[test]
fn threads_sharing_segments_and_the_cache_stay_correct() {
    let _capacity = Capacity::set(3);
    let dir = TestDir::new("open_files_threads");
    const SEGMENTS: usize = 8;
    const THREADS: usize = 4;
    const ROUNDS: usize = 150;
    let segments: Arc<Vec<Mutex<Segment>>> = Arc::new(
        (0..SEGMENTS)
            .map(|i| {
                Mutex::new(
                    Segment::open(dir.path(), (i * 1_000_000) as i64, 4096, 10 * MB).unwrap(),
                )
            })
            .collect(),
    );
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let segments = Arc::clone(&segments);
            std::thread::spawn(move || {
                for round in 0..ROUNDS {
                    let seg = &segments[(t + round) % SEGMENTS];
                    // As PySegment does: append, or plan under the lock and read without it.
                    let (file, plan) = {
                        let mut seg = seg.lock().unwrap();
                        append(&mut seg, 1 + round % 13);
                        let first = seg.base_offset();
                        (
                            seg.log_file().unwrap(),
                            seg.read_plan(first, 1 << 20, i64::MAX, true).unwrap(),
                        )
                    };
                    // Bytes read from a handle the cache may have closed meanwhile: still the
                    // segment's whole batches, from its base offset on.
                    let plan = plan.unwrap();
                    let mut buf = vec![0u8; plan.capacity];
                    file.read_exact_at(&mut buf, plan.position).unwrap();
                    assert_eq!(plan.position, 0);
                    assert_eq!(whole_batches_prefix(&buf, i64::MAX), buf.len());
                    let base = ((t + round) % SEGMENTS * 1_000_000) as i64;
                    assert_eq!(i64::from_be_bytes(buf[..8].try_into().unwrap()), base);
                    if round % 10 == 0 {
                        open_files::set_capacity(1 + round % 4);
                    }
                    if round % 17 == 0 {
                        open_files::reclaim(2);
                    }
                    assert!(open_files::open_count() <= 4);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    open_files::set_capacity(3);
    let segments = Arc::try_unwrap(segments).ok().unwrap();
    let mut total = 0;
    for (i, seg) in segments.into_iter().enumerate() {
        let mut seg = seg.into_inner().unwrap();
        let count = seg.next_offset() - seg.base_offset();
        let batches = seg.batches(0).unwrap();
        assert_eq!(batches.len() as i64, count, "segment {i}");
        for (n, b) in batches.iter().enumerate() {
            assert_eq!(b.base_offset, seg.base_offset() + n as i64);
        }
        let data = contents(&mut seg);
        assert_eq!(whole_batches_prefix(&data, i64::MAX), data.len());
        assert_eq!(data.len() as u64, seg.size());
        total += count;
        seg.close(false).unwrap();
    }
    assert_eq!(total as usize, THREADS * ROUNDS);
    assert_eq!(log_descriptors_under(dir.path()), 0);
}
