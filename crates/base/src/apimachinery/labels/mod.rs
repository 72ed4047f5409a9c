//! Label selectors, parsed, validated and matched as `k8s.io/apimachinery/pkg/labels`
//! (`Parse`, `NewRequirement`, `Requirement.Matches`, `SelectorFromSet`) and
//! `metav1.LabelSelectorAsSelector` do, including the wording of their errors. The same
//! [`Selector`] serves the controllers (typed objects, `BTreeMap` labels) and the sandbox (JSON
//! objects): anything that can look a label up is [`Labels`].

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Map, Value};

use super::field;
use super::strconv::quote;
use super::validation::{is_qualified_name, is_valid_label_value};

mod parser;

/// `apps.DefaultDeploymentUniqueLabelKey`: the label a Deployment gives each of its
/// ReplicaSets' selectors and pods, the hash of the pod template.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// A label selector that cannot be parsed or converted, in upstream's words (`labels.Parse`'s,
/// `NewRequirement`'s field errors, `LabelSelectorAsSelector`'s); the JSON form adds the
/// decoding errors of a `metav1.LabelSelector`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SelectorError {
    /// The text form: a token other than the ones the grammar allows there.
    #[error("found '{found}', expected: {expected}")]
    Unexpected {
        /// The token's text.
        found: String,
        /// What the grammar allows, as upstream lists it.
        expected: &'static str,
    },
    /// The text form: no `(` after `in`/`notin` (upstream's message has no comma here).
    #[error("found '{found}' expected: '('")]
    ExpectedOpenParenthesis {
        /// The token's text.
        found: String,
    },
    /// The text form: one requirement failed (`unable to parse requirement: <why>`).
    #[error("unable to parse requirement: {source}")]
    Requirement {
        /// Why.
        source: Box<SelectorError>,
    },
    /// The text form: a key that is not a qualified name (field path `<nil>`).
    #[error(transparent)]
    InvalidKey(field::Error),
    /// A requirement `NewRequirement` refuses: its field errors, aggregated.
    #[error(transparent)]
    Invalid(field::ErrorList),
    /// An operator other than `In`, `NotIn`, `Exists`, `DoesNotExist`.
    #[error("{} is not a valid label selector operator", quote(.operator))]
    InvalidOperator {
        /// The operator given.
        operator: String,
    },
    /// The JSON form: neither null nor an object.
    #[error("invalid label selector: expected an object, got {found}")]
    NotAnObject {
        /// The value found.
        found: Value,
    },
    /// The JSON form: `matchLabels` or `matchExpressions` of the wrong JSON type.
    #[error("{member} must be {expected}")]
    MemberType {
        /// The member.
        member: String,
        /// The JSON type it must have (`an object`, `an array`).
        expected: &'static str,
    },
    /// The JSON form: a `matchLabels` value that is not a string.
    #[error("matchLabels[{key}] must be a string")]
    LabelNotAString {
        /// The label's key.
        key: String,
    },
    /// The JSON form: a `matchExpressions` entry's `values` that is not an array.
    #[error("matchExpressions values must be an array")]
    ValuesNotAnArray,
    /// The JSON form: a `matchExpressions` entry's value that is not a string.
    #[error("matchExpressions values must be strings")]
    ValueNotAString,
}

/// A set of labels a selector can be matched against (upstream's `labels.Labels`).
pub trait Labels {
    /// The value of `key`, if the key is there.
    fn get(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn get(&self, key: &str) -> Option<&str> {
        BTreeMap::get(self, key).map(String::as_str)
    }
}

/// JSON labels (`metadata.labels` of a stored object); a value that is not a string reads as
/// the empty string.
impl Labels for Map<String, Value> {
    fn get(&self, key: &str) -> Option<&str> {
        Map::get(self, key).map(|v| v.as_str().unwrap_or_default())
    }
}

impl<L: Labels + ?Sized> Labels for &L {
    fn get(&self, key: &str) -> Option<&str> {
        (**self).get(key)
    }
}

/// Absent labels: an object without `metadata.labels`.
impl<L: Labels> Labels for Option<L> {
    fn get(&self, key: &str) -> Option<&str> {
        self.as_ref().and_then(|labels| labels.get(key))
    }
}

/// A label selector: every requirement must match (an AND), or, for a null `metav1.LabelSelector`,
/// nothing matches at all. The default selects everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    requirements: Vec<Requirement>,
    matches_nothing: bool,
}

/// One `key <operator> values` condition of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

/// The operators of `k8s.io/apimachinery/pkg/selection`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    In,
    NotIn,
    Equals,
    DoubleEquals,
    NotEquals,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

impl Selector {
    /// Matches every object (the empty selector, `labels.Everything`).
    pub fn everything() -> Selector {
        Selector::default()
    }

    /// Matches no object (`labels.Nothing`, what a null `metav1.LabelSelector` means).
    pub fn nothing() -> Selector {
        Selector { requirements: Vec::new(), matches_nothing: true }
    }

    /// Parses the text form (`?labelSelector=`, `kubectl -l`), as `labels.Parse`. The empty
    /// string selects everything.
    pub fn parse(text: &str) -> Result<Selector, SelectorError> {
        let mut requirements = parser::Parser::new(text).parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Selector { requirements, matches_nothing: false })
    }

    /// `metav1.LabelSelectorAsSelector` of a typed selector: an empty one selects everything;
    /// keys, values and operators are validated as `NewRequirement` does.
    pub fn from_label_selector(selector: &LabelSelector) -> Result<Selector, SelectorError> {
        let match_labels = selector.match_labels.iter().flatten().map(|(k, v)| Ok((k.as_str(), v.as_str())));
        let expressions = selector.match_expressions.iter().flatten().map(|expression| {
            let values = expression.values.clone().unwrap_or_default();
            (expression.key.as_str(), expression.operator.as_str(), values)
        });
        Selector::from_parts(match_labels, expressions.map(Ok))
    }

    /// `metav1.LabelSelectorAsSelector` of a selector held as JSON (`spec.selector` of a stored
    /// object): null matches nothing, an empty object everything.
    pub fn from_label_selector_object(selector: &Value) -> Result<Selector, SelectorError> {
        let fields = match selector {
            Value::Null => return Ok(Selector::nothing()),
            Value::Object(fields) => fields,
            other => return Err(SelectorError::NotAnObject { found: other.clone() }),
        };
        let match_labels = optional_member(fields, "matchLabels", Value::as_object, "an object")?;
        let expressions = optional_member(fields, "matchExpressions", Value::as_array, "an array")?;
        let labels = match_labels.into_iter().flatten().map(|(key, value)| match value.as_str() {
            Some(value) => Ok((key.as_str(), value)),
            None => Err(SelectorError::LabelNotAString { key: key.clone() }),
        });
        Selector::from_parts(labels, expressions.into_iter().flatten().map(json_expression))
    }

    /// The conversion both forms share: `matchLabels` as equalities, then the expressions.
    fn from_parts<'a>(
        match_labels: impl IntoIterator<Item = Result<(&'a str, &'a str), SelectorError>>,
        expressions: impl IntoIterator<Item = Result<(&'a str, &'a str, Vec<String>), SelectorError>>,
    ) -> Result<Selector, SelectorError> {
        let mut match_labels = match_labels.into_iter().peekable();
        let mut expressions = expressions.into_iter().peekable();
        if match_labels.peek().is_none() && expressions.peek().is_none() {
            return Ok(Selector::everything());
        }
        let mut requirements = Vec::new();
        for label in match_labels {
            let (key, value) = label?;
            requirements.push(Requirement::new(key, Operator::Equals, vec![value.to_string()])?);
        }
        for expression in expressions {
            let (key, operator, values) = expression?;
            let operator = match operator {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => return Err(SelectorError::InvalidOperator { operator: other.to_string() }),
            };
            requirements.push(Requirement::new(key, operator, values)?);
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Selector { requirements, matches_nothing: false })
    }

    /// `labels.SelectorFromSet` of typed labels: equality on every entry; an empty map selects
    /// everything. Nothing is validated.
    pub fn from_map(labels: &BTreeMap<String, String>) -> Selector {
        Selector::from_pairs(labels.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }

    /// `labels.SelectorFromSet` of JSON labels (a ReplicationController's or Service's
    /// `selector` map); a value that is not a string stands for the empty one.
    pub fn from_set(labels: &Map<String, Value>) -> Selector {
        Selector::from_pairs(labels.iter().map(|(k, v)| (k.as_str(), v.as_str().unwrap_or_default())))
    }

    fn from_pairs<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)>) -> Selector {
        let requirements = pairs
            .map(|(key, value)| Requirement {
                key: key.to_string(),
                operator: Operator::Equals,
                values: vec![value.to_string()],
            })
            .collect();
        Selector { requirements, matches_nothing: false }
    }

    /// Whether the selector restricts nothing (selects every object).
    pub fn is_empty(&self) -> bool {
        !self.matches_nothing && self.requirements.is_empty()
    }

    /// Whether a label set satisfies the selector. `None` stands for an object without labels.
    pub fn matches(&self, labels: impl Labels) -> bool {
        !self.matches_nothing && self.requirements.iter().all(|r| r.matches(&labels))
    }

    /// The one value `key` must have for a label set to match (`key=v`, `key==v`, `key in
    /// (v)`), if the selector requires one: a lookup by that label's value finds every object
    /// the selector can match.
    pub fn required_value(&self, key: &str) -> Option<&str> {
        self.requirements.iter().find_map(|r| match (r.operator, r.values.as_slice()) {
            (Operator::Equals | Operator::DoubleEquals | Operator::In, [value]) if r.key == key => Some(value.as_str()),
            _ => None,
        })
    }

    /// Whether a JSON object's `metadata.labels` (absent: no labels) satisfy the selector.
    pub fn matches_object(&self, object: &Value) -> bool {
        self.matches(object.pointer("/metadata/labels").and_then(Value::as_object))
    }
}

/// Upstream's `String()`: requirements joined by `,`, values of `in`/`notin` sorted.
impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

/// Reads an optional member of a `metav1.LabelSelector`; null counts as absent.
fn optional_member<'a, T: ?Sized>(
    fields: &'a Map<String, Value>,
    name: &str,
    cast: fn(&'a Value) -> Option<&'a T>,
    expected: &'static str,
) -> Result<Option<&'a T>, SelectorError> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => {
            cast(value).map(Some).ok_or_else(|| SelectorError::MemberType { member: name.to_string(), expected })
        }
    }
}

/// One `matchExpressions` entry held as JSON: its key, operator and values.
fn json_expression(expression: &Value) -> Result<(&str, &str, Vec<String>), SelectorError> {
    let text = |name: &str| expression.get(name).and_then(Value::as_str).unwrap_or_default();
    let operator = text("operator");
    if !matches!(operator, "In" | "NotIn" | "Exists" | "DoesNotExist") {
        return Ok((text("key"), operator, Vec::new()));
    }
    let values = match expression.get("values") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or(SelectorError::ValueNotAString))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(SelectorError::ValuesNotAnArray),
    };
    Ok((text("key"), operator, values))
}

impl Requirement {
    /// Validates a requirement as `labels.NewRequirement` with no field path: errors name the
    /// paths `key`, `values` and `values[i][key]`.
    fn new(key: &str, operator: Operator, values: Vec<String>) -> Result<Requirement, SelectorError> {
        let mut errors = Vec::new();
        let key_errors = is_qualified_name(key);
        if !key_errors.is_empty() {
            errors.push(field::Error::invalid_str("key", key, &key_errors.join("; ")));
        }
        errors.extend(operator_errors(operator, &values));
        for (i, value) in values.iter().enumerate() {
            let value_errors = is_valid_label_value(value);
            if !value_errors.is_empty() {
                errors.push(field::Error::invalid_str(&format!("values[{i}][{key}]"), value, &value_errors.join("; ")));
            }
        }
        field::aggregate(&errors).map_err(SelectorError::Invalid)?;
        Ok(Requirement { key: key.to_string(), operator, values })
    }

    fn has_value(&self, value: &str) -> bool {
        self.values.iter().any(|v| v == value)
    }

    /// `Requirement.Matches`: `!=` and `notin` also match when the key is absent.
    fn matches(&self, labels: &impl Labels) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => value.is_some_and(|v| self.has_value(v)),
            Operator::NotIn | Operator::NotEquals => value.is_none_or(|v| !self.has_value(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => value.is_some_and(|v| self.compares(v)),
        }
    }

    /// `gt`/`lt`: both sides must be 64-bit integers.
    fn compares(&self, label: &str) -> bool {
        let (Ok(label), [bound]) = (label.parse::<i64>(), self.values.as_slice()) else {
            return false;
        };
        match bound.parse::<i64>() {
            Ok(bound) if self.operator == Operator::GreaterThan => label > bound,
            Ok(bound) => label < bound,
            Err(_) => false,
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let symbol = match self.operator {
            Operator::DoesNotExist => return write!(f, "!{}", self.key),
            Operator::Exists => return write!(f, "{}", self.key),
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
            Operator::In => " in ",
            Operator::NotIn => " notin ",
        };
        let mut values: Vec<&str> = self.values.iter().map(String::as_str).collect();
        values.sort_unstable();
        let values = values.join(",");
        match self.operator {
            Operator::In | Operator::NotIn => write!(f, "{}{symbol}({values})", self.key),
            _ => write!(f, "{}{symbol}{values}", self.key),
        }
    }
}

/// The operator-specific checks of `NewRequirement`.
fn operator_errors(operator: Operator, values: &[String]) -> Vec<field::Error> {
    let list = || go_json_list(values);
    match operator {
        Operator::In | Operator::NotIn if values.is_empty() => {
            vec![field::Error::invalid("values", list(), "for 'in', 'notin' operators, values set can't be empty")]
        }
        Operator::Equals | Operator::DoubleEquals | Operator::NotEquals if values.len() != 1 => {
            vec![field::Error::invalid("values", list(), "exact-match compatibility requires one single value")]
        }
        Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
            vec![field::Error::invalid("values", list(), "values set must be empty for exists and does not exist")]
        }
        Operator::GreaterThan | Operator::LessThan => integer_errors(values),
        _ => Vec::new(),
    }
}

/// `gt`/`lt` take exactly one value, an integer.
fn integer_errors(values: &[String]) -> Vec<field::Error> {
    let mut errors = Vec::new();
    if values.len() != 1 {
        let detail = "for 'Gt', 'Lt' operators, exactly one value is required";
        errors.push(field::Error::invalid("values", go_json_list(values), detail));
    }
    for (i, value) in values.iter().enumerate() {
        if value.parse::<i64>().is_err() {
            let detail = "for 'Gt', 'Lt' operators, the value must be an integer";
            errors.push(field::Error::invalid_str(&format!("values[{i}]"), value, detail));
        }
    }
    errors
}

/// How a field error shows a `[]string` bad value: Go's `json.Marshal`, where an empty slice
/// here is always a nil one (`null`).
fn go_json_list(values: &[String]) -> String {
    if values.is_empty() {
        return "null".to_string();
    }
    let items: Vec<String> = values.iter().map(|v| super::gojson::string(v)).collect();
    format!("[{}]", items.join(","))
}

/// Go's `%v` of a `*metav1.LabelSelector` (its generated `String()`), as Events and messages
/// print one (`nil` for none).
pub fn label_selector_go_string(selector: Option<&LabelSelector>) -> String {
    let Some(selector) = selector else { return "nil".to_string() };
    let labels: String =
        selector.match_labels.iter().flatten().map(|(k, v)| format!("{k}: {v},")).collect::<Vec<_>>().concat();
    let expressions: String = selector
        .match_expressions
        .iter()
        .flatten()
        .map(|e| {
            let values = e.values.as_deref().unwrap_or_default().join(" ");
            format!("LabelSelectorRequirement{{Key:{},Operator:{},Values:[{values}],}},", e.key, e.operator)
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{labels}}},MatchExpressions:[]LabelSelectorRequirement{{{expressions}}},}}"
    )
}

#[cfg(test)]
mod tests;
