//! A blocking Kubernetes API client over ureq + rustls.
//!
//! [`Client`] holds the connection setup, one client-side rate limiter and one User-Agent; it
//! is cheap to clone. As upstream, each controller gets its own [`Client::for_controller`] so
//! that it has its own `--kube-api-qps`/`--kube-api-burst` budget and is named in the
//! API server's audit log. Typed access to a kind goes through [`Api`].

mod api;
pub mod config;
pub mod credentials;
pub mod discovery;
pub mod error;
pub mod metadata;
mod metrics;
pub mod rate_limit;
pub mod resolve;
pub mod retry;
pub mod scale;
pub mod tls;
pub mod url;
pub mod watch;
pub mod watch_connection;
pub mod watch_poller;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use ureq::http;
use ureq::unversioned::resolver::Resolver;
use ureq::unversioned::transport::{Connector, TcpConnector};

pub use api::{
    Api, DeleteParams, Deleted, ListParams, Patch, PostParams, Preconditions, PropagationPolicy, RawList, Scope,
};
pub use config::RestConfig;
pub use error::{ApiError, Error, Result};
pub use metrics::ClientMetrics;
pub use watch::{WatchEvent, WatchParams, WatchReceiver, WatchStream};

use rate_limit::RequestLimiter;
use tls::TlsConnector;

/// The most times a request is retried when the server answers 429 or 5xx with a
/// `Retry-After` header (client-go's `maxRetries`).
const MAX_RETRY_AFTER_RETRIES: u32 = 10;
/// How long opening a watch connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The wait before sending a GET again after a reset (client-go's artificial `Retry-After: 1`).
const RESET_RETRY_WAIT: Duration = Duration::from_secs(1);
/// The longest `Retry-After` honoured in one wait, so a server cannot park a worker for hours.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
/// The longest answer body we read into memory (a page of a list, an object).
const MAX_BODY_BYTES: u64 = 256 * 1024 * 1024;
/// ureq's input buffer per connection: answers' heads must fit (kube-apiserver's are < 1 KiB).
const INPUT_BUFFER_BYTES: usize = 32 * 1024;
/// ureq's output buffer per connection; larger request bodies go out in pieces of this size.
const OUTPUT_BUFFER_BYTES: usize = 16 * 1024;
/// The `Accept` header of ordinary requests.
pub(crate) const ACCEPT_JSON: &str = "application/json";

/// Per-client settings taken from the command line.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// `--kube-api-qps`; non-positive disables client-side limiting.
    pub qps: f32,
    /// `--kube-api-burst`.
    pub burst: u32,
    /// The time limit for one ordinary request (not watches).
    pub timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions { qps: 20.0, burst: 30, timeout: Duration::from_secs(60) }
    }
}

/// A handle to one API server for one client identity.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
    limiter: Arc<RequestLimiter>,
    user_agent: Arc<str>,
    /// The time limit of one ordinary request.
    timeout: Duration,
    /// Per-client bearer tokens (a controller's service account) instead of the config's auth.
    token_source: Option<Arc<credentials::TokenSource>>,
    /// How long an informer's watch may stay silent (see [`WATCH_IDLE_TIMEOUT`]).
    watch_idle_timeout: Duration,
}

/// How long an informer's watch may stay silent before it is taken for dead and opened again
/// from the last resourceVersion. Our watches are HTTP/1.1, where nothing like HTTP/2's pings
/// (client-go: `ReadIdleTimeout` 30 s + `PingTimeout` 15 s) tells a stalled connection from a
/// quiet one, and the server-side `timeoutSeconds` (5–10 min) never arrives through a stalled
/// path. kube-apiserver's watch cache sends a watcher that allows bookmarks one every minute
/// (`defaultBookmarkFrequency`, in time buckets of a second) whenever the kind's
/// resourceVersion moved; 30 s more for a loaded server. A quiet kind gets no bookmarks, so its
/// watch is opened again every 90 s: one request from the same resourceVersion, no relist.
pub const WATCH_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// What every client of one API server shares: the connection setup and the pool.
struct Shared {
    config: RestConfig,
    options: ClientOptions,
    connector: TlsConnector,
    agent: ureq::Agent,
    /// `host:port` of the server, the `host` label of the client metrics.
    host: String,
    metrics: &'static ClientMetrics,
}

impl Client {
    /// Sets up a client for the server in `config`. No request is made yet.
    pub fn new(config: RestConfig, options: ClientOptions) -> Result<Client> {
        // `Error::Request` carries a text: a client that cannot be set up has no API kind to keep.
        let tls = tls::client_config(&config.tls).map_err(|e| Error::Request(e.to_string()))?;
        let connector = TlsConnector::new(Arc::new(tls), config.tls.server_name.as_deref())
            .map_err(|e| Error::Request(e.to_string()))?;
        let host = url::host_port(&config.server).map_err(|e| Error::Request(e.to_string()))?;
        ClientMetrics::global().transport_created(tls_cache_key(&config.tls));
        let agent = new_agent(&connector);
        let limiter = Arc::new(RequestLimiter::new(options.qps, options.burst));
        let timeout = options.timeout;
        let shared = Shared { config, options, connector, agent, host, metrics: ClientMetrics::global() };
        Ok(Client {
            shared: Arc::new(shared),
            limiter,
            user_agent: user_agent(None).into(),
            timeout,
            token_source: None,
            watch_idle_timeout: WATCH_IDLE_TIMEOUT,
        })
    }

    /// A client for one controller: same server and credentials, its own rate limit budget and
    /// a User-Agent naming the controller, as upstream's per-controller clients.
    pub fn for_controller(&self, controller: &str) -> Client {
        let options = &self.shared.options;
        Client {
            shared: self.shared.clone(),
            limiter: Arc::new(RequestLimiter::new(options.qps, options.burst)),
            user_agent: user_agent(Some(controller)).into(),
            timeout: self.timeout,
            token_source: self.token_source.clone(),
            watch_idle_timeout: self.watch_idle_timeout,
        }
    }

    /// The same client with its own rate limiter allowing `qps_factor` × `--kube-api-qps` and
    /// `burst_factor` × `--kube-api-burst`, as upstream raises the garbage collector's and the namespace
    /// controller's.
    pub fn with_rate_limit_factors(&self, qps_factor: f32, burst_factor: u32) -> Client {
        let options = &self.shared.options;
        let burst = options.burst.saturating_mul(burst_factor);
        Client { limiter: Arc::new(RequestLimiter::new(options.qps * qps_factor, burst)), ..self.clone() }
    }

    /// A client for `controller` on its own connection setup from `config` (an anonymous copy
    /// of this client's), authenticating as `username` with tokens from `source`; same
    /// options as this one, its own rate limit budget.
    pub fn with_token_source(
        &self,
        config: RestConfig,
        source: Arc<credentials::TokenSource>,
        username: &str,
        controller: &str,
    ) -> Result<Client> {
        let mut client = Client::new(config, self.shared.options.clone())?;
        client.user_agent = user_agent(Some(username)).into();
        client.timeout = self.timeout;
        client.token_source = Some(source);
        client.watch_idle_timeout = self.watch_idle_timeout;
        log::debug!("{controller}: authenticating as {username}");
        Ok(client)
    }

    /// The connection settings this client was made from.
    pub fn config(&self) -> &RestConfig {
        &self.shared.config
    }

    /// The CA certificates that verify the server, PEM-encoded (the kubeconfig's CA data), or
    /// `None` when the system trust store is used.
    pub fn ca_pem(&self) -> Option<String> {
        let certs = self.shared.config.tls.ca_certs.as_ref()?;
        Some(certs.iter().map(|cert| crate::x509::pem_encode("CERTIFICATE", cert.as_ref())).collect())
    }

    /// The same client with another time limit for each ordinary request (e.g. a short probe).
    pub fn with_request_timeout(&self, timeout: Duration) -> Client {
        Client { timeout, ..self.clone() }
    }

    /// The same client with another [`WATCH_IDLE_TIMEOUT`] for the informers it feeds (tests
    /// shorten it).
    pub fn with_watch_idle_timeout(&self, idle: Duration) -> Client {
        Client { watch_idle_timeout: idle, ..self.clone() }
    }

    /// How long an informer's watch through this client may stay silent.
    pub fn watch_idle_timeout(&self) -> Duration {
        self.watch_idle_timeout
    }

    /// The server's base URL.
    pub fn server(&self) -> &str {
        &self.shared.config.server
    }

    /// The `User-Agent` header sent with every request.
    pub fn user_agent(&self) -> &str {
        &self.user_agent
    }

    /// GETs a path (e.g. `/version`, `/apis`) and decodes the JSON answer.
    pub fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let response = self.send(http::Method::GET, path, None)?;
        decode(&response)
    }

    /// GETs a path whose answer is text (e.g. `/metrics`, `/healthz`).
    pub fn get_text(&self, path: &str) -> Result<String> {
        let body = self.send(http::Method::GET, path, None)?;
        String::from_utf8(body).map_err(|e| Error::Decode(e.to_string()))
    }

    /// Sends a request and returns the body of a 2xx answer; any other answer becomes an
    /// [`Error::Api`]. Waits for the rate limiter first, and honours `Retry-After` on 429/5xx.
    pub fn send(&self, method: http::Method, path_and_query: &str, body: Option<Body>) -> Result<Vec<u8>> {
        self.send_accepting(method, path_and_query, body, ACCEPT_JSON)
    }

    /// [`Client::send`] asking for another representation (`Accept`), e.g. the metadata-only
    /// `application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`.
    pub fn send_accepting(
        &self,
        method: http::Method,
        path_and_query: &str,
        body: Option<Body>,
        accept: &str,
    ) -> Result<Vec<u8>> {
        // Retries of either kind, counted together against client-go's `maxRetries`.
        let mut attempt = 0;
        loop {
            let response = match self.send_once(&method, path_and_query, body.as_ref(), accept) {
                // client-go sends a GET again after a reset or an EOF before the answer, up to
                // `maxRetries` times a second apart; the first retry here goes at once, as it is
                // mostly a pooled connection the server closed meanwhile.
                Err(e) if method == http::Method::GET && is_reset(&e) && attempt < MAX_RETRY_AFTER_RETRIES => {
                    attempt += 1;
                    self.shared.metrics.retries.inc(&["<error>", method.as_str(), &self.shared.host]);
                    let wait = if attempt == 1 { Duration::ZERO } else { RESET_RETRY_WAIT };
                    log::debug!("{method} {path_and_query}: {e}; retrying in {wait:?}");
                    std::thread::sleep(wait);
                    continue;
                }
                other => other?,
            };
            let (code, retry_after) = (response.code, response.retry_after);
            let body = read_body(response.body)?;
            self.shared.metrics.response_size.observe(&[method.as_str(), &self.shared.host], body.len() as f64);
            if (200..300).contains(&code) {
                return Ok(body);
            }
            let error = ApiError::from_response(code, &body, retry_after);
            let retryable = error.code == 429 || error.code >= 500;
            match error.retry_after {
                Some(wait) if retryable && attempt < MAX_RETRY_AFTER_RETRIES => {
                    attempt += 1;
                    self.shared.metrics.retries.inc(&[&code.to_string(), method.as_str(), &self.shared.host]);
                    let wait = wait.min(MAX_RETRY_AFTER);
                    log::debug!(
                        "{method} {path_and_query}: {} {}, retrying in {wait:?} (Retry-After)",
                        error.code,
                        error.reason
                    );
                    std::thread::sleep(wait);
                }
                _ => return Err(error.into()),
            }
        }
    }

    /// Opens a streaming GET (a watch) on its own connection, closed by shutting `agent` down.
    /// Returns the body reader of a 2xx answer. Not rate limited: see
    /// [`Client::open_watch_connection`].
    pub(crate) fn open_stream(
        &self,
        path_and_query: &str,
        idle_timeout: Duration,
        accept: &str,
    ) -> Result<(ureq::Agent, ureq::BodyReader<'static>)> {
        let agent = new_agent(&self.shared.connector);
        let timeout = Timeout::Idle(idle_timeout);
        let answer = self.round_trip(&agent, &http::Method::GET, path_and_query, None, timeout, accept)?;
        if !(200..300).contains(&answer.code) {
            let retry_after = answer.retry_after;
            let code = answer.code;
            return Err(ApiError::from_response(code, &read_body(answer.body)?, retry_after).into());
        }
        Ok((agent, answer.body.into_with_config().reader()))
    }

    /// Opens a watch on a connection of its own that [`watch_poller`] reads without a
    /// thread: the same credentials, metrics and request log as every request, and, as
    /// client-go's `Request.Watch`, no wait for the rate limiter.
    pub fn open_watch_connection(
        &self,
        path_and_query: &str,
        accept: &str,
    ) -> Result<watch_connection::WatchConnection> {
        let server = self.shared.config.server.as_str();
        let uri = format!("{server}{path_and_query}");
        let started = Instant::now();
        let mut headers = vec![("Accept", accept.to_string()), ("User-Agent", self.user_agent.to_string())];
        if let Some(token) = self.bearer_token("GET", &uri)? {
            headers.push(("Authorization", format!("Bearer {token}")));
        }
        let request =
            watch_connection::WatchRequest { server, path_and_query, headers, connect_timeout: CONNECT_TIMEOUT };
        match watch_connection::WatchConnection::open(&request, Some(&self.shared.connector)) {
            Ok(Ok(connection)) => {
                self.record("GET", &uri, started, Ok(200));
                Ok(connection)
            }
            Ok(Err(refused)) => {
                self.record("GET", &uri, started, Ok(refused.code));
                Err(refused.into_error())
            }
            Err(e) => {
                self.record("GET", &uri, started, Err(&e.to_string()));
                Err(e)
            }
        }
    }

    fn send_once(
        &self,
        method: &http::Method,
        path_and_query: &str,
        body: Option<&Body>,
        accept: &str,
    ) -> Result<Answer> {
        self.throttle(method.as_str(), body.map_or(0, |b| b.bytes.len()));
        let timeout = Timeout::Total(self.timeout);
        self.round_trip(&self.shared.agent, method, path_and_query, body, timeout, accept)
    }

    /// One HTTP exchange up to the answer's headers.
    fn round_trip(
        &self,
        agent: &ureq::Agent,
        method: &http::Method,
        path_and_query: &str,
        body: Option<&Body>,
        timeout: Timeout,
        accept: &str,
    ) -> Result<Answer> {
        let uri = format!("{}{path_and_query}", self.shared.config.server);
        let started = Instant::now();
        let mut builder = http::Request::builder()
            .method(method.clone())
            .uri(&uri)
            .header("Accept", accept)
            .header("User-Agent", &*self.user_agent);
        if let Some(token) = self.bearer_token(method.as_str(), &uri)? {
            builder = builder.header("Authorization", format!("Bearer {token}"));
        }
        let invalid = |e: http::Error| Error::Request(format!("{method} {uri}: {e}"));
        let result = match body {
            Some(body) => {
                let request = builder.header("Content-Type", body.content_type).body(body.bytes.as_slice());
                agent.run(timeout.apply(agent, request.map_err(invalid)?))
            }
            None => agent.run(timeout.apply(agent, builder.body(()).map_err(invalid)?)),
        };
        let response = match result {
            Ok(response) => response,
            Err(e) => {
                self.record(method.as_str(), &uri, started, Err(&e.to_string()));
                return Err(Error::Transport(format!("{method} {uri}: {e}")));
            }
        };
        let code = response.status().as_u16();
        self.record(method.as_str(), &uri, started, Ok(code));
        let retry_after = retry_after(&response);
        Ok(Answer { code, retry_after, body: response.into_body() })
    }

    /// Waits for the rate limiter, then records the wait and the request's size, as client-go's
    /// `tryThrottle` and `request` do for every request but a watch (client-go's `Watch`
    /// leaves the limiter alone, so that an informer's watch opens right after its list).
    fn throttle(&self, method: &str, body_len: usize) {
        let started = Instant::now();
        self.limiter.acquire();
        let labels = [method, self.shared.host.as_str()];
        self.shared.metrics.rate_limiter.observe(&labels, started.elapsed().as_secs_f64());
        self.shared.metrics.request_size.observe(&labels, body_len as f64);
    }

    /// The bearer token of a request: this client's own (a controller's service account) or
    /// the config's.
    fn bearer_token(&self, method: &str, uri: &str) -> Result<Option<String>> {
        match &self.token_source {
            Some(source) => source.token().map(Some).map_err(|e| Error::Transport(format!("{method} {uri}: {e}"))),
            None => Ok(self.shared.config.auth.bearer_token()),
        }
    }

    /// Records metrics and a log line for one round trip (its status code, or why it got
    /// none), worded as client-go's V(6) line; a 401 makes a service-account token stale.
    fn record(&self, method: &str, uri: &str, started: Instant, outcome: std::result::Result<u16, &str>) {
        let elapsed = started.elapsed();
        let code = outcome.map_or_else(|_| "<error>".to_string(), |code| code.to_string());
        self.shared.metrics.observe(method, &code, &self.shared.host, elapsed);
        match outcome {
            Ok(status) => {
                let reason = http::StatusCode::from_u16(status).ok().and_then(|c| c.canonical_reason()).unwrap_or("");
                log::trace!("{method} {uri} {code} {reason} in {} milliseconds", elapsed.as_millis());
                if status == 401
                    && let Some(source) = &self.token_source
                {
                    source.reset_older_than(started);
                }
            }
            Err(e) => log::trace!("{method} {uri} failed after {} milliseconds: {e}", elapsed.as_millis()),
        }
    }
}

/// A request body with its content type.
pub struct Body {
    /// The `Content-Type` it is sent with.
    pub content_type: &'static str,
    /// The encoded body.
    pub bytes: Vec<u8>,
}

impl Body {
    /// `value` encoded as JSON.
    pub fn json<T: serde::Serialize + ?Sized>(value: &T) -> Result<Body> {
        let bytes = serde_json::to_vec(value).map_err(|e| Error::Request(format!("cannot encode the body: {e}")))?;
        Ok(Body { content_type: "application/json", bytes })
    }
}

/// An HTTP answer whose body has not been read yet.
struct Answer {
    code: u16,
    retry_after: Option<Duration>,
    body: ureq::Body,
}

/// How long a request may take.
#[derive(Clone, Copy)]
enum Timeout {
    /// The whole exchange, for ordinary requests.
    Total(Duration),
    /// The longest silence between two reads, for watches that stream for minutes.
    Idle(Duration),
}

impl Timeout {
    fn apply<S: ureq::AsSendBody>(self, agent: &ureq::Agent, request: http::Request<S>) -> http::Request<S> {
        let config = agent.configure_request(request);
        match self {
            Timeout::Total(t) => config.timeout_global(Some(t)).build(),
            // Connecting still has a bound; only the streamed body may take minutes.
            Timeout::Idle(t) => config.timeout_connect(Some(CONNECT_TIMEOUT)).timeout_per_read(Some(t)).build(),
        }
    }
}

fn read_body(body: ureq::Body) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut body.into_with_config().limit(MAX_BODY_BYTES).reader(), &mut bytes)
        .map_err(|e| Error::Transport(format!("reading the answer: {e}")))?;
    Ok(bytes)
}

fn retry_after<B>(response: &http::Response<B>) -> Option<Duration> {
    let value = response.headers().get("Retry-After")?.to_str().ok()?;
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// Reads an explicit `null` as the type's default. Go encodes a nil slice or map as `null`: kubectl
/// writes kubeconfigs so, and kube-apiserver answers an empty metadata-only list with
/// `"items": null`. `#[serde(default)]` alone covers only an absent field.
pub fn null_as_default<'de, D, T>(deserializer: D) -> std::result::Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de> + Default,
{
    Ok(<Option<T> as serde::Deserialize>::deserialize(deserializer)?.unwrap_or_default())
}

/// Decodes an answer; an error names the type it should have been (`List<Pod>: …`).
pub(crate) fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T> {
    crate::apimachinery::json::from_bytes(body).map_err(decode_error::<T>)
}

/// Decodes an object without its managedFields (the answer to a write, a metadata GET): no
/// controller reads them (the informers' caches and the mutation cache drop them too), and
/// they are often most of an answer's JSON (a ReplicaSet's status write answers with its
/// template's field sets).
pub(crate) fn decode_without_managed_fields<T: DeserializeOwned>(body: &[u8]) -> Result<T> {
    crate::apimachinery::json::from_bytes_without_managed_fields(body).map_err(decode_error::<T>)
}

/// A decoding error naming the type the answer should have been.
fn decode_error<T>(error: serde_json::Error) -> Error {
    Error::Decode(format!("{}: {error}", short_type_name::<T>()))
}

/// `List<Pod>` for `k8s_openapi::List<k8s_openapi::api::core::v1::Pod>`.
fn short_type_name<T>() -> String {
    let full = std::any::type_name::<T>();
    let mut short = String::with_capacity(full.len());
    let mut path = String::new();
    for c in full.chars().chain(['\0']) {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            path.push(c);
            continue;
        }
        short.push_str(path.rsplit("::").next().unwrap_or_default());
        path.clear();
        if c != '\0' {
            short.push(c);
        }
    }
    short
}

/// A client of a server nobody listens on, for unit tests whose code never reaches the API.
#[cfg(any(test, feature = "fixtures"))]
pub fn unreachable_client() -> Client {
    let config = RestConfig {
        server: "https://127.0.0.1:1".into(),
        tls: Default::default(),
        auth: config::Auth::None,
        source: "test".into(),
    };
    Client::new(config, ClientOptions::default()).expect("a client")
}

#[cfg(test)]
mod fuzz_tests;

/// An agent that reaches the API server through our TLS connector, resolving its host with
/// [`resolve::NameResolver`] (the host's files and DNS, no NSS: the release binary is static).
fn new_agent(connector: &TlsConnector) -> ureq::Agent {
    let chain = ().chain(TcpConnector::default()).chain(connector.clone());
    agent_with(resolve::NameResolver::default(), chain)
}

fn agent_with(resolver: impl Resolver, chain: impl Connector) -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        // Proxies would need ureq's proxy connectors in the chain; the API server is reached directly.
        .proxy(None)
        .max_redirects(0)
        // ureq's 128 KiB per direction and per transport layer (TCP, then TLS) would hold
        // half a MiB per pooled connection; the input buffer still fits the largest head.
        .input_buffer_size(INPUT_BUFFER_BYTES)
        .max_response_header_size(INPUT_BUFFER_BYTES)
        .output_buffer_size(OUTPUT_BUFFER_BYTES)
        .build();
    ureq::Agent::with_parts(config, chain, resolver)
}

/// `kube-controller-manager/<version> (<os>/<arch>) <controller>`, like upstream's User-Agent.
fn user_agent(controller: Option<&str>) -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let base = format!("kube-controller-manager/v{} ({}/{arch})", env!("CARGO_PKG_VERSION"), std::env::consts::OS);
    match controller {
        Some(name) => format!("{base} {name}"),
        None => base,
    }
}

/// What client-go's transport cache keys a TLS configuration by (CA, client certificate, server
/// name, verification), hashed.
fn tls_cache_key(tls: &config::TlsSettings) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    tls.ca_certs.iter().flatten().for_each(|c| c.as_ref().hash(&mut hasher));
    tls.insecure_skip_verify.hash(&mut hasher);
    tls.server_name.hash(&mut hasher);
    tls.client_identity.iter().flat_map(|i| &i.cert_chain).for_each(|c| c.as_ref().hash(&mut hasher));
    format!("{:016x}", hasher.finish())
}

/// A connection reset or closed before the answer came (client-go's `IsConnectionReset` and
/// `IsProbableEOF`): neither a timeout, a refused connection, nor a TLS failure.
fn is_reset(e: &Error) -> bool {
    let Error::Transport(message) = e else { return false };
    let message = message.to_lowercase();
    !e.is_timeout()
        && ["connection reset", "broken pipe", "eof", "connection aborted", "closed"]
            .iter()
            .any(|m| message.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_resets_and_early_ends_count_as_resets() {
        let transport = |m: &str| Error::Transport(m.into());
        assert!(is_reset(&transport("io: Connection reset by peer (os error 104)")));
        assert!(is_reset(&transport("unexpected EOF")));
        assert!(!is_reset(&transport("io: Connection refused (os error 111)")));
        assert!(!is_reset(&transport("timeout: global")));
        assert!(!is_reset(&transport("invalid peer certificate: UnknownIssuer")));
        assert!(!is_reset(&Error::Decode("EOF while parsing".into())));
    }

    #[test]
    fn a_delete_answers_with_a_status_or_the_object_without_its_managed_fields() {
        use k8s_openapi::api::core::v1::Pod;
        let pod = br#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web","managedFields":[{"manager":"m",
            "operation":"Update","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}],
            "deletionTimestamp":"2026-11-30T06:00:00Z"},"status":{"phase":"Running"}}"#;
        match api::deleted::<Pod>(pod).expect("a pod") {
            api::Deleted::Object(pod) => {
                assert_eq!(pod.metadata.name.as_deref(), Some("web"));
                assert!(pod.metadata.deletion_timestamp.is_some());
                assert_eq!(pod.metadata.managed_fields, None);
            }
            api::Deleted::Gone(status) => panic!("a pod, not {status:?}"),
        }
        // "kind" anywhere but first, and a "kind" key inside the details: still a Status.
        let gone = br#"{"apiVersion":"v1","status":"Success","details":{"kind":"pods","name":"web"},"kind":"Status"}"#;
        assert!(matches!(api::deleted::<Pod>(gone), Ok(api::Deleted::Gone(_))));
        let error = api::deleted::<Pod>(br#"{"kind":"Pod","metadata":{"name":7}}"#).expect_err("a bad pod");
        assert!(error.to_string().contains("Pod"), "{error}");
    }
}
