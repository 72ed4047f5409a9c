//! ResourceQuota (`k8s.io/apiserver/pkg/admission/plugin/resourcequota`, with the evaluators of
//! `pkg/quota/v1/evaluator/core` and `generic`): a write that would take a namespace's usage
//! past a quota's `status.hard` is refused, and an admitted one is charged to the quotas'
//! `status.used` in the same transaction, so that concurrent creates cannot overshoot.
//!
//! As upstream, quotas are checked against `status.hard` (what the quota controller has
//! synced), not `spec.hard`: a quota the controller has not seen yet constrains nothing.

use std::collections::BTreeSet;

use serde_json::Value;

use super::resource_list::{self, ResourceList};
use super::storage::claim_class;
use super::{AdmissionContext, Operation, Phase, forbidden, items, text};
use crate::quantity::Quantity;
use crate::sandbox::objects::name_of;
use crate::sandbox::resources::ResourceType;
use crate::sandbox::status::ApiResult;
use crate::sandbox::store::Txn;

/// Resources whose compute usage a pod is charged for (`podResources`).
const POD_RESOURCES: &[&str] = &[
    "count/pods",
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
/// A quota on these requires every container to state them (upstream's `validationSet`).
const MUST_SPECIFY: &[&str] = &["cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"];
const SERVICE_RESOURCES: &[&str] = &["count/services", "services", "services.nodeports", "services.loadbalancers"];
const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";

/// How usage of a resource is measured (upstream's registry of evaluators).
enum Evaluator {
    Pod,
    Service,
    Claim,
    /// Any other resource: one object counts 1 towards these names.
    Count(Vec<String>),
}

impl Evaluator {
    fn for_resource(resource: &ResourceType) -> Evaluator {
        let count_name = if resource.group.is_empty() {
            format!("count/{}", resource.plural)
        } else {
            format!("count/{}.{}", resource.plural, resource.group)
        };
        match (resource.group, resource.plural) {
            ("", "pods") => Evaluator::Pod,
            ("", "services") => Evaluator::Service,
            ("", "persistentvolumeclaims") => Evaluator::Claim,
            // The legacy names of object counts.
            ("", legacy @ ("configmaps" | "resourcequotas" | "replicationcontrollers" | "secrets")) => {
                Evaluator::Count(vec![count_name, legacy.to_string()])
            }
            _ => Evaluator::Count(vec![count_name]),
        }
    }

    /// Pods and object counts are charged on create; services and claims can change type or
    /// size, so updates are charged their growth.
    fn handles(&self, operation: Operation) -> bool {
        match self {
            Evaluator::Pod | Evaluator::Count(_) => operation == Operation::Create,
            Evaluator::Service | Evaluator::Claim => true,
        }
    }

    /// The names among a quota's hard resources that this evaluator measures.
    fn matching_resources<'n>(&self, hard: impl Iterator<Item = &'n String>) -> Vec<String> {
        hard.filter(|name| match self {
            Evaluator::Pod => {
                POD_RESOURCES.contains(&name.as_str())
                    || name.starts_with("hugepages-")
                    || name.starts_with("requests.hugepages-")
                    || (name.starts_with("requests.") && is_extended(name))
            }
            Evaluator::Service => SERVICE_RESOURCES.contains(&name.as_str()),
            Evaluator::Claim => {
                ["count/persistentvolumeclaims", "persistentvolumeclaims", "requests.storage"].contains(&name.as_str())
                    || ["persistentvolumeclaims", "requests.storage"]
                        .iter()
                        .any(|r| name.ends_with(&format!("{STORAGE_CLASS_SUFFIX}{r}")))
            }
            Evaluator::Count(names) => names.contains(name),
        })
        .cloned()
        .collect()
    }

    /// Whether the object is in a quota scope; only pods have scopes.
    fn matches_scope(&self, selector: &ScopeSelector, object: &Value) -> bool {
        match self {
            Evaluator::Pod => pod_matches_scope(selector, object),
            _ => false,
        }
    }

    /// What the object uses.
    fn usage(&self, object: &Value) -> ResourceList {
        match self {
            Evaluator::Pod => pod_usage(object),
            Evaluator::Service => service_usage(object),
            Evaluator::Claim => claim_usage(object),
            Evaluator::Count(names) => names.iter().map(|n| (n.clone(), Quantity::from_units(1))).collect(),
        }
    }

    /// Requirements a matching quota puts on the object itself.
    fn constraints(&self, required: &[String], object: &Value) -> Result<(), String> {
        match self {
            Evaluator::Pod => pod_constraints(required, object),
            _ => Ok(()),
        }
    }
}

/// Extended resources (`example.com/gpu`): prefixed and not in the kubernetes.io namespace.
fn is_extended(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/")
}

/// A quota's scopes, each as a selector requirement (`getScopeSelectorsFromQuota`).
struct ScopeSelector {
    scope: String,
    operator: String,
    values: Vec<String>,
}

fn scope_selectors(quota: &Value) -> Vec<ScopeSelector> {
    let scopes = items(quota, "/spec/scopes").iter().map(|s| ScopeSelector {
        scope: s.as_str().unwrap_or_default().to_string(),
        operator: "Exists".to_string(),
        values: Vec::new(),
    });
    let expressions = items(quota, "/spec/scopeSelector/matchExpressions").iter().map(|e| ScopeSelector {
        scope: text(e, "/scopeName").to_string(),
        operator: text(e, "/operator").to_string(),
        values: items(e, "/values").iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
    });
    scopes.chain(expressions).collect()
}

/// Refuses or charges a write (`QuotaAdmission.Validate` and `CheckRequest`).
pub(super) fn validate(ctx: &AdmissionContext<'_>, object: &Value, txn: &mut Txn<'_>) -> ApiResult<()> {
    let resource = ctx.resource;
    if ctx.subresource.is_some() || ctx.namespace.is_empty() || !resource.namespaced {
        return Ok(());
    }
    // Quota ignores events.
    if resource.group.is_empty() && resource.plural == "events" {
        return Ok(());
    }
    let evaluator = Evaluator::for_resource(resource);
    if !evaluator.handles(ctx.operation) {
        return Ok(());
    }
    let quotas = txn.list("resourcequotas", Some(ctx.namespace));
    if quotas.is_empty() {
        return Ok(());
    }
    let refuse = |why: String| forbidden(ctx, object, Phase::Validating, &why);

    // The quotas that cover this object, checking their constraints on the way.
    let mut covering = Vec::new();
    for quota in &quotas {
        let hard = resource_list::parse(&quota["status"]["hard"]);
        let matching = evaluator.matching_resources(hard.keys());
        let in_scope = scope_selectors(quota).iter().all(|s| evaluator.matches_scope(s, object));
        if matching.is_empty() || !in_scope {
            continue;
        }
        let name = name_of(quota);
        evaluator.constraints(&matching, object).map_err(|e| refuse(format!("failed quota: {name}: {e}")))?;
        let used = resource_list::parse(&quota["status"]["used"]);
        let unknown: BTreeSet<&String> = matching.iter().filter(|r| !used.contains_key(*r)).collect();
        if !unknown.is_empty() {
            let names: Vec<&str> = matching.iter().map(String::as_str).collect::<BTreeSet<_>>().into_iter().collect();
            return Err(refuse(format!("status unknown for quota: {name}, resources: {}", names.join(","))));
        }
        covering.push(quota.clone());
    }

    let mut delta = evaluator.usage(object);
    let negative: Vec<&str> = delta.iter().filter(|(_, q)| q.is_negative()).map(|(n, _)| n.as_str()).collect();
    if !negative.is_empty() {
        return Err(refuse(format!("quota usage is negative for resource(s): {}", negative.join(","))));
    }
    if ctx.operation == Operation::Update
        && let Some(old) = ctx.old.filter(|old| !text(old, "/metadata/resourceVersion").is_empty())
    {
        delta = subtract_non_negative(&delta, &evaluator.usage(old));
    }
    delta.retain(|_, q| !q.is_zero());
    if delta.is_empty() || covering.is_empty() {
        return Ok(());
    }

    let mut charged = Vec::new();
    for quota in covering {
        let hard = resource_list::parse(&quota["status"]["hard"]);
        let used = resource_list::parse(&quota["status"]["used"]);
        let requested = resource_list::mask(&delta, hard.keys());
        let mut new_used = used.clone();
        resource_list::add_into(&mut new_used, &requested);
        let exceeded: Vec<String> = hard
            .iter()
            .filter(|(name, limit)| requested.contains_key(*name) && new_used.get(*name).is_some_and(|u| u > *limit))
            .map(|(name, _)| name.clone())
            .collect();
        if !exceeded.is_empty() {
            return Err(refuse(format!(
                "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                name_of(&quota),
                resource_list::pretty(&resource_list::mask(&requested, &exceeded)),
                resource_list::pretty(&resource_list::mask(&used, &exceeded)),
                resource_list::pretty(&resource_list::mask(&hard, &exceeded)),
            )));
        }
        if !requested.is_empty() {
            charged.push((quota, requested, new_used));
        }
    }
    if ctx.dry_run {
        return Ok(());
    }
    for (quota, requested, new_used) in charged {
        let mut updated = (*quota).clone();
        for name in requested.keys() {
            if let Some(q) = new_used.get(name) {
                updated["status"]["used"][name.as_str()] = q.canonical().into();
            }
        }
        txn.put("resourcequotas", updated);
    }
    Ok(())
}

/// `quota.SubtractWithNonNegativeResult`.
fn subtract_non_negative(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut result = ResourceList::new();
    for (name, q) in a {
        let diff = b.get(name).map_or(*q, |other| q.sub(other));
        result.insert(name.clone(), if diff > Quantity::zero() { diff } else { Quantity::zero() });
    }
    for name in b.keys() {
        result.entry(name.clone()).or_insert(Quantity::zero());
    }
    result
}

/// A pod's usage (`PodUsageFunc`): `count/pods` always; `pods` and compute resources only
/// while it is not terminal.
fn pod_usage(pod: &Value) -> ResourceList {
    let mut usage = ResourceList::from([("count/pods".to_string(), Quantity::from_units(1))]);
    if !counts_for_quota(pod) {
        return usage;
    }
    resource_list::add_into(
        &mut usage,
        &compute_usage(&resource_list::pod_requests(pod), &resource_list::pod_limits(pod)),
    );
    usage
}

/// `QuotaV1Pod`: terminal pods, and pods whose deletion grace period has run out, are free.
fn counts_for_quota(pod: &Value) -> bool {
    if matches!(text(pod, "/status/phase"), "Failed" | "Succeeded") {
        return false;
    }
    let deleted = text(pod, "/metadata/deletionTimestamp").parse::<jiff::Timestamp>();
    if let (Ok(deleted), Some(grace)) = (deleted, pod["metadata"]["deletionGracePeriodSeconds"].as_i64()) {
        let deadline = deleted.as_second().saturating_add(grace);
        if jiff::Timestamp::now().as_second() > deadline {
            return false;
        }
    }
    true
}

/// Quota names for requests and limits (`podComputeUsageHelper`).
fn compute_usage(requests: &ResourceList, limits: &ResourceList) -> ResourceList {
    let mut usage = ResourceList::from([("pods".to_string(), Quantity::from_units(1))]);
    for resource in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(q) = requests.get(resource) {
            usage.insert(resource.to_string(), *q);
            usage.insert(format!("requests.{resource}"), *q);
        }
        if let Some(q) = limits.get(resource) {
            usage.insert(format!("limits.{resource}"), *q);
        }
    }
    for (name, q) in requests {
        if name.starts_with("hugepages-") {
            usage.insert(name.clone(), *q);
            usage.insert(format!("requests.{name}"), *q);
        }
        if is_extended(name) && !name.starts_with("requests.") {
            usage.insert(format!("requests.{name}"), *q);
        }
    }
    usage
}

/// A quota on cpu or memory makes every container state them (`podEvaluator.Constraints`).
fn pod_constraints(required: &[String], pod: &Value) -> Result<(), String> {
    let required: BTreeSet<&str> = required.iter().map(String::as_str).filter(|r| MUST_SPECIFY.contains(r)).collect();
    let mut missing: std::collections::BTreeMap<&str, BTreeSet<String>> = Default::default();
    for list in ["containers", "initContainers"] {
        for container in pod["spec"][list].as_array().into_iter().flatten() {
            let usage = compute_usage(
                &resource_list::container_resources(container, "requests"),
                &resource_list::container_resources(container, "limits"),
            );
            for resource in required.iter().filter(|r| !usage.contains_key(**r)) {
                missing.entry(resource).or_default().insert(text(container, "/name").to_string());
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let parts: Vec<String> = missing
        .iter()
        .map(|(resource, containers)| {
            format!("{resource} for: {}", containers.iter().cloned().collect::<Vec<_>>().join(","))
        })
        .collect();
    Err(format!("must specify {}", parts.join("; ")))
}

/// `podMatchesScopeFunc`.
fn pod_matches_scope(selector: &ScopeSelector, pod: &Value) -> bool {
    let terminating = pod["spec"]["activeDeadlineSeconds"].as_i64().is_some_and(|s| s >= 0);
    match selector.scope.as_str() {
        "Terminating" => terminating,
        "NotTerminating" => !terminating,
        "BestEffort" => is_best_effort(pod),
        "NotBestEffort" => !is_best_effort(pod),
        "PriorityClass" => {
            let class = text(pod, "/spec/priorityClassName");
            let has = !class.is_empty();
            let listed = selector.values.iter().any(|v| v == class);
            match selector.operator.as_str() {
                "Exists" => has,
                "DoesNotExist" => !has,
                "In" => has && listed,
                "NotIn" => !has || !listed,
                _ => false,
            }
        }
        "CrossNamespacePodAffinity" => uses_cross_namespace_affinity(pod),
        _ => false,
    }
}

/// BestEffort QoS: no container asks for or limits cpu or memory (`ComputePodQOS`). Computed
/// from the spec: upstream reads `status.qosClass`, which is set from the spec after the
/// mutating plugins (LimitRanger may have added resources).
fn is_best_effort(pod: &Value) -> bool {
    let zero = Quantity::zero();
    !["containers", "initContainers"].iter().flat_map(|list| pod["spec"][*list].as_array().into_iter().flatten()).any(
        |container| {
            ["requests", "limits"].iter().any(|field| {
                let list = resource_list::container_resources(container, field);
                ["cpu", "memory"].iter().any(|r| list.get(*r).is_some_and(|q| *q > zero))
            })
        },
    )
}

/// Whether any pod (anti-)affinity term reaches other namespaces (`usesCrossNamespacePodAffinity`).
fn uses_cross_namespace_affinity(pod: &Value) -> bool {
    let crosses = |term: &Value| !items(term, "/namespaces").is_empty() || !term["namespaceSelector"].is_null();
    ["podAffinity", "podAntiAffinity"].iter().any(|kind| {
        let affinity = &pod["spec"]["affinity"][*kind];
        items(affinity, "/requiredDuringSchedulingIgnoredDuringExecution").iter().any(crosses)
            || items(affinity, "/preferredDuringSchedulingIgnoredDuringExecution")
                .iter()
                .any(|weighted| crosses(&weighted["podAffinityTerm"]))
    })
}

/// A service's usage (`serviceEvaluator.Usage`): node ports by type, load balancers.
fn service_usage(service: &Value) -> ResourceList {
    let ports = items(service, "/spec/ports");
    let node_ports = match text(service, "/spec/type") {
        "NodePort" => ports.len(),
        // Without node port allocation, only explicitly set node ports count.
        "LoadBalancer" if service["spec"]["allocateLoadBalancerNodePorts"] == false => {
            ports.iter().filter(|p| p["nodePort"].as_i64().is_some_and(|n| n != 0)).count()
        }
        "LoadBalancer" => ports.len(),
        _ => 0,
    };
    let load_balancers = i64::from(text(service, "/spec/type") == "LoadBalancer");
    ResourceList::from([
        ("count/services".to_string(), Quantity::from_units(1)),
        ("services".to_string(), Quantity::from_units(1)),
        ("services.nodeports".to_string(), Quantity::from_units(node_ports as i64)),
        ("services.loadbalancers".to_string(), Quantity::from_units(load_balancers)),
    ])
}

/// A claim's usage (`pvcEvaluator.Usage`): the claim, its storage (whole bytes, or the larger
/// allocated size), also per storage class.
fn claim_usage(claim: &Value) -> ResourceList {
    let class = claim_class(claim);
    let mut usage = ResourceList::from([
        ("persistentvolumeclaims".to_string(), Quantity::from_units(1)),
        ("count/persistentvolumeclaims".to_string(), Quantity::from_units(1)),
    ]);
    if !class.is_empty() {
        usage.insert(format!("{class}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"), Quantity::from_units(1));
    }
    let requested = Quantity::from_json(&claim["spec"]["resources"]["requests"]["storage"]).map(|q| q.round_up_units());
    let allocated = Quantity::from_json(&claim["status"]["allocatedResources"]["storage"]).map(|q| q.round_up_units());
    let storage = match (requested, allocated) {
        (Some(r), Some(a)) if a > r => Some(a),
        (r, _) => r,
    };
    if let Some(storage) = storage {
        usage.insert("requests.storage".to_string(), storage);
        if !class.is_empty() {
            usage.insert(format!("{class}{STORAGE_CLASS_SUFFIX}requests.storage"), storage);
        }
    }
    usage
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::*;
    use crate::sandbox::store::Store;

    fn store_with_quota(hard: serde_json::Value, used: serde_json::Value, spec: serde_json::Value) -> Store {
        let store = Store::default();
        namespace_default_sa(&store, "team");
        let mut quota = json!({"metadata": {"namespace": "team", "name": "quota"},
            "spec": {"hard": hard.clone()}, "status": {"hard": hard, "used": used}});
        if let Some(extra) = spec.as_object() {
            for (k, v) in extra {
                quota["spec"][k] = v.clone();
            }
        }
        seed(&store, "resourcequotas", vec![quota]);
        store
    }

    fn used(store: &Store) -> serde_json::Value {
        store.get("resourcequotas", "team", "quota").unwrap()["status"]["used"].clone()
    }

    #[test]
    fn pod_count_is_enforced_and_charged() {
        let store = store_with_quota(json!({"pods": "2"}), json!({"pods": "0"}), json!({}));
        create(&store, "", "pods", "team", pod("team", "a")).unwrap();
        assert_eq!(used(&store), json!({"pods": "1"}));
        create(&store, "", "pods", "team", pod("team", "b")).unwrap();
        assert_eq!(used(&store), json!({"pods": "2"}));
        let err = create(&store, "", "pods", "team", pod("team", "c")).unwrap_err();
        assert_eq!(err.code, 403);
        assert_eq!(
            err.message(),
            "pods \"c\" is forbidden: exceeded quota: quota, requested: pods=1, used: pods=2, limited: pods=2"
        );
        assert_eq!(used(&store), json!({"pods": "2"}));
    }

    #[test]
    fn dry_run_checks_without_charging() {
        let store = store_with_quota(json!({"pods": "1"}), json!({"pods": "0"}), json!({}));
        let user = admin();
        let resource = resource("", "pods");
        store
            .write(|txn| {
                let ctx = super::AdmissionContext {
                    resource,
                    subresource: None,
                    namespace: "team",
                    operation: super::Operation::Create,
                    user: &user,
                    old: None,
                    dry_run: true,
                };
                super::super::admit(&ctx, &mut pod("team", "a"), txn)
            })
            .unwrap();
        assert_eq!(used(&store), json!({"pods": "0"}));
    }

    #[test]
    fn compute_quotas_require_and_sum_resources() {
        let store = store_with_quota(
            json!({"requests.cpu": "1", "limits.memory": "1Gi"}),
            json!({"requests.cpu": "500m", "limits.memory": "0"}),
            json!({}),
        );
        let err = create(&store, "", "pods", "team", pod("team", "bare")).unwrap_err();
        assert_eq!(
            err.message(),
            "pods \"bare\" is forbidden: failed quota: quota: must specify limits.memory for: app; requests.cpu for: app"
        );
        let mut p = pod("team", "p");
        p["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "300m"}, "limits": {"memory": "256Mi"}});
        create(&store, "", "pods", "team", p.clone()).unwrap();
        assert_eq!(used(&store), json!({"requests.cpu": "800m", "limits.memory": "256Mi"}));
        p["metadata"]["name"] = json!("q");
        let err = create(&store, "", "pods", "team", p).unwrap_err();
        assert_eq!(
            err.message(),
            "pods \"q\" is forbidden: exceeded quota: quota, requested: requests.cpu=300m, used: requests.cpu=800m, limited: requests.cpu=1"
        );
    }

    #[test]
    fn object_counts_and_unsynced_quotas() {
        let store = store_with_quota(
            json!({"count/deployments.apps": "1", "configmaps": "1"}),
            json!({"count/deployments.apps": "0", "configmaps": "1"}),
            json!({}),
        );
        let deployment = json!({"metadata": {"namespace": "team", "name": "web"}, "spec": {}});
        create(&store, "apps", "deployments", "team", deployment).unwrap();
        assert_eq!(used(&store)["count/deployments.apps"], "1");
        let cm = json!({"metadata": {"namespace": "team", "name": "cm"}});
        let err = create(&store, "", "configmaps", "team", cm).unwrap_err();
        assert_eq!(
            err.message(),
            "configmaps \"cm\" is forbidden: exceeded quota: quota, requested: configmaps=1, used: configmaps=1, limited: configmaps=1"
        );

        // A quota the controller has not synced (no status.hard) constrains nothing.
        let store = Store::default();
        namespace_default_sa(&store, "team");
        seed(
            &store,
            "resourcequotas",
            vec![json!({"metadata": {"namespace": "team", "name": "quota"},
            "spec": {"hard": {"pods": "0"}}})],
        );
        create(&store, "", "pods", "team", pod("team", "a")).unwrap();
        // Synced hard limits without usage are refused until the controller counts.
        let store = Store::default();
        namespace_default_sa(&store, "team");
        seed(
            &store,
            "resourcequotas",
            vec![json!({"metadata": {"namespace": "team", "name": "quota"},
            "spec": {"hard": {"pods": "5"}}, "status": {"hard": {"pods": "5"}}})],
        );
        let err = create(&store, "", "pods", "team", pod("team", "a")).unwrap_err();
        assert_eq!(err.message(), "pods \"a\" is forbidden: status unknown for quota: quota, resources: pods");
    }

    #[test]
    fn scopes_select_pods() {
        let store = store_with_quota(json!({"pods": "0"}), json!({"pods": "0"}), json!({"scopes": ["BestEffort"]}));
        let mut sized = pod("team", "sized");
        sized["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "100m"}});
        create(&store, "", "pods", "team", sized).unwrap();
        let err = create(&store, "", "pods", "team", pod("team", "besteffort")).unwrap_err();
        assert!(err.message().contains("exceeded quota: quota"), "{}", err.message());

        let store = store_with_quota(
            json!({"pods": "0"}),
            json!({"pods": "0"}),
            json!({"scopeSelector": {"matchExpressions": [
                {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}),
        );
        seed(&store, "priorityclasses", vec![json!({"metadata": {"name": "high"}, "value": 100})]);
        create(&store, "", "pods", "team", pod("team", "plain")).unwrap();
        let mut high = pod("team", "high");
        high["spec"]["priorityClassName"] = json!("high");
        assert!(create(&store, "", "pods", "team", high).is_err());
    }

    #[test]
    fn services_count_node_ports_also_on_update() {
        let store = store_with_quota(json!({"services.nodeports": "2"}), json!({"services.nodeports": "0"}), json!({}));
        let service = json!({"metadata": {"namespace": "team", "name": "s"},
            "spec": {"type": "ClusterIP", "ports": [{"port": 80}, {"port": 443}, {"port": 8080}]}});
        create(&store, "", "services", "team", service.clone()).unwrap();
        assert_eq!(used(&store), json!({"services.nodeports": "0"}));
        let mut node_port = service;
        node_port["metadata"]["resourceVersion"] = json!("1");
        node_port["spec"]["type"] = json!("NodePort");
        let err = update(&store, "", "services", node_port).unwrap_err();
        assert_eq!(
            err.message(),
            "services \"s\" is forbidden: exceeded quota: quota, requested: services.nodeports=3, used: services.nodeports=0, limited: services.nodeports=2"
        );
    }
}
