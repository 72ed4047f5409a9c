//! The Job controller's metrics (`pkg/controller/job/metrics`), subsystem `job_controller`,
//! with upstream's names, help texts (multi-line ones as written there), stability levels
//! (v1.36 made `pod_failures_handled_by_failure_policy_total` and
//! `terminated_pods_tracking_finalizer_total` BETA) and buckets.

use std::sync::{Arc, OnceLock};

use crate::metrics::{CounterVec, HistogramVec, exponential_buckets, global};
use crate::runtime::consistency::stale_sync_skips;

/// The metrics, registered on first use.
pub struct JobMetrics {
    pub sync_duration: Arc<HistogramVec>,
    pub syncs: Arc<CounterVec>,
    pub jobs_finished: Arc<CounterVec>,
    pub by_external_controller: Arc<CounterVec>,
    pub pods_finished: Arc<CounterVec>,
    pub failures_handled_by_policy: Arc<CounterVec>,
    pub terminated_pods_tracking_finalizer: Arc<CounterVec>,
    pub finished_indexes: Arc<CounterVec>,
    pub pods_creation: Arc<CounterVec>,
    /// v1.36: syncs skipped while the informers had not seen the controller's writes.
    pub stale_sync_skips: Arc<CounterVec>,
}

/// The process's Job metrics.
pub fn metrics() -> &'static JobMetrics {
    static METRICS: OnceLock<JobMetrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let registry = global();
        let histogram = |name, help, labels: &'static [&'static str], buckets: &[f64]| {
            let metric = Arc::new(HistogramVec::new(name, help, labels, buckets));
            registry.register(metric.clone());
            metric
        };
        let register = |metric: CounterVec| {
            let metric = Arc::new(metric);
            registry.register(metric.clone());
            metric
        };
        let counter = |name, help, labels: &'static [&'static str]| {
            let metric = Arc::new(CounterVec::counter(name, help, labels));
            registry.register(metric.clone());
            metric
        };
        JobMetrics {
            sync_duration: histogram(
                "job_controller_job_sync_duration_seconds",
                "[STABLE] The time it took to sync a job",
                &["completion_mode", "result", "action"],
                &exponential_buckets(0.004, 2.0, 15),
            ),
            syncs: counter(
                "job_controller_job_syncs_total",
                "[STABLE] The number of job syncs",
                &["completion_mode", "result", "action"],
            ),
            jobs_finished: counter(
                "job_controller_jobs_finished_total",
                "[STABLE] The number of finished jobs",
                &["completion_mode", "result", "reason"],
            ),
            by_external_controller: counter(
                "job_controller_jobs_by_external_controller_total",
                "[ALPHA] The number of Jobs managed by an external controller",
                &["controller_name"],
            ),
            pods_finished: counter(
                "job_controller_job_pods_finished_total",
                "[STABLE] The number of finished Pods that are fully tracked",
                &["completion_mode", "result"],
            ),
            failures_handled_by_policy: counter(
                "job_controller_pod_failures_handled_by_failure_policy_total",
                "[BETA] The number of failed Pods handled by failure policy with\n\t\t\trespect to the failure policy action applied based on the matched\n\t\t\trule. Possible values of the action label correspond to the\n\t\t\tpossible values for the failure policy rule action, which are:\n\t\t\t\"FailJob\", \"Ignore\" and \"Count\".",
                &["action"],
            ),
            terminated_pods_tracking_finalizer: counter(
                "job_controller_terminated_pods_tracking_finalizer_total",
                "[BETA] The number of terminated pods (phase=Failed|Succeeded)\nthat have the finalizer batch.kubernetes.io/job-tracking\nThe event label can be \"add\" or \"delete\".",
                &["event"],
            ),
            finished_indexes: counter(
                "job_controller_job_finished_indexes_total",
                "[ALPHA] The number of finished indexes. Possible values for the\n\t\t\tstatus label are: \"succeeded\", \"failed\". Possible values for the\n\t\t\tbackoffLimit label are: \"perIndex\" and \"global\"",
                &["status", "backoffLimit"],
            ),
            pods_creation: counter(
                "job_controller_job_pods_creation_total",
                "[ALPHA] The number of Pods created by the Job controller labelled with a reason for the Pod creation.\nThis metric also distinguishes between Pods created using different PodReplacementPolicy settings.\nPossible values of the \"reason\" label are:\n\"new\", \"recreate_terminating_or_failed\", \"recreate_failed\".\nPossible values of the \"status\" label are:\n\"succeeded\", \"failed\".",
                &["reason", "status"],
            ),
            stale_sync_skips: register(stale_sync_skips(
                "job_controller_stale_sync_skips_total",
                "[ALPHA] Total number of Job syncs skipped due to a stale watch cache.",
            )),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_sync_skips_are_exposed_as_upstreams_once_counted() {
        metrics().stale_sync_skips.inc(&["batch", "jobs"]);
        let text = global().render();
        let help = "# HELP job_controller_stale_sync_skips_total [ALPHA] Total number of Job syncs skipped due to \
                    a stale watch cache.\n# TYPE job_controller_stale_sync_skips_total counter\n";
        assert!(text.contains(help), "{text}");
        assert!(text.contains("job_controller_stale_sync_skips_total{group=\"batch\",resource=\"jobs\"} "));
    }
}
