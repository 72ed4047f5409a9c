//! Go `time.Duration` text: the syntax every duration flag of upstream takes
//! (`time.ParseDuration`) and the form `--help` shows defaults in (`Duration.String`).

use std::time::Duration;

const NANOS_PER_MICRO: u64 = 1_000;
const NANOS_PER_MILLI: u64 = 1_000_000;
const NANOS_PER_SECOND: u64 = 1_000_000_000;
const NANOS_PER_MINUTE: u64 = 60 * NANOS_PER_SECOND;
const NANOS_PER_HOUR: u64 = 60 * NANOS_PER_MINUTE;

/// Go's `time.Duration` is an `int64` of nanoseconds; larger values are rejected as upstream does.
const MAX_NANOS: u64 = i64::MAX as u64;

/// Text that is not a duration, worded as Go's `time.ParseDuration` words it (`{text:?}` is
/// Go's `quote` of the whole text for every text the parser can reach).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseDurationError {
    /// Not the grammar, or beyond what an `int64` of nanoseconds holds.
    #[error("time: invalid duration {text:?}")]
    Invalid {
        /// The whole text.
        text: String,
    },
    /// A number without a unit after it.
    #[error("time: missing unit in duration {text:?}")]
    MissingUnit {
        /// The whole text.
        text: String,
    },
    /// A unit Go does not know.
    #[error("time: unknown unit {unit:?} in duration {text:?}")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
        /// The whole text.
        text: String,
    },
    /// A negative duration, which Go accepts and we refuse.
    #[error("negative duration {text:?} is not allowed")]
    Negative {
        /// The whole text.
        text: String,
    },
}

/// Parses a Go duration such as `5m0s`, `1h30m`, `1.5h`, `500ms`, `300us` or `0`.
///
/// The grammar and error texts are Go's `time.ParseDuration`, except that negative durations
/// (which Go accepts) are refused: no flag of the controller manager means anything by them.
pub fn parse_go_duration(text: &str) -> Result<Duration, ParseDurationError> {
    let invalid = || ParseDurationError::Invalid { text: text.to_string() };
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let first = rest.as_bytes()[0];
        if !(first == b'.' || first.is_ascii_digit()) {
            return Err(invalid());
        }
        let (whole, after_whole, whole_digits) = leading_int(rest).ok_or_else(invalid)?;
        rest = after_whole;
        let (mut fraction, mut scale, mut fraction_digits) = (0u64, 1.0f64, 0usize);
        if let Some(after_dot) = rest.strip_prefix('.') {
            (fraction, scale, fraction_digits, rest) = leading_fraction(after_dot);
        }
        if whole_digits == 0 && fraction_digits == 0 {
            return Err(invalid());
        }
        let unit_len = rest.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(rest.len());
        if unit_len == 0 {
            return Err(ParseDurationError::MissingUnit { text: text.to_string() });
        }
        let (unit_text, after_unit) = rest.split_at(unit_len);
        rest = after_unit;
        let unit = unit_nanos(unit_text)
            .ok_or_else(|| ParseDurationError::UnknownUnit { unit: unit_text.to_string(), text: text.to_string() })?;
        let mut value = whole.checked_mul(unit).filter(|v| *v <= 1 << 63).ok_or_else(invalid)?;
        if fraction > 0 {
            // As Go: float64 keeps nanosecond accuracy for fractions of the largest unit (hours).
            value += (fraction as f64 * (unit as f64 / scale)) as u64;
            if value > 1 << 63 {
                return Err(invalid());
            }
        }
        total = total.checked_add(value).filter(|v| *v <= 1 << 63).ok_or_else(invalid)?;
    }
    if negative {
        return if total == 0 {
            Ok(Duration::ZERO)
        } else {
            Err(ParseDurationError::Negative { text: text.to_string() })
        };
    }
    if total > MAX_NANOS {
        return Err(invalid());
    }
    Ok(Duration::from_nanos(total))
}

/// The leading decimal digits of `s` as an integer, the rest, and how many digits there were.
/// `None` on overflow, like Go's `leadingInt`.
fn leading_int(s: &str) -> Option<(u64, &str, usize)> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let mut value: u64 = 0;
    for b in s[..digits].bytes() {
        if value > (1 << 63) / 10 {
            return None;
        }
        value = value * 10 + u64::from(b - b'0');
        if value > 1 << 63 {
            return None;
        }
    }
    Some((value, &s[digits..], digits))
}

/// The digits after a decimal point: their value, the power of ten to divide it by, how many
/// digits were consumed and the rest. Digits beyond what fits are dropped, as in Go.
fn leading_fraction(s: &str) -> (u64, f64, usize, &str) {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let (mut value, mut scale, mut overflow) = (0u64, 1.0f64, false);
    for b in s[..digits].bytes() {
        if overflow {
            continue;
        }
        if value > (1 << 63) / 10 {
            overflow = true;
            continue;
        }
        let next = value * 10 + u64::from(b - b'0');
        if next > 1 << 63 {
            overflow = true;
            continue;
        }
        value = next;
        scale *= 10.0;
    }
    (value, scale, digits, &s[digits..])
}

fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        // Go accepts the micro sign (U+00B5) and the Greek letter mu (U+03BC).
        "us" | "\u{b5}s" | "\u{3bc}s" => NANOS_PER_MICRO,
        "ms" => NANOS_PER_MILLI,
        "s" => NANOS_PER_SECOND,
        "m" => NANOS_PER_MINUTE,
        "h" => NANOS_PER_HOUR,
        _ => return None,
    })
}

/// Formats like Go's `Duration.String()`: `0s`, `1.5µs`, `500ms`, `40s`, `5m0s`, `1h0m0s`.
pub fn format_go_duration(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < u128::from(NANOS_PER_SECOND) {
        // Below a second Go switches to the largest unit that keeps an integer part.
        let (unit, digits) = if nanos < u128::from(NANOS_PER_MICRO) {
            ("ns", 0)
        } else if nanos < u128::from(NANOS_PER_MILLI) {
            ("\u{b5}s", 3)
        } else {
            ("ms", 6)
        };
        return format!("{}{unit}", decimal(nanos, digits));
    }
    let seconds = nanos / u128::from(NANOS_PER_SECOND);
    let sub_second = nanos % u128::from(NANOS_PER_SECOND);
    let mut second_text = (seconds % 60).to_string();
    let fraction = fraction_digits(sub_second, 9);
    if !fraction.is_empty() {
        second_text = format!("{second_text}.{fraction}");
    }
    let minutes = seconds / 60;
    if minutes == 0 {
        return format!("{second_text}s");
    }
    let hours = minutes / 60;
    if hours == 0 {
        return format!("{}m{second_text}s", minutes % 60);
    }
    format!("{hours}h{}m{second_text}s", minutes % 60)
}

/// `value / 10^digits` with the fraction's trailing zeros (and a bare point) left out.
fn decimal(value: u128, digits: u32) -> String {
    let divisor = 10u128.pow(digits);
    let fraction = fraction_digits(value % divisor, digits);
    if fraction.is_empty() { (value / divisor).to_string() } else { format!("{}.{fraction}", value / divisor) }
}

/// The `digits`-wide zero-padded decimal form of `value` without trailing zeros.
fn fraction_digits(value: u128, digits: u32) -> String {
    if value == 0 {
        return String::new();
    }
    let padded = format!("{value:0width$}", width = digits as usize);
    padded.trim_end_matches('0').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(secs: u64, nanos: u32) -> Duration {
        Duration::new(secs, nanos)
    }

    #[test]
    fn parses_go_durations() {
        let cases: &[(&str, Duration)] = &[
            ("0", Duration::ZERO),
            ("-0", Duration::ZERO),
            ("+0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("5s", d(5, 0)),
            ("40s", d(40, 0)),
            ("5m0s", d(300, 0)),
            ("1m", d(60, 0)),
            ("12h0m0s", d(12 * 3600, 0)),
            ("1h30m", d(5400, 0)),
            ("1.5h", d(5400, 0)),
            ("+1.5h", d(5400, 0)),
            ("500ms", d(0, 500_000_000)),
            ("300us", d(0, 300_000)),
            ("300\u{b5}s", d(0, 300_000)),
            ("300\u{3bc}s", d(0, 300_000)),
            ("7ns", d(0, 7)),
            (".5s", d(0, 500_000_000)),
            ("5.s", d(5, 0)),
            ("1h1m1s1ms1us1ns", d(3661, 1_001_001)),
            ("8760h0m0s", d(8760 * 3600, 0)),
            ("2562047h47m16.854775807s", Duration::from_nanos(i64::MAX as u64)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_go_duration(text), Ok(*want), "{text}");
        }
    }

    #[test]
    fn rejects_what_go_rejects() {
        let cases: &[(&str, &str)] = &[
            ("", r#"time: invalid duration """#),
            ("abc", r#"time: invalid duration "abc""#),
            ("5", r#"time: missing unit in duration "5""#),
            ("10", r#"time: missing unit in duration "10""#),
            ("5x", r#"time: unknown unit "x" in duration "5x""#),
            ("5 s", r#"time: unknown unit " s" in duration "5 s""#),
            (".s", r#"time: invalid duration ".s""#),
            ("-", r#"time: invalid duration "-""#),
            ("1h-5m", r#"time: unknown unit "h-" in duration "1h-5m""#),
            ("2562047h47m16.854775808s", r#"time: invalid duration "2562047h47m16.854775808s""#),
            ("99999999999999999999s", r#"time: invalid duration "99999999999999999999s""#),
            ("-5s", r#"negative duration "-5s" is not allowed"#),
        ];
        for (text, want) in cases {
            assert_eq!(parse_go_duration(text).map_err(|e| e.to_string()), Err(want.to_string()), "{text}");
        }
    }

    #[test]
    fn formats_like_go() {
        let cases: &[(Duration, &str)] = &[
            (Duration::ZERO, "0s"),
            (d(0, 1), "1ns"),
            (d(0, 1_500), "1.5\u{b5}s"),
            (d(0, 300_000), "300\u{b5}s"),
            (d(0, 500_000_000), "500ms"),
            (d(0, 1_234_567), "1.234567ms"),
            (d(1, 0), "1s"),
            (d(2, 0), "2s"),
            (d(40, 0), "40s"),
            (d(50, 0), "50s"),
            (d(1, 500_000_000), "1.5s"),
            (d(60, 0), "1m0s"),
            (d(90, 0), "1m30s"),
            (d(300, 0), "5m0s"),
            (d(3600, 0), "1h0m0s"),
            (d(5400, 0), "1h30m0s"),
            (d(12 * 3600, 0), "12h0m0s"),
            (d(8760 * 3600, 0), "8760h0m0s"),
            (d(3661, 1), "1h1m1.000000001s"),
        ];
        for (duration, want) in cases {
            assert_eq!(format_go_duration(*duration), *want, "{duration:?}");
        }
    }

    #[test]
    fn format_then_parse_round_trips() {
        for nanos in [1, 999, 1_000, 1_500_000, 59_999_999_999, 3_600_000_000_001] {
            let duration = Duration::from_nanos(nanos);
            assert_eq!(parse_go_duration(&format_go_duration(duration)), Ok(duration));
        }
    }
}
