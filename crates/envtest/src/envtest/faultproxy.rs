//! A fault-injecting HTTPS proxy between a controller manager (ours or upstream's) and the real
//! kube-apiserver of a [`ControlPlane`], for the chaos tests and benches.
//!
//! It terminates TLS with a serving certificate signed by the cluster CA (ALPN `http/1.1` only,
//! so Go clients speak HTTP/1.1 to it), authenticates callers by their client certificate (the
//! cluster CA's) and forwards as kube-apiserver's front proxy: upstream with the front-proxy
//! client certificate, the caller in `X-Remote-User` / `X-Remote-Group`. A request carrying
//! `Authorization: Bearer` is forwarded with its token and no `X-Remote-*`: kube-apiserver's
//! union authenticator then falls through to the token. Each client connection gets its own
//! upstream connection, kept alive; responses are streamed as they come (watches).
//!
//! [`FaultProxy`] switches faults at run time ([`Rule`]s: a [`Fault`], optionally limited to
//! matching requests, a count and a duration) and counts what it injected.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, ServerConfig, ServerConnection, StreamOwned};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::json;

use super::ControlPlane;
use crate::apimachinery::errors::BoxError;
use crate::client::RestConfig;
use crate::http1::chunked;
use crate::http1::head::{self, Framing};

/// How often blocked reads look up whether the proxy stopped or was cut.
const TICK: Duration = Duration::from_millis(200);
/// How long connecting to kube-apiserver may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// APF's answer body (`tooManyRequests` in apiserver's `filters/priority-and-fairness.go`: plain
/// text through `http.Error`, not a Status).
const TOO_MANY_REQUESTS: &str = "Too many requests, please try again later.\n";

/// What the proxy does to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Waits this long before forwarding.
    Latency(Duration),
    /// Answers 429 with `Retry-After` (seconds), as kube-apiserver's priority and fairness does.
    TooManyRequests {
        /// The `Retry-After` header's seconds.
        retry_after_seconds: u32,
    },
    /// Answers 500, 503 or 504 with the Status body kube-apiserver writes for it.
    ServerError(u16),
    /// Resets the connection (RST) instead of answering.
    ResetBeforeResponse,
    /// Forwards the response's head and part of its body, then resets the connection.
    ResetMidResponse,
    /// Forwards the response's head and part of its body, then closes the connection cleanly.
    TruncateBody,
    /// Never answers, keeping the connection open, as a dead network. A rule matching every
    /// request also holds new connections before their TLS handshake.
    HalfOpen,
    /// Forwards a watch's response head, then sends nothing more while keeping the connection
    /// open (as a stalled network path or a wedged proxy on the way).
    StallWatch,
}

impl Fault {
    fn name(&self) -> &'static str {
        match self {
            Fault::Latency(_) => "latency",
            Fault::TooManyRequests { .. } => "too_many_requests",
            Fault::ServerError(_) => "server_error",
            Fault::ResetBeforeResponse => "reset_before_response",
            Fault::ResetMidResponse => "reset_mid_response",
            Fault::TruncateBody => "truncate_body",
            Fault::HalfOpen => "half_open",
            Fault::StallWatch => "stall_watch",
        }
    }
}

/// A fault and the requests it applies to.
#[derive(Debug, Clone)]
pub struct Rule {
    fault: Fault,
    verb: Option<String>,
    path_contains: Option<String>,
    watch: Option<bool>,
    remaining: Option<u64>,
    lasting: Option<Duration>,
    /// Set from `lasting` when the rule is injected.
    until: Option<Instant>,
}

impl Rule {
    /// `fault` on every request, until cleared.
    pub fn new(fault: Fault) -> Rule {
        Rule { fault, verb: None, path_contains: None, watch: None, remaining: None, lasting: None, until: None }
    }

    /// Only requests with this HTTP method (`GET`, `PUT`, ...).
    pub fn verb(mut self, verb: &str) -> Rule {
        self.verb = Some(verb.to_ascii_uppercase());
        self
    }

    /// Only requests whose path and query contain `part`.
    pub fn path(mut self, part: &str) -> Rule {
        self.path_contains = Some(part.to_string());
        self
    }

    /// Only watches (`true`) or only other requests (`false`).
    pub fn watch(mut self, watch: bool) -> Rule {
        self.watch = Some(watch);
        self
    }

    /// At most `count` requests.
    pub fn times(mut self, count: u64) -> Rule {
        self.remaining = Some(count);
        self
    }

    /// For `duration` from when it is injected.
    pub fn lasting(mut self, duration: Duration) -> Rule {
        self.lasting = Some(duration);
        self
    }

    /// Whether the rule applies to every request (then it may act before a request is read).
    fn matches_everything(&self) -> bool {
        self.verb.is_none() && self.path_contains.is_none() && self.watch.is_none()
    }

    fn matches(&self, request: &RequestHead) -> bool {
        self.verb.as_ref().is_none_or(|v| *v == request.method)
            && self.path_contains.as_ref().is_none_or(|p| request.target.contains(p.as_str()))
            && self.watch.is_none_or(|w| w == request.is_watch())
    }

    fn live(&self, now: Instant) -> bool {
        self.remaining != Some(0) && self.until.is_none_or(|until| now < until)
    }
}

/// What the proxy did, for assertions and figures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Connections accepted.
    pub connections: u64,
    /// Requests forwarded to kube-apiserver (delayed ones included).
    pub forwarded: u64,
    /// Faults injected, by [`Fault`] name (`too_many_requests`, `server_error`, ...; `cut` for
    /// connections reset or refused by [`FaultProxy::cut`]).
    pub injected: std::collections::BTreeMap<&'static str, u64>,
}

impl Counts {
    /// How many times the fault named `name` was injected.
    pub fn injected(&self, name: &str) -> u64 {
        self.injected.get(name).copied().unwrap_or(0)
    }
}

/// The running proxy; stops (and drops every connection) when dropped. Share it in an `Arc`.
pub struct FaultProxy {
    shared: Arc<Shared>,
    source_ip: IpAddr,
    addr: SocketAddr,
    accept: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    rules: Mutex<Vec<Rule>>,
    counts: Mutex<Counts>,
    stopping: AtomicBool,
    cut: AtomicBool,
    /// Bumped by each cut: connections of an older epoch reset themselves.
    epoch: AtomicU64,
    server: Arc<ServerConfig>,
    upstream: Arc<ClientConfig>,
    upstream_addr: SocketAddr,
    /// Sent as `X-Forwarded-For`: kube-apiserver's audit log lists it first in `sourceIPs`.
    source_ip: IpAddr,
}

/// Why a fault proxy did not start, or its kubeconfig files could not be written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The sandbox's PKI or kubeconfig files failed.
    #[error("{0}")]
    Sandbox(#[source] BoxError),
    /// A key or certificate file of the control plane cannot be read.
    #[error("{name}: {source}")]
    File {
        /// The file in the control plane's folder.
        name: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// kube-apiserver's URL is not `https://<ip>:<port>`.
    #[error("{url}: {source}")]
    Address {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: std::net::AddrParseError,
    },
    /// The proxy cannot listen, or its accepting thread cannot start.
    #[error(transparent)]
    Listen(io::Error),
    /// A PEM block does not parse.
    #[error(transparent)]
    Pem(#[from] rustls_pki_types::pem::Error),
    /// The TLS configuration towards kube-apiserver is refused.
    #[error(transparent)]
    Tls(#[from] rustls::Error),
    /// The front proxy's client certificate is refused.
    #[error("front-proxy client certificate: {source}")]
    ClientCertificate {
        /// Why.
        #[source]
        source: rustls::Error,
    },
}

impl FaultProxy {
    /// Starts a proxy on a free loopback port in front of `plane`'s kube-apiserver.
    pub fn start(plane: &ControlPlane) -> Result<FaultProxy, Error> {
        let mut server = (*plane.pki.server_config().map_err(|e| Error::Sandbox(e.into()))?).clone();
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        let read = |name: &str| {
            std::fs::read_to_string(plane.dir().join(name))
                .map_err(|source| Error::File { name: name.to_string(), source })
        };
        let upstream =
            upstream_config(&plane.pki.ca_pem, &read("front-proxy-client.crt")?, &read("front-proxy-client.key")?)?;
        let upstream_addr = plane
            .url()
            .trim_start_matches("https://")
            .parse()
            .map_err(|source| Error::Address { url: plane.url().to_string(), source })?;
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).map_err(Error::Listen)?;
        let addr = listener.local_addr().map_err(Error::Listen)?;
        listener.set_nonblocking(true).map_err(Error::Listen)?;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let source_ip = IpAddr::V4(Ipv4Addr::new(127, 0, 1 + (n / 250) as u8, 1 + (n % 250) as u8));
        let shared = Arc::new(Shared {
            rules: Mutex::new(Vec::new()),
            counts: Mutex::new(Counts::default()),
            stopping: AtomicBool::new(false),
            cut: AtomicBool::new(false),
            epoch: AtomicU64::new(0),
            server: Arc::new(server),
            upstream: Arc::new(upstream),
            upstream_addr,
            source_ip,
        });
        let accepting = shared.clone();
        let accept = std::thread::Builder::new()
            .name("faultproxy-accept".into())
            .spawn(move || accept_loop(listener, accepting))
            .map_err(Error::Listen)?;
        Ok(FaultProxy { shared, source_ip, addr, accept: Some(accept) })
    }

    /// The proxy's `https://127.0.0.1:<port>` URL.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The address this proxy's callers appear from in kube-apiserver's audit log (`sourceIPs`,
    /// from `X-Forwarded-For`): 127.0.1.1 for the first proxy of the process, then .2, ...
    pub fn source_ip(&self) -> IpAddr {
        self.source_ip
    }

    /// `config` (e.g. [`ControlPlane::controller_manager_config`]) pointed at the proxy.
    pub fn rest_config(&self, config: RestConfig) -> RestConfig {
        RestConfig { server: self.url(), ..config }
    }

    /// kubeadm's files for a controller manager (see [`ControlPlane::write_kubeconfigs`]) with
    /// the proxy as the server.
    pub fn write_kubeconfigs(&self, plane: &ControlPlane, path: &Path) -> Result<(PathBuf, PathBuf), Error> {
        crate::sandbox::auth::write_kubeadm_files(
            path,
            &self.url(),
            &plane.pki.ca_pem,
            &plane.pki.ca_key_pem(),
            &plane.admin,
            &plane.controller_manager,
            &plane.service_account_key_pem,
        )
        .map_err(|e| Error::Sandbox(e.into()))
    }

    /// Adds a rule; the first live rule matching a request decides its fault.
    pub fn inject(&self, mut rule: Rule) {
        rule.until = rule.lasting.map(|d| Instant::now() + d);
        self.shared.rules.lock().push(rule);
    }

    /// Removes every rule (connections already held or stalled stay so; a cut stays).
    pub fn clear(&self) {
        self.shared.rules.lock().clear();
    }

    /// Resets every open connection and refuses (resets) new ones until [`FaultProxy::restore`].
    pub fn cut(&self) {
        self.shared.cut.store(true, Ordering::SeqCst);
        self.shared.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// Ends a [`FaultProxy::cut`].
    pub fn restore(&self) {
        self.shared.cut.store(false, Ordering::SeqCst);
    }

    /// Ends every connection (held, stalled or not), as a cut and restore at once.
    pub fn drop_connections(&self) {
        self.shared.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// What it did so far.
    pub fn counts(&self) -> Counts {
        self.shared.counts.lock().clone()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

impl Shared {
    fn count(&self, name: &'static str) {
        *self.counts.lock().injected.entry(name).or_default() += 1;
    }

    /// The fault for `request` (or, with `None`, for a connection before any request: only
    /// rules matching everything), using up one of the rule's count.
    fn fault_for(&self, request: Option<&RequestHead>) -> Option<Fault> {
        let now = Instant::now();
        let mut rules = self.rules.lock();
        rules.retain(|r| r.live(now));
        let rule = rules.iter_mut().find(|r| match request {
            Some(request) => r.matches(request),
            None => r.fault == Fault::HalfOpen && r.matches_everything(),
        })?;
        if let Some(remaining) = &mut rule.remaining {
            *remaining -= 1;
        }
        Some(rule.fault.clone())
    }

    fn dead(&self, epoch: u64) -> bool {
        self.stopping.load(Ordering::SeqCst) || self.epoch.load(Ordering::SeqCst) != epoch
    }
}

fn upstream_config(ca_pem: &str, cert_pem: &str, key_pem: &str) -> Result<ClientConfig, Error> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert?)?;
    }
    let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes()).collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())?;
    let mut config = ClientConfig::builder_with_provider(crate::client::tls::crypto_provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(|source| Error::ClientCertificate { source })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = Vec::new();
    while !shared.stopping.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((socket, _)) => {
                shared.counts.lock().connections += 1;
                let shared = shared.clone();
                let spawned = std::thread::Builder::new()
                    .name("faultproxy-conn".into())
                    .spawn(move || serve_connection(socket, &shared));
                match spawned {
                    Ok(handle) => connections.push(handle),
                    Err(e) => log::warn!("fault proxy: cannot start a connection thread: {e}"),
                }
                connections.retain(|c: &std::thread::JoinHandle<()>| !c.is_finished());
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                log::warn!("fault proxy: accept: {e}");
                std::thread::sleep(TICK);
            }
        }
    }
    for connection in connections {
        let _ = connection.join();
    }
}

/// A socket whose reads wait in ticks, giving up (`ConnectionAborted`) once the proxy stops or
/// a cut ends this connection's epoch; rustls never sees a timeout.
struct Socket {
    stream: TcpStream,
    shared: Arc<Shared>,
    epoch: u64,
}

impl Socket {
    fn new(stream: TcpStream, shared: &Arc<Shared>, epoch: u64) -> io::Result<Socket> {
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(TICK))?;
        stream.set_nodelay(true)?;
        Ok(Socket { stream, shared: shared.clone(), epoch })
    }
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.shared.dead(self.epoch) {
                return Err(io::Error::new(io::ErrorKind::ConnectionAborted, "fault proxy: connection cut"));
            }
            match self.stream.read(buf) {
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => continue,
                other => return other,
            }
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

/// Closes `stream` with an RST (`SO_LINGER` 0) instead of a FIN.
fn reset(stream: &TcpStream) {
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: a valid socket descriptor and a correctly sized `linger`.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    let _ = stream.shutdown(Shutdown::Both);
}

type ClientStream = BufReader<StreamOwned<ServerConnection, Socket>>;
type UpstreamStream = BufReader<StreamOwned<ClientConnection, Socket>>;

fn serve_connection(socket: TcpStream, shared: &Arc<Shared>) {
    let epoch = shared.epoch.load(Ordering::SeqCst);
    if shared.cut.load(Ordering::SeqCst) {
        shared.count("cut");
        return reset(&socket);
    }
    let Ok(raw) = socket.try_clone() else { return };
    let Ok(socket) = Socket::new(socket, shared, epoch) else { return };
    if shared.fault_for(None) == Some(Fault::HalfOpen) {
        shared.count(Fault::HalfOpen.name());
        return hold(socket);
    }
    let Ok(tls) = ServerConnection::new(shared.server.clone()) else { return };
    let mut client = BufReader::new(StreamOwned::new(tls, socket));
    let outcome = serve_requests(&mut client, shared, epoch);
    if shared.dead(epoch) && !shared.stopping.load(Ordering::SeqCst) {
        shared.count("cut");
        reset(&raw);
        return;
    }
    match outcome {
        Ok(End::Close) => {
            let stream = client.get_mut();
            stream.conn.send_close_notify();
            let _ = stream.flush();
        }
        Ok(End::CloseAbruptly) | Err(_) => {}
        Ok(End::Reset) => reset(&raw),
    }
}

/// How a client connection ends.
enum End {
    /// With TLS close_notify, then a FIN.
    Close,
    /// A FIN without close_notify (a truncated response).
    CloseAbruptly,
    /// An RST.
    Reset,
}

/// Keeps a connection open, answering nothing, until the client closes it or the proxy stops or
/// is cut.
fn hold<R: Read>(mut socket: R) {
    let mut buf = [0u8; 4096];
    while matches!(socket.read(&mut buf), Ok(n) if n > 0) {}
}

fn serve_requests(client: &mut ClientStream, shared: &Arc<Shared>, epoch: u64) -> io::Result<End> {
    let identity = {
        let stream = client.get_mut();
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock)?;
        }
        stream.conn.peer_certificates().and_then(|certs| certs.first()).and_then(|c| crate::x509::subject(c).ok())
    };
    let mut upstream: Option<UpstreamStream> = None;
    loop {
        let Some(mut request) = RequestHead::read(client)? else { return Ok(End::Close) };
        let body = read_body(client, &request.headers)?;
        if shared.dead(epoch) {
            // Cut while the request came in: reads only notice a cut between ticks.
            return Ok(End::Reset);
        }
        let fault = shared.fault_for(Some(&request));
        if let Some(fault) = &fault {
            shared.count(fault.name());
        }
        match &fault {
            Some(Fault::TooManyRequests { retry_after_seconds }) => {
                write_too_many_requests(client.get_mut(), *retry_after_seconds)?;
                continue;
            }
            Some(Fault::ServerError(code)) => {
                write_server_error(client.get_mut(), *code)?;
                continue;
            }
            Some(Fault::ResetBeforeResponse) => return Ok(End::Reset),
            Some(Fault::HalfOpen) => {
                hold(client);
                return Ok(End::CloseAbruptly);
            }
            Some(Fault::Latency(delay)) => wait(*delay, shared, epoch)?,
            _ => {}
        }
        request.prepare_upstream(identity.as_ref(), shared.source_ip);
        shared.counts.lock().forwarded += 1;
        let response = match forward(&mut upstream, &request, &body, shared, epoch) {
            Ok(response) => response,
            Err(_) if shared.dead(epoch) => return Ok(End::Reset),
            Err(e) => {
                // kube-apiserver unreachable: what a front proxy answers then.
                log::debug!("fault proxy: {} {}: {e}", request.method, request.target);
                write_server_error(client.get_mut(), 503)?;
                upstream = None;
                continue;
            }
        };
        let upstream_stream = upstream.as_mut().expect("connected by forward");
        let keep = relay(client, upstream_stream, &request, &response, fault.as_ref())?;
        match keep {
            Relayed::Done => {}
            Relayed::UpstreamClosed => upstream = None,
            Relayed::End(end) => return Ok(end),
        }
    }
}

fn wait(delay: Duration, shared: &Shared, epoch: u64) -> io::Result<()> {
    let until = Instant::now() + delay;
    while Instant::now() < until {
        if shared.dead(epoch) {
            return Err(io::Error::new(io::ErrorKind::ConnectionAborted, "cut"));
        }
        std::thread::sleep(TICK.min(until.saturating_duration_since(Instant::now())));
    }
    Ok(())
}

/// A request's line and headers.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RequestHead {
    method: String,
    target: String,
    version: String,
    headers: Vec<(String, String)>,
}

impl RequestHead {
    /// Reads the next request's head; `None` when the client closed the connection between
    /// requests.
    fn read(reader: &mut impl BufRead) -> io::Result<Option<RequestHead>> {
        let Some(raw) = head::read(reader)? else { return Ok(None) };
        let head::Request { method, target, minor_version, headers } = head::whole_request(&raw)?;
        Ok(Some(RequestHead { method, target, version: format!("HTTP/1.{minor_version}"), headers }))
    }

    fn is_watch(&self) -> bool {
        let query = self.target.split_once('?').map_or("", |(_, q)| q);
        query.split('&').any(|pair| pair == "watch=true" || pair == "watch=1") || self.target.contains("/watch/")
    }

    fn header(&self, name: &str) -> Option<&str> {
        head::header(&self.headers, name)
    }

    /// Replaces any `X-Remote-*` the caller sent with the authenticated caller (unless it
    /// authenticates by bearer token) and names the proxy's source address.
    fn prepare_upstream(&mut self, identity: Option<&crate::x509::CertificateSubject>, source: IpAddr) {
        let bearer = self.header("authorization").is_some_and(|a| a.trim_start().starts_with("Bearer "));
        self.headers.retain(|(name, _)| !name.to_ascii_lowercase().starts_with("x-remote-"));
        if let (Some(subject), false) = (identity, bearer) {
            self.headers.push(("X-Remote-User".into(), subject.common_name.clone()));
            for group in &subject.organizations {
                self.headers.push(("X-Remote-Group".into(), group.clone()));
            }
        }
        self.headers.retain(|(name, _)| !name.eq_ignore_ascii_case("x-forwarded-for"));
        self.headers.push(("X-Forwarded-For".into(), source.to_string()));
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = format!("{} {} {}\r\n", self.method, self.target, self.version);
        for (name, value) in &self.headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        out.push_str("\r\n");
        out.into_bytes()
    }
}

/// A response's status line and headers.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ResponseHead {
    code: u16,
    raw: Vec<u8>,
    headers: Vec<(String, String)>,
}

impl ResponseHead {
    fn read(reader: &mut impl BufRead) -> io::Result<ResponseHead> {
        let raw = head::read(reader)?.ok_or_else(|| invalid("kube-apiserver closed the connection".into()))?;
        let head::Response { code, headers } = head::whole_response(&raw)?;
        Ok(ResponseHead { code, raw, headers })
    }

    /// How the body is delimited; a body-less answer's as a body of length 0.
    fn framing(&self, request: &RequestHead) -> io::Result<Framing> {
        if request.method == "HEAD" || self.code == 204 || self.code == 304 || self.code < 200 {
            return Ok(Framing::Length(0));
        }
        head::framing(&self.headers)
    }

    fn closes(&self) -> bool {
        head::header(&self.headers, "connection").is_some_and(|c| c.eq_ignore_ascii_case("close"))
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// A request body, raw as it came (chunked bodies with their framing).
fn read_body(reader: &mut impl BufRead, headers: &[(String, String)]) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    match head::framing(headers)? {
        Framing::Chunked => chunked::copy_body(reader, &mut body)?,
        Framing::Length(length) => {
            reader.take(length).read_to_end(&mut body)?;
            if body.len() as u64 != length {
                return Err(invalid("request body shorter than its Content-Length".into()));
            }
        }
        Framing::Unframed => {}
    }
    Ok(body)
}

/// Sends the request upstream (connecting first if needed, and once more on a fresh connection
/// when a kept-alive one turns out closed) and reads the response's head.
fn forward(
    upstream: &mut Option<UpstreamStream>,
    request: &RequestHead,
    body: &[u8],
    shared: &Arc<Shared>,
    epoch: u64,
) -> io::Result<ResponseHead> {
    let reused = upstream.is_some();
    match send(upstream, request, body, shared, epoch) {
        Err(_) if reused => {
            *upstream = None;
            send(upstream, request, body, shared, epoch)
        }
        other => other,
    }
}

fn send(
    upstream: &mut Option<UpstreamStream>,
    request: &RequestHead,
    body: &[u8],
    shared: &Arc<Shared>,
    epoch: u64,
) -> io::Result<ResponseHead> {
    if upstream.is_none() {
        *upstream = Some(connect(shared, epoch)?);
    }
    let stream = upstream.as_mut().expect("connected");
    let mut message = request.encode();
    message.extend_from_slice(body);
    stream.get_mut().write_all(&message)?;
    stream.get_mut().flush()?;
    ResponseHead::read(stream)
}

fn connect(shared: &Arc<Shared>, epoch: u64) -> io::Result<UpstreamStream> {
    let tcp = TcpStream::connect_timeout(&shared.upstream_addr, CONNECT_TIMEOUT)?;
    let name = ServerName::IpAddress(shared.upstream_addr.ip().into());
    let tls = ClientConnection::new(shared.upstream.clone(), name).map_err(io::Error::other)?;
    Ok(BufReader::new(StreamOwned::new(tls, Socket::new(tcp, shared, epoch)?)))
}

enum Relayed {
    /// The response was relayed whole; both connections stay open.
    Done,
    /// The response was relayed whole; kube-apiserver closes its connection.
    UpstreamClosed,
    /// The client connection ends.
    End(End),
}

/// Relays the response, applying a response fault.
fn relay(
    client: &mut ClientStream,
    upstream: &mut UpstreamStream,
    request: &RequestHead,
    response: &ResponseHead,
    fault: Option<&Fault>,
) -> io::Result<Relayed> {
    let out = client.get_mut();
    out.write_all(&response.raw)?;
    out.flush()?;
    let framing = response.framing(request)?;
    match fault {
        Some(Fault::ResetMidResponse) => {
            partial(upstream, out, framing)?;
            return Ok(Relayed::End(End::Reset));
        }
        Some(Fault::TruncateBody) => {
            partial(upstream, out, framing)?;
            return Ok(Relayed::End(End::CloseAbruptly));
        }
        Some(Fault::StallWatch) => {
            hold(client);
            return Ok(Relayed::End(End::CloseAbruptly));
        }
        _ => {}
    }
    match framing {
        Framing::Length(length) => {
            let copied = io::copy(&mut upstream.take(length), out)?;
            out.flush()?;
            if copied != length {
                return Ok(Relayed::End(End::CloseAbruptly));
            }
        }
        // Flushed as it comes: each watch event passes at once.
        Framing::Chunked => chunked::copy_body(upstream, out)?,
        Framing::Unframed => {
            io::copy(upstream, out)?;
            out.flush()?;
            return Ok(Relayed::End(End::Close));
        }
    }
    Ok(if response.closes() { Relayed::UpstreamClosed } else { Relayed::Done })
}

/// Relays part of the body (half of a sized one, else half of what one read brings), so the
/// client has started on it.
fn partial(upstream: &mut UpstreamStream, out: &mut impl Write, framing: Framing) -> io::Result<()> {
    let limit = match framing {
        Framing::Length(0) => return Ok(()),
        Framing::Length(length) => (length / 2).max(1) as usize,
        Framing::Chunked | Framing::Unframed => usize::MAX,
    };
    let available = upstream.fill_buf()?;
    let n = available.len().min(limit).div_ceil(2).min(limit);
    out.write_all(&available[..n])?;
    out.flush()?;
    upstream.consume(n);
    Ok(())
}

fn write_too_many_requests(out: &mut impl Write, retry_after_seconds: u32) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain; charset=utf-8\r\n\
         X-Content-Type-Options: nosniff\r\nRetry-After: {retry_after_seconds}\r\nContent-Length: {}\r\n\r\n",
        TOO_MANY_REQUESTS.len()
    );
    out.write_all(head.as_bytes())?;
    out.write_all(TOO_MANY_REQUESTS.as_bytes())?;
    out.flush()
}

/// kube-apiserver's Status for a 500 (`NewInternalError`), 503 (`NewServiceUnavailable`) or 504
/// (its timeout filter's `NewTimeoutError`).
fn server_error_status(code: u16) -> (String, serde_json::Value) {
    let status = |message: &str, reason: &str, details: serde_json::Value| {
        let mut status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code});
        if !details.is_null() {
            status["details"] = details;
        }
        status
    };
    match code {
        503 => ("Service Unavailable".into(), status("service unavailable", "ServiceUnavailable", json!(null))),
        504 => (
            "Gateway Timeout".into(),
            status(
                "Timeout: request did not complete within the allotted timeout",
                "Timeout",
                json!({"retryAfterSeconds": 0}),
            ),
        ),
        _ => {
            let cause = "injected by the fault proxy";
            let message = format!("Internal error occurred: {cause}");
            ("Internal Server Error".into(), status(&message, "InternalError", json!({"causes": [{"message": cause}]})))
        }
    }
}

fn write_server_error(out: &mut impl Write, code: u16) -> io::Result<()> {
    let (text, status) = server_error_status(code);
    let body = serde_json::to_vec(&status).map_err(io::Error::other)?;
    let head = format!(
        "HTTP/1.1 {code} {text}\r\nContent-Type: application/json\r\nCache-Control: no-cache, private\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    out.write_all(head.as_bytes())?;
    out.write_all(&body)?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(target: &str) -> RequestHead {
        RequestHead { method: "GET".into(), target: target.into(), version: "HTTP/1.1".into(), headers: vec![] }
    }

    #[test]
    fn request_heads_parse_and_encode_back() {
        let raw = b"\r\nGET /api/v1/pods?watch=true HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\nrest";
        let mut reader = &raw[..];
        let head = RequestHead::read(&mut reader).unwrap().unwrap();
        assert_eq!((head.method.as_str(), head.target.as_str()), ("GET", "/api/v1/pods?watch=true"));
        assert_eq!(head.header("accept"), Some("application/json"));
        assert!(head.is_watch());
        assert_eq!(reader, b"rest");
        assert_eq!(
            head.encode(),
            b"GET /api/v1/pods?watch=true HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n"
        );
        assert!(RequestHead::read(&mut &b""[..]).unwrap().is_none(), "a clean end");
        assert!(RequestHead::read(&mut &b"GET / HTTP/1.1\r\nHost"[..]).is_err(), "a cut head");
    }

    #[test]
    fn chunked_bodies_are_copied_with_their_framing() {
        let raw = b"4\r\nWiki\r\n5;x=y\r\npedia\r\n0\r\nTrailer: t\r\n\r\nnext";
        let mut reader = &raw[..];
        let body = read_body(&mut reader, &[("Transfer-Encoding".into(), "chunked".into())]).unwrap();
        assert_eq!(body, &raw[..raw.len() - 4]);
        assert_eq!(reader, b"next");
        let cut = b"4\r\nWi";
        assert!(read_body(&mut &cut[..], &[("Transfer-Encoding".into(), "chunked".into())]).is_err());
    }

    #[test]
    fn sized_bodies_and_framing() {
        let mut reader = &b"abcdef"[..];
        assert_eq!(read_body(&mut reader, &[("Content-Length".into(), "3".into())]).unwrap(), b"abc");
        assert!(read_body(&mut &b"ab"[..], &[("Content-Length".into(), "3".into())]).is_err());
        let response = |headers: &[(&str, &str)]| ResponseHead {
            code: 200,
            raw: vec![],
            headers: headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(),
        };
        let get = request("/");
        assert_eq!(response(&[("Transfer-Encoding", "chunked")]).framing(&get).unwrap(), Framing::Chunked);
        assert_eq!(response(&[("Content-Length", "12")]).framing(&get).unwrap(), Framing::Length(12));
        assert_eq!(response(&[]).framing(&get).unwrap(), Framing::Unframed);
        assert_eq!(ResponseHead { code: 204, ..response(&[]) }.framing(&get).unwrap(), Framing::Length(0));
        assert!(response(&[("Content-Length", "+12")]).framing(&get).is_err());
    }

    #[test]
    fn rules_match_count_down_and_expire() {
        let shared_rules = |rules: Vec<Rule>| rules;
        let mut rules =
            shared_rules(vec![Rule::new(Fault::ServerError(503)).verb("get").path("/pods").watch(false).times(1)]);
        let list = request("/api/v1/pods");
        assert!(rules[0].matches(&list));
        assert!(!rules[0].matches(&request("/api/v1/pods?watch=1")));
        assert!(!rules[0].matches(&request("/api/v1/nodes")));
        rules[0].remaining = Some(0);
        assert!(!rules[0].live(Instant::now()));
        let mut expired = Rule::new(Fault::HalfOpen).lasting(Duration::ZERO);
        assert!(expired.live(Instant::now()), "counted from its injection");
        expired.until = Some(Instant::now());
        assert!(!expired.live(Instant::now() + Duration::from_millis(1)));
        assert!(expired.matches_everything());
    }

    #[test]
    fn the_caller_is_named_in_front_proxy_headers_unless_it_sends_a_token() {
        let subject = crate::x509::CertificateSubject {
            common_name: "alice".into(),
            organizations: vec!["a".into(), "b".into()],
        };
        let mut head = request("/");
        head.headers.push(("X-Remote-User".into(), "forged".into()));
        head.prepare_upstream(Some(&subject), Ipv4Addr::LOCALHOST.into());
        let names: Vec<_> = head.headers.iter().map(|(n, v)| format!("{n}={v}")).collect();
        assert_eq!(names, ["X-Remote-User=alice", "X-Remote-Group=a", "X-Remote-Group=b", "X-Forwarded-For=127.0.0.1"]);
        let mut bearer = request("/");
        bearer.headers.push(("Authorization".into(), "Bearer abc".into()));
        bearer.prepare_upstream(Some(&subject), Ipv4Addr::LOCALHOST.into());
        assert!(bearer.header("x-remote-user").is_none());
        assert_eq!(bearer.header("authorization"), Some("Bearer abc"));
    }

    #[test]
    fn injected_errors_read_as_kube_apiserver_writes_them() {
        let mut out = Vec::new();
        write_too_many_requests(&mut out, 3).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 429 ") && text.contains("Retry-After: 3\r\n"), "{text}");
        assert!(text.ends_with("Too many requests, please try again later.\n"));
        for (code, reason) in [(500, "InternalError"), (503, "ServiceUnavailable"), (504, "Timeout")] {
            let (_, status) = server_error_status(code);
            assert_eq!((status["reason"].as_str(), status["code"].as_u64()), (Some(reason), Some(code.into())));
        }
    }
}
