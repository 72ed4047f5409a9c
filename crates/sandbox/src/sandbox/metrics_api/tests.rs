use super::*;

/// Objects in memory.
struct Objects(Vec<(&'static str, Value)>);

impl Objects {
    fn of(&self, kind: &str, namespace: Option<&str>) -> Vec<Value> {
        let in_ns = |o: &Value| namespace.is_none_or(|ns| o["metadata"]["namespace"] == ns);
        self.0.iter().filter(|(k, o)| *k == kind && in_ns(o)).map(|(_, o)| o.clone()).collect()
    }
}

impl Source for Objects {
    fn pods(&self, namespace: Option<&str>) -> Result<Vec<Value>, BoxError> {
        Ok(self.of("pods", namespace))
    }
    fn services(&self, namespace: Option<&str>) -> Result<Vec<Value>, BoxError> {
        Ok(self.of("services", namespace))
    }
    fn nodes(&self) -> Result<Vec<Value>, BoxError> {
        Ok(self.of("nodes", None))
    }
    fn object(&self, namespace: &str, group: &str, plural: &str, name: &str) -> Result<Option<Value>, BoxError> {
        let kind = if group.is_empty() { plural.to_string() } else { format!("{plural}.{group}") };
        Ok(self.of(&kind, Some(namespace)).into_iter().find(|o| o["metadata"]["name"] == name))
    }
}

fn pod(name: &str, node: &str, phase: &str, annotations: Value) -> (&'static str, Value) {
    (
        "pods",
        json!({"kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": name, "namespace": "ns", "labels": {"app": "web"}, "annotations": annotations},
        "spec": {"nodeName": node, "containers": [{"name": "main"}]}, "status": {"phase": phase}}),
    )
}

fn objects() -> Objects {
    Objects(vec![
        pod("a", "n1", "Running", json!({"kcm-sandbox.dev/cpu-usage": "250m", "kcm-sandbox.dev/metric.qps": "10"})),
        pod("b", "n1", "Running", json!({"kcm-sandbox.dev/memory-usage": "64Mi"})),
        pod("pending", "", "Pending", json!({"kcm-sandbox.dev/metric.qps": "3"})),
        ("nodes", json!({"metadata": {"name": "n1"}})),
        (
            "services",
            json!({"kind": "Service", "apiVersion": "v1",
            "metadata": {"name": "web", "namespace": "ns", "annotations": {"kcm-sandbox.dev/metric.rps": "2k"}},
            "spec": {"selector": {"app": "web"}}}),
        ),
        (
            "configmaps",
            json!({"metadata": {"name": EXTERNAL_CONFIGMAP, "namespace": "ns", "labels": {"queue": "jobs"}},
            "data": {"queue-length": "30"}}),
        ),
    ])
}

fn get(path: &str, query: &[(&str, &str)]) -> Answer {
    let query: Vec<(String, String)> = query.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let now = jiff::Timestamp::from_second(1_700_000_000).unwrap();
    answer(path, &query, &objects(), now).expect("a metrics path")
}

#[test]
fn pod_metrics_cover_running_pods_only() {
    let (code, list) = get("/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods", &[]);
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "PodMetricsList");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["containers"], json!([{"name": "main", "usage": {"cpu": "250m", "memory": "0"}}]));
    assert_eq!(items[0]["window"], "15s");
    assert_eq!(items[0]["timestamp"], "2023-11-14T22:13:20Z");
    let (code, one) = get("/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods/b", &[]);
    assert_eq!((code, &one["kind"]), (200, &json!("PodMetrics")));
    assert_eq!(one["containers"][0]["usage"], json!({"cpu": "0", "memory": "64Mi"}));
    let (code, missing) = get("/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods/pending", &[]);
    assert_eq!(code, 404);
    assert_eq!(missing["message"], "pods.metrics.k8s.io \"ns/pending\" not found");
    let (code, missing) = get("/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods/nope", &[]);
    assert_eq!((code, missing["message"].as_str()), (404, Some("pods \"ns/nope\" not found")));
    let (code, missing) = get("/apis/metrics.k8s.io/v1beta1/nodes/nope", &[]);
    assert_eq!((code, missing["message"].as_str()), (404, Some("node \"nope\" not found")));
}

#[test]
fn node_metrics_sum_their_pods() {
    let (code, node) = get("/apis/metrics.k8s.io/v1beta1/nodes/n1", &[]);
    assert_eq!(code, 200);
    assert_eq!(node["usage"], json!({"cpu": "250m", "memory": "64Mi"}));
    assert_eq!(get("/apis/metrics.k8s.io/v1beta1/nodes", &[]).1["items"].as_array().unwrap().len(), 1);
}

#[test]
fn custom_metrics_for_pods_and_objects() {
    let path = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/*/qps";
    let (code, list) = get(path, &[("labelSelector", "app=web")]);
    assert_eq!(code, 200);
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "pods with the annotation, running or not: {list}");
    assert_eq!(items[0]["describedObject"], json!({"kind": "Pod", "namespace": "ns", "name": "a", "apiVersion": "v1"}));
    assert_eq!(items[0]["metric"], json!({"name": "qps"}));
    assert_eq!(items[0]["value"], "10");
    let (code, object) = get("/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/services/web/rps", &[]);
    assert_eq!(code, 200);
    assert_eq!(object["items"][0]["value"], "2k");
    assert_eq!(object["items"][0]["describedObject"]["kind"], "Service");
    assert_eq!(get("/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/services/web/other", &[]).0, 404);
    assert_eq!(get("/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/services/nope/rps", &[]).0, 404);
}

#[test]
fn external_metrics_filter_on_the_configmaps_labels() {
    let path = "/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/queue-length";
    let (code, list) = get(path, &[("labelSelector", "queue=jobs")]);
    assert_eq!(code, 200);
    assert_eq!(list["items"][0]["metricLabels"], json!({"queue": "jobs"}));
    assert_eq!(list["items"][0]["value"], "30");
    assert!(get(path, &[("labelSelector", "queue=other")]).1["items"].as_array().unwrap().is_empty());
    assert!(
        get("/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/unknown", &[]).1["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn discovery_documents_and_other_paths() {
    assert_eq!(get("/apis/metrics.k8s.io", &[]).1["preferredVersion"]["version"], "v1beta1");
    let list = get("/apis/metrics.k8s.io/v1beta1", &[]).1;
    assert_eq!(list["resources"][1]["kind"], "PodMetrics");
    assert_eq!(get("/apis/metrics.k8s.io/v1/nodes", &[]).0, 404);
    assert!(answer("/apis/apps/v1", &[], &objects(), jiff::Timestamp::now()).is_none());
}

/// A source whose reads fail, as a real API server's can.
struct Failing;

impl Source for Failing {
    fn pods(&self, _: Option<&str>) -> Result<Vec<Value>, BoxError> {
        Err("GET /api/v1/pods: connection refused".into())
    }
    fn services(&self, _: Option<&str>) -> Result<Vec<Value>, BoxError> {
        Ok(Vec::new())
    }
    fn nodes(&self) -> Result<Vec<Value>, BoxError> {
        Ok(Vec::new())
    }
    fn object(&self, _: &str, _: &str, _: &str, _: &str) -> Result<Option<Value>, BoxError> {
        Ok(None)
    }
}

#[test]
fn a_failing_source_is_a_500_with_its_message() {
    let (code, body) =
        answer("/apis/metrics.k8s.io/v1beta1/pods", &[], &Failing, jiff::Timestamp::now()).expect("a metrics path");
    assert_eq!((code, &body["reason"]), (500, &json!("InternalError")));
    assert_eq!(body["message"], "GET /api/v1/pods: connection refused");
}
