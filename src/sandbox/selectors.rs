//! Label and field selectors, parsed, validated and applied the way kube-apiserver v1.33 does.
//!
//! * Label selectors follow `k8s.io/apimachinery/pkg/labels/selector.go` (`Parse`,
//!   `NewRequirement`, `Requirement.Matches`) and `metav1.LabelSelectorAsSelector`, including
//!   the wording of their errors.
//! * Field selectors follow `k8s.io/apimachinery/pkg/fields/selector.go` for the grammar, then
//!   the two layers kube-apiserver applies per kind: the field label conversion funcs registered
//!   in `pkg/apis/<group>/<version>/conversion.go` decide which labels a request may use (and
//!   rename aliases), and the registries' `ToSelectableFields` decide what each label reads from
//!   the object. The two lists differ: pods accept `status.podIPs` but never project it, so it
//!   reads as empty; `apps/v1` registers no conversion at all, so ReplicaSets take
//!   `metadata.*` only.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::{Map, Value};

use super::resources::ResourceType;

// ---------------------------------------------------------------------------------------------
// Label selectors
// ---------------------------------------------------------------------------------------------

/// A label selector: every requirement must match (an AND), or, for a null `metav1.LabelSelector`,
/// nothing matches at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelSelector {
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

impl LabelSelector {
    /// Matches every object (the empty selector).
    pub fn everything() -> LabelSelector {
        LabelSelector { requirements: Vec::new(), matches_nothing: false }
    }

    /// Matches no object (what a null `metav1.LabelSelector` means).
    pub fn nothing() -> LabelSelector {
        LabelSelector { requirements: Vec::new(), matches_nothing: true }
    }

    /// Parses the text form (`?labelSelector=`, `kubectl -l`), as `labels.Parse`. The empty
    /// string selects everything.
    pub fn parse(text: &str) -> Result<LabelSelector, String> {
        let mut requirements = Parser::new(text).parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements, matches_nothing: false })
    }

    /// Converts a `metav1.LabelSelector` (`matchLabels`, `matchExpressions`), as
    /// `metav1.LabelSelectorAsSelector`: null matches nothing, an empty object everything.
    pub fn from_label_selector_object(selector: &Value) -> Result<LabelSelector, String> {
        let fields = match selector {
            Value::Null => return Ok(LabelSelector::nothing()),
            Value::Object(fields) => fields,
            other => return Err(format!("invalid label selector: expected an object, got {other}")),
        };
        let match_labels = optional_member(fields, "matchLabels", Value::as_object, "an object")?;
        let expressions = optional_member(fields, "matchExpressions", Value::as_array, "an array")?;
        if match_labels.is_none_or(Map::is_empty) && expressions.is_none_or(|e| e.is_empty()) {
            return Ok(LabelSelector::everything());
        }
        let mut requirements = Vec::new();
        for (key, value) in match_labels.into_iter().flatten() {
            let value = value.as_str().ok_or_else(|| format!("matchLabels[{key}] must be a string"))?;
            requirements.push(Requirement::new(key, Operator::Equals, vec![value.to_string()])?);
        }
        for expression in expressions.into_iter().flatten() {
            requirements.push(expression_requirement(expression)?);
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements, matches_nothing: false })
    }

    /// Selects exactly the given labels (a ReplicationController's or Service's `selector` map),
    /// as `labels.SelectorFromSet`: an empty map selects everything. Values are not validated.
    pub fn from_set(labels: &Map<String, Value>) -> LabelSelector {
        let requirements = labels
            .iter()
            .map(|(key, value)| Requirement {
                key: key.clone(),
                operator: Operator::Equals,
                values: vec![value.as_str().unwrap_or_default().to_string()],
            })
            .collect();
        LabelSelector { requirements, matches_nothing: false }
    }

    /// Whether the selector restricts nothing (selects every object).
    pub fn is_empty(&self) -> bool {
        !self.matches_nothing && self.requirements.is_empty()
    }

    /// Whether a label set (`metadata.labels`) satisfies the selector.
    pub fn matches(&self, labels: &Map<String, Value>) -> bool {
        !self.matches_nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether an object's `metadata.labels` (absent: no labels) satisfy the selector.
    pub fn matches_object(&self, object: &Value) -> bool {
        let empty = Map::new();
        let labels = object.pointer("/metadata/labels").and_then(Value::as_object).unwrap_or(&empty);
        self.matches(labels)
    }
}

/// Upstream's `String()`: requirements joined by `,`, values of `in`/`notin` sorted.
impl fmt::Display for LabelSelector {
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
    expected: &str,
) -> Result<Option<&'a T>, String> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => cast(value).map(Some).ok_or_else(|| format!("{name} must be {expected}")),
    }
}

/// One `matchExpressions` entry as a requirement.
fn expression_requirement(expression: &Value) -> Result<Requirement, String> {
    let text = |name: &str| expression.get(name).and_then(Value::as_str).unwrap_or_default();
    let operator = match text("operator") {
        "In" => Operator::In,
        "NotIn" => Operator::NotIn,
        "Exists" => Operator::Exists,
        "DoesNotExist" => Operator::DoesNotExist,
        other => return Err(format!("{} is not a valid label selector operator", go_quote(other))),
    };
    let values = match expression.get("values") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str().map(str::to_string).ok_or_else(|| "matchExpressions values must be strings".to_string())
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("matchExpressions values must be an array".to_string()),
    };
    Requirement::new(text("key"), operator, values)
}

impl Requirement {
    /// Validates a requirement as `labels.NewRequirement` with no field path: errors name the
    /// paths `key`, `values` and `values[i][key]`.
    fn new(key: &str, operator: Operator, values: Vec<String>) -> Result<Requirement, String> {
        let mut errors = Vec::new();
        let key_errors = qualified_name_errors(key);
        if !key_errors.is_empty() {
            errors.push(invalid("key", &go_quote(key), &key_errors.join("; ")));
        }
        errors.extend(operator_errors(operator, &values));
        for (i, value) in values.iter().enumerate() {
            let value_errors = label_value_errors(value);
            if !value_errors.is_empty() {
                errors.push(invalid(&format!("values[{i}][{key}]"), &go_quote(value), &value_errors.join("; ")));
            }
        }
        match aggregate(errors) {
            Some(message) => Err(message),
            None => Ok(Requirement { key: key.to_string(), operator, values }),
        }
    }

    fn has_value(&self, value: &str) -> bool {
        self.values.iter().any(|v| v == value)
    }

    /// `Requirement.Matches`: `!=` and `notin` also match when the key is absent.
    fn matches(&self, labels: &Map<String, Value>) -> bool {
        let value = labels.get(&self.key).map(|v| v.as_str().unwrap_or_default());
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
fn operator_errors(operator: Operator, values: &[String]) -> Vec<String> {
    let list = go_json_list(values);
    match operator {
        Operator::In | Operator::NotIn if values.is_empty() => {
            vec![invalid("values", &list, "for 'in', 'notin' operators, values set can't be empty")]
        }
        Operator::Equals | Operator::DoubleEquals | Operator::NotEquals if values.len() != 1 => {
            vec![invalid("values", &list, "exact-match compatibility requires one single value")]
        }
        Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
            vec![invalid("values", &list, "values set must be empty for exists and does not exist")]
        }
        Operator::GreaterThan | Operator::LessThan => integer_errors(values),
        _ => Vec::new(),
    }
}

/// `gt`/`lt` take exactly one value, an integer.
fn integer_errors(values: &[String]) -> Vec<String> {
    let mut errors = Vec::new();
    if values.len() != 1 {
        errors.push(invalid(
            "values",
            &go_json_list(values),
            "for 'Gt', 'Lt' operators, exactly one value is required",
        ));
    }
    for (i, value) in values.iter().enumerate() {
        if value.parse::<i64>().is_err() {
            let detail = "for 'Gt', 'Lt' operators, the value must be an integer";
            errors.push(invalid(&format!("values[{i}]"), &go_quote(value), detail));
        }
    }
    errors
}

// --- Lexer (a byte-for-byte port of upstream's, including its quirks) --------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Error,
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

/// The binary operators as upstream lists them in "expected" errors.
const BINARY_OPERATORS: &str = "in, notin, =, ==, !=, gt, lt";

/// `string2token`: the literal tokens.
fn literal_token(literal: &[u8]) -> Option<Token> {
    Some(match literal {
        b")" => Token::ClosedPar,
        b"," => Token::Comma,
        b"!" => Token::DoesNotExist,
        b"==" => Token::DoubleEquals,
        b"=" => Token::Equals,
        b">" => Token::GreaterThan,
        b"in" => Token::In,
        b"<" => Token::LessThan,
        b"!=" => Token::NotEquals,
        b"notin" => Token::NotIn,
        b"(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special_symbol(byte: u8) -> bool {
    matches!(byte, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

struct Lexer<'a> {
    text: &'a [u8],
    pos: usize,
}

impl Lexer<'_> {
    /// The next byte, or 0 at the end (a NUL byte in the input also reads as an end, as upstream).
    fn read(&mut self) -> u8 {
        match self.text.get(self.pos) {
            Some(&byte) => {
                self.pos += 1;
                byte
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    /// The next token and its literal.
    fn lex(&mut self) -> (Token, String) {
        let mut byte = self.read();
        while is_whitespace(byte) {
            byte = self.read();
        }
        if byte == 0 {
            return (Token::EndOfString, String::new());
        }
        self.unread();
        if is_special_symbol(byte) { self.scan_special_symbol() } else { self.scan_identifier_or_keyword() }
    }

    fn scan_identifier_or_keyword(&mut self) -> (Token, String) {
        let mut buffer = Vec::new();
        loop {
            let byte = self.read();
            if byte == 0 {
                break;
            }
            if is_special_symbol(byte) || is_whitespace(byte) {
                self.unread();
                break;
            }
            buffer.push(byte);
        }
        let token = literal_token(&buffer).unwrap_or(Token::Identifier);
        (token, String::from_utf8_lossy(&buffer).into_owned())
    }

    /// The longest run of operator characters that still forms a token (`!=` but `!` + `(`).
    fn scan_special_symbol(&mut self) -> (Token, String) {
        let mut buffer = Vec::new();
        let mut last: Option<(Token, usize)> = None;
        loop {
            let byte = self.read();
            if byte == 0 {
                break;
            }
            if !is_special_symbol(byte) {
                self.unread();
                break;
            }
            buffer.push(byte);
            match literal_token(&buffer) {
                Some(token) => last = Some((token, buffer.len())),
                None if last.is_some() => {
                    self.unread();
                    break;
                }
                None => {}
            }
        }
        match last {
            Some((token, len)) => (token, String::from_utf8_lossy(&buffer[..len]).into_owned()),
            None => (Token::Error, format!("error expected: keyword found '{}'", String::from_utf8_lossy(&buffer))),
        }
    }
}

// --- Parser -------------------------------------------------------------------------------------

/// Whether `in`/`notin` are keywords (after a key) or plain identifiers (keys and values).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser {
    items: Vec<(Token, String)>,
    position: usize,
}

impl Parser {
    /// Lexes the whole text up front, as upstream's `scan`.
    fn new(text: &str) -> Parser {
        let mut lexer = Lexer { text: text.as_bytes(), pos: 0 };
        let mut items = Vec::new();
        loop {
            let item = lexer.lex();
            let done = item.0 == Token::EndOfString;
            items.push(item);
            if done {
                return Parser { items, position: 0 };
            }
        }
    }

    fn lookahead(&self, context: Context) -> (Token, String) {
        let (token, literal) = self.items.get(self.position).cloned().unwrap_or((Token::EndOfString, String::new()));
        match token {
            Token::In | Token::NotIn if context == Context::Values => (Token::Identifier, literal),
            _ => (token, literal),
        }
    }

    fn consume(&mut self, context: Context) -> (Token, String) {
        let item = self.lookahead(context);
        self.position += 1;
        item
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (token, literal) = self.lookahead(Context::Values);
            match token {
                Token::Identifier | Token::DoesNotExist => {
                    let requirement =
                        self.parse_requirement().map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(requirement);
                    if self.parse_separator()? {
                        return Ok(requirements);
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => return Err(format!("found '{literal}', expected: !, identifier, or 'end of string'")),
            }
        }
    }

    /// After a requirement: the end (true) or a comma followed by another requirement (false).
    fn parse_separator(&mut self) -> Result<bool, String> {
        let (token, literal) = self.consume(Context::Values);
        match token {
            Token::EndOfString => Ok(true),
            Token::Comma => match self.lookahead(Context::Values) {
                (Token::Identifier | Token::DoesNotExist, _) => Ok(false),
                (_, next) => Err(format!("found '{next}', expected: identifier after ','")),
            },
            _ => Err(format!("found '{literal}', expected: ',' or 'end of string'")),
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, unary) = self.parse_key_and_infer_operator()?;
        if let Some(operator) = unary {
            return Requirement::new(&key, operator, Vec::new());
        }
        let operator = self.parse_operator()?;
        let values = match operator {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        Requirement::new(&key, operator, values)
    }

    /// The key, and the operator when it is unary: `!key` (whatever follows) or a bare `key`.
    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<Operator>), String> {
        let mut operator = None;
        let (mut token, mut literal) = self.consume(Context::Values);
        if token == Token::DoesNotExist {
            operator = Some(Operator::DoesNotExist);
            (token, literal) = self.consume(Context::Values);
        }
        if token != Token::Identifier {
            return Err(format!("found '{literal}', expected: identifier"));
        }
        let key_errors = qualified_name_errors(&literal);
        if !key_errors.is_empty() {
            return Err(invalid("<nil>", &go_quote(&literal), &key_errors.join("; ")));
        }
        let (next, _) = self.lookahead(Context::Values);
        if operator.is_none() && matches!(next, Token::EndOfString | Token::Comma) {
            operator = Some(Operator::Exists);
        }
        Ok((literal, operator))
    }

    fn parse_operator(&mut self) -> Result<Operator, String> {
        let (token, literal) = self.consume(Context::KeyAndOperator);
        Ok(match token {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => return Err(format!("found '{literal}', expected: {BINARY_OPERATORS}")),
        })
    }

    /// `(a,b,...)`: a set, so sorted and deduplicated; `()` is the one empty value.
    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (token, literal) = self.consume(Context::Values);
        if token != Token::OpenPar {
            return Err(format!("found '{literal}' expected: '('"));
        }
        let (token, literal) = self.lookahead(Context::Values);
        match token {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                if self.consume(Context::Values).0 != Token::ClosedPar {
                    return Err(format!("found '{literal}', expected: ')'"));
                }
                Ok(values.into_iter().collect())
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{literal}', expected: ',', ')' or identifier")),
        }
    }

    /// A comma-separated list of possibly empty identifiers, up to (not including) `)`.
    fn parse_identifiers_list(&mut self) -> Result<BTreeSet<String>, String> {
        let mut values = BTreeSet::new();
        loop {
            let (token, literal) = self.consume(Context::Values);
            match token {
                Token::Identifier => {
                    values.insert(literal);
                    match self.lookahead(Context::Values) {
                        (Token::Comma, _) => continue,
                        (Token::ClosedPar, _) => return Ok(values),
                        (_, next) => return Err(format!("found '{next}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.insert(String::new());
                    }
                    match self.lookahead(Context::Values).0 {
                        Token::ClosedPar => {
                            values.insert(String::new());
                            return Ok(values);
                        }
                        Token::Comma => {
                            values.insert(String::new());
                        }
                        _ => {}
                    }
                }
                _ => return Err(format!("found '{literal}', expected: ',', or identifier")),
            }
        }
    }

    /// The single value of `=`, `==`, `!=`, `>`, `<`; missing means the empty value.
    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        if matches!(self.lookahead(Context::Values).0, Token::EndOfString | Token::Comma) {
            return Ok(vec![String::new()]);
        }
        match self.consume(Context::Values) {
            (Token::Identifier, literal) => Ok(vec![literal]),
            (_, literal) => Err(format!("found '{literal}', expected: identifier")),
        }
    }
}

// --- Validation (k8s.io/apimachinery/pkg/util/validation) ---------------------------------------

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' \
    or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
    characters, '-' or '.', and must start and end with an alphanumeric character";
/// Longest name part of a label key, and longest label value.
const LABEL_MAX_LENGTH: usize = 63;
const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;

/// `RegexError`, double spaces included.
fn regex_error(message: &str, format: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!("{message} (e.g. {}regex used for validation is '{format}')", examples.join(" or "))
}

fn max_length_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// `IsQualifiedName`: an optional DNS subdomain prefix and `/`, then a name of up to 63
/// characters.
fn qualified_name_errors(value: &str) -> Vec<String> {
    let parts: Vec<&str> = value.split('/').collect();
    let mut errors = Vec::new();
    let name = match parts.as_slice() {
        [name] => name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_string());
            } else {
                errors.extend(dns1123_subdomain_errors(prefix).into_iter().map(|e| format!("prefix part {e}")));
            }
            name
        }
        _ => {
            let rule = regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"]);
            let suffix = "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')";
            return vec![format!("a qualified name {rule} {suffix}")];
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else if name.len() > LABEL_MAX_LENGTH {
        errors.push(format!("name part {}", max_length_error(LABEL_MAX_LENGTH)));
    }
    if !is_qualified_name_part(name) {
        let rule = regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"]);
        errors.push(format!("name part {rule}"));
    }
    errors
}

/// `IsValidLabelValue`: empty, or up to 63 characters of a qualified name's charset.
fn label_value_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > LABEL_MAX_LENGTH {
        errors.push(max_length_error(LABEL_MAX_LENGTH));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errors.push(regex_error(LABEL_VALUE_ERR, LABEL_VALUE_FMT, &["MyValue", "my_value", "12345"]));
    }
    errors
}

fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errors.push(max_length_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    let is_label = |label: &str| bounded_by(label, |b| b.is_ascii_lowercase() || b.is_ascii_digit(), |b| b == b'-');
    if !value.split('.').all(is_label) {
        errors.push(regex_error(DNS1123_SUBDOMAIN_ERR, DNS1123_SUBDOMAIN_FMT, &["example.com"]));
    }
    errors
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
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

/// A `field.Invalid` error: `<path>: Invalid value: <value>: <detail>`.
fn invalid(path: &str, rendered_value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {rendered_value}: {detail}")
}

/// `ErrorList.ToAggregate().Error()`: duplicates dropped; one error alone, several in brackets.
fn aggregate(errors: Vec<String>) -> Option<String> {
    let mut unique: Vec<String> = Vec::new();
    for error in errors {
        if !unique.contains(&error) {
            unique.push(error);
        }
    }
    match unique.len() {
        0 => None,
        1 => unique.pop(),
        _ => Some(format!("[{}]", unique.join(", "))),
    }
}

/// Go's `%q` (`strconv.Quote`). Printability of non-ASCII characters is approximated: control,
/// whitespace, private-use and the common format characters are escaped.
fn go_quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\x07' => quoted.push_str("\\a"),
            '\x08' => quoted.push_str("\\b"),
            '\x0c' => quoted.push_str("\\f"),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            '\x0b' => quoted.push_str("\\v"),
            ' '..='~' => quoted.push(c),
            c if (c as u32) < 0x80 => quoted.push_str(&format!("\\x{:02x}", c as u32)),
            c if go_printable(c) => quoted.push(c),
            c if (c as u32) < 0x10000 => quoted.push_str(&format!("\\u{:04x}", c as u32)),
            c => quoted.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    quoted.push('"');
    quoted
}

/// Approximates Go's `unicode.IsPrint` for non-ASCII characters.
fn go_printable(c: char) -> bool {
    let format_or_private = matches!(
        c as u32,
        0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x180E | 0x200B..=0x200F | 0x202A..=0x202E
            | 0x2060..=0x206F | 0xE000..=0xF8FF | 0xFEFF | 0xFFF9..=0xFFFB | 0xF0000..
    );
    !c.is_control() && !c.is_whitespace() && !format_or_private
}

/// Go's `json.Marshal` of a string slice, where an empty slice here is always a nil one (`null`).
fn go_json_list(values: &[String]) -> String {
    if values.is_empty() {
        return "null".to_string();
    }
    let items: Vec<String> = values.iter().map(|v| go_json_string(v)).collect();
    format!("[{}]", items.join(","))
}

/// Go's `json.Marshal` of a string, with its HTML-safe escapes.
fn go_json_string(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len() + 2);
    encoded.push('"');
    for c in text.chars() {
        match c {
            '"' => encoded.push_str("\\\""),
            '\\' => encoded.push_str("\\\\"),
            '\n' => encoded.push_str("\\n"),
            '\r' => encoded.push_str("\\r"),
            '\t' => encoded.push_str("\\t"),
            '\x08' => encoded.push_str("\\b"),
            '\x0c' => encoded.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => encoded.push_str(&format!("\\u{:04x}", c as u32)),
            c if (c as u32) < 0x20 => encoded.push_str(&format!("\\u{:04x}", c as u32)),
            c => encoded.push(c),
        }
    }
    encoded.push('"');
    encoded
}

// ---------------------------------------------------------------------------------------------
// Field selectors
// ---------------------------------------------------------------------------------------------

/// A field selector, validated for one resource: every term must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

/// `label=value` or `label!=value`, with the label resolved to what it reads from an object.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldTerm {
    projection: Projection,
    value: String,
    negated: bool,
}

/// How a selectable field's value is read from the stored JSON, mirroring the registry's
/// `ToSelectableFields`, which reads the typed object: absent integers read `0`, absent
/// booleans `false`, absent strings the empty string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Projection {
    Text(&'static [&'static str]),
    Flag(&'static [&'static str]),
    Count(&'static [&'static str]),
    /// `status.podIPs[0].ip`, or the legacy `status.podIP`.
    PodIp,
    /// Accepted by the conversion but never projected: always the empty string.
    Unprojected,
    /// An Event field, at its core/v1 path or its events.k8s.io path depending on the object's
    /// `apiVersion` (both groups read the same storage).
    Event {
        core: &'static [&'static str],
        events: &'static [&'static str],
    },
    /// An Event's `source.component`, falling back to the reporting controller.
    EventSource,
}

/// What a kind's conversion func answers for a label it does not take.
#[derive(Debug, Clone, Copy)]
enum Rejection {
    /// `field label not supported: <label>` (most registered kinds).
    NotSupported,
    /// `field label "<label>" not supported for <kind>` (batch/v1 Job).
    NotSupportedForKind(&'static str),
    /// `runtime.DefaultMetaV1FieldSelectorConversion`, for kinds with no registered func.
    MetadataOnly,
}

/// A kind's accepted labels (aliases included) and what each reads.
struct FieldRules {
    fields: &'static [(&'static str, Projection)],
    rejection: Rejection,
}

impl FieldSelector {
    /// Selects every object.
    pub fn everything() -> FieldSelector {
        FieldSelector { terms: Vec::new() }
    }

    /// Parses `?fieldSelector=` for a resource, as `fields.ParseSelector` followed by the kind's
    /// field label conversion: syntax errors first, then the first unsupported label in sorted
    /// term order. The empty string selects everything.
    pub fn parse(text: &str, resource: &ResourceType) -> Result<FieldSelector, String> {
        let raw_terms = parse_field_terms(text)?;
        let rules = field_rules(resource);
        let terms = raw_terms.into_iter().map(|term| rules.resolve(term)).collect::<Result<_, _>>()?;
        Ok(FieldSelector { terms })
    }

    /// Whether the selector restricts nothing.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether an object satisfies every term.
    pub fn matches(&self, object: &Value) -> bool {
        self.terms.iter().all(|term| (term.projection.read(object) == term.value) != term.negated)
    }
}

/// A term before its label is checked against the kind.
struct RawTerm {
    label: String,
    value: String,
    negated: bool,
}

impl FieldRules {
    fn resolve(&self, term: RawTerm) -> Result<FieldTerm, String> {
        let Some(&(_, projection)) = self.fields.iter().find(|(label, _)| *label == term.label) else {
            return Err(self.rejection.message(&term.label));
        };
        Ok(FieldTerm { projection, value: term.value, negated: term.negated })
    }
}

impl Rejection {
    fn message(self, label: &str) -> String {
        match self {
            Rejection::NotSupported => format!("field label not supported: {label}"),
            Rejection::NotSupportedForKind(kind) => format!("field label {} not supported for {kind}", go_quote(label)),
            Rejection::MetadataOnly => {
                format!(
                    "{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
                    go_quote(label)
                )
            }
        }
    }
}

impl Projection {
    fn read(self, object: &Value) -> String {
        match self {
            Projection::Text(path) => text_at(object, path),
            Projection::Flag(path) => lookup(object, path).and_then(Value::as_bool).unwrap_or(false).to_string(),
            Projection::Count(path) => lookup(object, path).and_then(Value::as_i64).unwrap_or(0).to_string(),
            Projection::PodIp => match object.pointer("/status/podIPs/0/ip").and_then(Value::as_str) {
                Some(ip) => ip.to_string(),
                None => text_at(object, &["status", "podIP"]),
            },
            Projection::Unprojected => String::new(),
            Projection::Event { core, events } => text_at(object, if is_events_group(object) { events } else { core }),
            Projection::EventSource => event_source(object),
        }
    }
}

fn lookup<'a>(object: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(object, |value, key| value.get(key))
}

fn text_at(object: &Value, path: &[&str]) -> String {
    lookup(object, path).and_then(Value::as_str).unwrap_or_default().to_string()
}

/// Whether an Event object is in its events.k8s.io shape rather than core/v1's.
fn is_events_group(object: &Value) -> bool {
    object.get("apiVersion").and_then(Value::as_str).is_some_and(|v| v.starts_with("events.k8s.io/"))
}

/// `source`: the source component, or else the reporting controller.
fn event_source(object: &Value) -> String {
    let (component, controller) = if is_events_group(object) {
        (text_at(object, &["deprecatedSource", "component"]), text_at(object, &["reportingController"]))
    } else {
        (text_at(object, &["source", "component"]), text_at(object, &["reportingComponent"]))
    };
    if component.is_empty() { controller } else { component }
}

/// Splits on unescaped commas, sorts (as upstream), and parses each non-empty term.
fn parse_field_terms(text: &str) -> Result<Vec<RawTerm>, String> {
    let mut parts = split_terms(text);
    parts.sort_unstable();
    parts.into_iter().filter(|part| !part.is_empty()).map(|part| parse_field_term(text, part)).collect()
}

fn parse_field_term(selector: &str, part: &str) -> Result<RawTerm, String> {
    let Some((label, operator, value)) = split_term(part) else {
        return Err(format!("invalid selector: '{selector}'; can't understand '{part}'"));
    };
    Ok(RawTerm { label: label.to_string(), value: unescape_value(value)?, negated: operator == "!=" })
}

/// Comma-separated terms; a backslash-escaped comma stays in its term, backslash included.
fn split_terms(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' {
            terms.push(&text[start..i]);
            start = i + 1;
        }
    }
    terms.push(&text[start..]);
    terms
}

/// The first `!=`, `==` or `=` splits a term; the label cannot be escaped.
fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for operator in ["!=", "==", "="] {
            if let Some(value) = rest.strip_prefix(operator) {
                return Some((&term[..i], operator, value));
            }
        }
    }
    None
}

/// `UnescapeValue`: `\\`, `\,` and `\=` are the only escapes; a bare `,` or `=` is an error.
fn unescape_value(value: &str) -> Result<String, String> {
    let mut unescaped = String::with_capacity(value.len());
    let mut escaped = false;
    for c in value.chars() {
        if escaped {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(format!("invalid field selector: invalid escape sequence: \\{c}"));
            }
            unescaped.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' || c == '=' {
            // Upstream formats the rune with %v: its code point in decimal.
            return Err(format!("invalid field selector: unescaped character in value: {}", c as u32));
        } else {
            unescaped.push(c);
        }
    }
    if escaped {
        return Err("invalid field selector: invalid escape sequence: \\".to_string());
    }
    Ok(unescaped)
}

// --- Per-kind tables ----------------------------------------------------------------------------

const NAME: (&str, Projection) = ("metadata.name", Projection::Text(&["metadata", "name"]));
const NAMESPACE: (&str, Projection) = ("metadata.namespace", Projection::Text(&["metadata", "namespace"]));

/// Kinds with no registered conversion (every resource not listed in [`field_rules`]).
static DEFAULT_RULES: FieldRules = FieldRules { fields: &[NAME, NAMESPACE], rejection: Rejection::MetadataOnly };

static POD_RULES: FieldRules = FieldRules {
    fields: &[
        NAME,
        NAMESPACE,
        ("spec.nodeName", Projection::Text(&["spec", "nodeName"])),
        ("spec.restartPolicy", Projection::Text(&["spec", "restartPolicy"])),
        ("spec.schedulerName", Projection::Text(&["spec", "schedulerName"])),
        ("spec.serviceAccountName", Projection::Text(&["spec", "serviceAccountName"])),
        ("spec.hostNetwork", Projection::Flag(&["spec", "hostNetwork"])),
        ("status.phase", Projection::Text(&["status", "phase"])),
        ("status.podIP", Projection::PodIp),
        ("status.podIPs", Projection::Unprojected),
        ("status.nominatedNodeName", Projection::Text(&["status", "nominatedNodeName"])),
        // Old v1 clients' name for spec.nodeName.
        ("spec.host", Projection::Text(&["spec", "nodeName"])),
    ],
    rejection: Rejection::NotSupported,
};

static NODE_RULES: FieldRules = FieldRules {
    fields: &[NAME, ("spec.unschedulable", Projection::Flag(&["spec", "unschedulable"]))],
    rejection: Rejection::NotSupported,
};

static NAMESPACE_RULES: FieldRules = FieldRules {
    fields: &[NAME, ("status.phase", Projection::Text(&["status", "phase"]))],
    rejection: Rejection::NotSupported,
};

static SECRET_RULES: FieldRules = FieldRules {
    fields: &[NAME, NAMESPACE, ("type", Projection::Text(&["type"]))],
    rejection: Rejection::NotSupported,
};

static SERVICE_RULES: FieldRules = FieldRules {
    fields: &[
        NAME,
        NAMESPACE,
        ("spec.clusterIP", Projection::Text(&["spec", "clusterIP"])),
        ("spec.type", Projection::Text(&["spec", "type"])),
    ],
    rejection: Rejection::NotSupported,
};

static REPLICATION_CONTROLLER_RULES: FieldRules = FieldRules {
    fields: &[NAME, NAMESPACE, ("status.replicas", Projection::Count(&["status", "replicas"]))],
    rejection: Rejection::NotSupported,
};

static JOB_RULES: FieldRules = FieldRules {
    fields: &[NAME, NAMESPACE, ("status.successful", Projection::Count(&["status", "succeeded"]))],
    rejection: Rejection::NotSupportedForKind("Job"),
};

static CSR_RULES: FieldRules = FieldRules {
    fields: &[NAME, ("spec.signerName", Projection::Text(&["spec", "signerName"]))],
    rejection: Rejection::NotSupported,
};

const fn event(core: &'static [&'static str], events: &'static [&'static str]) -> Projection {
    Projection::Event { core, events }
}

const INVOLVED_KIND: Projection = event(&["involvedObject", "kind"], &["regarding", "kind"]);
const INVOLVED_NAMESPACE: Projection = event(&["involvedObject", "namespace"], &["regarding", "namespace"]);
const INVOLVED_NAME: Projection = event(&["involvedObject", "name"], &["regarding", "name"]);
const INVOLVED_UID: Projection = event(&["involvedObject", "uid"], &["regarding", "uid"]);
const INVOLVED_API_VERSION: Projection = event(&["involvedObject", "apiVersion"], &["regarding", "apiVersion"]);
const INVOLVED_RESOURCE_VERSION: Projection =
    event(&["involvedObject", "resourceVersion"], &["regarding", "resourceVersion"]);
const INVOLVED_FIELD_PATH: Projection = event(&["involvedObject", "fieldPath"], &["regarding", "fieldPath"]);
const REASON: Projection = event(&["reason"], &["reason"]);
const REPORTING: Projection = event(&["reportingComponent"], &["reportingController"]);
const TYPE: Projection = event(&["type"], &["type"]);

/// core/v1 Events.
static EVENT_RULES: FieldRules = FieldRules {
    fields: &[
        ("involvedObject.kind", INVOLVED_KIND),
        ("involvedObject.namespace", INVOLVED_NAMESPACE),
        ("involvedObject.name", INVOLVED_NAME),
        ("involvedObject.uid", INVOLVED_UID),
        ("involvedObject.apiVersion", INVOLVED_API_VERSION),
        ("involvedObject.resourceVersion", INVOLVED_RESOURCE_VERSION),
        ("involvedObject.fieldPath", INVOLVED_FIELD_PATH),
        ("reason", REASON),
        ("reportingComponent", REPORTING),
        ("source", Projection::EventSource),
        ("type", TYPE),
        NAMESPACE,
        NAME,
    ],
    rejection: Rejection::NotSupported,
};

/// events.k8s.io/v1 Events: its own field names, mapped onto the core ones (which it rejects).
static EVENTS_GROUP_RULES: FieldRules = FieldRules {
    fields: &[
        ("reason", REASON),
        ("regarding.kind", INVOLVED_KIND),
        ("regarding.namespace", INVOLVED_NAMESPACE),
        ("regarding.name", INVOLVED_NAME),
        ("regarding.uid", INVOLVED_UID),
        ("regarding.apiVersion", INVOLVED_API_VERSION),
        ("regarding.resourceVersion", INVOLVED_RESOURCE_VERSION),
        ("regarding.fieldPath", INVOLVED_FIELD_PATH),
        ("reportingController", REPORTING),
        ("source", Projection::EventSource),
        ("type", TYPE),
        NAMESPACE,
        NAME,
    ],
    rejection: Rejection::NotSupported,
};

/// The field label rules of a resource's kind (upstream keys them by group/version/kind).
fn field_rules(resource: &ResourceType) -> &'static FieldRules {
    match (resource.group, resource.kind) {
        ("", "Pod") => &POD_RULES,
        ("", "Node") => &NODE_RULES,
        ("", "Namespace") => &NAMESPACE_RULES,
        ("", "Secret") => &SECRET_RULES,
        ("", "Service") => &SERVICE_RULES,
        ("", "ReplicationController") => &REPLICATION_CONTROLLER_RULES,
        ("", "Event") => &EVENT_RULES,
        ("events.k8s.io", "Event") => &EVENTS_GROUP_RULES,
        ("batch", "Job") => &JOB_RULES,
        ("certificates.k8s.io", "CertificateSigningRequest") => &CSR_RULES,
        _ => &DEFAULT_RULES,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::sandbox::resources;

    fn labels(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("test labels are an object")
    }

    fn selects(selector: &str, set: Value) -> bool {
        LabelSelector::parse(selector).expect("test selector parses").matches(&labels(set))
    }

    fn parse_error(selector: &str) -> String {
        LabelSelector::parse(selector).expect_err("test selector is invalid")
    }

    const NAME_RULE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end \
        with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation \
        is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    const VALUE_RULE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', \
        '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or \
        '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

    // --- label selector: grammar and semantics ---

    #[test]
    fn empty_selector_matches_everything() {
        for text in ["", "   ", "\t\n"] {
            let selector = LabelSelector::parse(text).expect("empty parses");
            assert!(selector.is_empty());
            assert!(selector.matches(&Map::new()));
            assert!(selector.matches_object(&json!({"metadata": {"labels": {"a": "b"}}})));
        }
    }

    #[test]
    fn equality_operators() {
        for selector in ["app=web", "app==web", " app = web "] {
            assert!(selects(selector, json!({"app": "web"})), "{selector}");
            assert!(!selects(selector, json!({"app": "db"})), "{selector}");
            assert!(!selects(selector, json!({})), "{selector}");
        }
        assert!(selects("app=", json!({"app": ""})));
        assert!(!selects("app=", json!({})));
    }

    #[test]
    fn not_equals_matches_absent_key() {
        assert!(selects("app!=web", json!({"app": "db"})));
        assert!(!selects("app!=web", json!({"app": "web"})));
        assert!(selects("app!=web", json!({})));
    }

    #[test]
    fn set_operators() {
        assert!(selects("env in (prod, dev)", json!({"env": "dev"})));
        assert!(!selects("env in (prod,dev)", json!({"env": "qa"})));
        assert!(!selects("env in (prod,dev)", json!({})));
        assert!(selects("env notin (prod,dev)", json!({"env": "qa"})));
        assert!(!selects("env notin (prod,dev)", json!({"env": "prod"})));
        assert!(selects("env notin (prod,dev)", json!({})));
    }

    #[test]
    fn empty_values_in_sets() {
        assert!(selects("x in ()", json!({"x": ""})));
        assert!(selects("x in (,a)", json!({"x": ""})));
        assert!(selects("x in (a,)", json!({"x": ""})));
        assert!(selects("x in (a,,b)", json!({"x": ""})));
        assert!(!selects("x in (a,b)", json!({"x": ""})));
        // Upstream's own example.
        let selector = LabelSelector::parse("x in (foo,,baz),y,z notin ()").expect("parses");
        assert!(selector.matches(&labels(json!({"x": "", "y": "1"}))));
        assert!(!selector.matches(&labels(json!({"x": "", "y": "1", "z": ""}))));
    }

    #[test]
    fn exists_and_does_not_exist() {
        assert!(selects("app", json!({"app": ""})));
        assert!(!selects("app", json!({"other": "x"})));
        assert!(selects("!app", json!({"other": "x"})));
        assert!(!selects("!app", json!({"app": "x"})));
        assert!(selects(" ! app ", json!({})));
    }

    #[test]
    fn greater_and_less_than() {
        assert!(selects("replicas>3", json!({"replicas": "4"})));
        assert!(!selects("replicas>3", json!({"replicas": "3"})));
        assert!(selects("replicas<3", json!({"replicas": "2"})));
        assert!(!selects("replicas < 3", json!({"replicas": "3"})));
        assert!(!selects("replicas>3", json!({"replicas": "many"})));
        assert!(!selects("replicas>3", json!({})));
        // Integers with a sign parse, but the value must still be a label value.
        assert!(parse_error("replicas>+3").starts_with("unable to parse requirement: values[0][replicas]: "));
    }

    #[test]
    fn requirements_are_anded() {
        let selector = "app=web,tier notin (db),!legacy,version>1";
        assert!(selects(selector, json!({"app": "web", "tier": "front", "version": "2"})));
        assert!(!selects(selector, json!({"app": "web", "version": "2", "legacy": "yes"})));
        assert!(!selects(selector, json!({"app": "web", "tier": "db", "version": "2"})));
    }

    #[test]
    fn keywords_are_identifiers_as_keys_and_values() {
        assert!(selects("in=notin", json!({"in": "notin"})));
        assert!(selects("a in (in,notin)", json!({"a": "notin"})));
        assert!(selects("notin notin (in)", json!({"notin": "x"})));
    }

    #[test]
    fn prefixed_keys() {
        assert!(selects("app.kubernetes.io/name=web", json!({"app.kubernetes.io/name": "web"})));
        assert!(selects("!example.com/x", json!({})));
    }

    #[test]
    fn matches_object_reads_metadata_labels() {
        let selector = LabelSelector::parse("app=web").expect("parses");
        assert!(selector.matches_object(&json!({"metadata": {"labels": {"app": "web"}}})));
        assert!(!selector.matches_object(&json!({"metadata": {"name": "x"}})));
        assert!(LabelSelector::parse("app!=web").expect("parses").matches_object(&json!({})));
    }

    #[test]
    fn display_is_upstreams_string() {
        let selector =
            LabelSelector::parse("z in (b,a), !y, x==1, w!=2, v>3, u<4, t notin (c), s, r=").expect("parses");
        assert_eq!(selector.to_string(), "r=,s,t notin (c),u<4,v>3,w!=2,x==1,!y,z in (a,b)");
    }

    // --- label selector: errors ---

    #[test]
    fn syntax_errors() {
        let cases = [
            ("=a", "found '=', expected: !, identifier, or 'end of string'"),
            (",a", "found ',', expected: !, identifier, or 'end of string'"),
            ("a,", "found '', expected: identifier after ','"),
            ("a,,b", "found ',', expected: identifier after ','"),
            ("a=b c", "found 'c', expected: ',' or 'end of string'"),
            ("a=b=c", "found '=', expected: ',' or 'end of string'"),
            ("!a=b", "found '=', expected: ',' or 'end of string'"),
            ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
            ("a(b)", "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt"),
            ("!", "unable to parse requirement: found '', expected: identifier"),
            ("!=a", "found '!=', expected: !, identifier, or 'end of string'"),
            ("! =a", "unable to parse requirement: found '=', expected: identifier"),
            ("!!a", "unable to parse requirement: found '!', expected: identifier"),
            ("a in b", "unable to parse requirement: found 'b' expected: '('"),
            ("a in", "unable to parse requirement: found '' expected: '('"),
            ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
            ("a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'"),
            ("a in (b,", "unable to parse requirement: found '', expected: ',', or identifier"),
            ("a in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
            ("a=(", "unable to parse requirement: found '(', expected: identifier"),
        ];
        for (selector, message) in cases {
            assert_eq!(parse_error(selector), message, "{selector}");
        }
    }

    #[test]
    fn gt_lt_need_integers() {
        let message = "unable to parse requirement: values[0]: Invalid value: \"abc\": for 'Gt', 'Lt' operators, \
            the value must be an integer";
        assert_eq!(parse_error("a>abc"), message);
        assert_eq!(
            parse_error("a<"),
            "unable to parse requirement: values[0]: Invalid value: \"\": for 'Gt', 'Lt' operators, the value must \
             be an integer"
        );
        // A negative bound is an integer but not a label value.
        assert_eq!(
            parse_error("a>-1"),
            format!("unable to parse requirement: values[0][a]: Invalid value: \"-1\": {VALUE_RULE}")
        );
    }

    #[test]
    fn invalid_keys() {
        assert_eq!(
            parse_error("-a"),
            format!("unable to parse requirement: <nil>: Invalid value: \"-a\": name part {NAME_RULE}")
        );
        assert_eq!(
            parse_error("a/b/c=d"),
            format!(
                "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a qualified name {NAME_RULE} with an \
                 optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )
        );
        assert_eq!(
            parse_error("/a"),
            "unable to parse requirement: <nil>: Invalid value: \"/a\": prefix part must be non-empty".to_string()
        );
        assert_eq!(
            parse_error("a/"),
            format!(
                "unable to parse requirement: <nil>: Invalid value: \"a/\": name part must be non-empty; name part \
                 {NAME_RULE}"
            )
        );
        let long = "k".repeat(64);
        assert_eq!(
            parse_error(&long),
            format!(
                "unable to parse requirement: <nil>: Invalid value: \"{long}\": name part must be no more than 63 \
                 characters"
            )
        );
        assert_eq!(
            parse_error("Example.com/a"),
            "unable to parse requirement: <nil>: Invalid value: \"Example.com/a\": prefix part a lowercase RFC 1123 \
             subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end \
             with an alphanumeric character \
             (e.g. 'example.com', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        );
        assert!(LabelSelector::parse(&"k".repeat(63)).is_ok());
        assert!(LabelSelector::parse(&format!("{}/a", "p".repeat(253))).is_ok());
        assert!(
            parse_error(&format!("{}/a", "p".repeat(254))).contains("prefix part must be no more than 253 characters")
        );
        assert_eq!(
            parse_error("a\"b"),
            format!("unable to parse requirement: <nil>: Invalid value: \"a\\\"b\": name part {NAME_RULE}")
        );
    }

    #[test]
    fn invalid_values() {
        assert_eq!(
            parse_error("a=-b"),
            format!("unable to parse requirement: values[0][a]: Invalid value: \"-b\": {VALUE_RULE}")
        );
        let long = "v".repeat(64);
        assert_eq!(
            parse_error(&format!("a in (b,{long})")),
            format!(
                "unable to parse requirement: values[1][a]: Invalid value: \"{long}\": must be no more than 63 \
                 characters"
            )
        );
        // Two bad values: an aggregate, values in sorted order.
        assert_eq!(
            parse_error("a in (_y,-x)"),
            format!(
                "unable to parse requirement: [values[0][a]: Invalid value: \"-x\": {VALUE_RULE}, values[1][a]: \
                 Invalid value: \"_y\": {VALUE_RULE}]"
            )
        );
        assert!(LabelSelector::parse(&format!("a={}", "v".repeat(63))).is_ok());
    }

    #[test]
    fn go_quoting_of_bad_values() {
        assert_eq!(go_quote("a\tb\u{1}é\u{a0}"), "\"a\\tb\\x01é\\u00a0\"");
        assert_eq!(go_json_list(&["<a>".to_string(), "\"".to_string()]), "[\"\\u003ca\\u003e\",\"\\\"\"]");
    }

    // --- metav1.LabelSelector ---

    fn from_object(selector: Value) -> Result<LabelSelector, String> {
        LabelSelector::from_label_selector_object(&selector)
    }

    #[test]
    fn null_selector_matches_nothing_and_empty_everything() {
        let nothing = from_object(Value::Null).expect("null converts");
        assert!(!nothing.matches(&Map::new()));
        assert!(!nothing.is_empty());
        assert_eq!(nothing.to_string(), "");
        for empty in [json!({}), json!({"matchLabels": {}, "matchExpressions": []}), json!({"matchLabels": null})] {
            let selector = from_object(empty).expect("empty converts");
            assert!(selector.is_empty());
            assert!(selector.matches(&Map::new()));
        }
    }

    #[test]
    fn match_labels_and_expressions() {
        let selector = from_object(json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "edge"]},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
                {"key": "team", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist", "values": []},
            ],
        }))
        .expect("converts");
        assert!(selector.matches(&labels(json!({"app": "web", "tier": "edge", "team": "a"}))));
        assert!(!selector.matches(&labels(json!({"app": "web", "tier": "edge", "team": "a", "env": "prod"}))));
        assert!(!selector.matches(&labels(json!({"app": "web", "tier": "edge", "team": "a", "legacy": ""}))));
        assert!(!selector.matches(&labels(json!({"app": "web", "tier": "edge"}))));
        assert!(!selector.matches(&labels(json!({"app": "db", "tier": "edge", "team": "a"}))));
        assert_eq!(selector.to_string(), "app=web,env notin (prod),!legacy,team,tier in (edge,front)");
    }

    #[test]
    fn label_selector_object_errors() {
        let error = |selector: Value| from_object(selector).expect_err("invalid selector");
        assert_eq!(
            error(json!({"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["b"]}]})),
            "\"Equals\" is not a valid label selector operator"
        );
        assert_eq!(
            error(json!({"matchExpressions": [{"key": "a", "operator": "In"}]})),
            "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty"
        );
        assert_eq!(
            error(json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["b"]}]})),
            "values: Invalid value: [\"b\"]: values set must be empty for exists and does not exist"
        );
        assert_eq!(
            error(json!({"matchLabels": {"-a": "b"}})),
            format!("key: Invalid value: \"-a\": name part {NAME_RULE}")
        );
        assert_eq!(
            error(json!({"matchLabels": {"a": "-b"}})),
            format!("values[0][a]: Invalid value: \"-b\": {VALUE_RULE}")
        );
        assert_eq!(
            error(json!({"matchLabels": {"-a": "-b"}})),
            format!(
                "[key: Invalid value: \"-a\": name part {NAME_RULE}, values[0][-a]: Invalid value: \"-b\": \
                 {VALUE_RULE}]"
            )
        );
        assert!(error(json!("app=web")).contains("expected an object"));
        assert!(error(json!({"matchLabels": {"a": 1}})).contains("must be a string"));
    }

    #[test]
    fn selector_from_set() {
        let selector = LabelSelector::from_set(&labels(json!({"app": "web", "tier": "front"})));
        assert!(selector.matches(&labels(json!({"app": "web", "tier": "front", "x": "y"}))));
        assert!(!selector.matches(&labels(json!({"app": "web"}))));
        assert!(LabelSelector::from_set(&Map::new()).is_empty());
    }

    // --- field selectors ---

    fn resource(group: &str, version: &str, plural: &str) -> &'static ResourceType {
        resources::find(group, version, plural).expect("resource is served")
    }

    fn pods() -> &'static ResourceType {
        resource("", "v1", "pods")
    }

    fn field(text: &str, on: &ResourceType) -> FieldSelector {
        FieldSelector::parse(text, on).expect("field selector parses")
    }

    fn field_error(text: &str, on: &ResourceType) -> String {
        FieldSelector::parse(text, on).expect_err("field selector is invalid")
    }

    #[test]
    fn field_operators() {
        let pod = json!({"metadata": {"name": "a", "namespace": "ns"}});
        for text in ["metadata.name=a", "metadata.name==a", "metadata.name!=b", "metadata.name=a,metadata.namespace=ns"]
        {
            assert!(field(text, pods()).matches(&pod), "{text}");
        }
        for text in ["metadata.name=b", "metadata.name!=a", "metadata.name=a,metadata.namespace!=ns"] {
            assert!(!field(text, pods()).matches(&pod), "{text}");
        }
    }

    #[test]
    fn empty_field_selector_matches_everything() {
        for text in ["", ",", ",,"] {
            let selector = field(text, pods());
            assert!(selector.is_empty());
            assert!(selector.matches(&json!({})));
        }
        assert!(FieldSelector::everything().matches(&json!({})));
    }

    #[test]
    fn field_value_escaping() {
        let secret = resource("", "v1", "secrets");
        let object = json!({"type": "a,b=c\\d"});
        assert!(field("type=a\\,b\\=c\\\\d", secret).matches(&object));
        assert!(field("type!=a\\,b", secret).matches(&object));
        // An escaped comma does not split the selector; an unescaped one does.
        assert!(!field("type=a\\,b", secret).matches(&object));
        assert_eq!(field_error("type=a,b", secret), "invalid selector: 'type=a,b'; can't understand 'b'");
    }

    #[test]
    fn field_syntax_errors() {
        assert_eq!(
            field_error("metadata.name", pods()),
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'"
        );
        assert_eq!(
            field_error("metadata.name=a=b", pods()),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(
            field_error("metadata.name=!=b", pods()),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(field_error("metadata.name=a\\!", pods()), "invalid field selector: invalid escape sequence: \\!");
        assert_eq!(field_error("metadata.name=a\\", pods()), "invalid field selector: invalid escape sequence: \\");
        // Syntax is checked for every term before any label is.
        assert_eq!(field_error("zzz=1,bad", pods()), "invalid selector: 'zzz=1,bad'; can't understand 'bad'");
        // Labels are checked in sorted term order.
        assert_eq!(field_error("z=1,b=2", pods()), "field label not supported: b");
        // No whitespace trimming: the label is taken as written.
        assert_eq!(field_error("metadata.name = a", pods()), "field label not supported: metadata.name ");
    }

    #[test]
    fn unsupported_field_messages() {
        assert_eq!(field_error("spec.foo=a", pods()), "field label not supported: spec.foo");
        assert_eq!(
            field_error("status.replicas=1", resource("apps", "v1", "replicasets")),
            "\"status.replicas\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        assert_eq!(
            field_error("spec.suspend=true", resource("batch", "v1", "jobs")),
            "field label \"spec.suspend\" not supported for Job"
        );
        assert_eq!(
            field_error("metadata.namespace=a", resource("", "v1", "nodes")),
            "field label not supported: metadata.namespace"
        );
        assert_eq!(
            field_error("metadata.namespace=a", resource("", "v1", "namespaces")),
            "field label not supported: metadata.namespace"
        );
        assert_eq!(
            field_error("metadata.namespace=a", resource("certificates.k8s.io", "v1", "certificatesigningrequests")),
            "field label not supported: metadata.namespace"
        );
        assert_eq!(
            field_error("secrets=a", resource("", "v1", "serviceaccounts")),
            "\"secrets\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
    }

    #[test]
    fn metadata_fields_on_kinds_without_conversions() {
        let configmaps = resource("", "v1", "configmaps");
        let object = json!({"metadata": {"name": "cm", "namespace": "ns"}});
        assert!(field("metadata.name=cm,metadata.namespace=ns", configmaps).matches(&object));
        // Cluster-scoped kinds without a conversion accept metadata.namespace; it reads as empty.
        let volumes = resource("", "v1", "persistentvolumes");
        let volume = json!({"metadata": {"name": "pv"}});
        assert!(field("metadata.namespace=", volumes).matches(&volume));
        assert!(!field("metadata.namespace=ns", volumes).matches(&volume));
    }

    #[test]
    fn pod_fields() {
        let pod = json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"nodeName": "n1", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                     "serviceAccountName": "sa", "hostNetwork": true},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
                       "nominatedNodeName": "n2"},
        });
        let selector = "spec.nodeName=n1,spec.restartPolicy=Always,spec.schedulerName=default-scheduler,\
            spec.serviceAccountName=sa,spec.hostNetwork=true,status.phase=Running,status.podIP=10.0.0.1,\
            status.nominatedNodeName=n2,spec.host=n1,metadata.name=p,metadata.namespace=ns";
        assert!(field(selector, pods()).matches(&pod));
        // status.podIPs is accepted but never projected.
        assert!(field("status.podIPs=", pods()).matches(&pod));
        assert!(!field("status.podIPs=10.0.0.1", pods()).matches(&pod));
    }

    #[test]
    fn pod_field_defaults() {
        let pending = json!({"metadata": {"name": "p"}, "spec": {}, "status": {"podIP": "10.0.0.2"}});
        assert!(field("spec.nodeName=", pods()).matches(&pending));
        assert!(field("spec.host=", pods()).matches(&pending));
        assert!(field("spec.hostNetwork=false", pods()).matches(&pending));
        assert!(field("status.podIP=10.0.0.2", pods()).matches(&pending));
        assert!(field("status.phase=", pods()).matches(&json!({})));
        let scheduled = json!({"spec": {"nodeName": "n1"}});
        assert!(!field("spec.nodeName=", pods()).matches(&scheduled));
    }

    #[test]
    fn node_namespace_secret_service_fields() {
        let nodes = resource("", "v1", "nodes");
        assert!(field("spec.unschedulable=true", nodes).matches(&json!({"spec": {"unschedulable": true}})));
        assert!(field("spec.unschedulable=false,metadata.name=n", nodes).matches(&json!({"metadata": {"name": "n"}})));
        let namespaces = resource("", "v1", "namespaces");
        assert!(field("status.phase=Terminating", namespaces).matches(&json!({"status": {"phase": "Terminating"}})));
        let secrets = resource("", "v1", "secrets");
        let token = json!({"type": "kubernetes.io/service-account-token"});
        assert!(field("type=kubernetes.io/service-account-token", secrets).matches(&token));
        let services = resource("", "v1", "services");
        let headless = json!({"spec": {"clusterIP": "None", "type": "ClusterIP"}});
        assert!(field("spec.clusterIP=None,spec.type=ClusterIP", services).matches(&headless));
        assert!(!field("spec.clusterIP!=None", services).matches(&headless));
    }

    #[test]
    fn count_fields() {
        let controllers = resource("", "v1", "replicationcontrollers");
        assert!(field("status.replicas=3", controllers).matches(&json!({"status": {"replicas": 3}})));
        assert!(field("status.replicas=0", controllers).matches(&json!({"status": {}})));
        let jobs = resource("batch", "v1", "jobs");
        assert!(field("status.successful=2", jobs).matches(&json!({"status": {"succeeded": 2}})));
        assert!(field("status.successful=0", jobs).matches(&json!({})));
    }

    #[test]
    fn csr_fields() {
        let csrs = resource("certificates.k8s.io", "v1", "certificatesigningrequests");
        let csr = json!({"metadata": {"name": "c"}, "spec": {"signerName": "kubernetes.io/kubelet-serving"}});
        assert!(field("spec.signerName=kubernetes.io/kubelet-serving,metadata.name=c", csrs).matches(&csr));
    }

    #[test]
    fn core_event_fields() {
        let events = resource("", "v1", "events");
        let event = json!({
            "apiVersion": "v1",
            "metadata": {"name": "e", "namespace": "ns"},
            "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u1", "apiVersion": "v1",
                               "resourceVersion": "7", "fieldPath": "spec.containers{c}"},
            "reason": "Scheduled", "reportingComponent": "default-scheduler", "type": "Normal",
        });
        let selector = "involvedObject.kind=Pod,involvedObject.namespace=ns,involvedObject.name=p,\
            involvedObject.uid=u1,involvedObject.apiVersion=v1,involvedObject.resourceVersion=7,\
            involvedObject.fieldPath=spec.containers{c},reason=Scheduled,reportingComponent=default-scheduler,\
            type=Normal,metadata.name=e,metadata.namespace=ns";
        assert!(field(selector, events).matches(&event));
        // source: the source component, else the reporting component.
        assert!(field("source=default-scheduler", events).matches(&event));
        let with_source = json!({"source": {"component": "kubelet"}, "reportingComponent": "x"});
        assert!(field("source=kubelet", events).matches(&with_source));
        assert_eq!(field_error("regarding.name=p", events), "field label not supported: regarding.name");
    }

    #[test]
    fn events_group_fields() {
        let events = resource("events.k8s.io", "v1", "events");
        assert_eq!(field_error("involvedObject.name=p", events), "field label not supported: involvedObject.name");
        assert_eq!(field_error("reportingComponent=x", events), "field label not supported: reportingComponent");
        let selector = "regarding.kind=Pod,regarding.name=p,regarding.namespace=ns,regarding.uid=u1,\
            regarding.apiVersion=v1,regarding.resourceVersion=7,regarding.fieldPath=f,reason=Pulled,\
            reportingController=kubelet,source=kubelet,type=Warning,metadata.name=e,metadata.namespace=ns";
        let core_shape = json!({
            "apiVersion": "v1",
            "metadata": {"name": "e", "namespace": "ns"},
            "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u1", "apiVersion": "v1",
                               "resourceVersion": "7", "fieldPath": "f"},
            "reason": "Pulled", "reportingComponent": "kubelet", "type": "Warning",
        });
        let group_shape = json!({
            "apiVersion": "events.k8s.io/v1",
            "metadata": {"name": "e", "namespace": "ns"},
            "regarding": {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u1", "apiVersion": "v1",
                          "resourceVersion": "7", "fieldPath": "f"},
            "reason": "Pulled", "reportingController": "kubelet", "type": "Warning",
        });
        let selector = field(selector, events);
        assert!(selector.matches(&core_shape));
        assert!(selector.matches(&group_shape));
        let deprecated_source = json!({"apiVersion": "events.k8s.io/v1", "deprecatedSource": {"component": "k"}});
        assert!(field("source=k", events).matches(&deprecated_source));
    }
}
