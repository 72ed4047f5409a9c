//! Volume syncs: `syncVolume`, the phase writes, `unbindVolume` and reclaiming
//! (`reclaimVolume`): Retain keeps a Released volume, Delete leaves an externally provisioned
//! or CSI volume to its provisioner, Recycle finds no recycler (none is built).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use super::claim::SyncOutcome;
use super::metrics;
use super::util::*;
use super::{Error, PvController};
use crate::client::{Api, PostParams};
use crate::controllers::volumeutil::{POD_PVC_INDEX, is_pod_terminated};
use crate::runtime::events::EventType;

/// `findDeletablePlugin` with no in-tree deleter built: `Ok` for a volume an external deleter
/// deletes (provisioned by an external provisioner, or, not provisioned, a CSI or migrated
/// volume); the error for any other.
fn find_deletable_plugin(volume: &PersistentVolume) -> Result<(), Error> {
    let name = volume.metadata.name.as_deref().unwrap_or("");
    let provisioner = volume.metadata.annotations.as_ref().and_then(|a| a.get(ANN_DYNAMICALLY_PROVISIONED));
    let external_spec =
        has_annotation(&volume.metadata, ANN_MIGRATED_TO) || volume.spec.as_ref().is_some_and(|s| s.csi.is_some());
    match provisioner.filter(|p| !p.is_empty()) {
        Some(provisioner) if !provisioner.starts_with("kubernetes.io/") => Ok(()),
        Some(_) => Err(Error::NoDeleter),
        None if external_spec => Ok(()),
        None => Err(Error::NoDeleterFor { volume: name.to_string() }),
    }
}

impl PvController {
    fn volume_api(&self) -> Api<PersistentVolume> {
        Api::cluster(&self.client)
    }

    /// `syncVolume`.
    pub(super) fn sync_volume(&self, volume: &PersistentVolume) -> SyncOutcome {
        let Some(reference) = claim_ref(volume) else {
            return self.update_volume_phase(volume, "Available", "").map(drop);
        };
        if reference.uid.as_deref().unwrap_or("").is_empty() {
            // Pre-bound by a user to a claim that the claim sync will bind.
            return self.update_volume_phase(volume, "Available", "").map(drop);
        }
        let claim = self.claim_of(volume)?;
        let claim = claim.filter(|c| c.metadata.uid == reference.uid);
        let Some(claim) = claim else {
            return self.release(volume);
        };
        let claimed = claim_volume_name(&claim);
        let name = volume.metadata.name.as_deref().unwrap_or("");
        if claimed.is_empty() {
            if super::index::volume_mode_mismatch(&claim, volume) {
                let message = format!(
                    "Cannot bind PersistentVolume to requested PersistentVolumeClaim {:?} due to incompatible volumeMode.",
                    claim.metadata.name.as_deref().unwrap_or("")
                );
                self.recorder.event_for(volume, EventType::Warning, "VolumeMismatch", &message);
                let message = format!(
                    "Cannot bind PersistentVolume {name:?} to requested PersistentVolumeClaim due to incompatible volumeMode."
                );
                self.recorder.event_for(&*claim, EventType::Warning, "VolumeMismatch", &message);
                return Ok(());
            }
            // The claim sync binds it.
            self.claim_queue.add(claim_key(&claim));
            return Ok(());
        }
        if claimed == name {
            return self.update_volume_phase(volume, "Bound", "").map(drop);
        }
        // The claim is bound to another volume.
        if has_annotation(&volume.metadata, ANN_DYNAMICALLY_PROVISIONED) && reclaim_policy(volume) == "Delete" {
            return self.release(volume);
        }
        self.unbind_volume(volume)
    }

    /// The volume's claim: from the controller's cache, else (unless the volume is already
    /// Released or Failed) the informer, else the API.
    fn claim_of(&self, volume: &PersistentVolume) -> Result<Option<Arc<PersistentVolumeClaim>>, Error> {
        let Some(reference) = claim_ref(volume) else { return Ok(None) };
        let key = claim_ref_key(reference);
        let namespace = reference.namespace.as_deref().unwrap_or("");
        let name = reference.name.as_deref().unwrap_or("");
        let mut claim = self.claims.get(&key);
        if claim.is_none() && !matches!(volume_phase(volume), "Released" | "Failed") {
            claim = self.claim_informer.store().get(&key);
            if claim.is_none() {
                let api = Api::<PersistentVolumeClaim>::namespaced(&self.client, namespace);
                claim = api.get_opt(name)?.map(Arc::new);
            }
        }
        if let Some(found) = &claim
            && found.metadata.uid != reference.uid
        {
            // The cache may be stale: check the API before releasing.
            let api = Api::<PersistentVolumeClaim>::namespaced(&self.client, namespace);
            claim = api.get_opt(name)?.map(Arc::new);
        }
        Ok(claim)
    }

    /// The claim is gone: the volume Released, then reclaimed.
    fn release(&self, volume: &PersistentVolume) -> SyncOutcome {
        let volume = if matches!(volume_phase(volume), "Released" | "Failed") {
            Arc::new(volume.clone())
        } else {
            self.update_volume_phase(volume, "Released", "")?
        };
        self.reclaim_volume(&volume)
    }

    /// `reclaimVolume`.
    fn reclaim_volume(&self, volume: &PersistentVolume) -> SyncOutcome {
        if volume.metadata.annotations.as_ref().and_then(|a| a.get(ANN_MIGRATED_TO)).is_some_and(|m| !m.is_empty()) {
            // Left to the external provisioner the volume migrated to.
            return Ok(());
        }
        match reclaim_policy(volume) {
            "Retain" => {
                log::debug!(
                    "Volume is released and reclaim policy \"Retain\" will be executed volumeName={:?}",
                    volume.metadata.name
                );
                Ok(())
            }
            // Upstream runs both as operations of their own (`scheduleOperation`): their
            // failures are not the sync's, and are not requeued.
            "Recycle" => {
                if let Err(e) = self.recycle_volume(volume) {
                    log::error!("recycle of volume {:?} failed: {e}", volume.metadata.name);
                }
                Ok(())
            }
            "Delete" => {
                self.delete_volume(volume);
                Ok(())
            }
            _ => {
                let message = "Volume has unrecognized PersistentVolumeReclaimPolicy";
                self.update_volume_phase_with_event(
                    volume,
                    "Failed",
                    EventType::Warning,
                    "VolumeUnknownReclaimPolicy",
                    message,
                )
            }
        }
    }

    /// `recycleVolumeOperation` without a recycler plugin: the volume Failed, unless it is
    /// still in use.
    fn recycle_volume(&self, volume: &PersistentVolume) -> SyncOutcome {
        let name = volume.metadata.name.as_deref().unwrap_or("");
        let Some(fresh) = self.volume_api().get_opt(name)? else { return Ok(()) };
        if !self.is_volume_released(&fresh) {
            return Ok(());
        }
        let users = self.volume_users(&fresh);
        let claim_cached = claim_ref(volume).is_some_and(|r| self.claims.get(&claim_ref_key(r)).is_some());
        if !users.is_empty() && !claim_cached {
            let message = format!("Volume is used by pods: {}", users.join(","));
            self.recorder.event_for(volume, EventType::Normal, "VolumeFailedRecycle", &message);
            return Ok(());
        }
        let message = "No recycler plugin found for the volume!";
        self.update_volume_phase_with_event(&fresh, "Failed", EventType::Warning, "VolumeFailedRecycle", message)
    }

    /// The Delete policy of `reclaimVolume`: the operation is timed from here (the latency is
    /// recorded when the volume is deleted, `volume_deleted`), and its error counted.
    fn delete_volume(&self, volume: &PersistentVolume) {
        let name = volume.metadata.name.as_deref().unwrap_or("");
        metrics::operation_started(name, &self.provisioner_name(volume), "delete");
        if let Err(e) = self.delete_volume_operation(volume) {
            log::error!("deletion of volume {name:?} failed: {e}");
            metrics::operation_failed(name);
        }
    }

    /// `deleteVolumeOperation` (v1.36) for what no in-tree plugin deletes. The deleter plugin
    /// is looked up first: where none can be found (an in-tree provisioner, or a volume neither
    /// provisioned nor CSI) the volume is marked Failed at once (`VolumeFailedDelete`); any
    /// other volume is left to its external deleter. Neither reads the volume again (v1.33 did,
    /// and checked it was still released, before looking for the plugin).
    fn delete_volume_operation(&self, volume: &PersistentVolume) -> SyncOutcome {
        let name = volume.metadata.name.as_deref().unwrap_or("");
        if let Err(why) = find_deletable_plugin(volume) {
            let message = why.to_string();
            self.update_volume_phase_with_event(volume, "Failed", EventType::Warning, "VolumeFailedDelete", &message)
                .inspect_err(|e| log::debug!("DeleteVolumeOperation: failed to mark volume {name:?} as failed: {e}"))?;
        }
        log::debug!("External deleter for volume requested, ignoring volumeName={name:?}");
        Ok(())
    }

    /// `getProvisionerNameFromVolume` for external provisioners: the class's provisioner.
    pub(super) fn provisioner_name(&self, volume: &PersistentVolume) -> String {
        self.class(&volume_class(volume)).map(|c| c.provisioner.clone()).unwrap_or_else(|| "N/A".into())
    }

    /// `isVolumeReleased`: its claim is gone, or bound to another volume.
    fn is_volume_released(&self, volume: &PersistentVolume) -> bool {
        let Some(reference) = claim_ref(volume) else { return false };
        if reference.uid.as_deref().unwrap_or("").is_empty() {
            return false;
        }
        match self.claims.get(&claim_ref_key(reference)) {
            Some(claim) if claim.metadata.uid == reference.uid => {
                let bound = claim_volume_name(&claim);
                !bound.is_empty() && Some(bound) != volume.metadata.name.as_deref()
            }
            _ => true,
        }
    }

    /// `isVolumeUsed`: the running pods that use the volume's claim.
    fn volume_users(&self, volume: &PersistentVolume) -> Vec<String> {
        let Some(reference) = claim_ref(volume) else { return Vec::new() };
        let mut users: Vec<String> = self
            .pods
            .store()
            .by_index(POD_PVC_INDEX, &claim_ref_key(reference))
            .iter()
            .filter(|pod| !is_pod_terminated(pod))
            .map(|pod| crate::runtime::informer::object_key(&pod.metadata))
            .collect();
        users.sort();
        users.dedup();
        users
    }

    /// `unbindVolume`: a volume bound by the controller is freed; one pre-bound by a user
    /// keeps its `claimRef` without uid. Then Available.
    fn unbind_volume(&self, volume: &PersistentVolume) -> SyncOutcome {
        let mut clone = volume.clone();
        if has_annotation(&volume.metadata, ANN_BOUND_BY_CONTROLLER) {
            clone.spec.get_or_insert_with(Default::default).claim_ref = None;
            if let Some(annotations) = clone.metadata.annotations.as_mut() {
                annotations.remove(ANN_BOUND_BY_CONTROLLER);
            }
        } else if let Some(reference) = clone.spec.as_mut().and_then(|s| s.claim_ref.as_mut()) {
            reference.uid = Some(String::new());
        }
        let updated = self.update_volume(&clone)?;
        self.update_volume_phase(&updated, "Available", "").map(drop)
    }

    /// An update of the volume, stored in the controller's cache.
    pub(super) fn update_volume(&self, volume: &PersistentVolume) -> Result<Arc<PersistentVolume>, Error> {
        let name = volume.metadata.name.as_deref().unwrap_or("");
        let updated = self.volume_api().replace(name, volume, &PostParams::default())?;
        let updated = Arc::new(updated);
        self.volumes.update(updated.clone());
        Ok(updated)
    }

    /// `updateVolumePhase`: the phase and message, through the status.
    pub(super) fn update_volume_phase(
        &self,
        volume: &PersistentVolume,
        phase: &str,
        message: &str,
    ) -> Result<Arc<PersistentVolume>, Error> {
        if volume_phase(volume) == phase {
            return Ok(Arc::new(volume.clone()));
        }
        let mut clone = volume.clone();
        let status = clone.status.get_or_insert_with(Default::default);
        status.phase = Some(phase.to_string());
        status.message = Some(message.to_string()).filter(|m| !m.is_empty());
        let name = volume.metadata.name.as_deref().unwrap_or("");
        let updated = self.volume_api().replace_status(name, &clone, &PostParams::default())?;
        let updated = Arc::new(updated);
        self.volumes.update(updated.clone());
        Ok(updated)
    }

    /// `updateVolumePhaseWithEvent`: only on a change of phase.
    fn update_volume_phase_with_event(
        &self,
        volume: &PersistentVolume,
        phase: &str,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> SyncOutcome {
        if volume_phase(volume) == phase {
            return Ok(());
        }
        let updated = self.update_volume_phase(volume, phase, message)?;
        self.recorder.event_for(&*updated, event_type, reason, message);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn volume(annotations: Value, spec: Value) -> PersistentVolume {
        serde_json::from_value(json!({"metadata": {"name": "pv1", "annotations": annotations}, "spec": spec}))
            .expect("a volume")
    }

    #[test]
    fn only_volumes_of_external_deleters_find_no_plugin_error() {
        let provisioned = |by: &str| volume(json!({ANN_DYNAMICALLY_PROVISIONED: by}), json!({}));
        let find = |volume: &PersistentVolume| find_deletable_plugin(volume).map_err(|e| e.to_string());
        assert_eq!(find(&provisioned("example.com/csi")), Ok(()));
        assert_eq!(find(&provisioned("kubernetes.io/gce-pd")), Err("no deletable volume plugin matched".into()));
        assert_eq!(find(&volume(json!({}), json!({"csi": {"driver": "d", "volumeHandle": "h"}}))), Ok(()));
        assert_eq!(
            find(&volume(json!({}), json!({"hostPath": {"path": "/data"}}))),
            Err("error getting deleter volume plugin for volume \"pv1\": no deletable volume plugin matched".into())
        );
    }
}
