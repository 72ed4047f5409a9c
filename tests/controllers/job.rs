//! The job-controller on both backends, with the simulated kubelets running Job pods as their
//! `kcm-sandbox.dev/*` annotations script: NonIndexed and Indexed Jobs complete with upstream's
//! status, conditions, labels and Events; a suspended Job starts nothing until resumed; a Job past
//! its deadline fails with its pods killed; the pods of a deleted Job lose their tracking
//! finalizer; failures are retried after the backoff, or handled by pod failure policies,
//! per-index limits and success policies; elastic Indexed Jobs and adoption.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kcm::app::controllers::named;
use kcm::client::{Api, DeleteParams, ListParams, Patch, PostParams};
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, eventually, from};

const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";

fn job(name: &str, spec: Value) -> Job {
    let mut spec = spec;
    spec["template"] = json!({"spec": {"restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox", "command": ["true"]}]}});
    from(json!({"metadata": {"name": name}, "spec": spec}))
}

fn start(backend: Backend) -> Cluster {
    harness::with(&[named("job-controller")]).on(backend).start()
}

/// The Job once `type_` is True.
fn wait_condition(jobs: &Api<Job>, name: &str, type_: &str) -> Job {
    eventually(&format!("job {name} {type_}"), || {
        let job = jobs.get(name).ok()?;
        let conditions = job.status.as_ref()?.conditions.as_ref()?;
        conditions.iter().any(|c| c.type_ == type_ && c.status == "True").then_some(job)
    })
}

fn pods_of(cluster: &Cluster, name: &str) -> Vec<Pod> {
    let params =
        ListParams { label_selector: Some(format!("batch.kubernetes.io/job-name={name}")), ..Default::default() };
    cluster.api::<Pod>().list(&params).expect("pods").items
}

fn condition_types(job: &Job) -> Vec<(String, String, Option<String>)> {
    let conditions = job.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    conditions.into_iter().map(|c| (c.type_, c.status, c.reason)).collect()
}

fn owned(reason: &str) -> (String, String, Option<String>) {
    let (kind, reason) = reason.split_once(':').expect("type:reason");
    (kind.to_string(), "True".to_string(), Some(reason.to_string()))
}

on_both_backends!(a_job_runs_its_pods_to_completion);
fn a_job_runs_its_pods_to_completion(backend: Backend) {
    let cluster = start(backend);
    let jobs = cluster.api::<Job>();
    jobs.create(&job("pi", json!({"completions": 4, "parallelism": 2})), &PostParams::default()).expect("created");
    let done = wait_condition(&jobs, "pi", "Complete");
    let status = done.status.clone().expect("a status");
    assert_eq!(status.succeeded, Some(4));
    assert_eq!(status.failed.unwrap_or(0), 0);
    assert_eq!(status.active.unwrap_or(0), 0);
    assert_eq!((status.ready, status.terminating), (Some(0), Some(0)));
    assert!(status.start_time.is_some() && status.completion_time.is_some());
    let uncounted = status.uncounted_terminated_pods.unwrap_or_default();
    assert!(uncounted.succeeded.unwrap_or_default().is_empty() && uncounted.failed.unwrap_or_default().is_empty());
    assert_eq!(
        condition_types(&done),
        [owned("SuccessCriteriaMet:CompletionsReached"), owned("Complete:CompletionsReached")]
    );
    let complete = done.status.as_ref().and_then(|s| s.conditions.as_ref()).and_then(|c| c.last().cloned());
    assert_eq!(complete.and_then(|c| c.message).as_deref(), Some("Reached expected number of succeeded pods"));

    let pods = pods_of(&cluster, "pi");
    assert_eq!(pods.len(), 4, "one pod per completion, none retried");
    let uid = done.metadata.uid.clone().expect("a uid");
    for pod in &pods {
        assert_eq!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded"));
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("batch.kubernetes.io/controller-uid"), Some(&uid));
        assert_eq!(labels.get("job-name").map(String::as_str), Some("pi"));
        assert!(pod.metadata.generate_name.as_deref() == Some("pi-"));
        assert!(!pod.metadata.finalizers.clone().unwrap_or_default().contains(&TRACKING_FINALIZER.to_string()));
        let owner = pod.metadata.owner_references.clone().unwrap_or_default();
        assert_eq!(owner.len(), 1);
        assert_eq!(
            (owner[0].kind.as_str(), owner[0].controller, owner[0].block_owner_deletion),
            ("Job", Some(true), Some(true))
        );
    }
    eventually("the Completed and SuccessfulCreate events", || {
        let created = cluster.event_messages("default", "pi", "SuccessfulCreate");
        let completed = cluster.event_messages("default", "pi", "Completed");
        (created.len() == 4 && completed == ["Job completed"]).then_some(())
    });
}

on_both_backends!(an_indexed_job_completes_every_index);
fn an_indexed_job_completes_every_index(backend: Backend) {
    let cluster = start(backend);
    let jobs = cluster.api::<Job>();
    let spec = json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed"});
    jobs.create(&job("sharded", spec), &PostParams::default()).expect("created");
    let done = wait_condition(&jobs, "sharded", "Complete");
    let status = done.status.clone().expect("a status");
    assert_eq!(status.completed_indexes.as_deref(), Some("0-2"));
    assert_eq!(status.succeeded, Some(3));
    let mut indexes: Vec<String> = Vec::new();
    for pod in pods_of(&cluster, "sharded") {
        let index =
            pod.metadata.annotations.clone().unwrap_or_default()["batch.kubernetes.io/job-completion-index"].clone();
        assert_eq!(pod.metadata.labels.clone().unwrap_or_default()["batch.kubernetes.io/job-completion-index"], index);
        assert_eq!(pod.metadata.generate_name.as_deref(), Some(format!("sharded-{index}-").as_str()));
        let spec = pod.spec.clone().expect("a spec");
        assert_eq!(spec.hostname.as_deref(), Some(format!("sharded-{index}").as_str()));
        assert_eq!(spec.subdomain, None);
        let env = spec.containers[0].env.clone().unwrap_or_default();
        let variable = env.iter().find(|v| v.name == "JOB_COMPLETION_INDEX").expect("the index variable");
        let field = variable.value_from.as_ref().and_then(|v| v.field_ref.as_ref()).map(|f| f.field_path.clone());
        assert_eq!(field.as_deref(), Some("metadata.labels['batch.kubernetes.io/job-completion-index']"));
        indexes.push(index);
    }
    indexes.sort();
    assert_eq!(indexes, ["0", "1", "2"]);
}

on_both_backends!(a_suspended_job_starts_nothing_until_resumed);
fn a_suspended_job_starts_nothing_until_resumed(backend: Backend) {
    let cluster = start(backend);
    let jobs = cluster.api::<Job>();
    jobs.create(&job("later", json!({"suspend": true, "completions": 1})), &PostParams::default()).expect("created");
    let suspended = wait_condition(&jobs, "later", "Suspended");
    assert_eq!(condition_types(&suspended), [owned("Suspended:JobSuspended")]);
    assert!(suspended.status.as_ref().and_then(|s| s.start_time.as_ref()).is_none(), "no start time while suspended");
    assert!(pods_of(&cluster, "later").is_empty());
    eventually("the Suspended event", || {
        (cluster.event_messages("default", "later", "Suspended") == ["Job suspended"]).then_some(())
    });

    jobs.patch("later", &Patch::Merge(json!({"spec": {"suspend": false}})), &PostParams::default()).expect("resumed");
    let done = wait_condition(&jobs, "later", "Complete");
    let conditions = condition_types(&done);
    assert_eq!(conditions[0], ("Suspended".to_string(), "False".to_string(), Some("JobResumed".to_string())));
    assert!(done.status.as_ref().and_then(|s| s.start_time.as_ref()).is_some());
    eventually("the Resumed event", || {
        (cluster.event_messages("default", "later", "Resumed") == ["Job resumed"]).then_some(())
    });
}

on_both_backends!(suspending_a_started_job_clears_its_start_time);
/// MutableSchedulingDirectivesForSuspendedJobs (beta, on in v1.36): when a running Job is
/// suspended, its active pods go and `status.startTime` is cleared with the Suspended condition;
/// resumed, it starts its clock again.
fn suspending_a_started_job_clears_its_start_time(backend: Backend) {
    let cluster = start(backend);
    let jobs = cluster.api::<Job>();
    let long = json!({"kcm-sandbox.dev/run-seconds": "600"});
    jobs.create(&scripted_job("pausable", json!({"completions": 1}), long), &PostParams::default()).expect("created");
    let started = eventually("the job started", || {
        let job = jobs.get("pausable").ok()?;
        let status = job.status.clone()?;
        (status.active == Some(1)).then_some(status.start_time?)
    });

    jobs.patch("pausable", &Patch::Merge(json!({"spec": {"suspend": true}})), &PostParams::default())
        .expect("suspended");
    let suspended = wait_condition(&jobs, "pausable", "Suspended");
    let status = suspended.status.clone().expect("a status");
    assert_eq!(status.start_time, None, "cleared with the Suspended condition");
    assert_eq!(condition_types(&suspended), [owned("Suspended:JobSuspended")]);
    eventually("the active pod gone", || {
        let job = jobs.get("pausable").ok()?;
        (job.status?.active.unwrap_or(0) == 0).then_some(())
    });

    jobs.patch("pausable", &Patch::Merge(json!({"spec": {"suspend": false}})), &PostParams::default())
        .expect("resumed");
    let resumed = eventually("the job resumed with a new start time", || {
        let job = jobs.get("pausable").ok()?;
        let resumed = condition_types(&job).first().is_some_and(|c| c.0 == "Suspended" && c.1 == "False");
        resumed.then_some(job.status?.start_time?)
    });
    assert!(resumed.0 >= started.0, "the clock starts again: {resumed:?} after {started:?}");
}

on_both_backends!(a_job_past_its_deadline_fails);
fn a_job_past_its_deadline_fails(backend: Backend) {
    let cluster = start(backend);
    let jobs = cluster.api::<Job>();
    // The pods run 3 s (the simulated kubelets' default); the deadline is 1 s.
    let spec = json!({"completions": 2, "parallelism": 2, "activeDeadlineSeconds": 1});
    jobs.create(&job("slow", spec), &PostParams::default()).expect("created");
    let failed = wait_condition(&jobs, "slow", "Failed");
    assert_eq!(condition_types(&failed), [owned("FailureTarget:DeadlineExceeded"), owned("Failed:DeadlineExceeded")]);
    let status = failed.status.clone().expect("a status");
    assert_eq!((status.active.unwrap_or(0), status.terminating), (0, Some(0)));
    assert_eq!(status.failed, Some(2), "the killed pods count as failed");
    assert!(status.completion_time.is_none());
    eventually("the DeadlineExceeded event", || {
        let messages = cluster.event_messages("default", "slow", "DeadlineExceeded");
        (messages == ["Job was active longer than specified deadline"]).then_some(())
    });
    for pod in pods_of(&cluster, "slow") {
        assert!(!pod.metadata.finalizers.clone().unwrap_or_default().contains(&TRACKING_FINALIZER.to_string()));
    }
}

on_both_backends!(the_pods_of_a_deleted_job_lose_their_finalizer);
fn the_pods_of_a_deleted_job_lose_their_finalizer(backend: Backend) {
    let cluster = start(backend);
    let jobs = cluster.api::<Job>();
    let long = scripted_job(
        "gone",
        json!({"completions": 2, "parallelism": 2}),
        json!({"kcm-sandbox.dev/run-seconds": "120"}),
    );
    jobs.create(&long, &PostParams::default()).expect("created");
    // `ready` is counted from the controller's cache of pods: once it is 2, the deletion's sync
    // finds them there (a pod that reached the cache after its Job's deletion would keep its
    // finalizer, as with upstream's controller, which ignores a pod whose owner is gone).
    eventually("two pods ready", || (jobs.get("gone").ok()?.status?.ready == Some(2)).then_some(()));
    // No garbage collector runs: the pods stay, owned by a Job that is gone.
    let background =
        DeleteParams { propagation_policy: Some(kcm::client::PropagationPolicy::Background), ..Default::default() };
    jobs.delete("gone", &background).expect("deleted");
    eventually("the finalizers removed", || {
        let pods = pods_of(&cluster, "gone");
        pods.iter()
            .all(|p| !p.metadata.finalizers.clone().unwrap_or_default().contains(&TRACKING_FINALIZER.to_string()))
            .then_some(())
    });
}

/// A Job whose pods the simulated kubelets run as `annotations` script (`kcm-sandbox.dev/...`).
fn scripted_job(name: &str, spec: Value, annotations: Value) -> Job {
    let mut job = job(name, spec);
    let template = &mut job.spec.as_mut().expect("a spec").template;
    template.metadata = Some(from(json!({"annotations": annotations})));
    job
}

fn conditions_and_message(job: &Job, type_: &str) -> Option<String> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| c.type_ == type_).and_then(|c| c.message.clone())
}

on_both_backends!(failed_pods_are_retried_after_a_backoff_until_the_limit);
fn failed_pods_are_retried_after_a_backoff_until_the_limit(backend: Backend) {
    let cluster = start(backend);
    let jobs = cluster.api::<Job>();
    let script = json!({"kcm-sandbox.dev/exit-codes": "1", "kcm-sandbox.dev/run-seconds": "0.2"});
    jobs.create(&scripted_job("flaky", json!({"backoffLimit": 1}), script), &PostParams::default()).expect("created");
    let failed = wait_condition(&jobs, "flaky", "Failed");
    assert_eq!(
        condition_types(&failed),
        [owned("FailureTarget:BackoffLimitExceeded"), owned("Failed:BackoffLimitExceeded")]
    );
    assert_eq!(failed.status.as_ref().and_then(|s| s.failed), Some(2));
    assert_eq!(
        conditions_and_message(&failed, "Failed").as_deref(),
        Some("Job has reached the specified backoff limit")
    );
    let mut created: Vec<jiff::Timestamp> =
        pods_of(&cluster, "flaky").iter().filter_map(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0)).collect();
    created.sort();
    assert_eq!(created.len(), 2, "one retry");
    let waited = created[1].duration_since(created[0]).as_secs_f64();
    assert!(waited >= 9.0, "the retry waited out the 10 s backoff (second pod {waited} s after the first)");
    eventually("the BackoffLimitExceeded event", || {
        let messages = cluster.event_messages("default", "flaky", "BackoffLimitExceeded");
        (messages == ["Job has reached the specified backoff limit"]).then_some(())
    });
}

on_both_backends!(a_pod_failure_policy_ignores_disruptions_and_fails_on_fatal_codes);
fn a_pod_failure_policy_ignores_disruptions_and_fails_on_fatal_codes(backend: Backend) {
    let cluster = start(backend);
    let jobs = cluster.api::<Job>();
    let policy = json!({"backoffLimit": 0, "podFailurePolicy": {"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
        {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}]}});
    let evicted_once = json!({"kcm-sandbox.dev/exit-codes": "evicted,0", "kcm-sandbox.dev/run-seconds": "0.2"});
    jobs.create(&scripted_job("evicted", policy.clone(), evicted_once), &PostParams::default()).expect("created");
    let fatal = json!({"kcm-sandbox.dev/exit-codes": "42", "kcm-sandbox.dev/run-seconds": "0.2"});
    jobs.create(&scripted_job("fatal", policy, fatal), &PostParams::default()).expect("created");

    let failed = wait_condition(&jobs, "fatal", "Failed");
    assert_eq!(condition_types(&failed), [owned("FailureTarget:PodFailurePolicy"), owned("Failed:PodFailurePolicy")]);
    let pod = pods_of(&cluster, "fatal").pop().expect("its pod");
    let expected = format!(
        "Container main for pod default/{} failed with exit code 42 matching FailJob rule at index 1",
        pod.metadata.name.unwrap_or_default()
    );
    assert_eq!(conditions_and_message(&failed, "Failed"), Some(expected));

    // The evicted pod is not counted (backoffLimit 0 would have failed the Job): replaced, then done.
    let done = wait_condition(&jobs, "evicted", "Complete");
    let status = done.status.clone().expect("a status");
    assert_eq!((status.succeeded, status.failed.unwrap_or(0)), (Some(1), 0));
    let pods = pods_of(&cluster, "evicted");
    assert_eq!(pods.len(), 2);
    let disrupted = pods.iter().filter(|p| {
        let conditions = p.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
        conditions.iter().any(|c| c.type_ == "DisruptionTarget" && c.status == "True")
    });
    assert_eq!(disrupted.count(), 1);
}

on_both_backends!(an_index_fails_on_its_own_with_a_backoff_limit_per_index);
fn an_index_fails_on_its_own_with_a_backoff_limit_per_index(backend: Backend) {
    let cluster = start(backend);
    let jobs = cluster.api::<Job>();
    let spec = json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed", "backoffLimitPerIndex": 1});
    let script = json!({"kcm-sandbox.dev/exit-codes-index-1": "1", "kcm-sandbox.dev/run-seconds": "0.2"});
    jobs.create(&scripted_job("indexes", spec, script), &PostParams::default()).expect("created");
    let failed = wait_condition(&jobs, "indexes", "Failed");
    assert_eq!(condition_types(&failed), [owned("FailureTarget:FailedIndexes"), owned("Failed:FailedIndexes")]);
    let status = failed.status.clone().expect("a status");
    assert_eq!(status.completed_indexes.as_deref(), Some("0,2"));
    assert_eq!(status.failed_indexes.as_deref(), Some("1"));
    assert_eq!((status.succeeded, status.failed), (Some(2), Some(2)));
    let counts: Vec<String> = pods_of(&cluster, "indexes")
        .iter()
        .filter(|p| {
            p.metadata.annotations.clone().unwrap_or_default()["batch.kubernetes.io/job-completion-index"] == "1"
        })
        .map(|p| {
            p.metadata.annotations.clone().unwrap_or_default()["batch.kubernetes.io/job-index-failure-count"].clone()
        })
        .collect();
    let mut counts = counts;
    counts.sort();
    assert_eq!(counts, ["0", "1"], "the retry of index 1 carries its failure count");
}

on_both_backends!(restarts_in_place_count_against_the_backoff_limit);
fn restarts_in_place_count_against_the_backoff_limit(backend: Backend) {
    let cluster = start(backend);
    let jobs = cluster.api::<Job>();
    let mut job = scripted_job(
        "crashing",
        json!({"backoffLimit": 2}),
        json!({"kcm-sandbox.dev/exit-codes": "1", "kcm-sandbox.dev/run-seconds": "0.2"}),
    );
    job.spec.as_mut().and_then(|s| s.template.spec.as_mut()).expect("a pod spec").restart_policy =
        Some("OnFailure".into());
    jobs.create(&job, &PostParams::default()).expect("created");
    let failed = wait_condition(&jobs, "crashing", "Failed");
    assert_eq!(
        condition_types(&failed),
        [owned("FailureTarget:BackoffLimitExceeded"), owned("Failed:BackoffLimitExceeded")]
    );
    // Restarted in place, never replaced; deleted once the Job failed.
    eventually("one pod created, then deleted", || {
        let created = cluster.event_messages("default", "crashing", "SuccessfulCreate").len();
        let deleted = cluster.event_messages("default", "crashing", "SuccessfulDelete").len();
        (created == 1 && deleted == 1).then_some(())
    });
}

on_both_backends!(a_job_managed_by_another_controller_is_left_alone);
fn a_job_managed_by_another_controller_is_left_alone(backend: Backend) {
    let cluster = start(backend);
    let jobs = cluster.api::<Job>();
    jobs.create(&job("queued", json!({"managedBy": "example.com/batch-queue"})), &PostParams::default())
        .expect("created");
    jobs.create(&job("ours", json!({"managedBy": "kubernetes.io/job-controller"})), &PostParams::default())
        .expect("created");
    // The second Job completing shows the controller ran past the first.
    wait_condition(&jobs, "ours", "Complete");
    let queued = jobs.get("queued").expect("the job");
    assert!(queued.status.as_ref().and_then(|s| s.start_time.as_ref()).is_none(), "no status written");
    assert!(pods_of(&cluster, "queued").is_empty(), "no pods created");
}

on_both_backends!(a_success_policy_completes_an_indexed_job_early);
fn a_success_policy_completes_an_indexed_job_early(backend: Backend) {
    let cluster = start(backend);
    let jobs = cluster.api::<Job>();
    // Index 0 succeeds; 1 and 2 fail and would wait 10 s before their retry.
    let spec = json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed", "backoffLimit": 6,
        "successPolicy": {"rules": [{"succeededIndexes": "0"}]}});
    let script = json!({"kcm-sandbox.dev/run-seconds": "0.2",
        "kcm-sandbox.dev/exit-codes-index-1": "1", "kcm-sandbox.dev/exit-codes-index-2": "1"});
    jobs.create(&scripted_job("leader", spec, script), &PostParams::default()).expect("created");
    let done = wait_condition(&jobs, "leader", "Complete");
    assert_eq!(condition_types(&done), [owned("SuccessCriteriaMet:SuccessPolicy"), owned("Complete:SuccessPolicy")]);
    assert_eq!(conditions_and_message(&done, "Complete").as_deref(), Some("Matched rules at index 0"));
    let status = done.status.clone().expect("a status");
    assert_eq!((status.completed_indexes.as_deref(), status.succeeded), (Some("0"), Some(1)));
    // Counted by their creations: a failing index may still run when index 0 meets the
    // policy, and is then deleted.
    let created = eventually("the three SuccessfulCreate events", || {
        let created = cluster.event_messages("default", "leader", "SuccessfulCreate");
        (created.len() >= 3).then_some(created)
    });
    assert_eq!(created.len(), 3, "no retry after the policy was met: {created:?}");
}

on_both_backends!(a_fail_index_rule_past_max_failed_indexes_fails_the_job);
fn a_fail_index_rule_past_max_failed_indexes_fails_the_job(backend: Backend) {
    let cluster = start(backend);
    let jobs = cluster.api::<Job>();
    let spec = json!({"completions": 4, "parallelism": 4, "completionMode": "Indexed",
        "backoffLimitPerIndex": 3, "maxFailedIndexes": 0,
        "podFailurePolicy": {"rules": [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [3]}}]}});
    let script = json!({"kcm-sandbox.dev/exit-codes-index-2": "3", "kcm-sandbox.dev/run-seconds": "0.2"});
    jobs.create(&scripted_job("strict", spec, script), &PostParams::default()).expect("created");
    let failed = wait_condition(&jobs, "strict", "Failed");
    assert_eq!(
        condition_types(&failed),
        [owned("FailureTarget:MaxFailedIndexesExceeded"), owned("Failed:MaxFailedIndexesExceeded")]
    );
    assert_eq!(
        conditions_and_message(&failed, "Failed").as_deref(),
        Some("Job has exceeded the specified maximal number of failed indexes")
    );
    assert_eq!(failed.status.as_ref().and_then(|s| s.failed_indexes.as_deref()), Some("2"));
    let index_2 = pods_of(&cluster, "strict").into_iter().filter(|p| {
        p.metadata.annotations.clone().unwrap_or_default()["batch.kubernetes.io/job-completion-index"] == "2"
    });
    assert_eq!(index_2.count(), 1, "FailIndex: the index is not retried despite backoffLimitPerIndex 3");
}

on_both_backends!(an_elastic_indexed_job_drops_the_indexes_it_no_longer_needs);
fn an_elastic_indexed_job_drops_the_indexes_it_no_longer_needs(backend: Backend) {
    let cluster = start(backend);
    let jobs = cluster.api::<Job>();
    let spec = json!({"completions": 4, "parallelism": 4, "completionMode": "Indexed"});
    jobs.create(&scripted_job("elastic", spec, json!({"kcm-sandbox.dev/run-seconds": "8"})), &PostParams::default())
        .expect("created");
    eventually("four pods running", || {
        let pods = pods_of(&cluster, "elastic");
        let running = pods.iter().filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
        (running.count() == 4).then_some(())
    });
    let smaller = json!({"spec": {"completions": 2, "parallelism": 2}});
    jobs.patch("elastic", &Patch::Merge(smaller), &PostParams::default()).expect("scaled down");
    let done = wait_condition(&jobs, "elastic", "Complete");
    let status = done.status.clone().expect("a status");
    assert_eq!((status.completed_indexes.as_deref(), status.succeeded), (Some("0,1"), Some(2)));
    assert_eq!(status.failed.unwrap_or(0), 0, "pods deleted for the scale-down are not failures");
    eventually("indexes 2 and 3 deleted", || {
        (cluster.event_messages("default", "elastic", "SuccessfulDelete").len() == 2).then_some(())
    });
}

on_both_backends!(a_matching_orphan_is_adopted_with_the_tracking_finalizer);
fn a_matching_orphan_is_adopted_with_the_tracking_finalizer(backend: Backend) {
    // The orphan is in the controller's first list of pods: created after it started, it could
    // reach the cache after the Job's first sync had created a pod of its own. It runs long
    // enough to be adopted while running (a pod that finished unadopted counts for no Job).
    let cluster = harness::with(&[named("job-controller")]).on(backend).start_with(|client, _| {
        let orphan: Pod = from(json!({"metadata": {"name": "stray", "labels": {"app": "adopt"},
                "annotations": {"kcm-sandbox.dev/run-seconds": "15"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}));
        Api::<Pod>::namespaced(client, "default").create(&orphan, &PostParams::default()).expect("orphan created");
    });
    let pods = cluster.api::<Pod>();
    let mut adopter = job("adopter", json!({"manualSelector": true, "selector": {"matchLabels": {"app": "adopt"}}}));
    adopter.spec.as_mut().expect("a spec").template.metadata = Some(from(json!({"labels": {"app": "adopt"}})));
    let jobs = cluster.api::<Job>();
    jobs.create(&adopter, &PostParams::default()).expect("created");
    let adopted = eventually("the orphan adopted", || {
        let pod = pods.get("stray").ok()?;
        let owned = pod.metadata.owner_references.as_ref()?.iter().any(|r| r.kind == "Job" && r.name == "adopter");
        owned.then_some(pod)
    });
    let finalizers = adopted.metadata.finalizers.unwrap_or_default();
    let completed = adopted.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded");
    assert!(completed || finalizers.contains(&TRACKING_FINALIZER.to_string()), "adopted with the finalizer");
    let done = wait_condition(&jobs, "adopter", "Complete");
    assert_eq!(done.status.as_ref().and_then(|s| s.succeeded), Some(1));
    let params = ListParams { label_selector: Some("app=adopt".into()), ..Default::default() };
    assert_eq!(pods.list(&params).expect("pods").items.len(), 1, "the adopted pod did the work; none created");
}

/// The value of `job_controller_stale_sync_skips_total{group="",resource="pods"}` in this
/// process's registry (the harness runs the controllers in-process); 0 before the first skip.
fn stale_pod_sync_skips() -> f64 {
    harness::metric_sample("job_controller_stale_sync_skips_total{group=\"\",resource=\"pods\"}").unwrap_or(0.0)
}

/// v1.36's StaleControllerConsistencyJob (Beta, on): once the controller has created the pods,
/// its next syncs (the informers' resyncs from their stale cache, and the rate-limited retries)
/// are skipped and counted while the pod informer has not seen those creations; when the watch
/// events arrive the Job runs to completion with its pods created once.
#[test]
fn a_job_is_not_synced_until_its_informers_have_seen_its_pods() {
    let before = stale_pod_sync_skips();
    let cluster =
        harness::with(&[named("job-controller")]).flags(&["--min-resync-period=1s"]).start_with(|client, server| {
            let held = job("held", json!({"completions": 2, "parallelism": 2}));
            Api::<Job>::namespaced(client, "default").create(&held, &PostParams::default()).expect("created");
            // The informers list the Job, then see no change until released.
            server.sandbox().expect("the sandbox").faults().hold_watch_events(true);
        });
    eventually("the two pods", || (pods_of(&cluster, "held").len() == 2).then_some(()));
    eventually("a sync skipped for the unseen pods", || (stale_pod_sync_skips() > before).then_some(()));
    assert_eq!(pods_of(&cluster, "held").len(), 2, "no pod created twice");

    cluster.sandbox().faults().hold_watch_events(false);
    let done = wait_condition(&cluster.api::<Job>(), "held", "Complete");
    assert_eq!(done.status.and_then(|s| s.succeeded), Some(2));
    assert_eq!(pods_of(&cluster, "held").len(), 2);
}
