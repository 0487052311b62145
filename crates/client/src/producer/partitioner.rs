//! Kafka's key partitioner (murmur2, as Java's and librdkafka's
//! `murmur2_random`) and a cheap random source for the sticky partitioner.

use std::cell::Cell;

/// Kafka's murmur2 hash (`org.apache.kafka.common.utils.Utils.murmur2`):
/// MurmurHash2, 32-bit, seed `0x9747b28c`.
///
/// ```
/// assert_eq!(magnetar_client::murmur2(b"21"), -973932308);
/// ```
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    // Java sign-extends nothing here: it masks each byte with 0xff.
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

/// The partition Java's default partitioner (and librdkafka's
/// `murmur2_random`) picks for `key`: `(murmur2(key) & 0x7fffffff) % partitions`.
///
/// ```
/// assert_eq!(magnetar_client::partition_for_key(b"foobar", 10), (-790332482i32 & 0x7fffffff) % 10);
/// ```
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partitions.max(1)
}

thread_local! {
    static RNG: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    // Mix in the thread's stack address so threads started together differ.
    let local = 0u8;
    (t ^ (&local as *const u8 as u64).rotate_left(32)) | 1
}

/// xorshift64*: plenty for spreading keyless records, no dependency.
pub(crate) fn random_u32() -> u32 {
    RNG.with(|s| {
        let mut x = s.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_vectors() {
        // Kafka's UtilsTest.testMurmur2.
        let cases: &[(&[u8], i32)] = &[
            (b"21", -973932308),
            (b"foobar", -790332482),
            (b"a-little-bit-long-string", -985981536),
            (b"a-little-bit-longer-string", -1486304829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58897971,
            ),
            (b"abc", 479470107),
            // Values checked against Kafka's Utils.murmur2 by other ports.
            (b"1", -1993445489),
            (b"12", 126087238),
            (b"123", -267702483),
            (b"1234", -1614185708),
            (b"12345", -1188365604),
        ];
        for (k, want) in cases {
            assert_eq!(murmur2(k), *want, "{}", String::from_utf8_lossy(k));
        }
    }

    #[test]
    fn partitions_are_non_negative_and_in_range() {
        for i in 0..1000u32 {
            let k = i.to_be_bytes();
            let p = partition_for_key(&k, 7);
            assert!((0..7).contains(&p));
        }
        assert_eq!(partition_for_key(b"anything", 1), 0);
    }

    #[test]
    fn random_spreads() {
        let mut seen = [0u32; 4];
        for _ in 0..4000 {
            seen[(random_u32() % 4) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 800), "{seen:?}");
    }
}
