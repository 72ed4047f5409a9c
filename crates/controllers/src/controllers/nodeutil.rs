//! Node helpers several controllers share, after upstream's `pkg/controller/util/node`
//! (`controller_utils.go`: `RecordNodeStatusChange`, `MarkPodsNotReady`, ...), `pkg/util/node`
//! (`IsNodeReady`), the taint helpers of `pkg/controller/controller_utils.go`
//! (`AddOrUpdateTaintOnNode`, `RemoveTaintOffNode`, `PatchNodeTaints`), `pkg/util/taints`,
//! `k8s.io/api/core/v1` `Toleration.ToleratesTaint`, `pkg/apis/core/v1/helper`
//! `GetMatchingTolerations` and `k8s.io/component-helpers/node/topology` `GetZoneKey`.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    Node, NodeCondition, NodeStatus, ObjectReference, Pod, PodCondition, PodStatus, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use crate::apimachinery::errors::Aggregate;
use crate::apimachinery::pod::update_pod_condition;
use crate::client::{Api, Client, Error, Patch, PostParams};
use crate::runtime::events::{EventRecorder, EventType};
use crate::runtime::informer::Informer;

/// `v1.TaintNodeOutOfService`.
pub const TAINT_NODE_OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";

/// `v1.TaintNodeNotReady`: the node's Ready condition is False.
pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// `v1.TaintNodeUnreachable`: the node's Ready condition is Unknown.
pub const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// `v1.TaintNodeUnschedulable`: the node is cordoned (`spec.unschedulable`).
pub const TAINT_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
/// `v1.TaintNodeMemoryPressure`.
pub const TAINT_MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
/// `v1.TaintNodeDiskPressure`.
pub const TAINT_DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
/// `v1.TaintNodePIDPressure`.
pub const TAINT_PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
/// `v1.TaintNodeNetworkUnavailable`.
pub const TAINT_NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";
/// `v1.TaintEffectNoExecute`.
pub const NO_EXECUTE: &str = "NoExecute";
/// `v1.TaintEffectNoSchedule`.
pub const NO_SCHEDULE: &str = "NoSchedule";

/// `UpdateTaintBackoff`: 5 tries, 100 ms apart plus up to 100% jitter, on conflicts.
const TAINT_UPDATE_TRIES: usize = 5;
const TAINT_UPDATE_BACKOFF: Duration = Duration::from_millis(100);

/// A taint with a key and an effect only (upstream's taint templates).
pub fn taint(key: &str, effect: &str) -> Taint {
    Taint { key: key.to_string(), effect: effect.to_string(), ..Taint::default() }
}

/// `Taint.MatchTaint`: same key and effect (value and time do not matter).
pub fn taint_matches(a: &Taint, b: &Taint) -> bool {
    a.key == b.key && a.effect == b.effect
}

/// `taintutils.TaintExists`.
pub fn taint_exists(taints: &[Taint], wanted: &Taint) -> bool {
    taints.iter().any(|t| taint_matches(t, wanted))
}

/// The node's taints (none when unset).
pub fn node_taints(node: &Node) -> &[Taint] {
    node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default()
}

/// `Toleration.ToleratesTaint` with `TaintTolerationComparisonOperators` off (alpha in v1.36):
/// `Lt` and `Gt` match nothing.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let Toleration { effect, key, operator, value, .. } = toleration;
    tolerates_fields([effect, key, operator, value], (&taint.effect, &taint.key, &taint.value))
}

/// The match of `ToleratesTaint` over the fields it reads, the toleration's effect, key,
/// operator and value and the taint's effect, key and value (unset is empty): an empty effect
/// or key matches any; `Exists` matches any value, `Equal` (or no operator) only the same
/// value; another operator matches nothing. DRA's `resourceclaim.ToleratesTaint` is upstream's
/// copy of the core one for devices, so [`tolerates`] and the DRA one share it.
pub(crate) fn tolerates_fields(toleration: [&Option<String>; 4], taint: (&str, &str, &Option<String>)) -> bool {
    let [effect, key, operator, value] = toleration.map(|field| field.as_deref().unwrap_or_default());
    let (taint_effect, taint_key, taint_value) = taint;
    if !effect.is_empty() && effect != taint_effect {
        return false;
    }
    if !key.is_empty() && key != taint_key {
        return false;
    }
    match operator {
        "" | "Equal" => value == taint_value.as_deref().unwrap_or_default(),
        "Exists" => true,
        _ => false,
    }
}

/// `GetMatchingTolerations`: whether every taint is tolerated and, if so, the first toleration
/// that tolerates each of them.
pub fn matching_tolerations<'a>(taints: &[Taint], tolerations: &'a [Toleration]) -> (bool, Vec<&'a Toleration>) {
    let mut used = Vec::new();
    for taint in taints {
        match tolerations.iter().find(|t| tolerates(t, taint)) {
            Some(toleration) => used.push(toleration),
            None => return (false, Vec::new()),
        }
    }
    (true, used)
}

/// `GetNodeCondition`.
pub fn node_condition<'a>(status: Option<&'a NodeStatus>, kind: &str) -> Option<&'a NodeCondition> {
    status?.conditions.as_ref()?.iter().find(|c| c.type_ == kind)
}

/// `GetZoneKey`: `region:\0:zone` from the topology labels (or their deprecated beta forms),
/// empty when the node has neither.
pub fn zone_key(node: &Node) -> String {
    let Some(labels) = node.metadata.labels.as_ref() else { return String::new() };
    let zone = labels
        .get("topology.kubernetes.io/zone")
        .or_else(|| labels.get("failure-domain.beta.kubernetes.io/zone"))
        .map(String::as_str)
        .unwrap_or_default();
    let region = labels
        .get("topology.kubernetes.io/region")
        .or_else(|| labels.get("failure-domain.beta.kubernetes.io/region"))
        .map(String::as_str)
        .unwrap_or_default();
    if region.is_empty() && zone.is_empty() {
        return String::new();
    }
    format!("{region}:\0:{zone}")
}

fn name_of(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

/// `RecordNodeEvent`: an event about the node, message `Node <name> event: <event>`.
pub fn record_node_event(recorder: &EventRecorder, node: &Node, event_type: EventType, reason: &str, event: &str) {
    let name = name_of(node);
    log::debug!("recording event message for node {name}: {event}");
    recorder.event(&node_reference(node), event_type, reason, &format!("Node {name} event: {event}"));
}

/// `RecordNodeStatusChange`: an Event with reason `new_status` and the message
/// `Node <name> status is now: <new_status>`.
pub fn record_node_status_change(recorder: &EventRecorder, node: &Node, event_type: EventType, new_status: &str) {
    let name = name_of(node);
    log::debug!("recording status change event message for node {name}: {new_status}");
    let message = format!("Node {name} status is now: {new_status}");
    recorder.event(&node_reference(node), event_type, new_status, &message);
}

/// The reference upstream's node events use: `v1` `Node` with name and UID, no namespace
/// (the Event then lands in `default`).
pub fn node_reference(node: &Node) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: node.metadata.name.clone(),
        uid: node.metadata.uid.clone(),
        ..ObjectReference::default()
    }
}

/// `IsNodeReady`: the node's Ready condition is True.
pub fn is_node_ready(node: &Node) -> bool {
    node_condition(node.status.as_ref(), "Ready").is_some_and(|c| c.status == "True")
}

/// `TaintKeyExists`.
pub fn taint_key_exists(taints: Option<&Vec<Taint>>, key: &str) -> bool {
    taints.into_iter().flatten().any(|t| t.key == key)
}

/// `SwapNodeControllerTaint`: adds `to_add` (stamped with the time now) and removes
/// `to_remove`; false (after logging) if either write failed.
pub fn swap_node_controller_taint(client: &Client, to_add: &[Taint], to_remove: &[Taint], node: &Node) -> bool {
    let now = Time(Timestamp::now());
    let stamped: Vec<Taint> = to_add.iter().map(|t| Taint { time_added: Some(now.clone()), ..t.clone() }).collect();
    let name = name_of(node);
    if let Err(e) = add_or_update_taints(client, name, &stamped) {
        log::error!("unable to taint {stamped:?} unresponsive Node {name:?}: {e}");
        return false;
    }
    if let Err(e) = remove_taints(client, name, Some(node), to_remove) {
        log::error!("unable to remove {to_remove:?} unneeded taint from unresponsive Node {name:?}: {e}");
        return false;
    }
    true
}

/// `AddOrUpdateTaintOnNode`: each taint replaces the node's taint of the same key and effect
/// (unless equal), or is appended; retried on conflicts.
pub fn add_or_update_taints(client: &Client, node_name: &str, taints: &[Taint]) -> Result<(), Error> {
    if taints.is_empty() {
        return Ok(());
    }
    update_taints(client, node_name, |current| {
        let mut updated = current.to_vec();
        let mut changed = false;
        for wanted in taints {
            changed |= add_or_update_taint(&mut updated, wanted);
        }
        changed.then_some(updated)
    })
}

/// `RemoveTaintOffNode`: removes every taint matching one of `taints`; with `node` given,
/// makes no request when it has none of them.
pub fn remove_taints(client: &Client, node_name: &str, node: Option<&Node>, taints: &[Taint]) -> Result<(), Error> {
    if taints.is_empty() {
        return Ok(());
    }
    if let Some(node) = node
        && !taints.iter().any(|t| taint_exists(node_taints(node), t))
    {
        return Ok(());
    }
    update_taints(client, node_name, |current| {
        let kept: Vec<Taint> = current.iter().filter(|t| !taint_exists(taints, t)).cloned().collect();
        (kept.len() != current.len()).then_some(kept)
    })
}

/// `taintutils.AddOrUpdateTaint` on a list: whether it changed.
fn add_or_update_taint(taints: &mut Vec<Taint>, wanted: &Taint) -> bool {
    match taints.iter().position(|t| taint_matches(t, wanted)) {
        Some(i) if taints[i] == *wanted => false,
        Some(i) => {
            taints[i] = wanted.clone();
            true
        }
        None => {
            taints.push(wanted.clone());
            true
        }
    }
}

/// Reads the node, computes its new taints with `change` (`None`: nothing to do) and writes
/// them with `PatchNodeTaints` (the resourceVersion as precondition), retrying on conflicts.
fn update_taints(
    client: &Client,
    node_name: &str,
    change: impl Fn(&[Taint]) -> Option<Vec<Taint>>,
) -> Result<(), Error> {
    let api = Api::<Node>::cluster(client);
    let mut tries = 0;
    loop {
        tries += 1;
        let node = api.get(node_name)?;
        let Some(taints) = change(node_taints(&node)) else { return Ok(()) };
        match patch_node_taints(&api, &node, &taints) {
            Err(e) if e.is_conflict() && tries < TAINT_UPDATE_TRIES => {
                std::thread::sleep(TAINT_UPDATE_BACKOFF.mul_f64(1.0 + crate::random::unit()));
            }
            other => return other.map(|_| ()),
        }
    }
}

/// `PatchNodeTaints`: a strategic merge patch replacing `spec.taints` (a list without merge
/// key) and carrying the node's resourceVersion, so that a concurrent change conflicts.
fn patch_node_taints(api: &Api<Node>, node: &Node, taints: &[Taint]) -> Result<Node, Error> {
    let taints = if taints.is_empty() {
        Value::Null
    } else {
        crate::apimachinery::json::to_value(taints).unwrap_or(Value::Null)
    };
    let patch = json!({"metadata": {"resourceVersion": node.metadata.resource_version}, "spec": {"taints": taints}});
    api.patch(name_of(node), &Patch::Strategic(patch), &PostParams::default())
}

/// Why [`mark_pods_not_ready`] failed: the status writes that failed, each kept whole, read as
/// upstream's `utilerrors.NewAggregate` (each message once; several in brackets).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MarkPodsNotReadyError(#[source] Aggregate);

/// `MarkPodsNotReady`: sets the Ready condition of each pod on `node_name` to False (through
/// `pods/status`) and records `NodeNotReady` on it. Errors other than NotFound are collected.
pub fn mark_pods_not_ready(
    client: &Client,
    recorder: &EventRecorder,
    pods: &[Arc<Pod>],
    node_name: &str,
) -> Result<(), MarkPodsNotReadyError> {
    log::debug!("update ready status of pods on node {node_name}");
    let mut errors = Vec::new();
    for pod in pods {
        if pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) != Some(node_name) {
            continue;
        }
        let mut pod = (**pod).clone();
        let status = pod.status.get_or_insert_with(PodStatus::default);
        let Some(ready) = status.conditions.iter().flatten().find(|c| c.type_ == "Ready").cloned() else { continue };
        let wanted = PodCondition { status: "False".into(), ..ready };
        if !update_pod_condition(status, wanted, Timestamp::now()) {
            continue;
        }
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        log::debug!("updating ready status of pod {namespace}/{name} to false");
        match Api::<Pod>::namespaced(client, &namespace).replace_status(&name, &pod, &PostParams::default()) {
            Ok(_) => {}
            Err(e) if e.is_not_found() => continue,
            Err(e) => {
                log::info!("failed to update status for pod {namespace}/{name}: {e}");
                errors.push(e);
            }
        }
        recorder.event_for(&pod, EventType::Warning, "NodeNotReady", "Node is not ready");
    }
    Aggregate::from_errors(errors).map_err(MarkPodsNotReadyError)
}

/// The pod index by `spec.nodeName` both node controllers use (`nodeNameKeyIndex`).
pub const NODE_NAME_INDEX: &str = "spec.nodeName";

/// Indexes pods by `spec.nodeName` (unless another node controller did already).
pub fn add_node_name_index(pods: &Informer<Pod>) {
    if pods.store().has_index(NODE_NAME_INDEX) {
        return;
    }
    pods.add_index(NODE_NAME_INDEX, |pod: &Pod| {
        pod.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty()).into_iter().collect()
    });
}

/// The pods bound to `node` (`getPodsAssignedToNode`).
pub fn pods_on_node(pods: &Informer<Pod>, node: &str) -> Vec<Arc<Pod>> {
    pods.store().by_index(NODE_NAME_INDEX, node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_failed_status_writes_keep_their_kind() {
        let server = crate::controllers::podutil::testing::ErrorServer::conflict();
        let recorder = EventRecorder::new(server.client.clone(), "node-controller");
        let pod = |name: &str| -> Arc<Pod> {
            Arc::new(
                serde_json::from_value(json!({
                    "metadata": {"name": name, "namespace": "ns"},
                    "spec": {"nodeName": "n1", "containers": []},
                    "status": {"conditions": [{"type": "Ready", "status": "True"}]}
                }))
                .expect("a pod"),
            )
        };
        let error = mark_pods_not_ready(&server.client, &recorder, &[pod("a"), pod("b")], "n1").unwrap_err();
        let text = "the test server answers 409 Conflict (409 Conflict)";
        // The same message twice reads once, as upstream's aggregate.
        assert_eq!(error.to_string(), text);
        let found = crate::client::Error::find(&error).expect("the API error inside");
        assert!(found.is_conflict());
        assert!(matches!(
            crate::runtime::controller::SyncError::of(error),
            crate::runtime::controller::SyncError::Conflict(_)
        ));
    }

    fn node(value: serde_json::Value) -> Node {
        serde_json::from_value(value).expect("a node")
    }

    fn toleration(value: Value) -> Toleration {
        serde_json::from_value(value).expect("a toleration")
    }

    #[test]
    fn tolerations_follow_tolerates_taint() {
        let unreachable = taint(TAINT_UNREACHABLE, NO_EXECUTE);
        assert!(tolerates(&toleration(json!({"operator": "Exists"})), &unreachable));
        assert!(tolerates(&toleration(json!({"key": TAINT_UNREACHABLE, "operator": "Exists"})), &unreachable));
        assert!(!tolerates(&toleration(json!({"key": TAINT_UNREACHABLE, "effect": "NoSchedule"})), &unreachable));
        assert!(tolerates(&toleration(json!({"key": TAINT_UNREACHABLE})), &unreachable), "Equal with empty values");
        assert!(!tolerates(&toleration(json!({"key": TAINT_UNREACHABLE, "value": "x"})), &unreachable));
        assert!(!tolerates(&toleration(json!({"key": TAINT_UNREACHABLE, "operator": "Lt"})), &unreachable));
    }

    #[test]
    fn matching_tolerations_needs_every_taint_tolerated() {
        let taints = [taint(TAINT_UNREACHABLE, NO_EXECUTE), taint("dedicated", NO_EXECUTE)];
        let both = [
            toleration(json!({"key": TAINT_UNREACHABLE, "operator": "Exists", "tolerationSeconds": 5})),
            toleration(json!({"operator": "Exists"})),
        ];
        let (all, used) = matching_tolerations(&taints, &both);
        assert!(all);
        assert_eq!(used.iter().map(|t| t.toleration_seconds).collect::<Vec<_>>(), [Some(5), None]);
        let (all, used) = matching_tolerations(&taints, &both[..1]);
        assert!(!all && used.is_empty());
        assert_eq!(matching_tolerations(&[], &[]), (true, Vec::new()));
    }

    #[test]
    fn adding_a_taint_replaces_one_with_the_same_key_and_effect() {
        let mut taints = vec![taint(TAINT_NOT_READY, NO_SCHEDULE)];
        assert!(!add_or_update_taint(&mut taints, &taint(TAINT_NOT_READY, NO_SCHEDULE)));
        let stamped = Taint { time_added: Some(Time(Timestamp::UNIX_EPOCH)), ..taint(TAINT_NOT_READY, NO_SCHEDULE) };
        assert!(add_or_update_taint(&mut taints, &stamped));
        assert_eq!(taints, [stamped]);
        assert!(add_or_update_taint(&mut taints, &taint(TAINT_NOT_READY, NO_EXECUTE)));
        assert_eq!(taints.len(), 2);
    }

    #[test]
    fn zone_keys_join_region_and_zone() {
        let labelled = |labels: Value| node(json!({"metadata": {"labels": labels}}));
        assert_eq!(zone_key(&labelled(json!({}))), "");
        let labels = json!({"topology.kubernetes.io/zone": "us-east-1a", "topology.kubernetes.io/region": "us-east-1"});
        assert_eq!(zone_key(&labelled(labels)), "us-east-1:\0:us-east-1a");
        assert_eq!(zone_key(&labelled(json!({"failure-domain.beta.kubernetes.io/zone": "z"}))), ":\0:z");
    }

    #[test]
    fn readiness_and_taints() {
        let ready =
            node(json!({"metadata": {"name": "a"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}));
        let unknown = node(
            json!({"metadata": {"name": "b"}, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}),
        );
        assert!(is_node_ready(&ready));
        assert!(!is_node_ready(&unknown));
        assert!(!is_node_ready(&node(json!({"metadata": {"name": "c"}}))));
        let tainted = node(json!({"metadata": {"name": "d"}, "spec": {"taints": [
            {"key": TAINT_NODE_OUT_OF_SERVICE, "effect": "NoExecute"}
        ]}}));
        let taints = tainted.spec.as_ref().and_then(|s| s.taints.as_ref());
        assert!(taint_key_exists(taints, TAINT_NODE_OUT_OF_SERVICE));
        assert!(!taint_key_exists(taints, "other"));
        assert!(!taint_key_exists(None, TAINT_NODE_OUT_OF_SERVICE));
    }

    #[test]
    fn node_references_have_no_namespace() {
        let n = node(json!({"metadata": {"name": "a", "uid": "u", "resourceVersion": "7"}}));
        let reference = node_reference(&n);
        assert_eq!(reference.kind.as_deref(), Some("Node"));
        assert_eq!(reference.uid.as_deref(), Some("u"));
        assert_eq!(reference.namespace, None);
        assert_eq!(reference.resource_version, None);
    }
}
