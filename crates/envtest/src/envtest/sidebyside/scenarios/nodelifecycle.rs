//! Side-by-side scenario of the `nodelifecycle` controller: `node-failure`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "node-failure",
    summary: "a node stops reporting: tainted, its pods marked not ready and evicted, replaced",
    nodes: 3,
    flags: &["--node-monitor-period=1s", "--node-monitor-grace-period=6s"],
    apiserver_flags: &[],
    compare_nodes: true,
    run: node_failure,
}];

pub(super) fn node_failure(steps: &mut Steps) -> Result<(), Error> {
    // Pods tolerate an unreachable or not-ready node for 2 s (DefaultTolerationSeconds would
    // give them 300 s).
    let mut rs = replica_set("web", 3);
    rs["spec"]["template"]["spec"]["tolerations"] = json!([
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2},
    ]);
    steps.create(RS, rs)?;
    let pods = steps.wait_pods_ready(NAMESPACE, "app=web", 3)?;
    let on_node_2 = pods.iter().filter(|p| p["spec"]["nodeName"] == "node-2").count();
    if on_node_2 == 0 {
        return Err(Error::Scenario("no pod was scheduled on node-2".into()));
    }
    steps.checkpoint("running on 3 nodes")?;
    steps.nodes.stop_heartbeat("node-2");
    steps.wait("node-2 tainted unreachable:NoExecute", |s| {
        let node = s.get("/api/v1/nodes/node-2")?.unwrap_or_default();
        let taints = node["spec"]["taints"].as_array().cloned().unwrap_or_default();
        Ok(taints
            .iter()
            .any(|t| t["key"] == "node.kubernetes.io/unreachable" && t["effect"] == "NoExecute")
            .then_some(()))
    })?;
    steps.wait("the pods on node-2 evicted and replaced", |s| {
        let pods = s.list("/api/v1/namespaces/sbs/pods?labelSelector=app=web")?;
        let evicted = pods
            .iter()
            .filter(|p| p["spec"]["nodeName"] == "node-2")
            .all(|p| !p["metadata"]["deletionTimestamp"].is_null());
        let live = pods.iter().filter(|p| p["metadata"]["deletionTimestamp"].is_null());
        let running = live.filter(|p| p["status"]["phase"] == "Running" && condition(p, "Ready") == Some("True"));
        Ok((evicted && running.count() == 3).then_some(()))
    })
}
