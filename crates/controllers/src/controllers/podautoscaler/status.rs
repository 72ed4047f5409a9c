//! The HPA's conditions (`setCondition`) and status (`setStatus`), as upstream writes them.

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v2::{
    HorizontalPodAutoscalerCondition, HorizontalPodAutoscalerStatus, MetricStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// `AbleToScale`.
pub const ABLE_TO_SCALE: &str = "AbleToScale";
/// `ScalingActive`.
pub const SCALING_ACTIVE: &str = "ScalingActive";
/// `ScalingLimited`.
pub const SCALING_LIMITED: &str = "ScalingLimited";
/// `ScaledToZero` (HPAScaleToZero, v1.36).
pub const SCALED_TO_ZERO: &str = "ScaledToZero";

/// A condition to set (upstream passes the same four values around).
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// Its type.
    pub type_: &'static str,
    /// `True` or `False`.
    pub status: bool,
    /// Its reason.
    pub reason: String,
    /// Its message.
    pub message: String,
}

impl Condition {
    /// A condition of `type_`.
    pub fn new(type_: &'static str, status: bool, reason: &str, message: impl Into<String>) -> Condition {
        Condition { type_, status, reason: reason.to_string(), message: message.into() }
    }
}

/// `setConditionInList`: replaces the condition of that type (appended when absent), with a
/// new transition time only when its status changes.
pub fn set_condition(status: &mut HorizontalPodAutoscalerStatus, condition: Condition, now: Timestamp) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let index = match conditions.iter().position(|c| c.type_ == condition.type_) {
        Some(i) => i,
        None => {
            conditions.push(HorizontalPodAutoscalerCondition { type_: condition.type_.into(), ..Default::default() });
            conditions.len() - 1
        }
    };
    let existing = &mut conditions[index];
    let value = if condition.status { "True" } else { "False" };
    if existing.status != value {
        existing.last_transition_time = Some(Time(now));
    }
    existing.status = value.into();
    existing.reason = Some(condition.reason);
    existing.message = Some(condition.message);
}

/// `removeCondition` (v1.36): drops the conditions of `type_`.
pub fn remove_condition(status: &mut HorizontalPodAutoscalerStatus, type_: &str) {
    if let Some(conditions) = status.conditions.as_mut() {
        conditions.retain(|c| c.type_ != type_);
    }
}

/// `getScaledToZeroConditionStatus`: the ScaledToZero condition is there and True.
pub fn scaled_to_zero(status: Option<&HorizontalPodAutoscalerStatus>) -> bool {
    let conditions = status.and_then(|s| s.conditions.as_ref());
    conditions.and_then(|c| c.iter().find(|c| c.type_ == SCALED_TO_ZERO)).is_some_and(|c| c.status == "True")
}

/// `setStatus`: the counts and metrics replaced, conditions and last scale time kept (the
/// latter set to now on a rescale); upstream builds a new status without `observedGeneration`.
pub fn set_status(
    status: &mut HorizontalPodAutoscalerStatus,
    current: i32,
    desired: i32,
    metrics: Option<Vec<MetricStatus>>,
    rescaled_at: Option<Timestamp>,
) {
    status.current_replicas = Some(current);
    status.desired_replicas = desired;
    status.current_metrics = metrics;
    status.observed_generation = None;
    if let Some(at) = rescaled_at {
        status.last_scale_time = Some(Time(at));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_keep_their_transition_time_while_their_status_holds() {
        let mut status = HorizontalPodAutoscalerStatus::default();
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let t1: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        set_condition(&mut status, Condition::new(ABLE_TO_SCALE, true, "SucceededGetScale", "a"), t0);
        set_condition(&mut status, Condition::new(SCALING_ACTIVE, false, "InvalidSelector", "b"), t0);
        set_condition(&mut status, Condition::new(ABLE_TO_SCALE, true, "ReadyForNewScale", "c"), t1);
        let conditions = status.conditions.as_ref().unwrap();
        assert_eq!(conditions.len(), 2);
        assert_eq!(conditions[0].reason.as_deref(), Some("ReadyForNewScale"));
        assert_eq!(conditions[0].last_transition_time, Some(Time(t0)));
        set_condition(&mut status, Condition::new(ABLE_TO_SCALE, false, "FailedGetScale", "d"), t1);
        assert_eq!(status.conditions.as_ref().unwrap()[0].last_transition_time, Some(Time(t1)));
    }

    #[test]
    fn the_scaled_to_zero_condition_is_read_and_removed() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let mut status = HorizontalPodAutoscalerStatus::default();
        assert!(!scaled_to_zero(Some(&status)));
        remove_condition(&mut status, SCALED_TO_ZERO);
        assert_eq!(status.conditions, None, "nothing to remove");
        set_condition(&mut status, Condition::new(ABLE_TO_SCALE, true, "SucceededGetScale", "a"), t0);
        set_condition(&mut status, Condition::new(SCALED_TO_ZERO, false, "NotScaledToZero", "b"), t0);
        assert!(!scaled_to_zero(Some(&status)));
        set_condition(&mut status, Condition::new(SCALED_TO_ZERO, true, "ScaledToZero", "c"), t0);
        assert!(scaled_to_zero(Some(&status)));
        remove_condition(&mut status, SCALED_TO_ZERO);
        let types: Vec<&str> = status.conditions.iter().flatten().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, [ABLE_TO_SCALE]);
    }

    #[test]
    fn status_keeps_the_last_scale_time_unless_rescaled() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let mut status = HorizontalPodAutoscalerStatus { last_scale_time: Some(Time(t0)), ..Default::default() };
        set_status(&mut status, 2, 2, None, None);
        assert_eq!(status.last_scale_time, Some(Time(t0)));
        assert_eq!((status.current_replicas, status.desired_replicas), (Some(2), 2));
        let t1: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        set_status(&mut status, 2, 4, None, Some(t1));
        assert_eq!(status.last_scale_time, Some(Time(t1)));
    }
}
