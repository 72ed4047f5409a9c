//! A simulated external CSI provisioner, after sig-storage-lib-external-provisioner as
//! external-provisioner runs it, for the driver [`PROVISIONER`]: it acts only on claims that
//! the PersistentVolume binder controller handed to it (annotation
//! `volume.kubernetes.io/storage-provisioner` naming it) and that name no volume yet; a claim
//! of a `WaitForFirstConsumer` class waits for the scheduler's
//! `volume.kubernetes.io/selected-node`. It creates the volume `pvc-<claim uid>`: a CSI volume
//! of the driver (`volumeHandle` `pvc-<claim uid>`, `ext4`) with the claim's request, access
//! modes and volume mode, the class's reclaim policy and mount options, a `claimRef` to the
//! claim (with its uid and resourceVersion), `pv.kubernetes.io/provisioned-by`, and, for a
//! `Delete` volume, the finalizer `external-provisioner.volume.kubernetes.io/finalizer`. For a
//! delayed claim the volume gets node affinity to the selected node's zone when the node has
//! one, else to its hostname (a simplification of CSI topology: the driver reports one
//! segment). The binder controller binds claim and volume.
//!
//! A Released volume it provisioned whose reclaim policy is `Delete` is deleted (the backend
//! has nothing to free); once deleted, its finalizer is removed.
//!
//! The default StorageClass [`DEFAULT_CLASS`] is created when the nodes start if missing (the
//! sandbox also creates it at start-up), so that kube-apiserver's DefaultStorageClass
//! admission gives it to claims that name no class, on both backends.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::{Value, json};

use super::{NodesError, Worker, log_error};
use crate::client::{Api, DeleteParams, Patch, PostParams, Preconditions};

/// The simulated CSI driver's name, which is its provisioner's (a StorageClass's `provisioner`).
pub const PROVISIONER: &str = super::csi::DRIVER;
/// The default StorageClass's name.
pub const DEFAULT_CLASS: &str = "standard";
/// external-provisioner's finalizer on the volumes it must delete.
pub const FINALIZER: &str = "external-provisioner.volume.kubernetes.io/finalizer";
const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// The default StorageClass as created at start-up.
pub fn default_class() -> Value {
    json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": DEFAULT_CLASS, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": PROVISIONER, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate",
        "allowVolumeExpansion": true})
}

/// The provisioner the claim was handed to (`getProvisionerName`'s annotations).
fn requested_provisioner(claim: &PersistentVolumeClaim) -> Option<&str> {
    let annotations = claim.metadata.annotations.as_ref()?;
    annotations
        .get(ANN_STORAGE_PROVISIONER)
        .or_else(|| annotations.get(ANN_BETA_STORAGE_PROVISIONER))
        .map(String::as_str)
}

fn selected_node(claim: &PersistentVolumeClaim) -> Option<&str> {
    claim.metadata.annotations.as_ref()?.get(ANN_SELECTED_NODE).map(String::as_str)
}

/// Whether the binding mode of `class` waits for the first consumer.
pub(super) fn is_delayed(class: &StorageClass) -> bool {
    class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer")
}

/// The required node affinity of a volume provisioned for a claim whose node was selected.
fn node_affinity(labels: &BTreeMap<String, String>, node: &str) -> Value {
    let (key, value) = match labels.get(ZONE_LABEL) {
        Some(zone) => (ZONE_LABEL, zone.as_str()),
        None => (HOSTNAME_LABEL, labels.get(HOSTNAME_LABEL).map(String::as_str).unwrap_or(node)),
    };
    json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": key, "operator": "In", "values": [value]}]}]}})
}

/// The volume provisioned for `claim` of `class`; `node_labels` of the selected node, if any.
fn provisioned_volume(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node: Option<(&str, BTreeMap<String, String>)>,
) -> Option<Value> {
    let spec = claim.spec.clone().unwrap_or_default();
    let storage = spec.resources.as_ref().and_then(|r| r.requests.as_ref()).and_then(|r| r.get("storage")).cloned()?;
    let uid = claim.metadata.uid.as_deref().unwrap_or("");
    let name = format!("pvc-{uid}");
    let reclaim = class.reclaim_policy.clone().unwrap_or_else(|| "Delete".into());
    let finalizers = if reclaim == "Delete" { json!([FINALIZER]) } else { json!([]) };
    let mut volume = json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {ANN_PROVISIONED_BY: PROVISIONER}, "finalizers": finalizers},
        "spec": {"capacity": {"storage": storage}, "accessModes": spec.access_modes,
            "persistentVolumeReclaimPolicy": reclaim,
            "storageClassName": class.metadata.name,
            "volumeMode": spec.volume_mode.unwrap_or_else(|| "Filesystem".into()),
            "csi": {"driver": PROVISIONER, "volumeHandle": name, "fsType": "ext4"},
            "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                "namespace": claim.metadata.namespace, "name": claim.metadata.name,
                "uid": uid, "resourceVersion": claim.metadata.resource_version}}});
    if let Some(options) = class.mount_options.as_ref().filter(|o| !o.is_empty()) {
        volume["spec"]["mountOptions"] = json!(options);
    }
    if let Some((node, labels)) = node {
        volume["spec"]["nodeAffinity"] = node_affinity(&labels, node);
    }
    Some(volume)
}

/// Why VolumeBinding's PreFilter finds a pod unschedulable, in kube-scheduler's words (the
/// reason in the pod's PodScheduled condition).
#[derive(Debug, thiserror::Error)]
pub(super) enum Unschedulable {
    /// A claim the pod names does not exist.
    #[error("persistentvolumeclaim \"{0}\" not found")]
    ClaimNotFound(String),
    /// A claim the pod names is being deleted.
    #[error("persistentvolumeclaim \"{0}\" is being deleted")]
    ClaimBeingDeleted(String),
    /// An Immediate claim is not bound yet.
    #[error("pod has unbound immediate PersistentVolumeClaims")]
    UnboundImmediateClaims,
}

impl Worker {
    /// Creates the default StorageClass unless some class of that name exists.
    pub(super) fn ensure_default_class(&self) -> Result<(), NodesError> {
        let api = Api::<StorageClass>::cluster(&self.shared.client);
        let class: StorageClass = serde_json::from_value(default_class())?;
        match api.create(&class, &PostParams::default()) {
            Ok(_) => Ok(()),
            Err(e) if e.is_already_exists() => Ok(()),
            Err(source) => Err(NodesError::DefaultClass { class: DEFAULT_CLASS, source }),
        }
    }

    /// Provisions a volume for every claim handed to us, then deletes our Released volumes.
    pub(super) fn provision(&mut self) {
        let wanted: Vec<PersistentVolumeClaim> =
            self.claims.values().filter(|c| self.should_provision(c)).cloned().collect();
        for claim in wanted {
            if self.stopping() {
                return;
            }
            self.provision_claim(&claim);
        }
        self.delete_released();
    }

    /// `shouldProvision`: ours, not bound, not being deleted, its node selected if delayed.
    fn should_provision(&self, claim: &PersistentVolumeClaim) -> bool {
        let volume = claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or("");
        if claim.metadata.deletion_timestamp.is_some() || !volume.is_empty() {
            return false;
        }
        if requested_provisioner(claim) != Some(PROVISIONER) {
            return false;
        }
        let uid = claim.metadata.uid.as_deref().unwrap_or("");
        if self.volumes.get("", &format!("pvc-{uid}")).is_some() {
            return false;
        }
        match self.claim_class(claim) {
            Some(class) => !is_delayed(class) || selected_node(claim).is_some(),
            None => false,
        }
    }

    /// The claim's StorageClass, if it exists and is ours.
    pub(super) fn claim_class(&self, claim: &PersistentVolumeClaim) -> Option<&StorageClass> {
        let name = claim.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or("");
        self.classes.get("", name).filter(|c| c.provisioner == PROVISIONER)
    }

    fn provision_claim(&mut self, claim: &PersistentVolumeClaim) {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or("");
        let name = claim.metadata.name.as_deref().unwrap_or("");
        let Some(class) = self.claim_class(claim) else { return };
        let node = selected_node(claim).filter(|_| is_delayed(class));
        let node = node.map(|n| {
            let labels = self.nodes.get("", n).and_then(|node| node.metadata.labels.clone()).unwrap_or_default();
            (n, labels)
        });
        let Some(volume) = provisioned_volume(claim, class, node) else {
            log::debug!("simulated provisioner: claim {namespace}/{name} requests no storage");
            return;
        };
        let volume: PersistentVolume = match serde_json::from_value(volume) {
            Ok(volume) => volume,
            Err(e) => return log::warn!("simulated provisioner: volume for {namespace}/{name}: {e}"),
        };
        let volume_name = volume.metadata.name.clone().unwrap_or_default();
        match Api::<PersistentVolume>::cluster(&self.shared.client).create(&volume, &PostParams::default()) {
            Ok(created) => {
                log::debug!("simulated provisioner: created volume {volume_name} for {namespace}/{name}");
                self.volumes.observe(created);
            }
            Err(e) if e.is_already_exists() => {}
            Err(e) => log_error(&format!("simulated provisioner: cannot create volume {volume_name}"), &e),
        }
    }

    /// Deletes our Released `Delete` volumes, and takes the finalizer off those deleted.
    fn delete_released(&mut self) {
        let ours: Vec<PersistentVolume> = self
            .volumes
            .values()
            .filter(|v| {
                v.metadata.annotations.as_ref().and_then(|a| a.get(ANN_PROVISIONED_BY)).map(String::as_str)
                    == Some(PROVISIONER)
            })
            .cloned()
            .collect();
        let api = Api::<PersistentVolume>::cluster(&self.shared.client);
        for volume in ours {
            let name = volume.metadata.name.as_deref().unwrap_or("");
            let finalizers = volume.metadata.finalizers.clone().unwrap_or_default();
            if volume.metadata.deletion_timestamp.is_some() {
                if finalizers.iter().any(|f| f == FINALIZER) {
                    let rest: Vec<&String> = finalizers.iter().filter(|f| *f != FINALIZER).collect();
                    let patch =
                        json!({"metadata": {"resourceVersion": volume.metadata.resource_version, "finalizers": rest}});
                    if let Err(e) = api.patch(name, &Patch::Merge(patch), &PostParams::default()) {
                        log_error(&format!("simulated provisioner: cannot remove the finalizer of {name}"), &e);
                    }
                }
                continue;
            }
            let spec = volume.spec.as_ref();
            let released = volume.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released");
            if !released || spec.and_then(|s| s.persistent_volume_reclaim_policy.as_deref()) != Some("Delete") {
                continue;
            }
            let params = DeleteParams {
                preconditions: Some(Preconditions { uid: volume.metadata.uid.clone(), ..Preconditions::default() }),
                ..DeleteParams::default()
            };
            match api.delete(name, &params) {
                Ok(_) => log::debug!("simulated provisioner: deleted volume {name}"),
                Err(e) if e.is_not_found() => {}
                Err(e) => log_error(&format!("simulated provisioner: cannot delete volume {name}"), &e),
            }
        }
    }

    /// Whether the pod's claims let the scheduler place it (VolumeBinding's PreFilter): `Err`
    /// with kube-scheduler's reason when a claim is missing or an Immediate claim is unbound;
    /// `Ok` with the unbound delayed claims, which the scheduler hands to the chosen node.
    pub(super) fn pod_claims(
        &self,
        pod: &k8s_openapi::api::core::v1::Pod,
    ) -> Result<Vec<PersistentVolumeClaim>, Unschedulable> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
        let mut delayed = Vec::new();
        let mut immediate_unbound = false;
        for source in volumes.into_iter().flatten().filter_map(|v| v.persistent_volume_claim.as_ref()) {
            let Some(claim) = self.claims.get(namespace, &source.claim_name) else {
                return Err(Unschedulable::ClaimNotFound(source.claim_name.clone()));
            };
            // kube-scheduler's VolumeBinding PreFilter (`podHasPVCs`).
            if claim.metadata.deletion_timestamp.is_some() {
                return Err(Unschedulable::ClaimBeingDeleted(source.claim_name.clone()));
            }
            if is_bound(claim) {
                continue;
            }
            let class = claim.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or("");
            match self.classes.get("", class) {
                Some(class) if is_delayed(class) => delayed.push(claim.clone()),
                _ => immediate_unbound = true,
            }
        }
        if immediate_unbound {
            return Err(Unschedulable::UnboundImmediateClaims);
        }
        Ok(delayed)
    }
}

pub(super) fn is_bound(claim: &PersistentVolumeClaim) -> bool {
    claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim() -> PersistentVolumeClaim {
        serde_json::from_value(
            json!({"metadata": {"name": "data", "namespace": "ns", "uid": "u1", "resourceVersion": "5"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
        )
        .unwrap()
    }

    #[test]
    fn a_provisioned_volume_is_a_csi_volume_of_the_class() {
        let mut class: StorageClass = serde_json::from_value(default_class()).unwrap();
        class.mount_options = Some(vec!["noatime".into()]);
        let volume = provisioned_volume(&claim(), &class, None).unwrap();
        assert_eq!(volume["metadata"]["name"], "pvc-u1");
        assert_eq!(volume["metadata"]["finalizers"], json!([FINALIZER]));
        assert_eq!(volume["spec"]["csi"], json!({"driver": PROVISIONER, "volumeHandle": "pvc-u1", "fsType": "ext4"}));
        assert_eq!(volume["spec"]["claimRef"]["uid"], "u1");
        assert_eq!(volume["spec"]["claimRef"]["resourceVersion"], "5");
        assert_eq!(volume["spec"]["mountOptions"], json!(["noatime"]));
        assert_eq!(volume["spec"]["persistentVolumeReclaimPolicy"], "Delete");
        assert!(volume["spec"].get("nodeAffinity").is_none());
    }

    #[test]
    fn a_delayed_volume_follows_the_selected_node() {
        let class: StorageClass = serde_json::from_value(default_class()).unwrap();
        let zoned = BTreeMap::from([(ZONE_LABEL.to_string(), "zone-a".to_string())]);
        let volume = provisioned_volume(&claim(), &class, Some(("n1", zoned))).unwrap();
        let term = &volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0];
        assert_eq!(term, &json!({"key": ZONE_LABEL, "operator": "In", "values": ["zone-a"]}));
        let volume = provisioned_volume(&claim(), &class, Some(("n1", BTreeMap::new()))).unwrap();
        let term = &volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0];
        assert_eq!(term, &json!({"key": HOSTNAME_LABEL, "operator": "In", "values": ["n1"]}));
    }
}
