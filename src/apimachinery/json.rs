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
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Decodes `T` from JSON bytes.
pub fn from_bytes<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    serde_json::from_slice(bytes)
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
    use k8s_openapi::api::core::v1::PodTemplateSpec;
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

    #[test]
    fn errors_name_what_is_wrong() {
        let error = from_value::<PodTemplateSpec>(&json!({"spec": {"containers": 7}})).unwrap_err();
        assert!(error.to_string().contains("invalid type: integer `7`"), "{error}");
    }
}
