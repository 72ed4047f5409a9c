//! Node helpers several controllers share, after upstream's `pkg/controller/util/node`
//! (`RecordNodeStatusChange`), `pkg/util/node` (`IsNodeReady`) and `pkg/util/taints`
//! (`TaintKeyExists`).

use k8s_openapi::api::core::v1::{Node, ObjectReference, Taint};

use crate::runtime::events::{EventRecorder, EventType};

/// `v1.TaintNodeOutOfService`.
pub const TAINT_NODE_OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";

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

/// `RecordNodeStatusChange`: an Event with reason `new_status` and the message
/// "Node <name> status is now: <new_status>".
pub fn record_node_status_change(recorder: &EventRecorder, node: &Node, event_type: EventType, new_status: &str) {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    log::debug!("recording status change event message for node {name}: {new_status}");
    let message = format!("Node {name} status is now: {new_status}");
    recorder.event(&node_reference(node), event_type, new_status, &message);
}

/// `IsNodeReady`: the node's Ready condition is True.
pub fn is_node_ready(node: &Node) -> bool {
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.into_iter().flatten().find(|c| c.type_ == "Ready").is_some_and(|c| c.status == "True")
}

/// `TaintKeyExists`.
pub fn taint_key_exists(taints: Option<&Vec<Taint>>, key: &str) -> bool {
    taints.into_iter().flatten().any(|t| t.key == key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(value: serde_json::Value) -> Node {
        serde_json::from_value(value).expect("a node")
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
