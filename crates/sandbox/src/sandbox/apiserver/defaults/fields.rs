//! Small helpers for defaulting API JSON: tables of defaulted fields and safe navigation that
//! never panics on malformed input (a field of the wrong JSON type is left alone).

use serde_json::{Map, Value};

/// A default value that can live in a `const` table.
#[derive(Debug, Clone, Copy)]
pub(super) enum Lit {
    Str(&'static str),
    Int(i64),
    Bool(bool),
    /// `{}`: an empty struct behind a pointer (e.g. `securityContext`).
    Object,
}

impl Lit {
    fn to_value(self) -> Value {
        match self {
            Lit::Str(s) => Value::from(s),
            Lit::Int(i) => Value::from(i),
            Lit::Bool(b) => Value::from(b),
            Lit::Object => Value::Object(Map::new()),
        }
    }
}

/// What counts as "not set" for a field, following the Go type behind it.
#[derive(Debug, Clone, Copy)]
enum Unset {
    /// A pointer, slice or map: only absent (or `null`) is unset.
    Nil,
    /// A plain value (`string`, `int32`, `bool`): its zero value is unset too.
    Zero,
}

/// One defaulted field of a struct.
#[derive(Debug, Clone, Copy)]
pub(super) struct Field {
    key: &'static str,
    unset: Unset,
    value: Lit,
}

/// A pointer-typed field (`*string`, `*int32`, …): defaulted only when absent.
pub(super) const fn ptr(key: &'static str, value: Lit) -> Field {
    Field { key, unset: Unset::Nil, value }
}

/// A value-typed field (`string`, `int32`): defaulted when absent or zero (`""`, `0`).
pub(super) const fn val(key: &'static str, value: Lit) -> Field {
    Field { key, unset: Unset::Zero, value }
}

/// Applies a table of field defaults to `object` (nothing happens unless it is a JSON object).
pub(super) fn fill(object: &mut Value, fields: &[Field]) {
    let Some(map) = object.as_object_mut() else { return };
    for field in fields {
        let unset = match (field.unset, map.get(field.key)) {
            (_, None | Some(Value::Null)) => true,
            (Unset::Zero, Some(v)) => is_zero(v),
            (Unset::Nil, Some(_)) => false,
        };
        if unset {
            map.insert(field.key.to_string(), field.value.to_value());
        }
    }
}

/// Whether a JSON value is the zero value of a Go scalar (`""`, `0`, `false`, `null`).
pub(super) fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(_) | Value::Object(_) => false,
    }
}

/// Whether `object[key]` is absent, `null`, or an empty array/object/string (Go's `len(x) == 0`).
pub(super) fn is_empty(object: &Value, key: &str) -> bool {
    match object.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty(),
        Some(Value::String(s)) => s.is_empty(),
        Some(_) => false,
    }
}

/// `object[key]` as a string, or `""`.
pub(super) fn str_at<'a>(object: &'a Value, key: &str) -> &'a str {
    object.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// `object[key]` when it is a JSON object (a set struct pointer).
pub(super) fn child<'a>(object: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    object.get_mut(key).filter(|v| v.is_object())
}

/// Follows `path` through nested objects, each step as [`child`].
pub(super) fn child_at<'a>(object: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    path.iter().try_fold(object, |current, key| child(current, key))
}

/// `object[key]` as an object, created (`{}`) when absent or `null`: a Go struct value that
/// always exists. `None` when `object` is not an object or the field holds something else.
pub(super) fn entry<'a>(object: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    let map = object.as_object_mut()?;
    let slot = map.entry(key.to_string()).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.is_object().then_some(slot)
}

/// Follows `path`, creating each missing object as [`entry`].
pub(super) fn entry_at<'a>(object: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    path.iter().try_fold(object, |current, key| entry(current, key))
}

/// The elements of the array `object[key]` (none when absent or not an array).
pub(super) fn items<'a>(object: &'a mut Value, key: &str) -> impl Iterator<Item = &'a mut Value> {
    object.get_mut(key).and_then(Value::as_array_mut).into_iter().flatten()
}

/// Sets `object[key]` when `object` is an object.
pub(super) fn set(object: &mut Value, key: &str, value: Value) {
    if let Some(map) = object.as_object_mut() {
        map.insert(key.to_string(), value);
    }
}

/// Removes `object[key]` when `object` is an object.
pub(super) fn remove(object: &mut Value, key: &str) {
    if let Some(map) = object.as_object_mut() {
        map.remove(key);
    }
}
