//! client-go's REST client metrics, with upstream's names and labels.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::metrics::{self, CounterVec, HistogramVec};

/// Request counts and latencies of every API client in the process.
pub struct ClientMetrics {
    /// `rest_client_requests_total{code,method,host}`.
    pub requests: Arc<CounterVec>,
    /// `rest_client_request_duration_seconds{verb,host}`.
    pub duration: Arc<HistogramVec>,
}

/// client-go's latency buckets for `rest_client_request_duration_seconds`.
const DURATION_BUCKETS: &[f64] = &[0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0];

impl ClientMetrics {
    /// The process-wide instance, registered in [`metrics::global`] on first use.
    pub fn global() -> &'static ClientMetrics {
        static GLOBAL: OnceLock<ClientMetrics> = OnceLock::new();
        GLOBAL.get_or_init(|| {
            let m = ClientMetrics {
                requests: Arc::new(CounterVec::counter(
                    "rest_client_requests_total",
                    "Number of HTTP requests, partitioned by status code, method, and host.",
                    &["code", "method", "host"],
                )),
                duration: Arc::new(HistogramVec::new(
                    "rest_client_request_duration_seconds",
                    "Request latency in seconds. Broken down by verb, and host.",
                    &["verb", "host"],
                    DURATION_BUCKETS,
                )),
            };
            metrics::global().register(m.requests.clone());
            metrics::global().register(m.duration.clone());
            m
        })
    }

    pub(crate) fn observe(&self, method: &str, code: &str, host: &str, elapsed: Duration) {
        self.requests.inc(&[code, method, host]);
        self.duration.observe(&[method, host], elapsed.as_secs_f64());
    }
}
