//! What the endpoints, EndpointSlice and EndpointSlice mirroring controllers share, after
//! upstream v1.33's staging `k8s.io/endpointslice/util` (`controller_utils.go`,
//! `endpointset.go`, `trigger_time_tracker.go`, `endpointslice_tracker.go`) and the pod helpers
//! of `pkg/api/v1/pod`: which pods belong in endpoints, how a pod's address and ports are
//! resolved for a Service, which Services a pod change concerns, and the retry policy.

mod endpoint_set;
mod repack;
mod slice_tracker;
mod slices;
mod trigger_time;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ObjectReference, Pod, Service, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::apimachinery::clock::{Clock, RealClock};
use crate::apimachinery::labels::Selector;
use crate::apimachinery::pod::{is_pod_ready, phase};
use crate::runtime::informer::Store;
use crate::runtime::workqueue::{BucketRateLimiter, ItemExponentialFailureRateLimiter, MaxOfRateLimiter, WorkQueue};

pub use endpoint_set::{EndpointSet, endpoints_equal_beyond_hash, port_map_key};
pub use repack::repack_subsets;
pub use slice_tracker::EndpointSliceTracker;
pub use slices::{
    IPV4, IPV6, controller_ref, endpoint_count, endpoint_slice_prefix, managed_by, service_key_of, slices_of,
};
pub use trigger_time::TriggerTimeTracker;

/// `discovery.LabelServiceName`.
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// `discovery.LabelManagedBy`.
pub const LABEL_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// `discovery.LabelSkipMirror`.
pub const LABEL_SKIP_MIRROR: &str = "endpointslice.kubernetes.io/skip-mirror";
/// `v1.IsHeadlessService`.
pub const LABEL_HEADLESS: &str = "service.kubernetes.io/headless";
/// `v1.EndpointsLastChangeTriggerTime`.
pub const ANNOTATION_TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";
/// `v1.EndpointsOverCapacity`.
pub const ANNOTATION_OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";
/// `v1.LastAppliedConfigAnnotation`.
pub const ANNOTATION_LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// `resourcelock.LeaderElectionRecordAnnotationKey`: Endpoints used as a leader lock.
pub const ANNOTATION_LEADER: &str = "control-plane.alpha.kubernetes.io/leader";
/// `v1.LabelTopologyZone`.
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
/// `v1.NamespaceTerminatingCause`.
pub const NAMESPACE_TERMINATING: &str = "NamespaceTerminating";

/// `maxRetries` of the three controllers: a Service failing this often is dropped from the
/// queue until its next change.
pub const MAX_RETRIES: u32 = 15;

/// The queue of the EndpointSlice and mirroring controllers: like the default controller rate
/// limiter, with a 1 s base backoff instead of 5 ms (`defaultSyncBackOff`) and `max_backoff`
/// (`maxSyncBackOff`), plus the overall 10 qps / 100 burst bucket.
pub fn slice_queue(name: &str, max_backoff: Duration) -> WorkQueue<String> {
    let clock: Arc<dyn Clock> = Arc::new(RealClock);
    let limiter = MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(Duration::from_secs(1), max_backoff)),
        Box::new(BucketRateLimiter::new(10.0, 100, clock.clone())),
    ]);
    WorkQueue::with_parts(name, Box::new(limiter), clock)
}

/// `handleErr`: a failed sync is retried (by the runtime, rate limited) until it failed
/// [`MAX_RETRIES`] times; then it is dropped (`Ok`, so the runtime forgets it) with a log line.
pub fn retry_or_drop<E: std::fmt::Display>(
    queue: &WorkQueue<String>,
    key: &str,
    result: Result<(), E>,
) -> Result<(), E> {
    match result {
        Err(e) if queue.num_requeues(&key.to_string()) >= MAX_RETRIES => {
            log::info!("Retry budget exceeded, dropping service {key:?} out of the queue: {e}");
            Ok(())
        }
        other => other,
    }
}

/// `ShouldPodBeInEndpoints`: not terminal, has an IP, and not being deleted unless
/// `include_terminating`.
pub fn should_pod_be_in_endpoints(pod: &Pod, include_terminating: bool) -> bool {
    if matches!(phase(pod), "Failed" | "Succeeded") {
        return false;
    }
    let status = pod.status.as_ref();
    let has_ip = status.and_then(|s| s.pod_ip.as_deref()).is_some_and(|ip| !ip.is_empty())
        || status.and_then(|s| s.pod_ips.as_ref()).is_some_and(|ips| !ips.is_empty());
    if !has_ip {
        return false;
    }
    include_terminating || pod.metadata.deletion_timestamp.is_none()
}

fn spec_str(value: Option<&String>) -> &str {
    value.map_or("", String::as_str)
}

/// `ShouldSetHostname`: the pod has a hostname and its subdomain is the Service's name (same
/// namespace).
pub fn should_set_hostname(pod: &Pod, service: &Service) -> bool {
    let spec = pod.spec.as_ref();
    let hostname = spec_str(spec.and_then(|s| s.hostname.as_ref()));
    let subdomain = spec_str(spec.and_then(|s| s.subdomain.as_ref()));
    !hostname.is_empty()
        && Some(subdomain) == service.metadata.name.as_deref()
        && service.metadata.namespace == pod.metadata.namespace
}

/// The pod's `spec.hostname`, when [`should_set_hostname`].
pub fn hostname_for(pod: &Pod, service: &Service) -> Option<String> {
    should_set_hostname(pod, service).then(|| pod.spec.as_ref().and_then(|s| s.hostname.clone())).flatten()
}

/// A named target port that no container of the pod declares (`FindPort`'s error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no suitable port for manifest: {pod_uid}")]
pub struct NoSuitablePort {
    /// The pod's uid.
    pub pod_uid: String,
}

/// `FindPort`: a numeric target port as is; a named one looked up (same protocol) in the
/// containers' ports, then in those of sidecar (restartable init) containers.
pub fn find_port(pod: &Pod, service_port: &ServicePort) -> Result<i32, NoSuitablePort> {
    let protocol = service_port.protocol.as_deref().unwrap_or("TCP");
    match &service_port.target_port {
        Some(IntOrString::Int(port)) => return Ok(*port),
        Some(IntOrString::String(name)) => {
            let spec = pod.spec.as_ref();
            let containers = spec.map(|s| s.containers.iter()).into_iter().flatten();
            let sidecars = spec.and_then(|s| s.init_containers.as_ref()).into_iter().flatten();
            let sidecars = sidecars.filter(|c| c.restart_policy.as_deref() == Some("Always"));
            for container in containers.chain(sidecars) {
                for port in container.ports.iter().flatten() {
                    if port.name.as_deref() == Some(name) && port.protocol.as_deref().unwrap_or("TCP") == protocol {
                        return Ok(port.container_port);
                    }
                }
            }
        }
        // The API server defaults targetPort to the port; an undefaulted one means the same.
        None => return Ok(service_port.port),
    }
    Err(NoSuitablePort { pod_uid: pod.metadata.uid.clone().unwrap_or_default() })
}

/// `helper.IsServiceIPSet`: a cluster IP that is neither empty nor `None`.
pub fn is_service_ip_set(service: &Service) -> bool {
    let ip = service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()).unwrap_or("");
    !ip.is_empty() && ip != "None"
}

/// Whether the Service is headless (`clusterIP: None`).
pub fn is_headless(service: &Service) -> bool {
    service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None")
}

/// The Service's pod selector; `None` when it has none (it then selects nothing, unlike an
/// empty selector, which selects every pod).
pub fn service_selector(service: &Service) -> Option<Selector> {
    service.spec.as_ref().and_then(|s| s.selector.as_ref()).map(Selector::from_map)
}

/// Whether the Service is `type: ExternalName` (no endpoints at all).
pub fn is_external_name(service: &Service) -> bool {
    service.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("ExternalName")
}

/// The selector of the pods that make a Service's endpoints; `None` for a Service the endpoint
/// controllers leave alone: `type: ExternalName`, or one without a selector (both controllers'
/// `syncService` return early for these, in this order).
pub fn endpoints_selector(service: &Service) -> Option<Selector> {
    if is_external_name(service) {
        return None;
    }
    service_selector(service)
}

/// `publishNotReadyAddresses`.
pub fn publish_not_ready(service: &Service) -> bool {
    service.spec.as_ref().and_then(|s| s.publish_not_ready_addresses).unwrap_or(false)
}

/// The pods of the Service's namespace its selector matches.
pub fn selected_pods(pods: &Store<Pod>, service: &Service, selector: &Selector) -> Vec<Arc<Pod>> {
    let namespace = service.metadata.namespace.as_deref().unwrap_or("");
    let mut selected = pods.list_namespace_where(namespace, |m| selector.matches(m.labels.as_ref()));
    selected.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    selected
}

/// `getServicesForPod`: keys of the Services of `namespace` whose selector matches `labels`.
fn services_for_labels(
    services: &[Arc<Service>],
    namespace: &str,
    labels: Option<&BTreeMap<String, String>>,
) -> BTreeSet<String> {
    (services.iter())
        .filter(|s| s.metadata.namespace.as_deref().unwrap_or("") == namespace)
        .filter(|s| service_selector(s).is_some_and(|selector| selector.matches(labels)))
        .map(|s| crate::runtime::informer::object_key(&s.metadata))
        .collect()
}

/// The cached Services of the pod's namespace, for the two functions below.
pub fn services_of_namespace(services: &Store<Service>, pod: &Pod) -> Vec<Arc<Service>> {
    services.list_namespace(pod.metadata.namespace.as_deref().unwrap_or(""))
}

/// `GetPodServiceMemberships`: the Services (of `services`) selecting the pod.
pub fn pod_service_memberships(services: &[Arc<Service>], pod: &Pod) -> BTreeSet<String> {
    services_for_labels(services, pod.metadata.namespace.as_deref().unwrap_or(""), pod.metadata.labels.as_ref())
}

/// `GetServicesToUpdateOnPodChange`: the Services a pod update concerns. A resync or a change
/// that cannot alter endpoints concerns none; a label change concerns the Services that
/// started or stopped selecting the pod (all of them if the endpoint changed too).
pub fn services_to_update_on_pod_change(services: &[Arc<Service>], old: &Pod, new: &Pod) -> BTreeSet<String> {
    if old.metadata.resource_version == new.metadata.resource_version {
        return BTreeSet::new();
    }
    let (pod_changed, labels_changed) = pod_endpoints_changed(old, new);
    if !pod_changed && !labels_changed {
        return BTreeSet::new();
    }
    let current = pod_service_memberships(services, new);
    if !labels_changed {
        return current;
    }
    let previous = pod_service_memberships(services, old);
    if pod_changed {
        current.union(&previous).cloned().collect()
    } else {
        current.symmetric_difference(&previous).cloned().collect()
    }
}

/// The Service keys a pod event concerns (the pod handlers of all three controllers).
pub fn services_for_pod_event(
    services: &Store<Service>,
    event: &crate::runtime::informer::Event<Pod>,
) -> BTreeSet<String> {
    use crate::runtime::informer::Event;
    match event {
        Event::Added(pod) | Event::Deleted { object: pod, .. } => {
            pod_service_memberships(&services_of_namespace(services, pod), pod)
        }
        Event::Updated { old, new } => {
            services_to_update_on_pod_change(&services_of_namespace(services, new), old, new)
        }
    }
}

fn pod_ips(pod: &Pod) -> Vec<&str> {
    let ips = pod.status.as_ref().and_then(|s| s.pod_ips.as_ref());
    ips.into_iter().flatten().map(|ip| ip.ip.as_str()).collect()
}

/// `podEndpointsChanged`: (the endpoint may differ, the matching Services may differ).
fn pod_endpoints_changed(old: &Pod, new: &Pod) -> (bool, bool) {
    let spec_field = |pod: &Pod, f: fn(&k8s_openapi::api::core::v1::PodSpec) -> Option<&String>| {
        pod.spec.as_ref().and_then(f).cloned()
    };
    let labels_changed = old.metadata.labels != new.metadata.labels
        || spec_field(old, |s| s.hostname.as_ref()) != spec_field(new, |s| s.hostname.as_ref())
        || spec_field(old, |s| s.subdomain.as_ref()) != spec_field(new, |s| s.subdomain.as_ref());
    let pod_changed = old.metadata.deletion_timestamp != new.metadata.deletion_timestamp
        || is_pod_ready(old) != is_pod_ready(new)
        || pod_ips(old) != pod_ips(new);
    (pod_changed, labels_changed)
}

/// Parses an IP as Go's `ParseIPSloppy` (leading zeros in IPv4 octets allowed) and returns it
/// in canonical form.
pub fn parse_ip_sloppy(text: &str) -> Option<IpAddr> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    let octets: Vec<&str> = text.split('.').collect();
    if octets.len() != 4 {
        return None;
    }
    let mut bytes = [0u8; 4];
    for (byte, octet) in bytes.iter_mut().zip(&octets) {
        if octet.is_empty() || octet.len() > 3 || !octet.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *byte = octet.parse().ok()?;
    }
    Some(IpAddr::from(bytes))
}

/// `utilnet.IsIPv6String`.
pub fn is_ipv6(text: &str) -> bool {
    matches!(parse_ip_sloppy(text), Some(IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_none())
}

/// The Pod reference an endpoint carries (`Kind`, namespace, name, UID).
pub fn pod_reference(pod: &Pod) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".into()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        ..ObjectReference::default()
    }
}

/// The Go text of a time in the trigger-time annotation (`RFC3339Nano`, UTC).
pub fn format_trigger_time(time: jiff::Timestamp) -> String {
    time.to_string()
}

#[cfg(test)]
mod tests;
