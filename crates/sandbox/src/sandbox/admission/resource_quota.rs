//! ResourceQuota (`k8s.io/apiserver/pkg/admission/plugin/resourcequota`, with the evaluators of
//! `pkg/quota/v1/evaluator/core` and `generic`): a write that would take a namespace's usage
//! past a quota's `status.hard` is refused, and an admitted one is charged to the quotas'
//! `status.used` in the same transaction, so that concurrent creates cannot overshoot.
//!
//! As upstream, quotas are checked against `status.hard` (what the quota controller has
//! synced), not `spec.hard`: a quota the controller has not seen yet constrains nothing.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::resource::v1::ResourceClaim;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::resource_list::{self, ResourceList};
use super::{AdmissionContext, Operation, Phase, forbidden, text};
use crate::quantity::Quantity;
use crate::quota::pods::MissingResources;
use crate::quota::resources::{self, intersection, mask, pretty, subtract_non_negative};
use crate::quota::scopes::{MatchError, ScopeRequirement, quota_scope_requirements};
use crate::quota::{GroupResource, LEGACY_OBJECT_COUNT_ALIASES, claims, pods, resourceclaims, services};
use crate::sandbox::apiserver::status::ApiResult;
use crate::sandbox::storage::objects::name_of;
use crate::sandbox::storage::resources::ResourceType;
use crate::sandbox::storage::store::Txn;

/// How usage of a resource is measured: the shared evaluators of [`crate::quota`] (upstream's
/// registry of evaluators, as the admission plugin uses it).
enum Evaluator {
    Pod,
    Service,
    Claim,
    /// ResourceClaims (`claimEvaluator`), without the `DRAExtendedResource` charges: the sandbox
    /// does not map device classes to extended resources here (docs/sandbox.md, the sandbox's known gaps).
    ResourceClaim,
    /// Any other resource: one object counts 1 towards these names (`NewObjectCountEvaluator`).
    Count(Vec<String>),
}

/// An object as the typed evaluators take it.
enum Typed {
    Pod(Box<Pod>),
    Service(Box<Service>),
    Claim(Box<PersistentVolumeClaim>),
    ResourceClaim(Box<ResourceClaim>),
    Other,
}

/// Why quota admission could not evaluate an object (the reason of its 403).
#[derive(Debug, thiserror::Error)]
pub(super) enum Error {
    /// The object does not decode into its evaluator's type.
    #[error("cannot decode the object for quota: {0}")]
    Decode(#[source] serde_json::Error),
    /// A scope selector the pod evaluator cannot apply.
    #[error(transparent)]
    Scope(#[from] MatchError),
    /// A quota constraint the pod does not meet (resources it does not set).
    #[error(transparent)]
    Constraints(#[from] MissingResources),
}

fn decode<K: DeserializeOwned>(object: &Value) -> Result<Box<K>, Error> {
    serde_json::from_value(object.clone()).map(Box::new).map_err(Error::Decode)
}

impl Evaluator {
    fn for_resource(resource: &ResourceType) -> Evaluator {
        let group_resource = GroupResource::new(resource.group, resource.plural);
        match (resource.group, resource.plural) {
            ("", "pods") => Evaluator::Pod,
            ("", "services") => Evaluator::Service,
            ("", "persistentvolumeclaims") => Evaluator::Claim,
            ("resource.k8s.io", "resourceclaims") => Evaluator::ResourceClaim,
            _ => {
                let mut names = vec![crate::quota::object_count_name(&group_resource)];
                let legacy = LEGACY_OBJECT_COUNT_ALIASES
                    .iter()
                    .find(|(r, _)| resource.group.is_empty() && *r == resource.plural);
                names.extend(legacy.map(|(_, alias)| alias.to_string()));
                Evaluator::Count(names)
            }
        }
    }

    /// Pods and object counts are charged on create; services and claims can change type or
    /// size, so updates are charged their growth.
    fn handles(&self, operation: Operation) -> bool {
        match self {
            Evaluator::Pod | Evaluator::Count(_) => operation == Operation::Create,
            Evaluator::Service | Evaluator::Claim | Evaluator::ResourceClaim => true,
        }
    }

    /// The object in the evaluator's type.
    fn decode(&self, object: &Value) -> Result<Typed, Error> {
        Ok(match self {
            Evaluator::Pod => Typed::Pod(decode(object)?),
            Evaluator::Service => Typed::Service(decode(object)?),
            Evaluator::Claim => Typed::Claim(decode(object)?),
            Evaluator::ResourceClaim => Typed::ResourceClaim(decode(object)?),
            Evaluator::Count(_) => Typed::Other,
        })
    }

    /// The names among a quota's hard resources that this evaluator measures.
    fn matching_resources(&self, hard: &[String]) -> Vec<String> {
        match self {
            Evaluator::Pod => pods::matching_resources(hard),
            Evaluator::Service => services::matching_resources(hard),
            Evaluator::Claim => claims::matching_resources(hard),
            Evaluator::ResourceClaim => resourceclaims::matching_resources(hard, None),
            Evaluator::Count(names) => intersection(hard, names),
        }
    }

    /// Whether the object is in a quota scope; only pods have scopes.
    fn matches_scope(selector: &ScopeRequirement, object: &Typed) -> Result<bool, Error> {
        match object {
            Typed::Pod(pod) => Ok(pods::matches_scope(selector, pod)?),
            _ => Ok(false),
        }
    }

    /// What the object uses.
    fn usage(&self, object: &Typed) -> ResourceList {
        match (self, object) {
            (Evaluator::Count(names), _) => names.iter().map(|n| (n.clone(), Quantity::from_units(1))).collect(),
            (_, Typed::Pod(pod)) => pods::usage(pod, jiff::Timestamp::now(), true),
            (_, Typed::Service(service)) => services::usage(service),
            (_, Typed::Claim(claim)) => claims::usage(claim),
            (_, Typed::ResourceClaim(claim)) => resourceclaims::usage(claim, None),
            (_, Typed::Other) => ResourceList::new(),
        }
    }

    /// Requirements a matching quota puts on the object itself.
    fn constraints(required: &[String], object: &Typed) -> Result<(), Error> {
        match object {
            Typed::Pod(pod) => Ok(pods::constraints(required, pod)?),
            _ => Ok(()),
        }
    }
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
    let typed = evaluator.decode(object).map_err(|e| refuse(e.to_string()))?;

    // The quotas that cover this object, checking their constraints on the way.
    let mut covering = Vec::new();
    for quota in &quotas {
        let hard = resource_list::parse(&quota["status"]["hard"]);
        let matching = evaluator.matching_resources(&resources::resource_names(&hard));
        let mut in_scope = true;
        for selector in quota_scope_requirements(typed_spec(quota).as_ref()) {
            in_scope &= Evaluator::matches_scope(&selector, &typed).map_err(|e| refuse(e.to_string()))?;
        }
        if matching.is_empty() || !in_scope {
            continue;
        }
        let name = name_of(quota);
        Evaluator::constraints(&matching, &typed).map_err(|e| refuse(format!("failed quota: {name}: {e}")))?;
        let used = resource_list::parse(&quota["status"]["used"]);
        let unknown: BTreeSet<&String> = matching.iter().filter(|r| !used.contains_key(*r)).collect();
        if !unknown.is_empty() {
            let names: Vec<&str> = matching.iter().map(String::as_str).collect::<BTreeSet<_>>().into_iter().collect();
            return Err(refuse(format!("status unknown for quota: {name}, resources: {}", names.join(","))));
        }
        covering.push(quota.clone());
    }

    let mut delta = evaluator.usage(&typed);
    let negative = resources::is_negative(&delta);
    if !negative.is_empty() {
        return Err(refuse(format!("quota usage is negative for resource(s): {}", negative.join(","))));
    }
    if ctx.operation == Operation::Update
        && let Some(old) = ctx.old.filter(|old| !text(old, "/metadata/resourceVersion").is_empty())
    {
        let old = evaluator.decode(old).map_err(|e| refuse(e.to_string()))?;
        delta = subtract_non_negative(&delta, &evaluator.usage(&old));
    }
    delta.retain(|_, q| !q.is_zero());
    if delta.is_empty() || covering.is_empty() {
        return Ok(());
    }

    let mut charged = Vec::new();
    for quota in covering {
        let hard = resource_list::parse(&quota["status"]["hard"]);
        let used = resource_list::parse(&quota["status"]["used"]);
        let requested = mask(&delta, &resources::resource_names(&hard));
        let new_used = resources::add(&used, &requested);
        let exceeded: Vec<String> = hard
            .iter()
            .filter(|(name, limit)| requested.contains_key(*name) && new_used.get(*name).is_some_and(|u| u > *limit))
            .map(|(name, _)| name.clone())
            .collect();
        if !exceeded.is_empty() {
            return Err(refuse(format!(
                "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                name_of(&quota),
                pretty(&mask(&requested, &exceeded)),
                pretty(&mask(&used, &exceeded)),
                pretty(&mask(&hard, &exceeded)),
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

/// The quota's spec, typed, for its scopes.
fn typed_spec(quota: &Value) -> Option<k8s_openapi::api::core::v1::ResourceQuotaSpec> {
    serde_json::from_value(quota["spec"].clone()).ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::*;
    use crate::sandbox::storage::store::Store;

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
    fn resource_claims_are_charged_their_devices_per_class() {
        let hard =
            json!({"count/resourceclaims.resource.k8s.io": "2", "gpu.deviceclass.resource.k8s.io/devices": "40"});
        let zero = json!({"count/resourceclaims.resource.k8s.io": "0", "gpu.deviceclass.resource.k8s.io/devices": "0"});
        let store = store_with_quota(hard, zero, json!({}));
        let claim = |name: &str, exactly: serde_json::Value| {
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"namespace": "team", "name": name},
                "spec": {"devices": {"requests": [{"name": "a", "exactly": exactly}]}}})
        };
        let all = json!({"deviceClassName": "gpu", "allocationMode": "All"});
        create(&store, "resource.k8s.io", "resourceclaims", "team", claim("all", all)).unwrap();
        assert_eq!(
            used(&store),
            json!({"count/resourceclaims.resource.k8s.io": "1", "gpu.deviceclass.resource.k8s.io/devices": "32"})
        );
        let ten = json!({"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 10});
        let err = create(&store, "resource.k8s.io", "resourceclaims", "team", claim("ten", ten)).unwrap_err();
        assert_eq!(err.code, 403);
        assert!(err.message().contains("exceeded quota: quota"), "{}", err.message());
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
                    rbac: false,
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
