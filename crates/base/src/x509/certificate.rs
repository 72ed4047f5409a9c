//! X.509 certificates read as far as signing and tests need them: the raw subject, validity,
//! subject key identifier and subject alternative names.

use std::net::IpAddr;

use jiff::Timestamp;

use super::oid::*;
use super::request::{SubjectAltNames, bit_string, element, read_general_names};
use super::{read, skip};

/// What is read of a certificate: its raw subject, validity and extensions of interest.
pub struct ParsedCertificate {
    /// The subject's DER Name, as is (a CA's is the issuer of what it signs).
    pub raw_subject: Vec<u8>,
    /// The subject key identifier extension's value.
    pub subject_key_id: Option<Vec<u8>>,
    /// NotBefore.
    pub not_before: Timestamp,
    /// NotAfter.
    pub not_after: Timestamp,
    /// The subject alternative names, parsed as a request's.
    pub sans: Option<SubjectAltNames>,
    /// The subjectPublicKeyInfo's key: the BIT STRING's bytes (a DER `RSAPublicKey`, an EC
    /// point, an Ed25519 key), to check that a CA's private key is this certificate's.
    pub public_key: Vec<u8>,
}

/// A certificate's parts as DER, by a plain walk of its structure (no field is interpreted):
/// for the reader below, and for comparing or verifying certificates byte by byte.
pub struct CertificateParts<'a> {
    /// The whole `tbsCertificate` element: the bytes the signature covers.
    pub tbs: &'a [u8],
    /// The `signature` AlgorithmIdentifier element inside the `tbsCertificate`.
    pub signature_algorithm: &'a [u8],
    /// The issuer Name element.
    pub issuer: &'a [u8],
    /// The validity SEQUENCE's content.
    pub validity: &'a [u8],
    /// The subject Name element.
    pub subject: &'a [u8],
    /// The subjectPublicKeyInfo element.
    pub spki: &'a [u8],
    /// Each `Extension` element, in order.
    pub extensions: Vec<&'a [u8]>,
    /// The signature's bytes (the BIT STRING without its unused-bits count).
    pub signature: &'a [u8],
}

/// Splits a DER certificate into its parts; `None` if its structure is malformed.
pub fn certificate_parts(der: &[u8]) -> Option<CertificateParts<'_>> {
    let (certificate, _) = read(der, 0x30)?;
    let (tbs, tbs_content, rest) = element(certificate, 0x30)?;
    let (signature, _) = read(skip(rest)?, 0x03)?;
    let fields = if tbs_content.first() == Some(&0xa0) { skip(tbs_content)? } else { tbs_content };
    let fields = skip(fields)?; // serialNumber
    let (signature_algorithm, _, fields) = element(fields, 0x30)?;
    let (issuer, _, fields) = element(fields, 0x30)?;
    let (validity, fields) = read(fields, 0x30)?;
    let (subject, _, fields) = element(fields, 0x30)?;
    let (spki, _, mut rest) = element(fields, 0x30)?;
    let mut extensions = Vec::new();
    // issuerUniqueID [1] and subjectUniqueID [2] are skipped; extensions are [3].
    while let Some(&tag) = rest.first() {
        let (content, next) = read(rest, tag)?;
        rest = next;
        if tag != 0xa3 {
            continue;
        }
        let (mut list, _) = read(content, 0x30)?;
        while !list.is_empty() {
            let (extension, _, next) = element(list, 0x30)?;
            extensions.push(extension);
            list = next;
        }
    }
    let signature = bit_string(signature)?;
    Some(CertificateParts { tbs, signature_algorithm, issuer, validity, subject, spki, extensions, signature })
}

/// Reads a DER certificate as far as `ParsedCertificate` goes; `None` if it is malformed.
pub fn parse_certificate(der: &[u8]) -> Option<ParsedCertificate> {
    let parts = certificate_parts(der)?;
    let not_after = parse_time(skip(parts.validity)?)?;
    let not_before = parse_time(parts.validity)?;
    let (spki, _) = read(parts.spki, 0x30)?;
    let (_algorithm, key) = read(spki, 0x30)?;
    let (key, _) = read(key, 0x03)?;
    let public_key = bit_string(key)?.to_vec();
    let mut parsed = ParsedCertificate {
        raw_subject: parts.subject.to_vec(),
        subject_key_id: None,
        not_before,
        not_after,
        sans: None,
        public_key,
    };
    for extension in parts.extensions {
        let (ext, _) = read(extension, 0x30)?;
        let (oid, value) = read(ext, 0x06)?;
        let value = if value.first() == Some(&0x01) { skip(value)? } else { value };
        let (value, _) = read(value, 0x04)?;
        if oid == OID_SKI {
            parsed.subject_key_id = Some(read(value, 0x04)?.0.to_vec());
        } else if oid == OID_SAN {
            let mut sans = SubjectAltNames::default();
            read_general_names(value, &mut sans)?;
            parsed.sans = Some(sans);
        }
    }
    Some(parsed)
}

/// A UTCTime or GeneralizedTime.
fn parse_time(input: &[u8]) -> Option<Timestamp> {
    let tag = *input.first()?;
    let (content, _) = read(input, tag)?;
    let text = std::str::from_utf8(content).ok()?.strip_suffix('Z')?;
    let full = match tag {
        0x17 => {
            let year: i32 = text.get(..2)?.parse().ok()?;
            format!("{}{text}", if year >= 50 { "19" } else { "20" })
        }
        0x18 => text.to_string(),
        _ => return None,
    };
    let civil = jiff::civil::DateTime::strptime("%Y%m%d%H%M%S", &full).ok()?;
    civil.to_zoned(jiff::tz::TimeZone::UTC).ok().map(|z| z.timestamp())
}

/// A DER certificate's NotBefore and NotAfter.
pub fn certificate_validity(der: &[u8]) -> Option<(Timestamp, Timestamp)> {
    parse_certificate(der).map(|c| (c.not_before, c.not_after))
}

/// A DER certificate's DNS and IP subject alternative names.
pub fn certificate_sans(der: &[u8]) -> Option<(Vec<String>, Vec<IpAddr>)> {
    match parse_certificate(der)?.sans {
        Some(sans) => Some((sans.dns_names, sans.ip_addresses)),
        None => Some((Vec::new(), Vec::new())),
    }
}
