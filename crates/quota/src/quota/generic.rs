//! The generic evaluator machinery (`k8s.io/apiserver/pkg/quota/v1/generic/evaluator.go`):
//! `CalculateUsageStats` over a namespace's objects, and evaluators built from a listing
//! function, among them the object-count evaluator behind `count/<resource>.<group>`.

use std::sync::Arc;

use super::resources::{self, ResourceList};
use super::scopes::{MatchError, ScopeRequirement};
use super::{Evaluator, GroupResource};
use crate::apimachinery::errors::BoxError;
use crate::quantity::Quantity;

/// `quota.UsageStatsOptions`.
pub struct UsageStatsOptions<'a> {
    /// The quota's namespace.
    pub namespace: &'a str,
    /// `spec.scopes`.
    pub scopes: &'a [String],
    /// The resources to report; each starts at zero.
    pub resources: &'a [String],
    /// `spec.scopeSelector.matchExpressions`.
    pub scope_selector: &'a [ScopeRequirement],
}

/// Lists a namespace's objects (`ListFuncByNamespace`); an error (any: the lister's own) until
/// the cache has synced.
pub type ListFn<K> = Box<dyn Fn(&str) -> Result<Vec<Arc<K>>, BoxError> + Send + Sync>;
/// `MatchesScopeFunc`.
pub type MatchesScopeFn<K> = fn(&ScopeRequirement, &K) -> Result<bool, MatchError>;
/// `UsageFunc`.
pub type UsageFn<K> = Box<dyn Fn(&K) -> ResourceList + Send + Sync>;
/// `MatchingResourceNamesFunc`.
pub type MatchingFn = Box<dyn Fn(&[String]) -> Vec<String> + Send + Sync>;

/// `MatchesNoScopeFunc`: objects without scopes match no scope.
pub fn matches_no_scope<K>(_: &ScopeRequirement, _: &K) -> Result<bool, MatchError> {
    Ok(false)
}

/// A namespace's usage that cannot be counted (`UsageStats`' error).
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    /// The objects cannot be listed (the cache has not synced yet).
    #[error("failed to list content: {source}")]
    List {
        /// The lister's error.
        source: BoxError,
    },
}

/// `CalculateUsageStats`: the sum of the usage of the objects in all scopes. A scope that
/// cannot be evaluated ends the count early without an error, as upstream.
pub fn calculate_usage_stats<K>(
    options: &UsageStatsOptions<'_>,
    list: &ListFn<K>,
    matches_scope: MatchesScopeFn<K>,
    usage: &UsageFn<K>,
) -> Result<ResourceList, UsageError> {
    let mut result: ResourceList = options.resources.iter().map(|name| (name.clone(), Quantity::zero())).collect();
    let items = list(options.namespace).map_err(|source| UsageError::List { source })?;
    for item in items {
        let mut matches = true;
        for scope in options.scopes {
            match matches_scope(&ScopeRequirement::bare(scope), &item) {
                Ok(inner) => matches &= inner,
                Err(_) => return Ok(result),
            }
        }
        for selector in options.scope_selector {
            match matches_scope(selector, &item) {
                Ok(inner) => matches &= inner,
                Err(_) => return Ok(result),
            }
        }
        if matches {
            result = resources::add(&result, &usage(&item));
        }
    }
    Ok(result)
}

/// An evaluator over the objects a listing function returns.
pub struct ListingEvaluator<K> {
    group_resource: GroupResource,
    list: ListFn<K>,
    matching: MatchingFn,
    matches_scope: MatchesScopeFn<K>,
    usage: UsageFn<K>,
}

impl<K: Send + Sync + 'static> ListingEvaluator<K> {
    /// An evaluator of `group_resource`: `list` gives a namespace's objects, `matching` picks the
    /// resource names it measures, `matches_scope` and `usage` judge and measure one object.
    pub fn new(
        group_resource: GroupResource,
        list: ListFn<K>,
        matching: MatchingFn,
        matches_scope: MatchesScopeFn<K>,
        usage: UsageFn<K>,
    ) -> Self {
        ListingEvaluator { group_resource, list, matching, matches_scope, usage }
    }

    /// `NewObjectCountEvaluator`: each object counts 1 towards `count/<resource>.<group>` and
    /// the legacy `alias` (`configmaps`, `secrets`, ...) when given; no scopes.
    pub fn object_count(group_resource: GroupResource, list: ListFn<K>, alias: Option<&str>) -> Self {
        let mut names = vec![crate::quota::object_count_name(&group_resource)];
        names.extend(alias.map(str::to_string));
        let counted = names.clone();
        let matching: MatchingFn = Box::new(move |input| resources::intersection(input, &names));
        let usage: UsageFn<K> =
            Box::new(move |_| counted.iter().map(|name| (name.clone(), Quantity::from_units(1))).collect());
        ListingEvaluator::new(group_resource, list, matching, matches_no_scope::<K>, usage)
    }
}

impl<K: Send + Sync + 'static> Evaluator for ListingEvaluator<K> {
    fn group_resource(&self) -> &GroupResource {
        &self.group_resource
    }

    fn matching_resources(&self, input: &[String]) -> Vec<String> {
        (self.matching)(input)
    }

    fn usage_stats(&self, options: &UsageStatsOptions<'_>) -> Result<ResourceList, UsageError> {
        calculate_usage_stats(options, &self.list, self.matches_scope, &self.usage)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use serde_json::json;

    use super::*;
    use crate::quota::{Registry, calculate_usage, pods, resources::pretty};

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn config_maps(count: usize) -> ListFn<ConfigMap> {
        Box::new(move |namespace| {
            assert_eq!(namespace, "ns");
            Ok((0..count).map(|_| Arc::new(ConfigMap::default())).collect())
        })
    }

    fn pod_evaluator(pods: Vec<Pod>) -> ListingEvaluator<Pod> {
        let pods: Vec<Arc<Pod>> = pods.into_iter().map(Arc::new).collect();
        ListingEvaluator::new(
            GroupResource::new("", "pods"),
            Box::new(move |_| Ok(pods.clone())),
            Box::new(pods::matching_resources),
            pods::matches_scope,
            Box::new(|pod| pods::usage(pod, jiff::Timestamp::now(), true)),
        )
    }

    fn pod(name: &str, cpu: Option<&str>) -> Pod {
        let resources = cpu.map_or(json!({}), |cpu| json!({"requests": {"cpu": cpu}}));
        serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": resources}]}}))
        .expect("a pod")
    }

    fn hard(entries: &[(&str, &str)]) -> ResourceList {
        entries.iter().map(|(n, q)| (n.to_string(), Quantity::parse(q).expect("a quantity"))).collect()
    }

    #[test]
    fn object_counts_with_legacy_alias() {
        let evaluator =
            ListingEvaluator::object_count(GroupResource::new("", "configmaps"), config_maps(3), Some("configmaps"));
        assert_eq!(
            evaluator.matching_resources(&strings(&["configmaps", "pods", "count/configmaps"])),
            ["configmaps", "count/configmaps"]
        );
        let resources = strings(&["configmaps", "count/configmaps"]);
        let options = UsageStatsOptions { namespace: "ns", scopes: &[], resources: &resources, scope_selector: &[] };
        assert_eq!(pretty(&evaluator.usage_stats(&options).expect("usage")), "configmaps=3,count/configmaps=3");
        // Object counts match no scope: a scoped quota counts none.
        let scopes = strings(&["BestEffort"]);
        let options = UsageStatsOptions { scopes: &scopes, ..options };
        assert_eq!(pretty(&evaluator.usage_stats(&options).expect("usage")), "configmaps=0,count/configmaps=0");
        let deployments = GroupResource::new("apps", "deployments");
        assert_eq!(crate::quota::object_count_name(&deployments), "count/deployments.apps");
    }

    #[test]
    fn calculate_usage_masks_to_measured_hard_resources() {
        let registry = Registry::new(vec![
            Arc::new(pod_evaluator(vec![pod("a", Some("100m")), pod("b", Some("0.9")), pod("c", None)])),
            Arc::new(ListingEvaluator::object_count(
                GroupResource::new("", "configmaps"),
                config_maps(2),
                Some("configmaps"),
            )),
        ]);
        let limits =
            hard(&[("requests.cpu", "2"), ("pods", "10"), ("configmaps", "5"), ("unknown.example.com/x", "1")]);
        let (usage, errors) = calculate_usage("ns", &[], &limits, &registry, &[]);
        assert!(errors.is_empty());
        assert_eq!(pretty(&usage), "configmaps=2,pods=3,requests.cpu=1");
        let (usage, _) = calculate_usage("ns", &strings(&["BestEffort"]), &limits, &registry, &[]);
        assert_eq!(pretty(&usage), "configmaps=0,pods=1,requests.cpu=0");
        let (usage, _) = calculate_usage("ns", &strings(&["NotBestEffort"]), &limits, &registry, &[]);
        assert_eq!(pretty(&usage), "configmaps=0,pods=2,requests.cpu=1");
    }

    #[test]
    fn failing_evaluators_leave_their_resources_out() {
        let failing: ListFn<ConfigMap> = Box::new(|_| Err("configmaps not yet synced".into()));
        let registry = Registry::new(vec![
            Arc::new(pod_evaluator(vec![pod("a", Some("1"))])),
            Arc::new(ListingEvaluator::object_count(GroupResource::new("", "configmaps"), failing, None)),
        ]);
        let limits = hard(&[("pods", "10"), ("count/configmaps", "5")]);
        let (usage, errors) = calculate_usage("ns", &[], &limits, &registry, &[]);
        assert_eq!(pretty(&usage), "pods=1");
        let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(messages, ["failed to list content: configmaps not yet synced"]);
    }

    /// A lister's own error (an API error, in the controller) stays findable inside the usage
    /// error, as `errors.As` finds it through upstream's `%w`-less wrapping of a typed error.
    #[test]
    fn a_listers_error_is_kept_as_the_source() {
        #[derive(Debug, thiserror::Error)]
        #[error("not yet synced")]
        struct NotSynced;
        let failing: ListFn<ConfigMap> = Box::new(|_| Err(NotSynced.into()));
        let evaluator = ListingEvaluator::object_count(GroupResource::new("", "configmaps"), failing, None);
        let options = UsageStatsOptions { namespace: "ns", scopes: &[], resources: &[], scope_selector: &[] };
        let error = evaluator.usage_stats(&options).expect_err("the lister fails");
        assert_eq!(error.to_string(), "failed to list content: not yet synced");
        assert!(crate::apimachinery::errors::find_in_chain::<NotSynced>(&error).is_some());
    }

    #[test]
    fn an_unevaluable_scope_stops_the_count_without_error() {
        // `spec.scopes: [PriorityClass]` reaches the pod scope function without an operator.
        let mut high = pod("a", Some("1"));
        high.spec.as_mut().expect("spec").priority_class_name = Some("high".into());
        let registry = Registry::new(vec![Arc::new(pod_evaluator(vec![high]))]);
        let (usage, errors) =
            calculate_usage("ns", &strings(&["PriorityClass"]), &hard(&[("pods", "1")]), &registry, &[]);
        assert!(errors.is_empty());
        assert_eq!(pretty(&usage), "pods=0");
    }
}
