//! Pod helpers of `k8s.io/kubernetes/pkg/api/v1/pod` (readiness, availability, conditions) and
//! `IsPodActive` of `pkg/controller`, on typed pods. The sandbox, which holds pods as JSON,
//! reads the same fields with its own few lines.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// `status.phase`, empty when unset.
pub fn phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default()
}

/// `IsPodActive`: not Succeeded, not Failed and not being deleted.
pub fn is_pod_active(pod: &Pod) -> bool {
    !matches!(phase(pod), "Succeeded" | "Failed") && pod.metadata.deletion_timestamp.is_none()
}

/// `GetPodReadyCondition`: the first `Ready` condition.
pub fn get_pod_ready_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status.as_ref()?.conditions.iter().flatten().find(|c| c.type_ == "Ready")
}

/// `IsPodReady`: the pod's Ready condition is True.
pub fn is_pod_ready(pod: &Pod) -> bool {
    get_pod_ready_condition(pod).is_some_and(|c| c.status == "True")
}

/// `IsPodAvailable`: ready, and either `min_ready_seconds` is 0 or the Ready condition's
/// `lastTransitionTime + min_ready_seconds <= now`. v1.36 made the boundary inclusive (v1.33
/// required the sum to be before `now`), so a pod is available at exactly the second it is
/// due, the time the controllers' availability requeues aim at.
pub fn is_pod_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    if !is_pod_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    let since = get_pod_ready_condition(pod).and_then(|c| c.last_transition_time.as_ref()).map(|t| t.0);
    let due = since.and_then(|t| t.checked_add(SignedDuration::from_secs(i64::from(min_ready_seconds))).ok());
    due.is_some_and(|due| due <= now)
}

/// `CalculatePodConditionObservedGeneration` and `CalculatePodStatusObservedGeneration`: with
/// PodObservedGenerationTracking GA and locked on since v1.35 (it was alpha and off in v1.33),
/// the `observedGeneration` a controller writes in a pod condition or the pod status is the
/// pod's `metadata.generation`; `None` for 0, which Go's `omitempty` leaves out.
pub fn observed_generation(pod: &Pod) -> Option<i64> {
    pod.metadata.generation.filter(|generation| *generation != 0)
}

/// `UpdatePodCondition`: sets `condition` in `status`, keeping the old `lastTransitionTime`
/// when the condition's status did not change, and `now` otherwise. Returns whether anything
/// changed.
pub fn update_pod_condition(status: &mut PodStatus, mut condition: PodCondition, now: Timestamp) -> bool {
    condition.last_transition_time = Some(Time(now));
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let Some(old) = conditions.iter_mut().find(|c| c.type_ == condition.type_) else {
        conditions.push(condition);
        return true;
    };
    if condition.status == old.status {
        condition.last_transition_time = old.last_transition_time.clone();
    }
    let same = condition.status == old.status
        && condition.reason == old.reason
        && condition.message == old.message
        && condition.last_probe_time == old.last_probe_time
        && condition.last_transition_time == old.last_transition_time;
    *old = condition;
    !same
}

/// Pod conditions and times for unit tests here and in the controllers.
#[cfg(test)]
pub(crate) mod fixtures {
    use jiff::Timestamp;
    use k8s_openapi::api::core::v1::PodCondition;

    /// A condition of `type_` in `status` for `reason`.
    pub(crate) fn condition(type_: &str, status: &str, reason: &str) -> PodCondition {
        PodCondition {
            type_: type_.into(),
            status: status.into(),
            reason: Some(reason.into()),
            ..PodCondition::default()
        }
    }

    /// `seconds` after the epoch.
    pub(crate) fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).expect("a time")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::fixtures::{at, condition};
    use super::*;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "status": status})).expect("a pod")
    }

    #[test]
    fn update_pod_condition_keeps_the_transition_time_when_the_status_stays() {
        let mut status = PodStatus::default();
        assert!(update_pod_condition(&mut status, condition("DisruptionTarget", "True", "A"), at(10)));
        assert!(!update_pod_condition(&mut status, condition("DisruptionTarget", "True", "A"), at(20)));
        let conditions = status.conditions.clone().unwrap_or_default();
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].last_transition_time, Some(Time(at(10))));
        assert!(update_pod_condition(&mut status, condition("DisruptionTarget", "True", "B"), at(30)));
        assert_eq!(status.conditions.as_ref().unwrap()[0].last_transition_time, Some(Time(at(10))));
        assert!(update_pod_condition(&mut status, condition("DisruptionTarget", "False", "B"), at(40)));
        assert_eq!(status.conditions.as_ref().unwrap()[0].last_transition_time, Some(Time(at(40))));
    }

    #[test]
    fn the_observed_generation_is_the_pods_generation_when_set() {
        let mut generated = pod(json!({}));
        assert_eq!(observed_generation(&generated), None);
        generated.metadata.generation = Some(0);
        assert_eq!(observed_generation(&generated), None, "omitempty");
        generated.metadata.generation = Some(3);
        assert_eq!(observed_generation(&generated), Some(3));
    }

    #[test]
    fn readiness_availability_and_activity() {
        let ready = pod(json!({"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "1970-01-01T00:00:10Z"}]}));
        assert!(is_pod_ready(&ready));
        assert!(is_pod_available(&ready, 0, at(10)));
        assert!(!is_pod_available(&ready, 5, at(14)), "ready for 4 s");
        let just_before: Timestamp = "1970-01-01T00:00:14.999Z".parse().expect("a time");
        assert!(!is_pod_available(&ready, 5, just_before), "not before the second it is due");
        assert!(is_pod_available(&ready, 5, at(15)), "available once ready for exactly 5 s (v1.36: <=)");
        assert!(is_pod_available(&ready, 5, at(16)));
        let never_transitioned = pod(json!({"conditions": [{"type": "Ready", "status": "True"}]}));
        assert!(is_pod_available(&never_transitioned, 0, at(0)));
        assert!(!is_pod_available(&never_transitioned, 1, at(100)), "no lastTransitionTime: never due");
        assert!(is_pod_active(&ready));
        let unready = pod(json!({"phase": "Succeeded", "conditions": [{"type": "Ready", "status": "False"}]}));
        assert!(!is_pod_ready(&unready));
        assert!(!is_pod_active(&unready));
        assert_eq!(phase(&pod(json!({}))), "");
    }
}
