//! The device taint eviction controller (`device-taint-eviction-controller`), after upstream
//! v1.36's `pkg/controller/devicetainteviction/device_taint_eviction.go` (gates
//! `DynamicResourceAllocation` and `DRADeviceTaints`): a pod that runs with an allocated
//! ResourceClaim reserved for it, one of whose devices has a NoExecute taint in its
//! ResourceSlice that the allocation does not tolerate, is deleted when the taint takes effect:
//! at the taint's `timeAdded`, or that plus the shortest `tolerationSeconds` of the allocated
//! device's tolerations of it (a toleration without seconds ignores the taint). Before the
//! delete, a Normal `DeviceTaintManagerEviction` Event "Marking for deletion" and the
//! `DisruptionTarget` condition (reason `DeletionByDeviceTaintManager`). A pending deletion that
//! is no longer needed (the taint went, the claim was deallocated) is cancelled with the Event
//! "Cancelling deletion".
//!
//! The informers' handlers keep the in-memory view of [`tracker`] under one lock and queue
//! work; the workers of the `device-taint-eviction-controller` queue (rate limited, delaying)
//! make the API calls. With the `DRADeviceTaintRules` gate (beta, off by default in v1.36), the
//! `resource.k8s.io/v1beta2` DeviceTaintRules also taint the devices they select, and their
//! `EvictionInProgress` status condition is kept up to date (see [`rule_status`]). Without the
//! gate no rule is watched. The PodGroup reservations of `DRAWorkloadResourceClaims` (alpha,
//! off) are not ported.

mod rule_status;
pub mod tracker;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodCondition};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::resource::v1beta2::DeviceTaintRule;
use parking_lot::Mutex;

use crate::apimachinery::clock::{Clock, RealClock, whole_seconds};
use crate::apimachinery::errors::BoxError;
use crate::apimachinery::pod::update_pod_condition;
use crate::client::{self, Api, Client, DeleteParams, Patch, PostParams, Preconditions};
use crate::controllers::podutil::patch_pod_status;
use crate::lru::LruSet;
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::events::{EventRecorder, EventType};
use crate::runtime::informer::{Event, Informer};
use crate::runtime::workqueue::WorkQueue;

use rule_status::Counts;
use tracker::{Action, Eviction, NO_EXECUTE, ObjectRef, PodLister, Tracker};

/// `maxUIDCacheEntries`: the evicted pods remembered.
const MAX_UID_CACHE_ENTRIES: usize = 500;

/// What the controller takes from the flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// `--concurrent-device-taint-eviction-syncs` (default 8).
    pub workers: usize,
    /// The `DRADeviceTaintRules` gate: watch DeviceTaintRules, evict for them and keep their
    /// status.
    pub device_taint_rules: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config { workers: 8, device_taint_rules: false }
    }
}

/// An item of the queue (`workItem`): a pod that may be due for deletion, or a rule whose
/// status may need an update.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum WorkItem {
    /// `podRef`: a pod whose deletion may be due.
    Pod(ObjectRef),
    /// `ruleRef`: a DeviceTaintRule whose status may need an update.
    Rule(ObjectRef),
}

/// Why a work item could not be handled.
#[derive(Debug, thiserror::Error)]
enum Error {
    /// Reading or deleting the pod failed.
    #[error("{0}")]
    Api(#[from] client::Error),
    /// The pod's `DisruptionTarget` condition could not be written.
    #[error("failed to patch status for pod \"{namespace}/{name}\": {source}")]
    PatchPodStatus { namespace: String, name: String, source: BoxError },
    /// The rule's `EvictionInProgress` condition could not be applied.
    #[error("add condition to DeviceTaintRule status: {0}")]
    RuleStatus(#[source] client::Error),
}

impl From<Error> for SyncError {
    fn from(e: Error) -> SyncError {
        SyncError::of(e)
    }
}

/// `New` + `Run`. It cannot fail.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    // Registered with the controller, as upstream's `metrics.Register()`: both show at zero.
    pod_deletions_total();
    pod_deletion_duration();
    let queue = WorkQueue::new(context.name);
    // Only waited for, as upstream.
    context.informers.informer::<DeviceClass>();
    let controller = Arc::new(DeviceTaintEviction {
        name: context.name,
        client: context.client.clone(),
        recorder: context.recorder.clone(),
        queue: queue.clone(),
        pods: context.informers.informer::<Pod>(),
        claims: context.informers.informer::<ResourceClaim>(),
        slices: context.informers.informer::<ResourceSlice>(),
        rules: config.device_taint_rules.then(|| context.informers.informer::<DeviceTaintRule>()),
        clock: Arc::new(RealClock),
        state: Mutex::new(State { tracker: Tracker::default(), evicted: LruSet::new(MAX_UID_CACHE_ENTRIES) }),
    });
    let handler = controller.clone();
    controller.claims.add_handler(move |event: &Event<ResourceClaim>| {
        let (old, new) = pair(event);
        handler.changed(|tracker, pods| tracker.claim_changed(old, new, pods));
    });
    let handler = controller.clone();
    controller.pods.add_handler(move |event: &Event<Pod>| {
        let (old, new) = pair(event);
        handler.changed(|tracker, _| tracker.pod_changed(old.map(|p| &**p), new.map(|p| &**p)));
    });
    if let Some(rules) = &controller.rules {
        let handler = controller.clone();
        rules.add_handler(move |event: &Event<DeviceTaintRule>| {
            let (old, new) = pair(event);
            handler.changed(|tracker, pods| tracker.rule_changed(old, new, pods));
        });
    }
    let handler = controller.clone();
    controller.slices.add_handler(move |event: &Event<ResourceSlice>| {
        if let Event::Deleted { final_state_unknown: true, .. } = event {
            // Upstream's slice handler takes only a slice, not a tombstone
            // (`DeletedFinalStateUnknown`): it logs and keeps the pool as it was.
            log::error!("Expected ResourceSlice actual=\"cache.DeletedFinalStateUnknown\"");
            return;
        }
        let (old, new) = pair(event);
        handler.changed(|tracker, pods| tracker.slice_changed(old, new, pods));
    });
    Controller::new().with_queue(&queue, config.workers, move |item: &WorkItem| controller.handle_work(item))
}

/// The old and the new object of an informer event (`None`: added, or deleted).
fn pair<K>(event: &Event<K>) -> (Option<&Arc<K>>, Option<&Arc<K>>) {
    match event {
        Event::Added(new) => (None, Some(new)),
        Event::Updated { old, new } => (Some(old), Some(new)),
        Event::Deleted { object, .. } => (Some(object), None),
    }
}

/// What the lock guards (the fields under upstream's `mutex`).
struct State {
    tracker: Tracker,
    /// `evictedPods` (upstream's `uid_cache.go`): the pods already evicted, so that a work item
    /// queued again for one does nothing.
    evicted: LruSet<String>,
}

/// The pods of the informer's cache.
struct CachedPods<'a>(&'a Informer<Pod>);

impl PodLister for CachedPods<'_> {
    fn get(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.0.store().get(&format!("{namespace}/{name}"))
    }

    fn list(&self) -> Vec<Arc<Pod>> {
        self.0.store().list()
    }
}

/// Upstream's device taint eviction `Controller`.
struct DeviceTaintEviction {
    name: &'static str,
    client: Client,
    recorder: EventRecorder,
    queue: WorkQueue<WorkItem>,
    pods: Arc<Informer<Pod>>,
    claims: Arc<Informer<ResourceClaim>>,
    slices: Arc<Informer<ResourceSlice>>,
    /// Only with `DRADeviceTaintRules`.
    rules: Option<Arc<Informer<DeviceTaintRule>>>,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
}

impl DeviceTaintEviction {
    /// Applies an informer change to the view and carries out what it requires. Nothing here
    /// blocks: queueing and recording an Event are in memory.
    fn changed(&self, change: impl FnOnce(&mut Tracker, &dyn PodLister)) {
        let mut state = self.state.lock();
        change(&mut state.tracker, &CachedPods(&self.pods));
        let actions = state.tracker.take_actions();
        drop(state);
        self.carry_out(actions);
    }

    fn carry_out(&self, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Evict { pod, when } => {
                    let delay = self.until(when);
                    if delay.is_zero() {
                        log::debug!("Adding immediate pod eviction pod=\"{pod}\" eviction=\"{when}\"");
                        self.queue.add(WorkItem::Pod(pod));
                    } else {
                        log::debug!(
                            "Adding delayed pod eviction pod=\"{pod}\" eviction=\"{when}\" delay=\"{delay:?}\""
                        );
                        self.queue.add_after(WorkItem::Pod(pod), delay);
                    }
                }
                Action::Cancelled(pod) => self.emit(&pod, "Cancelling deletion"),
                Action::RuleStatus { rule, delay } if delay.is_zero() => self.queue.add(WorkItem::Rule(rule)),
                Action::RuleStatus { rule, delay } => self.queue.add_after(WorkItem::Rule(rule), delay),
            }
        }
    }

    /// How long until `when` (zero when it has come).
    fn until(&self, when: jiff::Timestamp) -> Duration {
        Duration::try_from(when.duration_since(self.clock.wall())).unwrap_or_default()
    }

    /// `handleWork`, with the worker's requeue for a "later".
    fn handle_work(&self, item: &WorkItem) -> SyncResult {
        let again_after = match item {
            WorkItem::Pod(pod) => self.maybe_delete_pod(pod)?,
            WorkItem::Rule(rule) => self.maybe_update_rule_status(rule)?,
        };
        if let Some(delay) = again_after {
            log::trace!("Checking work item again later item={item:?} delay=\"{delay:?}\"");
            self.queue.add_after(item.clone(), delay);
        }
        Ok(())
    }

    // ---- Pods ----

    /// `maybeDeletePod`: deletes the pod if its deletion is still pending and due; `Some`:
    /// check again after that long.
    fn maybe_delete_pod(&self, pod: &ObjectRef) -> Result<Option<Duration>, Error> {
        let eviction = {
            let mut state = self.state.lock();
            let evicted = state.evicted.contains(&pod.uid);
            state.tracker.pending(pod).cloned().filter(|_| !evicted)
        };
        let Some(eviction) = eviction else {
            log::trace!("Work item for pod deletion obsolete, nothing to do pod=\"{pod}\"");
            return Ok(None);
        };
        let wait = self.until(eviction.when);
        if !wait.is_zero() {
            // Not yet: the time may have moved since the item was queued.
            return Ok(Some(wait));
        }
        let deleted = self.add_condition_and_delete_pod(pod)?;
        let actions = {
            // Done either way: forget it, and do not look at the pod again.
            let mut state = self.state.lock();
            state.tracker.forget(pod);
            state.evicted.insert(pod.uid.clone(), ());
            if deleted {
                state.tracker.count_evicted(&eviction.reasons);
            }
            state.tracker.take_actions()
        };
        if deleted {
            self.record_deletion(pod, &eviction);
        }
        self.carry_out(actions);
        Ok(None)
    }

    fn record_deletion(&self, pod: &ObjectRef, eviction: &Eviction) {
        let latency = self.clock.wall().duration_since(eviction.when).as_secs_f64().max(0.0);
        log::info!("Evicted pod by deleting it pod=\"{pod}\" latency=\"{latency}s\" reason=\"{eviction}\"");
        pod_deletions_total().inc(&[]);
        pod_deletion_duration().observe(&[], latency);
    }

    /// `addConditionAndDeletePod`: `Ok(true)` when the pod was deleted (or was being deleted
    /// already), `Ok(false)` when it is gone (or replaced by another of the same name), which
    /// is not counted.
    fn add_condition_and_delete_pod(&self, reference: &ObjectRef) -> Result<bool, Error> {
        let api = Api::<Pod>::namespaced(&self.client, &reference.namespace);
        let pod = match api.get(&reference.name) {
            Ok(pod) => pod,
            Err(e) if e.is_not_found() => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        if pod.metadata.uid.as_deref() != Some(reference.uid.as_str()) {
            return Ok(false);
        }
        if pod.metadata.deletion_timestamp.is_some() {
            return Ok(true);
        }
        self.emit(reference, "Marking for deletion");
        let mut status = pod.status.clone().unwrap_or_default();
        let condition = PodCondition {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            reason: Some("DeletionByDeviceTaintManager".into()),
            message: Some("Device Taint manager: deleting due to NoExecute taint".into()),
            ..PodCondition::default()
        };
        if update_pod_condition(&mut status, condition, self.clock.wall()) {
            // Upstream wraps this error with `%v`: even a 404 is a failure to retry.
            patch_pod_status(&self.client, &pod, &status).map_err(|e| Error::PatchPodStatus {
                namespace: reference.namespace.clone(),
                name: reference.name.clone(),
                source: e.into(),
            })?;
        }
        // The UID precondition: a pod recreated under the name meanwhile stays.
        let preconditions = Preconditions { uid: Some(reference.uid.clone()), resource_version: None };
        let params = DeleteParams { preconditions: Some(preconditions), ..DeleteParams::default() };
        match api.delete(&reference.name, &params) {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// `emitPodDeletionEvent` / `emitCancelPodDeletionEvent`: a Normal
    /// `DeviceTaintManagerEviction` Event on the pod.
    fn emit(&self, pod: &ObjectRef, message: &str) {
        let reference = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod.name.clone()),
            namespace: Some(pod.namespace.clone()),
            uid: Some(pod.uid.clone()),
            ..ObjectReference::default()
        };
        self.recorder.event(&reference, EventType::Normal, "DeviceTaintManagerEviction", message);
    }

    // ---- DeviceTaintRule status ----

    /// `maybeUpdateRuleStatus`: applies the rule's `EvictionInProgress` condition when it
    /// changed, at most every `ruleStatusPeriod` for one generation.
    fn maybe_update_rule_status(&self, reference: &ObjectRef) -> Result<Option<Duration>, Error> {
        let Some(rules) = &self.rules else { return Ok(None) };
        let Some(rule) = rules.store().get(&reference.name) else {
            log::trace!("DeviceTaintRule got deleted, removing from work queue rule=\"{reference}\"");
            return Ok(None);
        };
        if rule.metadata.uid.as_deref() != Some(reference.uid.as_str()) {
            return Ok(None);
        }
        let now = whole_seconds(self.clock.wall());
        if let Some(wait) = rule_status::wait_before_update(&rule, now) {
            return Ok(Some(wait));
        }
        let counts = self.rule_counts(&rule);
        let existing = rule_status::existing_condition(&rule);
        let mut condition = rule_status::desired_condition(&rule, &counts, existing);
        if Some(&condition) == existing {
            return Ok(None);
        }
        condition.last_transition_time = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now);
        log::debug!("Calculated new condition rule=\"{reference}\" condition={condition:?}");
        let params = PostParams { field_manager: Some(self.name.to_string()), force: true, ..PostParams::default() };
        let patch = Patch::Apply(rule_status::apply_patch(&rule, &condition));
        Api::<DeviceTaintRule>::cluster(&self.client)
            .patch_status(&reference.name, &patch, &params)
            .map_err(Error::RuleStatus)?;
        Ok(None)
    }

    /// What the rule's condition reports, counted under the lock; a rule with the `None`
    /// effect is simulated as if it evicted.
    fn rule_counts(&self, rule: &Arc<DeviceTaintRule>) -> Counts {
        let uid = rule.metadata.uid.as_deref().unwrap_or_default();
        let pods = CachedPods(&self.pods);
        let state = self.state.lock();
        let mut counts = Counts { evicted_pods: state.tracker.evicted_by(uid), ..Counts::default() };
        let effect = rule.spec.taint.effect.as_str();
        if effect == rule_status::NONE_EFFECT {
            let simulation = state.tracker.simulate_evicting(rule, &pods);
            (counts.pending_pods, counts.pending_namespaces) = simulation.count_pending_pods(uid, &pods);
            (counts.tainted_slice_devices, counts.tainted_allocated_devices) = simulation.count_tainted_devices(rule);
        } else if effect == NO_EXECUTE {
            (counts.pending_pods, counts.pending_namespaces) = state.tracker.count_pending_pods(uid, &pods);
        }
        counts
    }
}

/// `device_taint_eviction_controller_pod_deletions_total`.
fn pod_deletions_total() -> &'static crate::metrics::CounterVec {
    static CELL: std::sync::OnceLock<Arc<crate::metrics::CounterVec>> = std::sync::OnceLock::new();
    crate::metrics::registered(&CELL, || {
        crate::metrics::CounterVec::counter(
            "device_taint_eviction_controller_pod_deletions_total",
            "[ALPHA] Total number of Pods deleted by DeviceTaintEvictionController since its start.",
            &[],
        )
        .at_zero()
    })
}

/// `device_taint_eviction_controller_pod_deletion_duration_seconds`, 5 ms to 4 min.
fn pod_deletion_duration() -> &'static crate::metrics::HistogramVec {
    static CELL: std::sync::OnceLock<Arc<crate::metrics::HistogramVec>> = std::sync::OnceLock::new();
    crate::metrics::registered(&CELL, || {
        crate::metrics::HistogramVec::new(
            "device_taint_eviction_controller_pod_deletion_duration_seconds",
            "[ALPHA] Latency, in seconds, between the time when a device taint effect has been activated and a \
             Pod's deletion via DeviceTaintEvictionController.",
            &[],
            &[0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 30.0, 60.0, 120.0, 180.0, 240.0],
        )
        .at_zero()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::controllers::testutil::conflict;

    /// The pod status patch's error is held, not its text: a conflict now reaches the queue.
    #[test]
    fn a_conflicting_pod_status_patch_reaches_the_queue_as_a_conflict() {
        let error = Error::PatchPodStatus { namespace: "ns".into(), name: "p".into(), source: conflict().into() };
        let SyncError::Conflict(message) = SyncError::from(error) else { panic!("a conflict") };
        assert!(message.starts_with("failed to patch status for pod \"ns/p\": "), "{message}");
    }
}
