//! The horizontal-pod-autoscaler-controller on both backends, with the deployment and
//! replica-set controllers and simulated nodes, the metrics APIs served from annotations
//! (`kcm-sandbox.dev/cpu-load` on a Service, `kcm-sandbox.dev/memory-usage` on pods, custom
//! and external metrics), and a 1 s sync period: a CPU utilisation HPA scales a Deployment
//! 2→5 and back to 2 after its scale-down stabilisation window; a target below minReplicas
//! is raised to it; a missing target is reported; a memory AverageValue target, a Pods
//! metric and an External metric scale as upstream computes; pod-level cpu requests
//! (PodLevelResources) are what utilization is measured against.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscaler, HorizontalPodAutoscalerCondition};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, Service};
use kcm::app::controllers::named;
use kcm::app::flags::Options;
use kcm::client::{ListParams, Patch, PostParams, WatchEvent, WatchParams};
use kcm::controllers::podautoscaler;
use kcm::runtime::controller::{Controller, ControllerContext};
use kcm_envtest::envtest::MetricsApis;
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, eventually_within, from};

const WAIT: Duration = harness::DEADLINE;

/// The controller with a 1 s sync period and no cpu initialisation period, so that samples of
/// pods that just started count.
fn fast_hpa(context: &ControllerContext<'_>, _: &Options) -> Result<Controller, kcm::apimachinery::errors::BoxError> {
    let config = podautoscaler::Config {
        sync_period: Duration::from_secs(1),
        cpu_initialization_period: Duration::ZERO,
        initial_readiness_delay: Duration::ZERO,
        ..podautoscaler::Config::default()
    };
    Ok(podautoscaler::new(context, config))
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

/// Creates the HPA; returns it as created.
fn hpa(
    cluster: &Cluster,
    name: &str,
    target: &str,
    min: i32,
    max: i32,
    metrics: Value,
    behavior: Value,
) -> HorizontalPodAutoscaler {
    let hpa: HorizontalPodAutoscaler = from(json!({"metadata": {"name": name}, "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
        "minReplicas": min, "maxReplicas": max, "metrics": metrics, "behavior": behavior}}));
    cluster.api::<HorizontalPodAutoscaler>().create(&hpa, &PostParams::default()).expect("hpa created")
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

/// ScalingActive as a sync that read the pods' CPU leaves it.
fn valid_cpu_metric() -> (String, String, String) {
    let message = "the HPA was able to successfully calculate a replica count from cpu resource utilization \
                   (percentage of request)";
    owned("True", "ValidMetricFound", message)
}

/// The status on one line: replicas, utilization and the conditions' reasons.
fn describe(hpa: &HorizontalPodAutoscaler) -> String {
    let Some(status) = hpa.status.as_ref() else { return "no status".into() };
    let metrics = status.current_metrics.iter().flatten();
    let utilization: Vec<i32> = metrics.filter_map(|m| m.resource.as_ref()?.current.average_utilization).collect();
    let conditions: Vec<String> = status
        .conditions
        .iter()
        .flatten()
        .map(|c| format!("{}={} {}", c.type_, c.status, c.reason.as_deref().unwrap_or("")))
        .collect();
    format!(
        "resourceVersion {:?}: current {:?}, desired {}, utilization {utilization:?}, {conditions:?}",
        hpa.metadata.resource_version, status.current_replicas, status.desired_replicas
    )
}

/// Waits until the HPA's status says `desired` replicas for `current` ones (a state that lasts:
/// the next sync reads the same count; see `first_status_desiring` for one that does not).
fn wait_status(cluster: &Cluster, name: &str, current: i32, desired: i32) -> HorizontalPodAutoscaler {
    harness::eventually_seen_within(WAIT, &format!("{name}: {current} replicas, {desired} desired"), || {
        let hpa = cluster.api::<HorizontalPodAutoscaler>().get(name).map_err(|e| e.to_string())?;
        let status = hpa.status.as_ref();
        let done = status.is_some_and(|s| s.current_replicas == Some(current) && s.desired_replicas == desired);
        if done { Ok(hpa) } else { Err(describe(&hpa)) }
    })
}

/// The first status written to `created` (an HPA as created) that says `desired` replicas, read
/// from a watch that replays every write since its creation: a rescale's status says the count
/// read before it, which the next sync, one period later, replaces with the new one, so polling
/// may miss it on a loaded machine.
fn first_status_desiring(
    cluster: &Cluster,
    created: &HorizontalPodAutoscaler,
    desired: i32,
) -> HorizontalPodAutoscaler {
    let name = created.metadata.name.as_deref().unwrap_or_default();
    let params = WatchParams {
        field_selector: Some(format!("metadata.name={name}")),
        resource_version: created.metadata.resource_version.clone(),
        timeout_seconds: Some(WAIT.as_secs() as u32),
        ..WatchParams::default()
    };
    let mut seen = Vec::new();
    for event in cluster.api::<HorizontalPodAutoscaler>().watch(&params).expect("a watch of the HPA") {
        match event {
            Ok(WatchEvent::Added(hpa) | WatchEvent::Modified(hpa)) => {
                if hpa.status.as_ref().is_some_and(|s| s.desired_replicas == desired) {
                    return hpa;
                }
                seen.push(describe(&hpa));
            }
            Ok(_) => {}
            Err(e) => panic!("watching {name}: {e}; statuses seen before: {seen:#?}"),
        }
    }
    panic!("no status of {name} said {desired} desired replicas within {WAIT:?}; statuses seen: {seen:#?}")
}

fn wait_replicas(cluster: &Cluster, name: &str, replicas: i32) {
    harness::eventually_seen_within(WAIT, &format!("{name} scaled to {replicas}"), || {
        let d = cluster.api::<Deployment>().get(name).map_err(|e| e.to_string())?;
        let spec = d.spec.and_then(|s| s.replicas);
        (spec == Some(replicas)).then_some(()).ok_or_else(|| format!("spec.replicas {spec:?}"))
    });
}

fn wait_event(cluster: &Cluster, name: &str, reason: &str, message: &str) {
    harness::eventually_seen_within(WAIT, &format!("{name}: event {reason} {message:?}"), || {
        let messages = cluster.event_messages("default", name, reason);
        messages.iter().any(|m| m == message).then_some(()).ok_or_else(|| {
            // Every Event in the namespace, so that a failure shows what the controllers said.
            let all = cluster.api::<Event>().list(&Default::default()).map(|l| l.items).unwrap_or_default();
            let all: Vec<String> = all
                .iter()
                .map(|e| {
                    let object = &e.involved_object;
                    let (kind, object) = (object.kind.as_deref().unwrap_or(""), object.name.as_deref().unwrap_or(""));
                    format!(
                        "{kind}/{object} {}: {}",
                        e.reason.as_deref().unwrap_or(""),
                        e.message.as_deref().unwrap_or("")
                    )
                })
                .collect();
            format!("{reason} Events {messages:?}; all Events in the namespace: {all:#?}")
        })
    });
}

/// How many pods labelled `app: name` run (simulated pods turn Running and Ready at once).
fn running_pods(cluster: &Cluster, name: &str) -> usize {
    let params = ListParams { label_selector: Some(format!("app={name}")), ..Default::default() };
    let pods = cluster.api::<Pod>().list(&params).expect("pods").items;
    let running = |p: &Pod| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    pods.into_iter().filter(|p| p.metadata.deletion_timestamp.is_none() && running(p)).count()
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
    // A 5 s window, checked below as at least 2 s: the last high recommendation may be a
    // sync older than the load's removal, and a loaded machine may delay a sync by seconds.
    let behavior = json!({"scaleDown": {"stabilizationWindowSeconds": 5}});
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
    assert_eq!(summary(&up, "ScalingActive"), valid_cpu_metric());
    assert_eq!(
        summary(&up, "ScalingLimited"),
        owned("True", "TooManyReplicas", "the desired replica count is more than the maximum replica count")
    );
    assert_eq!(summary(&up, "AbleToScale").0, "True");

    // Load removed: 0%, down to minReplicas once the 5 s window holds no higher recommendation.
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
    let created = hpa(&cluster, "low", "low", 3, 6, cpu_utilization(50), Value::Null);
    wait_replicas(&cluster, "low", 3);
    wait_event(
        &cluster,
        "low",
        "SuccessfulRescale",
        "New size: 3; reason: Current number of replicas below Spec.MinReplicas",
    );
    let low = first_status_desiring(&cluster, &created, 3);
    assert_eq!(low.status.as_ref().and_then(|s| s.current_replicas), Some(1), "the count read: {}", describe(&low));
    assert!(low.status.as_ref().is_some_and(|s| s.last_scale_time.is_some()), "a scale time: {}", describe(&low));
    assert_eq!(
        summary(&low, "AbleToScale"),
        owned("True", "SucceededRescale", "the HPA controller was able to update the target scale to 3")
    );

    // Once its 3 pods run idle (0%, held at minReplicas), the status settles and is not written
    // again. The API server stores no write that changes nothing, so a resourceVersion that holds
    // for 3 sync periods shows the controller stopped changing the status; one rewriting it with
    // something new at every sync never holds. The first sync's recommendation (the 1 replica it
    // read) stays in the 5 minute downscale window, above the 0 of idle pods: ScaleDownStabilized.
    // Until then the status may still change (a pod not yet started, or counted at 100% of its
    // request while the metrics, read first, had no sample of it): the hold starts again.
    let mut held: Option<(String, Instant)> = None;
    let settled =
        harness::eventually_seen_within(WAIT, "low settled at 3 idle pods, its status unchanged for 3 s", || {
            let hpa = cluster.api::<HorizontalPodAutoscaler>().get("low").map_err(|e| e.to_string())?;
            let running = running_pods(&cluster, "low");
            let status = hpa.status.as_ref().ok_or("no status")?;
            let utilization = status.current_metrics.iter().flatten().next().and_then(|m| m.resource.as_ref());
            let stabilized = condition(&hpa, "AbleToScale").and_then(|c| c.reason);
            let idle = running == 3
                && status.current_replicas == Some(3)
                && status.desired_replicas == 3
                && utilization.and_then(|u| u.current.average_utilization) == Some(0)
                && stabilized.as_deref() == Some("ScaleDownStabilized");
            let version = hpa.metadata.resource_version.clone().unwrap_or_default();
            if !idle {
                held = None;
            } else if held.as_ref().is_none_or(|(kept, _)| *kept != version) {
                held = Some((version, Instant::now()));
            }
            let held_for = held.as_ref().map_or(Duration::ZERO, |(_, since)| since.elapsed());
            if held_for >= Duration::from_secs(3) {
                return Ok(hpa);
            }
            Err(format!("{running} running pods; {}, unchanged for {held_for:?}", describe(&hpa)))
        });
    assert_eq!(
        summary(&settled, "AbleToScale"),
        owned(
            "True",
            "ScaleDownStabilized",
            "recent recommendations were higher than current one, applying the highest recent recommendation"
        )
    );
    assert_eq!(summary(&settled, "ScalingActive"), valid_cpu_metric());
    // Raised to minReplicas from the window's highest recommendation: below it, unless a sync
    // counted a just-started pod at 100% of its request, which recommends keeping the 3 replicas.
    let limited = summary(&settled, "ScalingLimited");
    let too_few = owned("True", "TooFewReplicas", "the desired replica count is less than the minimum replica count");
    let within = owned("False", "DesiredWithinRange", "the desired count is within the acceptable range");
    assert!(limited == too_few || limited == within, "ScalingLimited {limited:?}, expected {too_few:?} or {within:?}");

    hpa(&cluster, "missing", "missing", 1, 3, cpu_utilization(50), Value::Null);
    let message = "deployments.apps \"missing\" not found";
    wait_event(&cluster, "missing", "FailedGetScale", message);
    // The Event is recorded before the status is written.
    let expected = owned(
        "False",
        "FailedGetScale",
        &format!("the HPA controller was unable to get the target's current scale: {message}"),
    );
    harness::eventually_seen_within(WAIT, "the missing target's AbleToScale condition", || {
        let hpa = cluster.api::<HorizontalPodAutoscaler>().get("missing").map_err(|e| e.to_string())?;
        let seen = condition(&hpa, "AbleToScale")
            .map(|c| (c.status, c.reason.unwrap_or_default(), c.message.unwrap_or_default()));
        (seen.as_ref() == Some(&expected)).then_some(()).ok_or_else(|| format!("expected {expected:?}, got {seen:?}"))
    });
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
    assert_eq!(current.current.average_value.map(|q| q.0), Some("100Mi".to_string()), "BinarySI since v1.36");

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

on_both_backends!(utilization_is_of_pod_level_requests);
/// PodLevelResources (beta and on since v1.34): pods with pod-level requests are measured
/// against those, not their containers'.
fn utilization_is_of_pod_level_requests(backend: Backend) {
    let (cluster, _apis) = start(backend);
    // Containers request 100m, the pods 500m.
    let deployment: Deployment = from(json!({"metadata": {"name": "pl"}, "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "pl"}},
        "template": {"metadata": {"labels": {"app": "pl"}}, "spec": {
            "resources": {"requests": {"cpu": "500m"}},
            "containers": [{"name": "app", "image": "nginx:1.27", "resources": {"requests": {"cpu": "100m"}}}]}}}}));
    cluster.api::<Deployment>().create(&deployment, &PostParams::default()).expect("deployment created");
    // 1500m over 2 pods: 150% of the pod-level requests against 50% → 6 pods, where the
    // containers' requests (750%) would give 15, held at the maximum of 10.
    let service: Service =
        from(json!({"metadata": {"name": "pl", "annotations": {"kcm-sandbox.dev/cpu-load": "1500m"}},
        "spec": {"selector": {"app": "pl"}, "ports": [{"port": 80}]}}));
    cluster.api::<Service>().create(&service, &PostParams::default()).expect("service created");
    hpa(&cluster, "pl", "pl", 2, 10, cpu_utilization(50), Value::Null);
    wait_replicas(&cluster, "pl", 6);
    let reason = "cpu resource utilization (percentage of request) above target";
    wait_event(&cluster, "pl", "SuccessfulRescale", &format!("New size: 6; reason: {reason}"));
    // 1500m over 6 pods of 500m: 50%, on target.
    let settled = eventually_within(WAIT, "pl at 6 pods with 50% utilization", || {
        let hpa = cluster.api::<HorizontalPodAutoscaler>().get("pl").ok()?;
        let metrics = hpa.status.as_ref()?.current_metrics.clone()?;
        let current = metrics.first()?.resource.as_ref()?.current.clone();
        (hpa.status.as_ref()?.current_replicas == Some(6) && current.average_utilization == Some(50)).then_some(hpa)
    });
    assert_eq!(settled.status.as_ref().map(|s| s.desired_replicas), Some(6));
}
