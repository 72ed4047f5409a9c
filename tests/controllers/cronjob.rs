//! The cronjob-controller on both backends. Waiting for real minute boundaries would be slow, so
//! the tests move a CronJob's `status.lastScheduleTime` back through the status subresource: the
//! schedule then has missed start times and the controller runs the most recent one at once.
//! No job controller runs: Jobs stay active until the test finishes them through `jobs/status`
//! (`SuccessCriteriaMet` then `Complete`, `FailureTarget` then `Failed`, as the real server
//! requires), and no garbage collector: deleted Jobs' pods are nobody's concern here.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kcm::app::controllers::named;
use kcm::client::{Api, Patch, PostParams};
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, eventually, from};

const ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

fn cron_job(name: &str, spec: Value) -> CronJob {
    let mut object = json!({"metadata": {"name": name}, "spec": {
        "schedule": "* * * * *",
        "jobTemplate": {"metadata": {"labels": {"app": name}, "annotations": {"team": "batch"}},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "pi", "image": "perl:5.34"}]}}}}}});
    for (key, value) in spec.as_object().cloned().unwrap_or_default() {
        object["spec"][key] = value;
    }
    from(object)
}

/// Starts the controller early in a minute: the steps then finish before the next real tick,
/// which would otherwise add its own Job to what is checked.
fn start(backend: Backend) -> Cluster {
    let cluster = harness::with(&[named("cronjob-controller")]).on(backend).without_nodes().start();
    let second = Timestamp::now().as_second().rem_euclid(60);
    if second >= 40 {
        std::thread::sleep(std::time::Duration::from_secs((61 - second) as u64));
    }
    cluster
}

/// A whole minute `minutes` before now, in the API's format.
fn minutes_ago(minutes: i64) -> String {
    let now = Timestamp::now().as_second();
    let at = Timestamp::from_second(now - now.rem_euclid(60) - minutes * 60).expect("a time");
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Writes `status` (merged) through the status subresource.
fn patch_status(cron_jobs: &Api<CronJob>, name: &str, status: Value) {
    cron_jobs.patch_status(name, &Patch::Merge(json!({"status": status})), &PostParams::default()).expect("status");
}

/// The Jobs the CronJob `name` controls.
fn jobs_of(jobs: &Api<Job>, owner: &CronJob) -> Vec<Job> {
    let list = jobs.list(&Default::default()).expect("jobs").items;
    list.into_iter()
        .filter(|j| j.metadata.owner_references.iter().flatten().any(|r| Some(&r.uid) == owner.metadata.uid.as_ref()))
        .collect()
}

fn active_names(cron_jobs: &Api<CronJob>, name: &str) -> Vec<String> {
    let cron_job = cron_jobs.get(name).expect("the CronJob");
    let active = cron_job.status.and_then(|s| s.active).unwrap_or_default();
    active.into_iter().filter_map(|r| r.name).collect()
}

/// A Job controlled by `owner`, as if the controller had created it.
fn owned_job(jobs: &Api<Job>, owner: &CronJob, name: &str) -> Job {
    let owner_ref = json!({"apiVersion": "batch/v1", "kind": "CronJob", "name": owner.metadata.name,
        "uid": owner.metadata.uid, "controller": true, "blockOwnerDeletion": true});
    let job: Job = from(json!({"metadata": {"name": name, "ownerReferences": [owner_ref]}, "spec": {
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "pi", "image": "perl:5.34"}]}}}}));
    jobs.create(&job, &PostParams::default()).expect("job created")
}

/// Writes a finished status as the job controller does; `started` seconds ago.
fn finish(jobs: &Api<Job>, name: &str, succeeded: bool, started: i64) {
    let now = Timestamp::now();
    let start = (now - SignedDuration::from_secs(started)).strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let now = now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let condition =
        |kind: &str| json!({"type": kind, "status": "True", "lastTransitionTime": now, "lastProbeTime": now});
    let status = if succeeded {
        json!({"startTime": start, "completionTime": now, "succeeded": 1,
            "conditions": [condition("SuccessCriteriaMet"), condition("Complete")]})
    } else {
        json!({"startTime": start, "failed": 1, "conditions": [condition("FailureTarget"), condition("Failed")]})
    };
    let mut job = jobs.get(name).expect("the job");
    job.status = Some(from(status));
    jobs.replace_status(name, &job, &PostParams::default()).expect("status written");
}

fn reference(job: &Job) -> Value {
    json!({"kind": "Job", "apiVersion": "batch/v1", "namespace": "default",
        "name": job.metadata.name, "uid": job.metadata.uid})
}

on_both_backends!(a_missed_schedule_creates_its_job);
fn a_missed_schedule_creates_its_job(backend: Backend) {
    let cluster = start(backend);
    let (cron_jobs, jobs) = (cluster.api::<CronJob>(), cluster.api::<Job>());
    let pi = cron_jobs.create(&cron_job("pi", json!({})), &PostParams::default()).expect("created");
    let paused = cron_jobs.create(&cron_job("paused", json!({"suspend": true})), &PostParams::default()).expect("ok");
    let late = cron_jobs.create(&cron_job("late", json!({})), &PostParams::default()).expect("created");
    let tokyo =
        cron_jobs.create(&cron_job("tokyo", json!({"timeZone": "Asia/Tokyo"})), &PostParams::default()).expect("ok");
    patch_status(&cron_jobs, "tokyo", json!({"lastScheduleTime": minutes_ago(3)}));
    patch_status(&cron_jobs, "paused", json!({"lastScheduleTime": minutes_ago(3)}));
    patch_status(&cron_jobs, "pi", json!({"lastScheduleTime": minutes_ago(3)}));
    // More than 100 missed: a warning, and the most recent one runs all the same.
    patch_status(&cron_jobs, "late", json!({"lastScheduleTime": minutes_ago(200)}));

    let job = eventually("the missed run's Job", || jobs_of(&jobs, &pi).into_iter().next());
    let name = job.metadata.name.clone().expect("a name");
    let annotations = job.metadata.annotations.clone().unwrap_or_default();
    let scheduled: Timestamp = annotations[ANNOTATION].parse().expect("an RFC 3339 time");
    assert!(annotations[ANNOTATION].ends_with('Z'), "no timeZone: UTC");
    assert_eq!(scheduled.as_second() % 60, 0, "a whole minute");
    assert_eq!(name, format!("pi-{}", scheduled.as_second() / 60));
    assert_eq!(annotations["team"], "batch");
    assert_eq!(job.metadata.labels.clone().unwrap_or_default()["app"], "pi");
    let owner = &job.metadata.owner_references.clone().unwrap_or_default()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("CronJob", "pi", pi.metadata.uid.as_deref().unwrap())
    );
    assert_eq!((owner.controller, owner.block_owner_deletion), (Some(true), Some(true)));
    assert_eq!(
        job.spec.as_ref().and_then(|s| s.template.spec.as_ref()).map(|s| s.containers[0].image.clone()),
        Some(Some("perl:5.34".into()))
    );

    // (A minute boundary may pass meanwhile: the next run's Job joins the list.)
    let first = eventually("status.active and lastScheduleTime", || {
        let status = cron_jobs.get("pi").ok()?.status?;
        let active = status.active.unwrap_or_default();
        let first = active.into_iter().find(|r| r.name.as_deref() == Some(&name))?;
        (status.last_schedule_time?.0 >= scheduled).then_some(first)
    });
    assert_eq!((first.kind.as_deref(), first.api_version.as_deref()), (Some("Job"), Some("batch/v1")));
    assert_eq!((first.name.as_deref(), first.uid.as_ref()), (Some(name.as_str()), job.metadata.uid.as_ref()));
    eventually("SuccessfulCreate", || {
        cluster
            .event_messages("default", "pi", "SuccessfulCreate")
            .contains(&format!("Created job {name}"))
            .then_some(())
    });

    eventually("TooManyMissedTimes and the most recent run", || {
        let warned = !cluster.event_messages("default", "late", "TooManyMissedTimes").is_empty();
        (warned && !jobs_of(&jobs, &late).is_empty()).then_some(())
    });
    let messages = cluster.event_messages("default", "late", "TooManyMissedTimes");
    assert_eq!(
        messages[0],
        "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew"
    );

    // In a zone: the same minute, the annotation in the zone's time.
    let in_tokyo = eventually("the Job in Tokyo", || jobs_of(&jobs, &tokyo).into_iter().next());
    let annotation = in_tokyo.metadata.annotations.unwrap_or_default()[ANNOTATION].clone();
    assert!(annotation.ends_with("+09:00"), "{annotation}");
    let scheduled: Timestamp = annotation.parse().expect("an RFC 3339 time");
    assert_eq!(in_tokyo.metadata.name, Some(format!("tokyo-{}", scheduled.as_second() / 60)));

    // The suspended one was synced beside the others and created nothing; resumed, it runs.
    assert!(jobs_of(&jobs, &paused).is_empty(), "a suspended CronJob creates no Job");
    let resume = Patch::Merge(json!({"spec": {"suspend": false}}));
    cron_jobs.patch("paused", &resume, &PostParams::default()).expect("resumed");
    eventually("the resumed CronJob's Job", || (!jobs_of(&jobs, &paused).is_empty()).then_some(()));

    // A finished Job leaves the active list and sets lastSuccessfulTime.
    finish(&jobs, &name, true, 5);
    eventually("SawCompletedJob", || {
        let seen = cluster.event_messages("default", "pi", "SawCompletedJob");
        seen.contains(&format!("Saw completed job: {name}, condition: Complete")).then_some(())
    });
    eventually("lastSuccessfulTime set, the Job no longer active", || {
        let status = cron_jobs.get("pi").ok()?.status?;
        let active = status.active.unwrap_or_default();
        (status.last_successful_time.is_some() && !active.iter().any(|r| r.name.as_deref() == Some(&name)))
            .then_some(())
    });
}

on_both_backends!(concurrency_policies_forbid_and_replace);
fn concurrency_policies_forbid_and_replace(backend: Backend) {
    let cluster = start(backend);
    let (cron_jobs, jobs) = (cluster.api::<CronJob>(), cluster.api::<Job>());
    // Suspended while their status is written: a tick before it would start a Job of its own.
    let forbid = cron_jobs
        .create(&cron_job("forbid", json!({"concurrencyPolicy": "Forbid", "suspend": true})), &PostParams::default())
        .expect("ok");
    let replace = cron_jobs
        .create(&cron_job("replace", json!({"concurrencyPolicy": "Replace", "suspend": true})), &PostParams::default())
        .expect("ok");
    // Each has a running Job in its active list, and a missed start time.
    let running_forbid = owned_job(&jobs, &forbid, "forbid-running");
    let running_replace = owned_job(&jobs, &replace, "replace-running");
    patch_status(
        &cron_jobs,
        "forbid",
        json!({"active": [reference(&running_forbid)], "lastScheduleTime": minutes_ago(3)}),
    );
    patch_status(
        &cron_jobs,
        "replace",
        json!({"active": [reference(&running_replace)], "lastScheduleTime": minutes_ago(3)}),
    );
    for name in ["forbid", "replace"] {
        let resume = Patch::Merge(json!({"spec": {"suspend": false}}));
        cron_jobs.patch(name, &resume, &PostParams::default()).expect("resumed");
    }

    eventually("JobAlreadyActive", || {
        let messages = cluster.event_messages("default", "forbid", "JobAlreadyActive");
        messages
            .contains(
                &"Not starting job because prior execution is running and concurrency policy is Forbid".to_string(),
            )
            .then_some(())
    });
    let forbid_jobs: Vec<String> = jobs_of(&jobs, &forbid).into_iter().filter_map(|j| j.metadata.name).collect();
    assert_eq!(forbid_jobs, ["forbid-running"], "Forbid starts nothing while a Job runs");
    assert_eq!(active_names(&cron_jobs, "forbid"), ["forbid-running"]);

    let new_name = eventually("the replacing Job", || {
        let names: Vec<String> = jobs_of(&jobs, &replace).into_iter().filter_map(|j| j.metadata.name).collect();
        let fresh = names.iter().find(|n| n.as_str() != "replace-running")?.clone();
        (!names.contains(&"replace-running".to_string())).then_some(fresh)
    });
    assert!(new_name.starts_with("replace-2"), "{new_name}");
    eventually("the active list replaced", || {
        (active_names(&cron_jobs, "replace") == [new_name.clone()]).then_some(())
    });
    let deleted = eventually("the SuccessfulDelete event", || {
        let deleted = cluster.event_messages("default", "replace", "SuccessfulDelete");
        (!deleted.is_empty()).then_some(deleted)
    });
    assert_eq!(deleted, ["Deleted job replace-running"]);
}

on_both_backends!(finished_jobs_beyond_the_history_limits_are_deleted);
fn finished_jobs_beyond_the_history_limits_are_deleted(backend: Backend) {
    let cluster = start(backend);
    let (cron_jobs, jobs) = (cluster.api::<CronJob>(), cluster.api::<Job>());
    let spec = json!({"suspend": true, "successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 1});
    let owner = cron_jobs.create(&cron_job("limited", spec), &PostParams::default()).expect("created");
    for (name, succeeded, started) in [
        ("ok-old", true, 300),
        ("ok-mid", true, 200),
        ("ok-new", true, 100),
        ("bad-old", false, 300),
        ("bad-new", false, 100),
    ] {
        owned_job(&jobs, &owner, name);
        finish(&jobs, name, succeeded, started);
    }
    eventually("the oldest finished Jobs deleted", || {
        let mut names: Vec<String> = jobs_of(&jobs, &owner).into_iter().filter_map(|j| j.metadata.name).collect();
        names.sort();
        (names == ["bad-new", "ok-new"]).then_some(())
    });
    // Events are written in the background: wait for the three.
    let deleted = eventually("three SuccessfulDelete events", || {
        let mut deleted = cluster.event_messages("default", "limited", "SuccessfulDelete");
        deleted.sort();
        (deleted.len() >= 3).then_some(deleted)
    });
    assert_eq!(deleted, ["Deleted job bad-old", "Deleted job ok-mid", "Deleted job ok-old"]);
    eventually("lastSuccessfulTime", || cron_jobs.get("limited").ok()?.status?.last_successful_time.map(drop));

    // An active Job that does not exist leaves the list.
    let ghost = json!({"kind": "Job", "apiVersion": "batch/v1", "namespace": "default", "name": "ghost",
        "uid": "00000000-0000-0000-0000-000000000001"});
    patch_status(&cron_jobs, "limited", json!({"active": [ghost]}));
    eventually("MissingJob", || {
        let missing = cluster.event_messages("default", "limited", "MissingJob");
        (missing == ["Active job went missing: ghost"] && active_names(&cron_jobs, "limited").is_empty()).then_some(())
    });
}

/// Sandbox only: both servers refuse a `timeZone` their database lacks, so the CronJob gets its
/// unknown zone by a write to the sandbox's store (as an object stored by a server with another
/// database would have it), then a missed start time by a second write.
#[test]
fn an_unknown_time_zone_creates_nothing() {
    harness::run_on(Backend::Sandbox, |backend| {
        let cluster = start(backend);
        let (cron_jobs, jobs) = (cluster.api::<CronJob>(), cluster.api::<Job>());
        let mars = cron_jobs.create(&cron_job("mars", json!({"timeZone": "UTC"})), &PostParams::default()).expect("ok");
        let store = cluster.sandbox().store();
        let rewrite = |change: &dyn Fn(&mut Value)| {
            let mut stored = (*store.get("cronjobs", "default", "mars").expect("stored")).clone();
            change(&mut stored);
            store.write(|txn| {
                txn.put("cronjobs", stored);
                Ok::<(), ()>(())
            })
        };
        rewrite(&|o| o["spec"]["timeZone"] = json!("Mars/Olympus")).expect("written");
        rewrite(&|o| o["status"] = json!({"lastScheduleTime": minutes_ago(3)})).expect("written");
        let messages = eventually("UnknownTimeZone", || {
            let messages = cluster.event_messages("default", "mars", "UnknownTimeZone");
            (!messages.is_empty()).then_some(messages)
        });
        assert_eq!(messages[0], "invalid timeZone: \"Mars/Olympus\": unknown time zone Mars/Olympus");
        assert!(jobs_of(&jobs, &mars).is_empty());
    });
}
