use super::schedule::{Missed, most_recent_schedule_time};
use super::*;
use serde_json::json;

fn at(s: &str) -> Timestamp {
    s.parse().expect("a timestamp")
}

fn cron_job(schedule: &str, extra_spec: serde_json::Value, status: serde_json::Value) -> CronJob {
    let mut spec = json!({"schedule": schedule, "concurrencyPolicy": "Allow", "jobTemplate": {
        "metadata": {"labels": {"app": "pi"}, "annotations": {"note": "kept"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "pi", "image": "perl"}]}}}}});
    for (key, value) in extra_spec.as_object().cloned().unwrap_or_default() {
        spec[key] = value;
    }
    serde_json::from_value(json!({
        "metadata": {"name": "pi", "namespace": "default", "uid": "cj-uid",
                     "creationTimestamp": "2026-11-26T10:00:30Z"},
        "spec": spec,
        "status": status,
    }))
    .expect("a CronJob")
}

fn job(name: &str, start: Option<&str>) -> Job {
    serde_json::from_value(json!({"metadata": {"name": name}, "status": {"startTime": start}})).expect("a Job")
}

#[test]
fn jobs_are_named_after_the_minute_and_carry_the_template() {
    let pi = cron_job("*/5 * * * *", json!({"timeZone": "Asia/Tokyo"}), json!({}));
    let scheduled = at("2026-11-26T10:05:00Z");
    let job = job_from_template(&pi, scheduled).expect("a Job");
    assert_eq!(job.metadata.name.as_deref(), Some("pi-29928125"));
    assert_eq!(29_928_125 * 60, scheduled.as_second());
    assert_eq!(job.metadata.labels.expect("labels")["app"], "pi");
    let annotations = job.metadata.annotations.expect("annotations");
    assert_eq!(annotations["note"], "kept");
    assert_eq!(annotations[SCHEDULED_TIMESTAMP_ANNOTATION], "2026-11-26T19:05:00+09:00");
    let owner = &job.metadata.owner_references.expect("an owner")[0];
    assert_eq!((owner.kind.as_str(), owner.api_version.as_str(), owner.name.as_str()), ("CronJob", "batch/v1", "pi"));
    assert_eq!((owner.uid.as_str(), owner.controller, owner.block_owner_deletion), ("cj-uid", Some(true), Some(true)));
    assert!(job.spec.expect("a spec").template.spec.is_some());

    // Without a zone the annotation is in UTC, whatever the schedule's zone.
    let utc = cron_job("*/5 * * * *", json!({}), json!({}));
    let annotations = job_from_template(&utc, scheduled).expect("a Job").metadata.annotations.expect("annotations");
    assert_eq!(annotations[SCHEDULED_TIMESTAMP_ANNOTATION], "2026-11-26T10:05:00Z");
}

#[test]
fn a_time_zone_becomes_a_prefix_unless_the_schedule_names_one() {
    assert_eq!(
        format_schedule(&cron_job("0 * * * *", json!({"timeZone": "Europe/Berlin"}), json!({})), None),
        "TZ=Europe/Berlin 0 * * * *"
    );
    assert_eq!(
        format_schedule(&cron_job("0 * * * *", json!({"timeZone": "Mars/Olympus"}), json!({})), None),
        "0 * * * *"
    );
    assert_eq!(
        format_schedule(&cron_job("TZ=UTC 0 * * * *", json!({"timeZone": "Europe/Berlin"}), json!({})), None),
        "TZ=UTC 0 * * * *"
    );
    assert_eq!(format_schedule(&cron_job("0 * * * *", json!({}), json!({})), None), "0 * * * *");
}

#[test]
fn the_most_recent_unmet_time_is_found() {
    let every_minute = cron_job("TZ=UTC * * * * *", json!({}), json!({}));
    let schedule = parsed(&every_minute);
    // Created at 10:00:30: nothing due before 10:01.
    let found = most_recent_schedule_time(&every_minute, at("2026-11-26T10:00:50Z"), &schedule, true);
    assert_eq!((found.most_recent, found.missed), (None, Missed::None));
    let found = most_recent_schedule_time(&every_minute, at("2026-11-26T10:01:00.5Z"), &schedule, true);
    assert_eq!((found.most_recent, found.missed), (Some(at("2026-11-26T10:01:00Z")), Missed::None));
    // Several missed: the latest of them.
    let found = most_recent_schedule_time(&every_minute, at("2026-11-26T10:05:10Z"), &schedule, true);
    assert_eq!((found.most_recent, found.missed), (Some(at("2026-11-26T10:05:00Z")), Missed::Few));
    // More than 100.
    let found = most_recent_schedule_time(&every_minute, at("2026-11-26T12:00:10Z"), &schedule, true);
    assert_eq!((found.most_recent, found.missed), (Some(at("2026-11-26T12:00:00Z")), Missed::Many));
    // From the last schedule time.
    let scheduled = cron_job("TZ=UTC * * * * *", json!({}), json!({"lastScheduleTime": "2026-11-26T12:00:00Z"}));
    let found = most_recent_schedule_time(&scheduled, at("2026-11-26T12:00:10Z"), &schedule, true);
    assert_eq!(found.most_recent, None);
    // A starting deadline moves the earliest time up (only when asked).
    let deadline = cron_job("TZ=UTC * * * * *", json!({"startingDeadlineSeconds": 200}), json!({}));
    let found = most_recent_schedule_time(&deadline, at("2026-11-26T12:00:10Z"), &schedule, true);
    assert_eq!((found.earliest, found.missed), (at("2026-11-26T11:56:50Z"), Missed::Few));
    let found = most_recent_schedule_time(&deadline, at("2026-11-26T12:00:10Z"), &schedule, false);
    assert_eq!(found.missed, Missed::Many);
}

#[test]
fn a_schedule_that_names_no_time_is_an_error() {
    let never = cron_job("TZ=UTC 59 23 31 2 *", json!({}), json!({}));
    let found = most_recent_schedule_time(&never, at("2026-11-26T12:00:10Z"), &parsed(&never), true);
    assert_eq!(
        found.error.map(|e| e.to_string()).as_deref(),
        Some("time difference between two schedules is less than 1 second")
    );
    assert_eq!(next_schedule_time_duration(&never, at("2026-11-26T12:00:10Z"), &parsed(&never)), Duration::ZERO);
}

#[test]
fn requeues_come_100ms_after_the_next_time() {
    let every_minute = cron_job("TZ=UTC * * * * *", json!({}), json!({"lastScheduleTime": "2026-11-26T12:00:00Z"}));
    let schedule = parsed(&every_minute);
    let delay = next_schedule_time_duration(&every_minute, at("2026-11-26T12:00:10Z"), &schedule);
    assert_eq!(delay, Duration::from_millis(50_100));
    // Missed ones: counted from the most recent of them.
    let delay = next_schedule_time_duration(&every_minute, at("2026-11-26T12:03:10Z"), &schedule);
    assert_eq!(delay, Duration::from_millis(50_100));
    let hourly = cron_job("TZ=UTC @hourly", json!({}), json!({}));
    let delay = next_schedule_time_duration(&hourly, at("2026-11-26T10:30:00Z"), &parsed(&hourly));
    assert_eq!(delay, Duration::from_millis(30 * 60_000 + 100));
}

#[test]
fn finished_jobs_are_removed_oldest_first_unstarted_last() {
    let mut jobs = [
        job("c", Some("2026-11-26T10:02:00Z")),
        job("unstarted", None),
        job("b", Some("2026-11-26T10:01:00Z")),
        job("a", Some("2026-11-26T10:02:00Z")),
    ];
    jobs.sort_by(by_start_time);
    let names: Vec<&str> = jobs.iter().map(|j| name_of(&j.metadata)).collect();
    assert_eq!(names, ["b", "a", "c", "unstarted"]);
}

#[test]
fn the_active_list_is_kept_by_uid() {
    let mut pi = cron_job(
        "* * * * *",
        json!({}),
        json!({"active": [{"kind": "Job", "name": "pi-1", "namespace": "default", "uid": "u1"},
                          {"kind": "Job", "name": "pi-2", "namespace": "default", "uid": "u2"}]}),
    );
    assert!(in_active_list(&pi, "u1") && !in_active_list(&pi, "u3"));
    delete_from_active_list(&mut pi, "u1");
    assert_eq!(active(&pi).len(), 1);
    delete_from_active_list(&mut pi, "u2");
    assert!(pi.status.expect("a status").active.is_none(), "an empty list is left out, as Go's omitempty");
}
