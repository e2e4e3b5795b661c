//! CRC-32C (Castagnoli), the checksum of Kafka record batches (v2).
//!
//! The hardware path uses the SSE4.2 `crc32` instruction on x86-64 and the ARMv8 CRC extension on
//! aarch64, selected once at run time; everything else falls back to a portable slicing-by-8 table
//! implementation. On x86-64 a long buffer is checksummed as three interleaved streams (the
//! instruction's latency is three times its throughput), whose registers are then combined with
//! precomputed "append this many zero bytes" operators: the CRC is linear over GF(2), so
//! `crc(A ++ B) = shift(crc(A), |B|) ^ crc0(B)`. All paths compute the same function: reflected polynomial `0x82F63B78`, initial
//! value and final xor `0xFFFFFFFF`, so `crc32c(b"123456789") == 0xE3069283`.

/// Reflected CRC-32C polynomial.
const POLY: u32 = 0x82F6_3B78;

/// Slicing-by-8 lookup tables, built at compile time.
static TABLES: [[u32; 256]; 8] = build_tables();

const fn build_tables() -> [[u32; 256]; 8] {
    let mut tables = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        tables[0][i] = crc;
        i += 1;
    }
    let mut t = 1;
    while t < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = tables[t - 1][i];
            tables[t][i] = (prev >> 8) ^ tables[0][(prev & 0xFF) as usize];
            i += 1;
        }
        t += 1;
    }
    tables
}

/// Interleaved block lengths (bytes) of the three-stream hardware path: long blocks first, then
/// short ones for what is left.
const LONG_BLOCK: usize = 8192;
const SHORT_BLOCK: usize = 256;

/// The register after `LONG_BLOCK` / `SHORT_BLOCK` zero bytes, one table per input byte.
static SHIFT_LONG: [[u32; 256]; 4] = zero_shift_tables(LONG_BLOCK);
static SHIFT_SHORT: [[u32; 256]; 4] = zero_shift_tables(SHORT_BLOCK);

/// A linear map on the 32-bit register as a GF(2) matrix: `m[i]` is the image of bit `i`.
type Gf2Matrix = [u32; 32];

const fn gf2_apply(m: &Gf2Matrix, mut v: u32) -> u32 {
    let mut out = 0;
    let mut i = 0;
    while v != 0 {
        if v & 1 != 0 {
            out ^= m[i];
        }
        v >>= 1;
        i += 1;
    }
    out
}

const fn gf2_compose(a: &Gf2Matrix, b: &Gf2Matrix) -> Gf2Matrix {
    let mut out = [0u32; 32];
    let mut i = 0;
    while i < 32 {
        out[i] = gf2_apply(a, b[i]);
        i += 1;
    }
    out
}

/// Tables applying the map "feed `len` zero bytes to the raw register" (`len * 8` a power of
/// two): the one-bit step squared until it covers `len` bytes, then tabulated per input byte.
const fn zero_shift_tables(len: usize) -> [[u32; 256]; 4] {
    assert!((len * 8).is_power_of_two());
    let mut op = [0u32; 32];
    op[0] = POLY; // one zero bit: shift right, xor the polynomial when bit 0 falls out
    let mut i = 1;
    while i < 32 {
        op[i] = 1 << (i - 1);
        i += 1;
    }
    let mut bits = 1;
    while bits < len * 8 {
        op = gf2_compose(&op, &op);
        bits *= 2;
    }
    let mut tables = [[0u32; 256]; 4];
    let mut k = 0;
    while k < 4 {
        let mut b = 0;
        while b < 256 {
            tables[k][b] = gf2_apply(&op, (b as u32) << (8 * k));
            b += 1;
        }
        k += 1;
    }
    tables
}

#[inline]
fn zero_shift(tables: &[[u32; 256]; 4], crc: u32) -> u32 {
    tables[0][(crc & 0xFF) as usize]
        ^ tables[1][((crc >> 8) & 0xFF) as usize]
        ^ tables[2][((crc >> 16) & 0xFF) as usize]
        ^ tables[3][(crc >> 24) as usize]
}

/// CRC-32C of `data`.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c_append(0, data)
}

/// Continues a CRC-32C: `crc32c_append(crc32c(a), b) == crc32c(a ++ b)`.
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    !update(!crc, data)
}

/// Raw (non-inverted) register update, dispatching to the fastest available implementation.
#[inline]
fn update(state: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU supports SSE4.2, checked just above.
            return unsafe { update_sse42(state, data) };
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        if std::arch::is_aarch64_feature_detected!("crc") {
            // SAFETY: the CPU supports the CRC extension, checked just above.
            return unsafe { update_arm_crc(state, data) };
        }
    }
    update_portable(state, data)
}

/// Portable slicing-by-8 update.
pub(crate) fn update_portable(mut state: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let lo = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]) ^ state;
        let hi = u32::from_le_bytes([chunk[4], chunk[5], chunk[6], chunk[7]]);
        state = TABLES[7][(lo & 0xFF) as usize]
            ^ TABLES[6][((lo >> 8) & 0xFF) as usize]
            ^ TABLES[5][((lo >> 16) & 0xFF) as usize]
            ^ TABLES[4][(lo >> 24) as usize]
            ^ TABLES[3][(hi & 0xFF) as usize]
            ^ TABLES[2][((hi >> 8) & 0xFF) as usize]
            ^ TABLES[1][((hi >> 16) & 0xFF) as usize]
            ^ TABLES[0][(hi >> 24) as usize];
    }
    for &byte in chunks.remainder() {
        state = (state >> 8) ^ TABLES[0][((state ^ byte as u32) & 0xFF) as usize];
    }
    state
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn update_sse42(state: u32, data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let word = |chunk: &[u8]| u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
    let mut state = state;
    let mut data = data;
    for (block, tables) in [(LONG_BLOCK, &SHIFT_LONG), (SHORT_BLOCK, &SHIFT_SHORT)] {
        while data.len() >= 3 * block {
            let (a, rest) = data.split_at(block);
            let (b, rest) = rest.split_at(block);
            let (c, rest) = rest.split_at(block);
            let (mut ca, mut cb, mut cc) = (state as u64, 0u64, 0u64);
            for ((x, y), z) in a
                .chunks_exact(8)
                .zip(b.chunks_exact(8))
                .zip(c.chunks_exact(8))
            {
                ca = _mm_crc32_u64(ca, word(x));
                cb = _mm_crc32_u64(cb, word(y));
                cc = _mm_crc32_u64(cc, word(z));
            }
            state = zero_shift(tables, zero_shift(tables, ca as u32) ^ cb as u32) ^ cc as u32;
            data = rest;
        }
    }
    let mut crc = state as u64;
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes([
            chunk[0], chunk[1], chunk[2], chunk[3], chunk[4], chunk[5], chunk[6], chunk[7],
        ]);
        crc = _mm_crc32_u64(crc, word);
    }
    let mut crc = crc as u32;
    for &byte in chunks.remainder() {
        crc = _mm_crc32_u8(crc, byte);
    }
    crc
}

#[cfg(target_arch = "aarch64")]
#[target_feature(enable = "crc")]
unsafe fn update_arm_crc(state: u32, data: &[u8]) -> u32 {
    use std::arch::aarch64::{__crc32cb, __crc32cd};
    let mut crc = state;
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes([
            chunk[0], chunk[1], chunk[2], chunk[3], chunk[4], chunk[5], chunk[6], chunk[7],
        ]);
        crc = __crc32cd(crc, word);
    }
    for &byte in chunks.remainder() {
        crc = __crc32cb(crc, byte);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_vector() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(!update_portable(!0, b"123456789"), 0xE306_9283);
    }

    #[test]
    fn rfc3720_vectors() {
        // iSCSI (RFC 3720, B.4) test vectors.
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xFFu8; 32]), 0x62A8_AB43);
        let ascending: Vec<u8> = (0u8..32).collect();
        assert_eq!(crc32c(&ascending), 0x46DD_794E);
        let descending: Vec<u8> = (0u8..32).rev().collect();
        assert_eq!(crc32c(&descending), 0x113F_DB5C);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn append_equals_whole() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 31 + 7) as u8).collect();
        let whole = crc32c(&data);
        for split in [0, 1, 7, 8, 9, 63, 4096, 9999, 10_000] {
            let (a, b) = data.split_at(split);
            assert_eq!(crc32c_append(crc32c(a), b), whole, "split at {split}");
        }
    }

    #[test]
    fn hardware_matches_portable() {
        let data: Vec<u8> = (0..4099u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in [0, 1, 3, 8, 15, 16, 17, 255, 1024, 4099] {
            let slice = &data[..len];
            assert_eq!(update(!0, slice), update_portable(!0, slice), "len {len}");
        }
    }

    #[test]
    fn interleaved_blocks_match_portable() {
        // Lengths around the three-stream thresholds, and long buffers using both block sizes.
        let data: Vec<u8> = (0..200_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
            .collect();
        let long = 3 * LONG_BLOCK;
        let short = 3 * SHORT_BLOCK;
        for len in [
            short - 1,
            short,
            short + 9,
            2 * short + 100,
            long - 1,
            long,
            long + short + 3,
            2 * long + 5 * short + 7,
            200_000,
        ] {
            let slice = &data[..len];
            assert_eq!(update(!0, slice), update_portable(!0, slice), "len {len}");
            assert_eq!(
                update(0x1234_5678, slice),
                update_portable(0x1234_5678, slice),
                "len {len}"
            );
        }
    }

    #[test]
    fn zero_shift_is_feeding_zero_bytes() {
        for state in [0u32, 1, 0x8000_0000, 0xDEAD_BEEF] {
            assert_eq!(
                zero_shift(&SHIFT_SHORT, state),
                update_portable(state, &[0u8; SHORT_BLOCK])
            );
            assert_eq!(
                zero_shift(&SHIFT_LONG, state),
                update_portable(state, &[0u8; LONG_BLOCK])
            );
        }
    }
}
