//! `ValidatePersistentVolumeClaimUpdate` (v1.36, RecoverVolumeExpansionFailure GA): a claim's
//! spec is fixed once created, except `volumeName` while unset and, for a Bound claim, the
//! storage request and `volumeAttributesClassName`; the request may go down (to recover from a
//! failed expansion) but not to or below `status.capacity`; `volumeMode` never changes.
//!
//! The message carries `diff.Diff` of the internal specs: a unified diff of their JSON.

use serde_json::Value;

use super::{FieldError, difflib, gojson, immutable, semantically_equal};
use crate::quantity::Quantity;

const IMMUTABLE_SPEC: &str =
    "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims";

fn storage(object: &Value, path: &str) -> Quantity {
    object.pointer(path).and_then(Quantity::from_json).unwrap_or_else(Quantity::zero)
}

/// The update's causes.
pub(super) fn claim_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut causes = Vec::new();
    let (mut before, mut after) = (old["spec"].clone(), new["spec"].clone());
    if before["volumeName"].as_str().is_none_or(str::is_empty) {
        before["volumeName"] = after["volumeName"].clone();
    }
    // A main-resource update keeps the stored status: the old phase decides.
    let bound = old["status"]["phase"] == "Bound";
    if bound && after["resources"]["requests"].is_object() {
        after["resources"]["requests"]["storage"] = old["spec"]["resources"]["requests"]["storage"].clone();
    }
    if bound && !after["volumeAttributesClassName"].is_null() {
        after["volumeAttributesClassName"] = before["volumeAttributesClassName"].clone();
    }
    if !semantically_equal(&before, &after) {
        causes.push(FieldError::forbidden("spec", &format!("{IMMUTABLE_SPEC}\n{}", spec_diff(&before, &after))));
    }
    let requests = "/spec/resources/requests/storage";
    let new_size = storage(new, requests);
    if new_size < storage(old, requests) && new_size <= storage(old, "/status/capacity/storage") {
        causes.push(FieldError::forbidden(
            "spec.resources.requests.storage",
            "field can not be less than status.capacity",
        ));
    }
    if old["spec"]["volumeMode"] != new["spec"]["volumeMode"] {
        causes.push(immutable("spec.volumeMode", format!("{}", new["spec"]["volumeMode"])));
    }
    causes
}

/// `diff.Diff` of the internal specs: their indented JSON, compared line by line.
fn spec_diff(before: &Value, after: &Value) -> String {
    let json = |spec: &Value| gojson::structure(spec, gojson::PERSISTENT_VOLUME_CLAIM_SPEC).pretty(" ");
    difflib::unified_diff(&json(before), &json(after))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(request: &str, phase: &str) -> Value {
        json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": request}},
            "volumeMode": "Filesystem", "volumeName": "pv1"},
            "status": {"phase": phase, "capacity": {"storage": "1Gi"}}})
    }

    fn messages(causes: Vec<FieldError>) -> Vec<String> {
        causes.iter().map(|c| c.to_string().lines().next().unwrap_or_default().to_string()).collect()
    }

    #[test]
    fn a_bound_claim_may_change_its_request_only() {
        assert!(claim_update(&claim("2Gi", "Bound"), &claim("3Gi", "Bound")).is_empty());
        let mut other = claim("2Gi", "Bound");
        other["spec"]["accessModes"] = json!(["ReadWriteMany"]);
        assert_eq!(
            messages(claim_update(&claim("2Gi", "Bound"), &other)),
            [format!("spec: Forbidden: {IMMUTABLE_SPEC}")]
        );
        assert_eq!(
            messages(claim_update(&claim("1Gi", "Pending"), &claim("2Gi", "Pending"))),
            [format!("spec: Forbidden: {IMMUTABLE_SPEC}")]
        );
    }

    #[test]
    fn a_request_goes_down_only_while_above_the_capacity() {
        assert!(claim_update(&claim("3Gi", "Bound"), &claim("2Gi", "Bound")).is_empty());
        assert_eq!(
            messages(claim_update(&claim("3Gi", "Bound"), &claim("1Gi", "Bound"))),
            ["spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"]
        );
    }
}
