//! The deletion rankings of `pkg/controller/controller_utils.go`: `ActivePodsWithRanks` (the
//! ReplicaSet controller's) and `ActivePods` (the Job controller's); activity, readiness and
//! availability are [`crate::apimachinery::pod`]'s.

use std::cmp::Ordering;
use std::collections::HashMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::apimachinery::pod::{PodFields, is_pod_active, is_pod_ready, phase};

/// `PodDeletionCost` annotation (`controller.kubernetes.io/pod-deletion-cost`).
pub const DELETION_COST_ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";

/// `namespace/name` of a pod (`controller.PodKey`).
pub fn pod_key(pod: &Pod) -> String {
    format!("{}/{}", pod.metadata.namespace.as_deref().unwrap_or(""), pod.metadata.name.as_deref().unwrap_or(""))
}

/// `metav1.GetControllerOf`: the owner reference with `controller: true`.
pub fn controller_of(pod: &Pod) -> Option<&OwnerReference> {
    pod.metadata.owner_references.iter().flatten().find(|r| r.controller == Some(true))
}

/// `podReadyTime`: when a ready pod became ready (None when unknown or not ready).
fn ready_time<P: PodFields>(pod: &P) -> Option<Timestamp> {
    pod.pod_readiness().filter(|readiness| readiness.ready).and_then(|readiness| readiness.since)
}

/// `podPhaseToOrdinal`: Pending (and anything unlisted) < Unknown < Running.
fn phase_ordinal<P: PodFields>(pod: &P) -> u8 {
    match phase(pod) {
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

/// `GetDeletionCostFromPodAnnotations`; an invalid value counts as 0.
fn deletion_cost<P: PodFields>(pod: &P) -> i32 {
    let annotations = pod.pod_metadata().annotations.as_ref();
    annotations.and_then(|a| a.get(DELETION_COST_ANNOTATION)).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

/// `afterOrZero`: a missing time sorts first, then later times before earlier ones.
fn after_or_zero(a: Option<Timestamp>, b: Option<Timestamp>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => b.cmp(&a),
    }
}

/// `logarithmicRankDiff` ordering: times compared by the power-of-two bucket of their age,
/// younger bucket first; None when in the same bucket.
fn logarithmic_order(a: Timestamp, b: Timestamp, now: Timestamp) -> Option<Ordering> {
    let bucket = |t: Timestamp| {
        let age = now.as_nanosecond() - t.as_nanosecond();
        if age > 0 { (age as f64).log2() as i64 } else { -1 }
    };
    let diff = bucket(a) - bucket(b);
    (diff != 0).then(|| diff.cmp(&0))
}

/// Compares two times as upstream's ranking does with `LogarithmicScaleDown` (on by
/// default): a missing time first, then by logarithmic age bucket, then by UID.
fn time_order(a: Option<Timestamp>, b: Option<Timestamp>, now: Timestamp, uids: (&str, &str)) -> Ordering {
    match (a, b) {
        (Some(x), Some(y)) => logarithmic_order(x, y, now).unwrap_or_else(|| uids.0.cmp(uids.1)),
        _ => after_or_zero(a, b),
    }
}

/// The first rules of both rankings, read once from a pod: unassigned before assigned,
/// Pending before Unknown before Running, not ready before ready.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Placement {
    assigned: bool,
    phase: u8,
    ready: bool,
}

impl Placement {
    fn of<P: PodFields>(pod: &P) -> Placement {
        Placement { assigned: !pod.pod_node_name().is_empty(), phase: phase_ordinal(pod), ready: is_pod_ready(pod) }
    }

    /// Two pods on different nodes of which one has none: the unassigned one first; pods both
    /// assigned (or both not) go on to the phase, then readiness.
    fn order(&self, other: &Placement) -> Ordering {
        (self.assigned.cmp(&other.assigned)).then(self.phase.cmp(&other.phase)).then(self.ready.cmp(&other.ready))
    }
}

/// What `ActivePodsWithRanks.Less` reads of a pod, read once. The ranking compares each pod
/// with many others; this way a pod is unpacked from the cache once, for this, and not kept
/// unpacked while the others are (a scale-down of a large ReplicaSet held them all), and no
/// annotation is parsed again at every comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct DeletionRank {
    placement: Placement,
    node: String,
    cost: i32,
    ready_time: Option<Timestamp>,
    restarts: (i32, i32),
    created: Option<Timestamp>,
    uid: String,
}

impl DeletionRank {
    /// The rank of `pod`: a cached pod's summary has all it reads.
    pub fn of<P: PodFields>(pod: &P) -> DeletionRank {
        let metadata = pod.pod_metadata();
        DeletionRank {
            placement: Placement::of(pod),
            node: pod.pod_node_name().to_string(),
            cost: deletion_cost(pod),
            ready_time: ready_time(pod),
            restarts: pod.pod_max_container_restarts(),
            created: metadata.creation_timestamp.as_ref().map(|t| t.0),
            uid: metadata.uid.clone().unwrap_or_default(),
        }
    }
}

/// `ActivePodsWithRanks.Less`: which of two pods to delete first. `rank_*`: how many related
/// pods share each pod's node.
pub fn deletion_order(a: &DeletionRank, rank_a: usize, b: &DeletionRank, rank_b: usize, now: Timestamp) -> Ordering {
    // 1-3. Unassigned < assigned, Pending < Unknown < Running, not ready < ready.
    let first = a.placement.order(&b.placement);
    if first != Ordering::Equal {
        return first;
    }
    // 4. Lower pod-deletion-cost < higher.
    let by_cost = a.cost.cmp(&b.cost);
    if by_cost != Ordering::Equal {
        return by_cost;
    }
    // 5. Doubled up < not doubled up.
    if rank_a != rank_b {
        return rank_b.cmp(&rank_a);
    }
    // 6. Ready for a shorter time < longer.
    if a.placement.ready && b.placement.ready && a.ready_time != b.ready_time {
        return time_order(a.ready_time, b.ready_time, now, (&a.uid, &b.uid));
    }
    // 7. More container restarts < fewer.
    let (ra, rb) = (a.restarts, b.restarts);
    if ra.0 != rb.0 {
        return rb.0.cmp(&ra.0);
    }
    if ra.1 != rb.1 {
        return rb.1.cmp(&ra.1);
    }
    // 8. Newer < older.
    if a.created != b.created {
        return time_order(a.created, b.created, now, (&a.uid, &b.uid));
    }
    Ordering::Equal
}

/// `ActivePods.Less` (the Job controller's ranking): unassigned, then earlier phases, not
/// ready, ready for a shorter time, more restarts, newer pods first; no deletion cost, no
/// node ranking and plain (not logarithmic) times.
pub fn active_pods_order(a: &Pod, b: &Pod) -> Ordering {
    let first = Placement::of(a).order(&Placement::of(b));
    if first != Ordering::Equal {
        return first;
    }
    if is_pod_ready(a) && is_pod_ready(b) {
        let (ta, tb) = (ready_time(a), ready_time(b));
        if ta != tb {
            return after_or_zero(ta, tb);
        }
    }
    let (ra, rb) = (a.pod_max_container_restarts(), b.pod_max_container_restarts());
    if ra != rb {
        return if ra.0 != rb.0 { rb.0.cmp(&ra.0) } else { rb.1.cmp(&ra.1) };
    }
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    after_or_zero(created(a), created(b))
}

/// `getPodsToDelete` with `getPodsRankedByRelatedPodsOnSameNode`: of `pods`, each with its
/// rank, the first `count` to delete, ranking pods on nodes crowded with related pods first.
/// The related pods are counted only, so their summaries do.
pub fn pods_to_delete<T: Clone, P: PodFields>(
    mut pods: Vec<(T, DeletionRank)>,
    related: &[P],
    count: usize,
    now: Timestamp,
) -> Vec<T> {
    if count < pods.len() {
        let mut on_node: HashMap<&str, usize> = HashMap::new();
        for pod in related.iter().filter(is_pod_active) {
            *on_node.entry(pod.pod_node_name()).or_default() += 1;
        }
        let rank = |r: &DeletionRank| on_node.get(r.node.as_str()).copied().unwrap_or(0);
        // Not `sort_by`: upstream's `ActivePodsWithRanks.Less` is not a total order (pods
        // ready within one logarithmic bucket compare by UID, pods ready at the same instant
        // by restarts and age), which Go's sort tolerates and Rust's may panic on.
        merge_sort_by(&mut pods, |(_, a), (_, b)| deletion_order(a, rank(a), b, rank(b), now));
    }
    pods.truncate(count);
    pods.into_iter().map(|(pod, _)| pod).collect()
}

/// A stable bottom-up merge sort that ends, with a permutation of `items`, whatever `order`
/// answers: `slice::sort_by` may panic when `order` is not a total order. For a total order
/// it sorts as `sort_by` does (both are stable).
fn merge_sort_by<T: Clone>(items: &mut Vec<T>, order: impl Fn(&T, &T) -> Ordering) {
    let len = items.len();
    let mut from = std::mem::take(items);
    let mut into = Vec::with_capacity(len);
    let mut width = 1;
    while width < len {
        into.clear();
        let mut start = 0;
        while start < len {
            let (middle, end) = ((start + width).min(len), (start + 2 * width).min(len));
            let (mut left, mut right) = (start, middle);
            while left < middle && right < end {
                // Only a strictly smaller right item goes first: equal ones keep their order.
                if order(&from[right], &from[left]) == Ordering::Less {
                    into.push(from[right].clone());
                    right += 1;
                } else {
                    into.push(from[left].clone());
                    left += 1;
                }
            }
            into.extend_from_slice(&from[left..middle]);
            into.extend_from_slice(&from[right..end]);
            start = end;
        }
        std::mem::swap(&mut from, &mut into);
        width *= 2;
    }
    *items = from;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn pod(name: &str, node: &str, phase: &str, ready: Option<&str>) -> Arc<Pod> {
        let mut conditions = vec![];
        if let Some(since) = ready {
            conditions.push(json!({"type": "Ready", "status": "True", "lastTransitionTime": since}));
        }
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": name,
                         "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"nodeName": node, "containers": []},
            "status": {"phase": phase, "conditions": conditions},
        }))
        .map(Arc::new)
        .expect("a pod")
    }

    fn ranked(pods: &[Arc<Pod>]) -> Vec<(Arc<Pod>, DeletionRank)> {
        pods.iter().map(|pod| (pod.clone(), DeletionRank::of(pod))).collect()
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<&str> {
        pods.iter().map(|p| p.metadata.name.as_deref().unwrap_or("")).collect()
    }

    #[test]
    fn deletion_prefers_unassigned_pending_and_unready_pods() {
        let now: Timestamp = "2024-01-02T00:00:00Z".parse().expect("a time");
        let pods = vec![
            pod("running-ready", "n1", "Running", Some("2024-01-01T00:00:10Z")),
            pod("running-unready", "n1", "Running", None),
            pod("pending", "n1", "Pending", None),
            pod("unassigned", "", "Pending", None),
            pod("ready-recently", "n2", "Running", Some("2024-01-01T23:59:00Z")),
        ];
        let order = pods_to_delete::<_, Pod>(ranked(&pods), &[], 4, now);
        assert_eq!(names(&order), ["unassigned", "pending", "running-unready", "ready-recently"]);
        // Deleting them all needs no ranking (upstream does not sort then).
        assert_eq!(pods_to_delete::<_, Pod>(ranked(&pods), &[], 5, now).len(), 5);
        assert_eq!(names(&pods_to_delete::<_, Pod>(ranked(&pods), &[], 2, now)), ["unassigned", "pending"]);
    }

    #[test]
    fn a_pods_summary_ranks_as_the_pod() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "ns", "uid": "u1", "creationTimestamp": "2024-01-01T00:00:00Z",
                         "annotations": {DELETION_COST_ANNOTATION: " -7 "}},
            "spec": {"nodeName": "n1", "containers": [{"name": "app"}],
                     "initContainers": [{"name": "proxy", "restartPolicy": "Always"}, {"name": "setup"}]},
            "status": {"phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-01T00:01:00Z"}],
                       "containerStatuses": [{"name": "app", "restartCount": 3}],
                       "initContainerStatuses": [{"name": "proxy", "restartCount": 5}, {"name": "setup", "restartCount": 9}]},
        }))
        .expect("a pod");
        let rank = DeletionRank::of(&pod);
        assert_eq!(rank.restarts, (3, 5), "a sidecar's restarts apart, a plain init container's not counted");
        assert_eq!(rank.cost, -7);
        assert!(rank.ready_time.is_some());
        assert_eq!(DeletionRank::of(&crate::apimachinery::pod::PodSummary::of(&pod)), rank);
    }

    #[test]
    fn the_merge_sort_is_stable_and_ends_on_an_order_that_is_not_total() {
        let mut pairs = vec![(3, 'a'), (1, 'b'), (3, 'c'), (2, 'd'), (1, 'e'), (0, 'f'), (2, 'g')];
        let mut expected = pairs.clone();
        expected.sort_by_key(|pair| pair.0);
        merge_sort_by(&mut pairs, |a, b| a.0.cmp(&b.0));
        assert_eq!(pairs, expected, "as the standard library's stable sort");
        // Rock, paper, scissors: every item beats one and loses to another.
        let beats = |a: &u8, b: &u8| if (a + 1) % 3 == *b { Ordering::Less } else { Ordering::Greater };
        let mut cycle: Vec<u8> = (0..40).map(|i| (i * 7 % 3) as u8).collect();
        let mut before = cycle.clone();
        merge_sort_by(&mut cycle, beats);
        let mut after = cycle.clone();
        before.sort();
        after.sort();
        assert_eq!(after, before, "a permutation of the input");
        let mut none: Vec<u8> = Vec::new();
        merge_sort_by(&mut none, beats);
        assert!(none.is_empty());
    }

    #[test]
    fn doubled_up_pods_go_first() {
        let now: Timestamp = "2024-01-02T00:00:00Z".parse().expect("a time");
        let a = pod("alone", "n1", "Running", None);
        let b = pod("crowded", "n2", "Running", None);
        let related = vec![b.clone(), pod("other", "n2", "Running", None), a.clone()];
        assert_eq!(names(&pods_to_delete(ranked(&[a, b]), &related, 1, now)), ["crowded"]);
    }
}
