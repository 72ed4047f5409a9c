//! Side-by-side scenarios of the `garbagecollector` controller: `gc-background`, `gc-foreground`, `gc-orphan`.

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "gc-background",
        summary: "a Deployment deleted in the background: its ReplicaSet and pods collected",
        nodes: 3,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: gc_background,
    },
    Scenario {
        name: "gc-foreground",
        summary: "a Deployment deleted in the foreground: dependents first",
        nodes: 3,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: gc_foreground,
    },
    Scenario {
        name: "gc-orphan",
        summary: "a ReplicaSet deleted with its pods orphaned",
        nodes: 3,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: gc_orphan,
    },
];

/// A Deployment `web` of 2 rolled out, then deleted with `policy`; waits until the Deployment,
/// its ReplicaSets and its pods are gone.
pub(super) fn delete_deployment(steps: &mut Steps, policy: &str) -> Result<(), Error> {
    steps.create(DEPLOYMENTS, deployment("web", 2, "nginx:1.27"))?;
    rolled_out(steps, "web", 2)?;
    steps.delete(&format!("{DEPLOYMENTS}/web"), Some(policy))?;
    steps.wait_gone(&format!("{DEPLOYMENTS}/web"))?;
    steps.wait("the ReplicaSets and pods of web to be gone", |s| {
        let sets = s.list(&format!("{RS}?labelSelector=app=web"))?;
        let pods = s.list("/api/v1/namespaces/sbs/pods?labelSelector=app=web")?;
        Ok((sets.is_empty() && pods.is_empty()).then_some(()))
    })
}

pub(super) fn gc_background(steps: &mut Steps) -> Result<(), Error> {
    delete_deployment(steps, "Background")
}

pub(super) fn gc_foreground(steps: &mut Steps) -> Result<(), Error> {
    delete_deployment(steps, "Foreground")
}

pub(super) fn gc_orphan(steps: &mut Steps) -> Result<(), Error> {
    steps.create(RS, replica_set("cache", 2))?;
    steps.wait_pods_ready(NAMESPACE, "app=cache", 2)?;
    steps.delete(&format!("{RS}/cache"), Some("Orphan"))?;
    steps.wait_gone(&format!("{RS}/cache"))?;
    steps.wait("the pods of cache orphaned", |s| {
        let pods = s.live_pods(NAMESPACE, "app=cache")?;
        Ok((pods.len() == 2 && pods.iter().all(|p| p["metadata"]["ownerReferences"].is_null())).then_some(()))
    })
}
