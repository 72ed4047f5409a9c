//! The flag table: every flag of upstream kube-controller-manager v1.33 with its help group,
//! value type, default, help text, implementation status and the field it sets. Parsing,
//! defaults, `--help` and warnings all read this table; a flag's status is changed here only.

use super::options::Options;
use super::values::{self, FlagValue, SetMode, ValueKind, VersionRequest};

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
    pub const ALL: [Group; 36] = [
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
type Setter = fn(&mut ParseState, &str, SetMode) -> Result<(), String>;

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
        "Enable block and mutex contention profiling when profiling is enabled."),
    flag!("profiling", Debugging, Bool, "true", LATER, generic.debugging.profiling,
        "Serve profiling data under host:port/debug/pprof/."),
    // Leader migration
    flag!("enable-leader-migration", LeaderMigration, Bool, "", LATER, generic.leader_migration.enabled,
        "Enable leader migration of controllers between controller managers."),
    flag!("leader-migration-config", LeaderMigration, Str, "", LATER, generic.leader_migration.config_file,
        "Path of the LeaderMigrationConfiguration file (controllermanager.config.k8s.io/v1alpha1); empty means the built-in default configuration."),
    // Generic
    flag!("allocate-node-cidrs", Generic, Bool, "", BUILT, node_ipam.allocate_node_cidrs,
        "Allocate a pod CIDR to every node from --cluster-cidr (the node IPAM controller). Requires --cluster-cidr."),
    flag!("allow-untagged-cloud", Generic, Bool, "", UNTAGGED_CLOUD, _,
        "Allow the cluster to run without the cluster-id on cloud instances."),
    flag!("cidr-allocator-type", Generic, Str, "RangeAllocator", BUILT, node_ipam.cidr_allocator_type,
        "Type of CIDR allocator to use."),
    flag!("cloud-config", Generic, Str, "", CLOUD, cloud.config_file,
        "Path of the cloud provider configuration file; empty for none."),
    flag!("cloud-provider", Generic, Str, "", BUILT, cloud.provider,
        "The cloud provider. Only an empty value (no provider) and \"external\" exist, as upstream removed in-tree providers."),
    flag!("cluster-cidr", Generic, Cidrs, "", BUILT, node_ipam.cluster_cidrs,
        "Pod CIDR range of the cluster (one per IP family, comma-separated). Only used when --allocate-node-cidrs=true."),
    flag!("cluster-name", Generic, Str, "kubernetes", LATER, generic.cluster_name,
        "The instance prefix of the cluster."),
    flag!("configure-cloud-routes", Generic, Bool, "true", CLOUD, cloud.configure_routes,
        "Configure the CIDRs allocated by --allocate-node-cidrs on the cloud provider."),
    flag!("controller-start-interval", Generic, GoDuration, "", LATER, generic.controller_start_interval,
        "Interval between starting controllers."),
    flag!("controllers", Generic, Controllers, "*", BUILT, generic.controllers,
        "A list of controllers to enable. '*' enables all on-by-default controllers, 'foo' enables the controller named 'foo', '-foo' disables the controller named 'foo'."),
    flag!("emulated-version", Generic, EmulatedVersion, "", LATER, generic.emulated_version,
        "The version whose capabilities (APIs, features) to emulate instead of this binary's, as [kube=]MAJOR.MINOR, at most three minors back."),
    flag!("external-cloud-volume-plugin", Generic, Str, "", CLOUD, cloud.external_volume_plugin,
        "The volume plugin to use when the cloud provider is external."),
    flag!("feature-gates", Generic, Gates, "", BUILT, generic.feature_gates,
        "Comma-separated list of [kube:]Name=true|false pairs that turn alpha/beta features on or off. Repeat the flag to add more."),
    flag!("kube-api-burst", Generic, Int32, "30", BUILT, generic.client_connection.burst,
        "Burst of requests to the Kubernetes API server."),
    flag!("kube-api-content-type", Generic, Str, "application/vnd.kubernetes.protobuf", LATER, generic.client_connection.content_type,
        "Content type of requests sent to the API server."),
    flag!("kube-api-qps", Generic, Float32, "20", BUILT, generic.client_connection.qps,
        "Queries per second to the Kubernetes API server."),
    flag!("leader-elect", Generic, Bool, "true", BUILT, generic.leader_election.leader_elect,
        "Run leader election and only work while leading. Enable it when running replicas for high availability."),
    flag!("leader-elect-lease-duration", Generic, GoDuration, "15s", BUILT, generic.leader_election.lease_duration,
        "How long other candidates wait after the last renewal before taking over an unrenewed lease: the longest a stopped leader keeps the lease."),
    flag!("leader-elect-renew-deadline", Generic, GoDuration, "10s", BUILT, generic.leader_election.renew_deadline,
        "How long the leader keeps trying to renew before it stops leading. Must be less than the lease duration."),
    flag!("leader-elect-resource-lock", Generic, Str, "leases", BUILT, generic.leader_election.resource_lock,
        "The kind of object used as the leader election lock. Only 'leases' is supported."),
    flag!("leader-elect-resource-name", Generic, Str, "kube-controller-manager", BUILT, generic.leader_election.resource_name,
        "Name of the leader election lock object."),
    flag!("leader-elect-resource-namespace", Generic, Str, "kube-system", BUILT, generic.leader_election.resource_namespace,
        "Namespace of the leader election lock object."),
    flag!("leader-elect-retry-period", Generic, GoDuration, "2s", BUILT, generic.leader_election.retry_period,
        "How long candidates wait between attempts to acquire or renew the lease."),
    flag!("min-resync-period", Generic, GoDuration, "12h0m0s", BUILT, generic.min_resync_period,
        "Informers resync at a random period between this and twice this."),
    flag!("node-monitor-period", Generic, GoDuration, "5s", BUILT, node_lifecycle.node_monitor_period,
        "Period of checking node status in the node lifecycle controllers."),
    flag!("node-sync-period", Generic, GoDuration, "", NO_OP, _,
        "Period of syncing nodes from the cloud provider."),
    flag!("route-reconciliation-period", Generic, GoDuration, "10s", CLOUD, cloud.route_reconciliation_period,
        "Period of reconciling the routes the cloud provider created for nodes."),
    flag!("use-service-account-credentials", Generic, Bool, "", BUILT, generic.use_service_account_credentials,
        "Give each controller its own service account credentials."),
    // Service load balancer controller (cloud provider only)
    flag!("concurrent-service-syncs", ServiceLbController, Int32, "1", CLOUD, concurrency.service_syncs,
        "Number of services synced concurrently by the cloud service load balancer controller."),
    // Secure serving
    flag!("address", SecureServing, Ip, "", FlagStatus::Removed("insecure serving was removed upstream; use --bind-address"), _,
        "The IP address of the removed insecure port."),
    flag!("bind-address", SecureServing, Ip, "0.0.0.0", BUILT, secure_serving.bind_address,
        "The IP address to listen on for --secure-port. It must be reachable by the rest of the cluster. Empty or an unspecified address (0.0.0.0 or ::) means all interfaces and IP families."),
    flag!("cert-dir", SecureServing, Str, "", BUILT, secure_serving.cert_dir,
        "Directory of the TLS certificates; ignored when --tls-cert-file and --tls-private-key-file are set."),
    flag!("disable-http2-serving", SecureServing, Bool, "", LATER, secure_serving.disable_http2,
        "Disable HTTP/2 serving."),
    flag!("http2-max-streams-per-connection", SecureServing, Int, "", LATER, secure_serving.http2_max_streams_per_connection,
        "Most HTTP/2 streams a client may open on one connection; 0 means the library default."),
    flag!("permit-address-sharing", SecureServing, Bool, "", LATER, secure_serving.permit_address_sharing,
        "Bind with SO_REUSEADDR, so that wildcard and specific addresses can be bound together and sockets in TIME_WAIT do not block binding."),
    flag!("permit-port-sharing", SecureServing, Bool, "", LATER, secure_serving.permit_port_sharing,
        "Bind with SO_REUSEPORT, so that several instances can bind the same address and port."),
    flag!("port", SecureServing, Port, "", FlagStatus::Removed("insecure serving was removed upstream; use --secure-port"), _,
        "The removed insecure HTTP port."),
    flag!("secure-port", SecureServing, Port, "10257", BUILT, secure_serving.port,
        "The port to serve HTTPS with authentication and authorization on; 0 disables HTTPS."),
    flag!("tls-cert-file", SecureServing, Str, "", BUILT, secure_serving.tls_cert_file,
        "File with the x509 certificate for HTTPS (CA certificates after the server certificate). Without it and --tls-private-key-file a self-signed pair is generated in --cert-dir."),
    flag!("tls-cipher-suites", SecureServing, CipherSuites, "", BUILT, secure_serving.tls_cipher_suites,
        "Comma-separated cipher suites of the server (Go's names); empty means Go's defaults."),
    flag!("tls-min-version", SecureServing, TlsVersion, "", BUILT, secure_serving.tls_min_version,
        "Minimum TLS version: VersionTLS10, VersionTLS11, VersionTLS12 or VersionTLS13."),
    flag!("tls-private-key-file", SecureServing, Str, "", BUILT, secure_serving.tls_private_key_file,
        "File with the x509 private key matching --tls-cert-file."),
    flag!("tls-sni-cert-key", SecureServing, NamedCertKeys, "", LATER, secure_serving.sni_cert_keys,
        "A certificate and key file pair, optionally followed by domain patterns, served by SNI: \"foo.crt,foo.key:*.foo.com,foo.com\". Repeat the flag for more pairs."),
    // Authentication
    flag!("authentication-kubeconfig", Authentication, Str, "", BUILT, authentication.kubeconfig,
        "kubeconfig of the core API server allowed to create tokenreviews.authentication.k8s.io. Optional: without it tokens are anonymous and no client CA is looked up."),
    flag!("authentication-skip-lookup", Authentication, Bool, "", BUILT, authentication.skip_lookup,
        "If false, the authentication-kubeconfig will be used to lookup missing authentication configuration from the cluster."),
    flag!("authentication-token-webhook-cache-ttl", Authentication, GoDuration, "10s", BUILT, authentication.token_webhook_cache_ttl,
        "How long to cache token review answers."),
    flag!("authentication-tolerate-lookup-failure", Authentication, Bool, "", BUILT, authentication.tolerate_lookup_failure,
        "Keep running when the authentication configuration cannot be looked up in the cluster (requests may then be anonymous)."),
    flag!("client-ca-file", Authentication, Str, "", BUILT, authentication.client_ca_file,
        "CA bundle: a client certificate signed by it authenticates as its CommonName."),
    flag!("requestheader-allowed-names", Authentication, Strings, "", BUILT, authentication.requestheader_allowed_names,
        "Client certificate common names allowed to pass user names in request headers; empty allows any certificate signed by --requestheader-client-ca-file."),
    flag!("requestheader-client-ca-file", Authentication, Str, "", BUILT, authentication.requestheader_client_ca_file,
        "CA bundle that must sign the client certificate of a proxy before the user names in its request headers are trusted."),
    flag!("requestheader-extra-headers-prefix", Authentication, Strings, "x-remote-extra-", BUILT, authentication.requestheader_extra_headers_prefix,
        "Request header prefixes of extra user information."),
    flag!("requestheader-group-headers", Authentication, Strings, "x-remote-group", BUILT, authentication.requestheader_group_headers,
        "Request headers carrying the user's groups."),
    flag!("requestheader-uid-headers", Authentication, Strings, "", BUILT, authentication.requestheader_uid_headers,
        "Request headers carrying the user's UID (X-Remote-Uid is usual)."),
    flag!("requestheader-username-headers", Authentication, Strings, "x-remote-user", BUILT, authentication.requestheader_username_headers,
        "Request headers carrying the user name."),
    // Authorization
    flag!("authorization-always-allow-paths", Authorization, Strings, "/healthz,/readyz,/livez", BUILT, authorization.always_allow_paths,
        "HTTP paths authorized without asking the core API server."),
    flag!("authorization-kubeconfig", Authorization, Str, "", BUILT, authorization.kubeconfig,
        "kubeconfig of the core API server allowed to create subjectaccessreviews.authorization.k8s.io. Optional: without it every request not on an always-allowed path is forbidden."),
    flag!("authorization-webhook-cache-authorized-ttl", Authorization, GoDuration, "10s", BUILT, authorization.webhook_cache_authorized_ttl,
        "How long to cache 'authorized' answers."),
    flag!("authorization-webhook-cache-unauthorized-ttl", Authorization, GoDuration, "10s", BUILT, authorization.webhook_cache_unauthorized_ttl,
        "How long to cache 'unauthorized' answers."),
    // persistentvolume-attach-detach-controller
    flag!("attach-detach-reconcile-sync-period", AttachDetachController, GoDuration, "1m0s", BUILT, attach_detach.reconcile_sync_period,
        "Wait between reconciliations of volume attachments; at least one second. Raising it may leave volumes mismatched with pods longer."),
    flag!("disable-attach-detach-reconcile-sync", AttachDetachController, Bool, "", BUILT, attach_detach.disable_reconcile_sync,
        "Disable the reconciliation of volume attachments (volumes may stay mismatched with pods)."),
    flag!("disable-force-detach-on-timeout", AttachDetachController, Bool, "", BUILT, attach_detach.disable_force_detach_on_timeout,
        "Never force-detach volumes after the maximum unmount time; node failures then need the non-graceful node shutdown procedure."),
    // certificatesigningrequest-signing-controller
    flag!("cluster-signing-cert-file", CsrSigningController, Str, "", BUILT, csr_signing.cluster.cert_file,
        "PEM X509 CA certificate that issues cluster-scoped certificates. When set, no per-signer --cluster-signing-* file may be set."),
    flag!("cluster-signing-duration", CsrSigningController, GoDuration, "8760h0m0s", BUILT, csr_signing.duration,
        "Longest validity of signed certificates; a CSR may ask for less with spec.expirationSeconds."),
    flag!("cluster-signing-key-file", CsrSigningController, Str, "", BUILT, csr_signing.cluster.key_file,
        "PEM RSA or ECDSA private key that signs cluster-scoped certificates. When set, no per-signer --cluster-signing-* file may be set."),
    flag!("cluster-signing-kube-apiserver-client-cert-file", CsrSigningController, Str, "", BUILT, csr_signing.kube_apiserver_client.cert_file,
        "PEM X509 CA certificate of the kubernetes.io/kube-apiserver-client signer; excludes --cluster-signing-{cert,key}-file."),
    flag!("cluster-signing-kube-apiserver-client-key-file", CsrSigningController, Str, "", BUILT, csr_signing.kube_apiserver_client.key_file,
        "PEM private key of the kubernetes.io/kube-apiserver-client signer; excludes --cluster-signing-{cert,key}-file."),
    flag!("cluster-signing-kubelet-client-cert-file", CsrSigningController, Str, "", BUILT, csr_signing.kubelet_client.cert_file,
        "PEM X509 CA certificate of the kubernetes.io/kube-apiserver-client-kubelet signer; excludes --cluster-signing-{cert,key}-file."),
    flag!("cluster-signing-kubelet-client-key-file", CsrSigningController, Str, "", BUILT, csr_signing.kubelet_client.key_file,
        "PEM private key of the kubernetes.io/kube-apiserver-client-kubelet signer; excludes --cluster-signing-{cert,key}-file."),
    flag!("cluster-signing-kubelet-serving-cert-file", CsrSigningController, Str, "", BUILT, csr_signing.kubelet_serving.cert_file,
        "PEM X509 CA certificate of the kubernetes.io/kubelet-serving signer; excludes --cluster-signing-{cert,key}-file."),
    flag!("cluster-signing-kubelet-serving-key-file", CsrSigningController, Str, "", BUILT, csr_signing.kubelet_serving.key_file,
        "PEM private key of the kubernetes.io/kubelet-serving signer; excludes --cluster-signing-{cert,key}-file."),
    flag!("cluster-signing-legacy-unknown-cert-file", CsrSigningController, Str, "", BUILT, csr_signing.legacy_unknown.cert_file,
        "PEM X509 CA certificate of the kubernetes.io/legacy-unknown signer; excludes --cluster-signing-{cert,key}-file."),
    flag!("cluster-signing-legacy-unknown-key-file", CsrSigningController, Str, "", BUILT, csr_signing.legacy_unknown.key_file,
        "PEM private key of the kubernetes.io/legacy-unknown signer; excludes --cluster-signing-{cert,key}-file."),
    // Workload controllers
    flag!("concurrent-deployment-syncs", DeploymentController, Int32, "5", BUILT, concurrency.deployment_syncs,
        "Number of deployments synced concurrently. More is more responsive but uses more CPU and network."),
    flag!("concurrent-statefulset-syncs", StatefulSetController, Int32, "5", BUILT, concurrency.statefulset_syncs,
        "Number of stateful sets synced concurrently. More is more responsive but uses more CPU and network."),
    flag!("concurrent-daemonset-syncs", DaemonSetController, Int32, "2", BUILT, concurrency.daemonset_syncs,
        "Number of daemon sets synced concurrently. More is more responsive but uses more CPU and network."),
    // Endpoints
    flag!("concurrent-endpoint-syncs", EndpointsController, Int32, "5", BUILT, concurrency.endpoint_syncs,
        "Number of Endpoints synced concurrently. More updates endpoints faster but uses more CPU and network."),
    flag!("endpoint-updates-batch-period", EndpointsController, GoDuration, "", BUILT, endpoints.endpoint_updates_batch_period,
        "Delay pod changes by this much to batch them into fewer Endpoints updates."),
    flag!("concurrent-service-endpoint-syncs", EndpointSliceController, Int32, "5", BUILT, concurrency.service_endpoint_syncs,
        "Number of services whose EndpointSlices are synced concurrently (1 to 50)."),
    flag!("endpointslice-updates-batch-period", EndpointSliceController, GoDuration, "", BUILT, endpoints.endpointslice_updates_batch_period,
        "Delay pod changes by this much to batch them into fewer EndpointSlice updates."),
    flag!("max-endpoints-per-slice", EndpointSliceController, Int32, "100", BUILT, endpoints.max_endpoints_per_slice,
        "Most endpoints in one EndpointSlice (1 to 1000)."),
    flag!("mirroring-concurrent-service-endpoint-syncs", EndpointSliceMirroringController, Int32, "5", BUILT, concurrency.mirroring_service_endpoint_syncs,
        "Number of services whose Endpoints are mirrored to EndpointSlices concurrently (1 to 50)."),
    flag!("mirroring-endpointslice-updates-batch-period", EndpointSliceMirroringController, GoDuration, "", BUILT, endpoints.mirroring_updates_batch_period,
        "Delay Endpoints changes by this much to batch them into fewer mirrored EndpointSlice updates."),
    flag!("mirroring-max-endpoints-per-subset", EndpointSliceMirroringController, Int32, "1000", BUILT, endpoints.mirroring_max_endpoints_per_subset,
        "Most endpoints the mirroring controller puts in one EndpointSlice (1 to 1000)."),
    // Other controllers
    flag!("concurrent-ephemeralvolume-syncs", EphemeralVolumeController, Int32, "5", BUILT, concurrency.ephemeral_volume_syncs,
        "Number of ephemeral volumes synced concurrently (at least 1)."),
    flag!("concurrent-gc-syncs", GarbageCollectorController, Int32, "20", BUILT, concurrency.gc_syncs,
        "Number of garbage collector workers."),
    flag!("enable-garbage-collector", GarbageCollectorController, Bool, "true", BUILT, garbage_collector.enabled,
        "Enable the garbage collector. Must match the kube-apiserver setting."),
    flag!("concurrent-horizontal-pod-autoscaler-syncs", HorizontalPodAutoscalerController, Int32, "5", BUILT, concurrency.horizontal_pod_autoscaler_syncs,
        "Number of horizontal pod autoscalers synced concurrently (at least 1)."),
    flag!("horizontal-pod-autoscaler-cpu-initialization-period", HorizontalPodAutoscalerController, GoDuration, "5m0s", BUILT, hpa.cpu_initialization_period,
        "After a pod starts, CPU samples may be skipped for this long."),
    flag!("horizontal-pod-autoscaler-downscale-delay", HorizontalPodAutoscalerController, GoDuration, "5m0s", NO_OP, _,
        "Wait after a downscale before the next one."),
    flag!("horizontal-pod-autoscaler-downscale-stabilization", HorizontalPodAutoscalerController, GoDuration, "5m0s", BUILT, hpa.downscale_stabilization,
        "The autoscaler never scales below the highest recommendation of this past period."),
    flag!("horizontal-pod-autoscaler-initial-readiness-delay", HorizontalPodAutoscalerController, GoDuration, "30s", BUILT, hpa.initial_readiness_delay,
        "After a pod starts, readiness changes count as initial readiness for this long."),
    flag!("horizontal-pod-autoscaler-sync-period", HorizontalPodAutoscalerController, GoDuration, "15s", BUILT, hpa.sync_period,
        "Period of syncing the pod counts of horizontal pod autoscalers."),
    flag!("horizontal-pod-autoscaler-tolerance", HorizontalPodAutoscalerController, Float64, "0.1", BUILT, hpa.tolerance,
        "Smallest change (from 1.0) of the desired-to-actual metrics ratio that makes the autoscaler scale."),
    flag!("horizontal-pod-autoscaler-upscale-delay", HorizontalPodAutoscalerController, GoDuration, "3m0s", NO_OP, _,
        "Wait after an upscale before the next one."),
    flag!("concurrent-job-syncs", JobController, Int32, "5", BUILT, concurrency.job_syncs,
        "Number of jobs synced concurrently (at least 1)."),
    flag!("concurrent-cron-job-syncs", CronJobController, Int32, "5", BUILT, concurrency.cron_job_syncs,
        "Number of cron jobs synced concurrently (at least 1)."),
    flag!("legacy-service-account-token-clean-up-period", LegacyServiceAccountTokenCleanerController, GoDuration, "8760h0m0s", BUILT, service_account.legacy_token_clean_up_period,
        "How long after its last use a legacy service account token may be deleted."),
    flag!("concurrent-namespace-syncs", NamespaceController, Int32, "10", BUILT, concurrency.namespace_syncs,
        "Number of namespaces synced concurrently. More terminates namespaces faster but uses more CPU and network."),
    flag!("namespace-sync-period", NamespaceController, GoDuration, "5m0s", BUILT, namespace.sync_period,
        "Period of syncing namespace lifecycle updates."),
    // Node IPAM
    flag!("node-cidr-mask-size", NodeIpamController, Int32, "", BUILT, node_ipam.node_cidr_mask_size,
        "Prefix length of node pod CIDRs; 24 for IPv4 and 64 for IPv6 when unset. Not allowed with a dual-stack --cluster-cidr."),
    flag!("node-cidr-mask-size-ipv4", NodeIpamController, Int32, "", BUILT, node_ipam.node_cidr_mask_size_ipv4,
        "Prefix length of IPv4 node pod CIDRs; 24 when unset."),
    flag!("node-cidr-mask-size-ipv6", NodeIpamController, Int32, "", BUILT, node_ipam.node_cidr_mask_size_ipv6,
        "Prefix length of IPv6 node pod CIDRs; 64 when unset."),
    flag!("service-cluster-ip-range", NodeIpamController, Cidrs, "", BUILT, node_ipam.service_cidrs,
        "Service CIDR range of the cluster (one per IP family, comma-separated). Only used when --allocate-node-cidrs=true."),
    // Node lifecycle
    flag!("enable-taint-manager", NodeLifecycleController, Bool, "true",
        FlagStatus::Removed("taint-based eviction is always on (the taint eviction controller)"), _,
        "Evict pods of failed nodes through NoExecute taints."),
    flag!("large-cluster-size-threshold", NodeLifecycleController, Int32, "50", BUILT, node_lifecycle.large_cluster_size_threshold,
        "Zones with more nodes than this count as large for eviction; in smaller ones --secondary-node-eviction-rate is 0. Applies to each zone separately."),
    flag!("node-eviction-rate", NodeLifecycleController, Float32, "0.1", BUILT, node_lifecycle.node_eviction_rate,
        "Nodes per second whose pods are evicted after node failures while the zone is healthy (see --unhealthy-zone-threshold)."),
    flag!("node-monitor-grace-period", NodeLifecycleController, GoDuration, "50s", BUILT, node_lifecycle.node_monitor_grace_period,
        "How long a running node may be unresponsive before it is marked unhealthy. Must be several times the kubelet's node status update frequency."),
    flag!("node-startup-grace-period", NodeLifecycleController, GoDuration, "1m0s", BUILT, node_lifecycle.node_startup_grace_period,
        "How long a starting node may be unresponsive before it is marked unhealthy."),
    flag!("pod-eviction-timeout", NodeLifecycleController, GoDuration, "5m0s", TAINT_EVICTION, _,
        "Grace period for deleting pods on failed nodes."),
    flag!("secondary-node-eviction-rate", NodeLifecycleController, Float32, "0.01", BUILT, node_lifecycle.secondary_node_eviction_rate,
        "Nodes per second whose pods are evicted after node failures while the zone is unhealthy; 0 in zones no larger than --large-cluster-size-threshold."),
    flag!("unhealthy-zone-threshold", NodeLifecycleController, Float32, "0.55", BUILT, node_lifecycle.unhealthy_zone_threshold,
        "Fraction of not-ready nodes (at least 3) that makes a zone unhealthy."),
    // Persistent volumes
    flag!("enable-dynamic-provisioning", PersistentVolumeBinderController, Bool, "true", BUILT, persistent_volume.enable_dynamic_provisioning,
        "Enable dynamic provisioning where the environment supports it."),
    flag!("enable-hostpath-provisioner", PersistentVolumeBinderController, Bool, "", LATER, persistent_volume.enable_hostpath_provisioner,
        "Provision HostPath volumes without a cloud provider. For single-node testing and development only."),
    flag!("flex-volume-plugin-dir", PersistentVolumeBinderController, Str, "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/", LATER, persistent_volume.flex_volume_plugin_dir,
        "Directory searched for third-party FlexVolume plugins."),
    flag!("pv-recycler-increment-timeout-nfs", PersistentVolumeBinderController, Int32, "30", LATER, persistent_volume.recycler.increment_timeout_nfs,
        "Seconds per GiB added to the ActiveDeadlineSeconds of an NFS recycler pod."),
    flag!("pv-recycler-minimum-timeout-hostpath", PersistentVolumeBinderController, Int32, "60", LATER, persistent_volume.recycler.minimum_timeout_hostpath,
        "Minimum ActiveDeadlineSeconds of a HostPath recycler pod. For single-node testing and development only."),
    flag!("pv-recycler-minimum-timeout-nfs", PersistentVolumeBinderController, Int32, "300", LATER, persistent_volume.recycler.minimum_timeout_nfs,
        "Minimum ActiveDeadlineSeconds of an NFS recycler pod."),
    flag!("pv-recycler-pod-template-filepath-hostpath", PersistentVolumeBinderController, Str, "", LATER, persistent_volume.recycler.pod_template_hostpath,
        "Pod definition used as the template of HostPath volume recycling. For single-node testing and development only."),
    flag!("pv-recycler-pod-template-filepath-nfs", PersistentVolumeBinderController, Str, "", LATER, persistent_volume.recycler.pod_template_nfs,
        "Pod definition used as the template of NFS volume recycling."),
    flag!("pv-recycler-timeout-increment-hostpath", PersistentVolumeBinderController, Int32, "30", LATER, persistent_volume.recycler.increment_timeout_hostpath,
        "Seconds per GiB added to the ActiveDeadlineSeconds of a HostPath recycler pod. For single-node testing and development only."),
    flag!("pvclaimbinder-sync-period", PersistentVolumeBinderController, GoDuration, "15s", BUILT, persistent_volume.claim_binder_sync_period,
        "Period of syncing persistent volumes and claims."),
    flag!("volume-host-allow-local-loopback", PersistentVolumeBinderController, Bool, "true", NO_OP, _,
        "If false, deny local loopback IPs to volume plugins."),
    flag!("volume-host-cidr-denylist", PersistentVolumeBinderController, Strings, "", NO_OP, _,
        "CIDR ranges volume plugins must not reach."),
    // Remaining controllers
    flag!("terminated-pod-gc-threshold", PodGarbageCollectorController, Int32, "12500", BUILT, pod_gc.terminated_pod_gc_threshold,
        "Number of terminated pods kept before the pod garbage collector deletes terminated pods; 0 or less disables that."),
    flag!("concurrent-replicaset-syncs", ReplicaSetController, Int32, "5", BUILT, concurrency.replicaset_syncs,
        "Number of replica sets synced concurrently. More is more responsive but uses more CPU and network."),
    flag!("concurrent-rc-syncs", ReplicationControllerController, Int32, "5", BUILT, concurrency.rc_syncs,
        "Number of replication controllers synced concurrently. More is more responsive but uses more CPU and network."),
    flag!("concurrent-resource-quota-syncs", ResourceQuotaController, Int32, "5", BUILT, concurrency.resource_quota_syncs,
        "Number of resource quotas synced concurrently. More is more responsive but uses more CPU and network."),
    flag!("resource-quota-sync-period", ResourceQuotaController, GoDuration, "5m0s", BUILT, resource_quota.sync_period,
        "Period of syncing quota usage."),
    flag!("concurrent-serviceaccount-token-syncs", ServiceAccountController, Int32, "5", BUILT, concurrency.serviceaccount_token_syncs,
        "Number of service account token objects synced concurrently."),
    flag!("root-ca-file", ServiceAccountController, Str, "", BUILT, service_account.root_ca_file,
        "PEM CA bundle added to service account token Secrets."),
    flag!("service-account-private-key-file", ServiceAccountController, Str, "", BUILT, service_account.private_key_file,
        "PEM RSA or ECDSA private key that signs legacy service account tokens; setting it enables legacy Secret-based tokens."),
    flag!("concurrent-ttl-after-finished-syncs", TtlAfterFinishedController, Int32, "5", BUILT, concurrency.ttl_after_finished_syncs,
        "Number of workers of the TTL-after-finished controller."),
    flag!("concurrent-validating-admission-policy-status-syncs", ValidatingAdmissionPolicyStatusController, Int32, "5", BUILT, concurrency.validating_admission_policy_status_syncs,
        "Number of ValidatingAdmissionPolicy status workers (at least 1)."),
    // Metrics
    flag!("allow-metric-labels", Metrics, StringMap, "", LATER, metrics.allow_metric_labels,
        "Allowed values of metric labels: 'metric,label' keys to comma-separated values, e.g. metric1,label1='v1,v2,v3'."),
    flag!("allow-metric-labels-manifest", Metrics, Str, "", LATER, metrics.allow_metric_labels_manifest,
        "File with the --allow-metric-labels mapping; the flag overrides it."),
    flag!("disabled-metrics", Metrics, Strings, "", LATER, metrics.disabled_metrics,
        "Fully qualified names of metrics to disable; this wins over showing hidden metrics."),
    flag!("show-hidden-metrics-for-version", Metrics, Str, "", LATER, metrics.show_hidden_metrics_for_version,
        "The previous minor version (1.32) whose hidden metrics to show again."),
    // Logs
    flag!("log-flush-frequency", Logs, GoDuration, "5s", LATER, logs.flush_frequency,
        "Longest time between log flushes."),
    flag!("log-json-info-buffer-size", Logs, Quantity, "", LATER, logs.json.info_buffer_size,
        "[Alpha] Bytes of info messages to buffer in JSON format with split streams (512, 1k, 2Ki, ...); 0 disables buffering. Needs the LoggingAlphaOptions feature gate."),
    flag!("log-json-split-stream", Logs, Bool, "", LATER, logs.json.split_stream,
        "[Alpha] In JSON format, write errors to stderr and info to stdout. Needs the LoggingAlphaOptions feature gate."),
    flag!("log-text-info-buffer-size", Logs, Quantity, "", LATER, logs.text.info_buffer_size,
        "[Alpha] Bytes of info messages to buffer in text format with split streams (512, 1k, 2Ki, ...); 0 disables buffering. Needs the LoggingAlphaOptions feature gate."),
    flag!("log-text-split-stream", Logs, Bool, "", LATER, logs.text.split_stream,
        "[Alpha] In text format, write errors to stderr and info to stdout. Needs the LoggingAlphaOptions feature gate."),
    flag!("logging-format", Logs, LogFormat, "text", LATER, logs.format,
        "Log format: \"text\", or \"json\" (needs the LoggingBetaOptions feature gate, on by default)."),
    FlagSpec {
        shorthand: Some('v'),
        ..flag!("v", Logs, Verbosity, "", BUILT, logs.verbosity,
            "Log verbosity level.")
    },
    flag!("vmodule", Logs, VModule, "", LATER, logs.vmodule,
        "Comma-separated pattern=N settings for per-file verbosity (text format only)."),
    // Misc
    flag!("kubeconfig", Misc, Str, "", BUILT, generic.client_connection.kubeconfig,
        "Path to the kubeconfig with the API server location and credentials (--master overrides the location)."),
    flag!("master", Misc, Str, "", BUILT, generic.client_connection.master,
        "Address of the Kubernetes API server; overrides the kubeconfig."),
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
