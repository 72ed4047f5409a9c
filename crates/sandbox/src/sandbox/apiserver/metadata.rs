//! Content negotiation of resource answers, as kube-apiserver's `negotiation` package and
//! `transformResponseObject` do for the representations the sandbox serves: plain JSON, and
//! metadata only (`application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`, and
//! `as=PartialObjectMetadataList` for lists) as client-go's metadata client asks for, and
//! tables (`as=Table`, rendered by [`crate::sandbox::apiserver::table`]) as `kubectl get` asks for.
//!
//! The `Accept` header is a list tried in order; options the sandbox cannot produce (YAML,
//! protobuf) are skipped, and when none is left the answer is 406 Not Acceptable.

use serde_json::{Value, json};

use crate::sandbox::apiserver::status::{ApiError, ApiResult};

/// How a resource answer is rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rendering {
    /// The objects as they are.
    Full,
    /// Each object as a `PartialObjectMetadata`.
    PartialObject,
    /// A list as a `PartialObjectMetadataList`.
    PartialList,
    /// A `meta.k8s.io` Table (of one object, a list, or each watch event's object).
    Table {
        /// The client asked for `meta.k8s.io/v1beta1` rather than `v1`.
        v1beta1: bool,
    },
}

/// The media types kube-apiserver lists in a 406 answer for JSON-capable resources.
const ACCEPTED: &str = "application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// Chooses the rendering for an `Accept` header; `list`: the answer is a list (a collection
/// GET), so only `as=PartialObjectMetadataList` fits it, while single objects and watch
/// events take `as=PartialObjectMetadata`.
pub fn negotiate(accept: Option<&str>, list: bool) -> ApiResult<Rendering> {
    let Some(accept) = accept.map(str::trim).filter(|a| !a.is_empty()) else {
        return Ok(Rendering::Full);
    };
    for option in accept.split(',') {
        let mut parts = option.split(';').map(str::trim);
        let media_type = parts.next().unwrap_or_default().to_ascii_lowercase();
        if !matches!(media_type.as_str(), "application/json" | "application/*" | "*/*") {
            continue;
        }
        let mut target = (None, None, None);
        for parameter in parts {
            match parameter.split_once('=') {
                Some(("as", v)) => target.0 = Some(v),
                Some(("g", v)) => target.1 = Some(v),
                Some(("v", v)) => target.2 = Some(v),
                _ => {}
            }
        }
        match target {
            (None, _, _) => return Ok(Rendering::Full),
            (Some("Table"), Some("meta.k8s.io"), Some(version @ ("v1" | "v1beta1"))) => {
                return Ok(Rendering::Table { v1beta1: version == "v1beta1" });
            }
            (Some(kind), Some("meta.k8s.io"), Some("v1" | "v1beta1")) => match (kind, list) {
                ("PartialObjectMetadata", false) => return Ok(Rendering::PartialObject),
                ("PartialObjectMetadataList", true) => return Ok(Rendering::PartialList),
                _ => {}
            },
            _ => {}
        }
    }
    Err(ApiError::new(406, "NotAcceptable", format!("only the following media types are accepted: {ACCEPTED}"), None))
}

/// Renders an answer body. `Status` answers (errors, deletions that finished) pass through,
/// and so do bodies for a table (see [`crate::sandbox::apiserver::table`]), which needs the resource to render.
pub fn render(rendering: Rendering, body: Value) -> Value {
    if body["kind"] == "Status" {
        return body;
    }
    match rendering {
        Rendering::Full | Rendering::Table { .. } => body,
        Rendering::PartialObject => partial(&body),
        Rendering::PartialList => {
            let items: Vec<Value> = body["items"].as_array().into_iter().flatten().map(partial).collect();
            // kube-apiserver builds the list by appending to a nil slice, which Go encodes as
            // `null` when nothing was appended.
            let items = if items.is_empty() { Value::Null } else { Value::Array(items) };
            json!({
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": body.get("metadata").cloned().unwrap_or_else(|| json!({})),
                "items": items,
            })
        }
    }
}

/// `meta.AsPartialObjectMetadata`: the object's metadata under the PartialObjectMetadata kind.
fn partial(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OBJECT: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    const LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

    #[test]
    fn negotiation_follows_the_accept_list() {
        assert_eq!(negotiate(None, false), Ok(Rendering::Full));
        assert_eq!(negotiate(Some("application/json"), true), Ok(Rendering::Full));
        assert_eq!(negotiate(Some(OBJECT), false), Ok(Rendering::PartialObject));
        assert_eq!(negotiate(Some(LIST), true), Ok(Rendering::PartialList));
        // kubectl get: tables first, for lists and single objects alike.
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(negotiate(Some(kubectl), true), Ok(Rendering::Table { v1beta1: false }));
        assert_eq!(negotiate(Some(kubectl), false), Ok(Rendering::Table { v1beta1: false }));
        let beta = "application/json;as=Table;v=v1beta1;g=meta.k8s.io";
        assert_eq!(negotiate(Some(beta), false), Ok(Rendering::Table { v1beta1: true }));
        assert!(negotiate(Some("application/json;as=Table;v=v2;g=meta.k8s.io"), true).is_err());
        // A list asked for as a single object's kind, an unknown `as=`, or only YAML: 406.
        for (accept, list) in [(OBJECT, true), (LIST, false), ("application/json;as=Widget;g=x;v=v1", false)] {
            let error = negotiate(Some(accept), list).expect_err(accept);
            assert_eq!((error.code, error.reason()), (406, "NotAcceptable"));
        }
        assert!(negotiate(Some("application/yaml"), false).is_err());
        assert_eq!(negotiate(Some(&format!("application/yaml, {OBJECT}")), false), Ok(Rendering::PartialObject));
    }

    #[test]
    fn rendering_keeps_metadata_only() {
        let pod = json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "a", "uid": "u"}, "spec": {}});
        assert_eq!(
            render(Rendering::PartialObject, pod.clone()),
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "a", "uid": "u"}})
        );
        let list = json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"}, "items": [pod]});
        let rendered = render(Rendering::PartialList, list);
        assert_eq!(rendered["kind"], "PartialObjectMetadataList");
        assert_eq!(rendered["metadata"]["resourceVersion"], "7");
        assert_eq!(rendered["items"][0]["kind"], "PartialObjectMetadata");
        assert!(rendered["items"][0].get("spec").is_none());
        let status = json!({"kind": "Status", "status": "Success"});
        assert_eq!(render(Rendering::PartialObject, status.clone()), status);
        // As kube-apiserver: an empty metadata-only list has `"items": null`.
        let empty = json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"}, "items": []});
        assert_eq!(render(Rendering::PartialList, empty)["items"], Value::Null);
    }
}
