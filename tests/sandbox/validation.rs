//! kcm-sandbox's spec validation against kube-apiserver v1.33's (`pkg/apis/*/validation`):
//! invalid workloads, pods, jobs, cron jobs and services are refused with 422 and upstream's
//! field paths and messages, on create and on update; status writes get the status rules.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Pod, ReplicationController, Service, ServiceAccount};
use kcm::client::{Api, ApiError, Client, ClientOptions, Error, Patch, PostParams};
use kcm::sandbox::server::{Sandbox, SandboxOptions};
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
        "Deployment.apps \"x\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"a\":\"x\"}: `selector` does not match template `labels`"
    );
    assert_eq!(
        causes,
        [(
            "FieldValueInvalid".to_string(),
            "spec.template.metadata.labels".to_string(),
            "Invalid value: map[string]string{\"a\":\"x\"}: `selector` does not match template `labels`".to_string()
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
        "Deployment.apps \"y\" is invalid: [spec.replicas: Invalid value: -1: must be greater than or equal to 0, spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\", spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: may not be 0 when `maxSurge` is 0, spec.progressDeadlineSeconds: Invalid value: 5: must be greater than minReadySeconds]"
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
        "Deployment.apps \"web\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"other\"}: `selector` does not match template `labels`"
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
        "ReplicaSet.apps \"rs\" is invalid: spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"
    );
    let sts: StatefulSet = from(
        json!({"metadata": {"name": "db"}, "spec": {"serviceName": "db", "template": template(json!({"a": "b"}))}}),
    );
    let (message, _) = invalid(Api::<StatefulSet>::namespaced(&c, "default").create(&sts, &PostParams::default()));
    // k8s-openapi writes a missing (required) selector as `{}`: an empty selector.
    assert_eq!(
        message,
        "StatefulSet.apps \"db\" is invalid: spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for statefulset"
    );
    let ds: DaemonSet = from(json!({"metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": template(json!({"a": "c"}))}}));
    let (message, _) = invalid(Api::<DaemonSet>::namespaced(&c, "default").create(&ds, &PostParams::default()));
    assert_eq!(
        message,
        "DaemonSet.apps \"agent\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"a\":\"c\"}: `selector` does not match template `labels`"
    );
    let rc: ReplicationController = from(json!({"metadata": {"name": "rc"},
        "spec": {"selector": {"a": "b"}, "template": template(json!({"a": "c"}))}}));
    let (message, _) =
        invalid(Api::<ReplicationController>::namespaced(&c, "default").create(&rc, &PostParams::default()));
    assert_eq!(
        message,
        "ReplicationController \"rc\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"a\":\"c\"}: `selector` does not match template `labels`"
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
        "Job.batch \"m\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"a\":\"c\"}: `selector` does not match template `labels`"
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
    good.spec.as_mut().unwrap().schedule = "*/5 * * * *".into();
    Api::<CronJob>::namespaced(&c, "default").create(&good, &PostParams::default()).unwrap();
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
