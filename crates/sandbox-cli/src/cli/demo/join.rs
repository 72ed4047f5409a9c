//! The demo's node join, as `kubeadm join` goes: a bootstrap token is created, cluster-info is
//! signed for it (so the joining node can trust the control plane), the new kubelet logs in
//! with the token and asks for its client certificate with a CSR, which is approved and signed;
//! the certificate then authenticates the node.

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use serde_json::json;

use super::{Error, Narrator, STEP_TIMEOUT, all_implemented, wait_for};
use crate::client::config::Auth;
use crate::client::{Api, Client, ClientOptions, PostParams};
use crate::envtest::TestServer;
use crate::sandbox::auth::{Credentials, rest_config};
use crate::x509::certificate::certificate_validity;
use crate::x509::pem_blocks;

/// The bootstrap token `kubeadm token create` would print: `<id>.<secret>`.
const TOKEN_ID: &str = "7f3k9a";
const TOKEN_SECRET: &str = "x2c8pq0v4m6n1b5z";
/// kubeadm's group for the tokens of `kubeadm join`.
const NODE_TOKEN_GROUP: &str = "system:bootstrappers:kubeadm:default-node-token";
/// The node that joins.
const JOINING: &str = "node-9";

pub(super) fn node_join_steps(client: &Client, server: &TestServer, narrator: &mut Narrator) -> Result<(), Error> {
    let needed = [
        "bootstrap-signer-controller",
        "certificatesigningrequest-approving-controller",
        "certificatesigningrequest-signing-controller",
    ];
    narrator.step(&format!("{JOINING} joins with bootstrap token {TOKEN_ID}.<secret>, as `kubeadm join` does"));
    if !all_implemented(&needed) {
        narrator.skip("a node joining with a bootstrap token", &needed);
        return Ok(());
    }
    create_token(client)?;
    ensure_cluster_info(client, server)?;
    let signed = wait_for("cluster-info signed for the token", STEP_TIMEOUT, || {
        let info = Api::<ConfigMap>::namespaced(client, "kube-public").get("cluster-info")?;
        Ok(info.data.unwrap_or_default().contains_key(&format!("jws-kubeconfig-{TOKEN_ID}")).then_some(()))
    });
    signed?;
    narrator.ok(&format!(
        "bootstrap-signer-controller signed kube-public/cluster-info for the token (jws-kubeconfig-{TOKEN_ID})"
    ));
    bind_node_token_group(client)?;

    let (key, certificate) = request_client_certificate(client, server)?;
    narrator.ok(&format!(
        "its CSR was approved (AutoApproved by certificatesigningrequest-approving-controller) and signed: {certificate}"
    ));
    let node: Node = serde_json::from_value(json!({"metadata": {"name": JOINING}}))?;
    let nodes = Api::<Node>::all(client);
    nodes.create(&node, &PostParams::default())?;
    let as_node = Client::new(
        rest_config(&server.url(), Some(server.ca_pem()), Some(&key), JOINING.into()),
        ClientOptions::default(),
    )?;
    let read = Api::<Node>::all(&as_node).get(JOINING).map_err(Error::from);
    let _ = nodes.delete(JOINING, &Default::default());
    read?;
    narrator.ok(&format!("with that certificate the kubelet reads its own Node as system:node:{JOINING}"));
    Ok(())
}

/// kubeadm's bootstrap-token Secret, valid for an hour.
fn create_token(client: &Client) -> Result<(), Error> {
    let expiration = (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1)).round(jiff::Unit::Second)?;
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": format!("bootstrap-token-{TOKEN_ID}")},
        "type": "bootstrap.kubernetes.io/token",
        "stringData": {"token-id": TOKEN_ID, "token-secret": TOKEN_SECRET, "expiration": expiration.to_string(),
            "usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
            "auth-extra-groups": NODE_TOKEN_GROUP}}))?;
    Api::<Secret>::namespaced(client, "kube-system").create(&secret, &PostParams::default())?;
    Ok(())
}

/// kube-public/cluster-info as `kubeadm init` writes it (the sandbox has it; a bare
/// kube-apiserver does not).
fn ensure_cluster_info(client: &Client, server: &TestServer) -> Result<(), Error> {
    let config_maps = Api::<ConfigMap>::namespaced(client, "kube-public");
    if config_maps.get_opt("cluster-info")?.is_some() {
        return Ok(());
    }
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(server.ca_pem());
    let kubeconfig = format!(
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: {}\n  name: \"\"\n\
         contexts: null\ncurrent-context: \"\"\nkind: Config\npreferences: {{}}\nusers: null\n",
        server.url()
    );
    let info: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "cluster-info"}, "data": {"kubeconfig": kubeconfig}}))?;
    config_maps.create(&info, &PostParams::default())?;
    Ok(())
}

/// kubeadm's bindings: the node token group may create CSRs and have them auto-approved.
fn bind_node_token_group(client: &Client) -> Result<(), Error> {
    let bindings = [
        ("kubeadm:kubelet-bootstrap", "system:node-bootstrapper"),
        ("kubeadm:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient"),
    ];
    for (name, role) in bindings {
        let binding: ClusterRoleBinding = serde_json::from_value(json!({"metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": NODE_TOKEN_GROUP}]}))?;
        Api::<ClusterRoleBinding>::cluster(client).create(&binding, &PostParams::default())?;
    }
    Ok(())
}

/// As the kubelet does with the bootstrap token: a key, a CSR for `system:node:<node>`, then
/// the issued certificate; returns the credentials and the certificate described.
fn request_client_certificate(client: &Client, server: &TestServer) -> Result<(Credentials, String), Error> {
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(rcgen::DnType::CommonName, format!("system:node:{JOINING}"));
    params.distinguished_name.push(rcgen::DnType::OrganizationName, "system:nodes");
    let request = params.serialize_request(&key).and_then(|r| r.pem())?;
    use base64::Engine;
    let csr: CertificateSigningRequest = serde_json::from_value(json!({"metadata": {"generateName": "node-csr-"},
        "spec": {"request": base64::engine::general_purpose::STANDARD.encode(request),
            "signerName": "kubernetes.io/kube-apiserver-client-kubelet", "usages": ["digital signature", "client auth"]}}))?;
    let mut config = rest_config(&server.url(), Some(server.ca_pem()), None, "bootstrap token".into());
    config.auth = Auth::Token(format!("{TOKEN_ID}.{TOKEN_SECRET}"));
    let as_token = Client::new(config, ClientOptions::default())?;
    let created = Api::<CertificateSigningRequest>::all(&as_token).create(&csr, &PostParams::default())?;
    let name = created.metadata.name.unwrap_or_default();
    let csrs = Api::<CertificateSigningRequest>::all(client);
    let pem = wait_for(&format!("CSR {name} approved and signed"), STEP_TIMEOUT, || {
        let csr = csrs.get(&name)?;
        let approved = csr.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|conditions| {
            conditions.iter().any(|c| c.type_ == "Approved" && c.reason.as_deref() == Some("AutoApproved"))
        });
        let certificate = csr.status.and_then(|s| s.certificate).map(|c| c.0);
        Ok(certificate.filter(|_| approved).and_then(|c| String::from_utf8(c).ok()))
    })?;
    let der = pem_blocks(pem.as_bytes())
        .into_iter()
        .next()
        .map(|(_, der)| der)
        .ok_or_else(|| Error::Step("no certificate in the PEM".into()))?;
    let subject = crate::x509::subject(&der)?;
    let (_, not_after) =
        certificate_validity(&der).ok_or_else(|| Error::Step("the certificate has no validity".into()))?;
    let described = format!(
        "CSR {name} → CN={}, O={}, valid until {not_after}",
        subject.common_name,
        subject.organizations.join(",")
    );
    Ok((Credentials { cert_pem: pem, key_pem: key.serialize_pem() }, described))
}
