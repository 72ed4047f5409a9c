//! Generated bad input for the certificate-request and certificate readers (docs/reliability.md,
//! "Fuzzing"): real requests, damaged at random — bytes flipped, set, cut, inserted, lengths
//! rewritten, whole PEM blocks wrapped in junk — and deeply nested or oversized DER. Whatever
//! the input, the readers must answer (no panic, no unbounded recursion), and a request whose
//! signature still verifies must say what the undamaged one said: a damage the signature does
//! not cover (a reader that takes its subject or names from bytes outside the signed
//! `certificationRequestInfo`, or from another PEM block than Go's `pem.Decode` would) would
//! otherwise let a requester smuggle a name past the approver.

use proptest::prelude::*;

use super::request::{CertificateRequest, Name, parse_csr, parse_csr_der};
use super::{pem_blocks, pem_encode};
use crate::fuzz::{assert_clear, config};

/// What a request says: the subject and every name it asks for.
fn view(csr: &CertificateRequest) -> (Name, Vec<String>, Vec<String>, Vec<std::net::IpAddr>, Vec<String>) {
    (
        csr.subject.clone(),
        csr.dns_names.clone(),
        csr.email_addresses.clone(),
        csr.ip_addresses.clone(),
        csr.uris.clone(),
    )
}

/// Real requests: a kubelet client's, a serving one with names, one with several organisations,
/// and an RSA one (kubeadm's key type).
fn originals() -> Vec<Vec<u8>> {
    use super::request::fixtures::{RSA_KEY_PKCS8_PEM, request_pem};
    let rsa = {
        let key = rcgen::KeyPair::from_pem(RSA_KEY_PKCS8_PEM).unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["n1.example".to_string()]).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, "system:node:n1");
        params.serialize_request(&key).unwrap().pem().unwrap()
    };
    [
        request_pem("system:node:n1", &["system:nodes"], &[]),
        request_pem("system:node:n1", &["system:nodes"], &["n1.example", "10.0.0.1", "fd00::1"]),
        request_pem("alice", &["dev", "ops", "system:authenticated"], &[]),
        rsa,
    ]
    .iter()
    .map(|pem| pem_blocks(pem.as_bytes()).remove(0).1)
    .collect()
}

/// One damage to a DER request.
#[derive(Debug, Clone)]
enum Damage {
    Flip {
        at: usize,
        bit: u8,
    },
    Set {
        at: usize,
        value: u8,
    },
    Cut {
        at: usize,
    },
    Insert {
        at: usize,
        bytes: Vec<u8>,
    },
    Remove {
        at: usize,
        len: usize,
    },
    /// A long-form length (`0x81..0x84` and its bytes) written over the byte at `at`.
    Length {
        at: usize,
        form: Vec<u8>,
    },
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Damage::Flip { at, bit }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, value)| Damage::Set { at, value }),
        any::<usize>().prop_map(|at| Damage::Cut { at }),
        (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..6))
            .prop_map(|(at, bytes)| Damage::Insert { at, bytes }),
        (any::<usize>(), 1usize..8).prop_map(|(at, len)| Damage::Remove { at, len }),
        (any::<usize>(), proptest::collection::vec(any::<u8>(), 0..4))
            .prop_map(|(at, bytes)| Damage::Length { at, form: [vec![0x80 | bytes.len() as u8], bytes].concat() }),
    ]
}

fn apply(der: &[u8], damage: &Damage) -> Vec<u8> {
    let mut out = der.to_vec();
    let at = |i: usize| i % (out.len() + 1);
    match damage {
        Damage::Flip { at: i, bit } => {
            let i = i % out.len();
            out[i] ^= 1 << bit;
        }
        Damage::Set { at: i, value } => {
            let i = i % out.len();
            out[i] = *value;
        }
        Damage::Cut { at: i } => out.truncate(at(*i)),
        Damage::Insert { at: i, bytes } => {
            let i = at(*i);
            out.splice(i..i, bytes.iter().copied());
        }
        Damage::Remove { at: i, len } => {
            let i = at(*i);
            out.drain(i..(i + len).min(out.len()));
        }
        Damage::Length { at: i, form } => {
            let i = i % out.len();
            out.splice(i..i + 1, form.iter().copied());
        }
    }
    out
}

/// Reads a damaged request the way the approver and the signer do, checking the invariants.
fn read_damaged(original: &CertificateRequest, damaged: &[u8]) {
    match parse_csr_der(damaged) {
        Err(e) => assert_clear(&e.to_string()),
        Ok(csr) => match csr.check_signature() {
            Err(e) => assert_clear(&e.to_string()),
            Ok(()) => assert_eq!(view(&csr), view(original), "a verified request must say what was signed"),
        },
    }
}

proptest! {
    #![proptest_config(config(2048))]

    #[test]
    fn damaged_requests_are_refused_or_say_what_was_signed(
        which in 0usize..4,
        damages in proptest::collection::vec(damage(), 1..4),
    ) {
        let originals = originals();
        let der = &originals[which % originals.len()];
        let original = parse_csr_der(der).unwrap();
        let damaged = damages.iter().fold(der.clone(), |d, damage| if d.is_empty() { d } else { apply(&d, damage) });
        read_damaged(&original, &damaged);
        // The certificate reader gets the same bytes (a request is no certificate, but a
        // damaged certificate looks much like it): it must answer too.
        let _ = super::certificate::parse_certificate(&damaged);
        let _ = super::subject(&damaged);
    }

    #[test]
    fn junk_around_pem_blocks_never_changes_the_block_read(
        which in 0usize..4,
        before in "[ -~\t\r\n]{0,40}",
        between in "[ -~\t\r\n]{0,40}",
        second in 0usize..4,
    ) {
        let originals = originals();
        let first = &originals[which % originals.len()];
        let other = &originals[second % originals.len()];
        let input = format!("{before}\n{}{between}{}", pem_encode("CERTIFICATE REQUEST", first), pem_encode("CERTIFICATE REQUEST", other));
        // Junk on its own line before a well-formed block never hides it: Go reads the first.
        if let Ok(csr) = parse_csr(input.as_bytes()) {
            prop_assert_eq!(&csr.info, &parse_csr_der(first).unwrap().info);
        }
    }
}

#[test]
fn deeply_nested_and_oversized_der_is_refused() {
    // 100,000 nested SEQUENCEs, each holding the rest.
    const DEPTH: u32 = 100_000;
    let nested: Vec<u8> =
        (0..DEPTH).flat_map(|depth| [&[0x30, 0x84][..], &(6 * (DEPTH - depth - 1)).to_be_bytes()].concat()).collect();
    assert!(parse_csr_der(&nested).is_err());
    assert!(super::subject(&nested).is_err());
    // Lengths far beyond the input, and the largest a 4-byte form can say.
    for header in
        [&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff][..], &[0x30, 0x83, 0x01, 0x00, 0x00], &[0x30, 0x85, 1, 0, 0, 0, 0]]
    {
        assert!(parse_csr_der(header).is_err());
        assert!(super::certificate::parse_certificate(header).is_none());
    }
}

#[test]
fn non_minimal_lengths_are_refused_as_go_refuses_them() {
    let der = &originals()[0];
    // The outer SEQUENCE re-written with a long-form length for a short content (or a leading
    // zero byte): DER forbids both, and so do Go's readers.
    let (content, _) = super::read(der, 0x30).unwrap();
    let long = [&[0x30, 0x84][..], &(content.len() as u32).to_be_bytes(), content].concat();
    assert_eq!(parse_csr_der(&long).unwrap_err().to_string(), "x509: malformed certificate request");
    assert!(parse_csr_der(der).is_ok());
}
