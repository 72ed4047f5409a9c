//! The bootstrap-signer-controller and token-cleaner-controller on both backends:
//! `kube-public/cluster-info` carries a detached JWS of its kubeconfig for each bootstrap token
//! that may sign (checked here by recomputing the HS256 MAC), the signature goes with its token,
//! and the cleaner deletes a token at its `expiration` (after which the signer drops it too).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use base64::Engine;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kcm::app::controllers::named;
use kcm::client::config::{Auth, RestConfig, TlsSettings};
use kcm::client::{Api, Client, ClientOptions, DeleteParams, Patch, PostParams};
use serde_json::json;

use crate::harness;

use harness::{Backend, Cluster, eventually, from};

/// kubeadm's selection: both controllers are off by default.
const KUBEADM_CONTROLLERS: &str = "--controllers=*,bootstrapsigner,tokencleaner";
const TOKEN_TYPE: &str = "bootstrap.kubernetes.io/token";

/// kubeadm's cluster-info: the sandbox writes it at start; on the real server (no kubeadm) the
/// test writes the same.
fn ensure_cluster_info(cluster: &Cluster) -> String {
    let api = Api::<ConfigMap>::namespaced(&cluster.client, "kube-public");
    if let Ok(existing) = api.get("cluster-info") {
        return existing.data.unwrap_or_default()["kubeconfig"].clone();
    }
    let ca = base64::engine::general_purpose::STANDARD.encode(cluster.server.ca_pem());
    let kubeconfig = format!(
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: {}\n  name: \"\"\ncontexts: null\ncurrent-context: \"\"\nkind: Config\npreferences: {{}}\nusers: null\n",
        cluster.server.url()
    );
    let cm: ConfigMap = from(json!({"metadata": {"name": "cluster-info"}, "data": {"kubeconfig": kubeconfig}}));
    api.create(&cm, &PostParams::default()).expect("cluster-info created");
    kubeconfig
}

fn token(id: &str, secret: &str, extra: &[(&str, &str)]) -> Secret {
    let mut data = BTreeMap::from([("token-id", id), ("token-secret", secret)]);
    data.extend(extra.iter().copied());
    from(json!({"metadata": {"name": format!("bootstrap-token-{id}")}, "type": TOKEN_TYPE, "stringData": data}))
}

fn create_token(client: &Client, secret: &Secret) {
    Api::<Secret>::namespaced(client, "kube-system").create(secret, &PostParams::default()).expect("token created");
}

/// An RFC 3339 time `secs` from now.
fn in_secs(secs: i64) -> String {
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(secs);
    at.round(jiff::Unit::Second).expect("rounded").to_string()
}

fn signatures(client: &Client) -> BTreeMap<String, String> {
    let cm = Api::<ConfigMap>::namespaced(client, "kube-public").get("cluster-info").expect("cluster-info");
    let data = cm.data.unwrap_or_default();
    data.into_iter().filter_map(|(k, v)| Some((k.strip_prefix("jws-kubeconfig-")?.to_string(), v))).collect()
}

/// Checks a detached JWS independently: the header and the HS256 MAC over
/// `header.base64url(content)` keyed by the token secret.
fn verify(signature: &str, content: &str, id: &str, secret: &str) {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let (header, mac) = signature.split_once("..").expect("a detached JWS");
    let decoded: serde_json::Value = serde_json::from_slice(&b64.decode(header).expect("base64")).expect("json");
    assert_eq!(decoded, json!({"alg": "HS256", "kid": id}));
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    let input = format!("{header}.{}", b64.encode(content));
    ring::hmac::verify(&key, input.as_bytes(), &b64.decode(mac).expect("base64")).expect("the MAC verifies");
}

on_both_backends!(tokens_sign_cluster_info_until_deleted_or_expired);
fn tokens_sign_cluster_info_until_deleted_or_expired(backend: Backend) {
    let controllers = [named("bootstrap-signer-controller"), named("token-cleaner-controller")];
    let cluster = harness::with(&controllers).on(backend).flags(&[KUBEADM_CONTROLLERS]).without_nodes().start();
    let kubeconfig = ensure_cluster_info(&cluster);
    let signing = [("usage-bootstrap-signing", "true")];
    create_token(&cluster.client, &token("abcdef", "0123456789abcdef", &signing));
    create_token(&cluster.client, &token("nosign", "0123456789abcdef", &[("usage-bootstrap-signing", "false")]));
    let signed = eventually("abcdef signs cluster-info", || signatures(&cluster.client).remove("abcdef"));
    verify(&signed, &kubeconfig, "abcdef", "0123456789abcdef");
    assert_eq!(signatures(&cluster.client).len(), 1, "only the signing token signs");

    // Deleted: its signature goes.
    let secrets = Api::<Secret>::namespaced(&cluster.client, "kube-system");
    secrets.delete("bootstrap-token-abcdef", &DeleteParams::default()).expect("deleted");
    eventually("the deleted token's signature removed", || signatures(&cluster.client).is_empty().then_some(()));

    // Expiring: signed, then deleted by the cleaner at its expiration, and unsigned. The
    // expiration comes once it has signed: a token that expired before the signer got to it
    // would never sign (a loaded machine can stall the signer for seconds).
    create_token(&cluster.client, &token("expire", "fedcba9876543210", &signing));
    let signed = eventually("the expiring token signs", || signatures(&cluster.client).remove("expire"));
    verify(&signed, &kubeconfig, "expire", "fedcba9876543210");
    let expiration = in_secs(3);
    let encoded = base64::engine::general_purpose::STANDARD.encode(&expiration);
    let patch = Patch::Merge(json!({"data": {"expiration": encoded}}));
    secrets.patch("bootstrap-token-expire", &patch, &PostParams::default()).expect("expiration set");
    eventually("the expired token deleted", || secrets.get_opt("bootstrap-token-expire").ok()?.is_none().then_some(()));
    let expired_at: jiff::Timestamp = expiration.parse().expect("a time");
    assert!(jiff::Timestamp::now() >= expired_at, "deleted only at its expiration");
    eventually("the expired token's signature removed", || signatures(&cluster.client).is_empty().then_some(()));
}

on_both_backends!(the_cleaner_deletes_tokens_at_their_expiration);
fn the_cleaner_deletes_tokens_at_their_expiration(backend: Backend) {
    let cluster = harness::with(&[named("token-cleaner-controller")])
        .on(backend)
        .flags(&[KUBEADM_CONTROLLERS])
        .without_nodes()
        .start();
    let secrets = Api::<Secret>::namespaced(&cluster.client, "kube-system");
    let started = Instant::now();
    create_token(&cluster.client, &token("past00", "0123456789abcdef", &[("expiration", "2020-01-01T00:00:00Z")]));
    create_token(&cluster.client, &token("soon00", "0123456789abcdef", &[("expiration", &in_secs(3))]));
    create_token(&cluster.client, &token("never0", "0123456789abcdef", &[]));
    let opaque: Secret = from(json!({"metadata": {"name": "not-a-token"}, "type": "Opaque",
        "stringData": {"expiration": "2020-01-01T00:00:00Z"}}));
    secrets.create(&opaque, &PostParams::default()).expect("created");

    eventually("the expired token deleted", || secrets.get_opt("bootstrap-token-past00").ok()?.is_none().then_some(()));
    eventually("the token deleted at expiry", || {
        secrets.get_opt("bootstrap-token-soon00").ok()?.is_none().then_some(())
    });
    // Whole seconds: at least 2 of its 3 had run.
    assert!(started.elapsed() >= Duration::from_secs(2), "not deleted before its expiration");
    assert!(secrets.get_opt("bootstrap-token-never0").expect("get").is_some(), "no expiration: kept");
    assert!(secrets.get_opt("not-a-token").expect("get").is_some(), "not a bootstrap token: kept");
}

/// A client authenticating with `token` only.
fn token_client(cluster: &Cluster, token: &str) -> Client {
    let config = RestConfig {
        server: cluster.server.url(),
        tls: TlsSettings { ca_certs: cluster.client.config().tls.ca_certs.clone(), ..TlsSettings::default() },
        auth: Auth::Token(token.to_string()),
        source: "bootstrap token".into(),
    };
    Client::new(config, ClientOptions::default()).expect("a client")
}

on_both_backends!(a_bootstrap_token_authenticates_as_its_id);
/// kube-apiserver's `--enable-bootstrap-token-auth` (kubeadm's), and the sandbox's.
fn a_bootstrap_token_authenticates_as_its_id(backend: Backend) {
    let cluster = harness::with(&[]).on(backend).without_nodes().start();
    let usage = [
        ("usage-bootstrap-authentication", "true"),
        ("auth-extra-groups", "system:bootstrappers:kubeadm:default-node-token"),
    ];
    create_token(&cluster.client, &token("joiner", "0123456789abcdef", &usage));
    let client = token_client(&cluster, "joiner.0123456789abcdef");
    let review: SelfSubjectReview = from(json!({"metadata": {}}));
    let review = Api::<SelfSubjectReview>::cluster(&client).create(&review, &PostParams::default()).expect("reviewed");
    let user = review.status.and_then(|s| s.user_info).expect("user info");
    assert_eq!(user.username.as_deref(), Some("system:bootstrap:joiner"));
    let groups = user.groups.unwrap_or_default();
    for group in ["system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token", "system:authenticated"] {
        assert!(groups.iter().any(|g| g == group), "{group} in {groups:?}");
    }
    let refused = token_client(&cluster, "joiner.0123456789abcdee");
    let review: SelfSubjectReview = from(json!({"metadata": {}}));
    let error = Api::<SelfSubjectReview>::cluster(&refused).create(&review, &PostParams::default()).unwrap_err();
    assert!(error.is_unauthorized(), "a wrong secret is refused: {error}");
}
