//! The statefulset-controller on both backends, with the simulated kubelets running its pods and
//! the binder binding the simulated provisioner's volumes, attached by the attach/detach controller: an OrderedReady set comes up one ordinal at a
//! time with its claims bound, scales up and down from the highest ordinal keeping its claims;
//! Parallel with `spec.ordinals.start`; a failed pod is recreated and a controlled non-member
//! released; a partitioned RollingUpdate
//! and OnDelete; the claims' owner references under a retention policy, collected by the
//! garbage collector; a revision written by v1.33 kept (StatefulSetSemanticRevisionComparison),
//! or replaced with the gate off.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kcm::app::controllers::named;
use kcm::client::{Api, Client, DeleteParams, ListParams, Patch, PostParams};
use kcm::controllers::history::{hash_revision, template_patch};
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, eventually, from};

fn stateful_set(name: &str, replicas: i32, extra: Value) -> StatefulSet {
    let mut spec = json!({
        "replicas": replicas,
        "serviceName": "nginx",
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}},
        "volumeClaimTemplates": [{"metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}}}]
    });
    if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), extra) {
        spec.extend(extra);
    }
    from(json!({"metadata": {"name": name}, "spec": spec}))
}

fn start(backend: Backend) -> Cluster {
    let controllers = [
        named("statefulset-controller"),
        named("persistentvolume-binder-controller"),
        named("persistentvolume-attach-detach-controller"),
    ];
    harness::with(&controllers).on(backend).start()
}

fn start_with_gc(backend: Backend) -> Cluster {
    let controllers = [
        named("statefulset-controller"),
        named("garbage-collector-controller"),
        named("persistentvolume-binder-controller"),
        named("persistentvolume-attach-detach-controller"),
    ];
    harness::with(&controllers).on(backend).start()
}

fn pods(cluster: &Cluster, app: &str) -> BTreeMap<String, Pod> {
    let params = ListParams { label_selector: Some(format!("app={app}")), ..Default::default() };
    let list = cluster.api::<Pod>().list(&params).expect("pods").items;
    list.into_iter().map(|p| (p.metadata.name.clone().unwrap_or_default(), p)).collect()
}

fn ready(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    status.and_then(|s| s.phase.as_deref()) == Some("Running")
        && status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn claim(cluster: &Cluster, name: &str) -> Option<PersistentVolumeClaim> {
    cluster.api::<PersistentVolumeClaim>().get_opt(name).expect("claim read")
}

fn bound(claim: &PersistentVolumeClaim) -> bool {
    claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
}

fn revision(pod: &Pod) -> String {
    pod.metadata.labels.clone().unwrap_or_default().get("controller-revision-hash").cloned().unwrap_or_default()
}

/// The set once `check` holds of its status.
fn wait_status(cluster: &Cluster, name: &str, what: &str, check: impl Fn(&StatefulSet) -> bool) -> StatefulSet {
    let sets = cluster.api::<StatefulSet>();
    eventually(&format!("statefulset {name}: {what}"), || sets.get(name).ok().filter(|s| check(s)))
}

fn counts(set: &StatefulSet) -> (i32, i32, i32, i32, i32) {
    let s = set.status.clone().unwrap_or_default();
    let n = |v: Option<i32>| v.unwrap_or(0);
    (s.replicas, n(s.ready_replicas), n(s.available_replicas), n(s.current_replicas), n(s.updated_replicas))
}

fn scale(cluster: &Cluster, name: &str, replicas: i32) {
    let patch = Patch::Merge(json!({"spec": {"replicas": replicas}}));
    cluster.api::<StatefulSet>().patch(name, &patch, &PostParams::default()).expect("scaled");
}

/// Waits until exactly `names` exist (all Running and Ready), checking at every look that no
/// pod exists unless the ones before it are Ready (OrderedReady) and, going down, that a pod is
/// never gone while a higher ordinal still exists.
fn wait_ordered(cluster: &Cluster, app: &str, names: &[String]) {
    eventually(&format!("pods {names:?} ready, in order"), || {
        let pods = pods(cluster, app);
        let ordinals: Vec<i64> = pods.keys().filter_map(|n| n.rsplit_once('-')?.1.parse().ok()).collect();
        let highest = ordinals.iter().max().copied().unwrap_or(-1);
        for ordinal in 0..highest {
            let name = format!("{app}-{ordinal}");
            let pod = pods.get(&name);
            assert!(pod.is_some(), "{name} is missing while {app}-{highest} exists");
            if ordinal + 1 == highest {
                assert!(pod.is_some_and(ready), "{app}-{highest} exists before {name} is Ready");
            }
        }
        let all_ready = pods.values().all(ready);
        (pods.keys().cloned().collect::<Vec<_>>() == names && all_ready).then_some(())
    });
}

fn names(app: &str, ordinals: std::ops::Range<i64>) -> Vec<String> {
    ordinals.map(|i| format!("{app}-{i}")).collect()
}

on_both_backends!(an_ordered_set_comes_up_in_order_and_scales_from_the_highest_ordinal);
fn an_ordered_set_comes_up_in_order_and_scales_from_the_highest_ordinal(backend: Backend) {
    let cluster = start(backend);
    let set = cluster.api::<StatefulSet>().create(&stateful_set("web", 3, json!({})), &PostParams::default());
    let uid = set.expect("created").metadata.uid.expect("a uid");
    wait_ordered(&cluster, "web", &names("web", 0..3));
    let done = wait_status(&cluster, "web", "3 ready", |s| counts(s) == (3, 3, 3, 3, 3));
    let status = done.status.clone().expect("a status");
    assert_eq!(status.current_revision, status.update_revision);
    assert_eq!(status.observed_generation, done.metadata.generation);
    assert_eq!(status.collision_count, Some(0));
    let revision_name = status.update_revision.clone().expect("an update revision");

    for (name, pod) in pods(&cluster, "web") {
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let ordinal = name.rsplit_once('-').expect("an ordinal").1.to_string();
        assert_eq!(labels.get("statefulset.kubernetes.io/pod-name"), Some(&name));
        assert_eq!(labels.get("apps.kubernetes.io/pod-index"), Some(&ordinal));
        assert_eq!(labels["controller-revision-hash"], revision_name);
        let spec = pod.spec.clone().expect("a spec");
        assert_eq!((spec.hostname.as_deref(), spec.subdomain.as_deref()), (Some(name.as_str()), Some("nginx")));
        let volume = &spec.volumes.expect("volumes")[0];
        assert_eq!(volume.name, "data");
        assert_eq!(volume.persistent_volume_claim.as_ref().map(|c| c.claim_name.clone()), Some(format!("data-{name}")));
        let owner = &pod.metadata.owner_references.clone().expect("an owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("StatefulSet", uid.as_str(), Some(true))
        );
        let claim = claim(&cluster, &format!("data-{name}")).expect("its claim");
        assert!(bound(&claim), "data-{name} is bound");
        assert_eq!(claim.metadata.labels.clone().unwrap_or_default().get("app").map(String::as_str), Some("web"));
        assert!(claim.metadata.owner_references.unwrap_or_default().is_empty(), "Retain: no owner");
    }
    let revisions = cluster.api::<ControllerRevision>().list(&Default::default()).expect("revisions").items;
    assert_eq!(revisions.len(), 1);
    assert_eq!(revisions[0].metadata.name.as_deref(), Some(revision_name.as_str()));
    assert_eq!(revisions[0].revision, 1);
    eventually("the creation Events", || {
        let created = cluster.event_messages("default", "web", "SuccessfulCreate");
        let expected = [
            "Create Claim data-web-0 Pod web-0 in StatefulSet web success",
            "Create Pod web-0 in StatefulSet web successful",
            "Create Pod web-2 in StatefulSet web successful",
        ];
        expected.iter().all(|m| created.iter().any(|c| c == m)).then_some(())
    });

    scale(&cluster, "web", 5);
    wait_ordered(&cluster, "web", &names("web", 0..5));
    wait_status(&cluster, "web", "5 ready", |s| counts(s) == (5, 5, 5, 5, 5));
    scale(&cluster, "web", 2);
    wait_ordered(&cluster, "web", &names("web", 0..2));
    wait_status(&cluster, "web", "2 ready", |s| counts(s) == (2, 2, 2, 2, 2));
    for i in 0..5 {
        assert!(claim(&cluster, &format!("data-web-{i}")).is_some_and(|c| bound(&c)), "data-web-{i} kept");
    }
    eventually("the deletion Events", || {
        let deleted = cluster.event_messages("default", "web", "SuccessfulDelete");
        let expected: Vec<String> =
            (2..5).map(|i| format!("Delete Pod web-{i} in StatefulSet web successful")).collect();
        expected.iter().all(|m| deleted.contains(m)).then_some(())
    });
}

on_both_backends!(a_parallel_set_starts_at_its_start_ordinal);
fn a_parallel_set_starts_at_its_start_ordinal(backend: Backend) {
    let cluster = start(backend);
    let extra = json!({"podManagementPolicy": "Parallel", "ordinals": {"start": 3},
        "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"storageClassName": "standard",
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}}}]});
    cluster.api::<StatefulSet>().create(&stateful_set("par", 3, extra), &PostParams::default()).expect("created");
    wait_status(&cluster, "par", "3 ready", |s| counts(s) == (3, 3, 3, 3, 3));
    assert_eq!(pods(&cluster, "par").keys().cloned().collect::<Vec<_>>(), names("par", 3..6));
    for i in 3..6 {
        assert!(claim(&cluster, &format!("data-par-{i}")).is_some_and(|c| bound(&c)));
    }
    // Scaling down removes the highest ordinals, at once.
    scale(&cluster, "par", 1);
    wait_status(&cluster, "par", "1 replica", |s| counts(s) == (1, 1, 1, 1, 1));
    eventually("only par-3 left", || {
        (pods(&cluster, "par").keys().cloned().collect::<Vec<_>>() == ["par-3"]).then_some(())
    });
}

on_both_backends!(a_failed_pod_is_recreated);
fn a_failed_pod_is_recreated(backend: Backend) {
    let cluster = start(backend);
    cluster.api::<StatefulSet>().create(&stateful_set("db", 2, json!({})), &PostParams::default()).expect("created");
    wait_status(&cluster, "db", "2 ready", |s| counts(s) == (2, 2, 2, 2, 2));
    let old = pods(&cluster, "db")["db-1"].metadata.uid.clone();
    cluster.simulated().fail_pod("default", "db-1").expect("db-1 fails");
    eventually("db-1 replaced and ready", || {
        let pod = pods(&cluster, "db").remove("db-1")?;
        (pod.metadata.uid != old && ready(&pod)).then_some(())
    });
    eventually("the deletion Event", || {
        let deleted = cluster.event_messages("default", "db", "SuccessfulDelete");
        deleted.contains(&"Delete Pod db-1 in StatefulSet db successful".to_string()).then_some(())
    });

    // A pod the set controls but whose name makes it no member is released, as upstream's
    // ClaimPods filter releases it.
    let set = cluster.api::<StatefulSet>().get("db").expect("the set");
    let owner = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": set.metadata.uid,
        "controller": true, "blockOwnerDeletion": true});
    let stranger: Pod =
        from(json!({"metadata": {"name": "db-extra", "labels": {"app": "db"}, "ownerReferences": [owner]},
        "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}));
    cluster.api::<Pod>().create(&stranger, &PostParams::default()).expect("db-extra created");
    cluster
        .api::<StatefulSet>()
        .patch("db", &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})), &PostParams::default())
        .expect("the set touched");
    eventually("db-extra released", || {
        let pod = pods(&cluster, "db").remove("db-extra")?;
        pod.metadata.owner_references.unwrap_or_default().is_empty().then_some(())
    });
}

fn change_template(cluster: &Cluster, name: &str) {
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {"version": "2"}}}}});
    cluster.api::<StatefulSet>().patch(name, &Patch::Merge(patch), &PostParams::default()).expect("template changed");
}

on_both_backends!(a_partitioned_rolling_update_stops_at_the_partition);
fn a_partitioned_rolling_update_stops_at_the_partition(backend: Backend) {
    let cluster = start(backend);
    let extra = json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}});
    cluster.api::<StatefulSet>().create(&stateful_set("roll", 3, extra), &PostParams::default()).expect("created");
    let before = wait_status(&cluster, "roll", "3 ready", |s| counts(s) == (3, 3, 3, 3, 3));
    let first = before.status.and_then(|s| s.current_revision).expect("a revision");
    change_template(&cluster, "roll");
    let partial = wait_status(&cluster, "roll", "roll-2 updated", |s| {
        counts(s) == (3, 3, 3, 2, 1) && s.status.as_ref().and_then(|s| s.update_revision.as_ref()) != Some(&first)
    });
    let second = partial.status.as_ref().and_then(|s| s.update_revision.clone()).expect("an update revision");
    assert_eq!(partial.status.as_ref().and_then(|s| s.current_revision.clone()), Some(first.clone()));
    let pods_now = pods(&cluster, "roll");
    assert_eq!(revision(&pods_now["roll-2"]), second);
    assert_eq!(revision(&pods_now["roll-0"]), first);
    assert_eq!(revision(&pods_now["roll-1"]), first);
    let revisions = cluster.api::<ControllerRevision>().list(&Default::default()).expect("revisions").items;
    let mut numbered: Vec<(i64, String)> =
        revisions.iter().map(|r| (r.revision, r.metadata.name.clone().unwrap_or_default())).collect();
    numbered.sort();
    assert_eq!(numbered, [(1, first.clone()), (2, second.clone())]);

    let patch = json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}});
    cluster.api::<StatefulSet>().patch("roll", &Patch::Merge(patch), &PostParams::default()).expect("partition 0");
    let done = wait_status(&cluster, "roll", "the rollout completes", |s| {
        counts(s) == (3, 3, 3, 3, 3) && s.status.as_ref().and_then(|s| s.current_revision.as_ref()) == Some(&second)
    });
    assert_eq!(done.status.and_then(|s| s.update_revision), Some(second.clone()));
    assert!(pods(&cluster, "roll").values().all(|p| revision(p) == second));
}

on_both_backends!(on_delete_replaces_only_deleted_pods);
fn on_delete_replaces_only_deleted_pods(backend: Backend) {
    let cluster = start(backend);
    let extra = json!({"updateStrategy": {"type": "OnDelete"}});
    cluster.api::<StatefulSet>().create(&stateful_set("od", 2, extra), &PostParams::default()).expect("created");
    let before = wait_status(&cluster, "od", "2 ready", |s| counts(s) == (2, 2, 2, 2, 2));
    let first = before.status.and_then(|s| s.current_revision).expect("a revision");
    change_template(&cluster, "od");
    let changed = wait_status(&cluster, "od", "a new update revision", |s| {
        s.status.as_ref().and_then(|s| s.update_revision.as_ref()).is_some_and(|r| r != &first)
            && s.status.as_ref().and_then(|s| s.observed_generation) == s.metadata.generation
    });
    assert_eq!(counts(&changed), (2, 2, 2, 2, 0), "nothing replaced");
    let second = changed.status.and_then(|s| s.update_revision).expect("an update revision");
    cluster.api::<Pod>().delete("od-0", &DeleteParams::default()).expect("od-0 deleted");
    wait_status(&cluster, "od", "od-0 replaced", |s| counts(s) == (2, 2, 2, 1, 1));
    let pods_now = pods(&cluster, "od");
    assert_eq!(revision(&pods_now["od-0"]), second);
    assert_eq!(revision(&pods_now["od-1"]), first);
}

fn owner_kinds(claim: &PersistentVolumeClaim) -> Vec<String> {
    claim.metadata.owner_references.iter().flatten().map(|r| r.kind.clone()).collect()
}

/// Gone, or being deleted (kube-apiserver's StorageObjectInUseProtection holds deleted claims
/// until the pvc-protection controller, not selected here, releases them).
fn deleted(claim: Option<PersistentVolumeClaim>) -> bool {
    claim.is_none_or(|c| c.metadata.deletion_timestamp.is_some())
}

on_both_backends!(the_retention_policy_hands_claims_to_the_garbage_collector);
fn the_retention_policy_hands_claims_to_the_garbage_collector(backend: Backend) {
    let cluster = start_with_gc(backend);
    let extra = json!({"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Delete"}});
    cluster.api::<StatefulSet>().create(&stateful_set("ret", 3, extra), &PostParams::default()).expect("created");
    wait_status(&cluster, "ret", "3 ready", |s| counts(s) == (3, 3, 3, 3, 3));
    for i in 0..3 {
        let name = format!("data-ret-{i}");
        eventually(&format!("{name} owned by the set"), || {
            claim(&cluster, &name).filter(|c| owner_kinds(c) == ["StatefulSet"]).map(|_| ())
        });
    }
    scale(&cluster, "ret", 1);
    wait_status(&cluster, "ret", "1 replica", |s| counts(s) == (1, 1, 1, 1, 1));
    eventually("the scaled-down claims collected", || {
        (deleted(claim(&cluster, "data-ret-1")) && deleted(claim(&cluster, "data-ret-2"))).then_some(())
    });
    assert_eq!(claim(&cluster, "data-ret-0").map(|c| owner_kinds(&c)), Some(vec!["StatefulSet".to_string()]));

    cluster.api::<StatefulSet>().delete("ret", &DeleteParams::default()).expect("set deleted");
    eventually("the pods and claim collected with the set", || {
        (pods(&cluster, "ret").is_empty() && deleted(claim(&cluster, "data-ret-0"))).then_some(())
    });
}

on_both_backends!(claims_of_scaled_down_pods_are_handed_to_their_pods);
fn claims_of_scaled_down_pods_are_handed_to_their_pods(backend: Backend) {
    // No garbage collector: the owner references stay to be seen.
    let cluster = start(backend);
    let extra = json!({"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Delete"}});
    cluster.api::<StatefulSet>().create(&stateful_set("sc", 2, extra), &PostParams::default()).expect("created");
    wait_status(&cluster, "sc", "2 ready", |s| counts(s) == (2, 2, 2, 2, 2));
    let pod_uid = pods(&cluster, "sc")["sc-1"].metadata.uid.clone().expect("a uid");
    scale(&cluster, "sc", 1);
    let claim_1 = eventually("data-sc-1 owned by its pod", || {
        claim(&cluster, "data-sc-1").filter(|c| !c.metadata.owner_references.clone().unwrap_or_default().is_empty())
    });
    let owners = claim_1.metadata.owner_references.expect("owners");
    assert_eq!(owners.len(), 1);
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].name.as_str(), owners[0].uid.as_str(), owners[0].controller),
        ("Pod", "sc-1", pod_uid.as_str(), Some(true))
    );
    wait_status(&cluster, "sc", "1 replica", |s| counts(s) == (1, 1, 1, 1, 1));
    assert!(claim(&cluster, "data-sc-0").is_some_and(|c| owner_kinds(&c).is_empty()), "data-sc-0 kept unowned");
}

/// Creates StatefulSet `name` (one replica) with the revision upstream v1.33 made of it, as its
/// current and update revision: the template's patch with `metadata.creationTimestamp: null`
/// (v1.34+ leaves the zero time out), named `<set>-<hash of those bytes>`. Returns that name.
fn create_with_v133_revision(client: &Client, name: &str) -> String {
    let sets = Api::<StatefulSet>::namespaced(client, "default");
    let set = sets.create(&stateful_set(name, 1, json!({})), &PostParams::default()).expect("created");
    let mut data = template_patch(&set.spec.as_ref().expect("a spec").template);
    data["spec"]["template"]["metadata"]["creationTimestamp"] = Value::Null;
    let hash = hash_revision(&data, Some(0));
    let revision_name = format!("{name}-{hash}");
    let owner = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name, "uid": set.metadata.uid,
        "controller": true, "blockOwnerDeletion": true});
    let revision: ControllerRevision = from(json!({
        "metadata": {"name": revision_name, "labels": {"app": name, "controller.kubernetes.io/hash": hash},
            "ownerReferences": [owner]},
        "data": data, "revision": 1}));
    let revisions = Api::<ControllerRevision>::namespaced(client, "default");
    revisions.create(&revision, &PostParams::default()).expect("the v1.33 revision created");
    let status = json!({"status": {"observedGeneration": 1, "replicas": 0, "collisionCount": 0,
        "currentRevision": revision_name, "updateRevision": revision_name}});
    sets.patch_status(name, &Patch::Merge(status), &PostParams::default()).expect("the status set");
    revision_name
}

fn start_with_v133_revision(backend: Backend, flags: &[&str]) -> (Cluster, String) {
    let mut revision_name = String::new();
    let controllers = [
        named("statefulset-controller"),
        named("persistentvolume-binder-controller"),
        named("persistentvolume-attach-detach-controller"),
    ];
    let cluster = harness::with(&controllers)
        .flags(flags)
        .on(backend)
        .start_with(|client, _| revision_name = create_with_v133_revision(client, "old"));
    (cluster, revision_name)
}

on_both_backends!(a_revision_written_by_v1_33_is_kept);
fn a_revision_written_by_v1_33_is_kept(backend: Backend) {
    // StatefulSetSemanticRevisionComparison (on): restoring the latest revision derives the
    // set's revision, so it stays the update revision although its bytes differ.
    let (cluster, v133) = start_with_v133_revision(backend, &[]);
    let done = wait_status(&cluster, "old", "1 ready", |s| counts(s) == (1, 1, 1, 1, 1));
    let status = done.status.expect("a status");
    assert_eq!((status.current_revision.as_ref(), status.update_revision.as_ref()), (Some(&v133), Some(&v133)));
    assert_eq!(revision(&pods(&cluster, "old")["old-0"]), v133);
    let revisions = cluster.api::<ControllerRevision>().list(&Default::default()).expect("revisions").items;
    let names: Vec<_> = revisions.iter().map(|r| (r.metadata.name.clone().unwrap_or_default(), r.revision)).collect();
    assert_eq!(names, [(v133, 1)], "no new revision");
}

on_both_backends!(without_semantic_comparison_a_v1_33_revision_is_replaced);
fn without_semantic_comparison_a_v1_33_revision_is_replaced(backend: Backend) {
    let flags = ["--feature-gates=StatefulSetSemanticRevisionComparison=false"];
    let (cluster, v133) = start_with_v133_revision(backend, &flags);
    let done = wait_status(&cluster, "old", "1 ready, updated", |s| {
        counts(s) == (1, 1, 1, 1, 1) && s.status.as_ref().and_then(|s| s.update_revision.as_ref()) != Some(&v133)
    });
    let new = done.status.and_then(|s| s.update_revision).expect("an update revision");
    let set = cluster.api::<StatefulSet>().get("old").expect("the set");
    let hash = hash_revision(&template_patch(&set.spec.expect("a spec").template), Some(0));
    assert_eq!(new, format!("old-{hash}"));
    assert_eq!(revision(&pods(&cluster, "old")["old-0"]), new);
    let mut revisions = cluster.api::<ControllerRevision>().list(&Default::default()).expect("revisions").items;
    revisions.sort_by_key(|r| r.revision);
    let names: Vec<_> = revisions.iter().map(|r| (r.metadata.name.clone().unwrap_or_default(), r.revision)).collect();
    assert_eq!(names, [(v133, 1), (new, 2)]);
}
