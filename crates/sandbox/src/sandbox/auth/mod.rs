//! Who is calling and what they may do. This file: authentication — the sandbox's own PKI (a
//! cluster CA, a serving certificate, client certificates), bearer tokens, and the kubeconfig
//! files it writes for its users. [`rbac`]: kube-apiserver's RBAC authorizer (with
//! `--authorization-mode=RBAC`), over upstream's [`bootstrap_policy`].

pub mod bootstrap_policy;
pub mod rbac;

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::json;

use crate::client::RestConfig;
use crate::client::config::{Auth, ClientIdentity, TlsSettings};
use crate::x509;

/// Why the PKI, a TLS config or a credentials file could not be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Generating the CA's key.
    #[error("CA key: {0}")]
    CaKey(#[source] rcgen::Error),
    /// Self-signing the CA certificate.
    #[error("CA certificate: {0}")]
    CaCertificate(#[source] rcgen::Error),
    /// Generating a certificate's key.
    #[error("key: {0}")]
    Key(#[source] rcgen::Error),
    /// Signing a certificate.
    #[error("certificate: {0}")]
    Certificate(#[source] rcgen::Error),
    /// Certificate parameters (a subject alternative name that is not valid).
    #[error(transparent)]
    Params(rcgen::Error),
    /// A PEM certificate or key that does not parse.
    #[error(transparent)]
    Pem(#[from] rustls_pki_types::pem::Error),
    /// rustls refused the certificates, the key or the protocol versions.
    #[error(transparent)]
    Tls(#[from] rustls::Error),
    /// The client certificate verifier could not be built.
    #[error(transparent)]
    Verifier(#[from] rustls::server::VerifierBuilderError),
    /// A kubeconfig that does not serialize.
    #[error(transparent)]
    Yaml(#[from] serde_yaml_ng::Error),
    /// Creating a directory or writing a file.
    #[error("{}: {source}", .path.display())]
    Write {
        /// The directory or file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Writing the CA certificate.
    #[error("cannot write {}: {source}", .path.display())]
    WriteCa {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// An authenticated caller, as kube-apiserver's `user.Info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name: a certificate's CN, or the token's user.
    pub name: String,
    /// The uid: the service account's for its tokens, else empty.
    pub uid: String,
    /// The groups (a certificate's O), always with `system:authenticated`.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// A user in `groups` plus `system:authenticated`, as every authenticator adds it.
    pub fn new(name: &str, groups: &[&str]) -> UserInfo {
        let mut groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".into());
        }
        UserInfo { name: name.into(), uid: String::new(), groups }
    }

    /// Whether the user is in `system:masters`, which kube-apiserver's authorizer allows everything.
    pub fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }
}

/// A certificate and its key in PEM.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// The certificate (chain), PEM.
    pub cert_pem: String,
    /// Its private key, PEM.
    pub key_pem: String,
}

/// The sandbox's certificate authority and serving certificate.
pub struct Pki {
    /// The CA certificate, PEM: what clients trust.
    pub ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
    /// The server's certificate, signed by the CA.
    pub serving: Credentials,
}

impl Pki {
    /// A new CA and a serving certificate for localhost, the given IP and the in-cluster names.
    pub fn generate(ip: IpAddr) -> Result<Pki, Error> {
        let key = KeyPair::generate().map_err(Error::CaKey)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(Error::Params)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::CrlSign];
        params.distinguished_name.push(DnType::CommonName, "kubernetes");
        let ca = params.self_signed(&key).map_err(Error::CaCertificate)?;
        let issuer = Issuer::new(params, key);
        let names = vec![
            "localhost".to_string(),
            "kubernetes".into(),
            "kubernetes.default".into(),
            "kubernetes.default.svc".into(),
            "kubernetes.default.svc.cluster.local".into(),
            "127.0.0.1".into(),
            ip.to_string(),
        ];
        let serving = sign(&issuer, CertificateParams::new(names).map_err(Error::Params)?)?;
        Ok(Pki { ca_pem: ca.pem(), issuer, serving })
    }

    /// The CA's private key, PKCS#8 PEM (kubeadm's `ca.key`, for `--cluster-signing-key-file`).
    pub fn ca_key_pem(&self) -> String {
        self.issuer.key().serialize_pem()
    }

    /// A client certificate for `user` in `groups` (subject CN and O, as kube-apiserver reads them).
    pub fn client_credentials(&self, user: &str, groups: &[&str]) -> Result<Credentials, Error> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(Error::Params)?;
        params.distinguished_name.push(DnType::CommonName, user);
        for group in groups {
            params.distinguished_name.push(DnType::OrganizationName, *group);
        }
        sign(&self.issuer, params)
    }

    /// The TLS config of the server: our serving certificate; client certificates signed by our
    /// CA are verified when presented, and bearer tokens serve clients without one.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, Error> {
        self.server_config_trusting(&self.ca_pem)
    }

    /// [`Pki::server_config`] verifying client certificates against another CA (an aggregated
    /// API server trusts kube-apiserver's front-proxy CA).
    pub fn server_config_trusting(&self, client_ca_pem: &str) -> Result<Arc<ServerConfig>, Error> {
        let provider = crate::client::tls::crypto_provider();
        let mut roots = rustls::RootCertStore::empty();
        for cert in pem_certs(client_ca_pem)? {
            roots.add(cert)?;
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .allow_unauthenticated()
            .build()?;
        let key = PrivateKeyDer::from_pem_slice(self.serving.key_pem.as_bytes())?;
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_single_cert(pem_certs(&self.serving.cert_pem)?, key)?;
        Ok(Arc::new(config))
    }
}

fn sign(issuer: &Issuer<'static, KeyPair>, params: CertificateParams) -> Result<Credentials, Error> {
    let key = KeyPair::generate().map_err(Error::Key)?;
    let cert = params.signed_by(&key, issuer).map_err(Error::Certificate)?;
    Ok(Credentials { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
}

fn pem_certs(pem: &str) -> Result<Vec<CertificateDer<'static>>, Error> {
    Ok(CertificateDer::pem_slice_iter(pem.as_bytes()).collect::<Result<_, _>>()?)
}

/// Bearer tokens the server accepts: static ones and those issued by the TokenRequest API.
#[derive(Default)]
pub struct Tokens {
    tokens: Mutex<HashMap<String, (UserInfo, Option<SystemTime>)>>,
}

impl Tokens {
    /// Accepts `token` for `user` until `expires`; expired tokens are forgotten meanwhile, so
    /// the table does not grow with every TokenRequest.
    pub fn add(&self, token: &str, user: UserInfo, expires: Option<SystemTime>) {
        let now = SystemTime::now();
        let mut tokens = self.tokens.lock();
        tokens.retain(|_, (_, expiry)| expiry.is_none_or(|at| at > now));
        tokens.insert(token.to_string(), (user, expires));
    }

    /// A new random token for `user`, valid for `lifetime`.
    pub fn issue(&self, user: UserInfo, lifetime: Duration) -> (String, SystemTime) {
        let token = format!("{:016x}{:016x}{:016x}", crate::random::u64(), crate::random::u64(), crate::random::u64());
        let expires = SystemTime::now() + lifetime;
        self.add(&token, user, Some(expires));
        (token, expires)
    }

    /// The user a token stands for, unless it is unknown or expired.
    pub fn lookup(&self, token: &str) -> Option<UserInfo> {
        let tokens = self.tokens.lock();
        let (user, expires) = tokens.get(token)?;
        match expires {
            Some(at) if *at <= SystemTime::now() => None,
            _ => Some(user.clone()),
        }
    }
}

/// The user a request authenticates as, from its verified client certificate or its bearer token.
pub fn authenticate(
    peer_certificates: &[CertificateDer<'static>],
    authorization: Option<&str>,
    tokens: &Tokens,
) -> Option<UserInfo> {
    if let Some(cert) = peer_certificates.first() {
        let subject = x509::subject(cert).ok()?;
        let groups: Vec<&str> = subject.organizations.iter().map(String::as_str).collect();
        return Some(UserInfo::new(&subject.common_name, &groups));
    }
    let token = authorization?.strip_prefix("Bearer ")?.trim();
    tokens.lookup(token)
}

/// The user of a legacy service-account token (a JWT from a token Secret), as kube-apiserver's
/// `--service-account-key-file` authenticator with `--service-account-lookup=true` (the
/// default) decides it: signed by `key` with the legacy issuer (`JWTTokenAuthenticator`), its
/// claims consistent, and its Secret and ServiceAccount still there and unchanged
/// (`legacyValidator`); a Secret labelled `kubernetes.io/legacy-token-invalid-since` is refused
/// (`LegacyServiceAccountTokenCleanUp`).
pub fn authenticate_legacy_token(
    authorization: Option<&str>,
    key: &crate::jwt::PublicKey,
    store: &crate::sandbox::storage::store::Store,
) -> Option<UserInfo> {
    use crate::jwt;
    let token = authorization?.strip_prefix("Bearer ")?.trim();
    let unverified = jwt::decode_unverified(token).ok()?;
    if unverified.claims.get("iss").and_then(|v| v.as_str()) != Some(jwt::LEGACY_ISSUER) {
        return None;
    }
    let claims = jwt::verify(token, key).ok()?.claims;
    let claim = |name: &str| claims.get(name).and_then(|v| v.as_str()).filter(|v| !v.is_empty());
    let namespace = claim(jwt::NAMESPACE_CLAIM)?;
    let secret_name = claim(jwt::SECRET_NAME_CLAIM)?;
    let account_name = claim(jwt::SERVICE_ACCOUNT_NAME_CLAIM)?;
    let account_uid = claim(jwt::SERVICE_ACCOUNT_UID_CLAIM)?;
    if claim("sub")? != jwt::service_account_username(namespace, account_name) {
        return None;
    }
    let secret = store.get("secrets", namespace, secret_name)?;
    let stored_token = secret["data"]["token"].as_str().and_then(|t| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(t).ok()
    });
    if !secret["metadata"]["deletionTimestamp"].is_null() || stored_token.as_deref() != Some(token.as_bytes()) {
        return None;
    }
    let account = store.get("serviceaccounts", namespace, account_name)?;
    if !account["metadata"]["deletionTimestamp"].is_null() || account["metadata"]["uid"].as_str() != Some(account_uid) {
        return None;
    }
    mark_last_used(store, &secret);
    if !secret["metadata"]["labels"][INVALID_SINCE_LABEL].is_null() {
        return None;
    }
    Some(UserInfo {
        name: jwt::service_account_username(namespace, account_name),
        uid: account_uid.to_string(),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated".into(),
        ],
    })
}

/// The user of a bootstrap token (`<id>.<secret>`), as kube-apiserver's
/// `--enable-bootstrap-token-auth` authenticator (plugin/pkg/auth/authenticator/token/bootstrap)
/// decides it: the Secret `kube-system/bootstrap-token-<id>` of type
/// `bootstrap.kubernetes.io/token`, not being deleted, with this secret and ID, unexpired, with
/// `usage-bootstrap-authentication: "true"`; user `system:bootstrap:<id>`, groups
/// `system:bootstrappers` and the valid `auth-extra-groups`, sorted.
pub fn authenticate_bootstrap_token(
    authorization: Option<&str>,
    store: &crate::sandbox::storage::store::Store,
) -> Option<UserInfo> {
    let token = authorization?.strip_prefix("Bearer ")?.trim();
    let (id, secret) = token.split_once('.')?;
    let token_char = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if id.len() != 6 || secret.len() != 16 || !id.bytes().chain(secret.bytes()).all(token_char) {
        return None;
    }
    let stored = store.get("secrets", "kube-system", &format!("bootstrap-token-{id}"))?;
    let data = |key: &str| -> String {
        use base64::Engine;
        let value = stored["data"][key].as_str().unwrap_or_default();
        let bytes = base64::engine::general_purpose::STANDARD.decode(value).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    let usable = stored["metadata"]["deletionTimestamp"].is_null()
        && stored["type"] == "bootstrap.kubernetes.io/token"
        && same_secret(data("token-secret").as_bytes(), secret.as_bytes())
        && data("token-id") == id
        && !expired(&data("expiration"))
        && data("usage-bootstrap-authentication") == "true";
    if !usable {
        return None;
    }
    let mut groups = vec!["system:bootstrappers".to_string()];
    let extra = data("auth-extra-groups");
    for group in extra.split(',').filter(|_| !extra.is_empty()) {
        if !valid_bootstrap_group(group) {
            return None;
        }
        groups.push(group.to_string());
    }
    groups.sort();
    groups.dedup();
    let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
    Some(UserInfo::new(&format!("system:bootstrap:{id}"), &groups))
}

/// A comparison whose time does not depend on where the secrets differ (`subtle.ConstantTimeCompare`).
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// `GetExpiration`'s verdict: an unparseable expiration counts as expired.
fn expired(expiration: &str) -> bool {
    if expiration.is_empty() {
        return false;
    }
    let strict = expiration.len() > 19 && expiration.as_bytes()[10] == b'T';
    match expiration.parse::<jiff::Timestamp>() {
        Ok(at) if strict => at <= jiff::Timestamp::now(),
        _ => true,
    }
}

/// `BootstrapGroupPattern`: `system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]`.
fn valid_bootstrap_group(group: &str) -> bool {
    let Some(rest) = group.strip_prefix("system:bootstrappers:") else { return false };
    let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b':' || b == b'-';
    let last_ok = rest.bytes().last().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    last_ok && rest.len() <= 256 && rest.bytes().all(allowed)
}

const LAST_USED_LABEL: &str = "kubernetes.io/legacy-token-last-used";
const INVALID_SINCE_LABEL: &str = "kubernetes.io/legacy-token-invalid-since";

/// Legacy token tracking: a used token's Secret is labelled with the day of use (UTC), written
/// at most once a day (unless already labelled today or, across a clock skew, tomorrow).
fn mark_last_used(store: &crate::sandbox::storage::store::Store, secret: &serde_json::Value) {
    let today = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC).date();
    let day = |d: jiff::civil::Date| d.strftime("%Y-%m-%d").to_string();
    let current_days = [Some(day(today)), today.tomorrow().ok().map(day)];
    let last_used = secret["metadata"]["labels"][LAST_USED_LABEL].as_str().map(str::to_string);
    if last_used.is_some() && current_days.contains(&last_used) {
        return;
    }
    let meta = &secret["metadata"];
    let (namespace, name, uid) = (meta["namespace"].as_str(), meta["name"].as_str(), meta["uid"].clone());
    let (Some(namespace), Some(name)) = (namespace, name) else { return };
    let _ = store.write::<_, Error>(|txn| {
        let Some(current) = txn.get("secrets", namespace, name).filter(|c| c["metadata"]["uid"] == uid) else {
            return Ok(());
        };
        let mut updated = (*current).clone();
        updated["metadata"]["labels"][LAST_USED_LABEL] = day(today).into();
        txn.put("secrets", updated);
        Ok(())
    });
}

/// A client config for `server`, trusting `ca_pem` and presenting `credentials` (neither for a
/// plain-HTTP server).
pub fn rest_config(
    server: &str,
    ca_pem: Option<&str>,
    credentials: Option<&Credentials>,
    source: String,
) -> RestConfig {
    let certs = |pem: &str| CertificateDer::pem_slice_iter(pem.as_bytes()).flatten().collect::<Vec<_>>();
    let identity = credentials.map(|c| ClientIdentity {
        cert_chain: certs(&c.cert_pem),
        key: PrivateKeyDer::from_pem_slice(c.key_pem.as_bytes()).expect("generated key"),
    });
    RestConfig {
        server: server.to_string(),
        tls: TlsSettings { ca_certs: ca_pem.map(certs), client_identity: identity, ..TlsSettings::default() },
        auth: Auth::None,
        source,
    }
}

/// Writes what kubeadm leaves in /etc/kubernetes for a controller manager: the admin's kubeconfig
/// at `path` and, beside it, `controller-manager.conf`, the service-account key `sa.key` (for
/// `--service-account-private-key-file`) and the CA `ca.crt` (for `--root-ca-file` /
/// `--client-ca-file`) with its key `ca.key` (for `--cluster-signing-{cert,key}-file`). Returns
/// both kubeconfig paths.
#[allow(clippy::too_many_arguments)]
pub fn write_kubeadm_files(
    path: &Path,
    server: &str,
    ca_pem: &str,
    ca_key_pem: &str,
    admin: &Credentials,
    controller_manager: &Credentials,
    service_account_key_pem: &str,
) -> Result<(PathBuf, PathBuf), Error> {
    use crate::sandbox::server::{ADMIN_USER, CONTROLLER_MANAGER_USER};
    write_kubeconfig(path, server, ca_pem, ADMIN_USER, Some(admin), None)?;
    let kcm = path.with_file_name("controller-manager.conf");
    write_kubeconfig(&kcm, server, ca_pem, CONTROLLER_MANAGER_USER, Some(controller_manager), None)?;
    write_private(&path.with_file_name("sa.key"), service_account_key_pem.as_bytes())?;
    let ca = path.with_file_name("ca.crt");
    std::fs::write(&ca, ca_pem).map_err(|source| Error::WriteCa { path: ca.clone(), source })?;
    write_private(&path.with_file_name("ca.key"), ca_key_pem.as_bytes())?;
    Ok((path.to_path_buf(), kcm))
}

/// Writes a kubeconfig with embedded credentials for one user.
pub fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca_pem: &str,
    user: &str,
    credentials: Option<&Credentials>,
    token: Option<&str>,
) -> Result<(), Error> {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut user_entry = json!({});
    if let Some(c) = credentials {
        user_entry["client-certificate-data"] = b64(&c.cert_pem).into();
        user_entry["client-key-data"] = b64(&c.key_pem).into();
    }
    if let Some(t) = token {
        user_entry["token"] = t.into();
    }
    let mut cluster = json!({"server": server});
    if server.starts_with("https://") {
        cluster["certificate-authority-data"] = b64(ca_pem).into();
    }
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "sandbox", "cluster": cluster}],
        "users": [{"name": user, "user": user_entry}],
        "contexts": [{"name": format!("{user}@sandbox"), "context": {"cluster": "sandbox", "user": user}}],
        "current-context": format!("{user}@sandbox"),
    });
    let text = serde_yaml_ng::to_string(&config)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| Error::Write { path: dir.to_path_buf(), source })?;
    }
    write_private(path, text.as_bytes())
}

/// Writes a file readable by its owner only (it holds private keys).
pub fn write_private(path: &Path, contents: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| Error::Write { path: path.to_path_buf(), source })?;
    file.write_all(contents).map_err(|source| Error::Write { path: path.to_path_buf(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_certificates_name_user_and_groups() {
        let pki = Pki::generate("127.0.0.1".parse().unwrap()).unwrap();
        let creds = pki.client_credentials("kubernetes-admin", &["system:masters"]).unwrap();
        let certs = pem_certs(&creds.cert_pem).unwrap();
        let user = authenticate(&certs, None, &Tokens::default()).unwrap();
        assert_eq!(user.name, "kubernetes-admin");
        assert!(user.is_master());
        assert!(user.groups.contains(&"system:authenticated".to_string()));
    }

    #[test]
    fn legacy_tokens_authenticate_while_their_secret_and_account_match() {
        use crate::jwt;
        use base64::Engine;
        let key_pem = KeyPair::generate().unwrap().serialize_pem();
        let key = jwt::SigningKey::from_pem(key_pem.as_bytes()).unwrap();
        let token = jwt::sign(&key, &jwt::legacy_claims("ns", "robot", "sa-uid", "robot-token")).unwrap();
        let store = crate::sandbox::storage::store::Store::new(100);
        let put = |storage: &'static str, object: serde_json::Value| {
            store
                .write::<_, String>(|txn| {
                    txn.put(storage, object);
                    Ok(())
                })
                .unwrap();
        };
        put("serviceaccounts", json!({"metadata": {"name": "robot", "namespace": "ns", "uid": "sa-uid"}}));
        let encoded = base64::engine::general_purpose::STANDARD.encode(&token);
        put(
            "secrets",
            json!({"metadata": {"name": "robot-token", "namespace": "ns", "uid": "s-uid"},
            "type": "kubernetes.io/service-account-token", "data": {"token": encoded}}),
        );
        let bearer = format!("Bearer {token}");
        let user = authenticate_legacy_token(Some(&bearer), key.public_key(), &store).expect("authenticated");
        assert_eq!(user.name, "system:serviceaccount:ns:robot");
        assert_eq!(user.groups, ["system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"]);
        let secret = store.get("secrets", "ns", "robot-token").unwrap();
        assert!(secret["metadata"]["labels"][LAST_USED_LABEL].is_string(), "use is tracked");

        let other = jwt::SigningKey::from_pem(KeyPair::generate().unwrap().serialize_pem().as_bytes()).unwrap();
        assert!(authenticate_legacy_token(Some(&bearer), other.public_key(), &store).is_none(), "another key");
        let mut labelled = (*secret).clone();
        labelled["metadata"]["labels"][INVALID_SINCE_LABEL] = "2024-01-01".into();
        put("secrets", labelled);
        assert!(authenticate_legacy_token(Some(&bearer), key.public_key(), &store).is_none(), "invalidated");
        put("serviceaccounts", json!({"metadata": {"name": "robot", "namespace": "ns", "uid": "new-uid"}}));
        put("secrets", (*secret).clone());
        assert!(authenticate_legacy_token(Some(&bearer), key.public_key(), &store).is_none(), "account recreated");
    }

    #[test]
    fn tokens_authenticate_until_they_expire() {
        let tokens = Tokens::default();
        tokens.add("static", UserInfo::new("alice", &[]), None);
        assert_eq!(authenticate(&[], Some("Bearer static"), &tokens).unwrap().name, "alice");
        assert!(authenticate(&[], Some("Bearer nope"), &tokens).is_none());
        assert!(authenticate(&[], None, &tokens).is_none());
        tokens.add("old", UserInfo::new("bob", &[]), Some(SystemTime::now() - Duration::from_secs(1)));
        assert!(tokens.lookup("old").is_none());
        let (fresh, _) = tokens.issue(UserInfo::new("carol", &[]), Duration::from_secs(60));
        assert_eq!(tokens.lookup(&fresh).unwrap().name, "carol");
    }

    #[test]
    fn bootstrap_tokens_authenticate_as_their_id() {
        use base64::Engine;
        let b64 = |v: &str| base64::engine::general_purpose::STANDARD.encode(v);
        let store = crate::sandbox::storage::store::Store::default();
        let put = |extra: serde_json::Value| {
            let mut data = json!({"token-id": b64("abcdef"), "token-secret": b64("0123456789abcdef"),
                "usage-bootstrap-authentication": b64("true"),
                "auth-extra-groups": b64("system:bootstrappers:kubeadm:default-node-token")});
            for (k, v) in extra.as_object().unwrap() {
                data[k] = json!(b64(v.as_str().unwrap()));
            }
            store
                .write::<_, ()>(|txn| {
                    txn.put(
                        "secrets",
                        json!({"metadata": {"name": "bootstrap-token-abcdef", "namespace": "kube-system"},
                        "type": "bootstrap.kubernetes.io/token", "data": data}),
                    );
                    Ok(())
                })
                .unwrap();
        };
        put(json!({}));
        let user = authenticate_bootstrap_token(Some("Bearer abcdef.0123456789abcdef"), &store).expect("a user");
        assert_eq!(user.name, "system:bootstrap:abcdef");
        assert_eq!(
            user.groups,
            ["system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token", "system:authenticated"]
        );
        assert!(authenticate_bootstrap_token(Some("Bearer abcdef.0123456789abcdee"), &store).is_none());
        put(json!({"expiration": "2020-01-01T00:00:00Z"}));
        assert!(authenticate_bootstrap_token(Some("Bearer abcdef.0123456789abcdef"), &store).is_none(), "expired");
        put(json!({"usage-bootstrap-authentication": "false"}));
        assert!(authenticate_bootstrap_token(Some("Bearer abcdef.0123456789abcdef"), &store).is_none());
        put(json!({"auth-extra-groups": "system:masters"}));
        assert!(authenticate_bootstrap_token(Some("Bearer abcdef.0123456789abcdef"), &store).is_none());
    }
}
