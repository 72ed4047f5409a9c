//! Informer handlers (`addPod`, `updatePod`, `deletePod`, `addJob`, `updateJob`, `deleteJob`)
//! and the orphan-pod queue (`syncOrphanPod`): they only record what was observed and queue
//! keys.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::{JobController, OrphanKey, SYNC_BATCH_PERIOD, has_tracking_finalizer, job_selector};
use super::{metrics, since, spec};
use crate::apimachinery::labels::Selector;
use crate::apimachinery::pod::phase;
use crate::controllers::jobutil::is_finished;
use crate::controllers::podutil::ranking::pod_key;
use crate::runtime::controller::{SyncError, SyncResult};
use crate::runtime::controller_ref::{controller_of, resolve_controller_ref, selecting_orphan};
use crate::runtime::informer::{Event, object_key};

impl JobController {
    pub(super) fn on_pod_event(&self, event: &Event<Pod>) {
        match event {
            Event::Added(pod) => self.on_pod_added(pod),
            Event::Updated { old, new } => self.on_pod_updated(old, new),
            Event::Deleted { object, .. } => {
                record_finished_with_finalizer(Some(object), None);
                self.on_pod_deleted(object, true);
            }
        }
    }

    pub(super) fn on_job_event(&self, event: &Event<Job>) {
        match event {
            Event::Added(job) => {
                self.queue.add(object_key(&job.metadata));
                if let Some(name) = self.gates.managed_by_external(job) {
                    metrics().by_external_controller.inc(&[name]);
                }
            }
            Event::Updated { old, new } => self.on_job_updated(old, new),
            Event::Deleted { object, .. } => {
                let key = object_key(&object.metadata);
                self.consistency.clear(&key, object.metadata.uid.as_deref().unwrap_or(""));
                self.finished.observed(object.metadata.uid.as_deref().unwrap_or(""));
                self.queue.add(key.clone());
                self.enqueue_selector(object);
                self.backoff.remove(&key);
            }
        }
    }

    /// `resolveControllerRef`: the cached Job a controller reference names.
    fn resolve(&self, namespace: &str, owner: &OwnerReference) -> Option<Arc<Job>> {
        resolve_controller_ref(&self.jobs, namespace, owner)
    }

    /// `enqueueSyncJobBatched`.
    fn enqueue_batched(&self, job: &Job) {
        self.queue.add_after(object_key(&job.metadata), SYNC_BATCH_PERIOD);
    }

    /// `getPodJobs`: the Jobs whose selector matches an orphan's labels (none without labels).
    fn pod_jobs(&self, pod: &Pod) -> Vec<Arc<Job>> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        let labels = pod.metadata.labels.as_ref();
        let jobs = selecting_orphan(&self.jobs, namespace, labels, |job| job_selector(job).ok());
        if jobs.len() > 1 {
            log::error!("user error! more than one job is selecting pods with labels: {labels:?}");
        }
        jobs
    }

    fn on_pod_added(&self, pod: &Pod) {
        record_finished_with_finalizer(None, Some(pod));
        if pod.metadata.deletion_timestamp.is_some() {
            // A pod already being deleted (seen after a restart) is no creation.
            self.on_pod_deleted(pod, false);
            return;
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        if let Some(owner) = controller_of(&pod.metadata) {
            if let Some(job) = self.resolve(namespace, owner) {
                self.expectations.creation_observed(&object_key(&job.metadata));
                self.enqueue_batched(&job);
            }
            return;
        }
        if has_tracking_finalizer(pod) {
            self.enqueue_orphan(pod);
        }
        for job in self.pod_jobs(pod) {
            self.enqueue_batched(&job);
        }
    }

    fn on_pod_updated(&self, old: &Pod, new: &Pod) {
        record_finished_with_finalizer(Some(old), Some(new));
        if old.metadata.resource_version == new.metadata.resource_version {
            return;
        }
        if new.metadata.deletion_timestamp.is_some() {
            self.on_pod_deleted(new, false);
            return;
        }
        let namespace = new.metadata.namespace.as_deref().unwrap_or("");
        let uid = new.metadata.uid.as_deref().unwrap_or("");
        let finalizer_removed = !has_tracking_finalizer(new);
        let (current, previous) = (controller_of(&new.metadata), controller_of(&old.metadata));
        let owner_changed = current != previous;
        if owner_changed
            && let Some(previous) = previous
            && let Some(job) = self.resolve(namespace, previous)
        {
            if finalizer_removed {
                self.finalizer_expectations.observed(&object_key(&job.metadata), uid);
            }
            self.enqueue_batched(&job);
        }
        if let Some(current) = current {
            if let Some(job) = self.resolve(namespace, current) {
                if finalizer_removed {
                    self.finalizer_expectations.observed(&object_key(&job.metadata), uid);
                }
                self.enqueue_batched(&job);
            }
            return;
        }
        if has_tracking_finalizer(new) {
            self.enqueue_orphan(new);
        }
        if owner_changed || old.metadata.labels != new.metadata.labels {
            for job in self.pod_jobs(new) {
                self.enqueue_batched(&job);
            }
        }
    }

    /// `deletePod`: `is_final` for the informer's delete, false for a deletion timestamp.
    fn on_pod_deleted(&self, pod: &Pod, is_final: bool) {
        let has_finalizer = has_tracking_finalizer(pod);
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        let Some(owner) = controller_of(&pod.metadata) else {
            if has_finalizer {
                self.enqueue_orphan(pod);
            }
            return;
        };
        let job = self.resolve(namespace, owner).filter(|job| !is_finished(job));
        let Some(job) = job else {
            if has_finalizer {
                self.enqueue_orphan(pod);
            }
            return;
        };
        let key = object_key(&job.metadata);
        self.expectations.deletion_observed(&key, &pod_key(pod));
        if is_final || !has_finalizer {
            self.finalizer_expectations.observed(&key, pod.metadata.uid.as_deref().unwrap_or(""));
        }
        self.enqueue_batched(&job);
    }

    /// `updateJob`: spec changes sync at once, status changes in a batch; a new deadline is
    /// scheduled.
    fn on_job_updated(&self, old: &Job, new: &Job) {
        let key = object_key(&new.metadata);
        if is_finished(new) {
            self.enqueue_selector(new);
            return;
        }
        if old.metadata.generation == new.metadata.generation {
            self.queue.add_after(key.clone(), SYNC_BATCH_PERIOD);
        } else {
            self.queue.add(key.clone());
        }
        let Some(started) = new.status.as_ref().and_then(|s| s.start_time.as_ref()) else { return };
        let Some(deadline) = spec(new).active_deadline_seconds else { return };
        if spec(old).active_deadline_seconds != Some(deadline) {
            let total = Duration::from_secs(deadline.max(0) as u64);
            let left = total.saturating_sub(since(started.0, jiff::Timestamp::now()));
            log::debug!("job's ActiveDeadlineSeconds updated, will rsync key={key} interval={left:?}");
            self.queue.add_after(key, left);
        }
    }

    fn enqueue_orphan(&self, pod: &Pod) {
        self.orphans.add(OrphanKey::Pod {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
        });
    }

    /// `enqueueLabelSelector`: every pod of a Job gone or finished gets its finalizer checked.
    fn enqueue_selector(&self, job: &Job) {
        match job_selector(job) {
            Ok(selector) => self.orphans.add(OrphanKey::Selector {
                namespace: job.metadata.namespace.clone().unwrap_or_default(),
                selector: selector.to_string(),
            }),
            Err(e) => log::error!("job {} has invalid label selector: {e}", object_key(&job.metadata)),
        }
    }

    /// `syncOrphanPod`.
    pub(super) fn sync_orphan_pod(&self, key: &OrphanKey) -> SyncResult {
        match key {
            OrphanKey::Pod { namespace, name } => {
                let Some(pod) = self.pods.store().get(&format!("{namespace}/{name}")) else {
                    log::debug!("Orphan pod has been deleted pod={namespace}/{name}");
                    return Ok(());
                };
                self.handle_orphan_pod(&pod)
            }
            OrphanKey::Selector { namespace, selector } => {
                let selector = Selector::parse(selector).map_err(|e| super::Error::OrphanSelector(e.into()))?;
                let pods = self.pods.store().list_namespace_where(namespace, |m| selector.matches(m.labels.as_ref()));
                for pod in pods {
                    if let Err(e) = self.handle_orphan_pod(&pod) {
                        log::error!("syncing orphan pod failed pod={}: {e}", pod_key(&pod));
                    }
                }
                Ok(())
            }
        }
    }

    /// `handleSingleOrphanPod`: the finalizer goes unless a live, unfinished Job of ours
    /// (or another controller) owns the pod.
    fn handle_orphan_pod(&self, pod: &Pod) -> SyncResult {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
        if let Some(owner) = controller_of(&pod.metadata) {
            if owner.kind != "Job" || owner.api_version != "batch/v1" {
                return Ok(());
            }
            if let Some(job) = self.resolve(namespace, owner)
                && (self.gates.managed_by_external(&job).is_some() || !is_finished(&job))
            {
                return Ok(());
            }
        }
        if !has_tracking_finalizer(pod) {
            return Ok(());
        }
        match self.remove_finalizer(pod) {
            Err(e) if !e.is_not_found() => Err(SyncError::from(e)),
            _ => Ok(()),
        }
    }
}

/// `recordFinishedPodWithTrackingFinalizer`: the `terminated_pods_tracking_finalizer_total`
/// metric counts finished pods gaining or losing the finalizer.
fn record_finished_with_finalizer(old: Option<&Pod>, new: Option<&Pod>) {
    let finished_with_finalizer = |pod: Option<&Pod>| {
        pod.is_some_and(|p| matches!(phase(p), "Failed" | "Succeeded") && has_tracking_finalizer(p))
    };
    let (was, is) = (finished_with_finalizer(old), finished_with_finalizer(new));
    if was != is {
        metrics().terminated_pods_tracking_finalizer.inc(&[if is { "add" } else { "delete" }]);
    }
}
