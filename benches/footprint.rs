//! Footprint figures, printed (not asserted): our static release `kube-controller-manager` and
//! upstream's v1.36.2, one after the other, each on a fresh real kube-apiserver + etcd
//! (`kcm_envtest::envtest`) with simulated kubelets, kubeadm's flags and the same `--controllers`, run
//! the same steps while a thread samples `/proc/<pid>/status` and `/proc/<pid>/stat` every
//! 250 ms:
//! 1. idle for 60 s after start on an empty cluster;
//! 2. 100 ReplicaSets × 10 replicas: 1,000 Pods, until every ReplicaSet reports them ready;
//! 3. churn: every ReplicaSet scaled 10 → 12 → 8, 200 pods deleted by hand, then back to 10,
//!    each step until it has converged;
//! 4. the ReplicaSets deleted (the garbage collector deletes the pods), until no pod is left;
//! 5. idle again for 30 s.
//!
//! Upstream also runs a second time with kubeadm's full default selection
//! (`*,bootstrapsigner,tokencleaner`), as a kubeadm node runs it. One table compares resident
//! memory, threads, CPU seconds and convergence times; a per-crate size report of our binary
//! follows (text bytes by crate from the symbol table of an unstripped build of the same
//! profile), and the machine the figures come from.
//!
//! Without the real binaries (etcd, `../shared/k8s`) it says so and runs ours alone against the
//! in-process sandbox API server. Run with `cargo bench --bench footprint`; docs/footprint.md "Footprint
//! bench" lists the options (`-- --size-only`, `-- --ours PATH`, ...).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kcm::client::{Api, Client, ClientOptions, DeleteParams, ListParams, Patch, PostParams, PropagationPolicy};
use kcm_envtest::envtest::process::OwnedProcess;
use kcm_envtest::envtest::sampler::{Sample, Sampler, machine, mib};
use kcm_envtest::envtest::sidebyside::{Side, controller_manager_args};
use kcm_envtest::envtest::{Assets, Backend, KUBERNETES_VERSION, TestServer};
use kcm_sandbox::sandbox::nodes::{NodeOptions, SimulatedNodes};
use serde_json::{Value, json};

const NAMESPACE: &str = "footprint";
/// 110 pods fit a simulated node (the kubelet's default `maxPods`): 12 nodes hold the 1,200
/// pods of the churn's peak.
const NODES: usize = 12;
const REPLICAS: i32 = 10;
/// One pod in this many is deleted by hand during the churn: 200 of 1,000.
const DELETED_ONE_IN: usize = 5;
/// Threads the bench writes with, so that it is not what the controllers wait for.
const WRITERS: usize = 8;
const SAMPLE_EVERY: Duration = Duration::from_millis(250);
const POLL_EVERY: Duration = Duration::from_millis(500);
/// The longest one step may take to converge (at `--kube-api-qps=20`, 1,000 creates take 50 s).
const PATIENCE: Duration = Duration::from_secs(900);
/// The idle phase after everything was deleted.
const IDLE_AFTER: Duration = Duration::from_secs(30);
/// Quiet time after the 1,000 pods converged, before their RSS is read.
const SETTLE: Duration = Duration::from_secs(10);
/// The budget for the stripped static binary.
const BINARY_BUDGET: u64 = 10 * 1024 * 1024;
/// kubeadm's `--controllers` (upstream only: ours rejects the OpenShift controller's name,
/// which this build of upstream carries and `*` would not select anyway).
const KUBEADM_CONTROLLERS: &str =
    "--controllers=*,bootstrapsigner,tokencleaner,-service-ca-certificate-publisher-controller";
/// The log level both sides run at: their steady-state logging, not `-v=6`'s request log.
const VERBOSITY: &str = "-v=2";

fn main() {
    let options = match Options::parse() {
        Ok(options) => options,
        Err(e) => {
            eprintln!("footprint: {e}\n\n{USAGE}");
            std::process::exit(2);
        }
    };
    let mut failed = false;
    if !options.size_only {
        match run_sides(&options) {
            Ok(table) => println!("{table}"),
            Err(e) => {
                println!("footprint: FAILED: {e}");
                failed = true;
            }
        }
    }
    if !options.skip_size {
        match size_report(&options) {
            Ok(report) => println!("{report}"),
            Err(e) => {
                println!("size report: FAILED: {e}");
                failed = true;
            }
        }
    }
    println!("\n{}", machine());
    if failed {
        std::process::exit(1);
    }
}

const USAGE: &str = "usage: cargo bench --bench footprint [-- OPTIONS]
  --ours PATH          our kube-controller-manager (default: scripts/build-static.sh builds it)
  --upstream PATH      upstream's (default: the one kcm_envtest::envtest finds in ../shared/k8s)
  --sandbox            ours alone against the in-process sandbox, even where the real binaries are
  --only NAME[,NAME]   run only these of: ours, upstream, upstream-kubeadm
  --idle SECONDS       the idle phase (default 60)
  --replicasets N      ReplicaSets of 10 pods (default 100)
  --size-only          only the per-crate size report of our binary
  --skip-size          no size report (it needs an unstripped release build of its own)";

/// The bench's command line (`cargo bench` adds `--bench`, which is ignored).
struct Options {
    ours: Option<PathBuf>,
    upstream: Option<PathBuf>,
    sandbox: bool,
    only: Option<Vec<Config>>,
    idle: Duration,
    replica_sets: usize,
    size_only: bool,
    skip_size: bool,
}

impl Options {
    fn parse() -> Result<Options, String> {
        let mut options = Options {
            ours: None,
            upstream: None,
            sandbox: false,
            only: None,
            idle: Duration::from_secs(60),
            replica_sets: 100,
            size_only: false,
            skip_size: false,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag.to_string(), Some(value.to_string())),
                None => (arg.clone(), None),
            };
            let mut value = || inline.clone().or_else(|| args.next()).ok_or(format!("{flag} needs a value"));
            match flag.as_str() {
                "--bench" => {}
                "--ours" => options.ours = Some(PathBuf::from(value()?)),
                "--upstream" => options.upstream = Some(PathBuf::from(value()?)),
                "--sandbox" => options.sandbox = true,
                "--only" => {
                    let names = value()?;
                    let configs = names.split(',').map(Config::named).collect::<Result<Vec<_>, _>>()?;
                    options.only = Some(configs);
                }
                "--idle" => {
                    let secs = value()?.parse::<u64>().map_err(|e| format!("--idle: {e}"))?;
                    options.idle = Duration::from_secs(secs);
                }
                "--replicasets" => {
                    options.replica_sets = value()?.parse().map_err(|e| format!("--replicasets: {e}"))?;
                    if options.replica_sets == 0 {
                        return Err("--replicasets must be at least 1".into());
                    }
                }
                "--size-only" => options.size_only = true,
                "--skip-size" => options.skip_size = true,
                "-h" | "--help" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        if options.size_only && options.skip_size {
            return Err("--size-only and --skip-size exclude each other".into());
        }
        Ok(options)
    }
}

// ---------------------------------------------------------------------------------------------
// The runs
// ---------------------------------------------------------------------------------------------

/// One controller manager configuration measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Config {
    /// Ours, the controllers we implement.
    Ours,
    /// Upstream's, the same controllers.
    Upstream,
    /// Upstream's, kubeadm's default controllers.
    UpstreamKubeadm,
}

impl Config {
    const ALL: [Config; 3] = [Config::Ours, Config::Upstream, Config::UpstreamKubeadm];

    fn named(name: &str) -> Result<Config, String> {
        Config::ALL
            .into_iter()
            .find(|c| c.name() == name.trim())
            .ok_or_else(|| format!("--only: {name:?} is none of ours, upstream, upstream-kubeadm"))
    }

    fn name(self) -> &'static str {
        match self {
            Config::Ours => "ours",
            Config::Upstream => "upstream",
            Config::UpstreamKubeadm => "upstream-kubeadm",
        }
    }

    /// The column heading in the table.
    fn heading(self) -> String {
        match self {
            Config::Ours => "ours (static release), our controllers".into(),
            Config::Upstream => format!("upstream {KUBERNETES_VERSION}, same controllers"),
            Config::UpstreamKubeadm => {
                format!("upstream {KUBERNETES_VERSION}, kubeadm's `*,bootstrapsigner,tokencleaner`")
            }
        }
    }

    fn side(self) -> Side {
        match self {
            Config::Ours => Side::Ours,
            Config::Upstream | Config::UpstreamKubeadm => Side::Upstream,
        }
    }
}

/// What one run measured.
struct Figures {
    binary_bytes: u64,
    idle: Sample,
    with_pods: Sample,
    /// Highest VmRSS sampled during the churn.
    churn_peak_rss: u64,
    /// Highest thread count sampled over the whole run.
    peak_threads: u64,
    /// VmHWM at the end: the peak resident set of the process's life.
    hwm: u64,
    after: Sample,
    /// Per phase: name, CPU seconds, time to converge (none for the idle phases).
    phases: Vec<(String, f64, Option<Duration>)>,
    total_cpu: f64,
}

/// Runs every selected configuration and renders the table.
fn run_sides(options: &Options) -> Result<String, String> {
    let backend = if options.sandbox {
        eprintln!("footprint: --sandbox: ours alone against the in-process sandbox API server");
        Backend::Sandbox
    } else {
        match Assets::locate() {
            Ok(_) => Backend::Real,
            Err(missing) => {
                eprintln!(
                    "\n*** footprint: the real server's binaries are missing ({missing}); running the sandbox \
                     half only: ours against the in-process sandbox API server, no upstream comparison ***\n"
                );
                Backend::Sandbox
            }
        }
    };
    let mut configs: Vec<Config> = options.only.clone().unwrap_or_else(|| Config::ALL.to_vec());
    if backend == Backend::Sandbox {
        configs.retain(|c| *c == Config::Ours);
        if configs.is_empty() {
            return Err("upstream runs only on the real server, which is missing or turned off by --sandbox".into());
        }
    }
    let ours = match (&options.ours, configs.contains(&Config::Ours)) {
        (Some(path), _) => Some(path.clone()),
        (None, true) => Some(build_static(None)?),
        (None, false) => None,
    };
    let upstream = match &options.upstream {
        Some(path) => Some(path.clone()),
        None if backend == Backend::Real => Some(Assets::locate().map_err(|e| e.to_string())?.kube_controller_manager),
        None => None,
    };
    let logs = target_dir().join("footprint");
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let mut results = Vec::new();
    for config in configs {
        let binary = match config {
            Config::Ours => ours.clone(),
            Config::Upstream | Config::UpstreamKubeadm => upstream.clone(),
        }
        .ok_or_else(|| format!("no binary for {}", config.name()))?;
        let log = logs.join(format!("{}.log", config.name()));
        eprintln!("footprint: {} ({}), log {}", config.name(), binary.display(), log.display());
        let figures = run(config, backend, &binary, &log, options)
            .map_err(|e| format!("{}: {e} (its log: {})", config.name(), log.display()))?;
        results.push((config, figures));
    }
    Ok(table(backend, options, &results))
}

/// One configuration on a fresh server: start, idle, 1,000 pods, churn, delete, idle.
fn run(config: Config, backend: Backend, binary: &Path, log: &Path, options: &Options) -> Result<Figures, String> {
    let binary_bytes = std::fs::metadata(binary).map_err(|e| format!("{}: {e}", binary.display()))?.len();
    let server = TestServer::start(backend).map_err(|e| e.to_string())?;
    let dir = std::env::temp_dir().join(format!("kcm-footprint-{}-{}", std::process::id(), config.name()));
    let _ = std::fs::remove_dir_all(&dir);
    let (_, kubeconfig) =
        server.write_kubeconfigs(&dir.join("kubeadm").join("admin.conf")).map_err(|e| e.to_string())?;
    let admin =
        Client::new(server.admin_config(), ClientOptions { qps: -1.0, burst: 1, timeout: Duration::from_secs(60) })
            .map_err(|e| e.to_string())?
            .for_controller("footprint-bench");
    let namespace: Namespace = from(json!({"metadata": {"name": NAMESPACE}}));
    Api::<Namespace>::cluster(&admin).create(&namespace, &PostParams::default()).map_err(|e| e.to_string())?;
    let names: Vec<String> = (1..=NODES).map(|i| format!("node-{i}")).collect();
    // Kubelet defaults, and kube-scheduler's respect for the not-ready taint.
    let node_options = NodeOptions { strict_not_ready_taint: true, ..NodeOptions::default() };
    let nodes = SimulatedNodes::start(server.admin_config(), names, node_options).map_err(|e| e.to_string())?;

    let mut args = controller_manager_args(config.side(), &kubeconfig, &[]);
    for arg in &mut args {
        if arg.starts_with("-v=") {
            *arg = VERBOSITY.into();
        } else if config == Config::UpstreamKubeadm && arg.starts_with("--controllers=") {
            *arg = KUBEADM_CONTROLLERS.into();
        }
    }
    let _ = std::fs::remove_file(log);
    let mut command = Command::new(binary);
    command.args(&args);
    let mut manager = OwnedProcess::spawn(&format!("kube-controller-manager ({})", config.name()), command, log)
        .map_err(|e| e.to_string())?;
    let sampler = Sampler::start(manager.pid(), SAMPLE_EVERY);
    let result = steps(&admin, &mut manager, &sampler, options, binary_bytes);
    manager.stop(Duration::from_secs(10));
    sampler.stop();
    nodes.stop();
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// The measured steps against a running controller manager.
fn steps(
    admin: &Client,
    manager: &mut OwnedProcess,
    sampler: &Sampler,
    options: &Options,
    binary_bytes: u64,
) -> Result<Figures, String> {
    let count = options.replica_sets;
    let total = count * REPLICAS as usize;
    let mut phases = Vec::new();

    // Idle: from the start, on an empty cluster.
    sleep_watching(manager, options.idle)?;
    let (idle, idle_peaks) = sampler.phase_end();
    phases.push(("idle (start included)".to_string(), idle.cpu, None));
    progress(&format!("idle {:.0} s", options.idle.as_secs_f64()), &idle, None);

    // Not measured: what the controllers must have done before pods can run (a slow start
    // would show in the idle phase's figures anyway).
    wait_until(manager, "the namespace's default ServiceAccount and schedulable nodes", || ready(admin))?;
    let (_, ready_peaks) = sampler.phase_end();

    // 1,000 pods.
    let started = Instant::now();
    parallel(count, |i| {
        let rs = replica_set(i);
        Api::<ReplicaSet>::namespaced(admin, NAMESPACE).create(&rs, &PostParams::default()).map(drop)
    })?;
    wait_converged(admin, manager, &vec![REPLICAS; count])?;
    let converged = started.elapsed();
    sleep_watching(manager, SETTLE)?;
    let (with_pods, pods_peaks) = sampler.phase_end();
    phases.push((format!("{} pods", thousands(total)), with_pods.cpu, Some(converged)));
    progress(&format!("{} pods", thousands(total)), &with_pods, Some(converged));

    // Churn: 10 → 12 → 8, 200 pods deleted by hand, → 10.
    let started = Instant::now();
    for replicas in [12, 8] {
        scale_all(admin, count, replicas)?;
        wait_converged(admin, manager, &vec![replicas; count])?;
    }
    let pods = list(admin, "/api/v1/namespaces/footprint/pods")?;
    let wanted = (total / DELETED_ONE_IN).max(1);
    let victims: Vec<String> = pods
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str().map(String::from))
        .step_by((pods.len() / wanted).max(1))
        .take(wanted)
        .collect();
    parallel(victims.len(), |i| {
        Api::<Pod>::namespaced(admin, NAMESPACE).delete(&victims[i], &DeleteParams::default()).map(drop)
    })?;
    wait_converged(admin, manager, &vec![8; count])?;
    scale_all(admin, count, REPLICAS)?;
    wait_converged(admin, manager, &vec![REPLICAS; count])?;
    let converged = started.elapsed();
    let (churned, churn_peaks) = sampler.phase_end();
    phases.push(("churn".to_string(), churned.cpu, Some(converged)));
    progress("churn", &churned, Some(converged));

    // Delete everything: the ReplicaSets, and the garbage collector deletes their pods.
    let started = Instant::now();
    let background = DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..Default::default() };
    Api::<ReplicaSet>::namespaced(admin, NAMESPACE)
        .delete_collection(&ListParams::default(), &background)
        .map_err(|e| format!("deleting the ReplicaSets: {e}"))?;
    wait_until(manager, "every pod gone", || {
        Ok(list(admin, "/api/v1/namespaces/footprint/pods")?.is_empty()
            && list(admin, "/apis/apps/v1/namespaces/footprint/replicasets")?.is_empty())
    })?;
    let converged = started.elapsed();
    let (deleted, delete_peaks) = sampler.phase_end();
    phases.push(("delete all".to_string(), deleted.cpu, Some(converged)));
    progress("delete", &deleted, Some(converged));

    // Idle again.
    sleep_watching(manager, IDLE_AFTER)?;
    let (after, after_peaks) = sampler.phase_end();
    phases.push((format!("idle after ({} s)", IDLE_AFTER.as_secs()), after.cpu, None));
    progress("idle after", &after, None);

    let peak_threads = [idle_peaks, ready_peaks, pods_peaks, churn_peaks, delete_peaks, after_peaks]
        .iter()
        .map(|p| p.threads)
        .max()
        .unwrap_or(0);
    Ok(Figures {
        binary_bytes,
        idle,
        with_pods,
        churn_peak_rss: churn_peaks.rss,
        peak_threads,
        hwm: after.hwm,
        total_cpu: after.total_cpu,
        after,
        phases,
    })
}

fn progress(phase: &str, sample: &Sample, converged: Option<Duration>) {
    let converged = converged.map(|d| format!(", converged in {:.1} s", d.as_secs_f64())).unwrap_or_default();
    eprintln!(
        "  {phase}: RSS {:.1} MiB, {} threads, {:.1} CPU s{converged}",
        mib(sample.rss),
        sample.threads,
        sample.cpu
    );
}

/// The namespace can take pods (its default ServiceAccount exists) and every node is Ready
/// without the taints the node lifecycle controller removes.
fn ready(admin: &Client) -> Result<bool, String> {
    let account = match admin.get_json::<Value>("/api/v1/namespaces/footprint/serviceaccounts/default") {
        Ok(_) => true,
        Err(e) if e.is_not_found() => false,
        Err(e) => return Err(e.to_string()),
    };
    let schedulable = list(admin, "/api/v1/nodes")?
        .iter()
        .filter(|n| {
            let taints = n["spec"]["taints"].as_array().map(Vec::as_slice).unwrap_or_default();
            !taints.iter().any(|t| t["key"].as_str().is_some_and(|k| k.starts_with("node.kubernetes.io/")))
        })
        .count();
    Ok(account && schedulable == NODES)
}

/// ReplicaSet `rs-<i>`: 10 pods of a realistic size (two containers, env, resources, a probe)
/// whose requests let 110 fit a simulated node.
fn replica_set(i: usize) -> ReplicaSet {
    let name = format!("rs-{i:03}");
    from(json!({"metadata": {"name": name}, "spec": {"replicas": REPLICAS,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name, "tier": "web"}}, "spec": {"containers": [
            {"name": "nginx", "image": "nginx:1.27", "ports": [{"containerPort": 80, "name": "http"}],
             "env": [{"name": "MODE", "value": "production"}],
             "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
             "readinessProbe": {"httpGet": {"path": "/healthz", "port": 80}, "periodSeconds": 5}},
            {"name": "sidecar", "image": "busybox:1.36", "command": ["sh", "-c", "sleep infinity"]}]}}}}))
}

fn scale_all(admin: &Client, count: usize, replicas: i32) -> Result<(), String> {
    let patch = Patch::Merge(json!({"spec": {"replicas": replicas}}));
    parallel(count, |i| {
        Api::<ReplicaSet>::namespaced(admin, NAMESPACE)
            .patch(&format!("rs-{i:03}"), &patch, &PostParams::default())
            .map(drop)
    })
}

/// Waits until ReplicaSet `rs-<i>` has observed its spec and reports `want[i]` replicas, all
/// ready, and the namespace holds exactly those pods, none terminating and all Ready.
fn wait_converged(admin: &Client, manager: &mut OwnedProcess, want: &[i32]) -> Result<(), String> {
    let total: usize = want.iter().map(|&n| n as usize).sum();
    wait_until(manager, &format!("{} ReplicaSets with {total} ready pods", want.len()), || {
        let sets = list(admin, "/apis/apps/v1/namespaces/footprint/replicasets")?;
        let by_name: HashMap<&str, &Value> =
            sets.iter().filter_map(|rs| Some((rs["metadata"]["name"].as_str()?, rs))).collect();
        let settled = want.iter().enumerate().all(|(i, &n)| {
            by_name.get(format!("rs-{i:03}").as_str()).is_some_and(|rs| {
                let status = &rs["status"];
                rs["spec"]["replicas"] == n
                    && status["observedGeneration"] == rs["metadata"]["generation"]
                    && status["replicas"] == n
                    && status["readyReplicas"] == n
            })
        });
        if !settled {
            return Ok(false);
        }
        let pods = list(admin, "/api/v1/namespaces/footprint/pods")?;
        let ready = |p: &Value| {
            p["metadata"]["deletionTimestamp"].is_null()
                && p["status"]["conditions"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
        };
        Ok(pods.len() == total && pods.iter().all(ready))
    })
}

/// Polls `done` until it holds; fails after `PATIENCE` or when the controller manager exits.
fn wait_until(
    manager: &mut OwnedProcess,
    what: &str,
    mut done: impl FnMut() -> Result<bool, String>,
) -> Result<(), String> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        alive(manager)?;
        if done()? {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("timed out after {PATIENCE:?} waiting for {what}"));
        }
        std::thread::sleep(POLL_EVERY);
    }
}

/// Sleeps `duration`, failing early when the controller manager exits.
fn sleep_watching(manager: &mut OwnedProcess, duration: Duration) -> Result<(), String> {
    let deadline = Instant::now() + duration;
    while Instant::now() < deadline {
        alive(manager)?;
        std::thread::sleep(deadline.saturating_duration_since(Instant::now()).min(Duration::from_millis(500)));
    }
    alive(manager)
}

fn alive(manager: &mut OwnedProcess) -> Result<(), String> {
    match manager.exited() {
        Some(status) => Err(format!("{} exited ({status}):\n{}", manager.name(), manager.log_tail(20))),
        None => Ok(()),
    }
}

/// Runs `write(i)` for every `i < count` on `WRITERS` threads; the first error wins.
fn parallel(count: usize, write: impl Fn(usize) -> kcm::client::Result<()> + Sync) -> Result<(), String> {
    let write = &write;
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..WRITERS)
            .map(|w| {
                scope.spawn(move || (w..count).step_by(WRITERS).try_for_each(|i| write(i).map_err(|e| e.to_string())))
            })
            .collect();
        workers.into_iter().try_for_each(|w| w.join().unwrap_or_else(|_| Err("a writer panicked".into())))
    })
}

/// The items of a list, as JSON.
fn list(admin: &Client, path: &str) -> Result<Vec<Value>, String> {
    let mut list: Value = admin.get_json(path).map_err(|e| format!("GET {path}: {e}"))?;
    match list["items"].take() {
        Value::Array(items) => Ok(items),
        _ => Ok(Vec::new()),
    }
}

fn from<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

// ---------------------------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------------------------

fn table(backend: Backend, options: &Options, results: &[(Config, Figures)]) -> String {
    let get = |config: Config| results.iter().find(|(c, _)| *c == config).map(|(_, f)| f);
    let (ours, upstream) = (get(Config::Ours), get(Config::Upstream));
    let ratio = ours.is_some() && upstream.is_some();
    let pods = options.replica_sets * REPLICAS as usize;
    let mut out = String::new();
    out.push_str(&format!(
        "\nFootprint on the {} ({NODES} simulated nodes; {} ReplicaSets x {REPLICAS} = {} pods; kubeadm's flags, {VERBOSITY}, leader election on)\n\n",
        backend.name(),
        options.replica_sets,
        thousands(pods)
    ));
    let mut heading = vec![String::new()];
    for (config, _) in results {
        heading.push(config.heading());
        if *config == Config::Upstream && ratio {
            heading.push("ours / upstream".into());
        }
    }
    let goals = ours.is_some();
    if goals {
        heading.push("issue 15 goal for ours".into());
    }
    out.push_str(&row(&heading));
    out.push_str(&row(&vec!["---".to_string(); heading.len()]));

    let phase_names: Vec<String> =
        results.first().map(|(_, f)| f.phases.iter().map(|p| p.0.clone()).collect()).unwrap_or_default();
    let mut metrics: Vec<Metric> = vec![
        Metric::new(format!("RSS idle, {} s after start (MiB)", options.idle.as_secs()), 1, "≤ 16", |f| {
            Some(mib(f.idle.rss))
        }),
        Metric::new("threads idle", 0, "≤ 40", |f| Some(f.idle.threads as f64)),
        Metric::new(format!("RSS with {} pods (MiB)", thousands(pods)), 1, "", |f| Some(mib(f.with_pods.rss))),
        Metric::new("RSS per cached pod (KiB)", 1, "≤ 1/3 of upstream's", move |f| {
            Some((f.with_pods.rss as f64 - f.idle.rss as f64) / 1024.0 / pods as f64)
        }),
        Metric::new("peak RSS during churn (MiB)", 1, "≤ 1/4 of upstream's", |f| Some(mib(f.churn_peak_rss))),
        Metric::new("peak RSS of the run, VmHWM (MiB)", 1, "", |f| Some(mib(f.hwm))),
        Metric::new("threads peak", 0, "bounded", |f| Some(f.peak_threads as f64)),
        Metric::new("RSS idle after deleting all (MiB)", 1, "", |f| Some(mib(f.after.rss))),
        Metric::new("threads idle after", 0, "", |f| Some(f.after.threads as f64)),
    ];
    for (i, name) in phase_names.iter().enumerate() {
        metrics.push(Metric::new(format!("CPU s, {name}"), 1, "", move |f| f.phases.get(i).map(|p| p.1)));
    }
    metrics.push(Metric::new("CPU s, total", 1, "", |f| Some(f.total_cpu)));
    for (i, name) in phase_names.iter().enumerate() {
        if results.first().is_some_and(|(_, f)| f.phases[i].2.is_some()) {
            metrics.push(Metric::new(format!("time to converge, {name} (s)"), 1, "", move |f| {
                f.phases.get(i).and_then(|p| p.2).map(|d| d.as_secs_f64())
            }));
        }
    }
    metrics.push(Metric::new("binary (MiB)", 1, "≤ 10", |f| Some(mib(f.binary_bytes))));

    for metric in &metrics {
        let decimals = metric.decimals;
        let mut cells = vec![metric.label.clone()];
        for (config, figures) in results {
            cells.push((metric.value)(figures).map_or("—".into(), |v| format!("{v:.decimals$}")));
            if *config == Config::Upstream && ratio {
                let (o, u) = (ours.and_then(&metric.value), upstream.and_then(&metric.value));
                cells.push(match (o, u) {
                    (Some(o), Some(u)) if u > 0.0 => format!("{:.2}", o / u),
                    _ => "—".into(),
                });
            }
        }
        if goals {
            cells.push(metric.goal.to_string());
        }
        out.push_str(&row(&cells));
    }
    if backend == Backend::Sandbox {
        out.push_str(
            "\n(sandbox half only: the sandbox API server runs in the bench process, so these figures are not \
             comparable with the real server's; install etcd and unpack ../shared/k8s for the comparison)\n",
        );
    }
    out
}

/// One row of the table: how to read it from a run's figures, and the goal for it.
struct Metric<'a> {
    label: String,
    decimals: usize,
    goal: &'static str,
    value: Reading<'a>,
}

/// Reads one figure of a run; `None` where the run has none.
type Reading<'a> = Box<dyn Fn(&Figures) -> Option<f64> + 'a>;

impl<'a> Metric<'a> {
    fn new(
        label: impl Into<String>,
        decimals: usize,
        goal: &'static str,
        value: impl Fn(&Figures) -> Option<f64> + 'a,
    ) -> Metric<'a> {
        Metric { label: label.into(), decimals, goal, value: Box::new(value) }
    }
}

fn row(cells: &[String]) -> String {
    format!("| {} |\n", cells.join(" | "))
}

/// `1,000` for 1000.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Binaries and the size report
// ---------------------------------------------------------------------------------------------

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| manifest_dir().join("target"), PathBuf::from)
}

/// Builds our static release binary with `scripts/build-static.sh` (cargo makes it a no-op when
/// it is up to date) and returns its path; `target_dir` builds into another target folder.
fn build_static(target_dir: Option<&Path>) -> Result<PathBuf, String> {
    let script = manifest_dir().join("scripts/build-static.sh");
    let mut command = Command::new(&script);
    command.stdin(Stdio::null()).stderr(Stdio::inherit());
    // What `cargo bench` sets for the bench it runs: build scripts (ring's) rerun when these
    // change, so with them the nested build would never be fresh, for this run or a later one
    // from the shell.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let set_by_cargo = ["CARGO_MANIFEST_", "CARGO_PKG_", "CARGO_CFG_"].iter().any(|p| name.starts_with(p))
            || [
                "CARGO",
                "CARGO_CRATE_NAME",
                "CARGO_BIN_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
                "OUT_DIR",
            ]
            .contains(&name.as_ref());
        if set_by_cargo {
            command.env_remove(name.as_ref());
        }
    }
    if let Some(dir) = target_dir {
        // Symbols kept, in a folder of its own, so that the shipped build is not touched.
        command.env("CARGO_TARGET_DIR", dir).env("CARGO_PROFILE_RELEASE_STRIP", "false");
    }
    eprintln!(
        "footprint: {} the static release build{} (LTO: minutes when not up to date)",
        script.display(),
        if target_dir.is_some() { " with symbols" } else { "" }
    );
    let output = command.output().map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if !output.status.success() {
        return Err(format!("{} failed ({})", script.display(), output.status));
    }
    let path = String::from_utf8_lossy(&output.stdout).lines().last().unwrap_or_default().trim().to_string();
    let path = PathBuf::from(path);
    if !path.is_file() {
        return Err(format!("{} printed no binary ({})", script.display(), path.display()));
    }
    Ok(path)
}

/// Text bytes per crate of an unstripped build of our release binary, and the shipped
/// (stripped) file's size against the budget.
fn size_report(options: &Options) -> Result<String, String> {
    let shipped = match &options.ours {
        Some(path) => path.clone(),
        None => build_static(None)?,
    };
    let unstripped = build_static(Some(&target_dir().join("footprint-unstripped")))?;
    let output = Command::new("nm")
        .args(["--defined-only", "--size-sort", "--print-size", "--demangle"])
        .arg(&unstripped)
        .output()
        .map_err(|e| format!("cannot run nm (binutils): {e}"))?;
    if !output.status.success() {
        return Err(format!("nm {} failed: {}", unstripped.display(), String::from_utf8_lossy(&output.stderr).trim()));
    }
    let mut by_crate: BTreeMap<String, u64> = BTreeMap::new();
    // Aliases (one function under several names) are counted once.
    let mut seen = std::collections::HashSet::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        // "<address> <size> <type> <name>", sizes in hex.
        let mut parts = line.splitn(4, ' ');
        let (Some(address), Some(size), Some(kind), Some(name)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if !matches!(kind, "t" | "T" | "W" | "i") || !seen.insert(address.to_string()) {
            continue;
        }
        let Ok(size) = u64::from_str_radix(size, 16) else { continue };
        *by_crate.entry(crate_of(name)).or_default() += size;
    }
    let symbols = seen.len();
    let text: u64 = by_crate.values().sum();
    let mut crates: Vec<(String, u64)> = by_crate.into_iter().collect();
    crates.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));

    let shipped_bytes = std::fs::metadata(&shipped).map_err(|e| format!("{}: {e}", shipped.display()))?.len();
    let mut out = format!(
        "\nBinary size: {} (stripped, as shipped) is {shipped_bytes} bytes = {:.2} MiB; budget {:.0} MiB: {}\n",
        shipped.display(),
        mib(shipped_bytes),
        mib(BINARY_BUDGET),
        if shipped_bytes <= BINARY_BUDGET {
            format!("within, {:.2} MiB to spare", mib(BINARY_BUDGET - shipped_bytes))
        } else {
            format!("OVER by {:.2} MiB", mib(shipped_bytes - BINARY_BUDGET))
        }
    );
    let section = text_section_bytes(&unstripped).map_or(String::new(), |b| format!(" of .text's {:.2} MiB", mib(b)));
    out.push_str(&format!(
        "Text by crate: {symbols} functions, {:.2} MiB{section}, in {} (the same build with symbols); generic \
         code counts for the crate that defines it, `<T as Trait>` for T's crate unless T is std's or a primitive:\n\n",
        mib(text),
        unstripped.display()
    ));
    out.push_str("| crate | KiB | % of text |\n|---|---|---|\n");
    for (name, bytes) in crates.iter().take(20) {
        out.push_str(&format!("| {name} | {:.1} | {:.1} |\n", *bytes as f64 / 1024.0, percent(*bytes, text)));
    }
    let rest: u64 = crates.iter().skip(20).map(|c| c.1).sum();
    if crates.len() > 20 {
        out.push_str(&format!(
            "| {} others | {:.1} | {:.1} |\n",
            crates.len() - 20,
            rest as f64 / 1024.0,
            percent(rest, text)
        ));
    }
    Ok(out)
}

/// The size of the `.text` section (`size -A`, binutils).
fn text_section_bytes(binary: &Path) -> Option<u64> {
    let output = Command::new("size").arg("-A").arg(binary).output().ok()?;
    String::from_utf8_lossy(&output.stdout).lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        (fields.next()? == ".text").then(|| fields.next()?.parse().ok()).flatten()
    })
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 { 0.0 } else { part as f64 * 100.0 / whole as f64 }
}

/// The crate a demangled symbol's code belongs to, roughly as `cargo bloat` attributes it:
/// the first path segment; for `<T as Trait>::f` T's crate, or the trait's when T is a std
/// or primitive type; C and assembly symbols grouped by origin.
fn crate_of(symbol: &str) -> String {
    let symbol = symbol.split(".llvm.").next().unwrap_or(symbol);
    if let Some(rest) = symbol.strip_prefix('<')
        && let Some(close) = matching_angle(rest)
    {
        let inner = &rest[..close];
        let (ty, tr) = match split_top_level(inner, " as ") {
            Some((ty, tr)) => (ty, Some(tr)),
            None => (inner, None),
        };
        let of_type = crate_of_type(ty);
        let of_trait = tr.and_then(crate_of_type);
        return match (of_type, of_trait) {
            (Some(t), Some(tr)) if is_std(&t) && !is_std(&tr) => tr,
            (Some(t), _) => t,
            (None, Some(tr)) => tr,
            (None, None) => "[unknown]".into(),
        };
    }
    if let Some((first, _)) = symbol.split_once("::")
        && is_identifier(first)
    {
        return first.to_string();
    }
    if symbol.starts_with("ring_core_") {
        return "ring (C/asm)".into();
    }
    "[C: libc, libgcc, ...]".into()
}

/// The crate of a type or trait path, after references, pointers and `dyn`; `None` for
/// primitives, tuples and other shapes without a path.
fn crate_of_type(ty: &str) -> Option<String> {
    let mut ty = ty.trim();
    loop {
        let before = ty;
        for prefix in ["&", "mut ", "*const ", "*mut ", "dyn ", "[", "(", "unsafe ", "extern \"C\" "] {
            ty = ty.strip_prefix(prefix).unwrap_or(ty).trim_start();
        }
        if ty == before {
            break;
        }
    }
    if ty.starts_with('<') {
        return Some(crate_of(ty));
    }
    let end = ty.find(['<', ';', ',', ')', ']', ' ']).unwrap_or(ty.len());
    let path = &ty[..end];
    let (first, _) = path.split_once("::")?;
    is_identifier(first).then(|| first.to_string())
}

fn is_std(krate: &str) -> bool {
    matches!(krate, "std" | "core" | "alloc")
}

fn is_identifier(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The index in `s` of the `>` closing an already opened `<`.
fn matching_angle(s: &str) -> Option<usize> {
    let mut depth = 1usize;
    for (i, c) in s.char_indices() {
        match c {
            '<' => depth += 1,
            // `->` in fn pointer types is not a closing bracket.
            '>' if i > 0 && s.as_bytes()[i - 1] == b'-' => {}
            '>' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Splits `s` at the first `separator` outside angle brackets.
fn split_top_level<'a>(s: &'a str, separator: &str) -> Option<(&'a str, &'a str)> {
    let mut depth = 0i32;
    for (i, c) in s.char_indices() {
        match c {
            '<' => depth += 1,
            '>' if i > 0 && s.as_bytes()[i - 1] == b'-' => {}
            '>' => depth -= 1,
            _ if depth == 0 && s[i..].starts_with(separator) => return Some((&s[..i], &s[i + separator.len()..])),
            _ => {}
        }
    }
    None
}
