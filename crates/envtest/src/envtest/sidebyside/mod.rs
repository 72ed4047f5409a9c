//! Side-by-side runs: the same scripted steps against a fresh real control plane, once with
//! upstream's kube-controller-manager (v1.36.2) and once with ours, both started as kubeadm starts
//! it and with the same controller selection; then the resulting objects and Events, normalised,
//! are compared, and each binary's HTTP 409 answers to writes are counted from its `-v=6` request
//! log.
//!
//! A [`Scenario`] is a plain function over [`Steps`] (an admin client, the simulated nodes, the
//! namespaces compared). Steps wait only for outcomes either binary must reach (pods running, a
//! rollout complete), then [`Steps::checkpoint`] records the settled state; every run ends with a
//! `final` checkpoint. What is compared, once normalised:
//! - objects of the usual kinds in the scenario's namespaces (and Nodes where the scenario says
//!   so): names with random suffixes become `<generateName>#<n>`, numbered in the order of the
//!   objects' content; uids become `uid(Kind/name)`; pod IPs `ip(pod)` and Service IPs
//!   `clusterIP(svc)`; timestamps, the cluster CA, generated tokens and the simulated machines'
//!   identities placeholders; resourceVersions and managedFields are dropped; Endpoints and
//!   EndpointSlice addresses are compared as sets (their order follows the nodes' pod CIDRs);
//! - Events as distinct (type, reason, involved object, message, source) lines, counts ignored.
//!
//! Each run leaves its controller manager's log and its normalised checkpoints (JSON) in the log
//! folder. [`KNOWN_DIFFERENCES`] lists differences that are understood and accepted, each with
//! its reason.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::ControlPlane;
use super::jsonapi::{Error as JsonApiError, JsonApi};
use super::metrics_api::{self, MetricsApis};
use super::process::{self, OwnedProcess};
use crate::apimachinery::errors::BoxError;
use crate::client::{self, Client, ClientOptions};
use crate::sandbox::nodes::{NodeOptions, SimulatedNodes};

/// The namespace every scenario starts with.
pub const NAMESPACE: &str = "sbs";
/// How long one step may take to converge.
const STEP_TIMEOUT: Duration = Duration::from_secs(90);
/// A checkpoint is taken once the normalised state stayed the same this long...
const SETTLE_QUIET: Duration = Duration::from_millis(1500);
/// ... or after this long, marked unsettled.
const SETTLE_LIMIT: Duration = Duration::from_secs(30);
/// How often the state is read while settling.
const SETTLE_POLL: Duration = Duration::from_millis(300);

/// Why a side-by-side run, or one of its steps, failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The control plane did not start (or its binaries are missing).
    #[error(transparent)]
    TestBed(#[from] super::Error),
    /// The controller manager did not start.
    #[error(transparent)]
    Process(#[from] process::Error),
    /// The metrics APIs could not be served.
    #[error(transparent)]
    MetricsApis(#[from] metrics_api::Error),
    /// The admin client could not be built, or a request body encoded.
    #[error(transparent)]
    Client(#[from] client::Error),
    /// The simulated nodes did not start, or a step on them failed.
    #[error("{0}")]
    Nodes(#[source] BoxError),
    /// The log folder cannot be created.
    #[error("{}: {source}", .dir.display())]
    LogDir {
        /// The folder.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A request failed, or its answer is not JSON (`GET /api/v1/nodes: …`).
    #[error(transparent)]
    Request(#[from] JsonApiError),
    /// The controller manager ended while a step waited.
    #[error("kube-controller-manager exited ({status}):\n{output}")]
    ManagerExited {
        /// How it ended.
        status: std::process::ExitStatus,
        /// The last lines of its log.
        output: String,
    },
    /// A step's outcome did not come in time.
    #[error("timed out after {timeout:?} waiting for {what}")]
    Timeout {
        /// What was waited for.
        what: String,
        /// How long.
        timeout: Duration,
    },
    /// A time could not be computed.
    #[error(transparent)]
    Time(#[from] jiff::Error),
    /// A certificate request could not be built.
    #[error(transparent)]
    Certificate(#[from] rcgen::Error),
    /// An eviction a budget forbids was refused otherwise than with 429.
    #[error("the eviction was refused otherwise: {source}")]
    EvictionRefused {
        /// How it was refused.
        #[source]
        source: Box<Error>,
    },
    /// A scenario found the cluster otherwise than it expects (the message says how).
    #[error("{0}")]
    Scenario(String),
}

impl Error {
    /// The API error's HTTP code, when a request failed with one.
    pub fn code(&self) -> Option<u16> {
        client::Error::find(self).and_then(client::Error::code)
    }
}

/// One scripted scenario.
pub struct Scenario {
    /// The name it is selected by, and the prefix of its log files.
    pub name: &'static str,
    /// One line on what the steps do.
    pub summary: &'static str,
    /// Simulated nodes (`node-1` …).
    pub nodes: usize,
    /// Flags given to both binaries on top of kubeadm's; `--controllers=-a,-b` takes controllers
    /// out of the selection (a second `--controllers` would add to the first, where an explicit
    /// name wins over its `-name`).
    pub flags: &'static [&'static str],
    /// Flags given to kube-apiserver on top of kubeadm's (both runs): how a scenario serves a
    /// beta or alpha API (`--runtime-config=...`, `--feature-gates=...`).
    pub apiserver_flags: &'static [&'static str],
    /// Whether Nodes (and their Events) are compared.
    pub compare_nodes: bool,
    /// The steps, run against a fresh control plane with the side's controller manager running.
    pub run: fn(&mut Steps) -> Result<(), Error>,
}

/// A controller manager under comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Upstream's kube-controller-manager v1.36.2.
    Upstream,
    /// This crate's `kube-controller-manager`.
    Ours,
}

impl Side {
    /// `upstream` or `ours`, as in log file names.
    pub fn name(self) -> &'static str {
        match self {
            Side::Upstream => "upstream",
            Side::Ours => "ours",
        }
    }
}

/// Where the binaries are and where the logs go.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Our `kube-controller-manager`.
    pub ours: PathBuf,
    /// Upstream's; `None` takes [`super::Assets`]'s.
    pub upstream: Option<PathBuf>,
    /// The controller managers' logs are written here as `<scenario>-<side>.log`.
    pub log_dir: PathBuf,
}

/// One side's run of a scenario.
#[derive(Debug)]
pub struct Run {
    /// Which controller manager ran.
    pub side: Side,
    /// Why the run did not finish, if it did not.
    pub error: Option<Error>,
    /// The checkpoints taken, in order; the last one is `final`.
    pub checkpoints: Vec<Snapshot>,
    /// The 409 answers the controller manager got.
    pub conflicts: Conflicts,
    /// The controller manager's log (`<scenario>-<side>.log`).
    pub log: PathBuf,
    /// Wall-clock time of the whole run.
    pub elapsed: Duration,
}

/// Both runs of a scenario and what differs between them.
#[derive(Debug)]
pub struct Outcome {
    /// The scenario's name.
    pub scenario: &'static str,
    /// The run with upstream's binary.
    pub upstream: Run,
    /// The run with ours.
    pub ours: Run,
    /// Every difference found, known ones included.
    pub differences: Vec<Difference>,
}

impl Outcome {
    /// The differences not in [`KNOWN_DIFFERENCES`].
    pub fn unexpected(&self) -> Vec<&Difference> {
        self.differences.iter().filter(|d| d.known(self.scenario).is_none()).collect()
    }
}

/// The normalised state at one checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The checkpoint's label, given to [`Steps::checkpoint`] (`final` for the last).
    pub label: String,
    /// Objects by `Kind namespace/name`.
    pub objects: BTreeMap<String, Value>,
    /// Distinct Events, one line each.
    pub events: BTreeSet<String>,
    /// False when the state kept changing until `SETTLE_LIMIT`.
    pub settled: bool,
}

/// HTTP 409 answers to a binary's writes, from its request log.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Conflicts {
    /// All 409 answers.
    pub total: usize,
    /// By `VERB resource[/subresource]`.
    pub by_request: BTreeMap<String, usize>,
}

impl fmt::Display for Conflicts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.total)?;
        if !self.by_request.is_empty() {
            let parts: Vec<String> = self.by_request.iter().map(|(k, n)| format!("{k}: {n}")).collect();
            write!(f, " ({})", parts.join(", "))?;
        }
        Ok(())
    }
}

/// One thing that differs between the two runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The label of the checkpoint it was found at (`-` for the run as a whole).
    pub checkpoint: String,
    /// `Kind namespace/name`, `event "<line>"`, `run` or `checkpoint`.
    pub subject: String,
    /// A JSON path inside the object (`.status.replicas`), empty for the whole subject.
    pub path: String,
    /// Upstream's value, rendered.
    pub upstream: String,
    /// Our value, rendered.
    pub ours: String,
}

impl Difference {
    /// The known difference that explains this one, if any.
    pub fn known(&self, scenario: &str) -> Option<&'static KnownDifference> {
        KNOWN_DIFFERENCES.iter().find(|k| {
            (k.scenario.is_empty() || k.scenario == scenario)
                && self.subject.contains(k.subject_contains)
                && self.path.starts_with(k.path_prefix)
                && (self.upstream.contains(k.value_contains) || self.ours.contains(k.value_contains))
        })
    }
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}] {}{}: upstream {} | ours {}",
            self.checkpoint, self.subject, self.path, self.upstream, self.ours
        )
    }
}

mod compare;
mod known;
mod normalise;
pub mod scenarios;
mod steps;
#[cfg(test)]
mod tests;

pub use compare::*;
pub use known::*;
pub use normalise::*;
pub use scenarios::deployment_policy;
pub use steps::*;

// ---------------------------------------------------------------------------------------------
// Running
// ---------------------------------------------------------------------------------------------

/// Runs `scenario` with upstream's binary and with ours, at once, and compares.
pub fn compare(scenario: &'static Scenario, options: &RunOptions) -> Result<Outcome, Error> {
    let upstream_binary = match &options.upstream {
        Some(path) => path.clone(),
        None => super::Assets::locate().map_err(super::Error::from)?.kube_controller_manager,
    };
    std::fs::create_dir_all(&options.log_dir)
        .map_err(|source| Error::LogDir { dir: options.log_dir.clone(), source })?;
    // Each side has its own control plane: the two run at once, halving the wait.
    let (upstream, ours) = std::thread::scope(|scope| {
        let upstream = scope.spawn(|| run(scenario, Side::Upstream, &upstream_binary, &options.log_dir));
        let ours = run(scenario, Side::Ours, &options.ours, &options.log_dir);
        (upstream.join().expect("the upstream run does not panic"), ours)
    });
    let differences = diff_runs(&upstream, &ours);
    Ok(Outcome { scenario: scenario.name, upstream, ours, differences })
}

/// The scenario called `name`.
pub fn scenario(name: &str) -> Option<&'static Scenario> {
    scenarios::all().find(|s| s.name == name)
}

/// One run: a fresh control plane, simulated nodes, the binary, the steps, the final checkpoint.
pub fn run(scenario: &Scenario, side: Side, binary: &Path, log_dir: &Path) -> Run {
    let started = Instant::now();
    let log = log_dir.join(format!("{}-{}.log", scenario.name, side.name()));
    let _ = std::fs::remove_file(&log);
    let mut checkpoints = Vec::new();
    let error = run_steps(scenario, side, binary, &log, &mut checkpoints).err();
    // The normalised states beside the log, for a closer look at a difference.
    let states: Vec<Value> = checkpoints
        .iter()
        .map(|c| json!({"checkpoint": c.label, "settled": c.settled, "objects": c.objects, "events": c.events}))
        .collect();
    let _ = std::fs::write(
        log_dir.join(format!("{}-{}.json", scenario.name, side.name())),
        serde_json::to_string_pretty(&states).unwrap_or_default(),
    );
    let conflicts = std::fs::read_to_string(&log).map(|text| count_conflicts(&text)).unwrap_or_default();
    Run { side, error, checkpoints, conflicts, log, elapsed: started.elapsed() }
}

fn run_steps(
    scenario: &Scenario,
    side: Side,
    binary: &Path,
    log: &Path,
    checkpoints: &mut Vec<Snapshot>,
) -> Result<(), Error> {
    let plane = ControlPlane::start_with_apiserver_flags(scenario.apiserver_flags)?;
    let admin = Client::new(plane.admin_config(), ClientOptions { qps: -1.0, ..ClientOptions::default() })?
        .for_controller("side-by-side");
    let (_, kubeconfig) = plane.write_kubeconfigs(&plane.dir().join("kubeadm").join("admin.conf"))?;
    JsonApi(&admin).create("/api/v1/namespaces", &json!({"metadata": {"name": NAMESPACE}}))?;
    let names: Vec<String> = (1..=scenario.nodes).map(|i| format!("node-{i}")).collect();
    let nodes = SimulatedNodes::start(plane.admin_config(), names.clone(), node_options())
        .map_err(|e| Error::Nodes(e.into()))?;
    let mut manager = start_controller_manager(side, binary, &kubeconfig, scenario.flags, log)?;
    let mut steps = Steps {
        client: admin,
        plane: &plane,
        metrics_apis: None,
        nodes: &nodes,
        namespaces: vec![NAMESPACE.to_string()],
        cluster_objects: Vec::new(),
        compare_nodes: scenario.compare_nodes,
        ca_pem: plane.ca_pem().to_string(),
        remembered: Default::default(),
        checkpoints: Vec::new(),
        manager: &mut manager,
    };
    let result = steps.ready(&names).and_then(|()| (scenario.run)(&mut steps)).and_then(|()| steps.checkpoint("final"));
    if result.is_err() {
        // What there was when the run gave up, to compare with the other run's checkpoint.
        if let Ok(mut state) = steps.snapshot("final") {
            state.settled = false;
            steps.checkpoints.push(state);
        }
    }
    checkpoints.append(&mut steps.checkpoints);
    // The metrics APIs are unregistered before the control plane goes.
    drop(steps);
    manager.stop(Duration::from_secs(10));
    nodes.stop();
    drop(plane);
    result
}

/// Fast simulated nodes that respect the not-ready taint, as kube-scheduler does.
pub fn node_options() -> NodeOptions {
    NodeOptions {
        lease_renew_interval: Duration::from_secs(1),
        pod_start_delay: Duration::from_millis(300),
        tick: Duration::from_millis(100),
        strict_not_ready_taint: true,
        ..NodeOptions::default()
    }
}

/// The flags kubeadm v1.36 gives kube-controller-manager (with `podSubnet` 10.244.0.0/16),
/// the implemented controllers only, no serving, `-v=6` for the request log.
pub fn controller_manager_args(side: Side, kubeconfig: &Path, extra: &[&str]) -> Vec<String> {
    let beside = |name: &str| kubeconfig.with_file_name(name).display().to_string();
    let deselect =
        |flag: &str| flag.strip_prefix("--controllers=").is_some_and(|l| l.split(',').all(|n| n.starts_with('-')));
    let left_out: Vec<&str> = extra
        .iter()
        .filter(|f| deselect(f))
        .flat_map(|f| f["--controllers=".len()..].split(',').map(|n| &n[1..]))
        .collect();
    let selected = crate::app::controllers::implemented().into_iter().filter(|name| !left_out.contains(name));
    let mut controllers = selected.collect::<Vec<_>>().join(",");
    if side == Side::Upstream {
        // The unpacked v1.36.2 build is OpenShift's and carries a controller of its own; it is
        // named off so that both run the same controllers (../shared/k8s/v1.36.2/README.md).
        controllers.push_str(",-service-ca-certificate-publisher-controller");
    }
    let mut args = vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        "--use-service-account-credentials=true".into(),
        format!("--root-ca-file={}", beside("ca.crt")),
        format!("--cluster-signing-cert-file={}", beside("ca.crt")),
        format!("--cluster-signing-key-file={}", beside("ca.key")),
        format!("--service-account-private-key-file={}", beside("sa.key")),
        "--allocate-node-cidrs=true".into(),
        "--cluster-cidr=10.244.0.0/16".into(),
        format!("--service-cluster-ip-range={}", super::SERVICE_CLUSTER_IP_RANGE),
        "--cluster-name=kubernetes".into(),
        "--leader-elect=true".into(),
        "--bind-address=127.0.0.1".into(),
        "--secure-port=0".into(),
        format!("--controllers={controllers}"),
        "-v=6".into(),
    ];
    args.extend(extra.iter().filter(|f| !deselect(f)).map(|f| f.to_string()));
    args
}

/// Starts `binary` (`side`'s kube-controller-manager) with [`controller_manager_args`] and
/// `extra`, its output in `log`.
pub fn start_controller_manager(
    side: Side,
    binary: &Path,
    kubeconfig: &Path,
    extra: &[&str],
    log: &Path,
) -> Result<OwnedProcess, process::Error> {
    let mut command = Command::new(binary);
    command.args(controller_manager_args(side, kubeconfig, extra));
    OwnedProcess::spawn(&format!("kube-controller-manager ({})", side.name()), command, log)
}
