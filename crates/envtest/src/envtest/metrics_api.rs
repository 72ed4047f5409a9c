//! The metrics APIs on a real control plane: a small HTTPS server that answers them (through
//! [`crate::sandbox::metrics_api`], the sandbox's rules) from the objects in kube-apiserver,
//! registered with kube-apiserver as an aggregated API — as metrics-server and the custom and
//! external metrics adapters are in a cluster.
//!
//! kube-apiserver reaches it through an `ExternalName` Service (`externalName: localhost`):
//! the aggregator's service resolver maps one to `https://<externalName>:<port>`. It
//! authenticates and authorizes each request itself before proxying it (with its front-proxy
//! client certificate, which this server requires), so the server checks no users.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::ControlPlane;
use ureq::http::Method;

use crate::apimachinery::errors::BoxError;
use crate::client::{self, Body, Client, ClientOptions};
use crate::sandbox::auth::Pki;
use crate::sandbox::metrics_api::{self, GROUPS, Source};
use crate::server::http::{Handler, HttpServer, Request, ResponseWriter};

/// The Service in kube-system the APIServices point at.
const SERVICE: &str = "kcm-metrics-apis";
/// How long the APIServices may take to become Available on a loaded machine.
const AVAILABLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the metrics API server could not be started or registered.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The admin client cannot be built, or an APIService cannot be read.
    #[error(transparent)]
    Client(#[from] client::Error),
    /// The front proxy's CA (which kube-apiserver's proxied requests are checked against).
    #[error("front-proxy-ca.crt: {source}")]
    FrontProxyCa {
        /// Why it cannot be read.
        #[source]
        source: io::Error,
    },
    /// The server's certificate or TLS configuration (the sandbox's PKI).
    #[error("{0}")]
    Tls(#[source] BoxError),
    /// The HTTPS server did not start.
    #[error("metrics API server: {source}")]
    Server {
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Creating the Service or an APIService failed (`what` names it).
    #[error("{what}: {source}")]
    Register {
        /// `Service` or `APIService <version>.<group>`.
        what: String,
        /// The API error.
        #[source]
        source: client::Error,
    },
    /// An APIService did not become Available in time.
    #[error("APIService {name} not Available after {timeout:?}: {condition:?}")]
    NotAvailable {
        /// `<version>.<group>`.
        name: String,
        /// How long it was waited for.
        timeout: Duration,
        /// Its `Available` condition, if any.
        condition: Option<Value>,
    },
    /// Reading what the metrics are computed from.
    #[error("GET {path}: {source}")]
    Get {
        /// The API path.
        path: String,
        /// The API error.
        #[source]
        source: client::Error,
    },
}

/// The metrics API server, registered; unregistered and stopped when dropped.
pub struct MetricsApis {
    server: Option<HttpServer>,
    client: Client,
}

impl MetricsApis {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.server.as_ref().map_or_else(|| SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), HttpServer::addr)
    }
}

impl Drop for MetricsApis {
    fn drop(&mut self) {
        for (group, version) in GROUPS {
            let path = format!("/apis/apiregistration.k8s.io/v1/apiservices/{version}.{group}");
            let _ = self.client.send(Method::DELETE, &path, None);
        }
        let _ = self.client.send(Method::DELETE, &format!("/api/v1/namespaces/kube-system/services/{SERVICE}"), None);
        if let Some(server) = self.server.take() {
            server.stop();
        }
    }
}

impl ControlPlane {
    /// Starts the metrics API server, registers its three APIServices and waits until
    /// kube-apiserver reports each `Available`.
    pub fn serve_metrics_apis(&self) -> Result<MetricsApis, Error> {
        let client =
            Client::new(self.admin_config(), ClientOptions { timeout: Duration::from_secs(10), ..Default::default() })?;
        let front_proxy_ca = std::fs::read_to_string(self.dir().join("front-proxy-ca.crt"))
            .map_err(|source| Error::FrontProxyCa { source })?;
        let pki = Pki::generate(Ipv4Addr::LOCALHOST.into()).map_err(|e| Error::Tls(e.into()))?;
        let tls = pki.server_config_trusting(&front_proxy_ca).map_err(|e| Error::Tls(e.into()))?;
        let handler = Arc::new(MetricsHandler { source: ServerSource { client: client.clone() } });
        let server = HttpServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), Some(tls), handler)
            .map_err(|source| Error::Server { source })?;
        let apis = MetricsApis { server: Some(server), client };
        register(&apis.client, apis.addr().port())?;
        wait_available(&apis.client)?;
        Ok(apis)
    }
}

/// The ExternalName Service and the APIServices, with metrics-server's priorities.
fn register(client: &Client, port: u16) -> Result<(), Error> {
    let service = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": SERVICE, "namespace": "kube-system"},
        "spec": {"type": "ExternalName", "externalName": "localhost",
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}});
    post(client, "/api/v1/namespaces/kube-system/services", &service)
        .map_err(|source| Error::Register { what: "Service".into(), source })?;
    for (group, version) in GROUPS {
        let api_service = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": format!("{version}.{group}")},
            "spec": {"service": {"namespace": "kube-system", "name": SERVICE, "port": port},
                "group": group, "version": version, "insecureSkipTLSVerify": true,
                "groupPriorityMinimum": 100, "versionPriority": 100}});
        post(client, "/apis/apiregistration.k8s.io/v1/apiservices", &api_service)
            .map_err(|source| Error::Register { what: format!("APIService {version}.{group}"), source })?;
    }
    Ok(())
}

fn post(client: &Client, path: &str, object: &Value) -> crate::client::Result<Vec<u8>> {
    client.send(Method::POST, path, Some(Body::json(object)?))
}

fn wait_available(client: &Client) -> Result<(), Error> {
    let deadline = Instant::now() + AVAILABLE_TIMEOUT;
    for (group, version) in GROUPS {
        let path = format!("/apis/apiregistration.k8s.io/v1/apiservices/{version}.{group}");
        loop {
            let api_service: Value = client.get_json(&path)?;
            let conditions = api_service["status"]["conditions"].as_array().cloned().unwrap_or_default();
            let available = conditions.iter().find(|c| c["type"] == "Available");
            if available.is_some_and(|c| c["status"] == "True") {
                break;
            }
            if Instant::now() > deadline {
                return Err(Error::NotAvailable {
                    name: format!("{version}.{group}"),
                    timeout: AVAILABLE_TIMEOUT,
                    condition: available.cloned(),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    Ok(())
}

struct MetricsHandler {
    source: ServerSource,
}

impl Handler for MetricsHandler {
    fn handle(&self, request: &Request, response: &mut ResponseWriter<'_>) -> io::Result<()> {
        let path = request.path.trim_end_matches('/');
        if matches!(path, "/healthz" | "/livez" | "/readyz") {
            return response.send(200, &[("Content-Type", "text/plain; charset=utf-8")], b"ok");
        }
        let answer = (request.method == "GET")
            .then(|| metrics_api::answer(path, &request.query, &self.source, jiff::Timestamp::now()))
            .flatten();
        // The aggregator merges every APIService's OpenAPI documents (and logs an error for
        // each it cannot download); these have no paths. For `/apis`, a 404 makes it fall back
        // to each group's legacy discovery.
        let openapi = match path {
            "/openapi/v2" => Some((
                200,
                json!({"swagger": "2.0", "info": {"title": "kcm metrics APIs", "version": "v0"}, "paths": {}}),
            )),
            "/openapi/v3" => Some((200, json!({"paths": {}}))),
            _ => None,
        };
        let (code, body) = answer.or(openapi).unwrap_or_else(|| {
            (
                404,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "the server could not find the requested resource", "reason": "NotFound",
                "details": {}, "code": 404}),
            )
        });
        response.send(code, &[("Content-Type", "application/json")], body.to_string().as_bytes())
    }
}

/// kube-apiserver, read as a cluster admin.
struct ServerSource {
    client: Client,
}

impl ServerSource {
    fn items(&self, path: &str) -> Result<Vec<Value>, Error> {
        let list: Value = self.client.get_json(path).map_err(|source| Error::Get { path: path.to_string(), source })?;
        Ok(list["items"].as_array().cloned().unwrap_or_default())
    }

    fn namespaced_items(&self, plural: &str, namespace: Option<&str>) -> Result<Vec<Value>, Error> {
        match namespace {
            Some(ns) => self.items(&format!("/api/v1/namespaces/{ns}/{plural}")),
            None => self.items(&format!("/api/v1/{plural}")),
        }
    }

    /// `None` where kube-apiserver answers 404.
    fn get_opt(&self, path: &str) -> Result<Option<Value>, Error> {
        match self.client.get_json(path) {
            Ok(value) => Ok(Some(value)),
            Err(client::Error::Api(e)) if e.code == 404 => Ok(None),
            Err(source) => Err(Error::Get { path: path.to_string(), source }),
        }
    }
}

// The sandbox's `Source` trait returns any error (Go's `error`): this module's own, boxed.
impl Source for ServerSource {
    fn pods(&self, namespace: Option<&str>) -> Result<Vec<Value>, BoxError> {
        self.namespaced_items("pods", namespace).map_err(BoxError::from)
    }

    fn services(&self, namespace: Option<&str>) -> Result<Vec<Value>, BoxError> {
        self.namespaced_items("services", namespace).map_err(BoxError::from)
    }

    fn nodes(&self) -> Result<Vec<Value>, BoxError> {
        self.items("/api/v1/nodes").map_err(BoxError::from)
    }

    fn object(&self, namespace: &str, group: &str, plural: &str, name: &str) -> Result<Option<Value>, BoxError> {
        let group_version = if group.is_empty() {
            "api/v1".to_string()
        } else {
            let Some(entry) = self.get_opt(&format!("/apis/{group}"))? else {
                return Ok(None);
            };
            format!("apis/{}", entry["preferredVersion"]["groupVersion"].as_str().unwrap_or_default())
        };
        self.get_opt(&format!("/{group_version}/namespaces/{namespace}/{plural}/{name}")).map_err(BoxError::from)
    }
}
