//! Upstream's (v1.36) `replica_calculator.go` and `metrics/utilization.go`: from pods and their metric
//! samples to a replica count. Pure functions over the pods (from the pod cache), the samples
//! (from the metrics client) and the time, so every rule is tested without a server.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;

use super::Error;
use crate::apimachinery::pod::{get_pod_ready_condition, is_pod_ready};
use crate::quantity::Quantity;
use crate::quota::pods::{is_pod_level_requests_set, pod_requests};

/// One pod's sample: `metricsclient.PodMetric` (values in milli-units).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodMetric {
    /// When it was taken.
    pub timestamp: Timestamp,
    /// Over how long.
    pub window: Duration,
    /// Milli-units.
    pub value: i64,
}

/// Samples by pod name (`PodMetricsInfo`).
pub type PodMetricsInfo = HashMap<String, PodMetric>;

/// The usage-ratio band within which nothing changes (`Tolerances`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerances {
    /// Below 1.
    pub scale_down: f64,
    /// Above 1.
    pub scale_up: f64,
}

impl Tolerances {
    /// The same tolerance both ways.
    pub fn both(tolerance: f64) -> Tolerances {
        Tolerances { scale_down: tolerance, scale_up: tolerance }
    }

    /// `isWithin`.
    pub fn is_within(&self, ratio: f64) -> bool {
        (1.0 - self.scale_down) <= ratio && ratio <= (1.0 + self.scale_up)
    }
}

impl std::fmt::Display for Tolerances {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[down:{:.1}%, up:{:.1}%]", self.scale_down * 100.0, self.scale_up * 100.0)
    }
}

/// The two readiness timings of `ReplicaCalculator`, and the gate its requests follow.
#[derive(Debug, Clone, Copy)]
pub struct ReplicaCalculator {
    /// `--horizontal-pod-autoscaler-cpu-initialization-period`.
    pub cpu_initialization_period: Duration,
    /// `--horizontal-pod-autoscaler-initial-readiness-delay`.
    pub delay_of_initial_readiness_status: Duration,
    /// The `PodLevelResources` feature gate: pod-level requests count where set.
    pub pod_level_resources: bool,
}

/// How pods were sorted by `groupPods`.
#[derive(Debug, Default, PartialEq)]
pub struct Groups {
    /// Pods counted as they are.
    pub ready: usize,
    /// Pending pods, and (for cpu) pods not ready long enough.
    pub unready: HashSet<String>,
    /// Running pods without a sample.
    pub missing: HashSet<String>,
    /// Deleted and failed pods.
    pub ignored: HashSet<String>,
}

/// `int32(math.Ceil(x))`, capped at the int32 range as v1.36 caps replica counts (Rust's
/// conversion saturates).
fn ceil(x: f64) -> i32 {
    x.ceil() as i32
}

fn after(t: Timestamp, d: Duration) -> Timestamp {
    t.checked_add(SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)).unwrap_or(Timestamp::MAX)
}

impl ReplicaCalculator {
    /// `groupPods`.
    pub fn group_pods(&self, pods: &[Arc<Pod>], metrics: &PodMetricsInfo, resource: &str, now: Timestamp) -> Groups {
        let mut groups = Groups::default();
        for pod in pods {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("");
            if pod.metadata.deletion_timestamp.is_some() || phase == "Failed" {
                groups.ignored.insert(name);
                continue;
            }
            if phase == "Pending" {
                groups.unready.insert(name);
                continue;
            }
            let Some(metric) = metrics.get(&name) else {
                groups.missing.insert(name);
                continue;
            };
            if resource == "cpu" && self.cpu_unready(pod, metric, now) {
                groups.unready.insert(name);
                continue;
            }
            groups.ready += 1;
        }
        groups
    }

    /// The cpu rule of `groupPods`: a sample taken while the pod was starting is not trusted.
    fn cpu_unready(&self, pod: &Pod, metric: &PodMetric, now: Timestamp) -> bool {
        let condition = get_pod_ready_condition(pod);
        let start = pod.status.as_ref().and_then(|s| s.start_time.as_ref()).map(|t| t.0);
        let (Some(condition), Some(start)) = (condition, start) else { return true };
        // Go's zero time when the condition has none.
        let transition = condition.last_transition_time.as_ref().map_or(Timestamp::MIN, |t| t.0);
        if after(start, self.cpu_initialization_period) > now {
            condition.status == "False" || metric.timestamp < after(transition, metric.window)
        } else {
            condition.status == "False" && after(start, self.delay_of_initial_readiness_status) > transition
        }
    }

    /// `GetResourceReplicas` once the samples are read: (replicas, utilization, raw average).
    #[allow(clippy::too_many_arguments)]
    pub fn resource_replicas(
        &self,
        pods: &[Arc<Pod>],
        mut metrics: PodMetricsInfo,
        current: i32,
        target_utilization: i32,
        resource: &str,
        tolerances: Tolerances,
        container: &str,
        now: Timestamp,
    ) -> Result<(i32, i32, i64), Error> {
        if pods.is_empty() {
            return Err(Error::NoPods);
        }
        let groups = self.group_pods(pods, &metrics, resource, now);
        remove(&mut metrics, &groups.ignored);
        remove(&mut metrics, &groups.unready);
        if metrics.is_empty() {
            return Err(Error::NoPodMetrics);
        }
        let requests = calculate_requests(pods, container, resource, self.pod_level_resources)?;
        let (ratio, utilization, raw) = resource_utilization_ratio(&metrics, &requests, target_utilization)?;
        let scale_up_with_unready = !groups.unready.is_empty() && ratio > 1.0;
        if !scale_up_with_unready && groups.missing.is_empty() {
            if tolerances.is_within(ratio) {
                return Ok((current, utilization, raw));
            }
            return Ok((ceil(ratio * groups.ready as f64), utilization, raw));
        }
        if !groups.missing.is_empty() {
            if ratio < 1.0 {
                // On a scale-down, missing pods use 100% of their request (or the target, if higher).
                let fallback = i64::from(target_utilization.max(100));
                for name in &groups.missing {
                    let value = requests.get(name).copied().unwrap_or(0) * fallback / 100;
                    metrics.insert(name.clone(), zero_sample(value));
                }
            } else if ratio > 1.0 {
                for name in &groups.missing {
                    metrics.insert(name.clone(), zero_sample(0));
                }
            }
        }
        if scale_up_with_unready {
            for name in &groups.unready {
                metrics.insert(name.clone(), zero_sample(0));
            }
        }
        let (new_ratio, _, _) = resource_utilization_ratio(&metrics, &requests, target_utilization)?;
        Ok((rebalanced(current, ratio, new_ratio, metrics.len(), tolerances), utilization, raw))
    }

    /// `calcPlainMetricReplicas` (AverageValue of a resource, Pods metrics): (replicas, usage).
    #[allow(clippy::too_many_arguments)]
    pub fn plain_metric_replicas(
        &self,
        pods: &[Arc<Pod>],
        mut metrics: PodMetricsInfo,
        current: i32,
        target_usage: i64,
        resource: &str,
        tolerances: Tolerances,
        now: Timestamp,
    ) -> Result<(i32, i64), Error> {
        if pods.is_empty() {
            return Err(Error::NoPods);
        }
        let groups = self.group_pods(pods, &metrics, resource, now);
        remove(&mut metrics, &groups.ignored);
        remove(&mut metrics, &groups.unready);
        if metrics.is_empty() {
            return Err(Error::NoPodMetrics);
        }
        let (ratio, usage) = metric_usage_ratio(&metrics, target_usage);
        let scale_up_with_unready = !groups.unready.is_empty() && ratio > 1.0;
        if !scale_up_with_unready && groups.missing.is_empty() {
            if tolerances.is_within(ratio) {
                return Ok((current, usage));
            }
            return Ok((ceil(ratio * groups.ready as f64), usage));
        }
        if !groups.missing.is_empty() {
            // Missing pods use exactly the target on a scale-down, nothing on a scale-up.
            let value = if ratio < 1.0 {
                Some(target_usage)
            } else if ratio > 1.0 {
                Some(0)
            } else {
                None
            };
            if let Some(value) = value {
                for name in &groups.missing {
                    metrics.insert(name.clone(), zero_sample(value));
                }
            }
        }
        if scale_up_with_unready {
            for name in &groups.unready {
                metrics.insert(name.clone(), zero_sample(0));
            }
        }
        let (new_ratio, _) = metric_usage_ratio(&metrics, target_usage);
        Ok((rebalanced(current, ratio, new_ratio, metrics.len(), tolerances), usage))
    }
}

/// The end of both calculations once missing and unready pods were given values: no change
/// when within tolerance or when the direction would flip.
fn rebalanced(current: i32, ratio: f64, new_ratio: f64, samples: usize, tolerances: Tolerances) -> i32 {
    if tolerances.is_within(new_ratio) || (ratio < 1.0 && new_ratio > 1.0) || (ratio > 1.0 && new_ratio < 1.0) {
        return current;
    }
    let replicas = ceil(new_ratio * samples as f64);
    if (new_ratio < 1.0 && replicas > current) || (new_ratio > 1.0 && replicas < current) {
        return current;
    }
    replicas
}

fn zero_sample(value: i64) -> PodMetric {
    PodMetric { timestamp: Timestamp::UNIX_EPOCH, window: Duration::ZERO, value }
}

fn remove(metrics: &mut PodMetricsInfo, pods: &HashSet<String>) {
    for pod in pods {
        metrics.remove(pod);
    }
}

/// `getUsageRatioReplicaCount`: ready pods × ratio, or just the ratio when scaled to zero.
pub fn usage_ratio_replica_count(
    current: i32,
    ratio: f64,
    tolerances: Tolerances,
    pods: &[Arc<Pod>],
) -> Result<i32, Error> {
    if current == 0 {
        return Ok(ceil(ratio));
    }
    if tolerances.is_within(ratio) {
        return Ok(current);
    }
    if pods.is_empty() {
        return Err(Error::NoReadyPods);
    }
    let ready = pods
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") && is_pod_ready(p))
        .count();
    Ok(ceil(ratio * ready as f64))
}

/// `GetObjectPerPodMetricReplicas` once the total is read: (replicas, usage per pod).
pub fn per_pod_replicas(status_replicas: i32, target_per_pod: i64, total: i64, tolerances: Tolerances) -> (i32, i64) {
    let mut replicas = status_replicas;
    let ratio = total as f64 / (target_per_pod as f64 * f64::from(replicas));
    if !tolerances.is_within(ratio) {
        replicas = ceil(total as f64 / target_per_pod as f64);
    }
    (replicas, (total as f64 / f64::from(status_replicas)).ceil() as i64)
}

/// `GetExternalPerPodMetricReplicas` once the values are read: (replicas, usage per pod). As
/// v1.36, a total that overflows (or goes negative) counts as `MaxInt64`, which is then also
/// the usage shown, undivided.
pub fn external_per_pod_replicas(
    status_replicas: i32,
    target_per_pod: i64,
    values: &[i64],
    tolerances: Tolerances,
) -> (i32, i64) {
    let mut total = 0i64;
    for value in values {
        total = total.wrapping_add(*value);
        if total < 0 {
            total = i64::MAX;
            break;
        }
    }
    let (replicas, per_pod) = per_pod_replicas(status_replicas, target_per_pod, total, tolerances);
    // Go compares in float64, where values within 512 of MaxInt64 round up to 2^63.
    if total as f64 >= i64::MAX as f64 { (replicas, i64::MAX) } else { (replicas, per_pod) }
}

/// The total of `GetExternalMetricReplicas`: positive values that would overflow cap it at
/// `MaxInt64` (v1.36).
pub fn external_total(values: &[i64]) -> i64 {
    let mut total = 0i64;
    for value in values {
        if *value > 0 && total > i64::MAX - value {
            return i64::MAX;
        }
        total = total.wrapping_add(*value);
    }
    total
}

/// `calculateRequests`: each pod's request of `resource` in milli-units. With
/// `pod_level_resources` (the PodLevelResources gate) and no `container` named, a pod with
/// pod-level requests is charged its `PodRequests`; otherwise its containers and restartable
/// init containers (or only `container`) are summed.
pub fn calculate_requests(
    pods: &[Arc<Pod>],
    container: &str,
    resource: &str,
    pod_level_resources: bool,
) -> Result<HashMap<String, i64>, Error> {
    let mut requests = HashMap::with_capacity(pods.len());
    for pod in pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let request = if pod_level_resources && container.is_empty() && is_pod_level_requests_set(pod) {
            pod_level_request(pod, resource)?
        } else {
            container_requests(pod, container, resource)?
        };
        requests.insert(name, request);
    }
    Ok(requests)
}

/// `calculatePodLevelRequests`: the pod's `PodRequests` of `resource` (pod-level where set,
/// else its containers', plus the overhead).
fn pod_level_request(pod: &Pod, resource: &str) -> Result<i64, Error> {
    let requests = pod_requests(pod, false);
    let Some(request) = requests.get(resource) else {
        let pod = pod.metadata.name.clone().unwrap_or_default();
        return Err(Error::MissingPodLevelRequest { resource: resource.into(), pod });
    };
    Ok(request.milli_value() as i64)
}

/// `calculatePodRequestsFromContainers`: the requests of the pod's containers and restartable
/// init containers, or of `container` alone (which, since v1.36, must exist).
fn container_requests(pod: &Pod, container: &str, resource: &str) -> Result<i64, Error> {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let not_found = || Error::ContainerNotFound { container: container.into(), pod: name.into() };
    let Some(spec) = pod.spec.as_ref() else {
        return if container.is_empty() { Ok(0) } else { Err(not_found()) };
    };
    let sidecars = spec.init_containers.iter().flatten().filter(|c| c.restart_policy.as_deref() == Some("Always"));
    let mut sum = 0i64;
    for c in spec.containers.iter().chain(sidecars) {
        if container.is_empty() || container == c.name {
            let request = c.resources.as_ref().and_then(|r| r.requests.as_ref()).and_then(|r| r.get(resource));
            let Some(request) = request else {
                let (resource, container, pod) = (resource.into(), c.name.clone(), name.into());
                return Err(Error::MissingRequest { resource, container, pod });
            };
            sum += Quantity::parse(&request.0).map(|q| q.milli_value() as i64).unwrap_or(0);
        }
        // Container names are unique in a pod.
        if container == c.name {
            return Ok(sum);
        }
    }
    if !container.is_empty() {
        return Err(not_found());
    }
    Ok(sum)
}

/// `GetResourceUtilizationRatio`: (ratio, utilization %, raw average).
pub fn resource_utilization_ratio(
    metrics: &PodMetricsInfo,
    requests: &HashMap<String, i64>,
    target_utilization: i32,
) -> Result<(f64, i32, i64), Error> {
    let (mut metrics_total, mut requests_total, mut entries) = (0i64, 0i64, 0i64);
    for (pod, metric) in metrics {
        // Samples of pods without a request are extraneous.
        let Some(request) = requests.get(pod) else { continue };
        metrics_total += metric.value;
        requests_total += request;
        entries += 1;
    }
    if requests_total == 0 {
        return Err(Error::NoMatchingMetrics);
    }
    let utilization = (metrics_total * 100 / requests_total) as i32;
    Ok((f64::from(utilization) / f64::from(target_utilization), utilization, metrics_total / entries))
}

/// `GetMetricUsageRatio`: (ratio, average usage).
pub fn metric_usage_ratio(metrics: &PodMetricsInfo, target_usage: i64) -> (f64, i64) {
    let total: i64 = metrics.values().map(|m| m.value).sum();
    let usage = total / metrics.len().max(1) as i64;
    (usage as f64 / target_usage as f64, usage)
}

#[cfg(test)]
mod tests;
