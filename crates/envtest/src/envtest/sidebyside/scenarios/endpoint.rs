//! Side-by-side scenario of the `endpoint` controller: `service-endpoints`.

use serde_json::json;

use super::*;

pub(super) static SCENARIOS: &[Scenario] = &[Scenario {
    name: "service-endpoints",
    summary: "a Service's Endpoints and EndpointSlices follow its pods",
    nodes: 3,
    flags: &[],
    apiserver_flags: &[],
    compare_nodes: false,
    run: service_endpoints,
}];

pub(super) fn service_endpoints(steps: &mut Steps) -> Result<(), Error> {
    steps.create(
        "/api/v1/namespaces/sbs/services",
        json!({"metadata": {"name": "web"},
               "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}),
    )?;
    steps.create(RS, replica_set("web", 3))?;
    steps.wait_pods_ready(NAMESPACE, "app=web", 3)?;
    let endpoints_ready = |count: usize| {
        move |s: &Steps| -> Result<Option<()>, Error> {
            let endpoints = s.get("/api/v1/namespaces/sbs/endpoints/web")?.unwrap_or_default();
            let addresses = endpoints["subsets"][0]["addresses"].as_array().map_or(0, Vec::len);
            let slices = s.list(
                "/apis/discovery.k8s.io/v1/namespaces/sbs/endpointslices?labelSelector=kubernetes.io/service-name=web",
            )?;
            let ready = slices
                .iter()
                .flat_map(|slice| slice["endpoints"].as_array().cloned().unwrap_or_default())
                .filter(|e| e["conditions"]["ready"] == true)
                .count();
            Ok((addresses == count && ready == count).then_some(()))
        }
    };
    steps.wait("3 endpoints", endpoints_ready(3))?;
    steps.checkpoint("3 endpoints")?;
    // The three pods tie on every deletion rule: the one on node-3 is made the cheapest to
    // delete, so that both binaries remove the same one.
    let pods = steps.live_pods(NAMESPACE, "app=web")?;
    let doomed = pods
        .iter()
        .find(|p| p["spec"]["nodeName"] == "node-3")
        .ok_or_else(|| Error::Scenario("no pod on node-3".into()))?;
    let name = doomed["metadata"]["name"].as_str().unwrap_or_default();
    let cost = json!({"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "-100"}}});
    steps.patch(&format!("/api/v1/namespaces/{NAMESPACE}/pods/{name}"), cost)?;
    // Nothing shows when a controller's pod informer has seen the annotation, and the scale-down
    // must not overtake it (watches of different kinds are not ordered): give it time.
    std::thread::sleep(Duration::from_secs(2));
    steps.patch(&format!("{RS}/web"), json!({"spec": {"replicas": 2}}))?;
    steps.wait_pods_ready(NAMESPACE, "app=web", 2)?;
    steps.wait("2 endpoints", endpoints_ready(2))
}
