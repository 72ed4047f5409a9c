//! A small expiring cache for webhook answers (TokenReviews, SubjectAccessReviews), bounded so
//! that a flood of distinct keys cannot grow it without limit.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// The most entries kept (upstream's webhook caches are LRUs of about this size).
const MAX_ENTRIES: usize = 4096;

/// Values that expire after the time-to-live given when they were stored.
pub struct TtlCache<V> {
    entries: Mutex<HashMap<String, (Instant, V)>>,
}

impl<V: Clone> TtlCache<V> {
    pub fn new() -> Self {
        TtlCache { entries: Mutex::new(HashMap::new()) }
    }

    /// The value stored under `key`, unless it has expired.
    pub fn get(&self, key: &str) -> Option<V> {
        let mut entries = self.entries.lock();
        match entries.get(key) {
            Some((expires, value)) if *expires > Instant::now() => Some(value.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Stores `value` for `ttl`; a zero `ttl` stores nothing. When full, expired entries are
    /// dropped first, then the entry closest to expiry, so a flood of new keys cannot flush the
    /// answers already cached.
    pub fn insert(&self, key: String, value: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let now = Instant::now();
        let mut entries = self.entries.lock();
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(&key) {
            entries.retain(|_, (expires, _)| *expires > now);
            if entries.len() >= MAX_ENTRIES
                && let Some(oldest) = entries.iter().min_by_key(|(_, (expires, _))| *expires).map(|(k, _)| k.clone())
            {
                entries.remove(&oldest);
            }
        }
        entries.insert(key, (now + ttl, value));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_expire_and_zero_ttl_is_not_stored() {
        let cache = TtlCache::new();
        cache.insert("a".into(), 1, Duration::from_secs(60));
        cache.insert("b".into(), 2, Duration::from_millis(1));
        cache.insert("c".into(), 3, Duration::ZERO);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(cache.get("a"), Some(1));
        assert_eq!(cache.get("b"), None);
        assert_eq!(cache.get("c"), None);
    }

    #[test]
    fn size_is_bounded() {
        let cache = TtlCache::new();
        for i in 0..MAX_ENTRIES + 10 {
            cache.insert(i.to_string(), i, Duration::from_secs(60));
        }
        assert!(cache.len() <= MAX_ENTRIES);
    }
}
