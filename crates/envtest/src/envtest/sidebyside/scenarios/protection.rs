//! Side-by-side scenario of the PVC and PV protection controllers (`pvcprotection`, `pvprotection`): `protection`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "protection",
    summary: "a provisioned claim used by a running pod deleted: kept by pvc-protection until the pod \
                  goes, then the claim and (reclaim policy Delete) its volume go",
    nodes: 1,
    flags: &[],
    apiserver_flags: &[],
    compare_nodes: false,
    run: protection,
}];

/// A claim of the default class used by a running pod, deleted: kept by its
/// `kubernetes.io/pvc-protection` finalizer until the pod goes, then it and its volume go.
pub(super) fn protection(steps: &mut Steps) -> Result<(), Error> {
    let claims = format!("/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims");
    let pods = format!("/api/v1/namespaces/{NAMESPACE}/pods");
    let claim = json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}}}});
    steps.create(&claims, claim)?;
    let pod = json!({"metadata": {"name": "user", "labels": {"app": "user"}}, "spec": {
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}});
    steps.create(&pods, pod)?;
    steps.wait_pods_ready(NAMESPACE, "app=user", 1)?;
    let volume = steps.get(&format!("{claims}/data"))?.unwrap_or_default()["spec"]["volumeName"].clone();
    let volume = format!("/api/v1/persistentvolumes/{}", volume.as_str().unwrap_or_default());
    steps.cluster_objects.push(volume.clone());
    steps.checkpoint("the claim bound and used by a running pod")?;
    steps.delete(&format!("{claims}/data"), None)?;
    steps.wait("the claim Terminating", |s| {
        Ok(s.get(&format!("{claims}/data"))?.filter(|c| c["metadata"]["deletionTimestamp"].is_string()).map(|_| ()))
    })?;
    steps.checkpoint("the deleted claim kept while the pod uses it")?;
    steps.delete(&format!("{pods}/user"), None)?;
    steps.wait_gone(&format!("{claims}/data"))?;
    steps.wait_gone(&volume)?;
    steps.checkpoint("the pod gone: the claim and its volume gone")
}
