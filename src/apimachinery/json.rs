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
use serde::de::{DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, IntoDeserializer, MapAccess, Visitor};
use serde_json::Value;

/// Decodes `T` from JSON bytes.
pub fn from_bytes<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    serde_json::from_slice(bytes)
}

/// Decodes an object `T` from JSON bytes passing over its `metadata.managedFields`, which the
/// informers drop anyway (upstream's controller manager trims them as they arrive,
/// `trim.TrimManagedFields`): the server sends one entry per field manager, each a tree of
/// field names that would be decoded into maps only to be thrown away, often the larger part
/// of a Pod's JSON. Everything else is decoded as [`from_bytes`] decodes it.
pub fn from_bytes_without_managed_fields<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = T::deserialize(Trimmed { inner: &mut deserializer, level: Level::Object })?;
    deserializer.end()?;
    Ok(value)
}

/// Where in the object a [`Trimmed`] deserializer is.
#[derive(Clone, Copy)]
enum Level {
    /// The object itself: its `metadata` is trimmed.
    Object,
    /// Its `metadata`: `managedFields` is passed over.
    Metadata,
}

/// A deserializer that hands the visitor a map without the keys [`Level`] drops. Only maps
/// (and an optional map) are looked into; anything else goes to the inner deserializer as it
/// is, so a value of another shape gets the inner deserializer's error.
struct Trimmed<D> {
    inner: D,
    level: Level,
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Trimmed<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_any(TrimmedVisitor { inner: visitor, level: self.level })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_struct(name, fields, TrimmedVisitor { inner: visitor, level: self.level })
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_map(TrimmedVisitor { inner: visitor, level: self.level })
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_option(TrimmedVisitor { inner: visitor, level: self.level })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct newtype_struct seq tuple tuple_struct enum identifier ignored_any
    }
}

/// The visitor's view through a [`Trimmed`] deserializer.
struct TrimmedVisitor<V> {
    inner: V,
    level: Level,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for TrimmedVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        self.inner.expecting(formatter)
    }

    fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<V::Value, M::Error> {
        self.inner.visit_map(TrimmedMap { inner: map, level: self.level, metadata_next: false })
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Trimmed { inner: deserializer, level: self.level })
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }
}

/// An object's fields without those its [`Level`] drops.
struct TrimmedMap<M> {
    inner: M,
    level: Level,
    /// The key just handed out was the object's `metadata`.
    metadata_next: bool,
}

impl<'de, M: MapAccess<'de>> MapAccess<'de> for TrimmedMap<M> {
    type Error = M::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, M::Error> {
        loop {
            let Some(key) = self.inner.next_key::<String>()? else { return Ok(None) };
            match self.level {
                Level::Metadata if key == "managedFields" => {
                    self.inner.next_value::<IgnoredAny>()?;
                    continue;
                }
                Level::Metadata => {}
                Level::Object => self.metadata_next = key == "metadata",
            }
            return seed.deserialize(key.into_deserializer()).map(Some);
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, M::Error> {
        if std::mem::take(&mut self.metadata_next) {
            self.inner.next_value_seed(TrimmedSeed { inner: seed, level: Level::Metadata })
        } else {
            self.inner.next_value_seed(seed)
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// Deserializes a value through a [`Trimmed`] deserializer.
struct TrimmedSeed<S> {
    inner: S,
    level: Level,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for TrimmedSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<S::Value, D::Error> {
        self.inner.deserialize(Trimmed { inner: deserializer, level: self.level })
    }
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
