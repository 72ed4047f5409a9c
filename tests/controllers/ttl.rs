//! The named("ttl-controller") controller on both backends with simulated nodes: every Node gets the
//! `node.alpha.kubernetes.io/ttl` annotation, 0 for a small cluster, and it is put back when
//! someone changes it.

use k8s_openapi::api::core::v1::Node;
use kcm::app::controllers::named;
use kcm::client::{Api, Patch, PostParams};
use kcm::controllers::ttl::OBJECT_TTL_ANNOTATION;
use kcm_sandbox::sandbox::nodes::NodeOptions;
use serde_json::json;

use crate::harness;

use harness::{Backend, eventually};

fn ttl_of(nodes: &Api<Node>, name: &str) -> Option<String> {
    let node = nodes.get(name).ok()?;
    node.metadata.annotations?.get(OBJECT_TTL_ANNOTATION).cloned()
}

on_both_backends!(nodes_of_a_small_cluster_get_a_ttl_of_zero);
fn nodes_of_a_small_cluster_get_a_ttl_of_zero(backend: Backend) {
    let cluster = harness::with(&[named("ttl-controller")])
        .on(backend)
        .without_default_account()
        .node_options(NodeOptions::default())
        .start();

    let nodes = Api::<Node>::all(&cluster.client);
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
}
