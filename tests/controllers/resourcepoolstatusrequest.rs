//! The resourcepoolstatusrequest-controller on the real server, with DRAResourcePoolStatus on in
//! both (the sandbox does not serve `resource.k8s.io/v1alpha3` ResourcePoolStatusRequests): a
//! request is answered once with the driver's pools as its ResourceSlices and ResourceClaims
//! describe them, a pool filter and a limit cut the answer, and a request with a pool still
//! missing slices stays unanswered.

use std::time::Duration;

use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use k8s_openapi::api::resource::v1alpha3::{PoolStatus, ResourcePoolStatusRequest};
use kcm::app::controllers::named;
use kcm::client::{Api, Client, Patch, PostParams};
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, eventually, from};

const DRIVER: &str = "gpu.example.com";
/// A driver whose only pool lacks a slice, apart so that `DRIVER`'s requests are complete.
const OTHER_DRIVER: &str = "fpga.example.com";

/// How long an unanswered request is watched for staying so: five retries take well under it.
const SETTLE: Duration = Duration::from_secs(3);

/// Real server only: the sandbox does not serve the alpha API.
mod a_request_is_answered_from_slices_and_claims {
    #[test]
    fn real_server() {
        crate::harness::run_on(crate::harness::Backend::Real, super::a_request_is_answered_from_slices_and_claims);
    }
}

fn start(backend: Backend) -> Cluster {
    harness::with(&[named("resourcepoolstatusrequest-controller")])
        .on(backend)
        .without_nodes()
        .apiserver_flags(&[
            "--feature-gates=DRAResourcePoolStatus=true",
            "--runtime-config=resource.k8s.io/v1alpha3=true",
        ])
        .flags(&["--feature-gates=DRAResourcePoolStatus=true"])
        .start_with(|client, _| {
            // pool-a: both of its slices; pool-b: one node's slice; the other driver's pool-c:
            // one slice of two. All in the first list: a request is answered from the caches,
            // as upstream's, so a slice created just before a request may come too late for it.
            slice(client, "pool-a-0", "pool-a", 2, json!({"allNodes": true}), 2);
            slice(client, "pool-a-1", "pool-a", 2, json!({"allNodes": true}), 3);
            slice(client, "pool-b-0", "pool-b", 1, json!({"nodeName": "node-1"}), 4);
            allocated_claim(client, "claim-b", "pool-b", "dev-0");
            driver_slice(client, OTHER_DRIVER, "pool-c-0", "pool-c", 2, json!({"allNodes": true}), 1);
        })
}

fn slice(client: &Client, name: &str, pool: &str, count: i64, node: Value, devices: usize) {
    driver_slice(client, DRIVER, name, pool, count, node, devices);
}

fn driver_slice(client: &Client, driver: &str, name: &str, pool: &str, count: i64, node: Value, devices: usize) {
    let devices: Vec<Value> = (0..devices).map(|i| json!({"name": format!("dev-{i}")})).collect();
    let mut spec = json!({"driver": driver, "pool": {"name": pool, "generation": 1, "resourceSliceCount": count},
                          "devices": devices});
    spec.as_object_mut().expect("an object").extend(node.as_object().expect("an object").clone());
    let slice: ResourceSlice = from(json!({"metadata": {"name": name}, "spec": spec}));
    Api::<ResourceSlice>::cluster(client).create(&slice, &PostParams::default()).expect("slice created");
}

fn allocated_claim(client: &Client, name: &str, pool: &str, device: &str) {
    let claims = Api::<ResourceClaim>::namespaced(client, "default");
    let claim = from(json!({"metadata": {"name": name}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": 1}}]}}}));
    claims.create(&claim, &PostParams::default()).expect("claim created");
    let status = json!({"status": {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": pool, "device": device}]}}}});
    claims.patch_status(name, &Patch::Merge(status), &PostParams::default()).expect("claim allocated");
}

fn requests(cluster: &Cluster) -> Api<ResourcePoolStatusRequest> {
    Api::cluster(&cluster.client)
}

fn request(cluster: &Cluster, name: &str, spec: Value) {
    let request: ResourcePoolStatusRequest = from(json!({"metadata": {"name": name}, "spec": spec}));
    requests(cluster).create(&request, &PostParams::default()).expect("request created");
}

fn answered(cluster: &Cluster, name: &str) -> ResourcePoolStatusRequest {
    eventually("the request answered", || requests(cluster).get(name).ok().filter(|r| r.status.is_some()))
}

fn pools(request: &ResourcePoolStatusRequest) -> Vec<PoolStatus> {
    request.status.as_ref().and_then(|s| s.pools.clone()).unwrap_or_default()
}

/// A pool's slices, devices, allocated, available and unavailable devices.
type Counts = (Option<i32>, Option<i32>, Option<i32>, Option<i32>, Option<i32>);

fn counts(pool: &PoolStatus) -> Counts {
    (
        pool.resource_slice_count,
        pool.total_devices,
        pool.allocated_devices,
        pool.available_devices,
        pool.unavailable_devices,
    )
}

fn a_request_is_answered_from_slices_and_claims(backend: Backend) {
    let cluster = start(backend);

    request(&cluster, "all", json!({"driver": DRIVER}));
    let all = answered(&cluster, "all");
    let status = all.status.as_ref().expect("a status");
    assert_eq!(status.pool_count, 2);
    let pools_all = pools(&all);
    assert_eq!(pools_all.iter().map(|p| p.pool_name.as_str()).collect::<Vec<_>>(), ["pool-a", "pool-b"]);
    assert_eq!(counts(&pools_all[0]), (Some(2), Some(5), Some(0), Some(5), Some(0)));
    assert_eq!(pools_all[0].node_name, None);
    assert_eq!(counts(&pools_all[1]), (Some(1), Some(4), Some(1), Some(3), Some(0)));
    assert_eq!(pools_all[1].node_name.as_deref(), Some("node-1"));
    assert!(pools_all.iter().all(|p| p.driver == DRIVER && p.generation == 1 && p.validation_error.is_none()));
    let condition = &status.conditions.as_ref().expect("conditions")[0];
    assert_eq!((condition.type_.as_str(), condition.status.as_str()), ("Complete", "True"));
    assert_eq!(
        (condition.reason.as_str(), condition.message.as_str()),
        ("CalculationComplete", "Calculated status for 2 pools")
    );

    request(&cluster, "limited", json!({"driver": DRIVER, "limit": 1}));
    let limited = answered(&cluster, "limited");
    assert_eq!(limited.status.as_ref().map(|s| s.pool_count), Some(2), "the count is of all pools");
    assert_eq!(pools(&limited).iter().map(|p| p.pool_name.as_str()).collect::<Vec<_>>(), ["pool-a"]);

    request(&cluster, "filtered", json!({"driver": DRIVER, "poolName": "pool-b"}));
    assert_eq!(
        pools(&answered(&cluster, "filtered")).iter().map(|p| p.pool_name.as_str()).collect::<Vec<_>>(),
        ["pool-b"]
    );

    // An answered request is not computed again: its status stays as written.
    let written = requests(&cluster).get("all").expect("request read");
    let mut labelled = written.clone();
    labelled.metadata.labels = Some([("touched".to_string(), "yes".to_string())].into());
    requests(&cluster).replace("all", &labelled, &PostParams::default()).expect("request updated");

    // A pool still missing a slice leaves the request unanswered.
    request(&cluster, "incomplete", json!({"driver": OTHER_DRIVER, "poolName": "pool-c"}));
    std::thread::sleep(SETTLE);
    let pending = requests(&cluster).get("incomplete").expect("request read");
    assert!(pending.status.is_none(), "a pool missing slices is not answered: {:?}", pending.status);
    let again = requests(&cluster).get("all").expect("request read");
    assert_eq!(again.status, written.status, "an answered request is not answered again");
}
