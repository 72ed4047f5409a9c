//! Side-by-side scenario of the `disruption` controller: `disruption`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "disruption",
    summary: "a PodDisruptionBudget (minAvailable 2) over a Deployment of 3 and one over no pod; a pod evicted \
                  and replaced; the budget changed to maxUnavailable 50%, then to minAvailable 3 and an eviction refused",
    // One node: where a replacement pod lands is the scheduler's timing, not the controller's.
    nodes: 1,
    flags: &[],
    apiserver_flags: &[],
    compare_nodes: false,
    run: disruption,
}];

pub(super) const PDBS: &str = "/apis/policy/v1/namespaces/sbs/poddisruptionbudgets";

/// Waits until budget `name` observed its generation with `allowed` disruptions of `healthy`
/// healthy pods.
pub(super) fn budget_status(steps: &mut Steps, name: &str, allowed: i64, healthy: i64) -> Result<(), Error> {
    let path = format!("{PDBS}/{name}");
    steps.wait(&format!("PodDisruptionBudget {name}: {allowed} disruptions allowed, {healthy} healthy"), |s| {
        let pdb = s.get(&path)?.unwrap_or_default();
        let status = &pdb["status"];
        let done = status["observedGeneration"] == pdb["metadata"]["generation"]
            && status["disruptionsAllowed"].as_i64() == Some(allowed)
            && status["currentHealthy"].as_i64() == Some(healthy)
            && status["disruptedPods"].as_object().is_none_or(Map::is_empty);
        Ok(done.then_some(()))
    })
}

/// The name of the first live pod of app `app`, by name.
pub(super) fn first_pod(steps: &Steps, app: &str) -> Result<String, Error> {
    let mut names: Vec<String> = steps
        .live_pods(NAMESPACE, &format!("app={app}"))?
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names.into_iter().next().ok_or_else(|| Error::Scenario(format!("no pod of {app}")))
}

pub(super) fn disruption(steps: &mut Steps) -> Result<(), Error> {
    steps.create(DEPLOYMENTS, deployment("web", 3, "nginx:1.27"))?;
    rolled_out(steps, "web", 3)?;
    let selector = |app: &str| json!({"matchLabels": {"app": app}});
    steps
        .create(PDBS, json!({"metadata": {"name": "web"}, "spec": {"minAvailable": 2, "selector": selector("web")}}))?;
    steps.create(
        PDBS,
        json!({"metadata": {"name": "none"}, "spec": {"maxUnavailable": 1, "selector": selector("none")}}),
    )?;
    budget_status(steps, "web", 1, 3)?;
    budget_status(steps, "none", 0, 0)?;
    steps.checkpoint("a budget over 3 pods, one over none")?;
    let pod = first_pod(steps, "web")?;
    evict(steps, &pod)?;
    steps.wait_gone(&format!("/api/v1/namespaces/{NAMESPACE}/pods/{pod}"))?;
    rolled_out(steps, "web", 3)?;
    budget_status(steps, "web", 1, 3)?;
    steps.checkpoint("a pod evicted and replaced")?;
    let path = format!("{PDBS}/web");
    steps.patch(&path, json!({"spec": {"minAvailable": null, "maxUnavailable": "50%"}}))?;
    budget_status(steps, "web", 2, 3)?;
    steps.checkpoint("maxUnavailable 50%: 2 of 3")?;
    steps.patch(&path, json!({"spec": {"maxUnavailable": null, "minAvailable": 3}}))?;
    budget_status(steps, "web", 0, 3)?;
    let pod = first_pod(steps, "web")?;
    match evict(steps, &pod) {
        Err(e) if e.code() == Some(429) => Ok(()),
        Err(e) => Err(Error::EvictionRefused { source: Box::new(e) }),
        Ok(_) => Err(Error::Scenario(format!("{pod} was evicted though the budget allows no disruption"))),
    }
}
