//! Side-by-side scenario of the `resourceclaim` controller: `resourceclaim`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "resourceclaim",
    summary: "pods with a ResourceClaimTemplate given their generated claims (one template missing: \
                  reported); the scheduler's part played by the steps: claims allocated, pods bound, the claims \
                  reserved for them; a finished pod's claim deleted, a deleted pod's claim released and collected",
    nodes: 1,
    flags: &[],
    apiserver_flags: &[],
    compare_nodes: false,
    run: resource_claims,
}];

/// The claim pod `pod` was given for its `gpu` entry, once its status names it.
pub(super) fn generated_claim(steps: &Steps, pod: &str) -> Result<Option<String>, Error> {
    let Some(pod) = steps.get(&format!("{PODS}/{pod}"))? else { return Ok(None) };
    let statuses = pod["status"]["resourceClaimStatuses"].as_array().cloned().unwrap_or_default();
    let name = statuses.iter().find(|s| s["name"] == "gpu").and_then(|s| s["resourceClaimName"].as_str());
    match name {
        Some(name) if steps.get(&format!("{RESOURCE_CLAIMS}/{name}"))?.is_some() => Ok(Some(name.to_string())),
        _ => Ok(None),
    }
}

pub(super) fn resource_claims(steps: &mut Steps) -> Result<(), Error> {
    device_class(steps)?;
    let template = json!({"metadata": {"name": "gpu"}, "spec": {
        "metadata": {"labels": {"team": "ml"}, "annotations": {"purpose": "training"}},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRA_DRIVER}}]}}}});
    steps.create("/apis/resource.k8s.io/v1/namespaces/sbs/resourceclaimtemplates", template)?;
    let manual = json!({"schedulerName": MANUAL_SCHEDULER});
    let by_template = json!({"resourceClaimTemplateName": "gpu"});
    steps.create(PODS, dra_pod("server", by_template.clone(), manual.clone()))?;
    // Runs to completion a few seconds after it starts.
    let mut trainer =
        dra_pod("trainer", by_template, json!({"schedulerName": MANUAL_SCHEDULER, "restartPolicy": "Never"}));
    trainer["metadata"]["annotations"] = json!({"kcm-sandbox.dev/run-seconds": "3"});
    steps.create(PODS, trainer)?;
    steps.create(PODS, dra_pod("lost", json!({"resourceClaimTemplateName": "missing"}), manual))?;
    let server = steps.wait("server's claim", |s| generated_claim(s, "server"))?;
    let trainer = steps.wait("trainer's claim", |s| generated_claim(s, "trainer"))?;
    wait_event(steps, "FailedResourceClaimCreation")?;
    steps.checkpoint("claims generated from the template, the missing template reported")?;
    allocate(steps, &server, "gpu-0", Value::Null)?;
    bind(steps, "server")?;
    wait_reserved(steps, &server, "server")?;
    steps.wait_pods_ready(NAMESPACE, "app=server", 1)?;
    steps.checkpoint("server's claim allocated, its pod bound: the claim reserved for it")?;
    allocate(steps, &trainer, "gpu-1", Value::Null)?;
    bind(steps, "trainer")?;
    steps.wait("trainer Succeeded", |s| {
        Ok(s.get(&format!("{PODS}/trainer"))?.filter(|p| p["status"]["phase"] == "Succeeded").map(|_| ()))
    })?;
    steps.wait_gone(&format!("{RESOURCE_CLAIMS}/{trainer}"))?;
    steps.checkpoint("trainer finished: its claim released and deleted")?;
    steps.delete(&format!("{PODS}/server"), None)?;
    steps.wait_gone(&format!("{PODS}/server"))?;
    steps.wait_gone(&format!("{RESOURCE_CLAIMS}/{server}"))?;
    steps.checkpoint("server deleted: its claim released and collected")
}
