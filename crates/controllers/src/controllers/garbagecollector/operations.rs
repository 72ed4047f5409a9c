//! The collector's API calls, after upstream's `operations.go` and `patch.go`: every object is
//! read, patched and deleted through the metadata client, its resource found by a REST mapping
//! over discovery.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use parking_lot::RwLock;
use serde_json::{Value, json};

use super::graph::{Node, ObjectReference};
use crate::apimachinery::errors::Aggregate;
use crate::client::discovery::{self, ApiResource, Discovery};
use crate::client::metadata::{MetadataApi, PartialObjectMetadata};
use crate::client::{Client, DeleteParams, Error, Patch, PostParams, Preconditions, PropagationPolicy};

/// A REST mapping is looked up again at most this often when a kind is unknown (the
/// deferred discovery mapper's reset on a miss).
const MAPPER_REFRESH_ON_MISS: Duration = Duration::from_secs(5);
/// `retry.DefaultBackoff`: 4 steps of 10 ms × 5, jitter 0.1.
const RETRY_STEPS: u32 = 4;
const RETRY_FIRST: Duration = Duration::from_millis(10);

/// Why an attempt did not complete.
#[derive(Debug, thiserror::Error)]
pub enum GcError {
    /// A virtual delete event was produced; the graph builder handles it (`enqueuedVirtualDeleteEventErr`).
    #[error("enqueued virtual delete event")]
    VirtualDeleteEnqueued,
    /// A cluster-scoped object names a namespaced owner: retrying cannot help.
    #[error("cluster-scoped objects cannot refer to namespaced owners")]
    NamespacedOwnerOfClusterScoped,
    /// The kind of a reference has no REST mapping (`restMappingError`).
    #[error(
        "unable to get REST mapping for {0}.  If {0} is an invalid resource, then you should manually remove ownerReferences that refer to {0} objects."
    )]
    RestMapping(
        /// `<apiVersion>/<kind>`.
        String,
    ),
    /// An API error.
    #[error("{0}")]
    Api(#[from] Error),
    /// The owner whose finalizer is to go could not be read.
    #[error("cannot finalize owner {owner}, because cannot get it: {source}. The garbage collector will retry later")]
    FinalizeOwner {
        /// The owner.
        owner: Box<ObjectReference>,
        /// Why.
        source: Box<GcError>,
    },
    /// Every try to remove the finalizer met a conflict.
    #[error("updateMaxRetries({RETRY_STEPS}) has reached. The garbage collector will retry later for owner {owner}")]
    UpdateMaxRetries {
        /// The owner.
        owner: Box<ObjectReference>,
    },
    /// An attempt to delete an item failed.
    #[error("error syncing item {item}: {source}")]
    SyncItem {
        /// The item.
        item: Box<ObjectReference>,
        /// Why.
        source: Box<GcError>,
    },
    /// The item is still virtual: requeued until an informer observes it.
    #[error("item {item} hasn't been observed via informer yet")]
    NotObserved {
        /// The item.
        item: Box<ObjectReference>,
    },
    /// Removing the owner from one dependent's references failed.
    #[error("orphaning {dependent} failed, {source}")]
    OrphanDependent {
        /// The dependent.
        dependent: Box<ObjectReference>,
        /// Why.
        source: Box<GcError>,
    },
    /// Some dependents could not be orphaned.
    #[error(
        "orphanDependents for {owner} failed with failed to orphan dependents of owner {owner}, got errors: {errors}"
    )]
    OrphanDependents {
        /// The owner.
        owner: Box<ObjectReference>,
        /// Each dependent's [`GcError::OrphanDependent`].
        #[source]
        errors: Aggregate,
    },
    /// The owner's `orphan` finalizer could not be removed.
    #[error("removeOrphanFinalizer for {owner} failed with {source}")]
    RemoveOrphanFinalizer {
        /// The owner.
        owner: Box<ObjectReference>,
        /// Why.
        source: Box<GcError>,
    },
}

impl GcError {
    /// Whether the API said NotFound.
    pub fn is_not_found(&self) -> bool {
        matches!(self, GcError::Api(e) if e.is_not_found())
    }
}

/// Kinds to resources, from the last discovery (upstream's reset-able REST mapper).
pub struct RestMapper {
    client: Client,
    state: RwLock<(Arc<Discovery>, Instant)>,
}

impl RestMapper {
    /// A mapper based on `discovery`; `client` reads discovery again on a miss.
    pub fn new(client: Client, discovery: Arc<Discovery>) -> RestMapper {
        RestMapper { client, state: RwLock::new((discovery, Instant::now())) }
    }

    /// Replaces the discovery the mapping is based on.
    pub fn reset(&self, discovery: Arc<Discovery>) {
        *self.state.write() = (discovery, Instant::now());
    }

    /// `apiResource`: the resource of `kind` objects in `api_version`. On a miss, discovery
    /// is read again (at most every few seconds) in case the kind is new.
    pub fn resource(&self, api_version: &str, kind: &str) -> Result<ApiResource, GcError> {
        if let Some(found) = self.lookup(api_version, kind) {
            return Ok(found);
        }
        let stale = self.state.read().1.elapsed() >= MAPPER_REFRESH_ON_MISS;
        if stale && let Ok(fresh) = discovery::server_resources(&self.client) {
            self.reset(Arc::new(fresh));
            if let Some(found) = self.lookup(api_version, kind) {
                return Ok(found);
            }
        }
        Err(GcError::RestMapping(format!("{api_version}/{kind}")))
    }

    fn lookup(&self, api_version: &str, kind: &str) -> Option<ApiResource> {
        self.state.read().0.resource_for(api_version, kind).cloned()
    }
}

/// The collector's view of the API.
pub struct Operations {
    /// The client objects are read and written with.
    pub client: Client,
    /// Kinds to resources.
    pub mapper: RestMapper,
}

impl Operations {
    /// A metadata client for the item's resource, in its namespace when the resource is namespaced.
    fn api_for(&self, item: &ObjectReference) -> Result<MetadataApi, GcError> {
        let resource = self.mapper.resource(&item.api_version, &item.kind)?;
        Ok(MetadataApi::new(&self.client, &resource, Some(&item.namespace)))
    }

    /// `getObject`. A namespaced resource without a namespace (a virtual owner named from a
    /// cluster-scoped object) cannot exist: NotFound, as the API server answers that path.
    pub fn get_object(&self, item: &ObjectReference) -> Result<PartialObjectMetadata, GcError> {
        let resource = self.mapper.resource(&item.api_version, &item.kind)?;
        if resource.namespaced && item.namespace.is_empty() {
            return Err(GcError::Api(not_found(&resource, &item.name)));
        }
        Ok(MetadataApi::new(&self.client, &resource, Some(&item.namespace)).get(&item.name)?)
    }

    /// Reads an owner named by `reference` from a dependent in `namespace`.
    pub fn get_owner(
        &self,
        resource: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<PartialObjectMetadata, Error> {
        MetadataApi::new(&self.client, resource, Some(namespace)).get(name)
    }

    /// `deleteObject` (v1.36): deletes with the uid and, when known, the resourceVersion the
    /// decision was taken at as preconditions, so that a dependent whose ownerReferences
    /// changed meanwhile is not deleted. On a conflict the object is read again: gone, the
    /// read's NotFound is returned (the caller enqueues a virtual delete event); changed in
    /// something else than its ownerReferences, it is deleted with the uid precondition only;
    /// otherwise the conflict is returned, and the item retried.
    pub fn delete_object(
        &self,
        item: &ObjectReference,
        resource_version: &str,
        owners_at_resource_version: &[OwnerReference],
        policy: PropagationPolicy,
    ) -> Result<(), GcError> {
        let api = self.api_for(item)?;
        let version = Some(resource_version.to_string()).filter(|v| !v.is_empty());
        let params = DeleteParams {
            propagation_policy: Some(policy),
            preconditions: Some(Preconditions { uid: Some(item.uid.clone()), resource_version: version.clone() }),
            ..DeleteParams::default()
        };
        match api.delete(&item.name, &params) {
            Ok(_) => Ok(()),
            Err(e) if e.is_conflict() && version.is_some() => {
                let live = api.get(&item.name);
                match after_conflict(&live, item, resource_version, owners_at_resource_version) {
                    AfterConflict::Gone => Err(live.err().map_or(e, |gone| gone).into()),
                    AfterConflict::RetryWithUidOnly => self.delete_object(item, "", &[], policy),
                    AfterConflict::Conflict => Err(e.into()),
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// `patch`: a strategic merge patch, or when the resource does not take one (415, custom
    /// resources) the JSON merge patch `json_merge` builds from the live object.
    pub fn patch(
        &self,
        item: &ObjectReference,
        strategic: Value,
        json_merge: impl FnOnce(&PartialObjectMetadata) -> Value,
    ) -> Result<PartialObjectMetadata, GcError> {
        let api = self.api_for(item)?;
        match api.patch(&item.name, &Patch::Strategic(strategic), &PostParams::default()) {
            Ok(patched) => Ok(patched),
            Err(Error::Api(e)) if e.code == 415 => {
                let live = api.get(&item.name)?;
                Ok(api.patch(&item.name, &Patch::Merge(json_merge(&live)), &PostParams::default())?)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// `removeFinalizer`: drops `finalizer` from the owner with a merge patch at its
    /// resourceVersion, retrying conflicts as `retry.RetryOnConflict(DefaultBackoff)`.
    pub fn remove_finalizer(&self, owner: &Node, finalizer: &str) -> Result<(), GcError> {
        let mut delay = RETRY_FIRST;
        for step in 0..RETRY_STEPS {
            let object = match self.get_object(&owner.identity) {
                Ok(object) => object,
                Err(e) if e.is_not_found() => return Ok(()),
                Err(e) => {
                    return Err(GcError::FinalizeOwner {
                        owner: Box::new(owner.identity.clone()),
                        source: Box::new(e),
                    });
                }
            };
            let finalizers = object.metadata.finalizers.clone().unwrap_or_default();
            if !finalizers.iter().any(|f| f == finalizer) {
                log::trace!("the {finalizer} finalizer is already removed from object {}", owner.identity);
                return Ok(());
            }
            let patch = finalizers_patch(
                object.metadata.resource_version.as_deref().unwrap_or_default(),
                &finalizers,
                finalizer,
            );
            let api = self.api_for(&owner.identity)?;
            match api.patch(&owner.identity.name, &Patch::Merge(patch), &PostParams::default()) {
                Ok(_) => return Ok(()),
                Err(e) if e.is_conflict() && step + 1 < RETRY_STEPS => {
                    std::thread::sleep(delay.mul_f64(1.0 + 0.1 * crate::random::unit()));
                    delay *= 5;
                }
                Err(e) if e.is_conflict() => break,
                Err(e) => return Err(e.into()),
            }
        }
        Err(GcError::UpdateMaxRetries { owner: Box::new(owner.identity.clone()) })
    }
}

/// A NotFound error for an object that cannot exist.
fn not_found(resource: &ApiResource, name: &str) -> Error {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
        "message": format!("{} \"{name}\" not found", resource.group_resource()),
    });
    Error::Api(Box::new(crate::client::ApiError::from_response(404, body.to_string().as_bytes(), None)))
}

/// `objectForFinalizersPatch`: the finalizers without `removed`, at `resource_version`
/// (`null` when none is left).
pub fn finalizers_patch(resource_version: &str, finalizers: &[String], removed: &str) -> Value {
    let kept: Vec<&String> = finalizers.iter().filter(|f| *f != removed).collect();
    let kept = if kept.is_empty() { Value::Null } else { json!(kept) };
    json!({"metadata": {"resourceVersion": resource_version, "finalizers": kept}})
}

/// `GenerateDeleteOwnerRefStrategicMergeBytes`: removes the references to `owner_uids`, with
/// the dependent's uid as a precondition.
pub fn delete_owner_refs_strategic_patch(dependent_uid: &str, owner_uids: &[String]) -> Value {
    let references: Vec<Value> = owner_uids.iter().map(|uid| json!({"$patch": "delete", "uid": uid})).collect();
    json!({"metadata": {"uid": dependent_uid, "ownerReferences": references}})
}

/// `deleteOwnerRefJSONMergePatch`: the live object's references without `owner_uids`.
pub fn delete_owner_refs_merge_patch(live: &PartialObjectMetadata, owner_uids: &[String]) -> Value {
    let kept: Vec<&OwnerReference> =
        live.metadata.owner_references.iter().flatten().filter(|r| !owner_uids.contains(&r.uid)).collect();
    let kept = if kept.is_empty() { Value::Null } else { json!(kept) };
    json!({"metadata": {"resourceVersion": live.metadata.resource_version, "ownerReferences": kept}})
}

/// `unblockOwnerReferencesStrategicMergePatch`: the node's blocking references set to
/// `blockOwnerDeletion: false`, with its uid as a precondition.
pub fn unblock_owner_refs_strategic_patch(node: &Node) -> Value {
    let unblocked: Vec<OwnerReference> = node
        .owners
        .iter()
        .filter(|r| r.block_owner_deletion == Some(true))
        .map(|r| OwnerReference { block_owner_deletion: Some(false), ..r.clone() })
        .collect();
    json!({"metadata": {"uid": node.identity.uid, "ownerReferences": unblocked}})
}

/// `unblockOwnerReferencesJSONMergePatch`: every live reference with blocking turned off.
pub fn unblock_owner_refs_merge_patch(live: &PartialObjectMetadata) -> Value {
    let references: Vec<OwnerReference> = live
        .metadata
        .owner_references
        .iter()
        .flatten()
        .map(|r| match r.block_owner_deletion {
            Some(true) => OwnerReference { block_owner_deletion: Some(false), ..r.clone() },
            _ => r.clone(),
        })
        .collect();
    json!({"metadata": {"resourceVersion": live.metadata.resource_version, "ownerReferences": references}})
}

/// What `deleteObject` does after its DELETE with a resourceVersion precondition met a conflict,
/// from the object read again.
#[derive(Debug, PartialEq, Eq)]
pub enum AfterConflict {
    /// The object is gone (the read said NotFound).
    Gone,
    /// Same object, a newer resourceVersion, the same ownerReferences: a change that does not
    /// concern the collector, which must not starve it.
    RetryWithUidOnly,
    /// Anything else (a read error, another object of that name, other ownerReferences).
    Conflict,
}

/// The decision of `deleteObject` after a conflict, from `live` (the read again).
pub fn after_conflict(
    live: &Result<PartialObjectMetadata, Error>,
    item: &ObjectReference,
    resource_version: &str,
    owners_at_resource_version: &[OwnerReference],
) -> AfterConflict {
    let live = match live {
        Err(e) if e.is_not_found() => return AfterConflict::Gone,
        Err(_) => return AfterConflict::Conflict,
        Ok(live) => &live.metadata,
    };
    let same_owners = live.owner_references.as_deref().unwrap_or_default() == owners_at_resource_version;
    if live.uid.as_deref() == Some(item.uid.as_str())
        && live.resource_version.as_deref() != Some(resource_version)
        && same_owners
    {
        return AfterConflict::RetryWithUidOnly;
    }
    AfterConflict::Conflict
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(uid: &str) -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: uid.into(),
            uid: uid.into(),
            block_owner_deletion: Some(true),
            controller: Some(true),
        }
    }

    fn live(uid: &str, version: &str, owners: Vec<OwnerReference>) -> Result<PartialObjectMetadata, Error> {
        let mut object = PartialObjectMetadata::default();
        object.metadata.uid = Some(uid.into());
        object.metadata.resource_version = Some(version.into());
        object.metadata.owner_references = Some(owners).filter(|o| !o.is_empty());
        Ok(object)
    }

    #[test]
    fn a_conflict_is_retried_without_the_version_only_when_the_owners_did_not_change() {
        let item = ObjectReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: "p".into(),
            uid: "u1".into(),
            namespace: "ns".into(),
        };
        let owners = [reference("rs1")];
        let decide = |live| after_conflict(&live, &item, "10", &owners);
        assert_eq!(decide(live("u1", "11", vec![reference("rs1")])), AfterConflict::RetryWithUidOnly);
        assert_eq!(decide(live("u1", "11", vec![reference("rs2")])), AfterConflict::Conflict, "owners changed");
        assert_eq!(decide(live("u1", "11", vec![])), AfterConflict::Conflict, "orphaned meanwhile");
        let mut unblocked = reference("rs1");
        unblocked.block_owner_deletion = Some(false);
        assert_eq!(decide(live("u1", "11", vec![unblocked])), AfterConflict::Conflict, "a field of a reference");
        assert_eq!(decide(live("u2", "11", vec![reference("rs1")])), AfterConflict::Conflict, "another object");
        assert_eq!(decide(live("u1", "10", vec![reference("rs1")])), AfterConflict::Conflict, "same version");
        let answer = |code: u16| Err(Error::Api(Box::new(crate::client::ApiError::from_response(code, b"", None))));
        assert_eq!(decide(answer(404)), AfterConflict::Gone);
        assert_eq!(decide(answer(500)), AfterConflict::Conflict, "the read failed: the conflict stands");
    }

    #[test]
    fn patches_have_upstream_shapes() {
        assert_eq!(
            delete_owner_refs_strategic_patch("d1", &["o1".into()]),
            json!({"metadata": {"uid": "d1", "ownerReferences": [{"$patch": "delete", "uid": "o1"}]}})
        );
        assert_eq!(
            finalizers_patch("7", &["orphan".into(), "x/y".into()], "orphan"),
            json!({"metadata": {"resourceVersion": "7", "finalizers": ["x/y"]}})
        );
        assert_eq!(
            finalizers_patch("7", &["orphan".into()], "orphan"),
            json!({"metadata": {"resourceVersion": "7", "finalizers": null}})
        );
        let owner = |uid: &str, block: Option<bool>| OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: uid.into(),
            uid: uid.into(),
            block_owner_deletion: block,
            controller: None,
        };
        let mut live = PartialObjectMetadata::default();
        live.metadata.resource_version = Some("9".into());
        live.metadata.owner_references = Some(vec![owner("a", Some(true)), owner("b", None)]);
        let merged = delete_owner_refs_merge_patch(&live, &["a".into()]);
        assert_eq!(merged["metadata"]["ownerReferences"].as_array().map(Vec::len), Some(1));
        assert_eq!(merged["metadata"]["ownerReferences"][0]["uid"], "b");
        let unblocked = unblock_owner_refs_merge_patch(&live);
        assert_eq!(unblocked["metadata"]["ownerReferences"][0]["blockOwnerDeletion"], false);
        assert!(unblocked["metadata"]["ownerReferences"][1].get("blockOwnerDeletion").is_none());
    }
}
