//! Side-by-side scenario of the `daemon` controller: `daemonset`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "daemonset",
    summary: "a DaemonSet on 3 nodes, one tainted; a failed pod replaced; image rolled with maxUnavailable 1, \
                  then with maxSurge 1; a node removed and one added",
    nodes: 3,
    flags: &[],
    apiserver_flags: &[],
    compare_nodes: false,
    run: daemon_set,
}];

pub(super) const DAEMON_SETS: &str = "/apis/apps/v1/namespaces/sbs/daemonsets";

/// Waits until DaemonSet `name` runs `count` updated, available pods, its generation observed.
pub(super) fn daemon_set_rolled_out(steps: &mut Steps, name: &str, count: i64) -> Result<(), Error> {
    let path = format!("{DAEMON_SETS}/{name}");
    steps.wait(&format!("DaemonSet {name}: {count} pods updated and available"), |s| {
        let ds = s.get(&path)?.unwrap_or_default();
        let status = &ds["status"];
        let number = |field: &str| status[field].as_i64().unwrap_or(0);
        let done = status["observedGeneration"] == ds["metadata"]["generation"]
            && number("desiredNumberScheduled") == count
            && number("currentNumberScheduled") == count
            && number("updatedNumberScheduled") == count
            && number("numberAvailable") == count
            && number("numberUnavailable") == 0;
        Ok(done.then_some(()))
    })?;
    steps.wait(&format!("DaemonSet {name}: no old pod left"), |s| {
        let pods = s.live_pods(NAMESPACE, &format!("app={name}"))?;
        let ready = pods.iter().all(|p| condition(p, "Ready") == Some("True"));
        Ok((ready && pods.len() as i64 == count).then_some(()))
    })
}

pub(super) fn daemon_set(steps: &mut Steps) -> Result<(), Error> {
    let tainted = steps.patch(
        "/api/v1/nodes/node-3",
        json!({"spec": {"taints": [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]}}),
    )?;
    // Seen before the DaemonSet, or a pod goes to node-3 and stays Pending (a NoSchedule taint
    // does not evict it), whichever binary runs.
    steps.wait_cached("/api/v1/nodes", &tainted)?;
    let mut spec = json!({"selector": {"matchLabels": {"app": "agent"}},
        "template": template("agent", "registry.k8s.io/pause:3.10"),
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}});
    spec["template"]["spec"]["terminationGracePeriodSeconds"] = json!(1);
    steps.create(DAEMON_SETS, json!({"metadata": {"name": "agent"}, "spec": spec}))?;
    daemon_set_rolled_out(steps, "agent", 2)?;
    steps.checkpoint("created")?;
    // A daemon pod fails: it is deleted (FailedDaemonPod) and replaced.
    let pods = steps.live_pods(NAMESPACE, "app=agent")?;
    let failed = pods
        .iter()
        .find(|p| p["spec"]["nodeName"] == "node-2")
        .ok_or_else(|| Error::Scenario("no pod on node-2".into()))?;
    let failed = failed["metadata"]["name"].as_str().unwrap_or_default().to_string();
    steps.nodes.fail_pod(NAMESPACE, &failed).map_err(|e| Error::Nodes(e.into()))?;
    steps.wait("the failed pod replaced", |s| {
        let pods = s.live_pods(NAMESPACE, "app=agent")?;
        let replaced = pods.iter().any(|p| {
            p["spec"]["nodeName"] == "node-2"
                && p["metadata"]["name"] != failed.as_str()
                && condition(p, "Ready") == Some("True")
        });
        Ok((replaced && pods.len() == 2).then_some(()))
    })?;
    daemon_set_rolled_out(steps, "agent", 2)?;
    steps.checkpoint("failed pod replaced")?;
    let image =
        |image: &str| json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}});
    steps.patch(&format!("{DAEMON_SETS}/agent"), image("registry.k8s.io/pause:3.9"))?;
    daemon_set_rolled_out(steps, "agent", 2)?;
    steps.checkpoint("rolled with maxUnavailable")?;
    let mut surge = image("registry.k8s.io/pause:3.8");
    surge["spec"]["updateStrategy"] = json!({"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}});
    steps.patch(&format!("{DAEMON_SETS}/agent"), surge)?;
    daemon_set_rolled_out(steps, "agent", 2)?;
    steps.checkpoint("rolled with maxSurge")?;
    // node-1 leaves (its pod stays until the pod GC's 40 s quarantine ends), node-4 joins.
    steps.nodes.remove_node("node-1").map_err(|e| Error::Nodes(e.into()))?;
    steps.nodes.add_node("node-4").map_err(|e| Error::Nodes(e.into()))?;
    steps.wait("node-4 schedulable", |s| {
        let node = s.get("/api/v1/nodes/node-4")?.unwrap_or_default();
        let taints = node["spec"]["taints"].as_array().map(Vec::as_slice).unwrap_or_default();
        Ok((condition(&node, "Ready") == Some("True") && taints.is_empty()).then_some(()))
    })?;
    steps.wait("a ready pod on node-4, counted", |s| {
        let ds = s.get(&format!("{DAEMON_SETS}/agent"))?.unwrap_or_default();
        let pods = s.live_pods(NAMESPACE, "app=agent")?;
        let on_node_4 = pods.iter().any(|p| p["spec"]["nodeName"] == "node-4" && condition(p, "Ready") == Some("True"));
        Ok((on_node_4 && ds["status"]["numberAvailable"] == 2 && ds["status"]["desiredNumberScheduled"] == 2)
            .then_some(()))
    })
}
