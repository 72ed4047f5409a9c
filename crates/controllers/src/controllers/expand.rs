//! The volume expand controller (`persistentvolume-expander-controller`), after upstream
//! v1.33's `pkg/controller/volume/expand`. Upstream deprecates it: expansion is done by CSI
//! drivers' external resizers, and this controller only says so. A Bound claim whose storage
//! request grew above its `status.capacity` is looked at with its volume (a fresh GET):
//! - a volume of an in-tree plugin migrated to CSI (`awsElasticBlockStore`, `gcePersistentDisk`,
//!   `azureDisk`, `azureFile`, `cinder`, `vsphereVolume`, `portworxVolume`) gets an Event
//!   `ExternalExpanding` and the claim the annotation `volume.kubernetes.io/storage-resizer`
//!   naming the CSI driver, which its external resizer looks for;
//! - any other volume (CSI ones among them) gets the Event `ExternalExpanding` "waiting for an
//!   external controller to expand this PVC": the kube-controller-manager has no expandable
//!   plugin for it, and a CSI resizer recognises its volumes by `spec.csi.driver`.
//!
//! Flex volumes, which upstream expands in-process with a no-op plugin, are not handled.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use serde_json::json;

use crate::client::{self, Api, Client, Patch, PostParams};
use crate::controllers::volumeutil::PRE_RESIZE_CAPACITY;
use crate::quantity::Quantity;
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::events::{EventRecorder, EventType};
use crate::runtime::informer::{Event, Informer, object_key, split_key};
use crate::runtime::workqueue::WorkQueue;

/// Upstream's `defaultWorkerCount`.
const WORKERS: usize = 10;
/// The claim annotation naming the resizer of a migrated volume (`volumetypes.VolumeResizerKey`).
pub const RESIZER_ANNOTATION: &str = "volume.kubernetes.io/storage-resizer";
/// `events.ExternalExpanding`.
const EXTERNAL_EXPANDING: &str = "ExternalExpanding";

/// Why a claim's expansion could not be looked at or handed on.
#[derive(Debug, thiserror::Error)]
enum Error {
    /// The claim names no volume (client-go refuses the GET before sending it).
    #[error("failed to get PV \"\": resource name may not be empty")]
    NoVolumeName,
    /// The GET of its volume failed.
    #[error("failed to get PV {name:?}: {source}")]
    GetVolume { name: String, source: client::Error },
    /// The volume is bound to another claim.
    #[error("persistent Volume is not bound to PVC being updated : {key}")]
    NotBound { key: String },
    /// The resizer annotation could not be written (also the Warning Event's text).
    #[error(
        "error setting resizer annotation to pvc {key}, with error patchPVCStatus failed to patch PVC {name:?}: {source}"
    )]
    SetResizer { key: String, name: String, source: client::Error },
}

impl From<Error> for SyncError {
    fn from(e: Error) -> SyncError {
        SyncError::of(e)
    }
}

/// `NewExpandController`. It cannot fail.
pub fn new(context: &ControllerContext<'_>) -> Controller {
    let queue = WorkQueue::new("volume_expand");
    let controller = Arc::new(Expand {
        client: context.client.clone(),
        claims: context.informers.informer::<PersistentVolumeClaim>(),
        recorder: context.recorder.clone(),
        queue: queue.clone(),
    });
    let handler = controller.clone();
    controller.claims.add_handler(move |event: &Event<PersistentVolumeClaim>| handler.on_claim_event(event));
    Controller::new().with_queue(&queue, WORKERS, move |key: &String| controller.sync(key))
}

/// Upstream's `expandController`.
struct Expand {
    client: Client,
    claims: Arc<Informer<PersistentVolumeClaim>>,
    recorder: EventRecorder,
    queue: WorkQueue<String>,
}

fn storage(
    list: Option<&std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> Quantity {
    list.and_then(|l| l.get("storage")).and_then(|q| Quantity::parse(&q.0).ok()).unwrap_or_else(Quantity::zero)
}

/// `spec.resources.requests.storage`, zero when unset.
fn requested(claim: &PersistentVolumeClaim) -> Quantity {
    storage(claim.spec.as_ref().and_then(|s| s.resources.as_ref()).and_then(|r| r.requests.as_ref()))
}

/// `status.capacity.storage`, zero when unset.
fn capacity(claim: &PersistentVolumeClaim) -> Quantity {
    storage(claim.status.as_ref().and_then(|s| s.capacity.as_ref()))
}

fn is_bound(claim: &PersistentVolumeClaim) -> bool {
    claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
}

/// The in-tree plugin of a volume and the CSI driver it migrated to
/// (`csitranslation.GetInTreePluginNameFromSpec`, `GetCSINameFromInTreeName`); every one of
/// them is migrated in 1.33 (`CSIMigrationPortworx` is locked on).
fn migrated_plugin(volume: &PersistentVolume) -> Option<(&'static str, &'static str)> {
    let spec = volume.spec.as_ref()?;
    let plugins = [
        (spec.aws_elastic_block_store.is_some(), "kubernetes.io/aws-ebs", "ebs.csi.aws.com"),
        (spec.gce_persistent_disk.is_some(), "kubernetes.io/gce-pd", "pd.csi.storage.gke.io"),
        (spec.azure_file.is_some(), "kubernetes.io/azure-file", "file.csi.azure.com"),
        (spec.azure_disk.is_some(), "kubernetes.io/azure-disk", "disk.csi.azure.com"),
        (spec.vsphere_volume.is_some(), "kubernetes.io/vsphere-volume", "csi.vsphere.vmware.com"),
        (spec.cinder.is_some(), "kubernetes.io/cinder", "cinder.csi.openstack.org"),
        (spec.portworx_volume.is_some(), "kubernetes.io/portworx-volume", "pxd.portworx.com"),
    ];
    plugins.into_iter().find(|(supported, _, _)| *supported).map(|(_, plugin, driver)| (plugin, driver))
}

/// Whether the volume is bound to this claim (namespace and uid of its `claimRef`).
fn bound_to(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .is_some_and(|r| r.namespace == claim.metadata.namespace && r.uid.is_some() && r.uid == claim.metadata.uid)
}

/// Whether a claim and its volume need the controller: the request exceeds the capacity, or
/// an in-tree resize left its annotation on the volume.
fn needs_expansion(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> bool {
    let annotated = volume.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(PRE_RESIZE_CAPACITY));
    requested(claim) > capacity(claim) || annotated
}

impl Expand {
    /// The add/update/delete handlers: Bound claims, on update only when the request or the
    /// capacity grew.
    fn on_claim_event(&self, event: &Event<PersistentVolumeClaim>) {
        let claim = match event {
            Event::Added(claim) => claim,
            Event::Updated { old, new } => {
                if requested(new) <= requested(old) && capacity(new) <= capacity(old) {
                    return;
                }
                new
            }
            Event::Deleted { object, .. } => object,
        };
        if is_bound(claim) {
            self.queue.add(object_key(&claim.metadata));
        }
    }

    /// `syncHandler`.
    fn sync(&self, key: &str) -> SyncResult {
        let Some(claim) = self.claims.store().get(key) else { return Ok(()) };
        let volume_name = claim.spec.as_ref().and_then(|s| s.volume_name.clone()).unwrap_or_default();
        if volume_name.is_empty() {
            return Err(Error::NoVolumeName.into());
        }
        let volume = Api::<PersistentVolume>::cluster(&self.client)
            .get(&volume_name)
            .map_err(|source| Error::GetVolume { name: volume_name.clone(), source })?;
        if !bound_to(&volume, &claim) {
            return Err(Error::NotBound { key: key.to_string() }.into());
        }
        if !needs_expansion(&claim, &volume) {
            return Ok(());
        }
        if let Some((plugin, driver)) = migrated_plugin(&volume) {
            return self.hand_to_migrated_resizer(key, &claim, plugin, driver);
        }
        if volume.spec.as_ref().is_some_and(|s| s.flex_volume.is_some()) {
            log::info!("Flex volume expansion is not supported here pvcKey={key:?}");
            return Ok(());
        }
        let message = "waiting for an external controller to expand this PVC";
        self.recorder.event_for(&*claim, EventType::Normal, EXTERNAL_EXPANDING, message);
        log::info!(
            "Waiting for an external controller to expand the PVC pvcKey={key:?} pvcUID={:?}",
            claim.metadata.uid.as_deref().unwrap_or_default()
        );
        Ok(())
    }

    /// The CSI-migration branch: an Event, then the resizer annotation (`util.SetClaimResizer`,
    /// a patch of the status subresource with the claim's resourceVersion).
    fn hand_to_migrated_resizer(
        &self,
        key: &str,
        claim: &PersistentVolumeClaim,
        plugin: &str,
        driver: &str,
    ) -> SyncResult {
        let message = format!("CSI migration enabled for {plugin}; waiting for external resizer to expand the pvc");
        self.recorder.event_for(claim, EventType::Normal, EXTERNAL_EXPANDING, &message);
        let current = claim.metadata.annotations.as_ref().and_then(|a| a.get(RESIZER_ANNOTATION));
        if current.map(String::as_str) == Some(driver) {
            return Ok(());
        }
        let (namespace, name) = split_key(key);
        let patch = json!({"metadata": {"resourceVersion": claim.metadata.resource_version,
            "annotations": {RESIZER_ANNOTATION: driver}}});
        let api = Api::<PersistentVolumeClaim>::namespaced(&self.client, namespace);
        if let Err(source) = api.patch_status(name, &Patch::Strategic(patch), &PostParams::default()) {
            let error = Error::SetResizer { key: key.to_string(), name: name.to_string(), source };
            self.recorder.event_for(claim, EventType::Warning, EXTERNAL_EXPANDING, &error.to_string());
            return Err(error.into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(request: &str, capacity: Option<&str>) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": "data", "namespace": "team", "uid": "c1"},
            "spec": {"resources": {"requests": {"storage": request}}, "volumeName": "pv1"},
            "status": {"phase": "Bound", "capacity": capacity.map(|c| json!({"storage": c}))}
        }))
        .expect("a claim")
    }

    fn volume(source: serde_json::Value, claim_uid: &str) -> PersistentVolume {
        let mut spec = json!({"capacity": {"storage": "1Gi"},
            "claimRef": {"namespace": "team", "name": "data", "uid": claim_uid}});
        spec.as_object_mut().expect("an object").extend(source.as_object().expect("an object").clone());
        serde_json::from_value(json!({"metadata": {"name": "pv1"}, "spec": spec})).expect("a volume")
    }

    #[test]
    fn only_a_grown_request_needs_expansion() {
        let csi = volume(json!({"csi": {"driver": "csi.kcm-sandbox.dev", "volumeHandle": "h"}}), "c1");
        assert!(needs_expansion(&claim("2Gi", Some("1Gi")), &csi));
        assert!(!needs_expansion(&claim("1Gi", Some("1Gi")), &csi));
        assert!(!needs_expansion(&claim("1024Mi", Some("1Gi")), &csi), "equal quantities in other units");
        assert!(!needs_expansion(&claim("1Gi", Some("2Gi")), &csi));
        let mut annotated = csi.clone();
        annotated.metadata.annotations = Some([(PRE_RESIZE_CAPACITY.to_string(), "1Gi".to_string())].into());
        assert!(needs_expansion(&claim("1Gi", Some("1Gi")), &annotated));
    }

    #[test]
    fn in_tree_volumes_name_their_csi_driver() {
        let ebs = volume(json!({"awsElasticBlockStore": {"volumeID": "vol-1"}}), "c1");
        assert_eq!(migrated_plugin(&ebs), Some(("kubernetes.io/aws-ebs", "ebs.csi.aws.com")));
        let px = volume(json!({"portworxVolume": {"volumeID": "v"}}), "c1");
        assert_eq!(migrated_plugin(&px), Some(("kubernetes.io/portworx-volume", "pxd.portworx.com")));
        let csi = volume(json!({"csi": {"driver": "csi.kcm-sandbox.dev", "volumeHandle": "h"}}), "c1");
        assert_eq!(migrated_plugin(&csi), None);
    }

    #[test]
    fn the_volume_must_be_bound_to_the_claim() {
        let csi = json!({"csi": {"driver": "d", "volumeHandle": "h"}});
        assert!(bound_to(&volume(csi.clone(), "c1"), &claim("2Gi", None)));
        assert!(!bound_to(&volume(csi, "other"), &claim("2Gi", None)));
    }

    /// A volume GET answered `429 Retry-After` now waits the server's delay (it was a plain
    /// failure, retried at the queue's rate).
    #[test]
    fn a_retry_after_on_the_volume_get_reaches_the_queue() {
        let delay = std::time::Duration::from_secs(3);
        let source: client::Error = client::ApiError::from_response(429, b"", Some(delay)).into();
        let error = Error::GetVolume { name: "pv1".into(), source };
        let SyncError::RetryAfter { delay: waited, message } = SyncError::from(error) else { panic!("a retry-after") };
        assert_eq!(waited, delay);
        assert!(message.starts_with("failed to get PV \"pv1\": "), "{message}");
    }
}
