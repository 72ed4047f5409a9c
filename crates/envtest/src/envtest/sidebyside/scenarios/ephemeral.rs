//! Side-by-side scenario of the `ephemeral` controller: `ephemeral`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "ephemeral",
    summary: "a pod's generic ephemeral volume given its claim, a conflicting claim reported, the \
                  claim collected with its pod",
    nodes: 1,
    flags: &[],
    apiserver_flags: &[],
    compare_nodes: false,
    run: ephemeral,
}];

/// A pod with the generic ephemeral volume `scratch` of the default class.
pub(super) fn ephemeral_pod(name: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {"app": name}}, "spec": {
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        "volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
            "metadata": {"labels": {"app": name}, "annotations": {"purpose": "scratch"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}}}}}]}})
}

pub(super) fn ephemeral(steps: &mut Steps) -> Result<(), Error> {
    let pods = format!("/api/v1/namespaces/{NAMESPACE}/pods");
    steps.create(&pods, ephemeral_pod("web"))?;
    steps.wait_pods_ready(NAMESPACE, "app=web", 1)?;
    steps.checkpoint("the pod running with its bound claim web-scratch")?;
    let squatter = json!({"metadata": {"name": "other-scratch"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Mi"}}}});
    steps.create(CLAIMS, squatter)?;
    // The claim informer is shared (both binaries): once the PVC-protection controller has put
    // its finalizer on the squatter, the ephemeral controller's cache holds it too, and the
    // pod's sync finds a claim it does not own rather than racing the informer to a create
    // answered 409 (one Event or the other, by chance).
    steps.wait("the squatter protected, so cached", |s| {
        let claim = s.get(&format!("{CLAIMS}/other-scratch"))?.unwrap_or_default();
        let finalizers = claim["metadata"]["finalizers"].as_array().cloned().unwrap_or_default();
        Ok(finalizers.iter().any(|f| f == "kubernetes.io/pvc-protection").then_some(()))
    })?;
    steps.create(&pods, ephemeral_pod("other"))?;
    steps.wait("the FailedBinding Event", |s| {
        let events = s.list(&format!("/api/v1/namespaces/{NAMESPACE}/events"))?;
        Ok(events.iter().any(|e| e["reason"] == "FailedBinding").then_some(()))
    })?;
    steps.checkpoint("a claim not owned by its pod reported")?;
    steps.delete(&format!("{pods}/web"), None)?;
    steps.wait_gone(&format!("{CLAIMS}/web-scratch"))?;
    steps.checkpoint("the pod deleted, its claim collected")
}
