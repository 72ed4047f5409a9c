//! DefaultTolerationSeconds (`plugin/pkg/admission/defaulttolerationseconds`): pods tolerate
//! the not-ready and unreachable NoExecute taints for 300 seconds unless they say otherwise.

use serde_json::{Value, json};

use super::{AdmissionContext, array_mut, items, spec_mut, text};

const NOT_READY: &str = "node.kubernetes.io/not-ready";
const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// The plugin's `--default-not-ready-toleration-seconds` and `--default-unreachable-toleration-seconds`.
const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// Pods, create and update (upstream's handler), not subresources.
pub(super) fn default_toleration_seconds(ctx: &AdmissionContext<'_>, pod: &mut Value) {
    if !ctx.is_core("pods") {
        return;
    }
    // A toleration with the key (or no key) and the NoExecute effect (or none) covers the taint.
    let tolerates = |key: &str| {
        items(pod, "/spec/tolerations").iter().any(|t| {
            let (k, effect) = (text(t, "/key"), text(t, "/effect"));
            (k == key || k.is_empty()) && (effect == "NoExecute" || effect.is_empty())
        })
    };
    let missing: Vec<&str> = [NOT_READY, UNREACHABLE].into_iter().filter(|key| !tolerates(key)).collect();
    if missing.is_empty() {
        return;
    }
    spec_mut(pod);
    if let Some(tolerations) = array_mut(pod, "/spec", "tolerations") {
        for key in missing {
            tolerations.push(json!({
                "key": key,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::*;
    use crate::sandbox::storage::store::Store;

    #[test]
    fn tolerations_are_added_once() {
        let store = Store::default();
        namespace_default_sa(&store, "team");
        let stored = create(&store, "", "pods", "team", pod("team", "p")).unwrap();
        let expected = json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ]);
        assert_eq!(stored["spec"]["tolerations"], expected);
        // The update path runs the plugin again: nothing more is added.
        let again = update(&store, "", "pods", stored).unwrap();
        assert_eq!(again["spec"]["tolerations"], expected);
    }

    #[test]
    fn existing_tolerations_are_respected() {
        let store = Store::default();
        namespace_default_sa(&store, "team");
        let mut own = pod("team", "own");
        own["spec"]["tolerations"] = json!([
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5},
        ]);
        let stored = create(&store, "", "pods", "team", own).unwrap();
        let tolerations = stored["spec"]["tolerations"].as_array().unwrap();
        assert_eq!(tolerations.len(), 2);
        assert_eq!(tolerations[0]["tolerationSeconds"], 5);
        assert_eq!(tolerations[1]["key"], "node.kubernetes.io/not-ready");

        let mut everything = pod("team", "all");
        everything["spec"]["tolerations"] = json!([{"operator": "Exists"}]);
        let stored = create(&store, "", "pods", "team", everything).unwrap();
        assert_eq!(stored["spec"]["tolerations"], json!([{"operator": "Exists"}]));
    }
}
