//! The garbage collector on both backends with simulated nodes and the ReplicaSet and
//! ReplicationController controllers: background, foreground and orphan cascades (through the
//! API and `kubectl delete --cascade`, a Deployment's too), owners recreated under the same name,
//! owners of any kind, and invalid ownerReferences across namespaces and scopes.

use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, ReplicationController};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kcm::app::controllers::named;
use kcm::client::{Api, Client, DeleteParams, Deleted, PostParams, PropagationPolicy};
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, from};

/// Generous: the machine may be loaded.
const DEADLINE: Duration = Duration::from_secs(90);

/// A sandbox with two simulated nodes; `prepare` runs before the controllers start.
fn start_with(backend: Backend, prepare: impl FnOnce(&Client)) -> Cluster {
    harness::with(&[
        named("garbage-collector-controller"),
        named("replicaset-controller"),
        named("replicationcontroller-controller"),
    ])
    .on(backend)
    .names(&["garbage-collector-controller", "replicaset-controller", "replicationcontroller-controller"])
    .deadline(DEADLINE)
    .start_with(|client, _| prepare(client))
}

fn eventually<T>(what: &str, check: impl FnMut() -> Option<T>) -> T {
    harness::eventually_within(DEADLINE, what, check)
}

fn uid_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.uid.clone().expect("a uid")
}

fn owner_ref(api_version: &str, kind: &str, name: &str, uid: &str) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "blockOwnerDeletion": true})
}

fn config_map(namespace: &str, name: &str, owners: Value) -> ConfigMap {
    from(json!({"metadata": {"name": name, "namespace": namespace, "ownerReferences": owners}}))
}

fn create_config_map(client: &Client, namespace: &str, name: &str, owners: Value) -> ConfigMap {
    Api::<ConfigMap>::namespaced(client, namespace)
        .create(&config_map(namespace, name, owners), &PostParams::default())
        .expect("config map created")
}

fn create_namespace(client: &Client, name: &str) {
    let namespace: Namespace = from(json!({"metadata": {"name": name}}));
    Api::<Namespace>::cluster(client).create(&namespace, &PostParams::default()).expect("namespace created");
}

fn delete_with(policy: Option<PropagationPolicy>) -> DeleteParams {
    DeleteParams { propagation_policy: policy, ..DeleteParams::default() }
}

/// This module's helpers on the harness's `Cluster`. A trait rather than an inherent `impl`: the
/// controller modules share one test binary, where two modules' inherent methods of one name
/// would collide.
trait ClusterExt {
    fn config_maps(&self, namespace: &str) -> Api<ConfigMap>;
    fn pods_owned_by(&self, uid: &str) -> Vec<Pod>;
    fn create_replica_set(&self, name: &str, replicas: i32) -> ReplicaSet;
    fn replica_set_with_pods(&self, name: &str, replicas: usize) -> (String, Vec<String>);
    fn deployment_with_pods(&self, name: &str, replicas: i32) -> (String, String);
    fn wait_gone_replica_set(&self, name: &str);
    fn wait_no_pods_of(&self, uid: &str);
    fn wait_orphaned(&self, names: &[String]);
}

impl ClusterExt for Cluster {
    fn config_maps(&self, namespace: &str) -> Api<ConfigMap> {
        Api::namespaced(&self.client, namespace)
    }

    /// Pods (terminating or not) that name `uid` as owner, by name.
    fn pods_owned_by(&self, uid: &str) -> Vec<Pod> {
        let pods = self.api::<Pod>().list(&Default::default()).expect("pods").items;
        pods.into_iter().filter(|p| p.metadata.owner_references.iter().flatten().any(|r| r.uid == uid)).collect()
    }

    fn create_replica_set(&self, name: &str, replicas: i32) -> ReplicaSet {
        let rs = harness::nginx_replica_set(name, replicas);
        self.api::<ReplicaSet>().create(&rs, &PostParams::default()).expect("replicaset created")
    }

    /// A ReplicaSet whose `replicas` pods exist; returns its uid and pod names.
    ///
    /// It waits for the ReplicaSet's status to count the pods: the ReplicaSet controller reads
    /// them from the pod informer the collector shares, so the collector's graph has received
    /// them before any later change of the ReplicaSet (its deletion) reaches it.
    fn replica_set_with_pods(&self, name: &str, replicas: usize) -> (String, Vec<String>) {
        let uid = uid_of(&self.create_replica_set(name, replicas as i32).metadata);
        eventually(&format!("the status of {name} counting {replicas} pods"), || {
            let rs = self.api::<ReplicaSet>().get(name).expect("get");
            (rs.status.map(|s| s.replicas) == Some(replicas as i32)).then_some(())
        });
        let pods = self.pods_owned_by(&uid);
        assert_eq!(pods.len(), replicas);
        (uid, pods.into_iter().filter_map(|p| p.metadata.name).collect())
    }

    /// A Deployment whose ReplicaSet counts `replicas` pods; returns the uids of both.
    fn deployment_with_pods(&self, name: &str, replicas: i32) -> (String, String) {
        let deployment = harness::nginx_deployment(name, replicas);
        let created = self.api::<Deployment>().create(&deployment, &PostParams::default()).expect("created");
        let uid = uid_of(&created.metadata);
        let rs_uid = eventually(&format!("the ReplicaSet of {name} counting {replicas} pods"), || {
            let sets = self.api::<ReplicaSet>().list(&Default::default()).expect("replicasets").items;
            let rs = sets.into_iter().find(|rs| rs.metadata.owner_references.iter().flatten().any(|r| r.uid == uid))?;
            (rs.status.map(|s| s.replicas) == Some(replicas)).then(|| uid_of(&rs.metadata))
        });
        (uid, rs_uid)
    }

    fn wait_gone_replica_set(&self, name: &str) {
        eventually(&format!("{name} gone"), || {
            self.api::<ReplicaSet>().get_opt(name).expect("get").is_none().then_some(())
        });
    }

    /// Waits until no pod names `uid` as owner any more (deleted by the collector, then
    /// finished by the kubelet).
    fn wait_no_pods_of(&self, uid: &str) {
        eventually(&format!("pods of {uid} gone"), || self.pods_owned_by(uid).is_empty().then_some(()));
    }

    /// Waits until `names` exist without owner references and are not being deleted.
    fn wait_orphaned(&self, names: &[String]) {
        for name in names {
            eventually(&format!("{name} orphaned"), || {
                let pod = self.api::<Pod>().get(name).expect("the pod stays");
                assert!(pod.metadata.deletion_timestamp.is_none(), "{name} must not be deleted");
                pod.metadata.owner_references.is_none_or(|r| r.is_empty()).then_some(())
            });
        }
    }
}

on_both_backends!(replica_set_cascades_background_foreground_and_orphan);
fn replica_set_cascades_background_foreground_and_orphan(backend: Backend) {
    let cluster = start_with(backend, |_| ());

    // Background: the ReplicaSet goes at once, the collector deletes its pods.
    let (uid, _) = cluster.replica_set_with_pods("background", 2);
    cluster
        .api::<ReplicaSet>()
        .delete("background", &delete_with(Some(PropagationPolicy::Background)))
        .expect("deleted");
    assert!(cluster.api::<ReplicaSet>().get_opt("background").expect("get").is_none(), "no finalizer holds it");
    cluster.wait_no_pods_of(&uid);

    // Foreground: the ReplicaSet waits with foregroundDeletion until its pods are gone.
    let (uid, _) = cluster.replica_set_with_pods("foreground", 2);
    // The DELETE's answer is the ReplicaSet it left: a read after it could come once the
    // collector and the kubelets had already ended the pods and the ReplicaSet.
    let deleted = cluster
        .api::<ReplicaSet>()
        .delete("foreground", &delete_with(Some(PropagationPolicy::Foreground)))
        .expect("deleted");
    let Deleted::Object(waiting) = deleted else { panic!("still there while its pods exist") };
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert_eq!(waiting.metadata.finalizers.as_deref(), Some(&["foregroundDeletion".to_string()][..]));
    cluster.wait_gone_replica_set("foreground");
    assert!(cluster.pods_owned_by(&uid).is_empty(), "the owner goes only after its blocking dependents");

    // Orphan: the ReplicaSet goes, its pods stay without the reference.
    let (_, pods) = cluster.replica_set_with_pods("orphan", 2);
    cluster.api::<ReplicaSet>().delete("orphan", &delete_with(Some(PropagationPolicy::Orphan))).expect("deleted");
    cluster.wait_gone_replica_set("orphan");
    cluster.wait_orphaned(&pods);
}

on_both_backends!(replication_controllers_orphan_by_default_in_v1);
fn replication_controllers_orphan_by_default_in_v1(backend: Backend) {
    let cluster = start_with(backend, |_| ());
    let rc = harness::nginx_replication_controller("legacy", 2);
    let rcs = Api::<ReplicationController>::namespaced(&cluster.client, "default");
    let uid = uid_of(&rcs.create(&rc, &PostParams::default()).expect("created").metadata);
    // Counted in the status: the collector's graph has the pods (see `replica_set_with_pods`).
    eventually("the status of the rc counting 2 pods", || {
        let rc = rcs.get("legacy").expect("get");
        (rc.status.map(|s| s.replicas) == Some(2)).then_some(())
    });
    let pods = cluster.pods_owned_by(&uid);
    assert_eq!(pods.len(), 2);
    // No propagationPolicy: the v1 ReplicationController registry's default is Orphan.
    rcs.delete("legacy", &delete_with(None)).expect("deleted");
    eventually("the rc gone", || rcs.get_opt("legacy").expect("get").is_none().then_some(()));
    let names: Vec<String> = pods.into_iter().filter_map(|p| p.metadata.name).collect();
    cluster.wait_orphaned(&names);
}

on_both_backends!(owners_of_any_kind_and_owners_recreated_under_the_same_name);
fn owners_of_any_kind_and_owners_recreated_under_the_same_name(backend: Backend) {
    let cluster = start_with(backend, |_| ());
    let client = &cluster.client;

    // A ConfigMap owned by a ConfigMap goes with it.
    let owner = create_config_map(client, "default", "owner", json!([]));
    let owner_uid = uid_of(&owner.metadata);
    create_config_map(client, "default", "owned", json!([owner_ref("v1", "ConfigMap", "owner", &owner_uid)]));
    // One more owner keeps the second dependent alive; only the gone owner's reference goes.
    let keeper = create_config_map(client, "default", "keeper", json!([]));
    let keeper_uid = uid_of(&keeper.metadata);
    create_config_map(
        client,
        "default",
        "shared",
        json!([owner_ref("v1", "ConfigMap", "owner", &owner_uid), owner_ref("v1", "ConfigMap", "keeper", &keeper_uid)]),
    );
    cluster.config_maps("default").delete("owner", &delete_with(None)).expect("deleted");
    eventually("the owned config map gone", || {
        cluster.config_maps("default").get_opt("owned").expect("get").is_none().then_some(())
    });
    eventually("the shared config map keeps only its live owner", || {
        let shared = cluster.config_maps("default").get("shared").expect("the shared config map stays");
        let owners: Vec<String> = shared.metadata.owner_references.iter().flatten().map(|r| r.uid.clone()).collect();
        (owners == [keeper_uid.clone()]).then_some(())
    });

    // An owner deleted and recreated under the same name has another uid: dependents of the
    // old uid are garbage.
    let first = create_config_map(client, "default", "phoenix", json!([]));
    let old_uid = uid_of(&first.metadata);
    cluster.config_maps("default").delete("phoenix", &delete_with(None)).expect("deleted");
    let second = create_config_map(client, "default", "phoenix", json!([]));
    assert_ne!(uid_of(&second.metadata), old_uid);
    create_config_map(client, "default", "ash", json!([owner_ref("v1", "ConfigMap", "phoenix", &old_uid)]));
    eventually("the dependent of the old uid gone", || {
        cluster.config_maps("default").get_opt("ash").expect("get").is_none().then_some(())
    });
    assert!(cluster.config_maps("default").get_opt("phoenix").expect("get").is_some(), "the new owner stays");
}

on_both_backends!(invalid_owner_references_across_namespaces_and_scopes);
fn invalid_owner_references_across_namespaces_and_scopes(backend: Backend) {
    let mut uids = (String::new(), String::new());
    let cluster = start_with(backend, |client| {
        create_namespace(client, "a");
        create_namespace(client, "b");
        let owner = create_config_map(client, "a", "owner", json!([]));
        uids.0 = uid_of(&owner.metadata);
        create_config_map(client, "b", "stray", json!([owner_ref("v1", "ConfigMap", "owner", &uids.0)]));
        let root = create_config_map(client, "default", "root", json!([]));
        uids.1 = uid_of(&root.metadata);
        let role: ClusterRole = from(json!({
            "metadata": {"name": "scoped-wrong", "ownerReferences": [owner_ref("v1", "ConfigMap", "root", &uids.1)]},
            "rules": [],
        }));
        Api::<ClusterRole>::cluster(client).create(&role, &PostParams::default()).expect("cluster role");
        create_config_map(client, "default", "leaf", json!([owner_ref("v1", "ConfigMap", "root", &uids.1)]));
    });
    let (owner_uid, root_uid) = uids;

    // A dependent naming an owner of another namespace: reported, then collected, since no
    // such owner exists in its own namespace.
    let expected = format!(
        "ownerRef [v1/ConfigMap, namespace: b, name: owner, uid: {owner_uid}] does not exist in namespace \"b\""
    );
    eventually("the OwnerRefInvalidNamespace event", || {
        cluster.event_messages("b", "stray", "OwnerRefInvalidNamespace").contains(&expected).then_some(())
    });
    eventually("the stray dependent gone", || {
        cluster.config_maps("b").get_opt("stray").expect("get").is_none().then_some(())
    });
    assert!(cluster.config_maps("a").get_opt("owner").expect("get").is_some(), "the owner elsewhere is untouched");

    // A cluster-scoped dependent of a namespaced owner: reported, and never collected.
    let expected =
        format!("ownerRef [v1/ConfigMap, namespace: , name: root, uid: {root_uid}] does not exist in namespace \"\"");
    eventually("the OwnerRefInvalidNamespace event of the cluster role", || {
        cluster.event_messages("default", "scoped-wrong", "OwnerRefInvalidNamespace").contains(&expected).then_some(())
    });
    cluster.config_maps("default").delete("root", &delete_with(None)).expect("deleted");
    eventually("the namespaced dependent of root gone", || {
        cluster.config_maps("default").get_opt("leaf").expect("get").is_none().then_some(())
    });
    let roles = Api::<ClusterRole>::cluster(&cluster.client);
    assert!(
        roles.get_opt("scoped-wrong").expect("get").is_some(),
        "cluster-scoped objects never name namespaced owners"
    );
}

/// `kubectl` with the server's admin kubeconfig, or `None` where it is not installed.
fn kubectl(cluster: &Cluster, dir: &std::path::Path) -> Option<impl Fn(&[&str]) -> String> {
    match Command::new("kubectl").args(["version", "--client"]).output() {
        Ok(output) if output.status.success() => {}
        _ => {
            eprintln!("note: kubectl cannot run here; skipping the kubectl cascade test");
            return None;
        }
    }
    std::fs::create_dir_all(dir).expect("a directory");
    let (kubeconfig, _) = cluster.server.write_kubeconfigs(&dir.join("admin.conf")).expect("kubeconfig written");
    let cache = dir.join("cache");
    Some(move |args: &[&str]| {
        let output = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--cache-dir")
            .arg(&cache)
            .args(args)
            .stdin(Stdio::null())
            .env_remove("KUBECONFIG")
            .output()
            .expect("kubectl runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "kubectl {args:?} failed: {stderr}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    })
}

on_both_backends!(kubectl_delete_cascade_modes);
fn kubectl_delete_cascade_modes(backend: Backend) {
    let cluster = harness::with(&[
        named("garbage-collector-controller"),
        named("replicaset-controller"),
        named("deployment-controller"),
    ])
    .on(backend)
    .names(&["garbage-collector-controller", "replicaset-controller", "deployment-controller"])
    .deadline(DEADLINE)
    .start();
    // One folder per backend: both tests of this process run at once.
    let dir = std::env::temp_dir().join(format!("kcm-gc-kubectl-{}-{backend:?}", std::process::id()));
    let Some(kubectl) = kubectl(&cluster, &dir) else { return };

    let (uid, _) = cluster.replica_set_with_pods("bg", 1);
    let out = kubectl(&["delete", "rs", "bg", "--cascade=background", "--wait=false"]);
    assert!(out.contains("replicaset.apps \"bg\" deleted"), "{out}");
    cluster.wait_no_pods_of(&uid);

    // kubectl's default is `--cascade=background`.
    let (uid, _) = cluster.replica_set_with_pods("plain", 1);
    kubectl(&["delete", "rs", "plain", "--wait=false"]);
    cluster.wait_no_pods_of(&uid);

    // A Deployment takes its ReplicaSet, which takes its pods.
    let (deployment_uid, rs_uid) = cluster.deployment_with_pods("web", 2);
    kubectl(&["delete", "deployment", "web", "--wait=false"]);
    eventually("the deployment's ReplicaSet gone", || {
        let sets = cluster.api::<ReplicaSet>().list(&Default::default()).expect("replicasets").items;
        let owned = |rs: &ReplicaSet| rs.metadata.owner_references.iter().flatten().any(|r| r.uid == deployment_uid);
        (!sets.iter().any(owned)).then_some(())
    });
    cluster.wait_no_pods_of(&rs_uid);

    let (uid, _) = cluster.replica_set_with_pods("fg", 1);
    kubectl(&["delete", "rs", "fg", "--cascade=foreground", "--wait=false"]);
    cluster.wait_gone_replica_set("fg");
    assert!(cluster.pods_owned_by(&uid).is_empty(), "foreground: the pods went first");

    let (_, pods) = cluster.replica_set_with_pods("keep", 1);
    kubectl(&["delete", "rs", "keep", "--cascade=orphan", "--wait=false"]);
    cluster.wait_gone_replica_set("keep");
    cluster.wait_orphaned(&pods);
    let _ = std::fs::remove_dir_all(&dir);
}
