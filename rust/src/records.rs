//! Record-level reading inside a v2 batch: decompression of the batch body and iteration over
//! its records' `(offset, timestamp)`.
//!
//! Only `find_offset_by_timestamp` and `max_timestamp_record` need this (ListOffsets); the append
//! and fetch paths never look inside a batch. Each record is
//! `length varint, attributes i8, timestampDelta varlong, offsetDelta varint, keyLength varint,
//! key, valueLength varint, value, headerCount varint, headers...` (zigzag varints); after the
//! first three fields the rest of the record is skipped using `length`.
//!
//! Codecs (attribute bits 0-2): 1 gzip, 2 snappy (xerial framing as the Java client and
//! librdkafka write it, or raw snappy), 3 lz4 (frame format), 4 zstd. Bodies are decoded as
//! streams, so a compressed batch never needs more memory than a small window, and iteration stops
//! as soon as the caller has found its record.

use std::io::{self, BufRead, BufReader, Read};

use flate2::read::MultiGzDecoder;

use crate::batch::{BatchHeader, RECORD_BATCH_OVERHEAD};
use crate::errors::{Result, StorageError};

/// Header of the xerial snappy stream format (`SnappyCodec.MAGIC_HEADER` + version + compat).
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_LEN: usize = 16;

/// Calls `visit(offset, timestamp)` for each record of `batch` (a complete batch, header
/// included) until it returns `true`. Returns whether a visit returned `true`.
///
/// For LogAppendTime batches every record's timestamp is the batch's `maxTimestamp`.
pub fn visit_records(
    header: &BatchHeader,
    batch: &[u8],
    mut visit: impl FnMut(i64, i64) -> bool,
) -> Result<bool> {
    let body = &batch[RECORD_BATCH_OVERHEAD..];
    let count = header.records_count.max(0) as usize;
    match header.compression() {
        0 => scan(header, body, count, &mut visit),
        1 => scan(
            header,
            BufReader::new(MultiGzDecoder::new(body)),
            count,
            &mut visit,
        ),
        2 => {
            if body.starts_with(&XERIAL_MAGIC) {
                scan(
                    header,
                    BufReader::new(XerialSnappyReader::new(body)),
                    count,
                    &mut visit,
                )
            } else {
                let raw = decompress_raw_snappy(body)?;
                scan(header, raw.as_slice(), count, &mut visit)
            }
        }
        3 => scan(
            header,
            BufReader::new(lz4_flex::frame::FrameDecoder::new(body)),
            count,
            &mut visit,
        ),
        4 => {
            let decoder = ruzstd::decoding::StreamingDecoder::new(body)
                .map_err(|e| StorageError::corrupt(format!("invalid zstd frame: {e}")))?;
            scan(header, BufReader::new(decoder), count, &mut visit)
        }
        codec => Err(StorageError::corrupt(format!(
            "unknown compression codec id {codec}"
        ))),
    }
}

fn scan<R: BufRead>(
    header: &BatchHeader,
    mut input: R,
    count: usize,
    visit: &mut impl FnMut(i64, i64) -> bool,
) -> Result<bool> {
    let log_append_time = header.is_log_append_time();
    for _ in 0..count {
        let mut reader = CountingReader {
            inner: &mut input,
            consumed: 0,
        };
        let length = read_varint(&mut reader)?;
        if length < 0 {
            return Err(StorageError::corrupt(format!(
                "negative record length {length}"
            )));
        }
        let start = reader.consumed;
        let _attributes = read_u8(&mut reader)?;
        let timestamp_delta = read_varint(&mut reader)?;
        let offset_delta = read_varint(&mut reader)?;
        let used = (reader.consumed - start) as i64;
        if used > length {
            return Err(StorageError::corrupt("record shorter than its own header"));
        }
        skip(&mut input, (length - used) as u64)?;
        let offset = header.base_offset.saturating_add(offset_delta);
        let timestamp = if log_append_time {
            header.max_timestamp
        } else {
            header.base_timestamp.saturating_add(timestamp_delta)
        };
        if visit(offset, timestamp) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Tracks how many bytes the varint readers consumed.
struct CountingReader<'a, R: BufRead> {
    inner: &'a mut R,
    consumed: usize,
}

fn read_u8<R: BufRead>(r: &mut CountingReader<'_, R>) -> Result<u8> {
    let buf = r.inner.fill_buf().map_err(decode_error)?;
    let Some(&byte) = buf.first() else {
        return Err(StorageError::corrupt("record data ends early"));
    };
    r.inner.consume(1);
    r.consumed += 1;
    Ok(byte)
}

/// Zigzag varlong (also used for varints; callers range-check as needed).
fn read_varint<R: BufRead>(r: &mut CountingReader<'_, R>) -> Result<i64> {
    let mut raw: u64 = 0;
    for shift in (0..70).step_by(7) {
        let byte = read_u8(r)?;
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
    use crate::batch::test_support::{batch_of, TestRecord};
    use crate::batch::validate_batches;

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
}
