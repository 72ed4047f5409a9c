//! The resource claim evaluator (`pkg/quota/v1/evaluator/core/resource_claims.go`, v1.36): the
//! claim count, the devices a claim may get per device class
//! (`<class>.deviceclass.resource.k8s.io/devices`), and, with `DRAExtendedResource`, the
//! extended resources a pod's generated claim stands for (`requests.<extended>` and
//! `requests.deviceclass.resource.kubernetes.io/<class>`), less what the pod itself is charged.

use k8s_openapi::api::resource::v1::{DeviceClaim, DeviceRequest, ResourceClaim};

use super::pods::DEVICE_CLASS_RESOURCE_PREFIX;
use super::resources::{self, ResourceList};
use crate::quantity::Quantity;

/// `ClaimObjectCountName`.
pub const OBJECT_COUNT_NAME: &str = "count/resourceclaims.resource.k8s.io";
/// `corev1.ResourceClaimsPerClass`.
pub const CLAIMS_PER_CLASS_SUFFIX: &str = ".deviceclass.resource.k8s.io/devices";
/// `corev1.ResourceImplicitExtendedClaimsPerClass`.
pub const IMPLICIT_EXTENDED_CLAIMS_PER_CLASS: &str = "requests.deviceclass.resource.kubernetes.io/";
/// `resourceapi.ExtendedResourceClaimAnnotation`: the claim the scheduler made for a pod's
/// extended resources.
pub const EXTENDED_RESOURCE_CLAIM_ANNOTATION: &str = "resource.kubernetes.io/extended-resource-claim";
/// `resourceapi.AllocationResultsMaxSize`: the devices an `All` request may get at worst.
const ALLOCATION_RESULTS_MAX_SIZE: i64 = 32;

/// What the evaluator asks the cluster when `DRAExtendedResource` is on (upstream's
/// `ExtendedResourceCache`, pod lister and claim-owner index).
pub trait ExtendedResources {
    /// `GetExtendedResource`: the `spec.extendedResourceName` of a device class.
    fn extended_resource_of_class(&self, class: &str) -> Option<String>;
    /// `GetDeviceClass(name) != nil`: whether a device class stands for this resource name
    /// (its `extendedResourceName`, or `deviceclass.resource.kubernetes.io/<class>`).
    fn has_class_for(&self, resource_name: &str) -> bool;
    /// `getVerifiedPodUsage`: the quota usage of the pod an extended-resource claim was made for,
    /// when that pod exists and this is its claim; `None` otherwise.
    fn verified_pod_usage(&self, claim: &ResourceClaim) -> Option<ResourceList>;
}

/// `V1ResourceByDeviceClass`.
pub fn resource_by_device_class(class: &str) -> String {
    format!("{class}{CLAIMS_PER_CLASS_SUFFIX}")
}

/// `claimEvaluator.MatchingResources`, in input order; `extended` is `Some` when
/// `DRAExtendedResource` is on.
pub fn matching_resources(input: &[String], extended: Option<&dyn ExtendedResources>) -> Vec<String> {
    let matches = |name: &str| {
        if name == OBJECT_COUNT_NAME || name.ends_with(CLAIMS_PER_CLASS_SUFFIX) {
            return true;
        }
        let Some(extended) = extended else { return false };
        if let Some(class) = name.strip_prefix(IMPLICIT_EXTENDED_CLAIMS_PER_CLASS)
            && extended.extended_resource_of_class(class).is_some_and(|r| !r.is_empty())
        {
            return true;
        }
        super::pods::is_extended_resource_name_for_quota(name) && extended.has_class_for(&name["requests.".len()..])
    };
    input.iter().filter(|name| matches(name)).cloned().collect()
}

/// `claimEvaluator.Usage`.
pub fn usage(claim: &ResourceClaim, extended: Option<&dyn ExtendedResources>) -> ResourceList {
    let mut result = ResourceList::from([(OBJECT_COUNT_NAME.to_string(), Quantity::from_units(1))]);
    let requests = claim.spec.devices.as_ref().and_then(|d: &DeviceClaim| d.requests.as_deref()).unwrap_or_default();
    for request in requests {
        for (class_resource, devices) in worst_case_devices(request) {
            resources::add_into(&mut result, &ResourceList::from([(class_resource, Quantity::from_units(devices))]));
        }
    }
    if let Some(extended) = extended {
        add_extended_resource_quota(&mut result, extended.verified_pod_usage(claim), extended);
    }
    result
}

/// The devices one request may get per device class resource: `exactly` counts its class;
/// `firstAvailable` counts, per class, the most any of its subrequests may get.
fn worst_case_devices(request: &DeviceRequest) -> Vec<(String, i64)> {
    if let Some(subrequests) = request.first_available.as_deref().filter(|s| !s.is_empty()) {
        let mut most: Vec<(String, i64)> = Vec::new();
        for sub in subrequests {
            let class = resource_by_device_class(&sub.device_class_name);
            let devices = device_count(sub.allocation_mode.as_deref(), sub.count);
            match most.iter_mut().find(|(c, _)| *c == class) {
                Some((_, n)) => *n = (*n).max(devices),
                None => most.push((class, devices)),
            }
        }
        return most;
    }
    match &request.exactly {
        Some(exact) => vec![(
            resource_by_device_class(&exact.device_class_name),
            device_count(exact.allocation_mode.as_deref(), exact.count),
        )],
        // Some unknown, future request type: no quota for it.
        None => Vec::new(),
    }
}

/// The devices an allocation mode may give: the count for `ExactCount`, the worst case for
/// `All`, none for a mode this version does not know (a downgrade).
fn device_count(mode: Option<&str>, count: Option<i64>) -> i64 {
    match mode {
        Some("ExactCount") => count.unwrap_or(0),
        Some("All") => ALLOCATION_RESULTS_MAX_SIZE,
        _ => 0,
    }
}

/// `addExtendedResourceQuota`: each per-class device count is also charged as the class's
/// implicit and explicit extended resource requests, less what the owning pod already pays.
fn add_extended_resource_quota(
    usage: &mut ResourceList,
    pod_usage: Option<ResourceList>,
    extended: &dyn ExtendedResources,
) {
    let mut charged = ResourceList::new();
    for (name, quantity) in usage.iter() {
        let Some(class) = name.strip_suffix(CLAIMS_PER_CLASS_SUFFIX).filter(|c| !c.is_empty()) else { continue };
        charged.insert(format!("{IMPLICIT_EXTENDED_CLAIMS_PER_CLASS}{class}"), *quantity);
        if let Some(resource) = extended.extended_resource_of_class(class).filter(|r| !r.is_empty()) {
            charged.insert(format!("requests.{resource}"), *quantity);
        }
    }
    let pod_usage = pod_usage.unwrap_or_default();
    for (name, quantity) in charged {
        let remaining = match pod_usage.get(&name) {
            Some(paid) => resources::subtract(
                &ResourceList::from([(name.clone(), quantity)]),
                &ResourceList::from([(name.clone(), *paid)]),
            )
            .get(&name)
            .copied()
            .unwrap_or_else(Quantity::zero),
            None => quantity,
        };
        if remaining > Quantity::zero() {
            usage.insert(name, remaining);
        }
    }
}

/// The implicit extended resource name of a device class (`deviceclass.resource.kubernetes.io/<class>`).
pub fn implicit_resource_name(class: &str) -> String {
    format!("{DEVICE_CLASS_RESOURCE_PREFIX}{class}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(requests: serde_json::Value) -> ResourceClaim {
        serde_json::from_value(json!({"metadata": {"name": "c", "namespace": "ns"},
            "spec": {"devices": {"requests": requests}}}))
        .unwrap()
    }

    fn text(list: &ResourceList) -> String {
        list.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    }

    struct Classes;
    impl ExtendedResources for Classes {
        fn extended_resource_of_class(&self, class: &str) -> Option<String> {
            (class == "gpu").then(|| "example.com/gpu".to_string())
        }
        fn has_class_for(&self, resource_name: &str) -> bool {
            resource_name == "example.com/gpu" || resource_name == implicit_resource_name("gpu")
        }
        fn verified_pod_usage(&self, claim: &ResourceClaim) -> Option<ResourceList> {
            let annotations = claim.metadata.annotations.as_ref()?;
            (annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION)? == "true")
                .then(|| ResourceList::from([("requests.example.com/gpu".to_string(), Quantity::from_units(1))]))
        }
    }

    #[test]
    fn counts_devices_per_class_as_upstream() {
        let c = claim(json!([
            {"name": "a", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}},
            {"name": "b", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}},
            {"name": "c", "firstAvailable": [
                {"name": "x", "deviceClassName": "fpga", "allocationMode": "ExactCount", "count": 3},
                {"name": "y", "deviceClassName": "fpga", "allocationMode": "ExactCount", "count": 1},
                {"name": "z", "deviceClassName": "nic", "allocationMode": "Unknown", "count": 9}]},
        ]));
        assert_eq!(
            text(&usage(&c, None)),
            "count/resourceclaims.resource.k8s.io=1,fpga.deviceclass.resource.k8s.io/devices=3,\
             gpu.deviceclass.resource.k8s.io/devices=34,nic.deviceclass.resource.k8s.io/devices=0"
        );
    }

    #[test]
    fn matches_counts_and_classes_and_extended_names_only_with_the_gate() {
        let input: Vec<String> = [
            "count/resourceclaims.resource.k8s.io",
            "gpu.deviceclass.resource.k8s.io/devices",
            "requests.deviceclass.resource.kubernetes.io/gpu",
            "requests.deviceclass.resource.kubernetes.io/fpga",
            "requests.example.com/gpu",
            "requests.example.com/other",
            "pods",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(matching_resources(&input, None), &input[..2]);
        assert_eq!(matching_resources(&input, Some(&Classes)), [&input[..3], &input[4..5]].concat());
    }

    #[test]
    fn an_extended_resource_claim_is_charged_less_what_its_pod_pays() {
        let mut c = claim(json!([
            {"name": "a", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}}]));
        assert_eq!(
            text(&usage(&c, Some(&Classes))),
            "count/resourceclaims.resource.k8s.io=1,gpu.deviceclass.resource.k8s.io/devices=2,\
             requests.deviceclass.resource.kubernetes.io/gpu=2,requests.example.com/gpu=2"
        );
        c.metadata.annotations = Some([(EXTENDED_RESOURCE_CLAIM_ANNOTATION.to_string(), "true".to_string())].into());
        assert_eq!(
            text(&usage(&c, Some(&Classes))),
            "count/resourceclaims.resource.k8s.io=1,gpu.deviceclass.resource.k8s.io/devices=2,\
             requests.deviceclass.resource.kubernetes.io/gpu=2,requests.example.com/gpu=1"
        );
    }
}
