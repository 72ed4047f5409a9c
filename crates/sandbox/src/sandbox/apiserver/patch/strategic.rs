//! Strategic merge patch as kube-apiserver applies it: `StrategicMergeMapPatch` of
//! k8s.io/apimachinery/pkg/util/strategicpatch (patch.go), server side (parallel lists are
//! merged, unmatched nulls ignored). The functions follow the Go ones (named in their docs) so
//! that results, list order and error messages match, quirks included.

use serde_json::{Map, Value};

use super::gofmt;
use super::schema::{self, Schema, Strategy};

type Object = Map<String, Value>;

const DIRECTIVE: &str = "$patch";
const DELETE: &str = "delete";
const REPLACE: &str = "replace";
const MERGE: &str = "merge";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER: &str = "$setElementOrder";

const MAP_TYPE: &str = "map[string]interface {}";
const LIST_TYPE: &str = "[]interface {}";

/// Why a strategic merge patch was not applied, in k8s.io/apimachinery's words. The caller
/// picks the status by variant (see the module docs of `patch`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A kind that is not built in (custom resources): 415.
    #[error("strategic merge patch is not supported for {kind}")]
    NotSupported {
        /// The object's kind.
        kind: String,
    },
    /// A patch that is not an object: 400.
    #[error("json: cannot unmarshal {found} into Go value of type map[string]interface {{}}")]
    Unmarshal {
        /// The JSON kind of the patch.
        found: &'static str,
    },
    /// A malformed `$deleteFromPrimitiveList` directive: 400.
    #[error("invalid patch format of primitive list")]
    PrimitiveListFormat,
    /// A malformed `$retainKeys` directive, or one that omits a patched field: 400.
    #[error("invalid patch format of retainKeys")]
    RetainKeysFormat,
    /// A malformed `$setElementOrder` directive: 400.
    #[error("invalid patch format of setElementOrder list")]
    SetElementOrderFormat,
    /// A list of lists: 422.
    #[error("lists of lists are not supported")]
    ListOfLists,
    /// A list of maps with no merge key in the schema.
    #[error("cannot merge lists without merge key for type string")]
    NoMergeKeyForType,
    /// `mergepatch.ErrNoMergeKey`.
    #[error("map: {item} does not contain declared merge key: {merge_key}")]
    NoMergeKey {
        /// The item, as Go prints it.
        item: String,
        /// The merge key.
        merge_key: String,
    },
    /// `mergepatch.ErrBadArgType`.
    #[error("expected a {expected}, but received a {actual}")]
    BadArgType {
        /// The Go type expected.
        expected: &'static str,
        /// The Go type found.
        actual: &'static str,
    },
    /// `mergepatch.ErrBadPatchType`.
    #[error("unknown patch type: {directive} in map: {map}")]
    BadPatchType {
        /// The `$patch` value, as Go prints it.
        directive: String,
        /// The map holding it, as Go prints it.
        map: String,
    },
    /// `$patch: merge` in a list.
    #[error("merging lists cannot yet be specified in the patch")]
    MergeDirectiveInList,
    /// A list item that is not a map where maps are merged by key.
    #[error("value for key {index} is not a map.")]
    NotAMap {
        /// The item's index.
        index: usize,
    },
    /// `$setElementOrder` that does not follow the patch list.
    #[error("The order in patch list:\n{patch}\n doesn't match $setElementOrder list:\n{order}\n")]
    OrderMismatch {
        /// The patch list, as Go prints it.
        patch: String,
        /// The order list, as Go prints it.
        order: String,
    },
    /// Lists whose items are not all of one type.
    #[error("list element types are not identical: [{lists}]")]
    MixedElementTypes {
        /// The lists, as Go prints them, space-separated.
        lists: String,
    },
    /// `sliceElementType` of empty lists.
    #[error("no elements in any of the given slices")]
    NoElements,
}

/// Applies a strategic merge patch to an object of a built-in kind.
pub fn apply(target: &Value, patch: &Value, api_version: &str, kind: &str) -> Result<Value, Error> {
    let Some(root) = schema::for_kind(api_version, kind) else {
        return Err(Error::NotSupported { kind: kind.to_string() });
    };
    let patch = match patch {
        Value::Object(patch) => patch.clone(),
        // `json.Unmarshal` of `null` leaves the patch empty.
        Value::Null => Object::new(),
        other => {
            return Err(Error::Unmarshal { found: gofmt::json_kind(other) });
        }
    };
    let original = target.as_object().cloned().unwrap_or_default();
    merge_map(original, patch, Some(root)).map(Value::Object)
}

/// `mergeMap`: merges the fields of `patch` into `original`.
fn merge_map(mut original: Object, mut patch: Object, schema: Schema) -> Result<Object, Error> {
    if let Some(directive) = patch.get(DIRECTIVE).cloned() {
        return map_directive(&directive, patch);
    }
    apply_retain_keys(&mut original, &mut patch)?;
    merge_ordered_lists(&mut original, &mut patch, schema)?;
    for (key, value) in patch {
        if key.starts_with(DELETE_FROM_PRIMITIVE_LIST) {
            let field = extract_key(&key, DELETE_FROM_PRIMITIVE_LIST, Error::PrimitiveListFormat)?;
            merge_field(&mut original, field, value, schema, true)?;
        } else {
            merge_field(&mut original, key, value, schema, false)?;
        }
    }
    Ok(original)
}

/// `handleDirectiveInMergeMap`: `$patch` on a map. Only `replace` and `delete` are accepted
/// there; `merge` is refused like any other value.
fn map_directive(directive: &Value, mut patch: Object) -> Result<Object, Error> {
    match directive.as_str() {
        Some(REPLACE) => {
            patch.remove(DIRECTIVE);
            Ok(sanitize_object(patch))
        }
        // The map becomes empty; its key stays.
        Some(DELETE) => Ok(Object::new()),
        _ => Err(bad_patch_type(directive, &Value::Object(patch))),
    }
}

/// One iteration of `mergeMap`'s loop. `delete_list` marks the parallel list of a
/// `$deleteFromPrimitiveList/<key>` directive.
fn merge_field(
    original: &mut Object,
    key: String,
    value: Value,
    schema: Schema,
    delete_list: bool,
) -> Result<(), Error> {
    if value.is_null() {
        original.remove(&key);
        return Ok(());
    }
    let (strategy, child) = schema::field(schema, &key);
    let Some(slot) = original.get_mut(&key) else {
        // Taken as it is, less its directives. A `$deleteFromPrimitiveList` of an absent list
        // is skipped (`mergeMap`'s `isDeleteList`): deleting a finalizer twice (a retried
        // patch) must not add it back.
        if !delete_list && let Some(value) = without_directives(value) {
            original.insert(key, value);
        }
        return Ok(());
    };
    let merged = match (std::mem::take(slot), value) {
        (Value::Object(current), Value::Object(patch)) => Some(Value::Object(merge_map(current, patch, child)?)),
        (Value::Array(current), Value::Array(patch)) => {
            Some(Value::Array(merge_list(current, patch, strategy, child, delete_list)?))
        }
        // Of another type: a delete list leaves it as it is, as upstream's.
        (current, _) if delete_list => Some(current),
        (_, value) => without_directives(value),
    };
    match merged {
        Some(value) => *slot = value,
        None => {
            original.remove(&key);
        }
    }
    Ok(())
}

/// `removeDirectives`: a patch value taken whole, its `$patch` maps dropped (so deleting from
/// an absent list leaves an empty one) and its other directive keys and nulls stripped. `None`
/// when the value itself is a `$patch` map.
fn without_directives(value: Value) -> Option<Value> {
    match value {
        Value::Object(map) if map.contains_key(DIRECTIVE) => None,
        Value::Object(map) => Some(Value::Object(
            map.into_iter()
                .filter(|(key, value)| !value.is_null() && !is_directive(key))
                .filter_map(|(key, value)| Some((key, without_directives(value)?)))
                .collect(),
        )),
        Value::Array(items) => Some(Value::Array(items.into_iter().filter_map(without_directives).collect())),
        other => Some(other),
    }
}

/// `mergeSliceHandler`: lists with a merge strategy are merged, others replaced.
fn merge_list(
    original: Vec<Value>,
    patch: Vec<Value>,
    strategy: Strategy,
    items: Schema,
    delete_list: bool,
) -> Result<Vec<Value>, Error> {
    if strategy.merges() {
        merge_slice(original, patch, strategy.merge_key(), items, delete_list)
    } else {
        Ok(sanitize_list(patch))
    }
}

/// `mergeSlice`: merges two lists, then orders the result: patch items in the patch's order,
/// the others in the original's, interleaved where both know the items. Items new to the
/// list come before the remaining original ones.
fn merge_slice(
    original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
    items: Schema,
    delete_list: bool,
) -> Result<Vec<Value>, Error> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let kind = element_kind(&[&original, &patch])?;
    let (original, patch, merged) = if kind != Kind::Map {
        if delete_list {
            return Ok(original.into_iter().filter(|item| !patch.contains(item)).collect());
        }
        let merged = dedup(original.iter().chain(&patch).cloned());
        (original, patch, merged)
    } else {
        if merge_key.is_empty() {
            return Err(Error::NoMergeKeyForType);
        }
        let (original, patch) = apply_list_directives(original, patch, merge_key)?;
        let merged = merge_by_key(original.clone(), &patch, merge_key, items)?;
        (original, patch, merged)
    };
    let (patch_items, server_only) = partition(merged, &patch, merge_key)?;
    normalize_element_order(patch_items, server_only, &patch, &original, merge_key, kind)
}

/// `mergeSliceWithSpecialElements`: applies `$patch` items of a list of maps. Returns the
/// original (less deleted items, or the replacement) and the remaining patch items.
fn apply_list_directives(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>), Error> {
    let mut plain = Vec::with_capacity(patch.len());
    let mut replace = false;
    for item in patch {
        let Some(directive) = item.get(DIRECTIVE) else {
            plain.push(item);
            continue;
        };
        match directive.as_str() {
            Some(DELETE) => {
                let Some(key_value) = item.get(merge_key) else {
                    return Err(no_merge_key(&item, merge_key));
                };
                while let Some(index) = find_by_key(&original, merge_key, key_value)? {
                    original.remove(index);
                }
            }
            // Other `$patch` items are still checked.
            Some(REPLACE) => replace = true,
            Some(MERGE) => return Err(Error::MergeDirectiveInList),
            _ => return Err(bad_patch_type(directive, &item)),
        }
    }
    if replace { Ok((sanitize_list(plain), Vec::new())) } else { Ok((original, plain)) }
}

/// `mergeSliceWithoutSpecialElements`: merges each patch item into the original item with the
/// same merge key, or appends it.
fn merge_by_key(
    mut original: Vec<Value>,
    patch: &[Value],
    merge_key: &str,
    items: Schema,
) -> Result<Vec<Value>, Error> {
    for item in patch {
        let Some(key_value) = item.get(merge_key) else {
            return Err(no_merge_key(item, merge_key));
        };
        let Value::Object(patch_item) = item else {
            return Err(bad_arg_type(MAP_TYPE, item));
        };
        match find_by_key(&original, merge_key, key_value)? {
            Some(index) => {
                if let Value::Object(current) = &mut original[index] {
                    *current = merge_map(std::mem::take(current), patch_item.clone(), items)?;
                }
            }
            None => original.push(sanitize(item.clone())),
        }
    }
    Ok(original)
}

/// `findMapInSliceBasedOnKeyValue`: the index of the first map whose `key` is `value`.
fn find_by_key(list: &[Value], key: &str, value: &Value) -> Result<Option<usize>, Error> {
    for (index, item) in list.iter().enumerate() {
        let Value::Object(map) = item else {
            return Err(Error::NotAMap { index });
        };
        if map.get(key) == Some(value) {
            return Ok(Some(index));
        }
    }
    Ok(None)
}

/// `partitionMapsByPresentInList` / `partitionPrimitivesByPresentInList`: splits `merged`
/// into the items present in `by` and the others.
fn partition(merged: Vec<Value>, by: &[Value], merge_key: &str) -> Result<(Vec<Value>, Vec<Value>), Error> {
    let mut present = Vec::new();
    let mut others = Vec::new();
    for item in merged {
        let found = if merge_key.is_empty() {
            by.contains(&item)
        } else {
            if !item.is_object() {
                return Err(bad_arg_type(MAP_TYPE, &item));
            }
            let Some(key_value) = item.get(merge_key) else {
                return Err(no_merge_key(&item, merge_key));
            };
            find_by_key(by, merge_key, key_value)?.is_some()
        };
        if found {
            present.push(item);
        } else {
            others.push(item);
        }
    }
    Ok((present, others))
}

/// `normalizeElementOrder`: sorts the patch items by `patch_order` and the server-only items
/// by `server_order`, then interleaves them.
fn normalize_element_order(
    patch_items: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &str,
    kind: Kind,
) -> Result<Vec<Value>, Error> {
    let patch_items = normalize_slice_order(patch_items, patch_order, merge_key, kind)?;
    let server_only = normalize_slice_order(server_only, server_order, merge_key, kind)?;
    Ok(merge_sorted(server_only, patch_items, server_order, merge_key, kind))
}

/// `normalizeSliceOrder`: sorts `items` by their position in `order` (Go's stable insertion
/// sort, with its "unknown items sort first" comparison); `$patch: delete` items go last.
fn normalize_slice_order(
    mut items: Vec<Value>,
    order: &[Value],
    merge_key: &str,
    kind: Kind,
) -> Result<Vec<Value>, Error> {
    let mut deletions = Vec::new();
    if kind == Kind::Map {
        validate_merge_keys(merge_key, &items)?;
        validate_merge_keys(merge_key, order)?;
        let (delete, keep): (Vec<_>, Vec<_>) = items.into_iter().partition(is_delete_item);
        items = keep;
        deletions = delete;
    }
    let less = |a: &Value, b: &Value| match (position(order, a, merge_key, kind), position(order, b, merge_key, kind)) {
        (Some(a), Some(b)) => a < b,
        _ => true,
    };
    for i in 1..items.len() {
        let mut j = i;
        while j > 0 && less(&items[j], &items[j - 1]) {
            items.swap(j, j - 1);
            j -= 1;
        }
    }
    items.extend(deletions);
    Ok(items)
}

/// `mergeSortedSlice`: interleaves two sorted lists. A server-only item goes first only when
/// both it and the next patch item are in `server_order` and it comes earlier there.
fn merge_sorted(
    server_only: Vec<Value>,
    patch_items: Vec<Value>,
    server_order: &[Value],
    merge_key: &str,
    kind: Kind,
) -> Vec<Value> {
    let mut merged = Vec::with_capacity(server_only.len() + patch_items.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = patch_items.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (position(server_order, l, merge_key, kind), position(server_order, r, merge_key, kind)),
                (Some(l), Some(r)) if l < r
            ),
        };
        merged.extend(if take_left { left.next() } else { right.next() });
    }
    merged
}

/// `index`: where `item` is in `list`, by merge key for maps and by value otherwise.
fn position(list: &[Value], item: &Value, merge_key: &str, kind: Kind) -> Option<usize> {
    let probe = |v: &'_ Value| {
        let v = if kind == Kind::Map { v.get(merge_key) } else { Some(v) };
        v.filter(|v| !v.is_null()).cloned()
    };
    let wanted = probe(item);
    list.iter().position(|candidate| probe(candidate) == wanted)
}

/// `validateMergeKeyInLists`.
fn validate_merge_keys(merge_key: &str, list: &[Value]) -> Result<(), Error> {
    for item in list {
        if !item.is_object() {
            return Err(bad_arg_type(MAP_TYPE, item));
        }
        if item.get(merge_key).is_none() {
            return Err(no_merge_key(item, merge_key));
        }
    }
    Ok(())
}

fn is_delete_item(item: &Value) -> bool {
    item.get(DIRECTIVE).and_then(Value::as_str) == Some(DELETE)
}

/// `applyRetainKeysDirective`: `$retainKeys` clears the original's fields it does not name.
fn apply_retain_keys(original: &mut Object, patch: &mut Object) -> Result<(), Error> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(Error::RetainKeysFormat);
    };
    let retained = |key: &str| retain.iter().any(|k| k.as_str() == Some(key));
    let unlisted = patch.iter().any(|(key, value)| {
        !value.is_null()
            && !key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            && !key.starts_with(SET_ELEMENT_ORDER)
            && !retained(key)
    });
    if unlisted {
        return Err(Error::RetainKeysFormat);
    }
    original.retain(|key, _| retained(key));
    Ok(())
}

/// `mergePatchIntoOriginal`: merges each list that has a `$setElementOrder/<field>` directive
/// and orders it as the directive says (its items first in that order, interleaved with
/// the original's other items).
fn merge_ordered_lists(original: &mut Object, patch: &mut Object, schema: Schema) -> Result<(), Error> {
    let directives: Vec<String> = patch.keys().filter(|key| key.starts_with(SET_ELEMENT_ORDER)).cloned().collect();
    for directive in directives {
        let Some(order) = patch.remove(&directive) else {
            continue;
        };
        let Value::Array(order) = order else {
            return Err(bad_arg_type(LIST_TYPE, &order));
        };
        let field = extract_key(&directive, SET_ELEMENT_ORDER, Error::SetElementOrderFormat)?;
        let original_list = list_field(original, &field)?;
        let patch_list = list_field(patch, &field)?;
        let (strategy, items) = schema::field(schema, &field);
        let merge_key = strategy.merge_key();
        validate_order(patch_list.as_deref().unwrap_or_default(), &order, merge_key)?;
        let original_items = original_list.clone().unwrap_or_default();
        let kind = element_kind(&[&original_items, patch_list.as_deref().unwrap_or_default()]);
        let (merged, raw) = match (original_list, patch_list) {
            (None, None) => continue,
            (Some(original), None) => (original, false),
            (None, Some(patch)) => (patch, true),
            (Some(original), Some(patch)) => (merge_list(original, patch, strategy, items, false)?, false),
        };
        let (listed, others) = partition(merged, &order, merge_key)?;
        let ordered = normalize_element_order(listed, others, &order, &original_items, merge_key, kind?)?;
        let ordered = if raw { sanitize_list(ordered) } else { ordered };
        original.insert(field.clone(), Value::Array(ordered));
        patch.remove(&field);
    }
    Ok(())
}

/// `validatePatchWithSetOrderList`: the patch items must appear in the order list, in order.
fn validate_order(patch_list: &[Value], order: &[Value], merge_key: &str) -> Result<(), Error> {
    if order.is_empty() || patch_list.is_empty() {
        return Ok(());
    }
    if let Some(item) = patch_list.iter().find(|item| !merge_key.is_empty() && !item.is_object()) {
        return Err(bad_arg_type(MAP_TYPE, item));
    }
    let items: Vec<&Value> = patch_list.iter().filter(|item| merge_key.is_empty() || !is_delete_item(item)).collect();
    let (mut p, mut o) = (0, 0);
    while p < items.len() && o < order.len() {
        if items[p].get(DIRECTIVE).is_some() {
            p += 1;
            continue;
        }
        if merge_key_equal(items[p], &order[o], merge_key)? {
            p += 1;
        }
        o += 1;
    }
    if p < items.len() {
        return Err(Error::OrderMismatch {
            patch: gofmt::value(&Value::Array(patch_list.to_vec())),
            order: gofmt::value(&Value::Array(order.to_vec())),
        });
    }
    Ok(())
}

/// `mergeKeyValueEqual`.
fn merge_key_equal(left: &Value, right: &Value, merge_key: &str) -> Result<bool, Error> {
    if merge_key.is_empty() {
        return Ok(left == right);
    }
    for item in [left, right] {
        if !item.is_object() {
            return Err(bad_arg_type(MAP_TYPE, item));
        }
    }
    match (left.get(merge_key), right.get(merge_key)) {
        (Some(l), Some(r)) => Ok(l == r),
        (None, _) => Err(no_merge_key(left, merge_key)),
        (_, None) => Err(no_merge_key(right, merge_key)),
    }
}

/// A list field of a map, if present.
fn list_field(map: &Object, field: &str) -> Result<Option<Vec<Value>>, Error> {
    match map.get(field) {
        None => Ok(None),
        Some(Value::Array(items)) => Ok(Some(items.clone())),
        Some(other) => Err(bad_arg_type(LIST_TYPE, other)),
    }
}

/// `extractKey`: the field a `<prefix>/<field>` directive is about.
fn extract_key(directive: &str, prefix: &str, error: Error) -> Result<String, Error> {
    match directive.split_once('/') {
        Some((head, field)) if head == prefix => Ok(field.to_string()),
        _ => Err(error),
    }
}

/// The Go type of a JSON value as the merge code distinguishes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Nil,
    Bool,
    Int,
    Float,
    String,
    List,
    Map,
}

fn kind_of(value: &Value) -> Kind {
    match value {
        Value::Null => Kind::Nil,
        Value::Bool(_) => Kind::Bool,
        Value::Number(n) if n.is_f64() => Kind::Float,
        Value::Number(_) => Kind::Int,
        Value::String(_) => Kind::String,
        Value::Array(_) => Kind::List,
        Value::Object(_) => Kind::Map,
    }
}

/// `sliceElementType`: the one kind of all the lists' items.
fn element_kind(lists: &[&[Value]]) -> Result<Kind, Error> {
    let mut kind = None;
    for item in lists.iter().flat_map(|list| list.iter()) {
        let item_kind = kind_of(item);
        match kind {
            None if item_kind == Kind::List => return Err(Error::ListOfLists),
            None => kind = Some(item_kind),
            Some(kind) if kind != item_kind => {
                let lists: Vec<String> = lists.iter().map(|list| gofmt::value(&Value::Array(list.to_vec()))).collect();
                return Err(Error::MixedElementTypes { lists: lists.join(" ") });
            }
            Some(_) => {}
        }
    }
    kind.ok_or(Error::NoElements)
}

/// The distinct items, in first-seen order.
fn dedup(items: impl Iterator<Item = Value>) -> Vec<Value> {
    let mut unique: Vec<Value> = Vec::new();
    for item in items {
        if !unique.contains(&item) {
            unique.push(item);
        }
    }
    unique
}

/// A patch value stored without merging, as kube-apiserver keeps it: it decodes the result
/// into the Go type, which drops `null` fields and leftover directives.
fn sanitize(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(sanitize_object(map)),
        Value::Array(items) => Value::Array(sanitize_list(items)),
        other => other,
    }
}

fn sanitize_object(map: Object) -> Object {
    map.into_iter()
        .filter(|(key, value)| !value.is_null() && !is_directive(key))
        .map(|(k, v)| (k, sanitize(v)))
        .collect()
}

fn sanitize_list(items: Vec<Value>) -> Vec<Value> {
    items.into_iter().map(sanitize).collect()
}

fn is_directive(key: &str) -> bool {
    key == DIRECTIVE
        || key == RETAIN_KEYS
        || key.starts_with(SET_ELEMENT_ORDER)
        || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
}

/// `mergepatch.ErrNoMergeKey`.
fn no_merge_key(item: &Value, merge_key: &str) -> Error {
    Error::NoMergeKey { item: gofmt::value(item), merge_key: merge_key.to_string() }
}

/// `mergepatch.ErrBadArgType`.
fn bad_arg_type(expected: &'static str, actual: &Value) -> Error {
    let actual = if actual.is_null() { "%!s(<nil>)" } else { gofmt::type_name(actual) };
    Error::BadArgType { expected, actual }
}

/// `mergepatch.ErrBadPatchType`.
fn bad_patch_type(directive: &Value, map: &Value) -> Error {
    Error::BadPatchType { directive: gofmt::string(directive), map: gofmt::value(map) }
}

#[cfg(test)]
mod tests;
