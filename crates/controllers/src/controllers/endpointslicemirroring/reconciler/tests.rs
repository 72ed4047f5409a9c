use std::sync::Arc;

use k8s_openapi::api::core::v1::Endpoints;
use serde_json::{Value, json};

use super::*;

fn endpoints(subsets: Value) -> Endpoints {
    serde_json::from_value(json!({
        "metadata": {"name": "db", "namespace": "ns", "uid": "ep-uid",
            "labels": {"team": "a"},
            "annotations": {"note": "x", ANNOTATION_TRIGGER_TIME: "2025-01-01T00:00:00Z", ANNOTATION_LAST_APPLIED: "{}"}},
        "subsets": subsets
    }))
    .expect("endpoints")
}

fn addresses(slice: &EndpointSlice) -> Vec<(String, Option<bool>)> {
    (slice.endpoints.iter().flatten())
        .map(|e| (e.addresses.join(","), e.conditions.as_ref().and_then(|c| c.ready)))
        .collect()
}

#[test]
fn subsets_become_slices_per_address_type() {
    let ep = endpoints(json!([
        {"addresses": [{"ip": "10.0.0.2"}, {"ip": "fd00::1"}], "notReadyAddresses": [{"ip": "010.0.0.3"}],
         "ports": [{"name": "sql", "port": 5432, "protocol": "TCP"}]},
        {"addresses": [{"ip": "not-an-ip"}], "ports": [{"name": "sql", "port": 5432, "protocol": "TCP"}]}
    ]));
    let (desired, skipped) = desired_state(&ep, 1000);
    assert_eq!(skipped, Skipped { invalid: 1, total: 1 });
    let plan = plan(&ep, Vec::new(), desired, 1000);
    assert_eq!(plan.create.len(), 2);
    let v4 = plan.create.iter().find(|s| s.address_type == "IPv4").expect("an IPv4 slice");
    assert_eq!(addresses(v4), [("10.0.0.2".to_string(), Some(true)), ("10.0.0.3".to_string(), Some(false))]);
    let v6 = plan.create.iter().find(|s| s.address_type == "IPv6").expect("an IPv6 slice");
    assert_eq!(addresses(v6), [("fd00::1".to_string(), Some(true))]);
    let meta = &v4.metadata;
    assert_eq!(meta.generate_name.as_deref(), Some("db-"));
    let labels = meta.labels.clone().unwrap();
    assert_eq!(labels.get(LABEL_MANAGED_BY).map(String::as_str), Some(CONTROLLER_NAME));
    assert_eq!(labels.get(LABEL_SERVICE_NAME).map(String::as_str), Some("db"));
    assert_eq!(labels.get("team").map(String::as_str), Some("a"));
    let annotations = meta.annotations.clone().unwrap();
    assert_eq!(annotations.keys().collect::<Vec<_>>(), ["note"], "trigger time and last-applied are not mirrored");
    let owner = &meta.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("Endpoints", "ep-uid"));
    let port = &v4.ports.as_ref().unwrap()[0];
    assert_eq!((port.name.as_deref(), port.port), (Some("sql"), Some(5432)));
}

#[test]
fn at_most_max_per_subset_are_mirrored() {
    let list: Vec<Value> = (0..12).map(|i| json!({"ip": format!("10.0.1.{i}")})).collect();
    let ep = endpoints(json!([{"addresses": list, "ports": [{"port": 80, "protocol": "TCP"}]}]));
    let (desired, skipped) = desired_state(&ep, 10);
    assert_eq!(skipped, Skipped { invalid: 0, total: 2 });
    let plan = plan(&ep, Vec::new(), desired, 10);
    assert_eq!(plan.create.len(), 1);
    assert_eq!(endpoint_count(&plan.create[0]), 10);
}

fn mirrored(ep: &Endpoints, name: &str) -> Arc<EndpointSlice> {
    let (desired, _) = desired_state(ep, 1000);
    let mut created = plan(ep, Vec::new(), desired, 1000).create.remove(0);
    created.metadata.name = Some(name.into());
    created.metadata.generate_name = None;
    created.metadata.resource_version = Some("3".into());
    Arc::new(created)
}

#[test]
fn a_matching_slice_is_left_alone_and_a_changed_one_rewritten_in_place() {
    let subsets = json!([{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80, "protocol": "TCP"}]}]);
    let ep = endpoints(subsets.clone());
    let existing = mirrored(&ep, "db-abc");
    let (desired, _) = desired_state(&ep, 1000);
    assert_eq!(plan(&ep, vec![existing.clone()], desired, 1000), Plan::default());
    // A label change on the Endpoints rewrites the slice.
    let mut relabelled = ep.clone();
    relabelled.metadata.labels = Some([("team".to_string(), "b".to_string())].into());
    let (desired, _) = desired_state(&relabelled, 1000);
    let changed = plan(&relabelled, vec![existing.clone()], desired, 1000);
    assert_eq!(changed.update.len(), 1);
    assert_eq!(changed.update[0].metadata.name.as_deref(), Some("db-abc"));
    // New addresses too; a duplicate slice of the same key goes.
    let more = endpoints(
        json!([{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.9"}], "ports": [{"port": 80, "protocol": "TCP"}]}]),
    );
    let (desired, _) = desired_state(&more, 1000);
    let changed = plan(&more, vec![existing.clone(), mirrored(&ep, "db-dup")], desired, 1000);
    assert_eq!(changed.update.iter().map(endpoint_count).collect::<Vec<_>>(), [2]);
    assert_eq!(changed.delete.iter().map(|s| s.metadata.name.clone().unwrap()).collect::<Vec<_>>(), ["db-dup"]);
    // Other ports: the old slice is recycled for the new key instead of deleted and created.
    let ported = endpoints(json!([{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 81, "protocol": "TCP"}]}]));
    let (desired, _) = desired_state(&ported, 1000);
    let changed = plan(&ported, vec![existing], desired, 1000);
    assert!(changed.create.is_empty() && changed.delete.is_empty());
    assert_eq!(changed.update[0].metadata.name.as_deref(), Some("db-abc"));
    assert_eq!(changed.update[0].ports.as_ref().unwrap()[0].port, Some(81));
    // No addresses left: the slices go.
    let empty = endpoints(json!([]));
    let (desired, _) = desired_state(&empty, 1000);
    let gone = plan(&empty, vec![mirrored(&ep, "db-abc")], desired, 1000);
    assert_eq!(gone.delete.len(), 1);
}

#[test]
fn skip_mirror_and_leader_locks_are_not_mirrored() {
    let mut ep = endpoints(json!([]));
    assert!(crate::controllers::endpointslicemirroring::should_mirror(&ep));
    ep.metadata.labels = Some([(util::LABEL_SKIP_MIRROR.to_string(), "true".to_string())].into());
    assert!(!crate::controllers::endpointslicemirroring::should_mirror(&ep));
    ep.metadata.labels = None;
    ep.metadata.annotations = Some([(util::ANNOTATION_LEADER.to_string(), "{}".to_string())].into());
    assert!(!crate::controllers::endpointslicemirroring::should_mirror(&ep));
}

use crate::controllers::testutil::conflict;

/// A conflicting slice update reaches the queue as a conflict (it was a plain failure).
#[test]
fn a_conflicting_update_reaches_the_queue_as_a_conflict() {
    use crate::runtime::controller::SyncError;
    let error = Error::UpdateSlice { name: "db-x".into(), endpoints: "ns/db".into(), source: conflict() };
    let text = "failed to update db-x EndpointSlice for Endpoints ns/db: the object has been modified";
    assert_eq!(SyncError::from(error), SyncError::Conflict(text.into()));
}
