//! The controllers of upstream kube-controller-manager v1.33 by name, and the `--controllers`
//! selection over them.
//!
//! Names, aliases and defaults follow `cmd/kube-controller-manager/names` and the controller
//! descriptors registered in `NewControllerDescriptors`: every controller has a canonical name
//! (`replicaset-controller`) and, when it predates the naming scheme, the short alias it used to
//! have (`replicaset`). Both are accepted anywhere a controller is named.

pub mod client_names;
pub mod deployment;
pub mod endpoint;
pub mod endpointslice;
pub mod endpointslicemirroring;
pub mod endpointutil;
pub mod garbagecollector;
pub mod namespace;
pub mod nodeipam;
pub mod nodelifecycle;
pub mod nodeutil;
pub mod podgc;
pub mod podutil;
pub mod replicaset;
pub mod resourcequota;
pub mod root_ca_publisher;
pub mod serviceaccount;
pub mod tainteviction;
pub mod taintmanager;
pub mod ttl;

use crate::runtime::controller::ControllerDescriptor;
use std::fmt;

/// One controller of the upstream controller manager.
#[derive(Debug, PartialEq, Eq)]
pub struct ControllerName {
    /// The canonical name, as `--help` lists it and logs name the controller.
    pub name: &'static str,
    /// Older names still accepted by `--controllers`.
    pub aliases: &'static [&'static str],
    /// Whether `*` in `--controllers` turns it on.
    pub enabled_by_default: bool,
    /// Runs only with an in-tree cloud provider, which upstream 1.33 no longer has: with
    /// `--cloud-provider` empty or `external` upstream skips it even when it is selected.
    pub cloud_provider: bool,
    /// Feature gates that must all be enabled for upstream to start it even when selected.
    pub feature_gates: &'static [&'static str],
}

/// Shorthand for the table below: an always-on controller without gates.
const fn plain(name: &'static str, aliases: &'static [&'static str]) -> ControllerName {
    ControllerName { name, aliases, enabled_by_default: true, cloud_provider: false, feature_gates: &[] }
}

/// A default-enabled controller that upstream starts only when its feature gates are on.
const fn gated(
    name: &'static str,
    aliases: &'static [&'static str],
    feature_gates: &'static [&'static str],
) -> ControllerName {
    ControllerName { feature_gates, ..plain(name, aliases) }
}

/// A controller that only runs with an in-tree cloud provider.
const fn cloud(name: &'static str, aliases: &'static [&'static str]) -> ControllerName {
    ControllerName { cloud_provider: true, ..plain(name, aliases) }
}

/// A controller that `*` leaves off; it has to be named in `--controllers`.
const fn off_by_default(name: &'static str, aliases: &'static [&'static str]) -> ControllerName {
    ControllerName { enabled_by_default: false, ..plain(name, aliases) }
}

/// Every controller upstream v1.33 knows, sorted by canonical name as `--help` lists them.
pub const KNOWN_CONTROLLERS: &[ControllerName] = &[
    off_by_default("bootstrap-signer-controller", &["bootstrapsigner"]),
    plain("certificatesigningrequest-approving-controller", &["csrapproving"]),
    plain("certificatesigningrequest-cleaner-controller", &["csrcleaner"]),
    plain("certificatesigningrequest-signing-controller", &["csrsigning"]),
    cloud("cloud-node-lifecycle-controller", &["cloud-node-lifecycle"]),
    plain("clusterrole-aggregation-controller", &["clusterrole-aggregation"]),
    plain("cronjob-controller", &["cronjob"]),
    plain("daemonset-controller", &["daemonset"]),
    plain("deployment-controller", &["deployment"]),
    gated("device-taint-eviction-controller", &[], &["DynamicResourceAllocation", "DRADeviceTaints"]),
    plain("disruption-controller", &["disruption"]),
    plain("endpoints-controller", &["endpoint"]),
    plain("endpointslice-controller", &["endpointslice"]),
    plain("endpointslice-mirroring-controller", &["endpointslicemirroring"]),
    plain("ephemeral-volume-controller", &["ephemeral-volume"]),
    plain("garbage-collector-controller", &["garbagecollector"]),
    plain("horizontal-pod-autoscaler-controller", &["horizontalpodautoscaling"]),
    plain("job-controller", &["job"]),
    gated("kube-apiserver-serving-clustertrustbundle-publisher-controller", &[], &["ClusterTrustBundle"]),
    plain("legacy-serviceaccount-token-cleaner-controller", &["legacy-service-account-token-cleaner"]),
    plain("namespace-controller", &["namespace"]),
    plain("node-ipam-controller", &["nodeipam"]),
    plain("node-lifecycle-controller", &["nodelifecycle"]),
    cloud("node-route-controller", &["route"]),
    plain("persistentvolume-attach-detach-controller", &["attachdetach"]),
    plain("persistentvolume-binder-controller", &["persistentvolume-binder"]),
    plain("persistentvolume-expander-controller", &["persistentvolume-expander"]),
    plain("persistentvolume-protection-controller", &["pv-protection"]),
    plain("persistentvolumeclaim-protection-controller", &["pvc-protection"]),
    plain("pod-garbage-collector-controller", &["podgc"]),
    plain("replicaset-controller", &["replicaset"]),
    plain("replicationcontroller-controller", &["replicationcontroller"]),
    gated("resourceclaim-controller", &["resource-claim-controller"], &["DynamicResourceAllocation"]),
    plain("resourcequota-controller", &["resourcequota"]),
    plain("root-ca-certificate-publisher-controller", &["root-ca-cert-publisher"]),
    ControllerName { enabled_by_default: false, ..gated("selinux-warning-controller", &[], &["SELinuxChangePolicy"]) },
    gated("service-cidr-controller", &[], &["MultiCIDRServiceAllocator"]),
    cloud("service-lb-controller", &["service"]),
    plain("serviceaccount-controller", &["serviceaccount"]),
    plain("serviceaccount-token-controller", &["serviceaccount-token"]),
    plain("statefulset-controller", &["statefulset"]),
    gated("storage-version-migrator-controller", &[], &["StorageVersionMigrator"]),
    gated(
        "storageversion-garbage-collector-controller",
        &["storage-version-gc"],
        &["APIServerIdentity", "StorageVersionAPI"],
    ),
    gated("taint-eviction-controller", &[], &["SeparateTaintEvictionController"]),
    off_by_default("token-cleaner-controller", &["tokencleaner"]),
    plain("ttl-after-finished-controller", &["ttl-after-finished"]),
    plain("ttl-controller", &["ttl"]),
    plain("validatingadmissionpolicy-status-controller", &[]),
    gated("volumeattributesclass-protection-controller", &[], &["VolumeAttributesClass"]),
];

/// The controllers this implementation has built so far. The runtime starts only these; the
/// rest of a `--controllers` selection is reported as not built yet.
#[rustfmt::skip]
pub static DESCRIPTORS: &[ControllerDescriptor] = &[
    // The token controller first, as upstream starts it before the others.
    serviceaccount::SERVICE_ACCOUNT_TOKEN,
    deployment::DEPLOYMENT,
    endpoint::ENDPOINTS,
    endpointslice::ENDPOINTSLICE,
    endpointslicemirroring::ENDPOINTSLICE_MIRRORING,
    garbagecollector::GARBAGE_COLLECTOR,
    namespace::NAMESPACE,
    nodeipam::NODE_IPAM,
    nodelifecycle::NODE_LIFECYCLE,
    podgc::POD_GC,
    replicaset::REPLICASET,
    replicaset::REPLICATION_CONTROLLER,
    resourcequota::RESOURCE_QUOTA,
    root_ca_publisher::ROOT_CA_PUBLISHER,
    serviceaccount::LEGACY_TOKEN_CLEANER,
    serviceaccount::SERVICE_ACCOUNT,
    tainteviction::TAINT_EVICTION,
    ttl::TTL,
];

/// Whether a controller (canonical name) is implemented.
pub fn is_implemented(name: &str) -> bool {
    DESCRIPTORS.iter().any(|d| d.name == name)
}

/// The canonical names of the implemented controllers.
pub fn implemented() -> Vec<&'static str> {
    DESCRIPTORS.iter().map(|d| d.name).collect()
}

/// Finds a controller by its canonical name or one of its aliases.
pub fn resolve(name_or_alias: &str) -> Option<&'static ControllerName> {
    KNOWN_CONTROLLERS.iter().find(|c| c.name == name_or_alias || c.aliases.contains(&name_or_alias))
}

/// A name in `--controllers` that is neither a known controller nor an alias of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownController(pub String);

impl fmt::Display for UnknownController {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Upstream's wording, so scripts that match on it keep working.
        write!(f, "{:?} is not in the list of known controllers", self.0)
    }
}

impl std::error::Error for UnknownController {}

/// One item of `--controllers` with aliases resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Choice {
    /// `*`: every default-enabled controller.
    Defaults,
    Enable(&'static str),
    Disable(&'static str),
}

/// Which controllers `--controllers` turns on.
///
/// As upstream's `IsControllerEnabled`, items are looked at in order and the first one that
/// names a controller (as `name` or `-name`) decides; when none does, a `*` anywhere enables
/// the controllers that are on by default, and without `*` nothing else is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerSelection {
    choices: Vec<Choice>,
}

impl Default for ControllerSelection {
    /// Upstream's default `--controllers=*`.
    fn default() -> Self {
        ControllerSelection { choices: vec![Choice::Defaults] }
    }
}

impl ControllerSelection {
    /// A selection that enables nothing (`--controllers=` with an empty list).
    pub fn none() -> Self {
        ControllerSelection { choices: Vec::new() }
    }

    /// Builds a selection from `--controllers` items (`*`, `name`, `-name`, aliases allowed).
    pub fn parse<S: AsRef<str>>(items: &[S]) -> Result<Self, UnknownController> {
        let mut selection = ControllerSelection::none();
        for item in items {
            selection.push(item.as_ref())?;
        }
        Ok(selection)
    }

    /// Appends one `--controllers` item.
    pub fn push(&mut self, item: &str) -> Result<(), UnknownController> {
        let choice = if item == "*" {
            Choice::Defaults
        } else if let Some(name) = item.strip_prefix('-') {
            Choice::Disable(canonical(name)?)
        } else {
            Choice::Enable(canonical(item)?)
        };
        self.choices.push(choice);
        Ok(())
    }

    /// Whether the selection turns on the controller named `name` (canonical name or alias).
    /// Unknown names are never enabled. Cloud-provider-only and feature-gated controllers are
    /// reported as selected; whether they can run is a separate question (see
    /// [`ControllerName::cloud_provider`] and [`ControllerName::feature_gates`]).
    pub fn is_enabled(&self, name: &str) -> bool {
        let Some(controller) = resolve(name) else {
            return false;
        };
        let mut star = false;
        for choice in &self.choices {
            match *choice {
                Choice::Enable(n) if n == controller.name => return true,
                Choice::Disable(n) if n == controller.name => return false,
                Choice::Defaults => star = true,
                _ => {}
            }
        }
        star && controller.enabled_by_default
    }

    /// The controllers this selection turns on, in table order.
    pub fn enabled(&self) -> impl Iterator<Item = &'static ControllerName> + '_ {
        KNOWN_CONTROLLERS.iter().filter(|c| self.is_enabled(c.name))
    }

    /// The items with aliases replaced by canonical names, as upstream stores them in its
    /// component configuration (`["*", "bootstrap-signer-controller", "-ttl-controller"]`).
    pub fn canonical_items(&self) -> Vec<String> {
        self.choices
            .iter()
            .map(|choice| match choice {
                Choice::Defaults => "*".to_string(),
                Choice::Enable(name) => (*name).to_string(),
                Choice::Disable(name) => format!("-{name}"),
            })
            .collect()
    }
}

fn canonical(name: &str) -> Result<&'static str, UnknownController> {
    resolve(name).map(|c| c.name).ok_or_else(|| UnknownController(name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selection(items: &[&str]) -> ControllerSelection {
        ControllerSelection::parse(items).expect("known controllers")
    }

    #[test]
    fn table_is_sorted_and_names_and_aliases_are_unique() {
        let names: Vec<&str> = KNOWN_CONTROLLERS.iter().map(|c| c.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        let mut all: Vec<&str> = names.clone();
        all.extend(KNOWN_CONTROLLERS.iter().flat_map(|c| c.aliases.iter().copied()));
        let count = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), count, "a name or alias is used twice");
        assert_eq!(KNOWN_CONTROLLERS.len(), 49);
    }

    #[test]
    fn only_three_controllers_are_off_by_default() {
        let off: Vec<&str> = KNOWN_CONTROLLERS.iter().filter(|c| !c.enabled_by_default).map(|c| c.name).collect();
        assert_eq!(off, ["bootstrap-signer-controller", "selinux-warning-controller", "token-cleaner-controller"]);
    }

    #[test]
    fn resolves_names_and_aliases() {
        assert_eq!(resolve("replicaset").map(|c| c.name), Some("replicaset-controller"));
        assert_eq!(resolve("replicaset-controller").map(|c| c.name), Some("replicaset-controller"));
        assert_eq!(resolve("bootstrapsigner").map(|c| c.name), Some("bootstrap-signer-controller"));
        assert_eq!(resolve("attachdetach").map(|c| c.name), Some("persistentvolume-attach-detach-controller"));
        assert_eq!(resolve("nope"), None);
        assert_eq!(resolve(""), None);
        assert!(resolve("service").is_some_and(|c| c.cloud_provider));
    }

    #[test]
    fn default_is_star() {
        let s = ControllerSelection::default();
        assert!(s.is_enabled("replicaset-controller"));
        assert!(s.is_enabled("node-lifecycle-controller"));
        assert!(!s.is_enabled("bootstrap-signer-controller"));
        assert!(!s.is_enabled("token-cleaner-controller"));
        assert!(!s.is_enabled("selinux-warning-controller"));
        assert_eq!(s.canonical_items(), ["*"]);
        assert_eq!(s.enabled().count(), 46);
    }

    #[test]
    fn kubeadm_selection_enables_the_token_controllers() {
        let s = selection(&["*", "bootstrapsigner", "tokencleaner"]);
        assert!(s.is_enabled("bootstrap-signer-controller"));
        assert!(s.is_enabled("tokencleaner"));
        assert!(s.is_enabled("deployment-controller"));
        assert_eq!(s.canonical_items(), ["*", "bootstrap-signer-controller", "token-cleaner-controller"]);
    }

    #[test]
    fn explicit_items_win_and_the_first_one_decides() {
        let s = selection(&["*", "-replicaset"]);
        assert!(!s.is_enabled("replicaset-controller"));
        assert!(s.is_enabled("deployment-controller"));

        // Without `*` only what is named runs.
        let s = selection(&["replicaset-controller", "bootstrap-signer-controller"]);
        assert!(s.is_enabled("replicaset"));
        assert!(s.is_enabled("bootstrap-signer-controller"));
        assert!(!s.is_enabled("deployment-controller"));

        // The first item naming a controller decides, whatever comes later.
        let s = selection(&["-job", "job-controller", "*"]);
        assert!(!s.is_enabled("job-controller"));
        let s = selection(&["job", "-job-controller"]);
        assert!(s.is_enabled("job-controller"));

        // `-name` of an off-by-default controller keeps it off, `*` position does not matter.
        let s = selection(&["-bootstrapsigner", "*"]);
        assert!(!s.is_enabled("bootstrap-signer-controller"));
        assert!(s.is_enabled("ttl-controller"));
    }

    #[test]
    fn empty_selection_enables_nothing() {
        let s = ControllerSelection::none();
        assert_eq!(s.enabled().count(), 0);
        assert!(!selection(&["-ttl"]).is_enabled("ttl-controller"));
        assert!(!selection(&["-ttl"]).is_enabled("job-controller"));
    }

    #[test]
    fn unknown_names_are_errors_naming_them() {
        assert_eq!(ControllerSelection::parse(&["*", "foo"]).map(|_| ()), Err(UnknownController("foo".into())));
        let err = ControllerSelection::parse(&["-nope"]).unwrap_err();
        assert_eq!(err.to_string(), r#""nope" is not in the list of known controllers"#);
        assert!(ControllerSelection::parse(&[""]).is_err());
        assert!(!ControllerSelection::default().is_enabled("nope"));
    }
}
