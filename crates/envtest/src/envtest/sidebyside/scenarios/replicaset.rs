//! Side-by-side scenario of the `replicaset` controller: `replicaset-scale`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "replicaset-scale",
    summary: "a ReplicaSet of 3 scaled to 5, then to 1",
    nodes: 3,
    flags: &[],
    apiserver_flags: &[],
    compare_nodes: false,
    run: replicaset_scale,
}];

pub(super) fn replica_set_status(steps: &mut Steps, name: &str, replicas: i64) -> Result<(), Error> {
    let path = format!("{RS}/{name}");
    steps.wait(&format!("ReplicaSet {name} status: {replicas} ready"), |s| {
        let rs = s.get(&path)?.unwrap_or_default();
        let status = &rs["status"];
        let done = status["replicas"].as_i64().unwrap_or(0) == replicas
            && status["readyReplicas"].as_i64().unwrap_or(0) == replicas
            && status["observedGeneration"] == rs["metadata"]["generation"];
        Ok(done.then_some(()))
    })
}

pub(super) fn replicaset_scale(steps: &mut Steps) -> Result<(), Error> {
    steps.create(RS, replica_set("cache", 3))?;
    steps.wait_pods_ready(NAMESPACE, "app=cache", 3)?;
    replica_set_status(steps, "cache", 3)?;
    steps.checkpoint("3 replicas")?;
    steps.patch(&format!("{RS}/cache"), json!({"spec": {"replicas": 5}}))?;
    steps.wait_pods_ready(NAMESPACE, "app=cache", 5)?;
    replica_set_status(steps, "cache", 5)?;
    steps.checkpoint("5 replicas")?;
    steps.patch(&format!("{RS}/cache"), json!({"spec": {"replicas": 1}}))?;
    steps.wait_pods_ready(NAMESPACE, "app=cache", 1)?;
    replica_set_status(steps, "cache", 1)
}
