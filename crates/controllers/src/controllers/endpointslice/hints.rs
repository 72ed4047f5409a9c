//! Upstream's staging `k8s.io/endpointslice/trafficdist` and the hint handling of
//! `reconcileByAddressType` without a topology cache: a Service with a `trafficDistribution`
//! of `PreferClose` or `PreferSameZone` (and no topology annotation) gets a same-zone hint on
//! every ready endpoint with a zone, `PreferSameNode` also a same-node hint on every ready
//! endpoint with a node (PreferSameTrafficDistribution, GA and locked on since v1.35; v1.33
//! honoured `PreferClose` only); any other Service gets no hints.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointHints, EndpointSlice, ForNode, ForZone};

/// `v1.AnnotationTopologyMode` and its deprecated predecessor.
const TOPOLOGY_MODE: &str = "service.kubernetes.io/topology-mode";
const TOPOLOGY_AWARE_HINTS: &str = "service.kubernetes.io/topology-aware-hints";
/// `v1.ServiceTrafficDistributionPreferSameNode`.
const PREFER_SAME_NODE: &str = "PreferSameNode";

/// `hintsEnabled`: the topology annotation (the deprecated one first) is `Auto`.
pub fn topology_hints_enabled(service: &Service) -> bool {
    let annotations = service.metadata.annotations.as_ref();
    let value = annotations.and_then(|a| a.get(TOPOLOGY_AWARE_HINTS).or_else(|| a.get(TOPOLOGY_MODE)));
    matches!(value.map(String::as_str), Some("Auto" | "auto"))
}

/// `validTrafficDistribution`: `PreferClose`, `PreferSameZone` or `PreferSameNode`.
fn valid_traffic_distribution(distribution: &str) -> bool {
    matches!(distribution, "PreferClose" | "PreferSameZone" | PREFER_SAME_NODE)
}

/// `validTrafficDistribution && !hintsEnabled`: the Service's traffic distribution, when it
/// decides the hints.
pub fn traffic_distribution(service: &Service) -> Option<&str> {
    let distribution = service.spec.as_ref().and_then(|s| s.traffic_distribution.as_deref());
    distribution.filter(|d| valid_traffic_distribution(d) && !topology_hints_enabled(service))
}

fn ready(endpoint: &Endpoint) -> bool {
    endpoint.conditions.as_ref().and_then(|c| c.ready) == Some(true)
}

/// `preferCloseHeuristic.needsUpdate`: a ready endpoint lacks its zone hint (or, with
/// `node_hints`, its node hint) or has a stale one.
fn needs_hints(slice: &EndpointSlice, node_hints: bool) -> bool {
    slice.endpoints.iter().flatten().filter(|e| ready(e)).any(|endpoint| {
        let hints = endpoint.hints.as_ref();
        let zones = hints.and_then(|h| h.for_zones.as_deref()).unwrap_or(&[]);
        let zone_stale = match &endpoint.zone {
            Some(zone) => zones.len() != 1 || zones[0].name != *zone,
            None => !zones.is_empty(),
        };
        let nodes = hints.and_then(|h| h.for_nodes.as_deref()).unwrap_or(&[]);
        let node_stale = match endpoint.node_name.as_ref().filter(|_| node_hints) {
            Some(node) => nodes.len() != 1 || nodes[0].name != *node,
            None => !nodes.is_empty(),
        };
        zone_stale || node_stale
    })
}

/// `preferCloseHeuristic.update`: each ready endpoint's hints are its zone and (with
/// `node_hints`) its node; none when it has neither.
fn add_hints(slice: &mut EndpointSlice, node_hints: bool) {
    for endpoint in slice.endpoints.iter_mut().flatten().filter(|e| ready(e)) {
        let for_zones = endpoint.zone.as_ref().map(|zone| vec![ForZone { name: zone.clone() }]);
        let for_nodes =
            endpoint.node_name.as_ref().filter(|_| node_hints).map(|node| vec![ForNode { name: node.clone() }]);
        endpoint.hints = (for_zones.is_some() || for_nodes.is_some()).then_some(EndpointHints { for_zones, for_nodes });
    }
}

fn remove_hints(slice: &mut EndpointSlice) {
    for endpoint in slice.endpoints.iter_mut().flatten() {
        endpoint.hints = None;
    }
}

/// The hint step of `reconcileByAddressType`: with a traffic distribution, `ReconcileHints`
/// (unchanged slices lacking hints join the updates); without, `RemoveHintsFromSlices` on
/// the slices written anyway.
pub fn reconcile_hints(
    service: &Service,
    create: &mut [EndpointSlice],
    update: &mut Vec<EndpointSlice>,
    unchanged: &[Arc<EndpointSlice>],
) {
    let Some(distribution) = traffic_distribution(service) else {
        create.iter_mut().chain(update.iter_mut()).for_each(remove_hints);
        return;
    };
    let node_hints = distribution == PREFER_SAME_NODE;
    let updating: BTreeSet<Option<String>> = update.iter().map(|s| s.metadata.name.clone()).collect();
    for slice in unchanged {
        if !updating.contains(&slice.metadata.name) && needs_hints(slice, node_hints) {
            update.push((**slice).clone());
        }
    }
    create.iter_mut().chain(update.iter_mut()).for_each(|slice| add_hints(slice, node_hints));
}
