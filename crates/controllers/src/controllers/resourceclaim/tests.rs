//! The decisions of the controller, without a server: which pods need work, which reservations
//! stay, what a claim's release writes and which generated claims go.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimConsumerReference};
use serde_json::{Value, json};

use super::claim::{PodSeen, Release, generated_claim_unused, keep_pod_reservation, owning_pod, release};
use super::*;

fn pod(value: Value) -> Pod {
    let mut pod: Pod = serde_json::from_value(value).expect("a pod");
    pod.metadata.name.get_or_insert_with(|| "web".into());
    pod.metadata.namespace.get_or_insert_with(|| "team".into());
    pod.metadata.uid.get_or_insert_with(|| "p1".into());
    pod
}

fn claim(value: Value) -> ResourceClaim {
    let mut claim: ResourceClaim = serde_json::from_value(value).expect("a claim");
    claim.metadata.namespace.get_or_insert_with(|| "team".into());
    claim
}

/// A template claim `gpu` of pod `web`, its status naming `web-gpu-1` when `created`.
fn templated_pod(created: bool, node: Option<&str>) -> Pod {
    let status = if created {
        json!({"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "web-gpu-1"}]})
    } else {
        json!({})
    };
    pod(json!({
        "spec": {"containers": [], "nodeName": node, "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
        "status": status,
    }))
}

/// The claim `web-gpu-1`, controlled by pod `p1` unless `owner` says otherwise.
fn generated(owner: &str, status: Value) -> ResourceClaim {
    claim(json!({
        "metadata": {"name": "web-gpu-1", "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": owner, "controller": true}]},
        "spec": {},
        "status": status,
    }))
}

fn needs_work(pod: &Pod, claims: &[ResourceClaim]) -> bool {
    let by_name: HashMap<String, Arc<ResourceClaim>> =
        claims.iter().map(|c| (c.metadata.name.clone().unwrap_or_default(), Arc::new(c.clone()))).collect();
    pod_needs_work(pod, false, |name| by_name.get(name).cloned()).0
}

fn reservation(uid: &str) -> ResourceClaimConsumerReference {
    ResourceClaimConsumerReference { api_group: None, resource: "pods".into(), name: "web".into(), uid: uid.into() }
}

const ALLOCATED: &str = "allocation";

/// A `deletionTimestamp`.
fn deletion() -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time> {
    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH))
}

fn allocated_reserved_for(uids: &[&str]) -> Value {
    let reserved: Vec<Value> = uids.iter().map(|u| json!({"resource": "pods", "name": "web", "uid": u})).collect();
    json!({ALLOCATED: {"devices": {}}, "reservedFor": reserved})
}

#[test]
fn a_pod_without_its_template_claim_needs_work_until_it_is_deleted() {
    assert!(needs_work(&templated_pod(false, None), &[]), "no status entry yet");
    assert!(needs_work(&templated_pod(true, None), &[]), "the named claim is missing: created again");
    let mut deleted = templated_pod(false, None);
    deleted.metadata.deletion_timestamp = deletion();
    assert!(!needs_work(&deleted, &[]));
}

#[test]
fn a_pod_whose_claims_exist_needs_no_work_before_it_is_scheduled() {
    let allocated = generated("p1", json!({ALLOCATED: {"devices": {}}}));
    assert!(!needs_work(&templated_pod(true, None), &[allocated]));
    // A claim not controlled by the pod is not the pod's to fix.
    let foreign = generated("other", json!({ALLOCATED: {"devices": {}}}));
    assert!(!needs_work(&templated_pod(true, Some("node-a")), &[foreign]));
}

#[test]
fn a_scheduled_pod_needs_work_while_an_allocated_claim_is_not_reserved_for_it() {
    let scheduled = templated_pod(true, Some("node-a"));
    assert!(needs_work(&scheduled, &[generated("p1", json!({ALLOCATED: {"devices": {}}}))]));
    assert!(!needs_work(&scheduled, &[generated("p1", allocated_reserved_for(&["p1"]))]));
    assert!(!needs_work(&scheduled, &[generated("p1", json!({}))]), "not allocated: the scheduler's job");
}

#[test]
fn named_and_skipped_claims_need_no_work_from_the_controller() {
    let named =
        pod(json!({"spec": {"containers": [], "resourceClaims": [{"name": "gpu", "resourceClaimName": "shared"}]}}));
    assert!(!needs_work(&named, &[]), "a missing claim the user must create");
    let skipped = pod(json!({
        "spec": {"containers": [], "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
        "status": {"resourceClaimStatuses": [{"name": "gpu"}]}}));
    assert!(!needs_work(&skipped, &[]));
    let unknown = pod(json!({"spec": {"containers": [], "resourceClaims": [{"name": "gpu"}]}}));
    assert!(needs_work(&unknown, &[]), "an entry this code does not know is worked on (and fails)");
}

#[test]
fn claims_are_released_when_the_pod_is_removed_terminal_or_deleted_unscheduled() {
    let running = templated_pod(true, Some("node-a"));
    assert_eq!(pod_needs_claims(&running, false), (true, "pod might run"));
    assert_eq!(pod_needs_claims(&running, true), (false, "pod got removed"));
    let mut done = running.clone();
    done.status.as_mut().unwrap().phase = Some("Succeeded".into());
    assert_eq!(pod_needs_claims(&done, false), (false, "pod has terminated"));
    let mut deleted = templated_pod(true, None);
    deleted.metadata.deletion_timestamp = deletion();
    assert_eq!(pod_needs_claims(&deleted, false), (false, "pod got deleted before scheduling"));
    let mut stopping = running;
    stopping.metadata.deletion_timestamp = deletion();
    assert_eq!(pod_needs_claims(&stopping, false), (true, "pod might run"), "a scheduled pod may still run");
    assert!(!is_pod_done(&stopping) && is_pod_done(&deleted) && is_pod_done(&done));
}

#[test]
fn pods_are_indexed_by_their_claims_and_templates() {
    let pod = pod(json!({
        "spec": {"containers": [], "resourceClaims": [
            {"name": "a", "resourceClaimTemplateName": "t"},
            {"name": "b", "resourceClaimName": "shared"},
            {"name": "c", "resourceClaimTemplateName": "t"},
            {"name": "d", "resourceClaimTemplateName": "u"}]},
        "status": {"resourceClaimStatuses": [{"name": "a", "resourceClaimName": "web-a-1"}, {"name": "c"}]}}));
    assert_eq!(pod_resource_claim_index(&pod), ["team/shared", "team/web-a-1"]);
    assert_eq!(pod_resource_claim_template_index(&pod), ["team/t", "team/u"]);
}

#[test]
fn claims_are_indexed_by_the_pod_that_controls_them() {
    assert_eq!(claim_pod_owner_index(&generated("p1", json!({}))), ["p1"]);
    let not_controller = claim(json!({"metadata": {"ownerReferences": [
        {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "p1"}]}, "spec": {}}));
    assert!(claim_pod_owner_index(&not_controller).is_empty());
    let not_a_pod = claim(json!({"metadata": {"ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "Pod", "name": "web", "uid": "p1", "controller": true}]}, "spec": {}}));
    assert!(claim_pod_owner_index(&not_a_pod).is_empty());
}

#[test]
fn a_reservation_stays_only_for_the_same_pod_while_it_may_run() {
    let reserved = reservation("p1");
    let running = templated_pod(true, Some("node-a"));
    assert!(keep_pod_reservation(&reserved, PodSeen::Cached(&running)));
    assert!(!keep_pod_reservation(&reserved, PodSeen::Deleted));
    assert!(!keep_pod_reservation(&reserved, PodSeen::Missing));
    let mut replaced = running.clone();
    replaced.metadata.uid = Some("p2".into());
    assert!(!keep_pod_reservation(&reserved, PodSeen::Cached(&replaced)));
    assert!(!keep_pod_reservation(&reserved, PodSeen::Live(&replaced)));
    let mut done = running;
    done.status.as_mut().unwrap().phase = Some("Failed".into());
    assert!(!keep_pod_reservation(&reserved, PodSeen::Cached(&done)));
    // As upstream, a pod read from the API server is only checked for its UID.
    assert!(keep_pod_reservation(&reserved, PodSeen::Live(&done)));
}

#[test]
fn dropping_the_last_reservation_deallocates_a_protected_claim() {
    let mut protected = generated("p1", allocated_reserved_for(&["p1"]));
    protected.metadata.finalizers = Some(vec![resourceclaimutil::FINALIZER.into()]);
    let Release::Unreserve(updated) = release(&protected, Vec::new()) else { panic!("an update") };
    let status = updated.status.expect("a status");
    assert_eq!((status.allocation, status.reserved_for), (None, None));
    assert_eq!(updated.metadata.finalizers, protected.metadata.finalizers, "the finalizer goes by a second update");
    // Without the finalizer the allocation stays.
    let unprotected = generated("p1", allocated_reserved_for(&["p1"]));
    let Release::Unreserve(updated) = release(&unprotected, Vec::new()) else { panic!("an update") };
    assert!(updated.status.expect("a status").allocation.is_some());
}

#[test]
fn a_claim_still_reserved_keeps_its_allocation() {
    let mut shared = generated("p1", allocated_reserved_for(&["p1", "p2"]));
    shared.metadata.finalizers = Some(vec![resourceclaimutil::FINALIZER.into()]);
    let Release::Unreserve(updated) = release(&shared, vec![reservation("p2")]) else { panic!("an update") };
    let status = updated.status.expect("a status");
    assert!(status.allocation.is_some());
    assert_eq!(status.reserved_for, Some(vec![reservation("p2")]));
    assert_eq!(release(&shared, vec![reservation("p1"), reservation("p2")]), Release::Nothing);
}

#[test]
fn a_deleted_unused_claim_is_deallocated_and_loses_its_finalizer() {
    let mut deleted = generated("p1", json!({ALLOCATED: {"devices": {}}}));
    deleted.metadata.finalizers = Some(vec!["example.com/other".into(), resourceclaimutil::FINALIZER.into()]);
    deleted.metadata.deletion_timestamp = deletion();
    let Release::Unprotect { claim, deallocate, finalizer } = release(&deleted, Vec::new()) else {
        panic!("an unprotect")
    };
    assert!(deallocate && claim.status.expect("a status").allocation.is_none());
    assert_eq!(finalizer, 1);
    // Not allocated: the finalizer only.
    deleted.status = None;
    let Release::Unprotect { deallocate, .. } = release(&deleted, Vec::new()) else { panic!("an unprotect") };
    assert!(!deallocate);
    // Not deleted, or not protected: nothing.
    let mut live = deleted.clone();
    live.metadata.deletion_timestamp = None;
    assert_eq!(release(&live, Vec::new()), Release::Nothing);
    let mut unprotected = deleted;
    unprotected.metadata.finalizers = None;
    assert_eq!(release(&unprotected, Vec::new()), Release::Nothing);
}

#[test]
fn a_generated_claim_goes_when_its_pod_is_done_or_replaced() {
    let claim = generated("p1", json!({}));
    assert_eq!(owning_pod(&claim), Some(("web", "p1")));
    let running = templated_pod(true, Some("node-a"));
    assert!(!generated_claim_unused("p1", &running));
    let mut done = running.clone();
    done.status.as_mut().unwrap().phase = Some("Succeeded".into());
    assert!(generated_claim_unused("p1", &done));
    assert!(generated_claim_unused("p0", &running), "the pod of that name was replaced");
    let by_user = super::tests::claim(json!({"metadata": {"name": "shared"}, "spec": {}}));
    assert_eq!(owning_pod(&by_user), None);
}

#[test]
fn keys_are_split_as_cache_split_meta_namespace_key_splits_them() {
    assert_eq!(split_meta_namespace_key("team/web").ok(), Some(("team", "web")));
    assert_eq!(split_meta_namespace_key("web").ok(), Some(("", "web")));
    let error = split_meta_namespace_key("a/b/c").expect_err("three parts");
    assert_eq!(error.to_string(), "unexpected key format: \"a/b/c\"");
}
