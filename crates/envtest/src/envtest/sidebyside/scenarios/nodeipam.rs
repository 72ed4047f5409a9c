//! Side-by-side scenario of the `nodeipam` controller: `node-ipam`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "node-ipam",
    summary: "nodes get pod CIDRs from 10.244.0.0/16, a node added later too",
    nodes: 3,
    flags: &[],
    apiserver_flags: &[],
    compare_nodes: true,
    run: node_ipam,
}];

pub(super) fn node_ipam(steps: &mut Steps) -> Result<(), Error> {
    let all_allocated = |count: usize| {
        move |s: &Steps| -> Result<Option<()>, Error> {
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
