//! Side-by-side scenario of the `attachdetach` controller: `attachdetach`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "attachdetach",
    summary: "a pod using a CSI volume of the simulated driver (claim pre-bound): the volume attached, the pod \
                  started; the pod deleted: the volume detached once the node no longer uses it",
    nodes: 1,
    // The claim and volume are bound by the steps, as the binder would: upstream's binder
    // is left out on both sides.
    flags: &["--controllers=-persistentvolume-binder-controller"],
    apiserver_flags: &[],
    compare_nodes: true,
    run: attach_detach,
}];

pub(super) const VOLUME_ATTACHMENTS: &str = "/apis/storage.k8s.io/v1/volumeattachments";

/// The VolumeAttachment name the CSI attacher gives `handle` of the simulated driver on `node`
/// (`csi-<sha256(handle + driver + node)>`).
pub(super) fn attachment_name(handle: &str, node: &str) -> String {
    let driver = crate::sandbox::nodes::csi::DRIVER;
    let digest = ring::digest::digest(&ring::digest::SHA256, format!("{handle}{driver}{node}").as_bytes());
    format!("csi-{}", digest.as_ref().iter().map(|b| format!("{b:02x}")).collect::<String>())
}

pub(super) fn attach_detach(steps: &mut Steps) -> Result<(), Error> {
    let driver = crate::sandbox::nodes::csi::DRIVER;
    let handle = "sbs-volume-handle";
    let attachment = format!("{VOLUME_ATTACHMENTS}/{}", attachment_name(handle, "node-1"));
    steps.cluster_objects = vec!["/api/v1/persistentvolumes/sbs-volume".to_string(), attachment.clone()];
    let claims = format!("/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims");
    let claim = steps.create(
        &claims,
        json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "storageClassName": "", "volumeName": "sbs-volume", "resources": {"requests": {"storage": "1Gi"}}}}),
    )?;
    let volume = json!({"metadata": {"name": "sbs-volume"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "capacity": {"storage": "1Gi"}, "storageClassName": "", "persistentVolumeReclaimPolicy": "Retain",
        "csi": {"driver": driver, "volumeHandle": handle, "fsType": "ext4"},
        "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": NAMESPACE, "name": "data",
            "uid": claim["metadata"]["uid"]}}});
    steps.create("/api/v1/persistentvolumes", volume)?;
    steps.patch("/api/v1/persistentvolumes/sbs-volume/status", json!({"status": {"phase": "Bound"}}))?;
    let bound = json!({"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}});
    steps.patch(&format!("{claims}/data/status"), bound)?;
    let pods = format!("/api/v1/namespaces/{NAMESPACE}/pods");
    let pod = json!({"metadata": {"name": "user"}, "spec": {"nodeName": "node-1",
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}});
    steps.create(&pods, pod)?;
    steps.wait("the pod running", |s| {
        Ok(s.get(&format!("{pods}/user"))?.filter(|p| p["status"]["phase"] == "Running").map(|_| ()))
    })?;
    steps.checkpoint("attached: the pod running")?;
    steps.delete(&format!("{pods}/user"), None)?;
    steps.wait_gone(&attachment)?;
    steps.checkpoint("detached: the pod gone")
}
