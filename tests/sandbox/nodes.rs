//! The sandbox's simulated nodes against a real sandbox over HTTPS: registration and leases,
//! scheduling, the kubelet's pod lifecycle, deletion, dead kubelets, and scripted Job pods (one
//! test on both backends: the real kube-apiserver takes the statuses the kubelets write).
//!
//! Every test waits for what it expects with a generous deadline and never asserts on timing,
//! so that it holds on a loaded machine.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, PodCondition, ServiceAccount};
use kcm::client::{Api, Client, ClientOptions, DeleteParams, Patch, PostParams};
use kcm_sandbox::sandbox::nodes::{NodeOptions, SimulatedNodes};
use kcm_sandbox::sandbox::server::{Sandbox, SandboxOptions};
use serde_json::{Value, json};

use crate::harness;

/// The longest any expected change may take.
const DEADLINE: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(50);

/// A sandbox with simulated nodes and an admin client.
struct Cluster {
    nodes: Option<SimulatedNodes>,
    client: Client,
    // Dropped last: the nodes stop before the server does.
    _sandbox: Sandbox,
}

/// Fast kubelets, so that the tests see many heartbeats.
fn fast() -> NodeOptions {
    NodeOptions {
        lease_renew_interval: Duration::from_millis(200),
        status_report_interval: Duration::from_secs(2),
        pod_start_delay: Duration::from_millis(200),
        job_pod_run_time: Duration::from_millis(500),
        tick: Duration::from_millis(50),
        ..NodeOptions::default()
    }
}

fn start(names: &[&str], options: NodeOptions) -> Cluster {
    let listen = "127.0.0.1:0".parse().expect("an address");
    let sandbox = Sandbox::start(SandboxOptions { listen, ..SandboxOptions::default() }).expect("the sandbox starts");
    let client = Client::new(sandbox.admin_config(), ClientOptions { qps: -1.0, burst: 1, timeout: DEADLINE })
        .expect("a client");
    // Pod admission needs the namespace's default ServiceAccount.
    let account: ServiceAccount = from(json!({"metadata": {"name": "default"}}));
    Api::<ServiceAccount>::namespaced(&client, "default")
        .create(&account, &PostParams::default())
        .expect("the default ServiceAccount");
    let names = names.iter().map(|n| n.to_string()).collect();
    let nodes = SimulatedNodes::start(sandbox.admin_config(), names, options).expect("the nodes start");
    Cluster { nodes: Some(nodes), client, _sandbox: sandbox }
}

impl Cluster {
    fn nodes(&self) -> &SimulatedNodes {
        self.nodes.as_ref().expect("running nodes")
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(&self.client, "default")
    }

    fn node_api(&self) -> Api<Node> {
        Api::cluster(&self.client)
    }

    fn leases(&self) -> Api<Lease> {
        Api::namespaced(&self.client, "kube-node-lease")
    }

    fn create_pod(&self, name: &str, spec: Value) -> Pod {
        let mut spec = spec;
        if spec.get("containers").is_none() {
            spec["containers"] = json!([{"name": "app", "image": "nginx:1.27"}]);
        }
        let pod: Pod = from(json!({"metadata": {"name": name}, "spec": spec}));
        self.pods().create(&pod, &PostParams::default()).expect("pod created")
    }

    /// Waits until the pod satisfies `check`, and returns it.
    fn wait_pod(&self, name: &str, what: &str, check: impl Fn(&Pod) -> bool) -> Pod {
        wait_for(&format!("pod {name}: {what}"), || self.pods().get_opt(name).expect("pod read").filter(|p| check(p)))
    }

    fn wait_running(&self, name: &str) -> Pod {
        self.wait_pod(name, "Running and Ready", |p| phase(p) == "Running" && condition(p, "Ready") == Some("True"))
    }

    fn renew_time(&self, node: &str) -> String {
        let lease = self.leases().get(node).expect("lease read");
        let renew = lease.spec.and_then(|s| s.renew_time).expect("a renew time");
        renew.0.to_string()
    }

    /// Removes the not-ready taint TaintNodesByCondition put on new nodes (the node lifecycle
    /// controller's job).
    fn untaint(&self, node: &str) {
        self.node_api()
            .patch(node, &Patch::Merge(json!({"spec": {"taints": null}})), &PostParams::default())
            .expect("node untainted");
    }
}

fn from<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

fn wait_for<T>(what: &str, check: impl FnMut() -> Option<T>) -> T {
    harness::poll_until(DEADLINE, POLL, what, check)
}

fn phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default()
}

fn node_of(pod: &Pod) -> &str {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default()
}

fn pod_condition<'a>(pod: &'a Pod, kind: &str) -> Option<&'a PodCondition> {
    pod.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == kind)
}

fn condition<'a>(pod: &'a Pod, kind: &str) -> Option<&'a str> {
    pod_condition(pod, kind).map(|c| c.status.as_str())
}

fn node_ready(node: &Node) -> Option<&str> {
    let conditions = node.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| c.type_ == "Ready").map(|c| c.status.as_str())
}

#[test]
fn nodes_register_ready_with_their_leases() {
    let options = NodeOptions { zones: vec!["us-east-1a".into(), "us-east-1b".into()], ..fast() };
    let cluster = start(&["node-1", "node-2", "node-3"], options);
    assert_eq!(cluster.nodes().names(), ["node-1", "node-2", "node-3"]);
    for (i, name) in ["node-1", "node-2", "node-3"].into_iter().enumerate() {
        let node = cluster.node_api().get(name).expect("the node is registered");
        assert_eq!(node_ready(&node), Some("True"));
        let labels = node.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("kubernetes.io/hostname").map(String::as_str), Some(name));
        assert_eq!(labels.get("kubernetes.io/os").map(String::as_str), Some("linux"));
        assert_eq!(labels.get("beta.kubernetes.io/arch").map(String::as_str), Some("amd64"));
        let zone = if i % 2 == 0 { "us-east-1a" } else { "us-east-1b" };
        assert_eq!(labels.get("topology.kubernetes.io/zone").map(String::as_str), Some(zone));
        assert_eq!(labels.get("topology.kubernetes.io/region").map(String::as_str), Some("us-east-1"));
        let annotations = node.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations.get("volumes.kubernetes.io/controller-managed-attach-detach").map(String::as_str),
            Some("true")
        );
        let spec = node.spec.clone().unwrap_or_default();
        assert!(spec.pod_cidr.is_none(), "pod CIDRs are the controller manager's to give");
        // The only taint is the one kube-apiserver's TaintNodesByCondition adds.
        let taints: Vec<String> = spec.taints.unwrap_or_default().into_iter().map(|t| t.key).collect();
        assert_eq!(taints, ["node.kubernetes.io/not-ready"]);
        let status = node.status.clone().expect("a status");
        let info = status.node_info.expect("nodeInfo");
        assert_eq!(info.kubelet_version, "v1.36.2");
        assert_eq!(info.container_runtime_version, "containerd://2.0.0");
        let addresses: Vec<(String, String)> =
            status.addresses.unwrap_or_default().into_iter().map(|a| (a.type_, a.address)).collect();
        assert_eq!(addresses, [("InternalIP".into(), format!("10.0.0.{}", 10 + i)), ("Hostname".into(), name.into())]);
        assert_eq!(status.capacity.unwrap_or_default().get("pods").map(|q| q.0.as_str()), Some("110"));
        assert_eq!(status.daemon_endpoints.and_then(|d| d.kubelet_endpoint).map(|e| e.port), Some(10250));
        let pressure: Vec<(String, String)> = status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.type_, c.reason.unwrap_or_default()))
            .collect();
        assert_eq!(
            pressure,
            [
                ("MemoryPressure".into(), "KubeletHasSufficientMemory".into()),
                ("DiskPressure".into(), "KubeletHasNoDiskPressure".into()),
                ("PIDPressure".into(), "KubeletHasSufficientPID".into()),
                ("Ready".into(), "KubeletReady".into()),
            ]
        );

        let lease = cluster.leases().get(name).expect("the lease exists");
        let spec = lease.spec.clone().expect("a lease spec");
        assert_eq!(spec.holder_identity.as_deref(), Some(name));
        assert_eq!(spec.lease_duration_seconds, Some(40));
        let owners = lease.metadata.owner_references.clone().unwrap_or_default();
        assert_eq!(owners.len(), 1);
        assert_eq!((owners[0].kind.as_str(), owners[0].name.as_str()), ("Node", name));
        assert_eq!(Some(&owners[0].uid), node.metadata.uid.as_ref());
    }
    let before = cluster.renew_time("node-2");
    wait_for("the lease to be renewed", || (cluster.renew_time("node-2") != before).then_some(()));
}

#[test]
fn a_pending_pod_is_scheduled_and_runs() {
    let cluster = start(&["node-a", "node-b"], fast());
    let pod = cluster.create_pod("web", json!({"initContainers": [{"name": "setup", "image": "busybox"}]}));
    let uid = pod.metadata.uid.clone();
    let pod = cluster.wait_running("web");
    assert_eq!(pod.metadata.uid, uid);
    assert!(matches!(node_of(&pod), "node-a" | "node-b"));
    let status = pod.status.clone().expect("a status");
    let host_ip = status.host_ip.clone().expect("a host IP");
    assert!(host_ip == "10.0.0.10" || host_ip == "10.0.0.11", "{host_ip}");
    let pod_ip = status.pod_ip.clone().expect("a pod IP");
    assert!(pod_ip.starts_with("10.244."), "{pod_ip}");
    assert_eq!(status.pod_ips.unwrap_or_default().len(), 1);
    assert!(status.start_time.is_some());
    for kind in ["PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready", "PodScheduled"] {
        assert_eq!(condition(&pod, kind), Some("True"), "{kind}");
    }
    let container = &status.container_statuses.unwrap_or_default()[0];
    assert_eq!(container.name, "app");
    assert!(container.ready && container.started == Some(true) && container.restart_count == 0);
    assert_eq!(container.image, "docker.io/library/nginx:1.27");
    assert!(container.image_id.starts_with("docker.io/library/nginx@sha256:"));
    assert!(container.container_id.as_deref().is_some_and(|id| id.starts_with("containerd://")));
    assert!(container.state.as_ref().and_then(|s| s.running.as_ref()).is_some());
    let init = &status.init_container_statuses.unwrap_or_default()[0];
    let terminated = init.state.as_ref().and_then(|s| s.terminated.clone()).expect("init container completed");
    assert_eq!((terminated.exit_code, terminated.reason.as_deref()), (0, Some("Completed")));

    // More pods spread over the two nodes, each with its own IP.
    for name in ["web-2", "web-3", "web-4"] {
        cluster.create_pod(name, json!({}));
    }
    let pods: Vec<Pod> = ["web", "web-2", "web-3", "web-4"].iter().map(|n| cluster.wait_running(n)).collect();
    let on_a = pods.iter().filter(|p| node_of(p) == "node-a").count();
    assert_eq!(on_a, 2, "the scheduler spreads pods over the nodes");
    let mut ips: Vec<String> = pods.iter().filter_map(|p| p.status.as_ref().and_then(|s| s.pod_ip.clone())).collect();
    ips.sort();
    ips.dedup();
    assert_eq!(ips.len(), 4, "pod IPs are unique: {ips:?}");
}

#[test]
fn a_pod_no_node_matches_stays_pending() {
    let cluster = start(&["node-a", "node-b"], fast());
    cluster.create_pod("picky", json!({"nodeSelector": {"disktype": "ssd"}}));
    let pod = cluster.wait_pod("picky", "PodScheduled=False", |p| condition(p, "PodScheduled") == Some("False"));
    let scheduled = pod_condition(&pod, "PodScheduled").expect("PodScheduled");
    assert_eq!(scheduled.reason.as_deref(), Some("Unschedulable"));
    assert_eq!(
        scheduled.message.as_deref(),
        Some(
            "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        )
    );
    assert_eq!(phase(&pod), "Pending");
    // Labelling a node makes it fit.
    cluster
        .node_api()
        .patch("node-b", &Patch::Merge(json!({"metadata": {"labels": {"disktype": "ssd"}}})), &PostParams::default())
        .expect("node labelled");
    let pod = cluster.wait_running("picky");
    assert_eq!(node_of(&pod), "node-b");
    assert_eq!(condition(&pod, "PodScheduled"), Some("True"));
}

#[test]
fn pods_that_tolerate_nothing_avoid_tainted_nodes() {
    let cluster = start(&["node-a", "node-b"], fast());
    let taint = json!({"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]}});
    cluster.node_api().patch("node-a", &Patch::Merge(taint), &PostParams::default()).expect("node tainted");
    for name in ["p1", "p2", "p3"] {
        cluster.create_pod(name, json!({}));
    }
    for name in ["p1", "p2", "p3"] {
        assert_eq!(node_of(&cluster.wait_running(name)), "node-b");
    }
    // Pinned to the tainted node: only a pod that tolerates the taint gets there.
    let pinned = json!({"nodeSelector": {"kubernetes.io/hostname": "node-a"}});
    cluster.create_pod("intolerant", pinned.clone());
    let mut tolerant = pinned;
    tolerant["tolerations"] = json!([{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}]);
    cluster.create_pod("tolerant", tolerant);
    assert_eq!(node_of(&cluster.wait_running("tolerant")), "node-a");
    let pod = cluster.wait_pod("intolerant", "unschedulable", |p| condition(p, "PodScheduled") == Some("False"));
    let message = pod_condition(&pod, "PodScheduled").and_then(|c| c.message.clone()).unwrap_or_default();
    assert!(message.starts_with("0/2 nodes are available: "), "{message}");
    assert!(message.contains("1 node(s) had untolerated taint {dedicated: db}"), "{message}");
    assert!(message.contains("1 node(s) didn't match Pod's node affinity/selector"), "{message}");
}

/// The kubelet's admission: a pod given a node by its creator whose host port is taken there is
/// rejected (phase Failed, reason `NodePorts`), as upstream's StatefulSet e2e spec expects.
#[test]
fn a_pod_whose_host_port_is_taken_is_rejected_by_the_kubelet() {
    let cluster = start(&["node-a"], fast());
    let port = json!([{"name": "p", "containerPort": 21017, "hostPort": 21017}]);
    cluster.create_pod(
        "first",
        json!({"nodeName": "node-a", "containers": [{"name": "c", "image": "agnhost", "ports": port}]}),
    );
    cluster.wait_running("first");
    cluster.create_pod(
        "second",
        json!({"nodeName": "node-a", "containers": [{"name": "c", "image": "agnhost", "ports": port}]}),
    );
    let rejected = cluster.wait_pod("second", "Failed", |p| phase(p) == "Failed");
    let status = rejected.status.clone().expect("a status");
    assert_eq!(status.reason.as_deref(), Some("NodePorts"));
    assert_eq!(
        status.message.as_deref(),
        Some(
            "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
        )
    );
}

/// kube-scheduler's VolumeBinding: a pod whose claim is being deleted is unschedulable.
#[test]
fn a_pod_whose_claim_is_being_deleted_stays_pending() {
    let cluster = start(&["node-a"], fast());
    let claims = Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(&cluster.client, "default");
    let claim = from(json!({"metadata": {"name": "data", "finalizers": ["example.com/hold"]},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}));
    claims.create(&claim, &PostParams::default()).expect("claim created");
    claims.delete("data", &DeleteParams::default()).expect("claim deleted");
    cluster.create_pod("user", json!({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}));
    let pod = cluster.wait_pod("user", "unschedulable", |p| condition(p, "PodScheduled") == Some("False"));
    let message = pod_condition(&pod, "PodScheduled").and_then(|c| c.message.clone()).unwrap_or_default();
    assert!(message.contains("persistentvolumeclaim \"data\" is being deleted"), "{message}");
    assert!(pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_none());
}

#[test]
fn a_strict_scheduler_waits_for_the_not_ready_taint_to_go() {
    let cluster = start(&["node-a"], NodeOptions { strict_not_ready_taint: true, ..fast() });
    cluster.create_pod("early", json!({}));
    let pod = cluster.wait_pod("early", "unschedulable", |p| condition(p, "PodScheduled") == Some("False"));
    let message = pod_condition(&pod, "PodScheduled").and_then(|c| c.message.clone()).unwrap_or_default();
    assert!(message.contains("1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }"), "{message}");
    cluster.untaint("node-a");
    assert_eq!(node_of(&cluster.wait_running("early")), "node-a");
}

#[test]
fn pods_that_run_to_completion_succeed() {
    let cluster = start(&["node-a"], fast());
    let job_owned = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "job-pod", "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "job",
            "uid": "6b1b2d0e-0000-4000-8000-000000000001", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "work", "image": "busybox"}]}});
    cluster.pods().create(&from::<Pod>(job_owned), &PostParams::default()).expect("job pod created");
    cluster.create_pod("once", json!({"restartPolicy": "OnFailure"}));
    for name in ["job-pod", "once"] {
        let pod = cluster.wait_pod(name, "Succeeded", |p| phase(p) == "Succeeded");
        let ready = pod_condition(&pod, "Ready").expect("Ready");
        assert_eq!((ready.status.as_str(), ready.reason.as_deref()), ("False", Some("PodCompleted")));
        let status = pod.status.clone().expect("a status");
        let container = &status.container_statuses.unwrap_or_default()[0];
        let terminated = container.state.as_ref().and_then(|s| s.terminated.clone()).expect("terminated");
        assert_eq!((terminated.exit_code, terminated.reason.as_deref()), (0, Some("Completed")));
        assert!(!container.ready);
    }
    // A pod restarted always keeps running.
    cluster.create_pod("server", json!({}));
    cluster.wait_running("server");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(phase(&cluster.pods().get("server").expect("pod read")), "Running");
}

#[test]
fn fail_pod_marks_the_pod_failed() {
    let cluster = start(&["node-a"], fast());
    cluster.create_pod("crashy", json!({}));
    cluster.wait_running("crashy");
    cluster.nodes().fail_pod("default", "crashy").expect("pod failed");
    let pod = cluster.wait_pod("crashy", "Failed", |p| phase(p) == "Failed");
    let status = pod.status.clone().expect("a status");
    let terminated = status.container_statuses.unwrap_or_default()[0]
        .state
        .as_ref()
        .and_then(|s| s.terminated.clone())
        .expect("terminated");
    assert_eq!((terminated.exit_code, terminated.reason.as_deref()), (1, Some("Error")));
    assert_eq!(pod_condition(&pod, "Ready").and_then(|c| c.reason.as_deref()), Some("PodFailed"));
    assert!(cluster.nodes().fail_pod("default", "crashy").is_err(), "a failed pod cannot fail again");
    assert!(cluster.nodes().fail_pod("default", "missing").is_err());
}

#[test]
fn a_deleted_pod_is_stopped_and_removed_by_its_kubelet() {
    let cluster = start(&["node-a"], fast());
    cluster.create_pod("doomed", json!({}));
    cluster.wait_running("doomed");
    cluster.pods().delete("doomed", &DeleteParams::default()).expect("delete accepted");
    let pod = cluster.pods().get_opt("doomed").expect("pod read");
    // Terminating until the kubelet confirms (unless it already has).
    if let Some(pod) = pod {
        assert!(pod.metadata.deletion_timestamp.is_some());
    }
    wait_for("the pod to be gone", || cluster.pods().get_opt("doomed").expect("pod read").is_none().then_some(()));
}

#[test]
fn a_dead_kubelet_stops_renewing_and_leaves_its_pods_terminating() {
    let cluster = start(&["node-a", "node-b"], fast());
    cluster.create_pod("stuck", json!({"nodeSelector": {"kubernetes.io/hostname": "node-a"}}));
    cluster.wait_running("stuck");
    assert!(cluster.nodes().stop_heartbeat("node-a"));
    assert!(!cluster.nodes().stop_heartbeat("node-z"));

    // No more lease renewals while dead.
    let renewed = cluster.renew_time("node-a");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(cluster.renew_time("node-a"), renewed, "a dead kubelet renewed its lease");

    // A deleted pod stays Terminating: nobody confirms its end.
    cluster.pods().delete("stuck", &DeleteParams::default()).expect("delete accepted");
    std::thread::sleep(Duration::from_millis(1500));
    let pod = cluster.pods().get("stuck").expect("the pod is still there");
    assert!(pod.metadata.deletion_timestamp.is_some());
    assert_eq!(phase(&pod), "Running");

    // New pods go to the live node.
    for name in ["n1", "n2"] {
        cluster.create_pod(name, json!({}));
        assert_eq!(node_of(&cluster.wait_running(name)), "node-b");
    }

    // The kubelet comes back: renews its lease, takes the pod down, and reports Ready.
    cluster
        .node_api()
        .patch_status(
            "node-a",
            &Patch::Strategic(json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown",
                "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status."}]}})),
            &PostParams::default(),
        )
        .expect("node marked Unknown");
    assert!(cluster.nodes().resume_heartbeat("node-a"));
    wait_for("the lease to be renewed", || (cluster.renew_time("node-a") != renewed).then_some(()));
    wait_for("the pod to be gone", || cluster.pods().get_opt("stuck").expect("pod read").is_none().then_some(()));
    wait_for("node-a to be Ready", || {
        let node = cluster.node_api().get("node-a").expect("node read");
        (node_ready(&node) == Some("True")).then_some(())
    });
}

#[test]
fn a_node_marked_unknown_by_someone_else_reports_ready_again() {
    let cluster = start(&["node-a"], fast());
    let node = cluster.node_api().get("node-a").expect("node read");
    let conditions = node.status.and_then(|s| s.conditions).unwrap_or_default();
    let ready = conditions.iter().find(|c| c.type_ == "Ready").expect("Ready");
    let first_transition = ready.last_transition_time.clone();
    let unknown = json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
        "message": "Kubelet stopped posting node status."}]}});
    cluster.node_api().patch_status("node-a", &Patch::Strategic(unknown), &PostParams::default()).expect("marked");
    let node = wait_for("node-a to report Ready again", || {
        let node = cluster.node_api().get("node-a").expect("node read");
        (node_ready(&node) == Some("True")).then_some(node)
    });
    let conditions = node.status.and_then(|s| s.conditions).unwrap_or_default();
    let ready = conditions.iter().find(|c| c.type_ == "Ready").expect("Ready");
    assert_eq!(ready.reason.as_deref(), Some("KubeletReady"));
    assert!(ready.last_transition_time >= first_transition);
}

#[test]
fn a_deleted_node_comes_back_only_when_its_kubelet_restarts() {
    let cluster = start(&["node-a"], fast());
    let old_uid = cluster.node_api().get("node-a").expect("node read").metadata.uid;
    cluster.node_api().delete("node-a", &DeleteParams::default()).expect("node deleted");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(cluster.node_api().get_opt("node-a").expect("node read").is_none(), "a live kubelet re-registered");
    cluster.nodes().stop_heartbeat("node-a");
    cluster.nodes().resume_heartbeat("node-a");
    let node = wait_for("node-a to register again", || cluster.node_api().get_opt("node-a").expect("node read"));
    assert_ne!(node.metadata.uid, old_uid);
    assert_eq!(node_ready(&node), Some("True"));
}

#[test]
fn a_deleted_node_is_registered_again_when_asked_to() {
    let cluster = start(&["node-a"], NodeOptions { reregister_deleted_nodes: true, ..fast() });
    let old_uid = cluster.node_api().get("node-a").expect("node read").metadata.uid;
    cluster.node_api().delete("node-a", &DeleteParams::default()).expect("node deleted");
    let node = wait_for("node-a to register again", || {
        cluster.node_api().get_opt("node-a").expect("node read").filter(|n| n.metadata.uid != old_uid)
    });
    assert_eq!(node_ready(&node), Some("True"));
}

#[test]
fn stop_ends_every_write() {
    let mut cluster = start(&["node-a"], fast());
    let nodes = cluster.nodes.take().expect("running nodes");
    nodes.stop();
    let renewed = cluster.renew_time("node-a");
    cluster.create_pod("orphan", json!({}));
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(cluster.renew_time("node-a"), renewed);
    let pod = cluster.pods().get("orphan").expect("pod read");
    assert_eq!(node_of(&pod), "", "nothing schedules after stop");
}

/// A readiness probe's initial delay keeps a running pod unready that long; an image that does
/// not exist keeps its pod Pending in `ImagePullBackOff`.
#[test]
fn readiness_probes_delay_ready_and_missing_images_never_start() {
    let cluster = start(&["node-a"], fast());
    let probed = |name: &str, delay: u32| {
        cluster.create_pod(
            name,
            json!({"containers": [{"name": "app", "image": "nginx:1.27",
            "readinessProbe": {"httpGet": {"path": "/", "port": 80}, "initialDelaySeconds": delay}}]}),
        );
    };
    probed("slow", 3600);
    probed("quick", 1);
    cluster.create_pod("missing", json!({"containers": [{"name": "app", "image": "webserver:404"}]}));
    let running = cluster.wait_pod("slow", "Running", |p| phase(p) == "Running");
    assert_eq!(condition(&running, "Ready"), Some("False"), "ready before its probe's initial delay");
    assert_eq!(container_status(&running).started, Some(true));
    cluster.wait_pod("quick", "Ready", |p| condition(p, "Ready") == Some("True"));
    let missing = cluster.wait_pod("missing", "ImagePullBackOff", |p| {
        container_status(p).state.and_then(|s| s.waiting).and_then(|w| w.reason).as_deref() == Some("ImagePullBackOff")
    });
    assert_eq!(phase(&missing), "Pending");
}

// ---- Scripted run-to-completion pods (annotations `kcm-sandbox.dev/*`) ----

/// A pod owned by Job `job_uid` (no Job object needed: nothing here collects garbage), with
/// `annotations` and `restartPolicy`.
fn job_pod(name: &str, job_uid: &str, restart: &str, annotations: Value) -> Pod {
    from(json!({
        "metadata": {"name": name, "annotations": annotations,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "job", "uid": job_uid,
                "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"restartPolicy": restart, "containers": [{"name": "work", "image": "busybox"}]},
    }))
}

fn container_status(pod: &Pod) -> k8s_openapi::api::core::v1::ContainerStatus {
    pod.status.clone().and_then(|s| s.container_statuses).unwrap_or_default().into_iter().next().unwrap_or_default()
}

/// The terminated state of the pod's container: (exit code, reason).
fn terminated(pod: &Pod) -> (i32, Option<String>) {
    let state = container_status(pod).state.and_then(|s| s.terminated).expect("terminated");
    (state.exit_code, state.reason)
}

/// What a scripted pod does on either server: fails with its code, is evicted as the kubelet's
/// eviction manager does, restarts in place under `OnFailure`; each status the real
/// kube-apiserver accepts too.
fn scripted_pods_fail_restart_and_are_evicted(backend: harness::Backend) {
    let cluster = harness::with(&[]).on(backend).nodes(&["node-a"]).node_options(fast()).start();
    let pods = Api::<Pod>::namespaced(&cluster.client, "default");
    let quick = |codes: &str| json!({"kcm-sandbox.dev/run-seconds": "0.2", "kcm-sandbox.dev/exit-codes": codes});
    // One Job each: a Job's runs are counted together.
    for (name, restart, codes, uid) in [
        ("fails", "Never", "3", "6b1b2d0e-0000-4000-8000-00000000a011"),
        ("evicted", "Never", "evicted", "6b1b2d0e-0000-4000-8000-00000000a012"),
        ("restarts", "OnFailure", "1,2,0", "6b1b2d0e-0000-4000-8000-00000000a013"),
    ] {
        let pod = job_pod(name, uid, restart, quick(codes));
        pods.create(&pod, &PostParams::default()).expect("pod created");
    }
    let wait = |name: &str, what: &str, check: &dyn Fn(&Pod) -> bool| {
        harness::eventually(&format!("pod {name}: {what}"), || pods.get_opt(name).expect("pod read").filter(check))
    };

    let failed = wait("fails", "Failed", &|p| phase(p) == "Failed");
    assert_eq!(terminated(&failed), (3, Some("Error".into())));
    assert_eq!(pod_condition(&failed, "Ready").and_then(|c| c.reason.as_deref()), Some("PodFailed"));

    let evicted = wait("evicted", "Failed", &|p| phase(p) == "Failed");
    let status = evicted.status.clone().expect("a status");
    assert_eq!(status.reason.as_deref(), Some("Evicted"));
    let message = status.message.clone().unwrap_or_default();
    assert!(message.starts_with("The node was low on resource: memory. "), "{message}");
    assert_eq!(terminated(&evicted), (137, Some("Error".into())));
    let disruption = pod_condition(&evicted, "DisruptionTarget").expect("a DisruptionTarget condition");
    assert_eq!(
        (disruption.status.as_str(), disruption.reason.as_deref(), disruption.message.as_deref()),
        ("True", Some("TerminationByKubelet"), Some(message.as_str()))
    );

    // Exits 1 and 2 restart the container in place; the third run exits 0.
    let done = wait("restarts", "Succeeded", &|p| phase(p) == "Succeeded");
    let container = container_status(&done);
    assert_eq!(container.restart_count, 2);
    let last = container.last_state.and_then(|s| s.terminated).expect("the last run's exit");
    assert_eq!((last.exit_code, last.reason.as_deref()), (2, Some("Error")));
    assert_eq!(terminated(&done), (0, Some("Completed".into())));
}

on_both_backends!(scripted_pods_fail_restart_and_are_evicted);

/// Unannotated run-to-completion pods run what their container says, as the e2e suite's Job
/// pods do: the pause image runs until deleted, `sh -c 'exit 1'` fails, the fail-once marker
/// fails the first run of a pod and restarts it in place under `OnFailure`.
#[test]
fn unannotated_pods_run_their_containers_program() {
    let cluster = start(&["node-a"], fast());
    let program = |name: &str, restart: &str, container: Value| {
        let mut pod = json!({"metadata": {"name": name}, "spec": {"restartPolicy": restart,
            "volumes": [{"name": "data", "emptyDir": {}}], "containers": [container]}});
        pod["spec"]["containers"][0]["name"] = json!("c");
        pod["spec"]["containers"][0]["volumeMounts"] = json!([{"name": "data", "mountPath": "/data"}]);
        cluster.pods().create(&from::<Pod>(pod), &PostParams::default()).expect("pod created");
    };
    program("forever", "Never", json!({"image": "registry.k8s.io/pause:3.10.1"}));
    program("fails", "Never", json!({"image": "busybox", "command": ["/bin/sh", "-c", "exit 1"]}));
    let fail_once = "if [[ -r /data/foo ]]\nthen\n  exit 0\nelse\n  touch /data/foo\n  exit 1\nfi";
    program("once", "OnFailure", json!({"image": "busybox", "command": ["/bin/sh", "-c"], "args": [fail_once]}));

    let failed = cluster.wait_pod("fails", "Failed", |p| phase(p) == "Failed");
    assert_eq!(terminated(&failed), (1, Some("Error".into())));
    let done = cluster.wait_pod("once", "Succeeded", |p| phase(p) == "Succeeded");
    assert_eq!(container_status(&done).restart_count, 1);
    // Two run times have passed since it started (the other pods ran twice meanwhile), and a
    // little more: the pause container still runs.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(phase(&cluster.pods().get("forever").expect("pod read")), "Running");
}

/// With the kubelet's crash-loop back-off, the second exit waits in `CrashLoopBackOff` (not
/// ready) before the container starts again; both servers take those statuses.
fn a_crash_loop_backs_off_before_restarting(backend: harness::Backend) {
    let options = NodeOptions { crash_loop_back_off: Some(Duration::from_millis(800)), ..fast() };
    let cluster = harness::with(&[]).on(backend).nodes(&["node-a"]).node_options(options).start();
    let pods = Api::<Pod>::namespaced(&cluster.client, "default");
    let annotations = json!({"kcm-sandbox.dev/run-seconds": "0.2", "kcm-sandbox.dev/exit-codes": "1,2,0"});
    let pod = job_pod("backoff", "6b1b2d0e-0000-4000-8000-00000000a021", "OnFailure", annotations);
    pods.create(&pod, &PostParams::default()).expect("pod created");
    let waiting = harness::eventually("pod backoff: in CrashLoopBackOff", || {
        let pod = pods.get_opt("backoff").expect("pod read")?;
        let state = container_status(&pod).state.and_then(|s| s.waiting)?;
        (state.reason.as_deref() == Some("CrashLoopBackOff")).then_some(pod)
    });
    assert_eq!(phase(&waiting), "Running");
    let container = container_status(&waiting);
    assert_eq!(container.restart_count, 1, "the first exit restarted at once");
    assert_eq!(container.last_state.and_then(|s| s.terminated).map(|t| t.exit_code), Some(2));
    assert_eq!(condition(&waiting, "Ready"), Some("False"));
    let done = harness::eventually("pod backoff: Succeeded", || {
        pods.get_opt("backoff").expect("pod read").filter(|p| phase(p) == "Succeeded")
    });
    assert_eq!(container_status(&done).restart_count, 2);
}

on_both_backends!(a_crash_loop_backs_off_before_restarting);

#[test]
fn a_restarting_pod_stays_running_with_its_restarts_counted() {
    let cluster = start(&["node-a"], fast());
    let annotations = json!({"kcm-sandbox.dev/run-seconds": "0.3", "kcm-sandbox.dev/exit-codes": "1"});
    let pod = job_pod("crashloop", "6b1b2d0e-0000-4000-8000-00000000a002", "OnFailure", annotations);
    cluster.pods().create(&pod, &PostParams::default()).expect("pod created");
    let pod = cluster.wait_pod("crashloop", "restarted twice", |p| container_status(p).restart_count >= 2);
    assert_eq!(phase(&pod), "Running");
    let container = container_status(&pod);
    let last = container.last_state.and_then(|s| s.terminated).expect("the last exit");
    assert_eq!((last.exit_code, last.reason.as_deref()), (1, Some("Error")));
    assert!(container.state.and_then(|s| s.running).is_some(), "running again");
}

#[test]
fn a_script_runs_across_a_jobs_retried_pods() {
    let cluster = start(&["node-a"], fast());
    let uid = "6b1b2d0e-0000-4000-8000-00000000a003";
    let annotations = json!({"kcm-sandbox.dev/run-seconds": "0.1", "kcm-sandbox.dev/exit-codes": "1,evicted,0"});
    // Each retry starts once the previous pod ended, as a Job controller would.
    let mut ends = Vec::new();
    for n in 0..4 {
        let name = format!("try-{n}");
        let pod = job_pod(&name, uid, "Never", annotations.clone());
        cluster.pods().create(&pod, &PostParams::default()).expect("pod created");
        let pod = cluster.wait_pod(&name, "terminated", |p| matches!(phase(p), "Succeeded" | "Failed"));
        let reason = pod.status.as_ref().and_then(|s| s.reason.clone()).unwrap_or_default();
        ends.push(format!("{}:{}{reason}", phase(&pod), terminated(&pod).0));
    }
    assert_eq!(ends, ["Failed:1", "Failed:137Evicted", "Succeeded:0", "Succeeded:0"]);
}

/// Kubelets shared out over two threads: each thread runs its own nodes' pods, every node
/// keeps its Lease, the one scheduler places pods on nodes of both, and a Job's script counts
/// the runs of its pods whichever thread's node runs them.
#[test]
fn kubelets_on_two_threads_run_the_pods_of_every_node() {
    let names = ["node-a", "node-b", "node-c", "node-d"];
    let cluster = start(&names, NodeOptions { kubelet_threads: 2, ..fast() });
    for name in names {
        let before = cluster.renew_time(name);
        wait_for(&format!("{name}'s lease to be renewed"), || (cluster.renew_time(name) != before).then_some(()));
    }
    let pods: Vec<String> = (0..8).map(|i| format!("web-{i}")).collect();
    for name in &pods {
        cluster.create_pod(name, json!({}));
    }
    let mut placed: Vec<String> = pods.iter().map(|n| node_of(&cluster.wait_running(n)).to_string()).collect();
    placed.sort();
    assert_eq!(placed, ["node-a", "node-a", "node-b", "node-b", "node-c", "node-c", "node-d", "node-d"]);

    // Node i runs on thread i % 2: the retries alternate between the threads.
    let uid = "6b1b2d0e-0000-4000-8000-00000000a009";
    let annotations = json!({"kcm-sandbox.dev/run-seconds": "0.1", "kcm-sandbox.dev/exit-codes": "1,2,0"});
    let mut ends = Vec::new();
    for (n, node) in ["node-a", "node-b", "node-c"].into_iter().enumerate() {
        let name = format!("try-{n}");
        let mut pod = job_pod(&name, uid, "Never", annotations.clone());
        pod.spec.get_or_insert_default().node_name = Some(node.to_string());
        cluster.pods().create(&pod, &PostParams::default()).expect("pod created");
        let pod = cluster.wait_pod(&name, "terminated", |p| matches!(phase(p), "Succeeded" | "Failed"));
        ends.push(format!("{}:{}", phase(&pod), terminated(&pod).0));
    }
    assert_eq!(ends, ["Failed:1", "Failed:2", "Succeeded:0"]);

    for name in &pods {
        cluster.pods().delete(name, &DeleteParams::default()).expect("delete accepted");
    }
    for name in &pods {
        wait_for(&format!("pod {name} to be gone"), || {
            cluster.pods().get_opt(name).expect("pod read").is_none().then_some(())
        });
    }
}

#[test]
fn an_index_override_scripts_only_its_index() {
    let cluster = start(&["node-a"], fast());
    let uid = "6b1b2d0e-0000-4000-8000-00000000a004";
    for index in 0..3 {
        let annotations = json!({"kcm-sandbox.dev/run-seconds": "0.1", "kcm-sandbox.dev/exit-codes": "0",
            "kcm-sandbox.dev/exit-codes-index-1": "7,0", "batch.kubernetes.io/job-completion-index": index.to_string()});
        let pod = job_pod(&format!("indexed-{index}"), uid, "Never", annotations);
        cluster.pods().create(&pod, &PostParams::default()).expect("pod created");
    }
    let codes: Vec<i32> = (0..3)
        .map(|i| {
            let name = format!("indexed-{i}");
            terminated(&cluster.wait_pod(&name, "terminated", |p| matches!(phase(p), "Succeeded" | "Failed"))).0
        })
        .collect();
    assert_eq!(codes, [0, 7, 0]);
    // Index 1's retry takes the next entry of its own script.
    let annotations = json!({"kcm-sandbox.dev/run-seconds": "0.1", "kcm-sandbox.dev/exit-codes-index-1": "7,0",
        "batch.kubernetes.io/job-completion-index": "1"});
    cluster
        .pods()
        .create(&job_pod("indexed-1-retry", uid, "Never", annotations), &PostParams::default())
        .expect("created");
    let retry = cluster.wait_pod("indexed-1-retry", "Succeeded", |p| phase(p) == "Succeeded");
    assert_eq!(terminated(&retry).0, 0);
}

#[test]
fn an_invalid_script_leaves_the_pod_unscripted() {
    let cluster = start(&["node-a"], fast());
    let annotations = json!({"kcm-sandbox.dev/exit-codes": "1,oops", "kcm-sandbox.dev/run-seconds": "0.1"});
    let pod = job_pod("typo", "6b1b2d0e-0000-4000-8000-00000000a005", "Never", annotations);
    cluster.pods().create(&pod, &PostParams::default()).expect("pod created");
    let pod = cluster.wait_pod("typo", "Succeeded", |p| phase(p) == "Succeeded");
    assert_eq!(terminated(&pod), (0, Some("Completed".into())));
}

#[test]
fn a_deleted_job_pod_is_killed_keeping_its_disruption_target() {
    let cluster = start(&["node-a"], fast());
    let annotations = json!({"kcm-sandbox.dev/run-seconds": "60"});
    let pod = job_pod("victim", "6b1b2d0e-0000-4000-8000-00000000a006", "Never", annotations);
    let created = cluster.pods().create(&pod, &PostParams::default()).expect("pod created");
    let finalizer = json!({"metadata": {"finalizers": ["example.com/hold"]}});
    cluster.pods().patch("victim", &Patch::Merge(finalizer), &PostParams::default()).expect("finalizer added");
    cluster.wait_running("victim");
    // What the job controller's pod deletion (or the disruption controller) adds first.
    let condition = json!({"status": {"conditions": [{"type": "DisruptionTarget", "status": "True",
        "reason": "PreemptionByScheduler", "message": "preempted", "lastTransitionTime": "2030-01-01T00:00:00Z"}]}});
    cluster
        .pods()
        .patch_status("victim", &Patch::Strategic(condition), &PostParams::default())
        .expect("condition added");
    cluster.pods().delete("victim", &DeleteParams::default()).expect("delete accepted");
    let pod = cluster.wait_pod("victim", "Failed", |p| phase(p) == "Failed");
    assert_eq!(terminated(&pod), (137, Some("Error".into())));
    let disruption = pod_condition(&pod, "DisruptionTarget").expect("kept");
    assert_eq!(disruption.reason.as_deref(), Some("PreemptionByScheduler"));
    assert_eq!(pod.metadata.uid, created.metadata.uid);
    let release = json!({"metadata": {"finalizers": null}});
    cluster.pods().patch("victim", &Patch::Merge(release), &PostParams::default()).expect("finalizer removed");
    wait_for("the pod to be gone", || cluster.pods().get_opt("victim").expect("pod read").is_none().then_some(()));
}

#[test]
fn nodes_are_added_and_removed_at_run_time() {
    let cluster = start(&["node-1"], fast());
    cluster.nodes().add_node("node-2").expect("node-2 added");
    assert!(cluster.nodes().add_node("node-2").is_err(), "names stay unique");
    assert_eq!(cluster.nodes().names(), ["node-1", "node-2"]);
    let node = wait_for("node-2 Ready", || {
        cluster.node_api().get_opt("node-2").expect("read").filter(|n| node_ready(n) == Some("True"))
    });
    let addresses = node.status.and_then(|s| s.addresses).unwrap_or_default();
    assert!(addresses.iter().any(|a| a.address == "10.0.0.11"), "the next machine's address: {addresses:?}");
    wait_for("node-2's Lease", || cluster.leases().get_opt("node-2").expect("read"));
    // A pod pinned to the new node runs there.
    cluster.untaint("node-2");
    cluster.create_pod("pinned", json!({"nodeSelector": {"kubernetes.io/hostname": "node-2"}}));
    assert_eq!(node_of(&cluster.wait_running("pinned")), "node-2");

    cluster.nodes().remove_node("node-1").expect("node-1 removed");
    assert!(cluster.nodes().remove_node("node-1").is_err());
    assert_eq!(cluster.nodes().names(), ["node-2"]);
    assert!(cluster.node_api().get_opt("node-1").expect("read").is_none());
    assert!(cluster.leases().get_opt("node-1").expect("read").is_none());
}

/// The simulated provisioner: a claim naming no class gets the default StorageClass (which the
/// nodes create on a real server too), the binder hands it to the provisioner, which makes a
/// volume for it, and the binder binds them; a pod naming the claim is scheduled only then; a
/// claim of a class that is not ours stays Pending.
fn claims_of_the_default_class_are_provisioned_and_bound(backend: harness::Backend) {
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    use k8s_openapi::api::storage::v1::StorageClass;
    let storage = [
        kcm::app::controllers::named("persistentvolume-binder-controller"),
        kcm::app::controllers::named("persistentvolume-attach-detach-controller"),
    ];
    let cluster = harness::with(&storage).on(backend).nodes(&["node-a"]).node_options(fast()).start();
    let class = Api::<StorageClass>::cluster(&cluster.client).get("standard").expect("the default class");
    assert_eq!(class.provisioner, "csi.kcm-sandbox.dev");
    let annotations = class.metadata.annotations.unwrap_or_default();
    assert_eq!(annotations.get("storageclass.kubernetes.io/is-default-class").map(String::as_str), Some("true"));

    let pods = Api::<Pod>::namespaced(&cluster.client, "default");
    let volume = json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]);
    let pod: Pod = from(json!({"metadata": {"name": "user"}, "spec": {"volumes": volume,
        "containers": [{"name": "app", "image": "nginx:1.27"}]}}));
    pods.create(&pod, &PostParams::default()).expect("pod created");
    let claims = Api::<PersistentVolumeClaim>::namespaced(&cluster.client, "default");
    let claim = |name: &str, class: Option<&str>| -> PersistentVolumeClaim {
        let mut spec = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Mi"}}});
        if let Some(class) = class {
            spec["storageClassName"] = json!(class);
        }
        from(json!({"metadata": {"name": name}, "spec": spec}))
    };
    claims.create(&claim("other", Some("elsewhere")), &PostParams::default()).expect("claim created");
    // Not scheduled while its claim does not exist.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(node_of(&pods.get("user").expect("pod read")), "");
    claims.create(&claim("data", None), &PostParams::default()).expect("claim created");

    let bound = harness::eventually("claim data bound", || {
        claims.get("data").ok().filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
    });
    let uid = bound.metadata.uid.clone().expect("a uid");
    let spec = bound.spec.clone().expect("a spec");
    assert_eq!(spec.storage_class_name.as_deref(), Some("standard"));
    assert_eq!(spec.volume_name, Some(format!("pvc-{uid}")));
    let status = bound.status.clone().expect("a status");
    assert_eq!(status.capacity.unwrap_or_default().get("storage").map(|q| q.0.as_str()), Some("2Mi"));
    assert_eq!(status.access_modes, Some(vec!["ReadWriteOnce".to_string()]));
    let annotations = bound.metadata.annotations.unwrap_or_default();
    for (key, value) in [
        ("pv.kubernetes.io/bind-completed", "yes"),
        ("pv.kubernetes.io/bound-by-controller", "yes"),
        ("volume.beta.kubernetes.io/storage-provisioner", "csi.kcm-sandbox.dev"),
        ("volume.kubernetes.io/storage-provisioner", "csi.kcm-sandbox.dev"),
    ] {
        assert_eq!(annotations.get(key).map(String::as_str), Some(value), "{key}");
    }
    let volume = Api::<PersistentVolume>::cluster(&cluster.client).get(&format!("pvc-{uid}")).expect("its volume");
    assert_eq!(volume.status.and_then(|s| s.phase).as_deref(), Some("Bound"));
    let spec = volume.spec.expect("a spec");
    assert_eq!(spec.claim_ref.and_then(|r| r.uid).as_deref(), Some(uid.as_str()));
    assert_eq!(spec.capacity.unwrap_or_default().get("storage").map(|q| q.0.as_str()), Some("2Mi"));
    assert_eq!(spec.storage_class_name.as_deref(), Some("standard"));

    harness::eventually("pod user running", || {
        pods.get("user").ok().filter(|p| phase(p) == "Running" && condition(p, "Ready") == Some("True"))
    });
    let other = claims.get("other").expect("claim read");
    assert_eq!(other.status.and_then(|s| s.phase).as_deref(), Some("Pending"), "not our class");
}

on_both_backends!(claims_of_the_default_class_are_provisioned_and_bound);

/// The simulated CSI driver without the attach/detach controller: its CSIDriver and a CSINode
/// per node; a pod using a CSI volume is reported in use by its node but waits until the node
/// lists the volume attached; the external attacher attaches a VolumeAttachment (finalizer,
/// `status.attached`) and releases it when deleted.
fn the_simulated_csi_driver_attaches_and_the_kubelet_waits(backend: harness::Backend) {
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, VolumeAttachment};
    use kcm_sandbox::sandbox::nodes::csi::{ATTACHER_FINALIZER, DRIVER};
    let cluster = harness::with(&[]).on(backend).nodes(&["node-a"]).node_options(fast()).start();
    let driver = Api::<CSIDriver>::cluster(&cluster.client).get(DRIVER).expect("the CSIDriver");
    assert_eq!(driver.spec.attach_required, Some(true));
    let node_uid = Api::<Node>::cluster(&cluster.client).get("node-a").expect("node").metadata.uid;
    let csi_node = harness::eventually("the CSINode", || {
        Api::<CSINode>::cluster(&cluster.client).get_opt("node-a").ok().flatten()
    });
    assert_eq!(csi_node.metadata.owner_references.expect("owned")[0].uid, node_uid.expect("a uid"));
    assert_eq!((csi_node.spec.drivers[0].name.as_str(), csi_node.spec.drivers[0].node_id.as_str()), (DRIVER, "node-a"));

    let claims = Api::<PersistentVolumeClaim>::namespaced(&cluster.client, "default");
    let claim: PersistentVolumeClaim =
        from(json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "storageClassName": "", "volumeName": "pv-csi", "resources": {"requests": {"storage": "1Gi"}}}}));
    let claim = claims.create(&claim, &PostParams::default()).expect("claim created");
    let volume: PersistentVolume =
        from(json!({"metadata": {"name": "pv-csi"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "capacity": {"storage": "1Gi"}, "storageClassName": "", "csi": {"driver": DRIVER, "volumeHandle": "h1"},
        "claimRef": {"namespace": "default", "name": "data", "uid": claim.metadata.uid}}}));
    Api::<PersistentVolume>::cluster(&cluster.client).create(&volume, &PostParams::default()).expect("volume created");
    claims
        .patch_status("data", &Patch::Merge(json!({"status": {"phase": "Bound"}})), &PostParams::default())
        .expect("bound");
    let pods = Api::<Pod>::namespaced(&cluster.client, "default");
    let pod: Pod = from(json!({"metadata": {"name": "user"}, "spec": {"nodeName": "node-a",
        "containers": [{"name": "app", "image": "nginx:1.27"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}));
    pods.create(&pod, &PostParams::default()).expect("pod created");
    let unique = format!("kubernetes.io/csi/{DRIVER}^h1");
    let nodes = Api::<Node>::cluster(&cluster.client);
    let in_use = || nodes.get("node-a").ok()?.status?.volumes_in_use;
    harness::eventually("the volume in use", || (in_use() == Some(vec![unique.clone()])).then_some(()));
    let phase = || pods.get("user").ok().and_then(|p| p.status?.phase);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(phase().as_deref(), Some("Pending"), "waits for the volume to be attached");

    let attachments = Api::<VolumeAttachment>::cluster(&cluster.client);
    let attachment: VolumeAttachment = from(json!({"metadata": {"name": "csi-test"},
        "spec": {"attacher": DRIVER, "nodeName": "node-a", "source": {"persistentVolumeName": "pv-csi"}}}));
    attachments.create(&attachment, &PostParams::default()).expect("attachment created");
    let attached = harness::eventually("attached", || {
        attachments.get("csi-test").ok().filter(|a| a.status.as_ref().is_some_and(|s| s.attached))
    });
    assert_eq!(attached.metadata.finalizers, Some(vec![ATTACHER_FINALIZER.to_string()]));
    let listed = json!({"status": {"volumesAttached": [{"name": unique, "devicePath": ""}]}});
    nodes.patch_status("node-a", &Patch::Strategic(listed), &PostParams::default()).expect("node status");
    harness::eventually("the pod running", || (phase().as_deref() == Some("Running")).then_some(()));

    attachments.delete("csi-test", &DeleteParams::default()).expect("attachment deleted");
    harness::eventually("the attachment released", || {
        attachments.get_opt("csi-test").ok().flatten().is_none().then_some(())
    });
    pods.delete("user", &DeleteParams::default()).expect("pod deleted");
    harness::eventually("the volume no longer in use", || in_use().is_none().then_some(()));
}

on_both_backends!(the_simulated_csi_driver_attaches_and_the_kubelet_waits);

/// The sandbox has the simulated driver's CSIDriver from start-up, as its default StorageClass,
/// with kube-apiserver's defaults.
#[test]
fn the_sandbox_starts_with_the_csi_driver() {
    use k8s_openapi::api::storage::v1::CSIDriver;
    let cluster = harness::with(&[]).without_nodes().start();
    let driver = Api::<CSIDriver>::cluster(&cluster.client)
        .get(kcm_sandbox::sandbox::nodes::csi::DRIVER)
        .expect("the CSIDriver");
    assert_eq!(driver.spec.attach_required, Some(true));
    assert_eq!(driver.spec.pod_info_on_mount, Some(false));
    assert_eq!(driver.spec.volume_lifecycle_modes, Some(vec!["Persistent".to_string()]));
    assert_eq!(driver.spec.fs_group_policy.as_deref(), Some("ReadWriteOnceWithFSType"));
}
