//! Side-by-side scenario of the `devicetainteviction` controller: `devicetaint`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "devicetaint",
    summary: "three running pods with allocated claims on a node's devices; a DeviceTaintRule taints gpu-0 \
                  NoExecute: the pod whose allocation does not tolerate it evicted, the one tolerating it and \
                  the one on gpu-1 kept, the rule's EvictionInProgress condition followed",
    nodes: 1,
    // DeviceTaintRules are beta in v1.36, behind a gate that is off and an API that is not served
    // by default: on for both binaries and the server.
    flags: &["--feature-gates=DRADeviceTaintRules=true"],
    apiserver_flags: &["--feature-gates=DRADeviceTaintRules=true", "--runtime-config=resource.k8s.io/v1beta2=true"],
    compare_nodes: false,
    run: device_taint,
}];

pub(super) const DEVICE_TAINT_RULES: &str = "/apis/resource.k8s.io/v1beta2/devicetaintrules";

/// A finalizer of the steps', holding a deleted pod.
pub(super) const HOLD: &str = "sbs.example.com/hold";

/// Claim `name` allocated `device` (with `tolerations`) and running pod `name`, which uses it,
/// bound to node-1; waits until the claim is reserved for the pod and the pod is ready.
pub(super) fn running_with_device(
    steps: &mut Steps,
    name: &str,
    device: &str,
    tolerations: Value,
) -> Result<(), Error> {
    let claim = json!({"metadata": {"name": name}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": DRA_DRIVER}}]}}});
    steps.create(RESOURCE_CLAIMS, claim)?;
    allocate(steps, name, device, tolerations)?;
    let manual = json!({"schedulerName": MANUAL_SCHEDULER});
    steps.create(PODS, dra_pod(name, json!({"resourceClaimName": name}), manual))?;
    bind(steps, name)?;
    wait_reserved(steps, name, name)?;
    steps.wait_pods_ready(NAMESPACE, &format!("app={name}"), 1)?;
    Ok(())
}

/// The reason of DeviceTaintRule `name`'s EvictionInProgress condition.
pub(super) fn eviction_progress(steps: &Steps, name: &str) -> Result<Option<String>, Error> {
    let rule = steps.get(&format!("{DEVICE_TAINT_RULES}/{name}"))?.unwrap_or_default();
    let conditions = rule["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let condition = conditions.iter().find(|c| c["type"] == "EvictionInProgress");
    Ok(condition.and_then(|c| c["reason"].as_str()).map(str::to_string))
}

pub(super) fn device_taint(steps: &mut Steps) -> Result<(), Error> {
    device_class(steps)?;
    let slice = json!({"metadata": {"name": "node-1-gpus"}, "spec": {"driver": DRA_DRIVER, "nodeName": "node-1",
        "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}});
    steps.create("/apis/resource.k8s.io/v1/resourceslices", slice)?;
    // Held by a finalizer of the steps' once deleted, for its condition to be compared.
    running_with_device(steps, "victim", "gpu-0", Value::Null)?;
    steps.patch(&format!("{PODS}/victim"), json!({"metadata": {"finalizers": [HOLD]}}))?;
    let ignore = json!([{"key": "example.com/broken", "operator": "Exists", "effect": "NoExecute"}]);
    running_with_device(steps, "tolerant", "gpu-0", ignore)?;
    running_with_device(steps, "bystander", "gpu-1", Value::Null)?;
    steps.checkpoint("three pods running with their devices")?;
    let rule = json!({"metadata": {"name": "gpu-0-broken"}, "spec": {
        "deviceSelector": {"driver": DRA_DRIVER, "pool": "node-1", "device": "gpu-0"},
        "taint": {"key": "example.com/broken", "value": "true", "effect": "NoExecute"}}});
    steps.create(DEVICE_TAINT_RULES, rule)?;
    wait_event(steps, "DeviceTaintManagerEviction")?;
    steps.wait("victim deleted and stopped", |s| {
        let pod = s.get(&format!("{PODS}/victim"))?.unwrap_or_default();
        Ok((pod["metadata"]["deletionTimestamp"].is_string() && pod["status"]["phase"] == "Failed").then_some(()))
    })?;
    // The rule's status is written at most every 10 s, so it is compared only once it is final.
    steps.checkpoint("gpu-0 tainted: the pod not tolerating it evicted (held by a finalizer)")?;
    steps.patch(&format!("{PODS}/victim"), json!({"metadata": {"finalizers": null}}))?;
    steps.wait_gone(&format!("{PODS}/victim"))?;
    steps.cluster_objects.push(format!("{DEVICE_TAINT_RULES}/gpu-0-broken"));
    steps.wait("the rule's eviction Completed", |s| {
        Ok(eviction_progress(s, "gpu-0-broken")?.filter(|reason| reason == "Completed").map(|_| ()))
    })?;
    steps.checkpoint("the evicted pod gone, the others kept; the rule's eviction Completed")
}
