//! Jobs and CronJobs (`pkg/apis/batch/validation`): counts, the selector and template, restart
//! policies (the Job-only rules are in `job`), and CronJob schedules parsed as robfig/cron's
//! `ParseStandard` does.

use serde_json::Value;

use super::meta::{label_selector, nonnegative, text};
use super::{FieldError, label_selector_value, pod, quote, string_map_value};
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
        causes.push(FieldError::invalid(&field, string_map_value(template_labels), detail));
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
                Some(actual) if actual != *value => {
                    Some(FieldError::invalid(&field, string_map_value(labels), &detail))
                }
                Some(_) => None,
            }
        })
        .collect();
    let expected_labels: serde_json::Map<String, Value> =
        expected.iter().map(|(k, v)| (k.to_string(), Value::from(*v))).collect();
    if let Ok(selector) = Selector::from_label_selector_object(&spec["selector"])
        && !selector.matches(&expected_labels)
    {
        let rendered = label_selector_value(&spec["selector"]);
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
        let rendered = label_selector_value(&spec["selector"]);
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
    if let Err(error) = crate::apimachinery::cron::parse_standard(schedule) {
        causes.push(FieldError::invalid("spec.schedule", quote(schedule), &error.to_string()));
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
