//! The persistentvolume-binder-controller on both backends, with the simulated external
//! provisioner and scheduler: three claims bound to three static volumes of different sizes
//! (each the smallest that fits), a pre-bound claim, a `WaitForFirstConsumer` claim bound
//! after its pod is scheduled, a provisioned claim; then a `Retain` volume Released once its
//! claim is deleted and a `Delete` volume removed by the provisioner; a `Delete` volume no deleter
//! plugin can delete is marked Failed.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kcm::app::controllers::named;
use kcm::client::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, eventually, from};

const PROVISIONER: &str = kcm_sandbox::sandbox::nodes::csi::DRIVER;

fn start(backend: Backend) -> Cluster {
    let controllers = [
        named("persistentvolume-binder-controller"),
        named("persistentvolumeclaim-protection-controller"),
        named("persistentvolume-protection-controller"),
    ];
    harness::with(&controllers).on(backend).nodes(&["node-a"]).node_options(harness::fast_nodes()).start()
}

fn static_volume(name: &str, size: &str) -> PersistentVolume {
    from(json!({"metadata": {"name": name}, "spec": {"capacity": {"storage": size},
        "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Retain",
        "hostPath": {"path": format!("/data/{name}")}}}))
}

fn claim(name: &str, size: &str, class: Option<&str>, volume: Option<&str>) -> PersistentVolumeClaim {
    let mut spec = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}});
    if let Some(class) = class {
        spec["storageClassName"] = json!(class);
    }
    if let Some(volume) = volume {
        spec["volumeName"] = json!(volume);
    }
    from(json!({"metadata": {"name": name}, "spec": spec}))
}

fn bound_claim(cluster: &Cluster, name: &str) -> PersistentVolumeClaim {
    let claims = cluster.api::<PersistentVolumeClaim>();
    eventually(&format!("claim {name} bound"), || {
        claims
            .get_opt(name)
            .ok()
            .flatten()
            .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
    })
}

fn volume_phase(volumes: &Api<PersistentVolume>, name: &str) -> Option<String> {
    volumes.get_opt(name).ok().flatten().and_then(|v| v.status.and_then(|s| s.phase))
}

fn annotation<'a>(meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str)
}

fn volume_name(claim: &PersistentVolumeClaim) -> String {
    claim.spec.as_ref().and_then(|s| s.volume_name.clone()).unwrap_or_default()
}

on_both_backends!(claims_bind_to_static_delayed_and_provisioned_volumes);
fn claims_bind_to_static_delayed_and_provisioned_volumes(backend: Backend) {
    let cluster = start(backend);
    let volumes = Api::<PersistentVolume>::cluster(&cluster.client);
    let claims = cluster.api::<PersistentVolumeClaim>();
    let post = PostParams::default();
    for (name, size) in [("pv-small", "1Gi"), ("pv-medium", "5Gi"), ("pv-large", "10Gi"), ("pv-pre", "2Gi")] {
        volumes.create(&static_volume(name, size), &post).expect("volume created");
    }
    let delayed: StorageClass = from(json!({"metadata": {"name": "delayed"}, "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer"}));
    Api::<StorageClass>::cluster(&cluster.client).create(&delayed, &post).expect("class created");
    // Static claims name the empty class; `pre` names its volume.
    for (name, size, volume) in
        [("four", "4Gi", None), ("tiny", "800Mi", None), ("six", "6Gi", None), ("pre", "1Gi", Some("pv-pre"))]
    {
        claims.create(&claim(name, size, Some(""), volume), &post).expect("claim created");
    }
    claims.create(&claim("wait", "1Gi", Some("delayed"), None), &post).expect("claim created");
    claims.create(&claim("auto", "3Gi", None, None), &post).expect("claim created");

    for (claim, volume) in [("four", "pv-medium"), ("tiny", "pv-small"), ("six", "pv-large"), ("pre", "pv-pre")] {
        let bound = bound_claim(&cluster, claim);
        assert_eq!(volume_name(&bound), volume, "{claim}");
        assert_eq!(annotation(&bound.metadata, "pv.kubernetes.io/bind-completed"), Some("yes"));
        let by_controller = annotation(&bound.metadata, "pv.kubernetes.io/bound-by-controller");
        assert_eq!(by_controller, (claim != "pre").then_some("yes"), "{claim}");
        let capacity = bound.status.and_then(|s| s.capacity).unwrap_or_default();
        let expected = volumes.get(volume).expect("volume read");
        assert_eq!(capacity.get("storage"), expected.spec.as_ref().and_then(|s| s.capacity.as_ref()?.get("storage")));
        assert_eq!(expected.status.and_then(|s| s.phase).as_deref(), Some("Bound"));
        let reference = expected.spec.and_then(|s| s.claim_ref).expect("a claimRef");
        assert_eq!(reference.uid, bound.metadata.uid, "{volume}");
    }

    // Provisioned through the default class.
    let auto = bound_claim(&cluster, "auto");
    let uid = auto.metadata.uid.clone().unwrap_or_default();
    assert_eq!(volume_name(&auto), format!("pvc-{uid}"));
    assert_eq!(annotation(&auto.metadata, "volume.kubernetes.io/storage-provisioner"), Some(PROVISIONER));
    assert_eq!(annotation(&auto.metadata, "volume.beta.kubernetes.io/storage-provisioner"), Some(PROVISIONER));
    let provisioned = volumes.get(&format!("pvc-{uid}")).expect("the provisioned volume");
    assert_eq!(annotation(&provisioned.metadata, "pv.kubernetes.io/provisioned-by"), Some(PROVISIONER));
    assert_eq!(provisioned.spec.as_ref().and_then(|s| s.csi.as_ref()).map(|c| c.driver.as_str()), Some(PROVISIONER));
    let external = format!(
        "Waiting for a volume to be created either by the external provisioner '{PROVISIONER}' or manually by the \
         system administrator. If volume creation is delayed, please verify that the provisioner is running and \
         correctly registered."
    );
    eventually("the ExternalProvisioning Event", || {
        cluster.event_messages("default", "auto", "ExternalProvisioning").contains(&external).then_some(())
    });

    // The delayed claim waits for its pod, which the scheduler places first.
    eventually("the WaitForFirstConsumer Event", || {
        let messages = cluster.event_messages("default", "wait", "WaitForFirstConsumer");
        messages.iter().any(|m| m == "waiting for first consumer to be created before binding").then_some(())
    });
    assert!(volume_name(&claims.get("wait").expect("claim read")).is_empty());
    let pod: Pod = from(json!({"metadata": {"name": "user"}, "spec": {
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "wait"}}],
        "containers": [{"name": "app", "image": "nginx:1.27"}]}}));
    cluster.api::<Pod>().create(&pod, &post).expect("pod created");
    let waited = bound_claim(&cluster, "wait");
    assert_eq!(annotation(&waited.metadata, "volume.kubernetes.io/selected-node"), Some("node-a"));
    let local = volumes.get(&volume_name(&waited)).expect("its volume");
    let affinity = serde_json::to_value(local.spec.and_then(|s| s.node_affinity)).unwrap_or(Value::Null);
    assert_eq!(affinity["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"], json!(["node-a"]));
    eventually("pod user scheduled", || {
        let pod = cluster.api::<Pod>().get("user").ok()?;
        (pod.spec?.node_name.as_deref() == Some("node-a")).then_some(())
    });

    // Reclaiming: Retain keeps a Released volume, Delete has the provisioner remove it.
    let params = DeleteParams::default();
    claims.delete("four", &params).expect("claim deleted");
    claims.delete("auto", &params).expect("claim deleted");
    eventually("pv-medium Released", || {
        (volume_phase(&volumes, "pv-medium").as_deref() == Some("Released")).then_some(())
    });
    eventually("the provisioned volume gone", || volumes.get_opt(&format!("pvc-{uid}")).ok()?.is_none().then_some(()));
    let released = volumes.get("pv-medium").expect("volume read").status.unwrap_or_default();
    assert_eq!(released.phase.as_deref(), Some("Released"));
    assert!(released.last_phase_transition_time.is_some(), "the API server stamps the phase change");
}

on_both_backends!(a_released_volume_without_a_deleter_fails_at_once);
/// v1.36's `deleteVolumeOperation` looks for the deleter plugin first: an NFS volume (whose
/// plugin cannot delete) with the Delete policy is marked Failed as soon as it is Released.
fn a_released_volume_without_a_deleter_fails_at_once(backend: Backend) {
    let cluster = start(backend);
    let volumes = Api::<PersistentVolume>::cluster(&cluster.client);
    let claims = cluster.api::<PersistentVolumeClaim>();
    let post = PostParams::default();
    let nfs: PersistentVolume = from(json!({"metadata": {"name": "pv-nfs"}, "spec": {"capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteMany"], "persistentVolumeReclaimPolicy": "Delete",
        "nfs": {"server": "nfs.example", "path": "/exports/a"}}}));
    volumes.create(&nfs, &post).expect("volume created");
    let mut shared = claim("shared", "1Gi", Some(""), Some("pv-nfs"));
    shared.spec.as_mut().expect("a spec").access_modes = Some(vec!["ReadWriteMany".into()]);
    claims.create(&shared, &post).expect("claim created");
    bound_claim(&cluster, "shared");
    claims.delete("shared", &DeleteParams::default()).expect("claim deleted");
    eventually("pv-nfs Failed", || (volume_phase(&volumes, "pv-nfs").as_deref() == Some("Failed")).then_some(()));
    let message = "error getting deleter volume plugin for volume \"pv-nfs\": no deletable volume plugin matched";
    let status = volumes.get("pv-nfs").expect("volume read").status.unwrap_or_default();
    assert_eq!(status.message.as_deref(), Some(message));
    eventually("the VolumeFailedDelete Event", || {
        let messages = cluster.event_messages("default", "pv-nfs", "VolumeFailedDelete");
        messages.iter().any(|m| m == message).then_some(())
    });
}

on_both_backends!(binding_reports_the_volumes_class_and_pre_resize_capacity);
/// `updateClaimStatus` while binding (VolumeAttributesClass GA): the claim's
/// `status.currentVolumeAttributesClassName` is the volume's class, and a volume in the middle of
/// an in-tree resize gives the claim its `pre-resize-capacity`, not its new size.
fn binding_reports_the_volumes_class_and_pre_resize_capacity(backend: Backend) {
    let cluster = start(backend);
    let volumes = Api::<PersistentVolume>::cluster(&cluster.client);
    let claims = cluster.api::<PersistentVolumeClaim>();
    let post = PostParams::default();
    let mut volume: Value = json!({"metadata": {"name": "pv-gold",
            "annotations": {"volume.alpha.kubernetes.io/pre-resize-capacity": "1Gi"}},
        "spec": {"capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain", "volumeAttributesClassName": "gold",
            "csi": {"driver": PROVISIONER, "volumeHandle": "gold-1"}}});
    volume["spec"]["storageClassName"] = json!("");
    volumes.create(&from(volume), &post).expect("volume created");
    let mut gold = claim("gold", "1Gi", Some(""), Some("pv-gold"));
    gold.spec.as_mut().expect("a spec").volume_attributes_class_name = Some("gold".into());
    claims.create(&gold, &post).expect("claim created");
    let bound = bound_claim(&cluster, "gold");
    let status = bound.status.expect("a status");
    assert_eq!(status.current_volume_attributes_class_name.as_deref(), Some("gold"));
    let capacity = status.capacity.as_ref().and_then(|c| c.get("storage")).map(|q| q.0.as_str());
    assert_eq!(capacity, Some("1Gi"));
}
