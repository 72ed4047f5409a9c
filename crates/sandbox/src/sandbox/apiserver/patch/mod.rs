//! PATCH bodies, applied the way kube-apiserver v1.33 applies them to built-in kinds:
//!
//! - `application/merge-patch+json`: [`json_merge_patch`] (RFC 7386, as evanphx/json-patch);
//! - `application/json-patch+json`: [`json_patch`] (RFC 6902, as evanphx/json-patch v4);
//! - `application/strategic-merge-patch+json`: [`strategic_merge_patch`]
//!   (k8s.io/apimachinery strategicpatch, with the merge keys of k8s.io/api in [`schema`]).
//!
//! Errors are typed ([`JsonPatchError`], [`StrategicPatchError`]) and read as kube-apiserver's
//! messages; the caller picks the status by variant:
//! - JSON patch: a body that is not a list of objects ([`JsonPatchError::Decode`], "json: cannot
//!   unmarshal ...") is 400 BadRequest; any failing operation is 422 Invalid.
//! - Strategic merge patch: [`StrategicPatchError::NotSupported`] (`strategic merge patch is not
//!   supported for <kind>`) is 415 UnsupportedMediaType (custom resources); a body that is not
//!   an object, "invalid patch format of ..." are 400 BadRequest; "lists of lists are not
//!   supported" is 422 Invalid; the rest (missing merge key, unknown `$patch` value, ...) is
//!   500 InternalError.

mod gofmt;
mod json_patch;
pub mod schema;
mod strategic;

use serde_json::{Map, Value};

pub use json_patch::{
    AccessError as JsonPatchAccessError, Atoi as JsonPatchAtoi, Error as JsonPatchError,
    FieldError as JsonPatchFieldError, Unmarshal as JsonPatchUnmarshal,
};
pub use strategic::Error as StrategicPatchError;

/// Applies a JSON merge patch (RFC 7386): `null` deletes a member, objects merge recursively,
/// anything else replaces. Like evanphx/json-patch, `null` members are also dropped from
/// values that are added whole (including objects inside added lists), while a list put in
/// place of an object is kept as it is.
pub fn json_merge_patch(target: &Value, patch: &Value) -> Value {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            let mut merged = target.clone();
            merge_members(&mut merged, patch);
            Value::Object(merged)
        }
        (_, Value::Object(_)) => without_nulls(patch.clone()),
        (_, patch) => patch.clone(),
    }
}

/// Applies JSON patch operations (RFC 6902): add, remove, replace, move, copy, test, with
/// JSON pointers (`~0`, `~1`, `-` to append). Stops at the first failing operation.
pub fn json_patch(target: &Value, operations: &Value) -> Result<Value, JsonPatchError> {
    json_patch::apply(target, operations)
}

/// Applies a Kubernetes strategic merge patch to an object of a built-in kind (`api_version`
/// and `kind` select the merge keys). Lists with a merge key merge item by item, lists of
/// scalars with the merge strategy take the union, other lists are replaced; the directives
/// `$patch` (`replace`, `delete`), `$retainKeys`, `$setElementOrder/<list>` and
/// `$deleteFromPrimitiveList/<list>` are honoured, and `null` deletes. Kinds that are not
/// built in are refused: kube-apiserver does not accept this patch type for custom resources.
pub fn strategic_merge_patch(
    target: &Value,
    patch: &Value,
    api_version: &str,
    kind: &str,
) -> Result<Value, StrategicPatchError> {
    strategic::apply(target, patch, api_version, kind)
}

/// `mergeDocs` of evanphx/json-patch.
fn merge_members(target: &mut Map<String, Value>, patch: &Map<String, Value>) {
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
            continue;
        }
        match (target.get_mut(key), value) {
            (Some(Value::Object(current)), Value::Object(value)) => merge_members(current, value),
            // An object replaced by a non-object keeps the patch value as it is.
            (Some(Value::Object(_)), value) => {
                target.insert(key.clone(), value.clone());
            }
            (_, value) => {
                target.insert(key.clone(), without_nulls(value.clone()));
            }
        }
    }
}

/// `pruneNulls`: drops `null` members of objects, at any depth (list items stay).
fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            Value::Object(map.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, without_nulls(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// RFC 7386 appendix A.
    #[test]
    fn rfc7386_examples() {
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "b"}), json!({"b": "c"}), json!({"a": "b", "b": "c"})),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (json!({"a": "b", "b": "c"}), json!({"a": null}), json!({"b": "c"})),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (json!({"a": {"b": "c"}}), json!({"a": {"b": "d", "c": null}}), json!({"a": {"b": "d"}})),
            (json!({"a": [{"b": "c"}]}), json!({"a": [1]}), json!({"a": [1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a": "b"}), json!(["c"]), json!(["c"])),
            (json!({"a": "foo"}), json!(null), json!(null)),
            (json!({"a": "foo"}), json!("bar"), json!("bar")),
            (json!({"e": null}), json!({"a": 1}), json!({"e": null, "a": 1})),
            (json!([1, 2]), json!({"a": "b", "c": null}), json!({"a": "b"})),
            (json!({}), json!({"a": {"bb": {"ccc": null}}}), json!({"a": {"bb": {}}})),
        ];
        for (target, patch, expected) in cases {
            assert_eq!(json_merge_patch(&target, &patch), expected, "{target} + {patch}");
        }
    }

    #[test]
    fn merge_patch_scales_and_labels() {
        let deployment = json!({
            "metadata": {"name": "web", "labels": {"app": "web", "tier": "front"}},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}}
        });
        let patched = json_merge_patch(&deployment, &json!({"spec": {"replicas": 3}}));
        assert_eq!(patched["spec"]["replicas"], 3);
        assert_eq!(patched["spec"]["template"], deployment["spec"]["template"]);
        let patched = json_merge_patch(&deployment, &json!({"metadata": {"labels": {"tier": null, "env": "prod"}}}));
        assert_eq!(patched["metadata"]["labels"], json!({"app": "web", "env": "prod"}));
    }

    #[test]
    fn merge_patch_replaces_lists_whole() {
        let pod = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b"}]}});
        let patched = json_merge_patch(&pod, &json!({"spec": {"containers": [{"name": "a", "image": "y"}]}}));
        assert_eq!(patched["spec"]["containers"], json!([{"name": "a", "image": "y"}]));
    }

    #[test]
    fn merge_patch_prunes_nulls_like_evanphx() {
        // Added whole: nulls inside objects in lists are dropped too, list items stay.
        let patched = json_merge_patch(&json!({}), &json!({"a": [{"b": null, "c": 1}, null]}));
        assert_eq!(patched, json!({"a": [{"c": 1}, null]}));
        // A list replacing an object is taken as it is.
        let patched = json_merge_patch(&json!({"a": {"x": 1}}), &json!({"a": [{"b": null}]}));
        assert_eq!(patched, json!({"a": [{"b": null}]}));
    }
}
