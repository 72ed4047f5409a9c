//! The API server: answers requests as kube-apiserver does. This file authenticates and
//! authorizes each request, serves discovery, negotiates the representation, and routes
//! resource requests to the verb's handler ([`handlers`]) or a subresource's
//! ([`subresources`]); the handlers apply kube-apiserver's semantics — metadata, optimistic
//! concurrency, the status subresource, finalizers and graceful deletion, defaulting
//! ([`defaults`]), admission, validation (`validation`) — on top of the
//! [`Store`].
//!
//! Beside them: what shapes requests and answers (`convert` between stored and served forms,
//! `typed` decoding through the typed structs, `protobuf` bodies, `patch` algorithms,
//! `metadata` negotiation, `table` printing, `field_selector`, `responses`, `status` errors),
//! `discovery`, and what observes or disturbs the server (`audit`, `faults`).

pub mod aggregated;
pub mod audit;
pub mod convert;
pub mod defaults;
pub mod discovery;
pub mod eviction;
pub mod faults;
pub mod field_selector;
pub mod handlers;
pub mod metadata;
pub mod patch;
pub mod protobuf;
pub mod responses;
pub mod status;
pub mod subresources;
pub mod table;
pub mod typed;
mod validation;

use std::io;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use self::audit::{AuditEntry, AuditLog};
use self::faults::Faults;
use self::handlers::{create, delete, get, list, update, watch};
use self::responses::{send_error, send_json_with, warning_header};
use self::status::{ApiError, ApiResult, qualified};
use crate::sandbox::auth::{self, Tokens, UserInfo};
use crate::sandbox::storage::resources::{self, ResourceType, Verbs};
use crate::sandbox::storage::services::ServiceRange;
use crate::sandbox::storage::store::Store;
use crate::server::http::{Handler, Request, ResponseWriter};

/// Settings of the API layer.
#[derive(Debug, Clone)]
pub struct ApiOptions {
    /// Serve requests without credentials as a cluster admin (the plain-HTTP test mode).
    pub anonymous_is_admin: bool,
    /// How often watches that asked for bookmarks get one.
    pub bookmark_interval: Duration,
    /// `--service-cluster-ip-range`: where Services get their cluster IPs.
    pub service_range: ServiceRange,
    /// The `WatchList` feature gate (`sendInitialEvents` on watches); on by default in v1.36.
    pub watch_list: bool,
    /// `--authorization-mode=Node,RBAC`: authorize every request with RBAC (see `auth/rbac.rs`);
    /// off, every authenticated request is allowed (`AlwaysAllow`).
    pub rbac: bool,
}

impl Default for ApiOptions {
    fn default() -> Self {
        ApiOptions {
            anonymous_is_admin: false,
            bookmark_interval: Duration::from_secs(60),
            service_range: ServiceRange::default(),
            watch_list: true,
            rbac: false,
        }
    }
}

/// The API server's request handler.
pub struct ApiServer {
    /// The objects served, shared with the sandbox's other parts.
    pub store: Arc<Store>,
    /// The bearer tokens accepted.
    pub tokens: Arc<Tokens>,
    /// Signs TokenRequest tokens (kube-apiserver's `--service-account-signing-key-file`) and
    /// verifies legacy service-account tokens (`--service-account-key-file`).
    pub service_account_key: Option<Arc<crate::jwt::SigningKey>>,
    /// Every answered resource request, for tests.
    pub audit: Arc<AuditLog>,
    /// Injected failures and delays, for tests.
    pub faults: Arc<Faults>,
    /// How the server behaves.
    pub options: ApiOptions,
}

/// A request aimed at a resource: `/api/v1/namespaces/ns/pods/name/status` and the like.
#[derive(Debug)]
pub struct Target {
    /// The resource, found by group, version and plural.
    pub resource: &'static ResourceType,
    /// The namespace of a namespaced request; `None` for cluster-scoped or all-namespaces requests.
    pub namespace: Option<String>,
    /// The object's name; `None` for a collection request.
    pub name: Option<String>,
    /// `status`, `scale`, `binding`, ... after the name.
    pub subresource: Option<String>,
}

impl Handler for ApiServer {
    fn handle(&self, request: &Request, response: &mut ResponseWriter<'_>) -> io::Result<()> {
        if let Some(error) = self.faults.before_request(&request.path) {
            return send_error(response, &error);
        }
        let authorization = request.header("Authorization");
        let legacy = || {
            let key = self.service_account_key.as_ref()?;
            auth::authenticate_legacy_token(authorization, key.public_key(), &self.store)
        };
        let bootstrap = || auth::authenticate_bootstrap_token(authorization, &self.store);
        let user = match auth::authenticate(&request.peer_certificates, authorization, &self.tokens)
            .or_else(legacy)
            .or_else(bootstrap)
        {
            Some(user) => user,
            None if self.options.anonymous_is_admin => UserInfo::new("system:admin", &["system:masters"]),
            // Credentials that do not authenticate are refused; none at all is anonymous.
            None if authorization.is_some() => return send_error(response, &ApiError::unauthorized()),
            None => crate::sandbox::auth::rbac::anonymous_user(),
        };
        // Authorization (RBAC when on), after authentication as in kube-apiserver's chain.
        if let Err(error) = self.authorize(&user, request) {
            return send_error(response, &error);
        }
        if let Some(error) = self.faults.unavailable_api_error(request.path.trim_end_matches('/')) {
            return send_error(response, &error);
        }
        if let Some((code, body)) = aggregated::answer(request, &self.store) {
            return send_json_with(response, code, &body, &[]);
        }
        if let Some(answer) = discovery::answer(request, &self.faults.unavailable_apis()) {
            return match answer {
                Ok((content_type, body)) => response.send(200, &[("Content-Type", content_type)], body.as_bytes()),
                Err(e) => send_error(response, &e),
            };
        }
        let target = match parse_target(&request.path) {
            Ok(target) => target,
            Err(e) => return send_error(response, &e),
        };
        let audit = |code: u16, answer: Option<&Value>| self.audit(request, &target, &user, code, answer);
        let watching = is_watch(request, &target);
        // A collection GET or DELETE (`deletecollection`) answers with a list.
        let is_list = matches!(request.method.as_str(), "GET" | "DELETE") && target.name.is_none() && !watching;
        let rendering = match metadata::negotiate(request.header("Accept"), is_list) {
            Ok(rendering) => rendering,
            Err(e) => {
                audit(e.code, None);
                return send_error(response, &e);
            }
        };
        if watching {
            audit(200, None);
            return watch::serve(self, request, &target, rendering, response);
        }
        let table = match rendering {
            metadata::Rendering::Table { v1beta1 } => match table::TableRequest::from_request(request, v1beta1) {
                Ok(table) => Some(table),
                Err(e) => {
                    audit(e.code, None);
                    return send_error(response, &e);
                }
            },
            _ => None,
        };
        typed::take_warnings();
        let answer = self.dispatch(request, &target, &user);
        match &answer {
            Ok((code, body)) => audit(*code, Some(body)),
            Err(e) => audit(e.code, None),
        }
        let warnings: Vec<String> = typed::take_warnings().iter().map(|w| warning_header(w)).collect();
        match answer {
            Ok((code, body)) => {
                let body = match table {
                    Some(table) => table.render(target.resource, body, true, jiff::Timestamp::now()),
                    None => metadata::render(rendering, body),
                };
                send_json_with(response, code, &body, &warnings)
            }
            Err(e) => send_error(response, &e),
        }
    }
}

fn is_watch(request: &Request, target: &Target) -> bool {
    request.method == "GET"
        && target.name.is_none()
        && request.query_param("watch").is_some_and(|w| matches!(w, "true" | "1" | "True"))
}

/// Splits a resource path into its parts.
pub fn parse_target(path: &str) -> ApiResult<Target> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(ApiError::page_not_found()),
    };
    let find = |plural: &str| resources::find(group, version, plural).ok_or_else(ApiError::page_not_found);
    let owned = |s: &&str| Some(s.to_string());
    let target = match rest {
        // The namespace object itself and its subresources.
        ["namespaces", name] if group.is_empty() => {
            Target { resource: find("namespaces")?, namespace: None, name: owned(name), subresource: None }
        }
        ["namespaces", name, sub @ ("status" | "finalize")] if group.is_empty() => {
            Target { resource: find("namespaces")?, namespace: None, name: owned(name), subresource: owned(sub) }
        }
        ["namespaces", ns, plural, tail @ ..] => {
            let resource = find(plural)?;
            if !resource.namespaced {
                return Err(ApiError::page_not_found());
            }
            let (name, subresource) = match tail {
                [] => (None, None),
                [name] => (owned(name), None),
                [name, sub] => (owned(name), owned(sub)),
                _ => return Err(ApiError::page_not_found()),
            };
            Target { resource, namespace: owned(ns), name, subresource }
        }
        [plural, tail @ ..] => {
            let resource = find(plural)?;
            let (name, subresource) = match tail {
                [] => (None, None),
                // Object access to a namespaced kind needs its namespace in the path.
                _ if resource.namespaced => return Err(ApiError::page_not_found()),
                [name] => (owned(name), None),
                [name, sub] => (owned(name), owned(sub)),
                _ => return Err(ApiError::page_not_found()),
            };
            Target { resource, namespace: None, name, subresource }
        }
        [] => return Err(ApiError::page_not_found()),
    };
    if let Some(sub) = &target.subresource
        && target.resource.subresource(sub).is_none()
    {
        return Err(ApiError::page_not_found());
    }
    Ok(target)
}

impl ApiServer {
    /// Records who asked for what, the answer's status code and, for an update, the
    /// resourceVersions it was based on and produced (see [`AuditLog`]).
    fn audit(&self, request: &Request, target: &Target, user: &UserInfo, code: u16, answer: Option<&Value>) {
        let text = |v: &Option<String>| v.clone().unwrap_or_default();
        let version = |object: &Value| {
            object.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default().to_string()
        };
        let (request_resource_version, response_resource_version) = if request.method == "PUT" {
            let sent = serde_json::from_slice::<Value>(&request.body).map(|body| version(&body)).unwrap_or_default();
            (sent, answer.map(version).unwrap_or_default())
        } else {
            Default::default()
        };
        self.audit.record(AuditEntry {
            user: user.name.clone(),
            verb: audit::verb(&request.method, target.name.is_some(), is_watch(request, target)).to_string(),
            resource: target.resource.plural.to_string(),
            subresource: text(&target.subresource),
            namespace: text(&target.namespace),
            name: text(&target.name),
            user_agent: request.header("User-Agent").unwrap_or_default().to_string(),
            forbidden: false,
            code,
            request_resource_version,
            response_resource_version,
        });
    }

    fn dispatch(&self, request: &Request, target: &Target, user: &UserInfo) -> ApiResult<(u16, Value)> {
        let resource = target.resource;
        let verbs = match &target.subresource {
            Some(sub) => resource.subresource(sub).map_or(Verbs::All, |s| s.verbs),
            None => resource.verbs,
        };
        let method = request.method.as_str();
        let allowed = match verbs {
            Verbs::All => true,
            Verbs::AllButDeleteCollection => !(method == "DELETE" && target.name.is_none()),
            Verbs::GetUpdate => matches!(method, "GET" | "PUT" | "PATCH"),
            Verbs::Update => method == "PUT",
            Verbs::Create => method == "POST",
        };
        if !allowed {
            return Err(ApiError::method_not_allowed());
        }
        if let Some(sub) = target.subresource.as_deref()
            && sub != "status"
        {
            return subresources::handle(self, request, target, sub, user);
        }
        if resource.verbs == Verbs::Create {
            return subresources::create_only(self, request, target, user);
        }
        match (method, &target.name) {
            ("GET", Some(name)) => get::get(self, target, name).map(|o| (200, o)),
            ("GET", None) => list::list(self, request, target).map(|l| (200, l)),
            ("POST", None) => create::create(self, request, target, user),
            ("PUT", Some(name)) => update::update(self, request, target, name, user),
            ("PATCH", Some(name)) => handlers::patch::patch(self, request, target, name, user),
            ("DELETE", Some(name)) => delete::delete(self, request, target, name, user),
            ("DELETE", None) => delete::delete_collection(self, request, target, user),
            _ => Err(ApiError::method_not_allowed()),
        }
    }
}

/// The name of the kind as `kubectl` shows it in messages (`deployment.apps/web`).
pub fn display_name(resource: &ResourceType, name: &str) -> String {
    format!("{}/{name}", qualified(resource))
}
