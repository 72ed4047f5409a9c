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
//! use kcm::apimachinery::schema::GroupResource;
//! use kcm::runtime::consistency::{ConsistencyStore, LastSyncRvGetter, NoopConsistencyStore, RealConsistencyStore};
//! use kcm::runtime::controller::SyncResult;
//! use kcm::runtime::informer::SharedInformerFactory;
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

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use k8s_openapi::Metadata;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::{Mutex, RwLock};

use super::controller::SyncError;
use super::informer::Informer;
use crate::apimachinery::resourceversion::compare_resource_version;
use crate::apimachinery::schema::GroupResource;

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
        SyncError::Failed(error.to_string())
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

    #[test]
    fn the_noop_store_is_always_ready() {
        let store = NoopConsistencyStore;
        store.wrote_at("ns/web", "uid-1", &pods(), "105");
        assert_eq!(store.ensure_ready("ns/web"), Ok(()));
    }
}
