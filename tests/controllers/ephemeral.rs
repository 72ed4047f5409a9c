//! The ephemeral-volume-controller on both backends: a pod's generic ephemeral volume gets its
//! claim `<pod>-<volume>` from the template, controlled by the pod, and again after the claim
//! is deleted; a claim of that name the pod does not control is reported on the pod. The
//! pods select no node, so that they stay unscheduled (the pvc-protection controller then lets a
//! deleted claim go at once), and their claims a class that does not exist.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kcm::app::controllers::named;
use kcm::client::{DeleteParams, PostParams};
use serde_json::json;

use crate::harness;

use harness::{Backend, Cluster, eventually, from};

fn create_pod(cluster: &Cluster, name: &str) -> Pod {
    let pod: Pod = from(json!({"metadata": {"name": name}, "spec": {"nodeSelector": {"kcm-test": "nowhere"},
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        "volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
            "metadata": {"labels": {"app": name}, "annotations": {"purpose": "scratch"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "manual",
                "resources": {"requests": {"storage": "1Mi"}}}}}}]}}));
    cluster.api::<Pod>().create(&pod, &PostParams::default()).expect("pod created")
}

fn claim(cluster: &Cluster, name: &str) -> Option<PersistentVolumeClaim> {
    cluster.api::<PersistentVolumeClaim>().get_opt(name).expect("claim read")
}

on_both_backends!(ephemeral_volumes_get_claims_owned_by_their_pods);
fn ephemeral_volumes_get_claims_owned_by_their_pods(backend: Backend) {
    let controllers = [named("ephemeral-volume-controller"), named("persistentvolumeclaim-protection-controller")];
    let cluster = harness::with(&controllers).on(backend).start();
    let pod = create_pod(&cluster, "web");
    let created = eventually("the claim created", || claim(&cluster, "web-scratch"));
    let owner = &created.metadata.owner_references.as_ref().expect("an owner")[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Pod", "web"));
    assert_eq!(Some(&owner.uid), pod.metadata.uid.as_ref());
    assert_eq!((owner.controller, owner.block_owner_deletion), (Some(true), Some(true)));
    assert_eq!(created.metadata.labels, Some([("app".to_string(), "web".to_string())].into()));
    let annotations = created.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations.get("purpose").map(String::as_str), Some("scratch"));
    let spec = created.spec.clone().expect("a spec");
    assert_eq!(spec.storage_class_name.as_deref(), Some("manual"));

    // A deleted claim is created again for its live pod.
    cluster.api::<PersistentVolumeClaim>().delete("web-scratch", &DeleteParams::default()).expect("claim deleted");
    eventually("the claim created again", || {
        claim(&cluster, "web-scratch").filter(|c| c.metadata.uid != created.metadata.uid)
    });

    // A claim of the same name that the pod does not control.
    let squatter: PersistentVolumeClaim = from(json!({"metadata": {"name": "other-scratch"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": "manual", "resources": {"requests": {"storage": "1Mi"}}}}));
    cluster.api::<PersistentVolumeClaim>().create(&squatter, &PostParams::default()).expect("claim created");
    create_pod(&cluster, "other");
    let expected = "ephemeral volume scratch: PVC default/other-scratch was not created for pod default/other \
                    (pod is not owner)";
    eventually("the FailedBinding Event", || {
        cluster.event_messages("default", "other", "FailedBinding").iter().any(|m| m == expected).then_some(())
    });
    let kept = claim(&cluster, "other-scratch").expect("the claim kept");
    assert!(kept.metadata.owner_references.is_none(), "the claim is left alone");
}
