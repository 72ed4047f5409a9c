//! LimitRanger (`plugin/pkg/admission/limitranger`): the namespace's LimitRanges give new
//! pods' containers default requests and limits, and bound what pods (on create) and
//! persistent volume claims (on create and update) may ask for.

use std::sync::Arc;

use serde_json::Value;

use super::resource_list::{self, ResourceList};
use super::{AdmissionContext, Operation, Phase, forbidden, items, text};
use crate::apimachinery::errors::Aggregate;
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

/// A constraint of a LimitRange item that an object breaks (`minConstraint`, `maxConstraint`,
/// `limitRequestRatioConstraint`), in upstream's words.
#[derive(Debug, thiserror::Error)]
enum Breach {
    /// Below the minimum, or nothing to compare with it.
    #[error("minimum {name} usage per {kind} is {enforced}{found}")]
    Min {
        /// The resource.
        name: String,
        /// The item's type (Container, Pod, PersistentVolumeClaim).
        kind: String,
        /// The minimum.
        enforced: Quantity,
        /// What the object has.
        found: Found,
    },
    /// Above the maximum, or nothing to compare with it.
    #[error("maximum {name} usage per {kind} is {enforced}{found}")]
    Max {
        /// The resource.
        name: String,
        /// The item's type.
        kind: String,
        /// The maximum.
        enforced: Quantity,
        /// What the object has.
        found: Found,
    },
    /// A limit to request ratio above the maximum, or no ratio to compare.
    #[error("{name} max limit to request ratio per {kind} is {enforced}, but {found}")]
    Ratio {
        /// The resource.
        name: String,
        /// The item's type.
        kind: String,
        /// The maximum ratio.
        enforced: Quantity,
        /// What the object has.
        found: RatioFound,
    },
}

/// What a min or max constraint found, as the end of upstream's message.
#[derive(Debug)]
enum Found {
    NoRequest,
    NoLimit,
    Request(Quantity),
    Limit(Quantity),
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Found::NoRequest => f.write_str(".  No request is specified"),
            Found::NoLimit => f.write_str(".  No limit is specified"),
            Found::Request(req) => write!(f, ", but request is {req}"),
            Found::Limit(lim) => write!(f, ", but limit is {lim}"),
        }
    }
}

/// What a ratio constraint found, as the end of upstream's message.
#[derive(Debug)]
enum RatioFound {
    NoRequest,
    NoLimit,
    Ratio(f64),
}

impl std::fmt::Display for RatioFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RatioFound::NoRequest => f.write_str("no request is specified or request is 0"),
            RatioFound::NoLimit => f.write_str("no limit is specified or limit is 0"),
            RatioFound::Ratio(observed) => write!(f, "provided ratio is {observed:.6}"),
        }
    }
}

/// The validating half (`PodValidateLimitFunc`, `PersistentVolumeClaimValidateLimitFunc`):
/// the first LimitRange that the object breaks refuses it, listing every breach.
pub(super) fn validate(ctx: &AdmissionContext<'_>, object: &Value, txn: &Txn<'_>) -> ApiResult<()> {
    if !applies(ctx) {
        return Ok(());
    }
    for limit_range in limit_ranges(ctx, txn) {
        let items = limit_items(&limit_range);
        let breaches = if ctx.is_core("pods") { pod_breaches(&items, object) } else { claim_breaches(&items, object) };
        if let Err(aggregate) = Aggregate::from_errors(breaches) {
            return Err(forbidden(ctx, object, Phase::Validating, &aggregate.to_string()));
        }
    }
    Ok(())
}

fn pod_breaches(items: &[LimitItem], pod: &Value) -> Vec<Breach> {
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
fn claim_breaches(items: &[LimitItem], claim: &Value) -> Vec<Breach> {
    let requests = resource_list::parse(&claim["spec"]["resources"]["requests"]);
    let mut errors = Vec::new();
    for item in items.iter().filter(|i| i.kind == "PersistentVolumeClaim") {
        for (name, enforced) in &item.min {
            errors.extend(min_breach(&item.kind, name, enforced, &requests, &ResourceList::new()));
        }
        for (name, enforced) in &item.max {
            let found = match requests.get(name) {
                None => Some(Found::NoRequest),
                Some(req) => {
                    let (req_value, _, enforced_value) = common_precision(req, &Quantity::zero(), enforced);
                    (req_value > enforced_value).then_some(Found::Request(*req))
                }
            };
            errors.extend(found.map(|found| Breach::Max {
                name: name.clone(),
                kind: item.kind.clone(),
                enforced: *enforced,
                found,
            }));
        }
    }
    errors
}

fn check_item(item: &LimitItem, requests: &ResourceList, limits: &ResourceList, errors: &mut Vec<Breach>) {
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
) -> Option<Breach> {
    let zero = Quantity::zero();
    let (req, lim) = (requests.get(name), limits.get(name));
    let (req_value, lim_value, enforced_value) = common_precision(req.unwrap_or(&zero), lim.unwrap_or(&zero), enforced);
    let found = match (req, lim) {
        (None, _) => Found::NoRequest,
        (Some(req), _) if req_value < enforced_value => Found::Request(*req),
        (_, Some(lim)) if lim_value < enforced_value => Found::Limit(*lim),
        _ => return None,
    };
    Some(Breach::Min { name: name.to_string(), kind: kind.to_string(), enforced: *enforced, found })
}

/// `maxConstraint`.
fn max_breach(
    kind: &str,
    name: &str,
    enforced: &Quantity,
    requests: &ResourceList,
    limits: &ResourceList,
) -> Option<Breach> {
    let zero = Quantity::zero();
    let (req, lim) = (requests.get(name), limits.get(name));
    let (req_value, lim_value, enforced_value) = common_precision(req.unwrap_or(&zero), lim.unwrap_or(&zero), enforced);
    let found = match (req, lim) {
        (_, None) => Found::NoLimit,
        (_, Some(lim)) if lim_value > enforced_value => Found::Limit(*lim),
        (Some(req), _) if req_value > enforced_value => Found::Request(*req),
        _ => return None,
    };
    Some(Breach::Max { name: name.to_string(), kind: kind.to_string(), enforced: *enforced, found })
}

/// `limitRequestRatioConstraint`.
fn ratio_breach(
    kind: &str,
    name: &str,
    enforced: &Quantity,
    requests: &ResourceList,
    limits: &ResourceList,
) -> Option<Breach> {
    let zero = Quantity::zero();
    let (req, lim) = (requests.get(name), limits.get(name));
    let (req_value, lim_value, _) = common_precision(req.unwrap_or(&zero), lim.unwrap_or(&zero), enforced);
    let breach = |found| Breach::Ratio { name: name.to_string(), kind: kind.to_string(), enforced: *enforced, found };
    if req.is_none() || req_value == 0 {
        return Some(breach(RatioFound::NoRequest));
    }
    if lim.is_none() || lim_value == 0 {
        return Some(breach(RatioFound::NoLimit));
    }
    let observed = lim_value as f64 / req_value as f64;
    let (compared, allowed) = if fits_milli(enforced) {
        (observed * 1000.0, enforced.milli_value() as f64)
    } else {
        (observed, enforced.value() as f64)
    };
    (compared > allowed).then(|| breach(RatioFound::Ratio(observed)))
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
