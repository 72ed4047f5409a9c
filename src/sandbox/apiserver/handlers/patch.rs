//! PATCH (`endpoints/handlers/patch.go`): JSON merge, strategic merge and JSON patches applied
//! to the current object, then written as an update.

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
    let document = body_json(request)?;
    let dry_run = is_dry_run(request)?;
    let validation = field_validation(request)?;
    let ns = target.namespace.as_deref().unwrap_or_default();
    if content_type == APPLY {
        check_apply(request, resource, &document)?;
    }
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
        write_update(txn, target, &old, patched, user, dry_run)
    })?;
    Ok((200, convert::to_external(resource, &stored)))
}

/// Server-side apply's content type.
const APPLY: &str = "application/apply-patch+yaml";

/// What kube-apiserver checks of an apply before applying it: a field manager, and the
/// document's `apiVersion` and `kind` are the resource's.
fn check_apply(request: &Request, resource: &ResourceType, document: &Value) -> ApiResult<()> {
    if request.query_param("fieldManager").is_none_or(|m| m.is_empty()) {
        let cause = crate::apimachinery::field::Error::required("fieldManager", "is required for apply patch");
        return Err(ApiError::new_invalid("meta.k8s.io", "PatchOptions", "", &[cause]));
    }
    let (api_version, kind) = (document["apiVersion"].as_str(), document["kind"].as_str());
    if api_version != Some(resource.group_version().as_str()) || kind != Some(resource.kind) {
        return Err(ApiError::bad_request(format!(
            "the apiVersion and kind of the applied object must be {} {}",
            resource.group_version(),
            resource.kind
        )));
    }
    Ok(())
}

fn apply_patch(resource: &ResourceType, content_type: &str, current: &Value, document: &Value) -> ApiResult<Value> {
    match content_type {
        // Without managed fields, an apply merges as a strategic merge patch: the fields it
        // names win, keyed lists (conditions by type) merge item by item.
        APPLY => patch::strategic_merge_patch(current, document, &resource.group_version(), resource.kind)
            .map_err(strategic_error),
        "application/merge-patch+json" => Ok(patch::json_merge_patch(current, document)),
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
