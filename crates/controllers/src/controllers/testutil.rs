//! Fixtures the controllers' unit tests share.

use serde_json::Value;

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
