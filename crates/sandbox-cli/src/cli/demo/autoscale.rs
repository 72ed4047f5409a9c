//! The demo's disruption and autoscaling steps: a drain blocked by a PodDisruptionBudget until
//! the budget allows it, and a HorizontalPodAutoscaler scaling a Deployment up under load and
//! back down when the load goes (load set with the metrics APIs' `kcm-sandbox.dev/cpu-load`).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::json;

use super::{Error, Narrator, STEP_TIMEOUT, all_implemented, deployment_manifest, wait_for, wait_running_pods};
use crate::client::{Api, Client, Patch, PostParams};

/// Deployment `checkout`'s pods are drained off one node while PDB `checkout` keeps all 3 available.
pub(super) fn drain_steps(client: &Client, ns: &str, narrator: &mut Narrator) -> Result<(), Error> {
    let needed = ["disruption-controller", "deployment-controller", "replicaset-controller"];
    narrator.step("Deployment checkout (3 replicas) with PodDisruptionBudget checkout (minAvailable 3)");
    if !all_implemented(&needed) {
        narrator.skip("a drain held back by a PodDisruptionBudget", &needed);
        return Ok(());
    }
    Api::<Deployment>::namespaced(client, ns).create(&deployment_manifest("checkout", 3)?, &PostParams::default())?;
    let budget: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "checkout"},
        "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "checkout"}}}}))?;
    Api::<PodDisruptionBudget>::namespaced(client, ns).create(&budget, &PostParams::default())?;
    wait_running_pods(client, ns, "app=checkout", 3)?;
    let status = wait_budget(client, ns, 3, 0)?;
    narrator.ok(&format!("disruption-controller: {status}"));

    let (pod, node) =
        checkout_pods(client, ns)?.into_iter().next().ok_or_else(|| Error::Step("no checkout pod".into()))?;
    narrator.step(&format!("Draining {node} (cordon, then evict its checkout pods as `kubectl drain` does)"));
    set_unschedulable(client, &node, true)?;
    match evict(client, ns, &pod) {
        // Refused by the budget: 429, as upstream's eviction API answers (known by its text, as
        // before the errors were typed).
        Err(e) if e.to_string().contains("429") || e.to_string().contains("disruption budget") => {
            narrator.ok(&format!("the eviction of {pod} is refused: {e}"));
        }
        Err(e) => return Err(Error::Eviction { pod, source: Box::new(e) }),
        Ok(()) => return Err(Error::Step(format!("the eviction of {pod} was allowed with disruptionsAllowed 0"))),
    }
    narrator.step("Scaling checkout to 4: one pod may now be disrupted");
    Api::<Deployment>::namespaced(client, ns).patch(
        "checkout",
        &Patch::Merge(json!({"spec": {"replicas": 4}})),
        &PostParams::default(),
    )?;
    wait_running_pods(client, ns, "app=checkout", 4)?;
    let status = wait_budget(client, ns, 4, 1)?;
    narrator.ok(&format!("disruption-controller: {status}"));
    let drained = drain_checkout_pods(client, ns, &node)?;
    narrator.ok(&format!(
        "the drain went on, one eviction at a time as the budget allowed: {} evicted; replacements run elsewhere",
        drained.join(", ")
    ));
    set_unschedulable(client, &node, false)?;
    narrator.info(&format!("{node} is uncordoned"));
    Ok(())
}

/// Evicts checkout's pods on `node` until none is left, retrying refused evictions as `kubectl
/// drain` does (every 5 s there; here every 200 ms).
fn drain_checkout_pods(client: &Client, ns: &str, node: &str) -> Result<Vec<String>, Error> {
    let mut evicted = Vec::new();
    wait_for(&format!("checkout's pods evicted from {node}"), STEP_TIMEOUT, || {
        let on_node: Vec<String> =
            checkout_pods(client, ns)?.into_iter().filter(|(_, n)| n == node).map(|(pod, _)| pod).collect();
        for pod in &on_node {
            if evict(client, ns, pod).is_ok() {
                evicted.push(pod.clone());
            }
        }
        Ok(on_node.is_empty().then_some(()))
    })?;
    wait_running_pods(client, ns, "app=checkout", 4)?;
    Ok(evicted)
}

/// Waits for PDB checkout's status to report `expected` pods and `allowed` disruptions; returns it
/// described.
fn wait_budget(client: &Client, ns: &str, expected: i32, allowed: i32) -> Result<String, Error> {
    let budgets = Api::<PodDisruptionBudget>::namespaced(client, ns);
    wait_for(&format!("PDB checkout: {expected} pods expected, {allowed} disruptions allowed"), STEP_TIMEOUT, || {
        let budget = budgets.get("checkout")?;
        let Some(status) = budget.status else { return Ok(None) };
        let condition = status.conditions.iter().flatten().find(|c| c.type_ == "DisruptionAllowed");
        let done = status.expected_pods == Some(expected)
            && status.current_healthy == Some(expected)
            && status.disruptions_allowed == Some(allowed)
            && status.observed_generation == budget.metadata.generation;
        Ok(done.then(|| {
            format!(
                "currentHealthy {}, desiredHealthy {}, disruptionsAllowed {} (DisruptionAllowed={}, {})",
                status.current_healthy.unwrap_or(0),
                status.desired_healthy.unwrap_or(0),
                status.disruptions_allowed.unwrap_or(0),
                condition.map(|c| c.status.as_str()).unwrap_or("?"),
                condition.map(|c| c.reason.as_str()).unwrap_or("?"),
            )
        }))
    })
}

/// checkout's live pods and their nodes, by pod name.
fn checkout_pods(client: &Client, ns: &str) -> Result<Vec<(String, String)>, Error> {
    super::placement(client, ns, "app=checkout")
}

/// POSTs a policy/v1 Eviction for `pod`.
fn evict(client: &Client, ns: &str, pod: &str) -> Result<(), Error> {
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": ns}});
    Api::<Pod>::namespaced(client, ns)
        .create_subresource::<_, serde_json::Value>("eviction", pod, &eviction, &PostParams::default())
        .map(|_| ())
        .map_err(Error::from)
}

/// Cordons (`true`) or uncordons `node`.
fn set_unschedulable(client: &Client, node: &str, unschedulable: bool) -> Result<(), Error> {
    Api::<Node>::all(client)
        .patch(node, &Patch::Merge(json!({"spec": {"unschedulable": unschedulable}})), &PostParams::default())
        .map(|_| ())
        .map_err(Error::from)
}

/// Deployment `api` behind Service `api`: HPA `api` (CPU 50 %, 2–5 replicas) scales it up
/// when load comes and back down when it goes.
pub(super) fn autoscaling_steps(client: &Client, ns: &str, narrator: &mut Narrator) -> Result<(), Error> {
    let needed = ["horizontal-pod-autoscaler-controller", "deployment-controller", "replicaset-controller"];
    narrator.step("Deployment api (2 replicas, 100m CPU each) behind Service api, HPA api: CPU 50%, 2 to 5 replicas");
    if !all_implemented(&needed) {
        narrator.skip("autoscaling a Deployment under load", &needed);
        return Ok(());
    }
    create_autoscaled_api(client, ns)?;
    wait_running_pods(client, ns, "app=api", 2)?;
    let status = wait_autoscaler(client, ns, 2)?;
    narrator.ok(&format!("horizontal-pod-autoscaler-controller: {status}"));

    narrator.step("Load arrives: 450m of CPU spread over api's pods (Service annotation kcm-sandbox.dev/cpu-load)");
    set_load(client, ns, "450m")?;
    let status = wait_autoscaler(client, ns, 5)?;
    wait_running_pods(client, ns, "app=api", 5)?;
    narrator.ok(&format!("scaled up to 5: {status}"));

    narrator.step("The load goes (cpu-load 0); HPA api's scale-down stabilization window is 10 s");
    set_load(client, ns, "0")?;
    let status = wait_autoscaler(client, ns, 2)?;
    wait_running_pods(client, ns, "app=api", 2)?;
    narrator.ok(&format!("scaled back down to 2 (its minReplicas): {status}"));
    Ok(())
}

fn create_autoscaled_api(client: &Client, ns: &str) -> Result<(), Error> {
    let mut deployment = serde_json::to_value(deployment_manifest("api", 2)?)?;
    deployment["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "100m"}});
    let deployment: Deployment = serde_json::from_value(deployment)?;
    Api::<Deployment>::namespaced(client, ns).create(&deployment, &PostParams::default())?;
    let service: Service = serde_json::from_value(json!({"metadata": {"name": "api",
        "annotations": {"kcm-sandbox.dev/cpu-load": "0"}},
        "spec": {"selector": {"app": "api"}, "ports": [{"port": 80}]}}))?;
    Api::<Service>::namespaced(client, ns).create(&service, &PostParams::default())?;
    let autoscaler: HorizontalPodAutoscaler = serde_json::from_value(json!({"metadata": {"name": "api"}, "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"},
        "minReplicas": 2, "maxReplicas": 5,
        "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}],
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 10}}}}))?;
    Api::<HorizontalPodAutoscaler>::namespaced(client, ns).create(&autoscaler, &PostParams::default())?;
    Ok(())
}

fn set_load(client: &Client, ns: &str, cpu: &str) -> Result<(), Error> {
    let patch = json!({"metadata": {"annotations": {"kcm-sandbox.dev/cpu-load": cpu}}});
    Api::<Service>::namespaced(client, ns)
        .patch("api", &Patch::Merge(patch), &PostParams::default())
        .map(|_| ())
        .map_err(Error::from)
}

/// Waits until HPA api reports `replicas` current and desired replicas; returns its status
/// described.
fn wait_autoscaler(client: &Client, ns: &str, replicas: i32) -> Result<String, Error> {
    let autoscalers = Api::<HorizontalPodAutoscaler>::namespaced(client, ns);
    wait_for(&format!("HPA api at {replicas} replicas"), STEP_TIMEOUT * 2, || {
        let Some(status) = autoscalers.get("api")?.status else { return Ok(None) };
        let utilization = status
            .current_metrics
            .iter()
            .flatten()
            .find_map(|m| m.resource.as_ref()?.current.average_utilization)
            .map_or("unknown".to_string(), |u| format!("{u}%"));
        let limited = status.conditions.iter().flatten().find(|c| c.type_ == "ScalingLimited");
        let done = status.current_replicas == Some(replicas) && status.desired_replicas == replicas;
        Ok(done.then(|| {
            format!(
                "{replicas} replicas, CPU utilization {utilization} of 50%, ScalingLimited={} ({})",
                limited.map(|c| c.status.as_str()).unwrap_or("?"),
                limited.and_then(|c| c.reason.as_deref()).unwrap_or("?")
            )
        }))
    })
}
