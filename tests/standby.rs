//! A standby writes nothing: while another process holds the Lease, the real binary's
//! controllers neither create objects nor record Events (the garbage collector's graph, which
//! reports invalid owner references as Events, runs only while leading), and once the Lease is
//! released they catch up. On both backends.
#![cfg(feature = "sandbox")]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Pod, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kcm::client::{Api, Client, ClientOptions, ListParams, PostParams};
use kcm::sandbox::nodes::SimulatedNodes;
use serde_json::json;

mod harness;

use harness::{Backend, TestServer};

const BINARY: &str = env!("CARGO_BIN_EXE_kube-controller-manager");
const DEADLINE: Duration = Duration::from_secs(60);

struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn from<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).unwrap()
}

fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(started.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
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
    let server = TestServer::start(backend).unwrap();
    let dir = std::env::temp_dir().join(format!("kcm-standby-{}-{backend:?}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (_, kubeconfig) = server.write_kubeconfigs(&dir.join("admin.conf")).unwrap();
    let admin = Client::new(server.admin_config(), ClientOptions::default()).unwrap();
    let _nodes = SimulatedNodes::start(server.admin_config(), vec!["node-1".into()], Default::default()).unwrap();
    let post = PostParams::default();
    // The serviceaccount controller stands by too: pods need the account for admission.
    let account = from::<ServiceAccount>(json!({"metadata": {"name": "default"}}));
    Api::<ServiceAccount>::namespaced(&admin, "default").create(&account, &post).unwrap();

    // Another process holds the Lease for an hour.
    let leases = Api::<Lease>::namespaced(&admin, "kube-system");
    let now = serde_json::to_value(MicroTime(jiff::Timestamp::now())).unwrap();
    let held = json!({"metadata": {"name": "kube-controller-manager"}, "spec": {
        "holderIdentity": "elsewhere", "leaseDurationSeconds": 3600,
        "acquireTime": now, "renewTime": now, "leaseTransitions": 0}});
    leases.create(&from::<Lease>(held), &post).unwrap();

    // Work the controllers would do at once: a ReplicaSet without pods, and a dependent whose
    // owner lives in another namespace (the garbage collector reports it with an Event).
    let replica_sets = Api::<ReplicaSet>::namespaced(&admin, "default");
    let rs = json!({"metadata": {"name": "web"}, "spec": {"replicas": 1,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
                     "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}});
    replica_sets.create(&from::<ReplicaSet>(rs), &post).unwrap();
    Api::<Namespace>::cluster(&admin).create(&from(json!({"metadata": {"name": "other"}})), &post).unwrap();
    let owner =
        Api::<ConfigMap>::namespaced(&admin, "other").create(&from(json!({"metadata": {"name": "owner"}})), &post);
    let owner_uid = owner.unwrap().metadata.uid.unwrap();
    let dependent = json!({"metadata": {"name": "dependent", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_uid}]}});
    Api::<ConfigMap>::namespaced(&admin, "default").create(&from(dependent), &post).unwrap();

    let log = dir.join("kcm.log");
    let mut kubeadm_flags = Vec::new();
    if backend == Backend::Real {
        // kubeadm's: with RBAC on, each controller acts as its own ServiceAccount.
        kubeadm_flags.push("--use-service-account-credentials=true".to_string());
        kubeadm_flags.push(format!("--service-account-private-key-file={}", dir.join("sa.key").display()));
        kubeadm_flags.push(format!("--root-ca-file={}", dir.join("ca.crt").display()));
    }
    let _process = Process(
        Command::new(BINARY)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args(&kubeadm_flags)
            .args(["--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s"])
            .args(["--leader-elect-retry-period=500ms", "--secure-port=0", "-v=2"])
            .stderr(std::fs::File::create(&log).unwrap())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    eventually("the candidate to wait for the Lease", || log_text().contains("waiting to acquire").then_some(()));
    // Several retry periods as a standby, long enough for a leader to have acted on both.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(pods_of(&admin), 0, "a standby created pods");
    assert_eq!(invalid_owner_events(&admin), 0, "a standby recorded Events:\n{}", log_text());

    // Released (as a leader does on SIGTERM): this process takes over and does the work.
    let mut lease = leases.get("kube-controller-manager").unwrap();
    let spec = lease.spec.as_mut().unwrap();
    spec.holder_identity = Some(String::new());
    spec.lease_duration_seconds = Some(1);
    leases.replace("kube-controller-manager", &lease, &post).unwrap();
    eventually("the ReplicaSet's pod", || (pods_of(&admin) == 1).then_some(()));
    eventually("the OwnerRefInvalidNamespace Event", || (invalid_owner_events(&admin) > 0).then_some(()));
    let _ = std::fs::remove_dir_all(dir);
}
