//! What the secure port's `/configz`, `/flagz` and `/statusz` show, from the parsed flags:
//! `/configz` is upstream's external `v1alpha1.KubeControllerManagerConfiguration` (1.36 converts
//! the internal configuration to it and sets its kind and apiVersion) as Go's `encoding/json`
//! writes it: fields in declaration order, named by their JSON tags where the type has them
//! (`kind`, `apiVersion`, the client connection, leader election and debugging settings) and as
//! declared elsewhere, `metav1.Duration` as a Go duration string, under
//! `kubecontrollermanager.config.k8s.io`.

use std::time::Duration;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Value, json};

use super::flags::{FLAGS, FlagSpec, FlagStatus, KUBERNETES_RELEASE, Options, SignerFiles};
use crate::apimachinery::duration::{format_go_duration, parse_go_duration};
use crate::server::{DebugPages, Statusz};

/// Upstream's `ConfigzName`, also the group of the configuration type.
const CONFIGZ_NAME: &str = "kubecontrollermanager.config.k8s.io";
/// The configuration type `/configz` shows.
const CONFIGZ_KIND: &str = "KubeControllerManagerConfiguration";
/// The API resources the garbage collector ignores (upstream's `GCIgnoredResources` default).
const GC_IGNORED: [(&str, &str); 2] = [("", "events"), ("events.k8s.io", "events")];

/// The pages `options` asks for: `/configz` always, `/flagz` and `/statusz` behind the
/// `ComponentFlagz` and `ComponentStatusz` gates (beta and on in 1.36).
pub fn debug_pages(options: &Options) -> DebugPages {
    let gates = &options.generic.feature_gates;
    let flagz = gates.is_enabled("ComponentFlagz");
    DebugPages {
        configz: Some(configz(options)),
        flagz: flagz.then(|| flag_values(options)),
        statusz: gates.is_enabled("ComponentStatusz").then(|| statusz(options, flagz)),
    }
}

/// `/statusz`'s versions, and the paths upstream's handler lists when statusz is installed
/// (the profiling and `/metrics/slis` paths are unlisted).
fn statusz(options: &Options, flagz: bool) -> Statusz {
    let mut paths = vec!["/configz", "/healthz", "/metrics"];
    if flagz {
        paths.push("/flagz");
    }
    paths.sort_unstable();
    Statusz {
        runtime_version: format!("none (Rust; kube-controller-manager v{})", env!("CARGO_PKG_VERSION")),
        binary_version: KUBERNETES_RELEASE.to_string(),
        emulation_version: Some(options.generic.compatibility.emulation.to_string()),
        paths: paths.into_iter().map(str::to_string).collect(),
    }
}

/// Every flag upstream has, with its value as pflag's `Value.String()` shows it.
fn flag_values(options: &Options) -> Vec<(String, String)> {
    FLAGS
        .iter()
        .filter(|f| !matches!(f.status, FlagStatus::Removed(_)))
        .map(|f| (f.name.to_string(), flag_text(options, f)))
        .collect()
}

/// A flag's value as text: what was given (all occurrences for a list), else its default.
fn flag_text(options: &Options, flag: &FlagSpec) -> String {
    let given: Vec<&str> =
        options.given_values.iter().filter(|(n, _)| *n == flag.name).map(|(_, v)| v.as_str()).collect();
    let list = matches!(flag.kind.type_name, "strings" | "int32Slice");
    let text = match given.last() {
        Some(last) if !list => last.to_string(),
        Some(_) => given.join(","),
        None => flag.default.to_string(),
    };
    if flag.name == "feature-gates" {
        // The registry flag's `String()`: `<component>:<pair>`, by component, the default
        // component's prefix empty.
        return options.generic.feature_gates.flag_text();
    }
    match flag.kind.type_name {
        "strings" | "int32Slice" | "stringToString" | "namedCertKey" => format!("[{text}]"),
        "version" if text.is_empty() => "false".into(),
        "quantity" if text.is_empty() => "0".into(),
        "duration" => format_go_duration(parse_go_duration(&text).unwrap_or_default()),
        "bool" if text.is_empty() => "false".into(),
        "int" | "int32" | "float32" | "float64" | "Level" if text.is_empty() => "0".into(),
        _ => text,
    }
}

/// An object whose fields keep their order, as Go writes a struct.
enum Go {
    Struct(Vec<(&'static str, Go)>),
    Value(Value),
}

impl Serialize for Go {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Go::Value(value) => value.serialize(serializer),
            Go::Struct(fields) => {
                let mut map = serializer.serialize_map(Some(fields.len()))?;
                for (name, value) in fields {
                    map.serialize_entry(name, value)?;
                }
                map.end()
            }
        }
    }
}

fn v(value: impl Serialize) -> Go {
    Go::Value(json!(value))
}

/// A float as Go's `encoding/json` writes it: the shortest text that reads back as the same
/// `float32`/`float64`, integral values without a fraction.
fn float(text: String) -> Go {
    let value: f64 = text.parse().unwrap_or_default();
    if value.fract() == 0.0 && value.abs() < 1e15 { v(value as i64) } else { v(value) }
}

fn d(duration: Duration) -> Go {
    Go::Value(Value::String(format_go_duration(duration)))
}

fn s(fields: Vec<(&'static str, Go)>) -> Go {
    Go::Struct(fields)
}

/// A flag's given text, else its default (the raw strings upstream keeps for CIDR flags).
fn raw(options: &Options, name: &str) -> String {
    options
        .given_value(name)
        .map(str::to_string)
        .or_else(|| FLAGS.iter().find(|f| f.name == name).map(|f| f.default.to_string()))
        .unwrap_or_default()
}

/// `/configz`'s JSON.
pub fn configz(options: &Options) -> String {
    let config = s(vec![
        ("kind", v(CONFIGZ_KIND)),
        ("apiVersion", v(format!("{CONFIGZ_NAME}/v1alpha1"))),
        ("Generic", generic(options)),
        ("KubeCloudShared", kube_cloud_shared(options)),
        ("AttachDetachController", {
            let a = &options.attach_detach;
            s(vec![
                ("DisableAttachDetachReconcilerSync", v(a.disable_reconcile_sync)),
                ("ReconcilerSyncLoopPeriod", d(a.reconcile_sync_period)),
                ("disableForceDetachOnTimeout", v(a.disable_force_detach_on_timeout)),
            ])
        }),
        ("CSRSigningController", csr_signing(options)),
        ("DaemonSetController", s(vec![("ConcurrentDaemonSetSyncs", v(options.concurrency.daemonset_syncs))])),
        ("DeploymentController", s(vec![("ConcurrentDeploymentSyncs", v(options.concurrency.deployment_syncs))])),
        ("StatefulSetController", s(vec![("ConcurrentStatefulSetSyncs", v(options.concurrency.statefulset_syncs))])),
        ("DeprecatedController", s(vec![])),
        ("EndpointController", {
            s(vec![
                ("ConcurrentEndpointSyncs", v(options.concurrency.endpoint_syncs)),
                ("EndpointUpdatesBatchPeriod", d(options.endpoints.endpoint_updates_batch_period)),
            ])
        }),
        ("EndpointSliceController", {
            s(vec![
                ("ConcurrentServiceEndpointSyncs", v(options.concurrency.service_endpoint_syncs)),
                ("MaxEndpointsPerSlice", v(options.endpoints.max_endpoints_per_slice)),
                ("EndpointUpdatesBatchPeriod", d(options.endpoints.endpointslice_updates_batch_period)),
            ])
        }),
        ("EndpointSliceMirroringController", {
            s(vec![
                ("MirroringConcurrentServiceEndpointSyncs", v(options.concurrency.mirroring_service_endpoint_syncs)),
                ("MirroringMaxEndpointsPerSubset", v(options.endpoints.mirroring_max_endpoints_per_subset)),
                ("MirroringEndpointUpdatesBatchPeriod", d(options.endpoints.mirroring_updates_batch_period)),
            ])
        }),
        (
            "EphemeralVolumeController",
            s(vec![("ConcurrentEphemeralVolumeSyncs", v(options.concurrency.ephemeral_volume_syncs))]),
        ),
        ("GarbageCollectorController", {
            let ignored: Vec<Value> = GC_IGNORED.iter().map(|(g, r)| json!({"Group": g, "Resource": r})).collect();
            s(vec![
                ("EnableGarbageCollector", v(options.garbage_collector.enabled)),
                ("ConcurrentGCSyncs", v(options.concurrency.gc_syncs)),
                ("GCIgnoredResources", v(ignored)),
            ])
        }),
        ("HPAController", hpa(options)),
        ("JobController", s(vec![("ConcurrentJobSyncs", v(options.concurrency.job_syncs))])),
        ("CronJobController", s(vec![("ConcurrentCronJobSyncs", v(options.concurrency.cron_job_syncs))])),
        ("LegacySATokenCleaner", s(vec![("CleanUpPeriod", d(options.service_account.legacy_token_clean_up_period))])),
        ("NamespaceController", {
            s(vec![
                ("NamespaceSyncPeriod", d(options.namespace.sync_period)),
                ("ConcurrentNamespaceSyncs", v(options.concurrency.namespace_syncs)),
            ])
        }),
        ("NodeIPAMController", node_ipam(options)),
        ("NodeLifecycleController", {
            let n = &options.node_lifecycle;
            s(vec![
                ("NodeEvictionRate", float(n.node_eviction_rate.to_string())),
                ("SecondaryNodeEvictionRate", float(n.secondary_node_eviction_rate.to_string())),
                ("NodeStartupGracePeriod", d(n.node_startup_grace_period)),
                ("NodeMonitorGracePeriod", d(n.node_monitor_grace_period)),
                // Only the external type still has it; conversion leaves it zero.
                ("PodEvictionTimeout", d(Duration::ZERO)),
                ("LargeClusterSizeThreshold", v(n.large_cluster_size_threshold)),
                ("UnhealthyZoneThreshold", float(n.unhealthy_zone_threshold.to_string())),
            ])
        }),
        ("PersistentVolumeBinderController", persistent_volume(options)),
        ("PodGCController", s(vec![("TerminatedPodGCThreshold", v(options.pod_gc.terminated_pod_gc_threshold))])),
        ("ReplicaSetController", s(vec![("ConcurrentRSSyncs", v(options.concurrency.replicaset_syncs))])),
        ("ReplicationController", s(vec![("ConcurrentRCSyncs", v(options.concurrency.rc_syncs))])),
        ("ResourceQuotaController", {
            s(vec![
                ("ResourceQuotaSyncPeriod", d(options.resource_quota.sync_period)),
                ("ConcurrentResourceQuotaSyncs", v(options.concurrency.resource_quota_syncs)),
            ])
        }),
        ("SAController", {
            let sa = &options.service_account;
            s(vec![
                ("ServiceAccountKeyFile", v(&sa.private_key_file)),
                ("ConcurrentSATokenSyncs", v(options.concurrency.serviceaccount_token_syncs)),
                ("RootCAFile", v(&sa.root_ca_file)),
            ])
        }),
        ("ServiceController", s(vec![("ConcurrentServiceSyncs", v(options.concurrency.service_syncs))])),
        (
            "TTLAfterFinishedController",
            s(vec![("ConcurrentTTLSyncs", v(options.concurrency.ttl_after_finished_syncs))]),
        ),
        (
            "ValidatingAdmissionPolicyStatusController",
            s(vec![("ConcurrentPolicySyncs", v(options.concurrency.validating_admission_policy_status_syncs))]),
        ),
        (
            "DeviceTaintEvictionController",
            s(vec![("ConcurrentSyncs", v(options.concurrency.device_taint_eviction_syncs))]),
        ),
        ("ResourceClaimController", s(vec![("ConcurrentSyncs", v(options.concurrency.resource_claim_syncs))])),
    ]);
    serde_json::to_string(&s(vec![(CONFIGZ_NAME, config)])).unwrap_or_default()
}

fn generic(options: &Options) -> Go {
    let g = &options.generic;
    let (c, l) = (&g.client_connection, &g.leader_election);
    let controllers: Vec<String> = raw(options, "controllers").split(',').map(str::to_string).collect();
    s(vec![
        // The insecure port's, removed upstream: zero values that stay in the type.
        ("Port", v(0)),
        ("Address", v("0.0.0.0")),
        ("MinResyncPeriod", d(g.min_resync_period)),
        (
            "ClientConnection",
            s(vec![
                ("kubeconfig", v(&c.kubeconfig)),
                ("acceptContentTypes", v("")),
                ("contentType", v(&c.content_type)),
                ("qps", float(c.qps.to_string())),
                ("burst", v(c.burst)),
            ]),
        ),
        ("ControllerStartInterval", d(g.controller_start_interval)),
        (
            "LeaderElection",
            s(vec![
                ("leaderElect", v(l.leader_elect)),
                ("leaseDuration", d(l.lease_duration)),
                ("renewDeadline", d(l.renew_deadline)),
                ("retryPeriod", d(l.retry_period)),
                ("resourceLock", v(&l.resource_lock)),
                ("resourceName", v(&l.resource_name)),
                ("resourceNamespace", v(&l.resource_namespace)),
            ]),
        ),
        ("Controllers", v(controllers)),
        (
            "Debugging",
            s(vec![
                ("enableProfiling", v(g.debugging.profiling)),
                ("enableContentionProfiling", v(g.debugging.contention_profiling)),
            ]),
        ),
        ("LeaderMigrationEnabled", v(g.leader_migration.enabled)),
        (
            "LeaderMigration",
            s(vec![("leaderName", v("")), ("resourceLock", v("")), ("controllerLeaders", v(Value::Null))]),
        ),
    ])
}

fn kube_cloud_shared(options: &Options) -> Go {
    let cloud = &options.cloud;
    let untagged = options.given_value("allow-untagged-cloud").is_some_and(|t| t == "true");
    let node_sync = parse_go_duration(&raw(options, "node-sync-period")).unwrap_or_default();
    s(vec![
        ("CloudProvider", s(vec![("Name", v(&cloud.provider)), ("CloudConfigFile", v(&cloud.config_file))])),
        ("ExternalCloudVolumePlugin", v(&cloud.external_volume_plugin)),
        ("UseServiceAccountCredentials", v(options.generic.use_service_account_credentials)),
        ("AllowUntaggedCloud", v(untagged)),
        ("RouteReconciliationPeriod", d(cloud.route_reconciliation_period)),
        ("NodeMonitorPeriod", d(options.node_lifecycle.node_monitor_period)),
        ("ClusterName", v(&options.generic.cluster_name)),
        ("ClusterCIDR", v(raw(options, "cluster-cidr"))),
        ("AllocateNodeCIDRs", v(options.node_ipam.allocate_node_cidrs)),
        ("CIDRAllocatorType", v(&options.node_ipam.cidr_allocator_type)),
        ("ConfigureCloudRoutes", v(cloud.configure_routes)),
        ("NodeSyncPeriod", d(node_sync)),
    ])
}

fn csr_signing(options: &Options) -> Go {
    let c = &options.csr_signing;
    let files = |f: &SignerFiles| s(vec![("CertFile", v(&f.cert_file)), ("KeyFile", v(&f.key_file))]);
    s(vec![
        ("ClusterSigningCertFile", v(&c.cluster.cert_file)),
        ("ClusterSigningKeyFile", v(&c.cluster.key_file)),
        ("KubeletServingSignerConfiguration", files(&c.kubelet_serving)),
        ("KubeletClientSignerConfiguration", files(&c.kubelet_client)),
        ("KubeAPIServerClientSignerConfiguration", files(&c.kube_apiserver_client)),
        ("LegacyUnknownSignerConfiguration", files(&c.legacy_unknown)),
        ("ClusterSigningDuration", d(c.duration)),
    ])
}

fn hpa(options: &Options) -> Go {
    let h = &options.hpa;
    s(vec![
        ("ConcurrentHorizontalPodAutoscalerSyncs", v(options.concurrency.horizontal_pod_autoscaler_syncs)),
        ("HorizontalPodAutoscalerSyncPeriod", d(h.sync_period)),
        ("HorizontalPodAutoscalerDownscaleStabilizationWindow", d(h.downscale_stabilization)),
        ("HorizontalPodAutoscalerTolerance", float(h.tolerance.to_string())),
        ("HorizontalPodAutoscalerCPUInitializationPeriod", d(h.cpu_initialization_period)),
        ("HorizontalPodAutoscalerInitialReadinessDelay", d(h.initial_readiness_delay)),
    ])
}

fn node_ipam(options: &Options) -> Go {
    let services = raw(options, "service-cluster-ip-range");
    let mut ranges = services.split(',');
    let ipam = &options.node_ipam;
    s(vec![
        ("ServiceCIDR", v(ranges.next().unwrap_or_default())),
        ("SecondaryServiceCIDR", v(ranges.next().unwrap_or_default())),
        ("NodeCIDRMaskSize", v(ipam.node_cidr_mask_size)),
        ("NodeCIDRMaskSizeIPv4", v(ipam.node_cidr_mask_size_ipv4)),
        ("NodeCIDRMaskSizeIPv6", v(ipam.node_cidr_mask_size_ipv6)),
    ])
}

fn persistent_volume(options: &Options) -> Go {
    let pv = &options.persistent_volume;
    let r = &pv.recycler;
    s(vec![
        ("PVClaimBinderSyncPeriod", d(pv.claim_binder_sync_period)),
        (
            "VolumeConfiguration",
            s(vec![
                ("EnableHostPathProvisioning", v(pv.enable_hostpath_provisioner)),
                ("EnableDynamicProvisioning", v(pv.enable_dynamic_provisioning)),
                (
                    "PersistentVolumeRecyclerConfiguration",
                    s(vec![
                        // Upstream's constant: no flag sets it.
                        ("MaximumRetry", v(3)),
                        ("MinimumTimeoutNFS", v(r.minimum_timeout_nfs)),
                        ("PodTemplateFilePathNFS", v(&r.pod_template_nfs)),
                        ("IncrementTimeoutNFS", v(r.increment_timeout_nfs)),
                        ("PodTemplateFilePathHostPath", v(&r.pod_template_hostpath)),
                        ("MinimumTimeoutHostPath", v(r.minimum_timeout_hostpath)),
                        ("IncrementTimeoutHostPath", v(r.increment_timeout_hostpath)),
                    ]),
                ),
                ("FlexVolumePluginDir", v(&pv.flex_volume_plugin_dir)),
            ]),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::flags::{Command, parse};

    fn options(args: &[&str]) -> Options {
        match parse(args.iter().map(Into::into)) {
            Ok(Command::Run(options)) => *options,
            other => panic!("{args:?}: {:?}", other.err()),
        }
    }

    #[test]
    fn configz_keeps_go_field_order_and_duration_strings() {
        let text = configz(&options(&["--node-monitor-grace-period=2m", "--controllers=*,-ttl-controller"]));
        assert!(text.starts_with(r#"{"kubecontrollermanager.config.k8s.io":{"kind":"KubeControllerManagerConfiguration","apiVersion":"kubecontrollermanager.config.k8s.io/v1alpha1","Generic":{"Port":0,"Address":"0.0.0.0","MinResyncPeriod":"12h0m0s","#), "{text}");
        let value: Value = serde_json::from_str(&text).unwrap();
        let config = &value[CONFIGZ_NAME];
        assert_eq!(config["NodeLifecycleController"]["NodeMonitorGracePeriod"], "2m0s");
        assert_eq!(config["NodeLifecycleController"]["UnhealthyZoneThreshold"], json!(0.55));
        assert_eq!(config["Generic"]["Controllers"], json!(["*", "-ttl-controller"]));
        assert!(text.contains(r#""qps":20,"#), "{text}");
        assert!(text.contains(r#""UnhealthyZoneThreshold":0.55}"#), "{text}");
        assert_eq!(config["Generic"]["LeaderElection"]["leaseDuration"], "15s");
        assert_eq!(config["NodeLifecycleController"]["PodEvictionTimeout"], "0s");
        assert!(text.ends_with(r#""DeviceTaintEvictionController":{"ConcurrentSyncs":8},"ResourceClaimController":{"ConcurrentSyncs":50}}}"#), "{text}");
        assert_eq!(config["HPAController"]["HorizontalPodAutoscalerTolerance"], json!(0.1));
        assert_eq!(config["DeprecatedController"], json!({}));
    }

    #[test]
    fn flag_values_show_given_values_and_defaults_as_pflag_does() {
        let o = options(&[
            "--leader-elect-lease-duration=1m",
            "--requestheader-group-headers=a",
            "--requestheader-group-headers=b",
        ]);
        let values: std::collections::BTreeMap<String, String> = flag_values(&o).into_iter().collect();
        assert_eq!(values["leader-elect-lease-duration"], "1m0s");
        assert_eq!(values["requestheader-group-headers"], "[a,b]");
        assert_eq!(values["requestheader-username-headers"], "[x-remote-user]");
        assert_eq!(values["use-service-account-credentials"], "false");
        assert_eq!(values["secure-port"], "10257");
        assert_eq!(values["tls-sni-cert-key"], "[]");
        assert_eq!(values["version"], "false");
        let gated = options(&["--feature-gates=ComponentStatusz=true,ComponentFlagz=true"]);
        let values: std::collections::BTreeMap<String, String> = flag_values(&gated).into_iter().collect();
        assert_eq!(values["feature-gates"], ":ComponentStatusz=true,:ComponentFlagz=true");
        assert_eq!(values["tls-curve-preferences"], "[]");
        assert_eq!(values["controller-shutdown-timeout"], "10s");
        assert_eq!(values["emulated-version"], "[]");
        assert!(!values.contains_key("pod-eviction-timeout"), "removed upstream");
    }

    #[test]
    fn flagz_and_statusz_follow_their_gates() {
        let pages = debug_pages(&options(&[]));
        assert!(pages.flagz.is_some() && pages.statusz.is_some() && pages.configz.is_some(), "on in 1.36");
        let statusz = pages.statusz.unwrap();
        assert_eq!((statusz.binary_version.as_str(), statusz.emulation_version.as_deref()), ("1.36.2", Some("1.36")));
        assert_eq!(statusz.paths, ["/configz", "/flagz", "/healthz", "/metrics"]);
        let off = debug_pages(&options(&["--feature-gates=ComponentFlagz=false,ComponentStatusz=false"]));
        assert!(off.flagz.is_none() && off.statusz.is_none());
        let emulated = debug_pages(&options(&["--emulated-version=1.34", "--feature-gates=ComponentStatusz=true"]));
        let emulated = emulated.statusz.unwrap();
        assert_eq!(emulated.emulation_version.as_deref(), Some("1.34"));
        assert!(debug_pages(&options(&["--emulated-version=1.35"])).flagz.is_none(), "alpha and off in 1.35");
    }
}
