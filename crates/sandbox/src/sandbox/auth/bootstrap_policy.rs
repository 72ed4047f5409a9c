//! kube-apiserver's default RBAC policy, which its `rbac/bootstrap-roles` post-start hook
//! (pkg/registry/rbac/rest/storage_rbac.go `PostStartHook`) creates at start, whatever the
//! authorization mode: the ClusterRoles, ClusterRoleBindings, Roles and RoleBindings of
//! upstream's plugin/pkg/auth/authorizer/rbac/bootstrappolicy (policy.go, controller_policy.go,
//! namespace_policy.go).
//!
//! The data files under `bootstrap_policy/` are that policy as kube-apiserver v1.36.2 created it
//! with its default feature gates (so the DRA and VolumeAttributesClass controllers' roles are
//! there), in YAML flow style, written by `scripts/gen-sandbox-rbac.py`. Every object gets the label
//! `kubernetes.io/bootstrapping: rbac-defaults` and the annotation
//! `rbac.authorization.kubernetes.io/autoupdate: "true"`, as upstream's `addDefaultMetadata`.
//!
//! The aggregated ClusterRoles (`admin`, `edit`, `view`, …) are created as kube-apiserver creates
//! them, with their `aggregationRule` and no rules: kube-controller-manager's
//! clusterrole-aggregation-controller fills them.

use serde_json::{Value, json};

const CLUSTER_ROLES: &str = include_str!("bootstrap_policy/cluster-roles.yaml");
const CLUSTER_ROLE_BINDINGS: &str = include_str!("bootstrap_policy/cluster-role-bindings.yaml");
const CONTROLLER_ROLES: &str = include_str!("bootstrap_policy/controller-roles.yaml");
const NAMESPACE_POLICY: &str = include_str!("bootstrap_policy/namespace-policy.yaml");

const RBAC_GROUP_VERSION: &str = "rbac.authorization.k8s.io/v1";
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
/// The prefix of the controllers' roles and service-account bindings (controller_policy.go `saRolePrefix`).
const CONTROLLER_ROLE_PREFIX: &str = "system:controller:";

/// Every bootstrap object as (storage, object), without uid or creationTimestamp.
pub fn objects() -> Vec<(&'static str, Value)> {
    let mut objects = Vec::new();
    let mut cluster_roles: Vec<Value> = parse(CLUSTER_ROLES, "cluster-roles.yaml");
    for controller in parse(CONTROLLER_ROLES, "controller-roles.yaml") {
        let name = format!("{CONTROLLER_ROLE_PREFIX}{}", text(&controller["name"]));
        cluster_roles.push(json!({"metadata": {"name": name}, "rules": controller["rules"]}));
    }
    for role in cluster_roles {
        objects.push(("clusterroles", finish(role, "ClusterRole")));
    }
    for binding in parse(CLUSTER_ROLE_BINDINGS, "cluster-role-bindings.yaml") {
        let name = text(&binding["name"]);
        objects.push(("clusterrolebindings", cluster_role_binding(&name, &name, binding["subjects"].clone())));
    }
    // controller-role-bindings.yaml: each controller role bound to its service account.
    for controller in parse(CONTROLLER_ROLES, "controller-roles.yaml") {
        let account = text(&controller["name"]);
        let name = format!("{CONTROLLER_ROLE_PREFIX}{account}");
        let subject = json!([{"kind": "ServiceAccount", "name": account, "namespace": "kube-system"}]);
        objects.push(("clusterrolebindings", cluster_role_binding(&name, &name, subject)));
    }
    let namespaced: Value = serde_yaml_ng::from_str(NAMESPACE_POLICY).expect("namespace-policy.yaml is valid YAML");
    for role in namespaced["roles"].as_array().cloned().unwrap_or_default() {
        objects.push(("roles", finish(role, "Role")));
    }
    for binding in namespaced["roleBindings"].as_array().cloned().unwrap_or_default() {
        objects.push(("rolebindings", finish(binding, "RoleBinding")));
    }
    objects
}

fn parse(yaml: &str, file: &str) -> Vec<Value> {
    serde_yaml_ng::from_str(yaml).unwrap_or_else(|e| panic!("{file} is not a valid list: {e}"))
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

fn cluster_role_binding(name: &str, role: &str, subjects: Value) -> Value {
    let mut binding =
        json!({"metadata": {"name": name}, "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role}});
    if !subjects.is_null() {
        binding["subjects"] = subjects;
    }
    finish(binding, "ClusterRoleBinding")
}

/// Adds apiVersion, kind and upstream's default label and annotation.
fn finish(mut object: Value, kind: &str) -> Value {
    object["apiVersion"] = RBAC_GROUP_VERSION.into();
    object["kind"] = kind.into();
    let metadata = &mut object["metadata"];
    if !metadata["labels"].is_object() {
        metadata["labels"] = json!({});
    }
    metadata["labels"]["kubernetes.io/bootstrapping"] = "rbac-defaults".into();
    metadata["annotations"] = json!({"rbac.authorization.kubernetes.io/autoupdate": "true"});
    object
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(objects: &'a [(&'static str, Value)], storage: &str, name: &str) -> &'a Value {
        objects
            .iter()
            .find(|(s, o)| *s == storage && o["metadata"]["name"] == name)
            .map(|(_, o)| o)
            .unwrap_or_else(|| panic!("{storage} {name} missing"))
    }

    #[test]
    fn controller_roles_are_bound_to_their_service_accounts() {
        let objects = objects();
        let role = find(&objects, "clusterroles", "system:controller:replicaset-controller");
        assert_eq!(role["metadata"]["labels"]["kubernetes.io/bootstrapping"], "rbac-defaults");
        assert_eq!(role["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"], "true");
        let binding = find(&objects, "clusterrolebindings", "system:controller:replicaset-controller");
        assert_eq!(binding["roleRef"]["name"], "system:controller:replicaset-controller");
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": "replicaset-controller", "namespace": "kube-system"}])
        );
        let leader = find(&objects, "rolebindings", "system::leader-locking-kube-controller-manager");
        assert_eq!(leader["metadata"]["namespace"], "kube-system");
        // The controllers on by default in v1.36 have their roles.
        for controller in [
            "resource-claim-controller",
            "device-taint-eviction-controller",
            "volumeattributesclass-protection-controller",
        ] {
            let name = format!("system:controller:{controller}");
            find(&objects, "clusterroles", &name);
            assert_eq!(find(&objects, "clusterrolebindings", &name)["subjects"][0]["name"], controller);
        }
    }

    #[test]
    fn aggregated_roles_are_left_for_the_controller_to_fill() {
        let objects = objects();
        for name in ["admin", "edit", "view"] {
            let role = find(&objects, "clusterroles", name);
            assert!(role["aggregationRule"]["clusterRoleSelectors"].is_array(), "{name}");
            assert!(role["rules"].as_array().is_none_or(Vec::is_empty), "{name} has no rules of its own");
        }
        assert!(find(&objects, "clusterroles", "system:aggregate-to-view")["rules"].is_array());
    }
}
