//! Upstream's own end-to-end suite as the judge: `e2e.test` and `ginkgo` v1.36.2 (from
//! `../shared/k8s/v1.36.2/e2e`) run their controller specs against a fresh etcd +
//! kube-apiserver v1.36.2, our simulated kubelets (with the default StorageClass and its
//! provisioner) and one kube-controller-manager: ours or upstream's. [`compare`] lines up the
//! outcomes of the two binaries spec by spec.
//!
//! The selection is [`FOCUS`] minus [`SKIPS`] (each skip says why it is out of reach of a
//! simulated cluster), or the short [`CI_SPECS`] list that CI runs. `kcm-sandbox e2e` is the
//! command (docs/testing.md, "Upstream's e2e suite").

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::ControlPlane;
use super::process::{self, OwnedProcess};
use super::sidebyside::{Side, node_options, node_usable, start_controller_manager};
use crate::apimachinery::errors::BoxError;
use crate::client::{self, Client, ClientOptions};
use crate::sandbox::nodes::SimulatedNodes;

/// A folder holding `e2e.test` and `ginkgo` (default: what `../shared/k8s/v1.36.2/e2e/unpack.sh`
/// unpacks).
pub const E2E_DIR_ENV: &str = "KCM_E2E_DIR";
/// Where the compressed suite and its `unpack.sh` are, beside the repository.
const SHARED_E2E_DIR: &str = "../shared/k8s/v1.36.2/e2e";

/// The controller specs: upstream's sig and the `Describe` texts of the controllers we run.
pub const FOCUS: &str = concat!(
    r"\[sig-apps\] (Deployment|ReplicaSet|ReplicationController|Job|CronJob|Daemon set|StatefulSet|",
    r"DisruptionController|TTLAfterFinished|ControllerRevision)",
    r"|\[sig-api-machinery\] (Garbage collector|Namespaces|ResourceQuota)",
    r"|\[sig-network\] (EndpointSlice|EndpointSliceMirroring)",
    r"|\[sig-auth\] (ServiceAccounts|Certificates API)",
    r"|\[sig-storage\] (PV Protection|PVC Protection)",
);

/// A part of the skip regex and why those specs are out of reach here.
#[derive(Debug, Clone, Copy)]
pub struct Skip {
    /// A Go regular expression matched against the spec's full text.
    pub pattern: &'static str,
    /// Why.
    pub why: &'static str,
}

/// What the full selection leaves out. Every entry fails (or cannot run) with upstream's binary
/// too on this bed, or is excluded by upstream's own conventions.
pub const SKIPS: &[Skip] = &[
    Skip { pattern: r"\[Slow\]|\[Disruptive\]|\[Flaky\]", why: "upstream's own exclusions from a default run" },
    Skip {
        pattern: r"\[Feature:[^]]*\]|\[FeatureGate:[^]]*\] \[Alpha\]|\[Alpha\]",
        why: "features and alpha gates a default cluster does not have",
    },
    Skip {
        pattern: "should provide basic identity|rolling updates and roll backs|canary updates|Deploy clustered applications",
        why: "the spec execs into containers (a simulated kubelet runs no processes)",
    },
    Skip {
        pattern: r"StatefulSet .*should adopt matching orphans|should not deadlock when a pod's predecessor fails",
        why: "the spec holds pods unready until it execs into them (`Saturate`, `ResumeNextPod`)",
    },
    Skip {
        pattern: "serve a basic image|multiple endpoint IPs specified|multiple ports specified|for Pods matching a Service",
        why: "the spec sends HTTP to the pods (simulated containers serve nothing)",
    },
    Skip {
        pattern: "mirror a custom Endpoint with multiple subsets and same IP address",
        why: "the spec curls the Service from a pod with `kubectl exec` (fails with upstream too)",
    },
    Skip { pattern: "cloud load-balancer", why: "no cloud provider" },
    Skip {
        pattern: "should mount an API token|mount projected service account token|should set ownership|OIDC discovery|InClusterConfig",
        why: "the spec reads files or runs a client inside a container",
    },
    Skip {
        pattern: "ignore failure matching on DisruptionTarget",
        why: "the first run sleeps until the spec evicts it and later runs exit at once (a program of more than one run time)",
    },
    Skip {
        pattern: "replacement policy is set to Failed",
        why: "the container traps SIGTERM and exits 143 five seconds later (a shell program the kubelet cannot tell)",
    },
    Skip {
        pattern: "pointing to API Server",
        why: "the `kubernetes` Endpoints point at loopback, which EndpointSlice specs refuse (fails with upstream too)",
    },
    Skip { pattern: "100 namespaces", why: "a timing spec longer than the time box" },
];

/// The CI subset: fast specs (under 35 s each with upstream's binary) that pass with upstream's
/// binary on this bed, across the controller families and the simulated kubelet's programs,
/// probes, image pulls and admission (exact spec texts, as `--list` prints them).
pub const CI_SPECS: &[&str] = &[
    "[sig-api-machinery] Garbage collector should delete RS created by deployment when not orphaning [Conformance]",
    "[sig-api-machinery] ResourceQuota should create a ResourceQuota and capture the life of a custom resource.",
    "[sig-apps] Daemon set [Serial] should run and stop complex daemon with node affinity",
    "[sig-apps] Deployment deployment should support proportional scaling [Conformance]",
    "[sig-apps] DisruptionController should not evict unready pods with Default UnhealthyPodEvictionPolicy",
    "[sig-apps] Job should fail when exceeds active deadline",
    "[sig-apps] Job should terminate job execution when the number of failed indexes exceeds maxFailedIndexes [Conformance]",
    "[sig-apps] ReplicaSet Replicaset should have a working scale subresource [Conformance]",
    "[sig-apps] StatefulSet Basic StatefulSet functionality [StatefulSetBasic] Should recreate evicted statefulset [Conformance]",
    "[sig-auth] ServiceAccounts should guarantee kube-root-ca.crt exist in any namespace [Conformance]",
    "[sig-network] EndpointSliceMirroring should mirror a custom Endpoints resource through create update and delete [Conformance]",
    "[sig-storage] PVC Protection Verify that scheduling of a pod that uses PVC that is being deleted fails and the pod becomes Unschedulable",
];

/// The skip regex of [`SKIPS`].
pub fn skip_regex() -> String {
    SKIPS.iter().map(|s| s.pattern).collect::<Vec<_>>().join("|")
}

/// A focus regex that selects exactly `specs` (Go regexp syntax): ginkgo matches it against the
/// spec's text followed by its labels (` [sig-apps, Conformance]`), so a name ends at a space or
/// at the end; it does not start the matched text, which has a prefix of its own.
pub fn exact_focus(specs: &[&str]) -> String {
    let quoted: Vec<String> = specs.iter().map(|s| quote_meta(s)).collect();
    format!("({})( |$)", quoted.join("|"))
}

/// Go's `regexp.QuoteMeta`.
fn quote_meta(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len());
    for c in text.chars() {
        if r"\.+*?()|[]{}^$".contains(c) {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted
}

/// Where `e2e.test` and `ginkgo` are.
#[derive(Debug, Clone)]
pub struct Suite {
    /// The e2e test binary.
    pub e2e_test: PathBuf,
    /// The Ginkgo CLI, for parallel runs.
    pub ginkgo: PathBuf,
}

/// Why the suite cannot be found, run or read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The control plane did not start (or its binaries are missing).
    #[error(transparent)]
    TestBed(#[from] super::Error),
    /// The suite's `unpack.sh` failed.
    #[error(transparent)]
    Unpack(#[from] super::AssetsError),
    /// The controller manager or ginkgo did not start.
    #[error(transparent)]
    Process(#[from] process::Error),
    /// The admin client could not be built.
    #[error(transparent)]
    Client(#[from] client::Error),
    /// The simulated nodes did not start.
    #[error("{0}")]
    Nodes(#[source] BoxError),
    /// A folder cannot be created.
    #[error("cannot create {}: {source}", .dir.display())]
    CreateDir {
        /// The folder.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `e2e.test` or `ginkgo` is not in the suite's folder.
    #[error(
        "{name} not found in {} (set {E2E_DIR_ENV} to a folder holding e2e.test and ginkgo v1.36.2, \
         or unpack {SHARED_E2E_DIR} with its unpack.sh)",
        .dir.display()
    )]
    MissingBinary {
        /// The binary's name.
        name: &'static str,
        /// The folder looked in.
        dir: PathBuf,
    },
    /// The suite is not unpacked and its `unpack.sh` is not there.
    #[error(
        "the e2e suite is not there: {} does not exist (set {E2E_DIR_ENV} to a folder holding e2e.test and ginkgo)",
        .unpack.display()
    )]
    NoUnpackScript {
        /// The missing script.
        unpack: PathBuf,
    },
    /// The suite's `unpack.sh` did not print where it unpacked.
    #[error("{} printed no folder", .unpack.display())]
    NoFolder {
        /// The script.
        unpack: PathBuf,
    },
    /// Ginkgo ended without its report.
    #[error("ginkgo ({status}) wrote no report at {}: {source}; see {log}", .path.display())]
    NoReport {
        /// How ginkgo ended.
        status: std::process::ExitStatus,
        /// Where the report should be.
        path: PathBuf,
        /// Why it cannot be read.
        #[source]
        source: std::io::Error,
        /// Ginkgo's own log.
        log: String,
    },
    /// The controller manager ended before the cluster was usable.
    #[error("kube-controller-manager exited ({status}):\n{output}")]
    ManagerExited {
        /// How it ended.
        status: std::process::ExitStatus,
        /// The last lines of its log.
        output: String,
    },
    /// The cluster did not become usable.
    #[error("the cluster was not usable after 300 s (default ServiceAccount, nodes Ready and untainted)")]
    NotUsable,
    /// The dry run could not be started.
    #[error("cannot run {}: {source}", .binary.display())]
    DryRun {
        /// `e2e.test`.
        binary: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The dry run ended without its report.
    #[error("the dry run ({status}) wrote no report: {source}\n{stderr}")]
    DryRunNoReport {
        /// How it ended.
        status: std::process::ExitStatus,
        /// Why the report cannot be read.
        #[source]
        source: std::io::Error,
        /// What it said on stderr.
        stderr: String,
    },
    /// Ginkgo's report does not parse.
    #[error("ginkgo's report is not JSON: {source}")]
    ReportNotJson {
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

impl Suite {
    /// `$KCM_E2E_DIR`, else the folder `../shared/k8s/v1.36.2/e2e/unpack.sh` unpacks into (run
    /// here; it is cheap once unpacked). The error says what is missing.
    pub fn locate() -> Result<Suite, Error> {
        let dir = match std::env::var_os(E2E_DIR_ENV) {
            Some(dir) => PathBuf::from(dir),
            None => unpack_shared_suite()?,
        };
        let binary = |name: &'static str| {
            let path = dir.join(name);
            if path.is_file() { Ok(path) } else { Err(Error::MissingBinary { name, dir: dir.clone() }) }
        };
        Ok(Suite { e2e_test: binary("e2e.test")?, ginkgo: binary("ginkgo")? })
    }
}

fn unpack_shared_suite() -> Result<PathBuf, Error> {
    let unpack = Path::new(super::assets::REPOSITORY).join(SHARED_E2E_DIR).join("unpack.sh");
    if !unpack.exists() {
        return Err(Error::NoUnpackScript { unpack });
    }
    let printed = super::assets::run_unpack(&unpack, None)?;
    let dir = printed.lines().last().unwrap_or_default().trim();
    if dir.is_empty() {
        return Err(Error::NoFolder { unpack });
    }
    Ok(PathBuf::from(dir))
}

/// Which specs to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// [`FOCUS`] minus [`SKIPS`].
    Full,
    /// [`CI_SPECS`].
    Ci,
    /// Regexes of one's own (ginkgo's `--focus` and `--skip`; an empty skip skips nothing).
    Custom {
        /// Ginkgo's `--focus`.
        focus: String,
        /// Ginkgo's `--skip`.
        skip: String,
    },
}

impl Selection {
    /// Ginkgo's `--focus` and `--skip` values.
    fn regexes(&self) -> (String, String) {
        match self {
            Selection::Full => (FOCUS.to_string(), skip_regex()),
            Selection::Ci => (exact_focus(CI_SPECS), String::new()),
            Selection::Custom { focus, skip } => (focus.clone(), skip.clone()),
        }
    }
}

/// One run of the suite.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Whose kube-controller-manager `binary` is (upstream's gets its OpenShift carry turned off).
    pub side: Side,
    /// The kube-controller-manager under test.
    pub binary: PathBuf,
    /// The specs.
    pub selection: Selection,
    /// Ginkgo's parallel processes.
    pub procs: usize,
    /// Simulated nodes.
    pub nodes: usize,
    /// Ginkgo's suite timeout.
    pub timeout: Duration,
    /// Where the report, ginkgo's output and the controller manager's log go.
    pub out: PathBuf,
}

/// How one spec ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The spec passed.
    Passed,
    /// Failed, timed out, panicked or was interrupted: ginkgo's state and its message.
    Failed {
        /// `failed`, `timedout`, `panicked`, `interrupted` or `aborted`.
        state: String,
        /// What ginkgo reported.
        message: String,
    },
    /// Skipped at run time by the spec itself (e.g. no default StorageClass): the reason.
    Skipped(String),
}

impl Outcome {
    /// `passed`, `failed` (or ginkgo's other failure state), `skipped`.
    pub fn label(&self) -> &str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed { state, .. } => state,
            Outcome::Skipped(_) => "skipped",
        }
    }
}

/// What one binary did with the selection.
#[derive(Debug, Clone)]
pub struct Report {
    /// Whose controller manager ran.
    pub side: Side,
    /// Each selected spec's outcome, by full text.
    pub specs: BTreeMap<String, Outcome>,
    /// The suite's own setup or teardown failed (a `BeforeSuite`, say): its message.
    pub suite_failure: Option<String>,
    /// How long ginkgo ran.
    pub wall: Duration,
    /// The controller manager ended during the run.
    pub manager_exited: Option<String>,
    /// Ginkgo's output and the report.
    pub out: PathBuf,
}

impl Report {
    /// (passed, failed, skipped).
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut counts = (0, 0, 0);
        for outcome in self.specs.values() {
            match outcome {
                Outcome::Passed => counts.0 += 1,
                Outcome::Failed { .. } => counts.1 += 1,
                Outcome::Skipped(_) => counts.2 += 1,
            }
        }
        counts
    }

    /// The specs that did not pass or skip.
    pub fn failed(&self) -> impl Iterator<Item = (&String, &Outcome)> {
        self.specs.iter().filter(|(_, o)| matches!(o, Outcome::Failed { .. }))
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (passed, failed, skipped) = self.counts();
        writeln!(
            f,
            "{}: {passed} passed, {failed} failed, {skipped} skipped in {} s (output in {})",
            self.side.name(),
            self.wall.as_secs(),
            self.out.display()
        )?;
        if let Some(failure) = &self.suite_failure {
            writeln!(f, "  the suite's setup or teardown failed: {}", first_line(failure))?;
        }
        if let Some(exit) = &self.manager_exited {
            writeln!(f, "  kube-controller-manager exited during the run: {exit}")?;
        }
        for (spec, outcome) in self.failed() {
            let Outcome::Failed { state, message } = outcome else { continue };
            writeln!(f, "  {state}: {spec}\n      {}", first_line(message))?;
        }
        Ok(())
    }
}

fn first_line(text: &str) -> &str {
    text.trim().lines().next().unwrap_or_default()
}

/// The simulated nodes' names.
fn node_names(count: usize) -> Vec<String> {
    (1..=count).map(|i| format!("e2e-node-{i}")).collect()
}

/// Runs the selection against a fresh control plane with `options.binary` as its controller
/// manager, and reads ginkgo's report.
pub fn run(suite: &Suite, options: &RunOptions) -> Result<Report, Error> {
    std::fs::create_dir_all(&options.out).map_err(|source| Error::CreateDir { dir: options.out.clone(), source })?;
    let plane = ControlPlane::start()?;
    let (admin_kubeconfig, manager_kubeconfig) =
        plane.write_kubeconfigs(&plane.dir().join("kubeadm").join("admin.conf"))?;
    let names = node_names(options.nodes);
    let nodes = SimulatedNodes::start(plane.admin_config(), names.clone(), node_options())
        .map_err(|e| Error::Nodes(e.into()))?;
    let log = options.out.join("kube-controller-manager.log");
    let mut manager = start_controller_manager(options.side, &options.binary, &manager_kubeconfig, &[], &log)?;
    let admin = Client::new(plane.admin_config(), ClientOptions::default())?;
    wait_until_usable(&admin, &mut manager, &names)?;
    let started = Instant::now();
    let status = run_ginkgo(suite, options, &admin_kubeconfig)?;
    let wall = started.elapsed();
    let manager_exited = manager.exited().map(|status| format!("{status}\n{}", manager.log_tail(20)));
    manager.stop(Duration::from_secs(10));
    nodes.stop();
    drop(plane);
    let report_path = options.out.join("report.json");
    let text = match std::fs::read_to_string(&report_path) {
        Ok(text) => text,
        Err(source) => return Err(Error::NoReport { status, path: report_path, source, log: ginkgo_log(options) }),
    };
    let (specs, suite_failure) = parse_report(&text)?;
    Ok(Report { side: options.side, specs, suite_failure, wall, manager_exited, out: options.out.clone() })
}

fn ginkgo_log(options: &RunOptions) -> String {
    options.out.join("ginkgo.log").display().to_string()
}

/// Waits until the controller manager has made namespaces usable (the default ServiceAccount)
/// and every node schedulable, as the suite's setup expects.
fn wait_until_usable(admin: &Client, manager: &mut OwnedProcess, nodes: &[String]) -> Result<(), Error> {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        if let Some(status) = manager.exited() {
            return Err(Error::ManagerExited { status, output: manager.log_tail(20) });
        }
        let account = admin.get_json::<Value>("/api/v1/namespaces/default/serviceaccounts/default").is_ok();
        let schedulable = admin.get_json::<Value>("/api/v1/nodes").is_ok_and(|list| {
            let items = list["items"].as_array().map(Vec::as_slice).unwrap_or_default();
            items.iter().filter(|node| node_usable(node)).count() == nodes.len()
        });
        if account && schedulable {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::NotUsable);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The specs `selection` selects, from a dry run of the suite (no cluster needed).
pub fn list(suite: &Suite, selection: &Selection) -> Result<Vec<String>, Error> {
    let (focus, skip) = selection.regexes();
    let dir = std::env::temp_dir().join(format!("kcm-e2e-list-{}", std::process::id()));
    if let Err(source) = std::fs::create_dir_all(&dir) {
        return Err(Error::CreateDir { dir, source });
    }
    let report = dir.join("report.json");
    let mut command = Command::new(&suite.e2e_test);
    command.args([
        "--ginkgo.dry-run".to_string(),
        format!("--ginkgo.focus={focus}"),
        format!("--ginkgo.json-report={}", report.display()),
        "--ginkgo.no-color".into(),
        "--provider=skeleton".into(),
    ]);
    if !skip.is_empty() {
        command.arg(format!("--ginkgo.skip={skip}"));
    }
    let output = command.output().map_err(|source| Error::DryRun { binary: suite.e2e_test.clone(), source })?;
    let text = std::fs::read_to_string(&report).map_err(|source| Error::DryRunNoReport {
        status: output.status,
        source,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    });
    let _ = std::fs::remove_dir_all(&dir);
    let (specs, _) = parse_report(&text?)?;
    Ok(specs.into_keys().collect())
}

/// Ginkgo's command line for `options` (upstream's README for the suite: `--provider=skeleton`,
/// no log dumps, every node must be ready).
pub fn ginkgo_args(suite: &Suite, options: &RunOptions, kubeconfig: &Path) -> Vec<String> {
    let (focus, skip) = options.selection.regexes();
    let out = options.out.display();
    let mut args = vec![
        format!("--procs={}", options.procs.max(1)),
        format!("--timeout={}s", options.timeout.as_secs()),
        format!("--focus={focus}"),
    ];
    if !skip.is_empty() {
        args.push(format!("--skip={skip}"));
    }
    args.extend([
        "--seed=1".into(),
        "--no-color".into(),
        "--json-report=report.json".into(),
        format!("--output-dir={out}"),
        suite.e2e_test.display().to_string(),
        "--".into(),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--provider=skeleton".into(),
        "--allowed-not-ready-nodes=0".into(),
        "--dump-logs-on-failure=false".into(),
        format!("--report-dir={out}"),
        format!("--e2e-output-dir={out}/e2e-output"),
    ]);
    args
}

/// Runs ginkgo to its end (its exit status is non-zero whenever a spec failed, which is a
/// result, not an error here). The controller manager's exit does not stop the suite: its specs
/// then fail, which is what the report should say.
fn run_ginkgo(suite: &Suite, options: &RunOptions, kubeconfig: &Path) -> Result<std::process::ExitStatus, Error> {
    let _ = std::fs::remove_file(options.out.join("report.json"));
    let mut command = Command::new(&suite.ginkgo);
    command.args(ginkgo_args(suite, options, kubeconfig)).current_dir(&options.out);
    let mut ginkgo = OwnedProcess::spawn("ginkgo", command, &options.out.join("ginkgo.log"))?;
    loop {
        if let Some(status) = ginkgo.exited() {
            return Ok(status);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The selected specs of ginkgo's JSON report and their outcomes, and the suite's own failure
/// if any. Specs the focus or skip left out are `skipped` with no message: they are not listed.
pub fn parse_report(text: &str) -> Result<(BTreeMap<String, Outcome>, Option<String>), Error> {
    let suites: Vec<Value> = serde_json::from_str(text).map_err(|source| Error::ReportNotJson { source })?;
    let mut specs = BTreeMap::new();
    let mut suite_failure = None;
    for report in suites.iter().flat_map(|suite| suite["SpecReports"].as_array().into_iter().flatten()) {
        let state = report["State"].as_str().unwrap_or("unknown");
        let message = report["Failure"]["Message"].as_str().unwrap_or_default().to_string();
        if report["LeafNodeType"] != "It" {
            if !matches!(state, "passed" | "skipped") && suite_failure.is_none() {
                suite_failure = Some(format!("{} {state}: {message}", report["LeafNodeType"].as_str().unwrap_or("")));
            }
            continue;
        }
        let outcome = match state {
            "passed" => Outcome::Passed,
            "skipped" if message.is_empty() => continue,
            "skipped" => Outcome::Skipped(message),
            other => Outcome::Failed { state: other.to_string(), message },
        };
        specs.insert(spec_text(report), outcome);
    }
    Ok((specs, suite_failure))
}

/// A spec's full text, as ginkgo's focus matches it: its containers' texts and its own.
fn spec_text(report: &Value) -> String {
    let mut parts: Vec<&str> =
        report["ContainerHierarchyTexts"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    parts.push(report["LeafNodeText"].as_str().unwrap_or_default());
    parts.join(" ")
}

/// A spec whose outcome differs between the two binaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The spec's full text.
    pub spec: String,
    /// Upstream's outcome (`None`: it did not run there, e.g. the suite timed out first).
    pub upstream: Option<Outcome>,
    /// Ours.
    pub ours: Option<Outcome>,
}

impl Difference {
    /// Upstream passed and ours did not: the judge's verdict against us.
    pub fn is_regression(&self) -> bool {
        self.upstream == Some(Outcome::Passed) && self.ours != Some(Outcome::Passed)
    }
}

/// The specs whose outcome (passed, failed, skipped) differs between the two reports.
pub fn compare(upstream: &Report, ours: &Report) -> Vec<Difference> {
    let names: std::collections::BTreeSet<&String> = upstream.specs.keys().chain(ours.specs.keys()).collect();
    let label = |o: Option<&Outcome>| o.map(std::mem::discriminant);
    names
        .into_iter()
        .filter(|name| label(upstream.specs.get(*name)) != label(ours.specs.get(*name)))
        .map(|name| Difference {
            spec: name.clone(),
            upstream: upstream.specs.get(name).cloned(),
            ours: ours.specs.get(name).cloned(),
        })
        .collect()
}

/// A JSON summary of a report, for docs/testing.md's figures and for scripts.
pub fn summary(report: &Report) -> Value {
    let (passed, failed, skipped) = report.counts();
    json!({
        "binary": report.side.name(),
        "passed": passed, "failed": failed, "skipped": skipped,
        "wall_seconds": report.wall.as_secs(),
        "specs": report.specs.iter().map(|(name, o)| (name.clone(), Value::from(o.label()))).collect::<serde_json::Map<_, _>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(containers: &[&str], text: &str, state: &str, message: &str) -> Value {
        json!({"ContainerHierarchyTexts": containers, "LeafNodeText": text, "LeafNodeType": "It",
            "State": state, "Failure": {"Message": message}})
    }

    #[test]
    fn the_report_lists_selected_specs_only() {
        let report = json!([{"SpecReports": [
            {"LeafNodeType": "SynchronizedBeforeSuite", "State": "passed"},
            spec(&["[sig-apps] Job"], "should run a job", "passed", ""),
            spec(&["[sig-apps] Job"], "not selected", "skipped", ""),
            spec(&["[sig-apps] StatefulSet", "Basic"], "needs a class", "skipped", "no default StorageClass"),
            spec(&["[sig-apps] CronJob"], "times out", "timedout", "deadline exceeded\nmore"),
        ]}]);
        let (specs, suite_failure) = parse_report(&report.to_string()).unwrap();
        assert_eq!(suite_failure, None);
        assert_eq!(specs.len(), 3);
        assert_eq!(specs["[sig-apps] Job should run a job"], Outcome::Passed);
        assert_eq!(
            specs["[sig-apps] StatefulSet Basic needs a class"],
            Outcome::Skipped("no default StorageClass".into())
        );
        assert_eq!(specs["[sig-apps] CronJob times out"].label(), "timedout");
    }

    #[test]
    fn a_failed_suite_setup_is_reported() {
        let report = json!([{"SpecReports": [
            {"LeafNodeType": "SynchronizedBeforeSuite", "State": "failed", "Failure": {"Message": "nodes not ready"}},
        ]}]);
        let (_, suite_failure) = parse_report(&report.to_string()).unwrap();
        assert!(suite_failure.unwrap().contains("nodes not ready"));
        assert!(parse_report("not json").unwrap_err().to_string().contains("not JSON"));
    }

    #[test]
    fn exact_focus_quotes_regex_metacharacters() {
        assert_eq!(exact_focus(&["a [x] (y)", "b.c"]), r"(a \[x\] \(y\)|b\.c)( |$)");
    }

    #[test]
    fn comparison_names_the_specs_that_differ() {
        let report = |side, outcomes: &[(&str, Outcome)]| Report {
            side,
            specs: outcomes.iter().map(|(n, o)| (n.to_string(), o.clone())).collect(),
            suite_failure: None,
            wall: Duration::ZERO,
            manager_exited: None,
            out: PathBuf::new(),
        };
        let failed = Outcome::Failed { state: "failed".into(), message: "x".into() };
        let upstream = report(Side::Upstream, &[("a", Outcome::Passed), ("b", Outcome::Passed), ("c", failed.clone())]);
        let ours = report(Side::Ours, &[("a", Outcome::Passed), ("b", failed.clone()), ("c", Outcome::Passed)]);
        let differences = compare(&upstream, &ours);
        assert_eq!(differences.len(), 2);
        assert!(differences[0].is_regression() && differences[0].spec == "b");
        assert!(!differences[1].is_regression());
        assert_eq!(ours.counts(), (2, 1, 0));
    }

    #[test]
    fn every_skip_says_why() {
        assert!(SKIPS.iter().all(|s| !s.why.is_empty() && !s.pattern.is_empty()));
        assert!(!skip_regex().starts_with('|') && !skip_regex().ends_with('|'));
    }
}
