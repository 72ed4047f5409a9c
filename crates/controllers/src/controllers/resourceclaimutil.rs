//! The pattern for reaching the ResourceClaim a pod's `spec.resourceClaims` entry refers to,
//! after upstream v1.36's `k8s.io/dynamic-resource-allocation/resourceclaim` (`resourceclaim.go`):
//! the claim's name ([`name`]), whether a generated claim is the pod's ([`is_for_pod`]), whether
//! it is reserved for the pod ([`is_reserved_for_pod`]) and the consumer reference the pod
//! reserves it with ([`bind_to`]); plus the well-known names of `k8s.io/api/resource/v1`.
//!
//! PodGroup claims (DRAWorkloadResourceClaims, alpha and off in v1.36) are not built: the checks
//! that only read the pod's own fields take upstream's `accept_pod_group_*` switch; [`bind_to`]
//! binds to the pod, as upstream does without a PodGroup.

use k8s_openapi::api::core::v1::{Pod, PodResourceClaim};
use k8s_openapi::api::resource::v1::{DeviceTaint, DeviceToleration, ResourceClaim, ResourceClaimConsumerReference};

use crate::controllers::nodeutil::tolerates_fields;
use crate::runtime::controller_ref::controller_of;
use crate::runtime::informer::object_key;

/// `resourceapi.Finalizer`: keeps an allocated claim until its allocation is cleared.
pub const FINALIZER: &str = "resource.kubernetes.io/delete-protection";
/// `resourceapi.PodResourceClaimAnnotation`: on a claim generated from a template, the name of
/// the pod's `spec.resourceClaims` entry it was generated for.
pub const POD_RESOURCE_CLAIM_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";
/// `resourceapi.ExtendedResourceClaimAnnotation`: `"true"` on a claim the scheduler created for
/// a pod's extended resources.
pub const EXTENDED_RESOURCE_CLAIM_ANNOTATION: &str = "resource.kubernetes.io/extended-resource-claim";
/// `schedulingapi.GroupName`, whose `PodGroup` owners and consumers are accepted only with
/// DRAWorkloadResourceClaims.
const SCHEDULING_GROUP: &str = "scheduling.k8s.io";

/// Why [`name`] has no name: upstream's `ErrAPIUnsupported` and `ErrClaimNotFound`, with their
/// messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Neither `resourceClaimName` nor `resourceClaimTemplateName` is set.
    #[error("pod \"{namespace}/{pod}\", spec.resourceClaim {claim}: none of the supported fields are set")]
    ApiUnsupported {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        pod: String,
        /// The entry's name, quoted as Go's `%q`.
        claim: String,
    },
    /// A template claim without its entry in `status.resourceClaimStatuses` yet.
    #[error("pod \"{namespace}/{pod}\": ResourceClaim not created yet")]
    ClaimNotFound {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        pod: String,
    },
}

/// Why a claim is not the pod's ([`is_for_pod`]) or cannot be bound to it ([`bind_to`]), with
/// upstream's messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The claim is in another namespace.
    #[error("ResourceClaim {claim} is not in the same namespace as Pod {pod}")]
    OtherNamespace {
        /// `namespace/name` of the claim.
        claim: String,
        /// `namespace/name` of the pod.
        pod: String,
    },
    /// Neither the pod nor its PodGroup controls the claim.
    #[error("ResourceClaim {claim} was not created for Pod {pod} (neither Pod nor PodGroup {group} is the owner)")]
    NotForPodOrGroup {
        /// `namespace/name` of the claim.
        claim: String,
        /// `namespace/name` of the pod.
        pod: String,
        /// The pod's PodGroup.
        group: String,
    },
    /// The pod does not control the claim.
    #[error("ResourceClaim {claim} was not created for Pod {pod} (Pod is not owner)")]
    NotForPod {
        /// `namespace/name` of the claim.
        claim: String,
        /// `namespace/name` of the pod.
        pod: String,
    },
    /// The pod's entry names neither a claim nor a template.
    #[error("Pod {namespace}/{pod} claim {claim}: none of the supported fields are set")]
    NoClaimSource {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        pod: String,
        /// The entry's name.
        claim: String,
    },
}

/// The name of a claim and whether [`is_for_pod`] must check it (it was generated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimName {
    /// `None`: the claim was intentionally not created and the entry can be ignored.
    pub name: Option<String>,
    /// Whether the claim was generated from a template, so that it must be the pod's.
    pub must_check_owner: bool,
}

fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or_default()
}

fn pod_name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

/// `resourceclaim.Name`: the name of the ResourceClaim a pod claim refers to or was created for.
pub fn name(pod: &Pod, pod_claim: &PodResourceClaim) -> Result<ClaimName, NameError> {
    if let Some(claim_name) = &pod_claim.resource_claim_name {
        return Ok(ClaimName { name: Some(claim_name.clone()), must_check_owner: false });
    }
    if pod_claim.resource_claim_template_name.is_some() {
        let statuses = pod.status.as_ref().and_then(|s| s.resource_claim_statuses.as_deref()).unwrap_or_default();
        if let Some(status) = statuses.iter().find(|s| s.name == pod_claim.name) {
            return Ok(ClaimName { name: status.resource_claim_name.clone(), must_check_owner: true });
        }
        return Err(NameError::ClaimNotFound { namespace: namespace(pod).into(), pod: pod_name(pod).into() });
    }
    Err(NameError::ApiUnsupported {
        namespace: namespace(pod).into(),
        pod: pod_name(pod).into(),
        claim: crate::apimachinery::strconv::quote(&pod_claim.name),
    })
}

/// `resourceclaim.IsForPod`: the claim is controlled by the pod (or, with
/// `accept_pod_group_owner`, by the pod's PodGroup), with upstream's error otherwise.
pub fn is_for_pod(pod: &Pod, claim: &ResourceClaim, accept_pod_group_owner: bool) -> Result<(), Error> {
    let claim_namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
    let (claim_key, pod_key) = (object_key(&claim.metadata), object_key(&pod.metadata));
    if claim_namespace != namespace(pod) {
        return Err(Error::OtherNamespace { claim: claim_key, pod: pod_key });
    }
    let controlled = controller_of(&claim.metadata).is_some_and(|c| Some(&c.uid) == pod.metadata.uid.as_ref());
    if controlled {
        return Ok(());
    }
    if accept_pod_group_owner {
        if is_for_pod_group_by_pod(pod, claim) {
            return Ok(());
        }
        let group = pod_group_name(pod).unwrap_or_default().to_string();
        return Err(Error::NotForPodOrGroup { claim: claim_key, pod: pod_key, group });
    }
    Err(Error::NotForPod { claim: claim_key, pod: pod_key })
}

/// `spec.schedulingGroup.podGroupName`.
fn pod_group_name(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.scheduling_group.as_ref()?.pod_group_name.as_deref()
}

/// `isForPodGroupByPod`: the claim's controller is the pod's PodGroup, by name.
fn is_for_pod_group_by_pod(pod: &Pod, claim: &ResourceClaim) -> bool {
    let Some(group) = pod_group_name(pod) else { return false };
    controller_of(&claim.metadata).is_some_and(|c| {
        c.name == group && c.kind == "PodGroup" && c.api_version.starts_with(&format!("{SCHEDULING_GROUP}/"))
    })
}

/// `resourceclaim.IsReservedForPod`: the pod's uid (or, with `accept_pod_group_reservation`,
/// its PodGroup by name) is among the claim's `status.reservedFor`.
pub fn is_reserved_for_pod(pod: &Pod, claim: &ResourceClaim, accept_pod_group_reservation: bool) -> bool {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    reserved_for(claim).iter().any(|reserved| {
        reserved.uid == uid
            || (accept_pod_group_reservation
                && reserved.api_group.as_deref() == Some(SCHEDULING_GROUP)
                && reserved.resource == "podgroups"
                && pod_group_name(pod) == Some(reserved.name.as_str()))
    })
}

/// `status.reservedFor`, empty when unset.
pub fn reserved_for(claim: &ResourceClaim) -> &[ResourceClaimConsumerReference] {
    claim.status.as_ref().and_then(|s| s.reserved_for.as_deref()).unwrap_or_default()
}

/// `resourceclaim.CanBeReserved`: upstream sets no limit on sharing a claim yet.
pub fn can_be_reserved(_claim: &ResourceClaim) -> bool {
    true
}

/// `resourceclaim.BindTo` without a PodGroup: the pod, as `{apiGroup: "", resource: pods}`
/// (the empty group is omitted, as Go's `omitempty` does).
pub fn bind_to(pod: &Pod, pod_claim: &PodResourceClaim) -> Result<ResourceClaimConsumerReference, Error> {
    if pod_claim.resource_claim_name.is_none() && pod_claim.resource_claim_template_name.is_none() {
        return Err(Error::NoClaimSource {
            namespace: namespace(pod).into(),
            pod: pod_name(pod).into(),
            claim: pod_claim.name.clone(),
        });
    }
    Ok(ResourceClaimConsumerReference {
        api_group: None,
        resource: "pods".into(),
        name: pod_name(pod).to_string(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
    })
}

/// `resourceclaim.ToleratesTaint`: an empty effect or key matches any; `Exists` matches any
/// value, `Equal` (or no operator) only the same value; another operator matches nothing.
/// Callers check the effect they react to themselves.
pub fn tolerates_taint(toleration: &DeviceToleration, taint: &DeviceTaint) -> bool {
    let DeviceToleration { effect, key, operator, value, .. } = toleration;
    tolerates_fields([effect, key, operator, value], (&taint.effect, &taint.key, &taint.value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "team", "uid": "p1"},
            "spec": {"containers": [], "schedulingGroup": {"podGroupName": "gang"}},
            "status": status,
        }))
        .expect("a pod")
    }

    fn claim(value: serde_json::Value) -> ResourceClaim {
        let mut claim: ResourceClaim = serde_json::from_value(value).expect("a claim");
        claim.metadata.namespace.get_or_insert_with(|| "team".into());
        claim.metadata.name.get_or_insert_with(|| "web-gpu-x1y2z".into());
        claim
    }

    fn pod_claim(value: serde_json::Value) -> PodResourceClaim {
        serde_json::from_value(value).expect("a pod claim")
    }

    #[test]
    fn a_named_claim_is_used_as_it_is_and_not_checked() {
        let named = pod_claim(json!({"name": "gpu", "resourceClaimName": "shared"}));
        let expected = ClaimName { name: Some("shared".into()), must_check_owner: false };
        assert_eq!(name(&pod(json!({})), &named), Ok(expected));
    }

    #[test]
    fn a_template_claim_is_named_by_the_pod_status() {
        let templated = pod_claim(json!({"name": "gpu", "resourceClaimTemplateName": "t"}));
        let not_yet = name(&pod(json!({})), &templated);
        assert!(matches!(not_yet, Err(NameError::ClaimNotFound { .. })));
        assert_eq!(not_yet.unwrap_err().to_string(), "pod \"team/web\": ResourceClaim not created yet");
        let created = pod(json!({"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "web-gpu-x1y2z"}]}));
        let expected = ClaimName { name: Some("web-gpu-x1y2z".into()), must_check_owner: true };
        assert_eq!(name(&created, &templated), Ok(expected));
        let skipped = pod(json!({"resourceClaimStatuses": [{"name": "gpu"}]}));
        assert_eq!(name(&skipped, &templated), Ok(ClaimName { name: None, must_check_owner: true }));
    }

    #[test]
    fn a_claim_with_neither_field_is_an_unsupported_api() {
        let empty = pod_claim(json!({"name": "gpu"}));
        let expected = "pod \"team/web\", spec.resourceClaim \"gpu\": none of the supported fields are set";
        let unsupported = name(&pod(json!({})), &empty).unwrap_err();
        assert!(matches!(unsupported, NameError::ApiUnsupported { .. }));
        assert_eq!(unsupported.to_string(), expected);
        assert_eq!(
            bind_to(&pod(json!({})), &empty).map_err(|e| e.to_string()),
            Err("Pod team/web claim gpu: none of the supported fields are set".into())
        );
    }

    #[test]
    fn only_a_claim_the_pod_controls_is_for_the_pod() {
        let owned = claim(json!({"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "p1", "controller": true}]}, "spec": {}}));
        assert_eq!(is_for_pod(&pod(json!({})), &owned, false), Ok(()));
        let not_owned = claim(json!({"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "p1"}]}, "spec": {}}));
        assert_eq!(
            is_for_pod(&pod(json!({})), &not_owned, false).map_err(|e| e.to_string()),
            Err("ResourceClaim team/web-gpu-x1y2z was not created for Pod team/web (Pod is not owner)".into())
        );
        let elsewhere = claim(json!({"metadata": {"namespace": "other"}, "spec": {}}));
        assert_eq!(
            is_for_pod(&pod(json!({})), &elsewhere, false).map_err(|e| e.to_string()),
            Err("ResourceClaim other/web-gpu-x1y2z is not in the same namespace as Pod team/web".into())
        );
    }

    #[test]
    fn a_pod_group_owner_counts_only_when_accepted() {
        let by_group = claim(json!({"metadata": {"ownerReferences": [{"apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup", "name": "gang", "uid": "g1", "controller": true}]}, "spec": {}}));
        assert!(is_for_pod(&pod(json!({})), &by_group, false).is_err());
        assert_eq!(is_for_pod(&pod(json!({})), &by_group, true), Ok(()));
        let other = claim(json!({"spec": {}}));
        assert_eq!(
            is_for_pod(&pod(json!({})), &other, true).map_err(|e| e.to_string()),
            Err("ResourceClaim team/web-gpu-x1y2z was not created for Pod team/web (neither Pod nor PodGroup gang is \
                 the owner)"
                .into())
        );
    }

    #[test]
    fn reservations_are_matched_by_pod_uid_or_accepted_pod_group_name() {
        let for_pod = claim(json!({"spec": {}, "status": {"reservedFor": [
            {"resource": "pods", "name": "web", "uid": "p1"}]}}));
        assert!(is_reserved_for_pod(&pod(json!({})), &for_pod, false));
        let for_group = claim(json!({"spec": {}, "status": {"reservedFor": [
            {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "gang", "uid": "g1"}]}}));
        assert!(!is_reserved_for_pod(&pod(json!({})), &for_group, false));
        assert!(is_reserved_for_pod(&pod(json!({})), &for_group, true));
        assert!(!is_reserved_for_pod(&pod(json!({})), &claim(json!({"spec": {}})), true));
    }

    #[test]
    fn a_pod_binds_to_its_claims_as_a_pods_consumer() {
        let templated = pod_claim(json!({"name": "gpu", "resourceClaimTemplateName": "t"}));
        let reference = bind_to(&pod(json!({})), &templated).expect("a reference");
        let expected = json!({"resource": "pods", "name": "web", "uid": "p1"});
        assert_eq!(serde_json::to_value(reference).expect("json"), expected);
    }
}
