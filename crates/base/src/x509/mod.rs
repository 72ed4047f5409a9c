//! Just enough X.509: who a client certificate names (the subject's common name, the Kubernetes
//! user, and organisations, its groups, as kube-apiserver's x509 authenticator maps them), PEM,
//! DER reading and writing, certificate requests (`request`) and certificates (`certificate`).

pub mod certificate;
pub mod oid;
pub mod pem;
pub mod request;
pub mod samples;
pub mod strings;

use oid::{OID_COMMON_NAME, OID_ORGANIZATION};

/// The user a client certificate authenticates as.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CertificateSubject {
    /// The subject's common name: the user name.
    pub common_name: String,
    /// The subject's organizations: the user's groups.
    pub organizations: Vec<String>,
}

/// A certificate whose subject cannot be read: the part of the DER that is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SubjectError {
    /// Not a DER SEQUENCE.
    #[error("not a DER certificate")]
    NotDer,
    /// No tbsCertificate SEQUENCE.
    #[error("no tbsCertificate")]
    NoTbsCertificate,
    /// A field before the subject cannot be skipped (`version`, `serialNumber`, `signature`,
    /// `issuer`, `validity`).
    #[error("bad {field}")]
    BadField {
        /// The field's ASN.1 name.
        field: &'static str,
    },
    /// No subject Name after the validity.
    #[error("no subject")]
    NoSubject,
    /// A relative distinguished name that is not a SET.
    #[error("bad subject RDN")]
    BadRdn,
    /// An attribute that is not a SEQUENCE.
    #[error("bad subject attribute")]
    BadAttribute,
    /// An attribute without an OID.
    #[error("bad attribute type")]
    BadAttributeType,
    /// An attribute value that is not a string.
    #[error("bad attribute value")]
    BadAttributeValue,
}

/// Reads the subject of a DER-encoded X.509 certificate.
pub fn subject(der: &[u8]) -> Result<CertificateSubject, SubjectError> {
    let (certificate, _) = read(der, 0x30).ok_or(SubjectError::NotDer)?;
    let (tbs, _) = read(certificate, 0x30).ok_or(SubjectError::NoTbsCertificate)?;
    let mut rest = tbs;
    // Optional explicit [0] version.
    if rest.first() == Some(&0xa0) {
        rest = skip(rest).ok_or(SubjectError::BadField { field: "version" })?;
    }
    // serialNumber, signature, issuer, validity, then subject.
    for field in ["serialNumber", "signature", "issuer", "validity"] {
        rest = skip(rest).ok_or(SubjectError::BadField { field })?;
    }
    let (name, _) = read(rest, 0x30).ok_or(SubjectError::NoSubject)?;
    read_name(name)
}

/// The common name and organizations of a DER Name's content.
fn read_name(name: &[u8]) -> Result<CertificateSubject, SubjectError> {
    let mut subject = CertificateSubject::default();
    let mut rdns = name;
    while !rdns.is_empty() {
        let (set, next) = read(rdns, 0x31).ok_or(SubjectError::BadRdn)?;
        rdns = next;
        let mut attributes = set;
        while !attributes.is_empty() {
            let (attribute, next) = read(attributes, 0x30).ok_or(SubjectError::BadAttribute)?;
            attributes = next;
            let (oid, value) = read(attribute, 0x06).ok_or(SubjectError::BadAttributeType)?;
            let text = string_value(value).ok_or(SubjectError::BadAttributeValue)?;
            if oid == OID_COMMON_NAME {
                subject.common_name = text;
            } else if oid == OID_ORGANIZATION {
                subject.organizations.push(text);
            }
        }
    }
    Ok(subject)
}

/// A PEM block of `label` around `der`, base64 in 64-column lines as Go's `pem.Encode`.
pub fn pem_encode(label: &str, der: &[u8]) -> String {
    pem::encode(label, der)
}

/// The PEM blocks of `input` in order, as `(label, DER)`, as repeated calls of Go's
/// `pem.Decode` find them (see [`pem`]).
pub fn pem_blocks(input: &[u8]) -> Vec<(String, Vec<u8>)> {
    pem::blocks(input).into_iter().map(|b| (b.label, b.der)).collect()
}

/// A certificate's attribute value (`parseASN1String`): its text.
fn string_value(input: &[u8]) -> Option<String> {
    let tag = *input.first()?;
    let (content, _) = read(input, tag)?;
    strings::certificate_value(tag, content).ok()
}

/// Reads one element with the expected tag: its content and what follows it.
pub fn read(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    if *input.first()? != tag {
        return None;
    }
    let (len, header) = length(&input[1..])?;
    let start = 1 + header;
    let end = start.checked_add(len)?;
    Some((input.get(start..end)?, input.get(end..)?))
}

/// Skips one element of any tag.
pub fn skip(input: &[u8]) -> Option<&[u8]> {
    read(input, *input.first()?).map(|(_, rest)| rest)
}

/// A DER length: its value and how many bytes it took. Only DER's definite, minimal form is
/// read (Go's `encoding/asn1` and `cryptobyte` refuse the others): no indefinite length, no
/// leading zero byte, no long form for a length below 128.
fn length(input: &[u8]) -> Option<(usize, usize)> {
    let first = *input.first()?;
    if first < 0x80 {
        return Some((first as usize, 1));
    }
    let count = (first & 0x7f) as usize;
    if count == 0 || count > 4 {
        return None;
    }
    let bytes = input.get(1..1 + count)?;
    if bytes[0] == 0 {
        return None;
    }
    let value = bytes.iter().fold(0usize, |acc, b| (acc << 8) | *b as usize);
    (value >= 0x80).then_some((value, 1 + count))
}

/// DER writing: the constructs the certificates we issue need (the secure port's self-signed
/// certificate, the CSR signer's certificates), encoded as Go's `encoding/asn1` does.
pub mod der {
    use jiff::Timestamp;

    /// One element: tag, definite length (short form below 128 bytes), content.
    pub fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        let len = content.len();
        if len < 0x80 {
            out.push(len as u8);
        } else {
            let bytes: Vec<u8> = len.to_be_bytes().into_iter().skip_while(|b| *b == 0).collect();
            out.push(0x80 | bytes.len() as u8);
            out.extend(bytes);
        }
        out.extend_from_slice(content);
        out
    }

    /// A positive INTEGER from big-endian bytes, minimally encoded.
    pub fn integer(bytes: &[u8]) -> Vec<u8> {
        let trimmed: Vec<u8> = bytes.iter().copied().skip_while(|b| *b == 0).collect();
        let content = match trimmed.first() {
            None => vec![0],
            Some(b) if b & 0x80 != 0 => [&[0u8][..], &trimmed].concat(),
            Some(_) => trimmed,
        };
        tlv(0x02, &content)
    }

    /// One `Extension`: OID, the critical flag only when true, the DER value in an OCTET STRING.
    pub fn extension(oid: &[u8], critical: bool, value: &[u8]) -> Vec<u8> {
        let critical = if critical { vec![0x01, 0x01, 0xff] } else { Vec::new() };
        tlv(0x30, &[tlv(0x06, oid), critical, tlv(0x04, value)].concat())
    }

    /// A PKCS#10 `CertificationRequest`: the `certificationRequestInfo` of `subject` (a DER
    /// Name), `spki` and `attributes` (the content of `[0]`), signed by `sign` with the
    /// signature algorithm `algorithm` (an OID, no parameters). For the tests and the
    /// side-by-side runner, which need requests no library writes.
    pub fn certification_request<E>(
        subject: &[u8],
        spki: &[u8],
        attributes: &[u8],
        algorithm: &[u8],
        sign: impl FnOnce(&[u8]) -> Result<Vec<u8>, E>,
    ) -> Result<Vec<u8>, E> {
        let info = tlv(0x30, &[&[0x02, 0x01, 0x00][..], subject, spki, &tlv(0xa0, attributes)].concat());
        let signature = sign(&info)?;
        let algorithm = tlv(0x30, &tlv(0x06, algorithm));
        Ok(tlv(0x30, &[info, algorithm, tlv(0x03, &[&[0u8][..], &signature].concat())].concat()))
    }

    /// A DER Name of one RDN per `(oid, tag, value)`, the values written as they are given.
    pub fn name(attributes: &[(&[u8], u8, &[u8])]) -> Vec<u8> {
        let rdns: Vec<u8> = attributes
            .iter()
            .flat_map(|(oid, tag, value)| tlv(0x31, &tlv(0x30, &[tlv(0x06, oid), tlv(*tag, value)].concat())))
            .collect();
        tlv(0x30, &rdns)
    }

    /// A PKCS#9 `extensionRequest` attribute whose SET holds `values` (each a DER `Extensions`).
    pub fn extension_request(values: &[Vec<u8>]) -> Vec<u8> {
        tlv(0x30, &[tlv(0x06, super::oid::OID_EXTENSION_REQUEST), tlv(0x31, &values.concat())].concat())
    }

    /// A DER `Extensions` holding one subject-alternative-name extension of DNS `names`.
    pub fn san_dns_extensions(names: &[&str]) -> Vec<u8> {
        let names: Vec<u8> = names.iter().flat_map(|n| tlv(0x82, n.as_bytes())).collect();
        tlv(0x30, &extension(super::oid::OID_SAN, false, &tlv(0x30, &names)))
    }

    /// A `Time`: UTCTime for 1950–2049, else GeneralizedTime, to the second (RFC 5280 §4.1.2.5).
    pub fn time(at: Timestamp) -> Vec<u8> {
        let zoned = at.to_zoned(jiff::tz::TimeZone::UTC);
        if (1950..2050).contains(&zoned.year()) {
            tlv(0x17, zoned.strftime("%y%m%d%H%M%SZ").to_string().as_bytes())
        } else {
            tlv(0x18, zoned.strftime("%Y%m%d%H%M%SZ").to_string().as_bytes())
        }
    }
}

#[cfg(test)]
mod fuzz_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn der_integers_are_minimal_and_positive() {
        assert_eq!(der::integer(&[0, 0, 0x05]), [0x02, 0x01, 0x05]);
        assert_eq!(der::integer(&[0x80]), [0x02, 0x02, 0x00, 0x80]);
        assert_eq!(der::integer(&[]), [0x02, 0x01, 0x00]);
        assert_eq!(der::tlv(0x04, &[0u8; 200])[..3], [0x04, 0x81, 200]);
    }

    #[test]
    fn reads_common_name_and_organizations() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, "system:kube-controller-manager");
        params.distinguished_name.push(rcgen::DnType::OrganizationName, "system:masters");
        let cert = params.self_signed(&key).unwrap();
        let subject = subject(cert.der()).unwrap();
        assert_eq!(subject.common_name, "system:kube-controller-manager");
        assert_eq!(subject.organizations, ["system:masters"]);
    }

    #[test]
    fn rejects_garbage() {
        assert!(subject(b"not a certificate").is_err());
        assert!(subject(&[0x30, 0x82, 0xff]).is_err());
    }
}
