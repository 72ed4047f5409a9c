//! Error answers as kube-apiserver words them: `Status` objects with the same reason, code,
//! message and details, so clients (ours, kubectl, client-go) branch on them the same way.

use serde_json::{Value, json};

use crate::apimachinery::field::{self, Error as FieldError};
use crate::sandbox::storage::resources::ResourceType;

/// A failed request: the HTTP code and the `Status` body.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// The HTTP status code, also the `Status`'s `code`.
    pub code: u16,
    /// The `Status` object sent as the body.
    pub status: Value,
    /// `Retry-After` seconds, for 429 and 5xx answers that carry one.
    pub retry_after: Option<u64>,
}

/// A handler's result: the answer, or the error to send.
pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    /// A `Failure` `Status` with `reason`, `message` and, when given, `details`.
    pub fn new(code: u16, reason: &str, message: impl Into<String>, details: Option<Value>) -> ApiError {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message.into(),
            "reason": reason,
            "code": code,
        });
        if let Some(details) = details {
            status["details"] = details;
        }
        ApiError { code, status, retry_after: None }
    }

    /// The `Status`'s `message`.
    pub fn message(&self) -> &str {
        self.status["message"].as_str().unwrap_or_default()
    }

    /// The `Status`'s `reason` (`NotFound`, `Conflict`, ...).
    pub fn reason(&self) -> &str {
        self.status["reason"].as_str().unwrap_or_default()
    }

    /// `errors.NewBadRequest`: 400.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message, None)
    }

    /// 401 for a request without valid credentials.
    pub fn unauthorized() -> ApiError {
        ApiError::new(401, "Unauthorized", "Unauthorized", None)
    }

    /// `errors.NewForbidden`: 403, naming the object when there is one.
    pub fn forbidden(resource: &ResourceType, name: &str, why: &str) -> ApiError {
        let message = if name.is_empty() {
            format!("{} is forbidden: {why}", qualified(resource))
        } else {
            format!("{} \"{name}\" is forbidden: {why}", qualified(resource))
        };
        ApiError::new(403, "Forbidden", message, Some(details(resource, name)))
    }

    /// `errors.NewNotFound`: 404 for an object.
    pub fn not_found(resource: &ResourceType, name: &str) -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(resource)),
            Some(details(resource, name)),
        )
    }

    /// A path the server does not serve at all.
    pub fn page_not_found() -> ApiError {
        ApiError::new(404, "NotFound", "the server could not find the requested resource", Some(json!({})))
    }

    /// 405 for a method the path does not take, worded as kube-apiserver's generic `MethodNotAllowed`.
    pub fn method_not_allowed() -> ApiError {
        ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
            Some(json!({})),
        )
    }

    /// `errors.NewAlreadyExists`: 409 on create.
    pub fn already_exists(resource: &ResourceType, name: &str) -> ApiError {
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(resource)),
            Some(details(resource, name)),
        )
    }

    /// `errors.NewConflict`: 409 with `why` after the object's name.
    pub fn conflict(resource: &ResourceType, name: &str, why: &str) -> ApiError {
        ApiError::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {} \"{name}\": {why}", qualified(resource)),
            Some(details(resource, name)),
        )
    }

    /// The stale-resourceVersion conflict of optimistic concurrency.
    pub fn modified(resource: &ResourceType, name: &str) -> ApiError {
        Self::conflict(
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 410 for a resourceVersion older than the kept history.
    pub fn expired(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message, None)
    }

    /// `errors.NewInvalid` for the object's kind: 422 with every cause.
    pub fn invalid(resource: &ResourceType, name: &str, errors: &[FieldError]) -> ApiError {
        ApiError::new_invalid(resource.group, resource.kind, name, errors)
    }

    /// `errors.NewInvalid`: 422 listing every cause; the message aggregates them, each distinct
    /// message once. An empty name is left out of the details (Go's `omitempty`).
    pub fn new_invalid(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> ApiError {
        let qualified = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
        let message = match field::aggregate(errors) {
            Err(summary) => format!("{qualified} \"{name}\" is invalid: {summary}"),
            Ok(()) => format!("{qualified} \"{name}\" is invalid"),
        };
        let causes: Vec<Value> =
            errors.iter().map(|e| json!({"reason": e.reason(), "message": e.body(), "field": e.field})).collect();
        let mut details = json!({"kind": kind, "causes": causes});
        if !name.is_empty() {
            details["name"] = name.into();
        }
        if !group.is_empty() {
            details["group"] = group.into();
        }
        ApiError::new(422, "Invalid", message, Some(details))
    }

    /// 415, as `negotiation.NewUnsupportedMediaTypeError`: the message lists the accepted types.
    pub fn unsupported_media_type(content_type: &str) -> ApiError {
        let _ = content_type;
        ApiError::new(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf",
            None,
        )
    }

    /// `errors.NewTooManyRequests`: 429, with `retryAfterSeconds` in the details when given.
    pub fn too_many_requests(message: impl Into<String>, retry_after: Option<u64>) -> ApiError {
        let mut e = ApiError::new(429, "TooManyRequests", message, None);
        if let Some(seconds) = retry_after {
            e.status["details"] = json!({"retryAfterSeconds": seconds});
        }
        e.retry_after = retry_after;
        e
    }

    /// `errors.NewInternalError`: 500.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "InternalError", message, None)
    }

    /// `errors.NewServiceUnavailable`: 503, with a `Retry-After` header when given.
    pub fn service_unavailable(message: impl Into<String>, retry_after: Option<u64>) -> ApiError {
        let mut e = ApiError::new(503, "ServiceUnavailable", message, None);
        e.retry_after = retry_after;
        e
    }
}

/// `deployments.apps`, or `pods` for the core group.
pub fn qualified(resource: &ResourceType) -> String {
    if resource.group.is_empty() {
        resource.plural.to_string()
    } else {
        format!("{}.{}", resource.plural, resource.group)
    }
}

fn details(resource: &ResourceType, name: &str) -> Value {
    let mut details = json!({"name": name, "kind": resource.plural});
    if !resource.group.is_empty() {
        details["group"] = resource.group.into();
    }
    details
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::storage::resources::find;

    #[test]
    fn messages_match_kube_apiserver() {
        let deployments = find("apps", "v1", "deployments").unwrap();
        let pods = find("", "v1", "pods").unwrap();
        assert_eq!(ApiError::not_found(pods, "x").message(), "pods \"x\" not found");
        assert_eq!(ApiError::not_found(deployments, "web").message(), "deployments.apps \"web\" not found");
        assert_eq!(ApiError::not_found(deployments, "web").status["details"]["group"], "apps");
        assert_eq!(
            ApiError::modified(pods, "x").message(),
            "Operation cannot be fulfilled on pods \"x\": the object has been modified; please apply your changes to the latest version and try again"
        );
        let invalid = ApiError::invalid(
            deployments,
            "web",
            &[FieldError::invalid_json("spec.replicas", &json!(-1), "must be greater than or equal to 0")],
        );
        assert_eq!(
            invalid.message(),
            "Deployment.apps \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
        );
        assert_eq!(invalid.status["details"]["causes"][0]["field"], "spec.replicas");
        assert_eq!(invalid.code, 422);
    }
}
