//! client-go v1.36's informer metrics (component-base `metrics/prometheus/clientgo/fifo`, fed by
//! `tools/cache/fifo_metrics.go`), labelled by the informer's name and resource:
//! `informer_queued_items` and `informer_processing_latency_seconds`.
//!
//! Upstream gives series only to the informers of a factory that has a name
//! (`cache.NewInformerName`; kube-controller-manager names its typed factory
//! `kube-controller-manager` in `CreateControllerContext`, its metadata informers have none),
//! one per resource, created at zero when the informer runs and builds its FIFO
//! (`newFIFOMetrics`). The RealFIFO sets `queued_items` to the deltas left each time it pops
//! one and observes how long processing the popped delta took (store write and handlers).
//!
//! There is no FIFO here: the reflector applies each delta (an event, a bookmark, a list's
//! replace, a resync) as it takes it, store write and handlers together, so nothing ever waits
//! behind the delta being processed and `queued_items` is set to 0 at each; the latency is the
//! time that processing took, as upstream measures it.
//!
//! `informer_store_resource_version` is registered too, as upstream does, and never has a
//! series: upstream's factories pass its store no metrics provider.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use crate::metrics::{self, GaugeVec, HistogramVec};

/// The label names, in upstream's order.
const LABELS: &[&str] = &["name", "group", "version", "resource"];
/// `fifoProcessingLatency`'s buckets.
const LATENCY_BUCKETS: &[f64] = &[0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

struct Families {
    queued: Arc<GaugeVec>,
    latency: Arc<HistogramVec>,
}

/// The families, registered in [`metrics::global`] on first use.
fn families() -> &'static Families {
    static FAMILIES: OnceLock<Families> = OnceLock::new();
    FAMILIES.get_or_init(|| {
        let families = Families {
            queued: Arc::new(GaugeVec::gauge(
                "informer_queued_items",
                "[ALPHA] Number of items currently queued in the FIFO.",
                LABELS,
            )),
            latency: Arc::new(HistogramVec::new(
                "informer_processing_latency_seconds",
                "[ALPHA] Time taken to process events after popping from the queue.",
                LABELS,
                LATENCY_BUCKETS,
            )),
        };
        let store_version = GaugeVec::gauge(
            "informer_store_resource_version",
            "[ALPHA] The 15 least significant digits of the resource version of the store.",
            LABELS,
        );
        let registry = metrics::global();
        registry.register(families.queued.clone());
        registry.register(families.latency.clone());
        registry.register(Arc::new(store_version));
        families
    })
}

/// Registers the families, as importing component-base's `clientgo` package does at start.
pub(super) fn register() {
    families();
}

/// One informer's series (upstream's `fifoMetrics` of a reserved `InformerNameAndResource`).
pub(super) struct FifoMetrics {
    /// name, group, version, resource.
    labels: [String; 4],
}

impl FifoMetrics {
    /// The series of the informer of `resource` (`group`/`version`) in the factory `name`.
    pub(super) fn new(name: &str, group: &str, version: &str, resource: &str) -> Self {
        FifoMetrics { labels: [name, group, version, resource].map(str::to_string) }
    }

    /// The series of the typed informer of `K` in the factory `name`. Its resource is what
    /// client-go's generated informers (informer-gen) write in their `gvr`: the kind in lower
    /// case plus `s` (`configmaps`, but `endpointss`, `ingressclasss`), not the API's plural.
    pub(super) fn of<K: k8s_openapi::Resource>(name: &str) -> Self {
        FifoMetrics::new(name, K::GROUP, K::VERSION, &format!("{}s", K::KIND.to_lowercase()))
    }

    /// The series upstream's typed informer of `resource` has, for a metadata-only informer
    /// standing in for it (same informer-gen resource: the kind in lower case plus `s`).
    pub(super) fn of_resource(name: &str, resource: &crate::client::discovery::ApiResource) -> Self {
        FifoMetrics::new(name, &resource.group, &resource.version, &format!("{}s", resource.kind.to_lowercase()))
    }

    pub(super) fn labels(&self) -> [&str; 4] {
        [&self.labels[0], &self.labels[1], &self.labels[2], &self.labels[3]]
    }

    /// Creates the series at zero, as the informer's `Run` building its FIFO does.
    pub(super) fn start(&self) {
        let families = families();
        families.queued.ensure(&self.labels());
        families.latency.ensure(&self.labels());
    }

    /// Runs `work`, the processing of one delta just taken, and observes how long it took;
    /// nothing is left queued behind it.
    pub(super) fn process<T>(&self, work: impl FnOnce() -> T) -> T {
        let families = families();
        families.queued.set(&self.labels(), 0.0);
        let started = Instant::now();
        let done = work();
        families.latency.observe(&self.labels(), started.elapsed().as_secs_f64());
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_exist_from_the_start_and_each_delta_is_timed() {
        let fifo = FifoMetrics::new("t-fifo-metrics", "apps", "v1", "deployments");
        let labels = fifo.labels();
        fifo.start();
        assert_eq!(families().latency.count(&labels), 0);
        assert_eq!(families().queued.get(&labels), 0.0);
        assert_eq!(fifo.process(|| 7), 7);
        fifo.process(|| ());
        assert_eq!(families().latency.count(&labels), 2);
        let mut out = String::new();
        metrics::Collector::write_to(families().queued.as_ref(), &mut out);
        let series =
            "informer_queued_items{group=\"apps\",name=\"t-fifo-metrics\",resource=\"deployments\",version=\"v1\"} 0";
        assert!(out.contains(series), "{out}");
    }

    #[test]
    fn families_are_registered_with_upstreams_help() {
        register();
        FifoMetrics::new("t-fifo-registered", "", "v1", "pods").start();
        let text = metrics::global().render();
        let help = "# HELP informer_processing_latency_seconds [ALPHA] Time taken to process events after popping \
                    from the queue.\n# TYPE informer_processing_latency_seconds histogram\n";
        assert!(text.contains(help), "{text}");
        assert!(text.contains("# HELP informer_queued_items [ALPHA] Number of items currently queued in the FIFO.\n"));
        assert!(!text.contains("informer_store_resource_version"), "registered, without series");
    }
}
