//! Requests without credentials, as kube-apiserver's default `--anonymous-auth=true` treats
//! them: authenticated as `system:anonymous` (group `system:unauthenticated`), then authorized.
//! The bootstrap policy lets everyone read the health and version endpoints
//! (`system:public-info-viewer`); discovery (`system:discovery`) is for authenticated users
//! only; anything else needs an RBAC grant to the anonymous user or its group.

use super::ApiServer;
use crate::sandbox::auth::UserInfo;
use crate::sandbox::rbac;
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
    let attributes = rbac::request_attributes(request);
    if attributes.path.is_some() && attributes.verb == "get" && PUBLIC_INFO_PATHS.contains(&request.path.as_str()) {
        return Ok(());
    }
    let decision = api.store.write::<_, ApiError>(|txn| Ok(rbac::authorize(txn, user, &attributes)))?;
    if decision.allowed { Ok(()) } else { Err(rbac::forbidden(user, &attributes, "")) }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::sandbox::rbac::Attributes;

    #[test]
    fn forbidden_messages_name_the_request() {
        let list = Attributes {
            verb: "list".into(),
            namespace: "default".into(),
            resource: "pods".into(),
            ..Attributes::default()
        };
        let anonymous = user();
        let e = rbac::forbidden(&anonymous, &list, "");
        assert_eq!(
            e.status["message"],
            "pods is forbidden: User \"system:anonymous\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
        );
        assert_eq!(e.status["details"], json!({"kind": "pods"}));
        let nodes =
            Attributes { verb: "get".into(), resource: "nodes".into(), name: "n1".into(), ..Attributes::default() };
        assert_eq!(
            rbac::forbidden(&anonymous, &nodes, "").status["message"],
            "nodes \"n1\" is forbidden: User \"system:anonymous\" cannot get resource \"nodes\" in API group \"\" at the cluster scope"
        );
        let path = Attributes { verb: "get".into(), path: Some("/api".into()), ..Attributes::default() };
        assert_eq!(
            rbac::forbidden(&anonymous, &path, "").status["message"],
            "forbidden: User \"system:anonymous\" cannot get path \"/api\""
        );
    }
}
