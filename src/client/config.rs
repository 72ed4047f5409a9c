//! Where the API server is and how to talk to it: kubeconfig files and in-cluster config,
//! loaded the way client-go does it.

use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use parking_lot::Mutex;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Everything the API client needs to reach one API server.
#[derive(Debug)]
pub struct RestConfig {
    /// Base URL without a trailing slash, e.g. `https://10.0.0.1:6443` (may carry a path prefix).
    pub server: String,
    pub tls: TlsSettings,
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
    pub cert_chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl Clone for ClientIdentity {
    fn clone(&self) -> Self {
        ClientIdentity { cert_chain: self.cert_chain.clone(), key: self.key.clone_key() }
    }
}

/// How requests authenticate besides a client certificate.
#[derive(Debug)]
pub enum Auth {
    None,
    /// A static bearer token.
    Token(String),
    /// A bearer token read from a file and re-read when the file changes (projected
    /// service-account tokens are rotated in place).
    TokenFile(TokenFile),
}

/// A bearer token kept in a file.
#[derive(Debug)]
pub struct TokenFile {
    pub path: PathBuf,
    pub(crate) cached: Mutex<CachedToken>,
}

#[derive(Debug)]
pub(crate) struct CachedToken {
    pub(crate) token: String,
    pub(crate) modified: Option<SystemTime>,
    pub(crate) checked_at: Instant,
}

impl Auth {
    /// The bearer token to send, if any.
    pub fn bearer_token(&self) -> Option<String> {
        match self {
            Auth::None => None,
            Auth::Token(t) => Some(t.clone()),
            Auth::TokenFile(f) => Some(f.cached.lock().token.clone()),
        }
    }
}
