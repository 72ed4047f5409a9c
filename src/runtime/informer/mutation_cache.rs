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
//! is never replaced. Entries are forgotten after [`TTL`] in any case, and only objects the
//! informer has are looked up, so a deleted object does not come back.

use std::collections::HashMap;
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
    entries: Mutex<HashMap<String, (Arc<K>, Instant)>>,
}

impl<K> Default for MutationCache<K> {
    fn default() -> Self {
        MutationCache { entries: Mutex::new(HashMap::new()) }
    }
}

fn resource_version(meta: &ObjectMeta) -> Option<u64> {
    meta.resource_version.as_deref()?.parse().ok()
}

impl<K: Metadata<Ty = ObjectMeta>> MutationCache<K> {
    /// Remembers what a write returned (`Mutation`). An older object than the one remembered
    /// (two writers of this process racing) does not replace it.
    pub fn mutation(&self, written: K) -> Arc<K> {
        // Kept like the informer's copy it stands in for: without managedFields.
        let written = Arc::new(ingest(written));
        let Some(version) = resource_version(written.metadata()) else { return written };
        let now = Instant::now();
        let mut entries = self.entries.lock();
        entries.retain(|_, (_, at)| now.duration_since(*at) < TTL);
        let key = object_key(written.metadata());
        let newer = entries.get(&key).is_none_or(|(kept, _)| {
            kept.metadata().uid != written.metadata().uid
                || resource_version(kept.metadata()).is_none_or(|kept| kept < version)
        });
        if newer {
            entries.insert(key, (written.clone(), now));
        }
        written
    }

    /// The newer of the informer's copy and what a write of ours returned (`GetByKey`).
    pub fn newest(&self, cached: Arc<K>) -> Arc<K> {
        let key = object_key(cached.metadata());
        let mut entries = self.entries.lock();
        let Some((written, at)) = entries.get(&key) else { return cached };
        let ours = at.elapsed() < TTL
            && written.metadata().uid == cached.metadata().uid
            && match (resource_version(written.metadata()), resource_version(cached.metadata())) {
                (Some(written), Some(cached)) => written > cached,
                _ => false,
            };
        if ours {
            return written.clone();
        }
        entries.remove(&key);
        cached
    }

    /// How many written objects are remembered.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
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
}
