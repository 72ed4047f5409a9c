//! Side-by-side scenario of the `certificates` controller: `certificates`.

use serde_json::json;

use super::*;

mod hostile;

pub(super) static SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "certificates",
        summary: "a kubelet client CSR auto-approved and signed, a serving CSR approved by the admin and signed, \
                  one asking for 15 minutes, and a refused client CSR",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: certificates,
    },
    Scenario {
        name: "certificates-hostile",
        summary: "48 hostile and unusual CSRs: kubelet client CSRs from nodes, bootstrap tokens and a user with and \
                  without permission; wrong names, groups, usages and SANs for each signer; names written as Go \
                  reads them (the last CN, BMPString, the first extensionRequest value, the PEM block Go reads); \
                  every key type and signature algorithm Go verifies; lifetimes capped",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: hostile::hostile_csrs,
    },
];

/// A PEM PKCS#10 request for `cn` in `orgs` with `sans`: DNS names and IPs as rcgen reads
/// them, or `email:`/`uri:` prefixed. (rcgen keeps one value per attribute type: a subject
/// with repeated ones is written with `x509::der::name`.)
fn request(cn: &str, orgs: &[&str], sans: &[&str]) -> Result<String, Error> {
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(rcgen::DnType::CommonName, cn);
    for org in orgs {
        params.distinguished_name.push(rcgen::DnType::OrganizationName, *org);
    }
    for san in sans {
        params.subject_alt_names.push(if let Some(email) = san.strip_prefix("email:") {
            rcgen::SanType::Rfc822Name(email.try_into()?)
        } else if let Some(uri) = san.strip_prefix("uri:") {
            rcgen::SanType::URI(uri.try_into()?)
        } else if let Ok(ip) = san.parse() {
            rcgen::SanType::IpAddress(ip)
        } else {
            rcgen::SanType::DnsName((*san).try_into()?)
        });
    }
    Ok(params.serialize_request(&key)?.pem()?)
}

/// [`request`], base64 for `spec.request`.
fn csr_request(cn: &str, orgs: &[&str], sans: &[&str]) -> Result<String, Error> {
    use base64::Engine;
    Ok(base64::engine::general_purpose::STANDARD.encode(request(cn, orgs, sans)?))
}

pub(super) fn certificates(steps: &mut Steps) -> Result<(), Error> {
    let csr = |name: &str, request: String, signer: &str, usages: &[&str], expiration: Option<i32>| {
        json!({"metadata": {"name": name}, "spec": {"request": request, "signerName": signer,
            "usages": usages, "expirationSeconds": expiration}})
    };
    let node = ("system:node:sbs-node", &["system:nodes"][..]);
    let client = csr_request(node.0, node.1, &[])?;
    steps.create(
        CSRS,
        csr(
            "sbs-client",
            client,
            "kubernetes.io/kube-apiserver-client-kubelet",
            &["digital signature", "client auth"],
            None,
        ),
    )?;
    let serving = csr_request(node.0, node.1, &["sbs-node.example"])?;
    let serving_usages = ["digital signature", "key encipherment", "server auth"];
    steps.create(CSRS, csr("sbs-serving", serving, "kubernetes.io/kubelet-serving", &serving_usages, None))?;
    let short = csr_request(node.0, node.1, &["sbs-node.example"])?;
    steps.create(CSRS, csr("sbs-short", short, "kubernetes.io/kubelet-serving", &serving_usages, Some(900)))?;
    let refused = csr_request("someone", &[], &[])?;
    steps.create(
        CSRS,
        csr("sbs-refused", refused, "kubernetes.io/kube-apiserver-client", &["client auth", "server auth"], None),
    )?;
    for name in ["sbs-serving", "sbs-short", "sbs-refused"] {
        let path = format!("{CSRS}/{name}");
        let mut object = steps.get(&path)?.ok_or_else(|| Error::Scenario(format!("{name} is gone")))?;
        object["status"]["conditions"] = json!([{"type": "Approved", "status": "True", "reason": "SideBySide", "message": "approved by the scenario"}]);
        steps.replace(&format!("{path}/approval"), object)?;
    }
    steps.wait("three CSRs signed and one failed", |s| {
        let csrs = s.list(CSRS)?;
        let signed = csrs.iter().filter(|c| c["status"]["certificate"].is_string()).count();
        let failed = csrs
            .iter()
            .filter(|c| c["status"]["conditions"].as_array().is_some_and(|l| l.iter().any(|c| c["type"] == "Failed")))
            .count();
        Ok((signed == 3 && failed == 1).then_some(()))
    })?;
    steps.checkpoint("signed")
}
