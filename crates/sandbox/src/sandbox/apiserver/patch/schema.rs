//! Patch metadata of the built-in kinds: which lists a strategic merge patch merges, and by
//! which key. kube-apiserver reads it from the Go struct tags of k8s.io/api
//! (`patchStrategy:"merge" patchMergeKey:"name"`); this is the same information as data.
//!
//! Only the paths that lead to a merging list are listed. Everything else has no strategy:
//! maps merge key by key and lists are replaced whole (tolerations, taints, container
//! statuses, matchExpressions, ...).
//!
//! The `retainKeys` strategy (Deployment `spec.strategy`, PodSpec `volumes` and
//! `resourceClaims`, PodStatus `resourceClaimStatuses`) is not listed: it only tells clients to
//! send a `$retainKeys` directive, and the server honours that directive wherever it appears.

/// How a field is patched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// No strategy: maps merge recursively, lists are replaced whole.
    Plain,
    /// `patchStrategy:"merge"` on a list of scalars: the union of both lists;
    /// `$deleteFromPrimitiveList/<field>` removes items.
    Merge,
    /// `patchStrategy:"merge" patchMergeKey:"<key>"` on a list of objects: items with the same
    /// value of the key are merged, others are added; `$patch: delete` items remove.
    MergeKey(&'static str),
}

impl Strategy {
    /// The merge key, empty for lists of scalars and lists without strategy.
    pub fn merge_key(self) -> &'static str {
        match self {
            Strategy::MergeKey(key) => key,
            Strategy::Plain | Strategy::Merge => "",
        }
    }

    /// Whether the list is merged item by item rather than replaced whole.
    pub fn merges(self) -> bool {
        self != Strategy::Plain
    }
}

/// A node of the schema: the name of a Go type (or of a group of types patched alike).
pub type Schema = Option<&'static str>;

/// The type of every `metadata` field of an object or a template.
const OBJECT_META: &str = "ObjectMeta";

/// The schema of each kind, by API group (empty for core) and kind. Kinds with nothing to
/// merge outside `metadata` use `Object`.
const KINDS: &[(&str, &str, &str)] = &[
    // core/v1
    ("", "Pod", "Pod"),
    ("", "PodTemplate", "PodTemplate"),
    ("", "ReplicationController", "Workload"),
    ("", "Service", "Service"),
    ("", "Node", "Node"),
    ("", "Namespace", "HasConditions"),
    ("", "PersistentVolumeClaim", "HasConditions"),
    ("", "ServiceAccount", "ServiceAccount"),
    ("", "Endpoints", "Object"),
    ("", "ConfigMap", "Object"),
    ("", "Secret", "Object"),
    ("", "Event", "Object"),
    ("", "ResourceQuota", "Object"),
    ("", "LimitRange", "Object"),
    ("", "PersistentVolume", "Object"),
    ("", "Binding", "Object"),
    // apps/v1
    ("apps", "Deployment", "Workload"),
    ("apps", "ReplicaSet", "Workload"),
    ("apps", "StatefulSet", "Workload"),
    ("apps", "DaemonSet", "Workload"),
    ("apps", "ControllerRevision", "Object"),
    // batch/v1
    ("batch", "Job", "Workload"),
    ("batch", "CronJob", "CronJob"),
    // autoscaling
    ("autoscaling", "HorizontalPodAutoscaler", "HasConditions"),
    ("autoscaling", "Scale", "Object"),
    // policy/v1
    ("policy", "PodDisruptionBudget", "HasConditions"),
    ("policy", "Eviction", "Object"),
    // and the rest, which have no merging lists
    ("coordination.k8s.io", "Lease", "Object"),
    ("discovery.k8s.io", "EndpointSlice", "Object"),
    ("certificates.k8s.io", "CertificateSigningRequest", "Object"),
    ("rbac.authorization.k8s.io", "Role", "Object"),
    ("rbac.authorization.k8s.io", "RoleBinding", "Object"),
    ("rbac.authorization.k8s.io", "ClusterRole", "Object"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding", "Object"),
    ("events.k8s.io", "Event", "Object"),
    ("storage.k8s.io", "StorageClass", "Object"),
    ("storage.k8s.io", "CSIDriver", "Object"),
    ("storage.k8s.io", "CSINode", "CSINode"),
    ("storage.k8s.io", "VolumeAttachment", "Object"),
    ("storage.k8s.io", "VolumeAttributesClass", "Object"),
    ("resource.k8s.io", "ResourceClaim", "ResourceClaim"),
    ("resource.k8s.io", "ResourceClaimTemplate", "Object"),
    ("resource.k8s.io", "DeviceClass", "Object"),
    ("resource.k8s.io", "ResourceSlice", "Object"),
    ("scheduling.k8s.io", "PriorityClass", "Object"),
    ("networking.k8s.io", "NetworkPolicy", "Object"),
    ("networking.k8s.io", "Ingress", "Object"),
    ("networking.k8s.io", "IngressClass", "Object"),
    ("networking.k8s.io", "ServiceCIDR", "HasConditions"),
    ("networking.k8s.io", "IPAddress", "Object"),
    ("apiregistration.k8s.io", "APIService", "Object"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy", "HasConditions"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding", "Object"),
];

use Strategy::{Merge, MergeKey, Plain};

/// `(schema, field, strategy, schema of the field's value or of its list items)`; an empty
/// schema means nothing below the field has patch metadata. Every `metadata` field is
/// `ObjectMeta` without being listed (see [`field`]).
const FIELDS: &[(&str, &str, Strategy, &str)] = &[
    // metav1.ObjectMeta
    ("ObjectMeta", "finalizers", Merge, ""),
    ("ObjectMeta", "ownerReferences", MergeKey("uid"), ""),
    // Kinds
    ("Pod", "spec", Plain, "PodSpec"),
    ("Pod", "status", Plain, "PodStatus"),
    ("PodTemplate", "template", Plain, "PodTemplateSpec"),
    // Deployment, ReplicaSet, StatefulSet, DaemonSet, ReplicationController, Job.
    ("Workload", "spec", Plain, "WorkloadSpec"),
    ("Workload", "status", Plain, "ConditionsStatus"),
    ("WorkloadSpec", "template", Plain, "PodTemplateSpec"),
    ("CronJob", "spec", Plain, "CronJobSpec"),
    ("CronJobSpec", "jobTemplate", Plain, "JobTemplateSpec"),
    ("JobTemplateSpec", "spec", Plain, "WorkloadSpec"),
    ("HasConditions", "status", Plain, "ConditionsStatus"),
    ("ConditionsStatus", "conditions", MergeKey("type"), ""),
    ("Service", "spec", Plain, "ServiceSpec"),
    ("Service", "status", Plain, "ConditionsStatus"),
    ("ServiceSpec", "ports", MergeKey("port"), ""),
    ("Node", "spec", Plain, "NodeSpec"),
    ("Node", "status", Plain, "NodeStatus"),
    ("NodeSpec", "podCIDRs", Merge, ""),
    ("NodeStatus", "conditions", MergeKey("type"), ""),
    ("NodeStatus", "addresses", MergeKey("type"), ""),
    ("ServiceAccount", "secrets", MergeKey("name"), ""),
    ("CSINode", "spec", Plain, "CSINodeSpec"),
    ("CSINodeSpec", "drivers", MergeKey("name"), ""),
    ("ResourceClaim", "status", Plain, "ResourceClaimStatus"),
    ("ResourceClaimStatus", "reservedFor", MergeKey("uid"), ""),
    // core/v1 PodTemplateSpec, PodSpec and what is below
    ("PodTemplateSpec", "spec", Plain, "PodSpec"),
    ("PodSpec", "volumes", MergeKey("name"), "Volume"),
    ("PodSpec", "initContainers", MergeKey("name"), "Container"),
    ("PodSpec", "containers", MergeKey("name"), "Container"),
    ("PodSpec", "ephemeralContainers", MergeKey("name"), "Container"),
    ("PodSpec", "imagePullSecrets", MergeKey("name"), ""),
    ("PodSpec", "hostAliases", MergeKey("ip"), ""),
    ("PodSpec", "topologySpreadConstraints", MergeKey("topologyKey"), ""),
    ("PodSpec", "schedulingGates", MergeKey("name"), ""),
    ("PodSpec", "resourceClaims", MergeKey("name"), ""),
    ("Volume", "ephemeral", Plain, "EphemeralVolumeSource"),
    ("EphemeralVolumeSource", "volumeClaimTemplate", Plain, "Object"),
    ("Container", "ports", MergeKey("containerPort"), ""),
    ("Container", "env", MergeKey("name"), ""),
    ("Container", "volumeMounts", MergeKey("mountPath"), ""),
    ("Container", "volumeDevices", MergeKey("devicePath"), ""),
    ("PodStatus", "conditions", MergeKey("type"), ""),
    ("PodStatus", "podIPs", MergeKey("ip"), ""),
    ("PodStatus", "hostIPs", MergeKey("ip"), ""),
    ("PodStatus", "resourceClaimStatuses", MergeKey("name"), ""),
];

/// The schema of a kind (`apiVersion` + `kind`), or `None` for kinds that are not built in.
pub fn for_kind(api_version: &str, kind: &str) -> Schema {
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    KINDS.iter().find(|(g, k, _)| *g == group && *k == kind).map(|&(_, _, schema)| schema)
}

/// The strategy of `field` in `schema` and the schema of its value (or list items).
pub fn field(schema: Schema, field: &str) -> (Strategy, Schema) {
    let Some(schema) = schema else {
        return (Plain, None);
    };
    if field == "metadata" && schema != OBJECT_META {
        return (Plain, Some(OBJECT_META));
    }
    FIELDS
        .iter()
        .find(|(s, f, _, _)| *s == schema && *f == field)
        .map_or((Plain, None), |&(_, _, strategy, child)| (strategy, Some(child).filter(|c| !c.is_empty())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_child_schema_is_described() {
        for &(_, _, _, child) in FIELDS {
            let known =
                child.is_empty() || child == "Object" || FIELDS.iter().any(|(schema, _, _, _)| *schema == child);
            assert!(known, "schema {child} has no fields");
        }
        for &(_, kind, schema) in KINDS {
            let known = schema == "Object" || FIELDS.iter().any(|(s, _, _, _)| *s == schema);
            assert!(known, "{kind}: schema {schema} has no fields");
        }
    }

    #[test]
    fn kinds_are_found_by_group() {
        assert_eq!(for_kind("apps/v1", "Deployment"), Some("Workload"));
        assert_eq!(for_kind("v1", "Pod"), Some("Pod"));
        assert_eq!(for_kind("autoscaling/v1", "Scale"), Some("Object"));
        assert_eq!(for_kind("example.com/v1", "Widget"), None);
        assert_eq!(for_kind("v1", "Deployment"), None);
    }

    #[test]
    fn metadata_is_object_meta_everywhere() {
        assert_eq!(field(Some("PodTemplateSpec"), "metadata"), (Plain, Some(OBJECT_META)));
        assert_eq!(field(Some(OBJECT_META), "finalizers"), (Merge, None));
        assert_eq!(field(Some("PodSpec"), "tolerations"), (Plain, None));
        assert_eq!(field(None, "containers"), (Plain, None));
    }
}
