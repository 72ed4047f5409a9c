//! Upstream's `pkg/controller/certificates/authority` (`CertificateAuthority.Sign` with the
//! `PermissiveSigningPolicy`): PKCS#10 requests are read and verified by `crate::x509::request`,
//! signed with `ring`, and the certificate is written field by field as Go's
//! `x509.CreateCertificate` writes it (the issuer is the CA's raw subject, extensions in Go's
//! order, no subject key identifier on a leaf).

use std::net::IpAddr;
use std::time::Duration;

use jiff::Timestamp;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, RsaKeyPair};

use crate::apimachinery::errors::BoxError;
use crate::x509::certificate::{ParsedCertificate, parse_certificate};
use crate::x509::der::{extension, integer, time, tlv};
use crate::x509::oid::*;
use crate::x509::request::{CertificateRequest, Name};
use crate::x509::{pem_blocks, read, skip};

/// Why a CA could not be read or could not sign.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The key PEM holds no key ring can sign with.
    #[error("data does not contain a valid RSA or ECDSA private key")]
    InvalidKey,
    /// The key refused to sign.
    #[error("failed to sign certificate")]
    SignFailed,
    /// The CA file does not hold exactly one certificate.
    #[error("error reading CA cert file \"{name}\": expected 1 certificate, found {found}")]
    CertificateCount {
        /// The CA file.
        name: String,
        /// How many certificates it holds.
        found: usize,
    },
    /// The CA key is not the certificate's (Go's `tls.X509KeyPair`, which the dynamic loader
    /// runs on every pair it reads).
    #[error("tls: private key does not match public key")]
    KeyMismatch,
    /// The CA certificate does not parse.
    #[error("error reading CA cert file \"{name}\": malformed certificate")]
    MalformedCertificate {
        /// The CA file.
        name: String,
    },
    /// The CA key does not parse.
    #[error("error reading CA key file \"{name}\": {source}")]
    Key {
        /// The CA file (upstream names the certificate file here too).
        name: String,
        /// Why the key is not usable.
        source: Box<Error>,
    },
    /// The request's signature is not its key's.
    #[error("unable to verify certificate request signature: {0}")]
    RequestSignature(#[source] BoxError),
    /// No randomness for the serial number.
    #[error("unable to generate a serial number for {common_name}: no randomness")]
    Serial {
        /// The request's subject common name.
        common_name: String,
    },
    /// The CA expires before the certificate would start.
    #[error("the signer has expired: NotAfter={}", go_time(*.not_after))]
    SignerExpired {
        /// The CA's NotAfter.
        not_after: Timestamp,
    },
    /// The CA has expired.
    #[error("refusing to sign a certificate that expired in the past: NotAfter={}", go_time(*.not_after))]
    ExpiredInThePast {
        /// The CA's NotAfter.
        not_after: Timestamp,
    },
    /// Usages that are neither key usages nor extended ones.
    #[error("unrecognized usage values: [{}]", .0.iter().map(|u| format!("{u:?}")).collect::<Vec<_>>().join(" "))]
    UnrecognizedUsages(Vec<String>),
}

/// The CA's signing key.
enum SigningKey {
    Rsa(RsaKeyPair),
    Ecdsa(EcdsaKeyPair, &'static [u8]),
    Ed25519(Ed25519KeyPair),
}

impl SigningKey {
    /// `keyutil.ParsePrivateKeyPEM`: the first block that is a PKCS#1 RSA, SEC1 EC or PKCS#8 key.
    fn from_pem(pem: &[u8]) -> Result<SigningKey, Error> {
        let rng = SystemRandom::new();
        for (label, der) in pem_blocks(pem) {
            let key = match label.as_str() {
                "RSA PRIVATE KEY" => RsaKeyPair::from_der(&der).ok().map(SigningKey::Rsa),
                "EC PRIVATE KEY" => sec1_to_pkcs8(&der).and_then(|(pkcs8, curve)| ecdsa(&pkcs8, curve, &rng)),
                "PRIVATE KEY" => RsaKeyPair::from_pkcs8(&der)
                    .ok()
                    .map(SigningKey::Rsa)
                    .or_else(|| ecdsa(&der, OID_P256, &rng))
                    .or_else(|| ecdsa(&der, OID_P384, &rng))
                    .or_else(|| Ed25519KeyPair::from_pkcs8_maybe_unchecked(&der).ok().map(SigningKey::Ed25519)),
                _ => None,
            };
            // A block that does not parse is skipped, as `ParsePrivateKeyPEM` skips it.
            if let Some(key) = key {
                return Ok(key);
            }
        }
        Err(Error::InvalidKey)
    }

    /// Whether `public_key`, a certificate's subjectPublicKey bytes, is this key's.
    fn is_key_of(&self, public_key: &[u8]) -> bool {
        use ring::signature::KeyPair;
        match self {
            // Both are DER `RSAPublicKey`s; compared by value, whatever their leading zeros.
            SigningKey::Rsa(key) => rsa_components(key.public().as_ref())
                .is_some_and(|ours| rsa_components(public_key).is_some_and(|theirs| ours == theirs)),
            SigningKey::Ecdsa(key, _) => key.public_key().as_ref() == public_key,
            SigningKey::Ed25519(key) => key.public_key().as_ref() == public_key,
        }
    }

    /// The AlgorithmIdentifier of signatures (`x509.CreateCertificate`'s default per key type).
    fn algorithm_identifier(&self) -> Vec<u8> {
        match self {
            SigningKey::Rsa(_) => tlv(0x30, &[tlv(0x06, OID_SHA256_RSA), vec![0x05, 0x00]].concat()),
            SigningKey::Ecdsa(_, curve) if *curve == OID_P384 => tlv(0x30, &tlv(0x06, OID_ECDSA_SHA384)),
            SigningKey::Ecdsa(..) => tlv(0x30, &tlv(0x06, OID_ECDSA_SHA256)),
            SigningKey::Ed25519(_) => tlv(0x30, &tlv(0x06, OID_ED25519)),
        }
    }

    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, Error> {
        let rng = SystemRandom::new();
        let failed = |_| Error::SignFailed;
        match self {
            SigningKey::Rsa(key) => {
                let mut out = vec![0; key.public().modulus_len()];
                key.sign(&signature::RSA_PKCS1_SHA256, &rng, message, &mut out).map_err(failed)?;
                Ok(out)
            }
            SigningKey::Ecdsa(key, _) => Ok(key.sign(&rng, message).map_err(failed)?.as_ref().to_vec()),
            SigningKey::Ed25519(key) => Ok(key.sign(message).as_ref().to_vec()),
        }
    }
}

/// The modulus and exponent of a DER `RSAPublicKey`, without leading zero bytes.
fn rsa_components(der: &[u8]) -> Option<(&[u8], &[u8])> {
    let (sequence, _) = read(der, 0x30)?;
    let (modulus, rest) = read(sequence, 0x02)?;
    let (exponent, _) = read(rest, 0x02)?;
    fn unpadded(n: &[u8]) -> &[u8] {
        &n[n.iter().take_while(|b| **b == 0).count()..]
    }
    Some((unpadded(modulus), unpadded(exponent)))
}

fn ecdsa(pkcs8: &[u8], curve: &'static [u8], rng: &SystemRandom) -> Option<SigningKey> {
    let algorithm = if curve == OID_P384 {
        &signature::ECDSA_P384_SHA384_ASN1_SIGNING
    } else {
        &signature::ECDSA_P256_SHA256_ASN1_SIGNING
    };
    EcdsaKeyPair::from_pkcs8(algorithm, pkcs8, rng).ok().map(|key| SigningKey::Ecdsa(key, curve))
}

/// Wraps a SEC1 `ECPrivateKey` in PKCS#8, which is what ring reads.
fn sec1_to_pkcs8(sec1: &[u8]) -> Option<(Vec<u8>, &'static [u8])> {
    let (content, _) = read(sec1, 0x30)?;
    let rest = skip(skip(content)?)?; // version, privateKey
    let (parameters, _) = read(rest, 0xa0)?;
    let (curve, _) = read(parameters, 0x06)?;
    let curve: &'static [u8] = match curve {
        OID_P256 => OID_P256,
        OID_P384 => OID_P384,
        _ => return None,
    };
    let algorithm = tlv(0x30, &[tlv(0x06, OID_EC_PUBLIC_KEY), tlv(0x06, curve)].concat());
    Some((tlv(0x30, &[vec![0x02, 0x01, 0x00], algorithm, tlv(0x04, sec1)].concat()), curve))
}

/// `authority.CertificateAuthority`: the CA certificate (what signing needs of it) and its key.
pub struct CertificateAuthority {
    /// The certificate PEM it was read from (`RawCert`), to notice a change.
    pub raw_cert: Vec<u8>,
    /// The key PEM it was read from (`RawKey`).
    pub raw_key: Vec<u8>,
    raw_subject: Vec<u8>,
    subject_key_id: Option<Vec<u8>>,
    /// The CA certificate's NotAfter.
    pub not_after: Timestamp,
    key: SigningKey,
}

impl CertificateAuthority {
    /// `caProvider.setCA`: exactly one certificate and a private key.
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8], name: &str) -> Result<CertificateAuthority, Error> {
        let certs: Vec<_> = pem_blocks(cert_pem).into_iter().filter(|(label, _)| label == "CERTIFICATE").collect();
        if certs.len() != 1 {
            return Err(Error::CertificateCount { name: name.to_string(), found: certs.len() });
        }
        let ParsedCertificate { raw_subject, subject_key_id, not_after, public_key, .. } =
            parse_certificate(&certs[0].1).ok_or_else(|| Error::MalformedCertificate { name: name.to_string() })?;
        let key =
            SigningKey::from_pem(key_pem).map_err(|e| Error::Key { name: name.to_string(), source: Box::new(e) })?;
        if !key.is_key_of(&public_key) {
            return Err(Error::KeyMismatch);
        }
        Ok(CertificateAuthority {
            raw_cert: cert_pem.to_vec(),
            raw_key: key_pem.to_vec(),
            raw_subject,
            subject_key_id,
            not_after,
            key,
        })
    }

    /// `CertificateAuthority.Sign` with the `PermissiveSigningPolicy`: the DER certificate.
    pub fn sign(&self, csr: &CertificateRequest, policy: &SigningPolicy) -> Result<Vec<u8>, Error> {
        csr.check_signature().map_err(|e| Error::RequestSignature(e.into()))?;
        let mut serial = [0u8; 16];
        ring::rand::SecureRandom::fill(&SystemRandom::new(), &mut serial)
            .map_err(|_| Error::Serial { common_name: csr.subject.common_name.clone() })?;
        let (not_before, not_after) = policy.validity(self.not_after)?;
        let (key_usage, ext_key_usages) = key_usages_from_strings(&policy.usages)?;
        let subject = encode_name(&csr.subject);
        let extensions = self.extensions(csr, key_usage, &ext_key_usages, &subject);
        let algorithm = self.key.algorithm_identifier();
        let tbs = tlv(
            0x30,
            &[
                tlv(0xa0, &[0x02, 0x01, 0x02]),
                integer(&serial),
                algorithm.clone(),
                self.raw_subject.clone(),
                tlv(0x30, &[time(not_before), time(not_after)].concat()),
                subject,
                csr.spki.clone(),
                tlv(0xa3, &tlv(0x30, &extensions.concat())),
            ]
            .concat(),
        );
        let signature = self.key.sign(&tbs)?;
        Ok(tlv(0x30, &[tbs, algorithm, tlv(0x03, &[&[0u8][..], &signature].concat())].concat()))
    }

    /// The extensions in the order `x509.CreateCertificate` writes them.
    fn extensions(&self, csr: &CertificateRequest, key_usage: u16, ext: &[u8], subject: &[u8]) -> Vec<Vec<u8>> {
        let subject_empty = subject.len() <= 2;
        let mut out = Vec::new();
        if key_usage != 0 {
            out.push(extension(OID_KEY_USAGE, true, &key_usage_bits(key_usage)));
        }
        if !ext.is_empty() {
            let oids: Vec<u8> = ext.iter().flat_map(|&u| tlv(0x06, EXT_KEY_USAGE_OIDS[u as usize])).collect();
            out.push(extension(OID_EXT_KEY_USAGE, false, &tlv(0x30, &oids)));
        }
        out.push(extension(OID_BASIC_CONSTRAINTS, true, &[0x30, 0x00]));
        // Go names the CA's key only when the certificate's subject is not the CA's own.
        let issued_to_the_ca_subject = *subject == self.raw_subject;
        if let Some(id) = self.subject_key_id.as_ref().filter(|id| !id.is_empty() && !issued_to_the_ca_subject) {
            out.push(extension(OID_AKI, false, &tlv(0x30, &tlv(0x80, id))));
        }
        let mut names = Vec::new();
        names.extend(csr.dns_names.iter().flat_map(|n| tlv(0x82, n.as_bytes())));
        names.extend(csr.email_addresses.iter().flat_map(|n| tlv(0x81, n.as_bytes())));
        // Go writes an IPv4-mapped IPv6 address as its four bytes (`To4`).
        names.extend(csr.ip_addresses.iter().flat_map(|ip| match ip {
            IpAddr::V4(v4) => tlv(0x87, &v4.octets()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => tlv(0x87, &v4.octets()),
                None => tlv(0x87, &v6.octets()),
            },
        }));
        names.extend(csr.uris.iter().flat_map(|n| tlv(0x86, n.as_bytes())));
        if !names.is_empty() {
            out.push(extension(OID_SAN, subject_empty, &tlv(0x30, &names)));
        }
        out
    }
}

/// `PermissiveSigningPolicy`.
#[derive(Debug, Clone)]
pub struct SigningPolicy {
    /// The requested lifetime.
    pub ttl: Duration,
    /// The CSR's `spec.usages`.
    pub usages: Vec<String>,
    /// How far NotBefore (and a long lifetime's NotAfter) is moved back.
    pub backdate: Duration,
    /// Below this lifetime NotAfter is not backdated.
    pub short: Duration,
    /// The signing time.
    pub now: Timestamp,
}

impl SigningPolicy {
    /// `apply`'s NotBefore and NotAfter, and its refusals of an expired signer.
    pub fn validity(&self, signer_not_after: Timestamp) -> Result<(Timestamp, Timestamp), Error> {
        let sub = |d: Duration| self.now - jiff::SignedDuration::try_from(d).unwrap_or_default();
        let add = |d: Duration| self.now + jiff::SignedDuration::try_from(d).unwrap_or_default();
        let not_before = sub(self.backdate);
        let mut not_after =
            if self.ttl < self.short { add(self.ttl) } else { add(self.ttl.saturating_sub(self.backdate)) };
        if not_after >= signer_not_after {
            not_after = signer_not_after;
        }
        if not_before >= signer_not_after {
            return Err(Error::SignerExpired { not_after: signer_not_after });
        }
        if self.now >= signer_not_after {
            return Err(Error::ExpiredInThePast { not_after: signer_not_after });
        }
        Ok((not_before, not_after))
    }
}

/// Go's default `time.Time` format for a UTC time.
fn go_time(at: Timestamp) -> String {
    at.to_zoned(jiff::tz::TimeZone::UTC).strftime("%Y-%m-%d %H:%M:%S +0000 UTC").to_string()
}

/// `keyUsageDict` as Go's `x509.KeyUsage` bits.
fn key_usage_bit(usage: &str) -> Option<u16> {
    Some(match usage {
        "signing" | "digital signature" => 1 << 0,
        "content commitment" => 1 << 1,
        "key encipherment" => 1 << 2,
        "data encipherment" => 1 << 3,
        "key agreement" => 1 << 4,
        "cert sign" => 1 << 5,
        "crl sign" => 1 << 6,
        "encipher only" => 1 << 7,
        "decipher only" => 1 << 8,
        _ => return None,
    })
}

/// `extKeyUsageDict` as Go's `x509.ExtKeyUsage` values (indexes of `EXT_KEY_USAGE_OIDS`).
fn ext_key_usage(usage: &str) -> Option<u8> {
    Some(match usage {
        "any" => 0,
        "server auth" => 1,
        "client auth" => 2,
        "code signing" => 3,
        "email protection" | "s/mime" => 4,
        "ipsec end system" => 5,
        "ipsec tunnel" => 6,
        "ipsec user" => 7,
        "timestamping" => 8,
        "ocsp signing" => 9,
        "microsoft sgc" => 10,
        "netscape sgc" => 11,
        _ => return None,
    })
}

/// The OIDs of Go's `ExtKeyUsage` values, in their numeric order.
const EXT_KEY_USAGE_OIDS: [&[u8]; 12] = [
    &[0x55, 0x1d, 0x25, 0x00],
    &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01],
    &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x02],
    &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x03],
    &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x04],
    &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x05],
    &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x06],
    &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x07],
    &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x08],
    &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x09],
    &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0x37, 0x0a, 0x03, 0x03],
    &[0x60, 0x86, 0x48, 0x01, 0x86, 0xf8, 0x42, 0x04, 0x01],
];

/// `keyUsagesFromStrings`: the key usage bits and the sorted, distinct extended usages.
pub fn key_usages_from_strings(usages: &[String]) -> Result<(u16, Vec<u8>), Error> {
    let mut key_usage = 0;
    let mut ext = Vec::new();
    let mut unrecognized = Vec::new();
    for usage in usages {
        if let Some(bit) = key_usage_bit(usage) {
            key_usage |= bit;
        } else if let Some(value) = ext_key_usage(usage) {
            ext.push(value);
        } else {
            unrecognized.push(usage.clone());
        }
    }
    if !unrecognized.is_empty() {
        return Err(Error::UnrecognizedUsages(unrecognized));
    }
    ext.sort_unstable();
    ext.dedup();
    Ok((key_usage, ext))
}

/// `marshalKeyUsage`: bit 0 is the most significant bit of the first byte.
fn key_usage_bits(key_usage: u16) -> Vec<u8> {
    let first = (key_usage as u8).reverse_bits();
    let second = ((key_usage >> 8) as u8).reverse_bits();
    let bytes: Vec<u8> = if second != 0 { vec![first, second] } else { vec![first] };
    let unused = bytes.last().map_or(0, |b| b.trailing_zeros().min(7) as u8);
    tlv(0x03, &[&[unused][..], &bytes].concat())
}

/// `pkix.Name.ToRDNSequence` marshalled: one RDN per attribute type, Go's attribute order,
/// the values of an RDN sorted, PrintableString when the value allows it, else UTF8String.
pub fn encode_name(name: &Name) -> Vec<u8> {
    let single = |value: &String| if value.is_empty() { Vec::new() } else { vec![value.clone()] };
    let attributes: [(&[u8], Vec<String>); 9] = [
        (OID_COUNTRY, name.country.clone()),
        (OID_PROVINCE, name.province.clone()),
        (OID_LOCALITY, name.locality.clone()),
        (OID_STREET, name.street_address.clone()),
        (OID_POSTAL_CODE, name.postal_code.clone()),
        (OID_ORGANIZATION, name.organization.clone()),
        (OID_ORGANIZATIONAL_UNIT, name.organizational_unit.clone()),
        (OID_COMMON_NAME, single(&name.common_name)),
        (OID_SERIAL_NUMBER, single(&name.serial_number)),
    ];
    let rdns: Vec<u8> = attributes
        .iter()
        .filter(|(_, values)| !values.is_empty())
        .flat_map(|(oid, values)| {
            // DER's SET OF: Go's `asn1.Marshal` sorts the encoded values (`bytes.Compare`).
            let mut values: Vec<Vec<u8>> =
                values.iter().map(|v| tlv(0x30, &[tlv(0x06, oid), string(v)].concat())).collect();
            values.sort();
            tlv(0x31, &values.concat())
        })
        .collect();
    tlv(0x30, &rdns)
}

/// Go's `asn1` string: PrintableString when every character is printable, else UTF8String.
fn string(value: &str) -> Vec<u8> {
    let printable = value.bytes().all(|b| b.is_ascii_alphanumeric() || b" '()+,-./:=?".contains(&b));
    tlv(if printable { 0x13 } else { 0x0c }, value.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CA made by rcgen (P-256, PKCS#8), as the envtest and sandbox make theirs.
    fn ca() -> CertificateAuthority {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, "kubernetes");
        let cert = params.self_signed(&key).unwrap();
        CertificateAuthority::from_pem(cert.pem().as_bytes(), key.serialize_pem().as_bytes(), "ca.crt").unwrap()
    }

    use crate::x509::request::fixtures::request;

    fn policy(ttl: Duration, usages: &[&str], now: Timestamp) -> SigningPolicy {
        SigningPolicy {
            ttl,
            usages: usages.iter().map(|u| u.to_string()).collect(),
            backdate: Duration::from_secs(300),
            short: Duration::from_secs(8 * 3600),
            now,
        }
    }

    #[test]
    fn signs_with_upstream_extensions_and_validity() {
        let ca = ca();
        let csr = request("system:node:n1", &["system:nodes"], &["n1.example"]);
        let now: Timestamp = "2026-11-26T10:00:00Z".parse().unwrap();
        let usages = ["digital signature", "key encipherment", "server auth", "client auth"];
        let der = ca.sign(&csr, &policy(Duration::from_secs(900), &usages, now)).unwrap();
        let (not_before, not_after) = crate::x509::certificate::certificate_validity(&der).unwrap();
        assert_eq!(not_before, "2026-11-26T09:55:00Z".parse().unwrap());
        assert_eq!(not_after, "2026-11-26T10:15:00Z".parse().unwrap(), "short: NotAfter not backdated");
        let subject = crate::x509::subject(&der).unwrap();
        assert_eq!(subject.common_name, "system:node:n1");
        assert_eq!(subject.organizations, ["system:nodes"]);
        assert_eq!(crate::x509::certificate::certificate_sans(&der).unwrap().0, ["n1.example"]);
        // Key usage (critical, digitalSignature|keyEncipherment), EKU server then client, CA:false.
        let ku = extension(OID_KEY_USAGE, true, &[0x03, 0x02, 0x05, 0xa0]);
        assert!(der.windows(ku.len()).any(|w| w == ku.as_slice()));
        let eku_oids = [tlv(0x06, EXT_KEY_USAGE_OIDS[1]), tlv(0x06, EXT_KEY_USAGE_OIDS[2])].concat();
        let eku = extension(OID_EXT_KEY_USAGE, false, &tlv(0x30, &eku_oids));
        assert!(der.windows(eku.len()).any(|w| w == eku.as_slice()));
        let basic = extension(OID_BASIC_CONSTRAINTS, true, &[0x30, 0x00]);
        assert!(der.windows(basic.len()).any(|w| w == basic.as_slice()));
        assert!(!der.windows(OID_SKI.len() + 2).any(|w| w == tlv(0x06, OID_SKI).as_slice()), "no SKI on a leaf");
    }

    #[test]
    fn long_lifetimes_are_backdated_and_capped_by_the_signer() {
        let now: Timestamp = "2026-11-26T10:00:00Z".parse().unwrap();
        let year = Duration::from_secs(8760 * 3600);
        let signer_end: Timestamp = "2030-01-01T00:00:00Z".parse().unwrap();
        let (nb, na) = policy(year, &[], now).validity(signer_end).unwrap();
        assert_eq!(nb, "2026-11-26T09:55:00Z".parse().unwrap());
        assert_eq!(na.duration_since(now).as_secs(), 8760 * 3600 - 300);
        let soon: Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();
        assert_eq!(policy(year, &[], now).validity(soon).unwrap().1, soon);
        let past: Timestamp = "2026-11-26T09:00:00Z".parse().unwrap();
        assert!(
            policy(year, &[], now)
                .validity(past)
                .unwrap_err()
                .to_string()
                .starts_with("the signer has expired: NotAfter=2026-11-26 09:00:00 +0000 UTC")
        );
    }

    #[test]
    fn usages_map_as_upstream() {
        let usages = |u: &[&str]| {
            key_usages_from_strings(&u.iter().map(|s| s.to_string()).collect::<Vec<_>>()).map_err(|e| e.to_string())
        };
        assert_eq!(usages(&["signing", "client auth", "server auth", "client auth"]), Ok((1, vec![1, 2])));
        assert_eq!(usages(&["cert sign", "decipher only"]), Ok((0x120, vec![])));
        assert_eq!(usages(&["bogus", "other"]), Err(r#"unrecognized usage values: ["bogus" "other"]"#.to_string()));
        assert_eq!(key_usage_bits(1 << 8), vec![0x03, 0x03, 0x07, 0x00, 0x80]);
    }

    #[test]
    fn names_encode_as_go_does() {
        let name = Name { organization: vec!["system:nodes".into()], common_name: "a*b".into(), ..Name::default() };
        let der = encode_name(&name);
        let o = [tlv(0x06, OID_ORGANIZATION), tlv(0x13, b"system:nodes")].concat();
        let cn = [tlv(0x06, OID_COMMON_NAME), tlv(0x0c, b"a*b")].concat();
        assert_eq!(der, tlv(0x30, &[tlv(0x31, &tlv(0x30, &o)), tlv(0x31, &tlv(0x30, &cn))].concat()));
        assert_eq!(encode_name(&Name::default()), vec![0x30, 0x00]);
        // The values of one RDN are sorted by their encoding (the shorter first), as Go's
        // `asn1.Marshal` sorts a SET OF.
        let groups = Name { organization: vec!["bb".into(), "a".into(), "ab".into()], ..Name::default() };
        let value = |v: &[u8]| tlv(0x30, &[tlv(0x06, OID_ORGANIZATION), tlv(0x13, v)].concat());
        let sorted = [value(b"a"), value(b"ab"), value(b"bb")].concat();
        assert_eq!(encode_name(&groups), tlv(0x30, &tlv(0x31, &sorted)));
    }

    #[test]
    fn certificates_carry_what_go_writes() {
        use crate::x509::der::name as name_der;
        use crate::x509::request::fixtures::signed_request_der;
        let now: Timestamp = "2026-11-26T10:00:00Z".parse().unwrap();
        let usages = policy(Duration::from_secs(900), &["client auth"], now);
        // A CA named as Go writes names (PrintableString), so that a certificate can have its
        // subject byte for byte; rcgen's default would be a UTF8String.
        let ca = {
            let key = rcgen::KeyPair::generate().unwrap();
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            let name = rcgen::DnValue::PrintableString("kubernetes".try_into().unwrap());
            params.distinguished_name.push(rcgen::DnType::CommonName, name);
            let cert = params.self_signed(&key).unwrap();
            CertificateAuthority::from_pem(cert.pem().as_bytes(), key.serialize_pem().as_bytes(), "ca.crt").unwrap()
        };
        let has_aki = |der: &[u8]| der.windows(OID_AKI.len() + 2).any(|w| w[0] == 0x06 && &w[2..] == OID_AKI);
        // The CA's key is named, unless the certificate's subject is the CA's own (`CN=kubernetes`).
        let alice = request("alice", &[], &[]);
        assert!(has_aki(&ca.sign(&alice, &usages).unwrap()));
        let same_subject = request("kubernetes", &[], &[]);
        assert!(!has_aki(&ca.sign(&same_subject, &usages).unwrap()));
        // An IPv4-mapped IPv6 address is written as its four bytes.
        let mapped = request("alice", &[], &["::ffff:10.0.0.1"]);
        let der = ca.sign(&mapped, &usages).unwrap();
        let (_, ips) = crate::x509::certificate::certificate_sans(&der).unwrap();
        assert_eq!(ips, ["10.0.0.1".parse::<IpAddr>().unwrap()]);
        // A T61String subject (Latin-1) is written as a UTF8String.
        let t61 = name_der(&[(OID_COMMON_NAME, 0x14, b"alice\xff")]);
        let request = crate::x509::request::parse_csr_der(&signed_request_der(&t61, &[])).unwrap();
        let der = ca.sign(&request, &usages).unwrap();
        assert_eq!(crate::x509::subject(&der).unwrap().common_name, "alice\u{ff}");
    }

    #[test]
    fn the_key_must_be_the_certificates() {
        use crate::x509::request::fixtures::{RSA_KEY_PKCS1_PEM, RSA_KEY_PKCS8_PEM};
        let self_signed = |key: &rcgen::KeyPair| {
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            params.self_signed(key).unwrap().pem()
        };
        let rsa = rcgen::KeyPair::from_pem(RSA_KEY_PKCS8_PEM).unwrap();
        let ec = rcgen::KeyPair::generate().unwrap();
        let (rsa_cert, ec_cert) = (self_signed(&rsa), self_signed(&ec));
        let ec_key = ec.serialize_pem();
        let pair = |cert: &str, key: &str| CertificateAuthority::from_pem(cert.as_bytes(), key.as_bytes(), "ca.crt");
        assert!(pair(&rsa_cert, RSA_KEY_PKCS1_PEM).is_ok(), "kubeadm's RSA CA, PKCS#1 key");
        assert!(pair(&rsa_cert, RSA_KEY_PKCS8_PEM).is_ok(), "the same key, PKCS#8");
        assert!(pair(&ec_cert, &ec_key).is_ok());
        for (cert, key) in [(&rsa_cert, ec_key.as_str()), (&ec_cert, RSA_KEY_PKCS1_PEM)] {
            let refused = pair(cert, key).err().map(|e| e.to_string());
            assert_eq!(refused.as_deref(), Some("tls: private key does not match public key"));
        }
        let other_ec = rcgen::KeyPair::generate().unwrap().serialize_pem();
        assert!(matches!(pair(&ec_cert, &other_ec), Err(Error::KeyMismatch)), "another key of the same curve");
    }

    #[test]
    fn reads_sec1_and_pkcs8_ec_keys() {
        let key = rcgen::KeyPair::generate().unwrap();
        assert!(matches!(SigningKey::from_pem(key.serialize_pem().as_bytes()), Ok(SigningKey::Ecdsa(..))));
        assert!(SigningKey::from_pem(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").is_err());
        // A key block that does not parse is skipped for the next one, as Go's
        // `keyutil.ParsePrivateKeyPEM` does.
        let broken_then_good =
            format!("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n{}", key.serialize_pem());
        assert!(matches!(SigningKey::from_pem(broken_then_good.as_bytes()), Ok(SigningKey::Ecdsa(..))));
    }
}
