//! Kubernetes resource quantities, as apimachinery's `resource.Quantity`: parsing, comparison,
//! arithmetic and the canonical text form the API server answers with (`1536Mi`, `500m`, `1`).
//!
//! Values are kept as a count of nano-units in an `i128`, which covers everything a resource
//! list holds in practice (apimachinery itself rounds to nano precision as well).

use std::cmp::Ordering;
use std::fmt;

use serde_json::Value;

/// How a quantity is written; kept from the parsed text and used for the canonical form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `e3`, `E-6` exponents.
    DecimalExponent,
    /// Powers of 1024: `Ki`, `Mi`, `Gi`, `Ti`, `Pi`, `Ei`.
    BinarySI,
    /// Powers of 1000: `n`, `u`, `m`, none, `k`, `M`, `G`, `T`, `P`, `E`.
    DecimalSI,
}

/// A resource quantity. Equality and ordering compare the value only, as `Quantity.Cmp` does.
#[derive(Debug, Clone, Copy)]
pub struct Quantity {
    nanos: i128,
    format: Format,
}

/// Text that is not a quantity (apimachinery's `ErrFormatWrong`), or one beyond what is kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// Not the quantity grammar (`ErrFormatWrong`).
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    FormatWrong,
    /// More significant digits than are kept.
    #[error("quantity {text:?} is too large or too precise")]
    TooLargeOrPrecise {
        /// The text.
        text: String,
    },
    /// A value beyond what is kept.
    #[error("quantity {text:?} is too large")]
    TooLarge {
        /// The text.
        text: String,
    },
}

const NANOS_PER_UNIT: i128 = 1_000_000_000;
/// apimachinery's `MaxMilliValue`: the largest value whose milli-value fits an int64.
const MAX_MILLI_VALUE: i128 = (i64::MAX / 1000) as i128;
/// Enough for 10^29 nano-units without overflowing an `i128` in the scaling steps.
const MAX_DIGITS: usize = 30;

const DECIMAL_SUFFIXES: &[(&str, i32)] =
    &[("n", -9), ("u", -6), ("m", -3), ("", 0), ("k", 3), ("M", 6), ("G", 9), ("T", 12), ("P", 15), ("E", 18)];
const BINARY_SUFFIXES: &[(&str, u32)] = &[("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50), ("Ei", 60)];

impl Quantity {
    /// Parses `text` as `ParseQuantity` does (no surrounding spaces allowed).
    pub fn parse(text: &str) -> Result<Quantity, QuantityError> {
        let wrong = || QuantityError::FormatWrong;
        let (negative, rest) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            Some(_) => (false, text),
            None => return Err(wrong()),
        };
        let number_len = rest.bytes().take_while(|b| b.is_ascii_digit() || *b == b'.').count();
        let (number, suffix) = rest.split_at(number_len);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
            return Err(wrong());
        }
        let (format, base2, exp10) = interpret_suffix(suffix).ok_or_else(wrong)?;

        // digits × 10^(exp10 - fraction digits) × 2^base2, in nano-units, rounded away from zero.
        let fraction = fraction.trim_end_matches('0');
        let digits = format!("{whole}{fraction}");
        let digits = digits.trim_start_matches('0');
        if digits.len() > MAX_DIGITS {
            return Err(QuantityError::TooLargeOrPrecise { text: text.to_string() });
        }
        let mantissa: i128 = if digits.is_empty() { 0 } else { digits.parse().map_err(|_| wrong())? };
        let too_large = || QuantityError::TooLarge { text: text.to_string() };
        let mut value = mantissa.checked_mul(1i128.checked_shl(base2).ok_or_else(too_large)?).ok_or_else(too_large)?;
        let scale = exp10 + 9 - fraction.len() as i32;
        if scale >= 0 {
            value = value.checked_mul(pow10(scale as u32).ok_or_else(too_large)?).ok_or_else(too_large)?;
        } else {
            let divisor = pow10(scale.unsigned_abs());
            value = match divisor {
                Some(d) => div_away_from_zero(value, d),
                // Smaller than a nano-unit: rounds up to one.
                None => i128::from(value != 0),
            };
        }
        if value.unsigned_abs() > 10u128.pow(38) / 10 {
            return Err(too_large());
        }
        Ok(Quantity { nanos: if negative { -value } else { value }, format })
    }

    /// The quantity in a JSON value: a string, or a bare number (both decode as a Quantity).
    pub fn from_json(value: &Value) -> Option<Quantity> {
        match value {
            Value::String(s) => Quantity::parse(s.trim()).ok(),
            Value::Number(n) => Quantity::parse(&n.to_string()).ok(),
            _ => None,
        }
    }

    /// A whole number of units, e.g. an object count.
    pub fn from_units(units: i64) -> Quantity {
        Quantity { nanos: i128::from(units) * NANOS_PER_UNIT, format: Format::DecimalSI }
    }

    /// A number of milli-units (what apimachinery's `NewMilliQuantity` makes).
    pub fn from_millis(millis: i64, format: Format) -> Quantity {
        Quantity { nanos: i128::from(millis) * 1_000_000, format }
    }

    /// A number of nano-units (what apimachinery's `NewScaledQuantity(n, Nano)` makes).
    pub fn from_nanos(nanos: i128, format: Format) -> Quantity {
        Quantity { nanos, format }
    }

    /// Zero, in the decimal SI format.
    pub fn zero() -> Quantity {
        Quantity { nanos: 0, format: Format::DecimalSI }
    }

    /// The format the quantity was written in, which its canonical form keeps.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// Whether the value is below zero.
    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// The value in whole units, rounded away from zero (`Quantity.Value`).
    pub fn value(&self) -> i128 {
        div_away_from_zero(self.nanos, NANOS_PER_UNIT)
    }

    /// The exact value in nano-units.
    pub fn nano_value(&self) -> i128 {
        self.nanos
    }

    /// The value in milli-units, rounded away from zero (`Quantity.MilliValue`).
    pub fn milli_value(&self) -> i128 {
        div_away_from_zero(self.nanos, 1_000_000)
    }

    /// Rounded away from zero to whole units, keeping the format (`Quantity.RoundUp(0)`).
    pub fn round_up_units(&self) -> Quantity {
        Quantity { nanos: self.value() * NANOS_PER_UNIT, format: self.format }
    }

    /// The sum; the format is this quantity's unless it is zero (`Quantity.Add`).
    pub fn add(&self, other: &Quantity) -> Quantity {
        let format = if self.nanos == 0 { other.format } else { self.format };
        Quantity { nanos: self.nanos.saturating_add(other.nanos), format }
    }

    /// The difference; the format is this quantity's unless it is zero (`Quantity.Sub`).
    pub fn sub(&self, other: &Quantity) -> Quantity {
        let format = if self.nanos == 0 { other.format } else { self.format };
        Quantity { nanos: self.nanos.saturating_sub(other.nanos), format }
    }

    /// The canonical text (`Quantity.String`).
    pub fn canonical(&self) -> String {
        if self.nanos == 0 {
            return "0".to_string();
        }
        let mut format = self.format;
        if format == Format::BinarySI && (self.nanos.abs() < 1024 * NANOS_PER_UNIT || self.nanos % NANOS_PER_UNIT != 0)
        {
            // Small or fractional binary values are shown in decimal, as apimachinery does.
            format = Format::DecimalSI;
        }
        if format == Format::BinarySI {
            let (mut amount, mut exponent) = (self.nanos / NANOS_PER_UNIT, 0);
            while amount % 1024 == 0 && exponent < 60 {
                amount /= 1024;
                exponent += 10;
            }
            let suffix = BINARY_SUFFIXES.iter().find(|(_, e)| *e == exponent).map_or("", |(s, _)| s);
            return format!("{amount}{suffix}");
        }
        let (mut amount, mut exponent) = (self.nanos, -9i32);
        while amount % 10 == 0 {
            amount /= 10;
            exponent += 1;
        }
        // Make the exponent a multiple of 3, moving digits into the mantissa.
        match exponent.rem_euclid(3) {
            1 => {
                amount *= 10;
                exponent -= 1;
            }
            2 => {
                amount *= 100;
                exponent -= 2;
            }
            _ => {}
        }
        let decimal = DECIMAL_SUFFIXES.iter().find(|(_, e)| *e == exponent).map(|(s, _)| *s);
        match (format, decimal) {
            (Format::DecimalExponent, _) if exponent == 0 => amount.to_string(),
            (Format::DecimalExponent, _) | (_, None) => format!("{amount}e{exponent}"),
            (_, Some(suffix)) => format!("{amount}{suffix}"),
        }
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

/// The values of three quantities at a common precision, for comparing them: milli-units when
/// none is too large for that, else whole units (the LimitRanger's `requestLimitEnforcedValues`).
pub fn common_precision(a: &Quantity, b: &Quantity, c: &Quantity) -> (i128, i128, i128) {
    if a.value() <= MAX_MILLI_VALUE && b.value() <= MAX_MILLI_VALUE && c.value() <= MAX_MILLI_VALUE {
        (a.milli_value(), b.milli_value(), c.milli_value())
    } else {
        (a.value(), b.value(), c.value())
    }
}

/// Whether a value is small enough to be compared in milli-units.
pub fn fits_milli(q: &Quantity) -> bool {
    q.value() <= MAX_MILLI_VALUE
}

/// (format, power of two, power of ten) of a suffix.
fn interpret_suffix(suffix: &str) -> Option<(Format, u32, i32)> {
    if let Some((_, e)) = DECIMAL_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
        return Some((Format::DecimalSI, 0, *e));
    }
    if let Some((_, e)) = BINARY_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
        return Some((Format::BinarySI, *e, 0));
    }
    let exponent = suffix.strip_prefix(['e', 'E']).filter(|rest| !rest.is_empty())?;
    let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let exponent: i32 = exponent.parse().ok()?;
    (-60..=60).contains(&exponent).then_some((Format::DecimalExponent, 0, exponent))
}

fn pow10(exponent: u32) -> Option<i128> {
    10i128.checked_pow(exponent)
}

fn div_away_from_zero(value: i128, divisor: i128) -> i128 {
    let quotient = value / divisor;
    match value % divisor {
        0 => quotient,
        _ if value > 0 => quotient + 1,
        _ => quotient - 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(text: &str) -> Quantity {
        Quantity::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn canonical_forms_match_apimachinery() {
        let table = [
            ("0", "0"),
            ("0m", "0"),
            ("1", "1"),
            ("1000m", "1"),
            ("100m", "100m"),
            ("0.1", "100m"),
            (".5", "500m"),
            ("1.", "1"),
            ("+2", "2"),
            ("-50m", "-50m"),
            ("1500m", "1500m"),
            ("1.5", "1500m"),
            ("1k", "1k"),
            ("1000", "1k"),
            ("1024", "1024"),
            ("12e6", "12e6"),
            ("1e3", "1e3"),
            ("1E-3", "1e-3"),
            ("1E", "1E"),
            ("2G", "2G"),
            ("1Ki", "1Ki"),
            ("1024Ki", "1Mi"),
            ("1.5Gi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("1.5Ki", "1536"),
            ("512Ki", "512Ki"),
            ("100n", "100n"),
            ("1u", "1u"),
            ("0.0000000001", "1n"),
            ("128974848", "128974848"),
            ("129e6", "129e6"),
            ("123Mi", "123Mi"),
        ];
        for (input, canonical) in table {
            assert_eq!(q(input).canonical(), canonical, "{input}");
        }
    }

    #[test]
    fn invalid_text_is_refused() {
        for bad in ["", "abc", ".", "1.2.3", "1x", "1KiB", "Mi", "1e", "1e+", "--1", "1 ", "1ki"] {
            assert!(Quantity::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn comparison_ignores_the_format() {
        assert_eq!(q("1Ki"), q("1024"));
        assert_eq!(q("1"), q("1000m"));
        assert!(q("1Gi") > q("1G"));
        assert!(q("999m") < q("1"));
        assert!(q("1e3") == q("1k"));
        assert!(q("-1") < q("0"));
    }

    #[test]
    fn arithmetic_keeps_the_left_format_unless_zero() {
        assert_eq!(q("256Mi").add(&q("128Mi")).canonical(), "384Mi");
        assert_eq!(q("0").add(&q("128Mi")).canonical(), "128Mi");
        assert_eq!(q("500m").add(&q("500m")).canonical(), "1");
        assert_eq!(q("2").add(&q("1")).canonical(), "3");
        assert_eq!(q("1Gi").sub(&q("512Mi")).canonical(), "512Mi");
        assert_eq!(q("100m").milli_value(), 100);
        assert_eq!(q("1n").milli_value(), 1);
        assert_eq!(q("1500m").value(), 2);
        assert_eq!(Quantity::from_json(&serde_json::json!(2)).map(|q| q.canonical()), Some("2".into()));
        assert_eq!(Quantity::from_json(&serde_json::json!(0.5)).map(|q| q.canonical()), Some("500m".into()));
    }
}
