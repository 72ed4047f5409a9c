//! kcm-sandbox against kube-apiserver v1.36's API semantics, over real HTTPS: metadata, writes,
//! deletion, reads, watches, subresources, admission, errors, discovery, authentication and
//! fault injection. Each test starts its own sandbox on a free port.

use std::io::{BufReader, Write};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenReview};
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{
    ConfigMap, LimitRange, Namespace, Pod, ReplicationController, ResourceQuota, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kcm::client::config::{Auth, ClientIdentity, RestConfig, TlsSettings};
use kcm::client::{
    Api, ApiError, Client, ClientMetrics, ClientOptions, DeleteParams, Deleted, Error, ListParams, Patch, PostParams,
    Preconditions, PropagationPolicy, WatchEvent, WatchParams, WatchReceiver,
};
use kcm_sandbox::sandbox::server::{Sandbox, SandboxOptions};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::harness;
use crate::support;
use crate::support::http::{self, Response as RawResponse, TlsStream};

/// How long anything the tests wait for may take on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// Test bed
// ---------------------------------------------------------------------------------------------

fn options() -> SandboxOptions {
    SandboxOptions { listen: "127.0.0.1:0".parse().unwrap(), ..SandboxOptions::default() }
}

fn start() -> Sandbox {
    Sandbox::start(options()).expect("sandbox starts")
}

fn client_for(config: RestConfig) -> Client {
    Client::new(config, ClientOptions { qps: -1.0, burst: 1, timeout: PATIENCE }).expect("client")
}

fn client(sandbox: &Sandbox) -> Client {
    client_for(sandbox.admin_config())
}

/// A config that trusts the sandbox's CA and presents no credentials (or only `auth`).
fn anonymous_config(sandbox: &Sandbox, auth: Auth) -> RestConfig {
    RestConfig {
        server: sandbox.url(),
        tls: TlsSettings { ca_certs: Some(support::certs(sandbox.ca_pem())), ..TlsSettings::default() },
        auth,
        source: "test".into(),
    }
}

fn from<K: DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("object decodes")
}

fn value<K: Serialize>(object: &K) -> Value {
    serde_json::to_value(object).expect("object encodes")
}

fn api_error(result: Result<impl std::fmt::Debug, Error>) -> ApiError {
    match result {
        Err(Error::Api(e)) => *e,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Polls `check` until it returns `Some`, for at most [`PATIENCE`].
fn eventually<T>(what: &str, check: impl FnMut() -> Option<T>) -> T {
    harness::poll_until(PATIENCE, Duration::from_millis(20), what, check)
}

fn rv_of(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"].as_str().expect("resourceVersion").parse().expect("numeric resourceVersion")
}

fn names<K: Serialize>(items: &[K]) -> Vec<String> {
    items.iter().map(|i| value(i)["metadata"]["name"].as_str().unwrap_or_default().to_string()).collect()
}

fn create_namespace(c: &Client, name: &str) {
    Api::<Namespace>::cluster(c)
        .create(&from(json!({"metadata": {"name": name}})), &PostParams::default())
        .expect("namespace created");
}

/// A namespace with its `default` ServiceAccount, as the controller manager would leave it:
/// pods can be created there.
fn pod_namespace(c: &Client, name: &str) {
    create_namespace(c, name);
    Api::<ServiceAccount>::namespaced(c, name)
        .create(&from(json!({"metadata": {"name": "default"}})), &PostParams::default())
        .expect("default service account created");
}

fn config_map(name: &str, labels: Value) -> ConfigMap {
    from(json!({"metadata": {"name": name, "labels": labels}, "data": {"key": "one"}}))
}

fn deployment(name: &str, image: &str) -> Deployment {
    from(json!({
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": image}, {"name": "sidecar", "image": "busybox:1.36"}]},
            },
        },
    }))
}

fn pod(name: &str, labels: Value) -> Pod {
    from(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
    }))
}

fn bind(c: &Client, ns: &str, pod: &str, node: &str) -> Result<Value, Error> {
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod}, "target": {"kind": "Node", "name": node}});
    Api::<Pod>::namespaced(c, ns).create_subresource("binding", pod, &binding, &PostParams::default())
}

/// The next watch event, failing the test after [`PATIENCE`].
fn next_event<K: DeserializeOwned>(watch: &WatchReceiver<K>) -> WatchEvent<K> {
    match watch.recv_timeout(PATIENCE) {
        Ok(Some(Ok(event))) => event,
        Ok(Some(Err(e))) => panic!("watch failed: {e:?}"),
        Ok(None) => panic!("watch ended"),
        Err(()) => panic!("no watch event within {PATIENCE:?}"),
    }
}

/// The next event that is not a bookmark, as (type, name).
fn next_change<K: DeserializeOwned + Serialize>(watch: &WatchReceiver<K>) -> (&'static str, String) {
    loop {
        let (kind, object) = match next_event(watch) {
            WatchEvent::Added(o) => ("ADDED", o),
            WatchEvent::Modified(o) => ("MODIFIED", o),
            WatchEvent::Deleted(o) => ("DELETED", o),
            WatchEvent::Bookmark { .. } => continue,
        };
        return (kind, value(&object)["metadata"]["name"].as_str().unwrap_or_default().to_string());
    }
}

// ---------------------------------------------------------------------------------------------
// Raw HTTPS, for headers and exact bodies
// ---------------------------------------------------------------------------------------------

/// Sends one request and reads the answer's head; the body is left in the reader.
fn send_raw(
    sandbox: &Sandbox,
    config: &RestConfig,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Vec<(String, String)>, BufReader<TlsStream>) {
    let mut stream = http::connect(sandbox.addr(), config, PATIENCE);
    let mut head =
        format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n", sandbox.addr(), body.len());
    if let Some(token) = config.auth.bearer_token() {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    stream.flush().unwrap();
    let mut reader = BufReader::new(stream);
    let (code, headers) = http::read_head(&mut reader);
    (code, headers, reader)
}

fn raw(sandbox: &Sandbox, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> RawResponse {
    raw_as(sandbox, &sandbox.admin_config(), method, path, headers, body)
}

fn raw_as(
    sandbox: &Sandbox,
    config: &RestConfig,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> RawResponse {
    let (code, headers, mut reader) = send_raw(sandbox, config, method, path, headers, body);
    let body = http::read_body(&mut reader, &headers);
    RawResponse { code, headers, body }
}

/// A watch read event by event (the sandbox writes one event per chunk).
struct RawWatch {
    reader: BufReader<TlsStream>,
}

impl RawWatch {
    fn open(sandbox: &Sandbox, path: &str) -> RawWatch {
        let (code, _, reader) = send_raw(sandbox, &sandbox.admin_config(), "GET", path, &[], b"");
        assert_eq!(code, 200, "watch {path}");
        RawWatch { reader }
    }

    fn next(&mut self) -> Option<Value> {
        let chunk = http::read_chunk(&mut self.reader).ok().flatten();
        chunk.map(|chunk| serde_json::from_slice(&chunk).expect("event is JSON"))
    }
}

// ---------------------------------------------------------------------------------------------
// Metadata
// ---------------------------------------------------------------------------------------------

#[test]
fn create_sets_server_metadata_and_a_cluster_wide_resource_version() {
    let sandbox = start();
    let c = client(&sandbox);
    let configmaps = Api::<ConfigMap>::namespaced(&c, "default");
    let first = value(&configmaps.create(&config_map("first", json!({})), &PostParams::default()).unwrap());
    assert_eq!(first["metadata"]["uid"].as_str().unwrap().len(), 36, "{first}");
    assert!(first["metadata"]["creationTimestamp"].as_str().unwrap().ends_with('Z'));
    assert!(first["metadata"].get("generation").is_none(), "configmaps have no generation: {first}");
    // Another kind shares the counter: its resourceVersion is later.
    let web = value(
        &Api::<Deployment>::namespaced(&c, "default")
            .create(&deployment("web", "nginx:1.27"), &PostParams::default())
            .unwrap(),
    );
    assert!(rv_of(&web) > rv_of(&first));
    assert_eq!(web["metadata"]["generation"], 1);
    let second = value(&configmaps.create(&config_map("second", json!({})), &PostParams::default()).unwrap());
    assert!(rv_of(&second) > rv_of(&web));
    assert_ne!(second["metadata"]["uid"], first["metadata"]["uid"]);
    // The list is at least as new as every object in it.
    let list = configmaps.list(&ListParams::default()).unwrap();
    assert!(list.metadata.resource_version.unwrap().parse::<u64>().unwrap() >= rv_of(&second));

    let generated: ConfigMap = from(json!({"metadata": {"generateName": "gen-"}}));
    let generated = value(&configmaps.create(&generated, &PostParams::default()).unwrap());
    let name = generated["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
    assert_eq!(generated["metadata"]["generateName"], "gen-");

    // An object read back cannot be created again as it is.
    let e = api_error(configmaps.create(&from(second.clone()), &PostParams::default()));
    assert_eq!((e.code, e.message.as_str()), (500, "resourceVersion should not be set on objects to be created"));
    assert!(e.status.reason.is_none());

    let nameless = api_error(configmaps.create(&from(json!({"metadata": {}})), &PostParams::default()));
    assert_eq!((nameless.code, nameless.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        nameless.message,
        "ConfigMap \"\" is invalid: metadata.name: Required value: name or generateName is required"
    );
}

#[test]
fn generation_counts_spec_changes_only() {
    let sandbox = start();
    let c = client(&sandbox);
    let deployments = Api::<Deployment>::namespaced(&c, "default");
    let created = deployments.create(&deployment("web", "nginx:1.27"), &PostParams::default()).unwrap();
    assert_eq!(created.metadata.generation, Some(1));

    let mut scaled = created.clone();
    scaled.spec.as_mut().unwrap().replicas = Some(3);
    let scaled = deployments.replace("web", &scaled, &PostParams::default()).unwrap();
    assert_eq!(scaled.metadata.generation, Some(2));

    let labelled = deployments
        .patch("web", &Patch::Merge(json!({"metadata": {"labels": {"tier": "front"}}})), &PostParams::default())
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(2), "a metadata change keeps the generation");

    let mut status = value(&labelled);
    status["status"] = json!({"observedGeneration": 2, "replicas": 3});
    let with_status = deployments.replace_status("web", &from::<Deployment>(status), &PostParams::default()).unwrap();
    assert_eq!(with_status.metadata.generation, Some(2), "a status change keeps the generation");
    assert_eq!(with_status.status.as_ref().unwrap().replicas, Some(3));

    let image = Patch::Strategic(
        json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:1.28"}]}}}}),
    );
    assert_eq!(deployments.patch("web", &image, &PostParams::default()).unwrap().metadata.generation, Some(3));
}

#[test]
fn statuses_read_back_with_go_zero_values() {
    let sandbox = start();
    let c = client(&sandbox);
    let deployment = value(
        &Api::<Deployment>::namespaced(&c, "default")
            .create(&deployment("web", "nginx:1.27"), &PostParams::default())
            .unwrap(),
    );
    assert_eq!(deployment["status"], json!({}));
    let rs = json!({"metadata": {"name": "rs"}, "spec": {"selector": {"matchLabels": {"app": "rs"}},
        "template": {"metadata": {"labels": {"app": "rs"}}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}},
        "status": {"replicas": 7}});
    let rs = value(&Api::<ReplicaSet>::namespaced(&c, "default").create(&from(rs), &PostParams::default()).unwrap());
    assert_eq!(rs["status"], json!({"replicas": 0}), "status is cleared on create");
    let pdb =
        json!({"metadata": {"name": "pdb"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "rs"}}}});
    let pdb = value(
        &Api::<PodDisruptionBudget>::namespaced(&c, "default").create(&from(pdb), &PostParams::default()).unwrap(),
    );
    assert_eq!(
        pdb["status"],
        json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0})
    );
    let svc = json!({"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}});
    let svc = value(&Api::<Service>::namespaced(&c, "default").create(&from(svc), &PostParams::default()).unwrap());
    assert_eq!(svc["status"], json!({"loadBalancer": {}}));
    let cm = value(
        &Api::<ConfigMap>::namespaced(&c, "default")
            .create(&config_map("cm", json!({})), &PostParams::default())
            .unwrap(),
    );
    assert!(cm.get("status").is_none());
}

#[test]
fn object_metadata_is_validated() {
    let sandbox = start();
    let c = client(&sandbox);
    let configmaps = Api::<ConfigMap>::namespaced(&c, "default");
    let bad_value: ConfigMap = from(json!({"metadata": {"name": "c", "labels": {"app": "has space"}}}));
    let e = api_error(configmaps.create(&bad_value, &PostParams::default()));
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        e.message,
        "ConfigMap \"c\" is invalid: metadata.labels: Invalid value: \"has space\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    );
    let bad_key: ConfigMap = from(json!({"metadata": {"name": "c", "labels": {"Example.com/app": "x"}}}));
    let e = api_error(configmaps.create(&bad_key, &PostParams::default()));
    assert_eq!(
        e.message,
        "ConfigMap \"c\" is invalid: metadata.labels: Invalid value: \"Example.com/app\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    );
    let bad_annotation: ConfigMap = from(json!({"metadata": {"name": "c", "annotations": {"a/b/c": "x"}}}));
    let e = api_error(configmaps.create(&bad_annotation, &PostParams::default()));
    assert_eq!(
        e.message,
        "ConfigMap \"c\" is invalid: metadata.annotations: Invalid value: \"a/b/c\": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
    );
    let good: ConfigMap = from(json!({"metadata": {"name": "c", "labels": {"example.com/App_1": "v-1.0", "empty": ""},
        "annotations": {"Example.com/Note": "anything at all"}}}));
    let created = configmaps.create(&good, &PostParams::default()).unwrap();
    let e = api_error(configmaps.patch(
        "c",
        &Patch::Merge(json!({"metadata": {"labels": {"x": "-bad"}}})),
        &PostParams::default(),
    ));
    assert_eq!(e.code, 422);
    let e =
        api_error(configmaps.patch("c", &Patch::Merge(json!({"metadata": {"uid": "1234"}})), &PostParams::default()));
    assert_eq!(e.message, "ConfigMap \"c\" is invalid: metadata.uid: Invalid value: \"1234\": field is immutable");
    assert_eq!(configmaps.get("c").unwrap().metadata.uid, created.metadata.uid);
}

#[test]
fn immutable_config_maps_and_secrets_keep_their_data() {
    let sandbox = start();
    let c = client(&sandbox);
    let configmaps = Api::<ConfigMap>::namespaced(&c, "default");
    configmaps
        .create(
            &from(json!({"metadata": {"name": "fixed"}, "data": {"a": "1"}, "immutable": true})),
            &PostParams::default(),
        )
        .unwrap();
    configmaps
        .patch("fixed", &Patch::Merge(json!({"metadata": {"labels": {"ok": "yes"}}})), &PostParams::default())
        .unwrap();
    let e = api_error(configmaps.patch(
        "fixed",
        &Patch::Merge(json!({"data": {"a": "2"}, "immutable": false})),
        &PostParams::default(),
    ));
    assert_eq!(
        e.message,
        "ConfigMap \"fixed\" is invalid: [immutable: Forbidden: field is immutable when `immutable` is set, data: Forbidden: field is immutable when `immutable` is set]"
    );
    let secrets = Api::<Secret>::namespaced(&c, "default");
    secrets
        .create(&from(json!({"metadata": {"name": "s"}, "stringData": {"a": "1"}})), &PostParams::default())
        .unwrap();
    let e = api_error(secrets.patch("s", &Patch::Merge(json!({"type": "kubernetes.io/tls"})), &PostParams::default()));
    assert_eq!(e.message, "Secret \"s\" is invalid: type: Invalid value: \"kubernetes.io/tls\": field is immutable");
    assert!(secrets.patch("s", &Patch::Merge(json!({"stringData": {"a": "2"}})), &PostParams::default()).is_ok());
}

#[test]
fn namespaces_must_exist_and_accept_content() {
    let sandbox = start();
    let c = client(&sandbox);
    let missing = api_error(
        Api::<ConfigMap>::namespaced(&c, "missing").create(&config_map("c", json!({})), &PostParams::default()),
    );
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));
    assert_eq!(missing.message, "namespaces \"missing\" not found");

    create_namespace(&c, "doomed");
    let namespaces = Api::<Namespace>::cluster(&c);
    let Deleted::Object(terminating) = namespaces.delete("doomed", &DeleteParams::default()).unwrap() else {
        panic!("a namespace with finalizers is kept");
    };
    assert_eq!(terminating.status.unwrap().phase.as_deref(), Some("Terminating"));
    assert!(terminating.metadata.deletion_timestamp.is_some());
    let refused = api_error(
        Api::<ConfigMap>::namespaced(&c, "doomed").create(&config_map("c", json!({})), &PostParams::default()),
    );
    assert_eq!((refused.code, refused.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        refused.message,
        "configmaps \"c\" is forbidden: unable to create new content in namespace doomed because it is being terminated"
    );
    assert!(kcm::client::Error::Api(Box::new(refused)).has_status_cause("NamespaceTerminating"));
}

#[test]
fn immutable_fields_are_refused() {
    let sandbox = start();
    let c = client(&sandbox);
    pod_namespace(&c, "apps");

    // apps/v1 selectors never change.
    let deployments = Api::<Deployment>::namespaced(&c, "apps");
    deployments.create(&deployment("web", "nginx:1.27"), &PostParams::default()).unwrap();
    let moved = Patch::Merge(
        json!({"spec": {"selector": {"matchLabels": {"app": "other"}}, "template": {"metadata": {"labels": {"app": "other"}}}}}),
    );
    let e = api_error(deployments.patch("web", &moved, &PostParams::default()));
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        e.message,
        "Deployment.apps \"web\" is invalid: spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"other\"}}: field is immutable"
    );
    assert_eq!(e.causes(), ["spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"other\"}}: field is immutable"]);

    // A pod's node is set once, by the binding; updates may not move it.
    let pods = Api::<Pod>::namespaced(&c, "apps");
    pods.create(&pod("p", json!({})), &PostParams::default()).unwrap();
    bind(&c, "apps", "p", "node-1").unwrap();
    let e = api_error(pods.patch("p", &Patch::Merge(json!({"spec": {"nodeName": "node-2"}})), &PostParams::default()));
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(
        e.message.starts_with("Pod \"p\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"),
        "{}",
        e.message
    );
    // The image is one of the fields that may change.
    let image = Patch::Strategic(json!({"spec": {"containers": [{"name": "app", "image": "nginx:1.28"}]}}));
    assert_eq!(
        pods.patch("p", &image, &PostParams::default()).unwrap().spec.unwrap().containers[0].image.as_deref(),
        Some("nginx:1.28")
    );

    // A Job's selector and template are fixed.
    let jobs = Api::<Job>::namespaced(&c, "apps");
    let job: Job = from(json!({"metadata": {"name": "once"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}}}}));
    let job = value(&jobs.create(&job, &PostParams::default()).unwrap());
    assert!(job["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"].is_string(), "{job}");
    let e = api_error(jobs.patch(
        "once",
        &Patch::Merge(json!({"spec": {"selector": {"matchLabels": {"x": "y"}}}})),
        &PostParams::default(),
    ));
    assert_eq!(e.code, 422);
    // `ValidateJob` (the selector no longer generated, and missing the template), then
    // `ValidateJobSpecUpdate` (the same spec rules, shown once, then the immutable selector), as
    // kube-apiserver (conformance: jobs).
    assert!(
        e.message.starts_with("Job.batch \"once\" is invalid: [spec.selector: Invalid value: {\"matchLabels\":{")
            && e.message.contains("`selector` not auto-generated, spec.template.metadata.labels: Invalid value: ")
            && e.message.contains(", spec.selector: Invalid value: {\"matchLabels\":{")
            && e.message.ends_with("field is immutable]"),
        "{}",
        e.message
    );
    let template = Patch::Strategic(
        json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:1.37"}]}}}}),
    );
    let e = api_error(jobs.patch("once", &template, &PostParams::default()));
    assert_eq!(e.code, 422);
    assert!(e.message.starts_with("Job.batch \"once\" is invalid: spec.template: Invalid value: "), "{}", e.message);
    assert!(e.message.ends_with("field is immutable"), "{}", e.message);

    // A StatefulSet may change its replicas, template and a few more; not its service name.
    let sets = Api::<k8s_openapi::api::apps::v1::StatefulSet>::namespaced(&c, "apps");
    let set = json!({"metadata": {"name": "db"}, "spec": {"serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
        "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "db", "image": "postgres:17"}]}}}});
    sets.create(&from(set), &PostParams::default()).unwrap();
    assert!(
        sets.patch("db", &Patch::Merge(json!({"spec": {"replicas": 3, "minReadySeconds": 5}})), &PostParams::default())
            .is_ok()
    );
    let e =
        api_error(sets.patch("db", &Patch::Merge(json!({"spec": {"serviceName": "other"}})), &PostParams::default()));
    assert_eq!(
        e.message,
        "StatefulSet.apps \"db\" is invalid: spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
    );

    // A Service keeps its cluster IP.
    let services = Api::<Service>::namespaced(&c, "apps");
    let svc: Service =
        from(json!({"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}], "selector": {"app": "web"}}}));
    let svc = services.create(&svc, &PostParams::default()).unwrap();
    let ip = svc.spec.as_ref().unwrap().cluster_ip.clone().unwrap();
    assert!(ip.starts_with("10.96."), "{ip}");
    let e = api_error(services.patch(
        "web",
        &Patch::Merge(json!({"spec": {"clusterIP": "10.96.200.200"}})),
        &PostParams::default(),
    ));
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        e.message,
        "Service \"web\" is invalid: spec.clusterIPs[0]: Invalid value: [\"10.96.200.200\"]: may not change once set"
    );
    // Leaving the allocated IP out keeps it.
    let mut unchanged = value(&svc);
    unchanged["spec"].as_object_mut().unwrap().remove("clusterIP");
    unchanged["spec"].as_object_mut().unwrap().remove("clusterIPs");
    unchanged["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    let kept = services.replace("web", &from(unchanged), &PostParams::default()).unwrap();
    assert_eq!(kept.spec.unwrap().cluster_ip.as_deref(), Some(ip.as_str()));
}

// ---------------------------------------------------------------------------------------------
// Writes
// ---------------------------------------------------------------------------------------------

#[test]
fn creates_conflict_and_updates_are_optimistic() {
    let sandbox = start();
    let c = client(&sandbox);
    let configmaps = Api::<ConfigMap>::namespaced(&c, "default");
    let created = configmaps.create(&config_map("c", json!({})), &PostParams::default()).unwrap();
    let e = api_error(configmaps.create(&config_map("c", json!({})), &PostParams::default()));
    assert_eq!(
        (e.code, e.reason.as_str(), e.message.as_str()),
        (409, "AlreadyExists", "configmaps \"c\" already exists")
    );

    let mut first = created.clone();
    first.data = Some([("key".to_string(), "two".to_string())].into());
    let updated = configmaps.replace("c", &first, &PostParams::default()).unwrap();
    assert!(rv_of(&value(&updated)) > rv_of(&value(&created)));

    // The same (now stale) resourceVersion again.
    let mut stale = created.clone();
    stale.data = Some([("key".to_string(), "three".to_string())].into());
    let e = api_error(configmaps.replace("c", &stale, &PostParams::default()));
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on configmaps \"c\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let details = e.status.details.unwrap();
    assert_eq!((details.name.as_deref(), details.kind.as_deref()), (Some("c"), Some("configmaps")));

    // Without a resourceVersion the update is unconditional.
    stale.metadata.resource_version = None;
    let forced = configmaps.replace("c", &stale, &PostParams::default()).unwrap();
    assert_eq!(forced.data.unwrap()["key"], "three");

    // Writing the object back unchanged is a no-op: same resourceVersion.
    let current = configmaps.get("c").unwrap();
    let again = configmaps.replace("c", &current, &PostParams::default()).unwrap();
    assert_eq!(again.metadata.resource_version, current.metadata.resource_version);
    let patched =
        configmaps.patch("c", &Patch::Merge(json!({"data": {"key": "three"}})), &PostParams::default()).unwrap();
    assert_eq!(patched.metadata.resource_version, current.metadata.resource_version);

    let e = api_error(configmaps.replace(
        "missing",
        &from(json!({"metadata": {"name": "missing"}})),
        &PostParams::default(),
    ));
    assert_eq!((e.code, e.message.as_str()), (404, "configmaps \"missing\" not found"));
}

#[test]
fn status_is_written_apart_from_the_spec() {
    let sandbox = start();
    let c = client(&sandbox);
    let deployments = Api::<Deployment>::namespaced(&c, "default");
    let created = value(&deployments.create(&deployment("web", "nginx:1.27"), &PostParams::default()).unwrap());
    assert!(created.get("status").is_none_or(|s| s == &json!({})), "no status on create: {created}");

    // A main-resource update cannot write status...
    let mut both = created.clone();
    both["spec"]["replicas"] = json!(2);
    both["status"] = json!({"replicas": 9});
    let after = value(&deployments.replace("web", &from(both), &PostParams::default()).unwrap());
    assert_eq!(after["spec"]["replicas"], 2);
    assert!(after["status"]["replicas"].is_null(), "{after}");

    // ...and a status update cannot write the spec.
    let mut both = after.clone();
    both["spec"]["replicas"] = json!(5);
    both["metadata"]["labels"]["sneaky"] = json!("yes");
    both["metadata"]["annotations"] = json!({"deployment.kubernetes.io/revision": "1"});
    both["status"] = json!({"replicas": 2, "observedGeneration": 2});
    let after = value(&deployments.replace_status("web", &from(both), &PostParams::default()).unwrap());
    assert_eq!(after["spec"]["replicas"], 2);
    assert_eq!(after["status"]["replicas"], 2);
    assert!(after["metadata"]["labels"]["sneaky"].is_null(), "status updates keep the labels: {after}");
    // deploymentStatusStrategy resets only spec and labels: the controller's revision annotation
    // is written through the status subresource.
    assert_eq!(after["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "1", "{after}");
    assert_eq!(after["metadata"]["generation"], 2);
    let status: Deployment = deployments.get_subresource("status", "web").unwrap();
    assert_eq!(status.status.unwrap().replicas, Some(2));

    let patched = deployments
        .patch_status("web", &Patch::Merge(json!({"status": {"replicas": 3}})), &PostParams::default())
        .unwrap();
    assert_eq!(patched.status.unwrap().replicas, Some(3));
}

#[test]
fn patches_of_every_type() {
    let sandbox = start();
    let c = client(&sandbox);
    let deployments = Api::<Deployment>::namespaced(&c, "default");
    let created = deployments.create(&deployment("web", "nginx:1.27"), &PostParams::default()).unwrap();
    let images = |d: &Deployment| -> Vec<(String, String)> {
        let spec = d.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
        spec.containers.iter().map(|c| (c.name.clone(), c.image.clone().unwrap_or_default())).collect()
    };

    // Strategic: containers merge by name.
    let strategic = Patch::Strategic(
        json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:1.28"}]}}}}),
    );
    let after = deployments.patch("web", &strategic, &PostParams::default()).unwrap();
    assert_eq!(images(&after), [("app".into(), "nginx:1.28".into()), ("sidecar".into(), "busybox:1.36".into())]);

    // JSON patch.
    let json_patch = Patch::Json(
        json!([{"op": "replace", "path": "/spec/replicas", "value": 4}, {"op": "add", "path": "/metadata/labels/x", "value": "y"}]),
    );
    let after = deployments.patch("web", &json_patch, &PostParams::default()).unwrap();
    assert_eq!(after.spec.as_ref().unwrap().replicas, Some(4));
    assert_eq!(after.metadata.labels.as_ref().unwrap()["x"], "y");
    let e = api_error(deployments.patch(
        "web",
        &Patch::Json(json!([{"op": "test", "path": "/spec/replicas", "value": 1}])),
        &PostParams::default(),
    ));
    assert_eq!(e.code, 422, "{}", e.message);

    // Merge: lists are replaced whole.
    let merge =
        Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:1.29"}]}}}}));
    let after = deployments.patch("web", &merge, &PostParams::default()).unwrap();
    assert_eq!(images(&after), [("app".into(), "nginx:1.29".into())]);

    // A resourceVersion in the patch is a precondition.
    let stale = created.metadata.resource_version.clone().unwrap();
    let e = api_error(deployments.patch(
        "web",
        &Patch::Merge(json!({"metadata": {"resourceVersion": stale}, "spec": {"replicas": 1}})),
        &PostParams::default(),
    ));
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on deployments.apps \"web\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let current = after.metadata.resource_version.clone().unwrap();
    let ok = deployments.patch(
        "web",
        &Patch::Merge(json!({"metadata": {"resourceVersion": current}, "spec": {"replicas": 1}})),
        &PostParams::default(),
    );
    assert_eq!(ok.unwrap().spec.unwrap().replicas, Some(1));

    let e = api_error(deployments.patch("missing", &strategic, &PostParams::default()));
    assert_eq!((e.code, e.message.as_str()), (404, "deployments.apps \"missing\" not found"));
    let e = raw(
        &sandbox,
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/web",
        &[("Content-Type", "application/apply-patch+yaml")],
        b"{}",
    );
    assert_eq!(e.code, 422, "an apply patch needs a field manager: {}", e.text());
    let apply = Patch::Apply(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 3}}));
    let params = PostParams { field_manager: Some("tester".into()), force: true, ..PostParams::default() };
    let applied = deployments.patch("web", &apply, &params).expect("applied");
    assert_eq!(applied.spec.unwrap().replicas, Some(3));
}

#[test]
fn dry_run_writes_nothing_and_strict_validation_refuses_unknown_fields() {
    let sandbox = start();
    let c = client(&sandbox);
    let configmaps = Api::<ConfigMap>::namespaced(&c, "default");
    let dry = PostParams { dry_run: true, ..PostParams::default() };
    let before = sandbox.store().revision();
    let answer = value(&configmaps.create(&config_map("dry", json!({})), &dry).unwrap());
    assert_eq!(answer["metadata"]["name"], "dry");
    assert!(answer["metadata"]["uid"].is_string());
    assert!(configmaps.get_opt("dry").unwrap().is_none());

    let real = configmaps.create(&config_map("real", json!({})), &PostParams::default()).unwrap();
    let mut changed = real.clone();
    changed.data = Some([("key".to_string(), "changed".to_string())].into());
    assert_eq!(configmaps.replace("real", &changed, &dry).unwrap().data.unwrap()["key"], "changed");
    assert_eq!(
        configmaps.patch("real", &Patch::Merge(json!({"data": {"key": "p"}})), &dry).unwrap().data.unwrap()["key"],
        "p"
    );
    configmaps.delete("real", &DeleteParams { dry_run: true, ..DeleteParams::default() }).unwrap();
    assert_eq!(configmaps.get("real").unwrap(), real);
    assert_eq!(sandbox.store().revision(), before + 1, "only the real create was written");

    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "strict", "colour": "red"}, "data": {"a": "b"}, "extra": 1});
    let bytes = serde_json::to_vec(&body).unwrap();
    let json_type = [("Content-Type", "application/json")];
    let strict =
        raw(&sandbox, "POST", "/api/v1/namespaces/default/configmaps?fieldValidation=Strict", &json_type, &bytes);
    assert_eq!(strict.code, 400, "{}", strict.text());
    let status = strict.json();
    assert_eq!(status["reason"], "BadRequest");
    assert_eq!(
        status["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"extra\", unknown field \"metadata.colour\""
    );
    // A patch's strict errors are reported bare.
    let patch = raw(
        &sandbox,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/real?fieldValidation=Strict",
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"extra": 1}"#,
    );
    assert_eq!(
        (patch.code, patch.json()["message"].as_str()),
        (400, Some("strict decoding error: unknown field \"extra\""))
    );
    // The default drops them (with a warning) and stores the rest.
    let lax = raw(&sandbox, "POST", "/api/v1/namespaces/default/configmaps", &json_type, &bytes);
    assert_eq!(lax.code, 201, "{}", lax.text());
    assert!(lax.json().get("extra").is_none());
    let warnings: Vec<&str> =
        lax.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case("Warning")).map(|(_, v)| v.as_str()).collect();
    assert_eq!(warnings, [r#"299 - "unknown field \"extra\"""#, r#"299 - "unknown field \"metadata.colour\"""#]);
    let e = raw(&sandbox, "POST", "/api/v1/namespaces/default/configmaps?dryRun=Some", &json_type, &bytes);
    assert_eq!(e.code, 400);
}

// ---------------------------------------------------------------------------------------------
// Deletion
// ---------------------------------------------------------------------------------------------

#[test]
fn delete_preconditions_are_checked() {
    let sandbox = start();
    let c = client(&sandbox);
    let configmaps = Api::<ConfigMap>::namespaced(&c, "default");
    let created = configmaps.create(&config_map("c", json!({})), &PostParams::default()).unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let rv = created.metadata.resource_version.clone().unwrap();
    let with = |uid: Option<&str>, rv: Option<&str>| DeleteParams {
        preconditions: Some(Preconditions { uid: uid.map(str::to_string), resource_version: rv.map(str::to_string) }),
        ..DeleteParams::default()
    };
    let e = api_error(configmaps.delete("c", &with(Some("wrong-uid"), None)));
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        format!(
            "Operation cannot be fulfilled on ConfigMap \"c\": the UID in the precondition (wrong-uid) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )
    );
    let e = api_error(configmaps.delete("c", &with(None, Some("1"))));
    assert_eq!(
        e.message,
        format!(
            "Operation cannot be fulfilled on ConfigMap \"c\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ({rv}). The object might have been modified"
        )
    );
    let Deleted::Gone(status) = configmaps.delete("c", &with(Some(&uid), Some(&rv))).unwrap() else {
        panic!("configmaps answer a delete with a Status")
    };
    assert_eq!(status.status.as_deref(), Some("Success"));
    let details = status.details.unwrap();
    assert_eq!(
        (details.name.as_deref(), details.kind.as_deref(), details.uid.as_deref()),
        (Some("c"), Some("configmaps"), Some(uid.as_str()))
    );
    let e = api_error(configmaps.delete("c", &DeleteParams::default()));
    assert_eq!((e.code, e.message.as_str()), (404, "configmaps \"c\" not found"));
}

#[test]
fn finalizers_hold_a_deleted_object_until_removed() {
    let sandbox = start();
    let c = client(&sandbox);
    let configmaps = Api::<ConfigMap>::namespaced(&c, "default");
    let created = configmaps
        .create(
            &from(json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}})),
            &PostParams::default(),
        )
        .unwrap();
    let watch = configmaps
        .watch_channel(
            &WatchParams { resource_version: created.metadata.resource_version.clone(), ..WatchParams::default() },
            16,
        )
        .unwrap();

    let Deleted::Object(marked) = configmaps.delete("held", &DeleteParams::default()).unwrap() else {
        panic!("an object with finalizers is kept");
    };
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(marked.metadata.deletion_grace_period_seconds, Some(0));
    assert!(configmaps.get("held").unwrap().metadata.deletion_timestamp.is_some());
    assert_eq!(next_change(&watch), ("MODIFIED", "held".into()));

    // Finalizers cannot be added any more.
    let e = api_error(configmaps.patch(
        "held",
        &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}})),
        &PostParams::default(),
    ));
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        "ConfigMap \"held\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"example.com/more\"}"
    );

    configmaps.patch("held", &Patch::Merge(json!({"metadata": {"finalizers": null}})), &PostParams::default()).unwrap();
    assert!(configmaps.get_opt("held").unwrap().is_none());
    assert_eq!(next_change(&watch), ("DELETED", "held".into()));
}

#[test]
fn propagation_policies_become_finalizers() {
    let sandbox = start();
    let c = client(&sandbox);
    let deployments = Api::<Deployment>::namespaced(&c, "default");
    let policy = |p| DeleteParams { propagation_policy: Some(p), ..DeleteParams::default() };
    for (name, p, finalizer) in [
        ("orphaned", PropagationPolicy::Orphan, "orphan"),
        ("foreground", PropagationPolicy::Foreground, "foregroundDeletion"),
    ] {
        deployments.create(&deployment(name, "nginx:1.27"), &PostParams::default()).unwrap();
        let Deleted::Object(kept) = deployments.delete(name, &policy(p)).unwrap() else {
            panic!("{name}: kept for the garbage collector");
        };
        assert_eq!(kept.metadata.finalizers.as_deref(), Some(&[finalizer.to_string()][..]));
        assert!(kept.metadata.deletion_timestamp.is_some());
        assert_eq!(kept.metadata.generation, Some(2), "marking an object deleted bumps its generation");
    }
    deployments.create(&deployment("background", "nginx:1.27"), &PostParams::default()).unwrap();
    assert!(matches!(
        deployments.delete("background", &policy(PropagationPolicy::Background)).unwrap(),
        Deleted::Gone(_)
    ));
    assert!(deployments.get_opt("background").unwrap().is_none());
    // Without a policy, a Deployment's dependents are deleted in the background.
    deployments.create(&deployment("default-policy", "nginx:1.27"), &PostParams::default()).unwrap();
    assert!(matches!(deployments.delete("default-policy", &DeleteParams::default()).unwrap(), Deleted::Gone(_)));
}

#[test]
fn bound_pods_terminate_gracefully_and_unbound_ones_go_at_once() {
    let sandbox = start();
    let c = client(&sandbox);
    pod_namespace(&c, "work");
    let pods = Api::<Pod>::namespaced(&c, "work");
    pods.create(&pod("bound", json!({})), &PostParams::default()).unwrap();
    bind(&c, "work", "bound", "node-1").unwrap();
    let Deleted::Object(terminating) = pods.delete("bound", &DeleteParams::default()).unwrap() else {
        panic!("a bound pod waits for its kubelet");
    };
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    assert!(terminating.metadata.deletion_timestamp.is_some());
    // A second delete without a shorter grace period changes nothing.
    let Deleted::Object(still) = pods.delete("bound", &DeleteParams::default()).unwrap() else { panic!("still there") };
    assert_eq!(still.metadata.deletion_grace_period_seconds, Some(30));
    assert!(pods.get_opt("bound").unwrap().is_some());
    // What a kubelet does once the containers are gone.
    let Deleted::Object(last) =
        pods.delete("bound", &DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() }).unwrap()
    else {
        panic!("pods answer with the deleted object");
    };
    assert_eq!(last.metadata.name.as_deref(), Some("bound"));
    assert!(pods.get_opt("bound").unwrap().is_none());

    pods.create(&pod("unbound", json!({})), &PostParams::default()).unwrap();
    pods.delete("unbound", &DeleteParams::default()).unwrap();
    assert!(pods.get_opt("unbound").unwrap().is_none());
}

#[test]
fn delete_collection_honours_the_label_selector() {
    let sandbox = start();
    let c = client(&sandbox);
    let configmaps = Api::<ConfigMap>::namespaced(&c, "default");
    for (name, app) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
        configmaps.create(&config_map(name, json!({"app": app})), &PostParams::default()).unwrap();
    }
    let selector = ListParams { label_selector: Some("app=a".into()), ..ListParams::default() };
    configmaps.delete_collection(&selector, &DeleteParams::default()).unwrap();
    let left = configmaps.list(&ListParams::default()).unwrap().items;
    assert!(
        names(&left).contains(&"b1".to_string()) && !names(&left).iter().any(|n| n.starts_with('a')),
        "{:?}",
        names(&left)
    );
}

#[test]
fn delete_options_are_validated() {
    let sandbox = start();
    let c = client(&sandbox);
    let configmaps = Api::<ConfigMap>::namespaced(&c, "default");
    configmaps.create(&config_map("c", json!({})), &PostParams::default()).unwrap();
    let json_body = [("Content-Type", "application/json")];
    let path = "/api/v1/namespaces/default/configmaps/c";
    let bogus = raw(&sandbox, "DELETE", &format!("{path}?propagationPolicy=Bogus"), &[], b"");
    assert_eq!(bogus.code, 422, "{}", bogus.text());
    assert_eq!(
        bogus.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Bogus\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"",
            "reason": "Invalid", "details": {"group": "meta.k8s.io", "kind": "DeleteOptions", "causes": [{"reason": "FieldValueNotSupported",
                "message": "Unsupported value: \"Bogus\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"",
                "field": "propagationPolicy"}]}, "code": 422})
    );
    let both =
        raw(&sandbox, "DELETE", path, &json_body, br#"{"orphanDependents": true, "propagationPolicy": "Foreground"}"#);
    assert_eq!(both.code, 422);
    assert_eq!(
        both.json()["message"],
        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"Foreground\": orphanDependents and deletionPropagation cannot be both set"
    );
    assert!(configmaps.get_opt("c").unwrap().is_some(), "refused deletes delete nothing");
    let orphan = raw(&sandbox, "DELETE", path, &json_body, br#"{"orphanDependents": false}"#);
    assert_eq!(orphan.code, 200, "{}", orphan.text());
}

#[test]
fn namespaces_have_no_deletecollection() {
    let sandbox = start();
    let c = client(&sandbox);
    create_namespace(&c, "keep");
    let answer = raw(&sandbox, "DELETE", "/api/v1/namespaces", &[], b"");
    assert_eq!(answer.code, 405, "{}", answer.text());
    assert_eq!(answer.json()["reason"], "MethodNotAllowed");
    assert!(Api::<Namespace>::cluster(&c).get_opt("keep").unwrap().is_some());
    let core = raw(&sandbox, "GET", "/api/v1", &[], b"").json();
    let resources = core["resources"].as_array().unwrap();
    let verbs_of = |name: &str| resources.iter().find(|r| r["name"] == name).unwrap()["verbs"].clone();
    assert_eq!(verbs_of("namespaces"), json!(["create", "delete", "get", "list", "patch", "update", "watch"]));
    assert!(verbs_of("configmaps").as_array().unwrap().contains(&json!("deletecollection")));
}

#[test]
fn namespaces_terminate_until_finalized() {
    let sandbox = start();
    let c = client(&sandbox);
    create_namespace(&c, "gone");
    let namespaces = Api::<Namespace>::cluster(&c);
    let created = namespaces.get("gone").unwrap();
    assert_eq!(created.spec.unwrap().finalizers, Some(vec!["kubernetes".to_string()]));
    assert_eq!(created.metadata.labels.unwrap()["kubernetes.io/metadata.name"], "gone");
    namespaces.delete("gone", &DeleteParams::default()).unwrap();
    let terminating = namespaces.get("gone").unwrap();
    assert_eq!(terminating.status.as_ref().unwrap().phase.as_deref(), Some("Terminating"));
    // While the content is being purged, a second delete answers with the namespace unchanged.
    match namespaces.delete("gone", &DeleteParams::default()).unwrap() {
        Deleted::Object(again) => assert_eq!(again, terminating),
        other => panic!("expected the namespace, got {other:?}"),
    }
    // What the namespace controller does once the content is gone.
    let mut finalized = value(&terminating);
    finalized["spec"]["finalizers"] = json!([]);
    let _: Namespace = namespaces.replace_subresource("finalize", "gone", &finalized, &PostParams::default()).unwrap();
    assert!(namespaces.get_opt("gone").unwrap().is_none());
}

#[test]
fn finalized_namespaces_wait_for_their_metadata_finalizers() {
    let sandbox = start();
    let c = client(&sandbox);
    let namespaces = Api::<Namespace>::cluster(&c);
    let held: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}})).unwrap();
    namespaces.create(&held, &PostParams::default()).unwrap();
    namespaces.delete("held", &DeleteParams::default()).unwrap();
    let mut finalized = value(&namespaces.get("held").unwrap());
    finalized["spec"]["finalizers"] = json!([]);
    let after: Namespace =
        namespaces.replace_subresource("finalize", "held", &finalized, &PostParams::default()).unwrap();
    assert_eq!(after.spec.unwrap().finalizers.unwrap_or_default(), Vec::<String>::new());
    // spec.finalizers are done; metadata.finalizers still hold it, and a delete now goes through.
    namespaces.delete("held", &DeleteParams::default()).unwrap();
    let mut released = namespaces.get("held").unwrap();
    released.metadata.finalizers = None;
    namespaces.replace("held", &released, &PostParams::default()).unwrap();
    assert!(namespaces.get_opt("held").unwrap().is_none());
}

// ---------------------------------------------------------------------------------------------
// Reads
// ---------------------------------------------------------------------------------------------

#[test]
fn lists_filter_by_label_and_field_selectors() {
    let sandbox = start();
    let c = client(&sandbox);
    let configmaps = Api::<ConfigMap>::namespaced(&c, "default");
    for (name, labels) in [
        ("web", json!({"app": "web", "tier": "front"})),
        ("api", json!({"app": "api", "tier": "back"})),
        ("db", json!({"app": "db"})),
        ("plain", json!({})),
    ] {
        configmaps.create(&config_map(name, labels), &PostParams::default()).unwrap();
    }
    let by_label = |selector: &str| {
        let mut found = names(
            &configmaps
                .list(&ListParams { label_selector: Some(selector.into()), ..ListParams::default() })
                .unwrap()
                .items,
        );
        found.sort();
        found
    };
    assert_eq!(by_label("app=web"), ["web"]);
    assert_eq!(by_label("app==api"), ["api"]);
    assert_eq!(by_label("app!=web"), ["api", "db", "plain"]);
    assert_eq!(by_label("app in (web,db)"), ["db", "web"]);
    assert_eq!(by_label("app notin (web,db)"), ["api", "plain"]);
    assert_eq!(by_label("tier"), ["api", "web"]);
    assert_eq!(by_label("!tier"), ["db", "plain"]);
    assert_eq!(by_label("app,tier=back"), ["api"]);
    let e =
        api_error(configmaps.list(&ListParams { label_selector: Some("app in web".into()), ..ListParams::default() }));
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));

    let by_field = |api: &Api<ConfigMap>, selector: &str| {
        names(&api.list(&ListParams { field_selector: Some(selector.into()), ..ListParams::default() }).unwrap().items)
    };
    assert_eq!(by_field(&configmaps, "metadata.name=db"), ["db"]);
    assert_eq!(by_field(&configmaps, "metadata.name!=db").len(), 3);
    assert!(by_field(&Api::all(&c), "metadata.namespace=default").contains(&"web".to_string()));
    assert!(by_field(&Api::all(&c), "metadata.namespace=kube-system").iter().all(|n| n != "web"));
    let e = api_error(
        configmaps.list(&ListParams { field_selector: Some("data.key=one".into()), ..ListParams::default() }),
    );
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    assert_eq!(e.message, "\"data.key\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"");

    pod_namespace(&c, "work");
    let pods = Api::<Pod>::namespaced(&c, "work");
    for name in ["on-node", "pending"] {
        pods.create(&pod(name, json!({})), &PostParams::default()).unwrap();
    }
    bind(&c, "work", "on-node", "node-1").unwrap();
    pods.patch_status("on-node", &Patch::Merge(json!({"status": {"phase": "Running"}})), &PostParams::default())
        .unwrap();
    let pod_names = |selector: &str| {
        names(&pods.list(&ListParams { field_selector: Some(selector.into()), ..ListParams::default() }).unwrap().items)
    };
    assert_eq!(pod_names("spec.nodeName=node-1"), ["on-node"]);
    assert_eq!(pod_names("spec.nodeName="), ["pending"]);
    assert_eq!(pod_names("status.phase=Running"), ["on-node"]);
    assert_eq!(pod_names("status.phase!=Running,metadata.name=pending"), ["pending"]);

    let secrets = Api::<Secret>::namespaced(&c, "default");
    secrets.create(&from(json!({"metadata": {"name": "tls"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}})), &PostParams::default()).unwrap();
    secrets
        .create(&from(json!({"metadata": {"name": "opaque"}, "stringData": {"a": "b"}})), &PostParams::default())
        .unwrap();
    let typed = secrets
        .list(&ListParams { field_selector: Some("type=kubernetes.io/tls".into()), ..ListParams::default() })
        .unwrap();
    assert_eq!(names(&typed.items), ["tls"]);
}

#[test]
fn pages_are_consistent_snapshots() {
    let sandbox = start();
    let c = client(&sandbox);
    create_namespace(&c, "paged");
    let configmaps = Api::<ConfigMap>::namespaced(&c, "paged");
    for i in 1..=5 {
        configmaps.create(&config_map(&format!("cm-{i}"), json!({})), &PostParams::default()).unwrap();
    }
    let first = configmaps.list(&ListParams { limit: Some(2), ..ListParams::default() }).unwrap();
    assert_eq!(names(&first.items), ["cm-1", "cm-2"]);
    assert_eq!(first.metadata.remaining_item_count, Some(3));
    let snapshot = first.metadata.resource_version.clone().unwrap();
    let token = first.metadata.continue_.clone().expect("a continue token");

    // Writes between pages do not show in later pages.
    configmaps.delete("cm-4", &DeleteParams::default()).unwrap();
    configmaps.create(&config_map("cm-6", json!({})), &PostParams::default()).unwrap();
    configmaps.patch("cm-3", &Patch::Merge(json!({"data": {"key": "later"}})), &PostParams::default()).unwrap();

    let second =
        configmaps.list(&ListParams { limit: Some(2), continue_token: Some(token), ..ListParams::default() }).unwrap();
    assert_eq!(names(&second.items), ["cm-3", "cm-4"]);
    assert_eq!(second.items[0].data.as_ref().unwrap()["key"], "one");
    assert_eq!(second.metadata.resource_version.as_deref(), Some(snapshot.as_str()));
    assert_eq!(second.metadata.remaining_item_count, Some(1));
    let third = configmaps
        .list(&ListParams {
            limit: Some(2),
            continue_token: second.metadata.continue_.clone(),
            ..ListParams::default()
        })
        .unwrap();
    assert_eq!(names(&third.items), ["cm-5"]);
    assert!(third.metadata.continue_.as_deref().unwrap_or_default().is_empty());
    assert!(third.metadata.remaining_item_count.is_none());

    // A fresh list sees the writes; with a selector there is no remaining count.
    assert_eq!(
        names(&configmaps.list_all(&ListParams { limit: Some(2), ..ListParams::default() }).unwrap().0),
        ["cm-1", "cm-2", "cm-3", "cm-5", "cm-6"]
    );
    let filtered = configmaps
        .list(&ListParams {
            limit: Some(1),
            field_selector: Some("metadata.name!=cm-1".into()),
            ..ListParams::default()
        })
        .unwrap();
    assert_eq!(names(&filtered.items), ["cm-2"]);
    assert!(filtered.metadata.continue_.is_some());
    assert!(filtered.metadata.remaining_item_count.is_none());
    let e = api_error(configmaps.list(&ListParams { continue_token: Some("garbage".into()), ..ListParams::default() }));
    assert_eq!(e.code, 400);
}

#[test]
fn an_expired_continue_token_offers_an_inconsistent_continuation() {
    let sandbox = start();
    let c = client(&sandbox);
    create_namespace(&c, "paged");
    let configmaps = Api::<ConfigMap>::namespaced(&c, "paged");
    for i in 1..=4 {
        configmaps.create(&config_map(&format!("cm-{i}"), json!({})), &PostParams::default()).unwrap();
    }
    let first = configmaps.list(&ListParams { limit: Some(2), ..ListParams::default() }).unwrap();
    let token = first.metadata.continue_.clone().expect("a continue token");
    configmaps.delete("cm-3", &DeleteParams::default()).unwrap();
    configmaps.create(&config_map("cm-5", json!({})), &PostParams::default()).unwrap();
    sandbox.compact();

    let e = api_error(configmaps.list(&ListParams {
        limit: Some(2),
        continue_token: Some(token),
        ..ListParams::default()
    }));
    assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
    assert_eq!(
        e.message,
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
    );
    let fresh = e.status.metadata.continue_.clone().expect("a token continuing at the latest revision");
    // It continues after cm-2, at the current state: cm-3 is gone, cm-5 shows up.
    let rest =
        configmaps.list(&ListParams { limit: Some(10), continue_token: Some(fresh), ..ListParams::default() }).unwrap();
    assert_eq!(names(&rest.items), ["cm-4", "cm-5"]);
    assert_eq!(rest.metadata.resource_version, Some(sandbox.store().revision().to_string()));
}

#[test]
fn lists_honour_resource_version_and_match() {
    let sandbox = start();
    let c = client(&sandbox);
    let configmaps = Api::<ConfigMap>::namespaced(&c, "default");
    let created = configmaps.create(&config_map("c", json!({})), &PostParams::default()).unwrap();
    let old = created.metadata.resource_version.clone().unwrap();
    configmaps.patch("c", &Patch::Merge(json!({"data": {"key": "two"}})), &PostParams::default()).unwrap();
    let at = |rv: &str, matching: Option<&str>| {
        configmaps.list(&ListParams {
            resource_version: Some(rv.into()),
            resource_version_match: matching.map(str::to_string),
            ..ListParams::default()
        })
    };
    let exact = at(&old, Some("Exact")).unwrap();
    assert_eq!(exact.metadata.resource_version.as_deref(), Some(old.as_str()));
    assert_eq!(exact.items[0].data.as_ref().unwrap()["key"], "one");
    let newer = at(&old, Some("NotOlderThan")).unwrap();
    assert_eq!(newer.items[0].data.as_ref().unwrap()["key"], "two");
    assert!(newer.metadata.resource_version.unwrap().parse::<u64>().unwrap() > old.parse().unwrap());
    assert_eq!(at("0", None).unwrap().items[0].data.as_ref().unwrap()["key"], "two");
    // A paged list at a resourceVersion without a match is exact (etcd's legacy case); at "0" it
    // comes from the watch cache, which ignores the limit.
    configmaps.create(&config_map("d", json!({})), &PostParams::default()).unwrap();
    let legacy = configmaps
        .list(&ListParams { resource_version: Some(old.clone()), limit: Some(1), ..ListParams::default() })
        .unwrap();
    assert_eq!(legacy.metadata.resource_version.as_deref(), Some(old.as_str()));
    assert_eq!(legacy.items[0].data.as_ref().unwrap()["key"], "one");
    let cached = configmaps
        .list(&ListParams { resource_version: Some("0".into()), limit: Some(1), ..ListParams::default() })
        .unwrap();
    assert_eq!(names(&cached.items), ["c", "d"]);
    assert!(cached.metadata.continue_.is_none());
    assert_eq!(at(&old, None).unwrap().items[0].data.as_ref().unwrap()["key"], "two");

    let future = (sandbox.store().revision() + 1000).to_string();
    let e = api_error(at(&future, None));
    assert_eq!((e.code, e.reason.as_str()), (504, "Timeout"));
    assert!(e.message.starts_with(&format!("Too large resource version: {future}, current: ")), "{}", e.message);
    assert_eq!(e.status.details.unwrap().causes.unwrap()[0].reason.as_deref(), Some("ResourceVersionTooLarge"));

    let e = api_error(
        configmaps.list(&ListParams { resource_version_match: Some("Exact".into()), ..ListParams::default() }),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        e.message,
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
    );
    let e = api_error(at(&old, Some("Newest")));
    assert_eq!(
        e.message,
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Unsupported value: \"Newest\": supported values: \"Exact\", \"NotOlderThan\", \"\""
    );

    sandbox.compact();
    let e = api_error(at(&old, Some("Exact")));
    assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
    assert!(e.message.starts_with(&format!("too old resource version: {old} (")), "{}", e.message);
}

// ---------------------------------------------------------------------------------------------
// Watch
// ---------------------------------------------------------------------------------------------

#[test]
fn watches_follow_selectors_in_and_out() {
    let sandbox = start();
    let c = client(&sandbox);
    let configmaps = Api::<ConfigMap>::namespaced(&c, "default");
    let rv = configmaps.list(&ListParams::default()).unwrap().metadata.resource_version;
    let by_label = configmaps
        .watch_channel(
            &WatchParams {
                label_selector: Some("app=a".into()),
                resource_version: rv.clone(),
                ..WatchParams::default()
            },
            64,
        )
        .unwrap();
    let by_field = configmaps
        .watch_channel(
            &WatchParams {
                field_selector: Some("metadata.name=other".into()),
                resource_version: rv,
                ..WatchParams::default()
            },
            64,
        )
        .unwrap();

    configmaps.create(&config_map("x", json!({"app": "a"})), &PostParams::default()).unwrap();
    configmaps.create(&config_map("other", json!({"app": "b"})), &PostParams::default()).unwrap();
    configmaps
        .patch("x", &Patch::Merge(json!({"metadata": {"labels": {"app": "b"}}})), &PostParams::default())
        .unwrap();
    configmaps.patch("x", &Patch::Merge(json!({"data": {"key": "invisible"}})), &PostParams::default()).unwrap();
    configmaps
        .patch("x", &Patch::Merge(json!({"metadata": {"labels": {"app": "a"}}})), &PostParams::default())
        .unwrap();
    configmaps.patch("x", &Patch::Merge(json!({"data": {"key": "seen"}})), &PostParams::default()).unwrap();
    configmaps.patch("other", &Patch::Merge(json!({"data": {"key": "seen"}})), &PostParams::default()).unwrap();
    configmaps.delete("x", &DeleteParams::default()).unwrap();
    configmaps.delete("other", &DeleteParams::default()).unwrap();

    let expected = [("ADDED", "x"), ("DELETED", "x"), ("ADDED", "x"), ("MODIFIED", "x"), ("DELETED", "x")];
    for (kind, name) in expected {
        assert_eq!(next_change(&by_label), (kind, name.to_string()));
    }
    for (kind, name) in [("ADDED", "other"), ("MODIFIED", "other"), ("DELETED", "other")] {
        assert_eq!(next_change(&by_field), (kind, name.to_string()));
    }
}

#[test]
fn watches_without_a_resource_version_start_with_the_existing_objects() {
    let mut opts = options();
    opts.bookmark_interval = Duration::from_millis(200);
    let sandbox = Sandbox::start(opts).unwrap();
    let c = client(&sandbox);
    let configmaps = Api::<ConfigMap>::namespaced(&c, "default");
    let first = configmaps.create(&config_map("a", json!({})), &PostParams::default()).unwrap();
    configmaps.create(&config_map("b", json!({})), &PostParams::default()).unwrap();
    let watch = configmaps.watch_channel(&WatchParams { allow_bookmarks: true, ..WatchParams::default() }, 64).unwrap();
    let mut added: Vec<String> = (0..2)
        .map(|_| match next_change(&watch) {
            ("ADDED", name) => name,
            other => panic!("expected ADDED, got {other:?}"),
        })
        .collect();
    added.sort();
    assert_eq!(added, ["a", "b"]);
    let created = configmaps.create(&config_map("c", json!({})), &PostParams::default()).unwrap();
    assert_eq!(next_change(&watch), ("ADDED", "c".into()));
    // Bookmarks come every interval, at least as new as what was delivered.
    let bookmark = loop {
        if let WatchEvent::Bookmark { resource_version } = next_event(&watch) {
            break resource_version;
        }
    };
    assert!(bookmark.parse::<u64>().unwrap() >= created.metadata.resource_version.unwrap().parse().unwrap());
    // The raw bookmark object is the kind with only a resourceVersion.
    let mut raw_watch = RawWatch::open(
        &sandbox,
        &format!(
            "/api/v1/namespaces/default/configmaps?watch=1&allowWatchBookmarks=true&resourceVersion={}",
            first.metadata.resource_version.as_deref().unwrap()
        ),
    );
    let bookmark = loop {
        let event = raw_watch.next().expect("watch open");
        if event["type"] == "BOOKMARK" {
            break event;
        }
    };
    assert_eq!(bookmark["object"]["kind"], "ConfigMap");
    assert_eq!(bookmark["object"]["apiVersion"], "v1");
    assert_eq!(bookmark["object"]["metadata"]["creationTimestamp"], Value::Null);
}

#[test]
fn watches_end_cleanly_at_their_timeout() {
    let sandbox = start();
    let c = client(&sandbox);
    let configmaps = Api::<ConfigMap>::namespaced(&c, "default");
    let rv = configmaps.list(&ListParams::default()).unwrap().metadata.resource_version;
    let watch = configmaps
        .watch(&WatchParams { resource_version: rv, timeout_seconds: Some(1), ..WatchParams::default() })
        .unwrap();
    // The iterator ends (None) rather than failing: the server finished the stream.
    for event in watch {
        assert!(event.is_ok(), "{event:?}");
    }
    // With bookmarks, one comes shortly before the timeout, though the interval is a minute, when
    // something changed since the watch began (a ConfigMap elsewhere); as kube-apiserver's watch
    // cache, none when nothing did.
    let rv = configmaps.list(&ListParams::default()).unwrap().metadata.resource_version;
    let params = WatchParams {
        resource_version: rv.clone(),
        timeout_seconds: Some(3),
        allow_bookmarks: true,
        ..WatchParams::default()
    };
    let events: Vec<_> = configmaps.watch(&params).unwrap().collect::<Result<_, _>>().unwrap();
    assert!(events.is_empty(), "{events:?}");
    let elsewhere = Api::<ConfigMap>::namespaced(&c, "kube-public");
    let events: Vec<_> = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            elsewhere.create(&config_map("elsewhere", json!({})), &PostParams::default()).unwrap()
        });
        configmaps.watch(&params).unwrap().collect::<Result<_, _>>().unwrap()
    });
    let start: u64 = rv.as_deref().unwrap().parse().unwrap();
    assert!(
        matches!(events.as_slice(), [WatchEvent::Bookmark { resource_version }] if resource_version.parse::<u64>().unwrap() > start),
        "{events:?}"
    );

    let future = (sandbox.store().revision() + 100).to_string();
    let e = api_error(
        configmaps.watch(&WatchParams { resource_version: Some(future.clone()), ..WatchParams::default() }).map(|_| ()),
    );
    assert_eq!((e.code, e.reason.as_str()), (504, "Timeout"));
    assert!(e.message.starts_with(&format!("Too large resource version: {future}, current: ")), "{}", e.message);
}

#[test]
fn watches_from_a_compacted_resource_version_get_410() {
    let sandbox = start();
    let c = client(&sandbox);
    let configmaps = Api::<ConfigMap>::namespaced(&c, "default");
    let old = configmaps
        .create(&config_map("c", json!({})), &PostParams::default())
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    configmaps.patch("c", &Patch::Merge(json!({"data": {"key": "two"}})), &PostParams::default()).unwrap();
    sandbox.compact();
    let mut watch =
        configmaps.watch(&WatchParams { resource_version: Some(old.clone()), ..WatchParams::default() }).unwrap();
    let e = api_error(watch.next().expect("an ERROR event"));
    assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
    assert!(e.message.starts_with(&format!("too old resource version: {old} (")), "{}", e.message);
    assert!(watch.next().is_none(), "the stream ends after the error");
}

#[test]
fn send_initial_events_is_refused_with_the_watch_list_gate_off() {
    // On by default since v1.34; a sandbox may still be started with it off.
    let sandbox = Sandbox::start(SandboxOptions { watch_list: false, ..options() }).unwrap();
    let query = "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan";
    let e = raw(&sandbox, "GET", query, &[], b"");
    assert_eq!(e.code, 422, "{}", e.text());
    assert_eq!(
        e.json()["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
    );
    let e = raw(
        &sandbox,
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=1&resourceVersionMatch=NotOlderThan",
        &[],
        b"",
    );
    assert_eq!(
        e.json()["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
    );
}

#[test]
fn send_initial_events_with_the_watch_list_gate_ends_with_a_bookmark() {
    // The gate's default, as in kube-apiserver v1.36.
    let sandbox = start();
    let c = client(&sandbox);
    let configmaps = Api::<ConfigMap>::namespaced(&c, "default");
    configmaps.create(&config_map("a", json!({})), &PostParams::default()).unwrap();
    let last = configmaps.create(&config_map("b", json!({})), &PostParams::default()).unwrap();
    let query = "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan";
    let mut watch = RawWatch::open(&sandbox, query);
    let first = watch.next().unwrap();
    let second = watch.next().unwrap();
    assert_eq!((first["type"].as_str(), second["type"].as_str()), (Some("ADDED"), Some("ADDED")));
    let end = watch.next().unwrap();
    assert_eq!(end["type"], "BOOKMARK");
    assert_eq!(end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
    assert!(rv_of(&end["object"]) >= rv_of(&value(&last)));
    configmaps.create(&config_map("c", json!({})), &PostParams::default()).unwrap();
    let next = watch.next().unwrap();
    assert_eq!((next["type"].as_str(), next["object"]["metadata"]["name"].as_str()), (Some("ADDED"), Some("c")));
}

// ---------------------------------------------------------------------------------------------
// Subresources
// ---------------------------------------------------------------------------------------------

/// Checks GET, PUT and PATCH of the `scale` subresource of an object with one replica.
macro_rules! check_scale {
    ($api:expr, $name:expr, $selector:expr) => {{
        use k8s_openapi::api::autoscaling::v1::Scale;
        let (api, name) = (&$api, $name);
        let scale: Scale = api.get_subresource("scale", name).unwrap();
        let raw_scale = value(&scale);
        assert_eq!((raw_scale["kind"].as_str(), raw_scale["apiVersion"].as_str()), (Some("Scale"), Some("autoscaling/v1")));
        assert_eq!(scale.spec.as_ref().unwrap().replicas, Some(1));
        assert_eq!(scale.status.as_ref().unwrap().selector.as_deref(), Some($selector));
        assert_eq!(scale.metadata.name.as_deref(), Some(name));

        let mut bigger = scale.clone();
        bigger.spec.as_mut().unwrap().replicas = Some(5);
        let scaled: Scale = api.replace_subresource("scale", name, &bigger, &PostParams::default()).unwrap();
        assert_eq!(scaled.spec.unwrap().replicas, Some(5));
        let object = value(&api.get(name).unwrap());
        assert_eq!(object["spec"]["replicas"], 5);
        assert_eq!(object["metadata"]["generation"], 2);
        // The old Scale's resourceVersion is stale now.
        let e = api_error(api.replace_subresource::<_, Scale>("scale", name, &bigger, &PostParams::default()));
        assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
        let patch = Patch::Merge(json!({"spec": {"replicas": 7}}));
        let patched: Scale = api.patch_subresource("scale", name, &patch, &PostParams::default()).unwrap();
        assert_eq!(patched.spec.unwrap().replicas, Some(7));
        let negative = Patch::Merge(json!({"spec": {"replicas": -1}}));
        let e = api_error(api.patch_subresource::<Scale>("scale", name, &negative, &PostParams::default()));
        assert_eq!(e.code, 422);
    }};
}

#[test]
fn scale_subresources() {
    let sandbox = start();
    let c = client(&sandbox);
    let deployments = Api::<Deployment>::namespaced(&c, "default");
    deployments.create(&deployment("web", "nginx:1.27"), &PostParams::default()).unwrap();
    check_scale!(deployments, "web", "app=web");

    let replicasets = Api::<ReplicaSet>::namespaced(&c, "default");
    let rs = json!({"metadata": {"name": "rs"}, "spec": {"replicas": 1,
        "selector": {"matchLabels": {"app": "rs"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
        "template": {"metadata": {"labels": {"app": "rs", "tier": "a"}}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}});
    replicasets.create(&from(rs), &PostParams::default()).unwrap();
    check_scale!(replicasets, "rs", "app=rs,tier in (a,b)");

    let controllers = Api::<ReplicationController>::namespaced(&c, "default");
    let rc = json!({"metadata": {"name": "rc"}, "spec": {"replicas": 1, "selector": {"app": "rc", "b": "2"},
        "template": {"metadata": {"labels": {"app": "rc", "b": "2"}}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}});
    controllers.create(&from(rc), &PostParams::default()).unwrap();
    check_scale!(controllers, "rc", "app=rc,b=2");
}

#[test]
fn binding_assigns_a_node_once() {
    let sandbox = start();
    let c = client(&sandbox);
    pod_namespace(&c, "work");
    let pods = Api::<Pod>::namespaced(&c, "work");
    pods.create(&pod("p", json!({})), &PostParams::default()).unwrap();
    let status = bind(&c, "work", "p", "node-1").unwrap();
    assert_eq!(status, json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}));
    let bound = pods.get("p").unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("node-1"));
    let scheduled = bound.status.unwrap().conditions.unwrap().into_iter().find(|c| c.type_ == "PodScheduled").unwrap();
    assert_eq!(scheduled.status, "True");

    let e = api_error(bind(&c, "work", "p", "node-2"));
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to node \"node-1\""
    );
    // A Binding's uid is a precondition; its annotations land on the pod.
    let p2 = pods.create(&pod("p2", json!({})), &PostParams::default()).unwrap();
    let with_uid = |uid: &str| {
        json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "p2", "uid": uid, "annotations": {"scheduler.example.com/score": "7"}},
        "target": {"kind": "Node", "name": "node-2"}})
    };
    let e = api_error(pods.create_subresource::<_, Value>("binding", "p2", &with_uid("other"), &PostParams::default()));
    let uid = p2.metadata.uid.clone().unwrap();
    assert_eq!(
        e.message,
        format!(
            "Operation cannot be fulfilled on pods \"p2\": Precondition failed: UID in precondition: other, UID in object meta: {uid}"
        )
    );
    pods.create_subresource::<_, Value>("binding", "p2", &with_uid(&uid), &PostParams::default()).unwrap();
    let bound = pods.get("p2").unwrap();
    assert_eq!(bound.metadata.annotations.unwrap()["scheduler.example.com/score"], "7");
    let e = api_error(bind(&c, "work", "missing", "node-1"));
    assert_eq!((e.code, e.message.as_str()), (404, "pods \"missing\" not found"));
    // The core/v1 bindings resource does the same.
    pods.create(&pod("q", json!({})), &PostParams::default()).unwrap();
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "q"}, "target": {"kind": "Node", "name": "node-3"}});
    let answer = raw(
        &sandbox,
        "POST",
        "/api/v1/namespaces/work/bindings",
        &[("Content-Type", "application/json")],
        binding.to_string().as_bytes(),
    );
    assert_eq!(answer.code, 201, "{}", answer.text());
    assert_eq!(pods.get("q").unwrap().spec.unwrap().node_name.as_deref(), Some("node-3"));
}

#[test]
fn eviction_respects_disruption_budgets() {
    let sandbox = start();
    let c = client(&sandbox);
    pod_namespace(&c, "work");
    let pods = Api::<Pod>::namespaced(&c, "work");
    let running = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
    for name in ["a", "b"] {
        pods.create(&pod(name, json!({"app": "guarded"})), &PostParams::default()).unwrap();
        pods.patch_status(name, &Patch::Merge(running.clone()), &PostParams::default()).unwrap();
    }
    let budgets = Api::<PodDisruptionBudget>::namespaced(&c, "work");
    let pdb: PodDisruptionBudget = from(
        json!({"metadata": {"name": "guard"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}}),
    );
    budgets.create(&pdb, &PostParams::default()).unwrap();
    let eviction = |name: &str| json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "work"}});
    let evict =
        |name: &str| pods.create_subresource::<_, Value>("eviction", name, &eviction(name), &PostParams::default());

    // The budget's controller has not looked at it yet: come back in 10 s (raw, as our client
    // would wait and retry).
    let body = serde_json::to_vec(&eviction("a")).unwrap();
    let e = raw(
        &sandbox,
        "POST",
        "/api/v1/namespaces/work/pods/a/eviction",
        &[("Content-Type", "application/json")],
        &body,
    );
    assert_eq!(e.code, 429);
    assert_eq!(e.header("Retry-After"), Some("10"));
    assert_eq!(
        e.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.", "reason": "TooManyRequests",
            "details": {"causes": [{"reason": "DisruptionBudget", "message": "The disruption budget guard is still being processed by the server."}],
                "retryAfterSeconds": 10},
            "code": 429})
    );

    let set_status = |allowed: i32| {
        let status = json!({"status": {"observedGeneration": 1, "disruptionsAllowed": allowed, "currentHealthy": 2,
            "desiredHealthy": 1 + 1 - allowed, "expectedPods": 2}});
        budgets.patch_status("guard", &Patch::Merge(status), &PostParams::default()).unwrap();
    };
    set_status(0);
    let e = api_error(evict("a"));
    assert_eq!((e.code, e.reason.as_str()), (429, "TooManyRequests"));
    assert_eq!(e.message, "Cannot evict pod as it would violate the pod's disruption budget.");
    let cause = &e.status.details.clone().unwrap().causes.unwrap()[0];
    assert_eq!(cause.reason.as_deref(), Some("DisruptionBudget"));
    assert_eq!(cause.message.as_deref(), Some("The disruption budget guard needs 2 healthy pods and has 2 currently"));
    assert!(pods.get_opt("a").unwrap().is_some());

    set_status(1);
    let answer = evict("a").unwrap();
    assert_eq!(answer["status"], "Success");
    assert!(pods.get_opt("a").unwrap().is_none(), "an unscheduled pod goes at once");
    let budget = value(&budgets.get("guard").unwrap());
    assert_eq!(budget["status"]["disruptionsAllowed"], 0);
    assert!(budget["status"]["disruptedPods"]["a"].is_string(), "{budget}");

    // Pending pods are not protected by budgets.
    pods.create(&pod("pending", json!({"app": "guarded"})), &PostParams::default()).unwrap();
    evict("pending").unwrap();
    assert!(pods.get_opt("pending").unwrap().is_none());
    let e = api_error(evict("missing"));
    assert_eq!(e.code, 404);
}

#[test]
fn service_account_tokens_authenticate() {
    let sandbox = start();
    let c = client(&sandbox);
    pod_namespace(&c, "work");
    Api::<ServiceAccount>::namespaced(&c, "work")
        .create(&from(json!({"metadata": {"name": "builder"}})), &PostParams::default())
        .unwrap();
    let request =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}});
    let issued: TokenRequest = Api::<ServiceAccount>::namespaced(&c, "work")
        .create_subresource("token", "builder", &request, &PostParams::default())
        .unwrap();
    let token = issued.status.as_ref().unwrap().token.clone().expect("a token");
    assert!(!token.is_empty());
    let spec = issued.spec.expect("the spec");
    assert_eq!(spec.expiration_seconds, Some(3600));
    assert_eq!(spec.audiences.unwrap_or_default(), ["https://kubernetes.default.svc.cluster.local"]);
    // A bound token: a JWT signed with the service-account key, with upstream's claims.
    let key = kcm::jwt::SigningKey::from_pem(sandbox.service_account_key_pem().as_bytes()).unwrap();
    let claims = kcm::jwt::verify(&token, key.public_key()).expect("signed with sa.key").claims;
    let account_uid = Api::<ServiceAccount>::namespaced(&c, "work").get("builder").unwrap().metadata.uid.unwrap();
    assert_eq!(claims["sub"], "system:serviceaccount:work:builder");
    assert_eq!(claims["iss"], "https://kubernetes.default.svc.cluster.local");
    assert_eq!(claims["aud"], json!(["https://kubernetes.default.svc.cluster.local"]));
    assert_eq!(
        claims["kubernetes.io"],
        json!({"namespace": "work", "serviceaccount": {"name": "builder", "uid": account_uid}})
    );
    assert_eq!(claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(), 3600);
    assert_eq!(claims["nbf"], claims["iat"]);
    assert!(claims["jti"].as_str().is_some_and(|j| j.len() == 36));

    // TokenReview names the account...
    let review: TokenReview = from(json!({"spec": {"token": token}}));
    let reviewed = Api::<TokenReview>::cluster(&c).create(&review, &PostParams::default()).unwrap();
    let status = reviewed.status.unwrap();
    assert_eq!(status.authenticated, Some(true));
    let user = status.user.unwrap();
    assert_eq!(user.username.as_deref(), Some("system:serviceaccount:work:builder"));
    let groups = user.groups.unwrap();
    for group in ["system:serviceaccounts", "system:serviceaccounts:work", "system:authenticated"] {
        assert!(groups.contains(&group.to_string()), "{groups:?}");
    }
    let bogus = Api::<TokenReview>::cluster(&c)
        .create(&from(json!({"spec": {"token": "nope"}})), &PostParams::default())
        .unwrap();
    assert_eq!(bogus.status.unwrap().authenticated, Some(false));

    // ...and the token is accepted as a bearer token.
    let as_account = client_for(anonymous_config(&sandbox, Auth::Token(token)));
    assert!(Api::<ConfigMap>::namespaced(&as_account, "work").list(&ListParams::default()).is_ok());

    let e = api_error(Api::<ServiceAccount>::namespaced(&c, "work").create_subresource::<_, TokenRequest>(
        "token",
        "missing",
        &request,
        &PostParams::default(),
    ));
    assert_eq!((e.code, e.message.as_str()), (404, "serviceaccounts \"missing\" not found"));
}

#[test]
fn subject_access_reviews_follow_rbac() {
    let sandbox = start();
    let c = client(&sandbox);
    create_namespace(&c, "team");
    Api::<Role>::namespaced(&c, "team")
        .create(&from(json!({"metadata": {"name": "pod-reader"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]})), &PostParams::default())
        .unwrap();
    Api::<RoleBinding>::namespaced(&c, "team")
        .create(
            &from(json!({"metadata": {"name": "read-pods"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]})),
            &PostParams::default(),
        )
        .unwrap();
    let ask = |user: &str, groups: &[&str], verb: &str| {
        let review: SubjectAccessReview = from(json!({"spec": {"user": user, "groups": groups,
            "resourceAttributes": {"namespace": "team", "verb": verb, "resource": "pods"}}}));
        let answer = Api::<SubjectAccessReview>::cluster(&c).create(&review, &PostParams::default()).unwrap();
        answer.status.unwrap().allowed
    };
    assert!(ask("kubernetes-admin", &["system:masters"], "delete"));
    assert!(ask("alice", &[], "get"));
    assert!(!ask("alice", &[], "delete"));
    assert!(!ask("bob", &[], "get"));
}

#[test]
fn certificate_signing_requests_are_approved_through_their_subresource() {
    let sandbox = start();
    let c = client(&sandbox);
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, "alice");
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    use base64::Engine;
    let request = base64::engine::general_purpose::STANDARD.encode(pem);
    let csrs = Api::<CertificateSigningRequest>::cluster(&c);
    let created = csrs
        .create(
            &from(json!({"metadata": {"name": "alice"}, "spec": {"request": request,
            "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"]}})),
            &PostParams::default(),
        )
        .unwrap();
    let spec = &created.spec;
    assert_eq!(spec.username.as_deref(), Some("kubernetes-admin"), "the requester is recorded");
    assert!(spec.groups.as_ref().unwrap().contains(&"system:masters".to_string()));

    let mut approved = value(&created);
    approved["status"] = json!({"conditions": [{"type": "Approved", "status": "True", "reason": "Test", "message": "approved by the test"}]});
    let approved: CertificateSigningRequest =
        csrs.replace_subresource("approval", "alice", &approved, &PostParams::default()).unwrap();
    let condition = approved.status.unwrap().conditions.unwrap().remove(0);
    assert_eq!((condition.type_.as_str(), condition.status.as_str()), ("Approved", "True"));
    assert!(condition.last_update_time.is_some() && condition.last_transition_time.is_some());
    assert!(csrs.get("alice").unwrap().status.unwrap().conditions.is_some());
}

// ---------------------------------------------------------------------------------------------
// Admission
// ---------------------------------------------------------------------------------------------

#[test]
fn service_accounts_are_required_and_mounted() {
    let sandbox = start();
    let c = client(&sandbox);
    create_namespace(&c, "fresh");
    let pods = Api::<Pod>::namespaced(&c, "fresh");
    let e = api_error(pods.create(&pod("p", json!({})), &PostParams::default()));
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        e.message,
        "pods \"p\" is forbidden: error looking up service account fresh/default: serviceaccount \"default\" not found"
    );

    Api::<ServiceAccount>::namespaced(&c, "fresh")
        .create(&from(json!({"metadata": {"name": "default"}})), &PostParams::default())
        .unwrap();
    let mut with_account = value(&pod("p", json!({})));
    with_account["spec"]["serviceAccountName"] = json!("default");
    let created = value(&pods.create(&from(with_account), &PostParams::default()).unwrap());
    let volume = &created["spec"]["volumes"][0];
    assert!(volume["name"].as_str().unwrap().starts_with("kube-api-access-"), "{volume}");
    let sources = volume["projected"]["sources"].as_array().unwrap();
    assert_eq!(sources[0]["serviceAccountToken"], json!({"expirationSeconds": 3607, "path": "token"}));
    assert_eq!(sources[1]["configMap"]["name"], "kube-root-ca.crt");
    let mount = &created["spec"]["containers"][0]["volumeMounts"][0];
    assert_eq!(mount["mountPath"], "/var/run/secrets/kubernetes.io/serviceaccount");
    assert_eq!(mount["readOnly"], true);
    assert_eq!(created["spec"]["serviceAccount"], "default");
}

#[test]
fn pods_get_default_tolerations_limits_and_priority() {
    let sandbox = start();
    let c = client(&sandbox);
    pod_namespace(&c, "work");
    Api::<LimitRange>::namespaced(&c, "work")
        .create(
            &from(json!({"metadata": {"name": "limits"}, "spec": {"limits": [{"type": "Container",
            "default": {"cpu": "500m", "memory": "256Mi"}, "defaultRequest": {"cpu": "250m", "memory": "128Mi"}}]}})),
            &PostParams::default(),
        )
        .unwrap();
    Api::<PriorityClass>::cluster(&c)
        .create(&from(json!({"metadata": {"name": "high"}, "value": 1000})), &PostParams::default())
        .unwrap();
    let mut spec = value(&pod("p", json!({})));
    spec["spec"]["priorityClassName"] = json!("high");
    let created = value(&Api::<Pod>::namespaced(&c, "work").create(&from(spec), &PostParams::default()).unwrap());

    let tolerations = created["spec"]["tolerations"].as_array().unwrap();
    for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
        assert!(
            tolerations
                .contains(&json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})),
            "{tolerations:?}"
        );
    }
    let resources = &created["spec"]["containers"][0]["resources"];
    assert_eq!(resources["limits"], json!({"cpu": "500m", "memory": "256Mi"}));
    assert_eq!(resources["requests"], json!({"cpu": "250m", "memory": "128Mi"}));
    assert_eq!(created["status"]["qosClass"], "Burstable");
    assert_eq!(created["spec"]["priority"], 1000);
    assert_eq!(created["spec"]["preemptionPolicy"], "PreemptLowerPriority");

    let mut unknown = value(&pod("q", json!({})));
    unknown["spec"]["priorityClassName"] = json!("nope");
    let e = api_error(Api::<Pod>::namespaced(&c, "work").create(&from(unknown), &PostParams::default()));
    assert_eq!(
        (e.code, e.message.as_str()),
        (403, "pods \"q\" is forbidden: no PriorityClass with name nope was found")
    );
}

#[test]
fn resource_quota_refuses_what_exceeds_it() {
    let sandbox = start();
    let c = client(&sandbox);
    pod_namespace(&c, "work");
    let quotas = Api::<ResourceQuota>::namespaced(&c, "work");
    quotas
        .create(&from(json!({"metadata": {"name": "pods"}, "spec": {"hard": {"pods": "1"}}})), &PostParams::default())
        .unwrap();
    // What the resource quota controller writes once it has counted.
    quotas
        .patch_status(
            "pods",
            &Patch::Merge(json!({"status": {"hard": {"pods": "1"}, "used": {"pods": "0"}}})),
            &PostParams::default(),
        )
        .unwrap();
    let pods = Api::<Pod>::namespaced(&c, "work");
    pods.create(&pod("first", json!({})), &PostParams::default()).unwrap();
    let used = quotas.get("pods").unwrap().status.unwrap().used.unwrap();
    assert_eq!(used["pods"].0, "1");
    let e = api_error(pods.create(&pod("second", json!({})), &PostParams::default()));
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        e.message,
        "pods \"second\" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1"
    );
}

// ---------------------------------------------------------------------------------------------
// Errors, discovery, health, authentication
// ---------------------------------------------------------------------------------------------

#[test]
fn errors_are_status_objects() {
    let sandbox = start();
    let missing = raw(&sandbox, "GET", "/api/v1/namespaces/default/configmaps/nope", &[], b"");
    assert_eq!(missing.code, 404);
    assert_eq!(missing.header("Content-Type"), Some("application/json"));
    assert_eq!(
        missing.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "configmaps \"nope\" not found", "reason": "NotFound",
            "details": {"name": "nope", "kind": "configmaps"}, "code": 404})
    );
    let grouped = raw(&sandbox, "GET", "/apis/apps/v1/namespaces/default/deployments/nope", &[], b"");
    assert_eq!(grouped.json()["details"], json!({"name": "nope", "group": "apps", "kind": "deployments"}));
    let unknown = raw(&sandbox, "GET", "/api/v1/widgets", &[], b"");
    assert_eq!(
        unknown.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "the server could not find the requested resource", "reason": "NotFound", "details": {}, "code": 404})
    );
    let not_allowed =
        raw(&sandbox, "PUT", "/api/v1/namespaces/default/configmaps", &[("Content-Type", "application/json")], b"{}");
    assert_eq!(not_allowed.code, 405);
    assert_eq!(not_allowed.json()["reason"], "MethodNotAllowed");
    let garbage = raw(
        &sandbox,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[("Content-Type", "application/json")],
        b"{not json",
    );
    assert_eq!(garbage.code, 400);
    assert_eq!(garbage.json()["reason"], "BadRequest");
    let unknown_media =
        raw(&sandbox, "POST", "/api/v1/namespaces/default/configmaps", &[("Content-Type", "text/plain")], b"data");
    assert_eq!(unknown_media.code, 415);
    assert_eq!(unknown_media.json()["reason"], "UnsupportedMediaType");
    // Protobuf is decoded (crates/sandbox/src/sandbox/apiserver/protobuf): an envelope without an object is a bad request.
    let protobuf = raw(
        &sandbox,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[("Content-Type", "application/vnd.kubernetes.protobuf")],
        b"k8s\0",
    );
    assert_eq!((protobuf.code, protobuf.json()["message"].as_str()), (400, Some("empty body")));
    let wrong_kind = raw(
        &sandbox,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[("Content-Type", "application/json")],
        br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}"#,
    );
    assert_eq!(wrong_kind.code, 400, "{}", wrong_kind.text());
}

#[test]
fn discovery_version_and_health() {
    let sandbox = start();
    let c = client(&sandbox);
    let api: Value = c.get_json("/api").unwrap();
    assert_eq!(api["kind"], "APIVersions");
    assert_eq!(api["versions"], json!(["v1"]));
    let core: Value = c.get_json("/api/v1").unwrap();
    let pods = core["resources"].as_array().unwrap().iter().find(|r| r["name"] == "pods").unwrap();
    assert_eq!(pods["namespaced"], true);
    assert_eq!(pods["kind"], "Pod");
    assert!(core["resources"].as_array().unwrap().iter().any(|r| r["name"] == "pods/eviction"));
    let groups: Value = c.get_json("/apis").unwrap();
    assert_eq!(groups["kind"], "APIGroupList");
    let apps = groups["groups"].as_array().unwrap().iter().find(|g| g["name"] == "apps").unwrap();
    assert_eq!(apps["preferredVersion"]["groupVersion"], "apps/v1");
    let apps_v1: Value = c.get_json("/apis/apps/v1").unwrap();
    assert_eq!(apps_v1["groupVersion"], "apps/v1");
    let scale = apps_v1["resources"].as_array().unwrap().iter().find(|r| r["name"] == "deployments/scale").unwrap();
    assert_eq!((scale["group"].as_str(), scale["kind"].as_str()), (Some("autoscaling"), Some("Scale")));

    let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    let aggregated = raw(&sandbox, "GET", "/apis", &[("Accept", accept)], b"");
    assert_eq!(
        aggregated.header("Content-Type"),
        Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
    );
    let list = aggregated.json();
    assert_eq!(
        (list["kind"].as_str(), list["apiVersion"].as_str()),
        (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io/v2"))
    );
    let apps = list["items"].as_array().unwrap().iter().find(|i| i["metadata"]["name"] == "apps").unwrap();
    let deployments =
        apps["versions"][0]["resources"].as_array().unwrap().iter().find(|r| r["resource"] == "deployments").unwrap();
    assert_eq!(deployments["scope"], "Namespaced");
    let core = raw(&sandbox, "GET", "/api", &[("Accept", accept)], b"").json();
    assert_eq!(core["items"][0]["versions"][0]["version"], "v1");

    let version: Value = c.get_json("/version").unwrap();
    assert_eq!((version["major"].as_str(), version["minor"].as_str()), (Some("1"), Some("36")));
    assert_eq!(version["gitVersion"], "v1.36.2");
    assert_eq!((version["emulationMajor"].as_str(), version["emulationMinor"].as_str()), (Some("1"), Some("36")));

    for path in ["/healthz", "/livez", "/readyz"] {
        let answer = raw(&sandbox, "GET", path, &[], b"");
        assert_eq!((answer.code, answer.text().as_str()), (200, "ok"), "{path}");
        let verbose = raw(&sandbox, "GET", &format!("{path}?verbose"), &[], b"").text();
        assert!(verbose.starts_with("[+]ping ok\n"), "{verbose}");
        assert!(verbose.ends_with(&format!("{} check passed\n", &path[1..])), "{verbose}");
    }
}

#[test]
fn only_health_and_version_are_public() {
    let sandbox = start();
    let nobody = anonymous_config(&sandbox, Auth::None);
    for path in ["/healthz", "/livez", "/readyz", "/version"] {
        assert_eq!(raw_as(&sandbox, &nobody, "GET", path, &[], b"").code, 200, "{path}");
    }
    // Anonymous requests are authenticated as system:anonymous, then not authorized.
    for path in ["/api", "/apis", "/openapi/v3"] {
        let answer = raw_as(&sandbox, &nobody, "GET", path, &[], b"");
        assert_eq!(answer.code, 403, "{path}");
        assert_eq!(
            answer.json(),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": format!("forbidden: User \"system:anonymous\" cannot get path \"{path}\""),
                "reason": "Forbidden", "details": {}, "code": 403})
        );
    }
    let answer = raw_as(&sandbox, &nobody, "GET", "/api/v1/namespaces/default/pods", &[], b"");
    assert_eq!(
        answer.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "pods is forbidden: User \"system:anonymous\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\"",
            "reason": "Forbidden", "details": {"kind": "pods"}, "code": 403})
    );
    let answer = raw_as(&sandbox, &nobody, "GET", "/apis/apps/v1/namespaces/default/deployments/web", &[], b"");
    assert_eq!(
        answer.json()["message"],
        "deployments.apps \"web\" is forbidden: User \"system:anonymous\" cannot get resource \"deployments\" in API group \"apps\" in the namespace \"default\""
    );
    // An RBAC grant to the anonymous user is honoured, as upstream's authorizer would.
    let admin = client(&sandbox);
    let role: Role = from(json!({"metadata": {"name": "read-pods"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]}));
    Api::<Role>::namespaced(&admin, "default").create(&role, &PostParams::default()).unwrap();
    let binding: RoleBinding = from(json!({"metadata": {"name": "anonymous-reads-pods"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-pods"},
        "subjects": [{"kind": "User", "name": "system:anonymous", "apiGroup": "rbac.authorization.k8s.io"}]}));
    Api::<RoleBinding>::namespaced(&admin, "default").create(&binding, &PostParams::default()).unwrap();
    assert_eq!(raw_as(&sandbox, &nobody, "GET", "/api/v1/namespaces/default/pods", &[], b"").code, 200);
    // Credentials that do not authenticate are refused outright.
    let e = api_error(
        Api::<ConfigMap>::namespaced(&client_for(anonymous_config(&sandbox, Auth::Token("wrong".into()))), "default")
            .list(&ListParams::default()),
    );
    assert_eq!(e.code, 401);
}

#[test]
fn client_certificates_and_bearer_tokens_authenticate() {
    let sandbox = start();
    let admin = client(&sandbox);
    assert!(Api::<Namespace>::cluster(&admin).get("default").is_ok());
    let user = client_for(sandbox.user_config("carol", &["devs"]).unwrap());
    assert!(Api::<Namespace>::cluster(&user).get("default").is_ok());

    sandbox.add_token("s3cret", "dave", &["devs"]);
    let with_token = client_for(anonymous_config(&sandbox, Auth::Token("s3cret".into())));
    assert!(Api::<Namespace>::cluster(&with_token).get("default").is_ok());
    let review: SubjectAccessReview =
        from(json!({"spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}}));
    let own = raw_as(&sandbox, &anonymous_config(&sandbox, Auth::Token("s3cret".into())), "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", &[("Content-Type", "application/json")],
        &serde_json::to_vec(&json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": value(&review)["spec"]})).unwrap());
    assert_eq!(own.code, 201, "{}", own.text());
    assert_eq!(own.json()["status"]["allowed"], false, "dave has no RBAC grants");

    // A certificate from another CA does not get past the TLS handshake.
    let rogue = support::TestCa::new("rogue").client_cert("kubernetes-admin", "system:masters");
    let mut config = anonymous_config(&sandbox, Auth::None);
    config.tls.client_identity =
        Some(ClientIdentity { cert_chain: support::certs(&rogue.cert_pem), key: support::key(&rogue.key_pem) });
    let e = Api::<Namespace>::cluster(&client_for(config)).get("default").unwrap_err();
    assert!(matches!(e, Error::Transport(_)), "{e:?}");
}

// ---------------------------------------------------------------------------------------------
// Faults
// ---------------------------------------------------------------------------------------------

#[test]
fn injected_errors_are_served_in_order() {
    let sandbox = start();
    let c = client(&sandbox);
    let namespaces = Api::<Namespace>::cluster(&c);
    sandbox.faults().fail_next(1, 500, None).unwrap();
    let e = api_error(namespaces.get("default"));
    assert_eq!((e.code, e.reason.as_str()), (500, "InternalError"));
    assert!(namespaces.get("default").is_ok());

    // 429 with Retry-After: our client retries by itself.
    let host = sandbox.addr().to_string();
    let throttled = || ClientMetrics::global().requests.get(&["429", "GET", &host]);
    let before = throttled();
    sandbox.faults().fail_next(2, 429, Some(0)).unwrap();
    assert!(namespaces.get("default").is_ok());
    assert_eq!(throttled() - before, 2.0);

    sandbox.faults().fail_next(1, 503, Some(7)).unwrap();
    let answer = raw(&sandbox, "GET", "/api/v1/namespaces/default", &[], b"");
    assert_eq!(answer.code, 503);
    assert_eq!(answer.header("Retry-After"), Some("7"));
    assert_eq!(answer.json()["reason"], "ServiceUnavailable");
    assert!(sandbox.faults().fail_next(1, 404, None).is_err());

    sandbox.faults().set_latency(Some(Duration::from_millis(300)));
    let started = Instant::now();
    assert!(namespaces.get("default").is_ok());
    assert!(started.elapsed() >= Duration::from_millis(300));
    sandbox.faults().set_latency(None);
}

#[test]
fn closed_watches_end_and_compaction_makes_old_versions_gone() {
    let sandbox = start();
    let c = client(&sandbox);
    let configmaps = Api::<ConfigMap>::namespaced(&c, "default");
    let old = configmaps.create(&config_map("c", json!({})), &PostParams::default()).unwrap().metadata.resource_version;
    let watch =
        configmaps.watch_channel(&WatchParams { resource_version: old.clone(), ..WatchParams::default() }, 16).unwrap();
    sandbox.close_watches();
    let ended = eventually("the watch to end", || match watch.recv_timeout(Duration::from_millis(100)) {
        Ok(None) => Some(true),
        Ok(Some(Err(_))) => Some(true),
        Ok(Some(Ok(event))) => panic!("unexpected event {event:?}"),
        Err(()) => None,
    });
    assert!(ended);
    // New watches work again.
    let watch =
        configmaps.watch_channel(&WatchParams { resource_version: old.clone(), ..WatchParams::default() }, 16).unwrap();
    configmaps.patch("c", &Patch::Merge(json!({"data": {"key": "two"}})), &PostParams::default()).unwrap();
    assert_eq!(next_change(&watch), ("MODIFIED", "c".into()));

    sandbox.compact();
    let mut stale = configmaps.watch(&WatchParams { resource_version: old.clone(), ..WatchParams::default() }).unwrap();
    assert_eq!(api_error(stale.next().unwrap()).code, 410);
    let e = api_error(configmaps.list(&ListParams {
        resource_version: old,
        resource_version_match: Some("Exact".into()),
        ..ListParams::default()
    }));
    assert_eq!(e.code, 410);
}

#[test]
fn held_watch_events_wait_in_order_while_reads_stay_current() {
    let sandbox = start();
    let c = client(&sandbox);
    let configmaps = Api::<ConfigMap>::namespaced(&c, "default");
    let created = configmaps.create(&config_map("held", json!({})), &PostParams::default()).unwrap();
    let from = created.metadata.resource_version;
    let watch = configmaps
        .watch_channel(&WatchParams { resource_version: from.clone(), ..WatchParams::default() }, 16)
        .unwrap();
    sandbox.faults().hold_watch_events(true);
    for value in ["two", "three"] {
        configmaps.patch("held", &Patch::Merge(json!({"data": {"key": value}})), &PostParams::default()).unwrap();
    }
    // A watch started meanwhile is held back too (its backlog included).
    let late = configmaps.watch_channel(&WatchParams { resource_version: from, ..WatchParams::default() }, 16).unwrap();
    assert!(watch.recv_timeout(Duration::from_millis(500)).is_err(), "no event while held");
    assert!(late.recv_timeout(Duration::from_millis(100)).is_err(), "no backlog while held");
    let current = configmaps.get("held").unwrap().data.unwrap_or_default();
    assert_eq!(current.get("key").map(String::as_str), Some("three"), "reads are current");
    sandbox.faults().hold_watch_events(false);
    let next_value = |stream: &WatchReceiver<ConfigMap>| loop {
        match next_event(stream) {
            WatchEvent::Modified(cm) => break cm.data.unwrap_or_default().get("key").cloned().unwrap_or_default(),
            WatchEvent::Bookmark { .. } => continue,
            other => panic!("unexpected {other:?}"),
        }
    };
    for stream in [&watch, &late] {
        assert_eq!([next_value(stream), next_value(stream)], ["two", "three"], "in order");
    }
}

#[test]
fn pause_and_resume_keep_state_and_port() {
    let sandbox = start();
    let c = client(&sandbox);
    let configmaps = Api::<ConfigMap>::namespaced(&c, "default");
    configmaps.create(&config_map("kept", json!({})), &PostParams::default()).unwrap();
    let addr = sandbox.addr();
    sandbox.pause();
    assert!(matches!(configmaps.get("kept"), Err(Error::Transport(_))));
    sandbox.resume().unwrap();
    assert_eq!(sandbox.addr(), addr);
    let kept = eventually("the server to answer again", || configmaps.get("kept").ok());
    assert_eq!(kept.metadata.name.as_deref(), Some("kept"));
}

/// ValidatingAdmissionPolicies: the generation follows spec changes only, the status is written
/// by server-side apply on `/status`, and `/openapi/v3` serves the object schemas the type
/// checking reads (kube-apiserver's, found by `x-kubernetes-group-version-kind`).
#[test]
fn admission_policies_have_a_status_and_the_schemas_are_served() {
    use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
    let sandbox = start();
    let c = client(&sandbox);
    let policies = Api::<ValidatingAdmissionPolicy>::all(&c);
    let policy: ValidatingAdmissionPolicy = from(json!({
        "metadata": {"name": "p"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["deployments"]}]},
            "validations": [{"expression": "object.spec.replicas > 1"}],
        },
    }));
    let created = policies.create(&policy, &PostParams::default()).expect("created");
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(created.spec.as_ref().and_then(|s| s.failure_policy.as_deref()), Some("Fail"), "defaulted");
    let status = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "p"}, "status": {"observedGeneration": 1, "typeChecking": {}}});
    let params = PostParams { field_manager: Some("test".into()), force: true, ..PostParams::default() };
    let applied = policies.patch_status("p", &Patch::Apply(status), &params).expect("applied");
    assert_eq!(applied.metadata.generation, Some(1), "a status write keeps the generation");
    assert_eq!(applied.status.and_then(|s| s.observed_generation), Some(1));
    let spec = json!({"spec": {"validations": [{"expression": "true"}]}});
    let changed = policies.patch("p", &Patch::Merge(spec), &PostParams::default()).expect("patched");
    assert_eq!(changed.metadata.generation, Some(2));
    let refused = api_error(policies.create(
        &from(json!({"metadata": {"name": "q"}, "spec": {"validations": [{"expression": "1 +"}]}})),
        &PostParams::default(),
    ));
    assert_eq!(refused.code, 422, "{refused:?}");

    let document: Value = c.get_json("/openapi/v3/apis/apps/v1").expect("apps/v1 document");
    let schemas = document["components"]["schemas"].as_object().expect("schemas");
    let deployment = &schemas["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(deployment["x-kubernetes-group-version-kind"][0]["kind"], "Deployment");
    let spec = &schemas["io.k8s.api.apps.v1.DeploymentSpec"];
    assert_eq!(spec["properties"]["replicas"]["type"], "integer");
    let core: Value = c.get_json("/openapi/v3/api/v1").expect("v1 document");
    assert!(core["components"]["schemas"]["io.k8s.api.core.v1.Pod"].is_object());
}
