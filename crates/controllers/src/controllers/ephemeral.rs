//! The ephemeral volume controller (`ephemeral-volume-controller`), after upstream v1.33's
//! `pkg/controller/volume/ephemeral`: for each generic ephemeral volume of a pod, the claim
//! `<pod>-<volume>` is created from the volume's `volumeClaimTemplate` (its labels, annotations
//! and spec), controlled by the pod (`controller` and `blockOwnerDeletion`), so that the garbage
//! collector deletes it with the pod. A claim of that name that the pod does not control is an
//! error: a Warning Event `FailedBinding` on the pod, and the pod is retried with back-off.
//!
//! Pods are queued when added (not when updated: their volumes cannot change), and again when a
//! claim they name is deleted (found through the pod index by claim), so that a deleted claim
//! is created again while its pod lives.

use std::sync::{Arc, OnceLock};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::client::{self, Api, Client, PostParams};
use crate::controllers::volumeutil::{POD_PVC_INDEX, add_pod_pvc_index, ephemeral_claim_name, volume_is_for_pod};
use crate::metrics::ValueFamily;
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::events::{EventRecorder, EventType};
use crate::runtime::informer::{Event, Informer, object_key};
use crate::runtime::workqueue::WorkQueue;

/// What the controller takes from the flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// `--concurrent-ephemeralvolume-syncs`.
    pub workers: usize,
}

/// `events.FailedBinding`.
const FAILED_BINDING: &str = "FailedBinding";

/// Why a pod's ephemeral volume has no claim of its own.
#[derive(Debug, thiserror::Error)]
enum Error {
    /// A claim of the volume's name exists and is not the pod's (`ephemeral.VolumeIsForPod`).
    #[error("PVC {claim} was not created for pod {pod} (pod is not owner)")]
    NotOwner { claim: String, pod: String },
    /// Creating the claim failed.
    #[error("create PVC {name}: {source}")]
    Create { name: String, source: client::Error },
    /// One of the above for one volume of a pod, as the sync reports it.
    #[error("pod {key}, ephemeral volume {volume}: {source}")]
    Volume { key: String, volume: String, source: Box<Error> },
}

impl From<Error> for SyncError {
    fn from(e: Error) -> SyncError {
        SyncError::of(e)
    }
}

/// `ephemeral.NewController`. It cannot fail.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let queue = WorkQueue::new("ephemeral_volume");
    create_metrics();
    let pods = context.informers.informer::<Pod>();
    add_pod_pvc_index(&pods);
    let controller = Arc::new(Ephemeral {
        client: context.client.clone(),
        pods,
        claims: context.informers.informer::<PersistentVolumeClaim>(),
        recorder: context.recorder.clone(),
        queue: queue.clone(),
    });
    let handler = controller.clone();
    controller.pods.add_handler(move |event: &Event<Pod>| {
        if let Event::Added(pod) = event {
            handler.enqueue_pod(pod);
        }
    });
    let handler = controller.clone();
    controller.claims.add_handler(move |event: &Event<PersistentVolumeClaim>| {
        if let Event::Deleted { object, .. } = event {
            handler.on_claim_delete(object);
        }
    });
    Controller::new().with_queue(&queue, config.workers, move |key: &String| controller.sync(key))
}

/// `ephemeral_volume_controller_create_total` and `..._create_failures_total`, registered when
/// the controller is built.
fn create_metrics() -> &'static (Arc<ValueFamily>, Arc<ValueFamily>) {
    static METRICS: OnceLock<(Arc<ValueFamily>, Arc<ValueFamily>)> = OnceLock::new();
    METRICS.get_or_init(|| {
        let attempts = Arc::new(ValueFamily::counter(
            "ephemeral_volume_controller_create_total",
            "[ALPHA] Number of PersistentVolumeClaim creation requests",
            &[],
        ));
        let failures = Arc::new(ValueFamily::counter(
            "ephemeral_volume_controller_create_failures_total",
            "[ALPHA] Number of PersistentVolumeClaim creation requests",
            &[],
        ));
        attempts.ensure(&[]);
        failures.ensure(&[]);
        crate::metrics::global().register(attempts.clone());
        crate::metrics::global().register(failures.clone());
        (attempts, failures)
    })
}

fn volumes(pod: &Pod) -> &[Volume] {
    pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default()
}

/// `ephemeral.VolumeIsForPod` with its error.
fn check_volume_is_for_pod(pod: &Pod, claim: &PersistentVolumeClaim) -> Result<(), Error> {
    if volume_is_for_pod(pod, claim) {
        return Ok(());
    }
    Err(Error::NotOwner { claim: object_key(&claim.metadata), pod: object_key(&pod.metadata) })
}

/// The claim for an ephemeral volume: the template's labels, annotations and spec, controlled
/// by the pod.
fn claim_for(pod: &Pod, volume: &Volume) -> Option<PersistentVolumeClaim> {
    let template = volume.ephemeral.as_ref()?.volume_claim_template.as_ref()?;
    let owner = OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let meta = template.metadata.as_ref();
    Some(PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(ephemeral_claim_name(pod, volume)),
            owner_references: Some(vec![owner]),
            annotations: meta.and_then(|m| m.annotations.clone()),
            labels: meta.and_then(|m| m.labels.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(template.spec.clone()),
        status: None,
    })
}

/// Upstream's `ephemeralController`.
struct Ephemeral {
    client: Client,
    pods: Arc<Informer<Pod>>,
    claims: Arc<Informer<PersistentVolumeClaim>>,
    recorder: EventRecorder,
    queue: WorkQueue<String>,
}

impl Ephemeral {
    /// `enqueuePod`: a live pod with at least one ephemeral volume.
    fn enqueue_pod(&self, pod: &Pod) {
        if pod.metadata.deletion_timestamp.is_none() && volumes(pod).iter().any(|v| v.ephemeral.is_some()) {
            self.queue.add(object_key(&pod.metadata));
        }
    }

    /// `onPVCDelete`: the pods that name the claim.
    fn on_claim_delete(&self, claim: &PersistentVolumeClaim) {
        for pod in self.pods.store().by_index(POD_PVC_INDEX, &object_key(&claim.metadata)) {
            self.enqueue_pod(&pod);
        }
    }

    /// `syncHandler`.
    fn sync(&self, key: &str) -> SyncResult {
        let Some(pod) = self.pods.store().get(key) else {
            log::trace!("Ephemeral: nothing to do for pod, it is gone podKey={key:?}");
            return Ok(());
        };
        if pod.metadata.deletion_timestamp.is_some() {
            log::trace!("Ephemeral: nothing to do for pod, it is marked for deletion podKey={key:?}");
            return Ok(());
        }
        for volume in volumes(&pod) {
            if let Err(e) = self.handle_volume(&pod, volume) {
                let message = format!("ephemeral volume {}: {e}", volume.name);
                self.recorder.event_for(&*pod, EventType::Warning, FAILED_BINDING, &message);
                return Err(
                    Error::Volume { key: key.to_string(), volume: volume.name.clone(), source: Box::new(e) }.into()
                );
            }
        }
        Ok(())
    }

    /// `handleVolume`: creates the volume's claim unless it exists (and is the pod's).
    fn handle_volume(&self, pod: &Pod, volume: &Volume) -> Result<(), Error> {
        let Some(claim) = claim_for(pod, volume) else { return Ok(()) };
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = ephemeral_claim_name(pod, volume);
        if let Some(existing) = self.claims.store().get(&format!("{namespace}/{name}")) {
            check_volume_is_for_pod(pod, &existing)?;
            log::trace!("Ephemeral: PVC already created volumeName={:?} PVC=\"{namespace}/{name}\"", volume.name);
            return Ok(());
        }
        let (attempts, failures) = create_metrics();
        attempts.inc(&[]);
        let api = Api::<PersistentVolumeClaim>::namespaced(&self.client, namespace);
        if let Err(source) = api.create(&claim, &PostParams::default()) {
            failures.inc(&[]);
            return Err(Error::Create { name, source });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "team", "uid": "p1"},
            "spec": {"containers": [{"name": "c", "image": "i"}], "volumes": [
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
                    "metadata": {"labels": {"app": "web"}, "annotations": {"note": "x"}},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}},
                {"name": "config", "emptyDir": {}}
            ]}
        }))
        .expect("a pod")
    }

    #[test]
    fn the_claim_comes_from_the_template_and_is_controlled_by_the_pod() {
        let pod = pod();
        let claim = claim_for(&pod, &volumes(&pod)[0]).expect("a claim");
        assert_eq!(claim.metadata.name.as_deref(), Some("web-scratch"));
        assert_eq!(claim.metadata.labels, Some([("app".to_string(), "web".to_string())].into()));
        assert_eq!(claim.metadata.annotations, Some([("note".to_string(), "x".to_string())].into()));
        let owner = &claim.metadata.owner_references.as_ref().expect("owners")[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("Pod", "p1"));
        assert_eq!((owner.controller, owner.block_owner_deletion), (Some(true), Some(true)));
        assert_eq!(claim.spec.and_then(|s| s.access_modes), Some(vec!["ReadWriteOnce".to_string()]));
        assert!(claim_for(&pod, &volumes(&pod)[1]).is_none(), "not an ephemeral volume");
    }

    #[test]
    fn a_claim_not_controlled_by_the_pod_is_refused() {
        let pod = pod();
        let mut claim = claim_for(&pod, &volumes(&pod)[0]).expect("a claim");
        claim.metadata.namespace = Some("team".into());
        assert_eq!(check_volume_is_for_pod(&pod, &claim).map_err(|e| e.to_string()), Ok(()));
        claim.metadata.owner_references = None;
        assert_eq!(
            check_volume_is_for_pod(&pod, &claim).map_err(|e| e.to_string()),
            Err("PVC team/web-scratch was not created for pod team/web (pod is not owner)".to_string())
        );
    }

    use crate::controllers::testutil::conflict;

    /// A failed claim creation keeps its kind through the volume's context.
    #[test]
    fn a_conflicting_creation_reaches_the_queue_as_a_conflict() {
        let inner = Error::Create { name: "web-scratch".into(), source: conflict() };
        let error = Error::Volume { key: "team/web".into(), volume: "scratch".into(), source: Box::new(inner) };
        let SyncError::Conflict(message) = SyncError::from(error) else { panic!("a conflict") };
        assert!(message.starts_with("pod team/web, ephemeral volume scratch: create PVC web-scratch: "), "{message}");
    }
}
