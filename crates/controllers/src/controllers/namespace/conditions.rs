//! The namespace deletion conditions, after upstream v1.33's
//! `pkg/controller/namespace/deletion/status_condition_utils.go` (`namespaceConditionUpdater`):
//! one deletion pass collects failures and remaining content, then every condition type the
//! deleter owns is set, to its failing form or to its "ok" form.

use crate::apimachinery::clock::whole_seconds;
use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{NamespaceCondition, NamespaceStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// `v1.NamespaceDeletionDiscoveryFailure`: the namespace's resources could not all be discovered.
pub const DISCOVERY_FAILURE: &str = "NamespaceDeletionDiscoveryFailure";
/// `v1.NamespaceDeletionGVParsingFailure`: a discovered group version could not be parsed.
pub const GROUP_VERSION_PARSING_FAILURE: &str = "NamespaceDeletionGroupVersionParsingFailure";
/// `v1.NamespaceDeletionContentFailure`: content could not be deleted.
pub const CONTENT_FAILURE: &str = "NamespaceDeletionContentFailure";
/// `v1.NamespaceContentRemaining`: content is left to delete.
pub const CONTENT_REMAINING: &str = "NamespaceContentRemaining";
/// `v1.NamespaceFinalizersRemaining`: content waits on finalizers.
pub const FINALIZERS_REMAINING: &str = "NamespaceFinalizersRemaining";

/// `conditionTypes`, in upstream's order (the order they are first added to a namespace).
pub const CONDITION_TYPES: [&str; 5] =
    [DISCOVERY_FAILURE, GROUP_VERSION_PARSING_FAILURE, CONTENT_FAILURE, CONTENT_REMAINING, FINALIZERS_REMAINING];

/// `okReasons` and `okMessages`: the condition when nothing is wrong.
fn ok_reason_and_message(condition_type: &str) -> (&'static str, &'static str) {
    match condition_type {
        DISCOVERY_FAILURE => ("ResourcesDiscovered", "All resources successfully discovered"),
        GROUP_VERSION_PARSING_FAILURE => ("ParsedGroupVersions", "All legacy kube types successfully parsed"),
        CONTENT_FAILURE => ("ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
        CONTENT_REMAINING => ("ContentRemoved", "All content successfully removed"),
        _ => ("ContentHasNoFinalizers", "All content-preserving finalizers finished"),
    }
}

/// What one pass of `deleteAllContent` found, turned into conditions by [`ConditionUpdater::update`].
#[derive(Debug, Default)]
pub struct ConditionUpdater {
    new_conditions: Vec<NamespaceCondition>,
    delete_content_errors: Vec<String>,
    now: Option<Timestamp>,
}

/// How many objects of each resource (`<resource>.<group>`) and behind each finalizer remain
/// (`allGVRDeletionMetadata`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RemainingContent {
    /// Remaining objects by resource (`<resource>.<group>`).
    pub by_resource: BTreeMap<String, usize>,
    /// Remaining objects by finalizer.
    pub by_finalizer: BTreeMap<String, usize>,
}

impl ConditionUpdater {
    /// An updater stamping conditions with `now` (truncated to seconds, as the API stores it).
    pub fn new(now: Timestamp) -> ConditionUpdater {
        let now = whole_seconds(now);
        ConditionUpdater { now: Some(now), ..ConditionUpdater::default() }
    }

    fn condition(&self, type_: &str, status: &str, reason: &str, message: String) -> NamespaceCondition {
        NamespaceCondition {
            type_: type_.to_string(),
            status: status.to_string(),
            last_transition_time: self.now.map(Time),
            reason: Some(reason.to_string()),
            message: Some(message),
        }
    }

    /// `ProcessDiscoverResourcesErr`: `failed_groups` is the number of group versions whose
    /// discovery failed (`ErrGroupDiscoveryFailed`), or `None` when discovery failed as a whole.
    pub fn process_discovery_error(&mut self, failed_groups: Option<usize>, error: &str) {
        let message = match failed_groups {
            Some(count) => format!("Discovery failed for some groups, {count} failing: {error}"),
            None => error.to_string(),
        };
        let condition = self.condition(DISCOVERY_FAILURE, "True", "DiscoveryFailed", message);
        self.new_conditions.push(condition);
    }

    /// `ProcessGroupVersionErr`.
    pub fn process_group_version_error(&mut self, error: &str) {
        let condition =
            self.condition(GROUP_VERSION_PARSING_FAILURE, "True", "GroupVersionParsingFailed", error.to_string());
        self.new_conditions.push(condition);
    }

    /// `ProcessDeleteContentErr`: collected, summarised by [`ConditionUpdater::update`].
    pub fn process_delete_content_error(&mut self, error: &str) {
        self.delete_content_errors.push(error.to_string());
    }

    /// `ProcessContentTotals`: `NamespaceContentRemaining` and `NamespaceFinalizersRemaining`.
    pub fn process_content_totals(&mut self, totals: &RemainingContent) {
        let resources: Vec<String> = totals
            .by_resource
            .iter()
            .filter(|(_, count)| **count > 0)
            .map(|(resource, count)| format!("{resource} has {count} resource instances"))
            .collect();
        if !totals.by_resource.is_empty() {
            let message = format!("Some resources are remaining: {}", sorted(resources).join(", "));
            let condition = self.condition(CONTENT_REMAINING, "True", "SomeResourcesRemain", message);
            self.new_conditions.push(condition);
        }
        let finalizers: Vec<String> = totals
            .by_finalizer
            .iter()
            .filter(|(_, count)| **count > 0)
            .map(|(finalizer, count)| format!("{finalizer} in {count} resource instances"))
            .collect();
        if !totals.by_finalizer.is_empty() {
            let message =
                format!("Some content in the namespace has finalizers remaining: {}", sorted(finalizers).join(", "));
            let condition = self.condition(FINALIZERS_REMAINING, "True", "SomeFinalizersRemain", message);
            self.new_conditions.push(condition);
        }
    }

    /// `Update`: sets every condition type on `status`; true when anything changed.
    pub fn update(mut self, status: &mut NamespaceStatus) -> bool {
        if find(&self.new_conditions, CONTENT_FAILURE).is_none()
            && let Some(condition) = self.delete_content_condition()
        {
            self.new_conditions.push(condition);
        }
        self.update_conditions(status)
    }

    /// `makeDeleteContentCondition`.
    fn delete_content_condition(&self) -> Option<NamespaceCondition> {
        if self.delete_content_errors.is_empty() {
            return None;
        }
        let messages = sorted(self.delete_content_errors.clone());
        let message =
            format!("Failed to delete all resource types, {} remaining: {}", messages.len(), messages.join(", "));
        Some(self.condition(CONTENT_FAILURE, "True", "ContentDeletionFailed", message))
    }

    /// `updateConditions`: a missing type is appended; a changed one is rewritten in place, its
    /// transition time moving only when its status changes.
    fn update_conditions(&self, status: &mut NamespaceStatus) -> bool {
        let mut changed = false;
        let conditions = status.conditions.get_or_insert_default();
        for condition_type in CONDITION_TYPES {
            let wanted = find(&self.new_conditions, condition_type).cloned().unwrap_or_else(|| {
                let (reason, message) = ok_reason_and_message(condition_type);
                self.condition(condition_type, "False", reason, message.to_string())
            });
            match conditions.iter_mut().find(|c| c.type_ == condition_type) {
                None => {
                    conditions.push(wanted);
                    changed = true;
                }
                Some(old)
                    if old.status != wanted.status || old.message != wanted.message || old.reason != wanted.reason =>
                {
                    if old.status != wanted.status {
                        old.last_transition_time = wanted.last_transition_time;
                    }
                    old.status = wanted.status;
                    old.reason = wanted.reason;
                    old.message = wanted.message;
                    changed = true;
                }
                Some(_) => {}
            }
        }
        changed
    }
}

fn find<'a>(conditions: &'a [NamespaceCondition], type_: &str) -> Option<&'a NamespaceCondition> {
    conditions.iter().find(|c| c.type_ == type_)
}

fn sorted(mut list: Vec<String>) -> Vec<String> {
    list.sort();
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    fn by_type<'a>(status: &'a NamespaceStatus, type_: &str) -> &'a NamespaceCondition {
        status.conditions.iter().flatten().find(|c| c.type_ == type_).expect("condition present")
    }

    fn summary(condition: &NamespaceCondition) -> (String, String, String) {
        (
            condition.status.clone(),
            condition.reason.clone().unwrap_or_default(),
            condition.message.clone().unwrap_or_default(),
        )
    }

    #[test]
    fn a_clean_pass_sets_every_ok_condition_in_upstream_order() {
        let mut status = NamespaceStatus::default();
        assert!(ConditionUpdater::new(at(100)).update(&mut status));
        let types: Vec<&str> = status.conditions.iter().flatten().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, CONDITION_TYPES);
        assert_eq!(
            summary(by_type(&status, CONTENT_FAILURE)),
            (
                "False".into(),
                "ContentDeleted".into(),
                "All content successfully deleted, may be waiting on finalization".into()
            )
        );
        assert_eq!(
            summary(by_type(&status, FINALIZERS_REMAINING)),
            ("False".into(), "ContentHasNoFinalizers".into(), "All content-preserving finalizers finished".into())
        );
        // The same pass again changes nothing.
        assert!(!ConditionUpdater::new(at(200)).update(&mut status));
    }

    #[test]
    fn remaining_content_messages_match_upstream() {
        let mut updater = ConditionUpdater::new(at(100));
        updater.process_content_totals(&RemainingContent {
            by_resource: BTreeMap::from([
                ("pods.".into(), 2),
                ("configmaps.".into(), 1),
                ("widgets.example.com".into(), 0),
            ]),
            by_finalizer: BTreeMap::from([("example.com/block".into(), 1)]),
        });
        let mut status = NamespaceStatus::default();
        updater.update(&mut status);
        assert_eq!(
            summary(by_type(&status, CONTENT_REMAINING)),
            (
                "True".into(),
                "SomeResourcesRemain".into(),
                "Some resources are remaining: configmaps. has 1 resource instances, pods. has 2 resource instances"
                    .into()
            )
        );
        assert_eq!(
            summary(by_type(&status, FINALIZERS_REMAINING)),
            (
                "True".into(),
                "SomeFinalizersRemain".into(),
                "Some content in the namespace has finalizers remaining: example.com/block in 1 resource instances"
                    .into()
            )
        );
    }

    #[test]
    fn failures_become_true_conditions_and_content_errors_are_summarised_sorted() {
        let mut updater = ConditionUpdater::new(at(100));
        updater.process_discovery_error(Some(1), "unable to retrieve the complete list of server APIs: x/v1: down");
        updater.process_group_version_error("unexpected GroupVersion string: a/b/c");
        updater.process_delete_content_error("zeta failed");
        updater.process_delete_content_error("alpha failed");
        let mut status = NamespaceStatus::default();
        updater.update(&mut status);
        assert_eq!(
            summary(by_type(&status, DISCOVERY_FAILURE)),
            (
                "True".into(),
                "DiscoveryFailed".into(),
                "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: x/v1: down".into()
            )
        );
        assert_eq!(
            by_type(&status, GROUP_VERSION_PARSING_FAILURE).reason.as_deref(),
            Some("GroupVersionParsingFailed")
        );
        assert_eq!(
            summary(by_type(&status, CONTENT_FAILURE)),
            (
                "True".into(),
                "ContentDeletionFailed".into(),
                "Failed to delete all resource types, 2 remaining: alpha failed, zeta failed".into()
            )
        );
        let mut whole = ConditionUpdater::new(at(100));
        whole.process_discovery_error(None, "connection refused");
        let mut status = NamespaceStatus::default();
        whole.update(&mut status);
        assert_eq!(by_type(&status, DISCOVERY_FAILURE).message.as_deref(), Some("connection refused"));
    }

    #[test]
    fn transition_time_moves_only_when_the_status_changes() {
        let mut status = NamespaceStatus::default();
        let mut first = ConditionUpdater::new(at(100));
        first.process_content_totals(&RemainingContent {
            by_resource: BTreeMap::from([("pods.".into(), 2)]),
            by_finalizer: BTreeMap::new(),
        });
        first.update(&mut status);
        let mut second = ConditionUpdater::new(at(200));
        second.process_content_totals(&RemainingContent {
            by_resource: BTreeMap::from([("pods.".into(), 1)]),
            by_finalizer: BTreeMap::new(),
        });
        assert!(second.update(&mut status));
        let remaining = by_type(&status, CONTENT_REMAINING);
        assert_eq!(remaining.message.as_deref(), Some("Some resources are remaining: pods. has 1 resource instances"));
        assert_eq!(remaining.last_transition_time, Some(Time(at(100))));
        assert!(ConditionUpdater::new(at(300)).update(&mut status));
        let removed = by_type(&status, CONTENT_REMAINING);
        assert_eq!(summary(removed).0, "False");
        assert_eq!(removed.last_transition_time, Some(Time(at(300))));
    }
}
