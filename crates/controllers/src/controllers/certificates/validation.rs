//! The per-signer request rules of upstream's `pkg/apis/certificates/helpers.go` and
//! `signer.go` (`validAPIServerClientUsages`), with their exact error texts.

use std::collections::BTreeSet;

use crate::x509::request::CertificateRequest;

const ORGANIZATION_NOT_SYSTEM_NODES: &str = "subject organization is not system:nodes";
const COMMON_NAME_NOT_SYSTEM_NODE: &str = "subject common name does not begin with system:node:";

/// The usages as a set (`usagesToSet`).
fn usage_set(usages: &[String]) -> BTreeSet<&str> {
    usages.iter().map(String::as_str).collect()
}

/// Whether `usages` is exactly `with_rsa` or exactly `with_rsa` less `key encipherment`.
fn usages_match(usages: &[String], with_rsa: &[&str]) -> Result<(), String> {
    let set = usage_set(usages);
    let full: BTreeSet<&str> = with_rsa.iter().copied().collect();
    let mut no_rsa = full.clone();
    no_rsa.remove("key encipherment");
    if set == full || set == no_rsa {
        return Ok(());
    }
    Err(format!("usages did not match [{}]", full.into_iter().collect::<Vec<_>>().join(" ")))
}

fn only_system_nodes(req: &CertificateRequest) -> Result<(), String> {
    if req.subject.organization != ["system:nodes"] {
        return Err(ORGANIZATION_NOT_SYSTEM_NODES.to_string());
    }
    Ok(())
}

/// `ValidateKubeletServingCSR`.
pub fn kubelet_serving(req: &CertificateRequest, usages: &[String]) -> Result<(), String> {
    only_system_nodes(req)?;
    if req.dns_names.is_empty() && req.ip_addresses.is_empty() {
        return Err("DNS or IP subjectAltName is required".to_string());
    }
    if !req.email_addresses.is_empty() {
        return Err("Email subjectAltNames are not allowed".to_string());
    }
    if !req.uris.is_empty() {
        return Err("URI subjectAltNames are not allowed".to_string());
    }
    usages_match(usages, &["digital signature", "key encipherment", "server auth"])?;
    if !req.subject.common_name.starts_with("system:node:") {
        return Err(COMMON_NAME_NOT_SYSTEM_NODE.to_string());
    }
    Ok(())
}

/// `ValidateKubeletClientCSR`.
pub fn kubelet_client(req: &CertificateRequest, usages: &[String]) -> Result<(), String> {
    only_system_nodes(req)?;
    if !req.dns_names.is_empty() {
        return Err("DNS subjectAltNames are not allowed".to_string());
    }
    if !req.email_addresses.is_empty() {
        return Err("Email subjectAltNames are not allowed".to_string());
    }
    if !req.ip_addresses.is_empty() {
        return Err("IP subjectAltNames are not allowed".to_string());
    }
    if !req.uris.is_empty() {
        return Err("URI subjectAltNames are not allowed".to_string());
    }
    if !req.subject.common_name.starts_with("system:node:") {
        return Err(COMMON_NAME_NOT_SYSTEM_NODE.to_string());
    }
    usages_match(usages, &["client auth", "digital signature", "key encipherment"])
}

/// `validAPIServerClientUsages`.
pub fn kube_apiserver_client(usages: &[String]) -> Result<(), String> {
    let mut client_auth = false;
    for usage in usages {
        match usage.as_str() {
            "digital signature" | "key encipherment" => {}
            "client auth" => client_auth = true,
            other => return Err(format!("invalid usage for client certificate: {other}")),
        }
    }
    if !client_auth {
        return Err("missing required usage for client certificate: client auth".to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::x509::request::fixtures::request;

    fn usages(u: &[&str]) -> Vec<String> {
        u.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn kubelet_client_rules() {
        let good = request("system:node:n1", &["system:nodes"], &[]);
        assert_eq!(kubelet_client(&good, &usages(&["digital signature", "client auth"])), Ok(()));
        assert_eq!(kubelet_client(&good, &usages(&["key encipherment", "digital signature", "client auth"])), Ok(()));
        assert_eq!(
            kubelet_client(&good, &usages(&["client auth"])),
            Err("usages did not match [client auth digital signature key encipherment]".into())
        );
        let other_org = request("system:node:n1", &["system:masters"], &[]);
        assert_eq!(kubelet_client(&other_org, &[]), Err(ORGANIZATION_NOT_SYSTEM_NODES.into()));
        let dns = request("system:node:n1", &["system:nodes"], &["n1"]);
        assert_eq!(kubelet_client(&dns, &[]), Err("DNS subjectAltNames are not allowed".into()));
        let name = request("n1", &["system:nodes"], &[]);
        assert_eq!(kubelet_client(&name, &[]), Err(COMMON_NAME_NOT_SYSTEM_NODE.into()));
    }

    #[test]
    fn kubelet_serving_rules() {
        let good = request("system:node:n1", &["system:nodes"], &["n1", "10.0.0.1"]);
        assert_eq!(kubelet_serving(&good, &usages(&["digital signature", "key encipherment", "server auth"])), Ok(()));
        assert_eq!(kubelet_serving(&good, &usages(&["digital signature", "server auth"])), Ok(()));
        assert_eq!(
            kubelet_serving(&good, &usages(&["server auth", "client auth"])),
            Err("usages did not match [digital signature key encipherment server auth]".into())
        );
        let no_san = request("system:node:n1", &["system:nodes"], &[]);
        assert_eq!(kubelet_serving(&no_san, &[]), Err("DNS or IP subjectAltName is required".into()));
    }

    #[test]
    fn kube_apiserver_client_rules() {
        assert_eq!(kube_apiserver_client(&usages(&["client auth", "digital signature"])), Ok(()));
        assert_eq!(
            kube_apiserver_client(&usages(&["client auth", "server auth"])),
            Err("invalid usage for client certificate: server auth".into())
        );
        assert_eq!(
            kube_apiserver_client(&usages(&["digital signature"])),
            Err("missing required usage for client certificate: client auth".into())
        );
    }
}
