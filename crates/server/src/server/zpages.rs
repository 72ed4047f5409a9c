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
const NOT_ACCEPTABLE: &str = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"only the following media types are accepted: application/json, application/yaml, text/plain\",\"reason\":\"NotAcceptable\",\"code\":406}\n";
const PLAIN_TEXT: &str = "text/plain; charset=utf-8";
/// The group and version of the structured pages.
const GROUP: &str = "config.k8s.io";
const VERSION: &str = "v1beta1";

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
    /// The listed paths of the secure port's handler, sorted (upstream's `ListedPaths`).
    pub paths: Vec<String>,
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
                Some(zpage(accept, "Flagz", || flagz(flags, random_delimiter()), || flagz_object(flags)))
            }
            "/statusz" => {
                let status = self.statusz.as_ref()?;
                let start = super::process_metrics::start_time_seconds().unwrap_or_default();
                let now = SystemTime::now();
                Some(zpage(
                    accept,
                    "Statusz",
                    || statusz(status, start, now, random_delimiter()),
                    || statusz_object(status, start, now),
                ))
            }
            _ => None,
        }
    }
}

/// A zpage's answer: plain text when the client takes it (or says nothing), the structured
/// `kind` as JSON when it asks for exactly that, else 406.
fn zpage(accept: Option<&str>, kind: &str, text: impl FnOnce() -> String, object: impl FnOnce() -> String) -> Answer {
    let header = accept.unwrap_or_default();
    if header.trim().is_empty() || acceptable(header) {
        return Answer { code: 200, content_type: PLAIN_TEXT, nosniff: false, body: text().into_bytes() };
    }
    if let Some(content_type) = structured(header, kind) {
        let mut body = object().into_bytes();
        body.push(b'\n');
        return Answer { code: 200, content_type, nosniff: false, body };
    }
    Answer { code: 406, content_type: "application/json", nosniff: false, body: NOT_ACCEPTABLE.as_bytes().to_vec() }
}

/// The content type of the structured answer when some media range of `header` is
/// `application/json` with `as=<kind>`, `g=config.k8s.io` and `v=v1beta1`.
fn structured(header: &str, kind: &str) -> Option<&'static str> {
    let asked = header.split(',').any(|part| {
        let mut pieces = part.trim().split(';');
        let range = pieces.next().unwrap_or_default().trim();
        let params: Vec<(&str, &str)> =
            pieces.filter_map(|p| p.split_once('=')).map(|(k, v)| (k.trim(), v.trim())).collect();
        let param = |name: &str| params.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
        range == "application/json"
            && param("as") == Some(kind)
            && param("g") == Some(GROUP)
            && param("v") == Some(VERSION)
    });
    match (asked, kind) {
        (false, _) => None,
        (true, "Flagz") => Some("application/json;g=config.k8s.io;v=v1beta1;as=Flagz"),
        (true, _) => Some("application/json;g=config.k8s.io;v=v1beta1;as=Statusz"),
    }
}

/// `{"kind":…,"apiVersion":…,"metadata":{"name":…},` then `fields` (already JSON, in order).
fn object(kind: &str, fields: &[(&str, String)]) -> String {
    let mut out =
        format!("{{\"kind\":\"{kind}\",\"apiVersion\":\"{GROUP}/{VERSION}\",\"metadata\":{{\"name\":\"{COMPONENT}\"}}");
    for (name, value) in fields {
        out.push_str(&format!(",\"{name}\":{value}"));
    }
    out.push('}');
    out
}

fn json(value: impl serde::Serialize) -> String {
    serde_json::to_string(&value).unwrap_or_default()
}

/// The `config.k8s.io/v1beta1` `Flagz` object: every flag's value by name (a Go map: sorted).
fn flagz_object(flags: &[(String, String)]) -> String {
    let flags: std::collections::BTreeMap<&str, &str> = flags.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    object("Flagz", &[("flags", json(flags))])
}

/// The `config.k8s.io/v1beta1` `Statusz` object, fields in upstream's order.
fn statusz_object(status: &Statusz, start_seconds: f64, now: SystemTime) -> String {
    let start = UNIX_EPOCH + Duration::from_secs(start_seconds as u64);
    let start_time = jiff::Timestamp::from_second(start_seconds as i64).map(|t| t.to_string()).unwrap_or_default();
    let mut fields = vec![
        ("startTime", json(start_time)),
        ("uptimeSeconds", json(now.duration_since(start).unwrap_or_default().as_secs())),
        ("goVersion", json(&status.runtime_version)),
        ("binaryVersion", json(&status.binary_version)),
    ];
    if let Some(emulation) = &status.emulation_version {
        fields.push(("emulationVersion", json(emulation)));
    }
    if !status.paths.is_empty() {
        fields.push(("paths", json(&status.paths)));
    }
    object("Statusz", &fields)
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
    let mut out = header("flagz");
    for (name, value) in sorted {
        out.push_str(&format!("{name}{delimiter}{value}\n"));
    }
    out
}

/// `/statusz`: the header, then start time, uptime, versions and the listed paths.
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
    if !status.paths.is_empty() {
        out.push_str(&format!("Paths{delimiter} {}", status.paths.join(" ")));
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
            format!("\nkube-controller-manager flagz\n{WARNING}\nbind-address=0.0.0.0\nv=2\n")
        );
    }

    #[test]
    fn statusz_reports_start_uptime_and_versions() {
        let status = Statusz {
            runtime_version: "rust".into(),
            binary_version: "1.36.2".into(),
            emulation_version: Some("1.36".into()),
            paths: vec!["/configz".into(), "/healthz".into(), "/metrics".into()],
        };
        let start = 1_764_203_045.0; // Thu Nov 27 00:24:05 UTC 2025
        let now = UNIX_EPOCH + Duration::from_secs(1_764_203_045 + 3 * 3600 + 62);
        assert_eq!(
            statusz(&status, start, now, ": "),
            format!(
                "\nkube-controller-manager statusz\n{WARNING}\n\nStarted:  Thu Nov 27 00:24:05 UTC 2025\n\
                 Up:  3 hr 01 min 02 sec\nGo version:  rust\nBinary version:  1.36.2\nEmulation version:  1.36\n\
                 Paths:  /configz /healthz /metrics\n"
            )
        );
        assert_eq!(
            statusz_object(&status, start, now),
            r#"{"kind":"Statusz","apiVersion":"config.k8s.io/v1beta1","metadata":{"name":"kube-controller-manager"},"startTime":"2025-11-27T00:24:05Z","uptimeSeconds":10862,"goVersion":"rust","binaryVersion":"1.36.2","emulationVersion":"1.36","paths":["/configz","/healthz","/metrics"]}"#
        );
        let without = Statusz { emulation_version: None, paths: Vec::new(), ..status };
        assert!(statusz(&without, start, now, ":").ends_with("Binary version: 1.36.2\n\n\n"));
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
        let pages = DebugPages { flagz: Some(vec![("v".into(), "2".into())]), ..DebugPages::default() };
        assert_eq!(pages.answer("/flagz", None).unwrap().code, 200, "plain text when nothing is asked for");
        assert_eq!(pages.answer("/flagz", Some("text/plain")).unwrap().code, 200);
        let refused = pages.answer("/flagz", Some("application/json")).unwrap();
        assert_eq!((refused.code, refused.content_type), (406, "application/json"));
        assert_eq!(refused.body, NOT_ACCEPTABLE.as_bytes());
        let json = pages.answer("/flagz", Some("application/json;as=Flagz;g=config.k8s.io;v=v1beta1")).unwrap();
        assert_eq!((json.code, json.content_type), (200, "application/json;g=config.k8s.io;v=v1beta1;as=Flagz"));
        assert_eq!(
            String::from_utf8(json.body).unwrap(),
            "{\"kind\":\"Flagz\",\"apiVersion\":\"config.k8s.io/v1beta1\",\"metadata\":{\"name\":\"kube-controller-manager\"},\"flags\":{\"v\":\"2\"}}\n"
        );
        assert_eq!(
            pages.answer("/flagz", Some("application/json;as=Statusz;g=config.k8s.io;v=v1beta1")).unwrap().code,
            406
        );
        assert!(pages.answer("/configz", None).is_none());
    }
}
