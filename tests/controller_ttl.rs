//! The TTL controller against the sandbox with simulated nodes: every Node gets the
//! `node.alpha.kubernetes.io/ttl` annotation, 0 for a small cluster, and it is put back when
//! someone changes it.
#![cfg(feature = "sandbox")]

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kcm::client::{Api, Client, ClientOptions, Patch, PostParams};
use kcm::controllers::ttl::{OBJECT_TTL_ANNOTATION, TTL};
use kcm::runtime::controller::ControllerSet;
use kcm::sandbox::nodes::{NodeOptions, SimulatedNodes};
use kcm::sandbox::server::{Sandbox, SandboxOptions};
use serde_json::json;

/// Generous: the machine may be loaded.
const DEADLINE: Duration = Duration::from_secs(60);

fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn ttl_of(nodes: &Api<Node>, name: &str) -> Option<String> {
    let node = nodes.get(name).ok()?;
    node.metadata.annotations?.get(OBJECT_TTL_ANNOTATION).cloned()
}

#[test]
fn nodes_of_a_small_cluster_get_a_ttl_of_zero() {
    let listen = "127.0.0.1:0".parse().expect("an address");
    let sandbox = Sandbox::start(SandboxOptions { listen, ..SandboxOptions::default() }).expect("the sandbox starts");
    let client = Client::new(sandbox.admin_config(), ClientOptions::default()).expect("a client");
    let names = vec!["node-a".to_string(), "node-b".to_string()];
    let simulated = SimulatedNodes::start(sandbox.admin_config(), names, NodeOptions::default()).expect("nodes");
    let kcm = Client::new(sandbox.controller_manager_config(), ClientOptions::default()).expect("a client");
    let options = match kcm::flags::parse(["--controllers=*"].iter().map(|a| a.into())) {
        Ok(kcm::flags::Command::Run(options)) => options,
        other => panic!("unexpected {other:?}"),
    };
    let mut set = ControllerSet::start(&kcm, &options, &[TTL]).expect("the controller starts");
    assert!(set.wait_for_sync(DEADLINE), "caches sync");
    set.run_workers();

    let nodes = Api::<Node>::all(&client);
    for name in ["node-a", "node-b"] {
        eventually(&format!("the ttl annotation of {name}"), || (ttl_of(&nodes, name)? == "0").then_some(()));
    }
    // A node registered later, and a node whose annotation someone changed.
    let late: Node = serde_json::from_value(json!({"metadata": {"name": "late"}})).expect("a node");
    nodes.create(&late, &PostParams::default()).expect("node created");
    eventually("the ttl annotation of late", || (ttl_of(&nodes, "late")? == "0").then_some(()));
    let patch = Patch::Merge(json!({"metadata": {"annotations": {OBJECT_TTL_ANNOTATION: "300"}}}));
    nodes.patch("node-a", &patch, &PostParams::default()).expect("annotation changed");
    eventually("the ttl annotation of node-a put back", || (ttl_of(&nodes, "node-a")? == "0").then_some(()));

    set.stop(Duration::from_secs(5));
    simulated.stop();
}
