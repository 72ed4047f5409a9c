//! `spec.podFailurePolicy` (`pod_failure_policy.go`) and `spec.successPolicy`
//! (`success_policy.go`).

use k8s_openapi::api::batch::v1::{PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement, SuccessPolicy};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use super::indexes::Intervals;

/// What the pod failure policy says of a failed pod (`matchPodFailurePolicy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyMatch {
    /// The Job's failure message, for a `FailJob` rule.
    pub fail_job: Option<String>,
    /// Whether the failure counts against the backoff limit (not for `Ignore`).
    pub counts: bool,
    /// The action of the matching rule, if one matched.
    pub action: Option<&'static str>,
}

const NO_MATCH: PolicyMatch = PolicyMatch { fail_job: None, counts: true, action: None };

/// `matchPodFailurePolicy`: the first rule matching the pod decides.
pub fn match_pod_failure_policy(policy: Option<&PodFailurePolicy>, pod: &Pod) -> PolicyMatch {
    let Some(policy) = policy else { return NO_MATCH };
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    let name = pod.metadata.name.as_deref().unwrap_or("");
    for (index, rule) in policy.rules.iter().enumerate() {
        let matched = if let Some(requirement) = &rule.on_exit_codes {
            matching_container(pod, requirement).map(|c| {
                let code = c.state.as_ref().and_then(|s| s.terminated.as_ref()).map_or(0, |t| t.exit_code);
                format!(
                    "Container {} for pod {namespace}/{name} failed with exit code {code} matching {} rule at index {index}",
                    c.name, rule.action
                )
            })
        } else if let Some(patterns) = &rule.on_pod_conditions {
            let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
            conditions.into_iter().flatten().find_map(|condition| {
                patterns
                    .iter()
                    .any(|p| p.type_ == condition.type_ && p.status.as_deref().unwrap_or("True") == condition.status)
                    .then(|| {
                        format!(
                            "Pod {namespace}/{name} has condition {} matching {} rule at index {index}",
                            condition.type_, rule.action
                        )
                    })
            })
        } else {
            None
        };
        let Some(message) = matched else { continue };
        match rule.action.as_str() {
            "Ignore" => return PolicyMatch { fail_job: None, counts: false, action: Some("Ignore") },
            "FailIndex" => return PolicyMatch { fail_job: None, counts: true, action: Some("FailIndex") },
            "Count" => return PolicyMatch { fail_job: None, counts: true, action: Some("Count") },
            "FailJob" => return PolicyMatch { fail_job: Some(message), counts: true, action: Some("FailJob") },
            _ => {}
        }
    }
    NO_MATCH
}

/// `matchOnExitCodes`: the first terminated container (app containers, then init containers)
/// with a non-zero exit code the requirement matches.
fn matching_container<'p>(
    pod: &'p Pod,
    requirement: &PodFailurePolicyOnExitCodesRequirement,
) -> Option<&'p ContainerStatus> {
    let status = pod.status.as_ref()?;
    let lists = [&status.container_statuses, &status.init_container_statuses];
    lists.into_iter().flatten().find_map(|list| {
        list.iter().find(|c| {
            let Some(terminated) = c.state.as_ref().and_then(|s| s.terminated.as_ref()) else { return false };
            let name_matches = requirement.container_name.as_ref().is_none_or(|n| *n == c.name);
            let code = terminated.exit_code;
            name_matches
                && code != 0
                && match requirement.operator.as_str() {
                    "In" => requirement.values.contains(&code),
                    "NotIn" => !requirement.values.contains(&code),
                    _ => false,
                }
        })
    })
}

/// `matchSuccessPolicy`: the message of the first rule the succeeded indexes meet.
pub fn match_success_policy(policy: Option<&SuccessPolicy>, completions: i32, succeeded: &Intervals) -> Option<String> {
    let policy = policy?;
    if succeeded.is_empty() {
        return None;
    }
    for (index, rule) in policy.rules.iter().enumerate() {
        let met = if let Some(text) = &rule.succeeded_indexes {
            let required = Intervals::parse(text, completions);
            if required.is_empty() {
                continue;
            }
            let contained = overlap(&required, succeeded);
            contained == required.total() || rule.succeeded_count.is_some_and(|count| contained >= count)
        } else {
            rule.succeeded_count.is_some_and(|count| succeeded.total() >= count)
        };
        if met {
            return Some(format!("Matched rules at index {index}"));
        }
    }
    None
}

/// How many indexes of `required` are in `succeeded` (`matchSucceededIndexesRule`).
fn overlap(required: &Intervals, succeeded: &Intervals) -> i32 {
    let mut total = 0;
    for (a_first, a_last) in required.ranges() {
        for (b_first, b_last) in succeeded.ranges() {
            total += ((*a_last).min(*b_last) - (*a_first).max(*b_first) + 1).max(0);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn failed_pod(exit_code: i32, conditions: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "status": {"phase": "Failed", "conditions": conditions, "containerStatuses": [{
                "name": "main", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": exit_code}}}]}
        }))
        .expect("a pod")
    }

    fn policy(rules: serde_json::Value) -> PodFailurePolicy {
        serde_json::from_value(json!({"rules": rules})).expect("a policy")
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let rules = policy(json!([
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}},
            {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [1]}},
        ]));
        let disrupted = failed_pod(137, json!([{"type": "DisruptionTarget", "status": "True"}]));
        assert_eq!(match_pod_failure_policy(Some(&rules), &disrupted).action, Some("Ignore"));
        assert!(!match_pod_failure_policy(Some(&rules), &disrupted).counts);
        let fatal = match_pod_failure_policy(Some(&rules), &failed_pod(42, json!([])));
        assert_eq!(
            fatal.fail_job.as_deref(),
            Some("Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 1")
        );
        assert_eq!(match_pod_failure_policy(Some(&rules), &failed_pod(3, json!([]))).action, Some("Count"));
        assert_eq!(match_pod_failure_policy(Some(&rules), &failed_pod(1, json!([]))), NO_MATCH);
        assert_eq!(match_pod_failure_policy(None, &failed_pod(1, json!([]))), NO_MATCH);
    }

    #[test]
    fn success_policies_match_indexes_or_counts() {
        let policy: SuccessPolicy = serde_json::from_value(json!({"rules": [
            {"succeededIndexes": "0-2", "succeededCount": 2},
            {"succeededCount": 4},
        ]}))
        .expect("a policy");
        let done = |s: &str| match_success_policy(Some(&policy), 10, &Intervals::parse(s, 10));
        assert_eq!(done("0"), None);
        assert_eq!(done("0,2"), Some("Matched rules at index 0".to_string()));
        assert_eq!(done("5-8"), Some("Matched rules at index 1".to_string()));
        assert_eq!(done(""), None);
    }
}
