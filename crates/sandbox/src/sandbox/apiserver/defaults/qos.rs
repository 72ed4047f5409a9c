//! A pod's quality-of-service class, as `pkg/apis/core/helper/qos.ComputePodQOS` computes it.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::quantity::Quantity;

/// The resources QoS looks at.
const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// Totals of positive quantities per QoS resource, in nano-units.
type Totals = BTreeMap<String, i128>;

/// `Guaranteed`, `Burstable` or `BestEffort` for a pod (`ComputePodQOS`): best-effort when nothing
/// requests or limits cpu or memory; guaranteed when every container limits both and the
/// summed requests equal the summed limits; burstable otherwise. Pod-level `spec.resources`,
/// when set, replaces the containers' (the `PodLevelResources` branch).
pub fn pod_qos_class(pod: &Value) -> &'static str {
    let spec = &pod["spec"];
    let mut requests = Totals::new();
    let mut limits = Totals::new();
    let mut guaranteed = true;
    if spec["resources"].is_object() {
        add_positive(&mut requests, &spec["resources"]["requests"]);
        guaranteed &= add_positive(&mut limits, &spec["resources"]["limits"]) == QOS_RESOURCES.len()
            || spec["resources"]["limits"].as_object().is_none_or(|l| l.is_empty());
    } else {
        let containers =
            ["containers", "initContainers"].into_iter().flat_map(|list| spec[list].as_array().into_iter().flatten());
        for container in containers {
            add_positive(&mut requests, &container["resources"]["requests"]);
            guaranteed &= add_positive(&mut limits, &container["resources"]["limits"]) == QOS_RESOURCES.len();
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    let matching = requests.iter().all(|(name, request)| limits.get(name) == Some(request));
    if guaranteed && matching && requests.len() == limits.len() { "Guaranteed" } else { "Burstable" }
}

/// Adds the positive cpu/memory quantities of a resource list to `totals`; returns how many
/// QoS resources the list had with a positive quantity.
fn add_positive(totals: &mut Totals, list: &Value) -> usize {
    let Some(list) = list.as_object() else { return 0 };
    let mut found = 0;
    for (name, value) in list.iter().filter(|(name, _)| QOS_RESOURCES.contains(&name.as_str())) {
        let Some(amount) = Quantity::from_json(value).map(|q| q.nano_value()).filter(|n| *n > 0) else { continue };
        let total = totals.entry(name.clone()).or_insert(0);
        *total = total.saturating_add(amount);
        found += 1;
    }
    found
}
