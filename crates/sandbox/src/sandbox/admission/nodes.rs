//! TaintNodesByCondition (`plugin/pkg/admission/nodetaint`): a new node starts with the
//! `node.kubernetes.io/not-ready:NoSchedule` taint, which the node lifecycle controller removes
//! once the node reports Ready, so nothing is scheduled onto it before that.
//!
//! PodTopologyLabels (`plugin/pkg/admission/podtopologylabels`, PodTopologyLabelsAdmission Beta
//! and on since v1.35): a pod created on a node, or bound to one, gets the node's zone and
//! region labels.

use serde_json::{Map, Value, json};

use super::{AdmissionContext, array_mut, items, spec_mut, text};
use crate::sandbox::storage::store::Txn;

/// The node labels PodTopologyLabels copies (`defaultConfig`).
const TOPOLOGY_LABELS: &[&str] = &["topology.kubernetes.io/zone", "topology.kubernetes.io/region"];

/// The topology labels of node `name` (none when it does not exist).
pub fn topology_labels(txn: &Txn<'_>, name: &str) -> Map<String, Value> {
    let Some(node) = txn.get("nodes", "", name) else { return Map::new() };
    let labels = node["metadata"]["labels"].as_object().cloned().unwrap_or_default();
    labels.into_iter().filter(|(key, _)| TOPOLOGY_LABELS.contains(&key.as_str())).collect()
}

/// PodTopologyLabels on a pod created with its node set (bindings: `subresources::bind`).
pub(super) fn pod_topology_labels(ctx: &AdmissionContext<'_>, pod: &mut Value, txn: &Txn<'_>) {
    if !ctx.is_core("pods") || !ctx.is_create() {
        return;
    }
    let node = text(pod, "/spec/nodeName").to_string();
    if node.is_empty() {
        return;
    }
    let labels = topology_labels(txn, &node);
    if labels.is_empty() {
        return;
    }
    if !pod["metadata"]["labels"].is_object() {
        pod["metadata"]["labels"] = json!({});
    }
    for (key, value) in labels {
        pod["metadata"]["labels"][key] = value;
    }
}

const NOT_READY: &str = "node.kubernetes.io/not-ready";

/// Node creations (upstream's handler), not subresources.
pub(super) fn taint_nodes_by_condition(ctx: &AdmissionContext<'_>, node: &mut Value) {
    if !ctx.is_core("nodes") || !ctx.is_create() {
        return;
    }
    let tainted =
        items(node, "/spec/taints").iter().any(|t| text(t, "/key") == NOT_READY && text(t, "/effect") == "NoSchedule");
    if tainted {
        return;
    }
    spec_mut(node);
    if let Some(taints) = array_mut(node, "/spec", "taints") {
        taints.push(json!({"key": NOT_READY, "effect": "NoSchedule"}));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::*;
    use crate::sandbox::storage::store::Store;

    #[test]
    fn new_nodes_are_tainted_not_ready_once() {
        let store = Store::default();
        let stored = create(&store, "", "nodes", "", json!({"metadata": {"name": "n1"}})).unwrap();
        assert_eq!(stored["spec"]["taints"], json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]));
        let own = json!({"metadata": {"name": "n2"}, "spec": {"taints": [
            {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule", "value": "x"}]}});
        let stored = create(&store, "", "nodes", "", own).unwrap();
        assert_eq!(stored["spec"]["taints"].as_array().map(Vec::len), Some(1));
        // Updates are left alone (the node lifecycle controller removes the taint).
        let updated = update(&store, "", "nodes", json!({"metadata": {"name": "n1"}, "spec": {}})).unwrap();
        assert_eq!(updated["spec"], json!({}));
    }
}
