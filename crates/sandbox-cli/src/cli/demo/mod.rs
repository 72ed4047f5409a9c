//! `kcm-sandbox demo`: starts the sandbox (or, with `--real-server`, etcd and kube-apiserver
//! v1.36.2: [`crate::envtest`]) with simulated nodes, starts the real `kube-controller-manager`
//! against it, and narrates a scenario as it happens, reading every fact back from the API. Steps that need a controller this build does not have yet are
//! skipped, saying so; the demo fails only when something that should happen does not.

mod autoscale;
mod join;
mod sets;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Namespace, Node, Pod, Service, ServiceAccount};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use lexopt::prelude::*;
use serde_json::json;

use crate::apimachinery::errors::BoxError;
use crate::app::controllers::is_implemented;
use crate::client::{self, Api, Client, ClientOptions, DeleteParams, ListParams, Patch, PostParams, PropagationPolicy};
use crate::envtest::process::{self, OwnedProcess};
use crate::envtest::{ControlPlane, TestServer};
use crate::sandbox::nodes::{NodeOptions, SimulatedNodes};
use crate::sandbox::server::{AuthorizationMode, Sandbox, SandboxOptions};

/// Options of `demo`.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// `--controller-manager`: the kube-controller-manager binary (default: next to kcm-sandbox).
    pub controller_manager: PathBuf,
    /// `--nodes`: simulated nodes (default 3).
    pub nodes: usize,
    /// Run against a real kube-apiserver ([`ControlPlane`]) instead of the sandbox.
    pub real_server: bool,
}

/// Why the demo could not be set up, or a step of it failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line cannot be read.
    #[error(transparent)]
    Args(#[from] lexopt::Error),
    /// An argument the demo does not take.
    #[error("demo: {source}")]
    Unexpected {
        /// lexopt's account of it.
        #[source]
        source: lexopt::Error,
    },
    /// `--nodes` is not UTF-8.
    #[error("--nodes: not UTF-8")]
    NodesNotUtf8,
    /// `--nodes` is not a number.
    #[error("invalid argument {raw:?} for --nodes")]
    InvalidNodes {
        /// The argument.
        raw: String,
    },
    /// `--nodes` is below 2.
    #[error("--nodes: the demo needs at least 2 nodes")]
    TooFewNodes,
    /// The work folder cannot be created.
    #[error("{}: {source}", .dir.display())]
    Workdir {
        /// The folder.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The real control plane did not start, or its metrics APIs.
    #[error(transparent)]
    TestBed(#[from] crate::envtest::Error),
    /// The sandbox or its simulated nodes failed.
    #[error("{0}")]
    Sandbox(#[source] BoxError),
    /// The controller manager did not start.
    #[error("{source} (build it with `cargo build --bins`)")]
    ControllerManager {
        /// Why.
        #[source]
        source: process::Error,
    },
    /// The controller manager ended while the demo waited for it.
    #[error("kube-controller-manager exited ({status}):\n{output}")]
    ManagerExited {
        /// How it ended.
        status: std::process::ExitStatus,
        /// Its log.
        output: String,
    },
    /// A request failed, or a client could not be built.
    #[error(transparent)]
    Client(#[from] client::Error),
    /// An object could not be built from its JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The joining kubelet's key or certificate request could not be made.
    #[error(transparent)]
    Certificate(#[from] rcgen::Error),
    /// The issued certificate's subject cannot be read.
    #[error(transparent)]
    Subject(#[from] crate::x509::SubjectError),
    /// A time could not be computed.
    #[error(transparent)]
    Time(#[from] jiff::Error),
    /// A step's outcome did not come in time.
    #[error("timed out after {timeout:?} waiting for {what}")]
    Timeout {
        /// What was waited for.
        what: String,
        /// How long.
        timeout: Duration,
    },
    /// A wait failed; `seen` is what it last saw.
    #[error("{source} (last seen: {seen})")]
    LastSeen {
        /// The failure.
        #[source]
        source: Box<Error>,
        /// What the wait last saw.
        seen: String,
    },
    /// An eviction failed otherwise than a budget refuses one.
    #[error("evicting {pod}: {source}")]
    Eviction {
        /// The pod.
        pod: String,
        /// Why.
        #[source]
        source: Box<Error>,
    },
    /// Creating in a terminating namespace failed otherwise than with Forbidden.
    #[error("creating in a terminating namespace failed oddly: {source}")]
    TerminatingNamespace {
        /// Why.
        #[source]
        source: client::Error,
    },
    /// A step found the cluster otherwise than it expects (the message says how).
    #[error("{0}")]
    Step(String),
}

/// The sandbox's errors (text until its helper types them), kept as the source.
fn sandbox_error(e: impl Into<BoxError>) -> Error {
    Error::Sandbox(e.into())
}

/// How long one step may take to converge.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// Parses `demo`'s options.
pub fn parse(parser: &mut lexopt::Parser) -> Result<DemoOptions, Error> {
    let mut options = DemoOptions { controller_manager: default_controller_manager(), nodes: 3, real_server: false };
    while let Some(arg) = parser.next()? {
        match arg {
            Long("controller-manager") => {
                options.controller_manager = PathBuf::from(parser.value()?);
            }
            Long("nodes") => {
                let raw = parser.value()?.string().map_err(|_| Error::NodesNotUtf8)?;
                options.nodes = raw.parse().map_err(|_| Error::InvalidNodes { raw: raw.clone() })?;
                if options.nodes < 2 {
                    return Err(Error::TooFewNodes);
                }
            }
            Long("real-server") => options.real_server = true,
            other => return Err(Error::Unexpected { source: other.unexpected() }),
        }
    }
    Ok(options)
}

/// `kube-controller-manager` next to this executable (both are built together).
pub fn default_controller_manager() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("kube-controller-manager")))
        .unwrap_or_else(|| PathBuf::from("kube-controller-manager"))
}

/// Prints what happens, with the time since the demo started.
struct Narrator {
    started: Instant,
    converged: usize,
    skipped: Vec<String>,
}

impl Narrator {
    fn line(&self, mark: &str, text: &str) {
        println!("[{:>6.1}s] {mark} {text}", self.started.elapsed().as_secs_f64());
    }

    fn step(&self, text: &str) {
        println!();
        self.line("▶", text);
    }

    fn ok(&mut self, text: &str) {
        self.converged += 1;
        self.line("✓", text);
    }

    fn info(&self, text: &str) {
        self.line(" ", text);
    }

    /// A step that needs controllers this build does not have.
    fn skip(&mut self, what: &str, controllers: &[&str]) {
        let missing: Vec<&str> = controllers.iter().copied().filter(|c| !is_implemented(c)).collect();
        self.line("–", &format!("skipped: {what} needs {}, not implemented yet", missing.join(", ")));
        self.skipped.push(what.to_string());
    }
}

fn all_implemented(controllers: &[&str]) -> bool {
    controllers.iter().all(|c| is_implemented(c))
}

/// Polls `check` until it returns `Some` or `timeout` passes.
fn wait_for<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Result<Option<T>, Error>) -> Result<T, Error> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check()? {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout { what: what.to_string(), timeout });
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Runs the demo; a failed scenario is `ExitCode::FAILURE`, `Err` only for setup errors.
pub fn run(options: DemoOptions) -> Result<ExitCode, Error> {
    let mut narrator = Narrator { started: Instant::now(), converged: 0, skipped: Vec::new() };
    let workdir = std::env::temp_dir().join(format!("kcm-demo-{}", std::process::id()));
    if let Err(source) = std::fs::create_dir_all(&workdir) {
        return Err(Error::Workdir { dir: workdir, source });
    }
    let outcome = scenario(&options, &workdir, &mut narrator);
    println!();
    match outcome {
        Ok(()) => {
            println!(
                "demo converged: {} checks passed, {} steps skipped until their controllers are built{}",
                narrator.converged,
                narrator.skipped.len(),
                if narrator.skipped.is_empty() { String::new() } else { format!(" ({})", narrator.skipped.join("; ")) }
            );
            println!("controller manager log: {}", workdir.join("kube-controller-manager.log").display());
            Ok(ExitCode::SUCCESS)
        }
        Err(reason) => {
            println!("demo FAILED: {reason}");
            println!("controller manager log: {}", workdir.join("kube-controller-manager.log").display());
            Ok(ExitCode::FAILURE)
        }
    }
}

fn scenario(options: &DemoOptions, workdir: &Path, narrator: &mut Narrator) -> Result<(), Error> {
    let server = start_server(options.real_server, narrator)?;
    let (admin_kubeconfig, kcm_kubeconfig) = server.write_kubeconfigs(&workdir.join("admin.conf"))?;
    narrator.ok(&format!("serving {} (admin kubeconfig: {})", server.url(), admin_kubeconfig.display()));
    // The HPA reads metrics.k8s.io: the sandbox serves it; a real server gets it as an aggregated API.
    let metrics_apis = server.serve_metrics_apis()?;
    if metrics_apis.is_some() {
        narrator.ok("metrics.k8s.io, custom.metrics.k8s.io and external.metrics.k8s.io registered as aggregated APIs");
    }
    let client = Client::new(server.admin_config(), ClientOptions::default())?;

    narrator.step(&format!("Registering {} simulated nodes", options.nodes));
    let names: Vec<String> = (1..=options.nodes).map(|i| format!("node-{i}")).collect();
    let nodes =
        SimulatedNodes::start(server.admin_config(), names.clone(), NodeOptions::default()).map_err(sandbox_error)?;
    wait_for("every node Ready", STEP_TIMEOUT, || {
        let (nodes, _) = Api::<Node>::all(&client).list_all(&ListParams::default())?;
        Ok((nodes.iter().filter(|n| node_ready(n) == Some("True")).count() == options.nodes).then_some(()))
    })?;
    narrator.ok(&format!("{} are Ready and renew their Leases in kube-node-lease", names.join(", ")));

    narrator.step("Starting kube-controller-manager against it");
    let mut kcm = ControllerManager::start(&options.controller_manager, &kcm_kubeconfig, workdir)?;
    kcm.wait_for_log("connected to", STEP_TIMEOUT)?;
    narrator.ok(&format!(
        "{} (pid {}) connected as system:kube-controller-manager",
        options.controller_manager.display(),
        kcm.process.pid()
    ));
    narrator.info(
        "as kubeadm runs it: RBAC is enforced with upstream's bootstrap policy, and each controller \
         acts as its own kube-system ServiceAccount (--use-service-account-credentials)",
    );
    let leases = Api::<Lease>::namespaced(&client, "kube-system");
    let holder = wait_for("the leader Lease", STEP_TIMEOUT, || {
        let lease = leases.get_opt("kube-controller-manager")?;
        Ok(lease.and_then(|l| l.spec).and_then(|s| s.holder_identity).filter(|h| !h.is_empty()))
    })?;
    narrator.ok(&format!("it holds the leader Lease kube-system/kube-controller-manager as {holder}"));
    let implemented = crate::app::controllers::implemented();
    if implemented.is_empty() {
        narrator.info("this build implements no controllers yet: the steps that need them are skipped below");
    } else {
        narrator.info(&format!("controllers in this build: {}", implemented.join(", ")));
    }
    let result = join::node_join_steps(&client, &server, narrator).and_then(|()| workloads(&client, &nodes, narrator));
    kcm.stop();
    nodes.stop();
    result
}

/// Like a kubeadm cluster either way: RBAC enforced with upstream's bootstrap policy, so the
/// controllers (each with its own service account) can do only what upstream's roles allow.
fn start_server(real_server: bool, narrator: &mut Narrator) -> Result<TestServer, Error> {
    if real_server {
        narrator.step(&format!(
            "Starting etcd and kube-apiserver (Kubernetes {}, kubeadm's flags)",
            crate::envtest::KUBERNETES_VERSION
        ));
        let plane = ControlPlane::start()?;
        narrator.info(&format!(
            "binaries: {}; etcd: {}",
            plane.assets().kube_apiserver.display(),
            plane.assets().etcd.display()
        ));
        return Ok(TestServer::Real(plane));
    }
    narrator.step("Starting the sandbox API server");
    let sandbox = Sandbox::start(SandboxOptions {
        listen: "127.0.0.1:0".parse().expect("address"),
        authorization_mode: AuthorizationMode::Rbac,
        ..SandboxOptions::default()
    })
    .map_err(sandbox_error)?;
    Ok(TestServer::Sandbox(sandbox))
}

fn workloads(client: &Client, nodes: &SimulatedNodes, narrator: &mut Narrator) -> Result<(), Error> {
    let ns = "demo";
    narrator.step("Creating namespace \"demo\"");
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))?;
    Api::<Namespace>::cluster(client).create(&namespace, &PostParams::default())?;
    ensure_default_service_account(client, ns, narrator)?;

    narrator.step("A bare Pod is scheduled and started by the simulated kubelets");
    let pods = Api::<Pod>::namespaced(client, ns);
    let mut pod = json!({"metadata": {"name": "hello", "labels": {"app": "hello"}},
        "spec": {"containers": [{"name": "hello", "image": "busybox:1.36", "command": ["sleep", "3600"]}]}});
    if !is_implemented("node-lifecycle-controller") {
        // New nodes carry node.kubernetes.io/not-ready:NoSchedule until node-lifecycle-controller
        // removes it (TaintNodesByCondition admission), so the pod must tolerate it meanwhile.
        pod["spec"]["tolerations"] = not_ready_toleration();
        narrator.info(
            "nodes keep their not-ready:NoSchedule taint without node-lifecycle-controller; the pod tolerates it",
        );
    }
    let pod: Pod = serde_json::from_value(pod)?;
    pods.create(&pod, &PostParams::default())?;
    let node = wait_for("pod hello Running", STEP_TIMEOUT, || {
        let pod = pods.get("hello")?;
        let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        Ok(running.then(|| pod.spec.and_then(|s| s.node_name).unwrap_or_default()))
    })?;
    narrator.ok(&format!("pod hello is Running on {node}"));

    let cron_started = cronjob_start(client, ns, narrator)?;
    let agents_started = sets::daemonset_start(client, nodes, ns, narrator)?;
    replicaset_steps(client, ns, narrator)?;
    deployment_steps(client, ns, narrator)?;
    garbage_collection_steps(client, ns, narrator)?;
    endpoints_steps(client, ns, narrator)?;
    job_steps(client, ns, narrator)?;
    sets::statefulset_steps(client, ns, narrator)?;
    autoscale::drain_steps(client, ns, narrator)?;
    autoscale::autoscaling_steps(client, ns, narrator)?;
    namespace_content_steps(client, narrator)?;
    node_failure_steps(client, nodes, ns, &node, narrator)?;
    if cron_started {
        cronjob_check(client, ns, narrator)?;
    }
    if agents_started {
        sets::daemonset_check(client, nodes, ns, narrator)?;
    }
    namespace_deletion_steps(client, ns, narrator)
}

/// The `default` ServiceAccount is the serviceaccount-controller's to create; without it, pod
/// admission refuses every pod.
fn ensure_default_service_account(client: &Client, ns: &str, narrator: &mut Narrator) -> Result<(), Error> {
    let accounts = Api::<ServiceAccount>::namespaced(client, ns);
    if is_implemented("serviceaccount-controller") {
        wait_for("the default ServiceAccount", STEP_TIMEOUT, || accounts.get_opt("default").map_err(Error::from))?;
        narrator.ok("serviceaccount-controller created the \"default\" ServiceAccount");
    } else {
        let account: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "default"}}))?;
        accounts.create(&account, &PostParams::default())?;
        narrator
            .info("created the \"default\" ServiceAccount by hand (serviceaccount-controller is not implemented yet)");
    }
    Ok(())
}

fn replicaset_steps(client: &Client, ns: &str, narrator: &mut Narrator) -> Result<(), Error> {
    let needed = ["replicaset-controller"];
    narrator.step("ReplicaSet cache (3 replicas) → Pods");
    if !all_implemented(&needed) {
        narrator.skip("ReplicaSet pods and scaling", &needed);
        return Ok(());
    }
    let mut replica_set = json!({"metadata": {"name": "cache"}, "spec": {"replicas": 3,
        "selector": {"matchLabels": {"app": "cache"}},
        "template": {"metadata": {"labels": {"app": "cache"}}, "spec": {"containers": [{"name": "redis", "image": "redis:7"}]}}}});
    if !is_implemented("node-lifecycle-controller") {
        replica_set["spec"]["template"]["spec"]["tolerations"] = not_ready_toleration();
    }
    let replica_set: ReplicaSet = serde_json::from_value(replica_set)?;
    let sets = Api::<ReplicaSet>::namespaced(client, ns);
    sets.create(&replica_set, &PostParams::default())?;
    wait_running_pods(client, ns, "app=cache", 3)?;
    narrator.ok("replicaset-controller created 3 pods; the simulated kubelets run them");
    sets.patch("cache", &Patch::Merge(json!({"spec": {"replicas": 1}})), &PostParams::default())?;
    wait_running_pods(client, ns, "app=cache", 1)?;
    wait_for("the ReplicaSet status", STEP_TIMEOUT, || {
        let status = sets.get("cache")?.status.unwrap_or_default();
        Ok((status.replicas == 1 && status.ready_replicas == Some(1)).then_some(()))
    })?;
    narrator.ok("scaled to 1: surplus pods deleted, status.replicas and readyReplicas report 1");
    Ok(())
}

fn deployment_steps(client: &Client, ns: &str, narrator: &mut Narrator) -> Result<(), Error> {
    let needed = ["deployment-controller", "replicaset-controller"];
    narrator.step("Deployment web (3 replicas) → ReplicaSet → Pods");
    let deployments = Api::<Deployment>::namespaced(client, ns);
    let mut deployment = json!({"metadata": {"name": "web"}, "spec": {"replicas": 3,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}}});
    if !is_implemented("node-lifecycle-controller") {
        deployment["spec"]["template"]["spec"]["tolerations"] = not_ready_toleration();
    }
    let deployment: Deployment = serde_json::from_value(deployment)?;
    deployments.create(&deployment, &PostParams::default())?;
    if !all_implemented(&needed) {
        narrator.skip("Deployment rollout, scaling, rolling update and rollback", &needed);
        return Ok(());
    }
    deployment_create_step(client, ns, narrator)?;
    deployment_scale_steps(client, ns, narrator)?;
    deployment_rollout_step(client, ns, narrator)?;
    deployment_rollback_step(client, ns, narrator)
}

/// The revision annotation deployment-controller keeps on ReplicaSets.
const REVISION: &str = "deployment.kubernetes.io/revision";

/// The ReplicaSets of Deployment `web` as (name, revision, replicas), by revision.
fn describe_web_replica_sets(client: &Client, ns: &str) -> Result<Vec<(String, String, i32)>, Error> {
    let params = ListParams { label_selector: Some("app=web".into()), ..ListParams::default() };
    let (sets, _) = Api::<ReplicaSet>::namespaced(client, ns).list_all(&params)?;
    let mut described: Vec<(String, String, i32)> = sets
        .iter()
        .map(|rs| {
            let revision = rs.metadata.annotations.as_ref().and_then(|a| a.get(REVISION)).cloned().unwrap_or_default();
            let replicas = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
            (rs.metadata.name.clone().unwrap_or_default(), revision, replicas)
        })
        .collect();
    described.sort_by_key(|(_, revision, _)| revision.parse::<i64>().unwrap_or(0));
    Ok(described)
}

/// Waits until Deployment `web` reports its rollout of the current generation complete with
/// every replica running `image`; returns the Progressing condition's message.
fn wait_web_rolled_out(client: &Client, ns: &str, replicas: i32, image: &str) -> Result<String, Error> {
    let deployments = Api::<Deployment>::namespaced(client, ns);
    let message = wait_for(&format!("Deployment web: {replicas} replicas of {image} available"), STEP_TIMEOUT, || {
        let d = deployments.get("web")?;
        let current = d.spec.as_ref().and_then(|s| s.template.spec.as_ref()).map(|s| s.containers[0].image.clone());
        let status = d.status.clone().unwrap_or_default();
        let progressing = status.conditions.iter().flatten().find(|c| c.type_ == "Progressing");
        let done = current.flatten().as_deref() == Some(image)
            && status.observed_generation == d.metadata.generation
            && status.updated_replicas == Some(replicas)
            && status.available_replicas == Some(replicas)
            && status.replicas == Some(replicas)
            && progressing.is_some_and(|c| c.reason.as_deref() == Some("NewReplicaSetAvailable"));
        Ok(done.then(|| progressing.and_then(|c| c.message.clone()).unwrap_or_default()))
    })?;
    wait_running_pods(client, ns, "app=web", usize::try_from(replicas).unwrap_or(0))?;
    Ok(message)
}

fn deployment_create_step(client: &Client, ns: &str, narrator: &mut Narrator) -> Result<(), Error> {
    let message = wait_web_rolled_out(client, ns, 3, "nginx:1.27")?;
    let sets = describe_web_replica_sets(client, ns)?;
    let [(name, revision, _)] = sets.as_slice() else {
        return Err(Error::Step(format!("Deployment web should have one ReplicaSet, has {sets:?}")));
    };
    narrator.ok(&format!("deployment-controller created ReplicaSet {name} (revision {revision}); 3 pods Running"));
    narrator.info(&format!("Progressing: {message}"));
    Ok(())
}

fn deployment_scale_steps(client: &Client, ns: &str, narrator: &mut Narrator) -> Result<(), Error> {
    let deployments = Api::<Deployment>::namespaced(client, ns);
    for replicas in [5, 2] {
        narrator.step(&format!("Scaling web to {replicas}"));
        deployments.patch("web", &Patch::Merge(json!({"spec": {"replicas": replicas}})), &PostParams::default())?;
        wait_web_rolled_out(client, ns, replicas, "nginx:1.27")?;
        narrator
            .ok(&format!("the ReplicaSet was scaled: {replicas} pods Running, status reports {replicas} available"));
    }
    Ok(())
}

fn deployment_rollout_step(client: &Client, ns: &str, narrator: &mut Narrator) -> Result<(), Error> {
    narrator.step("Rolling update of web to nginx:1.28 (maxSurge 25%, maxUnavailable 25%)");
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.28"}]}}}});
    let deployments = Api::<Deployment>::namespaced(client, ns);
    deployments.patch("web", &Patch::Strategic(patch), &PostParams::default())?;
    wait_web_rolled_out(client, ns, 2, "nginx:1.28")?;
    let sets = describe_web_replica_sets(client, ns)?;
    let [(old, _, 0), (new, revision, 2)] = sets.as_slice() else {
        return Err(Error::Step(format!(
            "after the rollout web should have an old ReplicaSet at 0 and a new one at 2: {sets:?}"
        )));
    };
    narrator.ok(&format!("new ReplicaSet {new} (revision {revision}) runs 2 pods of nginx:1.28; {old} is scaled to 0"));
    Ok(())
}

fn deployment_rollback_step(client: &Client, ns: &str, narrator: &mut Narrator) -> Result<(), Error> {
    narrator.step("Rolling web back to nginx:1.27 (as `kubectl rollout undo` does: the old template is set back)");
    let before = describe_web_replica_sets(client, ns)?;
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}}});
    let deployments = Api::<Deployment>::namespaced(client, ns);
    deployments.patch("web", &Patch::Strategic(patch), &PostParams::default())?;
    wait_web_rolled_out(client, ns, 2, "nginx:1.27")?;
    let after = wait_for("the old ReplicaSet to take revision 3", STEP_TIMEOUT, || {
        let sets = describe_web_replica_sets(client, ns)?;
        Ok((sets.last().is_some_and(|(_, revision, _)| revision == "3")).then_some(sets))
    })?;
    if after.len() != before.len() {
        return Err(Error::Step(format!("rolling back created a ReplicaSet: before {before:?}, after {after:?}")));
    }
    let (name, _, replicas) = &after[after.len() - 1];
    if Some(name) != before.first().map(|(n, _, _)| n) || *replicas != 2 {
        return Err(Error::Step(format!("the first ReplicaSet should serve the rollback with 2 replicas: {after:?}")));
    }
    narrator
        .ok(&format!("the original ReplicaSet {name} is back at 2 replicas as revision 3; no ReplicaSet was created"));
    Ok(())
}

fn node_failure_steps(
    client: &Client,
    nodes: &SimulatedNodes,
    ns: &str,
    node: &str,
    narrator: &mut Narrator,
) -> Result<(), Error> {
    let evicting = all_implemented(&EVICTION_CONTROLLERS);
    // With the controllers that move pods off a failed node, fail a node that runs some.
    let node = if evicting { failover_replica_set(client, ns, narrator)? } else { node.to_string() };
    let node = node.as_str();
    narrator.step(&format!("{node} stops heartbeating (its kubelet dies)"));
    nodes.stop_heartbeat(node);
    let outcome = failed_node_steps(client, ns, node, evicting, narrator);
    // Pods on a dead kubelet never finish terminating; the namespace deletion at the end needs it back.
    nodes.resume_heartbeat(node);
    narrator.info(&format!("the kubelet of {node} restarts and takes up its pods again"));
    outcome
}

/// What the cluster does about `node` once its kubelet has stopped.
fn failed_node_steps(
    client: &Client,
    ns: &str,
    node: &str,
    evicting: bool,
    narrator: &mut Narrator,
) -> Result<(), Error> {
    let leases = Api::<Lease>::namespaced(client, "kube-node-lease");
    let renew_time = |lease: &Lease| lease.spec.as_ref().and_then(|s| s.renew_time.clone()).map(|t| t.0.to_string());
    let before = renew_time(&leases.get(node)?);
    std::thread::sleep(Duration::from_secs(12));
    let after = renew_time(&leases.get(node)?);
    if before != after {
        return Err(Error::Step(format!("the Lease of {node} was still renewed after its heartbeat stopped")));
    }
    narrator.ok(&format!("the Lease of {node} is no longer renewed (last renewTime {})", after.unwrap_or_default()));
    let needed = ["node-lifecycle-controller", "taint-eviction-controller"];
    if !all_implemented(&needed) {
        narrator.skip(&format!("marking {node} NotReady and evicting its pods"), &needed);
        return Ok(());
    }
    wait_for(&format!("{node} to be marked Unknown"), STEP_TIMEOUT * 2, || {
        let n = Api::<Node>::all(client).get(node)?;
        Ok((node_ready(&n) == Some("Unknown")).then_some(()))
    })?;
    narrator.ok(&format!(
        "node-lifecycle-controller marked {node} Ready=Unknown (NodeStatusUnknown) after --node-monitor-grace-period (50s)"
    ));
    if evicting { node_eviction_steps(client, ns, node, narrator) } else { Ok(()) }
}

/// The controllers that move pods off a failed node.
const EVICTION_CONTROLLERS: [&str; 3] =
    ["node-lifecycle-controller", "taint-eviction-controller", "replicaset-controller"];
/// The labels of the pods the node failure moves.
const FAILOVER_SELECTOR: &str = "app=failover";
/// How long the failover pods tolerate a failed node (admission's default is 300 s).
const FAILOVER_TOLERATION_SECONDS: i64 = 5;

/// Creates the ReplicaSet `failover` whose pods tolerate a failed node for 5 s, and returns the
/// node its first pod runs on.
fn failover_replica_set(client: &Client, ns: &str, narrator: &mut Narrator) -> Result<String, Error> {
    narrator.step(&format!(
        "ReplicaSet failover (2 replicas) whose pods tolerate an unreachable node for {FAILOVER_TOLERATION_SECONDS}s"
    ));
    let toleration = |key: &str| json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": FAILOVER_TOLERATION_SECONDS});
    let replica_set = json!({"metadata": {"name": "failover"}, "spec": {"replicas": 2,
        "selector": {"matchLabels": {"app": "failover"}},
        "template": {"metadata": {"labels": {"app": "failover"}}, "spec": {
            "tolerations": [toleration("node.kubernetes.io/unreachable"), toleration("node.kubernetes.io/not-ready")],
            "containers": [{"name": "app", "image": "nginx:1.27"}]}}}});
    let replica_set: ReplicaSet = serde_json::from_value(replica_set)?;
    Api::<ReplicaSet>::namespaced(client, ns).create(&replica_set, &PostParams::default())?;
    wait_running_pods(client, ns, FAILOVER_SELECTOR, 2)?;
    let placement = failover_placement(client, ns)?;
    narrator.ok(&format!(
        "failover pods run on {}",
        placement.iter().map(|(p, n)| format!("{p}@{n}")).collect::<Vec<_>>().join(", ")
    ));
    placement.first().map(|(_, node)| node.clone()).ok_or_else(|| Error::Step("no failover pod".into()))
}

/// The live (not deleting) failover pods and their nodes, by pod name.
fn failover_placement(client: &Client, ns: &str) -> Result<Vec<(String, String)>, Error> {
    placement(client, ns, FAILOVER_SELECTOR)
}

/// The live (not deleting) pods of `selector` and their nodes, by pod name.
fn placement(client: &Client, ns: &str, selector: &str) -> Result<Vec<(String, String)>, Error> {
    let params = ListParams { label_selector: Some(selector.into()), ..ListParams::default() };
    let (pods, _) = Api::<Pod>::namespaced(client, ns).list_all(&params)?;
    let mut placement: Vec<(String, String)> = pods
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| (p.metadata.name.unwrap_or_default(), p.spec.and_then(|s| s.node_name).unwrap_or_default()))
        .collect();
    placement.sort();
    Ok(placement)
}

/// The failed node is tainted, its failover pods are evicted after their toleration and
/// replaced on healthy nodes by their ReplicaSet.
fn node_eviction_steps(client: &Client, ns: &str, node: &str, narrator: &mut Narrator) -> Result<(), Error> {
    narrator.step(&format!("{node} is tainted and its pods are evicted"));
    wait_for(&format!("the unreachable NoExecute taint on {node}"), STEP_TIMEOUT, || {
        let n = Api::<Node>::all(client).get(node)?;
        let taints = n.spec.and_then(|s| s.taints).unwrap_or_default();
        Ok(taints.iter().any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute").then_some(()))
    })?;
    narrator.ok(&format!("node-lifecycle-controller tainted {node} node.kubernetes.io/unreachable:NoExecute"));
    let pods = Api::<Pod>::namespaced(client, ns);
    let params = ListParams { label_selector: Some(FAILOVER_SELECTOR.into()), ..ListParams::default() };
    let evicted = wait_for("the failover pods of the failed node to be evicted", STEP_TIMEOUT, || {
        let (list, _) = pods.list_all(&params)?;
        let on_node: Vec<&Pod> =
            list.iter().filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)).collect();
        let all_evicted = !on_node.is_empty() && on_node.iter().all(|p| p.metadata.deletion_timestamp.is_some());
        Ok(all_evicted.then(|| on_node.iter().filter_map(|p| p.metadata.name.clone()).collect::<Vec<_>>()))
    })?;
    narrator.ok(&format!(
        "taint-eviction-controller deleted {} after its {FAILOVER_TOLERATION_SECONDS}s toleration (condition DisruptionTarget, reason DeletionByTaintManager)",
        evicted.join(", ")
    ));
    wait_running_pods(client, ns, FAILOVER_SELECTOR, 2)?;
    let placement = failover_placement(client, ns)?;
    if placement.iter().any(|(_, n)| n == node) {
        return Err(Error::Step(format!("a failover pod was placed on the failed node {node}")));
    }
    narrator.ok(&format!(
        "replicaset-controller replaced them on healthy nodes: {}",
        placement.iter().map(|(p, n)| format!("{p}@{n}")).collect::<Vec<_>>().join(", ")
    ));
    Ok(())
}

fn namespace_deletion_steps(client: &Client, ns: &str, narrator: &mut Narrator) -> Result<(), Error> {
    narrator.step("Deleting namespace \"demo\" with everything in it");
    let namespaces = Api::<Namespace>::cluster(client);
    namespaces.delete(ns, &DeleteParams::default())?;
    let phase = namespaces.get(ns)?.status.and_then(|s| s.phase).unwrap_or_default();
    let late: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "late"}}))?;
    match Api::<ServiceAccount>::namespaced(client, ns).create(&late, &PostParams::default()) {
        Err(e) if e.is_forbidden() => narrator.ok(&format!("namespace demo is {phase}; new objects are refused: {e}")),
        Err(source) => return Err(Error::TerminatingNamespace { source }),
        Ok(_) => return Err(Error::Step("a terminating namespace accepted a new object".into())),
    }
    let needed = ["namespace-controller"];
    if !all_implemented(&needed) {
        narrator.skip("emptying and removing the namespace", &needed);
        return Ok(());
    }
    wait_for("the namespace to disappear", STEP_TIMEOUT, || Ok(namespaces.get_opt(ns)?.is_none().then_some(())))?;
    narrator.ok("namespace-controller deleted its content and removed the namespace");
    Ok(())
}

/// Tolerates the taint new nodes keep until node-lifecycle-controller sees them Ready.
fn not_ready_toleration() -> serde_json::Value {
    json!([{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}])
}

fn node_ready(node: &Node) -> Option<&str> {
    let conditions = node.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| c.type_ == "Ready").map(|c| c.status.as_str())
}

fn wait_running_pods(client: &Client, ns: &str, selector: &str, count: usize) -> Result<(), Error> {
    let pods = Api::<Pod>::namespaced(client, ns);
    let params = ListParams { label_selector: Some(selector.into()), ..ListParams::default() };
    wait_for(&format!("{count} Running pods matching {selector}"), STEP_TIMEOUT, || {
        let (list, _) = pods.list_all(&params)?;
        let running = list
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        let total = list.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).count();
        Ok((running == count && total == count).then_some(()))
    })
}

/// The controller manager as a child process, its log in the work folder.
struct ControllerManager {
    process: OwnedProcess,
}

impl ControllerManager {
    fn start(binary: &Path, kubeconfig: &Path, workdir: &Path) -> Result<ControllerManager, Error> {
        let log = workdir.join("kube-controller-manager.log");
        // The secure port on loopback, on a free port, so the demo never clashes with a real one.
        let port =
            std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(0);
        let mut command = Command::new(binary);
        command
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args(["--leader-elect=true", "--v=2", "--bind-address=127.0.0.1"])
            // kubeadm's selection: the bootstrap-token controllers are off by default.
            .arg("--controllers=*,bootstrapsigner,tokencleaner")
            .arg(format!("--secure-port={port}"))
            // As kubeadm runs it: each controller with its own service account's credentials; the
            // server's service-account key and CA, written beside the kubeconfigs.
            .arg("--use-service-account-credentials=true")
            .arg(format!("--service-account-private-key-file={}", kubeconfig.with_file_name("sa.key").display()))
            .arg(format!("--root-ca-file={}", kubeconfig.with_file_name("ca.crt").display()))
            // kubeadm signs CSRs with the cluster CA.
            .arg(format!("--cluster-signing-cert-file={}", kubeconfig.with_file_name("ca.crt").display()))
            .arg(format!("--cluster-signing-key-file={}", kubeconfig.with_file_name("ca.key").display()));
        let process = OwnedProcess::spawn("kube-controller-manager", command, &log)
            .map_err(|source| Error::ControllerManager { source })?;
        Ok(ControllerManager { process })
    }

    fn wait_for_log(&mut self, needle: &str, timeout: Duration) -> Result<(), Error> {
        let log = self.process.log_path().to_path_buf();
        wait_for(&format!("kube-controller-manager to log {needle:?}"), timeout, || {
            if let Some(status) = self.process.exited() {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(Error::ManagerExited { status, output: text });
            }
            Ok(std::fs::read_to_string(&log).unwrap_or_default().contains(needle).then_some(()))
        })
    }

    fn stop(&mut self) {
        self.process.stop(Duration::from_secs(10));
    }
}

// ---------------------------------------------------------------------------------------------
// Garbage collection, endpoints following pods, and a namespace deleted with its content.
// ---------------------------------------------------------------------------------------------

/// Pods matching `selector` that are not being deleted, by name.
fn live_pod_names(client: &Client, ns: &str, selector: &str) -> Result<Vec<String>, Error> {
    let params = ListParams { label_selector: Some(selector.into()), ..ListParams::default() };
    let (pods, _) = Api::<Pod>::namespaced(client, ns).list_all(&params)?;
    let live = pods.into_iter().filter(|p| p.metadata.deletion_timestamp.is_none());
    let mut names: Vec<String> = live.filter_map(|p| p.metadata.name).collect();
    names.sort();
    Ok(names)
}

/// A Deployment of `replicas` busybox pods labelled `app: <name>`.
fn deployment_manifest(name: &str, replicas: i32) -> Result<Deployment, Error> {
    let mut deployment = json!({"metadata": {"name": name}, "spec": {"replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "3600"]}]}}}});
    if !is_implemented("node-lifecycle-controller") {
        deployment["spec"]["template"]["spec"]["tolerations"] = not_ready_toleration();
    }
    serde_json::from_value(deployment).map_err(Error::from)
}

/// Deletes Deployment `worker` in the background: the garbage collector removes its
/// ReplicaSet, then the pods; then an orphaning delete of ReplicaSet `cache` leaves its pod.
fn garbage_collection_steps(client: &Client, ns: &str, narrator: &mut Narrator) -> Result<(), Error> {
    let needed = ["garbage-collector-controller", "deployment-controller", "replicaset-controller"];
    narrator.step("Garbage collection: deleting Deployment worker (cascade: background)");
    if !all_implemented(&needed) {
        narrator.skip("cascading and orphaning deletes", &needed);
        return Ok(());
    }
    let deployments = Api::<Deployment>::namespaced(client, ns);
    deployments.create(&deployment_manifest("worker", 2)?, &PostParams::default())?;
    wait_running_pods(client, ns, "app=worker", 2)?;
    let sets = Api::<ReplicaSet>::namespaced(client, ns);
    let by_label = ListParams { label_selector: Some("app=worker".into()), ..ListParams::default() };
    let (owned, _) = sets.list_all(&by_label)?;
    let set_names: Vec<String> = owned.into_iter().filter_map(|rs| rs.metadata.name).collect();
    let pods = live_pod_names(client, ns, "app=worker")?;
    narrator.info(&format!("worker owns ReplicaSet {} which owns pods {}", set_names.join(", "), pods.join(", ")));
    let background =
        DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..DeleteParams::default() };
    deployments.delete("worker", &background)?;
    wait_for("the ReplicaSets and pods of worker to go", STEP_TIMEOUT, || {
        let (left, _) = sets.list_all(&by_label)?;
        let (pods, _) = Api::<Pod>::namespaced(client, ns).list_all(&by_label)?;
        Ok((left.is_empty() && pods.is_empty()).then_some(()))
    })?;
    narrator.ok("garbage-collector-controller deleted the ReplicaSet, then its pods, once their owner was gone");

    narrator.step("Deleting ReplicaSet cache with cascade: orphan");
    let cache_pods = live_pod_names(client, ns, "app=cache")?;
    let orphan = DeleteParams { propagation_policy: Some(PropagationPolicy::Orphan), ..DeleteParams::default() };
    sets.delete("cache", &orphan)?;
    let pods = Api::<Pod>::namespaced(client, ns);
    wait_for("ReplicaSet cache gone and its pods released", STEP_TIMEOUT, || {
        let gone = sets.get_opt("cache")?.is_none();
        let mut released = true;
        for name in &cache_pods {
            let pod = pods.get(name)?;
            released &= pod.metadata.owner_references.as_ref().is_none_or(|refs| refs.is_empty());
        }
        Ok((gone && released).then_some(()))
    })?;
    narrator.ok(&format!(
        "the ReplicaSet is gone; its pods {} keep running with no owner (the orphan finalizer ran first)",
        cache_pods.join(", ")
    ));
    let by_cache = ListParams { label_selector: Some("app=cache".into()), ..ListParams::default() };
    pods.delete_collection(&by_cache, &DeleteParams::default())?;
    wait_for("the orphaned pods to go", STEP_TIMEOUT, || {
        let (left, _) = pods.list_all(&by_cache)?;
        Ok(left.is_empty().then_some(()))
    })?;
    narrator.ok("the orphaned pods were deleted by hand");
    Ok(())
}

/// A Job runs to completion; a Job whose pods fail (scripted through the simulated kubelets'
/// `kcm-sandbox.dev/exit-codes` annotation) is retried after upstream's 10 s backoff and fails.
fn job_steps(client: &Client, ns: &str, narrator: &mut Narrator) -> Result<(), Error> {
    let needed = ["job-controller"];
    narrator.step("Job pi (3 completions, 2 at a time) → Pods run to completion");
    if !all_implemented(&needed) {
        narrator.skip("Jobs", &needed);
        return Ok(());
    }
    let jobs = Api::<Job>::namespaced(client, ns);
    let job = |name: &str, spec: serde_json::Value, exit_codes: &str| -> Result<Job, Error> {
        let mut spec = spec;
        spec["template"] = json!({"metadata": {"annotations": {"kcm-sandbox.dev/exit-codes": exit_codes,
            "kcm-sandbox.dev/run-seconds": "1"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}});
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).map_err(Error::from)
    };
    jobs.create(&job("pi", json!({"completions": 3, "parallelism": 2}), "0")?, &PostParams::default())?;
    let done = wait_job_condition(&jobs, "pi", "Complete")?;
    let (reason, _) = job_condition(&done, "Complete");
    let succeeded = done.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0);
    narrator.ok(&format!(
        "job-controller ran 3 pods, at most 2 at a time: succeeded {succeeded}, condition Complete ({reason})"
    ));

    narrator.step("Job flaky (backoffLimit 1) whose pods exit 1 → retried after a 10 s backoff, then failed");
    jobs.create(&job("flaky", json!({"backoffLimit": 1}), "1")?, &PostParams::default())?;
    let failed = wait_job_condition(&jobs, "flaky", "Failed")?;
    let (reason, message) = job_condition(&failed, "Failed");
    let count = failed.status.as_ref().and_then(|s| s.failed).unwrap_or(0);
    narrator.ok(&format!("{count} pods failed; condition Failed ({reason}): \"{message}\""));
    Ok(())
}

/// A CronJob every minute, created early so that its first tick comes while the other steps
/// run; true when cronjob-controller runs.
fn cronjob_start(client: &Client, ns: &str, narrator: &mut Narrator) -> Result<bool, Error> {
    let needed = ["cronjob-controller", "job-controller"];
    narrator.step("CronJob tick (\"* * * * *\"): its first Job comes at the next minute, checked near the end");
    if !all_implemented(&needed) {
        narrator.skip("CronJobs", &needed);
        return Ok(false);
    }
    let cron_job: CronJob = serde_json::from_value(json!({"metadata": {"name": "tick"}, "spec": {
        "schedule": "* * * * *", "concurrencyPolicy": "Forbid",
        "jobTemplate": {"spec": {"template": {"metadata": {"annotations": {"kcm-sandbox.dev/run-seconds": "1"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "date", "image": "busybox:1.36"}]}}}}}}))?;
    Api::<CronJob>::namespaced(client, ns).create(&cron_job, &PostParams::default())?;
    narrator.ok("created; cronjob-controller requeues it for the next minute (no polling)");
    Ok(true)
}

/// The CronJob created at the start has fired: a Job named after its minute ran to completion.
fn cronjob_check(client: &Client, ns: &str, narrator: &mut Narrator) -> Result<(), Error> {
    narrator.step("CronJob tick has fired");
    let cron_jobs = Api::<CronJob>::namespaced(client, ns);
    let jobs = Api::<Job>::namespaced(client, ns);
    let (job, succeeded) = wait_for("a completed run of CronJob tick", STEP_TIMEOUT * 2, || {
        let status = cron_jobs.get("tick")?.status.unwrap_or_default();
        let Some(succeeded) = status.last_successful_time else { return Ok(None) };
        let (listed, _) = jobs.list_all(&ListParams::default())?;
        let completed = listed.into_iter().find(|j| {
            j.metadata.name.as_deref().is_some_and(|n| n.starts_with("tick-"))
                && !job_condition(j, "Complete").0.is_empty()
        });
        Ok(completed.map(|job| (job, succeeded.0)))
    })?;
    let annotations = job.metadata.annotations.clone().unwrap_or_default();
    let scheduled = annotations.get("batch.kubernetes.io/cronjob-scheduled-timestamp").cloned().unwrap_or_default();
    narrator.ok(&format!(
        "cronjob-controller created Job {} for {scheduled}; it completed; lastSuccessfulTime {succeeded}",
        job.metadata.name.unwrap_or_default()
    ));
    Ok(())
}

/// Waits (longer than a step: a retry waits out its backoff) for condition `type_` of Job `name`.
fn wait_job_condition(jobs: &Api<Job>, name: &str, type_: &str) -> Result<Job, Error> {
    wait_for(&format!("Job {name} {type_}"), STEP_TIMEOUT * 2, || {
        let job = jobs.get(name)?;
        let conditions = job.status.as_ref().and_then(|s| s.conditions.as_ref());
        let met = conditions.is_some_and(|c| c.iter().any(|c| c.type_ == type_ && c.status == "True"));
        Ok(met.then_some(job))
    })
}

/// The reason and message of condition `type_` of `job`.
fn job_condition(job: &Job, type_: &str) -> (String, String) {
    let conditions = job.status.as_ref().and_then(|s| s.conditions.as_ref()).into_iter().flatten();
    let found = conditions.into_iter().find(|c| c.type_ == type_);
    let text = |f: Option<&String>| f.cloned().unwrap_or_default();
    (text(found.and_then(|c| c.reason.as_ref())), text(found.and_then(|c| c.message.as_ref())))
}

/// The ready addresses of Endpoints `name` and of its EndpointSlices, each sorted.
fn service_addresses(client: &Client, ns: &str, name: &str) -> Result<(Vec<String>, Vec<String>), Error> {
    let endpoints = Api::<Endpoints>::namespaced(client, ns).get_opt(name)?;
    let subsets = endpoints.and_then(|e| e.subsets).unwrap_or_default();
    let mut from_endpoints: Vec<String> =
        subsets.iter().flat_map(|s| s.addresses.iter().flatten()).map(|a| a.ip.clone()).collect();
    from_endpoints.sort();
    let params =
        ListParams { label_selector: Some(format!("kubernetes.io/service-name={name}")), ..ListParams::default() };
    let (slices, _) = Api::<EndpointSlice>::namespaced(client, ns).list_all(&params)?;
    let ready = slices
        .iter()
        .flat_map(|s| s.endpoints.iter().flatten())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true));
    let mut from_slices: Vec<String> = ready.flat_map(|e| e.addresses.iter().cloned()).collect();
    from_slices.sort();
    Ok((from_endpoints, from_slices))
}

/// The pod IPs of the running pods matching `selector`, sorted.
fn running_pod_ips(client: &Client, ns: &str, selector: &str) -> Result<Vec<String>, Error> {
    let params = ListParams { label_selector: Some(selector.into()), ..ListParams::default() };
    let (pods, _) = Api::<Pod>::namespaced(client, ns).list_all(&params)?;
    let running = pods.into_iter().filter(|p| p.metadata.deletion_timestamp.is_none());
    let mut ips: Vec<String> = running
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .filter_map(|p| p.status.and_then(|s| s.pod_ip))
        .collect();
    ips.sort();
    Ok(ips)
}

/// Waits until Endpoints and EndpointSlices of Service `web` list exactly the running web pods.
fn wait_web_addresses(client: &Client, ns: &str, count: usize) -> Result<Vec<String>, Error> {
    wait_for(&format!("{count} ready addresses for Service web"), STEP_TIMEOUT, || {
        let ips = running_pod_ips(client, ns, "app=web")?;
        let (endpoints, slices) = service_addresses(client, ns, "web")?;
        Ok((ips.len() == count && endpoints == ips && slices == ips).then_some(ips))
    })
}

/// Service `web` selects the Deployment's pods; its Endpoints and EndpointSlices follow them.
fn endpoints_steps(client: &Client, ns: &str, narrator: &mut Narrator) -> Result<(), Error> {
    let needed = ["endpoints-controller", "endpointslice-controller", "deployment-controller", "replicaset-controller"];
    narrator.step("Service web selecting the web pods → Endpoints and EndpointSlices");
    if !all_implemented(&needed) {
        narrator.skip("Service endpoints following pods", &needed);
        return Ok(());
    }
    let service: Service = serde_json::from_value(json!({"metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 80}]}}))?;
    Api::<Service>::namespaced(client, ns).create(&service, &PostParams::default())?;
    let replicas = Api::<Deployment>::namespaced(client, ns).get("web")?.spec.and_then(|s| s.replicas).unwrap_or(1);
    let count = usize::try_from(replicas).unwrap_or(0);
    let ips = wait_web_addresses(client, ns, count)?;
    narrator.ok(&format!("Endpoints web and its EndpointSlice list the {count} ready pods: {}", ips.join(", ")));

    narrator.step("Scaling web to 4: new pods join the Service as they become ready");
    Api::<Deployment>::namespaced(client, ns).patch(
        "web",
        &Patch::Merge(json!({"spec": {"replicas": 4}})),
        &PostParams::default(),
    )?;
    let ips = wait_web_addresses(client, ns, 4)?;
    narrator.ok(&format!("Endpoints web and its EndpointSlice now list 4 addresses: {}", ips.join(", ")));
    Ok(())
}

/// Namespace `shop` with a Deployment, ConfigMaps and a Service is deleted: Terminating, then
/// its content is removed by namespace-controller, then the namespace goes.
fn namespace_content_steps(client: &Client, narrator: &mut Narrator) -> Result<(), Error> {
    let ns = "shop";
    let needed = ["namespace-controller", "deployment-controller", "replicaset-controller"];
    narrator.step("Namespace shop with a Deployment, ConfigMaps and a Service, deleted with all of it");
    if !all_implemented(&needed) {
        narrator.skip("deleting namespace shop with its content", &needed);
        return Ok(());
    }
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))?;
    let namespaces = Api::<Namespace>::cluster(client);
    namespaces.create(&namespace, &PostParams::default())?;
    ensure_default_service_account(client, ns, narrator)?;
    Api::<Deployment>::namespaced(client, ns).create(&deployment_manifest("shop", 2)?, &PostParams::default())?;
    for name in ["settings", "feature-flags"] {
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}}))?;
        Api::<ConfigMap>::namespaced(client, ns).create(&cm, &PostParams::default())?;
    }
    let service: Service = serde_json::from_value(json!({"metadata": {"name": "shop"},
        "spec": {"selector": {"app": "shop"}, "ports": [{"port": 80}]}}))?;
    Api::<Service>::namespaced(client, ns).create(&service, &PostParams::default())?;
    wait_running_pods(client, ns, "app=shop", 2)?;
    narrator.ok("shop holds Deployment shop (2 pods Running), ConfigMaps settings and feature-flags, Service shop");

    namespaces.delete(ns, &DeleteParams::default())?;
    let phase = namespaces.get(ns)?.status.and_then(|s| s.phase).unwrap_or_default();
    narrator.ok(&format!("namespace shop is {phase}; namespace-controller starts 5 s later"));
    let mut reported = None;
    wait_for("the content of namespace shop to be removed", STEP_TIMEOUT, || {
        let current = namespaces.get_opt(ns)?;
        let conditions = current.and_then(|n| n.status).and_then(|s| s.conditions).unwrap_or_default();
        if let Some(remaining) =
            conditions.iter().find(|c| c.type_ == "NamespaceContentRemaining" && c.status == "True")
        {
            reported = remaining.message.clone();
        }
        Ok(namespace_is_empty(client, ns)?.then_some(()))
    })?;
    if let Some(message) = reported {
        narrator.info(&format!("NamespaceContentRemaining: {message}"));
    }
    narrator.ok("its Deployment, ReplicaSet, pods, ConfigMaps, Service and ServiceAccount are gone");
    wait_for("namespace shop to disappear", STEP_TIMEOUT, || Ok(namespaces.get_opt(ns)?.is_none().then_some(())))?;
    narrator.ok("the kubernetes finalizer was removed through /finalize and the namespace is gone");
    Ok(())
}

/// Whether the kinds the demo put in `ns` are all gone.
fn namespace_is_empty(client: &Client, ns: &str) -> Result<bool, Error> {
    let all = ListParams::default();
    Ok(Api::<Pod>::namespaced(client, ns).list(&all)?.items.is_empty()
        && Api::<Deployment>::namespaced(client, ns).list(&all)?.items.is_empty()
        && Api::<ReplicaSet>::namespaced(client, ns).list(&all)?.items.is_empty()
        && Api::<ConfigMap>::namespaced(client, ns).list(&all)?.items.is_empty()
        && Api::<Service>::namespaced(client, ns).list(&all)?.items.is_empty()
        && Api::<ServiceAccount>::namespaced(client, ns).list(&all)?.items.is_empty())
}
