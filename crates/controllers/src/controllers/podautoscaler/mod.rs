//! The horizontal pod autoscaler controller (`horizontal-pod-autoscaler-controller`), after
//! upstream v1.36's `pkg/controller/podautoscaler`: every sync period, each autoscaling/v2
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
mod error;
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
use crate::client::{Api, Client, PostParams, retry};
use crate::runtime::controller::{Controller, ControllerContext, SyncResult};
use crate::runtime::events::{EventRecorder, EventType};
use crate::runtime::informer::{Event, Informer, object_key, split_key};
use crate::runtime::workqueue::{RateLimiter, WorkQueue};

use behavior::{Args, Stabilizer};
pub use error::Error;
use metrics_client::MetricsClient;
use monitor::{Action, ErrorKind, monitor};
use replica_calculator::{ReplicaCalculator, Tolerances};
use status::{
    ABLE_TO_SCALE, Condition, SCALED_TO_ZERO, SCALING_ACTIVE, SCALING_LIMITED, remove_condition, scaled_to_zero,
    set_condition, set_status,
};

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

/// The other feature gates the controller asks (see [`new_with_gates`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gates {
    /// `PodLevelResources`: a pod's pod-level requests count for its utilization.
    pub pod_level_resources: bool,
    /// `HPAScaleToZero`: the `ScaledToZero` condition and scaling from zero replicas.
    pub scale_to_zero: bool,
}

impl Default for Gates {
    /// The gates' v1.36 defaults: PodLevelResources beta and on, HPAScaleToZero alpha and off.
    fn default() -> Gates {
        Gates { pod_level_resources: true, scale_to_zero: false }
    }
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
            configurable_tolerance: true,
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

/// `NewHorizontalController`, with the other gates at their defaults.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    new_with_gates(context, config, Gates::default())
}

/// `NewHorizontalController`.
pub fn new_with_gates(context: &ControllerContext<'_>, config: Config, gates: Gates) -> Controller {
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
            pod_level_resources: gates.pod_level_resources,
        },
        stabilizer: Stabilizer::default(),
        selectors: selectors::HpaSelectors::default(),
        config: config.clone(),
        gates,
    });
    let handler = controller.clone();
    controller.hpas.add_handler(move |event: &Event<HorizontalPodAutoscaler>| handler.on_hpa_event(event));
    let worker = controller.clone();
    let resync = controller.clone();
    Controller::new().with_queue(&queue, config.workers, move |key: &String| worker.process(key)).resync_every(
        "hpa-resync",
        config.sync_period,
        move || resync.resync(),
    )
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
    gates: Gates,
}

/// A failed reconciliation: the error and whether the HPA's spec is at fault (`errSpec`).
#[derive(Debug)]
struct ReconcileError {
    error: Box<Error>,
    spec: bool,
}

impl ReconcileError {
    fn internal(error: Error) -> ReconcileError {
        ReconcileError { error: Box::new(error), spec: false }
    }

    /// One the HPA's spec is at fault for.
    fn spec(error: Error) -> ReconcileError {
        ReconcileError { error: Box::new(error), spec: true }
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
                monitor().hpa_deleted();
            }
        }
    }

    /// Every request waits one sync period; one already waiting or queued absorbs it. An HPA
    /// seen for the first time is counted.
    fn enqueue(&self, key: &str) {
        self.queue.add_rate_limited(key.to_string());
        if self.selectors.register(key) {
            monitor().hpa_added();
        }
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
                log::error!("{}: {}", self.name, e.error);
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
            log::error!("{}: {}", self.name, e.error);
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
                let e = Error::Parse(e.into());
                self.failed_get_scale(&mut hpa, &original, &e.to_string());
                let error = e.context("invalid API version in scale target reference");
                return Err(ReconcileError::spec(error));
            }
        };
        let mappings = match self.scales.mappings(group, &target.kind) {
            Ok(mappings) => mappings,
            Err(e) => {
                let e = Error::Api(e);
                self.failed_get_scale(&mut hpa, &original, &e.to_string());
                return Err(ReconcileError::internal(
                    e.context("unable to determine resource for scale target reference"),
                ));
            }
        };
        let (scale, resource) = match self.scale_for_resource_mappings(&namespace, &target.name, &mappings) {
            Ok(found) => found,
            Err(e) => {
                self.failed_get_scale(&mut hpa, &original, &e.to_string());
                return Err(ReconcileError::internal(
                    e.context(format!("failed to query scale subresource for {reference}")),
                ));
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

        let scale_to_zero = self.gates.scale_to_zero;
        let object_or_external = has_object_or_external_metrics(&hpa);
        let scaled_to_zero_condition = scale_to_zero && scaled_to_zero(hpa.status.as_ref());
        let can_scale_from_zero = scaled_to_zero_condition && object_or_external;
        let mut needs_metric_computation = true;
        if current == 0 {
            let disable;
            (needs_metric_computation, disable) =
                should_compute_metrics_for_zero_replicas(min, scaled_to_zero_condition, can_scale_from_zero);
            if disable {
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
                if !scale_to_zero {
                    remove_condition(hpa.status.get_or_insert_with(Default::default), SCALED_TO_ZERO);
                }
            }
        } else if current > spec.max_replicas {
            rescale_reason = "Current number of replicas above Spec.MaxReplicas".into();
            desired = spec.max_replicas;
            needs_metric_computation = false;
        } else if current < min {
            rescale_reason = "Current number of replicas below Spec.MinReplicas".into();
            desired = min;
            needs_metric_computation = false;
        }
        if needs_metric_computation {
            let mut computed =
                self.compute_replicas_for_metrics(&mut hpa, &scale, spec.metrics.as_deref().unwrap_or(&[]));
            metric_statuses = computed.statuses.take();
            if computed.replicas == -1
                && let Some(err) = computed.error.take()
            {
                self.set_current_replicas_and_metrics(&mut hpa, current, metric_statuses);
                if let Err(e) = self.update_status_if_needed(&original, &hpa) {
                    log::error!("{}: {}", self.name, e.error);
                }
                let message = err.error.to_string();
                self.recorder.event_for(&hpa, EventType::Warning, "FailedComputeMetricsReplicas", &message);
                let context =
                    format!("failed to compute desired number of replicas based on listed metrics for {reference}");
                return Err(ReconcileError { error: Box::new(err.error.context(context)), spec: err.spec });
            }
            ret_err = computed.error;
            let proposing =
                if current == 0 { "Proposing desired replicas from zero" } else { "Proposing desired replicas" };
            log::debug!(
                "{proposing} desiredReplicas={} metric=\"{}\" tolerances=\"{}\" timestamp=\"{}\" scaleTarget=\"{reference}\"",
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
            // Scaling from zero (HPAScaleToZero) with a raised minReplicas goes at least there.
            if current == 0 && min != 0 && scaled_to_zero_condition && desired < min {
                desired = min;
                if rescale_reason.is_empty() {
                    rescale_reason = "Current number of replicas below Spec.MinReplicas".into();
                }
            }
            rescale = desired != current;
        }

        let mut rescaled_at = None;
        if rescale {
            if let Err(e) = self.update_scale(&resource, &namespace, &target.name, &reference, scale, desired) {
                let message = format!("New size: {desired}; reason: {rescale_reason}; error: {e}");
                self.recorder.event_for(&hpa, EventType::Warning, "FailedRescale", &message);
                let message = format!("the HPA controller was unable to update the target scale: {e}");
                self.set_condition(&mut hpa, Condition::new(ABLE_TO_SCALE, false, "FailedUpdateScale", message));
                self.set_current_replicas_and_metrics(&mut hpa, current, metric_statuses);
                if let Err(e) = self.update_status_if_needed(&original, &hpa) {
                    log::error!("{}: {}", self.name, e.error);
                }
                return Err(ReconcileError::internal(e.context(format!("failed to rescale {reference}"))));
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
            // Set on every rescale, so that it is never stale.
            match scaled_to_zero_after_rescale(scale_to_zero, current, desired, min, object_or_external) {
                Some(condition) => self.set_condition(&mut hpa, condition),
                None => remove_condition(hpa.status.get_or_insert_with(Default::default), SCALED_TO_ZERO),
            }
            *action = Action::of(current, desired);
            rescaled_at = Some(now);
        } else {
            log::debug!("Decided not to scale scaleTarget=\"{reference}\" desiredReplicas={desired}");
            desired = current;
        }
        set_status(hpa.status.get_or_insert_with(Default::default), current, desired, metric_statuses, rescaled_at);
        monitor().desired_replicas(&namespace, hpa.metadata.name.as_deref().unwrap_or_default(), desired);
        self.update_status_if_needed(&original, &hpa)?;
        ret_err.map_or(Ok(()), Err)
    }

    /// The rescale of v1.36: the target's `/scale` written with `desired` replicas, retried on
    /// a conflict (`retry.DefaultRetry`: 5 attempts 10 ms apart) with the scale read again
    /// after each failed write; the error as Go's `err.Error()` shows it.
    fn update_scale(
        &self,
        resource: &ApiResource,
        namespace: &str,
        name: &str,
        reference: &str,
        mut scale: Scale,
        desired: i32,
    ) -> Result<(), Error> {
        retry::on_conflict_with(retry::DEFAULT_RETRY, || {
            scale.spec.get_or_insert_with(Default::default).replicas = Some(desired);
            let error = match self.scales.update(resource, namespace, name, &scale) {
                Ok(_) => return Ok(()),
                Err(e) => e,
            };
            // Whatever the error, the next attempt (if a conflict allows one) starts from the latest scale.
            match self.scales.get(resource, namespace, name) {
                Ok(latest) => scale = latest,
                Err(e) => {
                    log::error!("error getting latest scale for {reference} during conflict retry: {}", go_error(&e))
                }
            }
            Err(error)
        })
        .map_err(Error::Api)
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
    ) -> Result<(Scale, ApiResource), Error> {
        let mut first = None;
        for mapping in mappings {
            match self.scales.get(mapping, namespace, name) {
                Ok(scale) => return Ok((scale, mapping.clone())),
                Err(e) if first.is_none() => first = Some(e),
                Err(_) => {}
            }
        }
        Err(first.map_or(Error::UnrecognizedResource, Error::Api))
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
        if let Err(e) = api.replace_status(name, hpa, &PostParams::default()).map_err(Error::Api) {
            self.recorder.event_for(hpa, EventType::Warning, "FailedUpdateStatus", &e.to_string());
            return Err(ReconcileError::internal(e.context(format!("failed to update status for {name}"))));
        }
        log::debug!("Successfully updated status HPA=\"{namespace}/{name}\"");
        Ok(())
    }

    /// `tolerancesForHpa`.
    fn tolerances(&self, hpa: &HorizontalPodAutoscaler) -> Tolerances {
        tolerances_for(hpa, self.config.tolerance, self.config.configurable_tolerance)
    }

    /// The cached pods of `namespace` that `selector` selects (`podLister.Pods(ns).List`).
    fn pods(&self, namespace: &str, selector: &Selector) -> Vec<Arc<Pod>> {
        self.pods.store().list_namespace_where(namespace, |m| selector.matches(m.labels.as_ref()))
    }
}

/// `tolerancesForHpa`: `--horizontal-pod-autoscaler-tolerance` both ways, unless (with
/// HPAConfigurableTolerance, beta and on since v1.35) the HPA's `behavior` sets its own; the
/// quantities are read as `AsApproximateFloat64` does, below a thousandth too.
fn tolerances_for(hpa: &HorizontalPodAutoscaler, tolerance: f64, configurable: bool) -> Tolerances {
    let mut tolerances = Tolerances::both(tolerance);
    let Some(behavior) = hpa.spec.behavior.as_ref().filter(|_| configurable) else { return tolerances };
    let read = |rules: Option<&k8s_openapi::api::autoscaling::v2::HPAScalingRules>| {
        rules
            .and_then(|r| r.tolerance.as_ref())
            .and_then(|q| crate::quantity::Quantity::parse(&q.0).ok())
            .map(|q| q.nano_value() as f64 / 1e9)
    };
    if let Some(t) = read(behavior.scale_down.as_ref()) {
        tolerances.scale_down = t;
    }
    if let Some(t) = read(behavior.scale_up.as_ref()) {
        tolerances.scale_up = t;
    }
    tolerances
}

/// `hasObjectOrExternalMetrics`.
fn has_object_or_external_metrics(hpa: &HorizontalPodAutoscaler) -> bool {
    hpa.spec.metrics.iter().flatten().any(|m| m.type_ == "Object" || m.type_ == "External")
}

/// `shouldComputeMetricsForZeroReplicas` for a target at zero replicas: (whether to compute
/// the metrics, whether scaling is disabled). Without HPAScaleToZero both condition inputs are
/// false, and scaling is disabled whatever `min` (v1.33 computed metrics when `min` was 0).
fn should_compute_metrics_for_zero_replicas(min: i32, scaled_to_zero: bool, can_scale_from_zero: bool) -> (bool, bool) {
    if (min != 0 && scaled_to_zero) || can_scale_from_zero { (true, false) } else { (false, true) }
}

/// The ScaledToZero condition after a rescale from `current` to `desired`: with the
/// HPAScaleToZero gate, True when the HPA (minReplicas 0, Object or External metrics) scaled its
/// target to zero, else False; without the gate, `None`: the condition is removed.
fn scaled_to_zero_after_rescale(
    gate: bool,
    current: i32,
    desired: i32,
    min: i32,
    object_or_external: bool,
) -> Option<Condition> {
    if !gate {
        return None;
    }
    Some(if current > 0 && desired == 0 && min == 0 && object_or_external {
        Condition::new(SCALED_TO_ZERO, true, "ScaledToZero", "the HPA controller scaled the workload to zero")
    } else {
        Condition::new(
            SCALED_TO_ZERO,
            false,
            "NotScaledToZero",
            "the HPA controller did not scale the workload to zero",
        )
    })
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
    fn a_target_at_zero_is_left_alone_unless_scaled_to_zero_by_the_hpa() {
        // HPAScaleToZero off: both inputs false, whatever minReplicas.
        assert_eq!(should_compute_metrics_for_zero_replicas(1, false, false), (false, true));
        assert_eq!(should_compute_metrics_for_zero_replicas(0, false, false), (false, true));
        // On: scaled to zero by the HPA, and minReplicas raised since or Object/External metrics.
        assert_eq!(should_compute_metrics_for_zero_replicas(2, true, false), (true, false));
        assert_eq!(should_compute_metrics_for_zero_replicas(0, true, true), (true, false));
        assert_eq!(should_compute_metrics_for_zero_replicas(0, true, false), (false, true));
    }

    #[test]
    fn the_scaled_to_zero_condition_follows_each_rescale_only_with_the_gate() {
        assert_eq!(scaled_to_zero_after_rescale(false, 3, 0, 0, true), None, "removed without the gate");
        let scaled = scaled_to_zero_after_rescale(true, 3, 0, 0, true).expect("a condition");
        assert_eq!((scaled.type_, scaled.status, scaled.reason.as_str()), (SCALED_TO_ZERO, true, "ScaledToZero"));
        for (current, desired, min, object_or_external) in [(0, 2, 0, true), (3, 1, 0, true), (3, 0, 0, false)] {
            let condition = scaled_to_zero_after_rescale(true, current, desired, min, object_or_external);
            let condition = condition.expect("a condition");
            assert_eq!((condition.status, condition.reason.as_str()), (false, "NotScaledToZero"));
            assert_eq!(condition.message, "the HPA controller did not scale the workload to zero");
        }
    }

    #[test]
    fn only_object_and_external_metrics_allow_scaling_from_zero() {
        let hpa = |types: &[&str]| -> HorizontalPodAutoscaler {
            let metrics: Vec<serde_json::Value> = types.iter().map(|t| serde_json::json!({"type": t})).collect();
            serde_json::from_value(serde_json::json!({"metadata": {"name": "h"}, "spec": {
                "scaleTargetRef": {"kind": "Deployment", "name": "d"}, "maxReplicas": 3, "metrics": metrics}}))
            .expect("an HPA")
        };
        assert!(!has_object_or_external_metrics(&hpa(&["Resource", "Pods"])));
        assert!(has_object_or_external_metrics(&hpa(&["Resource", "External"])));
        assert!(has_object_or_external_metrics(&hpa(&["Object"])));
    }

    #[test]
    fn behavior_tolerances_override_the_flag_with_the_gate() {
        let hpa: HorizontalPodAutoscaler = serde_json::from_value(serde_json::json!({"metadata": {"name": "h"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d"}, "maxReplicas": 3, "behavior": {
                "scaleUp": {"tolerance": "0.0005"}, "scaleDown": {"tolerance": "50m"}}}}))
        .expect("an HPA");
        let tolerances = tolerances_for(&hpa, 0.1, true);
        assert_eq!((tolerances.scale_down, tolerances.scale_up), (0.05, 0.0005), "below a thousandth too");
        assert_eq!(tolerances_for(&hpa, 0.1, false), Tolerances::both(0.1), "gate off");
    }

    #[test]
    fn the_gates_default_as_in_v1_36() {
        assert_eq!(Gates::default(), Gates { pod_level_resources: true, scale_to_zero: false });
        assert!(Config::default().configurable_tolerance, "HPAConfigurableTolerance is beta and on");
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
