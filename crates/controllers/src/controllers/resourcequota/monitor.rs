//! The quota monitor (`resource_quota_monitor.go`) and the evaluator registry of
//! `startResourceQuotaController`: the evaluators with special logic (pods, services, claims)
//! and the legacy object counts (`NewEvaluators`), then one monitor per quotable resource,
//! which adds an object-count evaluator (`count/<resource>.<group>`) for a resource that has
//! none and replenishes quotas on deletions and on updates `DefaultUpdateFilter` lets through.
//!
//! As upstream, the quotable resources (namespaced, with create, list, watch and delete, minus
//! the ignored ones: [`quotable_resources`]) are discovered when the controller starts and
//! every 30 s (`Sync`), and each is watched through the informer factory's `ForResource` (the
//! typed informer of a built-in kind, a metadata-only one otherwise); monitors follow the
//! resources that appear and go ([`QuotaController::sync_discovery`]). The built-in kinds this
//! process knows are also monitored from the start through their typed informers
//! ([`monitor_typed_resources`], which the workers wait for, as upstream waits for its first
//! monitors), so discovery adds monitors only for the others, e.g. custom resources. Changes go
//! through upstream's `resource_quota_controller_resource_changes` queue.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, ContainerStatus, Endpoints, LimitRange, PersistentVolumeClaim, Pod, PodTemplate, ReplicationController,
    ResourceQuota, ResourceRequirements, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::events::v1::Event as EventsEvent;
use k8s_openapi::api::networking::v1::{Ingress, NetworkPolicy};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate};

use super::QuotaController;
use crate::client::discovery::{self, ApiResource, Discovery};
use crate::client::metadata::PartialObjectMetadata;
use crate::quota::generic::{ListFn, ListingEvaluator};
use crate::quota::resourceclaims::{self, EXTENDED_RESOURCE_CLAIM_ANNOTATION, ExtendedResources};
use crate::quota::resources::{self, ResourceList, from_api};
use crate::quota::{GroupResource, LEGACY_OBJECT_COUNT_ALIASES, claims, pods, services};
use crate::runtime::controller::ControllerContext;
use crate::runtime::informer::{Event, Informable, Informer};

/// `ignoredResources` of the quota configuration for controllers (`pkg/quota/v1/install`):
/// virtual resources that are not stored, and events.
const IGNORED_RESOURCES: &[(&str, &str)] = &[
    ("", "bindings"),
    ("", "componentstatuses"),
    ("authentication.k8s.io", "tokenreviews"),
    ("authentication.k8s.io", "selfsubjectreviews"),
    ("authorization.k8s.io", "subjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "localsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
    ("", "events"),
    ("events.k8s.io", "events"),
];

/// How often discovery is read again (`Sync`'s period in `startResourceQuotaController`).
pub(super) const DISCOVERY_PERIOD: std::time::Duration = std::time::Duration::from_secs(30);

fn ignored(group: &str, resource: &str) -> bool {
    IGNORED_RESOURCES.contains(&(group, resource))
}

/// `GetQuotableResources` over `ServerPreferredNamespacedResources`, minus the ignored
/// resources: preferred namespaced resources supporting create, list, watch and delete.
pub(super) fn quotable_resources(discovered: &Discovery) -> Vec<ApiResource> {
    discovered
        .preferred()
        .into_iter()
        .filter(|r| r.namespaced && r.supports_all(&["create", "list", "watch", "delete"]))
        .filter(|r| !ignored(&r.group, &r.plural))
        .collect()
}

/// The quota monitor's state beyond the typed monitors.
#[derive(Default)]
pub(super) struct Monitors {
    /// The resources with typed monitors (registered at construction).
    typed: BTreeSet<GroupResource>,
    /// Monitors added for discovered resources, by monitor key; each flag is cleared when its
    /// resource leaves discovery, and its handler then drops events (the shared informer
    /// itself keeps running, as the garbage collector's monitors do).
    discovered: HashMap<String, (ApiResource, Arc<AtomicBool>)>,
    /// The quotable resources of the last discovery that was acted on (`oldResources`).
    known: BTreeMap<String, ApiResource>,
}

/// A kind the quota monitor watches, with `DefaultUpdateFilter`'s verdict on its updates.
pub(super) trait Monitored: Informable {
    /// Whether an update may lower usage (`DefaultUpdateFilter`); other kinds: never.
    /// `resizing`: the InPlacePodVerticalScaling gate.
    fn update_requires_replenishment(_old: &Self, _new: &Self, _resizing: bool) -> bool {
        false
    }
}

impl Monitored for Pod {
    /// Resized resources (InPlacePodVerticalScaling), a changed Terminating scope, or the pod
    /// ceasing to be charged (`QuotaV1Pod` turned false).
    fn update_requires_replenishment(old: &Pod, new: &Pod, resizing: bool) -> bool {
        if resizing && resources_changed(old, new) {
            return true;
        }
        if pods::is_terminating(old) != pods::is_terminating(new) {
            return true;
        }
        let now = jiff::Timestamp::now();
        pods::quota_v1_pod(old, now) && !pods::quota_v1_pod(new, now)
    }
}

fn statuses(pod: &Pod, init: bool) -> &[ContainerStatus] {
    let status = pod.status.as_ref();
    let list = if init {
        status.and_then(|s| s.init_container_statuses.as_deref())
    } else {
        status.and_then(|s| s.container_statuses.as_deref())
    };
    list.unwrap_or_default()
}

/// Reported requests and limits compared by value (`apiequality.Semantic`).
fn same_resources(a: Option<&ResourceRequirements>, b: Option<&ResourceRequirements>) -> bool {
    let requests = |r: Option<&ResourceRequirements>| from_api(r.and_then(|r| r.requests.as_ref()));
    let limits = |r: Option<&ResourceRequirements>| from_api(r.and_then(|r| r.limits.as_ref()));
    a.is_some() == b.is_some()
        && resources::equals(&requests(a), &requests(b))
        && resources::equals(&limits(a), &limits(b))
}

/// `hasResourcesChanged`: the reported resources of a container present in both changed.
fn resources_changed(old: &Pod, new: &Pod) -> bool {
    [false, true].into_iter().any(|init| {
        let news = statuses(new, init);
        statuses(old, init).iter().any(|o| {
            news.iter()
                .find(|n| n.name == o.name)
                .is_some_and(|n| !same_resources(o.resources.as_ref(), n.resources.as_ref()))
        })
    })
}

impl Monitored for Service {
    fn update_requires_replenishment(old: &Service, new: &Service, _: bool) -> bool {
        services::quota_service_type(old) != services::quota_service_type(new)
    }
}

impl Monitored for PersistentVolumeClaim {
    fn update_requires_replenishment(old: &Self, new: &Self, _: bool) -> bool {
        claims::requires_quota_replenish(new, old)
    }
}

macro_rules! monitored {
    ($($kind:ty),* $(,)?) => { $(impl Monitored for $kind {})* };
}

monitored!(
    ConfigMap,
    Endpoints,
    LimitRange,
    PodTemplate,
    ReplicationController,
    ResourceQuota,
    Secret,
    ServiceAccount,
    ControllerRevision,
    DaemonSet,
    Deployment,
    ReplicaSet,
    StatefulSet,
    HorizontalPodAutoscaler,
    CronJob,
    Job,
    Lease,
    EndpointSlice,
    EventsEvent,
    Ingress,
    NetworkPolicy,
    PodDisruptionBudget,
    Role,
    RoleBinding,
    ResourceClaim,
    ResourceClaimTemplate,
);

/// The group/resource of a kind (`pods`, `deployments.apps`).
fn group_resource<K: Informable>() -> GroupResource {
    GroupResource::new(K::GROUP, K::URL_PATH_SEGMENT)
}

/// A quota lister asked before its informer's first full list: `<resource> not yet synced`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{resource} not yet synced")]
struct NotSynced {
    /// The resource as upstream names it (`v1, Resource=pods`, or a discovered resource).
    resource: String,
}

/// `ListerFuncForResourceFunc` + `ListResourceUsingListerFunc`: the namespace's cached objects,
/// an error until the informer has synced.
fn lister<K: Informable>(informer: Arc<Informer<K>>) -> ListFn<K> {
    let group_version =
        if K::GROUP.is_empty() { K::VERSION.to_string() } else { format!("{}/{}", K::GROUP, K::VERSION) };
    let not_ready = NotSynced { resource: format!("{group_version}, Resource={}", K::URL_PATH_SEGMENT) };
    Box::new(move |namespace| {
        if !informer.has_synced() {
            return Err(Box::new(not_ready.clone()));
        }
        Ok(informer.store().list_namespace(namespace))
    })
}

/// `NewEvaluators`: pods, services and claims, and the object counts with legacy names.
fn register_core_evaluators(context: &ControllerContext<'_>, controller: &QuotaController) {
    let registry = &controller.registry;
    let use_status_resources = controller.use_status_resources;
    registry.add(Arc::new(ListingEvaluator::new(
        group_resource::<Pod>(),
        lister(context.informers.informer::<Pod>()),
        Box::new(pods::matching_resources),
        pods::matches_scope,
        Box::new(move |pod| pods::usage(pod, jiff::Timestamp::now(), use_status_resources)),
    )));
    registry.add(Arc::new(ListingEvaluator::new(
        group_resource::<Service>(),
        lister(context.informers.informer::<Service>()),
        Box::new(services::matching_resources),
        crate::quota::generic::matches_no_scope,
        Box::new(services::usage),
    )));
    registry.add(Arc::new(ListingEvaluator::new(
        group_resource::<PersistentVolumeClaim>(),
        lister(context.informers.informer::<PersistentVolumeClaim>()),
        Box::new(claims::matching_resources),
        if controller.volume_attributes_class {
            claims::matches_scope
        } else {
            crate::quota::generic::matches_no_scope
        },
        Box::new(claims::usage),
    )));
    if controller.dra.dynamic_resource_allocation {
        register_claim_evaluator(context, controller);
    }
    legacy_count::<ConfigMap>(context, controller);
    legacy_count::<ResourceQuota>(context, controller);
    legacy_count::<ReplicationController>(context, controller);
    legacy_count::<Secret>(context, controller);
}

/// The resource claim evaluator (DynamicResourceAllocation), which with DRAExtendedResource
/// also charges the extended resources of the claims the scheduler makes for pods.
fn register_claim_evaluator(context: &ControllerContext<'_>, controller: &QuotaController) {
    let claims = context.informers.informer::<ResourceClaim>();
    let extended: Option<Arc<ClusterExtendedResources>> = controller.dra.extended_resource.then(|| {
        Arc::new(ClusterExtendedResources {
            classes: context.informers.informer::<DeviceClass>(),
            pods: context.informers.informer::<Pod>(),
            claims: claims.clone(),
            use_status_resources: controller.use_status_resources,
        })
    });
    let matching_extended = extended.clone();
    controller.registry.add(Arc::new(ListingEvaluator::new(
        group_resource::<ResourceClaim>(),
        lister(claims),
        Box::new(move |input| {
            resourceclaims::matching_resources(input, matching_extended.as_deref().map(|e| e as &dyn ExtendedResources))
        }),
        crate::quota::generic::matches_no_scope,
        Box::new(move |claim| resourceclaims::usage(claim, extended.as_deref().map(|e| e as &dyn ExtendedResources))),
    )));
}

/// What the claim evaluator asks the cluster, read from the informers' caches when asked
/// (upstream keeps an `ExtendedResourceCache` fed by DeviceClass events, and a claim index by
/// owning pod; the caches hold the same facts).
struct ClusterExtendedResources {
    classes: Arc<Informer<DeviceClass>>,
    pods: Arc<Informer<Pod>>,
    claims: Arc<Informer<ResourceClaim>>,
    use_status_resources: bool,
}

impl ExtendedResources for ClusterExtendedResources {
    fn extended_resource_of_class(&self, class: &str) -> Option<String> {
        self.classes.store().get(class)?.spec.extended_resource_name.clone()
    }

    fn has_class_for(&self, resource_name: &str) -> bool {
        if let Some(class) = resource_name.strip_prefix(pods::DEVICE_CLASS_RESOURCE_PREFIX)
            && self.classes.store().get(class).is_some()
        {
            return true;
        }
        self.classes.store().list().iter().any(|c| c.spec.extended_resource_name.as_deref() == Some(resource_name))
    }

    fn verified_pod_usage(&self, claim: &ResourceClaim) -> Option<ResourceList> {
        let owner = extended_claim_pod_owner(claim)?;
        let namespace = claim.metadata.namespace.as_deref().unwrap_or("");
        let pod = self.pods.store().get(&format!("{namespace}/{}", owner.name))?;
        if pod.metadata.uid.as_deref() != Some(owner.uid.as_str()) {
            return None;
        }
        let own = pod.status.as_ref().and_then(|s| s.extended_resource_claim_status.as_ref());
        match own {
            Some(status) if Some(status.resource_claim_name.as_str()) != claim.metadata.name.as_deref() => return None,
            Some(_) => {}
            // Without the pod naming its claim, only its first claim (oldest, then by name) is
            // exempted from what the pod pays.
            None => {
                let key = |c: &ResourceClaim| (c.metadata.creation_timestamp.clone(), c.metadata.name.clone());
                let first = self
                    .claims
                    .store()
                    .list_namespace(namespace)
                    .into_iter()
                    .filter(|c| extended_claim_pod_owner(c).is_some_and(|o| o.uid == owner.uid))
                    .min_by(|a, b| key(a).cmp(&key(b)))?;
                if first.metadata.name != claim.metadata.name {
                    return None;
                }
            }
        }
        Some(pods::usage(&pod, jiff::Timestamp::now(), self.use_status_resources))
    }
}

/// The pod that controls an extended-resource claim (`extendedResourceClaimPodUIDOwnerIndex`).
fn extended_claim_pod_owner(
    claim: &ResourceClaim,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    let annotations = claim.metadata.annotations.as_ref()?;
    if annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION).map(String::as_str) != Some("true") {
        return None;
    }
    let owner = claim.metadata.owner_references.iter().flatten().find(|r| r.controller == Some(true))?;
    (owner.kind == "Pod" && owner.api_version == "v1").then_some(owner)
}

/// An object count with its legacy name (`LEGACY_OBJECT_COUNT_ALIASES`).
fn legacy_count<K: Informable>(context: &ControllerContext<'_>, controller: &QuotaController) {
    let alias = LEGACY_OBJECT_COUNT_ALIASES
        .iter()
        .find(|(resource, _)| K::GROUP.is_empty() && *resource == K::URL_PATH_SEGMENT);
    let lister = lister(context.informers.informer::<K>());
    let evaluator = ListingEvaluator::object_count(group_resource::<K>(), lister, alias.map(|(_, alias)| *alias));
    controller.registry.add(Arc::new(evaluator));
}

/// `controllerFor` + the evaluator half of `SyncMonitors` for one kind.
fn monitor<K: Monitored>(context: &ControllerContext<'_>, controller: &Arc<QuotaController>) {
    let resource = group_resource::<K>();
    if ignored(&resource.group, &resource.resource) {
        return;
    }
    controller.monitors.lock().typed.insert(resource.clone());
    let informer = context.informers.informer::<K>();
    if controller.registry.get(&resource).is_none() {
        let evaluator = ListingEvaluator::object_count(resource.clone(), lister(informer.clone()), None);
        controller.registry.add(Arc::new(evaluator));
        log::info!("QuotaMonitor created object count evaluator for {resource}");
    }
    let controller = controller.clone();
    informer.add_handler(move |event: &Event<K>| {
        let changed = match event {
            Event::Added(_) => None,
            Event::Updated { old, new } => {
                K::update_requires_replenishment(old, new, controller.use_status_resources).then_some(new)
            }
            Event::Deleted { object, .. } => Some(object),
        };
        if let Some(object) = changed {
            controller.resource_changed(&resource, object.metadata().namespace.as_deref().unwrap_or(""));
        }
    });
}

/// The quotable resources with typed informers: namespaced kinds the API server serves with
/// create, list, watch and delete.
fn monitor_typed_resources(context: &ControllerContext<'_>, controller: &Arc<QuotaController>) {
    monitor::<Pod>(context, controller);
    monitor::<Service>(context, controller);
    monitor::<PersistentVolumeClaim>(context, controller);
    monitor::<ConfigMap>(context, controller);
    monitor::<Secret>(context, controller);
    monitor::<ReplicationController>(context, controller);
    monitor::<ResourceQuota>(context, controller);
    monitor::<Endpoints>(context, controller);
    monitor::<LimitRange>(context, controller);
    monitor::<PodTemplate>(context, controller);
    monitor::<ServiceAccount>(context, controller);
    monitor::<ControllerRevision>(context, controller);
    monitor::<DaemonSet>(context, controller);
    monitor::<Deployment>(context, controller);
    monitor::<ReplicaSet>(context, controller);
    monitor::<StatefulSet>(context, controller);
    monitor::<HorizontalPodAutoscaler>(context, controller);
    monitor::<CronJob>(context, controller);
    monitor::<Job>(context, controller);
    monitor::<Lease>(context, controller);
    monitor::<EndpointSlice>(context, controller);
    monitor::<EventsEvent>(context, controller);
    monitor::<Ingress>(context, controller);
    monitor::<NetworkPolicy>(context, controller);
    monitor::<PodDisruptionBudget>(context, controller);
    monitor::<Role>(context, controller);
    monitor::<RoleBinding>(context, controller);
    if controller.dra.dynamic_resource_allocation {
        monitor::<ResourceClaim>(context, controller);
        monitor::<ResourceClaimTemplate>(context, controller);
    }
}

/// The registry and the monitors, as `NewController` sets them up.
pub(super) fn register_evaluators_and_monitors(context: &ControllerContext<'_>, controller: &Arc<QuotaController>) {
    register_core_evaluators(context, controller);
    monitor_typed_resources(context, controller);
}

impl QuotaController {
    /// One pass of `Sync`: reads discovery and follows the quotable resources that appear and
    /// go (when this process starts leading, then every [`DISCOVERY_PERIOD`]).
    pub(super) fn sync_discovery(&self) {
        let (discovered, error) = match discovery::server_resources(&self.client) {
            Ok(d) => (d, None),
            Err(e) => (Discovery::default(), Some(e.to_string())),
        };
        let mut resources: BTreeMap<String, ApiResource> =
            quotable_resources(&discovered).into_iter().map(|r| (r.monitor_key(), r)).collect();
        let mut monitors = self.monitors.lock();
        if let Some(e) = error {
            log::error!("Error during resource discovery: failed to discover resources: {e}");
            return;
        }
        if discovered.is_partial() {
            let groups: Vec<&String> = discovered.failed.keys().collect();
            log::error!(
                "Error during resource discovery: unable to retrieve the complete list of server APIs: {groups:?}"
            );
            if resources.is_empty() {
                return;
            }
            // The resources of the failed groups that were known stay monitored.
            for (key, resource) in &monitors.known {
                if discovered.failed.contains_key(&resource.api_version()) {
                    resources.insert(key.clone(), resource.clone());
                }
            }
        }
        let (old, new): (BTreeSet<&String>, BTreeSet<&String>) =
            (monitors.known.keys().collect(), resources.keys().collect());
        if old == new {
            log::debug!("no resource updates from discovery, skipping resource quota sync");
            return;
        }
        let added: Vec<&&String> = new.difference(&old).collect();
        let removed: Vec<&&String> = old.difference(&new).collect();
        log::info!(
            "syncing resource quota controller with updated resources from discovery: added: {added:?}, removed: {removed:?}"
        );
        self.sync_monitors(&mut monitors, &resources);
        monitors.known = resources;
        drop(monitors);
        // `StartMonitors`: the informers of new monitors start now.
        self.informers.start();
        log::info!("synced quota controller");
    }

    /// `SyncMonitors` for the resources without typed monitors: a monitor for each of
    /// `resources`, none for the rest.
    fn sync_monitors(&self, monitors: &mut Monitors, resources: &BTreeMap<String, ApiResource>) {
        let wanted: BTreeMap<&String, &ApiResource> = resources
            .iter()
            .filter(|(_, r)| !monitors.typed.contains(&GroupResource::new(&r.group, &r.plural)))
            .collect();
        let gone: Vec<String> = monitors.discovered.keys().filter(|k| !wanted.contains_key(k)).cloned().collect();
        for key in &gone {
            if let Some((_, active)) = monitors.discovered.remove(key) {
                active.store(false, Ordering::Release);
            }
        }
        let (mut added, mut kept) = (0, 0);
        for (key, resource) in wanted {
            if monitors.discovered.contains_key(key) {
                kept += 1;
                continue;
            }
            let active = self.monitor_discovered(resource);
            monitors.discovered.insert(key.clone(), (resource.clone(), active));
            added += 1;
        }
        log::debug!("quota synced monitors: added {added}, kept {kept}, removed {}", gone.len());
    }

    /// `controllerFor` + the evaluator half of `SyncMonitors` for a discovered resource: its
    /// deletions replenish (`DefaultUpdateFilter` lets no update of it through), and a resource
    /// without an evaluator gets an object-count one over the monitor's informer.
    fn monitor_discovered(&self, resource: &ApiResource) -> Arc<AtomicBool> {
        let informer = self.informers.for_resource(resource);
        let group_resource = GroupResource::new(&resource.group, &resource.plural);
        if self.registry.get(&group_resource).is_none() {
            let lister = informer.clone();
            let not_ready = NotSynced { resource: resource.to_string() };
            let list: ListFn<PartialObjectMetadata> = Box::new(move |namespace| {
                if !lister.has_synced() {
                    return Err(Box::new(not_ready.clone()));
                }
                Ok(lister.namespace_metadata(namespace))
            });
            let evaluator = ListingEvaluator::object_count(group_resource.clone(), list, None);
            self.registry.add(Arc::new(evaluator));
            log::info!("QuotaMonitor created object count evaluator for {group_resource}");
        }
        let active = Arc::new(AtomicBool::new(true));
        let (on, changes) = (active.clone(), self.resource_changes_sender());
        informer.add_metadata_handler(Box::new(move |event: &Event<PartialObjectMetadata>| {
            if !on.load(Ordering::Acquire) {
                return;
            }
            if let Event::Deleted { object, .. } = event {
                changes(&group_resource, object.metadata.namespace.as_deref().unwrap_or(""));
            }
        }));
        active
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(spec: serde_json::Value, status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec, "status": status})).expect("a pod")
    }

    fn running(cpu: &str) -> serde_json::Value {
        json!({"phase": "Running", "containerStatuses": [{"name": "c", "image": "x", "imageID": "", "ready": true,
            "restartCount": 0, "resources": {"requests": {"cpu": cpu}}}]})
    }

    #[test]
    fn pod_updates_that_may_lower_usage() {
        let spec = json!({"containers": [{"name": "c", "image": "x"}]});
        let (old, new) = (pod(spec.clone(), running("1")), pod(spec.clone(), running("1000m")));
        assert!(!Pod::update_requires_replenishment(&old, &new, true), "equal by value");
        let resized = pod(spec.clone(), running("500m"));
        assert!(Pod::update_requires_replenishment(&old, &resized, true));
        assert!(!Pod::update_requires_replenishment(&old, &resized, false), "without InPlacePodVerticalScaling");
        let done = pod(spec.clone(), json!({"phase": "Succeeded"}));
        assert!(Pod::update_requires_replenishment(&old, &done, false));
        assert!(!Pod::update_requires_replenishment(&done, &old, false));
        let mut deadline = spec;
        deadline["activeDeadlineSeconds"] = json!(5);
        assert!(Pod::update_requires_replenishment(&old, &pod(deadline, running("1")), false));
    }

    #[test]
    fn service_type_changes_and_claim_updates_replenish() {
        let service = |t: &str| -> Service {
            serde_json::from_value(json!({"metadata": {"name": "s"}, "spec": {"type": t}})).expect("a service")
        };
        assert!(Service::update_requires_replenishment(&service("NodePort"), &service("ClusterIP"), true));
        assert!(!Service::update_requires_replenishment(&service("ClusterIP"), &service("ExternalName"), true));
        let claim = PersistentVolumeClaim::default();
        assert!(PersistentVolumeClaim::update_requires_replenishment(&claim, &claim, true));
        assert!(!ConfigMap::update_requires_replenishment(&ConfigMap::default(), &ConfigMap::default(), true));
    }

    fn api_resource(group: &str, plural: &str, namespaced: bool, verbs: &[&str]) -> ApiResource {
        ApiResource {
            group: group.into(),
            version: "v1".into(),
            kind: "K".into(),
            plural: plural.into(),
            namespaced,
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn quotable_resources_are_namespaced_with_create_list_watch_delete_and_not_ignored() {
        let all = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];
        let discovery = Discovery {
            all: vec![
                api_resource("example.com", "widgets", true, &all),
                api_resource("", "configmaps", true, &all),
                // Cluster-scoped.
                api_resource("example.com", "clusterwidgets", false, &all),
                // Not every verb.
                api_resource("", "bindings", true, &["create"]),
                api_resource("example.com", "readonly", true, &["get", "list", "watch"]),
                api_resource("example.com", "nowatch", true, &["create", "list", "delete"]),
                // Ignored.
                api_resource("", "events", true, &all),
                api_resource("events.k8s.io", "events", true, &all),
                api_resource("authorization.k8s.io", "localsubjectaccessreviews", true, &all),
            ],
            failed: BTreeMap::new(),
        };
        let names: Vec<String> = quotable_resources(&discovery).iter().map(ApiResource::group_resource).collect();
        assert_eq!(names, ["widgets.example.com", "configmaps"]);
    }
}
