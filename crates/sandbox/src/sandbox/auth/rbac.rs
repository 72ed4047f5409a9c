//! RBAC, as kube-apiserver's `--authorization-mode=Node,RBAC`: one engine that answers
//! SubjectAccessReviews (delegated authorization) and, when the sandbox runs with RBAC on,
//! authorizes every request (`ApiServer::authorize`). `system:masters` may do anything (the
//! superuser shortcut of the authorizer chain); anyone else what their (Cluster)RoleBindings
//! grant (plugin/pkg/auth/authorizer/rbac/rbac.go). The Node authorizer is approximated: a user
//! `system:node:<name>` in group `system:nodes` may do what the `system:node` ClusterRole allows,
//! without the Node authorizer's per-node graph restrictions.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::sandbox::apiserver::ApiServer;
use crate::sandbox::apiserver::audit::AuditEntry;
use crate::sandbox::apiserver::status::{ApiError, ApiResult};
use crate::sandbox::auth::UserInfo;
use crate::sandbox::storage::store::{Store, Txn};
use crate::server::http::Request;

/// Where the RBAC objects are read from: the store (requests) or a transaction (reviews).
pub trait Policy {
    /// The RBAC objects of `storage` (`roles`, `rolebindings`, ...) in `namespace`, or in all namespaces.
    fn objects(&self, storage: &str, namespace: Option<&str>) -> Vec<Arc<Value>>;
    /// One RBAC object, if it exists.
    fn object(&self, storage: &str, namespace: &str, name: &str) -> Option<Arc<Value>>;
}

impl Policy for Txn<'_> {
    fn objects(&self, storage: &str, namespace: Option<&str>) -> Vec<Arc<Value>> {
        self.list(storage, namespace)
    }
    fn object(&self, storage: &str, namespace: &str, name: &str) -> Option<Arc<Value>> {
        self.get(storage, namespace, name)
    }
}

impl Policy for Store {
    fn objects(&self, storage: &str, namespace: Option<&str>) -> Vec<Arc<Value>> {
        self.list(storage, namespace).0
    }
    fn object(&self, storage: &str, namespace: &str, name: &str) -> Option<Arc<Value>> {
        self.get(storage, namespace, name)
    }
}

/// What is being asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    /// The request verb (`get`, `list`, `create`, ...; the HTTP verb's lower case for non-resource requests).
    pub verb: String,
    /// The namespace; empty for cluster-scoped and non-resource requests.
    pub namespace: String,
    /// The API group; empty for the core group.
    pub group: String,
    /// The resource's plural.
    pub resource: String,
    /// The subresource; empty for none.
    pub subresource: String,
    /// The object's name; empty when the request names none.
    pub name: String,
    /// Set for non-resource requests such as `/metrics`.
    pub path: Option<String>,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may go ahead.
    pub allowed: bool,
    /// Why, when there is something to say (the `SubjectAccessReview` status's `reason`).
    pub reason: String,
}

impl Decision {
    /// The `SubjectAccessReview` status: `allowed`, and `reason` when not empty.
    pub fn to_status(&self) -> Value {
        if self.reason.is_empty() {
            json!({"allowed": self.allowed})
        } else {
            json!({"allowed": self.allowed, "reason": self.reason})
        }
    }
}

/// Reads the subject and attributes of a (self/local) SubjectAccessReview body.
pub fn review_request(
    plural: &str,
    body: &Value,
    requester: &UserInfo,
    namespace: Option<&str>,
) -> ApiResult<(UserInfo, Attributes)> {
    let spec = &body["spec"];
    let subject = if plural == "selfsubjectaccessreviews" {
        requester.clone()
    } else {
        let user = spec["user"].as_str().unwrap_or_default();
        let groups: Vec<String> = spec["groups"]
            .as_array()
            .map(|g| g.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        if user.is_empty() && groups.is_empty() {
            return Err(ApiError::new(
                422,
                "Invalid",
                "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.user: Invalid value: \"\": at least one of user or group must be specified",
                None,
            ));
        }
        UserInfo { name: user.to_string(), uid: spec["uid"].as_str().unwrap_or_default().to_string(), groups }
    };
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let attributes = if let Some(resource) = spec["resourceAttributes"].as_object() {
        let get = |k: &str| resource.get(k).map(text).unwrap_or_default();
        Attributes {
            verb: get("verb"),
            namespace: namespace.map(str::to_string).unwrap_or_else(|| get("namespace")),
            group: get("group"),
            resource: get("resource"),
            subresource: get("subresource"),
            name: get("name"),
            path: None,
        }
    } else if let Some(non_resource) = spec["nonResourceAttributes"].as_object() {
        Attributes {
            verb: non_resource.get("verb").map(text).unwrap_or_default(),
            path: Some(non_resource.get("path").map(text).unwrap_or_default()),
            ..Attributes::default()
        }
    } else {
        return Err(ApiError::new(
            422,
            "Invalid",
            "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
            None,
        ));
    };
    Ok((subject, attributes))
}

/// The decision of the authorizer chain `Node,RBAC` behind the `system:masters` shortcut, for
/// `subject` doing `attributes`. A denial's reason names the roles that bindings of the subject
/// refer to but that do not exist, as rbac.go's `RBAC: ...` reason.
pub fn authorize(policy: &dyn Policy, subject: &UserInfo, attributes: &Attributes) -> Decision {
    if subject.groups.iter().any(|g| g == "system:masters") {
        return Decision { allowed: true, reason: String::new() };
    }
    if node_allows(policy, subject, attributes) {
        return Decision { allowed: true, reason: String::new() };
    }
    let mut missing = Vec::new();
    for binding in policy.objects("clusterrolebindings", None) {
        match grant(policy, &binding, "ClusterRoleBinding", subject, attributes) {
            Grant::Allowed(reason) => return Decision { allowed: true, reason },
            Grant::MissingRole(error) => missing.push(error),
            Grant::No => {}
        }
    }
    if !attributes.namespace.is_empty() {
        for binding in policy.objects("rolebindings", Some(&attributes.namespace)) {
            match grant(policy, &binding, "RoleBinding", subject, attributes) {
                Grant::Allowed(reason) => return Decision { allowed: true, reason },
                Grant::MissingRole(error) => missing.push(error),
                Grant::No => {}
            }
        }
    }
    let reason = match missing.len() {
        0 => String::new(),
        1 => format!("RBAC: {}", missing[0]),
        _ => format!("RBAC: [{}]", missing.join(", ")),
    };
    Decision { allowed: false, reason }
}

/// The approximated Node authorizer: nodes get the `system:node` ClusterRole's rules.
fn node_allows(policy: &dyn Policy, subject: &UserInfo, attributes: &Attributes) -> bool {
    if !subject.name.starts_with("system:node:") || !subject.groups.iter().any(|g| g == "system:nodes") {
        return false;
    }
    policy.object("clusterroles", "", "system:node").is_some_and(|role| {
        role["rules"].as_array().is_some_and(|rules| rules.iter().any(|rule| rule_allows(rule, attributes)))
    })
}

enum Grant {
    /// The binding names the subject and its role allows the request; the reason text.
    Allowed(String),
    /// The binding names the subject but its role does not exist; the error text.
    MissingRole(String),
    No,
}

/// What `binding` says about the request.
fn grant(
    policy: &dyn Policy,
    binding: &Value,
    binding_kind: &str,
    subject: &UserInfo,
    attributes: &Attributes,
) -> Grant {
    let binding_ns = binding["metadata"]["namespace"].as_str().unwrap_or_default();
    let Some(who) = binding["subjects"]
        .as_array()
        .and_then(|subjects| subjects.iter().find_map(|s| subject_matches(s, subject, binding_ns)))
    else {
        return Grant::No;
    };
    let role_kind = binding["roleRef"]["kind"].as_str().unwrap_or_default();
    let role_name = binding["roleRef"]["name"].as_str().unwrap_or_default();
    let role = match role_kind {
        "ClusterRole" => policy.object("clusterroles", "", role_name),
        "Role" => policy.object("roles", binding_ns, role_name),
        _ => return Grant::No,
    };
    let Some(role) = role else {
        return Grant::MissingRole(format!(
            "{}.rbac.authorization.k8s.io \"{role_name}\" not found",
            role_kind.to_lowercase()
        ));
    };
    let allowed = role["rules"].as_array().is_some_and(|rules| rules.iter().any(|rule| rule_allows(rule, attributes)));
    if !allowed {
        return Grant::No;
    }
    let binding_name = binding["metadata"]["name"].as_str().unwrap_or_default();
    let place = if binding_ns.is_empty() { String::new() } else { format!(" in namespace \"{binding_ns}\"") };
    Grant::Allowed(
        format!("RBAC: allowed by {binding_kind} \"{binding_name}/{binding_ns}\" of {role_kind} \"{role_name}\" to {who}{place}")
            .replace("/\" of", "\" of"),
    )
}

/// Describes the matching subject (`User "alice"`), if `s` names the caller.
fn subject_matches(s: &Value, subject: &UserInfo, binding_ns: &str) -> Option<String> {
    let name = s["name"].as_str()?;
    match s["kind"].as_str()? {
        "User" if subject.name == name => Some(format!("User \"{name}\"")),
        "Group" if subject.groups.iter().any(|g| g == name) => Some(format!("Group \"{name}\"")),
        "ServiceAccount" => {
            let ns = s["namespace"].as_str().filter(|n| !n.is_empty()).unwrap_or(binding_ns);
            (subject.name == format!("system:serviceaccount:{ns}:{name}"))
                .then(|| format!("ServiceAccount \"{name}/{ns}\""))
        }
        _ => None,
    }
}

fn rule_allows(rule: &Value, a: &Attributes) -> bool {
    let list = |key: &str| -> Vec<&str> {
        rule[key].as_array().map(|v| v.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
    };
    let verbs = list("verbs");
    if !verbs.iter().any(|v| *v == "*" || *v == a.verb) {
        return false;
    }
    if let Some(path) = &a.path {
        return list("nonResourceURLs")
            .iter()
            .any(|u| *u == "*" || *u == path || u.strip_suffix('*').is_some_and(|p| path.starts_with(p)));
    }
    let groups = list("apiGroups");
    if !groups.iter().any(|g| *g == "*" || *g == a.group) {
        return false;
    }
    let full = if a.subresource.is_empty() { a.resource.clone() } else { format!("{}/{}", a.resource, a.subresource) };
    let resources = list("resources");
    let resource_ok = resources.iter().any(|r| {
        *r == "*"
            || *r == full
            || (a.subresource.is_empty() && *r == a.resource)
            || (*r == format!("*/{}", a.subresource) && !a.subresource.is_empty())
    });
    let names = list("resourceNames");
    resource_ok && (names.is_empty() || names.contains(&a.name.as_str()))
}

/// The authorization attributes of an HTTP request, as kube-apiserver's `RequestInfoFactory`
/// (staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go `NewRequestInfo`) reads
/// them from the path alone: `/api/v1/...` and `/apis/<group>/<version>/...` with at least one
/// part after the version are resource requests; everything else is a non-resource request
/// whose verb is the lower-cased method.
pub fn request_attributes(request: &Request) -> Attributes {
    let path = request.path.as_str();
    let non_resource =
        || Attributes { verb: request.method.to_lowercase(), path: Some(path.to_string()), ..Attributes::default() };
    let parts: Vec<&str> = path.trim_matches('/').split('/').filter(|p| !p.is_empty()).collect();
    if parts.len() < 3 {
        return non_resource();
    }
    let (group, mut rest) = match parts[0] {
        "api" => ("", &parts[2..]),
        "apis" if parts.len() >= 4 => (parts[1], &parts[3..]),
        _ => return non_resource(),
    };
    let mut a = Attributes { group: group.to_string(), ..Attributes::default() };
    // `/watch/...` and `/proxy/...` name their verb in the path.
    let special = matches!(rest.first(), Some(&("watch" | "proxy"))) && rest.len() >= 2;
    if special {
        a.verb = rest[0].to_string();
        rest = &rest[1..];
    } else {
        a.verb = match request.method.as_str() {
            "POST" => "create",
            "GET" | "HEAD" => "get",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" => "delete",
            _ => "",
        }
        .to_string();
    }
    if rest.first() == Some(&"namespaces")
        && let Some(ns) = rest.get(1)
    {
        a.namespace = ns.to_string();
        // `/namespaces/<ns>/<resource>/...`, unless it is the namespace's own subresource.
        if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
            rest = &rest[2..];
        }
    }
    if rest.len() >= 3 && a.verb != "proxy" {
        a.subresource = rest[2].to_string();
    }
    if rest.len() >= 2 {
        a.name = rest[1].to_string();
    }
    if let Some(resource) = rest.first() {
        a.resource = resource.to_string();
    }
    if a.name.is_empty() && a.verb == "get" {
        let watch =
            request.query_param("watch").is_some_and(|w| matches!(w, "true" | "1" | "t" | "T" | "True" | "TRUE"));
        a.verb = if watch { "watch" } else { "list" }.to_string();
        a.name = field_selector_name(request.query_param("fieldSelector").unwrap_or_default()).unwrap_or_default();
    }
    if a.name.is_empty() && a.verb == "delete" {
        a.verb = "deletecollection".to_string();
    }
    a
}

/// The name a field selector requires (`metadata.name=x` or `==x`), which list and watch
/// requests are authorized with.
fn field_selector_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|requirement| {
        let value = requirement.trim().strip_prefix("metadata.name")?;
        let value = value.strip_prefix("==").or_else(|| value.strip_prefix('='))?;
        let valid = !value.is_empty() && value != "." && value != ".." && !value.contains(['/', '%']);
        valid.then(|| value.to_string())
    })
}

/// kube-apiserver's answer to a denied request: a 403 Forbidden Status with the text of
/// responsewriters/errors.go `Forbidden` and `forbiddenMessage`, wrapped by
/// `apierrors.NewForbidden` (details: name, group, kind = the resource).
pub fn forbidden(user: &UserInfo, a: &Attributes, reason: &str) -> ApiError {
    let mut why = match &a.path {
        Some(path) => format!("User \"{}\" cannot {} path \"{path}\"", user.name, a.verb),
        None => {
            let resource =
                if a.subresource.is_empty() { a.resource.clone() } else { format!("{}/{}", a.resource, a.subresource) };
            let scope = if a.namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace \"{}\"", a.namespace)
            };
            format!(
                "User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
                user.name, a.verb, a.group
            )
        }
    };
    if !reason.is_empty() {
        why = format!("{why}: {reason}");
    }
    let qualified = if a.group.is_empty() { a.resource.clone() } else { format!("{}.{}", a.resource, a.group) };
    let message = if qualified.is_empty() {
        format!("forbidden: {why}")
    } else if a.name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} \"{}\" is forbidden: {why}", a.name)
    };
    let mut details = serde_json::Map::new();
    for (key, value) in [("name", &a.name), ("group", &a.group), ("kind", &a.resource)] {
        if !value.is_empty() {
            details.insert(key.to_string(), value.clone().into());
        }
    }
    ApiError::new(403, "Forbidden", message, Some(Value::Object(details)))
}

/// The user of requests without credentials, as kube-apiserver's default
/// `--anonymous-auth=true` authenticates them; authorization then decides (everyone may read
/// the health and version endpoints; anything else needs an RBAC grant).
pub const ANONYMOUS_USER: &str = "system:anonymous";

/// The identity of a request that presented no credentials.
/// Its only group is `system:unauthenticated` (not `system:authenticated`, which
/// `UserInfo::new` adds).
pub fn anonymous_user() -> UserInfo {
    UserInfo { name: ANONYMOUS_USER.into(), uid: String::new(), groups: vec!["system:unauthenticated".into()] }
}

/// The non-resource URLs `system:public-info-viewer` grants `get` on (and their subpaths, as
/// its `/healthz/*`-style rules).
fn is_public_info_path(path: &str) -> bool {
    ["/healthz", "/livez", "/readyz", "/version"]
        .iter()
        .any(|p| path == *p || path.strip_prefix(p).is_some_and(|rest| rest.starts_with('/')))
}

impl ApiServer {
    /// The authorization step of kube-apiserver's handler chain (`WithAuthorization`): with RBAC
    /// on, a request its user may not make is answered 403 and recorded in the audit log as
    /// forbidden. With RBAC off (`AlwaysAllow`) every authenticated request passes; an
    /// anonymous one passes for the public-info endpoints (the bootstrap policy's
    /// `system:public-info-viewer`, which this mode does not create) or an RBAC grant.
    pub fn authorize(&self, user: &UserInfo, request: &Request) -> ApiResult<()> {
        let anonymous = user.name == ANONYMOUS_USER;
        if !self.options.rbac && (!anonymous || is_public_info_path(&request.path)) {
            return Ok(());
        }
        let attributes = request_attributes(request);
        let decision = authorize(self.store.as_ref(), user, &attributes);
        if decision.allowed {
            return Ok(());
        }
        self.audit.record(AuditEntry {
            user: user.name.clone(),
            verb: attributes.verb.clone(),
            resource: attributes.resource.clone(),
            subresource: attributes.subresource.clone(),
            namespace: attributes.namespace.clone(),
            name: attributes.path.clone().unwrap_or_else(|| attributes.name.clone()),
            user_agent: request.header("User-Agent").unwrap_or_default().to_string(),
            forbidden: true,
            code: 403,
            request_resource_version: String::new(),
            response_resource_version: String::new(),
        });
        Err(forbidden(user, &attributes, &decision.reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::storage::store::Store;

    fn store_with_role() -> Store {
        let store = Store::default();
        store
            .write::<_, ()>(|txn| {
                txn.put("clusterroles", json!({"metadata": {"name": "metrics-reader"},
                    "rules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics"]},
                              {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "pods/status"]}]}));
                txn.put("clusterrolebindings", json!({"metadata": {"name": "prometheus"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metrics-reader"},
                    "subjects": [{"kind": "User", "name": "prometheus"}]}));
                Ok(())
            })
            .unwrap();
        store
    }

    fn ask(store: &Store, user: UserInfo, a: Attributes) -> Decision {
        store.write::<_, ()>(|txn| Ok(authorize(txn, &user, &a))).unwrap()
    }

    #[test]
    fn bindings_grant_what_their_roles_allow() {
        let store = store_with_role();
        let metrics = Attributes { verb: "get".into(), path: Some("/metrics".into()), ..Attributes::default() };
        let decision = ask(&store, UserInfo::new("prometheus", &[]), metrics.clone());
        assert!(decision.allowed);
        assert_eq!(
            decision.reason,
            "RBAC: allowed by ClusterRoleBinding \"prometheus\" of ClusterRole \"metrics-reader\" to User \"prometheus\""
        );
        assert!(!ask(&store, UserInfo::new("mallory", &[]), metrics.clone()).allowed);
        assert!(ask(&store, UserInfo::new("root", &["system:masters"]), metrics).allowed);
        let pods = Attributes { verb: "list".into(), resource: "pods".into(), ..Attributes::default() };
        assert!(ask(&store, UserInfo::new("prometheus", &[]), pods.clone()).allowed);
        let delete = Attributes { verb: "delete".into(), ..pods };
        assert!(!ask(&store, UserInfo::new("prometheus", &[]), delete).allowed);
    }

    fn request(method: &str, path_and_query: &str) -> Request {
        let (path, query) = path_and_query.split_once('?').unwrap_or((path_and_query, ""));
        let query = query
            .split('&')
            .filter(|q| !q.is_empty())
            .map(|q| {
                let (k, v) = q.split_once('=').unwrap_or((q, ""));
                (k.to_string(), v.to_string())
            })
            .collect();
        Request {
            method: method.into(),
            path: path.into(),
            query,
            headers: Vec::new(),
            body: Vec::new(),
            peer_certificates: Vec::new(),
            remote: "127.0.0.1:1".parse().unwrap(),
        }
    }

    fn attrs(verb: &str, group: &str, resource: &str, sub: &str, ns: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
            path: None,
        }
    }

    #[test]
    fn request_attributes_follow_request_info() {
        let a = |m: &str, p: &str| request_attributes(&request(m, p));
        assert_eq!(a("GET", "/api/v1/namespaces/ns/pods"), attrs("list", "", "pods", "", "ns", ""));
        assert_eq!(a("GET", "/api/v1/pods?watch=true"), attrs("watch", "", "pods", "", "", ""));
        assert_eq!(a("GET", "/api/v1/watch/namespaces/ns/pods"), attrs("watch", "", "pods", "", "ns", ""));
        assert_eq!(
            a("GET", "/api/v1/namespaces/kube-system/configmaps?fieldSelector=metadata.name%3Dx,a=b"),
            attrs("list", "", "configmaps", "", "kube-system", "")
        );
        assert_eq!(
            a("GET", "/api/v1/namespaces/kube-system/configmaps?fieldSelector=metadata.name=x"),
            attrs("list", "", "configmaps", "", "kube-system", "x")
        );
        assert_eq!(
            a("PUT", "/apis/apps/v1/namespaces/ns/deployments/web/status"),
            attrs("update", "apps", "deployments", "status", "ns", "web")
        );
        assert_eq!(
            a("PUT", "/api/v1/namespaces/ns/finalize"),
            attrs("update", "", "namespaces", "finalize", "ns", "ns")
        );
        assert_eq!(a("DELETE", "/api/v1/namespaces/ns"), attrs("delete", "", "namespaces", "", "ns", "ns"));
        assert_eq!(a("DELETE", "/api/v1/namespaces/ns/pods"), attrs("deletecollection", "", "pods", "", "ns", ""));
        assert_eq!(a("POST", "/api/v1/nodes"), attrs("create", "", "nodes", "", "", ""));
        for (path, verb) in [("/apis/apps/v1", "get"), ("/api", "get"), ("/metrics", "get"), ("/healthz", "post")] {
            let method = verb.to_uppercase();
            let got = a(&method, path);
            assert_eq!(got, Attributes { verb: verb.into(), path: Some(path.into()), ..Attributes::default() });
        }
    }

    #[test]
    fn forbidden_reads_as_kube_apiservers() {
        let alice = UserInfo::new("alice", &[]);
        let error = forbidden(&alice, &attrs("list", "", "pods", "", "team-b", ""), "");
        assert_eq!(error.code, 403);
        assert_eq!(error.status["reason"], "Forbidden");
        assert_eq!(
            error.status["message"],
            "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"team-b\""
        );
        assert_eq!(error.status["details"], json!({"kind": "pods"}));
        let error = forbidden(&alice, &attrs("update", "apps", "deployments", "status", "", "web"), "");
        assert_eq!(
            error.status["message"],
            "deployments.apps \"web\" is forbidden: User \"alice\" cannot update resource \"deployments/status\" in API group \"apps\" at the cluster scope"
        );
        assert_eq!(error.status["details"], json!({"name": "web", "group": "apps", "kind": "deployments"}));
        let path = Attributes { verb: "get".into(), path: Some("/metrics".into()), ..Attributes::default() };
        assert_eq!(
            forbidden(&alice, &path, "").status["message"],
            "forbidden: User \"alice\" cannot get path \"/metrics\""
        );
    }

    #[test]
    fn roles_bind_in_their_namespace_and_nodes_get_the_node_role() {
        let store = Store::default();
        store
            .write::<_, ()>(|txn| {
                for (storage, object) in crate::sandbox::auth::bootstrap_policy::objects() {
                    txn.put(storage, object);
                }
                txn.put(
                    "rolebindings",
                    json!({"metadata": {"name": "viewers", "namespace": "team-a"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:aggregate-to-view"},
                    "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "team-a"},
                                 {"kind": "User", "name": "ghost-role-user"}]}),
                );
                txn.put(
                    "rolebindings",
                    json!({"metadata": {"name": "ghost", "namespace": "team-a"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "missing"},
                    "subjects": [{"kind": "User", "name": "ghost-role-user"}]}),
                );
                Ok(())
            })
            .unwrap();
        let reader = UserInfo::new("system:serviceaccount:team-a:reader", &[]);
        let decision = ask(&store, reader.clone(), attrs("list", "", "pods", "", "team-a", ""));
        assert_eq!(
            decision.reason,
            "RBAC: allowed by RoleBinding \"viewers/team-a\" of ClusterRole \"system:aggregate-to-view\" to ServiceAccount \"reader/team-a\" in namespace \"team-a\""
        );
        assert!(!ask(&store, reader.clone(), attrs("list", "", "pods", "", "team-b", "")).allowed);
        assert!(!ask(&store, reader, attrs("delete", "", "pods", "", "team-a", "p")).allowed);
        let denied = ask(&store, UserInfo::new("ghost-role-user", &[]), attrs("create", "", "pods", "", "team-a", ""));
        assert_eq!(denied.reason, "RBAC: role.rbac.authorization.k8s.io \"missing\" not found");
        let node = UserInfo::new("system:node:node-1", &["system:nodes"]);
        assert!(ask(&store, node.clone(), attrs("patch", "", "nodes", "status", "", "node-1")).allowed);
        assert!(!ask(&store, node, attrs("delete", "", "nodes", "", "", "node-1")).allowed);
        let anonymous = UserInfo {
            name: "system:anonymous".into(),
            uid: String::new(),
            groups: vec!["system:unauthenticated".into()],
        };
        let health = Attributes { verb: "get".into(), path: Some("/healthz".into()), ..Attributes::default() };
        assert!(ask(&store, anonymous.clone(), health).allowed);
        let apis = Attributes { verb: "get".into(), path: Some("/apis".into()), ..Attributes::default() };
        assert!(!ask(&store, anonymous, apis.clone()).allowed);
        assert!(ask(&store, UserInfo::new("bob", &[]), apis).allowed, "system:discovery for system:authenticated");
    }

    #[test]
    fn forbidden_messages_name_the_request() {
        let list = Attributes {
            verb: "list".into(),
            namespace: "default".into(),
            resource: "pods".into(),
            ..Attributes::default()
        };
        let anonymous = anonymous_user();
        let e = forbidden(&anonymous, &list, "");
        assert_eq!(
            e.status["message"],
            "pods is forbidden: User \"system:anonymous\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
        );
        assert_eq!(e.status["details"], json!({"kind": "pods"}));
        let nodes =
            Attributes { verb: "get".into(), resource: "nodes".into(), name: "n1".into(), ..Attributes::default() };
        assert_eq!(
            forbidden(&anonymous, &nodes, "").status["message"],
            "nodes \"n1\" is forbidden: User \"system:anonymous\" cannot get resource \"nodes\" in API group \"\" at the cluster scope"
        );
        let path = Attributes { verb: "get".into(), path: Some("/api".into()), ..Attributes::default() };
        assert_eq!(
            forbidden(&anonymous, &path, "").status["message"],
            "forbidden: User \"system:anonymous\" cannot get path \"/api\""
        );
    }
}
