//! The pod garbage collector (`pod-garbage-collector-controller`), after upstream v1.36's
//! `pkg/controller/podgc/gc_controller.go`.
//!
//! Every 20 s (`gcCheckPeriod`, measured from the end of the previous pass) it force-deletes,
//! from the informer caches:
//! - terminated pods (phase neither Pending, Running nor Unknown) beyond
//!   `--terminated-pod-gc-threshold`, evicted ones first, then oldest first;
//! - terminating pods on a NotReady node with the `node.kubernetes.io/out-of-service` taint;
//! - pods bound to a node that does not exist: such a node is quarantined for 40 s
//!   (`quarantineTime`), then confirmed missing with a GET before its pods are deleted with the
//!   `DisruptionTarget` condition (reason `DeletionByPodGC`, `observedGeneration` the pod's
//!   generation);
//! - terminating pods that were never scheduled.
//!
//! Each pod not terminated yet is first patched to phase Failed with `status.observedGeneration`
//! its generation (`markFailedAndDeletePod`), then deleted with a grace period of 0.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod, PodCondition, PodStatus};

use crate::apimachinery::clock::{Clock, RealClock};
use crate::apimachinery::pod::{PodFields, PodSummary, observed_generation, phase, update_pod_condition};
use crate::client::{self, Api, Client, DeleteParams};
use crate::controllers::nodeutil::{TAINT_NODE_OUT_OF_SERVICE, is_node_ready, taint_key_exists};
use crate::controllers::podutil::{self, patch_pod_status};
use crate::metrics::ValueFamily;
use crate::runtime::controller::{Controller, ControllerContext};
use crate::runtime::informer::{Informer, object_key};
use crate::runtime::slow_start::map_concurrently;
use crate::runtime::workqueue::{ItemExponentialFailureRateLimiter, WorkQueue};

/// `gcCheckPeriod`.
pub const GC_CHECK_PERIOD: Duration = Duration::from_secs(20);
/// `quarantineTime`: how long a node missing from the cache may take to show up before its
/// pods count as orphaned.
pub const QUARANTINE_TIME: Duration = Duration::from_secs(40);

/// How many deletions of one pass run at once (upstream starts a goroutine per pod).
const PARALLEL_DELETIONS: usize = 16;

/// Reasons of the deletion metrics (`pkg/controller/podgc/metrics`).
const REASON_TERMINATED: &str = "terminated";
const REASON_OUT_OF_SERVICE: &str = "out-of-service";
const REASON_ORPHANED: &str = "orphaned";
const REASON_UNSCHEDULED: &str = "unscheduled";

/// Why a pod could not be force-deleted (logged and counted; the next pass tries again).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The pod left the cache before its status could be patched.
    #[error("failed to patch status for pod {pod}: no longer cached")]
    NotCached {
        /// `namespace/name`.
        pod: String,
    },
    /// Marking the pod Failed failed.
    #[error("failed to patch status for pod {pod}: {source}")]
    PatchStatus {
        /// `namespace/name`.
        pod: String,
        /// The patch's error.
        source: podutil::Error,
    },
    /// The deletion failed.
    #[error("failed to delete pod {pod}: {source}")]
    Delete {
        /// `namespace/name`.
        pod: String,
        /// The deletion's error.
        source: client::Error,
    },
}

/// The controller's settings; the timings other than upstream's are for tests
/// (`NewPodGCInternal`).
#[derive(Clone)]
pub struct Config {
    /// `--terminated-pod-gc-threshold`.
    pub terminated_pod_threshold: i32,
    /// `gcCheckPeriod`.
    pub period: Duration,
    /// `quarantineTime`.
    pub quarantine: Duration,
    /// The clock of the orphaned-pod quarantine.
    pub clock: Arc<dyn Clock>,
}

impl Default for Config {
    /// Upstream's timings and default threshold.
    fn default() -> Self {
        Config {
            terminated_pod_threshold: 12500,
            period: GC_CHECK_PERIOD,
            quarantine: QUARANTINE_TIME,
            clock: Arc::new(RealClock),
        }
    }
}

/// `NewPodGC`: a garbage collection pass every period.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let Config { terminated_pod_threshold, period, quarantine, clock } = config;
    let controller = PodGc {
        client: context.client.clone(),
        pods: context.informers.informer::<Pod>(),
        nodes: context.informers.informer::<Node>(),
        quarantine: Quarantine::new(quarantine, clock),
        terminated_pod_threshold,
    };
    Controller::new().every("gc", period, move || controller.gc())
}

/// Upstream's `PodGCController`.
pub struct PodGc {
    client: Client,
    pods: Arc<Informer<Pod>>,
    nodes: Arc<Informer<Node>>,
    quarantine: Quarantine,
    terminated_pod_threshold: i32,
}

/// `isPodTerminated`.
fn is_terminated(pod: &impl PodFields) -> bool {
    !matches!(pod.pod_phase(), "Pending" | "Running" | "Unknown")
}

fn node_name_of(pod: &impl PodFields) -> &str {
    pod.pod_node_name()
}

fn pod_ref(pod: &impl PodFields) -> String {
    let meta = pod.pod_metadata();
    format!("{}/{}", meta.namespace.as_deref().unwrap_or_default(), meta.name.as_deref().unwrap_or_default())
}

/// `eviction.PodIsEvicted`.
fn is_evicted(pod: &impl PodFields) -> bool {
    phase(pod) == "Failed" && pod.pod_status_reason() == "Evicted"
}

/// `byEvictionAndCreationTimestamp`: evicted pods first, then oldest first, then by name.
fn sort_by_eviction_and_creation<P: PodFields>(pods: &mut [P]) {
    pods.sort_by(|a, b| {
        let (meta_a, meta_b) = (a.pod_metadata(), b.pod_metadata());
        is_evicted(b)
            .cmp(&is_evicted(a))
            .then_with(|| meta_a.creation_timestamp.cmp(&meta_b.creation_timestamp))
            .then_with(|| meta_a.name.cmp(&meta_b.name))
    });
}

/// The terminated pods beyond `threshold`, in deletion order (`gcTerminated`).
fn terminated_beyond_threshold<P: PodFields + Clone>(pods: &[P], threshold: i32) -> Vec<P> {
    let mut terminated: Vec<P> = pods.iter().filter(|p| is_terminated(*p)).cloned().collect();
    let keep = usize::try_from(threshold).unwrap_or(0);
    if terminated.len() <= keep {
        return Vec::new();
    }
    let count = terminated.len() - keep;
    sort_by_eviction_and_creation(&mut terminated);
    terminated.truncate(count);
    terminated
}

/// Terminating pods on NotReady nodes with the out-of-service taint (`gcTerminating`).
fn terminating_on_out_of_service_nodes<P: PodFields + Clone>(
    pods: &[P],
    node: impl Fn(&str) -> Option<Arc<Node>>,
) -> Vec<P> {
    let mut doomed = Vec::new();
    for pod in pods.iter().filter(|p| p.pod_metadata().deletion_timestamp.is_some()) {
        let Some(node) = node(node_name_of(pod)) else {
            log::error!("failed to get node {:?} of terminating pod {}", node_name_of(pod), pod_ref(pod));
            continue;
        };
        let taints = node.spec.as_ref().and_then(|s| s.taints.as_ref());
        if !is_node_ready(&node) && taint_key_exists(taints, TAINT_NODE_OUT_OF_SERVICE) {
            doomed.push(pod.clone());
        }
    }
    sort_by_eviction_and_creation(&mut doomed);
    doomed
}

/// The nodes pods are bound to that the cache does not have.
fn unknown_nodes<'a, P: PodFields>(pods: &'a [P], existing: &BTreeSet<&str>) -> BTreeSet<&'a str> {
    pods.iter().map(|p| node_name_of(p)).filter(|n| !n.is_empty() && !existing.contains(n)).collect()
}

/// Node names waiting out their quarantine (upstream's delaying `nodeQueue`).
struct Quarantine {
    queue: WorkQueue<String>,
    delay: Duration,
}

impl Quarantine {
    fn new(delay: Duration, clock: Arc<dyn Clock>) -> Self {
        // The limiter is never consulted: items only come in through `add_after`.
        let limiter = ItemExponentialFailureRateLimiter::new(Duration::ZERO, Duration::ZERO);
        Quarantine { queue: WorkQueue::with_parts("orphaned_pods_nodes", Box::new(limiter), clock), delay }
    }

    /// Starts the quarantine of `node` unless it is already waiting.
    fn add(&self, node: &str) {
        self.queue.add_after(node.to_string(), self.delay);
    }

    /// The nodes whose quarantine is over, taken out of the quarantine.
    fn take_due(&self) -> Vec<String> {
        let mut due = Vec::new();
        while !self.queue.is_empty() {
            let Some(node) = self.queue.get() else { break };
            self.queue.done(&node);
            due.push(node);
        }
        due
    }
}

/// `pod_gc_collector_force_delete_pods_total` and `..._pod_errors_total`.
fn deletion_metrics() -> &'static (Arc<ValueFamily>, Arc<ValueFamily>) {
    static METRICS: std::sync::OnceLock<(Arc<ValueFamily>, Arc<ValueFamily>)> = std::sync::OnceLock::new();
    METRICS.get_or_init(|| {
        let total = Arc::new(ValueFamily::counter(
            "pod_gc_collector_force_delete_pods_total",
            "[ALPHA] Number of pods that are being forcefully deleted since the Pod GC Controller started.",
            &["namespace", "reason"],
        ));
        let errors = Arc::new(ValueFamily::counter(
            "pod_gc_collector_force_delete_pod_errors_total",
            "[ALPHA] Number of errors encountered when forcefully deleting the pods since the Pod GC Controller started.",
            &["namespace", "reason"],
        ));
        crate::metrics::global().register(total.clone());
        crate::metrics::global().register(errors.clone());
        (total, errors)
    })
}

impl PodGc {
    /// `gc`: one pass over the cached pods and nodes.
    fn gc(&self) {
        let nodes = self.nodes.store().list();
        let existing: BTreeSet<&str> = nodes.iter().filter_map(|n| n.metadata.name.as_deref()).collect();
        // Only the pods some pass below can act on, told by their summaries: the cache is
        // not decoded every 20 s (at 10,000 pods that was a tenth of our CPU in a rollout),
        // and a pod is unpacked only to patch its status before its deletion.
        let pods = self.pods.store().summaries_where(|pod| {
            let node = node_name_of(pod);
            is_terminated(pod)
                || pod.metadata.deletion_timestamp.is_some()
                || !(node.is_empty() || existing.contains(node))
        });
        if self.terminated_pod_threshold > 0 {
            self.gc_terminated(&pods);
        }
        self.gc_terminating(&pods);
        self.gc_orphaned(&pods, &existing);
        self.gc_unscheduled_terminating(&pods);
    }

    fn gc_terminated(&self, pods: &[Arc<PodSummary>]) {
        let doomed = terminated_beyond_threshold(pods, self.terminated_pod_threshold);
        if doomed.is_empty() {
            return;
        }
        log::info!("Garbage collecting pods numPods={}", doomed.len());
        map_concurrently(&doomed, PARALLEL_DELETIONS, |pod| {
            self.delete_counted(pod, None, REASON_TERMINATED);
        });
    }

    fn gc_terminating(&self, pods: &[Arc<PodSummary>]) {
        let store = self.nodes.store();
        let doomed = terminating_on_out_of_service_nodes(pods, |name| store.get(name));
        if doomed.is_empty() {
            return;
        }
        log::debug!(
            "garbage collecting {} pods that are terminating on nodes tainted with {TAINT_NODE_OUT_OF_SERVICE}",
            doomed.len()
        );
        map_concurrently(&doomed, PARALLEL_DELETIONS, |pod| {
            self.delete_counted(pod, None, REASON_OUT_OF_SERVICE);
        });
    }

    /// `gcOrphaned`: quarantines newly unknown nodes, then deletes the pods of the nodes whose
    /// quarantine is over and that a GET confirms are gone.
    fn gc_orphaned(&self, pods: &[Arc<PodSummary>], existing: &BTreeSet<&str>) {
        for node in unknown_nodes(pods, existing) {
            self.quarantine.add(node);
        }
        let deleted: BTreeSet<String> = (self.quarantine.take_due().into_iter())
            .filter(|node| !existing.contains(node.as_str()))
            .filter(|node| self.confirmed_missing(node))
            .collect();
        for pod in pods.iter().filter(|p| deleted.contains(node_name_of(p))) {
            log::debug!("found orphaned pod {} assigned to the node {:?}, deleting", pod_ref(pod), node_name_of(pod));
            if self.delete_counted(pod, Some(orphaned_condition(pod)), REASON_ORPHANED) {
                log::info!("Forced deletion of orphaned Pod succeeded pod={:?}", pod_ref(pod));
            }
        }
    }

    /// `checkIfNodeExists`: an error leaves the node for the next pass.
    fn confirmed_missing(&self, node: &str) -> bool {
        match Api::<Node>::all(&self.client).get_opt(node) {
            Ok(found) => found.is_none(),
            Err(e) => {
                log::error!("error while getting node {node:?}: {e}");
                false
            }
        }
    }

    fn gc_unscheduled_terminating(&self, pods: &[Arc<PodSummary>]) {
        let unscheduled =
            pods.iter().filter(|p| p.metadata.deletion_timestamp.is_some() && node_name_of(*p).is_empty());
        for pod in unscheduled {
            log::debug!("found unscheduled terminating pod {} not assigned to any node, deleting", pod_ref(pod));
            if self.delete_counted(pod, None, REASON_UNSCHEDULED) {
                log::info!("Forced deletion of unscheduled terminating Pod succeeded pod={:?}", pod_ref(pod));
            }
        }
    }

    /// `markFailedAndDeletePodWithCondition` with the deletion metrics; true on success.
    fn delete_counted(&self, pod: &PodSummary, condition: Option<PodCondition>, reason: &str) -> bool {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let (total, errors) = deletion_metrics();
        total.inc(&[namespace, reason]);
        match self.mark_failed_and_delete(pod, condition) {
            Ok(()) => true,
            Err(e) => {
                log::error!("{e}");
                errors.inc(&[namespace, reason]);
                false
            }
        }
    }

    fn mark_failed_and_delete(&self, pod: &PodSummary, condition: Option<PodCondition>) -> Result<(), Error> {
        let (namespace, name) = (pod.metadata.namespace.as_deref().unwrap_or_default(), pod.metadata.name.as_deref());
        log::info!("PodGC is force deleting Pod pod={:?}", pod_ref(pod));
        if !matches!(phase(pod), "Succeeded" | "Failed") {
            // The patch carries the pod's status, which its summary does not hold.
            let whole = (self.pods.store().get(&object_key(&pod.metadata)))
                .ok_or_else(|| Error::NotCached { pod: pod_ref(pod) })?;
            let status = failed_status(&whole, condition, Timestamp::now());
            patch_pod_status(&self.client, &whole, &status)
                .map_err(|source| Error::PatchStatus { pod: pod_ref(pod), source })?;
        }
        let params = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
        Api::<Pod>::namespaced(&self.client, namespace)
            .delete(name.unwrap_or_default(), &params)
            .map(|_| ())
            .map_err(|source| Error::Delete { pod: pod_ref(pod), source })
    }
}

/// The condition `gcOrphaned` gives a pod whose node is gone: DisruptionTarget, reason
/// `DeletionByPodGC`, with the pod's generation as `observedGeneration` (v1.36; v1.33 had none,
/// PodObservedGenerationTracking being off).
fn orphaned_condition(pod: &impl PodFields) -> PodCondition {
    PodCondition {
        type_: "DisruptionTarget".into(),
        observed_generation: observed_generation(pod),
        status: "True".into(),
        reason: Some("DeletionByPodGC".into()),
        message: Some("PodGC: node no longer exists".into()),
        ..PodCondition::default()
    }
}

/// The status `markFailedAndDeletePodWithCondition` patches before deleting a pod that is not
/// terminal: phase Failed, `observedGeneration` the pod's generation (new in v1.36), and the
/// condition, if any, set as `UpdatePodCondition` does.
fn failed_status(pod: &Pod, condition: Option<PodCondition>, now: Timestamp) -> PodStatus {
    let mut status = pod.status.clone().unwrap_or_default();
    status.phase = Some("Failed".into());
    status.observed_generation = observed_generation(pod);
    if let Some(condition) = condition {
        update_pod_condition(&mut status, condition, now);
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apimachinery::clock::FakeClock;
    use serde_json::{Value, json};
    use std::time::Instant;

    fn pod(name: &str, created: i64, phase: &str, extra: Value) -> Arc<Pod> {
        let mut value = json!({
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": Timestamp::from_second(created).unwrap().to_string()},
            "spec": {"containers": []},
            "status": {"phase": phase},
        });
        if let (Value::Object(target), Value::Object(extra)) = (&mut value, extra) {
            for (key, part) in extra {
                if let (Some(Value::Object(t)), Value::Object(p)) = (target.get_mut(&key), &part) {
                    t.extend(p.clone());
                } else {
                    target.insert(key, part);
                }
            }
        }
        Arc::new(serde_json::from_value(value).expect("a pod"))
    }

    fn names<P: PodFields>(pods: &[P]) -> Vec<&str> {
        pods.iter().map(|p| p.pod_metadata().name.as_deref().unwrap_or_default()).collect()
    }

    #[test]
    fn terminated_pods_beyond_the_threshold_go_evicted_first_then_oldest_first() {
        let pods = vec![
            pod("running", 1, "Running", json!({})),
            pod("pending", 2, "Pending", json!({})),
            pod("unknown", 3, "Unknown", json!({})),
            pod("new-done", 50, "Succeeded", json!({})),
            pod("old-failed", 10, "Failed", json!({})),
            pod("b-same-time", 20, "Succeeded", json!({})),
            pod("a-same-time", 20, "Succeeded", json!({})),
            pod("evicted", 60, "Failed", json!({"status": {"reason": "Evicted"}})),
        ];
        assert_eq!(names(&terminated_beyond_threshold(&pods, 2)), ["evicted", "old-failed", "a-same-time"]);
        // The pass runs on the cache's summaries, which tell the evicted pod too.
        let summaries: Vec<Arc<PodSummary>> = pods.iter().map(|p| Arc::new(PodSummary::of(p))).collect();
        assert_eq!(names(&terminated_beyond_threshold(&summaries, 2)), ["evicted", "old-failed", "a-same-time"]);
        assert_eq!(names(&terminated_beyond_threshold(&pods, 5)), Vec::<&str>::new());
        assert_eq!(terminated_beyond_threshold(&pods, 0).len(), 5);
        // A pod without a phase counts as terminated, as upstream's check reads.
        assert_eq!(terminated_beyond_threshold(&[pod("none", 1, "", json!({}))], 0).len(), 1);
    }

    #[test]
    fn terminating_pods_go_only_from_not_ready_out_of_service_nodes() {
        let deleting = json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}});
        let on = |node: &str| {
            let mut extra = deleting.clone();
            extra["spec"] = json!({"nodeName": node, "containers": []});
            extra
        };
        let pods = vec![
            pod("a", 1, "Running", on("fenced")),
            pod("b", 2, "Running", on("ready-fenced")),
            pod("c", 3, "Running", on("down")),
            pod("d", 4, "Running", json!({"spec": {"nodeName": "fenced", "containers": []}})),
            pod("e", 5, "Running", on("missing")),
        ];
        let node = |name: &str, ready: &str, taint: bool| -> Arc<Node> {
            let taints =
                if taint { json!([{"key": TAINT_NODE_OUT_OF_SERVICE, "effect": "NoExecute"}]) } else { json!([]) };
            Arc::new(
                serde_json::from_value(json!({
                    "metadata": {"name": name},
                    "spec": {"taints": taints},
                    "status": {"conditions": [{"type": "Ready", "status": ready}]},
                }))
                .unwrap(),
            )
        };
        let nodes = [node("fenced", "False", true), node("ready-fenced", "True", true), node("down", "Unknown", false)];
        let lookup = |name: &str| nodes.iter().find(|n| n.metadata.name.as_deref() == Some(name)).cloned();
        assert_eq!(names(&terminating_on_out_of_service_nodes(&pods, lookup)), ["a"]);
    }

    #[test]
    fn unknown_nodes_are_those_pods_name_but_the_cache_lacks() {
        let pods = vec![
            pod("a", 1, "Running", json!({"spec": {"nodeName": "here", "containers": []}})),
            pod("b", 1, "Running", json!({"spec": {"nodeName": "gone", "containers": []}})),
            pod("c", 1, "Pending", json!({})),
        ];
        let existing: BTreeSet<&str> = ["here"].into_iter().collect();
        assert_eq!(unknown_nodes(&pods, &existing).into_iter().collect::<Vec<_>>(), ["gone"]);
    }

    /// Polls until `check` holds; the queue's timer thread moves due items asynchronously.
    fn wait_for(mut check: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if check() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    #[test]
    fn a_node_leaves_quarantine_only_after_the_quarantine_time() {
        let clock = Arc::new(FakeClock::new());
        let quarantine = Quarantine::new(QUARANTINE_TIME, clock.clone());
        quarantine.add("gone");
        clock.advance(Duration::from_secs(20));
        // Seen again in a later pass: the earlier deadline stands.
        quarantine.add("gone");
        clock.advance(Duration::from_secs(19));
        std::thread::sleep(Duration::from_millis(100));
        assert!(quarantine.take_due().is_empty(), "39 s after it was first seen");
        clock.advance(Duration::from_secs(1));
        let mut due = Vec::new();
        assert!(wait_for(|| {
            due.extend(quarantine.take_due());
            !due.is_empty()
        }));
        assert_eq!(due, ["gone"]);
        assert!(quarantine.take_due().is_empty(), "taken out once");
    }

    #[test]
    fn an_orphaned_pod_is_failed_with_its_generation_observed() {
        let running = pod(
            "orphan",
            1,
            "Running",
            json!({"metadata": {"generation": 4}, "status": {"conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "1970-01-01T00:00:01Z"}]}}),
        );
        let now = Timestamp::from_second(50).unwrap();
        let status = failed_status(&running, Some(orphaned_condition(&running)), now);
        assert_eq!((status.phase.as_deref(), status.observed_generation), (Some("Failed"), Some(4)));
        let conditions = status.conditions.unwrap_or_default();
        let target = conditions.iter().find(|c| c.type_ == "DisruptionTarget").expect("the condition");
        assert_eq!(
            (target.status.as_str(), target.reason.as_deref(), target.message.as_deref()),
            ("True", Some("DeletionByPodGC"), Some("PodGC: node no longer exists"))
        );
        assert_eq!(target.observed_generation, Some(4));
        assert_eq!(target.last_transition_time.as_ref().map(|t| t.0), Some(now));
        assert_eq!(conditions.len(), 2, "the Ready condition stays");

        // Without a condition (terminating pods) only the phase and the generation change.
        let plain = failed_status(&running, None, now);
        assert_eq!((plain.observed_generation, plain.conditions.map(|c| c.len())), (Some(4), Some(1)));
    }
}
