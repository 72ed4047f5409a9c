//! The request handlers of the REST layer, one file per verb as kube-apiserver's
//! `endpoints/handlers`: [`get`], [`list`], [`create`], [`update`], [`patch`], [`delete`] and
//! [`watch`]; here, what they share to decode a request body and its options.

pub mod create;
pub mod delete;
pub mod get;
pub mod list;
pub mod patch;
pub mod update;
pub mod watch;

use serde_json::Value;

use super::Target;
use crate::sandbox::apiserver::status::{ApiError, ApiResult};
use crate::sandbox::apiserver::typed::FieldValidation;
use crate::sandbox::apiserver::{convert, protobuf, typed};
use crate::sandbox::storage::objects;
use crate::sandbox::storage::resources::{self, ResourceType};
use crate::server::http::Request;

/// The object a create or update body holds: decoded, its kind, apiVersion and namespace checked
/// against the request, in the type the resource is stored as, and normalized under the
/// request's field validation.
pub(super) fn decode_object(target: &Target, request: &Request) -> ApiResult<Value> {
    let resource = target.resource;
    let mut object = convert::to_internal(resource, body_json(request)?)?;
    check_kind(resource, &object)?;
    check_namespace(target, &object)?;
    convert::storage_type(resource, &mut object);
    typed::normalize(resource, object, field_validation(request)?)
}

/// The body's kind and apiVersion, checked as the create and update handlers' decoding does:
/// another kind fails to convert into the resource's (`transformDecodeError`), another version
/// of the same kind is refused by name.
fn check_kind(resource: &ResourceType, object: &Value) -> ApiResult<()> {
    let kind = object["kind"].as_str().unwrap_or_default();
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    if !kind.is_empty() && kind != resource.kind {
        let version = api_version.rsplit('/').next().unwrap_or_default();
        let why = match resources::by_kind(api_version, kind) {
            Some(_) => {
                // Go's type names: the external `v1.Secret` into the internal `core.ConfigMap`.
                let internal = match resource.group.split('.').next().unwrap_or_default() {
                    "" | "events" => "core",
                    group => group,
                };
                format!("converting ({version}.{kind}) to ({internal}.{}): unknown conversion", resource.kind)
            }
            None => format!(
                "no kind \"{kind}\" is registered for version \"{api_version}\" in scheme \"pkg/api/legacyscheme/scheme.go:30\""
            ),
        };
        return Err(ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {}: {why}",
            resource.kind
        )));
    }
    if !api_version.is_empty() && api_version != resource.group_version() {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            resource.group_version()
        )));
    }
    Ok(())
}

fn check_namespace(target: &Target, object: &Value) -> ApiResult<()> {
    let in_body = objects::namespace_of(object);
    match target.namespace.as_deref() {
        Some(ns) if !in_body.is_empty() && in_body != ns => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => Ok(()),
    }
}

pub(super) fn body_json(request: &Request) -> ApiResult<Value> {
    if request.body.is_empty() {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    let content_type = request.header("Content-Type").unwrap_or("application/json");
    if protobuf::is_protobuf(Some(content_type)) {
        return protobuf::decode_body(&request.body).map_err(|e| ApiError::bad_request(e.to_string()));
    }
    let media_type = content_type.split(';').next().unwrap_or_default().trim();
    if !(media_type.is_empty() || media_type.ends_with("json") || media_type.ends_with("yaml")) {
        return Err(ApiError::unsupported_media_type(media_type));
    }
    if content_type.contains("yaml") {
        return serde_yaml_ng::from_slice(&request.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")));
    }
    serde_json::from_slice(&request.body)
        .map_err(|e| ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}")))
}

pub(super) fn field_validation(request: &Request) -> ApiResult<FieldValidation> {
    FieldValidation::parse(request.query_param("fieldValidation"))
}

pub(super) fn is_dry_run(request: &Request) -> ApiResult<bool> {
    match request.query_param("dryRun") {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => {
            Err(ApiError::bad_request(format!("dryRun: Unsupported value: {other:?}: supported values: \"All\"")))
        }
    }
}
