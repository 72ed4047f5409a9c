//! Side-by-side scenarios of the `job` controller: `job-ttl`, `job-completions`, `job-failures`, `job-suspend`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "job-ttl",
        summary: "two Jobs run to completion: the one with a TTL (an hour, then shortened to seconds) deleted \
                  when it ran out",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: job_ttl,
    },
    Scenario {
        name: "job-completions",
        summary: "a NonIndexed Job of 4 completions, 2 at a time, and an Indexed Job of 3, run to completion",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: job_completions,
    },
    Scenario {
        name: "job-failures",
        summary: "an Indexed Job whose index 1 fails twice (backoffLimitPerIndex 1), and a Job whose evicted pod a pod failure policy ignores",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: job_failures,
    },
    Scenario {
        name: "job-suspend",
        summary: "a running Job suspended (its pods deleted), then resumed to completion",
        nodes: 1,
        flags: &[],
        apiserver_flags: &[],
        compare_nodes: false,
        run: job_suspend,
    },
];

pub(super) const JOBS: &str = "/apis/batch/v1/namespaces/sbs/jobs";

/// A Job `name` whose pods would run `pi`; no job controller runs in this comparison.
/// A Job whose pods the simulated kubelets run to completion (or as `annotations` script).
pub(super) fn job(name: &str, spec: Value, annotations: Value) -> Value {
    let mut spec = spec;
    spec["template"] = json!({"metadata": {"annotations": annotations}, "spec": {"restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "true"]}]}});
    json!({"metadata": {"name": name}, "spec": spec})
}

/// Waits until Job `name` has condition `type_` True.
pub(super) fn job_condition(steps: &mut Steps, name: &str, type_: &str) -> Result<(), Error> {
    let path = format!("{JOBS}/{name}");
    steps.wait(&format!("Job {name} {type_}"), |s| {
        let job = s.get(&path)?.unwrap_or_default();
        Ok((condition(&job, type_) == Some("True")).then_some(()))
    })
}

/// Waits until the Events of Job `name` include one of each of `reasons`.
pub(super) fn job_events(steps: &mut Steps, name: &str, reasons: &[&str]) -> Result<(), Error> {
    let events = format!("/api/v1/namespaces/{NAMESPACE}/events");
    steps.wait(&format!("Events {reasons:?} of Job {name}"), |s| {
        let listed = s.list(&events)?;
        let of_job: Vec<&Value> = listed
            .iter()
            .filter(|e| e["involvedObject"]["kind"] == "Job" && e["involvedObject"]["name"] == name)
            .collect();
        Ok(reasons.iter().all(|r| of_job.iter().any(|e| e["reason"] == *r)).then_some(()))
    })
}

/// The TTL Job `expires` is created with: far longer than any run, so that it cannot run out
/// before the first checkpoint, however slow the machine.
pub(super) const TTL_UNREACHED: i64 = 3600;

/// How long `expires` has left once its TTL is shortened.
pub(super) const TTL_LEFT: i64 = 8;

pub(super) fn job_ttl(steps: &mut Steps) -> Result<(), Error> {
    // With the 8 s TTL set at creation, the first checkpoint raced the deletion: on a loaded
    // machine, waiting for both Jobs and settling (1.5 s of quiet, any change restarting it)
    // outlasted the TTL on one side and not on the other. The long TTL makes "complete, not yet
    // deleted" a state both binaries stay in; the TTL then shortened (both controllers watch Job
    // updates) still has the deletion come from the controller's timer, TTL_LEFT later.
    let expires = format!("{JOBS}/expires");
    steps.create(JOBS, job("expires", json!({"ttlSecondsAfterFinished": TTL_UNREACHED}), json!({})))?;
    steps.create(JOBS, job("kept", json!({}), json!({})))?;
    job_condition(steps, "expires", "Complete")?;
    job_condition(steps, "kept", "Complete")?;
    // The Completed Event is posted after the status write, asynchronously: waited for, so
    // that no settling window can close before it.
    job_events(steps, "expires", &["SuccessfulCreate", "Completed"])?;
    job_events(steps, "kept", &["SuccessfulCreate", "Completed"])?;
    steps.checkpoint("both complete, the TTL running")?;

    // The TTL runs from the Complete condition's transition (whole seconds, as both
    // controllers read it): the new one ends TTL_LEFT from now.
    let stored = steps
        .get(&expires)?
        .ok_or_else(|| Error::Scenario("Job expires is gone before its TTL was shortened".into()))?;
    let complete = stored["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == "Complete");
    let finished: jiff::Timestamp = complete
        .and_then(|c| c["lastTransitionTime"].as_str())
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| Error::Scenario(format!("Job expires has no Complete time: {stored}")))?;
    let ttl = jiff::Timestamp::now().duration_since(finished).as_secs().max(0) + TTL_LEFT;
    let expiry = finished + jiff::SignedDuration::from_secs(ttl);
    steps.patch(&expires, json!({"spec": {"ttlSecondsAfterFinished": ttl}}))?;
    steps.wait("Job expires deleted when its TTL ran out", |s| {
        let deleting = s.get(&expires)?.is_none_or(|j| !j["metadata"]["deletionTimestamp"].is_null());
        // Seen after the controller's own clock (the same machine's) passed the expiry; 1 s of
        // room for a clock adjustment.
        if deleting && jiff::Timestamp::now() + jiff::SignedDuration::from_secs(1) < expiry {
            return Err(Error::Scenario(format!("Job expires deleted before its TTL ran out at {expiry}")));
        }
        Ok(deleting.then_some(()))
    })?;
    steps.wait_gone(&expires)?;
    steps.checkpoint("the Job with a TTL deleted")
}

pub(super) fn job_completions(steps: &mut Steps) -> Result<(), Error> {
    steps.create(JOBS, job("pi", json!({"completions": 4, "parallelism": 2}), json!({})))?;
    let indexed = json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed"});
    steps.create(JOBS, job("sharded", indexed, json!({})))?;
    job_condition(steps, "pi", "Complete")?;
    job_condition(steps, "sharded", "Complete")?;
    steps.checkpoint("both complete")
}

/// Waits until Job `name` has `count` pods running.
pub(super) fn job_pods_running(steps: &mut Steps, name: &str, count: usize) -> Result<(), Error> {
    let path = format!("/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=batch.kubernetes.io/job-name={name}");
    steps.wait(&format!("{count} pods of Job {name} running"), |s| {
        let pods = s.list(&path)?;
        let running = pods.iter().filter(|p| p["status"]["phase"] == "Running").count();
        Ok((running == count).then_some(()))
    })
}

pub(super) fn job_failures(steps: &mut Steps) -> Result<(), Error> {
    let per_index = json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed", "backoffLimitPerIndex": 1});
    let index_1_fails = json!({"kcm-sandbox.dev/exit-codes-index-1": "1", "kcm-sandbox.dev/run-seconds": "1"});
    steps.create(JOBS, job("indexes", per_index, index_1_fails))?;
    let ignore_disruptions = json!({"backoffLimit": 0, "podFailurePolicy": {"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}});
    let evicted_once = json!({"kcm-sandbox.dev/exit-codes": "evicted,0", "kcm-sandbox.dev/run-seconds": "1"});
    steps.create(JOBS, job("evicted", ignore_disruptions, evicted_once))?;
    job_condition(steps, "evicted", "Complete")?;
    job_condition(steps, "indexes", "Failed")?;
    steps.checkpoint("index 1 failed twice, the evicted pod replaced")
}

pub(super) fn job_suspend(steps: &mut Steps) -> Result<(), Error> {
    let long = json!({"kcm-sandbox.dev/run-seconds": "4"});
    steps.create(JOBS, job("paused", json!({"completions": 2, "parallelism": 2}), long))?;
    job_pods_running(steps, "paused", 2)?;
    steps.patch(&format!("{JOBS}/paused"), json!({"spec": {"suspend": true}}))?;
    job_condition(steps, "paused", "Suspended")?;
    job_pods_running(steps, "paused", 0)?;
    steps.checkpoint("suspended: its pods deleted")?;
    steps.patch(&format!("{JOBS}/paused"), json!({"spec": {"suspend": false}}))?;
    job_condition(steps, "paused", "Complete")?;
    steps.checkpoint("resumed and complete")
}
