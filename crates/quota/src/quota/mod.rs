//! Resource quota usage, shared by the resourcequota controller and the sandbox's ResourceQuota
//! admission plugin, as upstream shares `k8s.io/apiserver/pkg/quota/v1` (resource list
//! arithmetic, the generic object-count evaluator, `CalculateUsage`) and the evaluators of
//! `pkg/quota/v1/evaluator/core` (pods, services, persistent volume claims, resource claims).
//!
//! The object-level functions (`pods::usage`, `pods::matches_scope`, `services::usage`, ...)
//! work on one object; an [`Evaluator`] adds how to list a namespace's objects, for the
//! controller's full recalculation. A [`Registry`] holds one evaluator per group/resource;
//! evaluators for resources found later (e.g. by discovery) can be added at any time.

pub mod claims;
pub mod generic;
pub mod pods;
pub mod resourceclaims;
pub mod resources;
pub mod scopes;
pub mod services;

use std::sync::Arc;

use parking_lot::RwLock;

pub use generic::{ListingEvaluator, UsageError, UsageStatsOptions};
pub use resources::ResourceList;
use scopes::ScopeRequirement;

pub use crate::apimachinery::schema::GroupResource;

/// `ObjectCountQuotaResourceNameFor`: `count/<resource>` or `count/<resource>.<group>`.
pub fn object_count_name(group_resource: &GroupResource) -> String {
    if group_resource.group.is_empty() {
        format!("count/{}", group_resource.resource)
    } else {
        format!("count/{}.{}", group_resource.resource, group_resource.group)
    }
}

/// `legacyObjectCountAliases`: core resources whose object count also goes by an older name.
pub const LEGACY_OBJECT_COUNT_ALIASES: &[(&str, &str)] = &[
    ("configmaps", "configmaps"),
    ("resourcequotas", "resourcequotas"),
    ("replicationcontrollers", "replicationcontrollers"),
    ("secrets", "secrets"),
];

/// What the controller needs of an evaluator (`quota.Evaluator` without the admission half,
/// which the admission plugin takes from the object-level functions).
pub trait Evaluator: Send + Sync {
    /// The resource it measures.
    fn group_resource(&self) -> &GroupResource;
    /// The names among `input` it can measure.
    fn matching_resources(&self, input: &[String]) -> Vec<String>;
    /// The usage of a namespace's objects (`UsageStats`).
    fn usage_stats(&self, options: &UsageStatsOptions<'_>) -> Result<ResourceList, UsageError>;
}

/// The evaluators by group/resource (`quota.Registry`).
#[derive(Default)]
pub struct Registry {
    evaluators: RwLock<Vec<Arc<dyn Evaluator>>>,
}

impl Registry {
    /// A registry holding `evaluators` (a later one replaces an earlier one for the same resource).
    pub fn new(evaluators: Vec<Arc<dyn Evaluator>>) -> Self {
        let registry = Registry::default();
        for evaluator in evaluators {
            registry.add(evaluator);
        }
        registry
    }

    /// Adds an evaluator, replacing one for the same resource.
    pub fn add(&self, evaluator: Arc<dyn Evaluator>) {
        let mut evaluators = self.evaluators.write();
        evaluators.retain(|e| e.group_resource() != evaluator.group_resource());
        evaluators.push(evaluator);
    }

    /// The evaluator of `resource`, if one is registered.
    pub fn get(&self, resource: &GroupResource) -> Option<Arc<dyn Evaluator>> {
        self.evaluators.read().iter().find(|e| e.group_resource() == resource).cloned()
    }

    /// Every registered evaluator.
    pub fn list(&self) -> Vec<Arc<dyn Evaluator>> {
        self.evaluators.read().clone()
    }
}

/// `CalculateUsage`: the usage of the resources in `hard` that some evaluator measures. On
/// errors the usage holds the resources whose evaluators succeeded, and the errors are given,
/// each whole (upstream aggregates them: `Aggregate::from_errors`).
pub fn calculate_usage(
    namespace: &str,
    scopes: &[String],
    hard: &ResourceList,
    registry: &Registry,
    scope_selector: &[ScopeRequirement],
) -> (ResourceList, Vec<UsageError>) {
    let hard_resources = resources::resource_names(hard);
    let evaluators = registry.list();
    let potential: Vec<String> = evaluators.iter().flat_map(|e| e.matching_resources(&hard_resources)).collect();
    let mut matched = resources::intersection(&hard_resources, &potential);
    let mut errors = Vec::new();
    let mut usage = ResourceList::new();
    for evaluator in &evaluators {
        let intersection = evaluator.matching_resources(&matched);
        if intersection.is_empty() {
            continue;
        }
        let options = UsageStatsOptions { namespace, scopes, resources: &intersection, scope_selector };
        match evaluator.usage_stats(&options) {
            Ok(used) => usage = resources::add(&usage, &used),
            Err(e) => {
                errors.push(e);
                matched = resources::difference(&matched, &intersection);
            }
        }
    }
    (resources::mask(&usage, &matched), errors)
}
