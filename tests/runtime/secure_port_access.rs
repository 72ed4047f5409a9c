//! Who may read what on the secure port: upstream's kube-controller-manager v1.36.2 and ours
//! side by side against the real API server, both started with kubeadm's flags (delegated
//! authentication and authorization through `controller-manager.conf`, the cluster CA as
//! `--client-ca-file`, the front-proxy CA as `--requestheader-client-ca-file`), then asked the
//! same requests by the same callers: anonymous, client certificates (allowed by RBAC, refused
//! by the SubjectAccessReview, from another CA, expired), front-proxy headers without and with
//! the front-proxy client certificate, bearer tokens (a service account's, one the TokenReview
//! refuses), on every path the port serves. Every answer — status code and, when refused, the
//! body — must be upstream's.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kcm::client::RestConfig;
use kcm::client::config::{Auth, ClientIdentity, TlsSettings};
use kcm_envtest::envtest::jsonapi::JsonApi;
use kcm_envtest::envtest::sidebyside::{Side, start_controller_manager};
use kcm_envtest::envtest::{Assets, ControlPlane};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use serde_json::json;

const OURS: &str = env!("CARGO_BIN_EXE_kube-controller-manager");
const PATHS: &[&str] = &[
    "/healthz",
    "/healthz?verbose",
    "/healthz/leaderElection",
    "/livez",
    "/readyz",
    "/metrics",
    "/metrics/slis",
    "/configz",
    "/flagz",
    "/statusz",
    "/debug/pprof/",
    "/nope",
];
/// Paths a caller allowed by RBAC may read (the ClusterRole of the test).
const READABLE: &[&str] = &[
    "/metrics",
    "/metrics/slis",
    "/configz",
    "/flagz",
    "/statusz",
    "/healthz/*",
    "/debug/*",
    "/nope",
    "/livez",
    "/readyz",
];

/// Paths where upstream's answer to a caller it lets in is not ours, and why.
const KNOWN: &[(&str, &str)] = &[(
    "/debug/pprof/",
    "Go's profiler (`--profiling`, on by default) has no meaning for a Rust binary: ours answers 404 \
     where upstream's serves its index (docs/operations.md); who is let in is still compared",
)];

/// One caller: its TLS identity and headers.
struct Caller {
    name: &'static str,
    identity: Option<(String, String)>,
    headers: Vec<(&'static str, String)>,
}

impl Caller {
    fn new(name: &'static str) -> Caller {
        Caller { name, identity: None, headers: Vec::new() }
    }

    fn with_certificate(self, (cert, key): (String, String)) -> Caller {
        Caller { identity: Some((cert, key)), ..self }
    }

    fn with_header(mut self, name: &'static str, value: &str) -> Caller {
        self.headers.push((name, value.to_string()));
        self
    }
}

/// What a side answered a caller on a path: the code, and the body when it is a refusal.
type Answer = (u16, String);

/// A controller manager on its own secure port.
struct Manager {
    process: kcm_envtest::envtest::process::OwnedProcess,
    port: u16,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Manager {
    fn start(side: Side, binary: &Path, kubeconfig: &Path, plane: &ControlPlane, extra: &[&str]) -> Manager {
        let port = free_port();
        let file = |name: &str| plane.dir().join(name).display().to_string();
        let flags = [
            format!("--secure-port={port}"),
            format!("--authentication-kubeconfig={}", kubeconfig.display()),
            format!("--authorization-kubeconfig={}", kubeconfig.display()),
            format!("--client-ca-file={}", file("ca.crt")),
            format!("--requestheader-client-ca-file={}", file("front-proxy-ca.crt")),
        ];
        let mut flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        flags.extend(extra);
        let log = plane.dir().join(format!("{}.log", side.name()));
        let process = start_controller_manager(side, binary, kubeconfig, &flags, &log)
            .unwrap_or_else(|e| panic!("{}: {e}", side.name()));
        let mut manager = Manager { process, port };
        crate::harness::eventually(&format!("{} healthy", side.name()), || {
            assert!(manager.process.exited().is_none(), "{} exited", side.name());
            (ask(manager.port, &Caller::new("probe"), "/healthz").0 == 200).then_some(())
        });
        manager
    }
}

/// `GET path` as `caller`, over a fresh TLS connection (the serving certificate is self-signed).
fn ask(port: u16, caller: &Caller, path: &str) -> Answer {
    let identity = caller.identity.as_ref().map(|(cert, key)| ClientIdentity {
        cert_chain: CertificateDer::pem_slice_iter(cert.as_bytes()).flatten().collect(),
        key: PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("a key"),
    });
    let config = RestConfig {
        server: format!("https://127.0.0.1:{port}"),
        tls: TlsSettings { insecure_skip_verify: true, client_identity: identity, ..TlsSettings::default() },
        auth: Auth::None,
        source: "secure port access test".into(),
    };
    let Ok(tcp) = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], port))) else {
        return (0, "no connection".into());
    };
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let tls = kcm::client::tls::client_config(&config.tls).expect("TLS config");
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let mut stream = rustls::StreamOwned::new(rustls::ClientConnection::new(Arc::new(tls), name).unwrap(), tcp);
    let mut head = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAccept: */*\r\n");
    for (name, value) in &caller.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    use std::io::{Read, Write};
    // A refusal in the TLS handshake shows as a failed write or read: recorded, not a panic.
    let mut response = Vec::new();
    if let Err(e) = stream.write_all(head.as_bytes()).and_then(|()| stream.read_to_end(&mut response))
        && response.is_empty()
    {
        return (0, format!("no answer: {}", e.kind()));
    }
    parse(&response)
}

/// The code and, unless it is 200, the body of a whole `Connection: close` response.
fn parse(response: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(response);
    let Some((head, body)) = text.split_once("\r\n\r\n") else { return (0, format!("no head: {text:?}")) };
    let code = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    if code == 200 {
        return (code, String::new());
    }
    let chunked =
        head.lines().any(|l| l.to_ascii_lowercase().starts_with("transfer-encoding:") && l.contains("chunked"));
    if !chunked {
        return (code, body.to_string());
    }
    let (mut rest, mut decoded) = (body, String::new());
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || after.len() < size {
            break;
        }
        decoded.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    (code, decoded)
}

/// A client certificate for `user` signed by the `CN=kubernetes` CA of `ca_key`, valid until
/// `not_after`.
fn certificate(ca_key: &str, user: &str, not_after: (i32, u8, u8)) -> (String, String) {
    let ca_key = rcgen::KeyPair::from_pem(ca_key).expect("the CA key");
    // The envtest CA is `CN=kubernetes` as rcgen writes it; an issuer made of the same
    // parameters names it byte for byte.
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, "kubernetes");
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, user);
    params.not_after = rcgen::date_time_ymd(not_after.0, not_after.1, not_after.2);
    let cert = params.signed_by(&key, &issuer).expect("a certificate");
    (cert.pem(), key.serialize_pem())
}

/// RBAC for the callers: `kcm-access-allowed` and the service account `default/kcm-access` may
/// read [`READABLE`]; nobody else may.
fn grant(plane: &ControlPlane) -> String {
    let admin = kcm::client::Client::new(plane.admin_config(), kcm::client::ClientOptions::default()).unwrap();
    let api = JsonApi(&admin);
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    api.create(
        &format!("{rbac}/clusterroles"),
        &json!({"metadata": {"name": "kcm-access"}, "rules": [{"nonResourceURLs": READABLE, "verbs": ["get"]}]}),
    )
    .unwrap();
    api.create(
        &format!("{rbac}/clusterrolebindings"),
        &json!({"metadata": {"name": "kcm-access"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kcm-access"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "kcm-access-allowed"},
                         {"kind": "ServiceAccount", "name": "kcm-access", "namespace": "default"}]}),
    )
    .unwrap();
    api.create("/api/v1/namespaces/default/serviceaccounts", &json!({"metadata": {"name": "kcm-access"}})).unwrap();
    let token = api
        .create(
            "/api/v1/namespaces/default/serviceaccounts/kcm-access/token",
            &json!({"spec": {"expirationSeconds": 3600}}),
        )
        .unwrap();
    token["status"]["token"].as_str().expect("a token").to_string()
}

fn callers(plane: &ControlPlane, token: &str) -> Vec<Caller> {
    let ca_key = plane.ca_key_pem();
    let ca = ca_key.as_str();
    let read = |name: &str| std::fs::read_to_string(plane.dir().join(name)).expect(name);
    let front_proxy = (read("front-proxy-client.crt"), read("front-proxy-client.key"));
    // Another CA with the cluster CA's name: only its key tells them apart.
    let other_ca = rcgen::KeyPair::generate().unwrap().serialize_pem();
    let future = (2100, 1, 1);
    vec![
        Caller::new("anonymous"),
        Caller::new("certificate, allowed").with_certificate(certificate(ca, "kcm-access-allowed", future)),
        Caller::new("certificate, refused by RBAC").with_certificate(certificate(ca, "kcm-access-refused", future)),
        Caller::new("certificate from another CA").with_certificate(certificate(
            &other_ca,
            "kcm-access-allowed",
            future,
        )),
        Caller::new("expired certificate").with_certificate(certificate(ca, "kcm-access-allowed", (2020, 1, 1))),
        Caller::new("front-proxy headers, no certificate").with_header("X-Remote-User", "kcm-access-allowed"),
        Caller::new("front-proxy headers, cluster CA certificate")
            .with_certificate(certificate(ca, "front-proxy-client", future))
            .with_header("X-Remote-User", "kcm-access-allowed"),
        Caller::new("front-proxy, allowed user")
            .with_certificate(front_proxy.clone())
            .with_header("X-Remote-User", "kcm-access-allowed")
            .with_header("X-Remote-Group", "kcm-group"),
        Caller::new("front-proxy, refused user")
            .with_certificate(front_proxy)
            .with_header("X-Remote-User", "kcm-access-refused"),
        Caller::new("service account token").with_header("Authorization", &format!("Bearer {token}")),
        Caller::new("token refused by TokenReview").with_header("Authorization", "Bearer not-a-token"),
    ]
}

fn answers(manager: &Manager, callers: &[Caller]) -> Vec<Vec<Answer>> {
    callers.iter().map(|caller| PATHS.iter().map(|path| ask(manager.port, caller, path)).collect()).collect()
}

/// Both binaries' answers with kubeadm's flags and `extra`, compared; the differences.
fn compare(
    plane: &ControlPlane,
    assets: &Assets,
    kubeconfig: &Path,
    callers: &[Caller],
    extra: &[&str],
) -> Vec<String> {
    let mut upstream = Manager::start(Side::Upstream, &assets.kube_controller_manager, kubeconfig, plane, extra);
    let theirs = answers(&upstream, callers);
    upstream.process.stop(Duration::from_secs(10));
    let mut ours = Manager::start(Side::Ours, Path::new(OURS), kubeconfig, plane, extra);
    let mine = answers(&ours, callers);
    ours.process.stop(Duration::from_secs(10));

    let mut table = format!("flags {extra:?}\ncaller | path | upstream | ours\n");
    let mut differences = Vec::new();
    for (caller, (their_row, my_row)) in callers.iter().zip(theirs.iter().zip(&mine)) {
        for (path, (their, my)) in PATHS.iter().zip(their_row.iter().zip(my_row)) {
            table.push_str(&format!("{} | {path} | {} | {}\n", caller.name, their.0, my.0));
            let known = KNOWN.iter().find(|(p, _)| p == path).filter(|_| their.0 == 200 && my.0 == 404);
            if let Some((_, reason)) = known {
                println!("known: {} {path}: upstream {their:?}, ours {my:?} ({reason})", caller.name);
            } else if their != my {
                differences.push(format!("{extra:?}: {} {path}: upstream {their:?}, ours {my:?}", caller.name));
            }
        }
    }
    println!("{table}");
    // The matrix must exercise both answers: someone is let in, someone is not.
    let codes: std::collections::BTreeSet<u16> = theirs.iter().flatten().map(|a| a.0).collect();
    assert!(codes.contains(&200) && codes.contains(&401) && codes.contains(&403), "{codes:?}");
    differences
}

#[test]
fn secure_port_access_matrix_is_upstreams() {
    let assets = Assets::locate().unwrap_or_else(|e| panic!("the real-server test needs the envtest assets: {e}"));
    let plane = ControlPlane::start().unwrap();
    let (_, kubeconfig) = plane.write_kubeconfigs(&plane.dir().join("kubeadm").join("admin.conf")).unwrap();
    let token = grant(&plane);
    let callers = callers(&plane, &token);
    let mut differences = compare(&plane, &assets, &kubeconfig, &callers, &[]);
    // Paths opened to anyone, and the front-proxy settings taken from the flags alone (no
    // lookup of `extension-apiserver-authentication`: any name from the front-proxy CA).
    let opened = ["--authorization-always-allow-paths=/metrics,/configz,/healthz/*", "--authentication-skip-lookup"];
    differences.extend(compare(&plane, &assets, &kubeconfig, &callers, &opened));
    assert!(differences.is_empty(), "answers that differ from upstream's:\n{}", differences.join("\n"));
}
