//! The ResourcePoolStatusRequest controller (`resourcepoolstatusrequest-controller`, gate
//! DRAResourcePoolStatus, alpha and off in v1.36), after upstream v1.36's
//! `pkg/controller/resourcepoolstatusrequest`: it answers each `resource.k8s.io/v1alpha3`
//! ResourcePoolStatusRequest once, with the status of the driver's pools computed from the
//! cached `resource.k8s.io/v1` ResourceSlices and ResourceClaims, written with `UpdateStatus`
//! and the condition `Complete` (reason `CalculationComplete`).
//!
//! A request that already has a status is never computed again. While a pool of the request
//! lacks some of its slices the request is retried (at most [`MAX_RETRIES`] times, then dropped
//! until it changes) to give the driver time to publish them. Every 10 minutes requests are
//! deleted: an answered one an hour after its condition, a pending one a day after its creation.
//!
//! Upstream's `errorStatus` (condition `Failed`, reason `CalculationFailed`) answers a lister
//! that fails to list; the caches here cannot fail to list, so no request is answered so.
//!
//! One worker, as upstream (`Run(ctx, 1)`); its queue is unnamed, so it has no metrics.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use k8s_openapi::api::resource::v1alpha3::{PoolStatus, ResourcePoolStatusRequest, ResourcePoolStatusRequestStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::apimachinery::clock::whole_seconds;
use crate::client::{self, Api, Client, DeleteParams, PostParams, Preconditions};
use crate::metrics::{CounterVec, HistogramVec, exponential_buckets, global};
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::informer::{Event, Informer};
use crate::runtime::workqueue::WorkQueue;

/// `maxRetries`: how often a request is retried before it is dropped from the queue.
pub const MAX_RETRIES: u32 = 5;
/// `cleanupPollingInterval`: how often expired requests are looked for.
pub const CLEANUP_PERIOD: Duration = Duration::from_secs(10 * 60);
/// `completedRequestTTL`: how long an answered request is kept.
pub const COMPLETED_REQUEST_TTL: Duration = Duration::from_secs(60 * 60);
/// `pendingRequestTTL`: how long an unanswered (stuck) request is kept.
pub const PENDING_REQUEST_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// `resourceapi.ResourcePoolStatusRequestLimitDefault`: the pools answered without `spec.limit`.
pub const LIMIT_DEFAULT: i32 = 100;
/// `resourceapi.ResourcePoolStatusRequestConditionComplete`.
pub const CONDITION_COMPLETE: &str = "Complete";
/// `resourceapi.ResourcePoolStatusRequestConditionFailed`.
pub const CONDITION_FAILED: &str = "Failed";
/// The API's `+k8s:maxBytes=256` on a pool's `validationError`.
const VALIDATION_ERROR_MAX_BYTES: usize = 256;

/// What the controller takes from the flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// Workers; upstream runs one.
    pub workers: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { workers: 1 }
    }
}

/// Why a request could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Some pools are incomplete: the drivers may still be publishing their slices.
    #[error("incomplete pools detected, requeueing")]
    IncompletePools,
    /// The answer could not be written.
    #[error("failed to update status for request {name}: {source}")]
    UpdateStatus {
        /// The request.
        name: String,
        /// The write's error.
        source: client::Error,
    },
}

/// `NewController` + `Run`.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let queue = WorkQueue::new("");
    let controller = Arc::new(PoolStatusController {
        client: context.client.clone(),
        requests: context.informers.informer::<ResourcePoolStatusRequest>(),
        slices: context.informers.informer::<ResourceSlice>(),
        claims: context.informers.informer::<ResourceClaim>(),
        queue: queue.clone(),
    });
    metrics();
    let handler = controller.clone();
    controller.requests.add_handler(move |event: &Event<ResourcePoolStatusRequest>| handler.on_request_event(event));
    log::info!("ResourcePoolStatusRequest controller initialized");
    let cleaner = controller.clone();
    let worker = controller.clone();
    Controller::new()
        .with_queue(&queue, config.workers, move |name: &String| worker.process_next_work_item(name))
        .every("cleanup", CLEANUP_PERIOD, move || cleaner.cleanup_expired_requests())
}

/// Upstream's `Controller`.
struct PoolStatusController {
    client: Client,
    requests: Arc<Informer<ResourcePoolStatusRequest>>,
    slices: Arc<Informer<ResourceSlice>>,
    claims: Arc<Informer<ResourceClaim>>,
    queue: WorkQueue<String>,
}

impl PoolStatusController {
    /// `enqueueRequest` on Add and Update (a delete needs nothing): only unanswered requests.
    fn on_request_event(&self, event: &Event<ResourcePoolStatusRequest>) {
        let request = match event {
            Event::Added(request) | Event::Updated { new: request, .. } => request,
            Event::Deleted { .. } => return,
        };
        if request.status.is_none() {
            self.queue.add(request.metadata.name.clone().unwrap_or_default());
        }
    }

    /// `processNextWorkItem`: a failed request is retried [`MAX_RETRIES`] times, then dropped.
    fn process_next_work_item(&self, name: &str) -> SyncResult {
        match self.sync_request(name) {
            Ok(()) => Ok(()),
            Err(e) if self.queue.num_requeues(&name.to_string()) < MAX_RETRIES => Err(e),
            Err(e) => {
                log::error!(
                    "\"Dropping request out of the queue after max retries\" err=\"{e}\" request=\"{name}\" retries={MAX_RETRIES}"
                );
                Ok(())
            }
        }
    }

    /// `syncRequest`.
    fn sync_request(&self, name: &str) -> SyncResult {
        let started = Instant::now();
        let Some(request) = self.requests.store().get(name) else {
            return Ok(());
        };
        let driver = request.spec.driver.as_str();
        if request.status.is_some() {
            log::debug!("\"Request already processed, skipping\" request=\"{name}\"");
            return Ok(());
        }
        log::info!("\"Processing ResourcePoolStatusRequest\" request=\"{name}\" driver=\"{driver}\"");
        let status =
            calculate_pool_status(&request, &self.slices.store().list(), &self.claims.store().list(), Timestamp::now());
        // Drivers may still be publishing the missing slices: retry before answering.
        if status.pools.iter().flatten().any(|pool| pool.validation_error.is_some()) {
            return Err(SyncError::of(Error::IncompletePools));
        }
        let pool_count = status.pools.as_ref().map_or(0, Vec::len);
        let mut answered = (*request).clone();
        answered.status = Some(status);
        let written = Api::<ResourcePoolStatusRequest>::cluster(&self.client).replace_status(
            name,
            &answered,
            &PostParams::default(),
        );
        let metrics = metrics();
        metrics.processed.inc(&[driver]);
        if !driver.is_empty() {
            metrics.duration.observe(&[driver], started.elapsed().as_secs_f64());
        }
        if let Err(e) = written {
            metrics.errors.inc(&[driver]);
            // Upstream requeues every error with `AddRateLimited`, a 429 too: the API error's
            // kind is deliberately not passed on to the queue.
            let error = Error::UpdateStatus { name: name.to_string(), source: e };
            return Err(SyncError::failed(error.to_string()));
        }
        log::info!("\"Successfully processed ResourcePoolStatusRequest\" request=\"{name}\" poolCount={pool_count}");
        Ok(())
    }

    /// `cleanupExpiredRequests`: deletes (UID precondition) the requests past their TTL.
    fn cleanup_expired_requests(&self) {
        let api = Api::<ResourcePoolStatusRequest>::cluster(&self.client);
        let now = Timestamp::now();
        let mut deleted = 0;
        for request in self.requests.store().list() {
            if !should_delete_request(&request, now) {
                continue;
            }
            let name = request.metadata.name.as_deref().unwrap_or_default();
            let params = DeleteParams {
                preconditions: Some(Preconditions { uid: request.metadata.uid.clone(), ..Preconditions::default() }),
                ..DeleteParams::default()
            };
            match api.delete(name, &params) {
                Ok(_) => {
                    deleted += 1;
                    log::info!("\"Deleted expired ResourcePoolStatusRequest\" request=\"{name}\"");
                }
                Err(e) if e.is_not_found() => {}
                Err(e) => {
                    log::error!("\"Failed to delete expired ResourcePoolStatusRequest\" err=\"{e}\" request=\"{name}\"")
                }
            }
        }
        if deleted > 0 {
            log::info!("\"Cleanup completed\" deletedCount={deleted}");
        }
    }
}

/// One pool as the slices of its newest generation describe it (upstream's `poolInfo`).
#[derive(Debug, Default)]
struct PoolInfo {
    node_name: String,
    /// The slices name different nodes.
    node_name_mixed: bool,
    total_devices: i32,
    slice_count: i32,
    expected_slice_count: i64,
    generation: i64,
}

/// `calculatePoolStatus`: the status of the request's driver's pools (only `spec.poolName` if
/// set), sorted by pool name and cut to `spec.limit`, with the condition `Complete`.
///
/// Only the slices of a pool's newest generation count (KEP-5677). A pool with fewer slices
/// than `resourceSliceCount` gets a `validationError` and no counts; a complete pool counts its
/// devices, the ones allocated by any claim, and the rest as available (none is unavailable in
/// alpha: device conditions and taints are not looked at yet).
pub fn calculate_pool_status(
    request: &ResourcePoolStatusRequest,
    slices: &[Arc<ResourceSlice>],
    claims: &[Arc<ResourceClaim>],
    now: Timestamp,
) -> ResourcePoolStatusRequestStatus {
    let driver = request.spec.driver.as_str();
    let pool_filter = request.spec.pool_name.as_deref().unwrap_or_default();
    let selected: Vec<&ResourceSlice> = slices
        .iter()
        .map(Arc::as_ref)
        .filter(|s| s.spec.driver == driver && (pool_filter.is_empty() || s.spec.pool.name == pool_filter))
        .collect();

    let mut newest: BTreeMap<&str, i64> = BTreeMap::new();
    for slice in &selected {
        let generation = newest.entry(slice.spec.pool.name.as_str()).or_insert(slice.spec.pool.generation);
        *generation = (*generation).max(slice.spec.pool.generation);
    }
    let mut pools: BTreeMap<&str, PoolInfo> = BTreeMap::new();
    for slice in &selected {
        let pool = slice.spec.pool.name.as_str();
        let generation = newest[pool];
        if slice.spec.pool.generation < generation {
            continue;
        }
        let devices = i32::try_from(slice.spec.devices.as_ref().map_or(0, Vec::len)).unwrap_or(i32::MAX);
        let node_name = slice.spec.node_name.clone().unwrap_or_default();
        match pools.get_mut(pool) {
            None => {
                let info = PoolInfo {
                    node_name,
                    node_name_mixed: false,
                    total_devices: devices,
                    slice_count: 1,
                    expected_slice_count: slice.spec.pool.resource_slice_count,
                    generation,
                };
                pools.insert(pool, info);
            }
            Some(info) => {
                info.total_devices += devices;
                info.slice_count += 1;
                info.node_name_mixed |= node_name != info.node_name;
            }
        }
    }

    let allocated = allocations(claims, driver);
    // One driver, so upstream's sort by driver and then pool name is the BTreeMap's order.
    let all: Vec<PoolStatus> = pools
        .into_iter()
        .map(|(pool, info)| pool_status(driver, pool, &info, allocated_in(&allocated, pool)))
        .collect();
    let pool_count = i32::try_from(all.len()).unwrap_or(i32::MAX);
    let limit = usize::try_from(request.spec.limit.unwrap_or(LIMIT_DEFAULT)).unwrap_or(0);
    let returned: Vec<PoolStatus> = all.into_iter().take(limit).collect();
    let incomplete = returned.iter().filter(|p| p.validation_error.is_some()).count();
    let message = if incomplete > 0 {
        format!("Calculated status for {} pools ({incomplete} incomplete)", returned.len())
    } else {
        format!("Calculated status for {} pools", returned.len())
    };
    ResourcePoolStatusRequestStatus {
        pool_count,
        pools: (!returned.is_empty()).then_some(returned),
        conditions: Some(vec![Condition {
            type_: CONDITION_COMPLETE.to_string(),
            status: "True".to_string(),
            last_transition_time: Time(whole_seconds(now)),
            reason: "CalculationComplete".to_string(),
            message,
            observed_generation: None,
        }]),
    }
}

/// Step 2 of `calculatePoolStatus`: the devices allocated from each of the driver's pools,
/// counted over every allocated claim's results.
fn allocations<'a>(claims: &'a [Arc<ResourceClaim>], driver: &str) -> BTreeMap<&'a str, i32> {
    let mut allocated = BTreeMap::new();
    let results = claims
        .iter()
        .filter_map(|claim| claim.status.as_ref()?.allocation.as_ref()?.devices.as_ref()?.results.as_ref())
        .flatten();
    for result in results.filter(|r| r.driver == driver) {
        *allocated.entry(result.pool.as_str()).or_insert(0) += 1;
    }
    allocated
}

fn allocated_in(allocated: &BTreeMap<&str, i32>, pool: &str) -> i32 {
    allocated.get(pool).copied().unwrap_or(0)
}

/// Step 3 of `calculatePoolStatus`: one pool's entry.
fn pool_status(driver: &str, pool: &str, info: &PoolInfo, allocated: i32) -> PoolStatus {
    let node_name = (!info.node_name.is_empty() && !info.node_name_mixed).then(|| info.node_name.clone());
    let mut status = PoolStatus {
        driver: driver.to_string(),
        pool_name: pool.to_string(),
        generation: info.generation,
        node_name,
        ..PoolStatus::default()
    };
    if i64::from(info.slice_count) < info.expected_slice_count {
        let message = format!(
            "pool {driver}/{pool} is incomplete: observed {}/{} slices at generation {}",
            info.slice_count, info.expected_slice_count, info.generation
        );
        status.validation_error = Some(truncate_bytes(message, VALIDATION_ERROR_MAX_BYTES));
        return status;
    }
    let unavailable = 0;
    status.resource_slice_count = Some(info.slice_count);
    status.total_devices = Some(info.total_devices);
    status.allocated_devices = Some(allocated);
    status.available_devices = Some((info.total_devices - allocated - unavailable).max(0));
    status.unavailable_devices = Some(unavailable);
    status
}

/// `errMsg[:256]`, without splitting a character (names are ASCII, so the same bytes).
fn truncate_bytes(mut message: String, max: usize) -> String {
    if message.len() > max {
        let mut end = max;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
    }
    message
}

/// `shouldDeleteRequest`: an answered request goes [`COMPLETED_REQUEST_TTL`] after its first
/// `Complete` or `Failed` condition (after its creation without one); a pending one
/// [`PENDING_REQUEST_TTL`] after its creation.
pub fn should_delete_request(request: &ResourcePoolStatusRequest, now: Timestamp) -> bool {
    let created = request.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let Some(status) = &request.status else {
        return is_older_than(created, PENDING_REQUEST_TTL, now);
    };
    let finished = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == CONDITION_COMPLETE || c.type_ == CONDITION_FAILED)
        .map(|c| c.last_transition_time.0);
    match finished {
        Some(at) => is_older_than(Some(at), COMPLETED_REQUEST_TTL, now),
        None => is_older_than(created, COMPLETED_REQUEST_TTL, now),
    }
}

/// `isOlderThan`: a missing (zero) time is never old.
fn is_older_than(time: Option<Timestamp>, age: Duration, now: Timestamp) -> bool {
    let age = jiff::SignedDuration::try_from(age).unwrap_or(jiff::SignedDuration::MAX);
    time.is_some_and(|t| now.duration_since(t) > age)
}

/// The controller's families (upstream's `resourcepoolstatusrequest/metrics`).
struct Metrics {
    processed: Arc<CounterVec>,
    errors: Arc<CounterVec>,
    duration: Arc<HistogramVec>,
}

/// Registered when the controller is created (`metrics.Register`).
fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let metrics = Metrics {
            processed: Arc::new(CounterVec::counter(
                "resourcepoolstatusrequest_controller_requests_processed_total",
                "[ALPHA] Total number of ResourcePoolStatusRequests processed",
                &["driver_name"],
            )),
            errors: Arc::new(CounterVec::counter(
                "resourcepoolstatusrequest_controller_request_processing_errors_total",
                "[ALPHA] Total number of errors encountered while processing ResourcePoolStatusRequests",
                &["driver_name"],
            )),
            duration: Arc::new(HistogramVec::new(
                "resourcepoolstatusrequest_controller_request_processing_duration_seconds",
                "[ALPHA] Time taken to process a ResourcePoolStatusRequest",
                &["driver_name"],
                &exponential_buckets(0.001, 2.0, 15),
            )),
        };
        global().register(metrics.processed.clone());
        global().register(metrics.errors.clone());
        global().register(metrics.duration.clone());
        metrics
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn request(spec: Value) -> ResourcePoolStatusRequest {
        serde_json::from_value(json!({"metadata": {"name": "r"}, "spec": spec})).expect("a request")
    }

    fn slice(pool: &str, generation: i64, count: i64, node: Option<&str>, devices: usize) -> Arc<ResourceSlice> {
        let devices: Vec<Value> = (0..devices).map(|i| json!({"name": format!("dev-{i}")})).collect();
        let mut spec = json!({
            "driver": "gpu.example.com",
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            "devices": devices,
        });
        match node {
            Some(node) => spec["nodeName"] = json!(node),
            None => spec["allNodes"] = json!(true),
        }
        Arc::new(serde_json::from_value(json!({"metadata": {"name": "s"}, "spec": spec})).expect("a slice"))
    }

    fn claim(results: &[(&str, &str)]) -> Arc<ResourceClaim> {
        let results: Vec<Value> = results
            .iter()
            .map(|(driver, pool)| json!({"request": "req", "driver": driver, "pool": pool, "device": "dev-0"}))
            .collect();
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": "c", "namespace": "ns"},
                "spec": {},
                "status": {"allocation": {"devices": {"results": results}}}
            }))
            .expect("a claim"),
        )
    }

    fn now() -> Timestamp {
        "2026-01-01T12:00:00Z".parse().expect("a time")
    }

    fn pools(status: &ResourcePoolStatusRequestStatus) -> Vec<PoolStatus> {
        status.pools.clone().unwrap_or_default()
    }

    #[test]
    fn complete_pools_count_devices_allocations_and_the_rest_as_available() {
        let slices = [slice("b", 1, 1, Some("node-1"), 4), slice("a", 1, 2, None, 2), slice("a", 1, 2, None, 3)];
        let claims = [claim(&[("gpu.example.com", "a"), ("gpu.example.com", "b")]), claim(&[("other", "a")])];
        let status = calculate_pool_status(&request(json!({"driver": "gpu.example.com"})), &slices, &claims, now());
        assert_eq!(status.pool_count, 2);
        let pools = pools(&status);
        assert_eq!(pools.iter().map(|p| p.pool_name.as_str()).collect::<Vec<_>>(), ["a", "b"], "sorted by name");
        let a = &pools[0];
        assert_eq!(
            (a.total_devices, a.allocated_devices, a.available_devices, a.unavailable_devices),
            (Some(5), Some(1), Some(4), Some(0))
        );
        assert_eq!(a.resource_slice_count, Some(2));
        assert_eq!(a.node_name, None, "a pool for all nodes names none");
        assert_eq!(pools[1].node_name.as_deref(), Some("node-1"));
        let condition = &status.conditions.as_ref().expect("conditions")[0];
        assert_eq!(
            (condition.type_.as_str(), condition.status.as_str(), condition.reason.as_str()),
            ("Complete", "True", "CalculationComplete")
        );
        assert_eq!(condition.message, "Calculated status for 2 pools");
    }

    #[test]
    fn only_the_newest_generation_counts_and_a_short_pool_is_incomplete() {
        let slices = [slice("a", 1, 1, Some("n"), 8), slice("a", 2, 2, Some("n"), 1)];
        let status = calculate_pool_status(&request(json!({"driver": "gpu.example.com"})), &slices, &[], now());
        let pool = &pools(&status)[0];
        assert_eq!(pool.generation, 2);
        assert_eq!(
            pool.validation_error.as_deref(),
            Some("pool gpu.example.com/a is incomplete: observed 1/2 slices at generation 2")
        );
        assert_eq!((pool.total_devices, pool.resource_slice_count), (None, None), "no counts for an incomplete pool");
        let message = &status.conditions.as_ref().expect("conditions")[0].message;
        assert_eq!(message, "Calculated status for 1 pools (1 incomplete)");
    }

    #[test]
    fn slices_on_different_nodes_name_no_node() {
        let slices = [slice("a", 1, 2, Some("n1"), 1), slice("a", 1, 2, Some("n2"), 1)];
        let status = calculate_pool_status(&request(json!({"driver": "gpu.example.com"})), &slices, &[], now());
        assert_eq!(pools(&status)[0].node_name, None);
    }

    #[test]
    fn the_pool_name_filters_and_the_limit_cuts_but_the_count_does_not() {
        let slices = [slice("a", 1, 1, None, 1), slice("b", 1, 1, None, 1), slice("c", 1, 1, None, 1)];
        let filtered =
            calculate_pool_status(&request(json!({"driver": "gpu.example.com", "poolName": "b"})), &slices, &[], now());
        assert_eq!(pools(&filtered).iter().map(|p| p.pool_name.as_str()).collect::<Vec<_>>(), ["b"]);
        let limited =
            calculate_pool_status(&request(json!({"driver": "gpu.example.com", "limit": 2})), &slices, &[], now());
        assert_eq!(limited.pool_count, 3);
        assert_eq!(pools(&limited).len(), 2);
        assert_eq!(limited.conditions.as_ref().expect("conditions")[0].message, "Calculated status for 2 pools");
        let other = calculate_pool_status(&request(json!({"driver": "other"})), &slices, &[], now());
        assert_eq!((other.pool_count, other.pools), (0, None));
    }

    #[test]
    fn a_long_validation_error_is_cut_to_256_bytes() {
        let pool = "p".repeat(300);
        let slices = [slice(&pool, 1, 2, None, 1)];
        let status = calculate_pool_status(&request(json!({"driver": "gpu.example.com"})), &slices, &[], now());
        assert_eq!(pools(&status)[0].validation_error.as_ref().map(String::len), Some(256));
    }

    fn aged(status: Option<Value>, created: &str) -> ResourcePoolStatusRequest {
        let mut object = json!({
            "metadata": {"name": "r", "creationTimestamp": created},
            "spec": {"driver": "d"},
        });
        if let Some(status) = status {
            object["status"] = status;
        }
        serde_json::from_value(object).expect("a request")
    }

    fn finished(at: &str) -> Value {
        json!({"poolCount": 0, "conditions": [{"type": "Complete", "status": "True", "reason": "CalculationComplete",
            "message": "m", "lastTransitionTime": at}]})
    }

    #[test]
    fn answered_requests_go_after_an_hour_and_pending_ones_after_a_day() {
        let old = "2026-01-01T10:00:00Z";
        assert!(should_delete_request(&aged(Some(finished("2026-01-01T10:59:00Z")), old), now()));
        assert!(!should_delete_request(&aged(Some(finished("2026-01-01T11:30:00Z")), old), now()));
        assert!(should_delete_request(&aged(Some(json!({"poolCount": 0})), old), now()), "no condition: creation");
        assert!(!should_delete_request(&aged(None, old), now()), "pending for two hours");
        assert!(should_delete_request(&aged(None, "2025-12-31T11:59:00Z"), now()), "pending for a day");
    }
}
