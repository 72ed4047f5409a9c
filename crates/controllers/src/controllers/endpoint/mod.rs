//! The endpoints controller (`endpoints-controller`), after upstream v1.36's
//! `pkg/controller/endpoint/endpoints_controller.go`: for every Service with a selector, an
//! Endpoints object of the same name listing the selected pods' addresses (ready or not) and
//! ports, repacked into canonical subsets, written only when it changed; the Endpoints of a
//! deleted Service are deleted.
//!
//! One deliberate difference: a Service whose sync failed because the Endpoints cache had not
//! yet seen our last write is queued again when the cache catches up. Upstream only retries it,
//! rate limited, and after 15 failures drops it; if the cache is still behind then, nothing
//! queues it again and the Endpoints stay short of addresses until the Service or a pod
//! changes (kubernetes/kubernetes#126578).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{EndpointAddress, EndpointPort, EndpointSubset, Endpoints, Pod, Service, ServicePort};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::Mutex;

use super::endpointutil::{
    self as util, ANNOTATION_OVER_CAPACITY, ANNOTATION_TRIGGER_TIME, LABEL_HEADLESS, repack_subsets,
};
use crate::apimachinery::pod::is_pod_ready;
use crate::client::{self, Api, Client, DeleteParams, PostParams};
use crate::runtime::controller::{Controller, ControllerContext, SyncError};
use crate::runtime::events::{EventRecorder, EventType};
use crate::runtime::informer::{Event, Informer, object_key, split_key};
use crate::runtime::workqueue::WorkQueue;

/// `maxCapacity`: the most addresses one Endpoints object holds.
pub const MAX_CAPACITY: usize = 1000;
/// The value of the over-capacity annotation.
const TRUNCATED: &str = "truncated";
/// `LabelManagedBy` and `ControllerName` (v1.33): the label on every Endpoints this controller
/// writes, so that it can tell them from ones written by others.
pub const LABEL_MANAGED_BY: &str = "endpoints.kubernetes.io/managed-by";
/// `ControllerName`: this controller's [`LABEL_MANAGED_BY`] value.
pub const CONTROLLER_NAME: &str = "endpoint-controller";

/// The controller's settings (`EndpointControllerConfiguration`).
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// `--concurrent-endpoint-syncs`.
    pub workers: usize,
    /// `--endpoint-updates-batch-period`.
    pub batch_period: Duration,
}

/// Why a Service's Endpoints could not be synced. An API error reads as Go's `err.Error()`
/// (its message alone), as upstream's log lines show it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Deleting the Endpoints of a deleted Service failed.
    #[error("{}", .0.message())]
    Delete(#[source] client::Error),
    /// The Endpoints cache still holds the version our last write replaced.
    #[error(
        "endpoints informer cache is out of date, resource version {version} already processed for endpoints {key}"
    )]
    StaleCache {
        /// The cached (already replaced) resourceVersion.
        version: String,
        /// The Service's key.
        key: String,
    },
    /// Creating or updating the Endpoints failed.
    #[error("{}", .0.message())]
    Write(#[source] client::Error),
    /// The pod has no IP of the Service's family.
    #[error("failed to find a matching endpoint for service {service}")]
    NoMatchingAddress {
        /// The Service's name.
        service: String,
    },
}

impl From<Error> for SyncError {
    fn from(e: Error) -> SyncError {
        SyncError::of(e)
    }
}

/// `NewEndpointController`. It cannot fail.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let queue = WorkQueue::new("endpoint");
    let controller = Arc::new(EndpointsController {
        client: context.client.clone(),
        services: context.informers.informer::<Service>(),
        pods: context.informers.informer::<Pod>(),
        endpoints: context.informers.informer::<Endpoints>(),
        queue: queue.clone(),
        recorder: context.recorder.clone(),
        batch_period: config.batch_period,
        trigger_times: util::TriggerTimeTracker::default(),
        stale: Mutex::new(HashMap::new()),
        waiting_for_cache: Mutex::new(HashSet::new()),
    });
    let handler = controller.clone();
    controller
        .services
        .add_handler(move |event: &Event<Service>| handler.queue.add(object_key(&event.object().metadata)));
    let handler = controller.clone();
    controller.pods.add_handler(move |event: &Event<Pod>| handler.on_pod_event(event));
    let handler = controller.clone();
    controller.endpoints.add_handler(move |event: &Event<Endpoints>| handler.on_endpoints_event(event));
    let leftovers = controller.clone();
    Controller::new()
        .with_queue(&queue, config.workers, move |key: &String| Ok(controller.sync(key)?))
        .once_synced("leftovers", move || leftovers.check_leftover_endpoints())
}

impl EndpointsController {
    /// `checkLeftoverEndpoints`, once the caches are filled: every Endpoints object but
    /// leader-election locks is queued, so that those whose Service is gone get deleted.
    fn check_leftover_endpoints(&self) {
        for endpoints in self.endpoints.store().list() {
            let annotations = endpoints.metadata.annotations.as_ref();
            if annotations.is_some_and(|a| a.contains_key(util::ANNOTATION_LEADER)) {
                continue;
            }
            self.queue.add(object_key(&endpoints.metadata));
        }
    }
}

/// Upstream's endpoint `Controller`.
pub struct EndpointsController {
    client: Client,
    services: Arc<Informer<Service>>,
    pods: Arc<Informer<Pod>>,
    endpoints: Arc<Informer<Endpoints>>,
    queue: WorkQueue<String>,
    recorder: EventRecorder,
    /// `--endpoint-updates-batch-period`: pod changes are acted on this much later.
    batch_period: Duration,
    trigger_times: util::TriggerTimeTracker,
    /// `staleEndpointsTracker`: the resourceVersion each Endpoints had before our last update
    /// of it; a cache still holding it is stale.
    stale: Mutex<HashMap<String, String>>,
    /// The Services whose last sync failed on a stale Endpoints cache: queued again as soon
    /// as the cache moves past the stale version, whatever their retry count.
    waiting_for_cache: Mutex<HashSet<String>>,
}

impl EndpointsController {
    fn sync(&self, key: &str) -> Result<(), Error> {
        util::retry_or_drop(&self.queue, key, self.sync_service(key))
    }
}

impl EndpointsController {
    /// `addPod` / `updatePod` / `deletePod`.
    fn on_pod_event(&self, event: &Event<Pod>) {
        for key in util::services_for_pod_event(self.services.store(), event) {
            self.queue.add_after(key, self.batch_period);
        }
    }

    /// `syncService`.
    fn sync_service(&self, key: &str) -> Result<(), Error> {
        let (namespace, name) = split_key(key);
        let Some(service) = self.services.store().get(key) else {
            let api = Api::<Endpoints>::namespaced(&self.client, namespace);
            match api.delete(name, &DeleteParams::default()) {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(Error::Delete(e)),
            }
            self.trigger_times.delete_service(namespace, name);
            self.stale.lock().remove(key);
            return Ok(());
        };
        let Some(selector) = util::endpoints_selector(&service) else {
            return Ok(());
        };
        let pods = util::selected_pods(self.pods.store(), &service, &selector);
        let trigger_time = self.trigger_times.compute(&service, &pods);
        let subsets = desired_subsets(&service, &pods);
        let current = match self.endpoints.store().get(key) {
            Some(current) => {
                let version = current.metadata.resource_version.clone().unwrap_or_default();
                if self.stale.lock().get(key) == Some(&version) {
                    self.waiting_for_cache.lock().insert(key.to_string());
                    // The cache may have moved on since it was read: its event found no key.
                    self.requeue_if_cache_caught_up(key);
                    return Err(Error::StaleCache { version, key: key.to_string() });
                }
                (*current).clone()
            }
            None => Endpoints {
                metadata: ObjectMeta {
                    name: Some(name.to_string()),
                    namespace: Some(namespace.to_string()),
                    labels: service.metadata.labels.clone(),
                    ..ObjectMeta::default()
                },
                subsets: None,
            },
        };
        let create = current.metadata.resource_version.as_deref().unwrap_or("").is_empty();
        if !create && up_to_date(&current, &subsets, &service) {
            log::trace!("endpoints of {key} are equal, skipping update");
            return Ok(());
        }
        let desired = desired_endpoints(&current, subsets, &service, trigger_time);
        self.write(key, &current, &desired, create)
    }

    /// Upstream's `onEndpointsDelete`, and the requeue of a Service whose sync waits for
    /// the cache to catch up with our last write.
    fn on_endpoints_event(&self, event: &Event<Endpoints>) {
        match event {
            Event::Deleted { object, .. } => self.queue.add(object_key(&object.metadata)),
            Event::Added(object) | Event::Updated { new: object, .. } => {
                self.requeue_if_cache_caught_up(&object_key(&object.metadata));
            }
        }
    }

    /// Queues `key` again if a sync of it is waiting for the Endpoints cache and the cache no
    /// longer holds the version our last write replaced.
    fn requeue_if_cache_caught_up(&self, key: &str) {
        let cached = self.endpoints.store().metadata(key).and_then(|meta| meta.resource_version);
        if self.stale.lock().get(key) != cached.as_ref() && self.waiting_for_cache.lock().remove(key) {
            self.queue.add(key.to_string());
        }
    }

    /// Creates or updates the Endpoints, with upstream's events on failure.
    fn write(&self, key: &str, current: &Endpoints, desired: &Endpoints, create: bool) -> Result<(), Error> {
        let (namespace, name) = split_key(key);
        let api = Api::<Endpoints>::namespaced(&self.client, namespace);
        let result = if create {
            api.create(desired, &PostParams::default())
        } else {
            api.replace(name, desired, &PostParams::default())
        };
        match result {
            Ok(updated) => {
                let before = current.metadata.resource_version.clone().unwrap_or_default();
                if !create && updated.metadata.resource_version.as_deref() != Some(before.as_str()) {
                    self.stale.lock().insert(key.to_string(), before);
                }
                Ok(())
            }
            // Creations in a terminating namespace keep failing: drop the item.
            Err(e) if create && e.is_forbidden() && e.has_status_cause(util::NAMESPACE_TERMINATING) => Ok(()),
            Err(e) => {
                let text = e.message();
                let (reason, message) = if create {
                    ("FailedToCreateEndpoint", format!("Failed to create endpoint for service {key}: {text}"))
                } else {
                    ("FailedToUpdateEndpoint", format!("Failed to update endpoint {key}: {text}"))
                };
                self.recorder.event_for(desired, EventType::Warning, reason, &message);
                Err(Error::Write(e))
            }
        }
    }
}

/// `podToEndpointAddressForService`: the pod IP of the Service's (first) IP family, with node
/// name and target reference. Without `ipFamilies` (v1.36 infers it where v1.33 panicked) the
/// family is the ClusterIP's, or for a headless Service the pod IP's.
pub fn pod_address_for_service(service: &Service, pod: &Pod) -> Result<EndpointAddress, Error> {
    let spec = service.spec.as_ref();
    let family = spec.and_then(|s| s.ip_families.as_ref()).and_then(|f| f.first().cloned());
    let want_v6 = match family {
        Some(family) => family == "IPv6",
        None if util::is_service_ip_set(service) => {
            util::is_ipv6(spec.and_then(|s| s.cluster_ip.as_deref()).unwrap_or(""))
        }
        // A headless Service of an old API server: the family of the pod's IP.
        None => util::is_ipv6(pod.status.as_ref().and_then(|s| s.pod_ip.as_deref()).unwrap_or("")),
    };
    let ips = pod.status.as_ref().and_then(|s| s.pod_ips.as_ref());
    let ip = ips.into_iter().flatten().map(|ip| ip.ip.as_str()).find(|ip| util::is_ipv6(ip) == want_v6);
    let Some(ip) = ip else {
        return Err(Error::NoMatchingAddress { service: service.metadata.name.clone().unwrap_or_default() });
    };
    Ok(EndpointAddress {
        ip: ip.to_string(),
        node_name: Some(pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default()),
        target_ref: Some(util::pod_reference(pod)),
        hostname: util::hostname_for(pod, service),
    })
}

/// `endpointPortFromServicePort`. The name of a core `EndpointPort` is a plain string that
/// the API leaves out when empty, so an unnamed port has none.
fn endpoint_port(service_port: &ServicePort, number: i32) -> EndpointPort {
    EndpointPort {
        name: service_port.name.clone().filter(|n| !n.is_empty()),
        port: number,
        protocol: service_port.protocol.clone(),
        app_protocol: service_port.app_protocol.clone(),
    }
}

/// `addEndpointSubset`: one subset with the address as ready or not ready.
fn single_subset(address: EndpointAddress, port: Option<EndpointPort>, ready: bool) -> EndpointSubset {
    let (addresses, not_ready_addresses) =
        if ready { (Some(vec![address]), None) } else { (None, Some(vec![address])) };
    EndpointSubset { addresses, not_ready_addresses, ports: Some(port.into_iter().collect()) }
}

/// The subsets `syncService` computes from the selected pods, repacked.
pub fn desired_subsets(service: &Service, pods: &[Arc<Pod>]) -> Vec<EndpointSubset> {
    let publish_not_ready = util::publish_not_ready(service);
    let service_ports = service.spec.as_ref().and_then(|s| s.ports.clone()).unwrap_or_default();
    let mut subsets = Vec::new();
    for pod in pods {
        if !util::should_pod_be_in_endpoints(pod, publish_not_ready) {
            continue;
        }
        let address = match pod_address_for_service(service, pod) {
            Ok(address) => address,
            Err(e) => {
                log::debug!("no endpoint address for pod {}: {e}", object_key(&pod.metadata));
                continue;
            }
        };
        let ready = publish_not_ready || is_pod_ready(pod);
        if service_ports.is_empty() {
            // A headless Service may have no ports.
            if util::is_headless(service) {
                subsets.push(single_subset(address, None, ready));
            }
            continue;
        }
        for service_port in &service_ports {
            match util::find_port(pod, service_port) {
                Ok(number) => {
                    subsets.push(single_subset(address.clone(), Some(endpoint_port(service_port, number)), ready))
                }
                Err(e) => log::debug!("failed to find port for service {}: {e}", object_key(&service.metadata)),
            }
        }
    }
    repack_subsets(&subsets)
}

/// Subsets in a form where nil and empty lists, and target resourceVersions, do not count
/// (`endpointSubsetsEqualIgnoreResourceVersion` with semantic equality).
fn normalized(subsets: &[EndpointSubset]) -> Vec<EndpointSubset> {
    let addresses = |list: &Option<Vec<EndpointAddress>>| {
        let list: Vec<EndpointAddress> = (list.iter().flatten())
            .map(|a| {
                let mut a = a.clone();
                if let Some(target) = a.target_ref.as_mut() {
                    target.resource_version = None;
                }
                a
            })
            .collect();
        (!list.is_empty()).then_some(list)
    };
    (subsets.iter())
        .map(|s| EndpointSubset {
            addresses: addresses(&s.addresses),
            not_ready_addresses: addresses(&s.not_ready_addresses),
            ports: s.ports.clone().filter(|p| !p.is_empty()),
        })
        .collect()
}

fn labels_or_empty(labels: Option<&BTreeMap<String, String>>) -> BTreeMap<String, String> {
    labels.cloned().unwrap_or_default()
}

/// Whether the Endpoints already have these subsets (as they are, or once repacked: v1.36 so
/// ignores a difference in the order an older repacking left them in), the Service's labels
/// with the managed-by label (the headless label aside) and a correct over-capacity
/// annotation. Endpoints without the managed-by label (written before v1.33) are rewritten to
/// get it.
fn up_to_date(current: &Endpoints, subsets: &[EndpointSubset], service: &Service) -> bool {
    let mut labels = labels_or_empty(current.metadata.labels.as_ref());
    labels.remove(LABEL_HEADLESS);
    let current_subsets = current.subsets.as_deref().unwrap_or(&[]);
    let desired = normalized(subsets);
    (normalized(current_subsets) == desired || normalized(&repack_subsets(current_subsets)) == desired)
        && labels == service_labels(service)
        && capacity_annotation_set_correctly(current.metadata.annotations.as_ref(), current_subsets)
}

/// The Service's labels and the managed-by label.
fn service_labels(service: &Service) -> BTreeMap<String, String> {
    let mut labels = labels_or_empty(service.metadata.labels.as_ref());
    labels.insert(LABEL_MANAGED_BY.into(), CONTROLLER_NAME.into());
    labels
}

fn address_count(subsets: &[EndpointSubset]) -> (usize, usize) {
    let ready = subsets.iter().map(|s| s.addresses.as_ref().map_or(0, Vec::len)).sum();
    let not_ready = subsets.iter().map(|s| s.not_ready_addresses.as_ref().map_or(0, Vec::len)).sum();
    (ready, not_ready)
}

/// `capacityAnnotationSetCorrectly`: under capacity and without the annotation.
fn capacity_annotation_set_correctly(
    annotations: Option<&BTreeMap<String, String>>,
    subsets: &[EndpointSubset],
) -> bool {
    let (ready, not_ready) = address_count(subsets);
    ready + not_ready <= MAX_CAPACITY && !annotations.is_some_and(|a| a.contains_key(ANNOTATION_OVER_CAPACITY))
}

/// The Endpoints to write: `current` with the subsets, the Service's labels (plus the
/// managed-by label, and the headless label when the Service has no cluster IP), the trigger time and, past
/// [`MAX_CAPACITY`] addresses, truncated subsets with the over-capacity annotation.
fn desired_endpoints(
    current: &Endpoints,
    subsets: Vec<EndpointSubset>,
    service: &Service,
    trigger_time: Option<jiff::Timestamp>,
) -> Endpoints {
    let mut desired = current.clone();
    desired.subsets = Some(subsets);
    let mut annotations = desired.metadata.annotations.take().unwrap_or_default();
    match trigger_time {
        Some(time) => annotations.insert(ANNOTATION_TRIGGER_TIME.into(), util::format_trigger_time(time)),
        None => annotations.remove(ANNOTATION_TRIGGER_TIME),
    };
    if truncate_endpoints(desired.subsets.get_or_insert_with(Vec::new)) {
        annotations.insert(ANNOTATION_OVER_CAPACITY.into(), TRUNCATED.into());
    } else {
        annotations.remove(ANNOTATION_OVER_CAPACITY);
    }
    desired.metadata.annotations = Some(annotations);
    let mut labels = service_labels(service);
    if util::is_service_ip_set(service) {
        labels.remove(LABEL_HEADLESS);
    } else {
        labels.insert(LABEL_HEADLESS.into(), String::new());
    }
    desired.metadata.labels = Some(labels);
    desired
}

/// `truncateEndpoints`: past [`MAX_CAPACITY`] addresses, keeps ready addresses first and
/// spreads the room over the subsets in proportion to their size (rounded up). True if it cut.
pub fn truncate_endpoints(subsets: &mut [EndpointSubset]) -> bool {
    let (total_ready, total_not_ready) = address_count(subsets);
    if total_ready + total_not_ready <= MAX_CAPACITY {
        return false;
    }
    let truncate_ready = total_ready > MAX_CAPACITY;
    let (max, total) =
        if truncate_ready { (MAX_CAPACITY, total_ready) } else { (MAX_CAPACITY - total_ready, total_not_ready) };
    let mut room = max;
    for subset in subsets.iter_mut() {
        let list = if truncate_ready { &mut subset.addresses } else { &mut subset.not_ready_addresses };
        let in_subset = list.as_ref().map_or(0, Vec::len);
        let share = (in_subset * max).div_ceil(total).min(room);
        if let Some(list) = list.as_mut() {
            list.truncate(share);
        }
        room -= list.as_ref().map_or(0, Vec::len);
        if truncate_ready {
            subset.not_ready_addresses = Some(Vec::new());
        }
    }
    true
}

#[cfg(test)]
mod tests;
