//! Certificate requests of every key type and signature algorithm Go verifies in a CSR (RSA
//! from 1024 bits, exponent 3, PKCS #1 v1.5 with SHA-1/256/384/512, RSASSA-PSS; ECDSA on
//! P-224/256/384/521 with SHA-1/256/512; Ed25519), each for `CN=system:node:sbs-node,
//! O=system:nodes` with the DNS name `sbs-node.example`. Made once by
//! `scripts/make-csr-fixtures.sh` (the keys were thrown away); the unit tests check what our
//! reader makes of each, the side-by-side scenario `certificates-hostile` what both binaries do.
//! Data only: nothing here is linked unless used.

/// `(name, PEM)` of each request.
pub const KEY_TYPES: &[(&str, &str)] = &[
    ("rsa1024-sha256", include_str!("testdata/csrs/rsa1024-sha256.pem")),
    ("rsa1536-sha384", include_str!("testdata/csrs/rsa1536-sha384.pem")),
    ("rsa2048-e3-sha256", include_str!("testdata/csrs/rsa2048-e3-sha256.pem")),
    ("rsa2048-sha1", include_str!("testdata/csrs/rsa2048-sha1.pem")),
    ("rsa2048-sha384", include_str!("testdata/csrs/rsa2048-sha384.pem")),
    ("rsa2048-pss-sha256", include_str!("testdata/csrs/rsa2048-pss-sha256.pem")),
    ("rsa4096-sha512", include_str!("testdata/csrs/rsa4096-sha512.pem")),
    ("p224-sha256", include_str!("testdata/csrs/p224-sha256.pem")),
    ("p256-sha1", include_str!("testdata/csrs/p256-sha1.pem")),
    ("p256-sha512", include_str!("testdata/csrs/p256-sha512.pem")),
    ("p384-sha256", include_str!("testdata/csrs/p384-sha256.pem")),
    ("p521-sha512", include_str!("testdata/csrs/p521-sha512.pem")),
    ("ed25519", include_str!("testdata/csrs/ed25519.pem")),
];

/// The requests of [`KEY_TYPES`] whose signature ring cannot verify, and so the signer cannot
/// sign, where upstream's does: curves and digests ring lacks, RSA below 2048 bits with
/// SHA-384. Each is a documented difference (docs/security.md).
pub const NOT_VERIFIED: &[&str] = &["rsa1536-sha384", "p224-sha256", "p256-sha1", "p256-sha512", "p521-sha512"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::x509::request::parse_csr;

    #[test]
    fn every_sample_reads_as_its_subject_and_verifies_unless_ring_cannot() {
        for (name, pem) in KEY_TYPES {
            let csr = parse_csr(pem.as_bytes()).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(csr.subject.common_name, "system:node:sbs-node", "{name}");
            assert_eq!(csr.subject.organization, ["system:nodes"], "{name}");
            assert_eq!(csr.dns_names, ["sbs-node.example"], "{name}");
            let verified = csr.check_signature();
            if NOT_VERIFIED.contains(name) {
                let refused = verified.expect_err(name).to_string();
                assert!(
                    refused.contains("unsupported elliptic curve")
                        || refused.contains("algorithm unimplemented")
                        || refused.contains("verification error"),
                    "{name}: {refused}"
                );
            } else {
                assert_eq!(verified, Ok(()), "{name}");
            }
        }
    }
}
