//! Delegated authorization of requests to the secure port, as upstream's
//! `DelegatingAuthorizationOptions` builds it: `system:masters` may do anything, the
//! `--authorization-always-allow-paths` are open to everyone (authenticated or anonymous), and
//! everything else is asked of the API server with a SubjectAccessReview, whose answers are
//! cached. Without an authorization kubeconfig every other request is forbidden.

use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};

use super::auth::{DelegationError, User, delegation_client};
use super::cache::TtlCache;
use crate::client::{Api, Client, PostParams};
use crate::server::options::AuthorizationOptions;

/// Groups allowed everything without asking (upstream's default `AlwaysAllowGroups`).
const PRIVILEGED_GROUPS: &[&str] = &["system:masters"];

/// The answer for one request.
#[derive(Debug)]
pub enum Decision {
    /// Allowed.
    Allow,
    /// Forbidden, with the reasons the authorizers gave (possibly empty).
    Deny(String),
    /// No authorizer allowed it and one of them failed: an internal error (500).
    Error(AuthorizationError),
}

/// Why a request could not be authorized (an internal error, 500).
#[derive(Debug, thiserror::Error)]
pub enum AuthorizationError {
    /// The SubjectAccessReview failed.
    #[error("subject access review: {0}")]
    Review(#[source] crate::client::Error),
    /// The review both allowed and denied (upstream's webhook authorizer words).
    #[error("webhook subject access review returned both allow and deny response")]
    AllowedAndDenied,
}

/// Why the authorizer cannot be set up (the secure port then does not start).
#[derive(Debug, thiserror::Error)]
pub enum AuthorizerError {
    /// An `--authorization-always-allow-paths` entry is invalid.
    #[error("{0}")]
    Path(#[from] PathError),
    /// The SubjectAccessReview client cannot be set up.
    #[error("{0}")]
    Delegation(#[from] DelegationError),
}

/// An always-allowed path with a `*` elsewhere than at its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("only trailing * allowed in {path:?}")]
pub struct PathError {
    /// The path, without its leading `/`.
    pub path: String,
}

/// What one authorizer says.
enum Verdict {
    Allow,
    Deny(String),
    NoOpinion(String),
    Error(AuthorizationError),
}

/// The union of privileged groups, always-allowed paths and SubjectAccessReviews.
pub struct Authorizer {
    paths: PathAuthorizer,
    reviews: Option<AccessReviewer>,
}

impl Authorizer {
    /// The authorizer `options` describe. Fails on a bad always-allowed path (a `*` not at the end)
    /// or an unusable `--authorization-kubeconfig`.
    pub fn new(options: &AuthorizationOptions) -> Result<Authorizer, AuthorizerError> {
        let paths = PathAuthorizer::new(&options.always_allow_paths)?;
        let reviews = delegation_client(&options.kubeconfig, "authorization")?.map(|client| AccessReviewer {
            client,
            allowed_ttl: options.webhook_cache_authorized_ttl,
            denied_ttl: options.webhook_cache_unauthorized_ttl,
            cache: TtlCache::new(),
        });
        if reviews.is_none() {
            log::warn!(
                "No authorization-kubeconfig provided, so SubjectAccessReview of authorization tokens won't work."
            );
        }
        Ok(Authorizer { paths, reviews })
    }

    /// May `user` do `verb` (the lower-cased HTTP method) on `path`? The first authorizer that
    /// allows or denies decides; with no decision, the request is forbidden.
    pub fn authorize(&self, user: &User, verb: &str, path: &str) -> Decision {
        if user.groups.iter().any(|g| PRIVILEGED_GROUPS.contains(&g.as_str())) || self.paths.allows(path) {
            return Decision::Allow;
        }
        let opinion = match &self.reviews {
            Some(reviews) => reviews.review(user, verb, path),
            None => Verdict::NoOpinion(String::new()),
        };
        match opinion {
            Verdict::Allow => Decision::Allow,
            Verdict::Deny(reason) | Verdict::NoOpinion(reason) => Decision::Deny(reason),
            Verdict::Error(e) => Decision::Error(e),
        }
    }
}

/// `--authorization-always-allow-paths`: exact paths, or prefixes when they end in `*`; the
/// leading `/` is optional.
struct PathAuthorizer {
    exact: Vec<String>,
    prefixes: Vec<String>,
}

impl PathAuthorizer {
    fn new(paths: &[String]) -> Result<PathAuthorizer, PathError> {
        let mut authorizer = PathAuthorizer { exact: Vec::new(), prefixes: Vec::new() };
        for path in paths {
            let path = path.strip_prefix('/').unwrap_or(path);
            let (body, is_prefix) = path.strip_suffix('*').map_or((path, false), |body| (body, true));
            if body.contains('*') {
                return Err(PathError { path: path.to_string() });
            }
            if is_prefix {
                authorizer.prefixes.push(body.to_string());
            } else {
                authorizer.exact.push(body.to_string());
            }
        }
        Ok(authorizer)
    }

    fn allows(&self, path: &str) -> bool {
        let path = path.strip_prefix('/').unwrap_or(path);
        self.exact.iter().any(|p| p == path) || self.prefixes.iter().any(|p| path.starts_with(p.as_str()))
    }
}

/// SubjectAccessReviews for non-resource paths, with answers cached per user and request.
struct AccessReviewer {
    client: Client,
    allowed_ttl: Duration,
    denied_ttl: Duration,
    cache: TtlCache<SubjectAccessReviewStatus>,
}

impl AccessReviewer {
    fn review(&self, user: &User, verb: &str, path: &str) -> Verdict {
        let spec = SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
            groups: Some(user.groups.clone()),
            extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.to_string()),
                verb: Some(verb.to_string()),
            }),
            resource_attributes: None,
        };
        let key = serde_json::to_string(&spec).unwrap_or_default();
        let status = match self.cache.get(&key) {
            Some(status) => status,
            None => match self.ask(spec) {
                Ok(status) => {
                    let ttl = if status.allowed { self.allowed_ttl } else { self.denied_ttl };
                    self.cache.insert(key, status.clone(), ttl);
                    status
                }
                Err(e) => return Verdict::Error(e),
            },
        };
        opinion(status)
    }

    fn ask(&self, spec: SubjectAccessReviewSpec) -> Result<SubjectAccessReviewStatus, AuthorizationError> {
        let review = SubjectAccessReview { spec, ..SubjectAccessReview::default() };
        let started = std::time::Instant::now();
        let answer = Api::<SubjectAccessReview>::all(&self.client).create(&review, &PostParams::default());
        let code = super::metrics::review_code(answer.as_ref().map(|_| ()).map_err(|e| e.code()));
        super::metrics::delegated_authorization(&code, started.elapsed());
        let answer = answer.map_err(AuthorizationError::Review)?;
        Ok(answer.status.unwrap_or_default())
    }
}

/// Upstream's webhook authorizer reading of a review status.
fn opinion(status: SubjectAccessReviewStatus) -> Verdict {
    let reason = status.reason.unwrap_or_default();
    let denied = status.denied == Some(true);
    match (status.allowed, denied) {
        (true, true) => Verdict::Error(AuthorizationError::AllowedAndDenied),
        (false, true) => Verdict::Deny(reason),
        (true, false) => Verdict::Allow,
        (false, false) => Verdict::NoOpinion(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(list: &[&str]) -> Result<PathAuthorizer, String> {
        PathAuthorizer::new(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>()).map_err(|e| e.to_string())
    }

    #[test]
    fn always_allowed_paths_match_exactly_or_by_trailing_star() {
        let a = paths(&["/healthz", "readyz", "/debug/*"]).unwrap();
        assert!(a.allows("/healthz") && a.allows("/readyz") && a.allows("/debug/pprof/heap"));
        assert!(!a.allows("/healthz/ping") && !a.allows("/metrics") && !a.allows("/"));
        assert!(paths(&["/"]).unwrap().allows("/"));
        assert_eq!(paths(&["/a*b"]).err().unwrap(), "only trailing * allowed in \"a*b\"");
    }

    #[test]
    fn masters_and_open_paths_need_no_review() {
        let authz = Authorizer { paths: paths(&["/healthz"]).unwrap(), reviews: None };
        let master = User { name: "root".into(), groups: vec!["system:masters".into()], ..User::default() };
        assert!(matches!(authz.authorize(&master, "get", "/metrics"), Decision::Allow));
        assert!(matches!(authz.authorize(&User::anonymous(), "get", "/healthz"), Decision::Allow));
        assert!(matches!(authz.authorize(&User::anonymous(), "get", "/metrics"), Decision::Deny(r) if r.is_empty()));
    }

    #[test]
    fn review_statuses_read_like_upstreams_webhook() {
        let status = |allowed, denied, reason: &str| SubjectAccessReviewStatus {
            allowed,
            denied: Some(denied),
            reason: Some(reason.into()),
            ..SubjectAccessReviewStatus::default()
        };
        assert!(matches!(opinion(status(true, false, "")), Verdict::Allow));
        assert!(matches!(opinion(status(false, true, "no")), Verdict::Deny(r) if r == "no"));
        assert!(matches!(opinion(status(false, false, "meh")), Verdict::NoOpinion(r) if r == "meh"));
        assert!(matches!(opinion(status(true, true, "")), Verdict::Error(AuthorizationError::AllowedAndDenied)));
    }
}
