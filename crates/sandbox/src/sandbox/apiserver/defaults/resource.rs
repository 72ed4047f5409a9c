//! Defaults of resource.k8s.io/v1, Dynamic Resource Allocation (`pkg/apis/resource/v1/
//! defaults.go` and the calls `zz_generated.defaults.go` makes), with the Go zero values the
//! claims' JSON always carries: `spec.devices` is a struct, written as `{}` when empty.

use serde_json::Value;

use super::fields::{
    Field, Lit::Int, Lit::Str, child, child_at, entry, fill, is_zero, items, remove, set, str_at, val,
};
use super::pod;
use crate::sandbox::storage::objects;

/// `DeviceAllocationModeExactCount`, the default allocation mode.
const EXACT_COUNT: &str = "ExactCount";

/// ResourceClaim: `SetObjectDefaults_ResourceClaim`, on the spec's requests and on the
/// tolerations of an allocation's results.
pub(super) fn resource_claim(object: &mut Value) {
    if let Some(spec) = entry(object, "spec") {
        claim_spec(spec);
    }
    claim_status(object);
}

/// The status part of `SetObjectDefaults_ResourceClaim`: an allocation's tolerations.
fn claim_status(object: &mut Value) {
    if let Some(results) = child_at(object, &["status", "allocation", "devices"]) {
        for result in items(results, "results") {
            tolerations(result);
        }
    }
}

/// A claim's status update (`resourceclaimStatusStrategy.PrepareForUpdate`): the status
/// defaulted, and `dropDeallocatedStatusDevices` (DRAResourceClaimDeviceStatus, on): the
/// device statuses of devices the new allocation no longer has are dropped.
pub(super) fn claim_status_update(old: &Value, object: &mut Value) {
    claim_status(object);
    let ids = |claim: &Value| -> Vec<[Value; 4]> {
        let results = claim.pointer("/status/allocation/devices/results").and_then(Value::as_array);
        results.into_iter().flatten().map(device_id).collect()
    };
    let (before, after) = (ids(old), ids(object));
    let Some(devices) = object.pointer_mut("/status/devices").and_then(Value::as_array_mut) else { return };
    devices.retain(|device| {
        let id = device_id(device);
        !before.contains(&id) || after.contains(&id)
    });
    if devices.is_empty() {
        remove(&mut object["status"], "devices");
    }
}

/// A device as `structured.MakeSharedDeviceID` names it: driver, pool, device and share.
fn device_id(device: &Value) -> [Value; 4] {
    ["driver", "pool", "device", "shareID"].map(|key| device.get(key).cloned().unwrap_or(Value::Null))
}

/// ResourceClaimTemplate: `SetObjectDefaults_ResourceClaimTemplate`; the template's
/// metadata and claim spec are structs, always written.
pub(super) fn resource_claim_template(object: &mut Value) {
    let Some(template) = entry(object, "spec") else { return };
    pod::embedded_metadata(template);
    if let Some(spec) = entry(template, "spec") {
        claim_spec(spec);
    }
}

/// ResourceSlice: `SetDefaults_DeviceTaint` gives a device taint without `timeAdded` the
/// current time, truncated to seconds.
pub(super) fn resource_slice(object: &mut Value) {
    let Some(spec) = child(object, "spec") else { return };
    for device in items(spec, "devices") {
        for taint in items(device, "taints") {
            if taint.get("timeAdded").is_none_or(Value::is_null) {
                set(taint, "timeAdded", objects::now().into());
            }
        }
    }
}

/// A claim spec (of a claim or a template): `spec.devices` always present, and each request's
/// `exactly` (`SetDefaults_ExactDeviceRequest`) and `firstAvailable` subrequests
/// (`SetDefaults_DeviceSubRequest`) defaulted with their tolerations.
fn claim_spec(spec: &mut Value) {
    let Some(devices) = entry(spec, "devices") else { return };
    for request in items(devices, "requests") {
        if let Some(exactly) = child(request, "exactly") {
            allocation_mode(exactly);
            tolerations(exactly);
        }
        for sub_request in items(request, "firstAvailable") {
            allocation_mode(sub_request);
            tolerations(sub_request);
        }
    }
}

/// `ExactCount` when no mode is given, and then a count of one when none is given.
fn allocation_mode(request: &mut Value) {
    fill(request, &[val("allocationMode", Str(EXACT_COUNT))]);
    if str_at(request, "allocationMode") == EXACT_COUNT && request.get("count").is_none_or(is_zero) {
        fill(request, &[COUNT]);
    }
}

/// `count: 1` (an `int64` with `omitempty`: zero is unset).
const COUNT: Field = val("count", Int(1));

/// A device toleration's operator defaults to `Equal`.
fn tolerations(owner: &mut Value) {
    for toleration in items(owner, "tolerations") {
        fill(toleration, &[val("operator", Str("Equal"))]);
    }
}
