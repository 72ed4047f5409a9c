//! The Deployment controller (`deployment-controller`), after upstream v1.36's
//! `pkg/controller/deployment` (`deployment_controller.go`, `sync.go`, `rolling.go`,
//! `recreate.go`, `rollback.go`, `progress.go`) and `util/deployment_util.go`.
//!
//! A sync (`syncDeployment`) claims the namespace's ReplicaSets that the Deployment's selector
//! matches (adopting orphans, releasing those that stopped matching), then either only scales
//! (paused, or a scaling event), rolls back (the deprecated rollback annotation), or rolls out
//! with the Deployment's strategy, and writes the status. Pods are the ReplicaSet controller's.

mod handlers;
mod progress;
mod recreate;
mod rollback;
mod rolling;
mod sync;
pub mod util;

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::apimachinery::errors::BoxError;
use crate::apimachinery::labels::Selector;
use crate::client::{self, Api, Client, PostParams};
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::controller_ref::{
    ControllerRefManager, claim_candidate, controller_of, controller_ref, recheck_deletion_timestamp,
};
use crate::runtime::events::{EventRecorder, EventType};
use crate::runtime::informer::{Informer, OWNER_UID_INDEX};
use crate::runtime::workqueue::WorkQueue;

/// `maxRetries`: a Deployment failing this many syncs in a row is dropped from the queue.
const MAX_RETRIES: u32 = 15;

/// The controller's settings (`DeploymentControllerConfiguration`).
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// `--concurrent-deployment-syncs`.
    pub workers: usize,
    /// The `DeploymentReplicaSetTerminatingReplicas` feature gate (beta, on in v1.36): the status
    /// reports `terminatingReplicas`, summed from the ReplicaSets.
    pub terminating_replicas: bool,
}

/// `NewDeploymentController`. It cannot fail.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let queue = WorkQueue::new("deployment");
    let controller = Arc::new(DeploymentController {
        client: context.client.clone(),
        deployments: context.informers.informer::<Deployment>(),
        replica_sets: context.informers.informer::<ReplicaSet>(),
        pods: context.informers.informer::<Pod>(),
        queue: queue.clone(),
        recorder: context.recorder.clone(),
        terminating_replicas: config.terminating_replicas,
    });
    controller.add_handlers();
    Controller::new().with_queue(&queue, config.workers, move |key: &String| controller.process_key(key))
}

/// Upstream's `DeploymentController`.
pub struct DeploymentController {
    client: Client,
    deployments: Arc<Informer<Deployment>>,
    replica_sets: Arc<Informer<ReplicaSet>>,
    pods: Arc<Informer<Pod>>,
    queue: WorkQueue<String>,
    recorder: EventRecorder,
    /// The `DeploymentReplicaSetTerminatingReplicas` gate.
    terminating_replicas: bool,
}

/// Why a sync failed. An API error keeps its kind for the worker (a conflict, a
/// `Retry-After`, a failure); a write refused because the namespace is being deleted is not
/// retried (`handleErr`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request failed.
    #[error("{0}")]
    Api(#[from] client::Error),
    /// Adopting or releasing ReplicaSets failed.
    #[error("{0}")]
    Claim(#[source] BoxError),
    /// The Deployment's selector is not valid.
    #[error("deployment {namespace}/{name} has invalid label selector: {source}")]
    InvalidSelector {
        /// The Deployment's namespace.
        namespace: String,
        /// The Deployment's name.
        name: String,
        /// Why.
        source: BoxError,
    },
    /// `spec.strategy.type` is neither `Recreate` nor `RollingUpdate`.
    #[error("unexpected deployment strategy type: {0}")]
    UnexpectedStrategy(String),
    /// `NewRSNewReplicas` of a strategy it does not know.
    #[error("deployment type {0} isn't supported")]
    UnsupportedStrategy(String),
    /// The rolling update found no new ReplicaSet after creating it.
    #[error("the new replica set was not created")]
    NewReplicaSetNotCreated,
    /// The new ReplicaSet already exists on the server but not in the cache.
    #[error("replicaset.apps {0:?} not found")]
    ReplicaSetNotFound(String),
    /// `maxSurge` or `maxUnavailable` does not scale.
    #[error("{0}")]
    ScaledValue(#[source] BoxError),
    /// A ReplicaSet's revision annotation is not a number (Go's `strconv.ParseInt` text).
    #[error("strconv.ParseInt: parsing {0:?}: invalid syntax")]
    InvalidRevision(String),
    /// Cleaning up unhealthy replicas would scale the ReplicaSet up.
    #[error("when cleaning up unhealthy replicas, got invalid request to scale down {namespace}/{name} {size} -> {to}")]
    InvalidScaleDown {
        /// The ReplicaSet's namespace.
        namespace: String,
        /// The ReplicaSet's name.
        name: String,
        /// Its size.
        size: i32,
        /// The size asked for.
        to: i32,
    },
}

impl Error {
    /// The write was refused because the namespace is being deleted.
    fn namespace_terminating(&self) -> bool {
        matches!(self, Error::Api(e) if namespace_terminating(e))
    }
}

impl From<Error> for SyncError {
    fn from(e: Error) -> SyncError {
        SyncError::of(e)
    }
}

/// `HasStatusCause(err, NamespaceTerminatingCause)`.
fn namespace_terminating(error: &crate::client::Error) -> bool {
    let crate::client::Error::Api(e) = error else { return false };
    let causes = e.status.details.as_ref().and_then(|d| d.causes.as_ref());
    causes.into_iter().flatten().any(|c| c.reason.as_deref() == Some("NamespaceTerminating"))
}

/// What a sync step returns; its error says whether to retry.
pub type DeploymentResult<T = ()> = Result<T, Error>;

/// Pods of the Deployment grouped by the uid of their controlling ReplicaSet (`podMap`).
pub type PodMap = HashMap<String, Vec<Arc<Pod>>>;

impl DeploymentController {
    /// `processNextWorkItem` + `handleErr`.
    fn process_key(&self, key: &str) -> SyncResult {
        match self.sync_deployment(key) {
            Ok(()) => Ok(()),
            Err(e) if e.namespace_terminating() => Ok(()),
            Err(e) if self.queue.num_requeues(&key.to_string()) < MAX_RETRIES => Err(e.into()),
            Err(e) => {
                log::info!("Dropping deployment out of the queue: deployment {key}: {e}");
                Ok(())
            }
        }
    }
}

/// Whether an object's controller reference names `rs` (the pod index's key: namespace, kind,
/// name and UID).
fn controlled_by(meta: &ObjectMeta, rs: &ReplicaSet) -> bool {
    meta.namespace == rs.metadata.namespace
        && controller_of(meta).is_some_and(|owner| {
            owner.kind == "ReplicaSet"
                && Some(&owner.name) == rs.metadata.name.as_ref()
                && owner.uid == util::rs_uid(rs)
        })
}

fn selector_of(d: &Deployment) -> LabelSelector {
    d.spec.as_ref().map(|s| s.selector.clone()).unwrap_or_default()
}

fn namespace(d: &Deployment) -> &str {
    d.metadata.namespace.as_deref().unwrap_or("")
}

fn name(d: &Deployment) -> &str {
    d.metadata.name.as_deref().unwrap_or("")
}

impl DeploymentController {
    /// `syncDeployment`.
    fn sync_deployment(&self, key: &str) -> DeploymentResult {
        // Our own last write, if the watch has not brought it yet: a status written by the
        // previous sync is not written again from the older copy (a Conflict).
        let Some(cached) = self.deployments.get_newest(key) else {
            log::debug!("Deployment {key} has been deleted");
            return Ok(());
        };
        let mut d = (*cached).clone();
        let selector = selector_of(&d);
        if selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
            && selector.match_expressions.as_ref().is_none_or(|e| e.is_empty())
        {
            let message = "This deployment is selecting all pods. A non-empty selector is required.";
            self.recorder.event_for(&d, EventType::Warning, "SelectingAll", message);
            let generation = d.metadata.generation.unwrap_or(0);
            let status = d.status.get_or_insert_with(Default::default);
            if status.observed_generation.unwrap_or(0) < generation {
                status.observed_generation = Some(generation);
                // Upstream ignores the result of this write.
                let _ = self.update_status(&mut d);
            }
            return Ok(());
        }
        let mut rs_list = self.replica_sets_for_deployment(&d)?;
        if d.metadata.deletion_timestamp.is_some() {
            return self.sync_status_only(&mut d, rs_list);
        }
        self.check_paused_conditions(&mut d)?;
        if util::paused(&d) {
            return self.sync(&mut d, rs_list);
        }
        if rollback::rollback_to(&d).is_some() {
            return self.rollback(&mut d, rs_list);
        }
        // It may sync the new ReplicaSet's annotations: the list then holds the written one.
        if self.is_scaling_event(&mut d, &mut rs_list)? {
            return self.sync(&mut d, rs_list);
        }
        match util::strategy_type(&d) {
            "Recreate" => {
                // Only Recreate reads the pods (upstream lists them on every sync: free from
                // its cache, an unpacking of each one from ours).
                let pod_map = self.pod_map_for_deployment(&rs_list);
                self.rollout_recreate(&mut d, rs_list, &pod_map)
            }
            "RollingUpdate" => self.rollout_rolling(&mut d, rs_list),
            other => Err(Error::UnexpectedStrategy(other.to_string())),
        }
    }

    /// `getReplicaSetsForDeployment`: the namespace's ReplicaSets, claimed (adopted or released)
    /// through the Deployment's selector.
    fn replica_sets_for_deployment(&self, d: &Deployment) -> DeploymentResult<Vec<Arc<ReplicaSet>>> {
        let selector = Selector::from_label_selector(&selector_of(d)).map_err(|e| Error::InvalidSelector {
            namespace: namespace(d).to_string(),
            name: name(d).to_string(),
            source: e.into(),
        })?;
        // Only ours and the orphans the selector matches can be claimed: the namespace's other
        // ReplicaSets are not copied.
        let owner_uid = d.metadata.uid.as_ref();
        let all: Vec<Arc<ReplicaSet>> = (self.replica_sets.store().list_namespace(namespace(d)).into_iter())
            .map(|rs| self.replica_sets.newest(rs))
            .filter(|rs| claim_candidate(owner_uid, &selector, &rs.metadata))
            .collect();
        let can_adopt = || recheck_deletion_timestamp::<Deployment>(&self.client, &d.metadata, "Deployment ");
        let manager = ControllerRefManager {
            client: &self.client,
            owner: &d.metadata,
            owner_ref: controller_ref(d),
            selector: &selector,
            can_adopt: &can_adopt,
            finalizers: &[],
            on_write: None,
        };
        manager.claim::<ReplicaSet, _>(all).map_err(|e| Error::Claim(e.into()))
    }

    /// `getPodMapForDeployment`: by ReplicaSet, the pods it controls (`FilterPodsByOwner`
    /// without orphans; inactive ones too: Recreate waits for old pods to be gone). Since v1.36
    /// the Deployment's selector no longer filters them.
    fn pod_map_for_deployment(&self, rs_list: &[Arc<ReplicaSet>]) -> PodMap {
        let store = self.pods.store();
        let owned_by = |rs: &ReplicaSet| {
            let pods = store.by_index(OWNER_UID_INDEX, util::rs_uid(rs));
            pods.into_iter().filter(|pod| controlled_by(&pod.metadata, rs)).collect()
        };
        rs_list.iter().map(|rs| (util::rs_uid(rs).to_string(), owned_by(rs))).collect()
    }

    /// `UpdateStatus` of the Deployment (the status subresource also takes its annotations).
    /// `d` becomes the Deployment as written, so that a later write of this sync carries its
    /// resourceVersion (upstream goes on with the old one and meets a Conflict), and the
    /// informer gives it to the next sync until the watch brings it.
    fn update_status(&self, d: &mut Deployment) -> Result<(), crate::client::Error> {
        let written = Api::<Deployment>::namespaced(&self.client, namespace(d)).replace_status(
            name(d),
            d,
            &PostParams::default(),
        )?;
        *d = (*self.deployments.mutation(written)).clone();
        Ok(())
    }

    /// `Update` of a ReplicaSet: the ReplicaSet as written, also given to the next syncs until
    /// the watch brings it.
    fn update_replica_set(&self, rs: &ReplicaSet) -> Result<Arc<ReplicaSet>, crate::client::Error> {
        let namespace = rs.metadata.namespace.as_deref().unwrap_or("");
        let written = Api::<ReplicaSet>::namespaced(&self.client, namespace).replace(
            util::rs_name(rs),
            rs,
            &PostParams::default(),
        )?;
        Ok(self.replica_sets.mutation(written))
    }

    fn key(d: &Deployment) -> String {
        crate::runtime::informer::object_key(&d.metadata)
    }
}
