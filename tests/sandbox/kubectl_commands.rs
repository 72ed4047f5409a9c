//! `kubectl` (1.32+) against kcm-sandbox with its written admin kubeconfig: the everyday
//! commands must work as against kube-apiserver. Skipped (with a note) where kubectl is not
//! installed. Objects are created from manifests here; kubectl's typed subcommands, which send
//! protobuf, are covered by `protobuf`.

use crate::harness;
use crate::kubectl;

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use kubectl::{Bed, PATIENCE, collect_stdout, wait_with_deadline};
use parking_lot::Mutex;
use serde_json::Value;

const DEPLOYMENT: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app: web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: app
        image: nginx:1.27
      - name: sidecar
        image: busybox:1.36
";

fn path(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// The JSON objects printed so far (kubectl -o json prints one document per event).
fn printed_objects(buffer: &Mutex<Vec<u8>>) -> Vec<Value> {
    let bytes = buffer.lock().clone();
    serde_json::Deserializer::from_slice(&bytes).into_iter::<Value>().map_while(Result::ok).collect()
}

fn eventually<T>(what: &str, check: impl FnMut() -> Option<T>) -> T {
    harness::poll_until(PATIENCE, Duration::from_millis(50), what, check)
}

fn images(deployment: &Value) -> Vec<(String, String)> {
    deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), c["image"].as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn kubectl_manages_a_deployment() {
    if !kubectl::available("the kubectl test") {
        return;
    }
    let bed = Bed::start("kubectl");
    let first = bed.write("web.yaml", DEPLOYMENT);
    let second = bed.write("web-2.yaml", &DEPLOYMENT.replace("nginx:1.27", "nginx:1.28"));

    // kubectl validates fields on the server by default; unknown ones are refused.
    let bogus = bed.write("bogus.yaml", &DEPLOYMENT.replace("  replicas: 2\n", "  replicas: 2\n  bogus: true\n"));
    let refused = bed.run(&["create", "-f", path(&bogus)]);
    assert!(!refused.status.success());
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr).trim(),
        format!(
            "Error from server (BadRequest): error when creating \"{}\": Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: unknown field \"spec.bogus\"",
            path(&bogus)
        )
    );
    let warned = bed.run(&["create", "--validate=warn", "--dry-run=server", "-f", path(&bogus)]);
    assert!(warned.status.success());
    assert_eq!(String::from_utf8_lossy(&warned.stderr).trim(), "Warning: unknown field \"spec.bogus\"");
    assert_eq!(String::from_utf8_lossy(&warned.stdout).trim(), "deployment.apps/web created (server dry run)");

    assert_eq!(bed.ok(&["create", "-f", path(&first)]).trim(), "deployment.apps/web created");
    let created = bed.json(&["get", "deploy", "web", "-o", "json"]);
    assert_eq!(created["metadata"]["generation"], 1);
    assert_eq!(created["spec"]["replicas"], 2);

    assert_eq!(bed.ok(&["apply", "-f", path(&second)]).trim(), "deployment.apps/web configured");
    let applied = bed.json(&["get", "deploy", "web", "-o", "json"]);
    assert_eq!(applied["metadata"]["generation"], 2);
    assert_eq!(images(&applied), [("app".into(), "nginx:1.28".into()), ("sidecar".into(), "busybox:1.36".into())]);
    assert!(applied["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].is_string());

    assert_eq!(bed.ok(&["apply", "-f", path(&second)]).trim(), "deployment.apps/web unchanged");
    let unchanged = bed.json(&["get", "deploy", "web", "-o", "json"]);
    assert_eq!(unchanged["metadata"]["resourceVersion"], applied["metadata"]["resourceVersion"]);

    assert_eq!(bed.ok(&["scale", "deploy", "web", "--replicas=5"]).trim(), "deployment.apps/web scaled");
    let scaled = bed.json(&["get", "deploy", "web", "-o", "json"]);
    assert_eq!((scaled["spec"]["replicas"].as_i64(), scaled["metadata"]["generation"].as_i64()), (Some(5), Some(3)));
    assert_eq!(scaled["kind"], "Deployment");
    assert_eq!(scaled["apiVersion"], "apps/v1");

    // A watch sees the label being added.
    let mut watch = bed
        .command(&["get", "deploy", "web", "-w", "-o", "json", "--request-timeout=45s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl get -w starts");
    let printed = collect_stdout(&mut watch);
    eventually("the watch's first object", || (!printed_objects(&printed).is_empty()).then_some(()));
    assert_eq!(bed.ok(&["label", "deploy", "web", "tier=front"]).trim(), "deployment.apps/web labeled");
    let labelled = eventually("the watch to print the labelled deployment", || {
        printed_objects(&printed).into_iter().find(|o| o["metadata"]["labels"]["tier"] == "front")
    });
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(labelled["metadata"]["name"], "web");

    assert_eq!(bed.ok(&["get", "deploy", "-l", "tier=front", "-o", "name"]).trim(), "deployment.apps/web");
    assert_eq!(bed.ok(&["get", "deploy", "-l", "tier in (back,middle)", "-o", "name"]).trim(), "");
    assert_eq!(bed.ok(&["get", "deploy", "-l", "app=web,!tier", "-o", "name"]).trim(), "");

    assert_eq!(bed.ok(&["delete", "deploy", "web"]).trim(), "deployment.apps \"web\" deleted");
    let missing = bed.run(&["get", "deploy", "web"]);
    assert!(!missing.status.success());
    assert_eq!(
        String::from_utf8_lossy(&missing.stderr).trim(),
        "Error from server (NotFound): deployments.apps \"web\" not found"
    );
}

#[test]
fn kubectl_discovers_resources_and_lists_namespaces() {
    if !kubectl::available("the kubectl test") {
        return;
    }
    let bed = Bed::start("kubectl");
    let resources = bed.ok(&["api-resources"]);
    let deployments = resources.lines().find(|l| l.starts_with("deployments ")).expect("deployments listed");
    let columns: Vec<&str> = deployments.split_whitespace().collect();
    assert_eq!(columns, ["deployments", "deploy", "apps/v1", "true", "Deployment"]);
    let names = bed.ok(&["api-resources", "-o", "name"]);
    for name in ["pods", "deployments.apps", "leases.coordination.k8s.io", "events.events.k8s.io"] {
        assert!(names.lines().any(|l| l == name), "{name} missing from {names}");
    }
    let namespaced = bed.ok(&["api-resources", "--namespaced=false", "-o", "name"]);
    assert!(namespaced.lines().any(|l| l == "namespaces") && !namespaced.lines().any(|l| l == "pods"));

    let namespaces = bed.ok(&["get", "ns", "-o", "name"]);
    let mut listed: Vec<&str> = namespaces.lines().collect();
    listed.sort();
    assert_eq!(
        listed,
        ["namespace/default", "namespace/kube-node-lease", "namespace/kube-public", "namespace/kube-system"]
    );
    let table = bed.ok(&["get", "ns", "default"]);
    assert!(table.starts_with("NAME"), "{table}");
    let default = bed.json(&["get", "ns", "default", "-o", "json"]);
    assert_eq!(default["status"]["phase"], "Active");

    // A manifest with several documents, then a namespace-scoped get.
    let manifest = "\
apiVersion: v1
kind: Namespace
metadata:
  name: team
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: team
data:
  colour: blue
";
    let file = bed.write("team.yaml", manifest);
    let created = bed.ok(&["apply", "-f", path(&file)]);
    assert_eq!(created.lines().collect::<Vec<_>>(), ["namespace/team created", "configmap/settings created"]);
    let settings = bed.json(&["get", "cm", "settings", "-n", "team", "-o", "json"]);
    assert_eq!(settings["data"]["colour"], "blue");
    let mut stdin = bed
        .command(&["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    stdin.stdin.take().unwrap().write_all(manifest.replace("blue", "green").as_bytes()).unwrap();
    let output = wait_with_deadline(stdin, &["apply", "-f", "-"]);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).lines().collect::<Vec<_>>(),
        ["namespace/team unchanged", "configmap/settings configured"]
    );
    assert_eq!(bed.json(&["get", "cm", "settings", "-n", "team", "-o", "json"])["data"]["colour"], "green");
    assert_eq!(bed.ok(&["delete", "ns", "team", "--wait=false"]).trim(), "namespace \"team\" deleted");
    let terminating = bed.json(&["get", "ns", "team", "-o", "json"]);
    assert_eq!(terminating["status"]["phase"], "Terminating");
}

const METERED: &str = "\
apiVersion: v1
kind: Node
metadata:
  name: worker-1
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: default
---
apiVersion: v1
kind: Pod
metadata:
  name: metered
  annotations:
    kcm-sandbox.dev/cpu-usage: 250m
    kcm-sandbox.dev/memory-usage: 64Mi
spec:
  nodeName: worker-1
  containers:
  - name: app
    image: nginx:1.27
";

/// `kubectl top` reads the metrics APIs the sandbox serves (docs/sandbox.md, "Metrics APIs").
#[test]
fn kubectl_top_shows_annotated_usage() {
    if !kubectl::available("kubectl_top_shows_annotated_usage") {
        return;
    }
    let bed = Bed::start("top");
    let manifest = bed.write("metered.yaml", METERED);
    bed.ok(&["apply", "-f", path(&manifest)]);
    bed.ok(&[
        "patch",
        "pod",
        "metered",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Running"}}"#,
    ]);
    let pods = bed.ok(&["top", "pods", "--no-headers"]);
    let columns: Vec<&str> = pods.split_whitespace().collect();
    assert_eq!(columns, ["metered", "250m", "64Mi"], "{pods}");
    let nodes = bed.ok(&["top", "nodes", "--no-headers"]);
    assert!(nodes.starts_with("worker-1") && nodes.contains("250m") && nodes.contains("64Mi"), "{nodes}");
}

const GUARDED: &str = "\
apiVersion: v1
kind: Pod
metadata:
  name: guarded
  labels:
    app: guarded
spec:
  containers:
  - name: app
    image: nginx:1.27
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: guarded
spec:
  minAvailable: 1
  selector:
    matchLabels:
      app: guarded
";

/// The status a disruption controller would write for PDB `guarded`.
fn budget_status(allowed: i32) -> String {
    format!(
        r#"{{"status":{{"observedGeneration":1,"disruptionsAllowed":{allowed},"currentHealthy":1,"desiredHealthy":1,"expectedPods":1}}}}"#
    )
}

/// `kubectl drain` goes through the eviction subresource: refused while the budget allows no
/// disruption (kubectl retries until its timeout), done once it allows one.
#[test]
fn kubectl_drain_respects_a_disruption_budget() {
    use kcm_sandbox::sandbox::nodes::{NodeOptions, SimulatedNodes};
    use kcm_sandbox::sandbox::server::{Sandbox, SandboxOptions};

    if !kubectl::available("kubectl_drain_respects_a_disruption_budget") {
        return;
    }
    let sandbox =
        Sandbox::start(SandboxOptions { listen: "127.0.0.1:0".parse().unwrap(), ..SandboxOptions::default() })
            .expect("sandbox starts");
    let kubectl = kubectl::Kubectl::for_sandbox(&sandbox, "drain");
    let nodes = SimulatedNodes::start(sandbox.admin_config(), vec!["node-1".into()], NodeOptions::default())
        .expect("the node starts");
    kubectl.ok(&["create", "serviceaccount", "default"]);
    let manifest = kubectl.write("guarded.yaml", GUARDED);
    kubectl.ok(&["apply", "-f", path(&manifest)]);
    eventually("pod guarded Running", || {
        let pod = kubectl.json(&["get", "pod", "guarded", "-o", "json"]);
        (pod["status"]["phase"] == "Running").then_some(())
    });
    let patch_status = |allowed| {
        kubectl.ok(&["patch", "pdb", "guarded", "--subresource=status", "--type=merge", "-p", &budget_status(allowed)])
    };
    patch_status(0);

    // --force: the pod has no controller.
    let refused = kubectl.run(&["drain", "node-1", "--force", "--timeout=3s"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "the drain should time out: {stderr}");
    assert!(stderr.contains("Cannot evict pod as it would violate the pod's disruption budget"), "{stderr}");
    let node = kubectl.json(&["get", "node", "node-1", "-o", "json"]);
    assert_eq!(node["spec"]["unschedulable"], true, "drain cordons first");

    patch_status(1);
    let drained = kubectl.ok(&["drain", "node-1", "--force", "--timeout=60s"]);
    assert!(drained.contains("pod/guarded evicted"), "{drained}");
    assert!(drained.contains("node/node-1 drained"), "{drained}");
    let budget = kubectl.json(&["get", "pdb", "guarded", "-o", "json"]);
    assert_eq!(budget["status"]["disruptionsAllowed"], 0, "the eviction was charged: {budget}");
    assert!(budget["status"]["disruptedPods"]["guarded"].is_string(), "{budget}");
    nodes.stop();
}
