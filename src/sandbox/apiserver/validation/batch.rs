//! Jobs and CronJobs (`pkg/apis/batch/validation`): counts, the selector and template, restart
//! policies (the Job-only rules are in `job`), and CronJob schedules parsed as robfig/cron's
//! `ParseStandard` does.

use serde_json::Value;

use super::meta::{label_selector, nonnegative, text};
use super::{FieldError, go_label_selector, go_string_map, pod, quote};
use crate::apimachinery::labels::Selector;

/// The labels a generated Job selector relies on (`batch.ControllerUidLabel`,
/// `batch.JobNameLabel`, and their legacy forms).
const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
const LEGACY_CONTROLLER_UID_LABEL: &str = "controller-uid";
const LEGACY_JOB_NAME_LABEL: &str = "job-name";
/// A CronJob name leaves room for the Job suffix (`DNS1035LabelMaxLength - 11`).
const CRON_JOB_NAME_MAX: usize = 52;

/// `ValidateJob` (`old`: the stored Job on an update). The `batch.kubernetes.io/` labels are
/// required unless the stored Job's template lacked them (`RequirePrefixedLabels`).
pub(super) fn job(object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let require_prefixed = old.is_none_or(|old| {
        let labels = &old["spec"]["template"]["metadata"]["labels"];
        !labels[JOB_NAME_LABEL].is_null() && !labels[CONTROLLER_UID_LABEL].is_null()
    });
    let mut causes = generated_selector(object, require_prefixed);
    causes.extend(job_spec_with_selector(&object["spec"], "spec"));
    causes.extend(super::job::indexed_hostname(object));
    causes
}

/// `ValidateJobSpec`: `validateJobSpec`, the selector, and the template labels it must match.
pub(super) fn job_spec_with_selector(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut causes = job_spec(spec, path);
    let selector_path = format!("{path}.selector");
    if spec["selector"].is_null() {
        causes.push(FieldError::required(&selector_path, ""));
    } else {
        causes.extend(label_selector(&spec["selector"], &selector_path));
    }
    let template_labels = &spec["template"]["metadata"]["labels"];
    if let Ok(selector) = Selector::from_label_selector_object(&spec["selector"])
        && !selector.matches(template_labels.as_object().unwrap_or(&Default::default()))
    {
        let detail = "`selector` does not match template `labels`";
        let field = format!("{path}.template.metadata.labels");
        causes.push(FieldError::invalid(&field, go_string_map(template_labels), detail));
    }
    causes
}

/// `validateGeneratedSelector`: a generated selector and the template carry the Job's uid and
/// name (`ValidateHasLabel`), and the selector selects them.
fn generated_selector(object: &Value, require_prefixed: bool) -> Vec<FieldError> {
    let spec = &object["spec"];
    let uid = object["metadata"]["uid"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    if spec["manualSelector"] == true || spec["selector"].is_null() || uid.is_empty() {
        return Vec::new();
    }
    let labels = &spec["template"]["metadata"]["labels"];
    let mut expected = vec![(LEGACY_CONTROLLER_UID_LABEL, uid), (LEGACY_JOB_NAME_LABEL, name)];
    if require_prefixed {
        expected.extend([(CONTROLLER_UID_LABEL, uid), (JOB_NAME_LABEL, name)]);
    }
    let mut causes: Vec<FieldError> = expected
        .iter()
        .filter_map(|(key, value)| {
            let field = format!("spec.template.metadata.labels[{key}]");
            let detail = format!("must be '{value}'");
            match labels[*key].as_str() {
                None => Some(FieldError::required(&field, &detail)),
                Some(actual) if actual != *value => Some(FieldError::invalid(&field, go_string_map(labels), &detail)),
                Some(_) => None,
            }
        })
        .collect();
    let expected_labels: serde_json::Map<String, Value> =
        expected.iter().map(|(k, v)| (k.to_string(), Value::from(*v))).collect();
    if let Ok(selector) = Selector::from_label_selector_object(&spec["selector"])
        && !selector.matches(&expected_labels)
    {
        let rendered = go_label_selector(&spec["selector"]);
        causes.push(FieldError::invalid("spec.selector", rendered, "`selector` not auto-generated"));
    }
    causes
}

/// `validateJobSpec`: counts, the completion mode and the rules of `job::spec_rules`, the pod
/// template and its restart policy.
fn job_spec(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut causes: Vec<FieldError> = ["parallelism", "completions", "activeDeadlineSeconds", "backoffLimit"]
        .iter()
        .chain(&["ttlSecondsAfterFinished", "backoffLimitPerIndex", "maxFailedIndexes"])
        .filter_map(|field| nonnegative(spec, field, path))
        .collect();
    causes.extend(super::job::spec_rules(spec, path));
    let template_path = format!("{path}.template");
    causes.extend(pod::template(&spec["template"], &template_path));
    let policy_field = format!("{template_path}.spec.restartPolicy");
    match text(&spec["template"]["spec"], "restartPolicy") {
        "" | "Always" => causes.push(FieldError::required(&policy_field, "valid values: \"OnFailure\", \"Never\"")),
        "OnFailure" if !spec["podFailurePolicy"].is_null() => causes.push(FieldError::invalid(
            &policy_field,
            quote("OnFailure"),
            "only \"Never\" is supported when podFailurePolicy is specified",
        )),
        "OnFailure" | "Never" => {}
        other => causes.push(FieldError::not_supported(&policy_field, other, &["OnFailure", "Never"])),
    }
    causes
}

/// `ValidateCronJobCreate` / `ValidateCronJobUpdate` (`old`: the stored CronJob).
pub(super) fn cron_job(object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut causes = Vec::new();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    if old.is_none() && name.len() > CRON_JOB_NAME_MAX {
        causes.push(FieldError::invalid("metadata.name", quote(name), "must be no more than 52 characters"));
    }
    let spec = &object["spec"];
    let schedule = text(spec, "schedule");
    if schedule.is_empty() {
        causes.push(FieldError::required("spec.schedule", ""));
    } else {
        let tz_allowed = old.is_some_and(|o| text(&o["spec"], "schedule").contains("TZ"));
        causes.extend(schedule_format(schedule, tz_allowed, !spec["timeZone"].is_null()));
    }
    causes.extend(nonnegative(spec, "startingDeadlineSeconds", "spec"));
    let zone_changed = old.is_none_or(|o| o["spec"]["timeZone"] != spec["timeZone"]);
    if zone_changed && let Some(zone) = spec["timeZone"].as_str() {
        causes.extend(time_zone(zone));
    }
    match text(spec, "concurrencyPolicy") {
        "Allow" | "Forbid" | "Replace" => {}
        "" => causes.push(FieldError::required("spec.concurrencyPolicy", "")),
        other => {
            causes.push(FieldError::not_supported("spec.concurrencyPolicy", other, &["Allow", "Forbid", "Replace"]))
        }
    }
    causes.extend(job_template(&spec["jobTemplate"]));
    causes.extend(nonnegative(spec, "successfulJobsHistoryLimit", "spec"));
    causes.extend(nonnegative(spec, "failedJobsHistoryLimit", "spec"));
    causes
}

/// `ValidateJobTemplateSpec`: the selector is generated for each Job.
fn job_template(template: &Value) -> Vec<FieldError> {
    let spec = &template["spec"];
    let mut causes = job_spec(spec, "spec.jobTemplate.spec");
    if !spec["selector"].is_null() {
        let rendered = go_label_selector(&spec["selector"]);
        causes.push(FieldError::invalid(
            "spec.jobTemplate.spec.selector",
            rendered,
            "`selector` will be auto-generated",
        ));
    }
    if spec["manualSelector"] == true {
        let field = "spec.jobTemplate.spec.manualSelector";
        causes.push(FieldError::not_supported_rendered(field, "true".into(), &["nil", "false"]));
    }
    causes
}

/// `validateScheduleFormat`.
fn schedule_format(schedule: &str, tz_allowed: bool, has_time_zone: bool) -> Vec<FieldError> {
    let mut causes = Vec::new();
    if let Err(message) = parse_standard(schedule) {
        causes.push(FieldError::invalid("spec.schedule", quote(schedule), &message));
    }
    if schedule.contains("TZ") {
        if tz_allowed && has_time_zone {
            let detail = "cannot use both timeZone field and TZ or CRON_TZ in schedule";
            causes.push(FieldError::invalid("spec.schedule", quote(schedule), detail));
        } else if !tz_allowed {
            let detail = "cannot use TZ or CRON_TZ in schedule, use timeZone field instead";
            causes.push(FieldError::invalid("spec.schedule", quote(schedule), detail));
        }
    }
    causes
}

/// `validateTimeZone`: a name of the IANA database (kube-apiserver embeds Go's `time/tzdata`;
/// the sandbox reads the system's, and takes any well-formed name when it has none).
fn time_zone(zone: &str) -> Vec<FieldError> {
    let field = "spec.timeZone";
    if zone.is_empty() {
        return vec![FieldError::invalid(field, quote(zone), "timeZone must be nil or non-empty string")];
    }
    let unknown = format!("unknown time zone {zone}");
    // `validTimeZoneCharacters`, per path part.
    let valid_part = |part: &str| {
        part != "."
            && part != ".."
            && !part.starts_with('-')
            && (1..=14).contains(&part.len())
            && part.chars().all(|c| c.is_ascii_alphanumeric() || ".-_+".contains(c))
    };
    if !zone.split('/').all(valid_part) {
        return vec![FieldError::invalid(field, quote(zone), &unknown)];
    }
    let mut causes = Vec::new();
    if zone.eq_ignore_ascii_case("local") {
        let detail = "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones";
        causes.push(FieldError::invalid(field, quote(zone), detail));
    }
    // `time.LoadLocation`: "UTC" and "Local" always load; other names are looked up exactly.
    let database = jiff::tz::db();
    let known = matches!(zone, "UTC" | "Local")
        || database.is_definitively_empty()
        || database.available().any(|name| name.as_str() == zone);
    if !known {
        causes.push(FieldError::invalid(field, quote(zone), &unknown));
    }
    causes
}

/// One field of a standard cron expression: its bounds and names.
struct Bounds {
    min: u64,
    max: u64,
    names: &'static [&'static str],
}

const MINUTES: Bounds = Bounds { min: 0, max: 59, names: &[] };
const HOURS: Bounds = Bounds { min: 0, max: 23, names: &[] };
const DAYS_OF_MONTH: Bounds = Bounds { min: 1, max: 31, names: &[] };
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
};
const DAYS_OF_WEEK: Bounds = Bounds { min: 0, max: 6, names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"] };

/// robfig/cron v3's `ParseStandard`: five fields or a descriptor, with its error messages.
pub(super) fn parse_standard(spec: &str) -> Result<(), String> {
    if spec.is_empty() {
        return Err("empty spec string".into());
    }
    let mut spec = spec;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        spec = spec.find(' ').map_or("", |i| spec[i..].trim());
    }
    if spec.starts_with('@') {
        return descriptor(spec);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!("expected exactly 5 fields, found {}: [{}]", fields.len(), fields.join(" ")));
    }
    for (field, bounds) in fields.iter().zip([&MINUTES, &HOURS, &DAYS_OF_MONTH, &MONTHS, &DAYS_OF_WEEK]) {
        for expression in field.split(',') {
            range(expression, bounds)?;
        }
    }
    Ok(())
}

/// `parseDescriptor`.
fn descriptor(spec: &str) -> Result<(), String> {
    match spec {
        "@yearly" | "@annually" | "@monthly" | "@weekly" | "@daily" | "@midnight" | "@hourly" => Ok(()),
        _ => match spec.strip_prefix("@every ") {
            // Go's `time.ParseDuration` also takes negative durations.
            Some(duration)
                if crate::apimachinery::duration::parse_go_duration(duration.strip_prefix('-').unwrap_or(duration))
                    .is_ok() =>
            {
                Ok(())
            }
            Some(duration) => {
                Err(format!("failed to parse duration {spec}: time: invalid duration {}", quote(duration)))
            }
            None => Err(format!("unrecognized descriptor: {spec}")),
        },
    }
}

/// `getRange`: `*`, `N`, `N-M`, each with an optional `/step`.
fn range(expression: &str, bounds: &Bounds) -> Result<(), String> {
    let range_and_step: Vec<&str> = expression.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let (start, mut end) = if matches!(low_and_high[0], "*" | "?") {
        (bounds.min, bounds.max)
    } else {
        let start = int_or_name(low_and_high[0], bounds.names)?;
        match low_and_high.len() {
            1 => (start, start),
            2 => (start, int_or_name(low_and_high[1], bounds.names)?),
            _ => return Err(format!("too many hyphens: {expression}")),
        }
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = parse_int(range_and_step[1])?;
            if low_and_high.len() == 1 {
                end = bounds.max;
            }
            step
        }
        _ => return Err(format!("too many slashes: {expression}")),
    };
    if start < bounds.min {
        return Err(format!("beginning of range ({start}) below minimum ({}): {expression}", bounds.min));
    }
    if end > bounds.max {
        return Err(format!("end of range ({end}) above maximum ({}): {expression}", bounds.max));
    }
    if start > end {
        return Err(format!("beginning of range ({start}) beyond end of range ({end}): {expression}"));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expression}"));
    }
    Ok(())
}

fn int_or_name(text: &str, names: &[&str]) -> Result<u64, String> {
    let lower = text.to_lowercase();
    match names.iter().position(|n| *n == lower) {
        // Month names count from 1, weekday names from 0.
        Some(i) => Ok(i as u64 + if names.len() == 12 { 1 } else { 0 }),
        None => parse_int(text),
    }
}

/// `mustParseInt`: Go's `strconv.Atoi`, then no negatives.
fn parse_int(text: &str) -> Result<u64, String> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("failed to parse int from {text}: strconv.Atoi: parsing {}: invalid syntax", quote(text)));
    }
    let number: i64 = text.parse().map_err(|_| {
        format!("failed to parse int from {text}: strconv.Atoi: parsing {}: value out of range", quote(text))
    })?;
    u64::try_from(number).map_err(|_| format!("negative number ({number}) not allowed: {text}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schedules_parse_as_robfig_cron_does() {
        for good in
            ["*/5 * * * *", "0 0 1 jan-dec MON-fri", "@hourly", "@every 1h30m", "TZ=UTC 0 * * * *", "5,10 1-3/2 ? * 0"]
        {
            assert_eq!(parse_standard(good), Ok(()), "{good}");
        }
        let cases = [
            ("* * *", "expected exactly 5 fields, found 3: [* * *]"),
            ("61 * * * *", "end of range (61) above maximum (59): 61"),
            ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
            ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
            ("x * * * *", "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax"),
            ("*/0 * * * *", "step of range should be a positive number: */0"),
            ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
            ("@fortnightly", "unrecognized descriptor: @fortnightly"),
            ("", "empty spec string"),
        ];
        for (spec, message) in cases {
            assert_eq!(parse_standard(spec), Err(message.to_string()), "{spec}");
        }
    }

    #[test]
    fn jobs_do_not_restart_always() {
        let job_object = json!({"metadata": {"uid": "u"}, "spec": {"parallelism": -1, "manualSelector": true,
            "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
                "containers": [{"name": "c", "image": "i", "imagePullPolicy": "Always"}]}}}});
        let lines: Vec<String> = job(&job_object, None).iter().map(|c| format!("{}: {}", c.field, c.body())).collect();
        assert_eq!(
            lines,
            [
                "spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
                "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"",
            ]
        );
    }
}
