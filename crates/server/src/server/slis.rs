//! `/metrics/slis`: component-base's SLI registry (`metrics/prometheus/slis`), which records
//! each health check's result when a root health path (`/healthz`, …) runs it, plus
//! `process_start_time_seconds`. `DELETE /metrics/slis` resets the health check series, as
//! upstream's `SLIMetricsWithReset` does.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use crate::metrics::go_float;

/// The content type of `/metrics/slis` (client_golang's, with its name escaping scheme).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores";
/// The answer to `DELETE /metrics/slis`.
pub const RESET_ANSWER: &str = "metrics reset\n";

/// The health check series, keyed by label values in the order Go sorts label names.
#[derive(Default)]
pub struct Slis {
    /// `kubernetes_healthcheck{name,type}`: 1 when the last run passed, else 0.
    healthcheck: Mutex<BTreeMap<(String, String), f64>>,
    /// `kubernetes_healthchecks_total{name,status,type}`.
    totals: Mutex<BTreeMap<(String, String, String), f64>>,
    /// Upstream's reset also drops `process_start_time_seconds`, for good.
    start_time_reset: AtomicBool,
}

/// The process's SLI registry.
pub fn global() -> &'static Slis {
    static GLOBAL: OnceLock<Slis> = OnceLock::new();
    GLOBAL.get_or_init(Slis::default)
}

impl Slis {
    /// Records one run of check `name` for the root path `kind` (`healthz`).
    pub fn observe(&self, name: &str, kind: &str, passed: bool) {
        let status = if passed { "success" } else { "error" };
        self.healthcheck.lock().insert((name.into(), kind.into()), if passed { 1.0 } else { 0.0 });
        *self.totals.lock().entry((name.into(), status.into(), kind.into())).or_insert(0.0) += 1.0;
    }

    /// Forgets every series (the registry's `Reset`), the process start time too: as
    /// upstream's, it is set once at registration and so never comes back.
    pub fn reset(&self) {
        self.healthcheck.lock().clear();
        self.totals.lock().clear();
        self.start_time_reset.store(true, Ordering::Relaxed);
    }

    /// The registry in Prometheus text format, families sorted by name.
    pub fn render(&self) -> String {
        self.render_with_start(super::process_metrics::start_time_seconds())
    }

    fn render_with_start(&self, start: Option<f64>) -> String {
        let mut out = String::new();
        let healthcheck = self.healthcheck.lock();
        if !healthcheck.is_empty() {
            header(
                &mut out,
                "kubernetes_healthcheck",
                "[STABLE] This metric records the result of a single healthcheck.",
                "gauge",
            );
            for ((name, kind), value) in healthcheck.iter() {
                let labels = format!("name=\"{}\",type=\"{}\"", escape(name), escape(kind));
                let _ = writeln!(out, "kubernetes_healthcheck{{{labels}}} {}", go_float(*value));
            }
        }
        let totals = self.totals.lock();
        if !totals.is_empty() {
            let help = "[STABLE] This metric records the results of all healthcheck.";
            header(&mut out, "kubernetes_healthchecks_total", help, "counter");
            for ((name, status, kind), value) in totals.iter() {
                let labels = format!("name=\"{}\",status=\"{status}\",type=\"{}\"", escape(name), escape(kind));
                let _ = writeln!(out, "kubernetes_healthchecks_total{{{labels}}} {}", go_float(*value));
            }
        }
        if let Some(start) = start.filter(|_| !self.start_time_reset.load(Ordering::Relaxed)) {
            let help = "[ALPHA] Start time of the process since unix epoch in seconds.";
            header(&mut out, "process_start_time_seconds", help, "gauge");
            let _ = writeln!(out, "process_start_time_seconds {}", go_float(start));
        }
        out
    }
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n");
}

/// A label value as the text format escapes it.
fn escape(value: &str) -> String {
    value.replace('\\', r"\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_rendered_as_upstreams_families() {
        let slis = Slis::default();
        slis.observe("leaderElection", "healthz", true);
        slis.observe("deployment", "healthz", false);
        slis.observe("leaderElection", "healthz", true);
        assert_eq!(
            slis.render_with_start(Some(1_764_200_000.5)),
            "# HELP kubernetes_healthcheck [STABLE] This metric records the result of a single healthcheck.\n\
             # TYPE kubernetes_healthcheck gauge\n\
             kubernetes_healthcheck{name=\"deployment\",type=\"healthz\"} 0\n\
             kubernetes_healthcheck{name=\"leaderElection\",type=\"healthz\"} 1\n\
             # HELP kubernetes_healthchecks_total [STABLE] This metric records the results of all healthcheck.\n\
             # TYPE kubernetes_healthchecks_total counter\n\
             kubernetes_healthchecks_total{name=\"deployment\",status=\"error\",type=\"healthz\"} 1\n\
             kubernetes_healthchecks_total{name=\"leaderElection\",status=\"success\",type=\"healthz\"} 2\n\
             # HELP process_start_time_seconds [ALPHA] Start time of the process since unix epoch in seconds.\n\
             # TYPE process_start_time_seconds gauge\n\
             process_start_time_seconds 1.7642000005e+09\n"
        );
    }

    #[test]
    fn a_check_that_recovers_is_one_again_and_counted_apart() {
        let slis = Slis::default();
        slis.observe("x", "healthz", false);
        slis.observe("x", "healthz", true);
        let text = slis.render_with_start(None);
        assert!(text.contains("kubernetes_healthcheck{name=\"x\",type=\"healthz\"} 1\n"), "{text}");
        assert!(text.contains("{name=\"x\",status=\"error\",type=\"healthz\"} 1\n"), "{text}");
        assert!(text.contains("{name=\"x\",status=\"success\",type=\"healthz\"} 1\n"), "{text}");
    }

    #[test]
    fn reset_empties_the_registry_until_checks_run_again() {
        let slis = Slis::default();
        slis.observe("x", "healthz", true);
        slis.reset();
        assert_eq!(slis.render_with_start(Some(2.0)), "");
        slis.observe("x", "healthz", true);
        assert!(!slis.render_with_start(Some(2.0)).contains("process_start_time_seconds"));
    }
}
