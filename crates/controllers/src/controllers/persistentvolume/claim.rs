//! Claim syncs: `syncClaim`, `syncUnboundClaim`, `syncBoundClaim`, `bind` and the claim
//! writes, the default class given retroactively and the request to an external provisioner.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::index::{check_volume_satisfy_claim, find_best_match_for_claim};
use super::metrics;
use super::util::*;
use super::{Error, PvController};
use crate::client::{Api, PostParams};
use crate::controllers::volumeutil::PRE_RESIZE_CAPACITY;
use crate::runtime::events::EventType;

/// A sync's outcome: a failure is logged and the key requeued with the queue's backoff.
pub type SyncOutcome = Result<(), Error>;

fn set_annotation(meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, key: &str, value: &str) {
    meta.annotations.get_or_insert_with(Default::default).insert(key.to_string(), value.to_string());
}

/// The capacity a claim is bound with while its volume is being resized in-tree: the
/// volume's `pre-resize-capacity` annotation, or its capacity when that does not parse (logged,
/// as upstream); `None` without the annotation.
fn pre_resize_capacity(volume: &PersistentVolume, capacity: &Quantity) -> Option<Quantity> {
    let annotations = volume.metadata.annotations.as_ref()?;
    let value = annotations.get(PRE_RESIZE_CAPACITY)?;
    if crate::quantity::Quantity::parse(value).is_ok() {
        return Some(Quantity(value.clone()));
    }
    let name = volume.metadata.name.as_deref().unwrap_or("");
    log::info!("Parsing pre-resize-capacity from PV failed volumeName={name:?} value={value:?}");
    Some(capacity.clone())
}

/// `reference.GetReference` of a claim: what a bound volume's `claimRef` holds.
pub fn claim_reference(claim: &PersistentVolumeClaim) -> ObjectReference {
    ObjectReference {
        kind: Some("PersistentVolumeClaim".into()),
        api_version: Some("v1".into()),
        namespace: claim.metadata.namespace.clone(),
        name: claim.metadata.name.clone(),
        uid: claim.metadata.uid.clone(),
        resource_version: claim.metadata.resource_version.clone(),
        ..ObjectReference::default()
    }
}

impl PvController {
    fn claim_api(&self, claim: &PersistentVolumeClaim) -> Api<PersistentVolumeClaim> {
        Api::namespaced(&self.client, claim.metadata.namespace.as_deref().unwrap_or(""))
    }

    /// `syncClaim`.
    pub(super) fn sync_claim(&self, claim: &PersistentVolumeClaim) -> SyncOutcome {
        if has_annotation(&claim.metadata, ANN_BIND_COMPLETED) {
            self.sync_bound_claim(claim)
        } else {
            self.sync_unbound_claim(claim)
        }
    }

    /// `syncUnboundClaim`: a claim not yet fully bound.
    fn sync_unbound_claim(&self, claim: &PersistentVolumeClaim) -> SyncOutcome {
        let volume_name = claim_volume_name(claim);
        if volume_name.is_empty() {
            return self.sync_claim_without_volume(claim);
        }
        let Some(volume) = self.volumes.get(volume_name) else {
            // The user asked for a volume that does not exist (yet).
            return self.update_claim_status(claim, "Pending", None).map(drop);
        };
        if claim_ref(&volume).is_none() {
            if let Err(why) = check_volume_satisfy_claim(&volume, claim, self.volume_attributes_class) {
                let message = format!("Cannot bind to requested volume {volume_name:?}: {why}");
                self.recorder.event_for(claim, EventType::Warning, "VolumeMismatch", &message);
                return self.update_claim_status(claim, "Pending", None).map(drop);
            }
            return self.bind(&volume, claim);
        }
        if is_volume_bound_to_claim(&volume, claim) {
            return self.bind(&volume, claim);
        }
        let message = format!("volume {volume_name:?} already bound to a different claim.");
        self.recorder.event_for(claim, EventType::Warning, "FailedBinding", &message);
        if !has_annotation(&claim.metadata, ANN_BOUND_BY_CONTROLLER) {
            return self.update_claim_status(claim, "Pending", None).map(drop);
        }
        let other = claim_ref(&volume).map(claim_ref_key).unwrap_or_default();
        Err(Error::InvalidBinding { claim: claim_key(claim), volume: volume_name.to_string(), other })
    }

    /// The unbound claim names no volume: bind the best match, or have one provisioned.
    fn sync_claim_without_volume(&self, claim: &PersistentVolumeClaim) -> SyncOutcome {
        let class = self.class(&claim_class(claim));
        let delay_binding = is_delay_binding_mode(claim, class.as_deref())?;
        let volumes: Vec<PersistentVolume> = self.volumes.list().iter().map(|v| (**v).clone()).collect();
        let found = find_best_match_for_claim(claim, &volumes, delay_binding, self.volume_attributes_class)
            .map_err(|e| Error::FindVolume { claim: claim_key(claim), source: Box::new(e) })?;
        if let Some(volume) = found {
            return self.bind(volume, claim);
        }
        match self.assign_default_storage_class(claim) {
            Err(source) => {
                metrics::retroactive_storage_class(false);
                return Err(Error::AssignDefaultClass { claim: claim_key(claim), source });
            }
            Ok(true) => {
                metrics::retroactive_storage_class(true);
                return Ok(());
            }
            Ok(false) => {}
        }
        if delay_binding && !has_annotation(&claim.metadata, ANN_SELECTED_NODE) {
            self.emit_event_for_unbound_delay_binding_claim(claim);
        } else if !claim_class(claim).is_empty() {
            return self.provision_claim(claim);
        } else {
            let message = "no persistent volumes available for this claim and no storage class is set";
            self.recorder.event_for(claim, EventType::Normal, "FailedBinding", message);
        }
        self.update_claim_status(claim, "Pending", None).map(drop)
    }

    /// `emitEventForUnboundDelayBindingClaim`.
    fn emit_event_for_unbound_delay_binding_claim(&self, claim: &PersistentVolumeClaim) {
        let pods = self.non_scheduled_pods(claim);
        let (reason, message) = match pods.as_slice() {
            [] => ("WaitForFirstConsumer", "waiting for first consumer to be created before binding".to_string()),
            [one] => ("WaitForPodScheduled", format!("waiting for pod {one} to be scheduled")),
            many => ("WaitForPodScheduled", format!("waiting for pods {} to be scheduled", many.join(","))),
        };
        self.recorder.event_for(claim, EventType::Normal, reason, &message);
    }

    /// `findNonScheduledPodsByPVC`: the names of the claim's pods that are not terminated and
    /// not scheduled.
    fn non_scheduled_pods(&self, claim: &PersistentVolumeClaim) -> Vec<String> {
        let pods = self.pods.store().by_index(crate::controllers::volumeutil::POD_PVC_INDEX, &claim_key(claim));
        pods.iter()
            .filter(|pod| !crate::controllers::volumeutil::is_pod_terminated(pod))
            .filter(|pod| pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or("").is_empty())
            .filter_map(|pod| pod.metadata.name.clone())
            .collect()
    }

    /// `syncBoundClaim`: a claim once fully bound.
    fn sync_bound_claim(&self, claim: &PersistentVolumeClaim) -> SyncOutcome {
        let volume_name = claim_volume_name(claim);
        if volume_name.is_empty() {
            let message = "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!";
            return self.update_claim_status_with_event(claim, "Lost", EventType::Warning, "ClaimLost", message);
        }
        let Some(volume) = self.volumes.get(volume_name) else {
            let message = "Bound claim has lost its PersistentVolume. Data on the volume is lost!";
            return self.update_claim_status_with_event(claim, "Lost", EventType::Warning, "ClaimLost", message);
        };
        match claim_ref(&volume) {
            None => self.bind(&volume, claim),
            Some(reference) if reference.uid == claim.metadata.uid => self.bind(&volume, claim),
            Some(_) => {
                let message = "Two claims are bound to the same volume, this one is bound incorrectly";
                self.update_claim_status_with_event(claim, "Lost", EventType::Warning, "ClaimMisbound", message)
            }
        }
    }

    /// `bind`: the volume to the claim, its phase, the claim to the volume, the claim's status.
    pub(super) fn bind(&self, volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> SyncOutcome {
        log::debug!(
            "Binding volume to claim PVC={:?} volumeName={:?}",
            claim_key(claim),
            volume.metadata.name.as_deref().unwrap_or("")
        );
        let volume = self.bind_volume_to_claim(volume, claim)?;
        let volume = self.update_volume_phase(&volume, "Bound", "")?;
        let claim = self.bind_claim_to_volume(claim, &volume)?;
        self.update_claim_status(&claim, "Bound", Some(&volume))?;
        metrics::operation_done(&claim_key(&claim));
        Ok(())
    }

    /// `bindVolumeToClaim` (`GetBindVolumeToClaim`): the volume's `claimRef` set, marked
    /// bound-by-controller unless it was pre-bound to this claim.
    fn bind_volume_to_claim(
        &self,
        volume: &PersistentVolume,
        claim: &PersistentVolumeClaim,
    ) -> Result<Arc<PersistentVolume>, Error> {
        let mut clone = volume.clone();
        let mut dirty = false;
        let reference = claim_ref(volume);
        if reference.is_none_or(|r| {
            r.name != claim.metadata.name || r.namespace != claim.metadata.namespace || r.uid != claim.metadata.uid
        }) {
            clone.spec.get_or_insert_with(Default::default).claim_ref = Some(claim_reference(claim));
            dirty = true;
        }
        if !is_volume_bound_to_claim(volume, claim) && !has_annotation(&clone.metadata, ANN_BOUND_BY_CONTROLLER) {
            set_annotation(&mut clone.metadata, ANN_BOUND_BY_CONTROLLER, "yes");
            dirty = true;
        }
        if !dirty {
            return Ok(Arc::new(volume.clone()));
        }
        self.update_volume(&clone)
    }

    /// `bindClaimToVolume`: `spec.volumeName` and the bind annotations.
    fn bind_claim_to_volume(
        &self,
        claim: &PersistentVolumeClaim,
        volume: &PersistentVolume,
    ) -> Result<Arc<PersistentVolumeClaim>, Error> {
        let mut clone = claim.clone();
        let mut dirty = false;
        let name = volume.metadata.name.clone().unwrap_or_default();
        if claim_volume_name(claim) != name {
            clone.spec.get_or_insert_with(Default::default).volume_name = Some(name);
            if !has_annotation(&clone.metadata, ANN_BOUND_BY_CONTROLLER) {
                set_annotation(&mut clone.metadata, ANN_BOUND_BY_CONTROLLER, "yes");
            }
            dirty = true;
        }
        if !has_annotation(&clone.metadata, ANN_BIND_COMPLETED) {
            set_annotation(&mut clone.metadata, ANN_BIND_COMPLETED, "yes");
            dirty = true;
        }
        if !dirty {
            return Ok(Arc::new(claim.clone()));
        }
        self.update_claim(&clone)
    }

    /// An update of the claim, stored in the controller's cache.
    fn update_claim(&self, claim: &PersistentVolumeClaim) -> Result<Arc<PersistentVolumeClaim>, Error> {
        let name = claim.metadata.name.as_deref().unwrap_or("");
        let updated = self.claim_api(claim).replace(name, claim, &PostParams::default())?;
        let updated = Arc::new(updated);
        self.claims.update(updated.clone());
        Ok(updated)
    }

    /// `updateClaimStatus`: the phase, and the access modes and capacity of the bound volume
    /// (or none).
    pub(super) fn update_claim_status(
        &self,
        claim: &PersistentVolumeClaim,
        phase: &str,
        volume: Option<&PersistentVolume>,
    ) -> Result<Arc<PersistentVolumeClaim>, Error> {
        let mut clone = claim.clone();
        let status = clone.status.get_or_insert_with(Default::default);
        let mut dirty = false;
        if claim_phase(claim) != phase {
            status.phase = Some(phase.to_string());
            dirty = true;
        }
        match volume {
            None => {
                for cleared in [status.access_modes.take().is_some(), status.capacity.take().is_some()] {
                    dirty |= cleared;
                }
                dirty |= status.current_volume_attributes_class_name.take().is_some();
            }
            Some(volume) => {
                let spec = volume.spec.clone().unwrap_or_default();
                if status.access_modes != spec.access_modes {
                    status.access_modes = spec.access_modes.clone();
                    dirty = true;
                }
                if claim_phase(claim) != phase {
                    let capacity = spec.capacity.as_ref().and_then(|c| c.get("storage")).ok_or_else(|| {
                        Error::NoCapacity { volume: volume.metadata.name.clone().unwrap_or_default() }
                    })?;
                    let current = status.capacity.as_ref().and_then(|c| c.get("storage"));
                    let same = current.is_some_and(|q| {
                        crate::quantity::Quantity::parse(&q.0).ok()
                            == crate::quantity::Quantity::parse(&capacity.0).ok()
                    });
                    if let Some(pre_resize) = pre_resize_capacity(volume, capacity) {
                        status.capacity.get_or_insert_with(Default::default).insert("storage".to_string(), pre_resize);
                        dirty = true;
                    } else if !same {
                        status.capacity = spec.capacity.clone();
                        dirty = true;
                    }
                }
                // Only while binding: afterwards the external resizer owns the field (upstream's
                // comment on the race between the two).
                if self.volume_attributes_class
                    && claim_phase(claim) == "Pending"
                    && phase == "Bound"
                    && status.current_volume_attributes_class_name != spec.volume_attributes_class_name
                {
                    status.current_volume_attributes_class_name = spec.volume_attributes_class_name.clone();
                    dirty = true;
                }
            }
        }
        if !dirty {
            return Ok(Arc::new(claim.clone()));
        }
        let name = claim.metadata.name.as_deref().unwrap_or("");
        let updated = self.claim_api(claim).replace_status(name, &clone, &PostParams::default())?;
        let updated = Arc::new(updated);
        self.claims.update(updated.clone());
        Ok(updated)
    }

    /// `updateClaimStatusWithEvent`: only on a change of phase.
    fn update_claim_status_with_event(
        &self,
        claim: &PersistentVolumeClaim,
        phase: &str,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> SyncOutcome {
        if claim_phase(claim) == phase {
            return Ok(());
        }
        let updated = self.update_claim_status(claim, phase, None)?;
        self.recorder.event_for(&*updated, event_type, reason, message);
        Ok(())
    }

    /// `assignDefaultStorageClass`: a claim without any class gets the default one.
    fn assign_default_storage_class(&self, claim: &PersistentVolumeClaim) -> Result<bool, crate::client::Error> {
        if claim_has_class(claim) {
            return Ok(false);
        }
        let Some(class) = default_class(&self.classes.store().list()) else { return Ok(false) };
        let mut clone = claim.clone();
        clone.spec.get_or_insert_with(Default::default).storage_class_name = class.metadata.name.clone();
        let name = claim.metadata.name.as_deref().unwrap_or("");
        self.claim_api(claim).replace(name, &clone, &PostParams::default())?;
        log::info!(
            "Assigned default StorageClass to claim PVC={:?} storageClassName={:?}",
            claim_key(claim),
            class.metadata.name.as_deref().unwrap_or("")
        );
        Ok(true)
    }

    /// `provisionClaim` for an external provisioner (`provisionClaimOperationExternal`): the
    /// claim is annotated with the class's provisioner, which creates the volume.
    fn provision_claim(&self, claim: &PersistentVolumeClaim) -> SyncOutcome {
        if !self.enable_dynamic_provisioning {
            return Ok(());
        }
        let class_name = claim_class(claim);
        let Some(class) = self.class(&class_name) else {
            let message = format!("storageclass.storage.k8s.io {class_name:?} not found");
            self.recorder.event_for(claim, EventType::Warning, "ProvisioningFailed", &message);
            return Ok(());
        };
        let provisioner = class.provisioner.clone();
        if provisioner.starts_with("kubernetes.io/") {
            // An in-tree plugin, none of which is built here.
            let message = format!("no volume plugin matched name: {provisioner}");
            self.recorder.event_for(claim, EventType::Warning, "ProvisioningFailed", &message);
            return Ok(());
        }
        metrics::operation_started(&claim_key(claim), &provisioner, "provision");
        let claim = match self.set_claim_provisioner(claim, &provisioner) {
            Ok(claim) => claim,
            Err(e) => {
                let message = format!("Error saving claim: {e}");
                self.recorder.event_for(claim, EventType::Warning, "ProvisioningFailed", &message);
                metrics::operation_failed(&claim_key(claim));
                return Err(e);
            }
        };
        let message = format!(
            "Waiting for a volume to be created either by the external provisioner '{provisioner}' or manually by \
             the system administrator. If volume creation is delayed, please verify that the provisioner is running \
             and correctly registered."
        );
        self.recorder.event_for(&*claim, EventType::Normal, "ExternalProvisioning", &message);
        Ok(())
    }

    /// `setClaimProvisioner`: both `storage-provisioner` annotations.
    fn set_claim_provisioner(
        &self,
        claim: &PersistentVolumeClaim,
        provisioner: &str,
    ) -> Result<Arc<PersistentVolumeClaim>, Error> {
        let current = claim.metadata.annotations.as_ref().and_then(|a| a.get(ANN_STORAGE_PROVISIONER));
        if current.is_some_and(|p| p == provisioner) {
            return Ok(Arc::new(claim.clone()));
        }
        let mut clone = claim.clone();
        set_annotation(&mut clone.metadata, ANN_BETA_STORAGE_PROVISIONER, provisioner);
        set_annotation(&mut clone.metadata, ANN_STORAGE_PROVISIONER, provisioner);
        self.update_claim(&clone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_claim_reference_names_the_claim_version() {
        let claim: PersistentVolumeClaim = serde_json::from_value(
            json!({"metadata": {"name": "data", "namespace": "ns", "uid": "u1", "resourceVersion": "7"}}),
        )
        .unwrap();
        let reference = serde_json::to_value(claim_reference(&claim)).unwrap();
        assert_eq!(
            reference,
            json!({"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "ns", "name": "data",
                "uid": "u1", "resourceVersion": "7"})
        );
    }
}
