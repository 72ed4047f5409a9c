//! When an owner with `minReadySeconds` should look at its pods again: upstream's
//! `FindMinNextPodAvailabilityCheck` (`pkg/controller/controller_utils.go`, v1.35+), with which
//! the ReplicaSet and StatefulSet controllers requeue exactly when the next ready pod becomes
//! available, where v1.33 waited a whole `minReadySeconds` (plus a second).

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use crate::apimachinery::clock::Clock;
use crate::apimachinery::pod::{PodFields, is_pod_ready, ready_since};

/// `nextPodAvailabilityCheck`: how long after `now` the pod will have been ready for
/// `min_ready_seconds` (counted from its Ready condition's `lastTransitionTime`). None when it is
/// not ready, has no transition time, `min_ready_seconds` is not positive, or that time is not
/// after `now`.
pub fn next_pod_availability_check<P: PodFields + ?Sized>(
    pod: &P,
    min_ready_seconds: i32,
    now: Timestamp,
) -> Option<Duration> {
    if !is_pod_ready(pod) || min_ready_seconds <= 0 {
        return None;
    }
    let since = ready_since(pod)?;
    let available_at = since.checked_add(SignedDuration::from_secs(i64::from(min_ready_seconds))).ok()?;
    let wait = now.duration_until(available_at);
    (wait > SignedDuration::ZERO).then(|| wait.unsigned_abs())
}

/// `findMinNextPodAvailabilitySimpleCheck`: the soonest [`next_pod_availability_check`] over
/// `pods`, and the first pod that has it.
fn find_min_next_pod_availability_simple_check<'a, P: PodFields + 'a>(
    pods: impl IntoIterator<Item = &'a P>,
    min_ready_seconds: i32,
    now: Timestamp,
) -> Option<(Duration, &'a P)> {
    let mut soonest: Option<(Duration, &P)> = None;
    for pod in pods {
        if let Some(next) = next_pod_availability_check(pod, min_ready_seconds, now)
            && soonest.is_none_or(|(min, _)| next < min)
        {
            soonest = Some((next, pod));
        }
    }
    soonest
}

/// `FindMinNextPodAvailabilityCheck`: when to check the pods' availability again, for an owner
/// whose status was computed at `last_owner_status_evaluation`. The pod that becomes available
/// soonest after that evaluation (so that none is missed) is then measured against the clock's
/// current time; if its moment has passed meanwhile, the answer is zero (check now). None when
/// no pod is waiting to become available.
pub fn find_min_next_pod_availability_check<'a, P: PodFields + 'a>(
    pods: impl IntoIterator<Item = &'a P>,
    min_ready_seconds: i32,
    last_owner_status_evaluation: Timestamp,
    clock: &dyn Clock,
) -> Option<Duration> {
    let (_, pod) = find_min_next_pod_availability_simple_check(pods, min_ready_seconds, last_owner_status_evaluation)?;
    Some(next_pod_availability_check(pod, min_ready_seconds, clock.wall()).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use k8s_openapi::api::core::v1::Pod;

    use super::*;
    use crate::apimachinery::clock::FakeClock;
    use crate::apimachinery::pod::fixtures::at;

    fn pod(ready: &str, since: Option<i64>) -> Pod {
        let mut condition = json!({"type": "Ready", "status": ready});
        if let Some(since) = since {
            condition["lastTransitionTime"] = json!(at(since).to_string());
        }
        serde_json::from_value(json!({"metadata": {"name": "p"}, "status": {"conditions": [condition]}}))
            .expect("a pod")
    }

    fn clock_at(seconds: i64, nanos: i32) -> FakeClock {
        FakeClock::at(Timestamp::new(seconds, nanos).expect("a time"))
    }

    #[test]
    fn the_next_check_is_when_the_pod_has_been_ready_long_enough() {
        let ready = pod("True", Some(100));
        assert_eq!(next_pod_availability_check(&ready, 10, at(104)), Some(Duration::from_secs(6)));
        let now = Timestamp::new(109, 250_000_000).expect("a time");
        assert_eq!(next_pod_availability_check(&ready, 10, now), Some(Duration::from_millis(750)));
        // At the boundary the pod is available: nothing left to wait for.
        assert_eq!(next_pod_availability_check(&ready, 10, at(110)), None);
        assert_eq!(next_pod_availability_check(&ready, 10, at(111)), None);
        assert_eq!(next_pod_availability_check(&ready, 0, at(104)), None);
        assert_eq!(next_pod_availability_check(&pod("False", Some(100)), 10, at(104)), None);
        assert_eq!(next_pod_availability_check(&pod("True", None), 10, at(104)), None);
    }

    #[test]
    fn the_soonest_pod_is_measured_again_with_the_clock() {
        let pods = [pod("True", Some(100)), pod("True", Some(95)), pod("False", Some(90)), pod("True", Some(80))];
        // At 104 the pod ready since 95 is the soonest (at 105); by the clock (104.5) half a
        // second is left.
        let found = find_min_next_pod_availability_check(&pods, 10, at(104), &clock_at(104, 500_000_000));
        assert_eq!(found, Some(Duration::from_millis(500)));
        // Its moment passed since the evaluation: check at once.
        assert_eq!(find_min_next_pod_availability_check(&pods, 10, at(104), &clock_at(106, 0)), Some(Duration::ZERO));
        // Nobody waits: the pods are all available or not ready.
        assert_eq!(find_min_next_pod_availability_check(&pods, 10, at(120), &clock_at(120, 0)), None);
        assert_eq!(find_min_next_pod_availability_check(&pods, 0, at(104), &clock_at(104, 0)), None);
        assert_eq!(find_min_next_pod_availability_check::<Pod>(&[], 10, at(104), &clock_at(104, 0)), None);
    }
}
