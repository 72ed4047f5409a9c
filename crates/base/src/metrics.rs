//! A small Prometheus registry: labelled counters, gauges and histograms, rendered in the text
//! exposition format. Metric names and labels follow upstream's (client-go, component-base), so
//! dashboards built for the upstream controller manager keep working.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, RwLock};

/// Anything that can write its samples into an exposition.
pub trait Collector: Send + Sync {
    /// Appends this collector's `# HELP`/`# TYPE` lines and samples to `out`.
    fn write_to(&self, out: &mut String);

    /// The families this collector exports as component-base metrics (a stability prefix in
    /// their help), for `registered_metrics_total` and hiding; raw collectors describe none.
    fn describe(&self) -> Vec<Desc> {
        Vec::new()
    }
}

/// A family's name, help and deprecation, as component-base knows a metric.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desc {
    /// The family's name.
    pub name: &'static str,
    /// Its help, with component-base's stability prefix.
    pub help: &'static str,
    /// The version (`1.32.0`) since which the family is deprecated.
    pub deprecated: Option<&'static str>,
}

impl Desc {
    /// `ALPHA`, `BETA` or `STABLE` from component-base's help prefix; `None` for a raw metric.
    fn stability(&self) -> Option<&'static str> {
        ["ALPHA", "BETA", "STABLE", "INTERNAL"].into_iter().find(|level| {
            self.help.strip_prefix('[').and_then(|h| h.strip_prefix(level)).is_some_and(|h| h.starts_with("] "))
        })
    }

    /// Hidden as component-base hides a metric deprecated before the current minor version,
    /// unless `--show-hidden-metrics-for-version` asks for it.
    fn hidden(&self) -> bool {
        self.deprecated.is_some_and(deprecated_before_current) && !settings().show_hidden
    }
}

/// Whether `version` (`major.minor[.patch]`) is older than this build's minor version.
fn deprecated_before_current(version: &str) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) < CURRENT_VERSION
}

/// The Kubernetes version whose metrics lifecycle applies (`major`, `minor`).
pub const CURRENT_VERSION: (u64, u64) = (
    crate::apimachinery::version::KUBERNETES_RELEASE.major as u64,
    crate::apimachinery::version::KUBERNETES_RELEASE.minor as u64,
);

/// Prometheus' `DefBuckets`, which a histogram without buckets of its own gets.
pub const DEFAULT_BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// What the metric flags set (component-base's `SetShowHidden`, `SetDisabledMetric`,
/// `SetLabelAllowListFromCLI`).
#[derive(Default, Debug, Clone)]
pub struct Settings {
    /// `--show-hidden-metrics-for-version` was given (validated against the previous minor).
    pub show_hidden: bool,
    /// `--disabled-metrics`: family names not exported.
    pub disabled: BTreeSet<String>,
    /// `--allow-metric-labels`: metric name to label name to the values kept; any other value
    /// is exported as `unexpected`.
    pub allowed_labels: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
}

fn settings_lock() -> &'static RwLock<Settings> {
    static SETTINGS: OnceLock<RwLock<Settings>> = OnceLock::new();
    SETTINGS.get_or_init(RwLock::default)
}

fn settings() -> parking_lot::RwLockReadGuard<'static, Settings> {
    settings_lock().read()
}

/// Applies the metric flags to the process: counts the disabled metrics as component-base
/// does (one per name given) and constrains label values from now on.
pub fn configure(new: Settings) {
    let disabled = new.disabled.len();
    let any_allow_list = !new.allowed_labels.is_empty();
    *settings_lock().write() = new;
    ALLOW_LISTS.store(any_allow_list, Ordering::Relaxed);
    registry_families().disabled.add(&[], disabled as f64);
}

/// Whether any allow list is set: the common case skips the look-up.
static ALLOW_LISTS: AtomicBool = AtomicBool::new(false);

/// Label values as `--allow-metric-labels` lets them through: a value not allowed for its
/// label becomes `unexpected` (counted in `cardinality_enforcement_unexpected_categorizations_total`).
fn constrain(metric: &str, names: &[&str], values: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = values.iter().map(|v| v.to_string()).collect();
    if !ALLOW_LISTS.load(Ordering::Relaxed) {
        return out;
    }
    let mut unexpected = 0;
    if let Some(lists) = settings().allowed_labels.get(metric) {
        for (value, name) in out.iter_mut().zip(names) {
            if lists.get(*name).is_some_and(|allowed| !allowed.contains(value.as_str())) {
                *value = "unexpected".into();
                unexpected += 1;
            }
        }
    }
    if unexpected > 0 {
        registry_families().unexpected.add(&[], unexpected as f64);
    }
    out
}

/// component-base's own families (`registry.go`), registered with the global registry.
struct RegistryFamilies {
    registered: Arc<CounterVec>,
    disabled: Arc<CounterVec>,
    hidden: Arc<CounterVec>,
    unexpected: Arc<CounterVec>,
}

fn registry_families() -> &'static RegistryFamilies {
    static FAMILIES: OnceLock<RegistryFamilies> = OnceLock::new();
    FAMILIES.get_or_init(|| {
        let counter = |name, help, labels: &'static [&'static str]| Arc::new(CounterVec::counter(name, help, labels));
        let families = RegistryFamilies {
            registered: counter(
                "registered_metrics_total",
                "[BETA] The count of registered metrics broken by stability level and deprecation version.",
                &["stability_level", "deprecated_version"],
            ),
            disabled: counter("disabled_metrics_total", "[BETA] The count of disabled metrics.", &[]),
            hidden: counter("hidden_metrics_total", "[BETA] The count of hidden metrics.", &[]),
            unexpected: counter(
                "cardinality_enforcement_unexpected_categorizations_total",
                "[ALPHA] The count of unexpected categorizations during cardinality enforcement.",
                &[],
            ),
        };
        for family in [&families.disabled, &families.hidden, &families.unexpected] {
            family.ensure(&[]);
        }
        families
    })
}

/// The set of metrics served on `/metrics`.
#[derive(Default)]
pub struct Registry {
    collectors: Mutex<Vec<Arc<dyn Collector>>>,
}

impl Registry {
    /// Adds a collector to what `/metrics` shows, counting its component-base families in
    /// `registered_metrics_total`, or in `hidden_metrics_total` when deprecated long enough or
    /// disabled, as component-base's registry does.
    pub fn register(&self, collector: Arc<dyn Collector>) {
        let counts = registry_families();
        for desc in collector.describe() {
            let Some(level) = desc.stability() else { continue };
            // `lazyMetric.Create`: a disabled or hidden metric is not created but tracked as hidden.
            if desc.hidden() || settings().disabled.contains(desc.name) {
                counts.hidden.inc(&[]);
            } else {
                counts.registered.inc(&[level, desc.deprecated.unwrap_or("")]);
            }
        }
        self.collectors.lock().push(collector);
    }

    /// The whole registry in Prometheus text format, families sorted by name as Go's
    /// `prometheus.Registry.Gather` sorts them, without disabled and hidden families.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut left_out: BTreeSet<&'static str> = BTreeSet::new();
        for collector in self.collectors.lock().iter() {
            collector.write_to(&mut out);
            left_out.extend(collector.describe().into_iter().filter(Desc::hidden).map(|d| d.name));
        }
        let settings = settings();
        sort_families(&out, |name| left_out.contains(name) || settings.disabled.contains(name))
    }
}

/// The process-wide registry, with component-base's own families in it.
pub fn global() -> &'static Registry {
    static GLOBAL: OnceLock<Registry> = OnceLock::new();
    GLOBAL.get_or_init(|| {
        let registry = Registry::default();
        let own = registry_families();
        for family in [&own.registered, &own.disabled, &own.hidden, &own.unexpected] {
            registry.register(family.clone());
        }
        registry
    })
}

/// A metric registered in the [`global`] registry the first time it is asked for: `make` builds
/// it once into `cell`, a function's `static`, as upstream registers a package's metric once.
pub fn registered<T: Collector + 'static>(
    cell: &'static OnceLock<Arc<T>>,
    make: impl FnOnce() -> T,
) -> &'static Arc<T> {
    cell.get_or_init(|| {
        let metric = Arc::new(make());
        global().register(metric.clone());
        metric
    })
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
    deprecated: Option<&'static str>,
    values: Mutex<BTreeMap<Vec<String>, f64>>,
}

/// A monotonically increasing family (`_total`).
pub type CounterVec = ValueFamily;
/// A family of values that go up and down.
pub type GaugeVec = ValueFamily;

impl ValueFamily {
    /// A counter family; `labels` are the label names, whose values every call passes in order.
    pub fn counter(name: &'static str, help: &'static str, labels: &'static [&'static str]) -> Self {
        Self::new(name, help, Kind::Counter, labels)
    }

    /// A gauge family; `labels` are the label names, whose values every call passes in order.
    pub fn gauge(name: &'static str, help: &'static str, labels: &'static [&'static str]) -> Self {
        Self::new(name, help, Kind::Gauge, labels)
    }

    fn new(name: &'static str, help: &'static str, kind: Kind, label_names: &'static [&'static str]) -> Self {
        ValueFamily { name, help, kind, label_names, deprecated: None, values: Mutex::new(BTreeMap::new()) }
    }

    /// The family of a label-less counter or gauge (Go's `NewCounter`/`NewGauge`), whose one
    /// series exists, at 0, from the start.
    pub fn at_zero(self) -> Self {
        self.ensure(&[]);
        self
    }

    /// Marks the family deprecated since `version` (`1.32.0`): its help says so, and it is hidden
    /// from the next minor version on unless `--show-hidden-metrics-for-version` is given.
    pub fn deprecated(mut self, version: &'static str) -> Self {
        self.deprecated = Some(version);
        self
    }

    /// Adds 1 to the series of these label values.
    pub fn inc(&self, labels: &[&str]) {
        self.add(labels, 1.0);
    }

    /// Adds `delta` to the series of these label values (never negative for a counter).
    pub fn add(&self, labels: &[&str], delta: f64) {
        debug_assert!(self.kind == Kind::Gauge || delta >= 0.0, "counter {} decreased", self.name);
        *self.values.lock().entry(self.key(labels)).or_insert(0.0) += delta;
    }

    /// Sets the series of these label values (gauges only).
    pub fn set(&self, labels: &[&str], value: f64) {
        debug_assert!(self.kind == Kind::Gauge, "set on counter {}", self.name);
        self.values.lock().insert(self.key(labels), value);
    }

    /// Creates the series at 0 unless it exists (Go's `WithLabelValues`), so that it is exported
    /// before its first change.
    pub fn ensure(&self, labels: &[&str]) {
        self.values.lock().entry(self.key(labels)).or_insert(0.0);
    }

    /// Removes every series (Go's `Reset`), for a gauge family rebuilt from scratch.
    pub fn reset(&self) {
        self.values.lock().clear();
    }

    /// The current value of the series of these label values; 0 if it does not exist.
    pub fn get(&self, labels: &[&str]) -> f64 {
        self.values.lock().get(&self.key(labels)).copied().unwrap_or(0.0)
    }

    fn key(&self, labels: &[&str]) -> Vec<String> {
        debug_assert_eq!(labels.len(), self.label_names.len(), "labels of {}", self.name);
        constrain(self.name, self.label_names, labels)
    }
}

impl Collector for ValueFamily {
    fn write_to(&self, out: &mut String) {
        let kind = match self.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        let values = self.values.lock();
        if values.is_empty() {
            return;
        }
        write_header(out, self.name, self.help, self.deprecated, kind);
        for (values, v) in in_go_order(self.label_names, values.iter()) {
            let _ = writeln!(out, "{}{} {}", self.name, label_set(self.label_names, values, None), go_float(*v));
        }
    }

    fn describe(&self) -> Vec<Desc> {
        vec![Desc { name: self.name, help: self.help, deprecated: self.deprecated }]
    }
}

/// A family of histograms with fixed bucket upper bounds.
pub struct HistogramVec {
    name: &'static str,
    help: &'static str,
    label_names: &'static [&'static str],
    bounds: Vec<f64>,
    deprecated: Option<&'static str>,
    series: Mutex<BTreeMap<Vec<String>, Histogram>>,
}

#[derive(Clone)]
struct Histogram {
    /// Observations per bucket (not cumulative); the last entry is `+Inf`.
    counts: Vec<u64>,
    sum: f64,
}

impl HistogramVec {
    /// A histogram family whose buckets end at the ascending upper `bounds` (`+Inf` is added).
    pub fn new(name: &'static str, help: &'static str, labels: &'static [&'static str], bounds: &[f64]) -> Self {
        HistogramVec {
            name,
            help,
            label_names: labels,
            bounds: bounds.to_vec(),
            deprecated: None,
            series: Mutex::new(BTreeMap::new()),
        }
    }

    /// The family of a label-less histogram (Go's `NewHistogram`), whose one series exists,
    /// empty, from the start.
    pub fn at_zero(self) -> Self {
        self.ensure(&[]);
        self
    }

    /// Marks the family deprecated since `version`, as [`ValueFamily::deprecated`].
    pub fn deprecated(mut self, version: &'static str) -> Self {
        self.deprecated = Some(version);
        self
    }

    fn key(&self, labels: &[&str]) -> Vec<String> {
        debug_assert_eq!(labels.len(), self.label_names.len(), "labels of {}", self.name);
        constrain(self.name, self.label_names, labels)
    }

    /// Records one observation in the series of these label values.
    pub fn observe(&self, labels: &[&str], value: f64) {
        let bucket = self.bounds.iter().position(|b| value <= *b).unwrap_or(self.bounds.len());
        let mut series = self.series.lock();
        let h = series.entry(self.key(labels)).or_insert_with(|| self.empty());
        h.counts[bucket] += 1;
        h.sum += value;
    }

    /// Creates the series with no observations unless it exists (Go's `WithLabelValues`).
    pub fn ensure(&self, labels: &[&str]) {
        self.series.lock().entry(self.key(labels)).or_insert_with(|| self.empty());
    }

    fn empty(&self) -> Histogram {
        Histogram { counts: vec![0; self.bounds.len() + 1], sum: 0.0 }
    }

    /// How many observations a series has.
    pub fn count(&self, labels: &[&str]) -> u64 {
        self.series.lock().get(&self.key(labels)).map_or(0, |h| h.counts.iter().sum())
    }
}

impl Collector for HistogramVec {
    fn write_to(&self, out: &mut String) {
        let series = self.series.lock();
        if series.is_empty() {
            return;
        }
        write_header(out, self.name, self.help, self.deprecated, "histogram");
        for (values, h) in in_go_order(self.label_names, series.iter()) {
            // Go's text format writes counts as floats too (`float64(count)` through `writeFloat`).
            let mut cumulative = 0u64;
            for (i, count) in h.counts.iter().enumerate() {
                cumulative += count;
                let le = go_float(self.bounds.get(i).copied().unwrap_or(f64::INFINITY));
                let labels = label_set(self.label_names, values, Some(&le));
                let _ = writeln!(out, "{}_bucket{labels} {}", self.name, go_float(cumulative as f64));
            }
            let labels = label_set(self.label_names, values, None);
            let _ = writeln!(out, "{}_sum{labels} {}", self.name, go_float(h.sum));
            let _ = writeln!(out, "{}_count{labels} {}", self.name, go_float(cumulative as f64));
        }
    }

    fn describe(&self) -> Vec<Desc> {
        vec![Desc { name: self.name, help: self.help, deprecated: self.deprecated }]
    }
}

/// `count` buckets starting at `start`, each `factor` times the previous (Prometheus'
/// ExponentialBuckets).
pub fn exponential_buckets(start: f64, factor: f64, count: usize) -> Vec<f64> {
    std::iter::successors(Some(start), |b| Some(b * factor)).take(count).collect()
}

/// Reorders a rendered exposition so that its families (each a `# HELP` block) come sorted by
/// name, as Go's registry gathers them.
fn sort_families(text: &str, left_out: impl Fn(&str) -> bool) -> String {
    let mut families: Vec<&str> = Vec::new();
    let mut start = 0;
    for (at, _) in text.match_indices("# HELP ") {
        if at > start && text.as_bytes()[at - 1] == b'\n' {
            families.push(&text[start..at]);
            start = at;
        }
    }
    families.push(&text[start..]);
    families.retain(|f| !f.is_empty() && !left_out(family_name(f)));
    // Stable: two collectors exporting one name keep their order.
    families.sort_by_key(|f| family_name(f));
    families.concat()
}

fn family_name(block: &str) -> &str {
    block.strip_prefix("# HELP ").and_then(|rest| rest.split(' ').next()).unwrap_or(block)
}

/// The family's `# HELP` and `# TYPE` lines; help is escaped as Go's `escaper` does. A deprecated
/// family's help says so after the stability prefix, as component-base annotates it.
fn write_header(out: &mut String, name: &str, help: &str, deprecated: Option<&str>, kind: &str) {
    let help = match deprecated {
        Some(version) => match help.split_once("] ") {
            Some((level, rest)) if help.starts_with('[') => format!("{level}] (Deprecated since {version}) {rest}"),
            _ => format!("(Deprecated since {version}) {help}"),
        },
        None => help.to_string(),
    };
    let help = help.replace('\\', "\\\\").replace('\n', "\\n");
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// The indices of `names` sorted by name: Go's client writes a series' labels sorted by name.
fn sorted_label_indices(names: &[&str]) -> Vec<usize> {
    let mut indices: Vec<usize> = (0..names.len()).collect();
    indices.sort_by_key(|&i| names[i]);
    indices
}

/// A family's series in Go's order: by label values, taken in label-name order.
fn in_go_order<'a, V>(names: &[&str], series: impl Iterator<Item = (&'a Vec<String>, V)>) -> Vec<(&'a Vec<String>, V)> {
    let order = sorted_label_indices(names);
    let mut series: Vec<_> = series.collect();
    series.sort_by(|(a, _), (b, _)| order.iter().map(|&i| &a[i]).cmp(order.iter().map(|&i| &b[i])));
    series
}

fn label_set(names: &[&str], values: &[String], le: Option<&str>) -> String {
    let mut pairs: Vec<String> = sorted_label_indices(names)
        .into_iter()
        .map(|i| format!("{}=\"{}\"", names[i], escape_label(&values[i])))
        .collect();
    if let Some(le) = le {
        pairs.push(format!("le=\"{le}\""));
    }
    if pairs.is_empty() { String::new() } else { format!("{{{}}}", pairs.join(",")) }
}

fn escape_label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// A sample value or bucket bound exactly as Go's Prometheus client writes it (prometheus/common
/// expfmt `writeFloat`: `strconv.AppendFloat(f, 'g', -1, 64)` with `+Inf`, `-Inf` and `NaN`):
/// the shortest digits that read back as `v`, in exponent form when the decimal exponent is
/// below -4 or at least 6 (`1e+06`, `9.999999999999999e-06`), otherwise plain (`123456`, `0.0001`).
pub fn go_float(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if v == 0.0 {
        return "0".into();
    }
    // Rust's `{:e}` gives the same shortest round-trip digits as Go's strconv.
    let scientific = format!("{:e}", v.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if v < 0.0 { "-" } else { "" };
    if !(-4..6).contains(&exponent) {
        let (first, rest) = digits.split_at(1);
        let fraction = if rest.is_empty() { String::new() } else { format!(".{rest}") };
        let exponent_sign = if exponent < 0 { '-' } else { '+' };
        return format!("{sign}{first}{fraction}e{exponent_sign}{:02}", exponent.abs());
    }
    if exponent < 0 {
        let zeros = "0".repeat((-exponent - 1) as usize);
        return format!("{sign}0.{zeros}{digits}");
    }
    let integer_digits = exponent as usize + 1;
    if digits.len() <= integer_digits {
        format!("{sign}{digits}{}", "0".repeat(integer_digits - digits.len()))
    } else {
        format!("{sign}{}.{}", &digits[..integer_digits], &digits[integer_digits..])
    }
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
    fn a_registered_cell_is_built_and_registered_once() {
        static CELL: OnceLock<Arc<CounterVec>> = OnceLock::new();
        let make = || CounterVec::counter("registered_once_test_total", "[ALPHA] Test.", &[]).at_zero();
        let first = registered(&CELL, make);
        first.inc(&[]);
        let again = registered(&CELL, || unreachable!("built once"));
        assert!(Arc::ptr_eq(first, again));
        let rendered = global().render();
        assert_eq!(rendered.matches("# HELP registered_once_test_total ").count(), 1);
        assert!(rendered.contains("registered_once_test_total 1\n"));
    }

    #[test]
    fn escapes_label_values() {
        let c = CounterVec::counter("x_total", "X.", &["path"]);
        c.inc(&["a\"b\\c"]);
        let mut out = String::new();
        c.write_to(&mut out);
        assert!(out.contains("x_total{path=\"a\\\"b\\\\c\"} 1"));
    }

    /// Expected strings printed by Go 1.x `strconv.FormatFloat(v, 'g', -1, 64)`.
    #[test]
    fn floats_render_as_go_formats_them() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "0"),
            (1.0, "1"),
            (-1.0, "-1"),
            (0.5, "0.5"),
            (5.55, "5.55"),
            (-2.5, "-2.5"),
            (100.0, "100"),
            (123456.0, "123456"),
            (1e6, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (1e20, "1e+20"),
            (1e21, "1e+21"),
            (u64::MAX as f64, "1.8446744073709552e+19"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1e-7, "1e-07"),
            (3e-300, "3e-300"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (f64::NAN, "NaN"),
        ];
        for (v, expected) in cases {
            assert_eq!(go_float(*v), *expected, "{v:?}");
        }
    }

    #[test]
    fn exponential_bucket_bounds_render_as_go_does() {
        let bounds: Vec<String> = exponential_buckets(10e-9, 10.0, 10).into_iter().map(go_float).collect();
        assert_eq!(
            bounds,
            [
                "1e-08",
                "1e-07",
                "1e-06",
                "9.999999999999999e-06",
                "9.999999999999999e-05",
                "0.001",
                "0.01",
                "0.1",
                "1",
                "10"
            ]
        );
    }

    #[test]
    fn ensured_series_render_at_zero_and_empty_families_not_at_all() {
        let c = CounterVec::counter("a_total", "A.", &["name"]);
        let h = HistogramVec::new("h_seconds", "H.", &["name"], &[1e6]);
        let empty = GaugeVec::gauge("e", "E.", &["name"]);
        c.ensure(&["q"]);
        h.ensure(&["q"]);
        let mut out = String::new();
        c.write_to(&mut out);
        h.write_to(&mut out);
        empty.write_to(&mut out);
        assert_eq!(
            out,
            "# HELP a_total A.\n# TYPE a_total counter\na_total{name=\"q\"} 0\n\
             # HELP h_seconds H.\n# TYPE h_seconds histogram\n\
             h_seconds_bucket{name=\"q\",le=\"1e+06\"} 0\nh_seconds_bucket{name=\"q\",le=\"+Inf\"} 0\n\
             h_seconds_sum{name=\"q\"} 0\nh_seconds_count{name=\"q\"} 0\n"
        );
    }

    #[test]
    fn large_counts_render_as_go_floats() {
        let h = HistogramVec::new("h", "H.", &[], &[1.0]);
        for _ in 0..1_000_000 {
            h.observe(&[], 0.0);
        }
        let mut out = String::new();
        h.write_to(&mut out);
        assert!(out.contains("h_bucket{le=\"1\"} 1e+06\n"), "{out}");
        assert!(out.contains("h_count 1e+06\n"), "{out}");
    }

    #[test]
    fn registry_sorts_families_by_name() {
        let registry = Registry::default();
        let b = Arc::new(GaugeVec::gauge("b", "B.", &[]));
        let a = Arc::new(CounterVec::counter("a_total", "A.", &[]));
        b.set(&[], 2.0);
        a.inc(&[]);
        registry.register(b);
        registry.register(a);
        assert_eq!(
            registry.render(),
            "# HELP a_total A.\n# TYPE a_total counter\na_total 1\n# HELP b B.\n# TYPE b gauge\nb 2\n"
        );
    }

    #[test]
    fn labels_and_series_come_in_go_order() {
        let c = CounterVec::counter("r_total", "R.", &["code", "method", "host"]);
        c.inc(&["200", "GET", "b"]);
        c.inc(&["200", "PUT", "a"]);
        let h = HistogramVec::new("d", "D.", &["verb", "host"], &[]);
        h.observe(&["GET", "x"], 1.0);
        let mut out = String::new();
        c.write_to(&mut out);
        h.write_to(&mut out);
        let samples: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            samples,
            [
                "r_total{code=\"200\",host=\"a\",method=\"PUT\"} 1",
                "r_total{code=\"200\",host=\"b\",method=\"GET\"} 1",
                "d_bucket{host=\"x\",verb=\"GET\",le=\"+Inf\"} 1",
                "d_sum{host=\"x\",verb=\"GET\"} 1",
                "d_count{host=\"x\",verb=\"GET\"} 1",
            ]
        );
    }

    #[test]
    fn help_is_escaped_as_go_does() {
        let g = GaugeVec::gauge("g", "a\\b\nc", &[]);
        g.set(&[], 1.0);
        let mut out = String::new();
        g.write_to(&mut out);
        assert!(out.starts_with("# HELP g a\\\\b\\nc\n"), "{out}");
    }

    /// The metric flags are process-wide: one test sets them, on families of its own.
    #[test]
    fn metric_flags_disable_hide_and_constrain_as_component_base() {
        let registry = Registry::default();
        let shown = Arc::new(CounterVec::counter("t_flags_shown_total", "[ALPHA] Shown.", &["code"]));
        let off = Arc::new(CounterVec::counter("t_flags_off_total", "[ALPHA] Off.", &[]));
        let old = Arc::new(GaugeVec::gauge("t_flags_old", "[ALPHA] Old.", &[]).deprecated("1.31.0"));
        let recent = Arc::new(GaugeVec::gauge("t_flags_recent", "[BETA] Recent.", &[]).deprecated("1.36.0"));
        let before = registry_families().hidden.get(&[]);
        for family in [&off, &old, &recent] {
            family.add(&[], 1.0);
        }
        registry.register(shown.clone());
        registry.register(off);
        registry.register(old);
        registry.register(recent);
        assert_eq!(registry_families().hidden.get(&[]), before + 1.0, "only the 1.31 family is hidden at 1.36");
        let disabled_before = registry_families().disabled.get(&[]);
        let mut allowed = BTreeMap::new();
        allowed.insert("code".to_string(), BTreeSet::from(["200".to_string()]));
        configure(Settings {
            show_hidden: false,
            disabled: BTreeSet::from(["t_flags_off_total".to_string()]),
            allowed_labels: BTreeMap::from([("t_flags_shown_total".to_string(), allowed)]),
        });
        assert_eq!(registry_families().disabled.get(&[]), disabled_before + 1.0);
        shown.inc(&["200"]);
        shown.inc(&["500"]);
        shown.inc(&["503"]);
        let text = registry.render();
        assert!(text.contains("t_flags_shown_total{code=\"200\"} 1\n"), "{text}");
        assert!(text.contains("t_flags_shown_total{code=\"unexpected\"} 2\n"), "{text}");
        assert!(!text.contains("t_flags_off_total"), "{text}");
        assert!(!text.contains("t_flags_old"), "{text}");
        assert!(text.contains("# HELP t_flags_recent [BETA] (Deprecated since 1.36.0) Recent.\n"), "{text}");
        configure(Settings { show_hidden: true, ..Settings::default() });
        let text = registry.render();
        let old =
            "# HELP t_flags_old [ALPHA] (Deprecated since 1.31.0) Old.\n# TYPE t_flags_old gauge\nt_flags_old 1\n";
        assert!(text.contains(old), "{text}");
        assert!(text.contains("t_flags_off_total 1\n"), "{text}");
        configure(Settings::default());
    }

    #[test]
    fn registration_counts_families_by_stability() {
        let registry = Registry::default();
        let before = registry_families().registered.get(&["STABLE", ""]);
        registry.register(Arc::new(GaugeVec::gauge("t_stable", "[STABLE] S.", &[])));
        registry.register(Arc::new(GaugeVec::gauge("t_raw", "Raw.", &[])));
        assert_eq!(registry_families().registered.get(&["STABLE", ""]), before + 1.0);
    }

    #[test]
    fn exponential_buckets_grow_by_factor() {
        assert_eq!(exponential_buckets(0.001, 10.0, 3), vec![0.001, 0.01, 0.1]);
    }
}
