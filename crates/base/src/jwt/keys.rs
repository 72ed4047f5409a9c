//! Service-account signing keys: PEM private keys parsed as upstream's
//! `keyutil.ParsePrivateKeyPEM` does (the first `RSA PRIVATE KEY`, `PRIVATE KEY` or
//! `EC PRIVATE KEY` block; other blocks such as `EC PARAMETERS` are skipped), their public
//! halves, and the key ID upstream derives from them (`keyIDFromPublicKey`).

use std::path::PathBuf;

use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair, RsaKeyPair};
use rustls_pki_types::PrivateKeyDer;
use rustls_pki_types::pem::{self, PemObject};

/// A JWS signature algorithm, chosen by the key as upstream's `JWTTokenGenerator` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// RSA keys, whatever their size.
    Rs256,
    /// ECDSA P-256.
    Es256,
    /// ECDSA P-384.
    Es384,
}

impl Algorithm {
    /// The JOSE name (`alg` header).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Rs256 => "RS256",
            Algorithm::Es256 => "ES256",
            Algorithm::Es384 => "ES384",
        }
    }
}

/// DER of the OIDs used in SubjectPublicKeyInfo.
const OID_RSA_ENCRYPTION: &[u8] = &[0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const DER_NULL: &[u8] = &[0x05, 0x00];
const OID_EC_PUBLIC_KEY: &[u8] = &[0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const OID_P256: &[u8] = &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const OID_P384: &[u8] = &[0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22];
const OID_P521: &[u8] = &[0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x23];

/// A private key that cannot be read or used for signing tokens; the texts reach the controller
/// manager's start-up error for `--service-account-private-key-file`.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The key file cannot be read.
    #[error("cannot read private key file {}: {source}", .path.display())]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The key file holds no usable key.
    #[error("private key file {}: {source}", .path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Box<KeyError>,
    },
    /// No private key block in the PEM data.
    #[error("data does not contain a valid RSA or ECDSA private key")]
    NoKey,
    /// The PEM data cannot be read.
    #[error("not valid PEM: {0}")]
    Pem(#[source] pem::Error),
    /// A key of another type (Ed25519, …).
    #[error("unsupported private key type, must be RSA or ECDSA")]
    UnsupportedType,
    /// An RSA key ring refuses.
    #[error("invalid RSA private key: {0}")]
    InvalidRsa(#[source] ring::error::KeyRejected),
    /// An ECDSA key on P-521, which ring cannot sign with.
    #[error("ECDSA P-521 keys (ES512) are not supported: only P-256 and P-384 can sign here")]
    P521,
    /// An ECDSA key on no curve ring knows.
    #[error("unknown private key curve, must be P-256 or P-384")]
    UnknownCurve,
    /// An ECDSA key ring refuses (on the last curve tried).
    #[error("invalid ECDSA private key: {0}")]
    InvalidEcdsa(#[source] ring::error::KeyRejected),
    /// A SEC1 key without the curve's name.
    #[error("EC private key without named curve parameters")]
    NoNamedCurve,
}

/// A signature ring could not make (it says no more than that).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignError {
    /// With an RSA key.
    #[error("RSA signing failed")]
    Rsa,
    /// With an ECDSA key.
    #[error("ECDSA signing failed")]
    Ecdsa,
}

enum Signer {
    Rsa(RsaKeyPair),
    Ecdsa(EcdsaKeyPair),
}

/// A private key that signs service-account tokens.
pub struct SigningKey {
    signer: Signer,
    public: PublicKey,
}

/// The public half of a [`SigningKey`]: what verifies its tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    /// The algorithm tokens signed with this key use (the `alg` header).
    pub algorithm: Algorithm,
    /// PKCS#1 `RSAPublicKey` DER for RSA, the uncompressed point for ECDSA (ring's forms).
    key: Vec<u8>,
    /// `keyIDFromPublicKey`: base64url(SHA-256(PKIX SubjectPublicKeyInfo DER)), unpadded.
    pub key_id: String,
}

impl SigningKey {
    /// Reads a key file; errors name the file, as upstream's "error reading key for service
    /// account token controller" does.
    pub fn from_pem_file(path: &std::path::Path) -> Result<SigningKey, KeyError> {
        let pem = std::fs::read(path).map_err(|source| KeyError::ReadFile { path: path.to_path_buf(), source })?;
        SigningKey::from_pem(&pem).map_err(|e| KeyError::File { path: path.to_path_buf(), source: Box::new(e) })
    }

    /// Parses the first private key of a PEM document: PKCS#1 RSA, PKCS#8 (RSA or ECDSA) or
    /// SEC1 ECDSA. ECDSA keys must be on P-256 or P-384 (ring cannot sign with P-521).
    pub fn from_pem(pem: &[u8]) -> Result<SigningKey, KeyError> {
        let der = PrivateKeyDer::from_pem_slice(pem).map_err(|e| match e {
            pem::Error::NoItemsFound => KeyError::NoKey,
            other => KeyError::Pem(other),
        })?;
        match der {
            PrivateKeyDer::Pkcs1(key) => rsa(RsaKeyPair::from_der(key.secret_pkcs1_der())),
            PrivateKeyDer::Pkcs8(key) => {
                let der = key.secret_pkcs8_der();
                if der.windows(OID_RSA_ENCRYPTION.len()).any(|w| w == OID_RSA_ENCRYPTION) {
                    rsa(RsaKeyPair::from_pkcs8(der))
                } else {
                    ecdsa(der)
                }
            }
            PrivateKeyDer::Sec1(key) => ecdsa(&sec1_to_pkcs8(key.secret_sec1_der())?),
            _ => Err(KeyError::UnsupportedType),
        }
    }

    /// The public half, which verifies this key's tokens and names it (`kid`).
    pub fn public_key(&self) -> &PublicKey {
        &self.public
    }

    /// Signs `message` with the key's algorithm (JWS form: ECDSA signatures are `r || s`).
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, SignError> {
        let rng = SystemRandom::new();
        // ring's `Unspecified` carries nothing to keep: the variant says all there is.
        match &self.signer {
            Signer::Rsa(key) => {
                let mut signature = vec![0; key.public().modulus_len()];
                key.sign(&signature::RSA_PKCS1_SHA256, &rng, message, &mut signature).map_err(|_| SignError::Rsa)?;
                Ok(signature)
            }
            Signer::Ecdsa(key) => key.sign(&rng, message).map(|s| s.as_ref().to_vec()).map_err(|_| SignError::Ecdsa),
        }
    }
}

impl PublicKey {
    /// Checks a JWS signature made by the matching private key.
    pub fn verify(&self, message: &[u8], signature: &[u8]) -> bool {
        let algorithm: &dyn signature::VerificationAlgorithm = match self.algorithm {
            Algorithm::Rs256 => &signature::RSA_PKCS1_2048_8192_SHA256,
            Algorithm::Es256 => &signature::ECDSA_P256_SHA256_FIXED,
            Algorithm::Es384 => &signature::ECDSA_P384_SHA384_FIXED,
        };
        signature::UnparsedPublicKey::new(algorithm, &self.key).verify(message, signature).is_ok()
    }

    fn new(algorithm: Algorithm, key: Vec<u8>) -> PublicKey {
        let spki = subject_public_key_info(algorithm, &key);
        let digest = ring::digest::digest(&ring::digest::SHA256, &spki);
        let key_id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref());
        PublicKey { algorithm, key, key_id }
    }
}

fn rsa(parsed: Result<RsaKeyPair, ring::error::KeyRejected>) -> Result<SigningKey, KeyError> {
    let key = parsed.map_err(KeyError::InvalidRsa)?;
    let public = PublicKey::new(Algorithm::Rs256, key.public().as_ref().to_vec());
    Ok(SigningKey { signer: Signer::Rsa(key), public })
}

/// An ECDSA key from PKCS#8, on P-256 (ES256) or P-384 (ES384).
fn ecdsa(pkcs8: &[u8]) -> Result<SigningKey, KeyError> {
    if pkcs8.windows(OID_P521.len()).any(|w| w == OID_P521) {
        return Err(KeyError::P521);
    }
    let rng = SystemRandom::new();
    let candidates = [
        (&signature::ECDSA_P256_SHA256_FIXED_SIGNING, Algorithm::Es256),
        (&signature::ECDSA_P384_SHA384_FIXED_SIGNING, Algorithm::Es384),
    ];
    let mut last_error = KeyError::UnknownCurve;
    for (signing, algorithm) in candidates {
        match EcdsaKeyPair::from_pkcs8(signing, pkcs8, &rng) {
            Ok(key) => {
                let public = PublicKey::new(algorithm, key.public_key().as_ref().to_vec());
                return Ok(SigningKey { signer: Signer::Ecdsa(key), public });
            }
            Err(e) => last_error = KeyError::InvalidEcdsa(e),
        }
    }
    Err(last_error)
}

/// Wraps a SEC1 `ECPrivateKey` in PKCS#8 (ring reads only the latter), naming the curve its
/// parameters give.
fn sec1_to_pkcs8(sec1: &[u8]) -> Result<Vec<u8>, KeyError> {
    let curve = [OID_P256, OID_P384, OID_P521]
        .into_iter()
        .find(|oid| sec1.windows(oid.len()).any(|w| w == *oid))
        .ok_or(KeyError::NoNamedCurve)?;
    let algorithm = der(0x30, &[OID_EC_PUBLIC_KEY, curve].concat());
    let version = [0x02, 0x01, 0x00];
    Ok(der(0x30, &[&version[..], &algorithm, &der(0x04, sec1)].concat()))
}

/// Go's `x509.MarshalPKIXPublicKey`: the AlgorithmIdentifier (RSA with NULL parameters, EC
/// with the named curve) and the key as a BIT STRING.
fn subject_public_key_info(algorithm: Algorithm, key: &[u8]) -> Vec<u8> {
    let identifier = match algorithm {
        Algorithm::Rs256 => der(0x30, &[OID_RSA_ENCRYPTION, DER_NULL].concat()),
        Algorithm::Es256 => der(0x30, &[OID_EC_PUBLIC_KEY, OID_P256].concat()),
        Algorithm::Es384 => der(0x30, &[OID_EC_PUBLIC_KEY, OID_P384].concat()),
    };
    let bits = der(0x03, &[&[0u8][..], key].concat());
    der(0x30, &[identifier, bits].concat())
}

/// One DER TLV.
fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let first = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len() - 1);
        out.push(0x80 | (bytes.len() - first) as u8);
        out.extend_from_slice(&bytes[first..]);
    }
    out.extend_from_slice(content);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::PublicKeyData;

    const RSA_PKCS1: &str = include_str!("testdata/rsa-pkcs1.pem");
    const RSA_PKCS8: &str = include_str!("testdata/rsa-pkcs8.pem");
    const EC_P256_SEC1: &str = include_str!("testdata/ec-p256-sec1.pem");
    const EC_P521_SEC1: &str = include_str!("testdata/ec-p521-sec1.pem");

    /// `openssl rsa -pubout -outform DER | sha256 | base64url` of the fixtures.
    const RSA_KEY_ID: &str = "XgukDc26TotVLzK6j3z1YQTEUyPnz59WXdRKm0IsYcs";
    const EC_P256_KEY_ID: &str = "pkAavmkDXgQcSHUL-SUyGN1lvqdp5u2Bl-5EeP1dQU8";

    #[test]
    fn rsa_keys_in_pkcs1_and_pkcs8_sign_rs256_with_upstreams_key_id() {
        for pem in [RSA_PKCS1, RSA_PKCS8] {
            let key = SigningKey::from_pem(pem.as_bytes()).expect("RSA key");
            assert_eq!(key.public_key().algorithm, Algorithm::Rs256);
            assert_eq!(key.public_key().key_id, RSA_KEY_ID);
            let signature = key.sign(b"payload").expect("signed");
            assert!(key.public_key().verify(b"payload", &signature));
            assert!(!key.public_key().verify(b"tampered", &signature));
        }
    }

    #[test]
    fn sec1_ec_keys_sign_es256_with_upstreams_key_id() {
        let key = SigningKey::from_pem(EC_P256_SEC1.as_bytes()).expect("EC key");
        assert_eq!(key.public_key().algorithm, Algorithm::Es256);
        assert_eq!(key.public_key().key_id, EC_P256_KEY_ID);
        let signature = key.sign(b"payload").expect("signed");
        assert_eq!(signature.len(), 64, "JWS ECDSA signatures are r || s");
        assert!(key.public_key().verify(b"payload", &signature));
    }

    #[test]
    fn pkcs8_ec_keys_pick_the_algorithm_by_curve_and_match_rcgens_spki() {
        for (alg, expected) in
            [(&rcgen::PKCS_ECDSA_P256_SHA256, Algorithm::Es256), (&rcgen::PKCS_ECDSA_P384_SHA384, Algorithm::Es384)]
        {
            let generated = rcgen::KeyPair::generate_for(alg).expect("key");
            let key = SigningKey::from_pem(generated.serialize_pem().as_bytes()).expect("PKCS#8 EC key");
            assert_eq!(key.public_key().algorithm, expected);
            let spki = subject_public_key_info(expected, &key.public_key().key);
            assert_eq!(spki, generated.subject_public_key_info());
            let signature = key.sign(b"m").expect("signed");
            assert!(key.public_key().verify(b"m", &signature));
        }
    }

    #[test]
    fn bad_keys_are_refused_with_a_reason() {
        let err = SigningKey::from_pem(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
            .err()
            .expect("no key");
        assert_eq!(err.to_string(), "data does not contain a valid RSA or ECDSA private key");
        let err = SigningKey::from_pem(EC_P521_SEC1.as_bytes()).err().expect("P-521").to_string();
        assert!(err.contains("P-521"), "{err}");
        let garbage = "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n";
        let err = SigningKey::from_pem(garbage.as_bytes()).err().expect("garbage").to_string();
        assert!(err.starts_with("invalid RSA private key"), "{err}");
        let ed25519 = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).expect("key").serialize_pem();
        assert!(SigningKey::from_pem(ed25519.as_bytes()).is_err());
    }

    #[test]
    fn key_files_are_named_in_errors() {
        let path = std::path::Path::new("/nonexistent/sa.key");
        let err = SigningKey::from_pem_file(path).err().expect("missing").to_string();
        assert!(err.starts_with("cannot read private key file /nonexistent/sa.key"), "{err}");
    }

    #[test]
    fn der_lengths_use_the_long_form_past_127_bytes() {
        assert_eq!(der(0x04, &[1, 2]), [0x04, 2, 1, 2]);
        let long = der(0x04, &[0; 300]);
        assert_eq!(&long[..4], &[0x04, 0x82, 0x01, 0x2c]);
        assert_eq!(long.len(), 304);
    }
}
