//! The kinds the sandbox serves: one table drives routing, storage keys and discovery.

/// One resource (a kind's collection) in one group/version.
#[derive(Debug)]
pub struct ResourceType {
    /// API group; empty for the core group.
    pub group: &'static str,
    /// The version served, e.g. `v1`.
    pub version: &'static str,
    /// The URL segment, e.g. `deployments`.
    pub plural: &'static str,
    /// The lower-case singular name, e.g. `deployment`.
    pub singular: &'static str,
    /// The kind of its objects, e.g. `Deployment`.
    pub kind: &'static str,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
    /// `kubectl`'s short names, e.g. `deploy`.
    pub short_names: &'static [&'static str],
    /// `kubectl get all` and friends.
    pub categories: &'static [&'static str],
    /// Its subresources (`status`, `scale`, ...).
    pub subresources: &'static [Subresource],
    /// Which verbs the collection allows.
    pub verbs: Verbs,
    /// `metadata.generation` starts at 1 and is bumped on every change outside `status` and
    /// `metadata` (the kinds whose controllers report `observedGeneration`).
    pub tracks_generation: bool,
    /// Objects of another resource share this storage (events.k8s.io/v1 events are core events).
    pub storage: Option<&'static str>,
}

/// A subresource and the kind of its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subresource {
    /// The name after the object's, e.g. `status`.
    pub name: &'static str,
    /// `kind` of the body (e.g. `Scale`), with its group/version.
    pub kind: &'static str,
    /// The body's `group/version` (`v1` for the core group).
    pub group_version: &'static str,
    /// Which verbs the subresource allows.
    pub verbs: Verbs,
}

/// The set of verbs a resource or subresource allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbs {
    /// create, delete, deletecollection, get, list, patch, update, watch.
    All,
    /// All but deletecollection (the namespace registry has no `DeleteCollection`).
    AllButDeleteCollection,
    /// get, patch, update (status-like subresources).
    GetUpdate,
    /// update only (a namespace's `finalize`).
    Update,
    /// create only (bindings, reviews, tokens, evictions).
    Create,
}

impl Verbs {
    /// The verbs, as discovery lists them.
    pub fn names(self) -> &'static [&'static str] {
        match self {
            Verbs::All => &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
            Verbs::AllButDeleteCollection => &["create", "delete", "get", "list", "patch", "update", "watch"],
            Verbs::GetUpdate => &["get", "patch", "update"],
            Verbs::Update => &["update"],
            Verbs::Create => &["create"],
        }
    }
}

impl ResourceType {
    /// `group/version`, or just the version for the core group: the objects' `apiVersion`.
    pub fn group_version(&self) -> String {
        if self.group.is_empty() { self.version.to_string() } else { format!("{}/{}", self.group, self.version) }
    }

    /// `group/version` of `group` and `version` (just the version for the core group).
    pub fn group_version_of(group: &str, version: &str) -> String {
        if group.is_empty() { version.to_string() } else { format!("{group}/{version}") }
    }

    /// The key its objects are stored under, shared by every version of the same resource.
    pub fn storage_key(&self) -> &'static str {
        self.storage.unwrap_or(self.plural)
    }

    /// The subresource called `name`, if the resource has one.
    pub fn subresource(&self, name: &str) -> Option<&'static Subresource> {
        self.subresources.iter().find(|s| s.name == name)
    }

    /// Whether the resource has a `status` subresource.
    pub fn has_status(&self) -> bool {
        self.subresource("status").is_some()
    }

    /// Whether a PUT to a missing object creates it (the registries' `AllowCreateOnUpdate`).
    pub fn create_on_update(&self) -> bool {
        matches!(
            (self.group, self.plural),
            ("", "endpoints" | "events" | "limitranges")
                | ("events.k8s.io", "events")
                | ("coordination.k8s.io", "leases")
                | ("discovery.k8s.io", "endpointslices")
                | ("rbac.authorization.k8s.io", _)
        )
    }

    /// Whether a completed DELETE answers with the object rather than a `Status` (the
    /// registries' `ReturnDeletedObject`).
    pub fn returns_deleted_object(&self) -> bool {
        matches!((self.group, self.plural), ("", "pods" | "serviceaccounts") | ("storage.k8s.io", "storageclasses"))
    }
}

const STATUS: Subresource = Subresource { name: "status", kind: "", group_version: "", verbs: Verbs::GetUpdate };
const SCALE: Subresource =
    Subresource { name: "scale", kind: "Scale", group_version: "autoscaling/v1", verbs: Verbs::GetUpdate };

const fn resource(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> ResourceType {
    ResourceType {
        group,
        version,
        plural,
        singular,
        kind,
        namespaced,
        short_names: &[],
        categories: &[],
        subresources: &[],
        verbs: Verbs::All,
        tracks_generation: false,
        storage: None,
    }
}

const ALL: &[&str] = &["all"];

/// Every resource the sandbox serves.
pub static RESOURCES: &[ResourceType] = &[
    // core/v1
    ResourceType {
        short_names: &["ns"],
        subresources: &[
            STATUS,
            Subresource { name: "finalize", kind: "Namespace", group_version: "v1", verbs: Verbs::Update },
        ],
        verbs: Verbs::AllButDeleteCollection,
        ..resource("", "v1", "namespaces", "namespace", "Namespace", false)
    },
    ResourceType {
        short_names: &["po"],
        categories: ALL,
        subresources: &[
            STATUS,
            Subresource { name: "binding", kind: "Binding", group_version: "v1", verbs: Verbs::Create },
            Subresource { name: "eviction", kind: "Eviction", group_version: "policy/v1", verbs: Verbs::Create },
        ],
        // Pods carry metadata.generation since v1.33 (KEP-5067).
        tracks_generation: true,
        ..resource("", "v1", "pods", "pod", "Pod", true)
    },
    ResourceType { verbs: Verbs::Create, ..resource("", "v1", "bindings", "binding", "Binding", true) },
    ResourceType {
        short_names: &["no"],
        subresources: &[STATUS],
        ..resource("", "v1", "nodes", "node", "Node", false)
    },
    ResourceType {
        short_names: &["svc"],
        categories: ALL,
        subresources: &[STATUS],
        ..resource("", "v1", "services", "service", "Service", true)
    },
    ResourceType { short_names: &["ep"], ..resource("", "v1", "endpoints", "endpoints", "Endpoints", true) },
    ResourceType {
        short_names: &["sa"],
        subresources: &[Subresource {
            name: "token",
            kind: "TokenRequest",
            group_version: "authentication.k8s.io/v1",
            verbs: Verbs::Create,
        }],
        ..resource("", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", true)
    },
    resource("", "v1", "secrets", "secret", "Secret", true),
    ResourceType { short_names: &["cm"], ..resource("", "v1", "configmaps", "configmap", "ConfigMap", true) },
    ResourceType { short_names: &["ev"], ..resource("", "v1", "events", "event", "Event", true) },
    ResourceType {
        short_names: &["rc"],
        categories: ALL,
        subresources: &[STATUS, SCALE],
        tracks_generation: true,
        ..resource("", "v1", "replicationcontrollers", "replicationcontroller", "ReplicationController", true)
    },
    ResourceType {
        short_names: &["quota"],
        subresources: &[STATUS],
        ..resource("", "v1", "resourcequotas", "resourcequota", "ResourceQuota", true)
    },
    ResourceType { short_names: &["limits"], ..resource("", "v1", "limitranges", "limitrange", "LimitRange", true) },
    ResourceType {
        short_names: &["pv"],
        subresources: &[STATUS],
        ..resource("", "v1", "persistentvolumes", "persistentvolume", "PersistentVolume", false)
    },
    ResourceType {
        short_names: &["pvc"],
        subresources: &[STATUS],
        ..resource("", "v1", "persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim", true)
    },
    resource("", "v1", "podtemplates", "podtemplate", "PodTemplate", true),
    // apps/v1
    ResourceType {
        short_names: &["deploy"],
        categories: ALL,
        subresources: &[STATUS, SCALE],
        tracks_generation: true,
        ..resource("apps", "v1", "deployments", "deployment", "Deployment", true)
    },
    ResourceType {
        short_names: &["rs"],
        categories: ALL,
        subresources: &[STATUS, SCALE],
        tracks_generation: true,
        ..resource("apps", "v1", "replicasets", "replicaset", "ReplicaSet", true)
    },
    ResourceType {
        short_names: &["sts"],
        categories: ALL,
        subresources: &[STATUS, SCALE],
        tracks_generation: true,
        ..resource("apps", "v1", "statefulsets", "statefulset", "StatefulSet", true)
    },
    ResourceType {
        short_names: &["ds"],
        categories: ALL,
        subresources: &[STATUS],
        tracks_generation: true,
        ..resource("apps", "v1", "daemonsets", "daemonset", "DaemonSet", true)
    },
    resource("apps", "v1", "controllerrevisions", "controllerrevision", "ControllerRevision", true),
    // batch/v1
    ResourceType {
        categories: ALL,
        subresources: &[STATUS],
        tracks_generation: true,
        ..resource("batch", "v1", "jobs", "job", "Job", true)
    },
    ResourceType {
        short_names: &["cj"],
        categories: ALL,
        subresources: &[STATUS],
        tracks_generation: true,
        ..resource("batch", "v1", "cronjobs", "cronjob", "CronJob", true)
    },
    // autoscaling/v2
    ResourceType {
        short_names: &["hpa"],
        categories: ALL,
        subresources: &[STATUS],
        tracks_generation: true,
        ..resource(
            "autoscaling",
            "v2",
            "horizontalpodautoscalers",
            "horizontalpodautoscaler",
            "HorizontalPodAutoscaler",
            true,
        )
    },
    // coordination.k8s.io/v1
    resource("coordination.k8s.io", "v1", "leases", "lease", "Lease", true),
    // discovery.k8s.io/v1
    // EndpointSlices have no status, yet their strategy bumps the generation on every change
    // but to metadata (labels included): the EndpointSlice controllers' tracker relies on it.
    ResourceType {
        tracks_generation: true,
        ..resource("discovery.k8s.io", "v1", "endpointslices", "endpointslice", "EndpointSlice", true)
    },
    // policy/v1
    ResourceType {
        short_names: &["pdb"],
        subresources: &[STATUS],
        tracks_generation: true,
        ..resource("policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", true)
    },
    // certificates.k8s.io/v1
    ResourceType {
        short_names: &["csr"],
        subresources: &[
            STATUS,
            Subresource {
                name: "approval",
                kind: "CertificateSigningRequest",
                group_version: "certificates.k8s.io/v1",
                verbs: Verbs::GetUpdate,
            },
        ],
        ..resource(
            "certificates.k8s.io",
            "v1",
            "certificatesigningrequests",
            "certificatesigningrequest",
            "CertificateSigningRequest",
            false,
        )
    },
    // rbac.authorization.k8s.io/v1
    resource("rbac.authorization.k8s.io", "v1", "roles", "role", "Role", true),
    resource("rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", true),
    resource("rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", false),
    resource(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        false,
    ),
    // events.k8s.io/v1: the same objects as core/v1 events, in another shape.
    ResourceType {
        short_names: &["ev"],
        storage: Some("events"),
        ..resource("events.k8s.io", "v1", "events", "event", "Event", true)
    },
    // storage.k8s.io/v1
    ResourceType {
        short_names: &["sc"],
        ..resource("storage.k8s.io", "v1", "storageclasses", "storageclass", "StorageClass", false)
    },
    resource("storage.k8s.io", "v1", "csinodes", "csinode", "CSINode", false),
    resource("storage.k8s.io", "v1", "csidrivers", "csidriver", "CSIDriver", false),
    resource("storage.k8s.io", "v1", "csistoragecapacities", "csistoragecapacity", "CSIStorageCapacity", true),
    ResourceType {
        subresources: &[STATUS],
        ..resource("storage.k8s.io", "v1", "volumeattachments", "volumeattachment", "VolumeAttachment", false)
    },
    // Served by default since v1.34 (VolumeAttributesClass GA); read by the PV controller and
    // the volumeattributesclass-protection-controller.
    ResourceType {
        short_names: &["vac"],
        ..resource(
            "storage.k8s.io",
            "v1",
            "volumeattributesclasses",
            "volumeattributesclass",
            "VolumeAttributesClass",
            false,
        )
    },
    // resource.k8s.io/v1: Dynamic Resource Allocation, served by default since v1.34. The
    // classes and slices bump their generation on spec changes (they have no status).
    ResourceType {
        tracks_generation: true,
        ..resource("resource.k8s.io", "v1", "deviceclasses", "deviceclass", "DeviceClass", false)
    },
    ResourceType {
        subresources: &[STATUS],
        ..resource("resource.k8s.io", "v1", "resourceclaims", "resourceclaim", "ResourceClaim", true)
    },
    resource("resource.k8s.io", "v1", "resourceclaimtemplates", "resourceclaimtemplate", "ResourceClaimTemplate", true),
    ResourceType {
        tracks_generation: true,
        ..resource("resource.k8s.io", "v1", "resourceslices", "resourceslice", "ResourceSlice", false)
    },
    // scheduling.k8s.io/v1
    ResourceType {
        short_names: &["pc"],
        ..resource("scheduling.k8s.io", "v1", "priorityclasses", "priorityclass", "PriorityClass", false)
    },
    // networking.k8s.io/v1
    ResourceType {
        short_names: &["netpol"],
        ..resource("networking.k8s.io", "v1", "networkpolicies", "networkpolicy", "NetworkPolicy", true)
    },
    ResourceType {
        short_names: &["ing"],
        subresources: &[STATUS],
        ..resource("networking.k8s.io", "v1", "ingresses", "ingress", "Ingress", true)
    },
    // The MultiCIDRServiceAllocator's objects: the ranges Service IPs come from, and one
    // object per allocated IP (see `crate::sandbox::storage::services`).
    ResourceType {
        subresources: &[STATUS],
        ..resource("networking.k8s.io", "v1", "servicecidrs", "servicecidr", "ServiceCIDR", false)
    },
    ResourceType {
        short_names: &["ip"],
        ..resource("networking.k8s.io", "v1", "ipaddresses", "ipaddress", "IPAddress", false)
    },
    // admissionregistration.k8s.io/v1: policies are stored (and validated) but not enforced;
    // the validatingadmissionpolicy-status-controller reports their type checking.
    ResourceType {
        categories: &["api-extensions"],
        subresources: &[STATUS],
        tracks_generation: true,
        ..resource(
            "admissionregistration.k8s.io",
            "v1",
            "validatingadmissionpolicies",
            "validatingadmissionpolicy",
            "ValidatingAdmissionPolicy",
            false,
        )
    },
    ResourceType {
        categories: &["api-extensions"],
        ..resource(
            "admissionregistration.k8s.io",
            "v1",
            "validatingadmissionpolicybindings",
            "validatingadmissionpolicybinding",
            "ValidatingAdmissionPolicyBinding",
            false,
        )
    },
    // apiregistration.k8s.io/v1: the aggregator's APIServices (the sandbox serves the
    // aggregated metrics APIs itself; see `crate::sandbox::metrics_api`).
    ResourceType {
        categories: &["api-extensions"],
        subresources: &[STATUS],
        ..resource("apiregistration.k8s.io", "v1", "apiservices", "apiservice", "APIService", false)
    },
    // authentication.k8s.io/v1 and authorization.k8s.io/v1: reviews, answered and never stored.
    ResourceType {
        verbs: Verbs::Create,
        ..resource("authentication.k8s.io", "v1", "tokenreviews", "tokenreview", "TokenReview", false)
    },
    ResourceType {
        verbs: Verbs::Create,
        ..resource("authentication.k8s.io", "v1", "selfsubjectreviews", "selfsubjectreview", "SelfSubjectReview", false)
    },
    ResourceType {
        verbs: Verbs::Create,
        ..resource(
            "authorization.k8s.io",
            "v1",
            "subjectaccessreviews",
            "subjectaccessreview",
            "SubjectAccessReview",
            false,
        )
    },
    ResourceType {
        verbs: Verbs::Create,
        ..resource(
            "authorization.k8s.io",
            "v1",
            "selfsubjectaccessreviews",
            "selfsubjectaccessreview",
            "SelfSubjectAccessReview",
            false,
        )
    },
    ResourceType {
        verbs: Verbs::Create,
        ..resource(
            "authorization.k8s.io",
            "v1",
            "localsubjectaccessreviews",
            "localsubjectaccessreview",
            "LocalSubjectAccessReview",
            true,
        )
    },
];

/// The resource served at `group`/`version`/`plural`.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static ResourceType> {
    RESOURCES.iter().find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resource of a kind in a group/version (`apiVersion` + `kind` of an object).
pub fn by_kind(api_version: &str, kind: &str) -> Option<&'static ResourceType> {
    RESOURCES.iter().find(|r| r.group_version() == api_version && r.kind == kind)
}

/// The groups served, in discovery order (core first), each with its versions.
pub fn groups() -> Vec<(&'static str, &'static str)> {
    let mut groups: Vec<(&'static str, &'static str)> = Vec::new();
    for r in RESOURCES {
        if !groups.contains(&(r.group, r.version)) {
            groups.push((r.group, r.version));
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        for (i, r) in RESOURCES.iter().enumerate() {
            assert!(
                !RESOURCES[..i].iter().any(|o| o.group == r.group && o.version == r.version && o.plural == r.plural),
                "{} listed twice",
                r.plural
            );
            if r.tracks_generation && !matches!(r.kind, "EndpointSlice" | "DeviceClass" | "ResourceSlice") {
                assert!(r.has_status(), "{} tracks generation without a status subresource", r.plural);
            }
        }
        assert_eq!(find("apps", "v1", "deployments").unwrap().kind, "Deployment");
        assert_eq!(by_kind("v1", "Pod").unwrap().plural, "pods");
        assert_eq!(find("events.k8s.io", "v1", "events").unwrap().storage_key(), "events");
        assert_eq!(groups()[0], ("", "v1"));
    }
}
