//! Side-by-side scenarios of the `resourcequota` controller: `resourcequota`, `resourcequota-custom`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "resourcequota",
        summary: "a ResourceQuota's usage, and a ReplicaSet refused pods beyond it",
        nodes: 3,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: resource_quota,
    },
    Scenario {
        name: "resourcequota-custom",
        summary: "a quota counting a custom resource defined after the controller manager started",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: resource_quota_of_a_custom_resource,
    },
];

pub(super) fn resource_quota(steps: &mut Steps) -> Result<(), Error> {
    steps.create(
        "/api/v1/namespaces/sbs/resourcequotas",
        json!({"metadata": {"name": "compute"},
               "spec": {"hard": {"pods": "3", "configmaps": "4", "requests.cpu": "1", "requests.memory": "1Gi"}}}),
    )?;
    steps.wait("the quota's usage", |s| {
        let quota = s.get("/api/v1/namespaces/sbs/resourcequotas/compute")?.unwrap_or_default();
        Ok(quota["status"]["used"]["configmaps"].as_str().map(|_| ()))
    })?;
    steps.create("/api/v1/namespaces/sbs/configmaps", json!({"metadata": {"name": "settings"}}))?;
    let mut rs = replica_set("web", 2);
    rs["spec"]["template"]["spec"]["containers"][0]["resources"] =
        json!({"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "64Mi"}});
    steps.create(RS, rs)?;
    steps.wait_pods_ready(NAMESPACE, "app=web", 2)?;
    steps.wait("the quota counting 2 pods", |s| {
        let quota = s.get("/api/v1/namespaces/sbs/resourcequotas/compute")?.unwrap_or_default();
        let used = &quota["status"]["used"];
        Ok((used["pods"] == "2" && used["configmaps"] == "2" && used["requests.cpu"] == "200m").then_some(()))
    })?;
    steps.checkpoint("2 pods")?;
    steps.patch(&format!("{RS}/web"), json!({"spec": {"replicas": 5}}))?;
    steps.wait_pods_ready(NAMESPACE, "app=web", 3)?;
    steps.wait("the ReplicaSet reporting ReplicaFailure", |s| {
        let rs = s.get(&format!("{RS}/web"))?.unwrap_or_default();
        Ok((condition(&rs, "ReplicaFailure") == Some("True")).then_some(()))
    })?;
    steps.wait("the quota counting 3 pods", |s| {
        let quota = s.get("/api/v1/namespaces/sbs/resourcequotas/compute")?.unwrap_or_default();
        Ok((quota["status"]["used"]["pods"] == "3").then_some(()))
    })
}

/// A CRD appears after the controller manager started; a quota counts its objects once the
/// quota monitor's discovery (every 30 s) has found it, and admission refuses one too many.
pub(super) fn resource_quota_of_a_custom_resource(steps: &mut Steps) -> Result<(), Error> {
    const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    const WIDGETS: &str = "/apis/example.com/v1/namespaces/sbs/widgets";
    const QUOTA: &str = "/api/v1/namespaces/sbs/resourcequotas/widgets";
    steps.cluster_objects.push(format!("{CRDS}/widgets.example.com"));
    steps.create(CRDS, crate::envtest::widgets_definition())?;
    steps.wait("the CRD established", |s| {
        let crd = s.get(&format!("{CRDS}/widgets.example.com"))?.unwrap_or_default();
        Ok((condition(&crd, "Established") == Some("True")).then_some(()))
    })?;
    steps.create(
        "/api/v1/namespaces/sbs/resourcequotas",
        json!({"metadata": {"name": "widgets"}, "spec": {"hard": {"count/widgets.example.com": "2"}}}),
    )?;
    // The quota controller learns the resource at the monitor's next discovery (30 s) but
    // recalculates a quota only when its hard limits change (or every 5 m): change them until
    // its status counts widgets, as upstream's e2e spec does. Until then admission refuses
    // every widget.
    let polls = std::cell::Cell::new(0u32);
    let hard = |limit: u32| json!({"spec": {"hard": {"count/widgets.example.com": limit.to_string()}}});
    steps.wait("the quota's status counting widgets", |s| {
        let quota = s.get(QUOTA)?.unwrap_or_default();
        if quota["status"]["used"]["count/widgets.example.com"].is_string() {
            return Ok(Some(()));
        }
        polls.set(polls.get() + 1);
        if polls.get().is_multiple_of(10) {
            s.patch(QUOTA, hard(2 + polls.get() / 10 % 2))?;
        }
        Ok(None)
    })?;
    steps.patch(QUOTA, hard(2))?;
    steps.wait("the quota's status at 2 widgets", |s| {
        let quota = s.get(QUOTA)?.unwrap_or_default();
        Ok((quota["status"]["hard"]["count/widgets.example.com"] == "2").then_some(()))
    })?;
    let widget = |name: &str| json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}});
    steps.create(WIDGETS, widget("a"))?;
    steps.create(WIDGETS, widget("b"))?;
    steps.wait("the quota counting 2 widgets", |s| {
        let quota = s.get(QUOTA)?.unwrap_or_default();
        Ok((quota["status"]["used"]["count/widgets.example.com"] == "2").then_some(()))
    })?;
    steps.checkpoint("2 widgets")?;
    match steps.create(WIDGETS, widget("c")) {
        // The quota admission's refusal (403), known by its message as upstream's tests do.
        Err(e) if e.to_string().contains("exceeded quota") => {}
        // Shown as the text it was before the error was typed: `Ok(<object>)` or `Err("<message>")`.
        other => {
            let other = other.map_err(|e| e.to_string());
            return Err(Error::Scenario(format!("a third widget beyond the quota of 2: {other:?}")));
        }
    }
    steps.delete(&format!("{WIDGETS}/a"), None)?;
    steps.wait("the quota counting 1 widget", |s| {
        let quota = s.get(QUOTA)?.unwrap_or_default();
        Ok((quota["status"]["used"]["count/widgets.example.com"] == "1").then_some(()))
    })
}
