//! The controller's metrics (upstream v1.36's `resourceclaim/metrics` and the `customCollector`
//! of `controller.go`): `resourceclaim_controller_creates_total{status,admin_access}`, counted
//! at each create, and `resourceclaim_controller_resource_claims{allocated,admin_access,source}`,
//! counted over the claim informer's cache at each scrape. Both are registered once per process
//! (`RegisterMetrics`' `sync.Once`), when the first controller is built.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, Weak};

use k8s_openapi::api::resource::v1::ResourceClaim;
use parking_lot::Mutex;

use crate::controllers::resourceclaimutil::{EXTENDED_RESOURCE_CLAIM_ANNOTATION, POD_RESOURCE_CLAIM_ANNOTATION};
use crate::metrics::{Collector, CounterVec, GaugeVec};
use crate::runtime::informer::Informer;

/// The counter and the claims the collector counts.
struct Metrics {
    creates: Arc<CounterVec>,
    /// The claim informer of the latest controller built.
    claims: Mutex<Weak<Informer<ResourceClaim>>>,
}

fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let creates = Arc::new(CounterVec::counter(
            "resourceclaim_controller_creates_total",
            "[ALPHA] Number of ResourceClaims creation requests, categorized by creation status and admin access",
            &["status", "admin_access"],
        ));
        let registry = crate::metrics::global();
        registry.register(creates.clone());
        // A custom collector: component-base does not count it in `registered_metrics_total`.
        registry.register(Arc::new(ClaimCollector));
        Metrics { creates, claims: Mutex::new(Weak::new()) }
    })
}

/// `RegisterMetrics(newCustomCollector(claimLister, ...))`: the collector counts `claims`.
pub(super) fn register(claims: &Arc<Informer<ResourceClaim>>) {
    *metrics().claims.lock() = Arc::downgrade(claims);
}

/// `ResourceClaimCreate.WithLabelValues(status, adminAccess).Inc()`.
pub(super) fn created(success: bool, admin_access: &str) {
    let status = if success { "success" } else { "failure" };
    metrics().creates.inc(&[status, admin_access]);
}

/// `getAdminAccessMetricLabel`: `"true"` if a request (not a sub-request of `firstAvailable`)
/// asks for admin access.
pub(super) fn admin_access_label(claim: &ResourceClaim) -> &'static str {
    let requests = claim.spec.devices.as_ref().and_then(|d| d.requests.as_deref()).unwrap_or_default();
    let admin = requests.iter().any(|r| r.exactly.as_ref().and_then(|e| e.admin_access).unwrap_or(false));
    if admin { "true" } else { "false" }
}

/// The `source` label: `extended_resource`, `resource_claim_template` or empty (made by a user).
fn source_label(claim: &ResourceClaim) -> &'static str {
    let annotation = |name: &str| claim.metadata.annotations.as_ref().and_then(|a| a.get(name)).map(String::as_str);
    if annotation(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == Some("true") {
        "extended_resource"
    } else if annotation(POD_RESOURCE_CLAIM_ANNOTATION).is_some_and(|name| !name.is_empty()) {
        "resource_claim_template"
    } else {
        ""
    }
}

/// The `(allocated, admin_access, source)` labels of one claim.
fn labels(claim: &ResourceClaim) -> [&'static str; 3] {
    let allocated = claim.status.as_ref().is_some_and(|s| s.allocation.is_some());
    [if allocated { "true" } else { "false" }, admin_access_label(claim), source_label(claim)]
}

/// Counts claims by their labels.
fn count<'a>(claims: impl IntoIterator<Item = &'a ResourceClaim>) -> BTreeMap<[&'static str; 3], f64> {
    let mut counts = BTreeMap::new();
    for claim in claims {
        *counts.entry(labels(claim)).or_insert(0.0) += 1.0;
    }
    counts
}

/// `customCollector.CollectWithStability`.
struct ClaimCollector;

impl Collector for ClaimCollector {
    fn write_to(&self, out: &mut String) {
        let Some(claims) = metrics().claims.lock().upgrade() else { return };
        let family = GaugeVec::gauge(
            "resourceclaim_controller_resource_claims",
            "[ALPHA] Number of ResourceClaims, categorized by allocation status, admin access, and source. Source can \
             be 'resource_claim_template' (created from a template), 'extended_resource' (extended resources), or \
             empty (manually created by a user).",
            &["allocated", "admin_access", "source"],
        );
        let listed = claims.store().list();
        for (labels, value) in count(listed.iter().map(|c| &**c)) {
            family.set(&labels, value);
        }
        family.write_to(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(value: serde_json::Value) -> ResourceClaim {
        serde_json::from_value(value).expect("a claim")
    }

    #[test]
    fn admin_access_counts_only_exact_requests() {
        let exact = claim(json!({"metadata": {}, "spec": {"devices": {"requests": [
            {"name": "a", "exactly": {"deviceClassName": "c"}},
            {"name": "b", "exactly": {"deviceClassName": "c", "adminAccess": true}}]}}}));
        assert_eq!(admin_access_label(&exact), "true");
        let sub = claim(json!({"metadata": {}, "spec": {"devices": {"requests": [
            {"name": "a", "firstAvailable": [{"name": "s", "deviceClassName": "c", "adminAccess": true}]}]}}}));
        assert_eq!(admin_access_label(&sub), "false");
        assert_eq!(admin_access_label(&claim(json!({"metadata": {}, "spec": {}}))), "false");
    }

    #[test]
    fn claims_are_counted_by_allocation_admin_access_and_source() {
        let template = claim(json!({"metadata": {"annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"}},
            "spec": {}, "status": {"allocation": {}}}));
        let extended = claim(json!({"metadata": {"annotations": {
            "resource.kubernetes.io/extended-resource-claim": "true",
            "resource.kubernetes.io/pod-claim-name": "gpu"}}, "spec": {}}));
        let by_user = claim(json!({"metadata": {"annotations": {"resource.kubernetes.io/pod-claim-name": ""}},
            "spec": {}}));
        let counts = count([&template, &extended, &by_user, &by_user]);
        let expected: BTreeMap<[&str; 3], f64> = [
            (["false", "false", ""], 2.0),
            (["false", "false", "extended_resource"], 1.0),
            (["true", "false", "resource_claim_template"], 1.0),
        ]
        .into();
        assert_eq!(counts, expected);
    }
}
