//! Between the stored form of an object and the form a request or answer uses: the
//! `apiVersion`/`kind` of the resource asked for, and events.k8s.io/v1 Events, which are core
//! Events in another shape.

use serde_json::{Map, Value};

use crate::sandbox::apiserver::status::ApiResult;
use crate::sandbox::storage::resources::ResourceType;

/// core/v1 Event field ↔ events.k8s.io/v1 Event field.
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
];

fn is_events_v1(resource: &ResourceType) -> bool {
    resource.group == "events.k8s.io"
}

/// The stored object as the resource asked for shows it.
pub fn to_external(resource: &ResourceType, stored: &Value) -> Value {
    let mut object = stored.clone();
    if is_events_v1(resource) {
        rename_fields(&mut object, EVENT_FIELDS.iter().map(|(core, v1)| (*core, *v1)));
    }
    set_type(&mut object, &resource.group_version(), resource.kind);
    object
}

/// An item of a list answer: typed lists carry no `apiVersion`/`kind` on their items.
pub fn to_list_item(resource: &ResourceType, stored: &Value) -> Value {
    let mut object = to_external(resource, stored);
    if let Some(map) = object.as_object_mut() {
        map.remove("apiVersion");
        map.remove("kind");
    }
    object
}

/// A request body in the stored form.
pub fn to_internal(resource: &ResourceType, mut object: Value) -> ApiResult<Value> {
    if !object.is_object() {
        return Err(crate::sandbox::apiserver::status::ApiError::bad_request("the request body must be a JSON object"));
    }
    if is_events_v1(resource) {
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        let api_version = object["apiVersion"].as_str().unwrap_or_default().to_string();
        rename_fields(&mut object, EVENT_FIELDS.iter().map(|(core, v1)| (*v1, *core)));
        // Checked against the resource asked for, then stored as core/v1.
        if !kind.is_empty() || !api_version.is_empty() {
            set_type(&mut object, &api_version, &kind);
        }
        return Ok(object);
    }
    Ok(object)
}

/// An events.k8s.io/v1 Event's fields under their core/v1 names (pkg/apis/events/v1 conversion).
pub fn events_v1_as_core(event: &Value) -> Value {
    let mut core = event.clone();
    rename_fields(&mut core, EVENT_FIELDS.iter().map(|(core, v1)| (*v1, *core)));
    core
}

/// The stored form's type of an object whose body was checked already.
pub fn storage_type(resource: &ResourceType, object: &mut Value) {
    if is_events_v1(resource) {
        set_type(object, "v1", "Event");
    } else {
        set_type(object, &resource.group_version(), resource.kind);
    }
}

fn rename_fields<'a>(object: &mut Value, pairs: impl Iterator<Item = (&'a str, &'a str)>) {
    let Some(map) = object.as_object_mut() else { return };
    for (from, to) in pairs {
        if let Some(value) = map.remove(from) {
            map.insert(to.to_string(), value);
        }
    }
}

fn set_type(object: &mut Value, api_version: &str, kind: &str) {
    let Some(map) = object.as_object_mut() else { return };
    // apiVersion and kind lead, as the real server writes them.
    let mut typed = Map::new();
    typed.insert("kind".into(), kind.into());
    typed.insert("apiVersion".into(), api_version.into());
    for (k, v) in std::mem::take(map) {
        if k != "kind" && k != "apiVersion" {
            typed.insert(k, v);
        }
    }
    *map = typed;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::storage::resources::find;
    use serde_json::json;

    #[test]
    fn events_convert_both_ways() {
        let v1 = find("events.k8s.io", "v1", "events").unwrap();
        let body = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"kind": "Pod", "name": "p"}, "note": "hello", "reason": "Started"});
        let mut stored = to_internal(v1, body).unwrap();
        storage_type(v1, &mut stored);
        assert_eq!(stored["involvedObject"]["name"], "p");
        assert_eq!(stored["message"], "hello");
        assert_eq!(stored["apiVersion"], "v1");
        let back = to_external(v1, &stored);
        assert_eq!(back["note"], "hello");
        assert_eq!(back["apiVersion"], "events.k8s.io/v1");
        let core = find("", "v1", "events").unwrap();
        assert_eq!(to_external(core, &stored)["message"], "hello");
        assert!(to_list_item(core, &stored).get("kind").is_none());
    }
}
