//! A small threaded HTTP/1.1 server over TCP, with TLS from rustls 0.23 when configured: one
//! thread per connection, keep-alive, chunked streaming answers for watches. It knows nothing
//! of Kubernetes; [`Handler`] does.

use std::cell::Cell;
use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use rustls_pki_types::CertificateDer;

use crate::http1::{chunked, head};

/// The largest request body we accept (kube-apiserver's limit is 3 MiB for most objects).
const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// How long a kept-alive connection may sit idle between requests, by default.
const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// What one server allows its clients. The default is the development server's: no cap on
/// connections and a per-read idle timeout only.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connections served at once; further ones are closed as soon as they are accepted.
    pub max_connections: Option<usize>,
    /// Connections served at once from one client address, so that one client cannot take
    /// every slot of `max_connections`; further ones are closed as soon as they are accepted.
    pub max_connections_per_ip: Option<usize>,
    /// The longest the TLS handshake and the first request's head may take to arrive, counted
    /// from the accept, so that connections that never ask anything free their slot soon.
    pub first_request_timeout: Option<Duration>,
    /// The longest wait for the next request on a kept-alive connection, and for any one read.
    pub idle_timeout: Duration,
    /// The longest a TLS handshake, or one request (head and body, from its first byte), may
    /// take to arrive, so that a client sending a byte at a time cannot hold a thread for ever.
    pub request_timeout: Option<Duration>,
    /// The longest any one write of an answer may block on a client that does not read.
    pub write_timeout: Option<Duration>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: None,
            max_connections_per_ip: None,
            first_request_timeout: None,
            idle_timeout: IDLE_TIMEOUT,
            request_timeout: None,
            write_timeout: None,
        }
    }
}

/// The TLS configuration for each new connection: a function, so that it can change while
/// the server runs (new client CAs, say).
pub type TlsSource = Arc<dyn Fn() -> Arc<ServerConfig> + Send + Sync>;

/// One parsed request.
#[derive(Debug, Clone)]
pub struct Request {
    /// The HTTP method, upper case (`GET`).
    pub method: String,
    /// The path, percent-decoded.
    pub path: String,
    /// Query parameters, percent-decoded, in order.
    pub query: Vec<(String, String)>,
    /// The headers as sent, in order; see [`Request::header`].
    pub headers: Vec<(String, String)>,
    /// The request body (empty without one).
    pub body: Vec<u8>,
    /// The client certificate chain, when the client presented one that verified.
    pub peer_certificates: Vec<CertificateDer<'static>>,
    /// The client's address.
    pub remote: SocketAddr,
}

impl Request {
    /// The first value of header `name`, matched case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The first value of query parameter `name`.
    pub fn query_param(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Answers requests. Called on the connection's thread; may block (watches do).
pub trait Handler: Send + Sync + 'static {
    /// Answers `request` through `response`; an error drops the connection.
    fn handle(&self, request: &Request, response: &mut ResponseWriter<'_>) -> io::Result<()>;
}

/// Writes one answer: either whole, or as a chunked stream.
pub struct ResponseWriter<'a> {
    stream: &'a mut dyn Write,
    /// Set once the head is written.
    started: bool,
    chunked: bool,
}

impl ResponseWriter<'_> {
    /// A complete answer.
    pub fn send(&mut self, code: u16, headers: &[(&str, &str)], body: &[u8]) -> io::Result<()> {
        let mut head = status_line(code);
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        self.started = true;
        self.stream.write_all(head.as_bytes())?;
        self.stream.write_all(body)?;
        self.stream.flush()
    }

    /// Starts a chunked answer; follow with [`Self::chunk`] and [`Self::finish`].
    pub fn start_stream(&mut self, code: u16, headers: &[(&str, &str)]) -> io::Result<()> {
        let mut head = status_line(code);
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("Transfer-Encoding: chunked\r\n\r\n");
        self.started = true;
        self.chunked = true;
        self.stream.write_all(head.as_bytes())?;
        self.stream.flush()
    }

    /// Writes one chunk of a chunked answer (nothing for empty data, which would end the stream).
    pub fn chunk(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        self.stream.write_all(format!("{:x}\r\n", data.len()).as_bytes())?;
        self.stream.write_all(data)?;
        self.stream.write_all(b"\r\n")?;
        self.stream.flush()
    }

    /// Ends a chunked answer cleanly.
    pub fn finish(&mut self) -> io::Result<()> {
        self.chunked = false;
        self.stream.write_all(b"0\r\n\r\n")?;
        self.stream.flush()
    }
}

fn status_line(code: u16) -> String {
    format!("HTTP/1.1 {code} {}\r\n", reason_phrase(code))
}

fn reason_phrase(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        409 => "Conflict",
        410 => "Gone",
        413 => "Request Entity Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// A running server. Dropping it does not stop it; call [`HttpServer::stop`].
pub struct HttpServer {
    addr: SocketAddr,
    stopping: Arc<AtomicBool>,
    connections: Arc<Connections>,
    accept_thread: Option<std::thread::JoinHandle<()>>,
}

/// Open connections, so that they can all be cut at once.
#[derive(Default)]
struct Connections {
    next_id: AtomicU64,
    open: Mutex<Vec<(u64, TcpStream)>>,
    /// Connections accepted and not yet finished (counted before their thread starts).
    active: AtomicUsize,
    /// The same, by client address (IPv4-mapped IPv6 addresses counted as IPv4).
    active_by_ip: Mutex<HashMap<IpAddr, usize>>,
}

/// Counts a connection as active, in all and for its client address, until dropped.
struct ActiveGuard {
    connections: Arc<Connections>,
    ip: IpAddr,
}

impl ActiveGuard {
    /// Counts a new connection from `ip`; returns the guard with the counts including it.
    fn count(connections: &Arc<Connections>, ip: IpAddr) -> (ActiveGuard, usize, usize) {
        let ip = ip.to_canonical();
        let active = connections.active.fetch_add(1, Ordering::SeqCst) + 1;
        let from_ip = {
            let mut by_ip = connections.active_by_ip.lock();
            let n = by_ip.entry(ip).or_insert(0);
            *n += 1;
            *n
        };
        (ActiveGuard { connections: connections.clone(), ip }, active, from_ip)
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.connections.active.fetch_sub(1, Ordering::SeqCst);
        let mut by_ip = self.connections.active_by_ip.lock();
        if let Some(n) = by_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                by_ip.remove(&self.ip);
            }
        }
    }
}

impl Connections {
    fn add(&self, stream: &TcpStream) -> Option<u64> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.open.lock().push((id, stream.try_clone().ok()?));
        Some(id)
    }

    fn remove(&self, id: u64) {
        self.open.lock().retain(|(i, _)| *i != id);
    }

    fn cut_all(&self) {
        for (_, stream) in self.open.lock().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

impl HttpServer {
    /// Binds `addr` and serves in background threads; TLS when `tls` is given.
    pub fn start(
        addr: SocketAddr,
        tls: Option<Arc<ServerConfig>>,
        handler: Arc<dyn Handler>,
    ) -> io::Result<HttpServer> {
        let tls = tls.map(|config| Arc::new(move || config.clone()) as TlsSource);
        Self::start_with_limits(addr, tls, handler, Limits::default())
    }

    /// [`HttpServer::start`] with explicit limits on connections and timeouts.
    pub fn start_with_limits(
        addr: SocketAddr,
        tls: Option<TlsSource>,
        handler: Arc<dyn Handler>,
        limits: Limits,
    ) -> io::Result<HttpServer> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let stopping = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(Connections::default());
        let (stop, conns) = (stopping.clone(), connections.clone());
        let accept_thread = std::thread::Builder::new().name("http-accept".into()).spawn(move || {
            for stream in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let stream = match stream {
                    Ok(stream) => stream,
                    Err(e) => {
                        // Out of descriptors and the like: back off instead of spinning, as Go's Serve does.
                        log::warn!("accept failed: {e}");
                        std::thread::sleep(Duration::from_millis(100));
                        continue;
                    }
                };
                let Ok(peer) = stream.peer_addr() else { continue };
                let accepted = Instant::now();
                let (guard, active, from_ip) = ActiveGuard::count(&conns, peer.ip());
                let over = |cap: Option<usize>, n: usize| cap.is_some_and(|max| n > max);
                if over(limits.max_connections, active) || over(limits.max_connections_per_ip, from_ip) {
                    // Refuse at once: closing is cheaper than any answer, and TLS has none yet.
                    let _ = stream.shutdown(Shutdown::Both);
                    continue;
                }
                let (tls, handler, conns, limits) = (tls.clone(), handler.clone(), conns.clone(), limits.clone());
                let _ = std::thread::Builder::new().name("http-conn".into()).spawn(move || {
                    let _guard = guard;
                    let tls = tls.map(|source| source());
                    serve_connection(stream, accepted, tls, &*handler, &conns, &limits)
                });
            }
        })?;
        Ok(HttpServer { addr, stopping, connections, accept_thread: Some(accept_thread) })
    }

    /// The address the server listens on (with the port chosen when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Cuts every open connection (watches included); the server keeps accepting new ones.
    pub fn cut_connections(&self) {
        self.connections.cut_all();
    }

    /// Stops accepting, cuts every connection and frees the port.
    pub fn stop(mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(thread) = self.accept_thread.take() {
            let _ = thread.join();
        }
        self.connections.cut_all();
    }
}

fn serve_connection(
    tcp: TcpStream,
    accepted: Instant,
    tls: Option<Arc<ServerConfig>>,
    handler: &dyn Handler,
    conns: &Connections,
    limits: &Limits,
) {
    let Ok(remote) = tcp.peer_addr() else { return };
    let _ = tcp.set_read_timeout(Some(limits.idle_timeout));
    let _ = tcp.set_write_timeout(limits.write_timeout);
    let _ = tcp.set_nodelay(true);
    let Some(id) = conns.add(&tcp) else { return };
    let first_request_deadline = limits.first_request_timeout.map(|t| accepted + t);
    let deadline = Rc::new(Cell::new(first_request_deadline));
    let timed = TimedStream { inner: tcp, idle: limits.idle_timeout, deadline: deadline.clone() };
    let timing = RequestTiming { deadline, request_timeout: limits.request_timeout, first_request_deadline };
    match tls {
        Some(config) => {
            if let Ok(conn) = ServerConnection::new(config) {
                let mut stream = StreamOwned::new(conn, timed);
                // Finish the handshake first so the client's certificate is known.
                timing.start();
                if complete_handshake(&mut stream).is_ok() {
                    timing.stop();
                    let peer = stream.conn.peer_certificates().map(<[_]>::to_vec).unwrap_or_default();
                    serve_requests(stream, remote, peer, handler, timing);
                }
            }
        }
        None => serve_requests(timed, remote, Vec::new(), handler, timing),
    }
    conns.remove(id);
}

fn complete_handshake(stream: &mut StreamOwned<ServerConnection, TimedStream>) -> io::Result<()> {
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock)?;
    }
    Ok(())
}

/// A TCP stream whose reads end at a shared deadline as well as after the idle timeout.
struct TimedStream {
    inner: TcpStream,
    idle: Duration,
    deadline: Rc<Cell<Option<Instant>>>,
}

impl Read for TimedStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let timeout = match self.deadline.get() {
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "request took too long"));
                }
                left.min(self.idle)
            }
            None => self.idle,
        };
        self.inner.set_read_timeout(Some(timeout))?;
        self.inner.read(buf)
    }
}

impl Write for TimedStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Sets and clears the deadline of a connection's [`TimedStream`].
struct RequestTiming {
    deadline: Rc<Cell<Option<Instant>>>,
    request_timeout: Option<Duration>,
    /// Until the first request has been read: when the handshake and that request must have
    /// arrived by (Go's `ReadHeaderTimeout` also bounds the handshake and first request).
    first_request_deadline: Option<Instant>,
}

impl RequestTiming {
    /// Starts timing the handshake or one request.
    fn start(&self) {
        let request = self.request_timeout.map(|t| Instant::now() + t);
        self.deadline.set(earliest(request, self.first_request_deadline));
    }

    /// Between requests: only the idle timeout counts, or the first request's deadline while
    /// none has been read yet.
    fn stop(&self) {
        self.deadline.set(self.first_request_deadline);
    }

    /// The first request has been read: from now on the idle and request timeouts rule.
    fn first_request_read(&mut self) {
        self.first_request_deadline = None;
        self.deadline.set(None);
    }
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn serve_requests<S: Read + Write>(
    stream: S,
    remote: SocketAddr,
    peer: Vec<CertificateDer<'static>>,
    handler: &dyn Handler,
    mut timing: RequestTiming,
) {
    let mut reader = BufReader::new(stream);
    loop {
        // Wait for the next request up to the idle timeout; from its first byte on, it must
        // arrive whole within the request timeout.
        match reader.fill_buf() {
            Ok([]) | Err(_) => return,
            Ok(_) => timing.start(),
        }
        let request = read_request(&mut reader, remote, &peer);
        timing.first_request_read();
        let request = match request {
            Ok(Some(request)) => request,
            Ok(None) => return,
            Err(e) => {
                let body = format!("bad request: {e}");
                let mut writer = ResponseWriter { stream: reader.get_mut(), started: false, chunked: false };
                let _ = writer.send(400, &[("Content-Type", "text/plain"), ("Connection", "close")], body.as_bytes());
                return;
            }
        };
        let mut writer = ResponseWriter { stream: reader.get_mut(), started: false, chunked: false };
        let result = handler.handle(&request, &mut writer);
        let (started, chunked) = (writer.started, writer.chunked);
        if result.is_err() || !started || chunked {
            // A handler that failed half-way or left a stream open: the connection is unusable.
            return;
        }
        if request.header("Connection").is_some_and(|c| c.eq_ignore_ascii_case("close")) {
            return;
        }
    }
}

/// Reads one request; `Ok(None)` when the client closed the connection between requests.
fn read_request<S: Read + Write>(
    reader: &mut BufReader<S>,
    remote: SocketAddr,
    peer: &[CertificateDer<'static>],
) -> io::Result<Option<Request>> {
    let Some(raw) = head::read(reader)? else { return Ok(None) };
    let head::Request { method, target, headers, .. } = head::whole_request(&raw)?;
    if head::header(&headers, "Expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")) {
        reader.get_mut().write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }
    let body = match head::framing(&headers)? {
        head::Framing::Chunked => chunked::read_body(reader, MAX_BODY_BYTES)?,
        head::Framing::Length(length) if length > MAX_BODY_BYTES as u64 => {
            return Err(invalid("request body too large"));
        }
        head::Framing::Length(length) => {
            let mut body = vec![0; length as usize];
            reader.read_exact(&mut body)?;
            body
        }
        head::Framing::Unframed => Vec::new(),
    };
    let (path, query) = split_target(&target);
    Ok(Some(Request { method, path, query, headers, body, peer_certificates: peer.to_vec(), remote }))
}

fn split_target(target: &str) -> (String, Vec<(String, String)>) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let query = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect();
    (percent_decode(path), query)
}

/// Decodes `%XX` escapes and `+` (as a space, in queries and paths alike: Kubernetes names
/// never contain `+`).
pub fn percent_decode(input: &str) -> String {
    let bytes = input.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(hi), Some(lo)) => {
                    out.push(hi << 4 | lo);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(digit: u8) -> Option<u8> {
    (digit as char).to_digit(16).map(|d| d as u8)
}

fn invalid(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Ok200;

    impl Handler for Ok200 {
        fn handle(&self, _: &Request, response: &mut ResponseWriter<'_>) -> io::Result<()> {
            response.send(200, &[], b"ok")
        }
    }

    fn limited(limits: Limits) -> HttpServer {
        HttpServer::start_with_limits("127.0.0.1:0".parse().unwrap(), None, Arc::new(Ok200), limits).unwrap()
    }

    /// Reads until the server closes; whatever it answered.
    fn read_all(stream: &mut TcpStream) -> String {
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut out = Vec::new();
        let _ = stream.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn a_request_dribbled_in_is_cut_at_the_request_timeout() {
        let timeout = Duration::from_millis(300);
        let server = limited(Limits { request_timeout: Some(timeout), ..Limits::default() });
        let mut stream = TcpStream::connect(server.addr()).unwrap();
        let started = Instant::now();
        // Each byte comes well within the idle timeout, but the head never completes in time.
        for byte in b"GET / HTTP/1.1\r\nX-Slow: ".iter().cycle().take(40) {
            if stream.write_all(&[*byte]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let answer = read_all(&mut stream);
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        server.stop();
    }

    /// With a cap of one connection, a second one is closed unanswered while the first is served.
    fn second_connection_is_closed(limits: Limits) {
        let server = limited(limits);
        let mut first = TcpStream::connect(server.addr()).unwrap();
        let mut second = TcpStream::connect(server.addr()).unwrap();
        assert_eq!(read_all(&mut second), "");
        first.write_all(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n").unwrap();
        assert!(read_all(&mut first).ends_with("\r\n\r\nok"));
        server.stop();
    }

    #[test]
    fn connections_over_the_cap_are_closed() {
        second_connection_is_closed(Limits { max_connections: Some(1), ..Limits::default() });
    }

    #[test]
    fn connections_are_counted_per_client_address_until_they_end() {
        let connections = Arc::new(Connections::default());
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        let (first, _, from_local) = ActiveGuard::count(&connections, local);
        assert_eq!(from_local, 1);
        // Through a dual-stack listener the same client shows as an IPv4-mapped address.
        let (mapped, _, from_local) = ActiveGuard::count(&connections, "::ffff:127.0.0.1".parse().unwrap());
        assert_eq!(from_local, 2);
        let (other, active, from_other) = ActiveGuard::count(&connections, "127.0.0.2".parse().unwrap());
        assert_eq!((active, from_other), (3, 1));
        drop((first, mapped, other));
        assert_eq!(connections.active.load(Ordering::SeqCst), 0);
        assert!(connections.active_by_ip.lock().is_empty(), "no address keeps a count of zero");
    }

    #[test]
    fn connections_from_one_address_over_its_cap_are_closed() {
        second_connection_is_closed(Limits { max_connections_per_ip: Some(1), ..Limits::default() });
    }

    #[test]
    fn a_connection_that_asks_nothing_is_cut_at_the_first_request_timeout() {
        let first_request_timeout = Some(Duration::from_millis(300));
        let server = limited(Limits { first_request_timeout, ..Limits::default() });
        let mut silent = TcpStream::connect(server.addr()).unwrap();
        let started = Instant::now();
        assert_eq!(read_all(&mut silent), "");
        assert!(started.elapsed() < Duration::from_secs(5), "cut long after the first request timeout");
        // Once a request has been read, the connection may idle between requests as usual.
        let mut kept = TcpStream::connect(server.addr()).unwrap();
        kept.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        for close in ["", "Connection: close\r\n"] {
            kept.write_all(format!("GET / HTTP/1.1\r\n{close}\r\n").as_bytes()).unwrap();
            let mut answer = Vec::new();
            while !answer.ends_with(b"\r\n\r\nok") {
                let mut byte = [0u8];
                assert_eq!(kept.read(&mut byte).unwrap(), 1, "closed after {:?}", String::from_utf8_lossy(&answer));
                answer.push(byte[0]);
            }
            std::thread::sleep(Duration::from_millis(600));
        }
        server.stop();
    }

    #[test]
    fn request_bodies_are_framed_strictly() {
        let read = |raw: &[u8]| {
            let mut reader = BufReader::new(io::Cursor::new(raw.to_vec()));
            read_request(&mut reader, "127.0.0.1:1".parse().unwrap(), &[]).map(|r| r.map(|r| r.body))
        };
        let chunked = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(read(format!("{chunked}3\r\nabc\r\n0\r\n\r\n").as_bytes()).unwrap().unwrap(), b"abc");
        // A signed chunk size and a chunk without its CRLF were taken until the secure port
        // shared the watch client's chunked decoder (`crate::http1::chunked`).
        assert!(read(format!("{chunked}+3\r\nabc\r\n0\r\n\r\n").as_bytes()).is_err());
        assert!(read(format!("{chunked}3\r\nabcXY0\r\n\r\n").as_bytes()).is_err());
        let huge = format!("{chunked}1\r\na\r\nffffffffffffffff\r\n");
        assert!(read(huge.as_bytes()).is_err());
        let sized = |length: &str| format!("POST / HTTP/1.1\r\nContent-Length: {length}\r\n\r\nabc");
        assert_eq!(read(sized("3").as_bytes()).unwrap().unwrap(), b"abc");
        assert!(read(sized("+3").as_bytes()).is_err());
        assert!(read(sized("-3").as_bytes()).is_err());
        assert!(read(sized("").as_bytes()).is_err());
    }

    #[test]
    fn decodes_targets() {
        let (path, query) = split_target("/api/v1/pods?labelSelector=app%3Dweb%2Ctier+in+(a)&watch=1&x");
        assert_eq!(path, "/api/v1/pods");
        assert_eq!(
            query,
            [
                ("labelSelector".to_string(), "app=web,tier in (a)".to_string()),
                ("watch".to_string(), "1".to_string()),
                ("x".to_string(), String::new())
            ]
        );
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
