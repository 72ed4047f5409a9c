//! `k8s.io/apimachinery/pkg/util/validation`: the name and label rules, each returning
//! upstream's messages (empty when the value is valid), so that callers can wrap them in field
//! errors exactly as kube-apiserver does.

/// Longest DNS-1123 label (`DNS1123LabelMaxLength`).
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
/// Longest DNS-1123 subdomain (`DNS1123SubdomainMaxLength`).
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
/// Longest name part of a qualified name (`qualifiedNameMaxLength`).
pub const QUALIFIED_NAME_MAX_LENGTH: usize = 63;
/// Longest label value (`LabelValueMaxLength`).
pub const LABEL_VALUE_MAX_LENGTH: usize = 63;

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR_MSG: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_EXAMPLES: &[&str] = &["MyName", "my.name", "123-abc"];
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, \
    '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters \
    or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
    characters, '-' or '.', and must start and end with an alphanumeric character";

/// `IsQualifiedName`, since v1.35 an alias of `content.IsLabelKey`: an optional DNS subdomain
/// prefix and `/`, then a name part of up to 63 characters (label keys, annotation keys,
/// finalizers).
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let parts: Vec<&str> = value.split('/').collect();
    let mut errors = Vec::new();
    let name = match parts.as_slice() {
        [name] => name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push(format!("prefix part {}", empty_error()));
            } else {
                errors.extend(is_dns1123_subdomain(prefix).into_iter().map(|e| format!("prefix part {e}")));
            }
            name
        }
        _ => {
            let rule = regex_error(QUALIFIED_NAME_ERR_MSG, QUALIFIED_NAME_FMT, QUALIFIED_NAME_EXAMPLES);
            return vec![format!(
                "a valid label key {rule} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errors.push(format!("name part {}", empty_error()));
    } else if name.len() > QUALIFIED_NAME_MAX_LENGTH {
        errors.push(format!("name part {}", max_len_error(QUALIFIED_NAME_MAX_LENGTH)));
    }
    if !is_qualified_name_part(name) {
        let rule = regex_error(QUALIFIED_NAME_ERR_MSG, QUALIFIED_NAME_FMT, QUALIFIED_NAME_EXAMPLES);
        errors.push(format!("name part {rule}"));
    }
    errors
}

/// `IsValidLabelValue`: empty, or up to 63 characters of a qualified name part's alphabet.
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LENGTH {
        errors.push(max_len_error(LABEL_VALUE_MAX_LENGTH));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errors.push(regex_error(LABEL_VALUE_ERR_MSG, LABEL_VALUE_FMT, &["MyValue", "my_value", "12345"]));
    }
    errors
}

/// `IsDNS1123Label`: up to 63 characters of `[a-z0-9]([-a-z0-9]*[a-z0-9])?` (namespace and
/// Service names, container and port names). A valid subdomain is told it may not have dots.
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errors.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
    }
    if !is_dns1123_label_shaped(value) {
        if is_dns1123_subdomain_shaped(value) {
            errors.push("must not contain dots".to_string());
        } else {
            errors.push(regex_error(DNS1123_LABEL_ERR_MSG, DNS1123_LABEL_FMT, &["my-name", "123-abc"]));
        }
    }
    errors
}

/// `IsDNS1123Subdomain`: up to 253 characters of dot-separated labels (most object names).
/// As upstream, only the whole length is limited, not each label's.
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errors.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !is_dns1123_subdomain_shaped(value) {
        errors.push(regex_error(DNS1123_SUBDOMAIN_ERR_MSG, DNS1123_SUBDOMAIN_FMT, &["example.com"]));
    }
    errors
}

/// `MaxLenError`.
pub fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// `EmptyError`.
pub fn empty_error() -> &'static str {
    "must be non-empty"
}

/// `RegexError`: the rule, its examples and the regular expression, with upstream's spacing
/// (each example is followed by `, ` and joined with ` or `).
pub fn regex_error(message: &str, format: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{message} (regex used for validation is '{format}')");
    }
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!("{message} (e.g. {}regex used for validation is '{format}')", examples.join(" or "))
}

/// Matches `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
fn is_dns1123_label_shaped(value: &str) -> bool {
    bounded_by(value, |b| b.is_ascii_lowercase() || b.is_ascii_digit(), |b| b == b'-')
}

/// Matches the subdomain regex: labels joined by single dots.
fn is_dns1123_subdomain_shaped(value: &str) -> bool {
    value.split('.').all(is_dns1123_label_shaped)
}

/// Matches `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn is_qualified_name_part(value: &str) -> bool {
    bounded_by(value, |b| b.is_ascii_alphanumeric(), |b| matches!(b, b'-' | b'_' | b'.'))
}

/// Non-empty, starts and ends with an `edge` byte, and has only `edge` or `inner` bytes between.
fn bounded_by(value: &str, edge: impl Fn(u8) -> bool, inner: impl Fn(u8) -> bool) -> bool {
    let bytes = value.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => edge(first) && edge(last) && bytes.iter().all(|&b| edge(b) || inner(b)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LABEL_RULE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    const SUBDOMAIN_RULE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

    #[test]
    fn dns_labels_report_length_dots_and_shape() {
        assert!(is_dns1123_label("web-1").is_empty());
        assert_eq!(is_dns1123_label("a.b"), ["must not contain dots"]);
        assert_eq!(is_dns1123_label("Web"), [LABEL_RULE]);
        assert_eq!(is_dns1123_label(&"a".repeat(64)), ["must be no more than 63 characters"]);
        assert_eq!(is_dns1123_label(""), [LABEL_RULE]);
    }

    #[test]
    fn dns_subdomains_limit_only_the_whole_length() {
        assert!(is_dns1123_subdomain("web-1.a").is_empty());
        assert!(is_dns1123_subdomain(&"p".repeat(253)).is_empty());
        assert_eq!(is_dns1123_subdomain(&"p".repeat(254)), ["must be no more than 253 characters"]);
        assert_eq!(is_dns1123_subdomain("a..b"), [SUBDOMAIN_RULE]);
        assert_eq!(is_dns1123_subdomain("-web"), [SUBDOMAIN_RULE]);
    }

    #[test]
    fn qualified_names_and_label_values() {
        assert!(is_qualified_name("app.kubernetes.io/name").is_empty());
        assert_eq!(is_qualified_name("/a"), ["prefix part must be non-empty"]);
        assert_eq!(is_qualified_name(&"k".repeat(64)), ["name part must be no more than 63 characters"]);
        assert_eq!(is_qualified_name("Example.com/a"), [format!("prefix part {SUBDOMAIN_RULE}")]);
        assert!(is_valid_label_value("").is_empty());
        assert_eq!(is_valid_label_value(&"v".repeat(64)), ["must be no more than 63 characters"]);
        assert_eq!(is_valid_label_value("-b").len(), 1);
    }
}
