//! The value types of the flags and how each parses its text, mirroring the pflag (Go) type
//! upstream uses for the flag: Go's `strconv` number and bool syntax, pflag's CSV string
//! slices, klog's verbosity and vmodule, Kubernetes quantities and so on.
//!
//! Each type is a zero-sized marker implementing [`FlagValue`]; the flag table names the marker
//! and the field the value goes to, so one table line is all a flag needs.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use super::feature_gates::FeatureGates;
use crate::apimachinery::duration::{ParseDurationError, parse_go_duration};
use crate::apimachinery::net::ParseCidrError;
use crate::apimachinery::version::{self, KUBERNETES_RELEASE, Release, parse_semantic};
use crate::app::controllers::{ControllerSelection, UnknownController};

/// How a value is being set, for the types where repeating a flag accumulates (pflag's string
/// slices and maps): the first explicit use replaces the default, later uses add to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SetMode {
    /// The table default, applied before any argument is read.
    Default,
    /// The first time the flag appears on the command line.
    First,
    /// A later appearance of the same flag.
    Repeat,
}

impl SetMode {
    fn replaces(self) -> bool {
        self != SetMode::Repeat
    }
}

/// How `--help` shows a flag's default, following pflag's rules for its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DefaultStyle {
    /// Go-quoted (`(default "leases")`); hidden when empty.
    Quoted,
    /// As written (`(default 15s)`); hidden for zero values (`0`, `0s`, `false`, empty).
    Plain,
    /// In brackets (`(default [*])`); hidden when empty.
    List,
    /// In brackets even when empty (`(default [])`), as pflag does for map-like types.
    AlwaysList,
}

/// What kind of value a flag takes, as its help line and the parser need to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueKind {
    /// pflag's type name (`duration`, `int32`, `strings`, `bool`, ...).
    pub type_name: &'static str,
    /// The value used when the flag is given without one (`--leader-elect`); `None` when a
    /// value is required. A flag with one never takes the next argument as its value.
    pub no_value_default: Option<&'static str>,
    pub(crate) default_style: DefaultStyle,
}

impl ValueKind {
    const fn required(type_name: &'static str, default_style: DefaultStyle) -> ValueKind {
        ValueKind { type_name, no_value_default: None, default_style }
    }

    /// The `(default ...)` text of a help line for this default literal, if pflag shows one.
    pub(crate) fn help_default(&self, literal: &str) -> Option<String> {
        match self.default_style {
            DefaultStyle::Quoted if literal.is_empty() => None,
            DefaultStyle::Quoted => Some(go_quote(literal)),
            DefaultStyle::Plain if matches!(literal, "" | "0" | "0s" | "false") => None,
            DefaultStyle::Plain => Some(literal.to_string()),
            DefaultStyle::List if literal.is_empty() => None,
            DefaultStyle::List | DefaultStyle::AlwaysList => Some(format!("[{literal}]")),
        }
    }
}

/// A value type of a flag: where its value lives and how text becomes that value.
pub(crate) trait FlagValue {
    type Target: Default;
    const KIND: ValueKind;
    /// Parses `raw` into `target`. The error says what is wrong with the value; the caller
    /// adds which flag and value it was.
    fn assign(target: &mut Self::Target, raw: &str, mode: SetMode) -> Result<(), ValueError>;
}

/// Why a flag's type refuses a value: the problem alone, worded as pflag (or upstream's check
/// of that flag) words it. [`FlagError`](super::FlagError) adds which flag and value it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// The argument is not UTF-8.
    #[error("not valid UTF-8")]
    NotUtf8,
    /// Not one of Go's boolean spellings.
    #[error("not a boolean (use true or false)")]
    NotABool,
    /// Not Go integer syntax.
    #[error("not an integer")]
    NotAnInteger,
    /// An integer beyond what the flag's type holds.
    #[error("value out of range for a {bits}-bit integer")]
    IntegerOutOfRange {
        /// The width of the type (32 or 64).
        bits: u32,
    },
    /// Not Go float syntax.
    #[error("not a number")]
    NotANumber,
    /// A float beyond what the flag's type holds.
    #[error("value out of range")]
    FloatOutOfRange,
    /// A quoted CSV field not closed, or followed by more text (Go's `csv.ErrQuote`).
    #[error("extraneous or missing \" in quoted-field")]
    CsvQuote,
    /// A quote inside an unquoted CSV field (Go's `csv.ErrBareQuote`).
    #[error("bare \" in non-quoted-field")]
    CsvBareQuote,
    /// Not a Go duration.
    #[error("{0}")]
    Duration(#[from] ParseDurationError),
    /// A port number outside 0..=65535.
    #[error("must be between 0 and 65535, inclusive (0 turns it off)")]
    PortOutOfRange,
    /// Not an IP address.
    #[error("failed to parse IP: {}", go_quote(.text))]
    Ip {
        /// The value as given.
        text: String,
    },
    /// Not a CIDR.
    #[error("{0}")]
    Cidr(#[from] ParseCidrError),
    /// Two CIDRs of one IP family.
    #[error("two CIDRs must be one IPv4 and one IPv6 range (dual-stack)")]
    CidrsOfOneFamily,
    /// More than two CIDRs.
    #[error("at most two CIDRs (one per IP family) are allowed")]
    TooManyCidrs,
    /// A name in `--controllers` that names no controller.
    #[error("{0}")]
    UnknownController(#[from] UnknownController),
    /// A `stringToString` item without `=`.
    #[error("{item} must be formatted as key=value")]
    NotKeyValue {
        /// The item (the whole value when it has no `=` at all).
        item: String,
    },
    /// `cert,key:` with nothing after the colon.
    #[error("empty names list is not allowed")]
    EmptyNames,
    /// Not `cert,key`.
    #[error("expected comma separated certificate and key file paths")]
    NotCertAndKey,
    /// Not a Kubernetes quantity (its own error says no more than the expression it must match).
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    NotAQuantity,
    /// A negative quantity.
    #[error("must not be negative")]
    NegativeQuantity,
    /// A quantity beyond 64 bits.
    #[error("too large")]
    QuantityTooLarge,
    /// A verbosity that is not digits.
    #[error("not a non-negative integer")]
    NotALevel,
    /// A verbosity beyond 32 bits.
    #[error("value out of range for a verbosity level")]
    LevelOutOfRange,
    /// A `--vmodule` item that is not `pattern=N`.
    #[error("{item:?} does not have the pattern=N format")]
    NotPatternLevel {
        /// The item.
        item: String,
    },
    /// A `--vmodule` item whose level is not a verbosity.
    #[error("parsing verbosity in {item:?}: not a valid level")]
    PatternLevel {
        /// The item.
        item: String,
    },
    /// A log format that is not registered.
    #[error("format: Invalid value: {}: Unsupported log format", go_quote(.format))]
    LogFormat {
        /// The format as given.
        format: String,
    },
    /// Not a Go TLS version name.
    #[error("unknown tls version {} (use one of {})", go_quote(.version), TLS_VERSIONS.join(", "))]
    TlsVersion {
        /// The version as given.
        version: String,
    },
    /// Not a cipher suite Go knows by name.
    #[error("cipher suite {suite} not supported or doesn't exist")]
    CipherSuite {
        /// The suite as given.
        suite: String,
    },
    /// A `--version=v…` that is not a semantic version.
    #[error("{0}")]
    Version(#[from] version::ParseError),
    /// A `--version=v…` of another release than this binary's.
    #[error(
        "version {} must match major/minor/patch of default version {}",
        go_quote(.version),
        go_quote(&KUBERNETES_RELEASE.git_version())
    )]
    OtherRelease {
        /// The version as given.
        version: String,
    },
}

/// Go's `%q`, as pflag quotes values in its errors.
pub(crate) use crate::apimachinery::strconv::quote as go_quote;

/// Go's `strconv.ParseBool`.
pub(crate) fn parse_go_bool(text: &str) -> Result<bool, ValueError> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(ValueError::NotABool),
    }
}

/// Go's `strconv.ParseInt(text, 0, bits)`: optional sign, then decimal, `0x` hex, `0o`/`0`
/// octal or `0b` binary, with `_` between digits allowed only after such a prefix.
pub(crate) fn parse_go_int(text: &str, bits: u32) -> Result<i64, ValueError> {
    let (negative, body) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits, prefixed) = if let Some(rest) = lower.strip_prefix("0x") {
        (16, rest, true)
    } else if let Some(rest) = lower.strip_prefix("0b") {
        (2, rest, true)
    } else if let Some(rest) = lower.strip_prefix("0o") {
        (8, rest, true)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..], true)
    } else {
        (10, lower.as_str(), false)
    };
    if digits.contains('_') && (!prefixed || digits.ends_with('_') || digits.contains("__")) {
        return Err(ValueError::NotAnInteger);
    }
    let cleaned: String = digits.chars().filter(|c| *c != '_').collect();
    if cleaned.is_empty() || !cleaned.chars().all(|c| c.is_digit(radix)) {
        return Err(ValueError::NotAnInteger);
    }
    let out_of_range = || ValueError::IntegerOutOfRange { bits };
    // Only the size can fail here: the digits were checked above.
    let magnitude = u64::from_str_radix(&cleaned, radix).map_err(|_| out_of_range())?;
    let limit = 1u64 << (bits - 1);
    if negative {
        if magnitude > limit {
            return Err(out_of_range());
        }
        Ok((magnitude as i64).wrapping_neg())
    } else if magnitude >= limit {
        Err(out_of_range())
    } else {
        Ok(magnitude as i64)
    }
}

/// Go's `strconv.ParseFloat` for the decimal forms flags use, as an `f64`.
fn parse_go_float(text: &str) -> Result<f64, ValueError> {
    let plain = text.trim_start_matches(['+', '-']);
    let word = plain.eq_ignore_ascii_case("inf")
        || plain.eq_ignore_ascii_case("infinity")
        || plain.eq_ignore_ascii_case("nan");
    let numeric =
        !plain.is_empty() && plain.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
    if !(word || numeric) {
        return Err(ValueError::NotANumber);
    }
    let value: f64 = text.parse().map_err(|_| ValueError::NotANumber)?;
    if value.is_infinite() && !word {
        return Err(ValueError::FloatOutOfRange);
    }
    Ok(value)
}

/// One record of Go's `encoding/csv` with default settings, which is how pflag splits string
/// slices: commas separate fields, a field may be double-quoted (`""` is a quote inside it).
pub(crate) fn read_csv_record(text: &str) -> Result<Vec<String>, ValueError> {
    let mut fields = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err(ValueError::CsvQuote),
                    Some('"') => match chars.peek() {
                        Some('"') => {
                            chars.next();
                            field.push('"');
                        }
                        Some(',') | Some('\n') | Some('\r') | None => break,
                        Some(_) => return Err(ValueError::CsvQuote),
                    },
                    Some(c) => field.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if matches!(c, ',' | '\n' | '\r') {
                    break;
                }
                if c == '"' {
                    return Err(ValueError::CsvBareQuote);
                }
                field.push(c);
                chars.next();
            }
        }
        fields.push(field);
        match chars.next() {
            Some(',') => continue,
            // A record ends at the first line break; Go's reader returns only that record.
            _ => return Ok(fields),
        }
    }
}

/// pflag's string-slice syntax: empty text is an empty list, anything else one CSV record.
fn read_list(text: &str) -> Result<Vec<String>, ValueError> {
    if text.is_empty() { Ok(Vec::new()) } else { read_csv_record(text) }
}

/// Replaces or extends a list as pflag does for repeated slice flags.
fn merge_list<T>(target: &mut Vec<T>, items: Vec<T>, mode: SetMode) {
    if mode.replaces() {
        *target = items;
    } else {
        target.extend(items);
    }
}

/// `true`/`false` (pflag `bool`); the bare flag means `true`.
pub(crate) struct Bool;

impl FlagValue for Bool {
    type Target = bool;
    const KIND: ValueKind =
        ValueKind { type_name: "bool", no_value_default: Some("true"), default_style: DefaultStyle::Plain };
    fn assign(target: &mut bool, raw: &str, _: SetMode) -> Result<(), ValueError> {
        *target = parse_go_bool(raw)?;
        Ok(())
    }
}

/// Any text (pflag `string`).
pub(crate) struct Str;

impl FlagValue for Str {
    type Target = String;
    const KIND: ValueKind = ValueKind::required("string", DefaultStyle::Quoted);
    fn assign(target: &mut String, raw: &str, _: SetMode) -> Result<(), ValueError> {
        *target = raw.to_string();
        Ok(())
    }
}

/// A comma-separated list; repeating the flag appends (pflag `strings`).
pub(crate) struct Strings;

impl FlagValue for Strings {
    type Target = Vec<String>;
    const KIND: ValueKind = ValueKind::required("strings", DefaultStyle::List);
    fn assign(target: &mut Vec<String>, raw: &str, mode: SetMode) -> Result<(), ValueError> {
        merge_list(target, read_list(raw)?, mode);
        Ok(())
    }
}

/// A Go duration such as `40s` or `5m0s` (pflag `duration`).
pub(crate) struct GoDuration;

impl FlagValue for GoDuration {
    type Target = Duration;
    const KIND: ValueKind = ValueKind::required("duration", DefaultStyle::Plain);
    fn assign(target: &mut Duration, raw: &str, _: SetMode) -> Result<(), ValueError> {
        *target = parse_go_duration(raw)?;
        Ok(())
    }
}

/// A 32-bit integer (pflag `int32`).
pub(crate) struct Int32;

impl FlagValue for Int32 {
    type Target = i32;
    const KIND: ValueKind = ValueKind::required("int32", DefaultStyle::Plain);
    fn assign(target: &mut i32, raw: &str, _: SetMode) -> Result<(), ValueError> {
        *target = i32::try_from(parse_go_int(raw, 32)?).map_err(|_| ValueError::IntegerOutOfRange { bits: 32 })?;
        Ok(())
    }
}

/// A Go `int`, 64 bits on the platforms Kubernetes ships for (pflag `int`).
pub(crate) struct Int;

impl FlagValue for Int {
    type Target = i64;
    const KIND: ValueKind = ValueKind::required("int", DefaultStyle::Plain);
    fn assign(target: &mut i64, raw: &str, _: SetMode) -> Result<(), ValueError> {
        *target = parse_go_int(raw, 64)?;
        Ok(())
    }
}

/// A TCP port given as an `int`; 0 means "do not listen".
pub(crate) struct Port;

impl FlagValue for Port {
    type Target = u16;
    const KIND: ValueKind = ValueKind::required("int", DefaultStyle::Plain);
    fn assign(target: &mut u16, raw: &str, _: SetMode) -> Result<(), ValueError> {
        let value = parse_go_int(raw, 64)?;
        *target = u16::try_from(value).map_err(|_| ValueError::PortOutOfRange)?;
        Ok(())
    }
}

/// A single-precision float (pflag `float32`).
pub(crate) struct Float32;

impl FlagValue for Float32 {
    type Target = f32;
    const KIND: ValueKind = ValueKind::required("float32", DefaultStyle::Plain);
    fn assign(target: &mut f32, raw: &str, _: SetMode) -> Result<(), ValueError> {
        let value = parse_go_float(raw)?;
        let narrowed = value as f32;
        if narrowed.is_infinite() && value.is_finite() {
            return Err(ValueError::FloatOutOfRange);
        }
        *target = narrowed;
        Ok(())
    }
}

/// A double-precision float (pflag `float64`, shown as `float`).
pub(crate) struct Float64;

impl FlagValue for Float64 {
    type Target = f64;
    const KIND: ValueKind = ValueKind::required("float64", DefaultStyle::Plain);
    fn assign(target: &mut f64, raw: &str, _: SetMode) -> Result<(), ValueError> {
        *target = parse_go_float(raw)?;
        Ok(())
    }
}

/// An IPv4 or IPv6 address; empty means unset (pflag `ip`).
pub(crate) struct Ip;

impl FlagValue for Ip {
    type Target = Option<IpAddr>;
    const KIND: ValueKind = ValueKind::required("ip", DefaultStyle::Plain);
    fn assign(target: &mut Option<IpAddr>, raw: &str, _: SetMode) -> Result<(), ValueError> {
        let text = raw.trim();
        *target = if text.is_empty() {
            None
        } else {
            Some(text.parse().map_err(|_| ValueError::Ip { text: raw.to_string() })?)
        };
        Ok(())
    }
}

pub use crate::apimachinery::net::Cidr;

/// Up to two comma-separated CIDRs, one per IP family (dual-stack); shown as a `string` like
/// upstream, which keeps these flags as plain strings and splits them where they are used.
pub(crate) struct Cidrs;

impl FlagValue for Cidrs {
    type Target = Vec<Cidr>;
    const KIND: ValueKind = ValueKind::required("string", DefaultStyle::Quoted);
    fn assign(target: &mut Vec<Cidr>, raw: &str, _: SetMode) -> Result<(), ValueError> {
        let text = raw.trim();
        let cidrs = if text.is_empty() {
            Vec::new()
        } else {
            text.split(',').map(|item| Cidr::parse(item.trim())).collect::<Result<Vec<_>, _>>()?
        };
        match cidrs.as_slice() {
            [] | [_] => {}
            [a, b] if a.is_ipv6() != b.is_ipv6() => {}
            [_, _] => return Err(ValueError::CidrsOfOneFamily),
            _ => return Err(ValueError::TooManyCidrs),
        }
        *target = cidrs;
        Ok(())
    }
}

/// `--controllers`: a string slice of controller names, checked against the known ones.
pub(crate) struct Controllers;

impl FlagValue for Controllers {
    type Target = ControllerSelection;
    const KIND: ValueKind = ValueKind::required("strings", DefaultStyle::List);
    fn assign(target: &mut ControllerSelection, raw: &str, mode: SetMode) -> Result<(), ValueError> {
        if mode.replaces() {
            *target = ControllerSelection::none();
        }
        for item in read_list(raw)? {
            target.push(&item)?;
        }
        Ok(())
    }
}

/// `--feature-gates`: `[component:]Name=bool` pairs; repeating the flag adds more. They are set
/// (and checked) once the command line is read, at the emulated version.
pub(crate) struct Gates;

impl FlagValue for Gates {
    type Target = FeatureGates;
    const KIND: ValueKind = ValueKind::required("colonSeparatedMultimapStringString", DefaultStyle::Quoted);
    fn assign(target: &mut FeatureGates, raw: &str, _: SetMode) -> Result<(), ValueError> {
        target.add_flag_value(raw);
        Ok(())
    }
}

/// pflag `int32Slice`: comma-separated 32-bit integers (Go's `strconv.ParseInt(s, 0, 32)`
/// each); repeating the flag appends.
pub(crate) struct Int32Slice;

impl FlagValue for Int32Slice {
    type Target = Vec<i32>;
    const KIND: ValueKind = ValueKind::required("int32Slice", DefaultStyle::AlwaysList);
    fn assign(target: &mut Vec<i32>, raw: &str, mode: SetMode) -> Result<(), ValueError> {
        let mut values = Vec::new();
        for item in read_list(raw)? {
            let value = parse_go_int(item.trim(), 32)?;
            values.push(i32::try_from(value).map_err(|_| ValueError::IntegerOutOfRange { bits: 32 })?);
        }
        merge_list(target, values, mode);
        Ok(())
    }
}

/// pflag `stringToString`: `key=value` pairs; with more than one pair the text is CSV.
pub(crate) struct StringMap;

impl FlagValue for StringMap {
    type Target = BTreeMap<String, String>;
    const KIND: ValueKind = ValueKind::required("stringToString", DefaultStyle::AlwaysList);
    fn assign(target: &mut BTreeMap<String, String>, raw: &str, mode: SetMode) -> Result<(), ValueError> {
        let pairs = match raw.matches('=').count() {
            0 => return Err(ValueError::NotKeyValue { item: raw.to_string() }),
            1 => vec![raw.trim_matches('"').to_string()],
            _ => read_csv_record(raw)?,
        };
        let mut parsed = BTreeMap::new();
        for pair in pairs {
            let Some((key, value)) = pair.split_once('=') else {
                return Err(ValueError::NotKeyValue { item: pair });
            };
            parsed.insert(key.to_string(), value.to_string());
        }
        if mode.replaces() {
            *target = parsed;
        } else {
            target.extend(parsed);
        }
        Ok(())
    }
}

pub use crate::server::options::NamedCertKey;

/// `--tls-sni-cert-key`: `cert,key[:name,...]`, repeatable (upstream `namedCertKey`).
pub(crate) struct NamedCertKeys;

impl FlagValue for NamedCertKeys {
    type Target = Vec<NamedCertKey>;
    const KIND: ValueKind = ValueKind::required("namedCertKey", DefaultStyle::AlwaysList);
    fn assign(target: &mut Vec<NamedCertKey>, raw: &str, mode: SetMode) -> Result<(), ValueError> {
        let (files, names) = match raw.split_once(':') {
            Some((files, names)) => {
                let names = names.trim();
                if names.is_empty() {
                    return Err(ValueError::EmptyNames);
                }
                let names = names.split(',').map(|n| n.trim().to_string()).collect();
                (files.trim(), names)
            }
            None => (raw.trim(), Vec::new()),
        };
        let Some((cert_file, key_file)) = files.split_once(',').filter(|(_, key)| !key.contains(',')) else {
            return Err(ValueError::NotCertAndKey);
        };
        let pair =
            NamedCertKey { cert_file: cert_file.trim().to_string(), key_file: key_file.trim().to_string(), names };
        merge_list(target, vec![pair], mode);
        Ok(())
    }
}

/// A Kubernetes resource quantity in bytes (`512`, `1K`, `2Ki`, `5Mi`), rounded up.
pub(crate) struct Quantity;

impl FlagValue for Quantity {
    type Target = u64;
    const KIND: ValueKind = ValueKind::required("quantity", DefaultStyle::Plain);
    fn assign(target: &mut u64, raw: &str, _: SetMode) -> Result<(), ValueError> {
        *target = parse_quantity(raw)?;
        Ok(())
    }
}

/// Parses a non-negative quantity into a whole number, rounding fractions up as
/// `Quantity.Value()` does.
fn parse_quantity(text: &str) -> Result<u64, ValueError> {
    // Upstream's flag reports the expression alone, not where the text departs from it.
    let quantity = crate::quantity::Quantity::parse(text).map_err(|_| ValueError::NotAQuantity)?;
    if quantity.is_negative() {
        return Err(ValueError::NegativeQuantity);
    }
    u64::try_from(quantity.value()).map_err(|_| ValueError::QuantityTooLarge)
}

/// klog's `-v`: a non-negative 32-bit verbosity level.
pub(crate) struct Verbosity;

impl FlagValue for Verbosity {
    type Target = u32;
    const KIND: ValueKind = ValueKind::required("Level", DefaultStyle::Plain);
    fn assign(target: &mut u32, raw: &str, _: SetMode) -> Result<(), ValueError> {
        *target = parse_level(raw)?;
        Ok(())
    }
}

/// Go's `strconv.ParseUint(text, 10, bits)`.
fn parse_level(text: &str) -> Result<u32, ValueError> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ValueError::NotALevel);
    }
    // Only the size can fail here: the digits were checked above.
    text.parse().map_err(|_| ValueError::LevelOutOfRange)
}

/// One `pattern=N` item of `--vmodule`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VModuleItem {
    /// A file name pattern (`*` and `?` wildcards, no extension), as klog matches it.
    pub pattern: String,
    /// The verbosity for matching files, in place of `-v`.
    pub verbosity: u32,
}

/// `--vmodule`: `pattern=N,...`, appended on repetition as upstream does.
pub(crate) struct VModule;

impl FlagValue for VModule {
    type Target = Vec<VModuleItem>;
    const KIND: ValueKind = ValueKind::required("pattern=N,...", DefaultStyle::Quoted);
    fn assign(target: &mut Vec<VModuleItem>, raw: &str, mode: SetMode) -> Result<(), ValueError> {
        let mut items = Vec::new();
        for item in raw.split(',').filter(|item| !item.is_empty()) {
            let (pattern, level) = match item.split('=').collect::<Vec<_>>()[..] {
                [pattern, level] if !pattern.is_empty() && !level.is_empty() => (pattern, level),
                _ => return Err(ValueError::NotPatternLevel { item: item.to_string() }),
            };
            let verbosity = parse_level(level)
                .ok()
                .filter(|v| *v <= i32::MAX as u32)
                .ok_or_else(|| ValueError::PatternLevel { item: item.to_string() })?;
            items.push(VModuleItem { pattern: pattern.to_string(), verbosity });
        }
        merge_list(target, items, mode);
        Ok(())
    }
}

/// `--logging-format`: one of the registered log formats.
pub(crate) struct LogFormat;

impl FlagValue for LogFormat {
    type Target = String;
    const KIND: ValueKind = Str::KIND;
    fn assign(target: &mut String, raw: &str, _: SetMode) -> Result<(), ValueError> {
        if !matches!(raw, "text" | "json") {
            // Upstream's logging configuration validation (`format: Invalid value: …`).
            return Err(ValueError::LogFormat { format: raw.to_string() });
        }
        *target = raw.to_string();
        Ok(())
    }
}

/// The TLS versions `--tls-min-version` takes (Go's `crypto/tls` names).
pub(crate) const TLS_VERSIONS: &[&str] = &["VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13"];

/// `--tls-min-version`: empty or a Go TLS version name.
pub(crate) struct TlsVersion;

impl FlagValue for TlsVersion {
    type Target = String;
    const KIND: ValueKind = Str::KIND;
    fn assign(target: &mut String, raw: &str, _: SetMode) -> Result<(), ValueError> {
        if !raw.is_empty() && !TLS_VERSIONS.contains(&raw) {
            return Err(ValueError::TlsVersion { version: raw.to_string() });
        }
        *target = raw.to_string();
        Ok(())
    }
}

/// The cipher suite names `--tls-cipher-suites` accepts: Go's secure suites, then the insecure
/// ones it still allows by name.
pub(crate) const CIPHER_SUITES: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_RSA_WITH_RC4_128_SHA",
];

/// `--tls-cipher-suites`: a string slice of known cipher suite names.
pub(crate) struct CipherSuites;

impl FlagValue for CipherSuites {
    type Target = Vec<String>;
    const KIND: ValueKind = Strings::KIND;
    fn assign(target: &mut Vec<String>, raw: &str, mode: SetMode) -> Result<(), ValueError> {
        let suites = read_list(raw)?;
        if let Some(unknown) = suites.iter().find(|s| !CIPHER_SUITES.contains(&s.as_str())) {
            return Err(ValueError::CipherSuite { suite: unknown.clone() });
        }
        merge_list(target, suites, mode);
        Ok(())
    }
}

/// A Kubernetes minor version such as `1.33`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct KubeVersion {
    /// The major version (`1`).
    pub major: u32,
    /// The minor version (`33`).
    pub minor: u32,
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl KubeVersion {
    /// The minor version of a release.
    pub const fn of(release: Release) -> KubeVersion {
        KubeVersion { major: release.major, minor: release.minor }
    }

    /// One minor before (upstream `SubtractMinor(1)`).
    pub const fn previous(self) -> KubeVersion {
        KubeVersion { major: self.major, minor: self.minor.saturating_sub(1) }
    }
}

/// The Kubernetes minor version whose behaviour this controller manager implements.
pub const KUBE_VERSION: KubeVersion = KubeVersion::of(KUBERNETES_RELEASE);

/// What `--version` asked for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum VersionRequest {
    #[default]
    NotRequested,
    /// `--version` or `--version=true`: print the version and exit.
    Print,
    /// `--version=raw`: print the detailed version and exit.
    Raw,
    /// `--version=v1.36.2...`: keep running, reporting this version.
    Report(String),
}

/// `--version[=true|false|raw|vX.Y.Z]` (upstream `verflag`).
pub(crate) struct Version;

impl FlagValue for Version {
    type Target = VersionRequest;
    const KIND: ValueKind =
        ValueKind { type_name: "version", no_value_default: Some("true"), default_style: DefaultStyle::Plain };
    fn assign(target: &mut VersionRequest, raw: &str, _: SetMode) -> Result<(), ValueError> {
        *target = if raw == "raw" {
            VersionRequest::Raw
        } else if raw.starts_with('v') {
            check_reported_version(raw)?;
            VersionRequest::Report(raw.to_string())
        } else if parse_go_bool(raw)? {
            VersionRequest::Print
        } else {
            VersionRequest::NotRequested
        };
        Ok(())
    }
}

/// Upstream `validateDynamicVersion`: a version to report must be semantic (`v1.36.2`,
/// `v1.36.2-rc.1+build`) with the major, minor and patch of the release this binary matches.
fn check_reported_version(version: &str) -> Result<(), ValueError> {
    if version == KUBERNETES_RELEASE.git_version() {
        return Ok(());
    }
    let parsed = parse_semantic(version)?;
    let release = KUBERNETES_RELEASE;
    if (parsed.major(), parsed.minor(), parsed.patch())
        != (u64::from(release.major), u64::from(release.minor), u64::from(release.patch))
    {
        return Err(ValueError::OtherRelease { version: version.to_string() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value, or the error's message.
    fn set<V: FlagValue>(raw: &str) -> Result<V::Target, String> {
        let mut target = V::Target::default();
        V::assign(&mut target, raw, SetMode::First).map(|()| target).map_err(|e| e.to_string())
    }

    #[test]
    fn bools_take_go_spellings() {
        for text in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(set::<Bool>(text), Ok(true), "{text}");
        }
        for text in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(set::<Bool>(text), Ok(false), "{text}");
        }
        for text in ["", "yes", "on", "tRUE", "2"] {
            assert!(set::<Bool>(text).is_err(), "{text}");
        }
    }

    #[test]
    fn integers_take_go_syntax_and_ranges() {
        assert_eq!(set::<Int32>("42"), Ok(42));
        assert_eq!(set::<Int32>("+42"), Ok(42));
        assert_eq!(set::<Int32>("-42"), Ok(-42));
        assert_eq!(set::<Int32>("0x1f"), Ok(31));
        assert_eq!(set::<Int32>("010"), Ok(8));
        assert_eq!(set::<Int32>("0o10"), Ok(8));
        assert_eq!(set::<Int32>("0b101"), Ok(5));
        assert_eq!(set::<Int32>("0x_1f"), Ok(31));
        assert_eq!(set::<Int32>("2147483647"), Ok(i32::MAX));
        assert_eq!(set::<Int32>("-2147483648"), Ok(i32::MIN));
        assert_eq!(set::<Int32>("2147483648"), Err("value out of range for a 32-bit integer".into()));
        for text in ["", "abc", "1.5", "1_000", "0x", "09", "1e3", " 1"] {
            assert_eq!(set::<Int32>(text), Err("not an integer".into()), "{text}");
        }
        assert_eq!(set::<Int>("9223372036854775807"), Ok(i64::MAX));
        assert!(set::<Int>("9223372036854775808").is_err());
        assert_eq!(set::<Port>("10257"), Ok(10257));
        assert_eq!(set::<Port>("0"), Ok(0));
        assert!(set::<Port>("65536").is_err());
        assert!(set::<Port>("-1").is_err());
    }

    #[test]
    fn floats_take_decimal_syntax() {
        assert_eq!(set::<Float32>("20"), Ok(20.0));
        assert_eq!(set::<Float32>("0.55"), Ok(0.55));
        assert_eq!(set::<Float32>("1e2"), Ok(100.0));
        assert_eq!(set::<Float32>("-.5"), Ok(-0.5));
        assert_eq!(set::<Float32>("abc"), Err("not a number".into()));
        assert_eq!(set::<Float32>(""), Err("not a number".into()));
        assert_eq!(set::<Float32>("1e39"), Err("value out of range".into()));
        assert_eq!(set::<Float64>("1e39"), Ok(1e39));
        assert_eq!(set::<Float64>("1e400"), Err("value out of range".into()));
        assert!(set::<Float64>("inf").is_ok_and(f64::is_infinite));
    }

    #[test]
    fn string_slices_are_csv_and_repeats_append() {
        assert_eq!(set::<Strings>(""), Ok(vec![]));
        assert_eq!(set::<Strings>("a,b"), Ok(vec!["a".into(), "b".into()]));
        assert_eq!(set::<Strings>("a,,b").map(|v| v.len()), Ok(3));
        assert_eq!(set::<Strings>(r#""a,b",c"#), Ok(vec!["a,b".into(), "c".into()]));
        assert_eq!(set::<Strings>(r#""say ""hi""""#), Ok(vec![r#"say "hi""#.into()]));
        assert!(set::<Strings>(r#"a"b"#).is_err());
        assert!(set::<Strings>(r#""open"#).is_err());

        let mut list = vec!["default".to_string()];
        Strings::assign(&mut list, "x", SetMode::First).unwrap();
        Strings::assign(&mut list, "y,z", SetMode::Repeat).unwrap();
        assert_eq!(list, ["x", "y", "z"]);
    }

    #[test]
    fn ips_and_cidrs() {
        assert_eq!(set::<Ip>("127.0.0.1"), Ok(Some([127, 0, 0, 1].into())));
        assert_eq!(set::<Ip>("::1").map(|ip| ip.is_some()), Ok(true));
        assert_eq!(set::<Ip>(""), Ok(None));
        assert_eq!(set::<Ip>("localhost"), Err(r#"failed to parse IP: "localhost""#.into()));

        let cidrs = set::<Cidrs>("10.244.1.7/16").unwrap();
        assert_eq!(cidrs[0].to_string(), "10.244.0.0/16");
        let dual = set::<Cidrs>("10.96.0.0/12, fd00::/108").unwrap();
        assert_eq!(dual.len(), 2);
        assert!(dual[1].is_ipv6());
        assert_eq!(set::<Cidrs>(""), Ok(vec![]));
        assert!(set::<Cidrs>("10.0.0.0/8,192.168.0.0/16").is_err());
        assert!(set::<Cidrs>("10.0.0.0/8,fd00::/64,fd01::/64").is_err());
        for bad in ["10.0.0.0", "10.0.0.0/33", "fd00::/129", "10.0.0.0/", "x/8", "10.0.0.0/+8"] {
            assert!(set::<Cidrs>(bad).is_err(), "{bad}");
        }
        assert_eq!(Cidr::parse("0.0.0.0/0").map(|c| c.prefix_len), Ok(0));
    }

    #[test]
    fn string_maps_follow_pflag() {
        let map = set::<StringMap>("metric1,label1='v1,v2'").unwrap();
        assert_eq!(map["metric1,label1"], "'v1,v2'");
        let map = set::<StringMap>(r#""a,b=1","c,d=2""#).unwrap();
        assert_eq!(map.len(), 2);
        assert_eq!(map["c,d"], "2");
        assert_eq!(set::<StringMap>("novalue"), Err("novalue must be formatted as key=value".into()));
    }

    #[test]
    fn named_cert_keys() {
        let pairs = set::<NamedCertKeys>("foo.crt,foo.key:*.foo.com,foo.com").unwrap();
        assert_eq!(pairs[0].cert_file, "foo.crt");
        assert_eq!(pairs[0].names, ["*.foo.com", "foo.com"]);
        assert_eq!(set::<NamedCertKeys>("a.crt,a.key").unwrap()[0].names.len(), 0);
        assert!(set::<NamedCertKeys>("a.crt").is_err());
        assert!(set::<NamedCertKeys>("a.crt,a.key,b").is_err());
        assert!(set::<NamedCertKeys>("a.crt,a.key:").is_err());
    }

    #[test]
    fn quantities() {
        assert_eq!(set::<Quantity>("512"), Ok(512));
        // Like Kubernetes quantities, the decimal kilo suffix is a lower-case `k`.
        assert!(set::<Quantity>("1K").is_err());
        assert_eq!(set::<Quantity>("1k"), Ok(1000));
        assert_eq!(set::<Quantity>("2Ki"), Ok(2048));
        assert_eq!(set::<Quantity>("5Mi"), Ok(5 * 1024 * 1024));
        assert_eq!(set::<Quantity>("1.5k"), Ok(1500));
        assert_eq!(set::<Quantity>("1e3"), Ok(1000));
        assert_eq!(set::<Quantity>("1500m"), Ok(2));
        assert_eq!(set::<Quantity>("-1"), Err("must not be negative".into()));
        assert!(set::<Quantity>("").is_err());
    }

    #[test]
    fn verbosity_and_vmodule() {
        assert_eq!(set::<Verbosity>("4"), Ok(4));
        assert!(set::<Verbosity>("-1").is_err());
        assert!(set::<Verbosity>("x").is_err());
        let items = set::<VModule>("foo=2,bar*=4,").unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[1].pattern, "bar*");
        assert_eq!(items[1].verbosity, 4);
        assert_eq!(set::<VModule>("foo"), Err(r#""foo" does not have the pattern=N format"#.into()));
        assert!(set::<VModule>("foo=x").is_err());
        assert!(set::<VModule>("=3").is_err());
    }

    #[test]
    fn restricted_strings() {
        assert_eq!(set::<LogFormat>("json"), Ok("json".into()));
        assert!(set::<LogFormat>("xml").is_err());
        assert_eq!(set::<TlsVersion>("VersionTLS12"), Ok("VersionTLS12".into()));
        assert!(set::<TlsVersion>("TLS1.2").is_err());
        assert!(set::<CipherSuites>("TLS_AES_128_GCM_SHA256,TLS_RSA_WITH_RC4_128_SHA").is_ok());
        assert_eq!(set::<CipherSuites>("TLS_FOO"), Err("cipher suite TLS_FOO not supported or doesn't exist".into()));
    }

    #[test]
    fn int32_slices() {
        assert_eq!(set::<Int32Slice>("23,29,0x11ec"), Ok(vec![23, 29, 4588]));
        assert_eq!(set::<Int32Slice>(""), Ok(vec![]));
        assert_eq!(set::<Int32Slice>("1,,2"), Err("not an integer".into()));
        assert_eq!(set::<Int32Slice>("abc"), Err("not an integer".into()));
        assert_eq!(set::<Int32Slice>("99999999999"), Err("value out of range for a 32-bit integer".into()));
        let mut list = vec![1];
        Int32Slice::assign(&mut list, "2", SetMode::First).unwrap();
        Int32Slice::assign(&mut list, "3", SetMode::Repeat).unwrap();
        assert_eq!(list, [2, 3]);
    }

    #[test]
    fn version_requests() {
        assert_eq!(set::<Version>("true"), Ok(VersionRequest::Print));
        assert_eq!(set::<Version>("false"), Ok(VersionRequest::NotRequested));
        assert_eq!(set::<Version>("raw"), Ok(VersionRequest::Raw));
        assert_eq!(set::<Version>("v1.36.2-gke.1+abc"), Ok(VersionRequest::Report("v1.36.2-gke.1+abc".into())));
        assert_eq!(set::<Version>("v1.36.2"), Ok(VersionRequest::Report("v1.36.2".into())));
        assert_eq!(
            set::<Version>("v1.34.0"),
            Err(r#"version "v1.34.0" must match major/minor/patch of default version "v1.36.2""#.into())
        );
        assert_eq!(set::<Version>("v1.36"), Err(r#"illegal version string "v1.36""#.into()));
        assert!(set::<Version>("maybe").is_err());
    }

    #[test]
    fn help_defaults_follow_pflag() {
        assert_eq!(Bool::KIND.help_default("false"), None);
        assert_eq!(Bool::KIND.help_default("true").as_deref(), Some("true"));
        assert_eq!(Str::KIND.help_default(""), None);
        assert_eq!(Str::KIND.help_default("leases").as_deref(), Some("\"leases\""));
        assert_eq!(GoDuration::KIND.help_default("0s"), None);
        assert_eq!(Int32::KIND.help_default("0"), None);
        assert_eq!(Strings::KIND.help_default("*").as_deref(), Some("[*]"));
        assert_eq!(Strings::KIND.help_default(""), None);
        assert_eq!(StringMap::KIND.help_default("").as_deref(), Some("[]"));
    }
}
