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
    /// `--cert-dir`: where the self-signed pair is generated when no certificate files are given.
    pub cert_dir: String,
    /// `--tls-cert-file`: the serving certificate, then any CA certificates.
    pub tls_cert_file: String,
    /// `--tls-private-key-file`: the key of `--tls-cert-file`.
    pub tls_private_key_file: String,
    /// `--tls-cipher-suites`, by Go's names; empty means Go's defaults.
    pub tls_cipher_suites: Vec<String>,
    /// Empty or a Go TLS version name (`VersionTLS12`).
    pub tls_min_version: String,
    /// `--tls-curve-preferences`: Go `crypto/tls` CurveIDs allowed for key exchange; empty
    /// means the defaults.
    pub tls_curve_preferences: Vec<i32>,
    /// `--tls-sni-cert-key`.
    pub sni_cert_keys: Vec<NamedCertKey>,
    /// 0 means the HTTP/2 library default.
    pub http2_max_streams_per_connection: i64,
    /// `--permit-port-sharing`: bind with `SO_REUSEPORT`.
    pub permit_port_sharing: bool,
    /// `--permit-address-sharing`: bind with `SO_REUSEADDR`.
    pub permit_address_sharing: bool,
    /// `--disable-http2-serving`.
    pub disable_http2: bool,
}

/// Delegated authentication of requests to the HTTPS endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthenticationOptions {
    /// `--authentication-kubeconfig`.
    pub kubeconfig: String,
    /// `--authentication-skip-lookup`: do not read the client CAs and request-header settings from the cluster.
    pub skip_lookup: bool,
    /// `--authentication-token-webhook-cache-ttl`: how long TokenReview answers are cached.
    pub token_webhook_cache_ttl: Duration,
    /// `--authentication-tolerate-lookup-failure`: start even when the cluster lookup fails.
    pub tolerate_lookup_failure: bool,
    /// `--client-ca-file`.
    pub client_ca_file: String,
    /// `--requestheader-client-ca-file`: the CA that must sign a front proxy's client certificate.
    pub requestheader_client_ca_file: String,
    /// `--requestheader-allowed-names`: the proxy certificate CommonNames allowed; empty allows any.
    pub requestheader_allowed_names: Vec<String>,
    /// `--requestheader-username-headers`.
    pub requestheader_username_headers: Vec<String>,
    /// `--requestheader-uid-headers`.
    pub requestheader_uid_headers: Vec<String>,
    /// `--requestheader-group-headers`.
    pub requestheader_group_headers: Vec<String>,
    /// `--requestheader-extra-headers-prefix`.
    pub requestheader_extra_headers_prefix: Vec<String>,
}

/// Delegated authorization of requests to the HTTPS endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizationOptions {
    /// `--authorization-kubeconfig`.
    pub kubeconfig: String,
    /// Paths served without asking the API server.
    pub always_allow_paths: Vec<String>,
    /// `--authorization-webhook-cache-authorized-ttl`: how long allowing SubjectAccessReview answers are cached.
    pub webhook_cache_authorized_ttl: Duration,
    /// `--authorization-webhook-cache-unauthorized-ttl`: how long denying SubjectAccessReview answers are cached.
    pub webhook_cache_unauthorized_ttl: Duration,
}

/// A certificate and key for SNI serving, optionally with the names it serves.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NamedCertKey {
    /// The PEM certificate file.
    pub cert_file: String,
    /// The PEM private key file.
    pub key_file: String,
    /// Domain patterns; empty means "the names in the certificate".
    pub names: Vec<String>,
}
