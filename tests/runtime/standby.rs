//! A standby writes nothing and acts as no controller: while another process holds the Lease,
//! the real binary's controllers neither create objects nor record Events (the garbage
//! collector's graph, which reports invalid owner references as Events, runs only while
//! leading), and with `--use-service-account-credentials` no controller makes a request as its
//! own ServiceAccount (nor has that account created) before this process leads, as upstream,
//! which builds its controllers only once it leads. Once the Lease is released they catch up.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Pod, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kcm::client::{Api, Client, ClientOptions, ListParams, PostParams};
use kcm::runtime::controller::SERVICE_ACCOUNT_NAMESPACE;
use kcm_sandbox::sandbox::nodes::SimulatedNodes;
use serde_json::json;

use crate::harness;

use harness::{Backend, TestServer, eventually, from};

const BINARY: &str = env!("CARGO_BIN_EXE_kube-controller-manager");
/// Several retry periods as a standby: long enough for a leader to have acted, and for anything
/// a standby's controllers started in the background to have made its first requests.
const AS_A_STANDBY: Duration = Duration::from_secs(4);

struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An API server of `backend`, kubeadm's files for a controller manager in a directory of the
/// test's own, and an admin client.
struct Bed {
    server: TestServer,
    admin: Client,
    dir: PathBuf,
    /// controller-manager.conf (`system:kube-controller-manager`).
    kubeconfig: PathBuf,
}

impl Bed {
    fn start(backend: Backend, test: &str) -> Bed {
        let server = TestServer::start(backend).expect("the API server starts");
        let dir = std::env::temp_dir().join(format!("kcm-{test}-{}-{}", backend_tag(backend), std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (_, kubeconfig) = server.write_kubeconfigs(&dir.join("admin.conf")).unwrap();
        let admin = Client::new(server.admin_config(), ClientOptions::default()).unwrap();
        Bed { server, admin, dir, kubeconfig }
    }

    /// Another process holds the Lease for an hour.
    fn hold_lease_elsewhere(&self) {
        let now = serde_json::to_value(MicroTime(jiff::Timestamp::now())).unwrap();
        let held = json!({"metadata": {"name": "kube-controller-manager"}, "spec": {
            "holderIdentity": "elsewhere", "leaseDurationSeconds": 3600,
            "acquireTime": now, "renewTime": now, "leaseTransitions": 0}});
        self.leases().create(&from::<Lease>(held), &PostParams::default()).unwrap();
    }

    /// Released, as a leader does on SIGTERM: a candidate takes over within a retry period.
    fn release_lease(&self) {
        let mut lease = self.leases().get("kube-controller-manager").unwrap();
        let spec = lease.spec.as_mut().unwrap();
        spec.holder_identity = Some(String::new());
        spec.lease_duration_seconds = Some(1);
        self.leases().replace("kube-controller-manager", &lease, &PostParams::default()).unwrap();
    }

    fn leases(&self) -> Api<Lease> {
        Api::namespaced(&self.admin, "kube-system")
    }

    /// The real binary as a candidate with short election terms and `flags`. On the real
    /// server each controller acts as its own ServiceAccount (RBAC is on, as kubeadm's).
    fn start_candidate(&self, flags: &[&str]) -> Candidate {
        let log = self.dir.join("kcm.log");
        let mut command = Command::new(BINARY);
        command
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .args(["--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s"])
            .args(["--leader-elect-retry-period=500ms", "--secure-port=0", "-v=2"])
            .args(flags);
        if self.server.backend() == Backend::Real && !flags.contains(&"--use-service-account-credentials=true") {
            command.arg("--use-service-account-credentials=true");
        }
        let child = command.stderr(std::fs::File::create(&log).unwrap()).stdout(Stdio::null()).spawn().unwrap();
        let candidate = Candidate { process: Process(child), log };
        eventually("the candidate to wait for the Lease", || {
            candidate.log_text().contains("waiting to acquire").then_some(())
        });
        candidate
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn backend_tag(backend: Backend) -> &'static str {
    match backend {
        Backend::Sandbox => "sandbox",
        Backend::Real => "real",
    }
}

struct Candidate {
    process: Process,
    log: PathBuf,
}

impl Candidate {
    fn log_text(&self) -> String {
        read(&self.log)
    }

    /// The exit code, once the process has exited.
    fn exited(&mut self) -> Option<Option<i32>> {
        self.process.0.try_wait().unwrap().map(|status| status.code())
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn pods_of(client: &Client) -> usize {
    Api::<Pod>::namespaced(client, "default").list(&ListParams::default()).unwrap().items.len()
}

fn invalid_owner_events(client: &Client) -> usize {
    let events = Api::<Event>::namespaced(client, "default").list(&ListParams::default()).unwrap().items;
    events.iter().filter(|e| e.reason.as_deref() == Some("OwnerRefInvalidNamespace")).count()
}

on_both_backends!(a_standby_writes_nothing_until_it_leads);
fn a_standby_writes_nothing_until_it_leads(backend: Backend) {
    let bed = Bed::start(backend, "standby-writes");
    let admin = &bed.admin;
    let _nodes = SimulatedNodes::start(bed.server.admin_config(), vec!["node-1".into()], Default::default()).unwrap();
    let post = PostParams::default();
    // The serviceaccount controller stands by too: pods need the account for admission.
    let account = from::<ServiceAccount>(json!({"metadata": {"name": "default"}}));
    Api::<ServiceAccount>::namespaced(admin, "default").create(&account, &post).unwrap();
    bed.hold_lease_elsewhere();

    // Work the controllers would do at once: a ReplicaSet without pods, and a dependent whose
    // owner lives in another namespace (the garbage collector reports it with an Event).
    let replica_sets = Api::<ReplicaSet>::namespaced(admin, "default");
    let rs = json!({"metadata": {"name": "web"}, "spec": {"replicas": 1,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
                     "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}});
    replica_sets.create(&from::<ReplicaSet>(rs), &post).unwrap();
    Api::<Namespace>::cluster(admin).create(&from(json!({"metadata": {"name": "other"}})), &post).unwrap();
    let owner =
        Api::<ConfigMap>::namespaced(admin, "other").create(&from(json!({"metadata": {"name": "owner"}})), &post);
    let owner_uid = owner.unwrap().metadata.uid.unwrap();
    let dependent = json!({"metadata": {"name": "dependent", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_uid}]}});
    Api::<ConfigMap>::namespaced(admin, "default").create(&from(dependent), &post).unwrap();

    let candidate = bed.start_candidate(&[]);
    std::thread::sleep(AS_A_STANDBY);
    assert_eq!(pods_of(admin), 0, "a standby created pods");
    assert_eq!(invalid_owner_events(admin), 0, "a standby recorded Events:\n{}", candidate.log_text());

    bed.release_lease();
    eventually("the ReplicaSet's pod", || (pods_of(admin) == 1).then_some(()));
    eventually("the OwnerRefInvalidNamespace Event", || (invalid_owner_events(admin) > 0).then_some(()));
}

/// The flags of [`a_standby_acts_as_no_controller_until_it_leads`]: every default controller,
/// node IPAM too, each as its own ServiceAccount.
const AS_CONTROLLERS: &[&str] =
    &["--use-service-account-credentials=true", "--allocate-node-cidrs=true", "--cluster-cidr=10.244.0.0/16"];

/// The ServiceAccounts the controllers the binary starts with `flags` act as.
fn controller_accounts(flags: &[&str]) -> BTreeSet<&'static str> {
    let options = match kcm::app::flags::parse(flags.iter().map(|f| (*f).into())) {
        Ok(kcm::app::flags::Command::Run(options)) => options,
        other => panic!("unexpected {other:?}"),
    };
    let started = kcm::app::controllers::built().into_iter().filter(|d| options.starts_controller(d.name));
    started.filter_map(|d| d.service_account).collect()
}

fn existing_accounts(admin: &Client) -> BTreeSet<String> {
    let accounts = Api::<ServiceAccount>::namespaced(admin, SERVICE_ACCOUNT_NAMESPACE);
    let items = accounts.list(&ListParams::default()).unwrap().items;
    items.into_iter().filter_map(|a| a.metadata.name).collect()
}

/// The requests the sandbox saw made as a controller's ServiceAccount.
fn requests_as_controllers(bed: &Bed) -> Vec<String> {
    let Some(sandbox) = bed.server.sandbox() else { return Vec::new() };
    let prefix = format!("system:serviceaccount:{SERVICE_ACCOUNT_NAMESPACE}:");
    let entries = sandbox.audit().entries().into_iter().filter(|e| e.user.starts_with(&prefix));
    entries.map(|e| format!("{} {} {}/{} {}", e.user, e.verb, e.resource, e.subresource, e.name)).collect()
}

on_both_backends!(a_standby_acts_as_no_controller_until_it_leads);
fn a_standby_acts_as_no_controller_until_it_leads(backend: Backend) {
    let bed = Bed::start(backend, "standby-accounts");
    let wanted = controller_accounts(AS_CONTROLLERS);
    for account in ["generic-garbage-collector", "namespace-controller", "node-controller", "replicaset-controller"] {
        assert!(wanted.contains(account), "{account} is among the started controllers' accounts: {wanted:?}");
    }
    // A node for node IPAM's first list, a namespace for the namespace controller.
    let node = json!({"metadata": {"name": "node-1"}});
    Api::<k8s_openapi::api::core::v1::Node>::all(&bed.admin).create(&from(node), &PostParams::default()).unwrap();
    bed.hold_lease_elsewhere();

    // The controllers are built and their informers warm up (as the controller manager's own
    // identity) before the candidate waits for the Lease.
    let candidate = bed.start_candidate(AS_CONTROLLERS);
    std::thread::sleep(AS_A_STANDBY);
    let existing = existing_accounts(&bed.admin);
    let early: Vec<&&str> = wanted.iter().filter(|a| existing.contains(**a)).collect();
    assert!(early.is_empty(), "a standby created controller accounts {early:?}:\n{}", candidate.log_text());
    let requests = requests_as_controllers(&bed);
    assert!(requests.is_empty(), "a standby made requests as controllers: {requests:#?}");

    bed.release_lease();
    let missing = || {
        let existing = existing_accounts(&bed.admin);
        wanted.iter().filter(|a| !existing.contains(**a)).copied().collect::<Vec<_>>()
    };
    eventually("every started controller's account", || missing().is_empty().then_some(()));
    if backend == Backend::Sandbox {
        eventually("requests as the controllers", || (!requests_as_controllers(&bed).is_empty()).then_some(()));
    }
}

on_both_backends!(a_controller_that_cannot_start_ends_the_leader_not_the_standby);
fn a_controller_that_cannot_start_ends_the_leader_not_the_standby(backend: Backend) {
    let bed = Bed::start(backend, "standby-start-error");
    // A node whose block lies outside the cluster CIDR: node IPAM cannot start.
    let node = json!({"metadata": {"name": "stray"}, "spec": {"podCIDR": "192.168.0.0/24",
        "podCIDRs": ["192.168.0.0/24"]}});
    Api::<k8s_openapi::api::core::v1::Node>::all(&bed.admin).create(&from(node), &PostParams::default()).unwrap();
    bed.hold_lease_elsewhere();

    // A standby does not start the controller, so it does not find out.
    let mut candidate = bed.start_candidate(&["--allocate-node-cidrs=true", "--cluster-cidr=10.244.0.0/16"]);
    std::thread::sleep(AS_A_STANDBY);
    assert_eq!(candidate.exited(), None, "a standby gave up:\n{}", candidate.log_text());

    // Leading, it starts node IPAM, which finds the stray block: the process ends with the error.
    bed.release_lease();
    let code = eventually("the leader to exit", || candidate.exited());
    let log = candidate.log_text();
    assert_eq!(code, Some(1), "{log}");
    let error = "error starting controllers: starting node-ipam-controller: failed to mark cidr[192.168.0.0/24]";
    assert!(log.contains(error), "{log}");
}
