//! The persistentvolume-attach-detach-controller on both backends, with the simulated CSI
//! driver's external attacher and kubelets: a pod using a CSI volume gets it attached (a
//! VolumeAttachment, marked attached by the driver; the node's `volumesAttached`; the pod's
//! `SuccessfulAttachVolume` Event) and only then runs; a pod on another node waits with a
//! Multi-Attach error Event; a restarted controller manager rebuilds
//! its state without touching the attachment; the pod deleted, the node stops using the
//! volume and it is detached (the VolumeAttachment deleted, `volumesAttached` emptied).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kcm::app::controllers::named;
use kcm::client::{Api, Client, DeleteParams, Patch, PostParams};
use kcm_sandbox::sandbox::nodes::csi::DRIVER;
use serde_json::json;

use crate::harness;

use harness::{Backend, Cluster, eventually, from};

/// How long nothing must change after the restart: the reconciler loops every 100 ms.
const SETTLE: Duration = Duration::from_millis(1500);
const HANDLE: &str = "pvc-attach-test";

/// `csi-<sha256(handle + driver + node)>` (the CSI attacher's `getAttachmentName`).
fn attachment_name(node: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, format!("{HANDLE}{DRIVER}{node}").as_bytes());
    format!("csi-{}", digest.as_ref().iter().map(|b| format!("{b:02x}")).collect::<String>())
}

fn unique_name() -> String {
    format!("kubernetes.io/csi/{DRIVER}^{HANDLE}")
}

/// A claim bound to a CSI volume of the simulated driver, as the binder and provisioner
/// would leave them; created before the controller starts, because it looks the volume up
/// only in its caches and has no handler for volumes (as upstream's): a volume that reached
/// its cache after the pod would wait for the populator's pass, minutes later.
fn bound_claim(client: &Client) {
    let claim: PersistentVolumeClaim = from(json!({"metadata": {"name": "data"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": "pv-attach",
        "resources": {"requests": {"storage": "1Gi"}}}}));
    let claims = Api::<PersistentVolumeClaim>::namespaced(client, "default");
    let claim = claims.create(&claim, &PostParams::default()).expect("claim created");
    let volume: PersistentVolume = from(json!({"metadata": {"name": "pv-attach"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}, "storageClassName": "",
        "persistentVolumeReclaimPolicy": "Retain",
        "csi": {"driver": DRIVER, "volumeHandle": HANDLE, "fsType": "ext4"},
        "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "default", "name": "data",
            "uid": claim.metadata.uid}}}));
    let volumes = Api::<PersistentVolume>::all(client);
    volumes.create(&volume, &PostParams::default()).expect("volume created");
    let bound = json!({"status": {"phase": "Bound"}});
    volumes.patch_status("pv-attach", &Patch::Merge(bound.clone()), &PostParams::default()).expect("volume bound");
    let claim_status =
        json!({"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}});
    claims.patch_status("data", &Patch::Merge(claim_status), &PostParams::default()).expect("claim bound");
}

fn attachment(cluster: &Cluster) -> Option<VolumeAttachment> {
    Api::<VolumeAttachment>::all(&cluster.client).get_opt(&attachment_name("node-a")).expect("attachment read")
}

fn node(cluster: &Cluster) -> Node {
    Api::<Node>::all(&cluster.client).get("node-a").expect("node read")
}

fn attached_names(node: &Node) -> Vec<String> {
    let attached = node.status.as_ref().and_then(|s| s.volumes_attached.clone()).unwrap_or_default();
    attached.into_iter().map(|v| v.name).collect()
}

fn in_use(node: &Node) -> Vec<String> {
    node.status.as_ref().and_then(|s| s.volumes_in_use.clone()).unwrap_or_default()
}

on_both_backends!(a_pods_csi_volume_is_attached_while_used_and_detached_after);
fn a_pods_csi_volume_is_attached_while_used_and_detached_after(backend: Backend) {
    let mut cluster = harness::with(&[named("persistentvolume-attach-detach-controller")])
        .on(backend)
        .start_with(|client, _| bound_claim(client));
    let pod: Pod = from(json!({"metadata": {"name": "user"}, "spec": {"nodeName": "node-a",
        "containers": [{"name": "c", "image": "nginx:1.27"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}));
    cluster.api::<Pod>().create(&pod, &PostParams::default()).expect("pod created");

    let attached = eventually("the volume attached", || {
        attachment(&cluster).filter(|a| a.status.as_ref().is_some_and(|s| s.attached))
    });
    assert_eq!(attached.spec.attacher, DRIVER);
    assert_eq!(attached.spec.node_name, "node-a");
    assert_eq!(attached.spec.source.persistent_volume_name.as_deref(), Some("pv-attach"));
    eventually("the node lists it attached", || (attached_names(&node(&cluster)) == [unique_name()]).then_some(()));
    eventually("the node uses it", || (in_use(&node(&cluster)) == [unique_name()]).then_some(()));
    eventually("the pod running", || {
        let pod = cluster.api::<Pod>().get("user").expect("pod read");
        (pod.status.and_then(|s| s.phase).as_deref() == Some("Running")).then_some(())
    });
    let message = "AttachVolume.Attach succeeded for volume \"pv-attach\" ";
    eventually("the attach Event", || {
        (cluster.event_messages("default", "user", "SuccessfulAttachVolume") == [message]).then_some(())
    });

    // The volume is ReadWriteOnce: a pod on another node waits, told who holds it.
    let other: Pod = from(json!({"metadata": {"name": "other"}, "spec": {"nodeName": "node-b",
        "containers": [{"name": "c", "image": "nginx:1.27"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}));
    cluster.api::<Pod>().create(&other, &PostParams::default()).expect("pod created");
    let refused = "Multi-Attach error for volume \"pv-attach\" Volume is already used by pod(s) user";
    eventually("the Multi-Attach error", || {
        (cluster.event_messages("default", "other", "FailedAttachVolume") == [refused]).then_some(())
    });
    let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
    cluster.api::<Pod>().delete("other", &now).expect("pod deleted");

    cluster.restart_controllers();
    std::thread::sleep(SETTLE);
    let kept = attachment(&cluster).expect("the attachment is kept");
    assert_eq!(kept.metadata.uid, attached.metadata.uid);
    assert!(kept.metadata.deletion_timestamp.is_none());
    assert_eq!(attached_names(&node(&cluster)), [unique_name()]);
    assert_eq!(cluster.event_messages("default", "user", "SuccessfulAttachVolume").len(), 1, "no attach again");

    cluster.api::<Pod>().delete("user", &DeleteParams::default()).expect("pod deleted");
    eventually("the node no longer uses it", || in_use(&node(&cluster)).is_empty().then_some(()));
    eventually("the attachment gone", || attachment(&cluster).is_none().then_some(()));
    eventually("the node lists nothing attached", || attached_names(&node(&cluster)).is_empty().then_some(()));
}
