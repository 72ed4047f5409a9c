//! Side-by-side scenario `certificates-hostile`: CSRs meant to get a certificate, or a group,
//! or a name, that their requester should not have — submitted by five identities, to every
//! built-in signer — and CSRs of every key type and signature algorithm Go verifies. Both
//! binaries must decide each the same: approved or not, signed or failed (with the same
//! condition), and the certificate saying the same things (see `summarise_csr`).
//!
//! kube-apiserver refuses at create what Go cannot parse or whose signature does not verify
//! (malformed PEM and DER, truncated or trailing data, MD5, DSA, RSA below 1024 bits,
//! `expirationSeconds` below 600, unknown usages, `legacy-unknown` on v1, and — NodeRestriction —
//! a node's kubelet client CSR for another node), so those never reach
//! a controller; the readers' answers to them are covered by the generated bad input of
//! `kcm_base::x509` instead. The key-type requests are `kcm_base::x509::samples`.

use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::json;

use super::super::*;
use super::request;
use crate::x509::der;
use crate::x509::oid::*;

const CLIENT_KUBELET: &str = "kubernetes.io/kube-apiserver-client-kubelet";
const CLIENT: &str = "kubernetes.io/kube-apiserver-client";
const SERVING: &str = "kubernetes.io/kubelet-serving";
const KUBELET_CLIENT_USAGES: &[&str] = &["digital signature", "client auth"];
const SERVING_USAGES: &[&str] = &["digital signature", "key encipherment", "server auth"];
/// The bootstrap token whose group may create `nodeclient` CSRs, and one whose may not.
const TOKEN_ALLOWED: (&str, &str) = ("sbsaaa", "0123456789abcdef");
const TOKEN_REFUSED: (&str, &str) = ("sbsbbb", "0123456789abcdef");
/// How long both binaries get to decide every CSR that has an outcome to wait for; what one
/// leaves undecided then shows as a difference.
const DECIDE_WITHIN: Duration = Duration::from_secs(90);

/// Who submits a CSR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Requester {
    Admin,
    /// `system:node:sbs-a`, allowed `selfnodeclient`.
    NodeA,
    /// `system:node:sbs-b`, allowed nothing more than a node is.
    NodeB,
    /// A bootstrap token in `system:bootstrappers:sbs-approved`, allowed `nodeclient`.
    BootstrapAllowed,
    /// A bootstrap token in no group allowed `nodeclient`.
    BootstrapRefused,
    /// `mallory`, who may create CSRs and nothing else.
    User,
}

/// What the scenario waits for on a CSR before comparing (what upstream does with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    /// Approved by the approver and signed.
    AutoApprovedAndSigned,
    /// Left alone by the approver (and so by the signers).
    Pending,
    /// Approved by the scenario, then signed.
    Signed,
    /// Approved by the scenario, then failed by the signer.
    Failed,
    /// Approved by the scenario; no signer acts on it.
    Unsigned,
}

/// One CSR of the scenario.
struct Case {
    name: String,
    requester: Requester,
    signer: &'static str,
    usages: &'static [&'static str],
    expiration: Option<i32>,
    /// The PEM request.
    request: String,
    outcome: Decision,
}

impl Case {
    fn new(name: &str, requester: Requester, signer: &'static str, request: String, outcome: Decision) -> Case {
        let usages = match signer {
            SERVING => SERVING_USAGES,
            CLIENT => &["digital signature", "client auth"],
            _ => KUBELET_CLIENT_USAGES,
        };
        Case { name: format!("h-{name}"), requester, signer, usages, expiration: None, request, outcome }
    }

    fn usages(self, usages: &'static [&'static str]) -> Case {
        Case { usages, ..self }
    }

    fn expiration(self, seconds: i32) -> Case {
        Case { expiration: Some(seconds), ..self }
    }

    fn approved_by_the_scenario(&self) -> bool {
        matches!(self.outcome, Decision::Signed | Decision::Failed | Decision::Unsigned)
    }
}

/// A PEM request written byte by byte: `subject` and `attributes` around a fresh P-256 key.
fn written(subject: &[u8], attributes: &[u8]) -> Result<String, Error> {
    use rcgen::{PublicKeyData, SigningKey};
    let key = rcgen::KeyPair::generate()?;
    let der =
        der::certification_request(subject, &key.subject_public_key_info(), attributes, OID_ECDSA_SHA256, |info| {
            key.sign(info)
        })?;
    Ok(crate::x509::pem_encode("CERTIFICATE REQUEST", &der))
}

/// A subject of PrintableString organisations `orgs` then the common name `cn`, each value
/// kept (rcgen keeps one value per attribute type).
fn subject(orgs: &[&str], cn: &str) -> Vec<u8> {
    let mut attributes: Vec<(&[u8], u8, &[u8])> = orgs.iter().map(|o| (OID_ORGANIZATION, 0x13, o.as_bytes())).collect();
    attributes.push((OID_COMMON_NAME, 0x13, cn.as_bytes()));
    der::name(&attributes)
}

/// An `extensionRequest` of one SAN extension with the general names `(tag, bytes)`.
fn san_attribute(names: &[(u8, &[u8])]) -> Vec<u8> {
    let names: Vec<u8> = names.iter().flat_map(|(tag, value)| der::tlv(*tag, value)).collect();
    let extensions = der::tlv(0x30, &der::extension(OID_SAN, false, &der::tlv(0x30, &names)));
    der::extension_request(&[extensions])
}

/// A BMPString's bytes.
fn bmp(text: &str) -> Vec<u8> {
    text.encode_utf16().flat_map(u16::to_be_bytes).collect()
}

/// The subject `O=system:nodes, CN=<cn>` with the CN written as `tag`.
fn node_subject(cn_tag: u8, cn: &[u8]) -> Vec<u8> {
    der::name(&[(OID_ORGANIZATION, 0x13, b"system:nodes"), (OID_COMMON_NAME, cn_tag, cn)])
}

/// Every case, in the order they are submitted.
fn cases() -> Result<Vec<Case>, Error> {
    use Decision::*;
    use Requester::*;
    let nodes = ["system:nodes"];
    let mut cases = vec![
        // Who may have a kubelet client certificate approved.
        Case::new("self", NodeA, CLIENT_KUBELET, request("system:node:sbs-a", &nodes, &[])?, AutoApprovedAndSigned),
        Case::new("self-not-allowed", NodeB, CLIENT_KUBELET, request("system:node:sbs-b", &nodes, &[])?, Pending),
        Case::new(
            "bootstrap",
            BootstrapAllowed,
            CLIENT_KUBELET,
            request("system:node:sbs-c", &nodes, &[])?,
            AutoApprovedAndSigned,
        ),
        Case::new(
            "bootstrap-not-allowed",
            BootstrapRefused,
            CLIENT_KUBELET,
            request("system:node:sbs-d", &nodes, &[])?,
            Pending,
        ),
        Case::new("user-not-allowed", User, CLIENT_KUBELET, request("system:node:sbs-e", &nodes, &[])?, Pending),
        // What a kubelet client CSR may ask for.
        Case::new("cn-not-a-node", BootstrapAllowed, CLIENT_KUBELET, request("sbs-c", &nodes, &[])?, Pending),
        Case::new(
            "extra-org",
            BootstrapAllowed,
            CLIENT_KUBELET,
            written(&subject(&["system:nodes", "sbs-extra"], "system:node:sbs-c"), &[])?,
            Pending,
        ),
        Case::new("no-org", BootstrapAllowed, CLIENT_KUBELET, request("system:node:sbs-c", &[], &[])?, Pending),
        Case::new(
            "org-twice",
            BootstrapAllowed,
            CLIENT_KUBELET,
            written(&subject(&["system:nodes", "system:nodes"], "system:node:sbs-c"), &[])?,
            Pending,
        ),
        Case::new(
            "with-key-encipherment",
            BootstrapAllowed,
            CLIENT_KUBELET,
            request("system:node:sbs-c", &nodes, &[])?,
            AutoApprovedAndSigned,
        )
        .usages(&["key encipherment", "digital signature", "client auth"]),
        Case::new(
            "client-auth-only",
            BootstrapAllowed,
            CLIENT_KUBELET,
            request("system:node:sbs-c", &nodes, &[])?,
            Pending,
        )
        .usages(&["client auth"]),
        Case::new(
            "and-server-auth",
            BootstrapAllowed,
            CLIENT_KUBELET,
            request("system:node:sbs-c", &nodes, &[])?,
            Pending,
        )
        .usages(&["digital signature", "client auth", "server auth"]),
        Case::new(
            "client-with-dns",
            BootstrapAllowed,
            CLIENT_KUBELET,
            request("system:node:sbs-c", &nodes, &["sbs-c.example"])?,
            Pending,
        ),
        Case::new(
            "client-with-dns-approved",
            Admin,
            CLIENT_KUBELET,
            request("system:node:sbs-c", &nodes, &["sbs-c.example"])?,
            Failed,
        ),
        // Names read as Go reads them: the last CN, whatever its string type.
        Case::new(
            "cn-bmpstring",
            BootstrapAllowed,
            CLIENT_KUBELET,
            written(&node_subject(0x1e, &bmp("system:node:sbs-c")), &[])?,
            AutoApprovedAndSigned,
        ),
        Case::new(
            "cn-twice",
            NodeA,
            CLIENT_KUBELET,
            written(
                &der::name(&[
                    (OID_ORGANIZATION, 0x13, b"system:nodes"),
                    (OID_COMMON_NAME, 0x13, b"system:node:sbs-b"),
                    (OID_COMMON_NAME, 0x1e, &bmp("system:node:sbs-a")),
                ]),
                &[],
            )?,
            AutoApprovedAndSigned,
        ),
        Case::new(
            "cn-visiblestring",
            NodeA,
            CLIENT_KUBELET,
            written(
                &der::name(&[
                    (OID_ORGANIZATION, 0x13, b"system:nodes"),
                    (OID_COMMON_NAME, 0x13, b"system:node:sbs-a"),
                    (OID_COMMON_NAME, 0x1a, b"system:node:sbs-b"),
                ]),
                &[],
            )?,
            AutoApprovedAndSigned,
        ),
        Case::new(
            "cn-t61-latin1",
            Admin,
            CLIENT,
            written(&der::name(&[(OID_COMMON_NAME, 0x14, b"sbs-t61-\xff")]), &[])?,
            Signed,
        ),
        // Only the first value of an extensionRequest is read.
        Case::new(
            "second-san-value",
            Admin,
            SERVING,
            written(
                &node_subject(0x13, b"system:node:sbs-node"),
                &der::extension_request(&[
                    der::san_dns_extensions(&["sbs-node.example"]),
                    der::san_dns_extensions(&["kubernetes.default.svc"]),
                ]),
            )?,
            Signed,
        ),
        // The block Go's pem.Decode reads, and no other.
        Case::new("pem-smuggled-block", Admin, CLIENT, smuggled_pem()?, Signed),
        Case::new("pem-headers", Admin, CLIENT, with_headers(&request("sbs-headers", &[], &[])?), Signed),
        Case::new("pem-crlf", Admin, CLIENT, request("sbs-crlf", &[], &[])?.replace('\n', "\r\n"), Signed),
        // What each signer allows.
        Case::new(
            "serving-email",
            Admin,
            SERVING,
            request("system:node:sbs-node", &nodes, &["sbs-node.example", "email:a@sbs.example"])?,
            Failed,
        ),
        Case::new(
            "serving-uri",
            Admin,
            SERVING,
            request("system:node:sbs-node", &nodes, &["sbs-node.example", "uri:spiffe://sbs/node"])?,
            Failed,
        ),
        Case::new("serving-no-name", Admin, SERVING, request("system:node:sbs-node", &nodes, &[])?, Failed),
        Case::new("serving-not-a-node", Admin, SERVING, request("sbs-node", &nodes, &["sbs-node.example"])?, Failed),
        Case::new(
            "serving-cert-sign",
            Admin,
            SERVING,
            request("system:node:sbs-node", &nodes, &["sbs-node.example"])?,
            Failed,
        )
        .usages(&["digital signature", "key encipherment", "server auth", "cert sign"]),
        Case::new(
            "serving-mapped-ipv6",
            Admin,
            SERVING,
            request("system:node:sbs-node", &nodes, &["::ffff:10.0.0.1", "fd00::1"])?,
            Signed,
        ),
        Case::new("client-server-auth", Admin, CLIENT, request("sbs-alice", &[], &[])?, Failed)
            .usages(&["client auth", "server auth"]),
        Case::new("client-cert-sign", Admin, CLIENT, request("sbs-alice", &[], &[])?, Failed)
            .usages(&["client auth", "cert sign"]),
        Case::new(
            "client-every-name",
            Admin,
            CLIENT,
            written(
                &subject(&["sbs-b", "sbs-a", "sbs-bb", "sbs-a"], "sbs-alice"),
                &san_attribute(&[
                    (0x82, b"alice.example"),
                    (0x87, &[10, 0, 0, 2]),
                    (0x81, b"alice@sbs.example"),
                    (0x86, b"spiffe://sbs/alice"),
                    (0x82, b"b.example"),
                ]),
            )?,
            Signed,
        ),
        Case::new("client-ca-subject", Admin, CLIENT, request("kubernetes", &[], &[])?, Signed),
        Case::new("client-shortest", Admin, CLIENT, request("sbs-short", &[], &[])?, Signed).expiration(600),
        Case::new("client-ten-years", Admin, CLIENT, request("sbs-long", &[], &[])?, Signed)
            .expiration(10 * 365 * 86400),
        Case::new("unknown-signer", Admin, "sbs.example/custom", request("sbs-custom", &[], &[])?, Unsigned),
    ];
    for (name, pem) in crate::x509::samples::KEY_TYPES {
        cases.push(Case::new(&format!("key-{name}"), Admin, SERVING, pem.to_string(), Signed));
    }
    Ok(cases)
}

/// A PEM whose first block is malformed for Go (text after its END marker) and asks for
/// `system:masters`, followed by a well-formed one for `sbs-smuggle`: Go, and so
/// kube-apiserver's admission and every approver, read only the second.
fn smuggled_pem() -> Result<String, Error> {
    let masters = request("sbs-smuggle", &["system:masters"], &[])?;
    let broken = masters.replace("-----END CERTIFICATE REQUEST-----", "-----END CERTIFICATE REQUEST----- x");
    Ok(format!("{broken}{}", request("sbs-smuggle", &[], &[])?))
}

/// `pem` with RFC 1421 headers after its BEGIN line.
fn with_headers(pem: &str) -> String {
    pem.replacen("-----\n", "-----\nProc-Type: 4,NONE\nComment: sbs\n\n", 1)
}

/// The clients of the requesters.
fn clients(steps: &Steps) -> Result<Vec<(Requester, Client)>, Error> {
    let options = || ClientOptions { qps: -1.0, ..ClientOptions::default() };
    let user = |name: &str, groups: &[&str]| -> Result<Client, Error> {
        Ok(Client::new(steps.plane.user_config(name, groups)?, options())?)
    };
    let token = |(id, secret): (&str, &str)| -> Result<Client, Error> {
        let admin = steps.plane.admin_config();
        let tls = client::config::TlsSettings { ca_certs: admin.tls.ca_certs.clone(), ..Default::default() };
        let config = client::RestConfig { tls, auth: client::config::Auth::Token(format!("{id}.{secret}")), ..admin };
        Ok(Client::new(config, options())?)
    };
    Ok(vec![
        (Requester::Admin, steps.client.clone()),
        (Requester::NodeA, user("system:node:sbs-a", &["system:nodes"])?),
        (Requester::NodeB, user("system:node:sbs-b", &["system:nodes"])?),
        (Requester::BootstrapAllowed, token(TOKEN_ALLOWED)?),
        (Requester::BootstrapRefused, token(TOKEN_REFUSED)?),
        (Requester::User, user("mallory", &["sbs:requesters"])?),
    ])
}

/// What kubeadm sets up for its nodes, here for the scenario's identities: `selfnodeclient` for
/// node A only, `nodeclient` for one bootstrap group, CSR creation for every requester.
fn grant_permissions(steps: &Steps) -> Result<(), Error> {
    let binding = |name: &str, role: &str, subjects: Value| {
        json!({"metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": subjects})
    };
    let group = |name: &str| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": name});
    let bindings = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
    steps.create(
        bindings,
        binding(
            "sbs-csr-requesters",
            "system:node-bootstrapper",
            json!([group("system:bootstrappers"), group("system:nodes"), group("sbs:requesters")]),
        ),
    )?;
    steps.create(
        bindings,
        binding(
            "sbs-selfnodeclient",
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:node:sbs-a"}]),
        ),
    )?;
    steps.create(
        bindings,
        binding(
            "sbs-nodeclient",
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            json!([group("system:bootstrappers:sbs-approved")]),
        ),
    )?;
    let secrets = "/api/v1/namespaces/kube-system/secrets";
    for ((id, secret), groups) in [(TOKEN_ALLOWED, Some("system:bootstrappers:sbs-approved")), (TOKEN_REFUSED, None)] {
        let mut data = json!({"token-id": id, "token-secret": secret, "usage-bootstrap-authentication": "true"});
        if let Some(groups) = groups {
            data["auth-extra-groups"] = json!(groups);
        }
        steps.create(
            secrets,
            json!({"metadata": {"name": format!("bootstrap-token-{id}")}, "type": "bootstrap.kubernetes.io/token", "stringData": data}),
        )?;
    }
    Ok(())
}

pub(in super::super) fn hostile_csrs(steps: &mut Steps) -> Result<(), Error> {
    grant_permissions(steps)?;
    let clients = clients(steps)?;
    let cases = cases()?;
    for case in &cases {
        let client = clients.iter().find(|(r, _)| *r == case.requester).map(|(_, c)| c).unwrap_or(&steps.client);
        let object = json!({"metadata": {"name": case.name}, "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(&case.request),
            "signerName": case.signer, "usages": case.usages, "expirationSeconds": case.expiration}});
        // RBAC bindings and bootstrap tokens take a moment to reach the authorizer's and the
        // authenticator's caches: a refusal then is retried.
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Err(refused) = JsonApi(client).create(CSRS, &object) {
            let refused = Error::from(refused);
            if Instant::now() > deadline || !matches!(refused.code(), Some(401 | 403)) {
                return Err(Error::Scenario(format!("creating CSR {}: {refused}", case.name)));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    for case in cases.iter().filter(|c| c.approved_by_the_scenario()) {
        let path = format!("{CSRS}/{}", case.name);
        let mut object = steps.get(&path)?.ok_or_else(|| Error::Scenario(format!("{} is gone", case.name)))?;
        object["status"]["conditions"] = json!([{"type": "Approved", "status": "True", "reason": "SideBySide", "message": "approved by the scenario"}]);
        steps.replace(&format!("{path}/approval"), object)?;
    }
    wait_decided(steps, &cases)?;
    steps.checkpoint("decided")
}

/// Waits, at most [`DECIDE_WITHIN`], until every CSR with an outcome to wait for has it; what
/// is still undecided then is left for the comparison to show.
fn wait_decided(steps: &Steps, cases: &[Case]) -> Result<(), Error> {
    let deadline = Instant::now() + DECIDE_WITHIN;
    loop {
        let csrs = steps.list(CSRS)?;
        let undecided: Vec<&str> = cases
            .iter()
            .filter(|case| {
                let Some(csr) = csrs.iter().find(|c| c["metadata"]["name"] == case.name.as_str()) else { return true };
                let has = |type_: &str| {
                    csr["status"]["conditions"].as_array().is_some_and(|l| l.iter().any(|c| c["type"] == type_))
                };
                let signed = csr["status"]["certificate"].is_string();
                // Known not to be signed by ours (ring cannot verify them, a known difference):
                // waiting for them would only add DECIDE_WITHIN to our run.
                if crate::x509::samples::NOT_VERIFIED.iter().any(|n| case.name == format!("h-key-{n}")) {
                    return false;
                }
                match case.outcome {
                    Decision::AutoApprovedAndSigned | Decision::Signed => !signed,
                    Decision::Failed => !has("Failed"),
                    Decision::Pending | Decision::Unsigned => false,
                }
            })
            .map(|case| case.name.as_str())
            .collect();
        if undecided.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            log::warn!("certificates-hostile: still undecided after {DECIDE_WITHIN:?}: {}", undecided.join(", "));
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smuggled_block_is_not_the_one_read() {
        let csr = crate::x509::request::parse_csr(smuggled_pem().unwrap().as_bytes()).unwrap();
        assert!(csr.subject.organization.is_empty(), "the well-formed second block: {:?}", csr.subject);
        let headers = with_headers(&request("sbs-headers", &[], &[]).unwrap());
        assert!(headers.contains("Proc-Type"));
        assert_eq!(crate::x509::request::parse_csr(headers.as_bytes()).unwrap().subject.common_name, "sbs-headers");
    }
}
