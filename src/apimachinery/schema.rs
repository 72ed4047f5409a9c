//! Group-version strings, as apimachinery's `runtime/schema` parses them.

/// `schema.ParseGroupVersion`: `apps/v1` → (`apps`, `v1`), `v1` → (``, `v1`), `` → (``, ``);
/// more than one `/` is Go's error.
pub fn parse_group_version(api_version: &str) -> Result<(&str, &str), String> {
    match api_version.split('/').collect::<Vec<_>>().as_slice() {
        [version] => Ok(("", version)),
        [group, version] => Ok((group, version)),
        _ => Err(format!("unexpected GroupVersion string: {api_version}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_versions_parse_as_go_does() {
        assert_eq!(parse_group_version("apps/v1"), Ok(("apps", "v1")));
        assert_eq!(parse_group_version("v1"), Ok(("", "v1")));
        assert_eq!(parse_group_version(""), Ok(("", "")));
        assert_eq!(parse_group_version("/"), Ok(("", "")));
        assert_eq!(parse_group_version("a/b/c"), Err("unexpected GroupVersion string: a/b/c".to_string()));
    }
}
