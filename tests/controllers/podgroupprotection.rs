//! The podgroup-protection-controller on the real server (the sandbox does not serve
//! `scheduling.k8s.io/v1alpha2`), with the gate `GenericWorkload` on for both: a PodGroup being
//! deleted keeps its finalizer `scheduling.k8s.io/podgroup-protection` while an active pod names
//! it, and goes once the last one has finished or gone; one no pod names goes at once.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1alpha2::PodGroup;
use kcm::app::controllers::named;
use kcm::client::{Api, Client, DeleteParams, Patch, PostParams};
use serde_json::json;

use crate::harness;

use harness::{Backend, Cluster, eventually, from};

const FINALIZER: &str = "scheduling.k8s.io/podgroup-protection";

/// How long a kept PodGroup is watched for not going: the controller reacts in milliseconds.
const SETTLE: Duration = Duration::from_millis(1500);

/// Real server only until the sandbox serves `scheduling.k8s.io/v1alpha2`; then `on_both_backends!`.
mod a_group_stays_while_an_active_pod_names_it {
    #[test]
    fn real_server() {
        crate::harness::run_on(crate::harness::Backend::Real, super::a_group_stays_while_an_active_pod_names_it);
    }
}

/// Starts the controller once `prepare` has created what the test needs in place first: the
/// controller looks for a group's pods only in its cache, as upstream's, so a pod created the
/// instant before its group's deletion may reach the cache too late to keep it.
fn start(backend: Backend, prepare: impl FnOnce(&Client)) -> Cluster {
    harness::with(&[named("podgroup-protection-controller")])
        .on(backend)
        .without_nodes()
        .names(&["podgroup-protection-controller"])
        .apiserver_flags(&["--feature-gates=GenericWorkload=true", "--runtime-config=scheduling.k8s.io/v1alpha2=true"])
        .flags(&["--feature-gates=GenericWorkload=true"])
        .start_with(|client, _| prepare(client))
}

/// A PodGroup with the finalizer (which kube-apiserver's PodGroupProtection admission plugin
/// adds too).
fn create_group(client: &Client, name: &str) {
    let group: PodGroup = from(json!({"metadata": {"name": name, "finalizers": [FINALIZER]},
        "spec": {"schedulingPolicy": {"basic": {}}}}));
    Api::<PodGroup>::namespaced(client, "default").create(&group, &PostParams::default()).expect("PodGroup created");
}

/// A pod (never scheduled: no nodes run) in PodGroup `group`.
fn create_pod(client: &Client, name: &str, group: &str) {
    let pod: Pod = from(json!({"metadata": {"name": name}, "spec": {
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        "schedulingGroup": {"podGroupName": group}}}));
    Api::<Pod>::namespaced(client, "default").create(&pod, &PostParams::default()).expect("pod created");
}

fn group(cluster: &Cluster, name: &str) -> Option<PodGroup> {
    cluster.api::<PodGroup>().get_opt(name).expect("PodGroup read")
}

/// Deletes the PodGroup and checks that it stays, with its finalizer, while in use.
fn delete_and_expect_kept(cluster: &Cluster, name: &str) {
    cluster.api::<PodGroup>().delete(name, &DeleteParams::default()).expect("PodGroup deleted");
    eventually("the PodGroup terminating", || group(cluster, name).filter(|g| g.metadata.deletion_timestamp.is_some()));
    expect_kept(cluster, name);
}

fn expect_kept(cluster: &Cluster, name: &str) {
    std::thread::sleep(SETTLE);
    let kept = group(cluster, name).expect("the PodGroup is kept while in use");
    assert!(kept.metadata.finalizers.iter().flatten().any(|f| f == FINALIZER), "the finalizer stays");
}

fn wait_gone(cluster: &Cluster, name: &str) {
    eventually("the PodGroup gone", || group(cluster, name).is_none().then_some(()));
}

fn a_group_stays_while_an_active_pod_names_it(backend: Backend) {
    let cluster = start(backend, |client| {
        create_group(client, "gang");
        create_pod(client, "worker-0", "gang");
        create_pod(client, "worker-1", "gang");
    });

    delete_and_expect_kept(&cluster, "gang");

    // One pod finishes: the other still holds the group.
    let succeeded = Patch::Merge(json!({"status": {"phase": "Succeeded"}}));
    cluster.api::<Pod>().patch_status("worker-0", &succeeded, &PostParams::default()).expect("pod finished");
    expect_kept(&cluster, "gang");

    // The last active pod goes (never bound, it is deleted at once).
    cluster.api::<Pod>().delete("worker-1", &DeleteParams::default()).expect("pod deleted");
    wait_gone(&cluster, "gang");

    // A group no pod names goes as soon as it is deleted.
    create_group(&cluster.client, "idle");
    cluster.api::<PodGroup>().delete("idle", &DeleteParams::default()).expect("PodGroup deleted");
    wait_gone(&cluster, "idle");
}
