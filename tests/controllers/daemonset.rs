//! The daemonset-controller on both backends: one pod per eligible node (taints, tolerations,
//! node selectors), pods following nodes that join, leave or change labels, failed daemon pods
//! replaced, rolling updates with maxUnavailable and maxSurge, OnDelete, minReadySeconds, an
//! orphan adopted, and the revision history (`<ds>-<hash>` ControllerRevisions, the `controller-revision-hash` label, pruning;
//! a revision written by v1.33 replaced without rolling its pods); the misscheduled count recomputed when a taint clears.
//!
//! Nothing here removes the `node.kubernetes.io/not-ready` taint new Nodes get (no node
//! lifecycle controller runs), so each test removes it from its nodes as that controller would.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kcm::app::controllers::named;
use kcm::client::{Api, Client, DeleteParams, ListParams, Patch, PostParams};
use kcm::controllers::history::template_patch;
use kcm::controllers::podutil::template_hash::compute_hash;
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, eventually, from};

const HASH: &str = "controller-revision-hash";

/// Sets the taints of `node` (`null`: none, which removes the not-ready one new Nodes get).
fn set_taints(client: &Client, node: &str, taints: Value) {
    let patch = json!({"spec": {"taints": taints}});
    Api::<Node>::cluster(client).patch(node, &Patch::Merge(patch), &PostParams::default()).expect("taints set");
}

fn start(backend: Backend, nodes: &[&str]) -> Cluster {
    start_with_taints(backend, nodes, &[])
}

/// Starts the controller on `nodes` untainted but for the `taints` given per node. Set before the
/// controller starts, they are in its first list of Nodes: a taint set after it would race the
/// DaemonSet created next, as its Node and DaemonSet informers may see the two writes in either
/// order, and a pod created for a node whose NoSchedule taint came too late stays there (only a
/// NoExecute taint evicts a daemon pod).
fn start_with_taints(backend: Backend, nodes: &[&str], taints: &[(&str, Value)]) -> Cluster {
    start_with_taints_and(backend, nodes, taints, |_| ())
}

/// [`start_with_taints`], with what `prepare` creates also in the controller's first lists.
fn start_with_taints_and(
    backend: Backend,
    nodes: &[&str],
    taints: &[(&str, Value)],
    prepare: impl FnOnce(&Client),
) -> Cluster {
    harness::with(&[named("daemonset-controller")]).on(backend).nodes(nodes).start_with(|client, _| {
        for node in Api::<Node>::cluster(client).list(&Default::default()).expect("nodes").items {
            let name = node.metadata.name.unwrap_or_default();
            let wanted = taints.iter().find(|(tainted, _)| *tainted == name).map(|(_, t)| t.clone());
            set_taints(client, &name, wanted.unwrap_or(Value::Null));
        }
        prepare(client);
    })
}

fn daemon_set(name: &str, extra: Value) -> DaemonSet {
    let mut ds = json!({"metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"terminationGracePeriodSeconds": 1,
                                       "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}}});
    harness::merge_json(&mut ds["spec"], extra);
    from(ds)
}

fn create(cluster: &Cluster, ds: DaemonSet) {
    cluster.api::<DaemonSet>().create(&ds, &PostParams::default()).expect("created");
}

/// The pods of `name` not being deleted.
fn live_pods(cluster: &Cluster, name: &str) -> Vec<Pod> {
    let params = ListParams { label_selector: Some(format!("app={name}")), ..Default::default() };
    let pods = cluster.api::<Pod>().list(&params).expect("pods").items;
    pods.into_iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect()
}

fn node_of(pod: &Pod) -> String {
    pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default()
}

fn ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.into_iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True")
}

fn hash_of(pod: &Pod) -> String {
    pod.metadata.labels.as_ref().and_then(|l| l.get(HASH)).cloned().unwrap_or_default()
}

/// Waits until `name` runs one ready pod on each of `nodes` and nowhere else, all of one
/// revision, with the status saying so; returns the pods' hash.
fn wait_rolled_out(cluster: &Cluster, name: &str, nodes: &[&str]) -> String {
    let want: BTreeSet<String> = nodes.iter().map(|n| n.to_string()).collect();
    let count = nodes.len() as i32;
    harness::eventually_seen(&format!("{name} rolled out on {nodes:?}"), || {
        let ds = cluster.api::<DaemonSet>().get(name).map_err(|e| e.to_string())?;
        let status = ds.status.clone().ok_or("no status")?;
        let pods = live_pods(cluster, name);
        let on: BTreeSet<String> = pods.iter().map(node_of).collect();
        let hashes: BTreeSet<String> = pods.iter().map(hash_of).collect();
        let done = on == want
            && pods.len() == nodes.len()
            && pods.iter().all(ready)
            && hashes.len() == 1
            && status.observed_generation == ds.metadata.generation
            && status.desired_number_scheduled == count
            && status.current_number_scheduled == count
            && status.number_ready == count
            && status.updated_number_scheduled.unwrap_or(0) == count
            && status.number_available.unwrap_or(0) == count
            && status.number_unavailable.unwrap_or(0) == 0
            && status.number_misscheduled == 0;
        if done {
            return Ok(hashes.into_iter().next().unwrap_or_default());
        }
        let pods: Vec<String> = pods
            .iter()
            .map(|p| {
                let name = p.metadata.name.as_deref().unwrap_or("");
                format!("{name} on {:?} hash {:?} ready {}", node_of(p), hash_of(p), ready(p))
            })
            .collect();
        Err(format!(
            "pods {pods:?}; status for generation {:?}: observedGeneration {:?}, desired {}, current {}, ready {}, \
             updated {:?}, available {:?}, unavailable {:?}, misscheduled {}",
            ds.metadata.generation,
            status.observed_generation,
            status.desired_number_scheduled,
            status.current_number_scheduled,
            status.number_ready,
            status.updated_number_scheduled,
            status.number_available,
            status.number_unavailable,
            status.number_misscheduled
        ))
    })
}

fn revisions(cluster: &Cluster) -> Vec<ControllerRevision> {
    let mut revisions = cluster.api::<ControllerRevision>().list(&Default::default()).expect("revisions").items;
    revisions.sort_by_key(|r| r.revision);
    revisions
}

fn set_image(cluster: &Cluster, name: &str, image: &str) {
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": image}]}}}});
    cluster.api::<DaemonSet>().patch(name, &Patch::Strategic(patch), &PostParams::default()).expect("image set");
}

on_both_backends!(one_pod_runs_on_every_eligible_node);
fn one_pod_runs_on_every_eligible_node(backend: Backend) {
    let dedicated = json!([{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]);
    let cluster = start_with_taints(backend, &["node-a", "node-b", "node-c"], &[("node-c", dedicated)]);
    create(&cluster, daemon_set("agent", json!({})));
    let hash = wait_rolled_out(&cluster, "agent", &["node-a", "node-b"]);

    // Each pod is pinned to its node by affinity and tolerates the node conditions.
    for pod in live_pods(&cluster, "agent") {
        let spec = pod.spec.clone().expect("a spec");
        let required = spec.affinity.and_then(|a| a.node_affinity?.required_during_scheduling_ignored_during_execution);
        let term = &required.expect("required node affinity").node_selector_terms[0];
        let field = &term.match_fields.as_ref().expect("matchFields")[0];
        assert_eq!((field.key.as_str(), field.operator.as_str()), ("metadata.name", "In"));
        assert_eq!(field.values.as_deref(), Some(&[node_of(&pod)][..]));
        let tolerated: BTreeSet<String> = spec.tolerations.iter().flatten().filter_map(|t| t.key.clone()).collect();
        assert!(
            tolerated.contains("node.kubernetes.io/unschedulable")
                && tolerated.contains("node.kubernetes.io/not-ready")
        );
        assert!(pod.metadata.generate_name.as_deref() == Some("agent-"));
    }
    // The revision is `<ds>-<hash>`, numbered 1, labeled with the hash.
    let revisions = revisions(&cluster);
    assert_eq!(revisions.len(), 1);
    assert_eq!(revisions[0].metadata.name.as_deref(), Some(format!("agent-{hash}").as_str()));
    assert_eq!(revisions[0].revision, 1);
    assert_eq!(revisions[0].metadata.labels.as_ref().and_then(|l| l.get(HASH)), Some(&hash));
    // One SuccessfulCreate Event per pod, and none for another. The recorder's sink thread writes
    // them after the pods are created, so they may still be on their way.
    let pods: BTreeSet<String> = live_pods(&cluster, "agent")
        .iter()
        .map(|p| format!("Created pod: {}", p.metadata.name.as_deref().unwrap_or("")))
        .collect();
    harness::eventually_seen("a SuccessfulCreate Event for each pod", || {
        let events = cluster.event_messages("default", "agent", "SuccessfulCreate");
        let seen: BTreeSet<String> = events.iter().cloned().collect();
        assert!(seen.is_subset(&pods) && seen.len() == events.len(), "expected {pods:?}, got {events:?}");
        (seen == pods).then_some(()).ok_or_else(|| format!("expected {pods:?}, got {events:?}"))
    });

    // A DaemonSet tolerating the taint runs on the tainted node too.
    let tolerant = json!({"template": {"spec": {"tolerations": [{"key": "dedicated", "operator": "Exists"}]}}});
    create(&cluster, daemon_set("tolerant", tolerant));
    wait_rolled_out(&cluster, "tolerant", &["node-a", "node-b", "node-c"]);
}

on_both_backends!(a_node_selector_follows_node_labels);
fn a_node_selector_follows_node_labels(backend: Backend) {
    let cluster = start(backend, &["node-a", "node-b"]);
    let label = |node: &str, value: Value| {
        let patch = json!({"metadata": {"labels": {"role": value}}});
        Api::<Node>::cluster(&cluster.client)
            .patch(node, &Patch::Merge(patch), &PostParams::default())
            .expect("labeled");
    };
    label("node-b", json!("edge"));
    create(&cluster, daemon_set("edge", json!({"template": {"spec": {"nodeSelector": {"role": "edge"}}}})));
    wait_rolled_out(&cluster, "edge", &["node-b"]);
    label("node-a", json!("edge"));
    wait_rolled_out(&cluster, "edge", &["node-a", "node-b"]);
    // No longer selected: the pod goes.
    label("node-b", json!(null));
    wait_rolled_out(&cluster, "edge", &["node-a"]);
    assert!(!cluster.event_messages("default", "edge", "SuccessfulDelete").is_empty());
}

on_both_backends!(pods_follow_nodes_joining_and_leaving);
fn pods_follow_nodes_joining_and_leaving(backend: Backend) {
    let cluster = start(backend, &["node-a", "node-b"]);
    create(&cluster, daemon_set("agent", json!({})));
    wait_rolled_out(&cluster, "agent", &["node-a", "node-b"]);

    cluster.simulated().add_node("node-c").expect("node-c added");
    set_taints(&cluster.client, "node-c", json!(null));
    wait_rolled_out(&cluster, "agent", &["node-a", "node-b", "node-c"]);

    // node-a leaves; its pod stays until the pod GC deletes it (done here by hand, as the pod
    // GC would once its quarantine ends) and is not replaced.
    cluster.simulated().remove_node("node-a").expect("node-a removed");
    // A Node's deletion does not sync a DaemonSet (upstream has no handler for it), and a pod
    // deleted while the controller's cache still had node-a would be replaced there for good;
    // so the DaemonSet is touched until a sync counts two nodes, which shows node-a has left
    // the cache.
    let mut touches = 0;
    eventually("node-a gone from the controller's nodes", || {
        touches += 1;
        let patch = json!({"metadata": {"annotations": {"example.com/touch": touches.to_string()}}});
        let ds = cluster.api::<DaemonSet>().patch("agent", &Patch::Merge(patch), &PostParams::default()).ok()?;
        let desired = ds.status.map(|s| s.desired_number_scheduled);
        (desired == Some(2)).then_some(())
    });
    let orphan = live_pods(&cluster, "agent").into_iter().find(|p| node_of(p) == "node-a").expect("the pod on node-a");
    let name = orphan.metadata.name.clone().expect("a name");
    let force = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
    cluster.api::<Pod>().delete(&name, &force).expect("deleted");
    wait_rolled_out(&cluster, "agent", &["node-b", "node-c"]);
}

on_both_backends!(a_failed_daemon_pod_is_replaced);
fn a_failed_daemon_pod_is_replaced(backend: Backend) {
    let cluster = start(backend, &["node-a"]);
    create(&cluster, daemon_set("agent", json!({})));
    wait_rolled_out(&cluster, "agent", &["node-a"]);
    let pod = live_pods(&cluster, "agent").remove(0);
    let name = pod.metadata.name.clone().expect("a name");
    cluster.simulated().fail_pod("default", &name).expect("the pod fails");
    let message = format!("Found failed daemon pod default/{name} on node node-a, will try to kill it");
    eventually("the FailedDaemonPod Event", || {
        cluster.event_messages("default", "agent", "FailedDaemonPod").contains(&message).then_some(())
    });
    eventually("a new pod", || {
        let pods = live_pods(&cluster, "agent");
        (pods.len() == 1 && pods[0].metadata.name.as_deref() != Some(&name) && ready(&pods[0])).then_some(())
    });
    wait_rolled_out(&cluster, "agent", &["node-a"]);
}

on_both_backends!(a_rolling_update_respects_max_unavailable);
fn a_rolling_update_respects_max_unavailable(backend: Backend) {
    let cluster = start(backend, &["node-a", "node-b"]);
    let strategy = json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}});
    create(&cluster, daemon_set("agent", strategy));
    let first = wait_rolled_out(&cluster, "agent", &["node-a", "node-b"]);
    set_image(&cluster, "agent", "registry.k8s.io/pause:3.9");
    let second = wait_rolled_out(&cluster, "agent", &["node-a", "node-b"]);
    assert_ne!(first, second);
    let revisions = revisions(&cluster);
    let named: Vec<(String, i64)> =
        revisions.iter().map(|r| (r.metadata.name.clone().unwrap_or_default(), r.revision)).collect();
    assert_eq!(named, [(format!("agent-{first}"), 1), (format!("agent-{second}"), 2)]);
    // Each old pod was deleted once, and none of the new ones.
    assert_eq!(cluster.event_messages("default", "agent", "SuccessfulDelete").len(), 2);
}

on_both_backends!(a_rolling_update_surges_one_pod_at_a_time);
fn a_rolling_update_surges_one_pod_at_a_time(backend: Backend) {
    let cluster = start(backend, &["node-a", "node-b"]);
    // minReadySeconds keeps each new pod beside the old one for 2 s at least.
    let strategy = json!({"minReadySeconds": 2,
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}});
    create(&cluster, daemon_set("agent", strategy));
    let first = wait_rolled_out(&cluster, "agent", &["node-a", "node-b"]);
    set_image(&cluster, "agent", "registry.k8s.io/pause:3.9");
    // A new pod starts beside an old one before the old one goes.
    eventually("a surge pod", || {
        let pods = live_pods(&cluster, "agent");
        (pods.len() == 3).then_some(())
    });
    let second = wait_rolled_out(&cluster, "agent", &["node-a", "node-b"]);
    assert_ne!(first, second);
    assert_eq!(revisions(&cluster).iter().map(|r| r.revision).collect::<Vec<_>>(), [1, 2]);
}

on_both_backends!(on_delete_replaces_only_deleted_pods);
fn on_delete_replaces_only_deleted_pods(backend: Backend) {
    let cluster = start(backend, &["node-a", "node-b"]);
    create(&cluster, daemon_set("agent", json!({"updateStrategy": {"type": "OnDelete"}})));
    let first = wait_rolled_out(&cluster, "agent", &["node-a", "node-b"]);
    set_image(&cluster, "agent", "registry.k8s.io/pause:3.9");
    let ds = eventually("the new generation observed", || {
        let ds = cluster.api::<DaemonSet>().get("agent").ok()?;
        let status = ds.status.clone()?;
        (status.observed_generation == ds.metadata.generation && revisions(&cluster).len() == 2).then_some(status)
    });
    assert_eq!(ds.updated_number_scheduled.unwrap_or(0), 0);
    assert!(live_pods(&cluster, "agent").iter().all(|p| hash_of(p) == first), "nothing rolled by itself");
    let doomed = live_pods(&cluster, "agent").into_iter().find(|p| node_of(p) == "node-a").expect("a pod on node-a");
    cluster
        .api::<Pod>()
        .delete(doomed.metadata.name.as_deref().unwrap_or(""), &DeleteParams::default())
        .expect("deleted");
    eventually("node-a's pod replaced with the new revision", || {
        let ds = cluster.api::<DaemonSet>().get("agent").ok()?;
        let pods = live_pods(&cluster, "agent");
        let new = pods.iter().find(|p| node_of(p) == "node-a" && hash_of(p) != first && ready(p));
        let updated = ds.status.and_then(|s| s.updated_number_scheduled).unwrap_or(0);
        (new.is_some() && pods.len() == 2 && updated == 1).then_some(())
    });
}

on_both_backends!(old_revisions_are_pruned_to_the_history_limit);
fn old_revisions_are_pruned_to_the_history_limit(backend: Backend) {
    let cluster = start(backend, &["node-a"]);
    create(&cluster, daemon_set("agent", json!({"revisionHistoryLimit": 1})));
    wait_rolled_out(&cluster, "agent", &["node-a"]);
    for image in ["registry.k8s.io/pause:3.9", "registry.k8s.io/pause:3.8"] {
        set_image(&cluster, "agent", image);
        wait_rolled_out(&cluster, "agent", &["node-a"]);
    }
    let current = hash_of(&live_pods(&cluster, "agent")[0]);
    let kept = eventually("one old revision kept", || {
        let revisions = revisions(&cluster);
        (revisions.len() == 2).then_some(revisions)
    });
    assert_eq!(kept.iter().map(|r| r.revision).collect::<Vec<_>>(), [2, 3]);
    assert_eq!(kept[1].metadata.name.as_deref(), Some(format!("agent-{current}").as_str()));
}

on_both_backends!(pods_count_as_available_after_min_ready_seconds);
fn pods_count_as_available_after_min_ready_seconds(backend: Backend) {
    let cluster = start(backend, &["node-a"]);
    create(&cluster, daemon_set("agent", json!({"minReadySeconds": 2})));
    // Nothing about the pod changes once it is ready: only the controller's requeue after
    // minReadySeconds makes it available.
    wait_rolled_out(&cluster, "agent", &["node-a"]);
    let pod = live_pods(&cluster, "agent").remove(0);
    let ready_since = pod
        .status
        .and_then(|s| s.conditions)
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .and_then(|c| c.last_transition_time)
        .expect("a ready time");
    let elapsed = jiff::Timestamp::now().as_second() - ready_since.0.as_second();
    assert!(elapsed >= 2, "available only {elapsed} s after becoming ready");
}

on_both_backends!(an_orphan_pod_on_a_node_is_adopted);
fn an_orphan_pod_on_a_node_is_adopted(backend: Backend) {
    // The orphan is in the controller's first list of pods: created after it started, it could
    // reach the pod cache after the DaemonSet's first sync had made node-a a pod of its own;
    // one of the two is then deleted, the orphan if both were made in the same second (the
    // name breaks the tie), as upstream's would.
    let cluster = start_with_taints_and(backend, &["node-a", "node-b"], &[], |client| {
        let orphan: Pod = from(json!({"metadata": {"name": "stray", "labels": {"app": "agent"}},
            "spec": {"nodeName": "node-a", "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}));
        Api::<Pod>::namespaced(client, "default").create(&orphan, &PostParams::default()).expect("created");
    });
    // OnDelete: the adopted pod, of no revision, is kept as it is.
    create(&cluster, daemon_set("agent", json!({"updateStrategy": {"type": "OnDelete"}})));
    let ds = cluster.api::<DaemonSet>().get("agent").expect("the DaemonSet");
    eventually("the orphan adopted and node-b given a pod", || {
        let pods = live_pods(&cluster, "agent");
        let stray = pods.iter().find(|p| p.metadata.name.as_deref() == Some("stray"))?;
        let owner = stray.metadata.owner_references.as_ref()?.first()?;
        let status = cluster.api::<DaemonSet>().get("agent").ok()?.status?;
        let done = owner.uid.as_str() == ds.metadata.uid.as_deref().unwrap_or("")
            && owner.controller == Some(true)
            && pods.len() == 2
            && pods.iter().any(|p| node_of(p) == "node-b" && ready(p))
            && status.current_number_scheduled == 2
            && status.updated_number_scheduled.unwrap_or(0) == 1;
        done.then_some(())
    });
}

on_both_backends!(the_misscheduled_count_clears_with_the_taint);
fn the_misscheduled_count_clears_with_the_taint(backend: Backend) {
    let cluster = start(backend, &["node-a", "node-b"]);
    create(&cluster, daemon_set("agent", json!({})));
    wait_rolled_out(&cluster, "agent", &["node-a", "node-b"]);
    let misscheduled = || cluster.api::<DaemonSet>().get("agent").ok()?.status.map(|s| s.number_misscheduled);

    // A NoSchedule taint leaves node-a's pod running, misscheduled. The node change alone does
    // not sync the DaemonSet (it neither wants a pod there nor has to remove one), so the
    // DaemonSet is touched until a sync has seen the taint.
    let taint = json!([{"key": "example.com/maintenance", "effect": "NoSchedule"}]);
    set_taints(&cluster.client, "node-a", taint);
    let mut touches = 0;
    eventually("node-a's pod counted misscheduled", || {
        touches += 1;
        let patch = json!({"metadata": {"annotations": {"example.com/touch": touches.to_string()}}});
        cluster.api::<DaemonSet>().patch("agent", &Patch::Merge(patch), &PostParams::default()).ok()?;
        (misscheduled()? == 1).then_some(())
    });
    assert_eq!(live_pods(&cluster, "agent").len(), 2, "NoSchedule evicts nothing");

    // Clearing the taint syncs it again by itself (v1.34+: a node with a pod of a DaemonSet that
    // counts misscheduled pods), and the count goes back to 0.
    set_taints(&cluster.client, "node-a", json!(null));
    eventually("the misscheduled count recomputed", || (misscheduled()? == 0).then_some(()));
    wait_rolled_out(&cluster, "agent", &["node-a", "node-b"]);
}

/// The hash upstream v1.33 gave the revision below (any value but v1.36's would do: the
/// controller matches revisions by their data).
const V133_HASH: &str = "5c9b8d7f46";

/// Creates DaemonSet `agent` with the revision upstream v1.33 made of it (its template's patch
/// with `metadata.creationTimestamp: null`, which v1.34+ leaves out) and that revision's pod on
/// `node`.
fn create_with_v133_revision(client: &Client, node: &str) {
    let ds =
        Api::<DaemonSet>::namespaced(client, "default").create(&daemon_set("agent", json!({})), &PostParams::default());
    let ds = ds.expect("created");
    let template = &ds.spec.as_ref().expect("a spec").template;
    let mut data = template_patch(template);
    data["spec"]["template"]["metadata"]["creationTimestamp"] = Value::Null;
    let owner = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": ds.metadata.uid,
        "controller": true, "blockOwnerDeletion": true});
    let revision: ControllerRevision = from(json!({
        "metadata": {"name": format!("agent-{V133_HASH}"), "labels": {"app": "agent", HASH: V133_HASH},
            "ownerReferences": [owner.clone()]},
        "data": data, "revision": 1}));
    let revisions = Api::<ControllerRevision>::namespaced(client, "default");
    revisions.create(&revision, &PostParams::default()).expect("the v1.33 revision created");
    let mut spec = serde_json::to_value(template.spec.as_ref().expect("a pod spec")).expect("a pod spec");
    spec["nodeName"] = json!(node);
    let pod: Pod = from(json!({
        "metadata": {"name": "agent-v133", "ownerReferences": [owner],
            "labels": {"app": "agent", HASH: V133_HASH, "pod-template-generation": "1"}},
        "spec": spec}));
    Api::<Pod>::namespaced(client, "default").create(&pod, &PostParams::default()).expect("its pod created");
}

on_both_backends!(a_revision_written_by_v1_33_is_replaced_without_rolling_its_pods);
fn a_revision_written_by_v1_33_is_replaced_without_rolling_its_pods(backend: Backend) {
    let cluster =
        harness::with(&[named("daemonset-controller")]).on(backend).nodes(&["node-a"]).start_with(|client, _| {
            set_taints(client, "node-a", Value::Null);
            create_with_v133_revision(client, "node-a");
        });
    // `Match` compares the data's bytes: the v1.33 revision is not the current one, so a new
    // revision is made, numbered after it.
    let ds = cluster.api::<DaemonSet>().get("agent").expect("the DaemonSet");
    let hash = compute_hash(&ds.spec.as_ref().expect("a spec").template, None);
    let expected = [(format!("agent-{V133_HASH}"), 1), (format!("agent-{hash}"), 2)];
    eventually("the new revision", || {
        let revisions = revisions(&cluster);
        let names: Vec<_> =
            revisions.iter().map(|r| (r.metadata.name.clone().unwrap_or_default(), r.revision)).collect();
        (names == expected).then_some(())
    });
    // The pod still carries the DaemonSet's template generation, so it counts as updated and
    // is kept with its old hash.
    eventually("the old pod counted updated and available", || {
        let status = cluster.api::<DaemonSet>().get("agent").ok()?.status?;
        let pods = live_pods(&cluster, "agent");
        let kept = pods.len() == 1 && pods[0].metadata.name.as_deref() == Some("agent-v133") && ready(&pods[0]);
        let counted = status.updated_number_scheduled == Some(1) && status.number_available == Some(1);
        (kept && counted && status.observed_generation == ds.metadata.generation).then_some(())
    });
    assert_eq!(hash_of(&live_pods(&cluster, "agent")[0]), V133_HASH);
}

/// The value of `daemonset_controller_stale_sync_skips_total{group="",resource="pods"}` in this
/// process's registry (the harness runs the controllers in-process); 0 before the first skip.
fn stale_pod_sync_skips() -> f64 {
    harness::metric_sample("daemonset_controller_stale_sync_skips_total{group=\"\",resource=\"pods\"}").unwrap_or(0.0)
}

/// v1.36's StaleControllerConsistencyDaemonSet (Beta, on): once the controller has created the
/// pods, its next syncs (the informers' resyncs from their stale cache, and the rate-limited
/// retries) are skipped and counted while the pod informer has not seen those creations; when
/// the watch events arrive the DaemonSet rolls out with one pod per node, created once.
#[test]
fn a_daemon_set_is_not_synced_until_its_informers_have_seen_its_pods() {
    let before = stale_pod_sync_skips();
    let nodes = ["node-a", "node-b"];
    let cluster = harness::with(&[named("daemonset-controller")])
        .nodes(&nodes)
        .flags(&["--min-resync-period=1s"])
        .start_with(|client, server| {
            for node in nodes {
                set_taints(client, node, Value::Null);
            }
            let held = daemon_set("held", json!({}));
            Api::<DaemonSet>::namespaced(client, "default").create(&held, &PostParams::default()).expect("created");
            // The informers list the DaemonSet, then see no change until released.
            server.sandbox().expect("the sandbox").faults().hold_watch_events(true);
        });
    eventually("a pod per node", || (live_pods(&cluster, "held").len() == 2).then_some(()));
    eventually("a sync skipped for the unseen pods", || (stale_pod_sync_skips() > before).then_some(()));
    assert_eq!(live_pods(&cluster, "held").len(), 2, "no pod created twice");

    cluster.sandbox().faults().hold_watch_events(false);
    wait_rolled_out(&cluster, "held", &nodes);
    let all = cluster.api::<Pod>().list(&ListParams::default()).expect("pods").items;
    assert_eq!(all.iter().filter(|p| p.metadata.name.as_deref().is_some_and(|n| n.starts_with("held-"))).count(), 2);
}
