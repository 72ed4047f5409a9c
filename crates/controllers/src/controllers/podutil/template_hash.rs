//! Upstream's `controller.ComputeHash` of a pod template, bit for bit: the Deployment's
//! `pod-template-hash` (the suffix of the ReplicaSets it owns, `<deployment>-<hash>`, and their
//! label), and the DaemonSet's revision hash (`<daemonset>-<hash>` ControllerRevisions and the
//! `controller-revision-hash` label of its pods).
//!
//! Upstream (`pkg/controller/controller_utils.go` `ComputeHash`, `pkg/util/hash` `DeepHashObject`)
//! feeds FNV-32a with go-spew's `%#v` rendering of the Go `v1.PodTemplateSpec` struct
//! (`k8s.io/utils/dump.ForHash`: `Indent: " ", SortKeys, DisableMethods, SpewKeys`), then, when the Deployment has a
//! `collisionCount`, 8 bytes holding it as a little-endian uint32, and encodes the decimal
//! `Sum32` with `rand.SafeEncodeString`. The rendering names every Go field in declaration order
//! with its Go type, so this module carries the Go layout of every struct a pod template reaches
//! (`template_hash/schema.rs`, generated from the Kubernetes 1.36 declarations) and walks the
//! template's JSON along it, printing what go-spew prints for the struct upstream's informer
//! decoded from protobuf:
//! - empty lists and maps decode as nil (`<nil>`), absent pointers as nil;
//! - a `resource.Quantity` is what `ParseQuantity` makes of its canonical text (the API server
//!   stores quantities canonical), printed with its unexported fields; a non-pointer quantity
//!   that is absent decodes from the canonical zero `"0"`;
//! - strings print raw (no quotes), map keys sorted bytewise.
//!
//! Known gaps: a non-null `metav1.Time` (e.g. `metadata.creationTimestamp` set inside a
//! template) renders upstream with the controller-manager's local `*time.Location`, which cannot
//! be known here; it is rendered as the zero time. `managedFields[].fieldsV1` inside a template
//! renders as its raw JSON bytes in our serialization's key order. Both never occur in practice.
//!
//! Verified against real go-spew with `tools/pod-template-hash/` (see its README).

#[rustfmt::skip]
mod schema;

use std::fmt::Write as _;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::{Map, Value};

use crate::quantity::Quantity;
use crate::random::safe_encode_string;

/// One Go struct: its fields in declaration order.
pub(super) struct Struct {
    fields: &'static [Field],
}

/// One field of a Go struct.
pub(super) struct Field {
    /// The Go field name (the type name for embedded fields), printed as `Name:`.
    name: &'static str,
    /// The JSON key; `""` for an embedded struct whose fields are inlined in the parent object.
    json: &'static str,
    /// The field's type as reflect prints it: `*v1.Probe`, `[]string`, `v1.ResourceList`.
    go_type: &'static str,
    kind: Kind,
}

/// The shape of a Go type, as far as go-spew's output depends on it.
pub(super) enum Kind {
    Bool,
    /// Any integer kind: printed in decimal.
    Int,
    /// Any string kind (`string`, `v1.Protocol`, `types.UID`): printed raw.
    Str,
    /// `[]byte`: printed as its decimal byte values.
    Bytes,
    Struct(&'static Struct),
    Ptr(&'static Kind),
    Slice(&'static Kind),
    /// A map with string-kind keys.
    Map(&'static Kind),
    /// `resource.Quantity`.
    Quantity,
    /// `intstr.IntOrString`.
    IntOrString,
    /// `metav1.Time`.
    Time,
}

/// `controller.ComputeHash`: the hash of `template` and the owner's `status.collisionCount`.
pub fn compute_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let mut hasher = Fnv32a::new();
    hasher.write(spew_text(template).as_bytes());
    if let Some(count) = collision_count {
        // ComputeHash writes an 8-byte buffer with the count in its first 4 bytes.
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&(count as u32).to_le_bytes());
        hasher.write(&bytes);
    }
    safe_encode_string(&hasher.sum32().to_string())
}

/// What go-spew's `%#v` prints for the Go `v1.PodTemplateSpec` upstream's informer holds.
fn spew_text(template: &PodTemplateSpec) -> String {
    let json = crate::apimachinery::json::to_value(template).unwrap_or(Value::Null);
    let mut text = String::new();
    print_typed(&mut text, "v1.PodTemplateSpec", &Kind::Struct(&schema::V1_POD_TEMPLATE_SPEC), Some(&json));
    text
}

/// FNV-1a, 32 bits (`hash/fnv.New32a`).
struct Fnv32a(u32);

impl Fnv32a {
    fn new() -> Self {
        Fnv32a(0x811c_9dc5)
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u32::from(*byte);
            self.0 = self.0.wrapping_mul(0x0100_0193);
        }
    }

    fn sum32(&self) -> u32 {
        self.0
    }
}

/// A value preceded by its type, as go-spew prints struct fields and the top-level value.
fn print_typed(out: &mut String, go_type: &str, kind: &Kind, value: Option<&Value>) {
    out.push('(');
    out.push_str(go_type);
    out.push(')');
    print_untyped(out, kind, value);
}

/// A value without its type, as go-spew prints slice elements, map values and pointer targets.
/// `None` (absent or null in JSON) is the Go zero value, as decoding leaves it.
fn print_untyped(out: &mut String, kind: &Kind, value: Option<&Value>) {
    let value = present(value);
    match kind {
        Kind::Bool => out.push_str(if value.and_then(Value::as_bool).unwrap_or(false) { "true" } else { "false" }),
        Kind::Int => print_int(out, value),
        Kind::Str => out.push_str(value.and_then(Value::as_str).unwrap_or("")),
        Kind::Bytes => print_bytes(out, value),
        Kind::Struct(fields) => print_struct(out, fields, value.and_then(Value::as_object)),
        // A nil pointer prints as `(*T)<nil>`, a set one as `(*T)` and its target untyped.
        Kind::Ptr(target) => match value {
            Some(value) => print_untyped(out, target, Some(value)),
            None => out.push_str("<nil>"),
        },
        Kind::Slice(element) => print_slice(out, element, value.and_then(Value::as_array)),
        Kind::Map(element) => print_map(out, element, value.and_then(Value::as_object)),
        Kind::Quantity => print_quantity(out, &GoQuantity::decoded(value)),
        Kind::IntOrString => print_int_or_string(out, value),
        // The zero time; see the module documentation for set times.
        Kind::Time => out.push_str("{Time:(time.Time){wall:(uint64)0 ext:(int64)0 loc:(*time.Location)<nil>}}"),
    }
}

/// The value unless it is absent or JSON null.
fn present(value: Option<&Value>) -> Option<&Value> {
    value.filter(|v| !v.is_null())
}

fn print_int(out: &mut String, value: Option<&Value>) {
    match value.and_then(|v| v.as_i64().map(i128::from).or_else(|| v.as_u64().map(i128::from))) {
        Some(n) => {
            let _ = write!(out, "{n}");
        }
        None => out.push('0'),
    }
}

/// `[]byte` as go-spew prints it: `[123 34 ...]`. Only `fieldsV1` has one; its JSON is the raw
/// bytes upstream holds.
fn print_bytes(out: &mut String, value: Option<&Value>) {
    let Some(value) = value else {
        out.push_str("<nil>");
        return;
    };
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    out.push('[');
    for (i, byte) in bytes.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let _ = write!(out, "{byte}");
    }
    out.push(']');
}

fn print_struct(out: &mut String, schema: &Struct, object: Option<&Map<String, Value>>) {
    out.push('{');
    for (i, field) in schema.fields.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(field.name);
        out.push(':');
        if field.json.is_empty() {
            print_inlined(out, field, object);
        } else {
            print_typed(out, field.go_type, &field.kind, object.and_then(|o| o.get(field.json)));
        }
    }
    out.push('}');
}

/// An embedded struct with `json:",inline"`: typed like any field, its fields taken from the
/// enclosing JSON object.
fn print_inlined(out: &mut String, field: &Field, object: Option<&Map<String, Value>>) {
    out.push('(');
    out.push_str(field.go_type);
    out.push(')');
    match &field.kind {
        Kind::Struct(schema) => print_struct(out, schema, object),
        other => print_untyped(out, other, None),
    }
}

/// Empty and absent slices are nil after protobuf decoding.
fn print_slice(out: &mut String, element: &Kind, items: Option<&Vec<Value>>) {
    let Some(items) = items.filter(|items| !items.is_empty()) else {
        out.push_str("<nil>");
        return;
    };
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        print_untyped(out, element, Some(item));
    }
    out.push(']');
}

/// `map[k1:v1 k2:v2]` with keys sorted bytewise (`SortKeys`); empty and absent maps are nil.
fn print_map(out: &mut String, element: &Kind, entries: Option<&Map<String, Value>>) {
    let Some(entries) = entries.filter(|entries| !entries.is_empty()) else {
        out.push_str("<nil>");
        return;
    };
    let mut keys: Vec<&String> = entries.keys().collect();
    keys.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    out.push_str("map[");
    for (i, key) in keys.into_iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(key);
        out.push(':');
        print_untyped(out, element, entries.get(key));
    }
    out.push(']');
}

/// `intstr.IntOrString{Type, IntVal, StrVal}` from its JSON number or string.
fn print_int_or_string(out: &mut String, value: Option<&Value>) {
    let (kind, int, string) = match value {
        Some(Value::String(s)) => (1, 0, s.as_str()),
        Some(v) => (0, v.as_i64().unwrap_or(0), ""),
        None => (0, 0, ""),
    };
    let _ = write!(out, "{{Type:(intstr.Type){kind} IntVal:(int32){int} StrVal:(string){string}}}");
}

/// The fields of a Go `resource.Quantity` (apimachinery v0.33 to v0.36: `i int64Amount`,
/// `d infDecAmount`, `s string`, `Format`) as `ParseQuantity` leaves them.
#[derive(Debug, PartialEq, Eq)]
struct GoQuantity {
    /// `i.value`, `i.scale`.
    value: i64,
    scale: i32,
    /// `d.Dec` when the value took the `inf.Dec` path.
    dec: Option<GoDec>,
    /// `s`: the parsed text, kept only when it is already canonical.
    text: String,
    format: &'static str,
}

/// An `inf.Dec`: sign, unscaled magnitude as 64-bit words (little-endian, `big.nat`), scale.
#[derive(Debug, PartialEq, Eq)]
struct GoDec {
    negative: bool,
    words: Vec<u64>,
    scale: i32,
}

impl GoQuantity {
    /// What upstream's informer holds for a quantity in JSON: the API server stores the
    /// canonical text, which protobuf decoding parses again. Absent means `"0"`, the canonical
    /// text of the zero value that protobuf always carries for a non-pointer quantity.
    fn decoded(value: Option<&Value>) -> GoQuantity {
        let canonical = value.and_then(Quantity::from_json).map_or_else(|| "0".to_string(), |q| q.canonical());
        parse_quantity(&canonical).unwrap_or_else(|| GoQuantity {
            value: 0,
            scale: 0,
            dec: None,
            text: String::new(),
            format: "",
        })
    }
}

fn print_quantity(out: &mut String, q: &GoQuantity) {
    let _ = write!(out, "{{i:(resource.int64Amount){{value:(int64){} scale:(resource.Scale){}}} ", q.value, q.scale);
    out.push_str("d:(resource.infDecAmount){Dec:(*inf.Dec)");
    match &q.dec {
        None => out.push_str("<nil>"),
        Some(dec) => {
            let _ = write!(out, "{{unscaled:(big.Int){{neg:(bool){} abs:(big.nat)", dec.negative);
            if dec.words.is_empty() {
                out.push_str("<nil>");
            } else {
                let words: Vec<String> = dec.words.iter().map(u64::to_string).collect();
                let _ = write!(out, "[{}]", words.join(" "));
            }
            let _ = write!(out, "}} scale:(inf.Scale){}}}", dec.scale);
        }
    }
    let _ = write!(out, "}} s:(string){} Format:(resource.Format){}}}", q.text, q.format);
}

/// The pieces `parseQuantityString` splits a quantity into.
struct QuantityParts<'a> {
    positive: bool,
    /// Sign, digits and fraction as written (what `inf.Dec.SetString` reads).
    value: &'a str,
    /// Integer digits without leading zeros (`"0"` when there are none).
    num: &'a str,
    /// Fraction digits.
    denom: &'a str,
    suffix: &'a str,
}

/// apimachinery's `parseQuantityString`.
fn split_quantity(s: &str) -> Option<QuantityParts<'_>> {
    let bytes = s.as_bytes();
    let end = bytes.len();
    let mut pos = 0;
    let mut positive = true;
    match bytes.first() {
        Some(b'-') => {
            positive = false;
            pos = 1;
        }
        Some(b'+') => pos = 1,
        _ => {}
    }
    while pos < end && bytes[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Some(QuantityParts { positive, value: "0", num: "0", denom: "", suffix: "" });
    }
    let num_start = pos;
    while pos < end && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    let num = if pos == num_start { "0" } else { &s[num_start..pos] };
    if pos >= end {
        return Some(QuantityParts { positive, value: s, num, denom: "", suffix: "" });
    }
    let mut denom = "";
    if bytes[pos] == b'.' {
        pos += 1;
        let denom_start = pos;
        while pos < end && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[denom_start..pos];
        if pos >= end {
            return Some(QuantityParts { positive, value: s, num, denom, suffix: "" });
        }
    }
    let value = &s[..pos];
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&bytes[pos]) {
        pos += 1;
    }
    if pos < end && (bytes[pos] == b'-' || bytes[pos] == b'+') {
        pos += 1;
    }
    while pos < end && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    (pos >= end).then(|| QuantityParts { positive, value, num, denom, suffix: &s[suffix_start..] })
}

/// apimachinery's `quantitySuffixer.interpret`: base, exponent and format of a suffix.
fn interpret_suffix(suffix: &str) -> Option<(u32, i32, &'static str)> {
    const DECIMAL: &[(&str, i32)] =
        &[("n", -9), ("u", -6), ("m", -3), ("", 0), ("k", 3), ("M", 6), ("G", 9), ("T", 12), ("P", 15), ("E", 18)];
    const BINARY: &[(&str, i32)] = &[("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50), ("Ei", 60)];
    if let Some((_, e)) = DECIMAL.iter().find(|(s, _)| *s == suffix) {
        return Some((10, *e, "DecimalSI"));
    }
    if let Some((_, e)) = BINARY.iter().find(|(s, _)| *s == suffix) {
        return Some((2, *e, "BinarySI"));
    }
    let exponent = suffix.strip_prefix(['e', 'E']).filter(|rest| !rest.is_empty())?;
    exponent.parse::<i64>().ok().map(|e| (10, e as i32, "DecimalExponent"))
}

/// apimachinery's `ParseQuantity` (v0.33 to v0.36), keeping the internal fields go-spew prints.
fn parse_quantity(s: &str) -> Option<GoQuantity> {
    if s.is_empty() {
        return None;
    }
    if s == "0" {
        return Some(GoQuantity { value: 0, scale: 0, dec: None, text: s.to_string(), format: "DecimalSI" });
    }
    let parts = split_quantity(s)?;
    let (base, exponent, format) = interpret_suffix(parts.suffix)?;
    if let Some(fast) = parse_int64_amount(s, &parts, base, exponent, format) {
        return Some(fast);
    }
    Some(parse_inf_dec(&parts, base, exponent, format))
}

/// `ParseQuantity`'s fast path into an `int64Amount`, when the value fits.
fn parse_int64_amount(
    s: &str,
    parts: &QuantityParts<'_>,
    base: u32,
    exponent: i32,
    format: &'static str,
) -> Option<GoQuantity> {
    let digits = (parts.num.len() + parts.denom.len()) as i32;
    let (mut scale, precision, mantissa) = if base == 10 {
        (exponent, 18 - digits, 1i64)
    } else if exponent >= 0 && parts.denom.is_empty() {
        // Go: int32(float32(exponent)*3/10), truncated toward zero.
        let precision = 15 - parts.num.len() as i32 - ((exponent as f32) * 3.0 / 10.0) as i32 - 1;
        (0, precision, 1i64.checked_shl(exponent as u32)?)
    } else {
        (0, -1, 1)
    };
    if precision < 0 {
        return None;
    }
    scale -= parts.denom.len() as i32;
    if scale < -9 {
        return None;
    }
    let shifted = format!("{}{}", parts.num, parts.denom);
    let value: i64 = shifted.parse().ok()?;
    let mut result = value.checked_mul(mantissa)?;
    if !parts.positive {
        result = -result;
    }
    let canonical = if base == 2 {
        exponent % 10 == 0 && value & 0x07 != 0
    } else {
        scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0')
    };
    let text = if canonical { s.to_string() } else { String::new() };
    Some(GoQuantity { value: result, scale, dec: None, text, format })
}

/// `ParseQuantity`'s `inf.Dec` path: the exact value rounded up to nano precision (scale 9),
/// binary values capped at 2^63-1.
fn parse_inf_dec(parts: &QuantityParts<'_>, base: u32, exponent: i32, format: &'static str) -> GoQuantity {
    // inf.Dec.SetString: the digits as written, scale = number of fraction digits.
    let unsigned = parts.value.trim_start_matches(['+', '-']);
    let (whole, fraction) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let mut magnitude = BigUint::from_decimal(&format!("{whole}{fraction}"));
    let mut scale = fraction.len() as i32;
    if base == 10 {
        scale -= exponent;
    } else {
        magnitude.shift_left(exponent as u32);
    }
    if !magnitude.is_zero() {
        // Round(amount, 9, RoundUp): the quotient by 1 at scale 9, rounded away from zero.
        if scale <= 9 {
            magnitude.mul_pow10((9 - scale) as u32);
        } else {
            magnitude.div_pow10_round_up((scale - 9) as u32);
        }
        scale = 9;
    }
    let mut format = format;
    if format == "BinarySI" {
        let max = BigUint::from_u64(i64::MAX as u64);
        if magnitude.cmp_scaled(scale, &max, 0) == std::cmp::Ordering::Greater {
            magnitude = max;
            scale = 0;
        }
        let one = BigUint::from_u64(1);
        if !magnitude.is_zero() && magnitude.cmp_scaled(scale, &one, 0) == std::cmp::Ordering::Less {
            format = "DecimalSI";
        }
    }
    let negative = !parts.positive && !magnitude.is_zero();
    let dec = GoDec { negative, words: magnitude.0, scale };
    GoQuantity { value: 0, scale: 0, dec: Some(dec), text: String::new(), format }
}

/// A non-negative integer as little-endian 64-bit words (`big.nat`), just what the `inf.Dec`
/// path needs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BigUint(Vec<u64>);

impl BigUint {
    fn from_u64(n: u64) -> Self {
        let mut big = BigUint(vec![n]);
        big.normalize();
        big
    }

    fn from_decimal(digits: &str) -> Self {
        let mut big = BigUint(Vec::new());
        for digit in digits.bytes().filter(u8::is_ascii_digit) {
            big.mul_add(10, u64::from(digit - b'0'));
        }
        big
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn normalize(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    /// self = self * factor + add.
    fn mul_add(&mut self, factor: u64, add: u64) {
        let mut carry = u128::from(add);
        for word in &mut self.0 {
            let product = u128::from(*word) * u128::from(factor) + carry;
            *word = product as u64;
            carry = product >> 64;
        }
        if carry > 0 {
            self.0.push(carry as u64);
        }
        self.normalize();
    }

    fn shift_left(&mut self, bits: u32) {
        for _ in 0..bits {
            self.mul_add(2, 0);
        }
    }

    fn mul_pow10(&mut self, n: u32) {
        for _ in 0..n {
            self.mul_add(10, 0);
        }
    }

    /// self = ceil(self / 10^n).
    fn div_pow10_round_up(&mut self, n: u32) {
        let mut inexact = false;
        for _ in 0..n {
            let mut remainder = 0u128;
            for word in self.0.iter_mut().rev() {
                let current = (remainder << 64) | u128::from(*word);
                *word = (current / 10) as u64;
                remainder = current % 10;
            }
            inexact |= remainder != 0;
            self.normalize();
        }
        if inexact {
            self.mul_add(1, 1);
        }
    }

    /// Compares self × 10^-scale with other × 10^-other_scale.
    fn cmp_scaled(&self, scale: i32, other: &BigUint, other_scale: i32) -> std::cmp::Ordering {
        let (mut a, mut b) = (self.clone(), other.clone());
        if scale > other_scale {
            b.mul_pow10((scale - other_scale) as u32);
        } else {
            a.mul_pow10((other_scale - scale) as u32);
        }
        a.0.len().cmp(&b.0.len()).then_with(|| a.0.iter().rev().cmp(b.0.iter().rev()))
    }
}

#[cfg(test)]
mod tests;
