//! Resource lists (`corev1.ResourceList`: resource name → quantity) read from JSON objects,
//! and a pod's aggregate container requests or limits as `k8s.io/component-helpers/resource`
//! computes them (for the LimitRanger; ResourceQuota uses the typed [`crate::quota::pods`]).

use serde_json::Value;

use crate::quantity::Quantity;
pub use crate::quota::resources::ResourceList;

/// The list in a JSON map; entries that are not quantities are left out (validation refuses them).
pub fn parse(value: &Value) -> ResourceList {
    let Some(map) = value.as_object() else { return ResourceList::new() };
    map.iter().filter_map(|(name, q)| Some((name.clone(), Quantity::from_json(q)?))).collect()
}

/// The requests or limits (`field`) of one container.
pub fn container_resources(container: &Value, field: &str) -> ResourceList {
    parse(&container["resources"][field])
}

/// The sum over a pod's containers of their requests or limits, with init containers taken as
/// upstream does: restartable (sidecar) ones add up with the app containers, the others only
/// raise the total to what each one needs while it runs (`AggregateContainerRequests`).
pub fn aggregate_containers(pod: &Value, field: &str) -> ResourceList {
    let containers = pod["spec"]["containers"].as_array().into_iter().flatten();
    let app = containers.map(|c| container_resources(c, field));
    let init_containers = pod["spec"]["initContainers"].as_array().into_iter().flatten();
    let init = init_containers.map(|c| (c["restartPolicy"] == "Always", container_resources(c, field)));
    crate::quota::resources::aggregate_containers(app, init)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn init_containers_raise_and_sidecars_add() {
        let pod = json!({"spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}},
                {"name": "b", "resources": {"requests": {"cpu": "200m"}}},
            ],
            "initContainers": [
                {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "50m"}}},
                {"name": "init", "resources": {"requests": {"cpu": "1", "memory": "32Mi"}}},
            ],
        }});
        let requests = aggregate_containers(&pod, "requests");
        // max(100m + 200m + 50m, 1 + 50m)
        assert_eq!(requests["cpu"].canonical(), "1050m");
        assert_eq!(requests["memory"].canonical(), "64Mi");
        assert!(aggregate_containers(&pod, "limits").is_empty());
    }
}
