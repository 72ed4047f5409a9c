//! The CSR controllers on both backends, with the server's own CA as the signing CA (kubeadm's
//! `--cluster-signing-{cert,key}-file=ca.{crt,key}`): a kubelet's bootstrap client CSR is
//! auto-approved and signed, and the certificate then authenticates the node to the server in a
//! real TLS handshake; the node rotates it through a self CSR; a serving CSR approved by the
//! admin is signed with its SANs and the 15 minutes it asked for (plus 5 minutes of backdating);
//! a client CSR with a server usage fails; the cleaner deletes what is old enough, approved
//! CSRs never issued included.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kcm::app::controllers::named;
use kcm::client::{Api, Client, ClientOptions, PostParams};
use kcm::controllers::certificates::cleaner;
use kcm::x509::certificate::certificate_validity;
use kcm::x509::pem_blocks;
use kcm_sandbox::sandbox::auth::{Credentials, rest_config};
use serde_json::json;

use crate::harness;

use harness::{Backend, Cluster, TestServer, eventually, from};

/// Where the test writes the server's CA for the signer (removed with the cluster); each
/// backend's run of a test has its own, as the two run at once with different CAs.
fn ca_files(backend: Backend, test: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir();
    let base = format!("kcm-csr-{test}-{}-{}", backend.name(), std::process::id());
    (dir.join(format!("{base}.crt")), dir.join(format!("{base}.key")))
}

/// A cluster running the three CSR controllers, signing with the server's CA; `system:bootstrappers`
/// may create CSRs and get them approved (`nodeclient`), nodes may renew theirs (`selfnodeclient`),
/// as kubeadm binds them.
fn start(backend: Backend, test: &str) -> Cluster {
    let (cert, key) = ca_files(backend, test);
    let flags = [
        format!("--cluster-signing-cert-file={}", cert.display()),
        format!("--cluster-signing-key-file={}", key.display()),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let descriptors = [
        named("certificatesigningrequest-signing-controller"),
        named("certificatesigningrequest-approving-controller"),
    ];
    harness::with(&descriptors)
        .on(backend)
        .without_nodes()
        .flags(&flags)
        .remove_on_drop(cert.clone())
        .remove_on_drop(key.clone())
        .start_with(|client: &Client, server: &TestServer| {
            std::fs::write(&cert, server.ca_pem()).expect("ca.crt");
            std::fs::write(&key, server.ca_key_pem()).expect("ca.key");
            // Both servers seed the bootstrap policy's CSR roles (the sandbox whatever its
            // authorization mode, as kube-apiserver v1.36 does).
            bind(client, "csr-bootstrap", "system:node-bootstrapper", "system:bootstrappers");
            bind(
                client,
                "csr-autoapprove",
                "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
                "system:bootstrappers",
            );
            bind(
                client,
                "csr-renewal",
                "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
                "system:nodes",
            );
            let node: Node = from(json!({"metadata": {"name": "csr-node"}}));
            Api::<Node>::cluster(client).create(&node, &PostParams::default()).expect("node");
        })
}

fn bind(client: &Client, name: &str, role: &str, group: &str) {
    let binding: ClusterRoleBinding = from(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
    }));
    Api::<ClusterRoleBinding>::cluster(client).create(&binding, &PostParams::default()).expect("binding");
}

/// A new P-256 key and a PEM PKCS#10 request for `cn` in `orgs` with DNS and IP SANs.
fn request(cn: &str, orgs: &[&str], dns: &[&str], ips: &[&str]) -> (rcgen::KeyPair, String) {
    let key = rcgen::KeyPair::generate().expect("a key");
    let mut sans: Vec<String> = dns.iter().map(|s| s.to_string()).collect();
    sans.extend(ips.iter().map(|s| s.to_string()));
    let mut params = rcgen::CertificateParams::new(sans).expect("params");
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(rcgen::DnType::CommonName, cn);
    for org in orgs {
        params.distinguished_name.push(rcgen::DnType::OrganizationName, *org);
    }
    let csr = params.serialize_request(&key).expect("a CSR").pem().expect("PEM");
    (key, csr)
}

fn csr_object(
    name: &str,
    pem: &str,
    signer: &str,
    usages: &[&str],
    expiration: Option<i32>,
) -> CertificateSigningRequest {
    use base64::Engine;
    from(json!({
        "metadata": {"name": name},
        "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(pem),
            "signerName": signer,
            "usages": usages,
            "expirationSeconds": expiration,
        },
    }))
}

/// The issued certificate of `name`, once there.
fn issued(csrs: &Api<CertificateSigningRequest>, name: &str) -> (CertificateSigningRequest, String) {
    eventually(&format!("{name} signed"), || {
        let csr = csrs.get(name).ok()?;
        let certificate = csr.status.as_ref()?.certificate.as_ref()?;
        let pem = String::from_utf8(certificate.0.clone()).ok()?;
        Some((csr, pem))
    })
}

fn condition(csr: &CertificateSigningRequest, type_: &str) -> (String, String) {
    let conditions = csr.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    let c = conditions.iter().find(|c| c.type_ == type_).unwrap_or_else(|| panic!("no {type_} in {conditions:?}"));
    (c.reason.clone().unwrap_or_default(), c.message.clone().unwrap_or_default())
}

fn approve(csrs: &Api<CertificateSigningRequest>, name: &str) {
    let mut csr = csrs.get(name).expect("the CSR");
    csr.status.get_or_insert_with(Default::default).conditions.get_or_insert_with(Vec::new).push(from(json!({
        "type": "Approved", "status": "True", "reason": "TestApproved", "message": "approved by the test"})));
    let _: CertificateSigningRequest =
        csrs.replace_subresource("approval", name, &csr, &PostParams::default()).expect("approved");
}

/// A client of `server` presenting `cert_pem` with `key`.
fn client_as(server: &TestServer, cert_pem: &str, key: &rcgen::KeyPair) -> Client {
    let credentials = Credentials { cert_pem: cert_pem.to_string(), key_pem: key.serialize_pem() };
    let config = rest_config(&server.url(), Some(server.ca_pem()), Some(&credentials), "csr test".into());
    Client::new(config, ClientOptions::default()).expect("a client")
}

on_both_backends!(a_bootstrap_client_csr_is_approved_signed_and_authenticates_the_node);
fn a_bootstrap_client_csr_is_approved_signed_and_authenticates_the_node(backend: Backend) {
    let cluster = start(backend, "client");
    let bootstrap_config =
        cluster.server.user_config("system:bootstrap:abcdef", &["system:bootstrappers"]).expect("bootstrap identity");
    let bootstrap = Client::new(bootstrap_config, ClientOptions::default()).expect("a client");
    let (key, pem) = request("system:node:csr-node", &["system:nodes"], &[], &[]);
    let usages = ["digital signature", "client auth"];
    let client_csr = csr_object("node-csr-1", &pem, "kubernetes.io/kube-apiserver-client-kubelet", &usages, None);
    Api::<CertificateSigningRequest>::all(&bootstrap).create(&client_csr, &PostParams::default()).expect("CSR created");

    let csrs = Api::<CertificateSigningRequest>::all(&cluster.client);
    let (csr, certificate) = issued(&csrs, "node-csr-1");
    assert_eq!(
        condition(&csr, "Approved"),
        (
            "AutoApproved".to_string(),
            "Auto approving kubelet client certificate after SubjectAccessReview.".to_string()
        )
    );
    let der = &pem_blocks(certificate.as_bytes())[0].1;
    let subject = kcm::x509::subject(der).expect("a certificate");
    assert_eq!(subject.common_name, "system:node:csr-node");
    assert_eq!(subject.organizations, ["system:nodes"]);
    let (not_before, not_after) = certificate_validity(der).expect("validity");
    // One year (the default --cluster-signing-duration) less the 5 minutes of backdating, from 5 minutes ago.
    assert_eq!(not_after.duration_since(not_before).as_secs(), 8760 * 3600);

    // The certificate authenticates the node: a TLS handshake and a GET of its own Node.
    let node = client_as(&cluster.server, &certificate, &key);
    let got = Api::<Node>::cluster(&node).get("csr-node").expect("the node reads itself with its new certificate");
    assert_eq!(got.metadata.name.as_deref(), Some("csr-node"));

    // Renewal: the node asks for a new certificate itself, approved as selfnodeclient.
    let (_, renewal) = request("system:node:csr-node", &["system:nodes"], &[], &[]);
    let renewal = csr_object("node-csr-2", &renewal, "kubernetes.io/kube-apiserver-client-kubelet", &usages, None);
    Api::<CertificateSigningRequest>::all(&node).create(&renewal, &PostParams::default()).expect("renewal created");
    let (csr, _) = issued(&csrs, "node-csr-2");
    assert_eq!(
        condition(&csr, "Approved").1,
        "Auto approving self kubelet client certificate after SubjectAccessReview."
    );
}

on_both_backends!(serving_and_refused_csrs);
fn serving_and_refused_csrs(backend: Backend) {
    let cluster = start(backend, "serving");
    let csrs = Api::<CertificateSigningRequest>::all(&cluster.client);
    let (_, pem) = request("system:node:csr-node", &["system:nodes"], &["csr-node.example"], &["10.0.0.7"]);
    let usages = ["digital signature", "key encipherment", "server auth"];
    let serving = csr_object("serving", &pem, "kubernetes.io/kubelet-serving", &usages, Some(900));
    csrs.create(&serving, &PostParams::default()).expect("created");
    // Not approved by the approver (not a client CSR): pending until the admin approves.
    approve(&csrs, "serving");
    let (_, certificate) = issued(&csrs, "serving");
    let der = &pem_blocks(certificate.as_bytes())[0].1;
    let (not_before, not_after) = certificate_validity(der).expect("validity");
    // Short-lived: NotAfter is not backdated, NotBefore is (5 minutes).
    assert_eq!(not_after.duration_since(not_before).as_secs(), 900 + 300);
    let parsed = parse_cert_sans(der);
    assert_eq!(parsed, (vec!["csr-node.example".to_string()], vec!["10.0.0.7".to_string()]));

    // A kube-apiserver-client CSR asking for a server usage: Failed, not signed.
    let (_, pem) = request("someone", &[], &[], &[]);
    let refused =
        csr_object("refused", &pem, "kubernetes.io/kube-apiserver-client", &["client auth", "server auth"], None);
    csrs.create(&refused, &PostParams::default()).expect("created");
    approve(&csrs, "refused");
    let csr = eventually("refused failed", || {
        let csr = csrs.get("refused").ok()?;
        csr.status.as_ref()?.conditions.as_ref()?.iter().any(|c| c.type_ == "Failed").then_some(csr)
    });
    assert_eq!(
        condition(&csr, "Failed"),
        ("SignerValidationFailure".to_string(), "invalid usage for client certificate: server auth".to_string())
    );
    assert!(csr.status.and_then(|s| s.certificate).is_none());
}

/// The DNS and IP SANs of a certificate, read back through a CSR-shaped parse of its extensions.
fn parse_cert_sans(der: &[u8]) -> (Vec<String>, Vec<String>) {
    let sans = kcm::x509::certificate::certificate_sans(der).expect("SANs");
    (sans.0, sans.1.iter().map(|ip| ip.to_string()).collect())
}

on_both_backends!(the_cleaner_deletes_old_csrs);
/// The cleaner with ages of a second: a denied CSR goes, a pending one stays (its age is a day).
fn the_cleaner_deletes_old_csrs(backend: Backend) {
    let cleaner = named("certificatesigningrequest-cleaner-controller").started_by(|c, _| {
        let short = Duration::from_secs(1);
        let config = cleaner::Config {
            polling_interval: Duration::from_millis(500),
            approved_expiration: short,
            denied_expiration: short,
            pending_expiration: Duration::from_secs(24 * 3600),
        };
        Ok(cleaner::new(c, config))
    });
    let cluster = harness::with(&[cleaner]).on(backend).without_nodes().start();
    let csrs = Api::<CertificateSigningRequest>::all(&cluster.client);
    for name in ["denied", "pending"] {
        let (_, pem) = request("someone", &[], &[], &[]);
        csrs.create(&csr_object(name, &pem, "example.com/signer", &["client auth"], None), &PostParams::default())
            .expect("created");
    }
    let mut denied = csrs.get("denied").expect("denied");
    denied.status.get_or_insert_with(Default::default).conditions = Some(vec![from(json!({
        "type": "Denied", "status": "True", "reason": "Test", "message": "no"}))]);
    let _: CertificateSigningRequest =
        csrs.replace_subresource("approval", "denied", &denied, &PostParams::default()).expect("denied");
    eventually("the denied CSR deleted", || csrs.get_opt("denied").ok()?.is_none().then_some(()));
    assert!(csrs.get_opt("pending").expect("a read").is_some(), "a pending CSR younger than a day stays");
}

on_both_backends!(the_cleaner_deletes_approved_csrs_never_issued);
/// An approved CSR no signer issues goes once its approval is older than the pending
/// expiration (v1.36's `isApprovedUnissuedPastDeadline`; v1.33 kept it forever), here 2 s.
fn the_cleaner_deletes_approved_csrs_never_issued(backend: Backend) {
    let cleaner = named("certificatesigningrequest-cleaner-controller").started_by(|c, _| {
        let config = cleaner::Config {
            polling_interval: Duration::from_millis(500),
            approved_expiration: Duration::from_secs(24 * 3600),
            denied_expiration: Duration::from_secs(24 * 3600),
            pending_expiration: Duration::from_secs(2),
        };
        Ok(cleaner::new(c, config))
    });
    // Approved before the cleaner starts, which would otherwise delete it as pending after 2 s.
    let cluster = harness::with(&[cleaner]).on(backend).without_nodes().start_with(|client, _| {
        let csrs = Api::<CertificateSigningRequest>::all(client);
        let (_, pem) = request("someone", &[], &[], &[]);
        let csr = csr_object("approved", &pem, "example.com/signer", &["client auth"], None);
        csrs.create(&csr, &PostParams::default()).expect("created");
        approve(&csrs, "approved");
    });
    let csrs = Api::<CertificateSigningRequest>::all(&cluster.client);
    if let Some(approved) = csrs.get_opt("approved").expect("a read") {
        let conditions = approved.status.as_ref().and_then(|s| s.conditions.as_ref()).expect("conditions");
        assert!(conditions[0].last_update_time.is_some(), "the server stamps the approval");
    }
    eventually("the approved, unissued CSR deleted", || csrs.get_opt("approved").ok()?.is_none().then_some(()));
}

/// Whether the DER certificate `der` was issued and signed by the CA of `ca_pem` (P-256, as
/// the servers' CAs and the rotated one here are): its issuer is the CA's subject and its
/// signature verifies with the CA's key.
fn signed_by(der: &[u8], ca_pem: &str) -> bool {
    use kcm::x509::certificate::{certificate_parts, parse_certificate};
    let ca_der = &pem_blocks(ca_pem.as_bytes())[0].1;
    let (Some(ca), Some(parts)) = (parse_certificate(ca_der), certificate_parts(der)) else { return false };
    let key = ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_ASN1, &ca.public_key);
    parts.issuer == ca.raw_subject && key.verify(parts.tbs, parts.signature).is_ok()
}

/// A new self-signed P-256 CA: certificate and key PEM.
fn new_ca(cn: &str) -> (String, String) {
    let key = rcgen::KeyPair::generate().expect("a key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.distinguished_name.push(rcgen::DnType::CommonName, cn);
    (params.self_signed(&key).expect("a CA").pem(), key.serialize_pem())
}

on_both_backends!(a_ca_rotated_under_load_signs_only_once_both_files_are_written);
/// Upstream's signers reload `--cluster-signing-*` files when they change, and only as a pair
/// that matches (`tls.X509KeyPair`). A CA rotated the usual way — the certificate written,
/// then the key — while CSRs keep coming: every certificate verifies against the old CA or
/// the new one (never a mix: the new CA's name with the old key), those signed while only the
/// certificate was new against the old, and those asked for after both files changed against
/// the new.
fn a_ca_rotated_under_load_signs_only_once_both_files_are_written(backend: Backend) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let cluster = start(backend, "rotate");
    let (cert_file, key_file) = ca_files(backend, "rotate");
    let old_ca = cluster.server.ca_pem().to_string();
    let (new_cert, new_key) = new_ca("rotated-ca");
    let csrs = Api::<CertificateSigningRequest>::all(&cluster.client);
    let submit = |name: &str| {
        let (_, pem) = request(name, &[], &[], &[]);
        let object = csr_object(name, &pem, "kubernetes.io/kube-apiserver-client", &["client auth"], None);
        csrs.create(&object, &PostParams::default()).expect("CSR created");
        approve(&csrs, name);
    };
    let phase = |prefix: &str| -> Vec<Vec<u8>> {
        let names: Vec<String> = (0..8).map(|i| format!("{prefix}-{i}")).collect();
        names.iter().for_each(|name| submit(name));
        names.iter().map(|name| pem_blocks(issued(&csrs, name).1.as_bytes())[0].1.clone()).collect()
    };
    // Load beside the phases: CSRs submitted without pause until the rotation is over (or a
    // phase fails: the flag is set on the way out either way, so that the scope can end).
    let done = AtomicBool::new(false);
    struct SetOnDrop<'a>(&'a AtomicBool);
    impl Drop for SetOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let churned = std::thread::scope(|scope| {
        let _stop_churn = SetOnDrop(&done);
        let churn = scope.spawn(|| {
            let mut names = Vec::new();
            while !done.load(Ordering::Relaxed) {
                let name = format!("churn-{}", names.len());
                submit(&name);
                names.push(name);
            }
            names
        });
        let before = phase("before");
        assert!(before.iter().all(|der| signed_by(der, &old_ca)), "signed with the first CA");
        std::fs::write(&cert_file, &new_cert).expect("new ca.crt");
        let half = phase("half");
        assert!(half.iter().all(|der| signed_by(der, &old_ca)), "a certificate without its key is not taken");
        std::fs::write(&key_file, &new_key).expect("new ca.key");
        let after = phase("after");
        assert!(
            after.iter().all(|der| signed_by(der, &new_cert)),
            "signed with the new CA once both files are written"
        );
        done.store(true, Ordering::Relaxed);
        churn.join().expect("the churn thread")
    });
    assert!(!churned.is_empty());
    for name in &churned {
        let der = pem_blocks(issued(&csrs, name).1.as_bytes())[0].1.clone();
        assert!(signed_by(&der, &old_ca) || signed_by(&der, &new_cert), "{name}: signed by neither CA, a mixed pair");
    }
}
