//! The `plugin/pkg/admission/certificates` plugins: CertificateApproval and CertificateSigning
//! ask the authorizer whether the requester may `approve` or `sign` for the CSR's signer (the
//! `signers` resource, by name or by `<domain>/*`); CertificateSubjectRestriction refuses
//! `system:masters` client certificates from the kube-apiserver-client signer; NodeRestriction's
//! rule for CSRs (`admitCSR`) lets a node ask a kubelet signer only for its own name.

use serde_json::Value;

use super::{AdmissionContext, Phase, forbidden, text};
use crate::sandbox::apiserver::status::ApiResult;
use crate::sandbox::auth::rbac::{self, Attributes};
use crate::sandbox::storage::store::Txn;
use crate::x509;

const KUBE_APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";

/// Whether the request is to `certificatesigningrequests` (or its `subresource`).
fn is_csr(ctx: &AdmissionContext<'_>, subresource: Option<&str>) -> bool {
    ctx.resource.group == "certificates.k8s.io"
        && ctx.resource.plural == "certificatesigningrequests"
        && ctx.subresource == subresource
}

/// CertificateApproval: an update of `certificatesigningrequests/approval` needs `approve` on
/// the old object's signer.
pub(super) fn approval(ctx: &AdmissionContext<'_>, object: &Value, txn: &Txn<'_>) -> ApiResult<()> {
    let Some(old) = ctx.old.filter(|_| is_csr(ctx, Some("approval"))) else { return Ok(()) };
    let signer = text(old, "/spec/signerName");
    if authorized_for_signer(ctx, txn, "approve", signer) {
        return Ok(());
    }
    let why = format!("user not permitted to approve requests with signerName \"{signer}\"");
    Err(forbidden(ctx, object, Phase::Validating, &why))
}

/// CertificateSigning: an update of `certificatesigningrequests/status` that changes the
/// certificate or the conditions needs `sign` on the old object's signer.
pub(super) fn signing(ctx: &AdmissionContext<'_>, object: &Value, txn: &Txn<'_>) -> ApiResult<()> {
    let Some(old) = ctx.old.filter(|_| is_csr(ctx, Some("status"))) else { return Ok(()) };
    let certificate = |o: &Value| o["status"]["certificate"].clone();
    let conditions = |o: &Value| o["status"]["conditions"].clone();
    if certificate(old) == certificate(object) && conditions(old) == conditions(object) {
        return Ok(());
    }
    let signer = text(old, "/spec/signerName");
    if authorized_for_signer(ctx, txn, "sign", signer) {
        return Ok(());
    }
    let why = format!("user not permitted to sign requests with signerName \"{signer}\"");
    Err(forbidden(ctx, object, Phase::Validating, &why))
}

const KUBELET_SIGNERS: &[&str] = &["kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/kubelet-serving"];

/// NodeRestriction's `admitCSR`: a node (a user `system:node:<name>` in `system:nodes`) may
/// create a CSR for a kubelet signer only with the common name `system:node:<name>`.
pub(super) fn node_restriction(ctx: &AdmissionContext<'_>, object: &Value) -> ApiResult<()> {
    if !ctx.is_create() || !is_csr(ctx, None) || !KUBELET_SIGNERS.contains(&text(object, "/spec/signerName")) {
        return Ok(());
    }
    let is_node = ctx.user.groups.iter().any(|g| g == "system:nodes");
    let Some(node) = ctx.user.name.strip_prefix("system:node:").filter(|_| is_node) else { return Ok(()) };
    if node.is_empty() {
        return Err(forbidden(ctx, object, Phase::Validating, "could not determine node from user \"system:node:\""));
    }
    let why = match parsed_request(text(object, "/spec/request")) {
        None => "unable to parse csr".to_string(),
        Some(request) if request.subject.common_name != format!("system:node:{node}") => {
            format!("can only create a node CSR with CN=system:node:{node}")
        }
        Some(_) => return Ok(()),
    };
    Err(forbidden(ctx, object, Phase::Validating, &why))
}

/// CertificateSubjectRestriction: on create, no `system:masters` organization for the
/// kube-apiserver-client signer. A request that does not parse is left to validation, which
/// upstream runs first.
pub(super) fn subject_restriction(ctx: &AdmissionContext<'_>, object: &Value) -> ApiResult<()> {
    if !ctx.is_create() || !is_csr(ctx, None) || text(object, "/spec/signerName") != KUBE_APISERVER_CLIENT {
        return Ok(());
    }
    let Some(request) = parsed_request(text(object, "/spec/request")) else { return Ok(()) };
    if request.subject.organization.iter().any(|o| o == "system:masters") {
        let why = format!("use of {KUBE_APISERVER_CLIENT} signer with system:masters group is not allowed");
        return Err(forbidden(ctx, object, Phase::Validating, &why));
    }
    Ok(())
}

/// `spec.request` (base64 of a PEM CERTIFICATE REQUEST), parsed.
fn parsed_request(request: &str) -> Option<x509::request::CertificateRequest> {
    use base64::Engine;
    let pem = base64::engine::general_purpose::STANDARD.decode(request).ok()?;
    x509::request::parse_csr(&pem).ok()
}

/// `certificates.IsAuthorizedForSignerName`: `verb` on the signer by name, else on
/// `<domain>/*`. With RBAC off the authorizer is AlwaysAllow.
fn authorized_for_signer(ctx: &AdmissionContext<'_>, txn: &Txn<'_>, verb: &str, signer: &str) -> bool {
    if !ctx.rbac {
        return true;
    }
    let domain = signer.split('/').next().unwrap_or_default();
    [signer.to_string(), format!("{domain}/*")].into_iter().any(|name| {
        let attributes = Attributes {
            verb: verb.to_string(),
            group: "certificates.k8s.io".to_string(),
            resource: "signers".to_string(),
            name,
            ..Attributes::default()
        };
        rbac::authorize(txn, ctx.user, &attributes).allowed
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::resource;
    use super::super::{Operation, admit};
    use super::*;
    use crate::sandbox::auth::UserInfo;
    use crate::sandbox::storage::store::Store;

    fn request(organization: &str) -> String {
        use base64::Engine;
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::OrganizationName, organization);
        let pem = params.serialize_request(&key).unwrap().pem().unwrap();
        base64::engine::general_purpose::STANDARD.encode(pem)
    }

    fn csr(signer: &str, organization: &str) -> Value {
        json!({"metadata": {"name": "c"}, "spec": {"signerName": signer, "request": request(organization)}})
    }

    /// Admits `object` as `user` (an update of `old` when given) with RBAC on.
    fn run(user: &UserInfo, subresource: Option<&str>, old: Option<&Value>, mut object: Value) -> ApiResult<()> {
        let store = Store::default();
        store.write(|txn| {
            let ctx = AdmissionContext {
                resource: resource("certificates.k8s.io", "certificatesigningrequests"),
                subresource,
                namespace: "",
                operation: if old.is_some() { Operation::Update } else { Operation::Create },
                user,
                old,
                dry_run: true,
                rbac: true,
            };
            admit(&ctx, &mut object, txn)
        })
    }

    #[test]
    fn approval_and_signing_need_the_signer_verb() {
        let alice = UserInfo::new("alice", &[]);
        let old = csr("example.com/s", "o");
        let err = run(&alice, Some("approval"), Some(&old), old.clone()).unwrap_err();
        assert_eq!(
            err.message(),
            "certificatesigningrequests.certificates.k8s.io \"c\" is forbidden: user not permitted to approve requests with signerName \"example.com/s\""
        );
        assert!(run(&alice, Some("status"), Some(&old), old.clone()).is_ok(), "nothing changed");
        let mut signed = old.clone();
        signed["status"]["certificate"] = json!("Y2VydA==");
        let err = run(&alice, Some("status"), Some(&old), signed.clone()).unwrap_err();
        assert!(err.message().ends_with("user not permitted to sign requests with signerName \"example.com/s\""));
        let admin = UserInfo::new("root", &["system:masters"]);
        assert!(run(&admin, Some("status"), Some(&old), signed).is_ok());
    }

    #[test]
    fn no_system_masters_from_the_kube_apiserver_client_signer() {
        let alice = UserInfo::new("alice", &[]);
        let err = run(&alice, None, None, csr(KUBE_APISERVER_CLIENT, "system:masters")).unwrap_err();
        assert!(
            err.message().ends_with(
                "use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"
            )
        );
        assert!(run(&alice, None, None, csr(KUBE_APISERVER_CLIENT, "devs")).is_ok());
        assert!(run(&alice, None, None, csr("example.com/s", "system:masters")).is_ok());
    }
}
