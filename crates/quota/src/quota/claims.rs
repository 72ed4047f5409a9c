//! The persistent volume claim evaluator (`pkg/quota/v1/evaluator/core/persistent_volume_claims.go`):
//! claims and storage, also per StorageClass (`<class>.storageclass.storage.k8s.io/<resource>`).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;

use super::resources::ResourceList;
use super::scopes::{MatchError, ScopeRequirement};
use crate::quantity::Quantity;

/// `pvcObjectCountName`.
pub const OBJECT_COUNT_NAME: &str = "count/persistentvolumeclaims";
/// `pvcResources`, each also refined per storage class.
const PVC_RESOURCES: &[&str] = &["persistentvolumeclaims", "requests.storage"];
/// `storageClassSuffix`.
pub const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";
/// `v1.BetaStorageClassAnnotation`, which wins over `spec.storageClassName`.
const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// `V1ResourceByStorageClass`.
pub fn resource_by_storage_class(class: &str, resource: &str) -> String {
    format!("{class}{STORAGE_CLASS_SUFFIX}{resource}")
}

/// `pvcEvaluator.MatchingResources`, in input order.
pub fn matching_resources(input: &[String]) -> Vec<String> {
    let matches = |name: &str| {
        name == OBJECT_COUNT_NAME
            || PVC_RESOURCES.contains(&name)
            || PVC_RESOURCES.iter().any(|r| name.ends_with(&format!("{STORAGE_CLASS_SUFFIX}{r}")))
    };
    input.iter().filter(|name| matches(name)).cloned().collect()
}

/// `storagehelpers.GetPersistentVolumeClaimClass`: the beta annotation, else the spec's class.
pub fn claim_class(claim: &PersistentVolumeClaim) -> &str {
    if let Some(class) = claim.metadata.annotations.as_ref().and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION)) {
        return class;
    }
    claim.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or("")
}

/// `pvcEvaluator.Usage`.
pub fn usage(claim: &PersistentVolumeClaim) -> ResourceList {
    let class = claim_class(claim);
    let mut result = ResourceList::from([
        ("persistentvolumeclaims".to_string(), Quantity::from_units(1)),
        (OBJECT_COUNT_NAME.to_string(), Quantity::from_units(1)),
    ]);
    if !class.is_empty() {
        result.insert(resource_by_storage_class(class, "persistentvolumeclaims"), Quantity::from_units(1));
    }
    if let Some(storage) = storage_usage(claim) {
        result.insert("requests.storage".to_string(), storage);
        if !class.is_empty() {
            result.insert(resource_by_storage_class(class, "requests.storage"), storage);
        }
    }
    result
}

/// The quota scope of VolumeAttributesClass (`ResourceQuotaScopeVolumeAttributesClass`).
pub const VOLUME_ATTRIBUTES_CLASS_SCOPE: &str = "VolumeAttributesClass";

/// `pvcMatchesScopeFunc` (VolumeAttributesClass on): a claim is in the VolumeAttributesClass
/// scope through any class it names (spec, status, or the target of a modification); other
/// scopes never match a claim.
pub fn matches_scope(selector: &ScopeRequirement, claim: &PersistentVolumeClaim) -> Result<bool, MatchError> {
    if selector.scope_name != VOLUME_ATTRIBUTES_CLASS_SCOPE {
        return Ok(false);
    }
    let classes = referenced_volume_attributes_classes(claim);
    if selector.operator == "Exists" {
        return Ok(!classes.is_empty());
    }
    let matches = |class| selector.matches_label(class).map_err(MatchError::from);
    if classes.is_empty() {
        return matches(None);
    }
    for class in classes {
        if matches(Some(class))? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `getReferencedVolumeAttributesClassNames`.
fn referenced_volume_attributes_classes(claim: &PersistentVolumeClaim) -> BTreeSet<&str> {
    let spec = claim.spec.as_ref().and_then(|s| s.volume_attributes_class_name.as_deref());
    let status = claim.status.as_ref();
    let current = status.and_then(|s| s.current_volume_attributes_class_name.as_deref());
    let target = status
        .and_then(|s| s.modify_volume_status.as_ref())
        .map(|m| m.target_volume_attributes_class_name.as_deref().unwrap_or(""));
    [spec, current, target].into_iter().flatten().filter(|c| !c.is_empty()).collect()
}

/// `getStorageUsage`: the request in whole bytes, or the allocated size when larger (only
/// looked at when there is a request).
fn storage_usage(claim: &PersistentVolumeClaim) -> Option<Quantity> {
    let parse = |q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity| Quantity::parse(q.0.trim()).ok();
    let requests = claim.spec.as_ref().and_then(|s| s.resources.as_ref()).and_then(|r| r.requests.as_ref());
    let requested = requests.and_then(|r| r.get("storage")).and_then(parse).map(|q| q.round_up_units())?;
    let allocated = claim.status.as_ref().and_then(|s| s.allocated_resources.as_ref());
    match allocated.and_then(|a| a.get("storage")).and_then(parse) {
        Some(allocated) if allocated > requested => Some(allocated.round_up_units()),
        _ => Some(requested),
    }
}

/// `RequiresQuotaReplenish` (VolumeAttributesClass off). Upstream compares the pointers two
/// `AllocatedResources.Storage()` calls return, which are never equal: every claim update
/// counts. Kept so, as the replenishment it drives only costs a recount.
pub fn requires_quota_replenish(_claim: &PersistentVolumeClaim, _old: &PersistentVolumeClaim) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::quota::resources::pretty;

    fn claim(value: serde_json::Value) -> PersistentVolumeClaim {
        serde_json::from_value(value).expect("a claim")
    }

    #[test]
    fn the_volume_attributes_class_scope() {
        let scope = |operator: &str, values: &[&str]| ScopeRequirement {
            scope_name: VOLUME_ATTRIBUTES_CLASS_SCOPE.into(),
            operator: operator.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        };
        let gold = claim(json!({"spec": {"volumeAttributesClassName": "gold"}}));
        let moving = claim(json!({"spec": {"volumeAttributesClassName": "silver"},
            "status": {"currentVolumeAttributesClassName": "gold", "modifyVolumeStatus": {"targetVolumeAttributesClassName": "silver", "status": "InProgress"}}}));
        let none = claim(json!({"spec": {}}));
        assert_eq!(matches_scope(&scope("In", &["gold"]), &gold), Ok(true));
        assert_eq!(matches_scope(&scope("In", &["silver"]), &gold), Ok(false));
        assert_eq!(matches_scope(&scope("In", &["gold"]), &moving), Ok(true));
        assert_eq!(matches_scope(&scope("In", &["silver"]), &moving), Ok(true));
        assert_eq!(matches_scope(&scope("Exists", &[]), &none), Ok(false));
        assert_eq!(matches_scope(&scope("DoesNotExist", &[]), &none), Ok(true));
        assert_eq!(matches_scope(&scope("NotIn", &["gold"]), &none), Ok(true));
        assert!(matches_scope(&scope("In", &[]), &gold).is_err());
        let other = ScopeRequirement::exists("BestEffort");
        assert_eq!(matches_scope(&other, &gold), Ok(false));
    }

    #[test]
    fn usage_per_storage_class() {
        // upstream TestPersistentVolumeClaimEvaluatorUsage.
        let gold = claim(json!({"metadata": {"name": "c"},
            "spec": {"storageClassName": "gold", "resources": {"requests": {"storage": "1.5Gi"}}}}));
        assert_eq!(
            pretty(&usage(&gold)),
            "count/persistentvolumeclaims=1,gold.storageclass.storage.k8s.io/persistentvolumeclaims=1,\
             gold.storageclass.storage.k8s.io/requests.storage=1536Mi,persistentvolumeclaims=1,requests.storage=1536Mi"
        );
        let annotated = claim(json!({"metadata": {"name": "c",
            "annotations": {"volume.beta.kubernetes.io/storage-class": "bronze"}},
            "spec": {"storageClassName": "gold", "resources": {"requests": {"storage": "1001m"}}},
            "status": {"allocatedResources": {"storage": "1Ki"}}}));
        let u = usage(&annotated);
        assert_eq!(u["bronze.storageclass.storage.k8s.io/requests.storage"].canonical(), "1Ki");
        assert!(!u.contains_key("gold.storageclass.storage.k8s.io/persistentvolumeclaims"));
        let fractional =
            claim(json!({"metadata": {"name": "c"}, "spec": {"resources": {"requests": {"storage": "1001m"}}}}));
        assert_eq!(
            pretty(&usage(&fractional)),
            "count/persistentvolumeclaims=1,persistentvolumeclaims=1,requests.storage=2"
        );
        assert!(requires_quota_replenish(&gold, &gold));
    }

    #[test]
    fn matching_resources_by_suffix() {
        let input: Vec<String> = [
            "requests.storage",
            "pods",
            "gold.storageclass.storage.k8s.io/requests.storage",
            "gold.storageclass.storage.k8s.io/persistentvolumeclaims",
            "count/persistentvolumeclaims",
            "x/requests.storage",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(matching_resources(&input).len(), 4);
    }
}
