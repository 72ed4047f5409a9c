//! The workqueue metrics of component-base's Prometheus provider
//! (k8s.io/component-base/metrics/prometheus/workqueue), labelled by queue `name`.
//!
//! The families are registered once in [`metrics::global`] and shared by every queue; queues with
//! the same name share series, exactly as upstream's `WithLabelValues(name)` children are shared.
//! Upstream refreshes the two in-flight gauges every 500ms from a goroutine per queue; here they
//! are computed when scraped, by asking every live queue (held weakly), so no thread is needed.
//! Queues sharing a name are summed for `workqueue_unfinished_work_seconds` and maxed for
//! `workqueue_longest_running_processor_seconds`.
//!
//! As in v1.36 (promoted from ALPHA since v1.33), the families are BETA: component-base prefixes
//! their help with `[BETA] `. Every series of a queue exists from the queue's creation
//! (upstream's `newQueueMetrics` calls `WithLabelValues(name)` for each), at zero.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

use parking_lot::Mutex;

use crate::metrics::{self, Collector, CounterVec, GaugeVec, HistogramVec};

const UNFINISHED_WORK: &str = "workqueue_unfinished_work_seconds";
const UNFINISHED_WORK_HELP: &str = "[BETA] How many seconds of work has done that is in progress and hasn't been observed by \
     work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the \
     rate at which this increases.";
const LONGEST_RUNNING: &str = "workqueue_longest_running_processor_seconds";
const LONGEST_RUNNING_HELP: &str =
    "[BETA] How many seconds has the longest running processor for workqueue been running.";
const LABELS: &[&str] = &["name"];

/// Upstream v1.36's `ExponentialBuckets(10e-9, 10, 10)`: 10ns to 10s.
fn duration_buckets() -> Vec<f64> {
    metrics::exponential_buckets(10e-9, 10.0, 10)
}

/// The process-wide workqueue metric families.
pub(super) struct Families {
    pub(super) depth: Arc<GaugeVec>,
    pub(super) adds: Arc<CounterVec>,
    pub(super) queue_duration: Arc<HistogramVec>,
    pub(super) work_duration: Arc<HistogramVec>,
    pub(super) retries: Arc<CounterVec>,
    in_flight: Arc<InFlightCollector>,
}

/// The families, registered in [`metrics::global`] on first use.
pub(super) fn families() -> &'static Families {
    static FAMILIES: OnceLock<Families> = OnceLock::new();
    FAMILIES.get_or_init(|| {
        let buckets = duration_buckets();
        let families = Families {
            depth: Arc::new(GaugeVec::gauge("workqueue_depth", "[BETA] Current depth of workqueue", LABELS)),
            adds: Arc::new(CounterVec::counter(
                "workqueue_adds_total",
                "[BETA] Total number of adds handled by workqueue",
                LABELS,
            )),
            queue_duration: Arc::new(HistogramVec::new(
                "workqueue_queue_duration_seconds",
                "[BETA] How long in seconds an item stays in workqueue before being requested.",
                LABELS,
                &buckets,
            )),
            work_duration: Arc::new(HistogramVec::new(
                "workqueue_work_duration_seconds",
                "[BETA] How long in seconds processing an item from workqueue takes.",
                LABELS,
                &buckets,
            )),
            retries: Arc::new(CounterVec::counter(
                "workqueue_retries_total",
                "[BETA] Total number of retries handled by workqueue",
                LABELS,
            )),
            in_flight: Arc::new(InFlightCollector::default()),
        };
        let registry = metrics::global();
        registry.register(families.depth.clone());
        registry.register(families.adds.clone());
        registry.register(families.queue_duration.clone());
        registry.register(families.work_duration.clone());
        registry.register(families.in_flight.clone());
        registry.register(families.retries.clone());
        families
    })
}

/// Registers a queue to be asked for its in-flight work at every scrape.
pub(super) fn watch_in_flight(queue: Weak<dyn InFlight>) {
    families().in_flight.queues.lock().push(queue);
}

/// Counts one retry (an `add_after`) of the queue `name`.
pub(super) fn retry(name: &str) {
    families().retries.inc(&[name]);
}

/// A queue that can tell how long its in-flight items have been processing.
pub(super) trait InFlight: Send + Sync {
    /// The queue's name, the sum of its in-flight items' processing times and the longest of
    /// them, in seconds; `None` for a queue without metrics.
    fn in_flight(&self) -> Option<(String, f64, f64)>;
}

/// Computes the two in-flight gauges when scraped.
#[derive(Default)]
struct InFlightCollector {
    queues: Mutex<Vec<Weak<dyn InFlight>>>,
}

impl InFlightCollector {
    /// The live queues, forgetting dropped ones.
    fn live(&self) -> Vec<Arc<dyn InFlight>> {
        let mut queues = self.queues.lock();
        queues.retain(|q| q.strong_count() > 0);
        queues.iter().filter_map(Weak::upgrade).collect()
    }
}

impl Collector for InFlightCollector {
    fn write_to(&self, out: &mut String) {
        let mut by_name: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        for (name, total, longest) in self.live().iter().filter_map(|q| q.in_flight()) {
            let entry = by_name.entry(name).or_insert((0.0, 0.0));
            entry.0 += total;
            entry.1 = entry.1.max(longest);
        }
        let unfinished = GaugeVec::gauge(UNFINISHED_WORK, UNFINISHED_WORK_HELP, LABELS);
        let longest = GaugeVec::gauge(LONGEST_RUNNING, LONGEST_RUNNING_HELP, LABELS);
        for (name, (total, max)) in &by_name {
            unfinished.set(&[name], *total);
            longest.set(&[name], *max);
        }
        unfinished.write_to(out);
        longest.write_to(out);
    }
}

/// One named queue's bookkeeping (upstream's `defaultQueueMetrics`); guarded by the queue's lock.
pub(super) struct QueueMetrics<T> {
    name: String,
    /// When each dirty item was first added (since it was last handed out).
    add_times: HashMap<T, Instant>,
    /// When each item being processed was handed out.
    processing_starts: HashMap<T, Instant>,
}

impl<T: Clone + Eq + Hash> QueueMetrics<T> {
    /// Creates the queue's series at zero, as upstream does when a named queue is created (the
    /// retries series only for a delaying queue, as upstream's `newDelayingQueue`).
    pub(super) fn new(name: &str, delaying: bool) -> Self {
        let families = families();
        let labels = [name];
        families.depth.ensure(&labels);
        families.adds.ensure(&labels);
        families.queue_duration.ensure(&labels);
        families.work_duration.ensure(&labels);
        if delaying {
            families.retries.ensure(&labels);
        }
        QueueMetrics { name: name.to_string(), add_times: HashMap::new(), processing_starts: HashMap::new() }
    }

    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// An item became dirty.
    pub(super) fn add(&mut self, item: &T, now: Instant) {
        let families = families();
        families.adds.inc(&[&self.name]);
        families.depth.add(&[&self.name], 1.0);
        self.add_times.entry(item.clone()).or_insert(now);
    }

    /// An item was handed to a worker.
    pub(super) fn get(&mut self, item: &T, now: Instant) {
        let families = families();
        families.depth.add(&[&self.name], -1.0);
        self.processing_starts.insert(item.clone(), now);
        if let Some(added) = self.add_times.remove(item) {
            families.queue_duration.observe(&[&self.name], seconds_between(added, now));
        }
    }

    /// A worker finished an item.
    pub(super) fn done(&mut self, item: &T, now: Instant) {
        if let Some(started) = self.processing_starts.remove(item) {
            families().work_duration.observe(&[&self.name], seconds_between(started, now));
        }
    }

    /// The sum and the longest of the in-flight items' processing times, in seconds.
    pub(super) fn in_flight(&self, now: Instant) -> (f64, f64) {
        self.processing_starts
            .values()
            .map(|&started| seconds_between(started, now))
            .fold((0.0, 0.0), |(total, longest), age| (total + age, f64::max(longest, age)))
    }
}

fn seconds_between(earlier: Instant, later: Instant) -> f64 {
    later.saturating_duration_since(earlier).as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_match_upstream() {
        let buckets: Vec<String> = duration_buckets().into_iter().map(metrics::go_float).collect();
        assert_eq!(buckets.first().map(String::as_str), Some("1e-08"));
        assert_eq!(buckets.last().map(String::as_str), Some("10"));
        assert_eq!(buckets.len(), 10);
    }

    #[test]
    fn help_carries_the_beta_stability_prefix() {
        let mut out = String::new();
        let families = families();
        families.depth.ensure(&["help_test"]);
        families.depth.write_to(&mut out);
        let header = "# HELP workqueue_depth [BETA] Current depth of workqueue\n# TYPE workqueue_depth gauge\n";
        assert!(out.starts_with(header), "{out}");
    }
}
