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
use ureq::http::Method;

use super::ControlPlane;
use super::metrics_api::MetricsApis;
use super::process::OwnedProcess;
use crate::client::{Body, Client, ClientOptions};
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
    pub run: fn(&mut Steps) -> Result<(), String>,
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
    pub error: Option<String>,
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

/// A difference that is understood and accepted.
#[derive(Debug)]
pub struct KnownDifference {
    /// The scenario it occurs in; empty for any.
    pub scenario: &'static str,
    /// A part of [`Difference::subject`].
    pub subject_contains: &'static str,
    /// The start of [`Difference::path`] ("" for any).
    pub path_prefix: &'static str,
    /// A part of either side's value ("" for any).
    pub value_contains: &'static str,
    /// Why the difference is accepted.
    pub reason: &'static str,
}

const SURVIVOR_TIE: &str = "scaling a ReplicaSet without an owner from 5 to 1, both delete the 2 newest \
     pods, then 2 of the 3 first ones, which tie on every rule of ActivePodsWithRanks (same readiness and \
     creation second, no co-location ranking for an unowned ReplicaSet); upstream breaks the tie with an \
     unstable sort of a randomly ordered lister list, so the survivor's node varies from run to run";

/// Differences found, understood and accepted (see each reason). They depend on timing (what
/// triggered a controller's last sync, how events were batched), which no two runs share.
pub const KNOWN_DIFFERENCES: &[KnownDifference] = &[
    KnownDifference {
        scenario: "",
        subject_contains: "Error saving claim: Operation cannot be fulfilled on persistentvolumeclaims",
        path_prefix: "",
        value_contains: "",
        reason: "the binder's write of a new claim's storage-provisioner annotations may meet a conflict with \
                 another controller's write of the claim (both sides do, upstream too): timing",
    },
    KnownDifference {
        scenario: "",
        subject_contains: "Endpoints ",
        path_prefix: ".metadata.annotations",
        value_contains: "endpoints.kubernetes.io/last-change-trigger-time",
        reason: "the endpoints controller sets the trigger-time annotation when the sync that wrote the \
                 Endpoints was triggered by a pod change, and clears it otherwise: timing",
    },
    KnownDifference {
        scenario: "",
        subject_contains: "EndpointSlice ",
        path_prefix: ".metadata.annotations",
        value_contains: "endpoints.kubernetes.io/last-change-trigger-time",
        reason: "as for Endpoints: the annotation follows what triggered the last sync",
    },
    KnownDifference {
        scenario: "",
        subject_contains: "EndpointSlice ",
        path_prefix: ".metadata.generation",
        value_contains: "",
        reason: "how many times a slice was written depends on how the pods' readiness changes fell \
                 between syncs (upstream wrote one slice 3 times within 33 ms as pods became ready, ours \
                 twice within 600 ms); the slice's content ends the same",
    },
    KnownDifference {
        scenario: "replicaset-scale",
        subject_contains: "Pod sbs/cache-#1",
        path_prefix: ".spec.nodeName",
        value_contains: "",
        reason: SURVIVOR_TIE,
    },
    KnownDifference {
        scenario: "replicaset-scale",
        subject_contains: "Pod sbs/cache-#1",
        path_prefix: ".status.hostIP",
        value_contains: "",
        reason: SURVIVOR_TIE,
    },
    KnownDifference {
        scenario: "",
        subject_contains: "Node /node-",
        path_prefix: ".spec.podCIDR",
        value_contains: "10.244.",
        reason: "the three nodes that exist when the controller starts are allocated concurrently (upstream \
                 runs 30 workers), so which of them gets 10.244.1.0/24 or 10.244.2.0/24 varies from run to \
                 run in both; the CIDRs handed out are the same",
    },
    KnownDifference {
        scenario: "node-ipam",
        subject_contains: "Node /static-2",
        path_prefix: ".spec.podCIDR",
        value_contains: "10.244.",
        reason: "after upstream's race below (a CIDR allocated to a node twice, refused with 422 and \
                 released), its CIDR set's next candidate has moved past the released CIDR, so the node \
                 added later gets the one after it (10.244.4.0/24 rather than 10.244.3.0/24)",
    },
    KnownDifference {
        scenario: "",
        subject_contains: "CIDRAssignmentFailed",
        path_prefix: "",
        value_contains: "",
        reason: "upstream's range allocator sometimes handles a node twice before its informer shows \
                 the first PATCH, allocates a second CIDR, gets 422 from kube-apiserver (\"may specify no \
                 more than one CIDR for each IP family\") and records CIDRAssignmentFailed before \
                 releasing it; the node keeps its first CIDR: an upstream race",
    },
    KnownDifference {
        scenario: "statefulset",
        subject_contains: "(combined from similar events): Create Pod web-",
        path_prefix: "",
        value_contains: "",
        reason: "the 10th distinct SuccessfulCreate message (Create Pod web-4) makes the Event recorder's \
                 aggregator write a combined Event and forget one remembered message picked at random \
                 (client-go's PopAny over a Go map); when web-1 is recreated by the rolling update, its \
                 message is repeated as is if remembered, or updates the combined Event if it was the one \
                 forgotten (1 in 10): the combined Event ends with web-4 or web-1 at random, in both",
    },
    KnownDifference {
        scenario: "statefulset",
        subject_contains: "could not update claim data-web-",
        path_prefix: "",
        value_contains: "",
        reason: "a race, in both: right after creating a pod the controller updates its claim's owner \
                 references from its cache (upstream's Update of the lister's copy) while the simulated \
                 provisioner binds the claim; when the bind reaches the cache later than the update is \
                 sent, the update gets 409, a FailedUpdate Event is recorded and the next sync retries",
    },
    KnownDifference {
        scenario: "statefulset",
        subject_contains: "SuccessfulCreate StatefulSet/web: Create Pod web-",
        path_prefix: "",
        value_contains: "",
        reason: "which SuccessfulCreate messages stay single Events beside the combined one depends on \
                 the aggregator's random PopAny (above) and on the order the pods are created in, which a \
                 retried sync (the claim race above) changes; the pods themselves are compared",
    },
    KnownDifference {
        scenario: "",
        subject_contains: "ClusterIPNotAllocated",
        path_prefix: "",
        value_contains: "",
        reason: "recorded by kube-apiserver's own ipallocator-repair-controller, not by the controller \
                 manager: its periodic repair pass sometimes runs between a Service's creation and the \
                 commit of its cluster IP's allocation, and reports the IP as not allocated",
    },
    KnownDifference {
        scenario: "",
        subject_contains: "already exists (by endpoint-controller)",
        path_prefix: "",
        value_contains: "",
        reason: "a race, in both: the endpoints controller creates a Service's Endpoints when its cache \
                 has none (upstream's endpointsLister.Get); a second sync (a pod became ready) that runs \
                 before the watch brings the Endpoints it just created tries again, gets AlreadyExists, \
                 records FailedToCreateEndpoint and retries with an update",
    },
    KnownDifference {
        scenario: "resourceclaim",
        subject_contains: "resource claim template \"gpu\": resourceclaimtemplate.resource.k8s.io \"gpu\" not found",
        path_prefix: "",
        value_contains: "",
        reason: "a race, in both: the pods are created right after their template, on another watch; a \
                 controller whose pod event comes before the template's syncs the pod against a cache \
                 without the template (upstream's templateLister.Get), records FailedResourceClaimCreation \
                 and retries, then generates the claim. Each kind has its own watch cache in \
                 kube-apiserver, so either binary may get the pod first. The missing template's Event \
                 (pod lost) is still compared",
    },
];

// ---------------------------------------------------------------------------------------------
// Running
// ---------------------------------------------------------------------------------------------

/// Runs `scenario` with upstream's binary and with ours, at once, and compares.
pub fn compare(scenario: &'static Scenario, options: &RunOptions) -> Result<Outcome, String> {
    let upstream_binary = match &options.upstream {
        Some(path) => path.clone(),
        None => super::Assets::locate()?.kube_controller_manager,
    };
    std::fs::create_dir_all(&options.log_dir).map_err(|e| format!("{}: {e}", options.log_dir.display()))?;
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
    SCENARIOS.iter().find(|s| s.name == name)
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
) -> Result<(), String> {
    let plane = ControlPlane::start_with_apiserver_flags(scenario.apiserver_flags)?;
    let admin = Client::new(plane.admin_config(), ClientOptions { qps: -1.0, ..ClientOptions::default() })
        .map_err(|e| e.to_string())?
        .for_controller("side-by-side");
    let (_, kubeconfig) = plane.write_kubeconfigs(&plane.dir().join("kubeadm").join("admin.conf"))?;
    create(&admin, "/api/v1/namespaces", json!({"metadata": {"name": NAMESPACE}}))?;
    let names: Vec<String> = (1..=scenario.nodes).map(|i| format!("node-{i}")).collect();
    let nodes = SimulatedNodes::start(plane.admin_config(), names.clone(), node_options())?;
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
) -> Result<OwnedProcess, String> {
    let mut command = Command::new(binary);
    command.args(controller_manager_args(side, kubeconfig, extra));
    OwnedProcess::spawn(&format!("kube-controller-manager ({})", side.name()), command, log)
}

// ---------------------------------------------------------------------------------------------
// Steps
// ---------------------------------------------------------------------------------------------

/// What a scenario's steps work with.
pub struct Steps<'a> {
    /// A cluster admin.
    pub client: Client,
    plane: &'a ControlPlane,
    /// The metrics APIs, once a scenario asked for them.
    metrics_apis: Option<MetricsApis>,
    /// The simulated nodes (kubelets) of this run.
    pub nodes: &'a SimulatedNodes,
    /// The namespaces whose objects and Events are compared.
    pub namespaces: Vec<String>,
    /// Cluster-scoped objects compared too (API paths, e.g. a ClusterRole's).
    pub cluster_objects: Vec<String>,
    compare_nodes: bool,
    ca_pem: String,
    /// What earlier checkpoints learnt, for objects naming objects since deleted.
    remembered: std::cell::RefCell<Remembered>,
    checkpoints: Vec<Snapshot>,
    manager: &'a mut OwnedProcess,
}

impl Steps<'_> {
    /// Waits until the controller manager has made the scenario namespace usable (its default
    /// ServiceAccount) and every node schedulable (not-ready taint removed).
    fn ready(&mut self, nodes: &[String]) -> Result<(), String> {
        let account = format!("/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default");
        let root_ca = format!("/api/v1/namespaces/{NAMESPACE}/configmaps/kube-root-ca.crt");
        self.wait("the default ServiceAccount and kube-root-ca.crt", |s| {
            Ok((s.get(&account)?.is_some() && s.get(&root_ca)?.is_some()).then_some(()))
        })?;
        self.wait("every node Ready and schedulable", |s| {
            let listed = s.list("/api/v1/nodes")?;
            Ok((listed.iter().filter(|n| node_usable(n)).count() == nodes.len()).then_some(()))
        })
    }

    /// Polls `check` until it gives a value; fails after `STEP_TIMEOUT` or when the
    /// controller manager exits.
    pub fn wait<T>(
        &mut self,
        what: &str,
        mut check: impl FnMut(&Steps) -> Result<Option<T>, String>,
    ) -> Result<T, String> {
        let deadline = Instant::now() + STEP_TIMEOUT;
        loop {
            if let Some(status) = self.manager.exited() {
                return Err(format!("kube-controller-manager exited ({status}):\n{}", self.manager.log_tail(20)));
            }
            if let Some(value) = check(self)? {
                return Ok(value);
            }
            if Instant::now() > deadline {
                return Err(format!("timed out after {STEP_TIMEOUT:?} waiting for {what}"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Records the state once it has settled.
    pub fn checkpoint(&mut self, label: &str) -> Result<(), String> {
        let started = Instant::now();
        let mut last = self.snapshot(label)?;
        let mut quiet_since = Instant::now();
        let settled = loop {
            std::thread::sleep(SETTLE_POLL);
            let next = self.snapshot(label)?;
            if next != last {
                last = next;
                quiet_since = Instant::now();
            } else if quiet_since.elapsed() >= SETTLE_QUIET {
                break true;
            }
            if started.elapsed() > SETTLE_LIMIT {
                break false;
            }
        };
        last.settled = settled;
        self.checkpoints.push(last);
        Ok(())
    }

    fn snapshot(&self, label: &str) -> Result<Snapshot, String> {
        let mut objects = Vec::new();
        let mut events = Vec::new();
        for ns in &self.namespaces {
            if let Some(namespace) = self.get(&format!("/api/v1/namespaces/{ns}"))? {
                objects.push(namespace);
            }
            for (prefix, resource, kind) in COMPARED_KINDS {
                for mut item in self.list(&format!("{prefix}/namespaces/{ns}/{resource}"))? {
                    item["kind"] = json!(kind);
                    objects.push(item);
                }
            }
            events.extend(self.list(&format!("/api/v1/namespaces/{ns}/events"))?);
        }
        for path in &self.cluster_objects {
            objects.extend(self.get(path)?);
        }
        for mut csr in self.list(CSRS)? {
            csr["kind"] = json!("CertificateSigningRequest");
            objects.push(summarise_csr(csr));
        }
        if self.compare_nodes {
            for mut node in self.list("/api/v1/nodes")? {
                node["kind"] = json!("Node");
                objects.push(node);
            }
            let node_events = self.list("/api/v1/namespaces/default/events")?;
            events.extend(node_events.into_iter().filter(|e| e["involvedObject"]["kind"] == "Node"));
        }
        Ok(normalise_remembering(label, objects, events, &self.ca_pem, &mut self.remembered.borrow_mut()))
    }

    /// GETs an object; `None` when it does not exist.
    pub fn get(&self, path: &str) -> Result<Option<Value>, String> {
        match self.client.get_json::<Value>(path) {
            Ok(value) => Ok(Some(value)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(format!("GET {path}: {e}")),
        }
    }

    /// The items of a list.
    pub fn list(&self, path: &str) -> Result<Vec<Value>, String> {
        let list: Value = self.client.get_json(path).map_err(|e| format!("GET {path}: {e}"))?;
        Ok(list["items"].as_array().cloned().unwrap_or_default())
    }

    /// POSTs `object` to the collection at `path`.
    pub fn create(&self, path: &str, object: Value) -> Result<Value, String> {
        create(&self.client, path, object)
    }

    /// A JSON merge patch.
    pub fn patch(&self, path: &str, patch: Value) -> Result<Value, String> {
        let body = Body { content_type: "application/merge-patch+json", ..json_body(&patch)? };
        send(&self.client, Method::PATCH, path, Some(body))
    }

    /// PUT of a whole object (e.g. a subresource such as a CSR's `approval`).
    pub fn replace(&self, path: &str, object: Value) -> Result<Value, String> {
        send(&self.client, Method::PUT, path, Some(json_body(&object)?))
    }

    /// DELETE with a propagation policy (`None`: the kind's default).
    pub fn delete(&self, path: &str, propagation: Option<&str>) -> Result<(), String> {
        let body = match propagation {
            Some(policy) => {
                Some(json_body(&json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy}))?)
            }
            None => None,
        };
        send(&self.client, Method::DELETE, path, body).map(|_| ())
    }

    /// Pods in `namespace` matching `selector` and not being deleted.
    pub fn live_pods(&self, namespace: &str, selector: &str) -> Result<Vec<Value>, String> {
        let pods = self.list(&format!("/api/v1/namespaces/{namespace}/pods?labelSelector={selector}"))?;
        Ok(pods.into_iter().filter(|p| p["metadata"]["deletionTimestamp"].is_null()).collect())
    }

    /// Waits for exactly `count` live pods matching `selector`, all Running and Ready.
    pub fn wait_pods_ready(&mut self, namespace: &str, selector: &str, count: usize) -> Result<Vec<Value>, String> {
        self.wait(&format!("{count} ready pods {selector} in {namespace}"), |s| {
            let pods = s.live_pods(namespace, selector)?;
            let ready = pods.iter().all(|p| p["status"]["phase"] == "Running" && condition(p, "Ready") == Some("True"));
            Ok((pods.len() == count && ready).then_some(pods))
        })
    }

    /// Serves the metrics APIs from annotations (`kcm::envtest`'s aggregated metrics API
    /// server), for as long as the run lasts.
    pub fn serve_metrics_apis(&mut self) -> Result<(), String> {
        self.metrics_apis = Some(self.plane.serve_metrics_apis()?);
        Ok(())
    }

    /// Waits until kube-apiserver's watch cache of `collection` has caught up with `written`
    /// (an object as a write returned it): a list at its resourceVersion with `NotOlderThan`
    /// is served only then, and the cache hands the change to its watches (the controller
    /// manager's informers) as it does so.
    ///
    /// Each kind has its own cache, fed by its own etcd watch, so a controller can see a
    /// second write (a DaemonSet) before a first of another kind (its node's taint): a race
    /// either binary can lose. A scenario whose outcome depends on that order calls this
    /// between the two writes.
    pub fn wait_cached(&mut self, collection: &str, written: &Value) -> Result<(), String> {
        let name = written["metadata"]["name"].as_str().ok_or("the written object has no name")?;
        let version = written["metadata"]["resourceVersion"].as_str().ok_or("the written object has no version")?;
        let path = format!(
            "{collection}?fieldSelector=metadata.name={name}&resourceVersion={version}&resourceVersionMatch=NotOlderThan"
        );
        // A cache more than a few seconds behind answers 504 ("Too large resource version").
        self.wait(&format!("the watch cache of {collection} at {name}'s write"), |s| {
            match s.client.get_json::<Value>(&path) {
                Ok(_) => Ok(Some(())),
                Err(e) if e.code() == Some(504) => Ok(None),
                Err(e) => Err(format!("GET {path}: {e}")),
            }
        })
    }

    /// Waits until `path` no longer exists.
    pub fn wait_gone(&mut self, path: &str) -> Result<(), String> {
        self.wait(&format!("{path} to be gone"), |s| Ok(s.get(path)?.is_none().then_some(())))
    }
}

fn json_body(value: &Value) -> Result<Body, String> {
    Body::json(value).map_err(|e| e.to_string())
}

fn send(client: &Client, method: Method, path: &str, body: Option<Body>) -> Result<Value, String> {
    let what = format!("{method} {path}");
    let bytes = client.send(method, path, body).map_err(|e| format!("{what}: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{what}: {e}"))
}

fn create(client: &Client, path: &str, object: Value) -> Result<Value, String> {
    send(client, Method::POST, path, Some(json_body(&object)?))
}

/// Whether a Node (JSON) is Ready and free of the node lifecycle's `node.kubernetes.io/` taints
/// (not-ready, unreachable), so that pods land on it.
pub fn node_usable(node: &Value) -> bool {
    let taints = node["spec"]["taints"].as_array().map(Vec::as_slice).unwrap_or_default();
    condition(node, "Ready") == Some("True")
        && !taints.iter().any(|t| t["key"].as_str().is_some_and(|k| k.starts_with("node.kubernetes.io/")))
}

/// The status of condition `type` of an object.
pub fn condition<'v>(object: &'v Value, type_: &str) -> Option<&'v str> {
    object["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_)?["status"].as_str()
}

/// The namespaced kinds compared: API prefix, resource, kind.
const COMPARED_KINDS: &[(&str, &str, &str)] = &[
    ("/api/v1", "pods", "Pod"),
    ("/api/v1", "replicationcontrollers", "ReplicationController"),
    ("/api/v1", "services", "Service"),
    ("/api/v1", "endpoints", "Endpoints"),
    ("/api/v1", "configmaps", "ConfigMap"),
    ("/api/v1", "secrets", "Secret"),
    ("/api/v1", "serviceaccounts", "ServiceAccount"),
    ("/api/v1", "resourcequotas", "ResourceQuota"),
    ("/apis/apps/v1", "deployments", "Deployment"),
    ("/apis/apps/v1", "replicasets", "ReplicaSet"),
    ("/apis/apps/v1", "daemonsets", "DaemonSet"),
    ("/apis/discovery.k8s.io/v1", "endpointslices", "EndpointSlice"),
    ("/apis/batch/v1", "jobs", "Job"),
    ("/apis/batch/v1", "cronjobs", "CronJob"),
    ("/apis/apps/v1", "statefulsets", "StatefulSet"),
    ("/apis/apps/v1", "controllerrevisions", "ControllerRevision"),
    ("/api/v1", "persistentvolumeclaims", "PersistentVolumeClaim"),
    ("/apis/policy/v1", "poddisruptionbudgets", "PodDisruptionBudget"),
    ("/apis/autoscaling/v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler"),
    ("/apis/resource.k8s.io/v1", "resourceclaims", "ResourceClaim"),
    ("/apis/resource.k8s.io/v1", "resourceclaimtemplates", "ResourceClaimTemplate"),
];

// ---------------------------------------------------------------------------------------------
// Normalising
// ---------------------------------------------------------------------------------------------

/// The CSR collection (cluster-scoped: every scenario's CSRs are compared).
const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

/// A CSR as compared: its request and certificate (keys and serials differ between runs) become
/// what they say (subject, SANs, lifetime), and condition times are dropped.
fn summarise_csr(mut csr: Value) -> Value {
    use crate::x509::certificate::{certificate_sans, certificate_validity};
    csr["spec"]["request"] = json!("<request>");
    // The requester's credential: each run's control plane has its own admin certificate.
    if let Some(extra) = csr["spec"]["extra"].as_object_mut() {
        extra.remove("authentication.kubernetes.io/credential-id");
        if extra.is_empty() {
            csr["spec"].as_object_mut().map(|s| s.remove("extra"));
        }
    }
    if let Some(conditions) = csr["status"]["conditions"].as_array_mut() {
        for condition in conditions {
            condition.as_object_mut().map(|c| {
                c.remove("lastUpdateTime");
                c.remove("lastTransitionTime")
            });
        }
    }
    let Some(encoded) = csr["status"]["certificate"].as_str() else { return csr };
    use base64::Engine;
    let pem = base64::engine::general_purpose::STANDARD.decode(encoded).unwrap_or_default();
    let summary = crate::x509::pem_blocks(&pem).first().map(|(_, der)| {
        let subject = crate::x509::subject(der).unwrap_or_default();
        let (dns, ips) = certificate_sans(der).unwrap_or_default();
        let lifetime = certificate_validity(der).map(|(from, to)| from.duration_until(to).as_secs());
        json!({"commonName": subject.common_name, "organizations": subject.organizations,
            "dnsNames": dns, "ipAddresses": ips.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "lifetimeSeconds": lifetime})
    });
    csr["status"]["certificate"] = summary.unwrap_or(json!("<unreadable>"));
    csr
}

/// Turns the objects and Events read at one checkpoint into their comparable form.
pub fn normalise(label: &str, objects: Vec<Value>, events: Vec<Value>, ca_pem: &str) -> Snapshot {
    normalise_remembering(label, objects, events, ca_pem, &mut Remembered::default())
}

/// What one run's checkpoints carry over to the next ones.
#[derive(Debug, Default)]
struct Remembered {
    /// Renames derived from uids (an Event keeps naming a claim's volume after both are gone).
    uids: HashMap<String, String>,
    /// `generateName` prefixes (a pod's status keeps naming its generated ResourceClaim after
    /// the claim was deleted): such names are masked `prefix*`.
    prefixes: BTreeSet<String>,
}

/// [`normalise`], also renaming the uids and masking the generated names `remembered` from
/// earlier checkpoints, and remembering this checkpoint's.
fn normalise_remembering(
    label: &str,
    objects: Vec<Value>,
    events: Vec<Value>,
    ca_pem: &str,
    remembered: &mut Remembered,
) -> Snapshot {
    let mut names = Renames::new(ca_pem);
    names.exact.extend(remembered.uids.iter().map(|(k, v)| (k.clone(), v.clone())));
    names.prefixes.extend(remembered.prefixes.iter().cloned());
    names.learn(&objects, &events);
    let uid_derived = |raw: &str| is_uuid(raw) || raw.strip_prefix("pvc-").is_some_and(is_uuid);
    remembered.uids.extend(names.exact.iter().filter(|(raw, _)| uid_derived(raw)).map(|(k, v)| (k.clone(), v.clone())));
    let generated = objects.iter().filter_map(|o| o["metadata"]["generateName"].as_str()).filter(|p| !p.is_empty());
    remembered.prefixes.extend(generated.map(str::to_string));
    let mut compared = BTreeMap::new();
    for object in objects {
        let mut object = strip(object);
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        if kind == "Secret"
            && object["type"] == "kubernetes.io/service-account-token"
            && let Some(token) = object["data"].get_mut("token")
        {
            *token = json!("<token>");
        }
        names.apply(&mut object);
        sort_addresses(&mut object);
        let ns = object["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        compared.insert(format!("{kind} {ns}/{name}"), object);
    }
    let events = events.iter().map(|event| names.event_line(event)).collect();
    Snapshot { label: label.to_string(), objects: compared, events, settled: true }
}

/// Endpoints and EndpointSlices list addresses in the order of their IPs, which follow the
/// nodes' pod CIDRs (the simulated kubelets number pods within them): compared as sets.
fn sort_addresses(object: &mut Value) {
    let sort = |list: &mut Value| {
        if let Some(items) = list.as_array_mut() {
            items.sort_by_key(|item| item.to_string());
        }
    };
    if let Some(subsets) = object["subsets"].as_array_mut() {
        for subset in subsets {
            sort(&mut subset["addresses"]);
            sort(&mut subset["notReadyAddresses"]);
        }
    }
    if object["kind"] == "EndpointSlice" {
        sort(&mut object["endpoints"]);
    }
}

/// Drops what says nothing about behaviour: uid, resourceVersion, creation time, managed fields.
fn strip(mut object: Value) -> Value {
    if let Some(metadata) = object["metadata"].as_object_mut() {
        for field in ["resourceVersion", "creationTimestamp", "managedFields", "selfLink"] {
            metadata.remove(field);
        }
    }
    if let Some(object) = object.as_object_mut() {
        object.remove("apiVersion");
    }
    // A volume's phase change time, and the claim version its binding saw.
    object["status"].as_object_mut().map(|s| s.remove("lastPhaseTransitionTime"));
    object["spec"]["claimRef"].as_object_mut().map(|r| r.remove("resourceVersion"));
    // A CronJob's active Jobs are referenced with their resourceVersion, as its own.
    if let Some(active) = object.get_mut("status").and_then(|s| s.get_mut("active")).and_then(Value::as_array_mut) {
        for reference in active {
            reference.as_object_mut().map(|r| r.remove("resourceVersion"));
        }
    }
    // The simulated kubelets' random machine identities.
    if let Some(info) = object["status"]["nodeInfo"].as_object_mut() {
        for field in ["machineID", "systemUUID", "bootID"] {
            if info.contains_key(field) {
                info.insert(field.into(), json!("<id>"));
            }
        }
    }
    object
}

/// What normalising replaces.
struct Renames {
    /// Whole strings replaced (uids, IPs, the CA).
    exact: HashMap<String, String>,
    /// Names replaced wherever they occur, longest first.
    names: Vec<(String, String)>,
    /// Prefixes followed by a random 5-character suffix: unknown such names become `prefix*`.
    prefixes: BTreeSet<String>,
}

impl Renames {
    fn new(ca_pem: &str) -> Renames {
        use base64::Engine;
        let mut exact = HashMap::new();
        exact.insert(ca_pem.to_string(), "<cluster CA>".to_string());
        exact.insert(base64::engine::general_purpose::STANDARD.encode(ca_pem), "<cluster CA, base64>".to_string());
        // The service-account token volume kube-apiserver's admission adds to every pod.
        let prefixes = BTreeSet::from(["kube-api-access-".to_string()]);
        Renames { exact, names: Vec::new(), prefixes }
    }

    fn learn(&mut self, objects: &[Value], events: &[Value]) {
        for object in objects {
            let metadata = &object["metadata"];
            if let Some(prefix) = metadata["generateName"].as_str().filter(|p| !p.is_empty()) {
                self.prefixes.insert(prefix.to_string());
            }
            let kind = object["kind"].as_str().unwrap_or_default();
            if matches!(kind, "ReplicaSet" | "ReplicationController" | "Service" | "Deployment") {
                self.prefixes.insert(format!("{}-", metadata["name"].as_str().unwrap_or_default()));
            }
        }
        for event in events {
            if let Some(name) = event["involvedObject"]["name"].as_str() {
                self.prefixes.insert(format!("{name}-"));
            }
        }
        // Generated names: numbered within each (kind, namespace, generateName) in the order of
        // the objects' content with every generated name masked.
        let mut groups: BTreeMap<(String, String, String), Vec<(String, String)>> = BTreeMap::new();
        for object in objects {
            let metadata = &object["metadata"];
            let name = metadata["name"].as_str().unwrap_or_default();
            let Some(prefix) = metadata["generateName"].as_str().filter(|p| !p.is_empty() && name.starts_with(p))
            else {
                continue;
            };
            let mut shape = strip(object.clone());
            shape["metadata"].as_object_mut().map(|m| m.remove("name"));
            shape["metadata"].as_object_mut().map(|m| m.remove("uid"));
            self.mask(&mut shape);
            let key = (
                object["kind"].as_str().unwrap_or_default().to_string(),
                metadata["namespace"].as_str().unwrap_or_default().to_string(),
                prefix.to_string(),
            );
            groups.entry(key).or_default().push((shape.to_string(), name.to_string()));
        }
        for ((_, _, prefix), mut members) in groups {
            members.sort();
            for (i, (_, name)) in members.into_iter().enumerate() {
                self.names.push((name, format!("{prefix}#{}", i + 1)));
            }
        }
        self.learn_scheduled_names(objects, events);
        self.names.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
        for object in objects.iter().filter(|o| o["kind"] == "PersistentVolumeClaim") {
            // The simulated provisioner's volume, named after the claim's uid.
            let name = self.rename(object["metadata"]["name"].as_str().unwrap_or_default());
            if let Some(uid) = object["metadata"]["uid"].as_str() {
                self.exact.insert(format!("pvc-{uid}"), format!("volume({name})"));
            }
        }
        for object in objects {
            let kind = object["kind"].as_str().unwrap_or_default();
            let raw = object["metadata"]["name"].as_str().unwrap_or_default();
            let name = self.exact.get(raw).cloned().unwrap_or_else(|| self.rename(raw));
            if let Some(uid) = object["metadata"]["uid"].as_str() {
                self.exact.insert(uid.to_string(), format!("uid({kind}/{name})"));
            }
            if kind == "Service" {
                // kube-apiserver allocates cluster IPs at random.
                let ips = object["spec"]["clusterIPs"].as_array().into_iter().flatten();
                for ip in ips.chain(std::iter::once(&object["spec"]["clusterIP"])).filter_map(Value::as_str) {
                    self.exact.insert(ip.to_string(), format!("clusterIP({name})"));
                }
            }
            if kind == "Pod" {
                let status = &object["status"];
                let ips = status["podIPs"].as_array().into_iter().flatten().map(|ip| &ip["ip"]);
                for ip in ips.chain(std::iter::once(&status["podIP"])).filter_map(Value::as_str) {
                    self.exact.insert(ip.to_string(), format!("ip({name})"));
                }
            }
        }
    }

    /// A CronJob's Jobs are named `<cronjob>-<scheduled minute since the epoch>`, which differ
    /// between runs: renamed `<cronjob>-<minute+k>`, counted from the earliest minute named in
    /// the snapshot's Jobs and Events.
    fn learn_scheduled_names(&mut self, objects: &[Value], events: &[Value]) {
        let cron_jobs: Vec<&str> =
            objects.iter().filter(|o| o["kind"] == "CronJob").filter_map(|o| o["metadata"]["name"].as_str()).collect();
        let job_names = objects.iter().filter(|o| o["kind"] == "Job").filter_map(|o| o["metadata"]["name"].as_str());
        let messages = events.iter().filter_map(|e| e["message"].as_str());
        let mut found: BTreeSet<(String, u64)> = BTreeSet::new();
        for text in job_names.chain(messages) {
            for cron_job in &cron_jobs {
                let prefix = format!("{cron_job}-");
                for (at, _) in text.match_indices(prefix.as_str()) {
                    let preceded =
                        text[..at].chars().next_back().is_some_and(|c| c.is_ascii_alphanumeric() || c == '-');
                    let digits: String = text[at + prefix.len()..].chars().take_while(char::is_ascii_digit).collect();
                    if !preceded
                        && digits.len() >= 7
                        && let Ok(minute) = digits.parse()
                    {
                        found.insert((format!("{prefix}{digits}"), minute));
                    }
                }
            }
        }
        let Some(first) = found.iter().map(|(_, minute)| *minute).min() else { return };
        for (name, minute) in found {
            let cron_job = name.rsplit_once('-').map(|(c, _)| c).unwrap_or_default();
            self.names.push((name.clone(), format!("{cron_job}-<minute+{}>", minute - first)));
        }
    }

    /// A name (or any text) with the known generated names replaced and unknown ones masked.
    fn rename(&self, text: &str) -> String {
        let mut text = text.to_string();
        for (name, placeholder) in &self.names {
            if text.contains(name.as_str()) {
                text = text.replace(name.as_str(), placeholder);
            }
        }
        self.mask_unknown(&text)
    }

    /// Masks `prefix` + 5 random characters (Kubernetes' `utilrand.String(5)` alphabet) with
    /// `prefix*`.
    fn mask_unknown(&self, text: &str) -> String {
        let mut out = text.to_string();
        for prefix in &self.prefixes {
            let mut from = 0;
            while let Some(at) = out[from..].find(prefix.as_str()) {
                let start = from + at + prefix.len();
                let rest = &out[start..];
                let suffix: String = rest.chars().take(5).collect();
                let after = rest.chars().nth(5);
                let boundary = after.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-' || c == '#'));
                if suffix.len() == 5 && suffix.chars().all(|c| crate::random::ALPHANUMS.contains(c)) && boundary {
                    out.replace_range(start..start + 5, "*");
                    from = start + 1;
                } else {
                    from = start;
                }
            }
        }
        out
    }

    /// Applies every replacement to every string (and key) of `value`.
    fn apply(&self, value: &mut Value) {
        match value {
            Value::String(s) => *s = self.text(s),
            Value::Array(items) => items.iter_mut().for_each(|item| self.apply(item)),
            Value::Object(map) => {
                let entries = std::mem::take(map);
                *map = entries
                    .into_iter()
                    .map(|(key, mut item)| {
                        self.apply(&mut item);
                        (self.rename(&key), item)
                    })
                    .collect::<Map<String, Value>>();
            }
            _ => {}
        }
    }

    /// Masks only (for an object's shape): generated names to `prefix*`, IPs, times, uids.
    fn mask(&self, value: &mut Value) {
        match value {
            Value::String(s) => {
                let masked = generic_mask(s).unwrap_or_else(|| self.mask_unknown(s));
                *s = if is_ipv4(&masked) { "<ip>".into() } else { masked };
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.mask(item)),
            Value::Object(map) => map.values_mut().for_each(|item| self.mask(item)),
            _ => {}
        }
    }

    fn text(&self, s: &str) -> String {
        if let Some(replacement) = self.exact.get(s) {
            return replacement.clone();
        }
        generic_mask(s).unwrap_or_else(|| self.rename(s))
    }

    /// One Event as a line: type, reason, involved object, message, source.
    fn event_line(&self, event: &Value) -> String {
        let involved = &event["involvedObject"];
        let field = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let source = match field(&event["source"]["component"]) {
            empty if empty.is_empty() => field(&event["reportingComponent"]),
            component => component,
        };
        let mut message = self.rename(&field(&event["message"]));
        // Longest first, so that `pvc-<uid>` is renamed before the `<uid>` inside it.
        let mut exact: Vec<(&String, &String)> = self.exact.iter().filter(|(raw, _)| raw.len() > 6).collect();
        exact.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(b.0)));
        for (raw, replacement) in exact {
            if message.contains(raw.as_str()) {
                message = message.replace(raw.as_str(), replacement);
            }
        }
        // The uid of an object no checkpoint saw (a claim deleted between two).
        let message = mask_uuids(&message);
        format!(
            "{} {} {}/{}: {} (by {source})",
            field(&event["type"]),
            field(&event["reason"]),
            field(&involved["kind"]),
            self.rename(&field(&involved["name"])),
            message
        )
    }
}

/// Placeholders for values that differ on every run whatever the controllers do.
fn generic_mask(s: &str) -> Option<String> {
    if is_timestamp(s) {
        Some("<time>".into())
    } else if is_uuid(s) {
        Some("<uid>".into())
    } else if s.contains("-----BEGIN") {
        Some("<pem>".into())
    } else if s.starts_with("eyJ") && s.matches('.').count() == 2 {
        Some("<token>".into())
    } else if let Some(("containerd", _)) = s.split_once("://") {
        // The simulated kubelet's random container IDs.
        Some("containerd://<id>".into())
    } else {
        None
    }
}

/// RFC 3339 times as the API writes them (`2025-11-26T00:33:45Z`, with optional fraction).
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 20
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && (s.ends_with('Z') || s[19..].contains(['+', '-']))
}

/// `text` with every UUID in it replaced by `<uid>`.
fn mask_uuids(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if rest.len() >= 36 && rest.is_char_boundary(36) && is_uuid(&rest[..36]) {
            out.push_str("<uid>");
            rest = &rest[36..];
        } else {
            let c = rest.chars().next().unwrap_or_default();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| if [8, 13, 18, 23].contains(&i) { c == '-' } else { c.is_ascii_hexdigit() })
}

fn is_ipv4(s: &str) -> bool {
    s.parse::<std::net::Ipv4Addr>().is_ok()
}

// ---------------------------------------------------------------------------------------------
// Comparing
// ---------------------------------------------------------------------------------------------

/// Everything that differs between two runs of one scenario.
pub fn diff_runs(upstream: &Run, ours: &Run) -> Vec<Difference> {
    let mut out = Vec::new();
    if upstream.error != ours.error {
        // The first line: the whole error (a log's tail, say) is shown once, by the outcome.
        let describe = |e: &Option<String>| {
            e.as_deref().map_or("finished".to_string(), |e| format!("failed: {}", e.lines().next().unwrap_or_default()))
        };
        out.push(Difference {
            checkpoint: "-".into(),
            subject: "run".into(),
            path: String::new(),
            upstream: describe(&upstream.error),
            ours: describe(&ours.error),
        });
    }
    // Checkpoints meet by label; a failed run's last state is labelled `final`.
    let mut labels: Vec<&str> = upstream.checkpoints.iter().map(|c| c.label.as_str()).collect();
    for label in ours.checkpoints.iter().map(|c| c.label.as_str()) {
        if !labels.contains(&label) {
            labels.push(label);
        }
    }
    for label in labels {
        let find = |run: &Run| run.checkpoints.iter().find(|c| c.label == label).cloned();
        match (find(upstream), find(ours)) {
            (Some(a), Some(b)) => diff_snapshots(&a, &b, &mut out),
            (a, b) => out.push(Difference {
                checkpoint: label.to_string(),
                subject: "checkpoint".into(),
                path: String::new(),
                upstream: if a.is_some() { "taken" } else { "not reached" }.into(),
                ours: if b.is_some() { "taken" } else { "not reached" }.into(),
            }),
        }
    }
    out
}

fn diff_snapshots(a: &Snapshot, b: &Snapshot, out: &mut Vec<Difference>) {
    let checkpoint = a.label.clone();
    let push = |out: &mut Vec<Difference>, subject: String, path: String, upstream: String, ours: String| {
        out.push(Difference { checkpoint: checkpoint.clone(), subject, path, upstream, ours });
    };
    if a.settled != b.settled {
        let settled = |s: bool| if s { "settled" } else { "still changing" }.to_string();
        push(out, "state".into(), String::new(), settled(a.settled), settled(b.settled));
    }
    let keys: BTreeSet<&String> = a.objects.keys().chain(b.objects.keys()).collect();
    for key in keys {
        match (a.objects.get(key), b.objects.get(key)) {
            (Some(x), Some(y)) => {
                let mut paths = Vec::new();
                diff_values("", x, y, &mut paths);
                for (path, upstream, ours) in paths {
                    push(out, key.clone(), path, upstream, ours);
                }
            }
            (x, _) => {
                let present = |yes: bool| if yes { "present" } else { "absent" }.to_string();
                push(out, key.clone(), String::new(), present(x.is_some()), present(x.is_none()));
            }
        }
    }
    for line in a.events.symmetric_difference(&b.events) {
        let has = |s: &Snapshot| if s.events.contains(line) { "present" } else { "absent" }.to_string();
        push(out, format!("event \"{line}\""), String::new(), has(a), has(b));
    }
}

/// The paths at which two JSON values differ, with both sides' values.
fn diff_values(path: &str, a: &Value, b: &Value, out: &mut Vec<(String, String, String)>) {
    if a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                let child = format!("{path}.{key}");
                diff_values(&child, x.get(key).unwrap_or(&Value::Null), y.get(key).unwrap_or(&Value::Null), out);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff_values(&format!("{path}[{i}]"), p, q, out);
            }
        }
        _ => out.push((path.to_string(), brief(a), brief(b))),
    }
}

/// A value in one line, shortened.
fn brief(value: &Value) -> String {
    if value.is_null() {
        return "<absent>".into();
    }
    let text = value.to_string();
    if text.chars().count() > 400 { format!("{}…", text.chars().take(400).collect::<String>()) } else { text }
}

// ---------------------------------------------------------------------------------------------
// Conflicts
// ---------------------------------------------------------------------------------------------

/// Counts the 409 answers to writes in a controller manager's `-v=6` log: upstream's client-go
/// lines (`"Response" verb="PUT" url="…" status="409 Conflict"`) and ours
/// (`PUT https://… 409 Conflict in 3 milliseconds`).
pub fn count_conflicts(log: &str) -> Conflicts {
    let mut conflicts = Conflicts::default();
    for line in log.lines() {
        let Some((verb, url)) = conflict_of(line) else { continue };
        if !matches!(verb, "POST" | "PUT" | "PATCH" | "DELETE") {
            continue;
        }
        conflicts.total += 1;
        *conflicts.by_request.entry(format!("{verb} {}", resource_of(url))).or_default() += 1;
    }
    conflicts
}

/// The verb and URL of a request log line that reports a 409.
fn conflict_of(line: &str) -> Option<(&str, &str)> {
    if line.contains("\"Response\"") {
        if !line.contains("status=\"409 ") {
            return None;
        }
        let quoted = |key: &str| {
            let start = line.find(&format!("{key}=\""))? + key.len() + 2;
            line[start..].find('"').map(|end| &line[start..start + end])
        };
        return Some((quoted("verb")?, quoted("url")?));
    }
    let (_, message) = line.split_once("] ")?;
    let mut words = message.split_whitespace();
    let (verb, url, code) = (words.next()?, words.next()?, words.next()?);
    (url.starts_with("http") && code == "409").then_some((verb, url))
}

/// `resource[/subresource]` of a request URL (`replicasets/status`).
fn resource_of(url: &str) -> String {
    let path = url.split("://").nth(1).and_then(|rest| rest.find('/').map(|i| &rest[i..])).unwrap_or(url);
    let path = path.split('?').next().unwrap_or(path);
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    // /api/v1/... or /apis/group/version/...
    let rest = match segments.first() {
        Some(&"api") => &segments[segments.len().min(2)..],
        Some(&"apis") => &segments[segments.len().min(3)..],
        _ => &segments[..],
    };
    let rest = if rest.len() >= 3 && rest[0] == "namespaces" { &rest[2..] } else { rest };
    match rest {
        [] => "namespaces".into(),
        [resource] | [resource, _] => (*resource).to_string(),
        [resource, _, sub, ..] => format!("{resource}/{sub}"),
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "=== {} ===", self.scenario)?;
        for run in [&self.upstream, &self.ours] {
            let status = run.error.as_deref().map_or("finished".to_string(), |e| format!("FAILED: {e}"));
            writeln!(
                f,
                "{:>8}: {status} in {:.1}s; 409 answers to writes: {}; log {}",
                run.side.name(),
                run.elapsed.as_secs_f64(),
                run.conflicts,
                run.log.display()
            )?;
        }
        if self.differences.is_empty() {
            return writeln!(f, "no differences");
        }
        for difference in &self.differences {
            match difference.known(self.scenario) {
                Some(known) => writeln!(f, "  known: {difference}\n         ({})", known.reason)?,
                None => writeln!(f, "  DIFF:  {difference}")?,
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------------

/// Every scenario, in the order `side-by-side` runs them.
pub static SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "replicaset-scale",
        summary: "a ReplicaSet of 3 scaled to 5, then to 1",
        nodes: 3,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: replicaset_scale,
    },
    Scenario {
        name: "deployment-create",
        summary: "a Deployment of 3 rolled out",
        nodes: 3,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: deployment_create,
    },
    Scenario {
        name: "deployment-scale",
        summary: "a Deployment of 2 scaled to 5, then to 1",
        nodes: 3,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: deployment_scale,
    },
    Scenario {
        name: "deployment-rollout",
        summary: "a Deployment's image changed: a rolling update",
        nodes: 3,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: deployment_rollout,
    },
    Scenario {
        name: "deployment-rollback",
        summary: "a rolling update, then the template set back (rollout undo)",
        nodes: 3,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: deployment_rollback,
    },
    Scenario {
        name: "gc-background",
        summary: "a Deployment deleted in the background: its ReplicaSet and pods collected",
        nodes: 3,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: gc_background,
    },
    Scenario {
        name: "gc-foreground",
        summary: "a Deployment deleted in the foreground: dependents first",
        nodes: 3,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: gc_foreground,
    },
    Scenario {
        name: "gc-orphan",
        summary: "a ReplicaSet deleted with its pods orphaned",
        nodes: 3,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: gc_orphan,
    },
    Scenario {
        name: "namespace-deletion",
        summary: "a namespace with content deleted; a finalizer holds it, then lets go",
        nodes: 3,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: namespace_deletion,
    },
    Scenario {
        name: "service-endpoints",
        summary: "a Service's Endpoints and EndpointSlices follow its pods",
        nodes: 3,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: service_endpoints,
    },
    Scenario {
        name: "node-failure",
        summary: "a node stops reporting: tainted, its pods marked not ready and evicted, replaced",
        nodes: 3,
        flags: &["--node-monitor-period=1s", "--node-monitor-grace-period=6s"],
        apiserver_flags: &[],
        compare_nodes: true,
        run: node_failure,
    },
    Scenario {
        name: "resourcequota",
        summary: "a ResourceQuota's usage, and a ReplicaSet refused pods beyond it",
        nodes: 3,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: resource_quota,
    },
    Scenario {
        name: "resourcequota-custom",
        summary: "a quota counting a custom resource defined after the controller manager started",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: resource_quota_of_a_custom_resource,
    },
    Scenario {
        name: "serviceaccounts-rootca",
        summary: "a new namespace gets its default ServiceAccount and kube-root-ca.crt, restored when changed",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: service_accounts_root_ca,
    },
    Scenario {
        name: "certificates",
        summary: "a kubelet client CSR auto-approved and signed, a serving CSR approved by the admin and signed, \
                  one asking for 15 minutes, and a refused client CSR",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: certificates,
    },
    Scenario {
        name: "node-ipam",
        summary: "nodes get pod CIDRs from 10.244.0.0/16, a node added later too",
        nodes: 3,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: true,
        run: node_ipam,
    },
    Scenario {
        name: "job-ttl",
        summary: "two Jobs run to completion: the one with a TTL (an hour, then shortened to seconds) deleted \
                  when it ran out",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: job_ttl,
    },
    Scenario {
        name: "job-completions",
        summary: "a NonIndexed Job of 4 completions, 2 at a time, and an Indexed Job of 3, run to completion",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: job_completions,
    },
    Scenario {
        name: "job-failures",
        summary: "an Indexed Job whose index 1 fails twice (backoffLimitPerIndex 1), and a Job whose evicted pod a pod failure policy ignores",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: job_failures,
    },
    Scenario {
        name: "job-suspend",
        summary: "a running Job suspended (its pods deleted), then resumed to completion",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: job_suspend,
    },
    Scenario {
        name: "cronjob",
        summary: "two CronJobs every minute, Forbid and Replace, their Jobs left running: two ticks",
        nodes: 1,
        // No job controller: the Jobs stay active.
        flags: &["--controllers=-job-controller"],
        apiserver_flags: &[],
        compare_nodes: false,
        run: cron_jobs,
    },
    Scenario {
        name: "daemonset",
        summary: "a DaemonSet on 3 nodes, one tainted; a failed pod replaced; image rolled with maxUnavailable 1, \
                  then with maxSurge 1; a node removed and one added",
        nodes: 3,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: daemon_set,
    },
    Scenario {
        name: "statefulset",
        summary: "an OrderedReady StatefulSet of 3 with a volume claim template (whenDeleted: Delete) scaled to 5 and back to 2, a partitioned rolling update, then deleted; a second (whenScaled: Delete, whenDeleted: Retain) scaled down and deleted",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: stateful_set,
    },
    Scenario {
        name: "persistentvolume",
        summary: "three claims bound to three static volumes of different sizes, a WaitForFirstConsumer claim \
                  provisioned and bound once its pod is scheduled, a claim of the default class provisioned; a \
                  Retain volume Released when its claim goes",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: persistent_volume,
    },
    Scenario {
        name: "disruption",
        summary: "a PodDisruptionBudget (minAvailable 2) over a Deployment of 3 and one over no pod; a pod evicted \
                  and replaced; the budget changed to maxUnavailable 50%, then to minAvailable 3 and an eviction refused",
        // One node: where a replacement pod lands is the scheduler's timing, not the controller's.
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: disruption,
    },
    Scenario {
        name: "hpa",
        summary: "an HPA on CPU utilisation (50%) scales a Deployment from 2 to 5 under a Service's load, held at \
                  maxReplicas, then back to minReplicas 2 once the load is gone and a 5 s scale-down window has passed",
        // One node: where a replacement pod lands is the scheduler's timing, not the controller's.
        nodes: 1,
        flags: &[
            "--horizontal-pod-autoscaler-sync-period=1s",
            "--horizontal-pod-autoscaler-cpu-initialization-period=1s",
        ],
        apiserver_flags: &[],
        compare_nodes: false,
        run: horizontal_pod_autoscaler,
    },
    Scenario {
        name: "bootstrap",
        summary: "kube-public/cluster-info signed for two bootstrap tokens (one not for signing); one expires: \
                  deleted at its expiration and its signature removed; the other deleted: its signature removed",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: bootstrap_tokens,
    },
    Scenario {
        name: "clusterrole-aggregation",
        summary: "an aggregated ClusterRole following a new labelled role, a changed one and a deleted one",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: cluster_role_aggregation,
    },
    Scenario {
        name: "servicecidr",
        summary: "a ServiceCIDR made Ready, a Service given an IP of it, the ServiceCIDR deleted and kept \
                  (Terminating) while the IP is used, then gone once the Service is",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: service_cidr,
    },
    Scenario {
        name: "expand",
        summary: "a claim of a CSI volume grown (left to its driver's external resizer), a claim of a \
                  migrated in-tree volume grown (the resizer annotation)",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: expand,
    },
    Scenario {
        name: "ephemeral",
        summary: "a pod's generic ephemeral volume given its claim, a conflicting claim reported, the \
                  claim collected with its pod",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: ephemeral,
    },
    Scenario {
        name: "protection",
        summary: "a provisioned claim used by a running pod deleted: kept by pvc-protection until the pod \
                  goes, then the claim and (reclaim policy Delete) its volume go",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: protection,
    },
    Scenario {
        name: "attachdetach",
        summary: "a pod using a CSI volume of the simulated driver (claim pre-bound): the volume attached, the pod \
                  started; the pod deleted: the volume detached once the node no longer uses it",
        nodes: 1,
        // The claim and volume are bound by the steps, as the binder would: upstream's binder
        // is left out on both sides.
        flags: &["--controllers=-persistentvolume-binder-controller"],
        apiserver_flags: &[],
        compare_nodes: true,
        run: attach_detach,
    },
    Scenario {
        name: "vap",
        summary: "two ValidatingAdmissionPolicies on Deployments type-checked, one with a type error in its \
                  expression and message expression, one without; the wrong one fixed and checked again",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: admission_policies,
    },
    Scenario {
        name: "resourceclaim",
        summary: "pods with a ResourceClaimTemplate given their generated claims (one template missing: \
                  reported); the scheduler's part played by the steps: claims allocated, pods bound, the claims \
                  reserved for them; a finished pod's claim deleted, a deleted pod's claim released and collected",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: resource_claims,
    },
    Scenario {
        name: "devicetaint",
        summary: "three running pods with allocated claims on a node's devices; a DeviceTaintRule taints gpu-0 \
                  NoExecute: the pod whose allocation does not tolerate it evicted, the one tolerating it and \
                  the one on gpu-1 kept, the rule's EvictionInProgress condition followed",
        nodes: 1,
        // DeviceTaintRules are beta in v1.36, behind a gate that is off and an API that is not served
        // by default: on for both binaries and the server.
        flags: &["--feature-gates=DRADeviceTaintRules=true"],
        apiserver_flags: &["--feature-gates=DRADeviceTaintRules=true", "--runtime-config=resource.k8s.io/v1beta2=true"],
        compare_nodes: false,
        run: device_taint,
    },
    Scenario {
        name: "vacprotection",
        summary: "VolumeAttributesClasses given their finalizer; one used by a bound claim and its volume and one \
                  by a volume deleted and kept until the claim and its volume are modified to another class and the \
                  volume is deleted",
        nodes: 1,
        // The claim and volume are bound by the steps, as the binder would (the binder's part is
        // not compared here): upstream's binder is left out on both sides.
        flags: &["--controllers=-persistentvolume-binder-controller"],
        apiserver_flags: &[],
        compare_nodes: false,
        run: vac_protection,
    },
];

const RS: &str = "/apis/apps/v1/namespaces/sbs/replicasets";
const SERVICE_CIDRS: &str = "/apis/networking.k8s.io/v1/servicecidrs";
const JOBS: &str = "/apis/batch/v1/namespaces/sbs/jobs";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/sbs/deployments";
const DAEMON_SETS: &str = "/apis/apps/v1/namespaces/sbs/daemonsets";

/// A pod template labelled `app: name`, one container of `image`.
fn template(name: &str, image: &str) -> Value {
    json!({"metadata": {"labels": {"app": name}},
           "spec": {"containers": [{"name": "app", "image": image, "ports": [{"containerPort": 8080}]}],
                    "terminationGracePeriodSeconds": 5}})
}

fn replica_set(name: &str, replicas: i32) -> Value {
    json!({"metadata": {"name": name},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                    "template": template(name, "registry.k8s.io/pause:3.10")}})
}

fn deployment(name: &str, replicas: i32, image: &str) -> Value {
    json!({"metadata": {"name": name},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                    "template": template(name, image)}})
}

fn replica_set_status(steps: &mut Steps, name: &str, replicas: i64) -> Result<(), String> {
    let path = format!("{RS}/{name}");
    steps.wait(&format!("ReplicaSet {name} status: {replicas} ready"), |s| {
        let rs = s.get(&path)?.unwrap_or_default();
        let status = &rs["status"];
        let done = status["replicas"].as_i64().unwrap_or(0) == replicas
            && status["readyReplicas"].as_i64().unwrap_or(0) == replicas
            && status["observedGeneration"] == rs["metadata"]["generation"];
        Ok(done.then_some(()))
    })
}

/// Waits until Deployment `name` completed its rollout: `replicas` updated and available, none
/// old, the current generation observed.
fn rolled_out(steps: &mut Steps, name: &str, replicas: i64) -> Result<(), String> {
    let path = format!("{DEPLOYMENTS}/{name}");
    steps.wait(&format!("Deployment {name}: {replicas} replicas rolled out"), |s| {
        let d = s.get(&path)?.unwrap_or_default();
        let status = &d["status"];
        let number = |field: &str| status[field].as_i64().unwrap_or(0);
        let done = status["observedGeneration"] == d["metadata"]["generation"]
            && number("replicas") == replicas
            && number("updatedReplicas") == replicas
            && number("availableReplicas") == replicas
            && number("unavailableReplicas") == 0
            && status["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Progressing" && c["reason"] == "NewReplicaSetAvailable");
        Ok(done.then_some(()))
    })?;
    let selector = format!("app={name}");
    steps.wait_pods_ready(NAMESPACE, &selector, replicas as usize).map(|_| ())
}

/// A Job `name` whose pods would run `pi`; no job controller runs in this comparison.
/// A Job whose pods the simulated kubelets run to completion (or as `annotations` script).
fn job(name: &str, spec: Value, annotations: Value) -> Value {
    let mut spec = spec;
    spec["template"] = json!({"metadata": {"annotations": annotations}, "spec": {"restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "true"]}]}});
    json!({"metadata": {"name": name}, "spec": spec})
}

/// Waits until Job `name` has condition `type_` True.
fn job_condition(steps: &mut Steps, name: &str, type_: &str) -> Result<(), String> {
    let path = format!("{JOBS}/{name}");
    steps.wait(&format!("Job {name} {type_}"), |s| {
        let job = s.get(&path)?.unwrap_or_default();
        Ok((condition(&job, type_) == Some("True")).then_some(()))
    })
}

/// Waits until the Events of Job `name` include one of each of `reasons`.
fn job_events(steps: &mut Steps, name: &str, reasons: &[&str]) -> Result<(), String> {
    let events = format!("/api/v1/namespaces/{NAMESPACE}/events");
    steps.wait(&format!("Events {reasons:?} of Job {name}"), |s| {
        let listed = s.list(&events)?;
        let of_job: Vec<&Value> = listed
            .iter()
            .filter(|e| e["involvedObject"]["kind"] == "Job" && e["involvedObject"]["name"] == name)
            .collect();
        Ok(reasons.iter().all(|r| of_job.iter().any(|e| e["reason"] == *r)).then_some(()))
    })
}

/// The TTL Job `expires` is created with: far longer than any run, so that it cannot run out
/// before the first checkpoint, however slow the machine.
const TTL_UNREACHED: i64 = 3600;
/// How long `expires` has left once its TTL is shortened.
const TTL_LEFT: i64 = 8;

fn job_ttl(steps: &mut Steps) -> Result<(), String> {
    // With the 8 s TTL set at creation, the first checkpoint raced the deletion: on a loaded
    // machine, waiting for both Jobs and settling (1.5 s of quiet, any change restarting it)
    // outlasted the TTL on one side and not on the other. The long TTL makes "complete, not yet
    // deleted" a state both binaries stay in; the TTL then shortened (both controllers watch Job
    // updates) still has the deletion come from the controller's timer, TTL_LEFT later.
    let expires = format!("{JOBS}/expires");
    steps.create(JOBS, job("expires", json!({"ttlSecondsAfterFinished": TTL_UNREACHED}), json!({})))?;
    steps.create(JOBS, job("kept", json!({}), json!({})))?;
    job_condition(steps, "expires", "Complete")?;
    job_condition(steps, "kept", "Complete")?;
    // The Completed Event is posted after the status write, asynchronously: waited for, so
    // that no settling window can close before it.
    job_events(steps, "expires", &["SuccessfulCreate", "Completed"])?;
    job_events(steps, "kept", &["SuccessfulCreate", "Completed"])?;
    steps.checkpoint("both complete, the TTL running")?;

    // The TTL runs from the Complete condition's transition (whole seconds, as both
    // controllers read it): the new one ends TTL_LEFT from now.
    let stored = steps.get(&expires)?.ok_or("Job expires is gone before its TTL was shortened")?;
    let complete = stored["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == "Complete");
    let finished: jiff::Timestamp = complete
        .and_then(|c| c["lastTransitionTime"].as_str())
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| format!("Job expires has no Complete time: {stored}"))?;
    let ttl = jiff::Timestamp::now().duration_since(finished).as_secs().max(0) + TTL_LEFT;
    let expiry = finished + jiff::SignedDuration::from_secs(ttl);
    steps.patch(&expires, json!({"spec": {"ttlSecondsAfterFinished": ttl}}))?;
    steps.wait("Job expires deleted when its TTL ran out", |s| {
        let deleting = s.get(&expires)?.is_none_or(|j| !j["metadata"]["deletionTimestamp"].is_null());
        // Seen after the controller's own clock (the same machine's) passed the expiry; 1 s of
        // room for a clock adjustment.
        if deleting && jiff::Timestamp::now() + jiff::SignedDuration::from_secs(1) < expiry {
            return Err(format!("Job expires deleted before its TTL ran out at {expiry}"));
        }
        Ok(deleting.then_some(()))
    })?;
    steps.wait_gone(&expires)?;
    steps.checkpoint("the Job with a TTL deleted")
}

fn job_completions(steps: &mut Steps) -> Result<(), String> {
    steps.create(JOBS, job("pi", json!({"completions": 4, "parallelism": 2}), json!({})))?;
    let indexed = json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed"});
    steps.create(JOBS, job("sharded", indexed, json!({})))?;
    job_condition(steps, "pi", "Complete")?;
    job_condition(steps, "sharded", "Complete")?;
    steps.checkpoint("both complete")
}

/// Waits until Job `name` has `count` pods running.
fn job_pods_running(steps: &mut Steps, name: &str, count: usize) -> Result<(), String> {
    let path = format!("/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=batch.kubernetes.io/job-name={name}");
    steps.wait(&format!("{count} pods of Job {name} running"), |s| {
        let pods = s.list(&path)?;
        let running = pods.iter().filter(|p| p["status"]["phase"] == "Running").count();
        Ok((running == count).then_some(()))
    })
}

fn job_failures(steps: &mut Steps) -> Result<(), String> {
    let per_index = json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed", "backoffLimitPerIndex": 1});
    let index_1_fails = json!({"kcm-sandbox.dev/exit-codes-index-1": "1", "kcm-sandbox.dev/run-seconds": "1"});
    steps.create(JOBS, job("indexes", per_index, index_1_fails))?;
    let ignore_disruptions = json!({"backoffLimit": 0, "podFailurePolicy": {"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}});
    let evicted_once = json!({"kcm-sandbox.dev/exit-codes": "evicted,0", "kcm-sandbox.dev/run-seconds": "1"});
    steps.create(JOBS, job("evicted", ignore_disruptions, evicted_once))?;
    job_condition(steps, "evicted", "Complete")?;
    job_condition(steps, "indexes", "Failed")?;
    steps.checkpoint("index 1 failed twice, the evicted pod replaced")
}

fn job_suspend(steps: &mut Steps) -> Result<(), String> {
    let long = json!({"kcm-sandbox.dev/run-seconds": "4"});
    steps.create(JOBS, job("paused", json!({"completions": 2, "parallelism": 2}), long))?;
    job_pods_running(steps, "paused", 2)?;
    steps.patch(&format!("{JOBS}/paused"), json!({"spec": {"suspend": true}}))?;
    job_condition(steps, "paused", "Suspended")?;
    job_pods_running(steps, "paused", 0)?;
    steps.checkpoint("suspended: its pods deleted")?;
    steps.patch(&format!("{JOBS}/paused"), json!({"spec": {"suspend": false}}))?;
    job_condition(steps, "paused", "Complete")?;
    steps.checkpoint("resumed and complete")
}

const CRON_JOBS: &str = "/apis/batch/v1/namespaces/sbs/cronjobs";

/// A CronJob `name` every minute with `policy`; its Jobs would run `pi`.
fn cron_job(name: &str, policy: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"schedule": "* * * * *", "concurrencyPolicy": policy,
        "jobTemplate": {"metadata": {"labels": {"app": name}},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "pi", "image": "perl:5.34"}]}}}}}})
}

/// The names of CronJob `name`'s active Jobs.
fn active_jobs(steps: &Steps, name: &str) -> Result<Vec<String>, String> {
    let cron_job = steps.get(&format!("{CRON_JOBS}/{name}"))?.unwrap_or_default();
    let active = cron_job["status"]["active"].as_array().cloned().unwrap_or_default();
    Ok(active.iter().filter_map(|r| r["name"].as_str().map(str::to_string)).collect())
}

fn cron_jobs(steps: &mut Steps) -> Result<(), String> {
    steps.create(CRON_JOBS, cron_job("forbid", "Forbid"))?;
    steps.create(CRON_JOBS, cron_job("replace", "Replace"))?;
    let first = steps.wait("the first tick: a Job each", |s| {
        let (forbid, replace) = (active_jobs(s, "forbid")?, active_jobs(s, "replace")?);
        Ok((forbid.len() == 1 && replace.len() == 1).then(|| replace[0].clone()))
    })?;
    steps.checkpoint("first tick")?;
    let events = format!("/api/v1/namespaces/{NAMESPACE}/events");
    steps.wait("the second tick: Forbid skips, Replace replaces", |s| {
        let replaced = active_jobs(s, "replace")?.first().is_some_and(|name| *name != first);
        let skipped = s.list(&events)?.iter().any(|e| e["reason"] == "JobAlreadyActive");
        Ok((replaced && skipped).then_some(()))
    })?;
    steps.checkpoint("second tick")
}

fn replicaset_scale(steps: &mut Steps) -> Result<(), String> {
    steps.create(RS, replica_set("cache", 3))?;
    steps.wait_pods_ready(NAMESPACE, "app=cache", 3)?;
    replica_set_status(steps, "cache", 3)?;
    steps.checkpoint("3 replicas")?;
    steps.patch(&format!("{RS}/cache"), json!({"spec": {"replicas": 5}}))?;
    steps.wait_pods_ready(NAMESPACE, "app=cache", 5)?;
    replica_set_status(steps, "cache", 5)?;
    steps.checkpoint("5 replicas")?;
    steps.patch(&format!("{RS}/cache"), json!({"spec": {"replicas": 1}}))?;
    steps.wait_pods_ready(NAMESPACE, "app=cache", 1)?;
    replica_set_status(steps, "cache", 1)
}

fn deployment_create(steps: &mut Steps) -> Result<(), String> {
    steps.create(DEPLOYMENTS, deployment("web", 3, "nginx:1.27"))?;
    rolled_out(steps, "web", 3)
}

fn deployment_scale(steps: &mut Steps) -> Result<(), String> {
    steps.create(DEPLOYMENTS, deployment("web", 2, "nginx:1.27"))?;
    rolled_out(steps, "web", 2)?;
    steps.patch(&format!("{DEPLOYMENTS}/web"), json!({"spec": {"replicas": 5}}))?;
    rolled_out(steps, "web", 5)?;
    steps.checkpoint("scaled to 5")?;
    steps.patch(&format!("{DEPLOYMENTS}/web"), json!({"spec": {"replicas": 1}}))?;
    rolled_out(steps, "web", 1)
}

/// Waits until HPA `name` saw `current` replicas at `utilization`% of their cpu requests.
fn hpa_status(steps: &mut Steps, name: &str, current: i64, utilization: i64) -> Result<(), String> {
    let path = format!("/apis/autoscaling/v2/namespaces/{NAMESPACE}/horizontalpodautoscalers/{name}");
    steps.wait(&format!("HPA {name}: {current} replicas at {utilization}%"), |s| {
        let hpa = s.get(&path)?.unwrap_or_default();
        let status = &hpa["status"];
        let seen = status["currentMetrics"][0]["resource"]["current"]["averageUtilization"].as_i64();
        Ok((status["currentReplicas"].as_i64() == Some(current) && seen == Some(utilization)).then_some(()))
    })
}

fn horizontal_pod_autoscaler(steps: &mut Steps) -> Result<(), String> {
    steps.serve_metrics_apis()?;
    let mut web = deployment("web", 2, "nginx:1.27");
    web["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "100m"}});
    steps.create(DEPLOYMENTS, web)?;
    // 500m spread over the Service's pods: 250% of their requests at 2 pods, 100% at 5.
    let service = json!({"metadata": {"name": "web", "annotations": {"kcm-sandbox.dev/cpu-load": "500m"}},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}});
    steps.create(&format!("/api/v1/namespaces/{NAMESPACE}/services"), service)?;
    rolled_out(steps, "web", 2)?;
    // The pods' samples count once they are past the 1 s cpu initialisation period.
    std::thread::sleep(Duration::from_secs(2));
    let hpa = json!({"metadata": {"name": "web"}, "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "minReplicas": 2, "maxReplicas": 5,
        "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}],
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 5}}}});
    steps.create(&format!("/apis/autoscaling/v2/namespaces/{NAMESPACE}/horizontalpodautoscalers"), hpa)?;
    rolled_out(steps, "web", 5)?;
    hpa_status(steps, "web", 5, 100)?;
    steps.checkpoint("scaled up to 5, held at maxReplicas")?;
    let unload = json!({"metadata": {"annotations": {"kcm-sandbox.dev/cpu-load": null}}});
    steps.patch(&format!("/api/v1/namespaces/{NAMESPACE}/services/web"), unload)?;
    rolled_out(steps, "web", 2)?;
    hpa_status(steps, "web", 2, 0)
}

fn set_image(steps: &Steps, image: &str) -> Result<(), String> {
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}});
    // A merge patch replaces the containers list: give the whole container.
    let mut container = template("web", image)["spec"]["containers"][0].clone();
    container["image"] = json!(image);
    let mut patch = patch;
    patch["spec"]["template"]["spec"]["containers"] = json!([container]);
    steps.patch(&format!("{DEPLOYMENTS}/web"), patch).map(|_| ())
}

fn deployment_rollout(steps: &mut Steps) -> Result<(), String> {
    steps.create(DEPLOYMENTS, deployment("web", 3, "nginx:1.27"))?;
    rolled_out(steps, "web", 3)?;
    steps.checkpoint("first rollout")?;
    set_image(steps, "nginx:1.28")?;
    rolled_out(steps, "web", 3)
}

fn deployment_rollback(steps: &mut Steps) -> Result<(), String> {
    steps.create(DEPLOYMENTS, deployment("web", 3, "nginx:1.27"))?;
    rolled_out(steps, "web", 3)?;
    set_image(steps, "nginx:1.28")?;
    rolled_out(steps, "web", 3)?;
    steps.checkpoint("second revision")?;
    set_image(steps, "nginx:1.27")?;
    rolled_out(steps, "web", 3)
}

/// A Deployment `web` of 2 rolled out, then deleted with `policy`; waits until the Deployment,
/// its ReplicaSets and its pods are gone.
fn delete_deployment(steps: &mut Steps, policy: &str) -> Result<(), String> {
    steps.create(DEPLOYMENTS, deployment("web", 2, "nginx:1.27"))?;
    rolled_out(steps, "web", 2)?;
    steps.delete(&format!("{DEPLOYMENTS}/web"), Some(policy))?;
    steps.wait_gone(&format!("{DEPLOYMENTS}/web"))?;
    steps.wait("the ReplicaSets and pods of web to be gone", |s| {
        let sets = s.list(&format!("{RS}?labelSelector=app=web"))?;
        let pods = s.list("/api/v1/namespaces/sbs/pods?labelSelector=app=web")?;
        Ok((sets.is_empty() && pods.is_empty()).then_some(()))
    })
}

fn gc_background(steps: &mut Steps) -> Result<(), String> {
    delete_deployment(steps, "Background")
}

fn gc_foreground(steps: &mut Steps) -> Result<(), String> {
    delete_deployment(steps, "Foreground")
}

fn gc_orphan(steps: &mut Steps) -> Result<(), String> {
    steps.create(RS, replica_set("cache", 2))?;
    steps.wait_pods_ready(NAMESPACE, "app=cache", 2)?;
    steps.delete(&format!("{RS}/cache"), Some("Orphan"))?;
    steps.wait_gone(&format!("{RS}/cache"))?;
    steps.wait("the pods of cache orphaned", |s| {
        let pods = s.live_pods(NAMESPACE, "app=cache")?;
        Ok((pods.len() == 2 && pods.iter().all(|p| p["metadata"]["ownerReferences"].is_null())).then_some(()))
    })
}

fn namespace_deletion(steps: &mut Steps) -> Result<(), String> {
    let ns = "sbs-doomed";
    steps.namespaces.push(ns.to_string());
    steps.create("/api/v1/namespaces", json!({"metadata": {"name": ns}}))?;
    let account = format!("/api/v1/namespaces/{ns}/serviceaccounts/default");
    steps.wait("the default ServiceAccount", |s| Ok(s.get(&account)?.map(|_| ())))?;
    steps.create(&format!("/api/v1/namespaces/{ns}/configmaps"), json!({"metadata": {"name": "settings"}}))?;
    steps.create(
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
    )?;
    steps.create(
        &format!("/api/v1/namespaces/{ns}/secrets"),
        json!({"metadata": {"name": "password"}, "stringData": {"password": "hunter2"}}),
    )?;
    steps.create(
        &format!("/api/v1/namespaces/{ns}/services"),
        json!({"metadata": {"name": "cache"}, "spec": {"selector": {"app": "cache"}, "ports": [{"port": 80}]}}),
    )?;
    steps.create(&format!("/apis/apps/v1/namespaces/{ns}/replicasets"), replica_set("cache", 2))?;
    steps.wait_pods_ready(ns, "app=cache", 2)?;
    steps.checkpoint("populated")?;
    steps.delete(&format!("/api/v1/namespaces/{ns}"), None)?;
    steps.wait("everything but the held ConfigMap removed", |s| {
        let pods = s.list(&format!("/api/v1/namespaces/{ns}/pods"))?;
        let maps = s.list(&format!("/api/v1/namespaces/{ns}/configmaps"))?;
        let namespace = s.get(&format!("/api/v1/namespaces/{ns}"))?.unwrap_or_default();
        let held = condition(&namespace, "NamespaceFinalizersRemaining") == Some("True");
        Ok((pods.is_empty() && maps.len() == 1 && held).then_some(()))
    })?;
    steps.checkpoint("held by a finalizer")?;
    steps.patch(&format!("/api/v1/namespaces/{ns}/configmaps/held"), json!({"metadata": {"finalizers": null}}))?;
    steps.wait_gone(&format!("/api/v1/namespaces/{ns}"))
}

fn service_endpoints(steps: &mut Steps) -> Result<(), String> {
    steps.create(
        "/api/v1/namespaces/sbs/services",
        json!({"metadata": {"name": "web"},
               "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}),
    )?;
    steps.create(RS, replica_set("web", 3))?;
    steps.wait_pods_ready(NAMESPACE, "app=web", 3)?;
    let endpoints_ready = |count: usize| {
        move |s: &Steps| -> Result<Option<()>, String> {
            let endpoints = s.get("/api/v1/namespaces/sbs/endpoints/web")?.unwrap_or_default();
            let addresses = endpoints["subsets"][0]["addresses"].as_array().map_or(0, Vec::len);
            let slices = s.list(
                "/apis/discovery.k8s.io/v1/namespaces/sbs/endpointslices?labelSelector=kubernetes.io/service-name=web",
            )?;
            let ready = slices
                .iter()
                .flat_map(|slice| slice["endpoints"].as_array().cloned().unwrap_or_default())
                .filter(|e| e["conditions"]["ready"] == true)
                .count();
            Ok((addresses == count && ready == count).then_some(()))
        }
    };
    steps.wait("3 endpoints", endpoints_ready(3))?;
    steps.checkpoint("3 endpoints")?;
    // The three pods tie on every deletion rule: the one on node-3 is made the cheapest to
    // delete, so that both binaries remove the same one.
    let pods = steps.live_pods(NAMESPACE, "app=web")?;
    let doomed = pods.iter().find(|p| p["spec"]["nodeName"] == "node-3").ok_or("no pod on node-3")?;
    let name = doomed["metadata"]["name"].as_str().unwrap_or_default();
    let cost = json!({"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "-100"}}});
    steps.patch(&format!("/api/v1/namespaces/{NAMESPACE}/pods/{name}"), cost)?;
    // Nothing shows when a controller's pod informer has seen the annotation, and the scale-down
    // must not overtake it (watches of different kinds are not ordered): give it time.
    std::thread::sleep(Duration::from_secs(2));
    steps.patch(&format!("{RS}/web"), json!({"spec": {"replicas": 2}}))?;
    steps.wait_pods_ready(NAMESPACE, "app=web", 2)?;
    steps.wait("2 endpoints", endpoints_ready(2))
}

fn node_failure(steps: &mut Steps) -> Result<(), String> {
    // Pods tolerate an unreachable or not-ready node for 2 s (DefaultTolerationSeconds would
    // give them 300 s).
    let mut rs = replica_set("web", 3);
    rs["spec"]["template"]["spec"]["tolerations"] = json!([
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2},
    ]);
    steps.create(RS, rs)?;
    let pods = steps.wait_pods_ready(NAMESPACE, "app=web", 3)?;
    let on_node_2 = pods.iter().filter(|p| p["spec"]["nodeName"] == "node-2").count();
    if on_node_2 == 0 {
        return Err("no pod was scheduled on node-2".into());
    }
    steps.checkpoint("running on 3 nodes")?;
    steps.nodes.stop_heartbeat("node-2");
    steps.wait("node-2 tainted unreachable:NoExecute", |s| {
        let node = s.get("/api/v1/nodes/node-2")?.unwrap_or_default();
        let taints = node["spec"]["taints"].as_array().cloned().unwrap_or_default();
        Ok(taints
            .iter()
            .any(|t| t["key"] == "node.kubernetes.io/unreachable" && t["effect"] == "NoExecute")
            .then_some(()))
    })?;
    steps.wait("the pods on node-2 evicted and replaced", |s| {
        let pods = s.list("/api/v1/namespaces/sbs/pods?labelSelector=app=web")?;
        let evicted = pods
            .iter()
            .filter(|p| p["spec"]["nodeName"] == "node-2")
            .all(|p| !p["metadata"]["deletionTimestamp"].is_null());
        let live = pods.iter().filter(|p| p["metadata"]["deletionTimestamp"].is_null());
        let running = live.filter(|p| p["status"]["phase"] == "Running" && condition(p, "Ready") == Some("True"));
        Ok((evicted && running.count() == 3).then_some(()))
    })
}

fn resource_quota(steps: &mut Steps) -> Result<(), String> {
    steps.create(
        "/api/v1/namespaces/sbs/resourcequotas",
        json!({"metadata": {"name": "compute"},
               "spec": {"hard": {"pods": "3", "configmaps": "4", "requests.cpu": "1", "requests.memory": "1Gi"}}}),
    )?;
    steps.wait("the quota's usage", |s| {
        let quota = s.get("/api/v1/namespaces/sbs/resourcequotas/compute")?.unwrap_or_default();
        Ok(quota["status"]["used"]["configmaps"].as_str().map(|_| ()))
    })?;
    steps.create("/api/v1/namespaces/sbs/configmaps", json!({"metadata": {"name": "settings"}}))?;
    let mut rs = replica_set("web", 2);
    rs["spec"]["template"]["spec"]["containers"][0]["resources"] =
        json!({"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "64Mi"}});
    steps.create(RS, rs)?;
    steps.wait_pods_ready(NAMESPACE, "app=web", 2)?;
    steps.wait("the quota counting 2 pods", |s| {
        let quota = s.get("/api/v1/namespaces/sbs/resourcequotas/compute")?.unwrap_or_default();
        let used = &quota["status"]["used"];
        Ok((used["pods"] == "2" && used["configmaps"] == "2" && used["requests.cpu"] == "200m").then_some(()))
    })?;
    steps.checkpoint("2 pods")?;
    steps.patch(&format!("{RS}/web"), json!({"spec": {"replicas": 5}}))?;
    steps.wait_pods_ready(NAMESPACE, "app=web", 3)?;
    steps.wait("the ReplicaSet reporting ReplicaFailure", |s| {
        let rs = s.get(&format!("{RS}/web"))?.unwrap_or_default();
        Ok((condition(&rs, "ReplicaFailure") == Some("True")).then_some(()))
    })?;
    steps.wait("the quota counting 3 pods", |s| {
        let quota = s.get("/api/v1/namespaces/sbs/resourcequotas/compute")?.unwrap_or_default();
        Ok((quota["status"]["used"]["pods"] == "3").then_some(()))
    })
}

/// A CRD appears after the controller manager started; a quota counts its objects once the
/// quota monitor's discovery (every 30 s) has found it, and admission refuses one too many.
fn resource_quota_of_a_custom_resource(steps: &mut Steps) -> Result<(), String> {
    const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    const WIDGETS: &str = "/apis/example.com/v1/namespaces/sbs/widgets";
    const QUOTA: &str = "/api/v1/namespaces/sbs/resourcequotas/widgets";
    steps.cluster_objects.push(format!("{CRDS}/widgets.example.com"));
    steps.create(CRDS, super::widgets_definition())?;
    steps.wait("the CRD established", |s| {
        let crd = s.get(&format!("{CRDS}/widgets.example.com"))?.unwrap_or_default();
        Ok((condition(&crd, "Established") == Some("True")).then_some(()))
    })?;
    steps.create(
        "/api/v1/namespaces/sbs/resourcequotas",
        json!({"metadata": {"name": "widgets"}, "spec": {"hard": {"count/widgets.example.com": "2"}}}),
    )?;
    // The quota controller learns the resource at the monitor's next discovery (30 s) but
    // recalculates a quota only when its hard limits change (or every 5 m): change them until
    // its status counts widgets, as upstream's e2e spec does. Until then admission refuses
    // every widget.
    let polls = std::cell::Cell::new(0u32);
    let hard = |limit: u32| json!({"spec": {"hard": {"count/widgets.example.com": limit.to_string()}}});
    steps.wait("the quota's status counting widgets", |s| {
        let quota = s.get(QUOTA)?.unwrap_or_default();
        if quota["status"]["used"]["count/widgets.example.com"].is_string() {
            return Ok(Some(()));
        }
        polls.set(polls.get() + 1);
        if polls.get().is_multiple_of(10) {
            s.patch(QUOTA, hard(2 + polls.get() / 10 % 2))?;
        }
        Ok(None)
    })?;
    steps.patch(QUOTA, hard(2))?;
    steps.wait("the quota's status at 2 widgets", |s| {
        let quota = s.get(QUOTA)?.unwrap_or_default();
        Ok((quota["status"]["hard"]["count/widgets.example.com"] == "2").then_some(()))
    })?;
    let widget = |name: &str| json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}});
    steps.create(WIDGETS, widget("a"))?;
    steps.create(WIDGETS, widget("b"))?;
    steps.wait("the quota counting 2 widgets", |s| {
        let quota = s.get(QUOTA)?.unwrap_or_default();
        Ok((quota["status"]["used"]["count/widgets.example.com"] == "2").then_some(()))
    })?;
    steps.checkpoint("2 widgets")?;
    match steps.create(WIDGETS, widget("c")) {
        Err(e) if e.contains("exceeded quota") => {}
        other => return Err(format!("a third widget beyond the quota of 2: {other:?}")),
    }
    steps.delete(&format!("{WIDGETS}/a"), None)?;
    steps.wait("the quota counting 1 widget", |s| {
        let quota = s.get(QUOTA)?.unwrap_or_default();
        Ok((quota["status"]["used"]["count/widgets.example.com"] == "1").then_some(()))
    })
}

fn service_accounts_root_ca(steps: &mut Steps) -> Result<(), String> {
    let ns = "sbs-fresh";
    steps.namespaces.push(ns.to_string());
    steps.create("/api/v1/namespaces", json!({"metadata": {"name": ns}}))?;
    let account = format!("/api/v1/namespaces/{ns}/serviceaccounts/default");
    let root_ca = format!("/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt");
    steps.wait("the default ServiceAccount and kube-root-ca.crt", |s| {
        Ok((s.get(&account)?.is_some() && s.get(&root_ca)?.is_some()).then_some(()))
    })?;
    steps.checkpoint("new namespace")?;
    steps.patch(&root_ca, json!({"data": {"ca.crt": "tampered"}}))?;
    steps.delete(&account, None)?;
    steps.wait("kube-root-ca.crt restored and default recreated", |s| {
        let map = s.get(&root_ca)?.unwrap_or_default();
        let restored = map["data"]["ca.crt"].as_str().is_some_and(|ca| ca.contains("BEGIN CERTIFICATE"));
        Ok((restored && s.get(&account)?.is_some()).then_some(()))
    })
}

/// A bootstrap-token Secret (kube-system); `expiration` an RFC 3339 time or none.
fn bootstrap_token(id: &str, signing: bool, expiration: Option<String>) -> Value {
    let mut data = json!({"token-id": id, "token-secret": "0123456789abcdef",
        "usage-bootstrap-signing": if signing { "true" } else { "false" }});
    if let Some(at) = expiration {
        data["expiration"] = json!(at);
    }
    json!({"metadata": {"name": format!("bootstrap-token-{id}")}, "type": "bootstrap.kubernetes.io/token", "stringData": data})
}

/// The token IDs cluster-info is signed for.
fn signed_for(steps: &Steps) -> Result<Vec<String>, String> {
    let info = steps.get("/api/v1/namespaces/kube-public/configmaps/cluster-info")?.unwrap_or_default();
    let data = info["data"].as_object().cloned().unwrap_or_default();
    Ok(data.keys().filter_map(|k| k.strip_prefix("jws-kubeconfig-")).map(str::to_string).collect())
}

fn bootstrap_tokens(steps: &mut Steps) -> Result<(), String> {
    // kubeadm's cluster-info, with a kubeconfig that is the same on both control planes so that
    // the signatures compare.
    let kubeconfig = "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: Q0E=\n    server: https://control-plane.example:6443\n  name: \"\"\ncontexts: null\ncurrent-context: \"\"\nkind: Config\npreferences: {}\nusers: null\n";
    let config_maps = "/api/v1/namespaces/kube-public/configmaps";
    steps.create(config_maps, json!({"metadata": {"name": "cluster-info"}, "data": {"kubeconfig": kubeconfig}}))?;
    steps.namespaces.push("kube-public".into());
    let secrets = "/api/v1/namespaces/kube-system/secrets";
    let expiration = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(10);
    let expiration = expiration.round(jiff::Unit::Second).map_err(|e| e.to_string())?.to_string();
    steps.create(secrets, bootstrap_token("abcdef", true, None))?;
    steps.create(secrets, bootstrap_token("expire", true, Some(expiration)))?;
    steps.create(secrets, bootstrap_token("nosign", false, None))?;
    steps.wait("cluster-info signed for both signing tokens", |s| {
        Ok((signed_for(s)? == ["abcdef", "expire"]).then_some(()))
    })?;
    steps.checkpoint("signed")?;
    steps.wait_gone(&format!("{secrets}/bootstrap-token-expire"))?;
    steps.wait("the expired token's signature removed", |s| Ok((signed_for(s)? == ["abcdef"]).then_some(())))?;
    steps.checkpoint("expired and cleaned")?;
    steps.delete(&format!("{secrets}/bootstrap-token-abcdef"), None)?;
    steps.wait("the deleted token's signature removed", |s| Ok(signed_for(s)?.is_empty().then_some(())))
}

fn cluster_role_aggregation(steps: &mut Steps) -> Result<(), String> {
    const ROLES: &str = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    let label = "example.com/aggregate-to-sbs";
    let rule = |verb: &str, resource: &str| json!({"apiGroups": [""], "resources": [resource], "verbs": [verb]});
    let source =
        |name: &str, rules: Value| json!({"metadata": {"name": name, "labels": {label: "true"}}, "rules": rules});
    steps.cluster_objects = ["sbs-aggregated", "sbs-pods", "sbs-a-secrets"].map(|n| format!("{ROLES}/{n}")).to_vec();
    steps.create(
        ROLES,
        json!({"metadata": {"name": "sbs-aggregated"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]}}),
    )?;
    steps.create(ROLES, source("sbs-pods", json!([rule("get", "pods")])))?;
    let rules_are = |wanted: Value| {
        move |s: &Steps| -> Result<Option<()>, String> {
            let role = s.get(&format!("{ROLES}/sbs-aggregated"))?.unwrap_or_default();
            Ok((role["rules"] == wanted).then_some(()))
        }
    };
    steps.wait("the first source aggregated", rules_are(json!([rule("get", "pods")])))?;
    steps.checkpoint("one source")?;
    steps.create(ROLES, source("sbs-a-secrets", json!([rule("list", "secrets"), rule("get", "pods")])))?;
    steps.wait("the new source first", rules_are(json!([rule("list", "secrets"), rule("get", "pods")])))?;
    steps.checkpoint("a new source")?;
    steps.patch(&format!("{ROLES}/sbs-pods"), json!({"rules": [rule("watch", "pods")]}))?;
    let changed = json!([rule("list", "secrets"), rule("get", "pods"), rule("watch", "pods")]);
    steps.wait("the changed source aggregated", rules_are(changed))?;
    steps.checkpoint("a changed source")?;
    steps.delete(&format!("{ROLES}/sbs-a-secrets"), None)?;
    steps.wait("the deleted source's rules gone", rules_are(json!([rule("watch", "pods")])))
}

/// A PEM PKCS#10 request for `cn` in `orgs` with DNS `sans`, base64 for `spec.request`.
fn csr_request(cn: &str, orgs: &[&str], sans: &[&str]) -> Result<String, String> {
    use base64::Engine;
    let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
    let mut params = rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        .map_err(|e| e.to_string())?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(rcgen::DnType::CommonName, cn);
    for org in orgs {
        params.distinguished_name.push(rcgen::DnType::OrganizationName, *org);
    }
    let pem = params.serialize_request(&key).and_then(|r| r.pem()).map_err(|e| e.to_string())?;
    Ok(base64::engine::general_purpose::STANDARD.encode(pem))
}

fn certificates(steps: &mut Steps) -> Result<(), String> {
    let csr = |name: &str, request: String, signer: &str, usages: &[&str], expiration: Option<i32>| {
        json!({"metadata": {"name": name}, "spec": {"request": request, "signerName": signer,
            "usages": usages, "expirationSeconds": expiration}})
    };
    let node = ("system:node:sbs-node", &["system:nodes"][..]);
    let client = csr_request(node.0, node.1, &[])?;
    steps.create(
        CSRS,
        csr(
            "sbs-client",
            client,
            "kubernetes.io/kube-apiserver-client-kubelet",
            &["digital signature", "client auth"],
            None,
        ),
    )?;
    let serving = csr_request(node.0, node.1, &["sbs-node.example"])?;
    let serving_usages = ["digital signature", "key encipherment", "server auth"];
    steps.create(CSRS, csr("sbs-serving", serving, "kubernetes.io/kubelet-serving", &serving_usages, None))?;
    let short = csr_request(node.0, node.1, &["sbs-node.example"])?;
    steps.create(CSRS, csr("sbs-short", short, "kubernetes.io/kubelet-serving", &serving_usages, Some(900)))?;
    let refused = csr_request("someone", &[], &[])?;
    steps.create(
        CSRS,
        csr("sbs-refused", refused, "kubernetes.io/kube-apiserver-client", &["client auth", "server auth"], None),
    )?;
    for name in ["sbs-serving", "sbs-short", "sbs-refused"] {
        let path = format!("{CSRS}/{name}");
        let mut object = steps.get(&path)?.ok_or_else(|| format!("{name} is gone"))?;
        object["status"]["conditions"] = json!([{"type": "Approved", "status": "True", "reason": "SideBySide", "message": "approved by the scenario"}]);
        steps.replace(&format!("{path}/approval"), object)?;
    }
    steps.wait("three CSRs signed and one failed", |s| {
        let csrs = s.list(CSRS)?;
        let signed = csrs.iter().filter(|c| c["status"]["certificate"].is_string()).count();
        let failed = csrs
            .iter()
            .filter(|c| c["status"]["conditions"].as_array().is_some_and(|l| l.iter().any(|c| c["type"] == "Failed")))
            .count();
        Ok((signed == 3 && failed == 1).then_some(()))
    })?;
    steps.checkpoint("signed")
}

fn node_ipam(steps: &mut Steps) -> Result<(), String> {
    let all_allocated = |count: usize| {
        move |s: &Steps| -> Result<Option<()>, String> {
            let nodes = s.list("/api/v1/nodes")?;
            let allocated = nodes.iter().filter(|n| n["spec"]["podCIDR"].is_string()).count();
            Ok((nodes.len() == count && allocated == count).then_some(()))
        }
    };
    steps.wait("3 nodes with pod CIDRs", all_allocated(3))?;
    steps.checkpoint("3 nodes")?;
    // A node registered by hand with a CIDR of its own, then one without.
    steps.create(
        "/api/v1/nodes",
        json!({"metadata": {"name": "static-1"}, "spec": {"podCIDR": "10.244.9.0/24", "podCIDRs": ["10.244.9.0/24"]}}),
    )?;
    steps.create("/api/v1/nodes", json!({"metadata": {"name": "static-2"}}))?;
    steps.wait("5 nodes with pod CIDRs", all_allocated(5))?;
    // The node lifecycle controller registers new nodes at its next monitor pass (every 5 s).
    steps.wait("the new nodes registered", |s| {
        let events = s.list("/api/v1/namespaces/default/events?fieldSelector=reason%3DRegisteredNode")?;
        let registered = |node: &str| events.iter().any(|e| e["involvedObject"]["name"] == node);
        Ok((registered("static-1") && registered("static-2")).then_some(()))
    })
}

/// Waits until DaemonSet `name` runs `count` updated, available pods, its generation observed.
fn daemon_set_rolled_out(steps: &mut Steps, name: &str, count: i64) -> Result<(), String> {
    let path = format!("{DAEMON_SETS}/{name}");
    steps.wait(&format!("DaemonSet {name}: {count} pods updated and available"), |s| {
        let ds = s.get(&path)?.unwrap_or_default();
        let status = &ds["status"];
        let number = |field: &str| status[field].as_i64().unwrap_or(0);
        let done = status["observedGeneration"] == ds["metadata"]["generation"]
            && number("desiredNumberScheduled") == count
            && number("currentNumberScheduled") == count
            && number("updatedNumberScheduled") == count
            && number("numberAvailable") == count
            && number("numberUnavailable") == 0;
        Ok(done.then_some(()))
    })?;
    steps.wait(&format!("DaemonSet {name}: no old pod left"), |s| {
        let pods = s.live_pods(NAMESPACE, &format!("app={name}"))?;
        let ready = pods.iter().all(|p| condition(p, "Ready") == Some("True"));
        Ok((ready && pods.len() as i64 == count).then_some(()))
    })
}

fn daemon_set(steps: &mut Steps) -> Result<(), String> {
    let tainted = steps.patch(
        "/api/v1/nodes/node-3",
        json!({"spec": {"taints": [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]}}),
    )?;
    // Seen before the DaemonSet, or a pod goes to node-3 and stays Pending (a NoSchedule taint
    // does not evict it), whichever binary runs.
    steps.wait_cached("/api/v1/nodes", &tainted)?;
    let mut spec = json!({"selector": {"matchLabels": {"app": "agent"}},
        "template": template("agent", "registry.k8s.io/pause:3.10"),
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}});
    spec["template"]["spec"]["terminationGracePeriodSeconds"] = json!(1);
    steps.create(DAEMON_SETS, json!({"metadata": {"name": "agent"}, "spec": spec}))?;
    daemon_set_rolled_out(steps, "agent", 2)?;
    steps.checkpoint("created")?;
    // A daemon pod fails: it is deleted (FailedDaemonPod) and replaced.
    let pods = steps.live_pods(NAMESPACE, "app=agent")?;
    let failed = pods.iter().find(|p| p["spec"]["nodeName"] == "node-2").ok_or("no pod on node-2")?;
    let failed = failed["metadata"]["name"].as_str().unwrap_or_default().to_string();
    steps.nodes.fail_pod(NAMESPACE, &failed)?;
    steps.wait("the failed pod replaced", |s| {
        let pods = s.live_pods(NAMESPACE, "app=agent")?;
        let replaced = pods.iter().any(|p| {
            p["spec"]["nodeName"] == "node-2"
                && p["metadata"]["name"] != failed.as_str()
                && condition(p, "Ready") == Some("True")
        });
        Ok((replaced && pods.len() == 2).then_some(()))
    })?;
    daemon_set_rolled_out(steps, "agent", 2)?;
    steps.checkpoint("failed pod replaced")?;
    let image =
        |image: &str| json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}});
    steps.patch(&format!("{DAEMON_SETS}/agent"), image("registry.k8s.io/pause:3.9"))?;
    daemon_set_rolled_out(steps, "agent", 2)?;
    steps.checkpoint("rolled with maxUnavailable")?;
    let mut surge = image("registry.k8s.io/pause:3.8");
    surge["spec"]["updateStrategy"] = json!({"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}});
    steps.patch(&format!("{DAEMON_SETS}/agent"), surge)?;
    daemon_set_rolled_out(steps, "agent", 2)?;
    steps.checkpoint("rolled with maxSurge")?;
    // node-1 leaves (its pod stays until the pod GC's 40 s quarantine ends), node-4 joins.
    steps.nodes.remove_node("node-1")?;
    steps.nodes.add_node("node-4")?;
    steps.wait("node-4 schedulable", |s| {
        let node = s.get("/api/v1/nodes/node-4")?.unwrap_or_default();
        let taints = node["spec"]["taints"].as_array().map(Vec::as_slice).unwrap_or_default();
        Ok((condition(&node, "Ready") == Some("True") && taints.is_empty()).then_some(()))
    })?;
    steps.wait("a ready pod on node-4, counted", |s| {
        let ds = s.get(&format!("{DAEMON_SETS}/agent"))?.unwrap_or_default();
        let pods = s.live_pods(NAMESPACE, "app=agent")?;
        let on_node_4 = pods.iter().any(|p| p["spec"]["nodeName"] == "node-4" && condition(p, "Ready") == Some("True"));
        Ok((on_node_4 && ds["status"]["numberAvailable"] == 2 && ds["status"]["desiredNumberScheduled"] == 2)
            .then_some(()))
    })
}

const STATEFUL_SETS: &str = "/apis/apps/v1/namespaces/sbs/statefulsets";

/// Waits until StatefulSet `name` observed its generation with `replicas` ready, current and
/// updated as given, and exactly `replicas` live pods Running and Ready.
fn stateful_set_status(steps: &mut Steps, name: &str, replicas: i64, current: i64, updated: i64) -> Result<(), String> {
    let path = format!("{STATEFUL_SETS}/{name}");
    steps.wait(&format!("StatefulSet {name}: {replicas} ready, {current} current, {updated} updated"), |s| {
        let set = s.get(&path)?.unwrap_or_default();
        let status = &set["status"];
        let number = |field: &str| status[field].as_i64().unwrap_or(0);
        let done = status["observedGeneration"] == set["metadata"]["generation"]
            && number("replicas") == replicas
            && number("readyReplicas") == replicas
            && number("availableReplicas") == replicas
            && number("currentReplicas") == current
            && number("updatedReplicas") == updated;
        Ok(done.then_some(()))
    })?;
    steps.wait_pods_ready(NAMESPACE, &format!("app={name}"), replicas as usize).map(|_| ())
}

fn stateful_set(steps: &mut Steps) -> Result<(), String> {
    let set = json!({"metadata": {"name": "web"},
        "spec": {"replicas": 3, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
            "template": template("web", "registry.k8s.io/pause:3.10"),
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}}}]}});
    steps.create(STATEFUL_SETS, set)?;
    stateful_set_status(steps, "web", 3, 3, 3)?;
    steps.checkpoint("3 replicas with bound claims")?;
    let path = format!("{STATEFUL_SETS}/web");
    steps.patch(&path, json!({"spec": {"replicas": 5}}))?;
    stateful_set_status(steps, "web", 5, 5, 5)?;
    steps.patch(&path, json!({"spec": {"replicas": 2}}))?;
    stateful_set_status(steps, "web", 2, 2, 2)?;
    steps.checkpoint("scaled to 5 and back to 2, the claims kept")?;
    let update = json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 1}},
        "template": {"metadata": {"annotations": {"version": "2"}}}}});
    steps.patch(&path, update)?;
    stateful_set_status(steps, "web", 2, 1, 1)?;
    steps.checkpoint("web-1 updated, web-0 below the partition")?;
    steps.delete(&path, None)?;
    steps.wait_gone(&path)?;
    steps.wait("the pods gone", |s| {
        Ok(s.list(&format!("/api/v1/namespaces/{NAMESPACE}/pods"))?.is_empty().then_some(()))
    })?;
    // The garbage collector deletes the claims; the pvc-protection controller lets them go once
    // their pods are gone.
    steps.wait("the claims gone", |s| {
        Ok(s.list(&format!("/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims"))?.is_empty().then_some(()))
    })?;
    steps.checkpoint("deleted: its pods and claims gone (garbage collector, pvc-protection)")?;
    stateful_set_retained(steps)
}

/// The other retention policies: `whenScaled: Delete` hands a scaled-down ordinal's claim to its
/// pod (collected with it); `whenDeleted: Retain` keeps the rest when the set goes.
fn stateful_set_retained(steps: &mut Steps) -> Result<(), String> {
    let set = json!({"metadata": {"name": "cache"},
        "spec": {"replicas": 2, "serviceName": "cache", "selector": {"matchLabels": {"app": "cache"}},
            "template": template("cache", "registry.k8s.io/pause:3.10"),
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Delete"},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}}}]}});
    steps.create(STATEFUL_SETS, set)?;
    stateful_set_status(steps, "cache", 2, 2, 2)?;
    let path = format!("{STATEFUL_SETS}/cache");
    steps.patch(&path, json!({"spec": {"replicas": 1}}))?;
    stateful_set_status(steps, "cache", 1, 1, 1)?;
    let claims = format!("/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims");
    steps.wait("the claim of cache-1 collected with its pod", |s| Ok((s.list(&claims)?.len() == 1).then_some(())))?;
    steps.delete(&path, None)?;
    steps.wait_gone(&path)?;
    steps.wait("the pods gone", |s| {
        Ok(s.list(&format!("/api/v1/namespaces/{NAMESPACE}/pods"))?.is_empty().then_some(()))
    })?;
    steps.checkpoint("whenScaled: Delete and whenDeleted: Retain: the claim of cache-0 kept")
}

const VOLUMES: &str = "/api/v1/persistentvolumes";
const CLAIMS: &str = "/api/v1/namespaces/sbs/persistentvolumeclaims";

fn claim_phase(steps: &Steps, name: &str) -> Result<Option<Value>, String> {
    let claim = steps.get(&format!("{CLAIMS}/{name}"))?.unwrap_or_default();
    Ok((claim["status"]["phase"] == "Bound").then_some(claim))
}

/// Static binding, delayed and immediate provisioning, then a Retain volume released.
fn persistent_volume(steps: &mut Steps) -> Result<(), String> {
    let class = json!({"metadata": {"name": "sbs-delayed"}, "provisioner": CSI_DRIVER,
        "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer"});
    steps.create("/apis/storage.k8s.io/v1/storageclasses", class)?;
    let sizes = [("sbs-pv-small", "1Gi"), ("sbs-pv-medium", "5Gi"), ("sbs-pv-large", "10Gi")];
    for (name, size) in sizes {
        let volume = json!({"metadata": {"name": name}, "spec": {"capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": format!("/data/{name}")}}});
        steps.create(VOLUMES, volume)?;
    }
    steps.cluster_objects = sizes.iter().map(|(name, _)| format!("{VOLUMES}/{name}")).collect();
    steps.wait("the static volumes Available", |s| {
        for (name, _) in sizes {
            let volume = s.get(&format!("{VOLUMES}/{name}"))?.unwrap_or_default();
            if volume["status"]["phase"] != "Available" {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })?;
    let claim = |name: &str, size: &str, class: Option<&str>| {
        let mut spec = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}});
        if let Some(class) = class {
            spec["storageClassName"] = json!(class);
        }
        json!({"metadata": {"name": name}, "spec": spec})
    };
    for (name, size) in [("four", "4Gi"), ("tiny", "800Mi"), ("six", "6Gi")] {
        steps.create(CLAIMS, claim(name, size, Some("")))?;
    }
    steps.create(CLAIMS, claim("auto", "3Gi", None))?;
    steps.create(CLAIMS, claim("wait", "1Gi", Some("sbs-delayed")))?;
    for name in ["four", "tiny", "six", "auto"] {
        steps.wait(&format!("claim {name} bound"), |s| claim_phase(s, name))?;
    }
    steps.wait("the WaitForFirstConsumer Event", |s| {
        let events = s.list(&format!("/api/v1/namespaces/{NAMESPACE}/events"))?;
        Ok(events.iter().any(|e| e["reason"] == "WaitForFirstConsumer").then_some(()))
    })?;
    let auto = steps.get(&format!("{CLAIMS}/auto"))?.unwrap_or_default();
    steps.cluster_objects.push(format!("{VOLUMES}/{}", auto["spec"]["volumeName"].as_str().unwrap_or_default()));
    steps.checkpoint("static claims bound to the smallest fitting volumes; auto provisioned; wait waiting")?;
    let pod = json!({"metadata": {"name": "user"}, "spec": {
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "wait"}}],
        "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}], "terminationGracePeriodSeconds": 5}});
    steps.create(&format!("/api/v1/namespaces/{NAMESPACE}/pods"), pod)?;
    let wait = steps.wait("claim wait bound", |s| claim_phase(s, "wait"))?;
    steps.cluster_objects.push(format!("{VOLUMES}/{}", wait["spec"]["volumeName"].as_str().unwrap_or_default()));
    steps.wait_pods_ready(NAMESPACE, "", 1)?;
    steps.checkpoint("wait provisioned on the pod's node and bound")?;
    steps.delete(&format!("{CLAIMS}/four"), None)?;
    steps.wait("sbs-pv-medium Released", |s| {
        let volume = s.get(&format!("{VOLUMES}/sbs-pv-medium"))?.unwrap_or_default();
        Ok((volume["status"]["phase"] == "Released").then_some(()))
    })?;
    steps.checkpoint("four deleted: its Retain volume Released")
}

const PDBS: &str = "/apis/policy/v1/namespaces/sbs/poddisruptionbudgets";

/// Waits until budget `name` observed its generation with `allowed` disruptions of `healthy`
/// healthy pods.
fn budget_status(steps: &mut Steps, name: &str, allowed: i64, healthy: i64) -> Result<(), String> {
    let path = format!("{PDBS}/{name}");
    steps.wait(&format!("PodDisruptionBudget {name}: {allowed} disruptions allowed, {healthy} healthy"), |s| {
        let pdb = s.get(&path)?.unwrap_or_default();
        let status = &pdb["status"];
        let done = status["observedGeneration"] == pdb["metadata"]["generation"]
            && status["disruptionsAllowed"].as_i64() == Some(allowed)
            && status["currentHealthy"].as_i64() == Some(healthy)
            && status["disruptedPods"].as_object().is_none_or(Map::is_empty);
        Ok(done.then_some(()))
    })
}

/// POSTs an Eviction of pod `name`.
fn evict(steps: &Steps, name: &str) -> Result<Value, String> {
    let eviction =
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NAMESPACE}});
    steps.create(&format!("/api/v1/namespaces/{NAMESPACE}/pods/{name}/eviction"), eviction)
}

/// The name of the first live pod of app `app`, by name.
fn first_pod(steps: &Steps, app: &str) -> Result<String, String> {
    let mut names: Vec<String> = steps
        .live_pods(NAMESPACE, &format!("app={app}"))?
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names.into_iter().next().ok_or_else(|| format!("no pod of {app}"))
}

fn disruption(steps: &mut Steps) -> Result<(), String> {
    steps.create(DEPLOYMENTS, deployment("web", 3, "nginx:1.27"))?;
    rolled_out(steps, "web", 3)?;
    let selector = |app: &str| json!({"matchLabels": {"app": app}});
    steps
        .create(PDBS, json!({"metadata": {"name": "web"}, "spec": {"minAvailable": 2, "selector": selector("web")}}))?;
    steps.create(
        PDBS,
        json!({"metadata": {"name": "none"}, "spec": {"maxUnavailable": 1, "selector": selector("none")}}),
    )?;
    budget_status(steps, "web", 1, 3)?;
    budget_status(steps, "none", 0, 0)?;
    steps.checkpoint("a budget over 3 pods, one over none")?;
    let pod = first_pod(steps, "web")?;
    evict(steps, &pod)?;
    steps.wait_gone(&format!("/api/v1/namespaces/{NAMESPACE}/pods/{pod}"))?;
    rolled_out(steps, "web", 3)?;
    budget_status(steps, "web", 1, 3)?;
    steps.checkpoint("a pod evicted and replaced")?;
    let path = format!("{PDBS}/web");
    steps.patch(&path, json!({"spec": {"minAvailable": null, "maxUnavailable": "50%"}}))?;
    budget_status(steps, "web", 2, 3)?;
    steps.checkpoint("maxUnavailable 50%: 2 of 3")?;
    steps.patch(&path, json!({"spec": {"maxUnavailable": null, "minAvailable": 3}}))?;
    budget_status(steps, "web", 0, 3)?;
    let pod = first_pod(steps, "web")?;
    match evict(steps, &pod) {
        Err(e) if e.contains("(429 ") => Ok(()),
        Err(e) => Err(format!("the eviction was refused otherwise: {e}")),
        Ok(_) => Err(format!("{pod} was evicted though the budget allows no disruption")),
    }
}

/// The Ready condition of a ServiceCIDR: `(status, reason)`.
fn service_cidr_ready(steps: &Steps, name: &str) -> Result<Option<(String, String)>, String> {
    let Some(cidr) = steps.get(&format!("{SERVICE_CIDRS}/{name}"))? else { return Ok(None) };
    let conditions = cidr["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let ready = conditions.iter().find(|c| c["type"] == "Ready");
    let text = |c: &Value, field: &str| c[field].as_str().unwrap_or_default().to_string();
    Ok(ready.map(|c| (text(c, "status"), text(c, "reason"))))
}

const VOLUME_ATTACHMENTS: &str = "/apis/storage.k8s.io/v1/volumeattachments";

/// The VolumeAttachment name the CSI attacher gives `handle` of the simulated driver on `node`
/// (`csi-<sha256(handle + driver + node)>`).
fn attachment_name(handle: &str, node: &str) -> String {
    let driver = crate::sandbox::nodes::csi::DRIVER;
    let digest = ring::digest::digest(&ring::digest::SHA256, format!("{handle}{driver}{node}").as_bytes());
    format!("csi-{}", digest.as_ref().iter().map(|b| format!("{b:02x}")).collect::<String>())
}

fn attach_detach(steps: &mut Steps) -> Result<(), String> {
    let driver = crate::sandbox::nodes::csi::DRIVER;
    let handle = "sbs-volume-handle";
    let attachment = format!("{VOLUME_ATTACHMENTS}/{}", attachment_name(handle, "node-1"));
    steps.cluster_objects = vec!["/api/v1/persistentvolumes/sbs-volume".to_string(), attachment.clone()];
    let claims = format!("/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims");
    let claim = steps.create(
        &claims,
        json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "storageClassName": "", "volumeName": "sbs-volume", "resources": {"requests": {"storage": "1Gi"}}}}),
    )?;
    let volume = json!({"metadata": {"name": "sbs-volume"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "capacity": {"storage": "1Gi"}, "storageClassName": "", "persistentVolumeReclaimPolicy": "Retain",
        "csi": {"driver": driver, "volumeHandle": handle, "fsType": "ext4"},
        "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": NAMESPACE, "name": "data",
            "uid": claim["metadata"]["uid"]}}});
    steps.create("/api/v1/persistentvolumes", volume)?;
    steps.patch("/api/v1/persistentvolumes/sbs-volume/status", json!({"status": {"phase": "Bound"}}))?;
    let bound = json!({"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}});
    steps.patch(&format!("{claims}/data/status"), bound)?;
    let pods = format!("/api/v1/namespaces/{NAMESPACE}/pods");
    let pod = json!({"metadata": {"name": "user"}, "spec": {"nodeName": "node-1",
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}});
    steps.create(&pods, pod)?;
    steps.wait("the pod running", |s| {
        Ok(s.get(&format!("{pods}/user"))?.filter(|p| p["status"]["phase"] == "Running").map(|_| ()))
    })?;
    steps.checkpoint("attached: the pod running")?;
    steps.delete(&format!("{pods}/user"), None)?;
    steps.wait_gone(&attachment)?;
    steps.checkpoint("detached: the pod gone")
}

/// A claim of the default class used by a running pod, deleted: kept by its
/// `kubernetes.io/pvc-protection` finalizer until the pod goes, then it and its volume go.
fn protection(steps: &mut Steps) -> Result<(), String> {
    let claims = format!("/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims");
    let pods = format!("/api/v1/namespaces/{NAMESPACE}/pods");
    let claim = json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}}}});
    steps.create(&claims, claim)?;
    let pod = json!({"metadata": {"name": "user", "labels": {"app": "user"}}, "spec": {
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}});
    steps.create(&pods, pod)?;
    steps.wait_pods_ready(NAMESPACE, "app=user", 1)?;
    let volume = steps.get(&format!("{claims}/data"))?.unwrap_or_default()["spec"]["volumeName"].clone();
    let volume = format!("/api/v1/persistentvolumes/{}", volume.as_str().unwrap_or_default());
    steps.cluster_objects.push(volume.clone());
    steps.checkpoint("the claim bound and used by a running pod")?;
    steps.delete(&format!("{claims}/data"), None)?;
    steps.wait("the claim Terminating", |s| {
        Ok(s.get(&format!("{claims}/data"))?.filter(|c| c["metadata"]["deletionTimestamp"].is_string()).map(|_| ()))
    })?;
    steps.checkpoint("the deleted claim kept while the pod uses it")?;
    steps.delete(&format!("{pods}/user"), None)?;
    steps.wait_gone(&format!("{claims}/data"))?;
    steps.wait_gone(&volume)?;
    steps.checkpoint("the pod gone: the claim and its volume gone")
}

fn service_cidr(steps: &mut Steps) -> Result<(), String> {
    // The default ServiceCIDR and the new one are compared too.
    steps.cluster_objects = ["kubernetes", "extra"].map(|n| format!("{SERVICE_CIDRS}/{n}")).to_vec();
    steps.create(SERVICE_CIDRS, json!({"metadata": {"name": "extra"}, "spec": {"cidrs": ["10.200.0.0/24"]}}))?;
    steps.wait("extra Ready", |s| Ok(service_cidr_ready(s, "extra")?.filter(|(status, _)| status == "True")))?;
    steps.checkpoint("ready")?;
    let service = json!({"metadata": {"name": "web"}, "spec": {"clusterIP": "10.200.0.10", "ports": [{"port": 80}]}});
    steps.create("/api/v1/namespaces/sbs/services", service)?;
    steps.checkpoint("used")?;
    steps.delete(&format!("{SERVICE_CIDRS}/extra"), None)?;
    steps.wait("extra Terminating", |s| {
        Ok(service_cidr_ready(s, "extra")?.filter(|(_, reason)| reason == "Terminating"))
    })?;
    steps.checkpoint("blocked")?;
    steps.delete("/api/v1/namespaces/sbs/services/web", None)?;
    steps.wait_gone(&format!("{SERVICE_CIDRS}/extra"))
}

/// The simulated CSI driver (`src/sandbox/nodes`).
const CSI_DRIVER: &str = crate::sandbox::nodes::csi::DRIVER;

/// A claim of class `expandable` bound to volume `sbs-<name>` with `source`, both 1Gi, as the
/// binder would leave them.
fn bound_claim(steps: &mut Steps, name: &str, source: Value) -> Result<(), String> {
    let volume_name = format!("sbs-{name}");
    let claim = json!({"metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteOnce"],
        "storageClassName": "expandable", "volumeName": volume_name, "resources": {"requests": {"storage": "1Gi"}}}});
    let created = steps.create(CLAIMS, claim)?;
    let mut spec = json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
        "storageClassName": "expandable", "persistentVolumeReclaimPolicy": "Delete",
        "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": NAMESPACE, "name": name,
            "uid": created["metadata"]["uid"]}});
    if let (Some(spec), Some(source)) = (spec.as_object_mut(), source.as_object()) {
        spec.extend(source.clone());
    }
    steps.create(VOLUMES, json!({"metadata": {"name": volume_name}, "spec": spec}))?;
    steps.patch(&format!("{VOLUMES}/{volume_name}/status"), json!({"status": {"phase": "Bound"}}))?;
    let status =
        json!({"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}});
    steps.patch(&format!("{CLAIMS}/{name}/status"), status)?;
    steps.cluster_objects.push(format!("{VOLUMES}/{volume_name}"));
    Ok(())
}

fn grow_claim(steps: &mut Steps, name: &str, size: &str) -> Result<(), String> {
    steps.patch(&format!("{CLAIMS}/{name}"), json!({"spec": {"resources": {"requests": {"storage": size}}}}))?;
    Ok(())
}

fn expand(steps: &mut Steps) -> Result<(), String> {
    let class = json!({"metadata": {"name": "expandable"}, "provisioner": CSI_DRIVER,
        "allowVolumeExpansion": true, "volumeBindingMode": "Immediate"});
    steps.create("/apis/storage.k8s.io/v1/storageclasses", class)?;
    steps.cluster_objects.push("/apis/storage.k8s.io/v1/storageclasses/expandable".into());
    // A CSI driver with no resizer running: the simulated one would grow the claim at a moment
    // that races the controller's Event.
    let driver = "other.csi.example.com";
    bound_claim(steps, "data", json!({"csi": {"driver": driver, "volumeHandle": "data", "fsType": "ext4"}}))?;
    bound_claim(steps, "legacy", json!({"awsElasticBlockStore": {"volumeID": "vol-1", "fsType": "ext4"}}))?;
    // The binder finishes binding (`bind-completed`) whenever it sees them, which races the
    // steps' own writes (a 409 waits for the next event or resync): wait for it on both sides.
    for name in ["data", "legacy"] {
        steps.wait(&format!("claim {name} bind-completed"), |s| {
            let claim = s.get(&format!("{CLAIMS}/{name}"))?.unwrap_or_default();
            Ok(claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"].is_string().then_some(()))
        })?;
    }
    steps.checkpoint("two bound claims of 1Gi")?;
    grow_claim(steps, "data", "2Gi")?;
    steps.wait("the ExternalExpanding Event", |s| {
        let events = s.list(&format!("/api/v1/namespaces/{NAMESPACE}/events"))?;
        Ok(events.iter().any(|e| e["reason"] == "ExternalExpanding").then_some(()))
    })?;
    steps.checkpoint("the CSI claim left to its driver's external resizer")?;
    grow_claim(steps, "legacy", "3Gi")?;
    steps.wait("the in-tree claim's resizer annotation", |s| {
        let claim = s.get(&format!("{CLAIMS}/legacy"))?.unwrap_or_default();
        Ok(claim["metadata"]["annotations"]["volume.kubernetes.io/storage-resizer"].is_string().then_some(()))
    })?;
    steps.checkpoint("the in-tree claim handed to its CSI driver's resizer")
}

/// A pod with the generic ephemeral volume `scratch` of the default class.
fn ephemeral_pod(name: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {"app": name}}, "spec": {
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        "volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
            "metadata": {"labels": {"app": name}, "annotations": {"purpose": "scratch"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}}}}}]}})
}

fn ephemeral(steps: &mut Steps) -> Result<(), String> {
    let pods = format!("/api/v1/namespaces/{NAMESPACE}/pods");
    steps.create(&pods, ephemeral_pod("web"))?;
    steps.wait_pods_ready(NAMESPACE, "app=web", 1)?;
    steps.checkpoint("the pod running with its bound claim web-scratch")?;
    let squatter = json!({"metadata": {"name": "other-scratch"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Mi"}}}});
    steps.create(CLAIMS, squatter)?;
    steps.create(&pods, ephemeral_pod("other"))?;
    steps.wait("the FailedBinding Event", |s| {
        let events = s.list(&format!("/api/v1/namespaces/{NAMESPACE}/events"))?;
        Ok(events.iter().any(|e| e["reason"] == "FailedBinding").then_some(()))
    })?;
    steps.checkpoint("a claim not owned by its pod reported")?;
    steps.delete(&format!("{pods}/web"), None)?;
    steps.wait_gone(&format!("{CLAIMS}/web-scratch"))?;
    steps.checkpoint("the pod deleted, its claim collected")
}

const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";

/// A ValidatingAdmissionPolicy on apps/v1 Deployments (create and update) with `validations`
/// (also the policy tests' fixture).
pub fn deployment_policy(name: &str, validations: Value) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                "resources": ["deployments"],
            }]},
            "validations": validations,
        },
    })
}

/// Whether the policy's status has observed its current generation.
fn policy_checked(steps: &Steps, name: &str) -> Result<Option<()>, String> {
    let Some(policy) = steps.get(&format!("{POLICIES}/{name}"))? else { return Ok(None) };
    let observed = policy["status"]["observedGeneration"].as_i64();
    Ok((observed.is_some() && observed == policy["metadata"]["generation"].as_i64()).then_some(()))
}

fn admission_policies(steps: &mut Steps) -> Result<(), String> {
    steps.cluster_objects = ["vap-good", "vap-wrong", "vap-quantity"].map(|n| format!("{POLICIES}/{n}")).to_vec();
    let good = json!({"expression": "object.spec.replicas <= 5 && object.metadata.name.startsWith('web')",
        "messageExpression": "'too many replicas: ' + string(object.spec.replicas)"});
    steps.create(POLICIES, deployment_policy("vap-good", json!([good])))?;
    let wrong = json!({"expression": "object.spec.replicasss > 1",
        "messageExpression": "'replicas: ' + object.spec.replicas"});
    steps.create(POLICIES, deployment_policy("vap-wrong", json!([wrong])))?;
    // Quantities have no CEL type: upstream reports their fields undefined.
    let quantity = json!({"expression":
        "object.spec.template.spec.containers.all(c, has(c.resources.limits) && c.image != '')"});
    steps.create(POLICIES, deployment_policy("vap-quantity", json!([quantity])))?;
    for name in ["vap-good", "vap-wrong", "vap-quantity"] {
        steps.wait(&format!("{name} checked"), |s| policy_checked(s, name))?;
    }
    steps.checkpoint("checked")?;
    let fixed = json!({"spec": {"validations": [{"expression": "object.spec.replicas > 1"}]}});
    steps.patch(&format!("{POLICIES}/vap-wrong"), fixed)?;
    steps.wait("vap-wrong checked again", |s| policy_checked(s, "vap-wrong"))
}

// DRA: the steps play kube-scheduler's part (allocate a claim, bind its pod) and the driver's
// (publish a ResourceSlice); the controllers do the rest.

const RESOURCE_CLAIMS: &str = "/apis/resource.k8s.io/v1/namespaces/sbs/resourceclaims";
const DEVICE_CLASSES: &str = "/apis/resource.k8s.io/v1/deviceclasses";
const DEVICE_TAINT_RULES: &str = "/apis/resource.k8s.io/v1beta2/devicetaintrules";
const PODS: &str = "/api/v1/namespaces/sbs/pods";
/// The simulated DRA driver, also its DeviceClass's name.
const DRA_DRIVER: &str = "gpu.example.com";
/// The finalizer kube-scheduler puts on a claim before it allocates it.
const DELETE_PROTECTION: &str = "resource.kubernetes.io/delete-protection";
/// A finalizer of the steps', holding a deleted pod.
const HOLD: &str = "sbs.example.com/hold";
/// A scheduler name nothing serves: the steps bind such pods themselves.
const MANUAL_SCHEDULER: &str = "sbs-manual";

/// The DeviceClass of the simulated driver, compared as a cluster object.
fn device_class(steps: &mut Steps) -> Result<(), String> {
    let class = json!({"metadata": {"name": DRA_DRIVER}, "spec": {"selectors": [
        {"cel": {"expression": format!("device.driver == '{DRA_DRIVER}'")}}]}});
    steps.create(DEVICE_CLASSES, class)?;
    steps.cluster_objects.push(format!("{DEVICE_CLASSES}/{DRA_DRIVER}"));
    Ok(())
}

/// A pod whose container uses the claim `gpu` from `source` (`resourceClaimTemplateName` or
/// `resourceClaimName`), with `spec` merged in.
fn dra_pod(name: &str, source: Value, spec: Value) -> Value {
    let mut claim = json!({"name": "gpu"});
    if let (Some(claim), Some(source)) = (claim.as_object_mut(), source.as_object()) {
        claim.extend(source.clone());
    }
    let mut pod = json!({"metadata": {"name": name, "labels": {"app": name}}, "spec": {
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": "gpu"}]}}],
        "resourceClaims": [claim], "terminationGracePeriodSeconds": 5}});
    if let (Some(pod_spec), Some(extra)) = (pod["spec"].as_object_mut(), spec.as_object()) {
        pod_spec.extend(extra.clone());
    }
    pod
}

/// The claim pod `pod` was given for its `gpu` entry, once its status names it.
fn generated_claim(steps: &Steps, pod: &str) -> Result<Option<String>, String> {
    let Some(pod) = steps.get(&format!("{PODS}/{pod}"))? else { return Ok(None) };
    let statuses = pod["status"]["resourceClaimStatuses"].as_array().cloned().unwrap_or_default();
    let name = statuses.iter().find(|s| s["name"] == "gpu").and_then(|s| s["resourceClaimName"].as_str());
    match name {
        Some(name) if steps.get(&format!("{RESOURCE_CLAIMS}/{name}"))?.is_some() => Ok(Some(name.to_string())),
        _ => Ok(None),
    }
}

/// What kube-scheduler writes when it allocates `device` of node-1's pool to claim `name`: its
/// finalizer first, then the allocation (with `tolerations` of the device's taints).
fn allocate(steps: &Steps, name: &str, device: &str, tolerations: Value) -> Result<(), String> {
    let path = format!("{RESOURCE_CLAIMS}/{name}");
    steps.patch(&path, json!({"metadata": {"finalizers": [DELETE_PROTECTION]}}))?;
    let mut result = json!({"request": "gpu", "driver": DRA_DRIVER, "pool": "node-1", "device": device});
    if !tolerations.is_null() {
        result["tolerations"] = tolerations;
    }
    let selector = json!({"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]});
    let allocation = json!({"devices": {"results": [result]}, "nodeSelector": selector});
    steps.patch(&format!("{path}/status"), json!({"status": {"allocation": allocation}}))?;
    Ok(())
}

/// Binds pod `name` to node-1, as kube-scheduler does.
fn bind(steps: &Steps, name: &str) -> Result<(), String> {
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}});
    steps.create(&format!("{PODS}/{name}/binding"), binding)?;
    Ok(())
}

/// Waits until claim `claim` is reserved for pod `pod`.
fn wait_reserved(steps: &mut Steps, claim: &str, pod: &str) -> Result<(), String> {
    steps.wait(&format!("claim {claim} reserved for pod {pod}"), |s| {
        let claim = s.get(&format!("{RESOURCE_CLAIMS}/{claim}"))?.unwrap_or_default();
        let reserved = claim["status"]["reservedFor"].as_array().cloned().unwrap_or_default();
        Ok(reserved.iter().any(|r| r["name"] == pod).then_some(()))
    })
}

/// Waits for an Event of `reason` in the scenario namespace.
fn wait_event(steps: &mut Steps, reason: &str) -> Result<(), String> {
    steps.wait(&format!("the {reason} Event"), |s| {
        let events = s.list(&format!("/api/v1/namespaces/{NAMESPACE}/events"))?;
        Ok(events.iter().any(|e| e["reason"] == reason).then_some(()))
    })
}

fn resource_claims(steps: &mut Steps) -> Result<(), String> {
    device_class(steps)?;
    let template = json!({"metadata": {"name": "gpu"}, "spec": {
        "metadata": {"labels": {"team": "ml"}, "annotations": {"purpose": "training"}},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRA_DRIVER}}]}}}});
    steps.create("/apis/resource.k8s.io/v1/namespaces/sbs/resourceclaimtemplates", template)?;
    let manual = json!({"schedulerName": MANUAL_SCHEDULER});
    let by_template = json!({"resourceClaimTemplateName": "gpu"});
    steps.create(PODS, dra_pod("server", by_template.clone(), manual.clone()))?;
    // Runs to completion a few seconds after it starts.
    let mut trainer =
        dra_pod("trainer", by_template, json!({"schedulerName": MANUAL_SCHEDULER, "restartPolicy": "Never"}));
    trainer["metadata"]["annotations"] = json!({"kcm-sandbox.dev/run-seconds": "3"});
    steps.create(PODS, trainer)?;
    steps.create(PODS, dra_pod("lost", json!({"resourceClaimTemplateName": "missing"}), manual))?;
    let server = steps.wait("server's claim", |s| generated_claim(s, "server"))?;
    let trainer = steps.wait("trainer's claim", |s| generated_claim(s, "trainer"))?;
    wait_event(steps, "FailedResourceClaimCreation")?;
    steps.checkpoint("claims generated from the template, the missing template reported")?;
    allocate(steps, &server, "gpu-0", Value::Null)?;
    bind(steps, "server")?;
    wait_reserved(steps, &server, "server")?;
    steps.wait_pods_ready(NAMESPACE, "app=server", 1)?;
    steps.checkpoint("server's claim allocated, its pod bound: the claim reserved for it")?;
    allocate(steps, &trainer, "gpu-1", Value::Null)?;
    bind(steps, "trainer")?;
    steps.wait("trainer Succeeded", |s| {
        Ok(s.get(&format!("{PODS}/trainer"))?.filter(|p| p["status"]["phase"] == "Succeeded").map(|_| ()))
    })?;
    steps.wait_gone(&format!("{RESOURCE_CLAIMS}/{trainer}"))?;
    steps.checkpoint("trainer finished: its claim released and deleted")?;
    steps.delete(&format!("{PODS}/server"), None)?;
    steps.wait_gone(&format!("{PODS}/server"))?;
    steps.wait_gone(&format!("{RESOURCE_CLAIMS}/{server}"))?;
    steps.checkpoint("server deleted: its claim released and collected")
}

/// Claim `name` allocated `device` (with `tolerations`) and running pod `name`, which uses it,
/// bound to node-1; waits until the claim is reserved for the pod and the pod is ready.
fn running_with_device(steps: &mut Steps, name: &str, device: &str, tolerations: Value) -> Result<(), String> {
    let claim = json!({"metadata": {"name": name}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": DRA_DRIVER}}]}}});
    steps.create(RESOURCE_CLAIMS, claim)?;
    allocate(steps, name, device, tolerations)?;
    let manual = json!({"schedulerName": MANUAL_SCHEDULER});
    steps.create(PODS, dra_pod(name, json!({"resourceClaimName": name}), manual))?;
    bind(steps, name)?;
    wait_reserved(steps, name, name)?;
    steps.wait_pods_ready(NAMESPACE, &format!("app={name}"), 1)?;
    Ok(())
}

/// The reason of DeviceTaintRule `name`'s EvictionInProgress condition.
fn eviction_progress(steps: &Steps, name: &str) -> Result<Option<String>, String> {
    let rule = steps.get(&format!("{DEVICE_TAINT_RULES}/{name}"))?.unwrap_or_default();
    let conditions = rule["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let condition = conditions.iter().find(|c| c["type"] == "EvictionInProgress");
    Ok(condition.and_then(|c| c["reason"].as_str()).map(str::to_string))
}

fn device_taint(steps: &mut Steps) -> Result<(), String> {
    device_class(steps)?;
    let slice = json!({"metadata": {"name": "node-1-gpus"}, "spec": {"driver": DRA_DRIVER, "nodeName": "node-1",
        "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}});
    steps.create("/apis/resource.k8s.io/v1/resourceslices", slice)?;
    // Held by a finalizer of the steps' once deleted, for its condition to be compared.
    running_with_device(steps, "victim", "gpu-0", Value::Null)?;
    steps.patch(&format!("{PODS}/victim"), json!({"metadata": {"finalizers": [HOLD]}}))?;
    let ignore = json!([{"key": "example.com/broken", "operator": "Exists", "effect": "NoExecute"}]);
    running_with_device(steps, "tolerant", "gpu-0", ignore)?;
    running_with_device(steps, "bystander", "gpu-1", Value::Null)?;
    steps.checkpoint("three pods running with their devices")?;
    let rule = json!({"metadata": {"name": "gpu-0-broken"}, "spec": {
        "deviceSelector": {"driver": DRA_DRIVER, "pool": "node-1", "device": "gpu-0"},
        "taint": {"key": "example.com/broken", "value": "true", "effect": "NoExecute"}}});
    steps.create(DEVICE_TAINT_RULES, rule)?;
    wait_event(steps, "DeviceTaintManagerEviction")?;
    steps.wait("victim deleted and stopped", |s| {
        let pod = s.get(&format!("{PODS}/victim"))?.unwrap_or_default();
        Ok((pod["metadata"]["deletionTimestamp"].is_string() && pod["status"]["phase"] == "Failed").then_some(()))
    })?;
    // The rule's status is written at most every 10 s, so it is compared only once it is final.
    steps.checkpoint("gpu-0 tainted: the pod not tolerating it evicted (held by a finalizer)")?;
    steps.patch(&format!("{PODS}/victim"), json!({"metadata": {"finalizers": null}}))?;
    steps.wait_gone(&format!("{PODS}/victim"))?;
    steps.cluster_objects.push(format!("{DEVICE_TAINT_RULES}/gpu-0-broken"));
    steps.wait("the rule's eviction Completed", |s| {
        Ok(eviction_progress(s, "gpu-0-broken")?.filter(|reason| reason == "Completed").map(|_| ()))
    })?;
    steps.checkpoint("the evicted pod gone, the others kept; the rule's eviction Completed")
}

const VACS: &str = "/apis/storage.k8s.io/v1/volumeattributesclasses";
const VAC_FINALIZER: &str = "kubernetes.io/vac-protection";

fn has_vac_finalizer(steps: &Steps, name: &str) -> Result<Option<()>, String> {
    let vac = steps.get(&format!("{VACS}/{name}"))?.unwrap_or_default();
    let finalizers = vac["metadata"]["finalizers"].as_array().cloned().unwrap_or_default();
    Ok(finalizers.iter().any(|f| f == VAC_FINALIZER).then_some(()))
}

fn vac_protection(steps: &mut Steps) -> Result<(), String> {
    for (name, iops) in [("gold", "5000"), ("bronze", "500"), ("silver", "2000")] {
        let vac = json!({"metadata": {"name": name}, "driverName": CSI_DRIVER, "parameters": {"iops": iops}});
        steps.create(VACS, vac)?;
        steps.cluster_objects.push(format!("{VACS}/{name}"));
    }
    // A claim of gold bound to a volume of gold, as the binder leaves them (a bound claim's class
    // may change), and a volume of silver no claim uses.
    let claim = json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "storageClassName": "", "volumeName": "sbs-data", "volumeAttributesClassName": "gold",
        "resources": {"requests": {"storage": "1Gi"}}}});
    let claim = steps.create(CLAIMS, claim)?;
    let volume = |name: &str, class: &str, claim_ref: Value| {
        json!({"metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
            "storageClassName": "", "persistentVolumeReclaimPolicy": "Retain", "volumeAttributesClassName": class,
            "csi": {"driver": CSI_DRIVER, "volumeHandle": name}, "claimRef": claim_ref}})
    };
    let claim_ref = json!({"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": NAMESPACE,
        "name": "data", "uid": claim["metadata"]["uid"]});
    steps.create(VOLUMES, volume("sbs-data", "gold", claim_ref))?;
    steps.create(VOLUMES, volume("sbs-silver", "silver", Value::Null))?;
    steps.cluster_objects.extend(["sbs-data", "sbs-silver"].map(|v| format!("{VOLUMES}/{v}")));
    steps.patch(&format!("{VOLUMES}/sbs-data/status"), json!({"status": {"phase": "Bound"}}))?;
    let bound = json!({"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
        "currentVolumeAttributesClassName": "gold"}});
    steps.patch(&format!("{CLAIMS}/data/status"), bound)?;
    for name in ["gold", "bronze", "silver"] {
        steps.wait(&format!("{name}'s finalizer"), |s| has_vac_finalizer(s, name))?;
    }
    steps.checkpoint("three classes protected, gold used by a bound claim and its volume, silver by a volume")?;
    for name in ["gold", "silver"] {
        steps.delete(&format!("{VACS}/{name}"), None)?;
    }
    steps.checkpoint("gold and silver deleted: kept while in use")?;
    steps.patch(&format!("{CLAIMS}/data"), json!({"spec": {"volumeAttributesClassName": "bronze"}}))?;
    steps.checkpoint("the claim asks for bronze: gold kept while its volume is modified")?;
    // What the external resizer writes once the volume is modified.
    steps.patch(&format!("{VOLUMES}/sbs-data"), json!({"spec": {"volumeAttributesClassName": "bronze"}}))?;
    steps.patch(&format!("{CLAIMS}/data/status"), json!({"status": {"currentVolumeAttributesClassName": "bronze"}}))?;
    steps.wait_gone(&format!("{VACS}/gold"))?;
    steps.checkpoint("the volume modified to bronze: gold gone")?;
    steps.delete(&format!("{VOLUMES}/sbs-silver"), None)?;
    steps.wait_gone(&format!("{VACS}/silver"))?;
    steps.checkpoint("the volume of silver deleted: silver gone")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_in_messages_are_masked() {
        let text = "volume \"pvc-3d21e41b-adcc-4be5-b325-d2e4d0548655\" of ü 3d21e41b";
        assert_eq!(mask_uuids(text), "volume \"pvc-<uid>\" of ü 3d21e41b");
    }

    #[test]
    fn conflicts_are_counted_from_both_log_formats() {
        let log = r#"I1126 00:33:45.776485    3330 round_trippers.go:632] "Response" verb="PUT" url="https://127.0.0.1:36002/apis/apps/v1/namespaces/sbs/replicasets/web-1/status" status="409 Conflict" milliseconds=7
I1126 00:33:45.776485    3330 round_trippers.go:632] "Response" verb="GET" url="https://127.0.0.1:36002/api/v1/pods" status="200 OK" milliseconds=7
I1126 00:33:45.776485    3330 round_trippers.go:632] "Response" verb="PUT" url="https://127.0.0.1:36002/apis/apps/v1/namespaces/sbs/deployments/web" status="200 OK" milliseconds=7
I1126 00:33:45.123456    4321 mod.rs:335] PUT https://127.0.0.1:36002/apis/apps/v1/namespaces/sbs/deployments/web 409 Conflict in 3 milliseconds
I1126 00:33:45.123456    4321 mod.rs:335] POST https://127.0.0.1:36002/api/v1/namespaces/sbs/pods 409 Conflict in 3 milliseconds
I1126 00:33:45.123456    4321 mod.rs:335] POST https://127.0.0.1:36002/api/v1/namespaces 409 Conflict in 3 milliseconds
I1126 00:33:45.123456    4321 mod.rs:335] GET https://127.0.0.1:36002/api/v1/pods 409 Conflict in 3 milliseconds"#;
        let conflicts = count_conflicts(log);
        assert_eq!(conflicts.total, 4);
        let expected: BTreeMap<String, usize> =
            [("PUT replicasets/status", 1), ("PUT deployments", 1), ("POST pods", 1), ("POST namespaces", 1)]
                .into_iter()
                .map(|(k, n)| (k.to_string(), n))
                .collect();
        assert_eq!(conflicts.by_request, expected);
    }

    fn pod(name: &str, node: &str, ip: &str, uid: &str) -> Value {
        json!({"kind": "Pod", "metadata": {"name": name, "generateName": "web-", "namespace": "sbs", "uid": uid,
                "resourceVersion": "7", "creationTimestamp": "2025-11-26T00:33:45Z",
                "ownerReferences": [{"kind": "ReplicaSet", "name": "web", "uid": "11111111-2222-3333-4444-555555555555"}]},
               "spec": {"nodeName": node}, "status": {"podIP": ip, "startTime": "2025-11-26T00:33:46.123456Z"}})
    }

    #[test]
    fn scenario_flags_can_take_controllers_out_of_the_selection() {
        let args =
            controller_manager_args(Side::Ours, Path::new("/k/admin.conf"), &["--controllers=-job-controller", "-v=4"]);
        let controllers: Vec<&str> = args.iter().filter_map(|a| a.strip_prefix("--controllers=")).collect();
        assert_eq!(controllers.len(), 1, "{args:?}");
        assert!(
            controllers[0].contains("cronjob-controller") && !controllers[0].split(',').any(|c| c == "job-controller")
        );
        assert_eq!(args.last().map(String::as_str), Some("-v=4"));
    }

    #[test]
    fn cron_job_jobs_are_named_by_minute_from_the_first() {
        let objects = vec![
            json!({"kind": "CronJob", "metadata": {"name": "replace", "namespace": "sbs"},
                   "status": {"active": [{"name": "replace-29928247", "resourceVersion": "417"}]}}),
            json!({"kind": "Job", "metadata": {"name": "replace-29928247", "namespace": "sbs",
                   "labels": {"batch.kubernetes.io/job-name": "replace-29928247"}}}),
        ];
        let events = vec![
            json!({"type": "Normal", "reason": "SuccessfulDelete", "message": "Deleted job replace-29928246",
                   "involvedObject": {"kind": "CronJob", "name": "replace"}, "source": {"component": "cronjob-controller"}}),
        ];
        let snapshot = normalise("final", objects, events, "CA");
        let job = &snapshot.objects["Job sbs/replace-<minute+1>"];
        assert_eq!(job["metadata"]["labels"]["batch.kubernetes.io/job-name"], "replace-<minute+1>");
        let active = &snapshot.objects["CronJob sbs/replace"]["status"]["active"][0];
        assert_eq!(active, &json!({"name": "replace-<minute+1>"}));
        let events: Vec<&String> = snapshot.events.iter().collect();
        assert_eq!(
            events,
            ["Normal SuccessfulDelete CronJob/replace: Deleted job replace-<minute+0> (by cronjob-controller)"]
        );
    }

    #[test]
    fn generated_names_are_numbered_by_content_and_followed_everywhere() {
        let objects = vec![
            json!({"kind": "ReplicaSet", "metadata": {"name": "web", "namespace": "sbs", "uid": "11111111-2222-3333-4444-555555555555"}}),
            pod("web-x7k2q", "node-2", "10.244.2.5", "aaaaaaaa-2222-3333-4444-555555555555"),
            pod("web-b9zzt", "node-1", "10.244.1.7", "bbbbbbbb-2222-3333-4444-555555555555"),
        ];
        let events = vec![
            json!({"type": "Normal", "reason": "SuccessfulCreate", "message": "Created pod: web-x7k2q",
                   "involvedObject": {"kind": "ReplicaSet", "name": "web"}, "source": {"component": "replicaset-controller"}}),
            json!({"type": "Normal", "reason": "SuccessfulDelete", "message": "Deleted pod: web-gn4d2",
                   "involvedObject": {"kind": "ReplicaSet", "name": "web"}, "source": {"component": "replicaset-controller"}}),
        ];
        let snapshot = normalise("final", objects, events, "CA");
        let keys: Vec<&String> = snapshot.objects.keys().collect();
        assert_eq!(keys, ["Pod sbs/web-#1", "Pod sbs/web-#2", "ReplicaSet sbs/web"]);
        let first = &snapshot.objects["Pod sbs/web-#1"];
        assert_eq!(first["spec"]["nodeName"], "node-1");
        assert_eq!(first["status"]["podIP"], "ip(web-#1)");
        assert_eq!(first["status"]["startTime"], "<time>");
        assert_eq!(first["metadata"]["uid"], "uid(Pod/web-#1)");
        assert_eq!(first["metadata"]["ownerReferences"][0]["uid"], "uid(ReplicaSet/web)");
        assert!(first["metadata"].get("resourceVersion").is_none());
        let events: Vec<&String> = snapshot.events.iter().collect();
        assert_eq!(
            events,
            [
                "Normal SuccessfulCreate ReplicaSet/web: Created pod: web-#2 (by replicaset-controller)",
                "Normal SuccessfulDelete ReplicaSet/web: Deleted pod: web-* (by replicaset-controller)",
            ]
        );
    }

    #[test]
    fn a_generated_name_is_masked_after_its_object_is_gone() {
        let claim = json!({"kind": "ResourceClaim", "metadata": {"name": "trainer-gpu-cffj8", "namespace": "sbs",
            "generateName": "trainer-gpu-", "uid": "cccccccc-2222-3333-4444-555555555555"}});
        let pod = json!({"kind": "Pod", "metadata": {"name": "trainer", "namespace": "sbs"}, "status": {
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "trainer-gpu-cffj8"}]}});
        let mut remembered = Remembered::default();
        let first = normalise_remembering("a", vec![claim, pod.clone()], vec![], "CA", &mut remembered);
        let named = |s: &Snapshot| s.objects["Pod sbs/trainer"]["status"]["resourceClaimStatuses"][0].clone();
        assert_eq!(named(&first)["resourceClaimName"], "trainer-gpu-#1");
        // The claim deleted: the pod's status still names it.
        let second = normalise_remembering("b", vec![pod.clone()], vec![], "CA", &mut remembered);
        assert_eq!(named(&second)["resourceClaimName"], "trainer-gpu-*");
        let forgetful = normalise("b", vec![pod], vec![], "CA");
        assert_eq!(named(&forgetful)["resourceClaimName"], "trainer-gpu-cffj8");
    }

    #[test]
    fn differences_name_the_path() {
        let a = json!({"status": {"replicas": 3, "conditions": [{"type": "A"}]}});
        let b = json!({"status": {"replicas": 2, "conditions": [{"type": "A"}]}, "extra": true});
        let mut out = Vec::new();
        diff_values("", &a, &b, &mut out);
        assert_eq!(
            out,
            [
                (".extra".to_string(), "<absent>".to_string(), "true".to_string()),
                (".status.replicas".to_string(), "3".to_string(), "2".to_string()),
            ]
        );
    }
}
