//! Non-cryptographic randomness for jitter, generated names and UIDs, without a dependency:
//! SipHash (std's `RandomState`, seeded per process from the OS) over a counter.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh pseudo-random number.
pub fn u64() -> u64 {
    static SEED: OnceLock<RandomState> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = SEED.get_or_init(RandomState::new).build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.finish()
}

/// A number in `0..bound` (`bound` > 0).
pub fn below(bound: u64) -> u64 {
    u64() % bound.max(1)
}

/// A float in `[0, 1)`.
pub fn unit() -> f64 {
    (u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// A random (version 4) UUID, as Kubernetes uses for `metadata.uid`.
pub fn uuid() -> String {
    let (hi, lo) = (u64(), u64());
    let hi = (hi & !0xf000) | 0x4000; // version 4
    let lo = (lo & !(0xc000 << 48)) | (0x8000 << 48); // RFC 4122 variant
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xffff,
        lo >> 48,
        lo & 0xffff_ffff_ffff
    )
}

/// The alphabet of apimachinery's `utilrand` (no vowels, no confusable characters).
pub const ALPHANUMS: &str = "bcdfghjklmnpqrstvwxz2456789";

/// `n` characters from [`ALPHANUMS`], as `utilrand.String` makes generated names.
pub fn name_suffix(n: usize) -> String {
    let alphabet = ALPHANUMS.as_bytes();
    (0..n).map(|_| alphabet[below(alphabet.len() as u64) as usize] as char).collect()
}

/// `utilrand.SafeEncodeString`: each character mapped into [`ALPHANUMS`] (hashes in names
/// carry no vowels, so no words).
pub fn safe_encode_string(s: &str) -> String {
    let alphabet = ALPHANUMS.as_bytes();
    s.chars().map(|c| alphabet[c as usize % alphabet.len()] as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_version_4_and_distinct() {
        let a = uuid();
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"), "{a}");
        assert_ne!(a, uuid());
    }

    #[test]
    fn ranges_hold() {
        for _ in 0..1000 {
            assert!(below(7) < 7);
            let u = unit();
            assert!((0.0..1.0).contains(&u));
        }
        assert_eq!(name_suffix(5).len(), 5);
    }
}
