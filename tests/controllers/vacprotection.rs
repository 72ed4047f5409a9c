//! The volumeattributesclass-protection-controller on the real server (the sandbox does not
//! serve `storage.k8s.io/v1` VolumeAttributesClasses yet): a class gets the finalizer
//! `kubernetes.io/vac-protection`; a class in use by a claim or a volume keeps it while being
//! deleted, and goes once the last reference is gone.
//!
//! The controller looks for references only in its caches, as upstream's, so a class deleted
//! the instant after a volume naming it was created may lose its finalizer before the volume
//! reaches the cache, in upstream's controller too. The objects whose references keep a class
//! are therefore created before the controller starts (its workers wait for the caches' first
//! list); a reference that changes later reaches the cache before the class it frees is
//! enqueued, so the later steps are ordered by the controller itself.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::VolumeAttributesClass;
use kcm::app::controllers::named;
use kcm::client::{Api, Client, DeleteParams, Patch, PostParams};
use serde_json::json;

use crate::harness;

use harness::{Backend, Cluster, drop_finalizers, eventually, from};

const FINALIZER: &str = "kubernetes.io/vac-protection";

/// How long a kept class is watched for not going: the controller reacts in milliseconds.
const SETTLE: Duration = Duration::from_millis(1500);

/// Real server only until the sandbox serves VolumeAttributesClasses; then `on_both_backends!`.
mod a_class_in_use_by_a_claim_stays_until_the_claim_goes {
    #[test]
    fn real_server() {
        crate::harness::run_on(
            crate::harness::Backend::Real,
            super::a_class_in_use_by_a_claim_stays_until_the_claim_goes,
        );
    }
}

mod a_class_a_volume_no_longer_names_goes {
    #[test]
    fn real_server() {
        crate::harness::run_on(crate::harness::Backend::Real, super::a_class_a_volume_no_longer_names_goes);
    }
}

/// Starts the controller once `prepare` has created what the test needs in place first.
fn start(backend: Backend, prepare: impl FnOnce(&Client)) -> Cluster {
    // The gate is GA and locked on in v1.36; named for the gate table of v1.33, which has it off.
    harness::with(&[named("volumeattributesclass-protection-controller")])
        .on(backend)
        .without_nodes()
        .flags(&["--feature-gates=VolumeAttributesClass=true"])
        .start_with(|client, _| prepare(client))
}

fn classes(client: &Client) -> Api<VolumeAttributesClass> {
    Api::cluster(client)
}

fn create_class(client: &Client, name: &str) {
    let class: VolumeAttributesClass =
        from(json!({"metadata": {"name": name}, "driverName": "csi.example.com", "parameters": {"iops": "3000"}}));
    classes(client).create(&class, &PostParams::default()).expect("class created");
}

fn has_finalizer(class: &VolumeAttributesClass) -> bool {
    class.metadata.finalizers.iter().flatten().any(|f| f == FINALIZER)
}

fn protected(cluster: &Cluster, name: &str) -> VolumeAttributesClass {
    eventually("the class protected", || {
        classes(&cluster.client).get_opt(name).expect("class read").filter(has_finalizer)
    })
}

/// Deletes the class and checks that it stays, with its finalizer, while in use.
fn delete_and_expect_kept(cluster: &Cluster, name: &str) {
    classes(&cluster.client).delete(name, &DeleteParams::default()).expect("class deleted");
    eventually("the class terminating", || {
        classes(&cluster.client).get_opt(name).expect("class read").filter(|c| c.metadata.deletion_timestamp.is_some())
    });
    std::thread::sleep(SETTLE);
    let kept = classes(&cluster.client).get_opt(name).expect("class read").expect("the class is kept while in use");
    assert!(has_finalizer(&kept), "the finalizer stays while the class is in use");
}

fn wait_gone(cluster: &Cluster, name: &str) {
    eventually("the class gone", || {
        classes(&cluster.client).get_opt(name).expect("class read").is_none().then_some(())
    });
}

fn a_class_in_use_by_a_claim_stays_until_the_claim_goes(backend: Backend) {
    let cluster = start(backend, |client| {
        create_class(client, "gold");
        let claim: PersistentVolumeClaim = from(json!({"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}},
            "volumeAttributesClassName": "gold"}}));
        Api::<PersistentVolumeClaim>::namespaced(client, "default")
            .create(&claim, &PostParams::default())
            .expect("claim created");
    });
    protected(&cluster, "gold");

    delete_and_expect_kept(&cluster, "gold");

    let claims = cluster.api::<PersistentVolumeClaim>();
    claims.delete("data", &DeleteParams::default()).expect("claim deleted");
    drop_finalizers(&claims, "data");
    wait_gone(&cluster, "gold");

    // A class that lost its finalizer gets it back.
    create_class(&cluster.client, "silver");
    protected(&cluster, "silver");
    drop_finalizers(&classes(&cluster.client), "silver");
    protected(&cluster, "silver");
}

fn a_class_a_volume_no_longer_names_goes(backend: Backend) {
    let cluster = start(backend, |client| {
        create_class(client, "fast");
        create_class(client, "slow");
        let volume: PersistentVolume = from(json!({"metadata": {"name": "pv-1"}, "spec": {
            "capacity": {"storage": "1Mi"}, "accessModes": ["ReadWriteOnce"],
            "csi": {"driver": "csi.example.com", "volumeHandle": "h-1"},
            "volumeAttributesClassName": "fast"}}));
        Api::<PersistentVolume>::cluster(client).create(&volume, &PostParams::default()).expect("volume created");
    });
    protected(&cluster, "fast");
    protected(&cluster, "slow");

    delete_and_expect_kept(&cluster, "fast");

    // The volume moves to another class: the deleted one is free. The controller frees it only
    // once its cache has the move, so the cache names "slow" before "slow" is deleted below.
    let volumes = Api::<PersistentVolume>::cluster(&cluster.client);
    volumes
        .patch("pv-1", &Patch::Merge(json!({"spec": {"volumeAttributesClassName": "slow"}})), &PostParams::default())
        .expect("volume moved");
    wait_gone(&cluster, "fast");

    delete_and_expect_kept(&cluster, "slow");
    volumes.delete("pv-1", &DeleteParams::default()).expect("volume deleted");
    drop_finalizers(&volumes, "pv-1");
    wait_gone(&cluster, "slow");
}
