//! The controller runtime end to end against both backends: a test controller built from a
//! descriptor gets its informer, its queue fed by events, worker threads calling its sync,
//! rate-limited retries of failures, and a clean stop.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kcm::app::controllers::{ControllerDescriptor, named};
use kcm::app::flags::Options;
use kcm::client::{Api, Client, ClientOptions, Patch, PostParams};
use kcm::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult, enqueue_object_keys};
use kcm::runtime::informer::{Informer, split_key};
use kcm::runtime::workqueue::WorkQueue;
use kcm_sandbox::sandbox::server::{Sandbox, SandboxOptions};
use parking_lot::Mutex;
use serde_json::json;

use crate::harness;

use harness::{Backend, TestServer};

/// Marks every ConfigMap it sees with an annotation; the one named `flaky` fails once first.
struct Marker {
    configmaps: Arc<Informer<ConfigMap>>,
    client: Client,
    failed_once: Mutex<bool>,
}

const MARK: &str = "example.com/seen-by";

impl Marker {
    fn sync(&self, key: &str) -> SyncResult {
        let (namespace, name) = split_key(key);
        let Some(configmap) = self.configmaps.store().get(key) else { return Ok(()) };
        if name == "flaky" {
            let mut failed = self.failed_once.lock();
            if !*failed {
                *failed = true;
                return Err(SyncError::failed("first attempt fails on purpose"));
            }
        }
        let annotations = configmap.metadata.annotations.clone().unwrap_or_default();
        if annotations.contains_key(MARK) {
            return Ok(());
        }
        let patch = Patch::Merge(json!({"metadata": {"annotations": {MARK: self.client.user_agent()}}}));
        Api::<ConfigMap>::namespaced(&self.client, namespace)
            .patch(name, &patch, &PostParams::default())
            .map(|_| ())
            .map_err(SyncError::from)
    }
}

fn init(context: &ControllerContext<'_>, _: &Options) -> Result<Controller, kcm::apimachinery::errors::BoxError> {
    let configmaps = context.informers.informer::<ConfigMap>();
    let queue = WorkQueue::new(context.name);
    enqueue_object_keys(&configmaps, &queue);
    let marker = Marker { configmaps, client: context.client.clone(), failed_once: Mutex::new(false) };
    Ok(Controller::new().with_queue(&queue, 2, move |key: &String| marker.sync(key)))
}

/// Borrows an upstream name so that `--controllers` selects it.
fn marker_controller() -> ControllerDescriptor {
    named("ttl-controller").started_by(init)
}

/// An API server, its admin's client and the controller manager's client. The test controller
/// patches ConfigMaps, which neither the controller manager's user nor `ttl-controller`'s
/// ServiceAccount may do under kube-apiserver's bootstrap RBAC: a controller of its own needs a
/// role of its own, granted here (the sandbox of these tests does not authorize).
fn start(backend: Backend) -> (TestServer, Client, Client) {
    let server = TestServer::start(backend).expect("the API server starts");
    let admin = Client::new(server.admin_config(), ClientOptions::default()).unwrap();
    let role: ClusterRole = serde_json::from_value(json!({"metadata": {"name": "configmap-marker"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "patch"]}]}))
    .unwrap();
    Api::<ClusterRole>::cluster(&admin).create(&role, &PostParams::default()).unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
    "metadata": {"name": "configmap-marker"},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "configmap-marker"},
    "subjects": [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:kube-controller-manager"},
        {"kind": "ServiceAccount", "namespace": "kube-system", "name": "ttl-controller"},
    ]}))
    .unwrap();
    Api::<ClusterRoleBinding>::cluster(&admin).create(&binding, &PostParams::default()).unwrap();
    let kcm = Client::new(server.controller_manager_config(), ClientOptions::default()).unwrap();
    (server, admin, kcm)
}

fn create(client: &Client, name: &str) {
    let configmap: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<ConfigMap>::namespaced(client, "default").create(&configmap, &PostParams::default()).unwrap();
}

fn marked(client: &Client, name: &str) -> Option<String> {
    let configmap = Api::<ConfigMap>::namespaced(client, "default").get(name).unwrap();
    configmap.metadata.annotations.and_then(|a| a.get(MARK).cloned())
}

fn wait_marked(client: &Client, name: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(mark) = marked(client, name) {
            return mark;
        }
        assert!(Instant::now() < deadline, "{name} was never synced");
        std::thread::sleep(Duration::from_millis(50));
    }
}

on_both_backends!(controllers_sync_retry_and_stop);
fn controllers_sync_retry_and_stop(backend: Backend) {
    let (_server, admin, kcm) = start(backend);
    for name in ["before", "flaky"] {
        create(&admin, name);
    }
    let options = harness::options_on(backend, &[]);
    let mut set = kcm::app::start_controllers(&kcm, &options, &[marker_controller()]).unwrap();
    assert_eq!(set.names(), ["ttl-controller"]);
    assert!(set.wait_for_sync(Duration::from_secs(30)), "caches sync");

    // No worker runs before run_workers: nothing is marked yet.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(marked(&admin, "before"), None);

    set.run_workers().unwrap();
    let mark = wait_marked(&admin, "before");
    // With --use-service-account-credentials (the real server's runs) the controller acts as its
    // ServiceAccount, and its User-Agent names that user, as upstream's.
    let identity = match backend {
        Backend::Sandbox => " ttl-controller",
        Backend::Real => " system:serviceaccount:kube-system:ttl-controller",
    };
    assert!(mark.ends_with(identity), "the controller's own client identity: {mark}");
    wait_marked(&admin, "flaky");
    create(&admin, "after");
    wait_marked(&admin, "after");

    set.stop(Duration::from_secs(10));
    create(&admin, "too-late");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(marked(&admin, "too-late"), None, "no work after stop");
}

/// Counts its syncs of the Leases it reads; its informer cannot sync while the sandbox
/// answers 503 for coordination.k8s.io/v1.
struct LeaseCounter;

static LEASE_SYNCS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl LeaseCounter {
    fn sync(&self, _key: &str) -> SyncResult {
        LEASE_SYNCS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }
}

fn init_lease_counter(
    context: &ControllerContext<'_>,
    _: &Options,
) -> Result<Controller, kcm::apimachinery::errors::BoxError> {
    let leases = context.informers.informer::<k8s_openapi::api::coordination::v1::Lease>();
    let queue = WorkQueue::new(context.name);
    enqueue_object_keys(&leases, &queue);
    Ok(Controller::new().with_queue(&queue, 1, move |key: &String| LeaseCounter.sync(key)))
}

fn two_controllers() -> [ControllerDescriptor; 2] {
    [marker_controller(), named("pod-garbage-collector-controller").started_by(init_lease_counter)]
}

// Sandbox only: it needs one API group answering 503 while the others work.
#[test]
fn each_controller_waits_only_for_its_own_caches() {
    let sandbox =
        Sandbox::start(SandboxOptions { listen: "127.0.0.1:0".parse().unwrap(), ..Default::default() }).unwrap();
    let admin = Client::new(sandbox.admin_config(), ClientOptions::default()).unwrap();
    create(&admin, "before");
    sandbox.faults().set_api_unavailable("coordination.k8s.io/v1", true);
    let kcm = Client::new(sandbox.controller_manager_config(), ClientOptions::default()).unwrap();
    let options = match kcm::app::flags::parse(["--controllers=*".into()]).unwrap() {
        kcm::app::flags::Command::Run(options) => options,
        other => panic!("unexpected {other:?}"),
    };
    let mut set = kcm::app::start_controllers(&kcm, &options, &two_controllers()).unwrap();
    set.run_workers().unwrap();
    // The ConfigMap controller works although the Lease cache cannot sync.
    wait_marked(&admin, "before");
    assert_eq!(LEASE_SYNCS.load(std::sync::atomic::Ordering::SeqCst), 0, "no sync before the Lease cache synced");

    sandbox.faults().set_api_unavailable("coordination.k8s.io/v1", false);
    let lease: k8s_openapi::api::coordination::v1::Lease =
        serde_json::from_value(json!({"metadata": {"name": "l"}})).unwrap();
    Api::namespaced(&admin, "default").create(&lease, &PostParams::default()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while LEASE_SYNCS.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the Lease controller never ran after its cache synced");
        std::thread::sleep(Duration::from_millis(100));
    }
    set.stop(Duration::from_secs(10));
}

/// A controller whose sync of `stuck` blocks until the test releases it; other keys are marked
/// by the `Marker` controller beside it, which must not be held up.
struct Stuck {
    released: Arc<std::sync::atomic::AtomicBool>,
}

static RELEASE_STUCK: std::sync::OnceLock<Arc<std::sync::atomic::AtomicBool>> = std::sync::OnceLock::new();
/// Held by a test using [`RELEASE_STUCK`], which the runs on either backend share.
static STUCK_TEST: Mutex<()> = Mutex::new(());

impl Stuck {
    fn sync(&self, _key: &str) -> SyncResult {
        while !self.released.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}

fn init_stuck(context: &ControllerContext<'_>, _: &Options) -> Result<Controller, kcm::apimachinery::errors::BoxError> {
    let configmaps = context.informers.informer::<ConfigMap>();
    let queue = WorkQueue::new(context.name);
    enqueue_object_keys(&configmaps, &queue);
    let stuck = Stuck { released: RELEASE_STUCK.get_or_init(Arc::default).clone() };
    Ok(Controller::new().with_queue(&queue, 1, move |key: &String| stuck.sync(key)))
}

fn stuck_and_marker() -> [ControllerDescriptor; 2] {
    [marker_controller(), named("pod-garbage-collector-controller").started_by(init_stuck)]
}

on_both_backends!(a_stuck_controller_neither_stalls_others_nor_shutdown);
fn a_stuck_controller_neither_stalls_others_nor_shutdown(backend: Backend) {
    let _serial = STUCK_TEST.lock();
    RELEASE_STUCK.get_or_init(Arc::default).store(false, std::sync::atomic::Ordering::SeqCst);
    let (_server, admin, kcm) = start(backend);
    let options = harness::options_on(backend, &[]);
    let mut set = kcm::app::start_controllers(&kcm, &options, &stuck_and_marker()).unwrap();
    set.run_workers().unwrap();
    // The stuck controller's worker holds its first key; both share the ConfigMap informer,
    // whose handlers only enqueue, so the marker keeps up with a stream of new objects.
    for i in 0..50 {
        create(&admin, &format!("cm-{i}"));
    }
    for i in 0..50 {
        wait_marked(&admin, &format!("cm-{i}"));
    }
    // SIGTERM's drain is bounded although a sync never finishes.
    let started = Instant::now();
    set.stop(Duration::from_secs(2));
    let took = started.elapsed();
    RELEASE_STUCK.get_or_init(Arc::default).store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(took < Duration::from_secs(20), "stop waited {took:?} for a stuck sync");
}
