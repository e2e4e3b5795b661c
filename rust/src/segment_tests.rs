//! Tests of `segment.rs` and `recovery.rs`: append/read, the index interval rule, lookups,
//! truncation, reopening, recovery, timestamp searches and file lifecycle.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::FileExt;

use crate::batch::test_support::{
    batch_of, build_raw_batch, encode_records, simple_batch, TestRecord,
};
use crate::batch::{validate_batches, BatchHeader, ATTRIBUTES_OFFSET, TRANSACTIONAL_FLAG_MASK};
use crate::builder::{build_batch_with_attributes, build_control_batch, KeyValue, ProducerFields};
use crate::errors::StorageError;
use crate::offset_index::OffsetPosition;
use crate::records::test_support::compressed_batch;
use crate::segment::{segment_file, AppendResult, Segment};
use crate::test_dir::TestDir;
use crate::txn_index::AbortedTxn;

const MB: i64 = 1 << 20;

fn open(dir: &TestDir, base: i64, interval: i64) -> Segment {
    Segment::open(dir.path(), base, interval, 10 * MB).unwrap()
}

/// Appends one batch of `n` records (timestamps ts0..) at the segment's next offset.
fn append_batch(seg: &mut Segment, n: usize, ts0: i64, value_size: usize) -> AppendResult {
    let mut b = simple_batch(n, ts0, value_size);
    let next = seg.next_offset();
    seg.append(&mut b, next, 3, -1).unwrap()
}

/// Splits a buffer of whole batches into their headers.
fn headers(mut buf: &[u8]) -> Vec<BatchHeader> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let h = BatchHeader::parse(buf).unwrap();
        buf = &buf[h.size()..];
        out.push(h);
    }
    out
}

fn file_len(dir: &TestDir, base: i64, ext: &str) -> u64 {
    std::fs::metadata(segment_file(dir.path(), base, ext))
        .unwrap()
        .len()
}

#[test]
fn append_assigns_offsets_and_leader_epoch() {
    let dir = TestDir::new("append");
    let mut seg = open(&dir, 100, 4096);
    assert_eq!(
        (seg.size(), seg.next_offset(), seg.max_timestamp()),
        (0, 100, -1)
    );
    assert_eq!(seg.first_batch_timestamp(), -1);

    let r = append_batch(&mut seg, 3, 1000, 10);
    assert_eq!(
        r,
        AppendResult {
            last_offset: 102,
            max_timestamp: 1002,
            offset_of_max_timestamp: 102
        }
    );
    let mut set = simple_batch(2, 2000, 10);
    set.extend(simple_batch(4, 1500, 10));
    let r = seg.append(&mut set, 103, 9, -1).unwrap();
    assert_eq!(
        r,
        AppendResult {
            last_offset: 108,
            max_timestamp: 2001,
            offset_of_max_timestamp: 104
        }
    );
    assert_eq!(seg.next_offset(), 109);
    assert_eq!(
        seg.first_batch_timestamp(),
        1002,
        "the first set's largest timestamp"
    );
    assert_eq!(
        (seg.max_timestamp(), seg.offset_of_max_timestamp()),
        (2001, 104)
    );

    let data = seg.read(100, MB, i64::MAX, false).unwrap();
    assert_eq!(data.len() as u64, seg.size());
    validate_batches(&data, MB).expect("CRCs still valid after patching");
    let hs = headers(&data);
    let got: Vec<_> = hs
        .iter()
        .map(|h| (h.base_offset, h.last_offset(), h.partition_leader_epoch))
        .collect();
    assert_eq!(got, vec![(100, 102, 3), (103, 104, 9), (105, 108, 9)]);
    assert!(hs.iter().all(|h| !h.is_log_append_time()));
}

#[test]
fn append_rejects_bad_offsets_and_keeps_readonly_input() {
    let dir = TestDir::new("append_errors");
    let mut seg = open(&dir, 0, 4096);
    append_batch(&mut seg, 2, 1, 1);
    let mut b = simple_batch(1, 1, 1);
    assert!(matches!(
        seg.append(&mut b, 1, 0, -1),
        Err(StorageError::InvalidArgument(_))
    ));
    let too_far = i32::MAX as i64 + 1;
    assert!(matches!(
        seg.append(&mut b, too_far, 0, -1),
        Err(StorageError::InvalidArgument(_))
    ));
    assert!(matches!(
        seg.append(&mut b[..30], 2, 0, -1),
        Err(StorageError::Corrupt(_))
    ));
    assert_eq!(
        (seg.size() as usize, seg.next_offset()),
        (simple_batch(2, 1, 1).len(), 2)
    );

    let original = simple_batch(1, 5, 1);
    let r = seg.append_copy(&original, 2, 4, 77).unwrap();
    assert_eq!(r.last_offset, 2);
    assert_eq!(original, simple_batch(1, 5, 1), "read-only input untouched");
    // Replicated data: offsets kept from the buffer, must not go backwards.
    let mut replicated = simple_batch(2, 5, 1);
    replicated[..8].copy_from_slice(&10i64.to_be_bytes());
    let r = seg.append(&mut replicated, -1, -1, -1).unwrap();
    assert_eq!((r.last_offset, seg.next_offset()), (11, 12));
    let mut stale = simple_batch(1, 5, 1);
    stale[..8].copy_from_slice(&11i64.to_be_bytes());
    assert!(matches!(
        seg.append(&mut stale, -1, -1, -1),
        Err(StorageError::InvalidArgument(_))
    ));
}

#[test]
fn log_append_time_rewrites_max_timestamp_and_crc() {
    let dir = TestDir::new("lat");
    let mut seg = open(&dir, 0, 4096);
    let mut set = simple_batch(3, 10, 8);
    set.extend(simple_batch(2, 20, 8));
    let r = seg.append(&mut set, 0, 1, 5_000).unwrap();
    assert_eq!(
        r,
        AppendResult {
            last_offset: 4,
            max_timestamp: 5_000,
            offset_of_max_timestamp: 2
        }
    );
    let data = seg.read(0, MB, i64::MAX, false).unwrap();
    validate_batches(&data, MB).unwrap();
    for h in headers(&data) {
        assert!(h.is_log_append_time());
        assert_eq!(h.max_timestamp, 5_000);
        assert_eq!(h.attributes & 0x08, 0x08);
    }
    assert_eq!(data[ATTRIBUTES_OFFSET + 1] & 0x08, 0x08);
    assert_eq!(
        seg.find_offset_by_timestamp(4_000, 0).unwrap(),
        Some((0, 5_000))
    );
    assert_eq!(
        seg.find_offset_by_timestamp(4_000, 3).unwrap(),
        Some((3, 5_000))
    );
    assert_eq!(seg.find_offset_by_timestamp(5_001, 0).unwrap(), None);
}

/// Kafka's rule: an entry (batch last offset, batch position) when more than
/// `index_interval_bytes` were appended since the last entry; never on the first append.
#[test]
fn index_interval_rule() {
    let dir = TestDir::new("interval");
    let batch_size = simple_batch(1, 0, 80).len() as u64;
    let interval = (batch_size * 2 - 1) as i64; // an entry every second batch
    let mut seg = open(&dir, 0, interval);
    for i in 0..6 {
        append_batch(&mut seg, 1, 100 + i, 80);
    }
    // bytes before batches 1..: b, 2b(>interval: entry@2, reset), b, 2b(entry@4), b
    let entries: Vec<_> = (0..seg.offset_index().entries())
        .map(|i| seg.offset_index().entry(i))
        .collect();
    assert_eq!(
        entries,
        vec![
            OffsetPosition {
                offset: 2,
                position: (2 * batch_size) as u32
            },
            OffsetPosition {
                offset: 4,
                position: (4 * batch_size) as u32
            },
        ]
    );
    let times: Vec<_> = (0..seg.time_index().entries())
        .map(|i| seg.time_index().entry(i))
        .collect();
    assert_eq!(
        times
            .iter()
            .map(|t| (t.timestamp, t.offset))
            .collect::<Vec<_>>(),
        vec![(102, 2), (104, 4)]
    );

    // The rule is applied per batch inside one multi-batch append too.
    let dir2 = TestDir::new("interval_multi");
    let mut seg2 = open(&dir2, 0, interval);
    let mut set = Vec::new();
    for i in 0..6 {
        set.extend(simple_batch(1, 100 + i, 80));
    }
    seg2.append(&mut set, 0, 0, -1).unwrap();
    let entries2: Vec<_> = (0..seg2.offset_index().entries())
        .map(|i| seg2.offset_index().entry(i))
        .collect();
    assert_eq!(entries2, entries);

    // First append never indexes, whatever its size.
    let dir3 = TestDir::new("interval_first");
    let mut seg3 = open(&dir3, 0, 0);
    append_batch(&mut seg3, 50, 1, 100);
    assert_eq!(seg3.offset_index().entries(), 0);
    append_batch(&mut seg3, 1, 1, 1);
    assert_eq!(seg3.offset_index().entries(), 1);
}

#[test]
fn lookups_and_reads_by_offset() {
    let dir = TestDir::new("read");
    let mut seg = open(&dir, 1000, 1); // index (almost) every batch
    let mut sizes = Vec::new();
    for i in 0..10 {
        let b = simple_batch(5, i * 10, 20);
        sizes.push(b.len());
        append_batch(&mut seg, 5, i * 10, 20);
    }
    assert!(seg.offset_index().entries() >= 8);
    for (offset, expect_base) in [
        (1000, 1000),
        (1004, 1000),
        (1005, 1005),
        (1027, 1025),
        (1049, 1045),
    ] {
        let data = seg.read(offset, MB, i64::MAX, false).unwrap();
        assert_eq!(
            headers(&data)[0].base_offset,
            expect_base,
            "offset {offset}"
        );
        let (pos, h) = seg.translate_offset(offset).unwrap().unwrap();
        assert_eq!(h.base_offset, expect_base);
        assert_eq!(
            pos as usize,
            sizes[..((expect_base - 1000) / 5) as usize]
                .iter()
                .sum::<usize>()
        );
    }
    assert!(seg.read(1050, MB, i64::MAX, false).unwrap().is_empty());
    // Below the base offset: from the first batch.
    assert_eq!(
        headers(&seg.read(0, MB, i64::MAX, false).unwrap())[0].base_offset,
        1000
    );

    // max_bytes takes whole batches only.
    let b = sizes[0];
    assert_eq!(
        seg.read(1000, (2 * b + b / 2) as i64, i64::MAX, false)
            .unwrap()
            .len(),
        2 * b
    );
    assert_eq!(
        seg.read(1000, (2 * b) as i64, i64::MAX, false)
            .unwrap()
            .len(),
        2 * b
    );
    // max_offset: no batch whose base offset is >= max_offset.
    let hs = headers(&seg.read(1000, MB, 1015, false).unwrap());
    assert_eq!(
        hs.iter().map(|h| h.base_offset).collect::<Vec<_>>(),
        vec![1000, 1005, 1010]
    );
    assert_eq!(headers(&seg.read(1000, MB, 1011, false).unwrap()).len(), 3);
    assert!(seg.read(1012, MB, 1010, false).unwrap().is_empty());
    // min_one_batch (KIP-74): a first batch bigger than max_bytes comes alone.
    assert!(seg.read(1000, 10, i64::MAX, false).unwrap().is_empty());
    assert_eq!(seg.read(1000, 10, i64::MAX, true).unwrap().len(), b);
    assert_eq!(seg.read(1007, 0, i64::MAX, true).unwrap().len(), b);
}

/// `read_region` (headers only) names exactly the bytes `read` returns, for every start offset,
/// byte limit and offset bound, with a sparse and a dense index and batches of mixed sizes.
#[test]
fn read_region_matches_read() {
    for interval in [1, 300, 4096] {
        let dir = TestDir::new("read_region");
        let mut seg = open(&dir, 500, interval);
        for i in 0..40 {
            append_batch(&mut seg, 1 + i % 4, i as i64, 10 + (i * 37) % 200);
        }
        let end = seg.next_offset();
        let size = seg.size() as i64;
        for offset in (490..end + 2).step_by(3) {
            for max_bytes in [0, 50, 333, 1000, 4095, size, 10 * size] {
                for max_offset in [500, 517, end - 1, end, i64::MAX] {
                    for min_one in [false, true] {
                        let data = seg.read(offset, max_bytes, max_offset, min_one).unwrap();
                        let region = seg
                            .read_region(offset, max_bytes, max_offset, min_one)
                            .unwrap();
                        let case = format!(
                            "interval {interval} offset {offset} max_bytes {max_bytes} \
                             max_offset {max_offset} min_one {min_one}"
                        );
                        match region {
                            None => assert!(data.is_empty(), "{case}"),
                            Some((position, length, next_offset)) => {
                                let mut buf = vec![0u8; length];
                                seg.log_file()
                                    .unwrap()
                                    .read_exact_at(&mut buf, position)
                                    .unwrap();
                                assert_eq!(buf, data, "{case}");
                                let last = headers(&data).last().unwrap().last_offset();
                                assert_eq!(next_offset, last + 1, "{case}");
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn truncate_to_removes_whole_batches_and_index_entries() {
    let dir = TestDir::new("truncate");
    let mut seg = open(&dir, 0, 1);
    for i in 0..6 {
        append_batch(&mut seg, 4, 100 * (i + 1), 30); // offsets 4i..4i+3, max ts 100(i+1)+3
    }
    let size_before = seg.size();
    let batch = simple_batch(4, 0, 30).len() as u64;
    assert_eq!(seg.truncate_to(1000).unwrap(), 0);
    // Offset 13 lies in batch [12..15]: the whole batch goes.
    let removed = seg.truncate_to(13).unwrap();
    assert_eq!(removed, size_before - 3 * batch);
    assert_eq!((seg.size(), seg.next_offset()), (3 * batch, 12));
    assert_eq!(
        (seg.max_timestamp(), seg.offset_of_max_timestamp()),
        (303, 11)
    );
    let oi = seg.offset_index();
    assert!((0..oi.entries()).all(|i| oi.entry(i).offset < 13));
    let ti = seg.time_index();
    assert!((0..ti.entries()).all(|i| ti.entry(i).offset < 13));
    assert_eq!(file_len(&dir, 0, "log"), 3 * batch);
    // Appending continues at the new end.
    let r = append_batch(&mut seg, 1, 50, 1);
    assert_eq!(r.last_offset, 12);
    assert_eq!(
        (seg.max_timestamp(), seg.offset_of_max_timestamp()),
        (303, 11)
    );
    let hs = headers(&seg.read(0, MB, i64::MAX, false).unwrap());
    assert_eq!(
        hs.iter().map(|h| h.base_offset).collect::<Vec<_>>(),
        vec![0, 4, 8, 12]
    );
    // Truncating everything.
    let size = seg.size();
    assert_eq!(seg.truncate_to(0).unwrap(), size);
    assert_eq!(
        (seg.size(), seg.next_offset(), seg.max_timestamp()),
        (0, 0, -1)
    );
    assert_eq!(seg.first_batch_timestamp(), -1);
    assert_eq!(seg.offset_index().entries() + seg.time_index().entries(), 0);
}

#[test]
fn reopen_after_close_restores_state() {
    let dir = TestDir::new("reopen");
    let mut seg = Segment::open(dir.path(), 500, 100, 4096).unwrap();
    assert_eq!(file_len(&dir, 500, "index"), 4096);
    assert_eq!(file_len(&dir, 500, "timeindex"), 4092);
    for i in 0..20 {
        append_batch(&mut seg, 2, [5, 9, 3, 7][i % 4] + i as i64 * 10, 40);
    }
    let (next, max_ts, max_off) = (
        seg.next_offset(),
        seg.max_timestamp(),
        seg.offset_of_max_timestamp(),
    );
    let entries = seg.offset_index().entries();
    let size = seg.size();
    seg.close(true).unwrap();
    assert_eq!(
        file_len(&dir, 500, "index"),
        8 * entries as u64,
        "trimmed on close"
    );
    let time_entries = file_len(&dir, 500, "timeindex") / 12;

    let mut seg = Segment::open(dir.path(), 500, 100, 4096).unwrap();
    assert_eq!((seg.size(), seg.next_offset()), (size, next));
    assert_eq!(
        (seg.max_timestamp(), seg.offset_of_max_timestamp()),
        (max_ts, max_off)
    );
    assert_eq!(seg.offset_index().entries(), entries);
    assert_eq!(seg.time_index().entries() as u64, time_entries);
    assert_eq!(
        seg.first_batch_timestamp(),
        6,
        "the first batch's largest timestamp"
    );
    // The final time entry holds the max timestamp.
    seg.map_indexes().unwrap();
    assert_eq!(seg.time_index().last_entry().timestamp, max_ts);
    // Appending again grows the trimmed indexes back to their preallocated size.
    append_batch(&mut seg, 1, 1, 300);
    append_batch(&mut seg, 1, 1, 300);
    assert_eq!(file_len(&dir, 500, "index"), 4096);
    assert_eq!(seg.offset_index().entries(), entries + 1);
    assert_eq!(seg.next_offset(), next + 2);
}

#[test]
fn reopen_after_crash_without_close() {
    let dir = TestDir::new("crash");
    let mut seg = open(&dir, 0, 200);
    for i in 0..30 {
        append_batch(&mut seg, 3, 1000 + i, 50);
    }
    let (next, entries, max_ts) = (
        seg.next_offset(),
        seg.offset_index().entries(),
        seg.max_timestamp(),
    );
    drop(seg); // no close: indexes stay preallocated
    assert_eq!(file_len(&dir, 0, "index"), 10 * MB as u64);
    let seg = open(&dir, 0, 200);
    assert_eq!(seg.next_offset(), next);
    assert_eq!(
        seg.offset_index().entries(),
        entries,
        "valid entries found in a preallocated file"
    );
    assert_eq!(
        seg.max_timestamp(),
        max_ts,
        "tail scan covers batches after the last entry"
    );
}

#[test]
fn open_drops_index_entries_beyond_the_log() {
    let dir = TestDir::new("index_ahead");
    let mut seg = open(&dir, 0, 1);
    for i in 0..5 {
        append_batch(&mut seg, 1, i, 100);
    }
    let keep = simple_batch(1, 0, 100).len() as u64 * 3;
    drop(seg);
    // The log lost its tail (not flushed) but the mmap'ed index kept entries for it.
    OpenOptions::new()
        .write(true)
        .open(segment_file(dir.path(), 0, "log"))
        .unwrap()
        .set_len(keep)
        .unwrap();
    let mut seg = open(&dir, 0, 1);
    assert_eq!(seg.next_offset(), 3);
    seg.map_indexes().unwrap();
    let oi = seg.offset_index();
    assert!((0..oi.entries()).all(|i| (oi.entry(i).position as u64) < keep));
    assert!(seg.time_index().last_entry().offset < 3);
}

#[test]
fn recover_truncates_torn_tail_and_rebuilds_indexes() {
    let dir = TestDir::new("recover_torn");
    let mut seg = open(&dir, 0, 300);
    for i in 0..40 {
        append_batch(&mut seg, 2, 10 * i, 60);
    }
    let good_size = seg.size();
    let entries: Vec<_> = (0..seg.offset_index().entries())
        .map(|i| seg.offset_index().entry(i))
        .collect();
    let next = seg.next_offset();
    drop(seg);
    // A torn write: half a batch at the end.
    let partial = simple_batch(2, 5, 60);
    let mut f = OpenOptions::new()
        .append(true)
        .open(segment_file(dir.path(), 0, "log"))
        .unwrap();
    f.write_all(&partial[..partial.len() / 2]).unwrap();
    drop(f);

    let mut seg = open(&dir, 0, 300);
    let truncated = seg.recover(MB).unwrap();
    assert_eq!(truncated as usize, partial.len() / 2);
    assert_eq!((seg.size(), seg.next_offset()), (good_size, next));
    seg.map_indexes().unwrap();
    let rebuilt: Vec<_> = (0..seg.offset_index().entries())
        .map(|i| seg.offset_index().entry(i))
        .collect();
    assert_eq!(rebuilt, entries);
    assert_eq!(seg.max_timestamp(), 391);
    assert_eq!(file_len(&dir, 0, "log"), good_size);
    assert_eq!(
        file_len(&dir, 0, "index"),
        8 * entries.len() as u64,
        "trimmed like Kafka"
    );
    // The segment keeps working.
    append_batch(&mut seg, 1, 1, 1);
    assert_eq!(seg.next_offset(), next + 1);
    assert_eq!(seg.recover(MB).unwrap(), 0);
}

#[test]
fn recover_truncates_at_corrupted_byte() {
    let dir = TestDir::new("recover_corrupt");
    let mut seg = open(&dir, 0, 1);
    let batch = simple_batch(3, 0, 40).len() as u64;
    for i in 0..10 {
        append_batch(&mut seg, 3, 100 + i, 40);
    }
    drop(seg);
    // Flip a byte inside the records of the 5th batch (offsets 12..14).
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(segment_file(dir.path(), 0, "log"))
        .unwrap();
    let at = 4 * batch + 70;
    let mut byte = [0u8];
    f.read_exact_at(&mut byte, at).unwrap();
    f.write_all_at(&[byte[0] ^ 0x55], at).unwrap();
    drop(f);

    let mut seg = open(&dir, 0, 1);
    assert_eq!(seg.recover(MB).unwrap(), 6 * batch);
    assert_eq!((seg.size(), seg.next_offset()), (4 * batch, 12));
    assert_eq!(seg.max_timestamp(), 105);
    seg.map_indexes().unwrap();
    let oi = seg.offset_index();
    assert!(oi.entries() > 0);
    assert!((0..oi.entries())
        .all(|i| oi.entry(i).offset < 12 && (oi.entry(i).position as u64) < 4 * batch));
    validate_batches(&seg.read(0, MB, i64::MAX, false).unwrap(), MB).unwrap();
    // Batches larger than max_message_bytes count as corrupt.
    assert_eq!(seg.recover(batch as i64 - 1).unwrap(), 4 * batch);
    assert_eq!(seg.size(), 0);
}

#[test]
fn find_offset_by_timestamp_uncompressed_and_gzip() {
    let dir = TestDir::new("by_ts");
    let mut seg = open(&dir, 0, 1);
    let rec = |ts| TestRecord {
        timestamp: ts,
        key: Some(b"k"),
        value: b"value",
    };
    // offsets 0-2: ts 100, 300, 200; offsets 3-5 (gzip): ts 250, 400, 350; offsets 6-7: 500, 450
    let mut b = batch_of(&[rec(100), rec(300), rec(200)]);
    seg.append(&mut b, 0, 0, -1).unwrap();
    let mut b = compressed_batch(1, &[rec(250), rec(400), rec(350)]);
    seg.append(&mut b, 3, 0, -1).unwrap();
    let mut b = batch_of(&[rec(500), rec(450)]);
    seg.append(&mut b, 6, 0, -1).unwrap();

    let mut find = |ts, start| seg.find_offset_by_timestamp(ts, start).unwrap();
    assert_eq!(find(0, 0), Some((0, 100)));
    assert_eq!(find(150, 0), Some((1, 300)));
    assert_eq!(find(300, 0), Some((1, 300)));
    assert_eq!(find(301, 0), Some((4, 400)), "inside the gzip batch");
    assert_eq!(
        find(260, 2),
        Some((4, 400)),
        "offset 2 has ts 200 < 260; 3 has 250"
    );
    assert_eq!(find(240, 3), Some((3, 250)));
    assert_eq!(find(401, 0), Some((6, 500)));
    assert_eq!(find(450, 7), Some((7, 450)));
    assert_eq!(find(501, 0), None);
    assert_eq!(seg.max_timestamp_record().unwrap(), Some((6, 500)));
}

#[test]
fn find_offset_by_timestamp_every_codec() {
    for codec in 1..=4 {
        let dir = TestDir::new("by_ts_codec");
        let mut seg = open(&dir, 10, 4096);
        let rec = |ts| TestRecord {
            timestamp: ts,
            key: None,
            value: b"abcdefgh",
        };
        let mut b = compressed_batch(codec, &[rec(10), rec(30), rec(20), rec(30)]);
        seg.append(&mut b, 10, 0, -1).unwrap();
        assert_eq!(
            seg.find_offset_by_timestamp(25, 0).unwrap(),
            Some((11, 30)),
            "codec {codec}"
        );
        assert_eq!(
            seg.find_offset_by_timestamp(25, 12).unwrap(),
            Some((13, 30)),
            "codec {codec}"
        );
        assert_eq!(
            seg.max_timestamp_record().unwrap(),
            Some((11, 30)),
            "codec {codec}"
        );
    }
}

/// Kafka's testFetchOffsetByTimestampForMaxTimestampWithUnorderedTimestamps: 0,1,2,3,4,6,5.
#[test]
fn max_timestamp_record_with_unordered_timestamps() {
    let dir = TestDir::new("max_ts");
    let mut seg = open(&dir, 0, 1);
    assert_eq!(seg.max_timestamp_record().unwrap(), None);
    for ts in [0, 1, 2, 3, 4, 6, 5] {
        let mut b = batch_of(&[TestRecord {
            timestamp: ts,
            key: None,
            value: b"x",
        }]);
        let next = seg.next_offset();
        seg.append(&mut b, next, 0, -1).unwrap();
    }
    assert_eq!(seg.max_timestamp_record().unwrap(), Some((5, 6)));
    // Within one batch: the first record holding the max.
    let dir = TestDir::new("max_ts_batch");
    let mut seg = open(&dir, 0, 1);
    let recs: Vec<_> = [3, 9, 1, 9]
        .iter()
        .map(|&ts| TestRecord {
            timestamp: ts,
            key: None,
            value: b"x",
        })
        .collect();
    let mut b = batch_of(&recs);
    seg.append(&mut b, 0, 0, -1).unwrap();
    assert_eq!(seg.max_timestamp_record().unwrap(), Some((1, 9)));
}

#[test]
fn time_index_stays_monotonic() {
    let dir = TestDir::new("ts_monotonic");
    let mut seg = open(&dir, 0, 1);
    for ts in [500, 100, 700, 300, 700, 900, 50, 60] {
        append_batch(&mut seg, 1, ts, 10);
    }
    seg.on_become_inactive().unwrap();
    seg.map_indexes().unwrap();
    let ti = seg.time_index();
    let entries: Vec<_> = (0..ti.entries()).map(|i| ti.entry(i)).collect();
    assert!(entries
        .windows(2)
        .all(|w| w[0].timestamp < w[1].timestamp && w[0].offset <= w[1].offset));
    assert_eq!(
        entries
            .iter()
            .map(|e| (e.timestamp, e.offset))
            .collect::<Vec<_>>(),
        vec![(500, 0), (700, 2), (900, 5)]
    );
    assert_eq!(file_len(&dir, 0, "timeindex"), 36);
}

#[test]
fn index_full_never_grows_past_max_index_size() {
    let dir = TestDir::new("full");
    let mut seg = Segment::open(dir.path(), 0, 0, 40).unwrap(); // 5 offset entries, 3 time entries
    let mut n = 0;
    while !seg.index_is_full() {
        append_batch(&mut seg, 1, n, 1);
        n += 1;
        assert!(n < 100);
    }
    assert_eq!(
        seg.time_index().entries(),
        2,
        "one slot kept for the final entry"
    );
    for _ in 0..10 {
        append_batch(&mut seg, 1, n, 1); // the caller should roll; appends still work
        n += 1;
    }
    seg.on_become_inactive().unwrap();
    assert_eq!(seg.time_index().entries(), 3);
    assert!(file_len(&dir, 0, "index") <= 40 && file_len(&dir, 0, "timeindex") <= 40);
}

#[test]
fn batches_lists_headers() {
    let dir = TestDir::new("batches");
    let mut seg = open(&dir, 0, 4096);
    append_batch(&mut seg, 2, 10, 5);
    let mut b = simple_batch(3, 20, 5);
    seg.append(&mut b, 2, 7, -1).unwrap();
    let list = seg.batches(0).unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(
        (
            list[1].base_offset,
            list[1].last_offset,
            list[1].partition_leader_epoch
        ),
        (2, 4, 7)
    );
    assert_eq!(list[1].position, list[0].size);
    assert_eq!(
        (
            list[1].producer_id,
            list[1].producer_epoch,
            list[1].base_sequence
        ),
        (1234, 5, 7)
    );
    assert_eq!(list[1].max_timestamp, 22);
    assert_eq!(seg.batches(list[1].position).unwrap(), list[1..]);
}

#[test]
fn flush_delete_and_rename() {
    let dir = TestDir::new("lifecycle");
    let mut seg = open(&dir, 7, 4096);
    append_batch(&mut seg, 1, 1, 1);
    seg.flush().unwrap();
    assert!(seg.last_modified_ms().unwrap() > 0);
    seg.rename_suffix(".deleted").unwrap();
    // No `.txnindex` was created: none is renamed.
    assert!(!segment_file(dir.path(), 7, "txnindex.deleted").exists());
    for ext in ["log", "index", "timeindex"] {
        let p = segment_file(dir.path(), 7, ext);
        assert!(!p.exists());
        assert!(p.with_extension(format!("{ext}.deleted")).exists());
    }
    let seg = open(&dir, 8, 4096);
    seg.delete().unwrap();
    for ext in ["log", "index", "timeindex"] {
        assert!(!segment_file(dir.path(), 8, ext).exists());
    }
}

/// A transactional batch of `n` records of producer `pid` (epoch 2).
fn txn_batch(pid: i64, n: usize) -> Vec<u8> {
    let pairs: Vec<KeyValue<'_>> = (0..n).map(|_| (None, Some(b"v".as_slice()))).collect();
    let producer = ProducerFields {
        producer_id: pid,
        producer_epoch: 2,
        base_sequence: 0,
    };
    build_batch_with_attributes(&pairs, 0, 1000, producer, TRANSACTIONAL_FLAG_MASK).unwrap()
}

fn aborted(producer_id: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
    AbortedTxn {
        producer_id,
        first_offset: first,
        last_offset: last,
        last_stable_offset: lso,
    }
}

#[test]
fn batches_report_control_markers() {
    let dir = TestDir::new("batches_markers");
    let mut seg = open(&dir, 0, 4096);
    seg.append_copy(&txn_batch(9, 2), 0, 1, -1).unwrap(); // 0..1
    seg.append_copy(&build_control_batch(9, 2, 17, true, 1001), 2, 1, -1)
        .unwrap(); // 2
    seg.append_copy(&txn_batch(9, 1), 3, 1, -1).unwrap(); // 3
    seg.append_copy(&build_control_batch(9, 2, 18, false, 1002), 4, 1, -1)
        .unwrap(); // 4
    let list = seg.batches(0).unwrap();
    let got: Vec<(i64, bool, bool, i16, i32)> = list
        .iter()
        .map(|b| {
            (
                b.base_offset,
                b.is_transactional,
                b.is_control,
                b.control_type,
                b.coordinator_epoch,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (0, true, false, -1, -1),
            (2, true, true, 1, 17),
            (3, true, false, -1, -1),
            (4, true, true, 0, 18),
        ]
    );
    assert_eq!((list[1].producer_id, list[1].producer_epoch), (9, 2));
    assert_eq!((list[1].base_sequence, list[1].max_timestamp), (-1, 1001));
    assert_eq!(seg.batches(list[3].position).unwrap(), list[3..]);
}

#[test]
fn txn_index_lives_with_the_segment() {
    let dir = TestDir::new("txn_segment");
    let txn_path = segment_file(dir.path(), 100, "txnindex");
    let mut seg = open(&dir, 100, 4096);
    assert!(!seg.has_txn_index() && !txn_path.exists());
    for _ in 0..10 {
        append_batch(&mut seg, 2, 1, 10); // 100..119
    }
    seg.flush().unwrap(); // no .txnindex: nothing to sync, no error
    seg.append_aborted_txn(aborted(1, 100, 103, 100)).unwrap();
    seg.append_aborted_txn(aborted(2, 101, 108, 104)).unwrap();
    seg.append_aborted_txn(aborted(3, 110, 115, 109)).unwrap();
    assert!(matches!(
        seg.append_aborted_txn(aborted(4, 110, 115, 109)),
        Err(StorageError::InvalidArgument(_))
    ));
    assert!(seg.has_txn_index() && !seg.txn_index_damaged());
    assert_eq!(file_len(&dir, 100, "txnindex"), 3 * 34);
    seg.flush().unwrap();
    assert_eq!(
        seg.collect_aborted_txns(104, 110).unwrap(),
        (vec![aborted(2, 101, 108, 104)], false)
    );
    assert_eq!(
        seg.collect_aborted_txns(100, 104).unwrap(),
        (
            vec![aborted(1, 100, 103, 100), aborted(2, 101, 108, 104)],
            true
        )
    );
    seg.close(true).unwrap();

    // Reopened with the segment; truncation drops the entries ending at or after the offset,
    // even past the log end.
    let mut seg = open(&dir, 100, 4096);
    assert!(seg.has_txn_index() && !seg.txn_index_damaged());
    assert_eq!(seg.aborted_txns().unwrap().len(), 3);
    seg.truncate_to(200).unwrap();
    assert_eq!(seg.aborted_txns().unwrap().len(), 3);
    seg.truncate_to(110).unwrap();
    assert_eq!(seg.next_offset(), 110);
    assert_eq!(
        seg.aborted_txns().unwrap(),
        [aborted(1, 100, 103, 100), aborted(2, 101, 108, 104)]
    );
    seg.truncate_to(108).unwrap();
    assert_eq!(seg.aborted_txns().unwrap(), [aborted(1, 100, 103, 100)]);

    // Recovery empties it (the caller appends what it finds again).
    seg.recover(MB).unwrap();
    assert!(seg.has_txn_index());
    assert!(seg.aborted_txns().unwrap().is_empty());
    assert_eq!(file_len(&dir, 100, "txnindex"), 0);
    seg.append_aborted_txn(aborted(1, 100, 103, 100)).unwrap();

    // Renamed and deleted with the other files.
    seg.rename_suffix(".deleted").unwrap();
    assert!(!txn_path.exists());
    assert!(txn_path.with_extension("txnindex.deleted").exists());
    let mut seg = open(&dir, 100, 4096);
    assert!(!seg.has_txn_index());
    seg.append_aborted_txn(aborted(1, 100, 103, 100)).unwrap();
    seg.delete().unwrap();
    assert!(!txn_path.exists());
}

#[test]
fn damaged_txn_index_is_flagged_until_recovery() {
    let dir = TestDir::new("txn_segment_damaged");
    let mut seg = open(&dir, 0, 4096);
    append_batch(&mut seg, 5, 1, 10);
    seg.append_aborted_txn(aborted(1, 0, 3, 0)).unwrap();
    seg.close(true).unwrap();
    let path = segment_file(dir.path(), 0, "txnindex");
    OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(&[0; 10])
        .unwrap();
    let mut seg = open(&dir, 0, 4096);
    assert!(seg.txn_index_damaged());
    assert!(matches!(
        seg.collect_aborted_txns(0, 10),
        Err(StorageError::InvalidArgument(m)) if m.contains("damaged")
    ));
    seg.recover(MB).unwrap();
    assert!(!seg.txn_index_damaged());
    assert_eq!(seg.collect_aborted_txns(0, 10).unwrap(), (vec![], false));
    seg.append_aborted_txn(aborted(1, 0, 3, 0)).unwrap();
    assert_eq!(seg.aborted_txns().unwrap(), [aborted(1, 0, 3, 0)]);
}

/// Rough throughput check: `cargo test --release -- --ignored --nocapture throughput`.
#[test]
#[ignore]
fn append_read_throughput() {
    let dir = TestDir::new("throughput");
    let mut seg = Segment::open(dir.path(), 0, 4096, 10 * MB).unwrap();
    let one = simple_batch(10, 1, 100);
    let mut buf = Vec::new();
    while buf.len() + one.len() <= MB as usize {
        buf.extend_from_slice(&one);
    }
    let rounds = 512;
    let start = std::time::Instant::now();
    for _ in 0..rounds {
        let next = seg.next_offset();
        seg.append(&mut buf, next, 1, -1).unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "append: {:.2} GB/s",
        (rounds * buf.len()) as f64 / secs / 1e9
    );
    let start = std::time::Instant::now();
    let mut offset = 0;
    let mut total = 0;
    while offset < seg.next_offset() {
        let data = seg.read(offset, MB, i64::MAX, true).unwrap();
        total += data.len();
        offset = headers(&data).last().unwrap().last_offset() + 1;
    }
    println!(
        "read: {:.2} GB/s",
        total as f64 / start.elapsed().as_secs_f64() / 1e9
    );
    let start = std::time::Instant::now();
    for _ in 0..64 {
        let next = seg.next_offset();
        seg.append(&mut buf, next, 1, 123).unwrap();
    }
    println!(
        "append LogAppendTime: {:.2} GB/s",
        (64 * buf.len()) as f64 / start.elapsed().as_secs_f64() / 1e9
    );
}

#[cfg(target_os = "linux")]
#[test]
fn indexes_are_mapped_only_while_used() {
    use crate::test_dir::vm_flags_of_mapping;
    let dir = TestDir::new("lazy_indexes");
    let index = segment_file(dir.path(), 0, "index");
    let time_index = segment_file(dir.path(), 0, "timeindex");
    let mapped = || [&index, &time_index].map(|p| vm_flags_of_mapping(p).is_some());

    let mut seg = open(&dir, 0, 1);
    assert_eq!(
        mapped(),
        [false, false],
        "a new segment maps nothing until used"
    );
    for i in 0..10 {
        append_batch(&mut seg, 2, 100 + i, 40);
    }
    assert_eq!(mapped(), [true, true], "appends map both indexes");
    let (entries, next) = (seg.offset_index().entries(), seg.next_offset());
    seg.on_become_inactive().unwrap();
    assert_eq!(
        mapped(),
        [false, false],
        "an inactive segment releases them"
    );
    assert_eq!(file_len(&dir, 0, "index"), 8 * entries as u64, "trimmed");
    seg.close(true).unwrap();

    let mut seg = open(&dir, 0, 1);
    assert_eq!(
        (seg.offset_index().entries(), seg.next_offset()),
        (entries, next)
    );
    assert_eq!(
        mapped(),
        [false, false],
        "opening reads the indexes and releases them"
    );
    let read = seg.read(7, MB, i64::MAX, false).unwrap();
    assert_eq!(BatchHeader::parse(&read).unwrap().base_offset, 6);
    assert!(mapped()[0], "a read maps them again");
    assert_eq!(
        seg.find_offset_by_timestamp(105, 0).unwrap(),
        Some((9, 105))
    );
    seg.on_become_inactive().unwrap();
    assert_eq!(mapped(), [false, false]);

    // Closing a segment whose indexes were never used since it was opened writes nothing.
    let before = std::fs::metadata(&time_index).unwrap().modified().unwrap();
    let seg = open(&dir, 0, 1);
    seg.close(true).unwrap();
    assert_eq!(
        std::fs::metadata(&time_index).unwrap().modified().unwrap(),
        before
    );
    assert_eq!(file_len(&dir, 0, "index"), 8 * entries as u64);
}

/// A batch the cleaner kept tombstones in carries their delete horizon as `baseTimestamp`
/// (KIP-534), far above its records' timestamps; a follower copies it as it is. The segment's age
/// (`first_batch_timestamp`, for the segment.ms roll and max.compaction.lag.ms) is its largest
/// record timestamp, as Kafka's `rollingBasedTimestamp`, after an append, a reopen and a recovery.
#[test]
fn first_batch_timestamp_ignores_a_delete_horizon() {
    let dir = TestDir::new("horizon");
    let (horizon, record_time) = (1_000_000_000i64, 1_000i64);
    let records = [TestRecord {
        timestamp: record_time,
        key: Some(b"k"),
        value: b"",
    }];
    let payload = encode_records(horizon, &records);
    let delete_horizon_flag = 0x40;
    let mut batch = build_raw_batch(7, delete_horizon_flag, 0, horizon, record_time, 1, &payload);
    let mut seg = open(&dir, 0, 4096);
    seg.append(&mut batch, -1, -1, -1).unwrap(); // as a follower: offsets and epoch kept
    assert_eq!(seg.first_batch_timestamp(), record_time);
    seg.close(true).unwrap();
    let mut seg = open(&dir, 0, 4096);
    assert_eq!(seg.first_batch_timestamp(), record_time);
    seg.recover(MB).unwrap();
    assert_eq!(seg.first_batch_timestamp(), record_time);
}
