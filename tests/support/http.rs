//! Raw HTTP/1.1 over a socket, for the tests that check what the client library hides: status
//! lines, headers and exact bodies as a server sent them.

use std::io::{self, BufRead};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use kcm::client::RestConfig;
use rustls::{ClientConnection, StreamOwned};
use serde_json::Value;

pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// A TLS connection to `addr` trusting `config`'s CA and presenting its client certificate, if
/// any (a bearer token is the caller's to send); a read waits at most `timeout`.
pub fn connect(addr: SocketAddr, config: &RestConfig, timeout: Duration) -> TlsStream {
    let tls = kcm::client::tls::client_config(&config.tls).expect("TLS config");
    let name = rustls_pki_types::ServerName::IpAddress(addr.ip().into());
    let connection = ClientConnection::new(Arc::new(tls), name).expect("TLS client");
    let tcp = TcpStream::connect(addr).expect("connect");
    tcp.set_read_timeout(Some(timeout)).unwrap();
    StreamOwned::new(connection, tcp)
}

/// A whole response as read.
pub struct Response {
    pub code: u16,
    /// Names and values as sent, trimmed.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first header named `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON; fails the test, showing the body, where it is not.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text()))
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

/// Reads the status line and the headers; the body is left in `reader`.
pub fn read_head(reader: &mut impl BufRead) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    reader.read_line(&mut line).expect("status line");
    let code = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).expect("header");
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':').expect("header line");
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    (code, headers)
}

/// Reads the body as `headers` frame it: chunked, `Content-Length` bytes, or else up to the end
/// of the connection (RFC 9112 §6.3; sent with `Connection: close`).
pub fn read_body(reader: &mut impl BufRead, headers: &[(String, String)]) -> Vec<u8> {
    let mut body = Vec::new();
    if header(headers, "Transfer-Encoding").is_some_and(|t| t.contains("chunked")) {
        while let Some(chunk) = read_chunk(reader).expect("chunk") {
            body.extend(chunk);
        }
    } else if let Some(length) = header(headers, "Content-Length") {
        body.resize(length.parse().expect("a Content-Length"), 0);
        reader.read_exact(&mut body).expect("body");
    } else {
        let _ = reader.read_to_end(&mut body);
    }
    body
}

/// The next chunk of a chunked body: `None` after the last one, or where no chunk size can be
/// read (the stream ended); an error when the chunk itself is cut short.
pub fn read_chunk(reader: &mut impl BufRead) -> io::Result<Option<Vec<u8>>> {
    let mut size = String::new();
    if reader.read_line(&mut size).is_err() {
        return Ok(None);
    }
    let Ok(size) = usize::from_str_radix(size.trim(), 16) else { return Ok(None) };
    if size == 0 {
        return Ok(None);
    }
    let mut chunk = vec![0; size + 2];
    reader.read_exact(&mut chunk)?;
    chunk.truncate(size);
    Ok(Some(chunk))
}

/// Reads a whole response: its head, then its body.
pub fn read_response(reader: &mut impl BufRead) -> Response {
    let (code, headers) = read_head(reader);
    let body = read_body(reader, &headers);
    Response { code, headers, body }
}
