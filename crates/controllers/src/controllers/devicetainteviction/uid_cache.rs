//! The UIDs of the pods already evicted (upstream `uid_cache.go`, an LRU of
//! `maxUIDCacheEntries`), so that a work item queued again for such a pod does nothing.

use std::collections::{BTreeMap, HashMap};

/// `maxUIDCacheEntries`.
pub const MAX_UID_CACHE_ENTRIES: usize = 500;

/// An LRU set of UIDs (`uidCache`); the caller locks it.
pub struct UidCache {
    capacity: usize,
    tick: u64,
    /// Each UID's last use.
    used: HashMap<String, u64>,
    /// UIDs by last use, oldest first.
    order: BTreeMap<u64, String>,
}

impl UidCache {
    /// An empty cache of at most `capacity` UIDs (at least 1).
    pub fn new(capacity: usize) -> UidCache {
        UidCache { capacity: capacity.max(1), tick: 0, used: HashMap::new(), order: BTreeMap::new() }
    }

    /// `add`: remembers a UID, forgetting the least recently used one when full.
    pub fn add(&mut self, uid: &str) {
        self.touch(uid);
        while self.used.len() > self.capacity {
            let Some((_, oldest)) = self.order.pop_first() else { break };
            self.used.remove(&oldest);
        }
    }

    /// `has`: whether the UID is remembered; a hit counts as a use, as `lru.Cache.Get`.
    pub fn has(&mut self, uid: &str) -> bool {
        if !self.used.contains_key(uid) {
            return false;
        }
        self.touch(uid);
        true
    }

    fn touch(&mut self, uid: &str) {
        self.tick += 1;
        if let Some(previous) = self.used.insert(uid.to_string(), self.tick) {
            self.order.remove(&previous);
        }
        self.order.insert(self.tick, uid.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_uid_goes_first() {
        let mut cache = UidCache::new(2);
        cache.add("a");
        cache.add("b");
        assert!(cache.has("a"), "a is now the most recent");
        cache.add("c");
        assert!(!cache.has("b"));
        assert!(cache.has("a") && cache.has("c"));
    }
}
