//! The informer's cache: client-go's thread-safe store with indexes. Objects are kept under
//! one `RwLock`, keyed by `namespace/name` (`name` for cluster-scoped kinds), and every index
//! maps an index value to the keys of the objects that produce it.
//!
//! Most kinds are kept as they are, behind `Arc`. Pods, which outnumber everything else on a
//! cluster, are kept *packed* (see [`packed`]): their metadata as it is, their spec and status
//! as compact JSON delta-coded against a sibling's, a few hundred bytes where the decoded object
//! takes ~17 KiB (a `k8s_openapi` Pod is mostly room for fields that are never set). Reads
//! unpack, so every reader still gets an `Arc<Pod>` equal to what the server sent; readers
//! avoid holding many at once: [`Store::list_namespace_where`] filters on metadata first, so
//! that a controller looking for its own pods unpacks only those, and [`Store::filter`] and
//! [`Store::for_each`] unpack one object at a time. A reader that needs no more of a pod than
//! its metadata, phase, node and readiness reads its [`PodSummary`], kept unpacked beside it
//! ([`Store::summaries_by_index`]), and unpacks nothing.
//!
//! Only the informer's reflector writes; any thread may read.

mod delta;
mod packed;

use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::Metadata;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::RwLock;

use crate::apimachinery::pod::PodSummary;
use packed::{Packed, Packing};

/// The built-in index of objects by `metadata.namespace` (client-go's `NamespaceIndex`).
pub const NAMESPACE_INDEX: &str = "namespace";
/// The built-in index of objects by the `uid` of each of their `metadata.ownerReferences`.
pub const OWNER_UID_INDEX: &str = "owner-uid";

/// Computes the index values of an object (client-go's `IndexFunc`).
pub(super) type IndexFn<K> = Box<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// client-go's `MetaNamespaceKeyFunc`: `namespace/name`, or `name` for cluster-scoped objects.
pub fn object_key(meta: &ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(namespace) if !namespace.is_empty() => format!("{namespace}/{name}"),
        _ => name.to_string(),
    }
}

/// The key of the object `name` in `namespace` (empty for cluster-scoped kinds), without a copy
/// for a cluster-scoped one.
fn key_of<'a>(namespace: &str, name: &'a str) -> Cow<'a, str> {
    if namespace.is_empty() { Cow::Borrowed(name) } else { Cow::Owned(format!("{namespace}/{name}")) }
}

/// client-go's `SplitMetaNamespaceKey`: `(namespace, name)`; the namespace is empty for a
/// cluster-scoped key. Object names never contain `/`, so the first one separates the parts.
pub fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

/// A thread-safe, indexed cache of one kind of object.
pub struct Store<K> {
    inner: RwLock<Inner<K>>,
    /// How this kind is packed, if it is.
    packing: Option<Packing<K>>,
    /// The resourceVersion of the last write: a list's or watch-list's, an event object's or a
    /// bookmark's (client-go v1.36's `threadSafeMap.rv`). Set after the write it stands for.
    resource_version: RwLock<String>,
}

/// An object's key, allocated once and shared by the items and every index that lists it
/// (a pod's key was copied into each of its five or six indexes).
type Key = Arc<str>;

struct Inner<K> {
    items: HashMap<Key, Slot<K>>,
    indexes: HashMap<&'static str, Index<K>>,
}

/// One cached object.
enum Slot<K> {
    Shared(Arc<K>),
    Packed(Box<Packed>),
}

impl<K: Metadata<Ty = ObjectMeta>> Slot<K> {
    fn metadata(&self) -> &ObjectMeta {
        match self {
            Slot::Shared(object) => object.metadata(),
            Slot::Packed(packed) => &packed.summary.metadata,
        }
    }
}

impl Slot<Pod> {
    /// The pod's summary: kept beside a packed pod, computed for one kept as it is.
    fn summary(&self) -> Arc<PodSummary> {
        match self {
            Slot::Shared(pod) => Arc::new(PodSummary::of(pod)),
            Slot::Packed(packed) => packed.summary.clone(),
        }
    }
}

/// One index: its function and, for every value, the keys of the objects that have it.
struct Index<K> {
    function: IndexFn<K>,
    keys_by_value: HashMap<String, HashSet<Key>>,
}

impl<K> Index<K> {
    fn add(&mut self, key: &Key, object: &K) {
        self.add_values(key, (self.function)(object));
    }

    fn add_values(&mut self, key: &Key, values: Vec<String>) {
        for value in values {
            self.keys_by_value.entry(value).or_default().insert(Arc::clone(key));
        }
    }

    fn remove(&mut self, key: &str, object: &K) {
        self.remove_values(key, (self.function)(object));
    }

    fn remove_values(&mut self, key: &str, values: Vec<String>) {
        for value in values {
            if let Some(keys) = self.keys_by_value.get_mut(&value) {
                keys.remove(key);
                if keys.is_empty() {
                    self.keys_by_value.remove(&value);
                }
            }
        }
    }

    /// client-go's `updateSingleIndex`: moves `key` from `old`'s values to `new`'s, and leaves
    /// the index as it is when they are the same, as they mostly are (a pod's status changed,
    /// not its namespace, owners or node).
    fn update(&mut self, key: &Key, old: &K, new: &K) {
        let (old_values, new_values) = ((self.function)(old), (self.function)(new));
        if old_values == new_values {
            return;
        }
        self.remove_values(key, old_values);
        self.add_values(key, new_values);
    }
}

impl<K: Metadata<Ty = ObjectMeta> + 'static> Default for Store<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Metadata<Ty = ObjectMeta> + 'static> Store<K> {
    /// An empty store with the built-in `namespace` and `owner-uid` indexes.
    pub(super) fn new() -> Self {
        let inner = RwLock::new(Inner { items: HashMap::new(), indexes: HashMap::new() });
        let store = Store { inner, packing: Packing::for_kind(), resource_version: RwLock::new(String::new()) };
        store.add_index(NAMESPACE_INDEX, Box::new(|o: &K| vec![o.metadata().namespace.clone().unwrap_or_default()]));
        store.add_index(OWNER_UID_INDEX, Box::new(|o: &K| owner_uids(o.metadata())));
        store
    }

    /// The object in `slot`, unpacked if it is packed; `None` (logged) if it cannot be.
    fn object(&self, slot: &Slot<K>) -> Option<Arc<K>> {
        match (slot, &self.packing) {
            (Slot::Shared(object), _) => Some(object.clone()),
            (Slot::Packed(packed), Some(packing)) => packing.unpack(packed).map(Arc::new),
            (Slot::Packed(_), None) => None,
        }
    }

    fn slot(&self, object: Arc<K>) -> Slot<K> {
        match &self.packing {
            Some(packing) => match packing.pack(&object) {
                Some(packed) => Slot::Packed(Box::new(packed)),
                None => Slot::Shared(object),
            },
            None => Slot::Shared(object),
        }
    }

    /// The objects of `namespace` whose metadata `keep` accepts. Only those are unpacked: a
    /// controller looking for the pods its selector matches pays for those pods alone.
    pub fn list_namespace_where(&self, namespace: &str, keep: impl Fn(&ObjectMeta) -> bool) -> Vec<Arc<K>> {
        let inner = self.inner.read();
        let Some(keys) = inner.indexes.get(NAMESPACE_INDEX).and_then(|i| i.keys_by_value.get(namespace)) else {
            return Vec::new();
        };
        let kept = keys.iter().filter_map(|key| inner.items.get(key)).filter(|slot| keep(slot.metadata()));
        kept.filter_map(|slot| self.object(slot)).collect()
    }

    /// The metadata of the objects of `namespace` (the `namespace` index), without unpacking
    /// the rest of any object.
    pub fn namespace_metadata(&self, namespace: &str) -> Vec<ObjectMeta> {
        let inner = self.inner.read();
        let Some(keys) = inner.indexes.get(NAMESPACE_INDEX).and_then(|i| i.keys_by_value.get(namespace)) else {
            return Vec::new();
        };
        keys.iter().filter_map(|key| inner.items.get(key)).map(|slot| slot.metadata().clone()).collect()
    }

    /// The metadata of every cached object, without unpacking the rest of any object.
    pub fn all_metadata(&self) -> Vec<ObjectMeta> {
        self.inner.read().items.values().map(|slot| slot.metadata().clone()).collect()
    }

    /// The object with this key (`namespace/name`, or `name` for cluster-scoped kinds).
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.inner.read().items.get(key).and_then(|slot| self.object(slot))
    }

    /// The metadata of the object with this key, without unpacking the rest.
    pub fn metadata(&self, key: &str) -> Option<ObjectMeta> {
        self.inner.read().items.get(key).map(|slot| slot.metadata().clone())
    }

    /// The object `name` in `namespace` (empty for cluster-scoped kinds).
    pub fn get_by_name(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.get(&key_of(namespace, name))
    }

    /// Every cached object, in no particular order. For packed kinds this unpacks the whole
    /// cache at once; [`Store::for_each`] and [`Store::filter`] hold one object at a time.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.inner.read().items.values().filter_map(|slot| self.object(slot)).collect()
    }

    /// Calls `visit` with every cached object, one at a time and without the store's lock
    /// held (so `visit` may read the store). The keys are taken first: an object removed
    /// meanwhile is skipped, one replaced meanwhile is seen as it is now.
    pub fn for_each(&self, mut visit: impl FnMut(Arc<K>)) {
        for key in self.keys() {
            if let Some(object) = self.get(&key) {
                visit(object);
            }
        }
    }

    /// The cached objects `keep` accepts, unpacking one at a time: a pass over every pod for
    /// the few a controller acts on does not decode the whole cache at once.
    pub fn filter(&self, keep: impl Fn(&K) -> bool) -> Vec<Arc<K>> {
        let mut kept = Vec::new();
        self.for_each(|object| {
            if keep(&object) {
                kept.push(object);
            }
        });
        kept
    }

    /// Calls `visit` with every object the index `index` lists under any value (say, each pod
    /// that names a claim), once each and one at a time as [`Store::for_each`] does: a pass
    /// over the few objects that matter unpacks none of the others.
    pub fn for_each_indexed(&self, index: &str, mut visit: impl FnMut(Arc<K>)) {
        let keys: HashSet<Key> = {
            let inner = self.inner.read();
            let Some(index) = inner.indexes.get(index) else { return };
            index.keys_by_value.values().flatten().cloned().collect()
        };
        for key in keys {
            if let Some(object) = self.get(&key) {
                visit(object);
            }
        }
    }

    /// The cached objects of one namespace (the built-in `namespace` index).
    pub fn list_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        self.by_index(NAMESPACE_INDEX, namespace)
    }

    /// The objects whose index function returned `value`, in no particular order. Built-in
    /// indexes are `namespace` and `owner-uid`; an unknown index yields nothing.
    pub fn by_index(&self, index: &str, value: &str) -> Vec<Arc<K>> {
        let inner = self.inner.read();
        let Some(keys) = inner.indexes.get(index).and_then(|i| i.keys_by_value.get(value)) else {
            return Vec::new();
        };
        keys.iter().filter_map(|key| inner.items.get(key)).filter_map(|slot| self.object(slot)).collect()
    }

    /// Whether an index of this name exists.
    pub fn has_index(&self, index: &str) -> bool {
        self.inner.read().indexes.contains_key(index)
    }

    /// The keys of every cached object.
    pub fn keys(&self) -> Vec<String> {
        self.inner.read().items.keys().map(|key| key.to_string()).collect()
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        self.inner.read().items.len()
    }

    /// Whether no object is cached.
    pub fn is_empty(&self) -> bool {
        self.inner.read().items.is_empty()
    }

    /// The newest resourceVersion the store has seen, from a list, an event or a bookmark;
    /// empty before the first sync (client-go v1.36's `LastStoreSyncResourceVersion`). The
    /// store already holds every write up to it. Controllers read it through
    /// `Informer::last_store_sync_resource_version`, which applies the `AtomicFIFO` gate.
    pub fn last_store_sync_resource_version(&self) -> String {
        self.resource_version.read().clone()
    }

    /// Records the resourceVersion the store has reached (`threadSafeMap`'s `rv`, which its
    /// `Update`, `DeleteWithObject`, `Replace` and `Bookmark` set). Empty versions are ignored.
    pub(super) fn set_resource_version(&self, version: &str) {
        if !version.is_empty() {
            version.clone_into(&mut self.resource_version.write());
        }
    }

    /// Adds an index and fills it from the objects already cached. Returns `false`, leaving
    /// the existing index in place, when the name is taken.
    pub(super) fn add_index(&self, name: &'static str, function: IndexFn<K>) -> bool {
        let mut inner = self.inner.write();
        if inner.indexes.contains_key(name) {
            return false;
        }
        let mut index = Index { function, keys_by_value: HashMap::new() };
        for (key, slot) in &inner.items {
            if let Some(object) = self.object(slot) {
                index.add(key, &object);
            }
        }
        inner.indexes.insert(name, index);
        true
    }

    /// Stores `object` under `key` and returns what it replaced.
    pub(super) fn insert(&self, key: String, object: Arc<K>) -> Option<Arc<K>> {
        let slot = self.slot(object.clone());
        let mut inner = self.inner.write();
        // A replaced item keeps the key it had, which its index entries share.
        let (key, old) = match inner.items.entry(Key::from(key)) {
            Entry::Occupied(mut entry) => (Arc::clone(entry.key()), self.object(&entry.insert(slot))),
            Entry::Vacant(entry) => {
                let key = Arc::clone(entry.key());
                entry.insert(slot);
                (key, None)
            }
        };
        for index in inner.indexes.values_mut() {
            match &old {
                Some(old) => index.update(&key, old, &object),
                None => index.add(&key, &object),
            }
        }
        old
    }

    /// Removes the object under `key` and returns it.
    pub(super) fn remove(&self, key: &str) -> Option<Arc<K>> {
        let mut inner = self.inner.write();
        let old = inner.items.remove(key).and_then(|old| self.object(&old))?;
        for index in inner.indexes.values_mut() {
            index.remove(key, &old);
        }
        Some(old)
    }
}

impl Store<Pod> {
    /// The summary of the pod `namespace/name`, the pod not unpacked: enough to tell whether
    /// it exists and what phase it is in.
    pub fn summary_by_name(&self, namespace: &str, name: &str) -> Option<Arc<PodSummary>> {
        self.inner.read().items.get(&*key_of(namespace, name)).map(Slot::summary)
    }

    /// The summaries of the pods whose index function returned `value` (see
    /// [`Store::by_index`]): their metadata, phase, node and readiness, no pod unpacked.
    pub fn summaries_by_index(&self, index: &str, value: &str) -> Vec<Arc<PodSummary>> {
        self.summaries_by_index_where(index, value, |_| true)
    }

    /// [`Store::summaries_by_index`], only those `keep` accepts: a pass over a large index (a
    /// namespace's pods, for the few a selector picks) keeps no list of the others.
    pub fn summaries_by_index_where(
        &self,
        index: &str,
        value: &str,
        keep: impl Fn(&PodSummary) -> bool,
    ) -> Vec<Arc<PodSummary>> {
        let inner = self.inner.read();
        let Some(keys) = inner.indexes.get(index).and_then(|i| i.keys_by_value.get(value)) else {
            return Vec::new();
        };
        keys.iter().filter_map(|key| inner.items.get(key)).map(Slot::summary).filter(|s| keep(s)).collect()
    }

    /// The summaries of the pods that `keep` accepts, no pod unpacked: a periodic pass over
    /// every pod (the pod GC's, every 20 s) unpacks none, and then only each pod it writes, in
    /// turn (a rollout's hundreds of terminating pods were all unpacked at once).
    pub fn summaries_where(&self, keep: impl Fn(&PodSummary) -> bool) -> Vec<Arc<PodSummary>> {
        let inner = self.inner.read();
        inner.items.values().map(Slot::summary).filter(|summary| keep(summary)).collect()
    }
}

/// The UIDs of an object's owners.
fn owner_uids(meta: &ObjectMeta) -> Vec<String> {
    meta.owner_references.iter().flatten().map(|owner| owner.uid.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn config_map(namespace: &str, name: &str, owner: Option<&str>, color: &str) -> Arc<ConfigMap> {
        let owner_references = owner.map(|uid| {
            vec![OwnerReference { uid: uid.into(), name: "owner".into(), kind: "X".into(), ..Default::default() }]
        });
        let labels = [("color".to_string(), color.to_string())].into();
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                owner_references,
                labels: Some(labels),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn names(mut objects: Vec<Arc<ConfigMap>>) -> Vec<String> {
        objects.sort_by_key(|o| object_key(&o.metadata));
        objects.iter().map(|o| object_key(&o.metadata)).collect()
    }

    fn color(o: &ConfigMap) -> Vec<String> {
        o.metadata.labels.iter().flatten().filter(|(k, _)| *k == "color").map(|(_, v)| v.clone()).collect()
    }

    #[test]
    fn keys_follow_meta_namespace_key_func() {
        let namespaced = ObjectMeta { namespace: Some("ns".into()), name: Some("a".into()), ..Default::default() };
        let cluster = ObjectMeta { name: Some("node-1".into()), ..Default::default() };
        assert_eq!(object_key(&namespaced), "ns/a");
        assert_eq!(object_key(&cluster), "node-1");
        assert_eq!(split_key("ns/a"), ("ns", "a"));
        assert_eq!(split_key("node-1"), ("", "node-1"));
    }

    #[test]
    fn indexes_follow_inserts_updates_and_removals() {
        let store = Store::<ConfigMap>::new();
        assert!(store.add_index("color", Box::new(color)));
        assert!(!store.add_index("color", Box::new(color)), "a taken name is refused");
        store.insert("a/one".into(), config_map("a", "one", Some("u1"), "red"));
        store.insert("a/two".into(), config_map("a", "two", Some("u1"), "blue"));
        store.insert("b/three".into(), config_map("b", "three", None, "red"));
        assert_eq!(names(store.list_namespace("a")), ["a/one", "a/two"]);
        let mut metadata = store.namespace_metadata("a").into_iter().map(|m| object_key(&m)).collect::<Vec<_>>();
        metadata.sort();
        assert_eq!(metadata, ["a/one", "a/two"], "the namespace's metadata alone");
        assert!(store.namespace_metadata("c").is_empty());
        assert_eq!(store.all_metadata().len(), 3, "every object's metadata");
        assert_eq!(names(store.by_index(OWNER_UID_INDEX, "u1")), ["a/one", "a/two"]);
        assert_eq!(names(store.by_index("color", "red")), ["a/one", "b/three"]);

        let old = store.insert("a/one".into(), config_map("a", "one", None, "blue"));
        assert_eq!(old.map(|o| color(&o)), Some(vec!["red".to_string()]));
        assert_eq!(names(store.by_index("color", "red")), ["b/three"]);
        assert_eq!(names(store.by_index(OWNER_UID_INDEX, "u1")), ["a/two"]);
        // An update that keeps an object's index values leaves it where it was.
        store.insert("a/one".into(), config_map("a", "one", None, "blue"));
        assert_eq!(names(store.by_index("color", "blue")), ["a/one", "a/two"]);
        assert_eq!(names(store.list_namespace("a")), ["a/one", "a/two"]);

        assert!(store.remove("a/two").is_some());
        assert!(store.remove("a/two").is_none());
        assert!(store.by_index(OWNER_UID_INDEX, "u1").is_empty());
        assert_eq!(names(store.by_index("color", "blue")), ["a/one"]);
        assert!(store.by_index("no-such-index", "x").is_empty());
        assert_eq!(store.len(), 2);
        assert_eq!(store.get_by_name("b", "three").map(|o| object_key(&o.metadata)), Some("b/three".into()));
    }

    #[test]
    fn for_each_and_filter_see_every_object_once() {
        let store = Store::<ConfigMap>::new();
        for (name, color) in [("one", "red"), ("two", "blue"), ("three", "red")] {
            store.insert(format!("a/{name}"), config_map("a", name, None, color));
        }
        let mut seen = Vec::new();
        store.for_each(|o| seen.push(o));
        assert_eq!(names(seen), ["a/one", "a/three", "a/two"]);
        assert_eq!(names(store.filter(|o| color(o) == ["red"])), ["a/one", "a/three"]);
        let mut reentrant = 0;
        store.for_each(|o| reentrant += store.get(&object_key(&o.metadata)).map_or(0, |_| 1));
        assert_eq!(reentrant, 3, "the visitor may read the store");
    }

    #[test]
    fn the_store_keeps_the_last_resource_version_set() {
        let store = Store::<ConfigMap>::new();
        assert_eq!(store.last_store_sync_resource_version(), "", "nothing synced yet");
        store.set_resource_version("12");
        store.set_resource_version("");
        assert_eq!(store.last_store_sync_resource_version(), "12");
        store.set_resource_version("15");
        assert_eq!(store.last_store_sync_resource_version(), "15");
    }

    #[test]
    fn pod_summaries_are_read_without_unpacking_and_follow_updates() {
        use crate::apimachinery::pod::{PodFields, is_pod_ready};
        let pod = |name: &str, phase: &str, ready: &str| -> Arc<Pod> {
            let status = serde_json::json!({"phase": phase, "conditions": [{"type": "Ready", "status": ready}]});
            let metadata = serde_json::json!({"namespace": "a", "name": name, "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u1", "controller": true}]});
            let pod = serde_json::json!({"metadata": metadata, "spec": {"nodeName": "n1", "containers": []}, "status": status});
            Arc::new(serde_json::from_value(pod).expect("a pod"))
        };
        let store = Store::<Pod>::new();
        store.insert("a/one".into(), pod("one", "Pending", "False"));
        store.insert("a/two".into(), pod("two", "Running", "True"));
        let mut summaries = store.summaries_by_index(OWNER_UID_INDEX, "u1");
        summaries.sort_by_key(|s| object_key(&s.metadata));
        let read = |s: &Arc<PodSummary>| (s.pod_phase().to_string(), s.pod_node_name().to_string(), is_pod_ready(s));
        assert_eq!(
            summaries.iter().map(read).collect::<Vec<_>>(),
            [("Pending".to_string(), "n1".to_string(), false), ("Running".to_string(), "n1".to_string(), true)]
        );
        store.insert("a/one".into(), pod("one", "Running", "True"));
        let one = store
            .summaries_by_index(NAMESPACE_INDEX, "a")
            .into_iter()
            .find(|s| s.metadata.name.as_deref() == Some("one"));
        assert_eq!(
            one.as_ref().map(read),
            Some(("Running".to_string(), "n1".to_string(), true)),
            "the summary follows the update"
        );
        assert_eq!(one.map(|s| (*s).clone()), store.get("a/one").map(|p| PodSummary::of(&p)));
        assert!(store.summaries_by_index(OWNER_UID_INDEX, "u2").is_empty());
        let running = store.summaries_by_index_where(NAMESPACE_INDEX, "a", |s| s.pod_phase() == "Running");
        assert_eq!(running.len(), 2, "both pods run now");
        assert!(store.summaries_by_index_where(NAMESPACE_INDEX, "a", |s| s.pod_phase() == "Failed").is_empty());

        store.insert("a/three".into(), pod("three", "Failed", "False"));
        let failed = store.summaries_where(|s| s.pod_phase() == "Failed");
        assert_eq!(failed.iter().map(|p| object_key(&p.metadata)).collect::<Vec<_>>(), ["a/three"]);
        let three = store.get("a/three").expect("cached");
        assert_eq!(*failed[0], PodSummary::of(&three), "the pod's summary");
        let by_name = store.summary_by_name("a", "three").expect("a summary");
        assert_eq!(*by_name, PodSummary::of(&three), "read by name");
        assert!(store.summary_by_name("a", "four").is_none() && store.summary_by_name("", "three").is_none());
    }

    #[test]
    fn for_each_indexed_visits_each_object_an_index_lists_once() {
        let store = Store::<ConfigMap>::new();
        let colors = |o: &ConfigMap| -> Vec<String> {
            color(o).iter().flat_map(|c| c.split(',')).filter(|c| !c.is_empty()).map(str::to_string).collect()
        };
        store.add_index("colors", Box::new(colors));
        for (name, color) in [("one", "red"), ("two", ""), ("three", "red,blue")] {
            store.insert(format!("a/{name}"), config_map("a", name, None, color));
        }
        let mut seen = Vec::new();
        store.for_each_indexed("colors", |o| seen.push(o));
        assert_eq!(names(seen), ["a/one", "a/three"], "listed under two values, visited once; unlisted, not at all");
        let mut none = Vec::new();
        store.for_each_indexed("no-such-index", |o| none.push(o));
        assert!(none.is_empty());
    }

    #[test]
    fn a_late_index_covers_cached_objects() {
        let store = Store::<ConfigMap>::new();
        store.insert("a/one".into(), config_map("a", "one", None, "red"));
        store.add_index("color", Box::new(color));
        assert_eq!(names(store.by_index("color", "red")), ["a/one"]);
    }
}
