//! Requests without credentials, as kube-apiserver's default `--anonymous-auth=true` treats
//! them: authenticated as `system:anonymous` (group `system:unauthenticated`), then authorized.
//! The bootstrap policy lets everyone read the health and version endpoints
//! (`system:public-info-viewer`); discovery (`system:discovery`) is for authenticated users
//! only; anything else needs an RBAC grant to the anonymous user or its group.

use serde_json::{Value, json};

use super::{ApiServer, parse_target};
use crate::sandbox::audit;
use crate::sandbox::auth::UserInfo;
use crate::sandbox::rbac::{self, Attributes};
use crate::sandbox::status::ApiError;
use crate::server::http::Request;

/// The non-resource URLs `system:public-info-viewer` grants `get` on.
const PUBLIC_INFO_PATHS: &[&str] = &["/healthz", "/livez", "/readyz", "/version", "/version/"];

/// The identity of a request that presented no credentials.
pub fn user() -> UserInfo {
    UserInfo::new("system:anonymous", &["system:unauthenticated"])
}

/// Authorizes an anonymous request: 403 Forbidden unless the public-info paths or an RBAC
/// binding allow it (`responsewriters.Forbidden`'s message).
pub fn authorize(api: &ApiServer, request: &Request, user: &UserInfo) -> Result<(), ApiError> {
    let path = request.path.as_str();
    let attributes = attributes(request);
    if attributes.path.is_some() && attributes.verb == "get" && PUBLIC_INFO_PATHS.contains(&path) {
        return Ok(());
    }
    let decision = api.store.write::<_, ApiError>(|txn| Ok(rbac::authorize(txn, user, &attributes)))?;
    if decision.allowed { Ok(()) } else { Err(forbidden(&user.name, &attributes)) }
}

/// What is being asked for, as the `RequestInfoFactory` sees it: a resource request when the
/// path names a served resource, otherwise a non-resource path with the method as verb.
fn attributes(request: &Request) -> Attributes {
    let watch = request.query_param("watch").is_some_and(|w| matches!(w, "true" | "1" | "True"));
    match parse_target(&request.path) {
        Ok(target) => {
            let named = target.name.is_some();
            let resource = target.resource;
            // A namespace's own path names it as the namespace too.
            let namespace = target.namespace.clone().or_else(|| {
                (resource.group.is_empty() && resource.plural == "namespaces").then(|| target.name.clone()).flatten()
            });
            Attributes {
                verb: audit::verb(&request.method, named, watch && !named).to_string(),
                namespace: namespace.unwrap_or_default(),
                group: resource.group.to_string(),
                resource: resource.plural.to_string(),
                subresource: target.subresource.clone().unwrap_or_default(),
                name: target.name.clone().unwrap_or_default(),
                path: None,
            }
        }
        Err(_) => Attributes {
            verb: request.method.to_lowercase(),
            path: Some(request.path.clone()),
            ..Attributes::default()
        },
    }
}

/// `responsewriters.Forbidden` with `apierrors.NewForbidden`'s message and details.
fn forbidden(user: &str, a: &Attributes) -> ApiError {
    if let Some(path) = &a.path {
        let message = format!("forbidden: User \"{user}\" cannot {} path \"{path}\"", a.verb);
        return ApiError::new(403, "Forbidden", message, Some(json!({})));
    }
    let resource =
        if a.subresource.is_empty() { a.resource.clone() } else { format!("{}/{}", a.resource, a.subresource) };
    let scope = if a.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace \"{}\"", a.namespace)
    };
    let why = format!("User \"{user}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}", a.verb, a.group);
    let qualified = if a.group.is_empty() { a.resource.clone() } else { format!("{}.{}", a.resource, a.group) };
    let message = if a.name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} \"{}\" is forbidden: {why}", a.name)
    };
    let mut details = json!({"kind": a.resource});
    for (key, value) in [("name", &a.name), ("group", &a.group)] {
        if !value.is_empty() {
            details[key] = Value::from(value.as_str());
        }
    }
    ApiError::new(403, "Forbidden", message, Some(details))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_messages_name_the_request() {
        let list = Attributes {
            verb: "list".into(),
            namespace: "default".into(),
            resource: "pods".into(),
            ..Attributes::default()
        };
        let e = forbidden("system:anonymous", &list);
        assert_eq!(
            e.status["message"],
            "pods is forbidden: User \"system:anonymous\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
        );
        assert_eq!(e.status["details"], json!({"kind": "pods"}));
        let nodes =
            Attributes { verb: "get".into(), resource: "nodes".into(), name: "n1".into(), ..Attributes::default() };
        assert_eq!(
            forbidden("system:anonymous", &nodes).status["message"],
            "nodes \"n1\" is forbidden: User \"system:anonymous\" cannot get resource \"nodes\" in API group \"\" at the cluster scope"
        );
        let path = Attributes { verb: "get".into(), path: Some("/api".into()), ..Attributes::default() };
        assert_eq!(
            forbidden("system:anonymous", &path).status["message"],
            "forbidden: User \"system:anonymous\" cannot get path \"/api\""
        );
    }
}
