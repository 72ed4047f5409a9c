//! `certificates.k8s.io/v1` CertificateSigningRequest create rules of upstream's
//! `pkg/apis/certificates/validation` (`validateCertificateSigningRequest` with the v1 options):
//! usages given, known and distinct, no legacy signer, at least 10 minutes of `expirationSeconds`.
//! Not covered: the request's PEM parse and the signer name's qualified-name form.

use serde_json::Value;

use super::FieldError;
use crate::apimachinery::strconv::quote;

/// `allValidUsages`, sorted as `sets.List` returns them.
const VALID_USAGES: &[&str] = &[
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// The spec rules checked on create.
pub(super) fn csr(object: &Value) -> Vec<FieldError> {
    let spec = &object["spec"];
    let mut errors = Vec::new();
    let usages: Vec<&str> =
        spec["usages"].as_array().map(|u| u.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    if usages.is_empty() {
        errors.push(FieldError::required("spec.usages", ""));
    }
    for (i, usage) in usages.iter().enumerate() {
        if !VALID_USAGES.contains(usage) {
            errors.push(FieldError::not_supported(&format!("spec.usages[{i}]"), usage, VALID_USAGES));
        }
    }
    for (i, usage) in usages.iter().enumerate() {
        if usages[..i].contains(usage) {
            errors.push(FieldError::duplicate(&format!("spec.usages[{i}]"), quote(usage)));
        }
    }
    let signer = spec["signerName"].as_str().unwrap_or_default();
    if signer == "kubernetes.io/legacy-unknown" {
        errors.push(FieldError::invalid(
            "spec.signerName",
            quote(signer),
            "the legacy signerName is not allowed via this API version",
        ));
    }
    if let Some(seconds) = spec["expirationSeconds"].as_i64().filter(|s| *s < 600) {
        errors.push(FieldError::invalid(
            "spec.expirationSeconds",
            seconds.to_string(),
            "may not specify a duration less than 600 seconds (10 minutes)",
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn usages_signer_and_expiration() {
        let ok = json!({"spec": {"usages": ["client auth"], "signerName": "example.com/x", "expirationSeconds": 600}});
        assert!(csr(&ok).is_empty());
        let bad = json!({"spec": {"usages": ["client auth", "bogus", "client auth"],
            "signerName": "kubernetes.io/legacy-unknown", "expirationSeconds": 599}});
        let fields: Vec<String> = csr(&bad).iter().map(ToString::to_string).collect();
        assert_eq!(fields.len(), 4, "{fields:?}");
        assert!(fields[0].starts_with("spec.usages[1]: Unsupported value: \"bogus\""), "{fields:?}");
        assert_eq!(fields[1], "spec.usages[2]: Duplicate value: \"client auth\"");
        assert!(fields[3].starts_with("spec.expirationSeconds: Invalid value: 599"), "{fields:?}");
        assert!(!csr(&json!({"spec": {}})).is_empty(), "usages are required");
    }
}
