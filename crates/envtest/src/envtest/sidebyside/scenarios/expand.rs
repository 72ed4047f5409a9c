//! Side-by-side scenario of the `expand` controller: `expand`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "expand",
    summary: "a claim of a CSI volume grown (left to its driver's external resizer), a claim of a \
                  migrated in-tree volume grown (the resizer annotation)",
    nodes: 1,
    flags: &[],
    apiserver_flags: &[],
    compare_nodes: false,
    run: expand,
}];

/// A claim of class `expandable` bound to volume `sbs-<name>` with `source`, both 1Gi, as the
/// binder would leave them.
pub(super) fn bound_claim(steps: &mut Steps, name: &str, source: Value) -> Result<(), Error> {
    let volume_name = format!("sbs-{name}");
    let claim = json!({"metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteOnce"],
        "storageClassName": "expandable", "volumeName": volume_name, "resources": {"requests": {"storage": "1Gi"}}}});
    let created = steps.create(CLAIMS, claim)?;
    let mut spec = json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
        "storageClassName": "expandable", "persistentVolumeReclaimPolicy": "Delete",
        "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": NAMESPACE, "name": name,
            "uid": created["metadata"]["uid"]}});
    if let (Some(spec), Some(source)) = (spec.as_object_mut(), source.as_object()) {
        spec.extend(source.clone());
    }
    steps.create(VOLUMES, json!({"metadata": {"name": volume_name}, "spec": spec}))?;
    steps.patch(&format!("{VOLUMES}/{volume_name}/status"), json!({"status": {"phase": "Bound"}}))?;
    let status =
        json!({"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}});
    steps.patch(&format!("{CLAIMS}/{name}/status"), status)?;
    steps.cluster_objects.push(format!("{VOLUMES}/{volume_name}"));
    Ok(())
}

pub(super) fn grow_claim(steps: &mut Steps, name: &str, size: &str) -> Result<(), Error> {
    steps.patch(&format!("{CLAIMS}/{name}"), json!({"spec": {"resources": {"requests": {"storage": size}}}}))?;
    Ok(())
}

pub(super) fn expand(steps: &mut Steps) -> Result<(), Error> {
    let class = json!({"metadata": {"name": "expandable"}, "provisioner": CSI_DRIVER,
        "allowVolumeExpansion": true, "volumeBindingMode": "Immediate"});
    steps.create("/apis/storage.k8s.io/v1/storageclasses", class)?;
    steps.cluster_objects.push("/apis/storage.k8s.io/v1/storageclasses/expandable".into());
    // A CSI driver with no resizer running: the simulated one would grow the claim at a moment
    // that races the controller's Event.
    let driver = "other.csi.example.com";
    bound_claim(steps, "data", json!({"csi": {"driver": driver, "volumeHandle": "data", "fsType": "ext4"}}))?;
    bound_claim(steps, "legacy", json!({"awsElasticBlockStore": {"volumeID": "vol-1", "fsType": "ext4"}}))?;
    // The binder finishes binding (`bind-completed`) whenever it sees them, which races the
    // steps' own writes (a 409 waits for the next event or resync): wait for it on both sides.
    for name in ["data", "legacy"] {
        steps.wait(&format!("claim {name} bind-completed"), |s| {
            let claim = s.get(&format!("{CLAIMS}/{name}"))?.unwrap_or_default();
            Ok(claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"].is_string().then_some(()))
        })?;
    }
    steps.checkpoint("two bound claims of 1Gi")?;
    grow_claim(steps, "data", "2Gi")?;
    steps.wait("the ExternalExpanding Event", |s| {
        let events = s.list(&format!("/api/v1/namespaces/{NAMESPACE}/events"))?;
        Ok(events.iter().any(|e| e["reason"] == "ExternalExpanding").then_some(()))
    })?;
    steps.checkpoint("the CSI claim left to its driver's external resizer")?;
    grow_claim(steps, "legacy", "3Gi")?;
    steps.wait("the in-tree claim's resizer annotation", |s| {
        let claim = s.get(&format!("{CLAIMS}/legacy"))?.unwrap_or_default();
        Ok(claim["metadata"]["annotations"]["volume.kubernetes.io/storage-resizer"].is_string().then_some(()))
    })?;
    steps.checkpoint("the in-tree claim handed to its CSI driver's resizer")
}
