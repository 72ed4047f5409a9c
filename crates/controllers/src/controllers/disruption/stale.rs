//! The stale `DisruptionTarget` condition, after upstream's
//! `nonTerminatingPodHasStaleDisruptionCondition`: a pod marked for disruption (by the Eviction
//! API, the taint manager, preemption …) that was not deleted within the timeout gets the
//! condition set back to False.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};

use crate::apimachinery::pod::{observed_generation, phase, update_pod_condition};

/// `v1.DisruptionTarget`.
const DISRUPTION_TARGET: &str = "DisruptionTarget";
/// `v1.PodReasonTerminationByKubelet`.
const TERMINATION_BY_KUBELET: &str = "TerminationByKubelet";

/// How long until the pod's `DisruptionTarget` condition is stale (zero: it is), or `None` when
/// it has none to clean: not True, set by the kubelet (which may take long to terminate a pod),
/// on a pod being deleted or already finished.
pub fn stale_disruption_wait(pod: &Pod, timeout: Duration, now: Timestamp) -> Option<Duration> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let condition = pod.status.as_ref()?.conditions.iter().flatten().find(|c| c.type_ == DISRUPTION_TARGET)?;
    let terminal = matches!(phase(pod), "Succeeded" | "Failed");
    if condition.status != "True" || condition.reason.as_deref() == Some(TERMINATION_BY_KUBELET) || terminal {
        return None;
    }
    // A condition without a time is as old as Go's zero time: stale.
    let Some(since) = condition.last_transition_time.as_ref().map(|t| t.0) else { return Some(Duration::ZERO) };
    let elapsed = now.duration_since(since);
    let elapsed = if elapsed.is_negative() { Duration::ZERO } else { elapsed.unsigned_abs() };
    Some(timeout.saturating_sub(elapsed))
}

/// The pod's condition set to False (no reason, no message), as `UpdatePodCondition` does, with
/// the pod's generation as `observedGeneration` (v1.36: PodObservedGenerationTracking is GA);
/// false when it already was False, whatever its `observedGeneration`.
pub fn reset_disruption_target(pod: &mut Pod, now: Timestamp) -> bool {
    let condition = PodCondition {
        type_: DISRUPTION_TARGET.to_string(),
        observed_generation: observed_generation(pod),
        status: "False".to_string(),
        ..PodCondition::default()
    };
    update_pod_condition(pod.status.get_or_insert_with(PodStatus::default), condition, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const TIMEOUT: Duration = Duration::from_secs(120);

    fn at(s: &str) -> Timestamp {
        s.parse().expect("a timestamp")
    }

    fn pod(phase: &str, condition: Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"},
            "status": {"phase": phase, "conditions": [condition]}}))
        .expect("a pod")
    }

    fn target(status: &str, reason: &str) -> Value {
        json!({"type": "DisruptionTarget", "status": status, "reason": reason, "message": "Eviction API: evicting",
            "lastTransitionTime": "2026-11-26T10:00:00Z"})
    }

    #[test]
    fn only_a_true_condition_not_from_the_kubelet_on_a_live_pod_goes_stale() {
        let now = at("2026-11-26T10:01:30Z");
        let evicted = pod("Running", target("True", "EvictionByEvictionAPI"));
        assert_eq!(stale_disruption_wait(&evicted, TIMEOUT, now), Some(Duration::from_secs(30)));
        assert_eq!(stale_disruption_wait(&evicted, TIMEOUT, at("2026-11-26T10:05:00Z")), Some(Duration::ZERO));
        assert_eq!(stale_disruption_wait(&pod("Running", target("True", "TerminationByKubelet")), TIMEOUT, now), None);
        assert_eq!(
            stale_disruption_wait(&pod("Running", target("False", "EvictionByEvictionAPI")), TIMEOUT, now),
            None
        );
        assert_eq!(stale_disruption_wait(&pod("Failed", target("True", "EvictionByEvictionAPI")), TIMEOUT, now), None);
        assert_eq!(
            stale_disruption_wait(&pod("Running", json!({"type": "Ready", "status": "True"})), TIMEOUT, now),
            None
        );
        let mut deleting = evicted.clone();
        deleting.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now));
        assert_eq!(stale_disruption_wait(&deleting, TIMEOUT, now), None);
    }

    #[test]
    fn the_reset_condition_is_false_without_reason_or_message() {
        let mut evicted = pod("Running", target("True", "EvictionByEvictionAPI"));
        evicted.metadata.generation = Some(3);
        let now = at("2026-11-26T10:03:00Z");
        assert!(reset_disruption_target(&mut evicted, now));
        let condition = &evicted.status.as_ref().and_then(|s| s.conditions.as_ref()).expect("conditions")[0];
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_deref(), condition.message.as_deref()),
            ("False", None, None)
        );
        assert_eq!(condition.last_transition_time.as_ref().map(|t| t.0), Some(now));
        assert_eq!(condition.observed_generation, Some(3), "the pod's generation");
        evicted.metadata.generation = Some(4);
        assert!(!reset_disruption_target(&mut evicted, at("2026-11-26T10:04:00Z")), "already False");
    }
}
