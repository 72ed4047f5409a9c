//! The one way typed objects cross to and from JSON in the shipped binary: through bytes.
//!
//! `serde_json` compiles a type's whole (de)serializer once per input or output it is used
//! with: a `&str`, a `&[u8]`, a `Value`, a `Vec<u8>` writer. A Pod's deserializer is large,
//! and every kind's nests the same structs (`PodSpec` in a Deployment, a Job, a
//! ControllerRevision's template...), so decoding one kind from both `&str` and `&[u8]`, or
//! converting it to a `Value` beside writing it, keeps two copies in the binary. Going through
//! bytes keeps one copy of each: [`from_bytes`] is the only typed decoder the client, the
//! informers and the controllers use, and `serde_json::to_vec` the only typed encoder;
//! [`to_value`] and [`from_value`] go through them, at the price of one more pass over JSON
//! on paths that are not hot (a template hashed or compared once per sync).

use serde::Serialize;
use std::borrow::Cow;
use std::ops::Range;

use serde::de::{DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

/// Decodes `T` from JSON bytes.
pub fn from_bytes<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    serde_json::from_slice(bytes)
}

/// Decodes an object `T` from JSON bytes passing over its `metadata.managedFields`, which the
/// informers drop anyway (upstream's controller manager trims them as they arrive,
/// `trim.TrimManagedFields`): the server sends one entry per field manager, each a tree of
/// field names that would be decoded into maps only to be thrown away, often the larger part
/// of a Pod's JSON. Everything else is decoded as [`from_bytes`] decodes it, by the same
/// decoder: the field's value is cut out of the bytes first ([`without_managed_fields`]), so
/// no kind's decoder is compiled twice.
pub fn from_bytes_without_managed_fields<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    match without_managed_fields(bytes) {
        Cow::Borrowed(bytes) => from_bytes(bytes),
        // An error's line and column are those of the bytes as served.
        Cow::Owned(trimmed) => from_bytes(&trimmed).or_else(|_| from_bytes(bytes)),
    }
}

/// The object's JSON with the value of its `metadata.managedFields` replaced by `null` (which
/// decodes as no managed fields), or the bytes as they are when they have no such value or are
/// not a JSON object: the decoder then reports what is wrong with them. Only the top-level
/// `metadata` is looked into, so a key of that name anywhere else (a ConfigMap's data, an
/// annotation, an env var) is data and stays.
pub fn without_managed_fields(bytes: &[u8]) -> Cow<'_, [u8]> {
    let Some(metadata) = raw_field(bytes, "metadata") else { return Cow::Borrowed(bytes) };
    let Some(managed_fields) = raw_field(metadata.as_bytes(), "managedFields") else { return Cow::Borrowed(bytes) };
    if managed_fields == "null" {
        return Cow::Borrowed(bytes);
    }
    let Some(span) = span_within(bytes, managed_fields.as_bytes()) else { return Cow::Borrowed(bytes) };
    let mut trimmed = Vec::with_capacity(bytes.len() - span.len() + 4);
    trimmed.extend_from_slice(&bytes[..span.start]);
    trimmed.extend_from_slice(b"null");
    trimmed.extend_from_slice(&bytes[span.end..]);
    Cow::Owned(trimmed)
}

/// The raw JSON of field `name` of the object `bytes` holds, borrowed from `bytes`, without
/// decoding the rest. Reading stops at that field: what follows is the decoder's to check.
pub fn raw_field<'a>(bytes: &'a [u8], name: &'static str) -> Option<&'a str> {
    let mut found = None;
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    // Stopping early is reported by serde_json as an object left unfinished: that error is
    // expected, and `found` says whether the field was there.
    let _ = deserializer.deserialize_map(FieldFinder { name, found: &mut found });
    found
}

/// Hands out the raw value of one field of an object, passing over (not decoding) the others.
struct FieldFinder<'f, 'de> {
    name: &'static str,
    found: &'f mut Option<&'de str>,
}

impl<'de> Visitor<'de> for FieldFinder<'_, 'de> {
    type Value = ();

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a JSON object")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<(), M::Error> {
        while let Some(is_wanted) = map.next_key_seed(KeyIs(self.name))? {
            if is_wanted {
                let raw: &'de RawValue = map.next_value()?;
                *self.found = Some(raw.get());
                return Ok(());
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }
}

/// Whether an object's key is the one named, without allocating it.
struct KeyIs(&'static str);

impl<'de> DeserializeSeed<'de> for KeyIs {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for KeyIs {
    type Value = bool;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("an object key")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<bool, E> {
        Ok(key == self.0)
    }
}

/// Where `part`, a slice borrowed from `whole`, lies in it.
fn span_within(whole: &[u8], part: &[u8]) -> Option<Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start.checked_add(part.len())?;
    (end <= whole.len()).then_some(start..end)
}

/// `serde_json::to_value`, through bytes.
pub fn to_value<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Value> {
    from_bytes(&serde_json::to_vec(value)?)
}

/// `serde_json::from_value`, through bytes.
pub fn from_value<T: DeserializeOwned>(value: &Value) -> serde_json::Result<T> {
    from_bytes(&serde_json::to_vec(value)?)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodTemplateSpec};
    use serde_json::json;

    use super::*;

    #[test]
    fn values_round_trip_through_bytes_as_through_serde_json() {
        let json = json!({"metadata": {"labels": {"app": "a"}},
            "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]}});
        let typed: PodTemplateSpec = from_value(&json).expect("a template");
        assert_eq!(typed, serde_json::from_value::<PodTemplateSpec>(json.clone()).unwrap());
        assert_eq!(to_value(&typed).unwrap(), serde_json::to_value(&typed).unwrap());
        assert_eq!(from_bytes::<Value>(json.to_string().as_bytes()).unwrap(), json);
    }

    /// A Pod as the server sends it: managedFields of three managers, and a ConfigMap-like
    /// key of that name elsewhere, which is data and stays.
    fn served_pod() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "default", "uid": "u1", "resourceVersion": "7",
                "labels": {"app": "web"},
                "annotations": {"managedFields": "an annotation of that name is data"},
                "managedFields": [
                    {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                     "time": "2026-11-29T10:00:00Z", "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}},
                    {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "subresource": "status",
                     "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:phase": {}}}},
                    {"manager": "kube-scheduler", "operation": "Update", "apiVersion": "v1"}
                ],
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "r1",
                    "controller": true}]},
            "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "nginx",
                "env": [{"name": "managedFields", "value": "data too"}]}]},
            "status": {"phase": "Running", "podIP": "10.0.0.5"}
        })
    }

    #[test]
    fn managed_fields_are_passed_over_and_everything_else_decoded_as_usual() {
        let bytes = serde_json::to_vec(&served_pod()).unwrap();
        let trimmed: Pod = from_bytes_without_managed_fields(&bytes).expect("a pod");
        let mut full: Pod = from_bytes(&bytes).expect("a pod");
        assert_eq!(full.metadata.managed_fields.as_ref().map(Vec::len), Some(3));
        full.metadata.managed_fields = None;
        assert_eq!(trimmed, full);
        // Fields named so elsewhere are data.
        let annotations = trimmed.metadata.annotations.clone().unwrap_or_default();
        assert!(annotations.contains_key("managedFields"));
        let env = trimmed.spec.as_ref().and_then(|s| s.containers[0].env.clone()).unwrap_or_default();
        assert_eq!(env[0].name, "managedFields");
        // A map's data is never trimmed, at any level.
        let data = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"managedFields": "x", "metadata": "y"}});
        let config_map: ConfigMap = from_bytes_without_managed_fields(&serde_json::to_vec(&data).unwrap()).unwrap();
        let data = config_map.data.unwrap_or_default();
        assert_eq!(
            (data.get("managedFields").map(String::as_str), data.get("metadata").map(String::as_str)),
            (Some("x"), Some("y"))
        );
        // Without metadata, or with a null one, as from_bytes.
        for object in
            [json!({"apiVersion": "v1", "kind": "Pod"}), json!({"apiVersion": "v1", "kind": "Pod", "metadata": null})]
        {
            let bytes = serde_json::to_vec(&object).unwrap();
            assert_eq!(from_bytes_without_managed_fields::<Pod>(&bytes).unwrap(), from_bytes::<Pod>(&bytes).unwrap());
        }
    }

    #[test]
    fn only_the_value_of_the_top_level_metadata_managed_fields_is_cut() {
        let cut = |json: &str| String::from_utf8(without_managed_fields(json.as_bytes()).into_owned()).unwrap();
        assert_eq!(
            cut(r#"{"kind":"Pod","metadata":{"name":"a","managedFields":[{"manager":"m"}],"uid":"u"},"spec":{}}"#),
            r#"{"kind":"Pod","metadata":{"name":"a","managedFields":null,"uid":"u"},"spec":{}}"#
        );
        // The key as the decoder reads it, escapes and all; spacing as served.
        assert_eq!(
            cut("{ \"metadata\" : { \"managedF\\u0069elds\" : [ 1 ] } }"),
            "{ \"metadata\" : { \"managedF\\u0069elds\" : null } }"
        );
        for untouched in [
            r#"{"kind":"Pod","spec":{"managedFields":[1]},"metadata":{"name":"a"}}"#,
            r#"{"data":{"metadata":{"managedFields":[1]}}}"#,
            r#"{"metadata":{"managedFields":null}}"#,
            r#"{"metadata":null}"#,
            r#"[{"metadata":{"managedFields":[1]}}]"#,
            r#"{"metadata":{"managedFields":[1}}"#,
            "",
        ] {
            assert!(matches!(without_managed_fields(untouched.as_bytes()), Cow::Borrowed(_)), "{untouched}");
        }
    }

    #[test]
    fn bad_input_is_refused_as_from_bytes_refuses_it() {
        let served = serde_json::to_vec(&served_pod()).unwrap();
        let cases: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"[]".to_vec(),
            b"{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": 7}".to_vec(),
            b"{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"managedFields\": [}}".to_vec(),
            b"{\"apiVersion\": \"v1\", \"kind\": \"Node\"}".to_vec(),
            [served.as_slice(), b" trailing"].concat(),
            served[..served.len() / 2].to_vec(),
        ];
        for bytes in cases {
            let text = String::from_utf8_lossy(&bytes).to_string();
            let full = from_bytes::<Pod>(&bytes).expect_err(&text).to_string();
            let trimmed = from_bytes_without_managed_fields::<Pod>(&bytes).expect_err(&text).to_string();
            assert_eq!(trimmed, full, "{text}");
        }
    }

    #[test]
    fn errors_name_what_is_wrong() {
        let error = from_value::<PodTemplateSpec>(&json!({"spec": {"containers": 7}})).unwrap_err();
        assert!(error.to_string().contains("invalid type: integer `7`"), "{error}");
    }
}
