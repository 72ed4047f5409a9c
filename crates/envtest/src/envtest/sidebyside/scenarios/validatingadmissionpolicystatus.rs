//! Side-by-side scenario of the `validatingadmissionpolicystatus` controller: `vap`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "vap",
    summary: "two ValidatingAdmissionPolicies on Deployments type-checked, one with a type error in its \
                  expression and message expression, one without; the wrong one fixed and checked again",
    nodes: 1,
    flags: &[],
    apiserver_flags: &[],
    compare_nodes: false,
    run: admission_policies,
}];

pub(super) const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";

/// A ValidatingAdmissionPolicy on apps/v1 Deployments (create and update) with `validations`
/// (also the policy tests' fixture).
pub fn deployment_policy(name: &str, validations: Value) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                "resources": ["deployments"],
            }]},
            "validations": validations,
        },
    })
}

/// Whether the policy's status has observed its current generation.
pub(super) fn policy_checked(steps: &Steps, name: &str) -> Result<Option<()>, Error> {
    let Some(policy) = steps.get(&format!("{POLICIES}/{name}"))? else { return Ok(None) };
    let observed = policy["status"]["observedGeneration"].as_i64();
    Ok((observed.is_some() && observed == policy["metadata"]["generation"].as_i64()).then_some(()))
}

pub(super) fn admission_policies(steps: &mut Steps) -> Result<(), Error> {
    steps.cluster_objects = ["vap-good", "vap-wrong", "vap-quantity"].map(|n| format!("{POLICIES}/{n}")).to_vec();
    let good = json!({"expression": "object.spec.replicas <= 5 && object.metadata.name.startsWith('web')",
        "messageExpression": "'too many replicas: ' + string(object.spec.replicas)"});
    steps.create(POLICIES, deployment_policy("vap-good", json!([good])))?;
    let wrong = json!({"expression": "object.spec.replicasss > 1",
        "messageExpression": "'replicas: ' + object.spec.replicas"});
    steps.create(POLICIES, deployment_policy("vap-wrong", json!([wrong])))?;
    // Quantities have no CEL type: upstream reports their fields undefined.
    let quantity = json!({"expression":
        "object.spec.template.spec.containers.all(c, has(c.resources.limits) && c.image != '')"});
    steps.create(POLICIES, deployment_policy("vap-quantity", json!([quantity])))?;
    for name in ["vap-good", "vap-wrong", "vap-quantity"] {
        steps.wait(&format!("{name} checked"), |s| policy_checked(s, name))?;
    }
    steps.checkpoint("checked")?;
    let fixed = json!({"spec": {"validations": [{"expression": "object.spec.replicas > 1"}]}});
    steps.patch(&format!("{POLICIES}/vap-wrong"), fixed)?;
    steps.wait("vap-wrong checked again", |s| policy_checked(s, "vap-wrong"))
}

// DRA: the steps play kube-scheduler's part (allocate a claim, bind its pod) and the driver's
// (publish a ResourceSlice); the controllers do the rest.
