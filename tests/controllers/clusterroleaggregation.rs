//! The clusterrole-aggregation-controller on both backends: an aggregated ClusterRole follows
//! the roles its selector matches (added, changed, deleted), in name order, and the bootstrap
//! policy's `admin`/`edit`/`view`, created empty by the server, are filled.

use k8s_openapi::api::rbac::v1::ClusterRole;
use kcm::app::controllers::named;
use kcm::client::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, eventually, from};

const LABEL: &str = "example.com/aggregate-to-watcher";

fn rule(verb: &str, resource: &str) -> Value {
    json!({"apiGroups": [""], "resources": [resource], "verbs": [verb]})
}

fn labelled(name: &str, rules: Value) -> ClusterRole {
    from(json!({"metadata": {"name": name, "labels": {LABEL: "true"}}, "rules": rules}))
}

/// The aggregated role's rules once they equal `wanted`.
fn wait_for_rules(roles: &Api<ClusterRole>, what: &str, wanted: Value) {
    eventually(what, || {
        let role = roles.get("watcher").ok()?;
        let rules = serde_json::to_value(role.rules.unwrap_or_default()).ok()?;
        (rules == wanted).then_some(())
    });
}

on_both_backends!(an_aggregated_role_follows_its_sources);
fn an_aggregated_role_follows_its_sources(backend: Backend) {
    let cluster = harness::with(&[named("clusterrole-aggregation-controller")]).on(backend).without_nodes().start();
    let roles = Api::<ClusterRole>::all(&cluster.client);
    let post = PostParams::default();
    let aggregated: ClusterRole = from(json!({"metadata": {"name": "watcher"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {LABEL: "true"}}]}}));
    roles.create(&aggregated, &post).expect("created");
    roles.create(&labelled("watcher-pods", json!([rule("get", "pods")])), &post).expect("created");
    wait_for_rules(&roles, "the first source's rules", json!([rule("get", "pods")]));

    // A new source sorts first by name; a rule both have appears once.
    let rules = json!([rule("list", "secrets"), rule("get", "pods")]);
    roles.create(&labelled("watcher-a-secrets", rules), &post).expect("created");
    wait_for_rules(&roles, "the new source's rules first", json!([rule("list", "secrets"), rule("get", "pods")]));

    let mut pods = roles.get("watcher-pods").expect("source");
    pods.rules = Some(from(json!([rule("watch", "pods")])));
    roles.replace("watcher-pods", &pods, &post).expect("changed");
    wait_for_rules(
        &roles,
        "the changed source's rules",
        json!([rule("list", "secrets"), rule("get", "pods"), rule("watch", "pods")]),
    );

    roles.delete("watcher-a-secrets", &DeleteParams::default()).expect("deleted");
    wait_for_rules(&roles, "the deleted source's rules gone", json!([rule("watch", "pods")]));

    // The bootstrap policy's aggregated roles, created without rules, are filled (the test
    // sandbox runs without RBAC and so without the bootstrap policy).
    if !matches!(backend, Backend::Real) {
        return;
    }
    eventually("view, edit and admin filled", || {
        let filled = |name: &str| roles.get(name).ok().is_some_and(|r| !r.rules.unwrap_or_default().is_empty());
        ["view", "edit", "admin"].into_iter().all(filled).then_some(())
    });
}
