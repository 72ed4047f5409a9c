//! `computeReplicasForMetrics` and the per-type `computeStatusFor*Metric`: each metric spec to
//! a replica proposal and a metric status, failures to upstream's conditions, Events and
//! error texts.

use std::time::Instant;

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricStatus, ExternalMetricStatus, HorizontalPodAutoscaler, MetricIdentifier, MetricSpec,
    MetricStatus, MetricTarget, MetricValueStatus, ObjectMetricStatus, PodsMetricStatus, ResourceMetricStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as KQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::monitor::{Action, ErrorKind, monitor};
use super::replica_calculator::{
    external_per_pod_replicas, external_total, per_pod_replicas, usage_ratio_replica_count,
};
use super::status::{Condition, SCALING_ACTIVE};
use super::{Error, HorizontalController, ReconcileError};
use crate::apimachinery::labels::{Selector, label_selector_go_string};
use crate::apimachinery::schema::parse_group_version;
use crate::quantity::{Format, Quantity};
use crate::runtime::events::EventType;

/// What `computeReplicasForMetrics` returns; `replicas` is -1 when nothing can be done.
pub struct Computed {
    pub replicas: i32,
    pub metric: String,
    pub statuses: Option<Vec<MetricStatus>>,
    pub timestamp: Timestamp,
    pub error: Option<ReconcileError>,
}

/// One metric's proposal.
struct Proposal {
    replicas: i32,
    metric: String,
    timestamp: Timestamp,
    status: MetricStatus,
}

/// One metric's failure: the condition to set (if it got that far) and the error.
struct Failure {
    condition: Option<Condition>,
    error: ReconcileError,
}

fn milli_quantity(millis: i64) -> KQuantity {
    KQuantity(Quantity::from_millis(millis, Format::DecimalSI).canonical())
}

/// `buildQuantity` (v1.36): a resource metric's current average, in BinarySI for memory (as
/// metrics-server reports it: `100Mi`), DecimalSI otherwise (v1.33 used DecimalSI for both).
fn build_quantity(resource: &str, millis: i64) -> KQuantity {
    let format = if resource == "memory" { Format::BinarySI } else { Format::DecimalSI };
    KQuantity(Quantity::from_millis(millis, format).canonical())
}

fn target_milli(q: Option<&KQuantity>) -> Option<i64> {
    q.and_then(|q| Quantity::parse(&q.0).ok()).map(|q| q.milli_value() as i64)
}

fn metric_selector(selector: Option<&LabelSelector>) -> Result<Selector, Error> {
    let parsed = selector.map_or(Ok(Selector::everything()), Selector::from_label_selector);
    parsed.map_err(|e| Error::Parse(e.into()))
}

fn spec_name(spec: &MetricSpec) -> String {
    spec.type_.clone()
}

impl HorizontalController {
    /// `computeReplicasForMetrics`: the highest proposal; an error alone when every metric
    /// failed, or some did and the rest would scale down.
    pub(super) fn compute_replicas_for_metrics(
        &self,
        hpa: &mut HorizontalPodAutoscaler,
        scale: &Scale,
        specs: &[MetricSpec],
    ) -> Computed {
        let failed = |error: ReconcileError, statuses| Computed {
            replicas: -1,
            metric: String::new(),
            statuses,
            timestamp: Timestamp::UNIX_EPOCH,
            error: Some(error),
        };
        let raw_selector = scale.status.as_ref().and_then(|s| s.selector.as_deref()).unwrap_or_default();
        let selector = match self.validate_and_parse_selector(hpa, raw_selector) {
            Ok(selector) => selector,
            Err(e) => return failed(ReconcileError::internal(e), None),
        };
        let spec_replicas = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let status_replicas = scale.status.as_ref().map_or(0, |s| s.replicas);
        let mut statuses = vec![MetricStatus::default(); specs.len()];
        let (mut replicas, mut metric, mut timestamp) = (0, String::new(), Timestamp::UNIX_EPOCH);
        let mut invalid = 0;
        let mut first_failure: Option<Failure> = None;
        for (i, spec) in specs.iter().enumerate() {
            match self.compute_replicas_for_metric(hpa, spec, spec_replicas, status_replicas, &selector) {
                Ok(p) => {
                    statuses[i] = p.status;
                    if replicas == 0 || p.replicas > replicas {
                        (replicas, metric, timestamp) = (p.replicas, p.metric, p.timestamp);
                    }
                }
                Err(f) => {
                    if invalid == 0 {
                        first_failure = Some(f);
                    }
                    invalid += 1;
                }
            }
        }
        let (first_condition, error) = match first_failure {
            Some(Failure { condition, error: ReconcileError { error: first, spec } }) => {
                let error = Box::new(Error::InvalidMetrics { invalid, total: specs.len(), first });
                (condition, Some(ReconcileError { error, spec }))
            }
            None => (None, None),
        };
        let statuses = Some(statuses).filter(|s| !s.is_empty());
        if invalid >= specs.len() || (invalid > 0 && replicas < spec_replicas) {
            // Go's zero condition when no metric was listed.
            let condition = first_condition.unwrap_or_else(|| Condition::new("", false, "", ""));
            self.set_invalid_condition(hpa, condition);
            // With no metric at all there is no error either (the API server defaults one).
            let timestamp = Timestamp::UNIX_EPOCH;
            return Computed { replicas: -1, metric: String::new(), statuses, timestamp, error };
        }
        let message = format!("the HPA was able to successfully calculate a replica count from {metric}");
        self.set_condition(hpa, Condition::new(SCALING_ACTIVE, true, "ValidMetricFound", message));
        Computed { replicas, metric, statuses, timestamp, error }
    }

    /// Sets the condition of the first invalid metric (an empty one, as Go's zero value, when
    /// there was no metric at all).
    fn set_invalid_condition(&self, hpa: &mut HorizontalPodAutoscaler, condition: Condition) {
        if condition.type_.is_empty() {
            let status = hpa.status.get_or_insert_with(Default::default);
            let conditions = status.conditions.get_or_insert_with(Vec::new);
            if !conditions.iter().any(|c| c.type_.is_empty()) {
                conditions.push(Default::default());
            }
            return;
        }
        self.set_condition(hpa, condition);
    }

    /// `validateAndParseSelector`.
    fn validate_and_parse_selector(&self, hpa: &mut HorizontalPodAutoscaler, raw: &str) -> Result<Selector, Error> {
        if raw.is_empty() {
            let error = Error::SelectorRequired;
            self.recorder.event_for(hpa, EventType::Warning, "SelectorRequired", &error.to_string());
            let condition = Condition::new(
                SCALING_ACTIVE,
                false,
                "InvalidSelector",
                "the HPA target's scale is missing a selector",
            );
            self.set_condition(hpa, condition);
            return Err(error);
        }
        let selector = match Selector::parse(raw) {
            Ok(selector) => selector,
            Err(e) => {
                let error = Error::InvalidSelector(e.into());
                let message = error.to_string();
                self.recorder.event_for(hpa, EventType::Warning, "InvalidSelector", &message);
                self.set_condition(hpa, Condition::new(SCALING_ACTIVE, false, "InvalidSelector", message));
                return Err(error);
            }
        };
        let namespace = hpa.metadata.namespace.clone().unwrap_or_default();
        let key = format!("{namespace}/{}", hpa.metadata.name.as_deref().unwrap_or_default());
        self.selectors.put(&key, &selector);
        let pods = self.pods(&namespace, &selector);
        let selecting = self.selectors.controlling(&pods);
        if selecting.len() > 1 {
            let error = Error::AmbiguousSelector { selector: raw.to_string(), hpas: selecting.join(" ") };
            let message = error.to_string();
            self.recorder.event_for(hpa, EventType::Warning, "AmbiguousSelector", &message);
            self.set_condition(hpa, Condition::new(SCALING_ACTIVE, false, "AmbiguousSelector", message));
            return Err(error);
        }
        Ok(selector)
    }

    /// `computeReplicasForMetric`, observed by the monitor.
    fn compute_replicas_for_metric(
        &self,
        hpa: &HorizontalPodAutoscaler,
        spec: &MetricSpec,
        spec_replicas: i32,
        status_replicas: i32,
        selector: &Selector,
    ) -> Result<Proposal, Failure> {
        let started = Instant::now();
        let result = self.compute_for_type(hpa, spec, spec_replicas, status_replicas, selector);
        let current = hpa.status.as_ref().and_then(|s| s.current_replicas).unwrap_or(0);
        let (action, error) = match &result {
            Ok(p) => (Action::of(current, p.replicas), ErrorKind::None),
            Err(f) if f.error.spec => (Action::None, ErrorKind::Spec),
            Err(_) => (Action::None, ErrorKind::Internal),
        };
        monitor().computation(action, error, started.elapsed(), &spec_name(spec));
        result
    }

    /// `getUnableComputeReplicaCountCondition`: an Event, and the ScalingActive=False condition.
    fn unable(&self, hpa: &HorizontalPodAutoscaler, reason: &str, error: &str) -> Condition {
        self.recorder.event_for(hpa, EventType::Warning, reason, error);
        let message = format!("the HPA was unable to compute the replica count: {error}");
        Condition::new(SCALING_ACTIVE, false, reason, message)
    }

    /// A metric's failure: `inner`'s text in the Event and the condition, `outer` the error.
    fn failure(&self, hpa: &HorizontalPodAutoscaler, reason: &str, inner: &str, outer: Error) -> Failure {
        Failure { condition: Some(self.unable(hpa, reason, inner)), error: ReconcileError::internal(outer) }
    }

    fn compute_for_type(
        &self,
        hpa: &HorizontalPodAutoscaler,
        spec: &MetricSpec,
        spec_replicas: i32,
        status_replicas: i32,
        selector: &Selector,
    ) -> Result<Proposal, Failure> {
        match (spec.type_.as_str(), spec) {
            ("Object", MetricSpec { object: Some(_), .. }) => {
                self.object_metric(hpa, spec, spec_replicas, status_replicas, selector)
            }
            ("Pods", MetricSpec { pods: Some(_), .. }) => self.pods_metric(hpa, spec, spec_replicas, selector),
            ("Resource", MetricSpec { resource: Some(r), .. }) => {
                let (replicas, value, timestamp, metric) = self
                    .resource_metric_generic(hpa, spec_replicas, &r.target, &r.name, "", selector, false)
                    .map_err(|e| {
                        let inner = e.to_string();
                        let outer = e.context(format!("failed to get {} resource metric value", r.name));
                        self.failure(hpa, "FailedGetResourceMetric", &inner, outer)
                    })?;
                let status = MetricStatus {
                    type_: "Resource".into(),
                    resource: Some(ResourceMetricStatus { name: r.name.clone(), current: value }),
                    ..Default::default()
                };
                Ok(Proposal { replicas, metric, timestamp, status })
            }
            ("ContainerResource", MetricSpec { container_resource: Some(r), .. }) => {
                let (replicas, value, timestamp, metric) = self
                    .resource_metric_generic(hpa, spec_replicas, &r.target, &r.name, &r.container, selector, true)
                    .map_err(|e| {
                        let inner = e.to_string();
                        let outer = e.context(format!("failed to get {} container metric value", r.container));
                        self.failure(hpa, "FailedGetContainerResourceMetric", &inner, outer)
                    })?;
                let status = MetricStatus {
                    type_: "ContainerResource".into(),
                    container_resource: Some(ContainerResourceMetricStatus {
                        name: r.name.clone(),
                        container: r.container.clone(),
                        current: value,
                    }),
                    ..Default::default()
                };
                Ok(Proposal { replicas, metric, timestamp, status })
            }
            ("External", MetricSpec { external: Some(_), .. }) => {
                self.external_metric(hpa, spec, spec_replicas, status_replicas, selector)
            }
            _ => {
                let error = Error::UnknownMetricSourceType(spec.type_.clone());
                let condition = self.unable(hpa, "InvalidMetricSourceType", &error.to_string());
                Err(Failure { condition: Some(condition), error: ReconcileError::spec(error) })
            }
        }
    }

    /// `computeStatusForResourceMetricGeneric`: (replicas, current value, timestamp, metric name).
    #[allow(clippy::too_many_arguments)]
    fn resource_metric_generic(
        &self,
        hpa: &HorizontalPodAutoscaler,
        current: i32,
        target: &MetricTarget,
        resource: &str,
        container: &str,
        selector: &Selector,
        is_container: bool,
    ) -> Result<(i32, MetricValueStatus, Timestamp, String), Error> {
        let namespace = hpa.metadata.namespace.as_deref().unwrap_or_default();
        let tolerances = self.tolerances(hpa);
        let now = Timestamp::now();
        let fetch = || {
            self.metrics
                .resource_metric(resource, namespace, &selector.to_string(), container)
                .map_err(|e| e.context(format!("unable to get metrics for resource {resource}")))
        };
        if let Some(average) = target_milli(target.average_value.as_ref()) {
            let (replicas, usage, timestamp) = fetch()
                .and_then(|(samples, timestamp)| {
                    let pods = self.pods(namespace, selector);
                    let (replicas, usage) = self
                        .calculator
                        .plain_metric_replicas(&pods, samples, current, average, resource, tolerances, now)?;
                    Ok((replicas, usage, timestamp))
                })
                .map_err(|e| e.context(format!("failed to get {resource} usage")))?;
            let value =
                MetricValueStatus { average_value: Some(build_quantity(resource, usage)), ..Default::default() };
            return Ok((replicas, value, timestamp, format!("{resource} resource")));
        }
        let Some(utilization) = target.average_utilization else {
            return Err(Error::NoResourceTarget);
        };
        let (replicas, percentage, raw, timestamp) = fetch()
            .and_then(|(samples, timestamp)| {
                let pods = self.pods(namespace, selector);
                let (replicas, percentage, raw) = self.calculator.resource_replicas(
                    &pods,
                    samples,
                    current,
                    utilization,
                    resource,
                    tolerances,
                    container,
                    now,
                )?;
                Ok((replicas, percentage, raw, timestamp))
            })
            .map_err(|e| e.context(format!("failed to get {resource} utilization")))?;
        let metric = if is_container {
            format!("{resource} container resource utilization (percentage of request)")
        } else {
            format!("{resource} resource utilization (percentage of request)")
        };
        let value = MetricValueStatus {
            average_utilization: Some(percentage),
            average_value: Some(build_quantity(resource, raw)),
            ..Default::default()
        };
        Ok((replicas, value, timestamp, metric))
    }

    /// `computeStatusForPodsMetric`.
    fn pods_metric(
        &self,
        hpa: &HorizontalPodAutoscaler,
        spec: &MetricSpec,
        current: i32,
        selector: &Selector,
    ) -> Result<Proposal, Failure> {
        let pods_spec = spec.pods.as_ref().expect("matched on pods");
        let metric = &pods_spec.metric;
        let namespace = hpa.metadata.namespace.as_deref().unwrap_or_default();
        let metric_selector = metric_selector(metric.selector.as_ref()).map_err(|e| {
            let inner = e.to_string();
            self.failure(hpa, "FailedGetPodsMetric", &inner, e.context("failed to get pods metric value"))
        })?;
        let target = target_milli(pods_spec.target.average_value.as_ref()).unwrap_or(0);
        let computed = self
            .metrics
            .raw_metric(&metric.name, namespace, &selector.to_string(), &metric_selector.to_string())
            .map_err(|e| e.context(format!("unable to get metric {}", metric.name)))
            .and_then(|(samples, timestamp)| {
                let pods = self.pods(namespace, selector);
                let now = Timestamp::now();
                let tolerances = self.tolerances(hpa);
                let (replicas, usage) =
                    self.calculator.plain_metric_replicas(&pods, samples, current, target, "", tolerances, now)?;
                Ok((replicas, usage, timestamp))
            });
        let (replicas, usage, timestamp) = computed.map_err(|e| {
            let inner = e.to_string();
            self.failure(hpa, "FailedGetPodsMetric", &inner, e.context("failed to get pods metric value"))
        })?;
        let status = MetricStatus {
            type_: "Pods".into(),
            pods: Some(PodsMetricStatus {
                metric: identifier(metric),
                current: MetricValueStatus { average_value: Some(milli_quantity(usage)), ..Default::default() },
            }),
            ..Default::default()
        };
        Ok(Proposal { replicas, metric: format!("pods metric {}", metric.name), timestamp, status })
    }

    /// `computeStatusForObjectMetric`.
    fn object_metric(
        &self,
        hpa: &HorizontalPodAutoscaler,
        spec: &MetricSpec,
        spec_replicas: i32,
        status_replicas: i32,
        selector: &Selector,
    ) -> Result<Proposal, Failure> {
        let object = spec.object.as_ref().expect("matched on object");
        let metric = &object.metric;
        let described = &object.described_object;
        let namespace = hpa.metadata.namespace.as_deref().unwrap_or_default();
        let outer = |e: Error| e.context("failed to get object metric value");
        let metric_selector = metric_selector(metric.selector.as_ref())
            .map_err(|e| self.failure(hpa, "FailedGetObjectMetric", &e.to_string(), outer(e)))?;
        let fetch = || -> Result<(i64, Timestamp), Error> {
            let (group, _) = parse_group_version(described.api_version.as_deref().unwrap_or(""))
                .map_err(|e| Error::Parse(e.into()))?;
            let resource = if described.kind == "Namespace" && group.is_empty() {
                "namespaces".to_string()
            } else {
                let mapping = self.scales.mappings(group, &described.kind)?;
                let first = &mapping[0];
                if first.group.is_empty() { first.plural.clone() } else { format!("{}.{}", first.plural, first.group) }
            };
            self.metrics.object_metric(
                &metric.name,
                namespace,
                &resource,
                &described.name,
                &metric_selector.to_string(),
            )
        };
        let fetch_error = |e: Error| Error::ObjectMetric {
            metric: metric.name.clone(),
            kind: described.kind.clone(),
            namespace: namespace.to_string(),
            name: described.name.clone(),
            source: Box::new(e),
        };
        let tolerances = self.tolerances(hpa);
        let mut status = ObjectMetricStatus {
            described_object: described.clone(),
            metric: identifier(metric),
            current: MetricValueStatus::default(),
        };
        let (replicas, timestamp, name) = if object.target.type_ == "Value" && object.target.value.is_some() {
            let target = target_milli(object.target.value.as_ref()).unwrap_or(1);
            let (replicas, usage) = fetch()
                .map_err(fetch_error)
                .and_then(|(usage, _)| {
                    let pods = self.pods(namespace, selector);
                    let ratio = usage as f64 / target as f64;
                    Ok((usage_ratio_replica_count(spec_replicas, ratio, tolerances, &pods)?, usage))
                })
                .map_err(|e| self.failure(hpa, "FailedGetObjectMetric", &e.to_string(), outer(e)))?;
            status.current.value = Some(milli_quantity(usage));
            // Upstream leaves this proposal's timestamp unset.
            (replicas, Timestamp::UNIX_EPOCH, format!("{} metric {}", described.kind, metric.name))
        } else if object.target.type_ == "AverageValue" && object.target.average_value.is_some() {
            let target = target_milli(object.target.average_value.as_ref()).unwrap_or(1);
            let (total, timestamp) = fetch().map_err(fetch_error).map_err(|e| {
                let event = e.to_string();
                let inner = e.context(format!("failed to get {} object metric", metric.name));
                self.failure(hpa, "FailedGetObjectMetric", &event, outer(inner))
            })?;
            let (replicas, usage) = per_pod_replicas(status_replicas, target, total, tolerances);
            status.current.average_value = Some(milli_quantity(usage));
            let name =
                format!("external metric {}({})", metric.name, label_selector_go_string(metric.selector.as_ref()));
            (replicas, timestamp, name)
        } else {
            let e = Error::NoObjectTarget;
            return Err(self.failure(hpa, "FailedGetObjectMetric", &e.to_string(), outer(e)));
        };
        let status = MetricStatus { type_: "Object".into(), object: Some(status), ..Default::default() };
        Ok(Proposal { replicas, metric: name, timestamp, status })
    }

    /// `computeStatusForExternalMetric`.
    fn external_metric(
        &self,
        hpa: &HorizontalPodAutoscaler,
        spec: &MetricSpec,
        spec_replicas: i32,
        status_replicas: i32,
        selector: &Selector,
    ) -> Result<Proposal, Failure> {
        let external = spec.external.as_ref().expect("matched on external");
        let metric = &external.metric;
        let namespace = hpa.metadata.namespace.as_deref().unwrap_or_default();
        let outer = |e: Error| e.context(format!("failed to get {} external metric value", metric.name));
        let shown = label_selector_go_string(metric.selector.as_ref());
        let fetch = || -> Result<(Vec<i64>, Timestamp), Error> {
            let metric_selector = metric_selector(metric.selector.as_ref())?;
            self.metrics
                .external_metric(&metric.name, namespace, &metric_selector.to_string())
                .map_err(|e| e.context(format!("unable to get external metric {namespace}/{}/{shown}", metric.name)))
        };
        let tolerances = self.tolerances(hpa);
        let name = format!("external metric {}({shown})", metric.name);
        let mut current = MetricValueStatus::default();
        let (replicas, timestamp) = if let Some(target) = target_milli(external.target.average_value.as_ref()) {
            let (values, timestamp) = fetch().map_err(|e| {
                let event = e.to_string();
                let inner = e.context(format!("failed to get {} external metric", metric.name));
                self.failure(hpa, "FailedGetExternalMetric", &event, outer(inner))
            })?;
            let (replicas, usage) = external_per_pod_replicas(status_replicas, target, &values, tolerances);
            current.average_value = Some(milli_quantity(usage));
            (replicas, timestamp)
        } else if let Some(target) = target_milli(external.target.value.as_ref()) {
            let (replicas, usage) = fetch()
                .and_then(|(values, _)| {
                    let usage = external_total(&values);
                    let pods = self.pods(namespace, selector);
                    let ratio = usage as f64 / target as f64;
                    Ok((usage_ratio_replica_count(spec_replicas, ratio, tolerances, &pods)?, usage))
                })
                .map_err(|e| {
                    let event = e.to_string();
                    let inner = e.context(format!("failed to get external metric {}", metric.name));
                    self.failure(hpa, "FailedGetExternalMetric", &event, outer(inner))
                })?;
            current.value = Some(milli_quantity(usage));
            (replicas, Timestamp::UNIX_EPOCH)
        } else {
            let e = Error::NoExternalTarget;
            return Err(self.failure(hpa, "FailedGetExternalMetric", &e.to_string(), outer(e)));
        };
        let status = MetricStatus {
            type_: "External".into(),
            external: Some(ExternalMetricStatus { metric: identifier(metric), current }),
            ..Default::default()
        };
        Ok(Proposal { replicas, metric: name, timestamp, status })
    }
}

fn identifier(metric: &MetricIdentifier) -> MetricIdentifier {
    MetricIdentifier { name: metric.name.clone(), selector: metric.selector.clone() }
}

/// The calculator's errors pass as they are (upstream lists pods inside it).
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milli_quantities_are_canonical() {
        assert_eq!(milli_quantity(500).0, "500m");
        assert_eq!(milli_quantity(2000).0, "2");
    }

    #[test]
    fn memory_averages_are_binary_si_others_decimal() {
        let mebibytes = 100 * 1024 * 1024 * 1000;
        assert_eq!(build_quantity("memory", mebibytes).0, "100Mi");
        assert_eq!(build_quantity("cpu", mebibytes).0, "104857600");
        assert_eq!(build_quantity("memory", 1_500_000).0, "1500", "below 1Ki: decimal, as apimachinery");
        assert_eq!(build_quantity("memory", 104_857_601_000).0, "104857601", "not a multiple of 1Ki");
        assert_eq!(build_quantity("memory", 104_857_600_500).0, "104857600500m", "fractional: decimal");
        assert_eq!(build_quantity("cpu", 250).0, "250m");
    }
}
