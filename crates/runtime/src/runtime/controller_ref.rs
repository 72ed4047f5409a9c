//! Upstream's `BaseControllerRefManager.ClaimObject` (`pkg/controller/controller_ref_manager.go`)
//! for any namespaced kind: a controller claims the objects its selector matches, adopting
//! orphans and releasing owned objects that stopped matching; objects controlled by someone
//! else are never touched. The patches are upstream's `ownerRefControllerPatch` and
//! `GenerateDeleteOwnerRefStrategicMergeBytes`. Also how an informer handler finds the
//! controllers concerned by an object: the one its controller reference names
//! (`resolveControllerRef`), or, for an orphan, those whose selector matches it (client-go's
//! `GetPodReplicaSets` and the like).

use std::borrow::Borrow;
use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::{Metadata, NamespaceResourceScope, Resource};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::apimachinery::errors::{Aggregate, BoxError};
use crate::apimachinery::labels::Selector;
use crate::apimachinery::pod::PodSummary;
use crate::client::{Api, Client, Error, Patch, PostParams};
use crate::runtime::informer::Informer;

/// `metav1.GetControllerOf`: the owner reference with `controller: true`.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references.iter().flatten().find(|r| r.controller == Some(true))
}

/// Whether [`ControllerRefManager::claim`] could keep, adopt or release an object with this
/// metadata for the owner with `owner_uid` and `selector`: one it controls, or an orphan the
/// selector matches. Claims leave every other object alone, so a controller may read only these
/// from its cache (packed pods are then unpacked only for their owner).
pub fn claim_candidate(owner_uid: Option<&String>, selector: &Selector, meta: &ObjectMeta) -> bool {
    match controller_of(meta) {
        Some(owner) => Some(&owner.uid) == owner_uid,
        None => selector.matches(meta.labels.as_ref()),
    }
}

/// The metadata of an object of kind `K`, owned or shared.
fn metadata_of<K: Metadata<Ty = ObjectMeta> + 'static, T: Borrow<K>>(object: &T) -> &ObjectMeta {
    object.borrow().metadata()
}

/// `controller.PodControllerUIDIndex`: pods by their controller's UID, orphans by
/// [`orphan_pod_index_key`] of their namespace.
pub const POD_CONTROLLER_UID_INDEX: &str = "podControllerUID";

/// `controller.OrphanPodIndexKeyForNamespace`.
pub fn orphan_pod_index_key(namespace: &str) -> String {
    format!("_ORPHAN_POD/{namespace}")
}

fn pod_controller_uid_keys(pod: &Pod) -> Vec<String> {
    match controller_of(&pod.metadata) {
        Some(owner) => vec![owner.uid.clone()],
        None => vec![orphan_pod_index_key(pod.metadata.namespace.as_deref().unwrap_or(""))],
    }
}

/// `controller.AddPodControllerUIDIndexer`: indexes `pods` by controller UID, once whichever
/// controller asks first.
pub fn add_pod_controller_uid_index(pods: &Informer<Pod>) {
    if !pods.store().has_index(POD_CONTROLLER_UID_INDEX) {
        pods.add_index(POD_CONTROLLER_UID_INDEX, pod_controller_uid_keys);
    }
}

/// `controller.FilterPodsByOwner` with orphans: the pods `owner` controls and the orphans of
/// its namespace, from the index [`add_pod_controller_uid_index`] added (not the namespace's
/// every pod, which made a ReplicaSet's sync cost grow with its namespace), as the informer's
/// summaries: no pod is unpacked for a sync that only counts them.
pub fn pods_controlled_by_or_orphaned(pods: &Informer<Pod>, owner: &ObjectMeta) -> Vec<Arc<PodSummary>> {
    let namespace = owner.namespace.as_deref().unwrap_or("");
    let store = pods.store();
    let mut found =
        owner.uid.as_deref().map_or_else(Vec::new, |uid| store.summaries_by_index(POD_CONTROLLER_UID_INDEX, uid));
    found.retain(|pod| pod.metadata.namespace.as_deref().unwrap_or("") == namespace);
    found.extend(store.summaries_by_index(POD_CONTROLLER_UID_INDEX, &orphan_pod_index_key(namespace)));
    found
}

/// `metav1.NewControllerRef`.
pub fn controller_ref<O: Resource + Metadata<Ty = ObjectMeta>>(owner: &O) -> OwnerReference {
    OwnerReference {
        api_version: O::API_VERSION.to_string(),
        kind: O::KIND.to_string(),
        name: owner.metadata().name.clone().unwrap_or_default(),
        uid: owner.metadata().uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// `resolveControllerRef`: the cached object of kind `K` that a controller reference of an object
/// in `namespace` names. None when the reference is of another kind, or names an object the
/// cache does not have or has under another UID (deleted and created again).
pub fn resolve_controller_ref<K>(informer: &Informer<K>, namespace: &str, reference: &OwnerReference) -> Option<Arc<K>>
where
    K: Resource + Metadata<Ty = ObjectMeta> + 'static,
{
    if reference.kind != K::KIND {
        return None;
    }
    let owner = informer.store().get_by_name(namespace, &reference.name)?;
    (owner.metadata().uid.as_deref() == Some(reference.uid.as_str())).then_some(owner)
}

/// client-go's `GetPodReplicaSets`, `GetPodControllers`, `GetPodDaemonSets`,
/// `GetHistoryDaemonSets`, `GetPodStatefulSets`, `GetPodJobs` and `GetDeploymentsForReplicaSet`:
/// the objects of `namespace` that may adopt an orphan with these labels, those whose selector
/// (`None`: not valid) is not empty and matches. An orphan without labels has none: upstream's
/// listers answer it with an error (`no ReplicaSets found for pod … because it has no labels`),
/// which their callers drop. The log line when more than one selects the orphan is each
/// caller's.
pub fn selecting_orphan<K>(
    informer: &Informer<K>,
    namespace: &str,
    labels: Option<&BTreeMap<String, String>>,
    selector: impl Fn(&K) -> Option<Selector>,
) -> Vec<Arc<K>>
where
    K: Metadata<Ty = ObjectMeta> + 'static,
{
    if labels.is_none_or(BTreeMap::is_empty) {
        return Vec::new();
    }
    let selects = |object: &Arc<K>| selector(object).is_some_and(|s| !s.is_empty() && s.matches(labels));
    informer.store().list_namespace(namespace).into_iter().filter(selects).collect()
}

/// What one claim needs to know of the controller.
pub struct ControllerRefManager<'a> {
    /// The controller's client, for the adoption and release patches.
    pub client: &'a Client,
    /// The controller's own metadata (uid, namespace, deletionTimestamp).
    pub owner: &'a ObjectMeta,
    /// Its controller reference, as adoption writes it.
    pub owner_ref: OwnerReference,
    /// The controller's selector: orphans that match it are adopted, owned objects that no longer match are released.
    pub selector: &'a Selector,
    /// `RecheckDeletionTimestamp`: called once, before the first adoption; its error is every
    /// adoption's.
    pub can_adopt: &'a dyn Fn() -> Result<(), RecheckError>,
    /// Finalizers an adoption adds (the Job controller's `batch.kubernetes.io/job-tracking`).
    pub finalizers: &'a [&'a str],
    /// Told the metadata each adoption or release patch returned (upstream's
    /// `RealPodControl.OnWrite`, which the pod claims of the stale-cache gated controllers use).
    pub on_write: Option<&'a dyn Fn(&ObjectMeta)>,
}

impl ControllerRefManager<'_> {
    /// `ClaimObject` over every object: those owned afterwards. Errors of single adoptions or
    /// releases are joined and returned after all objects were looked at.
    /// `objects` are of kind `K`, owned or shared (`Arc<K>`).
    pub fn claim<K, T>(&self, objects: Vec<T>) -> Result<Vec<T>, ClaimError>
    where
        K: Resource<Scope = NamespaceResourceScope> + Metadata<Ty = ObjectMeta> + DeserializeOwned + 'static,
        T: Borrow<K>,
    {
        self.claim_filtered::<K, T>(objects, |_| true)
    }

    /// [`claim`](Self::claim) with upstream's extra `filters`: an object the selector matches
    /// but `filter` refuses is treated as not matching (an owned one is released).
    pub fn claim_filtered<K, T>(
        &self,
        objects: Vec<T>,
        filter: impl Fn(&ObjectMeta) -> bool,
    ) -> Result<Vec<T>, ClaimError>
    where
        K: Resource<Scope = NamespaceResourceScope> + Metadata<Ty = ObjectMeta> + DeserializeOwned + 'static,
        T: Borrow<K>,
    {
        self.claim_by::<K, T>(objects, metadata_of::<K, T>, filter)
    }

    /// [`claim_filtered`](Self::claim_filtered) over anything that has the metadata of a `K`
    /// (`metadata_of`), such as the pod informer's summaries.
    pub fn claim_by<K, T>(
        &self,
        objects: Vec<T>,
        metadata_of: impl Fn(&T) -> &ObjectMeta,
        filter: impl Fn(&ObjectMeta) -> bool,
    ) -> Result<Vec<T>, ClaimError>
    where
        K: Resource<Scope = NamespaceResourceScope> + Metadata<Ty = ObjectMeta> + DeserializeOwned,
    {
        let can_adopt = OnceCell::new();
        let mut claimed = Vec::new();
        let mut errors = Vec::new();
        for object in objects {
            let meta = metadata_of(&object);
            let matches = self.selector.matches(meta.labels.as_ref()) && filter(meta);
            match self.claim_one::<K>(meta, matches, &can_adopt) {
                Ok(true) => claimed.push(object),
                Ok(false) => {}
                Err(e) => errors.push(e),
            }
        }
        Aggregate::from_errors(errors).map_err(ClaimError)?;
        Ok(claimed)
    }

    fn claim_one<K>(
        &self,
        meta: &ObjectMeta,
        matches: bool,
        can_adopt: &OnceCell<Result<(), Arc<RecheckError>>>,
    ) -> Result<bool, BoxError>
    where
        K: Resource<Scope = NamespaceResourceScope> + Metadata<Ty = ObjectMeta> + DeserializeOwned,
    {
        if let Some(owner) = controller_of(meta) {
            if Some(&owner.uid) != self.owner.uid.as_ref() {
                return Ok(false);
            }
            if matches {
                return Ok(true);
            }
            // Being deleted: no new adoptions or releases.
            if self.owner.deletion_timestamp.is_some() {
                return Ok(false);
            }
            return Ok(self.release::<K>(meta).map(|()| false)?);
        }
        if self.owner.deletion_timestamp.is_some() || !matches || meta.deletion_timestamp.is_some() {
            return Ok(false);
        }
        if meta.namespace != self.owner.namespace {
            return Ok(false);
        }
        // As upstream's `CanAdopt` (a `sync.Once`): one recheck, its error shared by every orphan.
        can_adopt.get_or_init(|| (self.can_adopt)().map_err(Arc::new)).clone()?;
        Ok(self.adopt::<K>(meta)?)
    }

    /// Adopts an orphan; one gone meanwhile is not claimed.
    fn adopt<K>(&self, meta: &ObjectMeta) -> Result<bool, Error>
    where
        K: Resource<Scope = NamespaceResourceScope> + Metadata<Ty = ObjectMeta> + DeserializeOwned,
    {
        let mut patch = json!({"metadata": {"ownerReferences": [self.owner_ref], "uid": meta.uid}});
        if !self.finalizers.is_empty() {
            patch["metadata"]["finalizers"] = json!(self.finalizers);
        }
        match self.patch::<K>(meta, patch) {
            Ok(()) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Patches the object and tells [`Self::on_write`] what the patch returned.
    fn patch<K>(&self, meta: &ObjectMeta, patch: Value) -> Result<(), Error>
    where
        K: Resource<Scope = NamespaceResourceScope> + Metadata<Ty = ObjectMeta> + DeserializeOwned,
    {
        let written = patch_object::<K>(self.client, meta, patch)?;
        if let Some(on_write) = self.on_write {
            on_write(written.metadata());
        }
        Ok(())
    }

    /// Removes our owner reference; an object gone or changed meanwhile is fine.
    fn release<K>(&self, meta: &ObjectMeta) -> Result<(), Error>
    where
        K: Resource<Scope = NamespaceResourceScope> + Metadata<Ty = ObjectMeta> + DeserializeOwned,
    {
        let delete = json!({"$patch": "delete", "uid": self.owner.uid});
        let patch = json!({"metadata": {"ownerReferences": [delete], "uid": meta.uid}});
        match self.patch::<K>(meta, patch) {
            Err(e) if !e.is_not_found() && !e.is_invalid() => Err(e),
            _ => Ok(()),
        }
    }
}

/// Why a claim did not finish: the errors of single adoptions and releases (API errors, or the
/// owner's [`RecheckError`]), every one kept, so a caller can still find an API error's kind
/// inside (`client::Error::find`). Upstream aggregates them; the text joins them with `; `.
#[derive(Debug)]
pub struct ClaimError(Aggregate);

impl ClaimError {
    /// The errors, in the order the objects were looked at; never empty.
    pub fn errors(&self) -> &[BoxError] {
        self.0.errors()
    }
}

impl fmt::Display for ClaimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.errors().iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

/// The aggregate is the source, so `find_in_chain` looks into every member.
impl std::error::Error for ClaimError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// Why [`recheck_deletion_timestamp`] refuses adoptions.
#[derive(Debug, thiserror::Error)]
pub enum RecheckError {
    /// The fresh read of the owner failed.
    #[error("{0}")]
    Get(#[from] Error),
    /// The owner was deleted and another made under its name.
    #[error("original {kind}{namespace}/{name} is gone: got uid {got}, wanted {wanted}")]
    Replaced {
        /// The owner's kind and a space, or nothing (see [`recheck_deletion_timestamp`]).
        kind: String,
        /// The owner's namespace.
        namespace: String,
        /// The owner's name.
        name: String,
        /// The UID read now.
        got: String,
        /// The UID of the owner that claims.
        wanted: String,
    },
    /// The owner is being deleted.
    #[error("{namespace}/{name} has just been deleted at {}", .at.0)]
    Deleted {
        /// The owner's namespace.
        namespace: String,
        /// The owner's name.
        name: String,
        /// Its `deletionTimestamp`.
        at: Time,
    },
}

/// `RecheckDeletionTimestamp`: before adopting, a fresh read must show the same, live owner.
/// `kind` names it in the error as upstream's controller does (`"Job "`, `"Deployment "`; the
/// ReplicaSet controller names none).
pub fn recheck_deletion_timestamp<K>(client: &Client, owner: &ObjectMeta, kind: &str) -> Result<(), RecheckError>
where
    K: Resource<Scope = NamespaceResourceScope> + Metadata<Ty = ObjectMeta> + DeserializeOwned,
{
    let (namespace, name) = (owner.namespace.as_deref().unwrap_or(""), owner.name.as_deref().unwrap_or(""));
    let fresh = Api::<K>::namespaced(client, namespace).get(name)?;
    if fresh.metadata().uid != owner.uid {
        return Err(RecheckError::Replaced {
            kind: kind.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            got: fresh.metadata().uid.clone().unwrap_or_default(),
            wanted: owner.uid.clone().unwrap_or_default(),
        });
    }
    if let Some(at) = &fresh.metadata().deletion_timestamp {
        return Err(RecheckError::Deleted { namespace: namespace.to_string(), name: name.to_string(), at: at.clone() });
    }
    Ok(())
}

/// The strategic merge patch of the object with this metadata; what the server returned.
fn patch_object<K>(client: &Client, meta: &ObjectMeta, patch: Value) -> Result<K, Error>
where
    K: Resource<Scope = NamespaceResourceScope> + Metadata<Ty = ObjectMeta> + DeserializeOwned,
{
    let namespace = meta.namespace.as_deref().unwrap_or("");
    let name = meta.name.as_deref().unwrap_or("");
    Api::<K>::namespaced(client, namespace).patch(name, &Patch::Strategic(patch), &PostParams::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ApiError;
    use crate::runtime::controller::SyncError;
    use crate::runtime::informer::SharedInformerFactory;
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use k8s_openapi::api::core::v1::ConfigMap;
    use std::time::Duration;

    fn config_map(name: &str, owner_uid: Option<&str>) -> ConfigMap {
        let owners = owner_uid.map(|uid| {
            json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
            "uid": uid, "controller": true}])
        });
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns", "ownerReferences": owners}}))
            .unwrap()
    }

    #[test]
    fn a_claim_keeps_every_error_and_rechecks_the_owner_once() {
        let client = crate::client::unreachable_client();
        let owner = ObjectMeta {
            name: Some("web".into()),
            namespace: Some("ns".into()),
            uid: Some("u-1".into()),
            ..ObjectMeta::default()
        };
        let rechecks = std::cell::Cell::new(0);
        let can_adopt = || {
            rechecks.set(rechecks.get() + 1);
            Err(RecheckError::Get(Error::from(ApiError::from_response(409, b"", None))))
        };
        let selector = Selector::everything();
        let manager = ControllerRefManager {
            client: &client,
            owner: &owner,
            owner_ref: OwnerReference::default(),
            selector: &selector,
            can_adopt: &can_adopt,
            finalizers: &[],
            on_write: None,
        };
        // Two orphans to adopt, and one owned object the filter no longer wants (its release
        // fails: nobody listens).
        let objects = vec![config_map("a", None), config_map("b", None), config_map("c", Some("u-1"))];
        let error = manager
            .claim_filtered::<ConfigMap, _>(objects, |meta| meta.name.as_deref() != Some("c"))
            .expect_err("nothing can be adopted or released");
        assert_eq!(rechecks.get(), 1, "one recheck for every adoption, as upstream's sync.Once");
        assert_eq!(error.errors().len(), 3);
        let recheck = "the server reported a conflict (409 Conflict): unknown";
        assert!(error.to_string().starts_with(&format!("{recheck}; {recheck}; transport error: ")), "{error}");
        // The recheck's conflict reaches the queue as one.
        assert!(Error::find(&error).is_some_and(Error::is_conflict));
        assert!(matches!(SyncError::of(error), SyncError::Conflict(_)));
    }

    #[test]
    fn recheck_errors_read_as_upstream_s() {
        let replaced = RecheckError::Replaced {
            kind: "Job ".into(),
            namespace: "ns".into(),
            name: "pi".into(),
            got: "u-2".into(),
            wanted: "u-1".into(),
        };
        assert_eq!(replaced.to_string(), "original Job ns/pi is gone: got uid u-2, wanted u-1");
        let at: Time = serde_json::from_value(json!("2026-01-02T03:04:05Z")).unwrap();
        let deleted = RecheckError::Deleted { namespace: "ns".into(), name: "pi".into(), at };
        assert_eq!(deleted.to_string(), "ns/pi has just been deleted at 2026-01-02T03:04:05Z");
    }

    fn replica_set(name: &str, uid: &str, selector: Value) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": uid},
            "spec": {"selector": selector, "template": {}},
        }))
        .unwrap()
    }

    /// An informer of ReplicaSets holding `sets`.
    fn replica_sets(sets: impl IntoIterator<Item = ReplicaSet>) -> Arc<Informer<ReplicaSet>> {
        let factory = SharedInformerFactory::new(crate::client::unreachable_client(), Duration::ZERO);
        let informer = factory.informer::<ReplicaSet>();
        sets.into_iter().for_each(|set| informer.apply_for_test(set));
        informer
    }

    #[test]
    fn a_controller_ref_resolves_to_the_cached_object_of_its_kind_name_and_uid() {
        let informer = replica_sets([replica_set("web", "u-1", json!({}))]);
        let reference = |kind: &str, name: &str, uid: &str| OwnerReference {
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            ..OwnerReference::default()
        };
        let found = resolve_controller_ref(&informer, "ns", &reference("ReplicaSet", "web", "u-1"));
        assert_eq!(found.and_then(|rs| rs.metadata.uid.clone()).as_deref(), Some("u-1"));
        assert!(resolve_controller_ref(&informer, "ns", &reference("ReplicaSet", "web", "u-2")).is_none(), "replaced");
        assert!(resolve_controller_ref(&informer, "ns", &reference("Deployment", "web", "u-1")).is_none());
        assert!(resolve_controller_ref(&informer, "other", &reference("ReplicaSet", "web", "u-1")).is_none());
        assert!(resolve_controller_ref(&informer, "ns", &reference("ReplicaSet", "api", "u-1")).is_none());
    }

    #[test]
    fn an_orphan_is_selected_by_the_non_empty_selectors_that_match_it_and_without_labels_by_none() {
        let informer = replica_sets([
            replica_set("web", "u-1", json!({"matchLabels": {"app": "web"}})),
            replica_set(
                "not-db",
                "u-2",
                json!({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}),
            ),
            replica_set("everything", "u-3", json!({})),
            replica_set("invalid", "u-4", json!({"matchExpressions": [{"key": "app", "operator": "Near"}]})),
        ]);
        let selector = |rs: &ReplicaSet| Selector::from_label_selector(&rs.spec.as_ref()?.selector).ok();
        let names = |labels: Option<&BTreeMap<String, String>>| {
            let mut names: Vec<String> = selecting_orphan(&informer, "ns", labels, selector)
                .iter()
                .filter_map(|rs| rs.metadata.name.clone())
                .collect();
            names.sort();
            names
        };
        let web = BTreeMap::from([("app".to_string(), "web".to_string())]);
        assert_eq!(names(Some(&web)), ["not-db", "web"], "neither the empty nor the invalid selector");
        assert!(names(None).is_empty(), "no labels: selected by none, though `app notin (db)` matches them");
        assert!(names(Some(&BTreeMap::new())).is_empty());
        assert!(selecting_orphan(&informer, "other", Some(&web), selector).is_empty(), "another namespace");
    }

    #[test]
    fn controller_ref_names_the_owner_and_blocks_deletion() {
        let owner: Deployment =
            serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "ns", "uid": "u-1"}})).unwrap();
        let reference = controller_ref(&owner);
        assert_eq!(
            serde_json::to_value(&reference).unwrap(),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "u-1",
                "controller": true, "blockOwnerDeletion": true})
        );
        let mut meta = ObjectMeta::default();
        assert!(controller_of(&meta).is_none());
        let other = OwnerReference { controller: None, ..reference.clone() };
        meta.owner_references = Some(vec![other, reference.clone()]);
        assert_eq!(controller_of(&meta), Some(&reference));
    }
}
