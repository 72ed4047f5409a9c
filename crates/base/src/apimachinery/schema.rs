//! Group-version strings, as apimachinery's `runtime/schema` parses them, and group-resources.

use std::fmt;

/// An API group and resource (`schema.GroupResource`); the core group is `""`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupResource {
    /// The API group; empty for the core group.
    pub group: String,
    /// The resource (plural, lower case): `pods`, `deployments`.
    pub resource: String,
}

impl GroupResource {
    /// The resource `resource` of group `group`.
    pub fn new(group: &str, resource: &str) -> Self {
        GroupResource { group: group.to_string(), resource: resource.to_string() }
    }
}

/// `GroupResource.String`: `resource`, or `resource.group` outside the core group.
impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() { f.write_str(&self.resource) } else { write!(f, "{}.{}", self.resource, self.group) }
    }
}

/// A group-version with more than one `/`, in Go's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unexpected GroupVersion string: {api_version}")]
pub struct ParseGroupVersionError {
    /// The text.
    pub api_version: String,
}

/// `schema.ParseGroupVersion`: `apps/v1` → (`apps`, `v1`), `v1` → (``, `v1`), `` → (``, ``);
/// more than one `/` is Go's error.
pub fn parse_group_version(api_version: &str) -> Result<(&str, &str), ParseGroupVersionError> {
    match api_version.split('/').collect::<Vec<_>>().as_slice() {
        [version] => Ok(("", version)),
        [group, version] => Ok((group, version)),
        _ => Err(ParseGroupVersionError { api_version: api_version.to_string() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_resources_print_as_go_does() {
        assert_eq!(GroupResource::new("", "pods").to_string(), "pods");
        assert_eq!(GroupResource::new("apps", "replicasets").to_string(), "replicasets.apps");
    }

    #[test]
    fn group_versions_parse_as_go_does() {
        assert_eq!(parse_group_version("apps/v1"), Ok(("apps", "v1")));
        assert_eq!(parse_group_version("v1"), Ok(("", "v1")));
        assert_eq!(parse_group_version(""), Ok(("", "")));
        assert_eq!(parse_group_version("/"), Ok(("", "")));
        assert_eq!(
            parse_group_version("a/b/c").map_err(|e| e.to_string()),
            Err("unexpected GroupVersion string: a/b/c".to_string())
        );
    }
}
