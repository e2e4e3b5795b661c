//! Tests of `cleaner.rs`: segments written to a temporary directory, cleaned into a second
//! segment, and read back batch by batch.

use std::collections::HashMap;

use crate::batch::{validate_batches, BatchHeader, CONTROL_FLAG_MASK, TRANSACTIONAL_FLAG_MASK};
use crate::builder::{build_batch_with_attributes, build_control_batch, KeyValue, ProducerFields};
use crate::cleaner::{
    throttle_delay, Cleaning, LastRecord, OffsetMap, RetentionRules, SegmentSource, Throttler,
    DELETE_HORIZON_FLAG_MASK,
};
use crate::columnar::compress;
use crate::crc32c::crc32c;
use crate::errors::StorageError;
use crate::records::{read_record_batches, BatchRecords, Record};
use crate::segment::Segment;
use crate::test_dir::TestDir;
use crate::txn_index::AbortedTxn;

const NOW: i64 = 1_000_000;
const DELETE_RETENTION: i64 = 86_400_000;

fn producer(id: i64, epoch: i16, seq: i32) -> ProducerFields {
    ProducerFields {
        producer_id: id,
        producer_epoch: epoch,
        base_sequence: seq,
    }
}

/// An uncompressed batch of `records` (timestamps `ts`, `ts + 1`, ...), then compressed with
/// `codec` if it is not 0.
fn batch(records: &[KeyValue<'_>], ts: i64, codec: i16, p: ProducerFields, attrs: i16) -> Vec<u8> {
    let mut b = build_batch_with_attributes(records, 0, ts, p, attrs).unwrap();
    // Distinct timestamps: rewrite each record's timestampDelta (one byte: deltas < 64).
    let mut pos = 61;
    for i in 0..records.len() {
        let (len, n) = read_varint(&b[pos..]);
        b[pos + n + 1] = (i as u8) << 1; // zigzag(i)
        pos += n + len as usize;
    }
    b[35..43].copy_from_slice(&(ts + records.len() as i64 - 1).to_be_bytes());
    if codec != 0 {
        let mut compressed = Vec::new();
        compress(codec as u8, &b[61..], &mut compressed).unwrap();
        b.truncate(61);
        b.extend_from_slice(&compressed);
        let length = (b.len() - 12) as i32;
        b[8..12].copy_from_slice(&length.to_be_bytes());
        b[21..23].copy_from_slice(&(attrs | codec).to_be_bytes());
    }
    let crc = crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

fn read_varint(buf: &[u8]) -> (i64, usize) {
    let (mut raw, mut shift, mut n) = (0u64, 0, 0);
    loop {
        let byte = buf[n];
        raw |= ((byte & 0x7F) as u64) << shift;
        n += 1;
        if byte & 0x80 == 0 {
            return (((raw >> 1) as i64) ^ -((raw & 1) as i64), n);
        }
        shift += 7;
    }
}

fn plain(records: &[KeyValue<'_>], ts: i64) -> Vec<u8> {
    batch(records, ts, 0, ProducerFields::NONE, 0)
}

/// A segment at `base` holding `batches`, offsets assigned from `base` (gaps where a batch says
/// so: `(first offset, bytes)`).
fn segment(dir: &TestDir, base: i64, batches: &[(i64, Vec<u8>)]) -> Segment {
    let mut seg = Segment::open(dir.path(), base, 4096, 1 << 20).unwrap();
    for (offset, bytes) in batches {
        seg.append_copy(bytes, *offset, -1, -1).unwrap();
    }
    seg.on_become_inactive().unwrap();
    seg
}

fn cleaned(dir: &TestDir, base: i64) -> Segment {
    Segment::open_with_suffix(dir.path(), base, ".cleaned", 4096, 1 << 20).unwrap()
}

fn rules(now_ms: i64) -> RetentionRules {
    RetentionRules {
        now_ms,
        delete_retention_ms: DELETE_RETENTION,
        active_producers: HashMap::new(),
    }
}

fn contents(seg: &mut Segment) -> Vec<u8> {
    seg.read(seg.base_offset(), i64::MAX, i64::MAX, true)
        .unwrap()
}

fn headers(mut buf: &[u8]) -> Vec<BatchHeader> {
    let mut out = Vec::new();
    while let Some(h) = BatchHeader::parse(buf) {
        out.push(h);
        buf = &buf[h.size()..];
    }
    out
}

/// `(offset, key, value)`.
type KeptRecord = (i64, Option<Vec<u8>>, Option<Vec<u8>>);

fn records(data: &[u8]) -> Vec<KeptRecord> {
    read_record_batches(data)
        .unwrap()
        .into_iter()
        .flat_map(|b: BatchRecords| b.records)
        .map(|r: Record| (r.offset, r.key, r.value))
        .collect()
}

/// Maps `sources` (whole segments, dirty from offset 0) then cleans them into one new segment.
fn clean_all(
    dir: &TestDir,
    sources: &mut [Segment],
    rules: &RetentionRules,
    aborted: &[AbortedTxn],
) -> (Segment, Cleaning) {
    let mut cleaning = Cleaning::new(OffsetMap::new(1 << 20, 0.9, 1000));
    cleaning.add_aborted_for_map(aborted.iter().copied());
    let ends: Vec<i64> = sources.iter().map(|s| s.next_offset()).collect();
    for (seg, end) in sources.iter_mut().zip(&ends) {
        let source = SegmentSource::of(seg, 0).unwrap();
        assert!(!cleaning.map_segment(&source, 0, *end, None).unwrap());
    }
    let mut dest = cleaned(dir, sources[0].base_offset());
    for seg in sources.iter_mut() {
        cleaning.add_aborted_for_clean(aborted.iter().copied());
        let source = SegmentSource::of(seg, 0).unwrap();
        cleaning
            .clean_segment(&source, &mut dest, rules, None)
            .unwrap();
    }
    (dest, cleaning)
}

#[test]
fn offset_map_keeps_the_last_offset_of_each_key_until_full() {
    let mut map = OffsetMap::new(0, 0.5, 10);
    assert_eq!(map.get(b"a"), -1);
    assert!(map.put(b"a", 3));
    assert!(map.put(b"b", 4));
    assert!(map.put(b"a", 7));
    assert_eq!((map.get(b"a"), map.get(b"b"), map.len()), (7, 4, 2));
    for i in 0..510u32 {
        assert!(map.put(&i.to_be_bytes(), i as i64));
    }
    // 1024 slots at load factor 0.5: full at 512 keys.
    assert!(!map.put(b"one more", 1));
    assert_eq!(map.len(), 512);
    for i in 0..510u32 {
        assert_eq!(map.get(&i.to_be_bytes()), i as i64);
    }
    assert!((map.utilization() - 0.5).abs() < 1e-9);
}

#[test]
fn keeps_the_last_record_of_each_key_with_its_offset() {
    let dir = TestDir::new("cleaner-dedupe");
    let mut seg = segment(
        &dir,
        0,
        &[
            (
                0,
                plain(&[(Some(b"a"), Some(b"1")), (Some(b"b"), Some(b"1"))], 100),
            ),
            (2, plain(&[(Some(b"a"), Some(b"2"))], 110)),
            (
                3,
                plain(&[(Some(b"c"), Some(b"1")), (Some(b"b"), Some(b"2"))], 120),
            ),
        ],
    );
    let (mut dest, cleaning) = clean_all(&dir, std::slice::from_mut(&mut seg), &rules(NOW), &[]);
    let data = contents(&mut dest);
    validate_batches(&data, i64::MAX).unwrap();
    assert_eq!(
        records(&data),
        vec![
            (2, Some(b"a".to_vec()), Some(b"2".to_vec())),
            (3, Some(b"c".to_vec()), Some(b"1".to_vec())),
            (4, Some(b"b".to_vec()), Some(b"2".to_vec())),
        ]
    );
    // The first batch lost everything; the second is copied; the third is whole too.
    let hs = headers(&data);
    assert_eq!(
        hs.iter()
            .map(|h| (h.base_offset, h.last_offset()))
            .collect::<Vec<_>>(),
        vec![(2, 2), (3, 4)]
    );
    assert_eq!(dest.next_offset(), 5);
    let stats = cleaning.stats();
    assert_eq!((stats.messages_read, stats.messages_written), (5, 3));
    assert_eq!(cleaning.map().latest_offset(), 4);
}

#[test]
fn a_partly_kept_batch_is_rebuilt_with_its_offsets_timestamps_and_producer_fields() {
    let dir = TestDir::new("cleaner-rebuild");
    let p = producer(42, 3, 100);
    let first = batch(
        &[
            (Some(b"a"), Some(b"1")),
            (Some(b"b"), Some(b"1")),
            (Some(b"c"), Some(b"1")),
        ],
        1000,
        0,
        p,
        0,
    );
    let second = plain(&[(Some(b"a"), Some(b"2")), (Some(b"c"), Some(b"2"))], 2000);
    let mut seg = segment(&dir, 10, &[(10, first), (13, second)]);
    let (mut dest, _) = clean_all(&dir, std::slice::from_mut(&mut seg), &rules(NOW), &[]);
    let data = contents(&mut dest);
    validate_batches(&data, i64::MAX).unwrap();
    let hs = headers(&data);
    // Only "b" (offset 11, timestamp 1001) is left of the first batch: same base offset, same
    // last offset delta (sequence numbers survive), producer fields kept.
    assert_eq!(hs[0].base_offset, 10);
    assert_eq!(hs[0].last_offset_delta, 2);
    assert_eq!(hs[0].records_count, 1);
    assert_eq!(
        (hs[0].producer_id, hs[0].producer_epoch, hs[0].base_sequence),
        (42, 3, 100)
    );
    assert_eq!((hs[0].base_timestamp, hs[0].max_timestamp), (1001, 1001));
    let batches = read_record_batches(&data).unwrap();
    assert_eq!(batches[0].records[0].offset, 11);
    assert_eq!(batches[0].records[0].timestamp, 1001);
    assert_eq!(batches[0].records[0].key.as_deref(), Some(&b"b"[..]));
}

#[test]
fn every_codec_is_rebuilt_with_its_codec() {
    for codec in 1..=4i16 {
        let dir = TestDir::new(&format!("cleaner-codec-{codec}"));
        let value = vec![b'x'; 300];
        let recs: Vec<KeyValue<'_>> = (0..20u8)
            .map(|i| {
                (
                    Some(&b"kkkkkkkkkk"[..(i % 5 + 1) as usize]),
                    Some(&value[..]),
                )
            })
            .collect();
        let b = batch(&recs, 5000, codec, ProducerFields::NONE, 0);
        let mut seg = segment(&dir, 0, &[(0, b)]);
        let (mut dest, _) = clean_all(&dir, std::slice::from_mut(&mut seg), &rules(NOW), &[]);
        let data = contents(&mut dest);
        validate_batches(&data, i64::MAX).unwrap();
        let hs = headers(&data);
        assert_eq!(hs.len(), 1);
        assert_eq!(hs[0].compression(), codec as u8, "codec {codec}");
        assert_eq!(hs[0].records_count, 5);
        let got: Vec<i64> = records(&data).iter().map(|r| r.0).collect();
        assert_eq!(got, vec![15, 16, 17, 18, 19], "codec {codec}");
        let batches = read_record_batches(&data).unwrap();
        assert_eq!(batches[0].records[0].timestamp, 5015);
        assert_eq!(batches[0].records[4].value.as_deref(), Some(&value[..]));
    }
}

#[test]
fn tombstones_get_a_delete_horizon_then_go_after_it() {
    let dir = TestDir::new("cleaner-tombstone");
    let mut seg = segment(
        &dir,
        0,
        &[
            (
                0,
                plain(&[(Some(b"a"), Some(b"1")), (Some(b"b"), Some(b"1"))], 100),
            ),
            (
                2,
                plain(&[(Some(b"a"), None), (Some(b"c"), Some(b"1"))], 200),
            ),
        ],
    );
    let (mut first, _) = clean_all(&dir, std::slice::from_mut(&mut seg), &rules(NOW), &[]);
    let data = contents(&mut first);
    let hs = headers(&data);
    let with_tombstone = hs.iter().find(|h| h.base_offset == 2).unwrap();
    assert_ne!(with_tombstone.attributes & DELETE_HORIZON_FLAG_MASK, 0);
    assert_eq!(with_tombstone.base_timestamp, NOW + DELETE_RETENTION);
    // Record timestamps are unchanged by the new base timestamp.
    let batches = read_record_batches(&data).unwrap();
    let tombstone = &batches[1].records[0];
    assert_eq!((tombstone.offset, tombstone.timestamp), (2, 200));
    assert_eq!(tombstone.value, None);
    first.change_file_suffixes(".cleaned", "").unwrap();

    // Before the horizon the tombstone stays, untouched (copied: it already has its horizon).
    let dir2 = TestDir::new("cleaner-tombstone-2");
    let mut again = segment(&dir2, 0, &[(0, data.clone())]);
    let (mut second, _) = clean_all(
        &dir2,
        std::slice::from_mut(&mut again),
        &rules(NOW + DELETE_RETENTION - 1),
        &[],
    );
    assert_eq!(contents(&mut second), data);

    // At the horizon it goes.
    let dir3 = TestDir::new("cleaner-tombstone-3");
    let mut last = segment(&dir3, 0, &[(0, data)]);
    let (mut third, _) = clean_all(
        &dir3,
        std::slice::from_mut(&mut last),
        &rules(NOW + DELETE_RETENTION),
        &[],
    );
    let keys: Vec<_> = records(&contents(&mut third))
        .into_iter()
        .map(|r| (r.0, r.1))
        .collect();
    assert_eq!(
        keys,
        vec![(1, Some(b"b".to_vec())), (3, Some(b"c".to_vec()))]
    );
}

#[test]
fn records_without_a_key_are_dropped() {
    let dir = TestDir::new("cleaner-keyless");
    let mut seg = segment(
        &dir,
        0,
        &[(0, plain(&[(None, Some(b"x")), (Some(b"k"), Some(b"v"))], 1))],
    );
    let (mut dest, cleaning) = clean_all(&dir, std::slice::from_mut(&mut seg), &rules(NOW), &[]);
    assert_eq!(records(&contents(&mut dest)).len(), 1);
    assert_eq!(cleaning.stats().invalid_messages, 1);
}

#[test]
fn aborted_transactions_lose_their_records_then_their_marker() {
    let dir = TestDir::new("cleaner-aborted");
    let txn = producer(7, 0, 0);
    let data = batch(
        &[(Some(b"a"), Some(b"x"))],
        10,
        0,
        txn,
        TRANSACTIONAL_FLAG_MASK,
    );
    let abort = build_control_batch(7, 0, 5, false, 20);
    let other = plain(&[(Some(b"b"), Some(b"1"))], 30);
    let mut seg = segment(&dir, 0, &[(0, data), (1, abort), (2, other)]);
    let aborted = [AbortedTxn {
        producer_id: 7,
        first_offset: 0,
        last_offset: 1,
        last_stable_offset: 2,
    }];
    // First clean: the data goes, the marker stays (a batch of its transaction was met) and its
    // transaction stays in the new segment's index.
    let (mut first, _) = clean_all(&dir, std::slice::from_mut(&mut seg), &rules(NOW), &aborted);
    let data = contents(&mut first);
    let hs = headers(&data);
    assert_eq!(
        hs.iter().map(|h| h.base_offset).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(hs[0].attributes & DELETE_HORIZON_FLAG_MASK, 0);
    assert_eq!(first.aborted_txns().unwrap(), aborted.to_vec());

    // Second clean: no batch of the transaction is left, so the marker gets a delete horizon
    // and the index entry goes.
    let dir2 = TestDir::new("cleaner-aborted-2");
    let mut seg2 = segment(&dir2, 0, &[(1, data)]);
    let (mut second, _) = clean_all(
        &dir2,
        std::slice::from_mut(&mut seg2),
        &rules(NOW),
        &aborted,
    );
    let data2 = contents(&mut second);
    let marker = headers(&data2)[0];
    assert_eq!(marker.base_offset, 1);
    assert_eq!(
        marker.attributes & (CONTROL_FLAG_MASK | DELETE_HORIZON_FLAG_MASK),
        CONTROL_FLAG_MASK | DELETE_HORIZON_FLAG_MASK
    );
    assert_eq!(marker.base_timestamp, NOW + DELETE_RETENTION);
    assert!(second.aborted_txns().unwrap().is_empty());

    // Third clean, past the horizon: the marker goes.
    let dir3 = TestDir::new("cleaner-aborted-3");
    let mut seg3 = segment(&dir3, 1, &[(1, data2)]);
    let (mut third, _) = clean_all(
        &dir3,
        std::slice::from_mut(&mut seg3),
        &rules(NOW + DELETE_RETENTION),
        &aborted,
    );
    let left = headers(&contents(&mut third));
    assert_eq!(
        left.iter().map(|h| h.base_offset).collect::<Vec<_>>(),
        vec![2]
    );
}

#[test]
fn a_commit_marker_stays_while_its_transaction_has_batches() {
    let dir = TestDir::new("cleaner-commit");
    let txn = producer(9, 1, 0);
    let data = batch(
        &[(Some(b"a"), Some(b"1"))],
        10,
        0,
        txn,
        TRANSACTIONAL_FLAG_MASK,
    );
    let commit = build_control_batch(9, 1, 5, true, 20);
    let newer = plain(&[(Some(b"a"), Some(b"2"))], 30);
    let mut seg = segment(&dir, 0, &[(0, data), (1, commit), (2, newer)]);
    // The transaction's record is superseded, but its batch was met: the marker stays as is.
    let (mut first, _) = clean_all(&dir, std::slice::from_mut(&mut seg), &rules(NOW), &[]);
    let data = contents(&mut first);
    let hs = headers(&data);
    assert_eq!(
        hs.iter().map(|h| h.base_offset).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(hs[0].attributes & DELETE_HORIZON_FLAG_MASK, 0);
    // Then the marker gets its horizon, and goes after it.
    let dir2 = TestDir::new("cleaner-commit-2");
    let mut seg2 = segment(&dir2, 1, &[(1, data)]);
    let (mut second, _) = clean_all(&dir2, std::slice::from_mut(&mut seg2), &rules(NOW), &[]);
    let data2 = contents(&mut second);
    assert_ne!(headers(&data2)[0].attributes & DELETE_HORIZON_FLAG_MASK, 0);
    let dir3 = TestDir::new("cleaner-commit-3");
    let mut seg3 = segment(&dir3, 1, &[(1, data2)]);
    let (mut third, _) = clean_all(
        &dir3,
        std::slice::from_mut(&mut seg3),
        &rules(NOW + DELETE_RETENTION),
        &[],
    );
    assert_eq!(
        headers(&contents(&mut third))
            .iter()
            .map(|h| h.base_offset)
            .collect::<Vec<_>>(),
        vec![2]
    );
}

#[test]
fn an_active_producers_last_batch_stays_as_an_empty_header() {
    let dir = TestDir::new("cleaner-producer");
    let p = producer(5, 2, 40);
    let idempotent = batch(
        &[(Some(b"a"), Some(b"1")), (Some(b"b"), Some(b"1"))],
        10,
        0,
        p,
        0,
    );
    let newer = plain(&[(Some(b"a"), Some(b"2")), (Some(b"b"), Some(b"2"))], 20);
    let mut seg = segment(&dir, 0, &[(0, idempotent), (2, newer)]);
    let mut r = rules(NOW);
    r.active_producers.insert(
        5,
        LastRecord {
            last_data_offset: Some(1),
            producer_epoch: 2,
        },
    );
    let (mut dest, _) = clean_all(&dir, std::slice::from_mut(&mut seg), &r, &[]);
    let data = contents(&mut dest);
    validate_batches(&data, i64::MAX).unwrap();
    let empty = headers(&data)[0];
    assert_eq!(
        (empty.base_offset, empty.last_offset(), empty.records_count),
        (0, 1, 0)
    );
    assert_eq!(
        (empty.producer_id, empty.producer_epoch, empty.base_sequence),
        (5, 2, 40)
    );
    assert_eq!((empty.base_timestamp, empty.max_timestamp), (-1, 11));
    assert_eq!(empty.size(), 61);
    // Without the producer being active, the batch goes.
    let dir2 = TestDir::new("cleaner-producer-2");
    let mut seg2 = segment(&dir2, 0, &[(0, data)]);
    let (mut dest2, _) = clean_all(&dir2, std::slice::from_mut(&mut seg2), &rules(NOW), &[]);
    assert_eq!(
        headers(&contents(&mut dest2))
            .iter()
            .map(|h| h.base_offset)
            .collect::<Vec<_>>(),
        vec![2]
    );
}

#[test]
fn records_past_the_map_are_kept_and_a_full_map_stops_at_a_batch() {
    let dir = TestDir::new("cleaner-full");
    let batches: Vec<(i64, Vec<u8>)> = (0..20u8)
        .map(|i| {
            let key = [b'k', i % 10];
            (i as i64, plain(&[(Some(&key), Some(b"v"))], i as i64))
        })
        .collect();
    let mut seg = segment(&dir, 0, &batches);
    // A map that holds 5 keys (1024 slots at load factor 5/1024).
    let mut cleaning = Cleaning::new(OffsetMap::new(0, 5.0 / 1024.0, 1));
    let source = SegmentSource::of(&mut seg, 0).unwrap();
    assert!(cleaning.map_segment(&source, 0, 20, None).unwrap());
    assert_eq!(cleaning.map().latest_offset(), 4);
    let mut dest = cleaned(&dir, 0);
    cleaning
        .clean_segment(&source, &mut dest, &rules(NOW), None)
        .unwrap();
    // Nothing at or below offset 4 is superseded within the map; everything after is kept.
    assert_eq!(records(&contents(&mut dest)).len(), 20);

    // Mapping from offset 10 on: the keys of offsets 10..19 supersede 0..9.
    let mut cleaning = Cleaning::new(OffsetMap::new(1 << 20, 0.9, 100));
    let from_ten = SegmentSource::of(&mut seg, 10).unwrap();
    assert!(!cleaning.map_segment(&from_ten, 10, 20, None).unwrap());
    let mut dest = Segment::open_with_suffix(dir.path(), 0, ".other", 4096, 1 << 20).unwrap();
    let whole = SegmentSource::of(&mut seg, 0).unwrap();
    cleaning
        .clean_segment(&whole, &mut dest, &rules(NOW), None)
        .unwrap();
    let offsets: Vec<i64> = records(&contents(&mut dest)).iter().map(|r| r.0).collect();
    assert_eq!(offsets, (10..20).collect::<Vec<_>>());
}

#[test]
fn a_damaged_batch_stops_the_clean() {
    let dir = TestDir::new("cleaner-damaged");
    let mut seg = segment(&dir, 0, &[(0, plain(&[(Some(b"a"), Some(b"1"))], 1))]);
    let path = seg.path().to_path_buf();
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xFF;
    std::fs::write(&path, &bytes).unwrap();
    let mut cleaning = Cleaning::new(OffsetMap::new(1 << 20, 0.9, 10));
    let source = SegmentSource::of(&mut seg, 0).unwrap();
    match cleaning.map_segment(&source, 0, 1, None) {
        Err(StorageError::Corrupt(msg)) => assert!(msg.contains("cannot clean"), "{msg}"),
        other => panic!("expected a corrupt-data error, got {other:?}"),
    }
}

#[test]
fn change_file_suffixes_renames_and_keeps_the_segment_usable() {
    let dir = TestDir::new("cleaner-suffix");
    let mut seg = cleaned(&dir, 7);
    seg.append_copy(&plain(&[(Some(b"a"), Some(b"1"))], 1), 7, -1, -1)
        .unwrap();
    seg.append_aborted_txn(AbortedTxn {
        producer_id: 1,
        first_offset: 7,
        last_offset: 7,
        last_stable_offset: 7,
    })
    .unwrap();
    seg.change_file_suffixes(".cleaned", ".swap").unwrap();
    seg.change_file_suffixes(".swap", "").unwrap();
    for ext in ["log", "index", "timeindex", "txnindex"] {
        assert!(
            dir.path()
                .join(format!("00000000000000000007.{ext}"))
                .exists(),
            "{ext}"
        );
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 4);
    assert_eq!(records(&contents(&mut seg)).len(), 1);
    seg.set_last_modified_ms(1_600_000_000_000).unwrap();
    assert_eq!(seg.last_modified_ms().unwrap(), 1_600_000_000_000);
    seg.close(true).unwrap();
}

#[test]
fn the_throttler_waits_out_the_excess_of_a_period() {
    let ms = std::time::Duration::from_millis;
    // 1 MB moved in 300 ms at 1 MB/s: wait 700 ms more; within the rate: no wait.
    assert_eq!(throttle_delay(1_000_000.0, 1_000_000, ms(300)), ms(700));
    assert_eq!(throttle_delay(1_000_000.0, 200_000, ms(300)), ms(0));
    let unlimited = Throttler::new(f64::MAX);
    let started = std::time::Instant::now();
    unlimited.maybe_throttle(u64::MAX / 2);
    assert!(started.elapsed() < ms(100));
}
