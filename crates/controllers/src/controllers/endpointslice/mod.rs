//! The EndpointSlice controller (`endpointslice-controller`), after upstream v1.33's
//! `pkg/controller/endpointslice/endpointslice_controller.go` and the staging
//! `k8s.io/endpointslice` reconciler: for every Service with a selector, `discovery.k8s.io/v1`
//! EndpointSlices (per address type, at most `--max-endpoints-per-slice` endpoints each)
//! listing the selected pods with their conditions, owned by the Service.

mod hints;
pub mod metrics;
pub mod reconciler;
pub mod utils;

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use parking_lot::Mutex;

use crate::apimachinery::errors::Aggregate;
use crate::client;
use crate::controllers::endpointutil::{self as util, EndpointSliceTracker, LABEL_SERVICE_NAME, managed_by, slices_of};
use crate::metrics::{CounterVec, registered};
use crate::runtime::controller::{Controller, ControllerContext, SyncError};
use crate::runtime::events::{EventRecorder, EventType};
use crate::runtime::informer::{Event, Informer, object_key, split_key};
use crate::runtime::workqueue::WorkQueue;
use reconciler::SliceReconciler;

/// `ControllerName`: the managed-by label value of the slices it manages.
pub const CONTROLLER_NAME: &str = "endpointslice-controller.k8s.io";
/// `maxSyncBackOff`.
const MAX_SYNC_BACKOFF: Duration = Duration::from_secs(1000);
/// `endpointSliceChangeMinSyncDelay`: a Service is synced at least this long after a change
/// to one of its slices, so that several changes are handled at once.
const SLICE_CHANGE_MIN_SYNC_DELAY: Duration = Duration::from_secs(1);

/// The controller's settings (`EndpointSliceControllerConfiguration`).
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// `--concurrent-service-endpoint-syncs`.
    pub workers: usize,
    /// `--max-endpoints-per-slice`.
    pub max_endpoints_per_slice: usize,
    /// `--endpointslice-updates-batch-period`.
    pub batch_period: Duration,
}

/// Why a Service's EndpointSlices could not be synced. An API error reads as Go's
/// `err.Error()` (its message alone), as upstream's texts show it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `StaleInformerCache`: the sync found the slice cache behind the controller's writes.
    #[error("EndpointSlice informer cache is out of date")]
    StaleInformerCache,
    /// A selected pod's Node is not in the cache (the pod is left out).
    #[error("skipping Pod {pod} for Service {service}: Node {node} Not Found")]
    NodeNotFound {
        /// The pod's name.
        pod: String,
        /// The Service's key.
        service: String,
        /// The Node's name.
        node: String,
    },
    /// Creating a slice failed.
    #[error("failed to create EndpointSlice for Service {service}: {}", .source.message())]
    CreateSlice {
        /// The Service's key.
        service: String,
        /// The API error.
        source: client::Error,
    },
    /// Updating a slice failed.
    #[error("failed to update {name} EndpointSlice for Service {service}: {}", .source.message())]
    UpdateSlice {
        /// The slice's name.
        name: String,
        /// The Service's key.
        service: String,
        /// The API error.
        source: client::Error,
    },
    /// Deleting a slice the plan no longer needs failed.
    #[error("failed to delete {name} EndpointSlice for Service {service}: {}", .source.message())]
    DeleteSlice {
        /// The slice's name.
        name: String,
        /// The Service's key.
        service: String,
        /// The API error.
        source: client::Error,
    },
    /// Deleting a slice of an address type the Service no longer has failed.
    #[error("error deleting {name} EndpointSlice for Service {service}: {}", .source.message())]
    DeleteUnsupportedSlice {
        /// The slice's name.
        name: String,
        /// The Service's key.
        service: String,
        /// The API error.
        source: client::Error,
    },
    /// Several of the above (`utilerrors.NewAggregate`).
    #[error("{0}")]
    Aggregate(#[from] Aggregate),
}

impl From<Error> for SyncError {
    fn from(e: Error) -> SyncError {
        SyncError::of(e)
    }
}

/// `NewController`. It cannot fail.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    syncs();
    metrics::families();
    let queue = util::slice_queue("endpoint_slice", MAX_SYNC_BACKOFF);
    let tracker = Arc::new(EndpointSliceTracker::default());
    let max = config.max_endpoints_per_slice;
    let controller = Arc::new(EndpointSliceController {
        services: context.informers.informer::<Service>(),
        pods: context.informers.informer::<Pod>(),
        nodes: context.informers.informer::<Node>(),
        slices: context.informers.informer::<EndpointSlice>(),
        queue: queue.clone(),
        recorder: context.recorder.clone(),
        batch_period: config.batch_period,
        trigger_times: util::TriggerTimeTracker::default(),
        tracker: tracker.clone(),
        behind: Mutex::new(HashSet::new()),
        reconciler: SliceReconciler {
            client: context.client.clone(),
            max_endpoints_per_slice: max,
            tracker,
            controller_name: CONTROLLER_NAME,
            metrics: metrics::Cache::new(max),
        },
    });
    let handler = controller.clone();
    controller
        .services
        .add_handler(move |event: &Event<Service>| handler.queue.add(object_key(&event.object().metadata)));
    let handler = controller.clone();
    controller.pods.add_handler(move |event: &Event<Pod>| {
        for key in util::services_for_pod_event(handler.services.store(), event) {
            handler.queue.add_after(key, handler.batch_period);
        }
    });
    let handler = controller.clone();
    controller.slices.add_handler(move |event: &Event<EndpointSlice>| handler.on_slice_event(event));
    Controller::new().with_queue(&queue, config.workers, move |key: &String| Ok(controller.sync(key)?))
}

/// Upstream's endpointslice `Controller`.
pub struct EndpointSliceController {
    services: Arc<Informer<Service>>,
    pods: Arc<Informer<Pod>>,
    nodes: Arc<Informer<Node>>,
    slices: Arc<Informer<EndpointSlice>>,
    queue: WorkQueue<String>,
    recorder: EventRecorder,
    /// `--endpointslice-updates-batch-period`.
    batch_period: Duration,
    trigger_times: util::TriggerTimeTracker,
    tracker: Arc<EndpointSliceTracker>,
    /// Services whose last sync found the slice cache behind the controller's own writes: the
    /// event that brings those writes queues them again at once. Upstream waits for the
    /// rate-limited retry instead, whose delay doubles with every such failure, so that a
    /// burst of pod changes on a busy machine could leave a Service unsynced for minutes.
    behind: Mutex<HashSet<String>>,
    reconciler: SliceReconciler,
}

impl EndpointSliceController {
    fn sync(&self, key: &str) -> Result<(), Error> {
        let result = self.sync_service(key);
        track_sync(&result);
        util::retry_or_drop(&self.queue, key, result)
    }
}

/// `endpoint_slice_controller_syncs{result}`, registered with the controller
/// (`RegisterMetrics`).
fn syncs() -> &'static CounterVec {
    static COUNTER: OnceLock<Arc<CounterVec>> = OnceLock::new();
    registered(&COUNTER, || {
        CounterVec::counter("endpoint_slice_controller_syncs", "[ALPHA] Number of EndpointSlice syncs", &["result"])
    })
}

/// `trackSync`: `success`, `stale` or `error`, as the queue's error handler counts each sync.
fn track_sync(result: &Result<(), Error>) {
    let label = match result {
        Ok(()) => "success",
        Err(Error::StaleInformerCache) => "stale",
        Err(_) => "error",
    };
    syncs().inc(&[label]);
}

fn service_name_label(slice: &EndpointSlice) -> Option<&String> {
    slice.metadata.labels.as_ref().and_then(|l| l.get(LABEL_SERVICE_NAME))
}

impl EndpointSliceController {
    /// `onEndpointSliceAdd` / `onEndpointSliceUpdate` / `onEndpointSliceDelete`: only changes
    /// the controller did not make itself (per the tracker) queue the Service.
    fn on_slice_event(&self, event: &Event<EndpointSlice>) {
        if !self.queue_changed_service(event) {
            self.queue_if_caught_up(event.object());
        }
    }

    /// The upstream handlers; true if they queued the Service.
    fn queue_changed_service(&self, event: &Event<EndpointSlice>) -> bool {
        match event {
            Event::Added(slice) => {
                let queue = managed_by(slice, CONTROLLER_NAME) && self.tracker.should_sync(slice);
                if queue {
                    self.queue_service_of(slice);
                }
                queue
            }
            Event::Updated { old, new } => {
                if service_name_label(old) != service_name_label(new) {
                    self.queue_service_of(new);
                    self.queue_service_of(old);
                    return true;
                }
                let managed_changed = managed_by(old, CONTROLLER_NAME) != managed_by(new, CONTROLLER_NAME);
                let queue = managed_changed || (managed_by(new, CONTROLLER_NAME) && self.tracker.should_sync(new));
                if queue {
                    self.queue_service_of(new);
                }
                queue
            }
            Event::Deleted { object, .. } => {
                let queue = managed_by(object, CONTROLLER_NAME)
                    && self.tracker.has(object)
                    && !self.tracker.handle_deletion(object);
                if queue {
                    self.queue_service_of(object);
                }
                queue
            }
        }
    }

    /// One of the controller's own writes reached the cache of a Service found behind.
    fn queue_if_caught_up(&self, slice: &EndpointSlice) {
        if !managed_by(slice, CONTROLLER_NAME) {
            return;
        }
        if let Some(key) = util::service_key_of(slice)
            && self.behind.lock().remove(&key)
        {
            self.queue.add(key);
        }
    }

    /// `queueServiceForEndpointSlice`.
    fn queue_service_of(&self, slice: &EndpointSlice) {
        match util::service_key_of(slice) {
            Some(key) => self.queue.add_after(key, SLICE_CHANGE_MIN_SYNC_DELAY.max(self.batch_period)),
            None => log::error!(
                "couldn't get key for EndpointSlice {}: missing {LABEL_SERVICE_NAME} label",
                object_key(&slice.metadata)
            ),
        }
    }

    /// `syncService`.
    fn sync_service(&self, key: &str) -> Result<(), Error> {
        let (namespace, name) = split_key(key);
        let Some(service) = self.services.store().get(key) else {
            self.trigger_times.delete_service(namespace, name);
            self.tracker.delete_service(namespace, name);
            self.reconciler.delete_service(namespace, name);
            return Ok(());
        };
        let Some(selector) = util::endpoints_selector(&service) else {
            return Ok(());
        };
        let pods = util::selected_pods(self.pods.store(), &service, &selector);
        let cached = || utils::drop_pending_deletion(slices_of(&self.slices, namespace, name, CONTROLLER_NAME));
        let mut existing = cached();
        if self.tracker.stale_slices(&service, &existing) {
            // Marked first, then read again: a write arriving in between is seen either way.
            self.behind.lock().insert(key.to_string());
            existing = cached();
            if self.tracker.stale_slices(&service, &existing) {
                return Err(Error::StaleInformerCache);
            }
        }
        self.behind.lock().remove(key);
        let trigger_time = self.trigger_times.compute(&service, &pods);
        let nodes = self.nodes.store();
        let node = |name: &str| nodes.get(name);
        if let Err(e) = self.reconciler.reconcile(&service, &pods, existing, trigger_time, &node) {
            let message = format!("Error updating Endpoint Slices for Service {key}: {e}");
            self.recorder.event_for(&*service, EventType::Warning, "FailedToUpdateEndpointSlices", &message);
            return Err(e);
        }
        Ok(())
    }
}
