//! Object metadata rules shared by every kind: names, generated names, UIDs, timestamps,
//! generation, finalizers and when a deleted object is really gone.

use serde_json::{Map, Value, json};

use crate::apimachinery::field::Error as FieldError;
use crate::apimachinery::validation::{
    is_dns1123_label, is_dns1123_subdomain, is_qualified_name, is_valid_label_value,
};
use crate::sandbox::apiserver::status::{ApiError, ApiResult};
use crate::sandbox::storage::resources::ResourceType;

/// The current time in Kubernetes' `Time` format (RFC 3339, whole seconds, UTC).
pub fn now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The current time in `MicroTime` format (microseconds).
pub fn now_micro() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// `metadata.name`, empty when missing.
pub fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

/// `metadata.namespace`, empty when missing (cluster-scoped objects).
pub fn namespace_of(object: &Value) -> &str {
    object["metadata"]["namespace"].as_str().unwrap_or_default()
}

/// `metadata` as a map, created when missing or not an object.
pub fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    object["metadata"].as_object_mut().expect("metadata is an object")
}

/// Kinds whose names must be DNS labels rather than subdomains.
fn needs_dns_label(resource: &ResourceType) -> bool {
    resource.group.is_empty() && matches!(resource.plural, "namespaces" | "services")
}

/// Kinds whose names are free-form path segments (RBAC roles allow `system:…`; a core/v1 Event
/// is named `<object>.<hex>`, which passes 253 characters for an object with a long name, and
/// kube-apiserver checks only its path segment, for compatibility).
fn has_path_segment_names(resource: &ResourceType) -> bool {
    matches!(resource.plural, "roles" | "rolebindings" | "clusterroles" | "clusterrolebindings")
        || resource.group == "storage.k8s.io"
        || (resource.group.is_empty() && resource.plural == "events")
}

/// Checks a name as kube-apiserver's `ValidateObjectMeta` does: one error per problem.
pub fn validate_name(resource: &ResourceType, name: &str) -> Result<(), Vec<FieldError>> {
    let messages = if has_path_segment_names(resource) {
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '%']) {
            vec!["may not contain '/' or '%' and may not be '.' or '..'".to_string()]
        } else {
            Vec::new()
        }
    } else if needs_dns_label(resource) {
        is_dns1123_label(name)
    } else {
        is_dns1123_subdomain(name)
    };
    if messages.is_empty() {
        return Ok(());
    }
    Err(messages.iter().map(|message| FieldError::invalid_str("metadata.name", name, message)).collect())
}

/// Fills in the server-set metadata of a new object: name from `generateName`, uid,
/// creationTimestamp, generation; clears what clients may not set.
pub fn prepare_create(resource: &ResourceType, object: &mut Value, namespace: Option<&str>) -> ApiResult<()> {
    let meta = metadata_mut(object);
    if let Some(ns) = namespace {
        meta.insert("namespace".into(), ns.into());
    } else {
        meta.remove("namespace");
    }
    let name = meta.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
    let name = if name.is_empty() {
        match meta.get("generateName").and_then(Value::as_str).filter(|g| !g.is_empty()) {
            // apimachinery keeps the generated name within 63 characters.
            Some(prefix) => format!("{}{}", truncate(prefix, 58), crate::random::name_suffix(5)),
            None => {
                return Err(ApiError::invalid(
                    resource,
                    "",
                    &[FieldError::required("metadata.name", "name or generateName is required")],
                ));
            }
        }
    } else {
        name
    };
    validate_name(resource, &name).map_err(|errors| ApiError::invalid(resource, &name, &errors))?;
    meta.insert("name".into(), name.clone().into());
    let errors = metadata_errors(object);
    if !errors.is_empty() {
        return Err(ApiError::invalid(resource, &name, &errors));
    }
    let meta = metadata_mut(object);
    meta.insert("uid".into(), crate::random::uuid().into());
    meta.insert("creationTimestamp".into(), now().into());
    for server_set in
        ["deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion", "selfLink", "managedFields"]
    {
        meta.remove(server_set);
    }
    if resource.tracks_generation {
        meta.insert("generation".into(), 1.into());
    } else {
        meta.remove("generation");
    }
    Ok(())
}

fn truncate(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

/// `TotalAnnotationSizeLimitB`: keys and values of all annotations together.
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

/// `ValidateObjectMeta`'s checks of labels, annotations and finalizers (apimachinery's
/// `api/validation` and `apis/meta/v1/validation`), keys in sorted order.
pub fn metadata_errors(object: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut labels: Vec<(&String, &Value)> =
        object["metadata"]["labels"].as_object().map(|m| m.iter().collect()).unwrap_or_default();
    labels.sort_by(|a, b| a.0.cmp(b.0));
    for (key, value) in labels {
        for message in is_qualified_name(key) {
            errors.push(FieldError::invalid_str("metadata.labels", key, &message));
        }
        for message in is_valid_label_value(value.as_str().unwrap_or_default()) {
            errors.push(FieldError::invalid_json("metadata.labels", value, &message));
        }
    }
    let annotations = object["metadata"]["annotations"].as_object();
    let mut keys: Vec<&String> = annotations.map(|m| m.keys().collect()).unwrap_or_default();
    keys.sort();
    for key in keys {
        // The rule is QualifiedName except that case does not matter.
        for message in is_qualified_name(&key.to_lowercase()) {
            errors.push(FieldError::invalid_str("metadata.annotations", key, &message));
        }
    }
    let size: usize = annotations.map_or(0, |m| m.iter().map(|(k, v)| k.len() + v.as_str().map_or(0, str::len)).sum());
    if size > ANNOTATIONS_MAX_BYTES {
        errors.push(FieldError::too_long("metadata.annotations", ANNOTATIONS_MAX_BYTES));
    }
    for finalizer in finalizers(object) {
        for message in is_qualified_name(&finalizer) {
            errors.push(FieldError::invalid_str("metadata.finalizers", &finalizer, &message));
        }
    }
    errors
}

/// Everything of an object but `metadata` and `status`: what a spec change is measured on.
pub fn spec_part(object: &Value) -> Value {
    let mut rest = object.clone();
    if let Some(map) = rest.as_object_mut() {
        for key in ["metadata", "status", "apiVersion", "kind"] {
            map.remove(key);
        }
    }
    rest
}

/// `metadata.finalizers`.
pub fn finalizers(object: &Value) -> Vec<String> {
    object["metadata"]["finalizers"]
        .as_array()
        .map(|a| a.iter().filter_map(|f| f.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// Sets `metadata.finalizers`, removing the field when `list` is empty (Go's `omitempty`).
pub fn set_finalizers(object: &mut Value, list: &[String]) {
    let meta = metadata_mut(object);
    if list.is_empty() {
        meta.remove("finalizers");
    } else {
        meta.insert("finalizers".into(), json!(list));
    }
}

/// Whether `metadata.deletionTimestamp` is set: the object is being deleted.
pub fn is_deleting(object: &Value) -> bool {
    object["metadata"]["deletionTimestamp"].is_string()
}

/// A deleted object is gone once nothing holds it: no finalizers, no namespace finalizers,
/// no grace period still running (pods wait for their kubelet).
pub fn should_remove(object: &Value) -> bool {
    is_deleting(object)
        && finalizers(object).is_empty()
        && object["spec"]["finalizers"].as_array().is_none_or(|f| f.is_empty())
        && object["metadata"]["deletionGracePeriodSeconds"].as_i64().unwrap_or(0) == 0
}

/// The labels of an object as a map (empty when it has none).
pub fn labels(object: &Value) -> Map<String, Value> {
    object["metadata"]["labels"].as_object().cloned().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::storage::resources::find;

    #[test]
    fn names_are_checked_per_kind() {
        let pods = find("", "v1", "pods").unwrap();
        let namespaces = find("", "v1", "namespaces").unwrap();
        let roles = find("rbac.authorization.k8s.io", "v1", "clusterroles").unwrap();
        assert!(validate_name(pods, "web-1.a").is_ok());
        assert!(validate_name(pods, "Web").is_err());
        assert!(validate_name(pods, "-web").is_err());
        assert!(validate_name(namespaces, "a.b").is_err());
        assert!(validate_name(roles, "system:controller:replicaset-controller").is_ok());
        let events = find("", "v1", "events").unwrap();
        assert!(validate_name(events, &format!("{}.1880e2f9c1d4b3a2", "d".repeat(250))).is_ok());
        assert!(validate_name(events, "a/b").is_err());
    }

    #[test]
    fn generate_name_makes_a_suffixed_name() {
        let pods = find("", "v1", "pods").unwrap();
        let mut pod = json!({"metadata": {"generateName": "web-7d4b9c-"}});
        prepare_create(pods, &mut pod, Some("default")).unwrap();
        let name = name_of(&pod);
        assert!(name.starts_with("web-7d4b9c-") && name.len() == "web-7d4b9c-".len() + 5, "{name}");
        assert_eq!(namespace_of(&pod), "default");
        assert!(pod["metadata"]["uid"].is_string());
        assert_eq!(pod["metadata"]["generation"], 1, "pods track generation since v1.33");
        let mut nameless = json!({"metadata": {}});
        let err = prepare_create(pods, &mut nameless, Some("default")).unwrap_err();
        assert_eq!(
            err.message(),
            "Pod \"\" is invalid: metadata.name: Required value: name or generateName is required"
        );
    }

    #[test]
    fn removal_waits_for_finalizers_and_grace() {
        let mut o = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["x"]}});
        assert!(!should_remove(&o));
        set_finalizers(&mut o, &[]);
        assert!(should_remove(&o));
        o["metadata"]["deletionGracePeriodSeconds"] = 30.into();
        assert!(!should_remove(&o));
        let ns = json!({"metadata": {"deletionTimestamp": "x"}, "spec": {"finalizers": ["kubernetes"]}});
        assert!(!should_remove(&ns));
    }
}
