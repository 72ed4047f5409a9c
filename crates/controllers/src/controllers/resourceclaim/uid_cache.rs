//! The UIDs of pods known to be deleted (upstream `resourceclaim/uid_cache.go`, an LRU of
//! `k8s.io/utils/lru`), so that their `reservedFor` entries go without asking the API server.

use std::collections::{BTreeMap, HashMap};

use parking_lot::Mutex;

/// `maxUIDCacheEntries`.
pub const MAX_UID_CACHE_ENTRIES: usize = 500;

/// A thread-safe LRU set of UIDs.
pub struct UidCache {
    inner: Mutex<Lru>,
}

struct Lru {
    capacity: usize,
    tick: u64,
    /// Each UID's last use.
    used: HashMap<String, u64>,
    /// UIDs by last use, oldest first.
    order: BTreeMap<u64, String>,
}

impl UidCache {
    /// `newUIDCache`: at most `capacity` UIDs (at least 1).
    pub fn new(capacity: usize) -> UidCache {
        let lru = Lru { capacity: capacity.max(1), tick: 0, used: HashMap::new(), order: BTreeMap::new() };
        UidCache { inner: Mutex::new(lru) }
    }

    /// `Add`: the least recently used UID goes when full.
    pub fn add(&self, uid: &str) {
        let mut lru = self.inner.lock();
        lru.touch(uid);
        while lru.used.len() > lru.capacity {
            let Some((_, oldest)) = lru.order.pop_first() else { break };
            lru.used.remove(&oldest);
        }
    }

    /// `Has`: a hit counts as a use (`lru.Get`).
    pub fn has(&self, uid: &str) -> bool {
        let mut lru = self.inner.lock();
        if !lru.used.contains_key(uid) {
            return false;
        }
        lru.touch(uid);
        true
    }
}

impl Lru {
    fn touch(&mut self, uid: &str) {
        self.tick += 1;
        let tick = self.tick;
        if let Some(previous) = self.used.insert(uid.to_string(), tick) {
            self.order.remove(&previous);
        }
        self.order.insert(tick, uid.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_uid_is_evicted() {
        let cache = UidCache::new(2);
        cache.add("a");
        cache.add("b");
        assert!(cache.has("a"), "a is now the most recent");
        cache.add("c");
        assert!(cache.has("a"));
        assert!(!cache.has("b"), "b was the least recently used");
        assert!(cache.has("c"));
    }

    #[test]
    fn adding_again_keeps_one_entry() {
        let cache = UidCache::new(2);
        cache.add("a");
        cache.add("a");
        cache.add("b");
        assert!(cache.has("a") && cache.has("b"));
    }
}
