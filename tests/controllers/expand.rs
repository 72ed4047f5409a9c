//! The persistentvolume-expander-controller on both backends, with the simulated CSI resizer:
//! claims pre-bound to volumes created here (as the binder would bind them), in a class that
//! allows expansion. A CSI volume's claim that grows gets the Event `ExternalExpanding`
//! ("waiting for an external controller"), and the simulated resizer grows the volume and the
//! claim's capacity; a migrated in-tree volume's claim gets the resizer annotation naming its
//! CSI driver. kube-apiserver's PersistentVolumeClaimResize admission refuses to grow a claim
//! whose class does not allow expansion.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kcm::app::controllers::named;
use kcm::client::{Api, Patch, PostParams};
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, eventually, from};

const DRIVER: &str = kcm_sandbox::sandbox::nodes::csi::DRIVER;
const RESIZER_ANNOTATION: &str = "volume.kubernetes.io/storage-resizer";

fn create_class(cluster: &Cluster, name: &str, expandable: bool) {
    let class: StorageClass = from(json!({"metadata": {"name": name}, "provisioner": DRIVER,
        "allowVolumeExpansion": expandable, "volumeBindingMode": "Immediate"}));
    Api::<StorageClass>::cluster(&cluster.client).create(&class, &PostParams::default()).expect("class created");
}

/// A claim of `class` bound to a volume `pv-<name>` with `source`, both 1Gi, as the binder would
/// leave them.
fn bound_claim(cluster: &Cluster, name: &str, class: &str, source: Value) {
    let volume_name = format!("pv-{name}");
    let claim: PersistentVolumeClaim = from(json!({"metadata": {"name": name}, "spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": class, "volumeName": volume_name,
        "resources": {"requests": {"storage": "1Gi"}}}}));
    let claims = cluster.api::<PersistentVolumeClaim>();
    let created = claims.create(&claim, &PostParams::default()).expect("claim created");
    let mut spec = json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
        "storageClassName": class, "persistentVolumeReclaimPolicy": "Delete",
        "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "default", "name": name,
            "uid": created.metadata.uid}});
    spec.as_object_mut().expect("an object").extend(source.as_object().expect("an object").clone());
    let volume: PersistentVolume = from(json!({"metadata": {"name": volume_name}, "spec": spec}));
    let volumes = Api::<PersistentVolume>::cluster(&cluster.client);
    volumes.create(&volume, &PostParams::default()).expect("volume created");
    let bound = Patch::Merge(json!({"status": {"phase": "Bound"}}));
    volumes.patch_status(&volume_name, &bound, &PostParams::default()).expect("volume bound");
    let status =
        json!({"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}});
    claims.patch_status(name, &Patch::Merge(status), &PostParams::default()).expect("claim bound");
}

fn grow(cluster: &Cluster, name: &str, size: &str) -> Result<PersistentVolumeClaim, kcm::client::Error> {
    let patch = Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": size}}}}));
    cluster.api::<PersistentVolumeClaim>().patch(name, &patch, &PostParams::default())
}

fn claim_json(cluster: &Cluster, name: &str) -> Value {
    serde_json::to_value(cluster.api::<PersistentVolumeClaim>().get(name).expect("claim read")).expect("json")
}

on_both_backends!(claims_grow_through_the_external_resizer);
fn claims_grow_through_the_external_resizer(backend: Backend) {
    let cluster = harness::with(&[named("persistentvolume-expander-controller")]).on(backend).start();
    create_class(&cluster, "expandable", true);
    create_class(&cluster, "fixed", false);

    // A class that does not allow expansion: refused by admission.
    bound_claim(&cluster, "stuck", "fixed", json!({"csi": {"driver": DRIVER, "volumeHandle": "stuck"}}));
    let kcm::client::Error::Api(refused) = grow(&cluster, "stuck", "2Gi").expect_err("growing is refused") else {
        panic!("an API error")
    };
    assert_eq!(
        refused.message,
        "persistentvolumeclaims \"stuck\" is forbidden: only dynamically provisioned pvc can be resized and the \
         storageclass that provisions the pvc must support resize",
    );

    // A CSI volume of a driver whose resizer does not run: the controller says it waits for it.
    let foreign = json!({"csi": {"driver": "other.csi.example.com", "volumeHandle": "foreign"}});
    bound_claim(&cluster, "foreign", "expandable", foreign);
    grow(&cluster, "foreign", "2Gi").expect("claim grown");
    eventually("the ExternalExpanding Event", || {
        let messages = cluster.event_messages("default", "foreign", "ExternalExpanding");
        messages.contains(&"waiting for an external controller to expand this PVC".to_string()).then_some(())
    });

    // A CSI volume of the simulated driver: its external resizer grows both (whether the
    // controller's Event comes first is a race with it, as on a real cluster).
    bound_claim(&cluster, "data", "expandable", json!({"csi": {"driver": DRIVER, "volumeHandle": "data"}}));
    grow(&cluster, "data", "2Gi").expect("claim grown");
    let grown = eventually("the claim's capacity grown", || {
        let claim = claim_json(&cluster, "data");
        (claim["status"]["capacity"]["storage"] == "2Gi").then_some(claim)
    });
    assert_eq!(grown["status"]["allocatedResources"]["storage"], "2Gi");
    assert!(grown["status"]["allocatedResourceStatuses"].is_null(), "{grown}");
    assert!(grown["metadata"]["annotations"][RESIZER_ANNOTATION].is_null(), "no annotation for a CSI volume");
    let volume = Api::<PersistentVolume>::cluster(&cluster.client).get("pv-data").expect("volume read");
    assert_eq!(
        volume.spec.and_then(|s| s.capacity).and_then(|c| c.get("storage").cloned()).map(|q| q.0),
        Some("2Gi".into())
    );
    eventually("the resizer's Events", || {
        let resizing = cluster.event_messages("default", "data", "Resizing");
        let done = cluster.event_messages("default", "data", "VolumeResizeSuccessful");
        (resizing == ["External resizer is resizing volume pv-data"] && done == ["Resize volume succeeded"])
            .then_some(())
    });

    // A migrated in-tree volume: the claim names the CSI driver's resizer.
    bound_claim(&cluster, "legacy", "expandable", json!({"awsElasticBlockStore": {"volumeID": "vol-1"}}));
    grow(&cluster, "legacy", "3Gi").expect("claim grown");
    eventually("the resizer annotation", || {
        (claim_json(&cluster, "legacy")["metadata"]["annotations"][RESIZER_ANNOTATION] == "ebs.csi.aws.com")
            .then_some(())
    });
    // The Event is recorded beside the annotation's patch and reaches the server on its own.
    let expected = "CSI migration enabled for kubernetes.io/aws-ebs; waiting for external resizer to expand the pvc";
    eventually("the ExternalExpanding Event", || {
        let messages = cluster.event_messages("default", "legacy", "ExternalExpanding");
        messages.iter().any(|m| m == expected).then_some(())
    });
}
