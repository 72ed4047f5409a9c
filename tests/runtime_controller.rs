//! The controller runtime end to end against the sandbox: a test controller built from a
//! descriptor gets its informer, its queue fed by events, worker threads calling its sync,
//! rate-limited retries of failures, and a clean stop.
#![cfg(feature = "sandbox")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kcm::client::{Api, Client, ClientOptions, Patch, PostParams};
use kcm::runtime::controller::{
    ControllerContext, ControllerDescriptor, ControllerHandle, ControllerSet, Reconciler, enqueue_object_keys,
};
use kcm::runtime::informer::{Informer, split_key};
use kcm::runtime::workqueue::WorkQueue;
use kcm::sandbox::server::{Sandbox, SandboxOptions};
use parking_lot::Mutex;
use serde_json::json;

/// Marks every ConfigMap it sees with an annotation; the one named `flaky` fails once first.
struct Marker {
    configmaps: Arc<Informer<ConfigMap>>,
    client: Client,
    failed_once: Mutex<bool>,
}

const MARK: &str = "example.com/seen-by";

impl Reconciler for Marker {
    fn sync(&self, key: &str) -> Result<(), String> {
        let (namespace, name) = split_key(key);
        let Some(configmap) = self.configmaps.store().get(key) else { return Ok(()) };
        if name == "flaky" {
            let mut failed = self.failed_once.lock();
            if !*failed {
                *failed = true;
                return Err("first attempt fails on purpose".into());
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
            .map_err(|e| e.to_string())
    }
}

fn init(context: &ControllerContext<'_>) -> Result<ControllerHandle, String> {
    let configmaps = context.informers.informer::<ConfigMap>();
    let queue = WorkQueue::new(context.name);
    enqueue_object_keys(&configmaps, &queue);
    let reconciler = Marker { configmaps, client: context.client.clone(), failed_once: Mutex::new(false) };
    Ok(ControllerHandle { queue, reconciler: Arc::new(reconciler), workers: 2 })
}

/// Borrows an upstream name so that `--controllers` selects it.
static DESCRIPTORS: &[ControllerDescriptor] = &[ControllerDescriptor { name: "ttl-controller", init }];

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

#[test]
fn controllers_sync_retry_and_stop() {
    let sandbox =
        Sandbox::start(SandboxOptions { listen: "127.0.0.1:0".parse().unwrap(), ..Default::default() }).unwrap();
    let admin = Client::new(sandbox.admin_config(), ClientOptions::default()).unwrap();
    for name in ["before", "flaky"] {
        create(&admin, name);
    }
    let kcm = Client::new(sandbox.controller_manager_config(), ClientOptions::default()).unwrap();
    let options = match kcm::flags::parse(["--controllers=*".into()]).unwrap() {
        kcm::flags::Command::Run(options) => options,
        other => panic!("unexpected {other:?}"),
    };
    let mut set = ControllerSet::start(&kcm, &options, DESCRIPTORS).unwrap();
    assert_eq!(set.names(), ["ttl-controller"]);
    assert!(set.wait_for_sync(Duration::from_secs(30)), "caches sync");

    // No worker runs before run_workers: nothing is marked yet.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(marked(&admin, "before"), None);

    set.run_workers();
    let mark = wait_marked(&admin, "before");
    assert!(mark.ends_with(" ttl-controller"), "the controller's own client identity: {mark}");
    wait_marked(&admin, "flaky");
    create(&admin, "after");
    wait_marked(&admin, "after");

    set.stop(Duration::from_secs(10));
    create(&admin, "too-late");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(marked(&admin, "too-late"), None, "no work after stop");
}
