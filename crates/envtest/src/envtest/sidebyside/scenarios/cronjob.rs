//! Side-by-side scenario of the `cronjob` controller: `cronjob`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "cronjob",
    summary: "two CronJobs every minute, Forbid and Replace, their Jobs left running: two ticks",
    nodes: 1,
    // No job controller: the Jobs stay active.
    flags: &["--controllers=-job-controller"],
    apiserver_flags: &[],
    compare_nodes: false,
    run: cron_jobs,
}];

pub(super) const CRON_JOBS: &str = "/apis/batch/v1/namespaces/sbs/cronjobs";

/// A CronJob `name` every minute with `policy`; its Jobs would run `pi`.
pub(super) fn cron_job(name: &str, policy: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"schedule": "* * * * *", "concurrencyPolicy": policy,
        "jobTemplate": {"metadata": {"labels": {"app": name}},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "pi", "image": "perl:5.34"}]}}}}}})
}

/// The names of CronJob `name`'s active Jobs.
pub(super) fn active_jobs(steps: &Steps, name: &str) -> Result<Vec<String>, Error> {
    let cron_job = steps.get(&format!("{CRON_JOBS}/{name}"))?.unwrap_or_default();
    let active = cron_job["status"]["active"].as_array().cloned().unwrap_or_default();
    Ok(active.iter().filter_map(|r| r["name"].as_str().map(str::to_string)).collect())
}

pub(super) fn cron_jobs(steps: &mut Steps) -> Result<(), Error> {
    steps.create(CRON_JOBS, cron_job("forbid", "Forbid"))?;
    steps.create(CRON_JOBS, cron_job("replace", "Replace"))?;
    let first = steps.wait("the first tick: a Job each", |s| {
        let (forbid, replace) = (active_jobs(s, "forbid")?, active_jobs(s, "replace")?);
        Ok((forbid.len() == 1 && replace.len() == 1).then(|| replace[0].clone()))
    })?;
    steps.checkpoint("first tick")?;
    let events = format!("/api/v1/namespaces/{NAMESPACE}/events");
    steps.wait("the second tick: Forbid skips, Replace replaces", |s| {
        let replaced = active_jobs(s, "replace")?.first().is_some_and(|name| *name != first);
        let skipped = s.list(&events)?.iter().any(|e| e["reason"] == "JobAlreadyActive");
        Ok((replaced && skipped).then_some(()))
    })?;
    steps.checkpoint("second tick")
}
