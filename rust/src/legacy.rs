//! Message formats v0 and v1, which clients older than Kafka 0.11 write and read: Produce v0–2
//! carries message sets in them and Fetch v0–3 expects them back. The log stores magic 2 only, so
//! they are converted at the edge, as Kafka 3.x converts them:
//!
//! * [`up_convert`] turns a produced message set into one v2 batch (Kafka's `LogValidator` on a
//!   log whose format is v2): every message, or every message inside one compressed wrapper,
//!   becomes a record of a single batch with the wrapper's codec, offsets 0, 1, …, no producer,
//!   no headers.
//! * [`down_convert`] turns stored batches into a message set of magic 0 or 1 (Kafka's
//!   `RecordsUtil.downConvert`): control batches are dropped, an uncompressed batch loses the
//!   records before the fetch offset, a compressed batch becomes one wrapper message with the same
//!   codec. The result is then cut or padded to the size Kafka's lazy send commits to
//!   (`LazyDownConversionRecordsSend`): the size of what was read, or of the first converted
//!   batch if that is larger; what is missing is filled with overflow batches (offset -1 and a
//!   length past the response), which every client skips as a partial message.
//!
//! A message is `offset i64, size i32` then `crc u32, magic i8, attributes i8, [timestamp i64
//! (v1)], key (i32 length, -1 null), value (i32 length)`, the CRC being CRC-32 (IEEE) of
//! everything after it. Attribute bits 0-2 are the codec, bit 3 (v1) LogAppendTime. A compressed
//! wrapper has a null key and the compressed inner message set as its value; its offset is the
//! absolute offset of its last inner message; inner offsets are absolute in v0 and relative
//! (0, 1, …) in v1. LZ4 in a v0 wrapper carries the frame-descriptor checksum Kafka 0.8–0.9
//! computed over the magic number as well (`KafkaLZ4BlockOutputStream`'s "broken" checksum).

use crate::batch::{
    get_i32, get_i64, BatchHeader, CRC_OFFSET, CURRENT_MAGIC, LOG_OVERHEAD, MAGIC_OFFSET,
    NO_TIMESTAMP, RECORD_BATCH_OVERHEAD,
};
use crate::builder::{put_varint, varint_len};
use crate::columnar::compress;
use crate::crc32c::crc32c;
use crate::errors::{Result, StorageError};
use crate::records::{copy_records, decompress, Record};

/// Attribute bit 3 of a v1 message: the timestamp is the log append time.
const TIMESTAMP_TYPE_BIT: u8 = 0x08;
const CODEC_MASK: u8 = 0x07;
const ZSTD: u8 = 4;
/// `crc, magic, attributes, key length, value length`; v1 adds the timestamp.
const MESSAGE_OVERHEAD_V0: usize = 4 + 1 + 1 + 4 + 4;
const MESSAGE_OVERHEAD_V1: usize = MESSAGE_OVERHEAD_V0 + 8;
/// Where a message's CRC starts and what it covers, from the start of its log entry.
const MESSAGE_CRC_OFFSET: usize = LOG_OVERHEAD;
const MESSAGE_MAGIC_OFFSET: usize = LOG_OVERHEAD + 4;
/// `LazyDownConversionRecordsSend.MAX_READ_SIZE`: the largest overflow batch.
const MAX_OVERFLOW_CHUNK: usize = 128 * 1024;
/// The 4-byte LZ4 frame magic number that precedes the frame descriptor.
const LZ4_MAGIC_LEN: usize = 4;

fn overhead(magic: u8) -> usize {
    if magic == 0 {
        MESSAGE_OVERHEAD_V0
    } else {
        MESSAGE_OVERHEAD_V1
    }
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = flate2::Crc::new();
    crc.update(data);
    crc.sum()
}

/// One message of a legacy message set, its key and value borrowed.
#[derive(Debug, Clone, Copy)]
struct Message<'a> {
    #[cfg_attr(not(test), allow(dead_code))] // the conversions renumber; the tests read it
    offset: i64,
    magic: u8,
    attributes: u8,
    timestamp: i64,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
}

impl Message<'_> {
    fn codec(&self) -> u8 {
        self.attributes & CODEC_MASK
    }
}

/// The whole messages of `data` (a trailing partial message is ignored, as Kafka's
/// `ByteBufferLogInputStream` does), each CRC-checked.
fn messages(data: &[u8]) -> Result<Vec<Message<'_>>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while data.len() - pos >= LOG_OVERHEAD {
        let size = get_i32(data, pos + 8);
        if size < MESSAGE_OVERHEAD_V0 as i32 {
            return Err(StorageError::corrupt(format!(
                "message size {size} is below the minimum of {MESSAGE_OVERHEAD_V0}"
            )));
        }
        let end = pos + LOG_OVERHEAD + size as usize;
        if end > data.len() {
            break;
        }
        out.push(message(&data[pos..end])?);
        pos = end;
    }
    Ok(out)
}

fn message(entry: &[u8]) -> Result<Message<'_>> {
    let magic = entry[MESSAGE_MAGIC_OFFSET];
    if magic > 1 {
        return Err(StorageError::corrupt(format!(
            "a magic {magic} batch among messages of magic 0 or 1"
        )));
    }
    if entry.len() < LOG_OVERHEAD + overhead(magic) {
        return Err(StorageError::corrupt(format!(
            "message of magic {magic} shorter than its overhead"
        )));
    }
    let stored = u32::from_be_bytes(
        entry[MESSAGE_CRC_OFFSET..MESSAGE_CRC_OFFSET + 4]
            .try_into()
            .expect("4 bytes"),
    );
    let computed = crc32(&entry[MESSAGE_MAGIC_OFFSET..]);
    if stored != computed {
        return Err(StorageError::corrupt(format!(
            "Record is corrupt (stored crc = {stored}, computed crc = {computed})"
        )));
    }
    let attributes = entry[MESSAGE_MAGIC_OFFSET + 1];
    let mut pos = MESSAGE_MAGIC_OFFSET + 2;
    let timestamp = if magic == 0 {
        NO_TIMESTAMP
    } else {
        pos += 8;
        get_i64(entry, pos - 8)
    };
    let key = bytes_field(entry, &mut pos)?;
    let value = bytes_field(entry, &mut pos)?;
    if pos != entry.len() {
        return Err(StorageError::corrupt(format!(
            "message size {} does not match its key and value ({} bytes)",
            entry.len() - LOG_OVERHEAD,
            pos - LOG_OVERHEAD
        )));
    }
    Ok(Message {
        offset: get_i64(entry, 0),
        magic,
        attributes,
        timestamp,
        key,
        value,
    })
}

fn bytes_field<'a>(entry: &'a [u8], pos: &mut usize) -> Result<Option<&'a [u8]>> {
    if entry.len() - *pos < 4 {
        return Err(StorageError::corrupt("message truncated in a length field"));
    }
    let len = get_i32(entry, *pos);
    *pos += 4;
    if len < 0 {
        return Ok(None);
    }
    let end = pos
        .checked_add(len as usize)
        .filter(|&end| end <= entry.len())
        .ok_or_else(|| StorageError::corrupt("message key or value overruns the message"))?;
    let data = &entry[*pos..end];
    *pos = end;
    Ok(Some(data))
}

/// Whether `data` starts with a message of magic 0 or 1 (else it is taken for v2 batches).
pub fn is_legacy(data: &[u8]) -> bool {
    data.len() > MAGIC_OFFSET && data[MAGIC_OFFSET] < 2
}

/// One v2 batch holding every record of the message set `data` (see the module docs).
///
/// Errors: [`StorageError::Corrupt`] for a bad CRC, a malformed message or a set without a whole
/// message (Kafka's CORRUPT_MESSAGE); [`StorageError::InvalidArgument`] for what Kafka's
/// `LogValidator` refuses as INVALID_RECORD: a compressed wrapper beside other messages, an inner
/// message that is compressed or of another magic than its wrapper.
pub fn up_convert(data: &[u8]) -> Result<Vec<u8>> {
    let shallow = messages(data)?;
    if shallow.is_empty() {
        return Err(StorageError::corrupt("no whole message in the message set"));
    }
    let codec = shallow.iter().map(Message::codec).max().unwrap_or(0);
    if codec == 0 {
        return Ok(v2_batch(0, &shallow));
    }
    if shallow.len() > 1 {
        return Err(StorageError::invalid(
            "Compressed outer record has more than one batch",
        ));
    }
    let wrapper = shallow[0];
    let mut inner_bytes = Vec::new();
    decompress(
        codec,
        &lz4_with_proper_checksum(codec, wrapper.magic, wrapper.value.unwrap_or_default()),
        &mut inner_bytes,
    )?;
    let mut inner = messages(&inner_bytes)?;
    for message in inner.iter_mut() {
        if message.magic != wrapper.magic {
            return Err(StorageError::invalid(format!(
                "Log record magic {} does not match outer magic {}",
                message.magic, wrapper.magic
            )));
        }
        if message.codec() != 0 {
            return Err(StorageError::invalid(
                "Compressed outer record should not have an inner record with a compression attribute set",
            ));
        }
        if wrapper.magic == 1 && wrapper.attributes & TIMESTAMP_TYPE_BIT != 0 {
            message.timestamp = wrapper.timestamp;
        }
    }
    if inner.is_empty() {
        return Err(StorageError::corrupt(
            "a compressed message without messages",
        ));
    }
    Ok(v2_batch(codec, &inner))
}

/// A v2 batch (base offset 0, no producer, CreateTime) of `messages`' keys, values and
/// timestamps, its records compressed with `codec`.
fn v2_batch(codec: u8, messages: &[Message<'_>]) -> Vec<u8> {
    let base_timestamp = messages[0].timestamp;
    let max_timestamp = messages
        .iter()
        .map(|m| m.timestamp)
        .max()
        .unwrap_or(NO_TIMESTAMP);
    let mut records = Vec::new();
    for (delta, m) in messages.iter().enumerate() {
        let timestamp_delta = m.timestamp - base_timestamp;
        let body = 1
            + varint_len(timestamp_delta)
            + varint_len(delta as i64)
            + field_len(m.key)
            + field_len(m.value)
            + varint_len(0);
        put_varint(&mut records, body as i64);
        records.push(0);
        put_varint(&mut records, timestamp_delta);
        put_varint(&mut records, delta as i64);
        put_field(&mut records, m.key);
        put_field(&mut records, m.value);
        put_varint(&mut records, 0);
    }
    let mut batch = Vec::with_capacity(RECORD_BATCH_OVERHEAD + records.len());
    batch.extend_from_slice(&0i64.to_be_bytes()); // baseOffset
    batch.extend_from_slice(&0i32.to_be_bytes()); // batchLength, set below
    batch.extend_from_slice(&(-1i32).to_be_bytes()); // partitionLeaderEpoch
    batch.push(CURRENT_MAGIC as u8);
    batch.extend_from_slice(&0u32.to_be_bytes()); // crc, set below
    batch.extend_from_slice(&(codec as i16).to_be_bytes());
    batch.extend_from_slice(&(messages.len() as i32 - 1).to_be_bytes());
    batch.extend_from_slice(&base_timestamp.to_be_bytes());
    batch.extend_from_slice(&max_timestamp.to_be_bytes());
    batch.extend_from_slice(&(-1i64).to_be_bytes()); // producerId
    batch.extend_from_slice(&(-1i16).to_be_bytes()); // producerEpoch
    batch.extend_from_slice(&(-1i32).to_be_bytes()); // baseSequence
    batch.extend_from_slice(&(messages.len() as i32).to_be_bytes());
    if codec == 0 {
        batch.extend_from_slice(&records);
    } else {
        compress(codec, &records, &mut batch).expect("compressing into memory cannot fail");
    }
    let length = (batch.len() - LOG_OVERHEAD) as i32;
    batch[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c(&batch[CRC_OFFSET + 4..]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    batch
}

fn field_len(data: Option<&[u8]>) -> usize {
    data.map_or(varint_len(-1), |d| varint_len(d.len() as i64) + d.len())
}

fn put_field(out: &mut Vec<u8>, data: Option<&[u8]>) {
    match data {
        None => put_varint(out, -1),
        Some(d) => {
            put_varint(out, d.len() as i64);
            out.extend_from_slice(d);
        }
    }
}

/// What [`down_convert`] gives back.
#[derive(Debug, PartialEq, Eq)]
pub enum DownConverted {
    /// The message set to send (possibly empty).
    Messages(Vec<u8>),
    /// A zstd batch was among those to convert: v0 and v1 have no zstd (Kafka answers
    /// UNSUPPORTED_COMPRESSION_TYPE).
    Zstd,
}

/// The v2 batches of `data` (whole batches, as a fetch reads them) as messages of `to_magic` (0
/// or 1), sized as Kafka's lazy down-conversion sends them (see the module docs).
/// `fetch_offset` is the fetch's offset: an uncompressed batch's records below it are left out.
pub fn down_convert(data: &[u8], to_magic: u8, fetch_offset: i64) -> Result<DownConverted> {
    let mut out = Vec::new();
    let mut first_converted = None;
    let mut pos = 0usize;
    let mut records = Vec::new();
    let mut inner = Vec::new();
    while let Some(header) = BatchHeader::parse(&data[pos..]) {
        header.check_structure()?;
        let end = pos + header.size();
        if end > data.len() {
            break;
        }
        let batch = &data[pos..end];
        pos = end;
        if header.is_control() {
            continue;
        }
        let codec = header.compression();
        if codec == ZSTD {
            return Ok(DownConverted::Zstd);
        }
        records.clear();
        copy_records(&header, batch, &mut records)?;
        if codec == 0 {
            records.retain(|r| r.offset >= fetch_offset);
        }
        if records.is_empty() {
            continue;
        }
        let start = out.len();
        let log_append_time = header.is_log_append_time();
        let attributes = if to_magic > 0 && log_append_time {
            TIMESTAMP_TYPE_BIT
        } else {
            0
        };
        if codec == 0 {
            for r in &records {
                put_message(&mut out, to_magic, r.offset, attributes, r, r.timestamp);
            }
        } else {
            let base_offset = records[0].offset;
            inner.clear();
            for r in &records {
                let offset = if to_magic > 0 {
                    r.offset - base_offset
                } else {
                    r.offset
                };
                put_message(&mut inner, to_magic, offset, attributes, r, r.timestamp);
            }
            let mut value = Vec::new();
            compress(codec, &inner, &mut value)?;
            if to_magic == 0 {
                break_lz4_checksum(codec, &mut value);
            }
            let last = records.last().expect("not empty");
            let timestamp = if log_append_time {
                header.max_timestamp
            } else {
                records
                    .iter()
                    .map(|r| r.timestamp)
                    .max()
                    .unwrap_or(NO_TIMESTAMP)
            };
            let wrapper = Record {
                offset: last.offset,
                timestamp,
                key: None,
                value: Some(value),
            };
            put_message(
                &mut out,
                to_magic,
                last.offset,
                attributes | codec,
                &wrapper,
                timestamp,
            );
        }
        first_converted.get_or_insert(out.len() - start);
    }
    let Some(first) = first_converted else {
        return Ok(DownConverted::Messages(Vec::new()));
    };
    fit(&mut out, data.len().max(first));
    Ok(DownConverted::Messages(out))
}

fn put_message(
    out: &mut Vec<u8>,
    magic: u8,
    offset: i64,
    attributes: u8,
    r: &Record,
    timestamp: i64,
) {
    let size =
        overhead(magic) + r.key.as_ref().map_or(0, Vec::len) + r.value.as_ref().map_or(0, Vec::len);
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&(size as i32).to_be_bytes());
    let crc_at = out.len();
    out.extend_from_slice(&[0; 4]);
    out.push(magic);
    out.push(attributes);
    if magic > 0 {
        out.extend_from_slice(&timestamp.to_be_bytes());
    }
    for field in [&r.key, &r.value] {
        match field {
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(d) => {
                out.extend_from_slice(&(d.len() as i32).to_be_bytes());
                out.extend_from_slice(d);
            }
        }
    }
    let crc = crc32(&out[crc_at + 4..]);
    out[crc_at..crc_at + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Cuts `out` to `size` bytes, or pads it with overflow batches to `size`
/// (`LazyDownConversionRecordsSend.buildOverflowBatch`).
fn fit(out: &mut Vec<u8>, size: usize) {
    if out.len() >= size {
        out.truncate(size);
        return;
    }
    while out.len() < size {
        let remaining = size - out.len();
        let chunk = (remaining + 1).clamp(LOG_OVERHEAD, MAX_OVERFLOW_CHUNK);
        let mut overflow = vec![0u8; chunk];
        overflow[..8].copy_from_slice(&(-1i64).to_be_bytes());
        let length = (remaining + 1).max(RECORD_BATCH_OVERHEAD) as i32;
        overflow[8..12].copy_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&overflow[..chunk.min(remaining)]);
    }
}

/// The end of an LZ4 frame descriptor (FLG, BD and the optional 8-byte content size), from the
/// frame's start; `None` if `frame` is too short to hold one.
fn lz4_descriptor_end(frame: &[u8]) -> Option<usize> {
    let flg = *frame.get(LZ4_MAGIC_LEN)?;
    let end = LZ4_MAGIC_LEN + 2 + if flg & 0x08 != 0 { 8 } else { 0 };
    (frame.len() > end).then_some(end)
}

fn lz4_header_checksum(bytes: &[u8]) -> u8 {
    (xxhash_rust::xxh32::xxh32(bytes, 0) >> 8) as u8
}

/// A v0 wrapper's LZ4 frame with its descriptor checksum made the standard one, so the frame
/// decoder accepts it (Kafka reads v0 LZ4 ignoring that checksum).
fn lz4_with_proper_checksum(codec: u8, magic: u8, value: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    const LZ4: u8 = 3;
    match lz4_descriptor_end(value) {
        Some(end) if codec == LZ4 && magic == 0 => {
            let mut fixed = value.to_vec();
            fixed[end] = lz4_header_checksum(&value[LZ4_MAGIC_LEN..end]);
            std::borrow::Cow::Owned(fixed)
        }
        _ => std::borrow::Cow::Borrowed(value),
    }
}

/// Gives a frame written for a v0 wrapper the descriptor checksum v0 readers expect, computed
/// over the magic number too.
fn break_lz4_checksum(codec: u8, frame: &mut [u8]) {
    const LZ4: u8 = 3;
    if codec == LZ4 {
        if let Some(end) = lz4_descriptor_end(frame) {
            frame[end] = lz4_header_checksum(&frame[..end]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::validate_batches;
    use crate::records::read_records;

    fn legacy(
        magic: u8,
        offset: i64,
        attributes: u8,
        ts: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Vec<u8> {
        let mut out = Vec::new();
        let r = Record {
            offset,
            timestamp: ts,
            key: key.map(<[u8]>::to_vec),
            value: value.map(<[u8]>::to_vec),
        };
        put_message(&mut out, magic, offset, attributes, &r, ts);
        out
    }

    fn wrapper(magic: u8, codec: u8, inner: &[u8], last_offset: i64, ts: i64) -> Vec<u8> {
        let mut value = Vec::new();
        compress(codec, inner, &mut value).unwrap();
        if magic == 0 {
            break_lz4_checksum(codec, &mut value);
        }
        legacy(magic, last_offset, codec, ts, None, Some(&value))
    }

    type Fields = (i64, i64, Option<Vec<u8>>, Option<Vec<u8>>);

    fn kv(records: &[Record]) -> Vec<Fields> {
        records
            .iter()
            .map(|r| (r.offset, r.timestamp, r.key.clone(), r.value.clone()))
            .collect()
    }

    #[test]
    fn uncompressed_messages_become_one_batch() {
        let mut set = legacy(1, 0, 0, 1000, Some(b"k"), Some(b"a"));
        set.extend(legacy(1, 1, 0, 1002, None, Some(b"b")));
        set.extend(legacy(1, 2, 0, 1001, Some(b""), None));
        let batch = up_convert(&set).unwrap();
        let info = validate_batches(&batch, i64::MAX).unwrap();
        assert_eq!(
            (info.batch_count, info.record_count, info.max_timestamp),
            (1, 3, 1002)
        );
        assert_eq!(info.producer_id, -1);
        assert_eq!(
            kv(&read_records(&batch).unwrap()),
            vec![
                (0, 1000, Some(b"k".to_vec()), Some(b"a".to_vec())),
                (1, 1002, None, Some(b"b".to_vec())),
                (2, 1001, Some(vec![]), None),
            ]
        );
    }

    #[test]
    fn magic_0_has_no_timestamps() {
        let set = legacy(0, 7, 0, -1, None, Some(b"x"));
        let batch = up_convert(&set).unwrap();
        let records = read_records(&batch).unwrap();
        assert_eq!(kv(&records), vec![(0, -1, None, Some(b"x".to_vec()))]);
    }

    #[test]
    fn a_compressed_wrapper_keeps_its_codec_for_every_codec_v0_and_v1() {
        for magic in [0u8, 1] {
            for codec in [1u8, 2, 3] {
                let mut inner = legacy(magic, 0, 0, 5, Some(b"a"), Some(b"1"));
                inner.extend(legacy(magic, 1, 0, 6, Some(b"b"), Some(b"2")));
                let set = wrapper(magic, codec, &inner, 1, 6);
                let batch = up_convert(&set).unwrap();
                let info = validate_batches(&batch, i64::MAX).unwrap();
                assert_eq!(
                    (info.compression, info.record_count),
                    (codec, 2),
                    "magic {magic} codec {codec}"
                );
                let values: Vec<_> = read_records(&batch)
                    .unwrap()
                    .into_iter()
                    .map(|r| r.value)
                    .collect();
                assert_eq!(values, vec![Some(b"1".to_vec()), Some(b"2".to_vec())]);
            }
        }
    }

    #[test]
    fn bad_crc_and_nested_compression_are_refused() {
        let mut set = legacy(1, 0, 0, 1, None, Some(b"v"));
        let last = set.len() - 1;
        set[last] ^= 1;
        assert!(
            matches!(up_convert(&set), Err(StorageError::Corrupt(m)) if m.contains("Record is corrupt"))
        );

        let inner = wrapper(1, 1, &legacy(1, 0, 0, 1, None, Some(b"v")), 0, 1);
        let set = wrapper(1, 1, &inner, 0, 1);
        assert!(matches!(
            up_convert(&set),
            Err(StorageError::InvalidArgument(_))
        ));

        let mut two = wrapper(1, 1, &legacy(1, 0, 0, 1, None, Some(b"v")), 0, 1);
        two.extend(legacy(1, 1, 0, 1, None, Some(b"w")));
        assert!(matches!(
            up_convert(&two),
            Err(StorageError::InvalidArgument(_))
        ));
        assert!(matches!(
            up_convert(&[0u8; 5]),
            Err(StorageError::Corrupt(_))
        ));
    }

    fn stored(codec: u8, base_offset: i64, values: &[&[u8]]) -> Vec<u8> {
        let mut set = Vec::new();
        for (i, v) in values.iter().enumerate() {
            set.extend(legacy(
                1,
                i as i64,
                0,
                100 + i as i64,
                Some(b"key"),
                Some(v),
            ));
        }
        let inner = set.clone();
        let mut batch = if codec == 0 {
            up_convert(&set).unwrap()
        } else {
            up_convert(&wrapper(1, codec, &inner, values.len() as i64 - 1, 0)).unwrap()
        };
        batch[..8].copy_from_slice(&base_offset.to_be_bytes());
        let crc = crc32c(&batch[CRC_OFFSET + 4..]);
        batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        batch
    }

    fn converted(data: &[u8], magic: u8, fetch_offset: i64) -> Vec<u8> {
        match down_convert(data, magic, fetch_offset).unwrap() {
            DownConverted::Messages(m) => m,
            DownConverted::Zstd => panic!("zstd"),
        }
    }

    #[test]
    fn down_conversion_round_trips_through_up_conversion() {
        for codec in [0u8, 1, 2, 3] {
            for magic in [0u8, 1] {
                let data = stored(codec, 40, &[b"a", b"bb", b"ccc"]);
                let out = converted(&data, magic, 40);
                let shallow = messages(&out).unwrap();
                let deep: Vec<Message<'_>> = if codec == 0 {
                    shallow.clone()
                } else {
                    assert_eq!((shallow.len(), shallow[0].offset), (1, 42));
                    Vec::new()
                };
                if codec == 0 {
                    assert_eq!(
                        deep.iter().map(|m| m.offset).collect::<Vec<_>>(),
                        vec![40, 41, 42]
                    );
                    let ts: Vec<_> = deep.iter().map(|m| m.timestamp).collect();
                    assert_eq!(
                        ts,
                        if magic == 0 {
                            vec![-1; 3]
                        } else {
                            vec![100, 101, 102]
                        }
                    );
                }
                // Whatever was cut off or padded, the whole messages read back as v2 again.
                let whole_len: usize = shallow
                    .iter()
                    .map(|m| {
                        LOG_OVERHEAD
                            + overhead(m.magic)
                            + m.key.map_or(0, <[u8]>::len)
                            + m.value.map_or(0, <[u8]>::len)
                    })
                    .sum();
                let again = up_convert(&out[..whole_len]).unwrap();
                let values: Vec<_> = read_records(&again)
                    .unwrap()
                    .into_iter()
                    .map(|r| r.value.unwrap())
                    .collect();
                assert_eq!(
                    values,
                    vec![b"a".to_vec(), b"bb".to_vec(), b"ccc".to_vec()],
                    "codec {codec} magic {magic}"
                );
            }
        }
    }

    #[test]
    fn uncompressed_records_before_the_fetch_offset_are_left_out() {
        let data = stored(0, 10, &[b"a", b"b", b"c"]);
        let out = converted(&data, 1, 12);
        let shallow = messages(&out).unwrap();
        assert_eq!(
            shallow.iter().map(|m| m.offset).collect::<Vec<_>>(),
            vec![12]
        );
    }

    #[test]
    fn the_result_is_padded_or_cut_to_kafkas_size() {
        // v2 is more compact than v1 for many small records: the first batch's conversion is
        // longer than both batches read, and what follows it is cut.
        let values: Vec<&[u8]> = vec![b"v"; 50];
        let mut two = stored(0, 0, &values);
        two.extend(stored(0, 50, &values));
        let first = converted(&two[..two.len() / 2], 1, 0).len();
        assert!(first > two.len());
        let out = converted(&two, 1, 0);
        assert_eq!(out, converted(&two[..two.len() / 2], 1, 0));
        let data = stored(0, 0, &values);
        // Records before the fetch offset dropped: shorter, padded with an overflow batch.
        let out = converted(&data, 1, 49);
        assert_eq!(out.len(), data.len());
        let whole = LOG_OVERHEAD + MESSAGE_OVERHEAD_V1 + 3 + 1;
        assert_eq!(get_i64(&out, whole), -1);
        assert_eq!(get_i32(&out, whole + 8) as usize, data.len() - whole + 1);
        assert!(out[whole + 12..].iter().all(|&b| b == 0));
    }

    #[test]
    fn control_batches_are_dropped_and_zstd_refused() {
        let marker = crate::builder::build_control_batch(5, 1, 0, true, 1000);
        assert_eq!(converted(&marker, 1, 0), Vec::<u8>::new());
        let mut zstd = stored(0, 0, &[b"a"]);
        zstd[22] |= ZSTD;
        assert_eq!(down_convert(&zstd, 1, 0).unwrap(), DownConverted::Zstd);
    }

    #[test]
    fn v0_lz4_carries_the_old_descriptor_checksum() {
        let data = stored(3, 0, &[b"a"]);
        let out = converted(&data, 0, 0);
        let wrapper = messages(&out).unwrap()[0];
        let frame = wrapper.value.unwrap();
        let end = lz4_descriptor_end(frame).unwrap();
        assert_eq!(frame[end], lz4_header_checksum(&frame[..end]));
        assert_ne!(frame[end], lz4_header_checksum(&frame[LZ4_MAGIC_LEN..end]));
        let again = up_convert(&out).unwrap();
        assert_eq!(
            read_records(&again).unwrap()[0].value.as_deref(),
            Some(&b"a"[..])
        );
    }
}
