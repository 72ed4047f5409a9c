//! Upstream's (v1.36) `podautoscaler/monitor`: reconciliation and metric-computation counts
//! and durations (BETA since v1.34), labelled by action (`scale_up`, `scale_down`, `none`) and
//! error (`spec`, `internal`, `none`); the number of HPAs and each one's desired replicas.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::metrics::{CounterVec, GaugeVec, HistogramVec, exponential_buckets};

/// `ActionLabel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `scale_up`.
    ScaleUp,
    /// `scale_down`.
    ScaleDown,
    /// `none`.
    None,
}

impl Action {
    fn label(self) -> &'static str {
        match self {
            Action::ScaleUp => "scale_up",
            Action::ScaleDown => "scale_down",
            Action::None => "none",
        }
    }

    /// The action from a change of replicas.
    pub fn of(from: i32, to: i32) -> Action {
        match to.cmp(&from) {
            std::cmp::Ordering::Greater => Action::ScaleUp,
            std::cmp::Ordering::Less => Action::ScaleDown,
            std::cmp::Ordering::Equal => Action::None,
        }
    }
}

/// `ErrorLabel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// `spec`: the HPA's spec is invalid.
    Spec,
    /// `internal`.
    Internal,
    /// `none`.
    None,
}

impl ErrorKind {
    fn label(self) -> &'static str {
        match self {
            ErrorKind::Spec => "spec",
            ErrorKind::Internal => "internal",
            ErrorKind::None => "none",
        }
    }
}

const RECONCILIATION_HELP: &str = "[BETA] Number of reconciliations of HPA controller. The label 'action' should be either 'scale_down', 'scale_up', or 'none'. Also, the label 'error' should be either 'spec', 'internal', or 'none'. Note that if both spec and internal errors happen during a reconciliation, the first one to occur is reported in `error` label.";
const RECONCILIATION_DURATION_HELP: &str = "[BETA] The time(seconds) that the HPA controller takes to reconcile once. The label 'action' should be either 'scale_down', 'scale_up', or 'none'. Also, the label 'error' should be either 'spec', 'internal', or 'none'. Note that if both spec and internal errors happen during a reconciliation, the first one to occur is reported in `error` label.";
const COMPUTATION_HELP: &str = "[BETA] Number of metric computations. The label 'action' should be either 'scale_down', 'scale_up', or 'none'. Also, the label 'error' should be either 'spec', 'internal', or 'none'. The label 'metric_type' corresponds to HPA.spec.metrics[*].type";
const COMPUTATION_DURATION_HELP: &str = "[BETA] The time(seconds) that the HPA controller takes to calculate one metric. The label 'action' should be either 'scale_down', 'scale_up', or 'none'. The label 'error' should be either 'spec', 'internal', or 'none'. The label 'metric_type' corresponds to HPA.spec.metrics[*].type";

const HPAS_HELP: &str = "[ALPHA] Current number of controlled HPA objects.";
const DESIRED_REPLICAS_HELP: &str = "[ALPHA] Current desired replica count for HPA objects.";

/// The six families, registered once per process (`monitor.Register`).
pub struct Monitor {
    reconciliations: Arc<CounterVec>,
    reconciliation_duration: Arc<HistogramVec>,
    computations: Arc<CounterVec>,
    computation_duration: Arc<HistogramVec>,
    hpas: Arc<GaugeVec>,
    desired_replicas: Arc<GaugeVec>,
}

/// The process's monitor, registering its families on first use.
pub fn monitor() -> &'static Monitor {
    static MONITOR: OnceLock<Monitor> = OnceLock::new();
    MONITOR.get_or_init(|| {
        let buckets = exponential_buckets(0.001, 2.0, 15);
        let monitor = Monitor {
            reconciliations: Arc::new(CounterVec::counter(
                "horizontal_pod_autoscaler_controller_reconciliations_total",
                RECONCILIATION_HELP,
                &["action", "error"],
            )),
            reconciliation_duration: Arc::new(HistogramVec::new(
                "horizontal_pod_autoscaler_controller_reconciliation_duration_seconds",
                RECONCILIATION_DURATION_HELP,
                &["action", "error"],
                &buckets,
            )),
            computations: Arc::new(CounterVec::counter(
                "horizontal_pod_autoscaler_controller_metric_computation_total",
                COMPUTATION_HELP,
                &["action", "error", "metric_type"],
            )),
            computation_duration: Arc::new(HistogramVec::new(
                "horizontal_pod_autoscaler_controller_metric_computation_duration_seconds",
                COMPUTATION_DURATION_HELP,
                &["action", "error", "metric_type"],
                &buckets,
            )),
            hpas: Arc::new(
                GaugeVec::gauge("horizontal_pod_autoscaler_controller_num_horizontal_pod_autoscalers", HPAS_HELP, &[])
                    .at_zero(),
            ),
            desired_replicas: Arc::new(GaugeVec::gauge(
                "horizontal_pod_autoscaler_controller_desired_replicas",
                DESIRED_REPLICAS_HELP,
                &["namespace", "hpa_name"],
            )),
        };
        let registry = crate::metrics::global();
        registry.register(monitor.reconciliations.clone());
        registry.register(monitor.reconciliation_duration.clone());
        registry.register(monitor.computations.clone());
        registry.register(monitor.computation_duration.clone());
        registry.register(monitor.hpas.clone());
        registry.register(monitor.desired_replicas.clone());
        monitor
    })
}

impl Monitor {
    /// `ObserveReconciliationResult`.
    pub fn reconciliation(&self, action: Action, error: ErrorKind, took: Duration) {
        let labels = [action.label(), error.label()];
        self.reconciliations.inc(&labels);
        self.reconciliation_duration.observe(&labels, took.as_secs_f64());
    }

    /// `ObserveMetricComputationResult`.
    pub fn computation(&self, action: Action, error: ErrorKind, took: Duration, metric_type: &str) {
        let labels = [action.label(), error.label(), metric_type];
        self.computations.inc(&labels);
        self.computation_duration.observe(&labels, took.as_secs_f64());
    }

    /// `ObserveHPAAddition`: an HPA seen for the first time.
    pub fn hpa_added(&self) {
        self.hpas.add(&[], 1.0);
    }

    /// `ObserveHPADeletion`.
    pub fn hpa_deleted(&self) {
        self.hpas.add(&[], -1.0);
    }

    /// `ObserveDesiredReplicas`: the replica count a reconciliation settled on.
    pub fn desired_replicas(&self, namespace: &str, name: &str, desired: i32) {
        self.desired_replicas.set(&[namespace, name], f64::from(desired));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_are_counted_under_upstreams_labels() {
        let m = monitor();
        m.reconciliation(Action::of(2, 5), ErrorKind::None, Duration::from_millis(3));
        assert!(m.reconciliations.get(&["scale_up", "none"]) >= 1.0);
        m.computation(Action::None, ErrorKind::Internal, Duration::ZERO, "Resource");
        assert!(m.computation_duration.count(&["none", "internal", "Resource"]) >= 1);
        let text = crate::metrics::global().render();
        assert!(text.contains("horizontal_pod_autoscaler_controller_metric_computation_total{action=\"none\",error=\"internal\",metric_type=\"Resource\"}"));
        assert!(text.contains("# HELP horizontal_pod_autoscaler_controller_reconciliations_total [BETA] Number of"));
    }

    #[test]
    fn hpas_are_counted_and_desired_replicas_shown_per_hpa() {
        let m = monitor();
        m.desired_replicas("ns", "web", 4);
        m.desired_replicas("ns", "web", 3);
        assert_eq!(m.desired_replicas.get(&["ns", "web"]), 3.0);
        let text = crate::metrics::global().render();
        assert!(text.contains(
            "# HELP horizontal_pod_autoscaler_controller_num_horizontal_pod_autoscalers [ALPHA] Current number of controlled HPA objects.\n# TYPE horizontal_pod_autoscaler_controller_num_horizontal_pod_autoscalers gauge\n"
        ));
        assert!(
            text.contains("horizontal_pod_autoscaler_controller_desired_replicas{hpa_name=\"web\",namespace=\"ns\"} 3")
        );
    }
}
