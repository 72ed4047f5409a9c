//! Answers SubjectAccessReviews with RBAC's rules: `system:masters` may do anything; anyone
//! else what their (Cluster)RoleBindings grant. The sandbox does not enforce RBAC on its own
//! requests; it answers the question for clients that ask (delegated authorization).

use serde_json::{Value, json};

use super::auth::UserInfo;
use super::status::{ApiError, ApiResult};
use super::store::Txn;

/// What is being asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    pub verb: String,
    pub namespace: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    /// Set for non-resource requests such as `/metrics`.
    pub path: Option<String>,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub reason: String,
}

impl Decision {
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

/// RBAC's decision for `subject` doing `attributes`.
pub fn authorize(txn: &Txn<'_>, subject: &UserInfo, attributes: &Attributes) -> Decision {
    if subject.groups.iter().any(|g| g == "system:masters") {
        return Decision { allowed: true, reason: String::new() };
    }
    for binding in txn.list("clusterrolebindings", None) {
        if let Some(reason) = grant(txn, &binding, "ClusterRoleBinding", subject, attributes) {
            return Decision { allowed: true, reason };
        }
    }
    if !attributes.namespace.is_empty() {
        for binding in txn.list("rolebindings", Some(&attributes.namespace)) {
            if let Some(reason) = grant(txn, &binding, "RoleBinding", subject, attributes) {
                return Decision { allowed: true, reason };
            }
        }
    }
    Decision { allowed: false, reason: String::new() }
}

/// The reason text when `binding` grants the request.
fn grant(
    txn: &Txn<'_>,
    binding: &Value,
    binding_kind: &str,
    subject: &UserInfo,
    attributes: &Attributes,
) -> Option<String> {
    let binding_ns = binding["metadata"]["namespace"].as_str().unwrap_or_default();
    let who = binding["subjects"].as_array()?.iter().find_map(|s| subject_matches(s, subject, binding_ns))?;
    let role_kind = binding["roleRef"]["kind"].as_str()?;
    let role_name = binding["roleRef"]["name"].as_str()?;
    let role = match role_kind {
        "ClusterRole" => txn.get("clusterroles", "", role_name)?,
        "Role" => txn.get("roles", binding_ns, role_name)?,
        _ => return None,
    };
    let allowed = role["rules"].as_array()?.iter().any(|rule| rule_allows(rule, attributes));
    allowed.then(|| {
        let binding_name = binding["metadata"]["name"].as_str().unwrap_or_default();
        let place = if binding_ns.is_empty() { String::new() } else { format!(" in namespace \"{binding_ns}\"") };
        format!("RBAC: allowed by {binding_kind} \"{binding_name}/{binding_ns}\" of {role_kind} \"{role_name}\" to {who}{place}")
            .replace("/\" of", "\" of")
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::store::Store;

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
}
