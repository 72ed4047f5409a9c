//! Side-by-side scenario of the `vacprotection` controller: `vacprotection`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "vacprotection",
    summary: "VolumeAttributesClasses given their finalizer; one used by a bound claim and its volume and one \
                  by a volume deleted and kept until the claim and its volume are modified to another class and the \
                  volume is deleted",
    nodes: 1,
    // The claim and volume are bound by the steps, as the binder would (the binder's part is
    // not compared here): upstream's binder is left out on both sides.
    flags: &["--controllers=-persistentvolume-binder-controller"],
    apiserver_flags: &[],
    compare_nodes: false,
    run: vac_protection,
}];

pub(super) const VACS: &str = "/apis/storage.k8s.io/v1/volumeattributesclasses";

pub(super) const VAC_FINALIZER: &str = "kubernetes.io/vac-protection";

pub(super) fn has_vac_finalizer(steps: &Steps, name: &str) -> Result<Option<()>, Error> {
    let vac = steps.get(&format!("{VACS}/{name}"))?.unwrap_or_default();
    let finalizers = vac["metadata"]["finalizers"].as_array().cloned().unwrap_or_default();
    Ok(finalizers.iter().any(|f| f == VAC_FINALIZER).then_some(()))
}

pub(super) fn vac_protection(steps: &mut Steps) -> Result<(), Error> {
    for (name, iops) in [("gold", "5000"), ("bronze", "500"), ("silver", "2000")] {
        let vac = json!({"metadata": {"name": name}, "driverName": CSI_DRIVER, "parameters": {"iops": iops}});
        steps.create(VACS, vac)?;
        steps.cluster_objects.push(format!("{VACS}/{name}"));
    }
    // A claim of gold bound to a volume of gold, as the binder leaves them (a bound claim's class
    // may change), and a volume of silver no claim uses.
    let claim = json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "storageClassName": "", "volumeName": "sbs-data", "volumeAttributesClassName": "gold",
        "resources": {"requests": {"storage": "1Gi"}}}});
    let claim = steps.create(CLAIMS, claim)?;
    let volume = |name: &str, class: &str, claim_ref: Value| {
        json!({"metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
            "storageClassName": "", "persistentVolumeReclaimPolicy": "Retain", "volumeAttributesClassName": class,
            "csi": {"driver": CSI_DRIVER, "volumeHandle": name}, "claimRef": claim_ref}})
    };
    let claim_ref = json!({"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": NAMESPACE,
        "name": "data", "uid": claim["metadata"]["uid"]});
    steps.create(VOLUMES, volume("sbs-data", "gold", claim_ref))?;
    steps.create(VOLUMES, volume("sbs-silver", "silver", Value::Null))?;
    steps.cluster_objects.extend(["sbs-data", "sbs-silver"].map(|v| format!("{VOLUMES}/{v}")));
    steps.patch(&format!("{VOLUMES}/sbs-data/status"), json!({"status": {"phase": "Bound"}}))?;
    let bound = json!({"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
        "currentVolumeAttributesClassName": "gold"}});
    steps.patch(&format!("{CLAIMS}/data/status"), bound)?;
    for name in ["gold", "bronze", "silver"] {
        steps.wait(&format!("{name}'s finalizer"), |s| has_vac_finalizer(s, name))?;
    }
    steps.checkpoint("three classes protected, gold used by a bound claim and its volume, silver by a volume")?;
    for name in ["gold", "silver"] {
        steps.delete(&format!("{VACS}/{name}"), None)?;
    }
    steps.checkpoint("gold and silver deleted: kept while in use")?;
    steps.patch(&format!("{CLAIMS}/data"), json!({"spec": {"volumeAttributesClassName": "bronze"}}))?;
    steps.checkpoint("the claim asks for bronze: gold kept while its volume is modified")?;
    // What the external resizer writes once the volume is modified.
    steps.patch(&format!("{VOLUMES}/sbs-data"), json!({"spec": {"volumeAttributesClassName": "bronze"}}))?;
    steps.patch(&format!("{CLAIMS}/data/status"), json!({"status": {"currentVolumeAttributesClassName": "bronze"}}))?;
    steps.wait_gone(&format!("{VACS}/gold"))?;
    steps.checkpoint("the volume modified to bronze: gold gone")?;
    steps.delete(&format!("{VOLUMES}/sbs-silver"), None)?;
    steps.wait_gone(&format!("{VACS}/silver"))?;
    steps.checkpoint("the volume of silver deleted: silver gone")
}
