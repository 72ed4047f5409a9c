//! Service-account JSON Web Tokens, after upstream's `pkg/serviceaccount` (`jwt.go`,
//! `legacy.go`): the legacy tokens the token controller puts in Secrets, signed with the key of
//! `--service-account-private-key-file`, and their verification (used by the sandbox as
//! kube-apiserver's `--service-account-key-file` authenticator).
//!
//! Tokens are JWS compact serializations with the protected header `{"alg":…,"kid":…}` and the
//! claims in a JSON object with sorted keys, as go-jose writes them.

mod keys;

use base64::Engine;
use serde_json::{Map, Value, json};

pub use keys::{Algorithm, KeyError, PublicKey, SignError, SigningKey};

/// `serviceaccount.LegacyIssuer`.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";

/// A private claim of legacy tokens (`legacyPrivateClaims`): the service account's namespace.
pub const NAMESPACE_CLAIM: &str = "kubernetes.io/serviceaccount/namespace";
/// A private claim of legacy tokens: the name of the Secret that holds the token.
pub const SECRET_NAME_CLAIM: &str = "kubernetes.io/serviceaccount/secret.name";
/// A private claim of legacy tokens: the service account's name.
pub const SERVICE_ACCOUNT_NAME_CLAIM: &str = "kubernetes.io/serviceaccount/service-account.name";
/// A private claim of legacy tokens: the service account's UID.
pub const SERVICE_ACCOUNT_UID_CLAIM: &str = "kubernetes.io/serviceaccount/service-account.uid";

/// `apiserverserviceaccount.MakeUsername`.
pub fn service_account_username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// `LegacyClaims` with the issuer `JWTTokenGenerator(LegacyIssuer, …)` adds.
pub fn legacy_claims(namespace: &str, account: &str, account_uid: &str, secret: &str) -> Map<String, Value> {
    let claims = json!({
        "iss": LEGACY_ISSUER,
        "sub": service_account_username(namespace, account),
        NAMESPACE_CLAIM: namespace,
        SECRET_NAME_CLAIM: secret,
        SERVICE_ACCOUNT_NAME_CLAIM: account,
        SERVICE_ACCOUNT_UID_CLAIM: account_uid,
    });
    match claims {
        Value::Object(map) => map,
        _ => unreachable!("json! of an object"),
    }
}

/// A token that cannot be made, read or verified.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The header or claims cannot be written as JSON.
    #[error(transparent)]
    Encode(serde_json::Error),
    /// The key cannot sign.
    #[error(transparent)]
    Sign(#[from] SignError),
    /// Not three dot-separated parts.
    #[error("not a JWT: expected three dot-separated parts")]
    NotAJwt,
    /// A part that is not unpadded base64url.
    #[error("bad base64url: {0}")]
    Base64(#[source] base64::DecodeError),
    /// A header that is not a JSON object.
    #[error("bad JWT header: {0}")]
    Header(#[source] serde_json::Error),
    /// Claims that are not a JSON object.
    #[error("bad JWT claims: {0}")]
    Claims(#[source] serde_json::Error),
    /// An `alg` header other than the key's (shown as JSON, `null` when absent).
    #[error("unexpected signing algorithm {alg}")]
    UnexpectedAlgorithm {
        /// The header's `alg`.
        alg: Value,
    },
    /// A signature the key does not verify.
    #[error("invalid signature")]
    InvalidSignature,
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn unb64(part: &str) -> Result<Vec<u8>, TokenError> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part).map_err(TokenError::Base64)
}

/// Signs `claims` into a compact JWS (`jwtTokenGenerator.GenerateToken`).
pub fn sign(key: &SigningKey, claims: &Map<String, Value>) -> Result<String, TokenError> {
    let public = key.public_key();
    let header = json!({"alg": public.algorithm.name(), "kid": public.key_id});
    let encode = |v: &Value| serde_json::to_vec(v).map_err(TokenError::Encode);
    let signing_input = format!("{}.{}", b64(&encode(&header)?), b64(&encode(&Value::Object(claims.clone()))?));
    let signature = key.sign(signing_input.as_bytes())?;
    Ok(format!("{signing_input}.{}", b64(&signature)))
}

/// A token's header and claims, not yet verified.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// The JOSE header (`alg`, `kid`).
    pub header: Value,
    /// The claims (`iss`, `sub`, the private claims, ...).
    pub claims: Map<String, Value>,
}

/// Splits and decodes a compact JWS without checking its signature.
pub fn decode_unverified(token: &str) -> Result<Parsed, TokenError> {
    let parts: Vec<&str> = token.trim().split('.').collect();
    let [header, claims, _] = parts.as_slice() else {
        return Err(TokenError::NotAJwt);
    };
    let header: Value = serde_json::from_slice(&unb64(header)?).map_err(TokenError::Header)?;
    let claims: Map<String, Value> = serde_json::from_slice(&unb64(claims)?).map_err(TokenError::Claims)?;
    Ok(Parsed { header, claims })
}

/// Verifies a compact JWS against `key` (the `alg` header must be the key's) and returns it
/// decoded.
pub fn verify(token: &str, key: &PublicKey) -> Result<Parsed, TokenError> {
    let token = token.trim();
    let parsed = decode_unverified(token)?;
    if parsed.header["alg"].as_str() != Some(key.algorithm.name()) {
        return Err(TokenError::UnexpectedAlgorithm { alg: parsed.header["alg"].clone() });
    }
    // `decode_unverified` found three parts, so there is a last dot.
    let (signing_input, signature) = token.rsplit_once('.').ok_or(TokenError::NotAJwt)?;
    if !key.verify(signing_input.as_bytes(), &unb64(signature)?) {
        return Err(TokenError::InvalidSignature);
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> Vec<SigningKey> {
        let rsa = SigningKey::from_pem(include_bytes!("testdata/rsa-pkcs1.pem")).expect("RSA");
        let p256 = SigningKey::from_pem(include_bytes!("testdata/ec-p256-sec1.pem")).expect("P-256");
        let p384 = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).expect("P-384").serialize_pem();
        vec![rsa, p256, SigningKey::from_pem(p384.as_bytes()).expect("P-384")]
    }

    #[test]
    fn legacy_tokens_carry_upstreams_header_and_claims() {
        for key in keys() {
            let claims = legacy_claims("ns", "builder", "uid-1", "builder-token-abc");
            let token = sign(&key, &claims).expect("signed");
            let parsed = verify(&token, key.public_key()).expect("verifies");
            let alg = key.public_key().algorithm.name();
            assert_eq!(parsed.header, json!({"alg": alg, "kid": key.public_key().key_id}));
            assert_eq!(
                Value::Object(parsed.claims),
                json!({
                    "iss": "kubernetes/serviceaccount",
                    "sub": "system:serviceaccount:ns:builder",
                    "kubernetes.io/serviceaccount/namespace": "ns",
                    "kubernetes.io/serviceaccount/secret.name": "builder-token-abc",
                    "kubernetes.io/serviceaccount/service-account.name": "builder",
                    "kubernetes.io/serviceaccount/service-account.uid": "uid-1",
                })
            );
            // go-jose writes sorted keys: the header starts with alg, the claims with iss.
            let header = String::from_utf8(unb64(token.split('.').next().unwrap()).unwrap()).unwrap();
            assert!(header.starts_with(&format!("{{\"alg\":\"{alg}\",\"kid\":")), "{header}");
        }
    }

    #[test]
    fn tampered_or_foreign_tokens_do_not_verify() {
        let keys = keys();
        let token = sign(&keys[0], &legacy_claims("ns", "a", "u", "s")).expect("signed");
        let mut parts: Vec<String> = token.split('.').map(str::to_string).collect();
        parts[1] = b64(br#"{"iss":"kubernetes/serviceaccount","sub":"system:serviceaccount:kube-system:admin"}"#);
        assert_eq!(
            verify(&parts.join("."), keys[0].public_key()).err().map(|e| e.to_string()).as_deref(),
            Some("invalid signature")
        );
        assert!(verify(&token, keys[1].public_key()).is_err(), "another key's algorithm");
        let other_rsa = SigningKey::from_pem(include_bytes!("testdata/rsa-pkcs8.pem")).expect("RSA");
        assert_eq!(other_rsa.public_key(), keys[0].public_key(), "same key in PKCS#8");
        assert!(verify("abc", keys[0].public_key()).is_err());
        assert!(decode_unverified("a.b").is_err());
    }
}
