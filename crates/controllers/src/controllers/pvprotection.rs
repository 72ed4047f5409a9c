//! The PV protection controller (`persistentvolume-protection-controller`), after upstream
//! v1.33's `pkg/controller/volume/pvprotection`: kube-apiserver's `StorageObjectInUseProtection`
//! admission puts the finalizer `kubernetes.io/pv-protection` on every PersistentVolume; this
//! controller adds it to a volume that lacks it (while the volume is not being deleted) and
//! removes it from a volume being deleted once the volume is not `Bound`.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::PersistentVolume;

use crate::client::{Api, Client};
use crate::controllers::finalizerutil::{is_deletion_candidate, need_to_add_finalizer, update_protection_finalizer};
use crate::controllers::volumeutil::PV_PROTECTION_FINALIZER;
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::informer::{Event, Informer};
use crate::runtime::workqueue::WorkQueue;

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

/// `NewPVProtectionController`.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let queue = WorkQueue::new("pvprotection");
    let controller = Arc::new(PvProtection {
        client: context.client.clone(),
        volumes: context.informers.informer::<PersistentVolume>(),
        queue: queue.clone(),
    });
    let handler = controller.clone();
    controller.volumes.add_handler(move |event: &Event<PersistentVolume>| handler.on_volume_event(event));
    Controller::new().with_queue(&queue, config.workers, move |key: &String| controller.process_pv(key))
}

/// `isBeingUsed`: a Bound volume is in use.
fn is_being_used(volume: &PersistentVolume) -> bool {
    volume.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
}

/// Upstream's PV protection `Controller`.
struct PvProtection {
    client: Client,
    volumes: Arc<Informer<PersistentVolume>>,
    queue: WorkQueue<String>,
}

impl PvProtection {
    /// `pvAddedUpdated`.
    fn on_volume_event(&self, event: &Event<PersistentVolume>) {
        let volume = match event {
            Event::Added(volume) | Event::Updated { new: volume, .. } => volume,
            Event::Deleted { .. } => return,
        };
        let name = volume.metadata.name.as_deref().unwrap_or_default();
        log::debug!("Got event on PV PV=\"{name}\"");
        if need_to_add_finalizer(&volume.metadata, PV_PROTECTION_FINALIZER)
            || is_deletion_candidate(&volume.metadata, PV_PROTECTION_FINALIZER)
        {
            self.queue.add(name.to_string());
        }
    }

    /// `processPV`.
    fn process_pv(&self, name: &str) -> SyncResult {
        log::debug!("Processing PV PV=\"{name}\"");
        let started = Instant::now();
        let result = self.process_cached_pv(name);
        log::debug!("Finished processing PV PV=\"{name}\" cost=\"{:?}\"", started.elapsed());
        result.map_err(|e| e.context(format!("PV {name} failed with ")))
    }

    fn process_cached_pv(&self, name: &str) -> SyncResult {
        let Some(volume) = self.volumes.store().get(name) else {
            log::debug!("PV not found, ignoring PV=\"{name}\"");
            return Ok(());
        };
        if is_deletion_candidate(&volume.metadata, PV_PROTECTION_FINALIZER) {
            if !is_being_used(&volume) {
                return self.write(&volume, false);
            }
            log::debug!("Keeping PV because it is being used PV=\"{name}\"");
        }
        if need_to_add_finalizer(&volume.metadata, PV_PROTECTION_FINALIZER) {
            return self.write(&volume, true);
        }
        Ok(())
    }

    /// `addFinalizer` (`add`) or `removeFinalizer`.
    fn write(&self, volume: &PersistentVolume, add: bool) -> SyncResult {
        let api = Api::<PersistentVolume>::cluster(&self.client);
        update_protection_finalizer(&api, &self.volumes, volume, PV_PROTECTION_FINALIZER, add, "PV")
            .map_err(SyncError::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_bound_volume_is_in_use() {
        let volume = |phase: &str| -> PersistentVolume {
            serde_json::from_value(json!({"metadata": {"name": "pv"}, "status": {"phase": phase}})).expect("a volume")
        };
        assert!(is_being_used(&volume("Bound")));
        assert!(!is_being_used(&volume("Released")));
        assert!(!is_being_used(&volume("Available")));
        assert!(!is_being_used(&PersistentVolume::default()));
    }
}
