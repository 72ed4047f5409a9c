use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, Service};
use k8s_openapi::api::discovery::v1::{
    Endpoint, EndpointConditions, EndpointHints, EndpointPort, EndpointSlice, ForZone,
};
use serde_json::json;

use super::*;
use crate::client::{Client, ClientOptions};

fn service() -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "svc-uid", "labels": {"team": "a"}},
        "spec": {"selector": {"app": "web"}, "clusterIP": "10.96.0.10", "ipFamilies": ["IPv4"]}
    }))
    .expect("a service")
}

fn reconciler(max: usize) -> SliceReconciler {
    // Planning never calls the API; the client only has to exist.
    let config = crate::client::config::load(None, Some("https://127.0.0.1:1")).expect("a config");
    SliceReconciler {
        client: Client::new(config, ClientOptions::default()).expect("a client"),
        max_endpoints_per_slice: max,
        tracker: Arc::new(EndpointSliceTracker::default()),
        controller_name: "endpointslice-controller.k8s.io",
        metrics: super::super::metrics::Cache::new(max),
    }
}

fn ports() -> Vec<EndpointPort> {
    vec![EndpointPort { name: Some("http".into()), port: Some(8080), protocol: Some("TCP".into()), app_protocol: None }]
}

fn endpoint(i: usize, ready: bool) -> Endpoint {
    Endpoint {
        addresses: vec![format!("10.0.{}.{}", i / 250, i % 250)],
        conditions: Some(EndpointConditions { ready: Some(ready), serving: Some(ready), terminating: Some(false) }),
        target_ref: Some(ObjectReference {
            kind: Some("Pod".into()),
            namespace: Some("ns".into()),
            name: Some(format!("pod-{i}")),
            ..ObjectReference::default()
        }),
        node_name: Some("node-a".into()),
        ..Endpoint::default()
    }
}

fn desired(range: impl IntoIterator<Item = usize>) -> BTreeMap<String, Desired> {
    let mut wanted = Desired { ports: ports(), ..Desired::default() };
    for i in range {
        wanted.endpoints.insert(endpoint(i, true));
    }
    [(port_map_key(&ports()), wanted)].into()
}

fn existing(name: &str, range: std::ops::Range<usize>) -> Arc<EndpointSlice> {
    let r = reconciler(100);
    let mut slice = new_endpoint_slice(&service(), ports(), "IPv4", r.controller_name);
    slice.metadata.name = Some(name.into());
    slice.metadata.resource_version = Some("5".into());
    slice.endpoints = Some(range.map(|i| endpoint(i, true)).collect());
    Arc::new(slice)
}

fn sizes(slices: &[EndpointSlice]) -> Vec<(String, usize)> {
    slices.iter().map(|s| (s.metadata.name.clone().unwrap_or_default(), endpoint_count(s))).collect()
}

fn names(slices: &[Arc<EndpointSlice>]) -> Vec<String> {
    slices.iter().map(|s| s.metadata.name.clone().unwrap_or_default()).collect()
}

#[test]
fn new_endpoints_are_packed_into_full_slices() {
    let plan = reconciler(100).plan(&service(), Vec::new(), desired(0..250), "IPv4");
    assert_eq!(sizes(&plan.create), [(String::new(), 100), (String::new(), 100), (String::new(), 50)]);
    assert!(plan.update.is_empty() && plan.delete.is_empty());
    let slice = &plan.create[0];
    assert_eq!(slice.metadata.generate_name.as_deref(), Some("web-"));
    let labels = slice.metadata.labels.clone().unwrap();
    assert_eq!(labels.get("kubernetes.io/service-name").map(String::as_str), Some("web"));
    assert_eq!(
        labels.get("endpointslice.kubernetes.io/managed-by").map(String::as_str),
        Some("endpointslice-controller.k8s.io")
    );
    assert_eq!(labels.get("team").map(String::as_str), Some("a"));
    let owner = &slice.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.uid.as_str(), owner.controller), ("Service", "svc-uid", Some(true)));
}

#[test]
fn slices_being_updated_are_filled_before_new_ones() {
    // "full" keeps all of its endpoints; "partial" loses ten, so it is updated and takes the
    // twenty new endpoints.
    let current = vec![existing("full", 0..100), existing("partial", 100..140)];
    let plan = reconciler(100).plan(&service(), current, desired((0..100).chain(110..160)), "IPv4");
    assert!(plan.create.is_empty(), "{:?}", sizes(&plan.create));
    assert_eq!(sizes(&plan.update), [("partial".to_string(), 50)]);
    assert!(plan.delete.is_empty());
}

#[test]
fn leftovers_go_into_the_unchanged_slice_they_fill_best() {
    let current = vec![existing("roomy", 0..10), existing("snug", 100..190)];
    let plan = reconciler(100).plan(&service(), current, desired((0..10).chain(100..195)), "IPv4");
    assert!(plan.create.is_empty());
    assert_eq!(sizes(&plan.update), [("snug".to_string(), 95)]);
    // Too many leftovers for any slice: a new one.
    let current = vec![existing("snug", 100..190)];
    let plan = reconciler(100).plan(&service(), current, desired((100..190).chain(300..320)), "IPv4");
    assert_eq!(sizes(&plan.create), [(String::new(), 20)]);
    assert!(plan.update.is_empty());
}

#[test]
fn changed_conditions_and_labels_update_in_place() {
    let mut wanted = desired(0..3);
    let set = &mut wanted.values_mut().next().unwrap().endpoints;
    set.insert(endpoint(1, false));
    let plan = reconciler(100).plan(&service(), vec![existing("a", 0..3)], wanted, "IPv4");
    assert_eq!(sizes(&plan.update), [("a".to_string(), 3)]);
    let mut relabelled = service();
    relabelled.metadata.labels = Some([("team".to_string(), "b".to_string())].into());
    let plan = reconciler(100).plan(&relabelled, vec![existing("a", 0..3)], desired(0..3), "IPv4");
    let labels = plan.update[0].metadata.labels.clone().unwrap();
    assert_eq!(labels.get("team").map(String::as_str), Some("b"));
    let plan = reconciler(100).plan(&service(), vec![existing("a", 0..3)], desired(0..3), "IPv4");
    assert!(plan.create.is_empty() && plan.update.is_empty() && plan.delete.is_empty(), "nothing to do");
}

#[test]
fn a_service_without_endpoints_keeps_one_placeholder() {
    let plan = reconciler(100).plan(&service(), Vec::new(), BTreeMap::new(), "IPv4");
    assert_eq!(sizes(&plan.create), [(String::new(), 0)]);
    assert_eq!(plan.create[0].ports.as_deref(), Some(&[][..]));
    let mut placeholder = plan.create[0].clone();
    placeholder.metadata.name = Some("web-abcde".into());
    let plan = reconciler(100).plan(&service(), vec![Arc::new(placeholder)], BTreeMap::new(), "IPv4");
    assert!(plan.create.is_empty() && plan.update.is_empty() && plan.delete.is_empty(), "the placeholder stays");
    // Emptied slices are recycled into the placeholder rather than deleted and created.
    let plan = reconciler(100).plan(&service(), vec![existing("old", 0..5)], BTreeMap::new(), "IPv4");
    assert!(plan.create.is_empty() && plan.delete.is_empty());
    assert_eq!(sizes(&plan.update), [("old".to_string(), 0)]);
    assert_eq!(plan.update[0].ports.as_deref(), Some(&[][..]));
}

#[test]
fn foreign_slices_are_deleted_and_deletions_recycled() {
    let mut foreign = (*existing("foreign", 0..5)).clone();
    foreign.metadata.owner_references.as_mut().unwrap()[0].uid = "old-service".into();
    let plan = reconciler(100).plan(&service(), vec![Arc::new(foreign)], desired(0..5), "IPv4");
    assert_eq!(sizes(&plan.create), [(String::new(), 5)], "a foreign slice is not reused");
    assert_eq!(names(&plan.delete), ["foreign"]);
    // A slice whose endpoints all went away is reused for the new ones.
    let plan = reconciler(100).plan(&service(), vec![existing("gone", 0..5)], desired(10..12), "IPv4");
    assert!(plan.create.is_empty() && plan.delete.is_empty());
    assert_eq!(sizes(&plan.update), [("gone".to_string(), 2)]);
}

fn zoned(mut slice: EndpointSlice) -> EndpointSlice {
    for endpoint in slice.endpoints.iter_mut().flatten() {
        endpoint.zone = Some("zone-a".into());
    }
    slice
}

#[test]
fn prefer_close_services_get_zone_hints_and_others_none() {
    let mut close = service();
    close.spec.as_mut().unwrap().traffic_distribution = Some("PreferClose".into());
    let mut wanted = desired(0..2);
    let set = &mut wanted.values_mut().next().unwrap().endpoints;
    let mut unready = endpoint(1, false);
    unready.zone = Some("zone-a".into());
    set.insert(unready);
    let mut zoned_ready = endpoint(0, true);
    zoned_ready.zone = Some("zone-a".into());
    set.insert(zoned_ready);
    let plan = reconciler(100).plan(&close, Vec::new(), wanted, "IPv4");
    let hints: Vec<Option<String>> = (plan.create[0].endpoints.iter().flatten())
        .map(|e| e.hints.as_ref().and_then(|h| h.for_zones.as_ref()).map(|z| z[0].name.clone()))
        .collect();
    assert_eq!(hints, [Some("zone-a".to_string()), None], "ready endpoints with a zone only");

    // An unchanged slice without hints is updated to get them; with them it is left alone.
    let current = Arc::new(zoned((*existing("a", 0..2)).clone()));
    let mut wanted = BTreeMap::new();
    let mut set = Desired { ports: ports(), ..Desired::default() };
    current.endpoints.iter().flatten().for_each(|e| set.endpoints.insert(e.clone()));
    wanted.insert(port_map_key(&ports()), set);
    let plan = reconciler(100).plan(&close, vec![current.clone()], wanted, "IPv4");
    assert_eq!(sizes(&plan.update), [("a".to_string(), 2)]);
    assert!(plan.update[0].endpoints.iter().flatten().all(|e| e.hints.is_some()));
    let hinted = Arc::new(plan.update[0].clone());
    let mut wanted = BTreeMap::new();
    let mut set = Desired { ports: ports(), ..Desired::default() };
    current.endpoints.iter().flatten().for_each(|e| set.endpoints.insert(e.clone()));
    wanted.insert(port_map_key(&ports()), set);
    let plan = reconciler(100).plan(&close, vec![hinted.clone()], wanted, "IPv4");
    assert!(plan.update.is_empty() && plan.create.is_empty());

    // Without a traffic distribution, slices written anyway lose their hints.
    let mut wanted = BTreeMap::new();
    let mut set = Desired { ports: ports(), ..Desired::default() };
    current.endpoints.iter().flatten().take(1).for_each(|e| set.endpoints.insert(e.clone()));
    wanted.insert(port_map_key(&ports()), set);
    let plan = reconciler(100).plan(&service(), vec![hinted], wanted, "IPv4");
    assert_eq!(sizes(&plan.update), [("a".to_string(), 1)]);
    assert!(plan.update[0].endpoints.as_ref().unwrap()[0].hints.is_none());
}

/// The (zone, node) hints of each endpoint of the first slice created for `distribution`,
/// the endpoints ready with a zone and node, ready with a node only, and unready.
fn hints_for(distribution: &str) -> Vec<(Option<String>, Option<String>)> {
    let mut service = service();
    service.spec.as_mut().unwrap().traffic_distribution = Some(distribution.into());
    let mut wanted = desired(0..0);
    let set = &mut wanted.values_mut().next().unwrap().endpoints;
    let mut zoned_ready = endpoint(0, true);
    zoned_ready.zone = Some("zone-a".into());
    set.insert(zoned_ready);
    set.insert(endpoint(1, true));
    let mut unready = endpoint(2, false);
    unready.zone = Some("zone-a".into());
    set.insert(unready);
    let plan = reconciler(100).plan(&service, Vec::new(), wanted, "IPv4");
    let first = |names: Option<Vec<String>>| names.and_then(|n| n.into_iter().next());
    (plan.create[0].endpoints.iter().flatten())
        .map(|e| {
            let hints = e.hints.as_ref();
            let zones = hints.and_then(|h| h.for_zones.as_ref()).map(|z| z.iter().map(|z| z.name.clone()).collect());
            let nodes = hints.and_then(|h| h.for_nodes.as_ref()).map(|n| n.iter().map(|n| n.name.clone()).collect());
            (first(zones), first(nodes))
        })
        .collect()
}

#[test]
fn prefer_same_zone_is_prefer_close_and_prefer_same_node_adds_node_hints() {
    let zone = Some("zone-a".to_string());
    let node = Some("node-a".to_string());
    let close = [(zone.clone(), None), (None, None), (None, None)];
    assert_eq!(hints_for("PreferClose"), close);
    assert_eq!(hints_for("PreferSameZone"), close, "v1.36: as PreferClose");
    assert_eq!(
        hints_for("PreferSameNode"),
        [(zone, node.clone()), (None, node), (None, None)],
        "every ready endpoint with a node gets its node"
    );
    assert_eq!(hints_for("Unknown"), [(None, None), (None, None), (None, None)]);

    // An unchanged slice whose zone hints are right but lacks its node hints is updated.
    let mut same_node = service();
    same_node.spec.as_mut().unwrap().traffic_distribution = Some("PreferSameNode".into());
    let mut current = zoned((*existing("a", 0..2)).clone());
    for endpoint in current.endpoints.iter_mut().flatten() {
        endpoint.hints =
            Some(EndpointHints { for_zones: Some(vec![ForZone { name: "zone-a".into() }]), for_nodes: None });
    }
    let current = Arc::new(current);
    let wanted = || {
        let mut set = Desired { ports: ports(), ..Desired::default() };
        current.endpoints.iter().flatten().for_each(|e| set.endpoints.insert(e.clone()));
        BTreeMap::from([(port_map_key(&ports()), set)])
    };
    let plan = reconciler(100).plan(&same_node, vec![current.clone()], wanted(), "IPv4");
    assert_eq!(sizes(&plan.update), [("a".to_string(), 2)]);
    let hinted = plan.update[0]
        .endpoints
        .iter()
        .flatten()
        .all(|e| e.hints.as_ref().and_then(|h| h.for_nodes.as_ref()).is_some_and(|n| n[0].name == "node-a"));
    assert!(hinted);
    // The same slice under PreferSameZone is left alone; a stale node hint is removed.
    let mut same_zone = same_node.clone();
    same_zone.spec.as_mut().unwrap().traffic_distribution = Some("PreferSameZone".into());
    assert!(reconciler(100).plan(&same_zone, vec![current.clone()], wanted(), "IPv4").update.is_empty());
    let node_hinted = Arc::new(plan.update[0].clone());
    let plan = reconciler(100).plan(&same_zone, vec![node_hinted], wanted(), "IPv4");
    assert_eq!(sizes(&plan.update), [("a".to_string(), 2)]);
    assert!(plan.update[0].endpoints.iter().flatten().all(|e| e.hints.as_ref().unwrap().for_nodes.is_none()));
}

#[test]
fn plan_counts_added_and_removed_endpoints_and_slices_per_port_set() {
    // 0..80 exist in one slice and 50..150 are wanted: 50 removed, 70 added.
    let plan = reconciler(100).plan(&service(), vec![existing("a", 0..80)], desired(50..150), "IPv4");
    assert_eq!((plan.added, plan.removed), (70, 50));
    let efficiency = plan.efficiency[&port_map_key(&ports())];
    assert_eq!((efficiency.endpoints, efficiency.slices), (100, 1 + plan.create.len()));
    // No endpoints at all: the placeholder counts as one slice of no endpoints.
    let plan = reconciler(100).plan(&service(), Vec::new(), BTreeMap::new(), "IPv4");
    let placeholder = plan.efficiency[&port_map_key(&[])];
    assert_eq!((placeholder.endpoints, placeholder.slices), (0, 1));
}

use crate::controllers::testutil::conflict;

/// A conflicting slice update, inside the aggregate of a Service's address types, reaches the
/// queue as a conflict (it was a plain failure), the text as upstream's aggregate reads.
#[test]
fn a_conflict_inside_the_aggregate_reaches_the_queue_as_one() {
    use crate::runtime::controller::SyncError;
    let update = Error::UpdateSlice { name: "web-abc".into(), service: "ns/web".into(), source: conflict() };
    let missing = Error::NodeNotFound { pod: "p".into(), service: "ns/web".into(), node: "n".into() };
    let inner = Aggregate::from_errors([missing, update]).map_err(Error::from).unwrap_err();
    let outer = Aggregate::from_errors([inner]).map_err(Error::from).unwrap_err();
    let text = "[skipping Pod p for Service ns/web: Node n Not Found, \
                failed to update web-abc EndpointSlice for Service ns/web: the object has been modified]";
    assert_eq!(SyncError::from(outer), SyncError::Conflict(text.into()));
}
