//! The parsed command line as typed values, grouped like upstream's component configuration.
//!
//! Defaults live in the flag table ([`super::FLAGS`]); [`Options::default`] applies them, so
//! the `Default` of each group struct below is only its zero value.

use std::collections::BTreeMap;
use std::time::Duration;

use super::compatibility::Compatibility;
use super::feature_gates::FeatureGates;
use super::values::{Cidr, VModuleItem};
use crate::app::controllers::ControllerSelection;
pub use crate::server::options::{AuthenticationOptions, AuthorizationOptions, SecureServingOptions};

/// Every setting of the command line. `Options::default()` is upstream's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Settings shared by all controllers (`--kubeconfig`, `--leader-elect*`, `--controllers`, ...).
    pub generic: GenericOptions,
    /// `--cloud-provider` and the other cloud flags.
    pub cloud: CloudOptions,
    /// The HTTPS endpoint (`--secure-port`, `--bind-address`, `--tls-*`).
    pub secure_serving: SecureServingOptions,
    /// How the HTTPS endpoint authenticates requests (`--authentication-*`, `--client-ca-file`, `--requestheader-*`).
    pub authentication: AuthenticationOptions,
    /// How the HTTPS endpoint authorizes requests (`--authorization-*`).
    pub authorization: AuthorizationOptions,
    /// Every `--concurrent-*-syncs` worker count.
    pub concurrency: ConcurrencyOptions,
    /// The attach/detach controller's flags.
    pub attach_detach: AttachDetachOptions,
    /// The CSR signing controller's `--cluster-signing-*` flags.
    pub csr_signing: CsrSigningOptions,
    /// The endpoints, EndpointSlice and EndpointSlice mirroring controllers' flags.
    pub endpoints: EndpointsOptions,
    /// `--enable-garbage-collector`.
    pub garbage_collector: GarbageCollectorOptions,
    /// The `--horizontal-pod-autoscaler-*` flags.
    pub hpa: HpaOptions,
    /// `--namespace-sync-period`.
    pub namespace: NamespaceOptions,
    /// The node IPAM controller's flags (`--allocate-node-cidrs`, `--cluster-cidr`, ...).
    pub node_ipam: NodeIpamOptions,
    /// The node lifecycle controller's flags (`--node-monitor-grace-period`, `--node-eviction-rate`, ...).
    pub node_lifecycle: NodeLifecycleOptions,
    /// The persistent volume binder's flags (`--pvclaimbinder-sync-period`, `--pv-recycler-*`, ...).
    pub persistent_volume: PersistentVolumeOptions,
    /// `--terminated-pod-gc-threshold`.
    pub pod_gc: PodGcOptions,
    /// `--resource-quota-sync-period`.
    pub resource_quota: ResourceQuotaOptions,
    /// Service account token flags (`--service-account-private-key-file`, `--root-ca-file`, ...).
    pub service_account: ServiceAccountOptions,
    /// The metrics flags (`--disabled-metrics`, `--allow-metric-labels`, ...).
    pub metrics: MetricsOptions,
    /// The logging flags (`-v`, `--vmodule`, `--logging-format`, ...).
    pub logs: LogsOptions,
    /// `--version=vX.Y.Z`: the version to report instead of this binary's.
    pub reported_version: Option<String>,
    /// Flags given on the command line, by canonical name without dashes (`v`, `kubeconfig`),
    /// in the order they first appeared. Setting a flag to its default still counts.
    pub explicitly_set: Vec<&'static str>,
    /// Every value given on the command line, by canonical flag name, in order (repeats too):
    /// what `/flagz` and `/configz` show as upstream's flag values do.
    pub given_values: Vec<(&'static str, String)>,
}

impl Default for Options {
    /// Upstream v1.36's defaults, from the flag table.
    fn default() -> Self {
        super::table::default_state().options
    }
}

impl Options {
    /// All-zero options, before the table defaults are applied.
    pub(crate) fn zeroed() -> Options {
        Options {
            generic: GenericOptions::default(),
            cloud: CloudOptions::default(),
            secure_serving: SecureServingOptions::default(),
            authentication: AuthenticationOptions::default(),
            authorization: AuthorizationOptions::default(),
            concurrency: ConcurrencyOptions::default(),
            attach_detach: AttachDetachOptions::default(),
            csr_signing: CsrSigningOptions::default(),
            endpoints: EndpointsOptions::default(),
            garbage_collector: GarbageCollectorOptions::default(),
            hpa: HpaOptions::default(),
            namespace: NamespaceOptions::default(),
            node_ipam: NodeIpamOptions::default(),
            node_lifecycle: NodeLifecycleOptions::default(),
            persistent_volume: PersistentVolumeOptions::default(),
            pod_gc: PodGcOptions::default(),
            resource_quota: ResourceQuotaOptions::default(),
            service_account: ServiceAccountOptions::default(),
            metrics: MetricsOptions::default(),
            logs: LogsOptions::default(),
            reported_version: None,
            explicitly_set: Vec::new(),
            given_values: Vec::new(),
        }
    }

    /// Whether `name` (without dashes, e.g. `leader-elect`) was given on the command line.
    pub fn is_set(&self, name: &str) -> bool {
        self.explicitly_set.contains(&name)
    }

    /// The last value given for flag `name` on the command line.
    pub fn given_value(&self, name: &str) -> Option<&str> {
        self.given_values.iter().rev().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }
}

/// Settings shared by all controllers (upstream's generic and misc flags).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenericOptions {
    /// `--kubeconfig`, `--master` and the `--kube-api-*` flags.
    pub client_connection: ClientConnection,
    /// The `--leader-elect*` flags.
    pub leader_election: LeaderElection,
    /// `--controllers`.
    pub controllers: ControllerSelection,
    /// `--feature-gates`, set at `compatibility`'s versions.
    pub feature_gates: FeatureGates,
    /// `--emulated-version` and `--min-compatibility-version`, and the versions they set.
    pub compatibility: Compatibility,
    /// `--controller-shutdown-timeout`: how long the controllers may take to stop after a
    /// signal; 0 waits as long as they take.
    pub controller_shutdown_timeout: Duration,
    /// `--min-resync-period`: informers resync between this and twice this.
    pub min_resync_period: Duration,
    /// `--controller-start-interval`.
    pub controller_start_interval: Duration,
    /// `--cluster-name`.
    pub cluster_name: String,
    /// `--use-service-account-credentials`: one service account per controller.
    pub use_service_account_credentials: bool,
    /// `--profiling`, `--contention-profiling`.
    pub debugging: Debugging,
    /// `--enable-leader-migration`, `--leader-migration-config`.
    pub leader_migration: LeaderMigration,
}

/// How to reach the API server and how hard to use it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientConnection {
    /// `--master`: overrides the server of the kubeconfig.
    pub master: String,
    /// `--kubeconfig`; empty means in-cluster configuration.
    pub kubeconfig: String,
    /// `--kube-api-content-type`.
    pub content_type: String,
    /// `--kube-api-qps`.
    pub qps: f32,
    /// `--kube-api-burst`.
    pub burst: i32,
}

/// `--leader-elect*`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderElection {
    /// `--leader-elect`: run leader election and work only while leading.
    pub leader_elect: bool,
    /// `--leader-elect-lease-duration`.
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline`.
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period`.
    pub retry_period: Duration,
    /// Always `leases` after validation.
    pub resource_lock: String,
    /// `--leader-elect-resource-name`: the Lease's name.
    pub resource_name: String,
    /// `--leader-elect-resource-namespace`: the Lease's namespace.
    pub resource_namespace: String,
}

/// `--profiling`, `--contention-profiling`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Debugging {
    /// `--profiling`.
    pub profiling: bool,
    /// `--contention-profiling`.
    pub contention_profiling: bool,
}

/// `--enable-leader-migration`, `--leader-migration-config`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderMigration {
    /// `--enable-leader-migration`.
    pub enabled: bool,
    /// `--leader-migration-config`; empty means the built-in default configuration.
    pub config_file: String,
}

/// Cloud provider settings. Upstream has no in-tree cloud providers left, so only an
/// empty provider or `external` is accepted and the rest has no effect.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CloudOptions {
    /// `--cloud-provider`.
    pub provider: String,
    /// `--cloud-config`.
    pub config_file: String,
    /// `--external-cloud-volume-plugin`.
    pub external_volume_plugin: String,
    /// `--configure-cloud-routes`.
    pub configure_routes: bool,
    /// `--route-reconciliation-period`.
    pub route_reconciliation_period: Duration,
}

/// Worker counts of the controllers (`--concurrent-*-syncs`), as upstream's `int32`s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConcurrencyOptions {
    /// `--concurrent-cron-job-syncs`.
    pub cron_job_syncs: i32,
    /// `--concurrent-daemonset-syncs`.
    pub daemonset_syncs: i32,
    /// `--concurrent-deployment-syncs`.
    pub deployment_syncs: i32,
    /// `--concurrent-device-taint-eviction-syncs` (device taint eviction controller).
    pub device_taint_eviction_syncs: i32,
    /// `--concurrent-endpoint-syncs`.
    pub endpoint_syncs: i32,
    /// `--concurrent-ephemeralvolume-syncs`.
    pub ephemeral_volume_syncs: i32,
    /// `--concurrent-gc-syncs` (garbage collector).
    pub gc_syncs: i32,
    /// `--concurrent-horizontal-pod-autoscaler-syncs`.
    pub horizontal_pod_autoscaler_syncs: i32,
    /// `--concurrent-job-syncs`.
    pub job_syncs: i32,
    /// `--concurrent-namespace-syncs`.
    pub namespace_syncs: i32,
    /// `--concurrent-rc-syncs` (replication controllers).
    pub rc_syncs: i32,
    /// `--concurrent-replicaset-syncs`.
    pub replicaset_syncs: i32,
    /// `--concurrent-resource-quota-syncs`.
    pub resource_quota_syncs: i32,
    /// `--concurrent-resourceclaim-syncs` (ResourceClaim controller).
    pub resource_claim_syncs: i32,
    /// `--concurrent-service-endpoint-syncs` (EndpointSlice controller).
    pub service_endpoint_syncs: i32,
    /// `--mirroring-concurrent-service-endpoint-syncs` (EndpointSlice mirroring controller).
    pub mirroring_service_endpoint_syncs: i32,
    /// `--concurrent-service-syncs` (the cloud-only service load balancer controller).
    pub service_syncs: i32,
    /// `--concurrent-serviceaccount-token-syncs`.
    pub serviceaccount_token_syncs: i32,
    /// `--concurrent-statefulset-syncs`.
    pub statefulset_syncs: i32,
    /// `--concurrent-ttl-after-finished-syncs`.
    pub ttl_after_finished_syncs: i32,
    /// `--concurrent-validating-admission-policy-status-syncs`.
    pub validating_admission_policy_status_syncs: i32,
}

/// The attach/detach controller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttachDetachOptions {
    /// `--attach-detach-reconcile-sync-period`.
    pub reconcile_sync_period: Duration,
    /// `--disable-attach-detach-reconcile-sync`.
    pub disable_reconcile_sync: bool,
    /// `--disable-force-detach-on-timeout`.
    pub disable_force_detach_on_timeout: bool,
}

/// A CA certificate and key file pair for one signer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SignerFiles {
    /// The PEM CA certificate file (`--cluster-signing-*cert-file`).
    pub cert_file: String,
    /// The PEM private key file (`--cluster-signing-*key-file`).
    pub key_file: String,
}

/// The CSR signing controller: one CA for all signers, or one per signer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsrSigningOptions {
    /// `--cluster-signing-{cert,key}-file`: the CA of every signer.
    pub cluster: SignerFiles,
    /// `--cluster-signing-kubelet-serving-{cert,key}-file`: the `kubernetes.io/kubelet-serving` signer.
    pub kubelet_serving: SignerFiles,
    /// `--cluster-signing-kubelet-client-{cert,key}-file`: the `kubernetes.io/kube-apiserver-client-kubelet` signer.
    pub kubelet_client: SignerFiles,
    /// `--cluster-signing-kube-apiserver-client-{cert,key}-file`: the `kubernetes.io/kube-apiserver-client` signer.
    pub kube_apiserver_client: SignerFiles,
    /// `--cluster-signing-legacy-unknown-{cert,key}-file`: the `kubernetes.io/legacy-unknown` signer.
    pub legacy_unknown: SignerFiles,
    /// `--cluster-signing-duration`: the longest validity of a signed certificate.
    pub duration: Duration,
}

/// The endpoints, EndpointSlice and EndpointSlice mirroring controllers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointsOptions {
    /// `--endpoint-updates-batch-period`.
    pub endpoint_updates_batch_period: Duration,
    /// `--endpointslice-updates-batch-period`.
    pub endpointslice_updates_batch_period: Duration,
    /// `--max-endpoints-per-slice`: the most endpoints in one EndpointSlice.
    pub max_endpoints_per_slice: i32,
    /// `--mirroring-endpointslice-updates-batch-period`.
    pub mirroring_updates_batch_period: Duration,
    /// `--mirroring-max-endpoints-per-subset`.
    pub mirroring_max_endpoints_per_subset: i32,
}

/// The garbage collector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GarbageCollectorOptions {
    /// `--enable-garbage-collector`.
    pub enabled: bool,
}

/// The horizontal pod autoscaler.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HpaOptions {
    /// `--horizontal-pod-autoscaler-sync-period`.
    pub sync_period: Duration,
    /// `--horizontal-pod-autoscaler-downscale-stabilization`.
    pub downscale_stabilization: Duration,
    /// `--horizontal-pod-autoscaler-tolerance`: the usage ratio change below which it does not scale.
    pub tolerance: f64,
    /// `--horizontal-pod-autoscaler-cpu-initialization-period`.
    pub cpu_initialization_period: Duration,
    /// `--horizontal-pod-autoscaler-initial-readiness-delay`.
    pub initial_readiness_delay: Duration,
}

/// The namespace controller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceOptions {
    /// `--namespace-sync-period`.
    pub sync_period: Duration,
}

/// The node IPAM controller (pod CIDRs of nodes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeIpamOptions {
    /// `--allocate-node-cidrs`.
    pub allocate_node_cidrs: bool,
    /// `--cluster-cidr`: at most one range per IP family.
    pub cluster_cidrs: Vec<Cidr>,
    /// `--cidr-allocator-type`.
    pub cidr_allocator_type: String,
    /// `--service-cluster-ip-range`: at most one range per IP family.
    pub service_cidrs: Vec<Cidr>,
    /// `--node-cidr-mask-size`; 0 means unset (the per-family default applies).
    pub node_cidr_mask_size: i32,
    /// `--node-cidr-mask-size-ipv4`; 0 means unset (24).
    pub node_cidr_mask_size_ipv4: i32,
    /// `--node-cidr-mask-size-ipv6`; 0 means unset (64).
    pub node_cidr_mask_size_ipv6: i32,
}

/// The node lifecycle controller.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeLifecycleOptions {
    /// `--node-monitor-period`.
    pub node_monitor_period: Duration,
    /// `--node-startup-grace-period`: how long a new node may stay unresponsive before it is unhealthy.
    pub node_startup_grace_period: Duration,
    /// `--node-monitor-grace-period`: how long a running node may go unheard before it is unhealthy.
    pub node_monitor_grace_period: Duration,
    /// `--node-eviction-rate`: nodes per second in a healthy zone.
    pub node_eviction_rate: f32,
    /// `--secondary-node-eviction-rate`: nodes per second in an unhealthy zone of a large cluster.
    pub secondary_node_eviction_rate: f32,
    /// `--large-cluster-size-threshold`: clusters up to this many nodes use no secondary rate.
    pub large_cluster_size_threshold: i32,
    /// `--unhealthy-zone-threshold`: the fraction of not-Ready nodes that makes a zone unhealthy.
    pub unhealthy_zone_threshold: f32,
}

/// The persistent volume binder and its volume plugins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PersistentVolumeOptions {
    /// `--pvclaimbinder-sync-period`.
    pub claim_binder_sync_period: Duration,
    /// `--enable-dynamic-provisioning`.
    pub enable_dynamic_provisioning: bool,
    /// `--enable-hostpath-provisioner`.
    pub enable_hostpath_provisioner: bool,
    /// `--flex-volume-plugin-dir`.
    pub flex_volume_plugin_dir: String,
    /// The `--pv-recycler-*` flags.
    pub recycler: RecyclerOptions,
}

/// `--pv-recycler-*`: the recycler pods of NFS and HostPath volumes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecyclerOptions {
    /// `--pv-recycler-minimum-timeout-nfs`.
    pub minimum_timeout_nfs: i32,
    /// `--pv-recycler-increment-timeout-nfs`.
    pub increment_timeout_nfs: i32,
    /// `--pv-recycler-pod-template-filepath-nfs`.
    pub pod_template_nfs: String,
    /// `--pv-recycler-minimum-timeout-hostpath`.
    pub minimum_timeout_hostpath: i32,
    /// `--pv-recycler-timeout-increment-hostpath`.
    pub increment_timeout_hostpath: i32,
    /// `--pv-recycler-pod-template-filepath-hostpath`.
    pub pod_template_hostpath: String,
}

/// The pod garbage collector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodGcOptions {
    /// `--terminated-pod-gc-threshold`; 0 or less disables collecting terminated pods.
    pub terminated_pod_gc_threshold: i32,
}

/// The resource quota controller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceQuotaOptions {
    /// `--resource-quota-sync-period`.
    pub sync_period: Duration,
}

/// Service accounts and their tokens.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceAccountOptions {
    /// `--service-account-private-key-file`; enables legacy token Secrets.
    pub private_key_file: String,
    /// `--root-ca-file`: put in token Secrets as `ca.crt`.
    pub root_ca_file: String,
    /// `--legacy-service-account-token-clean-up-period`.
    pub legacy_token_clean_up_period: Duration,
}

/// `/metrics` filtering.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricsOptions {
    /// `--show-hidden-metrics-for-version`.
    pub show_hidden_metrics_for_version: String,
    /// `--disabled-metrics`.
    pub disabled_metrics: Vec<String>,
    /// `metric,label` to the comma-separated values allowed for that label.
    pub allow_metric_labels: BTreeMap<String, String>,
    /// `--allow-metric-labels-manifest`.
    pub allow_metric_labels_manifest: String,
}

/// Logging (`-v`, `--vmodule`, `--logging-format`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogsOptions {
    /// `-v`.
    pub verbosity: u32,
    /// `--vmodule`.
    pub vmodule: Vec<VModuleItem>,
    /// `--log-flush-frequency`.
    pub flush_frequency: Duration,
    /// `text` or `json`.
    pub format: String,
    /// `--log-text-*`.
    pub text: LogStreamOptions,
    /// `--log-json-*`.
    pub json: LogStreamOptions,
}

/// `--log-{text,json}-split-stream` and `--log-{text,json}-info-buffer-size`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogStreamOptions {
    /// Errors to stderr, info to stdout.
    pub split_stream: bool,
    /// Bytes of info messages to buffer when split; 0 disables buffering.
    pub info_buffer_size: u64,
}
