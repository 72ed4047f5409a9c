//! kcm-sandbox's spec validation against kube-apiserver v1.33's (`pkg/apis/*/validation`):
//! invalid workloads, pods, jobs, cron jobs and services are refused with 422 and upstream's
//! field paths and messages, on create and on update; status writes get the status rules.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Pod, ReplicationController, Service, ServiceAccount};
use kcm::client::{Api, ApiError, Client, ClientOptions, Error, Patch, PostParams};
use kcm_sandbox::sandbox::server::{Sandbox, SandboxOptions};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn start() -> (Sandbox, Client) {
    let options = SandboxOptions { listen: "127.0.0.1:0".parse().unwrap(), ..SandboxOptions::default() };
    let sandbox = Sandbox::start(options).expect("sandbox starts");
    let client =
        Client::new(sandbox.admin_config(), ClientOptions { qps: -1.0, burst: 1, timeout: Duration::from_secs(30) })
            .expect("client");
    Api::<ServiceAccount>::namespaced(&client, "default")
        .create(&from(json!({"metadata": {"name": "default"}})), &PostParams::default())
        .expect("default service account");
    (sandbox, client)
}

fn from<K: DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("object decodes")
}

fn api_error(result: Result<impl std::fmt::Debug, Error>) -> ApiError {
    match result {
        Err(Error::Api(e)) => *e,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// The 422's message and its causes as `(reason, field, message)`.
fn invalid(result: Result<impl std::fmt::Debug, Error>) -> (String, Vec<(String, String, String)>) {
    let e = api_error(result);
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"), "{}", e.message);
    let causes = e.status.details.and_then(|d| d.causes).unwrap_or_default();
    let causes = causes
        .into_iter()
        .map(|c| (c.reason.unwrap_or_default(), c.field.unwrap_or_default(), c.message.unwrap_or_default()))
        .collect();
    (e.message, causes)
}

fn template(labels: Value) -> Value {
    json!({"metadata": {"labels": labels}, "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}})
}

fn deployment(name: &str, selector: Value, labels: Value) -> Deployment {
    from(json!({"metadata": {"name": name},
        "spec": {"replicas": 2, "selector": {"matchLabels": selector}, "template": template(labels)}}))
}

#[test]
fn a_deployment_whose_selector_does_not_match_its_template_is_refused() {
    let (_sandbox, c) = start();
    let deployments = Api::<Deployment>::namespaced(&c, "default");
    let (message, causes) =
        invalid(deployments.create(&deployment("x", json!({"a": "b"}), json!({"a": "x"})), &PostParams::default()));
    assert_eq!(
        message,
        "Deployment.apps \"x\" is invalid: spec.template.metadata.labels: Invalid value: {\"a\":\"x\"}: `selector` does not match template `labels`"
    );
    assert_eq!(
        causes,
        [(
            "FieldValueInvalid".to_string(),
            "spec.template.metadata.labels".to_string(),
            "Invalid value: {\"a\":\"x\"}: `selector` does not match template `labels`".to_string()
        )]
    );
    assert!(deployments.get_opt("x").unwrap().is_none(), "nothing was stored");

    // Several problems are listed together, in upstream's order.
    let mut bad: Value = json!({"metadata": {"name": "y"}, "spec": {"replicas": -1, "minReadySeconds": 5,
        "progressDeadlineSeconds": 5, "selector": {"matchLabels": {"a": "b"}}, "template": template(json!({"a": "b"})),
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}}});
    bad["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    let (message, causes) = invalid(deployments.create(&from(bad), &PostParams::default()));
    assert_eq!(
        message,
        "Deployment.apps \"y\" is invalid: [spec.replicas: Invalid value: -1: must be greater than or equal to 0, spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\", spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0, spec.progressDeadlineSeconds: Invalid value: 5: must be greater than minReadySeconds]"
    );
    assert_eq!(causes[1].0, "FieldValueNotSupported");
}

#[test]
fn updates_are_validated_like_creates() {
    let (_sandbox, c) = start();
    let deployments = Api::<Deployment>::namespaced(&c, "default");
    deployments
        .create(&deployment("web", json!({"app": "web"}), json!({"app": "web"})), &PostParams::default())
        .unwrap();
    let patch = Patch::Merge(json!({"spec": {"template": {"metadata": {"labels": {"app": "other"}}}}}));
    let (message, _) = invalid(deployments.patch("web", &patch, &PostParams::default()));
    assert_eq!(
        message,
        "Deployment.apps \"web\" is invalid: spec.template.metadata.labels: Invalid value: {\"app\":\"other\"}: `selector` does not match template `labels`"
    );
    // The spec rules come first, then what may not change.
    let patch = Patch::Merge(json!({"spec": {"replicas": -3, "selector": {"matchLabels": {"app": "new"}}}}));
    let (_, causes) = invalid(deployments.patch("web", &patch, &PostParams::default()));
    let fields: Vec<&str> = causes.iter().map(|c| c.1.as_str()).collect();
    assert_eq!(fields, ["spec.replicas", "spec.template.metadata.labels", "spec.selector"]);
    assert_eq!(deployments.get("web").unwrap().spec.unwrap().replicas, Some(2));
}

#[test]
fn status_updates_get_the_status_rules_only() {
    let (_sandbox, c) = start();
    let replicasets = Api::<ReplicaSet>::namespaced(&c, "default");
    let rs: ReplicaSet = from(json!({"metadata": {"name": "rs"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}}, "template": template(json!({"a": "b"}))}}));
    replicasets.create(&rs, &PostParams::default()).unwrap();
    let status = |s: Value| Patch::Merge(json!({"status": s}));
    let good = status(json!({"replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "observedGeneration": 1}));
    replicasets.patch_status("rs", &good, &PostParams::default()).unwrap();
    let (message, causes) = invalid(replicasets.patch_status(
        "rs",
        &status(json!({"replicas": -1, "readyReplicas": 1})),
        &PostParams::default(),
    ));
    assert_eq!(
        message,
        "ReplicaSet.apps \"rs\" is invalid: [status.replicas: Invalid value: -1: must be greater than or equal to 0, status.fullyLabeledReplicas: Invalid value: 0: cannot be greater than status.replicas, status.readyReplicas: Invalid value: 1: cannot be greater than status.replicas, status.availableReplicas: Invalid value: 1: cannot be greater than status.replicas]"
    );
    assert_eq!(causes.len(), 4);
}

#[test]
fn workload_selectors_are_required_and_not_empty() {
    let (_sandbox, c) = start();
    let rs: ReplicaSet =
        from(json!({"metadata": {"name": "rs"}, "spec": {"selector": {}, "template": template(json!({"a": "b"}))}}));
    let (message, _) = invalid(Api::<ReplicaSet>::namespaced(&c, "default").create(&rs, &PostParams::default()));
    assert_eq!(
        message,
        "ReplicaSet.apps \"rs\" is invalid: spec.selector: Invalid value: {}: empty selector is invalid for deployment"
    );
    let sts: StatefulSet = from(
        json!({"metadata": {"name": "db"}, "spec": {"serviceName": "db", "template": template(json!({"a": "b"}))}}),
    );
    let (message, _) = invalid(Api::<StatefulSet>::namespaced(&c, "default").create(&sts, &PostParams::default()));
    // k8s-openapi writes a missing (required) selector as `{}`: an empty selector.
    assert_eq!(
        message,
        "StatefulSet.apps \"db\" is invalid: spec.selector: Invalid value: {}: empty selector is invalid for statefulset"
    );
    let ds: DaemonSet = from(json!({"metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": template(json!({"a": "c"}))}}));
    let (message, _) = invalid(Api::<DaemonSet>::namespaced(&c, "default").create(&ds, &PostParams::default()));
    assert_eq!(
        message,
        "DaemonSet.apps \"agent\" is invalid: spec.template.metadata.labels: Invalid value: {\"a\":\"c\"}: `selector` does not match template `labels`"
    );
    let rc: ReplicationController = from(json!({"metadata": {"name": "rc"},
        "spec": {"selector": {"a": "b"}, "template": template(json!({"a": "c"}))}}));
    let (message, _) =
        invalid(Api::<ReplicationController>::namespaced(&c, "default").create(&rc, &PostParams::default()));
    assert_eq!(
        message,
        "ReplicationController \"rc\" is invalid: spec.template.metadata.labels: Invalid value: {\"a\":\"c\"}: `selector` does not match template `labels`"
    );
}

#[test]
fn pods_need_valid_containers() {
    let (_sandbox, c) = start();
    let pods = Api::<Pod>::namespaced(&c, "default");
    let none: Pod = from(json!({"metadata": {"name": "p"}, "spec": {"containers": []}}));
    let (message, causes) = invalid(pods.create(&none, &PostParams::default()));
    assert_eq!(message, "Pod \"p\" is invalid: spec.containers: Required value");
    assert_eq!(causes[0].0, "FieldValueRequired");
    let bad: Pod = from(json!({"metadata": {"name": "p"}, "spec": {"restartPolicy": "Sometimes", "containers": [
        {"name": "app", "image": "nginx", "ports": [{"containerPort": 0}],
         "resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}},
        {"name": "app"}]}}));
    let (message, _) = invalid(pods.create(&bad, &PostParams::default()));
    assert_eq!(
        message,
        "Pod \"p\" is invalid: [spec.containers[0].ports[0].containerPort: Required value, spec.containers[0].resources.requests: Invalid value: \"2Gi\": must be less than or equal to memory limit of 1Gi, spec.containers[1].image: Required value, spec.containers[1].name: Duplicate value: \"app\", spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"]"
    );
    // Templates get the same container rules.
    let mut no_image = deployment("d", json!({"a": "b"}), json!({"a": "b"}));
    no_image.spec.as_mut().unwrap().template.spec.as_mut().unwrap().containers[0].image = None;
    let (message, _) = invalid(Api::<Deployment>::namespaced(&c, "default").create(&no_image, &PostParams::default()));
    assert_eq!(message, "Deployment.apps \"d\" is invalid: spec.template.spec.containers[0].image: Required value");
}

#[test]
fn jobs_and_cron_jobs_are_validated() {
    let (_sandbox, c) = start();
    let job: Job =
        from(json!({"metadata": {"name": "j"}, "spec": {"backoffLimit": -1, "template": template(json!({}))}}));
    let (message, _) = invalid(Api::<Job>::namespaced(&c, "default").create(&job, &PostParams::default()));
    assert_eq!(
        message,
        "Job.batch \"j\" is invalid: [spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0, spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"]"
    );
    let manual: Job = from(json!({"metadata": {"name": "m"}, "spec": {"manualSelector": true,
        "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "c"}}, "spec": {"restartPolicy": "Never",
            "containers": [{"name": "app", "image": "busybox"}]}}}}));
    let (message, _) = invalid(Api::<Job>::namespaced(&c, "default").create(&manual, &PostParams::default()));
    assert_eq!(
        message,
        "Job.batch \"m\" is invalid: spec.template.metadata.labels: Invalid value: {\"a\":\"c\"}: `selector` does not match template `labels`"
    );
    let cron: CronJob = from(json!({"metadata": {"name": "cj"}, "spec": {"schedule": "61 * * * *",
        "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
            "containers": [{"name": "app", "image": "busybox"}]}}}}}}));
    let (message, _) = invalid(Api::<CronJob>::namespaced(&c, "default").create(&cron, &PostParams::default()));
    assert_eq!(
        message,
        "CronJob.batch \"cj\" is invalid: spec.schedule: Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61"
    );
    let mut good = cron.clone();
    good.spec.schedule = "*/5 * * * *".into();
    Api::<CronJob>::namespaced(&c, "default").create(&good, &PostParams::default()).unwrap();
}

/// A `kubectl create job`-like Job with `spec` merged in.
fn job(name: &str, spec: Value) -> Job {
    let mut job = json!({"metadata": {"name": name}, "spec": {"template": {"spec": {"restartPolicy": "Never",
        "containers": [{"name": "app", "image": "busybox"}]}}}});
    for (key, value) in spec.as_object().unwrap() {
        job["spec"][key] = value.clone();
    }
    from(job)
}

#[test]
fn jobs_get_upstream_defaults_and_a_generated_selector() {
    let (_sandbox, c) = start();
    let jobs = Api::<Job>::namespaced(&c, "default");
    let created = jobs.create(&job("pi", json!({})), &PostParams::default()).unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let object = serde_json::to_value(&created).unwrap();
    let spec = &object["spec"];
    for (field, value) in [
        ("completions", json!(1)),
        ("parallelism", json!(1)),
        ("backoffLimit", json!(6)),
        ("completionMode", json!("NonIndexed")),
        ("suspend", json!(false)),
        ("manualSelector", json!(false)),
        ("podReplacementPolicy", json!("TerminatingOrFailed")),
        ("selector", json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})),
    ] {
        assert_eq!(spec[field], value, "spec.{field}");
    }
    let labels = json!({"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "pi",
        "controller-uid": uid, "job-name": "pi"});
    assert_eq!(spec["template"]["metadata"]["labels"], labels);
    assert_eq!(object["metadata"]["labels"], labels, "the Job takes its template's labels");

    // A per-index backoff limit makes the overall one unlimited; a pod failure policy asks for
    // replacement only of failed pods, and its condition patterns match True.
    let spec = json!({"completionMode": "Indexed", "completions": 3, "backoffLimitPerIndex": 1,
        "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}});
    let created = serde_json::to_value(jobs.create(&job("indexed", spec), &PostParams::default()).unwrap()).unwrap();
    assert_eq!(created["spec"]["backoffLimit"], 2147483647);
    assert_eq!(created["spec"]["podReplacementPolicy"], "Failed");
    assert_eq!(created["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"], "True");

    // Someone else's value for a generated label is refused.
    let relabelled: Job = from(json!({"metadata": {"name": "r"}, "spec": {"template": {"metadata": {"labels":
        {"controller-uid": "mine"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "app", "image": "busybox"}]}}}}));
    let (message, _) = invalid(jobs.create(&relabelled, &PostParams::default()));
    // The refused Job's own uid, generated for it.
    let uid = message.rsplit("must be '").next().unwrap().trim_end_matches('\'');
    assert_eq!(
        message,
        format!(
            "Job.batch \"r\" is invalid: spec.template.metadata.labels[controller-uid]: Invalid value: \
             {{\"batch.kubernetes.io/controller-uid\":\"{uid}\",\"batch.kubernetes.io/job-name\":\"r\",\
             \"controller-uid\":\"mine\",\"job-name\":\"r\"}}: must be '{uid}'"
        )
    );

    let cron: CronJob = from(json!({"metadata": {"name": "nightly"}, "spec": {"schedule": "0 3 * * *",
        "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
            "containers": [{"name": "app", "image": "busybox"}]}}}}}}));
    let cron = Api::<CronJob>::namespaced(&c, "default").create(&cron, &PostParams::default()).unwrap();
    let spec = cron.spec;
    assert_eq!(spec.concurrency_policy.as_deref(), Some("Allow"));
    assert_eq!(
        (spec.suspend, spec.successful_jobs_history_limit, spec.failed_jobs_history_limit),
        (Some(false), Some(3), Some(1))
    );
}

#[test]
fn job_policies_and_updates_are_validated() {
    let (_sandbox, c) = start();
    let jobs = Api::<Job>::namespaced(&c, "default");
    let spec = json!({"podFailurePolicy": {"rules": [
        {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [3, 0, 3]}},
        {"action": "Ignore"}]}, "podReplacementPolicy": "TerminatingOrFailed", "managedBy": "nodomain"});
    let (message, _) = invalid(jobs.create(&job("policy", spec), &PostParams::default()));
    assert_eq!(
        message,
        "Job.batch \"policy\" is invalid: [spec.managedBy: Invalid value: \"nodomain\": must be a domain-prefixed path (such as \"acme.io/foo\"), \
         spec.podFailurePolicy.rules[0].action: Invalid value: \"FailIndex\": requires the backoffLimitPerIndex to be set, \
         spec.podFailurePolicy.rules[0].onExitCodes.values[1]: Invalid value: 0: must not be 0 for the In operator, \
         spec.podFailurePolicy.rules[0].onExitCodes.values[2]: Duplicate value: 3, \
         spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: [3,0,3]: must be ordered, \
         spec.podFailurePolicy.rules[1]: Invalid value: specifying one of OnExitCodes and OnPodConditions is required, \
         spec.podReplacementPolicy: Unsupported value: \"TerminatingOrFailed\": supported values: \"Failed\"]"
    );
    let spec = json!({"completionMode": "Indexed", "completions": 4, "successPolicy": {"rules": [{"succeededIndexes": "0-5"}]}});
    let (message, _) = invalid(jobs.create(&job("success", spec), &PostParams::default()));
    assert_eq!(
        message,
        "Job.batch \"success\" is invalid: spec.successPolicy.rules[0].succeededIndexes: Invalid value: \"0-5\": error parsing succeededIndexes: too large index: \"5\""
    );

    // Completions are fixed for a NonIndexed Job; parallelism is not.
    jobs.create(&job("fixed", json!({"completions": 2})), &PostParams::default()).unwrap();
    let (message, _) =
        invalid(jobs.patch("fixed", &Patch::Merge(json!({"spec": {"completions": 3}})), &PostParams::default()));
    assert_eq!(message, "Job.batch \"fixed\" is invalid: spec.completions: Invalid value: 3: field is immutable");
    jobs.patch("fixed", &Patch::Merge(json!({"spec": {"parallelism": 5}})), &PostParams::default()).unwrap();
}

#[test]
fn job_status_writes_follow_the_job_strategy() {
    let (_sandbox, c) = start();
    let jobs = Api::<Job>::namespaced(&c, "default");
    jobs.create(&job("work", json!({})), &PostParams::default()).unwrap();
    let status = |s: Value| Patch::Merge(json!({"status": s}));
    let start = "2030-01-01T00:00:00Z";
    let running = status(json!({"startTime": start, "active": 1, "ready": 0, "terminating": 0,
        "uncountedTerminatedPods": {"succeeded": [], "failed": []}}));
    let stored = jobs.patch_status("work", &running, &PostParams::default()).unwrap();
    let stored = serde_json::to_value(stored).unwrap();
    assert_eq!(stored["status"]["uncountedTerminatedPods"], json!({}), "empty lists are not stored");

    // The job controller's way to finish: SuccessCriteriaMet first, then Complete.
    let complete = json!({"type": "Complete", "status": "True", "reason": "CompletionsReached",
        "message": "Reached expected number of succeeded pods", "lastTransitionTime": start});
    let (message, _) = invalid(jobs.patch_status(
        "work",
        &status(
            json!({"active": 0, "succeeded": 1, "completionTime": "2030-01-01T00:00:10Z", "conditions": [complete]}),
        ),
        &PostParams::default(),
    ));
    assert_eq!(
        message,
        "Job.batch \"work\" is invalid: status.conditions: Invalid value: cannot set Complete=True condition without the SuccessCriteriaMet=true condition"
    );
    let mut criteria = complete.clone();
    criteria["type"] = json!("SuccessCriteriaMet");
    let done = status(json!({"active": 0, "ready": 0, "succeeded": 1, "completionTime": "2030-01-01T00:00:10Z",
        "conditions": [criteria, complete]}));
    let stored = serde_json::to_value(jobs.patch_status("work", &done, &PostParams::default()).unwrap()).unwrap();
    assert!(stored["status"].get("active").is_none(), "a zero active count is not stored: {}", stored["status"]);

    // Finished is final.
    let (message, causes) = invalid(jobs.patch_status(
        "work",
        &status(json!({"succeeded": 0, "conditions": null, "completionTime": null})),
        &PostParams::default(),
    ));
    assert_eq!(
        causes.iter().map(|c| c.2.as_str()).collect::<Vec<_>>(),
        [
            "Invalid value: cannot disable the terminal Complete=True condition",
            "Invalid value: 0: cannot decrease the succeeded counter",
            "Invalid value: cannot disable the SuccessCriteriaMet=True condition",
        ],
        "{message}"
    );
}

#[test]
fn services_are_validated() {
    let (_sandbox, c) = start();
    let services = Api::<Service>::namespaced(&c, "default");
    let unnamed: Service = from(json!({"metadata": {"name": "s"}, "spec": {"selector": {"app": "web"},
        "ports": [{"port": 80}, {"port": 443, "protocol": "QUIC"}]}}));
    let (message, _) = invalid(services.create(&unnamed, &PostParams::default()));
    assert_eq!(
        message,
        "Service \"s\" is invalid: [spec.ports[0].name: Required value, spec.ports[1].name: Required value, spec.ports[1].protocol: Unsupported value: \"QUIC\": supported values: \"SCTP\", \"TCP\", \"UDP\"]"
    );
    let headless_node_port: Service = from(json!({"metadata": {"name": "s"},
        "spec": {"type": "NodePort", "clusterIP": "None", "ports": [{"port": 80}]}}));
    let (message, _) = invalid(services.create(&headless_node_port, &PostParams::default()));
    assert_eq!(
        message,
        "Service \"s\" is invalid: spec.clusterIPs[0]: Invalid value: \"None\": may not be set to 'None' for NodePort services"
    );
    let fine: Service =
        from(json!({"metadata": {"name": "s"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}));
    services.create(&fine, &PostParams::default()).unwrap();
    let (message, _) =
        invalid(services.patch("s", &Patch::Merge(json!({"spec": {"ports": [{"port": 0}]}})), &PostParams::default()));
    assert_eq!(
        message,
        "Service \"s\" is invalid: [spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive, spec.ports[0].targetPort: Invalid value: 0: must be between 1 and 65535, inclusive]"
    );
}
