//! The resource quota controller (`pkg/controller/resourcequota/resource_quota_controller.go`):
//! keeps each ResourceQuota's `status.hard` equal to `spec.hard` and `status.used` equal to
//! what the namespace's objects use of every resource named in it.
//!
//! As upstream: two queues of quota keys, `resourcequota_primary` and `resourcequota_priority`
//! (quotas whose status lacks hard limits or usage the controller can measure go first), each
//! with `--concurrent-resource-quota-syncs` workers; a full recalculation of every quota each
//! `--resource-quota-sync-period`; and replenishment: when an object changes so that usage may
//! drop (a pod turns terminal, a Service changes type, anything is deleted), the namespace's
//! quotas that track its resource are synced again (`monitor.rs`). Creations need no
//! replenishment: admission charges them to `status.used` as it admits them. The quotable
//! resources are discovered when this process starts leading and again every 30 s (`Sync`),
//! so that custom resources are counted (`count/<resource>.<group>`) too.

mod monitor;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ResourceQuota, ResourceQuotaStatus};
use parking_lot::Mutex;

use crate::apimachinery::errors::{Aggregate, BoxError};
use crate::client::{self, Api, Client, PostParams};
use crate::quota::resources::{self, ResourceList, from_api, to_api};
use crate::quota::scopes::selector_requirements;
use crate::quota::{GroupResource, Registry, calculate_usage};
use crate::runtime::controller::{Controller, ControllerContext, SyncError};
use crate::runtime::informer::{Event, Informer, SharedInformerFactory, object_key};
use crate::runtime::workqueue::WorkQueue;

/// `startResourceQuotaController` + `NewController`.
/// The controller's settings.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// `--concurrent-resource-quota-syncs`.
    pub workers: usize,
    /// `--resource-quota-sync-period`: how often every quota is recounted; zero never.
    pub resync_period: Duration,
    /// The InPlacePodVerticalScaling gate: pods are charged what the kubelet reports when larger.
    pub use_status_resources: bool,
    /// The DRA gates the resource claim evaluator follows.
    pub dra: DraGates,
    /// The VolumeAttributesClass gate: claims are in the VolumeAttributesClass scope of the
    /// classes they name.
    pub volume_attributes_class: bool,
}

/// The feature gates of dynamic resource allocation that quota follows.
#[derive(Debug, Clone, Copy, Default)]
pub struct DraGates {
    /// DynamicResourceAllocation: resource claims are quotable and have their own evaluator.
    pub dynamic_resource_allocation: bool,
    /// DRAExtendedResource: claims made for pods' extended resources are charged as those.
    pub extended_resource: bool,
}

/// Why a quota's sync failed (the key is requeued). The status write's API error is kept whole,
/// so that a conflict or a server's `Retry-After` reaches the queue with its kind.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The usage of a resource could not be counted.
    #[error("{0}")]
    Usage(#[source] BoxError),
    /// The status could not be written.
    #[error("{0}")]
    UpdateStatus(#[source] client::Error),
    /// Several steps failed (`utilerrors.NewAggregate`): `[a, b]`.
    #[error("{0}")]
    Aggregate(#[from] Aggregate),
}

/// `NewController` + `Run`: the primary and priority queues of quota keys, the monitors'
/// resource changes, and the periodic full recount.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let quotas = context.informers.informer::<ResourceQuota>();
    let registry = Arc::new(Registry::default());
    let controller = Arc::new(QuotaController {
        client: context.client.clone(),
        quotas: quotas.clone(),
        queue: WorkQueue::new("resourcequota_primary"),
        missing_usage: WorkQueue::new("resourcequota_priority"),
        resource_changes: WorkQueue::new("resource_quota_controller_resource_changes"),
        next_change: Arc::new(AtomicU64::new(0)),
        registry: registry.clone(),
        informers: context.informers.clone(),
        monitors: Mutex::new(monitor::Monitors::default()),
        use_status_resources: config.use_status_resources,
        dra: config.dra,
        volume_attributes_class: config.volume_attributes_class,
    });
    monitor::register_evaluators_and_monitors(context, &controller);
    let handler = controller.clone();
    quotas.add_handler(move |event: &Event<ResourceQuota>| handler.on_quota_event(event));
    let workers = config.workers;
    let (primary, priority, changes) = (controller.clone(), controller.clone(), controller.clone());
    let (starter, discoverer) = (controller.clone(), controller.clone());
    let built = Controller::new()
        .with_queue(&controller.queue, workers, move |key: &String| {
            primary.sync_resource_quota_from_key(key).map_err(SyncError::of)
        })
        .with_queue(&controller.missing_usage, workers, move |key: &String| {
            priority.sync_resource_quota_from_key(key).map_err(SyncError::of)
        })
        .with_queue(&controller.resource_changes, workers, move |change: &ResourceChange| {
            changes.replenish_quota(&change.resource, &change.namespace);
            Ok(())
        })
        // Discovery is read with the controller's own identity, only while leading: when this
        // process starts leading, then every 30 s (`Sync`).
        .on_start(move || {
            starter.sync_discovery();
            Ok(())
        })
        .resync_every("discovery", monitor::DISCOVERY_PERIOD, move || discoverer.sync_discovery());
    if config.resync_period.is_zero() {
        log::info!("periodic quota controller resync disabled");
        return built;
    }
    built.every("resync", config.resync_period, move || controller.enqueue_all())
}

/// The controller (upstream's `resourcequota.Controller`).
pub struct QuotaController {
    client: Client,
    quotas: Arc<Informer<ResourceQuota>>,
    /// `resourcequota_primary`.
    queue: WorkQueue<String>,
    /// `resourcequota_priority`: quotas missing usage information.
    missing_usage: WorkQueue<String>,
    /// The quota monitor's `resourceChanges`: one item per change that may lower usage.
    resource_changes: WorkQueue<ResourceChange>,
    next_change: Arc<AtomicU64>,
    registry: Arc<Registry>,
    /// The factory the monitors of discovered resources take their informers from.
    informers: SharedInformerFactory,
    /// The quota monitor's resources and discovered monitors.
    monitors: Mutex<monitor::Monitors>,
    /// The InPlacePodVerticalScaling gate: pods are charged what the kubelet reports when larger.
    use_status_resources: bool,
    dra: DraGates,
    volume_attributes_class: bool,
}

/// A change of a `resource` object in `namespace` that may lower usage. Upstream queues each
/// `*event`, so changes are numbered (`seq`) to stay distinct in the queue.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ResourceChange {
    seq: u64,
    resource: GroupResource,
    namespace: String,
}

fn status_of(quota: &ResourceQuota) -> (ResourceList, ResourceList) {
    let status = quota.status.as_ref();
    (from_api(status.and_then(|s| s.hard.as_ref())), from_api(status.and_then(|s| s.used.as_ref())))
}

fn spec_hard(quota: &ResourceQuota) -> ResourceList {
    from_api(quota.spec.as_ref().and_then(|s| s.hard.as_ref()))
}

impl QuotaController {
    /// The quota informer's handlers: additions, changes of `spec.hard` and deletions. Status
    /// updates (this controller's own) are ignored; the periodic full resync recounts.
    fn on_quota_event(&self, event: &Event<ResourceQuota>) {
        match event {
            Event::Added(quota) => self.add_quota(quota),
            Event::Updated { old, new } => {
                if !resources::equals(&spec_hard(old), &spec_hard(new)) {
                    self.add_quota(new);
                }
            }
            Event::Deleted { object, .. } => self.queue.add(object_key(&object.metadata)),
        }
    }

    /// `addQuota`: the priority queue for quotas missing usage information, the primary queue
    /// otherwise.
    fn add_quota(&self, quota: &ResourceQuota) {
        let key = object_key(&quota.metadata);
        if missing_usage(quota, &self.registry) {
            self.missing_usage.add(key);
        } else {
            self.queue.add(key);
        }
    }

    /// `enqueueAll`: every quota into the primary queue, for a full recalculation.
    fn enqueue_all(&self) {
        for quota in self.quotas.store().list() {
            self.queue.add(object_key(&quota.metadata));
        }
        log::debug!("resource quota controller queued all resource quota for full calculation of usage");
    }

    /// The quota monitor's handlers: a change of a `resource` object in `namespace` that may
    /// lower usage, queued on `resource_quota_controller_resource_changes`.
    fn resource_changed(&self, resource: &GroupResource, namespace: &str) {
        (self.resource_changes_sender())(resource, namespace);
    }

    /// What [`QuotaController::resource_changed`] does, for handlers that do not hold the
    /// controller.
    fn resource_changes_sender(&self) -> impl Fn(&GroupResource, &str) + Send + Sync + 'static {
        let (queue, next) = (self.resource_changes.clone(), self.next_change.clone());
        move |resource, namespace| {
            let seq = next.fetch_add(1, Ordering::Relaxed);
            queue.add(ResourceChange { seq, resource: resource.clone(), namespace: namespace.to_string() });
        }
    }

    /// `replenishQuota`: a `resource` object in `namespace` changed so that usage may drop; the
    /// namespace's quotas with limits on what the resource's evaluator measures are synced.
    fn replenish_quota(&self, resource: &GroupResource, namespace: &str) {
        let Some(evaluator) = self.registry.get(resource) else { return };
        for quota in self.quotas.store().list_namespace(namespace) {
            // Upstream looks at `status.hard` only. The cached quota may not show this
            // controller's first status write yet, and a replenishment dropped then would wait
            // for the next full resync: `spec.hard` is consulted as well.
            let (mut hard, _) = status_of(&quota);
            hard.extend(spec_hard(&quota));
            if !evaluator.matching_resources(&resources::resource_names(&hard)).is_empty() {
                self.queue.add(object_key(&quota.metadata));
            }
        }
    }

    /// `syncResourceQuotaFromKey`.
    fn sync_resource_quota_from_key(&self, key: &str) -> Result<(), Error> {
        let started = Instant::now();
        let result = match self.quotas.store().get(key) {
            None => {
                log::info!("Resource quota has been deleted {key}");
                Ok(())
            }
            Some(quota) => self.sync_resource_quota(&quota),
        };
        log::debug!("finished syncing resource quota {key:?} ({:?})", started.elapsed());
        result
    }

    /// `syncResourceQuota`: recounts the quota's usage and writes the status when the hard
    /// limits or the usage differ from what it says. On counting errors the resources that
    /// could be counted are still written, and the errors returned (the key is requeued).
    fn sync_resource_quota(&self, quota: &ResourceQuota) -> Result<(), Error> {
        let (status, mut errors) = updated_status(quota, &self.registry);
        if let Some(status) = status {
            let mut usage = quota.clone();
            usage.status = Some(status);
            let namespace = quota.metadata.namespace.as_deref().unwrap_or("");
            let api = Api::<ResourceQuota>::namespaced(&self.client, namespace);
            let name = quota.metadata.name.as_deref().unwrap_or("");
            if let Err(e) = api.replace_status(name, &usage, &PostParams::default()) {
                errors.push(Error::UpdateStatus(e));
            }
        }
        Ok(Aggregate::from_errors(errors)?)
    }
}

/// Whether `addQuota` puts the quota in the priority queue: its status lacks the spec's hard
/// limits, or lacks usage of a resource some evaluator measures.
fn missing_usage(quota: &ResourceQuota, registry: &Registry) -> bool {
    let (status_hard, used) = status_of(quota);
    if !resources::equals(&spec_hard(quota), &status_hard) {
        return true;
    }
    let evaluators = registry.list();
    let measurable =
        |name: &String| evaluators.iter().any(|e| !e.matching_resources(std::slice::from_ref(name)).is_empty());
    status_hard.keys().any(|name| !used.contains_key(name) && measurable(name))
}

/// The counting half of `syncResourceQuota`: the status to write (`None` when hard limits and
/// usage are what the status says, compared by value as `quota.Equals` does) and the counting
/// errors. Resources that could not be counted keep their last usage.
fn updated_status(quota: &ResourceQuota, registry: &Registry) -> (Option<ResourceQuotaStatus>, Vec<Error>) {
    let (status_hard, status_used) = status_of(quota);
    let hard = spec_hard(quota);
    let status = quota.status.as_ref();
    // The first sync always writes: the status has no hard limits or no usage yet.
    let mut dirty = !resources::equals(&hard, &status_hard)
        || status.and_then(|s| s.hard.as_ref()).is_none()
        || status.and_then(|s| s.used.as_ref()).is_none();

    let namespace = quota.metadata.namespace.as_deref().unwrap_or("");
    let spec = quota.spec.as_ref();
    let scopes = spec.and_then(|s| s.scopes.clone()).unwrap_or_default();
    let selector = selector_requirements(spec.and_then(|s| s.scope_selector.as_ref()));
    let (new_usage, errors) = calculate_usage(namespace, &scopes, &hard, registry, &selector);
    let mut used = status_used.clone();
    used.extend(new_usage);
    let used = resources::mask(&used, &resources::resource_names(&hard));

    dirty = dirty || !resources::equals(&used, &status_used);
    // Empty lists are left out, as Go's `omitempty` does.
    let non_empty = |list: &ResourceList| (!list.is_empty()).then(|| to_api(list));
    let status = dirty.then(|| ResourceQuotaStatus { hard: non_empty(&hard), used: non_empty(&used) });
    (status, errors.into_iter().map(|e| Error::Usage(e.into())).collect())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use serde_json::json;

    use super::*;
    use crate::quota::generic::ListingEvaluator;
    use crate::quota::pods;

    fn quota(spec: serde_json::Value, status: serde_json::Value) -> ResourceQuota {
        serde_json::from_value(json!({"metadata": {"name": "q", "namespace": "ns"}, "spec": spec, "status": status}))
            .expect("a quota")
    }

    /// Pods `a` (100m cpu) and `b` (0.9 cpu, BestEffort-free), and configmaps that cannot be
    /// listed yet.
    fn registry() -> Registry {
        let pod = |name: &str, cpu: &str| -> Arc<Pod> {
            Arc::new(
                serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"containers": [
                    {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}}))
                .expect("a pod"),
            )
        };
        let listed = vec![pod("a", "100m"), pod("b", "0.9")];
        Registry::new(vec![
            Arc::new(ListingEvaluator::new(
                GroupResource::new("", "pods"),
                Box::new(move |_| Ok(listed.clone())),
                Box::new(pods::matching_resources),
                pods::matches_scope,
                Box::new(|pod| pods::usage(pod, jiff::Timestamp::now(), true)),
            )),
            Arc::new(ListingEvaluator::<ConfigMap>::object_count(
                GroupResource::new("", "configmaps"),
                Box::new(|_| Err("/v1, Resource=configmaps not yet synced".into())),
                Some("configmaps"),
            )),
        ])
    }

    fn text(
        list: Option<&std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
    ) -> String {
        list.into_iter().flatten().map(|(n, q)| format!("{n}={}", q.0)).collect::<Vec<_>>().join(",")
    }

    #[test]
    fn first_sync_writes_hard_and_exact_usage() {
        let q = quota(json!({"hard": {"pods": "5", "requests.cpu": "2", "configmaps": "3"}}), json!({}));
        let (status, errors) = updated_status(&q, &registry());
        let status = status.expect("a first sync writes");
        assert_eq!(text(status.hard.as_ref()), "configmaps=3,pods=5,requests.cpu=2");
        // configmaps could not be counted: no usage for it, and the error is reported.
        assert_eq!(text(status.used.as_ref()), "pods=2,requests.cpu=1");
        let errors: Vec<String> = errors.iter().map(Error::to_string).collect();
        assert_eq!(errors, ["failed to list content: /v1, Resource=configmaps not yet synced"]);
    }

    #[test]
    fn unchanged_usage_is_not_written_and_uncounted_usage_is_kept() {
        let synced = quota(
            json!({"hard": {"pods": "5", "requests.cpu": "2", "configmaps": "3"}}),
            json!({"hard": {"pods": "5", "requests.cpu": "2000m", "configmaps": "3"},
                "used": {"pods": "2", "requests.cpu": "1000m", "configmaps": "1"}}),
        );
        let (status, _) = updated_status(&synced, &registry());
        assert!(status.is_none(), "equal by value: no write");
        // A new hard limit is written, with the last usage of what could not be counted.
        let edited = quota(
            json!({"hard": {"pods": "1", "requests.cpu": "2", "configmaps": "3"}}),
            synced.status.clone().map(|s| serde_json::to_value(s).expect("json")).unwrap_or_default(),
        );
        let status = updated_status(&edited, &registry()).0.expect("a write");
        assert_eq!(text(status.hard.as_ref()), "configmaps=3,pods=1,requests.cpu=2");
        assert_eq!(text(status.used.as_ref()), "configmaps=1,pods=2,requests.cpu=1");
        // Usage of resources no longer limited is dropped.
        let fewer =
            quota(json!({"hard": {"pods": "5"}}), json!({"hard": {"pods": "5"}, "used": {"pods": "2", "cpu": "1"}}));
        let status = updated_status(&fewer, &registry()).0.expect("a write");
        assert_eq!(text(status.used.as_ref()), "pods=2");
    }

    #[test]
    fn quotas_missing_usage_go_first() {
        let registry = registry();
        let unsynced = quota(json!({"hard": {"pods": "5"}}), json!({}));
        assert!(missing_usage(&unsynced, &registry));
        let synced = quota(json!({"hard": {"pods": "5"}}), json!({"hard": {"pods": "5"}, "used": {"pods": "0"}}));
        assert!(!missing_usage(&synced, &registry));
        let no_usage = quota(json!({"hard": {"pods": "5"}}), json!({"hard": {"pods": "5"}}));
        assert!(missing_usage(&no_usage, &registry));
        // Usage nothing can measure is not waited for.
        let unmeasurable = quota(json!({"hard": {"example.com/x": "5"}}), json!({"hard": {"example.com/x": "5"}}));
        assert!(!missing_usage(&unmeasurable, &registry));
    }

    #[test]
    fn aggregate_errors_as_upstream() {
        let usage = |text: &str| Error::Usage(text.into());
        let aggregate = |errors: Vec<Error>| Aggregate::from_errors(errors).map_err(|e| Error::from(e).to_string());
        assert_eq!(aggregate(vec![]), Ok(()));
        assert_eq!(aggregate(vec![usage("a")]), Err("a".into()));
        assert_eq!(aggregate(vec![usage("a"), usage("b")]), Err("[a, b]".into()));
    }
}
