//! PEM certificates and private keys, checked well enough that a bad file fails at startup.
//! Errors are bare reasons; the caller says which file and field they came from.

use std::sync::Arc;

use rustls::sign::{CertifiedKey, SigningKey};
use rustls::{InconsistentKeys, RootCertStore};
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why PEM material is unusable: a bare reason; the caller says which file and field it came from.
#[derive(Debug, thiserror::Error)]
pub enum PemError {
    /// The file is not well-formed PEM.
    #[error("{}", describe(.0))]
    Malformed(#[source] pem::Error),
    /// No certificate in it.
    #[error("no CERTIFICATE block found (expected PEM)")]
    NoCertificate,
    /// A certificate that cannot be a trust anchor (counted from 1).
    #[error("certificate #{number} is not a usable CA certificate: {source}")]
    NotACa {
        /// Its place in the file, from 1.
        number: usize,
        /// Why rustls refused it.
        #[source]
        source: rustls::Error,
    },
    /// No private key in it.
    #[error("no PRIVATE KEY block found (expected PEM: RSA, EC or PKCS#8 private key)")]
    NoPrivateKey,
    /// A private key of a kind we cannot sign with.
    #[error("unsupported private key (RSA, ECDSA P-256/P-384 or Ed25519 expected)")]
    UnsupportedKey(#[source] rustls::Error),
}

/// Every CERTIFICATE block, in order; other blocks are skipped. At least one is required.
pub(super) fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, PemError> {
    let certs = CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>().map_err(PemError::Malformed)?;
    if certs.is_empty() {
        return Err(PemError::NoCertificate);
    }
    Ok(certs)
}

/// CA certificates that can actually serve as trust anchors.
pub(super) fn ca_certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, PemError> {
    let certs = certificates(pem)?;
    let mut store = RootCertStore::empty();
    for (index, cert) in certs.iter().enumerate() {
        store.add(cert.clone()).map_err(|source| PemError::NotACa { number: index + 1, source })?;
    }
    Ok(certs)
}

/// The first private key (PKCS#1 RSA, PKCS#8 or SEC1 EC) and a signer for it.
pub(super) fn private_key(pem: &[u8]) -> Result<(PrivateKeyDer<'static>, Arc<dyn SigningKey>), PemError> {
    let key = PrivateKeyDer::from_pem_slice(pem).map_err(|e| match e {
        pem::Error::NoItemsFound => PemError::NoPrivateKey,
        other => PemError::Malformed(other),
    })?;
    let signer = rustls::crypto::ring::sign::any_supported_type(&key).map_err(PemError::UnsupportedKey)?;
    Ok((key, signer))
}

/// Why a client certificate and key cannot be used together.
pub(super) enum PairError {
    /// The first certificate is not a parsable X.509 certificate.
    BadCertificate(rustls::Error),
    /// The key is not the one the certificate was issued for.
    KeyMismatch,
}

/// Checks that `signer` holds the private key of the first certificate in `chain`.
pub(super) fn check_pair(chain: &[CertificateDer<'static>], signer: Arc<dyn SigningKey>) -> Result<(), PairError> {
    match CertifiedKey::new(chain.to_vec(), signer).keys_match() {
        Ok(()) => Ok(()),
        Err(rustls::Error::InconsistentKeys(InconsistentKeys::KeyMismatch)) => Err(PairError::KeyMismatch),
        Err(e) => Err(PairError::BadCertificate(e)),
    }
}

/// A one-line reason for a malformed PEM file (the library's own text prints byte arrays).
fn describe(error: &pem::Error) -> String {
    match error {
        pem::Error::MissingSectionEnd { end_marker } => {
            let label = String::from_utf8_lossy(end_marker);
            format!("not valid PEM: missing \"-----END {label}-----\" line")
        }
        pem::Error::IllegalSectionStart { line } => {
            format!("not valid PEM: malformed line {:?}", String::from_utf8_lossy(line))
        }
        other => format!("not valid PEM: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_pem_is_described_in_words() {
        let err = certificates(b"-----BEGIN CERTIFICATE-----\nAAAA\n").expect_err("no end line").to_string();
        assert_eq!(err, r#"not valid PEM: missing "-----END CERTIFICATE-----" line"#);
        let err = certificates(b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n")
            .expect_err("bad base64")
            .to_string();
        assert!(err.starts_with("not valid PEM: base64 decode error"), "{err}");
    }

    #[test]
    fn files_without_the_wanted_block_are_rejected() {
        assert_eq!(
            certificates(b"hello").expect_err("no block").to_string(),
            "no CERTIFICATE block found (expected PEM)"
        );
        let err = private_key(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
            .expect_err("no key block")
            .to_string();
        assert!(err.starts_with("no PRIVATE KEY block found"), "{err}");
    }

    #[test]
    fn garbage_inside_a_valid_envelope_is_not_a_ca() {
        let err = ca_certificates(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
            .expect_err("not a certificate")
            .to_string();
        assert!(err.starts_with("certificate #1 is not a usable CA certificate"), "{err}");
    }
}
