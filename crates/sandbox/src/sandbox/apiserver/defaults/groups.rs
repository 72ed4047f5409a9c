//! Defaults of the non-core groups without pod templates: autoscaling/v2, rbac/v1,
//! networking/v1, storage/v1, discovery/v1 and scheduling/v1 (`pkg/apis/<group>/<version>/
//! defaults.go`).

use serde_json::{Value, json};

use super::fields::{
    Field, Lit::Bool, Lit::Int, Lit::Str, child, child_at, entry, fill, is_empty, items, ptr, set, str_at, val,
};
use super::pod;

/// `autoscaling.DefaultCPUUtilization`.
const DEFAULT_CPU_UTILIZATION: i64 = 80;

/// HorizontalPodAutoscaler: `SetDefaults_HorizontalPodAutoscaler` (one replica at least, 80%
/// CPU when no metric is given) and `SetDefaults_HorizontalPodAutoscalerBehavior`, which fills
/// a given `behavior` from `GenerateHPAScaleUpRules`/`GenerateHPAScaleDownRules`.
pub(super) fn horizontal_pod_autoscaler(object: &mut Value) {
    let Some(spec) = entry(object, "spec") else { return };
    fill(spec, &[ptr("minReplicas", Int(1))]);
    if is_empty(spec, "metrics") {
        let cpu = json!({
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION},
            },
        });
        set(spec, "metrics", json!([cpu]));
    }
    if let Some(behavior) = child(spec, "behavior") {
        scaling_rules(behavior, "scaleUp");
        scaling_rules(behavior, "scaleDown");
    }
}

/// The defaults of one direction's scaling rules: scale up by 4 pods or 100% per 15s with no
/// stabilization; scale down by 100% per 15s (its stabilization window stays unset: the
/// controller's flag decides it).
fn scaling_rules(behavior: &mut Value, direction: &str) {
    let Some(rules) = entry(behavior, direction) else { return };
    fill(rules, &[ptr("selectPolicy", Str("Max"))]);
    let policies = if direction == "scaleUp" {
        fill(rules, &[ptr("stabilizationWindowSeconds", Int(0))]);
        json!([
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15},
        ])
    } else {
        json!([{"type": "Percent", "value": 100, "periodSeconds": 15}])
    };
    if rules.get("policies").is_none_or(Value::is_null) {
        set(rules, "policies", policies);
    }
}

/// The RBAC API group, default of role references and user/group subjects.
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// RoleBinding and ClusterRoleBinding: `SetDefaults_(Cluster)RoleBinding` and
/// `SetDefaults_Subject` (service accounts are in the core group, `""`).
pub(super) fn role_binding(object: &mut Value) {
    if let Some(role_ref) = entry(object, "roleRef") {
        fill(role_ref, &[val("apiGroup", Str(RBAC_GROUP))]);
    }
    for subject in items(object, "subjects") {
        if matches!(str_at(subject, "kind"), "User" | "Group") {
            fill(subject, &[val("apiGroup", Str(RBAC_GROUP))]);
        }
    }
}

/// NetworkPolicy: `SetDefaults_NetworkPolicy` (policy types from the rules given) and
/// `SetDefaults_NetworkPolicyPort` (TCP).
pub(super) fn network_policy(object: &mut Value) {
    let Some(spec) = entry(object, "spec") else { return };
    // Wire shape: `podSelector` is a struct value, always written.
    entry(spec, "podSelector");
    if is_empty(spec, "policyTypes") {
        let mut types = vec![Value::from("Ingress")];
        if !is_empty(spec, "egress") {
            types.push(Value::from("Egress"));
        }
        set(spec, "policyTypes", Value::Array(types));
    }
    for direction in ["ingress", "egress"] {
        for port in items(spec, direction).flat_map(|rule| items(rule, "ports")) {
            fill(port, &[ptr("protocol", Str("TCP"))]);
        }
    }
}

/// StorageClass: `SetDefaults_StorageClass`.
pub(super) fn storage_class(object: &mut Value) {
    fill(object, &[ptr("reclaimPolicy", Str("Delete")), ptr("volumeBindingMode", Str("Immediate"))]);
}

/// `SetDefaults_CSIDriver` (`seLinuxMount` with `SELinuxMountReadWriteOncePod`, GA in v1.36;
/// `preventPodSchedulingIfMissing` only with `VolumeLimitScaling`, off).
const CSI_DRIVER: &[Field] = &[
    ptr("attachRequired", Bool(true)),
    ptr("podInfoOnMount", Bool(false)),
    ptr("storageCapacity", Bool(false)),
    ptr("fsGroupPolicy", Str("ReadWriteOnceWithFSType")),
    ptr("requiresRepublish", Bool(false)),
    ptr("seLinuxMount", Bool(false)),
];

/// CSIDriver: `SetDefaults_CSIDriver`.
pub(super) fn csi_driver(object: &mut Value) {
    let Some(spec) = entry(object, "spec") else { return };
    fill(spec, CSI_DRIVER);
    if is_empty(spec, "volumeLifecycleModes") {
        set(spec, "volumeLifecycleModes", json!(["Persistent"]));
    }
}

/// VolumeAttachment: the volume-source defaulters on an inline (migrated) volume spec.
pub(super) fn volume_attachment(object: &mut Value) {
    if let Some(inline) = child_at(object, &["spec", "source", "inlineVolumeSpec"]) {
        pod::persistent_sources(inline);
    }
}

/// EndpointSlice: `SetDefaults_EndpointPort` (name `""`, TCP).
pub(super) fn endpoint_slice(object: &mut Value) {
    for port in items(object, "ports") {
        fill(port, &[ptr("name", Str("")), ptr("protocol", Str("TCP"))]);
    }
}

/// PriorityClass: `SetDefaults_PriorityClass`.
pub(super) fn priority_class(object: &mut Value) {
    fill(object, &[ptr("preemptionPolicy", Str("PreemptLowerPriority"))]);
}

/// ValidatingAdmissionPolicy (admissionregistration/v1 `SetDefaults_ValidatingAdmissionPolicySpec`,
/// `SetDefaults_MatchResources`, `SetDefaults_NamedRuleWithOperations`): failurePolicy `Fail`;
/// match constraints with matchPolicy `Equivalent`, empty selectors and rules of scope `*`.
pub(super) fn validating_admission_policy(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else { return };
    spec.entry("failurePolicy").or_insert_with(|| json!("Fail"));
    let Some(constraints) = spec.get_mut("matchConstraints").and_then(Value::as_object_mut) else { return };
    constraints.entry("matchPolicy").or_insert_with(|| json!("Equivalent"));
    constraints.entry("namespaceSelector").or_insert_with(|| json!({}));
    constraints.entry("objectSelector").or_insert_with(|| json!({}));
    for rules in ["resourceRules", "excludeResourceRules"] {
        for rule in constraints.get_mut(rules).and_then(Value::as_array_mut).into_iter().flatten() {
            if let Some(rule) = rule.as_object_mut() {
                rule.entry("scope").or_insert_with(|| json!("*"));
            }
        }
    }
}
