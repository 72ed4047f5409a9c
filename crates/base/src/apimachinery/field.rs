//! `k8s.io/apimachinery/pkg/util/validation/field`: one invalid field of an object, with
//! upstream's wording (`spec.replicas: Invalid value: -1: must be greater than or equal to 0`)
//! and cause reasons (`FieldValueInvalid`), and `ErrorList.ToAggregate`.

use std::fmt;

use serde_json::Value;

use super::strconv::quote;

/// `field.ErrorType`: what is wrong with the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    /// `ErrorTypeNotFound`: the value names something that cannot be found.
    NotFound,
    /// `ErrorTypeRequired`: a required value is missing.
    Required,
    /// `ErrorTypeDuplicate`: the value repeats one that must be unique.
    Duplicate,
    /// `ErrorTypeInvalid`: the value is malformed or out of range.
    Invalid,
    /// `ErrorTypeNotSupported`: the value is not one of an enumeration's values.
    NotSupported,
    /// `ErrorTypeForbidden`: the value is well formed but not allowed here.
    Forbidden,
    /// `ErrorTypeTooLong`: the value is longer than allowed.
    TooLong,
    /// `ErrorTypeTooMany`: the list has more items than allowed.
    TooMany,
    /// `ErrorTypeInternal`: a server-side failure unrelated to the input.
    Internal,
    /// `ErrorTypeTypeInvalid`: the value is not of the schema's type.
    TypeInvalid,
}

impl ErrorType {
    /// The `Status` cause reason (`metav1.CauseType`).
    pub fn reason(self) -> &'static str {
        match self {
            ErrorType::NotFound => "FieldValueNotFound",
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::Internal => "InternalError",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    /// `ErrorType.String()`, the start of the message.
    pub fn label(self) -> &'static str {
        match self {
            ErrorType::NotFound => "Not found",
            ErrorType::Required => "Required value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Invalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Internal => "Internal error",
            ErrorType::TypeInvalid => "Invalid value",
        }
    }

    /// Whether the message leaves the bad value out, whatever it is (`ErrorBody`).
    fn omits_value(self) -> bool {
        matches!(self, ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong | ErrorType::Internal)
    }
}

/// `field.Error`. The bad value is kept as Go renders it in the message (a string quoted as
/// `%q`, a struct as `%#v`, …), since callers know its Go type and this module does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// What is wrong with the field.
    pub error_type: ErrorType,
    /// The field path, e.g. `spec.template.spec.containers[0].name`.
    pub field: String,
    /// The rendered bad value; `None` is upstream's `omitValue`.
    pub value: Option<String>,
    /// The explanation after the value (`must be greater than or equal to 0`); may be empty.
    pub detail: String,
}

impl Error {
    fn new(error_type: ErrorType, field: &str, value: Option<String>, detail: &str) -> Error {
        Error { error_type, field: field.to_string(), value, detail: detail.to_string() }
    }

    /// `field.Required`.
    pub fn required(field: &str, detail: &str) -> Error {
        Error::new(ErrorType::Required, field, None, detail)
    }

    /// `field.Invalid` with an already rendered value.
    pub fn invalid(field: &str, rendered: String, detail: &str) -> Error {
        Error::new(ErrorType::Invalid, field, Some(rendered), detail)
    }

    /// `field.Invalid` of a string value (quoted as `%q`).
    pub fn invalid_str(field: &str, value: &str, detail: &str) -> Error {
        Error::invalid(field, quote(value), detail)
    }

    /// `field.Invalid` of a value held as JSON (see [`json_value`]).
    pub fn invalid_json(field: &str, value: &Value, detail: &str) -> Error {
        Error::invalid(field, json_value(value), detail)
    }

    /// `field.Duplicate` with an already rendered value.
    pub fn duplicate(field: &str, rendered: String) -> Error {
        Error::new(ErrorType::Duplicate, field, Some(rendered), "")
    }

    /// `field.Forbidden`.
    pub fn forbidden(field: &str, detail: &str) -> Error {
        Error::new(ErrorType::Forbidden, field, None, detail)
    }

    /// `field.TooLong` with the value left out (`may not be more than N bytes`).
    pub fn too_long(field: &str, limit: usize) -> Error {
        let unit = if limit == 1 { "byte" } else { "bytes" };
        Error::new(ErrorType::TooLong, field, None, &format!("may not be more than {limit} {unit}"))
    }

    /// `field.TooMany`: a list of `actual` items where at most `max` are allowed.
    pub fn too_many(field: &str, actual: usize, max: usize) -> Error {
        Error::new(ErrorType::TooMany, field, Some(actual.to_string()), &format!("must have at most {max} items"))
    }

    /// `field.NotSupported` of a string value: the supported values quoted after it.
    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> Error {
        Error::not_supported_rendered(field, quote(value), supported)
    }

    /// `field.NotSupported` with an already rendered value (a struct shown with `%#v`).
    pub fn not_supported_rendered(field: &str, rendered: String, supported: &[&str]) -> Error {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|v| quote(v)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Error::new(ErrorType::NotSupported, field, Some(rendered), &detail)
    }

    /// `ValidateNonnegativeField`.
    pub fn nonnegative(field: &str, value: i64) -> Option<Error> {
        (value < 0).then(|| Error::invalid(field, value.to_string(), "must be greater than or equal to 0"))
    }

    /// The `Status` cause reason of this error.
    pub fn reason(&self) -> &'static str {
        self.error_type.reason()
    }

    /// `ErrorBody`: the message without the field path (what a `Status` cause carries).
    pub fn body(&self) -> String {
        let mut body = match &self.value {
            Some(value) if !self.error_type.omits_value() => format!("{}: {value}", self.error_type.label()),
            _ => self.error_type.label().to_string(),
        };
        if !self.detail.is_empty() {
            body.push_str(": ");
            body.push_str(&self.detail);
        }
        body
    }
}

/// `Error()`: `<field>: <body>`.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// `field.Error` is an `error` in Go too.
impl std::error::Error for Error {}

/// `ErrorList.ToAggregate()`: the errors of one validation as one error; never empty. Build it
/// with [`aggregate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorList {
    errors: Vec<Error>,
}

impl ErrorList {
    /// The errors, in order, repeats included (a `Status`' causes list every one).
    pub fn errors(&self) -> &[Error] {
        &self.errors
    }
}

/// `ToAggregate().Error()`: each distinct message once, in order; one alone, several in brackets.
impl fmt::Display for ErrorList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut unique: Vec<String> = Vec::new();
        for message in self.errors.iter().map(Error::to_string) {
            if !unique.contains(&message) {
                unique.push(message);
            }
        }
        match unique.as_slice() {
            [one] => f.write_str(one),
            many => write!(f, "[{}]", many.join(", ")),
        }
    }
}

/// The first error is its source, as for `Aggregate` (a field error has no source of its own).
impl std::error::Error for ErrorList {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.errors.first().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// `ErrorList.ToAggregate()`: `Ok` for no error (Go's nil), otherwise every error as one.
pub fn aggregate(errors: &[Error]) -> Result<(), ErrorList> {
    if errors.is_empty() { Ok(()) } else { Err(ErrorList { errors: errors.to_vec() }) }
}

/// A bad value held as JSON, as the message shows it: a string quoted as Go's `%q`, anything
/// else as JSON.
pub fn json_value(value: &Value) -> String {
    match value {
        Value::String(text) => quote(text),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn messages_are_upstreams() {
        let invalid = Error::invalid("spec.replicas", "-1".into(), "must be greater than or equal to 0");
        assert_eq!(invalid.to_string(), "spec.replicas: Invalid value: -1: must be greater than or equal to 0");
        assert_eq!(invalid.reason(), "FieldValueInvalid");
        assert_eq!(Error::required("metadata.name", "").body(), "Required value");
        assert_eq!(
            Error::required("a", "name or generateName is required").body(),
            "Required value: name or generateName is required"
        );
        assert_eq!(Error::forbidden("spec", "no").body(), "Forbidden: no");
        assert_eq!(
            Error::too_long("metadata.annotations", 262144).body(),
            "Too long: may not be more than 262144 bytes"
        );
        assert_eq!(Error::duplicate("x", quote("a")).body(), "Duplicate value: \"a\"");
        assert_eq!(
            Error::not_supported("p", "x", &["A", "B"]).body(),
            "Unsupported value: \"x\": supported values: \"A\", \"B\""
        );
        assert_eq!(Error::invalid_json("l", &json!("a\tb"), "bad").body(), "Invalid value: \"a\\tb\": bad");
        assert_eq!(Error::invalid_json("l", &json!(3), "bad").body(), "Invalid value: 3: bad");
        assert_eq!(Error::invalid("l", "x".into(), "").body(), "Invalid value: x");
    }

    #[test]
    fn aggregates_drop_repeats() {
        let a = Error::forbidden("a", "no");
        let b = Error::forbidden("b", "no");
        assert_eq!(aggregate(&[]), Ok(()));
        assert_eq!(aggregate(&[a.clone(), a.clone()]).map_err(|e| e.to_string()), Err("a: Forbidden: no".to_string()));
        assert_eq!(
            aggregate(&[a, b]).map_err(|e| e.to_string()),
            Err("[a: Forbidden: no, b: Forbidden: no]".to_string())
        );
    }
}
