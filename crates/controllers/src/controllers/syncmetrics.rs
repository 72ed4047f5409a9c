//! The sync metrics of the two CA publishers (upstream's `rootcacertpublisher/metrics.go` and
//! `clustertrustbundlepublisher/metrics.go`, one the copy of the other): a counter and a
//! duration histogram of the syncs, by the `code` of their outcome.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use crate::client;
use crate::metrics::{CounterVec, HistogramVec, exponential_buckets, global};

/// A publisher's `*_sync_total` and `*_sync_duration_seconds`, a `static` registered in the
/// global registry when first used.
pub struct SyncMetrics {
    /// The counter's name and help.
    total: (&'static str, &'static str),
    /// The histogram's name and help.
    duration: (&'static str, &'static str),
    families: OnceLock<(Arc<CounterVec>, Arc<HistogramVec>)>,
}

impl SyncMetrics {
    /// The two families, each as (name, help).
    pub const fn new(total: (&'static str, &'static str), duration: (&'static str, &'static str)) -> SyncMetrics {
        SyncMetrics { total, duration, families: OnceLock::new() }
    }

    /// Registers the families (once), as upstream's `registerMetrics`.
    pub fn register(&self) {
        self.families();
    }

    /// `recordMetrics`: the sync started at `started` ended with `result`, whose code is `200`,
    /// the API error's code, or `500` for an error without one.
    pub fn record(&self, result: &Result<(), client::Error>, started: Instant) {
        let code = match result {
            Ok(()) => "200".to_string(),
            Err(e) => e.code().filter(|c| *c != 0).unwrap_or(500).to_string(),
        };
        let (syncs, duration) = self.families();
        duration.observe(&[&code], started.elapsed().as_secs_f64());
        syncs.inc(&[&code]);
    }

    fn families(&self) -> &(Arc<CounterVec>, Arc<HistogramVec>) {
        self.families.get_or_init(|| {
            let syncs = Arc::new(CounterVec::counter(self.total.0, self.total.1, &["code"]));
            let buckets = exponential_buckets(0.001, 2.0, 15);
            let duration = Arc::new(HistogramVec::new(self.duration.0, self.duration.1, &["code"], &buckets));
            global().register(syncs.clone());
            global().register(duration.clone());
            (syncs, duration)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ApiError;

    #[test]
    fn syncs_are_counted_and_timed_by_code() {
        static METRICS: SyncMetrics = SyncMetrics::new(
            ("syncmetrics_test_sync_total", "[ALPHA] Syncs."),
            ("syncmetrics_test_sync_duration_seconds", "[ALPHA] Syncs."),
        );
        METRICS.register();
        let started = Instant::now();
        METRICS.record(&Ok(()), started);
        let conflict = ApiError::from_response(409, b"", None);
        METRICS.record(&Err(client::Error::Api(Box::new(conflict))), started);
        METRICS.record(&Err(client::Error::Transport("refused".into())), started);
        let text = global().render();
        for code in ["200", "409", "500"] {
            assert!(text.contains(&format!("syncmetrics_test_sync_total{{code=\"{code}\"}} 1\n")), "{code}: {text}");
            let count = format!("syncmetrics_test_sync_duration_seconds_count{{code=\"{code}\"}} 1\n");
            assert!(text.contains(&count), "{code}");
        }
        assert_eq!(text.matches("# HELP syncmetrics_test_sync_total [ALPHA] Syncs.\n").count(), 1);
    }
}
