//! Which partition a keyed record goes to: Kafka's built-in partitioner (`murmur2`) and KIP-253's
//! linear hashing, which keeps every key in place across partition expansion and deletion
//! except for the keys that move to an added partition (or away from a deleted one).
//!
//! For one topic, with `N` = `initial_partition_count` and `P` = `undeleted_partition_count`
//! (`N ≤ P`), `M` is the largest `N·2^L ≤ P` and `S = P − M` is the split pointer
//! (`0 ≤ S < M`). A key of hash `h = toPositive(murmur2(key))` goes to `b = h mod M` when
//! `b ≥ S`, else to `h mod 2M`. Before any change (`P = N`) that is `h mod N`, Kafka's own
//! answer, so Kafka's clients and this partitioner agree until the first expansion.
//!
//! Two consequences the controller and the consumer's gating rely on, both shown by the
//! brute-force tests below:
//! * growing `P` only moves keys from an existing partition to an added one, and every added
//!   partition `q` takes its keys from exactly one partition that existed before: `q`'s own
//!   partition under the old count ([`LinearHashing::split_source`]);
//! * shrinking `P` moves every key of a deleted partition `q` to exactly one survivor: `q`'s
//!   partition under the new count. The set of deleted partitions draining into one survivor
//!   ([`LinearHashing::drained_into`]) is computed exactly; it is not O(log n) in general.

/// Kafka's `Utils.murmur2`: 32-bit MurmurHash2 with seed `0x9747b28c`, bytes read unsigned.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h = SEED ^ data.len() as u32;
    let mut words = data.chunks_exact(4);
    for word in &mut words {
        let mut k = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = words.remainder();
    if tail.len() >= 3 {
        h ^= (tail[2] as u32) << 16;
    }
    if tail.len() >= 2 {
        h ^= (tail[1] as u32) << 8;
    }
    if !tail.is_empty() {
        h ^= tail[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// `toPositive(murmur2(key))`: the hash both partitioners start from.
#[inline]
pub fn key_hash(key: &[u8]) -> u32 {
    murmur2(key) as u32 & 0x7fff_ffff
}

/// The partition Kafka's built-in partitioner gives a non-null key:
/// `toPositive(murmur2(key)) % num_partitions`.
#[inline]
pub fn partition_for_key(key: &[u8], num_partitions: u32) -> u32 {
    key_hash(key) % num_partitions
}

/// `a % divisor` for a divisor fixed in advance, without a division instruction (Lemire, Kaser
/// and Kurz, "Faster remainder by direct computation", 2019): exact for every 32-bit `a` and
/// non-zero 32-bit divisor.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FastRem {
    divisor: u64,
    magic: u64,
}

impl FastRem {
    pub(crate) fn new(divisor: u32) -> Self {
        assert!(divisor > 0);
        FastRem {
            divisor: divisor as u64,
            magic: (u64::MAX / divisor as u64).wrapping_add(1),
        }
    }

    #[inline(always)]
    pub(crate) fn rem(&self, a: u32) -> u32 {
        let low = self.magic.wrapping_mul(a as u64);
        ((low as u128 * self.divisor as u128) >> 64) as u32
    }
}

/// KIP-253's partition function for one topic's counts.
#[derive(Clone, Copy, Debug)]
pub struct LinearHashing {
    initial: u32,
    undeleted: u32,
    /// `M = N·2^L ≤ P < 2M`.
    low: FastRem,
    /// `2M`; at most `2P − 2 < 2^32`.
    high: FastRem,
    /// `S = P − M`.
    split: u32,
}

impl LinearHashing {
    /// The partition function for `initial` (`N ≥ 1`) and `undeleted` (`N ≤ P ≤ i32::MAX`)
    /// partitions; an error names the count that is out of range.
    pub fn new(initial: u32, undeleted: u32) -> Result<Self, String> {
        if initial == 0 {
            return Err("initial_partition_count must be at least 1".into());
        }
        if undeleted < initial || undeleted > i32::MAX as u32 {
            return Err(format!(
                "undeleted_partition_count {undeleted} must be between initial_partition_count \
                 {initial} and {}",
                i32::MAX
            ));
        }
        let mut low = initial;
        while low <= undeleted / 2 {
            low *= 2;
        }
        Ok(LinearHashing {
            initial,
            undeleted,
            low: FastRem::new(low),
            high: FastRem::new(low * 2),
            split: undeleted - low,
        })
    }

    pub fn initial(&self) -> u32 {
        self.initial
    }

    pub fn undeleted(&self) -> u32 {
        self.undeleted
    }

    /// The partition of a key whose hash is `hash` (`toPositive(murmur2(key))`).
    #[inline(always)]
    pub fn partition(&self, hash: u32) -> u32 {
        let b = self.low.rem(hash);
        if b >= self.split {
            b
        } else {
            self.high.rem(hash)
        }
    }

    #[inline]
    pub fn partition_for_key(&self, key: &[u8]) -> u32 {
        self.partition(key_hash(key))
    }

    /// The partition, under these counts, whose keys partition `added` (≥ the undeleted count)
    /// takes once the topic grows past it: `added`'s own partition. An added partition's
    /// residue class is a subclass of that one partition's, so there is exactly one.
    pub fn split_source(&self, added: u32) -> u32 {
        self.partition(added)
    }

    /// The partitions in `undeleted..old_count` (deleted by a shrink from `old_count` to these
    /// counts) whose keys now go to `survivor`, in increasing order.
    pub fn drained_into(&self, survivor: u32, old_count: u32) -> Vec<u32> {
        (self.undeleted..old_count)
            .filter(|&q| self.partition(q) == survivor)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(added partition, its split source)` pairs.
    type Splits = &'static [(u32, u32)];
    /// `(survivor, the deleted partitions draining into it)` pairs.
    type Drains = &'static [(u32, &'static [u32])];

    fn lh(n: u32, p: u32) -> LinearHashing {
        LinearHashing::new(n, p).unwrap()
    }

    #[test]
    fn murmur2_matches_kafka() {
        // org.apache.kafka.common.utils.UtilsTest#testMurmur2.
        for (data, expected) in [
            (b"21".as_slice(), -973932308),
            (b"foobar", -790332482),
            (b"a-little-bit-long-string", -985981536),
            (b"a-little-bit-longer-string", -1486304829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58897971,
            ),
            (b"abc", 479470107),
        ] {
            assert_eq!(
                murmur2(data),
                expected,
                "{:?}",
                String::from_utf8_lossy(data)
            );
        }
        // Values computed with Java's Utils.murmur2 as quoted by Akka's Murmur2Spec.
        for (data, expected) in [
            (b"1".as_slice(), -1993445489),
            (b"12", 126087238),
            (b"123", -267702483),
            (b"1234", -1614185708),
            (b"12345", -1188365604),
        ] {
            assert_eq!(murmur2(data), expected);
        }
        assert_eq!(
            partition_for_key(b"21", 1 << 30),
            (-973932308i32 as u32 & 0x7fff_ffff) % (1 << 30)
        );
    }

    #[test]
    fn fast_remainder_is_exact() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut values = vec![
            0u32,
            1,
            2,
            11,
            12,
            13,
            i32::MAX as u32,
            u32::MAX - 1,
            u32::MAX,
        ];
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(x as u32);
        }
        let divisors = [
            1u32,
            2,
            3,
            7,
            12,
            1000,
            65_535,
            1 << 20,
            i32::MAX as u32 - 1,
            i32::MAX as u32,
        ];
        for d in divisors
            .into_iter()
            .chain(values.iter().take(300).map(|v| v | 1))
        {
            let m = FastRem::new(d);
            for &a in &values {
                assert_eq!(m.rem(a), a % d, "{a} % {d}");
            }
        }
    }

    /// The worked table of research/kip-semantics.md §1.2: N=3, P=3..12, h=0..23.
    #[test]
    fn the_worked_table() {
        let table: [(u32, [u32; 24]); 10] = [
            (
                3,
                [
                    0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2,
                ],
            ),
            (
                4,
                [
                    0, 1, 2, 3, 1, 2, 0, 1, 2, 3, 1, 2, 0, 1, 2, 3, 1, 2, 0, 1, 2, 3, 1, 2,
                ],
            ),
            (
                5,
                [
                    0, 1, 2, 3, 4, 2, 0, 1, 2, 3, 4, 2, 0, 1, 2, 3, 4, 2, 0, 1, 2, 3, 4, 2,
                ],
            ),
            (
                6,
                [
                    0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5,
                ],
            ),
            (
                7,
                [
                    0, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5,
                ],
            ),
            (
                8,
                [
                    0, 1, 2, 3, 4, 5, 6, 7, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 6, 7, 2, 3, 4, 5,
                ],
            ),
            (
                9,
                [
                    0, 1, 2, 3, 4, 5, 6, 7, 8, 3, 4, 5, 0, 1, 2, 3, 4, 5, 6, 7, 8, 3, 4, 5,
                ],
            ),
            (
                10,
                [
                    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 4, 5, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 4, 5,
                ],
            ),
            (
                11,
                [
                    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 5, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 5,
                ],
            ),
            (
                12,
                [
                    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                ],
            ),
        ];
        for (p, row) in table {
            let f = lh(3, p);
            let got: Vec<u32> = (0..24).map(|h| f.partition(h)).collect();
            assert_eq!(got, row, "P={p}");
        }
    }

    #[test]
    fn before_any_change_it_is_kafkas_partitioner() {
        for n in [1u32, 2, 3, 7, 12, 1000] {
            let f = lh(n, n);
            for key in 0..2000u32 {
                let key = key.to_le_bytes();
                assert_eq!(f.partition_for_key(&key), partition_for_key(&key, n));
            }
        }
    }

    /// Hashes covering every residue class of every modulus up to `2·max_count`, twice.
    fn hashes(max_count: u32) -> impl Iterator<Item = u32> {
        0..4 * max_count
    }

    #[test]
    fn growing_moves_keys_only_to_added_partitions_each_from_one_source() {
        for n in 1..=5u32 {
            for old in n..=40 {
                let before = lh(n, old);
                for new in old + 1..=48 {
                    let after = lh(n, new);
                    let mut source: Vec<Option<u32>> = vec![None; new as usize];
                    for h in hashes(48) {
                        let (a, b) = (before.partition(h), after.partition(h));
                        if b < old {
                            assert_eq!(
                                a, b,
                                "N={n} {old}->{new}: hash {h} moved between old partitions"
                            );
                        } else {
                            let s = source[b as usize].get_or_insert(a);
                            assert_eq!(*s, a, "N={n} {old}->{new}: partition {b} has two sources");
                        }
                    }
                    for q in old..new {
                        assert_eq!(
                            source[q as usize],
                            Some(before.split_source(q)),
                            "N={n} {old}->{new} q={q}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn split_sources_of_the_research_examples() {
        let cases: [(u32, u32, Splits); 6] = [
            (3, 4, &[(3, 0)]),
            (3, 6, &[(3, 0), (4, 1), (5, 2)]),
            (
                3,
                12,
                &[
                    (3, 0),
                    (4, 1),
                    (5, 2),
                    (6, 0),
                    (7, 1),
                    (8, 2),
                    (9, 0),
                    (10, 1),
                    (11, 2),
                ],
            ),
            (4, 7, &[(4, 1), (5, 2), (6, 0)]),
            (5, 9, &[(5, 2), (6, 0), (7, 1), (8, 2)]),
            (7, 12, &[(7, 1), (8, 2), (9, 3), (10, 4), (11, 5)]),
        ];
        for (old, new, expected) in cases {
            let f = lh(3, old);
            let got: Vec<(u32, u32)> = (old..new).map(|q| (q, f.split_source(q))).collect();
            assert_eq!(got, expected, "3 -> {old} -> {new}");
        }
    }

    #[test]
    fn shrinking_drains_each_deleted_partition_into_one_survivor() {
        for n in 1..=4u32 {
            for new in n..=32 {
                let after = lh(n, new);
                for old in new + 1..=40 {
                    let before = lh(n, old);
                    let mut target: Vec<Option<u32>> = vec![None; old as usize];
                    for h in hashes(40) {
                        let (a, b) = (before.partition(h), after.partition(h));
                        if a < new {
                            assert_eq!(
                                a, b,
                                "N={n} {old}->{new}: hash {h} moved between survivors"
                            );
                        } else {
                            let t = target[a as usize].get_or_insert(b);
                            assert_eq!(*t, b, "N={n} {old}->{new}: partition {a} drains into two");
                        }
                    }
                    for p in 0..new {
                        let brute: Vec<u32> = (new..old)
                            .filter(|&q| target[q as usize] == Some(p))
                            .collect();
                        assert_eq!(
                            after.drained_into(p, old),
                            brute,
                            "N={n} {old}->{new} p={p}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn drained_sets_of_the_research_examples() {
        let cases: [(u32, u32, Drains); 5] = [
            (6, 3, &[(0, &[3]), (1, &[4]), (2, &[5])]),
            (8, 4, &[(0, &[6]), (1, &[4, 7]), (2, &[5]), (3, &[])]),
            (
                12,
                3,
                &[(0, &[3, 6, 9]), (1, &[4, 7, 10]), (2, &[5, 8, 11])],
            ),
            (
                12,
                7,
                &[
                    (0, &[]),
                    (1, &[7]),
                    (2, &[8]),
                    (3, &[9]),
                    (4, &[10]),
                    (5, &[11]),
                    (6, &[]),
                ],
            ),
            (
                24,
                3,
                &[
                    (0, &[3, 6, 9, 12, 15, 18, 21]),
                    (1, &[4, 7, 10, 13, 16, 19, 22]),
                    (2, &[5, 8, 11, 14, 17, 20, 23]),
                ],
            ),
        ];
        for (old, new, expected) in cases {
            let f = lh(3, new);
            for &(p, set) in expected {
                assert_eq!(f.drained_into(p, old), set, "{old} -> {new}, survivor {p}");
            }
        }
    }

    #[test]
    fn counts_out_of_range_are_refused() {
        assert!(LinearHashing::new(0, 3).is_err());
        assert!(LinearHashing::new(4, 3).is_err());
        assert!(LinearHashing::new(1, i32::MAX as u32 + 1).is_err());
        let widest = lh(1, i32::MAX as u32);
        assert!(widest.partition(i32::MAX as u32) < i32::MAX as u32);
        let f = lh(3, i32::MAX as u32);
        for h in [0u32, 1, 12345, i32::MAX as u32] {
            assert!(f.partition(h) < i32::MAX as u32);
        }
    }
}
