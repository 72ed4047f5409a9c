//! GET of a collection (`ListResource`): label and field filters, `limit`/`continue` paging over
//! consistent snapshots, and `resourceVersion`/`resourceVersionMatch` as etcd3's store serves them.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::apimachinery::labels::Selector;
use crate::sandbox::apiserver::field_selector::FieldSelector;
use crate::sandbox::apiserver::status::{ApiError, ApiResult};
use crate::sandbox::apiserver::{ApiServer, Target};
use crate::sandbox::apiserver::{convert, validation};
use crate::sandbox::storage::objects::{self, name_of};
use crate::sandbox::storage::resources::ResourceType;
use crate::server::http::Request;

/// `ListResource`: the filtered items of a namespace or of all, one page at a time.
pub fn list(api: &ApiServer, request: &Request, target: &Target) -> ApiResult<Value> {
    let resource = target.resource;
    validate_list_options(request, false, api.options.watch_list)?;
    let filter = ObjectFilter::from_request(request, resource)?;
    // A list at resourceVersion "0" is served from the watch cache, which does not page.
    let from_cache = request.query_param("resourceVersion") == Some("0");
    let limit = request.query_param("limit").and_then(|l| l.parse::<usize>().ok()).filter(|l| *l > 0 && !from_cache);
    let continue_token = request.query_param("continue").filter(|c| !c.is_empty());
    let ns = target.namespace.as_deref();
    let (objects, revision, after) = match continue_token {
        Some(token) => {
            let (revision, after) = decode_continue(token)?;
            if request.query_param("resourceVersion").is_some_and(|v| !v.is_empty() && v != "0") {
                return Err(ApiError::bad_request("specifying resource version is not allowed when using continue"));
            }
            let (objects, revision) = match revision {
                Some(revision) => {
                    let objects = api
                        .store
                        .list_at(resource.storage_key(), ns, revision)
                        .map_err(|_| inconsistent_continue(&after))?;
                    (objects, revision)
                }
                // A token from an expired-continue answer: the rest of the list, now.
                None => api.store.list(resource.storage_key(), ns),
            };
            (objects, revision, Some(after))
        }
        None => list_at_requested_version(api, request, resource, ns, limit.is_some())?,
    };
    let mut items = Vec::new();
    let mut next_after = None;
    let mut remaining = 0usize;
    for object in objects {
        let key = format!("{}/{}", objects::namespace_of(&object), name_of(&object));
        if after.as_ref().is_some_and(|a| key.as_str() <= a.as_str()) || !filter.matches(&object) {
            continue;
        }
        if limit.is_some_and(|l| items.len() >= l) {
            remaining += 1;
            continue;
        }
        next_after = Some(key);
        items.push(convert::to_list_item(resource, &object));
    }
    let mut metadata = json!({"resourceVersion": revision.to_string()});
    if remaining > 0 {
        metadata["continue"] =
            encode_continue(i64::try_from(revision).unwrap_or(i64::MAX), next_after.as_deref().unwrap_or_default())
                .into();
        if filter.is_everything() {
            metadata["remainingItemCount"] = remaining.into();
        }
    }
    Ok(json!({
        "kind": format!("{}List", resource.kind),
        "apiVersion": resource.group_version(),
        "metadata": metadata,
        "items": items,
    }))
}

/// Honours `resourceVersion` / `resourceVersionMatch` of a first list page.
pub fn list_at_requested_version(
    api: &ApiServer,
    request: &Request,
    resource: &ResourceType,
    ns: Option<&str>,
    paged: bool,
) -> ApiResult<(Vec<Arc<Value>>, u64, Option<String>)> {
    let storage = resource.storage_key();
    let requested = request.query_param("resourceVersion").filter(|v| !v.is_empty());
    let matching = request.query_param("resourceVersionMatch").filter(|v| !v.is_empty());
    let parse =
        |v: &str| v.parse::<u64>().map_err(|_| ApiError::bad_request(format!("invalid resource version: {v:?}")));
    // The combinations `validate_list_options` lets through. A paged list at a
    // resourceVersion without a match is an exact one (etcd's legacy case).
    let legacy_exact = paged && matching.is_none() && requested.is_some_and(|v| v != "0");
    match (requested, matching) {
        (Some(v), Some("Exact")) | (Some(v), None) if legacy_exact || matching == Some("Exact") => {
            let revision = parse(v)?;
            let current = api.store.revision();
            if revision > current {
                return Err(too_large(revision, current));
            }
            let objects = api
                .store
                .list_at(storage, ns, revision)
                .map_err(|e| ApiError::expired(format!("too old resource version: {revision} ({})", e.oldest)))?;
            Ok((objects, revision, None))
        }
        (Some(v), None | Some("NotOlderThan")) => {
            let revision = parse(v)?;
            let (objects, current) = api.store.list(storage, ns);
            if revision > current {
                return Err(too_large(revision, current));
            }
            Ok((objects, current, None))
        }
        _ => {
            let (objects, current) = api.store.list(storage, ns);
            Ok((objects, current, None))
        }
    }
}

/// `ValidateListOptions` for a list or a watch, with the `WatchList` feature gate as configured:
/// 422 on `ListOptions.meta.k8s.io` (see `validation::list_options`).
pub fn validate_list_options(request: &Request, watch: bool, watch_list: bool) -> ApiResult<()> {
    validation::list_options(request, watch, watch_list)
}

/// 504 for a resourceVersion newer than the store's, with the `ResourceVersionTooLarge` cause
/// and `Retry-After: 1` (`storage.NewTooLargeResourceVersionError`).
pub fn too_large(requested: u64, current: u64) -> ApiError {
    let mut e = ApiError::new(
        504,
        "Timeout",
        format!("Too large resource version: {requested}, current: {current}"),
        Some(
            json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1}),
        ),
    );
    e.retry_after = Some(1);
    e
}

/// The text of a 410 for a continue token whose revision was compacted away.
const INCONSISTENT_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// etcd3's `handleCompactedErrorForPaging`: 410 Expired whose `metadata.continue` carries a
/// token (resourceVersion -1) that continues the list from the same key at the latest revision.
fn inconsistent_continue(after: &str) -> ApiError {
    let mut error = ApiError::expired(INCONSISTENT_CONTINUE);
    error.status["metadata"]["continue"] = encode_continue(-1, after).into();
    error
}

/// `storage.EncodeContinue`; a revision of -1 means "at the latest revision".
fn encode_continue(revision: i64, after: &str) -> String {
    use base64::Engine;
    let token = json!({"v": "meta.k8s.io/v1", "rv": revision, "start": format!("{after}\u{0}")});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

/// `storage.DecodeContinue` behind `ValidateListOptions`: the revision (`None`: the latest,
/// from a -1 token) and the key the list continues after; errors worded as kube-apiserver's
/// (`invalid continue token: continue key is not valid: …`).
fn decode_continue(token: &str) -> ApiResult<(Option<u64>, String)> {
    use base64::Engine;
    const INVALID: &str = "continue key is not valid";
    let bad = |why: String| ApiError::bad_request(format!("invalid continue token: {why}"));
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token).map_err(|e| {
        // Go's base64.CorruptInputError.
        let at = match e {
            base64::DecodeError::InvalidByte(at, _) | base64::DecodeError::InvalidLastSymbol(at, _) => at,
            _ => token.len() / 4 * 4,
        };
        bad(format!("{INVALID}: illegal base64 data at input byte {at}"))
    })?;
    let value: Value =
        serde_json::from_slice(&bytes).map_err(|e| bad(format!("{INVALID}: {}", go_json_error(&bytes, &e))))?;
    match value["v"].as_str().unwrap_or_default() {
        "meta.k8s.io/v1" => {}
        other => return Err(bad(format!("{INVALID}: server does not recognize this encoded version {other}"))),
    }
    let revision = match value["rv"].as_i64().unwrap_or(0) {
        0 => return Err(bad(format!("{INVALID}: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"))),
        rv if rv < 0 => None,
        rv => Some(rv as u64),
    };
    let start = value["start"].as_str().unwrap_or_default();
    if start.is_empty() {
        return Err(bad(format!("{INVALID}: encoded start key empty (version meta.k8s.io/v1)")));
    }
    Ok((revision, start.trim_end_matches('\u{0}').to_string()))
}

/// encoding/json's wording of a syntax error where it can be told from the first byte (the
/// usual case for a token that is not ours), else serde's.
fn go_json_error(bytes: &[u8], error: &serde_json::Error) -> String {
    match bytes.iter().find(|b| !b" \t\r\n".contains(b)) {
        None => "unexpected end of JSON input".to_string(),
        Some(&b) if !b"{[\"-0123456789tfn".contains(&b) => {
            let quoted = match b {
                b'\'' => "\\'".to_string(),
                b'"' => "\"".to_string(),
                0x20..=0x7e => (b as char).to_string(),
                _ => format!("\\u{b:04x}"),
            };
            format!("invalid character '{quoted}' looking for beginning of value")
        }
        _ => error.to_string(),
    }
}

/// Label, field and namespace filters of a list, watch or delete-collection.
pub struct ObjectFilter {
    labels: Option<Selector>,
    fields: Option<FieldSelector>,
}

impl ObjectFilter {
    /// Parses the `labelSelector` and `fieldSelector` query parameters (empty ones select everything).
    pub fn from_request(request: &Request, resource: &ResourceType) -> ApiResult<ObjectFilter> {
        let labels = request
            .query_param("labelSelector")
            .filter(|s| !s.is_empty())
            .map(|s| Selector::parse(s).map_err(|e| ApiError::bad_request(e.to_string())))
            .transpose()?;
        let fields = request
            .query_param("fieldSelector")
            .filter(|s| !s.is_empty())
            .map(|s| FieldSelector::parse(s, resource).map_err(|e| ApiError::bad_request(e.to_string())))
            .transpose()?;
        Ok(ObjectFilter { labels, fields })
    }

    /// Whether `object` passes both selectors.
    pub fn matches(&self, object: &Value) -> bool {
        self.labels.as_ref().is_none_or(|l| l.matches_object(object))
            && self.fields.as_ref().is_none_or(|f| f.matches(object))
    }

    fn is_everything(&self) -> bool {
        self.labels.is_none() && self.fields.is_none()
    }
}
