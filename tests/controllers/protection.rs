//! The persistentvolumeclaim-protection and persistentvolume-protection controllers on both
//! backends, with the binder and the simulated provisioner binding claims of the default class `standard`: a
//! claim a scheduled pod uses stays Terminating until the pod goes; an unused claim goes at
//! once; a claim or volume that lost its finalizer gets it back; a volume being deleted keeps
//! its finalizer while Bound; a namespace holding a StatefulSet's claims finishes deleting.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, Pod};
use kcm::app::controllers::named;
use kcm::client::{Api, DeleteParams, PostParams};
use serde_json::json;

use crate::harness;

use harness::{Backend, Cluster, drop_finalizers, eventually, from};

const PVC_FINALIZER: &str = "kubernetes.io/pvc-protection";
const PV_FINALIZER: &str = "kubernetes.io/pv-protection";

/// How long a kept object is watched for not going: the controller reacts in milliseconds.
const SETTLE: Duration = Duration::from_millis(1500);

fn start(backend: Backend) -> Cluster {
    let controllers = [
        named("persistentvolumeclaim-protection-controller"),
        named("persistentvolume-protection-controller"),
        named("persistentvolume-binder-controller"),
        named("persistentvolume-attach-detach-controller"),
    ];
    harness::with(&controllers).on(backend).start()
}

fn create_claim(cluster: &Cluster, name: &str) {
    let claim: PersistentVolumeClaim = from(json!({"metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}}}));
    cluster.api::<PersistentVolumeClaim>().create(&claim, &PostParams::default()).expect("claim created");
}

fn claim(cluster: &Cluster, name: &str) -> Option<PersistentVolumeClaim> {
    cluster.api::<PersistentVolumeClaim>().get_opt(name).expect("claim read")
}

fn has(finalizers: &Option<Vec<String>>, finalizer: &str) -> bool {
    finalizers.iter().flatten().any(|f| f == finalizer)
}

fn delete<K>(api: &Api<K>, name: &str)
where
    K: k8s_openapi::Resource + serde::de::DeserializeOwned + serde::Serialize + Clone + std::fmt::Debug,
    K::Scope: kcm::client::Scope,
{
    api.delete(name, &DeleteParams::default()).expect("deleted");
}

on_both_backends!(a_claim_in_use_stays_until_its_pod_goes);
fn a_claim_in_use_stays_until_its_pod_goes(backend: Backend) {
    let cluster = start(backend);
    create_claim(&cluster, "data");
    let pod: Pod = from(json!({"metadata": {"name": "user"}, "spec": {"nodeName": "node-a",
        "containers": [{"name": "c", "image": "nginx:1.27"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}));
    cluster.api::<Pod>().create(&pod, &PostParams::default()).expect("pod created");
    delete(&cluster.api::<PersistentVolumeClaim>(), "data");
    eventually("the claim terminating", || claim(&cluster, "data").filter(|c| c.metadata.deletion_timestamp.is_some()));
    std::thread::sleep(SETTLE);
    let kept = claim(&cluster, "data").expect("the claim is kept while a pod uses it");
    assert!(has(&kept.metadata.finalizers, PVC_FINALIZER));
    let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
    cluster.api::<Pod>().delete("user", &now).expect("pod deleted");
    eventually("the claim gone", || claim(&cluster, "data").is_none().then_some(()));
}

on_both_backends!(an_unused_claim_gets_its_finalizer_back_and_goes_at_once_when_deleted);
fn an_unused_claim_gets_its_finalizer_back_and_goes_at_once_when_deleted(backend: Backend) {
    let cluster = start(backend);
    create_claim(&cluster, "spare");
    drop_finalizers(&cluster.api::<PersistentVolumeClaim>(), "spare");
    eventually("the finalizer added", || {
        claim(&cluster, "spare").filter(|c| has(&c.metadata.finalizers, PVC_FINALIZER))
    });
    delete(&cluster.api::<PersistentVolumeClaim>(), "spare");
    eventually("the claim gone", || claim(&cluster, "spare").is_none().then_some(()));
}

on_both_backends!(a_volume_being_deleted_keeps_its_finalizer_while_bound);
fn a_volume_being_deleted_keeps_its_finalizer_while_bound(backend: Backend) {
    let cluster = start(backend);
    create_claim(&cluster, "bound");
    let volume_name = eventually("the claim bound", || {
        let claim = claim(&cluster, "bound")?;
        let bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        bound.then(|| claim.spec.and_then(|s| s.volume_name)).flatten()
    });
    let volumes = Api::<PersistentVolume>::cluster(&cluster.client);
    let volume = |volumes: &Api<PersistentVolume>| volumes.get_opt(&volume_name).expect("volume read");
    drop_finalizers(&volumes, &volume_name);
    eventually("the volume's finalizer added", || {
        volume(&volumes).filter(|v| has(&v.metadata.finalizers, PV_FINALIZER))
    });
    eventually("the volume bound", || {
        volume(&volumes).filter(|v| v.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
    });
    delete(&volumes, &volume_name);
    std::thread::sleep(SETTLE);
    let kept = volume(&volumes).expect("a Bound volume is kept");
    assert!(kept.metadata.deletion_timestamp.is_some() && has(&kept.metadata.finalizers, PV_FINALIZER));
    // Its claim goes (nothing uses it); the binder releases the volume, which then goes.
    delete(&cluster.api::<PersistentVolumeClaim>(), "bound");
    eventually("the claim gone", || claim(&cluster, "bound").is_none().then_some(()));
    eventually("the volume gone", || volume(&volumes).is_none().then_some(()));
}

on_both_backends!(a_namespace_holding_a_stateful_sets_claims_finishes_deleting);
fn a_namespace_holding_a_stateful_sets_claims_finishes_deleting(backend: Backend) {
    let controllers = [
        named("statefulset-controller"),
        named("namespace-controller"),
        named("garbage-collector-controller"),
        named("persistentvolumeclaim-protection-controller"),
        named("persistentvolume-binder-controller"),
        named("persistentvolume-attach-detach-controller"),
    ];
    let cluster = harness::with(&controllers).on(backend).namespaces(&["team"]).start();
    let set: StatefulSet = from(json!({"metadata": {"name": "db"}, "spec": {
        "replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
        "template": {"metadata": {"labels": {"app": "db"}},
            "spec": {"containers": [{"name": "db", "image": "postgres:17"}]}},
        "volumeClaimTemplates": [{"metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}}}]}}));
    let sets = Api::<StatefulSet>::namespaced(&cluster.client, "team");
    sets.create(&set, &PostParams::default()).expect("set created");
    let claims = Api::<PersistentVolumeClaim>::namespaced(&cluster.client, "team");
    eventually("both claims in use", || {
        let ready = sets.get("db").ok()?.status?.ready_replicas == Some(2);
        (ready && claims.list(&Default::default()).expect("claims").items.len() == 2).then_some(())
    });
    let namespaces = Api::<Namespace>::cluster(&cluster.client);
    namespaces.delete("team", &DeleteParams::default()).expect("namespace deleted");
    eventually("the namespace gone", || namespaces.get_opt("team").expect("a get").is_none().then_some(()));
}
