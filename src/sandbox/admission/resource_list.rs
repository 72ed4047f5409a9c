//! Resource lists (`corev1.ResourceList`: resource name → quantity) and a pod's effective
//! requests and limits, as `k8s.io/component-helpers/resource` computes them.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::quantity::Quantity;

/// Resource name → quantity, in name order.
pub type ResourceList = BTreeMap<String, Quantity>;

/// The list in a JSON map; entries that are not quantities are left out (validation refuses them).
pub fn parse(value: &Value) -> ResourceList {
    let Some(map) = value.as_object() else { return ResourceList::new() };
    map.iter().filter_map(|(name, q)| Some((name.clone(), Quantity::from_json(q)?))).collect()
}

/// The list as JSON, each quantity in its canonical form.
pub fn to_json(list: &ResourceList) -> Value {
    Value::Object(list.iter().map(|(name, q)| (name.clone(), Value::String(q.canonical()))).collect::<Map<_, _>>())
}

/// `quota.prettyPrint`: `cpu=1,pods=2`, in name order.
pub fn pretty(list: &ResourceList) -> String {
    list.iter().map(|(name, q)| format!("{name}={q}")).collect::<Vec<_>>().join(",")
}

/// Adds every entry of `other` into `list` (`addResourceList`).
pub fn add_into(list: &mut ResourceList, other: &ResourceList) {
    for (name, q) in other {
        list.entry(name.clone()).and_modify(|sum| *sum = sum.add(q)).or_insert(*q);
    }
}

/// Raises every entry of `list` to the one in `other` where that is greater (`maxResourceList`).
pub fn max_into(list: &mut ResourceList, other: &ResourceList) {
    for (name, q) in other {
        match list.get(name) {
            Some(current) if q <= current => {}
            _ => {
                list.insert(name.clone(), *q);
            }
        }
    }
}

/// The entries of `list` whose names are in `names` (`quota.Mask`).
pub fn mask<'n>(list: &ResourceList, names: impl IntoIterator<Item = &'n String>) -> ResourceList {
    names.into_iter().filter_map(|name| list.get(name).map(|q| (name.clone(), *q))).collect()
}

/// The requests or limits (`field`) of one container.
pub fn container_resources(container: &Value, field: &str) -> ResourceList {
    parse(&container["resources"][field])
}

/// The sum over a pod's containers of their requests or limits, with init containers taken as
/// upstream does: restartable (sidecar) ones add up with the app containers, the others only
/// raise the total to what each one needs while it runs (`AggregateContainerRequests`).
pub fn aggregate_containers(pod: &Value, field: &str) -> ResourceList {
    let mut total = ResourceList::new();
    for container in pod["spec"]["containers"].as_array().into_iter().flatten() {
        add_into(&mut total, &container_resources(container, field));
    }
    let mut sidecars = ResourceList::new();
    let mut init_max = ResourceList::new();
    for container in pod["spec"]["initContainers"].as_array().into_iter().flatten() {
        let own = container_resources(container, field);
        let running = if container["restartPolicy"] == "Always" {
            add_into(&mut total, &own);
            add_into(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut running = own;
            add_into(&mut running, &sidecars);
            running
        };
        max_into(&mut init_max, &running);
    }
    max_into(&mut total, &init_max);
    total
}

/// A pod's effective requests, with its overhead (`resourcehelper.PodRequests`).
pub fn pod_requests(pod: &Value) -> ResourceList {
    let mut requests = aggregate_containers(pod, "requests");
    add_into(&mut requests, &parse(&pod["spec"]["overhead"]));
    requests
}

/// A pod's effective limits; overhead adds to the resources that have a limit
/// (`resourcehelper.PodLimits`).
pub fn pod_limits(pod: &Value) -> ResourceList {
    let mut limits = aggregate_containers(pod, "limits");
    for (name, q) in parse(&pod["spec"]["overhead"]) {
        if let Some(limit) = limits.get_mut(&name) {
            *limit = limit.add(&q);
        }
    }
    limits
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
            "overhead": {"cpu": "10m"},
        }});
        let requests = pod_requests(&pod);
        // max(100m + 200m + 50m, 1 + 50m) + 10m overhead
        assert_eq!(requests["cpu"].canonical(), "1060m");
        assert_eq!(requests["memory"].canonical(), "64Mi");
        assert!(pod_limits(&pod).is_empty());
        assert_eq!(pretty(&requests), "cpu=1060m,memory=64Mi");
    }
}
