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
//! replenishment: admission charges them to `status.used` as it admits them.

mod monitor;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ResourceQuota, ResourceQuotaStatus};

use crate::client::{Api, Client, PostParams};
use crate::quota::resources::{self, ResourceList, from_api, to_api};
use crate::quota::scopes::selector_requirements;
use crate::quota::{GroupResource, Registry, calculate_usage};
use crate::runtime::controller::{ControllerContext, ControllerDescriptor, ControllerHandle, Reconciler};
use crate::runtime::informer::{Event, Informer, object_key};
use crate::runtime::workqueue::WorkQueue;

pub const RESOURCE_QUOTA: ControllerDescriptor = ControllerDescriptor { name: "resourcequota-controller", init };

/// How often the full-resync thread looks whether the controller is stopping.
const STOP_POLL: Duration = Duration::from_secs(1);

/// `startResourceQuotaController` + `NewController`.
fn init(context: &ControllerContext<'_>) -> Result<ControllerHandle, String> {
    let quotas = context.informers.informer::<ResourceQuota>();
    let registry = Arc::new(Registry::default());
    let controller = Arc::new(QuotaController {
        client: context.client.clone(),
        quotas: quotas.clone(),
        queue: WorkQueue::new("resourcequota_primary"),
        missing_usage: WorkQueue::new("resourcequota_priority"),
        registry: registry.clone(),
        use_status_resources: context.options.generic.feature_gates.is_enabled("InPlacePodVerticalScaling"),
    });
    monitor::register_evaluators_and_monitors(context, &controller);
    let handler = controller.clone();
    quotas.add_handler(move |event: &Event<ResourceQuota>| handler.on_quota_event(event));
    spawn_full_resync(controller.clone(), context.options.resource_quota.sync_period)?;
    let workers = usize::try_from(context.options.concurrency.resource_quota_syncs).unwrap_or(1).max(1);
    Ok(ControllerHandle { queue: controller.queue.clone(), reconciler: controller, workers })
}

/// The controller (upstream's `resourcequota.Controller`).
pub struct QuotaController {
    client: Client,
    quotas: Arc<Informer<ResourceQuota>>,
    /// `resourcequota_primary`.
    queue: WorkQueue<String>,
    /// `resourcequota_priority`: quotas missing usage information.
    missing_usage: WorkQueue<String>,
    registry: Arc<Registry>,
    /// The InPlacePodVerticalScaling gate: pods are charged what the kubelet reports when larger.
    use_status_resources: bool,
}

impl Reconciler for QuotaController {
    fn sync(&self, key: &str) -> Result<(), String> {
        self.sync_resource_quota_from_key(key)
    }

    fn extra_queues(&self) -> Vec<WorkQueue<String>> {
        vec![self.missing_usage.clone()]
    }
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

    /// `addQuota`: the priority queue for quotas whose status lacks the spec's limits or lacks
    /// usage of a resource some evaluator measures, the primary queue otherwise.
    fn add_quota(&self, quota: &ResourceQuota) {
        let key = object_key(&quota.metadata);
        let (status_hard, used) = status_of(quota);
        if !resources::equals(&spec_hard(quota), &status_hard) {
            self.missing_usage.add(key);
            return;
        }
        let evaluators = self.registry.list();
        let measurable =
            |name: &String| evaluators.iter().any(|e| !e.matching_resources(std::slice::from_ref(name)).is_empty());
        if status_hard.keys().any(|name| !used.contains_key(name) && measurable(name)) {
            self.missing_usage.add(key);
            return;
        }
        self.queue.add(key);
    }

    /// `enqueueAll`: every quota into the primary queue, for a full recalculation.
    fn enqueue_all(&self) {
        for quota in self.quotas.store().list() {
            self.queue.add(object_key(&quota.metadata));
        }
        log::debug!("resource quota controller queued all resource quota for full calculation of usage");
    }

    /// `replenishQuota`: a `resource` object in `namespace` changed so that usage may drop; the
    /// namespace's quotas with limits on what the resource's evaluator measures are synced.
    fn replenish_quota(&self, resource: &GroupResource, namespace: &str) {
        let Some(evaluator) = self.registry.get(resource) else { return };
        for quota in self.quotas.store().list_namespace(namespace) {
            let (hard, _) = status_of(&quota);
            if !evaluator.matching_resources(&resources::resource_names(&hard)).is_empty() {
                self.queue.add(object_key(&quota.metadata));
            }
        }
    }

    /// `syncResourceQuotaFromKey`.
    fn sync_resource_quota_from_key(&self, key: &str) -> Result<(), String> {
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
    fn sync_resource_quota(&self, quota: &ResourceQuota) -> Result<(), String> {
        let (status_hard, status_used) = status_of(quota);
        let hard = spec_hard(quota);
        let status = quota.status.as_ref();
        let mut dirty = !resources::equals(&hard, &status_hard)
            || status.and_then(|s| s.hard.as_ref()).is_none()
            || status.and_then(|s| s.used.as_ref()).is_none();

        let namespace = quota.metadata.namespace.as_deref().unwrap_or("");
        let spec = quota.spec.as_ref();
        let scopes = spec.and_then(|s| s.scopes.clone()).unwrap_or_default();
        let selector = selector_requirements(spec.and_then(|s| s.scope_selector.as_ref()));
        let (new_usage, mut errors) = calculate_usage(namespace, &scopes, &hard, &self.registry, &selector);
        let mut used = status_used.clone();
        used.extend(new_usage);
        let used = resources::mask(&used, &resources::resource_names(&hard));

        dirty = dirty || !resources::equals(&used, &status_used);
        if dirty {
            let mut usage = quota.clone();
            // Empty lists are left out, as Go's `omitempty` does.
            let non_empty = |list: &ResourceList| (!list.is_empty()).then(|| to_api(list));
            usage.status = Some(ResourceQuotaStatus { hard: non_empty(&hard), used: non_empty(&used) });
            let api = Api::<ResourceQuota>::namespaced(&self.client, namespace);
            let name = quota.metadata.name.as_deref().unwrap_or("");
            if let Err(e) = api.replace_status(name, &usage, &PostParams::default()) {
                errors.push(e.to_string());
            }
        }
        aggregate(errors)
    }
}

/// `utilerrors.NewAggregate(errs).Error()`: nothing, the one message, or `[a, b]`.
fn aggregate(errors: Vec<String>) -> Result<(), String> {
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.into_iter().next().unwrap_or_default()),
        _ => Err(format!("[{}]", errors.join(", "))),
    }
}

/// The timer of upstream's `Run`: `enqueueAll` at once, then every `period` (none when zero),
/// until the controller's queue shuts down.
fn spawn_full_resync(controller: Arc<QuotaController>, period: Duration) -> Result<(), String> {
    if period.is_zero() {
        log::info!("periodic quota controller resync disabled");
        return Ok(());
    }
    let run = move || {
        loop {
            controller.enqueue_all();
            let next = Instant::now() + period;
            while Instant::now() < next {
                if controller.queue.is_shutting_down() {
                    return;
                }
                std::thread::sleep(STOP_POLL.min(next.saturating_duration_since(Instant::now())));
            }
        }
    };
    std::thread::Builder::new()
        .name("resourcequota-resync".into())
        .spawn(run)
        .map(drop)
        .map_err(|e| format!("cannot start the quota resync thread: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregate_errors_as_upstream() {
        assert_eq!(aggregate(vec![]), Ok(()));
        assert_eq!(aggregate(vec!["a".into()]), Err("a".into()));
        assert_eq!(aggregate(vec!["a".into(), "b".into()]), Err("[a, b]".into()));
    }
}
