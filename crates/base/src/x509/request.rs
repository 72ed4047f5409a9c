//! PKCS#10 certificate requests as Go's `x509.ParseCertificateRequest` reads them (what the CSR
//! signer, approver and the sandbox's CSR validation and admission need), and
//! `CertificateRequest.CheckSignature`, verified with `ring`.

use std::net::IpAddr;

use ring::signature;

use super::oid::*;
use super::{pem_blocks, read, skip};

/// The subject alternative names Go's `parseSANExtension` keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubjectAltNames {
    /// DNS names.
    pub dns_names: Vec<String>,
    /// Email addresses.
    pub email_addresses: Vec<String>,
    /// IP addresses.
    pub ip_addresses: Vec<IpAddr>,
    /// URIs.
    pub uris: Vec<String>,
}

/// A subject as Go's `pkix.Name` keeps it after `FillFromRDNSequence`: other attributes are lost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Name {
    /// The subject's C values.
    pub country: Vec<String>,
    /// The subject's ST values.
    pub province: Vec<String>,
    /// The subject's L values.
    pub locality: Vec<String>,
    /// The subject's STREET values.
    pub street_address: Vec<String>,
    /// The subject's POSTALCODE values.
    pub postal_code: Vec<String>,
    /// The subject's O (the groups of a client certificate) values.
    pub organization: Vec<String>,
    /// The subject's OU values.
    pub organizational_unit: Vec<String>,
    /// The subject's CN (the user of a client certificate).
    pub common_name: String,
    /// The subject's SERIALNUMBER.
    pub serial_number: String,
}

/// A parsed PKCS#10 request: what `x509.CertificateRequest` exposes and the signer uses.
#[derive(Debug, Clone)]
pub struct CertificateRequest {
    /// The subject.
    pub subject: Name,
    /// DNS subject alternative names.
    pub dns_names: Vec<String>,
    /// Email subject alternative names.
    pub email_addresses: Vec<String>,
    /// IP subject alternative names.
    pub ip_addresses: Vec<IpAddr>,
    /// URI subject alternative names.
    pub uris: Vec<String>,
    /// The DER SubjectPublicKeyInfo, copied into the certificate as is.
    pub spki: Vec<u8>,
    /// The DER certificationRequestInfo the signature covers.
    pub info: Vec<u8>,
    signature_algorithm: Vec<u8>,
    signature: Vec<u8>,
}

/// One DER element: the whole element, its content and what follows it.
pub fn element(input: &[u8], tag: u8) -> Option<(&[u8], &[u8], &[u8])> {
    let (content, rest) = read(input, tag)?;
    Some((&input[..input.len() - rest.len()], content, rest))
}

/// A BIT STRING's bytes (no unused bits expected).
pub fn bit_string(content: &[u8]) -> Option<&[u8]> {
    content.split_first().filter(|(unused, _)| **unused == 0).map(|(_, bits)| bits)
}

/// A certificate request that cannot be read or whose signature does not hold, in the words of
/// Go's `crypto/x509` and `capihelper` (they reach the CSR's conditions and Events).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The first PEM block is not a request.
    #[error("PEM block type must be CERTIFICATE REQUEST")]
    NotARequest,
    /// The DER is not a CertificationRequest.
    #[error("x509: malformed certificate request")]
    Malformed,
    /// A public key that cannot be read, or of an algorithm Go does not know.
    #[error("x509: unsupported public key")]
    UnsupportedPublicKey,
    /// An ECDSA key on a curve other than P-256 and P-384.
    #[error("x509: unsupported elliptic curve")]
    UnsupportedCurve,
    /// A signature algorithm that cannot be verified (Go's `ErrUnsupportedAlgorithm`).
    #[error("x509: cannot verify signature: algorithm unimplemented")]
    UnsupportedAlgorithm,
    /// A signature algorithm Go refuses as insecure (MD5).
    #[error("x509: cannot verify signature: insecure algorithm {name}")]
    InsecureAlgorithm {
        /// Go's name of the algorithm.
        name: &'static str,
    },
    /// A signature algorithm for another key family than the request's key.
    #[error("x509: signature algorithm specifies an {expected} public key, but have public key of type {have}")]
    KeyMismatch {
        /// The family the algorithm needs (`RSA`, `ECDSA`, `Ed25519`).
        expected: &'static str,
        /// Go's `%T` of the key the request has.
        have: &'static str,
    },
    /// An RSA signature that does not verify.
    #[error("crypto/rsa: verification error")]
    RsaVerification,
    /// An ECDSA signature that does not verify.
    #[error("x509: ECDSA verification failure")]
    EcdsaVerification,
    /// An Ed25519 signature that does not verify.
    #[error("x509: Ed25519 verification failure")]
    Ed25519Verification,
}

/// `capihelper.ParseCSR`: the first PEM block must be a CERTIFICATE REQUEST.
pub fn parse_csr(pem: &[u8]) -> Result<CertificateRequest, RequestError> {
    match pem_blocks(pem).into_iter().next() {
        Some((label, der)) if label == "CERTIFICATE REQUEST" => parse_csr_der(&der),
        _ => Err(RequestError::NotARequest),
    }
}

/// `x509.ParseCertificateRequest`.
pub fn parse_csr_der(der: &[u8]) -> Result<CertificateRequest, RequestError> {
    let malformed = || RequestError::Malformed;
    let (request, _) = read(der, 0x30).ok_or_else(malformed)?;
    let (info, info_content, rest) = element(request, 0x30).ok_or_else(malformed)?;
    let (algorithm, rest) = read(rest, 0x30).ok_or_else(malformed)?;
    let (signature_oid, _) = read(algorithm, 0x06).ok_or_else(malformed)?;
    let (signature, _) = read(rest, 0x03).ok_or_else(malformed)?;
    let signature = bit_string(signature).ok_or_else(malformed)?;

    let fields = skip(info_content).ok_or_else(malformed)?; // version
    let (subject, _, fields) = element(fields, 0x30).ok_or_else(malformed)?;
    let (spki, _, fields) = element(fields, 0x30).ok_or_else(malformed)?;
    let mut csr = CertificateRequest {
        subject: parse_name(subject).ok_or_else(malformed)?,
        dns_names: Vec::new(),
        email_addresses: Vec::new(),
        ip_addresses: Vec::new(),
        uris: Vec::new(),
        spki: spki.to_vec(),
        info: info.to_vec(),
        signature_algorithm: signature_oid.to_vec(),
        signature: signature.to_vec(),
    };
    if let Some((attributes, _)) = read(fields, 0xa0) {
        read_attributes(attributes, &mut csr).ok_or_else(malformed)?;
    }
    Ok(csr)
}

/// The `extensionRequest` attribute: only its subject alternative names matter here.
fn read_attributes(mut attributes: &[u8], csr: &mut CertificateRequest) -> Option<()> {
    while !attributes.is_empty() {
        let (attribute, next) = read(attributes, 0x30)?;
        attributes = next;
        let (oid, values) = read(attribute, 0x06)?;
        if oid != OID_EXTENSION_REQUEST {
            continue;
        }
        let (mut values, _) = read(values, 0x31)?;
        while !values.is_empty() {
            let (mut extensions, next) = read(values, 0x30)?;
            values = next;
            while !extensions.is_empty() {
                let (extension, next) = read(extensions, 0x30)?;
                extensions = next;
                let (oid, rest) = read(extension, 0x06)?;
                let rest = if rest.first() == Some(&0x01) { skip(rest)? } else { rest };
                let (value, _) = read(rest, 0x04)?;
                if oid == OID_SAN {
                    let mut sans = SubjectAltNames::default();
                    read_general_names(value, &mut sans)?;
                    csr.dns_names = sans.dns_names;
                    csr.email_addresses = sans.email_addresses;
                    csr.ip_addresses = sans.ip_addresses;
                    csr.uris = sans.uris;
                }
            }
        }
    }
    Some(())
}

/// `parseSANExtension`: DNS names, emails, URIs and IPs; other name forms are ignored.
pub fn read_general_names(value: &[u8], csr: &mut SubjectAltNames) -> Option<()> {
    let (mut names, _) = read(value, 0x30)?;
    while !names.is_empty() {
        let tag = *names.first()?;
        let (content, next) = read(names, tag)?;
        names = next;
        let text = || String::from_utf8_lossy(content).into_owned();
        match tag {
            0x81 => csr.email_addresses.push(text()),
            0x82 => csr.dns_names.push(text()),
            0x86 => csr.uris.push(text()),
            0x87 => csr.ip_addresses.push(match content.len() {
                4 => IpAddr::from(<[u8; 4]>::try_from(content).ok()?),
                16 => IpAddr::from(<[u8; 16]>::try_from(content).ok()?),
                _ => return None,
            }),
            _ => {}
        }
    }
    Some(())
}

/// `pkix.Name.FillFromRDNSequence` of a DER Name.
fn parse_name(der: &[u8]) -> Option<Name> {
    let (mut rdns, _) = read(der, 0x30)?;
    let mut name = Name::default();
    while !rdns.is_empty() {
        let (mut set, next) = read(rdns, 0x31)?;
        rdns = next;
        while !set.is_empty() {
            let (attribute, next) = read(set, 0x30)?;
            set = next;
            let (oid, value) = read(attribute, 0x06)?;
            let tag = *value.first()?;
            let (content, _) = read(value, tag)?;
            if !matches!(tag, 0x0c | 0x13 | 0x16 | 0x14 | 0x12) {
                continue;
            }
            let text = String::from_utf8_lossy(content).into_owned();
            match oid {
                OID_COMMON_NAME => name.common_name = text,
                OID_SERIAL_NUMBER => name.serial_number = text,
                OID_COUNTRY => name.country.push(text),
                OID_LOCALITY => name.locality.push(text),
                OID_PROVINCE => name.province.push(text),
                OID_STREET => name.street_address.push(text),
                OID_ORGANIZATION => name.organization.push(text),
                OID_ORGANIZATIONAL_UNIT => name.organizational_unit.push(text),
                OID_POSTAL_CODE => name.postal_code.push(text),
                _ => {}
            }
        }
    }
    Some(name)
}

impl CertificateRequest {
    /// `CertificateRequest.CheckSignature`.
    pub fn check_signature(&self) -> Result<(), RequestError> {
        let (algorithm, key) = public_key(&self.spki)?;
        let Some(&(_, name, expected, verify)) =
            SIGNATURE_ALGORITHMS.iter().find(|(oid, ..)| *oid == self.signature_algorithm.as_slice())
        else {
            return Err(RequestError::UnsupportedAlgorithm);
        };
        if expected == Expected::Insecure {
            return Err(RequestError::InsecureAlgorithm { name });
        }
        let family = algorithm.family();
        if expected != family {
            return Err(RequestError::KeyMismatch { expected: expected.name(), have: family.go_type() });
        }
        let verify = verify(algorithm).ok_or(RequestError::UnsupportedAlgorithm)?;
        // ring's `Unspecified` says no more than the variant does.
        signature::UnparsedPublicKey::new(verify, key).verify(&self.info, &self.signature).map_err(|_| match family {
            Expected::Rsa => RequestError::RsaVerification,
            Expected::Ecdsa => RequestError::EcdsaVerification,
            _ => RequestError::Ed25519Verification,
        })
    }
}

/// The public key family a signature algorithm needs (Go's `pubKeyAlgo`), or an insecure one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expected {
    Rsa,
    Ecdsa,
    Ed25519,
    Insecure,
}

impl Expected {
    fn name(self) -> &'static str {
        match self {
            Expected::Rsa => "RSA",
            Expected::Ecdsa => "ECDSA",
            Expected::Ed25519 => "Ed25519",
            Expected::Insecure => "",
        }
    }

    /// How Go's `%T` prints a public key of this family.
    fn go_type(self) -> &'static str {
        match self {
            Expected::Rsa => "*rsa.PublicKey",
            Expected::Ecdsa => "*ecdsa.PublicKey",
            _ => "ed25519.PublicKey",
        }
    }
}

type Verifier = fn(KeyAlgorithm) -> Option<&'static dyn signature::VerificationAlgorithm>;

/// Go's `signatureAlgorithmDetails` that ring can verify, by OID: the name, the key family and
/// ring's algorithm for the key's curve. SHA-1 is allowed, as for every CSR in Go; RSA keys
/// from 1024 bits verify where ring allows it (Go's minimum).
const SIGNATURE_ALGORITHMS: &[(&[u8], &str, Expected, Verifier)] = &[
    (OID_MD5_RSA, "MD5-RSA", Expected::Insecure, |_| None),
    (OID_SHA1_RSA, "SHA1-RSA", Expected::Rsa, |_| Some(&signature::RSA_PKCS1_1024_8192_SHA1_FOR_LEGACY_USE_ONLY)),
    (OID_SHA256_RSA, "SHA256-RSA", Expected::Rsa, |_| Some(&signature::RSA_PKCS1_1024_8192_SHA256_FOR_LEGACY_USE_ONLY)),
    (OID_SHA384_RSA, "SHA384-RSA", Expected::Rsa, |_| Some(&signature::RSA_PKCS1_2048_8192_SHA384)),
    (OID_SHA512_RSA, "SHA512-RSA", Expected::Rsa, |_| Some(&signature::RSA_PKCS1_1024_8192_SHA512_FOR_LEGACY_USE_ONLY)),
    (OID_ECDSA_SHA256, "ECDSA-SHA256", Expected::Ecdsa, |key| match key {
        KeyAlgorithm::P256 => Some(&signature::ECDSA_P256_SHA256_ASN1),
        _ => Some(&signature::ECDSA_P384_SHA256_ASN1),
    }),
    (OID_ECDSA_SHA384, "ECDSA-SHA384", Expected::Ecdsa, |key| match key {
        KeyAlgorithm::P256 => Some(&signature::ECDSA_P256_SHA384_ASN1),
        _ => Some(&signature::ECDSA_P384_SHA384_ASN1),
    }),
    (OID_ED25519, "Ed25519", Expected::Ed25519, |_| Some(&signature::ED25519)),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyAlgorithm {
    Rsa,
    P256,
    P384,
    Ed25519,
}

impl KeyAlgorithm {
    fn family(self) -> Expected {
        match self {
            KeyAlgorithm::Rsa => Expected::Rsa,
            KeyAlgorithm::P256 | KeyAlgorithm::P384 => Expected::Ecdsa,
            KeyAlgorithm::Ed25519 => Expected::Ed25519,
        }
    }
}

/// The algorithm and raw key of a SubjectPublicKeyInfo.
fn public_key(spki: &[u8]) -> Result<(KeyAlgorithm, &[u8]), RequestError> {
    let bad = || RequestError::UnsupportedPublicKey;
    let (content, _) = read(spki, 0x30).ok_or_else(bad)?;
    let (algorithm, rest) = read(content, 0x30).ok_or_else(bad)?;
    let (key, _) = read(rest, 0x03).ok_or_else(bad)?;
    let key = bit_string(key).ok_or_else(bad)?;
    let (oid, parameters) = read(algorithm, 0x06).ok_or_else(bad)?;
    let kind = match oid {
        OID_RSA => KeyAlgorithm::Rsa,
        OID_ED25519 => KeyAlgorithm::Ed25519,
        OID_EC_PUBLIC_KEY => match read(parameters, 0x06).map(|(curve, _)| curve) {
            Some(OID_P256) => KeyAlgorithm::P256,
            Some(OID_P384) => KeyAlgorithm::P384,
            _ => return Err(RequestError::UnsupportedCurve),
        },
        _ => return Err(bad()),
    };
    Ok((kind, key))
}

/// Requests made with rcgen, for unit tests here and in the CSR controllers and the sandbox.
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures {
    use super::*;

    /// A request's PEM for `cn` in `orgs` with DNS or IP `sans`.
    pub fn request_pem(cn: &str, orgs: &[&str], sans: &[&str]) -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(rcgen::DnType::CommonName, cn);
        for org in orgs {
            params.distinguished_name.push(rcgen::DnType::OrganizationName, *org);
        }
        params.serialize_request(&key).unwrap().pem().unwrap()
    }

    /// The same request, parsed.
    pub fn request(cn: &str, orgs: &[&str], sans: &[&str]) -> CertificateRequest {
        parse_csr(request_pem(cn, orgs, sans).as_bytes()).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::request;
    use super::*;

    #[test]
    fn parses_a_request_and_checks_its_signature() {
        let csr = request("system:node:n1", &["system:nodes"], &["n1.example", "10.0.0.1"]);
        assert_eq!(csr.subject.common_name, "system:node:n1");
        assert_eq!(csr.subject.organization, ["system:nodes"]);
        assert_eq!(csr.dns_names, ["n1.example"]);
        assert_eq!(csr.ip_addresses, ["10.0.0.1".parse::<IpAddr>().unwrap()]);
        assert_eq!(csr.check_signature(), Ok(()));
        let mut tampered = csr.clone();
        *tampered.info.last_mut().unwrap() ^= 1;
        assert_eq!(tampered.check_signature().unwrap_err().to_string(), "x509: ECDSA verification failure");
        assert_eq!(parse_csr(b"nothing").unwrap_err().to_string(), "PEM block type must be CERTIFICATE REQUEST");
        assert_eq!(parse_csr_der(b"junk").unwrap_err().to_string(), "x509: malformed certificate request");
    }

    #[test]
    fn signature_algorithms_are_checked_as_go_does() {
        let csr = request("alice", &[], &[]);
        let with_algorithm = |oid: &[u8]| CertificateRequest { signature_algorithm: oid.to_vec(), ..csr.clone() };
        assert_eq!(
            with_algorithm(OID_SHA256_RSA).check_signature().unwrap_err().to_string(),
            "x509: signature algorithm specifies an RSA public key, but have public key of type *ecdsa.PublicKey"
        );
        assert_eq!(
            with_algorithm(OID_MD5_RSA).check_signature().unwrap_err().to_string(),
            "x509: cannot verify signature: insecure algorithm MD5-RSA"
        );
        assert_eq!(
            with_algorithm(&[0x2a, 0x03]).check_signature().unwrap_err().to_string(),
            "x509: cannot verify signature: algorithm unimplemented"
        );
    }
}
