//! What the volume controllers (PVC, PV and VolumeAttributesClass protection, ephemeral volumes,
//! attach/detach, the binder) share: the finalizer names and `IsPodTerminated` of
//! `pkg/volume/util`, the pod index by claim of `pkg/controller/volume/common` and the helpers
//! of `k8s.io/component-helpers/storage/ephemeral`. (Upstream's
//! `pkg/controller/volume/protectionutil` is [`super::finalizerutil`].)

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Volume};

use crate::apimachinery::pod::phase;
use crate::runtime::controller_ref::controller_of;
use crate::runtime::informer::Informer;

/// `volumeutil.PVCProtectionFinalizer`.
pub const PVC_PROTECTION_FINALIZER: &str = "kubernetes.io/pvc-protection";
/// `volumeutil.PVProtectionFinalizer`.
pub const PV_PROTECTION_FINALIZER: &str = "kubernetes.io/pv-protection";
/// `volumeutil.VACProtectionFinalizer`.
pub const VAC_PROTECTION_FINALIZER: &str = "kubernetes.io/vac-protection";
/// Why a claim or volume from the cache is not (yet) usable by a pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The claim is not in the cache.
    #[error("failed to find PVC {namespace}/{name} in PVCInformer cache: persistentvolumeclaim {name:?} not found")]
    ClaimNotCached {
        /// The claim's namespace.
        namespace: String,
        /// The claim.
        name: String,
    },
    /// The claim is not bound to a volume.
    #[error("PVC {namespace}/{name} has non-bound phase ({phase:?}) or empty pvc.Spec.VolumeName ({volume:?})")]
    ClaimNotBound {
        /// The claim's namespace.
        namespace: String,
        /// The claim.
        name: String,
        /// Its phase.
        phase: String,
        /// Its `spec.volumeName`.
        volume: String,
    },
    /// The volume is not in the cache.
    #[error("failed to find PV {name:?} in PVInformer cache: persistentvolume {name:?} not found")]
    VolumeNotCached {
        /// The volume.
        name: String,
    },
    /// The volume has no `claimRef`.
    #[error("found PV object {name:?} but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim")]
    VolumeNotBound {
        /// The volume.
        name: String,
    },
    /// The volume is bound to another claim.
    #[error(
        "found PV object {name:?} but its pv.Spec.ClaimRef.UID ({uid:?}) does not point to claim.UID ({claim_uid:?})"
    )]
    VolumeBoundElsewhere {
        /// The volume.
        name: String,
        /// The uid its `claimRef` names.
        uid: String,
        /// The claim's uid.
        claim_uid: String,
    },
}

/// `getPVCFromCache` (the attach/detach and SELinux warning controllers'): the claim from the
/// cache, which must be bound to a volume.
pub fn bound_claim_from_cache(
    claims: &Informer<PersistentVolumeClaim>,
    namespace: &str,
    name: &str,
) -> Result<Arc<PersistentVolumeClaim>, Error> {
    let claim = claims
        .store()
        .get(&format!("{namespace}/{name}"))
        .ok_or_else(|| Error::ClaimNotCached { namespace: namespace.into(), name: name.into() })?;
    let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default();
    let volume = claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or_default();
    if phase != "Bound" || volume.is_empty() {
        return Err(Error::ClaimNotBound {
            namespace: namespace.into(),
            name: name.into(),
            phase: phase.into(),
            volume: volume.into(),
        });
    }
    Ok(claim)
}

/// `getPVSpecFromCache`: the volume from the cache, which must be bound to the claim `claim_uid`.
pub fn bound_volume_from_cache(
    volumes: &Informer<PersistentVolume>,
    name: &str,
    claim_uid: &str,
) -> Result<Arc<PersistentVolume>, Error> {
    let pv = volumes.store().get(name).ok_or_else(|| Error::VolumeNotCached { name: name.into() })?;
    let Some(claim_ref) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return Err(Error::VolumeNotBound { name: name.into() });
    };
    let uid = claim_ref.uid.as_deref().unwrap_or_default();
    if uid != claim_uid {
        return Err(Error::VolumeBoundElsewhere { name: name.into(), uid: uid.into(), claim_uid: claim_uid.into() });
    }
    Ok(pv)
}

/// The volume annotation of an in-tree resize in progress (`util.AnnPreResizeCapacity`): the
/// capacity the claim had before, which the binder reports as the claim's until the resize ends.
pub const PRE_RESIZE_CAPACITY: &str = "volume.alpha.kubernetes.io/pre-resize-capacity";

/// The pod index by claim key (`common.PodPVCIndex`).
pub const POD_PVC_INDEX: &str = "pod-pvc-index";

/// Indexes pods by the keys of the claims they name (`common.AddPodPVCIndexerIfNotPresent`).
pub fn add_pod_pvc_index(pods: &Informer<Pod>) {
    if pods.store().has_index(POD_PVC_INDEX) {
        return;
    }
    pods.add_index(POD_PVC_INDEX, |pod: &Pod| {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        claim_names(pod).into_iter().map(|claim| format!("{namespace}/{claim}")).collect()
    });
}

/// The claims a pod's volumes name: `persistentVolumeClaim` ones and those of its ephemeral
/// volumes (`PodPVCIndexFunc`).
pub fn claim_names(pod: &Pod) -> Vec<String> {
    volumes(pod)
        .iter()
        .filter_map(|volume| match (&volume.persistent_volume_claim, &volume.ephemeral) {
            (Some(source), _) => Some(source.claim_name.clone()),
            (None, Some(_)) => Some(ephemeral_claim_name(pod, volume)),
            (None, None) => None,
        })
        .filter(|claim| !claim.is_empty())
        .collect()
}

fn volumes(pod: &Pod) -> &[Volume] {
    pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default()
}

/// `ephemeral.VolumeClaimName`: `<pod>-<volume>`.
pub fn ephemeral_claim_name(pod: &Pod, volume: &Volume) -> String {
    format!("{}-{}", pod.metadata.name.as_deref().unwrap_or_default(), volume.name)
}

/// `ephemeral.VolumeIsForPod`: the claim is in the pod's namespace and controlled by it.
pub fn volume_is_for_pod(pod: &Pod, claim: &PersistentVolumeClaim) -> bool {
    claim.metadata.namespace == pod.metadata.namespace
        && controller_of(&claim.metadata).is_some_and(|owner| Some(&owner.uid) == pod.metadata.uid.as_ref())
}

/// `volumeutil.IsPodTerminated`: Failed or Succeeded, or being deleted with no container
/// running.
pub fn is_pod_terminated(pod: &Pod) -> bool {
    if matches!(phase(pod), "Failed" | "Succeeded") {
        return true;
    }
    let not_running = |statuses: Option<&Vec<k8s_openapi::api::core::v1::ContainerStatus>>| {
        statuses.into_iter().flatten().all(|status| {
            status.state.as_ref().is_some_and(|state| state.terminated.is_some() || state.waiting.is_some())
        })
    };
    let status = pod.status.as_ref();
    pod.metadata.deletion_timestamp.is_some()
        && not_running(status.and_then(|s| s.init_container_statuses.as_ref()))
        && not_running(status.and_then(|s| s.container_statuses.as_ref()))
        && not_running(status.and_then(|s| s.ephemeral_container_statuses.as_ref()))
}
