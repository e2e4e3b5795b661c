//! Building record batches: the broker's own writes (the group coordinator's records in
//! `__consumer_offsets`) as one uncompressed magic-2 batch from `(key, value)` pairs, and the
//! end-transaction markers the transaction coordinator has written (`build_control_batch`).
//!
//! The batch has the layout described in `batch.rs`: attributes 0 (CreateTime, not
//! transactional, not control, no compression) unless the transactional bit or, for a marker,
//! transactional | control is asked for, `partitionLeaderEpoch` -1 (set by the segment on
//! append), one timestamp for every record (`baseTimestamp` = `maxTimestamp`, each
//! `timestampDelta` 0) and `offsetDelta` 0, 1, ... Each record is
//! `length varint, attributes i8 (0), timestampDelta varlong (0), offsetDelta varint,
//! keyLength varint, key, valueLength varint, value, headerCount varint (0)`, zigzag varints
//! throughout, a null key or value written as length -1. The batch is sized exactly before it is
//! written, so building it is one allocation.

use crate::batch::{
    ATTRIBUTES_OFFSET, CONTROL_FLAG_MASK, CRC_OFFSET, CURRENT_MAGIC, LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD, TRANSACTIONAL_FLAG_MASK,
};
use crate::crc32c::crc32c;
use crate::errors::{Result, StorageError};

/// Producer fields of a batch header; [`ProducerFields::NONE`] for a non-idempotent write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerFields {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
}

impl ProducerFields {
    /// No producer id, epoch or sequence (all -1).
    pub const NONE: ProducerFields = ProducerFields {
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
    };
}

/// A record to build: `(key, value)`, `None` meaning null (a null value is a tombstone).
pub type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Control record type of an end-transaction marker that aborts (Kafka's `ControlRecordType`).
pub const CONTROL_TYPE_ABORT: i16 = 0;
/// Control record type of an end-transaction marker that commits.
pub const CONTROL_TYPE_COMMIT: i16 = 1;

/// Builds one uncompressed batch holding `records`, all with `timestamp`, the first at
/// `base_offset`, with attributes 0 (see [`build_batch_with_attributes`]).
pub fn build_batch(
    records: &[KeyValue<'_>],
    base_offset: i64,
    timestamp: i64,
    producer: ProducerFields,
) -> Result<Vec<u8>> {
    build_batch_with_attributes(records, base_offset, timestamp, producer, 0)
}

/// Kafka's end-transaction marker batch (`MemoryRecords.withEndTransactionMarker`): attributes
/// transactional | control (CreateTime, uncompressed), `baseOffset` 0, `partitionLeaderEpoch`
/// -1, `baseTimestamp` = `maxTimestamp` = `timestamp`, the producer's id and epoch,
/// `baseSequence` -1, and one record (attributes 0, deltas 0, no headers) whose key is the
/// control record key `version i16 (0), type i16` (0 ABORT, 1 COMMIT) and whose value is the
/// `EndTransactionMarker` value `version i16 (0), coordinatorEpoch i32`.
pub fn build_control_batch(
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    commit: bool,
    timestamp: i64,
) -> Vec<u8> {
    let control_type = if commit {
        CONTROL_TYPE_COMMIT
    } else {
        CONTROL_TYPE_ABORT
    };
    let mut key = [0u8; 4];
    key[2..].copy_from_slice(&control_type.to_be_bytes());
    let mut value = [0u8; 6];
    value[2..].copy_from_slice(&coordinator_epoch.to_be_bytes());
    let producer = ProducerFields {
        producer_id,
        producer_epoch,
        base_sequence: -1,
    };
    build_batch_with_attributes(
        &[(Some(&key), Some(&value))],
        0,
        timestamp,
        producer,
        TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK,
    )
    .expect("a one-record batch is valid")
}

/// Like [`build_batch`], with the batch's `attributes` (the caller keeps them consistent with
/// an uncompressed batch: codec bits 0).
///
/// Errors: [`StorageError::InvalidArgument`] for an empty `records` or a batch whose size would
/// not fit `batchLength` (an i32).
pub fn build_batch_with_attributes(
    records: &[KeyValue<'_>],
    base_offset: i64,
    timestamp: i64,
    producer: ProducerFields,
    attributes: i16,
) -> Result<Vec<u8>> {
    if records.is_empty() {
        return Err(StorageError::invalid(
            "a record batch needs at least one record",
        ));
    }
    let too_large = || StorageError::invalid("record batch would exceed 2 GiB");
    let record_count = i32::try_from(records.len()).map_err(|_| too_large())?;

    let mut size = RECORD_BATCH_OVERHEAD;
    for (offset_delta, &(key, value)) in records.iter().enumerate() {
        let length = record_body_len(offset_delta, key, value);
        size = size
            .checked_add(varint_len(length as i64) + length)
            .ok_or_else(too_large)?;
    }
    let batch_length = i32::try_from(size - LOG_OVERHEAD).map_err(|_| too_large())?;

    let mut batch = Vec::with_capacity(size);
    batch.extend_from_slice(&base_offset.to_be_bytes());
    batch.extend_from_slice(&batch_length.to_be_bytes());
    batch.extend_from_slice(&(-1i32).to_be_bytes()); // partitionLeaderEpoch
    batch.push(CURRENT_MAGIC as u8);
    batch.extend_from_slice(&0u32.to_be_bytes()); // crc, filled in below
    batch.extend_from_slice(&attributes.to_be_bytes());
    batch.extend_from_slice(&(record_count - 1).to_be_bytes()); // lastOffsetDelta
    batch.extend_from_slice(&timestamp.to_be_bytes()); // baseTimestamp
    batch.extend_from_slice(&timestamp.to_be_bytes()); // maxTimestamp
    batch.extend_from_slice(&producer.producer_id.to_be_bytes());
    batch.extend_from_slice(&producer.producer_epoch.to_be_bytes());
    batch.extend_from_slice(&producer.base_sequence.to_be_bytes());
    batch.extend_from_slice(&record_count.to_be_bytes());
    debug_assert_eq!(batch.len(), RECORD_BATCH_OVERHEAD);

    for (offset_delta, &(key, value)) in records.iter().enumerate() {
        put_varint(&mut batch, record_body_len(offset_delta, key, value) as i64);
        batch.push(0); // attributes
        put_varint(&mut batch, 0); // timestampDelta
        put_varint(&mut batch, offset_delta as i64);
        put_bytes_field(&mut batch, key);
        put_bytes_field(&mut batch, value);
        put_varint(&mut batch, 0); // headerCount
    }
    debug_assert_eq!(batch.len(), size);

    let crc = crc32c(&batch[ATTRIBUTES_OFFSET..]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(batch)
}

/// Bytes of one record after its `length` varint.
fn record_body_len(offset_delta: usize, key: Option<&[u8]>, value: Option<&[u8]>) -> usize {
    1 // attributes
        + varint_len(0) // timestampDelta
        + varint_len(offset_delta as i64)
        + bytes_field_len(key)
        + bytes_field_len(value)
        + varint_len(0) // headerCount
}

fn bytes_field_len(data: Option<&[u8]>) -> usize {
    match data {
        Some(d) => varint_len(d.len() as i64) + d.len(),
        None => varint_len(-1),
    }
}

fn put_bytes_field(out: &mut Vec<u8>, data: Option<&[u8]>) {
    match data {
        Some(d) => {
            put_varint(out, d.len() as i64);
            out.extend_from_slice(d);
        }
        None => put_varint(out, -1),
    }
}

#[inline]
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Encoded size of `v` as a zigzag varint.
pub(crate) fn varint_len(v: i64) -> usize {
    let bits = 64 - zigzag(v).leading_zeros() as usize;
    bits.max(1).div_ceil(7)
}

/// Appends `v` as a zigzag varint (the same bytes as a varlong for every value used here).
pub(crate) fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = zigzag(v);
    while z >= 0x80 {
        out.push((z as u8 & 0x7F) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::test_support::{batch_of, TestRecord};
    use crate::batch::{validate_batches, BatchHeader};
    use crate::records::{read_records, Record};

    const TS: i64 = 1_700_000_000_000;

    fn build(records: &[KeyValue<'_>]) -> Vec<u8> {
        build_batch(records, 0, TS, ProducerFields::NONE).unwrap()
    }

    #[test]
    fn varint_sizes() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            -65,
            8191,
            8192,
            i32::MAX as i64,
            i64::MIN,
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out.len(), varint_len(v), "{v}");
        }
        let mut out = Vec::new();
        put_varint(&mut out, -1);
        put_varint(&mut out, 300);
        assert_eq!(out, [0x01, 0xD8, 0x04]);
    }

    #[test]
    fn exact_layout_of_one_record() {
        let b = build_batch(
            &[(Some(b"k"), Some(b"vv"))],
            7,
            TS,
            ProducerFields {
                producer_id: 42,
                producer_epoch: 3,
                base_sequence: 9,
            },
        )
        .unwrap();
        let record = [
            0x12, // length 9
            0x00, // attributes
            0x00, // timestampDelta 0
            0x00, // offsetDelta 0
            0x02, b'k', // key length 1
            0x04, b'v', b'v', // value length 2
            0x00, // headerCount 0
        ];
        let mut expected = Vec::new();
        expected.extend_from_slice(&7i64.to_be_bytes()); // baseOffset
        expected.extend_from_slice(&(49 + record.len() as i32).to_be_bytes()); // batchLength
        expected.extend_from_slice(&(-1i32).to_be_bytes()); // partitionLeaderEpoch
        expected.push(2); // magic
        expected.extend_from_slice(&[0; 4]); // crc
        expected.extend_from_slice(&0i16.to_be_bytes()); // attributes
        expected.extend_from_slice(&0i32.to_be_bytes()); // lastOffsetDelta
        expected.extend_from_slice(&TS.to_be_bytes()); // baseTimestamp
        expected.extend_from_slice(&TS.to_be_bytes()); // maxTimestamp
        expected.extend_from_slice(&42i64.to_be_bytes()); // producerId
        expected.extend_from_slice(&3i16.to_be_bytes()); // producerEpoch
        expected.extend_from_slice(&9i32.to_be_bytes()); // baseSequence
        expected.extend_from_slice(&1i32.to_be_bytes()); // recordsCount
        expected.extend_from_slice(&record);
        let crc = crc32c(&expected[ATTRIBUTES_OFFSET..]);
        expected[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(b, expected);
    }

    #[test]
    fn matches_the_test_batch_builder() {
        // `batch_of` writes producer id 1234, epoch 5, sequence 7 and never a null value.
        let values: Vec<Vec<u8>> = (0..200).map(|i| vec![b'x'; i * 3]).collect();
        let test_records: Vec<TestRecord<'_>> = values
            .iter()
            .enumerate()
            .map(|(i, v)| TestRecord {
                timestamp: TS,
                key: (i % 3 != 0).then_some(b"some key".as_slice()),
                value: v,
            })
            .collect();
        let pairs: Vec<KeyValue<'_>> = test_records
            .iter()
            .map(|r| (r.key, Some(r.value)))
            .collect();
        let producer = ProducerFields {
            producer_id: 1234,
            producer_epoch: 5,
            base_sequence: 7,
        };
        let built = build_batch(&pairs, 0, TS, producer).unwrap();
        assert_eq!(built, batch_of(&test_records));
    }

    #[test]
    fn header_fields() {
        let b = build_batch(
            &[(None, Some(b"a")), (None, Some(b"b")), (None, None)],
            100,
            TS,
            ProducerFields::NONE,
        )
        .unwrap();
        let info = validate_batches(&b, 1 << 20).unwrap();
        assert_eq!(info.batch_count, 1);
        assert_eq!(info.record_count, 3);
        assert_eq!((info.base_offset, info.last_offset), (100, 102));
        assert_eq!((info.first_timestamp, info.max_timestamp), (TS, TS));
        assert_eq!(
            (info.producer_id, info.producer_epoch, info.base_sequence),
            (-1, -1, -1)
        );
        assert!(!info.is_transactional && !info.is_control);
        assert_eq!(info.compression, 0);
        let h = BatchHeader::parse(&b).unwrap();
        assert_eq!(h.partition_leader_epoch, -1);
        assert_eq!(h.attributes, 0);
        assert_eq!(h.records_count, 3);
    }

    #[test]
    fn round_trips_through_read_records() {
        let big = vec![0xABu8; 70_000];
        let pairs: Vec<KeyValue<'_>> = vec![
            (Some(b"k1"), Some(b"v1")),
            (Some(b"k2"), None),    // tombstone
            (None, Some(b"v3")),    // null key
            (None, None),           // both null
            (Some(b""), Some(b"")), // empty, not null
            (Some(b"big"), Some(&big)),
        ];
        let b = build_batch(&pairs, 50, TS, ProducerFields::NONE).unwrap();
        let got = read_records(&b).unwrap();
        let expected: Vec<Record> = pairs
            .iter()
            .enumerate()
            .map(|(i, &(k, v))| Record {
                offset: 50 + i as i64,
                timestamp: TS,
                key: k.map(<[u8]>::to_vec),
                value: v.map(<[u8]>::to_vec),
            })
            .collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn control_batch_has_kafkas_layout() {
        for (commit, control_type) in [(false, 0u8), (true, 1u8)] {
            let b = build_control_batch(4321, 7, 0x0A0B0C0D, commit, TS);
            let record = [
                0x20, // length 16
                0x00, // attributes
                0x00, // timestampDelta 0
                0x00, // offsetDelta 0
                0x08,
                0,
                0,
                0,
                control_type, // key: version 0, type
                0x0C,
                0,
                0,
                0x0A,
                0x0B,
                0x0C,
                0x0D, // value: version 0, coordinatorEpoch
                0x00, // headerCount 0
            ];
            let mut expected = Vec::new();
            expected.extend_from_slice(&0i64.to_be_bytes()); // baseOffset
            expected.extend_from_slice(&(49 + record.len() as i32).to_be_bytes());
            expected.extend_from_slice(&(-1i32).to_be_bytes()); // partitionLeaderEpoch
            expected.push(2); // magic
            expected.extend_from_slice(&[0; 4]); // crc
            expected.extend_from_slice(&0x30i16.to_be_bytes()); // transactional | control
            expected.extend_from_slice(&0i32.to_be_bytes()); // lastOffsetDelta
            expected.extend_from_slice(&TS.to_be_bytes()); // baseTimestamp
            expected.extend_from_slice(&TS.to_be_bytes()); // maxTimestamp
            expected.extend_from_slice(&4321i64.to_be_bytes()); // producerId
            expected.extend_from_slice(&7i16.to_be_bytes()); // producerEpoch
            expected.extend_from_slice(&(-1i32).to_be_bytes()); // baseSequence
            expected.extend_from_slice(&1i32.to_be_bytes()); // recordsCount
            expected.extend_from_slice(&record);
            let crc = crc32c(&expected[ATTRIBUTES_OFFSET..]);
            expected[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
            assert_eq!(b, expected, "commit {commit}");
            // Kafka's marker batch: 61 header bytes + 17 of the record.
            assert_eq!(b.len(), 78);

            let info = validate_batches(&b, 1 << 20).unwrap();
            assert!(info.is_transactional && info.is_control);
            let h = BatchHeader::parse(&b).unwrap();
            let marker = crate::records::control_marker(&h, &b);
            assert_eq!(
                (marker.control_type, marker.coordinator_epoch),
                (control_type as i16, 0x0A0B0C0D)
            );
            // Control batches are not data records.
            assert!(read_records(&b).unwrap().is_empty());
        }
    }

    #[test]
    fn transactional_bit_only_changes_the_attributes_and_crc() {
        let pairs: [KeyValue<'_>; 2] = [(Some(b"k"), Some(b"v")), (None, None)];
        let producer = ProducerFields {
            producer_id: 5,
            producer_epoch: 1,
            base_sequence: 0,
        };
        let plain = build_batch(&pairs, 3, TS, producer).unwrap();
        let txn =
            build_batch_with_attributes(&pairs, 3, TS, producer, TRANSACTIONAL_FLAG_MASK).unwrap();
        let mut patched = plain.clone();
        patched[ATTRIBUTES_OFFSET + 1] |= 0x10;
        let crc = crc32c(&patched[ATTRIBUTES_OFFSET..]);
        patched[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(txn, patched);
        let info = validate_batches(&txn, 1 << 20).unwrap();
        assert!(info.is_transactional && !info.is_control);
        assert_eq!(read_records(&txn).unwrap(), read_records(&plain).unwrap());
    }

    #[test]
    fn rejects_empty() {
        assert!(matches!(
            build_batch(&[], 0, TS, ProducerFields::NONE),
            Err(StorageError::InvalidArgument(_))
        ));
    }

    #[test]
    fn several_batches_read_in_order() {
        let mut data = build(&[(Some(b"a"), Some(b"1"))]);
        data.extend(
            build_batch(
                &[(Some(b"b"), None), (Some(b"c"), Some(b"3"))],
                1,
                TS + 5,
                ProducerFields::NONE,
            )
            .unwrap(),
        );
        let got: Vec<(i64, i64)> = read_records(&data)
            .unwrap()
            .iter()
            .map(|r| (r.offset, r.timestamp))
            .collect();
        assert_eq!(got, [(0, TS), (1, TS + 5), (2, TS + 5)]);
    }
}
