//! Kubeconfig and in-cluster config loading, through the public API only. Every test works in
//! its own folder under the system temp folder; nothing touches the network.

use std::fs;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use kcm::client::config::{self, Auth, RestConfig};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, PKCS_RSA_SHA256};
use rustls_pki_types::PrivateKeyDer;
use rustls_pki_types::pem::PemObject;

/// A throwaway RSA key for these tests only. ring (rcgen's backend here) cannot generate RSA
/// keys, so one is embedded; generated with `openssl genpkey -algorithm RSA`.
const RSA_PKCS8: &str = "-----BEGIN PRIVATE KEY-----
MIIEvAIBADANBgkqhkiG9w0BAQEFAASCBKYwggSiAgEAAoIBAQDM7gbNptLP8/jr
YI7h3pgMSxXqAMDiWwhFmeGeerUFtLbw1LC0zWSG//36Se77KsBgDL8HEh3LIJRE
9o2RUJybkyhdFZvWDe+oGraoJoat+f7M27bvHUzEZAy3TCBUd8kbA8qm+9Zj4r8b
iEV0LfjkKdKdIO1H6dEMyR1B6+QvZ+Tpwrbg7oG7riDFLi1CxptWBeF6R67paXbZ
u04RNBuP1b9+vwbyHU/Oa6dUm4KSUrvjbd8exemtrSM5JDWYCCkbkJ//JEbRB1sd
c5yNAdu8sOD13VwK7T7A0LWd80157gHccNcobE/PDbAaT5aYeDrjawtgkIml2Kwc
L7uUnBpTAgMBAAECggEAFdl1ET0tse1dx17SrSNqC7l/uyTca+Xv0lfvVdHYdiTH
8pKCyqwxgTFPF34FhHMQ8sy5G1xjn9I37Mhq3Kj/IZlFjvMsW9y9hite+TuuVWNX
tujgLsttcW0HbA2qTsc8wmwbkcU9HQZCgQF9Aj+aj10kLwuhMO8tklLpEyu+9wzI
QeLvgpBakIt5Jwk9uuRKjEQxzFEaitFe/uo8BSISHmXMvTrilzUyTJJjhS+tGedv
VaCVLoOwNi1WlZT5Md93NtejX9sHWs3wcLQ7p+5upRG/NB0PTebOcoHB9f/HW8nk
1Edz/rswXiMoq81zjg7+F0pqrSIQhRaENz7scDBbRQKBgQD2rrkQpfu6fLdi3G0V
6jne4U/ulS57Hr+m6h4jY+y26vJX7b3fKGOgRkhBmok0ghVdiCbChpYUhD9EAZ6L
MO2VqUeYcDSgDVS46pfVjXWik6imnnWf99rmof5PiHezi0i7Qxkr+HsCPuoEEbtW
UWigR4HLT+pOqCwfkp3GXFkYZwKBgQDUq5Q7ZbCy8+4f/FcuwIGLug4vsX/BB5NE
4388nY7viRor8Fjs8iARLW/WN7ErjG/0kLvmDpVmad8gDHjCYx9yCmgptEEbEwF8
Rjb4ugteYh3HV+1CvBLKFg7jK8kvXxfabB9K+N7jq6vEQHuCE7ZxU8XcOlCfcY4X
tg98wPFrNQKBgDZ86Yvv3eaXXbqMjdvlXNsKUamVcirn49VuqTGQBN1ykA00Clic
h0UDwTocdGoQwb9jL4yQRd5KR98xrF96c0A3oATf4//mcexWhSs6j91VWE9VeQ3Y
pZWD+rR+pFIYVfxnGcxImoMoenBjqkmqub2NjfHmuQ6evwBKVmdWRqfJAoGAAO5r
bMMqPe5hiZRSUWsYZiM/cqgFVjQRSgjxArPx70ybZ7vat9brmwem6Lo/tWAdEWYc
3IoNz3ABQSOs17UVaytuf1hBvLudkwy/quEtsZEebkQNTvCB6I6mLAqCDAoPka5N
iMeEOl0DGI3rvIsXjnF+eVNsDPazV5k9gh9aL00CgYBXrKLJa6h5vdKEgyf1Kz9w
jisseJzJYPqs7SKiMCgaTNiPttrbYSt80pLi9bmcVg2WVGWhhmb0kFXDQZpJ2tzr
dl1lU2+FgrpjEpmosTtWM/EalNjXpnaCngJzRv7tgrwY8QoR+17H/lj4pO5IqSbp
IY/MF8BHJKGp9EzLR8qyyQ==
-----END PRIVATE KEY-----
";

/// A folder of its own for one test, removed afterwards.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("kcm-kubeconfig-{}-{test}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).expect("create test folder");
        TempDir(path)
    }

    /// Writes `contents` to `relative` (creating folders) and returns the full path.
    fn write(&self, relative: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(relative);
        fs::create_dir_all(path.parent().expect("parent")).expect("create folder");
        fs::write(&path, contents).expect("write file");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A certificate and its private key, both PEM.
struct Identity {
    cert: String,
    key: String,
}

fn ec_identity() -> Identity {
    let key = KeyPair::generate().expect("EC key");
    identity(key)
}

fn rsa_identity() -> Identity {
    let key = KeyPair::from_pkcs8_pem_and_sign_algo(RSA_PKCS8, &PKCS_RSA_SHA256).expect("RSA key");
    identity(key)
}

fn identity(key: KeyPair) -> Identity {
    let params = CertificateParams::new(vec!["client".to_owned()]).expect("params");
    let cert = params.self_signed(&key).expect("certificate");
    Identity { cert: cert.pem(), key: key.serialize_pem() }
}

fn ca_pem() -> String {
    let key = KeyPair::generate().expect("CA key");
    let mut params = CertificateParams::new(Vec::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.self_signed(&key).expect("CA certificate").pem()
}

/// Re-encodes a PKCS#8 PEM key as the key it wraps: PKCS#1 for RSA, SEC1 for EC.
fn unwrap_pkcs8(pem_key: &str, label: &str) -> String {
    let der = match PrivateKeyDer::from_pem_slice(pem_key.as_bytes()).expect("key") {
        PrivateKeyDer::Pkcs8(der) => der.secret_pkcs8_der().to_vec(),
        other => panic!("expected PKCS#8, got {other:?}"),
    };
    // PrivateKeyInfo ::= SEQUENCE { version INTEGER, algorithm SEQUENCE, privateKey OCTET STRING }
    let (_, info, _) = der_item(&der);
    let (_, _, rest) = der_item(info);
    let (_, _, rest) = der_item(rest);
    let (tag, inner, _) = der_item(rest);
    assert_eq!(tag, 0x04, "privateKey is an OCTET STRING");
    pem(label, inner)
}

/// Splits one DER item off `input`: (tag, contents, rest).
fn der_item(input: &[u8]) -> (u8, &[u8], &[u8]) {
    let (len, header) = match input[1] {
        short if short < 0x80 => (usize::from(short), 2),
        long => {
            let count = usize::from(long & 0x7f);
            let len = input[2..2 + count].iter().fold(0, |len, b| len << 8 | usize::from(*b));
            (len, 2 + count)
        }
    };
    (input[0], &input[header..header + len], &input[header + len..])
}

fn pem(label: &str, der: &[u8]) -> String {
    let body = BASE64.encode(der);
    let lines: Vec<&str> = body.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).expect("ascii")).collect();
    format!("-----BEGIN {label}-----\n{}\n-----END {label}-----\n", lines.join("\n"))
}

/// A kubeconfig whose context "ctx" uses cluster "c1" (`cluster` lines) and user "u1" (`user`
/// lines).
fn kubeconfig(cluster: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: ctx\ncontexts:\n- name: ctx\n  context:\n    cluster: c1\n    user: u1\nclusters:\n- name: c1\n  cluster:\n{}users:\n- name: u1\n  user:\n{}",
        indent(cluster),
        indent(user)
    )
}

fn indent(lines: &str) -> String {
    lines.lines().map(|line| format!("    {line}\n")).collect()
}

fn b64(text: &str) -> String {
    BASE64.encode(text)
}

fn load(path: &Path) -> RestConfig {
    config::load(Some(path), None).expect("kubeconfig loads")
}

fn load_error(path: &Path) -> String {
    config::load(Some(path), None).expect_err("kubeconfig is refused").to_string()
}

/// Loads each case's kubeconfig and checks the error: `kubeconfig <path>: <expected...>`.
fn assert_errors(dir: &TempDir, cases: &[(&str, String, String)]) {
    for (name, yaml, expected) in cases {
        let path = dir.write(&format!("{name}.yaml"), yaml);
        let error = load_error(&path);
        let prefix = format!("kubeconfig {}: ", path.display());
        assert!(error.starts_with(&prefix), "{name}: {error}");
        assert!(error[prefix.len()..].starts_with(expected.as_str()), "{name}: {error}");
    }
}

#[test]
fn embedded_ca_and_client_identity() {
    let dir = TempDir::new("embedded");
    let client = ec_identity();
    let cluster = format!(
        "server: https://api.example:6443/\ncertificate-authority-data: {}\ntls-server-name: api.internal",
        b64(&ca_pem())
    );
    let user = format!("client-certificate-data: {}\nclient-key-data: {}", b64(&client.cert), b64(&client.key));
    let path = dir.write("kubeconfig", kubeconfig(&cluster, &user));

    let config = load(&path);
    assert_eq!(config.server, "https://api.example:6443");
    assert_eq!(config.tls.ca_certs.as_ref().map(Vec::len), Some(1));
    assert_eq!(config.tls.server_name.as_deref(), Some("api.internal"));
    assert!(!config.tls.insecure_skip_verify);
    let identity = config.tls.client_identity.as_ref().expect("client identity");
    assert_eq!(identity.cert_chain.len(), 1);
    assert!(matches!(identity.key, PrivateKeyDer::Pkcs8(_)));
    assert!(matches!(config.auth, Auth::None));
    assert_eq!(config.auth.bearer_token(), None);
    let expected = format!("kubeconfig {} (context \"ctx\", cluster \"c1\", user \"u1\")", path.display());
    assert_eq!(config.source, expected);
}

#[test]
fn relative_paths_resolve_against_the_kubeconfig_folder() {
    let dir = TempDir::new("relative");
    let client = ec_identity();
    dir.write("conf/pki/ca.crt", ca_pem());
    dir.write("conf/pki/client.crt", &client.cert);
    let key = dir.write("elsewhere/client.key", &client.key);
    let token = dir.write("conf/token", "secret-token\n");
    let cluster = "server: https://10.0.0.1:6443\ncertificate-authority: pki/ca.crt";
    let user = format!("client-certificate: pki/client.crt\nclient-key: {}\ntokenFile: token", key.display());
    let path = dir.write("conf/kubeconfig", kubeconfig(cluster, &user));

    let config = load(&path);
    assert_eq!(config.tls.ca_certs.as_ref().map(Vec::len), Some(1));
    assert!(config.tls.client_identity.is_some());
    let Auth::TokenFile(file) = &config.auth else { panic!("token file auth: {:?}", config.auth) };
    assert_eq!(file.path, token);
    assert_eq!(config.auth.bearer_token().as_deref(), Some("secret-token"));
}

#[test]
fn rsa_keys_in_pkcs1_and_pkcs8() {
    let dir = TempDir::new("rsa");
    let client = rsa_identity();
    let pkcs1 = unwrap_pkcs8(&client.key, "RSA PRIVATE KEY");
    for (name, key) in [("pkcs8", &client.key), ("pkcs1", &pkcs1)] {
        let user = format!("client-certificate-data: {}\nclient-key-data: {}", b64(&client.cert), b64(key));
        let path = dir.write(name, kubeconfig("server: https://api:6443", &user));
        let config = load(&path);
        let identity = config.tls.client_identity.expect("client identity");
        match (name, identity.key) {
            ("pkcs8", PrivateKeyDer::Pkcs8(_)) | ("pkcs1", PrivateKeyDer::Pkcs1(_)) => {}
            (name, key) => panic!("{name}: unexpected key encoding {key:?}"),
        }
    }
}

#[test]
fn ec_key_in_sec1() {
    let dir = TempDir::new("sec1");
    let client = ec_identity();
    dir.write("client.crt", &client.cert);
    dir.write("client.key", unwrap_pkcs8(&client.key, "EC PRIVATE KEY"));
    let user = "client-certificate: client.crt\nclient-key: client.key";
    let path = dir.write("kubeconfig", kubeconfig("server: https://api:6443", user));
    let identity = load(&path).tls.client_identity.expect("client identity");
    assert!(matches!(identity.key, PrivateKeyDer::Sec1(_)), "{:?}", identity.key);
}

#[test]
fn static_token_and_insecure_skip_verify() {
    let dir = TempDir::new("token");
    let cluster = "server: https://api:6443\ninsecure-skip-tls-verify: true";
    let path = dir.write("kubeconfig", kubeconfig(cluster, "token: abc.def"));
    let config = load(&path);
    assert!(config.tls.insecure_skip_verify);
    assert!(config.tls.ca_certs.is_none());
    assert!(matches!(&config.auth, Auth::Token(token) if token == "abc.def"));
    assert_eq!(config.auth.bearer_token().as_deref(), Some("abc.def"));
    assert_eq!(format!("{:?}", config.auth), "Token(<redacted>)");
}

#[test]
fn token_file_wins_over_token_while_it_can_be_read() {
    let dir = TempDir::new("token-both");
    dir.write("token", "from-file");
    let readable = dir.write("readable", kubeconfig("server: https://api", "token: static\ntokenFile: token"));
    assert_eq!(load(&readable).auth.bearer_token().as_deref(), Some("from-file"));

    let missing = dir.write("missing", kubeconfig("server: https://api", "token: static\ntokenFile: nope"));
    let config = load(&missing);
    assert!(matches!(&config.auth, Auth::TokenFile(file) if file.path == dir.0.join("nope")));
    assert_eq!(config.auth.bearer_token().as_deref(), Some("static"));
}

#[test]
fn master_overrides_the_server_and_its_tls_server_name() {
    let dir = TempDir::new("master-override");
    let cluster = "server: https://api:6443\ntls-server-name: api.internal";
    let path = dir.write("kubeconfig", kubeconfig(cluster, "token: abc"));
    let config = config::load(Some(&path), Some("https://other:6443/")).expect("loads");
    assert_eq!(config.server, "https://other:6443");
    assert_eq!(config.tls.server_name, None);
    assert_eq!(config.auth.bearer_token().as_deref(), Some("abc"));
    assert!(config.source.ends_with(", server from --master)"), "{}", config.source);

    let error = config::load(Some(&path), Some("http://other:8080")).expect_err("plaintext");
    let expected = format!("kubeconfig {}: --master: \"http://other:8080\" is not an https:// URL", path.display());
    assert!(error.to_string().starts_with(&expected), "{error}");
}

#[test]
fn master_alone_connects_without_credentials() {
    let config = config::load(None, Some("http://127.0.0.1:8080/")).expect("loads");
    assert_eq!(config.server, "http://127.0.0.1:8080");
    assert!(matches!(config.auth, Auth::None));
    assert!(config.tls.ca_certs.is_none() && config.tls.client_identity.is_none());
    assert_eq!(config.source, "--master http://127.0.0.1:8080");

    // An empty --kubeconfig counts as not given, as in client-go.
    let config = config::load(Some(Path::new("")), Some("HTTPS://api:6443")).expect("loads");
    assert_eq!(config.server, "https://api:6443");

    for (master, reason) in [
        ("127.0.0.1:8080", "is not an http:// or https:// URL"),
        ("ftp://api", "is not an http:// or https:// URL"),
        ("https://", "has no host"),
        ("https://api/?x=1", "must not have a query or fragment"),
    ] {
        let error = config::load(None, Some(master)).expect_err(master).to_string();
        assert_eq!(error, format!("--master: {master:?} {reason}"));
    }
}

#[test]
fn in_cluster_reads_the_service_account() {
    let dir = TempDir::new("in-cluster");
    dir.write("token", "sa-token\n");
    dir.write("ca.crt", ca_pem());
    let config = config::in_cluster_from(Some("10.96.0.1"), Some("443"), &dir.0).expect("in-cluster");
    assert_eq!(config.server, "https://10.96.0.1:443");
    assert_eq!(config.source, "in-cluster (https://10.96.0.1:443)");
    assert_eq!(config.tls.ca_certs.as_ref().map(Vec::len), Some(1));
    assert!(matches!(&config.auth, Auth::TokenFile(file) if file.path == dir.0.join("token")));
    assert_eq!(config.auth.bearer_token().as_deref(), Some("sa-token"));

    let config = config::in_cluster_from(Some("fd00::1"), Some("6443"), &dir.0).expect("IPv6");
    assert_eq!(config.server, "https://[fd00::1]:6443");
}

#[test]
fn in_cluster_without_a_usable_ca_falls_back_to_system_roots() {
    let dir = TempDir::new("in-cluster-no-ca");
    dir.write("token", "sa-token");
    let config = config::in_cluster_from(Some("10.96.0.1"), Some("443"), &dir.0).expect("in-cluster");
    assert!(config.tls.ca_certs.is_none());
    dir.write("ca.crt", "not a certificate");
    let config = config::in_cluster_from(Some("10.96.0.1"), Some("443"), &dir.0).expect("in-cluster");
    assert!(config.tls.ca_certs.is_none());
}

#[test]
fn in_cluster_errors_name_what_is_missing() {
    let dir = TempDir::new("in-cluster-errors");
    let upstream = "unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and \
                    KUBERNETES_SERVICE_PORT must be defined";
    let cases = [
        (None, Some("443"), format!("{upstream} (KUBERNETES_SERVICE_HOST is not set)")),
        (Some("10.96.0.1"), Some(""), format!("{upstream} (KUBERNETES_SERVICE_PORT is not set)")),
        (None, None, format!("{upstream} (neither is set)")),
        (
            Some("10.96.0.1"),
            Some("https"),
            "in-cluster config: KUBERNETES_SERVICE_PORT \"https\" is not a port number".to_owned(),
        ),
    ];
    for (host, port, expected) in cases {
        let error = config::in_cluster_from(host, port, &dir.0).expect_err("refused");
        assert_eq!(error.to_string(), expected);
    }
    let error = config::in_cluster_from(Some("10.96.0.1"), Some("443"), &dir.0).expect_err("no token");
    let expected = format!("in-cluster config: cannot read token file {}: ", dir.0.join("token").display());
    assert!(error.to_string().starts_with(&expected), "{error}");
}

#[test]
fn file_errors() {
    let dir = TempDir::new("file-errors");
    let missing = dir.0.join("missing.yaml");
    let error = load_error(&missing);
    assert!(error.starts_with(&format!("kubeconfig {}: cannot read: ", missing.display())), "{error}");

    let path = dir.write("bad.yaml", "current-context: ctx\nclusters:\n  - name: [\n");
    let error = load_error(&path);
    assert!(error.starts_with(&format!("kubeconfig {}: invalid YAML: ", path.display())), "{error}");
    assert!(error.contains("line 3"), "{error}");
}

#[test]
fn context_errors() {
    let dir = TempDir::new("context-errors");
    let context = |cluster: &str, user: &str| {
        format!(
            "current-context: ctx\ncontexts:\n- name: ctx\n  context:\n    cluster: {cluster}\n    user: {user}\nclusters:\n- name: c1\n  cluster:\n    server: https://api\nusers:\n- name: u1\n  user: null\n"
        )
    };
    let cases = [
        ("empty", String::new(), "current-context: not set".to_owned()),
        (
            "unknown-context",
            "current-context: nope\ncontexts: null\n".to_owned(),
            "current-context: context \"nope\" is not defined in contexts".to_owned(),
        ),
        ("no-cluster", context("c2", "u1"), "contexts[ctx].cluster: \"c2\" is not defined in clusters".into()),
        ("no-user", context("c1", "u2"), "contexts[ctx].user: \"u2\" is not defined in users".into()),
        ("user-unset", context("c1", "\"\""), "contexts[ctx].user: not set".into()),
        ("duplicate", format!("{}- name: u1\n", context("c1", "u1")), "users[u1]: defined more than once".into()),
    ];
    assert_errors(&dir, &cases);
}

#[test]
fn cluster_errors() {
    let dir = TempDir::new("cluster-errors");
    let ca = ca_pem();
    dir.write("garbage.crt", "hello");
    let garbage = dir.0.join("garbage.crt").display().to_string();
    let missing = dir.0.join("missing.crt").display().to_string();
    let truncated = b64(&ca[..ca.len() - 30]);
    let cluster = |lines: &str| kubeconfig(lines, "token: t");
    let cases = [
        ("no-server", cluster("server: \"\""), "clusters[c1].server: not set".to_owned()),
        (
            "plaintext",
            cluster("server: http://api:8080"),
            "clusters[c1].server: \"http://api:8080\" is not an https:// URL".into(),
        ),
        (
            "unreadable-ca",
            cluster("server: https://api\ncertificate-authority: missing.crt"),
            format!("clusters[c1].certificate-authority: cannot read {missing}: "),
        ),
        (
            "not-pem",
            cluster("server: https://api\ncertificate-authority: garbage.crt"),
            format!("clusters[c1].certificate-authority ({garbage}): no CERTIFICATE block found"),
        ),
        (
            "truncated-pem",
            cluster(&format!("server: https://api\ncertificate-authority-data: {truncated}")),
            "clusters[c1].certificate-authority-data: not valid PEM: missing \"-----END CERTIFICATE-----\" line"
                .into(),
        ),
        (
            "bad-base64",
            cluster("server: https://api\ncertificate-authority-data: not*base64"),
            "clusters[c1].certificate-authority-data: invalid base64".into(),
        ),
        (
            "both-ca",
            cluster(&format!("server: https://api\ncertificate-authority: garbage.crt\ncertificate-authority-data: {}", b64(&ca))),
            "clusters[c1].certificate-authority-data: certificate-authority-data and certificate-authority are both set".into(),
        ),
        (
            "insecure-with-ca",
            cluster(&format!("server: https://api\ninsecure-skip-tls-verify: true\ncertificate-authority-data: {}", b64(&ca))),
            "clusters[c1].insecure-skip-tls-verify: specifying a root certificates file with the insecure flag is not allowed".into(),
        ),
        (
            "proxy",
            cluster("server: https://api\nproxy-url: http://proxy:3128"),
            "clusters[c1].proxy-url: proxies are not supported".into(),
        ),
    ];
    assert_errors(&dir, &cases);
}

#[test]
fn client_certificate_errors() {
    let dir = TempDir::new("client-cert-errors");
    let client = ec_identity();
    let other = ec_identity();
    dir.write("other.key", &other.key);
    let other_key = dir.0.join("other.key").display().to_string();
    let (cert, key) = (b64(&client.cert), b64(&client.key));
    let user = |lines: &str| kubeconfig("server: https://api", lines);
    let cases = [
        (
            "mismatch-data",
            user(&format!("client-certificate-data: {cert}\nclient-key-data: {}", b64(&other.key))),
            "users[u1].client-key-data: private key does not match the client certificate".to_owned(),
        ),
        (
            "mismatch-file",
            user(&format!("client-certificate-data: {cert}\nclient-key: other.key")),
            format!("users[u1].client-key ({other_key}): private key does not match the client certificate"),
        ),
        (
            "key-is-a-cert",
            user(&format!("client-certificate-data: {cert}\nclient-key-data: {cert}")),
            "users[u1].client-key-data: no PRIVATE KEY block found".into(),
        ),
        (
            "cert-is-a-key",
            user(&format!("client-certificate-data: {key}\nclient-key-data: {key}")),
            "users[u1].client-certificate-data: no CERTIFICATE block found".into(),
        ),
        (
            "cert-without-key",
            user(&format!("client-certificate-data: {cert}")),
            "users[u1].client-key: not set, but a client certificate is".into(),
        ),
        (
            "key-without-cert",
            user(&format!("client-key-data: {key}")),
            "users[u1].client-certificate: not set, but a client key is".into(),
        ),
        (
            "both-keys",
            user(&format!("client-certificate-data: {cert}\nclient-key-data: {key}\nclient-key: other.key")),
            "users[u1].client-key-data: client-key-data and client-key are both set".into(),
        ),
    ];
    assert_errors(&dir, &cases);

    // The exact shape of one message, end to end.
    let path = dir.0.join("mismatch-data.yaml");
    let expected = format!(
        "kubeconfig {}: users[u1].client-key-data: private key does not match the client certificate",
        path.display()
    );
    assert_eq!(load_error(&path), expected);
}

#[test]
fn credential_errors() {
    let dir = TempDir::new("credential-errors");
    dir.write("empty-token", " \n");
    let empty = dir.0.join("empty-token").display().to_string();
    let missing = dir.0.join("nope").display().to_string();
    let user = |lines: &str| kubeconfig("server: https://api", lines);
    let cases = [
        (
            "basic",
            user("username: admin\npassword: secret"),
            "users[u1].username: basic authentication is not supported".to_owned(),
        ),
        (
            "exec",
            user("exec:\n  apiVersion: client.authentication.k8s.io/v1\n  command: aws"),
            "users[u1].exec: exec credential plugins are not supported".into(),
        ),
        (
            "auth-provider",
            user("auth-provider:\n  name: oidc"),
            "users[u1].auth-provider: auth provider plugins are not supported".into(),
        ),
        ("impersonation", user("token: t\nas: admin"), "users[u1].as: impersonation is not supported".into()),
        (
            "missing-token-file",
            user("tokenFile: nope"),
            format!("users[u1].tokenFile: cannot read token file {missing}: "),
        ),
        (
            "empty-token-file",
            user("tokenFile: empty-token"),
            format!("users[u1].tokenFile: token file {empty} is empty"),
        ),
    ];
    assert_errors(&dir, &cases);
}
