//! The disruption controller (`disruption-controller`), after upstream v1.36's
//! `pkg/controller/disruption`: every PodDisruptionBudget's status (`currentHealthy`,
//! `desiredHealthy`, `expectedPods`, `disruptionsAllowed`, `disruptedPods`,
//! `observedGeneration` and the `DisruptionAllowed` condition), which the Eviction API reads to
//! allow or refuse evictions; and the reset of stale `DisruptionTarget` pod conditions.
//!
//! Three queues as upstream's: `disruption` (budget keys), `disruption_recheck` (a budget again
//! when its first `disruptedPods` entry runs out, `DeletionTimeout`) and `stale_pod_disruption`
//! (pod keys, when their `DisruptionTarget` condition goes stale), one worker each.

mod finders;
mod stale;
mod status;

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};

use crate::apimachinery::errors::BoxError;
use crate::apimachinery::labels::{Selector, label_selector_go_string};
use crate::apimachinery::strconv::quote;
use crate::client::scale::ScaleClient;
use crate::client::{self, Api, Client, PostParams};
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::events::{EventRecorder, EventType};
use crate::runtime::informer::{Event, Informer, object_key, split_key};
use crate::runtime::workqueue::WorkQueue;

use finders::{Expected, Finders};
use status::{Counts, build_disrupted_pod_map, count_healthy_pods, fail_safe_status, new_status};

/// The controller's timings; upstream's are constants.
#[derive(Debug, Clone)]
pub struct Config {
    /// `DeletionTimeout`: how long a `disruptedPods` entry waits for its pod's deletion.
    pub deletion_timeout: Duration,
    /// `stalePodDisruptionTimeout`: how long a `DisruptionTarget` condition may stay on a pod
    /// that is not being deleted.
    pub stale_pod_disruption_timeout: Duration,
}

impl Default for Config {
    /// Upstream's: two minutes each.
    fn default() -> Config {
        Config { deletion_timeout: Duration::from_secs(120), stale_pod_disruption_timeout: Duration::from_secs(120) }
    }
}

/// Why a budget's status could not be computed or written. API errors read as Go's
/// `err.Error()` (the message alone) where the text reaches the `DisruptionAllowed` condition.
#[derive(Debug, thiserror::Error)]
enum Error {
    /// The budget's selector is not valid.
    #[error("{0}")]
    Selector(#[source] BoxError),
    /// An owner reference's `apiVersion` does not parse.
    #[error("{0}")]
    GroupVersion(#[source] BoxError),
    /// The REST mappings of an owner's kind could not be read.
    #[error("{}", .0.message())]
    ScaleMappings(#[source] client::Error),
    /// No mapping of an owner's kind in its version.
    #[error("no matches for kind \"{kind}\" in version \"{api_version}\"")]
    NoMatchesForKind { kind: String, api_version: String },
    /// The owner's resource has no `/scale` subresource.
    #[error("{group_resource} does not implement the scale subresource")]
    NoScaleSubresource { group_resource: String },
    /// The owner's `/scale` could not be read.
    #[error("{}", .0.message())]
    Scale(#[source] client::Error),
    /// A pod's controller is nowhere to be found.
    #[error("found no controllers for pod {}", quote(.pod))]
    NoControllers { pod: String },
    /// `minAvailable` or `maxUnavailable` is not a valid number or percentage.
    #[error("{0}")]
    ScaledValue(#[source] BoxError),
    /// Writing the budget's status failed.
    #[error("{}", .0.message())]
    WriteStatus(#[source] client::Error),
    /// Resetting a pod's stale `DisruptionTarget` condition failed.
    #[error("error syncing Pod {key} to clear DisruptionTarget condition: {source}")]
    ClearDisruptionTarget { key: String, source: client::Error },
}

impl From<Error> for SyncError {
    fn from(e: Error) -> SyncError {
        SyncError::of(e)
    }
}

/// `NewDisruptionController`. It cannot fail.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let queue = WorkQueue::new("disruption");
    let recheck = WorkQueue::new("disruption_recheck");
    let stale = WorkQueue::new("stale_pod_disruption");
    let controller = Arc::new(Disruption {
        client: context.client.clone(),
        recorder: context.recorder.clone(),
        pods: context.informers.informer::<Pod>(),
        pdbs: context.informers.informer::<PodDisruptionBudget>(),
        finders: Finders {
            rcs: context.informers.informer::<ReplicationController>(),
            rss: context.informers.informer::<ReplicaSet>(),
            deployments: context.informers.informer::<Deployment>(),
            sets: context.informers.informer::<StatefulSet>(),
            scales: ScaleClient::new(context.client.clone()),
        },
        queue: queue.clone(),
        recheck: recheck.clone(),
        stale: stale.clone(),
        config,
    });
    let handler = controller.clone();
    controller.pdbs.add_handler(move |event: &Event<PodDisruptionBudget>| handler.on_pdb_event(event));
    let handler = controller.clone();
    controller.pods.add_handler(move |event: &Event<Pod>| handler.on_pod_event(event));
    let (worker, requeue, cleaner) = (controller.clone(), queue.clone(), controller);
    Controller::new()
        .with_queue(&queue, 1, move |key: &String| worker.sync(key))
        // `processNextRecheckWorkItem`: back to the main queue, rate-limited.
        .with_queue(&recheck, 1, move |key: &String| {
            requeue.add_rate_limited(key.clone());
            Ok(())
        })
        .with_queue(&stale, 1, move |key: &String| Ok(cleaner.sync_stale_pod_disruption(key)?))
}

/// Upstream's `DisruptionController`.
struct Disruption {
    client: Client,
    recorder: EventRecorder,
    pods: Arc<Informer<Pod>>,
    pdbs: Arc<Informer<PodDisruptionBudget>>,
    finders: Finders,
    queue: WorkQueue<String>,
    recheck: WorkQueue<String>,
    stale: WorkQueue<String>,
    config: Config,
}

/// `metav1.LabelSelectorAsSelector`: no selector selects nothing, an empty one everything.
fn selector_of(pdb: &PodDisruptionBudget) -> Result<Selector, Error> {
    match pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) {
        None => Ok(Selector::nothing()),
        Some(selector) => Selector::from_label_selector(selector).map_err(|e| Error::Selector(e.into())),
    }
}

impl Disruption {
    /// `addDB`, `updateDB`, `removeDB`: the budget's key.
    fn on_pdb_event(&self, event: &Event<PodDisruptionBudget>) {
        let pdb = event.object();
        log::trace!("{} DB podDisruptionBudget={}", event_verb(event), object_key(&pdb.metadata));
        self.queue.add(object_key(&pdb.metadata));
    }

    /// `addPod`, `updatePod`, `deletePod`: the pod's budget, and a stale `DisruptionTarget`
    /// condition's cleanup (not for deletions).
    fn on_pod_event(&self, event: &Event<Pod>) {
        let pod = event.object();
        if let Some(key) = self.pdb_for_pod(pod) {
            self.queue.add(key);
        }
        if matches!(event, Event::Deleted { .. }) {
            return;
        }
        let wait = stale::stale_disruption_wait(pod, self.config.stale_pod_disruption_timeout, Timestamp::now());
        if let Some(wait) = wait {
            log::trace!("Enqueued pod to cleanup stale DisruptionTarget condition pod={}", object_key(&pod.metadata));
            self.stale.add_after(object_key(&pod.metadata), wait);
        }
    }

    /// `getPdbForPod`: the key of a budget selecting the pod; with several, one (the first by
    /// name, where upstream's is arbitrary) and a `MultiplePodDisruptionBudgets` warning.
    fn pdb_for_pod(&self, pod: &Pod) -> Option<String> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let mut names: Vec<String> = self
            .pdbs
            .store()
            .list_namespace(namespace)
            .iter()
            .filter(|pdb| selector_of(pdb).is_ok_and(|s| s.matches(pod.metadata.labels.as_ref())))
            .filter_map(|pdb| pdb.metadata.name.clone())
            .collect();
        names.sort();
        let first = names.first()?;
        if names.len() > 1 {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let message = format!(
                "Pod {}/{} matches multiple PodDisruptionBudgets.  Chose {} arbitrarily.",
                quote(namespace),
                quote(name),
                quote(first)
            );
            log::info!("{message}");
            self.recorder.event_for(pod, EventType::Warning, "MultiplePodDisruptionBudgets", &message);
        }
        Some(format!("{namespace}/{first}"))
    }

    /// `sync`: a failure other than a conflict makes the budget allow nothing (`failSafe`).
    fn sync(&self, key: &str) -> SyncResult {
        let Some(pdb) = self.pdbs.get_newest(key) else {
            log::debug!("podDisruptionBudget has been deleted key={key}");
            return Ok(());
        };
        match self.try_sync(&pdb) {
            Ok(()) => Ok(()),
            // `apierrors.IsConflict(err)`: retried without the fail-safe.
            Err(e) if client::Error::find(&e).is_some_and(client::Error::is_conflict) => Err(e.into()),
            Err(e) => {
                log::error!("Failed to sync PDB podDisruptionBudget={key}: {e}");
                Ok(self.fail_safe(&pdb, &e.to_string())?)
            }
        }
    }

    /// `trySync`.
    fn try_sync(&self, pdb: &PodDisruptionBudget) -> Result<(), Error> {
        let pods = match self.pods_for_pdb(pdb) {
            Ok(pods) => pods,
            Err(e) => {
                self.recorder.event_for(pdb, EventType::Warning, "NoPods", &format!("Failed to get pods: {e}"));
                return Err(e);
            }
        };
        if pods.is_empty() {
            self.recorder.event_for(pdb, EventType::Normal, "NoPods", "No matching pods found");
        }
        let pods: Vec<&Pod> = pods.iter().map(Arc::as_ref).collect();
        let expected = self.finders.expected_pod_count(pdb, &pods).inspect_err(|e| {
            let message = format!("Failed to calculate the number of expected pods: {e}");
            self.recorder.event_for(pdb, EventType::Warning, "CalculateExpectedPodCountFailed", &message);
        })?;
        self.warn_unmanaged(pdb, &expected);
        let now = Timestamp::now();
        let disrupted = build_disrupted_pod_map(&pods, pdb, now, self.config.deletion_timeout);
        for name in &disrupted.not_deleted {
            self.warn_not_deleted(pdb, &pods, name);
        }
        let current_healthy = count_healthy_pods(&pods, &disrupted.kept, now, self.config.deletion_timeout);
        let counts = Counts { current_healthy, desired_healthy: expected.desired_healthy, expected: expected.count };
        if let Some(status) = new_status(pdb, counts, disrupted.kept) {
            self.write_status(pdb, status)?;
        }
        if let Some(recheck) = disrupted.recheck {
            // Queued once per key, for the earliest time asked.
            let delay = now.duration_until(recheck);
            let delay = if delay.is_negative() { Duration::ZERO } else { delay.unsigned_abs() };
            self.recheck.add_after(object_key(&pdb.metadata), delay);
        }
        Ok(())
    }

    /// `getPodsForPdb`: the cached pods of the budget's namespace its selector matches.
    fn pods_for_pdb(&self, pdb: &PodDisruptionBudget) -> Result<Vec<Arc<Pod>>, Error> {
        let selector = selector_of(pdb)?;
        let namespace = pdb.metadata.namespace.as_deref().unwrap_or_default();
        Ok(self.pods.store().list_namespace_where(namespace, |meta| selector.matches(meta.labels.as_ref())))
    }

    /// The `UnmanagedPods` warning: pods without a controller make a percentage meaningless.
    fn warn_unmanaged(&self, pdb: &PodDisruptionBudget, expected: &Expected) {
        if expected.unmanaged.is_empty() {
            return;
        }
        log::debug!("Found unmanaged pods associated with this PDB pods={:?}", expected.unmanaged);
        let selector = label_selector_go_string(pdb.spec.as_ref().and_then(|s| s.selector.as_ref()));
        let message = format!(
            "Pods selected by this PodDisruptionBudget (selector: {selector}) were found to be unmanaged. As a result, \
             the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account \
             for these pods please set \".spec.minAvailable\" field of the PDB to an integer value."
        );
        self.recorder.event_for(pdb, EventType::Warning, "UnmanagedPods", &message);
    }

    /// The `NotDeleted` warning on a pod whose eviction did not delete it in time (upstream
    /// prints the budget's namespace twice).
    fn warn_not_deleted(&self, pdb: &PodDisruptionBudget, pods: &[&Pod], name: &str) {
        let Some(pod) = pods.iter().find(|p| p.metadata.name.as_deref() == Some(name)) else { return };
        let namespace = pdb.metadata.namespace.as_deref().unwrap_or_default();
        log::info!(
            "pod was expected to be deleted but it wasn't, updating PDB pod={} podDisruptionBudget={}",
            object_key(&pod.metadata),
            object_key(&pdb.metadata)
        );
        let message = format!("Pod was expected by PDB {namespace}/{namespace} to be deleted but it wasn't");
        self.recorder.event_for(*pod, EventType::Warning, "NotDeleted", &message);
    }

    /// `failSafe`: at least `disruptionsAllowed` 0, so that the Eviction API refuses.
    fn fail_safe(&self, pdb: &PodDisruptionBudget, error: &str) -> Result<(), Error> {
        self.write_status(pdb, fail_safe_status(pdb, error))
    }

    /// `writePdbStatus`: an update of the status subresource, not retried here.
    fn write_status(&self, pdb: &PodDisruptionBudget, status: PodDisruptionBudgetStatus) -> Result<(), Error> {
        let mut updated = pdb.clone();
        updated.status = Some(status);
        let name = pdb.metadata.name.as_deref().unwrap_or_default();
        let api =
            Api::<PodDisruptionBudget>::namespaced(&self.client, pdb.metadata.namespace.as_deref().unwrap_or_default());
        let written = api.replace_status(name, &updated, &PostParams::default()).map_err(Error::WriteStatus)?;
        self.pdbs.mutation(written);
        Ok(())
    }

    /// `syncStalePodDisruption`: the condition set to False once stale, through `pods/status`.
    fn sync_stale_pod_disruption(&self, key: &str) -> Result<(), Error> {
        let (namespace, name) = split_key(key);
        let Some(pod) = self.pods.store().get(key) else {
            log::debug!("Skipping clearing DisruptionTarget condition because pod was deleted pod={key}");
            return Ok(());
        };
        let now = Timestamp::now();
        match stale::stale_disruption_wait(&pod, self.config.stale_pod_disruption_timeout, now) {
            None => return Ok(()),
            Some(wait) if !wait.is_zero() => {
                self.stale.add_after(key.to_string(), wait);
                return Ok(());
            }
            Some(_) => {}
        }
        let mut updated = (*pod).clone();
        if !stale::reset_disruption_target(&mut updated, now) {
            return Ok(());
        }
        Api::<Pod>::namespaced(&self.client, namespace)
            .replace_status(name, &updated, &PostParams::default())
            .map_err(|source| Error::ClearDisruptionTarget { key: key.to_string(), source })?;
        log::info!("Reset stale DisruptionTarget condition to False pod={key}");
        Ok(())
    }
}

/// `Add`, `Update`, `Remove`, as upstream's handlers log.
fn event_verb<K>(event: &Event<K>) -> &'static str {
    match event {
        Event::Added(_) => "Add",
        Event::Updated { .. } => "Update",
        Event::Deleted { .. } => "Remove",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn budget(selector: serde_json::Value) -> PodDisruptionBudget {
        serde_json::from_value(json!({"metadata": {"name": "b", "namespace": "ns"}, "spec": {"selector": selector}}))
            .expect("a budget")
    }

    #[test]
    fn a_missing_selector_selects_nothing() {
        let labels = std::collections::BTreeMap::from([("app".to_string(), "web".to_string())]);
        assert!(!selector_of(&budget(serde_json::Value::Null)).expect("valid").matches(&labels));
        assert!(selector_of(&budget(json!({}))).expect("valid").matches(&labels), "empty selects everything");
    }

    use crate::controllers::testutil::conflict;

    /// A conflicting status write is retried as a conflict, so that `sync` skips the
    /// fail-safe for it; its text is Go's, as the condition shows it.
    #[test]
    fn a_conflicting_status_write_stays_a_conflict() {
        let error = Error::WriteStatus(conflict());
        assert!(client::Error::find(&error).is_some_and(client::Error::is_conflict));
        assert_eq!(SyncError::from(error), SyncError::Conflict("the object has been modified".into()));
    }
}
