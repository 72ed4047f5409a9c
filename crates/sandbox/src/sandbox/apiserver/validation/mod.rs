//! Update validation: the fields each kind's `ValidateUpdate` (`pkg/apis/<group>/validation`)
//! keeps fixed once an object exists, refused with kube-apiserver's 422 and its messages. Bad
//! values are rendered as Go's `%#v` renders them where that is feasible (label selectors,
//! string slices); a pod template is shown elided.
//!
//! Create and update also run each kind's spec validation (`ValidateX`, in the submodules), and
//! status updates the status rules of the workload kinds.

use serde_json::{Map, Value};

mod admission;
mod batch;
mod certificates;
mod claims;
mod difflib;
mod events;
mod gojson;
mod job;
mod meta;
mod networking;
mod pod;
mod resource;
mod service;
mod storage;
mod workloads;

pub(crate) use crate::apimachinery::field::Error as FieldError;
use crate::apimachinery::strconv::quote;
use crate::sandbox::apiserver::status::ApiError;
use crate::sandbox::storage::objects::name_of;
use crate::sandbox::storage::resources::ResourceType;
use crate::server::http::Request;

/// The fields of a pod spec an update may change (`updatablePodSpecFields`, v1.36).
const UPDATABLE_POD_SPEC_FIELDS: &[&str] = &[
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
];

/// The StatefulSet spec fields an update may change.
const UPDATABLE_STATEFULSET_FIELDS: &[&str] = &[
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "revisionHistoryLimit",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
];

/// `field.Invalid(path, value, "field is immutable")` with an already rendered value.
pub(super) fn immutable(field: &str, rendered: String) -> FieldError {
    FieldError::invalid(field, rendered, "field is immutable")
}

/// `errors.NewInvalid` for `ListOptions.meta.k8s.io` (bad list or watch parameters).
pub fn invalid_options(causes: &[FieldError]) -> ApiError {
    ApiError::new_invalid("meta.k8s.io", "ListOptions", "", causes)
}

/// `ValidateDeleteOptions` (the delete handlers): `orphanDependents` and `propagationPolicy`
/// exclude each other, and the policy is one of the three (or nil). 422 on
/// `DeleteOptions.meta.k8s.io`.
pub fn delete_options(policy: Option<&str>, orphan_given: bool) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    if let Some(policy) = policy {
        if orphan_given {
            let detail = "orphanDependents and deletionPropagation cannot be both set";
            causes.push(FieldError::invalid("propagationPolicy", quote(policy), detail));
        }
        if !matches!(policy, "Foreground" | "Background" | "Orphan") {
            causes.push(FieldError::not_supported(
                "propagationPolicy",
                policy,
                &["Foreground", "Background", "Orphan", "nil"],
            ));
        }
    }
    if causes.is_empty() { Ok(()) } else { Err(ApiError::new_invalid("meta.k8s.io", "DeleteOptions", "", &causes)) }
}

/// `ValidateListOptions` (apimachinery's `internalversion/validation`): the list and watch
/// parameters that may not go together, with the `WatchList` gate as configured.
pub fn list_options(request: &Request, watch: bool, watch_list: bool) -> Result<(), ApiError> {
    let given = |name: &str| request.query_param(name).filter(|v| !v.is_empty());
    let params = ListParams {
        resource_version: given("resourceVersion"),
        matching: given("resourceVersionMatch"),
        continued: given("continue").is_some(),
        initial_events: request.query_param("sendInitialEvents").is_some(),
    };
    let causes = if watch { watch_option_causes(&params, watch_list) } else { list_option_causes(&params) };
    if causes.is_empty() { Ok(()) } else { Err(invalid_options(&causes)) }
}

/// The list parameters validation looks at.
struct ListParams<'a> {
    resource_version: Option<&'a str>,
    matching: Option<&'a str>,
    continued: bool,
    initial_events: bool,
}

const RESOURCE_VERSION_MATCH: &str = "resourceVersionMatch";

fn watch_option_causes(params: &ListParams<'_>, watch_list: bool) -> Vec<FieldError> {
    let mut causes = Vec::new();
    if params.initial_events {
        if params.matching != Some("NotOlderThan") {
            let detail = "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan";
            causes.push(FieldError::forbidden(RESOURCE_VERSION_MATCH, detail));
        }
        if !watch_list {
            let detail = "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled";
            causes.push(FieldError::forbidden("sendInitialEvents", detail));
        }
    }
    if let Some(matching) = params.matching {
        if !params.initial_events {
            let detail = "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided";
            causes.push(FieldError::forbidden(RESOURCE_VERSION_MATCH, detail));
        }
        if matching != "NotOlderThan" {
            causes.push(FieldError::not_supported(RESOURCE_VERSION_MATCH, matching, &["NotOlderThan"]));
        }
        if params.continued {
            let detail = "resourceVersionMatch is forbidden when continue is provided";
            causes.push(FieldError::forbidden(RESOURCE_VERSION_MATCH, detail));
        }
    }
    causes
}

fn list_option_causes(params: &ListParams<'_>) -> Vec<FieldError> {
    let mut causes = Vec::new();
    if let Some(matching) = params.matching {
        if params.resource_version.is_none() {
            let detail = "resourceVersionMatch is forbidden unless resourceVersion is provided";
            causes.push(FieldError::forbidden(RESOURCE_VERSION_MATCH, detail));
        }
        if params.continued {
            let detail = "resourceVersionMatch is forbidden when continue is provided";
            causes.push(FieldError::forbidden(RESOURCE_VERSION_MATCH, detail));
        }
        if matching != "Exact" && matching != "NotOlderThan" {
            causes.push(FieldError::not_supported(RESOURCE_VERSION_MATCH, matching, &["Exact", "NotOlderThan", ""]));
        }
        if matching == "Exact" && params.resource_version == Some("0") {
            let detail = "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"";
            causes.push(FieldError::forbidden(RESOURCE_VERSION_MATCH, detail));
        }
    }
    if params.initial_events {
        causes.push(FieldError::forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"));
    }
    causes
}

/// `ValidateX` on create: the kind's spec rules (object metadata is checked when the object is
/// prepared, see `objects::prepare_create`).
pub fn validate_create(resource: &ResourceType, object: &Value) -> Result<(), ApiError> {
    let causes = spec_causes(resource, object, None);
    if causes.is_empty() { Ok(()) } else { Err(ApiError::invalid(resource, name_of(object), &causes)) }
}

/// Checks an update of the main resource (`old` → `new`, defaults applied): `ValidateXUpdate`,
/// the spec rules of a create followed by what may not change. A Service's `clusterIPs` are
/// first reconciled with a changed `clusterIP`, as its strategy does.
pub fn validate_update(resource: &ResourceType, old: &Value, new: &mut Value) -> Result<(), ApiError> {
    if is_kind(resource, "", "services") {
        normalize_cluster_ips(old, new);
    }
    let mut causes = spec_causes(resource, new, Some(old));
    causes.extend(immutability_causes(resource, old, new));
    if causes.is_empty() { Ok(()) } else { Err(ApiError::invalid(resource, name_of(old), &causes)) }
}

/// `ValidateXStatusUpdate` for the workload kinds: counts are not negative, do not exceed
/// `status.replicas`, and the collision count does not go down.
/// `approval`: the update is a CSR's approval, not its status.
pub fn validate_status_update(
    resource: &ResourceType,
    old: &Value,
    new: &Value,
    approval: bool,
) -> Result<(), ApiError> {
    let causes = if is_kind(resource, "batch", "jobs") {
        job::status_update(old, new)
    } else if is_kind(resource, "certificates.k8s.io", "certificatesigningrequests") {
        certificates::csr_status_update(old, new, approval)
    } else if is_kind(resource, "resource.k8s.io", "resourceclaims") {
        resource::claim_status_update(old, new)
    } else {
        workloads::status_causes(resource, old, new)
    };
    if causes.is_empty() { Ok(()) } else { Err(ApiError::invalid(resource, name_of(old), &causes)) }
}

fn is_kind(resource: &ResourceType, group: &str, plural: &str) -> bool {
    resource.group == group && resource.plural == plural
}

/// The spec rules of each kind's `ValidateX` (`old`: the stored object on an update).
fn spec_causes(resource: &ResourceType, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    match (resource.group, resource.plural) {
        ("apps", "deployments") => workloads::deployment(object),
        ("apps", "replicasets") => workloads::replica_set(object),
        ("apps", "statefulsets") => workloads::stateful_set(object),
        ("apps", "daemonsets") => workloads::daemon_set(object),
        ("apps", "controllerrevisions") => workloads::controller_revision(object, old),
        ("", "replicationcontrollers") => workloads::replication_controller(object),
        ("batch", "jobs") => batch::job(object, old),
        ("batch", "cronjobs") => batch::cron_job(object, old),
        ("", "pods") => pod::pod(object, old.is_none()),
        ("", "podtemplates") => pod::template(&object["template"], "template"),
        ("", "services") => service::service(object),
        ("", "events") => events::event(object, old, false),
        ("events.k8s.io", "events") => events::event(object, old, true),
        ("certificates.k8s.io", "certificatesigningrequests") if old.is_none() => certificates::csr(object),
        ("networking.k8s.io", "servicecidrs") => networking::service_cidr(object),
        ("networking.k8s.io", "ipaddresses") => networking::ip_address(object),
        ("storage.k8s.io", "csidrivers") => storage::csi_driver(object),
        ("storage.k8s.io", "csinodes") => storage::csi_node(object),
        ("storage.k8s.io", "volumeattachments") => storage::volume_attachment(object),
        ("storage.k8s.io", "volumeattributesclasses") => storage::volume_attributes_class(object),
        ("admissionregistration.k8s.io", "validatingadmissionpolicies") => admission::policy(object),
        // A claim's and a template's spec are validated on create only: updates may not change them.
        ("resource.k8s.io", "resourceclaims") if old.is_none() => resource::claim_spec(&object["spec"], "spec"),
        ("resource.k8s.io", "resourceclaimtemplates") if old.is_none() => resource::claim_template(object),
        ("resource.k8s.io", "deviceclasses") => resource::device_class(object),
        ("resource.k8s.io", "resourceslices") => resource::resource_slice(object),
        _ => Vec::new(),
    }
}

/// The fields each kind keeps fixed once the object exists.
fn immutability_causes(resource: &ResourceType, old: &Value, new: &Value) -> Vec<FieldError> {
    match (resource.group, resource.plural) {
        ("apps", "deployments" | "replicasets" | "daemonsets") => immutable_selector(old, new),
        ("apps", "statefulsets") => statefulset_update(old, new),
        ("", "pods") => pod_update(old, new),
        ("batch", "jobs") => job_update(old, new),
        ("", "configmaps") => immutable_data(old, new, &["data", "binaryData"]),
        ("", "nodes") => node_update(old, new),
        ("", "secrets") => secret_update(old, new),
        ("", "services") => service_update(old, new),
        ("", "persistentvolumeclaims") => claims::claim_update(old, new),
        ("networking.k8s.io", "servicecidrs") => networking::service_cidr_update(old, new),
        ("networking.k8s.io", "ipaddresses") => networking::ip_address_update(old, new),
        ("storage.k8s.io", "csidrivers") => storage::csi_driver_update(old, new),
        ("storage.k8s.io", "csinodes") => storage::csi_node_update(old, new),
        ("storage.k8s.io", "volumeattachments") => storage::volume_attachment_update(old, new),
        ("storage.k8s.io", "volumeattributesclasses") => storage::volume_attributes_class_update(old, new),
        ("resource.k8s.io", "resourceclaims") => resource::claim_update(old, new),
        ("resource.k8s.io", "resourceclaimtemplates") => resource::claim_template_update(old, new),
        ("resource.k8s.io", "resourceslices") => resource::resource_slice_update(old, new),
        _ => Vec::new(),
    }
}

/// `ValidateNodeUpdate`: pod CIDRs, once set, never change (the node IPAM controller relies
/// on it); one error per changed entry, as upstream.
fn node_update(old: &Value, new: &Value) -> Vec<FieldError> {
    const DETAIL: &str = "node updates may not change podCIDR except from \"\" to valid";
    let list = |node: &Value| node["spec"]["podCIDRs"].as_array().cloned().unwrap_or_default();
    let (before, after) = (list(old), list(new));
    if before.is_empty() {
        return Vec::new();
    }
    if before.len() != after.len() {
        return vec![FieldError::forbidden("spec.podCIDRs", DETAIL)];
    }
    before.iter().zip(&after).filter(|(a, b)| a != b).map(|_| FieldError::forbidden("spec.podCIDRs", DETAIL)).collect()
}

/// apps/v1 selectors are immutable (the strategies' `ValidateUpdate`).
fn immutable_selector(old: &Value, new: &Value) -> Vec<FieldError> {
    let (before, after) = (&old["spec"]["selector"], &new["spec"]["selector"]);
    if semantically_equal(before, after) {
        return Vec::new();
    }
    vec![immutable("spec.selector", label_selector_value(after))]
}

/// `ValidateStatefulSetUpdate`: only a few spec fields may change.
fn statefulset_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let strip = |spec: &Value| {
        let mut spec = spec.clone();
        if let Some(map) = spec.as_object_mut() {
            UPDATABLE_STATEFULSET_FIELDS.iter().for_each(|f| {
                map.remove(*f);
            });
        }
        spec
    };
    if semantically_equal(&strip(&old["spec"]), &strip(&new["spec"])) {
        return Vec::new();
    }
    let quoted: Vec<String> = UPDATABLE_STATEFULSET_FIELDS.iter().map(|f| format!("'{f}'")).collect();
    let (last, rest) = quoted.split_last().expect("fields");
    let detail =
        format!("updates to statefulset spec for fields other than {} and {last} are forbidden", rest.join(", "));
    vec![FieldError::forbidden("spec", &detail)]
}

/// `ValidatePodUpdate`: a pod spec is fixed but for images, a shorter active deadline, added
/// tolerations and a negative grace period raised to 1. `spec.nodeName` is set by the binding.
fn pod_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let (before, after) = (&old["spec"], &new["spec"]);
    for list in ["containers", "initContainers"] {
        if items(before, list).len() != items(after, list).len() {
            return vec![FieldError::forbidden(
                &format!("spec.{list}"),
                "pod updates may not add or remove containers",
            )];
        }
    }
    if let Some(cause) = active_deadline_update(before, after) {
        return vec![cause];
    }
    if semantically_equal(before, after) {
        return Vec::new();
    }
    let munged = munge_pod_spec(before, after);
    if semantically_equal(before, &munged) {
        return Vec::new();
    }
    let detail = format!("pod updates may not change fields other than {}", UPDATABLE_POD_SPEC_FIELDS.join(","));
    vec![FieldError::forbidden("spec", &detail)]
}

/// The new pod spec with the updatable fields taken from the old one, for comparison.
fn munge_pod_spec(before: &Value, after: &Value) -> Value {
    let mut munged = after.clone();
    for list in ["containers", "initContainers"] {
        if let Some(containers) = munged[list].as_array_mut() {
            for (container, old) in containers.iter_mut().zip(items(before, list)) {
                container["image"] = old["image"].clone();
            }
        }
    }
    munged["activeDeadlineSeconds"] = before["activeDeadlineSeconds"].clone();
    munged["schedulingGates"] = before["schedulingGates"].clone();
    if only_added_tolerations(before, after) {
        munged["tolerations"] = before["tolerations"].clone();
    }
    let old_grace = before["terminationGracePeriodSeconds"].as_i64();
    if old_grace.is_some_and(|g| g < 0) && munged["terminationGracePeriodSeconds"].as_i64() == Some(1) {
        munged["terminationGracePeriodSeconds"] = before["terminationGracePeriodSeconds"].clone();
    }
    munged
}

/// Every old toleration is still there (its `tolerationSeconds` aside).
fn only_added_tolerations(before: &Value, after: &Value) -> bool {
    let without_seconds = |t: &Value| {
        let mut t = t.clone();
        t.as_object_mut().map(|m| m.remove("tolerationSeconds"));
        t
    };
    let new: Vec<Value> = items(after, "tolerations").iter().map(without_seconds).collect();
    items(before, "tolerations").iter().all(|t| new.contains(&without_seconds(t)))
}

/// `activeDeadlineSeconds` may be set or shortened, not raised or removed.
fn active_deadline_update(before: &Value, after: &Value) -> Option<FieldError> {
    let field = "spec.activeDeadlineSeconds";
    match (before["activeDeadlineSeconds"].as_i64(), after["activeDeadlineSeconds"].as_i64()) {
        (_, Some(new)) if !(0..=i64::from(i32::MAX)).contains(&new) => {
            Some(FieldError::invalid(field, new.to_string(), "must be between 0 and 2147483647, inclusive"))
        }
        (Some(old), Some(new)) if old < new => {
            Some(FieldError::invalid(field, new.to_string(), "must be less than or equal to previous value"))
        }
        (Some(_), None) => {
            Some(FieldError::invalid(field, "null".into(), "must not update from a positive integer to nil value"))
        }
        _ => None,
    }
}

/// `ValidateJobSpecUpdate`: `ValidateJobSpec` once more (as upstream: its causes repeat), then
/// what may not change.
fn job_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut causes = batch::job_spec_with_selector(&new["spec"], "spec");
    causes.extend(job::spec_update(old, new));
    causes
}

/// `ValidateConfigMapUpdate` / `ValidateSecretUpdate`: once `immutable` is set, it and the
/// data stay as they are.
fn immutable_data(old: &Value, new: &Value, fields: &[&str]) -> Vec<FieldError> {
    if old["immutable"] != true {
        return Vec::new();
    }
    const DETAIL: &str = "field is immutable when `immutable` is set";
    let mut causes = Vec::new();
    if new["immutable"] != true {
        causes.push(FieldError::forbidden("immutable", DETAIL));
    }
    for field in fields {
        if old[field] != new[field] {
            causes.push(FieldError::forbidden(field, DETAIL));
        }
    }
    causes
}

/// A Secret's type never changes; its data follows `immutable`.
fn secret_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut causes = Vec::new();
    if old["type"] != new["type"] {
        causes.push(immutable("type", go_value_string(&new["type"])));
    }
    causes.extend(immutable_data(old, new, &["data"]));
    causes
}

/// The Service strategy's `normalizeClusterIPs`: an old client changing only `clusterIP`
/// changes the first of `clusterIPs`.
fn normalize_cluster_ips(old: &Value, new: &mut Value) {
    let (old_ip, new_ip) = (&old["spec"]["clusterIP"], &new["spec"]["clusterIP"]);
    if old_ip == new_ip || new_ip.as_str().unwrap_or_default().is_empty() {
        return;
    }
    let ip = new_ip.clone();
    if old["spec"]["clusterIPs"] == new["spec"]["clusterIPs"]
        && let Some(first) = new["spec"]["clusterIPs"].get_mut(0)
    {
        *first = ip;
    }
}

/// `validateUpgradeDowngradeClusterIPs`: allocated cluster IPs do not change.
fn service_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let external = |s: &Value| s["spec"]["type"] == "ExternalName";
    let headless = |s: &Value| s["spec"]["clusterIP"] == "None";
    if external(old) || external(new) || (headless(old) && headless(new)) {
        return Vec::new();
    }
    let (before, after) = (strings(&old["spec"]["clusterIPs"]), strings(&new["spec"]["clusterIPs"]));
    if before.len() != after.len() {
        return Vec::new();
    }
    before
        .iter()
        .zip(&after)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, _)| {
            FieldError::invalid(
                &format!("spec.clusterIPs[{i}]"),
                string_list_value(Some(&after)),
                "may not change once set",
            )
        })
        .collect()
}

fn items<'a>(spec: &'a Value, list: &str) -> &'a [Value] {
    spec[list].as_array().map(Vec::as_slice).unwrap_or_default()
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

/// `apiequality.Semantic.DeepEqual` on JSON: missing, null, empty lists and empty maps are equal.
pub fn semantically_equal(a: &Value, b: &Value) -> bool {
    prune(a) == prune(b)
}

fn prune(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let kept: Map<String, Value> =
                map.iter().map(|(k, v)| (k.clone(), prune(v))).filter(|(_, v)| !is_empty(v)).collect();
            Value::Object(kept)
        }
        Value::Array(items) => Value::Array(items.iter().map(prune).collect()),
        other => other.clone(),
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

/// A `metav1.LabelSelector` as a field error shows it (JSON; a nil selector is `null`).
pub fn label_selector_value(selector: &Value) -> String {
    if selector.is_null() {
        return "null".into();
    }
    gojson::structure(selector, gojson::LABEL_SELECTOR).json()
}

/// A `map[string]string` as a field error shows it: JSON with sorted keys, `null` when nil.
pub fn string_map_value(map: &Value) -> String {
    gojson::untyped(map).json()
}

/// A `[]string` as a field error shows it: a JSON array, `null` when nil (`None`).
pub fn string_list_value(values: Option<&[String]>) -> String {
    match values {
        Some(values) => gojson::Go::List(values.iter().map(|v| gojson::Go::Str(v.clone())).collect()).json(),
        None => "null".into(),
    }
}

/// Go's `%#v` of a `[]string` (`None`: a nil slice), for details that format a value themselves.
pub fn go_string_slice(values: Option<&[String]>) -> String {
    match values {
        Some(values) => format!("[]string{{{}}}", values.iter().map(|v| quote(v)).collect::<Vec<_>>().join(", ")),
        None => "[]string(nil)".into(),
    }
}

/// A string-typed value as `field.Invalid` shows it: quoted, or `null` when unset.
fn go_value_string(value: &Value) -> String {
    value.as_str().map_or_else(|| "null".into(), quote)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn values_render_as_json_as_go_marshals_them() {
        assert_eq!(
            label_selector_value(&json!({"matchLabels": {"b": "2", "a": "1"}})),
            r#"{"matchLabels":{"a":"1","b":"2"}}"#
        );
        assert_eq!(
            label_selector_value(&json!({"matchExpressions": [{"key": "k", "operator": "Exists"}]})),
            r#"{"matchExpressions":[{"key":"k","operator":"Exists"}]}"#
        );
        assert_eq!(string_list_value(Some(&["a".into(), "b".into()])), r#"["a","b"]"#);
        assert_eq!(string_list_value(None), "null");
        assert_eq!(string_map_value(&Value::Null), "null");
    }

    #[test]
    fn semantic_equality_ignores_empty_values() {
        assert!(semantically_equal(&json!({"a": [], "b": null, "c": {"d": {}}}), &json!({})));
        assert!(!semantically_equal(&json!({"a": [1]}), &json!({})));
    }

    #[test]
    fn node_pod_cidrs_are_set_once() {
        let unset = json!({"spec": {}});
        let set = json!({"spec": {"podCIDR": "10.0.1.0/24", "podCIDRs": ["10.0.1.0/24"]}});
        assert!(node_update(&unset, &set).is_empty());
        assert!(node_update(&set, &set).is_empty());
        let changed = json!({"spec": {"podCIDRs": ["10.0.2.0/24"]}});
        let errors = node_update(&set, &changed);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].field, "spec.podCIDRs");
        assert_eq!(errors[0].body(), "Forbidden: node updates may not change podCIDR except from \"\" to valid");
        let added = json!({"spec": {"podCIDRs": ["10.0.1.0/24", "fd00::/64"]}});
        assert_eq!(node_update(&set, &added).len(), 1);
        assert_eq!(node_update(&set, &unset).len(), 1);
    }

    #[test]
    fn pod_updates_may_change_images_and_add_tolerations() {
        let old = json!({"spec": {"containers": [{"name": "c", "image": "a"}], "tolerations": [{"key": "x", "operator": "Exists"}]}});
        let mut new = old.clone();
        new["spec"]["containers"][0]["image"] = json!("b");
        new["spec"]["tolerations"].as_array_mut().unwrap().push(json!({"key": "y", "operator": "Exists"}));
        assert!(pod_update(&old, &new).is_empty());
        new["spec"]["nodeName"] = json!("n");
        assert_eq!(pod_update(&old, &new)[0].field, "spec");
        let mut fewer = old.clone();
        fewer["spec"]["containers"] = json!([]);
        assert_eq!(pod_update(&old, &fewer)[0].body(), "Forbidden: pod updates may not add or remove containers");
    }
}
