//! The pod garbage collector on both backends with a simulated node, with a short period
//! and quarantine (upstream's `NewPodGCInternal`): terminated pods beyond the threshold go
//! oldest first, pods bound to a missing node are marked Failed with the `DisruptionTarget`
//! condition and force-deleted, as are terminating pods never scheduled and terminating pods
//! on an out-of-service node.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kcm::apimachinery::clock::RealClock;
use kcm::app::controllers::named;
use kcm::app::flags::Options;
use kcm::client::{Api, Client, DeleteParams, ListParams, Patch, PostParams};
use kcm::controllers::podgc;
use kcm::runtime::controller::{Controller, ControllerContext};
use kcm_sandbox::sandbox::nodes::NodeOptions;
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, eventually, from};

/// Holds pods after their deletion so that the test can look at them.
const HOLD: &str = "example.com/hold";

/// The controller with a 1 s period and a 3 s quarantine.
fn fast_pod_gc(
    context: &ControllerContext<'_>,
    options: &Options,
) -> Result<Controller, kcm::apimachinery::errors::BoxError> {
    let config = podgc::Config {
        terminated_pod_threshold: options.pod_gc.terminated_pod_gc_threshold,
        period: Duration::from_secs(1),
        quarantine: Duration::from_secs(3),
        clock: Arc::new(RealClock),
    };
    Ok(podgc::new(context, config))
}

fn start(backend: Backend) -> Cluster {
    start_after(backend, |_| ())
}

/// [`start`], with what `prepare` creates in the controller's first lists.
fn start_after(backend: Backend, prepare: impl FnOnce(&Client)) -> Cluster {
    harness::with(&[named("pod-garbage-collector-controller").started_by(fast_pod_gc)])
        .on(backend)
        .names(&["pod-garbage-collector-controller"])
        .nodes(&["node-a"])
        .node_options(NodeOptions { job_pod_run_time: Duration::from_millis(300), ..harness::fast_nodes() })
        .flags(&["--terminated-pod-gc-threshold=1"])
        .start_with(|client, _| prepare(client))
}

fn phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default()
}

/// This module's helpers on the harness's `Cluster`. A trait rather than an inherent `impl`: the
/// controller modules share one test binary, where two modules' inherent methods of one name
/// would collide.
trait ClusterExt {
    fn pods(&self) -> Api<Pod>;
    fn create_pod(&self, name: &str, spec: Value, finalizers: &[&str]) -> Pod;
    fn pod(&self, name: &str) -> Option<Pod>;
    fn names(&self) -> Vec<String>;
    fn wait_failed_and_deleted(&self, name: &str) -> Pod;
    fn release(&self, name: &str);
}

impl ClusterExt for Cluster {
    fn pods(&self) -> Api<Pod> {
        Api::namespaced(&self.client, "default")
    }

    fn create_pod(&self, name: &str, spec: Value, finalizers: &[&str]) -> Pod {
        let mut full = json!({"containers": [{"name": "app", "image": "nginx:1.27"}]});
        if let (Some(target), Value::Object(extra)) = (full.as_object_mut(), spec) {
            target.extend(extra);
        }
        let pod = from(json!({"metadata": {"name": name, "finalizers": finalizers}, "spec": full}));
        self.pods().create(&pod, &PostParams::default()).expect("pod created")
    }

    fn pod(&self, name: &str) -> Option<Pod> {
        self.pods().get_opt(name).expect("a pod read")
    }

    fn names(&self) -> Vec<String> {
        let pods = self.pods().list(&ListParams::default()).expect("pods").items;
        let mut names: Vec<String> = pods.into_iter().filter_map(|p| p.metadata.name).collect();
        names.sort();
        names
    }

    /// Waits until the pod is being deleted with phase Failed (held by its finalizer).
    fn wait_failed_and_deleted(&self, name: &str) -> Pod {
        eventually(&format!("{name} marked Failed and deleted"), || {
            let pod = self.pod(name)?;
            (pod.metadata.deletion_timestamp.is_some() && phase(&pod) == "Failed").then_some(pod)
        })
    }

    /// Lets a held pod go and waits until it is gone.
    fn release(&self, name: &str) {
        let patch = Patch::Merge(json!({"metadata": {"finalizers": null}}));
        self.pods().patch(name, &patch, &PostParams::default()).expect("finalizer removed");
        eventually(&format!("{name} gone"), || self.pod(name).is_none().then_some(()));
    }
}

fn disruption_target(pod: &Pod) -> Option<Value> {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref())?;
    let condition = conditions.iter().find(|c| c.type_ == "DisruptionTarget")?;
    Some(json!([condition.status, condition.reason, condition.message]))
}

on_both_backends!(terminated_pods_beyond_the_threshold_go_oldest_first);
fn terminated_pods_beyond_the_threshold_go_oldest_first(backend: Backend) {
    let cluster = start(backend);
    let keeper = cluster.create_pod("keeper", json!({}), &[]);
    // Names in the opposite order of creation: the creation time decides, not the name.
    for (i, name) in ["z-oldest", "y-middle", "a-newest"].iter().enumerate() {
        if i > 0 {
            // Creation timestamps have a resolution of one second.
            std::thread::sleep(Duration::from_millis(1100));
        }
        cluster.create_pod(name, json!({"restartPolicy": "Never"}), &[]);
    }
    eventually("the newest completed pod alone left", || (cluster.names() == ["a-newest", "keeper"]).then_some(()));
    let newest = cluster.pod("a-newest").expect("kept");
    eventually("a-newest completes", || (phase(&cluster.pod("a-newest")?) == "Succeeded").then_some(()));
    assert_eq!(newest.metadata.deletion_timestamp, None);
    assert_eq!(cluster.pod("keeper").and_then(|p| p.metadata.uid), keeper.metadata.uid, "running pods stay");
}

on_both_backends!(pods_of_a_missing_node_are_failed_with_a_disruption_condition_and_deleted);
fn pods_of_a_missing_node_are_failed_with_a_disruption_condition_and_deleted(backend: Backend) {
    let cluster = start(backend);
    let created = cluster.create_pod("orphan", json!({"nodeName": "ghost"}), &[HOLD]);
    let bound = cluster.create_pod("bound", json!({"nodeName": "node-a"}), &[]);
    let pod = cluster.wait_failed_and_deleted("orphan");
    assert_eq!(
        disruption_target(&pod),
        Some(json!(["True", "DeletionByPodGC", "PodGC: node no longer exists"])),
        "{:?}",
        pod.status
    );
    assert_eq!(pod.metadata.deletion_grace_period_seconds, Some(0), "force-deleted");
    // v1.36 (PodObservedGenerationTracking GA): the condition and the status observe the
    // pod's generation before its deletion (which bumps it).
    let status = pod.status.as_ref().expect("a status");
    let target = status.conditions.iter().flatten().find(|c| c.type_ == "DisruptionTarget").expect("the condition");
    let generation = created.metadata.generation.filter(|g| *g != 0);
    assert_eq!((target.observed_generation, status.observed_generation), (generation, generation));
    cluster.release("orphan");
    let still = cluster.pod("bound").expect("a pod on an existing node stays");
    assert_eq!(still.metadata.uid, bound.metadata.uid);
    assert_eq!(still.metadata.deletion_timestamp, None);
}

on_both_backends!(terminating_pods_never_scheduled_or_on_out_of_service_nodes_are_force_deleted);
fn terminating_pods_never_scheduled_or_on_out_of_service_nodes_are_force_deleted(backend: Backend) {
    // Nodes fenced off with the out-of-service taint, one of them still Ready; no kubelets. In
    // the controller's first list of nodes: a pass that saw the Ready one's pod terminating
    // while the node's cached copy still lacked its Ready condition would force-delete it.
    let cluster = start_after(backend, |client| {
        let nodes = Api::<Node>::all(client);
        for (name, ready) in [("fenced", "False"), ("fenced-but-ready", "True")] {
            let node: Node = from(json!({
                "metadata": {"name": name},
                "spec": {"taints": [{"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}]},
            }));
            nodes.create(&node, &PostParams::default()).expect("node created");
            let status = json!({"status": {"conditions": [{"type": "Ready", "status": ready, "reason": "Test"}]}});
            nodes.patch_status(name, &Patch::Merge(status), &PostParams::default()).expect("status set");
        }
    });
    // Deleted first: whatever pass sees the other pods terminating sees this one too.
    cluster.create_pod("on-ready", json!({"nodeName": "fenced-but-ready"}), &[HOLD]);
    cluster.create_pod("unscheduled", json!({"schedulerName": "nobody"}), &[HOLD]);
    cluster.create_pod("on-fenced", json!({"nodeName": "fenced"}), &[HOLD]);
    for name in ["on-ready", "unscheduled", "on-fenced"] {
        cluster.pods().delete(name, &DeleteParams::default()).expect("deletion started");
    }
    for name in ["unscheduled", "on-fenced"] {
        let pod = cluster.wait_failed_and_deleted(name);
        assert_eq!(disruption_target(&pod), None, "{name}: only orphans get the condition");
        cluster.release(name);
    }
    let pod = cluster.pod("on-ready").expect("held");
    assert_ne!(phase(&pod), "Failed", "a Ready node's terminating pods are left to its kubelet");
    assert_ne!(pod.metadata.deletion_grace_period_seconds, Some(0));
    // Without a kubelet, what would stop it: a deletion with no grace period.
    let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
    cluster.pods().delete("on-ready", &now).expect("force-deleted");
    cluster.release("on-ready");
}
