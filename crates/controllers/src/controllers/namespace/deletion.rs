//! Deleting everything in a namespace, after upstream v1.33's
//! `pkg/controller/namespace/deletion/namespaced_resources_deleter.go`
//! (`namespacedResourcesDeleter`): every namespaced resource discovery reports with the
//! `delete` verb is emptied (delete-collection where served, else list and delete each item,
//! in the background; pods first and alone while any remain, with the `OrderedNamespaceDeletion`
//! gate, beta and on in v1.33), what remains is counted by resource and by finalizer into the
//! namespace's conditions, and once nothing remains the `kubernetes` finalizer is removed
//! through `namespaces/<name>/finalize`.

use std::collections::{BTreeMap, HashSet};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Namespace, NamespaceSpec, Pod};
use parking_lot::Mutex;
use serde::Deserialize;

use super::conditions::{ConditionUpdater, RemainingContent};
use crate::apimachinery::errors::Aggregate;
use crate::client::discovery::{self, ApiResource};
use crate::client::metadata::MetadataApi;
use crate::client::{self, Api, Client, DeleteParams, ListParams, PostParams, PropagationPolicy};

/// `finalizerEstimateSeconds`: how long to wait for objects held by finalizers.
pub const FINALIZER_ESTIMATE_SECONDS: i64 = 15;
/// `v1.FinalizerKubernetes`, the token this controller removes.
pub const FINALIZER_KUBERNETES: &str = "kubernetes";

/// Why a pass of [`Deleter::delete`] failed. API errors are kept whole, so that a conflict or
/// a server's `Retry-After` reaches the queue with its kind; each reads as upstream's error
/// does (the content errors are also summarised in the namespace's conditions).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the API server failed: Go's `err.Error()`, the server's message alone.
    #[error("{}", .0.message())]
    Api(#[from] client::Error),
    /// The namespace was replaced by another of the same name while its update was retried
    /// (read as it did when it was a refused request of the client).
    #[error("invalid request: namespace uid has changed across retries")]
    UidChanged,
    /// Discovery failed, for some group versions or as a whole.
    #[error("{0}")]
    Discovery(#[from] DiscoveryError),
    /// A deletable resource's group version does not parse.
    #[error("unexpected GroupVersion string: {group_version}")]
    GroupVersion {
        /// `group/version` as discovery gave it.
        group_version: String,
    },
    /// Objects with neither a grace period nor a finalizer are still there after the deletes.
    #[error("unexpected items still remain in namespace: {namespace} for gvr: {gvr}")]
    ItemsRemain {
        /// The namespace.
        namespace: String,
        /// `GroupVersionResource.String()`.
        gvr: String,
    },
    /// Emptying the pods, which go first, failed.
    #[error("failed to delete pods for namespace: {namespace}, err: {source}")]
    DeletePods {
        /// The namespace.
        namespace: String,
        /// Why.
        source: Box<Error>,
    },
    /// Several resources failed (`utilerrors.NewAggregate`): `[a, b]`.
    #[error("{0}")]
    Aggregate(#[from] Aggregate),
}

/// What [`Deleter::delete`] leaves to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing (finalized, gone, or not being deleted).
    Done,
    /// `ResourcesRemainingError`: content remains; look again in about this many seconds.
    ResourcesRemaining(i64),
}

/// `operation`: the verbs the op cache remembers as unsupported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Operation {
    List,
    DeleteCollection,
}

/// `operationNotSupportedCache`: (operation, group/version/resource) known to be unsupported.
#[derive(Debug, Default)]
struct OperationCache {
    unsupported: Mutex<HashSet<(Operation, String)>>,
}

impl OperationCache {
    fn key(resource: &ApiResource) -> String {
        format!("{}/{}", resource.api_version(), resource.plural)
    }

    fn is_supported(&self, op: Operation, resource: &ApiResource) -> bool {
        !self.unsupported.lock().contains(&(op, Self::key(resource)))
    }

    fn set_not_supported(&self, op: Operation, resource: &ApiResource) {
        self.unsupported.lock().insert((op, Self::key(resource)));
    }

    /// `initOpCache`: what discovery says a resource does not serve.
    fn learn_from_discovery(&self, resources: &[ApiResource]) {
        for resource in resources {
            if !resource.supports_all(&["list"]) {
                self.set_not_supported(Operation::List, resource);
            }
            if !resource.supports_all(&["deletecollection"]) {
                self.set_not_supported(Operation::DeleteCollection, resource);
            }
        }
    }
}

/// A failed discovery (`discoverResourcesFn`'s error): of some group versions
/// (`ErrGroupDiscoveryFailed`), or of the whole API.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// Discovery failed as a whole: the server's message alone.
    #[error("{}", .0.message())]
    Whole(#[source] client::Error),
    /// `ErrGroupDiscoveryFailed`: these group versions failed; its text lists them sorted.
    #[error("unable to retrieve the complete list of server APIs: {}", group_failures(.0))]
    Groups(BTreeMap<String, client::Error>),
}

impl DiscoveryError {
    /// How many group versions failed; `None` when discovery failed as a whole.
    pub fn failed_groups(&self) -> Option<usize> {
        match self {
            DiscoveryError::Whole(_) => None,
            DiscoveryError::Groups(failed) => Some(failed.len()),
        }
    }
}

/// `ErrGroupDiscoveryFailed.Error()`'s list: `group/version: message`, sorted, comma-separated.
fn group_failures(failed: &BTreeMap<String, client::Error>) -> String {
    let groups: Vec<String> = failed.iter().map(|(gv, e)| format!("{gv}: {}", e.message())).collect();
    groups.join(", ")
}

/// `ServerPreferredNamespacedResources`: the preferred version of every namespaced resource,
/// with the discovery error if some (or all) of the API could not be read.
pub fn preferred_namespaced_resources(client: &Client) -> (Vec<ApiResource>, Option<DiscoveryError>) {
    match discovery::server_resources(client) {
        Ok(found) => {
            let resources = found.preferred().into_iter().filter(|r| r.namespaced).collect();
            (resources, group_discovery_error(found.failed))
        }
        Err(e) => (Vec::new(), Some(DiscoveryError::Whole(e))),
    }
}

/// `ErrGroupDiscoveryFailed`: the failing group versions, if any.
fn group_discovery_error(failed: BTreeMap<String, client::Error>) -> Option<DiscoveryError> {
    (!failed.is_empty()).then_some(DiscoveryError::Groups(failed))
}

/// `discovery.GroupVersionResources` after `FilteredBy(SupportsAllVerbs{"delete"})`: the
/// deletable resources, or the first group version that does not parse (then none at all, as
/// upstream returns no map with the error).
fn deletable_resources(resources: &[ApiResource]) -> Result<Vec<ApiResource>, Error> {
    let deletable: Vec<ApiResource> = resources.iter().filter(|r| r.supports_all(&["delete"])).cloned().collect();
    match deletable.iter().find(|r| !parses_as_group_version(r)) {
        Some(bad) => Err(Error::GroupVersion { group_version: bad.api_version() }),
        None => Ok(deletable),
    }
}

/// `schema.ParseGroupVersion`: `version` or `group/version`, nothing more.
fn parses_as_group_version(resource: &ApiResource) -> bool {
    !resource.version.is_empty() && !resource.version.contains('/') && !resource.group.contains('/')
}

/// `GroupVersionResource.String()`: `group/version, Resource=plural` (`/v1, …` for the core group).
fn gvr_string(resource: &ApiResource) -> String {
    format!("{}/{}, Resource={}", resource.group, resource.version, resource.plural)
}

/// `gvrDeletionMetadata`: what one resource left behind.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct ResourceDeletion {
    /// Seconds to wait; zero means no estimate, not that everything is gone.
    estimate: i64,
    remaining: usize,
    by_finalizer: BTreeMap<String, usize>,
}

/// `namespacedResourcesDeleter`.
pub struct Deleter {
    /// The controller's name, for its logs.
    name: &'static str,
    client: Client,
    op_cache: OperationCache,
    /// The `OrderedNamespaceDeletion` feature gate: pods go before everything else.
    pods_first: bool,
}

impl Deleter {
    /// `NewNamespacedResourcesDeleter`, but its request, the discovery that pre-fills the op
    /// cache, is [`Deleter::init_op_cache`]'s: the client acts as the namespace controller,
    /// which only the leader may do.
    pub fn new(name: &'static str, client: Client, pods_first: bool) -> Deleter {
        Deleter { name, client, op_cache: OperationCache::default(), pods_first }
    }

    /// `initOpCache`: pre-fills the op cache from discovery (a failure is logged, as upstream's).
    pub fn init_op_cache(&self) {
        let (resources, error) = preferred_namespaced_resources(&self.client);
        if let Some(e) = error {
            log::error!("{}: {e}", self.name);
        }
        self.op_cache.learn_from_discovery(&resources);
    }

    fn namespaces(&self) -> Api<Namespace> {
        Api::cluster(&self.client)
    }

    /// `Delete`: moves a namespace being deleted towards its removal.
    pub fn delete(&self, name: &str) -> Result<Outcome, Error> {
        let namespace = match self.namespaces().get(name) {
            Ok(namespace) => namespace,
            Err(e) if e.is_not_found() => return Ok(Outcome::Done),
            Err(e) => return Err(e.into()),
        };
        if namespace.metadata.deletion_timestamp.is_none() {
            return Ok(Outcome::Done);
        }
        // Ensure the status says Terminating; a namespace gone meanwhile is done.
        let namespace = match self.retry_on_conflict(namespace, |ns| self.update_namespace_status(ns)) {
            Ok(namespace) => namespace,
            Err(Error::Api(e)) if e.is_not_found() => return Ok(Outcome::Done),
            Err(e) => return Err(e),
        };
        if namespace.metadata.deletion_timestamp.is_none() || finalized(&namespace) {
            return Ok(Outcome::Done);
        }
        let estimate = self.delete_all_content(namespace.clone())?;
        if estimate > 0 {
            return Ok(Outcome::ResourcesRemaining(estimate));
        }
        match self.retry_on_conflict(namespace, |ns| self.finalize_namespace(ns)) {
            Err(Error::Api(e)) if e.is_not_found() => Ok(Outcome::Done),
            Err(e) => Err(e),
            Ok(_) => Ok(Outcome::Done),
        }
    }

    /// `retryOnConflictError`: runs `update` again on the latest namespace after a conflict,
    /// refusing to go on if the namespace was replaced by another of the same name.
    fn retry_on_conflict(
        &self,
        mut namespace: Namespace,
        update: impl Fn(&Namespace) -> Result<Namespace, client::Error>,
    ) -> Result<Namespace, Error> {
        loop {
            match update(&namespace) {
                Err(e) if e.is_conflict() => {
                    let latest = self.namespaces().get(namespace.metadata.name.as_deref().unwrap_or_default())?;
                    if latest.metadata.uid != namespace.metadata.uid {
                        return Err(Error::UidChanged);
                    }
                    namespace = latest;
                }
                other => return Ok(other?),
            }
        }
    }

    /// `updateNamespaceStatusFunc`: phase `Terminating` once deleting.
    fn update_namespace_status(&self, namespace: &Namespace) -> Result<Namespace, client::Error> {
        let phase = namespace.status.as_ref().and_then(|s| s.phase.as_deref());
        if namespace.metadata.deletion_timestamp.is_none() || phase == Some("Terminating") {
            return Ok(namespace.clone());
        }
        let mut updated = namespace.clone();
        updated.status.get_or_insert_default().phase = Some("Terminating".into());
        self.namespaces().replace_status(name_of(namespace), &updated, &PostParams::default())
    }

    /// `finalizeNamespace`: `spec.finalizers` without ours (sorted, as upstream's set), through
    /// the `finalize` subresource.
    fn finalize_namespace(&self, namespace: &Namespace) -> Result<Namespace, client::Error> {
        let mut finalizers: Vec<String> = namespace
            .spec
            .iter()
            .flat_map(|s| s.finalizers.iter().flatten())
            .filter(|f| *f != FINALIZER_KUBERNETES)
            .cloned()
            .collect();
        finalizers.sort();
        finalizers.dedup();
        let mut finalize = namespace.clone();
        finalize.spec = Some(NamespaceSpec { finalizers: Some(finalizers) });
        match self.namespaces().replace_subresource("finalize", name_of(namespace), &finalize, &PostParams::default()) {
            Err(e) if e.is_not_found() => Ok(namespace.clone()),
            other => other,
        }
    }

    /// `deleteAllContent`: deletes what every deletable resource holds in the namespace and
    /// updates the conditions; the longest estimate of what remains, or the errors met.
    fn delete_all_content(&self, mut namespace: Namespace) -> Result<i64, Error> {
        let name = name_of(&namespace).to_string();
        let deleted_at = namespace.metadata.deletion_timestamp.as_ref().map(|t| t.0).unwrap_or_else(Timestamp::now);
        let mut conditions = ConditionUpdater::new(Timestamp::now());
        let mut errors = Vec::new();
        let (resources, discovery_error) = preferred_namespaced_resources(&self.client);
        if let Some(e) = discovery_error {
            // Not fatal: what was discovered is still emptied.
            conditions.process_discovery_error(e.failed_groups(), &e.to_string());
            errors.push(Error::from(e));
        }
        let deletable = deletable_resources(&resources).unwrap_or_else(|e| {
            conditions.process_group_version_error(&e.to_string());
            errors.push(e);
            Vec::new()
        });
        let mut totals = RemainingContent::default();
        let mut estimate = 0;
        let pods = deletable.iter().find(|r| is_pods(r)).filter(|_| self.pods_first);
        if let Some(pods) = pods {
            // OrderedNamespaceDeletion: nothing else is deleted while pods remain, so that no pod
            // runs on without, say, the NetworkPolicy that guarded it.
            let (deletion, error) = self.delete_all_content_for_resource(pods, &name, deleted_at);
            if let Some(e) = error {
                conditions.process_delete_content_error(&e.to_string());
                errors.push(Error::DeletePods { namespace: name.clone(), source: Box::new(e) });
            }
            estimate = estimate.max(deletion.estimate);
            if deletion.remaining > 0 {
                log::debug!("{}: pods still remain in {name:?}, delaying deletion of other resources", self.name);
                // As upstream, the conditions are written without the content totals here.
                self.write_conditions(&mut namespace, conditions);
                Aggregate::from_errors(errors)?;
                return Ok(estimate);
            }
        }
        for resource in deletable.iter().filter(|r| pods.is_none() || !is_pods(r)) {
            let (deletion, error) = self.delete_all_content_for_resource(resource, &name, deleted_at);
            if let Some(e) = error {
                conditions.process_delete_content_error(&e.to_string());
                errors.push(e);
            }
            estimate = estimate.max(deletion.estimate);
            if deletion.remaining > 0 {
                totals.by_resource.insert(format!("{}.{}", resource.plural, resource.group), deletion.remaining);
                for (finalizer, count) in deletion.by_finalizer.into_iter().filter(|(_, count)| *count > 0) {
                    *totals.by_finalizer.entry(finalizer).or_default() += count;
                }
            }
        }
        conditions.process_content_totals(&totals);
        // Always written when changed: a condition may have gone back to "ok".
        self.write_conditions(&mut namespace, conditions);
        let texts: Vec<String> = errors.iter().map(Error::to_string).collect();
        log::debug!("{}: deleteAllContent {name:?}: estimate {estimate}, errors {texts:?}", self.name);
        Aggregate::from_errors(errors)?;
        Ok(estimate)
    }

    /// Sets the deletion conditions and writes the status if they changed; a failed write is
    /// only logged (the next pass writes them again).
    fn write_conditions(&self, namespace: &mut Namespace, conditions: ConditionUpdater) {
        let name = name_of(namespace).to_string();
        if conditions.update(namespace.status.get_or_insert_default())
            && let Err(e) = self.namespaces().replace_status(&name, namespace, &PostParams::default())
        {
            log::error!("{}: couldn't update status condition for namespace {name:?}: {e}", self.name);
        }
    }

    /// `deleteAllContentForGroupVersionResource`.
    fn delete_all_content_for_resource(
        &self,
        resource: &ApiResource,
        namespace: &str,
        deleted_at: Timestamp,
    ) -> (ResourceDeletion, Option<Error>) {
        let estimate = match self.estimate_graceful_termination(resource, namespace, deleted_at, Timestamp::now()) {
            Ok(estimate) => estimate,
            Err(e) => return (ResourceDeletion::default(), Some(e.into())),
        };
        let with_estimate = ResourceDeletion { estimate, ..ResourceDeletion::default() };
        let emptied = match self.delete_collection(resource, namespace) {
            Ok(true) => Ok(()),
            Ok(false) => self.delete_each_item(resource, namespace),
            Err(e) => Err(e),
        };
        if let Err(e) = emptied {
            return (with_estimate, Some(e.into()));
        }
        let items = match self.list_collection(resource, namespace) {
            Ok(Some(items)) => items,
            Ok(None) => return (with_estimate, None),
            Err(e) => return (with_estimate, Some(e.into())),
        };
        remaining_content(resource, namespace, estimate, &items)
    }

    /// `estimateGracefulTermination`: for pods, the longest grace period of those still
    /// running, unless the namespace has been deleting for longer already.
    fn estimate_graceful_termination(
        &self,
        resource: &ApiResource,
        namespace: &str,
        deleted_at: Timestamp,
        now: Timestamp,
    ) -> Result<i64, client::Error> {
        if !(resource.group.is_empty() && resource.plural == "pods") {
            return Ok(0);
        }
        let path = Api::<Pod>::namespaced(&self.client, namespace).collection_path();
        let pods: GracePodList = self.client.get_json(&path)?;
        Ok(remaining_estimate(pods_grace_estimate(&pods.items), deleted_at, now))
    }

    /// `deleteCollection`: true when delete-collection is served (and then done, or failed).
    fn delete_collection(&self, resource: &ApiResource, namespace: &str) -> Result<bool, client::Error> {
        if !self.op_cache.is_supported(Operation::DeleteCollection, resource) {
            return Ok(false);
        }
        // Background: no orphan finalizer; this controller purges everything itself.
        let params = background();
        match MetadataApi::new(&self.client, resource, Some(namespace))
            .delete_collection(&ListParams::default(), &params)
        {
            Ok(()) => Ok(true),
            // A resource discovery lists but that serves no such verb (kubernetes#22413) may
            // answer 404 rather than 405. Not cached: only discovery fills the op cache.
            Err(e) if e.is_method_not_supported() || e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `listCollection`: the names and finalizers of what remains; `None` when listing is not
    /// served.
    fn list_collection(&self, resource: &ApiResource, namespace: &str) -> Result<Option<Vec<Item>>, client::Error> {
        if !self.op_cache.is_supported(Operation::List, resource) {
            return Ok(None);
        }
        let api = MetadataApi::new(&self.client, resource, Some(namespace));
        match api.list_as::<ItemList>(&ListParams::default()) {
            Ok(list) => Ok(Some(list.items.into_iter().map(|listed| listed.metadata).collect())),
            Err(e) if e.is_method_not_supported() || e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `deleteEachItem`.
    fn delete_each_item(&self, resource: &ApiResource, namespace: &str) -> Result<(), client::Error> {
        let Some(items) = self.list_collection(resource, namespace)? else {
            return Ok(());
        };
        let api = MetadataApi::new(&self.client, resource, Some(namespace));
        for item in items {
            match api.delete(&item.name, &background()) {
                Err(e) if !e.is_not_found() && !e.is_method_not_supported() => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
}

fn is_pods(resource: &ApiResource) -> bool {
    resource.group.is_empty() && resource.version == "v1" && resource.plural == "pods"
}

/// An object still in the namespace.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
struct Item {
    #[serde(default)]
    name: String,
    #[serde(default, deserialize_with = "crate::client::null_as_default")]
    finalizers: Vec<String>,
}

/// What `listCollection` reads of a list: each item's name and finalizers, nothing else
/// decoded (a namespace's whole content is listed on every pass of its deletion).
#[derive(Debug, Default, Deserialize)]
struct ItemList {
    #[serde(default, deserialize_with = "crate::client::null_as_default")]
    items: Vec<Listed>,
}

#[derive(Debug, Deserialize)]
struct Listed {
    metadata: Item,
}

fn background() -> DeleteParams {
    DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..DeleteParams::default() }
}

fn name_of(namespace: &Namespace) -> &str {
    namespace.metadata.name.as_deref().unwrap_or_default()
}

/// `finalized`: no `spec.finalizers` left.
fn finalized(namespace: &Namespace) -> bool {
    namespace.spec.as_ref().and_then(|s| s.finalizers.as_ref()).is_none_or(|f| f.is_empty())
}

/// A namespace's pods as the grace estimate reads them: upstream lists them whole on every
/// pass of the namespace's deletion, and so do we (the same request), but a whole decoded copy
/// of every pod of a large namespace was the controller manager's highest memory of a run.
#[derive(Debug, Default, Deserialize)]
struct GracePodList {
    #[serde(default, deserialize_with = "crate::client::null_as_default")]
    items: Vec<GracePod>,
}

/// The two fields of a pod the estimate reads.
#[derive(Debug, Default, Deserialize)]
struct GracePod {
    #[serde(default)]
    spec: GraceSpec,
    #[serde(default)]
    status: GraceStatus,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GraceSpec {
    termination_grace_period_seconds: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
struct GraceStatus {
    phase: Option<String>,
}

/// `estimateGracefulTerminationForPods`: the longest grace period of the pods not yet finished.
fn pods_grace_estimate(pods: &[GracePod]) -> i64 {
    let running = pods.iter().filter(|pod| !matches!(pod.status.phase.as_deref(), Some("Succeeded" | "Failed")));
    running.filter_map(|pod| pod.spec.termination_grace_period_seconds).max().unwrap_or(0).max(0)
}

/// The estimate still to wait: none once the namespace has been deleting for that long.
fn remaining_estimate(estimate: i64, deleted_at: Timestamp, now: Timestamp) -> i64 {
    let deleting_for = now.duration_since(deleted_at);
    if deleting_for >= jiff::SignedDuration::from_secs(estimate) { 0 } else { estimate }
}

/// The tail of `deleteAllContentForGroupVersionResource`: what remains after the deletes.
/// Objects held by finalizers are expected (15 s estimate); objects with neither an estimate
/// nor finalizers should have gone, an error.
fn remaining_content(
    resource: &ApiResource,
    namespace: &str,
    estimate: i64,
    items: &[Item],
) -> (ResourceDeletion, Option<Error>) {
    if items.is_empty() {
        return (ResourceDeletion::default(), None);
    }
    let mut by_finalizer = BTreeMap::new();
    for finalizer in items.iter().flat_map(|i| &i.finalizers) {
        *by_finalizer.entry(finalizer.clone()).or_insert(0) += 1;
    }
    let remaining = items.len();
    if estimate != 0 {
        return (ResourceDeletion { estimate, remaining, by_finalizer }, None);
    }
    if !by_finalizer.is_empty() {
        return (ResourceDeletion { estimate: FINALIZER_ESTIMATE_SECONDS, remaining, by_finalizer }, None);
    }
    let error = Error::ItemsRemain { namespace: namespace.to_string(), gvr: gvr_string(resource) };
    (ResourceDeletion { estimate, remaining, by_finalizer: BTreeMap::new() }, Some(error))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn resource(group: &str, version: &str, plural: &str, verbs: &[&str]) -> ApiResource {
        ApiResource {
            group: group.into(),
            version: version.into(),
            kind: String::new(),
            plural: plural.into(),
            namespaced: true,
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
        }
    }

    /// A pod as the server lists it, read as the estimate reads it.
    fn pod(grace: Option<i64>, phase: &str) -> GracePod {
        let pod = Pod {
            metadata: ObjectMeta { name: Some("web".into()), ..ObjectMeta::default() },
            spec: Some(PodSpec {
                termination_grace_period_seconds: grace,
                containers: vec![Container { name: "app".into(), ..Container::default() }],
                ..PodSpec::default()
            }),
            status: Some(PodStatus { phase: Some(phase.into()), ..PodStatus::default() }),
        };
        let list = serde_json::json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": [pod]});
        let mut listed: GracePodList = serde_json::from_value(list).expect("a pod list");
        listed.items.pop().expect("one pod")
    }

    fn item(name: &str, finalizers: &[&str]) -> Item {
        Item { name: name.into(), finalizers: finalizers.iter().map(|f| f.to_string()).collect() }
    }

    #[test]
    fn op_cache_learns_unsupported_verbs_from_discovery() {
        let cache = OperationCache::default();
        let full = resource("", "v1", "pods", &["list", "delete", "deletecollection"]);
        let single = resource("example.com", "v1", "widgets", &["list", "delete"]);
        cache.learn_from_discovery(&[full.clone(), single.clone()]);
        assert!(cache.is_supported(Operation::DeleteCollection, &full));
        assert!(!cache.is_supported(Operation::DeleteCollection, &single));
        assert!(cache.is_supported(Operation::List, &single));
        cache.set_not_supported(Operation::List, &single);
        assert!(!cache.is_supported(Operation::List, &single));
        assert!(cache.is_supported(Operation::List, &resource("example.com", "v2", "widgets", &[])));
    }

    #[test]
    fn only_deletable_resources_are_emptied_and_bad_group_versions_stop_everything() {
        let pods = resource("", "v1", "pods", &["delete"]);
        let bindings = resource("", "v1", "bindings", &["create"]);
        assert_eq!(deletable_resources(&[pods.clone(), bindings]).unwrap(), vec![pods.clone()]);
        let bad = resource("a", "b/c", "things", &["delete"]);
        let error = deletable_resources(&[pods, bad]).unwrap_err();
        assert_eq!(error.to_string(), "unexpected GroupVersion string: a/b/c");
    }

    #[test]
    fn a_listed_collection_gives_each_item_its_name_and_finalizers() {
        let list = r#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"7"},
            "items":[{"metadata":{"name":"a","finalizers":["example.com/keep"],"managedFields":[{"manager":"m",
                "fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:finalizers":{".":{}}}}}]}},
              {"metadata":{"name":"b","finalizers":null}}]}"#;
        let listed: ItemList = serde_json::from_str(list).expect("a list");
        let items: Vec<Item> = listed.items.into_iter().map(|l| l.metadata).collect();
        assert_eq!(items, [item("a", &["example.com/keep"]), item("b", &[])]);
        let empty: ItemList = serde_json::from_str(r#"{"metadata":{},"items":null}"#).expect("an empty list");
        assert!(empty.items.is_empty());
    }

    #[test]
    fn pod_estimate_is_the_longest_grace_period_of_unfinished_pods() {
        let pods = [pod(Some(30), "Running"), pod(Some(90), "Succeeded"), pod(None, "Pending"), pod(Some(5), "Failed")];
        assert_eq!(pods_grace_estimate(&pods), 30);
        assert_eq!(pods_grace_estimate(&[]), 0);
        let bare: GracePodList = serde_json::from_str(r#"{"items":[{"metadata":{"name":"x"}}]}"#).expect("a list");
        assert_eq!(pods_grace_estimate(&bare.items), 0, "a pod without spec or status");
        let deleted = Timestamp::from_second(1_000).unwrap();
        assert_eq!(remaining_estimate(30, deleted, Timestamp::from_second(1_010).unwrap()), 30);
        assert_eq!(remaining_estimate(30, deleted, Timestamp::from_second(1_030).unwrap()), 0);
    }

    #[test]
    fn remaining_objects_are_counted_by_finalizer_with_upstream_estimates() {
        let configmaps = resource("", "v1", "configmaps", &[]);
        let (nothing, error) = remaining_content(&configmaps, "ns", 0, &[]);
        assert!(nothing == ResourceDeletion::default() && error.is_none());
        let held = [item("a", &["example.com/block"]), item("b", &["example.com/block", "other"])];
        let (deletion, error) = remaining_content(&configmaps, "ns", 0, &held);
        assert!(error.is_none());
        assert_eq!(deletion.estimate, FINALIZER_ESTIMATE_SECONDS);
        assert_eq!(deletion.remaining, 2);
        assert_eq!(deletion.by_finalizer, BTreeMap::from([("example.com/block".into(), 2), ("other".into(), 1)]));
        let (graceful, error) = remaining_content(&configmaps, "ns", 30, &[item("p", &[])]);
        assert!((graceful.estimate, graceful.remaining, error.is_none()) == (30, 1, true));
        let (stuck, error) = remaining_content(&configmaps, "ns", 0, &[item("c", &[])]);
        assert_eq!(stuck.remaining, 1);
        assert_eq!(
            error.map(|e| e.to_string()).as_deref(),
            Some("unexpected items still remain in namespace: ns for gvr: /v1, Resource=configmaps")
        );
    }

    #[test]
    fn group_discovery_errors_read_like_client_go() {
        assert!(group_discovery_error(BTreeMap::new()).is_none());
        let failed = BTreeMap::from([
            ("metrics.k8s.io/v1beta1".to_string(), client::Error::Transport("down".into())),
            ("a.example.com/v1".to_string(), client::Error::Decode("bad".into())),
        ]);
        let error = group_discovery_error(failed).expect("an error");
        assert_eq!(error.failed_groups(), Some(2));
        assert_eq!(
            error.to_string(),
            "unable to retrieve the complete list of server APIs: a.example.com/v1: cannot decode the server's \
             answer: bad, metrics.k8s.io/v1beta1: transport error: down"
        );
    }

    #[test]
    fn errors_aggregate_like_utilerrors_and_pods_are_core_v1() {
        let aggregate = |errors: Vec<Error>| Aggregate::from_errors(errors).map_err(|e| Error::from(e).to_string());
        assert_eq!(aggregate(Vec::new()), Ok(()));
        assert_eq!(
            aggregate(vec![Error::UidChanged]),
            Err("invalid request: namespace uid has changed across retries".into())
        );
        let gv = |v: &str| Error::GroupVersion { group_version: v.into() };
        assert_eq!(
            aggregate(vec![gv("a"), gv("b")]),
            Err("[unexpected GroupVersion string: a, unexpected GroupVersion string: b]".into())
        );
        assert!(is_pods(&resource("", "v1", "pods", &[])));
        assert!(!is_pods(&resource("metrics.k8s.io", "v1beta1", "pods", &[])));
    }

    #[test]
    fn finalized_means_no_spec_finalizers() {
        let mut namespace = Namespace::default();
        assert!(finalized(&namespace));
        namespace.spec = Some(NamespaceSpec { finalizers: Some(vec![FINALIZER_KUBERNETES.into()]) });
        assert!(!finalized(&namespace));
    }
}
