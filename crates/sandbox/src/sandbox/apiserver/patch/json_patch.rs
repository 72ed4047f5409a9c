//! JSON Patch (RFC 6902) as kube-apiserver applies it, with gopkg.in/evanphx/json-patch.v4:
//! its error messages and its departures from the RFC (no operation on the whole document,
//! `replace` of a missing object member adds it, negative array indices count from the end,
//! `test` ignores members present only in the expected value).

use serde_json::{Map, Value};

use super::gofmt;

type Object = Map<String, Value>;

/// Why a JSON patch was not applied, in evanphx/json-patch v4's words. [`Error::Decode`] is a
/// body that is not a list of operations; every other variant is an operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The body, or one of its items, is not what `DecodePatch` expects.
    #[error(transparent)]
    Decode(Unmarshal),
    /// An operation whose `op` is missing or unknown (or a `null` item).
    #[error("Unexpected kind: {0}")]
    UnexpectedKind(String),
    /// add, remove and copy report any undecodable `path` as missing.
    #[error("{op} operation failed to decode path: missing value")]
    PathMissing {
        /// The operation.
        op: &'static str,
        /// Why the field did not decode (not in the message, as upstream's).
        #[source]
        source: FieldError,
    },
    /// replace, move and test: the `path` field did not decode.
    #[error("{op} operation failed to decode path: {source}")]
    DecodePath {
        /// The operation.
        op: &'static str,
        /// Why the field did not decode.
        #[source]
        source: FieldError,
    },
    /// move and copy: the `from` field did not decode.
    #[error("{op} operation failed to decode from: {source}")]
    DecodeFrom {
        /// The operation.
        op: &'static str,
        /// Why the field did not decode.
        #[source]
        source: FieldError,
    },
    /// add and remove: the parent of `path` is missing (the path quoted, as upstream's).
    #[error("{op} operation does not apply: doc is missing path: \"{path}\": missing value")]
    MissingQuoted {
        /// The operation.
        op: &'static str,
        /// The JSON pointer.
        path: String,
    },
    /// The other operations: a path (`what` says which) is missing.
    #[error("{op} operation does not apply: {what}: {path}: missing value")]
    Missing {
        /// The operation.
        op: &'static str,
        /// Upstream's words for what is missing ("doc is missing path", ...).
        what: &'static str,
        /// The JSON pointer.
        path: String,
    },
    /// The last token of a path could not be used on its container.
    #[error("error in {op} for {what}: '{path}': {source}")]
    Access {
        /// The operation named in the message (upstream's: replace says "remove").
        op: &'static str,
        /// "path" or "from".
        what: &'static str,
        /// The pointer, or the token, upstream names.
        path: String,
        /// What failed.
        #[source]
        source: AccessError,
    },
    /// copy: the copied value could not be added at `path`.
    #[error("error while adding value during copy: {0}")]
    CopyAdd(#[source] AccessError),
    /// A test operation whose value differs.
    #[error("testing value {path} failed: test failed")]
    TestFailed {
        /// The JSON pointer.
        path: String,
    },
}

/// `json.Unmarshal`'s type error.
#[derive(Debug, thiserror::Error)]
#[error("json: cannot unmarshal {kind} into Go value of type {go_type}")]
pub struct Unmarshal {
    /// The JSON kind found.
    kind: &'static str,
    /// The Go type expected.
    go_type: &'static str,
}

/// Why an operation's `path` or `from` did not decode.
#[derive(Debug, thiserror::Error)]
pub enum FieldError {
    /// Absent or `null`; the text is upstream's for that field.
    #[error("{0}")]
    Missing(&'static str),
    /// Not a string.
    #[error(transparent)]
    Unmarshal(Unmarshal),
}

/// Why a pointer's last token could not be used on its container.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// The container is neither an object nor an array.
    #[error("unknown object type")]
    UnknownObjectType,
    /// remove of an absent member.
    #[error("Unable to remove nonexistent key: {0}: missing value")]
    NonexistentKey(String),
    /// An index out of the array.
    #[error("Unable to access invalid index: {0}: invalid index referenced")]
    InvalidIndex(i64),
    /// A token that is not a number, on an array.
    #[error(transparent)]
    Atoi(#[from] Atoi),
    /// add: a token that is not a number, on an array.
    #[error("value was not a proper array index: '{key}': {source}", key = .source.key)]
    NotAnIndex {
        /// Why the token is not a number.
        #[source]
        source: Atoi,
    },
    /// A resolved index that does not fit a `usize` (cannot happen: it is below a length).
    #[error(transparent)]
    Index(#[from] std::num::TryFromIntError),
}

/// Go's `strconv.Atoi` error.
#[derive(Debug, thiserror::Error)]
#[error("strconv.Atoi: parsing {key:?}: {}", go_reason(.source))]
pub struct Atoi {
    /// The token.
    key: String,
    /// The parse error.
    #[source]
    source: std::num::ParseIntError,
}

/// Go's words for why a number does not parse.
fn go_reason(error: &std::num::ParseIntError) -> &'static str {
    match error.kind() {
        std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => "value out of range",
        _ => "invalid syntax",
    }
}

/// Applies the operations in order; the first failure stops and is returned.
pub fn apply(target: &Value, operations: &Value) -> Result<Value, Error> {
    let operations = decode(operations)?;
    let mut doc = target.clone();
    for operation in operations {
        apply_operation(&mut doc, operation)?;
    }
    Ok(doc)
}

/// `DecodePatch`: the patch must be a list of objects. A `null` item is an operation of
/// unknown kind (`None`).
fn decode(operations: &Value) -> Result<Vec<Option<&Object>>, Error> {
    let Value::Array(operations) = operations else {
        return Err(Error::Decode(unmarshal_error(operations, "jsonpatch.Patch")));
    };
    operations
        .iter()
        .map(|operation| match operation {
            Value::Object(operation) => Ok(Some(operation)),
            Value::Null => Ok(None),
            other => Err(Error::Decode(unmarshal_error(other, "jsonpatch.Operation"))),
        })
        .collect()
}

fn apply_operation(doc: &mut Value, operation: Option<&Object>) -> Result<(), Error> {
    let kind = operation.and_then(|op| op.get("op")).and_then(Value::as_str).unwrap_or("unknown");
    let Some(operation) = operation else {
        return Err(Error::UnexpectedKind(kind.to_string()));
    };
    match kind {
        "add" => add(doc, operation),
        "remove" => remove(doc, operation),
        "replace" => replace(doc, operation),
        "move" => move_value(doc, operation),
        "test" => test(doc, operation),
        "copy" => copy(doc, operation),
        other => Err(Error::UnexpectedKind(other.to_string())),
    }
}

fn add(doc: &mut Value, operation: &Object) -> Result<(), Error> {
    let path = path(operation).map_err(|source| Error::PathMissing { op: "add", source })?;
    let Some((container, key)) = find_parent(doc, path) else {
        return Err(Error::MissingQuoted { op: "add", path: path.to_string() });
    };
    insert(container, &key, value(operation)).map_err(|source| access("add", "path", path, source))
}

fn remove(doc: &mut Value, operation: &Object) -> Result<(), Error> {
    let path = path(operation).map_err(|source| Error::PathMissing { op: "remove", source })?;
    let Some((container, key)) = find_parent(doc, path) else {
        return Err(Error::MissingQuoted { op: "remove", path: path.to_string() });
    };
    delete(container, &key).map_err(|source| access("remove", "path", path, source))
}

fn replace(doc: &mut Value, operation: &Object) -> Result<(), Error> {
    let path = path(operation).map_err(|source| Error::DecodePath { op: "replace", source })?;
    let Some((container, key)) = find_parent(doc, path) else {
        return Err(missing("replace", "doc is missing path", path));
    };
    if get(container, &key).is_err() {
        return Err(missing("replace", "doc is missing key", path));
    }
    // Upstream's message says "remove" here.
    set(container, &key, value(operation)).map_err(|source| access("remove", "path", path, source))
}

fn move_value(doc: &mut Value, operation: &Object) -> Result<(), Error> {
    let from = from(operation).map_err(|source| Error::DecodeFrom { op: "move", source })?;
    let Some((container, key)) = find_parent(doc, from) else {
        return Err(missing("move", "doc is missing from path", from));
    };
    let moved = get(container, &key).map_err(|source| access("move", "path", &key, source))?;
    delete(container, &key).map_err(|source| access("move", "path", &key, source))?;
    let path = path(operation).map_err(|source| Error::DecodePath { op: "move", source })?;
    let Some((container, key)) = find_parent(doc, path) else {
        return Err(missing("move", "doc is missing destination path", path));
    };
    insert(container, &key, moved.unwrap_or(Value::Null)).map_err(|source| access("move", "path", path, source))
}

fn test(doc: &mut Value, operation: &Object) -> Result<(), Error> {
    let path = path(operation).map_err(|source| Error::DecodePath { op: "test", source })?;
    let Some((container, key)) = find_parent(doc, path) else {
        return Err(missing("test", "is missing path", path));
    };
    let actual = get(container, &key).map_err(|source| access("test", "path", path, source))?;
    let expected = operation.get("value").unwrap_or(&Value::Null);
    let passed = match actual {
        None => expected.is_null(),
        Some(actual) => operation.contains_key("value") && test_equal(&actual, expected),
    };
    if passed { Ok(()) } else { Err(Error::TestFailed { path: path.to_string() }) }
}

fn copy(doc: &mut Value, operation: &Object) -> Result<(), Error> {
    let from = from(operation).map_err(|source| Error::DecodeFrom { op: "copy", source })?;
    let Some((container, key)) = find_parent(doc, from) else {
        return Err(missing("copy", "doc is missing from path", from));
    };
    let copied = get(container, &key).map_err(|source| access("copy", "from", from, source))?;
    let path = path(operation).map_err(|source| Error::PathMissing { op: "copy", source })?;
    let Some((container, key)) = find_parent(doc, path) else {
        return Err(missing("copy", "doc is missing destination path", path));
    };
    insert(container, &key, copied.unwrap_or(Value::Null)).map_err(Error::CopyAdd)
}

fn missing(op: &'static str, what: &'static str, path: &str) -> Error {
    Error::Missing { op, what, path: path.to_string() }
}

fn access(op: &'static str, what: &'static str, path: &str, source: AccessError) -> Error {
    Error::Access { op, what, path: path.to_string(), source }
}

fn path(operation: &Object) -> Result<&str, FieldError> {
    string_field(operation, "path", "operation missing path field: missing value")
}

fn from(operation: &Object) -> Result<&str, FieldError> {
    string_field(operation, "from", "operation, missing from field: missing value")
}

fn string_field<'a>(operation: &'a Object, name: &str, missing: &'static str) -> Result<&'a str, FieldError> {
    match operation.get(name) {
        None | Some(Value::Null) => Err(FieldError::Missing(missing)),
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(FieldError::Unmarshal(unmarshal_error(other, "string"))),
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
fn get(container: &Value, key: &str) -> Result<Option<Value>, AccessError> {
    match container {
        Value::Object(map) => Ok(map.get(key).filter(|v| !v.is_null()).cloned()),
        Value::Array(items) => {
            let index = array_index(key, items.len())?;
            Ok(items.get(index).filter(|v| !v.is_null()).cloned())
        }
        _ => Err(AccessError::UnknownObjectType),
    }
}

/// `add`: sets a member, or inserts an item (`-` appends).
fn insert(container: &mut Value, key: &str, value: Value) -> Result<(), AccessError> {
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
            let index = atoi(key).map_err(|source| AccessError::NotAnIndex { source })?;
            // One past the end is allowed.
            let index = resolve_index(index, items.len() + 1)?;
            items.insert(index, value);
            Ok(())
        }
        _ => Err(AccessError::UnknownObjectType),
    }
}

fn delete(container: &mut Value, key: &str) -> Result<(), AccessError> {
    match container {
        Value::Object(map) => match map.remove(key) {
            Some(_) => Ok(()),
            None => Err(AccessError::NonexistentKey(key.to_string())),
        },
        Value::Array(items) => {
            let index = array_index(key, items.len())?;
            items.remove(index);
            Ok(())
        }
        _ => Err(AccessError::UnknownObjectType),
    }
}

fn set(container: &mut Value, key: &str, value: Value) -> Result<(), AccessError> {
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
        _ => Err(AccessError::UnknownObjectType),
    }
}

/// An existing item's index; negative ones count from the end.
fn array_index(key: &str, len: usize) -> Result<usize, AccessError> {
    resolve_index(atoi(key)?, len)
}

fn resolve_index(index: i64, len: usize) -> Result<usize, AccessError> {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let resolved = if index < 0 { index + len } else { index };
    if resolved < 0 || resolved >= len {
        return Err(AccessError::InvalidIndex(index));
    }
    Ok(usize::try_from(resolved)?)
}

/// Go's `strconv.Atoi`, with its error messages.
fn atoi(key: &str) -> Result<i64, Atoi> {
    key.parse::<i64>().map_err(|source| Atoi { key: key.to_string(), source })
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

fn unmarshal_error(value: &Value, go_type: &'static str) -> Unmarshal {
    Unmarshal { kind: gofmt::json_kind(value), go_type }
}

#[cfg(test)]
mod tests;
