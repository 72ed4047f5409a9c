//! Cases after upstream's horizontal_test.go (normalisation, stabilisation, policies).

use super::*;

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

fn args(min: i32, max: i32, current: i32, desired: i32) -> Args {
    Args { min, max, current, desired }
}

#[test]
fn rules_clamp_to_min_max_and_the_scale_up_limit() {
    assert_eq!(
        convert_with_rules(3, 5, 1, 10),
        (5, "DesiredWithinRange", "the desired count is within the acceptable range")
    );
    assert_eq!(convert_with_rules(3, 0, 2, 10).0, 2);
    assert_eq!(convert_with_rules(3, 0, 2, 10).1, "TooFewReplicas");
    assert_eq!(
        convert_with_rules(5, 12, 1, 8),
        (8, "TooManyReplicas", "the desired replica count is more than the maximum replica count")
    );
    // The scale-up limit (2 × 3) comes before a higher max.
    assert_eq!(convert_with_rules(3, 12, 1, 8).0, 6);
    // From 1, at most max(2 × 1, 4) = 4.
    assert_eq!(convert_with_rules(1, 9, 1, 10).0, 4);
    assert_eq!(convert_with_rules(1, 9, 1, 10).1, "ScaleUpLimit");
    assert_eq!(convert_with_rules(5, 20, 1, 30).0, 10);
}

#[test]
fn scale_down_waits_for_the_highest_recommendation_of_the_window() {
    let s = Stabilizer::default();
    let window = Duration::from_secs(300);
    s.record_initial("ns/h", 5, t(0));
    let first = s.normalize("ns/h", args(1, 10, 5, 2), window, t(10));
    assert_eq!(first.replicas, 5);
    assert_eq!(first.able_to_scale.0, "ScaleDownStabilized");
    assert_eq!(first.limited, (false, "DesiredWithinRange", "the desired count is within the acceptable range"));
    // Once the initial recommendation left the window, the later one (2) is the highest.
    let later = s.normalize("ns/h", args(1, 10, 5, 2), window, t(301));
    assert_eq!(later.replicas, 2);
    assert_eq!(later.able_to_scale, ("ReadyForNewScale", "recommended size matches current size"));
}

#[test]
fn scale_up_is_not_stabilized_without_behavior() {
    let s = Stabilizer::default();
    s.record_initial("k", 3, t(0));
    let n = s.normalize("k", args(1, 10, 3, 5), Duration::from_secs(300), t(1));
    assert_eq!(n.replicas, 5);
    assert_eq!(n.able_to_scale.0, "ReadyForNewScale");
    let capped = s.normalize("k", args(1, 4, 3, 5), Duration::from_secs(300), t(2));
    assert_eq!((capped.replicas, capped.limited.0, capped.limited.1), (4, true, "TooManyReplicas"));
    let limited = s.normalize("k", args(1, 10, 2, 5), Duration::from_secs(300), t(3));
    assert_eq!((limited.replicas, limited.limited.1), (4, "ScaleUpLimit"));
}

#[test]
fn behavior_windows_stabilize_both_ways() {
    let s = Stabilizer::default();
    let behavior = HorizontalPodAutoscalerBehavior {
        scale_up: Some(HPAScalingRules { stabilization_window_seconds: Some(60), ..Default::default() }),
        scale_down: Some(HPAScalingRules { stabilization_window_seconds: Some(30), ..Default::default() }),
    };
    s.record_initial("k", 3, t(0));
    let up = s.normalize_with_behavior("k", &behavior, args(1, 10, 3, 6), Duration::from_secs(300), t(1));
    assert_eq!(up.replicas, 3);
    assert_eq!(up.able_to_scale.0, "ScaleUpStabilized");
    // Once the initial 3 left the scale-up window (60 s), the lowest recent one is 6.
    let later = s.normalize_with_behavior("k", &behavior, args(1, 10, 3, 6), Duration::from_secs(300), t(62));
    assert_eq!(later.replicas, 6);
    assert_eq!(later.able_to_scale.0, "ReadyForNewScale");
    let down = s.normalize_with_behavior("k", &behavior, args(1, 10, 6, 2), Duration::from_secs(300), t(70));
    assert_eq!((down.replicas, down.able_to_scale.0), (6, "ScaleDownStabilized"));
    let after = s.normalize_with_behavior("k", &behavior, args(1, 10, 6, 2), Duration::from_secs(300), t(101));
    assert_eq!(after.replicas, 2);
}

#[test]
fn default_scale_down_window_comes_from_the_flag() {
    let s = Stabilizer::default();
    let behavior = HorizontalPodAutoscalerBehavior::default();
    s.record_initial("k", 4, t(0));
    let n = s.normalize_with_behavior("k", &behavior, args(1, 10, 4, 1), Duration::from_secs(120), t(60));
    assert_eq!(n.replicas, 4);
    let n = s.normalize_with_behavior("k", &behavior, args(1, 10, 4, 1), Duration::from_secs(120), t(200));
    assert_eq!(n.replicas, 1);
}

#[test]
fn policies_limit_the_rate_over_their_period() {
    let s = Stabilizer::default();
    let behavior = HorizontalPodAutoscalerBehavior {
        scale_up: Some(HPAScalingRules {
            policies: Some(vec![policy("Pods", 2, 60)]),
            stabilization_window_seconds: Some(0),
            select_policy: Some("Max".into()),
            ..Default::default()
        }),
        scale_down: None,
    };
    let n = s.normalize_with_behavior("k", &behavior, args(1, 20, 2, 10), Duration::ZERO, t(0));
    assert_eq!(n.replicas, 4);
    assert_eq!(
        n.limited,
        (true, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate")
    );
    s.store_scale_event("k", Some(&behavior), 2, 4, t(0));
    // Within the period, the 2 pods added count: from 4, still at most 2 + 2 = 4.
    assert_eq!(s.normalize_with_behavior("k", &behavior, args(1, 20, 4, 10), Duration::ZERO, t(30)).replicas, 4);
    // After it, 2 more.
    assert_eq!(s.normalize_with_behavior("k", &behavior, args(1, 20, 4, 10), Duration::ZERO, t(61)).replicas, 6);
}

#[test]
fn select_policy_min_and_disabled() {
    let rules = |select: &str| HPAScalingRules {
        policies: Some(vec![policy("Pods", 1, 15), policy("Percent", 50, 15)]),
        select_policy: Some(select.into()),
        stabilization_window_seconds: Some(0),
        ..Default::default()
    };
    assert_eq!(scale_down_limit(10, &[], &[], &rules("Max"), t(0)), 5);
    assert_eq!(scale_down_limit(10, &[], &[], &rules("Min"), t(0)), 9);
    assert_eq!(scale_down_limit(10, &[], &[], &rules("Disabled"), t(0)), 10);
    assert_eq!(scale_up_limit(10, &[], &[], &rules("Max"), t(0)), 15);
    assert_eq!(scale_up_limit(10, &[], &[], &rules("Min"), t(0)), 11);
    assert_eq!(scale_up_limit(10, &[], &[], &rules("Disabled"), t(0)), 10);
    // Percent rounds up on the way up.
    assert_eq!(scale_up_limit(1, &[], &[], &rules("Max"), t(0)), 2);
}

#[test]
fn scale_down_below_min_is_too_few_replicas() {
    let s = Stabilizer::default();
    let behavior = HorizontalPodAutoscalerBehavior {
        scale_up: None,
        scale_down: Some(HPAScalingRules { stabilization_window_seconds: Some(0), ..Default::default() }),
    };
    let n = s.normalize_with_behavior("k", &behavior, args(3, 10, 5, 1), Duration::ZERO, t(0));
    assert_eq!(n.replicas, 3);
    assert_eq!(n.limited, (true, "TooFewReplicas", "the desired replica count is less than the minimum replica count"));
}

#[test]
fn outdated_scale_events_are_reused() {
    let s = Stabilizer::default();
    let behavior = HorizontalPodAutoscalerBehavior::default();
    s.store_scale_event("k", Some(&behavior), 1, 2, t(0));
    s.store_scale_event("k", Some(&behavior), 2, 3, t(100));
    assert_eq!(s.histories.lock()["k"].scale_up.len(), 1);
    s.store_scale_event("k", None, 3, 4, t(200));
    assert_eq!(s.histories.lock()["k"].scale_up.len(), 1);
    s.forget("k");
    assert!(s.histories.lock().is_empty());
}
