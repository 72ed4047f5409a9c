//! A small Prometheus registry: labelled counters, gauges and histograms, rendered in the text
//! exposition format. Metric names and labels follow upstream's (client-go, component-base), so
//! dashboards built for the upstream controller manager keep working.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

/// Anything that can write its samples into an exposition.
pub trait Collector: Send + Sync {
    fn write_to(&self, out: &mut String);
}

/// The set of metrics served on `/metrics`.
#[derive(Default)]
pub struct Registry {
    collectors: Mutex<Vec<Arc<dyn Collector>>>,
}

impl Registry {
    pub fn register(&self, collector: Arc<dyn Collector>) {
        self.collectors.lock().push(collector);
    }

    /// The whole registry in Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for collector in self.collectors.lock().iter() {
            collector.write_to(&mut out);
        }
        out
    }
}

/// The process-wide registry.
pub fn global() -> &'static Registry {
    static GLOBAL: OnceLock<Registry> = OnceLock::new();
    GLOBAL.get_or_init(Registry::default)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Counter,
    Gauge,
}

/// A family of counters or gauges sharing a name and label names.
pub struct ValueFamily {
    name: &'static str,
    help: &'static str,
    kind: Kind,
    label_names: &'static [&'static str],
    values: Mutex<BTreeMap<Vec<String>, f64>>,
}

/// A monotonically increasing family (`_total`).
pub type CounterVec = ValueFamily;
/// A family of values that go up and down.
pub type GaugeVec = ValueFamily;

impl ValueFamily {
    pub fn counter(name: &'static str, help: &'static str, labels: &'static [&'static str]) -> Self {
        Self::new(name, help, Kind::Counter, labels)
    }

    pub fn gauge(name: &'static str, help: &'static str, labels: &'static [&'static str]) -> Self {
        Self::new(name, help, Kind::Gauge, labels)
    }

    fn new(name: &'static str, help: &'static str, kind: Kind, label_names: &'static [&'static str]) -> Self {
        ValueFamily { name, help, kind, label_names, values: Mutex::new(BTreeMap::new()) }
    }

    pub fn inc(&self, labels: &[&str]) {
        self.add(labels, 1.0);
    }

    pub fn add(&self, labels: &[&str], delta: f64) {
        debug_assert!(self.kind == Kind::Gauge || delta >= 0.0, "counter {} decreased", self.name);
        *self.values.lock().entry(self.key(labels)).or_insert(0.0) += delta;
    }

    pub fn set(&self, labels: &[&str], value: f64) {
        debug_assert!(self.kind == Kind::Gauge, "set on counter {}", self.name);
        self.values.lock().insert(self.key(labels), value);
    }

    pub fn get(&self, labels: &[&str]) -> f64 {
        self.values.lock().get(&self.key(labels)).copied().unwrap_or(0.0)
    }

    fn key(&self, labels: &[&str]) -> Vec<String> {
        debug_assert_eq!(labels.len(), self.label_names.len(), "labels of {}", self.name);
        labels.iter().map(|v| v.to_string()).collect()
    }
}

impl Collector for ValueFamily {
    fn write_to(&self, out: &mut String) {
        let kind = match self.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        write_header(out, self.name, self.help, kind);
        for (values, v) in self.values.lock().iter() {
            let _ = writeln!(out, "{}{} {}", self.name, label_set(self.label_names, values, None), number(*v));
        }
    }
}

/// A family of histograms with fixed bucket upper bounds.
pub struct HistogramVec {
    name: &'static str,
    help: &'static str,
    label_names: &'static [&'static str],
    bounds: Vec<f64>,
    series: Mutex<BTreeMap<Vec<String>, Histogram>>,
}

#[derive(Clone)]
struct Histogram {
    /// Observations per bucket (not cumulative); the last entry is `+Inf`.
    counts: Vec<u64>,
    sum: f64,
}

impl HistogramVec {
    pub fn new(name: &'static str, help: &'static str, labels: &'static [&'static str], bounds: &[f64]) -> Self {
        HistogramVec { name, help, label_names: labels, bounds: bounds.to_vec(), series: Mutex::new(BTreeMap::new()) }
    }

    pub fn observe(&self, labels: &[&str], value: f64) {
        let key = labels.iter().map(|v| v.to_string()).collect();
        let bucket = self.bounds.iter().position(|b| value <= *b).unwrap_or(self.bounds.len());
        let mut series = self.series.lock();
        let h = series.entry(key).or_insert_with(|| Histogram { counts: vec![0; self.bounds.len() + 1], sum: 0.0 });
        h.counts[bucket] += 1;
        h.sum += value;
    }

    /// How many observations a series has.
    pub fn count(&self, labels: &[&str]) -> u64 {
        let key: Vec<String> = labels.iter().map(|v| v.to_string()).collect();
        self.series.lock().get(&key).map_or(0, |h| h.counts.iter().sum())
    }
}

impl Collector for HistogramVec {
    fn write_to(&self, out: &mut String) {
        write_header(out, self.name, self.help, "histogram");
        for (values, h) in self.series.lock().iter() {
            let mut cumulative = 0;
            for (i, count) in h.counts.iter().enumerate() {
                cumulative += count;
                let le = self.bounds.get(i).map_or("+Inf".to_string(), |b| number(*b));
                let labels = label_set(self.label_names, values, Some(&le));
                let _ = writeln!(out, "{}_bucket{labels} {cumulative}", self.name);
            }
            let labels = label_set(self.label_names, values, None);
            let _ = writeln!(out, "{}_sum{labels} {}", self.name, number(h.sum));
            let _ = writeln!(out, "{}_count{labels} {cumulative}", self.name);
        }
    }
}

/// `count` buckets starting at `start`, each `factor` times the previous (Prometheus'
/// ExponentialBuckets).
pub fn exponential_buckets(start: f64, factor: f64, count: usize) -> Vec<f64> {
    std::iter::successors(Some(start), |b| Some(b * factor)).take(count).collect()
}

fn write_header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn label_set(names: &[&str], values: &[String], le: Option<&str>) -> String {
    let mut pairs: Vec<String> =
        names.iter().zip(values).map(|(n, v)| format!("{n}=\"{}\"", escape_label(v))).collect();
    if let Some(le) = le {
        pairs.push(format!("le=\"{le}\""));
    }
    if pairs.is_empty() { String::new() } else { format!("{{{}}}", pairs.join(",")) }
}

fn escape_label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn number(v: f64) -> String {
    if v.is_infinite() { if v > 0.0 { "+Inf".into() } else { "-Inf".into() } } else { format!("{v}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_gauges() {
        let c = CounterVec::counter("rest_client_requests_total", "Requests.", &["code", "method"]);
        c.inc(&["200", "GET"]);
        c.add(&["200", "GET"], 2.0);
        c.inc(&["404", "GET"]);
        let g = GaugeVec::gauge("leader_election_master_status", "Leader.", &["name"]);
        g.set(&["kube-controller-manager"], 1.0);
        let mut out = String::new();
        c.write_to(&mut out);
        g.write_to(&mut out);
        assert_eq!(
            out,
            "# HELP rest_client_requests_total Requests.\n\
             # TYPE rest_client_requests_total counter\n\
             rest_client_requests_total{code=\"200\",method=\"GET\"} 3\n\
             rest_client_requests_total{code=\"404\",method=\"GET\"} 1\n\
             # HELP leader_election_master_status Leader.\n\
             # TYPE leader_election_master_status gauge\n\
             leader_election_master_status{name=\"kube-controller-manager\"} 1\n"
        );
    }

    #[test]
    fn renders_cumulative_histogram_buckets() {
        let h = HistogramVec::new("d_seconds", "D.", &["verb"], &[0.1, 1.0]);
        h.observe(&["GET"], 0.05);
        h.observe(&["GET"], 0.5);
        h.observe(&["GET"], 5.0);
        let mut out = String::new();
        h.write_to(&mut out);
        assert!(out.contains("d_seconds_bucket{verb=\"GET\",le=\"0.1\"} 1\n"));
        assert!(out.contains("d_seconds_bucket{verb=\"GET\",le=\"1\"} 2\n"));
        assert!(out.contains("d_seconds_bucket{verb=\"GET\",le=\"+Inf\"} 3\n"));
        assert!(out.contains("d_seconds_sum{verb=\"GET\"} 5.55\n"));
        assert!(out.contains("d_seconds_count{verb=\"GET\"} 3\n"));
        assert_eq!(h.count(&["GET"]), 3);
    }

    #[test]
    fn escapes_label_values() {
        let c = CounterVec::counter("x_total", "X.", &["path"]);
        c.inc(&["a\"b\\c"]);
        let mut out = String::new();
        c.write_to(&mut out);
        assert!(out.contains("x_total{path=\"a\\\"b\\\\c\"} 1"));
    }

    #[test]
    fn exponential_buckets_grow_by_factor() {
        assert_eq!(exponential_buckets(0.001, 10.0, 3), vec![0.001, 0.01, 0.1]);
    }
}
