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
        "application/json-patch+json" => patch::json_patch(current, document).map_err(json_patch_error),
        "application/strategic-merge-patch+json" => {
            patch::strategic_merge_patch(current, document, &resource.group_version(), resource.kind)
                .map_err(strategic_error)
        }
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

/// The status kube-apiserver answers a JSON patch failure with: a body that is not a list of
/// operations is 400 BadRequest, a failing operation 422 Invalid.
pub(crate) fn json_patch_error(error: patch::JsonPatchError) -> ApiError {
    match error {
        patch::JsonPatchError::Decode(_) => ApiError::bad_request(error.to_string()),
        _ => ApiError::new(422, "Invalid", error.to_string(), None),
    }
}

/// The status kube-apiserver answers each strategic-merge-patch failure with.
fn strategic_error(error: patch::StrategicPatchError) -> ApiError {
    use patch::StrategicPatchError as E;
    let message = error.to_string();
    match error {
        E::NotSupported { .. } => ApiError::new(415, "UnsupportedMediaType", message, None),
        E::Unmarshal { .. } | E::PrimitiveListFormat | E::RetainKeysFormat | E::SetElementOrderFormat => {
            ApiError::bad_request(message)
        }
        E::ListOfLists => ApiError::new(422, "Invalid", message, None),
        _ => ApiError::internal(message),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn strategic(target: Value, document: Value, kind: &str) -> ApiError {
        let version = if kind == "Deployment" { "apps/v1" } else { "v1" };
        patch::strategic_merge_patch(&target, &document, version, kind).map_err(strategic_error).unwrap_err()
    }

    /// Each failure answers with kube-apiserver's status, now picked by the error's variant.
    #[test]
    fn patch_failures_answer_upstream_s_status() {
        let json_patch = |document| patch::json_patch(&json!({}), &document).map_err(json_patch_error).unwrap_err();
        let error = json_patch(json!({"op": "add"}));
        assert_eq!(
            (error.code, error.message()),
            (400, "json: cannot unmarshal object into Go value of type jsonpatch.Patch")
        );
        let error = json_patch(json!([{"op": "remove", "path": "/a"}]));
        assert_eq!((error.code, error.reason()), (422, "Invalid"));
        assert_eq!(
            error.message(),
            "error in remove for path: '/a': Unable to remove nonexistent key: a: missing value"
        );

        let error = strategic(json!({}), json!({}), "Widget");
        assert_eq!((error.code, error.message()), (415, "strategic merge patch is not supported for Widget"));
        assert_eq!(strategic(json!({}), json!([1]), "Deployment").code, 400);
        let named = json!({"metadata": {"name": "web"}});
        assert_eq!(strategic(named, json!({"metadata": {"$deleteFromPrimitiveList": ["a"]}}), "Deployment").code, 400);
        let pod = json!({"metadata": {"finalizers": []}});
        assert_eq!(strategic(pod, json!({"metadata": {"finalizers": [["x"]]}}), "Pod").code, 422);
        let missing_key = json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}});
        let deployment = json!({"spec": {"template": {"spec": {"containers": [{"name": "app"}]}}}});
        let error = strategic(deployment, missing_key, "Deployment");
        assert_eq!((error.code, error.message()), (500, "map: map[image:x] does not contain declared merge key: name"));
    }
}
