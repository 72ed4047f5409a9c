//! The Deployment controller (with the ReplicaSet controller running its pods) against the
//! sandbox with simulated nodes: ReplicaSets named by pod-template-hash (cut to fit for long
//! names), scaling, rolling and recreate rollouts within their bounds, pause, rollback, history
//! cleanup, the progress deadline, `terminatingReplicas`, a controller restart mid-rollout and the
//! adoption of an upstream-named ReplicaSet.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Event, Pod};
use kcm::app::controllers::named;
use kcm::client::{Api, Client, Patch, PostParams};
use kcm::controllers::podutil::template_hash::compute_hash;
use kcm_sandbox::sandbox::nodes::NodeOptions;
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, TestServer, from};

/// Generous: the machine may be loaded.
const DEADLINE: Duration = Duration::from_secs(90);

const REVISION: &str = "deployment.kubernetes.io/revision";

/// [`start_on_with`] on the sandbox.
fn start_with(prepare: impl FnOnce(&Client)) -> Cluster {
    start_on_with(Backend::Sandbox, prepare)
}

fn start_on(backend: Backend) -> Cluster {
    start_on_with(backend, |_| ())
}

/// Two simulated nodes whose pods take a moment to start, so that rollouts move in visible
/// steps, and both controllers; `prepare` runs before the controllers start.
fn start_on_with(backend: Backend, prepare: impl FnOnce(&Client)) -> Cluster {
    let nodes = NodeOptions { pod_start_delay: Duration::from_millis(500), ..harness::fast_nodes() };
    harness::with(&[named("deployment-controller"), named("replicaset-controller")])
        .on(backend)
        .names(&["deployment-controller", "replicaset-controller"])
        .node_options(nodes)
        .deadline(DEADLINE)
        .start_with(|client, _| prepare(client))
}

fn start() -> Cluster {
    start_with(|_| ())
}

fn eventually<T>(what: &str, check: impl FnMut() -> Option<T>) -> T {
    harness::eventually_within(DEADLINE, what, check)
}

/// A Deployment `name` (label app=name) of nginx `image`; `extra` is merged into its spec.
fn deployment(name: &str, replicas: i32, image: &str, extra: Value) -> Deployment {
    let mut spec = json!({
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "app", "image": image}]}},
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    from(json!({"metadata": {"name": name}, "spec": spec}))
}

fn deployments(client: &Client) -> Api<Deployment> {
    Api::namespaced(client, "default")
}

fn replica_sets_api(client: &Client) -> Api<ReplicaSet> {
    Api::namespaced(client, "default")
}

fn annotation(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, key: &str) -> Option<String> {
    meta.annotations.as_ref().and_then(|a| a.get(key)).cloned()
}

fn condition(d: &Deployment, type_: &str) -> Option<(String, String, String)> {
    let conditions = d.status.as_ref()?.conditions.as_ref()?;
    let c = conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone().unwrap_or_default(), c.message.clone().unwrap_or_default()))
}

fn rs_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

fn is_ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.into_iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True")
}

/// This module's helpers on the harness's `Cluster`. A trait rather than an inherent `impl`: the
/// controller modules share one test binary, where two modules' inherent methods of one name
/// would collide.
trait ClusterExt {
    fn create(&self, d: &Deployment) -> Deployment;
    fn get(&self, name: &str) -> Deployment;
    fn patch(&self, name: &str, patch: Value) -> Deployment;
    fn set_image(&self, name: &str, image: &str) -> Deployment;
    fn replica_sets(&self, d: &Deployment) -> Vec<ReplicaSet>;
    fn live_pods(&self, app: &str) -> Vec<Pod>;
    fn wait_complete(&self, name: &str) -> Deployment;
    fn events(&self, name: &str) -> Vec<(String, String)>;
    fn wait_event(&self, name: &str, reason: &str, message: &str);
}

impl ClusterExt for Cluster {
    fn create(&self, d: &Deployment) -> Deployment {
        deployments(&self.client).create(d, &PostParams::default()).expect("deployment created")
    }

    fn get(&self, name: &str) -> Deployment {
        deployments(&self.client).get(name).expect("deployment")
    }

    fn patch(&self, name: &str, patch: Value) -> Deployment {
        deployments(&self.client).patch(name, &Patch::Strategic(patch), &PostParams::default()).expect("patched")
    }

    fn set_image(&self, name: &str, image: &str) -> Deployment {
        self.patch(name, json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}}))
    }

    /// The ReplicaSets controlled by the Deployment, by revision (creation times have whole
    /// seconds, too coarse to order them).
    fn replica_sets(&self, d: &Deployment) -> Vec<ReplicaSet> {
        let uid = d.metadata.uid.clone().unwrap_or_default();
        let mut sets: Vec<ReplicaSet> = (replica_sets_api(&self.client).list(&Default::default()).expect("rs").items)
            .into_iter()
            .filter(|rs| {
                rs.metadata.owner_references.iter().flatten().any(|r| r.uid == uid && r.controller == Some(true))
            })
            .collect();
        sets.sort_by_key(|rs| annotation(&rs.metadata, REVISION).and_then(|r| r.parse::<i64>().ok()));
        sets
    }

    /// Live (not terminating) pods with label app=`app`.
    fn live_pods(&self, app: &str) -> Vec<Pod> {
        let pods = Api::<Pod>::namespaced(&self.client, "default").list(&Default::default()).expect("pods").items;
        pods.into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| p.metadata.labels.as_ref().and_then(|l| l.get("app")).map(String::as_str) == Some(app))
            .collect()
    }

    /// Waits until the Deployment's rollout of its current generation is complete.
    fn wait_complete(&self, name: &str) -> Deployment {
        eventually(&format!("deployment {name} complete"), || {
            let d = self.get(name);
            let status = d.status.clone().unwrap_or_default();
            let want = d.spec.as_ref().and_then(|s| s.replicas);
            let done = status.observed_generation == d.metadata.generation
                && status.updated_replicas == want
                && status.replicas == want
                && status.available_replicas == want
                && status.unavailable_replicas.is_none()
                && condition(&d, "Progressing").is_some_and(|c| c.1 == "NewReplicaSetAvailable");
            done.then_some(d)
        })
    }

    /// Events about `name`, (reason, message), in no particular order.
    fn events(&self, name: &str) -> Vec<(String, String)> {
        let events = Api::<Event>::namespaced(&self.client, "default").list(&Default::default()).expect("events");
        events
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(name))
            .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
            .collect()
    }

    fn wait_event(&self, name: &str, reason: &str, message: &str) {
        eventually(&format!("event {reason} {message:?} about {name}"), || {
            self.events(name).iter().any(|(r, m)| r == reason && m == message).then_some(())
        });
    }
}

/// The name the controller gives the ReplicaSet of `d`'s current template.
fn expected_rs_name(d: &Deployment) -> (String, String) {
    let template = &d.spec.as_ref().expect("spec").template;
    let hash = compute_hash(template, d.status.as_ref().and_then(|s| s.collision_count));
    (format!("{}-{hash}", d.metadata.name.as_deref().unwrap_or("")), hash)
}

#[test]
fn creates_a_hash_named_replica_set_with_status_and_conditions_then_scales() {
    let cluster = start();
    let created = cluster.create(&deployment("web", 3, "nginx:1.27", json!({})));
    let (rs_name, hash) = expected_rs_name(&created);
    let d = cluster.wait_complete("web");
    let sets = cluster.replica_sets(&d);
    assert_eq!(sets.len(), 1, "one ReplicaSet");
    let rs = &sets[0];
    assert_eq!(rs.metadata.name.as_deref(), Some(rs_name.as_str()));
    let labels = rs.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels, BTreeMap::from([("app".into(), "web".into()), ("pod-template-hash".into(), hash.clone())]));
    let spec = rs.spec.clone().unwrap();
    assert_eq!(spec.selector.match_labels.unwrap().get("pod-template-hash"), Some(&hash));
    let template_labels = spec.template.unwrap().metadata.unwrap().labels.unwrap();
    assert_eq!(template_labels.get("pod-template-hash"), Some(&hash));
    assert_eq!(annotation(&rs.metadata, REVISION).as_deref(), Some("1"));
    // 25% of 3 rounds up to one surge pod.
    assert_eq!(annotation(&rs.metadata, "deployment.kubernetes.io/desired-replicas").as_deref(), Some("3"));
    assert_eq!(annotation(&rs.metadata, "deployment.kubernetes.io/max-replicas").as_deref(), Some("4"));
    assert_eq!(annotation(&d.metadata, REVISION).as_deref(), Some("1"), "the Deployment carries the revision");

    let status = d.status.clone().unwrap();
    assert_eq!((status.replicas, status.updated_replicas, status.ready_replicas), (Some(3), Some(3), Some(3)));
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(status.terminating_replicas, Some(0), "v1.36 reports the 0");
    let available = condition(&d, "Available").unwrap();
    assert_eq!(
        available,
        ("True".into(), "MinimumReplicasAvailable".into(), "Deployment has minimum availability.".into())
    );
    let progressing = condition(&d, "Progressing").unwrap();
    assert_eq!(progressing.2, format!("ReplicaSet {rs_name:?} has successfully progressed."));
    assert_eq!(cluster.live_pods("web").len(), 3);
    cluster.wait_event("web", "ScalingReplicaSet", &format!("Scaled up replica set {rs_name} from 0 to 3"));

    cluster.patch("web", json!({"spec": {"replicas": 5}}));
    let d = cluster.wait_complete("web");
    assert_eq!(d.status.unwrap().ready_replicas, Some(5));
    cluster.wait_event("web", "ScalingReplicaSet", &format!("Scaled up replica set {rs_name} from 3 to 5"));
    let rs = replica_sets_api(&cluster.client).get(&rs_name).unwrap();
    assert_eq!(annotation(&rs.metadata, "deployment.kubernetes.io/desired-replicas").as_deref(), Some("5"));
    assert_eq!(annotation(&rs.metadata, "deployment.kubernetes.io/max-replicas").as_deref(), Some("7"));

    cluster.patch("web", json!({"spec": {"replicas": 2}}));
    cluster.wait_complete("web");
    cluster.wait_event("web", "ScalingReplicaSet", &format!("Scaled down replica set {rs_name} from 5 to 2"));
    eventually("2 live pods", || (cluster.live_pods("web").len() == 2).then_some(()));
    assert_eq!(cluster.replica_sets(&cluster.get("web")).len(), 1, "scaling creates no ReplicaSet");
}

#[test]
fn rolling_update_stays_within_max_surge_and_max_unavailable() {
    let cluster = start();
    let strategy =
        json!({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}});
    cluster.create(&deployment("roll", 4, "nginx:1.27", strategy));
    let before = cluster.wait_complete("roll");
    let (old_name, _) = expected_rs_name(&before);
    let after = cluster.set_image("roll", "nginx:1.28");
    let (new_name, _) = expected_rs_name(&after);
    // Sample while it rolls: never more than 4 + 1 replicas asked for, never fewer than 4 - 0
    // ready pods.
    let mut samples = 0;
    let mut saw_both_active = false;
    eventually("the rolling update to finish", || {
        let d = cluster.get("roll");
        let sets = cluster.replica_sets(&d);
        let total: i32 = sets.iter().map(rs_replicas).sum();
        assert!(total <= 5, "ReplicaSets ask for {total} replicas, more than replicas + maxSurge");
        let ready = cluster.live_pods("roll").iter().filter(|p| is_ready(p)).count();
        assert!(ready >= 4, "only {ready} ready pods, fewer than replicas - maxUnavailable");
        saw_both_active |= sets.iter().filter(|rs| rs_replicas(rs) > 0).count() == 2;
        samples += 1;
        let new = sets.iter().find(|rs| rs.metadata.name.as_deref() == Some(new_name.as_str()));
        let done = new.is_some_and(|rs| rs.status.as_ref().and_then(|s| s.available_replicas) == Some(4))
            && sets.iter().filter(|rs| rs_replicas(rs) > 0).count() == 1;
        done.then_some(())
    });
    assert!(samples > 1 && saw_both_active, "the rollout was observed in progress ({samples} samples)");
    let d = cluster.wait_complete("roll");
    let sets = cluster.replica_sets(&d);
    assert_eq!(sets.len(), 2);
    assert_eq!((rs_replicas(&sets[0]), rs_replicas(&sets[1])), (0, 4));
    assert_eq!(annotation(&sets[1].metadata, REVISION).as_deref(), Some("2"));
    assert_eq!(annotation(&d.metadata, REVISION).as_deref(), Some("2"));
    cluster.wait_event("roll", "ScalingReplicaSet", &format!("Scaled up replica set {new_name} from 0 to 1"));
    cluster.wait_event("roll", "ScalingReplicaSet", &format!("Scaled down replica set {old_name} from 4 to 3"));
    cluster.wait_event("roll", "ScalingReplicaSet", &format!("Scaled down replica set {old_name} from 1 to 0"));
}

#[test]
fn recreate_removes_old_pods_before_creating_new_ones() {
    let cluster = start();
    cluster.create(&deployment("batch", 3, "nginx:1.27", json!({"strategy": {"type": "Recreate"}})));
    let before = cluster.wait_complete("batch");
    let old_uid = cluster.replica_sets(&before)[0].metadata.uid.clone().unwrap();
    cluster.set_image("batch", "nginx:1.28");
    eventually("the recreate rollout to finish", || {
        let pods = Api::<Pod>::namespaced(&cluster.client, "default").list(&Default::default()).expect("pods").items;
        let owner = |p: &Pod| -> Option<String> {
            p.metadata.owner_references.iter().flatten().find(|r| r.controller == Some(true)).map(|r| r.uid.clone())
        };
        let running_old = pods
            .iter()
            .filter(|p| owner(p).as_deref() == Some(old_uid.as_str()))
            .any(|p| !matches!(p.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Failed" | "Succeeded")));
        let new = pods.iter().filter(|p| owner(p).is_some_and(|o| o != old_uid)).count();
        assert!(!(running_old && new > 0), "new pods exist while old ones still run");
        let d = cluster.get("batch");
        let done = d.status.as_ref().is_some_and(|s| s.updated_replicas == Some(3) && s.available_replicas == Some(3));
        done.then_some(())
    });
    let d = cluster.wait_complete("batch");
    let sets = cluster.replica_sets(&d);
    assert_eq!(sets.iter().map(rs_replicas).collect::<Vec<_>>(), [0, 3]);
    let new_name = sets[1].metadata.name.clone().unwrap();
    cluster.wait_event("batch", "ScalingReplicaSet", &format!("Scaled up replica set {new_name} from 0 to 3"));
}

#[test]
fn a_paused_deployment_scales_but_does_not_roll_out() {
    let cluster = start();
    cluster.create(&deployment("pause", 2, "nginx:1.27", json!({})));
    cluster.wait_complete("pause");
    cluster.patch("pause", json!({"spec": {"paused": true}}));
    eventually("Progressing DeploymentPaused", || {
        let c = condition(&cluster.get("pause"), "Progressing")?;
        (c == ("Unknown".into(), "DeploymentPaused".into(), "Deployment is paused".into())).then_some(())
    });
    let changed = cluster.set_image("pause", "nginx:1.28");
    let scaled = cluster.patch("pause", json!({"spec": {"replicas": 3}}));
    assert!(scaled.metadata.generation > changed.metadata.generation);
    let d = eventually("the paused Deployment scaled", || {
        let d = cluster.get("pause");
        let status = d.status.clone()?;
        (status.observed_generation == d.metadata.generation && status.available_replicas == Some(3)).then_some(d)
    });
    let sets = cluster.replica_sets(&d);
    assert_eq!(sets.len(), 1, "no rollout while paused");
    assert_eq!(rs_replicas(&sets[0]), 3);

    cluster.patch("pause", json!({"spec": {"paused": false}}));
    let d = cluster.wait_complete("pause");
    let sets = cluster.replica_sets(&d);
    assert_eq!(sets.len(), 2, "the rollout happens once resumed");
    assert_eq!(rs_replicas(&sets[1]), 3);
    cluster.wait_event(
        "pause",
        "ScalingReplicaSet",
        &format!("Scaled up replica set {} from 0 to 1", expected_rs_name(&d).0),
    );
}

/// kubectl on PATH, if it runs.
fn kubectl() -> Option<PathBuf> {
    let ok = Command::new("kubectl").args(["version", "--client"]).stdout(Stdio::null()).stderr(Stdio::null()).status();
    ok.is_ok_and(|s| s.success()).then(|| PathBuf::from("kubectl"))
}

fn run_kubectl(cluster: &Cluster, dir: &std::path::Path, args: &[&str]) -> String {
    let output = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(dir.join("admin.conf"))
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .args(args)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("kubectl runs");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(output.status.success(), "kubectl {args:?}: {stdout}{}", String::from_utf8_lossy(&output.stderr));
    let _ = cluster.sandbox();
    stdout
}

#[test]
fn rollback_reuses_the_old_replica_set_with_a_new_revision() {
    let cluster = start();
    cluster.create(&deployment("undo", 2, "nginx:1.27", json!({})));
    let v1 = cluster.wait_complete("undo");
    let (v1_name, _) = expected_rs_name(&v1);
    cluster.set_image("undo", "nginx:1.28");
    let v2 = cluster.wait_complete("undo");
    let (v2_name, _) = expected_rs_name(&v2);
    assert_ne!(v1_name, v2_name);

    let dir =
        std::env::temp_dir().join(format!("kcm-deploy-{}-{}", std::process::id(), cluster.sandbox().addr().port()));
    std::fs::create_dir_all(&dir).unwrap();
    let used_kubectl = match kubectl() {
        Some(_) => {
            cluster.sandbox().write_kubeconfigs(&dir.join("admin.conf")).expect("kubeconfig");
            let out = run_kubectl(&cluster, &dir, &["rollout", "undo", "deployment/undo"]);
            assert!(out.contains("rolled back"), "{out}");
            let out = run_kubectl(&cluster, &dir, &["rollout", "status", "deployment/undo", "--timeout=90s"]);
            assert!(out.contains("successfully rolled out"), "{out}");
            true
        }
        None => {
            eprintln!("note: kubectl cannot run here; undoing by setting the template back");
            cluster.set_image("undo", "nginx:1.27");
            false
        }
    };
    let d = cluster.wait_complete("undo");
    let sets = cluster.replica_sets(&d);
    let names: Vec<&str> = sets.iter().filter_map(|rs| rs.metadata.name.as_deref()).collect();
    assert_eq!(names, [v2_name.as_str(), v1_name.as_str()], "no new ReplicaSet (kubectl: {used_kubectl})");
    assert_eq!(annotation(&sets[1].metadata, REVISION).as_deref(), Some("3"));
    assert_eq!(annotation(&sets[1].metadata, "deployment.kubernetes.io/revision-history").as_deref(), Some("1"));
    assert_eq!((rs_replicas(&sets[0]), rs_replicas(&sets[1])), (0, 2));
    assert_eq!(annotation(&d.metadata, REVISION).as_deref(), Some("3"));

    // The deprecated rollback annotation (extensions/v1beta1's spec.rollbackTo) to revision 2.
    cluster.patch("undo", json!({"metadata": {"annotations": {"deprecated.deployment.rollback.to": "2"}}}));
    cluster.wait_event("undo", "DeploymentRollback", "Rolled back deployment \"undo\" to revision 2");
    let d = eventually("revision 4 rolled out", || {
        let d = cluster.wait_complete("undo");
        (annotation(&d.metadata, REVISION).as_deref() == Some("4")).then_some(d)
    });
    assert!(annotation(&d.metadata, "deprecated.deployment.rollback.to").is_none(), "the annotation is cleared");
    let sets = cluster.replica_sets(&d);
    assert_eq!(sets.len(), 2);
    assert_eq!(annotation(&sets[1].metadata, REVISION).as_deref(), Some("4"));
    assert_eq!(annotation(&sets[1].metadata, "deployment.kubernetes.io/revision-history").as_deref(), Some("2"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn old_replica_sets_beyond_the_revision_history_limit_are_deleted() {
    let cluster = start();
    cluster.create(&deployment("hist", 1, "nginx:1.25", json!({"revisionHistoryLimit": 1})));
    cluster.wait_complete("hist");
    for image in ["nginx:1.26", "nginx:1.27", "nginx:1.28"] {
        cluster.set_image("hist", image);
        cluster.wait_complete("hist");
    }
    let sets = eventually("one old ReplicaSet kept", || {
        let sets = cluster.replica_sets(&cluster.get("hist"));
        (sets.len() == 2).then_some(sets)
    });
    let revisions: Vec<String> = sets.iter().filter_map(|rs| annotation(&rs.metadata, REVISION)).collect();
    assert_eq!(revisions, ["3", "4"]);
}

#[test]
fn a_rollout_that_never_becomes_ready_exceeds_its_progress_deadline() {
    let cluster = start();
    // A readiness gate nobody sets keeps the pods running but never Ready, as on a real cluster.
    let mut d = deployment("stuck", 2, "nginx:1.27", json!({"progressDeadlineSeconds": 3}));
    let spec = d.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    spec.readiness_gates = Some(vec![from(json!({"conditionType": "example.com/never"}))]);
    let created = cluster.create(&d);
    let (rs_name, _) = expected_rs_name(&created);
    let d = eventually("ProgressDeadlineExceeded", || {
        let d = cluster.get("stuck");
        let c = condition(&d, "Progressing")?;
        (c.1 == "ProgressDeadlineExceeded").then_some(d)
    });
    let progressing = condition(&d, "Progressing").unwrap();
    assert_eq!(progressing.0, "False");
    assert_eq!(progressing.2, format!("ReplicaSet {rs_name:?} has timed out progressing."));
    let available = condition(&d, "Available").unwrap();
    assert_eq!(
        available,
        ("False".into(), "MinimumReplicasUnavailable".into(), "Deployment does not have minimum availability.".into())
    );
    let status = d.status.unwrap();
    assert_eq!((status.replicas, status.ready_replicas, status.unavailable_replicas), (Some(2), None, Some(2)));
}

#[test]
fn a_controller_restart_mid_rollout_creates_no_duplicates() {
    let mut cluster = start();
    let strategy =
        json!({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}});
    cluster.create(&deployment("restart", 4, "nginx:1.27", strategy));
    cluster.wait_complete("restart");
    cluster.set_image("restart", "nginx:1.28");
    eventually("the rollout under way", || {
        let sets = cluster.replica_sets(&cluster.get("restart"));
        (sets.len() == 2 && sets.iter().all(|rs| rs_replicas(rs) > 0)).then_some(())
    });
    cluster.restart_controllers();
    let d = cluster.wait_complete("restart");
    let sets = cluster.replica_sets(&d);
    assert_eq!(sets.len(), 2, "no second new ReplicaSet");
    assert_eq!(sets.iter().map(rs_replicas).collect::<Vec<_>>(), [0, 4]);
    let new_uid = sets[1].metadata.uid.clone().unwrap();
    let pods = eventually("4 live pods", || {
        let pods = cluster.live_pods("restart");
        (pods.len() == 4).then_some(pods)
    });
    assert!(pods.iter().all(|p| p.metadata.owner_references.iter().flatten().any(|r| r.uid == new_uid)));
}

#[test]
fn an_upstream_named_orphan_replica_set_is_adopted() {
    let cluster = start_with(|client| {
        // As upstream's controller left it: named and labelled by the hash of the Deployment's
        // (defaulted) template, with the revision annotation, but without an owner.
        let d = deployments(client).create(&deployment("adopt", 2, "nginx:1.27", json!({})), &PostParams::default());
        let d = d.expect("deployment created");
        let (name, hash) = expected_rs_name(&d);
        let mut template = serde_json::to_value(&d.spec.as_ref().unwrap().template).unwrap();
        template["metadata"]["labels"]["pod-template-hash"] = json!(hash);
        let rs: ReplicaSet = from(json!({
            "metadata": {"name": name, "labels": {"app": "adopt", "pod-template-hash": hash},
                "annotations": {REVISION: "1"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "adopt", "pod-template-hash": hash}},
                "template": template},
        }));
        replica_sets_api(client).create(&rs, &PostParams::default()).expect("orphan created");
    });
    let d = cluster.wait_complete("adopt");
    let (name, _) = expected_rs_name(&d);
    let all = replica_sets_api(&cluster.client).list(&Default::default()).expect("rs").items;
    assert_eq!(all.len(), 1, "no new ReplicaSet");
    let rs = &all[0];
    assert_eq!(rs.metadata.name.as_deref(), Some(name.as_str()));
    let owner = rs.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owner.len(), 1);
    assert_eq!((owner[0].kind.as_str(), owner[0].name.as_str()), ("Deployment", "adopt"));
    assert_eq!((owner[0].controller, owner[0].block_owner_deletion), (Some(true), Some(true)));
    assert_eq!(owner[0].uid, d.metadata.uid.clone().unwrap());
    assert_eq!(annotation(&d.metadata, REVISION).as_deref(), Some("1"));
    assert_eq!(cluster.live_pods("adopt").len(), 2);
    assert!(
        !cluster.events("adopt").iter().any(|(reason, m)| reason == "ScalingReplicaSet" && m.contains("from 0")),
        "nothing was created"
    );
}

#[test]
fn a_hash_collision_bumps_the_collision_count() {
    let cluster = start_with(|client| {
        // Another ReplicaSet already has the name the Deployment's template hashes to.
        let d = deployments(client).create(&deployment("clash", 1, "nginx:1.27", json!({})), &PostParams::default());
        let (name, _) = expected_rs_name(&d.expect("deployment created"));
        let squatter = from(json!({"metadata": {"name": name, "labels": {"app": "squatter"}},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "squatter"}},
                "template": {"metadata": {"labels": {"app": "squatter"}},
                    "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}]}}}}));
        replica_sets_api(client).create(&squatter, &PostParams::default()).expect("squatter created");
    });
    let d = cluster.wait_complete("clash");
    assert_eq!(d.status.as_ref().and_then(|s| s.collision_count), Some(1));
    let (name, _) = expected_rs_name(&d);
    let sets = cluster.replica_sets(&d);
    assert_eq!(sets.len(), 1);
    assert_eq!(sets[0].metadata.name.as_deref(), Some(name.as_str()), "named by the hash salted with collisionCount 1");
    let squatter = replica_sets_api(&cluster.client).list(&Default::default()).expect("rs").items;
    assert!(squatter.iter().any(|rs| rs.metadata.owner_references.is_none()), "the squatter is left alone");
}

/// One update (PUT) of a Deployment or ReplicaSet, status included, as the API server's audit
/// log has it: who wrote (the controller's User-Agent), what, the answer's code, the
/// resourceVersion the write was based on and, if it succeeded, the one it produced.
struct Update {
    agent: String,
    object: String,
    code: u16,
    sent: u64,
    produced: u64,
}

/// The updates of Deployments and ReplicaSets, in the order the server answered them: from the
/// sandbox's audit log, or kube-apiserver's (see `ControlPlane::audit_log`).
fn updates(cluster: &Cluster) -> Vec<Update> {
    let version = |v: &str| v.parse::<u64>().unwrap_or(0);
    let agent = |user_agent: &str| user_agent.rsplit(' ').next().unwrap_or_default().to_string();
    match &cluster.server {
        TestServer::Sandbox(sandbox) => (sandbox.audit().entries().into_iter())
            .filter(|e| e.verb == "update" && matches!(e.resource.as_str(), "deployments" | "replicasets"))
            .map(|e| Update {
                agent: agent(&e.user_agent),
                object: format!("{}/{} {}", e.resource, e.subresource, e.name),
                code: e.code,
                sent: version(&e.request_resource_version),
                produced: version(&e.response_resource_version),
            })
            .collect(),
        TestServer::Real(plane) => {
            let log = std::fs::read_to_string(plane.audit_log()).expect("kube-apiserver's audit log");
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (log.lines().filter_map(|line| serde_json::from_str::<Value>(line).ok()))
                .filter(|e| e["stage"] == "ResponseComplete" && e["verb"] == "update")
                // The policy logs other writes too (the chaos suite's invariants).
                .filter(|e| matches!(e["objectRef"]["resource"].as_str(), Some("deployments" | "replicasets")))
                .map(|e| {
                    let target = &e["objectRef"];
                    Update {
                        agent: agent(e["userAgent"].as_str().unwrap_or_default()),
                        object: format!(
                            "{}/{} {}",
                            text(&target["resource"]),
                            text(&target["subresource"]),
                            text(&target["name"])
                        ),
                        code: e["responseStatus"]["code"].as_u64().and_then(|c| u16::try_from(c).ok()).unwrap_or(0),
                        sent: version(e["requestObject"]["metadata"]["resourceVersion"].as_str().unwrap_or_default()),
                        produced: version(
                            e["responseObject"]["metadata"]["resourceVersion"].as_str().unwrap_or_default(),
                        ),
                    }
                })
                .collect()
        }
    }
}

/// The updates answered 409 Conflict, as `agent resource/subresource name sent-resourceVersion`,
/// and those of them whose writer sent a copy older than what its own previous write of that
/// object had produced: it wrote from a stale copy (an informer copy from before its write, or a
/// second write of one sync that did not take the first one's resourceVersion), not because
/// another writer got there first.
fn conflicts(cluster: &Cluster) -> (Vec<String>, Vec<String>) {
    let mut written: HashMap<(String, String), u64> = HashMap::new();
    let (mut all, mut stale) = (Vec::new(), Vec::new());
    for update in updates(cluster) {
        let key = (update.agent.clone(), update.object.clone());
        match update.code {
            200 => {
                let last = written.entry(key).or_default();
                *last = (*last).max(update.produced);
            }
            409 => {
                let line = format!("{} {} {}", update.agent, update.object, update.sent);
                if written.get(&key).is_some_and(|last| update.sent < *last) {
                    stale.push(line.clone());
                }
                all.push(line);
            }
            _ => {}
        }
    }
    (all, stale)
}

on_both_backends!(create_scale_rollout_and_undo_never_write_from_a_copy_older_than_their_own_write);
/// kubectl's create, scale, set image and rollout undo of a 5-replica Deployment (issue 13,
/// item 4). Both controllers sync an object again right after writing it (the ReplicaSet
/// controller on every pod that becomes ready), often before the watch brings their own
/// write; reading the informer alone, they wrote again from the older copy and met a
/// Conflict, dozens of times. So did a sync that wrote the new ReplicaSet twice, or wrote the
/// Deployment's status twice without taking the first write's resourceVersion. Only the two
/// controllers racing each other on one ReplicaSet (a scale against a status update) may
/// still conflict.
fn create_scale_rollout_and_undo_never_write_from_a_copy_older_than_their_own_write(backend: Backend) {
    let cluster = start_on(backend);
    cluster.create(&deployment("busy", 5, "nginx:1.25", json!({})));
    cluster.wait_complete("busy");
    cluster.patch("busy", json!({"spec": {"replicas": 8}}));
    cluster.wait_complete("busy");
    cluster.set_image("busy", "nginx:1.26");
    cluster.wait_complete("busy");
    // What `kubectl rollout undo` does on apps/v1: the template of the previous revision.
    cluster.set_image("busy", "nginx:1.25");
    let d = cluster.wait_complete("busy");
    assert_eq!(annotation(&d.metadata, REVISION).as_deref(), Some("3"));
    assert!(!updates(&cluster).is_empty(), "the audit log has the updates");
    let (all, stale) = conflicts(&cluster);
    eprintln!("{}: {} conflicts, {} from stale copies: {all:#?}", backend.name(), all.len(), stale.len());
    assert!(
        stale.is_empty(),
        "{} writes were based on a copy older than the writer's own last write: {stale:#?}",
        stale.len()
    );
}

on_both_backends!(terminating_pods_of_its_replica_sets_show_in_the_deployment_status);
/// `terminatingReplicas` (DeploymentReplicaSetTerminatingReplicas, on in v1.36): the sum of the
/// ReplicaSets' counts of pods being deleted.
fn terminating_pods_of_its_replica_sets_show_in_the_deployment_status(backend: Backend) {
    let cluster = start_on(backend);
    // Never scheduled, so that nothing but a finalizer holds them once deleted.
    let pinned = json!({"template": {"metadata": {"labels": {"app": "held"}},
        "spec": {"nodeSelector": {"no-such-label": "x"}, "containers": [{"name": "app", "image": "nginx:1.27"}]}}});
    cluster.create(&deployment("held", 2, "nginx:1.27", pinned));
    // The status of the current generation with `replicas` and `terminating` replicas.
    let wait_status = |replicas: Option<i32>, terminating: i32| {
        let what = format!("held: {replicas:?} replicas, {terminating} terminating");
        harness::eventually_seen_within(DEADLINE, &what, || {
            let d = cluster.get("held");
            let status = d.status.clone().unwrap_or_default();
            let synced = status.observed_generation == d.metadata.generation;
            let counts = (status.replicas, status.terminating_replicas) == (replicas, Some(terminating));
            if synced && counts { Ok(()) } else { Err(format!("{status:?}")) }
        })
    };
    let pods = eventually("2 pods", || Some(cluster.live_pods("held")).filter(|p| p.len() == 2));
    wait_status(Some(2), 0);
    let hold = |pod: &Pod, finalizers: Value| {
        let patch = Patch::Merge(json!({"metadata": {"finalizers": finalizers}}));
        let name = pod.metadata.name.as_deref().expect("a name");
        let pods = Api::<Pod>::namespaced(&cluster.client, "default");
        pods.patch(name, &patch, &PostParams::default()).expect("finalizers patched");
    };
    for pod in &pods {
        hold(pod, json!(["kcm.test/hold"]));
    }

    cluster.patch("held", json!({"spec": {"replicas": 0}}));
    // Terminating pods are no replicas (0 is left out of the status).
    wait_status(None, 2);
    hold(&pods[0], Value::Null);
    wait_status(None, 1);
    hold(&pods[1], Value::Null);
    wait_status(None, 0);
}

on_both_backends!(a_long_deployment_name_is_cut_to_name_its_replica_set);
/// `generateReplicaSetName` (v1.36): the Deployment's name is cut so that `<name>-<hash>` fits
/// 253 characters; v1.33 could not create the ReplicaSet of such a Deployment.
fn a_long_deployment_name_is_cut_to_name_its_replica_set(backend: Backend) {
    let cluster = start_on(backend);
    let name = format!("long-{}", "d".repeat(245));
    let spec = json!({"replicas": 1, "selector": {"matchLabels": {"app": "long"}},
        "template": {"metadata": {"labels": {"app": "long"}}, "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}});
    let created = cluster.create(&from(json!({"metadata": {"name": name}, "spec": spec})));
    let (_, hash) = expected_rs_name(&created);
    let d = cluster.wait_complete(&name);
    let sets = cluster.replica_sets(&d);
    assert_eq!(sets.len(), 1);
    let rs_name = sets[0].metadata.name.clone().expect("a name");
    let kept = 253 - 1 - hash.len();
    assert_eq!(rs_name, format!("{}-{hash}", &name[..kept]));
    assert_eq!(rs_name.len(), 253);
    cluster.wait_event(&name, "ScalingReplicaSet", &format!("Scaled up replica set {rs_name} from 0 to 1"));
}
