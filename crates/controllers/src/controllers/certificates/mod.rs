//! The CSR controllers, after upstream v1.36's `pkg/controller/certificates`: the signing
//! controller (`signer`), the kubelet client approver (`approver`) and the cleaner (`cleaner`),
//! over the shared `CertificateController` loop (`certificate_controller.go`) and the
//! `authority` that signs; the PodCertificateRequest cleaner (`pcrcleaner`) and the
//! kube-apiserver serving CA's ClusterTrustBundle publisher (`clustertrustbundlepublisher`),
//! which share only the package with them.

pub mod approver;
pub mod authority;
pub mod cleaner;
pub mod clustertrustbundlepublisher;
pub mod pcrcleaner;
pub mod signer;
pub mod validation;

use std::sync::Arc;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;

use crate::runtime::controller::{Controller, ControllerContext, SyncResult};
use crate::runtime::informer::{Event, Informer};
use crate::runtime::workqueue::WorkQueue;

/// `kubernetes.io/kube-apiserver-client`.
pub const KUBE_APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";
/// `kubernetes.io/kube-apiserver-client-kubelet`.
pub const KUBE_APISERVER_CLIENT_KUBELET: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// `kubernetes.io/kubelet-serving`.
pub const KUBELET_SERVING: &str = "kubernetes.io/kubelet-serving";
/// `kubernetes.io/legacy-unknown`.
pub const LEGACY_UNKNOWN: &str = "kubernetes.io/legacy-unknown";

/// `NewCertificateController`: a queue named `certificate` fed by every CSR event; a worker
/// hands the cached CSR to `handler` unless it already carries a certificate.
pub fn certificate_controller(
    context: &ControllerContext<'_>,
    controller: Controller,
    workers: usize,
    handler: impl Fn(CertificateSigningRequest) -> SyncResult + Send + Sync + 'static,
) -> Controller {
    let queue = WorkQueue::new("certificate");
    let csrs: Arc<Informer<CertificateSigningRequest>> = context.informers.informer();
    let events = queue.clone();
    csrs.add_handler(move |event: &Event<CertificateSigningRequest>| {
        let csr = match event {
            Event::Added(csr) | Event::Updated { new: csr, .. } => csr,
            Event::Deleted { object, .. } => object,
        };
        if let Some(name) = &csr.metadata.name {
            events.add(name.clone());
        }
    });
    controller.with_queue(&queue, workers, move |key: &String| {
        let Some(csr) = csrs.store().get(key) else { return Ok(()) };
        if csr.status.as_ref().is_some_and(|s| s.certificate.as_ref().is_some_and(|c| !c.0.is_empty())) {
            return Ok(());
        }
        handler((*csr).clone())
    })
}

/// `GetCertApprovalCondition`: whether an Approved and a Denied condition exist (any status).
pub fn approval_condition(csr: &CertificateSigningRequest) -> (bool, bool) {
    let conditions = csr.status.iter().flat_map(|s| s.conditions.iter().flatten());
    conditions.fold((false, false), |(approved, denied), c| {
        (approved || c.type_ == "Approved", denied || c.type_ == "Denied")
    })
}

/// `IsCertificateRequestApproved`.
pub fn is_approved(csr: &CertificateSigningRequest) -> bool {
    let (approved, denied) = approval_condition(csr);
    approved && !denied
}

/// `HasTrueCondition`: an empty status counts as True.
pub fn has_true_condition(csr: &CertificateSigningRequest, type_: &str) -> bool {
    let conditions = csr.status.iter().flat_map(|s| s.conditions.iter().flatten());
    conditions.into_iter().any(|c| c.type_ == type_ && (c.status.is_empty() || c.status == "True"))
}
