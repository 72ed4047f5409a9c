//! The service evaluator (`pkg/quota/v1/evaluator/core/services.go`).

use k8s_openapi::api::core::v1::Service;

use super::resources::{self, ResourceList};
use crate::quantity::Quantity;

/// `serviceObjectCountName`.
pub const OBJECT_COUNT_NAME: &str = "count/services";
/// `serviceResources`.
pub const SERVICE_RESOURCES: &[&str] = &[OBJECT_COUNT_NAME, "services", "services.nodeports", "services.loadbalancers"];

/// `serviceEvaluator.MatchingResources`.
pub fn matching_resources(input: &[String]) -> Vec<String> {
    resources::intersection(input, &SERVICE_RESOURCES.iter().map(|s| s.to_string()).collect::<Vec<_>>())
}

/// `serviceEvaluator.Usage`: the service, its node ports by type, load balancers.
pub fn usage(service: &Service) -> ResourceList {
    let spec = service.spec.as_ref();
    let ports = spec.and_then(|s| s.ports.as_ref()).map_or(0, Vec::len);
    let service_type = quota_service_type(service);
    let node_ports = match service_type {
        "NodePort" => ports,
        // Without node port allocation only explicitly set node ports count (the intent: none
        // are allocated yet at admission).
        "LoadBalancer" if spec.and_then(|s| s.allocate_load_balancer_node_ports) == Some(false) => {
            let ports = spec.and_then(|s| s.ports.as_ref()).into_iter().flatten();
            ports.filter(|p| p.node_port.is_some_and(|n| n != 0)).count()
        }
        "LoadBalancer" => ports,
        _ => 0,
    };
    let units = |n: usize| Quantity::from_units(i64::try_from(n).unwrap_or(i64::MAX));
    ResourceList::from([
        (OBJECT_COUNT_NAME.to_string(), Quantity::from_units(1)),
        ("services".to_string(), Quantity::from_units(1)),
        ("services.loadbalancers".to_string(), units(usize::from(service_type == "LoadBalancer"))),
        ("services.nodeports".to_string(), units(node_ports)),
    ])
}

/// `GetQuotaServiceType`: `NodePort`, `LoadBalancer`, or `""` for types quota does not track.
pub fn quota_service_type(service: &Service) -> &str {
    let service_type = service.spec.as_ref().and_then(|s| s.type_.as_deref()).unwrap_or_default();
    if matches!(service_type, "NodePort" | "LoadBalancer") { service_type } else { "" }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn service(spec: serde_json::Value) -> Service {
        serde_json::from_value(json!({"metadata": {"name": "s"}, "spec": spec})).expect("a service")
    }

    #[test]
    fn usage_by_type() {
        // upstream TestServiceEvaluatorUsage.
        let ports = json!([{"port": 80}, {"port": 443, "nodePort": 30443}]);
        let cases = [
            (json!({"type": "ClusterIP", "ports": ports}), "0", "0"),
            (json!({"type": "NodePort", "ports": ports}), "0", "2"),
            (json!({"type": "LoadBalancer", "ports": ports}), "1", "2"),
            (json!({"type": "LoadBalancer", "ports": ports, "allocateLoadBalancerNodePorts": false}), "1", "1"),
            (json!({"type": "ExternalName", "externalName": "x"}), "0", "0"),
        ];
        for (spec, lbs, node_ports) in cases {
            let usage = usage(&service(spec.clone()));
            assert_eq!(usage["services.loadbalancers"].canonical(), lbs, "{spec}");
            assert_eq!(usage["services.nodeports"].canonical(), node_ports, "{spec}");
            assert_eq!(usage["services"].canonical(), "1");
            assert_eq!(usage["count/services"].canonical(), "1");
        }
        let input: Vec<String> = ["services", "pods", "services.nodeports"].iter().map(|s| s.to_string()).collect();
        assert_eq!(matching_resources(&input), ["services", "services.nodeports"]);
    }
}
