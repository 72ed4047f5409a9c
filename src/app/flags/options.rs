//! The parsed command line as typed values, grouped like upstream's component configuration.
//!
//! Defaults live in the flag table ([`super::FLAGS`]); [`Options::default`] applies them, so
//! the `Default` of each group struct below is only its zero value.

use std::collections::BTreeMap;
use std::time::Duration;

use super::feature_gates::FeatureGates;
use super::values::{Cidr, KubeVersion, VModuleItem};
use crate::app::controllers::ControllerSelection;
pub use crate::server::options::{AuthenticationOptions, AuthorizationOptions, SecureServingOptions};

/// Every setting of the command line. `Options::default()` is upstream's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    pub generic: GenericOptions,
    pub cloud: CloudOptions,
    pub secure_serving: SecureServingOptions,
    pub authentication: AuthenticationOptions,
    pub authorization: AuthorizationOptions,
    /// Every `--concurrent-*-syncs` worker count.
    pub concurrency: ConcurrencyOptions,
    pub attach_detach: AttachDetachOptions,
    pub csr_signing: CsrSigningOptions,
    pub endpoints: EndpointsOptions,
    pub garbage_collector: GarbageCollectorOptions,
    pub hpa: HpaOptions,
    pub namespace: NamespaceOptions,
    pub node_ipam: NodeIpamOptions,
    pub node_lifecycle: NodeLifecycleOptions,
    pub persistent_volume: PersistentVolumeOptions,
    pub pod_gc: PodGcOptions,
    pub resource_quota: ResourceQuotaOptions,
    pub service_account: ServiceAccountOptions,
    pub metrics: MetricsOptions,
    pub logs: LogsOptions,
    /// `--version=vX.Y.Z`: the version to report instead of this binary's.
    pub reported_version: Option<String>,
    /// Flags given on the command line, by canonical name without dashes (`v`, `kubeconfig`),
    /// in the order they first appeared. Setting a flag to its default still counts.
    pub explicitly_set: Vec<&'static str>,
}

impl Default for Options {
    /// Upstream v1.33's defaults, from the flag table.
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
        }
    }

    /// Whether `name` (without dashes, e.g. `leader-elect`) was given on the command line.
    pub fn is_set(&self, name: &str) -> bool {
        self.explicitly_set.contains(&name)
    }
}

/// Settings shared by all controllers (upstream's generic and misc flags).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenericOptions {
    pub client_connection: ClientConnection,
    pub leader_election: LeaderElection,
    /// `--controllers`.
    pub controllers: ControllerSelection,
    /// `--feature-gates`.
    pub feature_gates: FeatureGates,
    /// `--emulated-version`; `None` means this binary's version.
    pub emulated_version: Option<KubeVersion>,
    /// `--min-resync-period`: informers resync between this and twice this.
    pub min_resync_period: Duration,
    /// `--controller-start-interval`.
    pub controller_start_interval: Duration,
    /// `--cluster-name`.
    pub cluster_name: String,
    /// `--use-service-account-credentials`: one service account per controller.
    pub use_service_account_credentials: bool,
    pub debugging: Debugging,
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
    pub leader_elect: bool,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    /// Always `leases` after validation.
    pub resource_lock: String,
    pub resource_name: String,
    pub resource_namespace: String,
}

/// `--profiling`, `--contention-profiling`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Debugging {
    pub profiling: bool,
    pub contention_profiling: bool,
}

/// `--enable-leader-migration`, `--leader-migration-config`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderMigration {
    pub enabled: bool,
    pub config_file: String,
}

/// Cloud provider settings. Upstream 1.33 has no in-tree cloud providers left, so only an
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
    pub cron_job_syncs: i32,
    pub daemonset_syncs: i32,
    pub deployment_syncs: i32,
    pub endpoint_syncs: i32,
    pub ephemeral_volume_syncs: i32,
    pub gc_syncs: i32,
    pub horizontal_pod_autoscaler_syncs: i32,
    pub job_syncs: i32,
    pub namespace_syncs: i32,
    /// `--concurrent-rc-syncs` (replication controllers).
    pub rc_syncs: i32,
    pub replicaset_syncs: i32,
    pub resource_quota_syncs: i32,
    /// `--concurrent-service-endpoint-syncs` (EndpointSlice controller).
    pub service_endpoint_syncs: i32,
    /// `--mirroring-concurrent-service-endpoint-syncs` (EndpointSlice mirroring controller).
    pub mirroring_service_endpoint_syncs: i32,
    /// `--concurrent-service-syncs` (the cloud-only service load balancer controller).
    pub service_syncs: i32,
    pub serviceaccount_token_syncs: i32,
    pub statefulset_syncs: i32,
    pub ttl_after_finished_syncs: i32,
    pub validating_admission_policy_status_syncs: i32,
}

/// The attach/detach controller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttachDetachOptions {
    pub reconcile_sync_period: Duration,
    pub disable_reconcile_sync: bool,
    pub disable_force_detach_on_timeout: bool,
}

/// A CA certificate and key file pair for one signer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SignerFiles {
    pub cert_file: String,
    pub key_file: String,
}

/// The CSR signing controller: one CA for all signers, or one per signer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsrSigningOptions {
    /// `--cluster-signing-{cert,key}-file`: the CA of every signer.
    pub cluster: SignerFiles,
    pub kubelet_serving: SignerFiles,
    pub kubelet_client: SignerFiles,
    pub kube_apiserver_client: SignerFiles,
    pub legacy_unknown: SignerFiles,
    /// `--cluster-signing-duration`: the longest validity of a signed certificate.
    pub duration: Duration,
}

/// The endpoints, EndpointSlice and EndpointSlice mirroring controllers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointsOptions {
    pub endpoint_updates_batch_period: Duration,
    pub endpointslice_updates_batch_period: Duration,
    pub max_endpoints_per_slice: i32,
    pub mirroring_updates_batch_period: Duration,
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
    pub sync_period: Duration,
    pub downscale_stabilization: Duration,
    pub tolerance: f64,
    pub cpu_initialization_period: Duration,
    pub initial_readiness_delay: Duration,
}

/// The namespace controller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceOptions {
    pub sync_period: Duration,
}

/// The node IPAM controller (pod CIDRs of nodes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeIpamOptions {
    pub allocate_node_cidrs: bool,
    /// `--cluster-cidr`: at most one range per IP family.
    pub cluster_cidrs: Vec<Cidr>,
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
    pub node_startup_grace_period: Duration,
    pub node_monitor_grace_period: Duration,
    pub node_eviction_rate: f32,
    pub secondary_node_eviction_rate: f32,
    pub large_cluster_size_threshold: i32,
    pub unhealthy_zone_threshold: f32,
}

/// The persistent volume binder and its volume plugins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PersistentVolumeOptions {
    /// `--pvclaimbinder-sync-period`.
    pub claim_binder_sync_period: Duration,
    pub enable_dynamic_provisioning: bool,
    pub enable_hostpath_provisioner: bool,
    pub flex_volume_plugin_dir: String,
    pub recycler: RecyclerOptions,
}

/// `--pv-recycler-*`: the recycler pods of NFS and HostPath volumes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecyclerOptions {
    pub minimum_timeout_nfs: i32,
    pub increment_timeout_nfs: i32,
    pub pod_template_nfs: String,
    pub minimum_timeout_hostpath: i32,
    pub increment_timeout_hostpath: i32,
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
    pub show_hidden_metrics_for_version: String,
    pub disabled_metrics: Vec<String>,
    /// `metric,label` to the comma-separated values allowed for that label.
    pub allow_metric_labels: BTreeMap<String, String>,
    pub allow_metric_labels_manifest: String,
}

/// Logging (`-v`, `--vmodule`, `--logging-format`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogsOptions {
    /// `-v`.
    pub verbosity: u32,
    pub vmodule: Vec<VModuleItem>,
    pub flush_frequency: Duration,
    /// `text` or `json`.
    pub format: String,
    pub text: LogStreamOptions,
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
