//! The job-controller on both backends, with the simulated kubelets running Job pods to
//! completion: NonIndexed and Indexed Jobs complete with upstream's status, conditions, labels
//! and Events; a suspended Job starts nothing until resumed; a Job past its deadline fails with
//! its pods killed; the pods of a deleted Job lose their tracking finalizer.

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
    jobs.create(&job("gone", json!({"completions": 2, "parallelism": 2})), &PostParams::default()).expect("created");
    eventually("two pods created", || (pods_of(&cluster, "gone").len() == 2).then_some(()));
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
