//! The other core/v1 kinds with defaults (`pkg/apis/core/v1/defaults.go`), plus what the
//! namespace, service and claim registry strategies fill in on create.

use serde_json::{Value, json};

use super::fields::{
    Lit::Bool, Lit::Str, child, entry, entry_at, fill, is_empty, is_zero, items, ptr, remove, set, str_at, val,
};
use super::pod::{self, PROTOCOL_TCP};

/// `v1.DefaultClientIPServiceAffinitySeconds` (3 hours).
const CLIENT_IP_AFFINITY_SECONDS: i64 = 10800;

/// Service: `SetDefaults_Service`, and the IP family policy the service REST storage
/// (`initIPFamilyFields`) picks when none is given. Cluster IPs and families are allocated
/// elsewhere.
pub(super) fn service(object: &mut Value) {
    if let Some(spec) = entry(object, "spec") {
        service_spec(spec);
    }
    if object.pointer("/spec/type").and_then(Value::as_str) == Some("LoadBalancer") {
        let ingresses = object.pointer_mut("/status/loadBalancer/ingress").and_then(Value::as_array_mut);
        for ingress in ingresses.into_iter().flatten() {
            if !is_empty(ingress, "ip") {
                fill(ingress, &[ptr("ipMode", Str("VIP"))]);
            }
        }
    }
}

fn service_spec(spec: &mut Value) {
    fill(spec, &[val("sessionAffinity", Str("None"))]);
    match str_at(spec, "sessionAffinity") {
        "None" => remove(spec, "sessionAffinityConfig"),
        "ClientIP" if spec.pointer("/sessionAffinityConfig/clientIP/timeoutSeconds").is_none_or(Value::is_null) => {
            set(spec, "sessionAffinityConfig", json!({"clientIP": {"timeoutSeconds": CLIENT_IP_AFFINITY_SECONDS}}));
        }
        _ => {}
    }
    fill(spec, &[val("type", Str("ClusterIP"))]);
    for port in items(spec, "ports") {
        fill(port, PROTOCOL_TCP);
        if port.get("targetPort").is_none_or(is_zero) {
            let number = port.get("port").cloned().unwrap_or(Value::from(0));
            set(port, "targetPort", number);
        }
    }
    let kind = str_at(spec, "type").to_string();
    let externally_accessible =
        matches!(kind.as_str(), "LoadBalancer" | "NodePort") || (kind == "ClusterIP" && !is_empty(spec, "externalIPs"));
    if externally_accessible {
        fill(spec, &[val("externalTrafficPolicy", Str("Cluster"))]);
    }
    if matches!(kind.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer") {
        fill(spec, &[ptr("internalTrafficPolicy", Str("Cluster"))]);
    }
    if kind == "LoadBalancer" {
        fill(spec, &[ptr("allocateLoadBalancerNodePorts", Bool(true))]);
    }
    if kind != "ExternalName" {
        let headless = str_at(spec, "clusterIP") == "None"
            || spec.pointer("/clusterIPs/0").and_then(Value::as_str) == Some("None");
        let policy = if headless && is_empty(spec, "selector") { "RequireDualStack" } else { "SingleStack" };
        fill(spec, &[ptr("ipFamilyPolicy", Str(policy))]);
    }
}

/// The label every namespace carries with its own name.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Namespace: `SetDefaults_Namespace` (the name label, always enforced),
/// `SetDefaults_NamespaceStatus`, and the strategy's create-time `kubernetes` finalizer. Only
/// a create has no `resourceVersion`; a namespace being deleted never gets it back.
pub(super) fn namespace(object: &mut Value) {
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    if !name.is_empty()
        && let Some(labels) = entry_at(object, &["metadata", "labels"])
    {
        set(labels, NAMESPACE_NAME_LABEL, Value::from(name));
    }
    let creating = object.pointer("/metadata/resourceVersion").is_none_or(is_zero)
        && object.pointer("/metadata/deletionTimestamp").is_none_or(Value::is_null);
    if creating && let Some(spec) = entry(object, "spec") {
        let finalizers = entry_array(spec, "finalizers");
        if let Some(finalizers) = finalizers
            && !finalizers.iter().any(|f| f == "kubernetes")
        {
            finalizers.push(Value::from("kubernetes"));
        }
    }
    if let Some(status) = entry(object, "status") {
        fill(status, &[val("phase", Str("Active"))]);
    }
}

/// `object[key]` as an array, created (`[]`) when absent or `null`.
fn entry_array<'a>(object: &'a mut Value, key: &str) -> Option<&'a mut Vec<Value>> {
    let slot = object.as_object_mut()?.entry(key).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Array(Vec::new());
    }
    slot.as_array_mut()
}

/// Secret: `SetDefaults_Secret`.
pub(super) fn secret(object: &mut Value) {
    fill(object, &[val("type", Str("Opaque"))]);
}

/// Endpoints: `SetDefaults_Endpoints` (ports are TCP).
pub(super) fn endpoints(object: &mut Value) {
    for port in items(object, "subsets").flat_map(|subset| items(subset, "ports")) {
        fill(port, PROTOCOL_TCP);
    }
}

/// PersistentVolume: `SetDefaults_PersistentVolume` (`Retain`, `Filesystem`, `Pending`) and
/// the volume-source defaulters.
pub(super) fn persistent_volume(object: &mut Value) {
    if let Some(status) = entry(object, "status") {
        fill(status, &[val("phase", Str("Pending"))]);
    }
    if let Some(spec) = entry(object, "spec") {
        fill(spec, &[val("persistentVolumeReclaimPolicy", Str("Retain"))]);
        fill(spec, pod::PVC_SPEC);
        pod::persistent_sources(spec);
    }
}

/// PersistentVolumeClaim: `SetDefaults_PersistentVolumeClaim(Spec)` and the strategy's
/// `NormalizeDataSources` (`dataSource` and `dataSourceRef` mirror each other).
pub(super) fn persistent_volume_claim(object: &mut Value) {
    pod::claim(object);
    let Some(spec) = child(object, "spec") else { return };
    let source = spec.get("dataSource").filter(|s| s.is_object()).cloned();
    let reference = spec.get("dataSourceRef").filter(|s| s.is_object()).cloned();
    match (source, reference) {
        (Some(source), None) => set(spec, "dataSourceRef", typed_reference(&source)),
        (None, Some(reference)) if is_empty(&reference, "namespace") => {
            set(spec, "dataSource", typed_reference(&reference));
        }
        _ => {}
    }
}

/// The `apiGroup`/`kind`/`name` of a typed object reference.
fn typed_reference(from: &Value) -> Value {
    let mut reference = json!({"kind": str_at(from, "kind"), "name": str_at(from, "name")});
    if let Some(group) = from.get("apiGroup").filter(|g| !g.is_null()) {
        set(&mut reference, "apiGroup", group.clone());
    }
    reference
}

/// LimitRange: `SetDefaults_LimitRangeItem` on container items — the default limit falls back
/// to the max, the default request to the default limit and then to the min.
pub(super) fn limit_range(object: &mut Value) {
    let Some(spec) = child(object, "spec") else { return };
    for item in items(spec, "limits").filter(|item| str_at(item, "type") == "Container") {
        add_missing(item, "default", "max");
        add_missing(item, "defaultRequest", "default");
        add_missing(item, "defaultRequest", "min");
    }
}

/// Copies the entries of resource list `from` that `into` lacks.
fn add_missing(item: &mut Value, into: &str, from: &str) {
    let Some(source) = item.get(from).and_then(Value::as_object).filter(|s| !s.is_empty()).cloned() else { return };
    let Some(target) = entry(item, into).and_then(Value::as_object_mut) else { return };
    for (name, quantity) in source {
        target.entry(name).or_insert(quantity);
    }
}

/// Node: `SetDefaults_NodeStatus` (allocatable defaults to capacity) and the v1 conversion of
/// `spec.podCIDR`, which mirrors the first of `spec.podCIDRs` (and fills them when alone).
pub(super) fn node(object: &mut Value) {
    if let Some(spec) = child(object, "spec") {
        if is_empty(spec, "podCIDRs") && !is_empty(spec, "podCIDR") {
            let cidr = spec.get("podCIDR").cloned().unwrap_or_default();
            set(spec, "podCIDRs", Value::Array(vec![cidr]));
        }
        if let Some(first) = spec.pointer("/podCIDRs/0").cloned() {
            set(spec, "podCIDR", first);
        }
    }
    let Some(status) = child(object, "status") else { return };
    if status.get("allocatable").is_none_or(Value::is_null)
        && let Some(capacity) = status.get("capacity").filter(|c| c.as_object().is_some_and(|c| !c.is_empty()))
    {
        let capacity = capacity.clone();
        set(status, "allocatable", capacity);
    }
}
