//! The EndpointSlice mirroring controller (`endpointslice-mirroring-controller`), after
//! upstream v1.33's `pkg/controller/endpointslicemirroring/endpointslicemirroring_controller.go`:
//! the Endpoints of a Service without a selector (written by hand or by another controller)
//! are mirrored into EndpointSlices managed by `endpointslicemirroring-controller.k8s.io`;
//! Endpoints labelled `endpointslice.kubernetes.io/skip-mirror: "true"` and leader-election
//! locks are not.

pub mod metrics;
pub mod reconciler;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::client;
use crate::controllers::endpointutil::{
    self as util, ANNOTATION_LEADER, EndpointSliceTracker, LABEL_SERVICE_NAME, managed_by, service_key_of, slices_of,
};
use crate::metrics::{HistogramVec, exponential_buckets, registered};
use crate::runtime::controller::{Controller, ControllerContext, SyncError};
use crate::runtime::informer::{Event, Informer, object_key, split_key};
use crate::runtime::workqueue::WorkQueue;
use reconciler::{CONTROLLER_NAME, MirroringReconciler};

/// `maxSyncBackOff` of the mirroring controller.
const MAX_SYNC_BACKOFF: Duration = Duration::from_secs(100);

/// The controller's settings (`EndpointSliceMirroringControllerConfiguration`).
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// `--mirroring-concurrent-service-endpoint-syncs`.
    pub workers: usize,
    /// `--mirroring-max-endpoints-per-subset`.
    pub max_endpoints_per_subset: usize,
    /// `--mirroring-endpointslice-updates-batch-period`.
    pub batch_period: Duration,
}

/// Why an Endpoints object could not be mirrored. An API error reads as Go's `err.Error()`
/// (its message alone), as upstream's texts show it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The sync found the slice cache behind the controller's writes.
    #[error("EndpointSlice informer cache is out of date")]
    StaleInformerCache,
    /// Creating a slice failed.
    #[error("failed to create EndpointSlice for Endpoints {endpoints}: {}", .source.message())]
    CreateSlice {
        /// The Endpoints' key.
        endpoints: String,
        /// The API error.
        source: client::Error,
    },
    /// Updating a slice failed.
    #[error("failed to update {name} EndpointSlice for Endpoints {endpoints}: {}", .source.message())]
    UpdateSlice {
        /// The slice's name.
        name: String,
        /// The Endpoints' key.
        endpoints: String,
        /// The API error.
        source: client::Error,
    },
    /// Deleting a slice the plan no longer needs failed.
    #[error("failed to delete {name} EndpointSlice for Endpoints {endpoints}: {}", .source.message())]
    DeleteSlice {
        /// The slice's name.
        name: String,
        /// The Endpoints' key.
        endpoints: String,
        /// The API error.
        source: client::Error,
    },
    /// Deleting the mirrored slices of Endpoints no longer mirrored failed, for some of them.
    #[error(
        "error(s) deleting {failed}/{total} EndpointSlices for {namespace}/{name} Endpoints, including: {}",
        .source.message()
    )]
    DeleteAll {
        /// How many deletions failed.
        failed: usize,
        /// How many slices there were.
        total: usize,
        /// The Endpoints' namespace.
        namespace: String,
        /// The Endpoints' name.
        name: String,
        /// The first deletion's error.
        source: client::Error,
    },
}

impl From<Error> for SyncError {
    fn from(e: Error) -> SyncError {
        SyncError::of(e)
    }
}

/// `NewController`. It cannot fail.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    sync_duration();
    metrics::families();
    let queue = util::slice_queue("endpoint_slice_mirroring", MAX_SYNC_BACKOFF);
    let tracker = Arc::new(EndpointSliceTracker::default());
    let max = config.max_endpoints_per_subset;
    let controller = Arc::new(MirroringController {
        services: context.informers.informer::<Service>(),
        endpoints: context.informers.informer::<Endpoints>(),
        slices: context.informers.informer::<EndpointSlice>(),
        queue: queue.clone(),
        batch_period: config.batch_period,
        tracker: tracker.clone(),
        reconciler: MirroringReconciler {
            client: context.client.clone(),
            tracker,
            recorder: context.recorder.clone(),
            max_endpoints_per_subset: max,
            metrics: metrics::Cache::new(max),
        },
    });
    let handler = controller.clone();
    controller.services.add_handler(move |event: &Event<Service>| handler.on_service_event(event));
    let handler = controller.clone();
    controller.endpoints.add_handler(move |event: &Event<Endpoints>| handler.on_endpoints_event(event));
    let handler = controller.clone();
    controller.slices.add_handler(move |event: &Event<EndpointSlice>| handler.on_slice_event(event));
    Controller::new().with_queue(&queue, config.workers, move |key: &String| Ok(controller.sync(key)?))
}

/// Upstream's mirroring `Controller`.
pub struct MirroringController {
    services: Arc<Informer<Service>>,
    endpoints: Arc<Informer<Endpoints>>,
    slices: Arc<Informer<EndpointSlice>>,
    queue: WorkQueue<String>,
    /// `--mirroring-endpointslice-updates-batch-period`.
    batch_period: Duration,
    tracker: Arc<EndpointSliceTracker>,
    reconciler: MirroringReconciler,
}

impl MirroringController {
    fn sync(&self, key: &str) -> Result<(), Error> {
        let started = Instant::now();
        let result = self.sync_endpoints(key);
        // Whole milliseconds, as upstream's deferred observation.
        let seconds = started.elapsed().as_millis() as f64 / 1000.0;
        sync_duration().observe(&[], seconds);
        util::retry_or_drop(&self.queue, key, result)
    }
}

/// `endpoint_slice_mirroring_controller_endpoints_sync_duration`, registered with the controller
/// (`RegisterMetrics`).
fn sync_duration() -> &'static HistogramVec {
    static HISTOGRAM: OnceLock<Arc<HistogramVec>> = OnceLock::new();
    registered(&HISTOGRAM, || {
        HistogramVec::new(
            "endpoint_slice_mirroring_controller_endpoints_sync_duration",
            "[ALPHA] Duration of syncEndpoints() in seconds",
            &[],
            &exponential_buckets(0.001, 2.0, 15),
        )
    })
}

/// `shouldMirror`: neither labelled skip-mirror nor a leader-election lock.
pub fn should_mirror(endpoints: &Endpoints) -> bool {
    let skip = endpoints.metadata.labels.as_ref().and_then(|l| l.get(util::LABEL_SKIP_MIRROR)).map(String::as_str);
    let leader = endpoints.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(ANNOTATION_LEADER));
    skip != Some("true") && !leader
}

fn has_selector(service: &Service) -> bool {
    service.spec.as_ref().is_some_and(|s| s.selector.is_some())
}

impl MirroringController {
    /// `onServiceAdd` / `onServiceUpdate` / `onServiceDelete`: only selector-less Services, or
    /// a selector appearing or going away.
    fn on_service_event(&self, event: &Event<Service>) {
        let relevant = match event {
            Event::Added(service) | Event::Deleted { object: service, .. } => !has_selector(service),
            Event::Updated { old, new } => has_selector(old) != has_selector(new),
        };
        if relevant {
            self.queue.add(object_key(&event.object().metadata));
        }
    }

    /// `onEndpointsAdd` / `onEndpointsUpdate` / `onEndpointsDelete`.
    fn on_endpoints_event(&self, event: &Event<Endpoints>) {
        let relevant = match event {
            Event::Added(endpoints) | Event::Deleted { object: endpoints, .. } => should_mirror(endpoints),
            Event::Updated { old, new } => should_mirror(old) || should_mirror(new),
        };
        if relevant {
            self.queue.add(object_key(&event.object().metadata));
        }
    }

    /// `onEndpointSliceAdd` / `onEndpointSliceUpdate` / `onEndpointSliceDelete`.
    fn on_slice_event(&self, event: &Event<EndpointSlice>) {
        match event {
            Event::Added(slice) => {
                if managed_by(slice, CONTROLLER_NAME) && self.tracker.should_sync(slice) {
                    self.queue_endpoints_of(slice);
                }
            }
            Event::Updated { old, new } => {
                let label =
                    |s: &EndpointSlice| s.metadata.labels.as_ref().and_then(|l| l.get(LABEL_SERVICE_NAME)).cloned();
                if label(old) != label(new) {
                    self.queue_endpoints_of(new);
                    self.queue_endpoints_of(old);
                    return;
                }
                let managed_changed = managed_by(old, CONTROLLER_NAME) != managed_by(new, CONTROLLER_NAME);
                if managed_changed || (managed_by(new, CONTROLLER_NAME) && self.tracker.should_sync(new)) {
                    self.queue_endpoints_of(new);
                }
            }
            Event::Deleted { object, .. } => {
                if managed_by(object, CONTROLLER_NAME)
                    && self.tracker.has(object)
                    && !self.tracker.handle_deletion(object)
                {
                    self.queue_endpoints_of(object);
                }
            }
        }
    }

    /// `queueEndpointsForEndpointSlice`.
    fn queue_endpoints_of(&self, slice: &EndpointSlice) {
        match service_key_of(slice) {
            Some(key) => self.queue.add_after(key, self.batch_period),
            None => log::error!(
                "couldn't get key for EndpointSlice {}: missing {LABEL_SERVICE_NAME} label",
                object_key(&slice.metadata)
            ),
        }
    }

    /// `deleteMirroredSlices`.
    fn delete_mirrored(&self, namespace: &str, name: &str) -> Result<(), Error> {
        let slices = slices_of(&self.slices, namespace, name, CONTROLLER_NAME);
        self.tracker.delete_service(namespace, name);
        self.reconciler.delete_all(namespace, name, &slices)
    }

    /// `syncEndpoints`.
    fn sync_endpoints(&self, key: &str) -> Result<(), Error> {
        let (namespace, name) = split_key(key);
        let Some(endpoints) = self.endpoints.store().get(key) else {
            return self.delete_mirrored(namespace, name);
        };
        if !should_mirror(&endpoints) {
            return self.delete_mirrored(namespace, name);
        }
        let Some(service) = self.services.store().get(key) else {
            return self.delete_mirrored(namespace, name);
        };
        if has_selector(&service) {
            return self.delete_mirrored(namespace, name);
        }
        let existing = slices_of(&self.slices, namespace, name, CONTROLLER_NAME);
        if self.tracker.stale_slices(&service, &existing) {
            return Err(Error::StaleInformerCache);
        }
        self.reconciler.reconcile(&endpoints, existing)
    }
}
