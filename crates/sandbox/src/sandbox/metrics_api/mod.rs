//! The metrics APIs the horizontal-pod-autoscaler reads — `metrics.k8s.io/v1beta1` (as
//! metrics-server serves it), `custom.metrics.k8s.io/v1beta2` and
//! `external.metrics.k8s.io/v1beta1` (as the custom-metrics adapters do) — computed from the
//! objects in an API server through a [`Source`]. The sandbox serves them in-process over its
//! store; `kcm_envtest::envtest` serves them as an aggregated API over a real kube-apiserver. The rules
//! are in [`usage`] and in docs/sandbox.md, "Metrics APIs".

pub mod usage;

use serde_json::{Value, json};

use self::usage::{Usage, annotated_quantity, container_usage, is_running, pod_key, service_shares};
use crate::apimachinery::errors::BoxError;
use crate::apimachinery::labels::Selector;

/// metrics-server's group.
pub const METRICS_GROUP: &str = "metrics.k8s.io";
/// The custom-metrics adapters' group.
pub const CUSTOM_GROUP: &str = "custom.metrics.k8s.io";
/// The external-metrics adapters' group.
pub const EXTERNAL_GROUP: &str = "external.metrics.k8s.io";
/// The groups and versions served, in the order kube-apiserver lists aggregated APIs.
pub const GROUPS: [(&str, &str); 3] =
    [(METRICS_GROUP, "v1beta1"), (CUSTOM_GROUP, "v1beta2"), (EXTERNAL_GROUP, "v1beta1")];
/// The ConfigMap holding a namespace's external metrics.
pub const EXTERNAL_CONFIGMAP: &str = "kcm-sandbox-external-metrics";
/// metrics-server's reporting window, `window` of every PodMetrics and NodeMetrics.
const WINDOW_SECONDS: i64 = 15;

/// Why a metrics request failed: the [`Source`] did (answered as a 500 with its text).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the objects failed.
    #[error(transparent)]
    Source(#[from] BoxError),
}

/// Where the objects come from. Errors are any error (Go's `error`), answered as 500s with
/// their text.
pub trait Source {
    /// The pods of a namespace, or of all namespaces.
    fn pods(&self, namespace: Option<&str>) -> Result<Vec<Value>, BoxError>;
    /// The Services of a namespace, or of all namespaces.
    fn services(&self, namespace: Option<&str>) -> Result<Vec<Value>, BoxError>;
    /// All nodes.
    fn nodes(&self) -> Result<Vec<Value>, BoxError>;
    /// A namespaced object by group, plural and name (`None` when it does not exist or the
    /// resource is not served).
    fn object(&self, namespace: &str, group: &str, plural: &str, name: &str) -> Result<Option<Value>, BoxError>;
}

/// An answer: status code and JSON body.
pub type Answer = (u16, Value);

/// Answers a GET under one of [`GROUPS`] (discovery included); `None` for other paths.
pub fn answer(path: &str, query: &[(String, String)], source: &dyn Source, now: jiff::Timestamp) -> Option<Answer> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let ["apis", group, rest @ ..] = segments.as_slice() else { return None };
    let (group, version) = GROUPS.iter().find(|(g, _)| g == group).copied()?;
    let request = Query { query, now };
    let answer = match rest {
        [] => Ok((200, api_group(group, version))),
        [v, ..] if *v != version => Ok(not_found_page()),
        [_] => Ok((200, resource_list(group, version))),
        [_, tail @ ..] => match group {
            METRICS_GROUP => resource_metrics(tail, &request, source),
            CUSTOM_GROUP => custom_metrics(tail, &request, source),
            _ => external_metrics(tail, &request, source),
        },
    };
    Some(answer.unwrap_or_else(|error| status(500, "InternalError", &error.to_string(), None)))
}

struct Query<'a> {
    query: &'a [(String, String)],
    now: jiff::Timestamp,
}

impl Query<'_> {
    fn param(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The `labelSelector`; a malformed one is a 400 as kube-apiserver's.
    fn selector(&self) -> Result<Selector, Answer> {
        match self.param("labelSelector").filter(|s| !s.is_empty()) {
            None => Ok(Selector::everything()),
            Some(text) => Selector::parse(text).map_err(|e| status(400, "BadRequest", &e.to_string(), None)),
        }
    }

    fn timestamp(&self) -> String {
        self.now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    }
}

/// `metav1.Status` of a failure.
fn status(code: u16, reason: &str, message: &str, details: Option<Value>) -> Answer {
    let mut body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code});
    if let Some(details) = details {
        body["details"] = details;
    }
    (code, body)
}

fn not_found_page() -> Answer {
    status(404, "NotFound", "the server could not find the requested resource", Some(json!({})))
}

fn not_found(group: &str, plural: &str, name: &str) -> Answer {
    let qualified = if group.is_empty() { plural.to_string() } else { format!("{plural}.{group}") };
    let message = format!("{qualified} \"{name}\" not found");
    status(404, "NotFound", &message, Some(json!({"name": name, "group": group, "kind": plural})))
}

/// `/apis/<group>`.
pub fn api_group(group: &str, version: &str) -> Value {
    let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
    json!({"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": [gv.clone()], "preferredVersion": gv})
}

/// `/apis/<group>/<version>`: metrics-server's two resources; the adapters list their
/// metrics, which here are whatever is annotated, so none are listed.
pub fn resource_list(group: &str, version: &str) -> Value {
    let resources = if group == METRICS_GROUP {
        json!([
            {"name": "nodes", "singularName": "", "namespaced": false, "kind": "NodeMetrics", "verbs": ["get", "list"]},
            {"name": "pods", "singularName": "", "namespaced": true, "kind": "PodMetrics", "verbs": ["get", "list"]},
        ])
    } else {
        json!([])
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{group}/{version}"), "resources": resources})
}

/// The group's entry in an aggregated discovery (`apidiscovery.k8s.io/v2`) list.
pub fn aggregated_discovery_item(group: &str, version: &str) -> Value {
    let resources: Vec<Value> = resource_list(group, version)["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            json!({
                "resource": r["name"],
                "responseKind": {"group": group, "version": version, "kind": r["kind"]},
                "scope": if r["namespaced"] == true { "Namespaced" } else { "Cluster" },
                "singularResource": "",
                "verbs": r["verbs"],
            })
        })
        .collect();
    json!({
        "metadata": {"name": group},
        "versions": [{"version": version, "resources": resources, "freshness": "Current"}],
    })
}

// ---- metrics.k8s.io --------------------------------------------------------------------

fn resource_metrics(tail: &[&str], request: &Query<'_>, source: &dyn Source) -> Result<Answer, Error> {
    match tail {
        ["pods"] => pod_metrics(None, None, request, source),
        ["namespaces", ns, "pods"] => pod_metrics(Some(ns), None, request, source),
        ["namespaces", ns, "pods", name] => pod_metrics(Some(ns), Some(name), request, source),
        ["nodes"] => node_metrics(None, request, source),
        ["nodes", name] => node_metrics(Some(name), request, source),
        _ => Ok(not_found_page()),
    }
}

/// A running pod and its containers' usage.
type PodUsage = (Value, Vec<(String, Usage)>);

/// The pods, and every running one's containers' usage.
fn pods_and_usage(namespace: Option<&str>, source: &dyn Source) -> Result<(Vec<Value>, Vec<PodUsage>), Error> {
    let pods = source.pods(namespace)?;
    let running: Vec<Value> = pods.iter().filter(|p| is_running(p)).cloned().collect();
    let shares = service_shares(&running, &source.services(namespace)?);
    let usage = running
        .into_iter()
        .map(|pod| {
            let share = shares.get(&pod_key(&pod)).copied().unwrap_or_default();
            let containers = container_usage(&pod, share);
            (pod, containers)
        })
        .collect();
    Ok((pods, usage))
}

fn pod_metrics(
    ns: Option<&str>,
    name: Option<&str>,
    request: &Query<'_>,
    source: &dyn Source,
) -> Result<Answer, Error> {
    let selector = match request.selector() {
        Ok(selector) => selector,
        Err(answer) => return Ok(answer),
    };
    let item = |pod: &Value, containers: &[(String, Usage)]| {
        let containers: Vec<Value> =
            containers.iter().map(|(name, usage)| json!({"name": name, "usage": usage.to_json()})).collect();
        let meta = &pod["metadata"];
        json!({
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "creationTimestamp": request.timestamp(),
                "labels": meta.get("labels").cloned().unwrap_or_else(|| json!({}))},
            "timestamp": request.timestamp(),
            "window": format!("{WINDOW_SECONDS}s"),
            "containers": containers,
        })
    };
    let (pods, usage) = pods_and_usage(ns, source)?;
    if let Some(name) = name {
        // metrics-server: no such pod is the pods resource's NotFound, a pod without metrics
        // its own.
        let key = format!("{}/{name}", ns.unwrap_or_default());
        if !pods.iter().any(|pod| pod["metadata"]["name"] == name) {
            return Ok(not_found("", "pods", &key));
        }
        let found = usage.iter().find(|(pod, _)| pod["metadata"]["name"] == name);
        return Ok(match found {
            Some((pod, containers)) => {
                let mut body = item(pod, containers);
                body["kind"] = "PodMetrics".into();
                body["apiVersion"] = "metrics.k8s.io/v1beta1".into();
                (200, body)
            }
            None => not_found(METRICS_GROUP, "pods", &key),
        });
    }
    let items: Vec<Value> = usage
        .iter()
        .filter(|(pod, _)| selector.matches_object(pod))
        .map(|(pod, containers)| item(pod, containers))
        .collect();
    Ok((200, json!({"kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {}, "items": items})))
}

fn node_metrics(name: Option<&str>, request: &Query<'_>, source: &dyn Source) -> Result<Answer, Error> {
    let selector = match request.selector() {
        Ok(selector) => selector,
        Err(answer) => return Ok(answer),
    };
    let (_, usage) = pods_and_usage(None, source)?;
    let node_usage = |node: &str| {
        usage
            .iter()
            .filter(|(pod, _)| pod["spec"]["nodeName"] == node)
            .flat_map(|(_, containers)| containers.iter().map(|(_, u)| *u))
            .fold(Usage::default(), |sum, usage| sum + usage)
    };
    let item = |node: &Value| {
        let meta = &node["metadata"];
        json!({
            "metadata": {"name": meta["name"], "creationTimestamp": request.timestamp(),
                "labels": meta.get("labels").cloned().unwrap_or_else(|| json!({}))},
            "timestamp": request.timestamp(),
            "window": format!("{WINDOW_SECONDS}s"),
            "usage": node_usage(meta["name"].as_str().unwrap_or_default()).to_json(),
        })
    };
    let nodes = source.nodes()?;
    if let Some(name) = name {
        return Ok(match nodes.iter().find(|n| n["metadata"]["name"] == name) {
            Some(node) => {
                let mut body = item(node);
                body["kind"] = "NodeMetrics".into();
                body["apiVersion"] = "metrics.k8s.io/v1beta1".into();
                (200, body)
            }
            // The node lister's NotFound, as metrics-server returns it.
            None => not_found("", "node", name),
        });
    }
    let items: Vec<Value> = nodes.iter().filter(|n| selector.matches_object(n)).map(item).collect();
    Ok((
        200,
        json!({"kind": "NodeMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {}, "items": items}),
    ))
}

// ---- custom.metrics.k8s.io -------------------------------------------------------------

fn custom_metrics(tail: &[&str], request: &Query<'_>, source: &dyn Source) -> Result<Answer, Error> {
    let ["namespaces", ns, resource, name, metric] = tail else { return Ok(not_found_page()) };
    let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
    let list = |items: Vec<Value>| {
        (
            200,
            json!({"kind": "MetricValueList", "apiVersion": "custom.metrics.k8s.io/v1beta2", "metadata": {}, "items": items}),
        )
    };
    let key = format!("metric.{metric}");
    if *name == "*" {
        if !(plural == "pods" && group.is_empty()) {
            return Ok(not_found_page());
        }
        let selector = match request.selector() {
            Ok(selector) => selector,
            Err(answer) => return Ok(answer),
        };
        let items = source
            .pods(Some(ns))?
            .iter()
            .filter(|pod| selector.matches_object(pod))
            .filter_map(|pod| Some(metric_value(pod, metric, annotated_quantity(pod, &key)?, request)))
            .collect();
        return Ok(list(items));
    }
    let Some(object) = source.object(ns, group, plural, name)? else {
        return Ok(not_found(group, plural, name));
    };
    Ok(match annotated_quantity(&object, &key) {
        Some(value) => list(vec![metric_value(&object, metric, value, request)]),
        None => {
            let message = format!(
                "the server could not find the metric {metric} for {resource} {name} (no annotation kcm-sandbox.dev/{key})"
            );
            status(404, "NotFound", &message, Some(json!({"name": name, "kind": resource})))
        }
    })
}

/// A v1beta2 `MetricValue` about `object`.
fn metric_value(object: &Value, metric: &str, value: crate::quantity::Quantity, request: &Query<'_>) -> Value {
    let meta = &object["metadata"];
    let mut described = json!({"kind": object["kind"], "namespace": meta["namespace"], "name": meta["name"],
        "apiVersion": object["apiVersion"]});
    if described["kind"].is_null() {
        described["kind"] = "Pod".into();
        described["apiVersion"] = "v1".into();
    }
    json!({
        "describedObject": described,
        "metric": {"name": metric},
        "timestamp": request.timestamp(),
        "windowSeconds": WINDOW_SECONDS,
        "value": value.canonical(),
    })
}

// ---- external.metrics.k8s.io -----------------------------------------------------------

fn external_metrics(tail: &[&str], request: &Query<'_>, source: &dyn Source) -> Result<Answer, Error> {
    let ["namespaces", ns, metric] = tail else { return Ok(not_found_page()) };
    let selector = match request.selector() {
        Ok(selector) => selector,
        Err(answer) => return Ok(answer),
    };
    let config_map = source.object(ns, "", "configmaps", EXTERNAL_CONFIGMAP)?;
    let items: Vec<Value> = config_map
        .filter(|cm| selector.matches_object(cm))
        .and_then(|cm| {
            let value = crate::quantity::Quantity::parse(cm["data"][*metric].as_str()?.trim()).ok()?;
            Some(json!({
                "metricName": metric,
                "metricLabels": cm["metadata"].get("labels").cloned().unwrap_or_else(|| json!({})),
                "timestamp": request.timestamp(),
                "window": WINDOW_SECONDS,
                "value": value.canonical(),
            }))
        })
        .into_iter()
        .collect();
    Ok((
        200,
        json!({"kind": "ExternalMetricValueList", "apiVersion": "external.metrics.k8s.io/v1beta1", "metadata": {}, "items": items}),
    ))
}

#[cfg(test)]
mod tests;
