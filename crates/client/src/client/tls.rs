//! TLS to the API server with rustls 0.23, plugged into ureq as a transport connector.
//!
//! ureq's own rustls connector cannot check the server certificate against a name other than
//! the URL's host, which kubeconfig's `tls-server-name` needs, so we build the rustls client
//! config from the kubeconfig ourselves and wrap the TCP transport in it.

use std::io::{Read, Write};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme, StreamOwned};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, InvalidDnsNameError, ServerName, UnixTime};
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout, Transport, TransportAdapter,
};

use super::config::TlsSettings;

/// Places where Linux distributions keep the system's CA bundle (as Go's crypto/x509 looks).
const SYSTEM_CA_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// The crypto provider used everywhere in the process (ring: small, no C toolchain needs).
pub fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Why the TLS side of a connection to the API server cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// rustls refused the configuration or the connection.
    #[error("TLS setup: {0}")]
    Setup(#[source] rustls::Error),
    /// The client certificate and key cannot be used.
    #[error("client certificate: {0}")]
    ClientCertificate(#[source] rustls::Error),
    /// A configured CA certificate cannot be a trust anchor.
    #[error("certificate authority: {0}")]
    CertificateAuthority(#[source] rustls::Error),
    /// No CA was given and the system has no bundle.
    #[error("no certificate authority given and no system CA bundle found")]
    NoSystemBundle,
    /// The system CA bundle cannot be read.
    #[error("{path}: {source}")]
    SystemBundle {
        /// The bundle file.
        path: String,
        /// Why it cannot be read.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// The system CA bundle has no certificate rustls can use.
    #[error("the system CA bundle {path} holds no usable certificate")]
    EmptySystemBundle {
        /// The bundle file.
        path: String,
    },
    /// `tls-server-name` is not a DNS name or IP address.
    #[error("tls-server-name {name:?}: {source}")]
    ServerName {
        /// The name given.
        name: String,
        /// Why it is not one.
        #[source]
        source: InvalidDnsNameError,
    },
    /// The URL's host cannot be checked against a certificate.
    #[error("{host:?} is not a valid TLS name")]
    HostName {
        /// The host.
        host: String,
        /// Why it is not a name.
        #[source]
        source: InvalidDnsNameError,
    },
}

/// Builds the rustls client config for the API server from kubeconfig TLS settings.
pub fn client_config(tls: &TlsSettings) -> Result<ClientConfig, TlsError> {
    let builder = ClientConfig::builder_with_provider(crypto_provider())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Setup)?;
    let builder = if tls.insecure_skip_verify {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(AcceptAnyServerCert(crypto_provider())))
    } else {
        builder.with_root_certificates(root_store(tls.ca_certs.as_deref())?)
    };
    match &tls.client_identity {
        Some(id) => builder
            .with_client_auth_cert(id.cert_chain.clone(), id.key.clone_key())
            .map_err(TlsError::ClientCertificate),
        None => Ok(builder.with_no_client_auth()),
    }
}

fn root_store(ca_certs: Option<&[CertificateDer<'static>]>) -> Result<RootCertStore, TlsError> {
    let mut store = RootCertStore::empty();
    match ca_certs {
        Some(certs) => {
            for cert in certs {
                store.add(cert.clone()).map_err(TlsError::CertificateAuthority)?;
            }
        }
        None => {
            // As Go's crypto/x509: $SSL_CERT_FILE first, then the distributions' bundles.
            let from_env = std::env::var("SSL_CERT_FILE").ok().filter(|p| !p.is_empty());
            let path = from_env
                .or_else(|| SYSTEM_CA_BUNDLES.iter().find(|p| std::path::Path::new(p).exists()).map(|p| p.to_string()))
                .ok_or(TlsError::NoSystemBundle)?;
            let certs = match CertificateDer::pem_file_iter(&path) {
                Ok(certs) => certs,
                Err(source) => return Err(TlsError::SystemBundle { path, source }),
            };
            let (added, _ignored) = store.add_parsable_certificates(certs.flatten());
            if added == 0 {
                return Err(TlsError::EmptySystemBundle { path });
            }
        }
    }
    Ok(store)
}

/// A ureq connector that wraps the chained TCP transport in TLS with our rustls config.
#[derive(Debug, Clone)]
pub struct TlsConnector {
    config: Arc<ClientConfig>,
    /// `tls-server-name`: the name to verify instead of the URL's host.
    server_name: Option<ServerName<'static>>,
}

impl TlsConnector {
    /// A connector for `config`, verifying the server as `server_name` instead of the URL's host when given.
    pub fn new(config: Arc<ClientConfig>, server_name: Option<&str>) -> Result<TlsConnector, TlsError> {
        let server_name = server_name
            .map(|name| {
                ServerName::try_from(name.to_string())
                    .map_err(|source| TlsError::ServerName { name: name.to_string(), source })
            })
            .transpose()?;
        Ok(TlsConnector { config, server_name })
    }

    /// A TLS client connection to `host` (a URL's host, without brackets), for connections
    /// made outside ureq (watches, see `watch_connection`).
    pub fn client_connection(&self, host: &str) -> Result<ClientConnection, TlsError> {
        let name = match &self.server_name {
            Some(name) => name.clone(),
            None => ServerName::try_from(host.to_string())
                .map_err(|source| TlsError::HostName { host: host.to_string(), source })?,
        };
        ClientConnection::new(self.config.clone(), name).map_err(TlsError::Setup)
    }

    fn server_name(&self, details: &ConnectionDetails) -> Result<ServerName<'static>, ureq::Error> {
        if let Some(name) = &self.server_name {
            return Ok(name.clone());
        }
        let host = details.uri.host().unwrap_or_default();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        ServerName::try_from(host.to_string())
            .map_err(|_| ureq::Error::Tls("the server's host is not a valid TLS name"))
    }
}

impl<In: Transport> Connector<In> for TlsConnector {
    type Out = Either<In, TlsTransport>;

    fn connect(&self, details: &ConnectionDetails, chained: Option<In>) -> Result<Option<Self::Out>, ureq::Error> {
        let Some(transport) = chained else {
            return Err(ureq::Error::Tls("TLS needs a TCP connection below it"));
        };
        if !details.needs_tls() || transport.is_tls() {
            return Ok(Some(Either::A(transport)));
        }
        let mut conn = ClientConnection::new(self.config.clone(), self.server_name(details)?)?;
        let mut sock = TransportAdapter::new(transport.boxed(), details.current_time.clone());
        sock.set_timeout(details.timeout);
        conn.complete_io(&mut sock)?;
        let buffers = LazyBuffers::new(details.config.input_buffer_size(), details.config.output_buffer_size());
        Ok(Some(Either::B(TlsTransport { buffers, stream: StreamOwned { conn, sock } })))
    }
}

/// An established TLS connection.
pub struct TlsTransport {
    buffers: LazyBuffers,
    stream: StreamOwned<ClientConnection, TransportAdapter>,
}

impl std::fmt::Debug for TlsTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsTransport").finish_non_exhaustive()
    }
}

impl Transport for TlsTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        let output = &self.buffers.output()[..amount];
        self.stream.write_all(output)?;
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        self.stream.get_mut().set_timeout(timeout);
        let input = self.buffers.input_append_buf();
        let amount = self.stream.read(input)?;
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    fn is_open(&mut self) -> bool {
        self.stream.get_mut().get_mut().is_open()
    }

    fn is_tls(&self) -> bool {
        true
    }
}

/// `insecure-skip-tls-verify`: accepts any server certificate but still checks that the
/// server holds its key, so the handshake itself stays sound.
#[derive(Debug)]
pub struct AcceptAnyServerCert(pub Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
