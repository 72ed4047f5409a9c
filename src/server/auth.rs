//! Delegated authentication of requests to the secure port, as upstream's
//! `DelegatingAuthenticationOptions` builds it: front-proxy request headers, then client
//! certificates, then bearer tokens reviewed by the API server, the first that succeeds
//! winning. A request with no credentials is `system:anonymous`; a request whose credentials
//! all fail is refused (401), even on the always-allowed paths.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, UnixTime};

use super::cache::TtlCache;
use super::http::Request;
use crate::client::{Api, Client, ClientOptions, PostParams, config};
use crate::flags::AuthenticationOptions;

/// The user of requests without credentials.
pub const ANONYMOUS: &str = "system:anonymous";
const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
const ALL_AUTHENTICATED: &str = "system:authenticated";
/// How long one TokenReview or SubjectAccessReview may take (upstream's client timeout).
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// Who is calling, as upstream's `user.Info`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    pub fn anonymous() -> User {
        User { name: ANONYMOUS.into(), groups: vec![ALL_UNAUTHENTICATED.into()], ..User::default() }
    }

    /// Adds `system:authenticated` unless the user is anonymous or already in one of the two
    /// catch-all groups (upstream's `AuthenticatedGroupAdder`).
    fn with_authenticated_group(mut self) -> User {
        let catch_all = self.groups.iter().any(|g| g == ALL_AUTHENTICATED || g == ALL_UNAUTHENTICATED);
        if self.name != ANONYMOUS && !catch_all {
            self.groups.push(ALL_AUTHENTICATED.into());
        }
        self
    }
}

/// What one authenticator made of a request.
enum Outcome {
    /// These credentials name this user.
    User(User),
    /// The request carries no credentials of this kind.
    NoCredentials,
    /// It carries some, and they are not valid.
    Failed(String),
}

/// The union of the configured authenticators, falling back to anonymous.
pub struct Authenticator {
    request_header: Option<RequestHeader>,
    client_cert: Option<CertVerifier>,
    tokens: Option<TokenReviewer>,
}

impl Authenticator {
    /// Builds the authenticators the flags configure. The client CA files are read now.
    pub fn new(options: &AuthenticationOptions) -> Result<Authenticator, String> {
        let request_header = match options.requestheader_client_ca_file.as_str() {
            "" => None,
            file => Some(RequestHeader::new(options, CertVerifier::from_file(file)?)),
        };
        let client_cert = match options.client_ca_file.as_str() {
            "" => None,
            file => Some(CertVerifier::from_file(file)?),
        };
        let tokens = delegation_client(&options.kubeconfig, "authentication")?.map(|client| TokenReviewer {
            client,
            ttl: options.token_webhook_cache_ttl,
            cache: TtlCache::new(),
        });
        if tokens.is_none() {
            log::warn!("No authentication-kubeconfig provided, so TokenReview of bearer tokens won't work.");
        }
        if client_cert.is_none() && request_header.is_none() {
            log::warn!("No client-ca-file provided, so client certificate authentication won't work.");
        }
        Ok(Authenticator { request_header, client_cert, tokens })
    }

    /// The certificate authorities whose client certificates are asked for in the handshake.
    pub fn client_cas(&self) -> Vec<CertificateDer<'static>> {
        let header_cas = self.request_header.iter().flat_map(|h| h.verifier.cas.iter());
        header_cas.chain(self.client_cert.iter().flat_map(|v| v.cas.iter())).cloned().collect()
    }

    /// The caller: the first authenticator that accepts the request decides; if none does,
    /// any failure refuses the request, and no credentials at all make it anonymous.
    pub fn authenticate(&self, request: &Request) -> Result<User, String> {
        let mut failures = Vec::new();
        let outcomes = [
            self.request_header.as_ref().map(|h| h.authenticate(request)),
            self.client_cert.as_ref().map(|v| client_certificate_user(v, request)),
            self.tokens.as_ref().map(|t| t.authenticate(request)),
        ];
        for outcome in outcomes.into_iter().flatten() {
            match outcome {
                Outcome::User(user) => return Ok(user.with_authenticated_group()),
                Outcome::Failed(reason) => failures.push(reason),
                Outcome::NoCredentials => {}
            }
        }
        if failures.is_empty() { Ok(User::anonymous()) } else { Err(failures.join(", ")) }
    }
}

/// The client for TokenReviews or SubjectAccessReviews: from `kubeconfig`, else the
/// in-cluster config when running in a pod, else none (upstream's optional remote kubeconfig).
pub fn delegation_client(kubeconfig: &str, purpose: &str) -> Result<Option<Client>, String> {
    let rest = if kubeconfig.is_empty() {
        match config::in_cluster() {
            Ok(rest) => rest,
            Err(e) => {
                if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
                    log::warn!("failed to read in-cluster kubeconfig for delegated {purpose}: {e}");
                }
                return Ok(None);
            }
        }
    } else {
        config::load(Some(Path::new(kubeconfig)), None)
            .map_err(|e| format!("failed to get delegated {purpose} kubeconfig: {e}"))?
    };
    // High limits: this client bounds how fast the secure port can answer (as upstream's).
    let options = ClientOptions { qps: 200.0, burst: 400, timeout: REVIEW_TIMEOUT };
    Client::new(rest, options).map(Some).map_err(|e| format!("delegated {purpose} client: {e}"))
}

/// Verifies client certificate chains against one CA bundle.
struct CertVerifier {
    cas: Vec<CertificateDer<'static>>,
    verifier: Arc<dyn ClientCertVerifier>,
}

impl CertVerifier {
    fn from_file(path: &str) -> Result<CertVerifier, String> {
        let cas = CertificateDer::pem_file_iter(path)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("unable to load client CA file {path}: {e}"))?;
        if cas.is_empty() {
            return Err(format!("unable to load client CA file {path}: no CERTIFICATE block found"));
        }
        let mut roots = rustls::RootCertStore::empty();
        for ca in &cas {
            roots.add(ca.clone()).map_err(|e| format!("unable to load client CA file {path}: {e}"))?;
        }
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), crate::client::tls::crypto_provider())
                .build()
                .map_err(|e| format!("unable to load client CA file {path}: {e}"))?;
        Ok(CertVerifier { cas, verifier })
    }

    /// Checks the request's certificate chain: `None` when it has none.
    fn verify(&self, request: &Request) -> Option<Result<(), String>> {
        let (leaf, intermediates) = request.peer_certificates.split_first()?;
        let result = self.verifier.verify_client_cert(leaf, intermediates, UnixTime::now());
        Some(result.map(|_| ()).map_err(|e| format!("verifying certificate failed: {e}")))
    }
}

/// The x509 authenticator: user = subject common name, groups = organizations.
fn client_certificate_user(verifier: &CertVerifier, request: &Request) -> Outcome {
    match verifier.verify(request) {
        None => Outcome::NoCredentials,
        Some(Err(e)) => Outcome::Failed(e),
        Some(Ok(())) => match crate::x509::subject(&request.peer_certificates[0]) {
            Ok(subject) if subject.common_name.is_empty() => Outcome::NoCredentials,
            Ok(subject) => {
                Outcome::User(User { name: subject.common_name, groups: subject.organizations, ..User::default() })
            }
            Err(e) => Outcome::Failed(format!("reading the client certificate: {e}")),
        },
    }
}

/// The front-proxy authenticator: trusts user headers from clients whose certificate the
/// request-header CA signed (and, when set, whose common name is allowed).
struct RequestHeader {
    verifier: CertVerifier,
    allowed_names: Vec<String>,
    username_headers: Vec<String>,
    uid_headers: Vec<String>,
    group_headers: Vec<String>,
    extra_prefixes: Vec<String>,
}

impl RequestHeader {
    fn new(options: &AuthenticationOptions, verifier: CertVerifier) -> RequestHeader {
        RequestHeader {
            verifier,
            allowed_names: options.requestheader_allowed_names.clone(),
            username_headers: options.requestheader_username_headers.clone(),
            uid_headers: options.requestheader_uid_headers.clone(),
            group_headers: options.requestheader_group_headers.clone(),
            extra_prefixes: options.requestheader_extra_headers_prefix.clone(),
        }
    }

    fn authenticate(&self, request: &Request) -> Outcome {
        match self.verifier.verify(request) {
            None => return Outcome::NoCredentials,
            Some(Err(e)) => return Outcome::Failed(e),
            Some(Ok(())) => {}
        }
        if let Err(e) = self.check_allowed_name(request) {
            return Outcome::Failed(e);
        }
        let name = first_header(request, &self.username_headers);
        if name.is_empty() {
            return Outcome::NoCredentials;
        }
        Outcome::User(User {
            name,
            uid: first_header(request, &self.uid_headers),
            groups: all_headers(request, &self.group_headers),
            extra: extra_headers(request, &self.extra_prefixes),
        })
    }

    fn check_allowed_name(&self, request: &Request) -> Result<(), String> {
        if self.allowed_names.is_empty() {
            return Ok(());
        }
        let cn = crate::x509::subject(&request.peer_certificates[0]).map(|s| s.common_name).unwrap_or_default();
        if self.allowed_names.contains(&cn) {
            Ok(())
        } else {
            Err(format!("x509: subject with cn={cn} is not in the allowed list"))
        }
    }
}

/// The first non-empty value among `names` (each header's first occurrence, as Go's `Get`).
fn first_header(request: &Request, names: &[String]) -> String {
    names.iter().filter_map(|n| request.header(n)).find(|v| !v.is_empty()).unwrap_or_default().to_string()
}

/// Every non-empty value of every header in `names`, in order.
fn all_headers(request: &Request, names: &[String]) -> Vec<String> {
    let values = names.iter().flat_map(|name| {
        request.headers.iter().filter(move |(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone())
    });
    values.filter(|v| !v.is_empty()).collect()
}

/// `X-Remote-Extra-<key>` headers: lower-cased, percent-decoded keys to their values.
fn extra_headers(request: &Request, prefixes: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for prefix in prefixes.iter().map(|p| p.to_ascii_lowercase()) {
        for (name, value) in &request.headers {
            let lower = name.to_ascii_lowercase();
            if let Some(key) = lower.strip_prefix(&prefix) {
                extra.entry(super::http::percent_decode(key)).or_default().push(value.clone());
            }
        }
    }
    extra
}

/// Bearer tokens, checked with TokenReviews; answers are cached for the TTL.
struct TokenReviewer {
    client: Client,
    ttl: Duration,
    /// By SHA-256 of the token, so that the cache holds no usable secrets.
    cache: TtlCache<Option<User>>,
}

impl TokenReviewer {
    fn authenticate(&self, request: &Request) -> Outcome {
        let Some(token) = bearer_token(request) else { return Outcome::NoCredentials };
        let key = token_key(token);
        let answer = match self.cache.get(&key) {
            Some(answer) => answer,
            None => match self.review(token) {
                Ok(answer) => {
                    self.cache.insert(key, answer.clone(), self.ttl);
                    answer
                }
                Err(e) => return Outcome::Failed(e),
            },
        };
        match answer {
            Some(user) => Outcome::User(user),
            None => Outcome::Failed("invalid bearer token".into()),
        }
    }

    /// The user the API server says the token belongs to; `None` when it is not valid.
    fn review(&self, token: &str) -> Result<Option<User>, String> {
        let review = TokenReview {
            spec: TokenReviewSpec { token: Some(token.to_string()), audiences: None },
            ..TokenReview::default()
        };
        let answer = Api::<TokenReview>::all(&self.client)
            .create(&review, &PostParams::default())
            .map_err(|e| format!("token review: {e}"))?;
        let status = answer.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            if let Some(error) = status.error.filter(|e| !e.is_empty()) {
                log::debug!("token review refused a token: {error}");
            }
            return Ok(None);
        }
        let user = status.user.unwrap_or_default();
        Ok(Some(User {
            name: user.username.unwrap_or_default(),
            uid: user.uid.unwrap_or_default(),
            groups: user.groups.unwrap_or_default(),
            extra: user.extra.unwrap_or_default(),
        }))
    }
}

/// The token of an `Authorization: Bearer <token>` header (upstream's `bearertoken`).
fn bearer_token(request: &Request) -> Option<&str> {
    let header = request.header("Authorization")?.trim();
    let mut parts = header.splitn(3, ' ');
    let (scheme, token) = (parts.next()?, parts.next()?);
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn token_key(token: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(headers: &[(&str, &str)]) -> Request {
        Request {
            method: "GET".into(),
            path: "/metrics".into(),
            query: Vec::new(),
            headers: headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(),
            body: Vec::new(),
            peer_certificates: Vec::new(),
            remote: "127.0.0.1:1".parse().unwrap(),
        }
    }

    #[test]
    fn bearer_tokens_are_read_like_upstream() {
        assert_eq!(bearer_token(&request(&[("Authorization", "Bearer abc")])), Some("abc"));
        assert_eq!(bearer_token(&request(&[("authorization", "bearer abc extra")])), Some("abc"));
        assert_eq!(bearer_token(&request(&[("Authorization", "Bearer  abc")])), None);
        assert_eq!(bearer_token(&request(&[("Authorization", "Basic abc")])), None);
        assert_eq!(bearer_token(&request(&[("Authorization", "Bearer")])), None);
        assert_eq!(bearer_token(&request(&[])), None);
    }

    #[test]
    fn front_proxy_headers_map_to_user_groups_and_extra() {
        let r = request(&[
            ("X-Remote-User", ""),
            ("X-Proxy-User", "alice"),
            ("X-Remote-Group", "a"),
            ("x-remote-group", "b"),
            ("X-Remote-Extra-Scopes", "s1"),
            ("X-Remote-Extra-Key%2fwith%2fslash", "v"),
        ]);
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(first_header(&r, &names(&["x-remote-user", "x-proxy-user"])), "alice");
        assert_eq!(all_headers(&r, &names(&["x-remote-group"])), ["a", "b"]);
        let extra = extra_headers(&r, &names(&["X-Remote-Extra-"]));
        assert_eq!(extra["scopes"], ["s1"]);
        assert_eq!(extra["key/with/slash"], ["v"]);
    }

    #[test]
    fn authenticated_group_is_added_once() {
        let user = User { name: "alice".into(), groups: vec!["dev".into()], ..User::default() };
        assert_eq!(user.with_authenticated_group().groups, ["dev", ALL_AUTHENTICATED]);
        let already = User { name: "bob".into(), groups: vec![ALL_AUTHENTICATED.into()], ..User::default() };
        assert_eq!(already.with_authenticated_group().groups, [ALL_AUTHENTICATED]);
        assert_eq!(User::anonymous().with_authenticated_group().groups, [ALL_UNAUTHENTICATED]);
    }

    #[test]
    fn no_authenticators_means_anonymous() {
        let authn = Authenticator { request_header: None, client_cert: None, tokens: None };
        assert_eq!(authn.authenticate(&request(&[("Authorization", "Bearer x")])).unwrap(), User::anonymous());
    }

    #[test]
    fn token_cache_keys_are_hashes() {
        let key = token_key("secret");
        assert_eq!(key.len(), 64);
        assert!(!key.contains("secret"));
    }
}
