//! The node lifecycle controller (`node-lifecycle-controller`), after upstream v1.36's
//! `pkg/controller/nodelifecycle/node_lifecycle_controller.go`.
//!
//! - Every `--node-monitor-period` (`monitorNodeHealth`) each node's health is judged from its
//!   Ready heartbeat and its Lease in `kube-node-lease` (see [`health`]); a silent node's
//!   kubelet conditions become Unknown, its pods NotReady, and it is queued in its zone for the
//!   `unreachable` / `not-ready` NoExecute taint, which a rate-limited pass adds every 100 ms
//!   (`doNoExecuteTaintingPass`, see [`zones`]); a node Ready again loses those taints.
//! - On every node change, the NoSchedule taints mirror its conditions and
//!   `spec.unschedulable` (`doNoScheduleTaintingPass`, TaintNodesByCondition), and the beta
//!   OS/arch labels follow the stable ones (`reconcileNodeLabels`).
//! - A pod newly bound to a node that is not Ready is marked NotReady (`processPod`).
//!
//! All of it runs on the controller's workers, from upstream's two queues, `node/<name>` keys on
//! `node_lifecycle_controller` and `pod/<namespace>/<name>` keys on
//! `node_lifecycle_controller_pods`, and from an unnamed queue (no metrics: upstream runs these
//! as `wait.Until` loops) holding two keys that re-queue themselves after their period (the
//! monitor pass and the tainting pass), so that nothing runs before the workers (i.e.
//! leadership) and everything stops with the queues. Events are recorded as
//! upstream's `node-controller` component, through a `node-controller` client.

pub mod health;
pub mod metrics;
pub mod rate_limited_queue;
pub mod zones;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod};
use parking_lot::Mutex;
use serde_json::json;

use crate::apimachinery::clock::RealClock;
use crate::client::{self, Api, Client, Patch, PostParams};
use crate::controllers::nodeutil::{
    self, NO_EXECUTE, NO_SCHEDULE, TAINT_DISK_PRESSURE, TAINT_MEMORY_PRESSURE, TAINT_NETWORK_UNAVAILABLE,
    TAINT_NOT_READY, TAINT_PID_PRESSURE, TAINT_UNREACHABLE, TAINT_UNSCHEDULABLE, node_condition, node_taints, taint,
    taint_exists, zone_key,
};
use crate::controllers::nodeutil::{add_node_name_index, pods_on_node};
use crate::runtime::controller::{Controller, ControllerContext, SyncError};
use crate::runtime::events::{EventRecorder, EventType};
use crate::runtime::informer::{Event, Informer};
use crate::runtime::workqueue::WorkQueue;

use crate::controllers::tainteviction::TaintEviction;
use crate::runtime::slow_start::map_concurrently;

pub use health::GracePeriods;
use health::NodeHealth;
use rate_limited_queue::Outcome;
pub use zones::ZoneConfig;
use zones::{Disruption, Zones};

/// The event source component and client identity upstream uses for this controller.
pub const NODE_CONTROLLER: &str = "node-controller";
/// `NodeEvictionPeriod`: how often the NoExecute tainting pass runs.
pub const NODE_EVICTION_PERIOD: Duration = Duration::from_millis(100);
/// `nodeUpdateWorkerSize`: nodes judged in parallel, and this controller's workers.
const NODE_UPDATE_WORKERS: usize = 8;
/// `NodeHealthUpdateRetry` and `retrySleepTime`.
const NODE_HEALTH_UPDATE_RETRY: usize = 5;
const RETRY_SLEEP: Duration = Duration::from_millis(20);
/// `labelNodeDisruptionExclusion`.
const LABEL_EXCLUDE_DISRUPTION: &str = "node.kubernetes.io/exclude-disruption";
/// `labelReconcileInfo`: the beta labels follow the stable ones.
const LABELS_TO_RECONCILE: [(&str, &str); 2] =
    [("kubernetes.io/os", "beta.kubernetes.io/os"), ("kubernetes.io/arch", "beta.kubernetes.io/arch")];

/// `nodeConditionToTaintKeyStatusMap`: the NoSchedule taint of a condition in a status.
fn condition_taint(kind: &str, status: &str) -> Option<&'static str> {
    match (kind, status) {
        ("Ready", "False") => Some(TAINT_NOT_READY),
        ("Ready", "Unknown") => Some(TAINT_UNREACHABLE),
        ("MemoryPressure", "True") => Some(TAINT_MEMORY_PRESSURE),
        ("DiskPressure", "True") => Some(TAINT_DISK_PRESSURE),
        ("NetworkUnavailable", "True") => Some(TAINT_NETWORK_UNAVAILABLE),
        ("PIDPressure", "True") => Some(TAINT_PID_PRESSURE),
        _ => None,
    }
}

/// `taintKeyToNodeConditionMap`: the taint keys that stand for a condition.
fn is_condition_taint(key: &str) -> bool {
    [
        TAINT_NOT_READY,
        TAINT_UNREACHABLE,
        TAINT_NETWORK_UNAVAILABLE,
        TAINT_MEMORY_PRESSURE,
        TAINT_DISK_PRESSURE,
        TAINT_PID_PRESSURE,
    ]
    .contains(&key)
}

/// The flags of the controller.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// `--node-monitor-period`: how often node health is checked.
    pub monitor_period: Duration,
    /// The grace periods of node health.
    pub grace: GracePeriods,
    /// The eviction rates and zone thresholds.
    pub zones: ZoneConfig,
    /// With the SeparateTaintEvictionController gate off, the taint eviction controller runs
    /// inside this one, recording Events as this component (upstream's `taintEvictionController`).
    pub embedded_taint_eviction: Option<&'static str>,
}

/// Why the controller could not be built, or a node or pod update failed. API errors are kept
/// whole, so that a conflict or a server's `Retry-After` reaches the pod queue with its kind.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--node-monitor-period` is zero.
    #[error("--node-monitor-period must be greater than zero")]
    MonitorPeriod,
    /// The node's NoSchedule taints could not be swapped.
    #[error("failed to swap taints of node {node}")]
    SwapTaints {
        /// The node.
        node: String,
    },
    /// The node's labels could not be patched.
    #[error("failed update labels for node {node}: {source}")]
    UpdateLabels {
        /// The node.
        node: String,
        /// The patch's error.
        source: client::Error,
    },
    /// The pod's node is not in the cache.
    #[error("failed to read node {node}")]
    NodeNotCached {
        /// The node.
        node: String,
    },
    /// The pod could not be marked NotReady.
    #[error("unable to mark pod {pod} NotReady on node {node}: {source}")]
    MarkPodNotReady {
        /// `namespace/name`.
        pod: String,
        /// The node.
        node: String,
        /// Why.
        source: nodeutil::MarkPodsNotReadyError,
    },
}

/// `NewNodeLifecycleController` + `Run`: node and pod updates on their queues, the health
/// monitor every `--node-monitor-period` and the NoExecute tainting pass every 100 ms.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Result<Controller, Error> {
    if config.monitor_period.is_zero() {
        return Err(Error::MonitorPeriod);
    }
    metrics::register();
    // The context's client and recorder are upstream's `node-controller` ones.
    let client = context.client.clone();
    let recorder = context.recorder.clone();
    let queue = WorkQueue::plain("node_lifecycle_controller");
    let controller = Arc::new(NodeLifecycle {
        client,
        recorder,
        queue: queue.clone(),
        pod_queue: WorkQueue::new("node_lifecycle_controller_pods"),
        nodes: context.informers.informer::<Node>(),
        pods: context.informers.informer::<Pod>(),
        leases: context.informers.informer::<Lease>(),
        config,
        now: Arc::new(Timestamp::now),
        health: Mutex::new(HashMap::new()),
        known_nodes: Mutex::new(HashMap::new()),
        zones: Mutex::new(Zones::new(config.zones, Arc::new(RealClock))),
        nodes_to_retry: Mutex::new(HashSet::new()),
        monitor_lock: Mutex::new(()),
    });
    add_node_name_index(&controller.pods);
    let handler = controller.clone();
    controller.pods.add_handler(move |event: &Event<Pod>| handler.on_pod_event(event));
    let handler = controller.clone();
    controller.nodes.add_handler(move |event: &Event<Node>| handler.on_node_event(event));
    let name = context.name;
    let taint_manager = config.embedded_taint_eviction.map(|component| {
        log::info!("running {component} as part of {name}");
        TaintEviction::start(component, context, EventRecorder::new(context.client.clone(), component))
    });
    log::info!("{name} will reconcile labels");
    let (nodes, pods, monitor, tainting) = (controller.clone(), controller.clone(), controller.clone(), controller);
    let built = Controller::new()
        .with_queue(&queue, NODE_UPDATE_WORKERS, move |name: &String| {
            nodes.process_node(name);
            Ok(())
        })
        .with_queue(&monitor.pod_queue.clone(), NODE_UPDATE_WORKERS, move |key: &String| {
            pods.process_pod(key).map_err(SyncError::of)
        })
        .every("monitor", config.monitor_period, move || monitor.monitor_pass())
        .every("tainting", NODE_EVICTION_PERIOD, move || tainting.do_no_execute_tainting_pass());
    Ok(match taint_manager {
        Some(manager) => manager.serve(built, NODE_UPDATE_WORKERS),
        None => built,
    })
}

/// upstream's `Controller`.
pub struct NodeLifecycle {
    client: Client,
    recorder: EventRecorder,
    /// `nodeUpdateQueue` (`node/` keys), a plain queue as upstream's.
    queue: WorkQueue<String>,
    /// `podUpdateQueue` (`pod/` keys).
    pod_queue: WorkQueue<String>,
    nodes: Arc<Informer<Node>>,
    pods: Arc<Informer<Pod>>,
    leases: Arc<Informer<Lease>>,
    config: Config,
    /// The wall clock the health judgement uses (upstream's `nc.now`).
    now: Arc<dyn Fn() -> Timestamp + Send + Sync>,
    /// `nodeHealthMap`.
    health: Mutex<HashMap<String, NodeHealth>>,
    /// `knownNodeSet`.
    known_nodes: Mutex<HashMap<String, Arc<Node>>>,
    /// `zoneStates` and `zoneNoExecuteTainter` (`evictorLock`).
    zones: Mutex<Zones>,
    /// `nodesToRetry`: nodes whose pods could not all be marked NotReady.
    nodes_to_retry: Mutex<HashSet<String>>,
    /// Held by a monitor pass (one at a time, as upstream's single goroutine).
    monitor_lock: Mutex<()>,
}

impl NodeLifecycle {
    /// One `monitorNodeHealth` pass, timed for `node_collector_update_all_nodes_health_duration_seconds`.
    fn monitor_pass(&self) {
        let started = Instant::now();
        self.monitor_node_health();
        metrics::update_all_nodes_health_duration().observe(&[], started.elapsed().as_secs_f64());
    }
}

impl NodeLifecycle {
    // ---- Informer handlers ----

    /// `podUpdated`: a pod newly bound to a node is looked at. Deletions are not handled (v1.36
    /// removed the delete handler, which v1.33's `podUpdated` ignored anyway).
    fn on_pod_event(&self, event: &Event<Pod>) {
        let (old, new) = match event {
            Event::Added(pod) => (None, pod),
            Event::Updated { old, new } => (Some(old), new),
            Event::Deleted { .. } => return,
        };
        let node = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
        let bound = node(new);
        if !bound.is_empty() && old.is_none_or(|old| node(old) != bound) {
            let namespace = new.metadata.namespace.as_deref().unwrap_or_default();
            let name = new.metadata.name.as_deref().unwrap_or_default();
            self.pod_queue.add(format!("{namespace}/{name}"));
        }
    }

    fn on_node_event(&self, event: &Event<Node>) {
        match event {
            Event::Added(node) | Event::Updated { new: node, .. } => {
                self.queue.add(name_of(node).to_string());
            }
            Event::Deleted { object, .. } => {
                self.nodes_to_retry.lock().remove(name_of(object));
            }
        }
    }

    // ---- Node updates: NoSchedule taints and labels ----

    /// `doNodeProcessingPassWorker` for one node: errors are logged, not retried (upstream's TODO).
    fn process_node(&self, name: &str) {
        if let Err(e) = self.do_no_schedule_tainting_pass(name) {
            log::error!("failed to taint NoSchedule on node {name}, requeue it: {e}");
        }
        if let Err(e) = self.reconcile_node_labels(name) {
            log::error!("failed to reconcile labels for node {name}, requeue it: {e}");
        }
    }

    /// `doNoScheduleTaintingPass`: the node's NoSchedule condition taints and the unschedulable
    /// taint follow its conditions and `spec.unschedulable`.
    fn do_no_schedule_tainting_pass(&self, name: &str) -> Result<(), Error> {
        let Some(node) = self.nodes.store().get(name) else { return Ok(()) };
        let (to_add, to_remove) = no_schedule_taint_changes(&node);
        if to_add.is_empty() && to_remove.is_empty() {
            return Ok(());
        }
        if !nodeutil::swap_node_controller_taint(&self.client, &to_add, &to_remove, &node) {
            return Err(Error::SwapTaints { node: name.into() });
        }
        Ok(())
    }

    /// `reconcileNodeLabels`.
    fn reconcile_node_labels(&self, name: &str) -> Result<(), Error> {
        let Some(node) = self.nodes.store().get(name) else { return Ok(()) };
        let Some(labels) = node.metadata.labels.as_ref() else { return Ok(()) };
        let mut updates = serde_json::Map::new();
        for (primary, secondary) in LABELS_TO_RECONCILE {
            let Some(value) = labels.get(primary) else { continue };
            if labels.get(secondary) != Some(value) {
                updates.insert(secondary.to_string(), value.clone().into());
            }
        }
        if updates.is_empty() {
            return Ok(());
        }
        let patch = json!({"metadata": {"labels": updates}});
        Api::<Node>::cluster(&self.client)
            .patch(name, &Patch::Strategic(patch), &PostParams::default())
            .map(|_| ())
            .map_err(|source| Error::UpdateLabels { node: name.into(), source })
    }

    // ---- Pod updates ----

    /// `processPod`: a pod bound to a node that is not Ready is marked NotReady.
    fn process_pod(&self, key: &str) -> Result<(), Error> {
        let Some(pod) = self.pods.store().get(key) else { return Ok(()) };
        let node_name = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
        let Some(ready) =
            self.health.lock().get(&node_name).map(|h| node_condition(h.status.as_ref(), "Ready").cloned())
        else {
            return Ok(());
        };
        if self.nodes.store().get(&node_name).is_none() {
            return Err(Error::NodeNotCached { node: node_name });
        }
        let Some(ready) = ready else { return Ok(()) };
        if ready.status != "True" {
            nodeutil::mark_pods_not_ready(&self.client, &self.recorder, &[pod], &node_name)
                .map_err(|source| Error::MarkPodNotReady { pod: key.into(), node: node_name, source })?;
        }
        Ok(())
    }

    // ---- The NoExecute tainting pass ----

    /// `doNoExecuteTaintingPass`: each zone's queue lets through as many nodes as its rate
    /// allows; each gets the NoExecute taint of its Ready condition, and loses the opposite one.
    fn do_no_execute_tainting_pass(&self) {
        let tainters = self.zones.lock().tainters();
        for tainter in tainters {
            tainter.try_process(|value| self.taint_queued_node(&value.value));
        }
    }

    fn taint_queued_node(&self, name: &str) -> Outcome {
        let Some(node) = self.nodes.store().get(name) else {
            log::info!("node {name} no longer present in nodeLister");
            return (true, Duration::ZERO);
        };
        let Some(ready) = node_condition(node.status.as_ref(), "Ready") else {
            log::info!("failed to get NodeCondition from the node status of node {name}");
            return (false, Duration::from_millis(50));
        };
        let (add, opposite) = match ready.status.as_str() {
            "False" => (TAINT_NOT_READY, TAINT_UNREACHABLE),
            "Unknown" => (TAINT_UNREACHABLE, TAINT_NOT_READY),
            _ => {
                log::debug!("node {name} was in a taint queue, but it's ready now; ignoring taint request");
                return (true, Duration::ZERO);
            }
        };
        let done = nodeutil::swap_node_controller_taint(
            &self.client,
            &[taint(add, NO_EXECUTE)],
            &[taint(opposite, NO_EXECUTE)],
            &node,
        );
        if done {
            metrics::evictions_total().inc(&[&zone_key(&node)]);
        }
        (done, Duration::ZERO)
    }

    // ---- The monitor pass ----

    /// `monitorNodeHealth`.
    fn monitor_node_health(&self) {
        let _single = self.monitor_lock.lock();
        let mut nodes = self.nodes.store().list();
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        self.observe_node_set(&nodes);
        let zone_conditions: Mutex<BTreeMap<String, Vec<Option<NodeCondition>>>> = Mutex::new(BTreeMap::new());
        map_concurrently(&nodes, NODE_UPDATE_WORKERS, |node| {
            let started = Instant::now();
            self.update_node(node, &zone_conditions);
            metrics::update_node_health_duration().observe(&[], started.elapsed().as_secs_f64());
        });
        self.handle_disruption(&zone_conditions.into_inner(), &nodes);
    }

    /// The start of `monitorNodeHealth`: new zones get a taint queue, new nodes are registered
    /// (and their NoExecute taints removed), deleted ones forgotten.
    fn observe_node_set(&self, nodes: &[Arc<Node>]) {
        let mut known = self.known_nodes.lock();
        for node in nodes {
            let name = name_of(node);
            if known.contains_key(name) {
                let zone = zone_key(node);
                let mut zones = self.zones.lock();
                if !zones.knows(&zone) {
                    zones.add_zone(&zone);
                }
                continue;
            }
            log::debug!("controller observed a new Node {name}");
            let message = format!("Registered Node {name} in Controller");
            nodeutil::record_node_event(&self.recorder, node, EventType::Normal, "RegisteredNode", &message);
            known.insert(name.to_string(), node.clone());
            self.zones.lock().add_zone(&zone_key(node));
            if let Err(e) = self.mark_node_as_reachable(node) {
                log::error!("failed to remove taints from node {name}: {e}");
            }
        }
        let present: HashSet<&str> = nodes.iter().map(|n| name_of(n)).collect();
        let deleted: Vec<Arc<Node>> =
            known.iter().filter(|(name, _)| !present.contains(name.as_str())).map(|(_, n)| n.clone()).collect();
        for node in deleted {
            let name = name_of(&node);
            log::debug!("controller observed a Node deletion {name}");
            let message = format!("Removing Node {name} from Controller");
            nodeutil::record_node_event(&self.recorder, &node, EventType::Normal, "RemovingNode", &message);
            known.remove(name);
        }
    }

    /// One node of `monitorNodeHealth` (`updateNodeFunc`).
    fn update_node(&self, listed: &Node, zone_conditions: &Mutex<BTreeMap<String, Vec<Option<NodeCondition>>>>) {
        let name = name_of(listed).to_string();
        let mut node = listed.clone();
        let mut tries = 0;
        let (observed, current) = loop {
            match self.try_update_node_health(&mut node) {
                Ok(outcome) => break outcome,
                Err(e) => {
                    tries += 1;
                    if tries >= NODE_HEALTH_UPDATE_RETRY {
                        log::error!(
                            "update health of Node {name} from Controller error, Skipping - no pods will be evicted: {e}"
                        );
                        return;
                    }
                    std::thread::sleep(RETRY_SLEEP);
                    match Api::<Node>::cluster(&self.client).get(&name) {
                        Ok(fresh) => node = fresh,
                        Err(e) => {
                            log::error!(
                                "failed while getting a Node {name} to retry updating node health. Probably Node was deleted: {e}"
                            );
                            return;
                        }
                    }
                }
            }
        };
        let excluded = node.metadata.labels.as_ref().is_some_and(|l| l.contains_key(LABEL_EXCLUDE_DISRUPTION));
        if !excluded {
            zone_conditions.lock().entry(zone_key(&node)).or_default().push(current.clone());
        }
        if let Some(current) = current {
            // v1.36 decides on the condition this pass wrote (v1.33 took the one it found), so
            // a node it marks Unknown is queued for the unreachable taint in the same pass.
            self.process_taint_based_eviction(&node, &current);
            let needs_retry = self.nodes_to_retry.lock().contains(&name);
            let became_not_ready = current.status != "True" && observed.status == "True";
            if became_not_ready {
                nodeutil::record_node_status_change(&self.recorder, &node, EventType::Normal, "NodeNotReady");
            }
            // The node's pods are read only when they are marked (upstream lists them on
            // every pass, but reading our cache cannot fail and unpacks every pod it returns).
            if (became_not_ready || (needs_retry && observed.status != "True"))
                && let Err(e) =
                    nodeutil::mark_pods_not_ready(&self.client, &self.recorder, &pods_on_node(&self.pods, &name), &name)
            {
                log::error!("unable to mark all pods NotReady on node {name}: {e}; queuing for retry");
                self.nodes_to_retry.lock().insert(name);
                return;
            }
        }
        self.nodes_to_retry.lock().remove(&name);
    }

    /// `tryUpdateNodeHealth`: the judgement, with the Unknown conditions written through
    /// `nodes/status`. Returns the observed and the current Ready condition.
    fn try_update_node_health(&self, node: &mut Node) -> Result<(NodeCondition, Option<NodeCondition>), client::Error> {
        let name = name_of(node).to_string();
        let saved = self.health.lock().get(&name).cloned();
        let lease = self.leases.store().get_by_name(health::LEASE_NAMESPACE, &name);
        let judgement = health::judge(node, saved, lease.as_deref(), (self.now)(), self.config.grace);
        if !judgement.write_status {
            self.health.lock().insert(name, judgement.health);
            return Ok((judgement.observed_ready, judgement.current_ready));
        }
        match Api::<Node>::cluster(&self.client).replace_status(&name, node, &PostParams::default()) {
            Ok(_) => {
                let health = NodeHealth {
                    status: node.status.clone(),
                    probe_timestamp: judgement.health.probe_timestamp,
                    ready_transition_timestamp: (self.now)(),
                    lease: lease.map(|l| (*l).clone()),
                };
                self.health.lock().insert(name, health);
                Ok((judgement.observed_ready, judgement.current_ready))
            }
            Err(e) => {
                log::error!("error updating node {name}: {e}");
                self.health.lock().insert(name, judgement.health);
                Err(e)
            }
        }
    }

    /// `processTaintBaseEviction`: by the node's current Ready condition (as this pass left
    /// it), the node is queued for its NoExecute taint (or has it swapped at once), or loses it.
    fn process_taint_based_eviction(&self, node: &Node, current: &NodeCondition) {
        let name = name_of(node);
        let (status, taint_key, opposite_key) = match current.status.as_str() {
            "False" => ("False", TAINT_NOT_READY, TAINT_UNREACHABLE),
            "Unknown" => ("Unknown", TAINT_UNREACHABLE, TAINT_NOT_READY),
            "True" => {
                match self.mark_node_as_reachable(node) {
                    Ok(true) => log::debug!("node {name} is healthy again, removed all taints"),
                    Ok(false) => {}
                    Err(e) => {
                        log::error!("failed to remove taints from node {name}; will retry in next iteration: {e}")
                    }
                }
                return;
            }
            _ => return,
        };
        if taint_exists(node_taints(node), &taint(opposite_key, NO_EXECUTE)) {
            // The opposite taint is there: swap it at once, without waiting for the queue.
            let swapped = nodeutil::swap_node_controller_taint(
                &self.client,
                &[taint(taint_key, NO_EXECUTE)],
                &[taint(opposite_key, NO_EXECUTE)],
                node,
            );
            if !swapped {
                log::error!("failed to instantly swap {opposite_key} to {taint_key} on node {name}; will try again");
            }
        } else if self.mark_node_for_tainting(node, status) {
            log::debug!("node {name} is {status}; adding it to the taint queue");
        }
    }

    /// `markNodeForTainting`: queues the node in its zone (again, if it lacks the taint).
    fn mark_node_for_tainting(&self, node: &Node, status: &str) -> bool {
        let zones = self.zones.lock();
        let Some(tainter) = zones.tainter(&zone_key(node)) else { return false };
        let name = name_of(node);
        let wanted = if status == "False" { TAINT_NOT_READY } else { TAINT_UNREACHABLE };
        if !taint_exists(node_taints(node), &taint(wanted, NO_EXECUTE)) {
            tainter.remove(name);
        }
        tainter.add(name, node.metadata.uid.as_deref().unwrap_or_default())
    }

    /// `markNodeAsReachable`: removes both NoExecute taints and takes the node off its queue.
    fn mark_node_as_reachable(&self, node: &Node) -> Result<bool, client::Error> {
        self.mark_reachable(node, Some(node))
    }

    /// [`Self::mark_node_as_reachable`], skipping the API when `seen` (the node as last seen)
    /// has neither taint; with `None` the node is read from the API.
    fn mark_reachable(&self, node: &Node, seen: Option<&Node>) -> Result<bool, client::Error> {
        let name = name_of(node);
        nodeutil::remove_taints(&self.client, name, seen, &[taint(TAINT_UNREACHABLE, NO_EXECUTE)])?;
        nodeutil::remove_taints(&self.client, name, seen, &[taint(TAINT_NOT_READY, NO_EXECUTE)])?;
        let zones = self.zones.lock();
        Ok(zones.tainter(&zone_key(node)).is_some_and(|t| t.remove(name)))
    }

    /// `handleDisruption`, with the node-level work of entering and leaving the state where
    /// every zone is fully disrupted.
    fn handle_disruption(&self, zone_conditions: &BTreeMap<String, Vec<Option<NodeCondition>>>, nodes: &[Arc<Node>]) {
        let disruption = self.zones.lock().handle_disruption(zone_conditions);
        match disruption {
            Disruption::Unchanged => {}
            Disruption::Entered => {
                // Every node is read afresh: the tainting pass may have tainted one since this
                // pass listed it (until the limiters stopped above, which waited for it), and
                // upstream's check against the listed node would then keep that NoExecute
                // taint, and evict for it, through the whole disruption.
                for node in nodes {
                    if let Err(e) = self.mark_reachable(node, None) {
                        log::error!("failed to remove taints from node {}: {e}", name_of(node));
                    }
                }
            }
            Disruption::Exited => {
                // Every node gets a full grace period again.
                let now = (self.now)();
                let mut health = self.health.lock();
                for node in nodes {
                    if let Some(h) = health.get_mut(name_of(node)) {
                        h.probe_timestamp = now;
                        h.ready_transition_timestamp = now;
                    }
                }
            }
        }
    }
}

/// The NoSchedule taints to add and remove so that they mirror the node's conditions and
/// `spec.unschedulable` (`doNoScheduleTaintingPass`).
pub fn no_schedule_taint_changes(
    node: &Node,
) -> (Vec<k8s_openapi::api::core::v1::Taint>, Vec<k8s_openapi::api::core::v1::Taint>) {
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    let mut wanted: Vec<_> = conditions
        .iter()
        .filter_map(|c| condition_taint(&c.type_, &c.status))
        .map(|key| taint(key, NO_SCHEDULE))
        .collect();
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        wanted.push(taint(TAINT_UNSCHEDULABLE, NO_SCHEDULE));
    }
    let current: Vec<_> = node_taints(node)
        .iter()
        .filter(|t| t.effect == NO_SCHEDULE && (t.key == TAINT_UNSCHEDULABLE || is_condition_taint(&t.key)))
        .cloned()
        .collect();
    let to_add = wanted.iter().filter(|t| !taint_exists(&current, t)).cloned().collect();
    let to_remove = current.iter().filter(|t| !taint_exists(&wanted, t)).cloned().collect();
    (to_add, to_remove)
}

fn name_of(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn node(conditions: Value, spec: Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": "n"}, "spec": spec, "status": {"conditions": conditions}}))
            .expect("a Node")
    }

    fn keys(taints: &[k8s_openapi::api::core::v1::Taint]) -> Vec<String> {
        taints.iter().map(|t| format!("{}:{}", t.key, t.effect)).collect()
    }

    #[test]
    fn no_schedule_taints_mirror_conditions_and_unschedulable() {
        // A new node: admission's not-ready taint goes once it is Ready.
        let ready = json!([{"type": "Ready", "status": "True"}, {"type": "MemoryPressure", "status": "False"}]);
        let fresh = node(ready.clone(), json!({"taints": [{"key": TAINT_NOT_READY, "effect": "NoSchedule"}]}));
        let (add, remove) = no_schedule_taint_changes(&fresh);
        assert!(add.is_empty());
        assert_eq!(keys(&remove), ["node.kubernetes.io/not-ready:NoSchedule"]);

        // Unknown and under memory pressure, cordoned; foreign and NoExecute taints are left alone.
        let sick = json!([{"type": "Ready", "status": "Unknown"}, {"type": "MemoryPressure", "status": "True"}]);
        let spec = json!({"unschedulable": true, "taints": [
            {"key": "dedicated", "effect": "NoSchedule"},
            {"key": TAINT_UNREACHABLE, "effect": "NoExecute"},
            {"key": TAINT_NOT_READY, "effect": "NoSchedule"}]});
        let (add, remove) = no_schedule_taint_changes(&node(sick, spec));
        assert_eq!(
            keys(&add),
            [
                "node.kubernetes.io/unreachable:NoSchedule",
                "node.kubernetes.io/memory-pressure:NoSchedule",
                "node.kubernetes.io/unschedulable:NoSchedule"
            ]
        );
        assert_eq!(keys(&remove), ["node.kubernetes.io/not-ready:NoSchedule"]);

        // Uncordoned: the unschedulable taint goes.
        let spec = json!({"taints": [{"key": TAINT_UNSCHEDULABLE, "effect": "NoSchedule"}]});
        let (add, remove) = no_schedule_taint_changes(&node(ready, spec));
        assert!(add.is_empty());
        assert_eq!(keys(&remove), ["node.kubernetes.io/unschedulable:NoSchedule"]);
    }
}
