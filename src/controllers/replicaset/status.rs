//! Status of a replica controller: upstream's `calculateStatus` and `updateReplicaSetStatus`
//! (`pkg/controller/replicaset/replica_set_utils.go`).

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::kind::{Condition, ReplicaKind, ReplicaStatus, Selector};
use crate::apimachinery::pod::{is_pod_available, is_pod_ready};
use crate::client::{Api, Client, PostParams};

/// `ReplicaSetReplicaFailure` (and the RC's `ReplicationControllerReplicaFailure`).
pub const REPLICA_FAILURE: &str = "ReplicaFailure";

/// `calculateStatus`: counts of the claimed active pods, and the ReplicaFailure condition set
/// on a manageReplicas error (FailedCreate when short of pods, FailedDelete when over) or
/// removed once it succeeds.
pub fn calculate_status<K: ReplicaKind>(
    rs: &K,
    pods: &[Arc<Pod>],
    manage_error: Option<&str>,
    now: Timestamp,
) -> ReplicaStatus {
    let mut status = rs.status();
    let template_labels =
        rs.template().and_then(|t| t.metadata.as_ref()).and_then(|m| m.labels.clone()).unwrap_or_default();
    let template = Selector::from_map(&template_labels);
    let min_ready = rs.min_ready_seconds();
    let count = |f: &dyn Fn(&Pod) -> bool| pods.iter().filter(|p| f(p)).count() as i32;
    let has_failure = status.conditions.iter().any(|c| c.type_ == REPLICA_FAILURE);
    match manage_error {
        Some(message) if !has_failure => {
            let diff = pods.len() as i64 - i64::from(rs.replicas());
            let reason = match diff {
                d if d < 0 => "FailedCreate",
                d if d > 0 => "FailedDelete",
                _ => "",
            };
            status.conditions.push(Condition {
                type_: REPLICA_FAILURE.into(),
                status: "True".into(),
                reason: Some(reason.into()),
                message: Some(message.into()),
                last_transition_time: Some(Time(now)),
            });
        }
        None if has_failure => status.conditions.retain(|c| c.type_ != REPLICA_FAILURE),
        _ => {}
    }
    status.replicas = pods.len() as i32;
    status.fully_labeled_replicas = count(&|p| template.matches(p.metadata.labels.as_ref()));
    status.ready_replicas = count(&is_pod_ready);
    status.available_replicas = count(&|p| is_pod_available(p, min_ready, now));
    status
}

/// Whether `status` is what `rs` reports already, for its current generation.
fn unchanged<K: ReplicaKind>(rs: &K, status: &ReplicaStatus) -> bool {
    let current = rs.status();
    let generation = rs.metadata().generation.unwrap_or(0);
    ReplicaStatus { observed_generation: generation, ..status.clone() } == current
        && current.observed_generation == generation
}

/// `statusUpdateRetries`: one more attempt, on a fresh read, after a failed update.
const STATUS_UPDATE_RETRIES: usize = 1;

/// `updateReplicaSetStatus`: writes `status` (with observedGeneration) through the status
/// subresource when it differs; returns the object as written (or as it was).
pub fn update_status<K: ReplicaKind>(client: &Client, rs: &K, mut status: ReplicaStatus) -> Result<K, String> {
    if unchanged(rs, &status) {
        return Ok(rs.clone());
    }
    let meta = rs.metadata();
    let (namespace, name) = (meta.namespace.as_deref().unwrap_or(""), meta.name.as_deref().unwrap_or(""));
    let api = Api::<K>::namespaced(client, namespace);
    status.observed_generation = meta.generation.unwrap_or(0);
    let mut current = rs.clone();
    let mut attempt = 0;
    loop {
        log::debug!("updating status of {} {namespace}/{name}: replicas {}", K::KIND, status.replicas);
        let error = match api.replace_status(name, &current.with_status(&status), &PostParams::default()) {
            Ok(written) => return Ok(written),
            Err(e) => e.to_string(),
        };
        if attempt >= STATUS_UPDATE_RETRIES {
            return Err(error);
        }
        attempt += 1;
        current = api.get(name).map_err(|e| e.to_string())?;
    }
}
