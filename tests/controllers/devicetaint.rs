//! The device-taint-eviction-controller on the real server (the sandbox does not serve
//! `resource.k8s.io/v1` yet). The test plays the scheduler and the DRA driver: it publishes a
//! ResourceSlice, allocates a ResourceClaim and reserves it for a pod bound to the slice's node,
//! then taints the device NoExecute. No kubelet runs, so a deleted pod stays, terminating, for
//! its condition to be read.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kcm::app::controllers::named;
use kcm::client::{Api, Patch, PostParams};
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, eventually, from};

const DRIVER: &str = "gpu.example.com";
const REASON: &str = "DeviceTaintManagerEviction";

/// Real server only until the sandbox serves `resource.k8s.io/v1`; then `on_both_backends!`.
mod a_pod_whose_device_is_tainted_is_evicted_when_its_toleration_runs_out {
    #[test]
    fn real_server() {
        crate::harness::run_on(
            crate::harness::Backend::Real,
            super::a_pod_whose_device_is_tainted_is_evicted_when_its_toleration_runs_out,
        );
    }
}

fn start(backend: Backend) -> Cluster {
    // Both gates are on by default in v1.36; named for the gate table of v1.33.
    harness::with(&[named("device-taint-eviction-controller")])
        .on(backend)
        .without_nodes()
        .flags(&["--feature-gates=DynamicResourceAllocation=true,DRADeviceTaints=true"])
        .start()
}

fn slices(cluster: &Cluster) -> Api<ResourceSlice> {
    Api::cluster(&cluster.client)
}

/// The node's slice with devices `gpu-0` and `gpu-1`; `taints` on `gpu-0`.
fn publish(cluster: &Cluster, taints: Value) {
    let slice = json!({"metadata": {"name": "node-a-gpus"}, "spec": {
        "driver": DRIVER, "nodeName": "node-a",
        "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0", "taints": taints}, {"name": "gpu-1"}]}});
    match slices(cluster).get_opt("node-a-gpus").expect("slice read") {
        None => {
            slices(cluster).create(&from(slice), &PostParams::default()).expect("slice created");
        }
        Some(current) => {
            let mut updated: ResourceSlice = from(slice);
            updated.metadata.resource_version = current.metadata.resource_version;
            slices(cluster).replace("node-a-gpus", &updated, &PostParams::default()).expect("slice updated");
        }
    }
}

/// Pod `name` bound to node-a using claim `claim`, whose allocation of `gpu-0` carries
/// `tolerations` and which is reserved for the pod (what the scheduler would write).
fn pod_with_claim(cluster: &Cluster, name: &str, claim: &str, tolerations: Value) -> Pod {
    let claims = cluster.api::<ResourceClaim>();
    let spec = json!({"metadata": {"name": claim}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": 1}}]}}});
    claims.create(&from(spec), &PostParams::default()).expect("claim created");
    let pod: Pod = from(json!({"metadata": {"name": name}, "spec": {
        "nodeName": "node-a",
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"claims": [{"name": "gpu"}]}}],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}}));
    let pod = cluster.api::<Pod>().create(&pod, &PostParams::default()).expect("pod created");
    let status = json!({"status": {
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "node-a",
                                                  "device": "gpu-0", "tolerations": tolerations}]}},
        "reservedFor": [{"resource": "pods", "name": name, "uid": pod.metadata.uid}]}});
    claims.patch_status(claim, &Patch::Merge(status), &PostParams::default()).expect("claim allocated and reserved");
    pod
}

fn tolerate_for(seconds: i64) -> Value {
    json!([{"key": "example.com/broken", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}])
}

fn disruption(pod: &Pod) -> Option<&k8s_openapi::api::core::v1::PodCondition> {
    pod.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "DisruptionTarget")
}

fn a_pod_whose_device_is_tainted_is_evicted_when_its_toleration_runs_out(backend: Backend) {
    let cluster = start(backend);
    let class: DeviceClass = from(json!({"metadata": {"name": DRIVER}, "spec": {}}));
    Api::<DeviceClass>::cluster(&cluster.client).create(&class, &PostParams::default()).expect("class created");
    publish(&cluster, json!(null));
    let short = pod_with_claim(&cluster, "short", "short-gpu", tolerate_for(2));
    let long = pod_with_claim(&cluster, "long", "long-gpu", tolerate_for(3600));

    publish(&cluster, json!([{"key": "example.com/broken", "value": "true", "effect": "NoExecute"}]));
    let tainted = slices(&cluster).get("node-a-gpus").expect("slice read");
    let devices = tainted.spec.devices.expect("devices");
    let added = devices[0].taints.as_ref().expect("taints")[0].time_added.clone().expect("timeAdded set").0;

    // The pod tolerating the taint for 2 s goes then: condition, Event, delete.
    let pods = cluster.api::<Pod>();
    let evicted = eventually("the short-tolerating pod deleted", || {
        pods.get_opt("short").expect("pod read").filter(|p| p.metadata.deletion_timestamp.is_some())
    });
    assert_eq!(evicted.metadata.uid, short.metadata.uid);
    let condition = disruption(&evicted).expect("the DisruptionTarget condition");
    assert_eq!(condition.status, "True");
    assert_eq!(condition.reason.as_deref(), Some("DeletionByDeviceTaintManager"));
    assert_eq!(condition.message.as_deref(), Some("Device Taint manager: deleting due to NoExecute taint"));
    assert_eq!(condition.observed_generation, None, "upstream sets no observedGeneration here");
    let since: Timestamp = condition.last_transition_time.as_ref().expect("a transition time").0;
    assert!(since >= added + SignedDuration::from_secs(2), "not before the toleration ran out: {since} vs {added}");
    eventually("the eviction Event", || {
        cluster.event_messages("default", "short", REASON).contains(&"Marking for deletion".to_string()).then_some(())
    });

    // The same slice change left the other pod's deletion pending; the taint going cancels it.
    assert!(pods.get("long").expect("pod read").metadata.deletion_timestamp.is_none());
    publish(&cluster, json!(null));
    eventually("the cancellation Event", || {
        cluster.event_messages("default", "long", REASON).contains(&"Cancelling deletion".to_string()).then_some(())
    });
    let kept = pods.get("long").expect("the long-tolerating pod stays");
    assert_eq!(kept.metadata.uid, long.metadata.uid);
    assert!(kept.metadata.deletion_timestamp.is_none() && disruption(&kept).is_none());
    assert_eq!(cluster.event_messages("default", "long", REASON), vec!["Cancelling deletion".to_string()]);

    let deletions =
        harness::metric_sample("device_taint_eviction_controller_pod_deletions_total").expect("the deletions counter");
    assert!(deletions >= 1.0, "{deletions}");
    let metrics = kcm::metrics::global().render();
    assert!(metrics.contains("device_taint_eviction_controller_pod_deletion_duration_seconds_bucket{le=\"240\"}"));
}
