//! Events (`pkg/apis/core/validation/events.go`): the legacy rules every Event write meets, and
//! the strict ones of writes through events.k8s.io/v1. The object is in its stored (core/v1)
//! shape; field paths are the internal type's, as kube-apiserver reports them.

use serde_json::Value;

use super::meta::text;
use super::{FieldError, immutable, quote};
use crate::apimachinery::validation::is_qualified_name;

const REPORTING_INSTANCE_LENGTH_LIMIT: usize = 128;
const ACTION_LENGTH_LIMIT: usize = 128;
const REASON_LENGTH_LIMIT: usize = 128;
const NOTE_LENGTH_LIMIT: usize = 1024;
/// The fields `ValidateEventUpdate` keeps fixed (internal name, core/v1 JSON name).
const IMMUTABLE: &[(&str, &str)] = &[
    ("involvedObject", "involvedObject"),
    ("reason", "reason"),
    ("message", "message"),
    ("source", "source"),
    ("firstTimestamp", "firstTimestamp"),
    ("lastTimestamp", "lastTimestamp"),
    ("count", "count"),
    ("type", "type"),
    ("eventTime", "eventTime"),
    ("action", "action"),
    ("related", "related"),
    ("reportingController", "reportingComponent"),
    ("reportingInstance", "reportingInstance"),
];

/// `ValidateEventCreate` (`old`: None) or `ValidateEventUpdate`; `strict`: the request came
/// through events.k8s.io/v1, not core/v1 (or events.k8s.io/v1beta1).
pub(super) fn event(object: &Value, old: Option<&Value>, strict: bool) -> Vec<FieldError> {
    let mut causes = legacy(object);
    if !strict {
        return causes;
    }
    match old {
        None => causes.extend(strict_create(object)),
        Some(old) => {
            if object["series"] != old["series"] {
                causes.extend(series(object));
            }
            for (field, json) in IMMUTABLE {
                if !super::semantically_equal(&object[*json], &old[*json]) {
                    causes.push(immutable(field, rendered(&object[*json])));
                }
            }
        }
    }
    causes
}

/// Whether a `metav1.Time` or `MicroTime` is the zero time (unset).
fn is_zero(time: &Value) -> bool {
    time.as_str().is_none_or(str::is_empty)
}

/// `legacyValidateEvent`.
fn legacy(event: &Value) -> Vec<FieldError> {
    let mut causes = Vec::new();
    let namespace = text(&event["metadata"], "namespace");
    let involved = text(&event["involvedObject"], "namespace");
    let mismatch =
        || FieldError::invalid("involvedObject.namespace", quote(involved), "does not match event.namespace");
    if is_zero(&event["eventTime"]) {
        // Old-style Events: the namespace is the object's, or default (or none) for a
        // cluster-scoped object.
        let agrees =
            if involved.is_empty() { namespace.is_empty() || namespace == "default" } else { namespace == involved };
        if !agrees {
            causes.push(mismatch());
        }
        return causes;
    }
    if involved.is_empty() && namespace != "default" && namespace != "kube-system" {
        causes.push(mismatch());
    }
    let controller = text(event, "reportingComponent");
    if controller.is_empty() {
        causes.push(FieldError::required("reportingController", ""));
    }
    for message in is_qualified_name(controller) {
        causes.push(FieldError::invalid("reportingController", quote(controller), &message));
    }
    let limited = |causes: &mut Vec<FieldError>, field: &str, json: &str, limit: usize, required: bool| {
        let value = text(event, json);
        if required && value.is_empty() {
            causes.push(FieldError::required(field, ""));
        }
        if value.len() > limit {
            causes.push(FieldError::invalid(field, quote(""), &format!("can have at most {limit} characters")));
        }
    };
    limited(&mut causes, "reportingInstance", "reportingInstance", REPORTING_INSTANCE_LENGTH_LIMIT, true);
    limited(&mut causes, "action", "action", ACTION_LENGTH_LIMIT, true);
    limited(&mut causes, "reason", "reason", REASON_LENGTH_LIMIT, true);
    limited(&mut causes, "message", "message", NOTE_LENGTH_LIMIT, false);
    causes
}

/// The create rules of events.k8s.io/v1 beyond the legacy ones (object metadata is checked when
/// the object is prepared).
fn strict_create(event: &Value) -> Vec<FieldError> {
    let mut causes = series(event);
    if is_zero(&event["eventTime"]) {
        causes.push(FieldError::required("eventTime", ""));
    }
    let kind = text(event, "type");
    if kind != "Normal" && kind != "Warning" {
        causes.push(FieldError::invalid("type", quote(""), &format!("has invalid value: {kind}")));
    }
    for field in ["firstTimestamp", "lastTimestamp"] {
        if !is_zero(&event[field]) {
            causes.push(FieldError::invalid(field, quote(""), "needs to be unset"));
        }
    }
    if event["count"].as_i64().unwrap_or(0) != 0 {
        causes.push(FieldError::invalid("count", quote(""), "needs to be unset"));
    }
    if !text(&event["source"], "component").is_empty() || !text(&event["source"], "host").is_empty() {
        causes.push(FieldError::invalid("source", quote(""), "needs to be unset"));
    }
    causes
}

/// `validateV1EventSeries`.
fn series(event: &Value) -> Vec<FieldError> {
    let series = &event["series"];
    if series.is_null() {
        return Vec::new();
    }
    let mut causes = Vec::new();
    if series["count"].as_i64().unwrap_or(0) < 2 {
        causes.push(FieldError::invalid("series.count", quote(""), "should be at least 2"));
    }
    if is_zero(&series["lastObservedTime"]) {
        causes.push(FieldError::required("series.lastObservedTime", ""));
    }
    causes
}

/// A changed field's new value in an immutability error: strings quoted, anything else as JSON.
fn rendered(value: &Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), quote)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(causes: &[FieldError]) -> Vec<&str> {
        causes.iter().map(|c| c.field.as_str()).collect()
    }

    #[test]
    fn old_style_events_live_in_their_objects_namespace() {
        let old_style = |namespace: &str, involved: Option<&str>| {
            json!({"metadata": {"name": "e", "namespace": namespace},
                   "involvedObject": {"kind": "Pod", "name": "p", "namespace": involved}})
        };
        assert!(event(&old_style("shop", Some("shop")), None, false).is_empty());
        assert!(event(&old_style("default", None), None, false).is_empty(), "a cluster-scoped object's Event");
        let causes = event(&old_style("default", Some("shop")), None, false);
        assert_eq!(fields(&causes), ["involvedObject.namespace"]);
        assert_eq!(causes[0].body(), "Invalid value: \"shop\": does not match event.namespace");
        assert_eq!(fields(&event(&old_style("kube-system", None), None, false)), ["involvedObject.namespace"]);
    }

    #[test]
    fn new_style_events_need_their_reporter_action_and_reason() {
        let bare = json!({"metadata": {"name": "e", "namespace": "kube-system"}, "eventTime": "2025-01-01T00:00:00.000000Z",
                          "involvedObject": {"kind": "Node", "name": "n"}});
        assert_eq!(
            fields(&event(&bare, None, false)),
            // Required, then IsQualifiedName's two messages for an empty name.
            [
                "reportingController",
                "reportingController",
                "reportingController",
                "reportingInstance",
                "action",
                "reason"
            ]
        );
        let mut full = bare.clone();
        full["reportingComponent"] = json!("kubernetes.io/kube-controller-manager");
        full["reportingInstance"] = json!("host-1");
        full["action"] = json!("Registered");
        full["reason"] = json!("RegisteredNode");
        full["type"] = json!("Normal");
        assert!(event(&full, None, false).is_empty());
        assert!(event(&full, None, true).is_empty());
        full["count"] = json!(1);
        full["series"] = json!({"count": 1});
        assert_eq!(fields(&event(&full, None, true)), ["series.count", "series.lastObservedTime", "count"]);
        assert!(event(&full, None, false).is_empty(), "core/v1 writes keep the legacy rules only");
    }

    #[test]
    fn strict_updates_keep_what_was_observed() {
        let old = json!({"metadata": {"name": "e", "namespace": "shop"}, "eventTime": "2025-01-01T00:00:00.000000Z",
                         "involvedObject": {"kind": "Pod", "name": "p", "namespace": "shop"},
                         "reportingComponent": "c", "reportingInstance": "i", "action": "A", "reason": "R",
                         "type": "Normal", "message": "m"});
        let mut new = old.clone();
        new["series"] = json!({"count": 2, "lastObservedTime": "2025-01-01T00:00:01.000000Z"});
        assert!(event(&new, Some(&old), true).is_empty());
        new["message"] = json!("other");
        let causes = event(&new, Some(&old), true);
        assert_eq!(fields(&causes), ["message"]);
        assert_eq!(causes[0].body(), "Invalid value: \"other\": field is immutable");
        assert!(event(&new, Some(&old), false).is_empty());
    }
}
