//! The binder's metrics (upstream's `persistentvolume/metrics`): the `pv_collector_*` gauges
//! computed from the controller's caches at each scrape, the retroactive StorageClass
//! counters, and the provision/delete operation latencies and errors.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

use parking_lot::Mutex;

use super::PvController;
use super::util::{claim_class, claim_phase, volume_phase};
use crate::metrics::{Collector, CounterVec, GaugeVec, HistogramVec};

/// The metrics registered once per process (`registerMetrics.Do`).
struct Metrics {
    /// `volume_operation_total_errors`, deprecated since v1.36 for the next one.
    operation_total_errors: Arc<CounterVec>,
    /// `volume_operation_errors_total` (new in v1.36).
    operation_errors: Arc<CounterVec>,
    operation_seconds: Arc<HistogramVec>,
    retroactive: Arc<CounterVec>,
    retroactive_errors: Arc<CounterVec>,
    /// `OperationStartTimeCache`: key → (plugin, operation, start).
    started: Mutex<HashMap<String, (String, String, Instant)>>,
    /// The controller the collector counts; the latest one started.
    controller: Mutex<Weak<PvController>>,
}

fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let registry = crate::metrics::global();
        let metrics = Metrics {
            operation_total_errors: Arc::new(
                CounterVec::counter(
                    "volume_operation_total_errors",
                    "[ALPHA] Total volume operation errors",
                    &["plugin_name", "operation_name"],
                )
                .deprecated("1.36.0"),
            ),
            operation_errors: Arc::new(CounterVec::counter(
                "volume_operation_errors_total",
                "[ALPHA] Total volume operation errors",
                &["plugin_name", "operation_name"],
            )),
            operation_seconds: Arc::new(HistogramVec::new(
                "volume_operation_total_seconds",
                "[ALPHA] Storage operation end to end duration in seconds",
                &["plugin_name", "operation_name"],
                &[0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 25.0, 50.0, 120.0, 300.0, 600.0],
            )),
            retroactive: Arc::new(CounterVec::counter(
                "retroactive_storageclass_total",
                "[ALPHA] Total number of retroactive StorageClass assignments to persistent volume claim",
                &[],
            )),
            retroactive_errors: Arc::new(CounterVec::counter(
                "retroactive_storageclass_errors_total",
                "[ALPHA] Total number of failed retroactive StorageClass assignments to persistent volume claim",
                &[],
            )),
            started: Mutex::new(HashMap::new()),
            controller: Mutex::new(Weak::new()),
        };
        registry.register(Arc::new(CountCollector));
        registry.register(metrics.operation_total_errors.clone());
        registry.register(metrics.operation_errors.clone());
        registry.register(metrics.operation_seconds.clone());
        metrics.retroactive.ensure(&[]);
        metrics.retroactive_errors.ensure(&[]);
        registry.register(metrics.retroactive.clone());
        registry.register(metrics.retroactive_errors.clone());
        metrics
    })
}

/// `metrics.Register`: from the start of the controller on.
pub(super) fn register(controller: Arc<PvController>) {
    *metrics().controller.lock() = Arc::downgrade(&controller);
}

/// `RecordRetroactiveStorageClassMetric`.
pub(super) fn retroactive_storage_class(success: bool) {
    let metrics = metrics();
    metrics.retroactive.inc(&[]);
    if !success {
        metrics.retroactive_errors.inc(&[]);
    }
}

/// `operationTimestamps.AddIfNotExist`.
pub(super) fn operation_started(key: &str, plugin: &str, operation: &str) {
    let mut started = metrics().started.lock();
    started.entry(key.to_string()).or_insert_with(|| (plugin.to_string(), operation.to_string(), Instant::now()));
}

/// `RecordMetric(key, …, nil)`: the operation's latency, once.
pub(super) fn operation_done(key: &str) {
    let metrics = metrics();
    if let Some((plugin, operation, start)) = metrics.started.lock().remove(key) {
        metrics.operation_seconds.observe(&[&plugin, &operation], start.elapsed().as_secs_f64());
    }
}

/// `RecordMetric(key, …, err)`: an error of the operation, which stays pending.
pub(super) fn operation_failed(key: &str) {
    let started = metrics().started.lock().get(key).map(|(p, o, _)| (p.clone(), o.clone()));
    if let Some((plugin, operation)) = started {
        operation_error(&plugin, &operation);
    }
}

/// `RecordVolumeOperationErrorMetric`: both error counters.
pub(super) fn operation_error(plugin: &str, operation: &str) {
    let plugin = if plugin.is_empty() { "N/A" } else { plugin };
    let metrics = metrics();
    metrics.operation_total_errors.inc(&[plugin, operation]);
    metrics.operation_errors.inc(&[plugin, operation]);
}

/// A deleted volume ends its delete operation (`deleteVolume`).
pub(super) fn volume_deleted(name: &str) {
    operation_done(name);
}

/// The plugin name of a volume as the collector reports it
/// (`GetFullQualifiedPluginNameForVolume`): CSI volumes carry their driver.
fn plugin_name(volume: &k8s_openapi::api::core::v1::PersistentVolume) -> String {
    let spec = volume.spec.as_ref();
    if let Some(csi) = spec.and_then(|s| s.csi.as_ref()) {
        return format!("kubernetes.io/csi:{}", csi.driver);
    }
    if spec.is_some_and(|s| s.host_path.is_some()) {
        return "kubernetes.io/host-path".into();
    }
    if spec.is_some_and(|s| s.local.is_some()) {
        return "kubernetes.io/local-volume".into();
    }
    if spec.is_some_and(|s| s.nfs.is_some()) {
        return "kubernetes.io/nfs".into();
    }
    "N/A".into()
}

/// `pvAndPVCCountCollector`.
struct CountCollector;

impl Collector for CountCollector {
    fn write_to(&self, out: &mut String) {
        let Some(controller) = metrics().controller.lock().upgrade() else { return };
        let total = GaugeVec::gauge(
            "pv_collector_total_pv_count",
            "[ALPHA] Gauge measuring total number of persistent volumes",
            &["plugin_name", "volume_mode"],
        );
        let bound = GaugeVec::gauge(
            "pv_collector_bound_pv_count",
            "[ALPHA] Gauge measuring number of persistent volume currently bound",
            &["storage_class"],
        );
        let unbound = GaugeVec::gauge(
            "pv_collector_unbound_pv_count",
            "[ALPHA] Gauge measuring number of persistent volume currently unbound",
            &["storage_class"],
        );
        for volume in controller.volumes.list() {
            let spec = volume.spec.clone().unwrap_or_default();
            let mode = spec.volume_mode.clone().unwrap_or_default();
            total.inc(&[&plugin_name(&volume), &mode]);
            let class = spec.storage_class_name.unwrap_or_default();
            if volume_phase(&volume) == "Bound" { bound.inc(&[&class]) } else { unbound.inc(&[&class]) }
        }
        let labels = &["namespace", "storage_class", "volume_attributes_class"];
        let bound_claims = GaugeVec::gauge(
            "pv_collector_bound_pvc_count",
            "[ALPHA] Gauge measuring number of persistent volume claim currently bound",
            labels,
        );
        let unbound_claims = GaugeVec::gauge(
            "pv_collector_unbound_pvc_count",
            "[ALPHA] Gauge measuring number of persistent volume claim currently unbound",
            labels,
        );
        let mut counts: BTreeMap<(bool, [String; 3]), f64> = BTreeMap::new();
        for claim in controller.claims.list() {
            let namespace = claim.metadata.namespace.clone().unwrap_or_default();
            let vac = claim.spec.as_ref().and_then(|s| s.volume_attributes_class_name.clone()).unwrap_or_default();
            *counts.entry((claim_phase(&claim) == "Bound", [namespace, claim_class(&claim), vac])).or_default() += 1.0;
        }
        for ((is_bound, [namespace, class, vac]), count) in counts {
            let family = if is_bound { &bound_claims } else { &unbound_claims };
            family.set(&[&namespace, &class, &vac], count);
        }
        for family in [&total, &bound, &unbound, &bound_claims, &unbound_claims] {
            family.write_to(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn csi_volumes_are_counted_under_their_driver() {
        let volume =
            serde_json::from_value(json!({"spec": {"csi": {"driver": "csi.kcm-sandbox.dev", "volumeHandle": "h"}}}))
                .unwrap();
        assert_eq!(plugin_name(&volume), "kubernetes.io/csi:csi.kcm-sandbox.dev");
        assert_eq!(plugin_name(&Default::default()), "N/A");
    }

    #[test]
    fn operation_errors_are_counted_twice_the_old_name_deprecated() {
        operation_error("", "test-delete");
        operation_error("example.com/p", "test-delete");
        let metrics = metrics();
        assert_eq!(metrics.operation_errors.get(&["N/A", "test-delete"]), 1.0);
        assert_eq!(metrics.operation_total_errors.get(&["example.com/p", "test-delete"]), 1.0);
        let text = crate::metrics::global().render();
        assert!(text.contains("# HELP volume_operation_errors_total [ALPHA] Total volume operation errors\n"));
        assert!(text.contains(
            "# HELP volume_operation_total_errors [ALPHA] (Deprecated since 1.36.0) Total volume operation errors\n"
        ));
    }

    #[test]
    fn the_delete_operation_errors_once_started() {
        operation_started("pv-test-metrics", "example.com/q", "delete");
        operation_failed("pv-test-metrics");
        operation_failed("pv-never-started");
        assert_eq!(metrics().operation_errors.get(&["example.com/q", "delete"]), 1.0);
        volume_deleted("pv-test-metrics");
        assert_eq!(metrics().operation_seconds.count(&["example.com/q", "delete"]), 1);
    }
}
