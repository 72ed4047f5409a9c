//! PKCS#10 certificate requests as Go's `x509.ParseCertificateRequest` reads them (what the CSR
//! signer, approver and the sandbox's CSR validation and admission need), and
//! `CertificateRequest.CheckSignature`, verified with `ring`.

use std::net::IpAddr;

use ring::signature;

use super::oid::*;
use super::strings::{RequestValue, request_value};
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
    /// The signature's AlgorithmIdentifier: its OID.
    signature_algorithm: Vec<u8>,
    /// Its parameters (RSASSA-PSS has some), as they are.
    signature_parameters: Vec<u8>,
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
    /// An extension requested twice.
    #[error("x509: certificate request contains duplicate requested extensions")]
    DuplicateExtensions,
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

/// `x509.ParseCertificateRequest`, with `encoding/asn1`'s reading of each part.
pub fn parse_csr_der(der: &[u8]) -> Result<CertificateRequest, RequestError> {
    let malformed = || RequestError::Malformed;
    let (request, trailing) = read(der, 0x30).ok_or_else(malformed)?;
    if !trailing.is_empty() {
        return Err(malformed());
    }
    let (info, info_content, rest) = element(request, 0x30).ok_or_else(malformed)?;
    let (algorithm, rest) = read(rest, 0x30).ok_or_else(malformed)?;
    let (signature_oid, signature_parameters) = read(algorithm, 0x06).ok_or_else(malformed)?;
    let (signature, _) = read(rest, 0x03).ok_or_else(malformed)?;
    let signature = right_align(signature).ok_or_else(malformed)?;

    let (_version, fields) = read(info_content, 0x02).ok_or_else(malformed)?;
    let (subject, _, fields) = any_element(fields).ok_or_else(malformed)?;
    let (spki, _, fields) = element(fields, 0x30).ok_or_else(malformed)?;
    let (attributes, _) = read(fields, 0xa0).ok_or_else(malformed)?;
    let sans = read_extension_request(attributes)?;
    Ok(CertificateRequest {
        subject: parse_name(subject).ok_or_else(malformed)?,
        dns_names: sans.dns_names,
        email_addresses: sans.email_addresses,
        ip_addresses: sans.ip_addresses,
        uris: sans.uris,
        spki: spki.to_vec(),
        info: info.to_vec(),
        signature_algorithm: signature_oid.to_vec(),
        signature_parameters: signature_parameters.to_vec(),
        signature,
    })
}

/// One element of any tag: the whole element, its content and what follows it.
fn any_element(input: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    element(input, *input.first()?)
}

/// `asn1.BitString.RightAlign` of a BIT STRING's content, after `encoding/asn1`'s checks of
/// its padding bits.
fn right_align(content: &[u8]) -> Option<Vec<u8>> {
    let (&padding, bytes) = content.split_first()?;
    let last = bytes.last().copied().unwrap_or(0);
    if padding > 7 || (bytes.is_empty() && padding > 0) || last & ((1u8 << padding) - 1) != 0 {
        return None;
    }
    if padding == 0 {
        return Some(bytes.to_vec());
    }
    let mut aligned = Vec::with_capacity(bytes.len());
    aligned.push(bytes[0] >> padding);
    aligned.extend(bytes.windows(2).map(|w| (w[0] << (8 - padding)) | (w[1] >> padding)));
    Some(aligned)
}

/// `parseCSRExtensions` and the SAN extension it finds. An attribute that does not parse, or
/// has no value, is ignored; of an `extensionRequest`, only the first value is read, and an
/// extension requested twice makes the request invalid.
fn read_extension_request(mut attributes: &[u8]) -> Result<SubjectAltNames, RequestError> {
    let malformed = || RequestError::Malformed;
    let mut requested: Vec<&[u8]> = Vec::new();
    let mut sans = SubjectAltNames::default();
    while !attributes.is_empty() {
        let (attribute, _, next) = any_element(attributes).ok_or_else(malformed)?;
        attributes = next;
        let Some((oid, first_value)) = attribute_first_value(attribute) else { continue };
        if oid != OID_EXTENSION_REQUEST {
            continue;
        }
        let (mut extensions, _) = read(first_value, 0x30).ok_or_else(malformed)?;
        while !extensions.is_empty() {
            let (extension, next) = read(extensions, 0x30).ok_or_else(malformed)?;
            extensions = next;
            let (oid, value) = read_extension(extension).ok_or_else(malformed)?;
            if requested.contains(&oid) {
                return Err(RequestError::DuplicateExtensions);
            }
            requested.push(oid);
            if oid == OID_SAN {
                sans = SubjectAltNames::default();
                read_general_names(value, &mut sans).ok_or_else(malformed)?;
            }
        }
    }
    Ok(sans)
}

/// An attribute's type and first value, if it is a SEQUENCE of an OID and a non-empty SET.
fn attribute_first_value(attribute: &[u8]) -> Option<(&[u8], &[u8])> {
    let (content, _) = read(attribute, 0x30)?;
    let (oid, rest) = read(content, 0x06)?;
    let (values, _) = read(rest, 0x31)?;
    let (first, _, _) = any_element(values)?;
    let mut remaining = values;
    while !remaining.is_empty() {
        remaining = skip(remaining)?;
    }
    Some((oid, first))
}

/// One `pkix.Extension`: its OID and value (the critical flag, when present, must be a DER
/// BOOLEAN).
fn read_extension(extension: &[u8]) -> Option<(&[u8], &[u8])> {
    let (oid, rest) = read(extension, 0x06)?;
    let rest = match rest.first() {
        Some(0x01) => {
            let (flag, rest) = read(rest, 0x01)?;
            matches!(flag, [0x00] | [0xff]).then_some(rest)?
        }
        _ => rest,
    };
    let (value, _) = read(rest, 0x04)?;
    Some((oid, value))
}

/// `parseSANExtension`: DNS names, emails, URIs and IPs; other name forms are ignored.
pub fn read_general_names(value: &[u8], csr: &mut SubjectAltNames) -> Option<()> {
    let (mut names, _) = read(value, 0x30)?;
    while !names.is_empty() {
        let tag = *names.first()?;
        let (content, next) = read(names, tag)?;
        names = next;
        // Go refuses a name that is not IA5 (ASCII).
        let text = || content.is_ascii().then(|| String::from_utf8_lossy(content).into_owned());
        match tag {
            0x81 => csr.email_addresses.push(text()?),
            0x82 => csr.dns_names.push(text()?),
            0x86 => csr.uris.push(text()?),
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

/// `pkix.Name.FillFromRDNSequence` of a DER Name, its values read as `encoding/asn1` reads
/// them into `any` (see [`super::strings`]); `None` if Go would refuse the request.
fn parse_name(der: &[u8]) -> Option<Name> {
    let (mut rdns, rest) = read(der, 0x30)?;
    if !rest.is_empty() {
        return None;
    }
    let mut name = Name::default();
    while !rdns.is_empty() {
        let (mut set, next) = read(rdns, 0x31)?;
        rdns = next;
        while !set.is_empty() {
            let (attribute, next) = read(set, 0x30)?;
            set = next;
            let (oid, value) = read(attribute, 0x06)?;
            let (_, content, _) = any_element(value)?;
            let RequestValue::Text(text) = request_value(*value.first()?, content).ok()? else { continue };
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
        if self.signature_algorithm == OID_RSA_PSS {
            return self.check_pss_signature(algorithm, key);
        }
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

impl CertificateRequest {
    /// An RSASSA-PSS signature, with the parameters Go accepts (`getSignatureAlgorithmFromAI`):
    /// SHA-256, -384 or -512, MGF1 with the same hash, a salt as long as the hash, the usual
    /// trailer. ring verifies PSS from 2048 bits on (Go from 1024).
    fn check_pss_signature(&self, algorithm: KeyAlgorithm, key: &[u8]) -> Result<(), RequestError> {
        let verify = pss_algorithm(&self.signature_parameters).ok_or(RequestError::UnsupportedAlgorithm)?;
        if algorithm != KeyAlgorithm::Rsa {
            return Err(RequestError::KeyMismatch { expected: "RSA", have: algorithm.family().go_type() });
        }
        signature::UnparsedPublicKey::new(verify, key)
            .verify(&self.info, &self.signature)
            .map_err(|_| RequestError::RsaVerification)
    }
}

/// ring's PSS verification for RSASSA-PSS `parameters`, if they are ones Go accepts.
fn pss_algorithm(parameters: &[u8]) -> Option<&'static signature::RsaParameters> {
    let (content, _) = read(parameters, 0x30)?;
    let (hash, rest) = read(content, 0xa0)?;
    let (mgf, rest) = read(rest, 0xa1)?;
    let (salt, rest) = read(rest, 0xa2)?;
    let hash = algorithm_without_parameters(hash)?;
    let (mgf, _) = read(mgf, 0x30)?;
    let (mgf_oid, mgf_hash) = read(mgf, 0x06)?;
    if mgf_oid != OID_MGF1 || algorithm_without_parameters(mgf_hash)? != hash {
        return None;
    }
    let trailer_is_default = match rest.first() {
        None => true,
        Some(_) => read(rest, 0xa3).and_then(|(t, _)| read(t, 0x02)).is_some_and(|(t, _)| t == [1]),
    };
    let (salt, _) = read(salt, 0x02)?;
    match (hash, salt, trailer_is_default) {
        (OID_SHA256, [32], true) => Some(&signature::RSA_PSS_2048_8192_SHA256),
        (OID_SHA384, [48], true) => Some(&signature::RSA_PSS_2048_8192_SHA384),
        (OID_SHA512, [64], true) => Some(&signature::RSA_PSS_2048_8192_SHA512),
        _ => None,
    }
}

/// The OID of an AlgorithmIdentifier whose parameters are absent or NULL.
fn algorithm_without_parameters(identifier: &[u8]) -> Option<&[u8]> {
    let (content, _) = read(identifier, 0x30)?;
    let (oid, parameters) = read(content, 0x06)?;
    matches!(parameters, [] | [0x05, 0x00]).then_some(oid)
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

    /// A 2048-bit RSA key as kubeadm's CA keys are, PKCS#1 (`RSA PRIVATE KEY`).
    pub const RSA_KEY_PKCS1_PEM: &str = include_str!("../jwt/testdata/rsa-pkcs1.pem");
    /// The same key, PKCS#8 (`PRIVATE KEY`), as rcgen reads it.
    pub const RSA_KEY_PKCS8_PEM: &str = include_str!("../jwt/testdata/rsa-pkcs8.pem");

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

    /// A request written byte by byte ([`der::certification_request`]) around a fresh P-256
    /// key, signed with ECDSA-SHA256: for requests no library writes (a CN as BMPString, two
    /// `extensionRequest` values, …).
    ///
    /// [`der::certification_request`]: crate::x509::der::certification_request
    pub fn signed_request_der(subject: &[u8], attributes: &[u8]) -> Vec<u8> {
        use rcgen::{PublicKeyData, SigningKey};
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        crate::x509::der::certification_request(
            subject,
            &key.subject_public_key_info(),
            attributes,
            OID_ECDSA_SHA256,
            |info| key.sign(info),
        )
        .unwrap()
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

    /// A BMPString of `text`.
    fn bmp(text: &str) -> Vec<u8> {
        text.encode_utf16().flat_map(u16::to_be_bytes).collect()
    }

    #[test]
    fn subjects_read_as_go_reads_a_request() {
        use super::fixtures::signed_request_der;
        use crate::x509::der::name as name_der;
        // Go's last CN wins, whatever its string type: a BMPString CN after a PrintableString
        // one is the user, not the first.
        let cn_twice = name_der(&[
            (OID_COMMON_NAME, 0x13, b"system:kube-controller-manager"),
            (OID_COMMON_NAME, 0x1e, &bmp("alice")),
            (OID_ORGANIZATION, 0x1e, &bmp("dev")),
        ]);
        let csr = parse_csr_der(&signed_request_der(&cn_twice, &[])).unwrap();
        assert_eq!(csr.subject.common_name, "alice");
        assert_eq!(csr.subject.organization, ["dev"]);
        assert_eq!(csr.check_signature(), Ok(()));
        // A VisibleString is not a string to Go: the attribute is ignored.
        let visible = name_der(&[(OID_COMMON_NAME, 0x13, b"bob"), (OID_COMMON_NAME, 0x1a, b"mallory")]);
        assert_eq!(parse_csr_der(&signed_request_der(&visible, &[])).unwrap().subject.common_name, "bob");
        // A T61String is Latin-1.
        let t61 = name_der(&[(OID_COMMON_NAME, 0x14, b"alice\xff")]);
        assert_eq!(parse_csr_der(&signed_request_der(&t61, &[])).unwrap().subject.common_name, "alice\u{ff}");
        // Values Go refuses make the request malformed (kube-apiserver refuses it at create).
        for bad in [(0x13, &b"a@b"[..]), (0x0c, b"\xff"), (0x1e, b"odd"), (0x16, b"\x80")] {
            let name = name_der(&[(OID_COMMON_NAME, bad.0, bad.1)]);
            assert!(parse_csr_der(&signed_request_der(&name, &[])).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn only_the_first_value_of_an_extension_request_is_read() {
        use super::fixtures::signed_request_der;
        use crate::x509::der::{extension_request, name as name_der, san_dns_extensions as san_extensions};
        let subject = name_der(&[(OID_COMMON_NAME, 0x13, b"system:node:n1")]);
        let attribute =
            extension_request(&[san_extensions(&["n1.example"]), san_extensions(&["kubernetes.default.svc"])]);
        let csr = parse_csr_der(&signed_request_der(&subject, &attribute)).unwrap();
        assert_eq!(csr.dns_names, ["n1.example"], "Go reads Values[0] only");
        // An empty SAN in the second value does not hide the first one's names either.
        let attribute = extension_request(&[san_extensions(&["n1.example"]), san_extensions(&[])]);
        assert_eq!(parse_csr_der(&signed_request_der(&subject, &attribute)).unwrap().dns_names, ["n1.example"]);
        // An extension requested twice, in one attribute or in two, is refused.
        let twice =
            [extension_request(&[san_extensions(&["a"])]), extension_request(&[san_extensions(&["b"])])].concat();
        let refused = parse_csr_der(&signed_request_der(&subject, &twice)).unwrap_err();
        assert_eq!(refused.to_string(), "x509: certificate request contains duplicate requested extensions");
        // An attribute that does not parse (here a non-minimal length) is ignored, as Go ignores it.
        let mut unreadable = extension_request(&[san_extensions(&["kubernetes.default.svc"])]);
        let set_at = unreadable.iter().position(|b| *b == 0x31).unwrap();
        let set_len = unreadable[set_at + 1];
        unreadable.splice(set_at + 1..set_at + 2, [0x81, set_len]);
        unreadable[1] += 1;
        let both = [extension_request(&[san_extensions(&["n1.example"])]), unreadable].concat();
        assert_eq!(parse_csr_der(&signed_request_der(&subject, &both)).unwrap().dns_names, ["n1.example"]);
    }

    #[test]
    fn signature_bits_are_right_aligned_as_go_does() {
        assert_eq!(right_align(&[0, 0xab, 0xcd]), Some(vec![0xab, 0xcd]));
        assert_eq!(right_align(&[4, 0xab, 0xc0]), Some(vec![0x0a, 0xbc]));
        assert_eq!(right_align(&[4, 0xab, 0xc1]), None, "padding bits must be zero");
        assert_eq!(right_align(&[8, 0xab]), None);
        assert_eq!(right_align(&[1]), None);
        assert_eq!(right_align(&[0]), Some(vec![]));
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
