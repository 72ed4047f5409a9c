//! Writing answers as kube-apiserver's `responsewriters` do: JSON bodies with its headers,
//! `Warning` headers, and `Status` objects for errors (with `Retry-After` when they carry one).

use std::io;

use serde_json::Value;

use super::status::ApiError;
use crate::server::http::ResponseWriter;

/// A JSON answer with kube-apiserver's `Content-Type` and `Cache-Control` headers.
pub fn send_json(response: &mut ResponseWriter<'_>, code: u16, body: &Value) -> io::Result<()> {
    send_json_with(response, code, body, &[])
}

/// A JSON answer with `Warning` headers (already formatted, see [`warning_header`]).
pub fn send_json_with(
    response: &mut ResponseWriter<'_>,
    code: u16,
    body: &Value,
    warnings: &[String],
) -> io::Result<()> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut headers = vec![("Content-Type", "application/json"), ("Cache-Control", "no-cache, private")];
    headers.extend(warnings.iter().map(|w| ("Warning", w.as_str())));
    response.send(code, &headers, &bytes)
}

/// An RFC 7234 warning as kube-apiserver writes it: `299 - "<text>"`, the text escaped.
pub fn warning_header(text: &str) -> String {
    format!("299 - \"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// An error's `Status` body, with `Retry-After` when the error carries one.
pub fn send_error(response: &mut ResponseWriter<'_>, error: &ApiError) -> io::Result<()> {
    let bytes = serde_json::to_vec(&error.status).unwrap_or_default();
    let retry = error.retry_after.map(|s| s.to_string());
    let mut headers = vec![("Content-Type", "application/json"), ("Cache-Control", "no-cache, private")];
    if let Some(seconds) = &retry {
        headers.push(("Retry-After", seconds));
    }
    response.send(error.code, &headers, &bytes)
}
