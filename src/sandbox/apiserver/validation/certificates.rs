//! `certificates.k8s.io/v1` CertificateSigningRequest create rules of upstream's
//! `pkg/apis/certificates/validation` (`validateCertificateSigningRequest` with the v1 options):
//! usages given, known and distinct, no legacy signer, at least 10 minutes of `expirationSeconds`.
//! On the `status` and `approval` subresources, `validateConditions` and the update rules
//! (`ValidateCertificateSigningRequestStatusUpdate` / `...ApprovalUpdate`).
//! `spec.request` must hold a PEM CERTIFICATE REQUEST whose subject parses (its signature is not
//! checked). Not covered: the signer name's qualified-name form, the certificate's
//! PEM parse, and the "may not modify a condition" rule (its message carries a `cmp.Diff`).

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
    if let Some(why) = request_error(&spec["request"]) {
        errors.push(FieldError::invalid("spec.request", go_bytes(&spec["request"]), why));
    }
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

/// Why `spec.request` (base64 in JSON) is not a CSR, as `certificates.ParseCSR` says.
fn request_error(request: &Value) -> Option<&'static str> {
    let pem = decoded(request);
    match crate::x509::pem_blocks(&pem).into_iter().next() {
        Some((label, der)) if label == "CERTIFICATE REQUEST" => {
            crate::x509::request_subject(&der).err().map(|_| "x509: malformed certificate request")
        }
        _ => Some("PEM block type must be CERTIFICATE REQUEST"),
    }
}

fn decoded(bytes: &Value) -> Vec<u8> {
    use base64::Engine;
    let text = bytes.as_str().unwrap_or_default();
    base64::engine::general_purpose::STANDARD.decode(text).unwrap_or_default()
}

/// A `[]byte` as Go's `%#v` prints it: `[]byte(nil)` when empty (the sandbox stores a missing
/// request as ""), else `[]byte{0x2d, ...}`.
fn go_bytes(bytes: &Value) -> String {
    let bytes = decoded(bytes);
    if bytes.is_empty() {
        return "[]byte(nil)".to_string();
    }
    let items: Vec<String> = bytes.iter().map(|b| format!("{b:#x}")).collect();
    format!("[]byte{{{}}}", items.join(", "))
}

/// The condition types that may only be `True`.
const TRUE_ONLY: &[&str] = &["Approved", "Denied", "Failed"];

/// `ValidateCertificateSigningRequest{Status,Approval}Update`: the conditions' rules (each off
/// when the stored object already breaks it), no removed Approved/Denied/Failed condition,
/// Approved/Denied added only through `approval`, the certificate set only through `status`
/// and never changed once set.
pub(super) fn csr_status_update(old: &Value, new: &Value, approval: bool) -> Vec<FieldError> {
    let allow = conditions(old, &Allowances::default()).broken;
    let mut errors = conditions(new, &allow).errors;
    let count = |o: &Value, t: &str| condition_types(o).into_iter().filter(|c| *c == t).count();
    for t in TRUE_ONLY {
        if count(new, t) < count(old, t) {
            errors.push(FieldError::forbidden(
                "status.conditions",
                &format!("updates may not remove a condition of type {}", quote(t)),
            ));
        }
    }
    if !approval {
        for t in ["Approved", "Denied"] {
            if count(new, t) > count(old, t) {
                errors.push(FieldError::forbidden(
                    "status.conditions",
                    &format!("updates may not add a condition of type {}", quote(t)),
                ));
            }
        }
    }
    let certificate = |o: &Value| o["status"]["certificate"].as_str().unwrap_or_default().to_string();
    if certificate(new) != certificate(old) {
        if approval {
            errors.push(FieldError::forbidden("status.certificate", "updates may not set certificate content"));
        } else if !certificate(old).is_empty() {
            errors.push(FieldError::forbidden(
                "status.certificate",
                "updates may not modify existing certificate content",
            ));
        }
    }
    errors
}

fn condition_types(csr: &Value) -> Vec<&str> {
    csr["status"]["conditions"]
        .as_array()
        .map(|c| c.iter().map(|c| c["type"].as_str().unwrap_or_default()).collect())
        .unwrap_or_default()
}

/// Which of `validateConditions`' rules are checked (upstream's `allow*` options).
#[derive(Default)]
struct Allowances {
    empty_type: bool,
    both_approved_and_denied: bool,
    duplicate_types: bool,
}

/// What `validateConditions` found: the errors, and the rules broken (allowed on the next update).
struct ConditionCheck {
    errors: Vec<FieldError>,
    broken: Allowances,
}

/// `validateConditions`: each condition's type given and distinct, its status one of the
/// allowed values, Approved and Denied not both.
fn conditions(csr: &Value, allow: &Allowances) -> ConditionCheck {
    let mut errors = Vec::new();
    let mut broken = Allowances::default();
    let mut seen: Vec<&str> = Vec::new();
    let (mut approved, mut denied) = (false, false);
    for (i, c) in csr["status"]["conditions"].as_array().map(Vec::as_slice).unwrap_or_default().iter().enumerate() {
        let path = format!("status.conditions[{i}]");
        let kind = c["type"].as_str().unwrap_or_default();
        if kind.is_empty() {
            broken.empty_type = true;
            if !allow.empty_type {
                errors.push(FieldError::required(&format!("{path}.type"), ""));
            }
        }
        let status = c["status"].as_str().unwrap_or_default();
        let allowed: &[&str] = if TRUE_ONLY.contains(&kind) { &["True"] } else { &["False", "True", "Unknown"] };
        if status.is_empty() {
            errors.push(FieldError::required(&format!("{path}.status"), ""));
        } else if !allowed.contains(&status) {
            errors.push(FieldError::not_supported(&format!("{path}.status"), status, allowed));
        }
        approved |= kind == "Approved";
        denied |= kind == "Denied";
        if (kind == "Approved" && denied) || (kind == "Denied" && approved) {
            broken.both_approved_and_denied = true;
            if !allow.both_approved_and_denied {
                errors.push(FieldError::invalid(
                    &format!("{path}.type"),
                    quote(kind),
                    "Approved and Denied conditions are mutually exclusive",
                ));
            }
        }
        if seen.contains(&kind) {
            broken.duplicate_types = true;
            if !allow.duplicate_types {
                errors.push(FieldError::duplicate(&format!("{path}.type"), quote(kind)));
            }
        }
        seen.push(kind);
    }
    ConditionCheck { errors, broken }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request() -> String {
        use base64::Engine;
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        let pem = params.serialize_request(&key).unwrap().pem().unwrap();
        base64::engine::general_purpose::STANDARD.encode(pem)
    }

    #[test]
    fn the_request_must_be_a_pem_csr() {
        let not_pem = json!({"spec": {"usages": ["any"], "request": "aGk="}});
        let fields: Vec<String> = csr(&not_pem).iter().map(ToString::to_string).collect();
        assert_eq!(
            fields,
            ["spec.request: Invalid value: []byte{0x68, 0x69}: PEM block type must be CERTIFICATE REQUEST"]
        );
    }

    #[test]
    fn usages_signer_and_expiration() {
        let ok = json!({"spec": {"usages": ["client auth"], "signerName": "example.com/x", "expirationSeconds": 600,
            "request": request()}});
        assert!(csr(&ok).is_empty(), "{:?}", csr(&ok));
        let bad = json!({"spec": {"usages": ["client auth", "bogus", "client auth"],
            "signerName": "kubernetes.io/legacy-unknown", "expirationSeconds": 599}});
        let fields: Vec<String> = csr(&bad).iter().map(ToString::to_string).collect();
        assert_eq!(fields.len(), 5, "{fields:?}");
        assert_eq!(fields[0], "spec.request: Invalid value: []byte(nil): PEM block type must be CERTIFICATE REQUEST");
        let fields = &fields[1..];
        assert!(fields[0].starts_with("spec.usages[1]: Unsupported value: \"bogus\""), "{fields:?}");
        assert_eq!(fields[1], "spec.usages[2]: Duplicate value: \"client auth\"");
        assert!(fields[3].starts_with("spec.expirationSeconds: Invalid value: 599"), "{fields:?}");
        assert!(!csr(&json!({"spec": {}})).is_empty(), "usages are required");
    }
}

#[cfg(test)]
mod status_tests {
    use super::*;
    use serde_json::json;

    fn with(conditions: Value, certificate: &str) -> Value {
        json!({"status": {"conditions": conditions, "certificate": certificate}})
    }

    fn messages(errors: Vec<FieldError>) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn condition_and_certificate_rules() {
        let approved = json!({"type": "Approved", "status": "True"});
        let denied = json!({"type": "Denied", "status": "True"});
        let none = with(json!([]), "");
        let both = with(json!([approved, denied]), "");
        assert_eq!(
            messages(csr_status_update(&none, &both, true)),
            [
                "status.conditions[1].type: Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive"
            ]
        );
        assert!(csr_status_update(&both, &both, true).is_empty(), "a stored breach is allowed");
        assert_eq!(
            messages(csr_status_update(&none, &with(json!([approved]), ""), false)),
            ["status.conditions: Forbidden: updates may not add a condition of type \"Approved\""]
        );
        assert_eq!(
            messages(csr_status_update(&with(json!([approved]), ""), &none, true)),
            ["status.conditions: Forbidden: updates may not remove a condition of type \"Approved\""]
        );
        assert_eq!(
            messages(csr_status_update(&with(json!([]), "a"), &with(json!([]), "b"), false)),
            ["status.certificate: Forbidden: updates may not modify existing certificate content"]
        );
        assert_eq!(
            messages(csr_status_update(&none, &with(json!([]), "b"), true)),
            ["status.certificate: Forbidden: updates may not set certificate content"]
        );
        assert!(csr_status_update(&none, &with(json!([]), "b"), false).is_empty());
    }
}
