//! The ReplicaSet and ReplicationController controllers against the sandbox with simulated
//! nodes: pods are created, adopted, released and deleted to match `spec.replicas`, the status
//! follows (a ReplicaSet's with `terminatingReplicas`, v1.36), availability after
//! `minReadySeconds` is reported without another event, and a quota refusal shows as the
//! ReplicaFailure condition.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{Pod, ReplicationController, ResourceQuota};
use kcm::app::controllers::named;
use kcm::client::{Api, Client, Patch, PostParams};
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, eventually, from};

/// A bare nginx pod with `labels`.
fn new_pod(name: &str, labels: Value, node_selector: Option<Value>) -> Pod {
    let mut spec = json!({"containers": [{"name": "app", "image": "nginx:1.27"}]});
    if let Some(selector) = node_selector {
        spec["nodeSelector"] = selector;
    }
    from(json!({"metadata": {"name": name, "labels": labels}, "spec": spec}))
}

fn start(backend: Backend) -> Cluster {
    start_with(backend, |_| ())
}

/// A sandbox with two simulated nodes and both controllers running; `prepare` runs against the
/// API before the controllers start, so that what it creates is in the controllers' first list
/// rather than racing their watches.
fn start_with(backend: Backend, prepare: impl FnOnce(&Client)) -> Cluster {
    harness::with(&[named("replicaset-controller"), named("replicationcontroller-controller")])
        .on(backend)
        .names(&["replicaset-controller", "replicationcontroller-controller"])
        .start_with(|client, _| prepare(client))
}

/// This module's helpers on the harness's `Cluster`. A trait rather than an inherent `impl`: the
/// controller modules share one test binary, where two modules' inherent methods of one name
/// would collide.
trait ClusterExt {
    fn owned_pods(&self, uid: &str) -> Vec<Pod>;
    fn names(pods: &[Pod]) -> BTreeSet<String>;
    fn wait_owned(&self, uid: &str, count: usize) -> Vec<Pod>;
    fn create_pod(&self, name: &str, labels: Value, node_selector: Option<Value>) -> Pod;
    fn create_replica_set(&self, name: &str, replicas: i32) -> ReplicaSet;
    fn scale(&self, name: &str, replicas: i32);
    fn wait_rs_status(&self, name: &str, replicas: i32) -> ReplicaSet;
}

impl ClusterExt for Cluster {
    /// Active pods whose controller is the object with `uid`, by name.
    fn owned_pods(&self, uid: &str) -> Vec<Pod> {
        let pods = self.api::<Pod>().list(&Default::default()).expect("pods").items;
        pods.into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                let refs = p.metadata.owner_references.iter().flatten();
                refs.into_iter().any(|r| r.uid == uid && r.controller == Some(true))
            })
            .collect()
    }

    fn names(pods: &[Pod]) -> BTreeSet<String> {
        pods.iter().filter_map(|p| p.metadata.name.clone()).collect()
    }

    /// Waits until the object with `uid` controls exactly `count` live pods.
    fn wait_owned(&self, uid: &str, count: usize) -> Vec<Pod> {
        eventually(&format!("{count} pods of {uid}"), || {
            let pods = self.owned_pods(uid);
            (pods.len() == count).then_some(pods)
        })
    }

    fn create_pod(&self, name: &str, labels: Value, node_selector: Option<Value>) -> Pod {
        self.api::<Pod>().create(&new_pod(name, labels, node_selector), &PostParams::default()).expect("pod created")
    }

    fn create_replica_set(&self, name: &str, replicas: i32) -> ReplicaSet {
        let rs = harness::nginx_replica_set(name, replicas);
        self.api::<ReplicaSet>().create(&rs, &PostParams::default()).expect("replicaset created")
    }

    fn scale(&self, name: &str, replicas: i32) {
        let patch = Patch::Merge(json!({"spec": {"replicas": replicas}}));
        self.api::<ReplicaSet>().patch(name, &patch, &PostParams::default()).expect("scaled");
    }

    /// Waits until the ReplicaSet reports `replicas` replicas, all ready and available, none
    /// terminating (v1.36 writes the 0), for its current generation.
    fn wait_rs_status(&self, name: &str, replicas: i32) -> ReplicaSet {
        eventually(&format!("{name} status of {replicas}"), || {
            let rs = self.api::<ReplicaSet>().get(name).ok()?;
            let status = rs.status.clone()?;
            let settled = status.replicas == replicas
                && status.ready_replicas.unwrap_or(0) == replicas
                && status.available_replicas.unwrap_or(0) == replicas
                && status.fully_labeled_replicas.unwrap_or(0) == replicas
                && status.terminating_replicas == Some(0)
                && status.observed_generation == rs.metadata.generation;
            settled.then_some(rs)
        })
    }
}

fn uid_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.uid.clone().expect("a uid")
}

on_both_backends!(replica_set_creates_scales_and_reports_status);
fn replica_set_creates_scales_and_reports_status(backend: Backend) {
    let cluster = start(backend);
    let rs = cluster.create_replica_set("web", 3);
    let uid = uid_of(&rs.metadata);
    let pods = cluster.wait_owned(&uid, 3);
    for pod in &pods {
        let name = pod.metadata.name.as_deref().unwrap_or("");
        assert!(name.starts_with("web-") && name.len() == "web-".len() + 5, "{name}");
        let owner = &pod.metadata.owner_references.as_ref().expect("owner references")[0];
        assert_eq!((owner.kind.as_str(), owner.api_version.as_str()), ("ReplicaSet", "apps/v1"));
        assert_eq!((owner.controller, owner.block_owner_deletion), (Some(true), Some(true)));
    }
    let created = eventually("SuccessfulCreate events", || {
        let events = cluster.event_messages("default", "web", "SuccessfulCreate");
        (events.len() == 3).then_some(events)
    });
    for pod in &pods {
        let expected = format!("Created pod: {}", pod.metadata.name.as_deref().unwrap_or(""));
        assert!(created.contains(&expected), "{expected} in {created:?}");
    }
    cluster.wait_rs_status("web", 3);

    cluster.scale("web", 5);
    cluster.wait_owned(&uid, 5);
    cluster.wait_rs_status("web", 5);

    cluster.scale("web", 1);
    let left = cluster.wait_owned(&uid, 1);
    cluster.wait_rs_status("web", 1);
    eventually("SuccessfulDelete events", || {
        (cluster.event_messages("default", "web", "SuccessfulDelete").len() == 4).then_some(())
    });
    let deleted = cluster.event_messages("default", "web", "SuccessfulDelete");
    let kept = format!("Deleted pod: {}", left[0].metadata.name.as_deref().unwrap_or(""));
    assert!(!deleted.contains(&kept), "the kept pod was not deleted: {deleted:?}");
}

on_both_backends!(orphans_are_adopted_changed_pods_released_and_unscheduled_pods_deleted_first);
fn orphans_are_adopted_changed_pods_released_and_unscheduled_pods_deleted_first(backend: Backend) {
    // An orphan that exists before the ReplicaSet is adopted and counts as a replica. It is created
    // before the controllers start: created after, the ReplicaSet's watch event may overtake the
    // pod's, and the controller would rightly create a third pod (upstream would too).
    let cluster = start_with(backend, |client| {
        let pod = new_pod("stray", json!({"app": "api"}), None);
        Api::<Pod>::namespaced(client, "default").create(&pod, &PostParams::default()).expect("pod created");
    });
    let rs = cluster.create_replica_set("api", 3);
    let uid = uid_of(&rs.metadata);
    let pods = cluster.wait_owned(&uid, 3);
    assert!(Cluster::names(&pods).contains("stray"), "adopted: {:?}", Cluster::names(&pods));
    cluster.wait_rs_status("api", 3);
    assert_eq!(cluster.event_messages("default", "api", "SuccessfulCreate").len(), 2, "only two pods created");

    // A matching pod that can never be scheduled is adopted, then deleted first as surplus.
    cluster.create_pod("pinned", json!({"app": "api"}), Some(json!({"no-such-label": "x"})));
    eventually("pinned deleted as the surplus pod", || {
        let deleted = cluster.event_messages("default", "api", "SuccessfulDelete");
        (deleted == ["Deleted pod: pinned"]).then_some(())
    });
    let after = cluster.wait_owned(&uid, 3);
    assert_eq!(Cluster::names(&after), Cluster::names(&pods), "the running pods stay");

    // A pod whose labels stop matching is released and replaced.
    let patch = Patch::Merge(json!({"metadata": {"labels": {"app": "debug"}}}));
    cluster.api::<Pod>().patch("stray", &patch, &PostParams::default()).expect("relabelled");
    let released = eventually("stray released", || {
        let pod = cluster.api::<Pod>().get("stray").ok()?;
        pod.metadata.owner_references.as_ref().is_none_or(|r| r.is_empty()).then_some(pod)
    });
    assert_eq!(released.metadata.labels.and_then(|l| l.get("app").cloned()).as_deref(), Some("debug"));
    let replaced = cluster.wait_owned(&uid, 3);
    assert!(!Cluster::names(&replaced).contains("stray"));
    cluster.wait_rs_status("api", 3);
}

on_both_backends!(quota_refusals_show_as_replica_failure);
fn quota_refusals_show_as_replica_failure(backend: Backend) {
    let cluster = start(backend);
    let quotas = Api::<ResourceQuota>::namespaced(&cluster.client, "default");
    let quota: ResourceQuota = from(json!({"metadata": {"name": "pods"}, "spec": {"hard": {"pods": "2"}}}));
    let mut quota = quotas.create(&quota, &PostParams::default()).expect("quota created");
    // No quota controller runs: publish the hard limit as it would.
    quota.status = Some(from(json!({"hard": {"pods": "2"}, "used": {"pods": "0"}})));
    quotas.replace_status("pods", &quota, &PostParams::default()).expect("quota status");

    let rs = cluster.create_replica_set("capped", 3);
    cluster.wait_owned(&uid_of(&rs.metadata), 2);
    let condition = eventually("the ReplicaFailure condition", || {
        let rs = cluster.api::<ReplicaSet>().get("capped").ok()?;
        let conditions = rs.status?.conditions.unwrap_or_default();
        conditions.into_iter().find(|c| c.type_ == "ReplicaFailure")
    });
    assert_eq!((condition.status.as_str(), condition.reason.as_deref()), ("True", Some("FailedCreate")));
    assert!(condition.message.as_deref().unwrap_or("").contains("exceeded quota"), "{condition:?}");
    let failed = eventually("a FailedCreate event", || {
        let events = cluster.event_messages("default", "capped", "FailedCreate");
        (!events.is_empty()).then_some(events)
    });
    assert!(failed[0].starts_with("Error creating: ") && failed[0].contains("exceeded quota"), "{failed:?}");
}

on_both_backends!(replication_controllers_work_the_same);
fn replication_controllers_work_the_same(backend: Backend) {
    let cluster = start(backend);
    let rcs = Api::<ReplicationController>::namespaced(&cluster.client, "default");
    let rc = harness::nginx_replication_controller("legacy", 2);
    let rc = rcs.create(&rc, &PostParams::default()).expect("rc created");
    let pods = cluster.wait_owned(&uid_of(&rc.metadata), 2);
    for pod in &pods {
        assert!(pod.metadata.name.as_deref().unwrap_or("").starts_with("legacy-"));
        let owner = &pod.metadata.owner_references.as_ref().expect("owner references")[0];
        assert_eq!((owner.kind.as_str(), owner.api_version.as_str()), ("ReplicationController", "v1"));
    }
    eventually("rc status", || {
        let rc = rcs.get("legacy").ok()?;
        let status = rc.status?;
        let settled = status.replicas == 2
            && status.ready_replicas == Some(2)
            && status.available_replicas == Some(2)
            && status.observed_generation == rc.metadata.generation;
        settled.then_some(())
    });
    assert_eq!(cluster.event_messages("default", "legacy", "SuccessfulCreate").len(), 2);
}

/// A ReplicaSet `name` of nginx pods labelled app=`name`, as `edit` changes its JSON.
fn replica_set_with(name: &str, replicas: i32, edit: impl FnOnce(&mut Value)) -> ReplicaSet {
    let mut rs = serde_json::to_value(harness::nginx_replica_set(name, replicas)).expect("json");
    edit(&mut rs);
    from(rs)
}

/// The ReplicaSet once `check` accepts its status of its current generation.
fn wait_rs(cluster: &Cluster, name: &str, what: &str, check: impl Fn(&ReplicaSetStatus) -> bool) -> ReplicaSet {
    harness::eventually_seen(&format!("{name}: {what}"), || {
        let rs = cluster.api::<ReplicaSet>().get(name).map_err(|e| e.to_string())?;
        let status = rs.status.clone().unwrap_or_default();
        if status.observed_generation == rs.metadata.generation && check(&status) {
            Ok(rs)
        } else {
            Err(format!("{status:?}"))
        }
    })
}

const HOLD: &str = "kcm.test/hold";

on_both_backends!(pods_being_deleted_count_as_terminating_replicas_until_they_are_gone);
fn pods_being_deleted_count_as_terminating_replicas_until_they_are_gone(backend: Backend) {
    let cluster = start(backend);
    // Never scheduled, so that nothing but the finalizer holds them once deleted.
    let rs = replica_set_with("held", 2, |rs| {
        rs["spec"]["template"]["spec"]["nodeSelector"] = json!({"no-such-label": "x"})
    });
    let rs = cluster.api::<ReplicaSet>().create(&rs, &PostParams::default());
    let uid = uid_of(&rs.expect("replicaset created").metadata);
    let pods = cluster.wait_owned(&uid, 2);
    wait_rs(&cluster, "held", "2 pods, none terminating", |s| s.replicas == 2 && s.terminating_replicas == Some(0));
    for pod in &pods {
        let patch = Patch::Merge(json!({"metadata": {"finalizers": [HOLD]}}));
        let name = pod.metadata.name.as_deref().expect("a name");
        cluster.api::<Pod>().patch(name, &patch, &PostParams::default()).expect("finalizer added");
    }

    cluster.scale("held", 0);
    let status = wait_rs(&cluster, "held", "2 terminating", |s| s.terminating_replicas == Some(2)).status;
    assert_eq!(status.map(|s| (s.replicas, s.ready_replicas)), Some((0, None)), "terminating pods are no replicas");
    let release = |pod: &Pod| {
        let patch = Patch::Merge(json!({"metadata": {"finalizers": null}}));
        let name = pod.metadata.name.as_deref().expect("a name");
        cluster.api::<Pod>().patch(name, &patch, &PostParams::default()).expect("finalizer removed");
    };
    release(&pods[0]);
    wait_rs(&cluster, "held", "1 terminating", |s| s.terminating_replicas == Some(1));
    release(&pods[1]);
    wait_rs(&cluster, "held", "none terminating", |s| s.replicas == 0 && s.terminating_replicas == Some(0));
}

on_both_backends!(availability_after_min_ready_seconds_is_reported_after_a_restart);
/// A pod that became ready while no controller watched is reported available once it has been
/// ready for `minReadySeconds`, and not before. v1.33 planned that sync only when every replica
/// was ready (here one never is) and otherwise relied on the pod's update event, which a
/// restarted controller does not get; v1.36 plans it after every sync that leaves a ready pod
/// unavailable.
fn availability_after_min_ready_seconds_is_reported_after_a_restart(backend: Backend) {
    // A matching orphan that is never scheduled: adopted, it is a replica that is never ready.
    let mut cluster = start_with(backend, |client| {
        let pod = new_pod("pinned", json!({"app": "slow"}), Some(json!({"no-such-label": "x"})));
        Api::<Pod>::namespaced(client, "default").create(&pod, &PostParams::default()).expect("pod created");
    });
    let min_ready = 8;
    let rs = replica_set_with("slow", 2, |rs| rs["spec"]["minReadySeconds"] = json!(min_ready));
    cluster.api::<ReplicaSet>().create(&rs, &PostParams::default()).expect("replicaset created");
    wait_rs(&cluster, "slow", "1 of 2 ready", |s| s.replicas == 2 && s.ready_replicas == Some(1));
    cluster.restart_controllers();

    let rs = wait_rs(&cluster, "slow", "1 available", |s| s.available_replicas == Some(1));
    let seen = jiff::Timestamp::now();
    let uid = uid_of(&rs.metadata);
    let ready_since = cluster
        .owned_pods(&uid)
        .iter()
        .filter_map(|p| {
            p.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready" && c.status == "True")
        })
        .filter_map(|c| c.last_transition_time.as_ref().map(|t| t.0))
        .next()
        .expect("the ready pod's transition time");
    let ready_for = seen.duration_since(ready_since).as_secs_f64();
    assert!(ready_for >= f64::from(min_ready), "available only after minReadySeconds (ready for {ready_for} s)");
    assert_eq!(rs.status.and_then(|s| s.ready_replicas), Some(1));
}

/// The value of `replicaset_controller_stale_sync_skips_total{group="",resource="pods"}` in this
/// process's registry (the harness runs the controllers in-process); 0 before the first skip.
fn stale_pod_sync_skips() -> f64 {
    harness::metric_sample("replicaset_controller_stale_sync_skips_total{group=\"\",resource=\"pods\"}").unwrap_or(0.0)
}

/// v1.36's StaleControllerConsistencyReplicaSet (Beta, on): once the controller has created the
/// pods, its next syncs (the informers' resyncs from their stale cache, and the rate-limited
/// retries) are skipped and counted while the pod informer has not seen those creations; when
/// the watch events arrive the ReplicaSet is synced, with its pods created once.
#[test]
fn a_replica_set_is_not_synced_until_its_informers_have_seen_its_pods() {
    let before = stale_pod_sync_skips();
    let cluster = harness::with(&[named("replicaset-controller")])
        .names(&["replicaset-controller"])
        .flags(&["--min-resync-period=1s"])
        .start_with(|client, server| {
            let rs = harness::nginx_replica_set("stale", 2);
            Api::<ReplicaSet>::namespaced(client, "default").create(&rs, &PostParams::default()).expect("created");
            // The informers list the ReplicaSet, then see no change until released.
            server.sandbox().expect("the sandbox").faults().hold_watch_events(true);
        });
    let uid = uid_of(&cluster.api::<ReplicaSet>().get("stale").expect("the replicaset").metadata);
    cluster.wait_owned(&uid, 2);
    eventually("a sync skipped for the unseen pods", || (stale_pod_sync_skips() > before).then_some(()));
    assert_eq!(cluster.owned_pods(&uid).len(), 2, "no pod created twice");

    cluster.sandbox().faults().hold_watch_events(false);
    cluster.wait_rs_status("stale", 2);
    assert_eq!(cluster.owned_pods(&uid).len(), 2);
}

on_both_backends!(a_scale_down_deletes_first_the_pod_beside_most_of_its_siblings_pods);
/// `getIndirectlyRelatedPods`: the ReplicaSets of one Deployment (same controller, each
/// selecting its own pod-template-hash) count each other's pods per node, and a scale-down
/// deletes first the pod on the node most crowded with them (the ranking's "doubled up").
fn a_scale_down_deletes_first_the_pod_beside_most_of_its_siblings_pods(backend: Backend) {
    // The old ReplicaSet's pods, one on each node, to be adopted: created before the
    // controllers start, so that the ReplicaSet's event cannot overtake theirs (see above).
    // old-b is created once old-a has been ready for 3 s: without the count of related pods,
    // the ranking's later rules (more recently ready, then newer, goes first) would pick it.
    let cluster = start_with(backend, |client| {
        let pods = Api::<Pod>::namespaced(client, "default");
        for (name, node) in [("old-a", "node-a"), ("old-b", "node-b")] {
            let mut pod = new_pod(name, json!({"app": "web", "pod-template-hash": "old"}), None);
            pod.spec.as_mut().expect("a spec").node_name = Some(node.into());
            pods.create(&pod, &PostParams::default()).expect("pod created");
            eventually(&format!("{name} ready for 3 s"), || {
                let status = pods.get(name).ok()?.status?;
                let ready = status.conditions?.into_iter().find(|c| c.type_ == "Ready" && c.status == "True")?;
                let since = ready.last_transition_time?.0;
                (jiff::Timestamp::now() >= since + jiff::SignedDuration::from_secs(3)).then_some(())
            });
        }
    });
    let owner = json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "9d0c1f4e-0000-4000-8000-00000000d001",
        "controller": true}]);
    let replica_set = |hash: &str, replicas: i32, node: &str| -> ReplicaSet {
        let labels = json!({"app": "web", "pod-template-hash": hash});
        from(json!({"metadata": {"name": format!("web-{hash}"), "ownerReferences": owner, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels},
                "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx:1.27"}]}}}}))
    };
    // The new ReplicaSet's pods all run on node-a.
    let old = cluster.api::<ReplicaSet>().create(&replica_set("old", 2, "node-a"), &PostParams::default()).expect("rs");
    let new = cluster.api::<ReplicaSet>().create(&replica_set("new", 3, "node-a"), &PostParams::default()).expect("rs");
    assert_eq!(
        Cluster::names(&cluster.wait_owned(&uid_of(&old.metadata), 2)),
        ["old-a", "old-b"].map(String::from).into()
    );
    cluster.wait_owned(&uid_of(&new.metadata), 3);
    for name in ["web-old", "web-new"] {
        wait_rs(&cluster, name, "every pod ready", |s| s.ready_replicas == Some(s.replicas));
    }
    cluster.scale("web-old", 1);
    eventually("the pod beside the new ReplicaSet's pods deleted", || {
        let deleted = cluster.event_messages("default", "web-old", "SuccessfulDelete");
        (!deleted.is_empty()).then_some(deleted)
    });
    assert_eq!(cluster.event_messages("default", "web-old", "SuccessfulDelete"), ["Deleted pod: old-a"]);
}
