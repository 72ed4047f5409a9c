//! The answers of the secure port, byte for byte as upstream's handler chain writes them:
//! `Status` objects for refused requests, plain text for health and errors.

use std::io;

use serde::Serialize;

use super::http::{Request, ResponseWriter};
use crate::apimachinery::strconv::quote;

const PLAIN_TEXT: &str = "text/plain; charset=utf-8";
/// The Prometheus text exposition format.
pub const METRICS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// One answer, ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub code: u16,
    pub content_type: &'static str,
    /// Adds `X-Content-Type-Options: nosniff`, as upstream does on its own text answers.
    pub nosniff: bool,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn text(code: u16, body: impl Into<String>) -> Answer {
        Answer { code, content_type: PLAIN_TEXT, nosniff: true, body: body.into().into_bytes() }
    }

    /// Go's `http.NotFound`.
    pub fn not_found() -> Answer {
        Answer::text(404, "404 page not found\n")
    }

    /// `401 Unauthorized`, as upstream's `genericapifilters.Unauthorized`.
    pub fn unauthorized(request: &Request) -> Answer {
        Status::failure(401, "Unauthorized", "Unauthorized".into(), None).answer(request)
    }

    /// `403 Forbidden` for a non-resource request, as upstream's `responsewriters.Forbidden`.
    pub fn forbidden(request: &Request, user: &str, verb: &str, reason: &str) -> Answer {
        let mut message = sanitize(&format!("User {} cannot {verb} path {}", quote(user), quote(&request.path)));
        if !reason.is_empty() {
            message = format!("{message}: {reason}");
        }
        Status::failure(403, "Forbidden", format!("forbidden: {message}"), Some(Details {})).answer(request)
    }

    /// `500`, as upstream's `responsewriters.InternalError`.
    pub fn internal_error(request: &Request, error: &str) -> Answer {
        let uri = request_uri(request);
        Answer::text(500, sanitize(&format!("Internal Server Error: {}: {error}\n", quote(&uri))))
    }

    pub fn send(&self, response: &mut ResponseWriter<'_>) -> io::Result<()> {
        let mut headers = vec![("Cache-Control", "no-cache, private"), ("Content-Type", self.content_type)];
        if self.nosniff {
            headers.push(("X-Content-Type-Options", "nosniff"));
        }
        response.send(self.code, &headers, &self.body)
    }
}

/// A `meta/v1` `Status`, fields in the order Go writes them.
#[derive(Serialize)]
struct Status {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    metadata: Details,
    status: &'static str,
    message: String,
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<Details>,
    code: u16,
}

/// An empty object (`{}`): `metadata`, and the `details` of a non-resource Forbidden.
#[derive(Serialize)]
struct Details {}

impl Status {
    fn failure(code: u16, reason: &'static str, message: String, details: Option<Details>) -> Status {
        Status {
            kind: "Status",
            api_version: "v1",
            metadata: Details {},
            status: "Failure",
            message,
            reason,
            details,
            code,
        }
    }

    /// JSON, pretty-printed for browsers and command-line tools or `?pretty=true` as
    /// upstream's serializer does (compact JSON ends in a newline, pretty JSON does not).
    fn answer(&self, request: &Request) -> Answer {
        let body = if pretty(request) {
            serde_json::to_vec_pretty(self).unwrap_or_default()
        } else {
            let mut body = serde_json::to_vec(self).unwrap_or_default();
            body.push(b'\n');
            body
        };
        Answer { code: self.code, content_type: "application/json", nosniff: false, body }
    }
}

/// Upstream's `isPrettyPrint`: a `pretty` query parameter decides; else the User-Agent.
fn pretty(request: &Request) -> bool {
    if let Some(value) = request.query_param("pretty").filter(|v| !v.is_empty()) {
        return matches!(value, "1" | "t" | "T" | "true" | "TRUE" | "True");
    }
    let agent = request.header("User-Agent").unwrap_or_default();
    ["curl", "Wget", "Mozilla/5.0"].iter().any(|p| agent.starts_with(p))
}

/// The request target, path and query.
fn request_uri(request: &Request) -> String {
    let query: Vec<String> =
        request.query.iter().map(|(k, v)| if v.is_empty() { k.clone() } else { format!("{k}={v}") }).collect();
    if query.is_empty() { request.path.clone() } else { format!("{}?{}", request.path, query.join("&")) }
}

/// Upstream's guard against error text that looks like HTML.
fn sanitize(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(path: &str, agent: Option<&str>) -> Request {
        Request {
            method: "GET".into(),
            path: path.into(),
            query: Vec::new(),
            headers: agent.map(|a| ("User-Agent".to_string(), a.to_string())).into_iter().collect(),
            body: Vec::new(),
            peer_certificates: Vec::new(),
            remote: "127.0.0.1:1".parse().unwrap(),
        }
    }

    #[test]
    fn forbidden_is_upstreams_status() {
        let answer = Answer::forbidden(&request("/metrics", None), "system:anonymous", "get", "");
        assert_eq!(answer.code, 403);
        assert_eq!(
            String::from_utf8(answer.body).unwrap(),
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\
             \"message\":\"forbidden: User \\\"system:anonymous\\\" cannot get path \\\"/metrics\\\"\",\
             \"reason\":\"Forbidden\",\"details\":{},\"code\":403}\n"
        );
        let with_reason = Answer::forbidden(&request("/<x>", None), "bob", "post", "no RBAC policy matched");
        let body = String::from_utf8(with_reason.body).unwrap();
        assert!(
            body.contains(r#"forbidden: User \"bob\" cannot post path \"/&lt;x&gt;\": no RBAC policy matched"#),
            "{body}"
        );
    }

    #[test]
    fn unauthorized_is_pretty_for_curl() {
        let answer = Answer::unauthorized(&request("/metrics", Some("curl/8.5.0")));
        assert_eq!(
            String::from_utf8(answer.body).unwrap(),
            "{\n  \"kind\": \"Status\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {},\n  \"status\": \"Failure\",\n  \
             \"message\": \"Unauthorized\",\n  \"reason\": \"Unauthorized\",\n  \"code\": 401\n}"
        );
    }

    #[test]
    fn internal_errors_quote_the_request_uri() {
        let mut r = request("/metrics", None);
        r.query = vec![("a".into(), "1".into())];
        let answer = Answer::internal_error(&r, "subject access review: timeout");
        assert_eq!(answer.body, b"Internal Server Error: \"/metrics?a=1\": subject access review: timeout\n");
    }
}
