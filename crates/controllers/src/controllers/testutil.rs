//! Fixtures the controllers' unit tests share.

use serde_json::Value;

/// A 409 Conflict as the API server answers an update of a stale object.
pub fn conflict() -> crate::client::Error {
    let body = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the object has been modified","reason":"Conflict","code":409}"#;
    crate::client::ApiError::from_response(409, body, None).into()
}

/// Merges `patch` into `target`: objects key by key, anything else replaced (not RFC 7386: a
/// null is written, not a deletion).
pub fn merge_json(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                merge_json(target.entry(key).or_insert(Value::Null), value);
            }
        }
        (target, patch) => *target = patch,
    }
}
