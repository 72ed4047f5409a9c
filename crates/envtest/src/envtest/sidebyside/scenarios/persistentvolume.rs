//! Side-by-side scenario of the `persistentvolume` controller: `persistentvolume`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "persistentvolume",
    summary: "three claims bound to three static volumes of different sizes, a WaitForFirstConsumer claim \
                  provisioned and bound once its pod is scheduled, a claim of the default class provisioned; a \
                  Retain volume Released when its claim goes",
    nodes: 1,
    flags: &[],
    apiserver_flags: &[],
    compare_nodes: false,
    run: persistent_volume,
}];

pub(super) fn claim_phase(steps: &Steps, name: &str) -> Result<Option<Value>, Error> {
    let claim = steps.get(&format!("{CLAIMS}/{name}"))?.unwrap_or_default();
    Ok((claim["status"]["phase"] == "Bound").then_some(claim))
}

/// Static binding, delayed and immediate provisioning, then a Retain volume released.
pub(super) fn persistent_volume(steps: &mut Steps) -> Result<(), Error> {
    let class = json!({"metadata": {"name": "sbs-delayed"}, "provisioner": CSI_DRIVER,
        "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer"});
    steps.create("/apis/storage.k8s.io/v1/storageclasses", class)?;
    let sizes = [("sbs-pv-small", "1Gi"), ("sbs-pv-medium", "5Gi"), ("sbs-pv-large", "10Gi")];
    for (name, size) in sizes {
        let volume = json!({"metadata": {"name": name}, "spec": {"capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": format!("/data/{name}")}}});
        steps.create(VOLUMES, volume)?;
    }
    steps.cluster_objects = sizes.iter().map(|(name, _)| format!("{VOLUMES}/{name}")).collect();
    steps.wait("the static volumes Available", |s| {
        for (name, _) in sizes {
            let volume = s.get(&format!("{VOLUMES}/{name}"))?.unwrap_or_default();
            if volume["status"]["phase"] != "Available" {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })?;
    let claim = |name: &str, size: &str, class: Option<&str>| {
        let mut spec = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}});
        if let Some(class) = class {
            spec["storageClassName"] = json!(class);
        }
        json!({"metadata": {"name": name}, "spec": spec})
    };
    for (name, size) in [("four", "4Gi"), ("tiny", "800Mi"), ("six", "6Gi")] {
        steps.create(CLAIMS, claim(name, size, Some("")))?;
    }
    steps.create(CLAIMS, claim("auto", "3Gi", None))?;
    steps.create(CLAIMS, claim("wait", "1Gi", Some("sbs-delayed")))?;
    for name in ["four", "tiny", "six", "auto"] {
        steps.wait(&format!("claim {name} bound"), |s| claim_phase(s, name))?;
    }
    steps.wait("the WaitForFirstConsumer Event", |s| {
        let events = s.list(&format!("/api/v1/namespaces/{NAMESPACE}/events"))?;
        Ok(events.iter().any(|e| e["reason"] == "WaitForFirstConsumer").then_some(()))
    })?;
    let auto = steps.get(&format!("{CLAIMS}/auto"))?.unwrap_or_default();
    steps.cluster_objects.push(format!("{VOLUMES}/{}", auto["spec"]["volumeName"].as_str().unwrap_or_default()));
    steps.checkpoint("static claims bound to the smallest fitting volumes; auto provisioned; wait waiting")?;
    let pod = json!({"metadata": {"name": "user"}, "spec": {
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "wait"}}],
        "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}], "terminationGracePeriodSeconds": 5}});
    steps.create(&format!("/api/v1/namespaces/{NAMESPACE}/pods"), pod)?;
    let wait = steps.wait("claim wait bound", |s| claim_phase(s, "wait"))?;
    steps.cluster_objects.push(format!("{VOLUMES}/{}", wait["spec"]["volumeName"].as_str().unwrap_or_default()));
    steps.wait_pods_ready(NAMESPACE, "", 1)?;
    steps.checkpoint("wait provisioned on the pod's node and bound")?;
    steps.delete(&format!("{CLAIMS}/four"), None)?;
    steps.wait("sbs-pv-medium Released", |s| {
        let volume = s.get(&format!("{VOLUMES}/sbs-pv-medium"))?.unwrap_or_default();
        Ok((volume["status"]["phase"] == "Released").then_some(()))
    })?;
    steps.checkpoint("four deleted: its Retain volume Released")
}
