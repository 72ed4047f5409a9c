//! LimitRanger (`plugin/pkg/admission/limitranger`): the namespace's LimitRanges give new
//! pods' containers default requests and limits, and bound what pods (on create) and
//! persistent volume claims (on create and update) may ask for.

use std::sync::Arc;

use serde_json::Value;

use super::resource_list::{self, ResourceList};
use super::{AdmissionContext, Operation, Phase, forbidden, items, text};
use crate::quantity::{Quantity, common_precision, fits_milli};
use crate::sandbox::apiserver::status::ApiResult;
use crate::sandbox::storage::objects::{is_deleting, metadata_mut};
use crate::sandbox::storage::store::Txn;

const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// Which requests the plugin looks at (`SupportsAttributes`, and objects being deleted are let be).
fn applies(ctx: &AdmissionContext<'_>) -> bool {
    let kind_applies =
        (ctx.is_core("pods") && ctx.operation == Operation::Create) || ctx.is_core("persistentvolumeclaims");
    kind_applies && !ctx.old.is_some_and(is_deleting)
}

fn limit_ranges(ctx: &AdmissionContext<'_>, txn: &Txn<'_>) -> Vec<Arc<Value>> {
    txn.list("limitranges", Some(ctx.namespace))
}

/// One `spec.limits[]` entry, with LimitRange defaulting applied (`SetDefaults_LimitRangeItem`:
/// a Container item's default limit falls back to its max, and its default request to the
/// default limit, then to its min), so that stored objects need not have been defaulted.
struct LimitItem {
    kind: String,
    min: ResourceList,
    max: ResourceList,
    ratio: ResourceList,
    default: ResourceList,
    default_request: ResourceList,
}

impl LimitItem {
    fn from_json(item: &Value) -> LimitItem {
        let list = |field: &str| resource_list::parse(&item[field]);
        let kind = text(item, "/type").to_string();
        let (min, max) = (list("min"), list("max"));
        let mut default = list("default");
        let mut default_request = list("defaultRequest");
        if kind == "Container" {
            for (name, q) in &max {
                default.entry(name.clone()).or_insert(*q);
            }
            for (name, q) in default.iter().chain(&min) {
                default_request.entry(name.clone()).or_insert(*q);
            }
        }
        LimitItem { kind, min, max, ratio: list("maxLimitRequestRatio"), default, default_request }
    }
}

fn limit_items(limit_range: &Value) -> Vec<LimitItem> {
    items(limit_range, "/spec/limits").iter().map(LimitItem::from_json).collect()
}

/// The mutating half (`PodMutateLimitFunc`): containers get the defaults they lack; the pod is
/// annotated with what was set (by the last LimitRange that set anything, as upstream).
pub(super) fn admit(ctx: &AdmissionContext<'_>, pod: &mut Value, txn: &Txn<'_>) -> ApiResult<()> {
    if !applies(ctx) || !ctx.is_core("pods") {
        return Ok(());
    }
    for limit_range in limit_ranges(ctx, txn) {
        let (mut limits, mut requests) = (ResourceList::new(), ResourceList::new());
        for item in limit_items(&limit_range).into_iter().filter(|i| i.kind == "Container") {
            limits.extend(item.default);
            requests.extend(item.default_request);
        }
        let mut notes = Vec::new();
        for (list, label) in [("containers", "container"), ("initContainers", "init container")] {
            let Some(containers) = pod["spec"].get_mut(list).and_then(Value::as_array_mut) else { continue };
            for container in containers.iter_mut().filter(|c| c.is_object()) {
                let name = text(container, "/name").to_string();
                let set_requests = merge_defaults(container, "requests", &requests);
                let set_limits = merge_defaults(container, "limits", &limits);
                if !set_requests.is_empty() {
                    notes.push(format!("{} request for {label} {name}", set_requests.join(", ")));
                }
                if !set_limits.is_empty() {
                    notes.push(format!("{} limit for {label} {name}", set_limits.join(", ")));
                }
            }
        }
        if !notes.is_empty() {
            let meta = metadata_mut(pod);
            let annotations = meta.entry("annotations").or_insert_with(|| Value::Object(Default::default()));
            if !annotations.is_object() {
                *annotations = Value::Object(Default::default());
            }
            annotations[ANNOTATION] = format!("LimitRanger plugin set: {}", notes.join("; ")).into();
        }
    }
    Ok(())
}

/// Sets each default the container's `resources.<field>` lacks; returns their names, sorted.
fn merge_defaults(container: &mut Value, field: &str, defaults: &ResourceList) -> Vec<String> {
    let present = resource_list::container_resources(container, field);
    let missing: Vec<(&String, &Quantity)> = defaults.iter().filter(|(name, _)| !present.contains_key(*name)).collect();
    if missing.is_empty() {
        return Vec::new();
    }
    if !container["resources"].is_object() {
        container["resources"] = Value::Object(Default::default());
    }
    if !container["resources"][field].is_object() {
        container["resources"][field] = Value::Object(Default::default());
    }
    for (name, q) in &missing {
        container["resources"][field][name.as_str()] = q.canonical().into();
    }
    missing.into_iter().map(|(name, _)| name.clone()).collect()
}

/// The validating half (`PodValidateLimitFunc`, `PersistentVolumeClaimValidateLimitFunc`):
/// the first LimitRange that the object breaks refuses it, listing every breach.
pub(super) fn validate(ctx: &AdmissionContext<'_>, object: &Value, txn: &Txn<'_>) -> ApiResult<()> {
    if !applies(ctx) {
        return Ok(());
    }
    for limit_range in limit_ranges(ctx, txn) {
        let items = limit_items(&limit_range);
        let errors = if ctx.is_core("pods") { pod_breaches(&items, object) } else { claim_breaches(&items, object) };
        if !errors.is_empty() {
            return Err(forbidden(ctx, object, Phase::Validating, &aggregate(errors)));
        }
    }
    Ok(())
}

fn pod_breaches(items: &[LimitItem], pod: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    for item in items {
        match item.kind.as_str() {
            "Container" => {
                for list in ["containers", "initContainers"] {
                    for container in pod["spec"][list].as_array().into_iter().flatten() {
                        let requests = resource_list::container_resources(container, "requests");
                        let limits = resource_list::container_resources(container, "limits");
                        check_item(item, &requests, &limits, &mut errors);
                    }
                }
            }
            "Pod" => {
                let requests = resource_list::aggregate_containers(pod, "requests");
                let limits = resource_list::aggregate_containers(pod, "limits");
                check_item(item, &requests, &limits, &mut errors);
            }
            _ => {}
        }
    }
    errors
}

/// Claims: min against the requests, max against the requests only (`maxRequestConstraint`).
fn claim_breaches(items: &[LimitItem], claim: &Value) -> Vec<String> {
    let requests = resource_list::parse(&claim["spec"]["resources"]["requests"]);
    let mut errors = Vec::new();
    for item in items.iter().filter(|i| i.kind == "PersistentVolumeClaim") {
        for (name, enforced) in &item.min {
            errors.extend(min_breach(&item.kind, name, enforced, &requests, &ResourceList::new()));
        }
        for (name, enforced) in &item.max {
            let kind = &item.kind;
            match requests.get(name) {
                None => errors.push(format!("maximum {name} usage per {kind} is {enforced}.  No request is specified")),
                Some(req) => {
                    let (req_value, _, enforced_value) = common_precision(req, &Quantity::zero(), enforced);
                    if req_value > enforced_value {
                        errors.push(format!("maximum {name} usage per {kind} is {enforced}, but request is {req}"));
                    }
                }
            }
        }
    }
    errors
}

fn check_item(item: &LimitItem, requests: &ResourceList, limits: &ResourceList, errors: &mut Vec<String>) {
    let kind = &item.kind;
    for (name, enforced) in &item.min {
        errors.extend(min_breach(kind, name, enforced, requests, limits));
    }
    for (name, enforced) in &item.max {
        errors.extend(max_breach(kind, name, enforced, requests, limits));
    }
    for (name, enforced) in &item.ratio {
        errors.extend(ratio_breach(kind, name, enforced, requests, limits));
    }
}

/// `minConstraint`.
fn min_breach(
    kind: &str,
    name: &str,
    enforced: &Quantity,
    requests: &ResourceList,
    limits: &ResourceList,
) -> Option<String> {
    let zero = Quantity::zero();
    let (req, lim) = (requests.get(name), limits.get(name));
    let (req_value, lim_value, enforced_value) = common_precision(req.unwrap_or(&zero), lim.unwrap_or(&zero), enforced);
    match (req, lim) {
        (None, _) => Some(format!("minimum {name} usage per {kind} is {enforced}.  No request is specified")),
        (Some(req), _) if req_value < enforced_value => {
            Some(format!("minimum {name} usage per {kind} is {enforced}, but request is {req}"))
        }
        (_, Some(lim)) if lim_value < enforced_value => {
            Some(format!("minimum {name} usage per {kind} is {enforced}, but limit is {lim}"))
        }
        _ => None,
    }
}

/// `maxConstraint`.
fn max_breach(
    kind: &str,
    name: &str,
    enforced: &Quantity,
    requests: &ResourceList,
    limits: &ResourceList,
) -> Option<String> {
    let zero = Quantity::zero();
    let (req, lim) = (requests.get(name), limits.get(name));
    let (req_value, lim_value, enforced_value) = common_precision(req.unwrap_or(&zero), lim.unwrap_or(&zero), enforced);
    match (req, lim) {
        (_, None) => Some(format!("maximum {name} usage per {kind} is {enforced}.  No limit is specified")),
        (_, Some(lim)) if lim_value > enforced_value => {
            Some(format!("maximum {name} usage per {kind} is {enforced}, but limit is {lim}"))
        }
        (Some(req), _) if req_value > enforced_value => {
            Some(format!("maximum {name} usage per {kind} is {enforced}, but request is {req}"))
        }
        _ => None,
    }
}

/// `limitRequestRatioConstraint`.
fn ratio_breach(
    kind: &str,
    name: &str,
    enforced: &Quantity,
    requests: &ResourceList,
    limits: &ResourceList,
) -> Option<String> {
    let zero = Quantity::zero();
    let (req, lim) = (requests.get(name), limits.get(name));
    let (req_value, lim_value, _) = common_precision(req.unwrap_or(&zero), lim.unwrap_or(&zero), enforced);
    if req.is_none() || req_value == 0 {
        return Some(format!(
            "{name} max limit to request ratio per {kind} is {enforced}, but no request is specified or request is 0"
        ));
    }
    if lim.is_none() || lim_value == 0 {
        return Some(format!(
            "{name} max limit to request ratio per {kind} is {enforced}, but no limit is specified or limit is 0"
        ));
    }
    let observed = lim_value as f64 / req_value as f64;
    let (compared, allowed) = if fits_milli(enforced) {
        (observed * 1000.0, enforced.milli_value() as f64)
    } else {
        (observed, enforced.value() as f64)
    };
    (compared > allowed).then(|| {
        format!("{name} max limit to request ratio per {kind} is {enforced}, but provided ratio is {observed:.6}")
    })
}

/// `utilerrors.NewAggregate(...).Error()`: one message as is, several (deduplicated) in brackets.
fn aggregate(errors: Vec<String>) -> String {
    let mut unique: Vec<String> = Vec::new();
    for e in errors {
        if !unique.contains(&e) {
            unique.push(e);
        }
    }
    if unique.len() == 1 { unique.remove(0) } else { format!("[{}]", unique.join(", ")) }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::*;
    use crate::sandbox::storage::store::Store;

    fn store_with_limits(limits: serde_json::Value) -> Store {
        let store = Store::default();
        namespace_default_sa(&store, "team");
        seed(
            &store,
            "limitranges",
            vec![json!({"metadata": {"namespace": "team", "name": "limits"}, "spec": {"limits": limits}})],
        );
        store
    }

    #[test]
    fn container_defaults_are_applied_and_noted() {
        let store = store_with_limits(json!([{"type": "Container",
            "default": {"cpu": "500m", "memory": "256Mi"}, "defaultRequest": {"cpu": "100m"}}]));
        let mut p = pod("team", "p");
        p["spec"]["containers"][0]["resources"] = json!({"requests": {"memory": "64Mi"}});
        let stored = create(&store, "", "pods", "team", p).unwrap();
        assert_eq!(
            stored["spec"]["containers"][0]["resources"],
            json!({"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "64Mi"}})
        );
        assert_eq!(
            stored["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
            "LimitRanger plugin set: cpu request for container app; cpu, memory limit for container app"
        );
        // Without a default request, the default limit is the request too (LimitRange defaulting).
        let store = store_with_limits(json!([{"type": "Container", "default": {"memory": "1Gi"}}]));
        let stored = create(&store, "", "pods", "team", pod("team", "q")).unwrap();
        assert_eq!(
            stored["spec"]["containers"][0]["resources"],
            json!({"limits": {"memory": "1Gi"}, "requests": {"memory": "1Gi"}})
        );
    }

    #[test]
    fn max_and_min_are_enforced() {
        let store = store_with_limits(json!([{"type": "Container", "max": {"cpu": "1"}, "min": {"cpu": "100m"},
            "default": {"cpu": "1"}, "defaultRequest": {"cpu": "200m"}}]));
        let mut big = pod("team", "big");
        big["spec"]["containers"][0]["resources"] = json!({"limits": {"cpu": "2"}, "requests": {"cpu": "2"}});
        let err = create(&store, "", "pods", "team", big).unwrap_err();
        assert_eq!(err.code, 403);
        assert_eq!(err.message(), "pods \"big\" is forbidden: maximum cpu usage per Container is 1, but limit is 2");
        let mut small = pod("team", "small");
        small["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "50m"}});
        let err = create(&store, "", "pods", "team", small).unwrap_err();
        assert_eq!(
            err.message(),
            "pods \"small\" is forbidden: minimum cpu usage per Container is 100m, but request is 50m"
        );
        let fine = create(&store, "", "pods", "team", pod("team", "fine")).unwrap();
        assert_eq!(fine["spec"]["containers"][0]["resources"]["limits"]["cpu"], "1");
    }

    #[test]
    fn pod_totals_and_ratios_are_enforced() {
        let store = store_with_limits(json!([
            {"type": "Pod", "max": {"memory": "1Gi"}},
            {"type": "Container", "maxLimitRequestRatio": {"memory": "2"}},
        ]));
        let mut p = pod("team", "p");
        p["spec"]["containers"] = json!([
            {"name": "a", "resources": {"limits": {"memory": "768Mi"}, "requests": {"memory": "256Mi"}}},
            {"name": "b", "resources": {"limits": {"memory": "512Mi"}, "requests": {"memory": "512Mi"}}},
        ]);
        let err = create(&store, "", "pods", "team", p).unwrap_err();
        assert_eq!(
            err.message(),
            "pods \"p\" is forbidden: [maximum memory usage per Pod is 1Gi, but limit is 1280Mi, memory max limit to request ratio per Container is 2, but provided ratio is 3.000000]"
        );
    }

    #[test]
    fn claims_are_bounded() {
        let store = store_with_limits(json!([{"type": "PersistentVolumeClaim", "max": {"storage": "2Gi"}}]));
        let claim = json!({"metadata": {"namespace": "team", "name": "c"},
            "spec": {"resources": {"requests": {"storage": "5Gi"}}}});
        let err = create(&store, "", "persistentvolumeclaims", "team", claim).unwrap_err();
        assert_eq!(
            err.message(),
            "persistentvolumeclaims \"c\" is forbidden: maximum storage usage per PersistentVolumeClaim is 2Gi, but request is 5Gi"
        );
    }
}
