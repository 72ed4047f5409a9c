//! Fault injection for tests and demos: failed requests, latency, cut watches. Health probes
//! (`/healthz`, `/livez`, `/readyz`) are spared the injected errors and latency, so a sandbox
//! reports ready for as long as it listens; stopping it (`Sandbox::pause`) is the fault that
//! takes readiness away.

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::sandbox::apiserver::status::ApiError;

/// A fault that cannot be injected.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A status other than 500, 429 and 503.
    #[error("cannot inject HTTP {0}: choose 500, 429 or 503")]
    UnsupportedCode(u16),
}

/// Faults the API layer applies to the next requests.
#[derive(Default)]
pub struct Faults {
    errors: Mutex<VecDeque<ApiError>>,
    latency: Mutex<Option<Duration>>,
    /// Bumped to end every open watch.
    watch_epoch: AtomicU64,
    /// Set while watches hold their events back.
    watch_events_held: AtomicBool,
    /// Group versions answered with 503, as an unavailable aggregated API (APIService) is.
    unavailable_apis: Mutex<BTreeSet<String>>,
}

impl Faults {
    /// Answers the next `count` API requests with `code` (500, 429 or 503; 429 and 503 carry
    /// `retry_after` seconds when given).
    pub fn fail_next(&self, count: usize, code: u16, retry_after: Option<u64>) -> Result<(), Error> {
        let error = match code {
            500 => ApiError::internal("injected fault: internal error"),
            429 => {
                ApiError::too_many_requests("injected fault: too many requests, please try again later", retry_after)
            }
            503 => ApiError::service_unavailable(
                "injected fault: the server is currently unable to handle the request",
                retry_after,
            ),
            other => return Err(Error::UnsupportedCode(other)),
        };
        self.errors.lock().extend(std::iter::repeat_n(error, count));
        Ok(())
    }

    /// Delays every API request by `latency` (`None` to stop); health probes are not delayed.
    pub fn set_latency(&self, latency: Option<Duration>) {
        *self.latency.lock() = latency.filter(|l| !l.is_zero());
    }

    /// Ends every open watch; clients see their streams close and must re-watch.
    pub fn close_watches(&self) {
        self.watch_epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// While `true`, open and new watches send no events (changes wait, in order, in each
    /// watch's queue; lists and gets are current): clients' caches fall behind the store, as
    /// when kube-apiserver's watch cache lags. `false` lets the held events go.
    pub fn hold_watch_events(&self, hold: bool) {
        self.watch_events_held.store(hold, Ordering::SeqCst);
    }

    pub(crate) fn watch_events_held(&self) -> bool {
        self.watch_events_held.load(Ordering::SeqCst)
    }

    /// Makes every request under `/apis/<group_version>` (its discovery document included) fail
    /// with 503, as kube-apiserver answers for an APIService whose backend is down; `false`
    /// restores it.
    pub fn set_api_unavailable(&self, group_version: &str, unavailable: bool) {
        let mut apis = self.unavailable_apis.lock();
        if unavailable {
            apis.insert(group_version.trim_matches('/').to_string());
        } else {
            apis.remove(group_version.trim_matches('/'));
        }
    }

    /// The group versions made unavailable, which aggregated discovery marks `Stale`.
    pub(crate) fn unavailable_apis(&self) -> BTreeSet<String> {
        self.unavailable_apis.lock().clone()
    }

    /// The 503 for a request to an unavailable group version.
    pub(crate) fn unavailable_api_error(&self, path: &str) -> Option<ApiError> {
        let apis = self.unavailable_apis.lock();
        let rest = path.strip_prefix("/apis/")?;
        let hit =
            apis.iter().any(|gv| rest.strip_prefix(gv.as_str()).is_some_and(|r| r.is_empty() || r.starts_with('/')));
        hit.then(|| ApiError::service_unavailable("the server is currently unable to handle the request", None))
    }

    pub(crate) fn watch_epoch(&self) -> u64 {
        self.watch_epoch.load(Ordering::SeqCst)
    }

    /// Applies the request faults to a request for `path`: waits the injected latency, then
    /// takes the next injected error, if any, for the caller to answer with. Health probes pass
    /// untouched and leave the queued errors to the next API request.
    pub(crate) fn before_request(&self, path: &str) -> Option<ApiError> {
        if is_health_path(path) {
            return None;
        }
        let latency = *self.latency.lock();
        if let Some(delay) = latency {
            std::thread::sleep(delay);
        }
        self.errors.lock().pop_front()
    }
}

/// `/healthz`, `/livez`, `/readyz` and their per-check subpaths (`/readyz/etcd`, ...).
pub fn is_health_path(path: &str) -> bool {
    ["/healthz", "/livez", "/readyz"]
        .iter()
        .any(|root| path.strip_prefix(root).is_some_and(|rest| rest.is_empty() || rest.starts_with('/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queued_errors_are_served_once_each() {
        let faults = Faults::default();
        faults.fail_next(2, 429, Some(1)).unwrap();
        assert_eq!(faults.before_request("/api/v1/pods").unwrap().retry_after, Some(1));
        assert_eq!(faults.before_request("/version").unwrap().code, 429);
        assert!(faults.before_request("/api/v1/pods").is_none());
        assert!(faults.fail_next(1, 404, None).is_err());
    }

    #[test]
    fn health_probes_leave_queued_errors_to_api_requests() {
        let faults = Faults::default();
        faults.fail_next(1, 503, Some(2)).unwrap();
        for probe in ["/readyz", "/livez", "/healthz", "/readyz/etcd", "/healthz/ping", "/livez/"] {
            assert!(faults.before_request(probe).is_none(), "{probe}");
        }
        let error = faults.before_request("/api/v1/namespaces").expect("the queued error");
        assert_eq!((error.code, error.retry_after), (503, Some(2)));
    }

    #[test]
    fn health_paths_are_the_probe_roots_and_their_subpaths() {
        for path in ["/healthz", "/livez", "/readyz", "/readyz/ping", "/livez/etcd", "/healthz/log"] {
            assert!(is_health_path(path), "{path}");
        }
        for path in ["/readyzz", "/api/v1/readyz", "/version", "/", "/healthzx/ping"] {
            assert!(!is_health_path(path), "{path}");
        }
    }

    #[test]
    fn unavailable_group_versions_fail_until_restored() {
        let faults = Faults::default();
        faults.set_api_unavailable("metrics.k8s.io/v1beta1", true);
        assert_eq!(faults.unavailable_api_error("/apis/metrics.k8s.io/v1beta1").map(|e| e.code), Some(503));
        assert!(faults.unavailable_api_error("/apis/metrics.k8s.io/v1beta1/pods").is_some());
        assert!(faults.unavailable_api_error("/apis/metrics.k8s.io/v1beta10").is_none());
        assert!(faults.unavailable_api_error("/apis/apps/v1").is_none());
        faults.set_api_unavailable("metrics.k8s.io/v1beta1", false);
        assert!(faults.unavailable_api_error("/apis/metrics.k8s.io/v1beta1").is_none());
    }
}
