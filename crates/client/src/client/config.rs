//! Where the API server is and how to talk to it: kubeconfig files and in-cluster config,
//! loaded the way client-go does it (`clientcmd.BuildConfigFromFlags`).
//!
//! Everything is validated up front so that a bad kubeconfig fails at startup with one line
//! naming the file and the field, not with a TLS error on the first request.

mod in_cluster;
mod kubeconfig;
mod pem;
mod token_file;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use parking_lot::Mutex;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

pub use in_cluster::{in_cluster, in_cluster_from};
pub use kubeconfig::{FieldError, KubeconfigError};
pub use pem::PemError;
pub use token_file::TokenFileError;

/// Builds the REST config from the `--kubeconfig` and `--master` flags, like client-go's
/// `clientcmd.BuildConfigFromFlags`:
/// - neither given: the in-cluster config (service-account token and CA);
/// - only `master`: that server with no credentials (`http://` is allowed here because the
///   operator asked for it explicitly and no credentials are sent);
/// - `kubeconfig` given: its current context, with `master` (if given) replacing the
///   cluster's `server` (and, as in client-go, dropping its `tls-server-name`).
///
/// Empty values count as not given, as in client-go.
pub fn load(kubeconfig: Option<&Path>, master: Option<&str>) -> Result<RestConfig, ConfigError> {
    let kubeconfig = kubeconfig.filter(|path| !path.as_os_str().is_empty());
    let master = master.filter(|master| !master.is_empty());
    match (kubeconfig, master) {
        (Some(path), master) => kubeconfig::load(path, master),
        (None, Some(master)) => master_only(master),
        (None, None) => in_cluster(),
    }
}

/// `--master` without a kubeconfig: an unauthenticated connection to that server.
fn master_only(master: &str) -> Result<RestConfig, ConfigError> {
    let server = server_url(master, true).map_err(ConfigError::Master)?;
    Ok(RestConfig { source: format!("--master {server}"), server, tls: TlsSettings::default(), auth: Auth::None })
}

/// Checks an API server URL and returns it with a lowercase scheme and no trailing slash.
/// Only `https` is accepted unless `allow_http`.
fn server_url(raw: &str, allow_http: bool) -> Result<String, ServerUrlError> {
    let expected = if allow_http { "an http:// or https:// URL" } else { "an https:// URL" };
    let raw_owned = || raw.to_string();
    let Some((scheme, rest)) = raw.split_once("://") else {
        return Err(ServerUrlError::NotAUrl { raw: raw_owned(), expected });
    };
    let rest = rest.trim_end_matches('/');
    let scheme = scheme.to_ascii_lowercase();
    match scheme.as_str() {
        "https" => {}
        "http" if allow_http => {}
        "http" => return Err(ServerUrlError::Plaintext { raw: raw_owned(), expected }),
        _ => return Err(ServerUrlError::NotAUrl { raw: raw_owned(), expected }),
    }
    if rest.is_empty() || rest.starts_with('/') {
        return Err(ServerUrlError::NoHost { raw: raw_owned() });
    }
    if rest.contains(['?', '#']) {
        return Err(ServerUrlError::QueryOrFragment { raw: raw_owned() });
    }
    Ok(format!("{scheme}://{rest}"))
}

/// Why a server URL (a kubeconfig cluster's `server`, `--master`) is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerUrlError {
    /// No scheme, or one that is neither `https` nor (where allowed) `http`.
    #[error("{raw:?} is not {expected}")]
    NotAUrl {
        /// The URL as given.
        raw: String,
        /// What was expected instead.
        expected: &'static str,
    },
    /// `http://` where credentials may be sent.
    #[error("{raw:?} is not {expected} (credentials are never sent in plaintext)")]
    Plaintext {
        /// The URL as given.
        raw: String,
        /// What was expected instead.
        expected: &'static str,
    },
    /// Nothing between the scheme and the path.
    #[error("{raw:?} has no host")]
    NoHost {
        /// The URL as given.
        raw: String,
    },
    /// A `?` or `#` in the URL.
    #[error("{raw:?} must not have a query or fragment")]
    QueryOrFragment {
        /// The URL as given.
        raw: String,
    },
}

/// client-go's `ErrNotInCluster` text, kept so that operators recognise it.
const NOT_IN_CLUSTER: &str = "unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST \
                              and KUBERNETES_SERVICE_PORT must be defined";

/// Why a REST config could not be built: one line naming the file (or flag, or variable) and
/// the field at fault, worded as operators (and `kubectl` users) know it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `--master` without a kubeconfig is not a usable server URL.
    #[error("--master: {0}")]
    Master(#[source] ServerUrlError),
    /// A kubeconfig file could not be used: `kubeconfig <path>: [<field>: ]<reason>`.
    #[error("kubeconfig {}: {problem}", path.display())]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        problem: KubeconfigError,
    },
    /// Not in a cluster: a service variable is not set (`detail` says which).
    #[error("{NOT_IN_CLUSTER} ({detail})")]
    NotInCluster {
        /// Which variable is missing.
        detail: &'static str,
    },
    /// `KUBERNETES_SERVICE_PORT` is not a number.
    #[error("in-cluster config: KUBERNETES_SERVICE_PORT {port:?} is not a port number")]
    ServicePort {
        /// The variable's value.
        port: String,
    },
    /// The service-account token cannot be read.
    #[error("in-cluster config: {0}")]
    ServiceAccountToken(#[source] TokenFileError),
}

/// Everything the API client needs to reach one API server.
#[derive(Debug)]
pub struct RestConfig {
    /// Base URL without a trailing slash, e.g. `https://10.0.0.1:6443` (may carry a path prefix).
    pub server: String,
    /// How to trust the server and, optionally, the client certificate to present.
    pub tls: TlsSettings,
    /// The bearer token to send, if any.
    pub auth: Auth,
    /// Where this came from, for log lines and errors ("kubeconfig /etc/...", "in-cluster").
    pub source: String,
}

/// TLS material for the connection to the API server.
#[derive(Debug, Default)]
pub struct TlsSettings {
    /// CA certificates that sign the server's certificate; `None` means the system's trust store.
    pub ca_certs: Option<Vec<CertificateDer<'static>>>,
    /// `insecure-skip-tls-verify`: accept any server certificate.
    pub insecure_skip_verify: bool,
    /// `tls-server-name`: the name checked against the server certificate (and sent as SNI)
    /// instead of the host of `server`.
    pub server_name: Option<String>,
    /// Client certificate authentication.
    pub client_identity: Option<ClientIdentity>,
}

/// A client certificate chain and the private key that matches its first certificate.
#[derive(Debug)]
pub struct ClientIdentity {
    /// The client certificate first, then any intermediates.
    pub cert_chain: Vec<CertificateDer<'static>>,
    /// The private key of the first certificate.
    pub key: PrivateKeyDer<'static>,
}

impl Clone for ClientIdentity {
    fn clone(&self) -> Self {
        ClientIdentity { cert_chain: self.cert_chain.clone(), key: self.key.clone_key() }
    }
}

/// How requests authenticate besides a client certificate.
pub enum Auth {
    /// No bearer token: anonymous, or a client certificate alone.
    None,
    /// A static bearer token.
    Token(String),
    /// A bearer token read from a file and re-read when the file changes (projected
    /// service-account tokens are rotated in place).
    TokenFile(TokenFile),
}

impl Auth {
    /// The bearer token to send now, if any (a token file is re-read when it has changed).
    pub fn bearer_token(&self) -> Option<String> {
        match self {
            Auth::None => None,
            Auth::Token(token) => Some(token.clone()),
            Auth::TokenFile(file) => Some(file.token()),
        }
    }
}

// Written by hand so that logging a config never prints a credential.
impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Auth::None => f.write_str("None"),
            Auth::Token(_) => f.write_str("Token(<redacted>)"),
            Auth::TokenFile(file) => f.debug_tuple("TokenFile").field(&file.path).finish(),
        }
    }
}

/// A bearer token kept in a file.
#[derive(Debug)]
pub struct TokenFile {
    /// The file to read the token from.
    pub path: PathBuf,
    pub(crate) cached: Mutex<CachedToken>,
}

/// The last good token of a [`TokenFile`] and what the file looked like when it was read.
pub(crate) struct CachedToken {
    pub(crate) token: String,
    pub(crate) modified: Option<SystemTime>,
    /// File size at the last read: a second change signal next to `modified`, whose
    /// resolution can be coarse.
    pub(crate) len: u64,
    pub(crate) checked_at: Instant,
    /// The text of the last re-read failure logged, so that a lasting problem is logged once,
    /// not every second.
    pub(crate) last_error: Option<String>,
}

// Written by hand so that logging a config never prints a credential.
impl fmt::Debug for CachedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedToken")
            .field("token", &"<redacted>")
            .field("modified", &self.modified)
            .field("len", &self.len)
            .field("checked_at", &self.checked_at)
            .field("last_error", &self.last_error)
            .finish()
    }
}
