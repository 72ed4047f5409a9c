//! The usage rules: what a pod, a container and a node use, from annotations on the objects
//! in the API server (see docs/sandbox.md, "Metrics APIs").

use std::collections::BTreeMap;

use serde_json::Value;

use crate::apimachinery::labels::Selector;
use crate::quantity::{Format, Quantity};

/// The annotation prefix of every rule.
pub const PREFIX: &str = "kcm-sandbox.dev/";

/// CPU and memory in use, nano-cores and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// CPU, nano-cores.
    pub cpu_nanos: i128,
    /// Memory, bytes.
    pub memory_bytes: i128,
}

impl std::ops::Add for Usage {
    type Output = Usage;

    fn add(self, other: Usage) -> Usage {
        Usage { cpu_nanos: self.cpu_nanos + other.cpu_nanos, memory_bytes: self.memory_bytes + other.memory_bytes }
    }
}

impl Usage {
    /// `{cpu, memory}` as metrics-server writes them: cpu a nano-scaled decimal quantity,
    /// memory a binary-SI byte count, both canonical.
    pub fn to_json(self) -> Value {
        serde_json::json!({
            "cpu": Quantity::from_nanos(self.cpu_nanos, Format::DecimalSI).canonical(),
            "memory": Quantity::from_nanos(self.memory_bytes * 1_000_000_000, Format::BinarySI).canonical(),
        })
    }
}

/// Whether metrics-server would report the pod: Running and on a node.
pub fn is_running(pod: &Value) -> bool {
    pod["status"]["phase"] == "Running" && pod["spec"]["nodeName"].as_str().is_some_and(|n| !n.is_empty())
}

fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object["metadata"]["annotations"][format!("{PREFIX}{key}")].as_str()
}

/// An annotation's quantity; text that is not one counts as absent.
pub fn annotated_quantity(object: &Value, key: &str) -> Option<Quantity> {
    annotation(object, key).and_then(|text| Quantity::parse(text.trim()).ok())
}

/// Whether the pod sets its own usage (then no Service load reaches it).
fn has_pod_usage(pod: &Value) -> bool {
    annotated_quantity(pod, "cpu-usage").is_some() || annotated_quantity(pod, "memory-usage").is_some()
}

/// The Service loads spread over each pod that has no usage of its own: per pod key
/// (`namespace/name`), the summed share of every Service selecting it.
pub fn service_shares(pods: &[Value], services: &[Value]) -> BTreeMap<String, Usage> {
    let mut shares: BTreeMap<String, Usage> = BTreeMap::new();
    for service in services {
        let cpu = annotated_quantity(service, "cpu-load");
        let memory = annotated_quantity(service, "memory-load");
        if cpu.is_none() && memory.is_none() {
            continue;
        }
        let Some(selector) = service["spec"]["selector"].as_object().filter(|s| !s.is_empty()) else {
            continue;
        };
        let selector = Selector::from_set(selector);
        let namespace = &service["metadata"]["namespace"];
        let selected: Vec<&Value> = pods
            .iter()
            .filter(|p| &p["metadata"]["namespace"] == namespace && is_running(p) && !has_pod_usage(p))
            .filter(|p| selector.matches_object(p))
            .collect();
        let count = selected.len() as i128;
        if count == 0 {
            continue;
        }
        let share = Usage {
            cpu_nanos: cpu.map_or(0, |q| q.nano_value()) / count,
            memory_bytes: memory.map_or(0, |q| q.value()) / count,
        };
        for pod in selected {
            let entry = shares.entry(pod_key(pod)).or_default();
            *entry = *entry + share;
        }
    }
    shares
}

/// `namespace/name`.
pub fn pod_key(pod: &Value) -> String {
    let meta = &pod["metadata"];
    format!("{}/{}", meta["namespace"].as_str().unwrap_or_default(), meta["name"].as_str().unwrap_or_default())
}

/// Each container's usage: the pod's total (its annotation, else its Service share) split
/// evenly, except where a container annotation sets it.
pub fn container_usage(pod: &Value, service_share: Usage) -> Vec<(String, Usage)> {
    let names: Vec<String> = pod["spec"]["containers"]
        .as_array()
        .map(|cs| cs.iter().filter_map(|c| c["name"].as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let count = names.len().max(1) as i128;
    let total = if has_pod_usage(pod) {
        Usage {
            cpu_nanos: annotated_quantity(pod, "cpu-usage").map_or(0, |q| q.nano_value()),
            memory_bytes: annotated_quantity(pod, "memory-usage").map_or(0, |q| q.value()),
        }
    } else {
        service_share
    };
    names
        .into_iter()
        .map(|name| {
            let cpu = annotated_quantity(pod, &format!("cpu-usage.{name}")).map(|q| q.nano_value());
            let memory = annotated_quantity(pod, &format!("memory-usage.{name}")).map(|q| q.value());
            let usage = Usage {
                cpu_nanos: cpu.unwrap_or(total.cpu_nanos / count),
                memory_bytes: memory.unwrap_or(total.memory_bytes / count),
            };
            (name, usage)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, annotations: Value, containers: &[&str]) -> Value {
        let containers: Vec<Value> = containers.iter().map(|c| json!({"name": c})).collect();
        json!({"metadata": {"name": name, "namespace": "ns", "labels": {"app": "web"}, "annotations": annotations},
            "spec": {"nodeName": "n1", "containers": containers}, "status": {"phase": "Running"}})
    }

    #[test]
    fn pod_usage_splits_over_containers_and_container_annotations_win() {
        let p = pod(
            "a",
            json!({"kcm-sandbox.dev/cpu-usage": "300m", "kcm-sandbox.dev/memory-usage": "64Mi",
                "kcm-sandbox.dev/cpu-usage.b": "1"}),
            &["a", "b"],
        );
        let usage = container_usage(&p, Usage::default());
        assert_eq!(usage[0].1.to_json(), json!({"cpu": "150m", "memory": "32Mi"}));
        assert_eq!(usage[1].1.to_json(), json!({"cpu": "1", "memory": "32Mi"}));
    }

    #[test]
    fn service_load_spreads_over_pods_without_their_own_usage() {
        let pods = vec![
            pod("a", json!({}), &["c"]),
            pod("b", json!({}), &["c"]),
            pod("c", json!({"kcm-sandbox.dev/cpu-usage": "1"}), &["c"]),
        ];
        let service = json!({"metadata": {"name": "s", "namespace": "ns",
            "annotations": {"kcm-sandbox.dev/cpu-load": "1", "kcm-sandbox.dev/memory-load": "100Mi"}},
            "spec": {"selector": {"app": "web"}}});
        let shares = service_shares(&pods, &[service]);
        assert_eq!(shares.len(), 2);
        assert_eq!(shares["ns/a"].to_json(), json!({"cpu": "500m", "memory": "50Mi"}));
        assert!(!shares.contains_key("ns/c"));
    }

    #[test]
    fn nothing_annotated_uses_nothing_and_odd_values_stay_canonical() {
        let p = pod("a", json!({}), &["c"]);
        assert_eq!(container_usage(&p, Usage::default())[0].1.to_json(), json!({"cpu": "0", "memory": "0"}));
        let odd = Usage { cpu_nanos: 123_456_789, memory_bytes: 1000 };
        assert_eq!(odd.to_json(), json!({"cpu": "123456789n", "memory": "1k"}));
    }
}
