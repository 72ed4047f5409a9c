//! The in-cluster config: the API server's service address from the environment and the
//! pod's service-account token and CA, as client-go's `rest.InClusterConfig` reads them.

use std::fs;
use std::path::Path;

use super::{Auth, ConfigError, PemError, RestConfig, TlsSettings, TokenFile, pem};

/// Where the kubelet mounts the pod's service-account token and the cluster CA.
const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The in-cluster config from `KUBERNETES_SERVICE_HOST`, `KUBERNETES_SERVICE_PORT` and the
/// service-account files under `/var/run/secrets/kubernetes.io/serviceaccount`.
pub fn in_cluster() -> Result<RestConfig, ConfigError> {
    let host = std::env::var("KUBERNETES_SERVICE_HOST").ok();
    let port = std::env::var("KUBERNETES_SERVICE_PORT").ok();
    in_cluster_from(host.as_deref(), port.as_deref(), Path::new(SERVICE_ACCOUNT_DIR))
}

/// [`in_cluster`] with the environment values and the service-account folder given
/// explicitly. The token is re-read when the kubelet rotates it. An unusable `ca.crt` is
/// logged and the system trust store used instead, as client-go does.
pub fn in_cluster_from(host: Option<&str>, port: Option<&str>, dir: &Path) -> Result<RestConfig, ConfigError> {
    let (host, port) = service_address(host, port)?;
    // IPv6 literals need brackets in a URL (Go's net.JoinHostPort does the same).
    let server = if host.contains(':') { format!("https://[{host}]:{port}") } else { format!("https://{host}:{port}") };
    let token = TokenFile::new(dir.join("token")).map_err(ConfigError::ServiceAccountToken)?;
    Ok(RestConfig {
        source: format!("in-cluster ({server})"),
        server,
        tls: TlsSettings { ca_certs: ca_certs(&dir.join("ca.crt")), ..TlsSettings::default() },
        auth: Auth::TokenFile(token),
    })
}

/// The host and port variables, both required and the port numeric.
fn service_address<'a>(host: Option<&'a str>, port: Option<&'a str>) -> Result<(&'a str, u16), ConfigError> {
    let host = host.filter(|h| !h.is_empty());
    let port = port.filter(|p| !p.is_empty());
    let (host, port) = match (host, port) {
        (Some(host), Some(port)) => (host, port),
        (None, None) => return Err(ConfigError::NotInCluster { detail: "neither is set" }),
        (None, Some(_)) => return Err(ConfigError::NotInCluster { detail: "KUBERNETES_SERVICE_HOST is not set" }),
        (Some(_), None) => return Err(ConfigError::NotInCluster { detail: "KUBERNETES_SERVICE_PORT is not set" }),
    };
    let port = port.parse().map_err(|_| ConfigError::ServicePort { port: port.to_string() })?;
    Ok((host.trim_start_matches('[').trim_end_matches(']'), port))
}

fn ca_certs(path: &Path) -> Option<Vec<rustls_pki_types::CertificateDer<'static>>> {
    let certs = fs::read(path).map_err(CaFileError::Read).and_then(|bytes| Ok(pem::ca_certificates(&bytes)?));
    match certs {
        Ok(certs) => Some(certs),
        Err(e) => {
            log::error!(
                "in-cluster config: expected the cluster CA in {}, but {e}; using the system trust store",
                path.display()
            );
            None
        }
    }
}

/// Why the cluster CA file is not used (logged; the system trust store is used instead).
#[derive(Debug, thiserror::Error)]
enum CaFileError {
    #[error("cannot read: {0}")]
    Read(#[source] std::io::Error),
    #[error("{0}")]
    Pem(#[from] PemError),
}
