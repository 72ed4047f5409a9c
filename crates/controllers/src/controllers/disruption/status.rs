//! The arithmetic of a budget's status, after upstream's `countHealthyPods`,
//! `buildDisruptedPodMap`, `updatePdbStatus`, `failSafe` and component-helpers'
//! `UpdateDisruptionAllowedCondition` / `ConditionsAreUpToDate`: pure functions of the budget,
//! its pods and the time.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::apimachinery::pod::is_pod_ready;

/// `policy.DisruptionAllowedCondition`.
pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";
/// `policy.SyncFailedReason`.
pub const SYNC_FAILED: &str = "SyncFailed";
/// `policy.SufficientPodsReason`.
pub const SUFFICIENT_PODS: &str = "SufficientPods";
/// `policy.InsufficientPodsReason`.
pub const INSUFFICIENT_PODS: &str = "InsufficientPods";

/// `t + d` (saturating: a timeout is never so long that it overflows).
fn plus(t: Timestamp, d: Duration) -> Timestamp {
    t.saturating_add(SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)).unwrap_or(t)
}

/// `countHealthyPods`: ready pods, not being deleted, not disrupted within `timeout` of `now`.
pub fn count_healthy_pods(pods: &[&Pod], disrupted: &BTreeMap<String, Time>, now: Timestamp, timeout: Duration) -> i32 {
    let counted = pods.iter().filter(|pod| {
        if pod.metadata.deletion_timestamp.is_some() {
            return false;
        }
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        if disrupted.get(name).is_some_and(|at| plus(at.0, timeout) > now) {
            return false;
        }
        is_pod_ready(pod)
    });
    counted.count() as i32
}

/// What `buildDisruptedPodMap` finds.
#[derive(Debug, Default, PartialEq)]
pub struct DisruptedPods {
    /// The entries kept: pods still there, not yet being deleted, disrupted within the timeout.
    pub kept: BTreeMap<String, Time>,
    /// When the first kept entry runs out (the budget is synced again then).
    pub recheck: Option<Timestamp>,
    /// Pods whose entry ran out though they were not deleted (a `NotDeleted` Event each).
    pub not_deleted: Vec<String>,
}

/// `buildDisruptedPodMap`: the budget's `disruptedPods` without the pods gone, being deleted or
/// disrupted more than `timeout` before `now`.
pub fn build_disrupted_pod_map(
    pods: &[&Pod],
    pdb: &PodDisruptionBudget,
    now: Timestamp,
    timeout: Duration,
) -> DisruptedPods {
    let mut result = DisruptedPods::default();
    let Some(disrupted) = pdb.status.as_ref().and_then(|s| s.disrupted_pods.as_ref()) else { return result };
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(at) = disrupted.get(&name) else { continue };
        let expected_deletion = plus(at.0, timeout);
        if expected_deletion < now {
            result.not_deleted.push(name);
        } else {
            result.recheck = Some(result.recheck.map_or(expected_deletion, |r| r.min(expected_deletion)));
            result.kept.insert(name, at.clone());
        }
    }
    result
}

/// `apimeta.SetStatusCondition`: adds or updates the condition of its type; the transition time
/// moves only when the status changes.
pub fn set_status_condition(conditions: &mut Vec<Condition>, new: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        None => conditions.push(new),
        Some(existing) => {
            if existing.status != new.status {
                existing.status = new.status;
                existing.last_transition_time = new.last_transition_time;
            }
            existing.reason = new.reason;
            existing.message = new.message;
            existing.observed_generation = new.observed_generation;
        }
    }
}

/// A `DisruptionAllowed` condition; an observed generation of 0 is left out, as Go's `omitempty`.
fn disruption_allowed(status: &str, reason: &str, message: String, observed_generation: Option<i64>) -> Condition {
    Condition {
        type_: DISRUPTION_ALLOWED.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message,
        observed_generation: observed_generation.filter(|g| *g != 0),
        last_transition_time: Time(Timestamp::now()),
    }
}

/// `UpdateDisruptionAllowedCondition`.
pub fn update_disruption_allowed_condition(status: &mut PodDisruptionBudgetStatus) {
    let condition = if status.disruptions_allowed.unwrap_or(0) > 0 {
        disruption_allowed("True", SUFFICIENT_PODS, String::new(), status.observed_generation)
    } else {
        disruption_allowed("False", INSUFFICIENT_PODS, String::new(), status.observed_generation)
    };
    set_status_condition(status.conditions.get_or_insert_with(Vec::new), condition);
}

/// `ConditionsAreUpToDate`.
pub fn conditions_are_up_to_date(pdb: &PodDisruptionBudget) -> bool {
    let status = pdb.status.clone().unwrap_or_default();
    let Some(condition) = status.conditions.iter().flatten().find(|c| c.type_ == DISRUPTION_ALLOWED) else {
        return false;
    };
    if status.observed_generation.unwrap_or(0) != pdb.metadata.generation.unwrap_or(0) {
        return false;
    }
    if status.disruptions_allowed.unwrap_or(0) > 0 {
        condition.status == "True" && condition.reason == SUFFICIENT_PODS
    } else {
        condition.status == "False" && condition.reason == INSUFFICIENT_PODS
    }
}

/// The counts a sync computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// `currentHealthy`.
    pub current_healthy: i32,
    /// `desiredHealthy`.
    pub desired_healthy: i32,
    /// `expectedPods`.
    pub expected: i32,
}

/// `updatePdbStatus` without the write: the new status, or `None` when the budget's is current.
/// No disruption is allowed while no pod is expected, so that a budget whose first pods appear
/// before it is synced is safe.
pub fn new_status(
    pdb: &PodDisruptionBudget,
    counts: Counts,
    disrupted: BTreeMap<String, Time>,
) -> Option<PodDisruptionBudgetStatus> {
    let mut allowed = counts.current_healthy - counts.desired_healthy;
    if counts.expected <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let old = pdb.status.clone().unwrap_or_default();
    let generation = pdb.metadata.generation.unwrap_or(0);
    // Semantic equality: an empty map is a missing one.
    let old_disrupted = old.disrupted_pods.clone().unwrap_or_default();
    if old.current_healthy.unwrap_or(0) == counts.current_healthy
        && old.desired_healthy.unwrap_or(0) == counts.desired_healthy
        && old.expected_pods.unwrap_or(0) == counts.expected
        && old.disruptions_allowed.unwrap_or(0) == allowed
        && old_disrupted == disrupted
        && old.observed_generation.unwrap_or(0) == generation
        && conditions_are_up_to_date(pdb)
    {
        return None;
    }
    let mut status = PodDisruptionBudgetStatus {
        // Written even when 0: upstream's Go fields have no `omitempty`.
        current_healthy: Some(counts.current_healthy),
        desired_healthy: Some(counts.desired_healthy),
        expected_pods: Some(counts.expected),
        disruptions_allowed: Some(allowed),
        disrupted_pods: (!disrupted.is_empty()).then_some(disrupted),
        observed_generation: (generation != 0).then_some(generation),
        conditions: old.conditions,
    };
    update_disruption_allowed_condition(&mut status);
    Some(status)
}

/// `failSafe`'s status: no disruption allowed, `DisruptionAllowed` False for `SyncFailed` with
/// the error, the rest as it was.
pub fn fail_safe_status(pdb: &PodDisruptionBudget, error: &str) -> PodDisruptionBudgetStatus {
    let mut status = pdb.status.clone().unwrap_or_default();
    status.disruptions_allowed = Some(0);
    let condition = disruption_allowed("False", SYNC_FAILED, error.to_string(), status.observed_generation);
    set_status_condition(status.conditions.get_or_insert_with(Vec::new), condition);
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const TIMEOUT: Duration = Duration::from_secs(120);

    fn at(s: &str) -> Timestamp {
        s.parse().expect("a timestamp")
    }

    fn pod(name: &str, ready: bool, deleting: bool) -> Pod {
        let mut pod: Pod = serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns"},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}}))
        .expect("a pod");
        if deleting {
            pod.metadata.deletion_timestamp = Some(Time(at("2026-11-26T10:00:00Z")));
        }
        pod
    }

    fn pdb(generation: i64, status: Value) -> PodDisruptionBudget {
        serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "ns", "generation": generation},
            "spec": {"minAvailable": 1}, "status": status}))
        .expect("a budget")
    }

    #[test]
    fn healthy_pods_are_ready_not_deleting_and_not_recently_disrupted() {
        let (a, b, c, d) = (pod("a", true, false), pod("b", false, false), pod("c", true, true), pod("d", true, false));
        let now = at("2026-11-26T10:05:00Z");
        let disrupted = BTreeMap::from([("d".to_string(), Time(at("2026-11-26T10:04:00Z")))]);
        assert_eq!(count_healthy_pods(&[&a, &b, &c, &d], &disrupted, now, TIMEOUT), 1);
        // Disrupted more than the timeout ago: counted again.
        let old = BTreeMap::from([("d".to_string(), Time(at("2026-11-26T10:02:00Z")))]);
        assert_eq!(count_healthy_pods(&[&a, &b, &c, &d], &old, now, TIMEOUT), 2);
    }

    #[test]
    fn disrupted_pods_expire_after_the_deletion_timeout() {
        let budget = pdb(
            1,
            json!({"disruptedPods": {
            "recent": "2026-11-26T10:04:00Z", "later": "2026-11-26T10:04:30Z", "stale": "2026-11-26T10:00:00Z",
            "deleting": "2026-11-26T10:04:00Z", "gone": "2026-11-26T10:04:00Z"}}),
        );
        let pods = [
            pod("recent", true, false),
            pod("later", true, false),
            pod("stale", true, false),
            pod("deleting", true, true),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let found = build_disrupted_pod_map(&refs, &budget, at("2026-11-26T10:05:00Z"), TIMEOUT);
        assert_eq!(found.kept.keys().collect::<Vec<_>>(), ["later", "recent"]);
        assert_eq!(found.recheck, Some(at("2026-11-26T10:06:00Z")), "the earliest expiry");
        assert_eq!(found.not_deleted, ["stale"]);
        let none = build_disrupted_pod_map(&refs, &pdb(1, json!({})), at("2026-11-26T10:05:00Z"), TIMEOUT);
        assert_eq!(none, DisruptedPods::default());
    }

    #[test]
    fn the_status_allows_what_is_healthy_beyond_the_desired() {
        let budget = pdb(2, json!({}));
        let status =
            new_status(&budget, Counts { current_healthy: 3, desired_healthy: 1, expected: 3 }, BTreeMap::new())
                .expect("a new status");
        assert_eq!((status.disruptions_allowed, status.observed_generation), (Some(2), Some(2)));
        assert_eq!(status.disrupted_pods, None, "an empty map is left out");
        let condition = &status.conditions.as_ref().expect("conditions")[0];
        assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("True", SUFFICIENT_PODS));
        assert_eq!((condition.message.as_str(), condition.observed_generation), ("", Some(2)));

        // Written back, it is current: nothing to write.
        let mut written = budget.clone();
        written.status = Some(status);
        assert_eq!(
            new_status(&written, Counts { current_healthy: 3, desired_healthy: 1, expected: 3 }, BTreeMap::new()),
            None
        );

        // Nothing expected: nothing allowed, whatever is healthy.
        let none =
            new_status(&written, Counts { current_healthy: 3, desired_healthy: 1, expected: 0 }, BTreeMap::new())
                .expect("changed");
        assert_eq!(none.disruptions_allowed, Some(0));
        let condition = &none.conditions.as_ref().expect("conditions")[0];
        assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("False", INSUFFICIENT_PODS));
        assert_eq!(none.conditions.as_ref().map(Vec::len), Some(1), "the condition is updated in place");
    }

    #[test]
    fn a_new_generation_or_a_stale_condition_is_written() {
        let current = json!({"observedGeneration": 1, "disruptionsAllowed": 0, "conditions": [{"type": "DisruptionAllowed",
            "status": "False", "reason": "SyncFailed", "message": "boom", "lastTransitionTime": "2026-11-26T10:00:00Z"}]});
        let counts = Counts { current_healthy: 0, desired_healthy: 0, expected: 0 };
        assert!(!conditions_are_up_to_date(&pdb(1, current.clone())), "SyncFailed is not InsufficientPods");
        let fixed = new_status(&pdb(1, current), counts, BTreeMap::new()).expect("rewritten");
        let condition = &fixed.conditions.as_ref().expect("conditions")[0];
        assert_eq!((condition.reason.as_str(), condition.message.as_str()), (INSUFFICIENT_PODS, ""));
        assert_eq!(condition.last_transition_time.0, at("2026-11-26T10:00:00Z"), "same status: time kept");
        let good = json!({"observedGeneration": 1, "conditions": [{"type": "DisruptionAllowed", "status": "False",
            "reason": "InsufficientPods", "message": "", "lastTransitionTime": "2026-11-26T10:00:00Z"}]});
        assert!(conditions_are_up_to_date(&pdb(1, good.clone())));
        assert!(!conditions_are_up_to_date(&pdb(2, good)), "a newer generation");
    }

    #[test]
    fn fail_safe_allows_nothing_and_says_why() {
        let budget = pdb(
            3,
            json!({"observedGeneration": 2, "disruptionsAllowed": 2, "currentHealthy": 3, "conditions": [
            {"type": "DisruptionAllowed", "status": "True", "reason": "SufficientPods", "message": "",
             "observedGeneration": 2, "lastTransitionTime": "2026-11-26T10:00:00Z"}]}),
        );
        let status = fail_safe_status(&budget, "found no controllers for pod \"a\"");
        assert_eq!(
            (status.disruptions_allowed, status.current_healthy, status.observed_generation),
            (Some(0), Some(3), Some(2))
        );
        let condition = &status.conditions.as_ref().expect("conditions")[0];
        assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("False", SYNC_FAILED));
        assert_eq!(condition.message, "found no controllers for pod \"a\"");
        assert_eq!(condition.observed_generation, Some(2), "the generation last observed, not the budget's");
        assert_ne!(condition.last_transition_time.0, at("2026-11-26T10:00:00Z"), "the status changed");
    }
}
