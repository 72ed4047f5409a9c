//! API defaulting: the fields kube-apiserver v1.36 fills in when an object is written, with the
//! feature gates at their v1.36 defaults. Each function names the upstream code it mirrors
//! (`SetDefaults_*` in `pkg/apis/<group>/<version>/defaults.go`, the nested calls listed in
//! `zz_generated.defaults.go`, and the few registry-strategy steps whose results clients see
//! as defaults). Defaults must match upstream field for field: controllers hash defaulted pod
//! templates (`pod-template-hash`, `controller-revision-hash`).
//!
//! kube-apiserver also defaults every object it reads back from storage, so create-time
//! strategy fields (a Job's selector) get defaulted after being set; [`apply`] reproduces the
//! end result. Besides defaults proper, it writes the few zero values Go's JSON encoding always
//! emits inside pod templates (`resources: {}`, `metadata: {}`; since v1.34 no
//! `creationTimestamp: null`, which is `omitzero`), so objects read back exactly as from
//! kube-apiserver v1.36.
//!
//! Resource lists in pod specs get `SetDefaults_ResourceList` (milli-unit round-up, written back
//! canonical); other quantities keep the text they were written with. Not here: admission
//! plugins (priority, service-account volumes, default tolerations) run elsewhere.

mod core;
mod fields;
mod groups;
mod image;
mod pod;
mod qos;
mod resource;
mod workloads;

#[cfg(test)]
mod tests;

use serde_json::Value;

use crate::sandbox::storage::resources::ResourceType;

pub use qos::pod_qos_class;

/// A kind's defaulter.
type Defaulter = fn(&mut Value);

/// Which defaulter each kind gets: (API group, kind, defaulter). The sandbox serves one
/// version per group (autoscaling is `v2`), so group and kind identify the defaults. Kinds not
/// listed (ConfigMap, ServiceAccount, Event, Lease, PodDisruptionBudget, Role, …) have none.
const DEFAULTERS: &[(&str, &str, Defaulter)] = &[
    ("", "Pod", pod::pod),
    ("", "PodTemplate", workloads::pod_template),
    ("", "ReplicationController", workloads::replication_controller),
    ("", "Service", core::service),
    ("", "Namespace", core::namespace),
    ("", "Secret", core::secret),
    ("", "Endpoints", core::endpoints),
    ("", "PersistentVolume", core::persistent_volume),
    ("", "PersistentVolumeClaim", core::persistent_volume_claim),
    ("", "LimitRange", core::limit_range),
    ("", "Node", core::node),
    ("apps", "Deployment", workloads::deployment),
    ("apps", "ReplicaSet", workloads::replica_set),
    ("apps", "StatefulSet", workloads::stateful_set),
    ("apps", "DaemonSet", workloads::daemon_set),
    ("batch", "Job", workloads::job),
    ("batch", "CronJob", workloads::cron_job),
    ("autoscaling", "HorizontalPodAutoscaler", groups::horizontal_pod_autoscaler),
    ("rbac.authorization.k8s.io", "RoleBinding", groups::role_binding),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding", groups::role_binding),
    ("networking.k8s.io", "NetworkPolicy", groups::network_policy),
    ("storage.k8s.io", "StorageClass", groups::storage_class),
    ("storage.k8s.io", "CSIDriver", groups::csi_driver),
    ("storage.k8s.io", "VolumeAttachment", groups::volume_attachment),
    ("discovery.k8s.io", "EndpointSlice", groups::endpoint_slice),
    ("scheduling.k8s.io", "PriorityClass", groups::priority_class),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy", groups::validating_admission_policy),
    ("resource.k8s.io", "ResourceClaim", resource::resource_claim),
    ("resource.k8s.io", "ResourceClaimTemplate", resource::resource_claim_template),
    ("resource.k8s.io", "ResourceSlice", resource::resource_slice),
];

/// Applies kube-apiserver's defaults for the object's kind. Called on create and on every
/// update of the main resource; applying twice changes nothing more. Create-time strategy
/// fields need `metadata.uid` and `metadata.name` set first.
pub fn apply(resource: &ResourceType, object: &mut Value) {
    if !object.is_object() {
        return;
    }
    if let Some((_, _, defaulter)) =
        DEFAULTERS.iter().find(|(group, kind, _)| *group == resource.group && *kind == resource.kind)
    {
        defaulter(object);
    }
}

/// What a status update's strategy does besides keeping the spec (kube-apiserver also
/// defaults the status it decodes): a ResourceClaim's allocation defaulted and the statuses of
/// deallocated devices dropped.
pub fn prepare_status_update(resource: &ResourceType, old: &Value, object: &mut Value) {
    if resource.group == "resource.k8s.io" && resource.kind == "ResourceClaim" {
        resource::claim_status_update(old, object);
    }
}

/// The update-time counterpart of a create-time strategy field, to run on an update of the
/// main resource after [`apply`], with the stored object: a DaemonSet keeps its template
/// generation (`deprecated.daemonset.template.generation`) and bumps it when the pod template
/// changed (`daemonSetStrategy.PrepareForUpdate`). The DaemonSet controller labels pods with
/// that generation and treats pods of the current one as up to date.
pub fn prepare_update(resource: &ResourceType, old: &Value, object: &mut Value) {
    if resource.group == "apps" && resource.kind == "DaemonSet" {
        workloads::daemon_set_update(old, object);
    }
}
