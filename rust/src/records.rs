//! Record-level reading inside a v2 batch: decompression of the batch body and iteration over
//! its records.
//!
//! Two readers share one decoder:
//!
//! * [`visit_records`] yields each record's `(offset, timestamp)` and skips the rest; it serves
//!   `find_offset_by_timestamp` and `max_timestamp_record` (ListOffsets). The append and fetch
//!   paths never look inside a batch.
//! * [`read_records`] copies out `(offset, timestamp, key, value)` of every record of a buffer of
//!   whole batches (control batches skipped); the group coordinator uses it to load
//!   `__consumer_offsets`. [`read_record_batches`] does the same per batch, with the batch's
//!   producer fields and control batches listed, so transactional offset commits can be
//!   replayed.
//! * [`control_marker`] reads the first record of a control batch: its control type and, for an
//!   end-transaction marker, the coordinator epoch.
//! * [`null_key_indexes`] lists the records without a key of a produced batch (Kafka's
//!   compacted-topic rule, checked by the leader's append for compacted topics only); it reads
//!   each record's key length and skips the rest.
//!
//! [`decompress_body`] hands a whole decompressed records section to `columnar`, whose
//! slice-based decoder fills Arrow columns.
//!
//! Each record is `length varint, attributes i8, timestampDelta varlong, offsetDelta varint,
//! keyLength varint, key, valueLength varint, value, headerCount varint, headers...` (zigzag
//! varints, a negative key/value length meaning null). Fields are read through a
//! `RecordFields` reader bounded by `length`, and whatever a reader does not need (headers,
//! or key and value for timestamp lookups) is skipped using `length`.
//!
//! Codecs (attribute bits 0-2): 1 gzip, 2 snappy (xerial framing as the Java client and
//! librdkafka write it, or raw snappy), 3 lz4 (frame format), 4 zstd. Bodies are decoded as
//! streams, so a compressed batch never needs more memory than a small window (plus, for
//! [`read_records`], the records copied out), and iteration stops as soon as the caller has found
//! its record.

use std::io::{self, BufRead, BufReader, Read};

use flate2::read::MultiGzDecoder;

use crate::batch::{get_i16, get_i32, validate_batches, BatchHeader, RECORD_BATCH_OVERHEAD};
use crate::builder::{CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT};
use crate::errors::{Result, StorageError};

/// Header of the xerial snappy stream format (`SnappyCodec.MAGIC_HEADER` + version + compat).
pub(crate) const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
pub(crate) const XERIAL_HEADER_LEN: usize = 16;

/// Most bytes reserved up front for a key or value; larger fields grow as their data arrives.
const INITIAL_FIELD_CAPACITY: usize = 64 * 1024;

/// One record copied out of a batch by [`read_records`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub offset: i64,
    pub timestamp: i64,
    /// `None` for a null key.
    pub key: Option<Vec<u8>>,
    /// `None` for a null value (a tombstone).
    pub value: Option<Vec<u8>>,
}

/// Calls `visit(offset, timestamp)` for each record of `batch` (a complete batch, header
/// included) until it returns `true`. Returns whether a visit returned `true`.
///
/// For LogAppendTime batches every record's timestamp is the batch's `maxTimestamp`.
pub fn visit_records(
    header: &BatchHeader,
    batch: &[u8],
    mut visit: impl FnMut(i64, i64) -> bool,
) -> Result<bool> {
    scan_batch(header, batch, |offset, timestamp, _rest| {
        Ok(visit(offset, timestamp))
    })
}

/// Every record of every non-control batch in `data` (a buffer of whole batches, possibly empty),
/// in order, with its key and value copied out.
///
/// `offset` is `baseOffset + offsetDelta`; `timestamp` is the batch's `maxTimestamp` for
/// LogAppendTime batches, else `baseTimestamp + timestampDelta`. Every batch is checked as
/// [`validate_batches`] does (lengths, magic, codec, CRC) before any record is decoded, so a
/// truncated or damaged buffer gives [`StorageError::Corrupt`] and no records.
pub fn read_records(data: &[u8]) -> Result<Vec<Record>> {
    let mut records = Vec::new();
    for_each_batch(data, |header, batch| {
        if !header.is_control() {
            copy_records(header, batch, &mut records)?;
        }
        Ok(())
    })?;
    Ok(records)
}

/// The records of one batch with the batch's producer fields, as [`read_record_batches`] lists
/// them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchRecords {
    pub base_offset: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub is_transactional: bool,
    /// -1 for a data batch; for a control batch the type of its marker (see [`ControlMarker`]).
    pub control_type: i16,
    /// Empty for a control batch.
    pub records: Vec<Record>,
}

/// Every batch of `data` (whole batches, possibly none), control batches included, each with
/// its records copied out as [`read_records`] does (none for a control batch). The same checks
/// as [`read_records`] run first, with the same error.
pub fn read_record_batches(data: &[u8]) -> Result<Vec<BatchRecords>> {
    let mut batches = Vec::new();
    for_each_batch(data, |header, batch| {
        let mut records = Vec::new();
        let control_type = if header.is_control() {
            control_marker(header, batch).control_type
        } else {
            copy_records(header, batch, &mut records)?;
            -1
        };
        batches.push(BatchRecords {
            base_offset: header.base_offset,
            producer_id: header.producer_id,
            producer_epoch: header.producer_epoch,
            is_transactional: header.is_transactional(),
            control_type,
            records,
        });
        Ok(())
    })?;
    Ok(batches)
}

/// Kafka's `batchIndex` (the record's position in its batch, from 0) of every record without a
/// key — a null key; an empty key is a key — in the first data batch of `data` that has any;
/// empty when every record of every data batch has a key. Control batches are not looked at
/// (their records always have keys, and only coordinators write them). This is the rule of
/// Kafka's `LogValidator` for topics whose `cleanup.policy` includes `compact`: such a batch is
/// refused whole, listing these indexes.
///
/// `data` is a produced record set that [`validate_batches`] has accepted, so the CRCs are not
/// computed again; the framing is re-checked (lengths, magic, codec), so that any buffer gives
/// either an answer or [`StorageError::Corrupt`], never a panic. A compressed batch is
/// decompressed as a stream; of each record only the key length is decoded.
pub fn null_key_indexes(data: &[u8]) -> Result<Vec<i32>> {
    let mut pos = 0usize;
    while pos < data.len() {
        let header =
            BatchHeader::parse(&data[pos..]).ok_or_else(|| StorageError::corrupt("short batch"))?;
        header.check_structure()?;
        let end = pos
            .checked_add(header.size())
            .filter(|&end| end <= data.len())
            .ok_or_else(|| StorageError::corrupt("record batch overruns the record set"))?;
        if !header.is_control() {
            let mut indexes = Vec::new();
            let mut index = 0i32;
            scan_batch(&header, &data[pos..end], |_, _, rest| {
                if rest.read_length()? < 0 {
                    indexes.push(index);
                }
                index = index.saturating_add(1);
                Ok(false)
            })?;
            if !indexes.is_empty() {
                return Ok(indexes);
            }
        }
        pos = end;
    }
    Ok(Vec::new())
}

/// Checks every batch of `data` as [`validate_batches`] does (nothing for an empty buffer), then
/// calls `on_batch(header, batch)` for each in order.
fn for_each_batch(
    data: &[u8],
    mut on_batch: impl FnMut(&BatchHeader, &[u8]) -> Result<()>,
) -> Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    validate_batches(data, i64::MAX)?;
    let mut pos = 0usize;
    while pos < data.len() {
        let header =
            BatchHeader::parse(&data[pos..]).ok_or_else(|| StorageError::corrupt("short batch"))?;
        on_batch(&header, &data[pos..pos + header.size()])?;
        pos += header.size();
    }
    Ok(())
}

/// Appends every record of `batch` to `out`, key and value copied.
pub(crate) fn copy_records(
    header: &BatchHeader,
    batch: &[u8],
    out: &mut Vec<Record>,
) -> Result<()> {
    scan_batch(header, batch, |offset, timestamp, rest| {
        let key = rest.read_bytes()?;
        let value = rest.read_bytes()?;
        out.push(Record {
            offset,
            timestamp,
            key,
            value,
        });
        Ok(false)
    })?;
    Ok(())
}

/// What the first record of a control batch holds: Kafka's control record key
/// (`ControlRecordType`: `version i16, type i16`) and, for an end-transaction marker (type 0
/// ABORT or 1 COMMIT), the `EndTransactionMarker` value (`version i16, coordinatorEpoch i32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlMarker {
    /// The key's type as read (0 ABORT, 1 COMMIT, other values as they are); -1 when the batch
    /// is not a control batch or its first record does not parse.
    pub control_type: i16,
    /// The marker value's coordinator epoch; -1 when the batch holds no end-transaction marker
    /// or its value does not parse.
    pub coordinator_epoch: i32,
}

impl ControlMarker {
    /// Not a control batch, or one whose marker cannot be read.
    pub const NONE: ControlMarker = ControlMarker {
        control_type: -1,
        coordinator_epoch: -1,
    };

    /// Parses a control record's key and value as Kafka does: a key shorter than 4 bytes or
    /// with a negative version does not parse (a higher version is read as version 0); a value
    /// shorter than 6 bytes or with a negative version has no coordinator epoch.
    pub fn parse(key: Option<&[u8]>, value: Option<&[u8]>) -> ControlMarker {
        let Some(key) = key.filter(|k| k.len() >= 4) else {
            return ControlMarker::NONE;
        };
        if get_i16(key, 0) < 0 {
            return ControlMarker::NONE;
        }
        let control_type = get_i16(key, 2);
        let is_end_txn = control_type == CONTROL_TYPE_ABORT || control_type == CONTROL_TYPE_COMMIT;
        let coordinator_epoch = match value {
            Some(v) if is_end_txn && v.len() >= 6 && get_i16(v, 0) >= 0 => get_i32(v, 2),
            _ => -1,
        };
        ControlMarker {
            control_type,
            coordinator_epoch,
        }
    }
}

/// The marker of `batch` (a complete batch, header included) read from its first record;
/// [`ControlMarker::NONE`] for a data batch, an empty control batch or one whose first record
/// does not parse. Control batches are tiny and uncompressed in practice; a compressed one is
/// decompressed as far as its first record.
pub fn control_marker(header: &BatchHeader, batch: &[u8]) -> ControlMarker {
    if !header.is_control() || batch.len() < RECORD_BATCH_OVERHEAD {
        return ControlMarker::NONE;
    }
    let mut marker = ControlMarker::NONE;
    let parsed = scan_batch(header, batch, |_, _, rest| {
        let key = rest.read_bytes()?;
        let value = rest.read_bytes()?;
        marker = ControlMarker::parse(key.as_deref(), value.as_deref());
        Ok(true)
    });
    match parsed {
        Ok(_) => marker,
        Err(_) => ControlMarker::NONE,
    }
}

/// Decompresses the body of `batch` as a stream and calls `on_record(offset, timestamp, rest)`
/// for each record until it returns `true`; `rest` reads the record's remaining fields from
/// `keyLength` on, and whatever it leaves unread is skipped. Returns whether a call returned
/// `true`.
fn scan_batch<F>(header: &BatchHeader, batch: &[u8], on_record: F) -> Result<bool>
where
    F: FnMut(i64, i64, &mut dyn RemainingFields) -> Result<bool>,
{
    let body = &batch[RECORD_BATCH_OVERHEAD..];
    let count = header.records_count.max(0) as usize;
    match header.compression() {
        0 => scan(header, body, count, on_record),
        1 => scan(
            header,
            BufReader::new(MultiGzDecoder::new(body)),
            count,
            on_record,
        ),
        2 => {
            if body.starts_with(&XERIAL_MAGIC) {
                scan(
                    header,
                    BufReader::new(XerialSnappyReader::new(body)),
                    count,
                    on_record,
                )
            } else {
                let raw = decompress_raw_snappy(body)?;
                scan(header, raw.as_slice(), count, on_record)
            }
        }
        3 => scan(
            header,
            BufReader::new(lz4_flex::frame::FrameDecoder::new(body)),
            count,
            on_record,
        ),
        4 => {
            let decoder = ruzstd::decoding::StreamingDecoder::new(body)
                .map_err(|e| StorageError::corrupt(format!("invalid zstd frame: {e}")))?;
            scan(header, BufReader::new(decoder), count, on_record)
        }
        codec => Err(StorageError::corrupt(format!(
            "unknown compression codec id {codec}"
        ))),
    }
}

/// Decompresses the records section of `batch` (a complete batch, header included) into `out`
/// (cleared first), with the same decoders as the record scans. An uncompressed batch is copied.
pub(crate) fn decompress_body(header: &BatchHeader, batch: &[u8], out: &mut Vec<u8>) -> Result<()> {
    decompress(header.compression(), &batch[RECORD_BATCH_OVERHEAD..], out)
}

/// Decompresses `body`, compressed with `codec` (0 for none), into `out` (cleared first).
pub(crate) fn decompress(codec: u8, body: &[u8], out: &mut Vec<u8>) -> Result<()> {
    out.clear();
    match codec {
        0 => {
            out.extend_from_slice(body);
            Ok(())
        }
        1 => read_all(MultiGzDecoder::new(body), out),
        2 => {
            if body.starts_with(&XERIAL_MAGIC) {
                read_all(XerialSnappyReader::new(body), out)
            } else {
                *out = decompress_raw_snappy(body)?;
                Ok(())
            }
        }
        3 => read_all(lz4_flex::frame::FrameDecoder::new(body), out),
        4 => {
            let decoder = ruzstd::decoding::StreamingDecoder::new(body)
                .map_err(|e| StorageError::corrupt(format!("invalid zstd frame: {e}")))?;
            read_all(decoder, out)
        }
        codec => Err(StorageError::corrupt(format!(
            "unknown compression codec id {codec}"
        ))),
    }
}

fn read_all(mut input: impl Read, out: &mut Vec<u8>) -> Result<()> {
    input.read_to_end(out).map(|_| ()).map_err(decode_error)
}

fn scan<R: BufRead>(
    header: &BatchHeader,
    mut input: R,
    count: usize,
    mut on_record: impl FnMut(i64, i64, &mut dyn RemainingFields) -> Result<bool>,
) -> Result<bool> {
    let log_append_time = header.is_log_append_time();
    for _ in 0..count {
        let length = RecordFields::new(&mut input, u64::MAX).read_varint()?;
        if length < 0 {
            return Err(StorageError::corrupt(format!(
                "negative record length {length}"
            )));
        }
        let mut fields = RecordFields::new(&mut input, length as u64);
        let _attributes = fields.read_u8()?;
        let timestamp_delta = fields.read_varint()?;
        let offset_delta = fields.read_varint()?;
        let offset = header.base_offset.saturating_add(offset_delta);
        let timestamp = if log_append_time {
            header.max_timestamp
        } else {
            header.base_timestamp.saturating_add(timestamp_delta)
        };
        if on_record(offset, timestamp, &mut fields)? {
            return Ok(true);
        }
        fields.skip_rest()?;
    }
    Ok(false)
}

/// The not yet decoded fields of one record, as handed to a scan's callback.
trait RemainingFields {
    /// Reads a length-prefixed byte field (key or value): `None` when the length is negative.
    fn read_bytes(&mut self) -> Result<Option<Vec<u8>>>;

    /// Reads only the length of the next length-prefixed field (negative: null); its bytes are
    /// left unread (the scan skips what a callback leaves).
    fn read_length(&mut self) -> Result<i64>;
}

/// Reads the fields of one record, never past its declared `length`.
struct RecordFields<'a, R: BufRead> {
    input: &'a mut R,
    /// Bytes of the record not consumed yet.
    remaining: u64,
}

impl<'a, R: BufRead> RecordFields<'a, R> {
    fn new(input: &'a mut R, remaining: u64) -> Self {
        RecordFields { input, remaining }
    }

    fn read_u8(&mut self) -> Result<u8> {
        if self.remaining == 0 {
            return Err(StorageError::corrupt(
                "record fields overrun the record length",
            ));
        }
        let buf = self.input.fill_buf().map_err(decode_error)?;
        let Some(&byte) = buf.first() else {
            return Err(StorageError::corrupt("record data ends early"));
        };
        self.input.consume(1);
        self.remaining -= 1;
        Ok(byte)
    }

    /// Zigzag varlong (also used for varints; callers range-check as needed).
    fn read_varint(&mut self) -> Result<i64> {
        let mut raw: u64 = 0;
        for shift in (0..70).step_by(7) {
            let byte = self.read_u8()?;
            raw |= ((byte & 0x7F) as u64) << shift;
            if byte & 0x80 == 0 {
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
            if shift == 63 {
                break;
            }
        }
        Err(StorageError::corrupt("varint is too long"))
    }

    /// Skips what is left of the record.
    fn skip_rest(&mut self) -> Result<()> {
        skip(self.input, self.remaining)?;
        self.remaining = 0;
        Ok(())
    }
}

impl<R: BufRead> RemainingFields for RecordFields<'_, R> {
    fn read_length(&mut self) -> Result<i64> {
        let length = self.read_varint()?;
        if length > 0 && length as u64 > self.remaining {
            return Err(StorageError::corrupt(format!(
                "record field of {length} bytes overruns the record length"
            )));
        }
        Ok(length)
    }

    fn read_bytes(&mut self) -> Result<Option<Vec<u8>>> {
        let length = self.read_varint()?;
        if length < 0 {
            return Ok(None);
        }
        if length as u64 > self.remaining {
            return Err(StorageError::corrupt(format!(
                "record field of {length} bytes overruns the record length"
            )));
        }
        // `take` + `read_to_end` grows the buffer with the data actually present, so a forged
        // length cannot make us allocate more than the batch holds.
        let mut data = Vec::with_capacity((length as usize).min(INITIAL_FIELD_CAPACITY));
        (&mut *self.input)
            .take(length as u64)
            .read_to_end(&mut data)
            .map_err(decode_error)?;
        if data.len() as u64 != length as u64 {
            return Err(StorageError::corrupt("record data ends early"));
        }
        self.remaining -= length as u64;
        Ok(Some(data))
    }
}

fn skip<R: BufRead>(r: &mut R, mut n: u64) -> Result<()> {
    while n > 0 {
        let available = r.fill_buf().map_err(decode_error)?.len();
        if available == 0 {
            return Err(StorageError::corrupt("record data ends early"));
        }
        let step = available.min(n as usize);
        r.consume(step);
        n -= step as u64;
    }
    Ok(())
}

fn decode_error(e: io::Error) -> StorageError {
    StorageError::corrupt(format!("cannot decompress record batch: {e}"))
}

/// Upper bound on the output of a raw snappy block relative to its input (the format cannot
/// exceed ~21x; anything claiming more is corrupt and would only waste memory).
fn snappy_output_limit(input_len: usize) -> usize {
    input_len.saturating_mul(32).saturating_add(1024)
}

fn decompress_raw_snappy(input: &[u8]) -> Result<Vec<u8>> {
    let len = snap::raw::decompress_len(input)
        .map_err(|e| StorageError::corrupt(format!("invalid snappy data: {e}")))?;
    if len > snappy_output_limit(input.len()) {
        return Err(StorageError::corrupt(
            "invalid snappy data: implausible length",
        ));
    }
    snap::raw::Decoder::new()
        .decompress_vec(input)
        .map_err(|e| StorageError::corrupt(format!("invalid snappy data: {e}")))
}

/// Streams the xerial snappy framing: a 16-byte header, then blocks of
/// `compressedLength i32` + raw snappy data, each decoded on demand.
struct XerialSnappyReader<'a> {
    input: &'a [u8],
    block: Vec<u8>,
    pos: usize,
}

impl<'a> XerialSnappyReader<'a> {
    fn new(body: &'a [u8]) -> Self {
        XerialSnappyReader {
            input: &body[XERIAL_HEADER_LEN.min(body.len())..],
            block: Vec::new(),
            pos: 0,
        }
    }

    fn next_block(&mut self) -> io::Result<bool> {
        if self.input.is_empty() {
            return Ok(false);
        }
        let invalid = |msg: &str| io::Error::new(io::ErrorKind::InvalidData, msg.to_string());
        if self.input.len() < 4 {
            return Err(invalid("truncated xerial block length"));
        }
        let len = i32::from_be_bytes([self.input[0], self.input[1], self.input[2], self.input[3]]);
        if len < 0 || len as usize > self.input.len() - 4 {
            return Err(invalid("invalid xerial block length"));
        }
        let compressed = &self.input[4..4 + len as usize];
        self.input = &self.input[4 + len as usize..];
        let out_len = snap::raw::decompress_len(compressed).map_err(|e| invalid(&e.to_string()))?;
        if out_len > snappy_output_limit(compressed.len()) {
            return Err(invalid("implausible snappy block length"));
        }
        self.block.resize(out_len, 0);
        let n = snap::raw::Decoder::new()
            .decompress(compressed, &mut self.block)
            .map_err(|e| invalid(&e.to_string()))?;
        self.block.truncate(n);
        self.pos = 0;
        Ok(true)
    }
}

impl Read for XerialSnappyReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos >= self.block.len() {
            if !self.next_block()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.block.len() - self.pos);
        buf[..n].copy_from_slice(&self.block[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    //! Compressed test batches.
    use std::io::Write;

    use crate::batch::test_support::{build_raw_batch, encode_records, TestRecord};

    /// Builds a batch whose records are compressed with `codec`.
    pub fn compressed_batch(codec: i16, records: &[TestRecord<'_>]) -> Vec<u8> {
        let base_ts = records[0].timestamp;
        let max_ts = records.iter().map(|r| r.timestamp).max().unwrap();
        let raw = encode_records(base_ts, records);
        let payload = match codec {
            1 => {
                let mut enc =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                enc.write_all(&raw).unwrap();
                enc.finish().unwrap()
            }
            2 => {
                // xerial framing, two blocks to exercise block boundaries.
                let mut out = super::XERIAL_MAGIC.to_vec();
                out.extend_from_slice(&1i32.to_be_bytes());
                out.extend_from_slice(&1i32.to_be_bytes());
                let (a, b) = raw.split_at(raw.len() / 2);
                for part in [a, b] {
                    let c = snap::raw::Encoder::new().compress_vec(part).unwrap();
                    out.extend_from_slice(&(c.len() as i32).to_be_bytes());
                    out.extend_from_slice(&c);
                }
                out
            }
            3 => {
                let mut enc = lz4_flex::frame::FrameEncoder::new(Vec::new());
                enc.write_all(&raw).unwrap();
                enc.finish().unwrap()
            }
            4 => ruzstd::encoding::compress_to_vec(
                raw.as_slice(),
                ruzstd::encoding::CompressionLevel::Fastest,
            ),
            _ => unreachable!(),
        };
        build_raw_batch(
            0,
            codec,
            records.len() as i32 - 1,
            base_ts,
            max_ts,
            records.len() as i32,
            &payload,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::compressed_batch;
    use super::*;
    use crate::batch::test_support::{
        batch_of, build_raw_batch, encode_records, put_varint, TestRecord,
    };
    use crate::batch::{
        assign_offsets, validate_batches, CONTROL_FLAG_MASK, TRANSACTIONAL_FLAG_MASK,
    };

    fn all_records(batch: &[u8]) -> Vec<(i64, i64)> {
        let header = BatchHeader::parse(batch).unwrap();
        let mut seen = Vec::new();
        visit_records(&header, batch, |o, t| {
            seen.push((o, t));
            false
        })
        .unwrap();
        seen
    }

    fn sample() -> Vec<TestRecord<'static>> {
        [5i64, 3, 9, 9, 7]
            .iter()
            .map(|&ts| TestRecord {
                timestamp: 1000 + ts,
                key: Some(b"key"),
                value: b"some value bytes",
            })
            .collect()
    }

    #[test]
    fn uncompressed_records() {
        let b = batch_of(&sample());
        let got = all_records(&b);
        assert_eq!(
            got,
            vec![(0, 1005), (1, 1003), (2, 1009), (3, 1009), (4, 1007)]
        );
    }

    #[test]
    fn every_codec_round_trips() {
        let expected = all_records(&batch_of(&sample()));
        for codec in 1..=4 {
            let b = compressed_batch(codec, &sample());
            validate_batches(&b, 1 << 20).unwrap();
            assert_eq!(all_records(&b), expected, "codec {codec}");
        }
    }

    #[test]
    fn raw_snappy_accepted() {
        let recs = sample();
        let raw = crate::batch::test_support::encode_records(1005, &recs);
        let c = snap::raw::Encoder::new().compress_vec(&raw).unwrap();
        let b = crate::batch::test_support::build_raw_batch(0, 2, 4, 1005, 1009, 5, &c);
        assert_eq!(all_records(&b).len(), 5);
    }

    #[test]
    fn log_append_time_uses_max_timestamp() {
        let mut b = batch_of(&sample());
        let mut out = Vec::new();
        crate::batch::assign_offsets(&mut b, 10, 0, 42, &mut out).unwrap();
        assert!(all_records(&b).iter().all(|&(_, t)| t == 42));
        assert_eq!(all_records(&b)[0].0, 10);
    }

    #[test]
    fn truncated_compressed_body_is_corrupt() {
        let b = compressed_batch(1, &sample());
        let header = BatchHeader::parse(&b).unwrap();
        let cut = &b[..b.len() - 10];
        assert!(visit_records(&header, cut, |_, _| false).is_err());
    }

    /// What `read_records` should return for `sample()` stored at `base_offset`.
    fn sample_records(base_offset: i64) -> Vec<Record> {
        sample()
            .iter()
            .enumerate()
            .map(|(i, r)| Record {
                offset: base_offset + i as i64,
                timestamp: r.timestamp,
                key: r.key.map(<[u8]>::to_vec),
                value: Some(r.value.to_vec()),
            })
            .collect()
    }

    fn with_base_offset(mut batch: Vec<u8>, base_offset: i64) -> Vec<u8> {
        assign_offsets(&mut batch, base_offset, -1, -1, &mut Vec::new()).unwrap();
        batch
    }

    #[test]
    fn read_records_of_every_codec() {
        for codec in 0..=4 {
            let b = if codec == 0 {
                batch_of(&sample())
            } else {
                compressed_batch(codec, &sample())
            };
            let b = with_base_offset(b, 30);
            assert_eq!(
                read_records(&b).unwrap(),
                sample_records(30),
                "codec {codec}"
            );
        }
    }

    #[test]
    fn read_records_of_empty_buffer_is_empty() {
        assert_eq!(read_records(&[]).unwrap(), []);
    }

    #[test]
    fn read_records_uses_log_append_time() {
        let mut b = compressed_batch(4, &sample());
        assign_offsets(&mut b, 3, 0, 42, &mut Vec::new()).unwrap();
        let got = read_records(&b).unwrap();
        assert_eq!(got.len(), 5);
        assert!(got.iter().all(|r| r.timestamp == 42));
        assert_eq!(got[4].offset, 7);
        assert_eq!(
            got[4].value.as_deref(),
            Some(b"some value bytes".as_slice())
        );
    }

    #[test]
    fn read_records_skips_control_batches() {
        // A commit marker (key: version 0, type 1; value: version 0, coordinator epoch 0).
        let marker = [TestRecord {
            timestamp: 2000,
            key: Some(&[0, 0, 0, 1]),
            value: &[0, 0, 0, 0, 0, 0],
        }];
        let control = build_raw_batch(
            5,
            CONTROL_FLAG_MASK | TRANSACTIONAL_FLAG_MASK,
            0,
            2000,
            2000,
            1,
            &encode_records(2000, &marker),
        );
        let mut data = with_base_offset(batch_of(&sample()), 0);
        data.extend_from_slice(&control);
        data.extend(with_base_offset(compressed_batch(3, &sample()), 6));
        let mut expected = sample_records(0);
        expected.extend(sample_records(6));
        assert_eq!(read_records(&data).unwrap(), expected);
    }

    /// The records section of one record: deltas 0, a key of `key_len` bytes of `k` (-1: null),
    /// a null value, and one header "h" -> "x".
    fn record_with_header(key_len: i64) -> Vec<u8> {
        let mut body = vec![0u8]; // attributes
        put_varint(&mut body, 0); // timestampDelta
        put_varint(&mut body, 0); // offsetDelta
        put_varint(&mut body, key_len);
        body.extend(std::iter::repeat_n(b'k', key_len.max(0) as usize));
        put_varint(&mut body, -1); // null value
        put_varint(&mut body, 1); // header count
        put_varint(&mut body, 1);
        body.push(b'h');
        put_varint(&mut body, 1);
        body.push(b'x');
        let mut payload = Vec::new();
        put_varint(&mut payload, body.len() as i64);
        payload.extend_from_slice(&body);
        payload
    }

    #[test]
    fn read_records_skips_headers_and_reads_nulls() {
        // One record with a null key, a null value and one header ("h" -> "x").
        let b = build_raw_batch(9, 0, 0, 77, 77, 1, &record_with_header(-1));
        assert_eq!(
            read_records(&b).unwrap(),
            [Record {
                offset: 9,
                timestamp: 77,
                key: None,
                value: None,
            }]
        );
    }

    #[test]
    fn read_records_rejects_damaged_buffers() {
        let b = compressed_batch(1, &sample());
        let mut bad_crc = b.clone();
        let last = bad_crc.len() - 1;
        bad_crc[last] ^= 0x01;
        let mut two = b.clone();
        two.extend_from_slice(&b);
        for (name, data) in [
            ("bad crc", bad_crc.as_slice()),
            ("truncated", &b[..b.len() - 1]),
            ("partial header", &b[..20]),
            ("partial second batch", &two[..two.len() - 5]),
        ] {
            assert!(
                matches!(read_records(data), Err(StorageError::Corrupt(_))),
                "{name}"
            );
        }
    }

    #[test]
    fn read_records_rejects_fields_overrunning_the_record() {
        // A record claiming a 1000-byte key inside a 10-byte record, with a valid CRC.
        let mut body = vec![0u8, 0, 0];
        put_varint(&mut body, 1000);
        body.extend_from_slice(b"abcdef");
        let mut payload = Vec::new();
        put_varint(&mut payload, body.len() as i64);
        payload.extend_from_slice(&body);
        let b = build_raw_batch(0, 0, 0, 1, 1, 1, &payload);
        assert!(
            matches!(read_records(&b), Err(StorageError::Corrupt(m)) if m.contains("overruns"))
        );
        // More records announced than the body holds.
        let short = build_raw_batch(0, 0, 1, 1, 1, 2, &encode_records(1, &sample()[..1]));
        assert!(matches!(
            read_records(&short),
            Err(StorageError::Corrupt(_))
        ));
    }

    /// A control batch at `base_offset` whose one record has `key` and `value` (compressed
    /// with `codec` when not 0).
    fn control_batch(base_offset: i64, codec: i16, key: Option<&[u8]>, value: &[u8]) -> Vec<u8> {
        let record = [TestRecord {
            timestamp: 2000,
            key,
            value,
        }];
        let b = if codec == 0 {
            build_raw_batch(
                0,
                CONTROL_FLAG_MASK | TRANSACTIONAL_FLAG_MASK,
                0,
                2000,
                2000,
                1,
                &encode_records(2000, &record),
            )
        } else {
            let mut b = compressed_batch(codec, &record);
            let attributes = codec | CONTROL_FLAG_MASK | TRANSACTIONAL_FLAG_MASK;
            b[crate::batch::ATTRIBUTES_OFFSET..crate::batch::ATTRIBUTES_OFFSET + 2]
                .copy_from_slice(&attributes.to_be_bytes());
            let crc = crate::crc32c::crc32c(&b[crate::batch::ATTRIBUTES_OFFSET..]);
            b[crate::batch::CRC_OFFSET..crate::batch::CRC_OFFSET + 4]
                .copy_from_slice(&crc.to_be_bytes());
            b
        };
        with_base_offset(b, base_offset)
    }

    fn marker_of(batch: &[u8]) -> (i16, i32) {
        let m = control_marker(&BatchHeader::parse(batch).unwrap(), batch);
        (m.control_type, m.coordinator_epoch)
    }

    #[test]
    fn control_markers_parse_like_kafka() {
        let epoch7 = [0u8, 0, 0, 0, 0, 7];
        type Case<'a> = (&'a str, Option<&'a [u8]>, &'a [u8], (i16, i32));
        let cases: [Case<'_>; 9] = [
            ("abort", Some(&[0, 0, 0, 0]), &epoch7, (0, 7)),
            ("commit", Some(&[0, 0, 0, 1]), &epoch7, (1, 7)),
            // A later key version is read as version 0; a longer key or value too.
            (
                "key v1",
                Some(&[0, 1, 0, 1, 9]),
                &[0, 1, 0, 0, 0, 7, 1],
                (1, 7),
            ),
            // Another control type (KRaft's LEADER_CHANGE) has no coordinator epoch.
            ("other type", Some(&[0, 0, 0, 2]), &epoch7, (2, -1)),
            (
                "negative key version",
                Some(&[0xFF, 0xFF, 0, 1]),
                &epoch7,
                (-1, -1),
            ),
            ("short key", Some(&[0, 0, 1]), &epoch7, (-1, -1)),
            ("null key", None, &epoch7, (-1, -1)),
            (
                "short value",
                Some(&[0, 0, 0, 1]),
                &[0, 0, 0, 0, 7],
                (1, -1),
            ),
            (
                "negative value version",
                Some(&[0, 0, 0, 0]),
                &[0x80, 0, 0, 0, 0, 7],
                (0, -1),
            ),
        ];
        for (name, key, value, expected) in cases {
            assert_eq!(
                marker_of(&control_batch(0, 0, key, value)),
                expected,
                "{name}"
            );
        }
        // Compressed control batches (never written by Kafka) are read too.
        for codec in 1..=4 {
            let b = control_batch(0, codec, Some(&[0, 0, 0, 1]), &epoch7);
            assert_eq!(marker_of(&b), (1, 7), "codec {codec}");
        }
        // A data batch, an empty control batch and a damaged record have no marker.
        assert_eq!(marker_of(&batch_of(&sample())), (-1, -1));
        let empty = build_raw_batch(0, CONTROL_FLAG_MASK, 0, 1, 1, 0, &[]);
        assert_eq!(marker_of(&empty), (-1, -1));
        let mut payload = Vec::new();
        put_varint(&mut payload, 50); // a record length past the end of the batch
        payload.extend_from_slice(&[0, 0, 0, 8, 0, 0]);
        let torn = build_raw_batch(0, CONTROL_FLAG_MASK, 0, 1, 1, 1, &payload);
        assert_eq!(marker_of(&torn), (-1, -1));
    }

    #[test]
    fn read_record_batches_lists_every_batch() {
        let epoch7 = [0u8, 0, 0, 0, 0, 7];
        let mut data = with_base_offset(batch_of(&sample()), 0); // offsets 0..4
        data.extend(control_batch(5, 0, Some(&[0, 0, 0, 1]), &epoch7));
        data.extend(with_base_offset(compressed_batch(2, &sample()), 6)); // 6..10
        data.extend(control_batch(11, 0, None, &epoch7));
        let batches = read_record_batches(&data).unwrap();
        // build_raw_batch: producer 1234, epoch 5.
        let summary: Vec<(i64, i64, i16, bool, i16, usize)> = batches
            .iter()
            .map(|b| {
                (
                    b.base_offset,
                    b.producer_id,
                    b.producer_epoch,
                    b.is_transactional,
                    b.control_type,
                    b.records.len(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (0, 1234, 5, false, -1, 5),
                (5, 1234, 5, true, 1, 0),
                (6, 1234, 5, false, -1, 5),
                (11, 1234, 5, true, -1, 0),
            ]
        );
        assert_eq!(batches[0].records, sample_records(0));
        assert_eq!(batches[2].records, sample_records(6));
        // Every record read_records returns, in the same order.
        let flat: Vec<Record> = batches.into_iter().flat_map(|b| b.records).collect();
        assert_eq!(flat, read_records(&data).unwrap());
        assert!(read_record_batches(&[]).unwrap().is_empty());
        // Damage anywhere gives nothing but the error.
        let mut bad = data.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(matches!(
            read_record_batches(&bad),
            Err(StorageError::Corrupt(_))
        ));
        assert!(matches!(
            read_record_batches(&data[..data.len() - 3]),
            Err(StorageError::Corrupt(_))
        ));
    }

    /// Records keyed as `keys` says (`None`: a null key), in a batch compressed with `codec`.
    fn keyed_batch(codec: i16, keys: &[Option<&'static [u8]>]) -> Vec<u8> {
        let records: Vec<TestRecord<'static>> = keys
            .iter()
            .enumerate()
            .map(|(i, &key)| TestRecord {
                timestamp: 1000 + i as i64,
                key,
                value: b"value",
            })
            .collect();
        if codec == 0 {
            batch_of(&records)
        } else {
            compressed_batch(codec, &records)
        }
    }

    #[test]
    fn null_key_indexes_of_every_codec() {
        let keys: [Option<&'static [u8]>; 6] =
            [Some(b"a"), None, Some(b""), None, None, Some(b"f")];
        for codec in 0..=4 {
            let b = keyed_batch(codec, &keys);
            validate_batches(&b, 1 << 20).unwrap();
            assert_eq!(null_key_indexes(&b).unwrap(), [1, 3, 4], "codec {codec}");
            let all_keyed = keyed_batch(codec, &[Some(b"a"), Some(b""), Some(b"c")]);
            assert!(
                null_key_indexes(&all_keyed).unwrap().is_empty(),
                "codec {codec}"
            );
        }
    }

    #[test]
    fn an_empty_key_is_a_key() {
        let b = keyed_batch(0, &[Some(b""), Some(b""), None]);
        assert_eq!(null_key_indexes(&b).unwrap(), [2]);
        // Headers and a null value do not matter: only the key is looked at.
        // An empty key, a null value (a tombstone) and one header.
        let tombstone = build_raw_batch(0, 0, 0, 5, 5, 1, &record_with_header(0));
        assert!(null_key_indexes(&tombstone).unwrap().is_empty());
    }

    #[test]
    fn null_key_indexes_skip_control_batches() {
        let epoch7 = [0u8, 0, 0, 0, 0, 7];
        // A control batch whose record has no key is not looked at.
        let control = control_batch(0, 0, None, &epoch7);
        assert!(null_key_indexes(&control).unwrap().is_empty());
        let mut data = control.clone();
        data.extend(with_base_offset(keyed_batch(0, &[Some(b"k"), None]), 1));
        assert_eq!(null_key_indexes(&data).unwrap(), [1]);
        assert!(null_key_indexes(&[]).unwrap().is_empty());
    }

    #[test]
    fn null_key_indexes_are_those_of_the_first_batch_with_any() {
        let mut data = keyed_batch(0, &[Some(b"a"), Some(b"b")]);
        data.extend(with_base_offset(
            keyed_batch(3, &[Some(b"c"), None, None]),
            2,
        ));
        data.extend(with_base_offset(keyed_batch(0, &[None]), 5));
        assert_eq!(null_key_indexes(&data).unwrap(), [1, 2]);
    }

    #[test]
    fn null_key_indexes_of_damaged_buffers_are_errors() {
        let b = keyed_batch(1, &[Some(b"a"), None]);
        let mut garbled = b.clone();
        for byte in &mut garbled[RECORD_BATCH_OVERHEAD..] {
            *byte ^= 0x5A;
        }
        let mut bad_magic = b.clone();
        bad_magic[crate::batch::MAGIC_OFFSET] = 1;
        for (name, data) in [
            ("truncated", &b[..b.len() - 1]),
            ("partial header", &b[..20]),
            ("garbled gzip body", garbled.as_slice()),
            ("magic 1", bad_magic.as_slice()),
        ] {
            assert!(
                matches!(null_key_indexes(data), Err(StorageError::Corrupt(_))),
                "{name}"
            );
        }
        // A key length past the end of its record.
        let mut body = vec![0u8, 0, 0];
        put_varint(&mut body, 1000);
        body.extend_from_slice(b"abc");
        let mut payload = Vec::new();
        put_varint(&mut payload, body.len() as i64);
        payload.extend_from_slice(&body);
        let forged = build_raw_batch(0, 0, 0, 1, 1, 1, &payload);
        assert!(matches!(
            null_key_indexes(&forged),
            Err(StorageError::Corrupt(m)) if m.contains("overruns")
        ));
    }
}
