//! The settings of the secure port: serving, delegated authentication and authorization
//! (upstream's `k8s.io/apiserver/pkg/server/options`), filled from the flags by `crate::app`.

use std::net::IpAddr;
use std::time::Duration;

/// The HTTPS endpoint (`/healthz`, `/metrics`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecureServingOptions {
    /// `--bind-address`; `None` or an unspecified address means all interfaces.
    pub bind_address: Option<IpAddr>,
    /// `--secure-port`; 0 disables HTTPS serving.
    pub port: u16,
    pub cert_dir: String,
    pub tls_cert_file: String,
    pub tls_private_key_file: String,
    pub tls_cipher_suites: Vec<String>,
    /// Empty or a Go TLS version name (`VersionTLS12`).
    pub tls_min_version: String,
    /// `--tls-sni-cert-key`.
    pub sni_cert_keys: Vec<NamedCertKey>,
    /// 0 means the HTTP/2 library default.
    pub http2_max_streams_per_connection: i64,
    pub permit_port_sharing: bool,
    pub permit_address_sharing: bool,
    /// `--disable-http2-serving`.
    pub disable_http2: bool,
}

/// Delegated authentication of requests to the HTTPS endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthenticationOptions {
    /// `--authentication-kubeconfig`.
    pub kubeconfig: String,
    pub skip_lookup: bool,
    pub token_webhook_cache_ttl: Duration,
    pub tolerate_lookup_failure: bool,
    /// `--client-ca-file`.
    pub client_ca_file: String,
    pub requestheader_client_ca_file: String,
    pub requestheader_allowed_names: Vec<String>,
    pub requestheader_username_headers: Vec<String>,
    pub requestheader_uid_headers: Vec<String>,
    pub requestheader_group_headers: Vec<String>,
    pub requestheader_extra_headers_prefix: Vec<String>,
}

/// Delegated authorization of requests to the HTTPS endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizationOptions {
    /// `--authorization-kubeconfig`.
    pub kubeconfig: String,
    /// Paths served without asking the API server.
    pub always_allow_paths: Vec<String>,
    pub webhook_cache_authorized_ttl: Duration,
    pub webhook_cache_unauthorized_ttl: Duration,
}

/// A certificate and key for SNI serving, optionally with the names it serves.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NamedCertKey {
    pub cert_file: String,
    pub key_file: String,
    /// Domain patterns; empty means "the names in the certificate".
    pub names: Vec<String>,
}
