//! The horizontal-pod-autoscaler-controller on both backends, with the deployment and
//! replica-set controllers and simulated nodes, the metrics APIs served from annotations
//! (`kcm-sandbox.dev/cpu-load` on a Service, `kcm-sandbox.dev/memory-usage` on pods, custom
//! and external metrics), and a 1 s sync period: a CPU utilisation HPA scales a Deployment
//! 2→5 and back to 2 after its scale-down stabilisation window; a target below minReplicas
//! is raised to it; a missing target is reported; a memory AverageValue target, a Pods
//! metric and an External metric scale as upstream computes.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscaler, HorizontalPodAutoscalerCondition};
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kcm::app::controllers::named;
use kcm::app::flags::Options;
use kcm::client::{Patch, PostParams};
use kcm::controllers::podautoscaler;
use kcm::envtest::MetricsApis;
use kcm::runtime::controller::{Controller, ControllerContext};
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, eventually_within, from};

const WAIT: Duration = Duration::from_secs(45);

/// The controller with a 1 s sync period and no cpu initialisation period, so that samples of
/// pods that just started count.
fn fast_hpa(context: &ControllerContext<'_>, _: &Options) -> Result<Controller, String> {
    let config = podautoscaler::Config {
        sync_period: Duration::from_secs(1),
        cpu_initialization_period: Duration::ZERO,
        initial_readiness_delay: Duration::ZERO,
        ..podautoscaler::Config::default()
    };
    podautoscaler::new(context, config)
}

fn start(backend: Backend) -> (Cluster, Option<MetricsApis>) {
    let cluster = harness::with(&[
        named("deployment-controller"),
        named("replicaset-controller"),
        named("horizontal-pod-autoscaler-controller").started_by(fast_hpa),
    ])
    .on(backend)
    .start();
    let apis = cluster.server.serve_metrics_apis().expect("the metrics APIs are served");
    (cluster, apis)
}

/// A Deployment of `replicas` pods labelled `app: name`, each container requesting 100m cpu
/// and 64Mi memory, with `annotations` on its pods.
fn deployment(cluster: &Cluster, name: &str, replicas: i32, annotations: Value) {
    let deployment: Deployment = from(json!({"metadata": {"name": name}, "spec": {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}, "annotations": annotations}, "spec": {
            "containers": [{"name": "app", "image": "nginx:1.27",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}}));
    cluster.api::<Deployment>().create(&deployment, &PostParams::default()).expect("deployment created");
}

fn hpa(cluster: &Cluster, name: &str, target: &str, min: i32, max: i32, metrics: Value, behavior: Value) {
    let hpa: HorizontalPodAutoscaler = from(json!({"metadata": {"name": name}, "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
        "minReplicas": min, "maxReplicas": max, "metrics": metrics, "behavior": behavior}}));
    cluster.api::<HorizontalPodAutoscaler>().create(&hpa, &PostParams::default()).expect("hpa created");
}

fn cpu_utilization(percent: i32) -> Value {
    json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": percent}}}])
}

fn condition(hpa: &HorizontalPodAutoscaler, kind: &str) -> Option<HorizontalPodAutoscalerCondition> {
    hpa.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == kind).cloned()
}

/// (status, reason, message) of a condition.
fn summary(hpa: &HorizontalPodAutoscaler, kind: &str) -> (String, String, String) {
    let c = condition(hpa, kind).unwrap_or_else(|| panic!("condition {kind} in {:?}", hpa.status));
    (c.status, c.reason.unwrap_or_default(), c.message.unwrap_or_default())
}

fn owned(status: &str, reason: &str, message: &str) -> (String, String, String) {
    (status.into(), reason.into(), message.into())
}

/// Waits until the HPA's status says `desired` replicas for `current` ones.
fn wait_status(cluster: &Cluster, name: &str, current: i32, desired: i32) -> HorizontalPodAutoscaler {
    eventually_within(WAIT, &format!("{name}: {current} replicas, {desired} desired"), || {
        let hpa = cluster.api::<HorizontalPodAutoscaler>().get(name).ok()?;
        let status = hpa.status.as_ref()?;
        (status.current_replicas == Some(current) && status.desired_replicas == desired).then_some(hpa)
    })
}

fn wait_replicas(cluster: &Cluster, name: &str, replicas: i32) {
    eventually_within(WAIT, &format!("{name} scaled to {replicas}"), || {
        let d = cluster.api::<Deployment>().get(name).ok()?;
        (d.spec?.replicas == Some(replicas)).then_some(())
    });
}

fn wait_event(cluster: &Cluster, name: &str, reason: &str, message: &str) {
    eventually_within(WAIT, &format!("{name}: event {reason} {message:?}"), || {
        cluster.event_messages("default", name, reason).iter().any(|m| m == message).then_some(())
    });
}

on_both_backends!(cpu_utilization_scales_up_and_down_after_the_window);
fn cpu_utilization_scales_up_and_down_after_the_window(backend: Backend) {
    let (cluster, _apis) = start(backend);
    deployment(&cluster, "web", 2, json!({}));
    // 500m over 2 pods requesting 100m: 250% against a 50% target.
    let service: Service =
        from(json!({"metadata": {"name": "web", "annotations": {"kcm-sandbox.dev/cpu-load": "500m"}},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}));
    cluster.api::<Service>().create(&service, &PostParams::default()).expect("service created");
    let behavior = json!({"scaleDown": {"stabilizationWindowSeconds": 3}});
    hpa(&cluster, "web", "web", 2, 5, cpu_utilization(50), behavior);

    wait_replicas(&cluster, "web", 5);
    let reason = "cpu resource utilization (percentage of request) above target";
    wait_event(&cluster, "web", "SuccessfulRescale", &format!("New size: 5; reason: {reason}"));
    // 500m over 5 pods: 100%, which would be 10 pods; held at 5.
    let up = eventually_within(WAIT, "web at 5 pods with 100% utilization", || {
        let hpa = cluster.api::<HorizontalPodAutoscaler>().get("web").ok()?;
        let metrics = hpa.status.as_ref()?.current_metrics.clone()?;
        let current = metrics.first()?.resource.as_ref()?.current.clone();
        (hpa.status.as_ref()?.current_replicas == Some(5) && current.average_utilization == Some(100)).then_some(hpa)
    });
    let status = up.status.as_ref().unwrap();
    assert_eq!(status.desired_replicas, 5);
    assert!(status.last_scale_time.is_some());
    assert_eq!(status.observed_generation, None, "upstream does not write it");
    let current = status.current_metrics.as_ref().unwrap()[0].resource.as_ref().unwrap();
    assert_eq!(
        (current.name.as_str(), current.current.average_value.as_ref().map(|q| q.0.as_str())),
        ("cpu", Some("100m"))
    );
    assert_eq!(
        summary(&up, "ScalingActive"),
        owned(
            "True",
            "ValidMetricFound",
            &format!(
                "the HPA was able to successfully calculate a replica count from {}",
                "cpu resource utilization (percentage of request)"
            )
        )
    );
    assert_eq!(
        summary(&up, "ScalingLimited"),
        owned("True", "TooManyReplicas", "the desired replica count is more than the maximum replica count")
    );
    assert_eq!(summary(&up, "AbleToScale").0, "True");

    // Load removed: 0%, down to minReplicas once the 3 s window holds no higher recommendation.
    let patch = Patch::Merge(json!({"metadata": {"annotations": {"kcm-sandbox.dev/cpu-load": null}}}));
    cluster.api::<Service>().patch("web", &patch, &PostParams::default()).expect("load removed");
    let removed = std::time::Instant::now();
    wait_replicas(&cluster, "web", 2);
    assert!(removed.elapsed() >= Duration::from_secs(2), "the stabilization window held the scale-down");
    wait_event(&cluster, "web", "SuccessfulRescale", "New size: 2; reason: All metrics below target");
    let down = wait_status(&cluster, "web", 2, 2);
    assert_eq!(
        summary(&down, "ScalingLimited"),
        owned("True", "TooFewReplicas", "the desired replica count is less than the minimum replica count")
    );
}

on_both_backends!(min_replicas_and_missing_targets);
fn min_replicas_and_missing_targets(backend: Backend) {
    let (cluster, _apis) = start(backend);
    deployment(&cluster, "low", 1, json!({}));
    hpa(&cluster, "low", "low", 3, 6, cpu_utilization(50), Value::Null);
    wait_replicas(&cluster, "low", 3);
    wait_event(
        &cluster,
        "low",
        "SuccessfulRescale",
        "New size: 3; reason: Current number of replicas below Spec.MinReplicas",
    );
    let low = wait_status(&cluster, "low", 1, 3);
    assert_eq!(
        summary(&low, "AbleToScale"),
        owned("True", "SucceededRescale", "the HPA controller was able to update the target scale to 3")
    );

    // Once its pods run idle (0%, held at minReplicas), the status no longer changes and is not
    // written again: upstream compares before it writes.
    let settled = eventually_within(WAIT, "low settled at 3 idle pods", || {
        let hpa = cluster.api::<HorizontalPodAutoscaler>().get("low").ok()?;
        let status = hpa.status.as_ref()?;
        let utilization = status.current_metrics.as_ref()?.first()?.resource.as_ref()?.current.average_utilization;
        let limited = condition(&hpa, "ScalingLimited")?.reason;
        (status.current_replicas == Some(3) && utilization == Some(0) && limited.as_deref() == Some("TooFewReplicas"))
            .then_some(hpa)
    });
    let version = settled.metadata.resource_version.clone();
    let watched = std::time::Instant::now();
    while watched.elapsed() < Duration::from_secs(3) {
        let now = cluster.api::<HorizontalPodAutoscaler>().get("low").expect("low").metadata.resource_version;
        assert_eq!(now, version, "an unchanged status is not written");
        std::thread::sleep(Duration::from_millis(250));
    }

    hpa(&cluster, "missing", "missing", 1, 3, cpu_utilization(50), Value::Null);
    let message = "deployments.apps \"missing\" not found";
    wait_event(&cluster, "missing", "FailedGetScale", message);
    let missing = eventually_within(WAIT, "the missing target's condition", || {
        let hpa = cluster.api::<HorizontalPodAutoscaler>().get("missing").ok()?;
        condition(&hpa, "AbleToScale").map(|_| hpa)
    });
    assert_eq!(
        summary(&missing, "AbleToScale"),
        owned(
            "False",
            "FailedGetScale",
            &format!("the HPA controller was unable to get the target's current scale: {message}")
        )
    );
}

on_both_backends!(memory_pods_and_external_metrics);
fn memory_pods_and_external_metrics(backend: Backend) {
    let (cluster, _apis) = start(backend);
    // 100Mi per pod against 50Mi: twice as many pods, held at 4.
    deployment(&cluster, "mem", 2, json!({"kcm-sandbox.dev/memory-usage": "100Mi"}));
    let memory = json!([{"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "50Mi"}}}]);
    hpa(&cluster, "mem", "mem", 1, 4, memory, Value::Null);
    wait_replicas(&cluster, "mem", 4);
    wait_event(&cluster, "mem", "SuccessfulRescale", "New size: 4; reason: memory resource above target");
    let mem = wait_status(&cluster, "mem", 4, 4);
    let current = mem.status.as_ref().unwrap().current_metrics.as_ref().unwrap()[0].resource.clone().unwrap();
    assert_eq!(current.current.average_value.map(|q| q.0), Some("104857600".to_string()));

    // A Pods metric: 30 per pod against 10 → 3 × 1 pod.
    deployment(&cluster, "queue", 1, json!({"kcm-sandbox.dev/metric.jobs": "30"}));
    let pods = json!([{"type": "Pods", "pods": {"metric": {"name": "jobs"}, "target": {"type": "AverageValue", "averageValue": "10"}}}]);
    hpa(&cluster, "queue", "queue", 1, 3, pods, Value::Null);
    wait_replicas(&cluster, "queue", 3);
    wait_event(&cluster, "queue", "SuccessfulRescale", "New size: 3; reason: pods metric jobs above target");

    // An External metric: a total of 40 against a value of 20 → 2 × the 1 ready pod; then 2 × 2,
    // held at maxReplicas 2.
    let metrics: ConfigMap =
        from(json!({"metadata": {"name": "kcm-sandbox-external-metrics"}, "data": {"backlog": "40"}}));
    cluster.api::<ConfigMap>().create(&metrics, &PostParams::default()).expect("external metrics");
    deployment(&cluster, "ext", 1, json!({}));
    let external = json!([{"type": "External", "external": {"metric": {"name": "backlog"}, "target": {"type": "Value", "value": "20"}}}]);
    hpa(&cluster, "ext", "ext", 1, 2, external, Value::Null);
    wait_replicas(&cluster, "ext", 2);
    wait_event(&cluster, "ext", "SuccessfulRescale", "New size: 2; reason: external metric backlog(nil) above target");
    let ext = wait_status(&cluster, "ext", 2, 2);
    let value = ext.status.unwrap().current_metrics.unwrap()[0].external.clone().unwrap().current.value.map(|q| q.0);
    assert_eq!(value, Some("40".to_string()));
}
