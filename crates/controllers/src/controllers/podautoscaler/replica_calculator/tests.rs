//! Cases after upstream's replica_calculator_test.go.

use super::*;
use k8s_openapi::api::core::v1::{Container, PodCondition, PodSpec, PodStatus, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as KQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

const CALC: ReplicaCalculator = ReplicaCalculator {
    cpu_initialization_period: Duration::from_secs(120),
    delay_of_initial_readiness_status: Duration::from_secs(10),
    pod_level_resources: true,
};

fn now() -> Timestamp {
    "2026-01-01T12:00:00Z".parse().unwrap()
}

fn ago(secs: i64) -> Timestamp {
    now() - SignedDuration::from_secs(secs)
}

/// A running, ready pod started long ago, requesting `request` cpu in one container.
fn pod(name: &str, phase: &str, ready: &str, request: &str) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                resources: Some(ResourceRequirements {
                    requests: Some([("cpu".to_string(), KQuantity(request.into()))].into()),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some(phase.into()),
            start_time: Some(Time(ago(600))),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: ready.into(),
                last_transition_time: Some(Time(ago(600))),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    })
}

fn samples(values: &[(&str, i64)]) -> PodMetricsInfo {
    values
        .iter()
        .map(|(n, v)| (n.to_string(), PodMetric { timestamp: now(), window: Duration::from_secs(30), value: *v }))
        .collect()
}

fn running(n: usize) -> Vec<Arc<Pod>> {
    (0..n).map(|i| pod(&format!("p{i}"), "Running", "True", "1")).collect()
}

fn cpu(pods: &[Arc<Pod>], metrics: PodMetricsInfo, current: i32, target: i32) -> Result<(i32, i32, i64), String> {
    CALC.resource_replicas(pods, metrics, current, target, "cpu", Tolerances::both(0.1), "", now())
        .map_err(|e| e.to_string())
}

#[test]
fn scale_up_on_cpu_utilization() {
    let pods = running(3);
    assert_eq!(cpu(&pods, samples(&[("p0", 300), ("p1", 500), ("p2", 700)]), 3, 30), Ok((5, 50, 500)));
}

#[test]
fn unready_pods_count_as_zero_on_scale_up() {
    let mut pods = running(3);
    pods[0] = pod("p0", "Running", "False", "1");
    assert_eq!(cpu(&pods, samples(&[("p0", 300), ("p1", 500), ("p2", 700)]), 3, 30), Ok((4, 60, 600)));
}

#[test]
fn pending_pods_are_unready() {
    let mut pods = running(3);
    pods[2] = pod("p2", "Pending", "False", "1");
    // 40% vs 30%, but with the pending pod at 0 it is 26%: the direction would flip.
    assert_eq!(cpu(&pods, samples(&[("p0", 300), ("p1", 500)]), 3, 30), Ok((3, 40, 400)));
}

#[test]
fn scale_down_on_cpu_utilization() {
    let pods = running(5);
    let m = samples(&[("p0", 100), ("p1", 300), ("p2", 500), ("p3", 250), ("p4", 250)]);
    assert_eq!(cpu(&pods, m, 5, 50), Ok((3, 28, 280)));
}

#[test]
fn within_tolerance_keeps_the_count() {
    let pods = running(3);
    assert_eq!(cpu(&pods, samples(&[("p0", 1010), ("p1", 1030), ("p2", 1020)]), 3, 100), Ok((3, 102, 1020)));
}

#[test]
fn missing_pods_use_the_request_on_scale_down() {
    // upstream's TestReplicaCalcMissingMetricsScaleDown: 4 pods, one without a sample.
    let pods = running(4);
    let m = samples(&[("p0", 100), ("p1", 100), ("p2", 100)]);
    // 10%; with the missing pod at its full request: 1300/4000 = 32% → ceil(0.64 × 4) = 3.
    assert_eq!(cpu(&pods, m, 4, 50), Ok((3, 10, 100)));
}

#[test]
fn missing_pods_use_nothing_on_scale_up() {
    let pods = running(4);
    let m = samples(&[("p0", 1000), ("p1", 1000), ("p2", 1000)]);
    // ratio 2.0 over 3; with the missing pod at 0: 3000/4000 = 75% → 1.5 → ceil(1.5*4) = 6.
    assert_eq!(cpu(&pods, m, 4, 50), Ok((6, 100, 1000)));
}

#[test]
fn missing_pods_that_would_flip_the_direction_keep_the_count() {
    let pods = running(4);
    let m = samples(&[("p0", 600), ("p1", 600), ("p2", 600)]);
    // 60% vs 50% target: scale up, but with the missing pod at 0 it is 45%: no change.
    assert_eq!(cpu(&pods, m, 4, 50), Ok((4, 60, 600)));
}

#[test]
fn failed_and_deleted_pods_are_ignored() {
    let mut pods = running(3);
    pods[2] = pod("p2", "Failed", "False", "1");
    assert_eq!(cpu(&pods, samples(&[("p0", 1000), ("p1", 1000), ("p2", 9000)]), 3, 50), Ok((4, 100, 1000)));
}

#[test]
fn recently_started_pods_with_early_samples_are_unready() {
    let mut young = (*pod("p0", "Running", "True", "1")).clone();
    let status = young.status.as_mut().unwrap();
    status.start_time = Some(Time(ago(60)));
    status.conditions.as_mut().unwrap()[0].last_transition_time = Some(Time(ago(10)));
    let pods = vec![Arc::new(young), pod("p1", "Running", "True", "1")];
    let groups = CALC.group_pods(&pods, &samples(&[("p0", 1), ("p1", 1)]), "cpu", now());
    assert_eq!(groups.ready, 1);
    assert!(groups.unready.contains("p0"));
    // Memory samples are always trusted.
    assert_eq!(CALC.group_pods(&pods, &samples(&[("p0", 1), ("p1", 1)]), "memory", now()).ready, 2);
}

#[test]
fn never_ready_pods_past_the_initialization_period_are_unready() {
    let mut pod0 = (*pod("p0", "Running", "False", "1")).clone();
    // Turned unready within the initial readiness delay of its start: never was ready.
    pod0.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].last_transition_time = Some(Time(ago(595)));
    let groups = CALC.group_pods(&[Arc::new(pod0)], &samples(&[("p0", 1)]), "cpu", now());
    assert!(groups.unready.contains("p0"));
}

#[test]
fn no_samples_after_grouping_is_an_error() {
    let pods = vec![pod("p0", "Pending", "False", "1")];
    assert_eq!(
        cpu(&pods, samples(&[]), 1, 50),
        Err("did not receive metrics for targeted pods (pods might be unready)".into())
    );
    assert_eq!(
        cpu(&[], samples(&[]), 1, 50),
        Err("no pods returned by selector while calculating replica count".into())
    );
}

#[test]
fn a_missing_request_is_an_error() {
    let mut p = (*pod("p0", "Running", "True", "1")).clone();
    p.spec.as_mut().unwrap().containers[0].resources = None;
    assert_eq!(
        cpu(&[Arc::new(p)], samples(&[("p0", 1)]), 1, 50),
        Err("missing request for cpu in container c of Pod p0".into())
    );
}

#[test]
fn plain_metrics_scale_on_the_average() {
    let pods = running(3);
    let m = samples(&[("p0", 20_000), ("p1", 10_000), ("p2", 30_000)]);
    assert_eq!(
        CALC.plain_metric_replicas(&pods, m, 3, 15_000, "", Tolerances::both(0.1), now()).ok(),
        Some((4, 20_000))
    );
    // A missing pod counts as the target on a scale-down.
    let m = samples(&[("p0", 5_000), ("p1", 5_000)]);
    assert_eq!(
        CALC.plain_metric_replicas(&pods, m, 3, 15_000, "", Tolerances::both(0.1), now()).ok(),
        Some((2, 5_000))
    );
}

#[test]
fn usage_ratio_counts_ready_pods_or_scales_from_zero() {
    let pods = running(2);
    assert_eq!(usage_ratio_replica_count(2, 2.0, Tolerances::both(0.1), &pods).ok(), Some(4));
    assert_eq!(usage_ratio_replica_count(2, 1.05, Tolerances::both(0.1), &pods).ok(), Some(2));
    assert_eq!(usage_ratio_replica_count(0, 2.5, Tolerances::both(0.1), &[]).ok(), Some(3));
}

#[test]
fn per_pod_targets_divide_the_total() {
    assert_eq!(per_pod_replicas(3, 1000, 6000, Tolerances::both(0.1)), (6, 2000));
    assert_eq!(per_pod_replicas(3, 1000, 3100, Tolerances::both(0.1)), (3, 1034));
}

#[test]
fn sidecars_count_towards_requests() {
    let mut p = (*pod("p0", "Running", "True", "500m")).clone();
    let mut sidecar = p.spec.as_ref().unwrap().containers[0].clone();
    sidecar.name = "s".into();
    sidecar.restart_policy = Some("Always".into());
    let mut plain_init = sidecar.clone();
    plain_init.restart_policy = None;
    p.spec.as_mut().unwrap().init_containers = Some(vec![sidecar, plain_init]);
    let pods = [Arc::new(p)];
    assert_eq!(calculate_requests(&pods, "", "cpu", true).unwrap()["p0"], 1000);
    assert_eq!(calculate_requests(&pods, "s", "cpu", true).unwrap()["p0"], 500);
    assert_eq!(
        calculate_requests(&pods, "gone", "cpu", true).map(|_| ()).map_err(|e| e.to_string()),
        Err("container gone not found in Pod p0".into()),
        "v1.36: a named container must exist"
    );
}

/// `p0` with pod-level requests `pod_level` beside its container's 500m of cpu.
fn pod_with_pod_level_requests(pod_level: &[(&str, &str)]) -> Arc<Pod> {
    let mut p = (*pod("p0", "Running", "True", "500m")).clone();
    let requests = pod_level.iter().map(|(name, q)| (name.to_string(), KQuantity(q.to_string()))).collect();
    p.spec.as_mut().unwrap().resources = Some(ResourceRequirements { requests: Some(requests), ..Default::default() });
    Arc::new(p)
}

#[test]
fn pod_level_requests_count_unless_a_container_is_named_or_the_gate_is_off() {
    let pods = [pod_with_pod_level_requests(&[("cpu", "2")])];
    assert_eq!(calculate_requests(&pods, "", "cpu", true).unwrap()["p0"], 2000);
    assert_eq!(calculate_requests(&pods, "c", "cpu", true).unwrap()["p0"], 500, "the named container's");
    assert_eq!(calculate_requests(&pods, "", "cpu", false).unwrap()["p0"], 500, "PodLevelResources off");
    // Pod-level memory only: cpu comes from the containers (PodRequests), memory is missing.
    let memory_only = [pod_with_pod_level_requests(&[("memory", "1Gi")])];
    assert_eq!(calculate_requests(&memory_only, "", "cpu", true).unwrap()["p0"], 500);
    assert_eq!(calculate_requests(&memory_only, "", "memory", true).unwrap()["p0"], 1024 * 1024 * 1024 * 1000);
    assert_eq!(
        calculate_requests(&memory_only, "", "ephemeral-storage", true).map(|_| ()).map_err(|e| e.to_string()),
        Err("missing pod-level request for ephemeral-storage in Pod p0".into())
    );
    // A pod-level request of an unsupported resource does not make the pod pod-level.
    let unsupported = [pod_with_pod_level_requests(&[("ephemeral-storage", "1Gi")])];
    assert_eq!(
        calculate_requests(&unsupported, "", "memory", true).map(|_| ()).map_err(|e| e.to_string()),
        Err("missing request for memory in container c of Pod p0".into())
    );
}

#[test]
fn external_totals_are_capped_at_max_int64() {
    assert_eq!(external_total(&[1, 2, 3]), 6);
    assert_eq!(external_total(&[i64::MAX - 1, 5, 7]), i64::MAX);
    assert_eq!(external_total(&[-5, 3]), -2, "negative values add up");
    assert_eq!(external_per_pod_replicas(3, 1000, &[3000, 3000], Tolerances::both(0.1)), (6, 2000));
    let (replicas, usage) = external_per_pod_replicas(2, 1000, &[i64::MAX, 1], Tolerances::both(0.1));
    assert_eq!((replicas, usage), (i32::MAX, i64::MAX), "overflow: the cap, undivided");
    assert_eq!(external_per_pod_replicas(2, 1000, &[-4000], Tolerances::both(0.1)).1, i64::MAX, "as upstream");
}

#[test]
fn replica_counts_are_capped_at_max_int32() {
    let pods = running(2);
    assert_eq!(usage_ratio_replica_count(2, 1e10, Tolerances::both(0.1), &pods).ok(), Some(i32::MAX));
    assert_eq!(per_pod_replicas(1, 1, i64::MAX, Tolerances::both(0.1)).0, i32::MAX);
}

#[test]
fn tolerances_print_as_upstream() {
    assert_eq!(Tolerances::both(0.1).to_string(), "[down:10.0%, up:10.0%]");
}
