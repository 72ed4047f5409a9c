//! When to sync a ReplicaSet again for the availability of its pods (the end of upstream
//! v1.36's `syncReplicaSet`): a ready pod becomes available `minReadySeconds` after it became
//! ready, and nothing else brings the key back then.

use std::time::Duration;

use jiff::Timestamp;

use super::kind::ReplicaKind;
use crate::apimachinery::clock::Clock;
use crate::apimachinery::pod::PodFields;
use crate::controllers::podutil::availability::find_min_next_pod_availability_check;

/// The delay of the availability requeue after a successful sync: when `minReadySeconds > 0`
/// and the written status has ready pods that are not available yet, the earliest time one of
/// `pods` becomes available (`FindMinNextPodAvailabilityCheck`, with `evaluated` the time the
/// status was computed at and `clock` the present), or `minReadySeconds` if none is found (a
/// safeguard, so that `availableReplicas` is always brought up to date). `None`: no requeue.
pub(super) fn availability_requeue<K: ReplicaKind, P: PodFields>(
    written: &K,
    pods: &[P],
    evaluated: Timestamp,
    clock: &dyn Clock,
) -> Option<Duration> {
    let (min_ready, status) = (written.min_ready_seconds(), written.status());
    if min_ready <= 0 || status.ready_replicas == status.available_replicas {
        return None;
    }
    let fallback = Duration::from_secs(u64::try_from(min_ready).unwrap_or(0));
    Some(find_min_next_pod_availability_check(pods, min_ready, evaluated, clock).unwrap_or(fallback))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use serde_json::{Value, json};

    use std::sync::Arc;

    use k8s_openapi::api::core::v1::Pod;

    use super::*;
    use crate::apimachinery::clock::FakeClock;
    use crate::apimachinery::pod::fixtures::at;

    /// A pod whose Ready condition is `status` since `since` (RFC 3339), if given.
    fn pod(name: &str, status: &str, since: Option<&str>) -> Arc<Pod> {
        let mut ready = json!({"type": "Ready", "status": status});
        if let Some(since) = since {
            ready["lastTransitionTime"] = json!(since);
        }
        let pod = json!({"metadata": {"name": name}, "status": {"phase": "Running", "conditions": [ready]}});
        Arc::new(serde_json::from_value(pod).expect("a pod"))
    }

    fn replica_set(min_ready: i32, status: Value) -> ReplicaSet {
        let spec = json!({"replicas": 3, "minReadySeconds": min_ready, "selector": {}});
        serde_json::from_value(json!({"metadata": {"name": "rs"}, "spec": spec, "status": status})).expect("an rs")
    }

    #[test]
    fn the_requeue_waits_for_ready_pods_that_are_not_available() {
        let pods = [pod("soon", "True", Some("1970-01-01T00:00:12Z"))];
        // Not every replica is ready: v1.33 did not requeue then, v1.36 does for any ready pod.
        let pending = json!({"replicas": 3, "readyReplicas": 2, "availableReplicas": 1});
        let rs = replica_set(10, pending.clone());
        assert_eq!(availability_requeue(&rs, &pods, at(14), &FakeClock::at(at(14))), Some(Duration::from_secs(8)));
        let no_candidate = [pod("c", "True", None)];
        assert_eq!(
            availability_requeue(&rs, &no_candidate, at(14), &FakeClock::at(at(14))),
            Some(Duration::from_secs(10)),
            "minReadySeconds when no pod gives a time"
        );
        let settled = replica_set(10, json!({"replicas": 3, "readyReplicas": 2, "availableReplicas": 2}));
        assert_eq!(availability_requeue(&settled, &pods, at(14), &FakeClock::at(at(14))), None, "ready == available");
        assert_eq!(
            availability_requeue(&replica_set(0, pending), &pods, at(14), &FakeClock::at(at(14))),
            None,
            "no minReadySeconds"
        );
    }
}
