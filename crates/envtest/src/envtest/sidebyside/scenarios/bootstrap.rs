//! Side-by-side scenario of the `bootstrap` controller: `bootstrap`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "bootstrap",
    summary: "kube-public/cluster-info signed for two bootstrap tokens (one not for signing); one expires: \
                  deleted at its expiration and its signature removed; the other deleted: its signature removed",
    nodes: 1,
    flags: &[],
    apiserver_flags: &[],
    compare_nodes: false,
    run: bootstrap_tokens,
}];

/// A bootstrap-token Secret (kube-system); `expiration` an RFC 3339 time or none.
pub(super) fn bootstrap_token(id: &str, signing: bool, expiration: Option<String>) -> Value {
    let mut data = json!({"token-id": id, "token-secret": "0123456789abcdef",
        "usage-bootstrap-signing": if signing { "true" } else { "false" }});
    if let Some(at) = expiration {
        data["expiration"] = json!(at);
    }
    json!({"metadata": {"name": format!("bootstrap-token-{id}")}, "type": "bootstrap.kubernetes.io/token", "stringData": data})
}

/// The token IDs cluster-info is signed for.
pub(super) fn signed_for(steps: &Steps) -> Result<Vec<String>, Error> {
    let info = steps.get("/api/v1/namespaces/kube-public/configmaps/cluster-info")?.unwrap_or_default();
    let data = info["data"].as_object().cloned().unwrap_or_default();
    Ok(data.keys().filter_map(|k| k.strip_prefix("jws-kubeconfig-")).map(str::to_string).collect())
}

pub(super) fn bootstrap_tokens(steps: &mut Steps) -> Result<(), Error> {
    // kubeadm's cluster-info, with a kubeconfig that is the same on both control planes so that
    // the signatures compare.
    let kubeconfig = "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: Q0E=\n    server: https://control-plane.example:6443\n  name: \"\"\ncontexts: null\ncurrent-context: \"\"\nkind: Config\npreferences: {}\nusers: null\n";
    let config_maps = "/api/v1/namespaces/kube-public/configmaps";
    steps.create(config_maps, json!({"metadata": {"name": "cluster-info"}, "data": {"kubeconfig": kubeconfig}}))?;
    steps.namespaces.push("kube-public".into());
    let secrets = "/api/v1/namespaces/kube-system/secrets";
    let expiration = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(10);
    let expiration = expiration.round(jiff::Unit::Second)?.to_string();
    steps.create(secrets, bootstrap_token("abcdef", true, None))?;
    steps.create(secrets, bootstrap_token("expire", true, Some(expiration)))?;
    steps.create(secrets, bootstrap_token("nosign", false, None))?;
    steps.wait("cluster-info signed for both signing tokens", |s| {
        Ok((signed_for(s)? == ["abcdef", "expire"]).then_some(()))
    })?;
    steps.checkpoint("signed")?;
    steps.wait_gone(&format!("{secrets}/bootstrap-token-expire"))?;
    steps.wait("the expired token's signature removed", |s| Ok((signed_for(s)? == ["abcdef"]).then_some(())))?;
    steps.checkpoint("expired and cleaned")?;
    steps.delete(&format!("{secrets}/bootstrap-token-abcdef"), None)?;
    steps.wait("the deleted token's signature removed", |s| Ok(signed_for(s)?.is_empty().then_some(())))
}
