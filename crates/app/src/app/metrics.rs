//! The process-wide metric families upstream's kube-controller-manager registers at start,
//! beside the ones each part registers itself: build and version information, feature gates, and the
//! families of the API-server libraries its binary links in; and the metric flags applied to
//! the registry.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::flags::{KUBERNETES_RELEASE, MetricsOptions, Options, go_platform};
use crate::metrics::{self, CounterVec, GaugeVec, HistogramVec, Settings};

/// Applies the metric flags, then registers the process-wide families (once per process).
pub fn register(options: &Options) {
    metrics::configure(settings(&options.metrics));
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        register_build_info();
        register_feature_gates(options);
        register_version_info(options);
        register_linked_libraries();
        register_peer_discovery_families(options);
    });
}

/// component-base's `Options.Apply`: `--allow-metric-labels` wins over the manifest.
fn settings(options: &MetricsOptions) -> Settings {
    let mapping = if !options.allow_metric_labels.is_empty() {
        options.allow_metric_labels.clone()
    } else if !options.allow_metric_labels_manifest.is_empty() {
        read_manifest(&options.allow_metric_labels_manifest)
    } else {
        BTreeMap::new()
    };
    Settings {
        show_hidden: !options.show_hidden_metrics_for_version.is_empty(),
        disabled: options.disabled_metrics.iter().cloned().collect(),
        allowed_labels: allow_lists(&mapping),
    }
}

/// `metric,label` → `v1,v2` as `SetLabelAllowListFromCLI` splits it.
fn allow_lists(mapping: &BTreeMap<String, String>) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut lists: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (key, values) in mapping {
        let Some((metric, label)) = key.split_once(',') else { continue };
        let label = label.split(',').next().unwrap_or(label);
        let values = values.split(',').map(str::to_string).collect();
        lists.entry(metric.to_string()).or_default().insert(label.to_string(), values);
    }
    lists
}

/// The YAML map of `--allow-metric-labels-manifest`; as upstream, an unreadable or malformed
/// file is logged and ignored.
fn read_manifest(path: &str) -> BTreeMap<String, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            log::error!("Failed to read allow list manifest: {e}");
            return BTreeMap::new();
        }
    };
    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| {
        log::error!("Failed to parse allow list manifest: {e}");
        BTreeMap::new()
    })
}

/// `kubernetes_build_info`: the Kubernetes release we match, built by rustc (what a Go build
/// stamps, commit, tree state, date and Go version, is empty).
fn register_build_info() {
    let info = GaugeVec::gauge(
        "kubernetes_build_info",
        "[BETA] A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree \
         state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it \
         is running.",
        &[
            "major",
            "minor",
            "git_version",
            "git_commit",
            "git_tree_state",
            "build_date",
            "go_version",
            "compiler",
            "platform",
        ],
    );
    let (major, minor) = (KUBERNETES_RELEASE.major.to_string(), KUBERNETES_RELEASE.minor.to_string());
    let git_version = KUBERNETES_RELEASE.git_version();
    info.set(&[&major, &minor, &git_version, "", "", "", "", "rustc", &go_platform()], 1.0);
    metrics::global().register(Arc::new(info));
}

/// `version_info{component,binary,emulation,min_compat}` (the compatibility registry's
/// `AddMetrics`, new in 1.36).
fn register_version_info(options: &Options) {
    let info = GaugeVec::gauge(
        "version_info",
        "[ALPHA] Provides the compatibility version info of the component. The component label is the name of the \
         component, usually kube, but is relevant for aggregated-apiservers.",
        &["component", "binary", "emulation", "min_compat"],
    );
    let compatibility = &options.generic.compatibility;
    let (emulation, min_compat) = (compatibility.emulation.to_string(), compatibility.min_compatibility.to_string());
    info.set(&["kube", &KUBERNETES_RELEASE.to_string(), &emulation, &min_compat], 1.0);
    metrics::global().register(Arc::new(info));
}

/// `kubernetes_feature_enabled{name,stage}`: every known gate, as the feature gate's
/// `AddMetrics` records them at start.
fn register_feature_gates(options: &Options) {
    let gauge = GaugeVec::gauge(
        "kubernetes_feature_enabled",
        "[BETA] This metric records the data about the stage and enablement of a k8s feature.",
        &["name", "stage"],
    );
    for (name, stage, enabled) in options.generic.feature_gates.all() {
        gauge.set(&[name, stage], if enabled { 1.0 } else { 0.0 });
    }
    metrics::global().register(Arc::new(gauge));
}

/// Families that the API-server libraries linked into upstream's binary (audit, CEL, envelope
/// encryption, declarative and duplicate validation, webhook and aggregator clients) register at init; a
/// controller manager never observes them, so upstream shows each at zero, as we do.
fn register_linked_libraries() {
    let registry = metrics::global();
    const COUNTERS: &[(&str, &str)] = &[
        ("aggregator_discovery_aggregation_count_total", "[ALPHA] Counter of number of times discovery was aggregated"),
        ("apiserver_audit_event_total", "[ALPHA] Counter of audit events generated and sent to the audit backend."),
        (
            "apiserver_audit_requests_rejected_total",
            "[ALPHA] Counter of apiserver requests rejected due to an error in audit logging backend.",
        ),
        (
            "apiserver_kube_aggregator_x509_insecure_sha1_total",
            "[ALPHA] Counts the number of requests to servers with insecure SHA1 signatures in their serving \
             certificate OR the number of connection failures due to the insecure SHA1 signatures (either/or, based \
             on the runtime environment)",
        ),
        (
            "apiserver_kube_aggregator_x509_missing_san_total",
            "[ALPHA] Counts the number of requests to servers missing SAN extension in their serving certificate OR \
             the number of connection failures due to the lack of x509 certificate SAN extension missing \
             (either/or, based on the runtime environment)",
        ),
        (
            "apiserver_storage_data_key_generation_failures_total",
            "[ALPHA] Total number of failed data encryption key(DEK) generation operations.",
        ),
        (
            "apiserver_storage_envelope_transformation_cache_misses_total",
            "[ALPHA] Total number of cache misses while accessing key decryption key(KEK).",
        ),
        (
            "apiserver_validation_declarative_validation_mismatch_total",
            "[BETA] Number of times declarative validation results differed from handwritten validation results \
             for core types.",
        ),
        (
            "apiserver_validation_declarative_validation_panic_total",
            "[BETA] Number of times declarative validation has panicked during validation.",
        ),
        (
            "apiserver_validation_duplicate_validation_error_total",
            "[INTERNAL] Number of duplicate validation errors during validation.",
        ),
        (
            "apiserver_webhooks_x509_insecure_sha1_total",
            "[ALPHA] Counts the number of requests to servers with insecure SHA1 signatures in their serving \
             certificate OR the number of connection failures due to the insecure SHA1 signatures (either/or, based \
             on the runtime environment)",
        ),
        (
            "apiserver_webhooks_x509_missing_san_total",
            "[ALPHA] Counts the number of requests to servers missing SAN extension in their serving certificate OR \
             the number of connection failures due to the lack of x509 certificate SAN extension missing \
             (either/or, based on the runtime environment)",
        ),
    ];
    for (name, help) in COUNTERS {
        let counter = CounterVec::counter(name, help, &[]);
        counter.ensure(&[]);
        registry.register(Arc::new(counter));
    }
    let fill = GaugeVec::gauge(
        "apiserver_envelope_encryption_dek_cache_fill_percent",
        "[ALPHA] Percent of the cache slots currently occupied by cached DEKs.",
        &[],
    );
    fill.ensure(&[]);
    registry.register(Arc::new(fill));
    let cel_buckets = metrics::DEFAULT_BUCKETS;
    let histograms = [
        (
            "apiextensions_apiserver_validation_ratcheting_seconds",
            "[ALPHA] Time for comparison of old to new for the purposes of CRDValidationRatcheting during an UPDATE \
             in seconds.",
            metrics::exponential_buckets(0.00001, 4.0, 10),
        ),
        ("apiserver_cel_compilation_duration_seconds", "[BETA] CEL compilation time in seconds.", cel_buckets.to_vec()),
        ("apiserver_cel_evaluation_duration_seconds", "[BETA] CEL evaluation time in seconds.", cel_buckets.to_vec()),
        (
            "apiserver_storage_data_key_generation_duration_seconds",
            "[ALPHA] Latencies in seconds of data encryption key(DEK) generation operations.",
            metrics::exponential_buckets(5e-6, 2.0, 14),
        ),
    ];
    for (name, help, buckets) in histograms {
        let histogram = HistogramVec::new(name, help, &[], &buckets);
        histogram.ensure(&[]);
        registry.register(Arc::new(histogram));
    }
    register_encryption_config_families();
}

/// The peer-aggregated discovery counters of the API server's aggregated discovery
/// (`apiserver/pkg/endpoints/discovery/aggregated/metrics.go`), which its `init` registers only
/// with the `UnknownVersionInteroperabilityProxy` gate on (Beta, on by default since v1.36). A
/// controller manager serves no discovery, so they stay at zero, as upstream shows them.
fn register_peer_discovery_families(options: &Options) {
    for family in peer_discovery_families(options) {
        metrics::global().register(Arc::new(family));
    }
}

/// The families of [`register_peer_discovery_families`], at zero; none with the gate off.
fn peer_discovery_families(options: &Options) -> Vec<CounterVec> {
    if !options.generic.feature_gates.is_enabled("UnknownVersionInteroperabilityProxy") {
        return Vec::new();
    }
    const COUNTERS: &[(&str, &str)] = &[
        (
            "aggregator_discovery_peer_aggregated_cache_hits_total",
            "[ALPHA] Counter of number of times discovery was served from peer-aggregated cache",
        ),
        (
            "aggregator_discovery_peer_aggregated_cache_misses_total",
            "[ALPHA] Counter of number of times discovery was aggregated across all API servers",
        ),
        (
            "aggregator_discovery_nopeer_requests_total",
            "[ALPHA] Counter of number of times no-peer (non peer-aggregated) discovery was requested",
        ),
    ];
    COUNTERS.iter().map(|(name, help)| CounterVec::counter(name, help, &[]).at_zero()).collect()
}

/// The encryption-config reload families (labelled, never observed here, so never shown),
/// two of them deprecated since 1.30.0: hidden and counted in `hidden_metrics_total` as
/// upstream's are, unless `--show-hidden-metrics-for-version`.
fn register_encryption_config_families() {
    let registry = metrics::global();
    let by_identity: &[&str] = &["apiserver_id_hash"];
    let families = [
        CounterVec::counter(
            "apiserver_encryption_config_controller_automatic_reloads_total",
            "[ALPHA] Total number of reload successes and failures of encryption configuration split by apiserver \
             identity.",
            &["status", "apiserver_id_hash"],
        ),
        CounterVec::counter(
            "apiserver_encryption_config_controller_automatic_reload_failures_total",
            "[ALPHA] Total number of failed automatic reloads of encryption configuration split by apiserver \
             identity.",
            by_identity,
        )
        .deprecated("1.30.0"),
        CounterVec::counter(
            "apiserver_encryption_config_controller_automatic_reload_success_total",
            "[ALPHA] Total number of successful automatic reloads of encryption configuration split by apiserver \
             identity.",
            by_identity,
        )
        .deprecated("1.30.0"),
        GaugeVec::gauge(
            "apiserver_encryption_config_controller_automatic_reload_last_timestamp_seconds",
            "[ALPHA] Timestamp of the last successful or failed automatic reload of encryption configuration split \
             by apiserver identity.",
            &["status", "apiserver_id_hash"],
        ),
    ];
    for family in families {
        registry.register(Arc::new(family));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(args: &[&str]) -> Options {
        match crate::app::flags::parse(args.iter().map(Into::into)) {
            Ok(crate::app::flags::Command::Run(options)) => *options,
            other => panic!("{args:?}: {:?}", other.err()),
        }
    }

    /// Registered at zero with `UnknownVersionInteroperabilityProxy` on (its v1.36 default).
    #[test]
    fn peer_discovery_counters_follow_their_gate() {
        let mut out = String::new();
        for family in peer_discovery_families(&options(&[])) {
            metrics::Collector::write_to(&family, &mut out);
        }
        assert!(out.contains("\naggregator_discovery_nopeer_requests_total 0\n"), "{out}");
        assert!(out.contains("\naggregator_discovery_peer_aggregated_cache_hits_total 0\n"), "{out}");
        assert!(out.contains("\naggregator_discovery_peer_aggregated_cache_misses_total 0\n"), "{out}");
        let off = options(&["--feature-gates=UnknownVersionInteroperabilityProxy=false"]);
        assert!(peer_discovery_families(&off).is_empty());
    }

    #[test]
    fn allow_lists_split_as_component_base() {
        let mapping = BTreeMap::from([("rest_client_requests_total,code".to_string(), "200,404".to_string())]);
        let lists = allow_lists(&mapping);
        let codes = &lists["rest_client_requests_total"]["code"];
        assert_eq!(codes.iter().map(String::as_str).collect::<Vec<_>>(), ["200", "404"]);
    }

    #[test]
    fn the_flag_wins_over_the_manifest_and_a_bad_manifest_is_ignored() {
        let dir = std::env::temp_dir().join(format!("kcm-allow-manifest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let manifest = dir.join("allow.yaml");
        std::fs::write(&manifest, "\"workqueue_adds_total,name\": \"a,b\"\n").unwrap();
        let mut options = MetricsOptions {
            allow_metric_labels_manifest: manifest.display().to_string(),
            ..MetricsOptions::default()
        };
        assert_eq!(settings(&options).allowed_labels["workqueue_adds_total"]["name"].len(), 2);
        options.allow_metric_labels = BTreeMap::from([("x_total,code".to_string(), "1".to_string())]);
        assert!(settings(&options).allowed_labels.contains_key("x_total"));
        assert!(!settings(&options).allowed_labels.contains_key("workqueue_adds_total"));
        std::fs::write(&manifest, "[not a map").unwrap();
        options.allow_metric_labels.clear();
        assert!(settings(&options).allowed_labels.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn hidden_and_disabled_come_from_their_flags() {
        let options = MetricsOptions {
            show_hidden_metrics_for_version: "1.32".into(),
            disabled_metrics: vec!["a_total".into()],
            ..MetricsOptions::default()
        };
        let s = settings(&options);
        assert!(s.show_hidden);
        assert!(s.disabled.contains("a_total"));
    }
}
