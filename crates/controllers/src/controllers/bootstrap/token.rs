//! Bootstrap-token Secrets (`k8s.io/cluster-bootstrap/token/api` and `util/secrets`, and the
//! controller's `validateSecretForSigning`).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;

/// `SecretTypeBootstrapToken`.
pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
/// `BootstrapTokenSecretPrefix`.
pub const SECRET_PREFIX: &str = "bootstrap-token-";
/// `BootstrapTokenIDKey`.
pub const TOKEN_ID_KEY: &str = "token-id";
/// `BootstrapTokenSecretKey`.
pub const TOKEN_SECRET_KEY: &str = "token-secret";
/// `BootstrapTokenExpirationKey`.
pub const EXPIRATION_KEY: &str = "expiration";
/// `BootstrapTokenUsageSigningKey`.
pub const USAGE_SIGNING_KEY: &str = "usage-bootstrap-signing";
/// `ConfigMapClusterInfo` (in `kube-public`).
pub const CLUSTER_INFO: &str = "cluster-info";
/// `KubeConfigKey`.
pub const KUBECONFIG_KEY: &str = "kubeconfig";
/// `JWSSignatureKeyPrefix`.
pub const JWS_KEY_PREFIX: &str = "jws-kubeconfig-";

/// Whether `secret` is a bootstrap token of `namespace` (the controllers' informer filters).
pub fn is_token_in(secret: &Secret, namespace: &str) -> bool {
    secret.type_.as_deref() == Some(SECRET_TYPE) && secret.metadata.namespace.as_deref() == Some(namespace)
}

/// `ParseName`: the token ID of a `bootstrap-token-<6 of [a-z0-9]>` name.
pub fn parse_name(name: &str) -> Option<&str> {
    let id = name.strip_prefix(SECRET_PREFIX)?;
    let valid = id.len() == 6 && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    valid.then_some(id)
}

/// `GetData`: the value of `key` as a string, empty when absent.
pub fn data(secret: &Secret, key: &str) -> String {
    let value = secret.data.as_ref().and_then(|d| d.get(key));
    value.map(|v| String::from_utf8_lossy(&v.0).into_owned()).unwrap_or_default()
}

/// `GetExpiration`: how long the token has left, `None` once expired. A token without an
/// expiration never expires (`Some(ZERO)`); an unparseable one counts as expired.
pub fn remaining(secret: &Secret, now: Timestamp) -> Option<Duration> {
    let expiration = data(secret, EXPIRATION_KEY);
    if expiration.is_empty() {
        return Some(Duration::ZERO);
    }
    let name = || format!("{}/{}", secret.metadata.namespace.as_deref().unwrap_or_default(), name_of(secret));
    let Ok(at) = parse_rfc3339(&expiration) else {
        log::debug!("Unparseable expiration time ({expiration}) in {} Secret. Treating as expired.", name());
        return None;
    };
    let left = now.duration_until(at);
    if !left.is_positive() {
        log::debug!("Expired bootstrap token in {} Secret: {expiration}", name());
        return None;
    }
    Some(left.unsigned_abs())
}

/// Why an `expiration` is not an RFC 3339 time.
#[derive(Debug, thiserror::Error)]
enum ParseTimeError {
    /// Not of the `T`-separated shape Go's layout requires.
    #[error("parsing time {0:?} as RFC3339")]
    Layout(String),
    /// Of that shape, but no valid time.
    #[error(transparent)]
    Invalid(#[from] jiff::Error),
}

/// Go's `time.Parse(time.RFC3339, …)`: a `T` date-time with `Z` or a numeric offset.
fn parse_rfc3339(text: &str) -> Result<Timestamp, ParseTimeError> {
    let strict = text.len() > 19 && text.as_bytes()[10] == b'T' && !text.contains('[');
    if !strict {
        return Err(ParseTimeError::Layout(text.to_string()));
    }
    Ok(text.parse()?)
}

fn name_of(secret: &Secret) -> &str {
    secret.metadata.name.as_deref().unwrap_or_default()
}

/// `validateSecretForSigning`: the token's ID and secret when it may sign cluster-info.
pub fn for_signing(secret: &Secret, now: Timestamp) -> Option<(String, String)> {
    let name = name_of(secret);
    let Some(name_id) = parse_name(name) else {
        log::debug!("Invalid secret name, must be of the form {SECRET_PREFIX}<secret-id> secretName={name}");
        return None;
    };
    let id = data(secret, TOKEN_ID_KEY);
    if id.is_empty() || id != name_id {
        log::debug!("Token ID doesn't match secret name tokenID={id:?} secretName={name}");
        return None;
    }
    let token_secret = data(secret, TOKEN_SECRET_KEY);
    if token_secret.is_empty() || remaining(secret, now).is_none() || data(secret, USAGE_SIGNING_KEY) != "true" {
        return None;
    }
    Some((id, token_secret))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn token(data: serde_json::Value) -> Secret {
        let encoded: serde_json::Map<_, _> = data
            .as_object()
            .expect("an object")
            .iter()
            .map(|(k, v)| {
                use base64::Engine;
                (k.clone(), json!(base64::engine::general_purpose::STANDARD.encode(v.as_str().unwrap_or_default())))
            })
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "bootstrap-token-abcdef", "namespace": "kube-system"},
            "type": SECRET_TYPE,
            "data": encoded,
        }))
        .expect("a secret")
    }

    fn at(s: &str) -> Timestamp {
        s.parse().expect("a timestamp")
    }

    #[test]
    fn names_carry_six_lowercase_characters() {
        assert_eq!(parse_name("bootstrap-token-abc123"), Some("abc123"));
        assert_eq!(parse_name("bootstrap-token-ABC123"), None);
        assert_eq!(parse_name("bootstrap-token-abc1234"), None);
        assert_eq!(parse_name("token-abc123"), None);
    }

    #[test]
    fn expiration_is_rfc3339_and_unparseable_means_expired() {
        let now = at("2026-11-26T10:00:00Z");
        assert_eq!(remaining(&token(json!({})), now), Some(Duration::ZERO));
        let later = token(json!({"expiration": "2026-11-26T11:00:30+01:00"}));
        assert_eq!(remaining(&later, now), Some(Duration::from_secs(30)));
        assert_eq!(remaining(&token(json!({"expiration": "2026-11-26T10:00:00Z"})), now), None);
        assert_eq!(remaining(&token(json!({"expiration": "tomorrow"})), now), None);
        assert_eq!(remaining(&token(json!({"expiration": "2026-11-26 10:00:30Z"})), now), None);
    }

    #[test]
    fn only_matching_unexpired_signing_tokens_sign() {
        let now = at("2026-11-26T10:00:00Z");
        let good = json!({"token-id": "abcdef", "token-secret": "0123456789abcdef", "usage-bootstrap-signing": "true"});
        assert_eq!(for_signing(&token(good.clone()), now), Some(("abcdef".into(), "0123456789abcdef".into())));
        let mut other_id = good.clone();
        other_id["token-id"] = json!("zzzzzz");
        assert_eq!(for_signing(&token(other_id), now), None);
        let mut no_usage = good.clone();
        no_usage["usage-bootstrap-signing"] = json!("false");
        assert_eq!(for_signing(&token(no_usage), now), None);
        let mut expired = good;
        expired["expiration"] = json!("2026-11-26T09:59:59Z");
        assert_eq!(for_signing(&token(expired), now), None);
    }
}
