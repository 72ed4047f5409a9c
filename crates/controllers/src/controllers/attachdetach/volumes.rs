//! Which pod volumes the controller attaches, after upstream's `attachdetach/util` and the CSI
//! plugin (`pkg/volume/csi`): a pod's claim (or generic ephemeral volume's claim) that is Bound
//! to a PersistentVolume with a `spec.csi` source, whose CSIDriver requires attachment (no
//! CSIDriver object: attachment required). Inline CSI volumes are ephemeral and never attached.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Volume};
use k8s_openapi::api::storage::v1::CSIDriver;

use super::Error;
use crate::apimachinery::errors::BoxError;
use crate::controllers::volumeutil::{
    bound_claim_from_cache, bound_volume_from_cache, ephemeral_claim_name, volume_is_for_pod,
};
use crate::runtime::informer::Informer;

/// The CSI plugin's name (`csi.CSIPluginName`).
pub const CSI_PLUGIN: &str = "kubernetes.io/csi";

/// What the controller needs of an attachable volume (upstream's `volume.Spec` of a PV).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeSpec {
    /// The PersistentVolume's name (`spec.Name()`).
    pub name: String,
    pub driver: String,
    pub handle: String,
    /// `IsMultiAttachAllowed`: the volume is ReadWriteMany or ReadOnlyMany.
    pub multi_attach: bool,
}

impl VolumeSpec {
    /// `GetUniqueVolumeNameFromSpec` of the CSI plugin: `kubernetes.io/csi/<driver>^<handle>`.
    pub fn unique_name(&self) -> String {
        unique_name(&self.driver, &self.handle)
    }
}

/// `kubernetes.io/csi/<driver>^<handle>`.
pub fn unique_name(driver: &str, handle: &str) -> String {
    format!("{CSI_PLUGIN}/{driver}^{handle}")
}

/// The driver and handle of a CSI unique volume name (the CSI detacher's `parseVolumeID`), for
/// volumes known only from a node's `volumesAttached`.
pub fn split_unique_name(name: &str) -> Option<(&str, &str)> {
    name.strip_prefix(CSI_PLUGIN)?.strip_prefix('/')?.split_once('^')
}

/// `getAttachmentName`: `csi-<sha256(handle + driver + node)>`.
pub fn attachment_name(handle: &str, driver: &str, node: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, format!("{handle}{driver}{node}").as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("csi-{hex}")
}

/// `GetFullQualifiedPluginNameForVolume` of a CSI volume: `kubernetes.io/csi:<driver>`.
pub fn plugin_name(driver: &str) -> String {
    format!("{CSI_PLUGIN}:{driver}")
}

/// The caches volume specs are made from.
pub struct Lookups {
    pub claims: Arc<Informer<PersistentVolumeClaim>>,
    pub volumes: Arc<Informer<PersistentVolume>>,
    pub drivers: Arc<Informer<CSIDriver>>,
}

impl Lookups {
    /// `CreateVolumeSpec` then `FindAttachablePluginBySpec`: `Ok(None)` for a volume that is
    /// no claim or not attachable, an error when the claim or volume is not (yet) usable.
    pub fn attachable(&self, pod: &Pod, volume: &Volume) -> Result<Option<VolumeSpec>, Error> {
        let Some(claim_name) = claim_name(pod, volume) else { return Ok(None) };
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let processing = |source: BoxError| Error::ProcessClaim {
            namespace: namespace.to_string(),
            claim: claim_name.clone(),
            source,
        };
        let claim = bound_claim_from_cache(&self.claims, namespace, &claim_name).map_err(|e| processing(e.into()))?;
        if volume.ephemeral.is_some() && !volume_is_for_pod(pod, &claim) {
            return Err(Error::NotPodOwner {
                namespace: namespace.to_string(),
                claim: claim_name.clone(),
                pod: pod.metadata.name.clone().unwrap_or_default(),
            });
        }
        let pv_name = claim.spec.as_ref().and_then(|s| s.volume_name.clone()).unwrap_or_default();
        let pv = bound_volume_from_cache(&self.volumes, &pv_name, claim.metadata.uid.as_deref().unwrap_or_default())
            .map_err(|e| processing(e.into()))?;
        Ok(self.spec_of(&pv))
    }

    /// `NewSpecFromPersistentVolume` with the CSI plugin's `CanAttach`.
    pub fn spec_of(&self, pv: &PersistentVolume) -> Option<VolumeSpec> {
        let spec = pv.spec.as_ref()?;
        let csi = spec.csi.as_ref()?;
        if !self.attach_required(&csi.driver) {
            return None;
        }
        let modes = spec.access_modes.as_deref().unwrap_or_default();
        Some(VolumeSpec {
            name: pv.metadata.name.clone().unwrap_or_default(),
            driver: csi.driver.clone(),
            handle: csi.volume_handle.clone(),
            multi_attach: modes.iter().any(|m| m == "ReadWriteMany" || m == "ReadOnlyMany"),
        })
    }

    /// `skipAttach` negated: only a CSIDriver saying `attachRequired: false` skips attachment.
    fn attach_required(&self, driver: &str) -> bool {
        let found = self.drivers.store().get(driver);
        found.and_then(|d| d.spec.attach_required) != Some(false)
    }
}

/// The claim a pod volume names: its `persistentVolumeClaim`, or its generic ephemeral
/// volume's `<pod>-<volume>`.
pub fn claim_name(pod: &Pod, volume: &Volume) -> Option<String> {
    if let Some(source) = &volume.persistent_volume_claim {
        return Some(source.claim_name.clone()).filter(|n| !n.is_empty());
    }
    volume.ephemeral.as_ref().map(|_| ephemeral_claim_name(pod, volume))
}

/// The pod's volumes.
pub fn pod_volumes(pod: &Pod) -> &[Volume] {
    pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default()
}

/// The node a pod is scheduled to; empty when unscheduled.
pub fn node_of(pod: &Pod) -> &str {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachment_names_follow_get_attachment_name() {
        // printf 'pvc-123csi.kcm-sandbox.devnode-1' | sha256sum
        assert_eq!(
            attachment_name("pvc-123", "csi.kcm-sandbox.dev", "node-1"),
            "csi-ddf8baae2a485771149154fd77a429bc4386b8db86a5bc70de894becd610f310"
        );
    }

    #[test]
    fn unique_names_split_back() {
        let name = unique_name("csi.kcm-sandbox.dev", "pvc-1");
        assert_eq!(name, "kubernetes.io/csi/csi.kcm-sandbox.dev^pvc-1");
        assert_eq!(split_unique_name(&name), Some(("csi.kcm-sandbox.dev", "pvc-1")));
        assert_eq!(split_unique_name("kubernetes.io/gce-pd/x"), None);
    }
}
