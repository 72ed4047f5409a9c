//! The scheduler's part: which nodes a pending pod fits, with kube-scheduler's filter plugins
//! in their default order (NodeUnschedulable, TaintToleration, NodeAffinity, NodePorts,
//! NodeResourcesFit), the fewest-pods node among them, and kube-scheduler's `FitError`
//! message when none fits.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec, Taint, Toleration};

use crate::apimachinery::nodeaffinity::matches_required_node_affinity;
use crate::controllers::nodeutil::tolerates;
use crate::quota::resources::{add_into, aggregate_containers, from_api};

const NOT_READY: &str = "node.kubernetes.io/not-ready";

/// What the scheduler knows of one node besides its object, worked out once per pass.
pub struct Candidate<'a> {
    pub node: &'a Node,
    /// A simulated kubelet runs it and is alive.
    pub alive: bool,
    /// The non-terminal pods bound (or being bound) to it.
    pub load: Load,
    /// `status.allocatable`'s pods, cpu and memory, in base units.
    allocatable: Allocatable,
}

impl<'a> Candidate<'a> {
    /// `node`, carrying `load`.
    pub fn new(node: &'a Node, alive: bool, load: Load) -> Candidate<'a> {
        let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
        let capacity_of = |name: &str| allocatable.and_then(|a| a.get(name)).and_then(|q| parse_quantity(&q.0));
        let allocatable =
            Allocatable { pods: capacity_of("pods"), cpu: capacity_of("cpu"), memory: capacity_of("memory") };
        Candidate { node, alive, load, allocatable }
    }
}

/// A node's allocatable resources, as NodeResourcesFit reads them.
struct Allocatable {
    pods: Option<f64>,
    cpu: Option<f64>,
    memory: Option<f64>,
}

/// What the pods of a node take, summed as the filters read them: each pod is counted once
/// when it is added, so that placing a pod costs the nodes, not the nodes times their pods (a
/// scale test places tens of thousands of pods on a thousand nodes).
#[derive(Debug, Clone, Default)]
pub struct Load {
    pods: usize,
    cpu: f64,
    memory: f64,
    host_ports: Vec<HostPort>,
}

impl Load {
    /// Counts `pod` on the node.
    pub fn add(&mut self, pod: &Pod) {
        self.pods += 1;
        let Some(spec) = pod.spec.as_ref() else { return };
        let requests = pod_requests(spec);
        self.cpu += requests.get("cpu").copied().unwrap_or(0.0);
        self.memory += requests.get("memory").copied().unwrap_or(0.0);
        self.host_ports.extend(host_ports(spec));
    }
}

/// What placing one pod asks of a node, worked out once for all the nodes: its spec, and
/// the load it adds.
struct Wanted<'a> {
    spec: &'a PodSpec,
    load: Load,
}

/// Where a pod goes, or why it goes nowhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    Node(String),
    /// kube-scheduler's message for the PodScheduled=False condition.
    Unschedulable(String),
}

/// [`choose`], answering with the node's name (the tests' reading).
#[cfg(test)]
fn place(pod: &Pod, candidates: &[Candidate<'_>], strict_not_ready: bool) -> Placement {
    match choose(pod, candidates, strict_not_ready) {
        Ok(i) => Placement::Node(candidates[i].node.metadata.name.clone().unwrap_or_default()),
        Err(FitError(message)) => Placement::Unschedulable(message),
    }
}

/// Picks the node for `pod` among `candidates` (all nodes of the cluster): the index of the
/// candidate with the fewest pods among those it fits, or kube-scheduler's `FitError`.
/// Unless `strict_not_ready`, the `node.kubernetes.io/not-ready:NoSchedule` taint is ignored on
/// a node that is Ready with a live kubelet (the taint TaintNodesByCondition puts on new nodes,
/// which only the node lifecycle controller removes).
pub fn choose(pod: &Pod, candidates: &[Candidate<'_>], strict_not_ready: bool) -> Result<usize, FitError> {
    let no_spec = PodSpec::default();
    let mut load = Load::default();
    load.add(pod);
    let wanted = Wanted { spec: pod.spec.as_ref().unwrap_or(&no_spec), load };
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut resource_failures = 0;
    let mut best: Option<(usize, usize)> = None;
    for (i, candidate) in candidates.iter().enumerate() {
        match filter(&wanted, candidate, strict_not_ready) {
            Ok(()) => {
                let load = candidate.load.pods;
                if best.is_none_or(|(_, fewest)| load < fewest) {
                    best = Some((i, load));
                }
            }
            Err(Failure { reasons: node_reasons, resources }) => {
                resource_failures += usize::from(resources);
                for reason in node_reasons {
                    *reasons.entry(reason).or_default() += 1;
                }
            }
        }
    }
    match best {
        Some((i, _)) => Ok(i),
        None => Err(FitError(fit_message(candidates.len(), &reasons, resource_failures))),
    }
}

/// Why one node was filtered out: the failing plugin's reasons (kube-scheduler stops at the
/// first plugin that fails), and whether that plugin was NodeResourcesFit.
struct Failure {
    reasons: Vec<String>,
    resources: bool,
}

impl Failure {
    fn one(reason: impl Into<String>) -> Failure {
        Failure { reasons: vec![reason.into()], resources: false }
    }
}

fn filter(wanted: &Wanted<'_>, candidate: &Candidate<'_>, strict_not_ready: bool) -> Result<(), Failure> {
    let spec = wanted.spec;
    let node = candidate.node;
    let node_spec = node.spec.as_ref();
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    // NodeUnschedulable.
    if node_spec.and_then(|s| s.unschedulable) == Some(true)
        && !tolerated(tolerations, &taint("node.kubernetes.io/unschedulable", "NoSchedule"))
    {
        return Err(Failure::one("node(s) were unschedulable"));
    }
    // TaintToleration, over the node's taints and the ones the node lifecycle controller adds
    // to a node that is not Ready (or whose kubelet is gone) — it may not have got to it yet.
    let implicit = implicit_taint(candidate);
    let ignored = |t: &Taint| !strict_not_ready && implicit.is_none() && t.key == NOT_READY && t.effect == "NoSchedule";
    let taints = node_spec.and_then(|s| s.taints.as_deref()).unwrap_or_default();
    let untolerated = taints
        .iter()
        .filter(|t| !ignored(t))
        .chain(implicit.as_ref())
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|t| !tolerated(tolerations, t));
    if let Some(t) = untolerated {
        return Err(Failure::one(format!(
            "node(s) had untolerated taint {{{}: {}}}",
            t.key,
            t.value.as_deref().unwrap_or_default()
        )));
    }
    // NodeAffinity.
    if !matches_required_node_affinity(spec, node) {
        return Err(Failure::one("node(s) didn't match Pod's node affinity/selector"));
    }
    // NodePorts.
    if wanted.load.host_ports.iter().any(|w| candidate.load.host_ports.iter().any(|u| ports_conflict(w, u))) {
        return Err(Failure::one(NODE_PORTS_REASON));
    }
    // NodeResourcesFit.
    let reasons = insufficient_resources(wanted, candidate);
    if !reasons.is_empty() {
        return Err(Failure { reasons, resources: true });
    }
    Ok(())
}

fn taint(key: &str, effect: &str) -> Taint {
    Taint { key: key.into(), effect: effect.into(), ..Taint::default() }
}

/// The taint the node lifecycle controller puts on a node that is not Ready: `not-ready` when
/// Ready is False, `unreachable` when it is Unknown or its kubelet stopped.
fn implicit_taint(candidate: &Candidate<'_>) -> Option<Taint> {
    let ready = candidate
        .node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.as_str());
    let key = match ready {
        Some("True") if candidate.alive => return None,
        Some("False") => NOT_READY,
        _ => "node.kubernetes.io/unreachable",
    };
    Some(taint(key, "NoSchedule"))
}

/// Whether any toleration tolerates the taint (`Toleration.ToleratesTaint`).
pub fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| tolerates(t, taint))
}

/// NodePorts' reason, which the kubelet's admission repeats.
pub const NODE_PORTS_REASON: &str = "node(s) didn't have free ports for the requested pod ports";

/// Whether a host port `spec` asks for is taken by one of `others` (NodePorts' filter, which
/// the kubelet's admission runs again).
pub fn host_ports_taken<'a>(spec: &PodSpec, others: impl Iterator<Item = &'a PodSpec>) -> bool {
    let wanted = host_ports(spec);
    if wanted.is_empty() {
        return false;
    }
    let used: BTreeSet<_> = others.flat_map(host_ports).collect();
    wanted.iter().any(|w| used.iter().any(|u| ports_conflict(w, u)))
}

/// A host port a container claims: (protocol, hostIP, hostPort).
type HostPort = (String, String, i32);

/// Every container port of `spec` that claims a host port.
fn host_ports(spec: &PodSpec) -> Vec<HostPort> {
    let containers = spec.init_containers.iter().flatten().chain(spec.containers.iter());
    containers
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|p| *p > 0)?;
            let ip = p.host_ip.clone().filter(|ip| !ip.is_empty()).unwrap_or_else(|| "0.0.0.0".into());
            Some((p.protocol.clone().unwrap_or_else(|| "TCP".into()), ip, port))
        })
        .collect()
}

fn ports_conflict(a: &HostPort, b: &HostPort) -> bool {
    a.0 == b.0 && a.2 == b.2 && (a.1 == b.1 || a.1 == "0.0.0.0" || b.1 == "0.0.0.0")
}

/// NodeResourcesFit's reasons: too many pods, or not enough allocatable cpu or memory left.
fn insufficient_resources(wanted: &Wanted<'_>, candidate: &Candidate<'_>) -> Vec<String> {
    let (allocatable, load) = (&candidate.allocatable, &candidate.load);
    let mut reasons = Vec::new();
    if let Some(pods) = allocatable.pods
        && load.pods as f64 + 1.0 > pods
    {
        reasons.push("Too many pods".to_string());
    }
    let resources = [
        ("cpu", wanted.load.cpu, load.cpu, allocatable.cpu),
        ("memory", wanted.load.memory, load.memory, allocatable.memory),
    ];
    for (resource, want, used, capacity) in resources {
        if want > 0.0 && capacity.is_some_and(|capacity| used + want > capacity + 1e-9) {
            reasons.push(format!("Insufficient {resource}"));
        }
    }
    reasons
}

/// A pod's effective requests as kube-scheduler's NodeResourcesFit takes them
/// (`resourcehelper.PodRequests`): the containers' aggregate, with restartable init containers
/// adding up and each other init container counted with the sidecars started before it, plus
/// the pod overhead; in base units.
pub fn pod_requests(spec: &PodSpec) -> BTreeMap<String, f64> {
    let requests = |c: &Container| {
        let resources = c.resources.as_ref();
        // Without a request, a limit is the request (the API server's defaulting).
        let mut own = from_api(resources.and_then(|r| r.limits.as_ref()));
        own.extend(from_api(resources.and_then(|r| r.requests.as_ref())));
        own
    };
    let app = spec.containers.iter().map(requests);
    let init =
        spec.init_containers.iter().flatten().map(|c| (c.restart_policy.as_deref() == Some("Always"), requests(c)));
    let mut sum = aggregate_containers(app, init);
    add_into(&mut sum, &from_api(spec.overhead.as_ref()));
    sum.into_iter().map(|(name, q)| (name, q.nano_value() as f64 / 1e9)).collect()
}

/// A resource quantity (`500m`, `2`, `1.5Gi`, `1e3`, `16674816Ki`) as a number of base units.
pub fn parse_quantity(text: &str) -> Option<f64> {
    let quantity = crate::quantity::Quantity::parse(text.trim()).ok()?;
    Some(quantity.nano_value() as f64 / 1e9)
}

/// kube-scheduler's `FitError` text: `0/3 nodes are available: 1 Insufficient cpu, 2 node(s)
/// had untolerated taint {k: v}. preemption: 0/3 nodes are available: …`.
/// kube-scheduler's `FitError`: no node fits the pod; its message is the condition's and the
/// `FailedScheduling` Event's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FitError(pub String);

/// `FitError.Error()`: how many nodes failed for each reason, and preemption's verdict.
fn fit_message(nodes: usize, reasons: &BTreeMap<String, usize>, resource_failures: usize) -> String {
    if nodes == 0 {
        return "no nodes available to schedule pods".to_string();
    }
    let mut histogram: Vec<String> = reasons.iter().map(|(reason, count)| format!("{count} {reason}")).collect();
    histogram.sort();
    let mut message = format!("0/{nodes} nodes are available:");
    if !histogram.is_empty() {
        message.push(' ');
        message.push_str(&histogram.join(", "));
    }
    message.push('.');
    // DefaultPreemption's verdict: only nodes that failed on resources could be helped by
    // evicting lower-priority pods (and there are none to evict here).
    let mut preemption = Vec::new();
    if resource_failures > 0 {
        preemption.push(format!("{resource_failures} No preemption victims found for incoming pod"));
    }
    if nodes > resource_failures {
        preemption.push(format!("{} Preemption is not helpful for scheduling", nodes - resource_failures));
    }
    preemption.sort();
    format!("{message} preemption: 0/{nodes} nodes are available: {}.", preemption.join(", "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(name: &str, labels: serde_json::Value, taints: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints},
            "status": {"allocatable": {"cpu": "4", "memory": "16674816Ki", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}]},
        }))
        .expect("a Node")
    }

    fn pod(spec: serde_json::Value) -> Pod {
        let mut spec = spec;
        if spec.get("containers").is_none() {
            spec["containers"] = json!([{"name": "c", "image": "nginx"}]);
        }
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "default"}, "spec": spec})).expect("a Pod")
    }

    fn candidates(nodes: &[Node]) -> Vec<Candidate<'_>> {
        nodes.iter().map(|node| Candidate::new(node, true, Load::default())).collect()
    }

    #[test]
    fn tolerations_match_as_upstream() {
        let t = |v: serde_json::Value| serde_json::from_value::<Toleration>(v).expect("toleration");
        let taint = Taint { key: "k".into(), value: Some("v".into()), effect: "NoSchedule".into(), ..Taint::default() };
        assert!(tolerates(&t(json!({"key": "k", "value": "v"})), &taint));
        assert!(tolerates(&t(json!({"key": "k", "operator": "Exists"})), &taint));
        assert!(tolerates(&t(json!({"operator": "Exists"})), &taint));
        assert!(tolerates(&t(json!({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"})), &taint));
        assert!(!tolerates(&t(json!({"key": "k", "value": "w"})), &taint));
        assert!(!tolerates(&t(json!({"key": "k", "operator": "Exists", "effect": "NoExecute"})), &taint));
        assert!(!tolerates(&t(json!({"key": "other", "operator": "Exists"})), &taint));
    }

    #[test]
    fn node_affinity_and_selector() {
        let nodes =
            [node("a", json!({"zone": "1", "gen": "3"}), json!([])), node("b", json!({"zone": "2"}), json!([]))];
        let by_zone = pod(json!({"nodeSelector": {"zone": "2"}}));
        assert_eq!(place(&by_zone, &candidates(&nodes), true), Placement::Node("b".into()));
        let affinity = |terms: serde_json::Value| {
            pod(
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}),
            )
        };
        let gt = affinity(json!([{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["2"]}]}]));
        assert_eq!(place(&gt, &candidates(&nodes), true), Placement::Node("a".into()));
        let missing = affinity(json!([{"matchExpressions": [{"key": "gen", "operator": "DoesNotExist"}]}]));
        assert_eq!(place(&missing, &candidates(&nodes), true), Placement::Node("b".into()));
        let not_in = affinity(json!([{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["1"]}]}]));
        assert_eq!(place(&not_in, &candidates(&nodes), true), Placement::Node("b".into()));
        let by_name = affinity(json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}]));
        assert_eq!(place(&by_name, &candidates(&nodes), true), Placement::Node("a".into()));
        let either = affinity(json!([{}, {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["2"]}]}]));
        assert_eq!(place(&either, &candidates(&nodes), true), Placement::Node("b".into()));
        let nothing = pod(json!({"nodeSelector": {"zone": "3"}}));
        assert_eq!(
            place(&nothing, &candidates(&nodes), true),
            Placement::Unschedulable(
                "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.".into()
            )
        );
    }

    #[test]
    fn taints_and_unschedulable_nodes_are_avoided() {
        let mut cordoned = node("c", json!({}), json!([]));
        cordoned.spec.get_or_insert_default().unschedulable = Some(true);
        let nodes =
            [node("t", json!({}), json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])), cordoned];
        let plain = pod(json!({}));
        assert_eq!(
            place(&plain, &candidates(&nodes), true),
            Placement::Unschedulable(
                "0/2 nodes are available: 1 node(s) had untolerated taint {dedicated: db}, 1 node(s) were unschedulable. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.".into()
            )
        );
        let tolerant = pod(json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db"}]}));
        assert_eq!(place(&tolerant, &candidates(&nodes), true), Placement::Node("t".into()));
        let mut gone = candidates(&nodes[..1]);
        gone[0].alive = false;
        let Placement::Unschedulable(message) = place(&tolerant, &gone, true) else { panic!("placed on a dead node") };
        assert!(message.contains("untolerated taint {node.kubernetes.io/unreachable: }"), "{message}");
    }

    #[test]
    fn the_not_ready_taint_of_a_ready_node_is_ignored_unless_strict() {
        let nodes = [node("n", json!({}), json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]))];
        assert_eq!(place(&pod(json!({})), &candidates(&nodes), false), Placement::Node("n".into()));
        let Placement::Unschedulable(message) = place(&pod(json!({})), &candidates(&nodes), true) else {
            panic!("placed despite the taint")
        };
        assert!(message.contains("1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }"), "{message}");
    }

    #[test]
    fn resources_and_spreading() {
        let nodes = [node("a", json!({}), json!([])), node("b", json!({}), json!([]))];
        let big = pod(json!({"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "3"}}}]}));
        let mut with_load = candidates(&nodes);
        with_load[0].load.add(&big);
        // b has fewer pods.
        assert_eq!(place(&pod(json!({})), &with_load, true), Placement::Node("b".into()));
        with_load[1].load.add(&big);
        let Placement::Unschedulable(message) = place(&big, &with_load, true) else { panic!("overcommitted") };
        assert_eq!(
            message,
            "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
        );
        let requests = pod_requests(&big.spec.clone().unwrap_or_default());
        assert_eq!(requests.get("cpu"), Some(&3.0));
    }

    #[test]
    fn a_plain_init_container_runs_beside_the_sidecars_started_before_it() {
        let resources = |cpu: &str, memory: &str| json!({"requests": {"cpu": cpu, "memory": memory}});
        let p = pod(json!({
            "containers": [{"name": "app", "image": "x", "resources": resources("500m", "100Mi")}],
            "initContainers": [
                {"name": "sidecar", "image": "x", "restartPolicy": "Always", "resources": resources("200m", "50Mi")},
                {"name": "init", "image": "x", "resources": resources("1", "10Mi")},
            ],
            "overhead": {"cpu": "100m"},
        }));
        let requests = pod_requests(&p.spec.clone().unwrap_or_default());
        // cpu: max(500m + 200m, 1 + 200m) + 100m overhead; memory: max(100Mi + 50Mi, 10Mi + 50Mi).
        assert_eq!(requests.get("cpu"), Some(&1.3));
        assert_eq!(requests.get("memory"), Some(&(150.0 * 1024.0 * 1024.0)));
    }

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("500m"), Some(0.5));
        assert_eq!(parse_quantity("2"), Some(2.0));
        assert_eq!(parse_quantity("1Ki"), Some(1024.0));
        assert_eq!(parse_quantity("1.5Gi"), Some(1.5 * 1024f64.powi(3)));
        assert_eq!(parse_quantity("1e3"), Some(1000.0));
        assert_eq!(parse_quantity("12Q"), None);
    }
}
