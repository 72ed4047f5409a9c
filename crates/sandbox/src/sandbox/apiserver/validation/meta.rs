//! Field rules shared by every kind's validation: label maps, annotations, label selectors and
//! DNS-1123 labels (apimachinery's `apis/meta/v1/validation`, over [`crate::apimachinery::validation`]).

use serde_json::Value;

use super::{FieldError, quote};
use crate::apimachinery::validation::{is_dns1123_label, is_qualified_name, is_valid_label_value};

/// `TotalAnnotationSizeLimitB`.
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

/// The entries of a JSON map in sorted key order (Go iterates maps randomly; sorted is one of
/// its orders and keeps messages stable).
pub(super) fn sorted_entries(map: &Value) -> Vec<(&String, &Value)> {
    let mut entries: Vec<(&String, &Value)> = map.as_object().map(|m| m.iter().collect()).unwrap_or_default();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries
}

pub(super) fn text<'a>(object: &'a Value, field: &str) -> &'a str {
    object[field].as_str().unwrap_or_default()
}

/// `unversionedvalidation.ValidateLabels`: qualified-name keys and label values.
pub(super) fn labels(map: &Value, path: &str) -> Vec<FieldError> {
    let mut causes = Vec::new();
    for (key, value) in sorted_entries(map) {
        for message in is_qualified_name(key) {
            causes.push(FieldError::invalid(path, quote(key), &message));
        }
        let value = value.as_str().unwrap_or_default();
        for message in is_valid_label_value(value) {
            causes.push(FieldError::invalid(path, quote(value), &message));
        }
    }
    causes
}

/// `ValidateAnnotations`: keys are qualified names (case aside), all together at most 256 KiB.
pub(super) fn annotations(map: &Value, path: &str) -> Vec<FieldError> {
    let mut causes = Vec::new();
    let mut size = 0;
    for (key, value) in sorted_entries(map) {
        for message in is_qualified_name(&key.to_lowercase()) {
            causes.push(FieldError::invalid(path, quote(key), &message));
        }
        size += key.len() + value.as_str().map_or(0, str::len);
    }
    if size > ANNOTATIONS_MAX_BYTES {
        causes.push(FieldError::too_long(path, ANNOTATIONS_MAX_BYTES));
    }
    causes
}

/// `ValidateLabelSelector` with invalid label values refused (`AllowInvalidLabelValueInSelector`
/// false, as for every workload created through apps/v1 and batch/v1).
pub(super) fn label_selector(selector: &Value, path: &str) -> Vec<FieldError> {
    if selector.is_null() {
        return Vec::new();
    }
    let mut causes = Vec::new();
    let expressions = selector["matchExpressions"].as_array().map(Vec::as_slice).unwrap_or_default();
    for (i, requirement) in expressions.iter().enumerate() {
        causes.extend(selector_requirement(requirement, &format!("{path}.matchExpressions[{i}]")));
    }
    causes.extend(labels(&selector["matchLabels"], &format!("{path}.matchLabels")));
    causes
}

/// `ValidateLabelSelectorRequirement`.
fn selector_requirement(requirement: &Value, path: &str) -> Vec<FieldError> {
    let mut causes = Vec::new();
    let values = requirement["values"].as_array().map(Vec::as_slice).unwrap_or_default();
    let operator = text(requirement, "operator");
    match operator {
        "In" | "NotIn" if values.is_empty() => causes.push(FieldError::required(
            &format!("{path}.values"),
            "must be specified when `operator` is 'In' or 'NotIn'",
        )),
        "Exists" | "DoesNotExist" if !values.is_empty() => causes.push(FieldError::forbidden(
            &format!("{path}.values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
        other => {
            causes.push(FieldError::invalid(&format!("{path}.operator"), quote(other), "not a valid selector operator"))
        }
    }
    let key = text(requirement, "key");
    for message in is_qualified_name(key) {
        causes.push(FieldError::invalid(&format!("{path}.key"), quote(key), &message));
    }
    for (i, value) in values.iter().enumerate() {
        let value = value.as_str().unwrap_or_default();
        for message in is_valid_label_value(value) {
            causes.push(FieldError::invalid(&format!("{path}.values[{i}]"), quote(value), &message));
        }
    }
    causes
}

/// `ValidateDNS1123Label`: one Invalid cause per problem.
pub(super) fn dns_label(value: &str, path: &str) -> Vec<FieldError> {
    is_dns1123_label(value).iter().map(|m| FieldError::invalid(path, quote(value), m)).collect()
}

/// `ValidateNonnegativeField` on an optional integer field.
pub(super) fn nonnegative(object: &Value, field: &str, path: &str) -> Option<FieldError> {
    object[field].as_i64().and_then(|v| FieldError::nonnegative(&format!("{path}.{field}"), v))
}

/// An integer field, 0 when unset (Go's zero value).
pub(super) fn int(object: &Value, field: &str) -> i64 {
    object[field].as_i64().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selector_requirements_need_values_for_in_and_none_for_exists() {
        let selector = json!({"matchExpressions": [{"key": "a", "operator": "In"},
            {"key": "b", "operator": "Exists", "values": ["x"]}, {"key": "c", "operator": "Near"}]});
        let causes = label_selector(&selector, "spec.selector");
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.selector.matchExpressions[0].values",
                "spec.selector.matchExpressions[1].values",
                "spec.selector.matchExpressions[2].operator"
            ]
        );
        assert_eq!(causes[2].body(), "Invalid value: \"Near\": not a valid selector operator");
    }
}
