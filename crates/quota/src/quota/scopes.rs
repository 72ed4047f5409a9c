//! Quota scopes as selector requirements: `getScopeSelectorsFromQuota` (generic evaluator) and
//! `helper.ScopedResourceSelectorRequirementsAsSelector` (pkg/apis/core/v1/helper).

use k8s_openapi::api::core::v1::{ResourceQuotaSpec, ScopeSelector};

/// A scope requirement that is not a valid selector, in the words of
/// `ScopedResourceSelectorRequirementsAsSelector` (the `labels.NewRequirement` field errors,
/// with the scope as the field path).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// `In`/`NotIn` without values.
    #[error("{scope_name}: values: Invalid value: for 'in', 'notin' operators, values set can't be empty")]
    NoValues {
        /// The scope.
        scope_name: String,
    },
    /// `Exists`/`DoesNotExist` with values.
    #[error("{scope_name}: values: Invalid value: values set must be empty for exists and does not exist")]
    UnexpectedValues {
        /// The scope.
        scope_name: String,
    },
    /// An operator other than `In`, `NotIn`, `Exists`, `DoesNotExist` (quoted as Go's `%q`).
    #[error("{operator:?} is not a valid scope selector operator")]
    InvalidOperator {
        /// The operator given.
        operator: String,
    },
}

/// Whether an object is in a scope cannot be told (`MatchesScopeFunc`'s error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatchError {
    /// The scope requirement is not a valid selector.
    #[error("failed to parse and convert selector: {source}")]
    Selector {
        /// Why.
        #[from]
        source: SelectorError,
    },
}

/// `corev1.ScopedResourceSelectorRequirement`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeRequirement {
    /// The scope (`Terminating`, `BestEffort`, `PriorityClass`, ...).
    pub scope_name: String,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist`; empty for a scope of `spec.scopes` as
    /// `CalculateUsageStats` passes it.
    pub operator: String,
    /// The operator's values (`In`, `NotIn`); empty for `Exists` and `DoesNotExist`.
    pub values: Vec<String>,
}

impl ScopeRequirement {
    /// A scope of `spec.scopes` as `getScopeSelectorsFromQuota` makes it: operator `Exists`.
    pub fn exists(scope_name: &str) -> Self {
        ScopeRequirement { scope_name: scope_name.to_string(), operator: "Exists".into(), values: Vec::new() }
    }

    /// A scope of `spec.scopes` as `CalculateUsageStats` makes it: no operator.
    pub fn bare(scope_name: &str) -> Self {
        ScopeRequirement { scope_name: scope_name.to_string(), operator: String::new(), values: Vec::new() }
    }

    /// The requirement as a label selector on the single label `scopeName=value` (absent when
    /// `value` is `None`): `ScopedResourceSelectorRequirementsAsSelector` then `Matches`.
    pub fn matches_label(&self, value: Option<&str>) -> Result<bool, SelectorError> {
        let in_values = || value.is_some_and(|v| self.values.iter().any(|x| x == v));
        let scope_name = || self.scope_name.clone();
        match self.operator.as_str() {
            "In" | "NotIn" if self.values.is_empty() => Err(SelectorError::NoValues { scope_name: scope_name() }),
            "Exists" | "DoesNotExist" if !self.values.is_empty() => {
                Err(SelectorError::UnexpectedValues { scope_name: scope_name() })
            }
            "In" => Ok(in_values()),
            "NotIn" => Ok(!in_values()),
            "Exists" => Ok(value.is_some()),
            "DoesNotExist" => Ok(value.is_none()),
            other => Err(SelectorError::InvalidOperator { operator: other.to_string() }),
        }
    }
}

/// The `matchExpressions` of a scope selector.
pub fn selector_requirements(selector: Option<&ScopeSelector>) -> Vec<ScopeRequirement> {
    let expressions = selector.and_then(|s| s.match_expressions.as_ref()).into_iter().flatten();
    expressions
        .map(|e| ScopeRequirement {
            scope_name: e.scope_name.clone(),
            operator: e.operator.clone(),
            values: e.values.clone().unwrap_or_default(),
        })
        .collect()
}

/// `getScopeSelectorsFromQuota`: `spec.scopes` as `Exists` requirements, then the selector's.
pub fn quota_scope_requirements(spec: Option<&ResourceQuotaSpec>) -> Vec<ScopeRequirement> {
    let scopes = spec.and_then(|s| s.scopes.as_ref()).into_iter().flatten().map(|s| ScopeRequirement::exists(s));
    let mut result: Vec<ScopeRequirement> = scopes.collect();
    result.extend(selector_requirements(spec.and_then(|s| s.scope_selector.as_ref())));
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requirement(operator: &str, values: &[&str]) -> ScopeRequirement {
        ScopeRequirement {
            scope_name: "PriorityClass".into(),
            operator: operator.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn operators_select_as_label_selectors() {
        let r#in = requirement("In", &["high", "low"]);
        assert_eq!(r#in.matches_label(Some("high")), Ok(true));
        assert_eq!(r#in.matches_label(Some("mid")), Ok(false));
        assert_eq!(r#in.matches_label(None), Ok(false));
        let not_in = requirement("NotIn", &["high"]);
        assert_eq!(not_in.matches_label(Some("high")), Ok(false));
        assert_eq!(not_in.matches_label(Some("low")), Ok(true));
        assert_eq!(not_in.matches_label(None), Ok(true));
        assert_eq!(requirement("Exists", &[]).matches_label(Some("x")), Ok(true));
        assert_eq!(requirement("Exists", &[]).matches_label(None), Ok(false));
        assert_eq!(requirement("DoesNotExist", &[]).matches_label(None), Ok(true));
        assert_eq!(requirement("DoesNotExist", &[]).matches_label(Some("x")), Ok(false));
    }

    #[test]
    fn malformed_requirements_are_errors() {
        assert!(requirement("In", &[]).matches_label(Some("x")).is_err());
        assert!(requirement("Exists", &["x"]).matches_label(Some("x")).is_err());
        let bad = requirement("", &[]).matches_label(Some("x")).unwrap_err();
        assert_eq!(bad.to_string(), "\"\" is not a valid scope selector operator");
        assert_eq!(
            MatchError::from(bad).to_string(),
            "failed to parse and convert selector: \"\" is not a valid scope selector operator"
        );
    }
}
