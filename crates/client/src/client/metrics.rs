//! client-go's REST client metrics (component-base's `prometheus/restclient`), with upstream's
//! names, help, labels and buckets, all registered when the first client is made.

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;

use crate::metrics::{self, CounterVec, GaugeVec, HistogramVec};

/// Request counts, latencies and sizes of every API client in the process.
pub struct ClientMetrics {
    /// `rest_client_requests_total{code,method,host}`.
    pub requests: Arc<CounterVec>,
    /// `rest_client_request_duration_seconds{verb,host}`.
    pub duration: Arc<HistogramVec>,
    /// `rest_client_rate_limiter_duration_seconds{verb,host}`.
    pub rate_limiter: Arc<HistogramVec>,
    /// `rest_client_request_size_bytes{verb,host}`.
    pub request_size: Arc<HistogramVec>,
    /// `rest_client_response_size_bytes{verb,host}`.
    pub response_size: Arc<HistogramVec>,
    /// `rest_client_request_retries_total{code,verb,host}`.
    pub retries: Arc<CounterVec>,
    /// `rest_client_transport_cache_entries`.
    transport_entries: Arc<GaugeVec>,
    /// `rest_client_transport_create_calls_total{result}`.
    transport_calls: Arc<CounterVec>,
    /// The TLS configurations seen, as client-go's transport cache keys them.
    transports: Mutex<HashSet<String>>,
}

/// client-go's latency buckets (request and rate limiter).
const DURATION_BUCKETS: &[f64] = &[0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0];
/// 64 bytes to 16 MiB.
const SIZE_BUCKETS: &[f64] =
    &[64.0, 256.0, 512.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0];

impl ClientMetrics {
    /// The process-wide instance, registered in [`metrics::global`] on first use.
    pub fn global() -> &'static ClientMetrics {
        static GLOBAL: OnceLock<ClientMetrics> = OnceLock::new();
        GLOBAL.get_or_init(|| {
            let histogram = |name, help, buckets| Arc::new(HistogramVec::new(name, help, &["verb", "host"], buckets));
            let m = ClientMetrics {
                requests: Arc::new(CounterVec::counter(
                    "rest_client_requests_total",
                    "[ALPHA] Number of HTTP requests, partitioned by status code, method, and host.",
                    &["code", "method", "host"],
                )),
                duration: histogram(
                    "rest_client_request_duration_seconds",
                    "[ALPHA] Request latency in seconds. Broken down by verb, and host.",
                    DURATION_BUCKETS,
                ),
                rate_limiter: histogram(
                    "rest_client_rate_limiter_duration_seconds",
                    "[ALPHA] Client side rate limiter latency in seconds. Broken down by verb, and host.",
                    DURATION_BUCKETS,
                ),
                request_size: histogram(
                    "rest_client_request_size_bytes",
                    "[ALPHA] Request size in bytes. Broken down by verb and host.",
                    SIZE_BUCKETS,
                ),
                response_size: histogram(
                    "rest_client_response_size_bytes",
                    "[ALPHA] Response size in bytes. Broken down by verb and host.",
                    SIZE_BUCKETS,
                ),
                retries: Arc::new(CounterVec::counter(
                    "rest_client_request_retries_total",
                    "[ALPHA] Number of request retries, partitioned by status code, verb, and host.",
                    &["code", "verb", "host"],
                )),
                transport_entries: Arc::new(
                    GaugeVec::gauge(
                        "rest_client_transport_cache_entries",
                        "[ALPHA] Number of transport entries in the internal cache.",
                        &[],
                    )
                    .at_zero(),
                ),
                transport_calls: Arc::new(CounterVec::counter(
                    "rest_client_transport_create_calls_total",
                    "[ALPHA] Number of calls to get a new transport, partitioned by the result of the operation \
                     hit: obtained from the cache, miss: created and added to the cache, miss-gc: recreated and \
                     added back to the cache after being garbage collected, uncacheable: created and not cached",
                    &["result"],
                )),
                transports: Mutex::new(HashSet::new()),
            };
            let registry = metrics::global();
            for family in [&m.requests, &m.retries, &m.transport_entries, &m.transport_calls] {
                registry.register(family.clone());
            }
            for family in [&m.duration, &m.rate_limiter, &m.request_size, &m.response_size] {
                registry.register(family.clone());
            }
            register_exec_plugin_families();
            register_transport_gc_families();
            m
        })
    }

    pub(crate) fn observe(&self, method: &str, code: &str, host: &str, elapsed: Duration) {
        self.requests.inc(&[code, method, host]);
        self.duration.observe(&[method, host], elapsed.as_secs_f64());
    }

    /// A client was set up with the TLS configuration `key`: a `hit` when one with the same
    /// key was set up before, else a `miss` that adds an entry, as client-go's `tlsCache.get`.
    pub(crate) fn transport_created(&self, key: String) {
        let mut transports = self.transports.lock();
        let result = if transports.insert(key) { "miss" } else { "hit" };
        self.transport_calls.inc(&[result]);
        self.transport_entries.set(&[], transports.len() as f64);
    }
}

/// The transport families client-go v1.36 added with its TLS cache's garbage collection
/// (`ClientsAllowTLSCacheGC`) and CA reloading (`ClientsAllowCARotation`), from component-base's
/// `restclient` metrics. Our clients keep their transports for the life of the process and
/// rotate no client certificates on a goroutine, so nothing is ever garbage collected or
/// reloaded: the label-less `rest_client_transport_cert_rotation_gc_calls_total` stays at 0, as
/// upstream shows it until a Go GC cleanup runs, and the labelled ones have no series.
fn register_transport_gc_families() {
    let rotation_gc = CounterVec::counter(
        "rest_client_transport_cert_rotation_gc_calls_total",
        "[ALPHA] Number of times a cert rotation goroutine cancel func is called via GC cleanup of the associated \
         transport",
        &[],
    )
    .at_zero();
    let cache_gc = CounterVec::counter(
        "rest_client_transport_cache_gc_calls_total",
        "[ALPHA] Number of times a GC cleanup attempts to delete a transport cache entry, partitioned by the result: \
         deleted, skipped",
        &["result"],
    );
    let ca_reloads = CounterVec::counter(
        "rest_client_transport_ca_reload_total",
        "[ALPHA] Number of times a CA reload is attempted, partitioned by the result and reason for the reload attempt",
        &["result", "reason"],
    );
    let registry = metrics::global();
    for family in [rotation_gc, cache_gc, ca_reloads] {
        registry.register(Arc::new(family));
    }
}

/// The exec credential plugin families: we run no exec plugins, so the TTL stays `+Inf` and the
/// rotation histogram empty, as upstream shows them without plugins; `rest_client_exec_plugin_call_total`
/// and v1.36's `rest_client_exec_plugin_policy_call_total` have no series.
fn register_exec_plugin_families() {
    let ttl = GaugeVec::gauge(
        "rest_client_exec_plugin_ttl_seconds",
        "[ALPHA] Gauge of the shortest TTL (time-to-live) of the client certificate(s) managed by the auth exec \
         plugin. The value is in seconds until certificate expiry (negative if already expired). If auth exec \
         plugins are unused or manage no TLS certificates, the value will be +INF.",
        &[],
    );
    ttl.set(&[], f64::INFINITY);
    let rotation = HistogramVec::new(
        "rest_client_exec_plugin_certificate_rotation_age",
        "[ALPHA] Histogram of the number of seconds the last auth exec plugin client certificate lived before \
         being rotated. If auth exec plugin client certificates are unused, histogram will contain no data.",
        &[],
        &[600.0, 1800.0, 3600.0, 14400.0, 86400.0, 604800.0, 2592000.0, 7776000.0, 15552000.0, 31104000.0, 124416000.0],
    )
    .at_zero();
    let calls = CounterVec::counter(
        "rest_client_exec_plugin_call_total",
        "[ALPHA] Number of calls to an exec plugin, partitioned by the type of event encountered (no_error, \
         plugin_execution_error, plugin_not_found_error, client_internal_error) and an optional exit code. The exit \
         code will be set to 0 if and only if the plugin call was successful.",
        &["code", "call_status"],
    );
    // The label names as upstream v1.36 declares them.
    let policy_calls = CounterVec::counter(
        "rest_client_exec_plugin_policy_call_total",
        "[ALPHA] Number of comparisons of an exec plugin to the plugin policy and allowlist (if any), partitioned by \
         whether or not the policy permits the plugin",
        &["allowed", "denied"],
    );
    let registry = metrics::global();
    registry.register(Arc::new(ttl));
    registry.register(Arc::new(rotation));
    registry.register(Arc::new(calls));
    registry.register(Arc::new(policy_calls));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// v1.36's transport families: the label-less GC counter at 0, the labelled ones without
    /// series, and the create calls' help naming `miss-gc`.
    #[test]
    fn transport_families_render_as_upstreams_without_gc() {
        ClientMetrics::global().transport_created("t-transport-families".into());
        let text = metrics::global().render();
        let rotation = "# HELP rest_client_transport_cert_rotation_gc_calls_total [ALPHA] Number of times a cert \
                        rotation goroutine cancel func is called via GC cleanup of the associated transport\n\
                        # TYPE rest_client_transport_cert_rotation_gc_calls_total counter\n\
                        rest_client_transport_cert_rotation_gc_calls_total 0\n";
        assert!(text.contains(rotation), "{text}");
        assert!(text.contains(", miss-gc: recreated and added back to the cache after being garbage collected, "));
        assert!(!text.contains("rest_client_transport_cache_gc_calls_total"));
        assert!(!text.contains("rest_client_transport_ca_reload_total"));
        assert!(!text.contains("rest_client_exec_plugin_policy_call_total"));
    }
}
