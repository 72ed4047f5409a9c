//! Upstream's staging `k8s.io/endpointslice/trafficdist` and the hint handling of
//! `reconcileByAddressType` without a topology cache: a Service with
//! `trafficDistribution: PreferClose` (and no topology annotation) gets a same-zone hint on
//! every ready endpoint with a zone; any other Service gets no hints.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointHints, EndpointSlice, ForZone};

/// `v1.AnnotationTopologyMode` and its deprecated predecessor.
const TOPOLOGY_MODE: &str = "service.kubernetes.io/topology-mode";
const TOPOLOGY_AWARE_HINTS: &str = "service.kubernetes.io/topology-aware-hints";

/// `hintsEnabled`: the topology annotation (the deprecated one first) is `Auto`.
pub fn topology_hints_enabled(service: &Service) -> bool {
    let annotations = service.metadata.annotations.as_ref();
    let value = annotations.and_then(|a| a.get(TOPOLOGY_AWARE_HINTS).or_else(|| a.get(TOPOLOGY_MODE)));
    matches!(value.map(String::as_str), Some("Auto" | "auto"))
}

/// `validTrafficDistribution && !hintsEnabled`: `PreferClose` is honoured; `PreferSameZone`
/// and `PreferSameNode` need the `PreferSameTrafficDistribution` gate, alpha and off in 1.33.
pub fn uses_traffic_distribution(service: &Service) -> bool {
    let distribution = service.spec.as_ref().and_then(|s| s.traffic_distribution.as_deref());
    distribution == Some("PreferClose") && !topology_hints_enabled(service)
}

fn ready(endpoint: &Endpoint) -> bool {
    endpoint.conditions.as_ref().and_then(|c| c.ready) == Some(true)
}

/// `preferCloseHeuristic.needsUpdate`: a ready endpoint lacks its zone hint or has a stale one.
fn needs_zone_hints(slice: &EndpointSlice) -> bool {
    slice.endpoints.iter().flatten().filter(|e| ready(e)).any(|endpoint| {
        let zones = endpoint.hints.as_ref().and_then(|h| h.for_zones.as_deref()).unwrap_or(&[]);
        match &endpoint.zone {
            Some(zone) => zones.len() != 1 || zones[0].name != *zone,
            None => !zones.is_empty(),
        }
    })
}

/// `preferCloseHeuristic.update`.
fn add_zone_hints(slice: &mut EndpointSlice) {
    for endpoint in slice.endpoints.iter_mut().flatten().filter(|e| ready(e)) {
        endpoint.hints = endpoint.zone.as_ref().map(|zone| EndpointHints {
            for_zones: Some(vec![ForZone { name: zone.clone() }]),
            ..EndpointHints::default()
        });
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
    if !uses_traffic_distribution(service) {
        create.iter_mut().chain(update.iter_mut()).for_each(remove_hints);
        return;
    }
    let updating: BTreeSet<Option<String>> = update.iter().map(|s| s.metadata.name.clone()).collect();
    for slice in unchanged {
        if !updating.contains(&slice.metadata.name) && needs_zone_hints(slice) {
            update.push((**slice).clone());
        }
    }
    create.iter_mut().chain(update.iter_mut()).for_each(add_zone_hints);
}
