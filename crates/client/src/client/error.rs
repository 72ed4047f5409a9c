//! Errors of the API client. A failed API call carries the `Status` the server returned, so
//! callers branch on its reason the way client-go's `apierrors.IsNotFound` & co. do.

use std::fmt;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause, StatusDetails};

/// Why a call to the API server failed.
#[derive(Debug)]
pub enum Error {
    /// The server answered with an error `Status`.
    Api(Box<ApiError>),
    /// The request never got an HTTP answer: connection refused or dropped, TLS failure, timeout.
    Transport(String),
    /// The server answered, but not with what we could decode.
    Decode(String),
    /// The request could not be built (bad name, unsupported body).
    Request(String),
    /// Aggregated discovery marked this group-version `Stale`: the server could not reach the
    /// aggregated API serving it (client-go's `StaleGroupVersionError`).
    StaleGroupVersion(String),
}

/// An error `Status` from the API server (or one synthesised from a bare HTTP error code, as
/// client-go does when the body is not a Status).
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// The Status reason (`NotFound`, `Conflict`, …); derived from the code when the server gave none.
    pub reason: String,
    /// The Status message, as `err.Error()` shows it.
    pub message: String,
    /// The full Status, for its `details.causes`.
    pub status: Status,
    /// The server's `Retry-After`, if it sent one.
    pub retry_after: Option<Duration>,
}

/// The client's result: an [`Error`] unless said otherwise.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl ApiError {
    /// Builds the error for an HTTP error answer whose body may or may not be a `Status`. A body
    /// that is not a Status (a proxy's or an aggregated API's text) gives client-go's generic
    /// error for the code (`NewGenericServerResponse`), the body kept as its
    /// `UnexpectedServerResponse` cause.
    pub fn from_response(code: u16, body: &[u8], retry_after: Option<Duration>) -> ApiError {
        let status: Status = serde_json::from_slice::<Status>(body)
            .ok()
            .filter(|s| s.status.as_deref() == Some("Failure") || s.reason.is_some())
            .unwrap_or_else(|| generic_status(code, body));
        Self::from_status(status, code, retry_after)
    }

    /// Builds the error for a `Status` (from a response body or a watch ERROR event).
    pub fn from_status(status: Status, code: u16, retry_after: Option<Duration>) -> ApiError {
        let code = status.code.and_then(|c| u16::try_from(c).ok()).filter(|c| *c != 0).unwrap_or(code);
        let reason =
            status.reason.clone().filter(|r| !r.is_empty()).unwrap_or_else(|| reason_for_code(code).to_string());
        let message = status.message.clone().unwrap_or_default();
        ApiError { code, reason, message, status, retry_after }
    }

    /// Field errors of an `Invalid` answer, as `field: message`.
    pub fn causes(&self) -> Vec<String> {
        let causes = self.status.details.as_ref().and_then(|d| d.causes.as_ref());
        causes
            .into_iter()
            .flatten()
            .map(|c| match c.field.as_deref().filter(|f| !f.is_empty()) {
                Some(field) => format!("{field}: {}", c.message.as_deref().unwrap_or("")),
                None => c.message.clone().unwrap_or_default(),
            })
            .collect()
    }
}

/// client-go's mapping of a bare HTTP code to a Status reason (`NewGenericServerResponse`).
fn reason_for_code(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Expired",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        500.. => "InternalError",
        _ => "Unknown",
    }
}

/// client-go's `NewGenericServerResponse` for an error answer whose body is not a Status: the
/// reason and message that the code implies, the server's own text (capped, as client-go does)
/// as the one cause.
fn generic_status(code: u16, body: &[u8]) -> Status {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    let server_message: String = if text.is_empty() { "unknown".into() } else { text.chars().take(1024).collect() };
    let message = match code {
        409 => "the server reported a conflict".to_string(),
        404 => "the server could not find the requested resource".to_string(),
        400 => "the server rejected our request for an unknown reason".to_string(),
        401 => "the server has asked for the client to provide credentials".to_string(),
        // The server's text says who may not do what, or which types are acceptable.
        403 | 415 => server_message.clone(),
        406 if server_message == "unknown" => {
            "the server was unable to respond with a content type that the client supports".to_string()
        }
        406 => server_message.clone(),
        405 => "the server does not allow this method on the requested resource".to_string(),
        422 => "the server rejected our request due to an error in our request".to_string(),
        503 => "the server is currently unable to handle the request".to_string(),
        504 => "the server was unable to return a response in the time allotted, but may still be processing the \
                request"
            .to_string(),
        429 => "the server has received too many requests and has asked us to try again later".to_string(),
        500.. => format!("an error on the server ({server_message:?}) has prevented the request from succeeding"),
        _ => format!("the server responded with the status code {code} but did not return more information"),
    };
    Status {
        code: Some(code.into()),
        message: Some(message),
        reason: Some(reason_for_code(code).into()),
        status: Some("Failure".into()),
        details: Some(StatusDetails {
            causes: Some(vec![StatusCause {
                reason: Some("UnexpectedServerResponse".into()),
                message: Some(server_message),
                ..StatusCause::default()
            }]),
            ..StatusDetails::default()
        }),
        ..Status::default()
    }
}

impl Error {
    /// client-go's `errors.As(err, &statusErr)`: the API client's error inside any error's
    /// source chain (through wrappers and every member of an aggregate), so a caller that got a
    /// wrapped error can still ask [`Error::is_not_found`] & co.
    pub fn find<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a Error> {
        crate::apimachinery::errors::find_in_chain::<Error>(error)
    }

    fn api(&self) -> Option<&ApiError> {
        match self {
            Error::Api(e) => Some(e),
            _ => None,
        }
    }

    fn has_reason(&self, reason: &str, code: u16) -> bool {
        self.api().is_some_and(|e| e.reason == reason || (e.code == code && e.reason == "Unknown"))
    }

    /// The HTTP code of an API error.
    pub fn code(&self) -> Option<u16> {
        self.api().map(|e| e.code)
    }

    /// `apierrors.IsNotFound`: reason `NotFound` (or a 404 without a reason).
    pub fn is_not_found(&self) -> bool {
        self.has_reason("NotFound", 404)
    }

    /// `IsMethodNotSupported`: the resource does not serve this verb (405).
    pub fn is_method_not_supported(&self) -> bool {
        self.has_reason("MethodNotAllowed", 405)
    }

    /// apimachinery's `HasStatusCause`: the Status lists a cause of type `cause` (e.g.
    /// `NamespaceTerminating` when creating in a namespace being deleted).
    pub fn has_status_cause(&self, cause: &str) -> bool {
        let causes = self.api().and_then(|e| e.status.details.as_ref()).and_then(|d| d.causes.as_ref());
        causes.into_iter().flatten().any(|c| c.reason.as_deref() == Some(cause))
    }

    /// `apierrors.IsAlreadyExists`: reason `AlreadyExists` (or a 409 without a reason).
    pub fn is_already_exists(&self) -> bool {
        self.has_reason("AlreadyExists", 409)
    }

    /// `apierrors.IsConflict`: reason `Conflict`, e.g. a stale resourceVersion (or a 409 without a reason).
    pub fn is_conflict(&self) -> bool {
        self.has_reason("Conflict", 409)
    }

    /// The requested resourceVersion is older than the server keeps (HTTP 410, reason `Expired`
    /// or `Gone`): the caller must relist.
    pub fn is_gone(&self) -> bool {
        self.api().is_some_and(|e| e.code == 410 || e.reason == "Expired" || e.reason == "Gone")
    }

    /// `apierrors.IsInvalid`: reason `Invalid`, validation failed (or a 422 without a reason).
    pub fn is_invalid(&self) -> bool {
        self.has_reason("Invalid", 422)
    }

    /// `apierrors.IsBadRequest`: reason `BadRequest` (or a 400 without a reason).
    pub fn is_bad_request(&self) -> bool {
        self.has_reason("BadRequest", 400)
    }

    /// `apierrors.IsForbidden`: reason `Forbidden`, by authorization or admission (or a 403 without a reason).
    pub fn is_forbidden(&self) -> bool {
        self.has_reason("Forbidden", 403)
    }

    /// `apierrors.IsUnauthorized`: reason `Unauthorized`, the credentials were refused (or a 401 without a reason).
    pub fn is_unauthorized(&self) -> bool {
        self.has_reason("Unauthorized", 401)
    }

    /// `apierrors.IsTooManyRequests`: the server asks to retry later (429 or reason `TooManyRequests`).
    pub fn is_too_many_requests(&self) -> bool {
        self.api().is_some_and(|e| e.code == 429 || e.reason == "TooManyRequests")
    }

    /// The server gave up on the request (reason `ServerTimeout`, or `Timeout` / 504).
    pub fn is_server_timeout(&self) -> bool {
        self.api().is_some_and(|e| e.reason == "ServerTimeout" || e.reason == "Timeout" || e.code == 504)
    }

    /// `apierrors.IsInternalError`: a 500 or reason `InternalError`.
    pub fn is_internal_error(&self) -> bool {
        self.api().is_some_and(|e| e.code == 500 || e.reason == "InternalError")
    }

    /// `apierrors.IsServiceUnavailable`: a 503 or reason `ServiceUnavailable`.
    pub fn is_service_unavailable(&self) -> bool {
        self.api().is_some_and(|e| e.code == 503 || e.reason == "ServiceUnavailable")
    }

    /// The request never got an HTTP answer ([`Error::Transport`]).
    pub fn is_transport(&self) -> bool {
        matches!(self, Error::Transport(_))
    }

    /// A transport error because the request ran out of time.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Transport(m) if m.contains("timeout") || m.contains("timed out"))
    }

    /// The text of the error as Go's `err.Error()` gives it: an API error's message alone.
    pub fn message(&self) -> String {
        match self {
            Error::Api(e) if !e.message.is_empty() => e.message.clone(),
            other => other.to_string(),
        }
    }

    /// How long the server asked us to wait before retrying.
    pub fn retry_after(&self) -> Option<Duration> {
        self.api().and_then(|e| e.retry_after)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Api(e) => {
                write!(f, "{} ({} {})", e.message, e.code, e.reason)?;
                let causes = e.causes();
                if !causes.is_empty() {
                    write!(f, ": {}", causes.join("; "))?;
                }
                Ok(())
            }
            Error::Transport(m) => write!(f, "transport error: {m}"),
            Error::Decode(m) => write!(f, "cannot decode the server's answer: {m}"),
            Error::Request(m) => write!(f, "invalid request: {m}"),
            Error::StaleGroupVersion(gv) => write!(f, "stale GroupVersion discovery: {gv}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<ApiError> for Error {
    fn from(e: ApiError) -> Error {
        Error::Api(Box::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(code: u16, body: &str) -> Error {
        ApiError::from_response(code, body.as_bytes(), None).into()
    }

    #[test]
    fn decodes_status_reasons() {
        let not_found = err(
            404,
            r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods \"x\" not found","reason":"NotFound","details":{"name":"x","kind":"pods"},"code":404}"#,
        );
        assert!(not_found.is_not_found());
        assert!(!not_found.is_conflict());
        assert_eq!(not_found.to_string(), "pods \"x\" not found (404 NotFound)");

        let exists = err(409, r#"{"status":"Failure","reason":"AlreadyExists","code":409}"#);
        assert!(exists.is_already_exists() && !exists.is_conflict());
        let conflict = err(409, r#"{"status":"Failure","reason":"Conflict","code":409}"#);
        assert!(conflict.is_conflict() && !conflict.is_already_exists());
        assert!(err(410, r#"{"status":"Failure","reason":"Expired","code":410}"#).is_gone());
        assert!(err(403, r#"{"status":"Failure","reason":"Forbidden","code":403}"#).is_forbidden());
        assert!(err(401, r#"{"status":"Failure","reason":"Unauthorized","code":401}"#).is_unauthorized());
        assert!(err(504, r#"{"status":"Failure","reason":"Timeout","code":504}"#).is_server_timeout());
        assert!(err(500, r#"{"status":"Failure","reason":"ServerTimeout","code":500}"#).is_server_timeout());
    }

    #[test]
    fn finds_status_causes() {
        let terminating = err(
            403,
            r#"{"status":"Failure","reason":"Forbidden","code":403,
               "details":{"causes":[{"reason":"NamespaceTerminating","message":"namespace ns is being terminated"}]}}"#,
        );
        assert!(terminating.has_status_cause("NamespaceTerminating"));
        assert!(!terminating.has_status_cause("FieldValueRequired"));
        assert!(
            !err(403, r#"{"status":"Failure","reason":"Forbidden","code":403}"#)
                .has_status_cause("NamespaceTerminating")
        );
    }

    #[test]
    fn invalid_lists_causes() {
        let invalid = err(
            422,
            r#"{"status":"Failure","reason":"Invalid","code":422,"message":"Pod \"p\" is invalid",
               "details":{"causes":[{"reason":"FieldValueRequired","field":"spec.containers","message":"Required value"}]}}"#,
        );
        assert!(invalid.is_invalid());
        assert_eq!(invalid.to_string(), "Pod \"p\" is invalid (422 Invalid): spec.containers: Required value");
    }

    #[test]
    fn bare_http_errors_get_a_reason_from_the_code() {
        let e = err(503, "upstream connect error");
        assert!(e.is_service_unavailable());
        assert_eq!(
            e.to_string(),
            "the server is currently unable to handle the request (503 ServiceUnavailable): upstream connect error"
        );
        assert_eq!(e.message(), "the server is currently unable to handle the request", "as client-go's");
        let e = err(502, "bad gateway");
        assert!(e.is_internal_error());
        assert_eq!(e.message(), "an error on the server (\"bad gateway\") has prevented the request from succeeding");
        assert_eq!(
            err(418, "").message(),
            "the server responded with the status code 418 but did not return more information"
        );
        let e = ApiError::from_response(429, b"", Some(Duration::from_secs(3)));
        let e: Error = e.into();
        assert!(e.is_too_many_requests());
        assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
        assert!(err(404, "404 page not found").is_not_found());
    }
}
