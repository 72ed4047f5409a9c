//! Side-by-side scenario of the `podautoscaler` controller: `hpa`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "hpa",
    summary: "an HPA on CPU utilisation (50%) scales a Deployment from 2 to 5 under a Service's load, held at \
                  maxReplicas, then back to minReplicas 2 once the load is gone and a 5 s scale-down window has passed",
    // One node: where a replacement pod lands is the scheduler's timing, not the controller's.
    nodes: 1,
    flags: &["--horizontal-pod-autoscaler-sync-period=1s", "--horizontal-pod-autoscaler-cpu-initialization-period=1s"],
    apiserver_flags: &[],
    compare_nodes: false,
    run: horizontal_pod_autoscaler,
}];

/// Waits until HPA `name` saw `current` replicas at `utilization`% of their cpu requests.
pub(super) fn hpa_status(steps: &mut Steps, name: &str, current: i64, utilization: i64) -> Result<(), Error> {
    let path = format!("/apis/autoscaling/v2/namespaces/{NAMESPACE}/horizontalpodautoscalers/{name}");
    steps.wait(&format!("HPA {name}: {current} replicas at {utilization}%"), |s| {
        let hpa = s.get(&path)?.unwrap_or_default();
        let status = &hpa["status"];
        let seen = status["currentMetrics"][0]["resource"]["current"]["averageUtilization"].as_i64();
        Ok((status["currentReplicas"].as_i64() == Some(current) && seen == Some(utilization)).then_some(()))
    })
}

pub(super) fn horizontal_pod_autoscaler(steps: &mut Steps) -> Result<(), Error> {
    steps.serve_metrics_apis()?;
    let mut web = deployment("web", 2, "nginx:1.27");
    web["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "100m"}});
    steps.create(DEPLOYMENTS, web)?;
    // 500m spread over the Service's pods: 250% of their requests at 2 pods, 100% at 5.
    let service = json!({"metadata": {"name": "web", "annotations": {"kcm-sandbox.dev/cpu-load": "500m"}},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}});
    steps.create(&format!("/api/v1/namespaces/{NAMESPACE}/services"), service)?;
    rolled_out(steps, "web", 2)?;
    // The pods' samples count once they are past the 1 s cpu initialisation period.
    std::thread::sleep(Duration::from_secs(2));
    let hpa = json!({"metadata": {"name": "web"}, "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "minReplicas": 2, "maxReplicas": 5,
        "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}],
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 5}}}});
    steps.create(&format!("/apis/autoscaling/v2/namespaces/{NAMESPACE}/horizontalpodautoscalers"), hpa)?;
    rolled_out(steps, "web", 5)?;
    hpa_status(steps, "web", 5, 100)?;
    steps.checkpoint("scaled up to 5, held at maxReplicas")?;
    let unload = json!({"metadata": {"annotations": {"kcm-sandbox.dev/cpu-load": null}}});
    steps.patch(&format!("/api/v1/namespaces/{NAMESPACE}/services/web"), unload)?;
    rolled_out(steps, "web", 2)?;
    hpa_status(steps, "web", 2, 0)
}
