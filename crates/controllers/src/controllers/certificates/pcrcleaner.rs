//! The PodCertificateRequest cleaner (`podcertificaterequest-cleaner-controller`, feature gate
//! `PodCertificateRequest`), after upstream v1.36's
//! `pkg/controller/certificates/cleaner/pcrcleaner.go`: every poll it looks at every cached
//! `certificates.k8s.io/v1beta1` PodCertificateRequest and deletes, with its UID as
//! precondition, each one created at least the threshold ago, whatever its state: every
//! request's flow is expected to end well within it.

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::certificates::v1beta1::PodCertificateRequest;

use crate::client::{self, Api, Client, DeleteParams, Preconditions};
use crate::runtime::controller::{Controller, ControllerContext};
use crate::runtime::informer::{Informer, object_key};

/// What the controller takes from the flags: upstream's constants (given by
/// `newPodCertificateRequestCleanerController`), settable for tests.
#[derive(Debug, Clone)]
pub struct Config {
    /// `threshold`: how old a request must be to go.
    pub threshold: Duration,
    /// `pollingInterval`.
    pub polling_interval: Duration,
}

impl Default for Config {
    fn default() -> Config {
        Config { threshold: Duration::from_secs(15 * 60), polling_interval: Duration::from_secs(5 * 60) }
    }
}

/// Why a PodCertificateRequest could not be cleaned.
#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("unable to delete PodCertificateRequest \"{namespace}/{name}\": {source}")]
    Delete { namespace: String, name: String, source: client::Error },
}

/// `NewPCRCleanerController` + `Run`: one `wait.Until` loop over the informer's cache. It
/// cannot fail.
pub fn new(context: &ControllerContext<'_>, config: Config) -> Controller {
    let cleaner = Arc::new(PcrCleaner {
        client: context.client.clone(),
        requests: context.informers.informer(),
        threshold: config.threshold,
    });
    Controller::new().every("pcr-cleaner", config.polling_interval, move || cleaner.worker())
}

struct PcrCleaner {
    client: Client,
    requests: Arc<Informer<PodCertificateRequest>>,
    threshold: Duration,
}

impl PcrCleaner {
    /// `worker`: every cached request is handled; a failure is logged and the others go on.
    fn worker(&self) {
        let now = Timestamp::now();
        for request in self.requests.store().list() {
            if let Err(e) = self.handle(&request, now) {
                log::error!(
                    "Error while attempting to clean PodCertificateRequest err=\"{e}\" pcr=\"{}\"",
                    object_key(&request.metadata)
                );
            }
        }
    }

    /// `handle`: a request old enough is deleted if it is still the same object; one already
    /// gone is fine.
    fn handle(&self, request: &PodCertificateRequest, now: Timestamp) -> Result<(), Error> {
        if !is_expired(request, self.threshold, now) {
            return Ok(());
        }
        let meta = &request.metadata;
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        let name = meta.name.as_deref().unwrap_or_default();
        // `ptr.To(pcr.UID)`: an empty UID is still sent as a precondition.
        let preconditions =
            Some(Preconditions { uid: Some(meta.uid.clone().unwrap_or_default()), resource_version: None });
        let params = DeleteParams { preconditions, ..DeleteParams::default() };
        match Api::<PodCertificateRequest>::namespaced(&self.client, namespace).delete(name, &params) {
            Ok(_) => Ok(()),
            // Someone else deleted it already.
            Err(e) if e.is_not_found() => Ok(()),
            Err(source) => Err(Error::Delete { namespace: namespace.to_string(), name: name.to_string(), source }),
        }
    }
}

/// Whether `now` is not before the request's creation plus `threshold` (the negation of
/// upstream's `clock.Now().Before(creationTimestamp.Add(threshold))`). A request without a
/// creation time has Go's zero time, which is always long enough ago.
pub fn is_expired(request: &PodCertificateRequest, threshold: Duration, now: Timestamp) -> bool {
    let Some(created) = request.metadata.creation_timestamp.as_ref() else { return true };
    let threshold = SignedDuration::try_from(threshold).unwrap_or(SignedDuration::MAX);
    match created.0.checked_add(threshold) {
        Ok(deadline) => now >= deadline,
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(created: Option<&str>, conditions: serde_json::Value) -> PodCertificateRequest {
        let mut meta = json!({"namespace": "foo", "name": "bar", "uid": "u-1"});
        if let Some(created) = created {
            meta["creationTimestamp"] = json!(created);
        }
        serde_json::from_value(json!({
            "metadata": meta,
            "spec": {"signerName": "foo.com/abc", "podName": "pod-1", "podUID": "pod-1-uid",
                     "serviceAccountName": "sa-1", "serviceAccountUID": "sa-uid-1",
                     "nodeName": "node-1", "nodeUID": "node-uid-1", "maxExpirationSeconds": 86400},
            "status": {"conditions": conditions},
        }))
        .expect("a PodCertificateRequest")
    }

    fn denied() -> serde_json::Value {
        json!([{"type": "Denied", "status": "True", "reason": "Foo", "message": "abc",
                "lastTransitionTime": "2025-01-01T00:00:00Z"}])
    }

    /// Upstream's `TestPCRCleaner` cases: the state does not matter, only the age.
    #[test]
    fn requests_go_once_the_threshold_has_passed_whatever_their_state() {
        let now: Timestamp = "2025-01-01T00:30:00Z".parse().unwrap();
        let threshold = Config::default().threshold;
        for conditions in [json!([]), denied()] {
            let young = request(Some("2025-01-01T00:15:01Z"), conditions.clone());
            assert!(!is_expired(&young, threshold, now), "within the threshold: left alone");
            let old = request(Some("2025-01-01T00:14:59Z"), conditions);
            assert!(is_expired(&old, threshold, now), "outside the threshold: deleted");
        }
    }

    #[test]
    fn the_threshold_itself_is_old_enough_and_a_missing_creation_time_is_the_zero_time() {
        let now: Timestamp = "2025-01-01T00:30:00Z".parse().unwrap();
        let threshold = Config::default().threshold;
        assert!(is_expired(&request(Some("2025-01-01T00:15:00Z"), json!([])), threshold, now), "not Before");
        assert!(is_expired(&request(None, json!([])), threshold, now));
        assert!(!is_expired(&request(Some("2025-01-01T00:29:00Z"), json!([])), Duration::MAX, now));
    }

    #[test]
    fn upstream_polls_every_five_minutes_for_requests_older_than_fifteen() {
        let config = Config::default();
        assert_eq!(config.threshold, Duration::from_secs(900));
        assert_eq!(config.polling_interval, Duration::from_secs(300));
    }
}
