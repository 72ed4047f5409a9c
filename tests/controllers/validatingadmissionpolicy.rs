//! The validatingadmissionpolicy-status-controller on both backends: each policy's expressions
//! are type-checked against the schemas of the kinds it matches, the warnings written to
//! `status.typeChecking` with `observedGeneration`, and checked again after a spec change.

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use kcm::app::controllers::named;
use kcm::client::{Api, PostParams};
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, eventually, from};

fn policy(name: &str, validations: Value) -> ValidatingAdmissionPolicy {
    from(kcm_envtest::envtest::sidebyside::deployment_policy(name, validations))
}

/// The `(fieldRef, warning)` pairs once the status has observed the policy's generation.
fn checked(policies: &Api<ValidatingAdmissionPolicy>, name: &str) -> (i64, Vec<(String, String)>) {
    eventually(&format!("policy {name} checked at its generation"), || {
        let policy = policies.get(name).ok()?;
        let generation = policy.metadata.generation?;
        let status = policy.status?;
        (status.observed_generation == Some(generation)).then_some(())?;
        let warnings = status.type_checking.and_then(|t| t.expression_warnings).unwrap_or_default();
        Some((generation, warnings.into_iter().map(|w| (w.field_ref, w.warning)).collect()))
    })
}

on_both_backends!(expressions_that_do_not_compile_are_refused);
/// kube-apiserver compiles every expression with the variables typed `dyn`: a reference to
/// `params` without a paramKind is refused with cel-go's error.
fn expressions_that_do_not_compile_are_refused(backend: Backend) {
    let cluster = harness::with(&[]).on(backend).without_nodes().start();
    let policies = Api::<ValidatingAdmissionPolicy>::all(&cluster.client);
    let refused = policies
        .create(&policy("vap-params", json!([{"expression": "params.x > 1"}])), &PostParams::default())
        .expect_err("refused");
    let message = refused.to_string();
    let wanted = "spec.validations[0].expression: Invalid value: \"params.x > 1\": compilation failed: ERROR: \
                  <input>:1:1: undeclared reference to 'params' (in container '')\n | params.x > 1\n | ^";
    assert!(message.contains(wanted), "{message}");
    let created = policies.create(&policy("vap-defaults", json!([{"expression": "true"}])), &PostParams::default());
    let spec = serde_json::to_value(created.expect("created").spec).expect("json");
    assert_eq!(spec["matchConstraints"]["matchPolicy"], "Equivalent");
    assert_eq!(spec["matchConstraints"]["resourceRules"][0]["scope"], "*");
}

on_both_backends!(policies_are_type_checked);
fn policies_are_type_checked(backend: Backend) {
    let cluster =
        harness::with(&[named("validatingadmissionpolicy-status-controller")]).on(backend).without_nodes().start();
    let policies = Api::<ValidatingAdmissionPolicy>::all(&cluster.client);
    let post = PostParams::default();

    let good = policy("vap-replicas", json!([{"expression": "object.spec.replicas > 1"}]));
    policies.create(&good, &post).expect("created");
    assert_eq!(checked(&policies, "vap-replicas"), (1, vec![]));

    let typo = policy("vap-typo", json!([{"expression": "object.spec.replicasss > 1"}]));
    policies.create(&typo, &post).expect("created");
    let warning = "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicasss'\n \
                   | object.spec.replicasss > 1\n | ...........^\n";
    assert_eq!(checked(&policies, "vap-typo"), (1, vec![("spec.validations[0].expression".into(), warning.into())]));

    // A spec change is checked again.
    let mut fixed = policies.get("vap-typo").expect("policy");
    fixed.spec.as_mut().expect("spec").validations =
        Some(from(json!([{"expression": "object.spec.replicas > 1 && object.metadata.name != ''"}])));
    policies.replace("vap-typo", &fixed, &post).expect("replaced");
    assert_eq!(checked(&policies, "vap-typo"), (2, vec![]));

    // Quantities have no CEL type (only a oneOf), so they are no fields, as upstream.
    let quantity = policy(
        "vap-quantity",
        json!([{"expression": "object.spec.template.spec.containers.all(c, has(c.resources.limits))"}]),
    );
    policies.create(&quantity, &post).expect("created");
    let (_, warnings) = checked(&policies, "vap-quantity");
    assert!(warnings[0].1.contains("undefined field 'limits'"), "{warnings:?}");

    let message = policy(
        "vap-message",
        json!([{"expression": "object.spec.replicas > 1", "messageExpression": "'replicas: ' + object.spec.replicas"}]),
    );
    policies.create(&message, &post).expect("created");
    let warning = "apps/v1, Kind=Deployment: ERROR: <input>:1:14: found no matching overload for '_+_' applied to \
                   '(string, int)'\n | 'replicas: ' + object.spec.replicas\n | .............^\n";
    assert_eq!(
        checked(&policies, "vap-message"),
        (1, vec![("spec.validations[0].messageExpression".into(), warning.into())])
    );
}
