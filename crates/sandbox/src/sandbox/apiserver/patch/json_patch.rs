//! JSON Patch (RFC 6902) as kube-apiserver applies it, with gopkg.in/evanphx/json-patch.v4:
//! its error messages and its departures from the RFC (no operation on the whole document,
//! `replace` of a missing object member adds it, negative array indices count from the end,
//! `test` ignores members present only in the expected value).

use serde_json::{Map, Value};

use super::gofmt;

type Object = Map<String, Value>;

/// Applies the operations in order; the first failure stops and is returned.
pub fn apply(target: &Value, operations: &Value) -> Result<Value, String> {
    let operations = decode(operations)?;
    let mut doc = target.clone();
    for operation in operations {
        apply_operation(&mut doc, operation)?;
    }
    Ok(doc)
}

/// `DecodePatch`: the patch must be a list of objects. A `null` item is an operation of
/// unknown kind (`None`).
fn decode(operations: &Value) -> Result<Vec<Option<&Object>>, String> {
    let Value::Array(operations) = operations else {
        return Err(unmarshal_error(operations, "jsonpatch.Patch"));
    };
    operations
        .iter()
        .map(|operation| match operation {
            Value::Object(operation) => Ok(Some(operation)),
            Value::Null => Ok(None),
            other => Err(unmarshal_error(other, "jsonpatch.Operation")),
        })
        .collect()
}

fn apply_operation(doc: &mut Value, operation: Option<&Object>) -> Result<(), String> {
    let kind = operation.and_then(|op| op.get("op")).and_then(Value::as_str).unwrap_or("unknown");
    let Some(operation) = operation else {
        return Err(format!("Unexpected kind: {kind}"));
    };
    match kind {
        "add" => add(doc, operation),
        "remove" => remove(doc, operation),
        "replace" => replace(doc, operation),
        "move" => move_value(doc, operation),
        "test" => test(doc, operation),
        "copy" => copy(doc, operation),
        other => Err(format!("Unexpected kind: {other}")),
    }
}

fn add(doc: &mut Value, operation: &Object) -> Result<(), String> {
    let path = path(operation).map_err(|_| "add operation failed to decode path: missing value".to_string())?;
    let Some((container, key)) = find_parent(doc, path) else {
        return Err(format!("add operation does not apply: doc is missing path: \"{path}\": missing value"));
    };
    insert(container, &key, value(operation)).map_err(|e| format!("error in add for path: '{path}': {e}"))
}

fn remove(doc: &mut Value, operation: &Object) -> Result<(), String> {
    let path = path(operation).map_err(|_| "remove operation failed to decode path: missing value".to_string())?;
    let Some((container, key)) = find_parent(doc, path) else {
        return Err(format!("remove operation does not apply: doc is missing path: \"{path}\": missing value"));
    };
    delete(container, &key).map_err(|e| format!("error in remove for path: '{path}': {e}"))
}

fn replace(doc: &mut Value, operation: &Object) -> Result<(), String> {
    let path = path(operation).map_err(|e| format!("replace operation failed to decode path: {e}"))?;
    let Some((container, key)) = find_parent(doc, path) else {
        return Err(format!("replace operation does not apply: doc is missing path: {path}: missing value"));
    };
    if get(container, &key).is_err() {
        return Err(format!("replace operation does not apply: doc is missing key: {path}: missing value"));
    }
    set(container, &key, value(operation)).map_err(|e| format!("error in remove for path: '{path}': {e}"))
}

fn move_value(doc: &mut Value, operation: &Object) -> Result<(), String> {
    let from = from(operation).map_err(|e| format!("move operation failed to decode from: {e}"))?;
    let Some((container, key)) = find_parent(doc, from) else {
        return Err(format!("move operation does not apply: doc is missing from path: {from}: missing value"));
    };
    let moved = get(container, &key).map_err(|e| format!("error in move for path: '{key}': {e}"))?;
    delete(container, &key).map_err(|e| format!("error in move for path: '{key}': {e}"))?;
    let path = path(operation).map_err(|e| format!("move operation failed to decode path: {e}"))?;
    let Some((container, key)) = find_parent(doc, path) else {
        return Err(format!("move operation does not apply: doc is missing destination path: {path}: missing value"));
    };
    insert(container, &key, moved.unwrap_or(Value::Null)).map_err(|e| format!("error in move for path: '{path}': {e}"))
}

fn test(doc: &mut Value, operation: &Object) -> Result<(), String> {
    let path = path(operation).map_err(|e| format!("test operation failed to decode path: {e}"))?;
    let Some((container, key)) = find_parent(doc, path) else {
        return Err(format!("test operation does not apply: is missing path: {path}: missing value"));
    };
    let actual = get(container, &key).map_err(|e| format!("error in test for path: '{path}': {e}"))?;
    let expected = operation.get("value").unwrap_or(&Value::Null);
    let passed = match actual {
        None => expected.is_null(),
        Some(actual) => operation.contains_key("value") && test_equal(&actual, expected),
    };
    if passed { Ok(()) } else { Err(format!("testing value {path} failed: test failed")) }
}

fn copy(doc: &mut Value, operation: &Object) -> Result<(), String> {
    let from = from(operation).map_err(|e| format!("copy operation failed to decode from: {e}"))?;
    let Some((container, key)) = find_parent(doc, from) else {
        return Err(format!("copy operation does not apply: doc is missing from path: {from}: missing value"));
    };
    let copied = get(container, &key).map_err(|e| format!("error in copy for from: '{from}': {e}"))?;
    let path = path(operation).map_err(|_| "copy operation failed to decode path: missing value".to_string())?;
    let Some((container, key)) = find_parent(doc, path) else {
        return Err(format!("copy operation does not apply: doc is missing destination path: {path}: missing value"));
    };
    insert(container, &key, copied.unwrap_or(Value::Null))
        .map_err(|e| format!("error while adding value during copy: {e}"))
}

fn path(operation: &Object) -> Result<&str, String> {
    string_field(operation, "path", "operation missing path field: missing value")
}

fn from(operation: &Object) -> Result<&str, String> {
    string_field(operation, "from", "operation, missing from field: missing value")
}

fn string_field<'a>(operation: &'a Object, name: &str, missing: &str) -> Result<&'a str, String> {
    match operation.get(name) {
        None | Some(Value::Null) => Err(missing.to_string()),
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(unmarshal_error(other, "string")),
    }
}

/// The operation's value; an absent one is `null`.
fn value(operation: &Object) -> Value {
    operation.get("value").cloned().unwrap_or(Value::Null)
}

/// `findObject`: the object or array that holds the last token of `path`, and that token
/// (unescaped). `None` when the path is empty or a parent is missing or not a container.
fn find_parent<'a>(doc: &'a mut Value, path: &str) -> Option<(&'a mut Value, String)> {
    let tokens: Vec<&str> = path.split('/').collect();
    let (last, parents) = tokens.get(1..)?.split_last()?;
    let mut current = doc;
    for token in parents {
        let token = unescape(token);
        let next = match current {
            Value::Object(map) => map.get_mut(&token),
            Value::Array(items) => {
                let index = array_index(&token, items.len()).ok()?;
                items.get_mut(index)
            }
            _ => None,
        }?;
        current = next;
    }
    (current.is_object() || current.is_array()).then(|| (current, unescape(last)))
}

/// RFC 6901 unescaping: `~1` is `/`, `~0` is `~`.
fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// The member or item at `key`; `None` for a missing member or a `null`.
fn get(container: &Value, key: &str) -> Result<Option<Value>, String> {
    match container {
        Value::Object(map) => Ok(map.get(key).filter(|v| !v.is_null()).cloned()),
        Value::Array(items) => {
            let index = array_index(key, items.len())?;
            Ok(items.get(index).filter(|v| !v.is_null()).cloned())
        }
        _ => Err("unknown object type".to_string()),
    }
}

/// `add`: sets a member, or inserts an item (`-` appends).
fn insert(container: &mut Value, key: &str, value: Value) -> Result<(), String> {
    match container {
        Value::Object(map) => {
            map.insert(key.to_string(), value);
            Ok(())
        }
        Value::Array(items) if key == "-" => {
            items.push(value);
            Ok(())
        }
        Value::Array(items) => {
            let index = atoi(key).map_err(|e| format!("value was not a proper array index: '{key}': {e}"))?;
            // One past the end is allowed.
            let index = resolve_index(index, items.len() + 1)?;
            items.insert(index, value);
            Ok(())
        }
        _ => Err("unknown object type".to_string()),
    }
}

fn delete(container: &mut Value, key: &str) -> Result<(), String> {
    match container {
        Value::Object(map) => match map.remove(key) {
            Some(_) => Ok(()),
            None => Err(format!("Unable to remove nonexistent key: {key}: missing value")),
        },
        Value::Array(items) => {
            let index = array_index(key, items.len())?;
            items.remove(index);
            Ok(())
        }
        _ => Err("unknown object type".to_string()),
    }
}

fn set(container: &mut Value, key: &str, value: Value) -> Result<(), String> {
    match container {
        Value::Object(map) => {
            map.insert(key.to_string(), value);
            Ok(())
        }
        Value::Array(items) => {
            let index = array_index(key, items.len())?;
            items[index] = value;
            Ok(())
        }
        _ => Err("unknown object type".to_string()),
    }
}

/// An existing item's index; negative ones count from the end.
fn array_index(key: &str, len: usize) -> Result<usize, String> {
    resolve_index(atoi(key)?, len)
}

fn resolve_index(index: i64, len: usize) -> Result<usize, String> {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let resolved = if index < 0 { index + len } else { index };
    if resolved < 0 || resolved >= len {
        return Err(format!("Unable to access invalid index: {index}: invalid index referenced"));
    }
    usize::try_from(resolved).map_err(|e| e.to_string())
}

/// Go's `strconv.Atoi`, with its error messages.
fn atoi(key: &str) -> Result<i64, String> {
    key.parse::<i64>().map_err(|e| {
        let reason = match e.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => "value out of range",
            _ => "invalid syntax",
        };
        format!("strconv.Atoi: parsing {key:?}: {reason}")
    })
}

/// `lazyNode.equal`: objects match when every member of the document's object is in the
/// expected one and equal (members only in the expected value are not looked at).
fn test_equal(actual: &Value, expected: &Value) -> bool {
    match (actual, expected) {
        (Value::Object(actual), Value::Object(expected)) => actual.iter().all(|(key, value)| {
            expected.get(key).is_some_and(|other| match (value.is_null(), other.is_null()) {
                (true, true) => true,
                (false, false) => test_equal(value, other),
                _ => false,
            })
        }),
        (Value::Array(actual), Value::Array(expected)) => {
            actual.len() == expected.len() && actual.iter().zip(expected).all(|(a, e)| test_equal(a, e))
        }
        (Value::Object(_) | Value::Array(_), _) => false,
        (actual, expected) => actual == expected,
    }
}

fn unmarshal_error(value: &Value, go_type: &str) -> String {
    format!("json: cannot unmarshal {} into Go value of type {go_type}", gofmt::json_kind(value))
}

#[cfg(test)]
mod tests;
