//! Priority (`plugin/pkg/admission/priority`): resolves a new pod's priority from its
//! PriorityClass (or the global default class), keeps it on updates, and allows only one
//! global default PriorityClass.

use serde_json::{Value, json};

use super::{AdmissionContext, Operation, Phase, forbidden, spec_mut, text};
use crate::sandbox::apiserver::status::ApiResult;
use crate::sandbox::storage::store::Txn;

/// The classes kube-apiserver creates at startup; they count as existing even when the
/// sandbox has not stored them.
const SYSTEM_CLASSES: &[(&str, i64)] =
    &[("system-node-critical", 2_000_001_000), ("system-cluster-critical", 2_000_000_000)];
const DEFAULT_PREEMPTION_POLICY: &str = "PreemptLowerPriority";

/// What the plugin needs of a PriorityClass.
struct Class {
    name: String,
    value: i64,
    preemption_policy: String,
}

impl Class {
    fn from_object(object: &Value) -> Class {
        let policy = text(object, "/preemptionPolicy");
        Class {
            name: text(object, "/metadata/name").to_string(),
            value: object["value"].as_i64().unwrap_or(0),
            // Stored classes are defaulted; an unset policy is the default one.
            preemption_policy: if policy.is_empty() { DEFAULT_PREEMPTION_POLICY } else { policy }.to_string(),
        }
    }
}

fn find_class(txn: &Txn<'_>, name: &str) -> Option<Class> {
    if let Some(object) = txn.get("priorityclasses", "", name) {
        return Some(Class::from_object(&object));
    }
    SYSTEM_CLASSES.iter().find(|(n, _)| *n == name).map(|(name, value)| Class {
        name: name.to_string(),
        value: *value,
        preemption_policy: DEFAULT_PREEMPTION_POLICY.to_string(),
    })
}

/// The global default class; with several (a race upstream too), the lowest value wins.
fn default_class(txn: &Txn<'_>) -> Option<Class> {
    txn.list("priorityclasses", None)
        .iter()
        .filter(|pc| pc["globalDefault"].as_bool() == Some(true))
        .map(|pc| Class::from_object(pc))
        .min_by_key(|pc| pc.value)
}

/// The mutating half (`admitPod`): pods, create and update.
pub(super) fn admit(ctx: &AdmissionContext<'_>, pod: &mut Value, txn: &Txn<'_>) -> ApiResult<()> {
    if !ctx.is_core("pods") {
        return Ok(());
    }
    if ctx.operation == Operation::Update {
        // Set on create; an update that leaves them out keeps them (validation forbids changes).
        if let Some(old) = ctx.old {
            for field in ["priority", "preemptionPolicy"] {
                if pod["spec"][field].is_null() && !old["spec"][field].is_null() {
                    spec_mut(pod)[field] = old["spec"][field].clone();
                }
            }
        }
        return Ok(());
    }
    let class_name = text(pod, "/spec/priorityClassName").to_string();
    let class = if class_name.is_empty() {
        default_class(txn)
    } else {
        let found = find_class(txn, &class_name);
        if found.is_none() {
            let why = format!("no PriorityClass with name {class_name} was found");
            return Err(forbidden(ctx, pod, Phase::Mutating, &why));
        }
        found
    };
    let (priority, policy) = match &class {
        Some(class) => (class.value, class.preemption_policy.as_str()),
        None => (0, DEFAULT_PREEMPTION_POLICY),
    };
    if let Some(given) = pod["spec"]["priority"].as_i64().filter(|given| *given != priority) {
        let why = format!(
            "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
        );
        return Err(forbidden(ctx, pod, Phase::Mutating, &why));
    }
    let given_policy = text(pod, "/spec/preemptionPolicy");
    if !given_policy.is_empty() && given_policy != policy {
        let why = format!(
            "the string value of PreemptionPolicy ({given_policy}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"
        );
        return Err(forbidden(ctx, pod, Phase::Mutating, &why));
    }
    let spec = spec_mut(pod);
    if let Some(class) = &class
        && class_name.is_empty()
    {
        spec["priorityClassName"] = json!(class.name);
    }
    spec["priority"] = json!(priority);
    spec["preemptionPolicy"] = json!(policy);
    Ok(())
}

/// The validating half (`validatePriorityClass`): a class marked `globalDefault` is refused
/// while another one is the default.
pub(super) fn validate(ctx: &AdmissionContext<'_>, class: &Value, txn: &Txn<'_>) -> ApiResult<()> {
    let resource = ctx.resource;
    if resource.group != "scheduling.k8s.io" || resource.plural != "priorityclasses" || ctx.subresource.is_some() {
        return Ok(());
    }
    if class["globalDefault"].as_bool() != Some(true) {
        return Ok(());
    }
    match default_class(txn) {
        Some(current) if ctx.operation == Operation::Create || current.name != text(class, "/metadata/name") => {
            let why = format!("PriorityClass {} is marked as default. Only one default can exist", current.name);
            Err(forbidden(ctx, class, Phase::Validating, &why))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::*;
    use crate::sandbox::storage::store::Store;

    fn store_with_classes() -> Store {
        let store = Store::default();
        namespace_default_sa(&store, "team");
        seed(
            &store,
            "priorityclasses",
            vec![
                json!({"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "Never"}),
                json!({"metadata": {"name": "low"}, "value": 10}),
            ],
        );
        store
    }

    #[test]
    fn priority_comes_from_the_class() {
        let store = store_with_classes();
        let mut p = pod("team", "p");
        p["spec"]["priorityClassName"] = json!("high");
        let stored = create(&store, "", "pods", "team", p).unwrap();
        assert_eq!(stored["spec"]["priority"], 1000);
        assert_eq!(stored["spec"]["preemptionPolicy"], "Never");

        let mut critical = pod("team", "c");
        critical["spec"]["priorityClassName"] = json!("system-node-critical");
        let stored = create(&store, "", "pods", "team", critical).unwrap();
        assert_eq!(stored["spec"]["priority"], 2_000_001_000);
        assert_eq!(stored["spec"]["preemptionPolicy"], "PreemptLowerPriority");

        let stored = create(&store, "", "pods", "team", pod("team", "plain")).unwrap();
        assert_eq!(stored["spec"]["priority"], 0);
        assert!(stored["spec"]["priorityClassName"].is_null());
    }

    #[test]
    fn unknown_class_and_mismatched_priority_are_refused() {
        let store = store_with_classes();
        let mut p = pod("team", "p");
        p["spec"]["priorityClassName"] = json!("nope");
        let err = create(&store, "", "pods", "team", p).unwrap_err();
        assert_eq!(
            (err.code, err.message()),
            (403, "pods \"p\" is forbidden: no PriorityClass with name nope was found")
        );

        let mut p = pod("team", "p");
        p["spec"]["priorityClassName"] = json!("low");
        p["spec"]["priority"] = json!(5);
        let err = create(&store, "", "pods", "team", p).unwrap_err();
        assert_eq!(
            err.message(),
            "pods \"p\" is forbidden: the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 10 from the given PriorityClass name"
        );
    }

    #[test]
    fn the_global_default_applies_and_is_unique() {
        let store = store_with_classes();
        let default = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "normal"}, "value": 100, "globalDefault": true});
        create(&store, "scheduling.k8s.io", "priorityclasses", "", default).unwrap();
        let stored = create(&store, "", "pods", "team", pod("team", "p")).unwrap();
        assert_eq!(stored["spec"]["priorityClassName"], "normal");
        assert_eq!(stored["spec"]["priority"], 100);

        let second = json!({"metadata": {"name": "other"}, "value": 1, "globalDefault": true});
        let err = create(&store, "scheduling.k8s.io", "priorityclasses", "", second).unwrap_err();
        assert_eq!(
            err.message(),
            "priorityclasses.scheduling.k8s.io \"other\" is forbidden: PriorityClass normal is marked as default. Only one default can exist"
        );
    }

    #[test]
    fn updates_keep_the_priority() {
        let store = store_with_classes();
        create(&store, "", "pods", "team", pod("team", "p")).unwrap();
        let mut changed = pod("team", "p");
        changed["metadata"]["labels"] = json!({"a": "b"});
        let stored = update(&store, "", "pods", changed).unwrap();
        assert_eq!(stored["spec"]["priority"], 0);
        assert_eq!(stored["spec"]["preemptionPolicy"], "PreemptLowerPriority");
    }
}
