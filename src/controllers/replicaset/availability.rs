//! When to sync a ReplicaSet again for the availability of its pods (the end of upstream
//! v1.36's `syncReplicaSet`): a ready pod becomes available `minReadySeconds` after it became
//! ready, and nothing else brings the key back then.

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;

use super::kind::ReplicaKind;
use crate::apimachinery::pod::{get_pod_ready_condition, is_pod_ready};

/// The delay of the availability requeue after a successful sync: when `minReadySeconds > 0`
/// and the written status has ready pods that are not available yet, the earliest time one of
/// `pods` becomes available ([`next_availability_check`], with `evaluated` the time the status
/// was computed at and `now` the present), or `minReadySeconds` if none is found (a safeguard,
/// so that `availableReplicas` is always brought up to date). `None`: no requeue.
pub(super) fn availability_requeue<K: ReplicaKind>(
    written: &K,
    pods: &[Arc<Pod>],
    evaluated: Timestamp,
    now: Timestamp,
) -> Option<Duration> {
    let (min_ready, status) = (written.min_ready_seconds(), written.status());
    if min_ready <= 0 || status.ready_replicas == status.available_replicas {
        return None;
    }
    let fallback = Duration::from_secs(u64::try_from(min_ready).unwrap_or(0));
    Some(next_availability_check(pods, min_ready, evaluated, now).unwrap_or(fallback))
}

/// Upstream's `FindMinNextPodAvailabilityCheck` (`pkg/controller/controller_utils.go`): among
/// the ready pods with a Ready transition time, the one due soonest after `evaluated` (the time
/// the owner's status was computed, so that no pod counted unavailable then is skipped); its
/// delay is then recomputed against `now`, and is 0 (check at once) if it is already due.
/// `None`: no pod becomes available later.
///
/// A private copy for the ReplicaSet controller; the StatefulSet port has its own in
/// `podutil`. The lead is to keep one of the two once both are merged.
fn next_availability_check(
    pods: &[Arc<Pod>],
    min_ready_seconds: i32,
    evaluated: Timestamp,
    now: Timestamp,
) -> Option<Duration> {
    let mut soonest: Option<(Duration, &Pod)> = None;
    for pod in pods {
        let Some(delay) = pod_availability_check(pod, min_ready_seconds, evaluated) else { continue };
        if soonest.is_none_or(|(min, _)| delay < min) {
            soonest = Some((delay, pod));
        }
    }
    let (_, pod) = soonest?;
    Some(pod_availability_check(pod, min_ready_seconds, now).unwrap_or(Duration::ZERO))
}

/// `nextPodAvailabilityCheck`: how long after `now` a ready pod becomes available (as
/// `IsPodAvailable` judges it); `None` if it is not ready, has no Ready transition time, or is
/// available already.
fn pod_availability_check(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> Option<Duration> {
    if !is_pod_ready(pod) || min_ready_seconds <= 0 {
        return None;
    }
    let since = get_pod_ready_condition(pod)?.last_transition_time.as_ref()?.0;
    let due = since.checked_add(SignedDuration::from_secs(i64::from(min_ready_seconds))).ok()?;
    let delay = due.duration_since(now);
    if delay.is_positive() { delay.try_into().ok() } else { None }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use serde_json::{Value, json};

    use super::*;
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

    fn millis(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    fn time(text: &str) -> Timestamp {
        text.parse().expect("a time")
    }

    #[test]
    fn a_pod_is_checked_when_it_is_due_and_not_after() {
        let ready = pod("a", "True", Some("1970-01-01T00:00:10Z"));
        assert_eq!(pod_availability_check(&ready, 5, at(12)), Some(Duration::from_secs(3)));
        assert_eq!(pod_availability_check(&ready, 5, time("1970-01-01T00:00:14.75Z")), Some(millis(250)));
        assert_eq!(pod_availability_check(&ready, 5, at(15)), None, "available at exactly the due time");
        assert_eq!(pod_availability_check(&ready, 0, at(10)), None, "no minReadySeconds");
        assert_eq!(pod_availability_check(&pod("b", "False", Some("1970-01-01T00:00:10Z")), 5, at(12)), None);
        assert_eq!(pod_availability_check(&pod("c", "True", None), 5, at(12)), None, "no transition time");
    }

    #[test]
    fn the_soonest_pod_is_rechecked_against_the_present() {
        let pods = [
            pod("late", "True", Some("1970-01-01T00:00:20Z")),
            pod("soon", "True", Some("1970-01-01T00:00:12Z")),
            pod("available", "True", Some("1970-01-01T00:00:01Z")),
            pod("unready", "False", Some("1970-01-01T00:00:11Z")),
        ];
        // Evaluated at 14: "soon" is due at 22, "late" at 30.
        assert_eq!(next_availability_check(&pods, 10, at(14), at(14)), Some(Duration::from_secs(8)));
        // Time has passed since the evaluation: the delay is what is left of it now.
        assert_eq!(next_availability_check(&pods, 10, at(14), time("1970-01-01T00:00:20.5Z")), Some(millis(1500)));
        // "soon" was pending at the evaluation and is due by now: check at once, not after "late".
        assert_eq!(next_availability_check(&pods, 10, at(14), at(23)), Some(Duration::ZERO));
        assert_eq!(next_availability_check(&pods, 10, at(40), at(40)), None, "all available");
        assert_eq!(next_availability_check(&[], 10, at(14), at(14)), None);
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
        assert_eq!(availability_requeue(&rs, &pods, at(14), at(14)), Some(Duration::from_secs(8)));
        let no_candidate = [pod("c", "True", None)];
        assert_eq!(
            availability_requeue(&rs, &no_candidate, at(14), at(14)),
            Some(Duration::from_secs(10)),
            "minReadySeconds when no pod gives a time"
        );
        let settled = replica_set(10, json!({"replicas": 3, "readyReplicas": 2, "availableReplicas": 2}));
        assert_eq!(availability_requeue(&settled, &pods, at(14), at(14)), None, "ready == available");
        assert_eq!(availability_requeue(&replica_set(0, pending), &pods, at(14), at(14)), None, "no minReadySeconds");
    }
}
