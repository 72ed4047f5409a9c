//! Generated list answers (docs/reliability.md, "Fuzzing"): a PodList with fields dropped or set to values
//! of the wrong type, `null`, huge numbers, deep nesting, and its text truncated. The typed,
//! raw (one object at a time) and metadata-only decoders must decode it or refuse it with one
//! line naming the type; what decodes as a whole decodes one object at a time alike.

use k8s_openapi::List;
use k8s_openapi::api::core::v1::Pod;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::{RawList, decode};
use crate::client::metadata::{PartialObjectMetadata, PartialObjectMetadataList};
use crate::fuzz::{assert_clear, config};

fn pod(name: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": "3", "labels": {"a": "b"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "u"}]},
        "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]},
        "status": {"phase": "Running"},
    })
}

fn list() -> Value {
    json!({
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "12", "continue": "next"},
        "items": [pod("a"), pod("b")],
    })
}

const FIELDS: &[&str] = &[
    "/kind",
    "/apiVersion",
    "/metadata",
    "/metadata/resourceVersion",
    "/metadata/continue",
    "/metadata/remainingItemCount",
    "/items",
    "/items/0",
    "/items/1/metadata",
    "/items/0/metadata/name",
    "/items/0/metadata/labels",
    "/items/0/metadata/creationTimestamp",
    "/items/0/metadata/ownerReferences",
    "/items/0/metadata/ownerReferences/0/controller",
    "/items/0/spec",
    "/items/0/spec/containers",
    "/items/0/spec/containers/0/ports/0/containerPort",
    "/items/1/status",
    "/items/1/extra",
];

fn nested(depth: usize) -> Value {
    let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

fn bad_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|n| json!(n)),
        Just(json!(18446744073709551615u64)),
        Just(json!(-2147483649i64)),
        any::<String>().prop_map(Value::String),
        Just(Value::String("2024-13-45T99:99:99Z".into())),
        (1usize..100_000).prop_map(|n| Value::String("x".repeat(n))),
        Just(json!([])),
        Just(json!({})),
        Just(json!([1, "a", null])),
        (1usize..120).prop_map(nested),
    ]
}

/// A list with some fields dropped or replaced, as text (possibly truncated or with numbers
/// too big for any integer).
fn answer() -> impl Strategy<Value = String> {
    let mutation = (proptest::sample::select(FIELDS), proptest::option::of(bad_value()));
    let raw = proptest::sample::select(vec![
        "".to_string(),
        "null".to_string(),
        "[]".to_string(),
        "{\"items\":null}".to_string(),
        "{\"items\":[null]}".to_string(),
        "{\"metadata\":null,\"items\":[]}".to_string(),
        "{\"items\":[{}]}".to_string(),
        "{\"items\":[{\"metadata\":{\"name\":1e999}}]}".to_string(),
        "{\"items\":[{\"metadata\":{\"generation\":1e400}}]}".to_string(),
        "{\"items\":[{\"metadata\":{\"generation\":99999999999999999999999}}]}".to_string(),
        format!("{{\"items\":[{{\"x\":{}{}}}]}}", "[".repeat(100_000), "]".repeat(100_000)),
        format!("{{\"items\":[{}{}]}}", "{\"a\":".repeat(50_000), "}".repeat(50_000)),
        format!("{{\"items\":{}", "[".repeat(100_000)),
    ]);
    prop_oneof![
        4 => (proptest::collection::vec(mutation, 0..5), any::<Option<prop::sample::Index>>()).prop_map(
            |(mutations, cut)| {
                let mut document = list();
                for (pointer, value) in mutations {
                    let (parent, key) = pointer.rsplit_once('/').unwrap();
                    match (document.pointer_mut(parent), value) {
                        (Some(Value::Object(map)), Some(value)) => _ = map.insert(key.into(), value),
                        (Some(Value::Object(map)), None) => _ = map.remove(key),
                        (Some(Value::Array(items)), value) if !items.is_empty() => match value {
                            Some(value) => items[0] = value,
                            None => _ = items.remove(0),
                        },
                        _ => {}
                    }
                }
                let text = document.to_string();
                let mut end = cut.map_or(text.len(), |cut| cut.index(text.len() + 1));
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                text[..end].to_string()
            }
        ),
        1 => raw,
        1 => any::<String>(),
    ]
}

fn check<T>(result: &crate::client::Result<T>, type_name: &str) {
    if let Err(error) = result {
        let message = error.to_string();
        assert_clear(&message);
        assert!(message.contains(&format!("{type_name}: ")), "{message}");
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn list_answers_decode_alike_whole_and_one_object_at_a_time_or_name_the_type(text in answer()) {
        let whole = decode::<List<Pod>>(text.as_bytes());
        let raw = decode::<RawList>(text.as_bytes());
        let metadata = decode::<PartialObjectMetadataList>(text.as_bytes());
        check(&whole, "List<Pod>");
        check(&raw, "RawList");
        check(&metadata, "PartialObjectMetadataList");
        if let Ok(whole) = whole {
            let raw = raw.expect("the raw list decodes whatever the typed list decodes");
            let one_at_a_time: Vec<Pod> =
                raw.items.iter().map(|item| serde_json::from_str(item.get()).unwrap()).collect();
            prop_assert_eq!(&one_at_a_time, &whole.items);
            prop_assert_eq!(raw.metadata, whole.metadata);
            let metadata = metadata.expect("the metadata list decodes whatever the typed list decodes");
            let names = |items: Vec<Option<String>>| items;
            prop_assert_eq!(
                names(metadata.items.iter().map(|m: &PartialObjectMetadata| m.metadata.name.clone()).collect()),
                names(whole.items.iter().map(|p| p.metadata.name.clone()).collect())
            );
        }
    }
}

#[test]
fn the_unmutated_list_decodes() {
    let text = list().to_string();
    assert_eq!(decode::<List<Pod>>(text.as_bytes()).unwrap().items.len(), 2);
    assert_eq!(decode::<RawList>(text.as_bytes()).unwrap().items.len(), 2);
    assert_eq!(decode::<PartialObjectMetadataList>(text.as_bytes()).unwrap().items.len(), 2);
}

/// Found by the generated answers: the typed and metadata-only lists read `"metadata": null`
/// as absent, the raw list the informers use refused it.
#[test]
fn null_list_metadata_is_absent_metadata() {
    let text = br#"{"metadata":null,"items":[]}"#;
    assert!(decode::<List<Pod>>(text).is_ok());
    assert_eq!(decode::<RawList>(text).unwrap().metadata, Default::default());
}

#[test]
fn type_names_are_short() {
    assert_eq!(super::short_type_name::<List<Pod>>(), "List<Pod>");
    assert_eq!(super::short_type_name::<Option<(u8, Vec<String>)>>(), "Option<(u8, Vec<String>)>");
}
