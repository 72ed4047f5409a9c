//! The controller manager's secure port (`--secure-port`, 10257 by default): `/healthz`,
//! `/metrics`, `/metrics/slis`, `/configz`, `/flagz` and `/statusz` over HTTPS, behind upstream's delegated authentication
//! and authorization (k8s.io/apiserver's `SecureServingOptions`,
//! `DelegatingAuthenticationOptions` and `DelegatingAuthorizationOptions`).
//!
//! Every request goes through the same steps as upstream's handler chain: authenticate (a
//! failure is 401; no credentials is `system:anonymous`), authorize (`system:masters` and the
//! always-allowed paths pass, anything else needs a SubjectAccessReview; 403 otherwise), then
//! route (404 for unknown paths).

pub mod auth;
pub mod authz;
mod cache;
pub mod certs;
pub mod health;
pub mod http;
mod metrics;
pub mod options;
pub mod process_metrics;
mod responses;
pub mod slis;
mod tls;
pub mod zpages;

use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use health::HealthChecks;
pub use tls::{CurveError, TlsError, curve_preferences};
pub use zpages::{DebugPages, Statusz};

use auth::Authenticator;
use authz::{Authorizer, Decision};
use http::{Handler, HttpServer, Limits, Request, ResponseWriter, TlsSource};
use options::{AuthenticationOptions, AuthorizationOptions, SecureServingOptions};
use responses::Answer;

/// Connections served at once (one thread each); more are closed on accept.
const MAX_CONNECTIONS: usize = 256;
/// Connections served at once from one address, so that idle connections from one client
/// cannot take every slot and starve the kubelet's probes. Probes and scrapers need a few.
const MAX_CONNECTIONS_PER_IP: usize = 16;
/// The longest a connection may take from accept to a complete TLS handshake and first
/// request head: a connection that asks nothing frees its slot after this.
const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Upstream's `IdleTimeout` for kept-alive connections.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Upstream's `ReadHeaderTimeout`; here it bounds the TLS handshake and each whole request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(32);
/// The longest one write to a client that does not read may block.
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the secure port did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The authenticators cannot be set up.
    #[error("{0}")]
    Authentication(#[from] auth::AuthenticatorError),
    /// The authorizer cannot be set up.
    #[error("{0}")]
    Authorization(#[from] authz::AuthorizerError),
    /// The serving certificate cannot be had.
    #[error("{0}")]
    Certificate(#[from] certs::CertError),
    /// The TLS configuration cannot be built.
    #[error("{0}")]
    Tls(#[from] TlsError),
    /// The port cannot be bound (upstream's words).
    #[error("failed to create listener: failed to listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why not.
        #[source]
        source: io::Error,
    },
}

/// The running HTTPS server.
pub struct SecureServer {
    server: HttpServer,
    /// Dropped to stop the re-reads of the authentication ConfigMap.
    _stop_refresh: Option<crossbeam_channel::Sender<()>>,
}

impl SecureServer {
    /// Starts serving on `--bind-address`:`--secure-port`; `None` when the port is 0. Fails
    /// when a certificate, CA or kubeconfig file is unusable or the port cannot be bound.
    pub fn start(
        serving: &SecureServingOptions,
        authentication: &AuthenticationOptions,
        authorization: &AuthorizationOptions,
        checks: Arc<HealthChecks>,
    ) -> Result<Option<SecureServer>, ServeError> {
        Self::start_with_pages(serving, authentication, authorization, checks, DebugPages::default())
    }

    /// [`SecureServer::start`], also serving the debug `pages`.
    pub fn start_with_pages(
        serving: &SecureServingOptions,
        authentication: &AuthenticationOptions,
        authorization: &AuthorizationOptions,
        checks: Arc<HealthChecks>,
        pages: DebugPages,
    ) -> Result<Option<SecureServer>, ServeError> {
        if serving.port == 0 {
            return Ok(None);
        }
        if !serving.sni_cert_keys.is_empty() {
            log::warn!("--tls-sni-cert-key is not supported yet: every name gets the default serving certificate");
        }
        process_metrics::register();
        metrics::register();
        let authn = Arc::new(Authenticator::new(authentication)?);
        let authz = Authorizer::new(authorization)?;
        let bind = serving.bind_address.unwrap_or(IpAddr::from([0, 0, 0, 0]));
        let cert =
            certs::load_or_generate(&serving.tls_cert_file, &serving.tls_private_key_file, &serving.cert_dir, bind)?;
        let configs = tls::ServerConfigs::new(serving, cert, authn.generation(), &authn.client_cas())?;
        let tls_source: TlsSource = {
            let authn = authn.clone();
            Arc::new(move || configs.current(authn.generation(), || authn.client_cas()))
        };
        let handler = Arc::new(SecureHandler { authn: authn.clone(), authz, checks, pages });
        let server = listen(bind, serving.port, tls_source, handler)?;
        log::info!("Serving securely on {}", server.addr());
        let stop_refresh = authn.looks_up().then(|| spawn_lookup_refresh(authn, auth::LOOKUP_REFRESH));
        Ok(Some(SecureServer { server, _stop_refresh: stop_refresh }))
    }

    /// The address the secure port listens on.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// Stops listening and cuts open connections.
    pub fn stop(self) {
        self.server.stop();
    }
}

/// Re-reads the authentication ConfigMap every `period` until the returned sender is dropped.
fn spawn_lookup_refresh(authn: Arc<Authenticator>, period: Duration) -> crossbeam_channel::Sender<()> {
    let (stop, stopped) = crossbeam_channel::bounded::<()>(0);
    let spawned = std::thread::Builder::new().name("authn-configmap".into()).spawn(move || {
        while let Err(crossbeam_channel::RecvTimeoutError::Timeout) = stopped.recv_timeout(period) {
            if let Err(e) = authn.refresh() {
                log::error!(
                    "{}/{} failed with : {e}",
                    auth::AUTHENTICATION_CONFIGMAP_NAMESPACE,
                    auth::AUTHENTICATION_CONFIGMAP
                );
            }
        }
    });
    if let Err(e) = spawned {
        log::error!("cannot start re-reading the authentication ConfigMap: {e}");
    }
    stop
}

/// Binds the port. An unspecified IPv4 address listens on `[::]` (both families, as Go does)
/// and falls back to `0.0.0.0` on hosts without IPv6.
fn listen(bind: IpAddr, port: u16, tls: TlsSource, handler: Arc<SecureHandler>) -> Result<HttpServer, ServeError> {
    let limits = Limits {
        max_connections: Some(MAX_CONNECTIONS),
        max_connections_per_ip: Some(MAX_CONNECTIONS_PER_IP),
        first_request_timeout: Some(FIRST_REQUEST_TIMEOUT),
        idle_timeout: IDLE_TIMEOUT,
        request_timeout: Some(REQUEST_TIMEOUT),
        write_timeout: Some(WRITE_TIMEOUT),
    };
    let start = |ip: IpAddr| {
        let addr = SocketAddr::new(ip, port);
        HttpServer::start_with_limits(addr, Some(tls.clone()), handler.clone(), limits.clone())
            .map_err(|source| ServeError::Listen { addr, source })
    };
    if bind == IpAddr::from([0, 0, 0, 0])
        && let Ok(server) = start(IpAddr::V6(Ipv6Addr::UNSPECIFIED))
    {
        return Ok(server);
    }
    start(bind)
}

/// Authenticates, authorizes and routes each request.
struct SecureHandler {
    authn: Arc<Authenticator>,
    authz: Authorizer,
    checks: Arc<HealthChecks>,
    pages: DebugPages,
}

impl Handler for SecureHandler {
    fn handle(&self, request: &Request, response: &mut ResponseWriter<'_>) -> io::Result<()> {
        let started = Instant::now();
        let answer = self.answer(request);
        log::debug!(
            "HTTP verb={} URI={} latency={:?} userAgent={:?} srcIP={} resp={}",
            request.method,
            request.path,
            started.elapsed(),
            request.header("User-Agent").unwrap_or_default(),
            request.remote,
            answer.code
        );
        answer.send(response)
    }
}

impl SecureHandler {
    fn answer(&self, request: &Request) -> Answer {
        let started = Instant::now();
        let user = match self.authn.authenticate(request) {
            Ok(user) => {
                metrics::authentication(Ok(&user.name), started.elapsed());
                user
            }
            Err(e) => {
                metrics::authentication(Err(()), started.elapsed());
                log::error!("Unable to authenticate the request: {e}");
                return Answer::unauthorized(request);
            }
        };
        // Non-resource requests: the verb is the lower-cased method.
        let verb = request.method.to_ascii_lowercase();
        let started = Instant::now();
        let decision = self.authz.authorize(&user, &verb, &request.path);
        metrics::authorization(&decision, started.elapsed());
        match decision {
            Decision::Allow => self.route(request),
            Decision::Deny(reason) => {
                log::debug!("Forbidden: URI={} reason={reason:?}", request.path);
                Answer::forbidden(request, &user.name, &verb, &reason)
            }
            Decision::Error(e) => {
                log::error!("authorizing {} for {}: {e}", request.path, user.name);
                Answer::internal_error(request, &e.to_string())
            }
        }
    }

    fn route(&self, request: &Request) -> Answer {
        let path = request.path.as_str();
        if path == "/metrics" {
            let body = crate::metrics::global().render().into_bytes();
            return Answer { code: 200, content_type: responses::METRICS_TEXT, nosniff: false, body };
        }
        if path == "/metrics/slis" {
            if request.method == "DELETE" {
                slis::global().reset();
                return Answer { nosniff: false, ..Answer::text(200, slis::RESET_ANSWER) };
            }
            let body = slis::global().render().into_bytes();
            return Answer { code: 200, content_type: slis::CONTENT_TYPE, nosniff: false, body };
        }
        if let Some(answer) = self.pages.answer(path, request.header("Accept")) {
            return answer;
        }
        // Upstream's mux routes the exact path `/healthz` to its checks, and nothing else
        // (no `/healthz/<check>`, no `/livez` or `/readyz`).
        if path == "/healthz" {
            let answer = self.checks.healthz(&request.query);
            return Answer::text(answer.code, answer.body);
        }
        Answer::not_found()
    }
}
