//! `/configz`, `/flagz` and `/statusz`, worded as component-base's `configz` and `zpages`
//! (`flagz`, `statusz`) write them. The caller (the process's composition root) hands in what
//! they show; `/flagz` and `/statusz` exist only behind their feature gates.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::responses::Answer;

/// The name the zpages give the component.
const COMPONENT: &str = "kube-controller-manager";
/// zpages' delimiters, one picked at random per answer so that nobody parses them.
const DELIMITERS: [&str; 4] = [":", ": ", "=", " "];
const WARNING: &str = "Warning: This endpoint is not meant to be machine parseable, has no formatting compatibility guarantees and is for debugging purposes only.";
const NOT_ACCEPTABLE: &str = "media type not acceptable, must be: text/plain\n";
const PLAIN_TEXT: &str = "text/plain; charset=utf-8";

/// What the debug pages show; a page whose part is `None` is not served (404).
#[derive(Debug, Clone, Default)]
pub struct DebugPages {
    /// `/configz`: `{"<name>": <config>}`, as JSON.
    pub configz: Option<String>,
    /// `/flagz` (`--feature-gates=ComponentFlagz=true`): every flag and its value.
    pub flagz: Option<Vec<(String, String)>>,
    /// `/statusz` (`--feature-gates=ComponentStatusz=true`).
    pub statusz: Option<Statusz>,
}

/// The versions `/statusz` reports.
#[derive(Debug, Clone)]
pub struct Statusz {
    /// Upstream's "Go version" line: here the language and its compiler.
    pub runtime_version: String,
    /// The binary's version (`1.33.5` upstream: its effective binary version).
    pub binary_version: String,
    /// `--emulated-version`, or the binary's own minor version.
    pub emulation_version: Option<String>,
}

impl DebugPages {
    /// The answer for `path`, or `None` when it is not one of these pages (or not served).
    pub fn answer(&self, path: &str, accept: Option<&str>) -> Option<Answer> {
        match path {
            "/configz" => {
                let body = self.configz.clone()?.into_bytes();
                Some(Answer { code: 200, content_type: "application/json", nosniff: true, body })
            }
            "/flagz" => {
                let flags = self.flagz.as_ref()?;
                Some(zpage(accept, || flagz(flags, random_delimiter())))
            }
            "/statusz" => {
                let status = self.statusz.as_ref()?;
                let start = super::process_metrics::start_time_seconds().unwrap_or_default();
                Some(zpage(accept, || statusz(status, start, SystemTime::now(), random_delimiter())))
            }
            _ => None,
        }
    }
}

/// A zpage's answer: 406 unless the client accepts plain text.
fn zpage(accept: Option<&str>, body: impl FnOnce() -> String) -> Answer {
    if !acceptable(accept.unwrap_or_default()) {
        return Answer::text(406, NOT_ACCEPTABLE);
    }
    Answer { code: 200, content_type: PLAIN_TEXT, nosniff: false, body: body().into_bytes() }
}

fn random_delimiter() -> &'static str {
    DELIMITERS[(crate::random::u64() % DELIMITERS.len() as u64) as usize]
}

/// zpages' `AcceptableMediaType`: some `text/plain`, `text/*` or `*/*` range (goautoneg's
/// parsing) with no parameter but `charset=utf-8`. No `Accept` header is not acceptable.
pub fn acceptable(header: &str) -> bool {
    header.split(',').any(|part| {
        let mut pieces = part.trim().split(';');
        let range = pieces.next().unwrap_or_default();
        let (kind, sub) = match range.split('/').collect::<Vec<_>>()[..] {
            ["*"] => ("*", "*"),
            [kind, sub] => (kind.trim(), sub.trim()),
            _ => return false,
        };
        // `q` is not a parameter to goautoneg; pieces without `=` are dropped.
        let params: Vec<(&str, &str)> = pieces
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim(), v.trim()))
            .filter(|(k, _)| *k != "q")
            .collect();
        let type_ok = matches!(kind, "text" | "*") && matches!(sub, "plain" | "*");
        let params_ok = match params[..] {
            [] => true,
            [("charset", charset)] => charset.eq_ignore_ascii_case("utf-8"),
            _ => false,
        };
        type_ok && params_ok
    })
}

fn header(page: &str) -> String {
    format!("\n{COMPONENT} {page}\n{WARNING}\n")
}

/// `/flagz`: the header, then `name<delimiter>value` per flag, sorted by name.
fn flagz(flags: &[(String, String)], delimiter: &str) -> String {
    let mut sorted: Vec<&(String, String)> = flags.iter().collect();
    sorted.sort();
    let mut out = header("flags");
    for (name, value) in sorted {
        out.push_str(&format!("{name}{delimiter}{value}\n"));
    }
    out
}

/// `/statusz`: the header, then start time, uptime and versions.
fn statusz(status: &Statusz, start_seconds: f64, now: SystemTime, delimiter: &str) -> String {
    let start = UNIX_EPOCH + Duration::from_secs(start_seconds as u64);
    let up = now.duration_since(start).unwrap_or_default().as_secs();
    let mut out = header("statusz");
    out.push_str(&format!(
        "\nStarted{delimiter} {}\nUp{delimiter} {} hr {:02} min {:02} sec\nGo version{delimiter} {}\nBinary version{delimiter} {}\n",
        unix_date(start),
        up / 3600,
        (up / 60) % 60,
        up % 60,
        status.runtime_version,
        status.binary_version,
    ));
    if let Some(emulation) = &status.emulation_version {
        out.push_str(&format!("Emulation version{delimiter} {emulation}"));
    }
    out.push('\n');
    out
}

/// Go's `time.UnixDate` layout in UTC: `Mon Jan _2 15:04:05 UTC 2006`.
fn unix_date(time: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let secs = time.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{} {} {day:>2} {:02}:{:02}:{:02} UTC {year}",
        DAYS[(days % 7) as usize],
        MONTHS[month as usize - 1],
        rest / 3600,
        (rest / 60) % 60,
        rest % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_are_judged_as_zpages_judge_them() {
        for yes in
            ["*/*", "text/plain", "text/*", "*", "text/plain; charset=UTF-8", "application/json, text/plain;q=0.5"]
        {
            assert!(acceptable(yes), "{yes}");
        }
        for no in ["", "application/json", "text/html", "text/plain; version=0.0.4", "text/plain;charset=latin1"] {
            assert!(!acceptable(no), "{no}");
        }
    }

    #[test]
    fn flagz_lists_sorted_flags_after_the_warning() {
        let flags = vec![("v".to_string(), "2".to_string()), ("bind-address".to_string(), "0.0.0.0".to_string())];
        assert_eq!(
            flagz(&flags, "="),
            format!("\nkube-controller-manager flags\n{WARNING}\nbind-address=0.0.0.0\nv=2\n")
        );
    }

    #[test]
    fn statusz_reports_start_uptime_and_versions() {
        let status = Statusz {
            runtime_version: "rust".into(),
            binary_version: "1.33.5".into(),
            emulation_version: Some("1.33".into()),
        };
        let start = 1_764_203_045.0; // Thu Nov 27 00:24:05 UTC 2025
        let now = UNIX_EPOCH + Duration::from_secs(1_764_203_045 + 3 * 3600 + 62);
        assert_eq!(
            statusz(&status, start, now, ": "),
            format!(
                "\nkube-controller-manager statusz\n{WARNING}\n\nStarted:  Thu Nov 27 00:24:05 UTC 2025\n\
                 Up:  3 hr 01 min 02 sec\nGo version:  rust\nBinary version:  1.33.5\nEmulation version:  1.33\n"
            )
        );
        let without = Statusz { emulation_version: None, ..status };
        assert!(statusz(&without, start, now, ":").ends_with("Binary version: 1.33.5\n\n"));
    }

    #[test]
    fn unix_dates_pad_the_day_with_a_space() {
        assert_eq!(unix_date(UNIX_EPOCH), "Thu Jan  1 00:00:00 UTC 1970");
        assert_eq!(unix_date(UNIX_EPOCH + Duration::from_secs(951_782_400)), "Tue Feb 29 00:00:00 UTC 2000");
    }

    #[test]
    fn pages_are_served_only_when_given_and_acceptable() {
        let pages = DebugPages { configz: Some("{}".into()), ..DebugPages::default() };
        let configz = pages.answer("/configz", None).unwrap();
        assert_eq!((configz.code, configz.content_type, configz.nosniff), (200, "application/json", true));
        assert!(pages.answer("/flagz", Some("*/*")).is_none());
        let pages = DebugPages { flagz: Some(Vec::new()), ..DebugPages::default() };
        assert_eq!(pages.answer("/flagz", None).unwrap().code, 406);
        assert_eq!(pages.answer("/flagz", Some("text/plain")).unwrap().code, 200);
        assert!(pages.answer("/configz", None).is_none());
    }
}
