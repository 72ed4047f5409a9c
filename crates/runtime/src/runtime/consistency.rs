//! Stale-cache protection for controllers (upstream v1.36 `pkg/controller/util/consistency`,
//! behind the `StaleControllerConsistency{ReplicaSet,DaemonSet,StatefulSet,Job}` gates, Beta
//! and on): a controller records the resourceVersion of each write it makes on an owner's
//! behalf, and skips syncing that owner until its informers have seen those writes. Without
//! it, a sync right after a write may read a cache that does not have the write yet and, say,
//! create a pod a second time.
//!
//! "Seen" is [`Informer::last_store_sync_resource_version`]: the newest resourceVersion an
//! informer's store has reached, from its list or watch-list, its events and its bookmarks.
//! Bookmarks matter: a write to *another* kind moves no event into this store, but the next
//! bookmark moves it past that revision. resourceVersions compare as numbers
//! ([`compare_resource_version`]).
//!
//! # How a controller uses it (upstream's ReplicaSet controller)
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use k8s_openapi::api::apps::v1::ReplicaSet;
//! use k8s_openapi::api::core::v1::Pod;
//! use kcm_base::apimachinery::schema::GroupResource;
//! use kcm_runtime::runtime::consistency::{ConsistencyStore, LastSyncRvGetter, NoopConsistencyStore, RealConsistencyStore};
//! use kcm_runtime::runtime::controller::SyncResult;
//! use kcm_runtime::runtime::informer::SharedInformerFactory;
//!
//! // In the constructor: a real store when the controller's gate is on, else a no-op one.
//! fn consistency_store(informers: &SharedInformerFactory, gate_enabled: bool) -> Arc<dyn ConsistencyStore> {
//!     if !gate_enabled {
//!         return Arc::new(NoopConsistencyStore);
//!     }
//!     let pods: Arc<dyn LastSyncRvGetter> = informers.informer::<Pod>();
//!     let sets: Arc<dyn LastSyncRvGetter> = informers.informer::<ReplicaSet>();
//!     Arc::new(RealConsistencyStore::new([
//!         (GroupResource::new("", "pods"), pods),
//!         (GroupResource::new("apps", "replicasets"), sets),
//!     ]))
//! }
//!
//! // The queue handler of `key` ("namespace/name").
//! fn sync(consistency: &dyn ConsistencyStore, informers: &SharedInformerFactory, key: &str) -> SyncResult {
//!     // Not ready: the error requeues the key rate-limited (count the skip in the
//!     // controller's `*_stale_sync_skips_total{group,resource}` metric first).
//!     consistency.ensure_ready(key)?;
//!     let Some(set) = informers.informer::<ReplicaSet>().store().get(key) else {
//!         // Deleted: forget its writes, whatever its UID was.
//!         consistency.clear(key, "");
//!         return Ok(());
//!     };
//!     let uid = set.metadata.uid.as_deref().unwrap_or_default();
//!     // ... create pods, update the status; after each write, what the server returned:
//!     let written = "4711"; // e.g. the `metadata.resourceVersion` of the updated ReplicaSet
//!     consistency.wrote_at(key, uid, &GroupResource::new("apps", "replicasets"), written);
//!     // For a pod created or patched for the set: `wrote_at(owner key, owner UID, pods, pod RV)`.
//!     Ok(())
//! }
//!
//! // The informer's delete handler: `consistency.clear(&key, deleted_uid)`.
//! ```
//!
//! Pod deletions are not recorded upstream; the ReplicationController uses the no-op store.
//!
//! The four controllers hold a [`ControllerConsistency`]: the store their gate chose and their
//! skip counter, which [`ControllerConsistency::ensure_ready`] counts, and
//! [`ControllerConsistency::pod_written`] (upstream's `RealPodControl.OnWrite`) for the pods
//! they create or patch, adoptions included (`ControllerRefManager::on_write`).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use k8s_openapi::Metadata;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::{Mutex, RwLock};

use super::controller::SyncError;
use super::informer::{Informer, object_key};
use crate::apimachinery::resourceversion::compare_resource_version;
use crate::apimachinery::schema::GroupResource;
use crate::metrics::CounterVec;

/// What a consistency store reads of an informer (`LastSyncRVGetter`).
pub trait LastSyncRvGetter: Send + Sync {
    /// The newest resourceVersion its store has seen; empty before its first sync.
    fn last_store_sync_resource_version(&self) -> String;
}

/// Through the informer, which answers "" with client-go's `AtomicFIFO` gate off.
impl<K: Metadata<Ty = ObjectMeta> + Send + Sync + 'static> LastSyncRvGetter for Informer<K> {
    fn last_store_sync_resource_version(&self) -> String {
        Informer::last_store_sync_resource_version(self)
    }
}

/// The resourceVersions a controller wrote per owner, and whether its informers have seen
/// them (`ConsistencyStore`). Owners are named by their key, `namespace/name`.
pub trait ConsistencyStore: Send + Sync {
    /// Records that a write on behalf of `owner` (whose UID is `owner_uid`) to `resource`
    /// returned `resource_version` (`WroteAt`).
    fn wrote_at(&self, owner: &str, owner_uid: &str, resource: &GroupResource, resource_version: &str);
    /// Forgets `owner`'s writes if its record is for `owner_uid`; an empty `owner_uid`
    /// forgets them whatever the UID (`Clear`).
    fn clear(&self, owner: &str, owner_uid: &str);
    /// `Ok` once the informers have seen every write recorded for `owner`, which then forgets
    /// them (`EnsureReady`). Not to be called concurrently with `wrote_at` for the same owner
    /// (a work queue hands a key to one worker at a time).
    fn ensure_ready(&self, owner: &str) -> Result<(), ConsistencyError>;
}

/// An informer has not yet seen a write (`ConsistencyError`). As a sync's error it requeues
/// the key rate-limited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsistencyError {
    /// What the informer of `group_resource` has seen.
    pub read_resource_version: String,
    /// What the controller wrote.
    pub wrote_resource_version: String,
    /// Whose informer is behind.
    pub group_resource: GroupResource,
}

impl fmt::Display for ConsistencyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "read version: {} is not as new as written version: {} for group resource {}",
            self.read_resource_version, self.wrote_resource_version, self.group_resource
        )
    }
}

impl std::error::Error for ConsistencyError {}

/// Upstream returns it from the sync, and `processNextWorkItem` requeues with `AddRateLimited`.
impl From<ConsistencyError> for SyncError {
    fn from(error: ConsistencyError) -> SyncError {
        SyncError::of(error)
    }
}

/// The consistency store of a controller whose gate is on (`RealConsistencyStore`).
pub struct RealConsistencyStore {
    /// Per owner key, its record; each record locks its own versions.
    writes: RwLock<HashMap<String, Arc<OwnerRecord>>>,
    /// The informers whose stores tell what has been seen, by the resource they hold.
    stores: HashMap<GroupResource, Arc<dyn LastSyncRvGetter>>,
}

impl RealConsistencyStore {
    /// A store that checks writes to each resource against its informer
    /// (`NewConsistencyStore`). Writes to a resource without an informer here are recorded
    /// but never wait.
    pub fn new(stores: impl IntoIterator<Item = (GroupResource, Arc<dyn LastSyncRvGetter>)>) -> Self {
        RealConsistencyStore { writes: RwLock::new(HashMap::new()), stores: stores.into_iter().collect() }
    }

    /// The record of `owner`, if any (`getWrittenRecord`).
    fn record(&self, owner: &str) -> Option<Arc<OwnerRecord>> {
        self.writes.read().get(owner).cloned()
    }

    /// The record of `owner` for `owner_uid`; a record of another UID (an owner deleted and
    /// created again under the same name) is replaced by an empty one (`ensureWrittenRecord`).
    fn record_for(&self, owner: &str, owner_uid: &str) -> Arc<OwnerRecord> {
        if let Some(record) = self.record(owner).filter(|r| r.owner_uid == owner_uid) {
            return record;
        }
        let mut writes = self.writes.write();
        match writes.get(owner) {
            Some(record) if record.owner_uid == owner_uid => record.clone(),
            _ => {
                let record = Arc::new(OwnerRecord::new(owner_uid));
                writes.insert(owner.to_string(), record.clone());
                record
            }
        }
    }
}

impl ConsistencyStore for RealConsistencyStore {
    fn wrote_at(&self, owner: &str, owner_uid: &str, resource: &GroupResource, resource_version: &str) {
        self.record_for(owner, owner_uid).wrote_at(resource, resource_version);
    }

    fn clear(&self, owner: &str, owner_uid: &str) {
        let mut writes = self.writes.write();
        if writes.get(owner).is_some_and(|r| owner_uid.is_empty() || r.owner_uid == owner_uid) {
            writes.remove(owner);
        }
    }

    fn ensure_ready(&self, owner: &str) -> Result<(), ConsistencyError> {
        let Some(record) = self.record(owner) else { return Ok(()) };
        record.ensure_ready(&self.stores)?;
        self.clear(owner, &record.owner_uid);
        Ok(())
    }
}

/// What one owner's controller wrote (`ownerRecord`).
struct OwnerRecord {
    owner_uid: String,
    /// The newest resourceVersion written per resource.
    versions: Mutex<BTreeMap<GroupResource, String>>,
}

impl OwnerRecord {
    fn new(owner_uid: &str) -> Self {
        OwnerRecord { owner_uid: owner_uid.to_string(), versions: Mutex::new(BTreeMap::new()) }
    }

    /// Keeps `resource_version` unless a newer one is recorded for `resource`; one that does
    /// not compare replaces the record (`ownerRecord.WroteAt`).
    fn wrote_at(&self, resource: &GroupResource, resource_version: &str) {
        let mut versions = self.versions.lock();
        if let Some(recorded) = versions.get(resource)
            && compare_resource_version(recorded, resource_version).is_ok_and(|o| o.is_ge())
        {
            return;
        }
        versions.insert(resource.clone(), resource_version.to_string());
    }

    /// The first resource whose informer has not reached what was written to it
    /// (`ownerRecord.EnsureReady`). A resource without an informer, an informer that reports
    /// no resourceVersion, or versions that do not compare do not hold the sync back.
    fn ensure_ready(&self, stores: &HashMap<GroupResource, Arc<dyn LastSyncRvGetter>>) -> Result<(), ConsistencyError> {
        let versions = self.versions.lock();
        for (resource, wrote) in versions.iter() {
            let Some(store) = stores.get(resource) else { continue };
            let read = store.last_store_sync_resource_version();
            if read.is_empty() {
                continue;
            }
            if compare_resource_version(wrote, &read).is_ok_and(|o| o.is_gt()) {
                return Err(ConsistencyError {
                    read_resource_version: read,
                    wrote_resource_version: wrote.clone(),
                    group_resource: resource.clone(),
                });
            }
        }
        Ok(())
    }
}

/// The consistency store of a controller whose gate is off: records nothing, always ready
/// (`NoopConsistencyStore`).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopConsistencyStore;

impl ConsistencyStore for NoopConsistencyStore {
    fn wrote_at(&self, _: &str, _: &str, _: &GroupResource, _: &str) {}

    fn clear(&self, _: &str, _: &str) {}

    fn ensure_ready(&self, _: &str) -> Result<(), ConsistencyError> {
        Ok(())
    }
}

/// The core group's `pods`, which every gated controller writes.
pub fn pods_resource() -> GroupResource {
    GroupResource::new("", "pods")
}

/// A `*_stale_sync_skips_total{group,resource}` family: how many syncs a controller skipped
/// because an informer had not yet seen its writes. Its name and help come from upstream's
/// metrics package of that controller; registering it is the controller's choice.
pub fn stale_sync_skips(name: &'static str, help: &'static str) -> CounterVec {
    CounterVec::counter(name, help, &["group", "resource"])
}

/// What one gated controller keeps of this module: its store (real when its gate is on) and
/// its skip counter. Owners are named by their key, `namespace/name`.
#[derive(Clone)]
pub struct ControllerConsistency {
    store: Arc<dyn ConsistencyStore>,
    skips: Arc<CounterVec>,
}

impl ControllerConsistency {
    /// `NewConsistencyStore` over `informers` when `enabled` (the controller's
    /// `StaleControllerConsistency*` gate), else `NewNoopConsistencyStore`, as each of
    /// upstream's controller constructors chooses.
    pub fn new(
        enabled: bool,
        informers: impl IntoIterator<Item = (GroupResource, Arc<dyn LastSyncRvGetter>)>,
        skips: Arc<CounterVec>,
    ) -> Self {
        let store: Arc<dyn ConsistencyStore> =
            if enabled { Arc::new(RealConsistencyStore::new(informers)) } else { Arc::new(NoopConsistencyStore) };
        ControllerConsistency { store, skips }
    }

    /// The check at the top of upstream's syncs: `EnsureReady(owner)`; when an informer is
    /// behind, the skip is counted under its group and resource, and the error (which the
    /// caller returns, so that the key is requeued rate-limited) says which.
    pub fn ensure_ready(&self, owner: &str) -> Result<(), ConsistencyError> {
        let result = self.store.ensure_ready(owner);
        if let Err(error) = &result {
            self.skips.inc(&[&error.group_resource.group, &error.group_resource.resource]);
        }
        result
    }

    /// `WroteAt` for a write on behalf of the owner with this metadata.
    pub fn wrote_for(&self, owner: &ObjectMeta, resource: &GroupResource, resource_version: Option<&str>) {
        let uid = owner.uid.as_deref().unwrap_or("");
        self.store.wrote_at(&object_key(owner), uid, resource, resource_version.unwrap_or(""));
    }

    /// `WroteAt` for the object a write on an owner's behalf returned: its own
    /// resourceVersion, for the owner it names (the owner's status update, say).
    pub fn wrote(&self, written: &ObjectMeta, resource: &GroupResource) {
        self.wrote_for(written, resource, written.resource_version.as_deref());
    }

    /// `RealPodControl.OnWrite`: a pod created or patched is recorded for the controller its
    /// returned state names; a pod without one (just released) is not recorded.
    pub fn pod_written(&self, pod: &ObjectMeta) {
        let Some(owner) = pod.owner_references.iter().flatten().find(|r| r.controller == Some(true)) else { return };
        let key = format!("{}/{}", pod.namespace.as_deref().unwrap_or(""), owner.name);
        let version = pod.resource_version.as_deref().unwrap_or("");
        self.store.wrote_at(&key, &owner.uid, &pods_resource(), version);
    }

    /// `Clear(owner, ownerUID)`: the owner was deleted (an empty `owner_uid`: whatever its UID).
    pub fn clear(&self, owner: &str, owner_uid: &str) {
        self.store.clear(owner, owner_uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An informer stand-in whose resourceVersion the test sets.
    #[derive(Default)]
    struct Seen(Mutex<String>);

    impl Seen {
        fn at(&self, version: &str) {
            version.clone_into(&mut self.0.lock());
        }
    }

    impl LastSyncRvGetter for Seen {
        fn last_store_sync_resource_version(&self) -> String {
            self.0.lock().clone()
        }
    }

    fn pods() -> GroupResource {
        GroupResource::new("", "pods")
    }

    fn sets() -> GroupResource {
        GroupResource::new("apps", "replicasets")
    }

    /// A store over two informers, pods and replicasets, both at `100`.
    fn store() -> (RealConsistencyStore, Arc<Seen>, Arc<Seen>) {
        let (pod_informer, set_informer) = (Arc::new(Seen::default()), Arc::new(Seen::default()));
        pod_informer.at("100");
        set_informer.at("100");
        let stores: [(GroupResource, Arc<dyn LastSyncRvGetter>); 2] =
            [(pods(), pod_informer.clone()), (sets(), set_informer.clone())];
        (RealConsistencyStore::new(stores), pod_informer, set_informer)
    }

    #[test]
    fn a_write_holds_the_owner_back_until_its_informer_has_seen_it() {
        let (store, pod_informer, set_informer) = store();
        assert_eq!(store.ensure_ready("ns/web"), Ok(()), "nothing written");
        store.wrote_at("ns/web", "uid-1", &pods(), "105");
        store.wrote_at("ns/web", "uid-1", &sets(), "107");
        let error = store.ensure_ready("ns/web").unwrap_err();
        assert_eq!(error.read_resource_version, "100");
        assert!(["105", "107"].contains(&error.wrote_resource_version.as_str()));
        pod_informer.at("106");
        let error = store.ensure_ready("ns/web").unwrap_err();
        assert_eq!(
            error.to_string(),
            "read version: 100 is not as new as written version: 107 for group resource replicasets.apps"
        );
        assert_eq!(SyncError::from(error.clone()), SyncError::Failed(error.to_string()), "requeued rate-limited");
        // A bookmark (or any write to the kind) past the write is enough: it need not be ours.
        set_informer.at("107");
        assert_eq!(store.ensure_ready("ns/web"), Ok(()));
        assert!(store.record("ns/web").is_none(), "a ready owner's record is dropped");
        // Other owners were never held back.
        assert_eq!(store.ensure_ready("ns/other"), Ok(()));
    }

    #[test]
    fn the_newest_write_per_resource_counts_numerically() {
        let (store, pod_informer, _) = store();
        store.wrote_at("ns/web", "uid-1", &pods(), "999");
        store.wrote_at("ns/web", "uid-1", &pods(), "1000");
        store.wrote_at("ns/web", "uid-1", &pods(), "998");
        pod_informer.at("999");
        assert_eq!(store.ensure_ready("ns/web").unwrap_err().wrote_resource_version, "1000");
        pod_informer.at("1000");
        assert_eq!(store.ensure_ready("ns/web"), Ok(()));
        // A write that does not compare replaces what was recorded (upstream's `err != nil`).
        store.wrote_at("ns/web", "uid-1", &pods(), "2000");
        store.wrote_at("ns/web", "uid-1", &pods(), "bogus");
        assert_eq!(store.ensure_ready("ns/web"), Ok(()), "a version that does not compare holds nothing back");
    }

    #[test]
    fn unknown_resources_and_unsynced_informers_do_not_hold_back() {
        let (store, pod_informer, _) = store();
        store.wrote_at("ns/web", "uid-1", &GroupResource::new("", "persistentvolumeclaims"), "500");
        assert_eq!(store.ensure_ready("ns/web"), Ok(()), "no informer for that resource");
        pod_informer.at("");
        store.wrote_at("ns/web", "uid-1", &pods(), "500");
        assert_eq!(store.ensure_ready("ns/web"), Ok(()), "an informer without a resourceVersion");
    }

    #[test]
    fn a_new_uid_starts_a_new_record_and_clear_matches_uids() {
        let (store, _, _) = store();
        store.wrote_at("ns/web", "uid-1", &pods(), "105");
        // The owner was deleted and created again: its predecessor's writes no longer count.
        store.wrote_at("ns/web", "uid-2", &sets(), "101");
        let error = store.ensure_ready("ns/web").unwrap_err();
        assert_eq!(error.group_resource, sets());
        store.clear("ns/web", "uid-1");
        assert!(store.ensure_ready("ns/web").is_err(), "a clear for another UID keeps the record");
        store.clear("ns/web", "uid-2");
        assert_eq!(store.ensure_ready("ns/web"), Ok(()));
        store.wrote_at("ns/web", "uid-3", &pods(), "105");
        store.clear("ns/web", "");
        assert_eq!(store.ensure_ready("ns/web"), Ok(()), "an empty UID clears whatever the UID");
    }

    fn pod(name: &str, version: &str, owner: Option<(&str, &str)>) -> ObjectMeta {
        let owner_references = owner.map(|(name, uid)| {
            let reference = k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: name.into(),
                uid: uid.into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            };
            vec![reference]
        });
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            resource_version: Some(version.into()),
            owner_references,
            ..ObjectMeta::default()
        }
    }

    /// A controller's consistency over a pod and a replicaset informer, both at `100`.
    fn controller(enabled: bool) -> (ControllerConsistency, Arc<Seen>, Arc<Seen>, Arc<CounterVec>) {
        let (pod_informer, set_informer) = (Arc::new(Seen::default()), Arc::new(Seen::default()));
        pod_informer.at("100");
        set_informer.at("100");
        let informers: [(GroupResource, Arc<dyn LastSyncRvGetter>); 2] =
            [(pods(), pod_informer.clone()), (sets(), set_informer.clone())];
        let skips = Arc::new(stale_sync_skips("test_stale_sync_skips_total", "[ALPHA] Test."));
        (ControllerConsistency::new(enabled, informers, skips.clone()), pod_informer, set_informer, skips)
    }

    #[test]
    fn a_skipped_sync_is_counted_under_the_resource_behind() {
        let (consistency, pod_informer, set_informer, skips) = controller(true);
        let owner = ObjectMeta { uid: Some("uid-1".into()), ..pod("web", "103", None) };
        consistency.pod_written(&pod("web-a", "101", Some(("web", "uid-1"))));
        consistency.wrote(&owner, &sets());
        assert!(consistency.ensure_ready("ns/web").is_err());
        assert_eq!(skips.get(&["", "pods"]), 1.0, "the first resource behind, in order");
        pod_informer.at("101");
        let error = consistency.ensure_ready("ns/web").unwrap_err();
        assert_eq!((error.wrote_resource_version.as_str(), error.group_resource), ("103", sets()));
        assert_eq!(skips.get(&["apps", "replicasets"]), 1.0);
        set_informer.at("103");
        assert_eq!(consistency.ensure_ready("ns/web"), Ok(()));
        assert_eq!(
            (skips.get(&["", "pods"]), skips.get(&["apps", "replicasets"])),
            (1.0, 1.0),
            "a sync run is no skip"
        );
    }

    #[test]
    fn pod_writes_count_for_the_controller_the_pod_names() {
        let (consistency, _, _, _) = controller(true);
        consistency.pod_written(&pod("web-a", "105", None));
        assert_eq!(consistency.ensure_ready("ns/web"), Ok(()), "a released pod is recorded for nobody");
        consistency.pod_written(&pod("web-a", "105", Some(("web", "uid-1"))));
        assert!(consistency.ensure_ready("ns/web").is_err());
        assert_eq!(consistency.ensure_ready("ns/other"), Ok(()));
        consistency.clear("ns/web", "uid-2");
        assert!(consistency.ensure_ready("ns/web").is_err(), "another owner's deletion");
        consistency.clear("ns/web", "uid-1");
        assert_eq!(consistency.ensure_ready("ns/web"), Ok(()), "the owner was deleted");
    }

    #[test]
    fn with_the_gate_off_nothing_waits() {
        let (consistency, _, _, skips) = controller(false);
        consistency.pod_written(&pod("web-a", "105", Some(("web", "uid-1"))));
        consistency.wrote_for(&pod("web", "1", None), &sets(), Some("107"));
        assert_eq!(consistency.ensure_ready("ns/web"), Ok(()));
        assert_eq!(skips.get(&["", "pods"]), 0.0);
    }

    #[test]
    fn the_noop_store_is_always_ready() {
        let store = NoopConsistencyStore;
        store.wrote_at("ns/web", "uid-1", &pods(), "105");
        assert_eq!(store.ensure_ready("ns/web"), Ok(()));
    }
}
