//! A least-recently-used map of bounded size, as upstream's `k8s.io/utils/lru` (over
//! `groupcache/lru`): adding beyond the capacity forgets the entry used longest ago, and a hit
//! counts as a use (`lru.Get`). Not thread-safe: callers that share one put it behind their lock.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// A map of at most `capacity` entries that forgets the least recently used one.
#[derive(Debug)]
pub struct Lru<K, V> {
    capacity: usize,
    /// The last use handed out.
    tick: u64,
    /// Each entry and its last use.
    entries: HashMap<K, (V, u64)>,
    /// The keys by their last use, oldest first.
    order: BTreeMap<u64, K>,
}

/// An LRU set: the keys remembered, with nothing attached.
pub type LruSet<K> = Lru<K, ()>;

impl<K: Hash + Eq + Clone, V> Lru<K, V> {
    /// An empty map of at most `capacity` entries (at least 1).
    pub fn new(capacity: usize) -> Lru<K, V> {
        Lru { capacity: capacity.max(1), tick: 0, entries: HashMap::new(), order: BTreeMap::new() }
    }

    /// The entry for `key`, which becomes the most recently used (`Get`).
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let (value, used) = self.entries.get_mut(key)?;
        self.tick += 1;
        if let Some(key) = self.order.remove(used) {
            self.order.insert(self.tick, key);
        }
        *used = self.tick;
        Some(value)
    }

    /// Whether `key` is remembered; a hit counts as a use, as `Get`.
    pub fn contains<Q>(&mut self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.get_mut(key).is_some()
    }

    /// Adds or replaces the entry for `key`, as the most recently used; the least recently used
    /// ones go beyond the capacity (`Add`).
    pub fn insert(&mut self, key: K, value: V) {
        self.tick += 1;
        if let Some((_, used)) = self.entries.insert(key.clone(), (value, self.tick)) {
            self.order.remove(&used);
        }
        self.order.insert(self.tick, key);
        while self.entries.len() > self.capacity {
            let Some((_, oldest)) = self.order.pop_first() else { break };
            self.entries.remove(&oldest);
        }
    }

    /// The entry for `key`, made by `make` and added if missing; either way it becomes the most
    /// recently used.
    pub fn entry<Q>(&mut self, key: &Q, make: impl FnOnce() -> V) -> &mut V
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if self.get_mut(key).is_none() {
            self.insert(key.to_owned(), make());
        }
        &mut self.entries.get_mut(key).expect("the entry was just used or added").0
    }

    /// How many entries are remembered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_added_goes_first() {
        let mut lru = Lru::new(3);
        for (key, value) in [("a", 1), ("b", 2), ("c", 3), ("d", 4)] {
            lru.insert(key.to_string(), value);
        }
        assert_eq!(lru.len(), 3);
        assert!(!lru.contains("a"));
        lru.insert("e".into(), 5);
        assert!(!lru.contains("b"), "b was the oldest left");
        assert!(lru.contains("c") && lru.contains("d") && lru.contains("e"));
    }

    #[test]
    fn a_hit_counts_as_a_use() {
        let mut set: LruSet<String> = Lru::new(2);
        set.insert("a".into(), ());
        set.insert("b".into(), ());
        assert!(set.contains("a"), "a is now the most recent");
        set.insert("c".into(), ());
        assert!(!set.contains("b"), "b was the least recently used");
        assert!(set.contains("a") && set.contains("c"));

        let mut map = Lru::new(2);
        map.insert("a".to_string(), 1);
        map.insert("b".to_string(), 2);
        *map.get_mut("a").expect("a hit") += 10;
        map.insert("c".into(), 3);
        assert_eq!(map.get_mut("a"), Some(&mut 11));
        assert!(map.get_mut("b").is_none());
    }

    #[test]
    fn a_miss_is_no_use() {
        let mut set: LruSet<&str> = Lru::new(2);
        set.insert("a", ());
        assert!(!set.contains("x"));
        set.insert("b", ());
        set.insert("c", ());
        assert!(!set.contains("a"));
        assert_eq!(set.len(), 2);
    }

    #[test]
    fn adding_again_replaces_and_counts_as_a_use() {
        let mut lru = Lru::new(2);
        lru.insert("a", 1);
        lru.insert("b", 2);
        lru.insert("a", 3);
        lru.insert("c", 4);
        assert_eq!(lru.len(), 2);
        assert_eq!(lru.get_mut("a"), Some(&mut 3));
        assert!(!lru.contains("b"));
    }

    #[test]
    fn entry_makes_what_is_missing_and_touches_what_is_there() {
        let mut lru: Lru<String, i32> = Lru::new(2);
        lru.insert("a".into(), 1);
        lru.insert("b".into(), 2);
        assert_eq!(*lru.entry("a", || 9), 1, "a hit keeps the value");
        assert_eq!(*lru.entry("c", || 3), 3);
        assert!(!lru.contains("b"), "b was the least recently used");
        *lru.entry("c", || 0) += 1;
        assert_eq!(lru.get_mut("c"), Some(&mut 4));
    }

    #[test]
    fn a_capacity_of_zero_or_one_keeps_the_last_entry() {
        for capacity in [0, 1] {
            let mut lru: Lru<String, i32> = Lru::new(capacity);
            assert!(lru.is_empty());
            lru.insert("a".into(), 1);
            assert_eq!(lru.len(), 1);
            assert_eq!(*lru.entry("b", || 2), 2);
            assert_eq!(lru.len(), 1, "capacity {capacity}");
            assert!(!lru.contains("a"));
            assert!(lru.contains("b"));
        }
    }
}
