//! The PersistentVolume binder (`persistentvolume-binder-controller`), after upstream v1.36's
//! `pkg/controller/volume/persistentvolume` for external (CSI) provisioners: it binds claims to
//! volumes (static binding to the smallest matching Available volume, pre-bound claims and
//! volumes), asks external provisioners for volumes (the `storage-provisioner` annotations and
//! the `ExternalProvisioning` Event), gives class-less claims the default StorageClass, keeps the
//! phases of claims and volumes, and releases volumes whose claim is gone, leaving the deletion
//! of provisioned volumes to their provisioner. In-tree volume plugins (provisioning, deleting
//! and recycling by the controller itself) are not built: a `kubernetes.io/` provisioner gets
//! `ProvisioningFailed`, a volume to recycle `VolumeFailedRecycle`.
//!
//! As upstream, the controller keeps its own caches of volumes and claims, which take its
//! writes at once (`storeObjectUpdate`), so that a sync after its write never sees the older
//! state the informer may still hold; a key is synced only when the informer's object is not
//! older than the cached one. The queues `volumes` and `claims` are rate-limited (since v1.36;
//! v1.33's were plain and a failed sync waited for the resync every
//! `--pvclaimbinder-sync-period`): a failed sync is requeued with the per-item backoff.

mod claim;
mod error;
mod index;
mod metrics;
mod util;
mod volume;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use parking_lot::Mutex;

use crate::client::Client;
use crate::controllers::volumeutil::add_pod_pvc_index;
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::events::EventRecorder;
use crate::runtime::informer::{Event, Informer, object_key};
use crate::runtime::workqueue::WorkQueue;

pub use error::{Error, Mismatch};

/// What the controller takes from the flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// `--pvclaimbinder-sync-period`.
    pub sync_period: Duration,
    /// `--enable-dynamic-provisioning`.
    pub enable_dynamic_provisioning: bool,
    /// The `VolumeAttributesClass` gate (GA in 1.34): binding copies the volume's class into the
    /// claim's `status.currentVolumeAttributesClassName`.
    pub volume_attributes_class: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sync_period: Duration::from_secs(15),
            enable_dynamic_provisioning: true,
            volume_attributes_class: true,
        }
    }
}

/// `NewController`.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let volume_queue = WorkQueue::new("volumes");
    let claim_queue = WorkQueue::new("claims");
    let pods = context.informers.informer::<Pod>();
    add_pod_pvc_index(&pods);
    let controller = Arc::new(PvController {
        client: context.client.clone(),
        recorder: context.recorder.clone(),
        volume_informer: context.informers.informer::<PersistentVolume>(),
        claim_informer: context.informers.informer::<PersistentVolumeClaim>(),
        classes: context.informers.informer::<StorageClass>(),
        pods,
        volumes: VersionedCache::default(),
        claims: VersionedCache::default(),
        volume_queue: volume_queue.clone(),
        claim_queue: claim_queue.clone(),
        enable_dynamic_provisioning: config.enable_dynamic_provisioning,
        volume_attributes_class: config.volume_attributes_class,
    });
    let volumes = volume_queue.clone();
    controller.volume_informer.add_handler(move |event: &Event<PersistentVolume>| {
        volumes.add(object_key(&event.object().metadata));
    });
    let claims = claim_queue.clone();
    controller.claim_informer.add_handler(move |event: &Event<PersistentVolumeClaim>| {
        claims.add(object_key(&event.object().metadata));
    });
    let (init, resync, volume_worker, claim_worker) =
        (controller.clone(), controller.clone(), controller.clone(), controller.clone());
    Controller::new()
        .once_synced("persistent volume caches", move || {
            init.initialize_caches();
            metrics::register(init.clone());
        })
        .resync_every("persistent volume resync", config.sync_period, move || resync.resync())
        .with_queue(&volume_queue, 1, move |key: &String| volume_worker.volume_work(key))
        .with_queue(&claim_queue, 1, move |key: &String| claim_worker.claim_work(key))
}

/// The controller's own cache of one kind (`storeObjectUpdate`): an object replaces the cached
/// one unless that one has a newer resourceVersion.
struct VersionedCache<K> {
    objects: Mutex<HashMap<String, Arc<K>>>,
}

impl<K> Default for VersionedCache<K> {
    fn default() -> Self {
        VersionedCache { objects: Mutex::new(HashMap::new()) }
    }
}

fn resource_version(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> u64 {
    meta.resource_version.as_deref().and_then(|v| v.parse().ok()).unwrap_or(0)
}

impl<K: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>> VersionedCache<K> {
    /// Stores `object` unless the cache holds a newer version; whether it was stored.
    fn update(&self, object: Arc<K>) -> bool {
        let key = object_key(object.metadata());
        let mut objects = self.objects.lock();
        if let Some(old) = objects.get(&key)
            && resource_version(old.metadata()) > resource_version(object.metadata())
        {
            log::debug!("storeObjectUpdate: ignoring {key}: version {:?} is older", object.metadata().resource_version);
            return false;
        }
        objects.insert(key, object);
        true
    }

    fn get(&self, key: &str) -> Option<Arc<K>> {
        self.objects.lock().get(key).cloned()
    }

    fn remove(&self, key: &str) {
        self.objects.lock().remove(key);
    }

    fn list(&self) -> Vec<Arc<K>> {
        self.objects.lock().values().cloned().collect()
    }
}

/// Upstream's `PersistentVolumeController`.
struct PvController {
    client: Client,
    recorder: EventRecorder,
    volume_informer: Arc<Informer<PersistentVolume>>,
    claim_informer: Arc<Informer<PersistentVolumeClaim>>,
    classes: Arc<Informer<StorageClass>>,
    pods: Arc<Informer<Pod>>,
    /// `ctrl.volumes`: its own cache of volumes, by name.
    volumes: VersionedCache<PersistentVolume>,
    /// `ctrl.claims`: its own cache of claims, by `namespace/name`.
    claims: VersionedCache<PersistentVolumeClaim>,
    volume_queue: WorkQueue<String>,
    claim_queue: WorkQueue<String>,
    enable_dynamic_provisioning: bool,
    volume_attributes_class: bool,
}

impl PvController {
    /// `initializeCaches`: the informers' objects into the controller's caches.
    fn initialize_caches(&self) {
        for volume in self.volume_informer.store().list() {
            self.volumes.update(volume);
        }
        for claim in self.claim_informer.store().list() {
            self.claims.update(claim);
        }
    }

    /// `resync`: every claim and volume queued again.
    fn resync(&self) {
        log::debug!("Resyncing PV controller");
        for claim in self.claim_informer.store().list() {
            self.claim_queue.add(object_key(&claim.metadata));
        }
        for volume in self.volume_informer.store().list() {
            self.volume_queue.add(object_key(&volume.metadata));
        }
    }

    /// `syncVolumeByKey`: sync the informer's volume, or process its deletion. A failed sync
    /// is requeued with the queue's rate limit (`processNextVolumeWorkItem`).
    fn volume_work(&self, key: &str) -> SyncResult {
        if let Some(volume) = self.volume_informer.store().get(key) {
            if self.volumes.update(volume.clone()) {
                self.sync_volume(&volume)
                    .map_err(|e| SyncError::of(Error::SyncVolume { key: key.into(), source: Box::new(e) }))?;
            }
            return Ok(());
        }
        let Some(volume) = self.volumes.get(key) else {
            log::debug!("Deletion of volume was already processed volumeKey={key:?}");
            return Ok(());
        };
        self.volumes.remove(key);
        metrics::volume_deleted(key);
        if let Some(reference) = util::claim_ref(&volume) {
            self.claim_queue.add(util::claim_ref_key(reference));
        }
        Ok(())
    }

    /// `syncClaimByKey`: sync the informer's claim, or process its deletion. A failed sync is
    /// requeued with the queue's rate limit (`processNextClaimWorkItem`).
    fn claim_work(&self, key: &str) -> SyncResult {
        if let Some(claim) = self.claim_informer.store().get(key) {
            if self.claims.update(claim.clone()) {
                self.sync_claim(&claim)
                    .map_err(|e| SyncError::of(Error::SyncClaim { key: key.into(), source: Box::new(e) }))?;
            }
            return Ok(());
        }
        let Some(claim) = self.claims.get(key) else {
            log::debug!("Deletion of claim was already processed claimKey={key:?}");
            return Ok(());
        };
        self.claims.remove(key);
        let volume_name = util::claim_volume_name(&claim);
        if !volume_name.is_empty() {
            self.volume_queue.add(volume_name.to_string());
        }
        Ok(())
    }

    /// The StorageClass of this name from the informer.
    fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        self.classes.store().get(name)
    }
}
