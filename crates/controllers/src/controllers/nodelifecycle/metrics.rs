//! The node lifecycle controller's metrics (upstream's `pkg/controller/nodelifecycle/metrics.go`,
//! subsystem `node_collector`). The deprecated `node_collector_evictions_number` is left out.

use std::sync::{Arc, OnceLock};

use crate::metrics::{CounterVec, GaugeVec, HistogramVec, exponential_buckets, registered};

/// Registers every family, as upstream's `Register` does when the controller is created (the
/// label-less histograms then show at zero).
pub fn register() {
    zone_health();
    zone_size();
    unhealthy_nodes();
    evictions_total();
    update_node_health_duration();
    update_all_nodes_health_duration();
}

/// `node_collector_zone_health`: percentage of healthy nodes per zone.
pub fn zone_health() -> &'static GaugeVec {
    static CELL: OnceLock<Arc<GaugeVec>> = OnceLock::new();
    registered(&CELL, || {
        GaugeVec::gauge(
            "node_collector_zone_health",
            "[ALPHA] Gauge measuring percentage of healthy nodes per zone.",
            &["zone"],
        )
    })
}

/// `node_collector_zone_size`.
pub fn zone_size() -> &'static GaugeVec {
    static CELL: OnceLock<Arc<GaugeVec>> = OnceLock::new();
    registered(&CELL, || {
        GaugeVec::gauge(
            "node_collector_zone_size",
            "[ALPHA] Gauge measuring number of registered Nodes per zones.",
            &["zone"],
        )
    })
}

/// `node_collector_unhealthy_nodes_in_zone`.
pub fn unhealthy_nodes() -> &'static GaugeVec {
    static CELL: OnceLock<Arc<GaugeVec>> = OnceLock::new();
    registered(&CELL, || {
        GaugeVec::gauge(
            "node_collector_unhealthy_nodes_in_zone",
            "[ALPHA] Gauge measuring number of not Ready Nodes per zones.",
            &["zone"],
        )
    })
}

/// `node_collector_evictions_total`: NoExecute taints added, per zone.
pub fn evictions_total() -> &'static CounterVec {
    static CELL: OnceLock<Arc<CounterVec>> = OnceLock::new();
    registered(&CELL, || {
        CounterVec::counter(
            "node_collector_evictions_total",
            "[STABLE] Number of Node evictions that happened since current instance of NodeController started.",
            &["zone"],
        )
    })
}

/// `node_collector_update_node_health_duration_seconds`.
pub fn update_node_health_duration() -> &'static HistogramVec {
    static CELL: OnceLock<Arc<HistogramVec>> = OnceLock::new();
    registered(&CELL, || {
        HistogramVec::new(
            "node_collector_update_node_health_duration_seconds",
            "[ALPHA] Duration in seconds for NodeController to update the health of a single node.",
            &[],
            &exponential_buckets(0.001, 4.0, 8),
        )
        .at_zero()
    })
}

/// `node_collector_update_all_nodes_health_duration_seconds`.
pub fn update_all_nodes_health_duration() -> &'static HistogramVec {
    static CELL: OnceLock<Arc<HistogramVec>> = OnceLock::new();
    registered(&CELL, || {
        HistogramVec::new(
            "node_collector_update_all_nodes_health_duration_seconds",
            "[ALPHA] Duration in seconds for NodeController to update the health of all nodes.",
            &[],
            &exponential_buckets(0.01, 4.0, 8),
        )
        .at_zero()
    })
}
