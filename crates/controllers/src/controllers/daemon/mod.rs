//! The DaemonSet controller (`daemonset-controller`), after upstream v1.36's
//! `pkg/controller/daemon`.
//!
//! A sync (`syncDaemonSet`) snapshots the DaemonSet's pod template as a ControllerRevision
//! (`revisions`: `constructHistory`, the hash in each pod's `controller-revision-hash` label),
//! then (`manage`) creates a pod for every node that should run one and has none, pinned to it
//! by the required node affinity `metadata.name In [node]` so that the scheduler places it,
//! and deletes pods on nodes that no longer qualify, failed or succeeded pods (failed ones with
//! a per-node backoff) and surplus pods. With its expectations met it rolls pods to the current
//! revision (`update`: `maxUnavailable` or `maxSurge`; nothing for `OnDelete`), prunes old
//! revisions beyond `revisionHistoryLimit`, and writes the status.
//!
//! Node additions and label or taint changes go through a second queue
//! (`daemonset-node-updates`), which queues only the DaemonSets whose placement changed.
//!
//! Under the `StaleControllerConsistencyDaemonSet` gate (Beta, on in v1.36) a DaemonSet is not
//! synced until the pod and DaemonSet informers have seen the controller's last writes for it
//! (pod creations and adoptions, status updates; see `runtime::consistency`).

mod backoff;
mod handlers;
mod pods;
mod revisions;
mod status;
mod update;
pub mod util;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::apimachinery::errors::BoxError;
use crate::apimachinery::labels::Selector;
use crate::apimachinery::pod::{is_pod_available, is_pod_ready, phase};
use crate::apimachinery::schema::GroupResource;
use crate::client::{self, Client};
use crate::controllers::history::CONTROLLER_REVISION_HASH_LABEL;
use crate::controllers::nodeutil::add_node_name_index;
use crate::metrics::{CounterVec, registered};
use crate::runtime::consistency::{
    ConsistencyError, ControllerConsistency, LastSyncRvGetter, pods_resource, stale_sync_skips,
};
use crate::runtime::controller::{Controller, ControllerContext, SyncError};
use crate::runtime::controller_ref::{
    ControllerRefManager, claim_candidate, controller_ref, recheck_deletion_timestamp,
};
use crate::runtime::events::{EventRecorder, EventType};
use crate::runtime::expectations::Expectations;
use crate::runtime::informer::{Event, Informer, object_key};
use crate::runtime::slow_start::WriteThreads;
use crate::runtime::workqueue::WorkQueue;

use backoff::Backoff;
use util::{allows_surge, creation_order, min_ready_seconds, node_should_run_daemon_pod, spec, target_node_name};

/// `BurstReplicas`: at most this many creations and deletions per sync.
const BURST_REPLICAS: usize = 250;
/// `StatusUpdateRetries`.
const STATUS_UPDATE_RETRIES: usize = 1;
/// `BackoffGCInterval`.
const BACKOFF_GC_INTERVAL: Duration = Duration::from_secs(60);

/// `SelectingAllReason`.
const SELECTING_ALL: &str = "SelectingAll";
/// `FailedDaemonPodReason`.
const FAILED_DAEMON_POD: &str = "FailedDaemonPod";
/// `SucceededDaemonPodReason`.
const SUCCEEDED_DAEMON_POD: &str = "SucceededDaemonPod";

/// What the controller takes from the flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// `--concurrent-daemonset-syncs`.
    pub workers: usize,
    /// The `StaleControllerConsistencyDaemonSet` gate (Beta, on in v1.36): skip the sync of a
    /// DaemonSet while its informers have not seen the controller's last writes for it.
    pub stale_controller_consistency: bool,
}

/// The `daemonsets` of `apps`.
fn daemon_sets_resource() -> GroupResource {
    GroupResource::new("apps", "daemonsets")
}

/// `daemonset_controller_stale_sync_skips_total{group,resource}`, registered by the
/// controller's constructor (upstream's `metrics.Register`).
fn stale_sync_skips_total() -> Arc<CounterVec> {
    static COUNTER: OnceLock<Arc<CounterVec>> = OnceLock::new();
    registered(&COUNTER, || {
        stale_sync_skips(
            "daemonset_controller_stale_sync_skips_total",
            "[ALPHA] Total number of DaemonSet syncs skipped due to a stale watch cache.",
        )
    })
    .clone()
}

/// `NewDaemonSetsController`'s choice of store: over the pod and DaemonSet informers when
/// the gate is on.
fn consistency(context: &ControllerContext<'_>, config: &Config) -> ControllerConsistency {
    let pods: Arc<dyn LastSyncRvGetter> = context.informers.informer::<Pod>();
    let daemon_sets: Arc<dyn LastSyncRvGetter> = context.informers.informer::<DaemonSet>();
    let informers = [(pods_resource(), pods), (daemon_sets_resource(), daemon_sets)];
    ControllerConsistency::new(config.stale_controller_consistency, informers, stale_sync_skips_total())
}

/// Why a DaemonSet's sync failed, with the context upstream's `fmt.Errorf` gives it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The informers have not yet seen the controller's last writes for the DaemonSet.
    #[error("{0}")]
    Consistency(#[from] ConsistencyError),
    /// A request failed.
    #[error("{0}")]
    Api(#[from] client::Error),
    /// The DaemonSet's selector is not valid.
    #[error("{0}")]
    Selector(#[source] BoxError),
    /// Adopting or releasing pods or revisions failed.
    #[error("{0}")]
    Claim(#[source] BoxError),
    /// `constructHistory` failed.
    #[error("failed to construct revisions of DaemonSet: {0}")]
    ConstructHistory(#[source] Box<Error>),
    /// `cleanupHistory` failed.
    #[error("failed to clean up revisions of DaemonSet: {0}")]
    CleanupHistory(#[source] Box<Error>),
    /// The DaemonSet's pods could not be told by node.
    #[error("couldn't get node to daemon pod mapping for daemon set {name:?}: {source}")]
    NodePodMapping {
        /// The DaemonSet's name.
        name: String,
        /// Why.
        source: Box<Error>,
    },
    /// The status could not be written.
    #[error("error storing status for daemon set {key}: {source}")]
    StoreStatus {
        /// The DaemonSet's key.
        key: String,
        /// The API error.
        source: client::Error,
    },
    /// The pod template has no labels.
    #[error("unable to create pods, no labels")]
    NoLabels,
    /// Another writer moved `status.collisionCount` since the DaemonSet was read.
    #[error(
        "found a stale collision count ({}, expected {}) of DaemonSet {name:?} while processing; will retry until it is updated",
        show_count(*.ours),
        show_count(*.theirs)
    )]
    StaleCollisionCount {
        /// The count the sync read.
        ours: Option<i32>,
        /// The count the server holds.
        theirs: Option<i32>,
        /// The DaemonSet's name.
        name: String,
    },
    /// `maxSurge` or `maxUnavailable` does not scale.
    #[error("{0}")]
    ScaledValue(#[source] BoxError),
    /// `maxUnavailable` is not valid.
    #[error("invalid value for MaxUnavailable: {0}")]
    InvalidMaxUnavailable(#[source] Box<Error>),
    /// `maxSurge` is not valid.
    #[error("invalid value for MaxSurge: {0}")]
    InvalidMaxSurge(#[source] Box<Error>),
    /// The rolling update's limits could not be computed.
    #[error("couldn't get unavailable numbers: {0}")]
    UnavailableNumbers(#[source] Box<Error>),
    /// A node of the DaemonSet's pods is not in the cache.
    #[error("couldn't get node for nodeName {name:?}: not found")]
    NodeNotFound {
        /// The node's name.
        name: String,
    },
    /// The deprecated template generation annotation is not a number.
    #[error("invalid template generation {value:?}: {source}")]
    TemplateGeneration {
        /// The annotation's value.
        value: String,
        /// Why it does not parse.
        source: std::num::ParseIntError,
    },
}

/// Go's `%d` of an `*int32`: the number, or `<nil>`.
fn show_count(count: Option<i32>) -> String {
    count.map_or("<nil>".to_string(), |c| c.to_string())
}

impl From<Error> for SyncError {
    fn from(e: Error) -> SyncError {
        SyncError::of(e)
    }
}

impl Error {
    /// `couldn't get node to daemon pod mapping for daemon set …` around `self`.
    fn node_pod_mapping(self, ds: &DaemonSet) -> Error {
        Error::NodePodMapping { name: name_of(&ds.metadata).to_string(), source: Box::new(self) }
    }
}

/// `NewDaemonSetsController` + `Run`: the DaemonSet and node-update queues, `workers` workers
/// each, and the failed-pod backoff's collection every minute. It cannot fail.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let queue = WorkQueue::new("daemonset");
    let node_queue = WorkQueue::new("daemonset-node-updates");
    let pods = context.informers.informer::<Pod>();
    add_node_name_index(&pods);
    let controller = Arc::new(DaemonSetsController {
        client: context.client.clone(),
        daemon_sets: context.informers.informer::<DaemonSet>(),
        revisions: context.informers.informer::<ControllerRevision>(),
        pods,
        nodes: context.informers.informer::<Node>(),
        queue: queue.clone(),
        node_queue: node_queue.clone(),
        recorder: context.recorder.clone(),
        expectations: Expectations::default(),
        write_threads: WriteThreads::default(),
        failed_pods_backoff: Backoff::default(),
        consistency: consistency(context, &config),
    });
    let handler = controller.clone();
    controller.daemon_sets.add_handler(move |event: &Event<DaemonSet>| handler.on_daemon_set_event(event));
    let handler = controller.clone();
    controller.revisions.add_handler(move |event: &Event<ControllerRevision>| handler.on_revision_event(event));
    let handler = controller.clone();
    controller.pods.add_handler(move |event: &Event<Pod>| handler.on_pod_event(event));
    let handler = controller.clone();
    controller.nodes.add_handler(move |event: &Event<Node>| handler.on_node_event(event));
    let (worker, node_worker, collector) = (controller.clone(), controller.clone(), controller);
    Controller::new()
        .with_queue(&queue, config.workers, move |key: &String| Ok(worker.sync_daemon_set(key)?))
        .with_queue(&node_queue, config.workers, move |node: &String| node_worker.sync_node_update(node))
        .every("daemonset-failed-pods-backoff-gc", BACKOFF_GC_INTERVAL, move || {
            collector.failed_pods_backoff.gc(Instant::now())
        })
}

/// Upstream's `DaemonSetsController`.
struct DaemonSetsController {
    client: Client,
    daemon_sets: Arc<Informer<DaemonSet>>,
    revisions: Arc<Informer<ControllerRevision>>,
    pods: Arc<Informer<Pod>>,
    nodes: Arc<Informer<Node>>,
    queue: WorkQueue<String>,
    node_queue: WorkQueue<String>,
    recorder: EventRecorder,
    /// Pod creations and deletions awaited, by DaemonSet key.
    expectations: Expectations,
    /// The spare threads its workers' pod writes share.
    write_threads: WriteThreads,
    /// `failedPodsBackoff`: per DaemonSet, generation and node, how soon a failed pod may be
    /// deleted again.
    failed_pods_backoff: Backoff,
    /// The writes for each DaemonSet its informers must have seen before it is synced.
    consistency: ControllerConsistency,
}

/// Daemon pods by the node they are on or meant for.
type NodePods = HashMap<String, Vec<Arc<Pod>>>;

fn name_of(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

fn namespace_of(meta: &ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or("")
}

/// The DaemonSet's selector; `None` when it has none (selects nothing).
fn selector_of(ds: &DaemonSet) -> Result<Selector, Error> {
    match spec(ds).selector.match_labels.is_none() && spec(ds).selector.match_expressions.is_none() {
        true => Ok(Selector::nothing()),
        false => Selector::from_label_selector(&spec(ds).selector).map_err(|e| Error::Selector(e.into())),
    }
}

fn hash_label(labels: Option<&std::collections::BTreeMap<String, String>>) -> &str {
    labels.and_then(|l| l.get(CONTROLLER_REVISION_HASH_LABEL)).map(String::as_str).unwrap_or("")
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(phase(pod), "Failed" | "Succeeded")
}

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or("")
}

/// `failedPodsBackoffKey`.
fn failed_pods_backoff_key(ds: &DaemonSet, node: &str) -> String {
    let generation = ds.status.as_ref().and_then(|s| s.observed_generation).unwrap_or(0);
    format!("{}/{generation}/{node}", ds.metadata.uid.as_deref().unwrap_or(""))
}

impl DaemonSetsController {
    /// `syncDaemonSet`.
    fn sync_daemon_set(&self, key: &str) -> Result<(), Error> {
        let started = Instant::now();
        let result = self.sync(key);
        log::debug!("Finished syncing daemon set daemonset={key} time={:?}", started.elapsed());
        result
    }

    fn sync(&self, key: &str) -> Result<(), Error> {
        // Until the informers have seen our last writes for it, what they hold may make us
        // create pods again; the error requeues the key rate-limited.
        self.consistency.ensure_ready(key)?;
        let Some(ds) = self.daemon_sets.get_newest(key) else {
            log::debug!("Daemon set has been deleted daemonset={key}");
            self.expectations.delete(key);
            self.consistency.clear(key, "");
            return Ok(());
        };
        let nodes = self.nodes.store().list();
        let selector = &spec(&ds).selector;
        if selector.match_labels.is_none() && selector.match_expressions.is_none() {
            let message = "This daemon set is selecting all pods. A non-empty selector is required.";
            self.recorder.event_for(&*ds, EventType::Warning, SELECTING_ALL, message);
            return Ok(());
        }
        // Being deleted: its revisions may be gone or orphaned, the status cannot be trusted.
        if ds.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let (current, old) = self.construct_history(&ds).map_err(|e| Error::ConstructHistory(Box::new(e)))?;
        let hash = hash_label(current.metadata.labels.as_ref()).to_string();
        if !self.expectations.satisfied(key) {
            // Only the status; the generation was not processed.
            return self.update_status(&ds, &nodes, &hash, false);
        }
        let result = self.update_daemon_set(&ds, &nodes, &hash, key, &old);
        let status = self.update_status(&ds, &nodes, &hash, true);
        match (result, status) {
            (Err(e), Err(status)) => {
                log::error!("Failed to update status daemonSet={key}: {status}");
                Err(e)
            }
            (Err(e), _) | (_, Err(e)) => Err(e),
            _ => Ok(()),
        }
    }

    /// `updateDaemonSet`: manage, roll when the expectations are met, prune revisions.
    fn update_daemon_set(
        &self,
        ds: &DaemonSet,
        nodes: &[Arc<Node>],
        hash: &str,
        key: &str,
        old: &[Arc<ControllerRevision>],
    ) -> Result<(), Error> {
        self.manage(ds, nodes, hash)?;
        if self.expectations.satisfied(key) && util::strategy_type(ds) == "RollingUpdate" {
            self.rolling_update(ds, nodes, hash)?;
        }
        self.cleanup_history(ds, old).map_err(|e| Error::CleanupHistory(Box::new(e)))
    }

    /// `getDaemonPods`: the pods the DaemonSet owns after adopting and releasing.
    fn daemon_pods(&self, ds: &DaemonSet) -> Result<Vec<Arc<Pod>>, Error> {
        let selector = selector_of(ds)?;
        let owner_uid = ds.metadata.uid.as_ref();
        let candidates = self
            .pods
            .store()
            .list_namespace_where(namespace_of(&ds.metadata), |m| claim_candidate(owner_uid, &selector, m));
        // Adoptions are pod writes (`RealPodControl.PatchPod` calls `OnWrite`).
        let on_write = |pod: &ObjectMeta| self.consistency.pod_written(pod);
        self.claim::<Pod>(ds, &selector, candidates, Some(&on_write))
    }

    /// `ClaimPods` / `ClaimControllerRevisions`: adopts the orphans `selector` matches and
    /// releases the owned objects it no longer matches, telling `on_write` what each patch
    /// returned.
    fn claim<K>(
        &self,
        ds: &DaemonSet,
        selector: &Selector,
        objects: Vec<Arc<K>>,
        on_write: Option<&dyn Fn(&ObjectMeta)>,
    ) -> Result<Vec<Arc<K>>, Error>
    where
        K: k8s_openapi::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + k8s_openapi::Metadata<Ty = ObjectMeta>
            + serde::de::DeserializeOwned
            + 'static,
    {
        let can_adopt = || recheck_deletion_timestamp::<DaemonSet>(&self.client, &ds.metadata, "DaemonSet ");
        let manager = ControllerRefManager {
            client: &self.client,
            owner: &ds.metadata,
            owner_ref: controller_ref(ds),
            selector,
            can_adopt: &can_adopt,
            finalizers: &[],
            on_write,
        };
        manager.claim::<K, _>(objects).map_err(|e| Error::Claim(e.into()))
    }

    /// `getNodesToDaemonPods`: the claimed pods by node; terminal pods being deleted are left
    /// out unless `include_deleted_terminal`.
    fn nodes_to_daemon_pods(&self, ds: &DaemonSet, include_deleted_terminal: bool) -> Result<NodePods, Error> {
        let mut result = NodePods::new();
        for pod in self.daemon_pods(ds)? {
            if !include_deleted_terminal && is_terminal(&pod) && pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let Some(node) = target_node_name(&pod) else {
                log::debug!("Failed to get target node name of Pod in DaemonSet pod={}", name_of(&pod.metadata));
                continue;
            };
            result.entry(node).or_default().push(pod);
        }
        Ok(result)
    }

    /// `manage`: pods created where missing, deleted where not wanted.
    fn manage(&self, ds: &DaemonSet, nodes: &[Arc<Node>], hash: &str) -> Result<(), Error> {
        let node_pods = self.nodes_to_daemon_pods(ds, false).map_err(|e| e.node_pod_mapping(ds))?;
        let mut needing = Vec::new();
        let mut to_delete = Vec::new();
        for node in nodes {
            let (create, delete) = self.pods_should_be_on_node(node, &node_pods, ds, hash);
            needing.extend(create);
            to_delete.extend(delete);
        }
        // Unscheduled pods meant for nodes that are gone: the pod GC never sees them.
        let existing: std::collections::HashSet<&str> = nodes.iter().map(|n| node_name(n)).collect();
        for (node, pods) in &node_pods {
            if existing.contains(node.as_str()) {
                continue;
            }
            let unscheduled =
                pods.iter().filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_none_or(str::is_empty));
            to_delete.extend(unscheduled.map(|p| name_of(&p.metadata).to_string()));
        }
        self.sync_nodes(ds, &to_delete, &needing, hash)
    }

    /// `podsShouldBeOnNode`: the nodes needing a pod and the pods to delete, for one node.
    fn pods_should_be_on_node(
        &self,
        node: &Node,
        node_pods: &NodePods,
        ds: &DaemonSet,
        hash: &str,
    ) -> (Vec<String>, Vec<String>) {
        let name = node_name(node);
        let (should_run, should_continue_running) = node_should_run_daemon_pod(node, ds);
        let daemon_pods = node_pods.get(name);
        let mut needing = Vec::new();
        let mut to_delete = Vec::new();
        if should_run && daemon_pods.is_none() {
            needing.push(name.to_string());
        } else if should_continue_running {
            let mut running = Vec::new();
            for pod in daemon_pods.into_iter().flatten() {
                if pod.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                let pod_name = name_of(&pod.metadata);
                let namespace = namespace_of(&pod.metadata);
                match phase(pod) {
                    "Failed" => {
                        // Often a fight with a kubelet that rejects the pod: back off.
                        let key = failed_pods_backoff_key(ds, name);
                        let now = Instant::now();
                        if self.failed_pods_backoff.in_backoff_since_update(&key, now) {
                            let delay = self.failed_pods_backoff.get(&key);
                            log::debug!(
                                "Deleting failed pod on node has been limited by backoff pod={namespace}/{pod_name} node={name} currentDelay={delay:?}"
                            );
                            self.queue.add_after(object_key(&ds.metadata), delay);
                            continue;
                        }
                        self.failed_pods_backoff.next(&key, now);
                        let message = format!(
                            "Found failed daemon pod {namespace}/{pod_name} on node {name}, will try to kill it"
                        );
                        log::info!(
                            "Found failed daemon pod on node, will try to kill it pod={namespace}/{pod_name} node={name}"
                        );
                        self.recorder.event_for(ds, EventType::Warning, FAILED_DAEMON_POD, &message);
                        to_delete.push(pod_name.to_string());
                    }
                    "Succeeded" => {
                        let message = format!(
                            "Found succeeded daemon pod {namespace}/{pod_name} on node {name}, will try to delete it"
                        );
                        log::info!(
                            "Found succeeded daemon pod on node, will try to delete it pod={namespace}/{pod_name} node={name}"
                        );
                        self.recorder.event_for(ds, EventType::Normal, SUCCEEDED_DAEMON_POD, &message);
                        to_delete.push(pod_name.to_string());
                    }
                    _ => running.push(pod.clone()),
                }
            }
            running.sort_by(|a, b| creation_order(a, b));
            if !allows_surge(ds) {
                // All but the oldest go.
                to_delete.extend(running.iter().skip(1).map(|p| name_of(&p.metadata).to_string()));
            } else if running.is_empty() {
                if should_run {
                    // Surging: at least one pod that is not being deleted.
                    needing.push(name.to_string());
                }
            } else if running.len() > 1 {
                // Two pods only while the oldest new one is not ready and the oldest old one is.
                let mut oldest_new: Option<&Arc<Pod>> = None;
                let mut oldest_old: Option<&Arc<Pod>> = None;
                for pod in &running {
                    let slot = if hash_label(pod.metadata.labels.as_ref()) == hash {
                        &mut oldest_new
                    } else {
                        &mut oldest_old
                    };
                    if slot.is_none() {
                        *slot = Some(pod);
                        continue;
                    }
                    to_delete.push(name_of(&pod.metadata).to_string());
                }
                if let (Some(new), Some(old)) = (oldest_new, oldest_old) {
                    if !is_pod_ready(old) {
                        log::debug!(
                            "Pod from daemonset is no longer ready and will be replaced with newer pod oldPod={}",
                            name_of(&old.metadata)
                        );
                        to_delete.push(name_of(&old.metadata).to_string());
                    } else if is_pod_available(new, min_ready_seconds(ds), Timestamp::now()) {
                        log::debug!(
                            "Pod from daemonset is now ready and will replace older pod newPod={}",
                            name_of(&new.metadata)
                        );
                        to_delete.push(name_of(&old.metadata).to_string());
                    }
                }
            }
        } else if let Some(pods) = daemon_pods {
            // Not wanted here any more: every pod goes.
            let live = pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none());
            to_delete.extend(live.map(|p| name_of(&p.metadata).to_string()));
        }
        (needing, to_delete)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::global;

    #[test]
    fn stale_sync_skips_are_exposed_as_upstreams_once_counted() {
        stale_sync_skips_total().inc(&["apps", "daemonsets"]);
        let text = global().render();
        let help = "# HELP daemonset_controller_stale_sync_skips_total [ALPHA] Total number of DaemonSet syncs \
                    skipped due to a stale watch cache.\n# TYPE daemonset_controller_stale_sync_skips_total counter\n";
        assert!(text.contains(help), "{text}");
        assert!(text.contains("daemonset_controller_stale_sync_skips_total{group=\"apps\",resource=\"daemonsets\"} "));
    }

    use crate::controllers::testutil::conflict;

    /// A conflict deep in a sync keeps its kind through the contexts upstream adds.
    #[test]
    fn a_conflict_keeps_its_kind_through_the_contexts() {
        let mapping = Error::NodePodMapping { name: "ds".into(), source: Box::new(Error::Api(conflict())) };
        let error = Error::CleanupHistory(Box::new(mapping));
        let SyncError::Conflict(message) = SyncError::from(error) else { panic!("a conflict") };
        assert!(
            message.starts_with(
                "failed to clean up revisions of DaemonSet: couldn't get node to daemon pod mapping for daemon set \"ds\": "
            ),
            "{message}"
        );
    }
}
