//! The rustls server configuration of the secure port: serving certificate, `--tls-min-version`,
//! `--tls-cipher-suites`, `--tls-curve-preferences`, and client certificates requested but not verified during the
//! handshake, as Go's `tls.RequestClientCert` does: the authenticators verify them against
//! `--client-ca-file` or `--requestheader-client-ca-file` afterwards, so that a certificate from
//! another authority fails authentication (401) rather than the handshake.

use std::sync::Arc;

use parking_lot::Mutex;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, ServerConfig, SignatureScheme, SupportedProtocolVersion};
use rustls_pki_types::{CertificateDer, UnixTime};

use super::certs::ServingCert;
use crate::server::options::SecureServingOptions;

/// Why the secure port's TLS configuration cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// `--tls-curve-preferences` is invalid.
    #[error("{0}")]
    Curves(#[from] CurveError),
    /// None of the preferred curves is in this build: no client could connect.
    #[error("none of the --tls-curve-preferences is available in this build: {} (it has {})", missing.join(", "), available.join(", "))]
    NoCurve {
        /// The preferred curves this build lacks, as `<Go name> (<id>)`.
        missing: Vec<String>,
        /// The curves it has.
        available: Vec<String>,
    },
    /// rustls refused the protocol versions or suites.
    #[error("TLS setup: {0}")]
    Setup(#[source] rustls::Error),
    /// The serving certificate and key cannot be used.
    #[error("serving certificate: {0}")]
    ServingCertificate(#[source] rustls::Error),
    /// A client CA cannot be named in the handshake.
    #[error("client certificate authority: {0}")]
    ClientCa(#[source] rustls::Error),
}

/// Why `--tls-curve-preferences` is refused (upstream's `cliflag.TLSCurvePreferences` words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CurveError {
    /// Not a 16-bit curve ID, or 0.
    #[error("curve preference {0} is out of range (must be 1-{max})", max = u16::MAX)]
    OutOfRange(i32),
    /// Listed twice.
    #[error("duplicate curve preference {0}")]
    Duplicate(i32),
    /// Not a curve Go knows.
    #[error("curve preference {0} is not supported by the current Go version")]
    Unsupported(i32),
}

/// The server config for `serving`, asking clients for a certificate issued by one of
/// `client_cas` (none: no certificate is asked for).
pub fn server_config(
    options: &SecureServingOptions,
    serving: ServingCert,
    client_cas: &[CertificateDer<'static>],
) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(provider(&options.tls_cipher_suites, &options.tls_curve_preferences)?);
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(protocol_versions(&options.tls_min_version))
        .map_err(TlsError::Setup)?;
    let builder = if client_cas.is_empty() {
        builder.with_no_client_auth()
    } else {
        builder.with_client_cert_verifier(Arc::new(RequestClientCert::new(provider, client_cas)?))
    };
    let config = builder.with_single_cert(serving.chain, serving.key).map_err(TlsError::ServingCertificate)?;
    Ok(Arc::new(config))
}

/// The server config, rebuilt when the client CAs change, as upstream's
/// `DynamicServingCertificateController` rebuilds its `tls.Config` when a CA provider notifies:
/// the handshake then names the new authorities.
pub struct ServerConfigs {
    options: SecureServingOptions,
    serving: ServingCert,
    /// The CA generation the config was built for, and the config.
    built: Mutex<(u64, Arc<ServerConfig>)>,
}

impl ServerConfigs {
    pub fn new(
        options: &SecureServingOptions,
        serving: ServingCert,
        generation: u64,
        client_cas: &[CertificateDer<'static>],
    ) -> Result<ServerConfigs, TlsError> {
        warn_about_missing_curves(&options.tls_curve_preferences)?;
        let first = server_config(options, clone_cert(&serving), client_cas)?;
        Ok(ServerConfigs { options: options.clone(), serving, built: Mutex::new((generation, first)) })
    }

    /// The config for CA generation `generation`, built from `client_cas` when it is new. A
    /// config that cannot be built keeps the last one (and is not tried again for it).
    pub fn current(
        &self,
        generation: u64,
        client_cas: impl FnOnce() -> Vec<CertificateDer<'static>>,
    ) -> Arc<ServerConfig> {
        let mut built = self.built.lock();
        if built.0 != generation {
            match server_config(&self.options, clone_cert(&self.serving), &client_cas()) {
                Ok(config) => *built = (generation, config),
                Err(e) => {
                    log::error!("rebuilding the TLS configuration for new client CAs: {e}");
                    built.0 = generation;
                }
            }
        }
        built.1.clone()
    }
}

fn clone_cert(cert: &ServingCert) -> ServingCert {
    ServingCert { chain: cert.chain.clone(), key: cert.key.clone_key() }
}

/// TLS 1.3 only for `VersionTLS13`; otherwise 1.2 and 1.3 (rustls has nothing older, so
/// `VersionTLS10`/`VersionTLS11` mean 1.2).
fn protocol_versions(min_version: &str) -> &'static [&'static SupportedProtocolVersion] {
    static TLS13_ONLY: [&SupportedProtocolVersion; 1] = [&rustls::version::TLS13];
    if min_version == "VersionTLS13" { &TLS13_ONLY } else { rustls::ALL_VERSIONS }
}

/// Go's `crypto/tls` CurveIDs (Go 1.26, which upstream v1.36.2 is built with) and their names.
const GO_CURVES: &[(u16, &str)] = &[
    (23, "CurveP256"),
    (24, "CurveP384"),
    (25, "CurveP521"),
    (29, "X25519"),
    (4587, "SecP256r1MLKEM768"),
    (4588, "X25519MLKEM768"),
    (4589, "SecP384r1MLKEM1024"),
];

/// Upstream `cliflag.TLSCurvePreferences`: the `--tls-curve-preferences` CurveIDs, each in range,
/// once, and known to Go.
pub fn curve_preferences(ids: &[i32]) -> Result<Vec<u16>, CurveError> {
    let mut curves = Vec::with_capacity(ids.len());
    for &id in ids {
        let curve = u16::try_from(id).ok().filter(|c| *c != 0).ok_or(CurveError::OutOfRange(id))?;
        if curves.contains(&curve) {
            return Err(CurveError::Duplicate(id));
        }
        if !GO_CURVES.iter().any(|(known, _)| *known == curve) {
            return Err(CurveError::Unsupported(id));
        }
        curves.push(curve);
    }
    Ok(curves)
}

/// Logs once the preferred curves this build cannot offer (its crypto provider has X25519,
/// P-256 and P-384; Go also has P-521 and the ML-KEM hybrids): the handshake uses the others.
/// When none is left no client could connect, so the secure port does not start.
fn warn_about_missing_curves(ids: &[i32]) -> Result<(), TlsError> {
    let curves = curve_preferences(ids)?;
    let ours: Vec<u16> = crate::client::tls::crypto_provider().kx_groups.iter().map(|g| u16::from(g.name())).collect();
    let name = |id: &u16| {
        let go = GO_CURVES.iter().find(|(known, _)| known == id).map_or("", |(_, name)| name);
        format!("{go} ({id})")
    };
    let missing: Vec<String> = curves.iter().filter(|c| !ours.contains(c)).map(name).collect();
    if missing.is_empty() {
        return Ok(());
    }
    if missing.len() == curves.len() {
        return Err(TlsError::NoCurve { missing, available: ours.iter().map(name).collect() });
    }
    log::warn!("--tls-curve-preferences: {} not available in this build; the others are used", missing.join(", "));
    Ok(())
}

/// The process's crypto provider, with its key exchange groups narrowed to `curves` (Go
/// CurveIDs) and its TLS 1.2 suites to `names` when given. As in Go, the suite list does not
/// restrict TLS 1.3, and the order of the curves does not matter. Named suites rustls does not
/// implement (CBC, RC4, 3DES, RSA key exchange) are ignored with a warning.
fn provider(names: &[String], curves: &[i32]) -> Result<CryptoProvider, CurveError> {
    let mut provider = (*crate::client::tls::crypto_provider()).clone();
    let curves = curve_preferences(curves)?;
    if !curves.is_empty() {
        provider.kx_groups.retain(|group| curves.contains(&u16::from(group.name())));
    }
    if names.is_empty() {
        return Ok(provider);
    }
    let wanted = |suite: &rustls::SupportedCipherSuite| {
        let name = suite.suite().as_str().unwrap_or_default();
        names.iter().any(|n| n == name || format!("{n}_SHA256") == name)
    };
    for name in names {
        let known = provider.cipher_suites.iter().any(|s| {
            let own = s.suite().as_str().unwrap_or_default();
            own == name || own == format!("{name}_SHA256") || own.replacen("TLS13_", "TLS_", 1) == *name
        });
        if !known {
            log::warn!("--tls-cipher-suites: {name} is not supported by this build; ignored");
        }
    }
    provider.cipher_suites.retain(|s| s.version() == &rustls::version::TLS13 || wanted(s));
    Ok(provider)
}

/// Asks for a client certificate naming `root_hints` as acceptable issuers, accepts any chain
/// whose holder proves its key, and leaves trusting the chain to the authenticators.
#[derive(Debug)]
struct RequestClientCert {
    provider: Arc<CryptoProvider>,
    root_hints: Vec<DistinguishedName>,
}

impl RequestClientCert {
    fn new(provider: Arc<CryptoProvider>, cas: &[CertificateDer<'static>]) -> Result<Self, TlsError> {
        let mut roots = rustls::RootCertStore::empty();
        for ca in cas {
            roots.add(ca.clone()).map_err(TlsError::ClientCa)?;
        }
        Ok(RequestClientCert { provider, root_hints: roots.subjects() })
    }
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.root_hints
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suite_names(provider: &CryptoProvider) -> Vec<&'static str> {
        provider.cipher_suites.iter().map(|s| s.suite().as_str().unwrap_or_default()).collect()
    }

    #[test]
    fn cipher_suites_narrow_tls12_only() {
        let all = provider(&[], &[]).unwrap();
        let narrowed = provider(&["TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305".to_string()], &[]).unwrap();
        let names = suite_names(&narrowed);
        assert!(names.contains(&"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"), "{names:?}");
        assert!(!names.contains(&"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"), "{names:?}");
        let tls13 =
            |p: &CryptoProvider| p.cipher_suites.iter().filter(|s| s.version() == &rustls::version::TLS13).count();
        assert_eq!(tls13(&narrowed), tls13(&all));
    }

    #[test]
    fn configs_are_rebuilt_only_for_a_new_ca_generation() {
        use rustls_pki_types::pem::PemObject;
        let pair = super::super::certs::self_signed(&["localhost".into()], &[]).unwrap();
        let serving = ServingCert {
            chain: CertificateDer::pem_slice_iter(pair.cert_pem.as_bytes()).collect::<Result<_, _>>().unwrap(),
            key: rustls_pki_types::PrivateKeyDer::from_pem_slice(pair.key_pem.as_bytes()).unwrap(),
        };
        let ca = serving.chain[0].clone();
        let configs = ServerConfigs::new(&SecureServingOptions::default(), serving, 0, &[]).unwrap();
        let first = configs.current(0, || unreachable!("generation 0 is built"));
        let second = configs.current(1, || vec![ca.clone()]);
        assert!(!Arc::ptr_eq(&first, &second));
        assert!(Arc::ptr_eq(&second, &configs.current(1, || unreachable!("generation 1 is built"))));
    }

    #[test]
    fn curve_preferences_are_checked_as_upstream_and_narrow_the_key_exchange() {
        let curve_preferences = |ids: &[i32]| curve_preferences(ids).map_err(|e| e.to_string());
        assert_eq!(curve_preferences(&[29, 4588, 23]), Ok(vec![29, 4588, 23]));
        assert_eq!(curve_preferences(&[0]), Err("curve preference 0 is out of range (must be 1-65535)".into()));
        assert_eq!(curve_preferences(&[65536]), Err("curve preference 65536 is out of range (must be 1-65535)".into()));
        assert_eq!(curve_preferences(&[23, 23]), Err("duplicate curve preference 23".into()));
        assert_eq!(
            curve_preferences(&[30]),
            Err("curve preference 30 is not supported by the current Go version".into())
        );
        let groups = |p: &CryptoProvider| p.kx_groups.iter().map(|g| u16::from(g.name())).collect::<Vec<_>>();
        assert_eq!(groups(&provider(&[], &[29, 24]).unwrap()), [29, 24]);
        assert_eq!(groups(&provider(&[], &[24, 29]).unwrap()), [29, 24], "the provider's order stays");
        assert_eq!(groups(&provider(&[], &[]).unwrap()), [29, 23, 24]);
        assert!(warn_about_missing_curves(&[25, 29]).is_ok());
        assert_eq!(
            warn_about_missing_curves(&[25, 4588]).map_err(|e| e.to_string()),
            Err("none of the --tls-curve-preferences is available in this build: CurveP521 (25), X25519MLKEM768 \
                 (4588) (it has X25519 (29), CurveP256 (23), CurveP384 (24))"
                .into())
        );
    }

    #[test]
    fn min_version_13_drops_tls12() {
        assert_eq!(protocol_versions("VersionTLS13").len(), 1);
        assert_eq!(protocol_versions("").len(), rustls::ALL_VERSIONS.len());
        assert_eq!(protocol_versions("VersionTLS10").len(), rustls::ALL_VERSIONS.len());
    }
}
