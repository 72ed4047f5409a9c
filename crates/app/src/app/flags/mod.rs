//! The command line of kube-controller-manager: every flag of upstream v1.36 with its name,
//! type, default and help text, parsed the way upstream's pflag does it.
//!
//! - [`parse`] turns the arguments into a [`Command`]: help text, version text, or typed
//!   [`Options`] checked like upstream's `Validate()`.
//! - [`FLAGS`] is the single table of flags (see `table.rs`): each flag's [`FlagStatus`] says
//!   whether this implementation acts on it yet, and [`Options::warnings`] reports explicitly
//!   set flags that have no effect.
//!
//! Syntax, as pflag: `--flag=value` and `--flag value`; booleans as `--flag` or
//! `--flag=false` (`--flag false` leaves `false` as a positional argument, which is refused);
//! `-v 2`, `-v=2`, `-v2` and `--v=2`; `_` and `-` are the same in names; `--` ends the flags.

mod compatibility;
mod feature_gates;
#[cfg(test)]
mod fuzz_tests;
mod help;
mod options;
mod table;
pub(crate) mod validate;
mod values;

use std::ffi::OsString;

use lexopt::Arg;

pub use crate::apimachinery::duration::{format_go_duration, parse_go_duration};
pub use crate::apimachinery::version::KUBERNETES_RELEASE;
pub use compatibility::{Compatibility, CompatibilityError};
pub use feature_gates::{FeatureGateError, FeatureGates};
pub use options::{
    AttachDetachOptions, AuthenticationOptions, AuthorizationOptions, ClientConnection, CloudOptions,
    ConcurrencyOptions, CsrSigningOptions, Debugging, EndpointsOptions, GarbageCollectorOptions, GenericOptions,
    HpaOptions, LeaderElection, LeaderMigration, LogStreamOptions, LogsOptions, MetricsOptions, NamespaceOptions,
    NodeIpamOptions, NodeLifecycleOptions, Options, PersistentVolumeOptions, PodGcOptions, RecyclerOptions,
    ResourceQuotaOptions, SecureServingOptions, ServiceAccountOptions, SignerFiles,
};
pub use table::{FLAGS, FlagSpec, FlagStatus, Group, lookup};
pub use validate::{ValidationError, node_cidr_mask_sizes};
pub use values::{Cidr, KUBE_VERSION, KubeVersion, NamedCertKey, VModuleItem, ValueError, ValueKind};

use table::ParseState;
use values::{SetMode, VersionRequest};

/// What the command line asks for.
#[derive(Debug)]
pub enum Command {
    /// `--help`/`-h`: print this text to stdout and exit 0.
    Help(String),
    /// `--version`: print this text to stdout and exit 0.
    Version(String),
    /// Run the controller manager with these options.
    Run(Box<Options>),
}

/// A command line that cannot be run. Its `Display` is one line naming the flag and the problem.
#[derive(Debug, thiserror::Error)]
pub enum FlagError {
    /// `--foo` is not a flag (`unknown flag: --foo`).
    #[error("unknown flag: {}", one_line(.0))]
    UnknownFlag(String),
    /// `-x` is not a one-letter flag.
    #[error("unknown shorthand flag: '{}' in -{}", .letter.escape_debug(), one_line(.rest))]
    UnknownShorthand {
        /// The letter that names no flag.
        letter: char,
        /// The argument from that letter on (`x` of `-x`, `xy` of `-hxy`).
        rest: String,
    },
    /// Dashes that do not form a flag (`---x`, `--=x`).
    #[error("bad flag syntax: {}", one_line(.0))]
    BadSyntax(String),
    /// An argument the command line reader cannot take apart.
    #[error("bad flag syntax: {}", one_line(&.0.to_string()))]
    Unreadable(#[source] lexopt::Error),
    /// A flag that takes a value was last on the line (`--kubeconfig` or `'v' in -v`).
    #[error("flag needs an argument: {0}")]
    MissingValue(String),
    /// A value the flag's type refuses.
    #[error("invalid argument {} for \"{flag}\" flag: {reason}", values::go_quote(.value))]
    InvalidValue {
        /// The flag as pflag names it: `--kube-api-qps`, `-v, --v`.
        flag: String,
        /// The value as given.
        value: String,
        /// Why the type refuses it (`not a number`).
        #[source]
        reason: ValueError,
    },
    /// Arguments that are not flags; the controller manager takes none.
    #[error(
        "\"kube-controller-manager\" does not take any arguments, got [{}]",
        .0.iter().map(|a| values::go_quote(a)).collect::<Vec<_>>().join(" ")
    )]
    UnexpectedArguments(Vec<String>),
    /// A value of one of upstream's string-typed flags, which upstream refuses only after
    /// parsing, by validation: the problem alone, without the flag.
    #[error("{0}")]
    Value(#[source] ValueError),
    /// `--emulated-version` or `--min-compatibility-version` refused.
    #[error("{0}")]
    Compatibility(#[from] CompatibilityError),
    /// `--feature-gates` refused at the emulated version.
    #[error("{0}")]
    FeatureGates(#[from] FeatureGateError),
    /// Flags that parse but do not fit together (or a value outside what upstream allows).
    #[error("{0}")]
    Invalid(#[from] ValidationError),
}

impl FlagError {
    /// Whether pflag itself refuses the line (upstream then prints its usage before the
    /// error), rather than cobra's argument check or the validation that follows parsing.
    pub fn is_parse_error(&self) -> bool {
        match self {
            FlagError::UnknownFlag(_)
            | FlagError::UnknownShorthand { .. }
            | FlagError::BadSyntax(_)
            | FlagError::Unreadable(_)
            | FlagError::MissingValue(_) => true,
            FlagError::InvalidValue { flag, .. } => pflag_refuses_values_of(flag),
            FlagError::UnexpectedArguments(_)
            | FlagError::Value(_)
            | FlagError::Compatibility(_)
            | FlagError::FeatureGates(_)
            | FlagError::Invalid(_) => false,
        }
    }
}

/// Whether pflag parses the values of `flag` (`--kube-api-qps`, `-v, --v`) and so refuses a
/// bad one itself. Upstream's string-typed flags (`--controllers`, `--cluster-cidr`,
/// `--feature-gates`, …) take any text; their values are refused later, by validation, where
/// we refuse them while parsing.
fn pflag_refuses_values_of(flag: &str) -> bool {
    let name = flag.rsplit("--").next().unwrap_or(flag);
    lookup(name)
        .is_none_or(|spec| !matches!(spec.kind.type_name, "string" | "strings" | "colonSeparatedMultimapStringString"))
}

/// How upstream reports a refused command line before it exits 1 (component-base's `cli.Run`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Written to stderr as it is: for a line pflag refuses, cobra's usage, a blank line and
    /// `Error: …`; for positional arguments, `Error: …` alone.
    Printed(String),
    /// Logged as a klog error line, logging being set up by then: the checks after parsing
    /// (`"command failed" err="…"`).
    Logged(String),
}

/// How upstream reports `error`.
pub fn refusal(error: &FlagError) -> Refusal {
    match error {
        e if e.is_parse_error() => Refusal::Printed(format!("{}\nError: {e}\n", help::usage_text())),
        FlagError::UnexpectedArguments(_) => Refusal::Printed(format!("Error: {error}\n")),
        e => Refusal::Logged(format!("\"command failed\" err={}", values::go_quote(&e.to_string()))),
    }
}

/// Escapes control characters of argument text so that an error stays on one line.
fn one_line(text: &str) -> String {
    let mut line = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            line.extend(c.escape_default());
        } else {
            line.push(c);
        }
    }
    line
}

/// `--version`: `Kubernetes v1.36.2`, the release whose controller manager this one matches, as
/// upstream's `verflag` prints it.
pub fn version_string() -> String {
    format!("Kubernetes {}", KUBERNETES_RELEASE.git_version())
}

/// `os/arch` as Go names them (`linux/amd64`).
pub fn go_platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    format!("{}/{arch}", std::env::consts::OS)
}

/// `--version=raw`: upstream's `version.Info` struct as Go's `%#v` prints it; what a Go build
/// stamps (commit, tree state, build date, Go version) is empty, the compiler is rustc.
fn raw_version_string() -> String {
    let r = KUBERNETES_RELEASE;
    format!(
        "version.Info{{Major:\"{}\", Minor:\"{}\", EmulationMajor:\"\", EmulationMinor:\"\", \
         MinCompatibilityMajor:\"\", MinCompatibilityMinor:\"\", GitVersion:\"{}\", GitCommit:\"\", \
         GitTreeState:\"\", BuildDate:\"\", GoVersion:\"\", Compiler:\"rustc\", Platform:\"{}\"}}",
        r.major,
        r.minor,
        r.git_version(),
        go_platform()
    )
}

/// Parses the arguments after the program name (`std::env::args_os().skip(1)`).
///
/// Errors in flag syntax or values come first, then `--help`, then positional arguments,
/// then the emulated version and the feature gates, then `--version`, then the checks across
/// flags: the order in which upstream reports them.
pub fn parse<I: IntoIterator<Item = OsString>>(args: I) -> Result<Command, FlagError> {
    let mut state = table::default_state();
    let mut positional = Vec::new();
    let mut parser = lexopt::Parser::from_args(args);
    // The argument being read and, inside `-abc`, the byte where the current letter starts:
    // pflag's messages quote the argument from the offending letter on.
    let mut arg_text = String::new();
    let mut short_pos = 1;
    // The first value refused after parsing upstream (a string-typed flag's): reported once
    // every argument is parsed, as upstream reports it.
    let mut refused_later = None;
    loop {
        if let Some(raw) = parser.try_raw_args() {
            arg_text = raw.peek().map(|a| a.to_string_lossy().into_owned()).unwrap_or_default();
            short_pos = 1;
        }
        let arg = match parser.next() {
            Ok(Some(arg)) => arg,
            Ok(None) => break,
            Err(e) => return Err(FlagError::Unreadable(e)),
        };
        match arg {
            Arg::Long(name) => {
                if name.is_empty() || name.starts_with('-') {
                    return Err(FlagError::BadSyntax(arg_text));
                }
                let flag = table::lookup(name).ok_or_else(|| FlagError::UnknownFlag(format!("--{name}")))?;
                let missing = format!("--{}", flag.name);
                let applied = take_value(&mut parser, flag, true, missing).and_then(|v| set(&mut state, flag, &v));
                defer_validation(applied, &mut refused_later)?;
            }
            Arg::Short(letter) => {
                let rest = arg_text.get(short_pos..).unwrap_or_default().to_string();
                short_pos += letter.len_utf8();
                let flag = table::lookup_shorthand(letter)
                    .ok_or_else(|| FlagError::UnknownShorthand { letter, rest: rest.clone() })?;
                // A one-letter boolean takes a value only as `-h=false`; `-hv2` is `-h -v2`.
                let attached = arg_text.get(short_pos..).is_some_and(|r| r.starts_with('='));
                let missing = format!("'{letter}' in -{rest}");
                let applied = take_value(&mut parser, flag, attached, missing).and_then(|v| set(&mut state, flag, &v));
                defer_validation(applied, &mut refused_later)?;
            }
            Arg::Value(value) => positional.push(value.to_string_lossy().into_owned()),
        }
    }
    finish(state, positional, refused_later)
}

/// Passes a parse error on at once; keeps the first of the errors upstream finds only after
/// parsing (see [`FlagError::is_parse_error`]) in `refused_later`, worded as upstream reports
/// it then: the problem alone, without pflag's `invalid argument … for … flag` frame.
fn defer_validation(applied: Result<(), FlagError>, refused_later: &mut Option<FlagError>) -> Result<(), FlagError> {
    match applied {
        Err(e) if e.is_parse_error() => Err(e),
        Err(FlagError::InvalidValue { reason, .. }) => {
            refused_later.get_or_insert(FlagError::Value(reason));
            Ok(())
        }
        Err(e) => {
            refused_later.get_or_insert(e);
            Ok(())
        }
        Ok(()) => Ok(()),
    }
}

/// Reads the value of `flag`: attached (`--flag=v`, `-v2`) or, for flags that require one, the
/// next argument. Flags with a no-value default take only attached values, and only when
/// `may_take_attached` (a one-letter flag's attached text may be further letters instead).
fn take_value(
    parser: &mut lexopt::Parser,
    flag: &FlagSpec,
    may_take_attached: bool,
    missing: String,
) -> Result<String, FlagError> {
    let raw = match flag.kind.no_value_default {
        Some(implicit) => match may_take_attached.then(|| parser.optional_value()).flatten() {
            Some(value) => value,
            None => OsString::from(implicit),
        },
        None => parser.value().map_err(|_| FlagError::MissingValue(missing))?,
    };
    raw.into_string().map_err(|raw| FlagError::InvalidValue {
        flag: flag.display_name(),
        value: raw.to_string_lossy().into_owned(),
        reason: ValueError::NotUtf8,
    })
}

/// Applies one flag occurrence: the first replaces the default, repeats accumulate.
fn set(state: &mut ParseState, flag: &'static FlagSpec, value: &str) -> Result<(), FlagError> {
    let mode = if state.options.explicitly_set.contains(&flag.name) {
        SetMode::Repeat
    } else {
        state.options.explicitly_set.push(flag.name);
        SetMode::First
    };
    state.options.given_values.push((flag.name, value.to_string()));
    (flag.set)(state, value, mode).map_err(|reason| FlagError::InvalidValue {
        flag: flag.display_name(),
        value: value.to_string(),
        reason,
    })
}

fn finish(state: ParseState, positional: Vec<String>, refused_later: Option<FlagError>) -> Result<Command, FlagError> {
    if state.help {
        return Ok(Command::Help(help::render()));
    }
    // Like upstream, empty arguments (as from an unset variable in a manifest) are ignored.
    if positional.iter().any(|a| !a.is_empty()) {
        return Err(FlagError::UnexpectedArguments(positional));
    }
    let mut options = state.options;
    // Upstream's `PersistentPreRunE`: the compatibility registry sets the emulated and minimum
    // compatibility versions, then the feature gates at them, before `--version` is looked at.
    let generic = &mut options.generic;
    generic.compatibility.set()?;
    let (emulation, min_compatibility) = (generic.compatibility.emulation, generic.compatibility.min_compatibility);
    generic.feature_gates.set(emulation, min_compatibility)?;
    match state.version {
        VersionRequest::Print => return Ok(Command::Version(version_string())),
        VersionRequest::Raw => return Ok(Command::Version(raw_version_string())),
        VersionRequest::Report(version) => options.reported_version = Some(version),
        VersionRequest::NotRequested => {}
    }
    if let Some(error) = refused_later {
        return Err(error);
    }
    validate::validate(&options)?;
    Ok(Command::Run(Box::new(options)))
}

impl Options {
    /// Whether upstream would start the controller `name` (canonical name or alias) with these
    /// options: `--controllers` selects it, it needs no cloud provider (upstream has no
    /// in-tree ones left, so those never start) and all its feature gates are on.
    pub fn starts_controller(&self, name: &str) -> bool {
        let Some(controller) = crate::app::controllers::resolve(name) else {
            return false;
        };
        let gates = &self.generic.feature_gates;
        // E.g. `--enable-garbage-collector=false` keeps the garbage collector off when selected.
        let disabled_by_flag = controller.turned_off_by.is_some_and(|off| off(self));
        self.generic.controllers.is_enabled(controller.name)
            && !disabled_by_flag
            && !controller.cloud_provider
            && controller.feature_gates.iter().all(|g| gates.is_enabled(g))
    }

    /// One line per explicitly set flag that has no effect here: its feature is not built
    /// yet, it is deprecated or removed upstream, or it concerns what this implementation
    /// does not have; then upstream's warnings about `--feature-gates` (unknown names, GA and
    /// deprecated gates set, alpha gates on). Meant to be logged as warnings at start-up.
    pub fn warnings(&self) -> Vec<String> {
        self.explicitly_set
            .iter()
            .filter_map(|name| table::lookup(name))
            .filter_map(|flag| {
                let name = flag.name;
                match flag.status {
                    FlagStatus::Implemented => None,
                    FlagStatus::NotYetBuilt => {
                        Some(format!("flag --{name} is accepted but its feature is not built yet; it has no effect"))
                    }
                    FlagStatus::Deprecated(message) => {
                        Some(format!("flag --{name} has been deprecated, {message} It has no effect."))
                    }
                    FlagStatus::Removed(why) => {
                        Some(format!("flag --{name} was removed upstream and has no effect: {why}"))
                    }
                    FlagStatus::NoEffect(why) => Some(format!("flag --{name} has no effect: {why}")),
                }
            })
            .chain(self.generic.feature_gates.warnings())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::time::Duration;

    use super::*;

    fn run(args: &[&str]) -> Result<Options, FlagError> {
        match parse(args.iter().map(OsString::from))? {
            Command::Run(options) => Ok(*options),
            other => panic!("expected options, got {other:?}"),
        }
    }

    fn error(args: &[&str]) -> String {
        match parse(args.iter().map(OsString::from)) {
            Err(e) => e.to_string(),
            Ok(command) => panic!("{args:?} parsed: {command:?}"),
        }
    }

    /// The message of a line refused after parsing, by the checks upstream logs the error of.
    fn invalid(args: &[&str]) -> Result<(), String> {
        match parse(args.iter().map(OsString::from)) {
            Err(e) => {
                assert!(matches!(refusal(&e), Refusal::Logged(_)), "{args:?}: {e} is refused while parsing");
                Err(e.to_string())
            }
            Ok(_) => Ok(()),
        }
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// The command of kubeadm's static Pod manifest (unchanged from v1.33 to v1.36).
    const KUBEADM: &[&str] = &[
        "--allocate-node-cidrs=true",
        "--authentication-kubeconfig=/etc/kubernetes/controller-manager.conf",
        "--authorization-kubeconfig=/etc/kubernetes/controller-manager.conf",
        "--bind-address=127.0.0.1",
        "--client-ca-file=/etc/kubernetes/pki/ca.crt",
        "--cluster-cidr=10.244.0.0/16",
        "--cluster-name=kubernetes",
        "--cluster-signing-cert-file=/etc/kubernetes/pki/ca.crt",
        "--cluster-signing-key-file=/etc/kubernetes/pki/ca.key",
        "--controllers=*,bootstrapsigner,tokencleaner",
        "--kubeconfig=/etc/kubernetes/controller-manager.conf",
        "--leader-elect=true",
        "--requestheader-client-ca-file=/etc/kubernetes/pki/front-proxy-ca.crt",
        "--root-ca-file=/etc/kubernetes/pki/ca.crt",
        "--service-account-private-key-file=/etc/kubernetes/pki/sa.key",
        "--service-cluster-ip-range=10.96.0.0/12",
        "--use-service-account-credentials=true",
    ];

    #[test]
    fn kubeadm_manifest_parses_into_typed_values() {
        let o = run(KUBEADM).unwrap();
        assert!(o.node_ipam.allocate_node_cidrs);
        let conf = "/etc/kubernetes/controller-manager.conf";
        assert_eq!(o.authentication.kubeconfig, conf);
        assert_eq!(o.authorization.kubeconfig, conf);
        assert_eq!(o.generic.client_connection.kubeconfig, conf);
        assert_eq!(o.secure_serving.bind_address, Some(IpAddr::from([127, 0, 0, 1])));
        assert_eq!(o.authentication.client_ca_file, "/etc/kubernetes/pki/ca.crt");
        assert_eq!(o.node_ipam.cluster_cidrs, [Cidr::parse("10.244.0.0/16").unwrap()]);
        assert_eq!(o.generic.cluster_name, "kubernetes");
        assert_eq!(o.csr_signing.cluster.cert_file, "/etc/kubernetes/pki/ca.crt");
        assert_eq!(o.csr_signing.cluster.key_file, "/etc/kubernetes/pki/ca.key");
        let controllers = &o.generic.controllers;
        assert_eq!(controllers.canonical_items(), ["*", "bootstrap-signer-controller", "token-cleaner-controller"]);
        assert!(controllers.is_enabled("token-cleaner-controller"));
        assert!(controllers.is_enabled("node-ipam-controller"));
        assert!(!controllers.is_enabled("selinux-warning-controller"));
        assert!(o.generic.leader_election.leader_elect);
        assert_eq!(o.authentication.requestheader_client_ca_file, "/etc/kubernetes/pki/front-proxy-ca.crt");
        assert_eq!(o.service_account.root_ca_file, "/etc/kubernetes/pki/ca.crt");
        assert_eq!(o.service_account.private_key_file, "/etc/kubernetes/pki/sa.key");
        assert_eq!(o.node_ipam.service_cidrs, [Cidr::parse("10.96.0.0/12").unwrap()]);
        assert!(o.generic.use_service_account_credentials);
        assert_eq!(o.explicitly_set.len(), KUBEADM.len());
        assert!(o.is_set("controllers") && !o.is_set("master"));
        // Everything else keeps its default.
        assert_eq!(o.secure_serving.port, 10257);
        assert_eq!(o.node_lifecycle.node_monitor_grace_period, secs(50));
    }

    #[test]
    fn node_lifecycle_and_client_flags_parse_into_typed_values() {
        let o = run(&[
            "--node-monitor-period=2s",
            "--node-monitor-grace-period=40s",
            "--node-startup-grace-period=2m",
            "--node-eviction-rate=0.5",
            "--secondary-node-eviction-rate=0.05",
            "--unhealthy-zone-threshold=0.7",
            "--large-cluster-size-threshold=20",
            "--kube-api-qps=50",
            "--kube-api-burst=100",
            "--kube-api-content-type=application/json",
            "--port=0",
        ])
        .unwrap();
        let n = &o.node_lifecycle;
        assert_eq!(n.node_monitor_period, secs(2));
        assert_eq!(n.node_monitor_grace_period, secs(40));
        assert_eq!(n.node_startup_grace_period, secs(120));
        assert_eq!((n.node_eviction_rate, n.secondary_node_eviction_rate), (0.5, 0.05));
        assert_eq!((n.unhealthy_zone_threshold, n.large_cluster_size_threshold), (0.7, 20));
        let c = &o.generic.client_connection;
        assert_eq!((c.qps, c.burst, c.content_type.as_str()), (50.0, 100, "application/json"));
        assert!(o.is_set("port"));
    }

    #[test]
    fn defaults_are_upstreams() {
        let o = run(&[]).unwrap();
        let g = &o.generic;
        assert_eq!(g.client_connection.master, "");
        assert_eq!(g.client_connection.kubeconfig, "");
        assert_eq!(g.client_connection.content_type, "application/vnd.kubernetes.protobuf");
        assert_eq!(g.client_connection.qps, 20.0);
        assert_eq!(g.client_connection.burst, 30);
        assert_eq!(g.controllers.canonical_items(), ["*"]);
        assert_eq!(g.min_resync_period, secs(12 * 3600));
        assert_eq!(g.controller_start_interval, Duration::ZERO);
        assert_eq!(g.cluster_name, "kubernetes");
        assert!(!g.use_service_account_credentials);
        assert!(g.debugging.profiling && !g.debugging.contention_profiling);
        assert!(g.feature_gates.explicit().is_empty());
        assert_eq!(g.compatibility, Compatibility::default());
        assert_eq!(g.compatibility.emulation, KubeVersion { major: 1, minor: 36 });
        assert_eq!(g.compatibility.min_compatibility, KubeVersion { major: 1, minor: 35 });
        assert_eq!(g.controller_shutdown_timeout, secs(10));
        let le = &g.leader_election;
        assert!(le.leader_elect);
        assert_eq!(le.lease_duration, secs(15));
        assert_eq!(le.renew_deadline, secs(10));
        assert_eq!(le.retry_period, secs(2));
        assert_eq!(le.resource_lock, "leases");
        assert_eq!(le.resource_name, "kube-controller-manager");
        assert_eq!(le.resource_namespace, "kube-system");

        assert_eq!(o.cloud.provider, "");
        assert!(o.cloud.configure_routes);
        assert_eq!(o.cloud.route_reconciliation_period, secs(10));

        let s = &o.secure_serving;
        assert_eq!(s.bind_address, Some(IpAddr::from([0, 0, 0, 0])));
        assert_eq!(s.port, 10257);
        assert_eq!(s.cert_dir, "");
        assert!(s.tls_cipher_suites.is_empty() && s.sni_cert_keys.is_empty() && s.tls_curve_preferences.is_empty());
        assert_eq!(o.authorization.always_allow_paths, ["/healthz", "/readyz", "/livez"]);
        assert_eq!(o.authorization.webhook_cache_authorized_ttl, secs(10));
        assert_eq!(o.authorization.webhook_cache_unauthorized_ttl, secs(10));
        assert_eq!(o.authentication.token_webhook_cache_ttl, secs(10));
        assert_eq!(o.authentication.requestheader_username_headers, ["x-remote-user"]);
        assert_eq!(o.authentication.requestheader_group_headers, ["x-remote-group"]);
        assert_eq!(o.authentication.requestheader_extra_headers_prefix, ["x-remote-extra-"]);

        let c = &o.concurrency;
        assert_eq!(
            [
                c.cron_job_syncs,
                c.daemonset_syncs,
                c.deployment_syncs,
                c.endpoint_syncs,
                c.ephemeral_volume_syncs,
                c.gc_syncs,
                c.horizontal_pod_autoscaler_syncs,
                c.job_syncs,
                c.namespace_syncs,
                c.rc_syncs,
                c.replicaset_syncs,
                c.resource_quota_syncs,
                c.service_endpoint_syncs,
                c.mirroring_service_endpoint_syncs,
                c.service_syncs,
                c.serviceaccount_token_syncs,
                c.statefulset_syncs,
                c.ttl_after_finished_syncs,
                c.validating_admission_policy_status_syncs,
                c.resource_claim_syncs,
                c.device_taint_eviction_syncs,
            ],
            [5, 2, 5, 5, 5, 20, 5, 5, 10, 5, 5, 5, 5, 5, 1, 5, 5, 5, 5, 50, 8]
        );

        assert_eq!(o.attach_detach.reconcile_sync_period, secs(60));
        assert_eq!(o.csr_signing.duration, secs(8760 * 3600));
        assert_eq!(o.csr_signing.cluster, SignerFiles::default());
        assert_eq!(o.endpoints.max_endpoints_per_slice, 100);
        assert_eq!(o.endpoints.mirroring_max_endpoints_per_subset, 1000);
        assert_eq!(o.endpoints.endpoint_updates_batch_period, Duration::ZERO);
        assert!(o.garbage_collector.enabled);
        assert_eq!(o.hpa.sync_period, secs(15));
        assert_eq!(o.hpa.downscale_stabilization, secs(300));
        assert_eq!(o.hpa.tolerance, 0.1);
        assert_eq!(o.hpa.cpu_initialization_period, secs(300));
        assert_eq!(o.hpa.initial_readiness_delay, secs(30));
        assert_eq!(o.namespace.sync_period, secs(300));

        let ipam = &o.node_ipam;
        assert!(!ipam.allocate_node_cidrs);
        assert!(ipam.cluster_cidrs.is_empty() && ipam.service_cidrs.is_empty());
        assert_eq!(ipam.cidr_allocator_type, "RangeAllocator");
        assert_eq!([ipam.node_cidr_mask_size, ipam.node_cidr_mask_size_ipv4, ipam.node_cidr_mask_size_ipv6], [0, 0, 0]);

        let nl = &o.node_lifecycle;
        assert_eq!(nl.node_monitor_period, secs(5));
        assert_eq!(nl.node_monitor_grace_period, secs(50));
        assert_eq!(nl.node_startup_grace_period, secs(60));
        assert_eq!(nl.node_eviction_rate, 0.1);
        assert_eq!(nl.secondary_node_eviction_rate, 0.01);
        assert_eq!(nl.large_cluster_size_threshold, 50);
        assert_eq!(nl.unhealthy_zone_threshold, 0.55);

        let pv = &o.persistent_volume;
        assert_eq!(pv.claim_binder_sync_period, secs(15));
        assert!(pv.enable_dynamic_provisioning && !pv.enable_hostpath_provisioner);
        assert_eq!(pv.flex_volume_plugin_dir, "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/");
        assert_eq!(
            [
                pv.recycler.minimum_timeout_nfs,
                pv.recycler.increment_timeout_nfs,
                pv.recycler.minimum_timeout_hostpath,
                pv.recycler.increment_timeout_hostpath
            ],
            [300, 30, 60, 30]
        );
        assert_eq!(o.pod_gc.terminated_pod_gc_threshold, 12500);
        assert_eq!(o.resource_quota.sync_period, secs(300));
        assert_eq!(o.service_account.legacy_token_clean_up_period, secs(8760 * 3600));

        let logs = &o.logs;
        assert_eq!(logs.verbosity, 0);
        assert!(logs.vmodule.is_empty());
        assert_eq!(logs.flush_frequency, secs(5));
        assert_eq!(logs.format, "text");
        assert_eq!(logs.text, LogStreamOptions::default());
        assert!(o.metrics.allow_metric_labels.is_empty());
        assert_eq!(o.reported_version, None);
        assert!(o.explicitly_set.is_empty());
        assert!(o.warnings().is_empty());
        assert_eq!(o, Options::default());
    }

    #[test]
    fn value_syntaxes() {
        let o = run(&["--kubeconfig", "/k", "--master=https://h:6443", "--kube-api-qps=50.5"]).unwrap();
        assert_eq!(o.generic.client_connection.kubeconfig, "/k");
        assert_eq!(o.generic.client_connection.master, "https://h:6443");
        assert_eq!(o.generic.client_connection.qps, 50.5);
        // A value may start with a dash, as in pflag.
        let o = run(&["--cluster-name", "-x"]).unwrap();
        assert_eq!(o.generic.cluster_name, "-x");
        // Empty values are values.
        let o = run(&["--master="]).unwrap();
        assert!(o.is_set("master"));
        // Underscores are dashes.
        let o = run(&["--concurrent_rc_syncs=7"]).unwrap();
        assert_eq!(o.concurrency.rc_syncs, 7);
        assert_eq!(o.explicitly_set, ["concurrent-rc-syncs"]);
        // The last value wins for scalars.
        let o = run(&["--kube-api-burst=1", "--kube-api-burst=2"]).unwrap();
        assert_eq!(o.generic.client_connection.burst, 2);
        assert_eq!(o.explicitly_set, ["kube-api-burst"]);
    }

    #[test]
    fn booleans_as_pflag() {
        assert!(!run(&["--leader-elect=false"]).unwrap().generic.leader_election.leader_elect);
        assert!(run(&["--leader-elect"]).unwrap().generic.leader_election.leader_elect);
        let o = run(&["--profiling=0", "--enable-garbage-collector=F", "--use-service-account-credentials=T"]).unwrap();
        assert!(!o.generic.debugging.profiling);
        assert!(!o.garbage_collector.enabled);
        assert!(o.generic.use_service_account_credentials);
        // `--flag false` leaves `false` as an argument.
        assert_eq!(
            error(&["--leader-elect", "false"]),
            r#""kube-controller-manager" does not take any arguments, got ["false"]"#
        );
        assert_eq!(
            error(&["--leader-elect=no"]),
            r#"invalid argument "no" for "--leader-elect" flag: not a boolean (use true or false)"#
        );
        assert_eq!(
            error(&["--leader-elect="]),
            r#"invalid argument "" for "--leader-elect" flag: not a boolean (use true or false)"#
        );
    }

    #[test]
    fn verbosity_forms() {
        for args in [&["-v", "2"][..], &["-v=2"], &["-v2"], &["--v=2"], &["--v", "2"]] {
            assert_eq!(run(args).unwrap().logs.verbosity, 2, "{args:?}");
        }
        assert_eq!(error(&["-v"]), "flag needs an argument: 'v' in -v");
        assert_eq!(error(&["-v=x"]), r#"invalid argument "x" for "-v, --v" flag: not a non-negative integer"#);
        let o = run(&["--vmodule=controller*=4", "--vmodule", "gc=5"]).unwrap();
        assert_eq!(o.logs.vmodule.len(), 2);
    }

    #[test]
    fn slices_and_maps_accumulate() {
        let o = run(&["--controllers=replicaset", "--controllers=-ttl,*"]).unwrap();
        assert_eq!(o.generic.controllers.canonical_items(), ["replicaset-controller", "-ttl-controller", "*"]);
        let o = run(&["--authorization-always-allow-paths=/a", "--authorization-always-allow-paths=/b,/c"]).unwrap();
        assert_eq!(o.authorization.always_allow_paths, ["/a", "/b", "/c"]);
        let o = run(&["--controllers="]).unwrap();
        assert_eq!(o.generic.controllers.enabled().count(), 0);
        let o =
            run(&["--feature-gates=NodeSwap=true,WatchList=false", "--feature-gates", "HPAScaleToZero=true"]).unwrap();
        assert_eq!(o.generic.feature_gates.explicit().len(), 3);
        assert!(o.generic.feature_gates.is_enabled("HPAScaleToZero"));
        let o = run(&["--tls-curve-preferences=29", "--tls-curve-preferences=23,24"]).unwrap();
        assert_eq!(o.secure_serving.tls_curve_preferences, [29, 23, 24]);
        let o = run(&["--allow-metric-labels=metric1,label1='v1,v2'"]).unwrap();
        assert_eq!(o.metrics.allow_metric_labels["metric1,label1"], "'v1,v2'");
        let o = run(&["--tls-sni-cert-key=a.crt,a.key", "--tls-sni-cert-key=b.crt,b.key:b.com"]).unwrap();
        assert_eq!(o.secure_serving.sni_cert_keys.len(), 2);
    }

    #[test]
    fn usage_comes_with_what_pflag_refuses_as_upstreams() {
        let refused = |args: &[&str]| parse(args.iter().map(OsString::from)).expect_err("refused");
        for pflag in [&["--foo"][..], &["-x"], &["--kubeconfig"], &["--kube-api-qps=abc"], &["--bind-address=nope"]] {
            let error = refused(pflag);
            assert!(error.is_parse_error(), "{pflag:?}: {error}");
            let Refusal::Printed(text) = refusal(&error) else { panic!("{pflag:?}: printed") };
            assert!(text.starts_with("Usage:\n  kube-controller-manager [flags]\n"));
            assert!(text.ends_with(&format!("\n\nError: {error}\n")));
        }
        // String-typed upstream: refused by validation, without the usage.
        for validated in [
            &["--controllers=nope"][..],
            &["--cluster-cidr=10.0.0.0/33"],
            &["--feature-gates=Foo"],
            &["--emulated-version=1.40"],
        ] {
            let error = refused(validated);
            assert!(!error.is_parse_error(), "{validated:?}: {error}");
            let logged = format!("\"command failed\" err={}", values::go_quote(&error.to_string()));
            assert_eq!(refusal(&error), Refusal::Logged(logged));
        }
        let positional = refused(&["x"]);
        assert_eq!(refusal(&positional), Refusal::Printed(format!("Error: {positional}\n")));
        // Found after parsing, as upstream: a later unknown flag, positional argument or
        // --help wins over a bad --controllers.
        assert!(matches!(refused(&["--controllers=nope", "--foo"]), FlagError::UnknownFlag(flag) if flag == "--foo"));
        assert!(matches!(refused(&["--controllers=nope", "x"]), FlagError::UnexpectedArguments(_)));
        assert!(matches!(parse(["--controllers=nope", "--help"].map(OsString::from)), Ok(Command::Help(_))));
    }

    #[test]
    fn help_and_version() {
        for args in [&["--help"][..], &["-h"], &["--kubeconfig=/k", "-h"], &["--help", "--version"]] {
            match parse(args.iter().map(OsString::from)) {
                Ok(Command::Help(text)) => assert!(text.contains("Generic flags:")),
                other => panic!("{args:?}: {other:?}"),
            }
        }
        // A bad flag is reported even with --help, as upstream.
        assert_eq!(error(&["--help", "--nope"]), "unknown flag: --nope");
        assert!(matches!(parse([OsString::from("--help=false")]), Ok(Command::Run(_))));
        match parse([OsString::from("--version")]) {
            Ok(Command::Version(text)) => assert_eq!(text, version_string()),
            other => panic!("{other:?}"),
        }
        assert_eq!(version_string(), "Kubernetes v1.36.2");
        match parse([OsString::from("--version=raw")]) {
            Ok(Command::Version(text)) => {
                assert!(text.starts_with(r#"version.Info{Major:"1", Minor:"36", EmulationMajor:"""#), "{text}");
                assert!(text.contains(r#"GitVersion:"v1.36.2""#), "{text}");
                assert!(text.ends_with(&format!(r#"Compiler:"rustc", Platform:"{}"}}"#, go_platform())), "{text}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse([OsString::from("--version=false")]), Ok(Command::Run(_))));
        let o = run(&["--version=v1.36.2-custom"]).unwrap();
        assert_eq!(o.reported_version.as_deref(), Some("v1.36.2-custom"));
        // The emulated version and the feature gates are set before `--version` is looked at.
        assert_eq!(error(&["--version", "--feature-gates=Foo"]), "missing bool value for Foo");
        assert_eq!(error(&["--version", "--emulated-version=abc"]), r#"could not parse "abc" as version"#);
        assert!(matches!(parse(["--version", "--emulated-version=1.40"].map(OsString::from)), Ok(Command::Version(_))));
    }

    #[test]
    fn syntax_errors_read_like_pflag() {
        assert_eq!(error(&["--foo"]), "unknown flag: --foo");
        assert_eq!(error(&["--foo=bar"]), "unknown flag: --foo");
        assert_eq!(error(&["-x"]), "unknown shorthand flag: 'x' in -x");
        assert_eq!(error(&["-leader-elect"]), "unknown shorthand flag: 'l' in -leader-elect");
        assert_eq!(error(&["-hx"]), "unknown shorthand flag: 'x' in -x");
        assert_eq!(error(&["---x"]), "bad flag syntax: ---x");
        assert_eq!(error(&["--=x"]), "bad flag syntax: --=x");
        assert_eq!(error(&["--kubeconfig"]), "flag needs an argument: --kubeconfig");
        assert_eq!(
            error(&["somefile", ""]),
            r#""kube-controller-manager" does not take any arguments, got ["somefile" ""]"#
        );
        assert!(run(&[""]).is_ok());
        assert_eq!(
            error(&["--", "--kubeconfig=/k"]),
            r#""kube-controller-manager" does not take any arguments, got ["--kubeconfig=/k"]"#
        );
    }

    #[test]
    fn value_errors_name_flag_and_value() {
        let cases: &[(&[&str], &str)] = &[
            (&["--kube-api-qps=abc"], r#"invalid argument "abc" for "--kube-api-qps" flag: not a number"#),
            (&["--kube-api-burst=1.5"], r#"invalid argument "1.5" for "--kube-api-burst" flag: not an integer"#),
            (
                &["--kube-api-burst=3000000000"],
                r#"invalid argument "3000000000" for "--kube-api-burst" flag: value out of range for a 32-bit integer"#,
            ),
            (
                &["--node-monitor-grace-period=40"],
                r#"invalid argument "40" for "--node-monitor-grace-period" flag: time: missing unit in duration "40""#,
            ),
            (
                &["--min-resync-period=soon"],
                r#"invalid argument "soon" for "--min-resync-period" flag: time: invalid duration "soon""#,
            ),
            (
                &["--bind-address=localhost"],
                r#"invalid argument "localhost" for "--bind-address" flag: failed to parse IP: "localhost""#,
            ),
            (
                &["--secure-port=70000"],
                r#"invalid argument "70000" for "--secure-port" flag: must be between 0 and 65535, inclusive (0 turns it off)"#,
            ),
            (&["--port=x"], r#"invalid argument "x" for "--port" flag: not an integer"#),
            (
                &["--version=v2.0.0"],
                r#"invalid argument "v2.0.0" for "--version" flag: version "v2.0.0" must match major/minor/patch of default version "v1.36.2""#,
            ),
            (
                &["--tls-curve-preferences=23,x"],
                r#"invalid argument "23,x" for "--tls-curve-preferences" flag: not an integer"#,
            ),
        ];
        for (args, want) in cases {
            assert_eq!(error(args), *want, "{args:?}");
        }
        // Upstream's string-typed flags take any text and report the problem alone, after
        // parsing (verified against upstream v1.36.2's binary where it reports them so).
        let validated: &[(&[&str], &str)] = &[
            (&["--cluster-cidr=10.0.0.0/33"], "invalid CIDR address: 10.0.0.0/33"),
            (
                &["--service-cluster-ip-range=10.0.0.0/16,10.1.0.0/16"],
                "two CIDRs must be one IPv4 and one IPv6 range (dual-stack)",
            ),
            (&["--controllers=*,nope"], r#""nope" is not in the list of known controllers"#),
            (&["--feature-gates=Foo"], "missing bool value for Foo"),
            (
                &["--feature-gates=Foo=maybe"],
                r#"invalid value of Foo=maybe, err: strconv.ParseBool: parsing "maybe": invalid syntax"#,
            ),
            (
                &["--feature-gates=SidecarContainers=false,Foo=true"],
                "cannot set feature gate SidecarContainers to false, feature is locked to true",
            ),
            (&["--logging-format=xml"], r#"format: Invalid value: "xml": Unsupported log format"#),
            (
                &["--tls-min-version=TLS13"],
                r#"unknown tls version "TLS13" (use one of VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13)"#,
            ),
            (&["--emulated-version=1.40"], "emulation version 1.40 is not between [1.33, 1.36.0]"),
            (&["--emulated-version=kube=1.34.1"], "patch version not allowed, got: kube=1.34.1"),
            (&["--min-compatibility-version=1.32"], "minCompatibilityVersion version 1.32 is not between [1.33, 1.36]"),
            (&["--concurrent-resourceclaim-syncs=0"], "concurrent-resourceclaim-syncs must be larger than 0, got 0"),
            (
                &["--concurrent-device-taint-eviction-syncs=-1"],
                "concurrent-device-taint-eviction-syncs must be greater than zero, got -1",
            ),
            (&["--tls-curve-preferences=1"], "curve preference 1 is not supported by the current Go version"),
            (&["--tls-curve-preferences=29,29"], "duplicate curve preference 29"),
        ];
        for (args, want) in validated {
            assert_eq!(invalid(args), Err(want.to_string()), "{args:?}");
        }
        // Curves are checked only when the port serves, as upstream.
        assert!(run(&["--tls-curve-preferences=1", "--secure-port=0"]).is_ok());
        // Unknown gates are only warned about.
        let o = run(&["--feature-gates=NoSuchGate=true"]).unwrap();
        assert_eq!(o.warnings(), ["unrecognized feature gate: NoSuchGate"]);
    }

    #[test]
    fn refusals_keep_what_refused_the_value_as_their_source() {
        use crate::apimachinery::duration::ParseDurationError;
        use crate::apimachinery::errors::find_in_chain;
        use crate::apimachinery::net::ParseCidrError;
        use crate::server::CurveError;
        let refused = |args: &[&str]| parse(args.iter().map(OsString::from)).expect_err("refused");
        let duration = refused(&["--min-resync-period=soon"]);
        assert!(matches!(find_in_chain::<ParseDurationError>(&duration), Some(ParseDurationError::Invalid { .. })));
        let cidr = refused(&["--cluster-cidr=10.0.0.0/33"]);
        assert_eq!(find_in_chain::<ParseCidrError>(&cidr).map(|e| e.text.as_str()), Some("10.0.0.0/33"));
        let curves = refused(&["--tls-curve-preferences=29,29"]);
        assert_eq!(find_in_chain::<CurveError>(&curves), Some(&CurveError::Duplicate(29)));
        let version = refused(&["--emulated-version=abc"]);
        assert!(find_in_chain::<crate::apimachinery::version::ParseError>(&version).is_some());
        let gates = refused(&["--feature-gates=SidecarContainers=false,InOrderInformers=false"]);
        let Some(FeatureGateError::Several(both)) = find_in_chain::<FeatureGateError>(&gates) else {
            panic!("two refusals are aggregated: {gates:?}")
        };
        let locked = |e: &crate::apimachinery::errors::BoxError| {
            matches!(e.downcast_ref::<FeatureGateError>(), Some(FeatureGateError::Locked { value: false, .. }))
        };
        assert!(both.errors().len() == 2 && both.errors().iter().all(locked), "{both:?}");
        let unknown = refused(&["--controllers=nope"]);
        assert_eq!(
            find_in_chain::<crate::app::controllers::UnknownController>(&unknown).map(|e| e.0.as_str()),
            Some("nope")
        );
    }

    #[test]
    fn leader_election_rules() {
        assert_eq!(
            error(&["--leader-elect-lease-duration=10s"]),
            "--leader-elect-lease-duration (10s) must be greater than --leader-elect-renew-deadline (10s)"
        );
        assert_eq!(
            error(&["--leader-elect-renew-deadline=2400ms"]),
            "--leader-elect-renew-deadline (2.4s) must be greater than 1.2 times --leader-elect-retry-period (2s)"
        );
        assert!(run(&["--leader-elect-renew-deadline=2401ms"]).is_ok());
        assert_eq!(error(&["--leader-elect-retry-period=0s"]), "--leader-elect-retry-period must be greater than zero");
        assert_eq!(
            error(&["--leader-elect-resource-lock=endpoints"]),
            r#"--leader-elect-resource-lock must be "leases", the only lock kind upstream supports, got "endpoints""#
        );
        assert_eq!(error(&["--leader-elect-resource-name="]), "--leader-elect-resource-name must not be empty");
        // Without leader election the lease settings are not used and not checked.
        assert!(
            run(&[
                "--leader-elect=false",
                "--leader-elect-lease-duration=1s",
                "--leader-elect-resource-lock=endpoints"
            ])
            .is_ok()
        );
    }

    #[test]
    fn node_ipam_rules_apply_when_allocating() {
        let ok = |args: &[&str]| {
            let mut all = vec!["--allocate-node-cidrs"];
            all.extend_from_slice(args);
            run(&all)
        };
        assert!(ok(&["--cluster-cidr=10.244.0.0/16"]).is_ok());
        assert!(ok(&["--cluster-cidr=10.244.0.0/16", "--node-cidr-mask-size=16"]).is_ok());
        assert!(ok(&["--cluster-cidr=10.244.0.0/16,fd00::/56", "--node-cidr-mask-size-ipv6=72"]).is_ok());
        assert!(ok(&["--cluster-cidr=fd00::/48"]).is_ok());
        // Not allocating (or the controller is off): nothing is checked.
        assert!(run(&["--cluster-cidr=10.244.0.0/16", "--node-cidr-mask-size=8"]).is_ok());
        assert!(ok(&["--controllers=*,-nodeipam"]).is_ok());
        let cases: &[(&[&str], &str)] = &[
            (&[], "--cluster-cidr is required when --allocate-node-cidrs is true"),
            (
                &["--cluster-cidr=10.244.0.0/16", "--node-cidr-mask-size=8"],
                "--node-cidr-mask-size (8) must not be smaller than the prefix length of --cluster-cidr 10.244.0.0/16",
            ),
            (
                &["--cluster-cidr=10.244.0.0/25"],
                "the default IPv4 node CIDR mask size (24) must not be smaller than the prefix length of --cluster-cidr 10.244.0.0/25",
            ),
            (
                &["--cluster-cidr=10.244.0.0/16", "--node-cidr-mask-size-ipv4=33"],
                "--node-cidr-mask-size-ipv4 (33) must be between 0 and 32",
            ),
            (
                &["--cluster-cidr=fd00::/47"],
                "the default IPv6 node CIDR mask size (64) is too large for --cluster-cidr fd00::/47: node CIDRs may have at most 16 more bits than the cluster CIDR",
            ),
            (
                &["--cluster-cidr=10.244.0.0/16,fd00::/56", "--node-cidr-mask-size=24"],
                "usage of --node-cidr-mask-size is not allowed with dual-stack clusters",
            ),
            (
                &["--cluster-cidr=10.244.0.0/16", "--node-cidr-mask-size=24", "--node-cidr-mask-size-ipv4=24"],
                "usage of --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6 is not allowed if --node-cidr-mask-size is set. For dual-stack clusters please unset it and use IPFamily specific flags",
            ),
            (
                &["--cluster-cidr=10.244.0.0/16", "--node-cidr-mask-size-ipv6=64"],
                "usage of --node-cidr-mask-size-ipv6 is not allowed for a single-stack IPv4 cluster",
            ),
            (
                &["--cluster-cidr=fd00::/56", "--node-cidr-mask-size-ipv4=24"],
                "usage of --node-cidr-mask-size-ipv4 is not allowed for a single-stack IPv6 cluster",
            ),
            (
                &["--cluster-cidr=10.244.0.0/16", "--cidr-allocator-type=CloudAllocator"],
                "--cidr-allocator-type is set to 'CloudAllocator' but cloud provider is not configured",
            ),
            (
                &["--cluster-cidr=10.244.0.0/16", "--cidr-allocator-type=Magic"],
                r#"--cidr-allocator-type="Magic" is not a CIDR allocator type (use RangeAllocator)"#,
            ),
        ];
        for (args, want) in cases {
            let mut all = vec!["--allocate-node-cidrs"];
            all.extend_from_slice(args);
            assert_eq!(invalid(&all), Err(want.to_string()), "{args:?}");
        }
    }

    #[test]
    fn other_combination_rules() {
        let cases: &[(&[&str], &str)] = &[
            (
                &["--cloud-provider=aws"],
                r#"--cloud-provider="aws": built-in cloud providers were removed upstream; use --cloud-provider=external and an external cloud controller manager"#,
            ),
            (&["--tls-cert-file=/c"], "--tls-cert-file and --tls-private-key-file must be set together"),
            (&["--http2-max-streams-per-connection=-1"], "--http2-max-streams-per-connection can not be negative"),
            (&["--concurrent-job-syncs=0"], "--concurrent-job-syncs must be greater than 0, but got 0"),
            (
                &["--concurrent-horizontal-pod-autoscaler-syncs=-1"],
                "--concurrent-horizontal-pod-autoscaler-syncs must be greater than 0, but got -1",
            ),
            (
                &["--concurrent-service-endpoint-syncs=51"],
                "--concurrent-service-endpoint-syncs must be between 1 and 50, but got 51",
            ),
            (&["--max-endpoints-per-slice=0"], "--max-endpoints-per-slice must be between 1 and 1000, but got 0"),
            (
                &["--cluster-signing-cert-file=/c"],
                "cannot specify --cluster-signing-cert-file without --cluster-signing-key-file, and vice versa",
            ),
            (
                &[
                    "--cluster-signing-cert-file=/c",
                    "--cluster-signing-key-file=/k",
                    "--cluster-signing-kubelet-serving-cert-file=/s",
                    "--cluster-signing-kubelet-serving-key-file=/t",
                ],
                "cannot specify --cluster-signing-{cert,key}-file and other --cluster-signing-*-file flags at the same time",
            ),
            (
                &["--cluster-signing-legacy-unknown-key-file=/k"],
                "--cluster-signing-legacy-unknown-cert-file and --cluster-signing-legacy-unknown-key-file must be set together",
            ),
            (
                &["--show-hidden-metrics-for-version=1.34"],
                "--show-hidden-metrics-for-version must be omitted or have the value '1.35'. Only the previous minor version is allowed",
            ),
            (
                &["--allow-metric-labels=metric1=v1"],
                "--allow-metric-labels must have a list of kv pair with format \
                 `metricName,labelName=labelValue, labelValue,...`",
            ),
            (&["--log-text-split-stream"], "--log-text-split-stream needs the LoggingAlphaOptions feature gate"),
            (
                &["--logging-format=json", "--feature-gates=LoggingBetaOptions=false"],
                "--logging-format=json needs the LoggingBetaOptions feature gate",
            ),
            (
                &["--attach-detach-reconcile-sync-period=500ms"],
                "--attach-detach-reconcile-sync-period (500ms) must be at least 1s",
            ),
        ];
        for (args, want) in cases {
            assert_eq!(error(args), *want, "{args:?}");
        }
        assert!(run(&["--cloud-provider=external"]).is_ok());
        assert!(run(&["--show-hidden-metrics-for-version=1.35"]).is_ok());
        assert!(run(&["--log-text-split-stream", "--feature-gates=LoggingAlphaOptions=true"]).is_ok());
        assert!(run(&["--logging-format=json"]).is_ok());
        assert!(run(&["--attach-detach-reconcile-sync-period=500ms", "--controllers=*,-attachdetach"]).is_ok());
        assert!(
            run(&["--cluster-signing-kubelet-serving-cert-file=/s", "--cluster-signing-kubelet-serving-key-file=/t"])
                .is_ok()
        );
    }

    #[test]
    fn started_controllers_need_selection_gates_and_no_cloud() {
        let o = run(&[]).unwrap();
        assert!(o.starts_controller("replicaset"));
        assert!(o.starts_controller("taint-eviction-controller"));
        assert!(o.starts_controller("service-cidr-controller"));
        assert!(!o.starts_controller("bootstrapsigner"));
        assert!(!o.starts_controller("service-lb-controller"));
        assert!(!o.starts_controller("storage-version-gc"));
        assert!(!o.starts_controller("nope"));
        // DynamicResourceAllocation is GA in 1.36, DRADeviceTaints beta and on,
        // VolumeAttributesClass GA: their controllers start (once built).
        for on in [
            "resourceclaim-controller",
            "device-taint-eviction-controller",
            "volumeattributesclass-protection-controller",
        ] {
            assert!(o.starts_controller(on), "{on}");
        }
        for off in [
            "podgroup-protection-controller",
            "resourcepoolstatusrequest-controller",
            "podcertificaterequest-cleaner-controller",
            "svm",
        ] {
            assert!(!o.starts_controller(off), "{off}");
        }
        let o = run(&[
            "--controllers=*,-replicaset,bootstrapsigner,route",
            "--feature-gates=DRADeviceTaints=false,GenericWorkload=true",
        ])
        .unwrap();
        assert!(!o.starts_controller("replicaset-controller"));
        assert!(o.starts_controller("bootstrap-signer-controller"));
        assert!(!o.starts_controller("node-route-controller"));
        assert!(o.starts_controller("resourceclaim-controller"));
        assert!(!o.starts_controller("device-taint-eviction-controller"));
        assert!(o.starts_controller("podgroup-protection-controller"));
        // At an emulated 1.33 the DRA controllers are off again (their gates are beta and off).
        let o = run(&["--emulated-version=1.33"]).unwrap();
        assert!(!o.starts_controller("resourceclaim-controller"));
        assert!(!o.starts_controller("volumeattributesclass-protection-controller"));
    }

    #[test]
    fn errors_stay_on_one_line() {
        assert_eq!(error(&["--foo\nbar"]), "unknown flag: --foo\\nbar");
        assert_eq!(
            error(&["--kubeconfig=a", "x\ny"]),
            r#""kube-controller-manager" does not take any arguments, got ["x\ny"]"#
        );
    }

    #[test]
    fn warnings_follow_status() {
        let o = run(&[
            "--kubeconfig=/k",
            "--enable-hostpath-provisioner",
            "--pod-eviction-timeout=2m0s",
            "--port=0",
            "--node-sync-period=10s",
            "--cloud-config=/c",
            "-v=3",
            "--feature-gates=KMSv1=false",
            "--concurrent-resourceclaim-syncs=10",
        ])
        .unwrap();
        assert_eq!(
            o.warnings(),
            [
                "flag --enable-hostpath-provisioner is accepted but its feature is not built yet; it has no effect",
                "flag --pod-eviction-timeout was removed upstream and has no effect: upstream removed it; evictions follow taints and tolerations (tolerationSeconds)",
                "flag --port was removed upstream and has no effect: insecure serving was removed upstream; use --secure-port",
                "flag --node-sync-period has been deprecated, This flag is currently no-op and will be deleted. It has no effect.",
                "flag --cloud-config has no effect: it configures in-tree cloud provider integration, which upstream removed and this controller manager does not have",
                r#""Warning: setting deprecated feature gate. It will be removed in a future release." featureGate="KMSv1" value=false"#,
            ]
        );
        // Removed and deprecated flags still check their values.
        assert!(run(&["--pod-eviction-timeout=5"]).is_err());
    }
}
