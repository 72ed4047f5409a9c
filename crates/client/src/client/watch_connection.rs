//! A watch request on a connection of its own that the process's one watch poller reads without
//! blocking (see [`super::watch_poller`]), so that an open watch costs no thread.
//!
//! ureq reads a body only by blocking in a read, which would take a thread per watch: the
//! garbage collector alone watches some fifty resources. So a watch is opened here with a
//! minimal HTTP/1.1 exchange of our own over the same rustls config, resolver and credentials as
//! the client's other requests: the request and the answer's head are written and read
//! blocking (on the opener's thread, bounded by the connect timeout), then the socket turns
//! non-blocking and the body — chunked, or until the server closes — is decoded as it arrives.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use rustls::ClientConnection;

use super::tls::TlsConnector;
use super::watch::RawEvent;
use super::{ApiError, Error, Result};
use crate::http1::chunked::ChunkedDecoder;
use crate::http1::head;

/// The longest error answer body read.
const MAX_ERROR_BODY_BYTES: usize = 1024 * 1024;
/// The longest single watch event accepted; a bigger one ends the watch (a server bug or not
/// a watch stream at all). Objects are at most ~1.5 MiB in etcd.
const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// Where and how to send one watch request.
pub struct WatchRequest<'a> {
    /// `https://host:port[/prefix]` of the server.
    pub server: &'a str,
    /// The path and query of the watch, e.g. `/api/v1/pods?watch=true&…`.
    pub path_and_query: &'a str,
    /// The extra request headers (Accept, User-Agent, Authorization).
    pub headers: Vec<(&'static str, String)>,
    /// Bounds resolving, connecting, the TLS handshake and the answer's head.
    pub connect_timeout: Duration,
}

/// The answer to a watch request that was not a 2xx.
pub struct Refused {
    /// The HTTP status code.
    pub code: u16,
    /// The answer's `Retry-After`.
    pub retry_after: Option<Duration>,
    /// The body (a `Status`, usually).
    pub body: Vec<u8>,
}

/// The transport under the HTTP exchange.
enum Transport {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<ClientConnection, TcpStream>>),
}

impl Transport {
    fn socket(&self) -> &TcpStream {
        match self {
            Transport::Plain(socket) => socket,
            Transport::Tls(stream) => &stream.sock,
        }
    }
}

/// An open watch: its socket and the undecoded part of its body.
pub struct WatchConnection {
    transport: Transport,
    body: EventBody,
}

/// A watch body as it arrives: its framing, and the decoded bytes not yet taken as events.
struct EventBody {
    decoder: BodyDecoder,
    /// Decoded body bytes not yet taken as events.
    pending: Vec<u8>,
    /// Where the next event starts in `pending`.
    consumed: usize,
    /// How far `pending` is known to hold no newline past `consumed`: an event that arrives in
    /// many small reads is scanned once, not once per read.
    scanned: usize,
    /// The server closed the stream (or its chunked body ended).
    ended: bool,
}

impl WatchConnection {
    /// Sends `request` and reads the answer's head. A 2xx answer gives the open connection,
    /// switched to non-blocking reads; any other answer gives its code and body.
    pub fn open(
        request: &WatchRequest<'_>,
        tls: Option<&TlsConnector>,
    ) -> Result<std::result::Result<WatchConnection, Refused>> {
        let deadline = Instant::now() + request.connect_timeout;
        let target = Target::parse(request.server)?;
        let socket = connect(&target, deadline)?;
        let transport = match (target.tls, tls) {
            (false, _) => Transport::Plain(socket),
            (true, Some(tls)) => {
                let connection = tls.client_connection(&target.host).map_err(|e| Error::Request(e.to_string()))?;
                Transport::Tls(Box::new(rustls::StreamOwned::new(connection, socket)))
            }
            (true, None) => return Err(Error::Request("no TLS configuration for an https server".into())),
        };
        let mut connection = WatchConnection { transport, body: EventBody::new(BodyDecoder::UntilClose) };
        let transport_error =
            |e: io::Error| Error::Transport(format!("GET {}{}: {e}", request.server, request.path_and_query));
        connection.send_request(&target, request).map_err(transport_error)?;
        let head = connection.read_head(deadline).map_err(transport_error)?;
        if !(200..300).contains(&head.code) {
            let body = connection.read_error_body(&head, deadline).map_err(transport_error)?;
            return Ok(Err(Refused { code: head.code, retry_after: head.retry_after, body }));
        }
        connection.transport.socket().set_nonblocking(true).map_err(transport_error)?;
        Ok(Ok(connection))
    }

    /// The socket to poll for readability.
    pub fn raw_fd(&self) -> RawFd {
        self.transport.socket().as_raw_fd()
    }

    /// Whether the TLS layer has bytes to send (a key update, an alert) when the socket allows.
    pub fn wants_write(&self) -> bool {
        matches!(&self.transport, Transport::Tls(stream) if stream.conn.wants_write())
    }

    /// Reads what the socket has without blocking, at most about `budget` bytes, and decodes
    /// it into the pending body. Returns whether the stream has ended.
    pub fn read_available(&mut self, budget: usize) -> io::Result<bool> {
        let mut buffer = [0u8; 16 * 1024];
        let mut read = 0;
        while read < budget && !self.body.ended {
            let result = match &mut self.transport {
                Transport::Plain(socket) => socket.read(&mut buffer),
                Transport::Tls(stream) => read_tls_available(stream, &mut buffer),
            };
            match result {
                Ok(0) => self.body.ended = true,
                Ok(n) => {
                    read += n;
                    self.body.feed(&buffer[..n])?;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if let Transport::Tls(stream) = &mut self.transport
            && stream.conn.wants_write()
        {
            match stream.conn.write_tls(&mut stream.sock) {
                Err(e) if e.kind() != io::ErrorKind::WouldBlock => return Err(e),
                _ => {}
            }
        }
        Ok(self.body.ended)
    }

    /// The next complete event of the body read so far.
    pub fn next_event(&mut self) -> Option<Result<RawEvent>> {
        self.body.next_event()
    }

    fn send_request(&mut self, target: &Target, request: &WatchRequest<'_>) -> io::Result<()> {
        let mut head =
            format!("GET {}{} HTTP/1.1\r\nHost: {}\r\n", target.path_prefix, request.path_and_query, target.authority);
        for (name, value) in &request.headers {
            if value.contains(['\r', '\n']) {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("header {name} has a line break")));
            }
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let remaining = request.connect_timeout;
        self.transport.socket().set_write_timeout(Some(remaining))?;
        match &mut self.transport {
            Transport::Plain(socket) => socket.write_all(head.as_bytes())?,
            Transport::Tls(stream) => {
                stream.write_all(head.as_bytes())?;
                stream.flush()?;
            }
        }
        Ok(())
    }

    /// Reads up to the end of the answer's head; what follows it starts the body.
    fn read_head(&mut self, deadline: Instant) -> io::Result<Head> {
        let mut raw = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            if let Some((response, length)) = head::parse_response(&raw)? {
                let head = Head::of(&response)?;
                self.body = EventBody::new(head.body_decoder());
                let rest = raw[length..].to_vec();
                if !rest.is_empty() {
                    self.body.feed(&rest)?;
                }
                return Ok(head);
            }
            if raw.len() > head::MAX_HEAD {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "the answer's head is larger than 64 KiB"));
            }
            let n = self.read_blocking(&mut buffer, deadline)?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the server closed the connection"));
            }
            raw.extend_from_slice(&buffer[..n]);
        }
    }

    /// Reads the body of an error answer (bounded), for its `Status`.
    fn read_error_body(&mut self, head: &Head, deadline: Instant) -> io::Result<Vec<u8>> {
        let mut buffer = [0u8; 4096];
        let complete = |c: &WatchConnection| match head.content_length {
            Some(length) => c.body.pending.len() >= length,
            None => c.body.ended,
        };
        while !complete(self) && self.body.pending.len() < MAX_ERROR_BODY_BYTES {
            let n = self.read_blocking(&mut buffer, deadline)?;
            if n == 0 {
                break;
            }
            self.body.feed(&buffer[..n])?;
        }
        Ok(std::mem::take(&mut self.body.pending))
    }

    fn read_blocking(&mut self, buffer: &mut [u8], deadline: Instant) -> io::Result<usize> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "timed out waiting for the answer"));
        }
        self.transport.socket().set_read_timeout(Some(left))?;
        match &mut self.transport {
            Transport::Plain(socket) => socket.read(buffer),
            Transport::Tls(stream) => match stream.read(buffer) {
                // A server that closes without close_notify ends the stream as a close does.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
                other => other,
            },
        }
    }
}

/// One non-blocking TLS read: records from the socket, then their plaintext.
fn read_tls_available(
    stream: &mut rustls::StreamOwned<ClientConnection, TcpStream>,
    buffer: &mut [u8],
) -> io::Result<usize> {
    loop {
        match stream.conn.reader().read(buffer) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            // The peer closed the socket without close_notify: the end of the stream.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
            Err(e) => return Err(e),
        }
        match stream.conn.read_tls(&mut stream.sock) {
            Ok(0) => {
                // EOF on the socket: let rustls say whether that was clean.
                stream.conn.process_new_packets().map_err(io::Error::other)?;
                return match stream.conn.reader().read(buffer) {
                    Ok(n) => Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof || e.kind() == io::ErrorKind::WouldBlock => {
                        Ok(0)
                    }
                    Err(e) => Err(e),
                };
            }
            Ok(_) => {
                stream.conn.process_new_packets().map_err(io::Error::other)?;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The parts of the server URL a request needs.
struct Target {
    tls: bool,
    /// The URL's host, without brackets (the TLS name and the resolver's input).
    host: String,
    port: u16,
    /// `host:port` as written, for the `Host` header.
    authority: String,
    /// A path the server URL carries, without its trailing slash.
    path_prefix: String,
}

impl Target {
    fn parse(server: &str) -> Result<Target> {
        let bad = |why: &str| Error::Request(format!("server URL {server:?}: {why}"));
        let (scheme, rest) = server.split_once("://").ok_or_else(|| bad("no scheme"))?;
        let tls = match scheme {
            "https" => true,
            "http" => false,
            _ => return Err(bad("the scheme is neither https nor http")),
        };
        let (authority, path) = match rest.find('/') {
            Some(slash) => (&rest[..slash], rest[slash..].trim_end_matches('/')),
            None => (rest, ""),
        };
        let host_port = super::url::host_port(server).map_err(|e| Error::Request(e.to_string()))?;
        let (host, port) = host_port.rsplit_once(':').ok_or_else(|| bad("no port"))?;
        let port = port.parse::<u16>().map_err(|_| bad("the port is not a number"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
        Ok(Target { tls, host, port, authority: authority.to_string(), path_prefix: path.to_string() })
    }
}

/// Resolves and connects, trying each address until one answers.
fn connect(target: &Target, deadline: Instant) -> Result<TcpStream> {
    let addresses = super::resolve::NameResolver::default()
        .lookup(&target.host, Some(deadline))
        .map_err(|e| Error::Transport(format!("resolving {}: {e}", target.host)))?;
    let mut last = None;
    for ip in addresses {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match TcpStream::connect_timeout(&SocketAddr::new(ip, target.port), left) {
            Ok(socket) => {
                let _ = socket.set_nodelay(true);
                return Ok(socket);
            }
            Err(e) => last = Some(format!("dial tcp {}: {e}", SocketAddr::new(ip, target.port))),
        }
    }
    Err(Error::Transport(last.unwrap_or_else(|| format!("connecting to {}: timed out", target.authority))))
}

impl EventBody {
    fn new(decoder: BodyDecoder) -> EventBody {
        EventBody { decoder, pending: Vec::new(), consumed: 0, scanned: 0, ended: false }
    }

    /// Decodes bytes as read from the connection; an event larger than 16 MiB ends the watch.
    fn feed(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.ended = self.decoder.decode(bytes, &mut self.pending)?;
        if self.pending.len() - self.consumed > MAX_EVENT_BYTES {
            return Err(invalid("watch event larger than 16 MiB"));
        }
        Ok(())
    }

    /// The next complete event of the pending body: kube-apiserver ends each with a newline.
    /// At the end of the stream a last event without one is taken too.
    fn next_event(&mut self) -> Option<Result<RawEvent>> {
        loop {
            let rest = &self.pending[self.consumed..];
            let unscanned = self.scanned.max(self.consumed) - self.consumed;
            let newline = rest[unscanned..].iter().position(|b| *b == b'\n').map(|at| unscanned + at);
            let (line, used) = match newline {
                Some(end) => (&rest[..end], end + 1),
                None if self.ended && !rest.is_empty() => (rest, rest.len()),
                None => {
                    self.scanned = self.pending.len();
                    self.compact();
                    return None;
                }
            };
            self.consumed += used;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Some(
                serde_json::from_slice::<RawEvent>(line).map_err(|e| Error::Decode(format!("watch stream: {e}"))),
            );
        }
    }

    /// Drops the events taken from the front of the pending body.
    fn compact(&mut self) {
        if self.consumed > 0 {
            self.pending.drain(..self.consumed);
            self.scanned = self.scanned.saturating_sub(self.consumed);
            self.consumed = 0;
        }
        if self.pending.is_empty() && self.pending.capacity() > 64 * 1024 {
            // A burst of large events has passed: give its buffer back.
            self.pending = Vec::new();
        }
    }
}

/// The answer's status line and the headers a watch needs.
struct Head {
    code: u16,
    chunked: bool,
    content_length: Option<usize>,
    retry_after: Option<Duration>,
}

impl Head {
    /// A whole answer head (the empty line that ends it included).
    #[cfg(test)]
    fn parse(raw: &[u8]) -> io::Result<Head> {
        Head::of(&head::whole_response(raw)?)
    }

    fn of(response: &head::Response) -> io::Result<Head> {
        let (chunked, content_length) = match head::framing(&response.headers)? {
            head::Framing::Chunked => (true, None),
            head::Framing::Length(length) => {
                (false, Some(usize::try_from(length).map_err(|_| invalid("a Content-Length too large"))?))
            }
            head::Framing::Unframed => (false, None),
        };
        let retry_after = head::header(&response.headers, "retry-after").and_then(|v| v.parse().ok());
        Ok(Head { code: response.code, chunked, content_length, retry_after: retry_after.map(Duration::from_secs) })
    }

    fn body_decoder(&self) -> BodyDecoder {
        match (self.chunked, self.content_length) {
            (true, _) => BodyDecoder::Chunked(ChunkedDecoder::new()),
            (false, Some(length)) => BodyDecoder::Length(length),
            (false, None) => BodyDecoder::UntilClose,
        }
    }
}

fn invalid(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.to_string())
}

/// How the body is framed.
#[derive(Debug)]
enum BodyDecoder {
    Chunked(ChunkedDecoder),
    /// This many bytes are left.
    Length(usize),
    UntilClose,
}

impl BodyDecoder {
    /// Appends the body bytes of `input` to `out`; returns whether the body is complete.
    fn decode(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<bool> {
        match self {
            BodyDecoder::UntilClose => {
                out.extend_from_slice(input);
                Ok(false)
            }
            BodyDecoder::Length(left) => {
                let take = input.len().min(*left);
                out.extend_from_slice(&input[..take]);
                *left -= take;
                Ok(*left == 0)
            }
            BodyDecoder::Chunked(decoder) => {
                // What follows a finished body is not read: the server closes the connection.
                decoder.decode(input, out)?;
                Ok(decoder.is_done())
            }
        }
    }
}

impl Refused {
    /// The answer to a refused watch as the client's error.
    pub fn into_error(self) -> Error {
        ApiError::from_response(self.code, &self.body, self.retry_after).into()
    }
}

#[cfg(test)]
mod fuzz_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(decoder: &mut BodyDecoder, pieces: &[&[u8]]) -> (Vec<u8>, bool) {
        let mut out = Vec::new();
        let mut done = false;
        for piece in pieces {
            done = decoder.decode(piece, &mut out).unwrap();
        }
        (out, done)
    }

    #[test]
    fn chunked_bodies_decode_across_any_split() {
        let wire: &[u8] = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nTrailer: x\r\n\r\n";
        for split in 0..wire.len() {
            let mut decoder = BodyDecoder::Chunked(ChunkedDecoder::new());
            let (out, done) = decode_all(&mut decoder, &[&wire[..split], &wire[split..]]);
            assert_eq!(out, b"hello, world", "split at {split}");
            assert!(done);
        }
        let mut decoder = BodyDecoder::Chunked(ChunkedDecoder::new());
        assert!(decoder.decode(b"zz\r\n", &mut Vec::new()).is_err());
    }

    #[test]
    fn heads_give_status_framing_and_retry_after() {
        let head =
            Head::parse(b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: 10\r\n\r\n").unwrap();
        assert_eq!((head.code, head.content_length, head.retry_after), (429, Some(10), Some(Duration::from_secs(3))));
        let head = Head::parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap();
        assert!(head.chunked && matches!(head.body_decoder(), BodyDecoder::Chunked(_)));
        assert!(Head::parse(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
    }

    #[test]
    fn events_are_taken_line_by_line_and_the_last_at_the_end() {
        let mut connection = EventBody::new(BodyDecoder::UntilClose);
        connection.feed(br#"{"type":"ADDED","object":{"a":1}}"#).unwrap();
        assert!(connection.next_event().is_none(), "no newline yet");
        connection.pending.extend_from_slice(b"\n\n{\"type\":\"DELETED\",\"object\":{}}");
        assert_eq!(connection.next_event().unwrap().unwrap().event_type, "ADDED");
        assert!(connection.next_event().is_none());
        connection.ended = true;
        assert_eq!(connection.next_event().unwrap().unwrap().event_type, "DELETED");
        assert!(connection.next_event().is_none());
        connection.pending.extend_from_slice(b"not json\n");
        assert!(connection.next_event().unwrap().is_err());
    }

    #[test]
    fn an_event_in_many_reads_is_scanned_once() {
        let mut connection = EventBody::new(BodyDecoder::UntilClose);
        let event = br#"{"type":"ADDED","object":{"a":1}}"#;
        for (i, byte) in event.iter().enumerate() {
            connection.feed(std::slice::from_ref(byte)).unwrap();
            assert!(connection.next_event().is_none());
            assert_eq!(connection.scanned, i + 1, "the bytes already looked at are not scanned again");
        }
        connection.feed(b"\n").unwrap();
        assert_eq!(connection.next_event().unwrap().unwrap().event_type, "ADDED");
        assert!(connection.next_event().is_none());
        assert_eq!((connection.pending.len(), connection.scanned), (0, 0));
    }

    #[test]
    fn server_urls_give_host_port_and_prefix() {
        let target = Target::parse("https://[fd00::1]:6443/prefix/").unwrap();
        assert_eq!((target.host.as_str(), target.port, target.path_prefix.as_str()), ("fd00::1", 6443, "/prefix"));
        assert_eq!(target.authority, "[fd00::1]:6443");
        let target = Target::parse("http://localhost").unwrap();
        assert!(!target.tls);
        assert_eq!(target.port, 80);
        assert!(Target::parse("ftp://x").is_err());
    }
}
