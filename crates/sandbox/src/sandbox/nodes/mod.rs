//! Simulated nodes: kubelets (and a scheduler) that talk to the API server over HTTP with our
//! own client, as real ones talk to kube-apiserver, so that controllers see realistic Nodes,
//! Leases and Pods.
//!
//! What each simulated kubelet does, as the real one:
//! - registers its Node (or adopts an existing one) with the kubelet's labels, the
//!   controller-managed attach/detach annotation, no taints of its own and no pod CIDR, and a
//!   full status;
//! - renews its Lease in `kube-node-lease` every `lease_renew_interval`, and reports its
//!   status when a condition differs from what it would say (e.g. after the controller manager
//!   marked it Unknown) or every `status_report_interval`;
//! - runs the pods bound to it: `ContainerCreating`, then Running and Ready with IPs after
//!   `pod_start_delay` (Ready only once the longest readiness probe's `initialDelaySeconds` has
//!   passed: simulated probes pass from their first try); a pod with an image that cannot be
//!   pulled (`kubelet::image_pullable`: tag `404`, or `nonexistent` in the name) stays Pending in
//!   `ImagePullBackOff`; pods that run to completion (Job pods, restartPolicy Never/OnFailure)
//!   exit after `job_pod_run_time` with code 0 (phase Succeeded), unless scripted (below);
//! - stops deleted pods: their containers are killed (reason `Error`, exit 137, phase Failed;
//!   conditions others own, such as `DisruptionTarget`, are kept), then the pod is deleted for
//!   good with `gracePeriodSeconds: 0` and a UID precondition;
//! - when its Node is deleted, does not register it again until it is restarted
//!   ([`SimulatedNodes::resume_heartbeat`] after [`SimulatedNodes::stop_heartbeat`]), unless
//!   [`NodeOptions::reregister_deleted_nodes`] is set.
//!
//! The scheduler (the `scheduler` module) binds pending pods of `default-scheduler` to the live,
//! Ready node with the fewest pods among those they fit (kube-scheduler's default filters, in
//! `scheduler/plugins.rs`), or marks them PodScheduled=False with kube-scheduler's message. One
//! liberty: unless [`NodeOptions::strict_not_ready_taint`], it ignores the
//! `node.kubernetes.io/not-ready` NoSchedule taint that kube-apiserver puts on every new Node
//! while the node is Ready, so that pods run before (or without) a node lifecycle controller to
//! remove it.
//!
//! Scripted pods (the `script` module; tests and the job controller's tests rely on it). A
//! run-to-completion pod's annotations, normally set in a Job's pod template, say how its runs
//! end:
//! - `kcm-sandbox.dev/run-seconds`: how long the containers run before they exit, in decimal
//!   seconds (`"0.5"`, `"20"`); default `job_pod_run_time`.
//! - `kcm-sandbox.dev/exit-codes`: a comma-separated script (`1,1,0`, `evicted,0`); default `0`.
//!   The n-th run started for the same Job (owner reference uid; the pod's own uid without one)
//!   and completion index (annotation `batch.kubernetes.io/job-completion-index`) ends with the
//!   n-th entry, the last one repeating. An exit code: 0 succeeds (container terminated
//!   `Completed`), others fail (`Error` with that code); `evicted`: the eviction manager evicts
//!   the pod (phase Failed, reason `Evicted`, containers killed with 137, condition
//!   `DisruptionTarget` True `TerminationByKubelet` with the kubelet's message).
//! - `kcm-sandbox.dev/exit-codes-index-<i>`: the script of the pod with completion index `i`,
//!   instead of `exit-codes`.
//!
//!   With restartPolicy `OnFailure` a non-zero exit restarts the containers in place (the pod
//!   stays Running; `restartCount` + 1, `lastState.terminated` holds the exit) and the next run
//!   takes the next entry, at once unless [`NodeOptions::crash_loop_back_off`] asks for the
//!   kubelet's back-off; with `Never` the pod ends. Runs are counted
//!   when they start, so a retried pod takes the next entry. An invalid annotation is logged (a
//!   warning naming the pod) and the pod runs unscripted.
//!
//! A run-to-completion pod without these annotations runs its first container's program when
//! the `program` module recognises it (the e2e suite's: pause and agnhost's servers run until
//! killed, `sleep N`, `sh -c 'exit 1'`, the fail-once marker file); else it exits 0 after
//! `job_pod_run_time`.
//!
//! One background thread does all of it, from list+watch caches of pods and nodes; with
//! [`NodeOptions::kubelet_threads`] above one, the kubelets are shared out among that many
//! threads (each with its own caches), the first of which also runs the scheduler, the
//! provisioner and the CSI driver. A real node's kubelet writes beside the others; one thread
//! writing for a thousand nodes would make the simulation, not the API server, the bound.

pub mod csi;
mod kubelet;
mod mirror;
mod node;
mod program;
pub mod provisioner;
mod resizer;
mod scheduler;
pub mod script;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use parking_lot::{Mutex, RwLock};
use serde_json::json;

use self::kubelet::{KILLED_EXIT_CODE, Stage};
use self::mirror::{Mirror, Source, WATCH_CAPACITY, is_transient};
use self::node::{CONTROLLER_MANAGED_ATTACH, LEASE_NAMESPACE, Machine};
use self::script::{Exit, Script};
use crate::apimachinery;
use crate::client::{Api, Client, ClientOptions, DeleteParams, Error, Patch, PostParams, Preconditions, RestConfig};

/// How the simulated nodes behave.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// How often each kubelet renews its Lease (kubelet: 10 s, for a 40 s lease). Node status
    /// is checked at the same pace (the kubelet's `nodeStatusUpdateFrequency`).
    pub lease_renew_interval: Duration,
    /// How often the node status is reported when nothing changed (kubelet's
    /// `nodeStatusReportFrequency` is 5 m; 1 m here).
    pub status_report_interval: Duration,
    /// How long a pod's containers take to start once its kubelet saw it.
    pub pod_start_delay: Duration,
    /// How long pods that run to completion (Job pods, restartPolicy Never/OnFailure) run
    /// before their containers exit, unless annotation `kcm-sandbox.dev/run-seconds` says.
    pub job_pod_run_time: Duration,
    /// How often the nodes look at their pods.
    pub tick: Duration,
    /// If not empty, node `i` gets `topology.kubernetes.io/zone = zones[i % len]` and the
    /// matching region label.
    pub zones: Vec<String>,
    /// Register a deleted Node again while its kubelet runs. A real kubelet does not (it keeps
    /// failing to update the missing Node until restarted; kubernetes/kubernetes#71398).
    pub reregister_deleted_nodes: bool,
    /// Make the scheduler respect the `node.kubernetes.io/not-ready:NoSchedule` taint that
    /// kube-apiserver's TaintNodesByCondition admission puts on every new Node even once the
    /// node is Ready, as kube-scheduler does: pods then wait until the node lifecycle controller
    /// removes it. Off by default, so that pods run without a controller manager.
    pub strict_not_ready_taint: bool,
    /// The kubelet's crash-loop back-off for containers of `OnFailure` pods that exit non-zero:
    /// `Some(initial)` restarts the first exit at once, then waits `initial` (kubelet: 10 s),
    /// doubling up to 5 minutes, with the container waiting in `CrashLoopBackOff` meanwhile.
    /// `None` (the default) restarts every exit at once, so that scripted Jobs run quickly.
    pub crash_loop_back_off: Option<Duration>,
    /// How many threads run the kubelets (node `i` on thread `i % kubelet_threads`). Each
    /// writes one request at a time, about 150 a second against kube-apiserver: a scale test
    /// with a thousand nodes needs several.
    pub kubelet_threads: usize,
}

impl Default for NodeOptions {
    fn default() -> Self {
        NodeOptions {
            lease_renew_interval: Duration::from_secs(10),
            status_report_interval: Duration::from_secs(60),
            pod_start_delay: Duration::from_secs(1),
            job_pod_run_time: Duration::from_secs(3),
            tick: Duration::from_millis(200),
            zones: Vec::new(),
            reregister_deleted_nodes: false,
            strict_not_ready_taint: false,
            crash_loop_back_off: None,
            kubelet_threads: 1,
        }
    }
}

/// The longest a kubelet waits before killing a deleted pod's containers, whatever its grace
/// period (simulated containers stop at once on SIGTERM).
const MAX_KILL_DELAY: Duration = Duration::from_secs(1);
/// How long the scheduler counts a pod it bound on a node before the watch shows the binding.
const ASSUME_TTL: Duration = Duration::from_secs(30);
/// How long a kubelet waits before writing a pod status again after the server refused it.
const WRITE_RETRY: Duration = Duration::from_secs(1);
/// The longest crash-loop back-off (the kubelet's `MaxContainerBackOff`).
const MAX_CONTAINER_BACK_OFF: Duration = Duration::from_secs(300);
/// How long before a kubelet repeats a DELETE that did not take effect (e.g. finalizers hold
/// the pod).
const DELETE_RETRY: Duration = Duration::from_secs(5);

/// Running simulated nodes; dropping them stops them too.
pub struct SimulatedNodes {
    shared: Arc<Shared>,
    /// Dropped to stop the workers (they all hold its receiver).
    stop: Option<Sender<()>>,
    workers: Vec<JoinHandle<()>>,
}

/// What the handle and the worker thread share.
struct Shared {
    client: Client,
    /// Node names in the order given (then added).
    names: Mutex<Vec<String>>,
    /// Each node's InternalIP.
    host_ips: Mutex<BTreeMap<String, String>>,
    /// Each kubelet's life. The worker holds a node's lock while it writes for that node, so
    /// that once `stop_heartbeat` or `remove_node` returns nothing more is written for it.
    controls: Mutex<BTreeMap<String, Arc<Mutex<Control>>>>,
    /// Machines added by `add_node`, for the worker to take up.
    added: Mutex<Vec<Machine>>,
    /// The index of the next machine (its InternalIP and zone).
    next_index: std::sync::atomic::AtomicUsize,
    zones: Vec<String>,
    stopping: AtomicBool,
    /// Runs started per script key (Job uid or pod uid, completion index): the next run of
    /// that key takes the script's entry at this position. Shared, as a Job's pods run on
    /// nodes of every worker.
    runs: Mutex<HashMap<(String, Option<i64>), usize>>,
}

impl Shared {
    fn control(&self, node: &str) -> Option<Arc<Mutex<Control>>> {
        self.controls.lock().get(node).cloned()
    }
}

#[derive(Debug)]
struct Control {
    alive: bool,
    /// The kubelet came back: it registers again and reports at once.
    restarted: bool,
}

/// Why the simulated nodes did not start, or a node operation failed. API errors are kept
/// as sources, with their kind.
#[derive(Debug, thiserror::Error)]
pub enum NodesError {
    /// The same name twice.
    #[error("simulated node names must be unique: {0:?}")]
    DuplicateNames(Vec<String>),
    /// The API client could not be built.
    #[error("simulated nodes: cannot set up the API client: {0}")]
    Client(#[source] Error),
    /// A worker thread could not be spawned.
    #[error("simulated nodes: cannot start a worker thread: {0}")]
    Thread(#[source] std::io::Error),
    /// The first list of nodes failed.
    #[error("simulated nodes: cannot list nodes: {0}")]
    ListNodes(#[source] Error),
    /// The first list of pods failed.
    #[error("simulated nodes: cannot list pods: {0}")]
    ListPods(#[source] Error),
    /// A node's registration failed.
    #[error("simulated node {node}: cannot register: {source}")]
    Register {
        /// The node.
        node: String,
        /// The API error.
        #[source]
        source: Error,
    },
    /// A node's Lease could not be created.
    #[error("simulated node {node}: cannot create its Lease: {source}")]
    CreateLease {
        /// The node.
        node: String,
        /// The API error.
        #[source]
        source: Error,
    },
    /// A built-in object (the default StorageClass, the CSIDriver) does not decode.
    #[error(transparent)]
    Decode(#[from] serde_json::Error),
    /// The default StorageClass could not be created.
    #[error("simulated provisioner: cannot create StorageClass {class}: {source}")]
    DefaultClass {
        /// The class.
        class: &'static str,
        /// The API error.
        #[source]
        source: Error,
    },
    /// The CSIDriver could not be created.
    #[error("simulated CSI driver: cannot create CSIDriver {driver}: {source}")]
    CsiDriver {
        /// The driver.
        driver: &'static str,
        /// The API error.
        #[source]
        source: Error,
    },
    /// Reading or patching a pod to fail failed.
    #[error("pod {pod}: {source}")]
    Pod {
        /// `namespace/name`.
        pod: String,
        /// The API error.
        #[source]
        source: Error,
    },
    /// The pod to fail is not bound.
    #[error("pod {pod} is not bound to a node")]
    NotBound {
        /// `namespace/name`.
        pod: String,
    },
    /// The pod to fail has terminated.
    #[error("pod {pod} has already terminated ({phase})")]
    AlreadyTerminated {
        /// `namespace/name`.
        pod: String,
        /// Its phase.
        phase: String,
    },
    /// Every attempt to fail the pod met a conflict.
    #[error("pod {pod}: the pod kept changing; gave up marking it Failed")]
    KeptChanging {
        /// `namespace/name`.
        pod: String,
    },
    /// add_node of a node that exists.
    #[error("simulated node {0} exists already")]
    Exists(String),
    /// add_node: the Node did not appear in time.
    #[error("simulated node {0} did not register within 30 s")]
    NotRegistered(String),
    /// remove_node of a node not simulated here.
    #[error("no simulated node {0}")]
    NoSuchNode(String),
    /// remove_node: deleting the Node or its Lease failed.
    #[error("simulated node {node}: {source}")]
    Delete {
        /// The node.
        node: String,
        /// The API error.
        #[source]
        source: Error,
    },
}

impl SimulatedNodes {
    /// Registers the nodes (with their Leases), then runs them on `kubelet_threads` background
    /// threads.
    pub fn start(config: RestConfig, names: Vec<String>, options: NodeOptions) -> Result<SimulatedNodes, NodesError> {
        let unique: BTreeSet<&String> = names.iter().collect();
        if unique.len() != names.len() {
            return Err(NodesError::DuplicateNames(names));
        }
        let nodes = names.len().max(1) as f32;
        let client_options =
            ClientOptions { qps: 50.0 * nodes, burst: (100.0 * nodes) as u32, timeout: Duration::from_secs(15) };
        let client = Client::new(config, client_options).map_err(NodesError::Client)?.for_controller("sandbox-kubelet");
        let machines: Vec<Machine> =
            names.iter().enumerate().map(|(i, name)| Machine::new(name, i, &options.zones)).collect();
        let shared = Arc::new(Shared {
            client: client.clone(),
            names: Mutex::new(names.clone()),
            host_ips: Mutex::new(machines.iter().map(|m| (m.name.clone(), m.internal_ip.clone())).collect()),
            controls: Mutex::new(
                names
                    .iter()
                    .map(|n| (n.clone(), Arc::new(Mutex::new(Control { alive: true, restarted: false }))))
                    .collect(),
            ),
            added: Mutex::new(Vec::new()),
            next_index: std::sync::atomic::AtomicUsize::new(names.len()),
            zones: options.zones.clone(),
            stopping: AtomicBool::new(false),
            runs: Mutex::new(HashMap::new()),
        });
        let threads = options.kubelet_threads.max(1);
        let mut shares: Vec<Vec<Machine>> = (0..threads).map(|_| Vec::new()).collect();
        for (i, machine) in machines.into_iter().enumerate() {
            shares[i % threads].push(machine);
        }
        let (stop_tx, stop_rx) = crossbeam_channel::bounded(1);
        let mut nodes = SimulatedNodes { shared: shared.clone(), stop: Some(stop_tx), workers: Vec::new() };
        for (index, machines) in shares.into_iter().enumerate() {
            let mut worker = Worker::new(shared.clone(), index, machines, options.clone(), stop_rx.clone());
            worker.start_up()?;
            let handle = std::thread::Builder::new()
                .name(format!("sandbox-nodes-{index}"))
                .spawn(move || worker.run())
                .map_err(NodesError::Thread)?;
            nodes.workers.push(handle);
        }
        Ok(nodes)
    }

    /// The kubelet of `node` dies: no more lease renewals, status reports or pod work there.
    /// Returns false for a node that is not simulated here.
    pub fn stop_heartbeat(&self, node: &str) -> bool {
        let Some(control) = self.shared.control(node) else { return false };
        let mut control = control.lock();
        if control.alive {
            log::debug!("simulated kubelet {node} stopped");
        }
        control.alive = false;
        true
    }

    /// The kubelet of `node` comes back, as after a restart: it registers its Node again if
    /// needed, renews its Lease, reports Ready and takes up its pods.
    pub fn resume_heartbeat(&self, node: &str) -> bool {
        let Some(control) = self.shared.control(node) else { return false };
        let mut control = control.lock();
        if !control.alive {
            log::debug!("simulated kubelet {node} restarted");
            control.alive = true;
            control.restarted = true;
        }
        true
    }

    /// Marks a pod Failed as its kubelet would when its containers fail: every container
    /// terminated with exit code 1 (reason `Error`). The pod must be bound and not terminated.
    pub fn fail_pod(&self, namespace: &str, name: &str) -> Result<(), NodesError> {
        let pods = Api::<Pod>::namespaced(&self.shared.client, namespace);
        let what = format!("{namespace}/{name}");
        for _ in 0..10 {
            let pod = pods.get(name).map_err(|source| NodesError::Pod { pod: what.clone(), source })?;
            let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
            if node.is_empty() {
                return Err(NodesError::NotBound { pod: what });
            }
            let phase = apimachinery::pod::phase(&pod);
            if is_terminal(phase) {
                return Err(NodesError::AlreadyTerminated { pod: what, phase: phase.to_string() });
            }
            let status = pod.status.clone().unwrap_or_default();
            let host_ip =
                status.host_ip.or_else(|| self.shared.host_ips.lock().get(&node).cloned()).unwrap_or_default();
            let patch = kubelet::status_patch(&pod, Stage::Failed(1), &host_ip, status.pod_ip.as_deref(), &node::now());
            match pods.patch_status(name, &Patch::Merge(patch), &PostParams::default()) {
                Ok(_) => {
                    log::debug!("kubelet {node}: pod {what} failed (exit code 1)");
                    return Ok(());
                }
                Err(e) if e.is_conflict() => continue,
                Err(source) => return Err(NodesError::Pod { pod: what, source }),
            }
        }
        Err(NodesError::KeptChanging { pod: what })
    }

    /// The simulated nodes' names.
    pub fn names(&self) -> Vec<String> {
        self.shared.names.lock().clone()
    }

    /// A new node joins: its kubelet starts, registers its Node (with its Lease) and runs the
    /// pods bound to it. Returns once the Node exists (at most 30 s).
    pub fn add_node(&self, name: &str) -> Result<(), NodesError> {
        {
            let mut controls = self.shared.controls.lock();
            if controls.contains_key(name) {
                return Err(NodesError::Exists(name.to_string()));
            }
            let index = self.shared.next_index.fetch_add(1, Ordering::SeqCst);
            let machine = Machine::new(name, index, &self.shared.zones);
            self.shared.host_ips.lock().insert(name.to_string(), machine.internal_ip.clone());
            self.shared.names.lock().push(name.to_string());
            controls.insert(name.to_string(), Arc::new(Mutex::new(Control { alive: true, restarted: false })));
            self.shared.added.lock().push(machine);
        }
        log::debug!("simulated node {name} added");
        let api = Api::<Node>::cluster(&self.shared.client);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            match api.get_opt(name) {
                Ok(Some(_)) => return Ok(()),
                Ok(None) => {}
                Err(e) => log::debug!("simulated node {name}: {e}"),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(NodesError::NotRegistered(name.to_string()))
    }

    /// A node leaves the cluster: its kubelet stops for good and its Node and Lease are
    /// deleted. Pods bound to it stay, as on a real cluster, until the pod garbage collector
    /// deletes them.
    pub fn remove_node(&self, name: &str) -> Result<(), NodesError> {
        let control =
            self.shared.controls.lock().remove(name).ok_or_else(|| NodesError::NoSuchNode(name.to_string()))?;
        // Waits for a write in progress for the node; none follows.
        control.lock().alive = false;
        self.shared.names.lock().retain(|n| n != name);
        self.shared.host_ips.lock().remove(name);
        let gone = |result: Result<_, Error>| match result {
            Err(source) if !source.is_not_found() => Err(NodesError::Delete { node: name.to_string(), source }),
            _ => Ok(()),
        };
        gone(Api::<Node>::cluster(&self.shared.client).delete(name, &DeleteParams::default()).map(|_| ()))?;
        let leases = Api::<Lease>::namespaced(&self.shared.client, LEASE_NAMESPACE);
        gone(leases.delete(name, &DeleteParams::default()).map(|_| ()))?;
        log::debug!("simulated node {name} removed");
        Ok(())
    }

    /// Stops every kubelet and the scheduler; nothing is written after this returns.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Disconnecting the channel wakes the workers.
        self.stop.take();
        for worker in self.workers.drain(..) {
            if worker.join().is_err() {
                log::error!("a worker thread of the simulated nodes panicked");
            }
        }
    }
}

impl Drop for SimulatedNodes {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// One simulated kubelet's state, kept by the worker.
struct Kubelet {
    machine: Machine,
    /// Registration done since the kubelet (re)started.
    registered: bool,
    /// The Lease as last written.
    lease: Option<Lease>,
    next_renew: Instant,
    next_status_check: Instant,
    last_report: Option<Instant>,
    /// Report status at the next check even if nothing changed (after registration).
    force_report: bool,
    /// Logged that the Node is gone.
    noted_missing: bool,
}

impl Kubelet {
    /// A kubelet just started: it registers first.
    fn new(machine: Machine, now: Instant) -> Kubelet {
        Kubelet {
            machine,
            registered: false,
            lease: None,
            next_renew: now,
            next_status_check: now,
            last_report: None,
            force_report: false,
            noted_missing: false,
        }
    }
}

/// What a kubelet remembers of one of its pods.
#[derive(Debug)]
struct PodRecord {
    /// When the kubelet first saw the pod (containers start `pod_start_delay` later).
    seen: Instant,
    running_since: Option<Instant>,
    /// When the containers of a deleted pod are killed.
    kill_at: Option<Instant>,
    delete_sent: Option<Instant>,
    /// The pod IP given to it.
    ip: Option<String>,
    /// The resourceVersion whose conditions were last found current.
    checked: Option<String>,
    /// After a refused status write (other than a conflict), no new attempt before this.
    retry_at: Option<Instant>,
    /// The pod's script (run-to-completion pods), read once.
    script: Option<Script>,
    /// How the current run of its containers ends, drawn when it started running.
    exit: Option<Exit>,
    /// The crash-loop back-off the next non-zero exit waits (after the first exit).
    back_off: Option<Duration>,
    /// While the containers wait in `CrashLoopBackOff`: until when, and the exit code.
    backing_off: Option<(Instant, i32)>,
}

impl PodRecord {
    fn new(seen: Instant) -> PodRecord {
        PodRecord {
            seen,
            running_since: None,
            kill_at: None,
            delete_sent: None,
            ip: None,
            checked: None,
            retry_at: None,
            script: None,
            exit: None,
            back_off: None,
            backing_off: None,
        }
    }
}

/// A background thread: its share of the kubelets and, the first one, the scheduler, the
/// provisioner and the CSI driver.
struct Worker {
    shared: Arc<Shared>,
    /// Its place among the workers; worker 0 runs the cluster-wide parts.
    index: usize,
    options: NodeOptions,
    kubelets: Vec<Kubelet>,
    /// The names of its kubelets' nodes, which its pod mirror keeps the pods of (worker 0,
    /// which schedules, keeps every pod).
    own_nodes: Arc<RwLock<BTreeSet<String>>>,
    pods: Mirror<Pod>,
    nodes: Mirror<Node>,
    /// Claims and StorageClasses, for the simulated provisioner.
    claims: Mirror<PersistentVolumeClaim>,
    classes: Mirror<StorageClass>,
    /// The simulated CSI resizer's Event recorder.
    resizer: resizer::Resizer,
    /// What the simulated CSI driver and the kubelets' volume handling read.
    csi: csi::Csi,
    /// Volumes, for the simulated provisioner.
    volumes: Mirror<PersistentVolume>,
    /// Pods placed whose delayed claims wait for their volumes before the pod is bound (the
    /// scheduler's VolumeBinding PreBind): UID → the chosen node.
    volume_waits: HashMap<String, String>,
    /// Kubelet memory per pod UID.
    records: HashMap<String, PodRecord>,
    /// Pods the scheduler bound that the watch has not shown bound yet: UID → (pod as bound, when).
    assumed: HashMap<String, (Pod, Instant)>,
    /// Pods whose Binding the server refused: UID → (failed attempts, not before). The
    /// scheduler backs off as kube-scheduler's queue does (1 s, doubling, at most 10 s).
    bind_back_off: HashMap<String, (u32, Instant)>,
    stop: Receiver<()>,
}

impl Worker {
    fn new(
        shared: Arc<Shared>,
        index: usize,
        machines: Vec<Machine>,
        options: NodeOptions,
        stop: Receiver<()>,
    ) -> Worker {
        let client = shared.client.clone();
        let now = Instant::now();
        let own_nodes: BTreeSet<String> = machines.iter().map(|m| m.name.clone()).collect();
        let own_nodes = Arc::new(RwLock::new(own_nodes));
        let kubelets = machines.into_iter().map(|machine| Kubelet::new(machine, now)).collect();
        let (pod_list, pod_watch) = (Api::<Pod>::all(&client), Api::<Pod>::all(&client));
        let (node_list, node_watch) = (Api::<Node>::all(&client), Api::<Node>::all(&client));
        let mut pods = Mirror::new(Source {
            list: Box::new(move |params| pod_list.list_all(params)),
            watch: Box::new(move |params| pod_watch.watch_channel(params, WATCH_CAPACITY)),
        });
        if index != 0 {
            let own = Arc::clone(&own_nodes);
            pods = pods.keeping(move |pod: &Pod| {
                pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|node| own.read().contains(node))
            });
        }
        let nodes = Mirror::new(Source {
            list: Box::new(move |params| node_list.list_all(params)),
            watch: Box::new(move |params| node_watch.watch_channel(params, WATCH_CAPACITY)),
        });
        let (claim_list, claim_watch) =
            (Api::<PersistentVolumeClaim>::all(&client), Api::<PersistentVolumeClaim>::all(&client));
        let claims = Mirror::new(Source {
            list: Box::new(move |params| claim_list.list_all(params)),
            watch: Box::new(move |params| claim_watch.watch_channel(params, WATCH_CAPACITY)),
        });
        let (class_list, class_watch) = (Api::<StorageClass>::all(&client), Api::<StorageClass>::all(&client));
        let classes = Mirror::new(Source {
            list: Box::new(move |params| class_list.list_all(params)),
            watch: Box::new(move |params| class_watch.watch_channel(params, WATCH_CAPACITY)),
        });
        let (volume_list, volume_watch) =
            (Api::<PersistentVolume>::all(&client), Api::<PersistentVolume>::all(&client));
        let volumes = Mirror::new(Source {
            list: Box::new(move |params| volume_list.list_all(params)),
            watch: Box::new(move |params| volume_watch.watch_channel(params, WATCH_CAPACITY)),
        });
        Worker {
            shared,
            index,
            options,
            kubelets,
            own_nodes,
            pods,
            nodes,
            claims,
            classes,
            csi: csi::Csi::new(&client),
            resizer: resizer::Resizer::new(client),
            volumes,
            volume_waits: HashMap::new(),
            records: HashMap::new(),
            assumed: HashMap::new(),
            bind_back_off: HashMap::new(),
            stop,
        }
    }

    /// Lists pods and nodes, then registers each of its nodes with its Lease; any failure is
    /// fatal.
    fn start_up(&mut self) -> Result<(), NodesError> {
        self.nodes.sync().map_err(NodesError::ListNodes)?;
        self.pods.sync().map_err(NodesError::ListPods)?;
        if self.runs_cluster_parts() {
            self.ensure_default_class()?;
            self.ensure_csi_driver()?;
        }
        for i in 0..self.kubelets.len() {
            let name = self.kubelets[i].machine.name.clone();
            self.register(i).map_err(|source| NodesError::Register { node: name.clone(), source })?;
            self.renew_lease(i).map_err(|source| NodesError::CreateLease { node: name, source })?;
        }
        Ok(())
    }

    fn run(mut self) {
        // A message or a disconnected channel means stop.
        while let Err(RecvTimeoutError::Timeout) = self.stop.recv_timeout(self.options.tick) {
            self.tick();
        }
        log::debug!("simulated nodes stopped");
    }

    /// Whether this worker runs the scheduler, the provisioner, the resizer and the CSI driver
    /// (one worker does, for the whole cluster).
    fn runs_cluster_parts(&self) -> bool {
        self.index == 0
    }

    fn stopping(&self) -> bool {
        self.shared.stopping.load(Ordering::SeqCst)
    }

    fn tick(&mut self) {
        self.follow_membership();
        let synced = [
            ("pods", self.pods.sync()),
            ("nodes", self.nodes.sync()),
            ("claims", self.claims.sync()),
            ("storage classes", self.classes.sync()),
            ("volumes", self.volumes.sync()),
        ];
        for (what, result) in synced {
            if let Err(e) = result {
                log::debug!("simulated nodes: cannot sync {what}: {e}");
            }
        }
        for i in 0..self.kubelets.len() {
            if self.stopping() {
                return;
            }
            self.heartbeat(i);
        }
        if self.runs_cluster_parts() {
            self.provision();
            self.resize();
            self.schedule();
            self.run_csi();
        } else {
            // The kubelets read attachable volumes from the CSI caches.
            self.csi.sync();
        }
        self.run_pods();
        self.forget_gone();
    }

    /// Takes up the kubelets of added nodes and drops those of removed ones.
    fn follow_membership(&mut self) {
        let added = std::mem::take(&mut *self.shared.added.lock());
        let now = Instant::now();
        for machine in added {
            self.kubelets.push(Kubelet::new(machine, now));
        }
        let controls = self.shared.controls.lock();
        self.kubelets.retain(|k| controls.contains_key(&k.machine.name));
        let mut own_nodes = self.own_nodes.write();
        if own_nodes.len() != self.kubelets.len() || self.kubelets.iter().any(|k| !own_nodes.contains(&k.machine.name))
        {
            *own_nodes = self.kubelets.iter().map(|k| k.machine.name.clone()).collect();
        }
    }

    /// Runs `f` while holding node `name`'s lock, if its kubelet is alive. `f` gets whether the
    /// kubelet has restarted since the last call.
    fn with_live_kubelet<T>(&mut self, name: &str, f: impl FnOnce(&mut Worker, bool) -> T) -> Option<T> {
        let control = self.shared.control(name)?;
        let mut control = control.lock();
        if !control.alive || self.stopping() {
            return None;
        }
        let restarted = std::mem::take(&mut control.restarted);
        Some(f(self, restarted))
    }

    fn alive_nodes(&self) -> BTreeSet<String> {
        let controls = self.shared.controls.lock().clone();
        controls.into_iter().filter(|(_, c)| c.lock().alive).map(|(name, _)| name).collect()
    }

    // ---- Heartbeats: registration, Lease, node status ----

    fn heartbeat(&mut self, i: usize) {
        let name = self.kubelets[i].machine.name.clone();
        self.with_live_kubelet(&name, |worker, restarted| {
            let now = Instant::now();
            if restarted {
                let kubelet = &mut worker.kubelets[i];
                kubelet.registered = false;
                kubelet.lease = None;
                kubelet.next_renew = now;
            }
            if !worker.kubelets[i].registered
                && let Err(e) = worker.register(i)
            {
                log::debug!("kubelet {name}: cannot register: {e}");
                return;
            }
            if now >= worker.kubelets[i].next_renew
                && let Err(e) = worker.renew_lease(i)
            {
                log::debug!("kubelet {name}: cannot renew its Lease: {e}");
            }
            if now >= worker.kubelets[i].next_status_check {
                worker.check_node_status(i);
            }
        });
    }

    /// Creates the Node, or adopts the existing one as the kubelet's `tryRegisterWithAPIServer`
    /// does: its default labels and the attach/detach annotation are set again, and its status
    /// reported at once.
    fn register(&mut self, i: usize) -> Result<(), Error> {
        let machine = self.kubelets[i].machine.clone();
        let api = Api::<Node>::cluster(&self.shared.client);
        let node: Node = serde_json::from_value(machine.initial_node()).map_err(|e| Error::Request(e.to_string()))?;
        match api.create(&node, &PostParams::default()) {
            Ok(created) => {
                log::debug!("kubelet {}: registered node", machine.name);
                self.nodes.observe(created);
            }
            Err(e) if e.is_already_exists() => {
                let existing = api.get(&machine.name)?;
                let labels = existing.metadata.labels.clone().unwrap_or_default();
                let annotations = existing.metadata.annotations.clone().unwrap_or_default();
                let stale_labels: BTreeMap<String, String> =
                    machine.labels().into_iter().filter(|(k, v)| labels.get(k) != Some(v)).collect();
                let adopted = if stale_labels.is_empty()
                    && annotations.get(CONTROLLER_MANAGED_ATTACH).map(String::as_str) == Some("true")
                {
                    existing
                } else {
                    let patch = json!({"metadata": {"labels": stale_labels,
                        "annotations": {CONTROLLER_MANAGED_ATTACH: "true"}}});
                    api.patch(&machine.name, &Patch::Merge(patch), &PostParams::default())?
                };
                log::debug!("kubelet {}: node was previously registered", machine.name);
                self.nodes.observe(adopted);
                self.kubelets[i].force_report = true;
                self.kubelets[i].next_status_check = Instant::now();
            }
            Err(e) => return Err(e),
        }
        let kubelet = &mut self.kubelets[i];
        kubelet.registered = true;
        kubelet.noted_missing = false;
        kubelet.last_report.get_or_insert_with(Instant::now);
        Ok(())
    }

    /// Renews the Lease (creating it if missing), as the kubelet's lease controller: an update
    /// of the Lease as last written, falling back to reading it after a failure.
    fn renew_lease(&mut self, i: usize) -> Result<(), Error> {
        let name = self.kubelets[i].machine.name.clone();
        let api = Api::<Lease>::namespaced(&self.shared.client, LEASE_NAMESPACE);
        // Retry at the next tick unless this renewal succeeds.
        self.kubelets[i].next_renew = Instant::now();
        let current = match self.kubelets[i].lease.take() {
            Some(lease) => Some(lease),
            None => api.get_opt(&name)?,
        };
        let node_uid = self.nodes.get("", &name).and_then(|n| n.metadata.uid.clone());
        let lease = node::renewed_lease(current, &name, node_uid.as_deref());
        let written = if lease.metadata.resource_version.is_some() {
            api.replace(&name, &lease, &PostParams::default())?
        } else {
            api.create(&lease, &PostParams::default())?
        };
        log::trace!("kubelet {name}: renewed its Lease");
        let kubelet = &mut self.kubelets[i];
        kubelet.lease = Some(written);
        kubelet.next_renew = Instant::now() + self.options.lease_renew_interval;
        Ok(())
    }

    /// Reports the node status if a condition changed (or was changed by someone else) or the
    /// report interval has passed.
    fn check_node_status(&mut self, i: usize) {
        let now = Instant::now();
        let name = self.kubelets[i].machine.name.clone();
        self.kubelets[i].next_status_check = now + self.options.lease_renew_interval;
        let Some(node) = self.nodes.get("", &name).cloned() else {
            self.node_missing(i);
            return;
        };
        let kubelet = &self.kubelets[i];
        let due = kubelet.force_report
            || kubelet.last_report.is_none_or(|t| now.duration_since(t) >= self.options.status_report_interval)
            || node::conditions_differ(&node);
        if !due {
            return;
        }
        let patch = json!({
            "metadata": {"resourceVersion": node.metadata.resource_version},
            "status": kubelet.machine.status(Some(&node), &node::now()),
        });
        match Api::<Node>::cluster(&self.shared.client).patch_status(
            &name,
            &Patch::Merge(patch),
            &PostParams::default(),
        ) {
            Ok(updated) => {
                log::debug!("kubelet {name}: reported node status");
                self.nodes.observe(updated);
                let kubelet = &mut self.kubelets[i];
                kubelet.last_report = Some(now);
                kubelet.force_report = false;
            }
            Err(e) => {
                if e.is_not_found() {
                    self.nodes.forget("", &name);
                }
                log::debug!("kubelet {name}: cannot report node status: {e}");
                // Try again at the next tick.
                self.kubelets[i].next_status_check = now;
            }
        }
    }

    /// The Node is gone while its kubelet runs.
    fn node_missing(&mut self, i: usize) {
        if !self.nodes.is_listed() {
            return;
        }
        let kubelet = &mut self.kubelets[i];
        if self.options.reregister_deleted_nodes {
            kubelet.registered = false;
        } else if !kubelet.noted_missing {
            kubelet.noted_missing = true;
            log::debug!(
                "kubelet {}: its Node was deleted; like a real kubelet it registers again only when restarted",
                kubelet.machine.name
            );
        }
    }

    // ---- Kubelets: pods ----

    /// Moves every pod of a live kubelet one step along its life.
    fn run_pods(&mut self) {
        let now = Instant::now();
        let mut alive = self.alive_nodes();
        let own: BTreeSet<&str> = self.kubelets.iter().map(|k| k.machine.name.as_str()).collect();
        alive.retain(|name| own.contains(name.as_str()));
        let work: Vec<(Pod, String)> = self
            .pods
            .values()
            .filter_map(|pod| {
                let node = pod.spec.as_ref().and_then(|s| s.node_name.clone())?;
                (alive.contains(&node) && self.needs_work(pod, now)).then(|| (pod.clone(), node))
            })
            .collect();
        for (pod, node) in work {
            let Some(i) = self.kubelets.iter().position(|k| k.machine.name == node) else { continue };
            self.with_live_kubelet(&node, |worker, _| worker.sync_pod(&pod, i, now));
        }
    }

    /// Whether a pod of a live kubelet may need a write now (cheap; no clones).
    fn needs_work(&self, pod: &Pod, now: Instant) -> bool {
        let record = self.records.get(uid_of(pod));
        if record.and_then(|r| r.retry_at).is_some_and(|at| now < at) {
            return false;
        }
        let phase = apimachinery::pod::phase(pod);
        if pod.metadata.deletion_timestamp.is_some() {
            return !is_terminal(phase)
                || record.and_then(|r| r.delete_sent).is_none_or(|t| now.duration_since(t) >= DELETE_RETRY);
        }
        match phase {
            "Pending" | "" => true,
            "Running" => {
                runs_to_completion(pod)
                    || record.is_none_or(|r| r.checked.as_deref() != pod.metadata.resource_version.as_deref())
            }
            _ => false,
        }
    }

    /// One step of one pod on kubelet `i`.
    fn sync_pod(&mut self, pod: &Pod, i: usize, now: Instant) {
        let uid = uid_of(pod).to_string();
        let record = self.records.entry(uid.clone()).or_insert_with(|| PodRecord::new(now));
        let phase = apimachinery::pod::phase(pod).to_string();
        if pod.metadata.deletion_timestamp.is_some() {
            if is_terminal(&phase) {
                self.delete_pod(pod, i);
                return;
            }
            let grace = Duration::from_secs(pod.metadata.deletion_grace_period_seconds.unwrap_or(0).max(0) as u64);
            let kill_at = *record.kill_at.get_or_insert(now + grace.min(MAX_KILL_DELAY));
            if now >= kill_at
                && let Some(stopped) =
                    self.write_status(pod, i, Stage::Failed(KILLED_EXIT_CODE), "killed its containers")
            {
                self.delete_pod(&stopped, i);
            }
            return;
        }
        let seen = record.seen;
        let running_since = match phase.as_str() {
            "Running" => Some(*record.running_since.get_or_insert(now)),
            _ => None,
        };
        let started = pod.status.as_ref().and_then(|s| s.container_statuses.as_ref()).is_some_and(|c| !c.is_empty());
        match (phase.as_str(), running_since) {
            ("Pending" | "", _) if !started && self.host_ports_taken(pod, i) => {
                self.reject(
                    pod,
                    i,
                    "NodePorts",
                    &format!("Predicate NodePorts failed: {}", scheduler::NODE_PORTS_REASON),
                );
            }
            ("Pending" | "", _) if !started => {
                self.write_status(pod, i, Stage::Creating, "creating containers");
            }
            ("Pending" | "", _) if !pullable(pod) => {
                // Written once; the pod then waits for its deletion.
                if kubelet::conditions_current(pod, Stage::PullFailed) {
                    return;
                }
                self.write_status(pod, i, Stage::PullFailed, "cannot pull its image");
            }
            ("Pending" | "", _) => {
                let stage = if kubelet::readiness_delay(pod).is_zero() { Stage::Running } else { Stage::Unready };
                if now.duration_since(seen) >= self.options.pod_start_delay
                    && self.volumes_attached(pod, &self.kubelets[i].machine.name)
                    && self.write_status(pod, i, stage, "started").is_some()
                    && let Some(record) = self.records.get_mut(&uid)
                {
                    record.running_since = Some(now);
                    if runs_to_completion(pod) {
                        // The run counts from now, whatever happens to the pod next.
                        self.current_run(pod, i);
                    }
                }
            }
            ("Running", Some(_)) if self.records.get(&uid).is_some_and(|r| r.backing_off.is_some()) => {
                self.resume_after_back_off(pod, i, now);
            }
            ("Running", Some(since)) => {
                let ending = runs_to_completion(pod).then(|| self.current_run(pod, i)).flatten();
                let ready = now.duration_since(since) >= kubelet::readiness_delay(pod);
                let stage = if ready { Stage::Running } else { Stage::Unready };
                if let Some((run_time, exit)) = ending
                    && now.duration_since(since) >= run_time
                {
                    self.end_run(pod, i, exit, now);
                } else if kubelet::conditions_current(pod, stage) {
                    if let Some(record) = self.records.get_mut(&uid).filter(|_| ready) {
                        record.checked = pod.metadata.resource_version.clone();
                    }
                } else {
                    self.write_status(pod, i, stage, "updated readiness");
                }
            }
            _ => {}
        }
    }

    /// Whether a host port the pod asks for is taken by a pod the kubelet already admitted (the
    /// kubelet's admission runs the scheduler's NodePorts filter again: a pod given a
    /// `nodeName` by its creator skipped the scheduler).
    fn host_ports_taken(&self, pod: &Pod, i: usize) -> bool {
        let Some(spec) = pod.spec.as_ref() else { return false };
        let node = &self.kubelets[i].machine.name;
        let admitted = self.pods.values().filter(|other| {
            let spec = other.spec.as_ref();
            let started =
                other.status.as_ref().and_then(|s| s.container_statuses.as_ref()).is_some_and(|c| !c.is_empty());
            uid_of(other) != uid_of(pod)
                && spec.and_then(|s| s.node_name.as_deref()) == Some(node.as_str())
                && !is_terminal(apimachinery::pod::phase(other))
                && started
        });
        scheduler::host_ports_taken(spec, admitted.filter_map(|p| p.spec.as_ref()))
    }

    /// The kubelet refuses the pod (`rejectPod`): phase Failed with the admission's reason and
    /// message, nothing started.
    fn reject(&mut self, pod: &Pod, i: usize, reason: &str, message: &str) {
        let patch = json!({"metadata": {"resourceVersion": pod.metadata.resource_version},
            "status": {"phase": "Failed", "reason": reason, "message": format!("Pod was rejected: {message}")}});
        self.patch_status(pod, i, patch, &format!("rejected ({reason})"));
    }

    /// The script of a running run-to-completion pod, and how its current run ends: drawn from
    /// the script when the run starts (or, for a pod found running, when first seen), counting
    /// the run for its Job and completion index.
    fn current_run(&mut self, pod: &Pod, i: usize) -> Option<(Duration, Exit)> {
        let default_run_time = self.options.job_pod_run_time;
        let record = self.records.get_mut(uid_of(pod))?;
        if record.script.is_none() {
            let (script, error) = Script::of(pod, default_run_time);
            if let Some(error) = error {
                let (namespace, name) = namespace_and_name(pod);
                let node = &self.kubelets[i].machine.name;
                log::warn!("kubelet {node}: pod {namespace}/{name}: {error}; the pod runs unscripted");
            }
            record.script = Some(script);
        }
        let script = record.script.as_ref()?;
        let exit = match record.exit {
            Some(exit) => exit,
            None => {
                let mut runs = self.shared.runs.lock();
                let run = runs.entry(script.key.clone()).or_insert(0);
                let exit = script.exit(*run);
                *run += 1;
                record.exit = Some(exit);
                exit
            }
        };
        Some((script.run_time, exit))
    }

    /// The pod's containers exit as its script says: it succeeds, fails, is evicted, or
    /// (restartPolicy `OnFailure`, non-zero exit) its containers restart for the next run, at
    /// once or after a crash-loop back-off.
    fn end_run(&mut self, pod: &Pod, i: usize, exit: Exit, now: Instant) {
        let on_failure = pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) == Some("OnFailure");
        let waits = self.records.get(uid_of(pod)).and_then(|r| r.back_off);
        if let (Exit::Code(code), true, Some(initial), Some(wait)) =
            (exit, on_failure, self.options.crash_loop_back_off, waits)
            && code != 0
        {
            let what = format!("exited with code {code}; back-off {wait:?}");
            if self.write_status(pod, i, Stage::BackOff(code, wait), &what).is_some()
                && let Some(record) = self.records.get_mut(uid_of(pod))
            {
                record.backing_off = Some((now + wait, code));
                record.back_off = Some((wait * 2).min(MAX_CONTAINER_BACK_OFF).max(initial));
            }
            return;
        }
        let (stage, what) = match exit {
            Exit::Code(0) => (Stage::Succeeded, "completed".to_string()),
            Exit::Evicted => (Stage::Evicted, "evicted".to_string()),
            Exit::Code(code) if on_failure => {
                (Stage::Restarted(code), format!("restarted its containers (exit code {code})"))
            }
            Exit::Code(code) => (Stage::Failed(code), format!("failed (exit code {code})")),
        };
        if self.write_status(pod, i, stage, &what).is_some()
            && matches!(stage, Stage::Restarted(_))
            && let Some(record) = self.records.get_mut(uid_of(pod))
        {
            record.running_since = Some(now);
            record.exit = None;
            if let Some(initial) = self.options.crash_loop_back_off {
                record.back_off.get_or_insert(initial);
            }
            // The new run draws its entry now.
            self.current_run(pod, i);
        }
    }

    /// A container in `CrashLoopBackOff` is started again once its back-off has passed.
    fn resume_after_back_off(&mut self, pod: &Pod, i: usize, now: Instant) {
        let Some((until, code)) = self.records.get(uid_of(pod)).and_then(|r| r.backing_off) else { return };
        if now < until {
            return;
        }
        if self.write_status(pod, i, Stage::Restarted(code), "restarted its containers after a back-off").is_some()
            && let Some(record) = self.records.get_mut(uid_of(pod))
        {
            record.backing_off = None;
            record.running_since = Some(now);
            record.exit = None;
            self.current_run(pod, i);
        }
    }

    /// Writes the pod's status for `stage` through the `status` subresource; returns the
    /// updated pod.
    fn write_status(&mut self, pod: &Pod, i: usize, stage: Stage, what: &str) -> Option<Pod> {
        let host_ip = self.kubelets[i].machine.internal_ip.clone();
        let pod_ip = match stage {
            Stage::Creating => None,
            _ => self.pod_ip(pod, i),
        };
        let patch = kubelet::status_patch(pod, stage, &host_ip, pod_ip.as_deref(), &node::now());
        self.patch_status(pod, i, patch, &format!("{what} ({stage:?})"))
    }

    /// Sends a merge patch of the pod's `status` subresource; returns the updated pod. A failed
    /// write is tried again at a later tick.
    fn patch_status(&mut self, pod: &Pod, i: usize, patch: serde_json::Value, what: &str) -> Option<Pod> {
        let (namespace, name) = namespace_and_name(pod);
        let node = &self.kubelets[i].machine.name;
        match Api::<Pod>::namespaced(&self.shared.client, namespace).patch_status(
            name,
            &Patch::Merge(patch),
            &PostParams::default(),
        ) {
            Ok(updated) => {
                log::debug!("kubelet {node}: pod {namespace}/{name} {what}");
                self.pods.observe(updated.clone());
                Some(updated)
            }
            Err(e) => {
                log_error(&format!("kubelet {node}: cannot update the status of pod {namespace}/{name}"), &e);
                // A conflict is retried at the next tick, with the newer pod; anything else later.
                if !e.is_conflict()
                    && let Some(record) = self.records.get_mut(uid_of(pod))
                {
                    record.retry_at = Some(Instant::now() + WRITE_RETRY);
                }
                None
            }
        }
    }

    /// The pod's IP: the one it has, the node's for host-network pods, else the next free
    /// address of the node's pod CIDR.
    fn pod_ip(&mut self, pod: &Pod, i: usize) -> Option<String> {
        if let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.clone()) {
            return Some(ip);
        }
        let machine = &self.kubelets[i].machine;
        if pod.spec.as_ref().and_then(|s| s.host_network) == Some(true) {
            return Some(machine.internal_ip.clone());
        }
        let uid = uid_of(pod).to_string();
        if let Some(ip) = self.records.get(&uid).and_then(|r| r.ip.clone()) {
            return Some(ip);
        }
        let node = self.nodes.get("", &machine.name);
        let cidr = node.and_then(|n| n.spec.as_ref()).and_then(|s| s.pod_cidr.clone());
        let range = cidr.as_deref().and_then(ipv4_range).or_else(|| ipv4_range(&machine.fallback_pod_cidr()))?;
        let mut used: BTreeSet<String> = self
            .pods
            .values()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(machine.name.as_str()))
            .filter(|p| !is_terminal(apimachinery::pod::phase(p)))
            .filter_map(|p| p.status.as_ref().and_then(|s| s.pod_ip.clone()))
            .collect();
        used.extend(self.records.values().filter_map(|r| r.ip.clone()));
        let ip =
            (range.0 + 2..range.1).map(|n| std::net::Ipv4Addr::from(n).to_string()).find(|ip| !used.contains(ip))?;
        if let Some(record) = self.records.get_mut(&uid) {
            record.ip = Some(ip.clone());
        }
        Some(ip)
    }

    /// Deletes a terminated pod for good, as the kubelet's status manager does once it has
    /// stopped it: grace period 0, and the pod's UID as precondition.
    fn delete_pod(&mut self, pod: &Pod, i: usize) {
        let (namespace, name) = namespace_and_name(pod);
        let node = self.kubelets[i].machine.name.clone();
        if let Some(record) = self.records.get_mut(uid_of(pod)) {
            record.delete_sent = Some(Instant::now());
        }
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions { uid: pod.metadata.uid.clone(), resource_version: None }),
            ..DeleteParams::default()
        };
        match Api::<Pod>::namespaced(&self.shared.client, namespace).delete(name, &params) {
            Ok(_) => log::debug!("kubelet {node}: deleted pod {namespace}/{name}"),
            Err(e) if e.is_not_found() || e.is_conflict() => {}
            Err(e) => log_error(&format!("kubelet {node}: cannot delete pod {namespace}/{name}"), &e),
        }
    }

    /// Drops memory of pods that are gone, and assumptions the watch has confirmed.
    fn forget_gone(&mut self) {
        if !self.pods.is_listed() {
            return;
        }
        let present: HashMap<&str, &Pod> = self.pods.values().map(|p| (uid_of(p), p)).collect();
        self.records.retain(|uid, _| present.contains_key(uid.as_str()));
        self.bind_back_off.retain(|uid, _| present.contains_key(uid.as_str()));
        let now = Instant::now();
        self.assumed.retain(|uid, (_, since)| {
            let unconfirmed = present
                .get(uid.as_str())
                .is_some_and(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default().is_empty());
            unconfirmed && now.duration_since(*since) < ASSUME_TTL
        });
    }
}

/// Whether every container image of the pod can be pulled.
fn pullable(pod: &Pod) -> bool {
    let spec = pod.spec.as_ref();
    let containers = spec.into_iter().flat_map(|s| s.init_containers.iter().flatten().chain(s.containers.iter()));
    containers.filter_map(|c| c.image.as_deref()).all(kubelet::image_pullable)
}

/// Pods whose containers exit when done: Job pods and pods that are not restarted.
fn runs_to_completion(pod: &Pod) -> bool {
    let owned_by_job =
        pod.metadata.owner_references.iter().flatten().any(|o| o.kind == "Job" && o.api_version == "batch/v1");
    let restart = pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()).unwrap_or("Always");
    owned_by_job || matches!(restart, "Never" | "OnFailure")
}

fn is_terminal(phase: &str) -> bool {
    matches!(phase, "Succeeded" | "Failed")
}

fn uid_of(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

fn namespace_and_name(pod: &Pod) -> (&str, &str) {
    (pod.metadata.namespace.as_deref().unwrap_or_default(), pod.metadata.name.as_deref().unwrap_or_default())
}

/// The addresses of an IPv4 CIDR as `[network, broadcast)`; `None` for IPv6 or nonsense.
fn ipv4_range(cidr: &str) -> Option<(u32, u32)> {
    let (address, prefix) = cidr.split_once('/')?;
    let address: std::net::Ipv4Addr = address.parse().ok()?;
    let prefix: u32 = prefix.parse().ok().filter(|p| *p <= 30)?;
    let size = 1u64 << (32 - prefix);
    let network = u32::from(address) & (u64::from(u32::MAX) << (32 - prefix)) as u32;
    Some((network, (u64::from(network) + size - 1).min(u64::from(u32::MAX)) as u32))
}

/// Logs a failed write: conflicts and an unreachable server are routine (the next tick retries).
fn log_error(what: &str, error: &Error) {
    if is_transient(error) || error.is_not_found() {
        log::debug!("{what}: {error}");
    } else {
        log::warn!("{what}: {error}");
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn api_error(code: u16, reason: &str) -> Error {
        let status = k8s_openapi::apimachinery::pkg::apis::meta::v1::Status {
            code: Some(code.into()),
            reason: Some(reason.into()),
            message: Some(format!("{reason} for the test")),
            ..Default::default()
        };
        crate::client::ApiError::from_status(status, code, None).into()
    }

    /// The API error behind a node operation's failure keeps its kind (it was a string before),
    /// and the message reads as it did.
    #[test]
    fn node_errors_keep_the_api_error() {
        let source = api_error(409, "Conflict");
        let text = source.to_string();
        let error = NodesError::Pod { pod: "default/web-0".into(), source };
        assert_eq!(error.to_string(), format!("pod default/web-0: {text}"));
        assert!(Error::find(&error).is_some_and(Error::is_conflict));

        let error = NodesError::Register { node: "node-1".into(), source: api_error(404, "NotFound") };
        assert!(Error::find(&error).is_some_and(Error::is_not_found));
        assert!(error.to_string().starts_with("simulated node node-1: cannot register: "));
        assert!(Error::find(&NodesError::NotRegistered("node-1".into())).is_none());
    }

    #[test]
    fn pod_cidrs() {
        let (start, end) = ipv4_range("10.244.3.0/24").expect("a range");
        assert_eq!(std::net::Ipv4Addr::from(start + 2).to_string(), "10.244.3.2");
        assert_eq!(std::net::Ipv4Addr::from(end).to_string(), "10.244.3.255");
        assert!(ipv4_range("fd00::/64").is_none());
        assert!(ipv4_range("10.0.0.0/31").is_none());
    }

    #[test]
    fn completion_follows_owner_and_restart_policy() {
        let pod = |v: Value| serde_json::from_value::<Pod>(v).expect("a Pod");
        assert!(!runs_to_completion(&pod(json!({"spec": {"containers": []}}))));
        assert!(runs_to_completion(&pod(json!({"spec": {"containers": [], "restartPolicy": "Never"}}))));
        let job = json!({"metadata": {"ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u"}]},
            "spec": {"containers": []}});
        assert!(runs_to_completion(&pod(job)));
    }
}
