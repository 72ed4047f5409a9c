//! The node lifecycle and taint eviction controllers on both backends with simulated nodes
//! and shortened node timings: a silent node goes Unknown, is tainted, its pods turn NotReady
//! and are evicted after their tolerations; it recovers when its kubelet comes back; condition
//! taints follow the nodes; with every node of the only zone down nothing is evicted.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Pod, Taint};
use kcm::app::controllers::named;
use kcm::client::{Api, Patch, PostParams};
use kcm_sandbox::sandbox::nodes::NodeOptions;
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, eventually, from};

const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
const NOT_READY: &str = "node.kubernetes.io/not-ready";

/// Two nodes whose kubelets renew their Leases every 500 ms, and both controllers with a 1 s
/// monitor period and 5 s grace periods. The scheduler honours the not-ready:NoSchedule taint
/// of new nodes, as kube-scheduler does: pods run only once the controller removed it.
fn start(backend: Backend) -> Cluster {
    start_with_flags(backend, &[])
}

/// Like `start`, with more flags.
fn start_with_flags(backend: Backend, extra: &[&str]) -> Cluster {
    start_monitoring_every(backend, "1s", extra)
}

/// Like `start_with_flags`, with a monitor period of `period`.
fn start_monitoring_every(backend: Backend, period: &str, extra: &[&str]) -> Cluster {
    let nodes = NodeOptions {
        lease_renew_interval: Duration::from_millis(500),
        strict_not_ready_taint: true,
        ..harness::fast_nodes()
    };
    harness::with(&[named("node-lifecycle-controller"), named("taint-eviction-controller")])
        .on(backend)
        .node_options(nodes)
        .flags(&[&format!("--node-monitor-period={period}"), "--node-monitor-grace-period=5s"])
        .flags(&["--node-startup-grace-period=5s"])
        .flags(extra)
        .start()
}

fn taints(node: &Node) -> Vec<Taint> {
    node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default()
}

fn has_taint(node: &Node, key: &str, effect: &str) -> bool {
    taints(node).iter().any(|t| t.key == key && t.effect == effect)
}

fn condition(node: &Node, kind: &str) -> Option<(String, Option<String>, Option<String>)> {
    let conditions = node.status.as_ref()?.conditions.as_ref()?;
    let c = conditions.iter().find(|c| c.type_ == kind)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

fn pod_condition(pod: &Pod, kind: &str) -> Option<(String, Option<String>)> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let c = conditions.iter().find(|c| c.type_ == kind)?;
    Some((c.status.clone(), c.reason.clone()))
}

/// This module's helpers on the harness's `Cluster`. A trait rather than an inherent `impl`: the
/// controller modules share one test binary, where two modules' inherent methods of one name
/// would collide.
trait ClusterExt {
    fn nodes(&self) -> Api<Node>;
    fn pods(&self) -> Api<Pod>;
    fn node(&self, name: &str) -> Node;
    fn wait_node(&self, name: &str, what: &str, check: impl Fn(&Node) -> bool) -> Node;
    fn run_pod(&self, name: &str, node: &str, tolerations: Value) -> Pod;
    fn pod(&self, name: &str) -> Pod;
    fn events(&self, reason: &str) -> Vec<(String, String)>;
    fn wait_event(&self, reason: &str, message: &str, component: &str);
}

impl ClusterExt for Cluster {
    fn nodes(&self) -> Api<Node> {
        Api::cluster(&self.client)
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(&self.client, "default")
    }

    fn node(&self, name: &str) -> Node {
        self.nodes().get(name).expect("the node")
    }

    /// Waits until `check` holds for node `name`.
    fn wait_node(&self, name: &str, what: &str, check: impl Fn(&Node) -> bool) -> Node {
        eventually(&format!("{name}: {what}"), || Some(self.node(name)).filter(|n| check(n)))
    }

    /// A pod on `node` with `tolerations`, waited for until Running and Ready.
    fn run_pod(&self, name: &str, node: &str, tolerations: Value) -> Pod {
        let pod: Pod = from(json!({"metadata": {"name": name}, "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": tolerations,
            "containers": [{"name": "app", "image": "nginx:1.27"}]}}));
        self.pods().create(&pod, &PostParams::default()).expect("pod created");
        eventually(&format!("pod {name} Ready"), || {
            let pod = self.pods().get(name).ok()?;
            (pod_condition(&pod, "Ready").map(|c| c.0).as_deref() == Some("True")).then_some(pod)
        })
    }

    fn pod(&self, name: &str) -> Pod {
        self.pods().get(name).expect("the pod")
    }

    /// Messages of the events with `reason` in `default`, with their source components.
    fn events(&self, reason: &str) -> Vec<(String, String)> {
        let events = Api::<Event>::namespaced(&self.client, "default").list(&Default::default()).expect("events");
        events
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .map(|e| {
                let component = e.source.and_then(|s| s.component).unwrap_or_default();
                (e.message.unwrap_or_default(), component)
            })
            .collect()
    }

    fn wait_event(&self, reason: &str, message: &str, component: &str) {
        eventually(&format!("event {reason}: {message}"), || {
            self.events(reason).iter().any(|(m, c)| m == message && c == component).then_some(())
        });
    }
}

/// Tolerations of both NoExecute node taints for `seconds` (forever for `None`).
fn node_failure_tolerations(seconds: Option<i64>) -> Value {
    let toleration = |key: &str| {
        let mut t = json!({"key": key, "operator": "Exists", "effect": "NoExecute"});
        if let Some(seconds) = seconds {
            t["tolerationSeconds"] = seconds.into();
        }
        t
    };
    json!([toleration(UNREACHABLE), toleration(NOT_READY)])
}

on_both_backends!(a_silent_node_is_marked_unknown_tainted_and_drained_and_recovers);
fn a_silent_node_is_marked_unknown_tainted_and_drained_and_recovers(backend: Backend) {
    let cluster = start(backend);
    assert_eq!(cluster.controller_names(), ["node-lifecycle-controller", "taint-eviction-controller"]);
    for name in ["node-a", "node-b"] {
        cluster.wait_node(name, "the admission's not-ready:NoSchedule taint removed once Ready", |n| {
            condition(n, "Ready").is_some_and(|c| c.0 == "True") && !has_taint(n, NOT_READY, "NoSchedule")
        });
        cluster.wait_event(
            "RegisteredNode",
            &format!("Node {name} event: Registered Node {name} in Controller"),
            "node-controller",
        );
    }

    // The unschedulable taint mirrors spec.unschedulable.
    let cordon = |on: bool| {
        let patch = Patch::Merge(json!({"spec": {"unschedulable": on}}));
        cluster.nodes().patch("node-a", &patch, &PostParams::default()).expect("cordon");
    };
    cordon(true);
    let cordoned = cluster.wait_node("node-a", "the unschedulable taint", |n| {
        has_taint(n, "node.kubernetes.io/unschedulable", "NoSchedule")
    });
    let added = taints(&cordoned).into_iter().find(|t| t.key == "node.kubernetes.io/unschedulable");
    assert!(added.and_then(|t| t.time_added).is_some(), "the controller stamps the taints it adds");
    cordon(false);
    cluster.wait_node("node-a", "no unschedulable taint", |n| {
        !has_taint(n, "node.kubernetes.io/unschedulable", "NoSchedule")
    });

    // Pods on node-b: one tolerating its failure for 1 s, one forever, one with admission's 300 s.
    let short = cluster.run_pod("short", "node-b", node_failure_tolerations(Some(1)));
    cluster.run_pod("forever", "node-b", node_failure_tolerations(None));
    let default = cluster.run_pod("default", "node-b", json!([]));
    let seconds: Vec<Option<i64>> =
        default.spec.and_then(|s| s.tolerations).unwrap_or_default().iter().map(|t| t.toleration_seconds).collect();
    assert_eq!(seconds, [Some(300), Some(300)], "DefaultTolerationSeconds admission");

    assert!(cluster.simulated().stop_heartbeat("node-b"));
    let silent =
        cluster.wait_node("node-b", "Ready Unknown", |n| condition(n, "Ready").is_some_and(|c| c.0 == "Unknown"));
    let unknown = (
        "Unknown".to_string(),
        Some("NodeStatusUnknown".to_string()),
        Some("Kubelet stopped posting node status.".to_string()),
    );
    for kind in ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"] {
        assert_eq!(condition(&silent, kind), Some(unknown.clone()), "{kind}");
    }
    cluster.wait_event("NodeNotReady", "Node node-b status is now: NodeNotReady", "node-controller");
    let tainted = cluster.wait_node("node-b", "the unreachable taints", |n| {
        has_taint(n, UNREACHABLE, "NoExecute") && has_taint(n, UNREACHABLE, "NoSchedule")
    });
    let no_execute = taints(&tainted).into_iter().find(|t| t.key == UNREACHABLE && t.effect == "NoExecute");
    assert!(no_execute.and_then(|t| t.time_added).is_some());
    assert!(!has_taint(&tainted, NOT_READY, "NoExecute"));

    // Pods turn NotReady; the one tolerating 1 s is marked and deleted.
    for name in ["forever", "default"] {
        eventually(&format!("pod {name} NotReady"), || {
            (pod_condition(&cluster.pod(name), "Ready").map(|c| c.0).as_deref() == Some("False")).then_some(())
        });
    }
    cluster.wait_event("NodeNotReady", "Node is not ready", "node-controller");
    let evicted = eventually("pod short deleted", || {
        let pod = cluster.pod("short");
        pod.metadata.deletion_timestamp.is_some().then_some(pod)
    });
    assert_eq!(
        pod_condition(&evicted, "DisruptionTarget"),
        Some(("True".to_string(), Some("DeletionByTaintManager".to_string())))
    );
    // v1.36: the condition observes the pod's generation before its deletion (which bumps it).
    let conditions = evicted.status.as_ref().and_then(|s| s.conditions.as_ref());
    let target = conditions.and_then(|c| c.iter().find(|c| c.type_ == "DisruptionTarget")).expect("the condition");
    assert_eq!(target.observed_generation, short.metadata.generation.filter(|g| *g != 0));
    cluster.wait_event("TaintManagerEviction", "Marking for deletion Pod default/short", "taint-eviction-controller");
    for name in ["forever", "default"] {
        let pod = cluster.pod(name);
        assert!(pod.metadata.deletion_timestamp.is_none(), "{name} tolerates the taint for longer");
    }

    // The kubelet comes back: Ready again, the taints go, the pending eviction is cancelled.
    assert!(cluster.simulated().resume_heartbeat("node-b"));
    let healthy = cluster.wait_node("node-b", "Ready and untainted", |n| {
        condition(n, "Ready").is_some_and(|c| c.0 == "True")
            && !has_taint(n, UNREACHABLE, "NoExecute")
            && !has_taint(n, UNREACHABLE, "NoSchedule")
    });
    assert_eq!(condition(&healthy, "MemoryPressure").map(|c| c.0), Some("False".into()), "the kubelet's again");
    cluster.wait_event(
        "TaintManagerEviction",
        "Cancelling deletion of Pod default/default",
        "taint-eviction-controller",
    );
    assert!(cluster.pod("default").metadata.deletion_timestamp.is_none());
}

on_both_backends!(a_node_marked_unknown_is_tainted_in_the_same_monitor_pass);
fn a_node_marked_unknown_is_tainted_in_the_same_monitor_pass(backend: Backend) {
    // A monitor pass every 30 s: v1.33 tainted on the pass after the one that wrote Unknown
    // (30 s later); v1.36 queues the node for the taint in that same pass, and the tainting
    // pass (every 100 ms) adds it at once. That pass reads the node from the informer's cache,
    // as upstream's reads its lister: when it runs before the cache has the Unknown condition
    // just written, it drops the node as ready again and the next monitor pass taints it, a
    // race upstream's binary can lose as well (seen once in CI on a loaded machine). So the
    // node fails up to three times and one same-pass taint is enough; v1.33's order would be
    // a period late every time.
    let cluster = start_monitoring_every(backend, "30s", &[]);
    let mut late = Vec::new();
    for _ in 0..3 {
        cluster.wait_node("node-b", "Ready without the not-ready or unreachable taints", |n| {
            condition(n, "Ready").is_some_and(|c| c.0 == "True")
                && !has_taint(n, NOT_READY, "NoSchedule")
                && !has_taint(n, UNREACHABLE, "NoExecute")
        });
        assert!(cluster.simulated().stop_heartbeat("node-b"));
        let tainted = cluster.wait_node("node-b", "Unknown with the unreachable NoExecute taint", |n| {
            condition(n, "Ready").is_some_and(|c| c.0 == "Unknown") && has_taint(n, UNREACHABLE, "NoExecute")
        });
        assert!(!has_taint(&tainted, NOT_READY, "NoExecute"));
        let ready = tainted.status.as_ref().and_then(|s| s.conditions.as_ref()).and_then(|c| {
            c.iter().find(|c| c.type_ == "Ready").and_then(|c| c.last_transition_time.as_ref()).map(|t| t.0)
        });
        let added = taints(&tainted)
            .into_iter()
            .find(|t| t.key == UNREACHABLE && t.effect == "NoExecute")
            .and_then(|t| t.time_added)
            .map(|t| t.0);
        let (Some(unknown_since), Some(added)) = (ready, added) else {
            panic!("the Ready condition's lastTransitionTime and the taint's timeAdded: {tainted:?}")
        };
        let delay = added.duration_since(unknown_since);
        if delay.as_secs() < 15 {
            return;
        }
        late.push(format!("{delay:?} after {unknown_since}"));
        assert!(cluster.simulated().resume_heartbeat("node-b"));
    }
    panic!("tainted a monitor period after it went Unknown, three times: {late:?}");
}

on_both_backends!(with_every_node_of_the_only_zone_down_nothing_is_evicted);
fn with_every_node_of_the_only_zone_down_nothing_is_evicted(backend: Backend) {
    let cluster = start(backend);
    cluster.wait_node("node-a", "Ready without the not-ready taint", |n| !has_taint(n, NOT_READY, "NoSchedule"));
    // The two kubelets' last renewals may fall either side of a monitor pass, so node-a may be
    // Unknown (and tainted NoExecute, the zone still Normal) a pass before node-b; the next pass
    // sees the full disruption and takes the taint off. A toleration of 3 s outlasts that pass,
    // as upstream's taint eviction would need too; it is still well inside the 5 s watched below.
    cluster.run_pod("short", "node-a", node_failure_tolerations(Some(3)));
    for name in ["node-a", "node-b"] {
        assert!(cluster.simulated().stop_heartbeat(name));
    }
    for name in ["node-a", "node-b"] {
        cluster.wait_node(name, "Unknown with the unreachable NoSchedule taint", |n| {
            condition(n, "Ready").is_some_and(|c| c.0 == "Unknown") && has_taint(n, UNREACHABLE, "NoSchedule")
        });
    }
    eventually("pod short NotReady", || {
        (pod_condition(&cluster.pod("short"), "Ready").map(|c| c.0).as_deref() == Some("False")).then_some(())
    });
    // Full disruption: several monitor passes later, still no NoExecute taint and no eviction.
    std::thread::sleep(Duration::from_secs(5));
    for name in ["node-a", "node-b"] {
        let node = cluster.node(name);
        assert!(!has_taint(&node, UNREACHABLE, "NoExecute"), "{name}: {:?}", taints(&node));
    }
    assert!(cluster.pod("short").metadata.deletion_timestamp.is_none());

    // One node back: the zone leaves full disruption and the other node is tainted.
    assert!(cluster.simulated().resume_heartbeat("node-a"));
    cluster.wait_node("node-b", "the unreachable NoExecute taint", |n| has_taint(n, UNREACHABLE, "NoExecute"));
}

on_both_backends!(without_the_separate_controller_gate_the_node_lifecycle_controller_evicts);
/// The gate is GA and locked on since 1.34: only an emulated 1.33 may still turn it off.
fn without_the_separate_controller_gate_the_node_lifecycle_controller_evicts(backend: Backend) {
    let flags = ["--emulated-version=1.33", "--feature-gates=SeparateTaintEvictionController=false"];
    let cluster = start_with_flags(backend, &flags);
    assert_eq!(
        cluster.controller_names(),
        ["node-lifecycle-controller"],
        "the taint manager runs inside it, as upstream"
    );
    cluster.wait_node("node-b", "Ready without the not-ready taint", |n| !has_taint(n, NOT_READY, "NoSchedule"));
    cluster.run_pod("short", "node-b", node_failure_tolerations(Some(1)));
    assert!(cluster.simulated().stop_heartbeat("node-b"));
    eventually("pod short deleted", || cluster.pod("short").metadata.deletion_timestamp.map(|_| ()));
    cluster.wait_event("TaintManagerEviction", "Marking for deletion Pod default/short", "taint-eviction-controller");
}
