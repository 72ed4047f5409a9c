//! Upstream's `pkg/controller/endpointslicemirroring/reconciler.go` (with `utils.go` and
//! `reconciler_helpers.go`): the subsets of a custom Endpoints object, repacked, become
//! EndpointSlices, one per subset and address type, each holding at most
//! `--mirroring-max-endpoints-per-subset` addresses.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{EndpointAddress, Endpoints};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::client::{Api, Client, DeleteParams, PostParams};
use crate::controllers::endpointutil::{
    self as util, ANNOTATION_LAST_APPLIED, ANNOTATION_TRIGGER_TIME, EndpointSet, EndpointSliceTracker, IPV4, IPV6,
    LABEL_MANAGED_BY, LABEL_SERVICE_NAME, controller_ref, endpoint_count, endpoint_slice_prefix,
    endpoints_equal_beyond_hash, port_map_key, repack_subsets,
};
use crate::runtime::events::{EventRecorder, EventType};
use crate::runtime::informer::object_key;

use super::Error;
use super::metrics::{Cache, Efficiency, PortCache, families};

/// `controllerName`: the managed-by label value of mirrored slices.
pub const CONTROLLER_NAME: &str = "endpointslicemirroring-controller.k8s.io";
/// Event reasons.
const INVALID_IP_ADDRESS: &str = "InvalidIPAddress";
const TOO_MANY_ADDRESSES_TO_MIRROR: &str = "TooManyAddressesToMirror";

/// The endpoints wanted for one (address type, ports) key.
#[derive(Debug, Default)]
pub struct Desired {
    /// `IPv4` or `IPv6`.
    pub address_type: &'static str,
    /// The subset's ports, as slice ports.
    pub ports: Vec<EndpointPort>,
    /// The subset's addresses of this address type, as endpoints.
    pub endpoints: EndpointSet,
}

/// What one reconciliation writes (`slicesByAction`).
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Slices to create.
    pub create: Vec<EndpointSlice>,
    /// Existing slices to update.
    pub update: Vec<EndpointSlice>,
    /// Existing slices to delete.
    pub delete: Vec<EndpointSlice>,
}

/// `newAddrTypePortMapKey`: the address type, then the ports.
fn key_of(address_type: &str, ports: &[EndpointPort]) -> String {
    format!("{address_type}-{}", port_map_key(ports))
}

/// `epPortsToEpsPorts`.
fn slice_ports(ports: &[k8s_openapi::api::core::v1::EndpointPort]) -> Vec<EndpointPort> {
    (ports.iter())
        .map(|p| EndpointPort {
            name: Some(p.name.clone().unwrap_or_default()),
            port: Some(p.port),
            protocol: Some(p.protocol.clone().unwrap_or_default()),
            app_protocol: p.app_protocol.clone(),
        })
        .collect()
}

/// `addressToEndpoint`: the address (canonical IP) as an endpoint and its address type;
/// `None` for an invalid IP.
fn address_to_endpoint(address: &EndpointAddress, ready: bool) -> Option<(Endpoint, &'static str)> {
    let ip = util::parse_ip_sloppy(&address.ip)?;
    let address_type = match ip {
        std::net::IpAddr::V6(v6) if v6.to_ipv4_mapped().is_none() => IPV6,
        _ => IPV4,
    };
    let endpoint = Endpoint {
        addresses: vec![ip.to_canonical().to_string()],
        conditions: Some(EndpointConditions { ready: Some(ready), ..EndpointConditions::default() }),
        target_ref: address.target_ref.clone(),
        node_name: address.node_name.clone(),
        hostname: address.hostname.clone().filter(|h| !h.is_empty()),
        ..Endpoint::default()
    };
    Some((endpoint, address_type))
}

/// What the desired state calculation found besides the endpoints.
#[derive(Debug, Default, PartialEq)]
pub struct Skipped {
    /// Addresses skipped for not being a valid IP.
    pub invalid: usize,
    /// Addresses not mirrored, invalid ones included.
    pub total: usize,
}

/// `newDesiredCalc` + the loop of `reconcile`: per repacked subset, its ready then not-ready
/// addresses, at most `max_per_subset` of them.
pub fn desired_state(endpoints: &Endpoints, max_per_subset: usize) -> (BTreeMap<String, Desired>, Skipped) {
    let mut desired: BTreeMap<String, Desired> = BTreeMap::new();
    let mut skipped = Skipped::default();
    for subset in repack_subsets(endpoints.subsets.as_deref().unwrap_or(&[])) {
        let ports = slice_ports(subset.ports.as_deref().unwrap_or(&[]));
        for address_type in [IPV4, IPV6] {
            let entry = desired.entry(key_of(address_type, &ports)).or_default();
            entry.address_type = address_type;
            entry.ports = ports.clone();
        }
        let ready = subset.addresses.iter().flatten().map(|a| (a, true));
        let not_ready = subset.not_ready_addresses.iter().flatten().map(|a| (a, false));
        let total =
            subset.addresses.as_ref().map_or(0, Vec::len) + subset.not_ready_addresses.as_ref().map_or(0, Vec::len);
        let mut added = 0;
        for (address, is_ready) in ready.chain(not_ready) {
            if added >= max_per_subset {
                break;
            }
            match address_to_endpoint(address, is_ready) {
                Some((endpoint, address_type)) => {
                    if let Some(entry) = desired.get_mut(&key_of(address_type, &ports)) {
                        entry.endpoints.insert(endpoint);
                    }
                    added += 1;
                }
                None => {
                    skipped.invalid += 1;
                    log::info!(
                        "Address in Endpoints {} is not a valid IP, it will not be mirrored to an EndpointSlice: {}",
                        object_key(&endpoints.metadata),
                        address.ip
                    );
                }
            }
        }
        skipped.total += total - added;
    }
    (desired, skipped)
}

/// `newEndpointSlice`: a slice of the Endpoints with its labels and annotations (but the
/// trigger time and kubectl's last applied configuration), owned by it.
pub fn new_endpoint_slice(
    endpoints: &Endpoints,
    ports: Vec<EndpointPort>,
    address_type: &str,
    name: Option<String>,
) -> EndpointSlice {
    let endpoints_name = endpoints.metadata.name.clone().unwrap_or_default();
    let mut labels = endpoints.metadata.labels.clone().unwrap_or_default();
    labels.insert(LABEL_SERVICE_NAME.into(), endpoints_name.clone());
    labels.insert(LABEL_MANAGED_BY.into(), CONTROLLER_NAME.into());
    let annotations = (endpoints.metadata.annotations.iter().flatten())
        .filter(|(k, _)| k.as_str() != ANNOTATION_TRIGGER_TIME && k.as_str() != ANNOTATION_LAST_APPLIED)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let generate_name = name.is_none().then(|| endpoint_slice_prefix(&endpoints_name));
    EndpointSlice {
        metadata: ObjectMeta {
            name,
            generate_name,
            namespace: endpoints.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![controller_ref(&endpoints.metadata, "Endpoints")]),
            ..ObjectMeta::default()
        },
        address_type: address_type.into(),
        endpoints: Some(Vec::new()),
        ports: Some(ports),
    }
}

/// `totalsByAction`: endpoints added, updated and removed by a reconciliation.
#[derive(Debug, Default, PartialEq, Clone, Copy)]
pub struct Totals {
    /// Desired endpoints not in the existing slice.
    pub added: usize,
    /// Endpoints whose desired version differs.
    pub updated: usize,
    /// Endpoints no longer desired.
    pub removed: usize,
}

impl Totals {
    fn add(&mut self, other: Totals) {
        self.added += other.added;
        self.updated += other.updated;
        self.removed += other.removed;
    }

    fn is_zero(&self) -> bool {
        *self == Totals::default()
    }
}

/// `totalChanges`.
fn total_changes(slice: &EndpointSlice, desired: &EndpointSet) -> Totals {
    let mut totals = Totals::default();
    let mut matches = 0;
    for endpoint in slice.endpoints.iter().flatten() {
        match desired.get(endpoint) {
            None => totals.removed += 1,
            Some(wanted) => {
                matches += 1;
                totals.updated += usize::from(!endpoints_equal_beyond_hash(wanted, endpoint));
            }
        }
    }
    totals.added = desired.len() - matches;
    totals
}

fn without(map: Option<&BTreeMap<String, String>>, keys: &[&str]) -> BTreeMap<String, String> {
    (map.into_iter().flatten())
        .filter(|(k, _)| !keys.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// `reconcileByPortMapping`: all but the first existing slice go; the first is kept as is if
/// it already matches (endpoints, labels, annotations), else rewritten in place.
fn reconcile_port_mapping(
    endpoints: &Endpoints,
    mut existing: Vec<Arc<EndpointSlice>>,
    mut desired: Desired,
    max_per_subset: usize,
) -> (Plan, Totals) {
    let mut plan = Plan::default();
    if desired.endpoints.is_empty() {
        plan.delete = existing.iter().map(|s| (**s).clone()).collect();
        let removed = existing.iter().map(|s| endpoint_count(s)).sum();
        return (plan, Totals { removed, ..Totals::default() });
    }
    let mut name = None;
    let mut totals = Totals { added: desired.endpoints.len(), ..Totals::default() };
    if !existing.is_empty() {
        let first = existing.remove(0);
        plan.delete = existing.iter().map(|s| (**s).clone()).collect();
        let annotations =
            without(endpoints.metadata.annotations.as_ref(), &[ANNOTATION_TRIGGER_TIME, ANNOTATION_LAST_APPLIED]);
        let labels = without(first.metadata.labels.as_ref(), &[LABEL_MANAGED_BY, LABEL_SERVICE_NAME]);
        totals = total_changes(&first, &desired.endpoints);
        if totals.is_zero()
            && labels == without(endpoints.metadata.labels.as_ref(), &[])
            && annotations == without(first.metadata.annotations.as_ref(), &[])
        {
            return (plan, totals);
        }
        name = first.metadata.name.clone();
    }
    let mut slice = new_endpoint_slice(endpoints, desired.ports.clone(), desired.address_type, name);
    while endpoint_count(&slice) < max_per_subset {
        let Some(endpoint) = desired.endpoints.pop() else { break };
        slice.endpoints.get_or_insert_default().push(endpoint);
    }
    if slice.metadata.name.is_some() {
        plan.update.push(slice)
    } else {
        plan.create.push(slice)
    }
    (plan, totals)
}

/// `recycleSlices`: per address type, creations become updates of slices to delete.
fn recycle_slices(plan: &mut Plan) {
    for address_type in [IPV4, IPV6] {
        loop {
            let create = plan.create.iter().position(|s| s.address_type == address_type);
            let delete = plan.delete.iter().position(|s| s.address_type == address_type);
            let (Some(create), Some(delete)) = (create, delete) else { break };
            let mut slice = plan.create.remove(create);
            let doomed = plan.delete.remove(delete);
            slice.metadata.name = doomed.metadata.name;
            slice.metadata.generate_name = None;
            slice.metadata.resource_version = doomed.metadata.resource_version;
            plan.update.push(slice);
        }
    }
}

/// Everything `reconcile` decides before `finalize` writes it.
pub fn plan(
    endpoints: &Endpoints,
    existing: Vec<Arc<EndpointSlice>>,
    desired: BTreeMap<String, Desired>,
    max: usize,
) -> Plan {
    plan_and_count(endpoints, existing, desired, max).0
}

/// [`plan`], with the endpoint totals and the per-key efficiency the metrics record.
pub fn plan_and_count(
    endpoints: &Endpoints,
    existing: Vec<Arc<EndpointSlice>>,
    desired: BTreeMap<String, Desired>,
    max: usize,
) -> (Plan, Totals, PortCache) {
    let mut existing_by_key: BTreeMap<String, Vec<Arc<EndpointSlice>>> = BTreeMap::new();
    for slice in existing {
        existing_by_key
            .entry(key_of(&slice.address_type, slice.ports.as_deref().unwrap_or(&[])))
            .or_default()
            .push(slice);
    }
    let mut plan = Plan::default();
    let (mut totals, mut efficiency) = (Totals::default(), PortCache::new());
    for (key, wanted) in desired {
        let slices = existing_by_key.remove(&key).unwrap_or_default();
        let (count, wanted_count) = (slices.len(), wanted.endpoints.len());
        let (part, part_totals) = reconcile_port_mapping(endpoints, slices, wanted, max);
        totals.add(part_totals);
        let slices = count + part.create.len() - part.delete.len();
        efficiency.insert(key, Efficiency { endpoints: wanted_count, slices });
        plan.create.extend(part.create);
        plan.update.extend(part.update);
        plan.delete.extend(part.delete);
    }
    plan.delete.extend(existing_by_key.into_values().flatten().map(|s| (*s).clone()));
    recycle_slices(&mut plan);
    (plan, totals, efficiency)
}

/// Upstream's mirroring `reconciler`.
pub struct MirroringReconciler {
    /// The client the slices are written with.
    pub client: Client,
    /// The generations of the slices this controller wrote, to spot a stale informer cache.
    pub tracker: Arc<EndpointSliceTracker>,
    /// Records the Events about skipped addresses.
    pub recorder: EventRecorder,
    /// `--mirroring-max-endpoints-per-subset`.
    pub max_endpoints_per_subset: usize,
    /// The desired/actual totals behind the cache-based gauges.
    pub metrics: Cache,
}

impl MirroringReconciler {
    /// `reconcile`: events for skipped addresses, then the writes.
    pub fn reconcile(&self, endpoints: &Endpoints, existing: Vec<Arc<EndpointSlice>>) -> Result<(), Error> {
        let max = self.max_endpoints_per_subset;
        let (desired, skipped) = desired_state(endpoints, max);
        if skipped.invalid > 0 {
            let message = format!("Skipped {} invalid IP addresses when mirroring to EndpointSlices", skipped.invalid);
            self.recorder.event_for(endpoints, EventType::Warning, INVALID_IP_ADDRESS, &message);
        }
        if skipped.total > skipped.invalid {
            let message = format!(
                "A max of {max} addresses can be mirrored to EndpointSlices per Endpoints subset. {} addresses were skipped",
                skipped.total
            );
            self.recorder.event_for(endpoints, EventType::Warning, TOO_MANY_ADDRESSES_TO_MIRROR, &message);
        }
        let f = families();
        f.addresses_skipped_per_sync.observe(&[], skipped.total as f64);
        let (plan, totals, efficiency) = plan_and_count(endpoints, existing, desired, max);
        f.endpoints_added_per_sync.observe(&[], totals.added as f64);
        f.endpoints_updated_per_sync.observe(&[], totals.updated as f64);
        f.endpoints_removed_per_sync.observe(&[], totals.removed as f64);
        self.metrics.update_endpoint_port_cache(&object_key(&endpoints.metadata), efficiency);
        self.finalize(endpoints, plan)
    }

    /// `finalize`.
    fn finalize(&self, endpoints: &Endpoints, plan: Plan) -> Result<(), Error> {
        let key = object_key(&endpoints.metadata);
        let api = Api::<EndpointSlice>::namespaced(&self.client, endpoints.metadata.namespace.as_deref().unwrap_or(""));
        if endpoints.metadata.deletion_timestamp.is_none() {
            for slice in plan.create {
                match api.create(&slice, &PostParams::default()) {
                    Ok(created) => {
                        self.tracker.update(&created);
                        families().changes.inc(&["create"]);
                    }
                    Err(e) if e.has_status_cause(util::NAMESPACE_TERMINATING) => return Ok(()),
                    Err(source) => return Err(Error::CreateSlice { endpoints: key, source }),
                }
            }
        }
        for slice in plan.update {
            let name = slice.metadata.name.clone().unwrap_or_default();
            match api.replace(&name, &slice, &PostParams::default()) {
                Ok(updated) => {
                    self.tracker.update(&updated);
                    families().changes.inc(&["update"]);
                }
                Err(source) => return Err(Error::UpdateSlice { name, endpoints: key, source }),
            }
        }
        for slice in plan.delete {
            let name = slice.metadata.name.clone().unwrap_or_default();
            if let Err(source) = api.delete(&name, &DeleteParams::default()) {
                return Err(Error::DeleteSlice { name, endpoints: key, source });
            }
            self.tracker.expect_deletion(&slice);
            families().changes.inc(&["delete"]);
        }
        Ok(())
    }

    /// `deleteEndpoints`: deletes every mirrored slice of the Endpoints.
    pub fn delete_all(&self, namespace: &str, name: &str, slices: &[Arc<EndpointSlice>]) -> Result<(), Error> {
        self.metrics.delete_endpoints(&format!("{namespace}/{name}"));
        let api = Api::<EndpointSlice>::namespaced(&self.client, namespace);
        let mut errors = (slices.iter())
            .filter_map(|s| api.delete(s.metadata.name.as_deref().unwrap_or(""), &DeleteParams::default()).err());
        let Some(first) = errors.next() else { return Ok(()) };
        Err(Error::DeleteAll {
            failed: 1 + errors.count(),
            total: slices.len(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            source: first,
        })
    }
}

#[cfg(test)]
mod tests;
