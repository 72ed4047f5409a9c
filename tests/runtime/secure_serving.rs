//! The secure port against real TLS sockets, with the sandbox API server answering the
//! TokenReviews and SubjectAccessReviews: certificates (self-signed, kept in `--cert-dir`,
//! given as files), health endpoints, `/metrics`, and upstream's 401/403 answers.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kcm::app::flags::{Command, Options};
use kcm::client::config::ClientIdentity;
use kcm::client::{Api, Client, ClientOptions, PostParams};
use kcm::server::{HealthChecks, SecureServer};
use kcm_sandbox::sandbox::server::{Sandbox, SandboxOptions};
use rustls::client::danger::ServerCertVerifier;
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use support::{TestCa, certs, key};

const FORBIDDEN_ANONYMOUS: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"forbidden: User \"system:anonymous\" cannot get path \"/metrics\"","reason":"Forbidden","details":{},"code":403}"#;
const UNAUTHORIZED: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#;

/// A scratch directory removed at the end of the test.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("kcm-secure-{name}-{}-{}", std::process::id(), kcm::random::u64()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn write(&self, name: &str, contents: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, contents).unwrap();
        path.to_str().unwrap().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn options(args: &[String]) -> Options {
    match kcm::app::flags::parse(args.iter().map(Into::into)) {
        Ok(Command::Run(options)) => *options,
        other => panic!("flags {args:?}: {:?}", other.err()),
    }
}

/// Starts the server on a free loopback port with these extra flags.
fn start(flags: &[String], checks: Arc<HealthChecks>) -> SecureServer {
    for _ in 0..10 {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut args = vec!["--bind-address=127.0.0.1".to_string(), format!("--secure-port={port}")];
        args.extend_from_slice(flags);
        match kcm::app::serve_securely(&options(&args), checks.clone()).map_err(|e| e.to_string()) {
            Ok(Some(server)) => return server,
            Ok(None) => panic!("no server started"),
            Err(e) if e.contains("failed to create listener") => continue,
            Err(e) => panic!("start: {e}"),
        }
    }
    panic!("no free port");
}

/// How the test client trusts the server.
enum Trust {
    /// Any certificate (to look at a self-signed one).
    Any,
    /// Certificates issued by (or equal to) this one, for the name `localhost`.
    Root(CertificateDer<'static>),
}

/// One answer, with the certificate the server presented.
struct Answer {
    code: u16,
    headers: Vec<(String, String)>,
    body: String,
    server_cert: CertificateDer<'static>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// A request over a fresh TLS connection.
struct Get<'a> {
    path: &'a str,
    trust: Trust,
    identity: Option<ClientIdentity>,
    headers: Vec<(&'a str, String)>,
    /// The local address to connect from (any, when `None`).
    source: Option<Ipv4Addr>,
}

impl<'a> Get<'a> {
    fn new(path: &'a str) -> Get<'a> {
        Get { path, trust: Trust::Any, identity: None, headers: Vec::new(), source: None }
    }

    fn trust(mut self, trust: Trust) -> Self {
        self.trust = trust;
        self
    }

    fn identity(mut self, identity: ClientIdentity) -> Self {
        self.identity = Some(identity);
        self
    }

    fn header(mut self, name: &'a str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    fn from(mut self, source: Ipv4Addr) -> Self {
        self.source = Some(source);
        self
    }

    fn token(self, token: &str) -> Self {
        self.header("Authorization", format!("Bearer {token}"))
    }

    fn send(self, addr: SocketAddr) -> Result<Answer, String> {
        let provider = kcm::client::tls::crypto_provider();
        let builder =
            ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().unwrap();
        let builder = match self.trust {
            Trust::Any => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(kcm::client::tls::AcceptAnyServerCert(provider))),
            Trust::Root(cert) => {
                let mut roots = RootCertStore::empty();
                roots.add(cert).unwrap();
                builder.with_root_certificates(roots)
            }
        };
        let config = match self.identity {
            Some(id) => builder.with_client_auth_cert(id.cert_chain, id.key).unwrap(),
            None => builder.with_no_client_auth(),
        };
        let name = ServerName::try_from("localhost").unwrap();
        let conn = ClientConnection::new(Arc::new(config), name).unwrap();
        let tcp = match self.source {
            Some(source) => connect_from(source, addr),
            None => TcpStream::connect(addr),
        }
        .map_err(|e| e.to_string())?;
        tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut stream = StreamOwned::new(conn, tcp);
        let mut head = format!("GET {} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n", self.path);
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).map_err(|e| e.to_string())?;
        let server_cert = stream.conn.peer_certificates().ok_or("no server certificate")?[0].clone();
        read_answer(BufReader::new(stream), server_cert).map_err(|e| e.to_string())
    }
}

/// A TCP connection to `to` (IPv4) from the local address `source`, e.g. 127.0.0.2, which
/// Linux routes over loopback like 127.0.0.1 (std cannot bind before connecting).
fn connect_from(source: Ipv4Addr, to: SocketAddr) -> std::io::Result<TcpStream> {
    use std::os::fd::FromRawFd;
    let SocketAddr::V4(to) = to else { panic!("connect_from needs an IPv4 address, not {to}") };
    let sockaddr = |ip: Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(ip).to_be() },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: socket(2) has no memory effects; the descriptor is owned by the TcpStream below
    // (which closes it) before any early return can leak it.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh socket that nothing else owns.
    let stream = unsafe { TcpStream::from_raw_fd(fd) };
    let (local, remote) = (sockaddr(source, 0), sockaddr(*to.ip(), to.port()));
    // SAFETY: both addresses are valid sockaddr_in values of `len` bytes that outlive the calls.
    let bound = unsafe { libc::bind(fd, (&raw const local).cast(), len) };
    if bound != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::connect(fd, (&raw const remote).cast(), len) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(stream)
}

fn read_answer(mut reader: impl BufRead, server_cert: CertificateDer<'static>) -> std::io::Result<Answer> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let code = line.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        match line.trim_end().split_once(':') {
            Some((name, value)) => headers.push((name.to_string(), value.trim().to_string())),
            None => break,
        }
    }
    let length: usize =
        headers.iter().find(|(n, _)| n.eq_ignore_ascii_case("content-length")).unwrap().1.parse().unwrap();
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(Answer { code, headers, body: String::from_utf8(body).unwrap(), server_cert })
}

/// Whether `cert` is a valid server certificate for `name` when trusted as its own root.
fn valid_for(cert: &CertificateDer<'static>, name: &str) -> bool {
    let mut roots = RootCertStore::empty();
    roots.add(cert.clone()).unwrap();
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        kcm::client::tls::crypto_provider(),
    )
    .build()
    .unwrap();
    let name = ServerName::try_from(name.to_string()).unwrap();
    verifier.verify_server_cert(cert, &[], &name, &[], UnixTime::now()).is_ok()
}

fn pem_cert(path: &Path) -> CertificateDer<'static> {
    certs(&std::fs::read_to_string(path).unwrap()).remove(0)
}

/// A sandbox with kubeconfigs for delegated authentication and authorization.
struct Cluster {
    sandbox: Sandbox,
    dir: TempDir,
    kubeconfig: String,
    ca_file: String,
}

impl Cluster {
    fn new() -> Cluster {
        let listen = "127.0.0.1:0".parse().unwrap();
        let sandbox = Sandbox::start(SandboxOptions { listen, ..SandboxOptions::default() }).unwrap();
        let dir = TempDir::new("cluster");
        let (admin, _) = sandbox.write_kubeconfigs(&dir.0.join("admin.conf")).unwrap();
        let ca_file = dir.write("ca.crt", sandbox.ca_pem());
        Cluster { sandbox, kubeconfig: admin.to_str().unwrap().to_string(), dir, ca_file }
    }

    /// The delegation flags: TokenReview, SubjectAccessReview and the cluster CA for client certificates.
    fn flags(&self) -> Vec<String> {
        vec![
            format!("--authentication-kubeconfig={}", self.kubeconfig),
            format!("--authorization-kubeconfig={}", self.kubeconfig),
            format!("--client-ca-file={}", self.ca_file),
        ]
    }

    fn identity(&self, user: &str, groups: &[&str]) -> ClientIdentity {
        self.sandbox.user_config(user, groups).unwrap().tls.client_identity.unwrap()
    }

    /// Lets `user` GET `/metrics` through RBAC.
    fn grant_metrics(&self, user: &str) {
        let client = Client::new(self.sandbox.admin_config(), ClientOptions::default()).unwrap();
        let role = ClusterRole {
            metadata: kcm_meta("metrics-reader"),
            rules: Some(vec![PolicyRule {
                verbs: vec!["get".into()],
                non_resource_urls: Some(vec!["/metrics".into()]),
                ..PolicyRule::default()
            }]),
            ..ClusterRole::default()
        };
        Api::<ClusterRole>::all(&client).create(&role, &PostParams::default()).unwrap();
        let binding = ClusterRoleBinding {
            metadata: kcm_meta(&format!("metrics-reader-{user}")),
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "ClusterRole".into(),
                name: "metrics-reader".into(),
            },
            subjects: Some(vec![Subject { kind: "User".into(), name: user.into(), ..Subject::default() }]),
        };
        Api::<ClusterRoleBinding>::all(&client).create(&binding, &PostParams::default()).unwrap();
    }
}

fn kcm_meta(name: &str) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta { name: Some(name.into()), ..Default::default() }
}

#[test]
fn secure_port_zero_serves_nothing() {
    let options = options(&["--secure-port=0".to_string()]);
    assert!(kcm::app::serve_securely(&options, HealthChecks::new()).unwrap().is_none());
}

#[test]
fn self_signed_certificate_serves_healthz_to_anyone() {
    let server = start(&[], HealthChecks::new());
    let answer = Get::new("/healthz").send(server.addr()).unwrap();
    assert_eq!((answer.code, answer.body.as_str()), (200, "ok"));
    assert_eq!(answer.header("Content-Type"), Some("text/plain; charset=utf-8"));
    assert_eq!(answer.header("Cache-Control"), Some("no-cache, private"));
    for name in ["localhost", "127.0.0.1"] {
        assert!(valid_for(&answer.server_cert, name), "generated certificate not valid for {name}");
    }
    assert!(!valid_for(&answer.server_cert, "example.com"));
    // And a client that verifies the server against that certificate gets through.
    let verified = Get::new("/healthz").trust(Trust::Root(answer.server_cert.clone())).send(server.addr()).unwrap();
    assert_eq!((verified.code, verified.body.as_str()), (200, "ok"));
    server.stop();
}

#[test]
fn unspecified_bind_address_serves_loopback() {
    let server = start(&["--bind-address=0.0.0.0".into()], HealthChecks::new());
    assert!(server.addr().ip().is_unspecified(), "{}", server.addr());
    let loopback = SocketAddr::new([127, 0, 0, 1].into(), server.addr().port());
    assert_eq!(Get::new("/healthz").send(loopback).unwrap().code, 200);
    server.stop();
}

#[test]
fn cert_dir_keeps_the_certificate_across_restarts() {
    let dir = TempDir::new("certdir");
    let flags = [format!("--cert-dir={}", dir.0.display())];
    let first = start(&flags, HealthChecks::new());
    let served = Get::new("/healthz").send(first.addr()).unwrap().server_cert;
    first.stop();
    let written = pem_cert(&dir.0.join("kube-controller-manager.crt"));
    assert_eq!(served, written);
    assert!(dir.0.join("kube-controller-manager.key").exists());

    let second = start(&flags, HealthChecks::new());
    let answer = Get::new("/healthz").trust(Trust::Root(written.clone())).send(second.addr()).unwrap();
    assert_eq!((answer.code, answer.server_cert), (200, written));
    second.stop();
}

#[test]
fn given_certificate_files_are_served() {
    let ca = TestCa::new("serving-ca");
    let serving = ca.server_cert(&["localhost", "127.0.0.1"]);
    let dir = TempDir::new("files");
    let flags = [
        format!("--tls-cert-file={}", dir.write("tls.crt", &serving.cert_pem)),
        format!("--tls-private-key-file={}", dir.write("tls.key", &serving.key_pem)),
    ];
    let server = start(&flags, HealthChecks::new());
    let root = certs(&ca.cert_pem).remove(0);
    let answer = Get::new("/healthz").trust(Trust::Root(root)).send(server.addr()).unwrap();
    assert_eq!((answer.code, answer.body.as_str()), (200, "ok"));
    assert_eq!(answer.server_cert, certs(&serving.cert_pem)[0]);
    server.stop();
}

#[test]
fn health_checks_report_like_upstream() {
    let checks = HealthChecks::new();
    checks.add("leaderElection", || Ok(()));
    checks.add("deployment", || Err("informers not synced".into()));
    let server = start(&[], checks.clone());
    let addr = server.addr();

    let verbose = Get::new("/healthz?verbose").send(addr).unwrap();
    assert_eq!(verbose.code, 500);
    assert_eq!(verbose.body, "[+]leaderElection ok\n[-]deployment failed: reason withheld\nhealthz check failed\n");
    assert_eq!(verbose.header("X-Content-Type-Options"), Some("nosniff"));
    let excluded = Get::new("/healthz?exclude=deployment&verbose").send(addr).unwrap();
    assert_eq!(excluded.code, 200);
    assert_eq!(excluded.body, "[+]leaderElection ok\n[+]deployment excluded: ok\nhealthz check passed\n");

    // Upstream's mux serves the exact path `/healthz` and nothing below or beside it: a single
    // check, `/livez` and `/readyz` are not found (by a caller allowed to read them).
    let allowed = start(&["--authorization-always-allow-paths=/healthz/*,/livez,/readyz".into()], checks.clone());
    for path in ["/healthz/deployment", "/healthz/leaderElection", "/livez", "/readyz"] {
        assert_eq!(Get::new(path).send(allowed.addr()).unwrap().code, 404, "{path}");
    }
    allowed.stop();

    checks.add("deployment", || Ok(()));
    assert_eq!(Get::new("/healthz").send(addr).unwrap().body, "ok");
    server.stop();
}

#[test]
fn slis_record_root_health_checks_and_configz_is_served() {
    let checks = HealthChecks::new();
    // A name of its own: the SLI registry is the process's, shared with other tests.
    checks.add("sliProbe", || Err("not yet".into()));
    let server =
        start(&["--authorization-always-allow-paths=/healthz,/metrics/slis,/configz,/flagz".into()], checks.clone());
    let addr = server.addr();
    assert_eq!(Get::new("/healthz").send(addr).unwrap().code, 500);
    checks.add("sliProbe", || Ok(()));
    assert_eq!(Get::new("/healthz").send(addr).unwrap().code, 200);

    let slis = Get::new("/metrics/slis").send(addr).unwrap();
    assert_eq!(slis.code, 200);
    assert_eq!(slis.header("Content-Type"), Some("text/plain; version=0.0.4; charset=utf-8; escaping=underscores"));
    for line in [
        "kubernetes_healthcheck{name=\"sliProbe\",type=\"healthz\"} 1\n",
        "kubernetes_healthchecks_total{name=\"sliProbe\",status=\"error\",type=\"healthz\"} 1\n",
        "kubernetes_healthchecks_total{name=\"sliProbe\",status=\"success\",type=\"healthz\"} 1\n",
    ] {
        assert!(slis.body.contains(line), "{line} missing from:\n{}", slis.body);
    }
    let configz = Get::new("/configz").send(addr).unwrap();
    assert_eq!((configz.code, configz.header("Content-Type")), (200, Some("application/json")));
    let config: serde_json::Value = serde_json::from_str(&configz.body).unwrap();
    assert_eq!(config["kubecontrollermanager.config.k8s.io"]["Generic"]["MinResyncPeriod"], "12h0m0s");
    // ComponentFlagz is beta and on by default in 1.36 (always allowed here).
    assert_eq!(Get::new("/flagz").header("Accept", "*/*").send(addr).unwrap().code, 200);
    // Not always allowed here: anonymous is refused.
    assert_eq!(Get::new("/statusz").send(addr).unwrap().code, 403);
    server.stop();
}

#[test]
fn metrics_need_authorization() {
    let cluster = Cluster::new();
    cluster.sandbox.add_token("alice-token", "alice", &[]);
    cluster.sandbox.add_token("prometheus-token", "prometheus", &[]);
    cluster.grant_metrics("prometheus");
    let server = start(&cluster.flags(), HealthChecks::new());
    let addr = server.addr();

    let anonymous = Get::new("/metrics").send(addr).unwrap();
    assert_eq!((anonymous.code, anonymous.body.trim_end()), (403, FORBIDDEN_ANONYMOUS));
    assert_eq!(anonymous.header("Content-Type"), Some("application/json"));

    let master = Get::new("/metrics").identity(cluster.identity("root", &["system:masters"])).send(addr).unwrap();
    assert_eq!(master.code, 200, "{}", master.body);
    for metric in [
        "process_resident_memory_bytes gauge",
        "process_virtual_memory_bytes gauge",
        "process_cpu_seconds_total counter",
        "process_open_fds gauge",
        "process_max_fds gauge",
        "process_start_time_seconds gauge",
    ] {
        assert!(master.body.contains(&format!("# TYPE {metric}\n")), "{metric} missing");
    }
    assert!(master.header("Content-Type").unwrap().starts_with("text/plain; version=0.0.4"));

    let denied = Get::new("/metrics").token("alice-token").send(addr).unwrap();
    assert_eq!(denied.code, 403);
    assert!(
        denied.body.contains(r#""message":"forbidden: User \"alice\" cannot get path \"/metrics\"""#),
        "{}",
        denied.body
    );

    let granted = Get::new("/metrics").token("prometheus-token").send(addr).unwrap();
    assert_eq!(granted.code, 200, "{}", granted.body);

    let unknown = Get::new("/metrics").token("no-such-token").send(addr).unwrap();
    assert_eq!((unknown.code, unknown.body.trim_end()), (401, UNAUTHORIZED));
    // Single health checks show their failure reasons: not on the always-allowed paths.
    assert_eq!(Get::new("/healthz/ping").send(addr).unwrap().code, 403);
    // A bad credential is refused before authorization, even on an always-allowed path.
    assert_eq!(Get::new("/healthz").token("no-such-token").send(addr).unwrap().code, 401);
    // Authorized users reach the router: unknown paths are 404.
    let missing = Get::new("/nope").identity(cluster.identity("root", &["system:masters"])).send(addr).unwrap();
    assert_eq!((missing.code, missing.body.as_str()), (404, "404 page not found\n"));
    server.stop();
}

#[test]
fn access_reviews_are_cached_for_their_ttl() {
    let cluster = Cluster::new();
    cluster.sandbox.add_token("prometheus-token", "prometheus", &[]);
    cluster.grant_metrics("prometheus");
    let with_ttl = |ttl: &str| {
        let mut flags = cluster.flags();
        flags.push(format!("--authorization-webhook-cache-authorized-ttl={ttl}"));
        start(&flags, HealthChecks::new())
    };
    let (cached, uncached) = (with_ttl("1h"), with_ttl("0s"));
    for server in [&cached, &uncached] {
        assert_eq!(Get::new("/metrics").token("prometheus-token").send(server.addr()).unwrap().code, 200);
    }
    let client = Client::new(cluster.sandbox.admin_config(), ClientOptions::default()).unwrap();
    Api::<ClusterRoleBinding>::all(&client).delete("metrics-reader-prometheus", &Default::default()).unwrap();
    assert_eq!(Get::new("/metrics").token("prometheus-token").send(cached.addr()).unwrap().code, 200);
    assert_eq!(Get::new("/metrics").token("prometheus-token").send(uncached.addr()).unwrap().code, 403);
    cached.stop();
    uncached.stop();
}

#[test]
fn client_certificates_from_other_authorities_are_refused() {
    let cluster = Cluster::new();
    let server = start(&cluster.flags(), HealthChecks::new());
    let stranger = TestCa::new("stranger").client_cert("root", "system:masters");
    let identity = ClientIdentity { cert_chain: certs(&stranger.cert_pem), key: key(&stranger.key_pem) };
    let answer = Get::new("/metrics").identity(identity).send(server.addr()).unwrap();
    assert_eq!((answer.code, answer.body.trim_end()), (401, UNAUTHORIZED));
    server.stop();
}

#[test]
fn front_proxy_headers_are_trusted_only_from_allowed_proxies() {
    let cluster = Cluster::new();
    let proxy_ca = TestCa::new("front-proxy-ca");
    let mut flags = cluster.flags();
    flags.push(format!("--requestheader-client-ca-file={}", cluster.dir.write("proxy-ca.crt", &proxy_ca.cert_pem)));
    flags.push("--requestheader-allowed-names=front-proxy-client".into());
    let server = start(&flags, HealthChecks::new());
    let proxy = |cn: &str| {
        let pair = proxy_ca.client_cert(cn, "");
        ClientIdentity { cert_chain: certs(&pair.cert_pem), key: key(&pair.key_pem) }
    };
    let through_proxy = |cn: &str| {
        Get::new("/metrics")
            .identity(proxy(cn))
            .header("X-Remote-User", "root")
            .header("X-Remote-Group", "system:masters")
            .send(server.addr())
            .unwrap()
    };
    assert_eq!(through_proxy("front-proxy-client").code, 200);
    assert_eq!(through_proxy("someone-else").code, 401);
    server.stop();
}

/// The delegation kubeconfigs only: the client CA must come from the cluster.
fn kubeconfig_flags(cluster: &Cluster) -> Vec<String> {
    vec![
        format!("--authentication-kubeconfig={}", cluster.kubeconfig),
        format!("--authorization-kubeconfig={}", cluster.kubeconfig),
    ]
}

#[test]
fn client_ca_is_looked_up_in_the_cluster() {
    let cluster = Cluster::new();
    let client = Client::new(cluster.sandbox.admin_config(), ClientOptions::default()).unwrap();
    let published =
        Api::<ConfigMap>::namespaced(&client, "kube-system").get("extension-apiserver-authentication").unwrap();
    let data = published.data.unwrap_or_default();
    assert_eq!(data.get("client-ca-file").map(String::as_str), Some(cluster.sandbox.ca_pem()));
    assert!(!data.contains_key("requestheader-client-ca-file"), "the sandbox has no front-proxy CA");

    let server = start(&kubeconfig_flags(&cluster), HealthChecks::new());
    let master =
        Get::new("/metrics").identity(cluster.identity("root", &["system:masters"])).send(server.addr()).unwrap();
    assert_eq!(master.code, 200, "{}", master.body);
    server.stop();
}

#[test]
fn the_looked_up_client_ca_follows_the_configmap() {
    let cluster = Cluster::new();
    let options = options(&kubeconfig_flags(&cluster));
    let authn = kcm::server::auth::Authenticator::new(&options.authentication).unwrap();
    assert_eq!(authn.client_cas(), certs(cluster.sandbox.ca_pem()));
    let client = Client::new(cluster.sandbox.admin_config(), ClientOptions::default()).unwrap();
    let configmaps = Api::<ConfigMap>::namespaced(&client, "kube-system");
    let mut configmap = configmaps.get("extension-apiserver-authentication").unwrap();
    let rotated = TestCa::new("rotated-client-ca");
    configmap.data.get_or_insert_default().insert("client-ca-file".into(), rotated.cert_pem.clone());
    configmaps.replace("extension-apiserver-authentication", &configmap, &PostParams::default()).unwrap();
    let generation = authn.generation();
    authn.refresh().unwrap();
    assert_eq!(authn.client_cas(), certs(&rotated.cert_pem));
    assert_ne!(authn.generation(), generation, "the TLS setup must learn of the new CA");
    configmaps.delete("extension-apiserver-authentication", &Default::default()).unwrap();
    authn.refresh().unwrap();
    assert!(authn.client_cas().is_empty(), "a deleted ConfigMap's CA is no longer trusted");
}

#[test]
fn skip_lookup_leaves_client_certificates_unchecked() {
    let cluster = Cluster::new();
    let mut flags = kubeconfig_flags(&cluster);
    flags.push("--authentication-skip-lookup=true".into());
    let server = start(&flags, HealthChecks::new());
    let master =
        Get::new("/metrics").identity(cluster.identity("root", &["system:masters"])).send(server.addr()).unwrap();
    assert_eq!((master.code, master.body.trim_end()), (403, FORBIDDEN_ANONYMOUS));
    server.stop();
}

#[test]
fn a_missing_authentication_configmap_is_tolerated() {
    let cluster = Cluster::new();
    let client = Client::new(cluster.sandbox.admin_config(), ClientOptions::default()).unwrap();
    Api::<ConfigMap>::namespaced(&client, "kube-system")
        .delete("extension-apiserver-authentication", &Default::default())
        .unwrap();
    let server = start(&kubeconfig_flags(&cluster), HealthChecks::new());
    let master =
        Get::new("/metrics").identity(cluster.identity("root", &["system:masters"])).send(server.addr()).unwrap();
    assert_eq!((master.code, master.body.trim_end()), (403, FORBIDDEN_ANONYMOUS));
    server.stop();
}

#[test]
fn a_failed_lookup_stops_the_start_unless_tolerated() {
    let cluster = Cluster::new();
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let flags = |extra: &[&str]| {
        let mut flags = vec![
            "--bind-address=127.0.0.1".to_string(),
            format!("--secure-port={port}"),
            format!("--authentication-kubeconfig={}", cluster.kubeconfig),
        ];
        flags.extend(extra.iter().map(|f| f.to_string()));
        options(&flags)
    };
    // The ConfigMap read (the first request of each start) fails.
    cluster.sandbox.faults().fail_next(1, 500, None).unwrap();
    let refused =
        kcm::app::serve_securely(&flags(&[]), HealthChecks::new()).err().expect("the start fails").to_string();
    assert!(refused.starts_with("unable to load configmap based request-header-client-ca-file: "), "{refused}");
    cluster.sandbox.faults().fail_next(1, 500, None).unwrap();
    let tolerated =
        kcm::app::serve_securely(&flags(&["--authentication-tolerate-lookup-failure=true"]), HealthChecks::new());
    tolerated.expect("a tolerated lookup failure").expect("a server").stop();
}

#[test]
fn idle_connections_from_one_address_do_not_starve_others() {
    let server = start(&[], HealthChecks::new());
    let (busy, other) = (Ipv4Addr::new(127, 0, 0, 1), Ipv4Addr::new(127, 0, 0, 2));
    // Idle connections that never start a handshake hold their slots, up to 16 per address.
    let held: Vec<TcpStream> = (0..16).map(|_| connect_from(busy, server.addr()).unwrap()).collect();
    // (They are cut 10 s after accept; everything below happens well before.)
    let extra = Get::new("/healthz").from(busy).send(server.addr());
    assert!(extra.is_err(), "connection 17 from {busy} was served");
    // Another client (the kubelet's probe, say) is still served at once.
    let probe = Get::new("/healthz").from(other).send(server.addr()).unwrap();
    assert_eq!((probe.code, probe.body.as_str()), (200, "ok"));
    drop(held);
    // Once the held connections are gone, requests are served again.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match Get::new("/healthz").send(server.addr()) {
            Ok(answer) => {
                assert_eq!(answer.code, 200);
                break;
            }
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("server did not recover: {e}"),
        }
    }
    server.stop();
}
