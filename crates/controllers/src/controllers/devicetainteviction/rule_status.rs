//! The `EvictionInProgress` condition of a DeviceTaintRule's status, after the condition part of
//! upstream v1.36's `maybeUpdateRuleStatus` (only with the `DRADeviceTaintRules` gate).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::resource::v1beta2::DeviceTaintRule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::tracker::{NO_EXECUTE, RULE_STATUS_PERIOD};

/// `resourcebeta.DeviceTaintConditionEvictionInProgress`.
pub const EVICTION_IN_PROGRESS: &str = "EvictionInProgress";

/// `resourcebeta.DeviceTaintEffectNone`.
pub const NONE_EFFECT: &str = "None";

/// What the condition reports, counted under the controller's lock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Devices of the newest slices the rule selects (`None` effect only).
    pub tainted_slice_devices: i64,
    /// Allocated devices the rule selects (`None` effect only).
    pub tainted_allocated_devices: i64,
    /// Pods not being deleted whose eviction the rule causes (or would cause).
    pub pending_pods: i64,
    /// The namespaces of those pods.
    pub pending_namespaces: i64,
    /// Pods the rule evicted since the controller started.
    pub evicted_pods: i64,
}

/// The rule's current `EvictionInProgress` condition, if it has one.
pub fn existing_condition(rule: &DeviceTaintRule) -> Option<&Condition> {
    let conditions = rule.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    conditions.iter().find(|c| c.type_ == EVICTION_IN_PROGRESS)
}

/// How long to wait before the next update: a condition of the rule's generation is updated at
/// most every [`RULE_STATUS_PERIOD`], counted from its `lastTransitionTime` (which every change
/// bumps). `None`: update now.
pub fn wait_before_update(rule: &DeviceTaintRule, now: Timestamp) -> Option<Duration> {
    let existing = existing_condition(rule)?;
    if existing.observed_generation != rule.metadata.generation {
        return None;
    }
    let since = now.duration_since(existing.last_transition_time.0);
    let period = jiff::SignedDuration::try_from(RULE_STATUS_PERIOD).ok()?;
    (since < period).then(|| Duration::try_from(period - since).unwrap_or_default())
}

/// `n` of `one`/`many` (`many` has a `%d` for `n`).
fn plural(n: i64, one: &str, many: &str) -> String {
    if n == 1 { one.to_string() } else { many.replace("%d", &n.to_string()) }
}

/// The condition the rule should have, with the existing condition's `lastTransitionTime`
/// (`None`: the zero time) so that it compares equal when nothing else changed.
pub fn desired_condition(rule: &DeviceTaintRule, counts: &Counts, existing: Option<&Condition>) -> Condition {
    let effect = rule.spec.taint.effect.as_str();
    let (status, reason, mut message) = match effect {
        NO_EXECUTE if counts.pending_pods > 0 => {
            let message =
                plural(counts.pending_pods, "1 pod needs to be evicted in ", "%d pods need to be evicted in ")
                    + &plural(counts.pending_namespaces, "1 namespace.", "%d different namespaces.");
            ("True", "PodsPendingEviction", message)
        }
        NO_EXECUTE if counts.evicted_pods > 0 => ("False", "Completed", String::new()),
        NO_EXECUTE => ("False", "NotStarted", String::new()),
        NONE_EFFECT => {
            let message =
                plural(
                    counts.tainted_slice_devices,
                    "1 published device selected. ",
                    "%d published devices selected. ",
                ) + &plural(
                    counts.tainted_allocated_devices,
                    "1 allocated device selected. ",
                    "%d allocated devices selected. ",
                ) + &plural(counts.pending_pods, "1 pod would be evicted in ", "%d pods would be evicted in ")
                    + &plural(counts.pending_namespaces, "1 namespace ", "%d different namespaces ")
                    + "if the effect was NoExecute. This information will not be updated again. Recreate the \
                   DeviceTaintRule to trigger an update.";
            ("False", "NoEffect", message)
        }
        _ => ("False", "OtherEffect", "Eviction only happens for the NoExecute effect.".to_string()),
    };
    if counts.evicted_pods > 0 {
        if !message.is_empty() {
            message.push(' ');
        }
        message += &plural(counts.evicted_pods, "1 pod ", "%d pods ");
        message += "evicted since starting the controller.";
    }
    Condition {
        type_: EVICTION_IN_PROGRESS.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message,
        observed_generation: rule.metadata.generation,
        last_transition_time: existing.map(|c| c.last_transition_time.clone()).unwrap_or(Time(Timestamp::UNIX_EPOCH)),
    }
}

/// The server-side apply of the condition (`ApplyStatus` of a `DeviceTaintRule` apply
/// configuration with the rule's UID, so that a replaced rule is not touched).
pub fn apply_patch(rule: &DeviceTaintRule, condition: &Condition) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {"name": rule.metadata.name, "uid": rule.metadata.uid},
        "status": {"conditions": [{
            "type": condition.type_,
            "status": condition.status,
            "reason": condition.reason,
            "message": condition.message,
            "observedGeneration": condition.observed_generation,
            "lastTransitionTime": condition.last_transition_time,
        }]},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(effect: &str, condition: Option<serde_json::Value>) -> DeviceTaintRule {
        serde_json::from_value(json!({
            "metadata": {"name": "r", "uid": "r1", "generation": 2},
            "spec": {"deviceSelector": {"driver": "d"}, "taint": {"key": "k", "effect": effect}},
            "status": {"conditions": condition.map(|c| vec![c])}
        }))
        .expect("a rule")
    }

    #[test]
    fn the_condition_reports_pending_and_evicted_pods() {
        let pending = Counts { pending_pods: 3, pending_namespaces: 1, evicted_pods: 1, ..Counts::default() };
        let condition = desired_condition(&rule("NoExecute", None), &pending, None);
        assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("True", "PodsPendingEviction"));
        assert_eq!(
            condition.message,
            "3 pods need to be evicted in 1 namespace. 1 pod evicted since starting the controller."
        );
        assert_eq!(condition.observed_generation, Some(2));
        let done = desired_condition(&rule("NoExecute", None), &Counts { evicted_pods: 2, ..Counts::default() }, None);
        assert_eq!(
            (done.reason.as_str(), done.message.as_str()),
            ("Completed", "2 pods evicted since starting the controller.")
        );
        let idle = desired_condition(&rule("NoExecute", None), &Counts::default(), None);
        assert_eq!((idle.reason.as_str(), idle.message.as_str()), ("NotStarted", ""));
    }

    #[test]
    fn a_rule_without_effect_reports_what_it_would_do() {
        let counts = Counts {
            tainted_slice_devices: 1,
            tainted_allocated_devices: 2,
            pending_pods: 1,
            pending_namespaces: 1,
            evicted_pods: 0,
        };
        let condition = desired_condition(&rule("None", None), &counts, None);
        assert_eq!(condition.reason, "NoEffect");
        assert_eq!(
            condition.message,
            "1 published device selected. 2 allocated devices selected. 1 pod would be evicted in 1 namespace if the \
             effect was NoExecute. This information will not be updated again. Recreate the DeviceTaintRule to trigger \
             an update."
        );
        let other = desired_condition(&rule("NoSchedule", None), &Counts::default(), None);
        assert_eq!(
            (other.reason.as_str(), other.message.as_str()),
            ("OtherEffect", "Eviction only happens for the NoExecute effect.")
        );
    }

    #[test]
    fn updates_of_the_same_generation_wait_for_the_period() {
        let now: Timestamp = "2026-01-01T00:00:04Z".parse().expect("time");
        let condition = |generation: i64| {
            json!({"type": EVICTION_IN_PROGRESS, "status": "False", "reason": "NotStarted", "message": "",
                   "observedGeneration": generation, "lastTransitionTime": "2026-01-01T00:00:00Z"})
        };
        assert_eq!(wait_before_update(&rule("NoExecute", Some(condition(2))), now), Some(Duration::from_secs(6)));
        assert_eq!(wait_before_update(&rule("NoExecute", Some(condition(1))), now), None, "a new generation");
        assert_eq!(wait_before_update(&rule("NoExecute", None), now), None);
        let later: Timestamp = "2026-01-01T00:00:10Z".parse().expect("time");
        assert_eq!(wait_before_update(&rule("NoExecute", Some(condition(2))), later), None);
        // Unchanged, the desired condition equals the existing one.
        let existing = rule("NoExecute", Some(condition(2)));
        let desired = desired_condition(&existing, &Counts::default(), existing_condition(&existing));
        assert_eq!(Some(&desired), existing_condition(&existing));
    }
}
