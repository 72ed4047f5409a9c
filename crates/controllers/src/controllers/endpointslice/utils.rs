//! Upstream's staging `k8s.io/endpointslice/utils.go`: a pod as an EndpointSlice endpoint,
//! its ports, a new slice of a Service, the labels a slice carries, and the address types a
//! Service gets slices of.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::apimachinery::pod::is_pod_ready;
use crate::controllers::endpointutil::{
    self as util, ANNOTATION_TRIGGER_TIME, IPV4, IPV6, LABEL_HEADLESS, LABEL_MANAGED_BY, LABEL_SERVICE_NAME,
    LABEL_ZONE, controller_ref, endpoint_count, endpoint_slice_prefix,
};

/// `podToEndpoint`: the pod's addresses of `address_type`, its conditions (`ready` is never
/// true for a terminating pod unless the Service publishes not-ready addresses), node, zone,
/// hostname and reference.
pub fn pod_to_endpoint(pod: &Pod, node: Option<&Node>, service: &Service, address_type: &str) -> Endpoint {
    let serving = is_pod_ready(pod);
    let terminating = pod.metadata.deletion_timestamp.is_some();
    let ready = util::publish_not_ready(service) || (serving && !terminating);
    let node_name = pod.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty());
    let zone = node.and_then(|n| n.metadata.labels.as_ref()).and_then(|l| l.get(LABEL_ZONE)).filter(|z| !z.is_empty());
    Endpoint {
        addresses: endpoint_addresses(pod, address_type),
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            serving: Some(serving),
            terminating: Some(terminating),
        }),
        target_ref: Some(util::pod_reference(pod)),
        node_name,
        zone: zone.cloned(),
        hostname: util::hostname_for(pod, service),
        ..Endpoint::default()
    }
}

/// `getEndpointAddresses`: the pod IPs of the address type, in canonical form.
fn endpoint_addresses(pod: &Pod, address_type: &str) -> Vec<String> {
    let ips = pod.status.as_ref().and_then(|s| s.pod_ips.as_ref());
    (ips.into_iter().flatten())
        .filter_map(|ip| util::parse_ip_sloppy(&ip.ip))
        .filter(|ip| ip.is_ipv6() == (address_type == IPV6))
        .map(|ip| ip.to_string())
        .collect()
}

/// `getEndpointPorts`: each Service port resolved on the pod (ports that do not resolve are
/// left out); none for a headless Service without ports.
pub fn endpoint_ports(service: &Service, pod: &Pod) -> Vec<EndpointPort> {
    let service_ports = service.spec.as_ref().and_then(|s| s.ports.as_ref());
    let mut ports = Vec::new();
    for service_port in service_ports.into_iter().flatten() {
        match util::find_port(pod, service_port) {
            Ok(number) => ports.push(EndpointPort {
                name: Some(service_port.name.clone().unwrap_or_default()),
                port: Some(number),
                protocol: Some(service_port.protocol.clone().unwrap_or_else(|| "TCP".into())),
                app_protocol: service_port.app_protocol.clone(),
            }),
            Err(e) => log::debug!("failed to find port for service {}: {e}", meta_key(&service.metadata)),
        }
    }
    ports
}

fn meta_key(meta: &ObjectMeta) -> String {
    crate::runtime::informer::object_key(meta)
}

/// `newEndpointSlice`: an empty slice of the Service named `<service>-<random>`, owned by it.
pub fn new_endpoint_slice(
    service: &Service,
    ports: Vec<EndpointPort>,
    address_type: &str,
    controller_name: &str,
) -> EndpointSlice {
    let name = service.metadata.name.clone().unwrap_or_default();
    let mut slice = EndpointSlice {
        metadata: ObjectMeta {
            generate_name: Some(endpoint_slice_prefix(&name)),
            namespace: service.metadata.namespace.clone(),
            owner_references: Some(vec![controller_ref(&service.metadata, "Service")]),
            ..ObjectMeta::default()
        },
        address_type: address_type.into(),
        endpoints: Some(Vec::new()),
        ports: Some(ports),
    };
    slice.metadata.labels = Some(endpoint_slice_labels(&slice, service, controller_name).0);
    slice
}

/// `ownedBy`: the slice has an owner reference to the Service.
pub fn owned_by(slice: &EndpointSlice, service: &Service) -> bool {
    let uid = service.metadata.uid.as_deref().unwrap_or("");
    let refs = slice.metadata.owner_references.iter().flatten();
    refs.into_iter().any(|r| r.uid == uid && r.kind == "Service" && r.api_version == "v1")
}

fn is_reserved_label(key: &str) -> bool {
    key == LABEL_SERVICE_NAME || key == LABEL_MANAGED_BY || key == LABEL_HEADLESS
}

fn unreserved(labels: Option<&BTreeMap<String, String>>) -> BTreeMap<String, String> {
    (labels.into_iter().flatten()).filter(|(k, _)| !is_reserved_label(k)).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// `setEndpointSliceLabels`: the Service's labels (reserved ones aside), the headless label
/// for a Service without cluster IP, the service-name and managed-by labels; and whether the
/// copied Service labels differ from the slice's.
pub fn endpoint_slice_labels(
    slice: &EndpointSlice,
    service: &Service,
    controller_name: &str,
) -> (BTreeMap<String, String>, bool) {
    let mut labels = unreserved(service.metadata.labels.as_ref());
    let updated = unreserved(slice.metadata.labels.as_ref()) != labels;
    if !util::is_service_ip_set(service) {
        labels.insert(LABEL_HEADLESS.into(), String::new());
    }
    labels.insert(LABEL_SERVICE_NAME.into(), service.metadata.name.clone().unwrap_or_default());
    labels.insert(LABEL_MANAGED_BY.into(), controller_name.into());
    (labels, updated)
}

/// `getAddressTypesForService`: the Service's IP families; without them (an old API server)
/// the family of its cluster IP, or both for a headless Service.
pub fn address_types_for_service(service: &Service) -> BTreeSet<&'static str> {
    let spec = service.spec.as_ref();
    let mut types: BTreeSet<&'static str> = (spec.and_then(|s| s.ip_families.as_ref()).into_iter().flatten())
        .filter_map(|f| match f.as_str() {
            "IPv4" => Some(IPV4),
            "IPv6" => Some(IPV6),
            _ => None,
        })
        .collect();
    if !types.is_empty() {
        return types;
    }
    if util::is_service_ip_set(service) {
        let ip = spec.and_then(|s| s.cluster_ip.as_deref()).unwrap_or("");
        types.insert(if util::is_ipv6(ip) { IPV6 } else { IPV4 });
        return types;
    }
    [IPV4, IPV6].into()
}

/// `getSliceToFill`: of `slices`, the one that would be closest to full with `count` more
/// endpoints without overflowing.
pub fn slice_to_fill(slices: &[&EndpointSlice], count: usize, max: usize) -> Option<usize> {
    let mut closest: Option<(usize, usize)> = None;
    for (index, slice) in slices.iter().enumerate() {
        let Some(diff) = max.checked_sub(count + endpoint_count(slice)) else { continue };
        if closest.is_none_or(|(_, best)| diff < best) {
            closest = Some((index, diff));
            if diff == 0 {
                break;
            }
        }
    }
    // Upstream starts from `closestDiff = max`, so a slice must leave less room than `max`.
    closest.filter(|(_, diff)| *diff < max).map(|(index, _)| index)
}

/// `addTriggerTimeAnnotation`.
pub fn set_trigger_time(slice: &mut EndpointSlice, trigger_time: Option<jiff::Timestamp>) {
    let annotations = slice.metadata.annotations.get_or_insert_with(BTreeMap::new);
    match trigger_time {
        Some(time) => annotations.insert(ANNOTATION_TRIGGER_TIME.into(), util::format_trigger_time(time)),
        None => annotations.remove(ANNOTATION_TRIGGER_TIME),
    };
}

/// The slices of `existing` that are not being deleted (`dropEndpointSlicesPendingDeletion`).
pub fn drop_pending_deletion(existing: Vec<Arc<EndpointSlice>>) -> Vec<Arc<EndpointSlice>> {
    existing.into_iter().filter(|s| s.metadata.deletion_timestamp.is_none()).collect()
}
