//! The ttl-after-finished-controller on both backends: a finished Job with
//! `ttlSecondsAfterFinished` is deleted with foreground propagation once the TTL has run from its
//! `Complete` condition; a finished Job without a TTL and an unfinished one with a TTL are kept.
//! No job controller runs: the test finishes the Jobs through `jobs/status` itself (and no
//! garbage collector: a foreground delete leaves the Job with its deletionTimestamp and the
//! `foregroundDeletion` finalizer, which is what is checked).

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kcm::app::controllers::named;
use kcm::client::{Api, PostParams};
use serde_json::json;

use crate::harness;

use harness::{Backend, eventually, from};

fn job(name: &str, ttl: Option<i32>) -> Job {
    from(json!({"metadata": {"name": name}, "spec": {
        "ttlSecondsAfterFinished": ttl,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "pi", "image": "perl:5.34"}]}}}}))
}

/// Marks `name` succeeded as the job controller does: `SuccessCriteriaMet`, then `Complete`.
fn finish(jobs: &Api<Job>, name: &str) {
    let now = Timestamp::now().to_string();
    let mut job = jobs.get(name).expect("the job");
    let condition =
        |kind: &str| json!({"type": kind, "status": "True", "lastTransitionTime": now, "lastProbeTime": now});
    job.status = Some(from(json!({"startTime": now, "completionTime": now, "succeeded": 1,
        "conditions": [condition("SuccessCriteriaMet"), condition("Complete")]})));
    jobs.replace_status(name, &job, &PostParams::default()).expect("status written");
}

on_both_backends!(a_finished_job_is_deleted_after_its_ttl);
fn a_finished_job_is_deleted_after_its_ttl(backend: Backend) {
    let cluster = harness::with(&[named("ttl-after-finished-controller")]).on(backend).without_nodes().start();
    let jobs = cluster.api::<Job>();
    for (name, ttl) in [("expires", Some(2)), ("kept", None), ("running", Some(0))] {
        jobs.create(&job(name, ttl), &PostParams::default()).expect("job created");
    }
    let started = std::time::Instant::now();
    finish(&jobs, "expires");
    finish(&jobs, "kept");

    let deleted = eventually("the expired job deleted", || {
        let job = jobs.get("expires").ok()?;
        job.metadata.deletion_timestamp.is_some().then_some(job)
    });
    // The server keeps whole seconds of lastTransitionTime: the TTL ran for at least 1 s of the 2.
    assert!(started.elapsed().as_secs_f64() >= 0.95, "deleted only once its TTL had run");
    let finalizers = deleted.metadata.finalizers.unwrap_or_default();
    assert!(finalizers.contains(&"foregroundDeletion".to_string()), "foreground propagation: {finalizers:?}");
    for name in ["kept", "running"] {
        let job = jobs.get(name).expect("still there");
        assert!(job.metadata.deletion_timestamp.is_none(), "{name} is not deleted");
    }

    // The unfinished one goes as soon as it finishes (TTL 0).
    finish(&jobs, "running");
    eventually("the job with TTL 0 deleted once finished", || {
        jobs.get("running").ok()?.metadata.deletion_timestamp.map(|_| ())
    });
    assert!(jobs.get("kept").expect("kept").metadata.deletion_timestamp.is_none());
}
