//! The serving certificate of the secure port: `--tls-cert-file`/`--tls-private-key-file`, or a
//! self-signed one as upstream's `MaybeDefaultWithSelfSignedCerts` makes it, kept in
//! `--cert-dir` as `kube-controller-manager.crt`/`.key` and reused on later starts.
//!
//! The self-signed certificate is built here (an ECDSA P-256 key from ring and a small DER
//! encoder) so that the release binary needs no certificate-generation crate.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::x509::pem_encode;

/// Upstream's pair name for the generated files in `--cert-dir`.
pub const PAIR_NAME: &str = "kube-controller-manager";
/// How long a generated certificate is valid (upstream: one year).
const VALIDITY_SECONDS: i64 = 365 * 24 * 3600;
/// How far back a generated certificate's validity starts, against clock skew (upstream: an hour).
const BACKDATE_SECONDS: i64 = 3600;

/// A certificate chain and its private key.
#[derive(Debug)]
pub struct ServingCert {
    /// The serving certificate first, then any intermediates.
    pub chain: Vec<CertificateDer<'static>>,
    /// The private key of the first certificate.
    pub key: PrivateKeyDer<'static>,
}

/// A generated self-signed pair in PEM.
#[derive(Debug, Clone)]
pub struct PemPair {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its private key, PEM.
    pub key_pem: String,
}

/// Why the serving certificate cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// One of `--tls-cert-file` and `--tls-private-key-file` without the other.
    #[error("missing filename for serving cert: --tls-cert-file and --tls-private-key-file go together")]
    MissingFile,
    /// One file of a `--cert-dir` pair exists without the other (upstream's words).
    #[error("error reading {}, certificate and key must be supplied as a pair", missing.display())]
    HalfAPair {
        /// The file that cannot be read.
        missing: PathBuf,
    },
    /// A file or folder cannot be read, created or written.
    #[error("{}: {source}", path.display())]
    File {
        /// The file or folder.
        path: PathBuf,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
    /// The certificate PEM is malformed.
    #[error("{origin}: bad certificate PEM: {source}")]
    CertificatePem {
        /// Where the pair came from (its files, or "generated certificate").
        origin: String,
        /// The parser's error.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// No certificate in the PEM.
    #[error("{origin}: no CERTIFICATE block found")]
    NoCertificate {
        /// Where the pair came from.
        origin: String,
    },
    /// No private key in the key's PEM.
    #[error("{origin}: no usable private key: {source}")]
    NoPrivateKey {
        /// Where the pair came from.
        origin: String,
        /// The parser's error.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    // ring's errors say nothing more (and are no `std::error::Error` in our build of it).
    /// A new key could not be generated.
    #[error("cannot generate an ECDSA key")]
    GenerateKey,
    /// The generated key could not be loaded.
    #[error("cannot load the generated ECDSA key")]
    LoadKey,
    /// No random bytes for the serial number.
    #[error("no randomness for the serial number")]
    Randomness,
    /// The certificate could not be signed.
    #[error("cannot sign the certificate")]
    Sign,
    /// A validity bound is not a time.
    #[error("certificate time: {0}")]
    Time(#[source] jiff::Error),
}

impl CertError {
    fn file(path: &Path) -> impl FnOnce(std::io::Error) -> CertError + '_ {
        move |source| CertError::File { path: path.to_path_buf(), source }
    }
}

/// The serving certificate for the secure port, as upstream chooses it:
/// - `cert_file` and `key_file` given: those files;
/// - else `cert_dir` given: `kube-controller-manager.{crt,key}` there, generated and written
///   when neither exists yet;
/// - else a self-signed certificate kept in memory.
///
/// A generated certificate names `localhost`, this host's name, 127.0.0.1 and `bind`
/// (when it is a specific address).
pub fn load_or_generate(
    cert_file: &str,
    key_file: &str,
    cert_dir: &str,
    bind: IpAddr,
) -> Result<ServingCert, CertError> {
    if !cert_file.is_empty() || !key_file.is_empty() {
        if cert_file.is_empty() || key_file.is_empty() {
            return Err(CertError::MissingFile);
        }
        return read_pair(Path::new(cert_file), Path::new(key_file));
    }
    if cert_dir.is_empty() {
        let pair = self_signed(&dns_names(), &ip_addresses(bind))?;
        log::info!("Generated self-signed cert in-memory");
        return parse_pair(&pair, "generated certificate");
    }
    let (cert_path, key_path) = pair_paths(Path::new(cert_dir));
    if !can_read_pair(&cert_path, &key_path)? {
        let pair = self_signed(&dns_names(), &ip_addresses(bind))?;
        write_pair(&pair, &cert_path, &key_path)?;
        log::info!("Generated self-signed cert ({}, {})", cert_path.display(), key_path.display());
    }
    read_pair(&cert_path, &key_path)
}

/// `<dir>/kube-controller-manager.crt` and `.key`.
pub fn pair_paths(dir: &Path) -> (PathBuf, PathBuf) {
    (dir.join(format!("{PAIR_NAME}.crt")), dir.join(format!("{PAIR_NAME}.key")))
}

/// Whether both files of a pair can be read; an error when only one can (upstream's
/// `CanReadCertAndKey`).
fn can_read_pair(cert: &Path, key: &Path) -> Result<bool, CertError> {
    let readable = |p: &Path| std::fs::File::open(p).is_ok();
    match (readable(cert), readable(key)) {
        (false, false) => Ok(false),
        (true, true) => Ok(true),
        (false, true) => Err(CertError::HalfAPair { missing: cert.to_path_buf() }),
        (true, false) => Err(CertError::HalfAPair { missing: key.to_path_buf() }),
    }
}

/// Reads a PEM certificate chain and private key.
pub fn read_pair(cert: &Path, key: &Path) -> Result<ServingCert, CertError> {
    let read = |p: &Path| std::fs::read_to_string(p).map_err(CertError::file(p));
    let pair = PemPair { cert_pem: read(cert)?, key_pem: read(key)? };
    parse_pair(&pair, &format!("{} and {}", cert.display(), key.display()))
}

fn parse_pair(pair: &PemPair, origin: &str) -> Result<ServingCert, CertError> {
    let chain = CertificateDer::pem_slice_iter(pair.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| CertError::CertificatePem { origin: origin.to_string(), source })?;
    if chain.is_empty() {
        return Err(CertError::NoCertificate { origin: origin.to_string() });
    }
    let key = PrivateKeyDer::from_pem_slice(pair.key_pem.as_bytes())
        .map_err(|source| CertError::NoPrivateKey { origin: origin.to_string(), source })?;
    Ok(ServingCert { chain, key })
}

/// Writes a pair as upstream does: the certificate world-readable, the key for its owner only.
fn write_pair(pair: &PemPair, cert: &Path, key: &Path) -> Result<(), CertError> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    for path in [cert, key] {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::DirBuilder::new().recursive(true).mode(0o755).create(dir).map_err(CertError::file(dir))?;
        }
    }
    // Written beside the target and renamed into place, so a crash never leaves half a pair and
    // an existing file's looser permissions are never inherited.
    let write = |path: &Path, contents: &str, mode: u32| {
        use std::io::Write;
        let temporary = path.with_extension("tmp");
        let _ = std::fs::remove_file(&temporary);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&temporary)
            .and_then(|mut f| f.write_all(contents.as_bytes()).and_then(|()| f.sync_all()))
            .and_then(|()| std::fs::rename(&temporary, path))
            .map_err(CertError::file(path))
    };
    write(cert, &pair.cert_pem, 0o644)?;
    write(key, &pair.key_pem, 0o600)
}

/// `localhost` and this host's name (when it has one and it differs).
fn dns_names() -> Vec<String> {
    let mut names = vec!["localhost".to_string()];
    let host = crate::hostname().unwrap_or_default();
    let host = host.as_str();
    if !host.is_empty() && host != "localhost" && host.parse::<IpAddr>().is_err() {
        names.push(host.to_string());
    }
    names
}

/// 127.0.0.1 and the bind address when it is a specific one.
fn ip_addresses(bind: IpAddr) -> Vec<IpAddr> {
    let mut ips = vec![IpAddr::from([127, 0, 0, 1])];
    if !bind.is_unspecified() && !ips.contains(&bind) {
        ips.push(bind);
    }
    ips
}

/// A new self-signed ECDSA P-256 serving certificate for `dns_names` and `ips`, valid from an
/// hour ago for a year, with its PKCS#8 key.
pub fn self_signed(dns_names: &[String], ips: &[IpAddr]) -> Result<PemPair, CertError> {
    let rng = SystemRandom::new();
    let pkcs8 =
        EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).map_err(|_| CertError::GenerateKey)?;
    let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng)
        .map_err(|_| CertError::LoadKey)?;
    let now = jiff::Timestamp::now().as_second();
    let mut serial = [0u8; 16];
    rng.fill(&mut serial).map_err(|_| CertError::Randomness)?;
    let template = Template {
        serial,
        common_name: format!("{}@{now}", dns_names.first().map_or("localhost", String::as_str)),
        not_before: now - BACKDATE_SECONDS,
        not_after: now - BACKDATE_SECONDS + VALIDITY_SECONDS,
        dns_names,
        ips,
    };
    let tbs = template.tbs_certificate(key.public_key().as_ref())?;
    let signature = key.sign(&rng, &tbs).map_err(|_| CertError::Sign)?;
    let cert = der::sequence(&[tbs, der::ecdsa_with_sha256(), der::bit_string(signature.as_ref())]);
    Ok(PemPair { cert_pem: pem_encode("CERTIFICATE", &cert), key_pem: pem_encode("PRIVATE KEY", pkcs8.as_ref()) })
}

/// What goes into a generated certificate.
struct Template<'a> {
    serial: [u8; 16],
    common_name: String,
    /// Unix seconds.
    not_before: i64,
    not_after: i64,
    dns_names: &'a [String],
    ips: &'a [IpAddr],
}

impl Template<'_> {
    /// The DER `TBSCertificate`: v3, issuer = subject, with key usage, extended key usage
    /// (server auth), basic constraints (not a CA) and subject alternative names.
    fn tbs_certificate(&self, public_key: &[u8]) -> Result<Vec<u8>, CertError> {
        let mut serial = self.serial;
        // A positive INTEGER whose first byte is neither 0x00 nor sign-extending: minimal DER.
        serial[0] = (serial[0] & 0x7f) | 0x40;
        let name = der::name_with_common_name(&self.common_name);
        let validity = der::sequence(&[der::time(self.not_before)?, der::time(self.not_after)?]);
        Ok(der::sequence(&[
            der::explicit(0, &der::integer(&[2])),
            der::integer(&serial),
            der::ecdsa_with_sha256(),
            name.clone(),
            validity,
            name,
            der::p256_public_key_info(public_key),
            der::explicit(3, &self.extensions()),
        ]))
    }

    fn extensions(&self) -> Vec<u8> {
        let mut names: Vec<Vec<u8>> = self.dns_names.iter().map(|n| der::tagged(0x82, n.as_bytes())).collect();
        names.extend(self.ips.iter().map(|ip| match ip {
            IpAddr::V4(v4) => der::tagged(0x87, &v4.octets()),
            IpAddr::V6(v6) => der::tagged(0x87, &v6.octets()),
        }));
        der::sequence(&[
            // keyUsage: digitalSignature.
            der::extension(der::OID_KEY_USAGE, true, &der::tagged(0x03, &[0x07, 0x80])),
            // extKeyUsage: serverAuth.
            der::extension(der::OID_EXT_KEY_USAGE, false, &der::sequence(&[der::oid(der::OID_SERVER_AUTH)])),
            // basicConstraints: not a CA.
            der::extension(der::OID_BASIC_CONSTRAINTS, true, &der::sequence(&[])),
            der::extension(der::OID_SUBJECT_ALT_NAME, false, &der::sequence(&names)),
        ])
    }
}

/// The few DER constructs an X.509 certificate needs.
mod der {
    /// Object identifiers, as their DER content bytes.
    pub const OID_KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x0f];
    pub const OID_EXT_KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x25];
    pub const OID_BASIC_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x13];
    pub const OID_SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];
    /// 1.3.6.1.5.5.7.3.1
    pub const OID_SERVER_AUTH: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01];
    /// 2.5.4.3
    const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
    /// 1.2.840.10045.4.3.2
    const OID_ECDSA_WITH_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
    /// 1.2.840.10045.2.1
    const OID_EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
    /// 1.2.840.10045.3.1.7 (prime256v1)
    const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];

    pub use crate::x509::der::{extension, integer, tlv as tagged};

    pub fn sequence(items: &[Vec<u8>]) -> Vec<u8> {
        tagged(0x30, &items.concat())
    }

    fn set(items: &[Vec<u8>]) -> Vec<u8> {
        tagged(0x31, &items.concat())
    }

    pub fn oid(content: &[u8]) -> Vec<u8> {
        tagged(0x06, content)
    }

    /// A BIT STRING with no unused bits.
    pub fn bit_string(bytes: &[u8]) -> Vec<u8> {
        tagged(0x03, &[&[0u8][..], bytes].concat())
    }

    /// `[n] EXPLICIT`.
    pub fn explicit(n: u8, inner: &[u8]) -> Vec<u8> {
        tagged(0xa0 | n, inner)
    }

    pub fn ecdsa_with_sha256() -> Vec<u8> {
        sequence(&[oid(OID_ECDSA_WITH_SHA256)])
    }

    /// `SubjectPublicKeyInfo` of an uncompressed P-256 point.
    pub fn p256_public_key_info(point: &[u8]) -> Vec<u8> {
        sequence(&[sequence(&[oid(OID_EC_PUBLIC_KEY), oid(OID_P256)]), bit_string(point)])
    }

    /// A `Name` with one RDN: the common name as a UTF8String.
    pub fn name_with_common_name(cn: &str) -> Vec<u8> {
        sequence(&[set(&[sequence(&[oid(OID_COMMON_NAME), tagged(0x0c, cn.as_bytes())])])])
    }

    /// A `Time` from Unix seconds.
    pub fn time(unix_seconds: i64) -> Result<Vec<u8>, super::CertError> {
        let at = jiff::Timestamp::from_second(unix_seconds).map_err(super::CertError::Time)?;
        Ok(crate::x509::der::time(at))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustls::client::danger::ServerCertVerifier;
    use rustls_pki_types::{ServerName, UnixTime};

    use super::*;

    fn verify(pair: &PemPair, name: &str) -> Result<(), rustls::Error> {
        let cert = parse_pair(pair, "test").unwrap().chain.remove(0);
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert.clone()).unwrap();
        let provider = crate::client::tls::crypto_provider();
        let verifier =
            rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider).build().unwrap();
        let name = ServerName::try_from(name.to_string()).unwrap();
        verifier.verify_server_cert(&cert, &[], &name, &[], UnixTime::now()).map(|_| ())
    }

    #[test]
    fn self_signed_certificate_verifies_for_its_names_only() {
        let names = vec!["localhost".to_string(), "node-1.example".to_string()];
        let pair = self_signed(&names, &[IpAddr::from([127, 0, 0, 1]), "::1".parse().unwrap()]).unwrap();
        for name in ["localhost", "node-1.example", "127.0.0.1", "::1"] {
            verify(&pair, name).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert!(verify(&pair, "example.com").is_err());
        assert!(verify(&pair, "10.0.0.1").is_err());
    }

    #[test]
    fn self_signed_certificate_names_its_subject_and_key_matches() {
        let pair = self_signed(&["localhost".to_string()], &[]).unwrap();
        let parsed = parse_pair(&pair, "test").unwrap();
        let subject = crate::x509::subject(&parsed.chain[0]).unwrap();
        assert!(subject.common_name.starts_with("localhost@"), "{}", subject.common_name);
        let signer = rustls::crypto::ring::sign::any_supported_type(&parsed.key).unwrap();
        let certified = rustls::sign::CertifiedKey::new(parsed.chain, signer);
        certified.keys_match().unwrap();
    }

    #[test]
    fn der_lengths_use_the_long_form_past_127_bytes() {
        assert_eq!(der::tagged(0x04, &[1, 2]), [0x04, 0x02, 1, 2]);
        let long = der::tagged(0x04, &[0; 200]);
        assert_eq!(&long[..3], &[0x04, 0x81, 200]);
        let longer = der::tagged(0x04, &[0; 300]);
        assert_eq!(&longer[..4], &[0x04, 0x82, 0x01, 0x2c]);
    }

    #[test]
    fn times_switch_to_generalized_time_in_2050() {
        assert_eq!(der::time(0).unwrap(), der::tagged(0x17, b"700101000000Z"));
        let y2050 = 2_524_608_000; // 2050-01-01T00:00:00Z
        assert_eq!(der::time(y2050).unwrap(), der::tagged(0x18, b"20500101000000Z"));
    }

    #[test]
    fn cert_dir_pair_is_written_once_and_reused() {
        let dir = std::env::temp_dir().join(format!("kcm-certs-{}", crate::random::u64()));
        let loopback = IpAddr::from([127, 0, 0, 1]);
        let first = load_or_generate("", "", dir.to_str().unwrap(), loopback).unwrap();
        let second = load_or_generate("", "", dir.to_str().unwrap(), loopback).unwrap();
        assert_eq!(first.chain, second.chain);
        let (cert, key) = pair_paths(&dir);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
        std::fs::remove_file(&cert).unwrap();
        let err = load_or_generate("", "", dir.to_str().unwrap(), loopback).unwrap_err().to_string();
        assert!(err.contains("certificate and key must be supplied as a pair"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cert_and_key_files_go_together() {
        let err = load_or_generate("a.crt", "", "", IpAddr::from([0, 0, 0, 0])).unwrap_err().to_string();
        assert!(err.contains("missing filename for serving cert"), "{err}");
    }
}
