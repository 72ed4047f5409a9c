//! Cron schedules as upstream reads them: robfig/cron v3's `ParseStandard` (five fields, or a
//! descriptor such as `@hourly` or `@every 1h30m`, an optional `TZ=`/`CRON_TZ=` prefix) with its
//! error messages, and its `Next` (`SpecSchedule.Next`, `ConstantDelaySchedule.Next`), including
//! the day-of-month/day-of-week star rule and its behaviour around daylight-saving changes, which
//! follows Go's `time.Date` normalisation. Used by kube-apiserver's validation (the sandbox's)
//! and by the cronjob controller.
//!
//! Go's `time.Local` (a schedule without a zone: the controller manager's own zone) is the
//! system's zone (`TZ`, else `/etc/localtime`), as Go's runtime reads it.

use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, ToSpan};

use super::duration::ParseDurationError;
use super::strconv::quote;

/// A zone name `time.LoadLocation` refuses, in Go's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocationError {
    /// A name that would leave the zone database (`..`, a leading slash).
    #[error("time: invalid location name")]
    InvalidName,
    /// A name the zone database does not hold.
    #[error("unknown time zone {name}")]
    Unknown {
        /// The name asked for.
        name: String,
    },
}

/// A schedule robfig/cron's `ParseStandard` refuses, in its words (they reach the CronJob's
/// validation message and its Events).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The empty schedule.
    #[error("empty spec string")]
    Empty,
    /// Not five fields (`found` of them, shown space-separated as Go's `%v` of a slice).
    #[error("expected exactly 5 fields, found {}: [{}]", .fields.len(), .fields.join(" "))]
    FieldCount {
        /// The fields found.
        fields: Vec<String>,
    },
    /// A `TZ=`/`CRON_TZ=` prefix naming a zone that cannot be loaded.
    #[error("provided bad location {name}: {source}")]
    BadLocation {
        /// The zone name.
        name: String,
        /// Why it cannot be loaded.
        source: LocationError,
    },
    /// `@` and not a known descriptor nor `@every`.
    #[error("unrecognized descriptor: {spec}")]
    UnknownDescriptor {
        /// The whole schedule.
        spec: String,
    },
    /// `@every` with a duration that does not parse.
    #[error("failed to parse duration {spec}: {source}")]
    Duration {
        /// The whole schedule.
        spec: String,
        /// The duration's error.
        source: ParseDurationError,
    },
    /// A range with more than one `-`.
    #[error("too many hyphens: {expression}")]
    TooManyHyphens {
        /// The range.
        expression: String,
    },
    /// A range with more than one `/`.
    #[error("too many slashes: {expression}")]
    TooManySlashes {
        /// The range.
        expression: String,
    },
    /// A range starting below the field's minimum.
    #[error("beginning of range ({start}) below minimum ({min}): {expression}")]
    BelowMinimum {
        /// The range's start.
        start: u64,
        /// The field's minimum.
        min: u64,
        /// The range.
        expression: String,
    },
    /// A range ending above the field's maximum.
    #[error("end of range ({end}) above maximum ({max}): {expression}")]
    AboveMaximum {
        /// The range's end.
        end: u64,
        /// The field's maximum.
        max: u64,
        /// The range.
        expression: String,
    },
    /// A range whose start is after its end.
    #[error("beginning of range ({start}) beyond end of range ({end}): {expression}")]
    StartBeyondEnd {
        /// The range's start.
        start: u64,
        /// The range's end.
        end: u64,
        /// The range.
        expression: String,
    },
    /// A step of zero.
    #[error("step of range should be a positive number: {expression}")]
    ZeroStep {
        /// The range.
        expression: String,
    },
    /// A number that is not one (`strconv.Atoi`'s syntax error).
    #[error("failed to parse int from {text}: strconv.Atoi: parsing {}: invalid syntax", quote(.text))]
    IntSyntax {
        /// The text.
        text: String,
    },
    /// A number beyond an `int` (`strconv.Atoi`'s range error).
    #[error("failed to parse int from {text}: strconv.Atoi: parsing {}: value out of range", quote(.text))]
    IntRange {
        /// The text.
        text: String,
    },
    /// A negative number.
    #[error("negative number ({number}) not allowed: {text}")]
    Negative {
        /// Its value.
        number: i64,
        /// The text.
        text: String,
    },
}

/// A parsed schedule (`cron.Schedule`).
#[derive(Debug, Clone)]
pub enum Schedule {
    /// Five fields or a fixed descriptor (`SpecSchedule`).
    Spec(SpecSchedule),
    /// `@every <duration>` (`ConstantDelaySchedule`): whole seconds, at least one.
    Every(SignedDuration),
}

/// `SpecSchedule`: bit sets of the matching values, with the star bit (bit 63) for a field
/// written as `*` or `?`.
#[derive(Debug, Clone)]
pub struct SpecSchedule {
    second: u64,
    minute: u64,
    hour: u64,
    dom: u64,
    month: u64,
    dow: u64,
    /// The zone the fields are read in: the `TZ=` prefix's, else the local zone.
    location: TimeZone,
}

/// One field of a standard cron expression: its bounds and names (`bounds`).
struct Bounds {
    min: u64,
    max: u64,
    names: &'static [&'static str],
}

const STAR_BIT: u64 = 1 << 63;
const SECONDS: Bounds = Bounds { min: 0, max: 59, names: &[] };
const MINUTES: Bounds = Bounds { min: 0, max: 59, names: &[] };
const HOURS: Bounds = Bounds { min: 0, max: 23, names: &[] };
const DAYS_OF_MONTH: Bounds = Bounds { min: 1, max: 31, names: &[] };
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
};
const DAYS_OF_WEEK: Bounds = Bounds { min: 0, max: 6, names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"] };

/// Go's `time.LoadLocation`: `""` and `UTC` are UTC, `Local` the system's zone, anything else
/// an IANA name looked up in the system's time zone database (case-sensitively, as Go reads
/// the files). The error is Go's text.
pub fn load_location(name: &str) -> Result<TimeZone, LocationError> {
    match name {
        "" | "UTC" => return Ok(TimeZone::UTC),
        "Local" => return Ok(TimeZone::system()),
        _ => {}
    }
    if name.contains("..") || name.starts_with(['/', '\\']) {
        return Err(LocationError::InvalidName);
    }
    match TimeZone::get(name) {
        // jiff looks names up without regard to case; Go opens the file of that exact name.
        Ok(zone) if zone.iana_name().is_none_or(|found| found == name) => Ok(zone),
        _ => Err(LocationError::Unknown { name: name.to_string() }),
    }
}

/// robfig/cron v3's `ParseStandard`: five fields (minute, hour, day of month, month, day of
/// week) or a descriptor, optionally after `TZ=<zone> ` or `CRON_TZ=<zone> `.
pub fn parse_standard(spec: &str) -> Result<Schedule, ParseError> {
    if spec.is_empty() {
        return Err(ParseError::Empty);
    }
    let mut spec = spec;
    let mut location = None;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        // Go slices up to the first space; with none it would panic: refused as no fields.
        let Some(space) = spec.find(' ') else {
            return Err(ParseError::FieldCount { fields: Vec::new() });
        };
        let eq = spec.find('=').unwrap_or_default();
        let name = &spec[eq + 1..space];
        location =
            Some(load_location(name).map_err(|source| ParseError::BadLocation { name: name.to_string(), source })?);
        spec = spec[space..].trim();
    }
    let location = location.unwrap_or_else(TimeZone::system);
    if spec.starts_with('@') {
        return descriptor(spec, location);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(ParseError::FieldCount { fields: fields.iter().map(|f| f.to_string()).collect() });
    }
    Ok(Schedule::Spec(SpecSchedule {
        second: 1 << SECONDS.min,
        minute: field(fields[0], &MINUTES)?,
        hour: field(fields[1], &HOURS)?,
        dom: field(fields[2], &DAYS_OF_MONTH)?,
        month: field(fields[3], &MONTHS)?,
        dow: field(fields[4], &DAYS_OF_WEEK)?,
        location,
    }))
}

/// `parseDescriptor`.
fn descriptor(spec: &str, location: TimeZone) -> Result<Schedule, ParseError> {
    let all = |b: &Bounds| bits(b.min, b.max, 1) | STAR_BIT;
    let first = |b: &Bounds| 1u64 << b.min;
    let (hour, dom, month, dow) = match spec {
        "@yearly" | "@annually" => (first(&HOURS), first(&DAYS_OF_MONTH), first(&MONTHS), all(&DAYS_OF_WEEK)),
        "@monthly" => (first(&HOURS), first(&DAYS_OF_MONTH), all(&MONTHS), all(&DAYS_OF_WEEK)),
        "@weekly" => (first(&HOURS), all(&DAYS_OF_MONTH), all(&MONTHS), first(&DAYS_OF_WEEK)),
        "@daily" | "@midnight" => (first(&HOURS), all(&DAYS_OF_MONTH), all(&MONTHS), all(&DAYS_OF_WEEK)),
        "@hourly" => (all(&HOURS), all(&DAYS_OF_MONTH), all(&MONTHS), all(&DAYS_OF_WEEK)),
        _ => return every(spec),
    };
    let (second, minute) = (first(&SECONDS), first(&MINUTES));
    Ok(Schedule::Spec(SpecSchedule { second, minute, hour, dom, month, dow, location }))
}

/// `@every <duration>` (`cron.Every`): at least a second, whole seconds.
fn every(spec: &str) -> Result<Schedule, ParseError> {
    let Some(text) = spec.strip_prefix("@every ") else {
        return Err(ParseError::UnknownDescriptor { spec: spec.to_string() });
    };
    let seconds = match super::duration::parse_go_duration(text) {
        Ok(duration) => duration.as_secs().max(1),
        // Go's `time.ParseDuration` takes negative durations, which `Every` raises to 1 s.
        Err(ParseDurationError::Negative { .. }) => 1,
        Err(source) => return Err(ParseError::Duration { spec: spec.to_string(), source }),
    };
    Ok(Schedule::Every(SignedDuration::from_secs(seconds as i64)))
}

/// `getField`: comma-separated ranges.
fn field(text: &str, bounds: &Bounds) -> Result<u64, ParseError> {
    text.split(',').filter(|e| !e.is_empty()).try_fold(0, |acc, expression| Ok(acc | range(expression, bounds)?))
}

/// `getRange`: `*`, `N`, `N-M`, each with an optional `/step`.
fn range(expression: &str, bounds: &Bounds) -> Result<u64, ParseError> {
    let expression_text = || expression.to_string();
    let range_and_step: Vec<&str> = expression.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let mut extra = 0;
    let (start, mut end) = if matches!(low_and_high[0], "*" | "?") {
        extra = STAR_BIT;
        (bounds.min, bounds.max)
    } else {
        let start = int_or_name(low_and_high[0], bounds.names)?;
        match low_and_high.len() {
            1 => (start, start),
            2 => (start, int_or_name(low_and_high[1], bounds.names)?),
            _ => return Err(ParseError::TooManyHyphens { expression: expression_text() }),
        }
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = parse_int(range_and_step[1])?;
            if low_and_high.len() == 1 {
                end = bounds.max;
            }
            if step > 1 {
                extra = 0;
            }
            step
        }
        _ => return Err(ParseError::TooManySlashes { expression: expression_text() }),
    };
    if start < bounds.min {
        return Err(ParseError::BelowMinimum { start, min: bounds.min, expression: expression_text() });
    }
    if end > bounds.max {
        return Err(ParseError::AboveMaximum { end, max: bounds.max, expression: expression_text() });
    }
    if start > end {
        return Err(ParseError::StartBeyondEnd { start, end, expression: expression_text() });
    }
    if step == 0 {
        return Err(ParseError::ZeroStep { expression: expression_text() });
    }
    Ok(bits(start, end, step) | extra)
}

/// `getBits`.
fn bits(min: u64, max: u64, step: u64) -> u64 {
    (min..=max).step_by(step as usize).fold(0, |acc, i| acc | 1 << i)
}

fn int_or_name(text: &str, names: &[&str]) -> Result<u64, ParseError> {
    let lower = text.to_lowercase();
    match names.iter().position(|n| *n == lower) {
        // Month names count from 1, weekday names from 0.
        Some(i) => Ok(i as u64 + if names.len() == 12 { 1 } else { 0 }),
        None => parse_int(text),
    }
}

/// `mustParseInt`: Go's `strconv.Atoi`, then no negatives.
fn parse_int(text: &str) -> Result<u64, ParseError> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::IntSyntax { text: text.to_string() });
    }
    let number: i64 = text.parse().map_err(|_| ParseError::IntRange { text: text.to_string() })?;
    u64::try_from(number).map_err(|_| ParseError::Negative { number, text: text.to_string() })
}

impl Schedule {
    /// `Schedule.Next`: the first activation strictly after `t`; `None` where Go returns the
    /// zero time (no match within five years, e.g. `0 0 30 2 *`).
    pub fn next(&self, t: Timestamp) -> Option<Timestamp> {
        match self {
            Schedule::Every(delay) => {
                let nanos = SignedDuration::from_nanos(i64::from(t.subsec_nanosecond()));
                t.checked_add(*delay - nanos).ok()
            }
            Schedule::Spec(spec) => spec.next(t),
        }
    }
}

impl SpecSchedule {
    fn day_matches(&self, t: &DateTime) -> bool {
        let dom = 1 << t.day() & self.dom > 0;
        let dow = 1 << t.weekday().to_sunday_zero_offset() & self.dow > 0;
        if self.dom & STAR_BIT > 0 || self.dow & STAR_BIT > 0 { dom && dow } else { dom || dow }
    }

    /// `SpecSchedule.Next`, step by step as robfig/cron does it.
    fn next(&self, t: Timestamp) -> Option<Timestamp> {
        let zone = &self.location;
        let civil = |t: Timestamp| zone.to_datetime(t);
        let hours = |h: i64| SignedDuration::from_hours(h);
        // The upcoming second.
        let mut t = t
            .checked_add(SignedDuration::from_secs(1) - SignedDuration::from_nanos(t.subsec_nanosecond().into()))
            .ok()?;
        let mut added = false;
        let year_limit = civil(t).year() + 5;
        'wrap: loop {
            let now = civil(t);
            if now.year() > year_limit {
                return None;
            }
            while 1 << civil(t).month() & self.month == 0 {
                if !added {
                    added = true;
                    let c = civil(t);
                    t = go_date(c.year(), c.month().into(), 1, 0, zone)?;
                }
                let c = civil(t);
                t = go_date(c.year(), i64::from(c.month()) + 1, c.day().into(), seconds_of_day(&c), zone)?;
                if civil(t).month() == 1 {
                    continue 'wrap;
                }
            }
            while !self.day_matches(&civil(t)) {
                if !added {
                    added = true;
                    let c = civil(t);
                    t = go_date(c.year(), c.month().into(), c.day().into(), 0, zone)?;
                }
                let c = civil(t);
                t = go_date(c.year(), c.month().into(), i64::from(c.day()) + 1, seconds_of_day(&c), zone)?;
                // Midnight may not exist (DST): back to 0h, or on to the next day's 0h.
                let hour = i64::from(civil(t).hour());
                if hour != 0 {
                    t = t.checked_add(if hour > 12 { hours(24 - hour) } else { hours(-hour) }).ok()?;
                }
                if civil(t).day() == 1 {
                    continue 'wrap;
                }
            }
            while 1 << civil(t).hour() & self.hour == 0 {
                if !added {
                    added = true;
                    let c = civil(t);
                    t = go_date(c.year(), c.month().into(), c.day().into(), i64::from(c.hour()) * 3600, zone)?;
                }
                t = t.checked_add(hours(1)).ok()?;
                if civil(t).hour() == 0 {
                    continue 'wrap;
                }
            }
            while 1 << civil(t).minute() & self.minute == 0 {
                if !added {
                    added = true;
                    t = truncate(t, 60);
                }
                t = t.checked_add(SignedDuration::from_mins(1)).ok()?;
                if civil(t).minute() == 0 {
                    continue 'wrap;
                }
            }
            while 1 << civil(t).second() & self.second == 0 {
                if !added {
                    added = true;
                    t = truncate(t, 1);
                }
                t = t.checked_add(SignedDuration::from_secs(1)).ok()?;
                if civil(t).second() == 0 {
                    continue 'wrap;
                }
            }
            return Some(t);
        }
    }
}

fn seconds_of_day(c: &DateTime) -> i64 {
    i64::from(c.hour()) * 3600 + i64::from(c.minute()) * 60 + i64::from(c.second())
}

/// `Time.Truncate` to whole `seconds` (the times here have whole-second parts already).
fn truncate(t: Timestamp, seconds: i64) -> Timestamp {
    Timestamp::from_second(t.as_second().div_euclid(seconds) * seconds).unwrap_or(t)
}

/// Go's `time.Date(year, month, day, 0, 0, 0, 0, zone) + seconds`: month and day out of range
/// roll over, and a wall time that does not exist or exists twice gets Go's offset: the zone's
/// offset at the instant found by first reading the wall time with the offset in effect at
/// that same wall time taken as UTC.
fn go_date(year: i16, month: i64, day: i64, seconds: i64, zone: &TimeZone) -> Option<Timestamp> {
    let months = i64::from(year) * 12 + month - 1;
    let year = i16::try_from(months.div_euclid(12)).ok()?;
    let first = Date::new(year, (months.rem_euclid(12) + 1) as i8, 1).ok()?;
    let date = first.checked_add((day - 1).days()).ok()?;
    let local = date.to_zoned(TimeZone::UTC).ok()?.timestamp().as_second() + seconds;
    let offset_at = |unix: i64| Timestamp::from_second(unix).map(|t| i64::from(zone.to_offset(t).seconds()));
    let guess = offset_at(local).ok()?;
    let offset = offset_at(local - guess).ok()?;
    Timestamp::from_second(local - offset).ok()
}

#[cfg(test)]
mod tests;
