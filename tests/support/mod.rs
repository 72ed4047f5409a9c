//! Test bed shared by integration tests: a throwaway PKI and a scripted HTTP/1.1 server over
//! rustls that checks client certificates, so the client is tested against real TLS sockets.

// Raw HTTP is for the sandbox's tests; the client's tests include this module for the PKI and
// the scripted server alone.
#[allow(dead_code)]
pub mod http;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection, StreamOwned};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// A certificate and its key, PEM-encoded.
#[derive(Clone)]
pub struct CertAndKey {
    pub cert_pem: String,
    pub key_pem: String,
}

/// A certificate authority that can sign server and client certificates.
pub struct TestCa {
    pub cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).expect("self-signed CA");
        TestCa { cert_pem: cert.pem(), issuer: Issuer::new(params, key) }
    }

    /// A serving certificate for these DNS names / IP addresses.
    pub fn server_cert(&self, names: &[&str]) -> CertAndKey {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        self.sign(CertificateParams::new(names).expect("server params"))
    }

    /// A client certificate with this common name (the user) and organisation (a group).
    pub fn client_cert(&self, user: &str, group: &str) -> CertAndKey {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("client params");
        params.distinguished_name.push(DnType::CommonName, user);
        params.distinguished_name.push(DnType::OrganizationName, group);
        self.sign(params)
    }

    fn sign(&self, params: CertificateParams) -> CertAndKey {
        let key = KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.issuer).expect("signed leaf");
        CertAndKey { cert_pem: cert.pem(), key_pem: key.serialize_pem() }
    }
}

pub fn certs(pem: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem.as_bytes()).map(|c| c.expect("PEM certificate")).collect()
}

pub fn key(pem: &str) -> PrivateKeyDer<'static> {
    PrivateKeyDer::from_pem_slice(pem.as_bytes()).expect("PEM key")
}

/// One request as the server read it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// Path and query, as sent.
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or_default()
    }
}

/// What the server answers.
pub enum Reply {
    /// A complete answer with a JSON body.
    Json { code: u16, body: String, headers: Vec<(String, String)> },
    /// A chunked stream of these chunks, then `end`.
    Stream { chunks: Vec<String>, end: StreamEnd },
}

/// How a streamed answer ends.
pub enum StreamEnd {
    /// The terminating chunk: a clean end of the body.
    Clean,
    /// The connection is cut without a terminating chunk.
    Cut,
    /// Nothing more is sent; the connection stays open until the client goes away.
    Silent,
}

impl Reply {
    pub fn json(code: u16, body: impl Into<String>) -> Reply {
        Reply::Json { code, body: body.into(), headers: Vec::new() }
    }
}

/// A Kubernetes `Status` failure body.
pub fn status(code: u16, reason: &str, message: &str) -> String {
    serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    })
    .to_string()
}

type Handler = dyn Fn(&Request) -> Reply + Send + Sync;

/// A scripted HTTP/1.1 server on 127.0.0.1, with TLS when given a config.
pub struct TestServer {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<Request>>>,
    /// Set when a client closed a silent stream: proves the client cut the connection.
    silent_stream_closed: Arc<AtomicBool>,
}

impl TestServer {
    /// HTTPS with `serving` as the certificate; when `client_ca` is given, a client certificate
    /// signed by it is required.
    pub fn https(
        serving: &CertAndKey,
        client_ca: Option<&TestCa>,
        handler: impl Fn(&Request) -> Reply + Send + Sync + 'static,
    ) -> TestServer {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder =
            ServerConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().unwrap();
        let builder = match client_ca {
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                roots.add(certs(&ca.cert_pem).remove(0)).unwrap();
                let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider).build().unwrap();
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let config = builder.with_single_cert(certs(&serving.cert_pem), key(&serving.key_pem)).unwrap();
        Self::start(Some(Arc::new(config)), Arc::new(handler))
    }

    pub fn http(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> TestServer {
        Self::start(None, Arc::new(handler))
    }

    fn start(tls: Option<Arc<ServerConfig>>, handler: Arc<Handler>) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let closed = Arc::new(AtomicBool::new(false));
        let (requests2, closed2) = (requests.clone(), closed.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (tls, handler, requests, closed) =
                    (tls.clone(), handler.clone(), requests2.clone(), closed2.clone());
                std::thread::spawn(move || serve_connection(stream, tls, &*handler, &requests, &closed));
            }
        });
        TestServer { addr, requests, silent_stream_closed: closed }
    }

    pub fn url(&self, scheme: &str) -> String {
        format!("{scheme}://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().clone()
    }

    /// Waits (up to `limit`) until a client closed a silent stream.
    pub fn wait_silent_stream_closed(&self, limit: Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if self.silent_stream_closed.load(Ordering::SeqCst) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

fn serve_connection(
    tcp: TcpStream,
    tls: Option<Arc<ServerConfig>>,
    handler: &Handler,
    requests: &Mutex<Vec<Request>>,
    closed: &AtomicBool,
) {
    match tls {
        Some(config) => {
            let Ok(conn) = ServerConnection::new(config) else { return };
            serve_requests(StreamOwned::new(conn, tcp), handler, requests, closed);
        }
        None => serve_requests(tcp, handler, requests, closed),
    }
}

fn serve_requests<S: Read + Write>(stream: S, handler: &Handler, requests: &Mutex<Vec<Request>>, closed: &AtomicBool) {
    let mut reader = BufReader::new(stream);
    while let Some(request) = read_request(&mut reader) {
        requests.lock().push(request.clone());
        let reply = handler(&request);
        let keep_going = write_reply(&mut reader, reply, closed);
        if !keep_going {
            return;
        }
    }
}

fn read_request<S: Read>(reader: &mut BufReader<S>) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    let length = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request { method, target, headers, body })
}

/// Writes the reply; false when the connection must not be reused.
fn write_reply<S: Read + Write>(reader: &mut BufReader<S>, reply: Reply, closed: &AtomicBool) -> bool {
    match reply {
        Reply::Json { code, body, headers } => {
            let mut head =
                format!("HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n", body.len());
            for (n, v) in headers {
                head.push_str(&format!("{n}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let stream = reader.get_mut();
            stream.write_all(head.as_bytes()).is_ok()
                && stream.write_all(body.as_bytes()).is_ok()
                && stream.flush().is_ok()
        }
        Reply::Stream { chunks, end } => {
            let stream = reader.get_mut();
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
            if stream.write_all(head.as_bytes()).is_err() {
                return false;
            }
            for chunk in chunks {
                let framed = format!("{:x}\r\n{chunk}\r\n", chunk.len());
                if stream.write_all(framed.as_bytes()).and_then(|_| stream.flush()).is_err() {
                    return false;
                }
            }
            match end {
                StreamEnd::Clean => stream.write_all(b"0\r\n\r\n").and_then(|_| stream.flush()).is_ok(),
                StreamEnd::Cut => false,
                StreamEnd::Silent => {
                    // Block until the client goes away: a read returns EOF or an error.
                    let mut byte = [0u8; 1];
                    while matches!(reader.read(&mut byte), Ok(n) if n > 0) {}
                    closed.store(true, Ordering::SeqCst);
                    false
                }
            }
        }
    }
}
