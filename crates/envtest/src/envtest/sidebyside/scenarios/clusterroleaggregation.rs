//! Side-by-side scenario of the `clusterroleaggregation` controller: `clusterrole-aggregation`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "clusterrole-aggregation",
    summary: "an aggregated ClusterRole following a new labelled role, a changed one and a deleted one",
    nodes: 1,
    flags: &[],
    apiserver_flags: &[],
    compare_nodes: false,
    run: cluster_role_aggregation,
}];

pub(super) fn cluster_role_aggregation(steps: &mut Steps) -> Result<(), Error> {
    const ROLES: &str = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    let label = "example.com/aggregate-to-sbs";
    let rule = |verb: &str, resource: &str| json!({"apiGroups": [""], "resources": [resource], "verbs": [verb]});
    let source =
        |name: &str, rules: Value| json!({"metadata": {"name": name, "labels": {label: "true"}}, "rules": rules});
    steps.cluster_objects = ["sbs-aggregated", "sbs-pods", "sbs-a-secrets"].map(|n| format!("{ROLES}/{n}")).to_vec();
    steps.create(
        ROLES,
        json!({"metadata": {"name": "sbs-aggregated"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]}}),
    )?;
    steps.create(ROLES, source("sbs-pods", json!([rule("get", "pods")])))?;
    let rules_are = |wanted: Value| {
        move |s: &Steps| -> Result<Option<()>, Error> {
            let role = s.get(&format!("{ROLES}/sbs-aggregated"))?.unwrap_or_default();
            Ok((role["rules"] == wanted).then_some(()))
        }
    };
    steps.wait("the first source aggregated", rules_are(json!([rule("get", "pods")])))?;
    steps.checkpoint("one source")?;
    steps.create(ROLES, source("sbs-a-secrets", json!([rule("list", "secrets"), rule("get", "pods")])))?;
    steps.wait("the new source first", rules_are(json!([rule("list", "secrets"), rule("get", "pods")])))?;
    steps.checkpoint("a new source")?;
    steps.patch(&format!("{ROLES}/sbs-pods"), json!({"rules": [rule("watch", "pods")]}))?;
    let changed = json!([rule("list", "secrets"), rule("get", "pods"), rule("watch", "pods")]);
    steps.wait("the changed source aggregated", rules_are(changed))?;
    steps.checkpoint("a changed source")?;
    steps.delete(&format!("{ROLES}/sbs-a-secrets"), None)?;
    steps.wait("the deleted source's rules gone", rules_are(json!([rule("watch", "pods")])))
}
