//! Unit tests of the pure parts of the Deployment controller (cases after upstream's
//! `deployment_util_test.go`, `sync_test.go`, `progress_test.go`, `rolling_test.go`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use super::*;
use crate::controllers::deployment::progress::{Requeue, requeue_stuck, rollout_status};
use crate::controllers::deployment::recreate::old_pods_running;
use crate::controllers::deployment::rolling::max_scaled_down;
use crate::controllers::deployment::sync::{calculate_status, generate_replica_set_name, proportional_sizes};

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + second).unwrap()
}

fn time(second: i64) -> String {
    at(second).to_string()
}

fn deployment(replicas: i32, surge: Value, unavailable: Value) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "d-uid", "generation": 1},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}},
            "progressDeadlineSeconds": 600,
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}},
        },
    }))
    .unwrap()
}

fn replica_set(name: &str, created: i64, replicas: i32, available: i32, annotations: Value) -> Arc<ReplicaSet> {
    serde_json::from_value::<ReplicaSet>(json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("{name}-uid"), "creationTimestamp": time(created),
            "annotations": annotations},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web", POD_TEMPLATE_HASH: name}},
            "template": {"metadata": {"labels": {"app": "web", POD_TEMPLATE_HASH: name}},
                "spec": {"containers": [{"name": "web", "image": format!("nginx:{name}")}]}}},
        "status": {"replicas": replicas, "readyReplicas": available, "availableReplicas": available},
    }))
    .map(Arc::new)
    .unwrap()
}

/// The annotations of a test ReplicaSet, to be changed in place.
fn annotations_of(rs: &mut Arc<ReplicaSet>) -> &mut std::collections::BTreeMap<String, String> {
    Arc::make_mut(rs).metadata.annotations.get_or_insert_with(Default::default)
}

fn with_template_of(mut rs: Arc<ReplicaSet>, d: &Deployment, hash: &str) -> Arc<ReplicaSet> {
    let mut template = template(d);
    template.metadata.as_mut().unwrap().labels.as_mut().unwrap().insert(POD_TEMPLATE_HASH.into(), hash.into());
    Arc::make_mut(&mut rs).spec.as_mut().unwrap().template = Some(template);
    rs
}

#[test]
fn fenceposts_round_surge_up_and_unavailable_down() {
    let pct = |s: &str| IntOrString::String(s.into());
    assert_eq!(resolve_fenceposts(Some(&pct("25%")), Some(&pct("25%")), 10).ok(), Some((3, 2)));
    assert_eq!(resolve_fenceposts(Some(&pct("25%")), Some(&pct("25%")), 1).ok(), Some((1, 0)));
    assert_eq!(resolve_fenceposts(Some(&IntOrString::Int(2)), Some(&IntOrString::Int(0)), 5).ok(), Some((2, 0)));
    // Both resolving to zero: one may be unavailable.
    assert_eq!(resolve_fenceposts(Some(&pct("0%")), Some(&pct("10%")), 3).ok(), Some((0, 1)));
    assert_eq!(resolve_fenceposts(None, None, 3).ok(), Some((0, 1)));
    assert!(resolve_fenceposts(Some(&pct("abc")), None, 3).unwrap_err().to_string().contains("not a percentage"));
}

#[test]
fn max_unavailable_is_capped_and_zero_outside_rolling_updates() {
    let d = deployment(2, json!(0), json!(5));
    assert_eq!((max_surge(&d), max_unavailable(&d)), (0, 2));
    let d = deployment(0, json!(1), json!(1));
    assert_eq!(max_unavailable(&d), 0);
    let mut d = deployment(4, json!(1), json!(1));
    d.spec.as_mut().unwrap().strategy = serde_json::from_value(json!({"type": "Recreate"})).unwrap();
    assert_eq!((max_surge(&d), max_unavailable(&d)), (0, 0));
}

#[test]
fn proportional_scaling_up_shares_by_size_and_favours_newer() {
    // 10 → 12 replicas with maxSurge 3 mid-rollout: both were sized for 13, now 15 are allowed.
    let d = deployment(12, json!(3), json!(1));
    let old = replica_set("old", 0, 5, 5, json!({MAX_REPLICAS: "13", DESIRED_REPLICAS: "10"}));
    let new = replica_set("new", 10, 8, 0, json!({MAX_REPLICAS: "13", DESIRED_REPLICAS: "10"}));
    let mut all = vec![old, new];
    let (sizes, to_add) = proportional_sizes(&d, &mut all);
    assert_eq!(to_add, 2);
    let names: Vec<&str> = all.iter().map(|rs| rs_name(rs)).collect();
    assert_eq!(names, ["new", "old"]);
    assert_eq!(sizes, [9, 6]);
}

#[test]
fn proportional_scaling_down_takes_from_the_largest_first_and_the_leftover_goes_there() {
    let d = deployment(5, json!(3), json!(1));
    let old = replica_set("old", 0, 5, 5, json!({MAX_REPLICAS: "13"}));
    let new = replica_set("new", 10, 8, 0, json!({MAX_REPLICAS: "13"}));
    let mut all = vec![old, new];
    let (sizes, to_add) = proportional_sizes(&d, &mut all);
    assert_eq!(to_add, -5);
    assert_eq!(sizes, [5, 3]);
    // Equal sizes scaling down: the older goes first; the leftover lands on it.
    let d = deployment(2, json!(0), json!(1));
    let a = replica_set("a", 0, 2, 2, json!({MAX_REPLICAS: "4"}));
    let b = replica_set("b", 5, 2, 2, json!({MAX_REPLICAS: "4"}));
    let mut all = vec![b, a];
    let (sizes, to_add) = proportional_sizes(&d, &mut all);
    assert_eq!(to_add, -2);
    assert_eq!(all.iter().map(|rs| rs_name(rs)).collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(sizes, [1, 1]);
    // Without the annotation the Deployment's current size is the base.
    let mut d = deployment(6, json!(0), json!(1));
    d.status = Some(DeploymentStatus { replicas: Some(3), ..Default::default() });
    let rs = replica_set("x", 0, 3, 3, json!({}));
    assert_eq!(replica_set_proportion(&rs, &d, 3, 0), 3);
    d.status = None;
    assert_eq!(replica_set_proportion(&rs, &d, 3, 0), 0);
}

#[test]
fn the_new_replica_set_is_the_oldest_with_the_template_ignoring_the_hash() {
    let d = deployment(3, json!(1), json!(0));
    let newer = with_template_of(replica_set("newer", 20, 0, 0, json!({})), &d, "h2");
    let oldest = with_template_of(replica_set("oldest", 10, 1, 1, json!({})), &d, "h1");
    let other = replica_set("other", 0, 2, 2, json!({}));
    let mut list = vec![newer, other, oldest];
    assert_eq!(find_new_replica_set(&d, &mut list).map(|rs| rs_name(&rs).to_string()), Some("oldest".into()));
    let old: Vec<String> = find_old_replica_sets(&d, &mut list).iter().map(|rs| rs_name(rs).to_string()).collect();
    assert_eq!(old, ["other", "newer"]);
    // Empty and missing label maps are equal, as Go's semantic equality has them.
    let mut a = template(&d);
    let mut b = a.clone();
    a.metadata.as_mut().unwrap().annotations = Some(Default::default());
    assert!(equal_ignore_hash(&a, &b));
    b.spec.as_mut().unwrap().containers[0].image = Some("nginx:1.28".into());
    assert!(!equal_ignore_hash(&a, &b));
    // A new annotation makes a new template; a field other than those compared first still
    // counts (the JSON comparison).
    let (a, mut b) = (template(&d), template(&d));
    b.spec.as_mut().unwrap().termination_grace_period_seconds = Some(7);
    assert!(!equal_ignore_hash(&a, &b));
    let mut b = a.clone();
    b.metadata.as_mut().unwrap().annotations = Some([("restartedAt".to_string(), "now".to_string())].into());
    assert!(!equal_ignore_hash(&a, &b));
    // The hash label is ignored wherever it is, and only it.
    let label = |t: &mut PodTemplateSpec, key: &str, value: &str| {
        t.metadata.get_or_insert_default().labels.get_or_insert_default().insert(key.into(), value.into());
    };
    let (mut a, mut b) = (template(&d), template(&d));
    label(&mut a, POD_TEMPLATE_HASH, "h1");
    assert!(equal_ignore_hash(&a, &b), "a hash on one side only");
    label(&mut b, POD_TEMPLATE_HASH, "h2");
    assert!(equal_ignore_hash(&a, &b), "two hashes");
    label(&mut b, "tier", "web");
    assert!(!equal_ignore_hash(&a, &b), "another label");
    let empty = PodTemplateSpec { metadata: Some(Default::default()), spec: None };
    let (mut a, b) = (empty.clone(), empty);
    label(&mut a, POD_TEMPLATE_HASH, "h1");
    assert!(equal_ignore_hash(&a, &b), "only a hash label and no labels");
}

#[test]
fn revisions_and_revision_history() {
    let rs = |rev: &str| replica_set("r", 0, 0, 0, json!({REVISION: rev}));
    let list = [rs("1"), rs("4"), rs("2"), rs("x"), replica_set("none", 0, 0, 0, json!({}))];
    assert_eq!(max_revision(&list), 4);
    assert_eq!(last_revision(&list), 2);
    assert!(revision(&rs("x")).is_err());

    // Rolling back to revision 1 when the newest is 3: it becomes 4, 1 goes to the history.
    let mut d = deployment(1, json!(1), json!(0));
    d.metadata.annotations = Some([("team".to_string(), "a".to_string()), (REVISION.into(), "3".into())].into());
    let mut old = replica_set("r", 0, 0, 0, json!({REVISION: "1", REVISION_HISTORY: "0"}));
    assert!(set_new_rs_annotations(&d, annotations_of(&mut old), "4", true, MAX_REV_HISTORY_LENGTH));
    let annotations = old.metadata.annotations.clone().unwrap();
    assert_eq!(annotations[REVISION], "4");
    assert_eq!(annotations[REVISION_HISTORY], "0,1");
    assert_eq!(annotations["team"], "a");
    assert!(!annotations.contains_key(DESIRED_REPLICAS), "existing ReplicaSets keep their replica annotations");
    assert!(
        !set_new_rs_annotations(&d, annotations_of(&mut old), "4", true, MAX_REV_HISTORY_LENGTH),
        "nothing more to do"
    );
    // The history is trimmed from the front to stay within the limit.
    let mut rs = replica_set("r", 0, 0, 0, json!({REVISION: "9", REVISION_HISTORY: "10,11"}));
    assert!(set_new_rs_annotations(&d, annotations_of(&mut rs), "12", true, 6));
    assert_eq!(rs.metadata.annotations.clone().unwrap()[REVISION_HISTORY], "11,9");
    // A ReplicaSet about to be created gets the replica annotations.
    let mut fresh = replica_set("f", 0, 0, 0, json!({}));
    assert!(set_new_rs_annotations(&d, annotations_of(&mut fresh), "1", false, MAX_REV_HISTORY_LENGTH));
    let annotations = fresh.metadata.annotations.clone().unwrap();
    assert_eq!((annotations[DESIRED_REPLICAS].as_str(), annotations[MAX_REPLICAS].as_str()), ("1", "2"));
    assert!(!annotations.contains_key(REVISION_HISTORY));
}

#[test]
fn rollback_takes_the_replica_sets_template_and_annotations() {
    let mut d = deployment(1, json!(1), json!(0));
    d.metadata.annotations = Some([("cause".to_string(), "edit".to_string()), (REVISION.into(), "2".into())].into());
    let rs = replica_set("old", 0, 0, 0, json!({"cause": "create", REVISION: "1"}));
    set_from_replica_set_template(&mut d, rs.spec.as_ref().unwrap().template.as_ref().unwrap());
    set_deployment_annotations_to(&mut d, &rs);
    let labels = template(&d).metadata.unwrap().labels.unwrap();
    assert!(!labels.contains_key(POD_TEMPLATE_HASH));
    assert_eq!(template(&d).spec.unwrap().containers[0].image.as_deref(), Some("nginx:old"));
    let annotations = d.metadata.annotations.unwrap();
    assert_eq!((annotations["cause"].as_str(), annotations[REVISION].as_str()), ("create", "2"));
}

#[test]
fn conditions_keep_their_transition_time_while_the_status_holds() {
    let mut status = DeploymentStatus::default();
    set_condition(&mut status, new_condition(PROGRESSING, "True", NEW_REPLICA_SET, "created", at(0)));
    set_condition(&mut status, new_condition(AVAILABLE, "False", MINIMUM_REPLICAS_UNAVAILABLE, "no", at(0)));
    // Same status and reason: unchanged.
    set_condition(&mut status, new_condition(PROGRESSING, "True", NEW_REPLICA_SET, "again", at(5)));
    assert_eq!(get_condition(&status, PROGRESSING).unwrap().message.as_deref(), Some("created"));
    // Same status, new reason: the transition time stays, the condition moves last.
    set_condition(&mut status, new_condition(PROGRESSING, "True", NEW_RS_AVAILABLE, "done", at(9)));
    let progressing = get_condition(&status, PROGRESSING).unwrap();
    assert_eq!(progressing.last_transition_time.as_ref().unwrap().0, at(0));
    assert_eq!(progressing.last_update_time.as_ref().unwrap().0, at(9));
    let types: Vec<&str> = status.conditions.iter().flatten().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, [AVAILABLE, PROGRESSING]);
    remove_condition(&mut status, PROGRESSING);
    remove_condition(&mut status, AVAILABLE);
    assert_eq!(status.conditions, None);
}

#[test]
fn progress_is_reported_until_complete_then_timed_out_when_stuck() {
    let mut d = deployment(2, json!(1), json!(0));
    let new = replica_set("new", 10, 2, 0, json!({}));
    // Not progressing, no condition yet: nothing to estimate but Available=False.
    let status = rollout_status(std::slice::from_ref(&new), Some(&new), &d, true, at(0));
    assert_eq!(status.updated_replicas, Some(2));
    assert_eq!(get_condition(&status, AVAILABLE).unwrap().reason.as_deref(), Some(MINIMUM_REPLICAS_UNAVAILABLE));
    assert_eq!(get_condition(&status, PROGRESSING).unwrap().reason.as_deref(), Some(REPLICA_SET_UPDATED));
    d.status = Some(status);
    // No change for 600 s: the deadline passes.
    let status = rollout_status(std::slice::from_ref(&new), Some(&new), &d, true, at(300));
    assert_eq!(get_condition(&status, PROGRESSING).unwrap().reason.as_deref(), Some(REPLICA_SET_UPDATED));
    assert_eq!(requeue_stuck(&d, &status, at(300)), Requeue::After(Duration::from_secs(301)));
    assert_eq!(requeue_stuck(&d, &status, at(600)), Requeue::Now);
    let status = rollout_status(std::slice::from_ref(&new), Some(&new), &d, true, at(601));
    let progressing = get_condition(&status, PROGRESSING).unwrap();
    assert_eq!((progressing.status.as_str(), progressing.reason.as_deref()), ("False", Some(TIMED_OUT)));
    assert_eq!(progressing.message.as_deref(), Some("ReplicaSet \"new\" has timed out progressing."));
    d.status = Some(status);
    assert_eq!(requeue_stuck(&d, d.status.as_ref().unwrap(), at(602)), Requeue::Never);
    // Once all replicas are available the rollout is complete.
    let ready = replica_set("new", 10, 2, 2, json!({}));
    let status = rollout_status(std::slice::from_ref(&ready), Some(&ready), &d, true, at(700));
    let progressing = get_condition(&status, PROGRESSING).unwrap();
    assert_eq!((progressing.status.as_str(), progressing.reason.as_deref()), ("True", Some(NEW_RS_AVAILABLE)));
    assert_eq!(get_condition(&status, AVAILABLE).unwrap().reason.as_deref(), Some(MINIMUM_REPLICAS_AVAILABLE));
}

#[test]
fn replica_failures_of_the_new_replica_set_win() {
    let d = deployment(2, json!(1), json!(0));
    let failure = |rs: &mut ReplicaSet, message: &str| {
        rs.status.as_mut().unwrap().conditions = Some(vec![
            serde_json::from_value(json!({
            "type": REPLICA_FAILURE, "status": "True", "reason": "FailedCreate", "message": message,
            "lastTransitionTime": time(0)}))
            .unwrap(),
        ]);
    };
    let mut old = replica_set("old", 0, 1, 1, json!({}));
    let mut new = replica_set("new", 10, 1, 0, json!({}));
    failure(Arc::make_mut(&mut old), "old quota");
    let all = [old.clone(), new.clone()];
    let status = rollout_status(&all, Some(&new), &d, true, at(1));
    assert_eq!(get_condition(&status, REPLICA_FAILURE).unwrap().message.as_deref(), Some("old quota"));
    failure(Arc::make_mut(&mut new), "new quota");
    let all = [old, new.clone()];
    let status = rollout_status(&all, Some(&new), &d, true, at(1));
    assert_eq!(get_condition(&status, REPLICA_FAILURE).unwrap().message.as_deref(), Some("new quota"));
}

#[test]
fn timed_out_needs_a_deadline_and_a_stale_condition() {
    let mut d = deployment(1, json!(1), json!(0));
    let mut status = DeploymentStatus::default();
    assert!(!deployment_timed_out(&d, &status, at(1000)));
    set_condition(&mut status, new_condition(PROGRESSING, "True", REPLICA_SET_UPDATED, "", at(0)));
    assert!(!deployment_timed_out(&d, &status, at(600)));
    assert!(deployment_timed_out(&d, &status, at(601)));
    // Go compares instants, not whole seconds.
    assert!(deployment_timed_out(&d, &status, at(600).checked_add(jiff::SignedDuration::from_millis(1)).unwrap()));
    d.spec.as_mut().unwrap().progress_deadline_seconds = Some(i32::MAX);
    assert!(!deployment_timed_out(&d, &status, at(10_000)));
}

#[test]
fn old_replica_sets_shrink_only_within_max_unavailable() {
    // 3 replicas, maxUnavailable 0: while the surge pod is unavailable no old pod may go.
    let strict = deployment(3, json!(1), json!(0));
    let old = replica_set("old", 0, 3, 3, json!({}));
    let new = replica_set("new", 10, 1, 0, json!({}));
    assert_eq!(max_scaled_down(&strict, &[old.clone(), new.clone()], &new), 0);
    let available = replica_set("new", 10, 1, 1, json!({}));
    assert_eq!(max_scaled_down(&strict, &[old.clone(), available.clone()], &available), 1);
    // maxUnavailable 1: one more.
    let d = deployment(3, json!(1), json!(1));
    assert_eq!(max_scaled_down(&d, &[old.clone(), new.clone()], &new), 1);
    assert_eq!(max_scaled_down(&d, &[old, available.clone()], &available), 2);
    // The new ReplicaSet grows within maxSurge only.
    let old = replica_set("old", 0, 3, 3, json!({}));
    let new = replica_set("new", 10, 0, 0, json!({}));
    assert_eq!(new_rs_new_replicas(&d, &[old.clone(), new.clone()], &new).ok(), Some(1));
    let new = replica_set("new", 10, 1, 0, json!({}));
    assert_eq!(new_rs_new_replicas(&d, &[old, new.clone()], &new).ok(), Some(1));
}

#[test]
fn recreate_waits_for_every_old_pod_to_be_terminal_or_gone() {
    let old = replica_set("old", 0, 0, 0, json!({}));
    let mut old_scaled = old.clone();
    Arc::make_mut(&mut old_scaled).status.as_mut().unwrap().replicas = 0;
    let pod =
        |phase: &str| -> Arc<Pod> { Arc::new(serde_json::from_value(json!({"status": {"phase": phase}})).unwrap()) };
    let mut map: HashMap<String, Vec<Arc<Pod>>> = HashMap::new();
    map.insert("old-uid".into(), vec![pod("Succeeded"), pod("Failed")]);
    assert!(!old_pods_running(None, std::slice::from_ref(&old_scaled), &map));
    map.get_mut("old-uid").unwrap().push(pod("Running"));
    assert!(old_pods_running(None, std::slice::from_ref(&old_scaled), &map));
    let new = replica_set("old", 0, 0, 0, json!({}));
    assert!(!old_pods_running(Some(&new), &[], &map), "pods of the new ReplicaSet do not count");
    let still = replica_set("still", 0, 0, 0, json!({}));
    let mut reporting = still.clone();
    Arc::make_mut(&mut reporting).status.as_mut().unwrap().replicas = 1;
    assert!(old_pods_running(None, &[reporting], &HashMap::new()));
}

#[test]
fn active_or_latest_and_saturation() {
    let d = deployment(3, json!(1), json!(0));
    let mut old = vec![replica_set("a", 0, 0, 0, json!({})), replica_set("b", 5, 0, 0, json!({}))];
    assert_eq!(find_active_or_latest(None, &mut old).map(|rs| rs_name(&rs).to_string()), Some("b".into()));
    let new = replica_set("n", 9, 2, 2, json!({DESIRED_REPLICAS: "3"}));
    assert_eq!(find_active_or_latest(Some(&new), &mut old).map(|rs| rs_name(&rs).to_string()), Some("n".into()));
    old.push(replica_set("c", 7, 1, 1, json!({})));
    assert!(find_active_or_latest(Some(&new), &mut old).is_none());
    assert!(!is_saturated(&d, Some(&new)));
    let full = replica_set("n", 9, 3, 3, json!({DESIRED_REPLICAS: "3"}));
    assert!(is_saturated(&d, Some(&full)));
}

/// A ReplicaSet's status with `observedGeneration` and `terminatingReplicas` as given.
fn synced(name: &str, observed: Option<i64>, terminating: Option<i32>) -> Arc<ReplicaSet> {
    let mut rs = replica_set(name, 0, 1, 1, json!({}));
    let status = Arc::make_mut(&mut rs).status.as_mut().unwrap();
    status.observed_generation = observed;
    status.terminating_replicas = terminating;
    rs
}

#[test]
fn terminating_replicas_sum_skips_unsynced_replica_sets_and_is_unknown_if_one_does_not_report() {
    assert_eq!(terminating_replicas_sum(&[]), Some(0));
    let a = synced("a", Some(1), Some(2));
    let b = synced("b", Some(3), Some(0));
    let fresh = synced("fresh", None, None);
    let fresh_reporting = synced("fresh-reporting", None, Some(1));
    let silent = synced("silent", Some(1), None);
    assert_eq!(terminating_replicas_sum(&[a.clone(), b.clone()]), Some(2));
    assert_eq!(terminating_replicas_sum(&[a.clone(), fresh]), Some(2), "never synced: left out");
    assert_eq!(terminating_replicas_sum(&[a.clone(), fresh_reporting]), Some(3));
    assert_eq!(terminating_replicas_sum(&[a, silent, b]), None, "synced without a count");
}

#[test]
fn the_status_reports_terminating_replicas_only_under_the_gate() {
    let d = deployment(2, json!(1), json!(0));
    let all = [synced("a", Some(1), Some(1)), synced("b", Some(1), Some(0))];
    let on = calculate_status(&all, Some(&all[1]), &d, true, at(0));
    assert_eq!(on.terminating_replicas, Some(1));
    let off = calculate_status(&all, Some(&all[1]), &d, false, at(0));
    assert_eq!(off.terminating_replicas, None);
    let zero = calculate_status(&all[1..], Some(&all[1]), &d, true, at(0));
    assert_eq!(zero.terminating_replicas, Some(0), "0 is reported, not left out");
    let unknown = [synced("silent", Some(1), None)];
    assert_eq!(calculate_status(&unknown, None, &d, true, at(0)).terminating_replicas, None);
}

#[test]
fn replica_set_names_are_cut_to_fit_a_dns_subdomain() {
    assert_eq!(generate_replica_set_name("web", "5d4f8b9c7"), "web-5d4f8b9c7");
    let long = "d".repeat(250);
    let name = generate_replica_set_name(&long, "5d4f8b9c7");
    assert_eq!(name.len(), 253);
    assert_eq!(name, format!("{}-5d4f8b9c7", "d".repeat(243)));
    let fits = "d".repeat(243);
    assert_eq!(generate_replica_set_name(&fits, "5d4f8b9c7"), format!("{fits}-5d4f8b9c7"), "exactly 253: kept");
    let cut = generate_replica_set_name(&"d".repeat(244), "5d4f8b9c7");
    assert_eq!(cut, format!("{}-5d4f8b9c7", "d".repeat(243)));
}

#[test]
fn the_pod_map_takes_the_pods_each_replica_set_controls_whatever_their_labels() {
    use crate::controllers::deployment::controlled_by;
    let rs = replica_set("a", 0, 1, 1, json!({}));
    let pod = |namespace: &str, kind: &str, name: &str, uid: &str, labels: Value| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": namespace, "labels": labels,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": true}]}}))
        .unwrap()
    };
    // v1.36 no longer filters by the Deployment's selector.
    assert!(controlled_by(&pod("ns", "ReplicaSet", "a", "a-uid", json!({"app": "other"})).metadata, &rs));
    assert!(!controlled_by(&pod("ns", "ReplicaSet", "b", "a-uid", json!({})).metadata, &rs), "the index key");
    assert!(!controlled_by(&pod("ns", "Deployment", "a", "a-uid", json!({})).metadata, &rs), "the index key");
    assert!(!controlled_by(&pod("other", "ReplicaSet", "a", "a-uid", json!({})).metadata, &rs));
    assert!(!controlled_by(&pod("ns", "ReplicaSet", "a", "b-uid", json!({})).metadata, &rs));
}
