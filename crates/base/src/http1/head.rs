//! Request and response heads (RFC 9112 §2–§6), read and parsed one way for the three
//! HTTP/1.1 users of this process, with `httparse` (ureq's own parser, already in the tree):
//! a head is at most [`MAX_HEAD`] bytes and [`MAX_HEADERS`] headers, its names and values are
//! checked as `httparse` checks them, and the body's framing is read from it as Go's
//! `net/http` reads it: `Transfer-Encoding` may only be `chunked`, and then wins over
//! `Content-Length`; a `Content-Length` is decimal digits, the same in every copy.

use std::io::{self, BufRead};

/// The longest head accepted (kube-apiserver's and the controller manager's are a few hundred
/// bytes; Go's servers allow 1 MiB, its clients 10 MiB, but nothing here sends big ones).
pub const MAX_HEAD: usize = 64 * 1024;
/// The most headers a head may have.
pub const MAX_HEADERS: usize = 128;

/// A request's head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`, …
    pub method: String,
    /// The request target as sent (path and query).
    pub target: String,
    /// `HTTP/1.x`'s x.
    pub minor_version: u8,
    /// The headers, in their order, names as sent.
    pub headers: Vec<(String, String)>,
}

/// A response's head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub code: u16,
    /// The headers, in their order, names as sent.
    pub headers: Vec<(String, String)>,
}

/// How a message's body is delimited, as its head says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// `Content-Length`.
    Length(u64),
    /// Neither: a request has no body, a response's ends when the connection closes.
    Unframed,
}

/// Reads one head from `reader`, up to and including the empty line that ends it, skipping
/// empty lines before it (RFC 9112 §2.2); `None` at a clean end of stream before any byte of
/// it. What follows the head is left unread.
pub fn read(reader: &mut impl BufRead) -> io::Result<Option<Vec<u8>>> {
    let mut raw = Vec::new();
    loop {
        let start = raw.len();
        let allowed = (MAX_HEAD + 1).saturating_sub(start) as u64;
        let n = io::Read::take(&mut *reader, allowed).read_until(b'\n', &mut raw)?;
        if raw.len() > MAX_HEAD {
            return Err(invalid(format!("a head larger than {MAX_HEAD} bytes")));
        }
        if n == 0 {
            return if raw.is_empty() { Ok(None) } else { Err(cut_short()) };
        }
        if !raw.ends_with(b"\n") {
            return Err(cut_short());
        }
        let line = &raw[start..];
        if line == b"\r\n" || line == b"\n" {
            if start == 0 {
                raw.clear(); // an empty line before the head
                continue;
            }
            return Ok(Some(raw));
        }
    }
}

/// Parses a request head, the empty line that ends it included; `None` while `raw` holds
/// only part of one (then it may be read on), else the head and its length in `raw`.
pub fn parse_request(raw: &[u8]) -> io::Result<Option<(Request, usize)>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let length = match request.parse(raw).map_err(|e| refused("request", e))? {
        httparse::Status::Complete(length) => length,
        httparse::Status::Partial => return Ok(None),
    };
    let head = Request {
        method: request.method.unwrap_or_default().to_string(),
        target: request.path.unwrap_or_default().to_string(),
        minor_version: request.version.unwrap_or_default(),
        headers: owned(request.headers),
    };
    Ok(Some((head, length)))
}

/// Parses a response head, as [`parse_request`] does a request's.
pub fn parse_response(raw: &[u8]) -> io::Result<Option<(Response, usize)>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let length = match response.parse(raw).map_err(|e| refused("response", e))? {
        httparse::Status::Complete(length) => length,
        httparse::Status::Partial => return Ok(None),
    };
    let head = Response { code: response.code.unwrap_or_default(), headers: owned(response.headers) };
    Ok(Some((head, length)))
}

/// A whole head (as [`read`] gives it), parsed as a request.
pub fn whole_request(raw: &[u8]) -> io::Result<Request> {
    parse_request(raw)?.map(|(head, _)| head).ok_or_else(cut_short)
}

/// A whole head (as [`read`] gives it), parsed as a response.
pub fn whole_response(raw: &[u8]) -> io::Result<Response> {
    parse_response(raw)?.map(|(head, _)| head).ok_or_else(cut_short)
}

/// The first value of header `name` (any case).
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

/// How the body of a message with these headers is delimited.
pub fn framing(headers: &[(String, String)]) -> io::Result<Framing> {
    fn named<'a>(headers: &'a [(String, String)], name: &'static str) -> impl Iterator<Item = &'a String> {
        headers.iter().filter(move |(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v)
    }
    let codings: Vec<&str> = named(headers, "transfer-encoding").flat_map(|v| v.split(',')).map(str::trim).collect();
    if !codings.is_empty() {
        return match codings.as_slice() {
            [coding] if coding.eq_ignore_ascii_case("chunked") => Ok(Framing::Chunked),
            _ => Err(invalid(format!("unsupported Transfer-Encoding {:?}", codings.join(", ")))),
        };
    }
    let mut length = None;
    for value in named(headers, "content-length") {
        let parsed = content_length(value).ok_or_else(|| invalid(format!("bad Content-Length {value:?}")))?;
        if length.is_some_and(|l| l != parsed) {
            return Err(invalid("Content-Length given twice, differently".into()));
        }
        length = Some(parsed);
    }
    Ok(length.map_or(Framing::Unframed, Framing::Length))
}

/// A Content-Length's value: decimal digits only, as Go's `net/http` reads it (Rust's
/// `parse` would take a sign, `+5`).
fn content_length(value: &str) -> Option<u64> {
    let value = value.trim();
    let digits = !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit());
    digits.then(|| value.parse().ok()).flatten()
}

fn owned(headers: &[httparse::Header<'_>]) -> Vec<(String, String)> {
    headers.iter().map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).trim().to_string())).collect()
}

fn refused(what: &str, error: httparse::Error) -> io::Error {
    invalid(format!("a malformed {what} head: {error}"))
}

fn cut_short() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "end of stream inside a head")
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

#[cfg(test)]
mod tests;
