//! `certificates.k8s.io/v1` CertificateSigningRequest create rules of upstream's
//! `pkg/apis/certificates/validation` (`validateCertificateSigningRequest` with the v1 options):
//! usages given, known and distinct, no legacy signer, at least 10 minutes of `expirationSeconds`.
//! On the `status` and `approval` subresources, `validateConditions` and the update rules
//! (`ValidateCertificateSigningRequestStatusUpdate` / `...ApprovalUpdate`).
//! `spec.request` must hold a PEM CERTIFICATE REQUEST that parses and whose signature verifies
//! (`validateCSR`), the signer name has `ValidateSignerName`'s form, and `status.certificate`
//! holds only CERTIFICATE PEM blocks (`validateCertificate`). The "may not modify a condition"
//! rule is upstream's too, though the status strategy keeps stored Approved/Denied conditions
//! first, so the API never reaches it; its message carries a `cmp.Diff`, whose layout go-cmp
//! randomises on purpose, and ours a plain `-`/`+` listing of the JSON conditions.

use serde_json::Value;

use super::{FieldError, gojson};
use crate::apimachinery::strconv::quote;
use crate::apimachinery::validation::{is_dns1123_label, is_dns1123_subdomain};
use crate::x509;

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
        errors.push(FieldError::invalid("spec.request", go_bytes(&spec["request"]), &why.to_string()));
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
    } else {
        errors.extend(signer_name("spec.signerName", signer));
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

/// `validateCSR`: why `spec.request` (base64 in JSON) is not a CSR with a valid signature, as
/// `certificates.ParseCSR` and `CheckSignature` say.
fn request_error(request: &Value) -> Option<x509::request::RequestError> {
    x509::request::parse_csr(&decoded(request)).and_then(|csr| csr.check_signature()).err()
}

/// `apivalidation.ValidateSignerName`: `<domain with a dot>/<path>`, each dot-separated part a
/// DNS label (domain) or subdomain (path), at most 571 characters.
pub(super) fn signer_name(field: &str, signer: &str) -> Vec<FieldError> {
    if signer.is_empty() {
        return vec![FieldError::required(field, "")];
    }
    let segments: Vec<&str> = signer.split('/').collect();
    let [domain, path] = segments[..] else {
        return vec![FieldError::invalid(
            field,
            quote(signer),
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        )];
    };
    let mut errors = Vec::new();
    if domain.len() > 253 {
        errors.push(FieldError::too_long(field, 253));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    errors.extend(first_part_errors(field, domain, &labels, is_dns1123_label));
    if labels.len() < 2 {
        errors.push(FieldError::invalid(
            field,
            quote(domain),
            "should be a domain with at least two segments separated by dots",
        ));
    }
    let parts: Vec<&str> = path.split('.').collect();
    errors.extend(first_part_errors(field, path, &parts, is_dns1123_subdomain));
    if signer.len() > 253 + 253 + 63 + 1 + 1 {
        errors.push(FieldError::too_long(field, 571));
    }
    errors
}

/// The errors of the first part of `segment` that `check` refuses (upstream stops there).
fn first_part_errors(field: &str, segment: &str, parts: &[&str], check: fn(&str) -> Vec<String>) -> Vec<FieldError> {
    let Some((part, errors)) = parts.iter().map(|p| (p, check(p))).find(|(_, e)| !e.is_empty()) else {
        return Vec::new();
    };
    let detail = |e: &String| format!("validating label {}: {e}", quote(part));
    errors.iter().map(|e| FieldError::invalid(field, quote(segment), &detail(e))).collect()
}

/// `validateCertificate` of `status.certificate` (base64 in JSON): empty, or only CERTIFICATE
/// PEM blocks without headers, each holding certificates.
fn certificate_error(object: &Value) -> Option<FieldError> {
    let pem = decoded(&object["status"]["certificate"]);
    let why = certificate_pem_error(&pem)?;
    Some(FieldError::invalid("status.certificate", quote("<certificate data>"), &why.to_string()))
}

/// Why `status.certificate` is refused (the detail of its field error).
#[derive(Debug, thiserror::Error)]
enum CertificatePemError {
    /// A PEM block of another type.
    #[error("only CERTIFICATE PEM blocks are allowed, found {}", quote(.0))]
    NotACertificate(String),
    /// A CERTIFICATE block that does not parse.
    #[error("x509: malformed certificate")]
    Malformed,
    /// Data without PEM blocks.
    #[error("must contain at least one CERTIFICATE PEM block")]
    NoBlocks,
}

fn certificate_pem_error(pem: &[u8]) -> Option<CertificatePemError> {
    if pem.is_empty() {
        return None;
    }
    let blocks = x509::pem_blocks(pem);
    for (label, der) in &blocks {
        if label != "CERTIFICATE" {
            return Some(CertificatePemError::NotACertificate(label.to_string()));
        }
        if x509::certificate::parse_certificate(der).is_none() {
            return Some(CertificatePemError::Malformed);
        }
    }
    blocks.is_empty().then_some(CertificatePemError::NoBlocks)
}

fn decoded(bytes: &Value) -> Vec<u8> {
    use base64::Engine;
    let text = bytes.as_str().unwrap_or_default();
    base64::engine::general_purpose::STANDARD.decode(text).unwrap_or_default()
}

/// A `[]byte` as a field error shows it: base64 in quotes, `null` when empty (the sandbox
/// stores a missing request as "").
fn go_bytes(bytes: &Value) -> String {
    gojson::bytes(bytes.as_str().filter(|text| !text.is_empty()))
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
            let (before, after) = (conditions_of_type(old, t), conditions_of_type(new, t));
            if after.len() > before.len() {
                errors.push(FieldError::forbidden(
                    "status.conditions",
                    &format!("updates may not add a condition of type {}", quote(t)),
                ));
            } else if after.len() == before.len() && !super::semantically_equal(&before.into(), &after.clone().into()) {
                let diff = condition_diff(&conditions_of_type(old, t), &after);
                errors.push(FieldError::forbidden(
                    "status.conditions",
                    &format!("updates may not modify a condition of type {}\n{diff}", quote(t)),
                ));
            }
        }
    }
    let certificate = |o: &Value| o["status"]["certificate"].as_str().unwrap_or_default().to_string();
    // `allowArbitraryCertificate`: an untouched or already invalid certificate is not checked.
    if certificate(new) != certificate(old) && certificate_error(old).is_none() {
        errors.extend(certificate_error(new));
    }
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

/// `findConditions`: the conditions of type `t`, in order.
fn conditions_of_type(csr: &Value, t: &str) -> Vec<Value> {
    let all = csr["status"]["conditions"].as_array().map(Vec::as_slice).unwrap_or_default();
    all.iter().filter(|c| c["type"] == t).cloned().collect()
}

/// The removed (`-`) and added (`+`) conditions, one JSON object a line: the gist of upstream's
/// `cmp.Diff`, whose exact layout go-cmp varies from run to run.
fn condition_diff(before: &[Value], after: &[Value]) -> String {
    let mut lines = Vec::new();
    for (b, a) in before.iter().zip(after) {
        if !super::semantically_equal(b, a) {
            lines.push(format!("- {b}"));
            lines.push(format!("+ {a}"));
        }
    }
    lines.join("\n")
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
                // Since v1.35 on the conditions list itself (declarative `zeroOrOneOf`).
                errors.push(FieldError::invalid(
                    "status.conditions",
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

    fn base64(bytes: &[u8]) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    fn request() -> String {
        base64(crate::x509::request::fixtures::request_pem("alice", &[], &[]).as_bytes())
    }

    fn messages(errors: Vec<FieldError>) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn the_request_signature_must_verify() {
        let pem = crate::x509::request::fixtures::request_pem("alice", &[], &[]);
        let (_, mut der) = crate::x509::pem_blocks(pem.as_bytes()).remove(0);
        let last = der.len() - 1;
        der[last] ^= 1; // the signature's last byte
        let tampered = crate::x509::pem_encode("CERTIFICATE REQUEST", &der);
        let object =
            json!({"spec": {"usages": ["any"], "signerName": "example.com/x", "request": base64(tampered.as_bytes())}});
        let errors = messages(csr(&object));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].ends_with(": x509: ECDSA verification failure"), "{errors:?}");
    }

    #[test]
    fn signer_names_have_the_domain_and_path_form() {
        assert!(signer_name("f", "example.com/signer-name").is_empty());
        assert!(signer_name("f", "example.com/ns.name").is_empty());
        assert_eq!(messages(signer_name("f", "")), ["f: Required value"]);
        assert_eq!(
            messages(signer_name("f", "example.com")),
            [
                "f: Invalid value: \"example.com\": must be a fully qualified domain and path of the form 'example.com/signer-name'"
            ]
        );
        assert_eq!(
            messages(signer_name("f", "example/x")),
            ["f: Invalid value: \"example\": should be a domain with at least two segments separated by dots"]
        );
        let bad = messages(signer_name("f", "Example.com/x_y"));
        assert_eq!(bad.len(), 2, "{bad:?}");
        assert!(
            bad[0].starts_with(
                "f: Invalid value: \"Example.com\": validating label \"Example\": a lowercase RFC 1123 label"
            ),
            "{bad:?}"
        );
        assert!(
            bad[1].starts_with("f: Invalid value: \"x_y\": validating label \"x_y\": a lowercase RFC 1123 subdomain"),
            "{bad:?}"
        );
        let long = format!("example.com/{}", "a.".repeat(290) + "a");
        assert!(messages(signer_name("f", &long)).contains(&"f: Too long: may not be more than 571 bytes".to_string()));
    }

    #[test]
    fn the_request_must_be_a_pem_csr() {
        let not_pem = json!({"spec": {"usages": ["any"], "signerName": "example.com/x", "request": "aGk="}});
        let fields: Vec<String> = csr(&not_pem).iter().map(ToString::to_string).collect();
        assert_eq!(fields, ["spec.request: Invalid value: \"aGk=\": PEM block type must be CERTIFICATE REQUEST"]);
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
        assert_eq!(fields[0], "spec.request: Invalid value: null: PEM block type must be CERTIFICATE REQUEST");
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
            ["status.conditions: Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive"]
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

    #[test]
    fn status_updates_may_not_modify_approval_conditions() {
        let approved = json!({"type": "Approved", "status": "True", "reason": "AutoApproved"});
        let changed = json!({"type": "Approved", "status": "True", "reason": "Other"});
        let errors = messages(csr_status_update(&with(json!([approved]), ""), &with(json!([changed]), ""), false));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with(
                "status.conditions: Forbidden: updates may not modify a condition of type \"Approved\"\n- "
            ),
            "{errors:?}"
        );
        assert!(csr_status_update(&with(json!([approved]), ""), &with(json!([changed]), ""), true).is_empty());
    }

    #[test]
    fn a_new_certificate_must_be_certificate_pem() {
        use base64::Engine;
        let encode = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap().self_signed(&key).unwrap();
        let none = with(json!([]), "");
        assert!(csr_status_update(&none, &with(json!([]), &encode(&cert.pem())), false).is_empty());
        let key_pem = with(json!([]), &encode(&key.serialize_pem()));
        assert_eq!(
            messages(csr_status_update(&none, &key_pem, false)),
            [
                "status.certificate: Invalid value: \"<certificate data>\": only CERTIFICATE PEM blocks are allowed, found \"PRIVATE KEY\""
            ]
        );
        let text = with(json!([]), &encode("not pem"));
        assert_eq!(
            messages(csr_status_update(&none, &text, false)),
            [
                "status.certificate: Invalid value: \"<certificate data>\": must contain at least one CERTIFICATE PEM block"
            ]
        );
        let junk = with(json!([]), &encode(&crate::x509::pem_encode("CERTIFICATE", b"junk")));
        assert_eq!(
            messages(csr_status_update(&none, &junk, false)),
            ["status.certificate: Invalid value: \"<certificate data>\": x509: malformed certificate"]
        );
    }
}
