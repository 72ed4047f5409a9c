//! Side-by-side scenario of the `root_ca_publisher` controller: `serviceaccounts-rootca`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "serviceaccounts-rootca",
    summary: "a new namespace gets its default ServiceAccount and kube-root-ca.crt, restored when changed",
    nodes: 1,
    flags: &[],
    apiserver_flags: &[],
    compare_nodes: false,
    run: service_accounts_root_ca,
}];

pub(super) fn service_accounts_root_ca(steps: &mut Steps) -> Result<(), Error> {
    let ns = "sbs-fresh";
    steps.namespaces.push(ns.to_string());
    steps.create("/api/v1/namespaces", json!({"metadata": {"name": ns}}))?;
    let account = format!("/api/v1/namespaces/{ns}/serviceaccounts/default");
    let root_ca = format!("/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt");
    steps.wait("the default ServiceAccount and kube-root-ca.crt", |s| {
        Ok((s.get(&account)?.is_some() && s.get(&root_ca)?.is_some()).then_some(()))
    })?;
    steps.checkpoint("new namespace")?;
    steps.patch(&root_ca, json!({"data": {"ca.crt": "tampered"}}))?;
    steps.delete(&account, None)?;
    steps.wait("kube-root-ca.crt restored and default recreated", |s| {
        let map = s.get(&root_ca)?.unwrap_or_default();
        let restored = map["data"]["ca.crt"].as_str().is_some_and(|ca| ca.contains("BEGIN CERTIFICATE"));
        Ok((restored && s.get(&account)?.is_some()).then_some(()))
    })
}
