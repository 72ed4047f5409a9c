//! The pod evaluator (`pkg/quota/v1/evaluator/core/pods.go`) and the pod resource arithmetic
//! it relies on (`k8s.io/component-helpers/resource`: `PodRequests`, `PodLimits`).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodAffinityTerm};

use super::resources::{self, ResourceList, add_into, aggregate_containers, contains_prefix, from_api, max_into};
use super::scopes::{MatchError, ScopeRequirement};
use crate::quantity::Quantity;

/// `podObjectCountName`.
pub const OBJECT_COUNT_NAME: &str = "count/pods";
/// `podResources`: the quota names a pod is charged for.
pub const POD_RESOURCES: &[&str] = &[
    OBJECT_COUNT_NAME,
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
];
/// `podResourcePrefixes`.
const POD_RESOURCE_PREFIXES: &[&str] = &["hugepages-", "requests.hugepages-"];
/// `requestedResourcePrefixes`.
const REQUESTED_RESOURCE_PREFIXES: &[&str] = &["hugepages-"];
/// `validationSet`: a quota on one of these makes every container state it (a mistake upstream
/// keeps for compatibility).
const VALIDATION_SET: &[&str] = &["cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"];
/// `supportedPodLevelResources` (plus the hugepages prefix).
const POD_LEVEL_RESOURCES: &[&str] = &["cpu", "memory"];

/// `helper.IsNativeResource`: unprefixed, or in the `kubernetes.io/` namespace.
fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// `resourceapi.ResourceDeviceClassPrefix`: a device class's implicit extended resource name
/// (`deviceclass.resource.kubernetes.io/<class>`), native by its domain but quotable since v1.34.
pub const DEVICE_CLASS_RESOURCE_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// `isExtendedResourceNameForQuota`: `requests.<extended>`, including a device class's implicit
/// `requests.deviceclass.resource.kubernetes.io/<class>`.
pub fn is_extended_resource_name_for_quota(name: &str) -> bool {
    let implicit = name.strip_prefix("requests.").is_some_and(|n| n.starts_with(DEVICE_CLASS_RESOURCE_PREFIX));
    (!is_native_resource(name) || implicit) && name.starts_with("requests.")
}

/// `schedutil.IsDRAExtendedResourceName`: `helper.IsExtendedResourceName` (without the
/// qualified-name check validation already made) or a device class's implicit name.
fn is_extended_resource_name(name: &str) -> bool {
    (!is_native_resource(name) && !name.starts_with("requests.")) || name.starts_with(DEVICE_CLASS_RESOURCE_PREFIX)
}

/// `podEvaluator.MatchingResources`.
pub fn matching_resources(input: &[String]) -> Vec<String> {
    let known: Vec<String> = POD_RESOURCES.iter().map(|s| s.to_string()).collect();
    let mut result = resources::intersection(input, &known);
    for name in input {
        if contains_prefix(POD_RESOURCE_PREFIXES, name) || is_extended_resource_name_for_quota(name) {
            result.push(name.clone());
        }
    }
    result
}

/// `podMatchesScopeFunc`.
pub fn matches_scope(selector: &ScopeRequirement, pod: &Pod) -> Result<bool, MatchError> {
    let spec = pod.spec.as_ref();
    Ok(match selector.scope_name.as_str() {
        "Terminating" => is_terminating(pod),
        "NotTerminating" => !is_terminating(pod),
        "BestEffort" => is_best_effort(pod),
        "NotBestEffort" => !is_best_effort(pod),
        "PriorityClass" => {
            let class = spec.and_then(|s| s.priority_class_name.as_deref()).filter(|c| !c.is_empty());
            if selector.operator == "Exists" { class.is_some() } else { selector.matches_label(class)? }
        }
        "CrossNamespacePodAffinity" => uses_cross_namespace_pod_affinity(pod),
        _ => false,
    })
}

/// `isTerminating`: an active deadline makes a pod terminating.
pub fn is_terminating(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.active_deadline_seconds).is_some_and(|s| s >= 0)
}

/// `qos.GetPodQOS(pod) == BestEffort`: the status' class when set, else computed.
pub fn is_best_effort(pod: &Pod) -> bool {
    match pod.status.as_ref().and_then(|s| s.qos_class.as_deref()).filter(|c| !c.is_empty()) {
        Some(class) => class == "BestEffort",
        None => !has_positive_qos_resources(pod),
    }
}

/// Whether any request or limit of cpu or memory is positive (`ComputePodQOS`' BestEffort test,
/// with pod-level resources replacing the containers' when set).
fn has_positive_qos_resources(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else { return false };
    let positive = |list: Option<&BTreeMap<String, _>>| {
        let list = from_api(list);
        ["cpu", "memory"].iter().any(|r| list.get(*r).is_some_and(|q| *q > Quantity::zero()))
    };
    if is_pod_level_resources_set(pod) {
        let resources = spec.resources.as_ref();
        return positive(resources.and_then(|r| r.requests.as_ref()))
            || positive(resources.and_then(|r| r.limits.as_ref()));
    }
    let containers = spec.containers.iter().chain(spec.init_containers.iter().flatten());
    containers.into_iter().any(|c| {
        let resources = c.resources.as_ref();
        positive(resources.and_then(|r| r.requests.as_ref())) || positive(resources.and_then(|r| r.limits.as_ref()))
    })
}

fn crosses_namespaces(term: &PodAffinityTerm) -> bool {
    term.namespaces.as_ref().is_some_and(|n| !n.is_empty()) || term.namespace_selector.is_some()
}

/// `usesCrossNamespacePodAffinity`.
pub fn uses_cross_namespace_pod_affinity(pod: &Pod) -> bool {
    let Some(affinity) = pod.spec.as_ref().and_then(|s| s.affinity.as_ref()) else { return false };
    let terms = |required: Option<&Vec<PodAffinityTerm>>, preferred: Option<Vec<&PodAffinityTerm>>| {
        required.into_iter().flatten().any(crosses_namespaces)
            || preferred.into_iter().flatten().any(crosses_namespaces)
    };
    let affinity_crosses = affinity.pod_affinity.as_ref().is_some_and(|a| {
        let preferred = a.preferred_during_scheduling_ignored_during_execution.as_ref();
        terms(
            a.required_during_scheduling_ignored_during_execution.as_ref(),
            preferred.map(|p| p.iter().map(|w| &w.pod_affinity_term).collect()),
        )
    });
    let anti_affinity_crosses = affinity.pod_anti_affinity.as_ref().is_some_and(|a| {
        let preferred = a.preferred_during_scheduling_ignored_during_execution.as_ref();
        terms(
            a.required_during_scheduling_ignored_during_execution.as_ref(),
            preferred.map(|p| p.iter().map(|w| &w.pod_affinity_term).collect()),
        )
    });
    affinity_crosses || anti_affinity_crosses
}

/// `QuotaV1Pod`: terminal pods, and pods whose deletion grace period has run out at `now`
/// (stuck on a lost node, say), are not charged compute resources.
pub fn quota_v1_pod(pod: &Pod, now: jiff::Timestamp) -> bool {
    if matches!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Failed" | "Succeeded")) {
        return false;
    }
    let meta = &pod.metadata;
    if let (Some(deleted), Some(grace)) = (&meta.deletion_timestamp, meta.deletion_grace_period_seconds) {
        let deadline = deleted.0.as_second().saturating_add(grace);
        // `now.After(deletionTime + grace)`, at nanosecond precision.
        if now.as_second() > deadline
            || (now.as_second() == deadline && now.subsec_nanosecond() > deleted.0.subsec_nanosecond())
        {
            return false;
        }
    }
    true
}

/// `PodUsageFunc`: `count/pods` always; `pods` and compute resources while `QuotaV1Pod`.
/// `use_status_resources`: the InPlacePodVerticalScaling gate (resources the kubelet reports
/// count when larger).
pub fn usage(pod: &Pod, now: jiff::Timestamp, use_status_resources: bool) -> ResourceList {
    let result = ResourceList::from([(OBJECT_COUNT_NAME.to_string(), Quantity::from_units(1))]);
    if !quota_v1_pod(pod, now) {
        return result;
    }
    let requests = pod_requests(pod, use_status_resources);
    let limits = pod_limits(pod, use_status_resources);
    resources::add(&result, &compute_usage(&requests, &limits))
}

/// `podComputeUsageHelper`: quota names for requests and limits.
pub fn compute_usage(requests: &ResourceList, limits: &ResourceList) -> ResourceList {
    let mut result = ResourceList::from([("pods".to_string(), Quantity::from_units(1))]);
    for resource in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(q) = requests.get(resource) {
            result.insert(resource.to_string(), *q);
            result.insert(format!("requests.{resource}"), *q);
        }
        if let Some(q) = limits.get(resource) {
            result.insert(format!("limits.{resource}"), *q);
        }
    }
    for (name, q) in requests {
        if contains_prefix(REQUESTED_RESOURCE_PREFIXES, name) {
            result.insert(name.clone(), *q);
            result.insert(format!("requests.{name}"), *q);
        }
        if is_extended_resource_name(name) {
            result.insert(format!("requests.{name}"), *q);
        }
    }
    result
}

/// Containers that do not state a resource a quota on the pod requires (`podEvaluator.Constraints`'
/// error): for each resource, the names of the containers without it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must specify {}", missing_text(.missing))]
pub struct MissingResources {
    /// By resource, the containers (regular and init) that do not state it; never empty.
    pub missing: BTreeMap<String, BTreeSet<String>>,
}

/// `cpu for: a,b; memory for: a`.
fn missing_text(missing: &BTreeMap<String, BTreeSet<String>>) -> String {
    let parts: Vec<String> = missing
        .iter()
        .map(|(resource, names)| format!("{resource} for: {}", names.iter().cloned().collect::<Vec<_>>().join(",")))
        .collect();
    parts.join("; ")
}

/// `podEvaluator.Constraints`: a quota on cpu or memory makes every container state them.
pub fn constraints(required: &[String], pod: &Pod) -> Result<(), MissingResources> {
    let required: BTreeSet<&str> = required.iter().map(String::as_str).filter(|r| VALIDATION_SET.contains(r)).collect();
    let mut missing: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let spec = pod.spec.as_ref();
    let containers = spec.map(|s| s.containers.iter()).into_iter().flatten();
    let init_containers = spec.and_then(|s| s.init_containers.as_ref()).into_iter().flatten();
    for container in containers.chain(init_containers) {
        let resources = container.resources.as_ref();
        let usage = compute_usage(
            &from_api(resources.and_then(|r| r.requests.as_ref())),
            &from_api(resources.and_then(|r| r.limits.as_ref())),
        );
        for resource in required.iter().filter(|r| !usage.contains_key(**r)) {
            missing.entry(resource.to_string()).or_default().insert(container.name.clone());
        }
    }
    if missing.is_empty() { Ok(()) } else { Err(MissingResources { missing }) }
}

/// Statuses by container name, both kinds (`AggregateContainerRequests`' map).
fn statuses_by_name(pod: &Pod) -> BTreeMap<&str, &ContainerStatus> {
    let status = pod.status.as_ref();
    let regular = status.and_then(|s| s.container_statuses.as_ref()).into_iter().flatten();
    let init = status.and_then(|s| s.init_container_statuses.as_ref()).into_iter().flatten();
    regular.chain(init).map(|s| (s.name.as_str(), s)).collect()
}

/// `IsPodResizeInfeasible`.
fn is_resize_infeasible(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref()).into_iter().flatten();
    conditions
        .into_iter()
        .find(|c| c.type_ == "PodResizePending")
        .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"))
}

/// Requests or limits (`field`) of one container, with the kubelet's view when it reports one
/// (`determineContainerReqs` / `determineContainerLimits`).
fn container_list(pod: &Pod, container: &Container, status: Option<&&ContainerStatus>, field: Field) -> ResourceList {
    let resources = container.resources.as_ref();
    let own = from_api(match field {
        Field::Requests => resources.and_then(|r| r.requests.as_ref()),
        Field::Limits => resources.and_then(|r| r.limits.as_ref()),
    });
    let Some(status) = status.filter(|s| s.resources.is_some()) else { return own };
    let reported = status.resources.as_ref();
    let infeasible = is_resize_infeasible(pod);
    match field {
        Field::Requests => {
            let mut result = if infeasible { ResourceList::new() } else { own };
            max_into(&mut result, &from_api(reported.and_then(|r| r.requests.as_ref())));
            max_into(&mut result, &from_api(status.allocated_resources.as_ref()));
            result
        }
        Field::Limits => {
            let reported = from_api(reported.and_then(|r| r.limits.as_ref()));
            if infeasible {
                return reported;
            }
            let mut result = own;
            max_into(&mut result, &reported);
            result
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Requests,
    Limits,
}

/// `AggregateContainerRequests` / `AggregateContainerLimits`: containers add up; restartable
/// (sidecar) init containers add up too, other init containers only raise the total to what
/// each needs while it runs.
fn aggregate(pod: &Pod, field: Field, use_status_resources: bool) -> ResourceList {
    let Some(spec) = pod.spec.as_ref() else { return ResourceList::new() };
    let statuses = if use_status_resources { statuses_by_name(pod) } else { BTreeMap::new() };
    let app = spec.containers.iter().map(|c| container_list(pod, c, statuses.get(c.name.as_str()), field));
    let init = spec.init_containers.iter().flatten().map(|c| {
        let restartable = c.restart_policy.as_deref() == Some("Always");
        // Only sidecars' reported resources count: plain init containers have finished.
        let status = if restartable { statuses.get(c.name.as_str()) } else { None };
        (restartable, container_list(pod, c, status, field))
    });
    aggregate_containers(app, init)
}

fn is_pod_level_resource(name: &str) -> bool {
    POD_LEVEL_RESOURCES.contains(&name) || name.starts_with("hugepages-")
}

/// `IsPodLevelResourcesSet`: pod-level requests or limits of a supported resource.
fn is_pod_level_resources_set(pod: &Pod) -> bool {
    let resources = pod.spec.as_ref().and_then(|s| s.resources.as_ref());
    let lists = resources.into_iter().flat_map(|r| [r.requests.as_ref(), r.limits.as_ref()]);
    lists.flatten().any(|list| list.keys().any(|name| is_pod_level_resource(name)))
}

/// `IsPodLevelRequestsSet`: pod-level requests of a supported resource.
pub fn is_pod_level_requests_set(pod: &Pod) -> bool {
    let resources = pod.spec.as_ref().and_then(|s| s.resources.as_ref());
    let requests = resources.and_then(|r| r.requests.as_ref());
    requests.is_some_and(|list| list.keys().any(|name| is_pod_level_resource(name)))
}

/// Pod-level values of supported resources in one list (`requests` or `limits`).
fn pod_level(pod: &Pod, field: Field) -> ResourceList {
    let resources = pod.spec.as_ref().and_then(|s| s.resources.as_ref());
    let list = resources.and_then(|r| if field == Field::Requests { r.requests.as_ref() } else { r.limits.as_ref() });
    from_api(list).into_iter().filter(|(name, _)| is_pod_level_resource(name)).collect()
}

/// `PodRequests`: the containers' aggregate, pod-level requests where set, plus the overhead.
pub fn pod_requests(pod: &Pod, use_status_resources: bool) -> ResourceList {
    let mut requests = aggregate(pod, Field::Requests, use_status_resources);
    requests.extend(pod_level(pod, Field::Requests));
    add_into(&mut requests, &from_api(pod.spec.as_ref().and_then(|s| s.overhead.as_ref())));
    requests
}

/// `PodLimits`: the containers' aggregate, pod-level limits where set; the overhead adds to
/// the non-zero limits only.
pub fn pod_limits(pod: &Pod, use_status_resources: bool) -> ResourceList {
    let mut limits = aggregate(pod, Field::Limits, use_status_resources);
    if is_pod_level_resources_set(pod) {
        limits.extend(pod_level(pod, Field::Limits));
    }
    for (name, q) in from_api(pod.spec.as_ref().and_then(|s| s.overhead.as_ref())) {
        if let Some(limit) = limits.get_mut(&name).filter(|l| !l.is_zero()) {
            *limit = limit.add(&q);
        }
    }
    limits
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn pod(spec: Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec})).expect("a pod")
    }

    fn container(name: &str, requests: Value, limits: Value) -> Value {
        json!({"name": name, "image": "x", "resources": {"requests": requests, "limits": limits}})
    }

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::now()
    }

    fn names(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn usage_sums_requests_and_limits_exactly() {
        // upstream TestPodEvaluatorUsage "init container CPU" and friends, merged.
        let p = pod(json!({
            "containers": [
                container("a", json!({"cpu": "100m", "memory": "1.5Gi"}), json!({"cpu": "2", "memory": "2Gi"})),
                container("b", json!({"cpu": "0.9", "ephemeral-storage": "2e3", "hugepages-2Mi": "4Mi",
                    "example.com/dongle": "3"}), json!({})),
            ],
            "initContainers": [container("init", json!({"cpu": "500m"}), json!({}))],
        }));
        let usage = usage(&p, now(), true);
        assert_eq!(
            resources::pretty(&usage),
            "count/pods=1,cpu=1,ephemeral-storage=2e3,hugepages-2Mi=4Mi,limits.cpu=2,limits.memory=2Gi,memory=1536Mi,\
             pods=1,requests.cpu=1,requests.ephemeral-storage=2e3,requests.example.com/dongle=3,\
             requests.hugepages-2Mi=4Mi,requests.memory=1536Mi"
        );
    }

    #[test]
    fn sidecars_add_and_overhead_adds_to_set_limits() {
        let p = pod(json!({
            "containers": [container("a", json!({"cpu": "100m"}), json!({"cpu": "1"}))],
            "initContainers": [
                {"name": "side", "image": "x", "restartPolicy": "Always",
                 "resources": {"requests": {"cpu": "50m"}, "limits": {"memory": "0"}}},
                container("init", json!({"cpu": "1"}), json!({})),
            ],
            "overhead": {"cpu": "10m", "memory": "5Mi"},
        }));
        // max(100m + 50m, 1 + 50m) + 10m
        assert_eq!(pod_requests(&p, false)["cpu"].canonical(), "1060m");
        let limits = pod_limits(&p, false);
        assert_eq!(limits["cpu"].canonical(), "1010m");
        assert!(limits["memory"].is_zero(), "a zero limit gets no overhead");
    }

    #[test]
    fn reported_resources_count_when_larger() {
        let mut p = pod(json!({"containers": [container("a", json!({"cpu": "100m"}), json!({"cpu": "200m"}))]}));
        p.status = serde_json::from_value(json!({"containerStatuses": [{"name": "a", "image": "x", "imageID": "",
            "ready": true, "restartCount": 0,
            "resources": {"requests": {"cpu": "300m"}, "limits": {"cpu": "150m"}}}]}))
        .expect("a status");
        assert_eq!(pod_requests(&p, true)["cpu"].canonical(), "300m");
        assert_eq!(pod_limits(&p, true)["cpu"].canonical(), "200m");
        assert_eq!(pod_requests(&p, false)["cpu"].canonical(), "100m");
    }

    #[test]
    fn terminal_and_expired_pods_are_only_counted() {
        let mut p = pod(json!({"containers": [container("a", json!({"cpu": "1"}), json!({}))]}));
        p.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).expect("a status"));
        assert_eq!(resources::pretty(&usage(&p, now(), true)), "count/pods=1");
        p.status = Some(serde_json::from_value(json!({"phase": "Running"})).expect("a status"));
        let deleted = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(60);
        p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(deleted));
        p.metadata.deletion_grace_period_seconds = Some(30);
        assert!(!quota_v1_pod(&p, now()));
        p.metadata.deletion_grace_period_seconds = Some(3600);
        assert!(quota_v1_pod(&p, now()));
        assert_eq!(usage(&p, now(), true)["requests.cpu"].canonical(), "1");
    }

    #[test]
    fn matching_resources_as_upstream() {
        let input = names(&[
            "count/pods",
            "pods",
            "requests.hugepages-1Gi",
            "requests.example.com/gpu",
            "secrets",
            "example.com/gpu",
            "requests.kubernetes.io/x",
            "requests.deviceclass.resource.kubernetes.io/gpu",
        ]);
        assert_eq!(
            matching_resources(&input),
            [
                "count/pods",
                "pods",
                "requests.hugepages-1Gi",
                "requests.example.com/gpu",
                "requests.deviceclass.resource.kubernetes.io/gpu"
            ]
        );
    }

    #[test]
    fn scopes_select_pods() {
        let best_effort = pod(json!({"containers": [container("a", json!({}), json!({}))]}));
        let mut burstable = pod(json!({"containers": [container("a", json!({"memory": "1Mi"}), json!({}))],
            "activeDeadlineSeconds": 10, "priorityClassName": "high"}));
        let scope = |name: &str| ScopeRequirement::exists(name);
        assert_eq!(matches_scope(&scope("BestEffort"), &best_effort), Ok(true));
        assert_eq!(matches_scope(&scope("NotBestEffort"), &best_effort), Ok(false));
        assert_eq!(matches_scope(&scope("NotBestEffort"), &burstable), Ok(true));
        assert_eq!(matches_scope(&scope("Terminating"), &burstable), Ok(true));
        assert_eq!(matches_scope(&scope("NotTerminating"), &best_effort), Ok(true));
        assert_eq!(matches_scope(&scope("PriorityClass"), &burstable), Ok(true));
        assert_eq!(matches_scope(&scope("PriorityClass"), &best_effort), Ok(false));
        let r#in =
            ScopeRequirement { scope_name: "PriorityClass".into(), operator: "In".into(), values: names(&["high"]) };
        assert_eq!(matches_scope(&r#in, &burstable), Ok(true));
        let not_in = ScopeRequirement { operator: "NotIn".into(), ..r#in.clone() };
        assert_eq!(matches_scope(&not_in, &burstable), Ok(false));
        assert_eq!(matches_scope(&not_in, &best_effort), Ok(true));
        let none = ScopeRequirement { operator: "DoesNotExist".into(), values: vec![], ..r#in.clone() };
        assert_eq!(matches_scope(&none, &best_effort), Ok(true));
        // A `spec.scopes` entry reaches the usage calculation without an operator: an error.
        assert!(matches_scope(&ScopeRequirement::bare("PriorityClass"), &burstable).is_err());
        // The status' class wins over the spec.
        burstable.status = Some(serde_json::from_value(json!({"qosClass": "BestEffort"})).expect("a status"));
        assert_eq!(matches_scope(&scope("BestEffort"), &burstable), Ok(true));
        let cross = pod(json!({"containers": [container("a", json!({}), json!({}))], "affinity": {"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {
                "topologyKey": "zone", "namespaceSelector": {}}}]}}}));
        assert_eq!(matches_scope(&scope("CrossNamespacePodAffinity"), &cross), Ok(true));
        assert_eq!(matches_scope(&scope("CrossNamespacePodAffinity"), &best_effort), Ok(false));
    }

    #[test]
    fn constraints_name_missing_resources_per_container() {
        let p = pod(json!({"containers": [container("a", json!({"cpu": "1"}), json!({})),
            container("b", json!({}), json!({}))], "initContainers": [container("i", json!({"cpu": "1"}), json!({}))]}));
        assert_eq!(
            constraints(&names(&["requests.cpu", "pods"]), &p).map_err(|e| e.to_string()),
            Err("must specify requests.cpu for: b".into())
        );
        assert_eq!(
            constraints(&names(&["limits.memory", "cpu"]), &p).map_err(|e| e.to_string()),
            Err("must specify cpu for: b; limits.memory for: a,b,i".into())
        );
        assert_eq!(constraints(&names(&["pods", "requests.storage"]), &p), Ok(()));
    }
}
