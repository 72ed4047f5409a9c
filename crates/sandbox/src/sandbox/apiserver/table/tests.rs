//! Printer and table tests with fixed objects and a fixed "now".

use jiff::Timestamp;
use serde_json::{Value, json};

use super::printers::printer_for;
use super::{IncludeObject, TableRequest};
use crate::sandbox::storage::resources;

const NOW: &str = "2025-06-01T12:00:00Z";

fn now() -> Timestamp {
    NOW.parse().unwrap()
}

/// The cells a kind's printer gives an object.
fn cells(group: &str, kind: &str, object: Value) -> Vec<Value> {
    (printer_for(group, kind).expect(kind).row)(&object, now()).cells
}

fn column_names(group: &str, kind: &str) -> Vec<(&'static str, i32)> {
    printer_for(group, kind).unwrap().columns.iter().map(|c| (c.name, c.priority)).collect()
}

fn meta(name: &str, created: &str) -> Value {
    json!({"name": name, "namespace": "default", "creationTimestamp": created, "resourceVersion": "12"})
}

fn pod(status: Value) -> Value {
    json!({
        "metadata": meta("web-1", "2025-06-01T11:54:57Z"),
        "spec": {"nodeName": "node-a", "containers": [{"name": "app"}, {"name": "sidecar"}]},
        "status": status,
    })
}

fn running(name: &str, restarts: i64, finished: Option<&str>) -> Value {
    let mut status = json!({"name": name, "ready": true, "restartCount": restarts, "state": {"running": {}}});
    if let Some(at) = finished {
        status["lastState"] = json!({"terminated": {"exitCode": 1, "finishedAt": at}});
    }
    status
}

#[test]
fn pod_columns_match_upstream() {
    assert_eq!(
        column_names("", "Pod"),
        [
            ("Name", 0),
            ("Ready", 0),
            ("Status", 0),
            ("Restarts", 0),
            ("Age", 0),
            ("IP", 1),
            ("Node", 1),
            ("Nominated Node", 1),
            ("Readiness Gates", 1)
        ]
    );
}

#[test]
fn a_running_pod_with_restarts() {
    let status = json!({
        "phase": "Running",
        "podIPs": [{"ip": "10.0.0.7"}],
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [running("app", 2, Some("2025-06-01T11:59:30Z")), running("sidecar", 1, Some("2025-06-01T11:58:00Z"))],
    });
    assert_eq!(
        cells("", "Pod", pod(status)),
        [
            json!("web-1"),
            json!("2/2"),
            json!("Running"),
            json!("3 (30s ago)"),
            json!("5m3s"),
            json!("10.0.0.7"),
            json!("node-a"),
            json!("<none>"),
            json!("<none>")
        ]
    );
}

#[test]
fn pod_status_from_container_states() {
    let status_of = |status: Value| cells("", "Pod", pod(status))[2].as_str().unwrap().to_string();
    let creating = json!({"phase": "Pending", "containerStatuses": [
        {"name": "app", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}},
    ]});
    assert_eq!(status_of(creating), "ContainerCreating");
    let crashing = json!({"phase": "Running", "containerStatuses": [
        {"name": "app", "ready": false, "restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
        running("sidecar", 0, None),
    ]});
    assert_eq!(status_of(crashing), "CrashLoopBackOff");
    let completed = json!({"phase": "Succeeded", "containerStatuses": [
        {"name": "app", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
    ]});
    assert_eq!(status_of(completed.clone()), "Completed");
    let row = (printer_for("", "Pod").unwrap().row)(&pod(completed), now());
    assert_eq!(row.conditions[0]["reason"], "Succeeded");
    let exit = json!({"phase": "Failed", "containerStatuses": [
        {"name": "app", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 2}}},
    ]});
    assert_eq!(status_of(exit), "ExitCode:2");
    // The first container (last looked at) completed, another failed: the failure shows.
    let one_failed = json!({"phase": "Failed", "containerStatuses": [
        {"name": "a", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
        {"name": "b", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 1, "reason": "Error"}}},
    ]});
    assert_eq!(status_of(one_failed), "Error");
    assert_eq!(status_of(json!({"phase": "Pending"})), "Pending");
    assert_eq!(status_of(json!({"phase": "Failed", "reason": "Evicted"})), "Evicted");
    let gated = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]});
    assert_eq!(status_of(gated), "SchedulingGated");
}

#[test]
fn pod_status_while_initializing_and_terminating() {
    let mut object = pod(json!({"phase": "Pending", "initContainerStatuses": [
        {"name": "setup", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
        {"name": "migrate", "ready": false, "restartCount": 0, "state": {"running": {}}},
    ]}));
    object["spec"]["initContainers"] = json!([{"name": "setup"}, {"name": "migrate"}]);
    assert_eq!(cells("", "Pod", object.clone())[2], "Init:1/2");
    object["status"]["initContainerStatuses"][1]["state"] = json!({"waiting": {"reason": "CrashLoopBackOff"}});
    assert_eq!(cells("", "Pod", object.clone())[2], "Init:CrashLoopBackOff");
    object["status"]["initContainerStatuses"][1]["state"] = json!({"terminated": {"exitCode": 3}});
    assert_eq!(cells("", "Pod", object)[2], "Init:ExitCode:3");

    let mut deleting = pod(json!({"phase": "Running", "containerStatuses": [running("app", 0, None)]}));
    deleting["metadata"]["deletionTimestamp"] = json!("2025-06-01T11:59:00Z");
    assert_eq!(cells("", "Pod", deleting.clone())[2], "Terminating");
    deleting["status"]["reason"] = json!("NodeLost");
    assert_eq!(cells("", "Pod", deleting)[2], "Unknown");
}

#[test]
fn sidecars_count_towards_ready_and_readiness_gates_are_counted() {
    let mut object = pod(json!({
        "phase": "Running",
        "conditions": [{"type": "Initialized", "status": "True"}, {"type": "example.com/lb", "status": "True"}],
        "initContainerStatuses": [{"name": "proxy", "ready": true, "started": true, "restartCount": 1, "state": {"running": {}}}],
        "containerStatuses": [running("app", 0, None)],
    }));
    object["spec"]["initContainers"] = json!([{"name": "proxy", "restartPolicy": "Always"}]);
    object["spec"]["readinessGates"] =
        json!([{"conditionType": "example.com/lb"}, {"conditionType": "example.com/other"}]);
    let cells = cells("", "Pod", object);
    assert_eq!(
        (&cells[1], &cells[2], &cells[3], &cells[8]),
        (&json!("2/3"), &json!("Running"), &json!("1"), &json!("1/2"))
    );
}

#[test]
fn workload_rows() {
    let template =
        json!({"spec": {"containers": [{"name": "app", "image": "nginx:1.27"}, {"name": "log", "image": "busybox"}]}});
    let deployment = json!({
        "metadata": meta("web", "2025-06-01T10:30:00Z"),
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}]}, "template": template},
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    });
    assert_eq!(
        cells("apps", "Deployment", deployment),
        [
            json!("web"),
            json!("2/3"),
            json!(3),
            json!(2),
            json!("90m"),
            json!("app,log"),
            json!("nginx:1.27,busybox"),
            json!("app=web,tier in (a,b)")
        ]
    );
    let rs = json!({
        "metadata": meta("web-5d4f", "2025-05-31T11:00:00Z"),
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web", "pod-template-hash": "5d4f"}}, "template": template},
        "status": {"replicas": 3, "readyReplicas": 1},
    });
    assert_eq!(
        cells("apps", "ReplicaSet", rs),
        [
            json!("web-5d4f"),
            json!(3),
            json!(3),
            json!(1),
            json!("25h"),
            json!("app,log"),
            json!("nginx:1.27,busybox"),
            json!("app=web,pod-template-hash=5d4f")
        ]
    );
    let rc = json!({"metadata": meta("old", "2025-05-29T07:00:00Z"), "spec": {"replicas": 1, "selector": {"b": "2", "a": "1"}, "template": template}, "status": {"replicas": 1}});
    assert_eq!(
        cells("", "ReplicationController", rc)[1..],
        [json!(1), json!(1), json!(0), json!("3d5h"), json!("app,log"), json!("nginx:1.27,busybox"), json!("a=1,b=2")]
    );
    let sts = json!({"metadata": meta("db", "2025-06-01T11:59:00Z"), "spec": {"replicas": 2, "template": template}, "status": {"readyReplicas": 2}});
    assert_eq!(
        column_names("apps", "StatefulSet"),
        [("Name", 0), ("Ready", 0), ("Age", 0), ("Containers", 1), ("Images", 1)]
    );
    assert_eq!(cells("apps", "StatefulSet", sts)[1..3], [json!("2/2"), json!("60s")]);
    let ds = json!({
        "metadata": meta("agent", "2025-06-01T11:00:00Z"),
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}, "containers": []}}},
        "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2, "updatedNumberScheduled": 3, "numberAvailable": 2},
    });
    assert_eq!(
        cells("apps", "DaemonSet", ds),
        [
            json!("agent"),
            json!(3),
            json!(3),
            json!(2),
            json!(3),
            json!(2),
            json!("kubernetes.io/os=linux"),
            json!("60m"),
            json!(""),
            json!(""),
            json!("app=agent")
        ]
    );
}

#[test]
fn job_and_cron_job_rows() {
    assert_eq!(
        column_names("batch", "Job"),
        [
            ("Name", 0),
            ("Status", 0),
            ("Completions", 0),
            ("Duration", 0),
            ("Age", 0),
            ("Containers", 1),
            ("Images", 1),
            ("Selector", 1)
        ]
    );
    let job = |spec: Value, status: Value| json!({"metadata": meta("pi", "2025-06-01T11:50:00Z"), "spec": spec, "status": status});
    let done = job(
        json!({"completions": 1, "parallelism": 1}),
        json!({"succeeded": 1, "startTime": "2025-06-01T11:50:00Z", "completionTime": "2025-06-01T11:50:42Z", "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]}),
    );
    assert_eq!(cells("batch", "Job", done)[1..5], [json!("Complete"), json!("1/1"), json!("42s"), json!("10m")]);
    let running = job(json!({"parallelism": 3}), json!({"startTime": "2025-06-01T11:55:00Z"}));
    assert_eq!(cells("batch", "Job", running)[1..4], [json!("Running"), json!("0/1 of 3"), json!("5m")]);
    let suspended = job(json!({"completions": 5}), json!({"conditions": [{"type": "Suspended", "status": "True"}]}));
    assert_eq!(cells("batch", "Job", suspended)[1..4], [json!("Suspended"), json!("0/5"), json!("")]);
    let failed = job(json!({}), json!({"conditions": [{"type": "Failed", "status": "True"}]}));
    assert_eq!(cells("batch", "Job", failed)[1..3], [json!("Failed"), json!("0/1")]);

    let cron = json!({
        "metadata": meta("nightly", "2025-05-20T12:00:00Z"),
        "spec": {"schedule": "0 3 * * *", "suspend": false, "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}},
        "status": {"active": [{"name": "nightly-1"}], "lastScheduleTime": "2025-06-01T03:00:00Z"},
    });
    assert_eq!(
        cells("batch", "CronJob", cron),
        [
            json!("nightly"),
            json!("0 3 * * *"),
            json!("<none>"),
            json!("False"),
            json!(1),
            json!("9h"),
            json!("12d"),
            json!("c"),
            json!("i"),
            json!("<none>")
        ]
    );
}

#[test]
fn node_rows() {
    let node = json!({
        "metadata": {"name": "node-a", "creationTimestamp": "2025-05-29T12:00:00Z", "labels": {"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/": "x", "kubernetes.io/role": "worker"}},
        "spec": {"unschedulable": true},
        "status": {
            "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": "10.1.0.4"}, {"type": "Hostname", "address": "node-a"}],
            "nodeInfo": {"kubeletVersion": "v1.36.2", "osImage": "Ubuntu 24.04", "kernelVersion": "6.8.0", "containerRuntimeVersion": "containerd://2.0.0", "architecture": "amd64"},
        },
    });
    assert_eq!(
        cells("", "Node", node),
        [
            json!("node-a"),
            json!("Ready,SchedulingDisabled"),
            json!("control-plane,worker"),
            json!("3d"),
            json!("v1.36.2"),
            json!("10.1.0.4"),
            json!("<none>"),
            json!("Ubuntu 24.04"),
            json!("6.8.0 (amd64)"),
            json!("containerd://2.0.0")
        ]
    );
    let bare = json!({"metadata": {"name": "n"}, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}});
    assert_eq!(
        cells("", "Node", bare)[1..],
        [
            json!("NotReady"),
            json!("<none>"),
            json!("<unknown>"),
            json!(""),
            json!("<none>"),
            json!("<none>"),
            json!("<unknown>"),
            json!("<unknown>"),
            json!("<unknown>")
        ]
    );
    assert_eq!(cells("", "Node", json!({"metadata": {"name": "n"}}))[1], "Unknown");
}

#[test]
fn service_and_endpoint_rows() {
    let service = |spec: Value, status: Value| json!({"metadata": meta("web", "2025-06-01T11:00:00Z"), "spec": spec, "status": status});
    let cluster_ip = service(
        json!({"type": "ClusterIP", "clusterIPs": ["10.96.0.10"], "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}], "selector": {"k8s-app": "dns"}}),
        json!({}),
    );
    assert_eq!(
        cells("", "Service", cluster_ip),
        [
            json!("web"),
            json!("ClusterIP"),
            json!("10.96.0.10"),
            json!("<none>"),
            json!("53/UDP,53/TCP"),
            json!("60m"),
            json!("k8s-app=dns")
        ]
    );
    let lb = service(
        json!({"type": "LoadBalancer", "clusterIPs": ["10.96.0.11"], "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}], "externalIPs": ["1.2.3.4"]}),
        json!({"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}, {"ip": "5.6.7.8"}]}}),
    );
    assert_eq!(
        cells("", "Service", lb)[2..5],
        [json!("10.96.0.11"), json!("5.6.7.8,lb.example.com,1.2.3.4"), json!("80:30080/TCP")]
    );
    let pending = service(json!({"type": "LoadBalancer", "clusterIPs": ["None"]}), json!({}));
    assert_eq!(
        cells("", "Service", pending)[2..],
        [json!("None"), json!("<pending>"), json!("<none>"), json!("60m"), json!("<none>")]
    );
    let external = service(json!({"type": "ExternalName", "externalName": "db.example.com"}), json!({}));
    assert_eq!(cells("", "Service", external)[2..4], [json!("<none>"), json!("db.example.com")]);

    let addresses = json!([{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "fd00::3"}]);
    let endpoints = json!({"metadata": meta("web", "2025-06-01T11:59:58Z"), "subsets": [{"addresses": addresses, "ports": [{"port": 80}, {"port": 443}]}]});
    assert_eq!(
        cells("", "Endpoints", endpoints),
        [json!("web"), json!("10.0.0.1:80,10.0.0.2:80,[fd00::3]:80 + 3 more..."), json!("2s")]
    );
    let headless = json!({"metadata": meta("h", NOW), "subsets": [{"addresses": [{"ip": "10.0.0.9"}]}]});
    assert_eq!(cells("", "Endpoints", headless)[1], "10.0.0.9");
    assert_eq!(cells("", "Endpoints", json!({"metadata": meta("e", NOW)}))[1], "<none>");

    let slice = json!({
        "metadata": meta("web-abc", NOW), "addressType": "IPv4",
        "ports": [{"port": 80, "name": "http"}, {"name": "named"}, {}],
        "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2", "10.0.0.3"]}, {"addresses": ["10.0.0.4"]}],
    });
    assert_eq!(
        cells("discovery.k8s.io", "EndpointSlice", slice),
        [
            json!("web-abc"),
            json!("IPv4"),
            json!("80,named,*"),
            json!("10.0.0.1,10.0.0.2,10.0.0.3 + 1 more..."),
            json!("0s")
        ]
    );
    let empty = json!({"metadata": meta("e", NOW), "addressType": "IPv6"});
    assert_eq!(cells("discovery.k8s.io", "EndpointSlice", empty)[2..4], [json!("<unset>"), json!("<unset>")]);
}

#[test]
fn event_rows() {
    assert_eq!(
        column_names("", "Event"),
        [
            ("Last Seen", 0),
            ("Type", 0),
            ("Reason", 0),
            ("Object", 0),
            ("Subobject", 1),
            ("Source", 1),
            ("Message", 0),
            ("First Seen", 1),
            ("Count", 1),
            ("Name", 1)
        ]
    );
    let event = json!({
        "metadata": meta("web.1", "2025-06-01T11:00:00Z"),
        "involvedObject": {"kind": "ReplicaSet", "name": "web-5d4f", "namespace": "default"},
        "reason": "SuccessfulCreate", "message": "Created pod: web-5d4f-x  ", "type": "Normal",
        "source": {"component": "replicaset-controller"},
        "firstTimestamp": "2025-06-01T11:00:00Z", "lastTimestamp": "2025-06-01T11:58:00Z", "count": 4,
    });
    assert_eq!(
        cells("", "Event", event),
        [
            json!("2m"),
            json!("Normal"),
            json!("SuccessfulCreate"),
            json!("replicaset/web-5d4f"),
            json!(""),
            json!("replicaset-controller"),
            json!("Created pod: web-5d4f-x"),
            json!("60m"),
            json!(4),
            json!("web.1")
        ]
    );
    let new_api = json!({
        "metadata": meta("n.2", NOW), "involvedObject": {"kind": "Node"}, "type": "Warning", "reason": "R", "message": "m",
        "eventTime": "2025-06-01T11:59:50.123456Z", "reportingComponent": "kubelet", "reportingInstance": "node-a",
        "firstTimestamp": null, "lastTimestamp": null,
    });
    assert_eq!(
        cells("", "Event", new_api.clone())[..6],
        [json!("9s"), json!("Warning"), json!("R"), json!("node"), json!(""), json!("kubelet, node-a")]
    );
    assert_eq!(cells("", "Event", new_api.clone())[8], 1);
    let mut series = new_api;
    series["series"] = json!({"count": 7, "lastObservedTime": "2025-06-01T11:59:59.000000Z"});
    let cells = cells("", "Event", series);
    assert_eq!((&cells[0], &cells[8]), (&json!("1s"), &json!(7)));
}

#[test]
fn configuration_rows() {
    let ns = json!({"metadata": {"name": "kube-system", "creationTimestamp": "2024-01-01T00:00:00Z"}, "status": {"phase": "Active"}});
    assert_eq!(cells("", "Namespace", ns), [json!("kube-system"), json!("Active"), json!("517d")]);
    let sa = json!({"metadata": meta("default", NOW), "secrets": [{"name": "t"}]});
    assert_eq!(cells("", "ServiceAccount", sa), [json!("default"), json!("0s")]);
    let secret = json!({"metadata": meta("s", NOW), "type": "Opaque", "data": {"a": "", "b": ""}});
    assert_eq!(cells("", "Secret", secret), [json!("s"), json!("Opaque"), json!(2), json!("0s")]);
    let cm = json!({"metadata": meta("c", NOW), "data": {"a": ""}, "binaryData": {"b": ""}});
    assert_eq!(cells("", "ConfigMap", cm), [json!("c"), json!(2), json!("0s")]);
    let lease = json!({"metadata": meta("kube-controller-manager", NOW), "spec": {"holderIdentity": "host_1234"}});
    assert_eq!(
        cells("coordination.k8s.io", "Lease", lease),
        [json!("kube-controller-manager"), json!("host_1234"), json!("0s")]
    );
    assert_eq!(cells("coordination.k8s.io", "Lease", json!({"metadata": meta("l", NOW), "spec": {}}))[1], "");
    let quota = json!({
        "metadata": meta("q", NOW),
        "status": {"hard": {"pods": "10", "limits.memory": "2Gi", "requests.cpu": "1", "limits.cpu": "2000m"}, "used": {"pods": "3", "requests.cpu": "500m"}},
    });
    assert_eq!(
        cells("", "ResourceQuota", quota),
        [
            json!("q"),
            json!("pods: 3/10, requests.cpu: 500m/1"),
            json!("limits.cpu: 0/2, limits.memory: 0/2Gi"),
            json!("0s")
        ]
    );
    let pdb = json!({"metadata": meta("p", NOW), "spec": {"minAvailable": "50%"}, "status": {"disruptionsAllowed": 1}});
    assert_eq!(
        cells("policy", "PodDisruptionBudget", pdb),
        [json!("p"), json!("50%"), json!("N/A"), json!(1), json!("0s")]
    );
}

fn table(include_object: IncludeObject) -> TableRequest {
    TableRequest { v1beta1: false, include_object }
}

#[test]
fn lists_become_tables_with_list_metadata() {
    let pods = resources::find("", "v1", "pods").unwrap();
    let object = pod(json!({"phase": "Pending"}));
    let list = json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "40", "continue": "abc", "remainingItemCount": 5}, "items": [object.clone()]});
    let rendered = table(IncludeObject::Metadata).render(pods, list, true, now());
    assert_eq!((rendered["kind"].as_str(), rendered["apiVersion"].as_str()), (Some("Table"), Some("meta.k8s.io/v1")));
    assert_eq!(rendered["metadata"], json!({"resourceVersion": "40", "continue": "abc", "remainingItemCount": 5}));
    assert_eq!(rendered["columnDefinitions"].as_array().unwrap().len(), 9);
    assert_eq!(
        rendered["columnDefinitions"][0],
        json!({"name": "Name", "type": "string", "format": "name", "description": super::printers::NAME_DOC, "priority": 0})
    );
    assert_eq!(rendered["columnDefinitions"][5]["priority"], 1);
    let row = &rendered["rows"][0];
    assert_eq!(row["cells"][0], "web-1");
    assert_eq!(
        row["object"],
        json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": object["metadata"]})
    );
    assert!(row.get("conditions").is_none());

    let empty = json!({"kind": "PodList", "metadata": {"resourceVersion": "41"}, "items": []});
    let rendered = table(IncludeObject::Metadata).render(pods, empty, true, now());
    assert_eq!(rendered["rows"], json!([]));
}

#[test]
fn single_objects_and_include_object_options() {
    let pods = resources::find("", "v1", "pods").unwrap();
    let object = pod(json!({"phase": "Running"}));
    let whole = table(IncludeObject::Object).render(pods, object.clone(), true, now());
    assert_eq!(whole["metadata"], json!({"resourceVersion": "12"}));
    assert_eq!(whole["rows"].as_array().unwrap().len(), 1);
    let mut typed = object.clone();
    typed["kind"] = json!("Pod");
    typed["apiVersion"] = json!("v1");
    assert_eq!(whole["rows"][0]["object"], typed);
    let list = json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": [object.clone()]});
    let whole = table(IncludeObject::Object).render(pods, list, true, now());
    assert_eq!(whole["rows"][0]["object"], typed);
    let none = table(IncludeObject::Nothing).render(pods, object.clone(), false, now());
    assert_eq!(none["rows"][0]["object"], Value::Null);
    assert_eq!(none["columnDefinitions"], Value::Null);
    let beta =
        TableRequest { v1beta1: true, include_object: IncludeObject::Metadata }.render(pods, object, true, now());
    assert_eq!(beta["apiVersion"], "meta.k8s.io/v1beta1");
    assert_eq!(beta["rows"][0]["object"]["apiVersion"], "meta.k8s.io/v1beta1");
    let status = json!({"kind": "Status", "status": "Failure", "code": 404});
    assert_eq!(table(IncludeObject::Metadata).render(pods, status.clone(), true, now()), status);
}

#[test]
fn kinds_without_a_printer_get_the_default_table() {
    let roles = resources::find("rbac.authorization.k8s.io", "v1", "roles").unwrap();
    let role =
        json!({"metadata": {"name": "reader", "creationTimestamp": "2025-06-01T11:00:00Z", "resourceVersion": "3"}});
    let rendered = table(IncludeObject::Metadata).render(roles, role, true, now());
    let columns: Vec<&str> =
        rendered["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(columns, ["Name", "Created At"]);
    assert_eq!(rendered["columnDefinitions"][1]["type"], "date");
    assert_eq!(rendered["rows"][0]["cells"], json!(["reader", "2025-06-01T11:00:00Z"]));
    let empty = table(IncludeObject::Metadata).render(
        roles,
        json!({"kind": "RoleList", "metadata": {}, "items": []}),
        true,
        now(),
    );
    assert_eq!(empty["rows"], Value::Null);
    let unset = table(IncludeObject::Metadata).render(roles, json!({"metadata": {"name": "x"}}), true, now());
    assert_eq!(unset["rows"][0]["cells"][1], "0001-01-01T00:00:00Z");
}

#[test]
fn watch_tables_send_columns_once() {
    let pods = resources::find("", "v1", "pods").unwrap();
    let watch = super::WatchTable::new(table(IncludeObject::Metadata));
    let first = watch.render(pods, pod(json!({"phase": "Pending"})));
    let second = watch.render(pods, pod(json!({"phase": "Running"})));
    assert_eq!(first["columnDefinitions"].as_array().map(Vec::len), Some(9));
    assert_eq!(second["columnDefinitions"], Value::Null);
    assert_eq!(second["rows"][0]["cells"][2], "Running");
}

fn request(query: &[(&str, &str)]) -> crate::server::http::Request {
    crate::server::http::Request {
        method: "GET".into(),
        path: "/api/v1/pods".into(),
        query: query.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        headers: vec![],
        body: vec![],
        peer_certificates: vec![],
        remote: "127.0.0.1:1".parse().unwrap(),
    }
}

#[test]
fn include_object_is_validated() {
    let parsed = |query: &[(&str, &str)]| TableRequest::from_request(&request(query), false).map(|t| t.include_object);
    assert_eq!(parsed(&[]), Ok(IncludeObject::Metadata));
    assert_eq!(parsed(&[("includeObject", "Metadata")]), Ok(IncludeObject::Metadata));
    assert_eq!(parsed(&[("includeObject", "None")]), Ok(IncludeObject::Nothing));
    assert_eq!(parsed(&[("includeObject", "Object")]), Ok(IncludeObject::Object));
    let error = parsed(&[("includeObject", "All")]).unwrap_err();
    assert_eq!((error.code, error.reason()), (400, "BadRequest"));
    assert_eq!(
        error.status["message"],
        "Unable to convert to Table as requested: includeObject: Unsupported value: \"All\": supported values: \"Metadata\", \"None\", \"Object\""
    );
}
