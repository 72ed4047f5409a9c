//! Side-by-side scenario of the `namespace` controller: `namespace-deletion`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "namespace-deletion",
    summary: "a namespace with content deleted; a finalizer holds it, then lets go",
    nodes: 3,
    flags: &[],
    apiserver_flags: &[],
    compare_nodes: false,
    run: namespace_deletion,
}];

pub(super) fn namespace_deletion(steps: &mut Steps) -> Result<(), Error> {
    let ns = "sbs-doomed";
    steps.namespaces.push(ns.to_string());
    steps.create("/api/v1/namespaces", json!({"metadata": {"name": ns}}))?;
    let account = format!("/api/v1/namespaces/{ns}/serviceaccounts/default");
    steps.wait("the default ServiceAccount", |s| Ok(s.get(&account)?.map(|_| ())))?;
    steps.create(&format!("/api/v1/namespaces/{ns}/configmaps"), json!({"metadata": {"name": "settings"}}))?;
    steps.create(
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
    )?;
    steps.create(
        &format!("/api/v1/namespaces/{ns}/secrets"),
        json!({"metadata": {"name": "password"}, "stringData": {"password": "hunter2"}}),
    )?;
    steps.create(
        &format!("/api/v1/namespaces/{ns}/services"),
        json!({"metadata": {"name": "cache"}, "spec": {"selector": {"app": "cache"}, "ports": [{"port": 80}]}}),
    )?;
    steps.create(&format!("/apis/apps/v1/namespaces/{ns}/replicasets"), replica_set("cache", 2))?;
    steps.wait_pods_ready(ns, "app=cache", 2)?;
    steps.checkpoint("populated")?;
    steps.delete(&format!("/api/v1/namespaces/{ns}"), None)?;
    steps.wait("everything but the held ConfigMap removed", |s| {
        let pods = s.list(&format!("/api/v1/namespaces/{ns}/pods"))?;
        let maps = s.list(&format!("/api/v1/namespaces/{ns}/configmaps"))?;
        let namespace = s.get(&format!("/api/v1/namespaces/{ns}"))?.unwrap_or_default();
        let held = condition(&namespace, "NamespaceFinalizersRemaining") == Some("True");
        Ok((pods.is_empty() && maps.len() == 1 && held).then_some(()))
    })?;
    steps.checkpoint("held by a finalizer")?;
    steps.patch(&format!("/api/v1/namespaces/{ns}/configmaps/held"), json!({"metadata": {"finalizers": null}}))?;
    steps.wait_gone(&format!("/api/v1/namespaces/{ns}"))
}
