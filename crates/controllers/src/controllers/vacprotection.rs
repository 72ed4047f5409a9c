//! The VolumeAttributesClass protection controller
//! (`volumeattributesclass-protection-controller`), after upstream v1.36's
//! `pkg/controller/volume/vacprotection`: it adds the finalizer `kubernetes.io/vac-protection`
//! to every `storage.k8s.io/v1` VolumeAttributesClass that lacks it (while the class is not
//! being deleted) and removes it from a class being deleted once no PersistentVolume and no
//! PersistentVolumeClaim refers to it.
//!
//! A volume refers to a class by `spec.volumeAttributesClassName`; a claim by that field, by
//! `status.currentVolumeAttributesClassName` or by
//! `status.modifyVolumeStatus.targetVolumeAttributesClassName`. Both are looked up only in the
//! informers' caches, through an index by class name on each, as upstream (which accepts that a
//! claim created in the same instant as the class's deletion may come too late).
//!
//! The `vacprotection` queue holds class names; one worker, as upstream.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::VolumeAttributesClass;

use crate::client::{Api, Client};
use crate::controllers::finalizerutil::{is_deletion_candidate, need_to_add_finalizer, update_protection_finalizer};
use crate::controllers::volumeutil::VAC_PROTECTION_FINALIZER;
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::informer::{Event, Informer, object_key};
use crate::runtime::workqueue::WorkQueue;

/// `vacNameKeyIndex`: the index, on both the PV and the PVC informer, by class name.
pub const VAC_NAME_INDEX: &str = "volumeAttributesClassName";

/// What the controller takes from the flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// Workers; upstream runs one.
    pub workers: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { workers: 1 }
    }
}

/// `NewVACProtectionController` + `Run`.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let queue = WorkQueue::new("vacprotection");
    let volumes = context.informers.informer::<PersistentVolume>();
    let claims = context.informers.informer::<PersistentVolumeClaim>();
    if !volumes.store().has_index(VAC_NAME_INDEX) {
        volumes.add_index(VAC_NAME_INDEX, volume_class_names);
    }
    if !claims.store().has_index(VAC_NAME_INDEX) {
        claims.add_index(VAC_NAME_INDEX, claim_class_names);
    }
    let controller = Arc::new(VacProtection {
        client: context.client.clone(),
        classes: context.informers.informer::<VolumeAttributesClass>(),
        volumes,
        claims,
        queue: queue.clone(),
    });
    let handler = controller.clone();
    controller.classes.add_handler(move |event: &Event<VolumeAttributesClass>| handler.on_class_event(event));
    let handler = controller.clone();
    controller.claims.add_handler(move |event: &Event<PersistentVolumeClaim>| handler.on_claim_event(event));
    let handler = controller.clone();
    controller.volumes.add_handler(move |event: &Event<PersistentVolume>| handler.on_volume_event(event));
    Controller::new().with_queue(&queue, config.workers, move |name: &String| controller.process_vac(name))
}

/// `getPVCReferencedVACNames`: the class the claim asks for, the one it has and the one it is
/// being modified to, without empty names or repeats.
pub fn claim_class_names(claim: &PersistentVolumeClaim) -> Vec<String> {
    let spec = claim.spec.as_ref().and_then(|s| s.volume_attributes_class_name.as_deref());
    let status = claim.status.as_ref();
    let current = status.and_then(|s| s.current_volume_attributes_class_name.as_deref());
    let target = status
        .and_then(|s| s.modify_volume_status.as_ref())
        .and_then(|m| m.target_volume_attributes_class_name.as_deref());
    let names: BTreeSet<&str> = [spec, current, target].into_iter().flatten().filter(|n| !n.is_empty()).collect();
    names.into_iter().map(str::to_string).collect()
}

/// `getPVReferencedVACNames`: the volume's class, if it names one.
pub fn volume_class_names(volume: &PersistentVolume) -> Vec<String> {
    let name = volume.spec.as_ref().and_then(|s| s.volume_attributes_class_name.as_deref()).unwrap_or_default();
    if name.is_empty() { Vec::new() } else { vec![name.to_string()] }
}

/// The names in `old` that `new` no longer has (`sets.New(old...).Delete(new...)`): a class
/// only becomes free when a reference to it goes.
fn dropped(old: Vec<String>, new: &[String]) -> Vec<String> {
    old.into_iter().filter(|name| !new.contains(name)).collect()
}

/// Upstream's VAC protection `Controller`.
struct VacProtection {
    client: Client,
    classes: Arc<Informer<VolumeAttributesClass>>,
    volumes: Arc<Informer<PersistentVolume>>,
    claims: Arc<Informer<PersistentVolumeClaim>>,
    queue: WorkQueue<String>,
}

impl VacProtection {
    /// `vacAddedUpdated`: a class that needs the finalizer, or may lose it.
    fn on_class_event(&self, event: &Event<VolumeAttributesClass>) {
        let class = match event {
            Event::Added(class) | Event::Updated { new: class, .. } => class,
            Event::Deleted { .. } => return,
        };
        log::debug!("Got event on VAC VAC=\"{}\"", object_key(&class.metadata));
        if need_to_add_finalizer(&class.metadata, VAC_PROTECTION_FINALIZER)
            || is_deletion_candidate(&class.metadata, VAC_PROTECTION_FINALIZER)
        {
            self.queue.add(class.metadata.name.clone().unwrap_or_default());
        }
    }

    /// `pvcUpdated` / `pvcDeleted`: the classes a claim stopped referring to.
    fn on_claim_event(&self, event: &Event<PersistentVolumeClaim>) {
        let names = match event {
            Event::Added(_) => return,
            Event::Deleted { final_state_unknown: true, .. } => {
                // Upstream's handler takes only a PVC, not a tombstone (`DeletedFinalStateUnknown`):
                // it logs the object and enqueues nothing.
                log::error!("PVC informer returned non-PVC object: a tombstone");
                return;
            }
            Event::Updated { old, new } => dropped(claim_class_names(old), &claim_class_names(new)),
            Event::Deleted { object, .. } => claim_class_names(object),
        };
        log::debug!("Got event on PVC PVC=\"{}\"", object_key(&event.object().metadata));
        for name in names {
            self.queue.add(name);
        }
    }

    /// `pvUpdated` / `pvDeleted`: the classes a volume stopped referring to.
    fn on_volume_event(&self, event: &Event<PersistentVolume>) {
        let names = match event {
            Event::Added(_) => return,
            Event::Deleted { final_state_unknown: true, .. } => {
                // As for claims: upstream drops a tombstone.
                log::error!("PV informer returned non-PV object: a tombstone");
                return;
            }
            Event::Updated { old, new } => dropped(volume_class_names(old), &volume_class_names(new)),
            Event::Deleted { object, .. } => volume_class_names(object),
        };
        log::debug!("Got event on PV PV=\"{}\"", object_key(&event.object().metadata));
        for name in names {
            self.queue.add(name);
        }
    }

    /// `processVAC`.
    fn process_vac(&self, name: &str) -> SyncResult {
        log::debug!("Processing VAC VAC=\"{name}\"");
        let started = Instant::now();
        let result = self.process_cached_vac(name);
        log::debug!("Finished processing VAC VAC=\"{name}\" cost=\"{:?}\"", started.elapsed());
        result.map_err(|e| e.context(format!("VAC {name} failed with ")))
    }

    fn process_cached_vac(&self, name: &str) -> SyncResult {
        let Some(class) = self.classes.store().get(name) else {
            log::debug!("VAC not found, ignoring VAC=\"{name}\"");
            return Ok(());
        };
        if is_deletion_candidate(&class.metadata, VAC_PROTECTION_FINALIZER) {
            if !self.is_being_used(name) {
                return self.write(&class, false);
            }
            // Upstream logs the class under the key `PVC`.
            log::debug!("Keeping VAC because it is being used PVC=\"{name}\"");
        }
        if need_to_add_finalizer(&class.metadata, VAC_PROTECTION_FINALIZER) {
            return self.write(&class, true);
        }
        Ok(())
    }

    /// `isBeingUsed`: a volume or a claim in the caches refers to the class.
    fn is_being_used(&self, name: &str) -> bool {
        !self.volumes.store().by_index(VAC_NAME_INDEX, name).is_empty()
            || !self.claims.store().by_index(VAC_NAME_INDEX, name).is_empty()
    }

    /// `addFinalizer` (`add`) or `removeFinalizer`: an `Update` of the cached class.
    fn write(&self, class: &VolumeAttributesClass, add: bool) -> SyncResult {
        let api = Api::<VolumeAttributesClass>::cluster(&self.client);
        update_protection_finalizer(&api, &self.classes, class, VAC_PROTECTION_FINALIZER, add, "VAC")
            .map_err(SyncError::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(value: serde_json::Value) -> PersistentVolumeClaim {
        serde_json::from_value(value).expect("a claim")
    }

    #[test]
    fn a_claim_refers_to_the_classes_it_asks_for_has_and_is_moving_to() {
        let moving = claim(json!({
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"volumeAttributesClassName": "gold"},
            "status": {"currentVolumeAttributesClassName": "silver",
                       "modifyVolumeStatus": {"targetVolumeAttributesClassName": "gold", "status": "InProgress"}}
        }));
        assert_eq!(claim_class_names(&moving), vec!["gold", "silver"]);
        let plain = claim(json!({"metadata": {"name": "c"}, "spec": {"volumeAttributesClassName": ""}}));
        assert!(claim_class_names(&plain).is_empty(), "an empty name refers to nothing");
        assert!(claim_class_names(&PersistentVolumeClaim::default()).is_empty());
    }

    #[test]
    fn a_volume_refers_to_its_class() {
        let volume: PersistentVolume =
            serde_json::from_value(json!({"metadata": {"name": "v"}, "spec": {"volumeAttributesClassName": "gold"}}))
                .expect("a volume");
        assert_eq!(volume_class_names(&volume), vec!["gold"]);
        assert!(volume_class_names(&PersistentVolume::default()).is_empty());
    }

    #[test]
    fn only_classes_no_longer_referred_to_are_enqueued_on_an_update() {
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(dropped(names(&["gold", "silver"]), &names(&["gold"])), names(&["silver"]));
        assert!(dropped(names(&["gold"]), &names(&["gold", "silver"])).is_empty(), "a new reference frees nothing");
    }
}
