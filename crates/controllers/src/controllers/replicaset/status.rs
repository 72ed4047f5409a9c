//! Status of a replica controller: upstream's `calculateStatus` and `updateReplicaSetStatus`
//! (`pkg/controller/replicaset/replica_set_utils.go`).

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::kind::{Condition, ReplicaKind, ReplicaStatus, Selector};
use crate::apimachinery::pod::{PodFields, is_pod_available, is_pod_ready, phase};
use crate::client::{self, Api, Client, PostParams};
use crate::runtime::controller_ref::controller_of;

/// `ReplicaSetReplicaFailure` (and the RC's `ReplicationControllerReplicaFailure`).
pub const REPLICA_FAILURE: &str = "ReplicaFailure";

/// `calculateStatus`: counts of the claimed active pods (availability judged at `now`, the
/// time the availability requeue is planned from), `terminatingReplicas` from `terminating`
/// (`None` when not tracked: the gate is off or the kind has no such field), and the
/// ReplicaFailure condition set on a manageReplicas error (FailedCreate when short of pods,
/// FailedDelete when over) or removed once it succeeds.
pub fn calculate_status<K: ReplicaKind, P: PodFields>(
    rs: &K,
    pods: &[P],
    terminating: Option<&[P]>,
    manage_error: Option<&str>,
    now: Timestamp,
) -> ReplicaStatus {
    let mut status = rs.status();
    let template_labels =
        rs.template().and_then(|t| t.metadata.as_ref()).and_then(|m| m.labels.clone()).unwrap_or_default();
    let template = Selector::from_map(&template_labels);
    let min_ready = rs.min_ready_seconds();
    let count = |f: &dyn Fn(&P) -> bool| pods.iter().filter(|p| f(p)).count() as i32;
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
    status.fully_labeled_replicas = count(&|p| template.matches(p.pod_metadata().labels.as_ref()));
    status.ready_replicas = count(&|p| is_pod_ready(p));
    status.available_replicas = count(&|p| is_pod_available(p, min_ready, now));
    status.terminating_replicas = terminating.map(|pods| pods.len() as i32);
    status
}

/// `FilterPodsByOwner` + `FilterTerminatingPods` + `FilterClaimedPods`, one pod at a time:
/// whether `pod` counts in `terminatingReplicas` of `rs`. Its controller reference names `rs`
/// (kind, name and UID, the pod index's key), its labels match `selector`, it is being deleted
/// and its phase is not terminal (`IsPodTerminating`).
pub fn is_terminating_replica<K: ReplicaKind, P: PodFields + ?Sized>(rs: &K, selector: &Selector, pod: &P) -> bool {
    let (meta, pod_meta) = (rs.metadata(), pod.pod_metadata());
    // The cheap tests first: this runs for every pod of the ReplicaSet on every sync.
    if pod_meta.deletion_timestamp.is_none() || matches!(phase(pod), "Succeeded" | "Failed") {
        return false;
    }
    let owned = controller_of(pod_meta).is_some_and(|owner| {
        owner.kind == K::KIND && Some(&owner.name) == meta.name.as_ref() && Some(&owner.uid) == meta.uid.as_ref()
    });
    owned && selector.matches(pod_meta.labels.as_ref())
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
/// An unchanged status returns `rs` itself (shared, not copied: most syncs change nothing);
/// a written one, the object as the server answered.
pub fn update_status<K: ReplicaKind>(
    client: &Client,
    rs: &Arc<K>,
    mut status: ReplicaStatus,
) -> Result<Arc<K>, client::Error> {
    if unchanged(&**rs, &status) {
        return Ok(Arc::clone(rs));
    }
    let meta = rs.metadata();
    let (namespace, name) = (meta.namespace.as_deref().unwrap_or(""), meta.name.as_deref().unwrap_or(""));
    let api = Api::<K>::namespaced(client, namespace);
    status.observed_generation = meta.generation.unwrap_or(0);
    let mut current = Arc::clone(rs);
    let mut attempt = 0;
    loop {
        log::debug!("updating status of {} {namespace}/{name}: replicas {}", K::KIND, status.replicas);
        let error = match api.replace_status(name, &current.with_status(&status), &PostParams::default()) {
            Ok(written) => return Ok(Arc::new(written)),
            Err(e) => e,
        };
        if attempt >= STATUS_UPDATE_RETRIES {
            return Err(error);
        }
        attempt += 1;
        current = Arc::new(api.get(name)?);
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::ReplicationController;
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::Pod;
    use serde_json::{Value, json};

    use super::*;
    use crate::apimachinery::pod::fixtures::at;

    fn replica_set() -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "rs-uid", "generation": 2},
            "spec": {"replicas": 2, "minReadySeconds": 5, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}}},
        }))
        .expect("a replicaset")
    }

    #[test]
    fn a_conflict_writing_the_status_reaches_the_queue_as_a_conflict() {
        use crate::runtime::controller::SyncError;
        let server = crate::controllers::podutil::testing::ErrorServer::conflict();
        let rs = Arc::new(replica_set());
        let status = ReplicaStatus { replicas: 1, ..rs.status() };
        let error = super::super::Error::UpdateStatus(update_status(&server.client, &rs, status).unwrap_err());
        assert!(matches!(SyncError::of(error), SyncError::Conflict(_)));
        assert_eq!(server.requests(), 2, "one retry on a fresh read, which fails too");
    }

    /// A pod of `app`, controlled by `owner` (kind, name, uid), in `phase`, being deleted or not.
    fn pod(app: &str, owner: Option<(&str, &str, &str)>, phase: &str, deleting: bool) -> Arc<Pod> {
        let mut pod = json!({"metadata": {"name": "p", "labels": {"app": app}}, "status": {"phase": phase}});
        if let Some((kind, name, uid)) = owner {
            pod["metadata"]["ownerReferences"] =
                json!([{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": true}]);
        }
        if deleting {
            pod["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        Arc::new(serde_json::from_value(pod).expect("a pod"))
    }

    const OURS: Option<(&str, &str, &str)> = Some(("ReplicaSet", "web", "rs-uid"));

    #[test]
    fn terminating_replicas_are_our_pods_being_deleted_that_have_not_finished() {
        let rs = replica_set();
        let selector = rs.selector().expect("a selector");
        let counts = |pod: Arc<Pod>| is_terminating_replica(&rs, &selector, &pod);
        assert!(counts(pod("web", OURS, "Running", true)));
        assert!(counts(pod("web", OURS, "Pending", true)));
        assert!(!counts(pod("web", OURS, "Running", false)), "not being deleted");
        assert!(!counts(pod("web", OURS, "Succeeded", true)), "terminal");
        assert!(!counts(pod("web", OURS, "Failed", true)), "terminal");
        assert!(!counts(pod("web", None, "Running", true)), "an orphan is not claimed");
        assert!(!counts(pod("api", OURS, "Running", true)), "no longer selected");
        assert!(!counts(pod("web", Some(("ReplicaSet", "web", "other-uid")), "Running", true)));
        assert!(!counts(pod("web", Some(("ReplicaSet", "other", "rs-uid")), "Running", true)), "the index key");
        assert!(!counts(pod("web", Some(("StatefulSet", "web", "rs-uid")), "Running", true)), "the index key");
    }

    fn ready_pod(since: &str) -> Arc<Pod> {
        let status = json!({"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": since}]});
        let pod = json!({"metadata": {"name": "p", "labels": {"app": "web"}}, "status": status});
        Arc::new(serde_json::from_value(pod).expect("a pod"))
    }

    #[test]
    fn the_status_counts_terminating_pods_only_when_tracked() {
        let rs = replica_set();
        let pods = [ready_pod("1970-01-01T00:00:10Z"), ready_pod("1970-01-01T00:00:12Z")];
        let terminating = [pod("web", OURS, "Running", true)];
        let status = calculate_status(&rs, &pods, Some(&terminating), None, at(15));
        assert_eq!((status.replicas, status.ready_replicas, status.fully_labeled_replicas), (2, 2, 2));
        assert_eq!(status.available_replicas, 1, "one pod ready for exactly minReadySeconds");
        assert_eq!(status.terminating_replicas, Some(1));
        assert_eq!(calculate_status(&rs, &pods, Some(&[]), None, at(15)).terminating_replicas, Some(0));
        let mut reported = rs.clone();
        reported.status = Some(serde_json::from_value(json!({"replicas": 2, "terminatingReplicas": 4})).unwrap());
        let untracked = calculate_status(&reported, &pods, None, None, at(15));
        assert_eq!(untracked.terminating_replicas, None, "cleared when not tracked, as upstream");
    }

    #[test]
    fn terminating_replicas_are_written_for_replica_sets_only() {
        let status = ReplicaStatus { replicas: 2, terminating_replicas: Some(0), ..ReplicaStatus::default() };
        let written = replica_set().with_status(&status);
        let field = |object: Value| object["status"].get("terminatingReplicas").cloned();
        assert_eq!(field(serde_json::to_value(&written).unwrap()), Some(json!(0)), "zero is written");
        assert_eq!(written.status(), status);
        let rc: ReplicationController =
            serde_json::from_value(json!({"metadata": {"name": "rc"}, "spec": {"selector": {"app": "web"}}})).unwrap();
        let written = rc.with_status(&status);
        assert_eq!(field(serde_json::to_value(&written).unwrap()), None);
        assert_eq!(written.status().terminating_replicas, None);
        const { assert!(ReplicaSet::STATUS_TERMINATING_REPLICAS && !ReplicationController::STATUS_TERMINATING_REPLICAS) };
    }
}
