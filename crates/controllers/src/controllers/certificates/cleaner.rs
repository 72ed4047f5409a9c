//! The cleaner (`certificatesigningrequest-cleaner-controller`), after upstream v1.36's
//! `pkg/controller/certificates/cleaner`: every poll, CSRs approved and issued or denied or
//! failed for over an hour, pending for over a day, whose certificate has expired, or (new in
//! v1.36) approved for over a day without a certificate, are deleted.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::client::{Api, Client, DeleteParams};
use crate::runtime::controller::{Controller, ControllerContext};
use crate::runtime::informer::Informer;
use crate::x509::certificate::certificate_validity;
use crate::x509::pem_blocks;

/// What the controller takes from the flags: upstream's constants, settable for tests.
#[derive(Debug, Clone)]
pub struct Config {
    /// `pollingInterval`.
    pub polling_interval: Duration,
    /// `approvedExpiration` (issued CSRs).
    pub approved_expiration: Duration,
    /// `deniedExpiration` (denied and failed CSRs).
    pub denied_expiration: Duration,
    /// `pendingExpiration` (pending CSRs, and approved ones never issued).
    pub pending_expiration: Duration,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            polling_interval: Duration::from_secs(3600),
            approved_expiration: Duration::from_secs(3600),
            denied_expiration: Duration::from_secs(3600),
            pending_expiration: Duration::from_secs(24 * 3600),
        }
    }
}

/// `NewCSRCleanerController`. It cannot fail.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let cleaner = Arc::new(Cleaner {
        client: context.client.clone(),
        csrs: context.informers.informer(),
        config: config.clone(),
    });
    Controller::new().every("csr-cleaner", config.polling_interval, move || cleaner.worker())
}

struct Cleaner {
    client: Client,
    csrs: Arc<Informer<CertificateSigningRequest>>,
    config: Config,
}

impl Cleaner {
    /// `worker`: every cached CSR is handled.
    fn worker(&self) {
        let api = Api::<CertificateSigningRequest>::cluster(&self.client);
        for csr in self.csrs.store().list() {
            let name = csr.metadata.name.clone().unwrap_or_default();
            let Some(why) = why_clean(&csr, &self.config, Timestamp::now()) else { continue };
            log::info!("{why} csr={name:?}");
            if let Err(e) = api.delete(&name, &DeleteParams::default()) {
                log::error!(
                    "Error while attempting to clean CSR err=\"unable to delete CSR {name:?}: {e}\" csr={name:?}"
                );
            }
        }
    }
}

/// `handle`'s tests, in upstream's order: the log line of the first that holds.
pub fn why_clean(csr: &CertificateSigningRequest, config: &Config, now: Timestamp) -> Option<String> {
    let conditions: Vec<_> = csr.status.iter().flat_map(|s| s.conditions.iter().flatten()).collect();
    let issued = csr.status.as_ref().and_then(|s| s.certificate.as_ref()).is_some_and(|c| !c.0.is_empty());
    let older = |t: Option<&Time>, d: Duration| {
        t.is_some_and(|t| now.duration_since(t.0) > jiff::SignedDuration::try_from(d).unwrap_or_default())
    };
    let approved = || conditions.iter().filter(|c| c.type_ == "Approved");
    if issued && approved().any(|c| older(c.last_update_time.as_ref(), config.approved_expiration)) {
        return Some(format!(
            "Cleaning CSR as it is more than approvedExpiration duration old and approved. approvedExpiration={:?}",
            config.approved_expiration
        ));
    }
    let typed = |t: &str| {
        conditions.iter().any(|c| c.type_ == t && older(c.last_update_time.as_ref(), config.denied_expiration))
    };
    if typed("Denied") {
        return Some(format!(
            "Cleaning CSR as it is more than deniedExpiration duration old and denied. deniedExpiration={:?}",
            config.denied_expiration
        ));
    }
    if typed("Failed") {
        return Some(format!(
            "Cleaning CSR as it is more than deniedExpiration duration old and failed. deniedExpiration={:?}",
            config.denied_expiration
        ));
    }
    if conditions.is_empty() && older(csr.metadata.creation_timestamp.as_ref(), config.pending_expiration) {
        return Some(format!(
            "Cleaning CSR as it is more than pendingExpiration duration old and unhandled. pendingExpiration={:?}",
            config.pending_expiration
        ));
    }
    if issued && approved().next().is_some() && is_expired(csr, now) {
        return Some("Cleaning CSR as the associated certificate is expired.".to_string());
    }
    // `isApprovedUnissuedPastDeadline`: a signer that never issues would otherwise leave it forever.
    if !issued && approved().any(|c| older(c.last_update_time.as_ref(), config.pending_expiration)) {
        return Some(format!(
            "Cleaning CSR as it is approved but unissued for more than pendingExpiration duration. pendingExpiration={:?}",
            config.pending_expiration
        ));
    }
    None
}

/// `isExpired`: the first PEM block's certificate is past its NotAfter.
fn is_expired(csr: &CertificateSigningRequest, now: Timestamp) -> bool {
    let Some(certificate) = csr.status.as_ref().and_then(|s| s.certificate.as_ref()) else { return false };
    let Some((_, der)) = pem_blocks(&certificate.0).into_iter().next() else { return false };
    certificate_validity(&der).is_some_and(|(_, not_after)| now > not_after)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn csr(created: &str, conditions: serde_json::Value) -> CertificateSigningRequest {
        serde_json::from_value(json!({
            "metadata": {"name": "c", "creationTimestamp": created},
            "spec": {"request": "", "signerName": "example.com/s"},
            "status": {"conditions": conditions},
        }))
        .unwrap()
    }

    #[test]
    fn ages_as_upstream() {
        let now: Timestamp = "2026-11-26T12:00:00Z".parse().unwrap();
        let config = Config::default();
        let pending = csr("2026-11-26T00:00:00Z", json!([]));
        assert_eq!(why_clean(&pending, &config, now), None, "pending for 12 h");
        let old = csr("2026-11-25T11:00:00Z", json!([]));
        assert!(why_clean(&old, &config, now).unwrap().contains("pendingExpiration"));
        let denied = csr(
            "2026-11-26T00:00:00Z",
            json!([{"type": "Denied", "status": "True", "lastUpdateTime": "2026-11-26T10:30:00Z"}]),
        );
        assert!(why_clean(&denied, &config, now).unwrap().contains("old and denied"));
        let failed = csr(
            "2026-11-26T00:00:00Z",
            json!([{"type": "Failed", "status": "True", "lastUpdateTime": "2026-11-26T11:30:00Z"}]),
        );
        assert_eq!(why_clean(&failed, &config, now), None, "failed for 30 minutes");
        let approved = csr(
            "2026-11-26T00:00:00Z",
            json!([{"type": "Approved", "status": "True", "lastUpdateTime": "2026-11-26T10:00:00Z"}]),
        );
        assert_eq!(why_clean(&approved, &config, now), None, "approved but not issued for 2 h");
    }

    #[test]
    fn approved_csrs_never_issued_go_after_the_pending_expiration() {
        let now: Timestamp = "2026-11-26T12:00:00Z".parse().unwrap();
        let config = Config::default();
        let approved_at = |at: &str| {
            csr("2026-11-20T00:00:00Z", json!([{"type": "Approved", "status": "True", "lastUpdateTime": at}]))
        };
        assert_eq!(why_clean(&approved_at("2026-11-25T12:00:00Z"), &config, now), None, "exactly a day");
        let stale = approved_at("2026-11-25T11:59:59Z");
        assert!(why_clean(&stale, &config, now).unwrap().contains("approved but unissued"));
        let mut issued = stale.clone();
        issued.status.as_mut().unwrap().certificate = Some(k8s_openapi::ByteString(b"not a PEM certificate".to_vec()));
        assert!(why_clean(&issued, &config, now).unwrap().contains("approvedExpiration"), "the issued rule");
        let without_time = csr("2026-11-20T00:00:00Z", json!([{"type": "Approved", "status": "True"}]));
        assert_eq!(why_clean(&without_time, &config, now), None, "a zero lastUpdateTime is never old");
    }
}
