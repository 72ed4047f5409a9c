//! The taint eviction controller, after upstream v1.36's
//! `pkg/controller/tainteviction/taint_eviction.go`: run as a controller of its own (the
//! `SeparateTaintEvictionController` gate, GA and locked on since 1.34) or, with the gate off,
//! inside the node lifecycle controller (as upstream's package is shared): pods on a node with NoExecute taints they
//! do not tolerate are deleted at once; pods tolerating them for `tolerationSeconds` are
//! deleted when the shortest such toleration runs out, unless the taints go (or the pod goes)
//! first. Before deleting, the pod gets the `DisruptionTarget` condition, with its generation
//! as `observedGeneration`.
//!
//! Upstream's two queues carry the informers' keys: `noexec_taint_node` node names and
//! `noexec_taint_pod` `<namespace>/<name>` pod keys (plain queues, as upstream's, so `/metrics`
//! shows the same series). A third, unnamed queue (no metrics: upstream uses `time.AfterFunc`
//! timers) carries the pod keys of the scheduled deletions (see [`timed_workers`]).
//! Deletions go through a `node-controller` client, as upstream.

pub mod timed_workers;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, PodCondition, Taint, Toleration};
use parking_lot::Mutex;

use crate::apimachinery::clock::{Clock, RealClock};
use crate::apimachinery::pod::{observed_generation, update_pod_condition};
use crate::client::{self, Api, Client, DeleteParams};
use crate::controllers::nodeutil::{NO_EXECUTE, matching_tolerations};
use crate::controllers::nodeutil::{add_node_name_index, pods_on_node};
use crate::controllers::podutil::{self, patch_pod_status};
use crate::runtime::controller::{Controller, ControllerContext};
use crate::runtime::events::{EventRecorder, EventType};
use crate::runtime::informer::{Event, Informer, object_key};
use crate::runtime::workqueue::WorkQueue;

use timed_workers::{Scheduled, TimedWorkers};

/// `retries` of a deletion, 10 ms apart.
const DELETE_TRIES: usize = 5;
const DELETE_RETRY_SLEEP: Duration = Duration::from_millis(10);

/// `UpdateWorkerSize`: the workers of each queue when it runs on its own.
const WORKERS: usize = 8;

/// Why a pod could not be marked and deleted (`addConditionAndDeletePod`): logged after the
/// last try.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or deleting the pod failed.
    #[error("{0}")]
    Api(#[from] client::Error),
    /// Adding the `DisruptionTarget` condition failed.
    #[error("{0}")]
    PatchStatus(#[from] podutil::Error),
}

/// `New` + `Run`: the controller on its own.
pub fn new(context: &ControllerContext<'_>) -> Controller {
    // Registered with the controller, as upstream's `metrics.Register()`: both show at zero.
    pod_deletions_total();
    pod_deletion_duration();
    let controller = TaintEviction::start(context.name, context, context.recorder.clone());
    controller.serve(Controller::new(), WORKERS)
}

/// upstream's `tainteviction.Controller`.
pub struct TaintEviction {
    /// The name it logs under (its own, also when it runs inside the node lifecycle controller).
    name: &'static str,
    client: Client,
    recorder: EventRecorder,
    /// `nodeUpdateQueue`.
    node_queue: WorkQueue<String>,
    /// `podUpdateQueue`.
    pod_queue: WorkQueue<String>,
    /// The scheduled deletions' timer (`evict/` keys).
    timer_queue: WorkQueue<String>,
    nodes: Arc<Informer<Node>>,
    pods: Arc<Informer<Pod>>,
    clock: Arc<dyn Clock>,
    /// `taintedNodes`: the NoExecute taints of each tainted node.
    tainted_nodes: Mutex<HashMap<String, Vec<Taint>>>,
    /// `taintEvictionQueue`, keyed by `namespace/name`.
    evictions: TimedWorkers,
}

impl TaintEviction {
    /// Adds its three queues, `workers` each, to `controller`: the node updates', the pod
    /// updates' and the scheduled deletions'.
    pub fn serve(self: &Arc<Self>, controller: Controller, workers: usize) -> Controller {
        let (nodes, pods, deletions) = (self.clone(), self.clone(), self.clone());
        controller
            .with_queue(&self.node_queue, workers, move |name: &String| {
                nodes.handle_node_update(name);
                Ok(())
            })
            .with_queue(&self.pod_queue, workers, move |key: &String| {
                pods.handle_pod_update(key);
                Ok(())
            })
            .with_queue(&self.timer_queue, workers, move |key: &String| {
                deletions.run_due_eviction(key);
                Ok(())
            })
    }
}

/// `getNoExecuteTaints`.
fn no_execute_taints(node: &Node) -> Vec<Taint> {
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default();
    taints.iter().filter(|t| t.effect == NO_EXECUTE).cloned().collect()
}

/// `getMinTolerationTime`: the shortest `tolerationSeconds` of the tolerations used (zero for
/// none or a non-positive one); `None` when they all tolerate forever.
pub fn min_toleration_time(tolerations: &[&Toleration]) -> Option<Duration> {
    if tolerations.is_empty() {
        return Some(Duration::ZERO);
    }
    let mut shortest: Option<i64> = None;
    for seconds in tolerations.iter().filter_map(|t| t.toleration_seconds) {
        if seconds <= 0 {
            return Some(Duration::ZERO);
        }
        shortest = Some(shortest.map_or(seconds, |s| s.min(seconds)));
    }
    shortest.map(|s| Duration::from_secs(s.unsigned_abs()))
}

/// What `processPodOnNode` does with a pod on a node with NoExecute taints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// A taint is not tolerated: cancel any scheduled deletion and delete now.
    DeleteNow,
    /// Every taint is tolerated forever: cancel any scheduled deletion.
    Cancel,
    /// A deletion is scheduled already and stays as it is.
    Keep,
    /// Schedule the deletion (cancelling the scheduled one first when `replace`).
    Schedule {
        /// When the deletion was first scheduled (kept when replacing).
        created_at: Instant,
        /// When the pod is deleted: now plus the shortest toleration time.
        fire_at: Instant,
        /// A deletion is scheduled already and is replaced.
        replace: bool,
    },
}

/// The decision of `processPodOnNode` at `now`, given the deletion already scheduled (if any).
/// A scheduled deletion is kept unless it was created `now`: a later change of the
/// tolerations does not move it, as upstream.
pub fn decide(tolerations: &[Toleration], taints: &[Taint], scheduled: Option<Scheduled>, now: Instant) -> Decision {
    let (all_tolerated, used) = matching_tolerations(taints, tolerations);
    if !all_tolerated {
        return Decision::DeleteNow;
    }
    let Some(min_toleration) = min_toleration_time(&used) else { return Decision::Cancel };
    let trigger = now + min_toleration;
    match scheduled {
        Some(scheduled) if scheduled.created_at + min_toleration < trigger => Decision::Keep,
        Some(scheduled) => Decision::Schedule { created_at: scheduled.created_at, fire_at: trigger, replace: true },
        None => Decision::Schedule { created_at: now, fire_at: trigger, replace: false },
    }
}

fn pod_node(pod: &Pod) -> &str {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default()
}

fn pod_tolerations(pod: &Pod) -> &[Toleration] {
    pod.spec.as_ref().and_then(|s| s.tolerations.as_deref()).unwrap_or_default()
}

impl TaintEviction {
    /// `New`: the controller, fed by the shared node and pod informers, with its keys (each
    /// on its queues (see [`TaintEviction::serve`]). Deletions use a `node-controller` client,
    /// as upstream.
    pub fn start(name: &'static str, context: &ControllerContext<'_>, recorder: EventRecorder) -> Arc<TaintEviction> {
        let timer_queue = WorkQueue::new("");
        let timer = timer_queue.clone();
        let schedule: timed_workers::Schedule = Box::new(move |key, delay| timer.add_after(key.to_string(), delay));
        let clock: Arc<dyn Clock> = Arc::new(RealClock);
        let controller = Arc::new(TaintEviction {
            name,
            client: context.client.clone(),
            recorder,
            node_queue: WorkQueue::plain("noexec_taint_node"),
            pod_queue: WorkQueue::plain("noexec_taint_pod"),
            timer_queue,
            nodes: context.informers.informer::<Node>(),
            pods: context.informers.informer::<Pod>(),
            clock: clock.clone(),
            tainted_nodes: Mutex::new(HashMap::new()),
            evictions: TimedWorkers::new(clock, schedule),
        });
        add_node_name_index(&controller.pods);
        let handler = controller.clone();
        controller.pods.add_handler(move |event: &Event<Pod>| handler.on_pod_event(event));
        let handler = controller.clone();
        controller.nodes.add_handler(move |event: &Event<Node>| handler.on_node_event(event));
        controller
    }

    // ---- Informer handlers ----

    /// `PodUpdated`: changes of the node or the tolerations, additions and deletions.
    fn on_pod_event(&self, event: &Event<Pod>) {
        let pod = match event {
            Event::Updated { old, new } => {
                if pod_tolerations(old) == pod_tolerations(new) && pod_node(old) == pod_node(new) {
                    return;
                }
                new
            }
            Event::Added(pod) | Event::Deleted { object: pod, .. } => pod,
        };
        self.pod_queue.add(object_key(&pod.metadata));
    }

    /// `NodeUpdated`: additions, deletions and changes of the NoExecute taints.
    fn on_node_event(&self, event: &Event<Node>) {
        let node = match event {
            Event::Updated { old, new } => {
                if no_execute_taints(old) == no_execute_taints(new) {
                    return;
                }
                new
            }
            Event::Added(node) | Event::Deleted { object: node, .. } => node,
        };
        let name = node.metadata.name.as_deref().unwrap_or_default();
        self.node_queue.add(name.to_string());
    }

    // ---- Updates ----

    /// `handlePodUpdate`.
    fn handle_pod_update(&self, key: &str) {
        let Some(pod) = self.pods.store().get(key) else {
            log::debug!("noticed pod deletion: {key}");
            self.cancel_work_with_event(key);
            return;
        };
        let node = pod_node(&pod);
        if node.is_empty() {
            return;
        }
        // Without taints the node's update cancelled whatever was scheduled already.
        let Some(taints) = self.tainted_nodes.lock().get(node).cloned() else { return };
        self.process_pod_on_node(key, node, pod_tolerations(&pod), &taints, self.clock.now());
    }

    /// `handleNodeUpdate`.
    fn handle_node_update(&self, name: &str) {
        let Some(node) = self.nodes.store().get(name) else {
            log::debug!("noticed node deletion: {name}");
            self.tainted_nodes.lock().remove(name);
            return;
        };
        let taints = no_execute_taints(&node);
        {
            // Updated before the pods are listed: pods bound later see the new taints.
            let mut tainted = self.tainted_nodes.lock();
            if taints.is_empty() {
                tainted.remove(name);
            } else {
                tainted.insert(name.to_string(), taints.clone());
            }
        }
        let pods = pods_on_node(&self.pods, name);
        if pods.is_empty() {
            return;
        }
        if taints.is_empty() {
            log::debug!("all taints were removed from node {name}; cancelling all evictions");
            for pod in &pods {
                self.cancel_work_with_event(&object_key(&pod.metadata));
            }
            return;
        }
        let now = self.clock.now();
        for pod in &pods {
            self.process_pod_on_node(&object_key(&pod.metadata), name, pod_tolerations(pod), &taints, now);
        }
    }

    /// `processPodOnNode`: deletes the pod at once, schedules its deletion, or cancels it.
    fn process_pod_on_node(&self, key: &str, node: &str, tolerations: &[Toleration], taints: &[Taint], now: Instant) {
        if taints.is_empty() {
            self.cancel_work_with_event(key);
        }
        match decide(tolerations, taints, self.evictions.get_worker(key), now) {
            Decision::DeleteNow => {
                log::debug!("not all taints are tolerated after update for pod {key} on node {node}");
                self.cancel_work_with_event(key);
                self.evictions.add_work(key, now, now);
            }
            Decision::Cancel => {
                log::debug!("current tolerations for pod {key} tolerate forever, cancelling any scheduled deletion");
                self.cancel_work_with_event(key);
            }
            Decision::Keep => {}
            Decision::Schedule { created_at, fire_at, replace } => {
                if replace {
                    self.cancel_work_with_event(key);
                }
                self.evictions.add_work(key, created_at, fire_at);
            }
        }
    }

    /// `cancelWorkWithEvent`.
    fn cancel_work_with_event(&self, key: &str) {
        if self.evictions.cancel_work(key) {
            self.emit(key, &format!("Cancelling deletion of Pod {key}"));
        }
    }

    // ---- Deletions ----

    /// A scheduled deletion came up (`deletePodHandler`, run by the timed worker).
    fn run_due_eviction(&self, key: &str) {
        let Some(started) = self.evictions.start_due(key) else { return };
        log::info!("{}: deleting pod {key}", self.name);
        self.emit(key, &format!("Marking for deletion Pod {key}"));
        let (namespace, name) = crate::runtime::informer::split_key(key);
        let mut failure = None;
        for _ in 0..DELETE_TRIES {
            match self.add_condition_and_delete_pod(namespace, name) {
                Ok(()) => {
                    failure = None;
                    pod_deletions_total().inc(&[]);
                    let latency = self.clock.now().saturating_duration_since(started.fire_at);
                    pod_deletion_duration().observe(&[], latency.as_secs_f64());
                    break;
                }
                Err(e) => failure = Some(e),
            }
            std::thread::sleep(DELETE_RETRY_SLEEP);
        }
        if let Some(e) = failure {
            log::error!("{}: timed worker failed for pod {key}: {e}", self.name);
        }
        self.evictions.finish(key, started);
    }

    /// `addConditionAndDeletePod`: DisruptionTarget (reason DeletionByTaintManager) through a
    /// status patch, then a plain delete.
    fn add_condition_and_delete_pod(&self, namespace: &str, name: &str) -> Result<(), Error> {
        let api = Api::<Pod>::namespaced(&self.client, namespace);
        let pod = api.get(name)?;
        let mut new = pod.status.clone().unwrap_or_default();
        if update_pod_condition(&mut new, eviction_condition(&pod), Timestamp::now()) {
            patch_pod_status(&self.client, &pod, &new)?;
        }
        api.delete(name, &DeleteParams::default())?;
        Ok(())
    }

    /// `emitPodDeletionEvent` / `emitCancelPodDeletionEvent`: Normal `TaintManagerEviction`.
    fn emit(&self, key: &str, message: &str) {
        let (namespace, name) = crate::runtime::informer::split_key(key);
        let reference = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..ObjectReference::default()
        };
        self.recorder.event(&reference, EventType::Normal, "TaintManagerEviction", message);
    }
}

/// The condition `addConditionAndDeletePod` sets before deleting a pod: DisruptionTarget,
/// reason `DeletionByTaintManager`, with the pod's generation as `observedGeneration` (v1.36;
/// v1.33 had none, PodObservedGenerationTracking being off).
fn eviction_condition(pod: &Pod) -> PodCondition {
    PodCondition {
        type_: "DisruptionTarget".into(),
        observed_generation: observed_generation(pod),
        status: "True".into(),
        reason: Some("DeletionByTaintManager".into()),
        message: Some("Taint manager: deleting due to NoExecute taint".into()),
        ..PodCondition::default()
    }
}

/// `taint_eviction_controller_pod_deletions_total`.
fn pod_deletions_total() -> &'static crate::metrics::CounterVec {
    static CELL: std::sync::OnceLock<Arc<crate::metrics::CounterVec>> = std::sync::OnceLock::new();
    crate::metrics::registered(&CELL, || {
        crate::metrics::CounterVec::counter(
            "taint_eviction_controller_pod_deletions_total",
            "[ALPHA] Total number of Pods deleted by TaintEvictionController since its start.",
            &[],
        )
        .at_zero()
    })
}

/// `taint_eviction_controller_pod_deletion_duration_seconds`.
fn pod_deletion_duration() -> &'static crate::metrics::HistogramVec {
    static CELL: std::sync::OnceLock<Arc<crate::metrics::HistogramVec>> = std::sync::OnceLock::new();
    crate::metrics::registered(&CELL, || {
        crate::metrics::HistogramVec::new(
            "taint_eviction_controller_pod_deletion_duration_seconds",
            "[ALPHA] Latency, in seconds, between the time when a taint effect has been activated for the Pod and its \
             deletion via TaintEvictionController.",
            &[],
            &[0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 30.0, 60.0, 120.0, 180.0, 240.0],
        )
        .at_zero()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn toleration(value: Value) -> Toleration {
        serde_json::from_value(value).expect("a toleration")
    }

    #[test]
    fn the_eviction_condition_observes_the_pods_generation() {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "generation": 2}})).expect("a pod");
        let condition = eviction_condition(&pod);
        assert_eq!(
            (condition.type_.as_str(), condition.status.as_str(), condition.reason.as_deref()),
            ("DisruptionTarget", "True", Some("DeletionByTaintManager"))
        );
        assert_eq!(condition.message.as_deref(), Some("Taint manager: deleting due to NoExecute taint"));
        assert_eq!(condition.observed_generation, Some(2));
    }

    #[test]
    fn the_shortest_toleration_decides() {
        let five = toleration(json!({"operator": "Exists", "tolerationSeconds": 5}));
        let three = toleration(json!({"operator": "Exists", "tolerationSeconds": 3}));
        let forever = toleration(json!({"operator": "Exists"}));
        let negative = toleration(json!({"operator": "Exists", "tolerationSeconds": -1}));
        assert_eq!(min_toleration_time(&[]), Some(Duration::ZERO));
        assert_eq!(min_toleration_time(&[&forever]), None);
        assert_eq!(min_toleration_time(&[&five, &forever, &three]), Some(Duration::from_secs(3)));
        assert_eq!(min_toleration_time(&[&five, &negative]), Some(Duration::ZERO));
    }

    #[test]
    fn decisions_follow_process_pod_on_node() {
        let taints =
            [Taint { key: "node.kubernetes.io/unreachable".into(), effect: NO_EXECUTE.into(), ..Taint::default() }];
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(7);
        assert_eq!(decide(&[], &taints, None, t0), Decision::DeleteNow);
        let forever = [toleration(json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists"}))];
        assert_eq!(decide(&forever, &taints, None, t0), Decision::Cancel);
        let short = [toleration(json!({"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2}))];
        let first = decide(&short, &taints, None, t0);
        let fire_at = t0 + Duration::from_secs(2);
        assert_eq!(first, Decision::Schedule { created_at: t0, fire_at, replace: false });
        // Seen again later: the scheduled deletion stays.
        let scheduled = Scheduled { created_at: t0, fire_at };
        assert_eq!(decide(&short, &taints, Some(scheduled), later), Decision::Keep);
        // Seen again in the same instant: rescheduled from the original creation.
        assert_eq!(
            decide(&short, &taints, Some(scheduled), t0),
            Decision::Schedule { created_at: t0, fire_at, replace: true }
        );
        // A toleration of another effect does not count.
        let other = [toleration(json!({"operator": "Exists", "effect": "NoSchedule"}))];
        assert_eq!(decide(&other, &taints, Some(scheduled), later), Decision::DeleteNow);
    }
}
