//! The REST layer: routes requests to resources and applies kube-apiserver's semantics to
//! them — metadata, optimistic concurrency, the status subresource, finalizers and graceful
//! deletion, admission — on top of the [`Store`].

use std::io;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::admission::{self, AdmissionContext, Operation};
use super::audit::{self, AuditEntry, AuditLog};
use super::auth::{self, Tokens, UserInfo};
use super::faults::Faults;
use super::objects::{self, finalizers, is_deleting, name_of, set_finalizers, should_remove};
use super::resources::{self, ResourceType, Verbs};
use super::selectors::FieldSelector;
use super::services::{self, ServiceRange};
use super::status::{ApiError, ApiResult, qualified};
use super::store::{Store, Txn};
use super::typed::{self, FieldValidation};
use super::{convert, defaults, discovery, metadata, patch, protobuf, subresources, table, watch};
use crate::apimachinery::field::Error as FieldError;
use crate::apimachinery::labels::Selector;
use crate::server::http::{Handler, Request, ResponseWriter};

mod validation;

/// Settings of the API layer.
#[derive(Debug, Clone)]
pub struct ApiOptions {
    /// Serve requests without credentials as a cluster admin (the plain-HTTP test mode).
    pub anonymous_is_admin: bool,
    /// How often watches that asked for bookmarks get one.
    pub bookmark_interval: Duration,
    /// `--service-cluster-ip-range`: where Services get their cluster IPs.
    pub service_range: ServiceRange,
    /// The `WatchList` feature gate (`sendInitialEvents` on watches); off in v1.33.
    pub watch_list: bool,
    /// `--authorization-mode=Node,RBAC`: authorize every request with RBAC (see `rbac.rs`);
    /// off, every authenticated request is allowed (`AlwaysAllow`).
    pub rbac: bool,
}

impl Default for ApiOptions {
    fn default() -> Self {
        ApiOptions {
            anonymous_is_admin: false,
            bookmark_interval: Duration::from_secs(60),
            service_range: ServiceRange::default(),
            watch_list: false,
            rbac: false,
        }
    }
}

/// The API server's request handler.
pub struct ApiServer {
    pub store: Arc<Store>,
    pub tokens: Arc<Tokens>,
    /// Signs TokenRequest tokens (kube-apiserver's `--service-account-signing-key-file`) and
    /// verifies legacy service-account tokens (`--service-account-key-file`).
    pub service_account_key: Option<Arc<crate::jwt::SigningKey>>,
    pub audit: Arc<AuditLog>,
    pub faults: Arc<Faults>,
    pub options: ApiOptions,
}

/// A request aimed at a resource: `/api/v1/namespaces/ns/pods/name/status` and the like.
#[derive(Debug)]
pub struct Target {
    pub resource: &'static ResourceType,
    pub namespace: Option<String>,
    pub name: Option<String>,
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
        let user = match auth::authenticate(&request.peer_certificates, authorization, &self.tokens).or_else(legacy) {
            Some(user) => user,
            None if self.options.anonymous_is_admin => UserInfo::new("system:admin", &["system:masters"]),
            // Credentials that do not authenticate are refused; none at all is anonymous.
            None if authorization.is_some() => return send_error(response, &ApiError::unauthorized()),
            None => super::rbac::anonymous_user(),
        };
        // Authorization (RBAC when on), after authentication as in kube-apiserver's chain.
        if let Err(error) = self.authorize(&user, request) {
            return send_error(response, &error);
        }
        if let Some(error) = self.faults.unavailable_api_error(request.path.trim_end_matches('/')) {
            return send_error(response, &error);
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

pub fn send_json(response: &mut ResponseWriter<'_>, code: u16, body: &Value) -> io::Result<()> {
    send_json_with(response, code, body, &[])
}

/// A JSON answer with `Warning` headers (already formatted, see [`warning_header`]).
fn send_json_with(response: &mut ResponseWriter<'_>, code: u16, body: &Value, warnings: &[String]) -> io::Result<()> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut headers = vec![("Content-Type", "application/json"), ("Cache-Control", "no-cache, private")];
    headers.extend(warnings.iter().map(|w| ("Warning", w.as_str())));
    response.send(code, &headers, &bytes)
}

/// An RFC 7234 warning as kube-apiserver writes it: `299 - "<text>"`, the text escaped.
fn warning_header(text: &str) -> String {
    format!("299 - \"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

pub fn send_error(response: &mut ResponseWriter<'_>, error: &ApiError) -> io::Result<()> {
    let bytes = serde_json::to_vec(&error.status).unwrap_or_default();
    let retry = error.retry_after.map(|s| s.to_string());
    let mut headers = vec![("Content-Type", "application/json"), ("Cache-Control", "no-cache, private")];
    if let Some(seconds) = &retry {
        headers.push(("Retry-After", seconds));
    }
    response.send(error.code, &headers, &bytes)
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
            ("GET", Some(name)) => self.get(target, name).map(|o| (200, o)),
            ("GET", None) => self.list(request, target).map(|l| (200, l)),
            ("POST", None) => self.create(request, target, user),
            ("PUT", Some(name)) => self.update(request, target, name, user),
            ("PATCH", Some(name)) => self.patch(request, target, name, user),
            ("DELETE", Some(name)) => self.delete(request, target, name, user),
            ("DELETE", None) => self.delete_collection(request, target, user),
            _ => Err(ApiError::method_not_allowed()),
        }
    }

    fn get(&self, target: &Target, name: &str) -> ApiResult<Value> {
        let resource = target.resource;
        let ns = target.namespace.as_deref().unwrap_or_default();
        let object =
            self.store.get(resource.storage_key(), ns, name).ok_or_else(|| ApiError::not_found(resource, name))?;
        let object = convert::to_external(resource, &object);
        Ok(match target.subresource.as_deref() {
            Some("status") | None => object,
            Some(_) => unreachable!("other subresources are routed to subresources::handle"),
        })
    }

    fn list(&self, request: &Request, target: &Target) -> ApiResult<Value> {
        let resource = target.resource;
        validate_list_options(request, false, self.options.watch_list)?;
        let filter = ObjectFilter::from_request(request, resource)?;
        // A list at resourceVersion "0" is served from the watch cache, which does not page.
        let from_cache = request.query_param("resourceVersion") == Some("0");
        let limit =
            request.query_param("limit").and_then(|l| l.parse::<usize>().ok()).filter(|l| *l > 0 && !from_cache);
        let continue_token = request.query_param("continue").filter(|c| !c.is_empty());
        let ns = target.namespace.as_deref();
        let (objects, revision, after) = match continue_token {
            Some(token) => {
                let (revision, after) = decode_continue(token)?;
                if request.query_param("resourceVersion").is_some_and(|v| !v.is_empty() && v != "0") {
                    return Err(ApiError::bad_request(
                        "specifying resource version is not allowed when using continue",
                    ));
                }
                let (objects, revision) = match revision {
                    Some(revision) => {
                        let objects = self
                            .store
                            .list_at(resource.storage_key(), ns, revision)
                            .map_err(|_| inconsistent_continue(&after))?;
                        (objects, revision)
                    }
                    // A token from an expired-continue answer: the rest of the list, now.
                    None => self.store.list(resource.storage_key(), ns),
                };
                (objects, revision, Some(after))
            }
            None => self.list_at_requested_version(request, resource, ns, limit.is_some())?,
        };
        let mut items = Vec::new();
        let mut next_after = None;
        let mut remaining = 0usize;
        for object in objects {
            let key = format!("{}/{}", objects::namespace_of(&object), name_of(&object));
            if after.as_ref().is_some_and(|a| key.as_str() <= a.as_str()) || !filter.matches(&object) {
                continue;
            }
            if limit.is_some_and(|l| items.len() >= l) {
                remaining += 1;
                continue;
            }
            next_after = Some(key);
            items.push(convert::to_list_item(resource, &object));
        }
        let mut metadata = json!({"resourceVersion": revision.to_string()});
        if remaining > 0 {
            metadata["continue"] =
                encode_continue(i64::try_from(revision).unwrap_or(i64::MAX), next_after.as_deref().unwrap_or_default())
                    .into();
            if filter.is_everything() {
                metadata["remainingItemCount"] = remaining.into();
            }
        }
        Ok(json!({
            "kind": format!("{}List", resource.kind),
            "apiVersion": resource.group_version(),
            "metadata": metadata,
            "items": items,
        }))
    }

    /// Honours `resourceVersion` / `resourceVersionMatch` of a first list page.
    fn list_at_requested_version(
        &self,
        request: &Request,
        resource: &ResourceType,
        ns: Option<&str>,
        paged: bool,
    ) -> ApiResult<(Vec<Arc<Value>>, u64, Option<String>)> {
        let storage = resource.storage_key();
        let requested = request.query_param("resourceVersion").filter(|v| !v.is_empty());
        let matching = request.query_param("resourceVersionMatch").filter(|v| !v.is_empty());
        let parse =
            |v: &str| v.parse::<u64>().map_err(|_| ApiError::bad_request(format!("invalid resource version: {v:?}")));
        // The combinations `validate_list_options` lets through. A paged list at a
        // resourceVersion without a match is an exact one (etcd's legacy case).
        let legacy_exact = paged && matching.is_none() && requested.is_some_and(|v| v != "0");
        match (requested, matching) {
            (Some(v), Some("Exact")) | (Some(v), None) if legacy_exact || matching == Some("Exact") => {
                let revision = parse(v)?;
                let current = self.store.revision();
                if revision > current {
                    return Err(too_large(revision, current));
                }
                let objects = self
                    .store
                    .list_at(storage, ns, revision)
                    .map_err(|e| ApiError::expired(format!("too old resource version: {revision} ({})", e.oldest)))?;
                Ok((objects, revision, None))
            }
            (Some(v), None | Some("NotOlderThan")) => {
                let revision = parse(v)?;
                let (objects, current) = self.store.list(storage, ns);
                if revision > current {
                    return Err(too_large(revision, current));
                }
                Ok((objects, current, None))
            }
            _ => {
                let (objects, current) = self.store.list(storage, ns);
                Ok((objects, current, None))
            }
        }
    }

    fn create(&self, request: &Request, target: &Target, user: &UserInfo) -> ApiResult<(u16, Value)> {
        let resource = target.resource;
        let mut object = convert::to_internal(resource, body_json(request)?)?;
        check_kind(resource, &object)?;
        check_namespace(target, &object)?;
        convert::storage_type(resource, &mut object);
        let object = typed::normalize(resource, object, field_validation(request)?)?;
        if has_resource_version(&object) && !is_dry_run(request)? {
            return Err(resource_version_on_create());
        }
        let dry_run = is_dry_run(request)?;
        let stored = self.store.write(|txn| self.create_in(txn, target, object, user, dry_run))?;
        Ok((201, convert::to_external(resource, &stored)))
    }

    fn update(&self, request: &Request, target: &Target, name: &str, user: &UserInfo) -> ApiResult<(u16, Value)> {
        let resource = target.resource;
        let mut object = convert::to_internal(resource, body_json(request)?)?;
        check_kind(resource, &object)?;
        check_namespace(target, &object)?;
        convert::storage_type(resource, &mut object);
        let object = typed::normalize(resource, object, field_validation(request)?)?;
        if name_of(&object) != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                name_of(&object)
            )));
        }
        let dry_run = is_dry_run(request)?;
        let ns = target.namespace.as_deref().unwrap_or_default();
        let (code, stored) = self.store.write(|txn| {
            let Some(old) = txn.get(resource.storage_key(), ns, name) else {
                // Creating through an update needs no resourceVersion; one that expects an
                // existing object finds none.
                if resource.create_on_update() && target.subresource.is_none() && !has_resource_version(&object) {
                    return self.create_in(txn, target, object.clone(), user, dry_run).map(|o| (201, o));
                }
                return Err(ApiError::not_found(resource, name));
            };
            check_resource_version(resource, name, &old, &object)?;
            let updated = write_update(txn, target, &old, object.clone(), user, dry_run)?;
            Ok((200, updated))
        })?;
        Ok((code, convert::to_external(resource, &stored)))
    }

    /// Creates an object within a transaction: server-set metadata, defaults, the initial
    /// status, NamespaceLifecycle, admission, allocations. Used by POST and by PUT for kinds
    /// that allow create-on-update.
    fn create_in(
        &self,
        txn: &mut Txn<'_>,
        target: &Target,
        mut object: Value,
        user: &UserInfo,
        dry_run: bool,
    ) -> ApiResult<Value> {
        let resource = target.resource;
        let ns = target.namespace.as_deref();
        objects::prepare_create(resource, &mut object, ns)?;
        subresources::csr_prepare_for_create(resource, &mut object, user);
        defaults::apply(resource, &mut object);
        reset_status_on_create(resource, &mut object);
        let name = name_of(&object).to_string();
        if resource.namespaced {
            check_namespace_accepts(txn, resource, ns.unwrap_or_default(), &name)?;
        }
        let ctx = AdmissionContext {
            resource,
            subresource: None,
            namespace: ns.unwrap_or_default(),
            operation: Operation::Create,
            user,
            old: None,
            dry_run,
        };
        admission::admit(&ctx, &mut object, txn)?;
        validation::validate_create(resource, &object)?;
        set_qos_class(resource, &mut object);
        if txn.get(resource.storage_key(), ns.unwrap_or_default(), &name).is_some() {
            return Err(ApiError::already_exists(resource, &name));
        }
        if is_service(resource) {
            services::allocate(resource, &mut object, txn, self.options.service_range)?;
        }
        if !dry_run {
            object["metadata"]["resourceVersion"] = txn.next_revision().to_string().into();
            txn.put(resource.storage_key(), object.clone());
        }
        Ok(object)
    }

    fn patch(&self, request: &Request, target: &Target, name: &str, user: &UserInfo) -> ApiResult<(u16, Value)> {
        let resource = target.resource;
        let content_type = request.header("Content-Type").unwrap_or_default();
        let content_type = content_type.split(';').next().unwrap_or_default().trim().to_string();
        let document = body_json(request)?;
        let dry_run = is_dry_run(request)?;
        let validation = field_validation(request)?;
        let ns = target.namespace.as_deref().unwrap_or_default();
        let stored = self.store.write(|txn| {
            let old = txn.get(resource.storage_key(), ns, name).ok_or_else(|| ApiError::not_found(resource, name))?;
            let external = convert::to_external(resource, &old);
            let patched = apply_patch(resource, &content_type, &external, &document)?;
            let mut patched = convert::to_internal(resource, patched)?;
            convert::storage_type(resource, &mut patched);
            let patched = typed::normalize_patched(resource, patched, validation)?;
            if name_of(&patched) != name {
                return Err(ApiError::bad_request(
                    "metadata.name: Invalid value: the name may not be changed by a patch",
                ));
            }
            // A resourceVersion in the patch is a precondition; otherwise the patch applies
            // to the current object.
            check_resource_version(resource, name, &old, &patched)?;
            write_update(txn, target, &old, patched, user, dry_run)
        })?;
        Ok((200, convert::to_external(resource, &stored)))
    }

    fn delete(&self, request: &Request, target: &Target, name: &str, user: &UserInfo) -> ApiResult<(u16, Value)> {
        let resource = target.resource;
        let options = DeleteOptions::from_request(request)?;
        let ns = target.namespace.as_deref().unwrap_or_default();
        let outcome = self.store.write(|txn| delete_in(txn, resource, ns, name, &options, user))?;
        Ok(deleted_answer(resource, outcome))
    }

    fn delete_collection(&self, request: &Request, target: &Target, user: &UserInfo) -> ApiResult<(u16, Value)> {
        let resource = target.resource;
        let filter = ObjectFilter::from_request(request, resource)?;
        let options = DeleteOptions::from_request(request)?;
        let ns = target.namespace.as_deref();
        let (objects, revision) = self.store.list(resource.storage_key(), ns);
        // As the registry's `DeleteCollection`, the answer is the list as it was read before
        // the deletions (objects without deletion marks), at that list's revision.
        let mut items = Vec::new();
        for object in objects.iter().filter(|o| filter.matches(o)) {
            let (ns, name) = (objects::namespace_of(object), name_of(object));
            match self.store.write(|txn| delete_in(txn, resource, ns, name, &options, user)) {
                Ok(_) | Err(ApiError { code: 404, .. }) => items.push(convert::to_list_item(resource, object)),
                Err(e) => return Err(e),
            }
        }
        Ok((
            200,
            json!({
                "kind": format!("{}List", resource.kind),
                "apiVersion": resource.group_version(),
                "metadata": {"resourceVersion": revision.to_string()},
                "items": items,
            }),
        ))
    }
}

/// Writes an update of `old` to `new` within a transaction: keeps what the request may not
/// change, bumps the generation on spec changes, runs admission and removes the object once
/// nothing holds its deletion any longer. Returns the object as stored.
pub fn write_update(
    txn: &mut Txn<'_>,
    target: &Target,
    old: &Value,
    new: Value,
    user: &UserInfo,
    dry_run: bool,
) -> ApiResult<Value> {
    let resource = target.resource;
    let name = name_of(old).to_string();
    let status_only = target.subresource.as_deref() == Some("status");
    check_uid_unchanged(resource, old, &new)?;
    let mut object = merge_for_update(resource, old, new, status_only);
    preserve_server_metadata(old, &mut object);
    let errors = objects::metadata_errors(&object);
    if !status_only && !errors.is_empty() {
        return Err(ApiError::invalid(resource, &name, &errors));
    }
    if is_service(resource) {
        keep_allocations(old, &mut object);
    }
    check_finalizers_while_deleting(resource, &name, old, &object)?;
    if !status_only {
        defaults::apply(resource, &mut object);
        defaults::prepare_update(resource, old, &mut object);
        subresources::csr_prepare_for_update(resource, old, &mut object);
        validation::validate_update(resource, old, &mut object)?;
    } else {
        subresources::populate_condition_timestamps(resource, old, &mut object);
        validation::validate_status_update(resource, old, &object)?;
    }
    // `endpointSliceStrategy.PrepareForUpdate` also counts label changes.
    let labels_changed = resource.kind == "EndpointSlice" && object["metadata"]["labels"] != old["metadata"]["labels"];
    if resource.tracks_generation && (labels_changed || objects::spec_part(&object) != objects::spec_part(old)) {
        let generation = old["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
        object["metadata"]["generation"] = generation.into();
    }
    let ctx = AdmissionContext {
        resource,
        subresource: target.subresource.as_deref(),
        namespace: objects::namespace_of(old),
        operation: Operation::Update,
        user,
        old: Some(old),
        dry_run,
    };
    admission::admit(&ctx, &mut object, txn)?;
    status_zero_values(resource, &mut object);
    let mut unchanged = object.clone();
    unchanged["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
    if unchanged == *old {
        // A no-op update is not written and keeps its resourceVersion, as in kube-apiserver.
        return Ok(old.clone());
    }
    if dry_run {
        return Ok(object);
    }
    let revision = txn.next_revision().to_string();
    object["metadata"]["resourceVersion"] = revision.into();
    if should_remove(&object) {
        txn.remove(resource.storage_key(), objects::namespace_of(old), &name);
    } else {
        txn.put(resource.storage_key(), object.clone());
    }
    Ok(object)
}

/// The new object of an update: a status update changes only `status`; a main-resource update
/// of a kind with a status subresource keeps the old `status`.
fn merge_for_update(resource: &ResourceType, old: &Value, new: Value, status_only: bool) -> Value {
    if status_only {
        let mut object = old.clone();
        object["status"] = new.get("status").cloned().unwrap_or(Value::Null);
        if object["status"].is_null() {
            object.as_object_mut().map(|m| m.remove("status"));
        }
        if status_update_keeps_metadata(resource) && new["metadata"].is_object() {
            // Only spec and labels are reset; the server's own fields are restored later.
            object["metadata"] = new["metadata"].clone();
            match old["metadata"].get("labels") {
                Some(labels) => object["metadata"]["labels"] = labels.clone(),
                None => {
                    objects::metadata_mut(&mut object).remove("labels");
                }
            }
        }
        return object;
    }
    let mut object = new;
    if resource.has_status() {
        match old.get("status") {
            Some(status) => object["status"] = status.clone(),
            None => {
                object.as_object_mut().map(|m| m.remove("status"));
            }
        }
    }
    object
}

/// Kinds whose status strategy resets only `spec` and `metadata.labels`, so that a status
/// update also writes the other metadata (kube-apiserver's `deploymentStatusStrategy`; the
/// Deployment controller records the revision annotation that way).
fn status_update_keeps_metadata(resource: &ResourceType) -> bool {
    resource.group == "apps" && resource.plural == "deployments"
}

fn is_service(resource: &ResourceType) -> bool {
    resource.group.is_empty() && resource.plural == "services"
}

/// An update that leaves out the allocated cluster IPs or node ports keeps them (the Service
/// registry's `patchAllocatedValues`).
fn keep_allocations(old: &Value, object: &mut Value) {
    for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        if object["spec"][field].is_null() && !old["spec"][field].is_null() {
            object["spec"][field] = old["spec"][field].clone();
        }
    }
    let old_ports = old["spec"]["ports"].as_array().cloned().unwrap_or_default();
    if let Some(ports) = object["spec"]["ports"].as_array_mut() {
        for port in ports.iter_mut().filter(|p| p["nodePort"].is_null()) {
            let same = old_ports.iter().find(|o| o["port"] == port["port"] && o["protocol"] == port["protocol"]);
            if let Some(node_port) = same.map(|o| o["nodePort"].clone()).filter(|n| !n.is_null()) {
                port["nodePort"] = node_port;
            }
        }
    }
}

/// `ValidateObjectMetaUpdate`: a uid sent with an update must be the object's.
fn check_uid_unchanged(resource: &ResourceType, old: &Value, new: &Value) -> ApiResult<()> {
    match new["metadata"]["uid"].as_str().filter(|uid| !uid.is_empty()) {
        Some(uid) if Some(uid) != old["metadata"]["uid"].as_str() => Err(ApiError::invalid(
            resource,
            name_of(old),
            &[FieldError::invalid_json("metadata.uid", &json!(uid), "field is immutable")],
        )),
        _ => Ok(()),
    }
}

/// uid, creationTimestamp, deletion fields and generation are the server's.
fn preserve_server_metadata(old: &Value, object: &mut Value) {
    let old_meta = &old["metadata"];
    let meta = objects::metadata_mut(object);
    for key in
        ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation", "namespace"]
    {
        match old_meta.get(key) {
            Some(v) => meta.insert(key.into(), v.clone()),
            None => meta.remove(key),
        };
    }
    meta.remove("managedFields");
    meta.remove("selfLink");
}

fn check_finalizers_while_deleting(resource: &ResourceType, name: &str, old: &Value, new: &Value) -> ApiResult<()> {
    if !is_deleting(old) {
        return Ok(());
    }
    let before = finalizers(old);
    let mut added: Vec<String> = finalizers(new).into_iter().filter(|f| !before.contains(f)).collect();
    if added.is_empty() {
        return Ok(());
    }
    // `sets.String.List()`: sorted, without duplicates; shown with Go's `%#v`.
    added.sort();
    added.dedup();
    let error = FieldError::forbidden(
        "metadata.finalizers",
        &format!(
            "no new finalizers can be added if the object is being deleted, found new finalizers {}",
            validation::go_string_slice(Some(&added))
        ),
    );
    // `ValidateObjectMetaUpdate` runs twice, in `rest.BeforeUpdate` and in the kind's own
    // `ValidateUpdate`: the cause is listed twice (the message names it once).
    Err(ApiError::invalid(resource, name, &[error.clone(), error]))
}

fn check_resource_version(resource: &ResourceType, name: &str, old: &Value, new: &Value) -> ApiResult<()> {
    match new["metadata"]["resourceVersion"].as_str().filter(|v| !v.is_empty()) {
        Some(v) if Some(v) != old["metadata"]["resourceVersion"].as_str() => Err(ApiError::modified(resource, name)),
        _ => Ok(()),
    }
}

fn has_resource_version(object: &Value) -> bool {
    object["metadata"]["resourceVersion"].as_str().is_some_and(|v| !v.is_empty())
}

/// etcd3's store refuses to create an object that carries a resourceVersion; the error is not
/// a `Status`, so kube-apiserver answers 500 with no reason.
fn resource_version_on_create() -> ApiError {
    let mut e = ApiError::new(500, "", "resourceVersion should not be set on objects to be created", None);
    e.status.as_object_mut().map(|s| s.remove("reason"));
    e
}

/// NamespaceLifecycle: no new objects in a namespace that is missing or being deleted.
fn check_namespace_accepts(txn: &Txn<'_>, resource: &ResourceType, ns: &str, name: &str) -> ApiResult<()> {
    let Some(namespace) = txn.get("namespaces", "", ns) else {
        let namespaces = resources::find("", "v1", "namespaces").expect("namespaces are served");
        return Err(ApiError::not_found(namespaces, ns));
    };
    if is_deleting(&namespace) || namespace["status"]["phase"] == "Terminating" {
        let mut error = ApiError::forbidden(
            resource,
            name,
            &format!("unable to create new content in namespace {ns} because it is being terminated"),
        );
        // The cause clients test with `HasStatusCause(err, NamespaceTerminatingCause)`.
        let cause = json!({"reason": "NamespaceTerminating", "message": format!("namespace {ns} is being terminated"),
            "field": "metadata.namespace"});
        error.status["details"]["causes"] = json!([cause]);
        return Err(error);
    }
    Ok(())
}

/// What kube-apiserver's create strategies do to `status`: most kinds start with an empty
/// status; nodes keep theirs; a few get an initial phase.
fn reset_status_on_create(resource: &ResourceType, object: &mut Value) {
    if !resource.has_status() || (resource.group.is_empty() && resource.plural == "nodes") {
        return;
    }
    let initial = match (resource.group, resource.plural) {
        ("", "namespaces") => json!({"phase": "Active"}),
        // qosClass is set after admission (LimitRanger may add resources).
        ("", "pods") => json!({"phase": "Pending"}),
        ("", "persistentvolumeclaims" | "persistentvolumes") => json!({"phase": "Pending"}),
        _ => {
            object.as_object_mut().map(|m| m.remove("status"));
            status_zero_values(resource, object);
            return;
        }
    };
    object["status"] = initial;
}

/// The status fields Go's JSON encoding always writes for a kind: its status is a struct, not a
/// pointer, so an empty one reads back as `status: {}`, and fields without `omitempty` as
/// zeros (`replicas: 0`). Filled in wherever missing, on every write.
fn status_zero_values(resource: &ResourceType, object: &mut Value) {
    let zeros = match (resource.group, resource.plural) {
        ("apps", "deployments") | ("batch", "jobs" | "cronjobs") | ("", "resourcequotas") => json!({}),
        ("certificates.k8s.io", "certificatesigningrequests") => json!({}),
        ("apps", "replicasets") | ("", "replicationcontrollers") => json!({"replicas": 0}),
        ("apps", "statefulsets") => json!({"replicas": 0, "availableReplicas": 0}),
        ("apps", "daemonsets") => {
            json!({"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0})
        }
        ("autoscaling", "horizontalpodautoscalers") => json!({"desiredReplicas": 0}),
        ("policy", "poddisruptionbudgets") => {
            json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0})
        }
        ("", "services") | ("networking.k8s.io", "ingresses") => json!({"loadBalancer": {}}),
        ("storage.k8s.io", "volumeattachments") => json!({"attached": false}),
        _ => return,
    };
    if !object["status"].is_object() {
        object["status"] = json!({});
    }
    for (field, zero) in zeros.as_object().expect("an object") {
        if object["status"][field].is_null() {
            object["status"][field] = zero.clone();
        }
    }
}

/// A new pod's `status.qosClass`, from its resources as admission left them.
fn set_qos_class(resource: &ResourceType, object: &mut Value) {
    if resource.group.is_empty() && resource.plural == "pods" {
        object["status"]["qosClass"] = defaults::pod_qos_class(object).into();
    }
}

/// The body's kind and apiVersion, checked as the create and update handlers' decoding does:
/// another kind fails to convert into the resource's (`transformDecodeError`), another version
/// of the same kind is refused by name.
fn check_kind(resource: &ResourceType, object: &Value) -> ApiResult<()> {
    let kind = object["kind"].as_str().unwrap_or_default();
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    if !kind.is_empty() && kind != resource.kind {
        let version = api_version.rsplit('/').next().unwrap_or_default();
        let why = match resources::by_kind(api_version, kind) {
            Some(_) => {
                // Go's type names: the external `v1.Secret` into the internal `core.ConfigMap`.
                let internal = match resource.group.split('.').next().unwrap_or_default() {
                    "" | "events" => "core",
                    group => group,
                };
                format!("converting ({version}.{kind}) to ({internal}.{}): unknown conversion", resource.kind)
            }
            None => format!(
                "no kind \"{kind}\" is registered for version \"{api_version}\" in scheme \"pkg/api/legacyscheme/scheme.go:30\""
            ),
        };
        return Err(ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {}: {why}",
            resource.kind
        )));
    }
    if !api_version.is_empty() && api_version != resource.group_version() {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            resource.group_version()
        )));
    }
    Ok(())
}

fn check_namespace(target: &Target, object: &Value) -> ApiResult<()> {
    let in_body = objects::namespace_of(object);
    match target.namespace.as_deref() {
        Some(ns) if !in_body.is_empty() && in_body != ns => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => Ok(()),
    }
}

fn body_json(request: &Request) -> ApiResult<Value> {
    if request.body.is_empty() {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    let content_type = request.header("Content-Type").unwrap_or("application/json");
    if protobuf::is_protobuf(Some(content_type)) {
        return protobuf::decode_body(&request.body).map_err(ApiError::bad_request);
    }
    let media_type = content_type.split(';').next().unwrap_or_default().trim();
    if !(media_type.is_empty() || media_type.ends_with("json") || media_type.ends_with("yaml")) {
        return Err(ApiError::unsupported_media_type(media_type));
    }
    if content_type.contains("yaml") {
        return serde_yaml_ng::from_slice(&request.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")));
    }
    serde_json::from_slice(&request.body)
        .map_err(|e| ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}")))
}

fn field_validation(request: &Request) -> ApiResult<FieldValidation> {
    FieldValidation::parse(request.query_param("fieldValidation"))
}

fn is_dry_run(request: &Request) -> ApiResult<bool> {
    match request.query_param("dryRun") {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => {
            Err(ApiError::bad_request(format!("dryRun: Unsupported value: {other:?}: supported values: \"All\"")))
        }
    }
}

fn apply_patch(resource: &ResourceType, content_type: &str, current: &Value, document: &Value) -> ApiResult<Value> {
    match content_type {
        "application/merge-patch+json" => Ok(patch::json_merge_patch(current, document)),
        "application/json-patch+json" => patch::json_patch(current, document).map_err(|e| {
            if e.starts_with("json: cannot unmarshal") {
                ApiError::bad_request(e)
            } else {
                ApiError::new(422, "Invalid", e, None)
            }
        }),
        "application/strategic-merge-patch+json" => {
            patch::strategic_merge_patch(current, document, &resource.group_version(), resource.kind)
                .map_err(strategic_error)
        }
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

/// The status kube-apiserver answers each strategic-merge-patch failure with.
fn strategic_error(message: String) -> ApiError {
    if message.starts_with("strategic merge patch is not supported") {
        ApiError::new(415, "UnsupportedMediaType", message, None)
    } else if message.starts_with("json: cannot unmarshal") || message.starts_with("invalid patch format") {
        ApiError::bad_request(message)
    } else if message.contains("lists of lists are not supported") {
        ApiError::new(422, "Invalid", message, None)
    } else {
        ApiError::internal(message)
    }
}

/// `ValidateListOptions` for a list or a watch, with the `WatchList` feature gate as configured:
/// 422 on `ListOptions.meta.k8s.io` (see [`validation::list_options`]).
pub fn validate_list_options(request: &Request, watch: bool, watch_list: bool) -> ApiResult<()> {
    validation::list_options(request, watch, watch_list)
}

pub fn too_large(requested: u64, current: u64) -> ApiError {
    let mut e = ApiError::new(
        504,
        "Timeout",
        format!("Too large resource version: {requested}, current: {current}"),
        Some(
            json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1}),
        ),
    );
    e.retry_after = Some(1);
    e
}

/// The text of a 410 for a continue token whose revision was compacted away.
const INCONSISTENT_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// etcd3's `handleCompactedErrorForPaging`: 410 Expired whose `metadata.continue` carries a
/// token (resourceVersion -1) that continues the list from the same key at the latest revision.
fn inconsistent_continue(after: &str) -> ApiError {
    let mut error = ApiError::expired(INCONSISTENT_CONTINUE);
    error.status["metadata"]["continue"] = encode_continue(-1, after).into();
    error
}

/// `storage.EncodeContinue`; a revision of -1 means "at the latest revision".
fn encode_continue(revision: i64, after: &str) -> String {
    use base64::Engine;
    let token = json!({"v": "meta.k8s.io/v1", "rv": revision, "start": format!("{after}\u{0}")});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

/// `storage.DecodeContinue` behind `ValidateListOptions`: the revision (`None`: the latest,
/// from a -1 token) and the key the list continues after; errors worded as kube-apiserver's
/// (`invalid continue token: continue key is not valid: …`).
fn decode_continue(token: &str) -> ApiResult<(Option<u64>, String)> {
    use base64::Engine;
    const INVALID: &str = "continue key is not valid";
    let bad = |why: String| ApiError::bad_request(format!("invalid continue token: {why}"));
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token).map_err(|e| {
        // Go's base64.CorruptInputError.
        let at = match e {
            base64::DecodeError::InvalidByte(at, _) | base64::DecodeError::InvalidLastSymbol(at, _) => at,
            _ => token.len() / 4 * 4,
        };
        bad(format!("{INVALID}: illegal base64 data at input byte {at}"))
    })?;
    let value: Value =
        serde_json::from_slice(&bytes).map_err(|e| bad(format!("{INVALID}: {}", go_json_error(&bytes, &e))))?;
    match value["v"].as_str().unwrap_or_default() {
        "meta.k8s.io/v1" => {}
        other => return Err(bad(format!("{INVALID}: server does not recognize this encoded version {other}"))),
    }
    let revision = match value["rv"].as_i64().unwrap_or(0) {
        0 => return Err(bad(format!("{INVALID}: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"))),
        rv if rv < 0 => None,
        rv => Some(rv as u64),
    };
    let start = value["start"].as_str().unwrap_or_default();
    if start.is_empty() {
        return Err(bad(format!("{INVALID}: encoded start key empty (version meta.k8s.io/v1)")));
    }
    Ok((revision, start.trim_end_matches('\u{0}').to_string()))
}

/// encoding/json's wording of a syntax error where it can be told from the first byte (the
/// usual case for a token that is not ours), else serde's.
fn go_json_error(bytes: &[u8], error: &serde_json::Error) -> String {
    match bytes.iter().find(|b| !b" \t\r\n".contains(b)) {
        None => "unexpected end of JSON input".to_string(),
        Some(&b) if !b"{[\"-0123456789tfn".contains(&b) => {
            let quoted = match b {
                b'\'' => "\\'".to_string(),
                b'"' => "\"".to_string(),
                0x20..=0x7e => (b as char).to_string(),
                _ => format!("\\u{b:04x}"),
            };
            format!("invalid character '{quoted}' looking for beginning of value")
        }
        _ => error.to_string(),
    }
}

/// Label, field and namespace filters of a list, watch or delete-collection.
pub struct ObjectFilter {
    labels: Option<Selector>,
    fields: Option<FieldSelector>,
}

impl ObjectFilter {
    pub fn from_request(request: &Request, resource: &ResourceType) -> ApiResult<ObjectFilter> {
        let labels = request
            .query_param("labelSelector")
            .filter(|s| !s.is_empty())
            .map(|s| Selector::parse(s).map_err(ApiError::bad_request))
            .transpose()?;
        let fields = request
            .query_param("fieldSelector")
            .filter(|s| !s.is_empty())
            .map(|s| FieldSelector::parse(s, resource).map_err(ApiError::bad_request))
            .transpose()?;
        Ok(ObjectFilter { labels, fields })
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.labels.as_ref().is_none_or(|l| l.matches_object(object))
            && self.fields.as_ref().is_none_or(|f| f.matches(object))
    }

    fn is_everything(&self) -> bool {
        self.labels.is_none() && self.fields.is_none()
    }
}

/// How a delete was asked for.
#[derive(Debug, Default)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub propagation_policy: Option<String>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub dry_run: bool,
}

impl DeleteOptions {
    fn from_request(request: &Request) -> ApiResult<DeleteOptions> {
        let body: Value = if request.body.is_empty() { json!({}) } else { body_json(request)? };
        let query_or_body = |query: &str, field: &str| -> Option<Value> {
            request.query_param(query).map(|v| v.into()).or_else(|| body.get(field).cloned().filter(|v| !v.is_null()))
        };
        let grace = match query_or_body("gracePeriodSeconds", "gracePeriodSeconds") {
            Some(Value::String(s)) => {
                Some(s.parse::<i64>().map_err(|_| ApiError::bad_request(format!("invalid gracePeriodSeconds {s:?}")))?)
            }
            Some(v) => v.as_i64(),
            None => None,
        };
        let policy =
            query_or_body("propagationPolicy", "propagationPolicy").and_then(|v| v.as_str().map(str::to_string));
        let orphan = query_or_body("orphanDependents", "orphanDependents")
            .map(|orphan| orphan.as_bool().unwrap_or_else(|| orphan.as_str() == Some("true")));
        validation::delete_options(policy.as_deref(), orphan.is_some())?;
        let policy = policy.or_else(|| orphan.map(|o| if o { "Orphan" } else { "Background" }.to_string()));
        let dry_run = body["dryRun"].as_array().is_some_and(|d| d.iter().any(|v| v == "All")) || is_dry_run(request)?;
        Ok(DeleteOptions {
            grace_period_seconds: grace,
            propagation_policy: policy,
            precondition_uid: body["preconditions"]["uid"].as_str().map(str::to_string),
            precondition_resource_version: body["preconditions"]["resourceVersion"].as_str().map(str::to_string),
            dry_run,
        })
    }
}

/// What a delete did.
pub enum DeleteOutcome {
    /// The object is gone; its last state.
    Removed(Value),
    /// The object stays, marked for deletion (finalizers or a grace period hold it).
    Marked(Value),
}

/// The namespaces NamespaceLifecycle admission never lets anyone delete.
const IMMORTAL_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// Deletes one object within a transaction, as kube-apiserver's `BeforeDelete` + graceful
/// deletion + garbage-collection finalizers.
pub fn delete_in(
    txn: &mut Txn<'_>,
    resource: &ResourceType,
    ns: &str,
    name: &str,
    options: &DeleteOptions,
    _user: &UserInfo,
) -> ApiResult<DeleteOutcome> {
    let storage = resource.storage_key();
    let old = txn.get(storage, ns, name).ok_or_else(|| ApiError::not_found(resource, name))?;
    check_delete_preconditions(resource, name, &old, options)?;
    let is_namespace = resource.group.is_empty() && resource.plural == "namespaces";
    if is_namespace && IMMORTAL_NAMESPACES.contains(&name) {
        // The NamespaceLifecycle admission plugin.
        return Err(ApiError::forbidden(resource, name, "this namespace may not be deleted"));
    }
    if is_namespace && is_deleting(&old) && old["spec"]["finalizers"].as_array().is_some_and(|f| !f.is_empty()) {
        // The namespace registry's `Delete`: while its content is purged, a second delete
        // answers with the namespace as it is.
        return Ok(DeleteOutcome::Marked((*old).clone()));
    }
    let mut object = (*old).clone();
    let grace = grace_period(resource, &object, options.grace_period_seconds);
    apply_propagation_policy(resource, &mut object, options.propagation_policy.as_deref());
    mark_deleting(&mut object, grace, is_namespace);
    if is_namespace {
        object["status"]["phase"] = "Terminating".into();
    }
    if options.dry_run {
        return Ok(DeleteOutcome::Marked(object));
    }
    object["metadata"]["resourceVersion"] = txn.next_revision().to_string().into();
    if should_remove(&object) {
        txn.remove(storage, ns, name);
        Ok(DeleteOutcome::Removed(object))
    } else {
        txn.put(storage, object.clone());
        Ok(DeleteOutcome::Marked(object))
    }
}

/// `rest.BeforeDelete`'s early precondition checks: 409 Conflict naming the object by its kind
/// (`GroupResource{Group: gvk.Group, Resource: gvk.Kind}`), as upstream does.
fn check_delete_preconditions(
    resource: &ResourceType,
    name: &str,
    old: &Value,
    options: &DeleteOptions,
) -> ApiResult<()> {
    let field = |key: &str| old["metadata"][key].as_str().unwrap_or_default().to_string();
    let why = if let Some(uid) = options.precondition_uid.as_ref().filter(|uid| **uid != field("uid")) {
        format!(
            "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
            field("uid")
        )
    } else if let Some(rv) =
        options.precondition_resource_version.as_ref().filter(|rv| **rv != field("resourceVersion"))
    {
        format!(
            "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
            field("resourceVersion")
        )
    } else {
        return Ok(());
    };
    let kind = if resource.group.is_empty() {
        resource.kind.to_string()
    } else {
        format!("{}.{}", resource.kind, resource.group)
    };
    let mut details = json!({"name": name, "kind": resource.kind});
    if !resource.group.is_empty() {
        details["group"] = resource.group.into();
    }
    Err(ApiError::new(
        409,
        "Conflict",
        format!("Operation cannot be fulfilled on {kind} \"{name}\": {why}"),
        Some(details),
    ))
}

/// Sets the deletion fields as `rest.BeforeDelete` and the store's `markAsDeleting` do. The first
/// delete stamps `deletionTimestamp` (now + grace) and the grace period, and bumps a tracked
/// generation (fencing controllers' in-flight writes); a later one may only shorten the grace
/// period, moving the timestamp with it. The namespace registry sets the timestamp alone.
fn mark_deleting(object: &mut Value, grace: i64, is_namespace: bool) {
    let meta = objects::metadata_mut(object);
    let Some(stamped) = meta.get("deletionTimestamp").and_then(Value::as_str) else {
        let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(grace);
        meta.insert("deletionTimestamp".into(), format_time(at).into());
        if !is_namespace {
            meta.insert("deletionGracePeriodSeconds".into(), grace.into());
        }
        if let Some(generation) = meta.get("generation").and_then(Value::as_i64).filter(|g| *g > 0) {
            meta.insert("generation".into(), (generation + 1).into());
        }
        return;
    };
    let current = meta.get("deletionGracePeriodSeconds").and_then(Value::as_i64).unwrap_or(0);
    if grace < current {
        if let Ok(at) = stamped.parse::<jiff::Timestamp>() {
            let moved = at - jiff::SignedDuration::from_secs(current) + jiff::SignedDuration::from_secs(grace);
            meta.insert("deletionTimestamp".into(), format_time(moved).into());
        }
        meta.insert("deletionGracePeriodSeconds".into(), grace.into());
    }
}

fn format_time(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Pods get a grace period while a kubelet may still run them; everything else is deleted at
/// once (finalizers permitting). A negative grace period counts as 1 second.
fn grace_period(resource: &ResourceType, object: &Value, requested: Option<i64>) -> i64 {
    if !(resource.group.is_empty() && resource.plural == "pods") {
        return 0;
    }
    let unscheduled = object["spec"]["nodeName"].as_str().unwrap_or_default().is_empty();
    let terminal = matches!(object["status"]["phase"].as_str(), Some("Succeeded" | "Failed"));
    if unscheduled || terminal {
        return 0;
    }
    let grace = requested.unwrap_or_else(|| object["spec"]["terminationGracePeriodSeconds"].as_i64().unwrap_or(30));
    if grace < 0 { 1 } else { grace }
}

/// `orphan` and `foregroundDeletion` finalizers, as kube-apiserver records the policy for the
/// garbage collector.
fn apply_propagation_policy(resource: &ResourceType, object: &mut Value, policy: Option<&str>) {
    let policy = policy.or_else(|| default_propagation(resource));
    let mut list = finalizers(object);
    let already_deleting = is_deleting(object);
    match policy {
        Some("Orphan") if !already_deleting || list.iter().any(|f| f == "foregroundDeletion") => {
            list.retain(|f| f != "foregroundDeletion");
            if !list.iter().any(|f| f == "orphan") {
                list.push("orphan".into());
            }
        }
        Some("Foreground") => {
            list.retain(|f| f != "orphan");
            if !list.iter().any(|f| f == "foregroundDeletion") {
                list.push("foregroundDeletion".into());
            }
        }
        Some("Background") => list.retain(|f| f != "orphan" && f != "foregroundDeletion"),
        _ => {}
    }
    set_finalizers(object, &list);
}

/// Kinds whose registry orphans dependents unless told otherwise: the strategies'
/// `DefaultGarbageCollectionPolicy` returns `OrphanDependents` for batch/v1 Jobs and v1
/// ReplicationControllers (the pre-garbage-collector behaviour); apps/v1 workloads and every
/// other kind default to deleting dependents (in the background: no finalizer).
fn default_propagation(resource: &ResourceType) -> Option<&'static str> {
    let legacy = matches!(
        (resource.group, resource.version, resource.plural),
        ("batch", "v1", "jobs") | ("", "v1", "replicationcontrollers")
    );
    legacy.then_some("Orphan")
}

fn deleted_answer(resource: &ResourceType, outcome: DeleteOutcome) -> (u16, Value) {
    match outcome {
        DeleteOutcome::Marked(object) => (200, convert::to_external(resource, &object)),
        DeleteOutcome::Removed(object) if resource.returns_deleted_object() => {
            (200, convert::to_external(resource, &object))
        }
        DeleteOutcome::Removed(object) => {
            let mut details =
                json!({"name": name_of(&object), "kind": resource.plural, "uid": object["metadata"]["uid"]});
            if !resource.group.is_empty() {
                details["group"] = resource.group.into();
            }
            (
                200,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}),
            )
        }
    }
}

/// The name of the kind as `kubectl` shows it in messages (`deployment.apps/web`).
pub fn display_name(resource: &ResourceType, name: &str) -> String {
    format!("{}/{name}", qualified(resource))
}
