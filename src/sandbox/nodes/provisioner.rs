//! A simulated dynamic provisioner and volume binder, so that PersistentVolumeClaims (e.g. a
//! StatefulSet's) bind without a storage backend or the persistent-volume controller: each
//! Pending claim of a StorageClass whose provisioner is [`PROVISIONER`] gets a
//! PersistentVolume `pvc-<claim uid>` (capacity = the claim's request, its access modes, the
//! class's reclaim policy, a `claimRef`, a hostPath source), and both are bound as upstream's
//! PV controller binds them: the claim's `spec.volumeName`, status Bound with capacity and
//! access modes, annotations `pv.kubernetes.io/bind-completed`,
//! `pv.kubernetes.io/bound-by-controller` and `volume.(beta.)kubernetes.io/storage-provisioner`;
//! the volume's status Bound and `pv.kubernetes.io/provisioned-by`.
//!
//! The default StorageClass [`DEFAULT_CLASS`] is created when the nodes start if missing (the
//! sandbox also creates it at start-up), so that kube-apiserver's DefaultStorageClass
//! admission gives it to claims that name no class, on both backends.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::{Value, json};

use super::{Worker, log_error};
use crate::client::{Api, Patch, PostParams};

/// The simulated provisioner's name (a StorageClass's `provisioner`).
pub const PROVISIONER: &str = "kcm-sandbox.dev/simulated";
/// The default StorageClass's name.
pub const DEFAULT_CLASS: &str = "standard";

/// The default StorageClass as created at start-up.
pub fn default_class() -> Value {
    json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": DEFAULT_CLASS, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": PROVISIONER, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"})
}

impl Worker {
    /// Creates the default StorageClass unless some class of that name exists.
    pub(super) fn ensure_default_class(&self) -> Result<(), String> {
        let api = Api::<StorageClass>::cluster(&self.shared.client);
        let class: StorageClass = serde_json::from_value(default_class()).map_err(|e| e.to_string())?;
        match api.create(&class, &PostParams::default()) {
            Ok(_) => Ok(()),
            Err(e) if e.is_already_exists() => Ok(()),
            Err(e) => Err(format!("simulated provisioner: cannot create StorageClass {DEFAULT_CLASS}: {e}")),
        }
    }

    /// Provisions and binds every Pending claim of a class of ours.
    pub(super) fn provision(&mut self) {
        let pending: Vec<PersistentVolumeClaim> = self
            .claims
            .values()
            .filter(|c| c.metadata.deletion_timestamp.is_none() && !is_bound(c))
            .filter(|c| {
                let volume = c.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or("");
                volume.is_empty() || volume == format!("pvc-{}", c.metadata.uid.as_deref().unwrap_or(""))
            })
            .filter(|c| self.class_is_ours(c))
            .cloned()
            .collect();
        for claim in pending {
            if self.stopping() {
                return;
            }
            self.bind_claim(&claim);
        }
    }

    /// The claim's class exists and names our provisioner.
    fn class_is_ours(&self, claim: &PersistentVolumeClaim) -> bool {
        let class = claim.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or("");
        !class.is_empty() && self.classes.get("", class).is_some_and(|c| c.provisioner == PROVISIONER)
    }

    fn bind_claim(&mut self, claim: &PersistentVolumeClaim) {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or("");
        let name = claim.metadata.name.as_deref().unwrap_or("");
        let uid = claim.metadata.uid.as_deref().unwrap_or("");
        let spec = claim.spec.clone().unwrap_or_default();
        let class_name = spec.storage_class_name.clone().unwrap_or_default();
        let reclaim = self.classes.get("", &class_name).and_then(|c| c.reclaim_policy.clone());
        let storage = spec.resources.as_ref().and_then(|r| r.requests.as_ref()).and_then(|r| r.get("storage")).cloned();
        let Some(storage) = storage else {
            log::debug!("simulated provisioner: claim {namespace}/{name} requests no storage");
            return;
        };
        let access_modes = spec.access_modes.clone().unwrap_or_default();
        let volume_name = format!("pvc-{uid}");
        let client = self.shared.client.clone();
        let volumes = Api::<PersistentVolume>::cluster(&client);
        let volume = json!({"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": volume_name, "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER}},
            "spec": {"capacity": {"storage": storage}, "accessModes": access_modes,
                "persistentVolumeReclaimPolicy": reclaim.unwrap_or_else(|| "Delete".into()),
                "storageClassName": class_name, "volumeMode": spec.volume_mode.clone().unwrap_or_else(|| "Filesystem".into()),
                "hostPath": {"path": format!("/var/lib/kcm-sandbox/volumes/{volume_name}"), "type": ""},
                "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": namespace, "name": name,
                    "uid": uid, "resourceVersion": claim.metadata.resource_version}}});
        let volume: PersistentVolume = match serde_json::from_value(volume) {
            Ok(volume) => volume,
            Err(e) => return log::warn!("simulated provisioner: volume for {namespace}/{name}: {e}"),
        };
        match volumes.create(&volume, &PostParams::default()) {
            Ok(_) => log::debug!("simulated provisioner: created volume {volume_name} for {namespace}/{name}"),
            Err(e) if e.is_already_exists() => {}
            Err(e) => return log_error(&format!("simulated provisioner: cannot create volume {volume_name}"), &e),
        }
        let phase = json!({"status": {"phase": "Bound"}});
        if let Err(e) = volumes.patch_status(&volume_name, &Patch::Merge(phase), &PostParams::default()) {
            return log_error(&format!("simulated provisioner: cannot bind volume {volume_name}"), &e);
        }
        let claims = Api::<PersistentVolumeClaim>::namespaced(&client, namespace);
        let bind = json!({"metadata": {"uid": uid, "annotations": {
                "pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes",
                "volume.beta.kubernetes.io/storage-provisioner": PROVISIONER,
                "volume.kubernetes.io/storage-provisioner": PROVISIONER}},
            "spec": {"volumeName": volume_name}});
        let bound = match claims.patch(name, &Patch::Merge(bind), &PostParams::default()) {
            Ok(bound) => bound,
            Err(e) => return log_error(&format!("simulated provisioner: cannot bind claim {namespace}/{name}"), &e),
        };
        let status =
            json!({"status": {"phase": "Bound", "accessModes": spec.access_modes, "capacity": {"storage": storage}}});
        match claims.patch_status(name, &Patch::Merge(status), &PostParams::default()) {
            Ok(updated) => {
                log::debug!("simulated provisioner: bound claim {namespace}/{name} to {volume_name}");
                self.claims.observe(updated);
            }
            Err(e) => {
                self.claims.observe(bound);
                log_error(&format!("simulated provisioner: cannot update claim {namespace}/{name}"), &e)
            }
        }
    }

    /// Whether every claim the pod's volumes name is bound (the scheduler's VolumeBinding
    /// filter, for bound claims only: a pod waits for its claims).
    pub(super) fn claims_bound(&self, pod: &Pod) -> bool {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
        volumes
            .into_iter()
            .flatten()
            .filter_map(|v| v.persistent_volume_claim.as_ref())
            .all(|source| self.claims.get(namespace, &source.claim_name).is_some_and(is_bound))
    }
}

fn is_bound(claim: &PersistentVolumeClaim) -> bool {
    claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
}
