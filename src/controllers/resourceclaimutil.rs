//! What the Dynamic Resource Allocation controllers share about ResourceClaims, after upstream
//! v1.36's `k8s.io/dynamic-resource-allocation/resourceclaim` (`resourceclaim.go`,
//! `devicetoleration.go`): which claim a pod's `spec.resourceClaims[]` entry names, whether a
//! claim was made for and is reserved for a pod, and whether a device toleration tolerates a
//! device taint.
//!
//! The PodGroup variants (`DRAWorkloadResourceClaims`, alpha and off in v1.36) are not ported.

use k8s_openapi::api::core::v1::{Pod, PodResourceClaim};
use k8s_openapi::api::resource::v1::{DeviceTaint, DeviceToleration, ResourceClaim};

use crate::runtime::controller_ref::controller_of;

/// Why [`claim_name`] found no claim name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimNameError {
    /// `ErrClaimNotFound`: the claim of a template has not been created yet (no status entry).
    NotCreatedYet,
    /// `ErrAPIUnsupported`: neither `resourceClaimName` nor `resourceClaimTemplateName` is set.
    Unsupported,
}

/// The claim a pod's entry names (`resourceclaim.Name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimName {
    /// The claim's name; `None` when the claim was intentionally not created (a status entry
    /// without a name) and the entry can be ignored.
    pub name: Option<String>,
    /// Whether the claim was made from a template, so that [`is_for_pod`] must be checked
    /// before using it.
    pub must_check_owner: bool,
}

/// `resourceclaim.Name`: a `resourceClaimName` names the claim directly; a
/// `resourceClaimTemplateName` names it through the pod's `status.resourceClaimStatuses`.
pub fn claim_name(pod: &Pod, pod_claim: &PodResourceClaim) -> Result<ClaimName, ClaimNameError> {
    if let Some(name) = &pod_claim.resource_claim_name {
        return Ok(ClaimName { name: Some(name.clone()), must_check_owner: false });
    }
    if pod_claim.resource_claim_template_name.is_none() {
        return Err(ClaimNameError::Unsupported);
    }
    let statuses = pod.status.as_ref().and_then(|s| s.resource_claim_statuses.as_deref()).unwrap_or_default();
    statuses
        .iter()
        .find(|status| status.name == pod_claim.name)
        .map(|status| ClaimName { name: status.resource_claim_name.clone(), must_check_owner: true })
        .ok_or(ClaimNameError::NotCreatedYet)
}

/// `resourceclaim.IsForPod` (without PodGroup owners): the claim is in the pod's namespace and
/// controlled by the pod.
pub fn is_for_pod(pod: &Pod, claim: &ResourceClaim) -> bool {
    claim.metadata.namespace == pod.metadata.namespace
        && controller_of(&claim.metadata).is_some_and(|owner| Some(&owner.uid) == pod.metadata.uid.as_ref())
}

/// `resourceclaim.IsReservedForPod` (without PodGroup reservations): the claim's
/// `status.reservedFor` lists the pod's UID.
pub fn is_reserved_for_pod(pod: &Pod, claim: &ResourceClaim) -> bool {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let reserved = claim.status.as_ref().and_then(|s| s.reserved_for.as_deref()).unwrap_or_default();
    reserved.iter().any(|consumer| consumer.uid == uid)
}

/// `resourceclaim.ToleratesTaint`: an empty effect or key matches any; `Exists` matches any
/// value, `Equal` (or no operator) only the same value; another operator matches nothing.
/// Callers check the effect they react to themselves.
pub fn tolerates_taint(toleration: &DeviceToleration, taint: &DeviceTaint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => toleration.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default(),
        "Exists" => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn pod(value: Value) -> Pod {
        serde_json::from_value(value).expect("a pod")
    }

    fn entry(value: Value) -> PodResourceClaim {
        serde_json::from_value(value).expect("a pod claim")
    }

    #[test]
    fn a_claim_is_named_directly_or_through_the_pod_status() {
        let p = pod(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
            "status": {"resourceClaimStatuses": [
                {"name": "gpu", "resourceClaimName": "p-gpu-x1"}, {"name": "none"}]}}));
        let direct = claim_name(&p, &entry(json!({"name": "a", "resourceClaimName": "shared"})));
        assert_eq!(direct, Ok(ClaimName { name: Some("shared".into()), must_check_owner: false }));
        let templated = claim_name(&p, &entry(json!({"name": "gpu", "resourceClaimTemplateName": "t"})));
        assert_eq!(templated, Ok(ClaimName { name: Some("p-gpu-x1".into()), must_check_owner: true }));
        let skipped = claim_name(&p, &entry(json!({"name": "none", "resourceClaimTemplateName": "t"})));
        assert_eq!(skipped, Ok(ClaimName { name: None, must_check_owner: true }));
        let pending = claim_name(&p, &entry(json!({"name": "later", "resourceClaimTemplateName": "t"})));
        assert_eq!(pending, Err(ClaimNameError::NotCreatedYet));
        assert_eq!(claim_name(&p, &entry(json!({"name": "x"}))), Err(ClaimNameError::Unsupported));
    }

    #[test]
    fn a_claim_belongs_to_its_controlling_pod_and_is_reserved_by_uid() {
        let p = pod(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}}));
        let claim = |namespace: &str, owner: &str, reserved: &str| -> ResourceClaim {
            serde_json::from_value(json!({
                "metadata": {"name": "c", "namespace": namespace, "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner, "controller": true}]},
                "spec": {},
                "status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": reserved}]}
            }))
            .expect("a claim")
        };
        assert!(is_for_pod(&p, &claim("ns", "u1", "u1")));
        assert!(!is_for_pod(&p, &claim("ns", "u2", "u1")), "another pod's claim");
        assert!(!is_for_pod(&p, &claim("other", "u1", "u1")), "another namespace");
        assert!(is_reserved_for_pod(&p, &claim("ns", "u2", "u1")));
        assert!(!is_reserved_for_pod(&p, &claim("ns", "u1", "u2")));
    }

    #[test]
    fn tolerations_match_as_upstream() {
        let taint: DeviceTaint =
            serde_json::from_value(json!({"key": "k", "value": "v", "effect": "NoExecute"})).expect("a taint");
        let tolerates =
            |toleration: Value| tolerates_taint(&serde_json::from_value(toleration).expect("a toleration"), &taint);
        assert!(tolerates(json!({"operator": "Exists"})), "empty key and effect match all");
        assert!(tolerates(json!({"key": "k", "value": "v"})), "no operator is Equal");
        assert!(tolerates(json!({"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute"})));
        assert!(!tolerates(json!({"key": "k", "operator": "Equal", "value": "w"})));
        assert!(!tolerates(json!({"key": "other", "operator": "Exists"})));
        assert!(!tolerates(json!({"operator": "Exists", "effect": "NoSchedule"})));
        assert!(!tolerates(json!({"key": "k", "operator": "Lt", "value": "v"})), "an unknown operator");
    }
}
