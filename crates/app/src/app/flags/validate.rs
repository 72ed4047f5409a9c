//! Checks across flags, as upstream's `Validate()` and the checks its controllers and leader
//! elector make when they start: done here so a bad combination stops the process at once
//! with a message naming the flags, instead of failing later in a controller.

use std::time::Duration;

use super::FlagError;
use super::feature_gates::FeatureGates;
use super::options::{
    CloudOptions, CsrSigningOptions, LeaderElection, LogsOptions, MetricsOptions, NodeIpamOptions, Options,
    SecureServingOptions, SignerFiles,
};
use super::values::{Cidr, KUBE_VERSION, KubeVersion};
use crate::apimachinery::duration::format_go_duration;
use crate::app::controllers::CONTROLLERS;
use crate::server::CurveError;

/// Flags that parse but do not fit together, or a value outside what upstream allows: one
/// line naming the flags, in upstream's words where it has them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// A lock kind other than a Lease.
    #[error("--leader-elect-resource-lock must be \"leases\", the only lock kind upstream supports, got {lock:?}")]
    ResourceLock {
        /// The lock kind given.
        lock: String,
    },
    /// A leader election period of zero.
    #[error("{flag} must be greater than zero")]
    ZeroPeriod {
        /// The flag.
        flag: &'static str,
    },
    /// The lease does not outlast the renew deadline.
    #[error(
        "--leader-elect-lease-duration ({}) must be greater than --leader-elect-renew-deadline ({})",
        format_go_duration(*.lease_duration),
        format_go_duration(*.renew_deadline)
    )]
    LeaseNotLongerThanRenewDeadline {
        /// `--leader-elect-lease-duration`.
        lease_duration: Duration,
        /// `--leader-elect-renew-deadline`.
        renew_deadline: Duration,
    },
    /// The renew deadline does not outlast a jittered retry period.
    #[error(
        "--leader-elect-renew-deadline ({}) must be greater than {jitter} times --leader-elect-retry-period ({})",
        format_go_duration(*.renew_deadline),
        format_go_duration(*.retry_period),
        jitter = LEADER_ELECTION_JITTER
    )]
    RenewDeadlineTooShort {
        /// `--leader-elect-renew-deadline`.
        renew_deadline: Duration,
        /// `--leader-elect-retry-period`.
        retry_period: Duration,
    },
    /// An empty Lease name or namespace.
    #[error("{flag} must not be empty")]
    Empty {
        /// The flag.
        flag: &'static str,
    },
    /// A built-in cloud provider, which upstream no longer has.
    #[error(
        "--cloud-provider={provider:?}: built-in cloud providers were removed upstream; use \
         --cloud-provider=external and an external cloud controller manager"
    )]
    CloudProvider {
        /// The provider given.
        provider: String,
    },
    /// A serving certificate without its key, or the reverse.
    #[error("--tls-cert-file and --tls-private-key-file must be set together")]
    ServingPair,
    /// `--http2-max-streams-per-connection` below zero.
    #[error("--http2-max-streams-per-connection can not be negative")]
    NegativeHttp2Streams,
    /// `--tls-curve-preferences` refused.
    #[error("{0}")]
    Curves(#[from] CurveError),
    /// A worker count below 1.
    #[error("{flag} must be greater than 0, but got {value}")]
    NoWorkers {
        /// The flag.
        flag: &'static str,
        /// Its value.
        value: i32,
    },
    /// A count outside `1..=max`.
    #[error("{flag} must be between 1 and {max}, but got {value}")]
    CountOutOfRange {
        /// The flag.
        flag: &'static str,
        /// Its value.
        value: i32,
        /// The largest allowed.
        max: i32,
    },
    /// `--concurrent-resourceclaim-syncs` below 1 (`ResourceClaimControllerOptions.Validate`).
    #[error("concurrent-resourceclaim-syncs must be larger than 0, got {0}")]
    ResourceClaimSyncs(i32),
    /// `--concurrent-device-taint-eviction-syncs` below 1 (`DeviceTaintEvictionControllerOptions.Validate`).
    #[error("concurrent-device-taint-eviction-syncs must be greater than zero, got {0}")]
    DeviceTaintEvictionSyncs(i32),
    /// One of `--cluster-signing-cert-file` and `--cluster-signing-key-file` without the other.
    #[error("cannot specify --cluster-signing-cert-file without --cluster-signing-key-file, and vice versa")]
    ClusterSigningPair,
    /// The one CA for every signer together with a signer's own.
    #[error(
        "cannot specify --cluster-signing-{{cert,key}}-file and other --cluster-signing-*-file flags at the same \
         time"
    )]
    ClusterAndSignerFiles,
    /// One signer's certificate without its key, or the reverse.
    #[error("--cluster-signing-{signer}-cert-file and --cluster-signing-{signer}-key-file must be set together")]
    SignerPair {
        /// The signer (`kubelet-serving`).
        signer: &'static str,
    },
    /// A hidden metrics version other than the previous minor.
    #[error(
        "--show-hidden-metrics-for-version must be omitted or have the value '{previous}'. Only the previous \
         minor version is allowed"
    )]
    HiddenMetricsVersion {
        /// The one version allowed.
        previous: KubeVersion,
    },
    /// A key of `--allow-metric-labels` that is not `metricName,labelName` (component-base's
    /// message, which does not name it).
    #[error(
        "--allow-metric-labels must have a list of kv pair with format `metricName,labelName=labelValue, \
         labelValue,...`"
    )]
    MetricLabels,
    /// `--logging-format=json` with its gate off.
    #[error("--logging-format=json needs the LoggingBetaOptions feature gate")]
    JsonNeedsBetaGate,
    /// An alpha logging flag with its gate off.
    #[error("{flag} needs the LoggingAlphaOptions feature gate")]
    NeedsAlphaGate {
        /// The flag.
        flag: &'static str,
    },
    /// The attach-detach reconciler period below a second.
    #[error(
        "--attach-detach-reconcile-sync-period ({}) must be at least 1s",
        format_go_duration(*.0)
    )]
    ReconcileSyncPeriod(Duration),
    /// The cloud allocator, which needs a cloud provider.
    #[error("--cidr-allocator-type is set to 'CloudAllocator' but cloud provider is not configured")]
    CloudAllocator,
    /// An allocator type upstream does not have.
    #[error("--cidr-allocator-type={0:?} is not a CIDR allocator type (use RangeAllocator)")]
    AllocatorType(String),
    /// `--allocate-node-cidrs` without `--cluster-cidr`.
    #[error("--cluster-cidr is required when --allocate-node-cidrs is true")]
    NoClusterCidr,
    /// A node mask longer than the address.
    #[error("{flag} ({mask}) must be between 0 and {limit}")]
    MaskOutOfRange {
        /// The flag (or default) the mask comes from.
        flag: &'static str,
        /// The mask size.
        mask: i32,
        /// The address length.
        limit: i32,
    },
    /// A node mask shorter than the cluster CIDR's.
    #[error("{flag} ({mask}) must not be smaller than the prefix length of --cluster-cidr {cidr}")]
    MaskShorterThanCluster {
        /// The flag (or default) the mask comes from.
        flag: &'static str,
        /// The mask size.
        mask: i32,
        /// The cluster CIDR.
        cidr: Cidr,
    },
    /// More IPv6 node CIDRs than the range allocator's bitmap holds.
    #[error(
        "{flag} ({mask}) is too large for --cluster-cidr {cidr}: node CIDRs may have at most {max} more bits than \
         the cluster CIDR",
        max = MAX_IPV6_SUBNET_BITS
    )]
    MaskTooLarge {
        /// The flag (or default) the mask comes from.
        flag: &'static str,
        /// The mask size.
        mask: i32,
        /// The cluster CIDR.
        cidr: Cidr,
    },
    /// `--node-cidr-mask-size` with two cluster CIDRs.
    #[error("usage of --node-cidr-mask-size is not allowed with dual-stack clusters")]
    GenericMaskDualStack,
    /// `--node-cidr-mask-size` with a per-family mask.
    #[error(
        "usage of --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6 is not allowed if \
         --node-cidr-mask-size is set. For dual-stack clusters please unset it and use IPFamily specific flags"
    )]
    GenericAndFamilyMasks,
    /// An IPv4 mask for an IPv6 cluster.
    #[error("usage of --node-cidr-mask-size-ipv4 is not allowed for a single-stack IPv6 cluster")]
    Ipv4MaskForIpv6,
    /// An IPv6 mask for an IPv4 cluster.
    #[error("usage of --node-cidr-mask-size-ipv6 is not allowed for a single-stack IPv4 cluster")]
    Ipv6MaskForIpv4,
}

/// Checks the options the way upstream v1.36 does; the first problem found is returned.
pub(crate) fn validate(options: &Options) -> Result<(), FlagError> {
    let controllers = &options.generic.controllers;
    options.generic.compatibility.validate()?;
    leader_election(&options.generic.leader_election)?;
    cloud_provider(&options.cloud)?;
    secure_serving(&options.secure_serving)?;
    worker_counts(options)?;
    csr_signing(&options.csr_signing)?;
    metrics(&options.metrics)?;
    logs(&options.logs, &options.generic.feature_gates)?;
    // The checks of a selected controller's own flags (its row's `check_flags`).
    for controller in CONTROLLERS.iter().filter(|c| controllers.is_enabled(c.name)) {
        if let Some(check) = controller.check_flags {
            check(options)?;
        }
    }
    Ok(())
}

/// client-go's `JitterFactor`: the renew deadline must outlast a jittered retry period.
const LEADER_ELECTION_JITTER: f64 = 1.2;

/// The leader elector's own checks (client-go `NewLeaderElector`), made only when leader
/// election runs, plus upstream's rule that the lock is a Lease.
fn leader_election(le: &LeaderElection) -> Result<(), ValidationError> {
    if !le.leader_elect {
        return Ok(());
    }
    if le.resource_lock != "leases" {
        return Err(ValidationError::ResourceLock { lock: le.resource_lock.clone() });
    }
    for (flag, value) in [
        ("--leader-elect-lease-duration", le.lease_duration),
        ("--leader-elect-renew-deadline", le.renew_deadline),
        ("--leader-elect-retry-period", le.retry_period),
    ] {
        if value.is_zero() {
            return Err(ValidationError::ZeroPeriod { flag });
        }
    }
    if le.lease_duration <= le.renew_deadline {
        return Err(ValidationError::LeaseNotLongerThanRenewDeadline {
            lease_duration: le.lease_duration,
            renew_deadline: le.renew_deadline,
        });
    }
    let jittered_retry = le.retry_period.mul_f64(LEADER_ELECTION_JITTER);
    if le.renew_deadline <= jittered_retry {
        return Err(ValidationError::RenewDeadlineTooShort {
            renew_deadline: le.renew_deadline,
            retry_period: le.retry_period,
        });
    }
    for (flag, value) in [
        ("--leader-elect-resource-name", &le.resource_name),
        ("--leader-elect-resource-namespace", &le.resource_namespace),
    ] {
        if value.is_empty() {
            return Err(ValidationError::Empty { flag });
        }
    }
    Ok(())
}

/// Upstream has no built-in cloud providers left: any other name fails when it starts.
fn cloud_provider(cloud: &CloudOptions) -> Result<(), ValidationError> {
    if cloud.provider.is_empty() || cloud.provider == "external" {
        return Ok(());
    }
    Err(ValidationError::CloudProvider { provider: cloud.provider.clone() })
}

fn secure_serving(serving: &SecureServingOptions) -> Result<(), ValidationError> {
    if serving.tls_cert_file.is_empty() != serving.tls_private_key_file.is_empty() {
        return Err(ValidationError::ServingPair);
    }
    if serving.http2_max_streams_per_connection < 0 {
        return Err(ValidationError::NegativeHttp2Streams);
    }
    // Upstream checks the curves when it builds the serving config, which it does only when
    // it serves.
    if serving.port != 0 {
        crate::server::curve_preferences(&serving.tls_curve_preferences)?;
    }
    Ok(())
}

/// The worker counts upstream bounds.
fn worker_counts(options: &Options) -> Result<(), ValidationError> {
    let c = &options.concurrency;
    for (flag, value) in [
        ("--concurrent-cron-job-syncs", c.cron_job_syncs),
        ("--concurrent-ephemeralvolume-syncs", c.ephemeral_volume_syncs),
        ("--concurrent-horizontal-pod-autoscaler-syncs", c.horizontal_pod_autoscaler_syncs),
        ("--concurrent-job-syncs", c.job_syncs),
        ("--concurrent-validating-admission-policy-status-syncs", c.validating_admission_policy_status_syncs),
    ] {
        if value < 1 {
            return Err(ValidationError::NoWorkers { flag, value });
        }
    }
    let e = &options.endpoints;
    for (flag, value, max) in [
        ("--concurrent-service-endpoint-syncs", c.service_endpoint_syncs, 50),
        ("--max-endpoints-per-slice", e.max_endpoints_per_slice, 1000),
        ("--mirroring-concurrent-service-endpoint-syncs", c.mirroring_service_endpoint_syncs, 50),
        ("--mirroring-max-endpoints-per-subset", e.mirroring_max_endpoints_per_subset, 1000),
    ] {
        if !(1..=max).contains(&value) {
            return Err(ValidationError::CountOutOfRange { flag, value, max });
        }
    }
    // The DRA controllers' options, worded as upstream's (`ResourceClaimControllerOptions`,
    // `DeviceTaintEvictionControllerOptions` `Validate`).
    if c.resource_claim_syncs <= 0 {
        return Err(ValidationError::ResourceClaimSyncs(c.resource_claim_syncs));
    }
    if c.device_taint_eviction_syncs <= 0 {
        return Err(ValidationError::DeviceTaintEvictionSyncs(c.device_taint_eviction_syncs));
    }
    Ok(())
}

/// Either one CA for every signer or per-signer CAs, and always certificate and key together.
fn csr_signing(csr: &CsrSigningOptions) -> Result<(), ValidationError> {
    let set = |files: &SignerFiles| !files.cert_file.is_empty() || !files.key_file.is_empty();
    let per_signer = [
        ("kubelet-serving", &csr.kubelet_serving),
        ("kubelet-client", &csr.kubelet_client),
        ("kube-apiserver-client", &csr.kube_apiserver_client),
        ("legacy-unknown", &csr.legacy_unknown),
    ];
    if set(&csr.cluster) {
        if csr.cluster.cert_file.is_empty() || csr.cluster.key_file.is_empty() {
            return Err(ValidationError::ClusterSigningPair);
        }
        if per_signer.iter().any(|(_, files)| set(files)) {
            return Err(ValidationError::ClusterAndSignerFiles);
        }
    }
    for (signer, files) in per_signer {
        if set(files) && (files.cert_file.is_empty() || files.key_file.is_empty()) {
            return Err(ValidationError::SignerPair { signer });
        }
    }
    Ok(())
}

fn metrics(metrics: &MetricsOptions) -> Result<(), ValidationError> {
    let version = &metrics.show_hidden_metrics_for_version;
    let previous = KUBE_VERSION.previous();
    if !version.is_empty() && *version != previous.to_string() {
        return Err(ValidationError::HiddenMetricsVersion { previous });
    }
    if !metrics.allow_metric_labels.keys().all(|key| is_metric_label_key(key)) {
        // component-base's message, which does not name the key.
        return Err(ValidationError::MetricLabels);
    }
    Ok(())
}

/// `metricName,labelName` with Prometheus' name syntax (metric names may contain `:`).
fn is_metric_label_key(key: &str) -> bool {
    let name = |text: &str, colon: bool| {
        let mut chars = text.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || (colon && c == ':'))
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || (colon && c == ':'))
    };
    key.split_once(',').is_some_and(|(metric, label)| name(metric, true) && name(label, false))
}

/// The logging options behind feature gates, as upstream's logging configuration validation.
fn logs(logs: &LogsOptions, gates: &FeatureGates) -> Result<(), ValidationError> {
    if logs.format == "json" && !gates.is_enabled("LoggingBetaOptions") {
        return Err(ValidationError::JsonNeedsBetaGate);
    }
    let alpha = gates.is_enabled("LoggingAlphaOptions");
    for (flag, used) in [
        ("--log-text-split-stream", logs.text.split_stream),
        ("--log-text-info-buffer-size", logs.text.info_buffer_size > 0),
        ("--log-json-split-stream", logs.json.split_stream),
        ("--log-json-info-buffer-size", logs.json.info_buffer_size > 0),
    ] {
        if used && !alpha {
            return Err(ValidationError::NeedsAlphaGate { flag });
        }
    }
    Ok(())
}

/// The attach-detach controller's flags.
pub(crate) fn attach_detach(options: &Options) -> Result<(), ValidationError> {
    let options = &options.attach_detach;
    if options.reconcile_sync_period < Duration::from_secs(1) {
        return Err(ValidationError::ReconcileSyncPeriod(options.reconcile_sync_period));
    }
    Ok(())
}

/// Node CIDR mask sizes used when none is given.
const DEFAULT_NODE_MASK_IPV4: i32 = 24;
const DEFAULT_NODE_MASK_IPV6: i32 = 64;
/// The range allocator's limit on how many more bits a node IPv6 CIDR may have than the
/// cluster's (its bitmap size).
const MAX_IPV6_SUBNET_BITS: i32 = 16;

/// The node IPAM controller's flags, with `--allocate-node-cidrs` (upstream checks them only
/// when the controller starts).
pub(crate) fn node_ipam(options: &Options) -> Result<(), ValidationError> {
    match options.node_ipam.allocate_node_cidrs {
        true => check_node_ipam(&options.node_ipam),
        false => Ok(()),
    }
}

/// The node IPAM controller's start-up checks (upstream `startNodeIpamController`,
/// `setNodeCIDRMaskSizes` and the range allocator).
fn check_node_ipam(ipam: &NodeIpamOptions) -> Result<(), ValidationError> {
    match ipam.cidr_allocator_type.as_str() {
        "RangeAllocator" => {}
        "CloudAllocator" => return Err(ValidationError::CloudAllocator),
        other => return Err(ValidationError::AllocatorType(other.to_string())),
    }
    if ipam.cluster_cidrs.is_empty() {
        return Err(ValidationError::NoClusterCidr);
    }
    for cidr in &ipam.cluster_cidrs {
        let (flag, mask) = node_mask(ipam, cidr)?;
        let limit = if cidr.is_ipv6() { 128 } else { 32 };
        let cluster_prefix = i32::from(cidr.prefix_len);
        if !(0..=limit).contains(&mask) {
            return Err(ValidationError::MaskOutOfRange { flag, mask, limit });
        }
        if mask < cluster_prefix {
            return Err(ValidationError::MaskShorterThanCluster { flag, mask, cidr: *cidr });
        }
        if cidr.is_ipv6() && mask - cluster_prefix > MAX_IPV6_SUBNET_BITS {
            return Err(ValidationError::MaskTooLarge { flag, mask, cidr: *cidr });
        }
    }
    Ok(())
}

/// The node CIDR mask size for each `--cluster-cidr`, in order (upstream `setNodeCIDRMaskSizes`),
/// for the node IPAM controller; the same checks as at start-up.
pub fn node_cidr_mask_sizes(ipam: &NodeIpamOptions) -> Result<Vec<u8>, ValidationError> {
    check_node_ipam(ipam)?;
    let masks = ipam.cluster_cidrs.iter().map(|cidr| node_mask(ipam, cidr).map(|(_, mask)| mask));
    // `node_ipam` bounded every mask to the address length, so each fits a u8.
    masks.map(|mask| mask.map(|m| u8::try_from(m).unwrap_or(u8::MAX))).collect()
}

/// The node mask size for one cluster CIDR and the flag it comes from, with upstream's rules
/// on which of `--node-cidr-mask-size{,-ipv4,-ipv6}` may be combined.
fn node_mask(ipam: &NodeIpamOptions, cidr: &Cidr) -> Result<(&'static str, i32), ValidationError> {
    let generic = ipam.node_cidr_mask_size;
    let (v4, v6) = (ipam.node_cidr_mask_size_ipv4, ipam.node_cidr_mask_size_ipv6);
    let dual_stack = ipam.cluster_cidrs.len() > 1;
    if generic != 0 {
        if dual_stack {
            return Err(ValidationError::GenericMaskDualStack);
        }
        if v4 != 0 || v6 != 0 {
            return Err(ValidationError::GenericAndFamilyMasks);
        }
        return Ok(("--node-cidr-mask-size", generic));
    }
    if !dual_stack {
        if v4 != 0 && cidr.is_ipv6() {
            return Err(ValidationError::Ipv4MaskForIpv6);
        }
        if v6 != 0 && !cidr.is_ipv6() {
            return Err(ValidationError::Ipv6MaskForIpv4);
        }
    }
    Ok(match (cidr.is_ipv6(), v4, v6) {
        (false, 0, _) => ("the default IPv4 node CIDR mask size", DEFAULT_NODE_MASK_IPV4),
        (false, mask, _) => ("--node-cidr-mask-size-ipv4", mask),
        (true, _, 0) => ("the default IPv6 node CIDR mask size", DEFAULT_NODE_MASK_IPV6),
        (true, _, mask) => ("--node-cidr-mask-size-ipv6", mask),
    })
}
