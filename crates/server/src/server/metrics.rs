//! The secure port's authentication and authorization metrics, as the generic API server's
//! filters record them (k8s.io/apiserver `endpoints/filters/metrics.go`) and its x509
//! authenticator (`authentication/request/x509`): registered when the port starts.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::metrics::{self, CounterVec, GaugeVec, HistogramVec, exponential_buckets};

use super::authz::Decision;

struct Families {
    users: Arc<CounterVec>,
    authn_attempts: Arc<CounterVec>,
    authn_duration: Arc<HistogramVec>,
    authz_attempts: Arc<CounterVec>,
    authz_duration: Arc<HistogramVec>,
    certificate_expiration: Arc<HistogramVec>,
}

/// Registers the families (once per process).
pub fn register() {
    families();
    delegated();
    token_cache();
}

/// The token authenticator cache's statistics (`authentication/token/cache/stats.go`), whose
/// families upstream declares without help text.
struct TokenCache {
    requests: Arc<CounterVec>,
    latency: Arc<HistogramVec>,
    fetches: Arc<CounterVec>,
    active_fetches: Arc<GaugeVec>,
}

fn token_cache() -> &'static TokenCache {
    static FAMILIES: OnceLock<TokenCache> = OnceLock::new();
    FAMILIES.get_or_init(|| {
        let status = &["status"];
        let c = TokenCache {
            requests: Arc::new(CounterVec::counter("authentication_token_cache_request_total", "[ALPHA] ", status)),
            latency: Arc::new(HistogramVec::new(
                "authentication_token_cache_request_duration_seconds",
                "[ALPHA] ",
                status,
                &metrics::DEFAULT_BUCKETS,
            )),
            fetches: Arc::new(CounterVec::counter("authentication_token_cache_fetch_total", "[ALPHA] ", status)),
            active_fetches: Arc::new(GaugeVec::gauge(
                "authentication_token_cache_active_fetch_count",
                "[ALPHA] ",
                status,
            )),
        };
        let registry = metrics::global();
        registry.register(c.requests.clone());
        registry.register(c.latency.clone());
        registry.register(c.fetches.clone());
        registry.register(c.active_fetches.clone());
        c
    })
}

/// A token answered from the cache (`hit`) or by a TokenReview (`miss`), `elapsed` after it
/// was asked; upstream observes whole milliseconds.
pub fn token_cache_request(hit: bool, elapsed: Duration) {
    let c = token_cache();
    let status = if hit { "hit" } else { "miss" };
    c.requests.inc(&[status]);
    c.latency.observe(&[status], elapsed.as_millis() as f64 / 1000.0);
}

/// A cache miss: upstream's `blocked` gauge counts the callers waiting on a fetch, its
/// `in_flight` gauge the fetches under way; then the fetch's outcome, `ok` unless the
/// TokenReview itself failed. Gives back the fetch's result.
pub fn token_cache_fetch<T, E>(fetch: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
    let c = token_cache();
    c.active_fetches.add(&["blocked"], 1.0);
    c.active_fetches.add(&["in_flight"], 1.0);
    let result = fetch();
    c.fetches.inc(&[if result.is_ok() { "ok" } else { "error" }]);
    c.active_fetches.add(&["in_flight"], -1.0);
    c.active_fetches.add(&["blocked"], -1.0);
    result
}

/// The delegated authenticator's and authorizer's webhook families
/// (`authenticatorfactory`/`authorizerfactory` `metrics.go`): `{code}` totals and latencies.
struct Delegated {
    authn_total: Arc<CounterVec>,
    authn_duration: Arc<HistogramVec>,
    authz_total: Arc<CounterVec>,
    authz_duration: Arc<HistogramVec>,
}

fn delegated() -> &'static Delegated {
    static FAMILIES: OnceLock<Delegated> = OnceLock::new();
    FAMILIES.get_or_init(|| {
        const TOTAL: &str = "[ALPHA] Number of HTTP requests partitioned by status code.";
        const LATENCY: &str = "[ALPHA] Request latency in seconds. Broken down by status code.";
        let buckets = [0.25, 0.5, 0.7, 1.0, 1.5, 3.0, 5.0, 10.0];
        let total = |name| Arc::new(CounterVec::counter(name, TOTAL, &["code"]));
        let latency = |name| Arc::new(HistogramVec::new(name, LATENCY, &["code"], &buckets));
        let d = Delegated {
            authn_total: total("apiserver_delegated_authn_request_total"),
            authn_duration: latency("apiserver_delegated_authn_request_duration_seconds"),
            authz_total: total("apiserver_delegated_authz_request_total"),
            authz_duration: latency("apiserver_delegated_authz_request_duration_seconds"),
        };
        let registry = metrics::global();
        registry.register(d.authn_total.clone());
        registry.register(d.authn_duration.clone());
        registry.register(d.authz_total.clone());
        registry.register(d.authz_duration.clone());
        d
    })
}

/// The webhook's `code` label: the HTTP status (201 for a created review), or `<error>` when no
/// response came back.
pub fn review_code(status: Result<(), Option<u16>>) -> String {
    match status {
        Ok(()) => "201".into(),
        Err(Some(code)) => code.to_string(),
        Err(None) => "<error>".into(),
    }
}

/// One TokenReview, as the token webhook records it.
pub fn delegated_authentication(code: &str, elapsed: Duration) {
    let d = delegated();
    d.authn_total.inc(&[code]);
    d.authn_duration.observe(&[code], elapsed.as_secs_f64());
}

/// One SubjectAccessReview, as the authorization webhook records it.
pub fn delegated_authorization(code: &str, elapsed: Duration) {
    let d = delegated();
    d.authz_total.inc(&[code]);
    d.authz_duration.observe(&[code], elapsed.as_secs_f64());
}

fn families() -> &'static Families {
    static FAMILIES: OnceLock<Families> = OnceLock::new();
    FAMILIES.get_or_init(|| {
        let latency = exponential_buckets(0.001, 2.0, 15);
        let families = Families {
            users: Arc::new(CounterVec::counter(
                "authenticated_user_requests",
                "[ALPHA] Counter of authenticated requests broken out by username.",
                &["username"],
            )),
            authn_attempts: Arc::new(CounterVec::counter(
                "authentication_attempts",
                "[ALPHA] Counter of authenticated attempts.",
                &["result"],
            )),
            authn_duration: Arc::new(HistogramVec::new(
                "authentication_duration_seconds",
                "[ALPHA] Authentication duration in seconds broken out by result.",
                &["result"],
                &latency,
            )),
            authz_attempts: Arc::new(CounterVec::counter(
                "authorization_attempts_total",
                "[ALPHA] Counter of authorization attempts broken down by result. It can be either 'allowed', \
                 'denied', 'no-opinion' or 'error'.",
                &["result"],
            )),
            authz_duration: Arc::new(HistogramVec::new(
                "authorization_duration_seconds",
                "[ALPHA] Authorization duration in seconds broken out by result.",
                &["result"],
                &latency,
            )),
            certificate_expiration: Arc::new(
                HistogramVec::new(
                    "apiserver_client_certificate_expiration_seconds",
                    "[ALPHA] Distribution of the remaining lifetime on the certificate used to authenticate a request.",
                    &[],
                    &[
                        0.0, 1800.0, 3600.0, 7200.0, 21600.0, 43200.0, 86400.0, 172800.0, 345600.0, 604800.0,
                        2592000.0, 7776000.0, 15552000.0, 31104000.0,
                    ],
                )
                .at_zero(),
            ),
        };
        let registry = metrics::global();
        for family in [&families.users, &families.authn_attempts, &families.authz_attempts] {
            registry.register(family.clone());
        }
        for family in [&families.authn_duration, &families.authz_duration, &families.certificate_expiration] {
            registry.register(family.clone());
        }
        families
    })
}

/// `recordAuthenticationMetrics`: `success` (and the user, compressed), or `error` when the
/// credentials were refused (anonymous requests succeed as `system:anonymous`).
pub fn authentication(outcome: Result<&str, ()>, elapsed: Duration) {
    let families = families();
    let result = match outcome {
        Ok(user) => {
            families.users.inc(&[compress_username(user)]);
            "success"
        }
        Err(()) => "error",
    };
    families.authn_attempts.inc(&[result]);
    families.authn_duration.observe(&[result], elapsed.as_secs_f64());
}

/// `recordAuthorizationMetrics`: `allowed`, `denied` or `error` (our authorizer folds no-opinion
/// into a denial, as upstream's union does before the filter sees it).
pub fn authorization(decision: &Decision, elapsed: Duration) {
    let result = match decision {
        Decision::Allow => "allowed",
        Decision::Deny(_) => "denied",
        Decision::Error(_) => "error",
    };
    let families = families();
    families.authz_attempts.inc(&[result]);
    families.authz_duration.observe(&[result], elapsed.as_secs_f64());
}

/// The remaining lifetime of a presented client certificate, observed before it is verified.
pub fn client_certificate_remaining(seconds: f64) {
    families().certificate_expiration.observe(&[], seconds);
}

/// `compressUsername`: a few well-known names as they are, e-mail addresses as `email_id`,
/// everything else `other`, so that the label stays small.
fn compress_username(user: &str) -> &str {
    match user {
        "admin" | "client" | "kube_proxy" | "kubelet" | "system:serviceaccount:kube-system:default" => user,
        _ if user.contains('@') => "email_id",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn review_codes_are_the_status_or_error() {
        assert_eq!(review_code(Ok(())), "201");
        assert_eq!(review_code(Err(Some(403))), "403");
        assert_eq!(review_code(Err(None)), "<error>");
    }

    #[test]
    fn usernames_are_compressed_as_upstream() {
        assert_eq!(compress_username("kubelet"), "kubelet");
        assert_eq!(compress_username("alice@example.com"), "email_id");
        assert_eq!(compress_username("system:serviceaccount:monitoring:prometheus"), "other");
    }
}
