//! Upstream's normalisation of a desired replica count (`normalizeDesiredReplicas`,
//! `normalizeDesiredReplicasWithBehaviors` and their helpers): min/max, the scale-up limit,
//! `behavior` policies over the recent scale events, and stabilisation over the recent
//! recommendations, which are kept per HPA key as upstream keeps them (in memory, dropped when
//! the HPA is deleted).

use std::collections::HashMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::autoscaling::v2::{HPAScalingPolicy, HPAScalingRules, HorizontalPodAutoscalerBehavior};
use parking_lot::Mutex;

/// `scaleUpLimitFactor` and `scaleUpLimitMinimum`.
const SCALE_UP_LIMIT_FACTOR: f64 = 2.0;
const SCALE_UP_LIMIT_MINIMUM: f64 = 4.0;

/// A recommendation and when it was made (`timestampedRecommendation`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Recommendation {
    replicas: i32,
    at: Timestamp,
}

/// A rescale by `change` replicas (`timestampedScaleEvent`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct ScaleEvent {
    change: i32,
    at: Timestamp,
    outdated: bool,
}

/// What one HPA remembers between syncs.
#[derive(Debug, Default)]
struct History {
    recommendations: Vec<Recommendation>,
    scale_up: Vec<ScaleEvent>,
    scale_down: Vec<ScaleEvent>,
}

/// A condition to set: (reason, message).
pub type Reasoned = (&'static str, &'static str);

/// The outcome of a normalisation: the replicas and the two conditions it sets.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalized {
    /// The count to scale to.
    pub replicas: i32,
    /// `AbleToScale` (True) reason and message.
    pub able_to_scale: Reasoned,
    /// `ScalingLimited`: whether True, reason and message.
    pub limited: (bool, &'static str, &'static str),
}

/// What a normalisation is given (`NormalizationArg`).
#[derive(Debug, Clone, Copy)]
pub struct Args {
    /// `minReplicas`, defaulted.
    pub min: i32,
    /// `maxReplicas`.
    pub max: i32,
    /// The target's current `spec.replicas`.
    pub current: i32,
    /// What the metrics ask for.
    pub desired: i32,
}

const READY_FOR_NEW_SCALE: Reasoned = ("ReadyForNewScale", "recommended size matches current size");
const WITHIN_RANGE: Reasoned = ("DesiredWithinRange", "the desired count is within the acceptable range");

/// The recommendations and scale events of every HPA.
#[derive(Debug, Default)]
pub struct Stabilizer {
    histories: Mutex<HashMap<String, History>>,
}

fn before(at: Timestamp, window: Duration) -> Timestamp {
    at.checked_sub(SignedDuration::try_from(window).unwrap_or(SignedDuration::MAX)).unwrap_or(Timestamp::MIN)
}

fn secs(seconds: i32) -> Duration {
    Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
}

impl Stabilizer {
    /// `recordInitialRecommendation`: the current count, the first time an HPA is seen.
    pub fn record_initial(&self, key: &str, current: i32, now: Timestamp) {
        let mut histories = self.histories.lock();
        let history = histories.entry(key.to_string()).or_default();
        if history.recommendations.is_empty() {
            history.recommendations.push(Recommendation { replicas: current, at: now });
        }
    }

    /// Forgets a deleted HPA.
    pub fn forget(&self, key: &str) {
        self.histories.lock().remove(key);
    }

    /// `normalizeDesiredReplicas` (no `behavior`): the highest recommendation of the
    /// downscale stabilisation window, then min, max and the scale-up limit.
    pub fn normalize(&self, key: &str, args: Args, window: Duration, now: Timestamp) -> Normalized {
        let stabilized = self.stabilize(key, args.desired, window, now);
        let able_to_scale = if stabilized != args.desired {
            (
                "ScaleDownStabilized",
                "recent recommendations were higher than current one, applying the highest recent recommendation",
            )
        } else {
            READY_FOR_NEW_SCALE
        };
        let (replicas, reason, message) = convert_with_rules(args.current, stabilized, args.min, args.max);
        Normalized { replicas, able_to_scale, limited: (replicas != stabilized, reason, message) }
    }

    /// `stabilizeRecommendation`.
    fn stabilize(&self, key: &str, desired: i32, window: Duration, now: Timestamp) -> i32 {
        let cutoff = before(now, window);
        let mut histories = self.histories.lock();
        let recommendations = &mut histories.entry(key.to_string()).or_default().recommendations;
        let mut highest = desired;
        let mut old = None;
        for (i, r) in recommendations.iter().enumerate() {
            if r.at < cutoff {
                old = Some(i);
            } else if r.replicas > highest {
                highest = r.replicas;
            }
        }
        let new = Recommendation { replicas: desired, at: now };
        match old {
            Some(i) => recommendations[i] = new,
            None => recommendations.push(new),
        }
        highest
    }

    /// `normalizeDesiredReplicasWithBehaviors`: stabilisation within both windows, then the
    /// policies' rates over the recent scale events, min and max. `behavior` is defaulted as
    /// the API server does, and the scale-down window from `default_window` when unset.
    pub fn normalize_with_behavior(
        &self,
        key: &str,
        behavior: &HorizontalPodAutoscalerBehavior,
        args: Args,
        default_window: Duration,
        now: Timestamp,
    ) -> Normalized {
        let up = scale_up_rules(behavior.scale_up.as_ref());
        let down = scale_down_rules(behavior.scale_down.as_ref(), default_window);
        let (stabilized, reason, message) = self.stabilize_with_behavior(key, &up, &down, args, now);
        let able_to_scale = if stabilized != args.desired { (reason, message) } else { READY_FOR_NEW_SCALE };
        let (replicas, reason, message) =
            self.convert_with_rate(key, &up, &down, Args { desired: stabilized, ..args }, now);
        Normalized { replicas, able_to_scale, limited: (replicas != stabilized, reason, message) }
    }

    /// `stabilizeRecommendationWithBehaviors`.
    fn stabilize_with_behavior(
        &self,
        key: &str,
        up: &HPAScalingRules,
        down: &HPAScalingRules,
        args: Args,
        now: Timestamp,
    ) -> (i32, &'static str, &'static str) {
        let up_cutoff = before(now, secs(up.stabilization_window_seconds.unwrap_or(0)));
        let down_cutoff = before(now, secs(down.stabilization_window_seconds.unwrap_or(0)));
        let mut histories = self.histories.lock();
        let recommendations = &mut histories.entry(key.to_string()).or_default().recommendations;
        let (mut up_recommendation, mut down_recommendation) = (args.desired, args.desired);
        let mut old = None;
        for (i, r) in recommendations.iter().enumerate() {
            if r.at > up_cutoff {
                up_recommendation = up_recommendation.min(r.replicas);
            }
            if r.at > down_cutoff {
                down_recommendation = down_recommendation.max(r.replicas);
            }
            if r.at < up_cutoff && r.at < down_cutoff {
                old = Some(i);
            }
        }
        let recommendation = args.current.max(up_recommendation).min(down_recommendation);
        let new = Recommendation { replicas: args.desired, at: now };
        match old {
            Some(i) => recommendations[i] = new,
            None => recommendations.push(new),
        }
        if args.desired >= args.current {
            (
                recommendation,
                "ScaleUpStabilized",
                "recent recommendations were lower than current one, applying the lowest recent recommendation",
            )
        } else {
            (
                recommendation,
                "ScaleDownStabilized",
                "recent recommendations were higher than current one, applying the highest recent recommendation",
            )
        }
    }

    /// `convertDesiredReplicasWithBehaviorRate`.
    fn convert_with_rate(
        &self,
        key: &str,
        up: &HPAScalingRules,
        down: &HPAScalingRules,
        args: Args,
        now: Timestamp,
    ) -> (i32, &'static str, &'static str) {
        let histories = self.histories.lock();
        let empty = History::default();
        let history = histories.get(key).unwrap_or(&empty);
        if args.desired > args.current {
            let limit = scale_up_limit(args.current, &history.scale_up, &history.scale_down, up, now).max(args.current);
            let (allowed, reason, message) = if args.max > limit {
                (limit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate")
            } else {
                (args.max, "TooManyReplicas", "the desired replica count is more than the maximum replica count")
            };
            if args.desired > allowed {
                return (allowed, reason, message);
            }
        } else if args.desired < args.current {
            let limit =
                scale_down_limit(args.current, &history.scale_up, &history.scale_down, down, now).min(args.current);
            let (allowed, reason, message) = if args.min < limit {
                (limit, "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate")
            } else {
                (args.min, "TooFewReplicas", "the desired replica count is less than the minimum replica count")
            };
            if args.desired < allowed {
                return (allowed, reason, message);
            }
        }
        (args.desired, WITHIN_RANGE.0, WITHIN_RANGE.1)
    }

    /// `storeScaleEvent`: a rescale from `previous` to `new`, reusing an outdated slot.
    pub fn store_scale_event(
        &self,
        key: &str,
        behavior: Option<&HorizontalPodAutoscalerBehavior>,
        previous: i32,
        new: i32,
        now: Timestamp,
    ) {
        let Some(behavior) = behavior else { return };
        let mut histories = self.histories.lock();
        let history = histories.entry(key.to_string()).or_default();
        let (events, rules, change) = if new > previous {
            (&mut history.scale_up, scale_up_rules(behavior.scale_up.as_ref()), new - previous)
        } else {
            (&mut history.scale_down, scale_down_rules(behavior.scale_down.as_ref(), Duration::ZERO), previous - new)
        };
        let cutoff = before(now, secs(longest_policy_period(&rules)));
        for event in events.iter_mut() {
            if event.at < cutoff {
                event.outdated = true;
            }
        }
        let event = ScaleEvent { change, at: now, outdated: false };
        match events.iter().rposition(|e| e.outdated) {
            Some(i) => events[i] = event,
            None => events.push(event),
        }
    }
}

/// `convertDesiredReplicasWithRules`.
pub fn convert_with_rules(current: i32, desired: i32, min: i32, max: i32) -> (i32, &'static str, &'static str) {
    let scale_up_limit = calculate_scale_up_limit(current);
    let (maximum, reason, message) = if max > scale_up_limit {
        (scale_up_limit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate")
    } else {
        (max, "TooManyReplicas", "the desired replica count is more than the maximum replica count")
    };
    if desired < min {
        return (min, "TooFewReplicas", "the desired replica count is less than the minimum replica count");
    }
    if desired > maximum {
        return (maximum, reason, message);
    }
    (desired, WITHIN_RANGE.0, WITHIN_RANGE.1)
}

/// `calculateScaleUpLimit`.
fn calculate_scale_up_limit(current: i32) -> i32 {
    (SCALE_UP_LIMIT_FACTOR * f64::from(current)).max(SCALE_UP_LIMIT_MINIMUM) as i32
}

fn longest_policy_period(rules: &HPAScalingRules) -> i32 {
    rules.policies.iter().flatten().map(|p| p.period_seconds).max().unwrap_or(0).max(0)
}

/// `getReplicasChangePerPeriod`.
fn change_in_period(period_seconds: i32, events: &[ScaleEvent], now: Timestamp) -> i32 {
    let cutoff = before(now, secs(period_seconds));
    events.iter().filter(|e| e.at > cutoff).map(|e| e.change).sum()
}

fn select_policy(rules: &HPAScalingRules) -> &str {
    rules.select_policy.as_deref().unwrap_or("Max")
}

/// `calculateScaleUpLimitWithScalingRules`.
fn scale_up_limit(
    current: i32,
    up: &[ScaleEvent],
    down: &[ScaleEvent],
    rules: &HPAScalingRules,
    now: Timestamp,
) -> i32 {
    let policy = select_policy(rules);
    if policy == "Disabled" {
        return current;
    }
    let proposals = rules.policies.iter().flatten().map(|p| {
        let start =
            current - change_in_period(p.period_seconds, up, now) + change_in_period(p.period_seconds, down, now);
        match p.type_.as_str() {
            "Pods" => start + p.value,
            "Percent" => (f64::from(start) * (1.0 + f64::from(p.value) / 100.0)).ceil() as i32,
            _ => 0,
        }
    });
    if policy == "Min" { proposals.fold(i32::MAX, i32::min) } else { proposals.fold(i32::MIN, i32::max) }
}

/// `calculateScaleDownLimitWithBehaviors`.
fn scale_down_limit(
    current: i32,
    up: &[ScaleEvent],
    down: &[ScaleEvent],
    rules: &HPAScalingRules,
    now: Timestamp,
) -> i32 {
    let policy = select_policy(rules);
    if policy == "Disabled" {
        return current;
    }
    let proposals = rules.policies.iter().flatten().map(|p| {
        let start =
            current - change_in_period(p.period_seconds, up, now) + change_in_period(p.period_seconds, down, now);
        match p.type_.as_str() {
            "Pods" => start - p.value,
            "Percent" => (f64::from(start) * (1.0 - f64::from(p.value) / 100.0)) as i32,
            _ => 0,
        }
    });
    if policy == "Min" { proposals.fold(i32::MIN, i32::max) } else { proposals.fold(i32::MAX, i32::min) }
}

fn policy(type_: &str, value: i32, period_seconds: i32) -> HPAScalingPolicy {
    HPAScalingPolicy { type_: type_.into(), value, period_seconds }
}

/// `GenerateHPAScaleUpRules`: the API server's defaults for what is unset.
fn scale_up_rules(rules: Option<&HPAScalingRules>) -> HPAScalingRules {
    let mut rules = rules.cloned().unwrap_or_default();
    if rules.policies.as_ref().is_none_or(Vec::is_empty) {
        rules.policies = Some(vec![policy("Pods", 4, 15), policy("Percent", 100, 15)]);
    }
    rules.select_policy.get_or_insert_with(|| "Max".into());
    rules.stabilization_window_seconds.get_or_insert(0);
    rules
}

/// `GenerateHPAScaleDownRules`, with the controller's window when none is set
/// (`maybeInitScaleDownStabilizationWindow`).
fn scale_down_rules(rules: Option<&HPAScalingRules>, default_window: Duration) -> HPAScalingRules {
    let mut rules = rules.cloned().unwrap_or_default();
    if rules.policies.as_ref().is_none_or(Vec::is_empty) {
        rules.policies = Some(vec![policy("Percent", 100, 15)]);
    }
    rules.select_policy.get_or_insert_with(|| "Max".into());
    rules.stabilization_window_seconds.get_or_insert(default_window.as_secs().min(i32::MAX as u64) as i32);
    rules
}

#[cfg(test)]
mod tests;
