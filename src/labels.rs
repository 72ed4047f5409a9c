//! Label selectors as controllers use them on typed objects: `metav1.LabelSelectorAsSelector`
//! and `labels.SelectorFromSet`, matched against an object's labels.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// One requirement of a label selector (`metav1.LabelSelectorRequirement`).
#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector (`metav1.LabelSelectorAsSelector`): every requirement must hold.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// `labels.SelectorFromSet`: equality on every entry of the map.
    pub fn from_map(map: &BTreeMap<String, String>) -> Selector {
        let requirements = map.iter().map(|(k, v)| Requirement::In(k.clone(), vec![v.clone()])).collect();
        Selector { requirements }
    }

    /// `metav1.LabelSelectorAsSelector`; an unknown operator is an error.
    pub fn from_label_selector(selector: &LabelSelector) -> Result<Selector, String> {
        let mut parsed = Selector::from_map(selector.match_labels.as_ref().unwrap_or(&BTreeMap::new()));
        for expression in selector.match_expressions.iter().flatten() {
            let key = expression.key.clone();
            let values = expression.values.clone().unwrap_or_default();
            parsed.requirements.push(match expression.operator.as_str() {
                "In" => Requirement::In(key, values),
                "NotIn" => Requirement::NotIn(key, values),
                "Exists" => Requirement::Exists(key),
                "DoesNotExist" => Requirement::DoesNotExist(key),
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            });
        }
        Ok(parsed)
    }

    /// Whether the selector has no requirement (it then selects everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let empty = BTreeMap::new();
        let labels = labels.unwrap_or(&empty);
        self.requirements.iter().all(|requirement| match requirement {
            Requirement::In(key, values) => labels.get(key).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(key, values) => labels.get(key).is_none_or(|v| !values.contains(v)),
            Requirement::Exists(key) => labels.contains_key(key),
            Requirement::DoesNotExist(key) => !labels.contains_key(key),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn selectors_match_labels_and_expressions() {
        let selector = LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            match_expressions: Some(vec![
                LabelSelectorRequirement { key: "tier".into(), operator: "In".into(), values: Some(vec!["a".into()]) },
                LabelSelectorRequirement { key: "canary".into(), operator: "DoesNotExist".into(), values: None },
            ]),
        };
        let selector = Selector::from_label_selector(&selector).expect("valid");
        assert!(selector.matches(Some(&labels(&[("app", "web"), ("tier", "a")]))));
        assert!(!selector.matches(Some(&labels(&[("app", "web"), ("tier", "b")]))));
        assert!(!selector.matches(Some(&labels(&[("app", "web"), ("tier", "a"), ("canary", "1")]))));
        assert!(!selector.matches(None));
        let bad = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "k".into(),
                operator: "Near".into(),
                values: None,
            }]),
            ..LabelSelector::default()
        };
        assert!(Selector::from_label_selector(&bad).is_err());
    }
}
