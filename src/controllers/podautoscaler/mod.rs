//! The horizontal pod autoscaler controller (`horizontal-pod-autoscaler-controller`), after
//! upstream v1.33's `pkg/controller/podautoscaler`: every sync period, each autoscaling/v2
//! HPA reads its target's `/scale`, computes a replica count from its metrics (resource
//! metrics of the pods, custom Pods and Object metrics, External metrics), normalises it
//! (min/max, scale-up limit or `behavior` policies, stabilisation windows) and writes the
//! target's `/scale` and its own status, with upstream's conditions and Events.
//!
//! Files: `replica_calculator` (pods and samples to a count), `behavior` (normalisation and
//! the remembered recommendations and scale events), `metrics_client` (the metrics APIs),
//! `compute` (one metric spec to a proposal and a status), `status` (conditions),
//! `monitor` (upstream's metrics), `selectors` (which HPAs select a pod).

mod behavior;
mod compute;
mod metrics_client;
mod monitor;
mod replica_calculator;
mod selectors;
mod status;

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscaler, HorizontalPodAutoscalerStatus, MetricStatus};
use k8s_openapi::api::core::v1::Pod;

use crate::apimachinery::clock::{Clock, RealClock};
use crate::apimachinery::labels::Selector;
use crate::apimachinery::schema::parse_group_version;
use crate::client::discovery::ApiResource;
use crate::client::scale::ScaleClient;
use crate::client::{Api, Client, PostParams};
use crate::runtime::controller::{Controller, ControllerContext, SyncResult};
use crate::runtime::events::{EventRecorder, EventType};
use crate::runtime::informer::{Event, Informer, object_key, split_key};
use crate::runtime::workqueue::{RateLimiter, WorkQueue};

use behavior::{Args, Stabilizer};
use metrics_client::MetricsClient;
use monitor::{Action, ErrorKind, monitor};
use replica_calculator::{ReplicaCalculator, Tolerances};
use status::{ABLE_TO_SCALE, Condition, SCALING_ACTIVE, SCALING_LIMITED, set_condition, set_status};

/// What the controller takes from the flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// `--concurrent-horizontal-pod-autoscaler-syncs`.
    pub workers: usize,
    /// `--horizontal-pod-autoscaler-sync-period`.
    pub sync_period: Duration,
    /// `--horizontal-pod-autoscaler-downscale-stabilization`.
    pub downscale_stabilization: Duration,
    /// `--horizontal-pod-autoscaler-tolerance`.
    pub tolerance: f64,
    /// `--horizontal-pod-autoscaler-cpu-initialization-period`.
    pub cpu_initialization_period: Duration,
    /// `--horizontal-pod-autoscaler-initial-readiness-delay`.
    pub initial_readiness_delay: Duration,
    /// The `HPAConfigurableTolerance` feature gate: `behavior.*.tolerance` honoured.
    pub configurable_tolerance: bool,
}

impl Default for Config {
    /// Upstream's defaults.
    fn default() -> Config {
        Config {
            workers: 5,
            sync_period: Duration::from_secs(15),
            downscale_stabilization: Duration::from_secs(300),
            tolerance: 0.1,
            cpu_initialization_period: Duration::from_secs(300),
            initial_readiness_delay: Duration::from_secs(30),
            configurable_tolerance: false,
        }
    }
}

/// `FixedItemIntervalRateLimiter` (`NewDefaultHPARateLimiter`): every item waits one sync
/// period, so each HPA is reconciled once per period.
struct FixedItemIntervalRateLimiter {
    interval: Duration,
}

impl RateLimiter<String> for FixedItemIntervalRateLimiter {
    fn when(&self, _: &String) -> Duration {
        self.interval
    }

    fn forget(&self, _: &String) {}

    fn num_requeues(&self, _: &String) -> u32 {
        1
    }
}

/// `NewHorizontalController`.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Result<Controller, String> {
    let clock: Arc<dyn Clock> = Arc::new(RealClock);
    let limiter = FixedItemIntervalRateLimiter { interval: config.sync_period };
    let queue = WorkQueue::with_parts("horizontalpodautoscaler", Box::new(limiter), clock);
    monitor();
    let controller = Arc::new(HorizontalController {
        name: context.name,
        client: context.client.clone(),
        scales: ScaleClient::new(context.client.clone()),
        metrics: MetricsClient::new(context.client.clone(), config.sync_period),
        recorder: context.recorder.clone(),
        hpas: context.informers.informer::<HorizontalPodAutoscaler>(),
        pods: context.informers.informer::<Pod>(),
        queue: queue.clone(),
        calculator: ReplicaCalculator {
            cpu_initialization_period: config.cpu_initialization_period,
            delay_of_initial_readiness_status: config.initial_readiness_delay,
        },
        stabilizer: Stabilizer::default(),
        selectors: selectors::HpaSelectors::default(),
        config: config.clone(),
    });
    let handler = controller.clone();
    controller.hpas.add_handler(move |event: &Event<HorizontalPodAutoscaler>| handler.on_hpa_event(event));
    let worker = controller.clone();
    let resync = controller.clone();
    Ok(Controller::new().with_queue(&queue, config.workers, move |key: &String| worker.process(key)).resync_every(
        "hpa-resync",
        config.sync_period,
        move || resync.resync(),
    ))
}

/// Upstream's `HorizontalController`.
struct HorizontalController {
    name: &'static str,
    client: Client,
    scales: ScaleClient,
    metrics: MetricsClient,
    recorder: EventRecorder,
    hpas: Arc<Informer<HorizontalPodAutoscaler>>,
    pods: Arc<Informer<Pod>>,
    queue: WorkQueue<String>,
    calculator: ReplicaCalculator,
    stabilizer: Stabilizer,
    selectors: selectors::HpaSelectors,
    config: Config,
}

/// A failed reconciliation: its message and whether the HPA's spec is at fault (`errSpec`).
#[derive(Debug, Clone, PartialEq)]
struct ReconcileError {
    message: String,
    spec: bool,
}

impl ReconcileError {
    fn internal(message: impl Into<String>) -> ReconcileError {
        ReconcileError { message: message.into(), spec: false }
    }
}

/// A client error as Go's `err.Error()` shows it: a Status error is its message alone.
fn go_error(error: &crate::client::Error) -> String {
    match error {
        crate::client::Error::Api(e) => e.message.clone(),
        crate::client::Error::Request(m) => m.clone(),
        other => other.to_string(),
    }
}

impl HorizontalController {
    /// `enqueueHPA` / `updateHPA` / `deleteHPA`.
    fn on_hpa_event(&self, event: &Event<HorizontalPodAutoscaler>) {
        match event {
            Event::Added(hpa) | Event::Updated { new: hpa, .. } => self.enqueue(&object_key(&hpa.metadata)),
            Event::Deleted { object, .. } => {
                let key = object_key(&object.metadata);
                self.queue.forget(&key);
                self.selectors.delete(&key);
            }
        }
    }

    /// Every request waits one sync period; one already waiting or queued absorbs it.
    fn enqueue(&self, key: &str) {
        self.queue.add_rate_limited(key.to_string());
        self.selectors.register(key);
    }

    /// The informer handler's resync (`AddEventHandlerWithResyncPeriod(resyncPeriod)`).
    fn resync(&self) {
        for hpa in self.hpas.store().list() {
            self.enqueue(&object_key(&hpa.metadata));
        }
    }

    /// `processNextWorkItem`: reconcile, then come back after one sync period unless deleted.
    fn process(&self, key: &str) -> SyncResult {
        let deleted = match self.reconcile_key(key) {
            Ok(deleted) => deleted,
            Err(e) => {
                log::error!("{}: {}", self.name, e.message);
                false
            }
        };
        if !deleted {
            self.queue.add_rate_limited(key.to_string());
        }
        Ok(())
    }

    /// `reconcileKey`: a deleted HPA's recommendations and events are forgotten.
    fn reconcile_key(&self, key: &str) -> Result<bool, ReconcileError> {
        let Some(hpa) = self.hpas.store().get(key) else {
            let (namespace, name) = split_key(key);
            log::info!("Horizontal Pod Autoscaler has been deleted HPA=\"{namespace}/{name}\"");
            self.stabilizer.forget(key);
            return Ok(true);
        };
        let started = Instant::now();
        let mut action = Action::None;
        let result = self.reconcile_autoscaler(&hpa, key, &mut action);
        let error = match &result {
            Ok(()) => ErrorKind::None,
            Err(e) if e.spec => ErrorKind::Spec,
            Err(_) => ErrorKind::Internal,
        };
        monitor().reconciliation(action, error, started.elapsed());
        result.map(|()| false)
    }

    /// Records `event` and sets the AbleToScale=False condition of a target that cannot be read.
    fn failed_get_scale(&self, hpa: &mut HorizontalPodAutoscaler, original: &HorizontalPodAutoscalerStatus, err: &str) {
        self.recorder.event_for(hpa, EventType::Warning, "FailedGetScale", err);
        let message = format!("the HPA controller was unable to get the target's current scale: {err}");
        self.set_condition(hpa, Condition::new(ABLE_TO_SCALE, false, "FailedGetScale", message));
        if let Err(e) = self.update_status_if_needed(original, hpa) {
            log::error!("{}: {}", self.name, e.message);
        }
    }

    fn set_condition(&self, hpa: &mut HorizontalPodAutoscaler, condition: Condition) {
        set_condition(hpa.status.get_or_insert_with(Default::default), condition, Timestamp::now());
    }

    /// `reconcileAutoscaler`.
    fn reconcile_autoscaler(
        &self,
        shared: &HorizontalPodAutoscaler,
        key: &str,
        action: &mut Action,
    ) -> Result<(), ReconcileError> {
        let mut hpa = shared.clone();
        let original = hpa.status.clone().unwrap_or_default();
        let spec = hpa.spec.clone();
        let namespace = hpa.metadata.namespace.clone().unwrap_or_default();
        let target = &spec.scale_target_ref;
        let reference = format!("{}/{}/{}", target.kind, namespace, target.name);

        let group = match parse_group_version(target.api_version.as_deref().unwrap_or("")).map(|(group, _)| group) {
            Ok(group) => group,
            Err(e) => {
                self.failed_get_scale(&mut hpa, &original, &e);
                let message = format!("invalid API version in scale target reference: {e}");
                return Err(ReconcileError { message, spec: true });
            }
        };
        let mappings = match self.scales.mappings(group, &target.kind) {
            Ok(mappings) => mappings,
            Err(e) => {
                let e = go_error(&e);
                self.failed_get_scale(&mut hpa, &original, &e);
                return Err(ReconcileError::internal(format!(
                    "unable to determine resource for scale target reference: {e}"
                )));
            }
        };
        let (mut scale, resource) = match self.scale_for_resource_mappings(&namespace, &target.name, &mappings) {
            Ok(found) => found,
            Err(e) => {
                self.failed_get_scale(&mut hpa, &original, &e);
                return Err(ReconcileError::internal(format!(
                    "failed to query scale subresource for {reference}: {e}"
                )));
            }
        };
        self.set_condition(
            &mut hpa,
            Condition::new(
                ABLE_TO_SCALE,
                true,
                "SucceededGetScale",
                "the HPA controller was able to get the target's current scale",
            ),
        );
        let current = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        self.stabilizer.record_initial(key, current, Timestamp::now());

        let min = spec.min_replicas.unwrap_or(1);
        let mut desired = 0;
        let mut rescale_reason = String::new();
        let mut rescale = true;
        let mut metric_statuses = None;
        let mut ret_err = None;

        if current == 0 && min != 0 {
            desired = 0;
            rescale = false;
            self.set_condition(
                &mut hpa,
                Condition::new(
                    SCALING_ACTIVE,
                    false,
                    "ScalingDisabled",
                    "scaling is disabled since the replica count of the target is zero",
                ),
            );
        } else if current > spec.max_replicas {
            rescale_reason = "Current number of replicas above Spec.MaxReplicas".into();
            desired = spec.max_replicas;
        } else if current < min {
            rescale_reason = "Current number of replicas below Spec.MinReplicas".into();
            desired = min;
        } else {
            let computed = self.compute_replicas_for_metrics(&mut hpa, &scale, spec.metrics.as_deref().unwrap_or(&[]));
            metric_statuses = computed.statuses;
            if let (Some(err), -1) = (&computed.error, computed.replicas) {
                let err = err.clone();
                self.set_current_replicas_and_metrics(&mut hpa, current, metric_statuses);
                if let Err(e) = self.update_status_if_needed(&original, &hpa) {
                    log::error!("{}: {}", self.name, e.message);
                }
                self.recorder.event_for(&hpa, EventType::Warning, "FailedComputeMetricsReplicas", &err.message);
                return Err(ReconcileError {
                    message: format!(
                        "failed to compute desired number of replicas based on listed metrics for {reference}: {}",
                        err.message
                    ),
                    spec: err.spec,
                });
            }
            ret_err = computed.error;
            log::debug!(
                "Proposing desired replicas desiredReplicas={} metric=\"{}\" tolerances=\"{}\" timestamp=\"{}\" scaleTarget=\"{reference}\"",
                computed.replicas,
                computed.metric,
                self.tolerances(&hpa),
                computed.timestamp
            );
            let mut rescale_metric = "";
            if computed.replicas > desired {
                desired = computed.replicas;
                rescale_metric = &computed.metric;
            }
            if desired > current {
                rescale_reason = format!("{rescale_metric} above target");
            }
            if desired < current {
                rescale_reason = "All metrics below target".into();
            }
            desired = self.normalize(&mut hpa, key, Args { min, max: spec.max_replicas, current, desired });
            rescale = desired != current;
        }

        let mut rescaled_at = None;
        if rescale {
            scale.spec.get_or_insert_with(Default::default).replicas = Some(desired);
            if let Err(e) = self.scales.update(&resource, &namespace, &target.name, &scale).map_err(|e| go_error(&e)) {
                let message = format!("New size: {desired}; reason: {rescale_reason}; error: {e}");
                self.recorder.event_for(&hpa, EventType::Warning, "FailedRescale", &message);
                let message = format!("the HPA controller was unable to update the target scale: {e}");
                self.set_condition(&mut hpa, Condition::new(ABLE_TO_SCALE, false, "FailedUpdateScale", message));
                self.set_current_replicas_and_metrics(&mut hpa, current, metric_statuses);
                if let Err(e) = self.update_status_if_needed(&original, &hpa) {
                    log::error!("{}: {}", self.name, e.message);
                }
                return Err(ReconcileError::internal(format!("failed to rescale {reference}: {e}")));
            }
            let message = format!("the HPA controller was able to update the target scale to {desired}");
            self.set_condition(&mut hpa, Condition::new(ABLE_TO_SCALE, true, "SucceededRescale", message));
            let message = format!("New size: {desired}; reason: {rescale_reason}");
            self.recorder.event_for(&hpa, EventType::Normal, "SuccessfulRescale", &message);
            let now = Timestamp::now();
            self.stabilizer.store_scale_event(key, spec.behavior.as_ref(), current, desired, now);
            log::info!(
                "Successfully rescaled HPA=\"{key}\" currentReplicas={current} desiredReplicas={desired} reason=\"{rescale_reason}\""
            );
            *action = Action::of(current, desired);
            rescaled_at = Some(now);
        } else {
            log::debug!("Decided not to scale scaleTarget=\"{reference}\" desiredReplicas={desired}");
            desired = current;
        }
        set_status(hpa.status.get_or_insert_with(Default::default), current, desired, metric_statuses, rescaled_at);
        self.update_status_if_needed(&original, &hpa)?;
        ret_err.map_or(Ok(()), Err)
    }

    /// `normalizeDesiredReplicas` or, with a `behavior`, `normalizeDesiredReplicasWithBehaviors`,
    /// setting their two conditions.
    fn normalize(&self, hpa: &mut HorizontalPodAutoscaler, key: &str, args: Args) -> i32 {
        let window = self.config.downscale_stabilization;
        let now = Timestamp::now();
        let behavior = hpa.spec.behavior.clone();
        let normalized = match &behavior {
            None => self.stabilizer.normalize(key, args, window, now),
            Some(behavior) => self.stabilizer.normalize_with_behavior(key, behavior, args, window, now),
        };
        let (reason, message) = normalized.able_to_scale;
        self.set_condition(hpa, Condition::new(ABLE_TO_SCALE, true, reason, message));
        let (limited, reason, message) = normalized.limited;
        self.set_condition(hpa, Condition::new(SCALING_LIMITED, limited, reason, message));
        normalized.replicas
    }

    /// `scaleForResourceMappings`: the first mapping whose scale can be read; else the first
    /// error.
    fn scale_for_resource_mappings(
        &self,
        namespace: &str,
        name: &str,
        mappings: &[ApiResource],
    ) -> Result<(Scale, ApiResource), String> {
        let mut first = None;
        for mapping in mappings {
            match self.scales.get(mapping, namespace, name) {
                Ok(scale) => return Ok((scale, mapping.clone())),
                Err(e) => {
                    first.get_or_insert(go_error(&e));
                }
            }
        }
        Err(first.unwrap_or_else(|| "unrecognized resource".into()))
    }

    /// `setCurrentReplicasAndMetricsInStatus`.
    fn set_current_replicas_and_metrics(
        &self,
        hpa: &mut HorizontalPodAutoscaler,
        current: i32,
        metrics: Option<Vec<MetricStatus>>,
    ) {
        let status = hpa.status.get_or_insert_with(Default::default);
        let desired = status.desired_replicas;
        set_status(status, current, desired, metrics, None);
    }

    /// `updateStatusIfNeeded`: written only when it changed.
    fn update_status_if_needed(
        &self,
        original: &HorizontalPodAutoscalerStatus,
        hpa: &HorizontalPodAutoscaler,
    ) -> Result<(), ReconcileError> {
        let status = hpa.status.clone().unwrap_or_default();
        if normalized(original) == normalized(&status) {
            return Ok(());
        }
        let namespace = hpa.metadata.namespace.as_deref().unwrap_or_default();
        let name = hpa.metadata.name.as_deref().unwrap_or_default();
        let api = Api::<HorizontalPodAutoscaler>::namespaced(&self.client, namespace);
        if let Err(e) = api.replace_status(name, hpa, &PostParams::default()).map_err(|e| go_error(&e)) {
            self.recorder.event_for(hpa, EventType::Warning, "FailedUpdateStatus", &e);
            return Err(ReconcileError::internal(format!("failed to update status for {name}: {e}")));
        }
        log::debug!("Successfully updated status HPA=\"{namespace}/{name}\"");
        Ok(())
    }

    /// `tolerancesForHpa`.
    fn tolerances(&self, hpa: &HorizontalPodAutoscaler) -> Tolerances {
        let mut tolerances = Tolerances::both(self.config.tolerance);
        let behavior = hpa.spec.behavior.as_ref();
        let Some(behavior) = behavior.filter(|_| self.config.configurable_tolerance) else { return tolerances };
        let read = |rules: Option<&k8s_openapi::api::autoscaling::v2::HPAScalingRules>| {
            rules
                .and_then(|r| r.tolerance.as_ref())
                .and_then(|q| crate::quantity::Quantity::parse(&q.0).ok())
                .map(|q| q.milli_value() as f64 / 1000.0)
        };
        if let Some(t) = read(behavior.scale_down.as_ref()) {
            tolerances.scale_down = t;
        }
        if let Some(t) = read(behavior.scale_up.as_ref()) {
            tolerances.scale_up = t;
        }
        tolerances
    }

    /// The cached pods of `namespace` that `selector` selects (`podLister.Pods(ns).List`).
    fn pods(&self, namespace: &str, selector: &Selector) -> Vec<Arc<Pod>> {
        self.pods.store().list_namespace_where(namespace, |m| selector.matches(m.labels.as_ref()))
    }
}

/// The status as the API round-trips it: Go omits a zero `currentReplicas` and an empty
/// `currentMetrics`, so they compare equal to absent ones (`apiequality.Semantic.DeepEqual`
/// on what was read).
fn normalized(status: &HorizontalPodAutoscalerStatus) -> HorizontalPodAutoscalerStatus {
    let mut status = status.clone();
    if status.current_replicas == Some(0) {
        status.current_replicas = None;
    }
    if status.current_metrics.as_ref().is_some_and(Vec::is_empty) {
        status.current_metrics = None;
    }
    if status.conditions.as_ref().is_some_and(Vec::is_empty) {
        status.conditions = None;
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_limiter_waits_one_period_for_every_item() {
        let limiter = FixedItemIntervalRateLimiter { interval: Duration::from_secs(15) };
        assert_eq!(limiter.when(&"a".to_string()), Duration::from_secs(15));
        assert_eq!(limiter.when(&"a".to_string()), Duration::from_secs(15));
        assert_eq!(limiter.num_requeues(&"a".to_string()), 1);
    }

    #[test]
    fn zero_and_empty_status_fields_compare_as_absent() {
        let a = HorizontalPodAutoscalerStatus {
            current_replicas: Some(0),
            current_metrics: Some(vec![]),
            ..Default::default()
        };
        assert_eq!(normalized(&a), normalized(&HorizontalPodAutoscalerStatus::default()));
    }
}
