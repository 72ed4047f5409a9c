//! Pod helpers of `k8s.io/kubernetes/pkg/api/v1/pod` (readiness, availability, conditions) and
//! `IsPodActive` of `pkg/controller`. The helpers read a pod through [`PodFields`], so they
//! answer the same for a whole `Pod` and for the [`PodSummary`] the pod informer keeps beside
//! each packed pod (a controller that counts its pods then decodes none of them). The sandbox,
//! which holds pods as JSON, reads the same fields with its own few lines.

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

/// A pod's `Ready` condition as the helpers read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readiness {
    /// The condition's status is `True`.
    pub ready: bool,
    /// Its `lastTransitionTime`, if set.
    pub since: Option<Timestamp>,
}

/// What the helpers of this module read of a pod: its metadata, phase, node and `Ready`
/// condition. Implemented by `Pod` and by [`PodSummary`], and through `&`, `Arc` and `Box`.
pub trait PodFields {
    /// `metadata`.
    fn pod_metadata(&self) -> &ObjectMeta;
    /// `status.phase`, empty when unset.
    fn pod_phase(&self) -> &str;
    /// `spec.nodeName`, empty when unset.
    fn pod_node_name(&self) -> &str;
    /// The first `Ready` condition (`GetPodReadyCondition`), if any.
    fn pod_readiness(&self) -> Option<Readiness>;
    /// `status.reason` (`Evicted`, …), empty when unset.
    fn pod_status_reason(&self) -> &str;
    /// `maxContainerRestarts`: the most restarts of a regular container and of a sidecar.
    fn pod_max_container_restarts(&self) -> (i32, i32);
}

impl PodFields for Pod {
    fn pod_metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn pod_phase(&self) -> &str {
        self.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default()
    }

    fn pod_node_name(&self) -> &str {
        self.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default()
    }

    fn pod_readiness(&self) -> Option<Readiness> {
        get_pod_ready_condition(self).map(readiness)
    }

    fn pod_status_reason(&self) -> &str {
        self.status.as_ref().and_then(|s| s.reason.as_deref()).unwrap_or_default()
    }

    fn pod_max_container_restarts(&self) -> (i32, i32) {
        max_container_restarts(self)
    }
}

/// The helpers' reading of a `Ready` condition.
fn readiness(condition: &PodCondition) -> Readiness {
    Readiness { ready: condition.status == "True", since: condition.last_transition_time.as_ref().map(|t| t.0) }
}

/// The fields of a pod that [`PodFields`] reads, and nothing else: about a hundred bytes beside
/// the metadata, where a decoded `Pod` takes ~17 KiB. The pod informer keeps one beside each
/// packed pod, so that a sync which only counts and filters its pods (the ReplicaSet
/// controller's, on every pod event) decodes none of them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodSummary {
    /// The pod's metadata, whole.
    pub metadata: ObjectMeta,
    /// `status.phase`.
    pub phase: Option<Box<str>>,
    /// `spec.nodeName`.
    pub node_name: Option<Box<str>>,
    /// The `Ready` condition.
    pub readiness: Option<Readiness>,
    /// `status.reason`: the pod GC deletes evicted pods first.
    pub status_reason: Option<Box<str>>,
    /// `maxContainerRestarts`: a scale-down ranks pods by it, and then need not unpack any.
    pub max_container_restarts: (i32, i32),
}

impl PodSummary {
    /// The summary of `pod`.
    pub fn of(pod: &Pod) -> PodSummary {
        PodSummary {
            metadata: pod.metadata.clone(),
            phase: pod.status.as_ref().and_then(|s| s.phase.as_deref()).map(Box::from),
            node_name: pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).map(Box::from),
            readiness: pod.pod_readiness(),
            status_reason: pod.status.as_ref().and_then(|s| s.reason.as_deref()).map(Box::from),
            max_container_restarts: max_container_restarts(pod),
        }
    }
}

/// `maxContainerRestarts`: the most restarts of a regular container and of a sidecar (an init
/// container with `restartPolicy: Always`), each 0 when there is none.
pub fn max_container_restarts(pod: &Pod) -> (i32, i32) {
    let Some(status) = pod.status.as_ref() else { return (0, 0) };
    let regular = status.container_statuses.iter().flatten().map(|c| c.restart_count).max().unwrap_or(0);
    let spec = pod.spec.as_ref();
    let is_sidecar = |name: &str| {
        spec.and_then(|s| s.init_containers.as_ref())
            .is_some_and(|i| i.iter().any(|c| c.name == name && c.restart_policy.as_deref() == Some("Always")))
    };
    let sidecar = status
        .init_container_statuses
        .iter()
        .flatten()
        .filter(|c| is_sidecar(&c.name))
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0);
    (regular, sidecar)
}

impl PodFields for PodSummary {
    fn pod_metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn pod_phase(&self) -> &str {
        self.phase.as_deref().unwrap_or_default()
    }

    fn pod_node_name(&self) -> &str {
        self.node_name.as_deref().unwrap_or_default()
    }

    fn pod_readiness(&self) -> Option<Readiness> {
        self.readiness
    }

    fn pod_status_reason(&self) -> &str {
        self.status_reason.as_deref().unwrap_or_default()
    }

    fn pod_max_container_restarts(&self) -> (i32, i32) {
        self.max_container_restarts
    }
}

macro_rules! pod_fields_through {
    ($($wrapper:ty),*) => {$(
        impl<P: PodFields + ?Sized> PodFields for $wrapper {
            fn pod_metadata(&self) -> &ObjectMeta {
                (**self).pod_metadata()
            }

            fn pod_phase(&self) -> &str {
                (**self).pod_phase()
            }

            fn pod_node_name(&self) -> &str {
                (**self).pod_node_name()
            }

            fn pod_readiness(&self) -> Option<Readiness> {
                (**self).pod_readiness()
            }

            fn pod_status_reason(&self) -> &str {
                (**self).pod_status_reason()
            }

            fn pod_max_container_restarts(&self) -> (i32, i32) {
                (**self).pod_max_container_restarts()
            }
        }
    )*};
}

pod_fields_through!(&P, Arc<P>, Box<P>);

/// `status.phase`, empty when unset.
pub fn phase<P: PodFields + ?Sized>(pod: &P) -> &str {
    pod.pod_phase()
}

/// `IsPodActive`: not Succeeded, not Failed and not being deleted.
pub fn is_pod_active<P: PodFields + ?Sized>(pod: &P) -> bool {
    !matches!(pod.pod_phase(), "Succeeded" | "Failed") && pod.pod_metadata().deletion_timestamp.is_none()
}

/// `GetPodReadyCondition`: the first `Ready` condition.
pub fn get_pod_ready_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status.as_ref()?.conditions.iter().flatten().find(|c| c.type_ == "Ready")
}

/// `IsPodReady`: the pod's Ready condition is True.
pub fn is_pod_ready<P: PodFields + ?Sized>(pod: &P) -> bool {
    pod.pod_readiness().is_some_and(|r| r.ready)
}

/// `podReadyTime` and the like: when a ready pod became ready; `None` when it is not ready or
/// its Ready condition has no `lastTransitionTime`.
pub fn ready_since<P: PodFields + ?Sized>(pod: &P) -> Option<Timestamp> {
    pod.pod_readiness().filter(|r| r.ready).and_then(|r| r.since)
}

/// `IsPodAvailable`: ready, and either `min_ready_seconds` is 0 or the Ready condition's
/// `lastTransitionTime + min_ready_seconds <= now`. v1.36 made the boundary inclusive (v1.33
/// required the sum to be before `now`), so a pod is available at exactly the second it is
/// due, the time the controllers' availability requeues aim at.
pub fn is_pod_available<P: PodFields + ?Sized>(pod: &P, min_ready_seconds: i32, now: Timestamp) -> bool {
    if !is_pod_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    let due =
        ready_since(pod).and_then(|t| t.checked_add(SignedDuration::from_secs(i64::from(min_ready_seconds))).ok());
    due.is_some_and(|due| due <= now)
}

/// `CalculatePodConditionObservedGeneration` and `CalculatePodStatusObservedGeneration`: with
/// PodObservedGenerationTracking GA and locked on since v1.35 (it was alpha and off in v1.33),
/// the `observedGeneration` a controller writes in a pod condition or the pod status is the
/// pod's `metadata.generation`; `None` for 0, which Go's `omitempty` leaves out.
pub fn observed_generation<P: PodFields + ?Sized>(pod: &P) -> Option<i64> {
    pod.pod_metadata().generation.filter(|generation| *generation != 0)
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
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures {
    use jiff::Timestamp;
    use k8s_openapi::api::core::v1::PodCondition;

    /// A condition of `type_` in `status` for `reason`.
    pub fn condition(type_: &str, status: &str, reason: &str) -> PodCondition {
        PodCondition {
            type_: type_.into(),
            status: status.into(),
            reason: Some(reason.into()),
            ..PodCondition::default()
        }
    }

    /// `seconds` after the epoch.
    pub fn at(seconds: i64) -> Timestamp {
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

    #[test]
    fn a_summary_answers_as_its_pod() {
        let since = "1970-01-01T00:00:10Z";
        let pods = [
            pod(json!({})),
            pod(json!({"phase": "Running", "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True", "lastTransitionTime": since, "reason": "r", "message": "m"},
                {"type": "Ready", "status": "False"}]})),
            pod(
                json!({"phase": "Pending", "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": since}]}),
            ),
            pod(json!({"phase": "Failed"})),
        ];
        for mut whole in pods {
            whole.spec =
                Some(k8s_openapi::api::core::v1::PodSpec { node_name: Some("n1".into()), ..Default::default() });
            let summary = PodSummary::of(&whole);
            assert_eq!(summary.pod_metadata(), whole.pod_metadata());
            assert_eq!((phase(&summary), summary.pod_node_name()), (phase(&whole), "n1"));
            assert_eq!(summary.pod_readiness(), whole.pod_readiness());
            assert_eq!(
                (is_pod_ready(&summary), is_pod_active(&summary)),
                (is_pod_ready(&whole), is_pod_active(&whole))
            );
            for (min_ready, now) in [(0, 0), (5, 14), (5, 15)] {
                assert_eq!(
                    is_pod_available(&summary, min_ready, at(now)),
                    is_pod_available(&whole, min_ready, at(now))
                );
            }
            assert_eq!(ready_since(&Arc::new(summary)), ready_since(&&whole));
        }
    }
}
