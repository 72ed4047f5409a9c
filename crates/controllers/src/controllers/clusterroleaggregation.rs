//! `clusterrole-aggregation-controller`, after upstream v1.33's
//! `pkg/controller/clusterroleaggregation`: a ClusterRole with an `aggregationRule` holds the
//! rules of every other ClusterRole its selectors match, selector by selector, each selector's
//! roles in name order, each rule once. Any ClusterRole event queues every aggregated role
//! (the set is small and the dependencies unknown). The rules are written by server-side apply
//! (the controller's name as field manager, forced), with an update as the fallback
//! where the server refuses apply patches (415), only when they differ.

use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use serde_json::{Value, json};

use crate::apimachinery::errors::BoxError;
use crate::apimachinery::labels::Selector;
use crate::client::{self, Api, Client, Patch, PostParams};
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::runtime::informer::{Event, Informer};
use crate::runtime::workqueue::WorkQueue;

/// `startClusterRoleAggregationController` runs five workers.
const WORKERS: usize = 5;

/// Why a ClusterRole could not be aggregated.
#[derive(Debug, thiserror::Error)]
enum Error {
    /// One of its `clusterRoleSelectors` is no valid selector.
    #[error("{0}")]
    Selector(#[source] BoxError),
    /// Writing its rules failed.
    #[error("{0}")]
    Api(#[from] client::Error),
}

impl From<Error> for SyncError {
    fn from(e: Error) -> SyncError {
        SyncError::of(e)
    }
}

/// `NewClusterRoleAggregation`. It cannot fail.
pub fn new(context: &ControllerContext<'_>) -> Controller {
    let queue = WorkQueue::new("ClusterRoleAggregator");
    let controller = Arc::new(Aggregator {
        // Upstream's field manager is the controller's name.
        field_manager: context.name,
        client: context.client.clone(),
        roles: context.informers.informer::<ClusterRole>(),
    });
    let (roles, enqueue) = (controller.roles.clone(), queue.clone());
    controller.roles.add_handler(move |_: &Event<ClusterRole>| {
        for role in roles.store().filter(|r| r.aggregation_rule.is_some()) {
            enqueue.add(role.metadata.name.clone().unwrap_or_default());
        }
    });
    Controller::new().with_queue(&queue, WORKERS, move |key: &String| controller.sync(key)).on_start(|| {
        log::info!("Starting ClusterRoleAggregator controller");
        Ok(())
    })
}

struct Aggregator {
    field_manager: &'static str,
    client: Client,
    roles: Arc<Informer<ClusterRole>>,
}

/// `equality.Semantic.DeepEqual` of rules: an absent list equals an empty one.
fn same_rule(a: &PolicyRule, b: &PolicyRule) -> bool {
    let list = |l: &Option<Vec<String>>| l.clone().unwrap_or_default();
    a.verbs == b.verbs
        && list(&a.api_groups) == list(&b.api_groups)
        && list(&a.resources) == list(&b.resources)
        && list(&a.resource_names) == list(&b.resource_names)
        && list(&a.non_resource_urls) == list(&b.non_resource_urls)
}

fn same_rules(a: &[PolicyRule], b: &[PolicyRule]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_rule(x, y))
}

/// The rules `role` aggregates from `all` (`syncClusterRole`'s loop).
fn aggregated_rules(role: &ClusterRole, all: &[Arc<ClusterRole>]) -> Result<Vec<PolicyRule>, Error> {
    let mut rules: Vec<PolicyRule> = Vec::new();
    let selectors = role.aggregation_rule.as_ref().and_then(|a| a.cluster_role_selectors.as_ref());
    for selector in selectors.into_iter().flatten() {
        let selector = Selector::from_label_selector(selector).map_err(|e| Error::Selector(e.into()))?;
        let mut matched: Vec<&Arc<ClusterRole>> =
            all.iter().filter(|r| selector.matches(r.metadata.labels.as_ref())).collect();
        matched.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        for source in matched.into_iter().filter(|r| r.metadata.name != role.metadata.name) {
            for rule in source.rules.iter().flatten() {
                if !rules.iter().any(|r| same_rule(r, rule)) {
                    rules.push(rule.clone());
                }
            }
        }
    }
    Ok(rules)
}

/// `toApplyPolicyRule`: the five fields, each left out when empty (`omitempty`).
fn apply_rule(rule: &PolicyRule) -> Value {
    let mut out = serde_json::Map::new();
    let fields = [
        ("resources", &rule.resources),
        ("resourceNames", &rule.resource_names),
        ("apiGroups", &rule.api_groups),
        ("nonResourceURLs", &rule.non_resource_urls),
    ];
    for (name, list) in fields {
        if let Some(list) = list.as_ref().filter(|l| !l.is_empty()) {
            out.insert(name.into(), json!(list));
        }
    }
    if !rule.verbs.is_empty() {
        out.insert("verbs".into(), json!(rule.verbs));
    }
    Value::Object(out)
}

/// The apply configuration `rbacv1ac.ClusterRole(name).WithRules(…)`. `rules` is always sent,
/// empty when nothing is aggregated, so that the result is the same on a server that does not
/// track field ownership (upstream omits it and relies on the server dropping the fields the
/// manager owned).
fn apply_configuration(name: &str, rules: &[PolicyRule]) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": rules.iter().map(apply_rule).collect::<Vec<_>>(),
    })
}

impl Aggregator {
    /// `syncClusterRole`.
    fn sync(&self, name: &str) -> SyncResult {
        let Some(role) = self.roles.store().get(name) else { return Ok(()) };
        if role.aggregation_rule.is_none() {
            return Ok(());
        }
        let rules = aggregated_rules(&role, &self.roles.store().list())?;
        if same_rules(&rules, role.rules.as_deref().unwrap_or_default()) {
            return Ok(());
        }
        let api = Api::<ClusterRole>::all(&self.client);
        let params =
            PostParams { field_manager: Some(self.field_manager.into()), force: true, ..PostParams::default() };
        let applied = api.patch(name, &Patch::Apply(apply_configuration(name, &rules)), &params);
        match applied {
            Err(e) if e.code() == Some(415) => {
                let mut updated = (*role).clone();
                updated.rules = Some(rules);
                api.replace(name, &updated, &PostParams::default()).map(drop).map_err(|e| Error::from(e).into())
            }
            other => other.map(drop).map_err(|e| Error::from(e).into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(value: Value) -> Arc<ClusterRole> {
        Arc::new(serde_json::from_value(value).expect("a cluster role"))
    }

    fn rule(verb: &str, resource: &str) -> Value {
        json!({"apiGroups": [""], "resources": [resource], "verbs": [verb]})
    }

    #[test]
    fn rules_are_gathered_by_selector_then_name_without_repeats() {
        let aggregated = role(json!({
            "metadata": {"name": "agg", "labels": {"a": "true"}},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "true"}}, {"matchLabels": {"b": "true"}}]},
            "rules": [rule("delete", "stale")],
        }));
        let all = vec![
            aggregated.clone(),
            role(json!({"metadata": {"name": "z", "labels": {"a": "true"}}, "rules": [rule("get", "pods")]})),
            role(
                json!({"metadata": {"name": "m", "labels": {"a": "true"}}, "rules": [rule("list", "pods"), rule("get", "pods")]}),
            ),
            role(
                json!({"metadata": {"name": "b", "labels": {"b": "true"}}, "rules": [rule("watch", "pods"), {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": []}]}),
            ),
            role(json!({"metadata": {"name": "c"}, "rules": [rule("create", "pods")]})),
        ];
        let rules = aggregated_rules(&aggregated, &all).expect("rules");
        let got: Vec<Value> = rules.iter().map(apply_rule).collect();
        assert_eq!(got, vec![rule("list", "pods"), rule("get", "pods"), rule("watch", "pods")]);
        assert!(!same_rules(&rules, aggregated.rules.as_deref().unwrap_or_default()));
        assert!(same_rules(&rules, &rules.clone()));
    }

    #[test]
    fn the_apply_configuration_always_names_the_rules() {
        assert_eq!(
            apply_configuration("admin", &[]),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "admin"}, "rules": []})
        );
        let nonresource: PolicyRule =
            serde_json::from_value(json!({"nonResourceURLs": ["/healthz"], "verbs": ["get"]})).expect("a rule");
        assert_eq!(apply_rule(&nonresource), json!({"nonResourceURLs": ["/healthz"], "verbs": ["get"]}));
    }
}
