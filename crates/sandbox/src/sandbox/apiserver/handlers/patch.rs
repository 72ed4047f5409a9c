//! PATCH (`endpoints/handlers/patch.go`): JSON merge, strategic merge, JSON and apply patches
//! applied to the current object, then written as an update. An apply patch to a missing object
//! is a 404 here (kube-apiserver creates it), and no `managedFields` are tracked.

use serde_json::Value;

use super::update::{check_resource_version, write_update};
use super::{body_json, field_validation, is_dry_run};
use crate::sandbox::apiserver::status::{ApiError, ApiResult};
use crate::sandbox::apiserver::typed;
use crate::sandbox::apiserver::{ApiServer, Target};
use crate::sandbox::apiserver::{convert, patch};
use crate::sandbox::auth::UserInfo;
use crate::sandbox::storage::objects::name_of;
use crate::sandbox::storage::resources::ResourceType;
use crate::server::http::Request;

/// The server-side apply patch type (YAML, of which JSON is a subset).
const APPLY: &str = "application/apply-patch+yaml";

/// `PatchResource`: applies the patch to the current object and writes the result.
pub fn patch(
    api: &ApiServer,
    request: &Request,
    target: &Target,
    name: &str,
    user: &UserInfo,
) -> ApiResult<(u16, Value)> {
    let resource = target.resource;
    let content_type = request.header("Content-Type").unwrap_or_default();
    let content_type = content_type.split(';').next().unwrap_or_default().trim().to_string();
    if content_type == APPLY && request.query_param("fieldManager").unwrap_or_default().is_empty() {
        // As kube-apiserver's: an Invalid PatchOptions with its cause.
        let cause = crate::apimachinery::field::Error::required("fieldManager", "is required for apply patch");
        return Err(ApiError::new_invalid("meta.k8s.io", "PatchOptions", "", &[cause]));
    }
    let document = body_json(request)?;
    let dry_run = is_dry_run(request)?;
    let validation = field_validation(request)?;
    let ns = target.namespace.as_deref().unwrap_or_default();
    let stored = api.store.write(|txn| {
        let old = txn.get(resource.storage_key(), ns, name).ok_or_else(|| ApiError::not_found(resource, name))?;
        let external = convert::to_external(resource, &old);
        let patched = apply_patch(resource, &content_type, &external, &document)?;
        let mut patched = convert::to_internal(resource, patched)?;
        convert::storage_type(resource, &mut patched);
        let patched = typed::normalize_patched(resource, patched, validation)?;
        if name_of(&patched) != name {
            return Err(ApiError::bad_request("metadata.name: Invalid value: the name may not be changed by a patch"));
        }
        // A resourceVersion in the patch is a precondition; otherwise the patch applies
        // to the current object.
        check_resource_version(resource, name, &old, &patched)?;
        write_update(api, txn, target, &old, patched, user, dry_run)
    })?;
    Ok((200, convert::to_external(resource, &stored)))
}

fn apply_patch(resource: &ResourceType, content_type: &str, current: &Value, document: &Value) -> ApiResult<Value> {
    match content_type {
        "application/merge-patch+json" => Ok(patch::json_merge_patch(current, document)),
        // Server-side apply without field ownership: the applied fields are merged in as a
        // strategic merge patch (keyed lists such as conditions merged by key, as apply merges
        // list-map items; other lists replaced whole, as atomic lists are); fields a manager
        // stops sending are kept.
        APPLY => patch::strategic_merge_patch(current, document, &resource.group_version(), resource.kind)
            .map_err(strategic_error),
        "application/json-patch+json" => patch::json_patch(current, document).map_err(|e| {
            if e.starts_with("json: cannot unmarshal") {
                ApiError::bad_request(e)
            } else {
                ApiError::new(422, "Invalid", e, None)
            }
        }),
        "application/strategic-merge-patch+json" => {
            patch::strategic_merge_patch(current, document, &resource.group_version(), resource.kind)
                .map_err(strategic_error)
        }
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

/// The status kube-apiserver answers each strategic-merge-patch failure with.
fn strategic_error(message: String) -> ApiError {
    if message.starts_with("strategic merge patch is not supported") {
        ApiError::new(415, "UnsupportedMediaType", message, None)
    } else if message.starts_with("json: cannot unmarshal") || message.starts_with("invalid patch format") {
        ApiError::bad_request(message)
    } else if message.contains("lists of lists are not supported") {
        ApiError::new(422, "Invalid", message, None)
    } else {
        ApiError::internal(message)
    }
}
