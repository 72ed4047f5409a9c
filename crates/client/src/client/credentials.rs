//! Per-controller service-account credentials for `--use-service-account-credentials`, after
//! `k8s.io/controller-manager/pkg/clientbuilder` (`DynamicControllerClientBuilder`) and
//! client-go's `transport.NewCachedTokenSource` / `ResettableTokenSourceWrapTransport`.
//!
//! Each controller runs as the ServiceAccount `kube-system/<name>`, created with the root
//! credentials if missing when the controller starts. Its client is an anonymous copy of the
//! root config (no client certificate, no token) that sends a bearer token obtained from the
//! TokenRequest API: one hour is asked for, the token is used until 80% of its life (less client-go's 10 s cache leeway),
//! and a 401 answer drops it so the next request fetches a fresh one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::Mutex;

use super::config::{Auth, RestConfig, TlsSettings};
use super::{Api, Client, PostParams};
use crate::apimachinery::clock::{Clock, RealClock};
use crate::apimachinery::errors::BoxError;

/// `defaultExpirationSeconds`: the lifetime asked for.
pub const EXPIRATION_SECONDS: i64 = 3600;
/// `defaultLeewayPercent`: the share of a token's life left unused.
const LEEWAY_PERCENT: u32 = 20;
/// A shorter lifetime than this is taken for clock skew and pinned to it.
const MIN_LIFETIME: Duration = Duration::from_secs(10 * 60);
/// client-go's cached token source renews this long before the computed expiry.
const CACHE_LEEWAY: Duration = Duration::from_secs(10);
/// `wait.Backoff{Duration: 500ms, Factor: 2, Steps: 4}` of `tokenSourceImpl.Token`.
const FETCH_ATTEMPTS: u32 = 4;
const FETCH_BACKOFF: Duration = Duration::from_millis(500);

/// A token as the TokenRequest API issued it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedToken {
    /// The bearer token itself.
    pub token: String,
    /// From now to its `expirationTimestamp`.
    pub lifetime: Duration,
}

type Fetch = Box<dyn Fn() -> Result<IssuedToken, BoxError> + Send + Sync>;

/// A bearer token kept until it is due for renewal (`cachingTokenSource`).
pub struct TokenSource {
    fetch: Fetch,
    clock: Arc<dyn Clock>,
    cached: Mutex<Option<Cached>>,
}

struct Cached {
    token: String,
    /// 80% into the token's life.
    expiry: Instant,
    /// When it was fetched, for [`TokenSource::reset_older_than`].
    obtained: Instant,
}

impl TokenSource {
    /// A source that gets tokens from `fetch` (a TokenRequest) and times their renewal by `clock`.
    /// A fetch may fail with any error; [`TokenSource::token`] hands it on as it is.
    pub fn new(
        fetch: impl Fn() -> Result<IssuedToken, BoxError> + Send + Sync + 'static,
        clock: Arc<dyn Clock>,
    ) -> Self {
        TokenSource { fetch: Box::new(fetch), clock, cached: Mutex::new(None) }
    }

    /// The token to send now: the cached one until `CACHE_LEEWAY` before its expiry, else a new
    /// one. A failed renewal keeps the old token (client-go's "Unable to rotate token").
    pub fn token(&self) -> Result<String, BoxError> {
        let mut cached = self.cached.lock();
        let now = self.clock.now();
        if let Some(current) = cached.as_ref()
            && now + CACHE_LEEWAY < current.expiry
        {
            return Ok(current.token.clone());
        }
        match (self.fetch)() {
            Ok(issued) => {
                let now = self.clock.now();
                let token = issued.token.clone();
                *cached =
                    Some(Cached { token: issued.token, expiry: now + usable_life(issued.lifetime), obtained: now });
                Ok(token)
            }
            Err(error) => match cached.as_ref() {
                Some(current) => {
                    log::error!("Unable to rotate token: {error}");
                    Ok(current.token.clone())
                }
                None => Err(error),
            },
        }
    }

    /// `ResetTokenOlderThan`: a request that started at `started` was refused with 401; a token
    /// fetched before then is dropped.
    pub fn reset_older_than(&self, started: Instant) {
        let mut cached = self.cached.lock();
        if cached.as_ref().is_some_and(|c| c.obtained < started) {
            *cached = None;
        }
    }
}

/// How long a token is used: its lifetime (at least 10 minutes) less the 20% leeway.
fn usable_life(lifetime: Duration) -> Duration {
    let lifetime = lifetime.max(MIN_LIFETIME);
    lifetime - lifetime * LEEWAY_PERCENT / 100
}

/// A client for `controller` authenticating as the ServiceAccount `namespace/account`
/// (`DynamicControllerClientBuilder.Config`). Upstream builds the clients once it leads, and
/// `Config` creates the account then; here the clients are built with the controllers, while
/// the informers warm up, and make no request until the controller starts once this process
/// leads (a standby creates no account and acts as no controller): the runtime then creates the
/// account with [`get_or_create_service_account`] before starting the controller. Each token
/// fetch gets or creates the account again first (`tokenSourceImpl.Token`), so one deleted
/// later comes back.
pub fn service_account_client(
    root: &Client,
    namespace: &str,
    account: &str,
    controller: &str,
) -> super::Result<Client> {
    let (root_for_tokens, namespace_owned, account_owned) = (root.clone(), namespace.to_string(), account.to_string());
    let fetch = move || Ok(fetch_with_backoff(&root_for_tokens, &namespace_owned, &account_owned)?);
    let source = Arc::new(TokenSource::new(fetch, Arc::new(RealClock)));
    let username = crate::jwt::service_account_username(namespace, account);
    root.with_token_source(anonymous(root.config()), source, &username, controller)
}

/// `restclient.AnonymousClientConfig`: the server and how to trust it, no credentials.
fn anonymous(config: &RestConfig) -> RestConfig {
    RestConfig {
        server: config.server.clone(),
        tls: TlsSettings {
            ca_certs: config.tls.ca_certs.clone(),
            insecure_skip_verify: config.tls.insecure_skip_verify,
            server_name: config.tls.server_name.clone(),
            client_identity: None,
        },
        auth: Auth::None,
        source: config.source.clone(),
    }
}

/// No token could be had for a service account within the backoff (`wait.ErrWaitTimeout`
/// after `tokenSourceImpl.Token`'s retries, each of which was logged).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to get token for {namespace}/{account}: timed out waiting for the condition")]
pub struct TokenFetchError {
    /// The account's namespace.
    pub namespace: String,
    /// The account.
    pub account: String,
}

/// `tokenSourceImpl.Token`: ensure the account, then ask for a token, with a short backoff.
fn fetch_with_backoff(root: &Client, namespace: &str, account: &str) -> Result<IssuedToken, TokenFetchError> {
    let mut wait = FETCH_BACKOFF;
    for attempt in 1..=FETCH_ATTEMPTS {
        match get_or_create_service_account(root, namespace, account) {
            Err(e) => log::warn!("get or create service account failed: {e}"),
            Ok(_) => match request_token(root, namespace, account) {
                Ok(issued) => return Ok(issued),
                Err(e) => log::warn!("get token failed: {e}"),
            },
        }
        if attempt < FETCH_ATTEMPTS {
            std::thread::sleep(wait);
            wait *= 2;
        }
    }
    Err(TokenFetchError { namespace: namespace.to_string(), account: account.to_string() })
}

/// POSTs a TokenRequest for `EXPIRATION_SECONDS`.
fn request_token(root: &Client, namespace: &str, account: &str) -> super::Result<IssuedToken> {
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(EXPIRATION_SECONDS), ..TokenRequestSpec::default() }),
        ..TokenRequest::default()
    };
    let accounts = Api::<ServiceAccount>::namespaced(root, namespace);
    let issued: TokenRequest = accounts.create_subresource("token", account, &request, &PostParams::default())?;
    let status = issued.status.ok_or_else(|| super::Error::Decode("a TokenRequest answer without status".into()))?;
    let (Some(token), Some(expiration)) = (status.token, status.expiration_timestamp) else {
        return Err(super::Error::Decode("a TokenRequest answer without token or expirationTimestamp".into()));
    };
    let lifetime = expiration.0.duration_since(jiff::Timestamp::now());
    let lifetime = Duration::try_from(lifetime).unwrap_or_default();
    Ok(IssuedToken { token, lifetime })
}

/// `getOrCreateServiceAccount`: the account, created (with its namespace, if that is missing
/// and we may create it) when it does not exist. Also what upstream's `ClientOrDie(name)` does
/// for each controller it starts with `--use-service-account-credentials`.
pub fn get_or_create_service_account(root: &Client, namespace: &str, name: &str) -> super::Result<ServiceAccount> {
    let accounts = Api::<ServiceAccount>::namespaced(root, namespace);
    if let Some(account) = accounts.get_opt(name)? {
        return Ok(account);
    }
    let namespaces = Api::<Namespace>::cluster(root);
    if let Err(e) = namespaces.get(namespace)
        && e.is_not_found()
    {
        let wanted = Namespace { metadata: meta(namespace, None), ..Namespace::default() };
        if let Err(e) = namespaces.create(&wanted, &PostParams::default())
            && !e.is_already_exists()
        {
            log::warn!("create non-exist namespace {namespace} failed:{e}");
        }
    }
    let wanted = ServiceAccount { metadata: meta(name, Some(namespace)), ..ServiceAccount::default() };
    match accounts.create(&wanted, &PostParams::default()) {
        Err(e) if e.is_already_exists() => accounts.get(name),
        other => other,
    }
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta { name: Some(name.to_string()), namespace: namespace.map(str::to_string), ..ObjectMeta::default() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apimachinery::clock::FakeClock;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A source whose fetches hand out `token-1`, `token-2`, … with `lifetime`, or fail while
    /// `failing` is set.
    fn counting_source(
        clock: Arc<FakeClock>,
        lifetime: Duration,
    ) -> (Arc<TokenSource>, Arc<AtomicU32>, Arc<AtomicU32>) {
        let fetches = Arc::new(AtomicU32::new(0));
        let failing = Arc::new(AtomicU32::new(0));
        let (f, fail) = (fetches.clone(), failing.clone());
        let source = TokenSource::new(
            move || {
                if fail.load(Ordering::SeqCst) == 1 {
                    return Err("server down".into());
                }
                let n = f.fetch_add(1, Ordering::SeqCst) + 1;
                Ok(IssuedToken { token: format!("token-{n}"), lifetime })
            },
            clock,
        );
        (Arc::new(source), fetches, failing)
    }

    #[test]
    fn an_hour_token_is_renewed_at_eighty_percent_of_its_life_less_ten_seconds() {
        let clock = Arc::new(FakeClock::new());
        let (source, fetches, _) = counting_source(clock.clone(), Duration::from_secs(3600));
        assert_eq!(source.token().unwrap(), "token-1");
        clock.advance(Duration::from_secs(2880 - 11));
        assert_eq!(source.token().unwrap(), "token-1", "still 11 s before 80%");
        clock.advance(Duration::from_secs(1));
        assert_eq!(source.token().unwrap(), "token-2", "within the 10 s cache leeway");
        assert_eq!(fetches.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn short_lifetimes_are_pinned_to_ten_minutes() {
        assert_eq!(usable_life(Duration::from_secs(60)), Duration::from_secs(480));
        assert_eq!(usable_life(Duration::from_secs(3600)), Duration::from_secs(2880));
    }

    #[test]
    fn a_401_drops_only_tokens_fetched_before_the_request() {
        let clock = Arc::new(FakeClock::new());
        let (source, _, _) = counting_source(clock.clone(), Duration::from_secs(3600));
        let before = clock.now();
        clock.advance(Duration::from_secs(1));
        assert_eq!(source.token().unwrap(), "token-1");
        source.reset_older_than(before);
        assert_eq!(source.token().unwrap(), "token-1", "fetched after the refused request began");
        clock.advance(Duration::from_secs(1));
        source.reset_older_than(clock.now());
        assert_eq!(source.token().unwrap(), "token-2");
    }

    #[test]
    fn a_failed_renewal_keeps_the_old_token_but_a_first_fetch_fails() {
        let clock = Arc::new(FakeClock::new());
        let (source, _, failing) = counting_source(clock.clone(), Duration::from_secs(3600));
        failing.store(1, Ordering::SeqCst);
        assert_eq!(source.token().err().map(|e| e.to_string()).as_deref(), Some("server down"));
        failing.store(0, Ordering::SeqCst);
        assert_eq!(source.token().unwrap(), "token-1");
        failing.store(1, Ordering::SeqCst);
        clock.advance(Duration::from_secs(3000));
        assert_eq!(source.token().unwrap(), "token-1");
        failing.store(0, Ordering::SeqCst);
        assert_eq!(source.token().unwrap(), "token-2");
    }
}
