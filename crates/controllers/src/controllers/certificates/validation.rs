//! The per-signer request rules of upstream's `pkg/apis/certificates/helpers.go` and
//! `signer.go` (`validAPIServerClientUsages`), with their exact error texts.

use std::collections::BTreeSet;

use crate::x509::request::CertificateRequest;

const ORGANIZATION_NOT_SYSTEM_NODES: &str = "subject organization is not system:nodes";
const COMMON_NAME_NOT_SYSTEM_NODE: &str = "subject common name does not begin with system:node:";

/// Why a request breaks its signer's rules: the text of the CSR's `Failed` condition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The usages are not the signer's set (with or without `key encipherment`).
    #[error("usages did not match [{}]", .expected.join(" "))]
    UsagesDidNotMatch {
        /// The signer's usages (with `key encipherment`), sorted.
        expected: Vec<&'static str>,
    },
    /// The subject's organization is not exactly `system:nodes`.
    #[error("{}", ORGANIZATION_NOT_SYSTEM_NODES)]
    OrganizationNotSystemNodes,
    /// A serving certificate names neither a DNS name nor an IP.
    #[error("DNS or IP subjectAltName is required")]
    NoDnsOrIpSan,
    /// A client certificate names a DNS name.
    #[error("DNS subjectAltNames are not allowed")]
    DnsSan,
    /// The request names an email address.
    #[error("Email subjectAltNames are not allowed")]
    EmailSan,
    /// A client certificate names an IP.
    #[error("IP subjectAltNames are not allowed")]
    IpSan,
    /// The request names a URI.
    #[error("URI subjectAltNames are not allowed")]
    UriSan,
    /// The common name is not `system:node:<name>`.
    #[error("{}", COMMON_NAME_NOT_SYSTEM_NODE)]
    CommonNameNotSystemNode,
    /// A usage a client certificate may not have.
    #[error("invalid usage for client certificate: {0}")]
    InvalidClientUsage(String),
    /// A client certificate without `client auth`.
    #[error("missing required usage for client certificate: client auth")]
    MissingClientAuth,
}

/// The usages as a set (`usagesToSet`).
fn usage_set(usages: &[String]) -> BTreeSet<&str> {
    usages.iter().map(String::as_str).collect()
}

/// Whether `usages` is exactly `with_rsa` or exactly `with_rsa` less `key encipherment`.
fn usages_match(usages: &[String], with_rsa: &[&'static str]) -> Result<(), Error> {
    let set = usage_set(usages);
    let full: BTreeSet<&'static str> = with_rsa.iter().copied().collect();
    let mut no_rsa = full.clone();
    no_rsa.remove("key encipherment");
    if set == full || set == no_rsa {
        return Ok(());
    }
    Err(Error::UsagesDidNotMatch { expected: full.into_iter().collect() })
}

fn only_system_nodes(req: &CertificateRequest) -> Result<(), Error> {
    if req.subject.organization != ["system:nodes"] {
        return Err(Error::OrganizationNotSystemNodes);
    }
    Ok(())
}

/// `ValidateKubeletServingCSR`.
pub fn kubelet_serving(req: &CertificateRequest, usages: &[String]) -> Result<(), Error> {
    only_system_nodes(req)?;
    if req.dns_names.is_empty() && req.ip_addresses.is_empty() {
        return Err(Error::NoDnsOrIpSan);
    }
    if !req.email_addresses.is_empty() {
        return Err(Error::EmailSan);
    }
    if !req.uris.is_empty() {
        return Err(Error::UriSan);
    }
    usages_match(usages, &["digital signature", "key encipherment", "server auth"])?;
    if !req.subject.common_name.starts_with("system:node:") {
        return Err(Error::CommonNameNotSystemNode);
    }
    Ok(())
}

/// `ValidateKubeletClientCSR`.
pub fn kubelet_client(req: &CertificateRequest, usages: &[String]) -> Result<(), Error> {
    only_system_nodes(req)?;
    if !req.dns_names.is_empty() {
        return Err(Error::DnsSan);
    }
    if !req.email_addresses.is_empty() {
        return Err(Error::EmailSan);
    }
    if !req.ip_addresses.is_empty() {
        return Err(Error::IpSan);
    }
    if !req.uris.is_empty() {
        return Err(Error::UriSan);
    }
    if !req.subject.common_name.starts_with("system:node:") {
        return Err(Error::CommonNameNotSystemNode);
    }
    usages_match(usages, &["client auth", "digital signature", "key encipherment"])
}

/// `validAPIServerClientUsages`.
pub fn kube_apiserver_client(usages: &[String]) -> Result<(), Error> {
    let mut client_auth = false;
    for usage in usages {
        match usage.as_str() {
            "digital signature" | "key encipherment" => {}
            "client auth" => client_auth = true,
            other => return Err(Error::InvalidClientUsage(other.to_string())),
        }
    }
    if !client_auth {
        return Err(Error::MissingClientAuth);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::x509::request::fixtures::request;

    /// The rule's text, as the `Failed` condition carries it.
    fn text(result: Result<(), Error>) -> Result<(), String> {
        result.map_err(|e| e.to_string())
    }

    fn usages(u: &[&str]) -> Vec<String> {
        u.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn kubelet_client_rules() {
        let good = request("system:node:n1", &["system:nodes"], &[]);
        assert_eq!(text(kubelet_client(&good, &usages(&["digital signature", "client auth"]))), Ok(()));
        assert_eq!(
            text(kubelet_client(&good, &usages(&["key encipherment", "digital signature", "client auth"]))),
            Ok(())
        );
        assert_eq!(
            text(kubelet_client(&good, &usages(&["client auth"]))),
            Err("usages did not match [client auth digital signature key encipherment]".into())
        );
        let other_org = request("system:node:n1", &["system:masters"], &[]);
        assert_eq!(text(kubelet_client(&other_org, &[])), Err(ORGANIZATION_NOT_SYSTEM_NODES.into()));
        let dns = request("system:node:n1", &["system:nodes"], &["n1"]);
        assert_eq!(text(kubelet_client(&dns, &[])), Err("DNS subjectAltNames are not allowed".into()));
        let name = request("n1", &["system:nodes"], &[]);
        assert_eq!(text(kubelet_client(&name, &[])), Err(COMMON_NAME_NOT_SYSTEM_NODE.into()));
    }

    #[test]
    fn kubelet_serving_rules() {
        let good = request("system:node:n1", &["system:nodes"], &["n1", "10.0.0.1"]);
        assert_eq!(
            text(kubelet_serving(&good, &usages(&["digital signature", "key encipherment", "server auth"]))),
            Ok(())
        );
        assert_eq!(text(kubelet_serving(&good, &usages(&["digital signature", "server auth"]))), Ok(()));
        assert_eq!(
            text(kubelet_serving(&good, &usages(&["server auth", "client auth"]))),
            Err("usages did not match [digital signature key encipherment server auth]".into())
        );
        let no_san = request("system:node:n1", &["system:nodes"], &[]);
        assert_eq!(text(kubelet_serving(&no_san, &[])), Err("DNS or IP subjectAltName is required".into()));
    }

    #[test]
    fn kube_apiserver_client_rules() {
        assert_eq!(text(kube_apiserver_client(&usages(&["client auth", "digital signature"]))), Ok(()));
        assert_eq!(
            text(kube_apiserver_client(&usages(&["client auth", "server auth"]))),
            Err("invalid usage for client certificate: server auth".into())
        );
        assert_eq!(
            text(kube_apiserver_client(&usages(&["digital signature"]))),
            Err("missing required usage for client certificate: client auth".into())
        );
    }
}
