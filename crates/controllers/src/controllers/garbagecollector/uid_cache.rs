//! The cache of owners the API server said do not exist (upstream `uid_cache.go`'s
//! `ReferenceCache`, an LRU of 500 references), so that dependents of a deleted owner do not
//! each look it up again.

use std::collections::{BTreeMap, HashMap};

use parking_lot::Mutex;

use super::graph::ObjectReference;

/// Upstream's `NewReferenceCache(500)`.
pub const ABSENT_OWNER_CACHE_SIZE: usize = 500;

/// A thread-safe LRU set of references.
pub struct ReferenceCache {
    inner: Mutex<Lru>,
}

struct Lru {
    capacity: usize,
    tick: u64,
    /// Each reference's last use.
    used: HashMap<ObjectReference, u64>,
    /// References by last use, oldest first.
    order: BTreeMap<u64, ObjectReference>,
}

impl ReferenceCache {
    /// An empty cache of at most `capacity` references (at least 1).
    pub fn new(capacity: usize) -> ReferenceCache {
        let lru = Lru { capacity: capacity.max(1), tick: 0, used: HashMap::new(), order: BTreeMap::new() };
        ReferenceCache { inner: Mutex::new(lru) }
    }

    /// Adds a reference, evicting the least recently used one when full.
    pub fn add(&self, reference: ObjectReference) {
        let mut lru = self.inner.lock();
        lru.touch(reference);
        while lru.used.len() > lru.capacity {
            let Some((_, oldest)) = lru.order.pop_first() else { break };
            lru.used.remove(&oldest);
        }
    }

    /// Whether the reference is cached; a hit counts as a use.
    pub fn has(&self, reference: &ObjectReference) -> bool {
        let mut lru = self.inner.lock();
        if !lru.used.contains_key(reference) {
            return false;
        }
        lru.touch(reference.clone());
        true
    }
}

impl Lru {
    fn touch(&mut self, reference: ObjectReference) {
        self.tick += 1;
        let tick = self.tick;
        if let Some(previous) = self.used.insert(reference.clone(), tick) {
            self.order.remove(&previous);
        }
        self.order.insert(tick, reference);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(name: &str) -> ObjectReference {
        ObjectReference { api_version: "v1".into(), kind: "ConfigMap".into(), name: name.into(), ..Default::default() }
    }

    #[test]
    fn least_recently_used_references_are_evicted() {
        let cache = ReferenceCache::new(2);
        cache.add(reference("a"));
        cache.add(reference("b"));
        assert!(cache.has(&reference("a")), "a is now the most recent");
        cache.add(reference("c"));
        assert!(cache.has(&reference("a")));
        assert!(!cache.has(&reference("b")), "b was the least recently used");
        assert!(cache.has(&reference("c")));
    }
}
