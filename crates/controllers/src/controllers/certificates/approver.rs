//! The approving controller (`certificatesigningrequest-approving-controller`), after upstream
//! v1.33's `pkg/controller/certificates/approver/sarapprove.go`: a kubelet client CSR is approved
//! (`AutoApproved`, through the `approval` subresource) when a SubjectAccessReview says its
//! requester may create `certificatesigningrequests/selfnodeclient` (the request names the
//! requester itself) or `certificatesigningrequests/nodeclient`.

use std::sync::Arc;

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestStatus,
};

use super::{KUBE_APISERVER_CLIENT_KUBELET, approval_condition, certificate_controller, validation};
use crate::apimachinery::errors::BoxError;
use crate::client::{self, Api, Client, PostParams};
use crate::runtime::controller::{Controller, ControllerContext, SyncError, SyncResult};
use crate::x509::request::{CertificateRequest, parse_csr};

/// Workers (upstream's `Run(ctx, 5)`).
const WORKERS: usize = 5;

/// What the controller takes from the flags (nothing: upstream's is fixed).
#[derive(Debug, Clone, Default)]
pub struct Config {}

/// Why a CSR could not be approved.
#[derive(Debug, thiserror::Error)]
enum Error {
    /// The CSR's request does not parse.
    #[error("unable to parse csr {name:?}: {source}")]
    ParseCsr { name: String, source: BoxError },
    /// The SubjectAccessReview could not be made.
    #[error("{0}")]
    Review(#[source] client::Error),
    /// Writing the Approved condition failed.
    #[error("error updating approval for csr: {0}")]
    Approve(#[source] client::Error),
    /// Recognized, but no review allowed it.
    #[error("recognized csr {name:?} as [{}] but subject access review was not approved", .tried.join(" "))]
    NotApproved { name: String, tried: Vec<&'static str> },
}

impl From<Error> for SyncError {
    fn from(e: Error) -> SyncError {
        SyncError::of(e)
    }
}

/// `NewCSRApprovingController`. It cannot fail.
pub fn new(context: &ControllerContext<'_>, _config: Config) -> Controller {
    let approver = Arc::new(SarApprover { client: context.client.clone() });
    certificate_controller(context, Controller::new(), WORKERS, move |csr| approver.handle(csr))
}

/// A `csrRecognizer`.
struct Recognizer {
    recognize: fn(&CertificateSigningRequest, &CertificateRequest) -> bool,
    subresource: &'static str,
    success_message: &'static str,
}

/// `recognizers()`, in upstream's order.
const RECOGNIZERS: [Recognizer; 2] = [
    Recognizer {
        recognize: is_self_node_client_cert,
        subresource: "selfnodeclient",
        success_message: "Auto approving self kubelet client certificate after SubjectAccessReview.",
    },
    Recognizer {
        recognize: is_node_client_cert,
        subresource: "nodeclient",
        success_message: "Auto approving kubelet client certificate after SubjectAccessReview.",
    },
];

/// `isNodeClientCert`.
pub fn is_node_client_cert(csr: &CertificateSigningRequest, request: &CertificateRequest) -> bool {
    csr.spec.signer_name == KUBE_APISERVER_CLIENT_KUBELET
        && validation::kubelet_client(request, csr.spec.usages.as_deref().unwrap_or_default()).is_ok()
}

/// `isSelfNodeClientCert`.
pub fn is_self_node_client_cert(csr: &CertificateSigningRequest, request: &CertificateRequest) -> bool {
    csr.spec.username.as_deref().unwrap_or_default() == request.subject.common_name && is_node_client_cert(csr, request)
}

struct SarApprover {
    client: Client,
}

impl SarApprover {
    /// `sarApprover.handle`.
    fn handle(&self, mut csr: CertificateSigningRequest) -> SyncResult {
        let (approved, denied) = approval_condition(&csr);
        if approved || denied {
            return Ok(());
        }
        let name = csr.metadata.name.clone().unwrap_or_default();
        let request =
            parse_csr(&csr.spec.request.0).map_err(|e| Error::ParseCsr { name: name.clone(), source: e.into() })?;
        let mut tried = Vec::new();
        for recognizer in &RECOGNIZERS {
            if !(recognizer.recognize)(&csr, &request) {
                continue;
            }
            tried.push(recognizer.subresource);
            if !self.authorize(&csr, recognizer.subresource)? {
                continue;
            }
            let status = csr.status.get_or_insert_with(CertificateSigningRequestStatus::default);
            status.conditions.get_or_insert_with(Vec::new).push(CertificateSigningRequestCondition {
                type_: "Approved".to_string(),
                status: "True".to_string(),
                reason: Some("AutoApproved".to_string()),
                message: Some(recognizer.success_message.to_string()),
                ..Default::default()
            });
            Api::<CertificateSigningRequest>::cluster(&self.client)
                .replace_subresource::<_, CertificateSigningRequest>("approval", &name, &csr, &PostParams::default())
                .map_err(Error::Approve)?;
            return Ok(());
        }
        if !tried.is_empty() {
            return Err(Error::NotApproved { name, tried }.into());
        }
        Ok(())
    }

    /// `sarApprover.authorize`: a SubjectAccessReview for the requester of `csr`.
    fn authorize(&self, csr: &CertificateSigningRequest, subresource: &str) -> Result<bool, Error> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: csr.spec.username.clone(),
                uid: csr.spec.uid.clone(),
                groups: csr.spec.groups.clone(),
                extra: csr.spec.extra.clone(),
                resource_attributes: Some(ResourceAttributes {
                    group: Some("certificates.k8s.io".to_string()),
                    resource: Some("certificatesigningrequests".to_string()),
                    verb: Some("create".to_string()),
                    subresource: Some(subresource.to_string()),
                    version: Some("*".to_string()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let review = Api::<SubjectAccessReview>::cluster(&self.client)
            .create(&review, &PostParams::default())
            .map_err(Error::Review)?;
        Ok(review.status.is_some_and(|s| s.allowed))
    }
}
