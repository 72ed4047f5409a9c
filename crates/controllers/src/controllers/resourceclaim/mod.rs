//! The resource claim controller (`resourceclaim-controller`), after upstream v1.36's
//! `pkg/controller/resourceclaim/controller.go`, which 1.36 runs by default
//! (DynamicResourceAllocation is GA).
//!
//! For each `spec.resourceClaims` entry of a pod that names a `resourceClaimTemplateName`, it
//! creates a ResourceClaim from the template (generated name `<pod>-<claim>-`, controlled by
//! the pod, annotated with the entry's name) and records its name in the pod's
//! `status.resourceClaimStatuses` by server-side apply ([`pod`]). Once a pod is scheduled, it
//! adds the pod to `status.reservedFor` of each of its allocated claims. When pods finish or go,
//! it drops them from `reservedFor`, deallocates claims no one uses any more and removes their
//! delete-protection finalizer, and deletes the claims it generated for pods that are done
//! ([`claim`]).
//!
//! One queue, `resource_claim`, of keys `pod:<ns>/<name>` and `claim:<ns>/<name>`. Pods are
//! queued only when there is work ([`ResourceClaimController::pod_needs_work`]); their claims
//! when they stop needing them; claims on any change, which also re-examines the pods using
//! them; pods using a template when it changes.
//!
//! PodGroup claims (DRAWorkloadResourceClaims, alpha and off by default) are not built: with
//! that gate on the controller does not start.

mod claim;
mod metrics;
mod pod;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use parking_lot::Mutex;

use crate::client::Client;
use crate::controllers::resourceclaimutil::{self, can_be_reserved, is_for_pod, is_reserved_for_pod};
use crate::lru::LruSet;
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::events::EventRecorder;
use crate::runtime::informer::{Event, Informer, MutationCache, object_key};
use crate::runtime::workqueue::WorkQueue;

/// Which features are on (upstream's `Features`, from the feature gates).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// DRAAdminAccess: templates may ask for admin access.
    pub admin_access: bool,
    /// DRAPrioritizedList: templates may list `firstAvailable` sub-requests.
    pub prioritized_list: bool,
    /// DRAWorkloadResourceClaims: claims of PodGroups (not built here).
    pub workload_resource_claims: bool,
}

/// What the controller takes from the flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// `--concurrent-resourceclaim-syncs`.
    pub workers: usize,
    /// The features the feature gates turn on.
    pub features: Features,
}

/// `podResourceClaimIndex`: pods by `namespace/claim` for each claim they name.
const POD_RESOURCE_CLAIM_INDEX: &str = "podResourceClaim";
/// `podResourceClaimTemplateIndex`: pods by `namespace/template` for each template they use.
const POD_RESOURCE_CLAIM_TEMPLATE_INDEX: &str = "podResourceClaimTemplate";
/// `claimPodOwnerIndex`: claims by the UID of the pod that controls them.
const CLAIM_POD_OWNER_INDEX: &str = "claimPodOwner";

const CLAIM_KEY_PREFIX: &str = "claim:";
const POD_KEY_PREFIX: &str = "pod:";

/// The claim mutation cache's time to live: upstream's hour, "unlikely to be needed because the
/// informer cache should get updated soon".
const CLAIM_CACHE_TTL: Duration = Duration::from_secs(3600);
/// `NewIntegerResourceVersionMutationCache`'s LRU size.
const CLAIM_CACHE_SIZE: usize = 100;
/// `maxUIDCacheEntries`: the deleted pods remembered.
const MAX_UID_CACHE_ENTRIES: usize = 500;

/// Why the controller could not be built, or a sync failed for a reason of its own (API errors
/// reach the queue as `SyncError`s of their kind, with upstream's messages).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// DRAWorkloadResourceClaims is on: PodGroup claims are not built.
    #[error("the DRAWorkloadResourceClaims feature (ResourceClaims of PodGroups) is not supported here")]
    WorkloadClaimsUnsupported,
    /// A claim is not the pod's, or cannot be bound to it.
    #[error("{0}")]
    Claim(#[from] resourceclaimutil::Error),
    /// A pod's claim has no name.
    #[error("{0}")]
    Name(#[from] resourceclaimutil::NameError),
    /// A pod's entry could not be looked up before creating its claim.
    #[error("checking for claim before creating it: {0}")]
    CheckBeforeCreate(#[source] resourceclaimutil::NameError),
    /// The pod's template is not in the cache.
    #[error("resource claim template {quoted}: resourceclaimtemplate.resource.k8s.io {quoted} not found")]
    TemplateNotFound {
        /// The template's name, quoted as Go's `%q`.
        quoted: String,
    },
    /// The template asks for admin access, whose feature is off.
    #[error("admin access is requested, but the feature is disabled")]
    AdminAccessDisabled,
    /// The template has a prioritized list, whose feature is off.
    #[error("template includes a prioritized list of subrequests, but the feature is disabled")]
    PrioritizedListDisabled,
    /// A queue key without a prefix.
    #[error("unexpected key: {0}")]
    UnexpectedKey(String),
    /// A queue key of an unknown prefix.
    #[error("unexpected key prefix: {0}:")]
    UnexpectedKeyPrefix(String),
    /// A queue key whose object part is no `namespace/name`.
    #[error("unexpected key format: {0}")]
    UnexpectedKeyFormat(String),
}

/// The queue acts on the kind of the API error inside, if any.
impl From<Error> for SyncError {
    fn from(error: Error) -> SyncError {
        SyncError::of(error)
    }
}

/// `resourceclaim.NewController`.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Result<Controller, Error> {
    if config.features.workload_resource_claims {
        return Err(Error::WorkloadClaimsUnsupported);
    }
    let queue = WorkQueue::new("resource_claim");
    let pods = context.informers.informer::<Pod>();
    pods.add_index(POD_RESOURCE_CLAIM_INDEX, pod_resource_claim_index);
    pods.add_index(POD_RESOURCE_CLAIM_TEMPLATE_INDEX, pod_resource_claim_template_index);
    let claims = context.informers.informer::<ResourceClaim>();
    claims.add_index(CLAIM_POD_OWNER_INDEX, claim_pod_owner_index);
    metrics::register(&claims);
    let controller = Arc::new(ResourceClaimController {
        features: config.features,
        client: context.client.clone(),
        pods,
        claims,
        templates: context.informers.informer::<ResourceClaimTemplate>(),
        claim_cache: MutationCache::bounded(CLAIM_CACHE_TTL, CLAIM_CACHE_SIZE),
        recorder: context.recorder.clone(),
        queue: queue.clone(),
        deleted_objects: Mutex::new(LruSet::new(MAX_UID_CACHE_ENTRIES)),
    });
    let handler = controller.clone();
    controller.pods.add_handler(move |event: &Event<Pod>| match event {
        Event::Added(pod) | Event::Updated { new: pod, .. } => handler.enqueue_pod(pod, false),
        Event::Deleted { object, .. } => handler.enqueue_pod(object, true),
    });
    let handler = controller.clone();
    controller.claims.add_handler(move |event: &Event<ResourceClaim>| match event {
        Event::Added(claim) | Event::Updated { new: claim, .. } => handler.enqueue_claim(claim, false),
        Event::Deleted { object, .. } => handler.enqueue_claim(object, true),
    });
    let handler = controller.clone();
    controller.templates.add_handler(move |event: &Event<ResourceClaimTemplate>| match event {
        Event::Added(template) | Event::Updated { new: template, .. } => handler.enqueue_template(template),
        Event::Deleted { .. } => {}
    });
    Ok(Controller::new().with_queue(&queue, config.workers, move |key: &String| controller.sync(key)))
}

/// `podResourceClaimIndexFunc`: the claims a pod names or had generated, sorted.
fn pod_resource_claim_index(pod: &Pod) -> Vec<String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let names = pod_claims(pod).iter().filter_map(|c| resourceclaimutil::name(pod, c).ok()?.name);
    names.map(|name| format!("{namespace}/{name}")).collect::<BTreeSet<_>>().into_iter().collect()
}

/// `podResourceClaimTemplateIndexFunc`: the templates a pod's claims use, sorted.
fn pod_resource_claim_template_index(pod: &Pod) -> Vec<String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let templates = pod_claims(pod).iter().filter_map(|c| c.resource_claim_template_name.as_deref());
    templates.map(|name| format!("{namespace}/{name}")).collect::<BTreeSet<_>>().into_iter().collect()
}

/// `claimPodOwnerIndexFunc`: the UIDs of the pods that control the claim (`apiVersion: v1`).
fn claim_pod_owner_index(claim: &ResourceClaim) -> Vec<String> {
    let owners = claim.metadata.owner_references.iter().flatten();
    let pods = owners.filter(|o| o.controller == Some(true) && o.api_version == "v1" && o.kind == "Pod");
    pods.map(|o| o.uid.clone()).collect()
}

/// `spec.resourceClaims`, empty when unset.
fn pod_claims(pod: &Pod) -> &[k8s_openapi::api::core::v1::PodResourceClaim] {
    pod.spec.as_ref().and_then(|s| s.resource_claims.as_deref()).unwrap_or_default()
}

/// `spec.nodeName`, empty when unset.
fn node_name(pod: &Pod) -> &str {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default()
}

/// `status.extendedResourceClaimStatus.resourceClaimName`, if the scheduler made such a claim.
fn extended_resource_claim_name(pod: &Pod) -> Option<&str> {
    let status = pod.status.as_ref()?.extended_resource_claim_status.as_ref()?;
    Some(status.resource_claim_name.as_str())
}

/// `podutil.IsPodTerminal`: Succeeded or Failed.
fn is_pod_terminal(pod: &Pod) -> bool {
    matches!(crate::apimachinery::pod::phase(pod), "Succeeded" | "Failed")
}

/// `isPodDone`: certainly none of the pod's containers runs or ever will (terminal, or deleted
/// before it was scheduled).
fn is_pod_done(pod: &Pod) -> bool {
    is_pod_terminal(pod) || (pod.metadata.deletion_timestamp.is_some() && node_name(pod).is_empty())
}

/// `podNeedsClaims`: whether the pod may still use its claims, and why.
fn pod_needs_claims(pod: &Pod, deleted: bool) -> (bool, &'static str) {
    if deleted {
        return (false, "pod got removed");
    }
    if is_pod_terminal(pod) {
        return (false, "pod has terminated");
    }
    if pod.metadata.deletion_timestamp.is_some() && node_name(pod).is_empty() {
        return (false, "pod got deleted before scheduling");
    }
    (true, "pod might run")
}

/// `podNeedsWork`: a live pod has a claim to create from a template, or, once scheduled, an
/// allocated claim not reserved for it yet. `claim` reads a claim of the pod's namespace from
/// the informer; `accept_pod_group` is DRAWorkloadResourceClaims. Returns the answer and why.
fn pod_needs_work(
    pod: &Pod,
    accept_pod_group: bool,
    claim: impl Fn(&str) -> Option<Arc<ResourceClaim>>,
) -> (bool, String) {
    if pod.metadata.deletion_timestamp.is_some() {
        return (false, "pod is deleted".into());
    }
    let mut nothing_to_do = Vec::new();
    for pod_claim in pod_claims(pod) {
        let claim_name = match resourceclaimutil::name(pod, pod_claim) {
            Ok(claim_name) => claim_name,
            Err(e) => return (true, e.to_string()),
        };
        let Some(name) = claim_name.name else {
            nothing_to_do.push(format!("claim {} is not needed", pod_claim.name));
            continue;
        };
        let Some(claim) = claim(&name) else {
            if pod_claim.resource_claim_template_name.is_some() {
                // Without PodGroups (DRAWorkloadResourceClaims) a claim binds to its pod.
                if let Err(e) = resourceclaimutil::bind_to(pod, pod_claim) {
                    let claim = &pod_claim.name;
                    nothing_to_do.push(format!("not sure what to do for ResourceClaim for claim {claim}: {e}"));
                    continue;
                }
                return (true, "must create ResourceClaim from template".into());
            }
            let claim = &pod_claim.name;
            nothing_to_do.push(format!("ResourceClaim for claim {claim} is missing and must be created by user"));
            continue;
        };
        if claim_name.must_check_owner
            && let Err(e) = is_for_pod(pod, &claim, accept_pod_group)
        {
            nothing_to_do.push(format!("claim {}: {e}", pod_claim.name));
            continue;
        }
        // The rest only concerns scheduled pods.
        if node_name(pod).is_empty() {
            continue;
        }
        let allocated = claim.status.as_ref().is_some_and(|s| s.allocation.is_some());
        if allocated && !is_reserved_for_pod(pod, &claim, accept_pod_group) && can_be_reserved(&claim) {
            return (true, format!("need to reserve claim {} for pod", object_key(&claim.metadata)));
        }
    }
    (false, format!("nothing to do for any claim: {}", nothing_to_do.join(", ")))
}

/// An API error as upstream's message (Go's `err.Error()`), keeping its kind.
fn api_error(error: crate::client::Error) -> SyncError {
    let message = error.message();
    match SyncError::from(error) {
        SyncError::Conflict(_) => SyncError::Conflict(message),
        SyncError::RetryAfter { delay, .. } => SyncError::RetryAfter { delay, message },
        _ => SyncError::Failed(message),
    }
}

/// Upstream's `Controller`.
struct ResourceClaimController {
    features: Features,
    client: Client,
    pods: Arc<Informer<Pod>>,
    claims: Arc<Informer<ResourceClaim>>,
    templates: Arc<Informer<ResourceClaimTemplate>>,
    /// `claimCache`: the claims this controller created, found by `findPodResourceClaim` before
    /// the informer has them (a create whose pod status apply failed is not repeated). As
    /// upstream's, an entry lives an hour unless a later lookup sees the informer's copy, so a
    /// generated claim that a user deletes while its pod lives is found there and not created
    /// again within that hour (checked against upstream v1.36.2).
    claim_cache: MutationCache<ResourceClaim>,
    recorder: EventRecorder,
    queue: WorkQueue<String>,
    /// `deletedObjects` (upstream's `uid_cache.go`): pods seen deleted, whose reservations can go
    /// without asking the server.
    deleted_objects: Mutex<LruSet<String>>,
}

impl ResourceClaimController {
    /// `enqueuePod`: the claims of a pod that no longer needs them, and the pod if it needs work.
    fn enqueue_pod(&self, pod: &Pod, deleted: bool) {
        let extended_claim = extended_resource_claim_name(pod);
        if pod_claims(pod).is_empty() && extended_claim.is_none() {
            return;
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        if deleted {
            log::trace!("ResourceClaim: pod got deleted pod={:?}", object_key(&pod.metadata));
            self.deleted_objects.lock().insert(pod.metadata.uid.clone().unwrap_or_default(), ());
        }
        let (needs_claims, reason) = pod_needs_claims(pod, deleted);
        if !needs_claims {
            for pod_claim in pod_claims(pod) {
                if let Ok(resourceclaimutil::ClaimName { name: Some(name), .. }) =
                    resourceclaimutil::name(pod, pod_claim)
                {
                    log::trace!("ResourceClaim: process claim claim=\"{namespace}/{name}\" reason={reason:?}");
                    self.queue.add(format!("{CLAIM_KEY_PREFIX}{namespace}/{name}"));
                }
            }
            // The scheduler's claims for extended resources, which are not in the spec, are
            // released as well, whatever DRAExtendedResource says now.
            if let Some(name) = extended_claim {
                self.queue.add(format!("{CLAIM_KEY_PREFIX}{namespace}/{name}"));
            }
        }
        let claims = self.claims.store();
        let namespace_claim = |name: &str| claims.get_by_name(namespace, name);
        let (needs_work, reason) = pod_needs_work(pod, self.features.workload_resource_claims, namespace_claim);
        let key = object_key(&pod.metadata);
        if needs_work {
            log::trace!("ResourceClaim: enqueueing pod pod={key:?} reason={reason:?}");
            self.queue.add(format!("{POD_KEY_PREFIX}{key}"));
        } else {
            log::trace!("ResourceClaim: not enqueueing pod pod={key:?} reason={reason:?}");
        }
    }

    /// `enqueueResourceClaim`: a claim that still exists, and the pods that use it.
    fn enqueue_claim(&self, claim: &ResourceClaim, deleted: bool) {
        let key = object_key(&claim.metadata);
        if !deleted {
            // At start-up every claim is checked for stale reservations.
            self.queue.add(format!("{CLAIM_KEY_PREFIX}{key}"));
        }
        for pod in self.pods.store().by_index(POD_RESOURCE_CLAIM_INDEX, &key) {
            self.enqueue_pod(&pod, false);
        }
    }

    /// `enqueueResourceClaimTemplate`: the pods that use the template.
    fn enqueue_template(&self, template: &ResourceClaimTemplate) {
        let key = object_key(&template.metadata);
        for pod in self.pods.store().by_index(POD_RESOURCE_CLAIM_TEMPLATE_INDEX, &key) {
            log::debug!("ResourceClaim: enqueuing pod due to ResourceClaimTemplate change template={key:?}");
            self.enqueue_pod(&pod, false);
        }
    }

    /// `syncHandler`: `pod:` and `claim:` keys.
    fn sync(&self, key: &str) -> SyncResult {
        let Some((prefix, object)) = key.split_once(':') else {
            return Err(Error::UnexpectedKey(key.to_string()).into());
        };
        let (namespace, name) = split_meta_namespace_key(object)?;
        match prefix {
            "pod" => self.sync_pod(namespace, name),
            "claim" => self.sync_claim(namespace, name),
            _ => Err(Error::UnexpectedKeyPrefix(prefix.to_string()).into()),
        }
    }
}

/// `cache.SplitMetaNamespaceKey`: `name` or `namespace/name`.
fn split_meta_namespace_key(key: &str) -> Result<(&str, &str), Error> {
    let parts: Vec<&str> = key.split('/').collect();
    match parts[..] {
        [name] => Ok(("", name)),
        [namespace, name] => Ok((namespace, name)),
        _ => Err(Error::UnexpectedKeyFormat(crate::apimachinery::strconv::quote(key))),
    }
}

#[cfg(test)]
mod tests;
