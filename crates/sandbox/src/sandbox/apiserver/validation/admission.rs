//! ValidatingAdmissionPolicies (`pkg/apis/admissionregistration/validation`): match constraints
//! with resource rules, at least one validation or audit annotation, and every CEL expression
//! compiling as kube-apiserver compiles it (object, params and the rest typed `dyn`), with its
//! `compilation failed: ERROR: ...` detail; a validation must evaluate to bool and a message
//! expression to string.

use serde_json::Value;

use super::FieldError;
use crate::cel::{Env, Type, authorizer_type, compile};

/// `validateValidatingAdmissionPolicySpec`, the parts the sandbox checks.
pub(super) fn policy(object: &Value) -> Vec<FieldError> {
    let spec = &object["spec"];
    let mut causes = Vec::new();
    if !spec["matchConstraints"].is_object() {
        causes.push(FieldError::required("spec.matchConstraints", ""));
    } else if spec["matchConstraints"]["resourceRules"].as_array().is_none_or(Vec::is_empty) {
        causes.push(FieldError::required("spec.matchConstraints.resourceRules", ""));
    }
    let env = environment(spec);
    let validations = spec["validations"].as_array().cloned().unwrap_or_default();
    if validations.is_empty() && spec["auditAnnotations"].as_array().is_none_or(Vec::is_empty) {
        let detail = "validations or auditAnnotations must contain at least one item";
        causes.push(FieldError::required("spec.validations", detail));
        causes.push(FieldError::required("spec.auditAnnotations", detail));
    }
    for (i, validation) in validations.iter().enumerate() {
        let path = format!("spec.validations[{i}]");
        let expression = validation["expression"].as_str().unwrap_or_default();
        if expression.trim().is_empty() {
            causes.push(FieldError::required(&format!("{path}.expression"), "expression is not specified"));
        } else {
            causes.extend(expression_cause(&env, &format!("{path}.expression"), expression, &Type::Bool));
        }
        if let Some(message) = validation["messageExpression"].as_str().filter(|m| !m.is_empty()) {
            let field = format!("{path}.messageExpression");
            if message.trim().is_empty() {
                causes.push(FieldError::invalid_str(&field, message, "must be non-empty if specified"));
            } else {
                causes.extend(expression_cause(&env, &field, message, &Type::String));
            }
        }
    }
    causes
}

/// The environment kube-apiserver validates with: every variable `dyn`, `params` only with a
/// paramKind, `variables` with the policy's variable names.
fn environment(spec: &Value) -> Env {
    let mut env = Env::new();
    for name in ["object", "oldObject", "request", "namespaceObject"] {
        env.declare(name, Type::Dyn);
    }
    if spec["paramKind"].is_object() {
        env.declare("params", Type::Dyn);
    }
    env.declare("authorizer", authorizer_type());
    let names: Vec<&str> =
        spec["variables"].as_array().into_iter().flatten().filter_map(|v| v["name"].as_str()).collect();
    let fields = names.into_iter().map(|n| (n, Type::Dyn)).collect();
    env.declare("variables", Type::object("kubernetes.variables", fields));
    env
}

/// A compile error (`compilation failed: ...`) or a result of the wrong type.
fn expression_cause(env: &Env, field: &str, expression: &str, wanted: &Type) -> Option<FieldError> {
    match compile(env, expression) {
        Err(issues) => Some(FieldError::invalid_str(field, expression, &format!("compilation failed: {issues}"))),
        Ok(t) if t != *wanted && !t.is_dyn_or_error() => {
            Some(FieldError::invalid_str(field, expression, &format!("must evaluate to {wanted} but got {t}")))
        }
        Ok(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn causes(spec: Value) -> Vec<String> {
        policy(&json!({"spec": spec})).iter().map(|c| format!("{}: {}", c.field, c.detail)).collect()
    }

    #[test]
    fn expressions_must_compile() {
        let rules =
            json!({"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]});
        assert!(causes(json!({"matchConstraints": rules, "validations": [{"expression": "object.x > 1"}]})).is_empty());
        let bad = causes(json!({"matchConstraints": rules, "validations": [{"expression": "params.x > 1"}]}));
        assert_eq!(
            bad,
            [
                "spec.validations[0].expression: compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' \
              (in container '')\n | params.x > 1\n | ^"
            ]
        );
        let not_bool = causes(json!({"matchConstraints": rules, "validations": [{"expression": "1"}]}));
        assert_eq!(not_bool, ["spec.validations[0].expression: must evaluate to bool but got int"]);
        let missing = causes(json!({}));
        assert_eq!(missing.len(), 3, "{missing:?}");
    }
}
