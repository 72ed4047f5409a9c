//! The storage version garbage collector (`storageversion-garbage-collector-controller`,
//! feature gates `APIServerIdentity` and `StorageVersionAPI`), after upstream v1.36's
//! `pkg/controller/storageversiongc`: it drops from the `internal.apiserver.k8s.io/v1alpha1`
//! StorageVersions the entries of kube-apiservers that are gone, and deletes a StorageVersion
//! left with none.
//!
//! A kube-apiserver is there while its identity Lease is: a Lease in `kube-system` labelled
//! `apiserver.kubernetes.io/identity=kube-apiserver`, named by the `apiServerID` of its entries.
//! Two queues, one worker each, as upstream:
//! * `storage_version_garbage_collector_leases`: names of identity Leases seen deleted; each is
//!   checked to be gone (a GET), then every StorageVersion (a LIST) loses that server's entry;
//! * `storage_version_garbage_collector_storageversions`: names of StorageVersions added or
//!   updated with an entry whose Lease is not in the cache; each is read again (a GET) and every
//!   entry whose Lease cannot be read (a GET each) goes.
//!
//! An entry dropped means a status update with the common encoding version and the
//! `AllEncodingVersionsEqual` condition computed again (`storageversion.SetCommonEncodingVersion`).

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apiserverinternal::v1alpha1::{ServerStorageVersion, StorageVersion, StorageVersionCondition};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::apimachinery::errors::Aggregate;
use crate::client::{self, Api, Client, DeleteParams, ListParams, PostParams};
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::informer::{Event, Informer};
use crate::runtime::workqueue::WorkQueue;

/// `controlplane.IdentityLeaseComponentLabelKey`.
pub const IDENTITY_LEASE_COMPONENT_LABEL: &str = "apiserver.kubernetes.io/identity";
/// `apiserver.KubeAPIServer`: the label's value on kube-apiservers' identity Leases.
pub const KUBE_APISERVER: &str = "kube-apiserver";
/// `metav1.NamespaceSystem`: where identity Leases live.
const LEASE_NAMESPACE: &str = "kube-system";
/// `v1alpha1.AllEncodingVersionsEqual`.
pub const ALL_ENCODING_VERSIONS_EQUAL: &str = "AllEncodingVersionsEqual";

/// Why a Lease's or a StorageVersion's sync failed. API errors are kept whole, so that a
/// conflict or a server's `Retry-After` reaches the queue with its kind.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the API server failed.
    #[error("{0}")]
    Api(#[from] client::Error),
    /// Several StorageVersions failed (`utilerrors.NewAggregate`): `[a, b]`.
    #[error("{0}")]
    Aggregate(#[from] Aggregate),
    /// The sync of a deleted Lease failed.
    #[error("lease {name} failed with: {source}")]
    Lease {
        /// The Lease.
        name: String,
        /// Why.
        source: Box<Error>,
    },
    /// The sync of a StorageVersion failed.
    #[error("storage version {name} failed with: {source}")]
    StorageVersion {
        /// The StorageVersion.
        name: String,
        /// Why.
        source: Box<Error>,
    },
}

/// The queue acts on the kind of the API error inside, if any.
impl From<Error> for SyncError {
    fn from(error: Error) -> SyncError {
        SyncError::of(error)
    }
}

/// `NewStorageVersionGC` + `Run`.
pub fn new(context: &ControllerContext<'_>) -> Controller {
    let lease_queue = WorkQueue::new("storage_version_garbage_collector_leases");
    let storage_version_queue = WorkQueue::new("storage_version_garbage_collector_storageversions");
    let controller = Arc::new(StorageVersionGc {
        client: context.client.clone(),
        leases: context.informers.informer::<Lease>(),
        storage_versions: context.informers.informer::<StorageVersion>(),
        lease_queue: lease_queue.clone(),
        storage_version_queue: storage_version_queue.clone(),
    });
    let handler = controller.clone();
    controller.leases.add_handler(move |event: &Event<Lease>| handler.on_lease_event(event));
    let handler = controller.clone();
    controller
        .storage_versions
        .add_handler(move |event: &Event<StorageVersion>| handler.on_storage_version_event(event));
    let leases = controller.clone();
    let storage_versions = controller;
    // Identity Leases go and StorageVersions change rarely: one worker each; they may conflict
    // on an update, which is retried.
    Controller::new().with_queue(&lease_queue, 1, move |name: &String| leases.process_deleted_lease(name)).with_queue(
        &storage_version_queue,
        1,
        move |name: &String| storage_versions.process_storage_version(name),
    )
}

/// Whether `lease` is a kube-apiserver's identity Lease (by its label only; the callers look in
/// `kube-system`).
pub fn is_kube_apiserver_identity(lease: &ObjectMeta) -> bool {
    lease.labels.as_ref().and_then(|l| l.get(IDENTITY_LEASE_COMPONENT_LABEL)).is_some_and(|v| v == KUBE_APISERVER)
}

/// The entries of a StorageVersion's status.
fn entries(storage_version: &StorageVersion) -> &[ServerStorageVersion] {
    storage_version.status.as_ref().and_then(|s| s.storage_versions.as_deref()).unwrap_or_default()
}

/// The entries of every server but `api_server_id`, if it had one (`processDeletedLease`'s
/// filter); `None` when it had none and nothing is to be done.
pub fn without_server(storage_version: &StorageVersion, api_server_id: &str) -> Option<Vec<ServerStorageVersion>> {
    let all = entries(storage_version);
    let rest: Vec<ServerStorageVersion> = all.iter().filter(|e| e.api_server_id != api_server_id).cloned().collect();
    (rest.len() != all.len()).then_some(rest)
}

/// `storageversion.SetCommonEncodingVersion`: the common encoding version is the one all
/// entries agree on (none if they differ or there are none), and the `AllEncodingVersionsEqual`
/// condition says whether there is one; its transition time moves when its status changes or
/// the common version changes from one version to another.
pub fn set_common_encoding_version(storage_version: &mut StorageVersion, now: Timestamp) {
    let generation = storage_version.metadata.generation.unwrap_or_default();
    let status = storage_version.status.get_or_insert_with(Default::default);
    let old = status.common_encoding_version.take();
    let versions = status.storage_versions.as_deref().unwrap_or_default();
    status.common_encoding_version = match versions.split_first() {
        Some((first, rest)) if rest.iter().all(|e| e.encoding_version == first.encoding_version) => {
            Some(first.encoding_version.clone())
        }
        _ => None,
    };
    let (condition_status, reason, message) = match status.common_encoding_version {
        Some(_) => ("True", "CommonEncodingVersionSet", "Common encoding version set"),
        None => ("False", "CommonEncodingVersionUnset", "Common encoding version unset"),
    };
    let condition = StorageVersionCondition {
        type_: ALL_ENCODING_VERSIONS_EQUAL.to_string(),
        status: condition_status.to_string(),
        // Go's zero generation is omitted.
        observed_generation: (generation != 0).then_some(generation),
        last_transition_time: Some(Time(now)),
        reason: reason.to_string(),
        message: message.to_string(),
    };
    let force_transition = matches!((&old, &status.common_encoding_version), (Some(o), Some(n)) if o != n);
    set_status_condition(status.conditions.get_or_insert_with(Vec::new), condition, force_transition);
}

/// `setStatusCondition`: a new condition is appended; an existing one takes the new status,
/// reason, message and generation, and the new transition time only if the status changed or
/// a transition is forced.
fn set_status_condition(conditions: &mut Vec<StorageVersionCondition>, new: StorageVersionCondition, force: bool) {
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == new.type_) else {
        conditions.push(new);
        return;
    };
    if existing.status != new.status || force {
        existing.last_transition_time = new.last_transition_time;
    }
    existing.status = new.status;
    existing.reason = new.reason;
    existing.message = new.message;
    existing.observed_generation = new.observed_generation;
}

/// Upstream's storage version GC `Controller`.
struct StorageVersionGc {
    client: Client,
    leases: Arc<Informer<Lease>>,
    storage_versions: Arc<Informer<StorageVersion>>,
    lease_queue: WorkQueue<String>,
    storage_version_queue: WorkQueue<String>,
}

impl StorageVersionGc {
    fn lease_api(&self) -> Api<Lease> {
        Api::namespaced(&self.client, LEASE_NAMESPACE)
    }

    fn storage_version_api(&self) -> Api<StorageVersion> {
        Api::cluster(&self.client)
    }

    /// `onDeleteLease` (Leases are watched for deletes only): a kube-apiserver's identity Lease.
    fn on_lease_event(&self, event: &Event<Lease>) {
        let Event::Deleted { object: lease, .. } = event else { return };
        if lease.metadata.namespace.as_deref() == Some(LEASE_NAMESPACE) && is_kube_apiserver_identity(&lease.metadata) {
            let name = lease.metadata.name.clone().unwrap_or_default();
            log::debug!("Observed lease deleted castObjName=\"{name}\"");
            self.lease_queue.add(name);
        }
    }

    /// `onAddStorageVersion` / `onUpdateStorageVersion` (and their resyncs) +
    /// `enqueueStorageVersion`: one entry whose server has no identity Lease in the cache is enough.
    fn on_storage_version_event(&self, event: &Event<StorageVersion>) {
        let storage_version = match event {
            Event::Added(sv) | Event::Updated { new: sv, .. } => sv,
            Event::Deleted { .. } => return,
        };
        let has_invalid_entry = entries(storage_version).iter().any(|entry| {
            let cached = self.leases.store().get(&format!("{LEASE_NAMESPACE}/{}", entry.api_server_id));
            !cached.is_some_and(|lease| is_kube_apiserver_identity(&lease.metadata))
        });
        if has_invalid_entry {
            let name = storage_version.metadata.name.clone().unwrap_or_default();
            log::debug!("Observed storage version with invalid apiserver entry objName=\"{name}\"");
            self.storage_version_queue.add(name);
        }
    }

    /// `processNextLease` + `processDeletedLease`: if the Lease is really gone, every
    /// StorageVersion with an entry of that server loses it.
    fn process_deleted_lease(&self, name: &str) -> SyncResult {
        Ok(self.deleted_lease(name).map_err(|e| Error::Lease { name: name.into(), source: Box::new(e) })?)
    }

    fn deleted_lease(&self, name: &str) -> Result<(), Error> {
        match self.lease_api().get(name) {
            // The lease is back (or never went): nothing to do.
            Ok(_) => return Ok(()),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
        let list = self.storage_version_api().list(&ListParams::default())?;
        let mut errors = Vec::new();
        for storage_version in list.items {
            let Some(rest) = without_server(&storage_version, name) else { continue };
            if let Err(e) = self.update_or_delete(storage_version, rest) {
                errors.push(e);
            }
        }
        Ok(Aggregate::from_errors(errors)?)
    }

    /// `processNextStorageVersion` + `syncStorageVersion`: the entries of servers whose identity
    /// Lease cannot be read go.
    fn process_storage_version(&self, name: &str) -> SyncResult {
        Ok(self
            .sync_storage_version(name)
            .map_err(|e| Error::StorageVersion { name: name.into(), source: Box::new(e) })?)
    }

    fn sync_storage_version(&self, name: &str) -> Result<(), Error> {
        let storage_version = match self.storage_version_api().get(name) {
            Ok(sv) => sv,
            // Gone since it was seen: nothing to do.
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let all = entries(&storage_version);
        let valid: Vec<ServerStorageVersion> =
            all.iter().filter(|entry| self.has_identity_lease(&entry.api_server_id)).cloned().collect();
        if valid.len() == all.len() {
            return Ok(());
        }
        self.update_or_delete(storage_version, valid)
    }

    /// Whether the server's identity Lease can be read and is a kube-apiserver's; any error
    /// reading it counts as no.
    fn has_identity_lease(&self, api_server_id: &str) -> bool {
        // client-go refuses an empty name before asking.
        !api_server_id.is_empty()
            && self.lease_api().get(api_server_id).is_ok_and(|lease| is_kube_apiserver_identity(&lease.metadata))
    }

    /// `updateOrDeleteStorageVersion`: no entry left deletes the StorageVersion, else its status
    /// is written with the remaining entries.
    fn update_or_delete(
        &self,
        mut storage_version: StorageVersion,
        rest: Vec<ServerStorageVersion>,
    ) -> Result<(), Error> {
        let name = storage_version.metadata.name.clone().unwrap_or_default();
        if rest.is_empty() {
            self.storage_version_api().delete(&name, &DeleteParams::default())?;
            return Ok(());
        }
        storage_version.status.get_or_insert_with(Default::default).storage_versions = Some(rest);
        set_common_encoding_version(&mut storage_version, Timestamp::now());
        self.storage_version_api().replace_status(&name, &storage_version, &PostParams::default())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn storage_version(status: serde_json::Value) -> StorageVersion {
        serde_json::from_value(json!({"metadata": {"name": "apps.deployments", "generation": 0}, "spec": {},
                                      "status": status}))
        .expect("a StorageVersion")
    }

    fn entry(id: &str, encoding: &str) -> serde_json::Value {
        json!({"apiServerID": id, "encodingVersion": encoding, "decodableVersions": [encoding]})
    }

    fn ids(entries: &[ServerStorageVersion]) -> Vec<&str> {
        entries.iter().map(|e| e.api_server_id.as_str()).collect()
    }

    #[test]
    fn a_deleted_server_loses_only_its_own_entries() {
        let sv = storage_version(json!({"storageVersions": [entry("a", "apps/v1"), entry("b", "apps/v1")]}));
        assert_eq!(ids(&without_server(&sv, "a").expect("a had an entry")), ["b"]);
        assert_eq!(ids(&without_server(&sv, "b").unwrap()), ["a"]);
        assert!(without_server(&sv, "c").is_none(), "no entry of c: nothing to do");
        let only = storage_version(json!({"storageVersions": [entry("a", "apps/v1")]}));
        assert_eq!(without_server(&only, "a"), Some(Vec::new()), "none left: the object goes");
        assert!(without_server(&storage_version(json!({})), "a").is_none());
    }

    #[test]
    fn the_common_encoding_version_is_the_one_all_entries_agree_on() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let mut sv = storage_version(json!({"storageVersions": [entry("a", "apps/v1"), entry("b", "apps/v1")]}));
        set_common_encoding_version(&mut sv, now);
        let status = sv.status.as_ref().unwrap();
        assert_eq!(status.common_encoding_version.as_deref(), Some("apps/v1"));
        let conditions = status.conditions.as_deref().unwrap();
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].type_, "AllEncodingVersionsEqual");
        assert_eq!(conditions[0].status, "True");
        assert_eq!(conditions[0].reason, "CommonEncodingVersionSet");
        assert_eq!(conditions[0].message, "Common encoding version set");
        assert_eq!(conditions[0].observed_generation, None, "generation 0 is omitted");
        assert_eq!(conditions[0].last_transition_time, Some(Time(now)));

        let mut differ = storage_version(json!({"storageVersions": [entry("a", "apps/v1"), entry("b", "apps/v2")],
                                                "commonEncodingVersion": "apps/v1"}));
        set_common_encoding_version(&mut differ, now);
        let status = differ.status.as_ref().unwrap();
        assert_eq!(status.common_encoding_version, None);
        let condition = &status.conditions.as_deref().unwrap()[0];
        assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("False", "CommonEncodingVersionUnset"));
        assert_eq!(condition.message, "Common encoding version unset");
    }

    fn condition(status: &str, at: &str) -> serde_json::Value {
        json!({"type": "AllEncodingVersionsEqual", "status": status, "reason": "R", "message": "M",
               "observedGeneration": 3, "lastTransitionTime": at})
    }

    #[test]
    fn the_transition_time_moves_when_the_status_or_the_common_version_changes() {
        let then = "2025-01-01T00:00:00Z";
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let time = |sv: &StorageVersion| sv.status.as_ref().unwrap().conditions.as_ref().unwrap()[0].clone();

        // Same status, same version: only reason, message and generation are rewritten.
        let mut same = storage_version(json!({"storageVersions": [entry("a", "apps/v1")],
            "commonEncodingVersion": "apps/v1", "conditions": [condition("True", then)]}));
        set_common_encoding_version(&mut same, now);
        let c = time(&same);
        assert_eq!(c.last_transition_time.unwrap().0.to_string(), then);
        assert_eq!((c.reason.as_str(), c.observed_generation), ("CommonEncodingVersionSet", None));

        // The status changes.
        let mut flipped = storage_version(json!({"storageVersions": [entry("a", "apps/v1")],
            "conditions": [condition("False", then)]}));
        set_common_encoding_version(&mut flipped, now);
        assert_eq!(time(&flipped).last_transition_time, Some(Time(now)));

        // The common version moves from one version to another: a forced transition.
        let mut moved = storage_version(json!({"storageVersions": [entry("a", "apps/v2")],
            "commonEncodingVersion": "apps/v1", "conditions": [condition("True", then)]}));
        set_common_encoding_version(&mut moved, now);
        assert_eq!(time(&moved).last_transition_time, Some(Time(now)));
        assert_eq!(moved.status.as_ref().unwrap().common_encoding_version.as_deref(), Some("apps/v2"));
    }

    #[test]
    fn only_kube_apiservers_identity_leases_count() {
        let meta = |labels: serde_json::Value| -> ObjectMeta {
            serde_json::from_value(json!({"name": "apiserver-x", "labels": labels})).unwrap()
        };
        assert!(is_kube_apiserver_identity(&meta(json!({"apiserver.kubernetes.io/identity": "kube-apiserver"}))));
        assert!(!is_kube_apiserver_identity(&meta(json!({"apiserver.kubernetes.io/identity": "other"}))));
        assert!(!is_kube_apiserver_identity(&meta(json!({}))));
        assert!(!is_kube_apiserver_identity(&ObjectMeta::default()));
    }

    #[test]
    fn several_errors_are_one_failure_in_brackets() {
        let api = |code: u16| Error::Api(client::ApiError::from_response(code, b"", None).into());
        assert!(Aggregate::from_errors(Vec::<Error>::new()).is_ok());
        let conflict = api(409).to_string();
        let one: Error = Aggregate::from_errors([api(409)]).unwrap_err().into();
        let one = Error::Lease { name: "x".into(), source: Box::new(one) };
        assert_eq!(SyncError::of(one), SyncError::Conflict(format!("lease x failed with: {conflict}")), "its kind");
        let both: Error = Aggregate::from_errors([api(409), api(422)]).unwrap_err().into();
        let invalid = api(422).to_string();
        assert_eq!(both.to_string(), format!("[{conflict}, {invalid}]"));
    }
}
