//! The ReplicaSet controller (`replicaset-controller`) and the ReplicationController manager
//! (`replicationcontroller-controller`), after upstream v1.36's `pkg/controller/replicaset`
//! (`replica_set.go`, `replica_set_utils.go`) and `pkg/controller/replication`, which runs the
//! same controller over RCs. One generic [`ReplicaManager`] serves both kinds through the
//! [`kind::ReplicaKind`] trait.
//!
//! A sync (`syncReplicaSet`) lists the namespace's active pods from the informer, claims them
//! (adopting matching orphans, releasing owned pods that stopped matching), creates or deletes
//! pods to reach `spec.replicas` when earlier writes have been observed (the expectations), and
//! writes the status (for ReplicaSets also `terminatingReplicas`, under the
//! `DeploymentReplicaSetTerminatingReplicas` gate). While some ready pods are not yet available
//! (`minReadySeconds`), the key comes back when the first of them is due.
//!
//! Under the `StaleControllerConsistencyReplicaSet` gate (Beta, on in v1.36) a ReplicaSet is not
//! synced until the pod and ReplicaSet informers have seen the controller's last writes for it
//! (pod creations and adoptions, status updates; see `runtime::consistency`). The
//! ReplicationController manager has no such gate: it uses the no-op store, as upstream's.

mod availability;
mod claim;
mod handlers;
pub mod kind;
mod status;

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::apimachinery::clock::RealClock;
use crate::apimachinery::errors::BoxError;
use crate::apimachinery::labels::POD_TEMPLATE_HASH;
use crate::apimachinery::pod::{PodSummary, is_pod_ready};
use crate::apimachinery::schema::GroupResource;
use crate::client::{self, Client};
use crate::controllers::podutil::control::{CreateError, PodControl, pod_from_template};
use crate::controllers::podutil::ranking::{DeletionRank, pods_to_delete};
use crate::metrics::{CounterVec, HistogramVec, exponential_buckets, registered};
use crate::runtime::consistency::{ControllerConsistency, LastSyncRvGetter, pods_resource, stale_sync_skips};
use crate::runtime::controller::{Controller, ControllerContext, SyncError};
use crate::runtime::controller_ref::{add_pod_controller_uid_index, claim_candidate, pods_controlled_by_or_orphaned};
use crate::runtime::events::EventRecorder;
use crate::runtime::expectations::Expectations;
use crate::runtime::informer::{Event, Informer, NAMESPACE_INDEX, object_key};
use crate::runtime::slow_start::{WriteThreads, slow_start_batch};
use crate::runtime::workqueue::WorkQueue;

use crate::apimachinery::pod::is_pod_active;
use availability::availability_requeue;
use kind::ReplicaKind;

/// `BurstReplicas`: at most this many pods are created or deleted in one sync.
pub const BURST_REPLICAS: usize = 500;

/// Why a sync failed. API errors are kept whole, so that a conflict or a server's
/// `Retry-After` reaches the queue with its kind; each reads as upstream's error does (a pod
/// failure's text also goes into the `ReplicaFailure` condition).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Adopting or releasing pods failed.
    #[error("{0}")]
    Claim(#[source] BoxError),
    /// The pod template has no labels, so no pod could be found again.
    #[error("unable to create pods, no labels")]
    NoLabels,
    /// A pod could not be created: the server's message alone.
    #[error("{}", .0.message())]
    CreatePod(#[source] client::Error),
    /// A pod could not be deleted.
    #[error("unable to delete pods: {}", .0.message())]
    DeletePod(#[source] client::Error),
    /// The status could not be written.
    #[error("{0}")]
    UpdateStatus(#[source] client::Error),
}

/// The settings of either controller.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// `--concurrent-replicaset-syncs` or `--concurrent-rc-syncs`.
    pub workers: usize,
    /// The `DeploymentReplicaSetTerminatingReplicas` feature gate (beta, on in v1.36): ReplicaSets
    /// report `status.terminatingReplicas` (RCs never do, their status has no such field).
    pub terminating_replicas: bool,
    /// The `StaleControllerConsistencyReplicaSet` gate (Beta, on in v1.36): skip the sync of a
    /// ReplicaSet while its informers have not seen the controller's last writes for it.
    /// ReplicaSets only; RCs ignore it.
    pub stale_controller_consistency: bool,
}

/// `NewReplicaSetController`.
pub fn new_replica_sets(context: &ControllerContext<'_>, config: Config) -> Controller {
    start::<ReplicaSet>(context, "replicaset", config)
}

/// `NewReplicationManager`.
pub fn new_replication_controllers(context: &ControllerContext<'_>, config: Config) -> Controller {
    let config = Config { stale_controller_consistency: false, ..config };
    start::<ReplicationController>(context, "replicationmanager", config)
}

/// `NewBaseController` + `Run`: informers of the kind and of pods, handlers feeding the queue,
/// named `queue_name` as upstream's (its `queueName`: `replicaset`, `replicationmanager`).
fn start<K: ReplicaKind>(context: &ControllerContext<'_>, queue_name: &str, config: Config) -> Controller {
    sorting_deletion_age_ratio();
    let queue = WorkQueue::new(queue_name);
    let consistency = consistency::<K>(context, config.stale_controller_consistency);
    let manager = Arc::new(ReplicaManager {
        client: context.client.clone(),
        controllers: context.informers.informer::<K>(),
        pods: context.informers.informer::<Pod>(),
        expectations: Expectations::default(),
        write_threads: WriteThreads::default(),
        queue: queue.clone(),
        recorder: context.recorder.clone(),
        terminating_replicas: config.terminating_replicas && K::STATUS_TERMINATING_REPLICAS,
        consistency,
    });
    let handler = manager.clone();
    manager.controllers.add_handler(move |event: &Event<K>| handler.on_controller_event(event));
    add_pod_controller_uid_index(&manager.pods);
    if !manager.pods.store().has_index(POD_TEMPLATE_HASH_INDEX) {
        manager.pods.add_index(POD_TEMPLATE_HASH_INDEX, pod_template_hash_keys);
    }
    let handler = manager.clone();
    manager.pods.add_handler(move |event: &Event<Pod>| handler.on_pod_event(event));
    Controller::new().with_queue(&queue, config.workers, move |key: &String| manager.sync_replica_set(key))
}

/// Pods by `<namespace>/<pod-template-hash label>`: the pods a Deployment's ReplicaSet can
/// select, without a pass over the namespace (see `indirectly_related_pods`).
const POD_TEMPLATE_HASH_INDEX: &str = "podTemplateHash";

fn pod_template_hash_keys(pod: &Pod) -> Vec<String> {
    let hash = pod.metadata.labels.as_ref().and_then(|labels| labels.get(POD_TEMPLATE_HASH));
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    hash.map(|hash| vec![pod_template_hash_key(namespace, hash)]).unwrap_or_default()
}

fn pod_template_hash_key(namespace: &str, hash: &str) -> String {
    format!("{namespace}/{hash}")
}

/// The controller of one kind (upstream's `ReplicaSetController`).
pub struct ReplicaManager<K: ReplicaKind> {
    client: Client,
    controllers: Arc<Informer<K>>,
    pods: Arc<Informer<Pod>>,
    expectations: Expectations,
    /// The spare threads its workers' pod writes share.
    write_threads: WriteThreads,
    queue: WorkQueue<String>,
    recorder: EventRecorder,
    /// The gate and the kind's `EnableStatusTerminatingReplicas`: count terminating pods.
    terminating_replicas: bool,
    /// The writes for each controller object its informers must have seen before it is synced.
    consistency: ControllerConsistency,
}

/// The resource of kind `K` (`replicasets.apps`).
fn resource_of<K: ReplicaKind>() -> GroupResource {
    GroupResource::new(K::GROUP, K::URL_PATH_SEGMENT)
}

/// `NewReplicaSetController`'s choice of store: over the pod and `K` informers when `enabled`.
fn consistency<K: ReplicaKind>(context: &ControllerContext<'_>, enabled: bool) -> ControllerConsistency {
    let pods: Arc<dyn LastSyncRvGetter> = context.informers.informer::<Pod>();
    let controllers: Arc<dyn LastSyncRvGetter> = context.informers.informer::<K>();
    let informers = [(pods_resource(), pods), (resource_of::<K>(), controllers)];
    ControllerConsistency::new(enabled, informers, stale_sync_skips_total())
}

/// `replicaset_controller_stale_sync_skips_total{group,resource}`, registered with the
/// controller's other metrics (upstream's `metrics.Register`).
fn stale_sync_skips_total() -> Arc<CounterVec> {
    static COUNTER: OnceLock<Arc<CounterVec>> = OnceLock::new();
    registered(&COUNTER, || {
        stale_sync_skips(
            "replicaset_controller_stale_sync_skips_total",
            "[ALPHA] Total number of ReplicaSet syncs skipped due to a stale watch cache.",
        )
    })
    .clone()
}

/// `replicaset_controller_sorting_deletion_age_ratio`, registered when either controller is
/// created (upstream's `metrics.Register`); both kinds observe it, as upstream's shared code.
fn sorting_deletion_age_ratio() -> &'static HistogramVec {
    static HISTOGRAM: OnceLock<Arc<HistogramVec>> = OnceLock::new();
    registered(&HISTOGRAM, || {
        HistogramVec::new(
            "replicaset_controller_sorting_deletion_age_ratio",
            "[ALPHA] The ratio of chosen deleted pod's ages to the current youngest pod's age (at the time). \
                 Should be <2. The intent of this metric is to measure the rough efficacy of the \
                 LogarithmicScaleDown feature gate's effect on the sorting (and deletion) of pods when a replicaset \
                 scales down. This only considers Ready pods when calculating and reporting.",
            &[],
            &exponential_buckets(0.25, 2.0, 6),
        )
        .at_zero()
    })
}

/// `reportSortingDeletionAgeRatioMetric`: for each ready pod chosen, its age over the youngest
/// ready pod's age, in whole milliseconds divided as Go's integers (a zero age, on which
/// upstream's division would panic, is skipped).
fn report_sorting_deletion_age_ratio(pods: &[Arc<PodSummary>], doomed: &[Arc<PodSummary>], now: Timestamp) {
    let created = |pod: &PodSummary| pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let age_ms = |since: Option<Timestamp>| since.map_or(i64::MAX, |t| now.duration_since(t).as_millis() as i64);
    let youngest = pods.iter().filter(is_pod_ready).filter_map(|p| created(p)).max();
    let youngest_age = age_ms(youngest);
    if youngest_age == 0 {
        return;
    }
    for pod in doomed.iter().filter(is_pod_ready) {
        sorting_deletion_age_ratio().observe(&[], (age_ms(created(pod)) / youngest_age) as f64);
    }
}

fn name_of(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

fn namespace_of(meta: &ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or("")
}

impl<K: ReplicaKind> ReplicaManager<K> {
    /// `syncReplicaSet`.
    fn sync_replica_set(&self, key: &str) -> Result<(), SyncError> {
        // Until the informers have seen our last writes for it, what they hold may make us
        // create pods again; the error requeues the key rate-limited.
        self.consistency.ensure_ready(key)?;
        self.sync_ready_replica_set(key).map_err(SyncError::of)
    }

    /// The rest of `syncReplicaSet`, once the informers have seen our writes.
    fn sync_ready_replica_set(&self, key: &str) -> Result<(), Error> {
        // Our own last status write, if the watch has not brought it yet (a sync queued while
        // the previous one ran starts right after it): its next write then does not carry the
        // old resourceVersion and meet a Conflict.
        let Some(rs) = self.controllers.get_newest(key) else {
            log::debug!("{} {key} has been deleted", K::KIND);
            self.consistency.clear(key, "");
            self.expectations.delete(key);
            return Ok(());
        };
        let needs_sync = self.expectations.satisfied(key);
        let selector = match rs.selector() {
            Ok(selector) => selector,
            Err(e) => {
                log::error!("error converting pod selector to selector for {} {key}: {e}", K::KIND);
                return Ok(());
            }
        };
        let owner_uid = rs.metadata().uid.as_ref();
        let mut candidates = pods_controlled_by_or_orphaned(&self.pods, rs.metadata());
        candidates.retain(|pod| claim_candidate(owner_uid, &selector, &pod.metadata));
        // Only pods this ReplicaSet controls count as terminating (none are claimed).
        let terminating: Option<Vec<Arc<PodSummary>>> = self.terminating_replicas.then(|| {
            let owned_terminating = candidates.iter().filter(|p| status::is_terminating_replica(&*rs, &selector, p));
            owned_terminating.cloned().collect()
        });
        let active: Vec<Arc<PodSummary>> = candidates.into_iter().filter(is_pod_active).collect();
        let pods = self.claim_pods(&rs, &selector, active)?;
        let manage_error = if needs_sync && rs.metadata().deletion_timestamp.is_none() {
            self.manage_replicas(&pods, &rs).err()
        } else {
            None
        };
        // One time for the availability in the status and the next availability check, so
        // that a pod counted unavailable is one the check waits for.
        let now = Timestamp::now();
        let failure = manage_error.as_ref().map(Error::to_string);
        let new_status = status::calculate_status(&*rs, &pods, terminating.as_deref(), failure.as_deref(), now);
        let mut updated = status::update_status(&self.client, &rs, new_status).map_err(Error::UpdateStatus)?;
        // Upstream records the update's resourceVersion under the UID of the cached object.
        let written = updated.metadata().resource_version.as_deref();
        self.consistency.wrote_for(rs.metadata(), &resource_of::<K>(), written);
        if updated.metadata().resource_version != rs.metadata().resource_version {
            updated = self.controllers.mutation(Arc::unwrap_or_clone(updated));
        }
        if let Some(error) = manage_error {
            return Err(error);
        }
        if let Some(delay) = availability_requeue(&*updated, &pods, now, &RealClock) {
            self.queue.add_after(key.to_string(), delay);
        }
        Ok(())
    }

    /// `manageReplicas`: creates or deletes pods to reach `spec.replicas`.
    fn manage_replicas(&self, pods: &[Arc<PodSummary>], rs: &K) -> Result<(), Error> {
        let wanted = usize::try_from(rs.replicas()).unwrap_or(0);
        if pods.len() < wanted {
            self.create_replicas((wanted - pods.len()).min(BURST_REPLICAS), rs)
        } else if pods.len() > wanted {
            self.delete_replicas(pods, (pods.len() - wanted).min(BURST_REPLICAS), rs)
        } else {
            Ok(())
        }
    }

    /// The creating half of `manageReplicas`: slow-start batches, expectations lowered for
    /// the creations that were skipped or failed.
    fn create_replicas(&self, count: usize, rs: &K) -> Result<(), Error> {
        let key = crate::runtime::informer::object_key(rs.metadata());
        self.expectations.expect_creations(&key, count);
        log::debug!("too few replicas for {} {key}: creating {count}", K::KIND);
        let (created, error) = slow_start_batch(count, &self.write_threads, || self.create_pod(rs));
        for _ in created..count {
            self.expectations.creation_observed(&key);
        }
        error.map_or(Ok(()), Err)
    }

    /// `NewControllerRef`.
    fn controller_ref(&self, rs: &K) -> OwnerReference {
        crate::runtime::controller_ref::controller_ref(rs)
    }

    /// `RealPodControl.CreatePods` of a pod from the template (`GetPodFromTemplate`), recording
    /// SuccessfulCreate or FailedCreate.
    fn create_pod(&self, rs: &K) -> Result<(), Error> {
        let pod = pod_from_template(rs.template().cloned().unwrap_or_default(), rs, None);
        self.pod_control().create(rs, &pod).map_err(|e| match e {
            CreateError::NoLabels => Error::NoLabels,
            CreateError::Api(e) => Error::CreatePod(e),
        })
    }

    /// `rsc.podControl`.
    fn pod_control(&self) -> PodControl<'_> {
        PodControl { client: &self.client, recorder: &self.recorder, consistency: &self.consistency }
    }

    /// The deleting half of `manageReplicas`: the lowest-ranked pods are deleted concurrently;
    /// the expectations of failed deletions are lowered; the first error is returned. The
    /// ranking reads only what the pods' summaries hold: no pod is unpacked.
    fn delete_replicas(&self, pods: &[Arc<PodSummary>], count: usize, rs: &K) -> Result<(), Error> {
        let key = object_key(rs.metadata());
        let ranked: Vec<(Arc<PodSummary>, DeletionRank)> =
            pods.iter().map(|pod| (pod.clone(), DeletionRank::of(pod))).collect();
        let related = self.indirectly_related_pods(rs);
        let doomed = pods_to_delete(ranked, &related, count, Timestamp::now());
        if count < pods.len() {
            report_sorting_deletion_age_ratio(pods, &doomed, Timestamp::now());
        }
        self.expectations.expect_deletions(&key, doomed.iter().map(|p| object_key(&p.metadata)).collect());
        log::debug!("too many replicas for {} {key}: deleting {count}", K::KIND);
        let results = self.write_threads.map(&doomed, |pod| self.delete_pod(rs, &pod.metadata));
        results.into_iter().find_map(Result::err).map_or(Ok(()), Err)
    }

    /// `RealPodControl.DeletePod`, recording SuccessfulDelete or FailedDelete: `Ok(true)` when
    /// deleted, `Ok(false)` when the pod was gone already. Gone or failed lowers the
    /// expectations.
    fn delete_pod(&self, rs: &K, pod: &ObjectMeta) -> Result<bool, Error> {
        let deleted = self.pod_control().delete(rs, namespace_of(pod), name_of(pod));
        if !deleted.as_ref().is_ok_and(|deleted| *deleted) {
            self.expectations.deletion_observed(&object_key(rs.metadata()), &object_key(pod));
        }
        deleted.map_err(Error::DeletePod)
    }

    /// `getIndirectlyRelatedPods`: the pods selected by any controller object with the same
    /// controlling owner as `rs` (e.g. all ReplicaSets of a Deployment), each pod once. An
    /// object without a controlling owner has no related pods (`getReplicaSetsWithSameController`
    /// answers nothing), so the deletion ranking does not count co-located pods for it.
    fn indirectly_related_pods(&self, rs: &K) -> Vec<Arc<PodSummary>> {
        let meta = rs.metadata();
        let Some(owner) = meta.owner_references.iter().flatten().find(|r| r.controller == Some(true)) else {
            log::debug!("{} {}/{} has no controller", K::KIND, namespace_of(meta), name_of(meta));
            return Vec::new();
        };
        let namespace = namespace_of(meta);
        let siblings = self.controllers.store().list_namespace(namespace).into_iter().filter(|other| {
            let refs = other.metadata().owner_references.iter().flatten();
            refs.into_iter().any(|r| r.controller == Some(true) && r.uid == owner.uid)
        });
        let selectors: Vec<_> = siblings.filter_map(|sibling| sibling.selector().ok()).collect();
        // The ranking only counts them per node, so their order does not matter: each pod
        // once, no pod unpacked.
        let selected = |pod: &PodSummary| selectors.iter().any(|s| s.matches(pod.metadata.labels.as_ref()));
        let store = self.pods.store();
        // A Deployment's ReplicaSets each select one pod-template-hash: their pods come from
        // that index. Upstream lists the namespace for every one, so a scale-down by one pod
        // cost a pass over every pod of the namespace (quadratic in a rollout).
        let hashes: Option<BTreeSet<&str>> = selectors.iter().map(|s| s.required_value(POD_TEMPLATE_HASH)).collect();
        match hashes {
            Some(hashes) => hashes
                .into_iter()
                .flat_map(|hash| {
                    store.summaries_by_index_where(
                        POD_TEMPLATE_HASH_INDEX,
                        &pod_template_hash_key(namespace, hash),
                        selected,
                    )
                })
                .collect(),
            None => store.summaries_by_index_where(NAMESPACE_INDEX, namespace, selected),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::global;

    #[test]
    fn stale_sync_skips_are_exposed_as_upstreams_once_counted() {
        stale_sync_skips_total().inc(&["", "pods"]);
        let text = global().render();
        let help = "# HELP replicaset_controller_stale_sync_skips_total [ALPHA] Total number of ReplicaSet syncs \
                    skipped due to a stale watch cache.\n# TYPE replicaset_controller_stale_sync_skips_total counter\n";
        assert!(text.contains(help), "{text}");
        assert!(text.contains("replicaset_controller_stale_sync_skips_total{group=\"\",resource=\"pods\"} "));
        assert_eq!(resource_of::<ReplicaSet>(), GroupResource::new("apps", "replicasets"));
    }
}
