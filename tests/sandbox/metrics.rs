//! The metrics APIs (docs/sandbox.md, "Metrics APIs"): the same annotations give the same answers from
//! the sandbox, which serves them in-process, and from a real kube-apiserver, through its
//! aggregator to `kcm_envtest::envtest`'s metrics API server.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, Service, ServiceAccount};
use kcm::client::{Api, Client, ClientOptions, Error, PostParams};
use kcm_envtest::envtest::MetricsApis;
use serde_json::{Value, json};

use crate::harness::{Backend, TestServer, from};

const NS: &str = "metrics";

/// The server with RBAC on, and on the real backend the metrics APIs registered with it.
fn start(backend: Backend) -> (TestServer, Option<MetricsApis>) {
    let server = crate::rbac_server(backend);
    let apis = server.serve_metrics_apis().expect("the metrics APIs are available");
    (server, apis)
}

/// A pod bound to `node` and Running, as a kubelet would have reported it.
fn running_pod(client: &Client, name: &str, node: &str, labels: Value, annotations: Value, containers: &[&str]) {
    let containers: Vec<Value> =
        containers.iter().map(|c| json!({"name": c, "image": "registry.k8s.io/pause:3.10"})).collect();
    let pod: Pod = from(json!({"metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"nodeName": node, "containers": containers}}));
    let pods = Api::<Pod>::namespaced(client, NS);
    let mut created = pods.create(&pod, &PostParams::default()).unwrap();
    created.status = Some(from(json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})));
    pods.replace_status(name, &created, &PostParams::default()).unwrap();
}

fn get(client: &Client, path: &str) -> Value {
    client.get_json(path).unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

fn refusal(client: &Client, path: &str) -> kcm::client::ApiError {
    match client.get_json::<Value>(path) {
        Err(Error::Api(e)) => *e,
        other => panic!("GET {path}: expected an API error, got {other:?}"),
    }
}

fn usage_of(list: &Value, pod: &str) -> Value {
    let item = list["items"].as_array().unwrap().iter().find(|i| i["metadata"]["name"] == pod);
    item.map(|i| i["containers"].clone()).unwrap_or(Value::Null)
}

fn metrics_apis_answer_from_annotations(backend: Backend) {
    let (server, _apis) = start(backend);
    let admin = Client::new(server.admin_config(), ClientOptions::default()).unwrap();
    Api::<Namespace>::cluster(&admin).create(&from(json!({"metadata": {"name": NS}})), &PostParams::default()).unwrap();
    // No controllers run: the default ServiceAccount pods need.
    let account: ServiceAccount = from(json!({"metadata": {"name": "default"}}));
    Api::<ServiceAccount>::namespaced(&admin, NS).create(&account, &PostParams::default()).unwrap();
    let node: Node = from(json!({"metadata": {"name": "worker-1", "labels": {"pool": "a"}}}));
    Api::<Node>::cluster(&admin).create(&node, &PostParams::default()).unwrap();
    let web = json!({"app": "web"});
    running_pod(
        &admin,
        "own",
        "worker-1",
        web.clone(),
        json!({"kcm-sandbox.dev/cpu-usage": "300m", "kcm-sandbox.dev/memory-usage": "64Mi",
            "kcm-sandbox.dev/cpu-usage.sidecar": "50m", "kcm-sandbox.dev/metric.queue-depth": "7"}),
        &["main", "sidecar"],
    );
    running_pod(&admin, "lb-1", "worker-1", web.clone(), json!({"kcm-sandbox.dev/metric.queue-depth": "3"}), &["main"]);
    running_pod(&admin, "lb-2", "worker-1", web.clone(), json!({}), &["main"]);
    let service: Service = from(json!({"metadata": {"name": "web",
        "annotations": {"kcm-sandbox.dev/cpu-load": "1", "kcm-sandbox.dev/memory-load": "200Mi",
            "kcm-sandbox.dev/metric.requests-per-second": "2500m"}},
        "spec": {"selector": web, "ports": [{"port": 80}]}}));
    Api::<Service>::namespaced(&admin, NS).create(&service, &PostParams::default()).unwrap();
    let pending: Pod =
        from(json!({"metadata": {"name": "pending"}, "spec": {"containers": [{"name": "main", "image": "x"}]}}));
    Api::<Pod>::namespaced(&admin, NS).create(&pending, &PostParams::default()).unwrap();
    let external: ConfigMap =
        from(json!({"metadata": {"name": "kcm-sandbox-external-metrics", "labels": {"queue": "jobs"}},
        "data": {"queue-messages": "42"}}));
    Api::<ConfigMap>::namespaced(&admin, NS).create(&external, &PostParams::default()).unwrap();

    // Discovery lists the three groups.
    let groups = get(&admin, "/apis");
    for group in ["metrics.k8s.io", "custom.metrics.k8s.io", "external.metrics.k8s.io"] {
        assert!(groups["groups"].as_array().unwrap().iter().any(|g| g["name"] == group), "{group} in {groups}");
    }
    let resources = get(&admin, "/apis/metrics.k8s.io/v1beta1");
    let names: Vec<&Value> = resources["resources"].as_array().unwrap().iter().map(|r| &r["name"]).collect();
    assert_eq!(names, [&json!("nodes"), &json!("pods")]);

    // Registered as APIServices, available.
    for (group, version) in
        [("metrics.k8s.io", "v1beta1"), ("custom.metrics.k8s.io", "v1beta2"), ("external.metrics.k8s.io", "v1beta1")]
    {
        let api_service = get(&admin, &format!("/apis/apiregistration.k8s.io/v1/apiservices/{version}.{group}"));
        let available =
            api_service["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Available");
        assert_eq!(available.map(|c| &c["status"]), Some(&json!("True")), "{api_service}");
    }

    // PodMetrics: own usage split over containers (one set directly), the Service's load spread.
    let list = get(&admin, &format!("/apis/metrics.k8s.io/v1beta1/namespaces/{NS}/pods"));
    assert_eq!(list["kind"], "PodMetricsList");
    assert_eq!(list["items"].as_array().unwrap().len(), 3, "only running pods: {list}");
    assert_eq!(
        usage_of(&list, "own"),
        json!([{"name": "main", "usage": {"cpu": "150m", "memory": "32Mi"}},
        {"name": "sidecar", "usage": {"cpu": "50m", "memory": "32Mi"}}])
    );
    assert_eq!(usage_of(&list, "lb-1"), json!([{"name": "main", "usage": {"cpu": "500m", "memory": "100Mi"}}]));
    let one = get(&admin, &format!("/apis/metrics.k8s.io/v1beta1/namespaces/{NS}/pods/lb-2"));
    assert_eq!((&one["kind"], &one["window"]), (&json!("PodMetrics"), &json!("15s")));
    assert_eq!(one["metadata"]["labels"], json!({"app": "web"}));
    let missing = refusal(&admin, &format!("/apis/metrics.k8s.io/v1beta1/namespaces/{NS}/pods/pending"));
    assert_eq!(missing.code, 404);
    let node = get(&admin, "/apis/metrics.k8s.io/v1beta1/nodes/worker-1");
    assert_eq!(node["usage"], json!({"cpu": "1200m", "memory": "264Mi"}));
    assert_eq!(get(&admin, "/apis/metrics.k8s.io/v1beta1/pods")["items"].as_array().unwrap().len(), 3);

    // Custom metrics of pods and of an object.
    let custom = "/apis/custom.metrics.k8s.io/v1beta2";
    let pods = get(&admin, &format!("{custom}/namespaces/{NS}/pods/*/queue-depth?labelSelector=app%3Dweb"));
    let values: Vec<(&Value, &Value)> =
        pods["items"].as_array().unwrap().iter().map(|i| (&i["describedObject"]["name"], &i["value"])).collect();
    assert_eq!(values, [(&json!("lb-1"), &json!("3")), (&json!("own"), &json!("7"))]);
    let object = get(&admin, &format!("{custom}/namespaces/{NS}/services/web/requests-per-second"));
    assert_eq!(object["items"][0]["describedObject"]["kind"], "Service");
    assert_eq!(object["items"][0]["value"], "2500m");
    assert_eq!(refusal(&admin, &format!("{custom}/namespaces/{NS}/services/web/unset")).code, 404);

    // External metrics, filtered on the ConfigMap's labels.
    let external = "/apis/external.metrics.k8s.io/v1beta1";
    let matching = get(&admin, &format!("{external}/namespaces/{NS}/queue-messages?labelSelector=queue%3Djobs"));
    assert_eq!(matching["items"][0]["value"], "42");
    assert_eq!(matching["items"][0]["metricLabels"], json!({"queue": "jobs"}));
    let other = get(&admin, &format!("{external}/namespaces/{NS}/queue-messages?labelSelector=queue%3Dother"));
    assert_eq!(other["items"], json!([]));

    // The HPA controller's role may read them; a user without rights may not.
    let hpa = Client::new(
        server
            .user_config(
                "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
                &["system:serviceaccounts", "system:serviceaccounts:kube-system"],
            )
            .unwrap(),
        ClientOptions::default(),
    )
    .unwrap();
    let hpa_reads = [
        format!("/apis/metrics.k8s.io/v1beta1/namespaces/{NS}/pods?labelSelector=app%3Dweb"),
        format!("{custom}/namespaces/{NS}/pods/*/queue-depth?labelSelector=app%3Dweb"),
        format!("{external}/namespaces/{NS}/queue-messages"),
    ];
    for path in hpa_reads {
        get(&hpa, &path);
    }
    let nobody = Client::new(server.user_config("nobody", &[]).unwrap(), ClientOptions::default()).unwrap();
    let denied = refusal(&nobody, &format!("/apis/metrics.k8s.io/v1beta1/namespaces/{NS}/pods"));
    assert_eq!(denied.code, 403);
}

on_both_backends!(metrics_apis_answer_from_annotations);
