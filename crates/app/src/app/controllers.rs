//! The one table of controllers: every controller upstream v1.36 knows, by canonical name, with
//! its aliases, whether `*` turns it on, the feature gates and cloud provider it needs, the
//! ServiceAccount (client name) and Event component it runs as, and, for those built here, how
//! to build it from the flags. Nothing else in `src/` names a controller.
//!
//! Names, aliases and defaults follow `cmd/kube-controller-manager/names` and the descriptors
//! of `NewControllerDescriptors`: a controller that predates the naming scheme keeps the short
//! alias it used to have (`replicaset`), accepted anywhere a controller is named.

use std::fmt;

use crate::apimachinery::errors::BoxError;
use crate::app::flags::{Options, ValidationError, validate};
use crate::client::Client;
use crate::controllers::{
    attachdetach, bootstrap, certificates, clusterroleaggregation, cronjob, daemon, deployment, devicetainteviction,
    disruption, endpoint, endpointslice, endpointslicemirroring, ephemeral, expand, garbagecollector, job, namespace,
    nodeipam, nodelifecycle, persistentvolume, podautoscaler, podgc, podgroupprotection, pvcprotection, pvprotection,
    replicaset, resourceclaim, resourcepoolstatusrequest, resourcequota, root_ca_publisher, selinuxwarning,
    serviceaccount, servicecidrs, statefulset, storageversiongc, storageversionmigrator, tainteviction, ttl,
    ttlafterfinished, vacprotection, validatingadmissionpolicystatus,
};
use crate::runtime::controller::{Controller, ControllerContext, ControllerIdentity};

/// Builds a controller from the flags (upstream's `startXController` functions).
pub type StartFn = fn(&ControllerContext<'_>, &Options) -> Result<Controller, BoxError>;

/// Checks a controller's own flags (part of upstream's `Validate`).
pub type FlagCheck = fn(&Options) -> Result<(), ValidationError>;

/// Why a controller of the table cannot be built from the flags (before its own constructor,
/// whose errors its start function passes on as they are).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--cidr-allocator-type` is not the range allocator.
    #[error("invalid CIDR allocator type: {0}")]
    CidrAllocatorType(String),
    /// The storage version migrator without the garbage collector, whose monitors it reads.
    #[error("storage version migrator requires garbage collector")]
    GarbageCollectorOff,
    /// The node IPAM flags refused (the start-up checks, as upstream's).
    #[error("{0}")]
    NodeIpam(#[from] ValidationError),
    /// `--root-ca-file` cannot be read.
    #[error("error parsing root-ca-file at {file}: {source}")]
    ReadRootCa {
        /// The file.
        file: String,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
    /// `--root-ca-file` is not PEM.
    #[error("error parsing root-ca-file at {file}: {source}")]
    ParseRootCa {
        /// The file.
        file: String,
        /// Why not.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// `--root-ca-file` holds no certificate (upstream's `readCA`).
    #[error("error parsing root-ca-file at {file}: data does not contain any valid RSA or ECDSA certificates")]
    NoRootCa {
        /// The file.
        file: String,
    },
}

/// One controller of the upstream controller manager.
#[derive(Debug, Clone, Copy)]
pub struct ControllerDescriptor {
    /// The canonical name, as `--help` lists it and logs name the controller.
    pub name: &'static str,
    /// Older names still accepted by `--controllers`.
    pub aliases: &'static [&'static str],
    /// Whether `*` in `--controllers` turns it on.
    pub enabled_by_default: bool,
    /// Runs only with an in-tree cloud provider, which upstream no longer has: with
    /// `--cloud-provider` empty or `external` upstream skips it even when it is selected.
    pub cloud_provider: bool,
    /// Feature gates that must all be enabled for upstream to start it even when selected.
    pub feature_gates: &'static [&'static str],
    /// The client name it asks upstream's client builder for (`ClientOrDie("<name>")`): with
    /// `--use-service-account-credentials`, its ServiceAccount in kube-system, which RBAC's
    /// `system:controller:*` bindings name. `None`: the root credentials under its own name
    /// (the token controller, which must run before the others can get tokens).
    pub service_account: Option<&'static str>,
    /// The `source.component` of its Events when not its name (`EventSource{Component: ...}`).
    pub event_component: Option<&'static str>,
    /// Started before all the others, as upstream starts the token controller.
    pub starts_first: bool,
    /// Upstream's checks of its own flags, made when it is selected.
    pub check_flags: Option<FlagCheck>,
    /// A flag that keeps it off even when `--controllers` selects it.
    pub turned_off_by: Option<fn(&Options) -> bool>,
    /// How to build it; `None` while it is not built here yet.
    pub start: Option<StartFn>,
}

impl ControllerDescriptor {
    /// Its ServiceAccount, or its own name for the client built on the root credentials.
    pub fn client_name(&self) -> &'static str {
        self.service_account.unwrap_or(self.name)
    }

    /// The `source.component` of its Events.
    pub fn event_component(&self) -> &'static str {
        self.event_component.unwrap_or(self.name)
    }

    /// Who it is to the API server: with `use_service_account_credentials`, its ServiceAccount.
    pub fn identity(&self, use_service_account_credentials: bool) -> ControllerIdentity {
        ControllerIdentity {
            name: self.name,
            client_name: self.client_name(),
            service_account: self.service_account.filter(|_| use_service_account_credentials),
            event_component: self.event_component(),
        }
    }

    /// The same controller built by `start` instead (tests run controllers with other timings).
    pub fn started_by(self, start: StartFn) -> ControllerDescriptor {
        ControllerDescriptor { start: Some(start), ..self }
    }

    const fn account(self, service_account: &'static str) -> Self {
        ControllerDescriptor { service_account: Some(service_account), ..self }
    }

    const fn events(self, component: &'static str) -> Self {
        ControllerDescriptor { event_component: Some(component), ..self }
    }

    const fn first(self) -> Self {
        ControllerDescriptor { starts_first: true, ..self }
    }

    const fn checks(self, check_flags: FlagCheck) -> Self {
        ControllerDescriptor { check_flags: Some(check_flags), ..self }
    }

    const fn off_when(self, turned_off_by: fn(&Options) -> bool) -> Self {
        ControllerDescriptor { turned_off_by: Some(turned_off_by), ..self }
    }

    const fn starts(self, start: StartFn) -> Self {
        ControllerDescriptor { start: Some(start), ..self }
    }
}

/// An always-on controller without gates.
const fn plain(name: &'static str, aliases: &'static [&'static str]) -> ControllerDescriptor {
    ControllerDescriptor {
        name,
        aliases,
        enabled_by_default: true,
        cloud_provider: false,
        feature_gates: &[],
        service_account: None,
        event_component: None,
        starts_first: false,
        check_flags: None,
        turned_off_by: None,
        start: None,
    }
}

/// A default-enabled controller that upstream starts only when its feature gates are on.
const fn gated(
    name: &'static str,
    aliases: &'static [&'static str],
    feature_gates: &'static [&'static str],
) -> ControllerDescriptor {
    ControllerDescriptor { feature_gates, ..plain(name, aliases) }
}

/// A controller that only runs with an in-tree cloud provider.
const fn cloud(name: &'static str, aliases: &'static [&'static str]) -> ControllerDescriptor {
    ControllerDescriptor { cloud_provider: true, ..plain(name, aliases) }
}

/// A controller that `*` leaves off; it has to be named in `--controllers`.
const fn off_by_default(name: &'static str, aliases: &'static [&'static str]) -> ControllerDescriptor {
    ControllerDescriptor { enabled_by_default: false, ..plain(name, aliases) }
}

/// Off by default and gated.
const fn off_by_default_gated(
    name: &'static str,
    aliases: &'static [&'static str],
    feature_gates: &'static [&'static str],
) -> ControllerDescriptor {
    ControllerDescriptor { enabled_by_default: false, ..gated(name, aliases, feature_gates) }
}

/// The signing controller's CAs and duration from the `--cluster-signing-*` flags.
fn csr_signing(o: &crate::app::flags::CsrSigningOptions) -> certificates::signer::Config {
    fn pair(f: &crate::app::flags::SignerFiles) -> (&str, &str) {
        (f.cert_file.as_str(), f.key_file.as_str())
    }
    let per_signer =
        [pair(&o.kubelet_serving), pair(&o.kubelet_client), pair(&o.kube_apiserver_client), pair(&o.legacy_unknown)];
    certificates::signer::Config {
        signers: certificates::signer::signers_from_files(pair(&o.cluster), per_signer),
        duration: o.duration,
    }
}

/// `--concurrent-*-syncs` as a worker count (at least one).
fn workers(flag: i32) -> usize {
    usize::try_from(flag).unwrap_or(0).max(1)
}

/// Every controller upstream v1.36 knows, sorted by canonical name as `--help` lists them (but
/// the OpenShift build's `service-ca-certificate-publisher-controller`, which upstream
/// Kubernetes does not have).
#[rustfmt::skip]
pub static CONTROLLERS: &[ControllerDescriptor] = &[
    off_by_default("bootstrap-signer-controller", &["bootstrapsigner"])
        .account("bootstrap-signer")
        .starts(|c, _| Ok(bootstrap::signer::new(c))),
    plain("certificatesigningrequest-approving-controller", &["csrapproving"])
        .account("certificate-controller")
        .starts(|c, _| Ok(certificates::approver::new(c, certificates::approver::Config::default()))),
    plain("certificatesigningrequest-cleaner-controller", &["csrcleaner"])
        .account("certificate-controller")
        .starts(|c, _| Ok(certificates::cleaner::new(c, certificates::cleaner::Config::default()))),
    plain("certificatesigningrequest-signing-controller", &["csrsigning"])
        .account("certificate-controller")
        .starts(|c, o| Ok(certificates::signer::new(c, csr_signing(&o.csr_signing))?)),
    cloud("cloud-node-lifecycle-controller", &["cloud-node-lifecycle"]),
    plain("clusterrole-aggregation-controller", &["clusterrole-aggregation"])
        .account("clusterrole-aggregation-controller")
        .starts(|c, _| Ok(clusterroleaggregation::new(c))),
    plain("cronjob-controller", &["cronjob"])
        .account("cronjob-controller")
        .starts(|c, o| Ok(cronjob::new(c, cronjob::Config { workers: workers(o.concurrency.cron_job_syncs) }))),
    plain("daemonset-controller", &["daemonset"])
        .account("daemon-set-controller")
        .starts(|c, o| {
            let config = daemon::Config {
                workers: workers(o.concurrency.daemonset_syncs),
                stale_controller_consistency: o.generic.feature_gates.is_enabled("StaleControllerConsistencyDaemonSet"),
            };
            Ok(daemon::new(c, config))
        }),
    plain("deployment-controller", &["deployment"])
        .account("deployment-controller")
        .starts(|c, o| {
            let config = deployment::Config {
                workers: workers(o.concurrency.deployment_syncs),
                terminating_replicas: o.generic.feature_gates.is_enabled("DeploymentReplicaSetTerminatingReplicas"),
            };
            Ok(deployment::new(c, config))
        }),
    gated("device-taint-eviction-controller", &[], &["DynamicResourceAllocation", "DRADeviceTaints"])
        .account("device-taint-eviction-controller")
        .starts(|c, o| {
            let device_taint_rules = o.generic.feature_gates.is_enabled("DRADeviceTaintRules");
            Ok(devicetainteviction::new(c, devicetainteviction::Config { workers: workers(o.concurrency.device_taint_eviction_syncs), device_taint_rules }))
        }),
    plain("disruption-controller", &["disruption"])
        .account("disruption-controller")
        .events("controllermanager")
        .starts(|c, _| Ok(disruption::new(c, disruption::Config::default()))),
    plain("endpoints-controller", &["endpoint"])
        .account("endpoint-controller")
        .events("endpoint-controller")
        .starts(|c, o| {
            let config = endpoint::Config {
                workers: workers(o.concurrency.endpoint_syncs),
                batch_period: o.endpoints.endpoint_updates_batch_period,
            };
            Ok(endpoint::new(c, config))
        }),
    plain("endpointslice-controller", &["endpointslice"])
        .account("endpointslice-controller")
        .events("endpoint-slice-controller")
        .starts(|c, o| {
            let config = endpointslice::Config {
                workers: workers(o.concurrency.service_endpoint_syncs),
                max_endpoints_per_slice: usize::try_from(o.endpoints.max_endpoints_per_slice).unwrap_or(100).max(1),
                batch_period: o.endpoints.endpointslice_updates_batch_period,
            };
            Ok(endpointslice::new(c, config))
        }),
    plain("endpointslice-mirroring-controller", &["endpointslicemirroring"])
        .account("endpointslicemirroring-controller")
        .events("endpoint-slice-mirroring-controller")
        .starts(|c, o| {
            let config = endpointslicemirroring::Config {
                workers: workers(o.concurrency.mirroring_service_endpoint_syncs),
                max_endpoints_per_subset: usize::try_from(o.endpoints.mirroring_max_endpoints_per_subset)
                    .unwrap_or(1000)
                    .max(1),
                batch_period: o.endpoints.mirroring_updates_batch_period,
            };
            Ok(endpointslicemirroring::new(c, config))
        }),
    plain("ephemeral-volume-controller", &["ephemeral-volume"])
        .account("ephemeral-volume-controller")
        .events("ephemeral_volume")
        .starts(|c, o| Ok(ephemeral::new(c, ephemeral::Config { workers: workers(o.concurrency.ephemeral_volume_syncs) }))),
    plain("garbage-collector-controller", &["garbagecollector"])
        .account("generic-garbage-collector")
        .off_when(|o| !o.garbage_collector.enabled)
        .starts(|c, o| Ok(garbagecollector::new(c, garbagecollector::Config { workers: workers(o.concurrency.gc_syncs) }))),
    plain("horizontal-pod-autoscaler-controller", &["horizontalpodautoscaling"])
        .account("horizontal-pod-autoscaler")
        .events("horizontal-pod-autoscaler")
        .starts(|c, o| {
            let config = podautoscaler::Config {
                workers: workers(o.concurrency.horizontal_pod_autoscaler_syncs),
                sync_period: o.hpa.sync_period,
                downscale_stabilization: o.hpa.downscale_stabilization,
                tolerance: o.hpa.tolerance,
                cpu_initialization_period: o.hpa.cpu_initialization_period,
                initial_readiness_delay: o.hpa.initial_readiness_delay,
                configurable_tolerance: o.generic.feature_gates.is_enabled("HPAConfigurableTolerance"),
            };
            let gates = podautoscaler::Gates {
                pod_level_resources: o.generic.feature_gates.is_enabled("PodLevelResources"),
                scale_to_zero: o.generic.feature_gates.is_enabled("HPAScaleToZero"),
            };
            Ok(podautoscaler::new_with_gates(c, config, gates))
        }),
    plain("job-controller", &["job"])
        .account("job-controller")
        .starts(|c, o| {
            let gates = &o.generic.feature_gates;
            let config = job::Config {
                workers: workers(o.concurrency.job_syncs),
                managed_by: gates.is_enabled("JobManagedBy"),
                pod_replacement_policy: gates.is_enabled("JobPodReplacementPolicy"),
                mutable_scheduling_directives: gates.is_enabled("MutableSchedulingDirectivesForSuspendedJobs"),
                stale_controller_consistency: gates.is_enabled("StaleControllerConsistencyJob"),
            };
            Ok(job::new(c, config))
        }),
    gated("kube-apiserver-serving-clustertrustbundle-publisher-controller", &[], &["ClusterTrustBundle"])
        .account("kube-apiserver-serving-clustertrustbundle-publisher")
        .starts(start_cluster_trust_bundle_publisher),
    plain("legacy-serviceaccount-token-cleaner-controller", &["legacy-service-account-token-cleaner"])
        .account("legacy-service-account-token-cleaner")
        .starts(|c, o| {
            let config = serviceaccount::CleanerConfig { period: o.service_account.legacy_token_clean_up_period };
            Ok(serviceaccount::new_legacy_token_cleaner(c, config)?)
        }),
    plain("namespace-controller", &["namespace"]).account("namespace-controller").starts(|c, o| {
        let config = namespace::Config {
            workers: workers(o.concurrency.namespace_syncs),
            resync_period: o.namespace.sync_period,
            ordered_deletion: o.generic.feature_gates.is_enabled("OrderedNamespaceDeletion"),
        };
        Ok(namespace::new(c, config))
    }),
    plain("node-ipam-controller", &["nodeipam"])
        .account("node-controller")
        .events("cidrAllocator")
        .checks(validate::node_ipam)
        .starts(start_node_ipam),
    plain("node-lifecycle-controller", &["nodelifecycle"])
        .account("node-controller")
        .events("node-controller")
        .starts(start_node_lifecycle),
    cloud("node-route-controller", &["route"]),
    plain("persistentvolume-attach-detach-controller", &["attachdetach"])
        .account("attachdetach-controller")
        .events("attachdetach-controller")
        .checks(validate::attach_detach)
        .starts(|c, o| {
            let options = &o.attach_detach;
            Ok(attachdetach::new(c, attachdetach::Config {
                reconcile_sync_period: options.reconcile_sync_period,
                disable_reconcile_sync: options.disable_reconcile_sync,
                disable_force_detach_on_timeout: options.disable_force_detach_on_timeout,
            }))
        }),
    plain("persistentvolume-binder-controller", &["persistentvolume-binder"])
        .account("persistent-volume-binder")
        .events("persistentvolume-controller")
        .starts(|c, o| {
            let config = persistentvolume::Config {
                sync_period: o.persistent_volume.claim_binder_sync_period,
                enable_dynamic_provisioning: o.persistent_volume.enable_dynamic_provisioning,
                volume_attributes_class: o.generic.feature_gates.is_enabled("VolumeAttributesClass"),
            };
            Ok(persistentvolume::new(c, config))
        }),
    plain("persistentvolume-expander-controller", &["persistentvolume-expander"])
        .account("expand-controller")
        .events("volume_expand")
        .starts(|c, _| Ok(expand::new(c))),
    plain("persistentvolume-protection-controller", &["pv-protection"])
        .account("pv-protection-controller")
        .starts(|c, _| Ok(pvprotection::new(c, pvprotection::Config::default()))),
    plain("persistentvolumeclaim-protection-controller", &["pvc-protection"])
        .account("pvc-protection-controller")
        .starts(|c, _| Ok(pvcprotection::new(c, pvcprotection::Config::default()))),
    plain("pod-garbage-collector-controller", &["podgc"]).account("pod-garbage-collector").starts(|c, o| {
        let threshold = o.pod_gc.terminated_pod_gc_threshold;
        Ok(podgc::new(c, podgc::Config { terminated_pod_threshold: threshold, ..podgc::Config::default() }))
    }),
    gated("podcertificaterequest-cleaner-controller", &[], &["PodCertificateRequest"])
        .account("podcertificaterequestcleaner")
        .starts(|c, _| Ok(certificates::pcrcleaner::new(c, certificates::pcrcleaner::Config::default()))),
    gated("podgroup-protection-controller", &[], &["GenericWorkload"])
        .account("podgroup-protection-controller")
        .starts(|c, _| Ok(podgroupprotection::new(c, podgroupprotection::Config::default()))),
    plain("replicaset-controller", &["replicaset"])
        .account("replicaset-controller")
        .starts(|c, o| {
            let config = replicaset::Config {
                workers: workers(o.concurrency.replicaset_syncs),
                terminating_replicas: o.generic.feature_gates.is_enabled("DeploymentReplicaSetTerminatingReplicas"),
                stale_controller_consistency: o
                    .generic
                    .feature_gates
                    .is_enabled("StaleControllerConsistencyReplicaSet"),
            };
            Ok(replicaset::new_replica_sets(c, config))
        }),
    plain("replicationcontroller-controller", &["replicationcontroller"])
        .account("replication-controller")
        .events("replication-controller")
        .starts(|c, o| {
            let config = replicaset::Config {
                workers: workers(o.concurrency.rc_syncs),
                // Read as upstream does; an RC's status has no terminatingReplicas, so it stays off.
                terminating_replicas: o.generic.feature_gates.is_enabled("DeploymentReplicaSetTerminatingReplicas"),
                // Upstream's replication manager has no gate: it always uses the no-op store.
                stale_controller_consistency: false,
            };
            Ok(replicaset::new_replication_controllers(c, config))
        }),
    gated("resourceclaim-controller", &["resource-claim-controller"], &["DynamicResourceAllocation"])
        .account("resource-claim-controller")
        .events("resource_claim")
        .starts(|c, o| {
            let gates = &o.generic.feature_gates;
            let features = resourceclaim::Features {
                admin_access: gates.is_enabled("DRAAdminAccess"),
                prioritized_list: gates.is_enabled("DRAPrioritizedList"),
                workload_resource_claims: gates.is_enabled("DRAWorkloadResourceClaims"),
            };
            Ok(resourceclaim::new(c, resourceclaim::Config { workers: workers(o.concurrency.resource_claim_syncs), features })?)
        }),
    gated("resourcepoolstatusrequest-controller", &[], &["DRAResourcePoolStatus"])
        .account("resourcepoolstatusrequest-controller")
        .starts(|c, _| Ok(resourcepoolstatusrequest::new(c, resourcepoolstatusrequest::Config::default()))),
    plain("resourcequota-controller", &["resourcequota"]).account("resourcequota-controller").starts(|c, o| {
        let config = resourcequota::Config {
            workers: workers(o.concurrency.resource_quota_syncs),
            resync_period: o.resource_quota.sync_period,
            use_status_resources: o.generic.feature_gates.is_enabled("InPlacePodVerticalScaling"),
            dra: resourcequota::DraGates {
                dynamic_resource_allocation: o.generic.feature_gates.is_enabled("DynamicResourceAllocation"),
                extended_resource: o.generic.feature_gates.is_enabled("DRAExtendedResource"),
            },
            volume_attributes_class: o.generic.feature_gates.is_enabled("VolumeAttributesClass"),
        };
        Ok(resourcequota::new(c, config))
    }),
    plain("root-ca-certificate-publisher-controller", &["root-ca-cert-publisher"])
        .account("root-ca-cert-publisher")
        .starts(|c, o| Ok(root_ca_publisher::new(c, root_ca_publisher::Config { root_ca: root_ca(o, &c.client)? }))),
    off_by_default_gated("selinux-warning-controller", &[], &["SELinuxChangePolicy"])
        .account("selinux-warning-controller")
        .events("selinux_warning")
        .starts(|c, o| {
            let gates = &o.generic.feature_gates;
            let config = selinuxwarning::Config {
                mount_rwop: gates.is_enabled("SELinuxMountReadWriteOncePod"),
                change_policy: gates.is_enabled("SELinuxChangePolicy"),
            };
            Ok(selinuxwarning::new(c, config))
        }),
    gated("service-cidr-controller", &[], &["MultiCIDRServiceAllocator"])
        .account("service-cidrs-controller")
        .starts(|c, _| Ok(servicecidrs::new(c, servicecidrs::Config::default()))),
    cloud("service-lb-controller", &["service"]),
    plain("serviceaccount-controller", &["serviceaccount"])
        .account("service-account-controller")
        .starts(|c, _| Ok(serviceaccount::new_accounts(c))),
    plain("serviceaccount-token-controller", &["serviceaccount-token"]).first().starts(start_token_controller),
    plain("statefulset-controller", &["statefulset"])
        .account("statefulset-controller")
        .starts(|c, o| {
            let gates = &o.generic.feature_gates;
            let config = statefulset::Config {
                workers: workers(o.concurrency.statefulset_syncs),
                semantic_revision_comparison: gates.is_enabled("StatefulSetSemanticRevisionComparison"),
                stale_controller_consistency: gates.is_enabled("StaleControllerConsistencyStatefulSet"),
            };
            Ok(statefulset::new(c, config))
        }),
    // Its constructor (`newSVMController`) also needs client-go's InformerResourceVersion.
    gated("storage-version-migrator-controller", &["svm"], &["StorageVersionMigrator", "InformerResourceVersion"])
        .account("storage-version-migrator-controller")
        .starts(|c, o| {
            // It reads the garbage collector's monitors.
            if !o.garbage_collector.enabled {
                return Err(Error::GarbageCollectorOff.into());
            }
            Ok(storageversionmigrator::new(c, storageversionmigrator::Config::default()))
        }),
    gated(
        "storageversion-garbage-collector-controller",
        &["storage-version-gc"],
        &["APIServerIdentity", "StorageVersionAPI"],
    )
        .account("storage-version-garbage-collector")
        .starts(|c, _| Ok(storageversiongc::new(c))),
    gated("taint-eviction-controller", &[], &["SeparateTaintEvictionController"])
        .account("node-controller")
        .starts(|c, _| Ok(tainteviction::new(c))),
    off_by_default("token-cleaner-controller", &["tokencleaner"])
        .account("token-cleaner")
        .starts(|c, _| Ok(bootstrap::cleaner::new(c))),
    plain("ttl-after-finished-controller", &["ttl-after-finished"])
        .account("ttl-after-finished-controller")
        .starts(|c, o| {
            let config = ttlafterfinished::Config { workers: workers(o.concurrency.ttl_after_finished_syncs) };
            Ok(ttlafterfinished::new(c, config))
        }),
    plain("ttl-controller", &["ttl"]).account("ttl-controller").starts(|c, _| Ok(ttl::new(c))),
    plain("validatingadmissionpolicy-status-controller", &[])
        .account("validatingadmissionpolicy-status-controller")
        .starts(|c, o| {
            let workers = workers(o.concurrency.validating_admission_policy_status_syncs);
            Ok(validatingadmissionpolicystatus::new(c, validatingadmissionpolicystatus::Config { workers }))
        }),
    gated("volumeattributesclass-protection-controller", &[], &["VolumeAttributesClass"])
        .account("volumeattributesclass-protection-controller")
        .starts(|c, _| Ok(vacprotection::new(c, vacprotection::Config::default()))),
];

/// `startNodeIpamController`: off without `--allocate-node-cidrs`; the range allocator only.
fn start_node_ipam(context: &ControllerContext<'_>, options: &Options) -> Result<Controller, BoxError> {
    let ipam = &options.node_ipam;
    if !ipam.allocate_node_cidrs {
        return Ok(Controller::disabled("--allocate-node-cidrs is false"));
    }
    if ipam.cidr_allocator_type != "RangeAllocator" {
        return Err(Error::CidrAllocatorType(ipam.cidr_allocator_type.clone()).into());
    }
    Ok(nodeipam::new(context, node_ipam_params(ipam)?)?)
}

/// The range allocator's parameters from the flags, with the start-up checks.
fn node_ipam_params(ipam: &crate::app::flags::NodeIpamOptions) -> Result<nodeipam::AllocatorParams, Error> {
    let node_masks = crate::app::flags::node_cidr_mask_sizes(ipam)?;
    Ok(nodeipam::AllocatorParams {
        cluster_cidrs: ipam.cluster_cidrs.clone(),
        service_cidr: ipam.service_cidrs.first().copied(),
        secondary_service_cidr: ipam.service_cidrs.get(1).copied(),
        node_masks,
    })
}

/// `startNodeLifecycleController`; with the SeparateTaintEvictionController gate off it runs
/// the taint eviction controller inside itself, recording as that controller.
fn start_node_lifecycle(context: &ControllerContext<'_>, options: &Options) -> Result<Controller, BoxError> {
    let flags = &options.node_lifecycle;
    let taint_eviction = descriptor("taint-eviction-controller").expect("in the table");
    let separate = taint_eviction.feature_gates.iter().all(|gate| options.generic.feature_gates.is_enabled(gate));
    let config = nodelifecycle::Config {
        monitor_period: flags.node_monitor_period,
        grace: nodelifecycle::GracePeriods {
            startup: flags.node_startup_grace_period,
            monitor: flags.node_monitor_grace_period,
        },
        zones: nodelifecycle::ZoneConfig {
            eviction_qps: flags.node_eviction_rate,
            secondary_eviction_qps: flags.secondary_node_eviction_rate,
            large_cluster_threshold: flags.large_cluster_size_threshold,
            unhealthy_zone_threshold: flags.unhealthy_zone_threshold,
        },
        embedded_taint_eviction: (!separate).then(|| taint_eviction.event_component()),
    };
    Ok(nodelifecycle::new(context, config)?)
}

/// `startServiceAccountTokenController`: skipped without a private key.
fn start_token_controller(context: &ControllerContext<'_>, options: &Options) -> Result<Controller, BoxError> {
    let key_file = &options.service_account.private_key_file;
    if key_file.is_empty() {
        return Ok(Controller::disabled("Controller is disabled because there is no private key"));
    }
    let config = serviceaccount::TokensConfig {
        workers: workers(options.concurrency.serviceaccount_token_syncs),
        private_key_file: key_file.into(),
        root_ca: root_ca(options, &context.client)?,
    };
    Ok(serviceaccount::new_tokens(context, config)?)
}

/// `newKubeAPIServerSignerClusterTrustBundledPublisherController`: the CA of
/// `getKubeAPIServerCAFileContents` (as [`root_ca`]); without one it does not start.
fn start_cluster_trust_bundle_publisher(
    context: &ControllerContext<'_>,
    options: &Options,
) -> Result<Controller, BoxError> {
    let ca_bundle = root_ca(options, &context.client)?;
    if ca_bundle.is_empty() {
        return Ok(Controller::disabled("no kube-apiserver serving CA to publish"));
    }
    Ok(certificates::clustertrustbundlepublisher::new(
        context,
        certificates::clustertrustbundlepublisher::Config { ca_bundle },
    ))
}

/// The CA bundle put in token Secrets and `kube-root-ca.crt`: `--root-ca-file` (which must hold
/// certificates: upstream's `readCA`), else the CA data of the client's kubeconfig.
fn root_ca(options: &Options, client: &Client) -> Result<String, Error> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let file = &options.service_account.root_ca_file;
    if file.is_empty() {
        return Ok(client.ca_pem().unwrap_or_default());
    }
    let pem = std::fs::read_to_string(file).map_err(|source| Error::ReadRootCa { file: file.clone(), source })?;
    let certificates = CertificateDer::pem_slice_iter(pem.as_bytes()).collect::<Result<Vec<_>, _>>();
    match certificates {
        Ok(certificates) if !certificates.is_empty() => Ok(pem),
        Ok(_) => Err(Error::NoRootCa { file: file.clone() }),
        Err(source) => Err(Error::ParseRootCa { file: file.clone(), source }),
    }
}

/// Finds a controller by its canonical name or one of its aliases.
pub fn resolve(name_or_alias: &str) -> Option<&'static ControllerDescriptor> {
    CONTROLLERS.iter().find(|c| c.name == name_or_alias || c.aliases.contains(&name_or_alias))
}

/// A copy of a controller's row, by canonical name or alias.
pub fn descriptor(name_or_alias: &str) -> Option<ControllerDescriptor> {
    resolve(name_or_alias).copied()
}

/// A copy of the row of a controller named literally (tests and tools run chosen
/// controllers). Panics on a name that is not in the table.
pub fn named(name_or_alias: &str) -> ControllerDescriptor {
    descriptor(name_or_alias).unwrap_or_else(|| panic!("{name_or_alias:?} is not in the list of known controllers"))
}

/// Whether a controller (canonical name) is built here.
pub fn is_implemented(name: &str) -> bool {
    resolve(name).is_some_and(|c| c.start.is_some())
}

/// The canonical names of the controllers built here, in start order.
pub fn implemented() -> Vec<&'static str> {
    built().iter().map(|c| c.name).collect()
}

/// The rows of the controllers built here, in start order.
pub fn built() -> Vec<ControllerDescriptor> {
    in_start_order(CONTROLLERS).filter(|c| c.start.is_some()).copied().collect()
}

/// The rows in the order upstream starts controllers: the token controller first.
pub fn in_start_order(descriptors: &[ControllerDescriptor]) -> impl Iterator<Item = &ControllerDescriptor> {
    let first = descriptors.iter().filter(|d| d.starts_first);
    first.chain(descriptors.iter().filter(|d| !d.starts_first))
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
    /// [`ControllerDescriptor::cloud_provider`] and [`ControllerDescriptor::feature_gates`]).
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
    pub fn enabled(&self) -> impl Iterator<Item = &'static ControllerDescriptor> + '_ {
        CONTROLLERS.iter().filter(|c| self.is_enabled(c.name))
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
    use crate::client::ClientOptions;
    use crate::client::config::{Auth, RestConfig, TlsSettings};
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;

    fn selection(items: &[&str]) -> ControllerSelection {
        ControllerSelection::parse(items).expect("known controllers")
    }

    #[test]
    fn table_is_sorted_and_names_and_aliases_are_unique() {
        let names: Vec<&str> = CONTROLLERS.iter().map(|c| c.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        let mut all: Vec<&str> = names.clone();
        all.extend(CONTROLLERS.iter().flat_map(|c| c.aliases.iter().copied()));
        let count = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), count, "a name or alias is used twice");
        assert_eq!(CONTROLLERS.len(), 52);
    }

    #[test]
    fn only_three_controllers_are_off_by_default() {
        let off: Vec<&str> = CONTROLLERS.iter().filter(|c| !c.enabled_by_default).map(|c| c.name).collect();
        assert_eq!(off, ["bootstrap-signer-controller", "selinux-warning-controller", "token-cleaner-controller"]);
    }

    #[test]
    fn resolves_names_and_aliases() {
        assert_eq!(resolve("replicaset").map(|c| c.name), Some("replicaset-controller"));
        assert_eq!(resolve("replicaset-controller").map(|c| c.name), Some("replicaset-controller"));
        assert_eq!(resolve("bootstrapsigner").map(|c| c.name), Some("bootstrap-signer-controller"));
        assert_eq!(resolve("attachdetach").map(|c| c.name), Some("persistentvolume-attach-detach-controller"));
        assert!(resolve("nope").is_none());
        assert!(resolve("").is_none());
        assert!(resolve("service").is_some_and(|c| c.cloud_provider));
        assert_eq!(resolve("svm").map(|c| c.name), Some("storage-version-migrator-controller"));
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
        assert_eq!(s.enabled().count(), 49);
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

    #[test]
    fn every_runnable_controller_but_the_token_controller_has_an_account() {
        for controller in CONTROLLERS.iter().filter(|c| !c.cloud_provider) {
            let account = controller.service_account;
            if controller.name == "serviceaccount-token-controller" {
                assert_eq!(account, None);
            } else {
                assert!(account.is_some(), "{} has no service account", controller.name);
            }
        }
        let account = |name: &str| resolve(name).and_then(|c| c.service_account);
        assert_eq!(account("node-lifecycle-controller"), Some("node-controller"));
        assert_eq!(account("garbage-collector-controller"), Some("generic-garbage-collector"));
        assert_eq!(account("podcertificaterequest-cleaner-controller"), Some("podcertificaterequestcleaner"));
        assert_eq!(account("resourcepoolstatusrequest-controller"), Some("resourcepoolstatusrequest-controller"));
        assert_eq!(account("podgroup-protection-controller"), Some("podgroup-protection-controller"));
        assert_eq!(account("nope"), None);
    }

    #[test]
    fn client_names_and_event_components_follow_upstream() {
        let row = |name: &str| resolve(name).expect("known");
        assert_eq!(row("node-lifecycle-controller").client_name(), "node-controller");
        assert_eq!(row("serviceaccount-token-controller").client_name(), "serviceaccount-token-controller");
        assert_eq!(row("endpointslice-controller").event_component(), "endpoint-slice-controller");
        assert_eq!(row("deployment-controller").event_component(), "deployment-controller");
        assert_eq!(row("disruption-controller").event_component(), "controllermanager");
        assert_eq!(row("resourceclaim-controller").client_name(), "resource-claim-controller");
        assert_eq!(row("resourceclaim-controller").event_component(), "resource_claim");
    }

    #[test]
    fn the_token_controller_starts_first() {
        assert_eq!(implemented()[0], "serviceaccount-token-controller");
        assert_eq!(implemented().len(), 49);
    }

    fn options_with(flags: &[&str]) -> Options {
        match crate::app::flags::parse(flags.iter().map(|f| (*f).into())) {
            Ok(crate::app::flags::Command::Run(options)) => *options,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn the_gated_controllers_are_built_and_start_only_with_their_gates() {
        let cases = [
            ("podcertificaterequest-cleaner-controller", "--feature-gates=PodCertificateRequest=true"),
            ("podgroup-protection-controller", "--feature-gates=GenericWorkload=true"),
            ("storageversion-garbage-collector-controller", "--feature-gates=StorageVersionAPI=true"),
            ("resourcepoolstatusrequest-controller", "--feature-gates=DRAResourcePoolStatus=true"),
            ("storage-version-migrator-controller", "--feature-gates=StorageVersionMigrator=true"),
        ];
        for (name, gate) in cases {
            assert!(is_implemented(name), "{name} is built");
            assert!(!options_with(&[]).starts_controller(name), "{name} is off at the default gates");
            assert!(options_with(&[gate]).starts_controller(name), "{name} starts with {gate}");
        }
        // `StorageVersionAPI` needs `APIServerIdentity` (on by default), and so does the controller.
        let gc = resolve("storage-version-gc").expect("known");
        assert_eq!(gc.feature_gates, ["APIServerIdentity", "StorageVersionAPI"]);
    }

    fn options(root_ca_file: &str) -> Options {
        let args = [format!("--root-ca-file={root_ca_file}")];
        match crate::app::flags::parse(args.into_iter().map(Into::into)) {
            Ok(crate::app::flags::Command::Run(options)) => *options,
            other => panic!("unexpected {other:?}"),
        }
    }

    fn client(ca_certs: Option<Vec<CertificateDer<'static>>>) -> Client {
        let tls = TlsSettings { ca_certs, ..TlsSettings::default() };
        let config = RestConfig { server: "https://127.0.0.1:1".into(), tls, auth: Auth::None, source: "test".into() };
        Client::new(config, ClientOptions::default()).expect("client")
    }

    #[test]
    fn root_ca_comes_from_the_file_or_else_the_kubeconfig() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.self_signed(&key).unwrap();
        let path = std::env::temp_dir().join(format!("kcm-root-ca-{}.crt", std::process::id()));
        std::fs::write(&path, ca.pem()).unwrap();
        let from_file = root_ca(&options(&path.to_string_lossy()), &client(None));
        assert_eq!(from_file.map_err(|e| e.to_string()).as_deref(), Ok(ca.pem().as_str()));

        std::fs::write(&path, "not a certificate").unwrap();
        let err = root_ca(&options(&path.to_string_lossy()), &client(None)).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "error parsing root-ca-file at {}: data does not contain any valid RSA or ECDSA certificates",
                path.display()
            )
        );
        let _ = std::fs::remove_file(&path);

        let kubeconfig_ca = client(Some(vec![ca.der().clone()]));
        let pem = root_ca(&options(""), &kubeconfig_ca).unwrap();
        let parsed: Vec<_> = CertificateDer::pem_slice_iter(pem.as_bytes()).collect::<Result<_, _>>().unwrap();
        assert_eq!(parsed, [ca.der().clone()]);
        let none = root_ca(&options(""), &client(None)).map_err(|e| e.to_string());
        assert_eq!(none.as_deref(), Ok(""), "no CA data: empty, as upstream");
    }

    #[test]
    fn node_ipam_params_come_from_the_flags() {
        let cidr = |text: &str| crate::app::flags::Cidr::parse(text).unwrap();
        let ipam = crate::app::flags::NodeIpamOptions {
            allocate_node_cidrs: true,
            cluster_cidrs: vec![cidr("10.244.0.0/16"), cidr("fd00::/56")],
            cidr_allocator_type: "RangeAllocator".into(),
            service_cidrs: vec![cidr("10.96.0.0/12"), cidr("fd01::/108")],
            node_cidr_mask_size_ipv6: 64,
            ..crate::app::flags::NodeIpamOptions::default()
        };
        let p = node_ipam_params(&ipam).unwrap();
        assert_eq!(p.node_masks, [24, 64]);
        assert_eq!(p.secondary_service_cidr, Some(cidr("fd01::/108")));
        let bad = crate::app::flags::NodeIpamOptions { node_cidr_mask_size: 24, ..ipam };
        assert_eq!(
            node_ipam_params(&bad).unwrap_err().to_string(),
            "usage of --node-cidr-mask-size is not allowed with dual-stack clusters"
        );
        assert!(matches!(node_ipam_params(&bad), Err(Error::NodeIpam(ValidationError::GenericMaskDualStack))));
    }
}
