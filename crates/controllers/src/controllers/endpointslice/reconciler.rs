//! Upstream's staging `k8s.io/endpointslice/reconciler.go`: turns the pods selected by a
//! Service into EndpointSlices with as little churn as possible. Endpoints are grouped by
//! address type and by their set of ports; existing slices keep the endpoints still wanted
//! (updated in place), slices being updated anyway are filled first, then leftover endpoints
//! go into the unchanged slice they fill best, and only then into new slices of at most
//! `--max-endpoints-per-slice`. A Service without endpoints keeps one empty placeholder slice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::{EndpointPort, EndpointSlice};

use super::Error;
use super::hints::traffic_distribution;
use super::metrics::{Cache, Efficiency, PortCache, families};
use super::utils::{
    address_types_for_service, endpoint_ports, endpoint_slice_labels, new_endpoint_slice, owned_by, pod_to_endpoint,
    set_trigger_time, slice_to_fill,
};
use crate::apimachinery::errors::Aggregate;
use crate::client::{self, Api, Client, DeleteParams, PostParams};
use crate::controllers::endpointutil::{
    self as util, EndpointSet, EndpointSliceTracker, endpoint_count, endpoints_equal_beyond_hash, port_map_key,
};
use crate::runtime::informer::object_key;

/// The endpoints wanted for one set of ports.
#[derive(Debug, Default)]
pub struct Desired {
    /// The ports every slice of this set carries.
    pub ports: Vec<EndpointPort>,
    /// The endpoints the slices should hold.
    pub endpoints: EndpointSet,
}

/// What one reconciliation writes.
#[derive(Debug, Default)]
pub struct Plan {
    /// Slices to create.
    pub create: Vec<EndpointSlice>,
    /// Existing slices to update.
    pub update: Vec<EndpointSlice>,
    /// Existing slices to delete.
    pub delete: Vec<Arc<EndpointSlice>>,
    /// Endpoints not in any existing slice (`numAdded`).
    pub added: usize,
    /// Endpoints dropped from existing slices (`numRemoved`).
    pub removed: usize,
    /// The efficiency of each port set, for the metrics cache (`spMetrics`).
    pub efficiency: PortCache,
}

impl Plan {
    fn extend(&mut self, other: Plan) {
        self.create.extend(other.create);
        self.update.extend(other.update);
        self.delete.extend(other.delete);
        self.added += other.added;
        self.removed += other.removed;
    }
}

/// Upstream's `Reconciler`, without topology hints (the topology cache is off).
pub struct SliceReconciler {
    /// The client the slices are written with.
    pub client: Client,
    /// `--max-endpoints-per-slice`.
    pub max_endpoints_per_slice: usize,
    /// The generations of the slices this controller wrote, to spot a stale informer cache.
    pub tracker: Arc<EndpointSliceTracker>,
    /// The `endpointslice.kubernetes.io/managed-by` value.
    pub controller_name: &'static str,
    /// The desired/actual totals behind the cache-based gauges.
    pub metrics: Cache,
}

impl SliceReconciler {
    /// `Reconcile`: slices of address types the Service no longer has are deleted; each of
    /// its address types is reconciled.
    pub fn reconcile(
        &self,
        service: &Service,
        pods: &[Arc<Pod>],
        existing: Vec<Arc<EndpointSlice>>,
        trigger_time: Option<jiff::Timestamp>,
        node: &dyn Fn(&str) -> Option<Arc<Node>>,
    ) -> Result<(), Error> {
        let types = address_types_for_service(service);
        let mut by_type: BTreeMap<&str, Vec<Arc<EndpointSlice>>> = BTreeMap::new();
        let mut unsupported = Vec::new();
        for slice in existing {
            match types.iter().find(|t| **t == slice.address_type) {
                Some(t) => by_type.entry(t).or_default().push(slice),
                None => unsupported.push(slice),
            }
        }
        let mut errors = Vec::new();
        for address_type in &types {
            let existing = by_type.remove(address_type).unwrap_or_default();
            if let Err(e) = self.reconcile_address_type(service, pods, existing, trigger_time, address_type, node) {
                errors.push(e);
            }
        }
        for slice in unsupported {
            if let Err(source) = self.delete_slice(service, &slice) {
                errors.push(Error::DeleteUnsupportedSlice {
                    name: slice.metadata.name.clone().unwrap_or_default(),
                    service: object_key(&service.metadata),
                    source,
                });
            }
        }
        // `utilerrors.NewAggregate(errs)`.
        Ok(Aggregate::from_errors(errors)?)
    }

    /// `reconcileByAddressType`.
    fn reconcile_address_type(
        &self,
        service: &Service,
        pods: &[Arc<Pod>],
        existing: Vec<Arc<EndpointSlice>>,
        trigger_time: Option<jiff::Timestamp>,
        address_type: &str,
        node: &dyn Fn(&str) -> Option<Arc<Node>>,
    ) -> Result<(), Error> {
        let (desired, mut errors) = desired_endpoints(service, pods, address_type, node);
        let mut plan = self.plan(service, existing, desired, address_type);
        self.record_plan(service, &mut plan);
        if let Err(e) = self.finalize(service, plan, trigger_time) {
            errors.push(e);
        }
        // `utilerrors.NewAggregate(errs)`.
        Ok(Aggregate::from_errors(errors)?)
    }

    /// The observations `reconcileByAddressType` makes once it has planned.
    fn record_plan(&self, service: &Service, plan: &mut Plan) {
        let f = families();
        f.endpoints_added_per_sync.observe(&[], plan.added as f64);
        f.endpoints_removed_per_sync.observe(&[], plan.removed as f64);
        let key = object_key(&service.metadata);
        self.metrics.update_service_port_cache(&key, std::mem::take(&mut plan.efficiency));
        self.metrics.update_traffic_distribution(&key, traffic_distribution(service));
    }

    /// `DeleteService`: the Service leaves the metrics cache.
    pub fn delete_service(&self, namespace: &str, name: &str) {
        self.metrics.delete_service(&format!("{namespace}/{name}"));
    }

    /// What `reconcileByAddressType` decides, before `finalize` writes it: per set of ports,
    /// [`Self::reconcile_port_mapping`]; slices of port sets no longer wanted deleted; a
    /// placeholder when no slice would remain; deletions recycled into updates.
    pub fn plan(
        &self,
        service: &Service,
        existing: Vec<Arc<EndpointSlice>>,
        desired: BTreeMap<String, Desired>,
        address_type: &str,
    ) -> Plan {
        let existing_count = existing.len();
        let all_existing = existing.clone();
        let mut plan = Plan::default();
        let mut existing_by_ports: BTreeMap<String, Vec<Arc<EndpointSlice>>> = BTreeMap::new();
        for slice in existing {
            if owned_by(&slice, service) {
                existing_by_ports.entry(port_map_key(slice.ports.as_deref().unwrap_or(&[]))).or_default().push(slice);
            } else {
                plan.delete.push(slice);
            }
        }
        for (key, wanted) in desired {
            let slices = existing_by_ports.remove(&key).unwrap_or_default();
            let (endpoints, existing) = (wanted.endpoints.len(), slices.len());
            let mapped = self.reconcile_port_mapping(service, slices, wanted, address_type);
            let slices = existing + mapped.create.len() - mapped.delete.len();
            plan.efficiency.insert(key, Efficiency { endpoints, slices });
            plan.extend(mapped);
        }
        // Port sets no longer wanted.
        plan.delete.extend(existing_by_ports.into_values().flatten());
        if existing_count == plan.delete.len() && plan.create.is_empty() {
            let placeholder = new_endpoint_slice(service, Vec::new(), address_type, self.controller_name);
            plan.efficiency.insert(port_map_key(&[]), Efficiency { endpoints: 0, slices: 1 });
            if plan.delete.len() == 1 && same_placeholder(&plan.delete[0], &placeholder) {
                plan.delete.clear();
            } else {
                plan.create.push(placeholder);
            }
        }
        // `unchangedSlices`: neither updated nor deleted.
        let touched: BTreeSet<Option<String>> = plan
            .update
            .iter()
            .map(|s| s.metadata.name.clone())
            .chain(plan.delete.iter().map(|s| s.metadata.name.clone()))
            .collect();
        let unchanged: Vec<Arc<EndpointSlice>> =
            all_existing.into_iter().filter(|s| !touched.contains(&s.metadata.name)).collect();
        super::hints::reconcile_hints(service, &mut plan.create, &mut plan.update, &unchanged);
        recycle_deletions(service, &mut plan);
        plan
    }

    /// `reconcileByPortMapping`.
    pub fn reconcile_port_mapping(
        &self,
        service: &Service,
        existing: Vec<Arc<EndpointSlice>>,
        mut desired: Desired,
        address_type: &str,
    ) -> Plan {
        let max = self.max_endpoints_per_slice;
        let mut by_name: BTreeMap<String, EndpointSlice> = BTreeMap::new();
        let (mut unchanged, mut to_update, mut to_delete) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        let mut removed = 0;
        // 1. Keep the endpoints still wanted (in their desired version), drop the others.
        for slice in &existing {
            let name = slice.metadata.name.clone().unwrap_or_default();
            let mut kept = Vec::new();
            let mut endpoint_updated = false;
            for endpoint in slice.endpoints.iter().flatten() {
                if let Some(wanted) = desired.endpoints.remove(endpoint) {
                    endpoint_updated |= !endpoints_equal_beyond_hash(&wanted, endpoint);
                    kept.push(wanted);
                }
            }
            let (labels, labels_changed) = endpoint_slice_labels(slice, service, self.controller_name);
            if endpoint_updated || kept.len() != endpoint_count(slice) {
                removed += endpoint_count(slice).saturating_sub(kept.len());
                if kept.is_empty() {
                    to_delete.insert(name.clone());
                } else {
                    let mut copy = (**slice).clone();
                    copy.endpoints = Some(kept);
                    copy.metadata.labels = Some(labels);
                    to_update.insert(name.clone());
                    by_name.insert(name, copy);
                    continue;
                }
            } else if labels_changed {
                let mut copy = (**slice).clone();
                copy.metadata.labels = Some(labels);
                to_update.insert(name.clone());
                by_name.insert(name, copy);
                continue;
            } else {
                unchanged.insert(name.clone());
            }
            by_name.insert(name, (**slice).clone());
        }
        let added = desired.endpoints.len();
        // 2. Fill the slices updated anyway, fullest first.
        if !desired.endpoints.is_empty() && !to_update.is_empty() {
            let mut names: Vec<&String> = to_update.iter().collect();
            names.sort_by_key(|n| std::cmp::Reverse(by_name.get(*n).map_or(0, endpoint_count)));
            for name in names {
                let Some(slice) = by_name.get_mut(name) else { continue };
                while endpoint_count(slice) < max {
                    let Some(endpoint) = desired.endpoints.pop() else { break };
                    slice.endpoints.get_or_insert_default().push(endpoint);
                }
            }
        }
        // 3. The rest into the unchanged slice they fill best, else into new slices.
        let mut create = Vec::new();
        while !desired.endpoints.is_empty() {
            let mut target: Option<String> = None;
            if desired.endpoints.len() < max && !unchanged.is_empty() {
                let candidates: Vec<&EndpointSlice> = unchanged.iter().filter_map(|n| by_name.get(n)).collect();
                target = slice_to_fill(&candidates, desired.endpoints.len(), max)
                    .and_then(|i| candidates[i].metadata.name.clone());
            }
            let mut slice = match &target {
                Some(name) => by_name.remove(name).unwrap_or_default(),
                None => new_endpoint_slice(service, desired.ports.clone(), address_type, self.controller_name),
            };
            while endpoint_count(&slice) < max {
                let Some(endpoint) = desired.endpoints.pop() else { break };
                slice.endpoints.get_or_insert_default().push(endpoint);
            }
            match target {
                Some(name) => {
                    unchanged.remove(&name);
                    to_update.insert(name.clone());
                    by_name.insert(name, slice);
                }
                None => create.push(slice),
            }
        }
        let existing_by_name: BTreeMap<String, Arc<EndpointSlice>> =
            existing.into_iter().map(|s| (s.metadata.name.clone().unwrap_or_default(), s)).collect();
        Plan {
            create,
            update: to_update.iter().filter_map(|n| by_name.remove(n)).collect(),
            delete: to_delete.iter().filter_map(|n| existing_by_name.get(n).cloned()).collect(),
            added,
            removed,
            efficiency: PortCache::new(),
        }
    }

    /// `finalize`: creates (not for a Service being deleted), updates, then deletes, tracking
    /// each write.
    fn finalize(&self, service: &Service, plan: Plan, trigger_time: Option<jiff::Timestamp>) -> Result<(), Error> {
        let namespace = service.metadata.namespace.as_deref().unwrap_or("");
        let key = object_key(&service.metadata);
        let api = Api::<EndpointSlice>::namespaced(&self.client, namespace);
        let changed = plan.create.len() + plan.update.len() + plan.delete.len();
        let changes = &families().changes;
        if service.metadata.deletion_timestamp.is_none() {
            for mut slice in plan.create {
                set_trigger_time(&mut slice, trigger_time);
                match api.create(&slice, &PostParams::default()) {
                    Ok(created) => {
                        self.tracker.update(&created);
                        changes.inc(&["create"]);
                    }
                    // Creations in a terminating namespace keep failing: drop the item.
                    Err(e) if e.has_status_cause(util::NAMESPACE_TERMINATING) => return Ok(()),
                    Err(source) => return Err(Error::CreateSlice { service: key, source }),
                }
            }
        }
        for mut slice in plan.update {
            set_trigger_time(&mut slice, trigger_time);
            let name = slice.metadata.name.clone().unwrap_or_default();
            match api.replace(&name, &slice, &PostParams::default()) {
                Ok(updated) => {
                    self.tracker.update(&updated);
                    changes.inc(&["update"]);
                }
                Err(source) => return Err(Error::UpdateSlice { name, service: key, source }),
            }
        }
        for slice in plan.delete {
            if let Err(source) = self.delete_slice(service, &slice) {
                let name = slice.metadata.name.clone().unwrap_or_default();
                return Err(Error::DeleteSlice { name, service: key, source });
            }
        }
        // Our topology cache is off, so the topology label is always `Disabled`.
        let distribution = traffic_distribution(service).unwrap_or("");
        families().endpointslices_changed_per_sync.observe(&["Disabled", distribution], changed as f64);
        Ok(())
    }

    /// `deleteEndpointSlice`: a slice already gone is fine.
    fn delete_slice(&self, service: &Service, slice: &EndpointSlice) -> Result<(), client::Error> {
        let namespace = service.metadata.namespace.as_deref().unwrap_or("");
        let api = Api::<EndpointSlice>::namespaced(&self.client, namespace);
        match api.delete(slice.metadata.name.as_deref().unwrap_or(""), &DeleteParams::default()) {
            Ok(_) => {
                self.tracker.expect_deletion(slice);
                families().changes.inc(&["delete"]);
                Ok(())
            }
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// The endpoints a Service wants of one address type, by port set, and the errors of pods
/// whose Node is missing (they are left out, unless the Service publishes not-ready addresses).
pub fn desired_endpoints(
    service: &Service,
    pods: &[Arc<Pod>],
    address_type: &str,
    node: &dyn Fn(&str) -> Option<Arc<Node>>,
) -> (BTreeMap<String, Desired>, Vec<Error>) {
    let mut desired: BTreeMap<String, Desired> = BTreeMap::new();
    let mut errors = Vec::new();
    let key = object_key(&service.metadata);
    for pod in pods {
        if !util::should_pod_be_in_endpoints(pod, true) {
            continue;
        }
        let ports = endpoint_ports(service, pod);
        let entry = desired.entry(port_map_key(&ports)).or_insert_with(|| Desired { ports, ..Desired::default() });
        let node_name = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
        let found = node(&node_name);
        if found.is_none() && !util::publish_not_ready(service) {
            let name = pod.metadata.name.as_deref().unwrap_or("");
            log::info!("skipping Pod {name} for Service {key}, Node {node_name} not found");
            errors.push(Error::NodeNotFound { pod: name.to_string(), service: key.clone(), node: node_name });
            continue;
        }
        let endpoint = pod_to_endpoint(pod, found.as_deref(), service, address_type);
        if !endpoint.addresses.is_empty() {
            entry.endpoints.insert(endpoint);
        }
    }
    (desired, errors)
}

/// `placeholderSliceCompare`: the same namespace, labels, owners, address type, and neither
/// endpoints nor ports.
fn same_placeholder(existing: &EndpointSlice, placeholder: &EndpointSlice) -> bool {
    let labels = |s: &EndpointSlice| s.metadata.labels.clone().unwrap_or_default();
    let owners = |s: &EndpointSlice| s.metadata.owner_references.clone().unwrap_or_default();
    existing.metadata.namespace == placeholder.metadata.namespace
        && labels(existing) == labels(placeholder)
        && owners(existing) == owners(placeholder)
        && existing.address_type == placeholder.address_type
        && existing.endpoints.as_ref().is_none_or(Vec::is_empty)
        && existing.ports.as_ref().is_none_or(Vec::is_empty)
        && placeholder.ports.as_ref().is_none_or(Vec::is_empty)
}

/// The first half of `finalize`: a slice to delete that the Service owns becomes the update of
/// a slice to create of the same address type, keeping its name.
fn recycle_deletions(service: &Service, plan: &mut Plan) {
    let mut index = 0;
    while index < plan.delete.len() && !plan.create.is_empty() {
        let doomed = &plan.delete[index];
        let last = plan.create.len() - 1;
        if doomed.address_type == plan.create[last].address_type && owned_by(doomed, service) {
            let mut slice = plan.create.remove(last);
            slice.metadata.name = doomed.metadata.name.clone();
            slice.metadata.resource_version = doomed.metadata.resource_version.clone();
            plan.update.push(slice);
            plan.delete.remove(index);
        } else {
            index += 1;
        }
    }
}

#[cfg(test)]
mod tests;
