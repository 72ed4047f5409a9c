//! Read-your-writes for controllers, after client-go's `MutationCache`
//! (`tools/cache/mutation_cache.go`, `NewIntegerResourceVersionMutationCache`).
//!
//! A controller that writes an object and syncs it again a moment later (its own write, or a
//! pod event, queued the key again) would otherwise read the informer's copy from before its
//! write, if the watch event has not arrived yet, and its next write of that object would
//! carry a stale resourceVersion and meet a 409 Conflict. A controller records what its writes
//! returned with [`MutationCache::mutation`] and reads through [`MutationCache::newest`]: the
//! written object while it is newer than the informer's copy, the informer's copy as soon as
//! that has caught up (the entry is then dropped).
//!
//! As upstream, resourceVersions are compared as integers (what etcd makes of them); an object
//! whose resourceVersion is not an integer, or with another uid (deleted and created again),
//! is never replaced. Entries are forgotten after their time to live in any case ([`TTL`] for
//! the informers' own caches), and [`MutationCache::newest`] only looks up objects the informer
//! has, so a deleted object does not come back there. A controller that made its cache with
//! upstream's `includeAdds` (the resource claim controller's, [`MutationCache::bounded`]) also
//! sees objects it created before the informer has them, through
//! [`MutationCache::by_index_including_adds`].

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::Metadata;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::Mutex;

use super::object_key;
use super::reflector::ingest;

/// How long a written object may stand in for the informer's copy. The watch normally brings
/// the write within milliseconds; this only bounds what a lost or very late event can do.
pub const TTL: Duration = Duration::from_secs(60);

/// The objects recent writes returned, by `namespace/name`.
pub struct MutationCache<K> {
    /// How long an entry lives after its write.
    ttl: Duration,
    /// At most this many entries are kept, the least recently used going first
    /// (`utilcache.NewLRUExpireCache`); `None`: no bound.
    capacity: Option<usize>,
    entries: Mutex<Entries<K>>,
}

struct Entries<K> {
    /// Counts uses, for the least-recently-used order.
    tick: u64,
    by_key: HashMap<String, Entry<K>>,
}

struct Entry<K> {
    object: Arc<K>,
    written: Instant,
    used: u64,
}

impl<K> Default for MutationCache<K> {
    fn default() -> Self {
        MutationCache { ttl: TTL, capacity: None, entries: Mutex::new(Entries { tick: 0, by_key: HashMap::new() }) }
    }
}

impl<K> Entries<K> {
    fn touch(&mut self, key: &str) {
        self.tick += 1;
        let tick = self.tick;
        if let Some(entry) = self.by_key.get_mut(key) {
            entry.used = tick;
        }
    }
}

fn resource_version(meta: &ObjectMeta) -> Option<u64> {
    meta.resource_version.as_deref()?.parse().ok()
}

impl<K: Metadata<Ty = ObjectMeta>> MutationCache<K> {
    /// A cache of its own, as a controller makes one with `NewIntegerResourceVersionMutationCache`:
    /// entries live `ttl` and at most `capacity` are kept (upstream's LRU of 100).
    pub fn bounded(ttl: Duration, capacity: usize) -> Self {
        MutationCache { ttl, capacity: Some(capacity.max(1)), ..MutationCache::default() }
    }

    /// Remembers what a write returned (`Mutation`). An older object than the one remembered
    /// (two writers of this process racing) does not replace it.
    pub fn mutation(&self, written: K) -> Arc<K> {
        // Kept like the informer's copy it stands in for: without managedFields.
        let written = Arc::new(ingest(written));
        let Some(version) = resource_version(written.metadata()) else { return written };
        let now = Instant::now();
        let mut entries = self.entries.lock();
        entries.by_key.retain(|_, entry| now.duration_since(entry.written) < self.ttl);
        let key = object_key(written.metadata());
        let newer = entries.by_key.get(&key).is_none_or(|kept| {
            kept.object.metadata().uid != written.metadata().uid
                || resource_version(kept.object.metadata()).is_none_or(|kept| kept < version)
        });
        if newer {
            entries.tick += 1;
            let entry = Entry { object: written.clone(), written: now, used: entries.tick };
            entries.by_key.insert(key, entry);
            self.evict_least_recently_used(&mut entries);
        }
        written
    }

    fn evict_least_recently_used(&self, entries: &mut Entries<K>) {
        let Some(capacity) = self.capacity else { return };
        while entries.by_key.len() > capacity {
            let oldest = entries.by_key.iter().min_by_key(|(_, entry)| entry.used).map(|(key, _)| key.clone());
            let Some(oldest) = oldest else { break };
            entries.by_key.remove(&oldest);
        }
    }

    /// The newer of the informer's copy and what a write of ours returned (`GetByKey`).
    pub fn newest(&self, cached: Arc<K>) -> Arc<K> {
        let mut entries = self.entries.lock();
        // Most objects were not written by us lately: no key is made for them (a Deployment's
        // sync asks this of every ReplicaSet of its namespace).
        if entries.by_key.is_empty() {
            return cached;
        }
        let key = object_key(cached.metadata());
        Self::newer_of(&mut entries, self.ttl, &key, cached)
    }

    /// `newerObject`: the written object while it is newer than `cached`; else `cached`, and the
    /// entry is dropped.
    fn newer_of(entries: &mut Entries<K>, ttl: Duration, key: &str, cached: Arc<K>) -> Arc<K> {
        let Some(entry) = entries.by_key.get(key) else { return cached };
        let written = &entry.object;
        let ours = entry.written.elapsed() < ttl
            && written.metadata().uid == cached.metadata().uid
            && match (resource_version(written.metadata()), resource_version(cached.metadata())) {
                (Some(written), Some(cached)) => written > cached,
                _ => false,
            };
        if ours {
            let written = written.clone();
            entries.touch(key);
            return written;
        }
        entries.by_key.remove(key);
        cached
    }

    /// `ByIndex` of a cache made with `includeAdds`: each of `indexed` (what the informer's index
    /// gave for one value) or our newer write of it, then, least recently used first, the live
    /// written objects that the index did not give and for which `matches` (the index function
    /// yields that value) holds. Those include objects the informer does not have yet, and, as
    /// upstream's, objects it had and has seen deleted since, until their entries expire.
    pub fn by_index_including_adds(&self, indexed: Vec<Arc<K>>, matches: impl Fn(&K) -> bool) -> Vec<Arc<K>> {
        let mut entries = self.entries.lock();
        let now = Instant::now();
        entries.by_key.retain(|_, entry| now.duration_since(entry.written) < self.ttl);
        let keys: HashSet<String> = indexed.iter().map(|object| object_key(object.metadata())).collect();
        let mut found: Vec<Arc<K>> = Vec::with_capacity(indexed.len());
        for object in indexed {
            let key = object_key(object.metadata());
            found.push(Self::newer_of(&mut entries, self.ttl, &key, object));
        }
        let mut added: Vec<(u64, String)> = entries
            .by_key
            .iter()
            .filter(|(key, _)| !keys.contains(*key))
            .map(|(key, entry)| (entry.used, key.clone()))
            .collect();
        added.sort();
        for (_, key) in added {
            entries.touch(&key);
            let object = entries.by_key[&key].object.clone();
            if matches(&object) {
                found.push(object);
            }
        }
        found
    }

    /// How many written objects are remembered.
    pub fn len(&self) -> usize {
        self.entries.lock().by_key.len()
    }

    /// Whether no written object is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn config_map(name: &str, uid: &str, version: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(uid.into()),
                resource_version: Some(version.into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn version(object: &ConfigMap) -> &str {
        object.metadata.resource_version.as_deref().unwrap()
    }

    #[test]
    fn a_write_stands_in_for_an_older_copy_until_the_informer_catches_up() {
        let cache = MutationCache::default();
        cache.mutation(config_map("a", "u1", "12"));
        assert_eq!(version(&cache.newest(Arc::new(config_map("a", "u1", "10")))), "12");
        // Caught up: the informer's copy, and the entry is gone.
        assert_eq!(version(&cache.newest(Arc::new(config_map("a", "u1", "12")))), "12");
        assert!(cache.is_empty());
        assert_eq!(version(&cache.newest(Arc::new(config_map("a", "u1", "10")))), "10");
    }

    #[test]
    fn a_newer_copy_wins_and_other_objects_are_untouched() {
        let cache = MutationCache::default();
        cache.mutation(config_map("a", "u1", "12"));
        assert_eq!(version(&cache.newest(Arc::new(config_map("a", "u1", "15")))), "15");
        assert_eq!(version(&cache.newest(Arc::new(config_map("b", "u2", "3")))), "3");
    }

    #[test]
    fn another_uid_or_a_non_integer_version_is_never_replaced() {
        let cache = MutationCache::default();
        cache.mutation(config_map("a", "u1", "12"));
        let recreated = cache.newest(Arc::new(config_map("a", "u9", "10")));
        assert_eq!(recreated.metadata.uid.as_deref(), Some("u9"));
        cache.mutation(config_map("b", "u2", "12"));
        assert_eq!(version(&cache.newest(Arc::new(config_map("b", "u2", "x")))), "x");
        cache.mutation(config_map("c", "u3", "not-a-number"));
        assert_eq!(version(&cache.newest(Arc::new(config_map("c", "u3", "7")))), "7");
    }

    #[test]
    fn a_write_is_kept_without_managed_fields() {
        let cache = MutationCache::default();
        let mut written = config_map("a", "u1", "12");
        written.metadata.managed_fields = Some(vec![Default::default()]);
        assert_eq!(cache.mutation(written).metadata.managed_fields, None);
        assert_eq!(cache.newest(Arc::new(config_map("a", "u1", "10"))).metadata.managed_fields, None);
    }

    #[test]
    fn an_older_write_does_not_replace_a_newer_one() {
        let cache = MutationCache::default();
        cache.mutation(config_map("a", "u1", "12"));
        cache.mutation(config_map("a", "u1", "11"));
        assert_eq!(version(&cache.newest(Arc::new(config_map("a", "u1", "10")))), "12");
    }

    #[test]
    fn a_bounded_cache_keeps_its_most_recently_used_entries() {
        let cache = MutationCache::bounded(TTL, 2);
        cache.mutation(config_map("a", "u1", "12"));
        cache.mutation(config_map("b", "u2", "13"));
        // A use of `a` makes `b` the least recently used when `c` comes.
        assert_eq!(version(&cache.newest(Arc::new(config_map("a", "u1", "10")))), "12");
        cache.mutation(config_map("c", "u3", "14"));
        assert_eq!(cache.len(), 2);
        assert_eq!(version(&cache.newest(Arc::new(config_map("b", "u2", "1")))), "1", "b was evicted");
        assert_eq!(version(&cache.newest(Arc::new(config_map("a", "u1", "10")))), "12");
    }

    #[test]
    fn by_index_including_adds_gives_newer_writes_then_matching_objects_the_index_lacks() {
        let cache = MutationCache::bounded(TTL, 100);
        cache.mutation(config_map("indexed", "u1", "12"));
        cache.mutation(config_map("created", "u2", "13"));
        cache.mutation(config_map("other", "u3", "14"));
        let indexed = vec![Arc::new(config_map("indexed", "u1", "10"))];
        let found = cache.by_index_including_adds(indexed, |c| c.metadata.name.as_deref() != Some("other"));
        let names: Vec<(&str, &str)> =
            found.iter().map(|c| (c.metadata.name.as_deref().unwrap(), version(c))).collect();
        assert_eq!(names, [("indexed", "12"), ("created", "13")]);
    }

    #[test]
    fn by_index_including_adds_drops_entries_the_informer_caught_up_with() {
        let cache = MutationCache::bounded(TTL, 100);
        cache.mutation(config_map("a", "u1", "12"));
        let found = cache.by_index_including_adds(vec![Arc::new(config_map("a", "u1", "12"))], |_| true);
        assert_eq!(found.len(), 1, "the object once, from the informer");
        assert!(cache.is_empty());
        assert!(cache.by_index_including_adds(Vec::new(), |_| true).is_empty());
    }

    #[test]
    fn expired_entries_are_not_given() {
        let cache = MutationCache::bounded(Duration::ZERO, 100);
        cache.mutation(config_map("a", "u1", "12"));
        assert!(cache.by_index_including_adds(Vec::new(), |_| true).is_empty());
        assert_eq!(version(&cache.newest(Arc::new(config_map("a", "u1", "10")))), "10");
    }
}
