//! `k8s.io/component-helpers/scheduling/corev1/nodeaffinity`: whether a pod's node selector and
//! required node affinity admit a node (the scheduler's NodeAffinity filter, the DaemonSet
//! controller's placement).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, NodeSelectorTerm, PodSpec};

/// `GetRequiredNodeAffinity(pod).Match(node)`: `spec.nodeSelector` and the required node
/// affinity's terms (ORed; a term whose requirements do not parse matches nothing).
pub fn matches_required_node_affinity(spec: &PodSpec, node: &Node) -> bool {
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    if let Some(selector) = spec.node_selector.as_ref()
        && !selector.iter().all(|(k, v)| labels.get(k) == Some(v))
    {
        return false;
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref());
    match required {
        Some(selector) => selector.node_selector_terms.iter().any(|term| term_matches(term, node, labels)),
        None => true,
    }
}

/// A term matches when it has requirements and all of them match.
fn term_matches(term: &NodeSelectorTerm, node: &Node, labels: &BTreeMap<String, String>) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    let name = node.metadata.name.as_deref().unwrap_or("");
    expressions.iter().all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| {
            r.key == "metadata.name"
                && matches!(r.operator.as_str(), "In" | "NotIn")
                && requirement_matches(r, Some(name))
        })
}

fn requirement_matches(requirement: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = requirement.values.as_deref().unwrap_or_default();
    let number = |v: &str| v.parse::<i64>().ok();
    match requirement.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => values.is_empty() && value.is_some(),
        "DoesNotExist" => values.is_empty() && value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), [want]) = (value.and_then(number), values) else { return false };
            let Some(want) = number(want) else { return false };
            if requirement.operator == "Gt" { have > want } else { have < want }
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node() -> Node {
        serde_json::from_value(json!({"metadata": {"name": "a", "labels": {"zone": "z1", "cores": "8"}}})).unwrap()
    }

    fn spec(selector: serde_json::Value, terms: serde_json::Value) -> PodSpec {
        serde_json::from_value(json!({"containers": [], "nodeSelector": selector, "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}))
        .unwrap()
    }

    #[test]
    fn selectors_and_terms_as_upstream() {
        let node = node();
        let any = json!([{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]);
        assert!(matches_required_node_affinity(&spec(json!({"zone": "z1"}), any.clone()), &node));
        assert!(!matches_required_node_affinity(&spec(json!({"zone": "z2"}), any), &node));
        // Terms are ORed; an empty term matches nothing; Exists with values does not parse.
        let terms = json!([{}, {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}]);
        assert!(matches_required_node_affinity(&spec(json!({}), terms), &node));
        let bad = json!([{"matchExpressions": [{"key": "zone", "operator": "Exists", "values": ["z1"]}]}]);
        assert!(!matches_required_node_affinity(&spec(json!({}), bad), &node));
        let gt = json!([{"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["4"]}]}]);
        assert!(matches_required_node_affinity(&spec(json!({}), gt), &node));
        let other_field = json!([{"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["a"]}]}]);
        assert!(!matches_required_node_affinity(&spec(json!({}), other_field), &node));
    }
}
