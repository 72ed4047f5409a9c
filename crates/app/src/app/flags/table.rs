//! The flag table: every flag of upstream kube-controller-manager v1.36 with its help group,
//! value type, default, help text, implementation status and the field it sets. Parsing,
//! defaults, `--help` and warnings all read this table; a flag's status is changed here only.

use super::options::Options;
use super::values::{self, FlagValue, SetMode, ValueError, ValueKind, VersionRequest};

/// Whether this implementation acts on a flag yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagStatus {
    /// Parsed and honoured.
    Implemented,
    /// Parsed and validated, but the feature behind it is not built yet: it has no effect.
    NotYetBuilt,
    /// Upstream still accepts it but has deprecated it (and hides it from `--help`); the text is
    /// upstream's deprecation message. No effect here.
    Deprecated(&'static str),
    /// Upstream removed it; accepted (and hidden) so older manifests keep starting. The text
    /// says why it has no effect.
    Removed(&'static str),
    /// An upstream flag whose feature this implementation will not have; the text says why.
    NoEffect(&'static str),
}

impl FlagStatus {
    /// Upstream leaves deprecated flags out of `--help`; removed ones are not upstream's at all.
    pub fn hidden(self) -> bool {
        matches!(self, FlagStatus::Deprecated(_) | FlagStatus::Removed(_))
    }
}

/// The `--help` sections, in upstream's order. Upstream names each controller's section after
/// the controller (`Node-lifecycle-controller flags:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Group {
    /// The `Debugging flags:` section (`--profiling`, `--contention-profiling`).
    Debugging,
    /// The `Leader-migration flags:` section (`--enable-leader-migration`, `--leader-migration-config`).
    LeaderMigration,
    /// The `Generic flags:` section: settings shared by all controllers.
    Generic,
    /// The `Service-lb-controller flags:` section: the cloud-only service load balancer controller.
    ServiceLbController,
    /// The `Secure serving flags:` section: the HTTPS endpoint.
    SecureServing,
    /// The `Authentication flags:` section.
    Authentication,
    /// The `Authorization flags:` section.
    Authorization,
    /// The `Persistentvolume-attach-detach-controller flags:` section.
    AttachDetachController,
    /// The `Certificatesigningrequest-signing-controller flags:` section.
    CsrSigningController,
    /// The `Deployment-controller flags:` section.
    DeploymentController,
    /// The `Device-taint-eviction-controller flags:` section.
    DeviceTaintEvictionController,
    /// The `Resourceclaim-controller flags:` section.
    ResourceClaimController,
    /// The `Statefulset-controller flags:` section.
    StatefulSetController,
    /// The `Daemonset-controller flags:` section.
    DaemonSetController,
    /// The `Endpoints-controller flags:` section.
    EndpointsController,
    /// The `Endpointslice-controller flags:` section.
    EndpointSliceController,
    /// The `Endpointslice-mirroring-controller flags:` section.
    EndpointSliceMirroringController,
    /// The `Ephemeral-volume-controller flags:` section.
    EphemeralVolumeController,
    /// The `Garbage-collector-controller flags:` section.
    GarbageCollectorController,
    /// The `Horizontal-pod-autoscaler-controller flags:` section.
    HorizontalPodAutoscalerController,
    /// The `Job-controller flags:` section.
    JobController,
    /// The `Cronjob-controller flags:` section.
    CronJobController,
    /// The `Legacy-serviceaccount-token-cleaner-controller flags:` section.
    LegacyServiceAccountTokenCleanerController,
    /// The `Namespace-controller flags:` section.
    NamespaceController,
    /// The `Node-ipam-controller flags:` section.
    NodeIpamController,
    /// The `Node-lifecycle-controller flags:` section.
    NodeLifecycleController,
    /// The `Persistentvolume-binder-controller flags:` section.
    PersistentVolumeBinderController,
    /// The `Pod-garbage-collector-controller flags:` section.
    PodGarbageCollectorController,
    /// The `Replicaset-controller flags:` section.
    ReplicaSetController,
    /// The `Replicationcontroller-controller flags:` section.
    ReplicationControllerController,
    /// The `Resourcequota-controller flags:` section.
    ResourceQuotaController,
    /// The `Serviceaccount-controller flags:` section.
    ServiceAccountController,
    /// The `Ttl-after-finished-controller flags:` section.
    TtlAfterFinishedController,
    /// The `Validatingadmissionpolicy-status-controller flags:` section.
    ValidatingAdmissionPolicyStatusController,
    /// The `Metrics flags:` section: `/metrics` filtering.
    Metrics,
    /// The `Logs flags:` section (`-v`, `--vmodule`, `--logging-format`, ...).
    Logs,
    /// The `Misc flags:` section (`--kubeconfig`, `--master`).
    Misc,
    /// The `Global flags:` section (`--help`, `--version`).
    Global,
}

impl Group {
    /// Every group in `--help` order.
    pub const ALL: [Group; 38] = [
        Group::Debugging,
        Group::LeaderMigration,
        Group::Generic,
        Group::ServiceLbController,
        Group::SecureServing,
        Group::Authentication,
        Group::Authorization,
        Group::AttachDetachController,
        Group::CsrSigningController,
        Group::DeploymentController,
        Group::DeviceTaintEvictionController,
        Group::ResourceClaimController,
        Group::StatefulSetController,
        Group::DaemonSetController,
        Group::EndpointsController,
        Group::EndpointSliceController,
        Group::EndpointSliceMirroringController,
        Group::EphemeralVolumeController,
        Group::GarbageCollectorController,
        Group::HorizontalPodAutoscalerController,
        Group::JobController,
        Group::CronJobController,
        Group::LegacyServiceAccountTokenCleanerController,
        Group::NamespaceController,
        Group::NodeIpamController,
        Group::NodeLifecycleController,
        Group::PersistentVolumeBinderController,
        Group::PodGarbageCollectorController,
        Group::ReplicaSetController,
        Group::ReplicationControllerController,
        Group::ResourceQuotaController,
        Group::ServiceAccountController,
        Group::TtlAfterFinishedController,
        Group::ValidatingAdmissionPolicyStatusController,
        Group::Metrics,
        Group::Logs,
        Group::Misc,
        Group::Global,
    ];

    /// The section name as upstream prints it before ` flags:`.
    pub fn title(self) -> &'static str {
        match self {
            Group::Debugging => "Debugging",
            Group::LeaderMigration => "Leader-migration",
            Group::Generic => "Generic",
            Group::ServiceLbController => "Service-lb-controller",
            Group::SecureServing => "Secure serving",
            Group::Authentication => "Authentication",
            Group::Authorization => "Authorization",
            Group::AttachDetachController => "Persistentvolume-attach-detach-controller",
            Group::CsrSigningController => "Certificatesigningrequest-signing-controller",
            Group::DeploymentController => "Deployment-controller",
            Group::DeviceTaintEvictionController => "Device-taint-eviction-controller",
            Group::ResourceClaimController => "Resourceclaim-controller",
            Group::StatefulSetController => "Statefulset-controller",
            Group::DaemonSetController => "Daemonset-controller",
            Group::EndpointsController => "Endpoints-controller",
            Group::EndpointSliceController => "Endpointslice-controller",
            Group::EndpointSliceMirroringController => "Endpointslice-mirroring-controller",
            Group::EphemeralVolumeController => "Ephemeral-volume-controller",
            Group::GarbageCollectorController => "Garbage-collector-controller",
            Group::HorizontalPodAutoscalerController => "Horizontal-pod-autoscaler-controller",
            Group::JobController => "Job-controller",
            Group::CronJobController => "Cronjob-controller",
            Group::LegacyServiceAccountTokenCleanerController => "Legacy-serviceaccount-token-cleaner-controller",
            Group::NamespaceController => "Namespace-controller",
            Group::NodeIpamController => "Node-ipam-controller",
            Group::NodeLifecycleController => "Node-lifecycle-controller",
            Group::PersistentVolumeBinderController => "Persistentvolume-binder-controller",
            Group::PodGarbageCollectorController => "Pod-garbage-collector-controller",
            Group::ReplicaSetController => "Replicaset-controller",
            Group::ReplicationControllerController => "Replicationcontroller-controller",
            Group::ResourceQuotaController => "Resourcequota-controller",
            Group::ServiceAccountController => "Serviceaccount-controller",
            Group::TtlAfterFinishedController => "Ttl-after-finished-controller",
            Group::ValidatingAdmissionPolicyStatusController => "Validatingadmissionpolicy-status-controller",
            Group::Metrics => "Metrics",
            Group::Logs => "Logs",
            Group::Misc => "Misc",
            Group::Global => "Global",
        }
    }
}

/// What the setters write to: the options plus the requests that end parsing early.
#[derive(Debug)]
pub(crate) struct ParseState {
    pub options: Options,
    pub help: bool,
    pub version: VersionRequest,
}

/// Parses a raw value into the state; the error describes the value's problem.
type Setter = fn(&mut ParseState, &str, SetMode) -> Result<(), ValueError>;

/// One flag of the table.
#[derive(Debug, Clone, Copy)]
pub struct FlagSpec {
    /// The long name without dashes.
    pub name: &'static str,
    /// The one-letter form (`-v`, `-h`).
    pub shorthand: Option<char>,
    /// The `--help` section it is listed in.
    pub group: Group,
    /// The value type: pflag's type name and whether a value is required.
    pub kind: ValueKind,
    /// The default as text in the flag's own syntax; empty for the zero value.
    pub default: &'static str,
    /// Whether this implementation acts on the flag.
    pub status: FlagStatus,
    /// The help text, as `--help` prints it after the flag.
    pub help: &'static str,
    pub(crate) set: Setter,
}

impl FlagSpec {
    /// How error messages name the flag: `--kubeconfig`, or `-v, --v` when it has a shorthand
    /// (pflag's wording).
    pub fn display_name(&self) -> String {
        match self.shorthand {
            Some(short) => format!("-{short}, --{}", self.name),
            None => format!("--{}", self.name),
        }
    }
}

/// Finds a flag by long name; `_` and `-` are interchangeable as upstream normalizes them.
pub fn lookup(name: &str) -> Option<&'static FlagSpec> {
    let normalized = name.replace('_', "-");
    FLAGS.iter().find(|f| f.name == normalized)
}

/// Finds a flag by its one-letter form.
pub(crate) fn lookup_shorthand(short: char) -> Option<&'static FlagSpec> {
    FLAGS.iter().find(|f| f.shorthand == Some(short))
}

/// Options with every table default applied: upstream's defaults.
pub(crate) fn default_state() -> ParseState {
    let mut state = ParseState { options: Options::zeroed(), help: false, version: VersionRequest::NotRequested };
    for flag in FLAGS.iter().filter(|f| !f.default.is_empty()) {
        // The table test checks that every default parses; a bad one would be a table bug.
        if let Err(e) = (flag.set)(&mut state, flag.default, SetMode::Default) {
            panic!("default {:?} of --{}: {e}", flag.default, flag.name);
        }
    }
    state
}

/// One table line: name, group, value type (a marker in [`values`]), default, status, the
/// field of [`Options`] it sets (or `_` to check and drop the value), help text.
macro_rules! flag {
    ($name:literal, $group:ident, $kind:ident, $default:literal, $status:expr, _, $help:expr $(,)?) => {
        FlagSpec {
            name: $name,
            shorthand: None,
            group: Group::$group,
            kind: <values::$kind as FlagValue>::KIND,
            default: $default,
            status: $status,
            help: $help,
            set: |_, raw, mode| {
                let mut scratch = <<values::$kind as FlagValue>::Target as Default>::default();
                <values::$kind as FlagValue>::assign(&mut scratch, raw, mode)
            },
        }
    };
    ($name:literal, $group:ident, $kind:ident, $default:literal, $status:expr,
     $($field:ident).+, $help:expr $(,)?) => {
        FlagSpec {
            name: $name,
            shorthand: None,
            group: Group::$group,
            kind: <values::$kind as FlagValue>::KIND,
            default: $default,
            status: $status,
            help: $help,
            set: |state, raw, mode| {
                <values::$kind as FlagValue>::assign(&mut state.options.$($field).+, raw, mode)
            },
        }
    };
}

const BUILT: FlagStatus = FlagStatus::Implemented;
const LATER: FlagStatus = FlagStatus::NotYetBuilt;
const CLOUD: FlagStatus = FlagStatus::NoEffect(
    "it configures in-tree cloud provider integration, which upstream removed and this \
     controller manager does not have",
);
const UNTAGGED_CLOUD: FlagStatus = FlagStatus::Deprecated(
    "This flag is deprecated and will be removed in a future release. A cluster-id will be \
     required on cloud instances.",
);
const TAINT_EVICTION: FlagStatus =
    FlagStatus::Removed("upstream removed it; evictions follow taints and tolerations (tolerationSeconds)");
const NO_OP: FlagStatus = FlagStatus::Deprecated("This flag is currently no-op and will be deleted.");

/// Every flag, grouped as `--help` shows them.
#[rustfmt::skip]
pub static FLAGS: &[FlagSpec] = &[
    // Debugging
    flag!("contention-profiling", Debugging, Bool, "", LATER, generic.debugging.contention_profiling,
        "Enable block profiling, if profiling is enabled"),
    flag!("profiling", Debugging, Bool, "true", LATER, generic.debugging.profiling,
        "Enable profiling via web interface host:port/debug/pprof/"),
    // Leader migration
    flag!("enable-leader-migration", LeaderMigration, Bool, "", LATER, generic.leader_migration.enabled,
        "Whether to enable controller leader migration."),
    flag!("leader-migration-config", LeaderMigration, Str, "", LATER, generic.leader_migration.config_file,
        "Path to the config file for controller leader migration, or empty to use the value that reflects default configuration of the controller manager. The config file should be of type LeaderMigrationConfiguration, group controllermanager.config.k8s.io, version v1alpha1."),
    // Generic
    flag!("allocate-node-cidrs", Generic, Bool, "", BUILT, node_ipam.allocate_node_cidrs,
        "Should CIDRs for Pods be allocated and set on the cloud provider. Requires --cluster-cidr."),
    flag!("allow-untagged-cloud", Generic, Bool, "", UNTAGGED_CLOUD, _,
        "Allow the cluster to run without the cluster-id on cloud instances."),
    flag!("cidr-allocator-type", Generic, Str, "RangeAllocator", BUILT, node_ipam.cidr_allocator_type,
        "Type of CIDR allocator to use"),
    flag!("cloud-config", Generic, Str, "", CLOUD, cloud.config_file,
        "The path to the cloud provider configuration file. Empty string for no configuration file."),
    flag!("cloud-provider", Generic, Str, "", BUILT, cloud.provider,
        "The provider for cloud services. Empty string for no provider."),
    flag!("cluster-cidr", Generic, Cidrs, "", BUILT, node_ipam.cluster_cidrs,
        "CIDR Range for Pods in cluster. Only used when --allocate-node-cidrs=true; if false, this option will be ignored."),
    flag!("cluster-name", Generic, Str, "kubernetes", LATER, generic.cluster_name,
        "The instance prefix for the cluster."),
    flag!("configure-cloud-routes", Generic, Bool, "true", CLOUD, cloud.configure_routes,
        "Should CIDRs allocated by allocate-node-cidrs be configured on the cloud provider."),
    flag!("controller-shutdown-timeout", Generic, GoDuration, "10s", BUILT, generic.controller_shutdown_timeout,
        "Time to wait for the controllers to shut down before terminating the executable"),
    flag!("controller-start-interval", Generic, GoDuration, "", LATER, generic.controller_start_interval,
        "Interval between starting controller managers."),
    flag!("controllers", Generic, Controllers, "*", BUILT, generic.controllers,
        "A list of controllers to enable. '*' enables all on-by-default controllers, 'foo' enables the controller named 'foo', '-foo' disables the controller named 'foo'."),
    flag!("emulated-version", Generic, Strings, "", BUILT, generic.compatibility.emulated_version_flag,
        "The versions different components emulate their capabilities (APIs, features, ...) of.\nIf set, the component will emulate the behavior of this version instead of the underlying binary version.\nVersion format could only be major.minor, for example: '--emulated-version=wardle=1.2,kube=1.31'.\nOptions are: "),
    flag!("external-cloud-volume-plugin", Generic, Str, "", CLOUD, cloud.external_volume_plugin,
        "The plugin to use when cloud provider is set to external. Can be empty, should only be set when cloud-provider is external. Currently used to allow node-ipam-controller, persistentvolume-binder-controller, persistentvolume-expander-controller and attach-detach-controller to work for in tree cloud providers."),
    flag!("feature-gates", Generic, Gates, "", BUILT, generic.feature_gates,
        "Comma-separated list of component:key=value pairs that describe feature gates for alpha/experimental features of different components.\nIf the component is not specified, defaults to \"kube\". This flag can be repeatedly invoked. For example: --feature-gates 'wardle:featureA=true,wardle:featureB=false' --feature-gates 'kube:featureC=true'Options are:"),
    flag!("kube-api-burst", Generic, Int32, "30", BUILT, generic.client_connection.burst,
        "Burst to use while talking with kubernetes apiserver."),
    flag!("kube-api-content-type", Generic, Str, "application/vnd.kubernetes.protobuf", LATER, generic.client_connection.content_type,
        "Content type of requests sent to apiserver."),
    flag!("kube-api-qps", Generic, Float32, "20", BUILT, generic.client_connection.qps,
        "QPS to use while talking with kubernetes apiserver."),
    flag!("leader-elect", Generic, Bool, "true", BUILT, generic.leader_election.leader_elect,
        "Start a leader election client and gain leadership before executing the main loop. Enable this when running replicated components for high availability."),
    flag!("leader-elect-lease-duration", Generic, GoDuration, "15s", BUILT, generic.leader_election.lease_duration,
        "The duration that non-leader candidates will wait after observing a leadership renewal until attempting to acquire leadership of a led but unrenewed leader slot. This is effectively the maximum duration that a leader can be stopped before it is replaced by another candidate. This is only applicable if leader election is enabled."),
    flag!("leader-elect-renew-deadline", Generic, GoDuration, "10s", BUILT, generic.leader_election.renew_deadline,
        "The interval between attempts by the acting master to renew a leadership slot before it stops leading. This must be less than the lease duration. This is only applicable if leader election is enabled."),
    flag!("leader-elect-resource-lock", Generic, Str, "leases", BUILT, generic.leader_election.resource_lock,
        "The type of resource object that is used for locking during leader election. Supported options are 'leases'."),
    flag!("leader-elect-resource-name", Generic, Str, "kube-controller-manager", BUILT, generic.leader_election.resource_name,
        "The name of resource object that is used for locking during leader election."),
    flag!("leader-elect-resource-namespace", Generic, Str, "kube-system", BUILT, generic.leader_election.resource_namespace,
        "The namespace of resource object that is used for locking during leader election."),
    flag!("leader-elect-retry-period", Generic, GoDuration, "2s", BUILT, generic.leader_election.retry_period,
        "The duration the clients should wait between attempting acquisition and renewal of a leadership. This is only applicable if leader election is enabled."),
    flag!("min-compatibility-version", Generic, Strings, "", BUILT, generic.compatibility.min_compatibility_version_flag,
        "The min version of control plane components the server should be compatible with.\nMust be less or equal to the emulated-version. Version format could only be major.minor, for example: '--min-compatibility-version=wardle=1.2,kube=1.31'.\nOptions are: "),
    flag!("min-resync-period", Generic, GoDuration, "12h0m0s", BUILT, generic.min_resync_period,
        "The resync period in reflectors will be random between MinResyncPeriod and 2*MinResyncPeriod."),
    flag!("node-monitor-period", Generic, GoDuration, "5s", BUILT, node_lifecycle.node_monitor_period,
        "The period for syncing NodeStatus in cloud-node-lifecycle-controller."),
    flag!("node-sync-period", Generic, GoDuration, "", NO_OP, _,
        "Period of syncing nodes from the cloud provider."),
    flag!("route-reconciliation-period", Generic, GoDuration, "10s", CLOUD, cloud.route_reconciliation_period,
        "The period for reconciling routes created for Nodes by cloud provider."),
    flag!("use-service-account-credentials", Generic, Bool, "", BUILT, generic.use_service_account_credentials,
        "If true, use individual service account credentials for each controller."),
    // Service load balancer controller (cloud provider only)
    flag!("concurrent-service-syncs", ServiceLbController, Int32, "1", CLOUD, concurrency.service_syncs,
        "The number of services that are allowed to sync concurrently. Larger number = more responsive service management, but more CPU (and network) load"),
    // Secure serving
    flag!("address", SecureServing, Ip, "", FlagStatus::Removed("insecure serving was removed upstream; use --bind-address"), _,
        "The IP address of the removed insecure port."),
    flag!("bind-address", SecureServing, Ip, "0.0.0.0", BUILT, secure_serving.bind_address,
        "The IP address on which to listen for the --secure-port port. The associated interface(s) must be reachable by the rest of the cluster, and by CLI/web clients. If blank or an unspecified address (0.0.0.0 or ::), all interfaces and IP address families will be used."),
    flag!("cert-dir", SecureServing, Str, "", BUILT, secure_serving.cert_dir,
        "The directory where the TLS certs are located. If --tls-cert-file and --tls-private-key-file are provided, this flag will be ignored."),
    flag!("disable-http2-serving", SecureServing, Bool, "", LATER, secure_serving.disable_http2,
        "If true, HTTP2 serving will be disabled [default=false]"),
    flag!("http2-max-streams-per-connection", SecureServing, Int, "", LATER, secure_serving.http2_max_streams_per_connection,
        "The limit that the server gives to clients for the maximum number of streams in an HTTP/2 connection. Zero means to use golang's default."),
    flag!("permit-address-sharing", SecureServing, Bool, "", LATER, secure_serving.permit_address_sharing,
        "If true, SO_REUSEADDR will be used when binding the port. This allows binding to wildcard IPs like 0.0.0.0 and specific IPs in parallel, and it avoids waiting for the kernel to release sockets in TIME_WAIT state. [default=false]"),
    flag!("permit-port-sharing", SecureServing, Bool, "", LATER, secure_serving.permit_port_sharing,
        "If true, SO_REUSEPORT will be used when binding the port, which allows more than one instance to bind on the same address and port. [default=false]"),
    flag!("port", SecureServing, Port, "", FlagStatus::Removed("insecure serving was removed upstream; use --secure-port"), _,
        "The removed insecure HTTP port."),
    flag!("secure-port", SecureServing, Port, "10257", BUILT, secure_serving.port,
        "The port on which to serve HTTPS with authentication and authorization. If 0, don't serve HTTPS at all."),
    flag!("tls-cert-file", SecureServing, Str, "", BUILT, secure_serving.tls_cert_file,
        "File containing the default x509 Certificate for HTTPS. (CA cert, if any, concatenated after server cert). If HTTPS serving is enabled, and --tls-cert-file and --tls-private-key-file are not provided, a self-signed certificate and key are generated for the public address and saved to the directory specified by --cert-dir."),
    flag!("tls-cipher-suites", SecureServing, CipherSuites, "", BUILT, secure_serving.tls_cipher_suites,
        "Comma-separated list of cipher suites for the server. If omitted, the default Go cipher suites will be used. \nPreferred values: TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256, TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305, TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256. \nInsecure values: TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256, TLS_ECDHE_ECDSA_WITH_RC4_128_SHA, TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA, TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256, TLS_ECDHE_RSA_WITH_RC4_128_SHA, TLS_RSA_WITH_3DES_EDE_CBC_SHA, TLS_RSA_WITH_AES_128_CBC_SHA, TLS_RSA_WITH_AES_128_CBC_SHA256, TLS_RSA_WITH_AES_128_GCM_SHA256, TLS_RSA_WITH_AES_256_CBC_SHA, TLS_RSA_WITH_AES_256_GCM_SHA384, TLS_RSA_WITH_RC4_128_SHA."),
    flag!("tls-curve-preferences", SecureServing, Int32Slice, "", BUILT, secure_serving.tls_curve_preferences,
        "Comma-separated list of numeric Go crypto/tls CurveID values, as the allowed key exchange mechanisms for the server. The supported values depend on the Go version used. See https://pkg.go.dev/crypto/tls#CurveID for values supported for each Go version. The order of the list is ignored, and key exchange mechanisms are chosen by Go from this list using an internal preference order. If omitted, the default Go curves will be used."),
    flag!("tls-min-version", SecureServing, TlsVersion, "", BUILT, secure_serving.tls_min_version,
        "Minimum TLS version supported. Possible values: VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13"),
    flag!("tls-private-key-file", SecureServing, Str, "", BUILT, secure_serving.tls_private_key_file,
        "File containing the default x509 private key matching --tls-cert-file."),
    flag!("tls-sni-cert-key", SecureServing, NamedCertKeys, "", LATER, secure_serving.sni_cert_keys,
        "A pair of x509 certificate and private key file paths, optionally suffixed with a list of domain patterns which are fully qualified domain names, possibly with prefixed wildcard segments. The domain patterns also allow IP addresses, but IPs should only be used if the apiserver has visibility to the IP address requested by a client. If no domain patterns are provided, the names of the certificate are extracted. Non-wildcard matches trump over wildcard matches, explicit domain patterns trump over extracted names. For multiple key/certificate pairs, use the --tls-sni-cert-key multiple times. Examples: \"example.crt,example.key\" or \"foo.crt,foo.key:*.foo.com,foo.com\"."),
    // Authentication
    flag!("authentication-kubeconfig", Authentication, Str, "", BUILT, authentication.kubeconfig,
        "kubeconfig file pointing at the 'core' kubernetes server with enough rights to create tokenreviews.authentication.k8s.io. This is optional. If empty, all token requests are considered to be anonymous and no client CA is looked up in the cluster."),
    flag!("authentication-skip-lookup", Authentication, Bool, "", BUILT, authentication.skip_lookup,
        "If false, the authentication-kubeconfig will be used to lookup missing authentication configuration from the cluster."),
    flag!("authentication-token-webhook-cache-ttl", Authentication, GoDuration, "10s", BUILT, authentication.token_webhook_cache_ttl,
        "The duration to cache responses from the webhook token authenticator."),
    flag!("authentication-tolerate-lookup-failure", Authentication, Bool, "", BUILT, authentication.tolerate_lookup_failure,
        "If true, failures to look up missing authentication configuration from the cluster are not considered fatal. Note that this can result in authentication that treats all requests as anonymous."),
    flag!("client-ca-file", Authentication, Str, "", BUILT, authentication.client_ca_file,
        "If set, any request presenting a client certificate signed by one of the authorities in the client-ca-file is authenticated with an identity corresponding to the CommonName of the client certificate."),
    flag!("requestheader-allowed-names", Authentication, Strings, "", BUILT, authentication.requestheader_allowed_names,
        "List of client certificate common names to allow to provide usernames in headers specified by --requestheader-username-headers. If empty, any client certificate validated by the authorities in --requestheader-client-ca-file is allowed."),
    flag!("requestheader-client-ca-file", Authentication, Str, "", BUILT, authentication.requestheader_client_ca_file,
        "Root certificate bundle to use to verify client certificates on incoming requests before trusting usernames in headers specified by --requestheader-username-headers. WARNING: generally do not depend on authorization being already done for incoming requests."),
    flag!("requestheader-extra-headers-prefix", Authentication, Strings, "x-remote-extra-", BUILT, authentication.requestheader_extra_headers_prefix,
        "List of request header prefixes to inspect. X-Remote-Extra- is suggested."),
    flag!("requestheader-group-headers", Authentication, Strings, "x-remote-group", BUILT, authentication.requestheader_group_headers,
        "List of request headers to inspect for groups. X-Remote-Group is suggested."),
    flag!("requestheader-uid-headers", Authentication, Strings, "", BUILT, authentication.requestheader_uid_headers,
        "List of request headers to inspect for UIDs. X-Remote-Uid is suggested. Requires the RemoteRequestHeaderUID feature to be enabled."),
    flag!("requestheader-username-headers", Authentication, Strings, "x-remote-user", BUILT, authentication.requestheader_username_headers,
        "List of request headers to inspect for usernames. X-Remote-User is common."),
    // Authorization
    flag!("authorization-always-allow-paths", Authorization, Strings, "/healthz,/readyz,/livez", BUILT, authorization.always_allow_paths,
        "A list of HTTP paths to skip during authorization, i.e. these are authorized without contacting the 'core' kubernetes server."),
    flag!("authorization-kubeconfig", Authorization, Str, "", BUILT, authorization.kubeconfig,
        "kubeconfig file pointing at the 'core' kubernetes server with enough rights to create subjectaccessreviews.authorization.k8s.io. This is optional. If empty, all requests not skipped by authorization are forbidden."),
    flag!("authorization-webhook-cache-authorized-ttl", Authorization, GoDuration, "10s", BUILT, authorization.webhook_cache_authorized_ttl,
        "The duration to cache 'authorized' responses from the webhook authorizer."),
    flag!("authorization-webhook-cache-unauthorized-ttl", Authorization, GoDuration, "10s", BUILT, authorization.webhook_cache_unauthorized_ttl,
        "The duration to cache 'unauthorized' responses from the webhook authorizer."),
    // persistentvolume-attach-detach-controller
    flag!("attach-detach-reconcile-sync-period", AttachDetachController, GoDuration, "1m0s", BUILT, attach_detach.reconcile_sync_period,
        "The reconciler sync wait time between volume attach detach. This duration must be larger than one second, and increasing this value from the default may allow for volumes to be mismatched with pods."),
    flag!("disable-attach-detach-reconcile-sync", AttachDetachController, Bool, "", BUILT, attach_detach.disable_reconcile_sync,
        "Disable volume attach detach reconciler sync. Disabling this may cause volumes to be mismatched with pods. Use wisely."),
    flag!("disable-force-detach-on-timeout", AttachDetachController, Bool, "", BUILT, attach_detach.disable_force_detach_on_timeout,
        "Prevent force detaching volumes based on maximum unmount time and node status. If this flag is set to true, the non-graceful node shutdown feature must be used to recover from node failure. See https://k8s.io/docs/storage-disable-force-detach-on-timeout/."),
    // certificatesigningrequest-signing-controller
    flag!("cluster-signing-cert-file", CsrSigningController, Str, "", BUILT, csr_signing.cluster.cert_file,
        "Filename containing a PEM-encoded X509 CA certificate used to issue cluster-scoped certificates.  If specified, no more specific --cluster-signing-* flag may be specified."),
    flag!("cluster-signing-duration", CsrSigningController, GoDuration, "8760h0m0s", BUILT, csr_signing.duration,
        "The max length of duration signed certificates will be given.  Individual CSRs may request shorter certs by setting spec.expirationSeconds."),
    flag!("cluster-signing-key-file", CsrSigningController, Str, "", BUILT, csr_signing.cluster.key_file,
        "Filename containing a PEM-encoded RSA or ECDSA private key used to sign cluster-scoped certificates.  If specified, no more specific --cluster-signing-* flag may be specified."),
    flag!("cluster-signing-kube-apiserver-client-cert-file", CsrSigningController, Str, "", BUILT, csr_signing.kube_apiserver_client.cert_file,
        "Filename containing a PEM-encoded X509 CA certificate used to issue certificates for the kubernetes.io/kube-apiserver-client signer.  If specified, --cluster-signing-{cert,key}-file must not be set."),
    flag!("cluster-signing-kube-apiserver-client-key-file", CsrSigningController, Str, "", BUILT, csr_signing.kube_apiserver_client.key_file,
        "Filename containing a PEM-encoded RSA or ECDSA private key used to sign certificates for the kubernetes.io/kube-apiserver-client signer.  If specified, --cluster-signing-{cert,key}-file must not be set."),
    flag!("cluster-signing-kubelet-client-cert-file", CsrSigningController, Str, "", BUILT, csr_signing.kubelet_client.cert_file,
        "Filename containing a PEM-encoded X509 CA certificate used to issue certificates for the kubernetes.io/kube-apiserver-client-kubelet signer.  If specified, --cluster-signing-{cert,key}-file must not be set."),
    flag!("cluster-signing-kubelet-client-key-file", CsrSigningController, Str, "", BUILT, csr_signing.kubelet_client.key_file,
        "Filename containing a PEM-encoded RSA or ECDSA private key used to sign certificates for the kubernetes.io/kube-apiserver-client-kubelet signer.  If specified, --cluster-signing-{cert,key}-file must not be set."),
    flag!("cluster-signing-kubelet-serving-cert-file", CsrSigningController, Str, "", BUILT, csr_signing.kubelet_serving.cert_file,
        "Filename containing a PEM-encoded X509 CA certificate used to issue certificates for the kubernetes.io/kubelet-serving signer.  If specified, --cluster-signing-{cert,key}-file must not be set."),
    flag!("cluster-signing-kubelet-serving-key-file", CsrSigningController, Str, "", BUILT, csr_signing.kubelet_serving.key_file,
        "Filename containing a PEM-encoded RSA or ECDSA private key used to sign certificates for the kubernetes.io/kubelet-serving signer.  If specified, --cluster-signing-{cert,key}-file must not be set."),
    flag!("cluster-signing-legacy-unknown-cert-file", CsrSigningController, Str, "", BUILT, csr_signing.legacy_unknown.cert_file,
        "Filename containing a PEM-encoded X509 CA certificate used to issue certificates for the kubernetes.io/legacy-unknown signer.  If specified, --cluster-signing-{cert,key}-file must not be set."),
    flag!("cluster-signing-legacy-unknown-key-file", CsrSigningController, Str, "", BUILT, csr_signing.legacy_unknown.key_file,
        "Filename containing a PEM-encoded RSA or ECDSA private key used to sign certificates for the kubernetes.io/legacy-unknown signer.  If specified, --cluster-signing-{cert,key}-file must not be set."),
    // Workload controllers
    flag!("concurrent-deployment-syncs", DeploymentController, Int32, "5", BUILT, concurrency.deployment_syncs,
        "The number of deployment objects that are allowed to sync concurrently. Larger number = more responsive deployments, but more CPU (and network) load"),
    flag!("concurrent-device-taint-eviction-syncs", DeviceTaintEvictionController, Int32, "8", BUILT, concurrency.device_taint_eviction_syncs,
        "The number of operations (evicting pods, updating DeviceTaintRule status) allowed to run concurrently. Greater number = more responsive, but more CPU (and network) load"),
    flag!("concurrent-resourceclaim-syncs", ResourceClaimController, Int32, "50", BUILT, concurrency.resource_claim_syncs,
        "The number of operations (creating or deleting ResourceClaims) allowed to run concurrently. Larger number = more responsive, but more CPU (and network) load"),
    flag!("concurrent-statefulset-syncs", StatefulSetController, Int32, "5", BUILT, concurrency.statefulset_syncs,
        "The number of statefulset objects that are allowed to sync concurrently. Larger number = more responsive statefulsets, but more CPU (and network) load"),
    flag!("concurrent-daemonset-syncs", DaemonSetController, Int32, "2", BUILT, concurrency.daemonset_syncs,
        "The number of daemonset objects that are allowed to sync concurrently. Larger number = more responsive daemonsets, but more CPU (and network) load"),
    // Endpoints
    flag!("concurrent-endpoint-syncs", EndpointsController, Int32, "5", BUILT, concurrency.endpoint_syncs,
        "The number of endpoint syncing operations that will be done concurrently. Larger number = faster endpoint updating, but more CPU (and network) load"),
    flag!("endpoint-updates-batch-period", EndpointsController, GoDuration, "", BUILT, endpoints.endpoint_updates_batch_period,
        "The length of endpoint updates batching period. Processing of pod changes will be delayed by this duration to join them with potential upcoming updates and reduce the overall number of endpoints updates. Larger number = higher endpoint programming latency, but lower number of endpoints revision generated"),
    flag!("concurrent-service-endpoint-syncs", EndpointSliceController, Int32, "5", BUILT, concurrency.service_endpoint_syncs,
        "The number of service endpoint syncing operations that will be done concurrently. Larger number = faster endpoint slice updating, but more CPU (and network) load. Defaults to 5."),
    flag!("endpointslice-updates-batch-period", EndpointSliceController, GoDuration, "", BUILT, endpoints.endpointslice_updates_batch_period,
        "The length of endpoint slice updates batching period. Processing of pod changes will be delayed by this duration to join them with potential upcoming updates and reduce the overall number of endpoints updates. Larger number = higher endpoint programming latency, but lower number of endpoints revision generated"),
    flag!("max-endpoints-per-slice", EndpointSliceController, Int32, "100", BUILT, endpoints.max_endpoints_per_slice,
        "The maximum number of endpoints that will be added to an EndpointSlice. More endpoints per slice will result in less endpoint slices, but larger resources. Defaults to 100."),
    flag!("mirroring-concurrent-service-endpoint-syncs", EndpointSliceMirroringController, Int32, "5", BUILT, concurrency.mirroring_service_endpoint_syncs,
        "The number of service endpoint syncing operations that will be done concurrently by the endpointslice-mirroring-controller. Larger number = faster endpoint slice updating, but more CPU (and network) load. Defaults to 5."),
    flag!("mirroring-endpointslice-updates-batch-period", EndpointSliceMirroringController, GoDuration, "", BUILT, endpoints.mirroring_updates_batch_period,
        "The length of EndpointSlice updates batching period for endpointslice-mirroring-controller. Processing of EndpointSlice changes will be delayed by this duration to join them with potential upcoming updates and reduce the overall number of EndpointSlice updates. Larger number = higher endpoint programming latency, but lower number of endpoints revision generated"),
    flag!("mirroring-max-endpoints-per-subset", EndpointSliceMirroringController, Int32, "1000", BUILT, endpoints.mirroring_max_endpoints_per_subset,
        "The maximum number of endpoints that will be added to an EndpointSlice by the endpointslice-mirroring-controller. More endpoints per slice will result in less endpoint slices, but larger resources. Defaults to 100."),
    // Other controllers
    flag!("concurrent-ephemeralvolume-syncs", EphemeralVolumeController, Int32, "5", BUILT, concurrency.ephemeral_volume_syncs,
        "The number of ephemeral volume syncing operations that will be done concurrently. Larger number = faster ephemeral volume updating, but more CPU (and network) load"),
    flag!("concurrent-gc-syncs", GarbageCollectorController, Int32, "20", BUILT, concurrency.gc_syncs,
        "The number of garbage collector workers that are allowed to sync concurrently."),
    flag!("enable-garbage-collector", GarbageCollectorController, Bool, "true", BUILT, garbage_collector.enabled,
        "Enables the generic garbage collector. MUST be synced with the corresponding flag of the kube-apiserver."),
    flag!("concurrent-horizontal-pod-autoscaler-syncs", HorizontalPodAutoscalerController, Int32, "5", BUILT, concurrency.horizontal_pod_autoscaler_syncs,
        "The number of horizontal pod autoscaler objects that are allowed to sync concurrently. Larger number = more responsive horizontal pod autoscaler objects processing, but more CPU (and network) load."),
    flag!("horizontal-pod-autoscaler-cpu-initialization-period", HorizontalPodAutoscalerController, GoDuration, "5m0s", BUILT, hpa.cpu_initialization_period,
        "The period after pod start when CPU samples might be skipped."),
    flag!("horizontal-pod-autoscaler-downscale-delay", HorizontalPodAutoscalerController, GoDuration, "5m0s", NO_OP, _,
        "Wait after a downscale before the next one."),
    flag!("horizontal-pod-autoscaler-downscale-stabilization", HorizontalPodAutoscalerController, GoDuration, "5m0s", BUILT, hpa.downscale_stabilization,
        "The period for which autoscaler will look backwards and not scale down below any recommendation it made during that period."),
    flag!("horizontal-pod-autoscaler-initial-readiness-delay", HorizontalPodAutoscalerController, GoDuration, "30s", BUILT, hpa.initial_readiness_delay,
        "The period after pod start during which readiness changes will be treated as initial readiness."),
    flag!("horizontal-pod-autoscaler-sync-period", HorizontalPodAutoscalerController, GoDuration, "15s", BUILT, hpa.sync_period,
        "The period for syncing the number of pods in horizontal pod autoscaler."),
    flag!("horizontal-pod-autoscaler-tolerance", HorizontalPodAutoscalerController, Float64, "0.1", BUILT, hpa.tolerance,
        "The minimum change (from 1.0) in the desired-to-actual metrics ratio for the horizontal pod autoscaler to consider scaling."),
    flag!("horizontal-pod-autoscaler-upscale-delay", HorizontalPodAutoscalerController, GoDuration, "3m0s", NO_OP, _,
        "Wait after an upscale before the next one."),
    flag!("concurrent-job-syncs", JobController, Int32, "5", BUILT, concurrency.job_syncs,
        "The number of job objects that are allowed to sync concurrently. Larger number = more responsive jobs, but more CPU (and network) load"),
    flag!("concurrent-cron-job-syncs", CronJobController, Int32, "5", BUILT, concurrency.cron_job_syncs,
        "The number of cron job objects that are allowed to sync concurrently. Larger number = more responsive jobs, but more CPU (and network) load"),
    flag!("legacy-service-account-token-clean-up-period", LegacyServiceAccountTokenCleanerController, GoDuration, "8760h0m0s", BUILT, service_account.legacy_token_clean_up_period,
        "The period of time since the last usage of an legacy service account token before it can be deleted."),
    flag!("concurrent-namespace-syncs", NamespaceController, Int32, "10", BUILT, concurrency.namespace_syncs,
        "The number of namespace objects that are allowed to sync concurrently. Larger number = more responsive namespace termination, but more CPU (and network) load"),
    flag!("namespace-sync-period", NamespaceController, GoDuration, "5m0s", BUILT, namespace.sync_period,
        "The period for syncing namespace life-cycle updates"),
    // Node IPAM
    flag!("node-cidr-mask-size", NodeIpamController, Int32, "", BUILT, node_ipam.node_cidr_mask_size,
        "Mask size for node cidr in cluster. Default is 24 for IPv4 and 64 for IPv6."),
    flag!("node-cidr-mask-size-ipv4", NodeIpamController, Int32, "", BUILT, node_ipam.node_cidr_mask_size_ipv4,
        "Mask size for IPv4 node cidr in dual-stack cluster. Default is 24."),
    flag!("node-cidr-mask-size-ipv6", NodeIpamController, Int32, "", BUILT, node_ipam.node_cidr_mask_size_ipv6,
        "Mask size for IPv6 node cidr in dual-stack cluster. Default is 64."),
    flag!("service-cluster-ip-range", NodeIpamController, Cidrs, "", BUILT, node_ipam.service_cidrs,
        "CIDR Range for Services in cluster. Only used when --allocate-node-cidrs=true; if false, this option will be ignored."),
    // Node lifecycle
    flag!("enable-taint-manager", NodeLifecycleController, Bool, "true",
        FlagStatus::Removed("taint-based eviction is always on (the taint eviction controller)"), _,
        "Evict pods of failed nodes through NoExecute taints."),
    flag!("large-cluster-size-threshold", NodeLifecycleController, Int32, "50", BUILT, node_lifecycle.large_cluster_size_threshold,
        "Number of nodes from which node-lifecycle-controller treats the cluster as large for the eviction logic purposes. --secondary-node-eviction-rate is implicitly overridden to 0 for clusters this size or smaller. Notice: If nodes reside in multiple zones, this threshold will be considered as zone node size threshold for each zone to determine node eviction rate independently."),
    flag!("node-eviction-rate", NodeLifecycleController, Float32, "0.1", BUILT, node_lifecycle.node_eviction_rate,
        "Number of nodes per second on which pods are deleted in case of node failure when a zone is healthy (see --unhealthy-zone-threshold for definition of healthy/unhealthy). Zone refers to entire cluster in non-multizone clusters."),
    flag!("node-monitor-grace-period", NodeLifecycleController, GoDuration, "50s", BUILT, node_lifecycle.node_monitor_grace_period,
        "Amount of time which we allow running Node to be unresponsive before marking it unhealthy. Must be N times more than kubelet's nodeStatusUpdateFrequency, where N means number of retries allowed for kubelet to post node status. This value should also be greater than the sum of HTTP2_PING_TIMEOUT_SECONDS and HTTP2_READ_IDLE_TIMEOUT_SECONDS"),
    flag!("node-startup-grace-period", NodeLifecycleController, GoDuration, "1m0s", BUILT, node_lifecycle.node_startup_grace_period,
        "Amount of time which we allow starting Node to be unresponsive before marking it unhealthy."),
    flag!("pod-eviction-timeout", NodeLifecycleController, GoDuration, "5m0s", TAINT_EVICTION, _,
        "Grace period for deleting pods on failed nodes."),
    flag!("secondary-node-eviction-rate", NodeLifecycleController, Float32, "0.01", BUILT, node_lifecycle.secondary_node_eviction_rate,
        "Number of nodes per second on which pods are deleted in case of node failure when a zone is unhealthy (see --unhealthy-zone-threshold for definition of healthy/unhealthy). Zone refers to entire cluster in non-multizone clusters. This value is implicitly overridden to 0 if the cluster size is smaller than --large-cluster-size-threshold."),
    flag!("unhealthy-zone-threshold", NodeLifecycleController, Float32, "0.55", BUILT, node_lifecycle.unhealthy_zone_threshold,
        "Fraction of Nodes in a zone which needs to be not Ready (minimum 3) for zone to be treated as unhealthy. "),
    // Persistent volumes
    flag!("enable-dynamic-provisioning", PersistentVolumeBinderController, Bool, "true", BUILT, persistent_volume.enable_dynamic_provisioning,
        "Enable dynamic provisioning for environments that support it."),
    flag!("enable-hostpath-provisioner", PersistentVolumeBinderController, Bool, "", LATER, persistent_volume.enable_hostpath_provisioner,
        "Enable HostPath PV provisioning when running without a cloud provider. This allows testing and development of provisioning features.  HostPath provisioning is not supported in any way, won't work in a multi-node cluster, and should not be used for anything other than testing or development."),
    flag!("flex-volume-plugin-dir", PersistentVolumeBinderController, Str, "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/", LATER, persistent_volume.flex_volume_plugin_dir,
        "Full path of the directory in which the flex volume plugin should search for additional third party volume plugins."),
    flag!("pv-recycler-increment-timeout-nfs", PersistentVolumeBinderController, Int32, "30", LATER, persistent_volume.recycler.increment_timeout_nfs,
        "the increment of time added per Gi to ActiveDeadlineSeconds for an NFS scrubber pod"),
    flag!("pv-recycler-minimum-timeout-hostpath", PersistentVolumeBinderController, Int32, "60", LATER, persistent_volume.recycler.minimum_timeout_hostpath,
        "The minimum ActiveDeadlineSeconds to use for a HostPath Recycler pod.  This is for development and testing only and will not work in a multi-node cluster."),
    flag!("pv-recycler-minimum-timeout-nfs", PersistentVolumeBinderController, Int32, "300", LATER, persistent_volume.recycler.minimum_timeout_nfs,
        "The minimum ActiveDeadlineSeconds to use for an NFS Recycler pod"),
    flag!("pv-recycler-pod-template-filepath-hostpath", PersistentVolumeBinderController, Str, "", LATER, persistent_volume.recycler.pod_template_hostpath,
        "The file path to a pod definition used as a template for HostPath persistent volume recycling. This is for development and testing only and will not work in a multi-node cluster."),
    flag!("pv-recycler-pod-template-filepath-nfs", PersistentVolumeBinderController, Str, "", LATER, persistent_volume.recycler.pod_template_nfs,
        "The file path to a pod definition used as a template for NFS persistent volume recycling"),
    flag!("pv-recycler-timeout-increment-hostpath", PersistentVolumeBinderController, Int32, "30", LATER, persistent_volume.recycler.increment_timeout_hostpath,
        "the increment of time added per Gi to ActiveDeadlineSeconds for a HostPath scrubber pod.  This is for development and testing only and will not work in a multi-node cluster."),
    flag!("pvclaimbinder-sync-period", PersistentVolumeBinderController, GoDuration, "15s", BUILT, persistent_volume.claim_binder_sync_period,
        "The period for syncing persistent volumes and persistent volume claims"),
    flag!("volume-host-allow-local-loopback", PersistentVolumeBinderController, Bool, "true", NO_OP, _,
        "If false, deny local loopback IPs to volume plugins."),
    flag!("volume-host-cidr-denylist", PersistentVolumeBinderController, Strings, "", NO_OP, _,
        "CIDR ranges volume plugins must not reach."),
    // Remaining controllers
    flag!("terminated-pod-gc-threshold", PodGarbageCollectorController, Int32, "12500", BUILT, pod_gc.terminated_pod_gc_threshold,
        "Number of terminated pods that can exist before the terminated pod garbage collector starts deleting terminated pods. If <= 0, the terminated pod garbage collector is disabled."),
    flag!("concurrent-replicaset-syncs", ReplicaSetController, Int32, "5", BUILT, concurrency.replicaset_syncs,
        "The number of replica sets that are allowed to sync concurrently. Larger number = more responsive replica management, but more CPU (and network) load"),
    flag!("concurrent-rc-syncs", ReplicationControllerController, Int32, "5", BUILT, concurrency.rc_syncs,
        "The number of replication controllers that are allowed to sync concurrently. Larger number = more responsive replica management, but more CPU (and network) load"),
    flag!("concurrent-resource-quota-syncs", ResourceQuotaController, Int32, "5", BUILT, concurrency.resource_quota_syncs,
        "The number of resource quotas that are allowed to sync concurrently. Larger number = more responsive quota management, but more CPU (and network) load"),
    flag!("resource-quota-sync-period", ResourceQuotaController, GoDuration, "5m0s", BUILT, resource_quota.sync_period,
        "The period for syncing quota usage status in the system"),
    flag!("concurrent-serviceaccount-token-syncs", ServiceAccountController, Int32, "5", BUILT, concurrency.serviceaccount_token_syncs,
        "The number of service account token objects that are allowed to sync concurrently. Larger number = more responsive token generation, but more CPU (and network) load"),
    flag!("root-ca-file", ServiceAccountController, Str, "", BUILT, service_account.root_ca_file,
        "If set, this root certificate authority will be included in service account's token secret. This must be a valid PEM-encoded CA bundle."),
    flag!("service-account-private-key-file", ServiceAccountController, Str, "", BUILT, service_account.private_key_file,
        "Enables legacy secret-based tokens when set. Filename containing a PEM-encoded private RSA or ECDSA key used to sign service account tokens."),
    flag!("concurrent-ttl-after-finished-syncs", TtlAfterFinishedController, Int32, "5", BUILT, concurrency.ttl_after_finished_syncs,
        "The number of ttl-after-finished-controller workers that are allowed to sync concurrently."),
    flag!("concurrent-validating-admission-policy-status-syncs", ValidatingAdmissionPolicyStatusController, Int32, "5", BUILT, concurrency.validating_admission_policy_status_syncs,
        "The number of ValidatingAdmissionPolicyStatusController workers that are allowed to sync concurrently."),
    // Metrics
    flag!("allow-metric-labels", Metrics, StringMap, "", LATER, metrics.allow_metric_labels,
        "The map from metric-label to value allow-list of this label. The key's format is <MetricName>,<LabelName>. The value's format is <allowed_value>,<allowed_value>...e.g. metric1,label1='v1,v2,v3', metric1,label2='v1,v2,v3' metric2,label1='v1,v2,v3'."),
    flag!("allow-metric-labels-manifest", Metrics, Str, "", LATER, metrics.allow_metric_labels_manifest,
        "The path to the manifest file that contains the allow-list mapping. The format of the file is the same as the flag --allow-metric-labels, i.e., \nallowListMapping:\n  \"metric1,label1\": \"value11,value12\"\n  \"metric2,label2\": \"\"\nNote that the flag --allow-metric-labels will override the manifest file."),
    flag!("disabled-metrics", Metrics, Strings, "", LATER, metrics.disabled_metrics,
        "This flag provides an escape hatch for misbehaving metrics. You must provide the fully qualified metric name in order to disable it. Disclaimer: disabling metrics is higher in precedence than showing hidden metrics."),
    flag!("show-hidden-metrics-for-version", Metrics, Str, "", LATER, metrics.show_hidden_metrics_for_version,
        "The previous version for which you want to show hidden metrics. Only the previous minor version is meaningful, other values will not be allowed. The format is <major>.<minor>, e.g.: '1.16'. The purpose of this format is make sure you have the opportunity to notice if the next release hides additional metrics, rather than being surprised when they are permanently removed in the release after that."),
    // Logs
    flag!("log-flush-frequency", Logs, GoDuration, "5s", LATER, logs.flush_frequency,
        "Maximum number of seconds between log flushes"),
    flag!("log-json-info-buffer-size", Logs, Quantity, "", LATER, logs.json.info_buffer_size,
        "[Alpha] In JSON format with split output streams, the info messages can be buffered for a while to increase performance. The default value of zero bytes disables buffering. The size can be specified as number of bytes (512), multiples of 1000 (1K), multiples of 1024 (2Ki), or powers of those (3M, 4G, 5Mi, 6Gi). Enable the LoggingAlphaOptions feature gate to use this."),
    flag!("log-json-split-stream", Logs, Bool, "", LATER, logs.json.split_stream,
        "[Alpha] In JSON format, write error messages to stderr and info messages to stdout. The default is to write a single stream to stdout. Enable the LoggingAlphaOptions feature gate to use this."),
    flag!("log-text-info-buffer-size", Logs, Quantity, "", LATER, logs.text.info_buffer_size,
        "[Alpha] In text format with split output streams, the info messages can be buffered for a while to increase performance. The default value of zero bytes disables buffering. The size can be specified as number of bytes (512), multiples of 1000 (1K), multiples of 1024 (2Ki), or powers of those (3M, 4G, 5Mi, 6Gi). Enable the LoggingAlphaOptions feature gate to use this."),
    flag!("log-text-split-stream", Logs, Bool, "", LATER, logs.text.split_stream,
        "[Alpha] In text format, write error messages to stderr and info messages to stdout. The default is to write a single stream to stdout. Enable the LoggingAlphaOptions feature gate to use this."),
    flag!("logging-format", Logs, LogFormat, "text", LATER, logs.format,
        "Sets the log format. Permitted formats: \"json\" (gated by LoggingBetaOptions), \"text\"."),
    FlagSpec {
        shorthand: Some('v'),
        ..flag!("v", Logs, Verbosity, "", BUILT, logs.verbosity,
            "number for the log level verbosity")
    },
    flag!("vmodule", Logs, VModule, "", LATER, logs.vmodule,
        "comma-separated list of pattern=N settings for file-filtered logging (only works for text log format)"),
    // Misc
    flag!("kubeconfig", Misc, Str, "", BUILT, generic.client_connection.kubeconfig,
        "Path to kubeconfig file with authorization and master location information (the master location can be overridden by the master flag)."),
    flag!("master", Misc, Str, "", BUILT, generic.client_connection.master,
        "The address of the Kubernetes API server (overrides any value in kubeconfig)."),
    // Global
    FlagSpec {
        name: "help",
        shorthand: Some('h'),
        group: Group::Global,
        kind: <values::Bool as FlagValue>::KIND,
        default: "",
        status: BUILT,
        help: "help for kube-controller-manager",
        set: |state, raw, mode| values::Bool::assign(&mut state.help, raw, mode),
    },
    FlagSpec {
        name: "version",
        shorthand: None,
        group: Group::Global,
        kind: <values::Version as FlagValue>::KIND,
        default: "",
        status: BUILT,
        help: "--version, --version=raw prints version information and quits; --version=vX.Y.Z... sets the reported version",
        set: |state, raw, mode| values::Version::assign(&mut state.version, raw, mode),
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_lookup_normalizes_underscores() {
        let mut names: Vec<&str> = FLAGS.iter().map(|f| f.name).collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "a flag is in the table twice");
        assert_eq!(lookup("concurrent_rc_syncs").map(|f| f.name), Some("concurrent-rc-syncs"));
        assert!(lookup("nope").is_none());
        assert_eq!(lookup_shorthand('v').map(|f| f.name), Some("v"));
        assert_eq!(lookup_shorthand('h').map(|f| f.name), Some("help"));
    }

    #[test]
    fn every_default_parses_and_durations_are_written_as_go_prints_them() {
        let mut state = default_state();
        for flag in FLAGS.iter().filter(|f| !f.default.is_empty()) {
            let applied = (flag.set)(&mut state, flag.default, SetMode::Default);
            assert_eq!(applied, Ok(()), "--{}", flag.name);
            if flag.kind.type_name == "duration" {
                let parsed = crate::apimachinery::duration::parse_go_duration(flag.default);
                assert_eq!(
                    parsed.map(crate::apimachinery::duration::format_go_duration).as_deref(),
                    Ok(flag.default),
                    "--{}",
                    flag.name
                );
            }
        }
    }

    #[test]
    fn groups_cover_the_table_and_hidden_flags_have_reasons() {
        for flag in FLAGS {
            assert!(Group::ALL.contains(&flag.group));
            assert!(!flag.help.is_empty(), "--{}", flag.name);
        }
        let hidden: Vec<&str> = FLAGS.iter().filter(|f| f.status.hidden()).map(|f| f.name).collect();
        assert_eq!(
            hidden,
            [
                "allow-untagged-cloud",
                "node-sync-period",
                "address",
                "port",
                "horizontal-pod-autoscaler-downscale-delay",
                "horizontal-pod-autoscaler-upscale-delay",
                "enable-taint-manager",
                "pod-eviction-timeout",
                "volume-host-allow-local-loopback",
                "volume-host-cidr-denylist",
            ]
        );
    }
}
