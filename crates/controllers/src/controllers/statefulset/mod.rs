//! The StatefulSet controller (`statefulset-controller`), after upstream v1.36's
//! `pkg/controller/statefulset`.
//!
//! A sync adopts the set's orphaned ControllerRevisions, claims its pods (`<set>-<ordinal>`),
//! and hands both to the control loop (`control`): the update revision is found or created
//! from the pod template, missing replicas are created with their PersistentVolumeClaims
//! (`pod_control`) — one at a time, each Running and Ready (and available) before the next with
//! `podManagementPolicy: OrderedReady`, all at once with `Parallel` — pods beyond the replicas
//! are deleted from the highest ordinal, failed pods are deleted to be recreated, and a
//! RollingUpdate replaces pods from the highest ordinal down to its partition. Scale-down and
//! the rolling update wait for pods to be available (ready for `minReadySeconds`), and a set
//! with `minReadySeconds` is synced again when its next ready pod becomes available. The claims'
//! owner references follow `persistentVolumeClaimRetentionPolicy` (so the garbage collector
//! deletes them with the set or the scaled-down pod). Feature gates as v1.36's defaults:
//! `StatefulSetAutoDeletePVC`, `StatefulSetStartOrdinal` and `PodIndexLabel` GA (always on),
//! `MaxUnavailableStatefulSet` off (not ported), `StatefulSetSemanticRevisionComparison` on
//! (asked of the gate table: [`Config::semantic_revision_comparison`]), and
//! `StaleControllerConsistencyStatefulSet` on ([`Config::stale_controller_consistency`]): a set
//! is not synced until the informers have seen the controller's last writes for it (its pod and
//! claim creations and updates, pod adoptions, status updates), see `runtime::consistency`.

mod control;
mod handlers;
mod pod_control;
mod revisions;
mod utils;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::apimachinery::clock::{Clock, RealClock};
use crate::apimachinery::errors::{Aggregate, BoxError};
use crate::apimachinery::labels::Selector;
use crate::apimachinery::schema::GroupResource;
use crate::client::{self, Client};
use crate::controllers::history;
use crate::controllers::podutil::availability::find_min_next_pod_availability_check;
use crate::metrics::CounterVec;
use crate::runtime::consistency::{ControllerConsistency, LastSyncRvGetter, pods_resource, stale_sync_skips};
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::controller_ref::{
    ControllerRefManager, claim_candidate, controller_of, controller_ref, recheck_deletion_timestamp,
};
use crate::runtime::informer::{Informer, object_key};
use crate::runtime::workqueue::WorkQueue;

use pod_control::{PodControl, claims_resource};
use revisions::RevisionEqualityCache;
use utils::{is_member_of, namespace_of, spec};

/// Why a sync of a StatefulSet failed. API errors are kept whole, so that a conflict or a
/// server's `Retry-After` reaches the queue with its kind (`SyncError::of`); each reads as
/// upstream's error does, which the pods' Events quote.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the API server failed: Go's `err.Error()`, the server's message alone.
    #[error("{}", .0.message())]
    Api(#[from] client::Error),
    /// The set's selector is invalid.
    #[error("{0}")]
    Selector(#[source] BoxError),
    /// A ControllerRevision's template does not decode.
    #[error("{0}")]
    RevisionData(#[from] serde_json::Error),
    /// The set could not be read back live before adopting its orphaned revisions.
    #[error("can't adopt ControllerRevisions: {0}")]
    CannotAdoptRevisions(#[source] BoxError),
    /// Adopting or releasing revisions or pods failed.
    #[error("{0}")]
    Claim(#[source] BoxError),
    /// A claim's owner references could not be brought in line with the retention policy.
    #[error("could not update claim {name} for delete policy ownerRefs: {}", .source.message())]
    UpdateClaimOwnerRefs {
        /// The claim.
        name: String,
        /// The update's error.
        source: client::Error,
    },
    /// A pod's claim could not be created.
    #[error("failed to create PVC {name}: {}", .source.message())]
    CreateClaim {
        /// The claim.
        name: String,
        /// The creation's error.
        source: client::Error,
    },
    /// A pod's claim is being deleted, so the pod waits for its replacement.
    #[error("pvc {name} is being deleted")]
    ClaimBeingDeleted {
        /// The claim.
        name: String,
    },
    /// Several steps failed (`utilerrors.NewAggregate`): `[a, b]`.
    #[error("{0}")]
    Aggregate(#[from] Aggregate),
}

/// The queue acts on the kind of the API error inside, if any.
impl From<Error> for SyncError {
    fn from(error: Error) -> SyncError {
        SyncError::of(error)
    }
}

/// What the controller takes from the flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// `--concurrent-statefulset-syncs`.
    pub workers: usize,
    /// The `StatefulSetSemanticRevisionComparison` gate (Beta, on): reuse the latest revision
    /// when restoring it derives the set's revision, although its bytes differ.
    pub semantic_revision_comparison: bool,
    /// The `StaleControllerConsistencyStatefulSet` gate (Beta, on in v1.36): skip the sync of a
    /// set while the pod, claim or set informer has not seen the controller's last write for it.
    pub stale_controller_consistency: bool,
}

/// The core group's `statefulsets` of `apps`.
fn sets_resource() -> GroupResource {
    GroupResource::new("apps", "statefulsets")
}

/// `statefulset_controller_stale_sync_skips_total`. Upstream v1.36.2 counts it but its
/// `metrics.Register` leaves it out, so it is never exposed: ours is not registered either.
fn stale_sync_skips_total() -> Arc<CounterVec> {
    static COUNTER: OnceLock<Arc<CounterVec>> = OnceLock::new();
    COUNTER
        .get_or_init(|| {
            Arc::new(stale_sync_skips(
                "statefulset_controller_stale_sync_skips_total",
                "[ALPHA] Total number of StatefulSet syncs skipped due to a stale watch cache.",
            ))
        })
        .clone()
}

/// `NewStatefulSetController`'s choice of store: over the pod, claim and set informers when
/// the gate is on.
fn consistency(context: &ControllerContext<'_>, config: &Config) -> ControllerConsistency {
    let pods: Arc<dyn LastSyncRvGetter> = context.informers.informer::<Pod>();
    let claims: Arc<dyn LastSyncRvGetter> = context.informers.informer::<PersistentVolumeClaim>();
    let sets: Arc<dyn LastSyncRvGetter> = context.informers.informer::<StatefulSet>();
    let informers = [(pods_resource(), pods), (claims_resource(), claims), (sets_resource(), sets)];
    ControllerConsistency::new(config.stale_controller_consistency, informers, stale_sync_skips_total())
}

/// `NewStatefulSetController` + `Run`: the `statefulset` queue, `workers` workers.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let queue = WorkQueue::new("statefulset");
    let pods = context.informers.informer::<Pod>();
    let claims = context.informers.informer::<PersistentVolumeClaim>();
    let revisions = context.informers.informer::<ControllerRevision>();
    let consistency = consistency(context, &config);
    let pod_control = PodControl {
        client: context.client.clone(),
        pods: pods.clone(),
        claims,
        recorder: context.recorder.clone(),
        consistency: consistency.clone(),
    };
    let controller = Arc::new(StatefulSetController {
        client: context.client.clone(),
        sets: context.informers.informer::<StatefulSet>(),
        pods: pods.clone(),
        history: history::History::new(context.client.clone(), revisions),
        pod_control,
        queue: queue.clone(),
        semantic_revision_comparison: config.semantic_revision_comparison,
        revision_equality: RevisionEqualityCache::default(),
        clock: Arc::new(RealClock),
        consistency,
    });
    let handler = controller.clone();
    controller.pods.add_handler(move |event| handler.on_pod_event(event));
    let handler = controller.clone();
    controller.sets.add_handler(move |event| handler.on_set_event(event));
    Controller::new().with_queue(&queue, config.workers, move |key: &String| controller.sync(key))
}

/// Upstream's `StatefulSetController` with its `defaultStatefulSetControl`.
struct StatefulSetController {
    client: Client,
    sets: Arc<Informer<StatefulSet>>,
    pods: Arc<Informer<Pod>>,
    history: history::History,
    pod_control: PodControl,
    queue: WorkQueue<String>,
    semantic_revision_comparison: bool,
    /// `revisionEqualityCache`.
    revision_equality: RevisionEqualityCache,
    clock: Arc<dyn Clock>,
    /// The set's writes its informers must have seen before it is synced again.
    consistency: ControllerConsistency,
}

impl StatefulSetController {
    /// `sync`.
    fn sync(&self, key: &str) -> SyncResult {
        let started = Instant::now();
        let result = self.sync_key(key);
        log::debug!("Finished syncing statefulset key={key} time={:?}", started.elapsed());
        result
    }

    fn sync_key(&self, key: &str) -> SyncResult {
        // Until the informers have seen our last writes for the set, what they hold may make
        // us repeat them; the error requeues the key rate-limited.
        self.consistency.ensure_ready(key)?;
        let Some(set) = self.sets.get_newest(key) else {
            self.consistency.clear(key, "");
            log::info!("StatefulSet has been deleted key={key}");
            return Ok(());
        };
        let selector = match Selector::from_label_selector(&spec(&set).selector) {
            Ok(selector) => selector,
            Err(e) => {
                log::error!("error converting StatefulSet {key} selector: {e}");
                return Ok(());
            }
        };
        self.adopt_orphan_revisions(&set)?;
        let pods = self.pods_for_set(&set, &selector)?;
        self.sync_stateful_set(key, &set, &pods)
    }

    /// `syncStatefulSet`: the update, then, while ready pods wait for `minReadySeconds`, a
    /// requeue for when the next of them becomes available (one `now` for both, so that they
    /// agree on which pods are available).
    fn sync_stateful_set(&self, key: &str, set: &StatefulSet, pods: &[Arc<Pod>]) -> SyncResult {
        log::debug!("Syncing StatefulSet with pods statefulSet={key} pods={}", pods.len());
        let now = self.clock.wall();
        let status = self.update_stateful_set(set, pods, now)?;
        log::debug!("Successfully synced StatefulSet statefulSet={key}");
        if let Some(delay) = self.next_availability_check(set, &status, pods, now) {
            self.queue.add_after(key.to_string(), delay);
        }
        Ok(())
    }

    /// When to sync again for pods still to become available: with `minReadySeconds` and fewer
    /// available than ready replicas, at the next pod's moment
    /// (`FindMinNextPodAvailabilityCheck`), else after `minReadySeconds` as a safeguard.
    fn next_availability_check(
        &self,
        set: &StatefulSet,
        status: &StatefulSetStatus,
        pods: &[Arc<Pod>],
        now: Timestamp,
    ) -> Option<Duration> {
        let min_ready = spec(set).min_ready_seconds.unwrap_or(0);
        if min_ready <= 0 || status.ready_replicas.unwrap_or(0) == status.available_replicas.unwrap_or(0) {
            return None;
        }
        let pods = pods.iter().map(|p| &**p);
        let next = find_min_next_pod_availability_check(pods, min_ready, now, self.clock.as_ref());
        Some(next.unwrap_or(Duration::from_secs(min_ready as u64)))
    }

    /// `adoptOrphanRevisions`: revisions the selector matches that have no controller.
    fn adopt_orphan_revisions(&self, set: &StatefulSet) -> Result<(), Error> {
        let revisions = self.list_revisions(set)?;
        let orphans: Vec<Arc<ControllerRevision>> =
            revisions.into_iter().filter(|r| controller_of(&r.metadata).is_none()).collect();
        if orphans.is_empty() {
            return Ok(());
        }
        recheck_deletion_timestamp::<StatefulSet>(&self.client, &set.metadata, "StatefulSet ")
            .map_err(|e| Error::CannotAdoptRevisions(e.into()))?;
        let selector = Selector::everything();
        let can_adopt = || Ok(());
        let manager = ControllerRefManager {
            client: &self.client,
            owner: &set.metadata,
            owner_ref: controller_ref(set),
            selector: &selector,
            can_adopt: &can_adopt,
            finalizers: &[],
            on_write: None,
        };
        manager.claim::<ControllerRevision, _>(orphans).map(|_| ()).map_err(|e| Error::Claim(e.into()))
    }

    /// `getPodsForStatefulSet`: the set's pods after claiming; only pods whose name makes
    /// them members count as matching (orphans adopted, owned non-members released).
    fn pods_for_set(&self, set: &StatefulSet, selector: &Selector) -> Result<Vec<Arc<Pod>>, Error> {
        let namespace = namespace_of(&set.metadata);
        let owner_uid = set.metadata.uid.as_ref();
        let candidates = self.pods.store().list_namespace_where(namespace, |m| claim_candidate(owner_uid, selector, m));
        let candidates = candidates.into_iter().map(|p| self.pods.newest(p)).collect();
        let can_adopt = || recheck_deletion_timestamp::<StatefulSet>(&self.client, &set.metadata, "StatefulSet ");
        let on_write = |pod: &ObjectMeta| self.consistency.pod_written(pod);
        let manager = ControllerRefManager {
            client: &self.client,
            owner: &set.metadata,
            owner_ref: controller_ref(set),
            selector,
            can_adopt: &can_adopt,
            finalizers: &[],
            on_write: Some(&on_write),
        };
        manager.claim_filtered::<Pod, _>(candidates, |m| is_member_of(set, m)).map_err(|e| Error::Claim(e.into()))
    }

    fn enqueue(&self, set: &StatefulSet) {
        self.queue.add(object_key(&set.metadata));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::podutil::testing::ErrorServer;
    use crate::runtime::events::EventRecorder;

    /// The controller over a client of `server`, its informers fed by hand (the revisions'
    /// returned beside it).
    fn controller(server: &ErrorServer) -> (StatefulSetController, Arc<Informer<ControllerRevision>>) {
        let client = server.client.clone();
        let informers = crate::runtime::informer::SharedInformerFactory::new(client.clone(), Duration::ZERO);
        let (pods, claims) = (informers.informer::<Pod>(), informers.informer::<PersistentVolumeClaim>());
        let (sets, revisions) = (informers.informer::<StatefulSet>(), informers.informer::<ControllerRevision>());
        let stores: [(GroupResource, Arc<dyn LastSyncRvGetter>); 0] = [];
        let consistency = ControllerConsistency::new(false, stores, stale_sync_skips_total());
        let recorder = EventRecorder::new(client.clone(), "statefulset-controller");
        let controller = StatefulSetController {
            client: client.clone(),
            sets,
            pods: pods.clone(),
            history: history::History::new(client.clone(), revisions.clone()),
            pod_control: PodControl { client, pods, claims, recorder, consistency: consistency.clone() },
            queue: WorkQueue::new("statefulset"),
            semantic_revision_comparison: true,
            revision_equality: RevisionEqualityCache::default(),
            clock: Arc::new(RealClock),
            consistency,
        };
        (controller, revisions)
    }

    #[test]
    fn a_conflict_writing_the_status_reaches_the_queue_as_a_conflict() {
        let server = ErrorServer::conflict();
        let (controller, revisions) = controller(&server);
        let set: StatefulSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u", "generation": 1},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}}, "serviceName": "s",
                "template": {"metadata": {"labels": {"app": "web"}}}}
        }))
        .unwrap();
        // The set's revision exists: the sync's only write is its status, refused with a 409
        // at every one of the status updater's attempts.
        controller.sets.apply_for_test(set.clone());
        revisions.apply_for_test(control::new_revision(&set, 1, Some(0)));
        match controller.sync("ns/web") {
            Err(SyncError::Conflict(message)) => assert_eq!(message, "the test server answers 409 Conflict"),
            other => panic!("a conflict, not {other:?}"),
        }
        assert_eq!(server.requests(), 5, "the status updater's five attempts");
    }

    #[test]
    fn stale_sync_skips_are_counted_but_never_exposed_as_upstreams() {
        let skips = stale_sync_skips_total();
        skips.inc(&["", "persistentvolumeclaims"]);
        assert!(skips.get(&["", "persistentvolumeclaims"]) >= 1.0);
        assert!(!crate::metrics::global().render().contains("statefulset_controller_stale_sync_skips_total"));
    }
}
