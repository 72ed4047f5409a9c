//! The PVC protection controller (`persistentvolumeclaim-protection-controller`), after
//! upstream v1.33's `pkg/controller/volume/pvcprotection`.
//!
//! kube-apiserver's `StorageObjectInUseProtection` admission puts the finalizer
//! `kubernetes.io/pvc-protection` on every claim; this controller adds it to a claim that lacks
//! it (while the claim is not being deleted) and removes it from a claim being deleted once no
//! pod uses the claim. A pod uses a claim when it is scheduled (`spec.nodeName` set) and names
//! the claim in a `persistentVolumeClaim` volume, or in an `ephemeral` volume (claim
//! `<pod>-<volume>`, controlled by the pod) while the pod is not shut down. The pods are looked
//! up first in the informer's cache through an index of pods by claim, then, only if the cache
//! shows none, in a live list of the namespace's pods, since the cache may be stale.
//!
//! As upstream, the keys of the `pvcprotection` queue are grouped by namespace before they are
//! processed, so that the claims of one namespace processed together share one live list.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Volume};
use parking_lot::Mutex;

use crate::apimachinery::clock::RealClock;
use crate::client::{Api, Client, ListParams};
use crate::controllers::finalizerutil::{is_deletion_candidate, need_to_add_finalizer, update_finalizer};
use crate::controllers::volumeutil::{
    POD_PVC_INDEX, PVC_PROTECTION_FINALIZER, add_pod_pvc_index, ephemeral_claim_name, is_pod_terminated,
    volume_is_for_pod,
};
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::informer::{Event, Informer, object_key, split_key};
use crate::runtime::workqueue::{RateLimiter, WorkQueue, default_controller_rate_limiter};

/// What the controller takes from the flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// Namespace workers; upstream runs one.
    pub workers: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { workers: 1 }
    }
}

/// `NewPVCProtectionController`.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let queue = WorkQueue::new("pvcprotection");
    // Upstream's `namespaceQueue` is an unnamed plain queue: no metrics.
    let namespaces = WorkQueue::plain("");
    let pods = context.informers.informer::<Pod>();
    add_pod_pvc_index(&pods);
    let controller = Arc::new(PvcProtection {
        name: context.name.to_string(),
        client: context.client.clone(),
        claims: context.informers.informer::<PersistentVolumeClaim>(),
        pods,
        queue: queue.clone(),
        namespaces: namespaces.clone(),
        pending: Mutex::new(HashMap::new()),
        failures: Box::new(default_controller_rate_limiter(Arc::new(RealClock))),
    });
    let handler = controller.clone();
    controller.claims.add_handler(move |event: &Event<PersistentVolumeClaim>| handler.on_claim_event(event));
    let handler = controller.clone();
    controller.pods.add_handler(move |event: &Event<Pod>| handler.on_pod_event(event));
    let main = controller.clone();
    Controller::new().with_queue(&queue, 1, move |key: &String| main.process_next_work_item(key)).with_queue(
        &namespaces,
        config.workers,
        move |namespace: &String| {
            controller.process_pvcs_by_namespace(namespace);
            Ok(())
        },
    )
}

fn volumes(pod: &Pod) -> &[Volume] {
    pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default()
}

fn node_name(pod: &Pod) -> &str {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default()
}

/// `podIsShutDown`: kubelet is done with the pod, or it was force-deleted.
fn pod_is_shut_down(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some() && pod.metadata.deletion_grace_period_seconds == Some(0)
}

/// `podUsesPVC`: only a scheduled pod counts, as kubelet starts no pod whose claim is being
/// deleted.
fn pod_uses_pvc(pod: &Pod, claim: &PersistentVolumeClaim) -> bool {
    if node_name(pod).is_empty() {
        return false;
    }
    let claim_name = claim.metadata.name.as_deref().unwrap_or_default();
    let uses = volumes(pod).iter().any(|volume| {
        volume.persistent_volume_claim.as_ref().is_some_and(|source| source.claim_name == claim_name)
            || (!pod_is_shut_down(pod)
                && volume.ephemeral.is_some()
                && ephemeral_claim_name(pod, volume) == claim_name
                && volume_is_for_pod(pod, claim))
    });
    if uses {
        log::info!("Pod uses PVC pod=\"{}\" PVC=\"{}\"", object_key(&pod.metadata), object_key(&claim.metadata));
    }
    uses
}

/// One queued claim waiting for its namespace's turn (`pvcData`).
struct Pending {
    key: String,
    name: String,
}

/// Upstream's PVC protection `Controller`.
struct PvcProtection {
    name: String,
    client: Client,
    claims: Arc<Informer<PersistentVolumeClaim>>,
    pods: Arc<Informer<Pod>>,
    queue: WorkQueue<String>,
    /// `pvcProcessingStore.namespaceQueue`.
    namespaces: WorkQueue<String>,
    /// `pvcProcessingStore.namespaceToPVCsMap`.
    pending: Mutex<HashMap<String, Vec<Pending>>>,
    /// The per-claim backoff of failed claims (`queue.AddRateLimited` / `Forget`): kept here
    /// because the claim's key is done in `queue` once it is handed to its namespace.
    failures: Box<dyn RateLimiter<String>>,
}

impl PvcProtection {
    /// `pvcAddedUpdated`.
    fn on_claim_event(&self, event: &Event<PersistentVolumeClaim>) {
        let claim = match event {
            Event::Added(claim) | Event::Updated { new: claim, .. } => claim,
            Event::Deleted { .. } => return,
        };
        log::debug!("Got event on PVC pvc=\"{}\"", object_key(&claim.metadata));
        if need_to_add_finalizer(&claim.metadata, PVC_PROTECTION_FINALIZER)
            || is_deletion_candidate(&claim.metadata, PVC_PROTECTION_FINALIZER)
        {
            self.queue.add(object_key(&claim.metadata));
        }
    }

    /// `podAddedDeletedUpdated`.
    fn on_pod_event(&self, event: &Event<Pod>) {
        match event {
            Event::Added(pod) => self.enqueue_pvcs(pod, false),
            Event::Deleted { object, .. } => self.enqueue_pvcs(object, true),
            Event::Updated { old, new } => {
                self.enqueue_pvcs(new, false);
                if old.metadata.uid != new.metadata.uid {
                    self.enqueue_pvcs(old, true);
                }
            }
        }
    }

    /// `enqueuePVCs`: the claims of a pod that is deleted, terminated or not scheduled.
    fn enqueue_pvcs(&self, pod: &Pod, deleted: bool) {
        if !deleted && !is_pod_terminated(pod) && !node_name(pod).is_empty() {
            return;
        }
        log::debug!(
            "Enqueuing PVCs for Pod pod=\"{}\" podUID=\"{}\"",
            object_key(&pod.metadata),
            pod.metadata.uid.as_deref().unwrap_or_default()
        );
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        for volume in volumes(pod) {
            if let Some(source) = &volume.persistent_volume_claim {
                self.queue.add(format!("{namespace}/{}", source.claim_name));
            } else if volume.ephemeral.is_some() {
                self.queue.add(format!("{namespace}/{}", ephemeral_claim_name(pod, volume)));
            }
        }
    }

    /// `processNextWorkItem`: hands the claim to its namespace (`pvcProcessingStore.addOrUpdate`).
    fn process_next_work_item(&self, key: &str) -> SyncResult {
        let (namespace, name) = split_key(key);
        let mut pending = self.pending.lock();
        let claims = pending.entry(namespace.to_string()).or_insert_with(|| {
            self.namespaces.add(namespace.to_string());
            Vec::new()
        });
        claims.push(Pending { key: key.to_string(), name: name.to_string() });
        Ok(())
    }

    /// `processPVCsByNamespace`: the namespace's queued claims, with one lazy live list.
    fn process_pvcs_by_namespace(&self, namespace: &str) {
        let claims = self.pending.lock().remove(namespace).unwrap_or_default();
        let mut live: Option<Vec<Pod>> = None;
        for Pending { key, name } in claims {
            match self.process_pvc(namespace, &name, &mut live) {
                Ok(()) => self.failures.forget(&key),
                Err(e) => {
                    log::error!("{}: PVC {name}/{namespace} failed with: {}", self.name, e.message());
                    let delay = self.failures.when(&key);
                    self.queue.add_after(key, delay);
                }
            }
        }
    }

    /// `processPVC`.
    fn process_pvc(&self, namespace: &str, name: &str, live: &mut Option<Vec<Pod>>) -> SyncResult {
        let reference = format!("{namespace}/{name}");
        log::debug!("Processing PVC PVC=\"{reference}\"");
        let started = Instant::now();
        let result = self.process_cached_pvc(&reference, live);
        log::debug!("Finished processing PVC PVC=\"{reference}\" duration=\"{:?}\"", started.elapsed());
        result
    }

    fn process_cached_pvc(&self, key: &str, live: &mut Option<Vec<Pod>>) -> SyncResult {
        let Some(claim) = self.claims.store().get(key) else {
            log::debug!("PVC not found, ignoring PVC=\"{key}\"");
            return Ok(());
        };
        if is_deletion_candidate(&claim.metadata, PVC_PROTECTION_FINALIZER) {
            if !self.is_being_used(&claim, live)? {
                return self.remove_finalizer(&claim);
            }
            log::info!("Keeping PVC because it is being used PVC=\"{key}\"");
        }
        if need_to_add_finalizer(&claim.metadata, PVC_PROTECTION_FINALIZER) {
            return self.add_finalizer(&claim);
        }
        Ok(())
    }

    /// `addFinalizer`.
    fn add_finalizer(&self, claim: &PersistentVolumeClaim) -> SyncResult {
        let key = object_key(&claim.metadata);
        self.update(claim, true).inspect_err(|e| {
            log::error!("Error adding protection finalizer to PVC err=\"{}\" PVC=\"{key}\"", e.message());
        })?;
        log::info!("Added protection finalizer to PVC PVC=\"{key}\"");
        Ok(())
    }

    /// `removeFinalizer`.
    fn remove_finalizer(&self, claim: &PersistentVolumeClaim) -> SyncResult {
        let key = object_key(&claim.metadata);
        self.update(claim, false).inspect_err(|e| {
            log::error!("Error removing protection finalizer from PVC err=\"{}\" PVC=\"{key}\"", e.message());
        })?;
        log::info!("Removed protection finalizer from PVC PVC=\"{key}\"");
        Ok(())
    }

    fn update(&self, claim: &PersistentVolumeClaim, add: bool) -> SyncResult {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        let api = Api::<PersistentVolumeClaim>::namespaced(&self.client, namespace);
        update_finalizer(&api, &self.claims, claim, PVC_PROTECTION_FINALIZER, add).map_err(SyncError::from)
    }

    /// `isBeingUsed`: the cache first; when it shows no user, the live list.
    fn is_being_used(&self, claim: &PersistentVolumeClaim, live: &mut Option<Vec<Pod>>) -> Result<bool, SyncError> {
        if self.ask_informer(claim) {
            return Ok(true);
        }
        self.ask_api_server(claim, live)
    }

    /// `askInformer`.
    fn ask_informer(&self, claim: &PersistentVolumeClaim) -> bool {
        let key = object_key(&claim.metadata);
        log::debug!("Looking for Pods using PVC in the Informer's cache PVC=\"{key}\"");
        if self.pods.store().by_index(POD_PVC_INDEX, &key).iter().any(|pod| pod_uses_pvc(pod, claim)) {
            return true;
        }
        log::debug!("No Pod using PVC was found in the Informer's cache PVC=\"{key}\"");
        false
    }

    /// `askAPIServer`: the namespace's pods are listed once per batch (`LazyLivePodList`).
    fn ask_api_server(&self, claim: &PersistentVolumeClaim, live: &mut Option<Vec<Pod>>) -> Result<bool, SyncError> {
        let key = object_key(&claim.metadata);
        log::debug!("Looking for Pods using PVC PVC=\"{key}\"");
        let pods = match live {
            Some(pods) => pods,
            None => {
                let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
                log::debug!("Live listing Pods in namespace namespace=\"{namespace}\"");
                let list = Api::<Pod>::namespaced(&self.client, namespace)
                    .list(&ListParams::default())
                    .map_err(|e| SyncError::from(e).context("live list of pods failed"))?;
                live.insert(list.items)
            }
        };
        if pods.iter().any(|pod| pod_uses_pvc(pod, claim)) {
            return Ok(true);
        }
        log::info!("PVC is unused PVC=\"{key}\"");
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).expect("a pod")
    }

    fn claim(name: &str, owner_uid: Option<&str>) -> PersistentVolumeClaim {
        let owners = owner_uid
            .map(|uid| json!([{"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": uid, "controller": true}]));
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns", "ownerReferences": owners}}))
            .expect("a claim")
    }

    fn web(node: &str) -> Pod {
        pod(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "p1"},
            "spec": {"nodeName": node, "containers": [], "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                {"name": "config", "configMap": {"name": "c"}}
            ]}
        }))
    }

    #[test]
    fn a_pod_is_indexed_by_its_claims_and_its_ephemeral_claims() {
        assert_eq!(crate::controllers::volumeutil::claim_names(&web("n1")), vec!["data-web-0", "web-scratch"]);
    }

    #[test]
    fn only_a_scheduled_pod_uses_a_claim() {
        assert!(pod_uses_pvc(&web("n1"), &claim("data-web-0", None)));
        assert!(!pod_uses_pvc(&web(""), &claim("data-web-0", None)), "not scheduled");
        assert!(!pod_uses_pvc(&web("n1"), &claim("other", None)));
    }

    #[test]
    fn an_ephemeral_claim_is_used_only_by_its_owner_while_not_shut_down() {
        assert!(pod_uses_pvc(&web("n1"), &claim("web-scratch", Some("p1"))));
        assert!(!pod_uses_pvc(&web("n1"), &claim("web-scratch", Some("other"))), "another pod's claim");
        assert!(!pod_uses_pvc(&web("n1"), &claim("web-scratch", None)));
        let mut shut_down = web("n1");
        shut_down.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time("2026-11-26T10:00:00Z".parse().expect("time")));
        shut_down.metadata.deletion_grace_period_seconds = Some(0);
        assert!(!pod_uses_pvc(&shut_down, &claim("web-scratch", Some("p1"))));
        assert!(pod_uses_pvc(&shut_down, &claim("data-web-0", None)), "a plain claim counts until the pod goes");
    }

    #[test]
    fn a_pod_is_terminated_when_it_finished_or_is_deleted_with_nothing_running() {
        let mut done = web("n1");
        done.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).expect("status"));
        assert!(is_pod_terminated(&done));
        let mut running = web("n1");
        running.status = Some(
            serde_json::from_value(json!({"phase": "Running", "containerStatuses": [
                {"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}}}
            ]}))
            .expect("status"),
        );
        assert!(!is_pod_terminated(&running));
        running.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time("2026-11-26T10:00:00Z".parse().expect("time")));
        assert!(!is_pod_terminated(&running), "a container still runs");
        let mut deleted = web("n1");
        deleted.metadata.deletion_timestamp = running.metadata.deletion_timestamp.clone();
        assert!(is_pod_terminated(&deleted));
    }
}
