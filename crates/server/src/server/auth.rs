//! Delegated authentication of requests to the secure port, as upstream's
//! `DelegatingAuthenticationOptions` builds it: front-proxy request headers, then client
//! certificates, then bearer tokens reviewed by the API server, the first that succeeds
//! winning. A request with no credentials is `system:anonymous`; a request whose credentials
//! all fail is refused (401), even on the always-allowed paths.
//!
//! CA bundles not given as files are looked up in the `kube-system/extension-apiserver-authentication`
//! ConfigMap that kube-apiserver publishes (unless `--authentication-skip-lookup`), and kept
//! up to date by re-reading it every minute ([`Authenticator::refresh`]).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::RwLock;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, UnixTime};

use super::cache::TtlCache;
use super::http::Request;
use crate::apimachinery::errors::BoxError;
use crate::client::{Api, Client, ClientOptions, PostParams, config};
use crate::server::options::AuthenticationOptions;

/// The user of requests without credentials.
pub const ANONYMOUS: &str = "system:anonymous";
const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
const ALL_AUTHENTICATED: &str = "system:authenticated";
/// How long one TokenReview or SubjectAccessReview may take (upstream's client timeout).
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// The namespace of the ConfigMap where kube-apiserver publishes how it authenticates clients
/// (upstream's `authenticationConfigMapNamespace`).
pub const AUTHENTICATION_CONFIGMAP_NAMESPACE: &str = "kube-system";
/// The name of that ConfigMap (upstream's `authenticationConfigMapName`).
pub const AUTHENTICATION_CONFIGMAP: &str = "extension-apiserver-authentication";
/// How often the ConfigMap is read again (upstream's `FileRefreshDuration`, the periodic
/// re-check of `ConfigMapCAController`; upstream also watches it, we only re-read).
pub const LOOKUP_REFRESH: Duration = Duration::from_secs(60);
const CLIENT_CA_KEY: &str = "client-ca-file";
const REQUEST_HEADER_CA_KEY: &str = "requestheader-client-ca-file";
const ALLOWED_NAMES_KEY: &str = "requestheader-allowed-names";
const USERNAME_HEADERS_KEY: &str = "requestheader-username-headers";
const UID_HEADERS_KEY: &str = "requestheader-uid-headers";
const GROUP_HEADERS_KEY: &str = "requestheader-group-headers";
const EXTRA_HEADERS_PREFIX_KEY: &str = "requestheader-extra-headers-prefix";

/// Who is calling, as upstream's `user.Info`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct User {
    /// The user name (`system:serviceaccount:kube-system:foo`, a certificate's CommonName).
    pub name: String,
    /// The user's UID; may be empty.
    pub uid: String,
    /// The groups the user is in.
    pub groups: Vec<String>,
    /// Further attributes (TokenReview `extra`, `X-Remote-Extra-*` headers).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    /// `system:anonymous` in `system:unauthenticated`: a request without credentials.
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
    Failed(Rejection),
}

/// Why the configured authenticators cannot be set up (the secure port then does not start).
#[derive(Debug, thiserror::Error)]
pub enum AuthenticatorError {
    /// The TokenReview client cannot be set up.
    #[error("{0}")]
    Delegation(#[from] DelegationError),
    /// `--client-ca-file` or `--requestheader-client-ca-file` is unusable.
    #[error("{0}")]
    CaFile(#[from] CaFileError),
    /// The front-proxy configuration could not be read from the ConfigMap, and that is not tolerated.
    #[error("unable to load configmap based request-header-client-ca-file: {0}")]
    RequestHeaderLookup(#[source] LookupError),
}

/// Why the client for TokenReviews or SubjectAccessReviews cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum DelegationError {
    /// The kubeconfig is unusable.
    #[error("failed to get delegated {purpose} kubeconfig: {source}")]
    Kubeconfig {
        /// `authentication` or `authorization`.
        purpose: String,
        /// What is wrong with it (boxed: a kubeconfig's error is large, and rare).
        #[source]
        source: Box<config::ConfigError>,
    },
    /// The client cannot be built from it.
    #[error("delegated {purpose} client: {source}")]
    Client {
        /// `authentication` or `authorization`.
        purpose: String,
        /// Why not.
        #[source]
        source: crate::client::Error,
    },
}

/// A `--client-ca-file` or `--requestheader-client-ca-file` that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CaFileError {
    /// The file cannot be read.
    #[error("unable to load client CA file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
    /// Its bundle is unusable.
    #[error("unable to load client CA file {path}: {source}")]
    Bundle {
        /// The file.
        path: String,
        /// What is wrong with the bundle.
        #[source]
        source: CaBundleError,
    },
}

/// A CA bundle (from a file or the ConfigMap) that cannot verify client certificates.
#[derive(Debug, thiserror::Error)]
pub enum CaBundleError {
    /// The ConfigMap has no bundle under the key.
    #[error("missing content for CA bundle {name:?}")]
    Missing {
        /// The bundle's name.
        name: String,
    },
    /// The PEM is malformed.
    #[error("CA bundle {name:?}: {source}")]
    Pem {
        /// The bundle's name.
        name: String,
        /// The parser's error.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// No certificate in it.
    #[error("CA bundle {name:?}: no CERTIFICATE block found")]
    Empty {
        /// The bundle's name.
        name: String,
    },
    /// A certificate cannot be a trust anchor.
    #[error("CA bundle {name:?}: {source}")]
    Root {
        /// The bundle's name.
        name: String,
        /// Why rustls refused it.
        #[source]
        source: rustls::Error,
    },
    /// No verifier can be built from it.
    #[error("CA bundle {name:?}: {source}")]
    Verifier {
        /// The bundle's name.
        name: String,
        /// Why not.
        #[source]
        source: rustls::server::VerifierBuilderError,
    },
}

/// Why the authentication ConfigMap could not be read or its front-proxy settings taken in.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// The ConfigMap could not be read.
    #[error("{0}")]
    Read(#[from] crate::client::Error),
    /// A `requestheader-*` key is not a JSON list of strings.
    #[error("{key}: {source}")]
    HeaderList {
        /// The key.
        key: &'static str,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
}

/// Why a request's credentials were refused (401): every authenticator's reason, joined by
/// `, ` as upstream's union authenticator does.
#[derive(Debug)]
pub struct AuthenticationError {
    rejections: Vec<Rejection>,
}

impl AuthenticationError {
    /// Each refusing authenticator's reason, in the order they ran; never empty.
    pub fn rejections(&self) -> &[Rejection] {
        &self.rejections
    }
}

impl fmt::Display for AuthenticationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, rejection) in self.rejections.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{rejection}")?;
        }
        Ok(())
    }
}

/// The first refusal is the source.
impl std::error::Error for AuthenticationError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.rejections.first().map(|r| r as &(dyn std::error::Error + 'static))
    }
}

/// Why one authenticator refused a request's credentials.
#[derive(Debug, thiserror::Error)]
pub enum Rejection {
    /// The client certificate chain does not verify against the CA.
    #[error("verifying certificate failed: {0}")]
    Certificate(#[source] rustls::Error),
    /// The verified client certificate cannot be read.
    #[error("reading the client certificate: {0}")]
    Subject(#[source] BoxError),
    /// The front proxy's certificate names a proxy that is not allowed.
    #[error("x509: subject with cn={0} is not in the allowed list")]
    ProxyNotAllowed(String),
    /// The TokenReview failed.
    #[error("token review: {0}")]
    TokenReview(#[source] crate::client::Error),
    /// The API server says the token is not valid.
    #[error("invalid bearer token")]
    InvalidToken,
}

/// The union of the configured authenticators, falling back to anonymous.
pub struct Authenticator {
    /// The front-proxy authenticator; none when not configured (or its lookup failed and was
    /// tolerated).
    request_header: RwLock<Option<Arc<RequestHeader>>>,
    /// The client certificate CA: from `--client-ca-file`, or the ConfigMap (none until read).
    client_cert: RwLock<Option<Arc<CertVerifier>>>,
    tokens: Option<TokenReviewer>,
    /// Which parts come from the ConfigMap, and the client to read it with.
    lookup: Option<Lookup>,
    /// Bumped whenever a CA bundle changes, so that the TLS setup can follow.
    generation: AtomicU64,
}

/// The in-cluster lookup of missing authentication configuration.
struct Lookup {
    client: Client,
    client_ca: bool,
    request_header: bool,
}

impl Authenticator {
    /// Builds the authenticators the flags configure: the client CA files are read now, and so
    /// is the ConfigMap for what they leave out (upstream's `DelegatingAuthenticationOptions.ApplyTo`).
    pub fn new(options: &AuthenticationOptions) -> Result<Authenticator, AuthenticatorError> {
        let client = delegation_client(&options.kubeconfig, "authentication")?;
        let client_cert = match options.client_ca_file.as_str() {
            "" => None,
            file => Some(Arc::new(CertVerifier::from_file(file)?)),
        };
        let request_header = match options.requestheader_client_ca_file.as_str() {
            "" => None,
            file => Some(Arc::new(RequestHeader::from_flags(options, CertVerifier::from_file(file)?))),
        };
        let lookup_client_ca = client_cert.is_none() && wants_lookup(options, &client, "client-ca-file", "client");
        let lookup_request_header =
            request_header.is_none() && wants_lookup(options, &client, REQUEST_HEADER_CA_KEY, "request-header client");
        let tokens = client.clone().map(|client| TokenReviewer {
            client,
            ttl: options.token_webhook_cache_ttl,
            cache: TtlCache::new(),
        });
        if tokens.is_none() {
            log::warn!("No authentication-kubeconfig provided, so TokenReview of bearer tokens won't work.");
        }
        let lookup = client.filter(|_| lookup_client_ca || lookup_request_header).map(|client| Lookup {
            client,
            client_ca: lookup_client_ca,
            request_header: lookup_request_header,
        });
        let authn = Authenticator {
            request_header: RwLock::new(request_header),
            client_cert: RwLock::new(client_cert),
            tokens,
            lookup,
            generation: AtomicU64::new(0),
        };
        authn.first_lookup(options.tolerate_lookup_failure)?;
        Ok(authn)
    }

    /// The first read of the ConfigMap. Failing to read the client CA is never fatal (upstream's
    /// `ConfigMapCAController.RunOnce`); failing to read the request-header configuration is,
    /// unless `--authentication-tolerate-lookup-failure`, which then leaves it out for good. A
    /// missing ConfigMap is no failure.
    fn first_lookup(&self, tolerate_failure: bool) -> Result<(), AuthenticatorError> {
        let Some(lookup) = &self.lookup else { return Ok(()) };
        let configmap = read_configmap(&lookup.client).map_err(LookupError::Read);
        if lookup.client_ca {
            log::info!(
                "Starting controller name=\"client-ca::{AUTHENTICATION_CONFIGMAP_NAMESPACE}::{AUTHENTICATION_CONFIGMAP}::{CLIENT_CA_KEY}\""
            );
            match &configmap {
                Ok(configmap) => self.update_client_ca(configmap.as_ref()),
                Err(e) => log::debug!("looking up the client CA: {e}"),
            }
        }
        if !lookup.request_header {
            return Ok(());
        }
        let result = configmap.and_then(|configmap| {
            *self.request_header.write() = Some(Arc::new(RequestHeader::empty()));
            self.update_request_header(configmap.as_ref())
        });
        match result {
            Ok(()) => Ok(()),
            Err(e) if tolerate_failure => {
                *self.request_header.write() = None;
                log::warn!("Error looking up in-cluster authentication configuration: {e}");
                log::warn!(
                    "Continuing without authentication configuration. This may treat all requests as anonymous."
                );
                log::warn!(
                    "To require authentication configuration lookup to succeed, set --authentication-tolerate-lookup-failure=false"
                );
                Ok(())
            }
            Err(e) => Err(AuthenticatorError::RequestHeaderLookup(e)),
        }
    }

    /// Reads the ConfigMap again and takes in what changed; errors keep what was loaded (the
    /// periodic re-check of upstream's `ConfigMapCAController` and
    /// `RequestHeaderAuthRequestController`).
    pub fn refresh(&self) -> Result<(), LookupError> {
        let Some(lookup) = &self.lookup else { return Ok(()) };
        let configmap = read_configmap(&lookup.client)?;
        if lookup.client_ca {
            self.update_client_ca(configmap.as_ref());
        }
        // (A request-header lookup that failed at start and was tolerated stays off.)
        if lookup.request_header {
            self.update_request_header(configmap.as_ref())?;
        }
        Ok(())
    }

    /// Whether the ConfigMap is read at all (and so worth re-reading).
    pub fn looks_up(&self) -> bool {
        self.lookup.is_some()
    }

    /// Changes whenever a CA bundle does.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Takes the client CA from the ConfigMap: a deleted ConfigMap removes it; an empty or
    /// unreadable bundle keeps the last one (upstream's `ConfigMapCAController.loadCABundle`).
    fn update_client_ca(&self, configmap: Option<&ConfigMap>) {
        let name =
            format!("client-ca::{AUTHENTICATION_CONFIGMAP_NAMESPACE}::{AUTHENTICATION_CONFIGMAP}::{CLIENT_CA_KEY}");
        let current = self.client_cert.read().clone();
        match ca_from_configmap(configmap, CLIENT_CA_KEY, &name, current.as_deref()) {
            Ok(CaChange::Same) => {}
            Ok(CaChange::To(verifier)) => {
                log_ca_change(&name, verifier.is_some());
                *self.client_cert.write() = verifier.map(Arc::new);
                self.generation.fetch_add(1, Ordering::SeqCst);
            }
            Err(e) => log::error!("{AUTHENTICATION_CONFIGMAP_NAMESPACE}/{AUTHENTICATION_CONFIGMAP} failed with : {e}"),
        }
    }

    /// Takes the front-proxy CA and header names from the ConfigMap (upstream's
    /// `DynamicRequestHeaderController`): the CA as [`Self::update_client_ca`] does; the header
    /// names, JSON string arrays, are kept when the ConfigMap is missing or one is malformed.
    fn update_request_header(&self, configmap: Option<&ConfigMap>) -> Result<(), LookupError> {
        let name = format!(
            "request-header::{AUTHENTICATION_CONFIGMAP_NAMESPACE}::{AUTHENTICATION_CONFIGMAP}::{REQUEST_HEADER_CA_KEY}"
        );
        let Some(current) = self.request_header.read().clone() else { return Ok(()) };
        let mut next = (*current).clone();
        match ca_from_configmap(configmap, REQUEST_HEADER_CA_KEY, &name, current.verifier.as_deref()) {
            Ok(CaChange::Same) => {}
            Ok(CaChange::To(verifier)) => {
                log_ca_change(&name, verifier.is_some());
                next.verifier = verifier.map(Arc::new);
                self.generation.fetch_add(1, Ordering::SeqCst);
            }
            Err(e) => log::error!("{AUTHENTICATION_CONFIGMAP_NAMESPACE}/{AUTHENTICATION_CONFIGMAP} failed with : {e}"),
        }
        let headers = configmap.map(RequestHeaderNames::from_configmap).transpose();
        let result = match headers {
            Ok(Some(names)) => {
                if names != next.names {
                    log::debug!("Loaded a new request header values for RequestHeaderAuthRequestController");
                }
                next.names = names;
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        *self.request_header.write() = Some(Arc::new(next));
        result
    }

    /// The certificate authorities whose client certificates are asked for in the handshake:
    /// the front-proxy CA and the client CA (upstream's `ApplyClientCert` union).
    pub fn client_cas(&self) -> Vec<CertificateDer<'static>> {
        let mut cas = Vec::new();
        if let Some(verifier) = self.request_header.read().as_ref().and_then(|h| h.verifier.clone()) {
            cas.extend(verifier.cas.iter().cloned());
        }
        if let Some(verifier) = self.client_cert.read().as_ref() {
            cas.extend(verifier.cas.iter().cloned());
        }
        cas
    }

    /// The caller: the first authenticator that accepts the request decides; if none does,
    /// any failure refuses the request, and no credentials at all make it anonymous.
    pub fn authenticate(&self, request: &Request) -> Result<User, AuthenticationError> {
        let mut rejections = Vec::new();
        let (request_header, client_cert) = (self.request_header.read().clone(), self.client_cert.read().clone());
        let outcomes = [
            request_header.map(|h| h.authenticate(request)),
            client_cert.map(|v| client_certificate_user(&v, request)),
            self.tokens.as_ref().map(|t| t.authenticate(request)),
        ];
        for outcome in outcomes.into_iter().flatten() {
            match outcome {
                Outcome::User(user) => return Ok(user.with_authenticated_group()),
                Outcome::Failed(rejection) => rejections.push(rejection),
                Outcome::NoCredentials => {}
            }
        }
        if rejections.is_empty() { Ok(User::anonymous()) } else { Err(AuthenticationError { rejections }) }
    }
}

/// The client for TokenReviews or SubjectAccessReviews: from `kubeconfig`, else the
/// in-cluster config when running in a pod, else none (upstream's optional remote kubeconfig).
pub fn delegation_client(kubeconfig: &str, purpose: &str) -> Result<Option<Client>, DelegationError> {
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
            .map_err(|e| DelegationError::Kubeconfig { purpose: purpose.to_string(), source: Box::new(e) })?
    };
    // High limits: this client bounds how fast the secure port can answer (as upstream's).
    let options = ClientOptions { qps: 200.0, burst: 400, timeout: REVIEW_TIMEOUT };
    Client::new(rest, options)
        .map(Some)
        .map_err(|source| DelegationError::Client { purpose: purpose.to_string(), source })
}

/// Whether to look `what` up in the cluster, warning as upstream does when it cannot be.
fn wants_lookup(options: &AuthenticationOptions, client: &Option<Client>, key: &str, what: &str) -> bool {
    if options.skip_lookup {
        return false;
    }
    if client.is_none() {
        log::warn!(
            "No authentication-kubeconfig provided in order to lookup {key} in configmap/{AUTHENTICATION_CONFIGMAP} in \
             {AUTHENTICATION_CONFIGMAP_NAMESPACE}, so {what} certificate authentication won't work."
        );
        return false;
    }
    true
}

/// The ConfigMap; `None` when it does not exist.
fn read_configmap(client: &Client) -> Result<Option<ConfigMap>, crate::client::Error> {
    match Api::<ConfigMap>::namespaced(client, AUTHENTICATION_CONFIGMAP_NAMESPACE).get(AUTHENTICATION_CONFIGMAP) {
        Ok(configmap) => Ok(Some(configmap)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) if e.is_forbidden() => {
            log::warn!(
                "Unable to get configmap/{AUTHENTICATION_CONFIGMAP} in {AUTHENTICATION_CONFIGMAP_NAMESPACE}.  Usually fixed by \
                 'kubectl create rolebinding -n {AUTHENTICATION_CONFIGMAP_NAMESPACE} ROLEBINDING_NAME \
                 --role=extension-apiserver-authentication-reader --serviceaccount=YOUR_NS:YOUR_SA'"
            );
            Err(e)
        }
        Err(e) => Err(e),
    }
}

/// What a ConfigMap says about one CA bundle, against the one loaded.
#[derive(Debug)]
enum CaChange {
    Same,
    /// A new bundle, or none (the ConfigMap is gone).
    To(Option<CertVerifier>),
}

fn ca_from_configmap(
    configmap: Option<&ConfigMap>,
    key: &str,
    name: &str,
    current: Option<&CertVerifier>,
) -> Result<CaChange, CaBundleError> {
    let Some(configmap) = configmap else {
        return Ok(if current.is_some() { CaChange::To(None) } else { CaChange::Same });
    };
    let bundle = configmap.data.as_ref().and_then(|d| d.get(key)).map(String::as_str).unwrap_or_default();
    if bundle.is_empty() {
        return Err(CaBundleError::Missing { name: name.to_string() });
    }
    let verifier = CertVerifier::from_pem(bundle.as_bytes(), name)?;
    Ok(if current.is_some_and(|c| c.cas == verifier.cas) { CaChange::Same } else { CaChange::To(Some(verifier)) })
}

/// Verifies client certificate chains against one CA bundle.
#[derive(Debug)]
struct CertVerifier {
    cas: Vec<CertificateDer<'static>>,
    verifier: Arc<dyn ClientCertVerifier>,
}

impl CertVerifier {
    fn from_file(path: &str) -> Result<CertVerifier, CaFileError> {
        let pem = std::fs::read(path).map_err(|source| CaFileError::Read { path: path.to_string(), source })?;
        Self::from_pem(&pem, path).map_err(|source| CaFileError::Bundle { path: path.to_string(), source })
    }

    /// From a PEM bundle; `name` says where it came from.
    fn from_pem(pem: &[u8], name: &str) -> Result<CertVerifier, CaBundleError> {
        let name = || name.to_string();
        let cas = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| CaBundleError::Pem { name: name(), source })?;
        if cas.is_empty() {
            return Err(CaBundleError::Empty { name: name() });
        }
        let mut roots = rustls::RootCertStore::empty();
        for ca in &cas {
            roots.add(ca.clone()).map_err(|source| CaBundleError::Root { name: name(), source })?;
        }
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), crate::client::tls::crypto_provider())
                .build()
                .map_err(|source| CaBundleError::Verifier { name: name(), source })?;
        Ok(CertVerifier { cas, verifier })
    }

    /// Checks the request's certificate chain: `None` when it has none.
    fn verify(&self, request: &Request) -> Option<Result<(), Rejection>> {
        let (leaf, intermediates) = request.peer_certificates.split_first()?;
        let result = self.verifier.verify_client_cert(leaf, intermediates, UnixTime::now());
        Some(result.map(|_| ()).map_err(Rejection::Certificate))
    }
}

/// The x509 authenticator: user = subject common name, groups = organizations.
fn client_certificate_user(verifier: &CertVerifier, request: &Request) -> Outcome {
    // Upstream observes every presented certificate's remaining lifetime before verifying it.
    let validity = request.peer_certificates.first().and_then(|c| crate::x509::certificate::certificate_validity(c));
    if let Some((_, not_after)) = validity {
        let remaining = jiff::Timestamp::now().duration_until(not_after);
        super::metrics::client_certificate_remaining(remaining.as_secs_f64());
    }
    match verifier.verify(request) {
        None => Outcome::NoCredentials,
        Some(Err(e)) => Outcome::Failed(e),
        Some(Ok(())) => match crate::x509::subject(&request.peer_certificates[0]) {
            Ok(subject) if subject.common_name.is_empty() => Outcome::NoCredentials,
            Ok(subject) => {
                Outcome::User(User { name: subject.common_name, groups: subject.organizations, ..User::default() })
            }
            Err(e) => Outcome::Failed(Rejection::Subject(e.into())),
        },
    }
}

/// The front-proxy authenticator: trusts user headers from clients whose certificate the
/// request-header CA signed (and, when set, whose common name is allowed).
#[derive(Clone)]
struct RequestHeader {
    /// None while the ConfigMap has given no CA: no certificate is then trusted.
    verifier: Option<Arc<CertVerifier>>,
    names: RequestHeaderNames,
}

/// The header names and allowed proxy names of the front-proxy authenticator.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct RequestHeaderNames {
    allowed_names: Vec<String>,
    username_headers: Vec<String>,
    uid_headers: Vec<String>,
    group_headers: Vec<String>,
    extra_prefixes: Vec<String>,
}

impl RequestHeaderNames {
    /// The `requestheader-*` keys, JSON string arrays; a missing key is an empty list
    /// (upstream's `deserializeStrings`).
    fn from_configmap(configmap: &ConfigMap) -> Result<RequestHeaderNames, LookupError> {
        let list = |key: &'static str| -> Result<Vec<String>, LookupError> {
            match configmap.data.as_ref().and_then(|d| d.get(key)).map(String::as_str).unwrap_or_default() {
                "" => Ok(Vec::new()),
                json => serde_json::from_str(json).map_err(|source| LookupError::HeaderList { key, source }),
            }
        };
        Ok(RequestHeaderNames {
            allowed_names: list(ALLOWED_NAMES_KEY)?,
            username_headers: list(USERNAME_HEADERS_KEY)?,
            uid_headers: list(UID_HEADERS_KEY)?,
            group_headers: list(GROUP_HEADERS_KEY)?,
            extra_prefixes: list(EXTRA_HEADERS_PREFIX_KEY)?,
        })
    }
}

impl RequestHeader {
    fn from_flags(options: &AuthenticationOptions, verifier: CertVerifier) -> RequestHeader {
        RequestHeader {
            verifier: Some(Arc::new(verifier)),
            names: RequestHeaderNames {
                allowed_names: options.requestheader_allowed_names.clone(),
                username_headers: options.requestheader_username_headers.clone(),
                uid_headers: options.requestheader_uid_headers.clone(),
                group_headers: options.requestheader_group_headers.clone(),
                extra_prefixes: options.requestheader_extra_headers_prefix.clone(),
            },
        }
    }

    /// Nothing loaded yet: trusts no certificate.
    fn empty() -> RequestHeader {
        RequestHeader { verifier: None, names: RequestHeaderNames::default() }
    }

    fn authenticate(&self, request: &Request) -> Outcome {
        let Some(verifier) = &self.verifier else { return Outcome::NoCredentials };
        match verifier.verify(request) {
            None => return Outcome::NoCredentials,
            Some(Err(e)) => return Outcome::Failed(e),
            Some(Ok(())) => {}
        }
        if let Err(e) = self.check_allowed_name(request) {
            return Outcome::Failed(e);
        }
        let names = &self.names;
        let name = first_header(request, &names.username_headers);
        if name.is_empty() {
            return Outcome::NoCredentials;
        }
        Outcome::User(User {
            name,
            uid: first_header(request, &names.uid_headers),
            groups: all_headers(request, &names.group_headers),
            extra: extra_headers(request, &names.extra_prefixes),
        })
    }

    fn check_allowed_name(&self, request: &Request) -> Result<(), Rejection> {
        if self.names.allowed_names.is_empty() {
            return Ok(());
        }
        let cn = crate::x509::subject(&request.peer_certificates[0]).map(|s| s.common_name).unwrap_or_default();
        if self.names.allowed_names.contains(&cn) { Ok(()) } else { Err(Rejection::ProxyNotAllowed(cn)) }
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
        let started = std::time::Instant::now();
        let answer = match self.cache.get(&key) {
            Some(answer) => {
                super::metrics::token_cache_request(true, started.elapsed());
                answer
            }
            None => {
                let fetched = super::metrics::token_cache_fetch(|| self.review(token));
                super::metrics::token_cache_request(false, started.elapsed());
                match fetched {
                    Ok(answer) => {
                        self.cache.insert(key, answer.clone(), self.ttl);
                        answer
                    }
                    Err(e) => return Outcome::Failed(Rejection::TokenReview(e)),
                }
            }
        };
        match answer {
            Some(user) => Outcome::User(user),
            None => Outcome::Failed(Rejection::InvalidToken),
        }
    }

    /// The user the API server says the token belongs to; `None` when it is not valid.
    fn review(&self, token: &str) -> Result<Option<User>, crate::client::Error> {
        let review = TokenReview {
            spec: TokenReviewSpec { token: token.to_string(), audiences: None },
            ..TokenReview::default()
        };
        let started = std::time::Instant::now();
        let answer = Api::<TokenReview>::all(&self.client).create(&review, &PostParams::default());
        let code = super::metrics::review_code(answer.as_ref().map(|_| ()).map_err(|e| e.code()));
        super::metrics::delegated_authentication(&code, started.elapsed());
        let answer = answer?;
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

/// Upstream's log lines when a CA bundle from the ConfigMap changes.
fn log_ca_change(name: &str, loaded: bool) {
    if loaded {
        log::info!("Loaded a new CA Bundle and Verifier name={name:?}");
    } else {
        log::info!("Cleared CA bundle, configmap was deleted name={name:?}");
    }
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
        let authn = Authenticator {
            request_header: RwLock::new(None),
            client_cert: RwLock::new(None),
            tokens: None,
            lookup: None,
            generation: AtomicU64::new(0),
        };
        assert_eq!(authn.authenticate(&request(&[("Authorization", "Bearer x")])).unwrap(), User::anonymous());
    }

    fn ca_pem(name: &str) -> String {
        crate::server::certs::self_signed(&[name.to_string()], &[]).unwrap().cert_pem
    }

    fn configmap(data: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            data: Some(data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..ConfigMap::default()
        }
    }

    /// An authenticator that takes both CAs from the ConfigMap, as `first_lookup` sets it up.
    fn looking_up() -> Authenticator {
        Authenticator {
            request_header: RwLock::new(Some(Arc::new(RequestHeader::empty()))),
            client_cert: RwLock::new(None),
            tokens: None,
            lookup: None,
            generation: AtomicU64::new(0),
        }
    }

    #[test]
    fn client_ca_follows_the_configmap() {
        let authn = looking_up();
        let (first, second) = (ca_pem("first"), ca_pem("second"));
        authn.update_client_ca(Some(&configmap(&[(CLIENT_CA_KEY, &first)])));
        assert_eq!(authn.client_cas().len(), 1);
        let generation = authn.generation();
        // The same bundle again changes nothing.
        authn.update_client_ca(Some(&configmap(&[(CLIENT_CA_KEY, &first)])));
        assert_eq!(authn.generation(), generation);
        // An empty or broken bundle keeps the last good one.
        authn.update_client_ca(Some(&configmap(&[])));
        authn.update_client_ca(Some(&configmap(&[(CLIENT_CA_KEY, "not a certificate")])));
        assert_eq!((authn.generation(), authn.client_cas().len()), (generation, 1));
        authn.update_client_ca(Some(&configmap(&[(CLIENT_CA_KEY, &second)])));
        assert!(authn.generation() > generation);
        assert_eq!(authn.client_cas(), certs_of(&second));
        // A deleted ConfigMap stops trusting it.
        authn.update_client_ca(None);
        assert!(authn.client_cert.read().is_none());
    }

    fn certs_of(pem: &str) -> Vec<CertificateDer<'static>> {
        CertificateDer::pem_slice_iter(pem.as_bytes()).collect::<Result<_, _>>().unwrap()
    }

    #[test]
    fn request_header_settings_come_from_json_lists() {
        let authn = looking_up();
        let proxy_ca = ca_pem("front-proxy-ca");
        let full = configmap(&[
            (REQUEST_HEADER_CA_KEY, &proxy_ca),
            (ALLOWED_NAMES_KEY, r#"["front-proxy-client"]"#),
            (USERNAME_HEADERS_KEY, r#"["X-Remote-User"]"#),
            (GROUP_HEADERS_KEY, r#"["X-Remote-Group"]"#),
            (EXTRA_HEADERS_PREFIX_KEY, r#"["X-Remote-Extra-"]"#),
        ]);
        authn.update_request_header(Some(&full)).unwrap();
        let loaded = authn.request_header.read().clone().unwrap();
        assert_eq!(loaded.verifier.as_ref().unwrap().cas, certs_of(&proxy_ca));
        assert_eq!(loaded.names.allowed_names, ["front-proxy-client"]);
        assert_eq!(loaded.names.username_headers, ["X-Remote-User"]);
        assert!(loaded.names.uid_headers.is_empty(), "a missing key is an empty list");
        assert_eq!(authn.client_cas(), certs_of(&proxy_ca));
        // A malformed list is an error and keeps the names loaded before.
        let broken = configmap(&[(REQUEST_HEADER_CA_KEY, &proxy_ca), (USERNAME_HEADERS_KEY, "X-Remote-User")]);
        assert!(authn.update_request_header(Some(&broken)).is_err());
        assert_eq!(authn.request_header.read().as_ref().unwrap().names, loaded.names);
        // Without the ConfigMap the names stay and the CA goes.
        authn.update_request_header(None).unwrap();
        let after = authn.request_header.read().clone().unwrap();
        assert!(after.verifier.is_none());
        assert_eq!(after.names, loaded.names);
    }

    #[test]
    fn a_front_proxy_without_a_ca_trusts_nobody() {
        let mut r = request(&[("X-Remote-User", "root")]);
        r.peer_certificates = certs_of(&ca_pem("anyone"));
        assert!(matches!(RequestHeader::empty().authenticate(&r), Outcome::NoCredentials));
    }

    #[test]
    fn token_cache_keys_are_hashes() {
        let key = token_key("secret");
        assert_eq!(key.len(), 64);
        assert!(!key.contains("secret"));
    }
}
