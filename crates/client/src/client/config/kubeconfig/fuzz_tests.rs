//! Generated kubeconfigs (docs/reliability.md, "Fuzzing"): a valid file's structure with fields dropped,
//! mistyped, set to bad base64, bad PEM, missing files or huge values, names that point
//! nowhere or repeat, as YAML or JSON, plus broken YAML text. Each must give a config or one
//! clear line starting with the file and naming the field; the same document as YAML or as
//! JSON must load alike.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::{Origin, from_text};
use crate::client::RestConfig;
use crate::client::config::ConfigError;
use crate::fuzz::{assert_clear, config};

/// PEM and files the generated documents refer to.
struct Fixtures {
    dir: PathBuf,
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
    other_key_pem: String,
}

fn fixtures() -> &'static Fixtures {
    static FIXTURES: OnceLock<Fixtures> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, "kubernetes");
        let ca = params.self_signed(&key).unwrap();
        let client_key = rcgen::KeyPair::generate().unwrap();
        let client = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap().self_signed(&client_key).unwrap();
        let dir = std::env::temp_dir().join(format!("kcm-fuzz-kubeconfig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ca.crt"), ca.pem()).unwrap();
        std::fs::write(dir.join("bad.pem"), "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").unwrap();
        std::fs::write(dir.join("token"), "abc\n").unwrap();
        std::fs::write(dir.join("empty"), "").unwrap();
        Fixtures {
            dir,
            ca_pem: ca.pem(),
            cert_pem: client.pem(),
            key_pem: client_key.serialize_pem(),
            other_key_pem: rcgen::KeyPair::generate().unwrap().serialize_pem(),
        }
    })
}

/// A kubeconfig that loads: a CA, a client certificate and a token.
fn valid_document(server: &str) -> Value {
    let f = fixtures();
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "ctx",
        "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority-data": BASE64.encode(&f.ca_pem)}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {
            "client-certificate-data": BASE64.encode(&f.cert_pem),
            "client-key-data": BASE64.encode(&f.key_pem),
            "token": "t0ken",
        }}],
    })
}

/// Every place a mutation can hit, as JSON pointers into [`valid_document`].
const FIELDS: &[&str] = &[
    "/current-context",
    "/clusters",
    "/clusters/0",
    "/clusters/0/name",
    "/clusters/0/cluster",
    "/clusters/0/cluster/server",
    "/clusters/0/cluster/certificate-authority-data",
    "/clusters/0/cluster/certificate-authority",
    "/clusters/0/cluster/insecure-skip-tls-verify",
    "/clusters/0/cluster/tls-server-name",
    "/clusters/0/cluster/proxy-url",
    "/contexts",
    "/contexts/0",
    "/contexts/0/name",
    "/contexts/0/context",
    "/contexts/0/context/cluster",
    "/contexts/0/context/user",
    "/users",
    "/users/0",
    "/users/0/name",
    "/users/0/user",
    "/users/0/user/token",
    "/users/0/user/tokenFile",
    "/users/0/user/client-certificate-data",
    "/users/0/user/client-key-data",
    "/users/0/user/client-certificate",
    "/users/0/user/client-key",
    "/users/0/user/exec",
    "/users/0/user/as",
];

#[derive(Debug, Clone)]
enum Mutation {
    Drop(&'static str),
    Set(&'static str, Value),
    /// Appends a copy of the list's first entry (a repeated name), or one named `name`.
    Duplicate(&'static str, Option<String>),
}

/// Values of every JSON type, and strings that are wrong in the ways kubeconfigs go wrong.
fn bad_value() -> impl Strategy<Value = Value> {
    let f = fixtures();
    let strings = vec![
        String::new(),
        "not base64!".to_string(),
        "aGVsbG8=".to_string(),
        "====".to_string(),
        BASE64.encode("-----BEGIN CERTIFICATE-----\nnot pem\n-----END CERTIFICATE-----\n"),
        BASE64.encode("-----BEGIN CERTIFICATE-----\nAAAA\n"),
        BASE64.encode(&f.ca_pem),
        BASE64.encode(&f.key_pem),
        BASE64.encode(&f.other_key_pem),
        BASE64.encode(&f.cert_pem),
        "ca.crt".to_string(),
        "bad.pem".to_string(),
        "empty".to_string(),
        "token".to_string(),
        "missing-file".to_string(),
        ".".to_string(),
        "/dev/null".to_string(),
        "http://127.0.0.1:8080".to_string(),
        "https://[::1".to_string(),
        "https://127.0.0.1:99999".to_string(),
        "ftp://x".to_string(),
        "127.0.0.1:6443".to_string(),
        "c".to_string(),
        "u".to_string(),
        "ctx".to_string(),
        "nowhere".to_string(),
    ];
    prop_oneof![
        4 => proptest::sample::select(strings).prop_map(Value::String),
        2 => any::<String>().prop_map(Value::String),
        1 => (1usize..200_000).prop_map(|n| Value::String("x".repeat(n))),
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => any::<i64>().prop_map(|n| json!(n)),
        1 => any::<f64>().prop_map(|n| json!(n)),
        1 => Just(json!([1, "a", null])),
        1 => Just(json!({"name": "c", "x": {"y": []}})),
        1 => Just(json!([])),
        1 => Just(json!({})),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let field = || proptest::sample::select(FIELDS);
    let list = proptest::sample::select(&["/clusters", "/contexts", "/users"][..]);
    prop_oneof![
        2 => field().prop_map(Mutation::Drop),
        4 => (field(), bad_value()).prop_map(|(f, v)| Mutation::Set(f, v)),
        1 => (list, proptest::option::of("[a-z]{0,3}")).prop_map(|(l, n)| Mutation::Duplicate(l, n)),
    ]
}

fn apply(document: &mut Value, mutation: &Mutation) {
    let split = |pointer: &'static str| pointer.rsplit_once('/').unwrap();
    match mutation {
        Mutation::Drop(pointer) => {
            let (parent, key) = split(pointer);
            match document.pointer_mut(parent) {
                Some(Value::Object(map)) => _ = map.remove(key),
                Some(Value::Array(list)) if !list.is_empty() => _ = list.remove(0),
                _ => {}
            }
        }
        Mutation::Set(pointer, value) => {
            let (parent, key) = split(pointer);
            match document.pointer_mut(parent) {
                Some(Value::Object(map)) => _ = map.insert(key.to_string(), value.clone()),
                Some(Value::Array(list)) if !list.is_empty() => list[0] = value.clone(),
                _ => {}
            }
        }
        Mutation::Duplicate(pointer, name) => {
            if let Some(Value::Array(list)) = document.pointer_mut(pointer)
                && let Some(first) = list.first().cloned()
            {
                let mut copy = first;
                if let (Some(name), Value::Object(entry)) = (name, &mut copy) {
                    entry.insert("name".into(), Value::String(name.clone()));
                }
                list.push(copy);
            }
        }
    }
}

/// A document with mutations applied.
fn document() -> impl Strategy<Value = Value> {
    proptest::collection::vec(mutation(), 0..6).prop_map(|mutations| {
        let mut document = valid_document("https://127.0.0.1:6443");
        mutations.iter().for_each(|m| apply(&mut document, m));
        document
    })
}

fn path() -> PathBuf {
    fixtures().dir.join("config")
}

fn load(text: &str) -> Result<RestConfig, ConfigError> {
    let path = path();
    from_text(&Origin::new(&path), text, None)
}

/// A refusal is one line that names the file, and a field unless the file as a whole is bad.
fn check(result: &Result<RestConfig, ConfigError>) {
    if let Err(error) = result {
        let message = error.to_string();
        assert_clear(&message);
        let prefix = format!("kubeconfig {}: ", path().display());
        assert!(message.starts_with(&prefix), "{message}");
        assert!(message.len() > prefix.len() + 3, "{message}");
    }
}

fn yaml(document: &Value) -> String {
    serde_yaml_ng::to_string(document).unwrap()
}

/// The parts of a loaded config two loads of the same document must agree on.
fn summary(result: &Result<RestConfig, ConfigError>) -> Result<String, ()> {
    match result {
        Ok(config) => Ok(format!(
            "{} {} {:?} {:?}",
            config.server,
            config.source,
            config.auth.bearer_token(),
            config.tls.ca_certs.as_ref().map(Vec::len)
        )),
        Err(_) => Err(()),
    }
}

/// YAML that is broken, or hostile to a parser: truncations, aliases, nesting, many documents.
fn broken_yaml() -> impl Strategy<Value = String> {
    let hostile = vec![
        "a: &a [*a]".to_string(),
        "clusters: *nothing".to_string(),
        "current-context: &x ctx\ncontexts: [{name: *x, context: {cluster: *x, user: *x}}]\nclusters: [{name: ctx, cluster: {server: 'https://a'}}]\nusers: [{name: ctx}]".to_string(),
        "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: [*g,*g,*g,*g,*g,*g,*g,*g,*g]".to_string(),
        format!("clusters: {}{}", "[".repeat(2_000), "]".repeat(2_000)),
        format!("clusters: {}{}", "[".repeat(999), "]".repeat(999)),
        format!("users: {}", "- ".repeat(5_000)),
        "---\ncurrent-context: a\n---\ncurrent-context: b\n".to_string(),
        "<<: {current-context: ctx}".to_string(),
        "clusters:\n- name: c\n  cluster:\n    server: https://a\n    server: https://b".to_string(),
        "\t- :".to_string(),
        "!!binary AAAA".to_string(),
        "current-context: !!int ctx".to_string(),
        "{\"current-context\": 1e999}".to_string(),
        "\u{feff}current-context: ctx".to_string(),
        "\0".to_string(),
    ];
    prop_oneof![
        2 => proptest::sample::select(hostile),
        2 => (document(), any::<prop::sample::Index>()).prop_map(|(d, cut)| {
            let text = yaml(&d);
            let mut end = cut.index(text.len() + 1);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text[..end].to_string()
        }),
        1 => any::<String>(),
        1 => (document(), any::<prop::sample::Index>(), "[\\[\\]{}:&*!|>'\"#%@`,?\\- \t\n]{1,4}").prop_map(|(d, at, junk)| {
            let mut text = yaml(&d);
            let mut at = at.index(text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            text.insert_str(at, &junk);
            text
        }),
    ]
}

proptest! {
    #![proptest_config(config(200))]

    #[test]
    fn generated_kubeconfigs_load_alike_as_yaml_and_json_or_name_the_field(document in document()) {
        let as_yaml = load(&yaml(&document));
        let as_json = load(&serde_json::to_string_pretty(&document).unwrap());
        check(&as_yaml);
        check(&as_json);
        prop_assert_eq!(summary(&as_yaml), summary(&as_json));
    }

    #[test]
    fn broken_yaml_gives_one_clear_line(text in broken_yaml()) {
        check(&load(&text));
    }
}

#[test]
fn the_unmutated_document_loads() {
    let config = load(&yaml(&valid_document("https://127.0.0.1:6443/"))).unwrap();
    assert_eq!(config.server, "https://127.0.0.1:6443");
    assert!(config.tls.client_identity.is_some());
    assert_eq!(config.auth.bearer_token().as_deref(), Some("t0ken"));
}

#[test]
fn the_loader_reads_the_file() {
    let path = fixtures().dir.join("written");
    std::fs::write(&path, yaml(&valid_document("https://a:1"))).unwrap();
    assert_eq!(super::load(&path, None).unwrap().server, "https://a:1");
    std::fs::write(&path, [0xff, 0xfe]).unwrap();
    let message = super::load(&path, None).unwrap_err().to_string();
    assert!(message.contains("cannot read"), "{message}");
    assert!(Path::new(&path).exists());
}
/// Found by the generated YAML: the parser took 10 s over 40 000 `[` (quadratic in the
/// depth); deep nesting is now refused before parsing, at once.
#[test]
fn deep_nesting_is_refused_quickly() {
    for text in [
        format!("clusters: {}", "[".repeat(40_000)),
        format!("clusters: {}{}", "[".repeat(1_000_000), "]".repeat(1_000_000)),
        format!("clusters: {}", "{a: ".repeat(20_000)),
    ] {
        let started = std::time::Instant::now();
        let message = load(&text).unwrap_err().to_string();
        assert!(message.contains("nested more than 1000 levels deep at line 1"), "{message}");
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "{:?}", started.elapsed());
    }
    let nested = format!("clusters: {}{}\ncurrent-context: x", "[".repeat(100), "]".repeat(100));
    let message = load(&nested).unwrap_err().to_string();
    assert!(message.contains("invalid type: sequence"), "{message}");
}
