//! Objects pass through their typed Kubernetes structs on every write, as kube-apiserver decodes
//! them into Go structs: values of the wrong type are refused, unknown fields are dropped (or
//! refused with `fieldValidation=Strict`), and nothing is stored that a client could not decode.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::sandbox::apiserver::status::{ApiError, ApiResult};
use crate::sandbox::storage::resources::ResourceType;

/// How unknown fields are handled (`fieldValidation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them (the server's default; it would also send a warning).
    Warn,
    /// Refuse the request.
    Strict,
}

impl FieldValidation {
    /// Parses the `fieldValidation` query parameter: `Warn` when absent or empty, 400 for anything unknown.
    pub fn parse(value: Option<&str>) -> ApiResult<FieldValidation> {
        match value {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation: Unsupported value: {other:?}: supported values: \"Ignore\", \"Strict\", \"Warn\""
            ))),
        }
    }
}

/// Lists, for each stored kind, the k8s-openapi type it decodes into.
macro_rules! typed_kinds {
    ($($group:literal / $kind:literal => $ty:ty),* $(,)?) => {
        fn round_trip(group: &str, kind: &str, object: &Value) -> Option<Result<Value, serde_json::Error>> {
            match (group, kind) {
                $(($group, $kind) => Some(via::<$ty>(object)),)*
                _ => None,
            }
        }
    };
}

typed_kinds! {
    "" / "Namespace" => k8s_openapi::api::core::v1::Namespace,
    "" / "Pod" => k8s_openapi::api::core::v1::Pod,
    "" / "Node" => k8s_openapi::api::core::v1::Node,
    "" / "Service" => k8s_openapi::api::core::v1::Service,
    "" / "Endpoints" => k8s_openapi::api::core::v1::Endpoints,
    "" / "ServiceAccount" => k8s_openapi::api::core::v1::ServiceAccount,
    "" / "Secret" => k8s_openapi::api::core::v1::Secret,
    "" / "ConfigMap" => k8s_openapi::api::core::v1::ConfigMap,
    "" / "Event" => k8s_openapi::api::core::v1::Event,
    "" / "ReplicationController" => k8s_openapi::api::core::v1::ReplicationController,
    "" / "ResourceQuota" => k8s_openapi::api::core::v1::ResourceQuota,
    "" / "LimitRange" => k8s_openapi::api::core::v1::LimitRange,
    "" / "PersistentVolume" => k8s_openapi::api::core::v1::PersistentVolume,
    "" / "PersistentVolumeClaim" => k8s_openapi::api::core::v1::PersistentVolumeClaim,
    "" / "PodTemplate" => k8s_openapi::api::core::v1::PodTemplate,
    "apps" / "Deployment" => k8s_openapi::api::apps::v1::Deployment,
    "apps" / "ReplicaSet" => k8s_openapi::api::apps::v1::ReplicaSet,
    "apps" / "StatefulSet" => k8s_openapi::api::apps::v1::StatefulSet,
    "apps" / "DaemonSet" => k8s_openapi::api::apps::v1::DaemonSet,
    "apps" / "ControllerRevision" => k8s_openapi::api::apps::v1::ControllerRevision,
    "batch" / "Job" => k8s_openapi::api::batch::v1::Job,
    "batch" / "CronJob" => k8s_openapi::api::batch::v1::CronJob,
    "autoscaling" / "HorizontalPodAutoscaler" => k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler,
    "coordination.k8s.io" / "Lease" => k8s_openapi::api::coordination::v1::Lease,
    "discovery.k8s.io" / "EndpointSlice" => k8s_openapi::api::discovery::v1::EndpointSlice,
    "policy" / "PodDisruptionBudget" => k8s_openapi::api::policy::v1::PodDisruptionBudget,
    "certificates.k8s.io" / "CertificateSigningRequest" => k8s_openapi::api::certificates::v1::CertificateSigningRequest,
    "rbac.authorization.k8s.io" / "Role" => k8s_openapi::api::rbac::v1::Role,
    "rbac.authorization.k8s.io" / "RoleBinding" => k8s_openapi::api::rbac::v1::RoleBinding,
    "rbac.authorization.k8s.io" / "ClusterRole" => k8s_openapi::api::rbac::v1::ClusterRole,
    "rbac.authorization.k8s.io" / "ClusterRoleBinding" => k8s_openapi::api::rbac::v1::ClusterRoleBinding,
    "storage.k8s.io" / "StorageClass" => k8s_openapi::api::storage::v1::StorageClass,
    "storage.k8s.io" / "CSINode" => k8s_openapi::api::storage::v1::CSINode,
    "storage.k8s.io" / "CSIDriver" => k8s_openapi::api::storage::v1::CSIDriver,
    "storage.k8s.io" / "VolumeAttachment" => k8s_openapi::api::storage::v1::VolumeAttachment,
    "storage.k8s.io" / "CSIStorageCapacity" => k8s_openapi::api::storage::v1::CSIStorageCapacity,
    "storage.k8s.io" / "VolumeAttributesClass" => k8s_openapi::api::storage::v1::VolumeAttributesClass,
    "resource.k8s.io" / "DeviceClass" => k8s_openapi::api::resource::v1::DeviceClass,
    "resource.k8s.io" / "ResourceClaim" => k8s_openapi::api::resource::v1::ResourceClaim,
    "resource.k8s.io" / "ResourceClaimTemplate" => k8s_openapi::api::resource::v1::ResourceClaimTemplate,
    "resource.k8s.io" / "ResourceSlice" => k8s_openapi::api::resource::v1::ResourceSlice,
    "scheduling.k8s.io" / "PriorityClass" => k8s_openapi::api::scheduling::v1::PriorityClass,
    "networking.k8s.io" / "NetworkPolicy" => k8s_openapi::api::networking::v1::NetworkPolicy,
    "networking.k8s.io" / "Ingress" => k8s_openapi::api::networking::v1::Ingress,
    "networking.k8s.io" / "ServiceCIDR" => k8s_openapi::api::networking::v1::ServiceCIDR,
    "networking.k8s.io" / "IPAddress" => k8s_openapi::api::networking::v1::IPAddress,
    "admissionregistration.k8s.io" / "ValidatingAdmissionPolicy" => k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy,
    "admissionregistration.k8s.io" / "ValidatingAdmissionPolicyBinding" => k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
    "apiregistration.k8s.io" / "APIService" => k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
}

fn via<T: DeserializeOwned + Serialize>(object: &Value) -> Result<Value, serde_json::Error> {
    let typed: T = serde_json::from_value(object.clone())?;
    serde_json::to_value(&typed)
}

/// Maps whose values are resource quantities; JSON numbers there are quantities too.
const QUANTITY_MAPS: &[&str] = &[
    "limits",
    "requests",
    "hard",
    "used",
    "capacity",
    "allocatable",
    "min",
    "max",
    "default",
    "defaultRequest",
    "maxLimitRequestRatio",
    "overhead",
];

/// Decodes a request body (create or update, in its stored form) through its type and returns
/// what the type keeps. Errors read as the create and update handlers' `transformDecodeError`:
/// `<Kind> in version "<v>" cannot be handled as a <Kind>: …`.
pub fn normalize(resource: &ResourceType, object: Value, validation: FieldValidation) -> ApiResult<Value> {
    decode(resource, object, validation, true)
}

/// [`normalize`] for the result of a patch, whose strict-decoding errors the patch handler
/// reports bare (`strict decoding error: …`).
pub fn normalize_patched(resource: &ResourceType, object: Value, validation: FieldValidation) -> ApiResult<Value> {
    decode(resource, object, validation, false)
}

fn decode(resource: &ResourceType, object: Value, validation: FieldValidation, body: bool) -> ApiResult<Value> {
    let mut object = object;
    drop_empty_metadata(&mut object);
    quantities_as_strings(&mut object, false);
    if resource.group.is_empty() && resource.kind == "Secret" {
        merge_string_data(&mut object);
    }
    let (group, kind) = storage_group_kind(resource);
    let Some(result) = round_trip(group, kind, &object) else { return Ok(object) };
    let cannot_handle =
        |e: String| format!("{kind} in version \"{}\" cannot be handled as a {kind}: {e}", resource.version);
    let decoded = result.map_err(|e| ApiError::bad_request(cannot_handle(e.to_string())))?;
    if validation == FieldValidation::Ignore {
        return Ok(decoded);
    }
    let mut unknown = Vec::new();
    unknown_fields(&object, &decoded, "", &mut unknown);
    let list: Vec<String> = unknown.iter().map(|f| format!("unknown field \"{f}\"")).collect();
    if validation == FieldValidation::Strict && !list.is_empty() {
        let message = format!("strict decoding error: {}", list.join(", "));
        return Err(ApiError::bad_request(if body { cannot_handle(message) } else { message }));
    }
    WARNINGS.with(|w| w.borrow_mut().extend(list));
    Ok(decoded)
}

/// ObjectMeta's maps and lists are `omitempty`: Go stores an empty `labels: {}` or
/// `finalizers: []` as nothing, so it never reads back.
fn drop_empty_metadata(object: &mut Value) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    for field in ["labels", "annotations", "finalizers", "ownerReferences", "managedFields"] {
        let empty = match metadata.get(field) {
            Some(Value::Object(map)) => map.is_empty(),
            Some(Value::Array(list)) => list.is_empty(),
            _ => false,
        };
        if empty {
            metadata.remove(field);
        }
    }
}

thread_local! {
    /// Warnings for the request this thread is serving (each connection has its own thread).
    static WARNINGS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Takes the warnings gathered while serving the current request: the unknown fields that
/// `fieldValidation=Warn` (the default) dropped, sent back as `Warning` headers.
pub fn take_warnings() -> Vec<String> {
    WARNINGS.with(|w| std::mem::take(&mut *w.borrow_mut()))
}

/// events.k8s.io Events are stored as core Events.
fn storage_group_kind(resource: &ResourceType) -> (&'static str, &'static str) {
    if resource.group == "events.k8s.io" { ("", "Event") } else { (resource.group, resource.kind) }
}

/// kube-apiserver accepts numbers where quantities go (`cpu: 1`); they are strings on the wire.
fn quantities_as_strings(value: &mut Value, in_quantity_map: bool) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if in_quantity_map && child.is_number() {
                    *child = Value::String(child.to_string());
                } else {
                    quantities_as_strings(child, QUANTITY_MAPS.contains(&key.as_str()));
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| quantities_as_strings(item, false)),
        _ => {}
    }
}

/// A Secret's write-only `stringData` is merged into `data` (base64), as the Secret strategy does.
fn merge_string_data(secret: &mut Value) {
    use base64::Engine;
    let Some(string_data) = secret.as_object_mut().and_then(|m| m.remove("stringData")) else { return };
    let Some(entries) = string_data.as_object() else { return };
    for (key, text) in entries {
        let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_str().unwrap_or_default());
        secret["data"][key] = encoded.into();
    }
}

/// Paths of fields in `input` that `decoded` does not have.
fn unknown_fields(input: &Value, decoded: &Value, path: &str, out: &mut Vec<String>) {
    match (input, decoded) {
        (Value::Object(fields), Value::Object(kept)) => {
            for (key, value) in fields {
                let child = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                match kept.get(key) {
                    None if !value.is_null() => out.push(child),
                    Some(kept_value) => unknown_fields(value, kept_value, &child, out),
                    None => {}
                }
            }
        }
        (Value::Array(items), Value::Array(kept)) => {
            for (i, (item, kept_item)) in items.iter().zip(kept).enumerate() {
                unknown_fields(item, kept_item, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::storage::resources::find;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_dropped_or_refused() {
        let deployments = find("apps", "v1", "deployments").unwrap();
        let object = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 2, "bogus": true, "template": {"spec": {"containers": [{"name": "c", "image": "i", "colour": "red"}]}}}});
        let kept = normalize(deployments, object.clone(), FieldValidation::Warn).unwrap();
        assert!(kept["spec"].get("bogus").is_none());
        assert_eq!(kept["spec"]["replicas"], 2);
        let err = normalize(deployments, object, FieldValidation::Strict).unwrap_err();
        assert_eq!(
            err.message(),
            "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: unknown field \"spec.bogus\", unknown field \"spec.template.spec.containers[0].colour\""
        );
    }

    #[test]
    fn wrong_types_are_bad_requests() {
        let deployments = find("apps", "v1", "deployments").unwrap();
        let err = normalize(
            deployments,
            json!({"metadata": {"name": "web"}, "spec": {"replicas": "three"}}),
            FieldValidation::Warn,
        )
        .unwrap_err();
        assert_eq!(err.code, 400);
        assert!(
            err.message().starts_with("Deployment in version \"v1\" cannot be handled as a Deployment:"),
            "{}",
            err.message()
        );
    }

    #[test]
    fn numbers_become_quantities_and_string_data_merges() {
        let pods = find("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}}]}});
        let kept = normalize(pods, pod, FieldValidation::Strict).unwrap();
        assert_eq!(kept["spec"]["containers"][0]["resources"]["limits"]["cpu"], "1");
        let secrets = find("", "v1", "secrets").unwrap();
        let secret = normalize(
            secrets,
            json!({"metadata": {"name": "s"}, "stringData": {"user": "admin"}}),
            FieldValidation::Strict,
        )
        .unwrap();
        assert_eq!(secret["data"]["user"], "YWRtaW4=");
        assert!(secret.get("stringData").is_none());
    }
}
