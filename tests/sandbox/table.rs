//! Server-side printing against real `kubectl`: `kubectl get` asks for `as=Table` and prints
//! the sandbox's columns and cells, as against kube-apiserver. A Deployment's pods run on
//! simulated nodes with the deployment, ReplicaSet and endpoints controllers. Skipped (with a
//! note) where kubectl is not installed.

use crate::kubectl;

use std::process::Stdio;

use kcm::app::controllers::named;

use crate::harness;

use harness::{Cluster, eventually};
use kubectl::{Kubectl, collect_stdout};

const MANIFEST: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
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
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector:
    app: web
  ports:
  - port: 80
    protocol: TCP
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: reader
rules:
- apiGroups: [\"\"]
  resources: [pods]
  verbs: [get]
";

/// A cluster and kubectl pointed at it as its admin.
struct Bed {
    kubectl: Kubectl,
    _cluster: Cluster,
}

impl Bed {
    fn start() -> Bed {
        let cluster = harness::with(&[
            named("deployment-controller"),
            named("replicaset-controller"),
            named("endpoints-controller"),
        ])
        .start();
        Bed { kubectl: Kubectl::for_sandbox(cluster.sandbox(), "table"), _cluster: cluster }
    }
}

impl std::ops::Deref for Bed {
    type Target = Kubectl;
    fn deref(&self) -> &Kubectl {
        &self.kubectl
    }
}

/// A printed table: its lines with runs of spaces collapsed to one.
fn lines(table: &str) -> Vec<String> {
    table.lines().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect()
}

/// The row whose first column starts with `prefix`, as its columns.
fn row<'a>(table: &'a str, prefix: &str) -> Option<Vec<&'a str>> {
    table.lines().find(|l| l.starts_with(prefix)).map(|l| l.split_whitespace().collect())
}

fn is_age(cell: &str) -> bool {
    cell.ends_with('s') || cell.ends_with('m') && cell[..cell.len() - 1].chars().all(|c| c.is_ascii_digit())
}

#[test]
fn kubectl_get_prints_the_servers_tables() {
    if !kubectl::available("the kubectl table test") {
        return;
    }
    let bed = Bed::start();
    let manifest = bed.dir.join("web.yaml");
    std::fs::write(&manifest, MANIFEST).unwrap();
    bed.ok(&["apply", "-f", manifest.to_str().unwrap()]);
    let ready = eventually("the deployment's two pods to be ready", || {
        let table = bed.ok(&["get", "deploy", "web"]);
        let done = row(&table, "web ").is_some_and(|cells| cells[1] == "2/2");
        done.then_some(table)
    });

    // Deployments: READY UP-TO-DATE AVAILABLE AGE, then the wide columns.
    assert_eq!(lines(&ready)[0], "NAME READY UP-TO-DATE AVAILABLE AGE");
    let cells = row(&ready, "web ").unwrap();
    assert_eq!(cells[..4], ["web", "2/2", "2", "2"]);
    assert!(is_age(cells[4]), "{ready}");
    let wide = bed.ok(&["get", "deploy", "web", "-o", "wide"]);
    assert_eq!(lines(&wide)[0], "NAME READY UP-TO-DATE AVAILABLE AGE CONTAINERS IMAGES SELECTOR");
    assert_eq!(row(&wide, "web ").unwrap()[5..], ["app", "nginx:1.27", "app=web"]);

    // Pods: READY STATUS RESTARTS AGE; wide adds IP NODE NOMINATED NODE READINESS GATES.
    let pods = bed.ok(&["get", "pods"]);
    assert_eq!(lines(&pods)[0], "NAME READY STATUS RESTARTS AGE");
    let pod = row(&pods, "web-").expect("a web pod");
    assert_eq!(pod[1..4], ["1/1", "Running", "0"]);
    assert!(is_age(pod[4]), "{pods}");
    let wide = bed.ok(&["get", "pods", "-o", "wide"]);
    assert_eq!(lines(&wide)[0], "NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE READINESS GATES");
    let pod = row(&wide, "web-").expect("a web pod");
    assert!(pod[5].parse::<std::net::IpAddr>().is_ok(), "{wide}");
    assert!(["node-a", "node-b"].contains(&pod[6]), "{wide}");
    assert_eq!(pod[7..], ["<none>", "<none>"]);

    // Label columns come from the rows' metadata; sorting asks for whole objects (includeObject=Object).
    let labelled = bed.ok(&["get", "pods", "--show-labels"]);
    assert_eq!(lines(&labelled)[0], "NAME READY STATUS RESTARTS AGE LABELS");
    assert!(row(&labelled, "web-").unwrap()[5].contains("app=web"), "{labelled}");
    let sorted = bed.ok(&["get", "pods", "--sort-by=.spec.nodeName", "-o", "wide"]);
    let nodes: Vec<&str> = sorted.lines().skip(1).filter_map(|l| l.split_whitespace().nth(6)).collect();
    assert!(nodes.len() == 2 && nodes.is_sorted(), "{sorted}");

    // Nodes: STATUS ROLES AGE VERSION; a cordoned node is Ready,SchedulingDisabled.
    bed.ok(&["cordon", "node-b"]);
    let nodes = bed.ok(&["get", "nodes"]);
    assert_eq!(lines(&nodes)[0], "NAME STATUS ROLES AGE VERSION");
    assert_eq!(row(&nodes, "node-a").unwrap()[1..3], ["Ready", "<none>"]);
    assert_eq!(row(&nodes, "node-a").unwrap()[4], "v1.36.2");
    assert_eq!(row(&nodes, "node-b").unwrap()[1], "Ready,SchedulingDisabled");
    let wide = bed.ok(&["get", "nodes", "-o", "wide"]);
    assert_eq!(
        lines(&wide)[0],
        "NAME STATUS ROLES AGE VERSION INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME"
    );
    assert!(
        lines(&wide)[1].ends_with("<none> Ubuntu 24.04.2 LTS 6.8.0-60-generic (amd64) containerd://2.0.0"),
        "{wide}"
    );

    // Several kinds at once: one table each, names qualified by kind.
    let endpoints = eventually("the service's endpoints", || {
        let table = bed.ok(&["get", "ep", "web"]);
        let done = row(&table, "web ").is_some_and(|cells| cells[1].contains(":80,"));
        done.then_some(table)
    });
    assert_eq!(lines(&endpoints)[0], "NAME ENDPOINTS AGE");
    let all = bed.ok(&["get", "deploy,rs,svc,ep"]);
    let headers: Vec<String> = lines(&all).into_iter().filter(|l| l.starts_with("NAME ")).collect();
    assert_eq!(
        headers,
        [
            "NAME READY UP-TO-DATE AVAILABLE AGE",
            "NAME DESIRED CURRENT READY AGE",
            "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE",
            "NAME ENDPOINTS AGE"
        ]
    );
    let replica_set = row(&all, "replicaset.apps/web-").expect("the ReplicaSet's row");
    assert_eq!(replica_set[1..4], ["2", "2", "2"]);
    let service = row(&all, "service/web ").expect("the service's row");
    assert_eq!((service[1], service[3], service[4]), ("ClusterIP", "<none>", "80/TCP"));
    assert!(service[2].parse::<std::net::IpAddr>().is_ok(), "{all}");

    // Events: LAST SEEN TYPE REASON OBJECT MESSAGE.
    let events = bed.ok(&["get", "events"]);
    assert_eq!(lines(&events)[0], "LAST SEEN TYPE REASON OBJECT MESSAGE");
    let created = lines(&events).into_iter().find(|l| l.contains("SuccessfulCreate") && l.contains("replicaset/web-"));
    assert!(created.is_some_and(|l| l.contains("Normal SuccessfulCreate replicaset/web-")), "{events}");

    // Namespaces and a kind with the default table (Name, Created At).
    let namespaces = bed.ok(&["get", "ns", "default"]);
    assert_eq!(lines(&namespaces)[0], "NAME STATUS AGE");
    assert_eq!(row(&namespaces, "default").unwrap()[1], "Active");

    // Node Leases name their holder; a Role has the default columns (Name, Created At).
    let leases = bed.ok(&["get", "leases", "-n", "kube-node-lease"]);
    assert_eq!(lines(&leases)[0], "NAME HOLDER AGE");
    assert_eq!(row(&leases, "node-a").unwrap()[1], "node-a");
    let roles = bed.ok(&["get", "roles"]);
    assert_eq!(lines(&roles)[0], "NAME CREATED AT");
    let reader = row(&roles, "reader").expect("the Role's row");
    assert!(reader[1].ends_with('Z') && reader[1].contains('T'), "{roles}");

    // A watch prints the header once and a row per change.
    let mut watch = bed
        .command(&["get", "deploy", "web", "-w", "--request-timeout=45s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl get -w starts");
    let printed = collect_stdout(&mut watch);
    let text = || String::from_utf8_lossy(&printed.lock()).into_owned();
    eventually("the watch's first row", || text().contains("\nweb ").then_some(()));
    bed.ok(&["scale", "deploy", "web", "--replicas=3"]);
    let watched = eventually("the watch to print the scaled deployment", || {
        let text = text();
        text.lines()
            .any(|l| l.starts_with("web ") && l.split_whitespace().nth(1).is_some_and(|r| r.ends_with("/3")))
            .then_some(text)
    });
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(lines(&watched).iter().filter(|l| l.starts_with("NAME ")).count(), 1, "{watched}");
    assert_eq!(lines(&watched)[0], "NAME READY UP-TO-DATE AVAILABLE AGE");
}
