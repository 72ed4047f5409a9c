//! The scale run (issue 35): one kube-controller-manager, ours or upstream's, on a fresh real
//! control plane with many simulated nodes, through the steps a large cluster lives through,
//! measured from `/proc` and from its own `/metrics`. `cargo bench --bench scale` runs both
//! binaries in turn at the sizes asked for and prints [`table`]; a CI test runs a small size.
//!
//! Steps, each timed from its first write until the cluster has converged:
//! 1. **start**: the controller manager starts beside nodes already registered (in three
//!    zones) and gives each its pod CIDR and removes the not-ready taint;
//! 2. **create**: Deployments × replicas, created by eight writers at once;
//! 3. **rollout**: a new pod template for every Deployment (25 % surge and unavailable);
//! 4. **relist**: the controller manager is stopped and started again with every pod in place
//!    (its Lease deleted, so that neither binary waits for it), while one Deployment asks
//!    for a pod more: timed from the new process's start until that pod is available, which
//!    needs every informer the Deployment and ReplicaSet controllers wait for listed;
//! 5. **scale down**: every Deployment to half;
//! 6. **node failure**: the kubelets of a fraction of one zone's nodes stop; the node
//!    lifecycle controller marks them unreachable and taints them at the rate its zone's state
//!    allows (`--node-eviction-rate`, or `--secondary-node-eviction-rate` and
//!    `--unhealthy-zone-threshold` when the zone is partially disrupted), the pods, which
//!    tolerate the taint for `toleration_seconds`, are evicted and replaced elsewhere;
//! 7. **delete**: the kubelets come back and the namespace is deleted.
//!
//! Convergence is read from the API: Deployments by their status, pods by a metadata-only list
//! (the exact count, none terminating), nodes by their taints.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use serde_json::{Value, json};

use super::ControlPlane;
use super::process::{self, OwnedProcess};
use super::sampler::{Sampler, mib};
use super::sidebyside::{Side, controller_manager_args};
use crate::apimachinery::errors::BoxError;
use crate::client::discovery::ApiResource;
use crate::client::metadata::MetadataApi;
use crate::client::{self, Api, Client, ClientOptions, DeleteParams, ListParams, Patch, PostParams};
use crate::sandbox::nodes::{NodeOptions, SimulatedNodes};

/// The namespace of the run's Deployments.
pub const NAMESPACE: &str = "scale";
/// The zones the nodes are spread over, node `i` in `ZONES[i % 3]`; the node failure is in
/// the first.
pub const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
/// How often the process is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// How often convergence is checked.
const POLL_EVERY: Duration = Duration::from_secs(2);
/// How many writers create and change the Deployments at once.
const WRITERS: usize = 8;
/// The pod network: room for 4,096 nodes' /24s (the node IPAM controller's default mask).
const CLUSTER_CIDR: &str = "10.128.0.0/12";
const MAX_NODES: usize = 4096;
/// Simulated nodes per kubelet thread, and the most threads.
const NODES_PER_KUBELET_THREAD: usize = 100;
const MAX_KUBELET_THREADS: usize = 8;
/// The label that marks a node's taint by the node lifecycle controller for eviction.
const UNREACHABLE: &str = "node.kubernetes.io/unreachable";

/// Why a scale run could not be set up, or a step of it did not converge.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The options ask for too small a run.
    #[error(
        "a scale run needs at least {} nodes, a Deployment and an even number of replicas: {options:?}",
        ZONES.len()
    )]
    TooSmall {
        /// The options given.
        options: Box<ScaleOptions>,
    },
    /// The options ask for more nodes than the cluster CIDR has room for.
    #[error("{CLUSTER_CIDR} has pod CIDRs for {MAX_NODES} nodes, not {nodes}")]
    TooManyNodes {
        /// The nodes asked for.
        nodes: usize,
    },
    /// The run's folder cannot be created.
    #[error("{}: {source}", .dir.display())]
    Dir {
        /// The folder.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The control plane did not start (or its binaries are missing).
    #[error(transparent)]
    TestBed(#[from] super::Error),
    /// The controller manager did not start.
    #[error(transparent)]
    Process(#[from] process::Error),
    /// A request failed, or a client could not be built.
    #[error(transparent)]
    Client(#[from] client::Error),
    /// An object could not be built from its JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A Deployment could not be built from its JSON (shown as the client's invalid request).
    #[error("invalid request: deployment {name}: {source}")]
    Deployment {
        /// The Deployment.
        name: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The simulated nodes did not start.
    #[error("{0}")]
    Nodes(#[source] BoxError),
    /// The namespace could not be deleted.
    #[error("cannot delete namespace {NAMESPACE}: {source}")]
    DeleteNamespace {
        /// The API error.
        #[source]
        source: client::Error,
    },
    /// The controller manager's Lease could not be deleted.
    #[error("cannot delete the controller manager's Lease: {source}")]
    DeleteLease {
        /// The API error.
        #[source]
        source: client::Error,
    },
    /// A failed node could not be read.
    #[error("node {name}: {source}")]
    Node {
        /// The node.
        name: String,
        /// The API error.
        #[source]
        source: client::Error,
    },
    /// No controller manager runs to scrape.
    #[error("no controller manager is running")]
    NoManager,
    /// No sampler runs to read.
    #[error("no sampler")]
    NoSampler,
    /// The controller manager's `/metrics` did not answer in time.
    #[error("cannot scrape /metrics: {source}")]
    Scrape {
        /// The last failure.
        #[source]
        source: client::Error,
    },
    /// The controller manager ended during a step.
    #[error("{step}: the controller manager exited ({status}):\n{output}")]
    ManagerExited {
        /// The step.
        step: String,
        /// How it ended.
        status: std::process::ExitStatus,
        /// The last lines of its log.
        output: String,
    },
    /// A step did not converge in time.
    #[error(
        "{step}: not converged after {patience:?} (last error: {:?})",
        .last_error.as_ref().map(ToString::to_string).unwrap_or_default()
    )]
    NotConverged {
        /// The step.
        step: String,
        /// How long it was given.
        patience: Duration,
        /// The last failure of its check, if any.
        #[source]
        last_error: Option<Box<Error>>,
    },
    /// Some of a step's parallel writes failed.
    #[error("{count} writes failed, first: {name}: {source}")]
    Writes {
        /// How many failed.
        count: usize,
        /// The Deployment of the first failure.
        name: String,
        /// The first failure.
        #[source]
        source: Box<Error>,
    },
}

/// The size and shape of a run.
#[derive(Debug, Clone)]
pub struct ScaleOptions {
    /// Simulated nodes, spread over [`ZONES`].
    pub nodes: usize,
    /// Deployments in [`NAMESPACE`].
    pub deployments: usize,
    /// Replicas of each Deployment (an even number: the scale-down halves it).
    pub replicas: i32,
    /// Which share of the first zone's nodes fail (at least one node).
    pub failed_fraction: f64,
    /// `--kube-api-qps` of the controller manager.
    pub qps: u32,
    /// `--kube-api-burst` of the controller manager.
    pub burst: u32,
    /// How long the pods tolerate `unreachable` and `not-ready` (the default 300 s of
    /// DefaultTolerationSeconds would make the node failure step mostly a wait).
    pub toleration_seconds: i64,
    /// Where the logs and kubeconfigs go.
    pub dir: PathBuf,
}

impl ScaleOptions {
    /// Every pod of the run at its largest.
    pub fn pods(&self) -> usize {
        self.deployments * self.replicas.max(0) as usize
    }

    /// The nodes whose kubelets stop in the node failure step: the first ones of zone-a.
    pub fn failed_nodes(&self) -> Vec<String> {
        let zone: Vec<usize> = (0..self.nodes).filter(|i| i % ZONES.len() == 0).collect();
        let count = ((zone.len() as f64 * self.failed_fraction).round() as usize).clamp(1, zone.len().max(1));
        zone.into_iter().take(count).map(node_name).collect()
    }

    fn check(&self) -> Result<(), Error> {
        if self.nodes < ZONES.len() || self.deployments == 0 || self.replicas < 2 || self.replicas % 2 != 0 {
            return Err(Error::TooSmall { options: Box::new(self.clone()) });
        }
        if self.nodes > MAX_NODES {
            return Err(Error::TooManyNodes { nodes: self.nodes });
        }
        Ok(())
    }

    /// The simulated kubelets' threads: one per [`NODES_PER_KUBELET_THREAD`] nodes, at most
    /// [`MAX_KUBELET_THREADS`], so that the kubelets keep up with the pods the controller
    /// manager creates (a thread writes about 150 requests a second).
    pub fn kubelet_threads(&self) -> usize {
        (self.nodes / NODES_PER_KUBELET_THREAD).clamp(1, MAX_KUBELET_THREADS)
    }

    /// How long a step may take before the run fails: at 10,000 pods on two cores, upstream's
    /// rollout took 1,150 s (it had 1,200).
    fn patience(&self) -> Duration {
        Duration::from_secs(600) + Duration::from_millis(200) * self.pods() as u32
    }
}

/// One step's figures.
#[derive(Debug, Clone)]
pub struct StepFigures {
    /// The step: `start`, `create`, `rollout`, `relist`, `scale down`, `node failure`, `delete`.
    pub name: &'static str,
    /// From the step's first write to convergence.
    pub seconds: f64,
    /// The controller manager's CPU seconds in the step.
    pub cpu: f64,
    /// The highest VmRSS sampled in the step, bytes.
    pub peak_rss: u64,
    /// VmRSS at the step's end, bytes.
    pub end_rss: u64,
    /// The most threads sampled in the step.
    pub peak_threads: u64,
    /// API requests the controller manager sent in the step (`rest_client_requests_total`).
    pub requests: f64,
}

/// One binary's run.
#[derive(Debug, Clone)]
pub struct ScaleRun {
    /// Which binary ran.
    pub side: Side,
    /// Its steps, in order.
    pub steps: Vec<StepFigures>,
    /// The highest VmHWM of the processes of the run (the first and the restarted one).
    pub hwm: u64,
    /// p50 and p99 of `workqueue_queue_duration_seconds` over every queue, before the
    /// restart and after it.
    pub queue_wait: Vec<(f64, f64)>,
    /// When each failed node got its `unreachable` NoExecute taint, seconds after the first.
    pub taint_offsets: Vec<f64>,
}

impl ScaleRun {
    /// The figures of step `name`.
    pub fn step(&self, name: &str) -> Option<&StepFigures> {
        self.steps.iter().find(|s| s.name == name)
    }

    /// The pods evicted per second from the failed nodes: nodes tainted after the first, over
    /// the time it took (`None` with fewer than two).
    pub fn eviction_rate(&self) -> Option<f64> {
        let last = self.taint_offsets.last().copied()?;
        (self.taint_offsets.len() > 1 && last > 0.0).then(|| (self.taint_offsets.len() - 1) as f64 / last)
    }
}

/// Runs `binary` as `side` through every step on a fresh control plane.
pub fn run(side: Side, binary: &Path, options: &ScaleOptions) -> Result<ScaleRun, Error> {
    options.check()?;
    std::fs::create_dir_all(&options.dir).map_err(|source| Error::Dir { dir: options.dir.clone(), source })?;
    let plane = ControlPlane::start()?;
    let (_, kubeconfig) = plane.write_kubeconfigs(&options.dir.join(side.name()).join("admin.conf"))?;
    let admin =
        Client::new(plane.admin_config(), ClientOptions { qps: -1.0, burst: 1, timeout: Duration::from_secs(120) })?
            .for_controller("scale-bench");
    let names: Vec<String> = (0..options.nodes).map(node_name).collect();
    let node_options = NodeOptions {
        zones: ZONES.iter().map(|z| z.to_string()).collect(),
        strict_not_ready_taint: true,
        kubelet_threads: options.kubelet_threads(),
        ..NodeOptions::default()
    };
    let nodes = SimulatedNodes::start(plane.admin_config(), names, node_options).map_err(|e| Error::Nodes(e.into()))?;
    let mut bed = Bed {
        side,
        binary: binary.to_path_buf(),
        kubeconfig,
        log: options.dir.join(format!("{}.log", side.name())),
        admin,
        metrics: None,
        manager: None,
        sampler: None,
        requests_before: 0.0,
        hwm: 0,
        options: options.clone(),
        plane: &plane,
    };
    let result = bed.steps(&nodes);
    bed.stop_manager();
    nodes.stop();
    result
}

fn node_name(i: usize) -> String {
    format!("node-{i:04}")
}

fn deployment_name(i: usize) -> String {
    format!("scale-{i:04}")
}

/// A run in progress: the control plane, the controller manager and what measures it.
struct Bed<'a> {
    side: Side,
    binary: PathBuf,
    kubeconfig: PathBuf,
    log: PathBuf,
    admin: Client,
    /// The controller manager's `/metrics`, as the cluster admin.
    metrics: Option<Client>,
    manager: Option<OwnedProcess>,
    sampler: Option<Sampler>,
    /// `rest_client_requests_total` at the last step's end.
    requests_before: f64,
    hwm: u64,
    options: ScaleOptions,
    plane: &'a ControlPlane,
}

impl Bed<'_> {
    fn steps(&mut self, nodes: &SimulatedNodes) -> Result<ScaleRun, Error> {
        let options = self.options.clone();
        let (deployments, replicas) = (options.deployments, options.replicas);
        let mut steps = Vec::new();
        let mut queue_wait = Vec::new();
        let namespace: Namespace = from(json!({"metadata": {"name": NAMESPACE}}))?;
        Api::<Namespace>::cluster(&self.admin).create(&namespace, &PostParams::default())?;

        let started = Instant::now();
        self.start_manager()?;
        self.wait("start", |bed| bed.nodes_ready())?;
        steps.push(self.step_end("start", started)?);

        let started = Instant::now();
        self.parallel(deployments, |admin, i| create_deployment(admin, i, replicas, options.toleration_seconds))?;
        self.wait("create", |bed| bed.converged(&vec![replicas; deployments], &[]))?;
        steps.push(self.step_end("create", started)?);

        let started = Instant::now();
        let template = json!({"spec": {"template": {"metadata": {"annotations": {"scale.kcm.dev/revision": "2"}}}}});
        self.parallel(deployments, |admin, i| patch_deployment(admin, i, &template))?;
        self.wait("rollout", |bed| bed.converged(&vec![replicas; deployments], &[]))?;
        steps.push(self.step_end("rollout", started)?);
        queue_wait.push(self.queue_wait("before the restart")?);

        // Timed from the new process's start: how long the old one takes to stop (upstream's
        // waits for its controllers up to --controller-shutdown-timeout) is not the relist's.
        self.stop_manager();
        delete_lease(&self.admin)?;
        patch_deployment(&self.admin, 0, &json!({"spec": {"replicas": replicas + 1}}))?;
        let started = Instant::now();
        self.start_manager()?;
        let mut want = vec![replicas; deployments];
        want[0] = replicas + 1;
        self.wait("relist", |bed| bed.converged(&want, &[]))?;
        steps.push(self.step_end("relist", started)?);
        // Printed only: the table's figure after the restart is taken after the node failure.
        self.queue_wait("after the relist")?;

        let started = Instant::now();
        let half = replicas / 2;
        self.parallel(deployments, |admin, i| patch_deployment(admin, i, &json!({"spec": {"replicas": half}})))?;
        self.wait("scale down", |bed| bed.converged(&vec![half; deployments], &[]))?;
        steps.push(self.step_end("scale down", started)?);

        let started = Instant::now();
        let failed = options.failed_nodes();
        for node in &failed {
            nodes.stop_heartbeat(node);
        }
        self.wait("node failure", |bed| {
            Ok(bed.all_tainted(&failed)? && bed.converged(&vec![half; deployments], &failed)?)
        })?;
        steps.push(self.step_end("node failure", started)?);
        let taint_offsets = self.taint_offsets(&failed)?;
        queue_wait.push(self.queue_wait("after the restart")?);

        let started = Instant::now();
        for node in &failed {
            nodes.resume_heartbeat(node);
        }
        let namespaces = Api::<Namespace>::cluster(&self.admin);
        match namespaces.delete(NAMESPACE, &DeleteParams::default()) {
            Err(source) if !source.is_not_found() => return Err(Error::DeleteNamespace { source }),
            _ => {}
        }
        self.wait("delete", |bed| Ok(Api::<Namespace>::cluster(&bed.admin).get_opt(NAMESPACE)?.is_none()))?;
        steps.push(self.step_end("delete", started)?);
        // VmHWM is updated lazily by the kernel; a sampled VmRSS may be above it.
        let sampled = steps.iter().map(|s| s.peak_rss).max().unwrap_or(0);
        let hwm = self.hwm.max(self.sampler_hwm()).max(sampled);
        Ok(ScaleRun { side: self.side, steps, hwm, queue_wait, taint_offsets })
    }

    // ---- The controller manager ----

    fn start_manager(&mut self) -> Result<(), Error> {
        let [port, ..] = super::free_ports()?;
        let beside = |name: &str| self.kubeconfig.with_file_name(name).display().to_string();
        let extra = [
            format!("--kube-api-qps={}", self.options.qps),
            format!("--kube-api-burst={}", self.options.burst),
            format!("--secure-port={port}"),
            format!("--authentication-kubeconfig={}", self.kubeconfig.display()),
            format!("--authorization-kubeconfig={}", self.kubeconfig.display()),
            format!("--client-ca-file={}", beside("ca.crt")),
        ];
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let mut args = controller_manager_args(self.side, &self.kubeconfig, &extra);
        // Steady-state logging, not -v=6's request log.
        args.retain(|a| a != "--secure-port=0");
        for arg in &mut args {
            if arg.starts_with("-v=") {
                *arg = "-v=2".into();
            }
            // The side-by-side tests' /16 has room for 256 nodes' /24s.
            if arg.starts_with("--cluster-cidr=") {
                *arg = format!("--cluster-cidr={CLUSTER_CIDR}");
            }
        }
        let mut command = Command::new(&self.binary);
        command.args(&args);
        let name = format!("kube-controller-manager ({})", self.side.name());
        let manager = OwnedProcess::spawn(&name, command, &self.log)?;
        self.sampler = Some(Sampler::start(manager.pid(), SAMPLE_EVERY));
        self.manager = Some(manager);
        let mut config = self.plane.admin_config();
        config.server = format!("https://127.0.0.1:{port}");
        config.tls.ca_certs = None;
        config.tls.insecure_skip_verify = true;
        let options = ClientOptions { qps: -1.0, burst: 1, timeout: Duration::from_secs(30) };
        self.metrics = Some(Client::new(config, options)?.for_controller("scale-bench"));
        self.requests_before = 0.0;
        Ok(())
    }

    fn stop_manager(&mut self) {
        self.hwm = self.hwm.max(self.sampler_hwm());
        if let Some(sampler) = self.sampler.take() {
            sampler.stop();
        }
        if let Some(mut manager) = self.manager.take() {
            manager.stop(Duration::from_secs(30));
        }
        self.metrics = None;
    }

    fn sampler_hwm(&self) -> u64 {
        self.manager.as_ref().and_then(|m| super::sampler::read_proc(m.pid())).map_or(0, |s| s.hwm)
    }

    fn scrape(&self) -> Result<String, Error> {
        let metrics = self.metrics.as_ref().ok_or(Error::NoManager)?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match metrics.get_text("/metrics") {
                Ok(text) => return Ok(text),
                Err(source) if Instant::now() > deadline => return Err(Error::Scrape { source }),
                Err(_) => std::thread::sleep(Duration::from_secs(1)),
            }
        }
    }

    /// p50 and p99 of the wait over every queue; the queues whose p99 is longest are printed,
    /// with how many keys they held: which queue makes the p99.
    fn queue_wait(&self, when: &str) -> Result<(f64, f64), Error> {
        let text = self.scrape()?;
        let buckets = histogram_buckets(&text, "workqueue_queue_duration_seconds");
        // The buckets are decades (client-go's: 1 s, then 10 s), so a p99 in the last finite one
        // reads as up to 10 s by interpolation; how many keys waited past 1 s is exact.
        let mut by_queue: Vec<(String, f64, f64, f64)> =
            histogram_buckets_by(&text, "workqueue_queue_duration_seconds", "name")
                .into_iter()
                .map(|(name, b)| {
                    let (late, total) = past_a_second(&b);
                    (name, quantile(&b, 0.99), late, total)
                })
                .collect();
        by_queue.sort_by(|a, b| b.2.total_cmp(&a.2));
        let (late, total) = past_a_second(&buckets);
        eprintln!("scale: {} {when}: {late} of {total} keys waited over 1 s", self.side.name());
        for (name, p99, late, total) in by_queue.iter().take(8).filter(|q| q.2 > 0.0) {
            eprintln!(
                "scale: {} {when}: queue {name}: {late} of {total} keys over 1 s, p99 {:.0} ms",
                self.side.name(),
                p99 * 1000.0
            );
        }
        Ok((quantile(&buckets, 0.5), quantile(&buckets, 0.99)))
    }

    fn step_end(&mut self, name: &'static str, started: Instant) -> Result<StepFigures, Error> {
        let seconds = started.elapsed().as_secs_f64();
        let requests_now = counter_sum(&self.scrape()?, "rest_client_requests_total");
        let requests = requests_now - self.requests_before;
        self.requests_before = requests_now;
        let sampler = self.sampler.as_ref().ok_or(Error::NoSampler)?;
        let (now, peaks) = sampler.phase_end();
        let figures = StepFigures {
            name,
            seconds,
            cpu: now.cpu,
            peak_rss: peaks.rss,
            end_rss: now.rss,
            peak_threads: peaks.threads,
            requests,
        };
        log::info!(
            "scale {}: {name} converged in {seconds:.1} s, CPU {:.1} s, RSS {:.1} MiB (peak {:.1}), {requests} requests",
            self.side.name(),
            figures.cpu,
            mib(figures.end_rss),
            mib(figures.peak_rss)
        );
        Ok(figures)
    }

    /// Polls `done` until it holds, the controller manager exits or the step's patience ends.
    fn wait(&mut self, step: &str, mut done: impl FnMut(&Self) -> Result<bool, Error>) -> Result<(), Error> {
        let deadline = Instant::now() + self.options.patience();
        let mut last_error = None;
        loop {
            if let Some(manager) = self.manager.as_mut()
                && let Some(status) = manager.exited()
            {
                return Err(Error::ManagerExited { step: step.to_string(), status, output: manager.log_tail(30) });
            }
            match done(self) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => last_error = Some(Box::new(e)),
            }
            if Instant::now() > deadline {
                return Err(Error::NotConverged {
                    step: step.to_string(),
                    patience: self.options.patience(),
                    last_error,
                });
            }
            std::thread::sleep(POLL_EVERY);
        }
    }

    fn parallel(&self, count: usize, write: impl Fn(&Client, usize) -> Result<(), Error> + Sync) -> Result<(), Error> {
        let next = std::sync::atomic::AtomicUsize::new(0);
        let errors = parking_lot::Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..WRITERS {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if i >= count {
                            break;
                        }
                        if let Err(e) = write(&self.admin, i) {
                            errors.lock().push((deployment_name(i), e));
                        }
                    }
                });
            }
        });
        let mut errors = errors.into_inner();
        let count = errors.len();
        if errors.is_empty() {
            return Ok(());
        }
        let (name, first) = errors.swap_remove(0);
        Err(Error::Writes { count, name, source: Box::new(first) })
    }

    // ---- Convergence ----

    /// Every node has a pod CIDR and no `not-ready` taint.
    fn nodes_ready(&self) -> Result<bool, Error> {
        let nodes = Api::<Node>::cluster(&self.admin).list(&ListParams::default())?;
        Ok(nodes.items.len() == self.options.nodes
            && nodes.items.iter().all(|n| {
                let spec = n.spec.as_ref();
                let cidr = spec.and_then(|s| s.pod_cidr.as_deref()).is_some_and(|c| !c.is_empty());
                let tainted = spec
                    .and_then(|s| s.taints.as_ref())
                    .is_some_and(|t| t.iter().any(|t| t.key == "node.kubernetes.io/not-ready"));
                cidr && !tainted
            }))
    }

    /// Every Deployment `i` has observed its spec and has `want[i]` replicas, all updated and
    /// available, and the namespace holds exactly that many pods, none terminating but on
    /// `dead` nodes (whose kubelets cannot finish a deletion).
    fn converged(&self, want: &[i32], dead: &[String]) -> Result<bool, Error> {
        let list = Api::<Deployment>::namespaced(&self.admin, NAMESPACE).list(&ListParams::default());
        let deployments = list?.items;
        if deployments.len() != want.len() {
            return Ok(false);
        }
        for deployment in &deployments {
            let name = deployment.metadata.name.as_deref().unwrap_or_default();
            let Some(i) = name.strip_prefix("scale-").and_then(|n| n.parse::<usize>().ok()) else { return Ok(false) };
            let Some(status) = &deployment.status else { return Ok(false) };
            let want = want.get(i).copied().unwrap_or(-1);
            let observed = status.observed_generation.unwrap_or(0) >= deployment.metadata.generation.unwrap_or(0);
            let counts = [status.replicas, status.updated_replicas, status.available_replicas, status.ready_replicas];
            if !observed || counts.iter().any(|c| c.unwrap_or(0) != want) {
                return Ok(false);
            }
        }
        let pods = MetadataApi::new(&self.admin, &ApiResource::of::<Pod>(true), Some(NAMESPACE));
        let items = pods.list(&ListParams::default())?.items;
        let running = items.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).count();
        let terminating = items.len() - running;
        let total: i32 = want.iter().sum();
        if running != total as usize {
            return Ok(false);
        }
        if terminating == 0 {
            return Ok(true);
        }
        // Terminating pods are allowed only where no kubelet can finish them.
        let mut on_dead = 0;
        for node in dead {
            let params = ListParams { field_selector: Some(format!("spec.nodeName={node}")), ..ListParams::default() };
            let pods = Api::<Pod>::namespaced(&self.admin, NAMESPACE).list(&params)?.items;
            if pods.iter().any(|p| p.metadata.deletion_timestamp.is_none()) {
                return Ok(false);
            }
            on_dead += pods.len();
        }
        Ok(on_dead == terminating)
    }

    /// Every node of `failed` has the `unreachable` NoExecute taint.
    fn all_tainted(&self, failed: &[String]) -> Result<bool, Error> {
        Ok(self.taint_times(failed)?.iter().all(Option::is_some))
    }

    /// When each of `failed` got its `unreachable` NoExecute taint, if it has it.
    fn taint_times(&self, failed: &[String]) -> Result<Vec<Option<jiff::Timestamp>>, Error> {
        let api = Api::<Node>::cluster(&self.admin);
        failed
            .iter()
            .map(|name| {
                let node = api.get(name).map_err(|source| Error::Node { name: name.clone(), source })?;
                let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
                let taint = taints.into_iter().find(|t| t.key == UNREACHABLE && t.effect == "NoExecute");
                Ok(taint.and_then(|t| t.time_added).map(|at| at.0))
            })
            .collect()
    }

    fn taint_offsets(&self, failed: &[String]) -> Result<Vec<f64>, Error> {
        let mut times: Vec<jiff::Timestamp> = self.taint_times(failed)?.into_iter().flatten().collect();
        times.sort();
        let Some(first) = times.first().copied() else { return Ok(Vec::new()) };
        Ok(times.iter().map(|t| t.duration_since(first).as_secs_f64()).collect())
    }
}

fn create_deployment(admin: &Client, i: usize, replicas: i32, toleration_seconds: i64) -> Result<(), Error> {
    let name = deployment_name(i);
    let tolerate = |key: &str| json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": toleration_seconds});
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
                    "tolerations": [tolerate("node.kubernetes.io/not-ready"), tolerate(UNREACHABLE)],
                },
            },
        },
    }))
    .map_err(|source| Error::Deployment { name, source })?;
    Api::<Deployment>::namespaced(admin, NAMESPACE).create(&deployment, &PostParams::default())?;
    Ok(())
}

fn patch_deployment(admin: &Client, i: usize, patch: &Value) -> Result<(), Error> {
    let api = Api::<Deployment>::namespaced(admin, NAMESPACE);
    api.patch(&deployment_name(i), &Patch::Merge(patch.clone()), &PostParams::default())?;
    Ok(())
}

/// Deletes the controller manager's Lease, so that the next process leads at once whichever
/// binary it is (upstream's does not release it on exit).
fn delete_lease(admin: &Client) -> Result<(), Error> {
    match Api::<Lease>::namespaced(admin, "kube-system").delete("kube-controller-manager", &DeleteParams::default()) {
        Err(source) if !source.is_not_found() => Err(Error::DeleteLease { source }),
        _ => Ok(()),
    }
}

fn from<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, Error> {
    Ok(serde_json::from_value(value)?)
}

// ---- Reading /metrics ----

/// The sum of every sample of counter `family`.
pub fn counter_sum(text: &str, family: &str) -> f64 {
    samples(text, family).map(|(_, value)| value).sum()
}

/// `family`'s histogram summed over every series: (upper bound, cumulative count) by bound.
pub fn histogram_buckets(text: &str, family: &str) -> Vec<(f64, f64)> {
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    for (labels, value) in samples(text, &format!("{family}_bucket")) {
        let Some(le) = label(labels, "le") else { continue };
        let bound = if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap_or(f64::NAN) };
        if bound.is_nan() {
            continue;
        }
        match buckets.iter_mut().find(|(b, _)| *b == bound) {
            Some((_, count)) => *count += value,
            None => buckets.push((bound, value)),
        }
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    buckets
}

/// The buckets of `family` per value of the label `by` (e.g. each queue's `name`), summed as
/// [`histogram_buckets`] sums them.
pub fn histogram_buckets_by(text: &str, family: &str, by: &str) -> BTreeMap<String, Vec<(f64, f64)>> {
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    for (labels, value) in samples(text, &format!("{family}_bucket")) {
        let Some(name) = label(labels, by) else { continue };
        let line = format!("{family}_bucket{{{labels}}} {value}\n");
        names.entry(name.to_string()).or_default().push_str(&line);
    }
    names.into_iter().map(|(name, lines)| (name, histogram_buckets(&lines, family))).collect()
}

/// How many of a histogram's observations are above 1 s, and how many there are.
fn past_a_second(buckets: &[(f64, f64)]) -> (f64, f64) {
    let total = buckets.last().map_or(0.0, |&(_, count)| count);
    let within = buckets.iter().take_while(|(bound, _)| *bound <= 1.0).last().map_or(0.0, |&(_, count)| count);
    (total - within, total)
}

/// Prometheus's `histogram_quantile`: linear within the bucket the rank falls in; the
/// highest finite bound when it falls in `+Inf`; 0 without observations.
pub fn quantile(buckets: &[(f64, f64)], q: f64) -> f64 {
    let Some(&(_, total)) = buckets.last() else { return 0.0 };
    if total <= 0.0 {
        return 0.0;
    }
    let rank = q * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for &(bound, count) in buckets {
        if count >= rank {
            if bound.is_infinite() {
                return lower;
            }
            let within = count - below;
            return if within <= 0.0 { bound } else { lower + (bound - lower) * (rank - below) / within };
        }
        (lower, below) = (bound, count);
    }
    lower
}

/// The samples of `name` (exactly, not a longer name): their label text and value.
fn samples<'t>(text: &'t str, name: &'t str) -> impl Iterator<Item = (&'t str, f64)> + 't {
    text.lines().filter_map(move |line| {
        let rest = line.strip_prefix(name)?;
        let (labels, value) = match rest.strip_prefix('{') {
            Some(labelled) => labelled.rsplit_once('}')?,
            None if rest.starts_with(' ') => ("", rest),
            None => return None,
        };
        let value = value.split_whitespace().next()?.parse::<f64>().ok()?;
        Some((labels, value))
    })
}

/// The value of label `name` in a sample's label text (values hold no escaped quotes here).
fn label<'t>(labels: &'t str, name: &str) -> Option<&'t str> {
    labels
        .split("\",")
        .find_map(|pair| pair.trim_start_matches(',').strip_prefix(name)?.strip_prefix("=\""))
        .map(|v| v.trim_end_matches('"'))
}

// ---- The table ----

/// The figures of `runs` side by side (upstream's first if both ran), with ours/upstream.
pub fn table(options: &ScaleOptions, runs: &[ScaleRun]) -> String {
    let ours = runs.iter().find(|r| r.side == Side::Ours);
    let upstream = runs.iter().find(|r| r.side == Side::Upstream);
    let mut out = format!(
        "Scale: {} nodes in {} zones, {} Deployments × {} replicas = {} pods, --kube-api-qps={} --kube-api-burst={}, \
         {} failed nodes of zone-a, {} simulated kubelet threads\n\n| | ours | upstream v1.36.2 | ours / upstream |\n|---|---|---|---|\n",
        options.nodes,
        ZONES.len(),
        options.deployments,
        options.replicas,
        options.pods(),
        options.qps,
        options.burst,
        options.failed_nodes().len(),
        options.kubelet_threads()
    );
    let mut row = |what: String, get: &dyn Fn(&ScaleRun) -> Option<f64>, digits: usize| {
        let (a, b) = (ours.and_then(get), upstream.and_then(get));
        let cell = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.digits$}"));
        let ratio = match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
            _ => "—".into(),
        };
        out.push_str(&format!("| {what} | {} | {} | {ratio} |\n", cell(a), cell(b)));
    };
    let names = runs.first().map(|r| r.steps.iter().map(|s| s.name).collect::<Vec<_>>()).unwrap_or_default();
    for name in &names {
        row(format!("{name}: time to converge (s)"), &|r| r.step(name).map(|s| s.seconds), 1);
    }
    for name in &names {
        row(format!("{name}: CPU s"), &|r| r.step(name).map(|s| s.cpu), 1);
    }
    row("CPU s, whole run".into(), &|r| Some(r.steps.iter().map(|s| s.cpu).sum()), 1);
    for name in &names {
        row(format!("{name}: peak RSS (MiB)"), &|r| r.step(name).map(|s| mib(s.peak_rss)), 1);
    }
    row("RSS with every pod, after the rollout (MiB)".into(), &|r| r.step("rollout").map(|s| mib(s.end_rss)), 1);
    row("peak RSS of the run, VmHWM (MiB)".into(), &|r| Some(mib(r.hwm)), 1);
    row("threads, peak".into(), &|r| r.steps.iter().map(|s| s.peak_threads as f64).reduce(f64::max), 0);
    for name in &names {
        row(format!("{name}: API requests/s"), &|r| r.step(name).map(|s| s.requests / s.seconds.max(0.001)), 1);
    }
    for (i, when) in ["before the restart", "after it"].iter().enumerate() {
        row(format!("workqueue wait p50 {when} (ms)"), &|r| r.queue_wait.get(i).map(|q| q.0 * 1000.0), 2);
        row(format!("workqueue wait p99 {when} (ms)"), &|r| r.queue_wait.get(i).map(|q| q.1 * 1000.0), 2);
    }
    row("failed nodes tainted for eviction".into(), &|r| Some(r.taint_offsets.len() as f64), 0);
    row("eviction taints per second".into(), &ScaleRun::eviction_rate, 3);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAPE: &str = "\
# TYPE rest_client_requests_total counter
rest_client_requests_total{code=\"200\",host=\"h\",method=\"GET\"} 10
rest_client_requests_total{code=\"201\",host=\"h\",method=\"POST\"} 5
rest_client_requests_total_extra 99
workqueue_queue_duration_seconds_bucket{name=\"a\",le=\"0.001\"} 5
workqueue_queue_duration_seconds_bucket{name=\"a\",le=\"0.01\"} 10
workqueue_queue_duration_seconds_bucket{name=\"a\",le=\"+Inf\"} 10
workqueue_queue_duration_seconds_bucket{name=\"b\",le=\"0.001\"} 0
workqueue_queue_duration_seconds_bucket{name=\"b\",le=\"0.01\"} 0
workqueue_queue_duration_seconds_bucket{name=\"b\",le=\"+Inf\"} 10
";

    #[test]
    fn counters_are_summed_over_their_series_only() {
        assert_eq!(counter_sum(SCRAPE, "rest_client_requests_total"), 15.0);
    }

    #[test]
    fn quantiles_follow_histogram_quantile() {
        let buckets = histogram_buckets(SCRAPE, "workqueue_queue_duration_seconds");
        assert_eq!(buckets, vec![(0.001, 5.0), (0.01, 10.0), (f64::INFINITY, 20.0)]);
        assert_eq!(quantile(&buckets, 0.25), 0.001, "rank 5 ends the first bucket");
        assert!((quantile(&buckets, 0.5) - 0.01).abs() < 1e-12, "rank 10 ends the second");
        assert_eq!(quantile(&buckets, 0.99), 0.01, "in +Inf: the highest finite bound");
        assert_eq!(quantile(&[], 0.5), 0.0);
    }

    #[test]
    fn buckets_by_queue_are_each_queues_own() {
        let by_queue = histogram_buckets_by(SCRAPE, "workqueue_queue_duration_seconds", "name");
        assert_eq!(by_queue.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(by_queue["a"], vec![(0.001, 5.0), (0.01, 10.0), (f64::INFINITY, 10.0)]);
        assert_eq!(quantile(&by_queue["b"], 0.99), 0.01, "all of b's in +Inf");
        assert_eq!(past_a_second(&by_queue["a"]), (0.0, 10.0));
        assert_eq!(past_a_second(&by_queue["b"]), (10.0, 10.0));
    }

    #[test]
    fn the_failed_nodes_are_a_share_of_the_first_zone() {
        let options = ScaleOptions {
            nodes: 30,
            deployments: 1,
            replicas: 2,
            failed_fraction: 0.1,
            qps: 500,
            burst: 1000,
            toleration_seconds: 30,
            dir: PathBuf::new(),
        };
        assert_eq!(options.failed_nodes(), ["node-0000"]);
        let more = ScaleOptions { failed_fraction: 0.5, ..options.clone() };
        assert_eq!(more.failed_nodes(), ["node-0000", "node-0003", "node-0006", "node-0009", "node-0012"]);
        assert!(ScaleOptions { replicas: 3, ..options }.check().is_err(), "an odd count cannot be halved");
    }

    /// The last failure of a step's check is shown quoted, as the `String` it was.
    #[test]
    fn a_step_not_converged_names_its_last_error() {
        let patience = Duration::from_secs(5);
        let none = Error::NotConverged { step: "create".into(), patience, last_error: None };
        assert_eq!(none.to_string(), "create: not converged after 5s (last error: \"\")");
        let last = Some(Box::new(Error::NoSampler));
        let some = Error::NotConverged { step: "create".into(), patience, last_error: last };
        assert_eq!(some.to_string(), "create: not converged after 5s (last error: \"no sampler\")");
        assert!(std::error::Error::source(&some).is_some());
    }
}
